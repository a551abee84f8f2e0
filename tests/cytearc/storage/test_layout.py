"""Layout policy: shard and chunk shapes, identity alignment, halving, strict records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cytearc.errors import LayoutError
from cytearc.storage.layout import DEFAULT_LAYOUT, IDENTITY_ROWS, CountLayout

policies = st.builds(
    lambda chunk_exp, ratio_exp: CountLayout(
        unit_bytes=2 ** (chunk_exp + ratio_exp), chunk_bytes=2**chunk_exp
    ),
    st.integers(6, 22),
    st.integers(0, 8),
)


@given(
    policy=policies,
    shape=st.tuples(st.integers(1, 10**7), st.integers(1, 10**6)),
    itemsize=st.sampled_from([1, 2, 4, 8]),
)
def test_shapes_are_valid_and_identity_aligned(
    policy: CountLayout, shape: tuple[int, int], itemsize: int
) -> None:
    """Shards are whole chunks, fit the array, and their rows divide or are multiples of 256."""
    layout = policy.array_layout(shape, itemsize=itemsize)
    (sr, sc), (cr, cc) = layout.shards, layout.chunks
    assert sr % cr == 0
    assert sc % cc == 0
    assert 1 <= sr <= max(shape[0], 1)
    assert 1 <= sc <= shape[1]
    assert IDENTITY_ROWS % sr == 0 or sr % IDENTITY_ROWS == 0
    assert cr * cc * itemsize <= max(policy.chunk_bytes, itemsize)


def test_halving_keeps_chunks_per_shard() -> None:
    """Halving both sizes keeps the number of chunks in a shard, with smaller shards."""
    shape = (200_000, 30_000)
    full = DEFAULT_LAYOUT.array_layout(shape, itemsize=2)
    half = DEFAULT_LAYOUT.halved().array_layout(shape, itemsize=2)
    assert half.chunks_per_shard == full.chunks_per_shard
    assert half.shards[0] < full.shards[0]


def test_records_round_trip_and_fail_closed() -> None:
    """The record holds exactly unitBytes and chunkBytes; anything else is refused with a remedy."""
    assert CountLayout.from_json(DEFAULT_LAYOUT.to_json(), where="x") == DEFAULT_LAYOUT
    for bad in (
        None,
        {"unitBytes": 1},
        {"unitBytes": 4, "chunkBytes": 2, "extra": 1},
        {"unitBytes": "4", "chunkBytes": 2},
        {"unitBytes": 2, "chunkBytes": 4},
    ):
        with pytest.raises(LayoutError, match=r"countMatrixLayout|chunkBytes"):
            CountLayout.from_json(bad, where="store.zarr/matrices/RNA")
