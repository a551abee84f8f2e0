"""Datasets made on demand: seeded synthetic single-cell datasets whose truth is known.

:func:`generate` returns the RNA dataset in memory and :func:`write_store`
imports it into a CyteArc store; :mod:`cytearc.datasets.synthetic` also
writes it as 10x Matrix Market and H5AD files. :func:`write_citeseq_store`
(RNA and ADT of the same cells, types that only one modality separates),
:func:`write_atac_store` (peaks with type-specific accessibility) and
:func:`write_hashtag_store` (hashtags with singlets, doublets and negatives)
write the other modalities, each with its planted truth.
"""

from cytearc.datasets.adt import generate_adt, write_citeseq_store
from cytearc.datasets.atac import generate_atac, write_atac_store
from cytearc.datasets.hashtags import generate_hashtags, write_hashtag_store
from cytearc.datasets.synthetic import SyntheticDataset, generate, write_store

__all__ = [
    "SyntheticDataset",
    "generate",
    "generate_adt",
    "generate_atac",
    "generate_hashtags",
    "write_atac_store",
    "write_citeseq_store",
    "write_hashtag_store",
    "write_store",
]
