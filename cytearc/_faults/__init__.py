"""The implementation of :mod:`cytearc.faults`: verdicts, tree and source mutations, kill points."""
