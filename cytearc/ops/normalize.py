"""``features.normalize``: normalized values of the selected cells, with per-feature moments.

The method is the assay class's (:mod:`cytearc.assays.modalities`) unless
``method=`` names another. For a cell of counts ``x`` over ``m`` features,
library size ``L = rowSums`` (all features) and ``n`` selected cells:

``library_size`` (RNA types)
    ``log1p(x / L * target_sum)`` (scanpy's ``normalize_total`` + ``log1p``;
    without ``log1p`` when ``log1p=False``).
``clr`` (ADT, HTO)
    The centred log ratio of each cell, ``log1p(x / exp(sum(log1p(x)) / m))``:
    Seurat's ``NormalizeData(normalization.method = "CLR", margin = 2)``
    (its ``log1p(x / exp(sum(log1p(x[x > 0])) / length(x)))``, equal since
    ``log1p(0) = 0``).
``tfidf`` (ATAC)
    Log TF-IDF, Signac's ``RunTFIDF(method = 1)`` and muon's
    ``tfidf(log_tf=False, log_idf=False, log_tfidf=True)``:
    ``log1p(x / L * idf * target_sum)`` with ``idf = n / colSums`` (the sum
    of each feature's counts over the *selected* cells, so unmeasured cells
    never count; 0 for a feature without counts, whose values are all 0).
``none`` (the generic type)
    The counts themselves as float32 (``log1p`` not taken).

The artifact stores how to rebuild the values from the immutable ``counts``
(the selected ``rows``, the method's parameters and, for TF-IDF, ``idf``)
and the per-feature statistics; :func:`normalized_values` rebuilds them
lazily, bit for bit, where a later stage reads them. ``store_values=True``
also stores them as ``data``, the seed's dense layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from cytearc.assays.modalities import assay_class
from cytearc.engine.arrays import map_row_pieces, take_rows
from cytearc.errors import NegativeCountsError, StaleArtifactError
from cytearc.ops.arguments import parse_bool, parse_choice, parse_float
from cytearc.ops.normalized_blocks import (
    _CSR_META,
    BAND_STATISTICS,
    _band_statistics,
    _csr_band,
    _csr_block,
    _fold_band_statistics,
    _normalize_band,
    _normalize_pieces,
    _packed_moments,
    merge_band_statistics,
    piece_statistics,
)
from cytearc.ops.publication import reuse_or_publish
from cytearc.ops.selection import SelectionLike, publish_measured_selection, read_measured_mask

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.assays import Assay
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "DATA_CHUNK_BYTES",
    "FOLD_EVERY",
    "METHODS",
    "TFIDF_REVISION",
    "band_statistics",
    "block_moments",
    "default_method",
    "folded_band_statistics",
    "normalize",
    "normalized_cells",
    "normalized_graph",
    "normalized_values",
    "tfidf_idf",
]

DATA_CHUNK_BYTES: Final = 16 * 2**20
"""Target bytes of one chunk of normalized ``data`` (unsharded, rows x all features)."""

METHODS: Final = ("library_size", "clr", "tfidf", "none")
"""The normalizations of :func:`normalize` (see the module docstring)."""

TFIDF_REVISION: Final = 2
"""The revision of TF-IDF artifacts: 2 since the IDF is Signac's ``n / colSums`` (was ``n / (1 + detected)``)."""


def default_method(assay_type: str) -> str:
    """The normalization of an assay type: its class's (:mod:`cytearc.assays.modalities`).

    Parameters
    ----------
    assay_type
        The assay's preset (``RNA``, ``ADT``, ``ATAC``, ...).

    Returns
    -------
    str
        ``"library_size"`` (RNA types), ``"clr"`` (ADT, HTO), ``"tfidf"``
        (ATAC) or ``"none"`` (the generic type).

    Examples
    --------
    >>> [default_method(t) for t in ("GeneActivity", "HTO", "ATAC", "CRISPR")]
    ['library_size', 'clr', 'tfidf', 'none']
    """
    return assay_class(assay_type).defaults.normalization


