"""Exports of an assay's raw counts: AnnData in memory, H5AD streamed to disk, 10x Matrix Market.

``obs`` is the cell table (index: the cell ids) without the membership
columns of other assays; ``var`` the assay's feature table (index: the
feature ids; ``names`` as ``gene_symbols``, the column scanpy's plots take
and the H5AD import reads back as names). The exported assay's membership column, when it has one, is an
ordinary ``obs`` column declared in ``uns["cytearc"]["assayMembership"]``
(``{assay: column}``), which :class:`~cytearc.io.converters.H5adToZarr`
restores; ``uns["cytearc"]`` also records the assay, its type and the
dataset and counts fingerprints.

:func:`to_h5ad` writes ``X`` as CSR band by band of whole shards sized from
the engine's budget, so its memory is one band however large the store; the
file is written beside the destination and renamed into place when it is
complete. :func:`to_mtx` cannot declare membership, so it refuses an assay
that did not measure every cell (Matrix Market's zero rows would read back
as measured cells).
"""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass
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
from cytearc.storage.destinations import validate_local_path

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cytearc.assays.assay import Assay
    from cytearc.pipeline.runner import PipelineRun
    from cytearc.storage.store import Store

__all__ = ["to_anndata", "to_h5ad", "to_mtx"]


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


def _bands(store: Store, assay: str, cells: np.ndarray | None = None) -> Iterator[sp.csr_matrix]:
    """The assay's counts (of the cells at positions ``cells``, default all) as CSR bands, one at a time."""
    counts = store.assays[assay]
    engine = store.engine
    x = counts.counts
    shard_rows = int(x.chunks[0][0])
    if cells is not None:
        x = x[cells]
    rows = aligned_rows(
        budget=engine.worker_memory(),
        row_bytes=max(counts.shape[1], 1) * 8,
        shard_rows=shard_rows,
        n_rows=int(x.shape[0]),
    )
    x = x.rechunk((rows, counts.shape[1]))
    for i in range(x.numblocks[0]):
        (block,) = engine.compute(x.blocks[i, 0].map_blocks(sp.csr_matrix, dtype=x.dtype))
        yield sp.csr_matrix(block)


@dataclass(frozen=True, kw_only=True)
class _Export:
    """What an export writes besides ``X``."""

    obs: pd.DataFrame
    var: pd.DataFrame
    uns: dict[str, Any]
    obsm: dict[str, np.ndarray]
    cells: np.ndarray | None
    """Positions of the exported cells (a run's cells), or None for every cell."""


def _run_of(store: Store, run: str) -> PipelineRun:
    from cytearc.pipeline.runner import Pipeline  # noqa: PLC0415 (the pipeline imports the operations)

    pipeline = Pipeline(store)
    try:
        return pipeline.by_label(run)
    except RunNotFoundError:
        return pipeline.open(run)


def _plan(store: Store, assay: str, run: str | None) -> _Export:
    counts = store.assays[assay]
    obs, membership = _obs(store, assay)
    var = _var(counts)
    uns = _uns(store, assay, membership)
    if run is None:
        return _Export(obs=obs, var=var, uns=uns, obsm={}, cells=None)
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
    return _Export(obs=obs, var=var, uns=uns, obsm=obsm, cells=cells)


