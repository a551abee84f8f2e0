"""Analysis operations: each reads the store through Dask and publishes an artifact.

Every operation is a function taking the store first (any
:class:`~cytearc.storage.store.AnalysisStore`, such as a
:class:`~cytearc.DataStore`); the store's namespaces (``ds.qc``,
``ds.features``, ``ds.reduce``, ``ds.graph``, ``ds.cluster``,
``ds.embedding``, ``ds.markers``, ``ds.compare``, ``ds.integration``) bind them
(:mod:`cytearc.ops.namespaces`).
"""

from typing import TYPE_CHECKING, Final

from cytepool._lazy import lazy_exports

if TYPE_CHECKING:
    from cytearc.ops.clustering import leiden
    from cytearc.ops.compare import compute_bulk, write_bulk
    from cytearc.ops.detection import detected
    from cytearc.ops.embedding import umap
    from cytearc.ops.harmony import harmony
    from cytearc.ops.hto import hto_calls, hto_demultiplexing
    from cytearc.ops.hvgs import hvgs
    from cytearc.ops.lsi import lsi, prevalent_peaks
    from cytearc.ops.markers import search as markers_search
    from cytearc.ops.markers import table as markers_table
    from cytearc.ops.neighbors import neighbors
    from cytearc.ops.normalize import normalize, normalized_values
    from cytearc.ops.pca import pca
    from cytearc.ops.qc import auto_filter, feature_percentage, filter_cells, metrics
    from cytearc.ops.selection import select_measured_cells
    from cytearc.ops.wnn import modalities

__all__ = [
    "auto_filter",
    "compute_bulk",
    "detected",
    "feature_percentage",
    "filter_cells",
    "harmony",
    "hto_calls",
    "hto_demultiplexing",
    "hvgs",
    "leiden",
    "lsi",
    "markers_search",
    "markers_table",
    "metrics",
    "modalities",
    "neighbors",
    "normalize",
    "normalized_values",
    "pca",
    "prevalent_peaks",
    "select_measured_cells",
    "umap",
    "write_bulk",
]


_EXPORTS: Final = {
    "leiden": "cytearc.ops.clustering",
    "compute_bulk": "cytearc.ops.compare",
    "write_bulk": "cytearc.ops.compare",
    "detected": "cytearc.ops.detection",
    "umap": "cytearc.ops.embedding",
    "harmony": "cytearc.ops.harmony",
    "hto_calls": "cytearc.ops.hto",
    "hto_demultiplexing": "cytearc.ops.hto",
    "hvgs": "cytearc.ops.hvgs",
    "lsi": "cytearc.ops.lsi",
    "prevalent_peaks": "cytearc.ops.lsi",
    "markers_search": "cytearc.ops.markers:search",
    "markers_table": "cytearc.ops.markers:table",
    "neighbors": "cytearc.ops.neighbors",
    "normalize": "cytearc.ops.normalize",
    "normalized_values": "cytearc.ops.normalize",
    "pca": "cytearc.ops.pca",
    "auto_filter": "cytearc.ops.qc",
    "feature_percentage": "cytearc.ops.qc",
    "filter_cells": "cytearc.ops.qc",
    "metrics": "cytearc.ops.qc",
    "select_measured_cells": "cytearc.ops.selection",
    "modalities": "cytearc.ops.wnn",
}
"""Imported on first use (:func:`~cytepool._lazy.lazy_exports`): a worker that runs one operation's tasks loads only its module."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
