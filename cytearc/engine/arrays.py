"""Lazy arrays aligned with Zarr shards, and the one function that writes them.

A sharded Zarr array is written shard by shard: a write that covers part of a
shard reads, modifies and rewrites the whole shard object, so two tasks that
share a shard lose each other's data without an error (zarr #3514, #3682). So
every array opens with Dask chunks equal to its shards (or chunks, when
unsharded), and :func:`store_aligned` refuses any block that is not a whole
number of shards.
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks, slices_from_chunks
from dask.base import tokenize
from dask.core import flatten, get_dependencies
from dask.delayed import Delayed, delayed
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from dask.utils import format_bytes

from cytearc.errors import MemBudgetError, ShardAlignmentError
from cytearc.storage.damage import CheckedReads
from cytearc.storage.shards import streams_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import zarr
    from dask.typing import Key

__all__ = [
    "FOLD_CHAINS",
    "aligned_rows",
    "feature_bands",
    "fold_rows",
    "map_row_pieces",
    "open_lazy",
    "storage_block",
    "store_aligned",
    "streams_pieces",
    "take_rows",
    "validate_aligned",
]


def storage_block(array: zarr.Array[Any]) -> tuple[int, ...]:
    """The unit of safe parallel writes of ``array``: its shard shape, else its chunk shape.

    Parameters
    ----------
    array
        A Zarr array.

    Returns
    -------
    tuple of int
        The shape of the unit.
    """
    return tuple(array.shards or array.chunks)


def open_lazy(array: zarr.Array[Any], *, rows_per_block: int | None = None) -> da.Array:
    """``array`` as a Dask array whose blocks are its shards (or whole multiples along axis 0).

    A chunk that fails to decode when a block is computed raises
    :class:`~cytearc.errors.StoreDamageError` naming the array and the chunk
    (:mod:`cytearc.storage.damage`).

    Parameters
    ----------
    array
        A Zarr array, sharded or not (then its chunks are the unit).
    rows_per_block
        Rows of each block, a multiple of the shard's rows; default one shard.

    Returns
    -------
    dask.array.Array
        The lazy array; nothing is read until it is computed.

    Raises
    ------
    ShardAlignmentError
        ``rows_per_block`` is not a multiple of the shard's rows.

    Examples
    --------
    >>> import numpy as np, zarr
    >>> z = zarr.create_array(store={}, shape=(10, 4), shards=(4, 4), chunks=(2, 4), dtype="u2")
    >>> open_lazy(z).chunks
    ((4, 4, 2), (4,))
    """
    block = list(storage_block(array))
    if rows_per_block is not None:
        if rows_per_block % block[0]:
            msg = (
                f"rows_per_block {rows_per_block} is not a multiple of the shard's {block[0]} rows"
            )
            raise ShardAlignmentError(msg)
        block[0] = rows_per_block
    name = f"from-zarr-{tokenize(array, tuple(block))}"
    return cast("da.Array", da.from_array(CheckedReads(array), chunks=tuple(block), name=name))


def validate_aligned(
    chunks: tuple[tuple[int, ...], ...], array: zarr.Array[Any], *, where: str
) -> None:
    """Raise :class:`ShardAlignmentError` unless every block is a whole number of shards.

    The last block along an axis may end at the array's edge.

    Parameters
    ----------
    chunks
        A Dask array's chunks.
    array
        The array it is to be stored into.
    where
        The array's location, for the message.

    Raises
    ------
    ShardAlignmentError
        The dimensions differ, or a block ends inside a shard.
    """
    unit = storage_block(array)
    if len(chunks) != len(unit):
        msg = f"{where}: {len(chunks)}-d blocks for a {len(unit)}-d array"
        raise ShardAlignmentError(msg)
    for axis, (sizes, step, length) in enumerate(zip(chunks, unit, array.shape, strict=True)):
        start = 0
        for size in sizes:
            start += size
            if start % step and start != length:
                msg = (
                    f"{where}: a block ends at {start} on axis {axis}, inside a shard of {step}; "
                    "rechunk to whole shards before storing (a shared shard loses data)"
                )
                raise ShardAlignmentError(msg)


def write_block(
    array: zarr.Array[Any], block: np.ndarray, start: tuple[int, ...], *, where: str
) -> None:
    """Write ``block`` at ``start`` in one task, refusing a block that is not whole shards.

    The one way a task stores into a sharded array (graphs use
    :func:`store_aligned`, which checks every block the same way). In an
    array configured with ``write_empty_chunks``, a shard of fill values only
    is not stored (a reader takes the fill value there) and every chunk of
    the other shards is, without comparing each chunk with the fill value.

    Parameters
    ----------
    array
        The target array.
    block
        The values.
    start
        The index of the block's first element in ``array``.
    where
        The array's location, for the message.

    Raises
    ------
    ShardAlignmentError
        The block does not start and end on shard boundaries (or the array's edge).
    """
    unit = storage_block(array)
    for axis, (begin, size, step, length) in enumerate(
        zip(start, block.shape, unit, array.shape, strict=True)
    ):
        end = begin + size
        if begin % step or (end % step and end != length):
            msg = (
                f"{where}: block {begin}:{end} on axis {axis} does not cover whole shards of {step}; "
                "a partial shard written by two tasks loses data"
            )
            raise ShardAlignmentError(msg)
    writes = [(tuple(slice(0, n) for n in block.shape), False)]  # one write of the whole block
    if array.config.write_empty_chunks:
        shards = slices_from_chunks(normalize_chunks(unit, block.shape))
        fill = [_only_fill(block[shard], array.fill_value) for shard in shards]
        if len(set(fill)) > 1:
            writes = list(zip(shards, fill, strict=True))
        elif fill[0]:
            writes = [(writes[0][0], True)]
    for part, only_fill in writes:
        # Zarr deletes a chunk of fill values only when it compares each chunk with the fill value
        target = array.with_config({"write_empty_chunks": False}) if only_fill else array
        target[tuple(slice(b + p.start, b + p.stop) for b, p in zip(start, part, strict=True))] = (
            block[part]
        )


def _only_fill(block: np.ndarray, fill: Any) -> bool:  # noqa: ANN401
    if fill == 0:
        return not np.count_nonzero(block)
    return bool(np.array_equal(block, np.broadcast_to(fill, block.shape), equal_nan=True))


def store_aligned(x: da.Array, array: zarr.Array[Any], *, where: str = "store") -> Delayed:
    """A lazy write of ``x`` into ``array``, each task owning whole shards.

    Parameters
    ----------
    x
        The values, of ``array``'s shape, in blocks of whole shards.
    array
        The target array.
    where
        The array's location, for the message.

    Returns
    -------
    dask.delayed.Delayed
        The write, to be computed on the engine.

    Raises
    ------
    ShardAlignmentError
        The shapes differ, or a block of ``x`` ends inside a shard.
    """
    if tuple(x.shape) != tuple(array.shape):
        msg = f"{where}: shape {tuple(x.shape)} does not match the array's {tuple(array.shape)}"
        raise ShardAlignmentError(msg)
    validate_aligned(x.chunks, array, where=where)
    target: Any = array
    return cast("Delayed", da.store(x, target, lock=False, compute=False))


def aligned_rows(
    *, budget: int, row_bytes: int, shard_rows: int, n_rows: int, copies: float = 3.0
) -> int:
    """Rows per band: the largest multiple of ``shard_rows`` whose ``copies`` fit ``budget``.

    ``copies`` charges what a task holds besides its result (decoded and
    encoded chunks, a transposed copy). At most ``n_rows`` rounded up to a
    whole shard.

    Parameters
    ----------
    budget
        The memory of one worker, in bytes.
    row_bytes
        The bytes of one row as the task holds it.
    shard_rows
        The rows of one shard (or any unit the band must be a multiple of).
    n_rows
        The rows of the array.
    copies
        How many copies of a band a task holds at once.

    Returns
    -------
    int
        The rows per band.

    Raises
    ------
    MemBudgetError
        Not even one shard fits the budget.

    Examples
    --------
    >>> aligned_rows(budget=10_000_000, row_bytes=1000, shard_rows=512, n_rows=100_000)
    3072
    """
    per_shard = shard_rows * row_bytes * copies
    if per_shard > budget:
        msg = (
            f"one shard of {shard_rows} rows needs {format_bytes(int(per_shard))} with working "
            f"copies, more than the {format_bytes(budget)} a worker has; raise mem_budget (on a cluster CyteArc did not start: the workers' --memory-limit), use "
            "fewer workers, or a smaller layout"
        )
        raise MemBudgetError(msg)
    shards = max(1, int(budget // per_shard))
    whole = -(-n_rows // shard_rows)
    return min(shards, whole) * shard_rows


FOLD_CHAINS = 4
"""How many chains :func:`fold_rows` folds in parallel: a constant, so the sum's order never depends on the cluster."""


def _keep_rows(block: np.ndarray, keep: np.ndarray) -> np.ndarray:
    kept: np.ndarray = block[keep[:, 0]]
    return kept


def feature_bands(x: da.Array, *, target_bytes: int | None) -> da.Array:
    """``x`` (features x cells, a ``countsT``) in blocks of whole row blocks across every cell.

    Row blocks (shards) are merged until a block holds about ``target_bytes``
    of values: at a million cells a ``countsT`` shard holds one feature over
    half the cells, and a task per shard would spend more on its own
    overhead than on its two megabytes. Blocks larger than the target stay
    as they are.

    Parameters
    ----------
    x
        A lazy 2-D array whose blocks along axis 0 are its shards.
    target_bytes
        The values a block should hold at most, unless one row block is
        larger; None keeps the row blocks as they are.

    Returns
    -------
    dask.array.Array
        ``x`` with one block across axis 1 and whole row blocks along axis 0.

    Examples
    --------
    >>> x = da.zeros((10, 1_000), chunks=(1, 500), dtype="u2")
    >>> feature_bands(x, target_bytes=4_000).chunks
    ((2, 2, 2, 2, 2), (1000,))
    """
    whole: da.Array = x.rechunk({1: -1})
    step = int(whole.chunks[0][0]) if whole.chunks[0] else 1
    rows = _merged_rows(step, int(whole.shape[1]), whole.dtype.itemsize, target_bytes)
    if rows == step:
        return whole
    banded: da.Array = whole.rechunk({0: rows})
    return banded


def _merged_rows(step: int, n_columns: int, itemsize: int, target_bytes: int | None) -> int:
    """Rows per block: whole row blocks of ``step`` rows, merged up to about ``target_bytes``."""
    if target_bytes is None:
        return step
    return step * max(1, target_bytes // max(1, step * n_columns * itemsize))


def _row_block(
    block: slice | np.ndarray,
    reader: CheckedReads | None,
    per_row: list[np.ndarray],
    shared: list[Any],
    *,
    func: Callable[..., np.ndarray],
    names: tuple[str, ...],
    **kwargs: Any,
) -> np.ndarray:
    """One task of :func:`map_row_pieces`: ``func`` of a block, read in pieces (rows and a reader) or whole."""
    pieces: Iterator[tuple[int, np.ndarray]]
    if isinstance(block, slice) and reader is not None:
        pieces = reader.row_pieces(block.start, block.stop)
    else:
        pieces = iter([(0, np.asarray(block))])
    return func(pieces, *per_row, **kwargs, **dict(zip(names, shared, strict=True)))


def streams_pieces(source: zarr.Array[Any] | da.Array) -> TypeGuard[zarr.Array[Any]]:
    """Whether :func:`map_row_pieces` streams ``source`` in pieces, not reading its blocks whole.

    A stored matrix in CyteArc's layout does
    (:func:`~cytearc.storage.shards.streams_rows`); a lazy array does not.
    """
    return not isinstance(source, da.Array) and streams_rows(source)


def map_row_pieces(
    source: zarr.Array[Any] | da.Array,
    func: Callable[..., np.ndarray],
    *per_row: np.ndarray,
    rows_out: int | None,
    tail: tuple[int, ...],
    dtype: np.dtype[Any] | type[np.generic],
    target_bytes: int | None = None,
    **kwargs: Any,
) -> da.Array:
    """``func`` of every row block of a 2-D matrix, which it receives in pieces of rows.

    A stored matrix in CyteArc's layout (:func:`~cytearc.storage.shards.streams_rows`)
    is decoded one row of inner chunks at a time into a buffer of about a
    megabyte, handed to ``func`` while it is in the CPU's cache: a reduction
    over the non-zero counts (normalization statistics, pooling) then costs
    the decompression and one walk of cached values, instead of a dense
    block of every row of the shard (the size of the shard, allocated and
    faulted in by every task) walked from memory. Any other matrix (a Dask
    array, as a composite's counts; another layout) is computed block by
    block and handed over as one piece, so ``func`` is the one
    implementation for both.

    Parameters
    ----------
    source
        A stored Zarr array, or a lazy 2-D array whose row blocks are its
        storage's.
    func
        ``func(pieces, *per_row_blocks, **kwargs)``: ``pieces`` yields
        ``(offset, piece)``, consecutive rows of the block (``offset`` its
        first, relative to the block) across every column, each piece
        overwritten by the next; it returns the block's result, of shape
        ``(rows_out or the block's rows, *tail)``.
    *per_row
        1-D arrays with one value per row of ``source`` (a mask of the rows
        to use, library sizes); ``func`` receives each block's part.
    rows_out
        The rows of each block's result; None for one per row of the block.
    tail
        The result's shape after its first axis.
    dtype
        The result's dtype.
    target_bytes
        Merge whole row blocks until a block holds about this many bytes
        of values (:func:`feature_bands`); None keeps one block per shard.
    **kwargs
        Passed to ``func`` (an array is put in the graph once, not in
        every task).

    Returns
    -------
    dask.array.Array
        The blocks' results stacked along the first axis, one block each.

    Examples
    --------
    >>> import numpy as np, zarr
    >>> from zarr.codecs import BytesCodec, ZstdCodec
    >>> z = zarr.create_array(store={}, shape=(6, 4), shards=(4, 4), chunks=(2, 4), dtype="u2",
    ...                       serializer=BytesCodec(), compressors=[ZstdCodec()])
    >>> z[:] = np.arange(24).reshape(6, 4)
    >>> def row_sums(pieces, keep):
    ...     out = np.zeros(len(keep))
    ...     for offset, piece in pieces:
    ...         out[offset : offset + len(piece)] = piece.sum(axis=1)
    ...     return np.where(keep, out, 0)[:, None]
    >>> keep = np.array([True, False, True, True, True, True])
    >>> map_row_pieces(z, row_sums, keep, rows_out=None, tail=(1,), dtype=float).compute().ravel()
    array([ 6.,  0., 38., 54., 70., 86.])
    """
    for values in per_row:
        if values.shape != (source.shape[0],):
            msg = f"map_row_pieces: expected one value per row ({source.shape[0]}), found shape {values.shape}"
            raise ValueError(msg)
    # one key each for the values every block reads (a reader, arrays), not a copy in every task
    shared = {k: delayed(v) for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    options = {k: v for k, v in kwargs.items() if k not in shared}
    dependencies: list[Any] = list(shared.values())
    blocks: list[Any]
    reader: Any
    identity: Any
    if streams_pieces(source):
        step = storage_block(source)[0]
        rows = _merged_rows(step, source.shape[1], source.dtype.itemsize, target_bytes)
        starts = range(0, source.shape[0], rows)
        block_rows = tuple(min(rows, source.shape[0] - start) for start in starts)
        blocks = [slice(start, start + n) for start, n in zip(starts, block_rows, strict=True)]
        stored = delayed(CheckedReads(source), pure=False)
        reader, identity = stored.key, stored.key
        dependencies.append(stored)
    else:
        lazy = source if isinstance(source, da.Array) else open_lazy(source)
        whole = feature_bands(lazy, target_bytes=target_bytes)
        block_rows = whole.chunks[0]
        blocks = [(whole.name, i, 0) for i in range(len(block_rows))]
        reader = None
        dependencies.append(whole)
        identity = whole.name
    task = functools.partial(_row_block, func=func, names=tuple(shared), **options)
    name = "row-pieces-" + tokenize(
        identity, func, per_row, options, *shared.values(), rows_out, tail
    )
    bounds = np.cumsum((0, *block_rows))
    zeros = (0,) * len(tail)
    layer: dict[Any, Any] = {
        (name, i, *zeros): (
            task,
            block,
            reader,
            [values[bounds[i] : bounds[i + 1]] for values in per_row],
            [value.key for value in shared.values()],
        )
        for i, block in enumerate(blocks)
    }
    graph = HighLevelGraph.from_collections(name, layer, dependencies=dependencies)
    out_rows = block_rows if rows_out is None else (rows_out,) * len(block_rows)
    return da.Array(
        graph,
        name,
        chunks=(tuple(out_rows), *((n,) for n in tail)),
        meta=np.empty((0,) * (1 + len(tail)), dtype=dtype),
    )


def take_rows(x: da.Array, rows: np.ndarray) -> da.Array:
    """The rows ``rows`` (increasing, unique) of ``x``, each block cut where it is.

    ``x[rows]`` with an index array makes Dask shuffle pieces of the blocks
    between tasks (and between workers); here each block keeps its own rows
    in one task, so a row block is read and cut on the same worker.

    Parameters
    ----------
    x
        A lazy 2-D array.
    rows
        Row positions, in increasing order.

    Returns
    -------
    dask.array.Array
        ``x[rows]``, one block per block of ``x`` (empty where a block keeps
        no row).

    Raises
    ------
    ValueError
        ``rows`` is not increasing, or out of range.

    Examples
    --------
    >>> import numpy as np
    >>> x = da.arange(12, chunks=4).reshape(6, 2).rechunk((2, 2))
    >>> take_rows(x, np.array([0, 3, 4])).compute()
    array([[0, 1],
           [6, 7],
           [8, 9]])
    """
    positions = np.asarray(rows, dtype=np.int64)
    if len(positions) and (
        positions[0] < 0 or positions[-1] >= x.shape[0] or (np.diff(positions) <= 0).any()
    ):
        msg = f"take_rows: expected increasing unique rows in [0, {x.shape[0]}), found {positions[:5].tolist()}..."
        raise ValueError(msg)
    mask = np.zeros(x.shape[0], dtype=bool)
    mask[positions] = True
    bounds = np.cumsum((0, *x.chunks[0]))
    kept = tuple(int(mask[a:b].sum()) for a, b in itertools.pairwise(bounds))
    keep = da.from_array(mask[:, None], chunks=(x.chunks[0], 1))
    taken: da.Array = da.map_blocks(
        _keep_rows,
        x,
        keep,
        dtype=x.dtype,
        chunks=(kept, *x.chunks[1:]),
        meta=np.empty((0,) * x.ndim, dtype=x.dtype),
    )
    return taken


def _ordered_blocks(
    x: da.Array, keys: list[Key], position: dict[int, int], *, name: str
) -> list[Delayed]:
    """The blocks of ``x``, each task annotated with the priority of the first fold step it feeds.

    ``position`` is each block's place in its chain; a task that feeds blocks
    at several places gets the earliest (the blocks are visited by place).
    """
    graph = dict(x.__dask_graph__())
    first: dict[Key, int] = {}
    for index in sorted(position, key=position.__getitem__):
        stack = [keys[index]]
        while stack:
            key = stack.pop()
            if key not in first:
                first[key] = -position[index]
                stack.extend(get_dependencies(graph, key))
    priority = {key: first.get(key, 0) for key in graph}
    layer = MaterializedLayer(graph, annotations={"priority": priority.__getitem__})
    hlg = HighLevelGraph({name: layer}, {name: set()})
    return [Delayed(key, hlg, layer=name) for key in keys]


def _fold_step(
    total: np.ndarray | None, block: np.ndarray, *, step: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    part = step(block)
    # add into this task's own partial: the accumulator is read again if a task is retried
    if total is not None:
        part += total
    return part


def _fold_chains(totals: list[np.ndarray]) -> np.ndarray:
    result = totals[0].copy()
    for total in totals[1:]:
        result += total
    return result


def fold_rows(
    x: da.Array,
    step: Callable[[np.ndarray], np.ndarray],
    *,
    shape: tuple[int, ...],
    dtype: np.dtype[Any] | type[np.generic],
    chains: int = FOLD_CHAINS,
) -> da.Array:
    """The sum of ``step(block)`` over the row blocks of ``x``, in a fixed order and few partials.

    The row blocks are cut into ``chains`` runs of consecutive blocks; each run
    adds its blocks' partials one after the other into one accumulator, and the
    accumulators are added in run order. A tree reduction instead computes
    one partial per block and may hold many of them before it adds them (a
    2000 x 2000 Gram partial is 32 MB per block of rows); here at most
    ``chains`` accumulators live at once, and the additions happen in the same
    order on any scheduler, so the result is the same bit for bit.

    Every task that makes a block carries the priority of the first fold
    step it feeds (minus its position in its chain; a Dask ``priority``
    annotation), so a distributed scheduler makes the blocks as the chains
    fold them, every chain a step at a time. Otherwise blocks that are cheap
    to make, and that another pass of the same graph (a write) also reads,
    are made in an order of the scheduler's own and wait in a worker's
    memory for their chain's earlier steps: 2-3 GB at a million cells.
    Dask drops annotations when it fuses tasks, so compute the result with
    ``dask.config.set({"optimization.fuse.active": False})``.

    Parameters
    ----------
    x
        The lazy array, one block across every axis but the first.
    step
        The partial of one block (a new array of ``shape`` and ``dtype``).
    shape, dtype
        Of each partial and of the result.
    chains
        How many runs fold in parallel (the result depends on it).

    Returns
    -------
    dask.array.Array
        The lazy sum, one block.

    Examples
    --------
    >>> import numpy as np
    >>> x = da.arange(12.0, chunks=2).reshape(6, 2).rechunk((2, 2))
    >>> fold_rows(x, lambda b: b.T @ b, shape=(2, 2), dtype=np.float64).compute()
    array([[220., 250.],
           [250., 286.]])
    """
    if any(n != 1 for n in x.numblocks[1:]):
        msg = f"fold_rows: expected one block across every axis but the first, found {x.numblocks}"
        raise ValueError(msg)
    keys = list(flatten(x.__dask_keys__()))
    runs = min(chains, len(keys))
    name = tokenize(x, step, shape, dtype, runs)
    chain = [range(run * len(keys) // runs, (run + 1) * len(keys) // runs) for run in range(runs)]
    position = {index: at for indices in chain for at, index in enumerate(indices)}
    blocks = _ordered_blocks(x, keys, position, name=f"fold-order-{name}")
    totals = []
    for indices in chain:
        total: Any = None
        for index in indices:
            total = delayed(_fold_step, pure=True)(
                total, blocks[index], step=step, dask_key_name=f"fold-{name}-{index}"
            )
        totals.append(total)
    result = delayed(_fold_chains, pure=True)(totals, dask_key_name=f"fold-sum-{name}")
    folded: da.Array = da.from_delayed(result, shape=shape, dtype=dtype)
    return folded
