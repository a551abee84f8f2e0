"""The one compute function: where it runs, result order, BLAS threads, and no task left running."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Literal

import dask
import dask.array as da
import numpy as np
import pytest
from dask.delayed import delayed
from distributed import Client, LocalCluster, get_task_stream
from distributed.protocol.serialize import deserialize, serialize
from threadpoolctl import threadpool_info

from cytepool import limma_voom
from cytepool.compute import align_received_arrays, compute, current_client
from cytepool.cube.demo import demo_cube
from cytepool.de.testing import assert_result_equal
from cytepool.errors import CytePoolError

if TYPE_CHECKING:
    from collections.abc import Iterator

DESIGN = "~ donor + condition"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Two in-process workers behind a scheduler on 127.0.0.1 (TCP), no dashboard."""
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address=None,
    ) as local:
        yield local


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster, set_as_default=False) as c:
        yield c


def _blas_threads() -> list[int]:
    return [int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_mixed_collections_come_back_in_argument_order() -> None:
    """An array, a delayed value, a list and a plain value are returned in the order given."""
    results = compute(da.arange(4, chunks=2).sum(), delayed(len)("abc"), [delayed(abs)(-2)], 7)
    assert results == (6, 3, [2], 7)


def test_tasks_run_with_one_blas_thread() -> None:
    """Every task on the threaded scheduler sees one BLAS thread."""
    (threads,) = compute(delayed(_blas_threads, pure=False)())
    assert threads
    assert set(threads) == {1}


def test_every_task_has_ended_when_a_failure_returns() -> None:
    """A failing task raises only after the slower task running beside it has finished."""
    finished = threading.Event()

    def slow() -> int:
        time.sleep(0.3)
        finished.set()
        return 1

    def fail() -> int:
        msg = "boom"
        raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="boom"):
        compute(delayed(slow, pure=False)(), delayed(fail, pure=False)(), n_threads=2)
    assert finished.is_set()


@pytest.mark.parametrize("n_threads", [0, -1, 1.5, True])
def test_n_threads_must_be_a_positive_integer(n_threads: object) -> None:
    """A thread count that is not a positive integer is refused, naming it."""
    with pytest.raises(CytePoolError, match=r"n_threads must be a positive integer, found"):
        compute(delayed(len)("a"), n_threads=n_threads)  # type: ignore[arg-type]


def test_the_current_client_is_the_active_one(client: Client) -> None:
    """``as_current`` makes a client current; a scheduler set in dask.config wins over it."""
    assert current_client() is None
    with client.as_current():
        assert current_client() is client
        with dask.config.set(scheduler="threads"):
            assert current_client() is None


def test_collections_run_on_the_current_client(client: Client) -> None:
    """Inside ``as_current`` the tasks run on the cluster's workers, with their results."""
    workers = set(client.scheduler_info()["workers"])
    with client.as_current(), get_task_stream(client=client) as stream:
        (total,) = compute(da.ones((6, 4), chunks=(2, 4)).sum())
    assert total == 24
    assert stream.data
    assert {task["worker"] for task in stream.data} <= workers


def test_results_on_a_cluster_come_back_in_argument_order(client: Client) -> None:
    """Arrays of many blocks, delayed values, lists and plain values, as given, on a cluster."""
    x = np.arange(60, dtype=np.float64).reshape(6, 10)
    lazy = da.from_array(x, chunks=(4, 3)) * 2
    with client.as_current():
        results = compute(lazy, delayed(len)("abc"), [delayed(abs)(-2), lazy.sum()], 7)
    np.testing.assert_array_equal(results[0], x * 2)
    assert results[1:] == (3, [2, x.sum() * 2], 7)


_calls: list[int] = []


def _counted(i: int) -> np.ndarray:
    _calls.append(i)
    return np.full(2, i)


