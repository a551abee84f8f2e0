"""Analysis operations: each reads the store through Dask and publishes an artifact.

Every operation is a function taking the store first (any
:class:`~cytearc.storage.store.AnalysisStore`, such as a
:class:`~cytearc.DataStore`); the store's namespaces (``ds.qc``,
``ds.features``, ``ds.reduce``, ``ds.graph``, ``ds.cluster``,
``ds.embedding``, ``ds.markers``, ``ds.compare``, ``ds.integration``) bind them
(:mod:`cytearc.ops.namespaces`).
"""

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
