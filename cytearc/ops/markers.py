"""``markers.search``: per-group marker statistics from ``countsT``, band by band of features.

For each group against the rest of the selected cells, on library-size
normalized ``log1p`` values: the mean, the fraction of cells expressing
(count > 0), the log2 fold change of the de-logged means
(``log2((expm1(mean_in) + 1e-9) / (expm1(mean_rest) + 1e-9))``, as scanpy),
the AUROC ``U / (n_in n_rest)`` and the two-sided Mann-Whitney p-value from
the normal approximation with tie correction and no continuity correction
(scipy's ``mannwhitneyu(method="asymptotic", use_continuity=False)``), with
Benjamini-Hochberg adjustment over the features of each group. ``score`` is
the z statistic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
from dask.delayed import delayed

from cytearc.artifacts import Artifact, ArtifactRef, open_artifact
from cytearc.engine.arrays import map_row_pieces, take_rows
from cytearc.errors import AssayTypeError, OperationArgumentError
from cytearc.ops.arguments import parse_cell_column, parse_float
from cytearc.ops.marker_blocks import (
    SLICE_BYTES,
    STATISTICS,
    _band_pieces,
    _band_statistics,
    _counts_band,
)
from cytearc.ops.normalize import normalized_graph, tfidf_idf
from cytearc.ops.publication import reuse_or_publish, values_digest
from cytearc.ops.selection import (
    SelectionLike,
    group_labels,
    publish_selection,
    read_measured_mask,
)
from cytearc.storage.counts import BAND_BYTES
from cytepool.de.toptable import p_adjust_bh

if TYPE_CHECKING:
    from dask.delayed import Delayed

    from cytearc.artifacts import ArtifactWriter
    from cytearc.assays import Assay
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "MAX_COUNTS_BANDS",
    "counts_band_width",
    "counts_marker_tasks",
    "marker_tasks",
    "search",
    "table",
]


def marker_tasks(
    source: Assay, rows: np.ndarray, codes: np.ndarray, n_groups: int, *, target_sum: float
) -> list[Delayed]:
    """Lazy marker statistics of ``rows`` (cells labelled ``codes``), one task per band of ``countsT``.

    Each task reads a band of whole shards over every cell, about
    :data:`~cytearc.storage.counts.BAND_BYTES` of counts or one shard
    (:func:`~cytearc.engine.arrays.map_row_pieces`), a piece of features at
    a time, and computes the statistics of ``rows`` one slice of
    :data:`SLICE_BYTES` at a time (:func:`_band_pieces`).

    Parameters
    ----------
    source
        An assay that stores ``countsT`` (an RNA type).
    rows
        The cells to read, in increasing order.
    codes
        The group of each of ``rows``, ``0 .. n_groups - 1``.
    n_groups
        The number of groups.
    target_sum
        The library size each cell is scaled to before ``log1p``.

    Returns
    -------
    list of dask.delayed.Delayed
        In feature order, one per band, each computing the
        :func:`~cytearc.ops.marker_blocks.band_statistics` of its band.
    """
    counts_t = source.row_source("countsT")
    statistics = map_row_pieces(
        counts_t,
        _band_pieces,
        rows_out=None,
        tail=(len(STATISTICS), n_groups),
        dtype=np.float64,
        target_bytes=BAND_BYTES,
        rows=np.asarray(rows, np.int64),
        library=source.summary("rowSums")[rows].astype(np.float64),
        codes=np.asarray(codes, np.int64),
        n_groups=n_groups,
        target_sum=float(target_sum),
        step=max(1, SLICE_BYTES // max(1, len(rows) * counts_t.dtype.itemsize)),
    )
    return [delayed(_band_statistics)(block) for block in statistics.to_delayed().ravel()]


MAX_COUNTS_BANDS: Final = 16
"""Bands of features :func:`counts_marker_tasks` reads at most: each band reads every ``counts`` shard."""


def counts_band_width(source: Assay, n_cells: int) -> int:
    """Features per band of :func:`counts_marker_tasks`: about :data:`~cytearc.storage.counts.BAND_BYTES` of float32 values over ``n_cells``.

    Parameters
    ----------
    source
        An assay without ``countsT``.
    n_cells
        The selected cells.

    Returns
    -------
    int
        The band's width.

    Raises
    ------
    AssayTypeError
        The features need more than :data:`MAX_COUNTS_BANDS` bands.
    """
    width = max(1, BAND_BYTES // max(1, 4 * n_cells))
    n_bands = -(-source.shape[1] // width)
    if n_bands > MAX_COUNTS_BANDS:
        msg = f"{source.where}: markers.search of a {source.assayType} assay reads counts once per band of {width} features over the {n_cells} cells, and its {source.shape[1]} features need {n_bands} bands (at most {MAX_COUNTS_BANDS}); search markers of a gene activity assay (ds.add_melded_assay) or of fewer cells"
        raise AssayTypeError(msg)
    return width


def counts_marker_tasks(
    source: Assay,
    rows: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    *,
    method: str,
    target_sum: float,
    idf: np.ndarray | None = None,
) -> list[Delayed]:
    """Lazy marker statistics of an assay without ``countsT`` (ADT, HTO, ATAC, generic), from ``counts``.

    The selected cells' values, normalized as ``features.normalize`` does
    with ``method``, are taken in bands of features that hold about
    :data:`~cytearc.storage.counts.BAND_BYTES` of float32 values over every
    selected cell; each band is one task that reads every ``counts`` shard,
    so assays of many features (a peak matrix) are refused.

    Parameters
    ----------
    source
        The assay.
    rows
        The cells to read, in increasing order.
    codes
        The group of each of ``rows``, ``0 .. n_groups - 1``.
    n_groups
        The number of groups.
    method
        The normalization (:data:`cytearc.ops.normalize.METHODS`).
    target_sum
        The library size each cell is scaled to (library size, TF-IDF).
    idf
        The TF-IDF inverse document frequency of the selected cells.

    Returns
    -------
    list of dask.delayed.Delayed
        In feature order, one per band, each computing the
        :func:`~cytearc.ops.marker_blocks.band_statistics` of its band.

    Raises
    ------
    AssayTypeError
        The features need more than :data:`MAX_COUNTS_BANDS` bands.
    """
    width = counts_band_width(source, len(rows))
    values = normalized_graph(
        source, rows, method=method, target_sum=target_sum, log1p=method != "none", idf=idf
    ).rechunk((-1, width))
    codes_of = delayed(codes)
    return [
        delayed(_counts_band)(block, codes_of, n_groups=n_groups)
        for block in values.to_delayed().ravel()
    ]


def search(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    group_key: str,
    cell_selection: SelectionLike = None,
    target_sum: float = 1e4,
    invalidate_cache: bool = False,
) -> Artifact:
    """Marker statistics of every group of the cell column ``group_key`` (a ``markers`` artifact).

    Cells with a missing label (NaN, a negative number or empty text) are left
    out. The artifact holds ``groups`` (labels as text), ``n_cells`` and each
    of :data:`~cytearc.ops.marker_blocks.STATISTICS` plus ``padj`` as groups x features arrays.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay. RNA types are read from ``countsT`` band by band of
        features; other assays from ``counts``, normalized with their
        class's method (centred log ratio for ADT and HTO, TF-IDF for ATAC,
        the counts for the generic type) in bands of features
        (:func:`counts_marker_tasks`; a peak matrix of many features is
        refused).
    group_key
        The cell column whose labels form the groups (such as
        ``RNA_leiden_cluster``); two or more groups are needed.
    cell_selection
        The cells to read: a ``cell_selection`` artifact or its ref, the name
        of a boolean cell column, a boolean mask over every cell, or None for
        ``I``.
    target_sum
        The library size each cell is scaled to before ``log1p`` (RNA types, TF-IDF).
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``markers`` artifact; :func:`table` reads it as a DataFrame.
        ``logfc`` compares ``expm1`` of the group means, which for the
        generic type's counts is not a log fold change.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    AssayTypeError
        ``assay`` has no ``countsT`` and more features than
        :func:`counts_marker_tasks` reads.
    OperationArgumentError
        ``group_key`` is not a cell column, ``target_sum`` is not a positive
        number, ``cell_selection`` is malformed, or the selected cells hold
        fewer than two groups.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay``.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.
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
    >>> markers = ds.markers.search(group_key="cell_type")
    >>> top = ds.markers.table(markers, group="B_cell", n=3)
    >>> bool(top["name"].str.startswith("B_CELL_MARKER").all())
    True
    """
    operation = "markers.search"
    source = ds.assays[assay]
    parse_cell_column(ds, group_key, name="group_key", operation=operation)
    target_sum = parse_float(target_sum, name="target_sum", operation=operation, positive=True)
    labels, valid = group_labels(ds, group_key)
    mask = read_measured_mask(ds, assay, cell_selection, operation=operation) & valid
    if not mask.any():
        msg = f"{ds.where}: {operation}: no selected cell has a label in {group_key!r}; pass a group_key labelling the selected cells"
        raise OperationArgumentError(msg)
    groups, codes = np.unique(labels[mask], return_inverse=True)
    if len(groups) < 2:
        msg = f"{ds.where}: {operation}: {group_key!r} has one group among the selected cells; markers need two or more"
        raise OperationArgumentError(msg)
    rows = np.flatnonzero(mask)
    method = source.defaults.normalization
    parameters: dict[str, Any] = {
        "assay": assay,
        "groupKey": group_key,
        "targetSum": float(target_sum),
    }
    if not source.stores_transpose:
        counts_band_width(source, len(rows))
        parameters["method"] = method
    selection = publish_selection(ds, cell_selection)

    def tasks(writer: ArtifactWriter) -> list[Delayed]:
        if source.stores_transpose:
            return marker_tasks(source, rows, codes, len(groups), target_sum=target_sum)
        idf = None
        if method == "tfidf":
            (sums,) = writer.run(take_rows(source.counts, rows).sum(axis=0, dtype=np.float64))
            idf = tfidf_idf(np.asarray(sums, dtype=np.float64), n_cells=len(rows))
        return counts_marker_tasks(
            source, rows, codes, len(groups), method=method, target_sum=target_sum, idf=idf
        )

    def build(writer: ArtifactWriter) -> None:
        bands = writer.run(*tasks(writer))
        for name in STATISTICS:
            writer.write(
                name, np.concatenate([b[name] for b in bands], axis=1), finite=name != "auroc"
            )
        pvalues = np.concatenate([b["pvalue"] for b in bands], axis=1)
        writer.write("padj", np.stack([p_adjust_bh(p) for p in pvalues]))
        writer.write("groups", np.asarray([str(g) for g in groups], dtype=object))
        writer.write("n_cells", np.bincount(codes, minlength=len(groups)).astype(np.int64))

    return reuse_or_publish(
        ds,
        scope=assay,
        kind="markers",
        operation=operation,
        parameters=parameters,
        inputs={
            "cells": selection.ref,
            "groups": values_digest(labels[mask]),
            "counts": source.content_fingerprint,
        },
        build=build,
        invalidate_cache=invalidate_cache,
    )


def table(
    ds: AnalysisStore,
    markers: ArtifactRef | str | Artifact,
    *,
    group: str | int | None = None,
    n: int | None = 10,
    sort_by: str = "score",
) -> pd.DataFrame:
    """Markers as a DataFrame: one row per (group, feature), the top ``n`` of each group by ``sort_by``.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    markers
        The ``markers`` artifact (:func:`search`), or its ref.
    group
        One group's label; None for every group.
    n
        Rows per group; None for every feature.
    sort_by
        A column of :data:`~cytearc.ops.marker_blocks.STATISTICS` or ``padj``: ``pvalue`` and ``padj``
        sort ascending, the others descending.

    Returns
    -------
    pandas.DataFrame
        Columns ``group``, ``feature`` (id), ``name``, each of
        :data:`~cytearc.ops.marker_blocks.STATISTICS` and ``padj``; the groups in stored order.

    Raises
    ------
    OperationArgumentError
        ``group`` is not a group of the artifact, or ``sort_by`` is not a column.
    MissingArtifactError, IncompleteArtifactError
        ``markers`` names no published artifact.
    """
    artifact = markers if isinstance(markers, Artifact) else open_artifact(ds.root, markers)
    assay = ds.assays[artifact.ref.scope]
    groups = [str(g) for g in artifact.read("groups")]
    wanted = groups if group is None else [str(group)]
    if not set(wanted) <= set(groups):
        msg = f"{artifact.ref}: markers.table: no group {group!r}; the groups are {groups} - pass one of them"
        raise OperationArgumentError(msg)
    columns = (*STATISTICS, "padj")
    if sort_by not in columns:
        msg = f"{artifact.ref}: markers.table: sort_by: expected one of {list(columns)}, found {sort_by!r}"
        raise OperationArgumentError(msg)
    ids = assay.features.fetch_all("ids")
    names = assay.features.fetch_all("names")
    stats: dict[str, Any] = {s: artifact.array(s) for s in columns}
    frames = []
    for label in wanted:
        i = groups.index(label)
        frame = pd.DataFrame({s: np.asarray(a[i]) for s, a in stats.items()})
        frame.insert(0, "name", names)
        frame.insert(0, "feature", ids)
        frame.insert(0, "group", label)
        frame = frame.sort_values(sort_by, ascending=sort_by in {"pvalue", "padj"}, kind="stable")
        frames.append(frame if n is None else frame.head(n))
    return pd.concat(frames, ignore_index=True)
