"""``qc``: per-cell quality metrics and the cell selections that filter on them.

``metrics`` writes the cell columns ``<assay>_nCounts`` and ``<assay>_nFeatures``
(from the stored count summaries) and a percentage column per feature
pattern (``<assay>_percentMito`` for ``^MT-``, ``<assay>_percentRibo`` for
``^RP[SL]``), summed over ``counts`` on the engine; the assay records its
percentage columns in its ``percentFeatures`` attribute. ``filter`` keeps cells
within bounds; ``auto_filter`` finds the bounds as ``nmads`` scaled median
absolute deviations from the median (of ``log1p`` values for counts and
features, upper bound only for percentages), optionally per sample, as
scater's ``isOutlier``. Both publish a datastore ``cell_selection``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import dask.array as da
import numpy as np

from cytearc.artifacts import DATASTORE_SCOPE, Artifact
from cytearc.errors import OperationArgumentError, ReadOnlyStoreError
from cytearc.metadata.membership import membership_column, validate_measured
from cytearc.ops.arguments import parse_cell_column, parse_float, parse_patterns
from cytearc.ops.publication import reuse_or_publish, values_digest, write_cell_column
from cytearc.ops.selection import (
    MEMBERSHIP_REMEDY,
    SelectionLike,
    publish_selection,
    read_measured_mask,
    read_selection_mask,
    write_selection_mask,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cytearc.artifacts import ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "DEFAULT_PATTERNS",
    "auto_filter",
    "feature_percentage",
    "filter_cells",
    "metric_assay",
    "metrics",
    "metrics_and_filter",
    "parse_bounds",
]

DEFAULT_PATTERNS: Final = {"percentMito": "^MT-", "percentRibo": "^RP[SL]"}
PERCENT_ATTRIBUTE: Final = "percentFeatures"
MAD_SCALE: Final = 1.4826


def metrics(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    patterns: Mapping[str, str] | None = None,
) -> list[str]:
    """Write the QC cell columns of ``assay``; returns their names.

    ``patterns`` maps a column suffix to a regular expression searched in the
    feature names (default :data:`DEFAULT_PATTERNS`, case-insensitive).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose counts are summarized.
    patterns
        Column suffixes mapped to regular expressions of feature names; each
        gives the column ``<assay>_<suffix>``, the percentage of a cell's
        counts in the matching features (NaN for cells the assay did not
        measure). None for :data:`DEFAULT_PATTERNS`.

    Returns
    -------
    list of str
        The cell columns written: ``<assay>_nCounts``, ``<assay>_nFeatures``
        and one per pattern.

    Raises
    ------
    OperationArgumentError
        ``patterns`` is not a mapping of text to text, or a pattern does not
        compile.
    ReadOnlyStoreError
        The store is read-only.
    AssayNotFoundError
        The store has no assay ``assay``.
    """
    patterns = parse_patterns(patterns, operation="qc.metrics")
    if not ds.writable:
        msg = f"{ds.where}: qc.metrics writes cell columns; open the store with zarr_mode='r+'"
        raise ReadOnlyStoreError(msg)
    source = ds.assays[assay]
    totals = source.summary("rowSums").astype(np.float64)
    columns = {f"{assay}_nCounts": totals, f"{assay}_nFeatures": source.summary("rowPositive")}
    names = [str(n) for n in source.features.fetch_all("names").tolist()]
    recorded, indices = {}, {}
    for suffix, pattern in (patterns or DEFAULT_PATTERNS).items():
        matcher = re.compile(pattern, re.IGNORECASE)
        indices[f"{assay}_{suffix}"] = np.flatnonzero([bool(matcher.search(n)) for n in names])
        recorded[f"{assay}_{suffix}"] = pattern
    for column, part in zip(
        recorded, _feature_sums(ds, assay, list(indices.values())), strict=True
    ):
        with np.errstate(divide="ignore", invalid="ignore"):
            columns[column] = np.where(totals > 0, 100.0 * part / totals, 0.0)
    member = membership_column(ds.cells, assay)
    if member is not None:
        unmeasured = ~ds.cells.fetch_all(member).astype(bool)
        for column in recorded:
            columns[column][unmeasured] = np.nan
    for column, values in columns.items():
        write_cell_column(ds, column, np.asarray(values), operation="qc.metrics")
    _record_percent_columns(ds, assay, recorded)
    return list(columns)


def feature_percentage(
    ds: AnalysisStore,
    assay: str = "RNA",
    feature_pattern: str | None = None,
    *,
    features: Sequence[str] | None = None,
    name: str = "percentFeatures",
    cell_selection: SelectionLike = None,
) -> str:
    """Write the percentage of each selected cell's counts in some features as the column ``<assay>_<name>``.

    Scarf's ``add_percent_feature`` and scanpy's ``qc_vars``: ``100 *
    counts in the features / all counts`` (0 for a cell without counts,
    NaN outside the selection). The column is recorded in the assay's
    ``percentFeatures`` attribute with its pattern, so it is a metric of the
    assay that ``qc.filter`` and ``qc.auto_filter`` check membership for.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose counts are summed.
    feature_pattern
        A regular expression searched in the feature names (case-insensitive),
        such as ``"^MT-"``; give it or ``features``.
    features
        Feature names or ids; every one must exist.
    name
        The column's suffix.
    cell_selection
        The cells: a ``cell_selection`` artifact or its ref, the name of a
        boolean cell column, a boolean mask over every cell, or None for ``I``.

    Returns
    -------
    str
        The column written.

    Raises
    ------
    OperationArgumentError
        Neither or both of ``feature_pattern`` and ``features``, a pattern
        that does not compile or matches no feature, or an empty ``name``.
    FeatureNotFoundError
        A name of ``features`` is not a feature of the assay.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay`` (checked before anything is read).
    ReadOnlyStoreError
        The store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=300, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> ds.qc.feature_percentage("RNA", "^MT-", name="percentMT")
    'RNA_percentMT'
    >>> bool(ds.cells.fetch_all("RNA_percentMT").max() < 100)
    True
    """
    operation = "qc.feature_percentage"
    if (feature_pattern is None) == (features is None):
        msg = f"{operation}: give one of feature_pattern (a regular expression) and features (names), found {feature_pattern!r} and {features!r}"
        raise OperationArgumentError(msg)
    if not isinstance(cast("object", name), str) or not name:
        msg = f"{operation}: name must be a non-empty column suffix, found {name!r}"
        raise OperationArgumentError(msg)
    if not ds.writable:
        msg = f"{ds.where}: {operation} writes a cell column; open the store with zarr_mode='r+'"
        raise ReadOnlyStoreError(msg)
    source = ds.assays[assay]
    if feature_pattern is not None:
        patterns = parse_patterns({name: feature_pattern}, operation=operation) or {}
        matcher = re.compile(patterns[name], re.IGNORECASE)
        names = [str(n) for n in source.features.fetch_all("names").tolist()]
        index = np.flatnonzero([bool(matcher.search(n)) for n in names])
        if not len(index):
            msg = f"{source.where}: {operation}: the pattern {feature_pattern!r} matches no feature name; check it against ds.assays[{assay!r}].features.fetch_all('names')"
            raise OperationArgumentError(msg)
        recorded = feature_pattern
    else:
        assert features is not None
        index = np.unique(source.feature_positions([str(f) for f in features]))
        recorded = "|".join(f"^{re.escape(str(f))}$" for f in features)
    mask = read_measured_mask(ds, assay, cell_selection, operation=operation)
    totals = source.summary("rowSums").astype(np.float64)
    (part,) = _feature_sums(ds, assay, [index])
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(totals > 0, 100.0 * part / totals, 0.0)
    column = f"{assay}_{name}"
    write_cell_column(ds, column, values[mask], mask=mask, fill=np.nan, operation=operation)
    _record_percent_columns(ds, assay, {**percent_columns(ds, assay), column: recorded})
    return column


def _feature_sums(ds: AnalysisStore, assay: str, groups: list[np.ndarray]) -> list[np.ndarray]:
    """Per cell, the counts summed over each group of features.

    From the few rows of ``countsT`` that hold them when the assay has one,
    else by a pass over ``counts`` on the engine.
    """
    source = ds.assays[assay]
    if source.stores_transpose:
        return [
            source.feature_rows(idx).sum(axis=0, dtype=np.float64)
            if len(idx)
            else np.zeros(source.shape[0])
            for idx in groups
        ]
    sums = [
        source.counts[:, idx].sum(axis=1, dtype=np.float64)
        if len(idx)
        else da.zeros(source.shape[0], chunks=source.counts.chunks[0])
        for idx in groups
    ]
    return [np.asarray(x) for x in ds.engine.compute(*sums, show_progress=ds.show_progress)]


def _record_percent_columns(ds: AnalysisStore, assay: str, record: dict[str, str]) -> None:
    """Write the assay's ``percentFeatures`` record (staged while a run stages its columns)."""
    if ds.cells.staging is not None:
        ds.cells.staging.set_attribute(ds.root[assay], PERCENT_ATTRIBUTE, record)
    else:
        ds.root[assay].attrs[PERCENT_ATTRIBUTE] = record


