"""Sampled resident memory (RSS) of the process tree that runs a stage.

:class:`RssSampler` samples, while it is active, the RSS of this process (or
another given one) and all its descendants (the client) and of the Dask
workers of a client. Local
workers (on this host) are read directly with psutil, remote ones through
``client.run`` at most once a second. A worker that is a descendant of this
process, as the workers of a ``LocalCluster`` are, counts as a worker and not
again as part of the client.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import psutil

from cytearc.errors import CyteArcError, OperationArgumentError

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

    from distributed import Client

__all__ = ["RssSampler"]

_REMOTE_PERIOD_SECONDS: Final = 1.0
_PROCESS_ERRORS: Final = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


def _tree_rss(process: psutil.Process, *, exclude: frozenset[int] = frozenset()) -> int:
    """RSS of ``process`` and its descendants, leaving out the subtrees rooted at ``exclude``."""
    try:
        members = [process, *process.children(recursive=True)]
    except _PROCESS_ERRORS:
        return 0
    excluded: set[int] = set()
    for member in members:
        if member.pid in exclude:
            excluded.add(member.pid)
            try:
                excluded.update(child.pid for child in member.children(recursive=True))
            except _PROCESS_ERRORS:
                continue
    total = 0
    for member in members:
        if member.pid in excluded:
            continue
        try:
            total += member.memory_info().rss
        except _PROCESS_ERRORS:
            continue
    return total


def _worker_identity() -> dict[str, Any]:
    """Run on a worker: its host, pid, start time, and the RSS of its process tree."""
    process = psutil.Process()
    return {
        "host": socket.gethostname(),
        "pid": process.pid,
        "createTime": process.create_time(),
        "rss": _tree_rss(process),
    }


@dataclass(frozen=True, kw_only=True)
class _Sample:
    time: float
    client: int
    workers: int

    @property
    def total(self) -> int:
        return self.client + self.workers


class RssSampler:
    """Context manager sampling the RSS of this process tree and of a client's Dask workers.

    A daemon thread samples every ``interval`` seconds; one sample is also
    taken on entry and one on exit, so that short stages have data.

    Parameters
    ----------
    client
        The Dask client whose workers to include, or None for the process tree only.
    interval
        Seconds between samples.
    pid
        The process at the root of the sampled tree (a subprocess that runs
        a stage); this process by default.

    Examples
    --------
    >>> with RssSampler(None, interval=0.05) as sampler:
    ...     block = bytearray(8 * 2**20)
    >>> metrics = sampler.metrics()
    >>> metrics["samples"] >= 2 and metrics["peakBytes"]["total"] > 8 * 2**20
    True
    """

    def __init__(
        self, client: Client | None, *, interval: float = 0.25, pid: int | None = None
    ) -> None:
        if not (math.isfinite(interval) and interval > 0):
            msg = f"RssSampler: interval: expected a positive number of seconds, found {interval!r}"
            raise OperationArgumentError(msg)
        self.client = client
        self.interval = float(interval)
        self._process = psutil.Process(pid)
        self._host = socket.gethostname()
        self._local_workers: dict[str, psutil.Process] = {}
        self._remote_rss: dict[str, int] = {}
        self._last_poll = -math.inf
        self._samples: list[_Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self._thread is not None or self._samples:
            msg = "RssSampler: a sampler is used once; make a new one for each stage"
            raise CyteArcError(msg)
        self._poll_workers()
        self._take()
        self._thread = threading.Thread(target=self._run, name="cytearc-rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if time.monotonic() - self._last_poll >= _REMOTE_PERIOD_SECONDS:
                try:
                    self._poll_workers()
                except Exception:  # a sample must never fail the stage it measures
                    self._last_poll = time.monotonic()
            self._take()

    def _poll_workers(self) -> None:
        """Identify the client's workers; keep local ones as processes, remote ones as their RSS."""
        self._last_poll = time.monotonic()
        if self.client is None:
            return
        identities = cast("dict[str, object]", self.client.run(_worker_identity, on_error="return"))
        local: dict[str, psutil.Process] = {}
        remote: dict[str, int] = {}
        for address, identity in identities.items():
            if not isinstance(identity, dict):
                continue
            process = self._local_process(identity)
            if process is None:
                remote[address] = int(identity["rss"])
            else:
                local[address] = process
        with self._lock:
            self._local_workers = local
            self._remote_rss = remote

    def _local_process(self, identity: dict[str, Any]) -> psutil.Process | None:
        """The worker's process if it runs on this host (same host name, pid and start time)."""
        if identity["host"] != self._host:
            return None
        try:
            process = psutil.Process(int(identity["pid"]))
            same = process.create_time() == identity["createTime"]
        except _PROCESS_ERRORS:
            return None
        return process if same else None

    def _take(self) -> None:
        with self._lock:
            local = list(self._local_workers.values())
            remote = sum(self._remote_rss.values())
        exclude = frozenset(process.pid for process in local)
        now = time.perf_counter()
        client = _tree_rss(self._process, exclude=exclude)
        workers = remote + sum(_tree_rss(process) for process in local)
        with self._lock:
            self._samples.append(_Sample(time=now, client=client, workers=workers))

    def metrics(self, *, start: float | None = None, stop: float | None = None) -> dict[str, Any]:
        """The samples so far as JSON: interval, count, and peak and mean bytes.

        ``peakBytes`` and ``meanBytes`` each hold ``total``, ``client`` (the
        sampled process and its descendants that are not workers) and
        ``workers``; each peak is the largest value of its own series.

        Parameters
        ----------
        start, stop
            Only the samples taken from ``start`` to ``stop``
            (:func:`time.perf_counter` seconds, a clock that every process of
            a Linux machine shares), such as one step of a longer run; by
            default all.

        Returns
        -------
        dict
            ``intervalSeconds``, ``samples``, ``peakBytes`` and ``meanBytes``.

        Raises
        ------
        CyteArcError
            The sampler was never entered.
        OperationArgumentError
            It took no sample from ``start`` to ``stop``.
        """
        with self._lock:
            samples = list(self._samples)
        if not samples:
            msg = "RssSampler: no samples; use the sampler as a context manager around a stage"
            raise CyteArcError(msg)
        low = -math.inf if start is None else start
        high = math.inf if stop is None else stop
        samples = [sample for sample in samples if low <= sample.time <= high]
        if not samples:
            msg = (
                f"RssSampler: no samples from {start} to {stop} (perf_counter seconds); a window "
                f"needs to be longer than the interval ({self.interval} s) and inside the sampling"
            )
            raise OperationArgumentError(msg)
        series = {
            "total": [sample.total for sample in samples],
            "client": [sample.client for sample in samples],
            "workers": [sample.workers for sample in samples],
        }
        return {
            "intervalSeconds": self.interval,
            "samples": len(samples),
            "peakBytes": {name: max(values) for name, values in series.items()},
            "meanBytes": {
                name: round(sum(values) / len(values)) for name, values in series.items()
            },
        }
