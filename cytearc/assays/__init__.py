"""Assays of a store: :class:`Assay` and the assay type presets."""

from cytearc.assays.assay import Assay

__all__ = ["Assay"]
