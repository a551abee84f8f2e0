"""Reads of a composite store's virtual counts, gathered from its source stores' count arrays.

A *composite* store presents the cells of several source stores as one
dataset without copying counts. Its output axes map onto the sources through
a :class:`~cytearc.storage.composite_map.CompositeMap` (which
:func:`~cytearc.storage.composite_map.merge_map` builds in
:class:`~cytearc.tools.DataStoreMerge`'s layout).

:class:`VirtualArrayReader` reads a selection of output cells and features
from each source it touches, in one orthogonal Zarr selection of only the
selected rows and columns, and scatters the values into the output. Each
source stores ``counts`` (cells x features) and, for RNA assays, ``countsT``
(features x cells); a read uses the orientation that touches fewer chunk
bytes. For the distinct source rows ``R`` and source columns ``C`` that the
selection needs from a source, with inner chunks of shape ``(a, b)`` in
``counts`` and ``(p, q)`` in ``countsT`` and items of ``s`` bytes::

    bytes(counts)  = |{r // a : r in R}| * |{c // b : c in C}| * a * b * s
    bytes(countsT) = |{c // p : c in C}| * |{r // q : r in R}| * p * q * s

that is, the number of inner chunks the selection intersects times the
uncompressed size of one (full) inner chunk: the bytes fetched and decoded.
``countsT`` is read when it exists and ``bytes(countsT) < bytes(counts)``;
ties read ``counts``. :meth:`VirtualArrayReader.plan` reports the choice.

:meth:`VirtualArrayReader.feature_stream` reads consecutive groups of
features, batching adjacent groups into one read per source while the
batch fits a memory budget, so each source chunk is decoded once per batch;
:func:`virtual_dask_array` is the output as a lazy Dask array (cells x
features, or features x cells: the virtual ``countsT``) whose blocks the
reader computes. A chunk that fails to decode raises
:class:`~cytearc.errors.StoreDamageError` naming the source array and the
shard (:mod:`cytearc.storage.damage`).

Examples
--------
>>> import numpy as np, zarr
>>> from cytearc.storage.composite_map import merge_map
>>> def source(values):
...     counts = zarr.create_array(store={}, shape=values.shape, shards=(4, 2),
...                                chunks=(2, 2), dtype="u2")
...     counts[...] = values
...     counts_t = zarr.create_array(store={}, shape=values.T.shape, shards=(2, 4),
...                                  chunks=(1, 4), dtype="u2")
...     counts_t[...] = values.T
...     return counts, counts_t
>>> a, a_t = source(np.arange(12, dtype="u2").reshape(4, 3))
>>> b, b_t = source(np.full((2, 2), 7, dtype="u2"))
>>> composite, ids = merge_map(n_cells=[4, 2], feature_ids=[["x", "y", "z"], ["z", "w"]])
>>> ids
['x', 'y', 'z', 'w']
>>> reader = VirtualArrayReader(
...     composite,
...     [SourceArrays(counts=a, counts_t=a_t, name="a"),
...      SourceArrays(counts=b, counts_t=None, name="b")],
...     dtype="u2", shape=(6, 4))
>>> reader.read(slice(2, 6), np.array([3, 2, 0]))
array([[ 0,  8,  6],
       [ 0, 11,  9],
       [ 7,  7,  0],
       [ 7,  7,  0]], dtype=uint16)
>>> [(p.name, p.orientation) for p in reader.plan(slice(None), [2])]
[('a', 'countsT'), ('b', 'counts')]
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import dask.array as da
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from dask.base import normalize_token, tokenize

from cytearc.errors import CyteArcError, OperationArgumentError, StoreDamageError, StoreFormatError
from cytearc.storage.composite_map import (
    CompositeMap,
    Selection,
    SourcePart,
    selection_positions,
    validate_positive,
)
from cytearc.storage.damage import DECODE_ERRORS, read_region, store_location
from cytearc.storage.nodes import ACCESS_ERRORS, access_error

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import zarr

__all__ = [
    "SourceArrays",
    "SourcePlan",
    "VirtualArrayReader",
    "VirtualBlocks",
    "virtual_dask_array",
]

Orientation: TypeAlias = Literal["counts", "countsT"]
Layout: TypeAlias = Literal["cells", "features"]


@dataclass(frozen=True, kw_only=True)
class SourceArrays:
    """One source's count arrays of the assay.

    Parameters
    ----------
    counts
        Cells x features.
    counts_t
        Features x cells (``counts`` transposed), or None when the source
        stores no ``countsT`` (then every read uses ``counts``).
    name
        The source's name, for messages and plans.

    Raises
    ------
    StoreFormatError
        ``counts`` is not 2-D, or ``counts_t`` is not its transpose in shape and dtype.
    """

    counts: zarr.Array[Any]
    counts_t: zarr.Array[Any] | None
    name: str

    def __post_init__(self) -> None:
        if self.counts.ndim != 2:
            msg = f"source {self.name!r}: counts has shape {self.counts.shape}, expected cells x features"
            raise StoreFormatError(msg)
        if self.counts_t is not None and (
            tuple(self.counts_t.shape) != tuple(self.counts.shape)[::-1]
            or self.counts_t.dtype != self.counts.dtype
        ):
            msg = f"source {self.name!r}: countsT has shape {self.counts_t.shape} and dtype {self.counts_t.dtype}, expected {tuple(self.counts.shape)[::-1]} and {self.counts.dtype} (counts transposed)"
            raise StoreFormatError(msg)


@dataclass(frozen=True, kw_only=True)
class SourcePlan:
    """How a read takes its values from one source.

    Parameters
    ----------
    source
        The source's index.
    name
        The source's name.
    orientation
        The array read: ``counts`` or ``countsT``.
    counts_bytes
        The uncompressed bytes of the inner chunks of ``counts`` the read would touch.
    counts_t_bytes
        The same for ``countsT``, or None when the source has none.
    n_rows
        The distinct source rows read.
    n_columns
        The distinct source columns read.
    """

    source: int
    name: str
    orientation: Orientation
    counts_bytes: int
    counts_t_bytes: int | None
    n_rows: int
    n_columns: int

    @property
    def read_bytes(self) -> int:
        """The chunk bytes the chosen orientation touches."""
        if self.orientation == "countsT":
            return cast("int", self.counts_t_bytes)
        return self.counts_bytes


@dataclass(frozen=True, kw_only=True)
class _Part:
    """One source's share of one axis: output positions, distinct source indices, chunk counts."""

    out: np.ndarray
    values: np.ndarray
    inverse: np.ndarray
    counts_chunks: int
    counts_t_chunks: int


