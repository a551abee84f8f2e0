"""Lost workers and a lost scheduler: writers finish with the same bits, or fail closed with a named error.

A cluster of separate processes (``dask scheduler`` and two ``dask worker``
processes under nannies, as a site starts them) runs each writer while a
thread SIGKILLs one worker process at a random moment of the run; the nanny
starts a new worker, Dask runs the lost tasks again, and the result must
equal the one computed on threads, with a store that verifies. Killing the
scheduler instead must raise :class:`~cytepool.errors.ClusterLostError` and
publish nothing.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Final

import dask
import pytest
from distributed import Client

from cytearc import DataStore
from cytearc.datasets.synthetic import Params, write_dataset
from cytearc.engine.cluster import get_engine, shutdown
from cytearc.io.detect import import_data
from cytearc.storage.layout import CountLayout
from cytepool import read_cube, write_cube
from cytepool.errors import ClusterLostError
from cytepool.testing import dask_cluster_processes, scheduler_processes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

SMALL: Final = CountLayout(unit_bytes=2**16, chunk_bytes=2**12)
KILLS_PER_WRITER: Final = 5
IMPORT: Final = {"layout": SMALL, "show_progress": False}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler and two nanny-supervised workers, each a process of its own."""
    with scheduler_processes(tmp_path_factory.mktemp("workers"), n_workers=2) as address:
        yield address
    shutdown()


def _source(folder: Path) -> Path:
    """A synthetic H5AD file, and ``source.zarr`` imported from it on threads."""
    write_dataset(Params(n_cells=700, n_genes=520, seed=0), folder / "h5ad", show_progress=False)
    source = folder / "h5ad" / "data.h5ad"
    import_data(source, folder / "source.zarr", cluster="threads", **IMPORT)
    return source


@contextlib.contextmanager
def kill_a_worker(client: Client, *, after: float, rng: random.Random) -> Iterator[list[int]]:
    """SIGKILL one worker process (not its nanny) ``after`` seconds into the block; yield the pids killed.

    The worker pids are read before the block starts, so the kill lands at its
    moment however long a connection takes. The nanny starts a new worker; the
    next run does not wait for it.
    """
    pids = sorted(client.run(os.getpid, on_error="ignore").values())
    killed: list[int] = []
    done = threading.Event()

    def kill() -> None:
        if not done.wait(after) and pids:
            pid = rng.choice(pids)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        done.set()
        thread.join()


def _normalized(ds: DataStore) -> dict[str, bytes]:
    norm = ds.features.normalize("RNA", store_values=True, invalidate_cache=True)
    return {name: norm.read(name).tobytes() for name in ("data", "feature_sum", "feature_m2")}


def _pooled(ds: DataStore, out: Path) -> str:
    path = ds.compare.write_bulk(out, sample_key="sample", group_key="cell_type", overwrite=True)
    return read_cube(path).fingerprint


def _writers(tmp_path: Path, source: Path, cluster: object) -> dict[str, Callable[[int], Any]]:
    """Each writer run on ``cluster``, returning what must not change; ``i`` names its outputs.

    ``source`` is the H5AD file that ``source.zarr``, two folders up, was imported from.
    """
    tmp_path.mkdir(exist_ok=True)
    ds = DataStore(
        source.parent.parent / "source.zarr", zarr_mode="r+", cluster=cluster, show_progress=False
    )
    _pooled(ds, tmp_path / "pooled.cube.zarr")
    cube = read_cube(tmp_path / "pooled.cube.zarr")

    def imported(i: int) -> tuple[str, str]:
        result = import_data(source, tmp_path / f"import-{i}.zarr", cluster=cluster, **IMPORT)
        store = DataStore(result.path, cluster="threads")
        assert store.verify().ok
        return store.dataset_fingerprint, store.RNA.content_fingerprint

    def cube_written(i: int) -> str:
        engine = get_engine(cluster=cluster)
        with engine.activate():
            path = write_cube(cube, tmp_path / f"cube-{i}.cube.zarr")
        return read_cube(path).fingerprint

    return {
        "import": imported,
        "normalize": lambda i: _normalized(ds),
        "pooling": lambda i: _pooled(ds, tmp_path / f"pool-{i}.cube.zarr"),
        "cube write": cube_written,
    }


@pytest.mark.slow
def test_killed_workers_lose_nothing(cluster: str, tmp_path: Path) -> None:
    """At 20 random kill points across four writers, every result equals the threaded one.

    The kill moments are drawn uniformly over the first 80 % of each writer's
    undisturbed run time on the cluster, so they fall while tasks read,
    compute and write. That time is the shortest seen: the first run (which
    also warms the workers) and every run a kill missed (it ended first).
    """
    source = _source(tmp_path)
    on_threads = _writers(tmp_path / "threads", source, "threads")
    reference = {name: writer(0) for name, writer in on_threads.items()}
    on_cluster = _writers(tmp_path / "cluster", source, cluster)
    rng = random.Random(20261202)
    kills = 0
    with Client(cluster, set_as_default=False) as client:
        for name, writer in on_cluster.items():
            start = time.monotonic()
            assert writer(0) == reference[name], name
            duration = time.monotonic() - start
            for i in range(1, KILLS_PER_WRITER + 1):
                after = rng.uniform(0.0, 0.8 * duration)
                start = time.monotonic()
                with kill_a_worker(client, after=after, rng=rng) as killed:
                    result = writer(i)
                if not killed:
                    duration = min(duration, time.monotonic() - start)
                kills += len(killed)
                assert result == reference[name], f"{name}, kill point {i}"
            assert DataStore(tmp_path / "source.zarr", cluster="threads").verify().ok
        client.wait_for_workers(2, timeout=60)
    assert kills >= 4 * KILLS_PER_WRITER * 3 // 4, f"only {kills} kills landed during a run"


def _normalize_until_it_fails(ds: DataStore) -> None:
    for _ in range(50):
        ds.features.normalize("RNA", invalidate_cache=True)


@pytest.mark.slow
def test_a_lost_scheduler_is_a_named_error_and_publishes_nothing(tmp_path: Path) -> None:
    """SIGKILL of the scheduler during normalize raises ClusterLostError; no artifact is published."""
    source = _source(tmp_path).parent.parent / "source.zarr"
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "3s"}),
        dask_cluster_processes(tmp_path) as processes,
    ):
        address = processes.address
        ds = DataStore(source, zarr_mode="r+", cluster=address, show_progress=False)
        before = ds.list_artifacts()
        assert ds.engine.compute(dask.delayed(int)("1")) == (1,)  # connected before the kill
        assert processes.scheduler is not None
        timer = threading.Timer(0.5, processes.scheduler.send_signal, (signal.SIGKILL,))
        timer.start()
        try:
            with pytest.raises(ClusterLostError, match="lost while the computation ran"):
                _normalize_until_it_fails(ds)
        finally:
            timer.cancel()
            shutdown()
    after = DataStore(source, cluster="threads")
    assert after.verify().ok
    expected = _normalized(DataStore(source, zarr_mode="r+", cluster="threads"))
    published = DataStore(source, cluster="threads").list_artifacts("normalized")
    assert {a.ref for a in published} >= {a.ref for a in before if a.kind == "normalized"}
    for artifact in published:
        assert artifact.read("data").tobytes() == expected["data"], artifact.ref
