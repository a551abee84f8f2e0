"""Shard-aligned lazy arrays and the aligned store."""

from __future__ import annotations

import time
from typing import Any

import dask
import dask.array as da
import distributed
import distributed.diagnostics.plugin
import numpy as np
import pytest
import zarr
from dask.base import collections_to_expr
from dask.core import get_dependencies
from dask.delayed import delayed

from cytearc.engine.arrays import (
    FOLD_CHAINS,
    aligned_rows,
    fold_rows,
    map_row_pieces,
    open_lazy,
    store_aligned,
    take_rows,
    validate_aligned,
)
from cytearc.errors import MemBudgetError, ShardAlignmentError


def _array(
    shape: tuple[int, int] = (1000, 30),
    shards: tuple[int, int] = (200, 30),
    chunks: tuple[int, int] = (50, 30),
) -> zarr.Array[Any]:
    return zarr.create_array(
        store={}, shape=shape, shards=shards, chunks=chunks, dtype="u2", fill_value=0
    )


def test_open_lazy_uses_shards() -> None:
    """Blocks are shards (or whole multiples along rows), never inner chunks."""
    z = _array()
    assert open_lazy(z).chunks == ((200,) * 5, (30,))
    assert open_lazy(z, rows_per_block=400).chunks == ((400, 400, 200), (30,))
    with pytest.raises(ShardAlignmentError, match="multiple"):
        open_lazy(z, rows_per_block=300)


def test_misaligned_store_is_refused_before_writing() -> None:
    """Blocks that split a shard are refused, and nothing is written."""
    z = _array()
    x = da.ones((1000, 30), dtype="u2", chunks=(250, 30))
    with pytest.raises(ShardAlignmentError, match="inside a shard of 200"):
        store_aligned(x, z, where="counts")
    assert z.nchunks_initialized == 0


def test_aligned_store_writes_every_value() -> None:
    """Whole-shard blocks, with a ragged last block at the edge, store exactly."""
    values = np.random.default_rng(0).integers(0, 500, size=(1000, 30)).astype("u2")
    z = _array()
    x = da.from_array(values, chunks=(400, 30))
    with dask.config.set(scheduler="threads"):
        dask.compute(store_aligned(x, z))
    np.testing.assert_array_equal(z[:], values)


def test_check_aligned_on_both_axes() -> None:
    """Columns must be whole shards too."""
    z = _array(shape=(100, 100), shards=(50, 50), chunks=(25, 25))
    validate_aligned(((50, 50), (100,)), z, where="ok")
    with pytest.raises(ShardAlignmentError, match="axis 1"):
        validate_aligned(((100,), (30, 70)), z, where="bad")


def test_aligned_rows_fit_the_budget() -> None:
    """Bands are whole shards that fit the budget with their working copies, or refused."""
    rows = aligned_rows(budget=10_000_000, row_bytes=1000, shard_rows=512, n_rows=100_000)
    assert rows % 512 == 0
    assert rows * 1000 * 3 <= 10_000_000
    assert aligned_rows(budget=10**12, row_bytes=1000, shard_rows=512, n_rows=1000) == 1024
    with pytest.raises(MemBudgetError, match="raise mem_budget"):
        aligned_rows(budget=1000, row_bytes=1000, shard_rows=512, n_rows=10)


def test_write_block_refuses_partial_shards() -> None:
    """A task's block must start and end on shard boundaries (or the array's edge)."""
    from cytearc.engine.arrays import write_block  # noqa: PLC0415

    z = _array()
    write_block(z, np.ones((400, 30), dtype="u2"), (200, 0), where="counts")
    write_block(z, np.full((200, 30), 2, dtype="u2"), (800, 0), where="counts")
    assert int(z[:].sum()) == 400 * 30 + 200 * 30 * 2
    with pytest.raises(ShardAlignmentError, match="whole shards of 200"):
        write_block(z, np.ones((100, 30), dtype="u2"), (0, 0), where="counts")
    with pytest.raises(ShardAlignmentError, match="axis 0"):
        write_block(z, np.ones((200, 30), dtype="u2"), (100, 0), where="counts")


