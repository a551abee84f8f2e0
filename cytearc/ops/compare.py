"""``compare.compute_bulk``: pool the cells of a store into a CytePool cube.

For every (group, sample) pair, summed over its selected cells and per
feature: ``counts``, ``detected`` (cells with a non-zero count), and of the
library-size normalized values ``v = x / rowSums * target_sum``:
``linear_sum`` (sum of ``v``), ``log_sum`` (sum of ``log1p(v)``) and
``log_sum_sq`` (sum of ``log1p(v)**2``), with ``n_cells``. The layers are lazy
Dask arrays: one task per band of whole ``countsT`` shards (features over
every cell) computes its features' sums for every pair from the non-zero values
(compiled loops that add in ``numpy.bincount``'s order), so the matrix is
read once and no partial sums travel between tasks (assays without
``countsT`` add up ``counts`` shards in a fixed tree); the cube's values and
fingerprint are the same on every scheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import dask.array as da
import numpy as np
import pandas as pd
from dask.delayed import delayed

from cytearc.artifacts import ArtifactRef
from cytearc.engine.arrays import map_row_pieces, streams_pieces
from cytearc.errors import OperationArgumentError
from cytearc.metadata.membership import MEMBERSHIP_ROLE
from cytearc.metadata.table import GENERATED_ATTRIBUTE
from cytearc.ops.arguments import parse_cell_column, parse_choice, parse_float
from cytearc.ops.pool_blocks import (
    INTEGER_LAYERS,
    LAYERS,
    VALUE_LAYERS,
    _band_layer,
    _pool_block,
    _pool_pieces,
)
from cytearc.ops.publication import values_digest
from cytearc.ops.selection import (
    SelectionLike,
    group_labels,
    publish_selection,
    read_measured_mask,
)
from cytearc.storage.counts import BAND_BYTES
from cytearc.storage.destinations import writable_location
from cytepool import Cube, write_cube
from cytepool._versions import package_version
from cytepool.codecs import CUBE_COMPRESSIONS
from cytepool.locations import as_location

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    import zarr

    from cytearc.assays import Assay
    from cytearc.storage.store import AnalysisStore
    from cytepool.codecs import CubeCompression

__all__ = ["INTEGER_LAYERS", "VALUE_LAYERS", "compute_bulk", "pooled_layers", "write_bulk"]

STREAMED_BAND_BYTES: Final = 192 * 2**20
"""Stored values of ``countsT`` a pooling task streams through, at most (unless one shard is larger)."""
MIN_BANDS: Final = 16
"""Pooling bands of a streamed ``countsT``, at least (unless it has fewer shards)."""


def _band_bytes(matrix: zarr.Array[Any] | da.Array, n_codes: int) -> int:
    """Stored bytes of values per pooling band of ``countsT``.

    A stored matrix in CyteArc's layout streams through its band a megabyte
    at a time, so its bands are up to :data:`STREAMED_BAND_BYTES` (fewer
    tasks and results), in at least :data:`MIN_BANDS` bands for the workers
    to share, and with sums of at most :data:`BAND_BYTES`; any other matrix
    is read band by band whole, up to :data:`BAND_BYTES`.
    """
    if not streams_pieces(matrix):
        return BAND_BYTES
    row_bytes = matrix.shape[1] * matrix.dtype.itemsize
    rows = min(-(-matrix.shape[0] // MIN_BANDS), BAND_BYTES // (len(LAYERS) * n_codes * 8))
    return max(1, min(STREAMED_BAND_BYTES, rows * row_bytes))


def _pooled_bands(
    source: Assay, codes: np.ndarray, *, n_groups: int, n_samples: int, target_sum: float
) -> dict[str, da.Array]:
    matrix = source.row_source("countsT")
    n_codes = n_groups * n_samples
    sums = map_row_pieces(
        matrix,
        _pool_pieces,
        rows_out=None,
        tail=(len(LAYERS), n_codes),
        dtype=np.float64,
        target_bytes=_band_bytes(matrix, n_codes),
        library=source.summary("rowSums").astype(np.float64),
        codes=np.asarray(codes, np.int64),
        n_codes=n_codes,
        target_sum=target_sum,
    )
    # The band's (5, n_codes) axes are named as the layer's one-block (group, sample) axes,
    # resized by adjust_chunks: with no contracted axis, a map_blocks over a layer (a cube's
    # checks) fuses into this task instead of running as a second task and an alias.
    return {
        name: da.blockwise(
            _band_layer,
            "gsf",
            sums,
            "fgs",
            adjust_chunks={"g": n_groups, "s": n_samples},
            dtype=np.int64 if name in INTEGER_LAYERS else np.float64,
            i=i,
            n_groups=n_groups,
            n_samples=n_samples,
        )
        for i, name in enumerate(LAYERS)
    }


def pooled_layers(
    source: Assay, codes: np.ndarray, *, n_groups: int, n_samples: int, target_sum: float
) -> dict[str, da.Array]:
    """Lazy sums per (group, sample) pair, by layer name.

    Each layer is ``(n_groups, n_samples, n_features)``: ``counts`` and
    ``detected`` int64, ``linear_sum``, ``log_sum`` and ``log_sum_sq``
    float64. Building them reads nothing. An assay with ``countsT`` is
    pooled band by band of features, each task owning its features' sums
    outright (one read of the matrix, nothing to add up between tasks) and
    each layer's block a slice of its result, taken in one task with
    whatever a caller maps over the layer's blocks; others by ``counts``
    shards added up in a fixed tree.

    Parameters
    ----------
    source
        The assay.
    codes
        One pair code per cell, ``group * n_samples + sample``, or -1 for a
        cell not pooled.
    n_groups, n_samples
        The number of groups and of samples.
    target_sum
        The library size of the normalized values.

    Returns
    -------
    dict of str to dask.array.Array
        The layers :data:`INTEGER_LAYERS` and :data:`VALUE_LAYERS`, as above.

    Raises
    ------
    OperationArgumentError
        No cell has a code (for an assay without ``countsT``).
    """
    if source.stores_transpose:
        return _pooled_bands(
            source, codes, n_groups=n_groups, n_samples=n_samples, target_sum=target_sum
        )
    n_codes = n_groups * n_samples
    counts = source.counts.rechunk({1: -1})
    library = source.summary("rowSums").astype(np.float64)
    n_features = source.shape[1]
    starts = np.cumsum((0, *counts.chunks[0]))
    ints, floats = [], []
    for i, block in enumerate(counts.to_delayed().ravel()):
        rows = slice(int(starts[i]), int(starts[i + 1]))
        if not (codes[rows] >= 0).any():
            continue
        part = delayed(_pool_block, nout=2)(
            block, library[rows], codes[rows], n_codes=n_codes, target_sum=target_sum
        )
        ints.append(da.from_delayed(part[0], shape=(1, 2, n_codes, n_features), dtype=np.int64))
        floats.append(da.from_delayed(part[1], shape=(1, 3, n_codes, n_features), dtype=np.float64))
    if not ints:
        msg = f"{source.where}: compute_bulk: expected cells with a sample and a group to pool, found none; check sample_key, group_key and cell_selection"
        raise OperationArgumentError(msg)
    integers: da.Array = da.concatenate(ints).sum(axis=0, split_every=4)
    values: da.Array = da.concatenate(floats).sum(axis=0, split_every=4)
    shape = (n_groups, n_samples, n_features)
    layers = {name: integers[i].reshape(shape) for i, name in enumerate(INTEGER_LAYERS)}
    return layers | {name: values[i].reshape(shape) for i, name in enumerate(VALUE_LAYERS)}


def _labels(
    ds: AnalysisStore, key: str, mask: np.ndarray, *, name: str, operation: str
) -> tuple[np.ndarray, np.ndarray]:
    """Labels of a cell column as text (whole floats without a decimal point), and who has one.

    A float column with a fractional value is refused: it holds measurements,
    not labels, and would pool one group per distinct value.
    """
    values, valid = group_labels(ds, key)
    if values.dtype.kind == "f":
        fractional = valid & mask & (values != np.floor(np.where(valid, values, 0.0)))
        if fractional.any():
            example = values[np.flatnonzero(fractional)[0]]
            msg = (
                f"{ds.where}: {operation}: {name} {key!r} is a float column with fractional values "
                f"(such as {example:g}), so each value would be a group of its own; pass a text, "
                "categorical or integer column (bin numbers first, e.g. with pandas.cut)"
            )
            raise OperationArgumentError(msg)
    text = [
        str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for v in values.tolist()
    ]
    return np.asarray(text, dtype=object), valid & mask


def _order(labels: np.ndarray) -> list[str]:
    unique = sorted(set(labels.tolist()))
    if all(u.lstrip("-").isdigit() for u in unique):
        return sorted(unique, key=int)
    return unique


def _sample_table(
    ds: AnalysisStore, sample_key: str, labels: np.ndarray, order: list[str], mask: np.ndarray
) -> pd.DataFrame:
    """The samples, with every cell column that is constant within each sample."""
    table: dict[str, Any] = {"sample": order}
    position = {s: i for i, s in enumerate(order)}
    idx = np.asarray([position[s] for s in labels[mask]])
    for column in ds.cells.columns:
        if column in {"ids", "I", sample_key}:
            continue
        attrs = ds.cells.attributes(column)
        if attrs.get("role") == MEMBERSHIP_ROLE or GENERATED_ATTRIBUTE in attrs:
            continue
        values = ds.cells.fetch_all(column)[mask]
        if values.dtype.kind in "OTUS":
            values = values.astype(object)
        frame = pd.DataFrame({"s": idx, "v": values})
        firsts = frame.groupby("s", sort=True)["v"].agg(["first", "nunique"])
        if (firsts["nunique"] <= 1).all() and len(firsts) == len(order):
            table[column] = firsts["first"].to_numpy()
    return pd.DataFrame(table)


def compute_bulk(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    sample_key: str,
    group_key: str,
    cell_selection: SelectionLike = None,
    target_sum: float = 1e4,
) -> Cube:
    """Pool the selected cells by (group, sample) into a cube with lazy layers.

    Cells without a sample or group label (empty text, NaN or a negative
    number) are left out. The sample table holds every cell column that is
    constant within each sample; the group table the labels and their cell
    totals; the feature table ``ids`` and ``names``. ``source`` records the
    tool, dataset and counts fingerprints, assay, keys, the cell selection
    (a ``cell_selection`` artifact on a writable store, else the key column
    read) and the fingerprint of the pooled cells, and where the memberships
    are in the store. A read-only store is only read.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose counts are pooled.
    sample_key
        The cell column naming each cell's sample (such as a donor and
        condition); a cell without a label is not pooled.
    group_key
        The cell column naming each cell's group (such as
        ``RNA_leiden_cluster``); a cell without a label is not pooled.
    cell_selection
        The cells to pool: a ``cell_selection`` artifact or its ref, the name
        of a boolean cell column, a boolean mask over every cell, or None for
        ``I``.
    target_sum
        The library size of the normalized values (``linear_sum``,
        ``log_sum``, ``log_sum_sq``).

    Returns
    -------
    cytepool.Cube
        The cube, groups x samples x features; its layers are lazy until it
        is written (:func:`write_bulk`) or computed.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    OperationArgumentError
        ``sample_key`` or ``group_key`` is not a cell column (or is a float
        column with fractional values), ``target_sum``
        is not a positive number, ``cell_selection`` is malformed, or no
        selected cell has both labels.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay``; pass
        ``cell_selection=ds.select_measured_cells(assay)``.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=300, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> cube = ds.compare.compute_bulk(sample_key="sample", group_key="cell_type")
    >>> cube.shape, cube.samples.columns.tolist()
    ((8, 12, 600), ['sample', 'donor', 'condition'])
    >>> int(cube.n_cells.sum())
    300
    """
    operation = "compare.compute_bulk"
    source = ds.assays[assay]
    parse_cell_column(ds, sample_key, name="sample_key", operation=operation)
    parse_cell_column(ds, group_key, name="group_key", operation=operation)
    target_sum = parse_float(target_sum, name="target_sum", operation=operation, positive=True)
    mask = read_measured_mask(ds, assay, cell_selection, operation=operation)
    samples, has_sample = _labels(ds, sample_key, mask, name="sample_key", operation=operation)
    groups, has_group = _labels(ds, group_key, mask, name="group_key", operation=operation)
    pooled = has_sample & has_group
    if not pooled.any():
        msg = f"{ds.where}: {operation}: no selected cell has both a {sample_key!r} and a {group_key!r} label"
        raise OperationArgumentError(msg)
    if (
        ds.writable
        or isinstance(cell_selection, ArtifactRef)
        or (isinstance(cell_selection, str) and "/" in cell_selection)
    ):
        ref = str(publish_selection(ds, cell_selection).ref)
    else:
        key = cell_selection if isinstance(cell_selection, str) else None
        ref = (
            f"cellData/{key or 'I'}"
            if cell_selection is None or key
            else f"mask {values_digest(mask)}"
        )
    sample_order, group_order = _order(samples[pooled]), _order(groups[pooled])
    s_pos = {s: i for i, s in enumerate(sample_order)}
    g_pos = {g: i for i, g in enumerate(group_order)}
    n_s, n_g = len(sample_order), len(group_order)
    codes = np.full(ds.cells.n_rows, -1, dtype=np.int64)
    rows = np.flatnonzero(pooled)
    codes[rows] = [
        g_pos[g] * n_s + s_pos[s] for g, s in zip(groups[rows], samples[rows], strict=True)
    ]
    n_cells = np.bincount(codes[rows], minlength=n_g * n_s).reshape(n_g, n_s).T
    layers = pooled_layers(source, codes, n_groups=n_g, n_samples=n_s, target_sum=float(target_sum))
    features = source.features
    return Cube(
        samples=_sample_table(ds, sample_key, samples, sample_order, pooled),
        groups=pd.DataFrame({"group": group_order, "n_cells": n_cells.sum(axis=0)}),
        features=pd.DataFrame(
            {
                "id": features.fetch_all("ids").astype(object),
                "name": features.fetch_all("names").astype(object),
            }
        ),
        layers=layers,
        n_cells=n_cells,
        normalization={
            "method": "library_size",
            "targetSum": float(target_sum),
            "librarySize": "rowSums of the counts over all features",
            "layers": {
                "linear_sum": "sum of x / librarySize * targetSum",
                "log_sum": "sum of log1p(x / librarySize * targetSum)",
                "log_sum_sq": "sum of log1p(x / librarySize * targetSum)**2",
            },
        },
        source={
            "tool": "cytearc",
            "version": package_version("cytearc"),
            "datasetFingerprint": ds.dataset_fingerprint,
            "countsFingerprint": source.content_fingerprint,
            "assay": assay,
            "sampleKey": sample_key,
            "groupKey": group_key,
            "cellSelection": {
                "ref": ref,
                "fingerprint": values_digest(pooled),
                "nCells": int(pooled.sum()),
            },
            "memberships": {
                "cellTable": "cellData",
                "cellIds": "cellData/ids",
                "sampleColumn": f"cellData/{sample_key}",
                "groupColumn": f"cellData/{group_key}",
                "selection": f"{ref}/mask" if ref.count("/") >= 2 else ref,
                "rule": "cells of the selection with a sample and a group label",
            },
        },
    )


def write_bulk(
    ds: AnalysisStore,
    path: str | Path,
    assay: str = "RNA",
    *,
    sample_key: str,
    group_key: str,
    cell_selection: SelectionLike = None,
    target_sum: float = 1e4,
    compression: CubeCompression = "gzip",
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Pool the selected cells with :func:`compute_bulk` and write the cube on the store's engine.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    path
        Where the cube is written (by convention ``<name>.cube.zarr``): a
        local path or an fsspec URL.
    assay
        The assay whose counts are pooled.
    sample_key
        The cell column naming each cell's sample (such as a donor and
        condition); a cell without a label is not pooled.
    group_key
        The cell column naming each cell's group (such as
        ``RNA_leiden_cluster``); a cell without a label is not pooled.
    cell_selection
        The cells to pool: a ``cell_selection`` artifact or its ref, the name
        of a boolean cell column, a boolean mask over every cell, or None for
        ``I``.
    target_sum
        The library size of the normalized values (``linear_sum``,
        ``log_sum``, ``log_sum_sq``).
    compression
        ``"gzip"`` (default), ``"zstd"`` or None (see :func:`cytepool.write_cube`).
    overwrite
        Replace a cube at ``path``.
    storage_options
        The fsspec options of a URL ``path`` (never recorded).

    Returns
    -------
    pathlib.Path or str
        The cube's path (its URL when it was written to one).

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    OperationArgumentError
        ``compression`` is unknown, ``sample_key`` or ``group_key`` is not a
        cell column or is a float column with fractional values,
        ``target_sum`` is not a positive number, ``cell_selection`` is
        malformed, no selected cell has both labels, or ``path`` is inside
        the store.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay``; pass
        ``cell_selection=ds.select_measured_cells(assay)``.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.
    cytepool.errors.CubeExistsError
        A cube is at ``path`` and ``overwrite`` is False.
    RemoteDestinationError
        ``path`` is on a read-only protocol (``http(s)://``).
    """
    operation = "compare.write_bulk"
    parse_choice(compression, CUBE_COMPRESSIONS, name="compression", operation=operation)
    location = writable_location(path, storage_options=storage_options, kind="cubes")
    if location.overlaps(as_location(ds.where)):
        msg = f"{location}: {operation}: the cube would be written inside the store {ds.where}; write it beside the store"
        raise OperationArgumentError(msg)
    cube = compute_bulk(
        ds,
        assay,
        sample_key=sample_key,
        group_key=group_key,
        cell_selection=cell_selection,
        target_sum=target_sum,
    )
    with ds.engine.activate():
        return write_cube(
            cube,
            location.path or str(location),
            compression=compression,
            overwrite=overwrite,
            progress=ds.show_progress,
            storage_options=location.storage_options,
        )
