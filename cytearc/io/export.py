"""Exports of an assay's counts or normalized values: AnnData in memory, H5AD streamed to disk, 10x Matrix Market.

``obs`` is the cell table (index: the cell ids) without the membership
columns of other assays; ``var`` the assay's feature table (index: the
feature ids; ``names`` as ``gene_symbols``, the column scanpy's plots take
and the H5AD import reads back as names). The exported assay's membership column, when it has one, is an
ordinary ``obs`` column declared in ``uns["cytearc"]["assayMembership"]``
(``{assay: column}``), which :class:`~cytearc.io.converters.H5adToZarr`
restores; ``uns["cytearc"]`` also records the assay, its type, the
dataset and counts fingerprints, ``matrix`` (``"counts"`` or ``"normed"``,
with ``normalization`` naming the run's artifact or the method), and
``layers`` (``{layer: assay}``: raw counts of assays with the exported
assay's features, which cannot declare membership, so an assay that did not
measure every exported cell is refused as a layer).

:func:`to_h5ad` writes ``X`` as CSR band by band of whole shards sized from
the engine's budget, so its memory is one band however large the store; the
file is written beside the destination and renamed into place when it is
complete, or, for an fsspec URL, written in ``TMPDIR`` and uploaded as one
object. :func:`to_mtx` cannot declare membership, so it refuses an assay
that did not measure every cell (Matrix Market's zero rows would read back
as measured cells).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import scipy.sparse as sp
from anndata.io import sparse_dataset, write_elem

from cytearc.engine.arrays import aligned_rows
from cytearc.errors import (
    DestinationExistsError,
    OperationArgumentError,
    RunNotFoundError,
    UnmeasuredCellsError,
)
from cytearc.metadata.membership import membership_column
from cytearc.storage.destinations import writable_location

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import dask.array as da

    from cytearc.assays.assay import Assay
    from cytearc.pipeline.runner import PipelineRun
    from cytearc.storage.store import Store
    from cytepool.locations import Location

__all__ = ["to_anndata", "to_h5ad", "to_mtx"]

_MATRICES = ("counts", "normed")


def _obs(store: Store, assay: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The cell table for ``obs``, and the membership declaration of ``assay``."""
    own = membership_column(store.cells, assay)
    others = {membership_column(store.cells, name) for name in store.assays if name != assay}
    columns = [c for c in store.cells.columns if c != "ids" and c not in others]
    frame = pd.DataFrame({c: store.cells.fetch_series(c) for c in columns})
    frame.index = pd.Index(store.cells.fetch_all("ids").astype(str), name=None)
    return frame, ({assay: own} if own is not None else {})


def _var(counts: Assay) -> pd.DataFrame:
    """The feature table for ``var``; ``names`` is written as scanpy's ``gene_symbols``."""
    columns = [c for c in counts.features.columns if c != "ids"]
    frame = pd.DataFrame(
        {"gene_symbols" if c == "names" else c: counts.features.fetch_series(c) for c in columns}
    )
    frame.index = pd.Index(counts.features.fetch_all("ids").astype(str), name=None)
    return frame


def _uns(store: Store, assay: str, membership: dict[str, str]) -> dict[str, Any]:
    counts = store.assays[assay]
    return {
        "cytearc": {
            "assay": assay,
            "assayType": counts.assayType,
            "assayMembership": membership,
            "datasetFingerprint": store.dataset_fingerprint,
            "countsFingerprint": counts.content_fingerprint,
        }
    }


def _bands(store: Store, x: da.Array, *, shard_rows: int) -> Iterator[sp.csr_matrix]:
    """``x`` (cells x features) as CSR bands of whole ``shard_rows`` sized from the budget, one at a time."""
    engine = store.engine
    rows = aligned_rows(
        budget=engine.worker_memory(),
        row_bytes=max(int(x.shape[1]), 1) * 8,
        shard_rows=shard_rows,
        n_rows=int(x.shape[0]),
    )
    x = x.rechunk((rows, int(x.shape[1])))
    for i in range(x.numblocks[0]):
        (block,) = engine.compute(x.blocks[i, 0].map_blocks(sp.csr_matrix, dtype=x.dtype))
        yield sp.csr_matrix(block)


@dataclass(frozen=True, kw_only=True)
class _Matrix:
    """One exported matrix: its lazy values (exported cells x features) and the rows of its unit."""

    values: da.Array
    shard_rows: int

    def bands(self, store: Store) -> Iterator[sp.csr_matrix]:
        return _bands(store, self.values, shard_rows=self.shard_rows)


