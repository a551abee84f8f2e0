"""countsT out of core: a split and a gather pass through a scratch array, each task within a worker's memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dask.array as da
import numpy as np
import pytest
import zarr

from cytearc.engine.geometry import ArrayGeometry
from cytearc.errors import MemBudgetError
from cytearc.storage import transpose
from cytearc.storage.counts import CountsWriter, write_count_arrays
from cytearc.storage.layout import CountLayout
from cytearc.storage.transpose import SCRATCH, TransposePlan

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

SMALL = CountLayout(unit_bytes=2**14, chunk_bytes=2**11)


def _values(n_rows: int, n_cols: int, *, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.poisson(0.4, size=(n_rows, n_cols)) * (rng.random((n_rows, n_cols)) < 0.2)
    return values.astype(np.uint16)


def _written(path: Path, values: np.ndarray, **kwargs: object) -> zarr.Group:
    group = zarr.create_group(store=path, zarr_format=3)
    write_count_arrays(
        group, da.from_array(values, chunks=(500, -1)), layout=SMALL, compressor=None, **kwargs
    )
    return group


def test_many_bands_and_groups_give_the_exact_transpose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tasks of 64 KiB, countsT is written by many split and gather tasks; it equals counts.T and the scratch is gone."""
    monkeypatch.setattr(transpose, "TASK_BYTES", 2**16)
    values = _values(3_001, 257)
    group = _written(tmp_path / "m.zarr", values)
    counts, counts_t = group["counts"], group["countsT"]
    assert isinstance(counts, zarr.Array)
    assert isinstance(counts_t, zarr.Array)
    plan = TransposePlan(
        ArrayGeometry.of(counts), ArrayGeometry.of(counts_t), budget=2**30, where="m"
    )
    assert len(plan.bands()) > 10
    assert len(plan.groups()) > 10
    np.testing.assert_array_equal(counts_t[:], values.T)
    assert SCRATCH not in group
    assert sorted(group.array_keys()) == ["counts", "countsT"]


def test_bands_and_groups_are_whole_shards_that_fit_the_budget(tmp_path: Path) -> None:
    """Each split band is whole counts shards and each gather group whole countsT shards, charged within the budget."""
    group = _written(tmp_path / "m.zarr", _values(2_000, 300))
    counts, counts_t = group["counts"], group["countsT"]
    assert isinstance(counts, zarr.Array)
    assert isinstance(counts_t, zarr.Array)
    budget = 200_000
    plan = TransposePlan(
        ArrayGeometry.of(counts), ArrayGeometry.of(counts_t), budget=budget, where="m"
    )
    source, target = ArrayGeometry.of(counts), ArrayGeometry.of(counts_t)
    assert plan.band_rows % source.unit_rows == 0
    assert plan.group_rows % target.unit_rows == 0
    band_cost = source.read_bytes(slice(0, plan.band_rows)) + plan.band_rows * 2 * 300 * 2
    assert band_cost <= budget
    scratch = ArrayGeometry(
        shape=target.shape, chunks=(target.unit_rows, plan.band_rows), itemsize=2
    )
    group_cost = scratch.read_bytes(slice(0, plan.group_rows)) + plan.group_rows * 2 * 2_000 * 2
    assert group_cost <= budget
    with pytest.raises(
        MemBudgetError, match=r"m: counts: a block of 16 rows needs .* raise mem_budget"
    ):
        TransposePlan(
            ArrayGeometry.of(counts), ArrayGeometry.of(counts_t), budget=10_000, where="m"
        )


@pytest.mark.slow
def test_the_same_counts_t_on_a_local_cluster(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split and gather tasks on two worker processes write the bytes the threaded scheduler writes."""
    monkeypatch.setattr(transpose, "TASK_BYTES", 2**15)
    values = _values(2_500, 300, seed=2)
    threaded = _written(tmp_path / "a.zarr", values)
    clustered = _written(tmp_path / "b.zarr", values, engine=engine)
    for name in ("counts", "countsT"):
        files = sorted(
            p.relative_to(tmp_path / "a.zarr")
            for p in (tmp_path / "a.zarr" / name).rglob("*")
            if p.is_file()
        )
        assert files
        for rel in files:
            assert (tmp_path / "a.zarr" / rel).read_bytes() == (
                tmp_path / "b.zarr" / rel
            ).read_bytes(), rel
    assert SCRATCH not in threaded
    assert SCRATCH not in clustered


def test_a_transposing_writer_refuses_to_complete_without_counts_t(tmp_path: Path) -> None:
    """A writer made with transpose=True has countsT and its scratch array; completing without them is refused."""
    group = zarr.create_group(store=tmp_path / "m.zarr", zarr_format=3)
    values = _values(600, 40)
    writer = CountsWriter(
        group, shape=values.shape, dtype=values.dtype, layout=SMALL, compressor=None, transpose=True
    )
    writer.append(values)
    with pytest.raises(ValueError, match="made to write countsT"):
        writer.finish(transpose=False)
    assert SCRATCH in group
    np.testing.assert_array_equal(writer.finish(transpose=True).row_sums, values.sum(axis=1))
    assert SCRATCH not in group


def test_a_band_is_split_without_a_second_copy_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """split_band transposes one row of scratch chunks at a time: it allocates far less than the band."""
    import tracemalloc  # noqa: PLC0415

    monkeypatch.setattr(transpose, "TASK_BYTES", 2**20)
    values = _values(2_048, 4_000)
    group = zarr.create_group(store=tmp_path / "m.zarr", zarr_format=3)
    writer = CountsWriter(
        group,
        shape=values.shape,
        dtype=np.dtype(np.uint16),
        layout=CountLayout(unit_bytes=2**20, chunk_bytes=2**16),
        compressor=None,
        transpose=True,
    )
    scratch = writer.scratch
    assert scratch is not None
    assert scratch.chunks[0] < values.shape[1] // 4, "the test needs several rows of scratch chunks"
    tracemalloc.start()
    try:
        transpose.split_band(values, scratch, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(scratch[:, : values.shape[0]], values.T)
    assert peak < values.nbytes // 2, (
        f"split_band allocated {peak:,} bytes for a band of {values.nbytes:,}"
    )
