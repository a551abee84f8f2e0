"""Where each output cell and feature of a composite store lies in its sources.

A :class:`CompositeMap` holds three arrays (stored in a composite's
``_composite`` group):

``row_sources`` (integers, one per output cell)
    The index of the source holding the cell.
``source_rows`` (int64, one per output cell)
    The cell's row in that source.
``feature_columns`` (int64, ``n_sources x n_output_features``)
    The column of each output feature in each source, or ``-1`` where the
    source lacks the feature: it contributes zeros.

:func:`merge_map` builds the layout of
:class:`~cytearc.tools.DataStoreMerge`: the sources' cells in source order,
the union of the features by id in order of first appearance. The reader of
the virtual counts is :class:`cytearc.storage.virtual.VirtualArrayReader`.
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from cytearc.errors import OperationArgumentError, StoreFormatError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CompositeMap",
    "Selection",
    "SourcePart",
    "merge_map",
    "selection_positions",
    "validate_positive",
]

Selection: TypeAlias = "slice | np.ndarray | Sequence[int]"
"""Output positions along one axis: a slice, integers (any order, repeats allowed) or a boolean mask."""

SourcePart: TypeAlias = tuple[np.ndarray, np.ndarray]
"""One source's share of a selection: positions within the selection, and rows or columns in the source."""


def selection_positions(selection: Selection, n: int, *, what: str) -> np.ndarray:
    """``selection`` as int64 positions in ``[0, n)``, in selection order."""
    if isinstance(selection, slice):
        return np.arange(*selection.indices(n), dtype=np.int64)
    values = np.asarray(selection)
    if values.dtype == np.bool_:
        if values.shape != (n,):
            msg = f"{what}: a boolean mask of shape {values.shape}, expected ({n},)"
            raise OperationArgumentError(msg)
        return np.flatnonzero(values).astype(np.int64)
    if values.size == 0 and values.ndim == 1:
        return np.zeros(0, dtype=np.int64)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        msg = f"{what}: expected a slice, a boolean mask or 1-D integers, found an array of dtype {values.dtype} and shape {values.shape}"
        raise OperationArgumentError(msg)
    positions = values.astype(np.int64)
    outside = (positions < -n) | (positions >= n)
    if outside.any():
        msg = f"{what}: position {int(positions[outside][0])} is outside the {n} positions"
        raise OperationArgumentError(msg)
    return np.where(positions < 0, positions + n, positions)


