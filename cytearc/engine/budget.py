"""Memory budget and worker count: parsed from arguments or the environment, sized to the machine.

``mem_budget`` is the total memory of the engine's workers. It is given as a
size (``"8G"`` is 8e9 bytes, ``"8GiB"`` 8·2³⁰, ``"512MiB"``), a number of
bytes, or a fraction of the memory this process may use (``"0.5"``), which is
read with cgroup and rlimit limits applied (:func:`distributed.system.memory_limit`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from dask.system import CPU_COUNT
from dask.utils import format_bytes, parse_bytes
from distributed.system import memory_limit

from cytearc.errors import MemBudgetError

__all__ = [
    "DEFAULT_FRACTION",
    "DEFAULT_THREADS",
    "MIN_WORKER_BYTES",
    "Budget",
    "default_topology",
    "detected_memory",
    "parse_mem_budget",
    "parse_topology",
    "parse_workers",
    "resolve_budget",
]

DEFAULT_FRACTION: Final = 0.5
"""Share of the detected memory used when no budget is given."""

MIN_WORKER_BYTES: Final = 256 * 2**20
"""Smallest memory limit of one worker."""
DEFAULT_THREADS: Final = 2
"""Threads of each worker process when ``workers`` is not given.

Every worker process holds Python, NumPy, Dask and the compiled kernels
(about 300 MB once the kernels are loaded), so two tasks in one process
hold that much less than two processes of one thread. On the 20k anchor
data the all-process peak of the import and recipe was 1,079 MB against
1,360 MB (Scarf 1,098), at 100k 1,168 MB against 1,464 MB; the 100k
recipe took 100.0 s against 102.1 s after an import of 68.3 s against
56.1 s; a million cells end to end took 35.4 minutes at a 3.54 GB peak
against 34.0 minutes at 5.02 GB (``benchmarks/RESULTS.md``, 2026-12-07).
"""

ENV_BUDGET: Final = "CYTEARC_MEM_BUDGET"
ENV_WORKERS: Final = "CYTEARC_WORKERS"


def detected_memory() -> int:
    """Bytes this process may use: physical memory, lowered by cgroup and rlimit limits.

    Returns
    -------
    int
        Bytes.
    """
    return int(memory_limit())


def parse_mem_budget(value: str | int | float | None, *, total: int | None = None) -> int:
    """Bytes of a memory budget.

    Parameters
    ----------
    value
        ``"8G"``, ``"512MiB"``, bytes as an int, or a fraction in (0, 1] of
        ``total`` as a float or a string such as ``"0.5"``. ``None`` reads
        ``CYTEARC_MEM_BUDGET``, else takes half of ``total``.
    total
        Memory to take fractions of; detected when omitted.

    Returns
    -------
    int
        The budget in bytes.

    Raises
    ------
    MemBudgetError
        ``value`` (or ``CYTEARC_MEM_BUDGET``) is not a positive size or a
        fraction in (0, 1], or is a size above ``total`` (the memory this
        process may use: physical memory, cgroup and rlimit limits applied).

    Examples
    --------
    >>> parse_mem_budget("8G"), parse_mem_budget("1GiB"), parse_mem_budget(4096)
    (8000000000, 1073741824, 4096)
    >>> parse_mem_budget("0.25", total=8 * 2**30)
    2147483648
    """
    source = "mem_budget"
    if value is None:
        env = os.environ.get(ENV_BUDGET)
        if env is None or not env.strip():
            return int(DEFAULT_FRACTION * (total or detected_memory()))
        value, source = env, ENV_BUDGET
    fraction = _as_fraction(value)
    if fraction is not None:
        return int(fraction * (total or detected_memory()))
    if isinstance(value, bool) or not isinstance(value, str | int):
        msg = f"{source}: expected a size such as '8G', bytes or a fraction such as '0.5', found {value!r}"
        raise MemBudgetError(msg)
    try:
        n_bytes = int(parse_bytes(value))
    except (ValueError, TypeError) as exc:
        msg = f"{source}: cannot read {value!r} as a size; write it as '8G', '512MiB', bytes, or a fraction such as '0.5'"
        raise MemBudgetError(msg) from exc
    if n_bytes <= 0:
        msg = f"{source}: the budget must be positive, found {value!r}"
        raise MemBudgetError(msg)
    available = total or detected_memory()
    if n_bytes > available:
        msg = (
            f"{source}: {value!r} ({format_bytes(n_bytes)}) is more than the "
            f"{format_bytes(available)} of memory this process may use; give at most that, "
            "or a fraction such as '0.5'"
        )
        raise MemBudgetError(msg)
    return n_bytes


def _as_fraction(value: object) -> float | None:
    """The fraction a budget names, or None when it names a size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        number = value
    elif isinstance(value, str) and value.strip().replace(".", "", 1).isdigit() and "." in value:
        number = float(value)
    else:
        return None
    if not 0 < number <= 1:
        msg = f"mem_budget: a fraction of memory must be in (0, 1], found {value!r}; give a size such as '8G' for bytes"
        raise MemBudgetError(msg)
    return number


