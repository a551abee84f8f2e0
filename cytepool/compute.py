"""The one way CytePool and CyteArc compute Dask collections.

:func:`compute` runs collections where Dask's current scheduler is: the
cluster of a given or active :class:`distributed.Client`, else the threaded
scheduler on a pool of threads owned by the call (or another local scheduler
set in ``dask.config``). Every task has ended when it returns, also after a
failure, so a caller that cleans up (a writer removing its staging directory,
an artifact producer deleting its group) never races a task still writing.

Tasks run with one BLAS thread wherever they run, so a matrix product sums in
the same order, and gives the same bits, on the threaded scheduler and on any
cluster: in this process for the threaded scheduler, and on a cluster through
:class:`OneBlasThread`, a worker plugin registered on the client before its
first computation. A nanny sets ``OMP_NUM_THREADS=1`` for the worker it
starts, but a worker started with ``dask worker --no-nanny``, a site's own
launcher or an existing client's cluster keeps BLAS's default of one thread
per core, and OpenBLAS then splits a float32 product differently.

For the same reason every floating-point array a process of the cluster
receives is aligned to its items (:func:`align_received_arrays`, on workers through
:class:`AlignedArrays`, registered with :class:`OneBlasThread`): NumPy
computes on an unaligned array through aligned copies made piece by piece,
and its sums and products then round differently from the same values
computed where they were made.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import dask
import numpy as np
from dask.base import compute as dask_compute
from dask.delayed import Delayed, delayed
from dask.system import CPU_COUNT
from distributed import Client, default_client, wait
from distributed import progress as cluster_progress
from distributed.client import ClosedClientError
from distributed.comm.core import CommClosedError
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.protocol.numpy import deserialize_numpy_ndarray
from distributed.protocol.serialize import (
    dask_deserialize,
    pickle_dumps,
    pickle_loads,
    register_serialization_family,
)
from threadpoolctl import ThreadpoolController, threadpool_limits
from tqdm.auto import tqdm
from tqdm.dask import TqdmCallback

from cytepool.errors import ClusterConnectError, ClusterLostError, CytePoolError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from distributed import Worker

__all__ = [
    "CLUSTER_VARIABLE",
    "AlignedArrays",
    "OneBlasThread",
    "align_received_arrays",
    "compute",
    "connect",
    "current_client",
    "limit_blas_threads",
]

CLUSTER_VARIABLE: Final = "CYTEARC_CLUSTER"
"""The environment variable naming the cluster to compute on when none is given."""

_THREADED: Final = (None, "threads", "threading")
_DISTRIBUTED: Final = (None, "dask.distributed", "distributed")
_THREAD_VARIABLES: Final = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
_PLUGIN_NAME: Final = "cytepool-one-blas-thread"
_ALIGNED_PLUGIN_NAME: Final = "cytepool-aligned-arrays"
_ITEM_ALIGNMENT: Final = 8
"""A received buffer at an address that is a multiple of this suits every NumPy dtype's alignment."""
_ROUNDED_KINDS: Final = "fc"
"""The dtype kinds whose sums round, so that an unaligned array of them is copied when received.

Integers sum exactly, and NumPy casts them to floats in aligned buffers
wherever they lie (checked: their float sums and means have the same bits
unaligned), so a received counts band is not copied.
"""
_registered: weakref.WeakSet[Client] = weakref.WeakSet()
_registering = threading.Lock()
_aligning = threading.Lock()


class OneBlasThread(WorkerPlugin):
    """A worker plugin that runs every task of the worker with one BLAS (and OpenMP) thread.

    On setup it sets the ``*_NUM_THREADS`` variables to 1 for libraries
    loaded later, loads NumPy's and SciPy's BLAS and limits them; before
    each task it applies the limit again (a few microseconds), in case a
    task changed it. Registered by :func:`limit_blas_threads`.
    """

    name = _PLUGIN_NAME

    def __init__(self) -> None:
        self._controller: ThreadpoolController | None = None

    def setup(self, worker: Worker) -> None:
        """Limit the BLAS and OpenMP libraries of the worker's process to one thread."""
        os.environ.update(dict.fromkeys(_THREAD_VARIABLES, "1"))
        import numpy.linalg  # noqa: PLC0415, F401 (load the BLAS libraries to limit them now)
        import scipy.linalg  # noqa: PLC0415, F401

        self._controller = ThreadpoolController()
        self._controller.limit(limits=1)

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:  # noqa: ANN401
        """Before a task executes, apply the limit again."""
        if finish == "executing" and self._controller is not None:
            self._controller.limit(limits=1)