def _sharded(
    values: np.ndarray, *, fill: int, every_chunk: bool
) -> tuple[zarr.Array[Any], dict[str, Any]]:
    store = zarr.storage.MemoryStore()
    z = zarr.create_array(
        store=store,
        shape=values.shape,
        shards=(200, 30),
        chunks=(50, 30),
        dtype="u2",
        fill_value=fill,
        config={"write_empty_chunks": every_chunk},
    )
    return z, store._store_dict


@pytest.mark.parametrize("fill", [0, 7])
def test_write_block_stores_every_chunk_of_a_shard_with_values_and_no_shard_of_fill(
    fill: int,
) -> None:
    """With write_empty_chunks, a shard of fill values has no object; the others hold every chunk."""
    from cytearc.engine.arrays import write_block  # noqa: PLC0415

    values = np.full((600, 30), fill, dtype="u2")
    values[0:10] = 3  # shard 0: one chunk of values, three of fill values
    values[450] = 4  # shard 2
    z, stored = _sharded(values, fill=fill, every_chunk=True)
    write_block(z, values[:400], (0, 0), where="counts")  # shards 0 and 1 in one block
    write_block(z, values[400:], (400, 0), where="counts")
    np.testing.assert_array_equal(z[:], values)
    assert sorted(k for k in stored if k.startswith("c/")) == ["c/0/0", "c/2/0"]
    sparse, fewer = _sharded(values, fill=fill, every_chunk=False)
    sparse[:200] = values[:200]
    assert len(fewer["c/0/0"].to_bytes()) < len(stored["c/0/0"].to_bytes())


def _gram(block: np.ndarray) -> np.ndarray:
    gram: np.ndarray = block.T @ block
    return gram


@pytest.mark.parametrize("rows", [1, 7, 64])
def test_fold_rows_sums_every_block_in_a_fixed_order(rows: int) -> None:
    """The fold equals numpy's Gram matrix, and is the same bits on every scheduler."""
    values = np.random.default_rng(rows).standard_normal((rows * 13 + 5, 6))
    x = da.from_array(values, chunks=(rows, 6))
    folded = fold_rows(x, _gram, shape=(6, 6), dtype=np.float64)
    assert folded.chunks == ((6,), (6,))
    with dask.config.set(scheduler="threads"):
        threads = folded.compute()
    with dask.config.set(scheduler="synchronous"):
        synchronous = folded.compute()
    np.testing.assert_array_equal(threads, synchronous)
    np.testing.assert_allclose(threads, values.T @ values, rtol=1e-12)
    # the accumulators are the partials' own: the input blocks are left as they were
    np.testing.assert_array_equal(x.compute(), values)


def test_fold_rows_chains_the_partials() -> None:
    """Each block's task adds to the previous task of its chain; the sum adds the chains' last."""
    x = da.ones((40, 3), chunks=(4, 3))
    folded = fold_rows(x, _gram, shape=(3, 3), dtype=np.float64, chains=3)
    graph = dict(folded.__dask_graph__())
    folds = {key for key in graph if isinstance(key, str) and key.startswith("fold-")}
    steps = {key for key in folds if not key.startswith("fold-sum-")}
    assert len(steps) == 10
    fed = [len(get_dependencies(graph, key) & folds) for key in sorted(steps)]
    assert sorted(fed) == [0] * 3 + [1] * 7
    (total,) = folds - steps
    assert len(get_dependencies(graph, total) & steps) == 3
    np.testing.assert_array_equal(folded.compute(), np.full((3, 3), 40.0))


def _priorities(x: da.Array) -> dict[Any, int]:
    """The priority annotations of a collection's tasks, as the distributed scheduler gets them."""
    with dask.config.set({"optimization.fuse.active": False}):
        annotations = collections_to_expr([x]).optimize().__dask_annotations__()
    priorities: dict[Any, int] = annotations["priority"]
    return priorities


