"""Cell and feature tables, and assay membership."""

from cytearc.metadata.table import MetaData, ReservedColumnError

__all__ = ["MetaData", "ReservedColumnError"]