def validate_positive(operation: str, name: str, value: object) -> None:
    """Raise :class:`~cytearc.errors.OperationArgumentError` unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        msg = f"{operation}: {name} must be a positive integer, found {value!r}"
        raise OperationArgumentError(msg)


def _frozen(values: np.ndarray) -> np.ndarray:
    copy = np.array(values, copy=True)
    copy.setflags(write=False)
    return copy


def _validate_integers(name: str, values: object, *, ndim: int, int64: bool) -> np.ndarray:
    if not isinstance(values, np.ndarray):
        msg = f"CompositeMap.{name}: expected a numpy array, found {type(values).__name__}"
        raise StoreFormatError(msg)
    if values.ndim != ndim:
        msg = f"CompositeMap.{name}: expected {ndim} dimension(s), found shape {values.shape}"
        raise StoreFormatError(msg)
    if (int64 and values.dtype != np.int64) or values.dtype.kind not in "iu":
        expected = "int64" if int64 else "an integer dtype"
        msg = f"CompositeMap.{name}: expected {expected}, found dtype {values.dtype}"
        raise StoreFormatError(msg)
    return values


@dataclass(frozen=True, kw_only=True, eq=False)
class CompositeMap:
    """Where each output cell and feature of a composite store lies in its sources.

    The arrays are copied and made read-only.

    Parameters
    ----------
    row_sources
        Integers, one per output cell: the index of its source.
    source_rows
        int64, one per output cell: its row in that source.
    feature_columns
        int64 of shape ``(n_sources, n_output_features)``: each output
        feature's column in each source, ``-1`` where the source lacks it.
    n_sources
        The number of sources.

    Raises
    ------
    StoreFormatError
        An array has the wrong type, dimensions, dtype or length, or a value
        out of range (a source index outside ``[0, n_sources)``, a negative
        row, a column below ``-1``).

    Examples
    --------
    >>> CompositeMap(row_sources=np.array([0, 2]), source_rows=np.array([0, 0]),
    ...              feature_columns=np.zeros((2, 1), dtype=np.int64), n_sources=2)
    Traceback (most recent call last):
    ...
    cytearc.errors.StoreFormatError: CompositeMap.row_sources: source index 2 at output row 1 is outside [0, 2)
    """

    row_sources: np.ndarray
    source_rows: np.ndarray
    feature_columns: np.ndarray
    n_sources: int

    def __post_init__(self) -> None:
        if isinstance(self.n_sources, bool) or not isinstance(self.n_sources, int | np.integer):
            msg = f"CompositeMap.n_sources: expected an integer, found {self.n_sources!r}"
            raise StoreFormatError(msg)
        if self.n_sources < 1:
            msg = f"CompositeMap.n_sources: expected at least one source, found {self.n_sources}"
            raise StoreFormatError(msg)
        sources = _validate_integers("row_sources", self.row_sources, ndim=1, int64=False)
        rows = _validate_integers("source_rows", self.source_rows, ndim=1, int64=True)
        columns = _validate_integers("feature_columns", self.feature_columns, ndim=2, int64=True)
        if rows.shape != sources.shape:
            msg = f"CompositeMap.source_rows: {len(rows)} rows, row_sources has {len(sources)}; they describe the same output cells"
            raise StoreFormatError(msg)
        if columns.shape[0] != self.n_sources:
            msg = f"CompositeMap.feature_columns: {columns.shape[0]} rows, expected one per source ({self.n_sources})"
            raise StoreFormatError(msg)
        bad = np.flatnonzero((sources < 0) | (sources >= self.n_sources))
        if len(bad):
            msg = f"CompositeMap.row_sources: source index {sources[bad[0]]} at output row {bad[0]} is outside [0, {self.n_sources})"
            raise StoreFormatError(msg)
        bad = np.flatnonzero(rows < 0)
        if len(bad):
            msg = f"CompositeMap.source_rows: row {rows[bad[0]]} at output row {bad[0]} is negative"
            raise StoreFormatError(msg)
        bad_source, bad_feature = np.nonzero(columns < -1)
        if len(bad_source):
            msg = f"CompositeMap.feature_columns: column {columns[bad_source[0], bad_feature[0]]} of source {bad_source[0]} at output feature {bad_feature[0]} is below -1 (-1 marks a missing feature)"
            raise StoreFormatError(msg)
        object.__setattr__(self, "n_sources", int(self.n_sources))
        for name, values in (("row_sources", sources), ("source_rows", rows)):
            object.__setattr__(self, name, _frozen(values))
        object.__setattr__(self, "feature_columns", _frozen(columns))

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_output_cells, n_output_features)``."""
        return (len(self.row_sources), self.feature_columns.shape[1])

    def validate_sources(self, shapes: Sequence[tuple[int, ...]], *, names: Sequence[str]) -> None:
        """Raise unless the map fits sources of these ``counts`` shapes.

        Parameters
        ----------
        shapes
            Each source's ``(n_cells, n_features)``, in source order.
        names
            Each source's name, for the message.

        Raises
        ------
        StoreFormatError
            The number of sources differs, or a row or column is outside its source.
        """
        if len(shapes) != self.n_sources:
            msg = f"CompositeMap: {len(shapes)} sources given, the map has {self.n_sources}"
            raise StoreFormatError(msg)
        for source, ((n_cells, n_features), name) in enumerate(zip(shapes, names, strict=True)):
            rows = self.source_rows[self.row_sources == source]
            if len(rows) and int(rows.max()) >= n_cells:
                msg = f"CompositeMap.source_rows: row {int(rows.max())} of source {name!r} is outside its {n_cells} cells"
                raise StoreFormatError(msg)
            columns = self.feature_columns[source]
            if len(columns) and int(columns.max()) >= n_features:
                msg = f"CompositeMap.feature_columns: column {int(columns.max())} of source {name!r} is outside its {n_features} features"
                raise StoreFormatError(msg)

    def rows_by_source(self, rows: Selection) -> tuple[SourcePart, ...]:
        """Each source's share of a selection of output cells.

        Parameters
        ----------
        rows
            Output cell positions (:data:`Selection`).

        Returns
        -------
        tuple of (numpy.ndarray, numpy.ndarray)
            One pair per source: the positions within the selection of the
            cells it holds, ascending, and their rows in the source.

        Raises
        ------
        OperationArgumentError
            A position is outside the output cells.
        """
        positions = selection_positions(rows, self.shape[0], what="rows")
        sources = self.row_sources[positions]
        order = np.argsort(sources, kind="stable")
        bounds = np.searchsorted(sources[order], np.arange(self.n_sources + 1))
        return tuple(
            (order[a:b], self.source_rows[positions[order[a:b]]])
            for a, b in itertools.pairwise(bounds)
        )

    def columns_by_source(self, features: Selection) -> tuple[SourcePart, ...]:
        """Each source's share of a selection of output features.

        Parameters
        ----------
        features
            Output feature positions (:data:`Selection`).

        Returns
        -------
        tuple of (numpy.ndarray, numpy.ndarray)
            One pair per source: the positions within the selection of the
            features it has, ascending, and their columns in the source
            (never ``-1``).

        Raises
        ------
        OperationArgumentError
            A position is outside the output features.
        """
        positions = selection_positions(features, self.shape[1], what="features")
        columns = self.feature_columns[:, positions]
        parts = []
        for source_columns in columns:
            present = np.flatnonzero(source_columns >= 0)
            parts.append((present, source_columns[present]))
        return tuple(parts)