def percent_columns(ds: AnalysisStore, assay: str) -> dict[str, str]:
    """The percentage columns ``assay`` recorded, with their patterns.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay.

    Returns
    -------
    dict of str to str
        The columns :func:`metrics` wrote, each with its regular expression.
    """
    group = ds.root[assay]
    staging = ds.cells.staging
    recorded = (
        staging.attribute(group, PERCENT_ATTRIBUTE, {})
        if staging is not None
        else group.attrs.get(PERCENT_ATTRIBUTE, {})
    )
    return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else {}


def metric_assay(ds: AnalysisStore, column: str) -> str | None:
    """The assay whose preparation wrote the cell column ``column`` (None for other columns).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    column
        A cell column's name.

    Returns
    -------
    str or None
        The assay whose :func:`metrics` wrote ``column``, or None.
    """
    for assay in ds.assays:
        generated = {f"{assay}_nCounts", f"{assay}_nFeatures"}
        generated |= set(percent_columns(ds, assay))
        if column in generated:
            return assay
    return None


def _check_metric(ds: AnalysisStore, column: str, mask: np.ndarray, operation: str) -> np.ndarray:
    if column not in ds.cells.columns:
        msg = f"{ds.where}: {operation}: no cell column {column!r}; run qc.metrics first"
        raise OperationArgumentError(msg)
    assay = metric_assay(ds, column)
    if assay is not None:
        validate_measured(ds.cells, assay, mask, operation=operation, remedy=MEMBERSHIP_REMEDY)
    values = ds.cells.fetch_all(column)
    if values.dtype.kind not in "biuf":
        msg = f"{ds.where}: {operation}: {column!r} is not numeric ({values.dtype}); pass a numeric metric column"
        raise OperationArgumentError(msg)
    return values.astype(np.float64)


