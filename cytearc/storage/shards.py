"""Whole shards of CyteArc's own layout, decoded without Zarr's per-chunk pipeline.

Every count matrix CyteArc writes is sharded, its inner chunks encoded with
``bytes`` (little endian) then ``zstd`` (with its frame checksum) or Blosc
LZ4 followed by ``crc32c``, the shard index with ``bytes`` then ``crc32c``
at the end of the shard. Zarr decodes such a shard one inner chunk at a time
through its asynchronous codec pipeline, which costs about twice the CPU of
the decompression itself (82 against 39 ms for a 1,024 x 20,000 ``uint16``
shard of 64 inner chunks, on a 2-core machine where that CPU is the
workers'). :func:`read_shards` reads a region made of whole shards in one
request per shard and decodes its inner chunks with the numcodecs codecs
Zarr uses, checking the index's crc32c, each chunk's crc32c when it has one
and each chunk's size; zstd checks its own frame checksum. Any other
layout, or a region that does not start and end on shard boundaries, is
left to Zarr (``None``).
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import google_crc32c
import numpy as np
from numcodecs import Blosc, Zstd
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec
from zarr.codecs.sharding import ShardingCodecIndexLocation
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

if TYPE_CHECKING:
    from collections.abc import Iterator

    import zarr

__all__ = ["read_shards", "row_pieces", "streams_rows"]

_EMPTY: Final = 2**64 - 1
"""The offset and length the shard index gives an inner chunk that is not stored."""

_ENTRY: Final = 16
"""Bytes of one inner chunk's entry in the shard index: offset and length, two uint64."""

_CHECKSUM: Final = 4

_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"

_BLOSC_HEADER: Final = 16


