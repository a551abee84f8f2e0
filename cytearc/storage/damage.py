"""Reads of stored arrays that name a damaged chunk, and the storage units an array should have.

Regions of whole shards in CyteArc's own layout are decoded by
:func:`cytearc.storage.shards.read_shards`, others by Zarr. Zarr surfaces a chunk that fails its checksum or cannot be decoded as
whatever its codec raises (zstd's ``RuntimeError``, gzip's ``BadGzipFile`` or
``zlib.error``, crc32c's ``ValueError``), naming neither the array nor the
chunk. :func:`read_region` re-raises it as
:class:`~cytearc.errors.StoreDamageError` naming the array, the key of the
shard (or, for an unsharded array, the chunk) and, inside a shard, the inner
chunk; :class:`CheckedReads` puts every lazy read
(:func:`cytearc.engine.open_lazy`) behind it.

A *storage unit* is a shard of a sharded array, else a chunk: the object one
key of the store holds. A unit holding only the fill value is not written, so
a missing key reads as fill values; :func:`missing_units` lists the keys an
array lacks for :mod:`cytearc.storage.verify` to weigh, whose findings are
:class:`Damage` records in the :class:`Check` items of a :class:`VerifyReport`.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import math
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
from dask.base import normalize_token
from zarr.abc.codec import BytesBytesCodec
from zarr.codecs import VLenBytesCodec, VLenUTF8Codec
from zarr.core.sync import sync
from zarr.storage import FsspecStore, LocalStore

from cytearc.errors import CyteArcError, StoreDamageError, StoreFormatError
from cytearc.storage.nodes import ACCESS_ERRORS, access_error
from cytearc.storage.shards import read_shards, row_pieces, streams_rows

if TYPE_CHECKING:
    from collections.abc import Iterator

    import zarr

__all__ = [
    "DECODE_ERRORS",
    "Check",
    "CheckedReads",
    "Damage",
    "VerifyReport",
    "locate_failure",
    "missing_units",
    "naming_damage",
    "read_region",
    "store_location",
    "unit_key",
    "unit_regions",
    "unit_shape",
]

DECODE_ERRORS: Final = (RuntimeError, ValueError, EOFError, zlib.error, gzip.BadGzipFile)
"""What Zarr's codecs raise for a chunk that fails its checksum or does not decode."""

Region = tuple[slice, ...]


def unit_shape(array: zarr.Array[Any]) -> tuple[int, ...]:
    """The shape of one storage unit of ``array``: its shards, else its chunks.

    Parameters
    ----------
    array
        A Zarr v3 array.

    Returns
    -------
    tuple of int
        The unit's shape.
    """
    return tuple(array.shards or array.chunks)


def unit_key(array: zarr.Array[Any], coords: tuple[int, ...]) -> str:
    """The store key, relative to the array, of the storage unit at grid position ``coords``.

    Parameters
    ----------
    array
        A Zarr v3 array.
    coords
        The unit's position in the grid of units.

    Returns
    -------
    str
        For example ``c/3/0``.
    """
    return str(array.metadata.encode_chunk_key(coords))


def unit_regions(array: zarr.Array[Any]) -> Iterator[tuple[tuple[int, ...], Region]]:
    """Every storage unit of ``array`` in C order of the grid, with the region it covers.

    Parameters
    ----------
    array
        A Zarr v3 array.

    Yields
    ------
    tuple
        The unit's grid position and its region, clipped to the array's shape.
    """
    unit = unit_shape(array)
    grid = [math.ceil(n / u) for n, u in zip(array.shape, unit, strict=True)]
    for coords in itertools.product(*(range(g) for g in grid)):
        yield (
            coords,
            tuple(
                slice(c * u, min((c + 1) * u, n))
                for c, u, n in zip(coords, unit, array.shape, strict=True)
            ),
        )


async def _keys(store: Any, prefix: str) -> list[str]:  # noqa: ANN401 (any zarr store)
    return [key async for key in store.list_prefix(prefix)]


