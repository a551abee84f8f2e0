"""Whole shards decoded without Zarr's pipeline give Zarr's values, or fail as Zarr would."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st
from numcodecs import Blosc, Zstd
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
)
from zarr.storage import LocalStore, MemoryStore

from cytearc.errors import StoreDamageError
from cytearc.storage.damage import DECODE_ERRORS, CheckedReads, read_region
from cytearc.storage.shards import (
    _blosc_content_size,
    _zstd_content_size,
    read_shards,
    row_pieces,
    streams_rows,
)
from cytepool.codecs import compressor

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

DTYPES = ("u1", "u2", "u4", "i4", "i8", "f4", "f8", "bool")

COMPRESSORS: dict[str, list[Any]] = {
    "zstd": [ZstdCodec(checksum=True)],
    "lz4": [compressor("lz4", error=ValueError), Crc32cCodec()],
    "zstd crc32c": [ZstdCodec(), Crc32cCodec()],
    "blosc crc32c": [BloscCodec(cname="zstd", shuffle="bitshuffle"), Crc32cCodec()],
}
"""The inner codecs after ``bytes`` that CyteArc decodes itself: what it writes and stores of older releases."""


def _array(
    store: Any,
    values: np.ndarray,
    *,
    shards: tuple[int, ...],
    chunks: tuple[int, ...],
    fill: Any = 0,
    **codecs: Any,
) -> zarr.Array[Any]:
    array = zarr.create_array(
        store=store,
        name="x",
        shape=values.shape,
        shards=shards,
        chunks=chunks,
        dtype=values.dtype,
        fill_value=fill,
        **({"serializer": BytesCodec(), "compressors": [ZstdCodec(checksum=True)]} | codecs),  # type: ignore[arg-type]
    )
    array[...] = values
    return array


@st.composite
def _cases(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...], int]:
    ndim = draw(st.integers(1, 3))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    shards = tuple(c * draw(st.integers(1, 3)) for c in chunks)
    shape = tuple(draw(st.integers(1, 3 * s + 1)) for s in shards)
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.1, 1.0]))
    values = (rng.random(shape) < density) * rng.integers(1, 100, shape)
    return values.astype(dtype), shards, chunks, draw(st.integers(0, 2**16))


@given(case=_cases(), codec=st.sampled_from(sorted(COMPRESSORS)))
def test_every_whole_shard_region_reads_as_zarr_reads_it(
    case: tuple[np.ndarray, tuple[int, ...], tuple[int, ...], int], codec: str
) -> None:
    values, shards, chunks, seed = case
    array = _array(
        MemoryStore(), values, shards=shards, chunks=chunks, compressors=COMPRESSORS[codec]
    )
    rng = np.random.default_rng(seed)
    grid = [math.ceil(n / s) for n, s in zip(values.shape, shards, strict=True)]
    for _ in range(3):
        first = [int(rng.integers(0, g)) for g in grid]
        last = [int(rng.integers(f, g)) + 1 for f, g in zip(first, grid, strict=True)]
        region = tuple(
            slice(f * s, min(e * s, n))
            for f, e, s, n in zip(first, last, shards, values.shape, strict=True)
        )
        whole = read_shards(array, region)
        assert whole is not None
        assert whole.dtype == values.dtype
        np.testing.assert_array_equal(whole, values[region])
    np.testing.assert_array_equal(read_shards(array, Ellipsis), values)


def test_fill_values_stand_for_shards_and_chunks_never_written(tmp_path: Path) -> None:
    array = zarr.create_array(
        store=LocalStore(tmp_path / "s.zarr"),
        name="x",
        shape=(12, 4),
        shards=(4, 4),
        chunks=(2, 4),
        dtype="i4",
        fill_value=7,
        serializer=BytesCodec(),
        compressors=[ZstdCodec(checksum=True)],
    )
    array[4:6] = np.arange(8).reshape(2, 4)  # half of the second shard; the others never written
    expected = np.full((12, 4), 7, dtype="i4")
    expected[4:6] = np.arange(8).reshape(2, 4)
    whole = read_shards(array, slice(None))
    assert whole is not None
    np.testing.assert_array_equal(whole, expected)
    np.testing.assert_array_equal(whole, array[...])


@pytest.mark.parametrize(
    ("region", "reason"),
    [
        (slice(1, 8), "starts inside a shard"),
        (slice(0, 6), "ends inside a shard"),
        (slice(0, 8, 2), "has a step"),
        (slice(4, 4), "is empty"),
        (3, "is an integer"),
        ((slice(0, 4), slice(0, 2)), "cuts the columns"),
        (([0, 1],), "is a list"),
    ],
)
def test_a_region_of_part_shards_is_left_to_zarr(region: Any, reason: str) -> None:
    array = _array(MemoryStore(), np.ones((10, 4), "u2"), shards=(4, 4), chunks=(2, 4))
    assert read_shards(array, region) is None, reason
    np.testing.assert_array_equal(read_region(array, region), np.ones((10, 4), "u2")[region])


@pytest.mark.parametrize(
    "codecs",
    [
        {"compressors": [GzipCodec()]},
        {"compressors": [ZstdCodec(), GzipCodec()]},
        {"serializer": BytesCodec(endian="big")},
        {"filters": [TransposeCodec(order=(1, 0))]},
        {"compressors": None},
        {"compressors": [BloscCodec(cname="lz4")]},
    ],
    ids=["gzip", "two compressors", "big endian", "transpose", "uncompressed", "unchecked blosc"],
)
def test_other_layouts_are_left_to_zarr(codecs: dict[str, Any]) -> None:
    values = np.arange(40, dtype="u2").reshape(10, 4)
    array = _array(MemoryStore(), values, shards=(4, 4), chunks=(2, 4), **codecs)
    assert read_shards(array, slice(0, 8)) is None
    np.testing.assert_array_equal(read_region(array, slice(0, 8)), values[:8])


def test_unsharded_arrays_are_left_to_zarr() -> None:
    array = zarr.create_array(store=MemoryStore(), shape=(4,), chunks=(2,), dtype="u1")
    assert read_shards(array, slice(None)) is None


def _two_shards(tmp_path: Path, codec: str) -> tuple[np.ndarray, zarr.Array[Any]]:
    """Random ``uint16`` values in two shards of two inner chunks each, stored in ``s.zarr/x``."""
    values = np.random.default_rng(0).integers(0, 1000, (8, 64)).astype("u2")
    store = LocalStore(tmp_path / "s.zarr")
    compressors = COMPRESSORS[codec]
    return values, _array(store, values, shards=(4, 64), chunks=(2, 64), compressors=compressors)


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (lambda size: size // 3, "Data corruption|Unknown frame|error|crc32c"),
        (lambda size: size - 10, "crc32c"),
        (lambda size: size - 2, "crc32c"),
    ],
    ids=["inner chunk", "index", "index checksum"],
)
@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_damage_fails_the_read(
    tmp_path: Path, where: Callable[[int], int], message: str, codec: str
) -> None:
    values, array = _two_shards(tmp_path, codec)
    shard = tmp_path / "s.zarr" / "x" / "c" / "1" / "0"
    _flip(shard, where(shard.stat().st_size))
    np.testing.assert_array_equal(read_shards(array, slice(0, 4)), values[:4])
    with pytest.raises(DECODE_ERRORS, match=message):
        read_shards(array, slice(4, 8))
    with pytest.raises(StoreDamageError, match=r"x/c/1/0: .*cannot be decoded"):
        read_region(array, slice(4, 8))


def test_a_truncated_shard_fails_the_read(tmp_path: Path) -> None:
    values = np.arange(512, dtype="u2").reshape(8, 64)
    array = _array(LocalStore(tmp_path / "s.zarr"), values, shards=(4, 64), chunks=(2, 64))
    shard = tmp_path / "s.zarr" / "x" / "c" / "0" / "0"
    shard.write_bytes(shard.read_bytes()[:20])
    with pytest.raises(ValueError, match=r"fewer than its index|crc32c"):
        read_shards(array, slice(0, 4))
    with pytest.raises(StoreDamageError, match=r"x/c/0/0"):
        read_region(array, slice(0, 4))


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65_791, 65_792, 300_000])
def test_the_zstd_header_gives_the_decoded_size(size: int) -> None:
    for level in (1, 3, 19):
        frame = Zstd(level=level, checksum=True).encode(
            bytes(range(256)) * (size // 256) + bytes(size % 256)
        )
        assert _zstd_content_size(memoryview(frame)) == size


@pytest.mark.parametrize("size", [0, 1, 255, 65_792, 300_000])
@pytest.mark.parametrize("cname", ["lz4hc", "lz4", "zstd"])
def test_the_blosc_header_gives_the_decoded_size(size: int, cname: str) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    frame = memoryview(Blosc(cname=cname, clevel=3, shuffle=Blosc.SHUFFLE, typesize=2).encode(data))
    assert _blosc_content_size(frame) == size
    assert _blosc_content_size(frame[:-1]) is None, "a frame shorter than its header says"
    assert _blosc_content_size(frame[:15]) is None


def test_bytes_that_are_not_a_zstd_frame_declare_no_size() -> None:
    assert _zstd_content_size(memoryview(b"\x00" * 16)) is None
    assert _zstd_content_size(memoryview(Zstd().encode(b"abc")[:5])) is None


@st.composite
def _matrices(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, int], tuple[int, int], int]:
    chunks = (draw(st.integers(1, 4)), draw(st.integers(1, 5)))
    shards = (chunks[0] * draw(st.integers(1, 3)), chunks[1] * draw(st.integers(1, 3)))
    shape = (draw(st.integers(1, 3 * shards[0] + 1)), draw(st.integers(1, 3 * shards[1] + 1)))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.1, 1.0]))
    values = (rng.random(shape) < density) * rng.integers(1, 100, shape)
    return values.astype(dtype), shards, chunks, draw(st.integers(0, 2**16))


def _assembled(
    pieces: Any, shape: tuple[int, ...], dtype: np.dtype
) -> tuple[np.ndarray, list[int]]:
    out, sizes, expected_offset = np.full(shape, 99, dtype=dtype), [], 0
    for offset, piece in pieces:
        assert offset == expected_offset, "pieces arrive in row order, without gaps"
        out[offset : offset + len(piece)] = piece
        sizes.append(len(piece))
        expected_offset += len(piece)
    assert expected_offset == shape[0]
    return out, sizes


@given(case=_matrices(), codec=st.sampled_from(sorted(COMPRESSORS)))
def test_row_pieces_of_whole_shards_are_the_rows_zarr_reads(
    case: tuple[np.ndarray, tuple[int, int], tuple[int, int], int], codec: str
) -> None:
    values, shards, chunks, seed = case
    array = _array(
        MemoryStore(), values, shards=shards, chunks=chunks, compressors=COMPRESSORS[codec]
    )
    assert streams_rows(array)
    rng = np.random.default_rng(seed)
    n_shards = math.ceil(values.shape[0] / shards[0])
    first = int(rng.integers(0, n_shards))
    last = int(rng.integers(first, n_shards)) + 1
    start, stop = first * shards[0], min(last * shards[0], values.shape[0])
    rows, sizes = _assembled(
        row_pieces(array, start, stop), (stop - start, values.shape[1]), values.dtype
    )
    np.testing.assert_array_equal(rows, values[start:stop])
    assert max(sizes) <= chunks[0], "a piece is one row of inner chunks"


def test_row_pieces_fill_shards_and_chunks_never_written() -> None:
    array = _array(MemoryStore(), np.zeros((12, 6), "i4"), shards=(4, 3), chunks=(2, 3), fill=7)
    array[4:6, 3:] = np.arange(6).reshape(2, 3)
    rows, _ = _assembled(row_pieces(array, 0, 12), (12, 6), np.dtype("i4"))
    np.testing.assert_array_equal(rows, array[...])


@pytest.mark.parametrize(("start", "stop"), [(1, 8), (0, 6), (4, 4)])
def test_row_pieces_refuse_rows_that_are_not_whole_shards(start: int, stop: int) -> None:
    array = _array(MemoryStore(), np.ones((10, 4), "u2"), shards=(4, 4), chunks=(2, 4))
    with pytest.raises(ValueError, match="do not start and end on shards"):
        list(row_pieces(array, start, stop))


def test_checked_reads_read_other_layouts_whole() -> None:
    values = np.arange(40, dtype="u2").reshape(10, 4)
    array = _array(MemoryStore(), values, shards=(4, 4), chunks=(2, 4), compressors=[GzipCodec()])
    assert not streams_rows(array)
    with pytest.raises(ValueError, match="not a 2-D array in CyteArc's sharded layout"):
        list(row_pieces(array, 0, 4))
    pieces = [(offset, piece.copy()) for offset, piece in CheckedReads(array).row_pieces(4, 8)]
    assert len(pieces) == 1
    np.testing.assert_array_equal(pieces[0][1], values[4:8])


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_a_damaged_inner_chunk_is_named_by_the_streamed_read(tmp_path: Path, codec: str) -> None:
    values, array = _two_shards(tmp_path, codec)
    shard = tmp_path / "s.zarr" / "x" / "c" / "1" / "0"
    _flip(shard, shard.stat().st_size // 3)
    reads = CheckedReads(array)
    _assembled(reads.row_pieces(0, 4), (4, 64), values.dtype)
    with pytest.raises(StoreDamageError, match=r"x/c/1/0: inner chunk .* cannot be decoded"):
        list(reads.row_pieces(4, 8))