def _publish_selection(
    ds: AnalysisStore,
    *,
    operation: str,
    parameters: dict[str, Any],
    inputs: dict[str, Any],
    keep: np.ndarray,
    bounds: dict[str, Any],
) -> Artifact:
    if not keep.any():
        msg = f"{ds.where}: {operation}: the bounds {bounds} keep no cell; expected at least one - loosen the bounds"
        raise OperationArgumentError(msg)

    def build(writer: ArtifactWriter) -> None:
        write_selection_mask(writer, keep, ds)
        writer.group.attrs["bounds"] = bounds

    return reuse_or_publish(
        ds,
        scope=DATASTORE_SCOPE,
        kind="cell_selection",
        operation=operation,
        parameters=parameters,
        inputs=inputs,
        build=build,
    )


def parse_bounds(bounds: object, *, operation: str) -> dict[str, tuple[float | None, float | None]]:
    """Check ``bounds``: cell columns mapped to ``(low, high)`` pairs of numbers or None.

    Parameters
    ----------
    bounds
        The value to check.
    operation
        The operation named in the error.

    Returns
    -------
    dict
        The columns mapped to ``(low, high)`` float pairs (None stays open).

    Raises
    ------
    OperationArgumentError
        ``bounds`` is not such a mapping, or a low bound is above its high one.
    """
    if not isinstance(bounds, Mapping):
        msg = f"{operation}: bounds must map metric columns to (low, high) pairs, found {bounds!r}"
        raise OperationArgumentError(msg)
    parsed: dict[str, tuple[float | None, float | None]] = {}
    for column, pair in bounds.items():
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            msg = f"{operation}: bounds[{column!r}] must be a (low, high) pair, found {pair!r}"
            raise OperationArgumentError(msg)
        low, high = (
            None if v is None else parse_float(v, name=f"bounds[{column!r}]", operation=operation)
            for v in pair
        )
        if low is not None and high is not None and low > high:
            msg = f"{operation}: bounds[{column!r}] has low {low} above high {high}; swap them"
            raise OperationArgumentError(msg)
        parsed[str(column)] = (low, high)
    return parsed


