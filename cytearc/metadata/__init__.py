"""Cell and feature tables, and assay membership."""

from cytearc.metadata.table import MetaData

__all__ = ["MetaData"]