class AlignedArrays(WorkerPlugin):
    """A worker plugin that aligns the floating-point arrays the worker receives (:func:`align_received_arrays`).

    Registered by :func:`limit_blas_threads`.
    """

    name = _ALIGNED_PLUGIN_NAME

    def setup(self, worker: Worker) -> None:
        """Align the arrays the worker's process receives from now on."""
        align_received_arrays()


def limit_blas_threads(client: Client) -> None:
    """Register :class:`OneBlasThread` and :class:`AlignedArrays` on ``client``'s cluster, once per client.

    The scheduler keeps the plugins and gives them to every worker that
    joins later, a restarted one included. The arrays this process gathers
    from the cluster are aligned as well.

    Parameters
    ----------
    client
        The client.
    """
    with _registering:
        if client in _registered:
            return
        align_received_arrays()
        client.register_plugin(OneBlasThread(), name=_PLUGIN_NAME)
        client.register_plugin(AlignedArrays(), name=_ALIGNED_PLUGIN_NAME)
        _registered.add(client)


def align_received_arrays() -> None:
    """Make the NumPy arrays that distributed deserializes in this process aligned to their items.

    distributed reads a message into one buffer and makes each array a view
    of its frame wherever the frame lies, so a float64 array received from
    another process often starts at an address that is not a multiple of 8.
    NumPy computes on such an array through aligned copies made piece by
    piece: a ufunc reduction buffers it in blocks and ``A.T @ A`` multiplies
    copies with ``gemm`` instead of ``syrk``, so a sum or a product of the
    received array rounds differently from the same values where they were
    made, and a result would depend on which worker ran the task. The
    deserializers of NumPy arrays and of pickled objects (whose out-of-band
    buffers hold the arrays of tuples, dicts and other objects) are replaced
    by ones that copy a floating-point array, or a pickled object's buffer,
    that is not aligned, and only those; values, shapes, strides and the
    writeable flag are kept. Calling it again changes nothing.

    Examples
    --------
    >>> from distributed.protocol import deserialize, serialize
    >>> align_received_arrays()
    >>> header, frames = serialize(np.arange(3.0))
    >>> unaligned = memoryview(bytearray(1) + bytes(frames[0]))[1:]
    >>> deserialize(header, [unaligned]).flags.aligned
    True
    """
    with _aligning:
        if dask_deserialize.dispatch(np.ndarray) is _aligned_ndarray:
            return
        for array_type in (np.ndarray, np.matrix):
            dask_deserialize.register(array_type, _aligned_ndarray)
        register_serialization_family("pickle", pickle_dumps, _aligned_pickle_loads)


def _aligned_ndarray(header: dict[str, Any], frames: list[Any]) -> Any:  # noqa: ANN401
    """The NumPy deserializer of distributed, with an unaligned result copied to an aligned array."""
    array = deserialize_numpy_ndarray(header, frames)
    if array.flags.aligned or array.dtype.kind not in _ROUNDED_KINDS:
        return array
    aligned = np.require(array, requirements="A")
    aligned.flags.writeable = array.flags.writeable
    return aligned


def _aligned_pickle_loads(header: dict[str, Any], frames: list[Any]) -> Any:  # noqa: ANN401
    """The pickle deserializer of distributed, with each out-of-band buffer at an aligned address."""
    return pickle_loads(header, [frames[0], *map(_aligned_buffer, frames[1:])])


def _aligned_buffer(frame: Any) -> Any:  # noqa: ANN401
    view = memoryview(frame)
    if view.nbytes == 0 or np.frombuffer(view, np.uint8).ctypes.data % _ITEM_ALIGNMENT == 0:
        return frame
    copy = np.frombuffer(view, np.uint8).copy().data
    return copy.toreadonly() if view.readonly else copy


def connect(cluster: str, *, timeout: str | float | None = None) -> Client:
    """A client of the Dask cluster at a scheduler address or described by a scheduler file.

    Parameters
    ----------
    cluster
        A scheduler address (``tcp://10.0.0.5:8786``) or the path of a
        scheduler file (the ``.json`` that ``dask scheduler
        --scheduler-file`` writes).
    timeout
        How long to try; Dask's ``distributed.comm.timeouts.connect`` by
        default (30 s).

    Returns
    -------
    distributed.Client
        The client, not set as Dask's default.

    Raises
    ------
    ClusterConnectError
        The scheduler file does not exist, or no scheduler answered in time.
    """
    path = Path(cluster)
    scheduler_file = "://" not in cluster and (path.suffix == ".json" or path.is_file())
    if scheduler_file and not path.is_file():
        msg = (
            f"cluster: the scheduler file {cluster} does not exist; start the scheduler with "
            "`dask scheduler --scheduler-file` first, or give its address (tcp://HOST:8786)"
        )
        raise ClusterConnectError(msg)
    where = {"scheduler_file": cluster} if scheduler_file else {"address": cluster}
    wait_for = (
        timeout if timeout is not None else dask.config.get("distributed.comm.timeouts.connect")
    )
    try:
        return Client(**where, set_as_default=False, timeout=wait_for)
    except OSError as error:
        msg = (
            f"cluster: no Dask scheduler answered at {cluster} within {wait_for} ({error}); "
            f"check the address (or {CLUSTER_VARIABLE}) and that the scheduler runs"
        )
        raise ClusterConnectError(msg) from error