def test_a_task_shared_by_two_collections_runs_once_on_a_cluster(client: Client) -> None:
    """Collections computed together are optimized together: a block both read is computed once."""
    _calls.clear()
    base = da.concatenate(
        [da.from_delayed(delayed(_counted)(i), shape=(2,), dtype=int) for i in range(3)]
    )
    with client.as_current():
        plus, times = compute(base + 1, base * 2)
    np.testing.assert_array_equal(plus, np.repeat(np.arange(3), 2) + 1)
    np.testing.assert_array_equal(times, np.repeat(np.arange(3), 2) * 2)
    assert sorted(_calls) == [0, 1, 2]


@pytest.mark.slow
def test_limma_voom_runs_on_the_current_client(client: Client) -> None:
    """Inside ``as_current``, limma_voom fits each group on the cluster, as on threads."""
    cube = demo_cube(n_features=300, n_donors=4)
    threaded = limma_voom(cube, design=DESIGN, min_counts=100)
    workers = set(client.scheduler_info()["workers"])
    with client.as_current(), get_task_stream(client=client) as stream:
        on_cluster = limma_voom(cube, design=DESIGN, min_counts=100)
    fits = [task for task in stream.data if str(task["key"]).startswith("_fit_group-")]
    assert len(fits) == len(cube.groups)
    assert {task["worker"] for task in fits} <= workers
    assert list(on_cluster) == list(threaded)
    assert on_cluster.skipped == threaded.skipped
    for label, result in threaded.items():
        assert_result_equal(on_cluster[label], result)
        assert np.array_equal(
            on_cluster[label].table.to_numpy(), result.table.to_numpy(), equal_nan=True
        )


def _at_odd_address(frame: object) -> memoryview:
    """The bytes of a frame one byte past an aligned address, as a message buffer can hold them."""
    source = memoryview(frame).cast("B")  # type: ignore[arg-type]
    buffer = memoryview(bytearray(source.nbytes + 1))[1:]
    buffer[:] = source
    return buffer.toreadonly() if source.readonly else buffer


def _sent_and_received(value: object, *, pickled: bool) -> object:
    header, frames = (
        serialize(value, serializers=("pickle",), iterate_collection=False)
        if pickled
        else serialize(value)
    )
    return deserialize(
        header,
        [frames[0] if pickled else _at_odd_address(frames[0]), *map(_at_odd_address, frames[1:])],
    )


@pytest.mark.parametrize("pickled", [False, True], ids=["array", "pickled-tuple"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_a_received_array_sums_to_the_bits_of_the_array_sent(
    pickled: bool, order: Literal["C", "F"]
) -> None:
    """An array received at an odd address is aligned, equal, and sums to the sender's bits.

    NumPy sums an unaligned float64 array through aligned copies of pieces
    of it, so without :func:`align_received_arrays` the sum of these
    1.4 million values differs in its last bits from the sum of the array
    sent (as does ``A.T @ A`` for other shapes).
    """
    align_received_arrays()
    sent = np.asarray(np.random.default_rng(5).random((200_000, 7)) * 1e3, order=order)
    received = _sent_and_received(
        (sent, {"n": np.arange(3.0)}) if pickled else sent, pickled=pickled
    )
    array = received[0] if isinstance(received, tuple) else received
    assert isinstance(array, np.ndarray)
    assert array.flags.aligned
    assert array.flags.writeable
    assert array.flags.f_contiguous == (order == "F")
    np.testing.assert_array_equal(array, sent)
    assert array.sum().tobytes() == sent.sum().tobytes()


def test_only_unaligned_floating_point_arrays_are_copied() -> None:
    """A read-only float array is copied and stays read-only; aligned and integer arrays are not copied.

    Integers sum exactly wherever they lie, so a received counts band is
    not copied.
    """
    align_received_arrays()
    sent = np.arange(1000.0)
    sent.flags.writeable = False
    received = _sent_and_received(sent, pickled=False)
    assert isinstance(received, np.ndarray)
    assert received.flags.aligned
    assert not received.flags.writeable
    for value, at in ((np.arange(1000.0), memoryview), (np.arange(1000), _at_odd_address)):
        header, frames = serialize(value)
        frame = at(frames[0])
        received = deserialize(header, [frame])
        np.testing.assert_array_equal(received, value)
        assert received.ctypes.data == np.frombuffer(frame, np.uint8).ctypes.data