def merge_map(
    *, n_cells: Sequence[int], feature_ids: Sequence[Sequence[str]]
) -> tuple[CompositeMap, list[str]]:
    """The map of :class:`~cytearc.tools.DataStoreMerge`'s layout, and the output feature ids.

    Output cells are the sources' cells in source order; output features are
    the union of the sources' features by id, in order of first appearance.

    Parameters
    ----------
    n_cells
        Each source's number of cells.
    feature_ids
        Each source's feature ids, in column order.

    Returns
    -------
    tuple
        The :class:`CompositeMap` and the output feature ids.

    Raises
    ------
    StoreFormatError
        The lengths differ, or a source repeats a feature id.

    Examples
    --------
    >>> composite, ids = merge_map(n_cells=[2, 1], feature_ids=[["a", "b"], ["b", "c"]])
    >>> ids, composite.row_sources.tolist(), composite.source_rows.tolist()
    (['a', 'b', 'c'], [0, 0, 1], [0, 1, 0])
    >>> composite.feature_columns.tolist()
    [[0, 1, -1], [-1, 0, 1]]
    """
    if len(n_cells) != len(feature_ids):
        msg = f"merge_map: {len(n_cells)} cell counts and {len(feature_ids)} feature id lists; give one of each per source"
        raise StoreFormatError(msg)
    index: dict[str, int] = {}
    for source, ids in enumerate(feature_ids):
        if len(set(ids)) != len(ids):
            repeated = next(i for i in ids if list(ids).count(i) > 1)
            msg = f"merge_map: source {source} repeats feature id {repeated!r}; feature ids must be unique within a source"
            raise StoreFormatError(msg)
        for feature in ids:
            index.setdefault(feature, len(index))
    columns = np.full((len(feature_ids), len(index)), -1, dtype=np.int64)
    for source, ids in enumerate(feature_ids):
        columns[source, [index[i] for i in ids]] = np.arange(len(ids), dtype=np.int64)
    counts = np.asarray(n_cells, dtype=np.int64)
    composite = CompositeMap(
        row_sources=np.repeat(np.arange(len(counts), dtype=np.int64), counts),
        source_rows=np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
        if len(counts)
        else np.zeros(0, dtype=np.int64),
        feature_columns=columns,
        n_sources=len(counts),
    )
    return composite, list(index)