def parse_workers(value: int | str | None, *, budget: int) -> int:
    """Number of worker processes: given, ``CYTEARC_WORKERS``, or the cores the budget can feed.

    Parameters
    ----------
    value
        The number of workers (an int or a string of digits), or None for
        ``CYTEARC_WORKERS``, else as many cores as the budget gives 256 MiB.
    budget
        The total memory budget in bytes.

    Returns
    -------
    int
        The number of workers, at least 1.

    Raises
    ------
    MemBudgetError
        ``value`` (or ``CYTEARC_WORKERS``) is not a positive whole number.

    Examples
    --------
    >>> parse_workers(3, budget=4 * 2**30)
    3
    """
    source = "workers"
    if value is None:
        env = os.environ.get(ENV_WORKERS)
        if env is None or not env.strip():
            return max(1, min(CPU_COUNT, budget // MIN_WORKER_BYTES))
        value, source = env, ENV_WORKERS
    try:
        workers = int(value)
    except (TypeError, ValueError) as exc:
        msg = f"{source}: expected a positive whole number of workers, found {value!r}"
        raise MemBudgetError(msg) from exc
    if (
        workers < 1
        or isinstance(value, bool)
        or (isinstance(value, str) and not value.strip().isdigit())
    ):
        msg = f"{source}: expected a positive whole number of workers, found {value!r}"
        raise MemBudgetError(msg)
    return workers


@dataclass(frozen=True, kw_only=True)
class Budget:
    """A memory budget split over worker processes, each running ``threads`` tasks at once.

    Parameters
    ----------
    total
        The memory of all workers together, in bytes.
    workers
        The number of worker processes.
    threads
        The threads of each worker process, one task each.
    """

    total: int
    workers: int
    threads: int = 1

    @property
    def per_worker(self) -> int:
        """The memory limit of one worker, in bytes."""
        return self.total // self.workers

    @property
    def per_task(self) -> int:
        """What one task may plan for, in bytes: its worker's limit over the worker's threads."""
        return self.per_worker // self.threads

    def __str__(self) -> str:
        workers = f"{self.workers} worker{'s' if self.workers > 1 else ''}"
        threads = "" if self.threads == 1 else f" of {self.threads} threads"
        return f"{format_bytes(self.total)} over {workers}{threads} ({format_bytes(self.per_worker)} each)"


def default_topology(tasks: int) -> tuple[int, int]:
    """Worker processes and threads of each that run ``tasks`` tasks at once by default.

    Processes of :data:`DEFAULT_THREADS` threads, the remainder shared out
    as threads (one process of three threads for three tasks).

    Parameters
    ----------
    tasks
        Tasks at once, at least 1.

    Returns
    -------
    tuple of int
        The worker processes and the threads of each.

    Examples
    --------
    >>> default_topology(1), default_topology(2), default_topology(3), default_topology(8)
    ((1, 1), (1, 2), (1, 3), (4, 2))
    """
    processes = max(1, tasks // DEFAULT_THREADS)
    return processes, max(1, tasks // processes)


def parse_topology(value: int | str | None, *, budget: int) -> tuple[int, int]:
    """Worker processes and threads of each: ``value`` as :func:`parse_workers` reads it, or ``"PxT"``.

    Parameters
    ----------
    value
        A number of workers of one thread each (see :func:`parse_workers`),
        or a string ``"PxT"``: ``P`` worker processes of ``T`` threads each
        (``"1x2"``: one process running two tasks at once, which holds one
        process's memory less than two of one thread). None reads
        ``CYTEARC_WORKERS``, which takes the same forms, else runs as many
        tasks at once as :func:`parse_workers` gives workers, in processes of
        :data:`DEFAULT_THREADS` threads (one process of two threads on two
        cores, one of three on three).
    budget
        The total memory budget in bytes.

    Returns
    -------
    tuple of int
        The worker processes and the threads of each.

    Raises
    ------
    MemBudgetError
        A part of ``value`` (or of ``CYTEARC_WORKERS``) is not a positive whole number.

    Examples
    --------
    >>> parse_topology("1x2", budget=4 * 2**30), parse_topology(3, budget=4 * 2**30)
    ((1, 2), (3, 1))
    """
    if value is None and os.environ.get(ENV_WORKERS, "").strip():
        value = os.environ[ENV_WORKERS]
    if value is None:
        return default_topology(parse_workers(None, budget=budget))
    if not isinstance(value, str) or "x" not in value.lower():
        return parse_workers(value, budget=budget), 1
    processes, _, threads = value.lower().partition("x")
    try:
        return parse_workers(processes, budget=budget), parse_workers(threads, budget=budget)
    except MemBudgetError as error:
        msg = f"workers: expected a number of workers or 'PxT' (P processes of T threads, e.g. '1x2'), found {value!r}"
        raise MemBudgetError(msg) from error


def resolve_budget(
    mem_budget: str | int | float | None = None, workers: int | str | None = None
) -> Budget:
    """The :class:`Budget` of the arguments or the environment; refuses workers below 256 MiB.

    Parameters
    ----------
    mem_budget
        The total memory (see :func:`parse_mem_budget`).
    workers
        The number of workers of one thread each (see :func:`parse_workers`),
        or ``"PxT"``, ``P`` workers of ``T`` threads (see :func:`parse_topology`).

    Returns
    -------
    Budget
        The budget.

    Raises
    ------
    MemBudgetError
        A value cannot be parsed, or a worker would get less than 256 MiB.

    Examples
    --------
    >>> str(resolve_budget("4GiB", 2))
    '4.00 GiB over 2 workers (2.00 GiB each)'
    >>> resolve_budget("4GiB", "1x2").per_task
    2147483648
    """
    total = parse_mem_budget(mem_budget)
    n_workers, threads = parse_topology(workers, budget=total)
    budget = Budget(total=total, workers=n_workers, threads=threads)
    if budget.per_worker < MIN_WORKER_BYTES:
        msg = (
            f"mem_budget {format_bytes(total)} over {n_workers} workers leaves "
            f"{format_bytes(budget.per_worker)} each, below {format_bytes(MIN_WORKER_BYTES)}; "
            "raise mem_budget or use fewer workers"
        )
        raise MemBudgetError(msg)
    return budget