def _zstd_content_size(frame: memoryview) -> int | None:
    """The decoded size a zstd frame's header declares (RFC 8878, 3.1.1.1), or None if it has none."""
    if len(frame) < 6 or bytes(frame[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    single_segment = bool(descriptor & 0x20)
    start = 5 + (not single_segment) + (0, 1, 2, 4)[descriptor & 0x03]
    width = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if width == 0 or len(frame) < start + width:
        return None
    size = int.from_bytes(frame[start : start + width], "little")
    return size + 256 if width == 2 else size


@dataclass(frozen=True)
class _Frames:
    """How the inner chunks of a shard decode: the numcodecs compressor, and whether a crc32c follows each."""

    codec: Zstd | Blosc
    crc32c: bool

    def decoded_size(self, frame: memoryview) -> int | None:
        """The size a compressed frame declares it decodes to, or None when its header does not say."""
        if isinstance(self.codec, Zstd):
            return _zstd_content_size(frame)
        return _blosc_content_size(frame)


def _blosc_content_size(frame: memoryview) -> int | None:
    """The decoded size a Blosc frame's 16-byte header declares, or None when the header does not fit the frame.

    The header holds, after 4 bytes of versions, flags and type size, three
    little-endian int32: the decoded size, the block size and the frame's
    own length.
    """
    if len(frame) < _BLOSC_HEADER:
        return None
    size, _, length = np.frombuffer(frame[4:_BLOSC_HEADER], dtype="<i4").tolist()
    return int(size) if length == len(frame) else None


def _shard_codec(array: zarr.Array[Any]) -> tuple[ShardingCodec, _Frames] | None:
    """The sharding codec and its inner chunks' frames when ``array`` has CyteArc's layout, else None."""
    metadata = array.metadata
    if metadata.zarr_format != 3 or len(metadata.codecs) != 1:
        return None
    codec = metadata.codecs[0]
    if (
        not isinstance(codec, ShardingCodec)
        or codec.index_location != ShardingCodecIndexLocation.end
    ):
        return None
    dtype = np.dtype(array.dtype)
    little = dtype.itemsize == 1 or sys.byteorder == "little"
    inner, index = codec.codecs, codec.index_codecs
    if not (
        dtype.kind in "biuf"
        and little
        and len(inner) in {2, 3}
        and isinstance(inner[0], BytesCodec)
        and (
            dtype.itemsize == 1
            or (inner[0].endian is not None and inner[0].endian.value == "little")
        )
        and (len(inner) == 2 or isinstance(inner[2], Crc32cCodec))
        and len(index) == 2
        and isinstance(index[0], BytesCodec)
        and (index[0].endian is None or index[0].endian.value == "little")
        and isinstance(index[1], Crc32cCodec)
    ):
        return None
    compressor = inner[1]
    if isinstance(compressor, ZstdCodec):
        return codec, _Frames(Zstd(), crc32c=len(inner) == 3)
    if isinstance(compressor, BloscCodec) and len(inner) == 3:
        return codec, _Frames(Blosc(), crc32c=True)
    return None


def _shard_ranges(
    selection: object, shape: tuple[int, ...], shard: tuple[int, ...]
) -> list[range] | None:
    """Per axis, the shards ``selection`` covers whole, or None when it is not whole shards."""
    if selection is Ellipsis:
        selection = ()
    if not isinstance(selection, tuple):
        selection = (selection,)
    if len(selection) > len(shape) or not all(isinstance(s, slice) for s in selection):
        return None
    slices = (*selection, *(slice(None),) * (len(shape) - len(selection)))
    ranges = []
    for s, n, u in zip(slices, shape, shard, strict=True):
        start, stop, step = s.indices(n)
        if step != 1 or start >= stop or start % u or (stop % u and stop != n):
            return None
        ranges.append(range(start // u, math.ceil(stop / u)))
    return ranges


class _Shard:
    """One stored shard: its bytes and its index of inner chunks (checked against its crc32c)."""

    def __init__(self, data: bytes, *, shard: tuple[int, ...], chunk: tuple[int, ...]) -> None:
        self.per_shard = tuple(s // c for s, c in zip(shard, chunk, strict=True))
        n_chunks = math.prod(self.per_shard)
        size = n_chunks * _ENTRY
        if len(data) < size + _CHECKSUM:
            msg = f"the shard holds {len(data)} bytes, fewer than its index of {size + _CHECKSUM}"
            raise ValueError(msg)
        self.end = len(data) - size - _CHECKSUM
        raw_index = data[self.end : len(data) - _CHECKSUM]
        stored = int.from_bytes(data[len(data) - _CHECKSUM :], "little")
        if google_crc32c.value(raw_index) != stored:
            msg = "the shard index does not match its crc32c checksum"
            raise ValueError(msg)
        self.index = np.frombuffer(raw_index, dtype="<u8").reshape((*self.per_shard, 2))
        self.view = memoryview(data)
        self.chunk = chunk

    def decode(
        self,
        position: tuple[int, ...],
        target: np.ndarray,
        *,
        frames: _Frames,
        fill: Any,  # noqa: ANN401 (the array's fill value)
    ) -> None:
        """Decode the inner chunk at ``position`` into ``target``, its part of the result (clipped at the array's edge)."""
        offset, length = (int(v) for v in self.index[position])
        if offset == _EMPTY and length == _EMPTY:
            target[...] = fill
            return
        if offset + length > self.end:
            msg = f"inner chunk {position} points past the shard's data"
            raise ValueError(msg)
        frame = self.view[offset : offset + length]
        if frames.crc32c:
            body = np.frombuffer(frame[:-_CHECKSUM], dtype=np.uint8)
            if length < _CHECKSUM or google_crc32c.value(body) != int.from_bytes(
                frame[-_CHECKSUM:], "little"
            ):
                msg = f"inner chunk {position} does not match its crc32c checksum"
                raise ValueError(msg)
            frame = frame[:-_CHECKSUM]
        chunk_bytes = math.prod(self.chunk) * target.dtype.itemsize
        whole = target.size == math.prod(self.chunk) and target.flags.c_contiguous
        codec = frames.codec
        if whole and frames.decoded_size(frame) == chunk_bytes:
            codec.decode(
                frame, out=target
            )  # numcodecs checks the frame decodes to its declared size
            return
        decoded = codec.decode(frame)
        if len(decoded) != chunk_bytes:
            msg = f"inner chunk {position} decodes to {len(decoded)} bytes, expected {chunk_bytes}"
            raise ValueError(msg)
        values = np.frombuffer(decoded, dtype=target.dtype).reshape(self.chunk)
        target[...] = values[tuple(slice(0, n) for n in target.shape)]


def _decode_shard(
    data: bytes | None,
    out: np.ndarray,
    *,
    shard: tuple[int, ...],
    chunk: tuple[int, ...],
    frames: _Frames,
    fill: Any,  # noqa: ANN401 (the array's fill value)
) -> None:
    """Decode one shard's inner chunks into ``out``, the shard's part of the result (clipped at the array's edge)."""
    if data is None:
        out[...] = fill
        return
    stored = _Shard(data, shard=shard, chunk=chunk)
    for position in itertools.product(*(range(g) for g in stored.per_shard)):
        region = tuple(
            slice(min(p * c, n), min((p + 1) * c, n))
            for p, c, n in zip(position, chunk, out.shape, strict=True)
        )
        if all(r.start < r.stop for r in region):
            stored.decode(position, out[region], frames=frames, fill=fill)


def _fetch(array: zarr.Array[Any], coords: tuple[int, ...]) -> bytes | None:
    """The bytes of the shard at ``coords``, or None when it is not stored (all fill values)."""
    prefix = f"{array.path}/" if array.path else ""
    key = prefix + array.metadata.encode_chunk_key(coords)
    buffer = sync(array.store.get(key, prototype=default_buffer_prototype()))
    return None if buffer is None else buffer.to_bytes()


def streams_rows(array: zarr.Array[Any]) -> bool:
    """Whether :func:`row_pieces` decodes ``array``'s row blocks piece by piece (a 2-D array in CyteArc's layout).

    Parameters
    ----------
    array
        A Zarr array.

    Returns
    -------
    bool
        True for a 2-D sharded array whose inner chunks are ``bytes`` then
        ``zstd`` (then optionally ``crc32c``) or Blosc then ``crc32c``: every count matrix
        CyteArc writes.

    Examples
    --------
    >>> import zarr
    >>> from zarr.codecs import BytesCodec, ZstdCodec
    >>> z = zarr.create_array(store={}, shape=(6, 4), shards=(4, 4), chunks=(2, 4), dtype="u2",
    ...                       serializer=BytesCodec(), compressors=[ZstdCodec()])
    >>> streams_rows(z), streams_rows(zarr.create_array(store={}, shape=(6, 4), dtype="u2"))
    (True, False)
    """
    return array.ndim == 2 and array.shards is not None and _shard_codec(array) is not None


def row_pieces(array: zarr.Array[Any], start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
    """Rows ``start:stop`` (whole shards) of ``array`` over every column, one row of inner chunks at a time.

    Each piece is decoded into the same buffer, a row of inner chunks across
    every column (about a megabyte, so it stays in the CPU's cache while it
    is used), and handed over before the next is decoded: a reduction over
    the pieces never holds the dense block, nor pays for the page faults of
    allocating it. Only the shards of the current row of shards are held,
    as stored (compressed).

    Parameters
    ----------
    array
        A Zarr array for which :func:`streams_rows` holds.
    start, stop
        Rows starting and ending on shard boundaries (``stop`` may be the
        array's length).

    Yields
    ------
    tuple of int and numpy.ndarray
        ``(offset, piece)``: the piece's first row relative to ``start`` and
        its values, rows x every column. The piece is overwritten by the
        next one; copy what must outlive it.

    Raises
    ------
    ValueError
        ``array`` does not stream (:func:`streams_rows`), the rows are not
        whole shards, a shard's index or an inner chunk fails its crc32c,
        or an inner chunk points past the shard or decodes to the wrong size.
    RuntimeError
        The compressor cannot decode an inner chunk (zstd's checksum fails).

    Examples
    --------
    >>> import zarr
    >>> from zarr.codecs import BytesCodec, ZstdCodec
    >>> z = zarr.create_array(store={}, shape=(6, 4), shards=(4, 4), chunks=(2, 4), dtype="u2",
    ...                       serializer=BytesCodec(), compressors=[ZstdCodec()])
    >>> z[:] = np.arange(24).reshape(6, 4)
    >>> [(offset, piece.sum(axis=1).tolist()) for offset, piece in row_pieces(z, 0, 6)]
    [(0, [6, 22]), (2, [38, 54]), (4, [70, 86])]
    """
    layout = _shard_codec(array)
    if layout is None or array.shards is None or array.ndim != 2:
        msg = f"row_pieces: {array.path or 'the array'} is not a 2-D array in CyteArc's sharded layout"
        raise ValueError(msg)
    codec, frames = layout
    shard, chunk = tuple(array.shards), tuple(codec.chunk_shape)
    shape = tuple(array.shape)
    ranges = _shard_ranges((slice(start, stop),), shape, shard)
    if ranges is None:
        msg = f"row_pieces: rows {start}:{stop} of {shape[0]} do not start and end on shards of {shard[0]} rows"
        raise ValueError(msg)
    fill = array.fill_value
    buffer = np.empty((chunk[0], shape[1]), dtype=array.dtype)
    for shard_row in ranges[0]:
        parts = []
        for column in ranges[1]:
            data = _fetch(array, (shard_row, column))
            parts.append((column, None if data is None else _Shard(data, shard=shard, chunk=chunk)))
        first = shard_row * shard[0]
        for inner_row in range(shard[0] // chunk[0]):
            top = first + inner_row * chunk[0]
            if top >= shape[0]:
                break
            piece = buffer[: min(chunk[0], shape[0] - top)]
            for column, part in parts:
                for inner_column in range(shard[1] // chunk[1]):
                    left = column * shard[1] + inner_column * chunk[1]
                    if left >= shape[1]:
                        break
                    target = piece[:, left : min(left + chunk[1], shape[1])]
                    if part is None:
                        target[...] = fill
                    else:
                        part.decode((inner_row, inner_column), target, frames=frames, fill=fill)
            yield top - start, piece


def read_shards(array: zarr.Array[Any], selection: Any) -> np.ndarray | None:  # noqa: ANN401 (any selection)
    """``array[selection]`` for a region of whole shards in CyteArc's layout, else None.

    Parameters
    ----------
    array
        A Zarr array.
    selection
        Slices (or ``Ellipsis``) of whole shards; the last shard along an
        axis may end at the array's edge.

    Returns
    -------
    numpy.ndarray or None
        The values, or None when ``array`` has another layout or the region
        is not whole shards (read it with Zarr).

    Raises
    ------
    ValueError
        A shard's index or an inner chunk fails its crc32c, or an inner
        chunk points past the shard or decodes to the wrong size.
    RuntimeError
        The compressor cannot decode an inner chunk (zstd's checksum fails).

    Examples
    --------
    >>> import zarr
    >>> from zarr.codecs import BytesCodec, ZstdCodec
    >>> z = zarr.create_array(store={}, shape=(6, 4), shards=(4, 4), chunks=(2, 4), dtype="u2",
    ...                       serializer=BytesCodec(), compressors=[ZstdCodec(checksum=True)])
    >>> z[:] = np.arange(24).reshape(6, 4)
    >>> read_shards(z, slice(4, 6)).tolist()
    [[16, 17, 18, 19], [20, 21, 22, 23]]
    >>> read_shards(z, slice(1, 3)) is None
    True
    """
    layout = _shard_codec(array)
    if layout is None or array.shards is None:
        return None
    codec, frames = layout
    shard, chunk = tuple(array.shards), tuple(codec.chunk_shape)
    shape = tuple(array.shape)
    ranges = _shard_ranges(selection, shape, shard)
    if ranges is None:
        return None
    starts = [r.start * u for r, u in zip(ranges, shard, strict=True)]
    stops = [min(r.stop * u, n) for r, u, n in zip(ranges, shard, shape, strict=True)]
    out = np.empty([b - a for a, b in zip(starts, stops, strict=True)], dtype=array.dtype)
    for coords in itertools.product(*ranges):
        region = tuple(
            slice(c * u - a, min((c + 1) * u, n) - a)
            for c, u, a, n in zip(coords, shard, starts, shape, strict=True)
        )
        _decode_shard(
            _fetch(array, coords),
            out[region],
            shard=shard,
            chunk=chunk,
            frames=frames,
            fill=array.fill_value,
        )
    return out