def to_anndata(store: Store, *, assay: str = "RNA", run: str | None = None) -> ad.AnnData:
    """The assay's raw counts and the tables as an in-memory :class:`anndata.AnnData`.

    Parameters
    ----------
    store
        The store.
    assay
        The assay to export.
    run
        A completed pipeline run's label (or id): export its cells only, with
        its clusters (``obs["<assay>_leiden_cluster"]``), PCA and UMAP
        (``obsm["X_pca"]``, ``obsm["X_umap"]``) and HVGs
        (``var["highly_variable"]``).

    Returns
    -------
    anndata.AnnData
        ``X`` a CSR matrix in the storage dtype, ``obs``, ``var``, ``obsm``
        and ``uns["cytearc"]`` (see the module documentation).

    Raises
    ------
    AssayNotFoundError
        The store has no such assay.
    RunNotFoundError
        No run of that label or id.
    OperationArgumentError
        The run analysed another assay.
    """
    counts = store.assays[assay]
    plan = _plan(store, assay, run)
    bands = list(_bands(store, assay, plan.cells))
    x = sp.vstack(bands, format="csr") if bands else sp.csr_matrix(counts.shape, dtype=counts.dtype)
    return ad.AnnData(X=x, obs=plan.obs, var=plan.var, uns=plan.uns, obsm=plan.obsm)


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _refuse_existing(path: Path, *, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        msg = f"{path}: already exists; pass overwrite=True to replace it, or choose another path"
        raise DestinationExistsError(msg)


def to_h5ad(
    store: Store,
    path: str | os.PathLike[str],
    *,
    assay: str = "RNA",
    run: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the assay's raw counts and the tables as an H5AD file, streaming ``X`` band by band.

    Parameters
    ----------
    store
        The store.
    path
        The ``.h5ad`` file to write (a local path).
    assay
        The assay to export.
    run
        A completed pipeline run's label (or id), as for :func:`to_anndata`.
    overwrite
        Replace an existing file.

    Returns
    -------
    pathlib.Path
        The file.

    Raises
    ------
    DestinationExistsError
        The file exists and ``overwrite`` is False.
    RemoteDestinationError
        ``path`` is a URL.
    AssayNotFoundError
        The store has no such assay.
    """
    target = validate_local_path(path, kind="H5AD files")
    _refuse_existing(target, overwrite=overwrite)
    plan = _plan(store, assay, run)
    tmp = _temporary(target)
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["encoding-type"] = "anndata"
            f.attrs["encoding-version"] = "0.1.0"
            write_elem(f, "obs", plan.obs)
            write_elem(f, "var", plan.var)
            write_elem(f, "uns", plan.uns)
            write_elem(f, "obsm", plan.obsm)
            for name in ("varm", "obsp", "varp", "layers"):
                write_elem(f, name, {})
            x = None
            for band in _bands(store, assay, plan.cells):
                if x is None:
                    write_elem(f, "X", band)
                    x = sparse_dataset(f["X"])
                else:
                    x.append(band)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def to_mtx(
    store: Store, directory: str | os.PathLike[str], *, assay: str = "RNA", overwrite: bool = False
) -> Path:
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
        The folder to create (a local path).
    assay
        The assay to export.
    overwrite
        Replace an existing folder.

    Returns
    -------
    pathlib.Path
        The folder.

    Raises
    ------
    UnmeasuredCellsError
        The assay did not measure every cell.
    DestinationExistsError
        The folder exists and ``overwrite`` is False.
    AssayNotFoundError
        The store has no such assay.
    """
    target = validate_local_path(directory, kind="Matrix Market folders")
    counts = store.assays[assay]
    column = membership_column(store.cells, assay)
    if column is not None:
        measured = store.cells.fetch_all(column).astype(bool)
        unmeasured = int(np.count_nonzero(~measured))
        if unmeasured:
            raise UnmeasuredCellsError(
                f"{store.where}: to_mtx",
                assay,
                column,
                unmeasured,
                len(measured),
                "Matrix Market would read them back as measured cells - export with to_h5ad, "
                f"which declares the membership, or subset to the measured cells first "
                f"(SubsetZarr(..., cells={column!r}))",
            )
    _refuse_existing(target, overwrite=overwrite)
    tmp = _temporary(target)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write_mtx(store, counts, tmp, assay=assay)
        if target.exists():
            shutil.rmtree(target)
        tmp.replace(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_mtx(store: Store, counts: Assay, folder: Path, *, assay: str) -> None:
    n_cells, n_features = counts.shape
    nnz = int(counts.summary("rowPositive").sum())
    field = "real" if counts.dtype.kind == "f" else "integer"
    with gzip.open(folder / "matrix.mtx.gz", "wt", encoding="ascii") as out:
        out.write(f"%%MatrixMarket matrix coordinate {field} general\n%\n")
        out.write(f"{n_features} {n_cells} {nnz}\n")
        first = 0
        for band in _bands(store, assay):
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
