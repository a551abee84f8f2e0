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
