"""The engine's clusters: one local cluster per process sized by mem_budget, or a given client."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dask.array as da
import pytest
from distributed import Client, LocalCluster

from cytearc.engine import cluster as engine_cluster
from cytearc.engine.cluster import get_engine, shutdown
from cytearc.errors import EngineConfigError

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def clean_engine() -> Iterator[None]:
    shutdown()
    yield
    shutdown()


def test_local_cluster_shares_the_budget(
    clean_engine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Worker memory limits add up to mem_budget; the engine is reused; the dashboard is printed once."""
    engine = get_engine(mem_budget="1GiB", workers=2)
    limits = [w["memory_limit"] for w in engine.client.scheduler_info()["workers"].values()]
    assert sorted(limits) == [2**29, 2**29]
    assert sum(limits) == 2**30
    assert engine.worker_memory() == 2**29
    assert get_engine() is engine
    assert get_engine(mem_budget="1GiB", workers=2) is engine
    err = capsys.readouterr().err
    assert err.count("dashboard http://127.0.0.1:") == 1
    (total,) = engine.compute(da.arange(100, chunks=10).sum())
    assert total == 4950
    with pytest.raises(EngineConfigError, match="shutdown"):
        get_engine(mem_budget="2GiB", workers=2)


def test_given_client_is_used(clean_engine: None) -> None:
    """A distributed.Client passed as cluster= is used as is, with its workers' limits."""
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            memory_limit="600MiB",
            processes=False,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        engine = get_engine(cluster=client)
        assert engine.client is client
        assert engine.budget is None
        assert engine.worker_memory() == 600 * 2**20
        assert engine_cluster._local is None


def test_bad_cluster_argument(clean_engine: None) -> None:
    """Anything but an address or a Client is refused."""
    with pytest.raises(EngineConfigError, match="scheduler address"):
        get_engine(cluster=42)