def band_statistics(x: da.Array) -> da.Array:
    """Per row block of normalized values: their moments, those of ``expm1``, and the non-zeros.

    One pass over each block's non-zero entries (the zeros add nothing to a
    sum); computed with the write of ``x`` it shares ``x``'s tasks.
    :func:`~cytearc.ops.normalized_blocks.merge_band_statistics` merges the blocks in row order.

    Parameters
    ----------
    x
        A lazy 2-D array (rows x columns) of normalized values.

    Returns
    -------
    dask.array.Array
        float64, ``(BAND_STATISTICS * n_row_blocks, n_columns)``.
    """
    whole = x.rechunk({1: -1})
    stats: da.Array = da.map_blocks(
        _band_statistics,
        whole,
        dtype=np.float64,
        chunks=((BAND_STATISTICS,) * len(whole.chunks[0]), (x.shape[1],)),
    )
    return stats


FOLD_EVERY: Final = 32
"""Bands of statistics one task of :func:`folded_band_statistics` merges into the running ones."""


def folded_band_statistics(statistics: da.Array) -> da.Array:
    """:func:`band_statistics` merged on the workers, in row order, into one band's worth.

    A chain of tasks, each merging the next :data:`FOLD_EVERY` bands into
    the running statistics one after another, exactly as
    :func:`~cytearc.ops.normalized_blocks.merge_band_statistics` merges all of them at once (the same
    bits): the client receives 11 rows of values per feature, not 11 per
    feature and band (1.8 GB at a million cells in 977 bands of 20,000
    features). An array graph, so computed with a write of the values it
    shares their tasks.

    Parameters
    ----------
    statistics
        :func:`band_statistics` (or
        :func:`~cytearc.ops.normalized_blocks.normalized_statistics` per band), lazy.

    Returns
    -------
    dask.array.Array
        The merged statistics, one block of ``(BAND_STATISTICS, n_columns)``,
        for :func:`~cytearc.ops.normalized_blocks.merge_band_statistics`.

    Examples
    --------
    >>> x = da.from_array(np.arange(12.0).reshape(6, 2), chunks=(2, 2))
    >>> folded = folded_band_statistics(band_statistics(x)).compute(scheduler="sync")
    >>> merge_band_statistics(folded)[0].total.tolist()
    [30.0, 36.0]
    """
    token = tokenize(statistics, FOLD_EVERY)
    chain, out = f"fold-band-statistics-{token}", f"folded-band-statistics-{token}"
    parts = [(statistics.name, i, 0) for i in range(statistics.numblocks[0])]
    graph: dict[Any, Any] = {}
    for step, first in enumerate(range(0, len(parts), FOLD_EVERY)):
        running = [(chain, step - 1)] if step else []
        graph[(chain, step)] = (
            _fold_band_statistics,
            *running,
            *parts[first : first + FOLD_EVERY],
        )
    graph[(out, 0, 0)] = (chain, len(graph) - 1)
    # dask's annotations do not count its Array as a DaskCollection
    layers = HighLevelGraph.from_collections(out, graph, dependencies=[statistics])  # type: ignore[list-item]
    return da.Array(
        layers, out, chunks=((BAND_STATISTICS,), (statistics.shape[1],)), dtype=np.float64
    )


def block_moments(x: da.Array) -> da.Array:
    """The moments of each row block of ``x``, packed (:meth:`ColumnMoments.pack`) and stacked.

    An array graph, so computed together with a write of ``x`` it shares
    ``x``'s tasks (each block is read and normalized once);
    :meth:`ColumnMoments.merge_packed` merges the bands in row order.

    Parameters
    ----------
    x
        A lazy 2-D array (rows x columns).

    Returns
    -------
    dask.array.Array
        The packed moments of each row block, in row order: float64,
        ``(5 * n_row_blocks, n_columns)``.
    """
    whole = x.rechunk({1: -1})
    n_blocks = len(whole.chunks[0])
    packed: da.Array = da.map_blocks(
        _packed_moments,
        whole,
        dtype=np.float64,
        chunks=((5,) * n_blocks, (x.shape[1],)),
    )
    return packed


