"""The engine's clusters: one local cluster per process sized by mem_budget, or a given client."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import dask
import dask.array as da
import pytest
from dask.delayed import delayed
from distributed import Client, LocalCluster, get_task_stream

from cytearc import DataStore
from cytearc.datasets import write_store
from cytearc.engine import cluster as engine_cluster
from cytearc.engine.cluster import get_engine, shutdown
from cytearc.errors import EngineConfigError, MemBudgetError
from cytearc.utils import heap
from cytepool.testing import free_heap_below_a_live_block, free_port

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def clean_engine() -> Iterator[None]:
    shutdown()
    yield
    shutdown()


@pytest.mark.slow
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


@pytest.mark.slow
def test_one_local_worker_of_two_threads(clean_engine: None) -> None:
    """``workers="1x2"`` starts one worker process of two threads; each task plans for half its limit."""
    engine = get_engine(mem_budget="1GiB", workers="1x2")
    assert engine.client is not None
    (worker,) = engine.client.scheduler_info()["workers"].values()
    assert (worker["nthreads"], worker["memory_limit"]) == (2, 2**30)
    assert (engine.worker_memory(), engine.task_slots()) == (2**29, 2)
    assert get_engine(mem_budget="1GiB", workers="1x2") is engine
    with pytest.raises(EngineConfigError, match="shutdown"):
        get_engine(mem_budget="1GiB", workers=2)


@pytest.mark.slow
@pytest.mark.parametrize("environment", [None, "131072"])
def test_local_workers_keep_the_heap_policy_of_their_environment(
    clean_engine: None, monkeypatch: pytest.MonkeyPatch, environment: str | None
) -> None:
    """Workers get two malloc arenas and not Dask's MALLOC_TRIM_THRESHOLD_; a user's setting wins."""
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX"):
        if environment is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, environment)
    engine = get_engine(mem_budget="1GiB", workers=1)
    found = engine.client.run(
        lambda: [
            __import__("os").environ.get(name)
            for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX")
        ]
    )
    assert list(found.values()) == [[environment, environment or "2"]]
    assert dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_") == 65536


def _kernels_warmed() -> bool:
    import sys  # noqa: PLC0415 (run on a worker)

    from cytearc.engine import cluster  # noqa: PLC0415

    warming = cluster._warming
    if warming is None:
        return False
    warming.join()
    kernels = sys.modules.get("cytearc.utils.kernels")
    return kernels is not None and all(
        len(kernel.signatures) >= 3 for kernel in (kernels.normalized_codes, kernels.pair_entries)
    )


@pytest.mark.slow
def test_local_workers_warm_the_kernels_as_they_start(clean_engine: None) -> None:
    """Each worker of the local cluster loads the compiled kernels in a thread as it starts."""
    engine = get_engine(mem_budget="1GiB", workers=2)
    assert list(engine.client.run(_kernels_warmed).values()) == [True, True]


def _task_modules_imported() -> bool:
    import sys  # noqa: PLC0415 (run on a worker)

    from cytearc.engine.cluster import TASK_MODULES  # noqa: PLC0415

    return all(module in sys.modules for module in TASK_MODULES)


@pytest.mark.slow
def test_local_workers_import_the_task_modules_before_any_task(clean_engine: None) -> None:
    """The workers import the task modules as the engine starts, not in a thread while tasks arrive."""
    engine = get_engine(mem_budget="1GiB", workers=2)
    assert list(engine.client.run(_task_modules_imported).values()) == [True, True]


_WARM_IN_A_NEW_PROCESS = """
import json, sys
from cytearc.engine import cluster
before = set(sys.modules)
thread = cluster.warm_kernels()
imported = all(module in sys.modules for module in cluster.TASK_MODULES)
returned = set(sys.modules)
thread.join()
ours = sorted(m for m in set(sys.modules) - returned if m.split(".")[0] in ("cytearc", "cytepool"))
print(json.dumps({"imported": imported, "thread": ours, "numba": "numba" in sys.modules}))
"""


def test_warm_kernels_imports_only_numba_and_the_kernels_in_its_thread() -> None:
    """Two threads importing modules of one import cycle at once can deadlock into a half-initialized module.

    So the task modules are imported before warm_kernels returns, and its
    thread imports no module of CyteArc or CytePool but the kernels.
    """
    found = subprocess.run(
        [sys.executable, "-c", _WARM_IN_A_NEW_PROCESS],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = json.loads(found.stdout.strip().splitlines()[-1])
    assert result["imported"], "warm_kernels returned before the task modules were imported"
    assert set(result["thread"]) <= {"cytearc.utils.kernels"}, result["thread"]
    assert result["numba"]


_HEAVY_MODULES_IMPORTED = (
    "[m for m in ('pandas', 'pyarrow', 'xarray', 'cytearc.ops.normalize', 'cytearc.storage.store')"
    " if m in __import__('sys').modules]"
)
"""Evaluated on a worker: a function of this module would be unpickled by importing it, and its imports."""


@pytest.mark.slow
def test_local_workers_run_the_recipe_and_pooling_without_pandas(
    clean_engine: None, tmp_path: Path
) -> None:
    """The tasks' modules import no pandas, and dask.array none through xarray: 85 MB less per worker.

    A worker imports what unpickling its tasks imports: the operations' tasks
    run functions of the ``*_blocks`` modules, not of the operations'
    modules with their stores and tables.
    """
    options = {"mem_budget": "1GiB", "workers": 2}
    path = write_store(
        tmp_path / "ds.zarr", n_cells=300, n_genes=600, show_progress=False, **options
    )
    engine = get_engine(**options)
    assert list(engine.client.run(eval, _HEAVY_MODULES_IMPORTED).values()) == [[], []]
    ds = DataStore(path, zarr_mode="r+", show_progress=False, **options)
    normalized = ds.features.normalize("RNA")
    ds.reduce.pca(normalized, ds.features.hvgs(normalized, n_top=100), n_comps=10)
    ds.markers.search("RNA", group_key="cell_type")
    cube = ds.compare.compute_bulk(sample_key="sample", group_key="cell_type")
    ds.engine.compute(cube.layers["log_sum"], cube.layers["counts"])
    assert list(engine.client.run(eval, _HEAVY_MODULES_IMPORTED).values()) == [[], []]


_WITHOUT_XARRAY_IN_A_NEW_PROCESS = """
import json, sys
from cytearc.engine.cluster import import_dask_array_without_xarray
first = import_dask_array_without_xarray()
hidden = sorted(m for m in ("xarray", "pandas") if m in sys.modules)
import dask.array as da
import xarray
chunked = xarray.DataArray(da.ones((4, 2), chunks=2)).sum().compute().item()
print(json.dumps({"first": first, "hidden": hidden, "again": import_dask_array_without_xarray(),
                  "chunked": chunked}))
