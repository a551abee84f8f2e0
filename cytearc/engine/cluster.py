"""The engine: the Dask cluster that runs CyteArc's graphs.

By default one :class:`distributed.LocalCluster` per process, whose workers'
memory limits add up to ``mem_budget``, is started on first use and reused by
every :class:`~cytearc.DataStore` of the process; its dashboard link is
printed once. ``cluster=`` runs on an existing cluster instead, given its
scheduler address, the path of its scheduler file (``dask scheduler
--scheduler-file``) or a :class:`distributed.Client`; without ``cluster=``,
the environment variable ``CYTEARC_CLUSTER`` gives one. On every cluster the
tasks run with one BLAS thread and receive aligned arrays
(:func:`cytepool.compute.limit_blas_threads`).

The processes that run CyteArc's tasks on one machine (the workers of the
local cluster as they start, this process when it is the threaded engine)
import the modules of the tasks (:data:`TASK_MODULES`, and nothing else of
CyteArc) before they run any, and load the compiled kernels of
:mod:`cytearc.utils.kernels` in a background thread (:func:`warm_kernels`)
while the engine's first work (an import) reads its input, instead of in
the first normalization's tasks.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import dask
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

from cytearc.engine.budget import Budget, resolve_budget
from cytearc.errors import EngineConfigError
from cytearc.utils.heap import release_freed_heap
from cytepool.compute import CLUSTER_VARIABLE, compute, connect
from cytepool.errors import ClusterConnectError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CLUSTER_VARIABLE",
    "UNPLANNED_TASK_MEMORY",
    "Engine",
    "compute_on",
    "get_engine",
    "import_dask_array_without_xarray",
    "running_engine",
    "shutdown",
    "start_local_cluster",
    "task_memory",
    "warm_kernels",
]


UNPLANNED_TASK_MEMORY: Final = 2**30
"""What one task plans for without an engine (on Dask's current scheduler): 1 GiB."""

_lock = threading.Lock()
_local: Engine | None = None
_external: dict[str, Engine] = {}
_warming: threading.Thread | None = None


TASK_MODULES: Final = (
    "cytearc.storage.counts",
    "cytearc.storage.transpose",
    "cytearc.artifacts.digests",
    "cytearc.ops.normalized_blocks",
    "cytearc.ops.marker_blocks",
    "cytearc.ops.pool_blocks",
    "cytepool.cube.tasks",
)
"""The modules whose functions the standard recipe's and pooling's tasks run, imported by :func:`warm_kernels` before any task.

None of them imports pandas: the operations' tasks run functions of the
``*_blocks`` modules, not of the operations' own modules, which import the
stores and tables."""


def _warm() -> None:
    try:
        from cytearc.utils import kernels  # noqa: PLC0415 (numba is slow to import)

        kernels.warm()
    except Exception:
        # the kernels' first real call compiles them and raises what failed
        logging.getLogger(__name__).debug("warming CyteArc's kernels failed", exc_info=True)


def warm_kernels() -> threading.Thread:
    """Import the task modules, then load CyteArc's compiled kernels in a background thread, once per process.

    The :data:`TASK_MODULES` are imported in the calling thread (about a
    third of a second), then :func:`cytearc.utils.kernels.warm` (numba's
    import and disk cache, about as long) runs in a daemon thread, so the
    first task that normalizes or pools waits for neither. The packages'
    ``__init__`` modules import nothing more
    (:func:`cytepool._lazy.lazy_exports`), so a worker holds the modules of
    the work it runs, not the importers, plots and every operation.

    The task modules are not imported in the background: two threads that
    import modules of one import cycle at once (a package whose
    ``__init__`` imports the submodule another thread imports, as
    ``cytearc.assays`` does) can each wait for the module the other holds,
    and Python then hands one of them a module that is not initialized yet
    (a worker that unpickled a task's function meanwhile failed with
    ``ImportError: cannot import name 'ADTassay'`` and hung). The kernels'
    thread imports only numba and :mod:`cytearc.utils.kernels`, which
    belong to no such cycle.

    Returns
    -------
    threading.Thread
        The thread (the same one on every call in the process).

    Examples
    --------
    >>> warm_kernels().join()
    """
    global _warming  # noqa: PLW0603 (one warm-up per process)
    if _warming is None:
        for module in TASK_MODULES:
            try:
                importlib.import_module(module)
            except Exception:  # the first task that needs it raises what failed
                logging.getLogger(__name__).debug("importing %s failed", module, exc_info=True)
    with _lock:
        if _warming is None:
            _warming = threading.Thread(target=_warm, name="cytearc-warm-kernels", daemon=True)
            _warming.start()
        return _warming


def import_dask_array_without_xarray() -> bool:
    """Import :mod:`dask.array` without letting it import xarray, in a process that has imported neither.

    ``dask.array.core`` imports xarray whenever it is installed (rdata, for
    the Seurat imports, installs it), only to recognise a ``DataArray`` in
    ``da.from_array``, and xarray imports pandas and pyarrow: 85 MB in a
    worker whose tasks use none of them. Hidden for that one import
    (``sys.modules["xarray"] = None``), xarray stays importable afterwards;
    only ``da.from_array`` of a ``DataArray`` in that process no longer takes
    its chunks, which no task of CyteArc's does. The local cluster's workers
    call this before anything else imports :mod:`dask.array`
    (:class:`_WarmKernels`); other processes are left alone.

    Returns
    -------
    bool
        Whether :mod:`dask.array` was imported without xarray.
    """
    if "dask.array" in sys.modules or "xarray" in sys.modules:
        return False
    sys.modules["xarray"] = None  # type: ignore[assignment]  # the documented way to refuse an import
    try:
        importlib.import_module("dask.array")
    finally:
        del sys.modules["xarray"]
    return True


class _WarmKernels(WorkerPlugin):
    """Each worker of the local cluster imports the task modules and warms the kernels as it starts (:func:`warm_kernels`).

    The client's ``register_plugin`` returns once every worker has run
    :meth:`setup`, so the task modules are imported before any task reaches
    a worker. :mod:`dask.array` is imported first, without xarray
    (:func:`import_dask_array_without_xarray`), and the task modules import
    no pandas: an idle worker holds about 210 MB instead of 290.
    """

    name = "cytearc-warm-kernels"

    def setup(self, worker: object) -> None:
        import_dask_array_without_xarray()
        warm_kernels()


@dataclass(frozen=True, kw_only=True, eq=False)
class Engine:
    """A Dask client with the budget it plans by.

    Parameters
    ----------
    client
        The client of the cluster, or None for Dask's threaded scheduler in
        this process (``cluster="threads"``), where the budget is that of the
        whole process.
    budget
        The budget plans are sized by, or None on an external cluster whose
        memory CyteArc did not set; plans then use the workers' own memory
        limits (:meth:`worker_memory`).
    local
        The local cluster this engine started, which :func:`shutdown` closes.
    """

    client: Client | None
    budget: Budget | None
    local: LocalCluster | None = None

    @property
    def dashboard_link(self) -> str | None:
        """The address of the Dask dashboard, when the scheduler serves one."""
        return None if self.client is None else cast("str | None", self.client.dashboard_link)

    def worker_memory(self) -> int:
        """What one task may plan for (bytes): the smallest memory limit per thread among the workers.

        A worker runs one task per thread at once, so each of a worker's
        ``nthreads`` tasks gets ``memory_limit / nthreads``; on the local
        cluster that is :attr:`~cytearc.engine.budget.Budget.per_task`.

        Returns
        -------
        int
            Bytes.

        Raises
        ------
        EngineConfigError
            A worker of an external cluster has no memory limit.
        """
        if self.budget is not None:
            return self.budget.per_task
        assert self.client is not None
        if not self.client.scheduler_info()["workers"]:
            self.client.wait_for_workers(1, timeout=60)
        workers = self.client.scheduler_info()["workers"].values()
        if not workers or not all(w["memory_limit"] for w in workers):
            msg = (
                f"the cluster of {self.client} has workers without memory "
                "limits (or none); start them with --memory-limit so plans can be sized"
            )
            raise EngineConfigError(msg)
        return min(int(w["memory_limit"]) // max(1, int(w["nthreads"])) for w in workers)

    def task_slots(self) -> int:
        """How many tasks run at once: the threads of all workers (of the threaded engine's pool).

        Returns
        -------
        int
            At least 1.

        Examples
        --------
        >>> get_engine(cluster="threads", mem_budget="1GiB", workers="1x2").task_slots()
        2
        """
        if self.client is None:
            return self.budget.workers * self.budget.threads if self.budget else 1
        workers = self.client.scheduler_info()["workers"].values()
        return max(1, sum(int(w["nthreads"]) for w in workers))

    def release_memory(self) -> None:
        """Return the heap memory this process and the workers freed to the system (glibc only).

        :func:`~cytearc.utils.heap.release_freed_heap` here and on every
        worker. A process keeps what its tasks freed in its malloc arenas, so
        without it each stage would start from the previous one's peak.
        Nothing is lost by not trimming, so an error on a worker, a closed
        client or a lost connection is ignored.

        Examples
        --------
        >>> get_engine(cluster="threads").release_memory()
        """
        release_freed_heap()
        if self.client is not None and self.client.status == "running":
            with contextlib.suppress(OSError, TimeoutError):
                self.client.run(release_freed_heap, on_error="ignore")

    def activate(self) -> contextlib.AbstractContextManager[Any]:
        """A context in which Dask's current scheduler is this engine (for code that computes itself).

        Returns
        -------
        contextlib.AbstractContextManager
            The context.
        """
        if self.client is None:
            return dask.config.set(scheduler="threads")
        return self.client.as_current()

    def compute(self, *collections: Any, show_progress: bool = False) -> tuple[Any, ...]:
        """Compute Dask collections on this engine, results in argument order.

        :func:`cytepool.compute.compute` on this engine's client, or on the
        threaded scheduler with one thread per budgeted worker: every task
        has ended when it returns, also after a failure, and tasks use one
        BLAS thread.

        Parameters
        ----------
        *collections
            Dask collections (arrays, delayed values, ...).
        show_progress
            A progress bar while they compute.

        Returns
        -------
        tuple
            The computed values, one per collection.
        """
        if self.client is not None:
            return compute(*collections, client=self.client, progress=show_progress)
        with self.activate():
            return compute(
                *collections,
                n_threads=self.task_slots() if self.budget else None,
                progress=show_progress,
            )


def get_engine(
    *,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: object = None,
) -> Engine:
    """The engine for these settings: a given cluster, or the process's local cluster.

    Parameters
    ----------
    mem_budget, workers
        Budget of the local cluster (see :func:`~cytearc.engine.budget.resolve_budget`):
        ``workers`` is a number of worker processes of one thread each, or
        ``"PxT"`` for ``P`` processes of ``T`` threads; by default a task per
        core in processes of two threads (one process of two threads on two
        cores, which holds one process's memory less than ``2``, for some
        speed on the stages that hold Python's GIL;
        :func:`~cytearc.engine.budget.default_topology`); ignored with ``cluster``.
    cluster
        A scheduler address such as ``"tcp://10.0.0.5:8786"``, the path of
        a Dask scheduler file (a ``.json`` written by ``dask scheduler
        --scheduler-file``), a :class:`distributed.Client`, or ``"threads"``
        for Dask's threaded scheduler in this process (no cluster). By
        default the value of ``CYTEARC_CLUSTER``, else the process's local
        cluster.

    Returns
    -------
    Engine
        The engine; the process's local cluster is started on first use and
        reused after.

    Raises
    ------
    EngineConfigError
        The local cluster already runs with another explicit budget (call
        :func:`shutdown` first), or the cluster cannot be reached.
    """
    global _local  # noqa: PLW0603 (one local cluster per process, by design)
    if cluster is None and os.environ.get(CLUSTER_VARIABLE):
        cluster = os.environ[CLUSTER_VARIABLE]
    if cluster == "threads":
        threaded = Engine(
            client=None, budget=resolve_budget(mem_budget, 1 if workers is None else workers)
        )
        warm_kernels()
        return threaded
    if isinstance(cluster, Client):
        return Engine(client=cluster, budget=None)
    if isinstance(cluster, str):
        with _lock:
            engine = _external.get(cluster)
            if engine is None or engine.client is None or engine.client.status != "running":
                engine = Engine(client=_connect(cluster), budget=None)
                _external[cluster] = engine
            return engine
    if cluster is not None:
        msg = f"cluster: expected a scheduler address or a distributed.Client, found {type(cluster).__name__}"
        raise EngineConfigError(msg)
    explicit = mem_budget is not None or workers is not None
    budget = resolve_budget(mem_budget, workers)
    with _lock:
        if _local is not None and _local.client is not None and _local.client.status == "running":
            if explicit and _local.budget != budget:
                msg = (
                    f"this process's engine runs with {_local.budget}, not the {budget} asked for; "
                    "pass the same mem_budget and workers, or call cytearc.engine.shutdown() first"
                )
                raise EngineConfigError(msg)
            return _local
        local = start_local_cluster(budget)
        client = Client(local, set_as_default=False)
        client.register_plugin(_WarmKernels())
        _local = Engine(client=client, budget=budget, local=local)
        print(f"CyteArc engine: {budget}; dashboard {client.dashboard_link}", file=sys.stderr)
        return _local


def running_engine(cluster: str | None = None) -> Engine | None:
    """The engine already running in this process for ``cluster``, without starting or reaching one.

    Parameters
    ----------
    cluster
        A scheduler address or scheduler file (an engine :func:`get_engine`
        connected to), or None for the process's local cluster.

    Returns
    -------
    Engine or None
        The engine, or None when none runs (its client closed, or never made).
    """
    with _lock:
        engine = _local if cluster is None else _external.get(cluster)
    if engine is None or engine.client is None or engine.client.status != "running":
        return None
    return engine


_WORKER_ENVIRONMENT: Final = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.nanny.pre-spawn-environ.MALLOC_ARENA_MAX": 2,
}
"""The heap policy of local workers: glibc's own thresholds, two malloc arenas.

Dask's ``MALLOC_TRIM_THRESHOLD_=65536`` fixes glibc's mmap threshold at
128 KiB, so every array buffer above it is mapped anew and its pages
faulted in again: zarr encodes and decodes shards three times slower on
such a worker (measured on a 2-core virtual machine: a 1,024 x 20,000 band
written in 0.30 s instead of 0.10 s). Without it, the threads of a worker
(its task, zarr's event loop and codec threads) each keep an arena of
freed buffers, and the 20k anchor recipe peaked 600 MB higher (2,004
against 1,406 MB in single runs); two arenas on the workers bring it to
1,663 MB at the speed of glibc's thresholds (1,424 MB when the client,
whose allocator is the user's, had two as well). A variable set in the
environment still reaches the workers.
"""


def start_local_cluster(
    budget: Budget, *, host: str = "127.0.0.1", port: int = 0, dashboard_port: int = 0
) -> LocalCluster:
    """A :class:`distributed.LocalCluster` of ``budget``: one worker process per budgeted worker, of its threads.

    Parameters
    ----------
    budget
        The workers and the memory limit of each.
    host
        The interface the scheduler and workers listen on; ``0.0.0.0`` lets
        other machines join and connect.
    port, dashboard_port
        The scheduler's and the dashboard's ports (0: free ones).

    Returns
    -------
    distributed.LocalCluster
        The running cluster.

    Raises
    ------
    EngineConfigError
        The workers could not start because the main script starts the
        engine when it is imported.
    """
    _refuse_in_bootstrapping_worker()
    try:
        with dask.config.set(_WORKER_ENVIRONMENT):
            return LocalCluster(
                n_workers=budget.workers,
                threads_per_worker=budget.threads,
                memory_limit=budget.per_worker,
                processes=True,
                host=host,
                scheduler_port=port,
                dashboard_address=f"{host}:{dashboard_port}",
            )
    except RuntimeError as error:
        if _unguarded_script() is None:
            raise
        raise EngineConfigError(_unguarded_message(_unguarded_script())) from error


def _connect(cluster: str) -> Client:
    """A client of the cluster at a scheduler address or described by a scheduler file."""
    try:
        return connect(cluster)
    except ClusterConnectError as error:
        raise EngineConfigError(str(error)) from error


_GUARD_REMEDY: Final = (
    'put the code that starts the engine under `if __name__ == "__main__":` '
    "(Dask starts each worker process by importing the main script again), "
    'or pass cluster="threads" to compute in this process'
)


def _unguarded_script() -> str | None:
    """The main script, when it is a file that worker processes import again on start."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return str(path) if path and str(path).endswith(".py") else None


def _unguarded_message(script: str | None) -> str:
    return f"{script}: the local cluster's workers could not start, because the script starts the engine when it is imported - {_GUARD_REMEDY}"


def _refuse_in_bootstrapping_worker() -> None:
    """In a worker process that is importing the user's script, refuse to start a cluster of its own."""
    main = sys.modules.get("__main__")
    if getattr(main, "__name__", None) == "__mp_main__":
        raise EngineConfigError(_unguarded_message(getattr(main, "__file__", None)))


def task_memory(engine: Engine | None) -> int:
    """What one task may plan for: the engine's :meth:`Engine.worker_memory`, else :data:`UNPLANNED_TASK_MEMORY`.

    Parameters
    ----------
    engine
        The engine, or None for Dask's current scheduler.

    Returns
    -------
    int
        Bytes.
    """
    return engine.worker_memory() if engine is not None else UNPLANNED_TASK_MEMORY


def compute_on(engine: Engine | None, *collections: Any) -> tuple[Any, ...]:
    """Compute on the engine (:meth:`Engine.compute`), or where Dask's current scheduler is.

    Parameters
    ----------
    engine
        The engine, or None.
    *collections
        Dask collections.

    Returns
    -------
    tuple
        Their values, in argument order.
    """
    return engine.compute(*collections) if engine is not None else compute(*collections)


def shutdown() -> None:
    """Close the process's local cluster and the clients of external clusters."""
    global _local  # noqa: PLW0603
    with _lock:
        engines: Sequence[Engine] = [*([_local] if _local else []), *_external.values()]
        _local = None
        _external.clear()
    for engine in engines:
        if engine.client is not None:
            engine.client.close()
        if engine.local is not None:
            engine.local.close()


atexit.register(shutdown)