def data_chunk_rows(n_rows: int, n_features: int) -> int:
    """Rows per chunk of normalized data.

    Parameters
    ----------
    n_rows, n_features
        The shape of ``data``.

    Returns
    -------
    int
        Rows whose float32 values fill about :data:`DATA_CHUNK_BYTES` (at
        least 1, at most ``n_rows``).
    """
    return max(1, min(n_rows, DATA_CHUNK_BYTES // max(1, 4 * n_features)))


def normalized_graph(
    source: Assay,
    rows: np.ndarray,
    *,
    method: str,
    target_sum: float,
    log1p: bool,
    idf: np.ndarray | None = None,
    features: np.ndarray | None = None,
) -> da.Array:
    """The lazy normalized values of ``rows`` of an assay: one block per ``counts`` shard.

    Builds a graph only; nothing is read until it is computed.

    Parameters
    ----------
    source
        The assay.
    rows
        The cells, in increasing order.
    method, target_sum, log1p, idf
        As in :func:`~cytearc.ops.normalized_blocks.normalized_block`.
    features
        Only these feature columns (None: all). A value depends only on its
        count, its cell's library size and its feature's ``idf``, so the
        other columns are not normalized, except by ``"clr"``, whose
        per-cell mean needs every feature; each shard is then read a piece
        of cells at a time (:func:`~cytearc.engine.arrays.map_row_pieces`)
        and only these columns are kept, so no task holds the shard's dense
        counts of every feature.

    Returns
    -------
    dask.array.Array
        The normalized values (float32), ``len(rows)`` x all features (or
        ``features``).
    """
    if features is not None and method != "clr":
        selected = np.asarray(features, dtype=np.int64)
        values = map_row_pieces(
            source.row_source("counts"),
            _normalize_pieces,
            source.summary("rowSums"),
            rows_out=None,
            tail=(len(selected),),
            dtype=np.float32,
            features=selected,
            method=method,
            target_sum=target_sum,
            log1p=log1p,
            idf=None if idf is None else idf[selected],
        )
        return take_rows(values, rows)
    counts, library = _counts_and_library(source, rows)
    data: da.Array = da.map_blocks(
        _normalize_band,
        counts,
        library[:, None],
        method=method,
        target_sum=target_sum,
        log1p=log1p,
        idf=idf,
        dtype=np.float32,
    )
    return data if features is None else data[:, features]


def _counts_and_library(source: Assay, rows: np.ndarray) -> tuple[da.Array, da.Array]:
    """The counts of ``rows`` (one block per ``counts`` shard, all features) and their library sizes."""
    counts = take_rows(source.counts.rechunk({1: -1}), rows)
    library = da.from_array(source.summary("rowSums")[rows], chunks=(counts.chunks[0],))
    return counts, library


def normalized_cells(normalized: Artifact) -> int:
    """The number of cells (rows) of a ``normalized`` artifact.

    Parameters
    ----------
    normalized
        A ``normalized`` artifact.

    Returns
    -------
    int
        Its selected cells.
    """
    name = "rows" if "rows" in set(normalized.group.array_keys()) else "data"
    return int(normalized.array(name).shape[0])


def normalized_values(
    ds: AnalysisStore,
    normalized: Artifact,
    *,
    features: np.ndarray | None = None,
    sparse: bool = False,
) -> da.Array:
    """The values of a ``normalized`` artifact, lazily, as its ``data`` would hold them.

    Rebuilt from the assay's ``counts`` with the artifact's rows, parameters
    and ``idf`` (the same arithmetic as the write, so the same bits), in row
    blocks of :func:`data_chunk_rows` of the columns returned (all features:
    the chunks of a stored ``data``; 2,000 HVGs: about 2,000 rows, where a
    Gram matrix's BLAS runs 2.6 times faster per row than on the 280-row
    chunks of 15,000 features); an artifact that stores ``data``
    (``store_values=True``, or one written before this layout) is read from
    it in the same blocks, so both layouts give later stages the same bits.

    Parameters
    ----------
    ds
        The store that holds the artifact.
    normalized
        A ``normalized`` artifact.
    features
        Only these feature columns (None: all).
    sparse
        Blocks of float32 CSR matrices (``scipy.sparse.csr_matrix``, without
        explicit zeros, sorted indices) of the same values, one per
        ``counts`` shard of the selected cells, built from the non-zero
        counts without a dense float32 band (except for ``"clr"``, whose
        zeros are not zero): for products whose cost is the non-zeros, such
        as LSI's.

    Returns
    -------
    dask.array.Array
        float32, cells x features, one block per ``data_chunk_rows(cells, columns)``
        rows (``sparse``: per ``counts`` shard).

    Raises
    ------
    StaleArtifactError
        The assay's counts are not those the artifact was made from.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=300, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> from cytearc.ops import normalized_values
    >>> values = normalized_values(ds, ds.features.normalize("RNA"), features=np.arange(5))
    >>> values.shape, values.dtype.name
    ((300, 5), 'float32')
    """
    stored = "data" in set(normalized.group.array_keys())
    if stored and not sparse:
        data: da.Array = normalized.lazy("data")
        if features is None:
            return data
        narrow: da.Array = data[:, features].rechunk(
            (data_chunk_rows(data.shape[0], len(features)), -1)
        )
        return narrow
    parameters = normalized.parameters
    source = ds.assays[parameters["assay"]]
    method = str(parameters["method"])
    if stored:
        data = normalized.lazy("data")
        if "rows" in set(normalized.group.array_keys()):
            shards = take_rows(source.counts, normalized.read("rows")).chunks[0]
            data = data.rechunk((shards, -1))
        selected = data if features is None else data[:, features]
        csr_stored: da.Array = da.map_blocks(_csr_block, selected, dtype=np.float32, meta=_CSR_META)
        return csr_stored
    made_from = normalized.provenance["inputs"]["counts"]
    if source.content_fingerprint != made_from:
        msg = (
            f"{normalized.ref}: its values are rebuilt from the counts of assay "
            f"{parameters['assay']!r}; expected counts {made_from}, found "
            f"{source.content_fingerprint} (the counts were rewritten) - recompute it with "
            "features.normalize(..., invalidate_cache=True)"
        )
        raise StaleArtifactError(msg)
    rows = normalized.read("rows")
    options: dict[str, Any] = {
        "method": method,
        "target_sum": float(parameters["targetSum"] or 1.0),
        "log1p": bool(parameters["log1p"]),
        "idf": normalized.read("idf") if method == "tfidf" else None,
    }
    width = source.shape[1] if features is None else len(features)
    if sparse and method != "clr":
        counts, library = _counts_and_library(source, rows)
        position = np.arange(source.shape[1], dtype=np.int64)
        if features is not None:
            position[:] = -1
            position[np.asarray(features, dtype=np.int64)] = np.arange(width)
        # one key each for the positions and idf, not a copy in every task
        per_feature = [da.from_array(position, chunks=-1), "k"]
        idf = options.pop("idf")
        if idf is not None:
            per_feature += [da.from_array(idf, chunks=-1), "k"]
        csr: da.Array = da.blockwise(
            _csr_band,
            "ij",
            counts,
            "ik",
            library,
            "i",
            *per_feature,
            new_axes={"j": width},
            concatenate=True,
            dtype=np.float32,
            meta=_CSR_META,
            **options,
        )
        return csr
    values = normalized_graph(source, rows, features=features, **options)
    if sparse:
        by_shard: da.Array = da.map_blocks(_csr_block, values, dtype=np.float32, meta=_CSR_META)
        return by_shard
    rechunked: da.Array = values.rechunk((data_chunk_rows(len(rows), width), -1))
    return rechunked


def normalize(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    cell_selection: SelectionLike = None,
    method: str | None = None,
    target_sum: float = 1e4,
    log1p: bool = True,
    store_values: bool = False,
    invalidate_cache: bool = False,
) -> Artifact:
    """Normalize the counts of the selected cells into a ``normalized`` artifact.

    One pass over the selected cells' counts. The artifact holds ``rows``
    (int64, the selected cells' rows in increasing order), for TF-IDF
    ``idf`` (float64, per feature), ``feature_sum`` and ``feature_m2``
    (float64, the sum of the normalized float32 values and of their squared
    deviations from the feature mean, merged band by band with Chan's
    update), ``linear_sum`` and ``linear_m2``, the same of ``expm1`` of the
    values (the normalized values before the log, which scanpy's HVG
    statistics use), and ``feature_nnz`` (int64, the cells with a non-zero
    value of each feature). The values themselves are rebuilt from the
    counts where they are read (:func:`normalized_values`): storing them
    would write a dense float32 matrix of every gene (80 GB before
    compression at a million cells x 20,000 genes) that every reader then
    decodes, where the counts are read anyway.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose counts are normalized.
    cell_selection
        The cells to normalize: a ``cell_selection`` artifact or its ref, the
        name of a boolean cell column, a boolean mask over every cell, or None
        for ``I``.
    method
        ``"library_size"``, ``"clr"``, ``"tfidf"`` or ``"none"`` (see the
        module docstring); None for the assay class's: ``library_size`` for
        RNA types, ``clr`` for ADT and HTO, ``tfidf`` for ATAC, ``none`` for
        the generic type.
    target_sum
        The library size each cell is scaled to (not used by ``"clr"`` and
        ``"none"``; TF-IDF's scale factor).
    log1p
        Take ``log1p`` of the scaled values (``"clr"`` always does, ``"none"`` never).
    store_values
        Also store the values as ``data`` (float32, one row per selected
        cell, all features, unsharded chunks of :data:`DATA_CHUNK_BYTES`),
        for readers other than CyteArc; later stages read the same bits
        either way.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``normalized`` artifact.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    OperationArgumentError
        ``method``, ``target_sum``, ``log1p`` or ``cell_selection`` is of the
        wrong type or out of its domain.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay``.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.
    NegativeCountsError
        A selected cell has a negative count (checked before anything is
        written, unless the counts are stored unsigned); the message names the
        first such cell and feature.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=300, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> normalized = ds.features.normalize("RNA", target_sum=1e4)
    >>> normalized.read("feature_sum").shape
    (600,)
    >>> ds.features.normalize("RNA", target_sum=1e4).ref == normalized.ref  # reused
    True
    """
    operation = "features.normalize"
    source = ds.assays[assay]
    method = parse_choice(
        method or source.defaults.normalization, METHODS, name="method", operation=operation
    )
    target_sum = parse_float(target_sum, name="target_sum", operation=operation, positive=True)
    log1p = parse_bool(log1p, name="log1p", operation=operation)
    store_values = parse_bool(store_values, name="store_values", operation=operation)
    if source.dtype.kind != "u":
        rows = np.flatnonzero(read_measured_mask(ds, assay, cell_selection, operation=operation))
        _refuse_negative(ds, source, rows, operation=operation)
    selection = publish_measured_selection(ds, assay, cell_selection, operation=operation)
    parameters = {
        "assay": assay,
        "method": method,
        "targetSum": None if method in {"clr", "none"} else float(target_sum),
        "log1p": {"clr": True, "none": False}.get(method, bool(log1p)),
        "storeValues": store_values,
    }

    def build(writer: ArtifactWriter) -> None:
        rows = selection.rows.astype(np.int64)
        idf = None
        if method == "tfidf":
            counts = take_rows(source.counts, rows)
            (column_sums,) = writer.run(counts.sum(axis=0, dtype=np.float64))
            idf = tfidf_idf(np.asarray(column_sums, dtype=np.float64), n_cells=len(rows))
        options: dict[str, Any] = {
            "method": method,
            "target_sum": float(target_sum),
            "log1p": bool(parameters["log1p"]),
            "idf": idf,
        }
        n_features = source.shape[1]
        if store_values:
            data = normalized_graph(source, rows, **options)
            writer.store(
                "data",
                data,
                chunks=(data_chunk_rows(len(rows), n_features), n_features),
            )
            statistics = band_statistics(data)
        else:
            keep = np.zeros(source.shape[0], dtype=bool)
            keep[rows] = True
            statistics = map_row_pieces(
                source.row_source("counts"),
                piece_statistics,
                keep,
                source.summary("rowSums").astype(np.float64),
                rows_out=BAND_STATISTICS,
                tail=(n_features,),
                dtype=np.float64,
                **options,
            )
        (stacked,) = writer.run(folded_band_statistics(statistics))
        writer.write("rows", rows)
        if idf is not None:
            writer.write("idf", idf)
        moments, linear_moments, detected = merge_band_statistics(stacked)
        writer.write("feature_sum", moments.total)
        writer.write("feature_m2", moments.m2)
        writer.write("linear_sum", linear_moments.total)
        writer.write("linear_m2", linear_moments.m2)
        writer.write("feature_nnz", detected)

    return reuse_or_publish(
        ds,
        scope=assay,
        kind="normalized",
        operation=operation,
        parameters=parameters,
        inputs={"cells": selection.ref, "counts": source.content_fingerprint},
        build=build,
        invalidate_cache=invalidate_cache,
        revision=TFIDF_REVISION if method == "tfidf" else 1,
    )


def tfidf_idf(column_sums: np.ndarray, *, n_cells: int) -> np.ndarray:
    """Signac's inverse document frequency: ``n_cells / colSums``, 0 for a feature without counts.

    Parameters
    ----------
    column_sums
        Each feature's counts summed over the selected cells (float64).
    n_cells
        The number of selected cells.

    Returns
    -------
    numpy.ndarray
        float64, one value per feature.

    Examples
    --------
    >>> tfidf_idf(np.array([2.0, 0.0, 8.0]), n_cells=4).tolist()
    [2.0, 0.0, 0.5]
    """
    sums = np.asarray(column_sums, dtype=np.float64)
    idf = np.zeros_like(sums)
    np.divide(float(n_cells), sums, out=idf, where=sums > 0)
    return idf


def _refuse_negative(ds: AnalysisStore, source: Assay, rows: np.ndarray, *, operation: str) -> None:
    """Raise :class:`NegativeCountsError` naming the first selected cell and feature with a negative count."""
    counts = source.counts if len(rows) == source.shape[0] else take_rows(source.counts, rows)
    (row_min,) = ds.engine.compute(counts.min(axis=1))
    negative = np.flatnonzero(np.asarray(row_min) < 0)
    if not len(negative):
        return
    row = int(rows[negative[0]])
    (values,) = ds.engine.compute(source.counts[row])
    column = int(np.flatnonzero(np.asarray(values) < 0)[0])
    cell = ds.cells.fetch_all("ids")[row]
    feature = source.features.fetch_all("ids")[column]
    msg = (
        f"{source.where}: {operation}: {len(negative)} selected cells have negative counts, the "
        f"first cell {cell!r} (row {row}) at feature {feature!r} (column {column}) holds "
        f"{values[column]:g}; normalization needs non-negative counts - import the raw counts "
        "(for an H5AD file, the counts layer with --layer / layer=)"
    )
    raise NegativeCountsError(msg)