"""


def test_dask_array_is_imported_without_xarray_which_stays_importable() -> None:
    """Only the import of dask.array goes without xarray; xarray and dask work together afterwards."""
    found = subprocess.run(
        [sys.executable, "-c", _WITHOUT_XARRAY_IN_A_NEW_PROCESS],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = json.loads(found.stdout.strip().splitlines()[-1])
    assert result == {"first": True, "hidden": [], "again": False, "chunked": 8.0}


def _worker_rss() -> int:
    import psutil  # noqa: PLC0415 (run on a worker)

    return int(psutil.Process().memory_info().rss)


@pytest.mark.slow
@pytest.mark.skipif(heap._malloc_trim() is None, reason="malloc_trim is glibc's")
def test_release_memory_returns_the_workers_freed_heap(clean_engine: None) -> None:
    """Engine.release_memory trims the heap of every worker, not only this process."""
    engine = get_engine(mem_budget="1GiB", workers=2)
    before = engine.client.run(free_heap_below_a_live_block, 128)
    engine.release_memory()
    after = engine.client.run(_worker_rss)
    assert sorted(before) == sorted(after)
    released = [before[worker] - after[worker] for worker in before]
    assert min(released) > 40 * 2**20, f"bytes released per worker: {released}"


def test_release_memory_after_the_client_closed_does_nothing(clean_engine: None) -> None:
    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        engine = get_engine(cluster=client)
    engine.release_memory()


def test_the_threaded_engine_warms_the_kernels_in_this_process(
    clean_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_cluster, "_warming", None)
    get_engine(cluster="threads")
    assert engine_cluster._warming is not None, "the threaded engine started no warm-up"
    assert _kernels_warmed()


@pytest.mark.parametrize(("threads", "per_task"), [(1, 600 * 2**20), (3, 200 * 2**20)])
def test_given_client_is_used(clean_engine: None, threads: int, per_task: int) -> None:
    """A distributed.Client passed as cluster= is used as is; a task plans for its thread's share of a worker."""
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=threads,
            memory_limit="600MiB",
            processes=False,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        engine = get_engine(cluster=client)
        assert engine.client is client
        assert engine.budget is None
        assert engine.worker_memory() == per_task
        assert engine_cluster._local is None


