"""Assays of a store: the generic :class:`Assay` and one class per modality.

:func:`assay_class` gives the class of an assay type; ``ds.assays["RNA"]``
is a :class:`RNAassay`, ``ds.assays["ADT"]`` an :class:`ADTassay`,
``ds.assays["ATAC"]`` an :class:`ATACassay`.
"""

from cytearc.assays.assay import Assay, AssayDefaults
from cytearc.assays.modalities import ADTassay, ATACassay, RNAassay, assay_class

__all__ = ["ADTassay", "ATACassay", "Assay", "AssayDefaults", "RNAassay", "assay_class"]