def filter_cells(
    ds: AnalysisStore,
    bounds: Mapping[str, tuple[float | None, float | None]],
    *,
    cell_selection: SelectionLike = None,
) -> Artifact:
    """Keep the selected cells whose metrics lie within ``bounds`` (inclusive; None is open).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    bounds
        Numeric cell columns (such as ``RNA_nCounts``) mapped to
        ``(low, high)`` pairs; None leaves that side open.
    cell_selection
        The cells to filter: a ``cell_selection`` artifact or its ref, the
        name of a boolean cell column, a boolean mask over every cell, or
        None for ``I``.

    Returns
    -------
    Artifact
        A datastore ``cell_selection``.

    Raises
    ------
    OperationArgumentError
        ``bounds`` is not a mapping of columns to ``(low, high)`` pairs of
        numbers (low not above high), a column is missing or not numeric,
        ``cell_selection`` is malformed, or no cell is kept.
    UnmeasuredCellsError
        A bound is on a metric of an assay that did not measure some of the
        selected cells.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.
    ReadOnlyStoreError
        No selection of this provenance exists and the store is read-only.
    """
    operation = "qc.filter"
    bounds = parse_bounds(bounds, operation=operation)
    mask = read_selection_mask(ds, cell_selection)
    metric_values = {c: _check_metric(ds, c, mask, operation) for c in sorted(bounds)}
    prior = publish_selection(ds, cell_selection)
    keep = prior.mask.copy()
    inputs: dict[str, Any] = {"cells": prior.ref}
    for column, (low, high) in sorted(bounds.items()):
        values = metric_values[column]
        inputs[column] = values_digest(values)
        if low is not None:
            keep &= values >= low
        if high is not None:
            keep &= values <= high
    clean = {c: [None if v is None else float(v) for v in b] for c, b in sorted(bounds.items())}
    return _publish_selection(
        ds,
        operation=operation,
        parameters={"bounds": clean},
        inputs=inputs,
        keep=keep,
        bounds=clean,
    )


def _mad_bounds(
    values: np.ndarray, *, nmads: float, log: bool, upper_only: bool
) -> tuple[float | None, float]:
    x = np.log1p(values) if log else values
    x = x[np.isfinite(x)]
    median = float(np.median(x))
    spread = nmads * MAD_SCALE * float(np.median(np.abs(x - median)))
    high = median + spread
    low = None if upper_only else median - spread
    if log:
        return (None if low is None else float(np.expm1(low))), float(np.expm1(high))
    return low, high