def current_client() -> Client | None:
    """The distributed client that is Dask's current scheduler, if any.

    That is the client of an active ``client.as_current()`` block, else the
    default client, unless ``dask.config`` names another scheduler.
    """
    if dask.config.get("scheduler", None) not in _DISTRIBUTED:
        return None
    try:
        return cast("Client", default_client())
    except ValueError:
        return None


def compute(
    *collections: Any,
    client: Client | None = None,
    n_threads: int | None = None,
    progress: bool = False,
) -> tuple[Any, ...]:
    """Compute Dask collections and return their results in argument order.

    Parameters
    ----------
    *collections
        Dask collections (arrays, delayed values, lists of them, ...); other
        values are returned as they are.
    client
        The client to compute on; by default the current one
        (:func:`current_client`), else the threaded scheduler.
    n_threads
        Threads of the pool of the threaded scheduler; by default Dask's
        ``num_workers`` setting, else the number of CPUs.
    progress
        Show a progress bar: distributed's on a cluster, tqdm's otherwise
        (a widget in a notebook, a bar on standard error in a terminal).

    Returns
    -------
    tuple
        One result per collection, in the order given (also for collections
        of mixed types, which ``dask.compute`` groups by type).

    Raises
    ------
    CytePoolError
        ``n_threads`` is not a positive integer.

    Examples
    --------
    >>> import dask.array as da
    >>> from dask import delayed
    >>> compute(delayed(sum)([1, 2]), da.ones(3, chunks=2).sum())
    (3, np.float64(3.0))
    """
    if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
        msg = f"compute: n_threads must be a positive integer, found {n_threads!r}"
        raise CytePoolError(msg)
    collections = _in_order(collections)
    target = client if client is not None else current_client()
    with threadpool_limits(limits=1, user_api="blas"):
        if target is not None:
            return _on_cluster(target, collections, progress=progress)
        with _local_progress(progress=progress):
            if dask.config.get("scheduler", None) not in _THREADED:
                return tuple(dask_compute(*collections))
            n = n_threads or dask.config.get("num_workers", None) or CPU_COUNT
            pool = ThreadPoolExecutor(n)
            try:
                return tuple(dask_compute(*collections, scheduler="threads", pool=pool))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)


def _on_cluster(client: Client, collections: tuple[Any, ...], *, progress: bool) -> tuple[Any, ...]:
    """Compute on ``client``, awaiting every future before any result or error is returned."""
    address = getattr(client.scheduler, "address", None)
    remedy = (
        "nothing was published - restart the scheduler (its log says why it stopped) and run again"
    )
    if client.status == "closed":
        msg = f"the client's Dask scheduler is gone (the client is closed); {remedy}"
        raise ClusterLostError(msg)
    try:
        limit_blas_threads(client)
        with client.as_current():
            futures = client.compute(list(collections))
            if progress:
                cluster_progress(futures)
            wait(futures)
            return tuple(client.gather(futures))
    except (CancelledError, OSError, ClosedClientError) as error:
        lost = isinstance(error, CommClosedError | ClosedClientError) or client.status != "running"
        if not lost:  # a task's own error (raised again by gather), or a future cancelled by a user
            raise
        msg = (
            f"the Dask scheduler at {address} was lost while the computation ran "
            f"({type(error).__name__}); {remedy}"
        )
        raise ClusterLostError(msg) from error


@contextlib.contextmanager
def _local_progress(*, progress: bool) -> Iterator[None]:
    bar = TqdmCallback(tqdm_class=tqdm, desc="compute", unit="task", file=sys.stderr)
    with bar if progress else contextlib.nullcontext():
        yield


def _identity(value: Any) -> Any:  # noqa: ANN401
    return value


def _in_order(collections: tuple[Any, ...]) -> tuple[Any, ...]:
    """Collections whose results Dask returns in argument order.

    ``dask.compute`` (2026.8) groups results of mixed collection types by type
    (arrays before delayed objects), so mixed arguments are all wrapped as
    delayed values.
    """
    if len({type(c) for c in collections}) <= 1:
        return collections
    return tuple(c if isinstance(c, Delayed) else delayed(_identity)(c) for c in collections)