def test_fold_rows_gives_each_task_the_priority_of_the_first_fold_step_it_feeds() -> None:
    """A block at position p of its chain is made with priority -p; what every block reads, 0."""
    shared = delayed(np.full, pure=True)(3, 1.0, dask_key_name="shared-row")
    x = da.ones((40, 3), chunks=(4, 3)) + da.from_delayed(shared, shape=(3,), dtype=np.float64)
    folded = fold_rows(x, _gram, shape=(3, 3), dtype=np.float64)
    priority = _priorities(folded).__getitem__
    # ten blocks in four chains: blocks 0-1, 2-4, 5-6 and 7-9
    expected = [0, -1, 0, -1, -2, 0, -1, 0, -1, -2]
    assert [priority((x.name, i, 0)) for i in range(10)] == expected
    (ones,) = {key[0] for key in x.dask if isinstance(key, tuple) and key[0].startswith("ones")}
    assert [priority((ones, i, 0)) for i in range(10)] == expected
    assert priority("shared-row") == 0
    with dask.config.set({"optimization.fuse.active": False}):
        np.testing.assert_array_equal(folded.compute(), np.full((3, 3), 160.0))


def test_fold_rows_refuses_blocks_across_columns() -> None:
    """Every axis but the first must be one block."""
    with pytest.raises(ValueError, match="one block across every axis"):
        fold_rows(da.ones((8, 4), chunks=(4, 2)), _gram, shape=(4, 4), dtype=np.float64)


@pytest.mark.parametrize("seed", range(5))
def test_take_rows_equals_numpy_one_task_per_block(seed: int) -> None:
    """take_rows is numpy's row indexing; each block is cut in its own task, none shuffled."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 9, size=(97, 5))
    x = da.from_array(values, chunks=((10, 30, 7, 50), (3, 2)))
    rows = np.flatnonzero(rng.random(97) < [0.0, 0.3, 1.0, 0.6][seed % 4])
    taken = take_rows(x, rows)
    assert taken.numblocks == x.numblocks
    np.testing.assert_array_equal(taken.compute(scheduler="sync"), values[rows])
    assert taken.chunks[0] == tuple(
        int(((rows >= a) & (rows < a + n)).sum())
        for a, n in zip(np.cumsum((0, *x.chunks[0][:-1])), x.chunks[0], strict=True)
    )
    graph = dict(taken.__dask_graph__())
    assert not [key for key in graph if "shuffle" in str(key)]


def test_take_rows_refuses_unordered_rows() -> None:
    """Rows out of order, repeated or out of range are refused before a graph is built."""
    x = da.ones((10, 2), chunks=(5, 2))
    for rows in ([3, 1], [2, 2], [0, 10], [-1, 4]):
        with pytest.raises(ValueError, match="increasing unique rows"):
            take_rows(x, np.array(rows))


def _stored(values: np.ndarray) -> zarr.Array[Any]:
    """``values`` stored in CyteArc's layout (sharded, zstd inner chunks)."""
    from zarr.codecs import BytesCodec, ZstdCodec  # noqa: PLC0415

    stored = zarr.create_array(
        store={},
        shape=values.shape,
        shards=(200, 30),
        chunks=(50, 30),
        dtype="u2",
        serializer=BytesCodec(),
        compressors=[ZstdCodec()],
    )
    stored[...] = values
    return stored


def _row_maxima(pieces: Any, keep: np.ndarray, *, offset_by: int) -> np.ndarray:
    out = np.zeros(len(keep), dtype=np.int64)
    for offset, piece in pieces:
        out[offset : offset + len(piece)] = piece.max(axis=1) + offset_by
    return np.stack([np.where(keep, out, -1), np.arange(len(keep))], axis=1)


@pytest.mark.parametrize("target_bytes", [None, 30_000])
def test_map_row_pieces_streams_stored_shards_as_the_lazy_array_reads_them(
    monkeypatch: pytest.MonkeyPatch, target_bytes: int | None
) -> None:
    """A stored array in CyteArc's layout is read piece by piece, never as dense blocks; a lazy one whole."""
    rng = np.random.default_rng(1)
    values = rng.integers(0, 9, (1000, 30)).astype("u2")
    stored = _stored(values)
    keep = rng.random(1000) < 0.5
    options: dict[str, Any] = {"rows_out": None, "tail": (2,), "dtype": np.int64, "offset_by": 3}
    lazy = map_row_pieces(
        open_lazy(stored), _row_maxima, keep, target_bytes=target_bytes, **options
    )
    expected = np.where(keep, values.max(axis=1).astype(np.int64) + 3, -1)
    blocks = (200,) * 5 if target_bytes is None else (400, 400, 200)
    assert lazy.chunks == (blocks, (2,))
    from cytearc.storage import damage  # noqa: PLC0415

    def dense(*args: object) -> None:
        raise AssertionError("a streamed read decoded a dense block")

    monkeypatch.setattr(damage.CheckedReads, "__getitem__", dense)
    streamed = map_row_pieces(stored, _row_maxima, keep, target_bytes=target_bytes, **options)
    assert streamed.chunks == lazy.chunks
    computed = streamed.compute(scheduler="sync")
    np.testing.assert_array_equal(computed[:, 0], expected)
    starts = np.concatenate([np.arange(n) for n in streamed.chunks[0]])
    np.testing.assert_array_equal(computed[:, 1], starts)
    monkeypatch.undo()
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), computed)