def auto_filter(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    metrics: Sequence[str] | None = None,
    nmads: float = 5.0,
    sample_key: str | None = None,
    cell_selection: SelectionLike = None,
) -> Artifact:
    """Keep the selected cells within ``nmads`` MADs of the median of each metric (per sample).

    Counts and features are judged on their ``log1p`` values on both sides;
    percentages (the :func:`metrics` patterns) have an upper bound only.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose metrics are used by default.
    metrics
        Numeric cell columns; None for ``<assay>_nCounts``,
        ``<assay>_nFeatures`` and ``<assay>_percentMito`` when it exists.
    nmads
        The bounds' distance from the median, in scaled MADs (> 0).
    sample_key
        A cell column: bounds are found within each of its samples; None for
        one set of bounds over all cells.
    cell_selection
        The cells to filter: a ``cell_selection`` artifact or its ref, the
        name of a boolean cell column, a boolean mask over every cell, or
        None for ``I``.

    Returns
    -------
    Artifact
        A datastore ``cell_selection``; its ``bounds`` attribute holds the
        bounds found per metric and sample.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    OperationArgumentError
        ``nmads`` is not a positive number, ``sample_key`` is not a cell
        column, a metric is missing or not numeric, ``cell_selection`` is
        malformed, or no cell is kept.
    UnmeasuredCellsError
        A metric is of an assay that did not measure some of the selected
        cells.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.
    ReadOnlyStoreError
        No selection of this provenance exists and the store is read-only.
    """
    operation = "qc.auto_filter"
    ds.assays[assay]
    nmads = parse_float(nmads, name="nmads", operation=operation, positive=True)
    if sample_key is not None:
        parse_cell_column(ds, sample_key, name="sample_key", operation=operation)
    if metrics is None:
        metrics = [f"{assay}_nCounts", f"{assay}_nFeatures"]
        if f"{assay}_percentMito" in ds.cells.columns:
            metrics.append(f"{assay}_percentMito")
    mask = read_selection_mask(ds, cell_selection)
    metric_values = {c: _check_metric(ds, c, mask, operation) for c in metrics}
    prior = publish_selection(ds, cell_selection)
    samples = (
        np.zeros(ds.cells.n_rows, dtype=np.int64)
        if sample_key is None
        else ds.cells.fetch_all(sample_key)
    )
    keep = prior.mask.copy()
    inputs: dict[str, Any] = {"cells": prior.ref}
    if sample_key is not None:
        inputs["samples"] = values_digest(samples)
    bounds: dict[str, Any] = {}
    for column in metrics:
        values = metric_values[column]
        inputs[column] = values_digest(values)
        percent = column in percent_columns(ds, assay)
        bounds[column] = {}
        for sample in np.unique(samples[prior.mask]):
            rows = prior.mask & (samples == sample)
            low, high = _mad_bounds(values[rows], nmads=nmads, log=not percent, upper_only=percent)
            bounds[column][str(sample)] = [low, high]
            bad = rows & ((values > high) | ((values < low) if low is not None else False))
            keep &= ~bad
    return _publish_selection(
        ds,
        operation=operation,
        parameters={
            "assay": assay,
            "metrics": list(metrics),
            "nmads": float(nmads),
            "sampleKey": sample_key,
        },
        inputs=inputs,
        keep=keep,
        bounds=bounds,
    )


def metrics_and_filter(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    patterns: Mapping[str, str] | None = None,
    filter_outliers: bool = True,
    nmads: float = 5.0,
    sample_key: str | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    cell_selection: SelectionLike = None,
) -> Artifact:
    """QC in one step: the metrics (unless the store holds them for these patterns), then the filters.

    Fixed ``bounds`` first (:func:`filter_cells`), then the MAD filter
    (:func:`auto_filter`) on the cells they keep.

    The ``qc`` stage of the standard recipe.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose metrics are computed.
    patterns
        As in :func:`metrics` (default :data:`DEFAULT_PATTERNS`).
    filter_outliers
        Filter with :func:`auto_filter`; when False the selection is returned as it is.
    nmads, sample_key
        As in :func:`auto_filter`.
    bounds
        Cell columns mapped to fixed ``(low, high)`` bounds, as in
        :func:`filter_cells`, such as scanpy's tutorial thresholds
        ``{"RNA_nFeatures": (200, None), "RNA_percentMito": (None, 20)}``;
        None for none.
    cell_selection
        The cells to filter (default: the ``I`` column).

    Returns
    -------
    Artifact
        A datastore ``cell_selection``.

    Raises
    ------
    ReadOnlyStoreError
        The metrics are missing and the store is read-only.
    AssayNotFoundError, OperationArgumentError, UnmeasuredCellsError
        As in :func:`metrics` and :func:`auto_filter`.
    """
    patterns = dict(DEFAULT_PATTERNS if patterns is None else patterns)
    columns = [f"{assay}_{c}" for c in ("nCounts", "nFeatures", *patterns)]
    if not set(columns) <= set(ds.cells.columns) or percent_columns(ds, assay) != {
        f"{assay}_{k}": v for k, v in patterns.items()
    }:
        metrics(ds, assay, patterns=patterns)
    if bounds:
        cell_selection = filter_cells(ds, bounds, cell_selection=cell_selection).ref
    if not filter_outliers:
        return publish_selection(ds, cell_selection).artifact
    return auto_filter(ds, assay, nmads=nmads, sample_key=sample_key, cell_selection=cell_selection)