def _counts_matrix(counts: Assay, cells: np.ndarray | None) -> _Matrix:
    x = counts.counts
    return _Matrix(values=x if cells is None else x[cells], shard_rows=int(x.chunks[0][0]))


@dataclass(frozen=True, kw_only=True)
class _Export:
    """What an export writes besides ``X``."""

    obs: pd.DataFrame
    var: pd.DataFrame
    uns: dict[str, Any]
    obsm: dict[str, np.ndarray]
    cells: np.ndarray | None
    """Positions of the exported cells (a run's cells), or None for every cell."""
    x: _Matrix
    layers: dict[str, _Matrix]


def _run_of(store: Store, run: str) -> PipelineRun:
    from cytearc.pipeline.runner import Pipeline  # noqa: PLC0415 (the pipeline imports the operations)

    pipeline = Pipeline(store)
    try:
        return pipeline.by_label(run)
    except RunNotFoundError:
        return pipeline.open(run)


def _layer_assays(
    store: Store, assay: str, layers: Mapping[str, str] | Sequence[str] | None
) -> dict[str, str]:
    """``layers`` as ``{layer: assay}``, each an assay of the exported assay's features, checked."""
    if layers is None:
        return {}
    chosen = dict(layers) if isinstance(layers, Mapping) else {name: name for name in layers}
    ids = store.assays[assay].features.fetch_all("ids")
    for layer, source in chosen.items():
        if not layer or "/" in layer:
            msg = f"layers: layer name {layer!r} is not a non-empty string without '/'; rename it"
            raise OperationArgumentError(msg)
        other = store.assays[source].features.fetch_all("ids")
        if len(other) != len(ids) or not np.array_equal(other, ids):
            msg = f"{store.where}: layers: assay {source!r} ({len(other)} features) does not have the features of {assay!r} ({len(ids)}) in the same order; a layer holds the exported assay's features - export {source!r} on its own"
            raise OperationArgumentError(msg)
    return chosen


def _refuse_unmeasured(
    store: Store, source: str, cells: np.ndarray | None, *, operation: str, remedy: str
) -> None:
    """Raise when ``source`` did not measure every exported cell (a layer or MTX cannot declare it)."""
    column = membership_column(store.cells, source)
    if column is None:
        return
    measured = store.cells.fetch_all(column).astype(bool)
    if cells is not None:
        measured = measured[cells]
    unmeasured = int(np.count_nonzero(~measured))
    if unmeasured:
        raise UnmeasuredCellsError(
            f"{store.where}: {operation}", source, column, unmeasured, len(measured), remedy
        )


def _run_normed(
    store: Store, recorded: PipelineRun, cells: np.ndarray
) -> tuple[_Matrix, dict[str, Any]]:
    """The run's ``normalized`` values, one row per exported cell."""
    from cytearc.ops.normalize import normalized_values  # noqa: PLC0415 (the operations import the store)

    artifact = recorded.artifact("normalized")
    values = normalized_values(store, artifact)
    if values.shape[0] != len(cells):
        msg = f"{store.where}: run {recorded.run_id}: its normalized values hold {values.shape[0]} cells, its cell selection {len(cells)}; the run's records are damaged - run `cytearc verify`"
        raise OperationArgumentError(msg)
    return _Matrix(values=values, shard_rows=int(values.chunks[0][0])), {
        "artifact": str(artifact.ref),
        **artifact.parameters,
    }


def _normed(store: Store, assay: str) -> tuple[_Matrix, dict[str, Any]]:
    """The assay type's normalization of every cell, computed band by band as exported."""
    from cytearc.ops.normalize import normalized_graph, tfidf_idf  # noqa: PLC0415 (the operations import the store)

    counts = store.assays[assay]
    shard_rows = int(counts.counts.chunks[0][0])
    method = counts.defaults.normalization
    rows = np.arange(counts.shape[0])
    idf = None
    if method == "tfidf":
        measured = store.cells.fetch_all(membership_column(store.cells, assay) or "I").astype(bool)
        x = counts.counts.rechunk({1: -1})[np.flatnonzero(measured)]
        (sums,) = store.engine.compute(x.sum(axis=0, dtype=np.float64))
        idf = tfidf_idf(np.asarray(sums, dtype=np.float64), n_cells=int(measured.sum()))
    log1p = method != "none"
    values = normalized_graph(counts, rows, method=method, target_sum=1e4, log1p=log1p, idf=idf)
    return _Matrix(values=values, shard_rows=shard_rows), {
        "method": method,
        "targetSum": None if method in {"clr", "none"} else 1e4,
        "log1p": log1p,
    }


