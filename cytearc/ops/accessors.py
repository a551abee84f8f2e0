"""The operation namespaces of a DataStore: ``ds.qc``, ``ds.features``, ``ds.reduce`` ..."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cytearc.ops import compare, graph, markers, qc
from cytearc.ops.hvgs import hvgs as _hvgs
from cytearc.ops.normalize import normalize as _normalize
from cytearc.ops.pca import pca as _pca

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from cytearc.artifacts import Artifact
    from cytearc.datastore import DataStore
    from cytepool import Cube

__all__ = ["Cluster", "Compare", "Features", "Graph", "Layout", "Markers", "Qc", "Reduce"]


class _Namespace:
    def __init__(self, ds: DataStore) -> None:
        self._ds = ds


class Qc(_Namespace):
    """Quality control: :func:`cytearc.ops.qc.metrics`, ``filter`` and ``auto_filter``."""

    def metrics(self, assay: str = "RNA", **options: Any) -> list[str]:
        """Write the QC cell columns of ``assay`` (see :func:`cytearc.ops.qc.metrics`)."""
        return qc.metrics(self._ds, assay, **options)

    def filter(self, bounds: Any, **options: Any) -> Artifact:  # noqa: ANN401
        """A cell selection within metric bounds (see :func:`cytearc.ops.qc.filter_cells`)."""
        return qc.filter_cells(self._ds, bounds, **options)

    def auto_filter(self, assay: str = "RNA", **options: Any) -> Artifact:
        """A cell selection by MAD outliers (see :func:`cytearc.ops.qc.auto_filter`)."""
        return qc.auto_filter(self._ds, assay, **options)


class Features(_Namespace):
    """Feature-wise operations: ``normalize`` and ``hvgs``."""

    def normalize(self, assay: str = "RNA", **options: Any) -> Artifact:
        """See :func:`cytearc.ops.normalize.normalize`."""
        return _normalize(self._ds, assay, **options)

    def hvgs(self, normalized: Any, **options: Any) -> Artifact:  # noqa: ANN401
        """See :func:`cytearc.ops.hvgs.hvgs`."""
        return _hvgs(self._ds, normalized, **options)


class Reduce(_Namespace):
    """Dimension reduction: ``pca``."""

    def pca(self, normalized: Any, hvgs: Any, **options: Any) -> Artifact:  # noqa: ANN401
        """See :func:`cytearc.ops.pca.pca`."""
        return _pca(self._ds, normalized, hvgs, **options)


class Graph(_Namespace):
    """Cell graphs: ``neighbors``."""

    def neighbors(self, pca: Any, **options: Any) -> Artifact:  # noqa: ANN401
        """See :func:`cytearc.ops.graph.neighbors`."""
        return graph.neighbors(self._ds, pca, **options)


class Cluster(_Namespace):
    """Clustering: ``leiden``."""

    def leiden(self, neighbors: Any, **options: Any) -> Artifact:  # noqa: ANN401
        """See :func:`cytearc.ops.graph.leiden`."""
        return graph.leiden(self._ds, neighbors, **options)


class Layout(_Namespace):
    """Layouts: ``umap``."""

    def umap(self, neighbors: Any, **options: Any) -> Artifact:  # noqa: ANN401
        """See :func:`cytearc.ops.graph.umap`."""
        return graph.umap(self._ds, neighbors, **options)


class Markers(_Namespace):
    """Markers: ``search`` and ``table``."""

    def search(self, assay: str = "RNA", **options: Any) -> Artifact:
        """See :func:`cytearc.ops.markers.search`."""
        return markers.search(self._ds, assay, **options)

    def table(self, markers_ref: Any, **options: Any) -> pd.DataFrame:  # noqa: ANN401
        """See :func:`cytearc.ops.markers.table`."""
        return markers.table(self._ds, markers_ref, **options)


class Compare(_Namespace):
    """Pseudobulk: ``compute_bulk`` (a cube with lazy layers) and ``write_bulk``."""

    def compute_bulk(self, assay: str = "RNA", **options: Any) -> Cube:
        """See :func:`cytearc.ops.compare.compute_bulk`."""
        return compare.compute_bulk(self._ds, assay, **options)

    def write_bulk(
        self,
        path: str | Path,
        assay: str = "RNA",
        *,
        compression: str | None = "gzip",
        overwrite: bool = False,
        **options: Any,
    ) -> Path:
        """Pool and write the cube to ``path`` on the store's engine; returns the path."""
        from cytepool import write_cube  # noqa: PLC0415

        cube = compare.compute_bulk(self._ds, assay, **options)
        with self._ds.engine.activate():
            return write_cube(
                cube,
                path,
                compression=compression,  # type: ignore[arg-type]
                overwrite=overwrite,
                progress=self._ds.show_progress,
            )