def test_bad_cluster_argument(clean_engine: None) -> None:
    """Anything but an address or a Client is refused."""
    with pytest.raises(EngineConfigError, match="scheduler address"):
        get_engine(cluster=42)


@pytest.fixture
def tcp_client() -> Iterator[Client]:
    """A client of one in-process worker behind a scheduler on 127.0.0.1, not the default one."""
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


def test_compute_runs_on_the_engine_client(clean_engine: None, tcp_client: Client) -> None:
    """An engine on a client computes there, mixed collections in argument order."""
    engine = get_engine(cluster=tcp_client)
    with get_task_stream(client=tcp_client) as stream:
        results = engine.compute(delayed(len)("abc"), da.arange(10, chunks=5).sum())
    assert results == (3, 45)
    assert stream.data


def test_threads_engine_stays_in_this_process(clean_engine: None, tcp_client: Client) -> None:
    """cluster="threads" computes on this process's threads, also while a client is current."""
    engine = get_engine(cluster="threads", workers=2)
    with tcp_client.as_current(), get_task_stream(client=tcp_client) as stream:
        results = engine.compute(da.arange(10, chunks=5).sum(), delayed(len)("ab"))
    assert results == (45, 2)
    assert stream.data == []


def test_cluster_from_the_environment(
    clean_engine: None, tcp_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without cluster=, CYTEARC_CLUSTER names the scheduler; an explicit cluster= wins."""
    address = tcp_client.scheduler.address
    monkeypatch.setenv("CYTEARC_CLUSTER", address)
    engine = get_engine()
    assert engine.client is not None
    assert engine.client.scheduler.address == address
    assert engine.budget is None
    assert engine_cluster._local is None
    assert get_engine(cluster="threads").client is None


def test_cluster_from_a_scheduler_file(
    clean_engine: None, tcp_client: Client, tmp_path: Path
) -> None:
    """The path of a scheduler file (dask scheduler --scheduler-file) is a cluster."""
    scheduler_file = tmp_path / "scheduler.json"
    tcp_client.write_scheduler_file(str(scheduler_file))
    engine = get_engine(cluster=str(scheduler_file))
    assert engine.client is not None
    assert engine.client.scheduler.address == tcp_client.scheduler.address
    (total,) = engine.compute(da.arange(10, chunks=5).sum())
    assert total == 45


def test_unreachable_cluster_is_a_named_error(clean_engine: None, tmp_path: Path) -> None:
    """A missing scheduler file or a silent address raises EngineConfigError naming it."""
    missing = tmp_path / "scheduler.json"
    with pytest.raises(EngineConfigError, match=r"scheduler\.json does not exist"):
        get_engine(cluster=str(missing))
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
        pytest.raises(EngineConfigError, match=r"no Dask scheduler answered at tcp://127\.0\.0\.1"),
    ):
        get_engine(cluster=f"tcp://127.0.0.1:{free_port()}")


def test_workers_with_too_little_memory_are_refused_before_a_write(
    clean_engine: None, tmp_path: Path
) -> None:
    """On a cluster whose workers have less memory than one shard needs, the import refuses first.

    The plan reads the workers' memory limit from the scheduler (here 8 MiB)
    and raises MemBudgetError naming it; the destination is never created,
    and no task ran (so no worker could loop running out of memory).
    """
    from cytearc.datasets import write_store  # noqa: PLC0415

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            memory_limit="8MiB",
            processes=False,
            dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        destination = tmp_path / "small.zarr"
        with (
            get_task_stream(client=client) as stream,
            pytest.raises(MemBudgetError, match=r"fit a worker's memory \(8388608 bytes\)") as info,
        ):
            write_store(destination, n_cells=3000, n_genes=4000, cluster=client)
        assert "the workers' --memory-limit" in str(info.value)
        assert not destination.exists()
        assert stream.data == []


def test_running_engine_starts_and_reaches_nothing(clean_engine: None, tcp_client: Client) -> None:
    """running_engine finds an engine get_engine made, and None for one never made or shut down."""
    address = tcp_client.scheduler.address
    assert engine_cluster.running_engine(address) is None
    assert engine_cluster.running_engine() is None
    engine = get_engine(cluster=address)
    assert engine_cluster.running_engine(address) is engine
    assert engine_cluster.running_engine() is None
    assert engine_cluster._local is None
    shutdown()
    assert engine_cluster.running_engine(address) is None
