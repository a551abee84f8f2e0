"""The engine rule for imports: one result on threads, a LocalCluster and an external scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from cytearc import DataStore
from cytearc.engine.cluster import get_engine
from cytearc.io.detect import CrToZarr
from cytearc.storage.layout import CountLayout
from cytepool.testing import scheduler_processes

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

SMALL = CountLayout(unit_bytes=2**16, chunk_bytes=2**12)


def _import(source: Path, target: Path, engine: Engine) -> tuple[str, str, np.ndarray]:
    result = CrToZarr(source, target, engine=engine, layout=SMALL, show_progress=False).dump()
    ds = DataStore(result.path)
    return (
        result.dataset_fingerprint,
        ds.RNA.content_fingerprint,
        ds.RNA.countsT.compute(scheduler="threads"),
    )


@pytest.mark.slow
def test_same_store_on_three_schedulers(tmp_path: Path, shared_data: Path, engine: Engine) -> None:
    """Threads, two local worker processes and an external scheduler write identical stores."""
    source = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5"
    threaded = _import(
        source, tmp_path / "threads.zarr", get_engine(cluster="threads", mem_budget="1GiB")
    )
    local = _import(source, tmp_path / "local.zarr", engine)
    with scheduler_processes(tmp_path / "workers") as address:
        remote = get_engine(cluster=address)
        try:
            external = _import(source, tmp_path / "external.zarr", remote)
        finally:
            assert remote.client is not None
            remote.client.close()
    for other in (local, external):
        assert other[:2] == threaded[:2]
        np.testing.assert_array_equal(other[2], threaded[2])


@pytest.mark.slow
def test_store_writers_give_one_result_on_threads_and_a_local_cluster(
    tmp_path: Path, engine: Engine
) -> None:
    """A merge, a subset and a repack have the same fingerprints on threads and on two worker processes."""
    from cytearc.datasets import write_store  # noqa: PLC0415
    from cytearc.tools import DataStoreMerge, SubsetZarr, repack_zarr  # noqa: PLC0415

    a = write_store(tmp_path / "a.zarr", n_cells=300, n_genes=600, cluster="threads")
    b = write_store(tmp_path / "b.zarr", n_cells=200, n_genes=600, cluster="threads", seed=1)
    assert engine.client is not None
    results = {}
    for name, cluster in (("threads", "threads"), ("local", engine.client)):
        options = {"cluster": cluster, "show_progress": False}
        merged = DataStoreMerge([a, b], tmp_path / f"{name}-ab.zarr", **options).dump()
        half = SubsetZarr(merged, tmp_path / f"{name}-half.zarr", cells=np.arange(250), **options)
        packed = repack_zarr(
            half.dump(), tmp_path / f"{name}-packed.zarr", profile="object_store", **options
        )
        results[name] = [
            (DataStore(p).dataset_fingerprint, DataStore(p).RNA.content_fingerprint)
            for p in (merged, tmp_path / f"{name}-half.zarr", packed)
        ]
    assert results["local"] == results["threads"]
