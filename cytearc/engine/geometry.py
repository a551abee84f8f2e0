"""What a read of a Zarr array holds in memory, and the row blocks a budget affords.

A Zarr read holds more than its result. A read of a sharded array fills a
shard-level copy of its selection, holds the compressed bytes of every inner
chunk it touches, and decodes those chunks next to them. Plans charge reads
through :meth:`ArrayGeometry.read_bytes`, at the decoded size of the
compressed bytes because a plan cannot know them before it reads:

- a row block of whole shards of a sharded array reserves twice its bytes,
  the chunks of its shards, and the one chunk being decoded;
- any other read of a sharded array (a ``countsT`` cell band, a column
  range) reserves twice its bytes and two of each chunk it touches;
- a read of an unsharded array is charged its result and the chunks it
  decodes.

The compressed bytes of a chunk an unsharded read decodes, and a decoded
chunk a codec thread still holds after a read, stay outside the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dask.utils import format_bytes

from cytearc.errors import MemBudgetError

if TYPE_CHECKING:
    import zarr

    from cytearc.storage.layout import ArrayLayout

__all__ = ["ArrayGeometry", "rows_within"]


def _span(selection: slice, length: int) -> tuple[int, int]:
    start, stop, step = selection.indices(length)
    if step != 1:
        msg = f"a planned read takes contiguous ranges, found step {step}"
        raise ValueError(msg)
    return start, max(start, stop)


@dataclass(frozen=True, kw_only=True)
class ArrayGeometry:
    """The shape, inner chunks, shards and item size of a 2-D array.

    Parameters
    ----------
    shape
        The array's ``(rows, columns)``.
    chunks
        Its inner chunk shape (the unit of decoding).
    shards
        Its shard shape, or None when it is not sharded.
    itemsize
        Bytes per value.

    Examples
    --------
    >>> counts = ArrayGeometry(shape=(10_000, 2_000), chunks=(64, 2_000), shards=(1_024, 2_000), itemsize=2)
    >>> counts.read_bytes(slice(0, 1_024))  # a whole shard: 2 x 4 MB + 4 MB of chunks + 1 chunk
    12544000
    >>> counts_t = ArrayGeometry(shape=(2_000, 10_000), chunks=(8, 10_000), shards=(512, 10_000), itemsize=2)
    >>> counts_t.read_bytes(slice(0, 8), slice(0, 100))  # a cell band: 2 x its bytes + 2 x one chunk
    323200
    """

    shape: tuple[int, int]
    chunks: tuple[int, int]
    shards: tuple[int, int] | None = None
    itemsize: int

    @classmethod
    def of(cls, array: zarr.Array[Any]) -> ArrayGeometry:
        """The geometry of a Zarr array.

        Parameters
        ----------
        array
            A 2-D Zarr array.

        Returns
        -------
        ArrayGeometry
            Its geometry.
        """
        rows, cols = array.shape
        chunk_rows, chunk_cols = array.chunks
        shards = array.shards
        return cls(
            shape=(int(rows), int(cols)),
            chunks=(int(chunk_rows), int(chunk_cols)),
            shards=None if shards is None else (int(shards[0]), int(shards[1])),
            itemsize=int(array.dtype.itemsize),
        )

    @classmethod
    def of_layout(
        cls, layout: ArrayLayout, *, shape: tuple[int, int], itemsize: int
    ) -> ArrayGeometry:
        """The geometry an array of ``shape`` will have under a count layout.

        Parameters
        ----------
        layout
            Its shard and chunk shapes (:meth:`~cytearc.storage.layout.CountLayout.array_layout`).
        shape
            The array's shape.
        itemsize
            Bytes per value.

        Returns
        -------
        ArrayGeometry
            The geometry, before the array exists.
        """
        return cls(shape=shape, chunks=layout.chunks, shards=layout.shards, itemsize=itemsize)

    @property
    def chunk_bytes(self) -> int:
        """Decoded bytes of one inner chunk."""
        return self.chunks[0] * self.chunks[1] * self.itemsize

    @property
    def unit_rows(self) -> int:
        """Rows of the unit of a safe write: a shard, else a chunk."""
        return (self.shards or self.chunks)[0]

    def chunks_touched(self, rows: slice = slice(None), cols: slice = slice(None)) -> int:
        """How many inner chunks a read of ``rows`` x ``cols`` decodes.

        Parameters
        ----------
        rows, cols
            Contiguous ranges.

        Returns
        -------
        int
            The number of chunks.
        """
        count = 1
        for selection, length, size in zip((rows, cols), self.shape, self.chunks, strict=True):
            start, stop = _span(selection, length)
            count *= 0 if stop == start else (stop - 1) // size - start // size + 1
        return count

    def read_bytes(self, rows: slice = slice(None), cols: slice = slice(None)) -> int:
        """The bytes a read of ``rows`` x ``cols`` holds at its peak (see the module's rules).

        Parameters
        ----------
        rows, cols
            Contiguous ranges; all of each by default.

        Returns
        -------
        int
            Bytes to reserve.
        """
        (r0, r1), (c0, c1) = _span(rows, self.shape[0]), _span(cols, self.shape[1])
        result = (r1 - r0) * (c1 - c0) * self.itemsize
        touched = self.chunks_touched(rows, cols) * self.chunk_bytes
        if self.shards is None:
            return result + touched
        shard_rows, shard_cols = self.shards
        whole_shards = (
            shard_cols == self.shape[1] == c1 - c0
            and r0 % shard_rows == 0
            and (r1 % shard_rows == 0 or r1 == self.shape[0])
        )
        if whole_shards:
            return 2 * result + touched + (self.chunk_bytes if result else 0)
        return 2 * result + 2 * touched

    readBytes = read_bytes  # noqa: N815 (the seed's name for it)


def rows_within(
    geometry: ArrayGeometry,
    *,
    budget: int,
    row_bytes: int = 0,
    unit: int | None = None,
    target: int | None = None,
    where: str = "array",
) -> int:
    """The rows of the largest row block (whole units) whose read and working memory fit ``budget``.

    A block of ``r`` rows costs ``geometry.read_bytes(slice(0, r)) + r * row_bytes``
    (``row_bytes``: what the task holds per row besides the read, such as a
    transposed copy or the encoded output).

    Parameters
    ----------
    geometry
        The array the block is read from.
    budget
        The memory one task may use (a worker's), bytes.
    row_bytes
        Working bytes per row besides the read.
    unit
        Rows the block is a whole multiple of; default the shard's (or chunk's) rows.
    target
        If given, the most bytes the block's values may have (smaller tasks
        hold less memory at once); at least one unit is kept.
    where
        The array, for the message.

    Returns
    -------
    int
        Rows per block: a multiple of ``unit``, at most the array's rows rounded up to a unit.

    Raises
    ------
    MemBudgetError
        Not even one unit fits ``budget``.

    Examples
    --------
    >>> counts = ArrayGeometry(shape=(10_000, 2_000), chunks=(64, 2_000), shards=(1_024, 2_000), itemsize=2)
    >>> rows_within(counts, budget=64_000_000, row_bytes=8_000)
    3072
    >>> rows_within(counts, budget=64_000_000, target=4_000_000)
    1024
    """
    step = unit or geometry.unit_rows
    n_rows, n_cols = geometry.shape

    def cost(units: int) -> int:
        rows = min(units * step, n_rows)
        return geometry.read_bytes(slice(0, rows)) + rows * row_bytes

    if cost(1) > budget:
        msg = (
            f"{where}: a block of {step} rows needs {format_bytes(cost(1))} to read and hold, "
            f"more than the {format_bytes(budget)} a worker has; raise mem_budget (on a cluster "
            "CyteArc did not start: the workers' --memory-limit), use fewer workers, or a smaller layout"
        )
        raise MemBudgetError(msg)
    most = max(1, -(-n_rows // step))
    if target is not None:
        most = min(most, max(1, target // max(1, step * n_cols * geometry.itemsize)))
    low, high = 1, most
    while low < high:
        mid = (low + high + 1) // 2
        if cost(mid) <= budget:
            low = mid
        else:
            high = mid - 1
    return low * step