def _chunks_touched(values: np.ndarray, chunk: int) -> int:
    """How many chunks of ``chunk`` positions hold the sorted ``values``."""
    bins = values // chunk
    return int(np.count_nonzero(np.diff(bins))) + 1


def _contiguous(positions: np.ndarray) -> slice | np.ndarray:
    """Positions as a slice when they run ``a, a + 1, ..., b``, else themselves."""
    if len(positions) and bool((np.diff(positions) == 1).all()):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


def _cross(rows: np.ndarray, columns: np.ndarray) -> tuple[Any, ...]:
    """The index of the outer product ``rows x columns``, by slices where they are contiguous."""
    first, second = _contiguous(rows), _contiguous(columns)
    if isinstance(first, np.ndarray) and isinstance(second, np.ndarray):
        return np.ix_(first, second)
    return (first, second)


def _unit_indices(index: slice | np.ndarray, unit: int) -> np.ndarray:
    if isinstance(index, slice):
        return np.arange(index.start // unit, (index.stop - 1) // unit + 1)
    return np.unique(index // unit)


def _read_orthogonal(
    array: zarr.Array[Any], selection: tuple[slice | np.ndarray, ...]
) -> np.ndarray:
    """``array.oindex[selection]``; a chunk that fails to decode raises :class:`StoreDamageError` naming it."""
    try:
        return np.asarray(array.get_orthogonal_selection(selection))
    except CyteArcError:
        raise
    except DECODE_ERRORS as exc:
        unit = tuple(array.shards or array.chunks)
        grids = [_unit_indices(i, u) for i, u in zip(selection, unit, strict=True)]
        for coords in itertools.product(*grids):
            read_region(
                array,
                tuple(
                    slice(int(c) * u, min((int(c) + 1) * u, n))
                    for c, u, n in zip(coords, unit, array.shape, strict=True)
                ),
            )
        where = "/".join(p for p in (store_location(array), array.path) if p)
        msg = f"{where}: an orthogonal read failed to decode ({type(exc).__name__}: {exc}) but each of its shards reads on its own; run `cytearc verify {store_location(array)}`"
        raise StoreDamageError(msg) from exc
    except ACCESS_ERRORS as exc:
        where = "/".join(p for p in (store_location(array), array.path) if p)
        raise access_error(where, "an orthogonal selection", exc) from exc


class VirtualArrayReader:
    """The virtual counts of a composite store (cells x features), read from its sources.

    A read takes from each source it touches only the selected rows and
    columns, in one orthogonal selection of whichever of ``counts`` and
    ``countsT`` touches fewer chunk bytes (the rule is in
    :mod:`cytearc.storage.virtual`), and scatters them into the output;
    features a source lacks are zero. The reader holds only Zarr arrays and
    the map, so it pickles to distributed workers.

    Parameters
    ----------
    composite
        Where the output cells and features lie in the sources.
    sources
        Each source's arrays, in source order.
    dtype
        The output dtype; each source's dtype must cast to it safely.
    shape
        The composite's recorded ``(n_cells, n_features)``, checked against the map.

    Raises
    ------
    StoreFormatError
        The sources, the map, the dtype and the shape disagree.
    """

    def __init__(
        self,
        composite: CompositeMap,
        sources: Sequence[SourceArrays],
        *,
        dtype: npt.DTypeLike,
        shape: tuple[int, int],
    ) -> None:
        self.composite = composite
        self.sources = tuple(sources)
        self.dtype = np.dtype(dtype)
        self.shape = composite.shape
        self.ndim = 2
        composite.validate_sources(
            [tuple(s.counts.shape) for s in self.sources], names=[s.name for s in self.sources]
        )
        if tuple(shape) != composite.shape:
            msg = f"composite shape {tuple(shape)} disagrees with its map's {composite.shape} (cells x features); rebuild the composite store"
            raise StoreFormatError(msg)
        for source in self.sources:
            if not np.can_cast(source.counts.dtype, self.dtype, casting="safe"):
                msg = f"source {source.name!r}: counts of dtype {source.counts.dtype} do not cast safely to the composite's {self.dtype}; rebuild the composite with a wider dtype"
                raise StoreFormatError(msg)

    def __dask_tokenize__(self) -> object:
        return (
            "cytearc.VirtualArrayReader",
            [
                (s.name, normalize_token(s.counts), normalize_token(s.counts_t))
                for s in self.sources
            ],
            normalize_token(self.composite.row_sources),
            normalize_token(self.composite.source_rows),
            normalize_token(self.composite.feature_columns),
            str(self.dtype),
        )

    def _parts(self, shares: tuple[SourcePart, ...], *, axis: int) -> list[_Part | None]:
        parts: list[_Part | None] = []
        for source, (out, values) in zip(self.sources, shares, strict=True):
            if not len(out):
                parts.append(None)
                continue
            distinct, inverse = np.unique(values, return_inverse=True)
            counts_t = source.counts_t
            parts.append(
                _Part(
                    out=out,
                    values=distinct,
                    inverse=inverse,
                    counts_chunks=_chunks_touched(distinct, source.counts.chunks[axis]),
                    counts_t_chunks=0
                    if counts_t is None
                    else _chunks_touched(distinct, counts_t.chunks[1 - axis]),
                )
            )
        return parts

    def _plans(
        self, rows: list[_Part | None], columns: list[_Part | None]
    ) -> list[tuple[SourcePlan, _Part, _Part]]:
        plans = []
        for index, (source, row, column) in enumerate(
            zip(self.sources, rows, columns, strict=True)
        ):
            if row is None or column is None:
                continue
            itemsize = np.dtype(source.counts.dtype).itemsize
            counts_bytes = (
                row.counts_chunks
                * column.counts_chunks
                * math.prod(source.counts.chunks)
                * itemsize
            )
            counts_t_bytes = None
            orientation: Orientation = "counts"
            if source.counts_t is not None:
                counts_t_bytes = (
                    row.counts_t_chunks
                    * column.counts_t_chunks
                    * math.prod(source.counts_t.chunks)
                    * itemsize
                )
                if counts_t_bytes < counts_bytes:
                    orientation = "countsT"
            plan = SourcePlan(
                source=index,
                name=source.name,
                orientation=orientation,
                counts_bytes=counts_bytes,
                counts_t_bytes=counts_t_bytes,
                n_rows=len(row.values),
                n_columns=len(column.values),
            )
            plans.append((plan, row, column))
        return plans

    def _row_parts(self, rows: Selection) -> list[_Part | None]:
        return self._parts(self.composite.rows_by_source(rows), axis=0)

    def _column_parts(self, features: Selection) -> list[_Part | None]:
        return self._parts(self.composite.columns_by_source(features), axis=1)

    def plan(self, rows: Selection, features: Selection) -> tuple[SourcePlan, ...]:
        """How :meth:`read` would take a selection from each source it touches.

        Parameters
        ----------
        rows
            Output cell positions (:data:`Selection`).
        features
            Output feature positions.

        Returns
        -------
        tuple of SourcePlan
            One per source holding a selected cell and a selected feature, in source order.
        """
        return tuple(
            p for p, _, _ in self._plans(self._row_parts(rows), self._column_parts(features))
        )

    def _block(self, plan: SourcePlan, row: _Part, column: _Part) -> np.ndarray:
        """The distinct rows x distinct columns of one source (cells x features; a view if transposed)."""
        source = self.sources[plan.source]
        if plan.orientation == "countsT":
            counts_t = cast("zarr.Array[Any]", source.counts_t)
            return _read_orthogonal(
                counts_t, (_contiguous(column.values), _contiguous(row.values))
            ).T
        return _read_orthogonal(
            source.counts, (_contiguous(row.values), _contiguous(column.values))
        )

    def _gather(
        self, rows: list[_Part | None], n_rows: int, features: np.ndarray, *, layout: Layout
    ) -> np.ndarray:
        columns = self._column_parts(features)
        shape = (n_rows, len(features)) if layout == "cells" else (len(features), n_rows)
        out = np.zeros(shape, self.dtype)
        for plan, row, column in self._plans(rows, columns):
            block = self._block(plan, row, column)
            if layout == "cells":
                out[_cross(row.out, column.out)] = block[_cross(row.inverse, column.inverse)]
            else:
                out[_cross(column.out, row.out)] = block.T[_cross(column.inverse, row.inverse)]
        return out

    def read(self, rows: Selection, features: Selection, *, layout: Layout = "cells") -> np.ndarray:
        """The dense values of a selection of output cells and features.

        Parameters
        ----------
        rows
            Output cell positions (:data:`Selection`): a slice, integers in
            any order (repeats allowed, negative ones count from the end) or
            a boolean mask.
        features
            Output feature positions, likewise.
        layout
            ``cells`` for cells x features, ``features`` for features x cells
            (a block of the virtual ``countsT``, assembled without a transpose copy).

        Returns
        -------
        numpy.ndarray
            The values in the output dtype, in selection order.

        Raises
        ------
        OperationArgumentError
            A selection is malformed or outside the output.
        StoreDamageError
            A source chunk fails to decode; the message names it.
        StoreAccessError
            A source's storage could not be read.
        """
        positions = selection_positions(rows, self.shape[0], what="rows")
        columns = selection_positions(features, self.shape[1], what="features")
        return self._gather(self._row_parts(positions), len(positions), columns, layout=layout)

    def read_sparse(self, rows: Selection, features: Selection) -> sp.csr_matrix:
        """The values of a selection as a sparse matrix, one source's dense block at a time.

        Parameters
        ----------
        rows
            Output cell positions (:data:`Selection`).
        features
            Output feature positions.

        Returns
        -------
        scipy.sparse.csr_matrix
            Cells x features in the output dtype, with sorted indices.
        """
        n_rows = len(selection_positions(rows, self.shape[0], what="rows"))
        n_features = len(selection_positions(features, self.shape[1], what="features"))
        coo_rows, coo_columns, data = [], [], []
        for plan, row, column in self._plans(self._row_parts(rows), self._column_parts(features)):
            block = self._block(plan, row, column)[_cross(row.inverse, column.inverse)]
            r, c = np.nonzero(block)
            coo_rows.append(row.out[r])
            coo_columns.append(column.out[c])
            data.append(block[r, c].astype(self.dtype))
        matrix = sp.coo_matrix(
            (
                np.concatenate(data) if data else np.zeros(0, self.dtype),
                (
                    np.concatenate(coo_rows) if coo_rows else np.zeros(0, np.int64),
                    np.concatenate(coo_columns) if coo_columns else np.zeros(0, np.int64),
                ),
            ),
            shape=(n_rows, n_features),
            dtype=self.dtype,
        ).tocsr()
        matrix.sort_indices()
        return matrix

    def _batch_bytes(self, rows: list[_Part | None], n_rows: int, features: np.ndarray) -> int:
        touched = sum(p.read_bytes for p, _, _ in self._plans(rows, self._column_parts(features)))
        return n_rows * len(features) * self.dtype.itemsize + touched

    def batch_groups(
        self,
        groups: Sequence[Selection],
        *,
        rows: Selection | None = None,
        budget_bytes: int,
    ) -> tuple[range, ...]:
        """How :meth:`feature_stream` batches ``groups``: consecutive runs of group indices.

        A batch grows by the next group while its dense output
        (``n_rows x its features x itemsize``) plus the source chunk bytes
        its read touches (:meth:`plan`) fit ``budget_bytes``; a group that
        alone exceeds the budget is a batch of its own.

        Parameters
        ----------
        groups
            Output feature positions of each group (:data:`Selection`).
        rows
            Output cell positions; default every cell.
        budget_bytes
            The bytes one batch may hold.

        Returns
        -------
        tuple of range
            The group indices of each batch, in order, covering every group once.

        Raises
        ------
        OperationArgumentError
            ``budget_bytes`` is not a positive integer, or a selection is malformed.
        """
        row_parts, n_rows = self._rows_for_stream(rows)
        return self._batches(groups, row_parts, n_rows, budget_bytes=budget_bytes)[0]

    def _rows_for_stream(self, rows: Selection | None) -> tuple[list[_Part | None], int]:
        selection = slice(None) if rows is None else rows
        return (
            self._row_parts(selection),
            len(selection_positions(selection, self.shape[0], what="rows")),
        )

    def _batches(
        self,
        groups: Sequence[Selection],
        rows: list[_Part | None],
        n_rows: int,
        *,
        budget_bytes: int,
    ) -> tuple[tuple[range, ...], list[np.ndarray]]:
        validate_positive("feature_stream", "budget_bytes", budget_bytes)
        positions = [
            selection_positions(g, self.shape[1], what=f"groups[{i}]") for i, g in enumerate(groups)
        ]
        batches: list[range] = []
        start = 0
        current = positions[0] if positions else np.zeros(0, np.int64)
        for index in range(1, len(positions)):
            candidate = np.concatenate([current, positions[index]])
            if self._batch_bytes(rows, n_rows, candidate) <= budget_bytes:
                current = candidate
                continue
            batches.append(range(start, index))
            start, current = index, positions[index]
        if positions:
            batches.append(range(start, len(positions)))
        return tuple(batches), positions

    def feature_stream(
        self,
        groups: Sequence[Selection],
        *,
        rows: Selection | None = None,
        budget_bytes: int,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """The values of consecutive groups of features, adjacent groups read together.

        Groups are batched as :meth:`batch_groups` says; each batch is one
        read per source (each of its chunks fetched and decoded once), and
        its groups are yielded as views of the batch's block. A single group
        larger than the budget is still read, alone.

        Parameters
        ----------
        groups
            Output feature positions of each group (:data:`Selection`), such
            as bands of features.
        rows
            Output cell positions; default every cell.
        budget_bytes
            The bytes one batch may hold: its dense output plus the source
            chunk bytes it touches.

        Yields
        ------
        tuple of (int, numpy.ndarray)
            The group's index and its values, ``n_rows x len(group)``, in order.

        Raises
        ------
        OperationArgumentError
            ``budget_bytes`` is not a positive integer, or a selection is malformed.
        """
        row_parts, n_rows = self._rows_for_stream(rows)
        batches, positions = self._batches(groups, row_parts, n_rows, budget_bytes=budget_bytes)
        for batch in batches:
            features = np.concatenate([positions[i] for i in batch])
            block = self._gather(row_parts, n_rows, features, layout="cells")
            offset = 0
            for index in batch:
                width = len(positions[index])
                yield index, block[:, offset : offset + width]
                offset += width


def _expand(selection: object, ndim: int) -> tuple[list[Selection], tuple[int, ...]] | None:
    """Per-axis selections and the axes integers remove, or None for anything else (``None``, steps)."""
    items = list(selection) if isinstance(selection, tuple) else [selection]
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (ndim - len(items) + 1)
    items += [slice(None)] * (ndim - len(items))
    axes: list[Selection] = []
    squeeze = []
    for axis, item in enumerate(items):
        if isinstance(item, bool):
            return None
        if isinstance(item, int | np.integer):
            axes.append([int(item)])
            squeeze.append(axis)
        elif isinstance(item, slice | np.ndarray | list):
            axes.append(item)
        else:
            return None
    return (axes, tuple(squeeze)) if len(axes) == ndim else None


class VirtualBlocks:
    """The reader as an array, in one orientation: for :func:`dask.array.from_array` and the Zarr adapter.

    Parameters
    ----------
    reader
        The composite's reader.
    orientation
        ``cells`` (cells x features) or ``features`` (features x cells).
    """

    def __init__(self, reader: VirtualArrayReader, orientation: Layout) -> None:
        self.reader = reader
        self.orientation = orientation
        self.shape = reader.shape if orientation == "cells" else reader.shape[::-1]
        self.dtype = reader.dtype
        self.ndim = 2

    def __getitem__(self, selection: object) -> np.ndarray:
        """The block at ``selection``: slices, integer arrays or integers (Dask fuses ``x[i]`` in)."""
        axes = _expand(selection, self.ndim)
        if axes is None:
            return np.asarray(self[slice(None), slice(None)][cast("Any", selection)])
        (first, second), squeeze = axes
        if self.orientation == "cells":
            block = self.reader.read(first, second, layout="cells")
        else:
            block = self.reader.read(second, first, layout="features")
        return block.squeeze(axis=squeeze) if squeeze else block

    def __dask_tokenize__(self) -> object:
        return ("cytearc.VirtualBlocks", normalize_token(self.reader), self.orientation)


def virtual_dask_array(
    reader: VirtualArrayReader, *, orientation: Layout, block_rows: int
) -> da.Array:
    """The virtual counts as a lazy Dask array whose blocks the reader computes.

    Parameters
    ----------
    reader
        The composite's reader.
    orientation
        ``cells`` for cells x features (the virtual ``counts``), ``features``
        for features x cells (the virtual ``countsT``).
    block_rows
        Rows of each block along the first axis; blocks span the second axis.

    Returns
    -------
    dask.array.Array
        The lazy array; nothing is read until it is computed.

    Raises
    ------
    OperationArgumentError
        ``orientation`` or ``block_rows`` is invalid.

    Examples
    --------
    >>> import zarr
    >>> from cytearc.storage.composite_map import merge_map
    >>> counts = zarr.create_array(store={}, shape=(5, 2), shards=(2, 2), chunks=(1, 2), dtype="u2")
    >>> counts[...] = np.arange(10).reshape(5, 2)
    >>> composite, _ = merge_map(n_cells=[5], feature_ids=[["a", "b"]])
    >>> reader = VirtualArrayReader(composite, [SourceArrays(counts=counts, counts_t=None, name="s")],
    ...                             dtype="u4", shape=(5, 2))
    >>> x = virtual_dask_array(reader, orientation="features", block_rows=1)
    >>> x.chunks, x.dtype
    (((1, 1), (5,)), dtype('uint32'))
    >>> x[1].compute(scheduler="sync")
    array([1, 3, 5, 7, 9], dtype=uint32)
    """
    if orientation not in {"cells", "features"}:
        msg = (
            f"virtual_dask_array: orientation must be 'cells' or 'features', found {orientation!r}"
        )
        raise OperationArgumentError(msg)
    validate_positive("virtual_dask_array", "block_rows", block_rows)
    blocks = VirtualBlocks(reader, orientation)
    n_second = blocks.shape[1]
    name = f"virtual-{orientation}-{tokenize(blocks, block_rows)}"
    return cast(
        "da.Array",
        da.from_array(
            blocks,
            chunks=(block_rows, max(n_second, 1)),
            name=name,
            meta=np.empty((0, 0), dtype=reader.dtype),
        ),
    )