def _weighted_sums(pieces: Any, keep: np.ndarray, *, weights: np.ndarray) -> np.ndarray:
    out = np.zeros(len(keep))
    for offset, piece in pieces:
        out[offset : offset + len(piece)] = piece @ weights
    return np.where(keep, out, 0.0)[:, None]


def test_map_row_pieces_runs_one_task_per_block() -> None:
    """Per-row values travel inside each block's task, a shared array and the reader once each.

    Bounds and per-row slices made as arrays of their own cost a scheduler
    round trip each per block (three tiny tasks per band of ``normalize``,
    half a second of idle workers at 100,000 cells).
    """
    rng = np.random.default_rng(2)
    values = rng.integers(0, 9, (1000, 30)).astype("u2")
    stored = _stored(values)
    keep, weights = rng.random(1000) < 0.5, rng.random(30)
    expected = np.where(keep, values @ weights, 0.0)[:, None]
    options: dict[str, Any] = {"rows_out": None, "tail": (1,), "dtype": np.float64}
    streamed = map_row_pieces(stored, _weighted_sums, keep, weights=weights, **options)
    graph = dict(streamed.__dask_graph__())
    assert len(graph) == 5 + 2  # the blocks, the reader and the weights
    np.testing.assert_allclose(streamed.compute(scheduler="sync"), expected)
    lazy = open_lazy(stored)
    whole = map_row_pieces(lazy, _weighted_sums, keep, weights=weights, **options)
    assert len(dict(whole.__dask_graph__())) == len(dict(lazy.__dask_graph__())) + 5 + 1
    np.testing.assert_allclose(whole.compute(scheduler="sync"), expected)


def test_map_row_pieces_refuses_per_row_values_of_another_length() -> None:
    with pytest.raises(ValueError, match=r"one value per row \(1000\)"):
        map_row_pieces(_array(), _row_maxima, np.ones(3, bool), rows_out=None, tail=(2,), dtype=int)


class _HeldBlocks(distributed.diagnostics.plugin.SchedulerPlugin):
    """A scheduler plugin: the most results of one array's blocks in memory at once."""

    name = "held-blocks"

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.held: set[Any] = set()
        self.most = 0

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if not (isinstance(key, tuple) and key[0] == self.prefix):
            return
        if finish == "memory":
            self.held.add(key)
            self.most = max(self.most, len(self.held))
        elif start == "memory":
            self.held.discard(key)


def _slow_gram(block: np.ndarray) -> np.ndarray:
    time.sleep(0.02)
    return _gram(block)


@pytest.mark.slow
def test_fold_rows_makes_each_block_near_its_fold_step() -> None:
    """On a cluster, blocks that a second pass also reads do not wait in memory for a slow fold.

    The blocks are cheap and the fold's steps slow: without the fold's
    priorities the scheduler makes blocks in an order of its own, and they
    wait for their chain's earlier steps (at a million cells, 2-3 GB of a
    worker's memory).
    """
    values = np.random.default_rng(0).standard_normal((64 * 50, 8))
    x = da.from_array(values, chunks=(50, 8)) * 2.0
    folded = fold_rows(x, _slow_gram, shape=(8, 8), dtype=np.float64)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
        dask.config.set({"optimization.fuse.active": False}),
    ):
        client.register_plugin(_HeldBlocks(x.name))
        gram, sums = client.compute([folded, x.sum(axis=1)], sync=True)
        most = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.plugins["held-blocks"].most
        )
    np.testing.assert_allclose(gram, 4 * values.T @ values, rtol=1e-12)
    np.testing.assert_allclose(sums, 2 * values.sum(axis=1))
    assert most <= 2 * FOLD_CHAINS, f"{most} of 64 blocks held at once"
