"""DataStore: opens a CyteArc store, its assays, and its cell and feature tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import zarr
from zarr.storage import FsspecStore, LocalStore

from cytearc.artifacts import Artifact, ArtifactRef, Lineage, lineage, list_artifacts, open_artifact
from cytearc.assays.types import RNA_TYPES, check_assay_types, resolve_assay_type
from cytearc.engine.arrays import open_lazy
from cytearc.engine.cluster import Engine, get_engine
from cytearc.errors import AssayTypeError, CyteArcError, LayoutError, StoreFormatError
from cytearc.io.importer import STORE_FORMAT, STORE_FORMAT_VERSION
from cytearc.metadata.table import MetaData
from cytearc.ops.accessors import Cluster, Compare, Features, Graph, Layout, Markers, Qc, Reduce
from cytearc.storage.counts import LAYOUT_ATTRIBUTE
from cytearc.storage.layout import CountLayout

if TYPE_CHECKING:
    from collections.abc import Mapping

    import dask.array as da

    from cytearc.pipeline.runner import Pipeline
    from cytearc.plots.store import StorePlots

__all__ = ["Assay", "DataStore"]

_MODES: Final = ("r", "r+")


def _open_root(
    location: str | Path, *, mode: str, storage_options: Mapping[str, Any] | None
) -> tuple[zarr.Group, str]:
    read_only = mode == "r"
    if isinstance(location, Path) or "://" not in str(location):
        path = Path(location)
        if not (path / "zarr.json").is_file():
            msg = f"{path}: no CyteArc store here (no zarr.json); check the path or import a dataset first"
            raise FileNotFoundError(msg)
        store: Any = LocalStore(path, read_only=read_only)
        where = str(path)
    else:
        store = FsspecStore.from_url(
            str(location), storage_options=dict(storage_options or {}), read_only=read_only
        )
        where = str(location)
    node = zarr.open(store=store, mode=mode, zarr_format=3)  # type: ignore[arg-type]
    if not isinstance(node, zarr.Group):
        msg = f"{where}: expected a Zarr v3 group at the root, found an array"
        raise StoreFormatError(msg)
    return node, where


class Assay:
    """One assay of a store: its type, feature table, and count arrays as lazy Dask arrays."""

    def __init__(
        self, *, name: str, assay_type: str, root: zarr.Group, where: str, writable: bool
    ) -> None:
        self.name = name
        self.assayType = assay_type
        self.where = f"{where}/{name}"
        group = _group(root, name, where=where)
        self.features = MetaData(
            _group(group, "featureData", where=self.where),
            dimension="feature",
            where=f"{self.where}/featureData",
            writable=writable,
        )
        self.matrix = _group(_group(root, "matrices", where=where), name, where=f"{where}/matrices")
        self.layout = CountLayout.from_json(
            self.matrix.attrs.get(LAYOUT_ATTRIBUTE), where=f"{where}/matrices/{name}"
        )
        self._counts = self._count_array("counts", shape=None)
        n_cells, n_features = self._counts.shape
        if n_features != self.features.n_rows:
            msg = f"{self.where}: counts has {n_features} features, the feature table {self.features.n_rows}"
            raise StoreFormatError(msg)
        self._counts_t = None
        if assay_type in RNA_TYPES:
            self._counts_t = self._count_array("countsT", shape=(n_features, n_cells))
            if self._counts_t.dtype != self._counts.dtype:
                msg = f"{self.where}: countsT has dtype {self._counts_t.dtype}, counts {self._counts.dtype}; re-import the store"
                raise StoreFormatError(msg)
        self._check_summaries()

    def _count_array(self, name: str, *, shape: tuple[int, int] | None) -> zarr.Array[Any]:
        where = f"{self.where}: {name}"
        if name not in set(self.matrix.array_keys()):
            remedy = "re-import the source, or run python -m cytearc.tools.repack_zarr IN OUT --data-only"
            msg = f"{where} is missing; an {self.assayType} assay needs it - {remedy}"
            raise StoreFormatError(msg)
        array = self.matrix[name]
        if (
            not isinstance(array, zarr.Array)
            or array.metadata.zarr_format != 3
            or array.shards is None
        ):
            msg = f"{where} must be a sharded Zarr v3 array; re-import the store"
            raise StoreFormatError(msg)
        if shape is not None and tuple(array.shape) != shape:
            msg = f"{where} has shape {tuple(array.shape)}, expected {shape} (counts transposed)"
            raise StoreFormatError(msg)
        recorded = CountLayout.from_json(array.attrs.get(LAYOUT_ATTRIBUTE), where=where)
        if recorded != self.layout:
            msg = f"{where}: layout {recorded.to_json()} disagrees with the matrix group's {self.layout.to_json()}"
            raise LayoutError(msg)
        rows, cols = array.shape
        expected = self.layout.array_layout((rows, cols), itemsize=np.dtype(array.dtype).itemsize)
        if (tuple(array.shards), tuple(array.chunks)) != (expected.shards, expected.chunks):
            msg = f"{where}: shards {array.shards} and chunks {array.chunks} are not the layout's {expected.shards} and {expected.chunks}"
            raise LayoutError(msg)
        return array

    def _check_summaries(self) -> None:
        fingerprint = self._counts.attrs.get("content_fingerprint")
        summaries = self.matrix.get("countSummaries")
        if (
            not isinstance(summaries, zarr.Group)
            or summaries.attrs.get("source_fingerprint") != fingerprint
        ):
            msg = f"{self.where}: countSummaries are missing or bound to other counts; rebuild the store with repack_zarr --data-only"
            raise StoreFormatError(msg)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)`` of the counts."""
        n_cells, n_features = self._counts.shape
        return (n_cells, n_features)

    @property
    def dtype(self) -> np.dtype:
        """The storage dtype of ``counts`` and ``countsT``."""
        return np.dtype(self._counts.dtype)

    @property
    def content_fingerprint(self) -> str:
        """The identity of the counts (see :mod:`cytearc.storage.identity`)."""
        return str(self._counts.attrs["content_fingerprint"])

    @property
    def counts(self) -> da.Array:
        """Cells x features, lazy, one block per shard."""
        return open_lazy(self._counts)

    @property
    def countsT(self) -> da.Array:  # noqa: N802 (the store's array name)
        """Features x cells, lazy, one block per shard (RNA-type assays)."""
        if self._counts_t is None:
            msg = f"{self.where}: a {self.assayType} assay has no countsT"
            raise AttributeError(msg)
        return open_lazy(self._counts_t)

    def feature_rows(self, features: np.ndarray) -> np.ndarray:
        """The counts of a few features over every cell, ``(len(features), n_cells)``.

        Read from ``countsT`` with an orthogonal selection, so only the inner
        chunks that hold these features are fetched and decoded (a handful of
        genes reads a fraction of a percent of the matrix).
        """
        if self._counts_t is None:
            msg = f"{self.where}: a {self.assayType} assay has no countsT to read features from"
            raise AttributeError(msg)
        rows = np.asarray(features, dtype=np.int64)
        if not len(rows):
            return np.zeros((0, self.shape[0]), dtype=self.dtype)
        return np.asarray(self._counts_t.get_orthogonal_selection((rows, slice(None))))

    def summary(self, name: str) -> np.ndarray:
        """A count summary: ``rowSums``, ``rowPositive`` or ``columnPositive``."""
        array = _group(self.matrix, "countSummaries", where=self.where).get(name)
        if not isinstance(array, zarr.Array):
            msg = f"{self.where}/countSummaries: no summary {name!r}; expected rowSums, rowPositive or columnPositive"
            raise KeyError(msg)
        return np.asarray(array[:])

    def __repr__(self) -> str:
        return f"<Assay {self.name} ({self.assayType}): {self._counts.shape[0]} cells x {self._counts.shape[1]} features, {self._counts.dtype}>"


