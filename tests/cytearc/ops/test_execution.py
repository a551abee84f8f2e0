"""How operations run: lazy graphs, one computation, equal bits on any scheduler, read-only reuse."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
from threadpoolctl import threadpool_limits

from cytearc import DataStore
from cytearc.engine.cluster import get_engine, shutdown
from cytearc.errors import EngineConfigError, ReadOnlyStoreError
from cytearc.ops.normalize import band_statistics, data_chunk_rows, normalized_graph
from cytearc.ops.normalized_blocks import _gram, merge_band_statistics
from cytearc.ops.pca import feature_scaling, scaled_graph
from cytearc.ops.selection import open_selection
from cytearc.storage.finite_values import checked_blocks
from cytepool.testing import dask_cluster_processes, raise_if_dask_computes, tree_snapshot

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cytearc.engine.cluster import Engine


class _Computations(Callback):
    """Counts the graphs Dask's local schedulers run."""

    def __init__(self) -> None:
        super().__init__()
        self.graphs = 0

    def _start(self, dsk: Any) -> None:
        self.graphs += 1


def _bits(values: np.ndarray) -> np.ndarray:
    """The bytes of an array, so NaN, -0.0 and last-bit differences all count."""
    return np.ascontiguousarray(values).view(np.uint8)


# --- laziness ------------------------------------------------------------------------------


def test_compute_guard_catches_a_compute() -> None:
    """The guard used below does fail on a computation."""
    with raise_if_dask_computes(), pytest.raises(RuntimeError, match="Too many computes"):
        da.ones(4, chunks=2).sum().compute()


def test_normalize_and_pca_graphs_build_without_computing(planted, chain, open_threads) -> None:
    """The graphs of normalize (values, checks, moments) and of the PCA Gram matrix compute nothing.

    ``normalize`` builds its graph inside its artifact's build step, so the
    graph is rebuilt here from the same pieces; computed afterwards it gives
    the stored statistics bit for bit, and the values those of numpy.
    """
    with raise_if_dask_computes():
        ds = open_threads(planted.path)
        source = ds.assays["RNA"]
        rows = open_selection(ds, chain.norm.inputs()["cells"]).rows
        data = normalized_graph(source, rows, method="library_size", target_sum=1e4, log1p=True)
        n_features = source.shape[1]
        checked = checked_blocks(
            data.rechunk((data_chunk_rows(len(rows), n_features), n_features)),
            operation="features.normalize",
            array="data",
        )
        statistics = band_statistics(data)
        features = chain.hvgs.read("features")
        mean, sd = feature_scaling(chain.norm, features)
        z = scaled_graph(ds, chain.norm, features, mean=mean, sd=sd, max_value=None)
        gram = z.T @ z
    values, gram_values, stacked = da.compute(checked, gram, statistics, scheduler="threads")
    merged, linear, nnz = merge_band_statistics(stacked)
    library = planted.rna[rows].sum(axis=1).astype(np.float64)
    expected = np.log1p(planted.rna[rows] * (1e4 / library)[:, None]).astype(np.float32)
    np.testing.assert_array_equal(_bits(values), _bits(expected))
    np.testing.assert_array_equal(_bits(merged.total), _bits(chain.norm.read("feature_sum")))
    np.testing.assert_array_equal(_bits(merged.m2), _bits(chain.norm.read("feature_m2")))
    np.testing.assert_array_equal(_bits(linear.m2), _bits(chain.norm.read("linear_m2")))
    np.testing.assert_array_equal(nnz, chain.norm.read("feature_nnz"))
    eigenvalues = np.sort(np.linalg.eigvalsh(gram_values))[::-1][:10]
    n = len(rows)
    np.testing.assert_allclose(
        eigenvalues / (n - 1), chain.pca.read("explained_variance"), rtol=1e-10
    )


