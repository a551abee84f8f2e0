"""Sampled RSS of the process tree and of a client's Dask workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import distributed
import psutil
import pytest

from cytearc.errors import CyteArcError
from cytearc.pipeline.rss import RssSampler

if TYPE_CHECKING:
    from collections.abc import Iterator

MIB = 2**20
_ALLOCATE = """
import sys
block = b"\\x01" * (256 * 2**20)
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    with (
        distributed.LocalCluster(
            n_workers=1,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_metrics_shape() -> None:
    """Metrics are JSON: interval, sample count, and peak and mean bytes of each series."""
    with RssSampler(None, interval=0.02) as sampler:
        time.sleep(0.1)
    metrics = sampler.metrics()
    assert json.loads(json.dumps(metrics)) == metrics
    assert metrics["intervalSeconds"] == 0.02
    assert metrics["samples"] >= 3
    for name in ("peakBytes", "meanBytes"):
        assert set(metrics[name]) == {"total", "client", "workers"}
        assert all(isinstance(value, int) for value in metrics[name].values())
        assert metrics[name]["workers"] == 0
        assert metrics[name]["total"] == metrics[name]["client"] > 0
    assert metrics["peakBytes"]["total"] >= metrics["meanBytes"]["total"]


def test_short_stage_has_entry_and_exit_samples() -> None:
    """A stage shorter than the interval still has the samples of entry and exit."""
    with RssSampler(None, interval=60) as sampler:
        pass
    assert sampler.metrics()["samples"] == 2


def test_sampler_is_used_once_and_validates() -> None:
    """A sampler cannot be reused, reports nothing before use, and needs a positive interval."""
    sampler = RssSampler(None)
    with pytest.raises(CyteArcError, match="no samples"):
        sampler.metrics()
    with sampler:
        pass
    with pytest.raises(CyteArcError, match="used once"), sampler:
        pass
    for interval in (0, -1, float("nan")):
        with pytest.raises(CyteArcError, match="positive number of seconds"):
            RssSampler(None, interval=interval)


def test_child_allocation_raises_the_peak() -> None:
    """Memory that a child process holds counts in the client's peak."""
    with RssSampler(None, interval=0.02) as baseline:
        time.sleep(0.1)
    with RssSampler(None, interval=0.02) as sampler:
        child = subprocess.Popen(
            [sys.executable, "-c", _ALLOCATE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            time.sleep(0.1)
        finally:
            child.communicate(timeout=30)
    before, during = baseline.metrics()["peakBytes"], sampler.metrics()["peakBytes"]
    assert during["client"] - before["client"] > 200 * MIB
    assert during["workers"] == 0


@pytest.mark.slow
def test_workers_of_a_local_cluster(client: distributed.Client) -> None:
    """The workers' bytes are reported, and a worker that is our child is not counted twice."""
    (pid,) = client.run(lambda: psutil.Process().pid).values()
    ours = {child.pid for child in psutil.Process().children(recursive=True)}
    assert pid in ours
    with RssSampler(client, interval=0.05) as sampler:
        client.submit(time.sleep, 0.2).result()
    metrics = sampler.metrics()
    worker_rss = psutil.Process(pid).memory_info().rss
    assert metrics["peakBytes"]["workers"] > 0.5 * worker_rss
    for name in ("peakBytes", "meanBytes"):
        assert metrics[name]["workers"] > 0
    tree = sum(
        process.memory_info().rss
        for process in [psutil.Process(), *psutil.Process().children(recursive=True)]
    )
    assert metrics["meanBytes"]["total"] < 1.5 * tree
    assert metrics["meanBytes"]["client"] < tree - 0.5 * worker_rss


@pytest.mark.slow
def test_worker_allocation_raises_the_worker_peak(client: distributed.Client) -> None:
    """Memory that a worker holds counts in the workers' peak, not the client's."""

    def hold() -> int:
        block = b"\x01" * (128 * MIB)
        time.sleep(0.4)
        return len(block)

    with RssSampler(client, interval=0.05) as baseline:
        time.sleep(0.2)
    with RssSampler(client, interval=0.05) as sampler:
        assert client.submit(hold, pure=False).result() == 128 * MIB
    grown = sampler.metrics()["peakBytes"]["workers"] - baseline.metrics()["peakBytes"]["workers"]
    assert grown > 100 * MIB


def test_window_metrics_split_the_samples() -> None:
    """Metrics of a time window hold its samples only; an empty window is refused."""
    with RssSampler(None, interval=0.02) as sampler:
        time.sleep(0.1)
        middle = time.perf_counter()
        time.sleep(0.1)
    whole = sampler.metrics()
    before, after = sampler.metrics(stop=middle), sampler.metrics(start=middle)
    assert before["samples"] >= 2
    assert after["samples"] >= 2
    assert before["samples"] + after["samples"] == whole["samples"]
    peaks = (before["peakBytes"]["total"], after["peakBytes"]["total"])
    assert max(peaks) == whole["peakBytes"]["total"]
    with pytest.raises(CyteArcError, match="no samples from"):
        sampler.metrics(start=middle + 3600)


def test_another_process_tree_is_sampled() -> None:
    """With pid, the sampled tree is that process's: a child holding 256 MiB, not this process."""
    child = subprocess.Popen(
        [sys.executable, "-c", _ALLOCATE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        with RssSampler(None, interval=0.02, pid=child.pid) as sampler:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            held = psutil.Process(child.pid).memory_info().rss
            time.sleep(0.1)
    finally:
        child.communicate(timeout=30)
    peak = sampler.metrics()["peakBytes"]
    assert held > 256 * MIB
    assert 0.95 * held <= peak["client"] < held + 32 * MIB
    assert peak["workers"] == 0