def _group(parent: zarr.Group, name: str, *, where: str) -> zarr.Group:
    node = parent.get(name)
    if not isinstance(node, zarr.Group):
        msg = f"{where}/{name}: expected a group; the store is incomplete - re-import it"
        raise StoreFormatError(msg)
    return node


class DataStore:
    """A CyteArc store, opened for reading (default) or writing.

    Parameters
    ----------
    location
        A local path or an fsspec URL (``s3://bucket/ds.zarr``).
    mem_budget, workers, cluster
        The engine the store's computations run on (see :mod:`cytearc.engine`);
        no cluster starts until something is computed.
    assay_types
        Presets for assays whose names are not presets, or to override.
    zarr_mode
        ``"r"`` (default; reading never changes a byte) or ``"r+"``.
    storage_options
        For fsspec URLs (``{"endpoint_url": ..., "key": ..., "secret": ...}``).
    show_progress
        Progress bars on long computations.
    """

    def __init__(
        self,
        location: str | Path,
        *,
        mem_budget: str | int | float | None = None,
        workers: int | str | None = None,
        cluster: object = None,
        assay_types: Mapping[str, str] | None = None,
        zarr_mode: str = "r",
        storage_options: Mapping[str, Any] | None = None,
        show_progress: bool = True,
    ) -> None:
        if zarr_mode not in _MODES:
            msg = f"zarr_mode: expected 'r' or 'r+', found {zarr_mode!r}"
            raise CyteArcError(msg)
        self.writable = zarr_mode == "r+"
        self.show_progress = show_progress
        self._engine_options = (mem_budget, workers, cluster)
        self.root, self.where = _open_root(
            location, mode=zarr_mode, storage_options=storage_options
        )
        attrs = dict(self.root.attrs)
        if (
            attrs.get("cytearc:format") != STORE_FORMAT
            or attrs.get("cytearc:formatVersion") != STORE_FORMAT_VERSION
        ):
            msg = f"{self.where}: not a CyteArc store of format {STORE_FORMAT} {STORE_FORMAT_VERSION} (found {attrs.get('cytearc:format')!r} {attrs.get('cytearc:formatVersion')!r})"
            raise StoreFormatError(msg)
        if attrs.get("cytearc:complete") is not True:
            msg = f"{self.where}: the import that created this store did not finish; import it again (overwrite=True)"
            raise StoreFormatError(msg)
        names = [n for n, g in self.root.groups() if g.attrs.get("is_assay") is True]
        for name in names:
            if "state" in set(_group(self.root, name, where=self.where).group_keys()):
                msg = f"{self.where}/{name}/state: the former assay state document is not supported; re-import or rebuild the dataset"
                raise StoreFormatError(msg)
        self.assay_types = self._resolve_types(attrs.get("assayTypes"), set(names), assay_types)
        self.cells = MetaData(
            _group(self.root, "cellData", where=self.where),
            dimension="cell",
            where=f"{self.where}/cellData",
            reserved=lambda: {f"{n}_I" for n in self.assay_types},
            writable=self.writable,
        )
        self.assays = {
            name: Assay(
                name=name,
                assay_type=self.assay_types[name],
                root=self.root,
                where=self.where,
                writable=self.writable,
            )
            for name in sorted(names)
        }
        for assay in self.assays.values():
            if assay.shape[0] != self.cells.n_rows:
                msg = f"{assay.where}: counts has {assay.shape[0]} cells, the cell table {self.cells.n_rows}"
                raise StoreFormatError(msg)

    def _resolve_types(
        self, recorded: object, names: set[str], explicit: Mapping[str, str] | None
    ) -> dict[str, str]:
        if recorded is None:
            recorded = {}
        if not isinstance(recorded, dict):
            msg = f"{self.where}: attribute 'assayTypes' must map assays to presets, found {recorded!r}; open with zarr_mode='r+' and assay_types for every assay to replace it"
            raise AssayTypeError(msg)
        given = check_assay_types(explicit, names, where=self.where)
        if not self.writable:
            for name, value in given.items():
                if recorded.get(name) not in (None, value):
                    msg = f"{self.where}: assay {name!r} is recorded as {recorded[name]!r}; a read-only open cannot record {value!r} - open once with zarr_mode='r+'"
                    raise AssayTypeError(msg)
        types = {
            n: resolve_assay_type(
                n, explicit=given.get(n), recorded=recorded.get(n), where=self.where
            )
            for n in sorted(names)
        }
        if self.writable and types != recorded:
            self.root.attrs["assayTypes"] = types
        return types

    @property
    def engine(self) -> Engine:
        """The engine computations run on, started (or reused) on first use."""
        mem_budget, workers, cluster = self._engine_options
        return get_engine(mem_budget=mem_budget, workers=workers, cluster=cluster)

    @property
    def dataset_fingerprint(self) -> str:
        """Identity of the cell ids, each assay's feature ids and names and its counts."""
        return str(self.root.attrs["cytearc:datasetFingerprint"])

    def __getattr__(self, name: str) -> Assay:
        assays = self.__dict__.get("assays", {})
        if name in assays:
            return assays[name]  # type: ignore[no-any-return]
        msg = f"{type(self).__name__!r} has no attribute or assay {name!r}"
        raise AttributeError(msg)

    def select_measured_cells(self, assay: str, cell_selection: Any = None) -> ArtifactRef:  # noqa: ANN401
        """The cells of ``cell_selection`` (default: the ``I`` column) that ``assay`` measured.

        A datastore ``cell_selection`` artifact (the prior selection itself
        when the assay measured all of it); see
        :func:`cytearc.ops.select_measured_cells`.
        """
        from cytearc.ops import select_measured_cells  # noqa: PLC0415 (ops import the store)

        return select_measured_cells(self, assay, cell_selection)

    def list_artifacts(self, kind: str | None = None) -> list[Artifact]:
        """Published artifacts of the datastore and its assays, oldest first."""
        return list_artifacts(self.root, scopes=["", *self.assays], kind=kind)

    def load_artifact(self, ref: ArtifactRef | str) -> Artifact:
        """A published artifact; an unpublished or missing one fails closed."""
        return open_artifact(self.root, ref)

    def lineage(self, ref: ArtifactRef | str) -> Lineage:
        """The chain of artifacts ``ref`` was computed from (prints as a tree)."""
        return lineage(self.root, ref)

    @property
    def qc(self) -> Qc:
        """Quality control: ``metrics``, ``filter``, ``auto_filter``."""
        return Qc(self)

    @property
    def features(self) -> Features:
        """``normalize`` and ``hvgs``."""
        return Features(self)

    @property
    def reduce(self) -> Reduce:
        """``pca``."""
        return Reduce(self)

    @property
    def graph(self) -> Graph:
        """``neighbors``."""
        return Graph(self)

    @property
    def cluster(self) -> Cluster:
        """``leiden``."""
        return Cluster(self)

    @property
    def layout(self) -> Layout:
        """``umap``."""
        return Layout(self)

    @property
    def markers(self) -> Markers:
        """``search`` and ``table``."""
        return Markers(self)

    @property
    def compare(self) -> Compare:
        """Pseudobulk: ``compute_bulk`` pools cells into a CytePool cube, ``write_bulk`` writes it."""
        return Compare(self)

    @property
    def plots(self) -> StorePlots:
        """Plots of the store's results: ``qc``, ``umap``, ``markers``."""
        from cytearc.plots.store import StorePlots  # noqa: PLC0415 (matplotlib loads on use)

        return StorePlots(self)

    @property
    def pipeline(self) -> Pipeline:
        """Recipes and their recorded runs: ``run``, ``runs``, ``open``, ``abandon_label_claim``."""
        from cytearc.pipeline.runner import Pipeline  # noqa: PLC0415 (the pipeline imports the ops)

        return Pipeline(self)

    def __repr__(self) -> str:
        assays = ", ".join(repr(a) for a in self.assays.values())
        return f"<DataStore {self.where}: {self.cells.n_rows} cells; {assays}>"