def missing_units(array: zarr.Array[Any]) -> list[str]:
    """The keys of the storage units that the store lacks, in C order (one listing of the store).

    A missing unit reads as fill values: it is an unwritten unit of fill
    values, or a deleted one.

    Parameters
    ----------
    array
        A Zarr v3 array.

    Returns
    -------
    list of str
        Keys relative to the array, such as ``c/3/0``.
    """
    prefix = f"{array.path}/" if array.path else ""
    stored = {key[len(prefix) :] for key in sync(_keys(array.store, prefix))}
    return [
        key for key in (unit_key(array, c) for c, _ in unit_regions(array)) if key not in stored
    ]


def store_location(array: zarr.Array[Any]) -> str:
    """The location of the store holding ``array``, as a user passes it to ``cytearc verify``.

    Parameters
    ----------
    array
        A Zarr array.

    Returns
    -------
    str
        A local path, or the store's URL.
    """
    store = array.store
    if isinstance(store, LocalStore):
        return str(store.root)
    if isinstance(store, FsspecStore):
        return str(store.fs.unstrip_protocol(store.path))
    return str(store)


def _intersecting(array: zarr.Array[Any], selection: Region) -> Iterator[tuple[int, ...]]:
    unit = unit_shape(array)
    ranges = []
    for s, u, n in zip(selection, unit, array.shape, strict=True):
        start, stop, _ = s.indices(n)
        ranges.append(range(start // u, max(start, stop - 1) // u + 1))
    return itertools.product(*ranges)


def _region(array: zarr.Array[Any], coords: tuple[int, ...], shape: tuple[int, ...]) -> Region:
    return tuple(
        slice(c * u, min((c + 1) * u, n))
        for c, u, n in zip(coords, shape, array.shape, strict=True)
    )


def _fails(array: zarr.Array[Any], region: Region) -> BaseException | None:
    try:
        array[region]
    except CyteArcError:
        raise
    except DECODE_ERRORS as exc:
        return exc
    return None


def locate_failure(array: zarr.Array[Any], selection: object) -> tuple[str, str]:
    """The key of the first storage unit of ``selection`` that fails to decode, and what fails in it.

    Each unit the selection touches is read on its own; in a failing shard,
    each inner chunk.

    Parameters
    ----------
    array
        A Zarr array.
    selection
        The region that failed (slices; anything else stands for the whole array).

    Returns
    -------
    tuple of str
        The unit's key (empty when every unit reads on its own) and what
        fails: ``the chunk``, ``inner chunk (i, j) (of the chunk grid) of the shard``, or
        ``every inner chunk of the shard (or its index)``.
    """
    if not (
        isinstance(selection, tuple)
        and len(selection) == array.ndim
        and all(isinstance(s, slice) for s in selection)
    ):
        selection = tuple(slice(None) for _ in array.shape)
    unit = unit_shape(array)
    for coords in _intersecting(array, selection):
        region = _region(array, coords, unit)
        if _fails(array, region) is None:
            continue
        key = unit_key(array, coords)
        if not array.shards:
            return key, "the chunk"
        chunks = tuple(array.chunks)
        inner = [
            c
            for c in itertools.product(
                *(
                    range(r.start // k, (r.stop - 1) // k + 1)
                    for r, k in zip(region, chunks, strict=True)
                )
            )
            if _fails(array, _region(array, c, chunks)) is not None
        ]
        total = math.prod(
            math.ceil((r.stop - r.start) / k) for r, k in zip(region, chunks, strict=True)
        )
        if len(inner) == total:
            return key, "every inner chunk of the shard (or its index)"
        return key, f"inner chunk {inner[0]} (of the chunk grid) of the shard"
    return "", "the read"


_VARIABLE_LENGTH: Final = (VLenUTF8Codec, VLenBytesCodec)


def _refuse_unbounded_decoding(array: zarr.Array[Any]) -> None:
    """Refuse variable-length text without a compressor: the decoder would trust counts read from raw bytes.

    CyteArc writes text as ``vlen-utf8`` then ``zstd``. With the compressor
    gone from ``zarr.json``, numcodecs reads the item count from the
    compressed bytes and allocates that many items (tens of GiB).
    """
    codecs = array.metadata.codecs if array.metadata.zarr_format == 3 else ()
    if (
        codecs
        and isinstance(codecs[0], _VARIABLE_LENGTH)
        and not any(isinstance(codec, BytesBytesCodec) for codec in codecs[1:])
    ):
        where = "/".join(p for p in (store_location(array), array.path) if p)
        msg = (
            f"{where}/zarr.json: codecs {[type(c).__name__ for c in codecs]}: variable-length "
            "values without a compressor after them, which CyteArc never writes (the zarr.json "
            "was edited or damaged); restore the store from a copy or import the source again"
        )
        raise StoreFormatError(msg)


def read_region(array: zarr.Array[Any], selection: Any) -> np.ndarray:  # noqa: ANN401 (any Zarr selection)
    """``array[selection]``; a chunk that fails to decode raises :class:`StoreDamageError` naming it.

    Parameters
    ----------
    array
        A Zarr array.
    selection
        What to read (slices for a region).

    Returns
    -------
    numpy.ndarray
        The values.

    Raises
    ------
    StoreDamageError
        A chunk of the region fails its checksum or cannot be decoded.
    StoreFormatError
        Variable-length values are stored without a compressor after them.
    StoreAccessError
        The storage could not be read (a remote store that did not answer
        after its retries).
    """
    with naming_damage(array, selection):
        whole = read_shards(array, selection)
        return np.asarray(array[selection]) if whole is None else whole


@contextlib.contextmanager
def naming_damage(array: zarr.Array[Any], selection: Any) -> Iterator[None]:  # noqa: ANN401 (any Zarr selection)
    """A context in which reading ``selection`` of ``array`` raises :class:`StoreDamageError` naming a damaged chunk.

    Parameters
    ----------
    array
        A Zarr array.
    selection
        The region read inside the context (for the message).

    Yields
    ------
    None
        Read inside the context.

    Raises
    ------
    StoreDamageError
        A chunk of the region fails its checksum or cannot be decoded.
    StoreFormatError
        Variable-length values are stored without a compressor after them.
    StoreAccessError
        The storage could not be read.
    """
    _refuse_unbounded_decoding(array)
    try:
        yield
    except CyteArcError:
        raise
    except DECODE_ERRORS as exc:
        key, part = locate_failure(array, selection)
        where = "/".join(p for p in (store_location(array), array.path, key) if p)
        msg = (
            f"{where}: {part} cannot be decoded ({type(exc).__name__}: {exc}); the store is damaged - "
            f"run `cytearc verify {store_location(array)}` to find every damaged chunk, then restore "
            "the store from a copy or import the source again"
        )
        raise StoreDamageError(msg) from exc
    except ACCESS_ERRORS as exc:
        where = "/".join(p for p in (store_location(array), array.path) if p)
        raise access_error(where, f"the region {selection!r}", exc) from exc


class CheckedReads:
    """A Zarr array for :func:`dask.array.from_array` whose reads name a damaged chunk.

    Parameters
    ----------
    array
        The Zarr array.
    """

    def __init__(self, array: zarr.Array[Any]) -> None:
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = array.dtype
        self.ndim = array.ndim

    def __getitem__(self, selection: Any) -> np.ndarray:  # noqa: ANN401 (any Zarr selection)
        return read_region(self.array, selection)

    def row_pieces(self, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
        """Rows ``start:stop`` over every column, in pieces (:func:`~cytearc.storage.shards.row_pieces`).

        A damaged chunk raises :class:`StoreDamageError` naming it, as
        :func:`read_region` does. An array in another layout, or rows that
        are not whole shards, are read whole, as one piece.

        Parameters
        ----------
        start, stop
            The rows.

        Yields
        ------
        tuple of int and numpy.ndarray
            ``(offset, piece)``; the piece is overwritten by the next one.
        """
        selection = (slice(start, stop), slice(None))
        if not streams_rows(self.array):
            yield 0, read_region(self.array, selection)
            return
        with naming_damage(self.array, selection):
            yield from row_pieces(self.array, start, stop)

    def __dask_tokenize__(self) -> object:
        return ("cytearc.CheckedReads", normalize_token(self.array))


# --- what a verification found ---------------------------------------------------

Status = Literal["ok", "damaged", "unchecked"]


@dataclass(frozen=True, kw_only=True)
class Damage:
    """What was found damaged: the array, its shard or chunk, what was expected and found, the remedy.

    Parameters
    ----------
    array
        The array's path in the store (``matrices/RNA/counts``), or the
        node's (an artifact group, ``zarr.json``).
    chunk
        The key of the shard or chunk below ``array`` (``c/3/0``), or None
        when the damage cannot be placed in one.
    expected
        What the store recorded.
    found
        What reading it gave.
    remedy
        What to do.
    """

    array: str
    chunk: str | None
    expected: str
    found: str
    remedy: str

    def __str__(self) -> str:
        where = f"{self.array}/{self.chunk}" if self.chunk else self.array
        return f"{where}: expected {self.expected}, found {self.found}; {self.remedy}"

    def to_json(self) -> dict[str, Any]:
        """The damage as JSON.

        Returns
        -------
        dict
            ``{array, chunk, expected, found, remedy}``.
        """
        return {
            "array": self.array,
            "chunk": self.chunk,
            "expected": self.expected,
            "found": self.found,
            "remedy": self.remedy,
        }


@dataclass(frozen=True, kw_only=True)
class Check:
    """One check of a verification and its outcome.

    Parameters
    ----------
    item
        What was checked: an array's path, or ``zarr.json``, or an artifact's.
    what
        The check (``content fingerprint``, ``same values as counts``, ...).
    status
        ``ok``, ``damaged`` or ``unchecked``.
    damage
        What was found, when damaged.
    note
        Why it was not checked, or a detail.
    """

    item: str
    what: str
    status: Status
    damage: Damage | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """The check as JSON.

        Returns
        -------
        dict
            ``{item, what, status, damage, note}``.
        """
        return {
            "item": self.item,
            "what": self.what,
            "status": self.status,
            "damage": None if self.damage is None else self.damage.to_json(),
            "note": self.note,
        }


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    """The outcome of :func:`verify_store`: every check, in order, and the first damage.

    Parameters
    ----------
    location
        The store's location.
    checks
        Every check made.
    """

    location: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """No check found damage (unchecked items do not count)."""
        return self.damage is None

    @property
    def damage(self) -> Damage | None:
        """The first damage found, or None."""
        return next((c.damage for c in self.checks if c.damage is not None), None)

    @property
    def damaged(self) -> tuple[Check, ...]:
        """The checks that found damage."""
        return tuple(c for c in self.checks if c.status == "damaged")

    @property
    def unchecked(self) -> tuple[Check, ...]:
        """The items that could not be checked (such as artifacts without recorded digests)."""
        return tuple(c for c in self.checks if c.status == "unchecked")

    def to_json(self) -> dict[str, Any]:
        """The report as JSON.

        Returns
        -------
        dict
            ``{path, ok, damage, checks}``.
        """
        return {
            "path": self.location,
            "ok": self.ok,
            "damage": None if self.damage is None else self.damage.to_json(),
            "checks": [c.to_json() for c in self.checks],
        }

    def __str__(self) -> str:
        lines = [
            f"{'OK' if self.ok else 'DAMAGED'} {self.location}: {len(self.checks)} checks, {len(self.damaged)} damaged, {len(self.unchecked)} unchecked"
        ]
        for c in self.checks:
            detail = f": {c.damage}" if c.damage else (f" ({c.note})" if c.note else "")
            lines.append(f"  {c.status:9} {c.item} [{c.what}]{detail}")
        return "\n".join(lines)
