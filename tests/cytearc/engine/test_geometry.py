"""ArrayGeometry.read_bytes charges reads as the seed's memory controls say; rows_within sizes blocks by it."""

from __future__ import annotations

import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st

from cytearc.engine.geometry import ArrayGeometry, rows_within
from cytearc.errors import MemBudgetError

COUNTS = ArrayGeometry(shape=(10_000, 2_000), chunks=(64, 2_000), shards=(1_024, 2_000), itemsize=2)
COUNTS_T = ArrayGeometry(shape=(2_000, 10_000), chunks=(8, 5_000), shards=(512, 10_000), itemsize=2)
SHARD_BYTES = 1_024 * 2_000 * 2
CHUNK_BYTES = 64 * 2_000 * 2


def test_of_reads_a_zarr_arrays_geometry() -> None:
    """The geometry of a sharded and an unsharded Zarr array."""
    sharded = zarr.create_array({}, shape=(100, 30), shards=(32, 30), chunks=(8, 30), dtype="u2")
    assert ArrayGeometry.of(sharded) == ArrayGeometry(
        shape=(100, 30), chunks=(8, 30), shards=(32, 30), itemsize=2
    )
    plain = zarr.create_array({}, shape=(100, 30), chunks=(10, 10), dtype="f4")
    assert ArrayGeometry.of(plain) == ArrayGeometry(shape=(100, 30), chunks=(10, 10), itemsize=4)
    assert ArrayGeometry.of(plain).unit_rows == 10


def test_a_row_block_of_whole_shards_reserves_twice_its_bytes_its_chunks_and_one_chunk() -> None:
    """A counts row block of two whole shards: 2 x its bytes + the shards' chunks + one streamed chunk."""
    got = COUNTS.read_bytes(slice(1_024, 3_072))
    assert got == 2 * (2 * SHARD_BYTES) + 2 * SHARD_BYTES + CHUNK_BYTES
    assert COUNTS.readBytes(slice(1_024, 3_072)) == got
    # the last shard ends at the array's edge
    last = 10_000 - 9 * 1_024
    assert (
        COUNTS.read_bytes(slice(9 * 1_024, None))
        == 2 * last * 4_000 + 13 * CHUNK_BYTES + CHUNK_BYTES
    )  # 784 rows: 13 chunks


def test_a_cell_band_of_counts_t_reserves_twice_its_bytes_and_two_of_each_chunk() -> None:
    """A countsT band of 10 features x 100 cells touches 2 x 1 chunks (rows 0-7, 8-15; one column chunk)."""
    band = 10 * 100 * 2
    chunk = 8 * 5_000 * 2
    assert COUNTS_T.chunks_touched(slice(0, 10), slice(0, 100)) == 2
    assert COUNTS_T.read_bytes(slice(0, 10), slice(0, 100)) == 2 * band + 2 * 2 * chunk
    # a band that crosses the column chunk boundary touches twice as many
    assert COUNTS_T.chunks_touched(slice(0, 10), slice(4_950, 5_050)) == 4


def test_a_row_block_not_on_shard_boundaries_is_charged_as_a_partial_read() -> None:
    """Rows 100-1,100 of counts: not whole shards, so two of each touched chunk."""
    touched = COUNTS.chunks_touched(slice(100, 1_100))
    assert touched == 17  # chunks 1..17 of 64 rows
    assert COUNTS.read_bytes(slice(100, 1_100)) == 2 * 1_000 * 4_000 + 2 * touched * CHUNK_BYTES


def test_an_unsharded_read_is_charged_its_result_and_the_chunks_it_decodes() -> None:
    """Normalized data (unsharded): result + decoded chunks."""
    data = ArrayGeometry(shape=(1_000, 300), chunks=(100, 300), itemsize=4)
    assert data.read_bytes(slice(50, 250)) == 200 * 300 * 4 + 3 * 100 * 300 * 4
    assert data.read_bytes(slice(0, 0)) == 0


@given(
    shape=st.tuples(st.integers(1, 5_000), st.integers(1, 500)),
    chunks=st.tuples(st.integers(1, 64), st.integers(1, 500)),
    start=st.integers(0, 5_000),
    length=st.integers(0, 5_000),
)
def test_chunks_touched_counts_the_chunks_a_region_overlaps(
    shape: tuple[int, int], chunks: tuple[int, int], start: int, length: int
) -> None:
    """Against a brute-force count of the chunk indices the region's elements fall in."""
    (rows, cols), (chunk_rows, chunk_cols) = shape, chunks
    geometry = ArrayGeometry(shape=(rows, cols), chunks=(chunk_rows, chunk_cols), itemsize=1)
    start = min(start, rows)
    stop = min(rows, start + length)
    row_chunks = {r // chunk_rows for r in range(start, stop)}
    col_chunks = {c // chunk_cols for c in range(cols)}
    assert geometry.chunks_touched(slice(start, stop)) == len(row_chunks) * len(col_chunks)


def test_rows_within_takes_the_largest_block_that_fits() -> None:
    """The block of k shards fits and k + 1 shards do not; a target caps it; a too-small budget refuses."""
    budget = 64_000_000
    rows = rows_within(COUNTS, budget=budget, row_bytes=8_000)
    assert rows % 1_024 == 0
    assert COUNTS.read_bytes(slice(0, rows)) + rows * 8_000 <= budget
    more = rows + 1_024
    assert COUNTS.read_bytes(slice(0, more)) + more * 8_000 > budget
    assert rows_within(COUNTS, budget=10**12) == 10 * 1_024  # the array rounded up to whole shards
    assert rows_within(COUNTS, budget=10**12, target=3 * SHARD_BYTES) == 3 * 1_024
    assert rows_within(COUNTS, budget=10**12, target=1) == 1_024
    with pytest.raises(
        MemBudgetError, match=r"counts: a block of 1024 rows needs .* raise mem_budget"
    ):
        rows_within(COUNTS, budget=SHARD_BYTES, where="counts")


def test_a_strided_selection_is_refused() -> None:
    """Plans charge contiguous reads only."""
    with pytest.raises(ValueError, match="contiguous"):
        COUNTS.read_bytes(slice(0, 10, 2))