def _plan(
    store: Store,
    assay: str,
    run: str | None,
    *,
    matrix: str = "counts",
    layers: Mapping[str, str] | Sequence[str] | None = None,
) -> _Export:
    if matrix not in _MATRICES:
        msg = f"matrix: expected one of {list(_MATRICES)}, found {matrix!r}; pass one of them"
        raise OperationArgumentError(msg)
    counts = store.assays[assay]
    chosen = _layer_assays(store, assay, layers)
    obs, membership = _obs(store, assay)
    var = _var(counts)
    uns = _uns(store, assay, membership)
    obsm: dict[str, np.ndarray] = {}
    cells = None
    recorded = None
    if run is not None:
        recorded = _run_of(store, run)
        if recorded.record.assay != assay:
            msg = f"{store.where}: run {run!r} analysed assay {recorded.record.assay}, not {assay}; export assay={recorded.record.assay!r}"
            raise OperationArgumentError(msg)
        cells = np.flatnonzero(recorded.artifact("cells").read("mask").astype(bool))
        obs = obs.iloc[cells].drop(columns=list(membership.values()), errors="ignore")
        labels = recorded.artifact("clustering").read("labels")
        obs[f"{assay}_leiden_cluster"] = pd.Categorical(
            labels.astype(str), categories=[str(c) for c in sorted(set(labels.tolist()))]
        )
        var["highly_variable"] = recorded.artifact("hvgs").read("highly_variable").astype(bool)
        uns["cytearc"] = {
            **uns["cytearc"],
            "assayMembership": {},
            "run": {"runId": recorded.run_id, "label": recorded.record.label or ""},
        }
        obsm = {
            "X_pca": np.asarray(recorded.artifact("pca").read("coords"), dtype=np.float32),
            "X_umap": np.asarray(recorded.artifact("umap").read("coords"), dtype=np.float32),
        }
    for source in chosen.values():
        if source != assay:
            _refuse_unmeasured(
                store,
                source,
                cells,
                operation="layers",
                remedy="a layer cannot declare membership - export that assay on its own, or "
                "subset to the cells it measured first",
            )
    x = _counts_matrix(counts, cells)
    uns["cytearc"] = {**uns["cytearc"], "matrix": matrix, "layers": chosen}
    if matrix == "normed":
        x, normalization = (
            _normed(store, assay)
            if recorded is None or cells is None
            else _run_normed(store, recorded, cells)
        )
        uns["cytearc"]["normalization"] = normalization
    return _Export(
        obs=obs,
        var=var,
        uns=uns,
        obsm=obsm,
        cells=cells,
        x=x,
        layers={
            layer: _counts_matrix(store.assays[source], cells) for layer, source in chosen.items()
        },
    )


def _in_memory(store: Store, part: _Matrix) -> sp.csr_matrix:
    bands = list(part.bands(store))
    if bands:
        return sp.vstack(bands, format="csr")
    return sp.csr_matrix(part.values.shape, dtype=part.values.dtype)


def to_anndata(
    store: Store,
    *,
    assay: str = "RNA",
    matrix: str = "counts",
    run: str | None = None,
    layers: Mapping[str, str] | Sequence[str] | None = None,
) -> ad.AnnData:
    """The assay's raw counts (or normalized values) and the tables as an in-memory :class:`anndata.AnnData`.

    Parameters
    ----------
    store
        The store.
    assay
        The assay to export.
    matrix
        ``"counts"`` (the raw counts, in the storage dtype) or ``"normed"``:
        with ``run``, the run's ``normalized`` values; without, the assay
        type's normalization (``log1p`` of counts scaled to 10,000 per cell
        for RNA, CLR for ADT and HTO, TF-IDF for ATAC) as float32.
        ``uns["cytearc"]["normalization"]`` records which.
    run
        A completed pipeline run's label (or id): export its cells only, with
        its clusters (``obs["<assay>_leiden_cluster"]``), PCA and UMAP
        (``obsm["X_pca"]``, ``obsm["X_umap"]``) and HVGs
        (``var["highly_variable"]``).
    layers
        Raw counts to add as ``layers``: ``{layer: assay}``, or assay names
        (each layer named by its assay). Each assay must have the exported
        assay's features in the same order (``spliced`` and ``unspliced``
        of a loom import, or the assay itself, ``{"counts": "RNA"}``, next
        to ``matrix="normed"``), and must have measured every exported cell.

    Returns
    -------
    anndata.AnnData
        ``X`` a CSR matrix, ``obs``, ``var``, ``obsm``, ``layers`` and
        ``uns["cytearc"]`` (see the module documentation).

    Raises
    ------
    AssayNotFoundError
        The store has no such assay (exported, or named by ``layers``).
    RunNotFoundError
        No run of that label or id.
    OperationArgumentError
        The run analysed another assay, ``matrix`` is unknown, or a layer's
        assay has other features.
    UnmeasuredCellsError
        A layer's assay did not measure every exported cell.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=200, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, cluster="threads", show_progress=False)
    >>> adata = ds.to_anndata(matrix="normed", layers={"counts": "RNA"})
    >>> adata.X.dtype, adata.layers["counts"].dtype.kind, adata.uns["cytearc"]["matrix"]
    (dtype('float32'), 'u', 'normed')
    """
    plan = _plan(store, assay, run, matrix=matrix, layers=layers)
    return ad.AnnData(
        X=_in_memory(store, plan.x),
        obs=plan.obs,
        var=plan.var,
        uns=plan.uns,
        obsm=plan.obsm,
        layers={name: _in_memory(store, part) for name, part in plan.layers.items()},
    )


