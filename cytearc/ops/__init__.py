"""Analysis operations: each reads the store through Dask and publishes an artifact.

Every operation is a function taking the :class:`~cytearc.DataStore` first;
the store's accessors (``ds.qc``, ``ds.features``, ``ds.reduce``,
``ds.graph``, ``ds.cluster``, ``ds.layout``, ``ds.markers``) call them.
"""

from cytearc.ops._base import select_measured_cells
from cytearc.ops.graph import leiden, neighbors, umap
from cytearc.ops.hvgs import hvgs
from cytearc.ops.markers import search as markers_search
from cytearc.ops.markers import table as markers_table
from cytearc.ops.normalize import normalize
from cytearc.ops.pca import pca
from cytearc.ops.qc import auto_filter, filter_cells, metrics

__all__ = [
    "auto_filter",
    "filter_cells",
    "hvgs",
    "leiden",
    "markers_search",
    "markers_table",
    "metrics",
    "neighbors",
    "normalize",
    "pca",
    "select_measured_cells",
    "umap",
]