@pytest.mark.parametrize(("method", "graphs"), [("library_size", 1), ("tfidf", 2)])
def test_normalize_runs_one_graph_per_pass(planted, chain, method: str, graphs: int) -> None:
    """Normalize merges its moments in one computation (TF-IDF first counts the idf)."""
    counter = _Computations()
    with counter:
        chain.ds.features.normalize(
            "RNA", cell_selection=planted.mask, method=method, invalidate_cache=True
        )
    assert counter.graphs == graphs


# --- schedulers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def on_cluster(planted, chain, engine: Engine) -> tuple[Any, Any, Any]:
    """normalize, hvgs and PCA of the chain again, on the 2-worker local cluster."""
    ds = DataStore(planted.path, zarr_mode="r+", show_progress=False)
    assert ds.engine.client is not None
    norm = ds.features.normalize("RNA", cell_selection=planted.mask, invalidate_cache=True)
    hv = ds.features.hvgs(norm, n_top=100, flavor="log")
    return norm, hv, ds.reduce.pca(norm, hv, n_comps=10)


@pytest.fixture(scope="module")
def engine(_engine_session: None) -> Engine:
    """The session's 2-worker local cluster (tests/cytearc/conftest.py), for a module fixture."""
    try:
        return get_engine(mem_budget="2GiB", workers=2)
    except EngineConfigError:
        shutdown()
        return get_engine(mem_budget="2GiB", workers=2)


def test_threads_and_local_cluster_normalize_to_equal_bits(chain, on_cluster) -> None:
    """Normalized rows and feature moments are bit-identical on 2 worker processes."""
    norm, hv, _ = on_cluster
    assert norm.ref != chain.norm.ref
    assert norm.provenance == chain.norm.provenance
    assert norm.attrs["execution_options"]["scheduler"] == "distributed"
    assert chain.norm.attrs["execution_options"]["scheduler"] == "threads"
    for name in ("rows", "feature_sum", "feature_m2", "linear_sum", "linear_m2"):
        np.testing.assert_array_equal(_bits(norm.read(name)), _bits(chain.norm.read(name)))
    for name in ("mean", "variance", "dispersion", "dispersion_norm", "features"):
        np.testing.assert_array_equal(_bits(hv.read(name)), _bits(chain.hvgs.read(name)))


def test_threads_and_local_cluster_pca_agree(chain, on_cluster) -> None:
    """PCA on the cluster equals the threaded PCA to float rounding."""
    _, _, pca = on_cluster
    np.testing.assert_allclose(pca.read("loadings"), chain.pca.read("loadings"), atol=1e-12)
    np.testing.assert_allclose(
        pca.read("explained_variance"), chain.pca.read("explained_variance"), rtol=1e-12
    )
    np.testing.assert_allclose(pca.read("coords"), chain.pca.read("coords"), rtol=1e-6, atol=1e-5)


def test_threads_and_local_cluster_pca_to_equal_bits(chain, on_cluster) -> None:
    """PCA loadings, explained variance and coords are bit-identical on 2 worker processes."""
    _, _, pca = on_cluster
    for name in ("loadings", "explained_variance", "coords"):
        np.testing.assert_array_equal(_bits(pca.read(name)), _bits(chain.pca.read(name)))


def test_a_received_unaligned_block_gives_the_gram_bits_of_an_aligned_one() -> None:
    """A Gram matrix has the same bits whether its block lies at an aligned address or not.

    A worker receives a block from another worker in a buffer that can be
    unaligned, and NumPy multiplies an unaligned ``A.T @ A`` through aligned
    copies of each operand with ``gemm`` instead of ``syrk``, which rounds
    differently: before ``_gram`` aligned its block, the PCA of the 20k
    anchor data had other last bits in each run on the local cluster, and
    other than on threads. PCA now scales each block in the task that folds
    it, so the scaled block is always made where it is multiplied.
    """
    rng = np.random.default_rng(3)
    block = rng.standard_normal((700, 300))
    buffer = np.empty(block.nbytes + 8, np.uint8)
    unaligned = np.frombuffer(buffer[3 : 3 + block.nbytes], np.float64).reshape(block.shape)
    unaligned[...] = block
    assert not unaligned.flags.aligned
    with threadpool_limits(limits=1):
        np.testing.assert_array_equal(_bits(_gram(unaligned)), _bits(_gram(block)))