def _refuse_existing(target: Location, *, overwrite: bool) -> None:
    if target.exists() and not overwrite:
        msg = f"{target}: already exists; pass overwrite=True to replace it, or choose another path"
        raise DestinationExistsError(msg)


@contextlib.contextmanager
def _publishing(target: Location, *, folder: bool, overwrite: bool) -> Iterator[Path]:
    """A temporary local file (or folder) to write; published at ``target`` when the block ends.

    Locally it is a hidden sibling renamed into place. On an object store it
    is written in ``TMPDIR`` and uploaded: a file as one object, which S3
    shows only once the upload completes; a folder's files one by one (after
    any old folder is removed), the Matrix Market matrix last.
    """
    _refuse_existing(target, overwrite=overwrite)
    if target.path is not None:
        tmp = target.path.with_name(f".{target.path.name}.tmp-{os.getpid()}")
        _remove(tmp)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="cytearc-export-")) / target.name
    if folder:
        tmp.mkdir(parents=True)
    try:
        yield tmp
        if target.path is not None:
            if folder and target.path.exists():
                shutil.rmtree(target.path)
            tmp.replace(target.path)
            return
        fs, path = target.filesystem()
        if not folder:
            fs.put_file(str(tmp), path)
            return
        if fs.exists(path):
            fs.rm(path, recursive=True)
        for name in sorted(p.name for p in tmp.iterdir()):
            if name != "matrix.mtx.gz":
                fs.put_file(str(tmp / name), f"{path}/{name}")
        fs.put_file(str(tmp / "matrix.mtx.gz"), f"{path}/matrix.mtx.gz")
    finally:
        _remove(tmp if target.path is not None else tmp.parent)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def to_h5ad(
    store: Store,
    path: str | os.PathLike[str],
    *,
    assay: str = "RNA",
    matrix: str = "counts",
    run: str | None = None,
    layers: Mapping[str, str] | Sequence[str] | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Write the assay's raw counts (or normalized values) and the tables as an H5AD file, streamed.

    ``X`` and each layer are written as CSR band by band of whole shards
    sized from the engine's budget, so memory is one band however large the
    store. Everything is checked before the file is written.

    Parameters
    ----------
    store
        The store.
    path
        The ``.h5ad`` file to write: a local path or an fsspec URL.
    assay
        The assay to export.
    matrix
        ``"counts"`` or ``"normed"``, as for :func:`to_anndata`.
    run
        A completed pipeline run's label (or id), as for :func:`to_anndata`.
    layers
        Raw counts of assays with the same features, as for :func:`to_anndata`.
    overwrite
        Replace an existing file.
    storage_options
        The fsspec options of a URL ``path``.

    Returns
    -------
    pathlib.Path or str
        The file (its URL when it was written to one).

    Raises
    ------
    DestinationExistsError
        The file exists and ``overwrite`` is False.
    RemoteDestinationError
        ``path`` is on a read-only protocol (``http(s)://``).
    AssayNotFoundError
        The store has no such assay.
    OperationArgumentError, UnmeasuredCellsError
        As for :func:`to_anndata`.
    """
    target = writable_location(path, storage_options=storage_options, kind="H5AD files")
    _refuse_existing(target, overwrite=overwrite)
    plan = _plan(store, assay, run, matrix=matrix, layers=layers)
    with _publishing(target, folder=False, overwrite=overwrite) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["encoding-type"] = "anndata"
        f.attrs["encoding-version"] = "0.1.0"
        write_elem(f, "obs", plan.obs)
        write_elem(f, "var", plan.var)
        write_elem(f, "uns", plan.uns)
        write_elem(f, "obsm", plan.obsm)
        for name in ("varm", "obsp", "varp", "layers"):
            write_elem(f, name, {})
        _stream(store, f, "X", plan.x)
        for name, part in plan.layers.items():
            _stream(store, f, f"layers/{name}", part)
    return target.path or str(target)


def _stream(store: Store, f: h5py.File, key: str, part: _Matrix) -> None:
    """Write ``part`` as the CSR element ``key``, one band at a time."""
    written = None
    for band in part.bands(store):
        if written is None:
            write_elem(f, key, band)
            written = sparse_dataset(f[key])
        else:
            written.append(band)
    if written is None:
        write_elem(f, key, sp.csr_matrix(part.values.shape, dtype=part.values.dtype))


def to_mtx(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    assay: str = "RNA",
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Write the assay as a 10x Matrix Market folder (``matrix.mtx.gz``, ``features.tsv.gz``, ``barcodes.tsv.gz``).

    The matrix is features x cells, as 10x writes it; entries are written
    band by band of cells. Matrix Market cannot declare assay membership, so
    an assay that did not measure every cell is refused before anything is
    written.

    Parameters
    ----------
    store
        The store.
    directory
        The folder to create: a local path or an fsspec URL.
    assay
        The assay to export.
    overwrite
        Replace an existing folder.
    storage_options
        The fsspec options of a URL ``directory``.

    Returns
    -------
    pathlib.Path or str
        The folder (its URL when it was written to one).

    Raises
    ------
    UnmeasuredCellsError
        The assay did not measure every cell.
    DestinationExistsError
        The folder exists and ``overwrite`` is False.
    AssayNotFoundError
        The store has no such assay.
    """
    target = writable_location(
        directory, storage_options=storage_options, kind="Matrix Market folders"
    )
    counts = store.assays[assay]
    _refuse_unmeasured(
        store,
        assay,
        None,
        operation="to_mtx",
        remedy="Matrix Market would read them back as measured cells - export with to_h5ad, "
        "which declares the membership, or subset to the measured cells first "
        f"(SubsetZarr(..., cells={membership_column(store.cells, assay)!r}))",
    )
    with _publishing(target, folder=True, overwrite=overwrite) as tmp:
        _write_mtx(store, counts, tmp, assay=assay)
    return target.path or str(target)


def _write_mtx(store: Store, counts: Assay, folder: Path, *, assay: str) -> None:
    n_cells, n_features = counts.shape
    nnz = int(counts.summary("rowPositive").sum())
    field = "real" if counts.dtype.kind == "f" else "integer"
    with gzip.open(folder / "matrix.mtx.gz", "wt", encoding="ascii") as out:
        out.write(f"%%MatrixMarket matrix coordinate {field} general\n%\n")
        out.write(f"{n_features} {n_cells} {nnz}\n")
        first = 0
        for band in _counts_matrix(counts, None).bands(store):
            coo = band.tocoo()
            keep = coo.data != 0
            entries = pd.DataFrame(
                {
                    "feature": coo.col[keep] + 1,
                    "cell": coo.row[keep] + first + 1,
                    "value": coo.data[keep],
                }
            )
            entries.to_csv(out, sep=" ", header=False, index=False, float_format="%.17g")
            first += band.shape[0]
    features = counts.features
    types = (
        features.fetch_all("feature_types").astype(str)
        if "feature_types" in features.columns
        else np.full(
            n_features, "Gene Expression" if counts.assayType == "RNA" else counts.assayType
        )
    )
    names = (
        features.fetch_all("names").astype(str)
        if "names" in features.columns
        else features.fetch_all("ids").astype(str)
    )
    with gzip.open(folder / "features.tsv.gz", "wt", encoding="utf-8") as out:
        for row in zip(features.fetch_all("ids").astype(str), names, types, strict=True):
            out.write("\t".join(row) + "\n")
    with gzip.open(folder / "barcodes.tsv.gz", "wt", encoding="utf-8") as out:
        for barcode in store.cells.fetch_all("ids").astype(str):
            out.write(f"{barcode}\n")
