"""Exceptions of pipeline records, run lookups and label claims."""

from __future__ import annotations

from cytearc.errors import CyteArcError

__all__ = [
    "AtomicClaimUnsupportedError",
    "LabelClaimBlockedError",
    "LabelClaimError",
    "LabelTakenError",
    "PipelineRecordError",
    "RunNotFoundError",
]


class PipelineRecordError(CyteArcError):
    """A run, stage or label-claim document is missing a field, has an unknown one, or a wrong value."""


class RunNotFoundError(CyteArcError):
    """No run of that ID is stored (never created, or removed)."""


class LabelClaimError(CyteArcError):
    """A run label cannot be claimed, or a claim cannot be abandoned."""


class LabelTakenError(LabelClaimError):
    """The label belongs to a completed run; choose another label."""


class LabelClaimBlockedError(LabelClaimError):
    """The label's current owner is incomplete (running, crashed, or unreadable), or a concurrent claim won."""


class AtomicClaimUnsupportedError(LabelClaimError):
    """The store cannot create a key atomically only if it is absent, so labels cannot be claimed safely."""
