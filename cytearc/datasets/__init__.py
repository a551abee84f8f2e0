"""Datasets made on demand: a seeded synthetic single-cell dataset whose truth is known.

:func:`generate` returns it in memory and :func:`write_store` imports it into
a CyteArc store; :mod:`cytearc.datasets.synthetic` also writes it as 10x
Matrix Market and H5AD files.
"""

from cytearc.datasets.synthetic import SyntheticDataset, generate, write_store

__all__ = ["SyntheticDataset", "generate", "write_store"]
