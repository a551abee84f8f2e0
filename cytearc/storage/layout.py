"""The layout policy of count arrays: shard and chunk shapes from two byte sizes.

``unitBytes`` is the target size of a shard, the unit of safe parallel
writes; ``chunkBytes`` the target size of an inner chunk, the unit of partial
reads. The policy is recorded as ``cytearc:countMatrixLayout`` on the matrix
group, ``counts`` and ``countsT``, and replayed by readers to check the live
arrays. A smaller policy halves both sizes together, keeping the chunks per
shard, down to shards of one row.

Row counts of shards are powers of two up to :data:`IDENTITY_ROWS` and whole
multiples of it above, so that the identity blocks of
:mod:`cytearc.storage.identity` never straddle two write tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from dask.utils import format_bytes

from cytearc.errors import LayoutError

__all__ = ["DEFAULT_LAYOUT", "IDENTITY_ROWS", "ArrayLayout", "CountLayout"]

IDENTITY_ROWS: Final = 256
"""Rows per identity block; shard row counts divide it or are multiples of it."""


@dataclass(frozen=True, kw_only=True)
class ArrayLayout:
    """Shard and inner chunk shapes of one 2-D count array."""

    shards: tuple[int, int]
    chunks: tuple[int, int]

    @property
    def chunks_per_shard(self) -> int:
        """Inner chunks in one shard."""
        return (self.shards[0] // self.chunks[0]) * (self.shards[1] // self.chunks[1])


def _rows_aligned(rows: int) -> int:
    """``rows`` rounded down to a power of two below 256 or a multiple of 256 above."""
    if rows >= IDENTITY_ROWS:
        return rows - rows % IDENTITY_ROWS
    return 1 << (max(rows, 1).bit_length() - 1)


@dataclass(frozen=True, kw_only=True)
class CountLayout:
    """A layout policy: target bytes of a shard (``unit_bytes``) and of an inner chunk.

    Examples
    --------
    >>> policy = CountLayout(unit_bytes=2**24, chunk_bytes=2**20)
    >>> policy.array_layout((100_000, 20_000), itemsize=2)
    ArrayLayout(shards=(256, 20000), chunks=(16, 20000))
    >>> policy.halved()
    CountLayout(unit_bytes=8388608, chunk_bytes=524288)
    """

    unit_bytes: int
    chunk_bytes: int

    def __post_init__(self) -> None:
        if not (0 < self.chunk_bytes <= self.unit_bytes):
            msg = f"layout: expected 0 < chunkBytes <= unitBytes, found {self.chunk_bytes} and {self.unit_bytes}"
            raise LayoutError(msg)

    def array_layout(self, shape: tuple[int, int], *, itemsize: int) -> ArrayLayout:
        """Shards of whole rows of about ``unit_bytes``; chunks of about ``chunk_bytes``.

        A row wider than ``chunk_bytes`` is split into column chunks; a shard
        holds at least one chunk. The rule, step by step, is in
        ``docs/store-format.md`` (*Layout policy*).

        Parameters
        ----------
        shape
            The array's ``(rows, columns)``.
        itemsize
            Bytes per value of its dtype.

        Returns
        -------
        ArrayLayout
            Its shard and chunk shapes.
        """
        n_rows, n_cols = max(shape[0], 1), max(shape[1], 1)
        row_bytes = n_cols * itemsize
        if row_bytes > self.chunk_bytes:
            chunk_cols = max(1, min(n_cols, self.chunk_bytes // itemsize))
            chunk_rows = 1
        else:
            chunk_cols = n_cols
            chunk_rows = _rows_aligned(min(n_rows, self.chunk_bytes // row_bytes))
        per_shard = max(1, self.unit_bytes // self.chunk_bytes)
        shard_rows = (
            _rows_aligned(min(n_rows, chunk_rows * per_shard)) if chunk_cols == n_cols else 1
        )
        shard_rows = max(shard_rows - shard_rows % chunk_rows, chunk_rows)
        shard_cols = n_cols
        if chunk_cols < n_cols:
            shard_cols = min(n_cols, chunk_cols * per_shard)
            shard_cols -= shard_cols % chunk_cols
        return ArrayLayout(shards=(shard_rows, shard_cols), chunks=(chunk_rows, chunk_cols))

    def halved(self) -> CountLayout:
        """The next smaller policy: both sizes halved, so shards keep their chunk count.

        Returns
        -------
        CountLayout
            The halved policy (each size at least 1).
        """
        return CountLayout(
            unit_bytes=max(1, self.unit_bytes // 2), chunk_bytes=max(1, self.chunk_bytes // 2)
        )

    def to_json(self) -> dict[str, int]:
        """The ``cytearc:countMatrixLayout`` record.

        Returns
        -------
        dict of str to int
            ``{"unitBytes": ..., "chunkBytes": ...}``.
        """
        return {"unitBytes": self.unit_bytes, "chunkBytes": self.chunk_bytes}

    @classmethod
    def from_json(cls, value: Any, *, where: str) -> CountLayout:  # noqa: ANN401 (a JSON value)
        """Parse a layout record strictly: exactly ``unitBytes`` and ``chunkBytes``, positive ints.

        Parameters
        ----------
        value
            The attribute's value.
        where
            The node, for the message.

        Returns
        -------
        CountLayout
            The policy.

        Raises
        ------
        LayoutError
            The record has other keys, or values that are not integers with
            ``0 < chunkBytes <= unitBytes``.
        """
        keys = {"unitBytes", "chunkBytes"}
        if (
            not isinstance(value, dict)
            or set(value) != keys
            or not all(isinstance(value[k], int) and not isinstance(value[k], bool) for k in keys)
        ):
            msg = (
                f"{where}: attribute 'cytearc:countMatrixLayout': expected exactly integer "
                f"unitBytes and chunkBytes, found {value!r}; re-import the source (the store cannot be read without its layout record)"
            )
            raise LayoutError(msg)
        return cls(unit_bytes=value["unitBytes"], chunk_bytes=value["chunkBytes"])

    def __str__(self) -> str:
        return f"unitBytes={format_bytes(self.unit_bytes)}, chunkBytes={format_bytes(self.chunk_bytes)}"


DEFAULT_LAYOUT: Final = CountLayout(unit_bytes=64 * 2**20, chunk_bytes=2**20)
"""The policy imports write unless given another: 64 MiB shards of 1 MiB chunks."""