@pytest.fixture(scope="module")
def worker_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler with a nanny worker and a ``--no-nanny`` worker, as separate processes.

    Their environment has no ``*_NUM_THREADS`` setting, as on a site whose
    workers are started by hand: the nanny sets them to 1 for its worker, the
    worker started with ``--no-nanny`` keeps BLAS's default of a thread per
    core.
    """
    folder = tmp_path_factory.mktemp("workers")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    with dask_cluster_processes(folder, nannies=(True, False), env=env) as processes:
        yield processes.address


@pytest.fixture(scope="module")
def on_worker_processes(planted, worker_processes: str) -> Iterator[tuple[Any, Any, Any]]:
    """normalize, hvgs and PCA of the chain again, on the nanny and no-nanny workers."""
    ds = DataStore(planted.path, zarr_mode="r+", cluster=worker_processes, show_progress=False)
    norm = ds.features.normalize("RNA", cell_selection=planted.mask, invalidate_cache=True)
    hv = ds.features.hvgs(norm, n_top=100, flavor="log")
    yield norm, hv, ds.reduce.pca(norm, hv, n_comps=10, invalidate_cache=True)
    shutdown()


def _float32_gram(seed: int) -> np.ndarray:
    """A float32 Gram matrix of data made where the task runs.

    Made there, not sent: a received buffer can be unaligned, and NumPy then
    multiplies aligned copies with ``gemm`` instead of ``syrk``.
    """
    a = np.random.default_rng(seed).standard_normal((4000, 300)).astype(np.float32)
    gram: np.ndarray = a.T @ a
    return gram


@pytest.mark.slow
def test_every_worker_computes_with_one_blas_thread(worker_processes: str) -> None:
    """A float32 Gram matrix, whose bits depend on BLAS's threads, is the same on every worker.

    OpenBLAS splits a float32 ``A.T @ A`` differently with two threads; the
    engine's worker plugin limits BLAS to one thread on every worker, so both
    workers give the bits of the one-threaded product in this process.
    """
    with threadpool_limits(limits=1):
        expected = _float32_gram(0)
    engine = get_engine(cluster=worker_processes)
    assert engine.client is not None
    workers = sorted(engine.client.scheduler_info()["workers"])
    assert len(workers) == 2
    for worker in workers:
        with dask.annotate(workers=[worker], allow_other_workers=False):
            gram = dask.delayed(_float32_gram, pure=False)(0)
        (value,) = engine.compute(gram)
        np.testing.assert_array_equal(_bits(value), _bits(expected), err_msg=worker)


def _block(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((200_000, 7)) * 1e3


def _received(block: np.ndarray) -> tuple[bool, bytes]:
    return bool(block.flags.aligned), block.sum().tobytes()


@pytest.mark.slow
def test_a_block_one_worker_receives_from_another_sums_to_the_senders_bits(
    worker_processes: str,
) -> None:
    """A float64 block made on one worker and summed on the other is aligned there and has the same sum.

    distributed makes a received array a view of the message's buffer, often
    at an address that is not a multiple of 8, and NumPy sums an unaligned
    array through aligned copies of pieces of it: the sum then rounds
    differently. The engine's worker plugin aligns what every worker
    receives.
    """
    expected = _block(0).sum().tobytes()
    engine = get_engine(cluster=worker_processes)
    assert engine.client is not None
    maker, summer = sorted(engine.client.scheduler_info()["workers"])
    with dask.annotate(workers=[maker], allow_other_workers=False):
        block = dask.delayed(_block, pure=False)(0)
    with dask.annotate(workers=[summer], allow_other_workers=False):
        received = dask.delayed(_received, pure=False)(block)
    (value,) = engine.compute(received)
    assert value == (True, expected)


@pytest.mark.slow
def test_worker_processes_give_the_threaded_bits(chain, on_worker_processes) -> None:
    """Normalized moments, HVGs and PCA are bit-identical on nanny and no-nanny worker processes."""
    norm, hv, pca = on_worker_processes
    for name in ("rows", "feature_sum", "feature_m2"):
        np.testing.assert_array_equal(_bits(norm.read(name)), _bits(chain.norm.read(name)))
    np.testing.assert_array_equal(_bits(hv.read("features")), _bits(chain.hvgs.read("features")))
    for name in ("loadings", "explained_variance", "coords"):
        np.testing.assert_array_equal(_bits(pca.read(name)), _bits(chain.pca.read(name)))


# --- read-only stores ----------------------------------------------------------------------


def test_read_only_store_reuses_and_changes_no_byte(planted, chain, open_threads) -> None:
    """A read-only store reuses published results; one without a result raises; no byte changes."""
    before = tree_snapshot(planted.path)
    ds = open_threads(planted.path)
    assert not ds.writable
    norm = ds.features.normalize("RNA", cell_selection=planted.mask)
    assert norm.ref == chain.norm.ref
    assert ds.features.hvgs(norm, n_top=100, flavor="log").ref == chain.hvgs.ref
    assert ds.reduce.pca(norm, chain.hvgs, n_comps=10).ref == chain.pca.ref
    assert str(ds.lineage(chain.pca.ref)).startswith("reduce.pca")
    assert chain.pca.ref in {a.ref for a in ds.list_artifacts("pca")}
    np.testing.assert_array_equal(
        ds.load_artifact(chain.pca.ref).read("coords"), chain.pca.read("coords")
    )
    attempts = [
        lambda: ds.features.normalize("RNA", cell_selection=planted.mask, target_sum=5000.0),
        lambda: ds.features.normalize("RNA", cell_selection=planted.mask, invalidate_cache=True),
        lambda: ds.features.hvgs(norm, n_top=37),
        lambda: ds.reduce.pca(norm, chain.hvgs, n_comps=4),
    ]
    for attempt in attempts:
        with pytest.raises(ReadOnlyStoreError, match="read-only") as info:
            attempt()
        assert isinstance(info.value, PermissionError)
        assert "zarr_mode='r+'" in str(info.value)
    assert tree_snapshot(planted.path) == before


def test_data_write_and_moments_share_their_reads(
    planted, chain, normalized_blocks: list[int]
) -> None:
    """Writing stored values and merging their moments normalize each counts block once, not twice."""
    norm = chain.ds.features.normalize(
        "RNA", cell_selection=planted.mask, store_values=True, invalidate_cache=True
    )
    blocks = len(chain.ds.assays["RNA"].counts.chunks[0])
    # one call per block (and at most one for Dask's meta)
    assert blocks <= len(normalized_blocks) <= blocks + 1
    np.testing.assert_array_equal(norm.read("feature_m2"), chain.norm.read("feature_m2"))


def test_threads_and_local_cluster_give_the_modality_operations_equal_bits(
    planted, engine: Engine
) -> None:
    """CLR and TF-IDF normalization, detection and ADT markers are bit-identical on 2 worker processes."""
    threads = DataStore(planted.path, zarr_mode="r+", cluster="threads", show_progress=False)
    cluster = DataStore(planted.path, zarr_mode="r+", show_progress=False)
    assert cluster.engine.client is not None
    pairs = []
    for ds in (threads, cluster):
        fresh = {"cell_selection": planted.mask, "invalidate_cache": True}
        pairs.append(
            (
                ds.features.normalize("ADT", **fresh),
                ds.features.normalize("ATAC", **fresh),
                ds.features.detected("ATAC", **fresh),
                ds.markers.search("ADT", group_key="cell_type", **fresh),
            )
        )
    for ours, theirs in zip(*pairs, strict=True):
        assert ours.provenance == theirs.provenance
        for name in sorted(ours.group.array_keys()):
            values = ours.read(name)
            if values.dtype.kind not in "biuf":  # the markers' group labels
                assert values.tolist() == theirs.read(name).tolist()
            else:
                np.testing.assert_array_equal(_bits(values), _bits(theirs.read(name)))
