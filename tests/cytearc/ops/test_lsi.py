"""``features.prevalent_peaks`` and ``reduce.lsi``: the peaks, the SVD against numpy's, depth, engines, memory."""

from __future__ import annotations

import importlib
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import scipy.sparse as sp

from cytearc import DataStore
from cytearc.datasets import write_atac_store
from cytearc.engine.cluster import Engine, get_engine, shutdown
from cytearc.errors import EngineConfigError, MemBudgetError, OperationArgumentError
from cytearc.ops.lsi import lsi, pass_products, prevalent_peaks
from cytearc.ops.normalize import normalized_values
from cytepool.testing import raise_if_dask_computes

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cytearc.artifacts import Artifact

N_CELLS = 1200
N_PEAKS = 2000


@dataclass(frozen=True)
class Atac:
    """A seeded ATAC store, its TF-IDF artifact, prevalent peaks, default LSI and numpy's SVD."""

    path: Path | str
    ds: DataStore
    norm: Artifact
    peaks: Artifact
    lsi: Artifact
    values: np.ndarray
    """The TF-IDF values of the cells x prevalent peaks, float64."""
    u: np.ndarray
    s: np.ndarray
    vt: np.ndarray
    depth: np.ndarray
    """log10 of each normalized cell's total counts."""


def _bits(values: np.ndarray) -> np.ndarray:
    raw: np.ndarray = np.ascontiguousarray(values).view(np.uint8)
    return raw


def _aligned(found: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``found``'s columns with the signs of ``expected``'s."""
    aligned: np.ndarray = found * np.sign(np.sum(found * expected, axis=0))
    return aligned


def _zscored(u: np.ndarray) -> np.ndarray:
    scaled: np.ndarray = (u - u.mean(axis=0)) / u.std(axis=0, ddof=1)
    return scaled


@pytest.fixture(scope="module")
def atac(tmp_path_factory: pytest.TempPathFactory, open_threads: Callable[..., DataStore]) -> Atac:
    path = write_atac_store(
        tmp_path_factory.mktemp("atac") / "atac.zarr",
        n_cells=N_CELLS,
        n_peaks=N_PEAKS,
        n_types=6,
        density=0.05,
        seed=5,
        cluster="threads",
    )
    ds = open_threads(path, zarr_mode="r+")
    norm = ds.features.normalize("ATAC")
    peaks = prevalent_peaks(ds, norm)
    values = normalized_values(ds, norm, features=peaks.read("features")).compute()
    u, s, vt = np.linalg.svd(values.astype(np.float64), full_matrices=False)
    total = ds.assays["ATAC"].summary("rowSums")[norm.read("rows")]
    return Atac(
        path=path,
        ds=ds,
        norm=norm,
        peaks=peaks,
        lsi=lsi(ds, norm, peaks),
        values=values.astype(np.float64),
        u=u,
        s=s,
        vt=vt,
        depth=np.log10(total.astype(np.float64)),
    )


# --- prevalent peaks -----------------------------------------------------------------------


def test_prevalent_peaks_are_those_detected_in_enough_cells(atac: Atac) -> None:
    """Prevalence is the cells with a count of each peak; the selection those in >= 1 % of the cells."""
    counts = atac.ds.assays["ATAC"].counts.compute()[atac.norm.read("rows")]
    detected = np.count_nonzero(counts, axis=0)
    np.testing.assert_array_equal(atac.peaks.read("prevalence"), detected)
    expected = np.flatnonzero(detected >= np.ceil(0.01 * N_CELLS))
    np.testing.assert_array_equal(atac.peaks.read("features"), expected)
    np.testing.assert_array_equal(np.flatnonzero(atac.peaks.read("selected")), expected)
    assert 1000 < len(expected) < N_PEAKS
    assert atac.peaks.ref.scope == "ATAC"
    assert atac.peaks.provenance["inputs"] == {"normalized": atac.norm.ref.to_json()}


def test_prevalent_peaks_cap_keeps_the_most_prevalent(atac: Atac) -> None:
    """``n_top`` keeps the most prevalent qualifying peaks, ties by position, in increasing order."""
    capped = prevalent_peaks(atac.ds, atac.norm, min_cells_fraction=0.05, n_top=100)
    prevalence = atac.peaks.read("prevalence")
    order = np.lexsort((np.arange(len(prevalence)), -prevalence))
    expected = np.sort(order[:100])
    assert prevalence[expected].min() >= 30
    np.testing.assert_array_equal(capped.read("features"), expected)


def test_prevalent_peaks_refuse_other_normalization_and_too_few_peaks(atac: Atac) -> None:
    """A normalization other than TF-IDF, and a selection of fewer than 2 peaks, are refused with the fix."""
    by_size = atac.ds.features.normalize("ATAC", method="library_size")
    with pytest.raises(OperationArgumentError, match=r"method 'tfidf'.*method='tfidf'"):
        prevalent_peaks(atac.ds, by_size)
    with pytest.raises(OperationArgumentError, match=r"method 'tfidf'"):
        lsi(atac.ds, by_size, atac.peaks)
    with pytest.raises(OperationArgumentError, match=r"at least 2 peaks.*lower min_cells_fraction"):
        prevalent_peaks(atac.ds, atac.norm, min_cells_fraction=1.0)
    with pytest.raises(OperationArgumentError, match="min_cells_fraction must be"):
        prevalent_peaks(atac.ds, atac.norm, min_cells_fraction=1.5)


# --- the SVD against numpy's ---------------------------------------------------------------


def test_lsi_equals_a_dense_svd(atac: Atac) -> None:
    """The leading components, every variance and the coordinates equal numpy's SVD of the same values."""
    k = 50
    loadings, s = atac.lsi.read("loadings"), atac.lsi.read("singular_values")
    assert loadings.shape == (len(atac.peaks.read("features")), k)
    cosines = np.abs(np.sum(loadings * atac.vt[:k].T, axis=0))
    assert (1 - cosines[:5]).max() < 1e-12  # depth and the planted types
    assert (1 - cosines).max() < 1e-7  # and the noise bulk (relative eigengaps of 1e-3)
    variance = atac.s[:k] ** 2 / (N_CELLS - 1)
    np.testing.assert_allclose(atac.lsi.read("variance"), variance, rtol=1e-7)
    np.testing.assert_allclose(s, atac.s[:k], rtol=1e-7)
    np.testing.assert_allclose(atac.lsi.read("stdev"), atac.s[:k] / np.sqrt(N_CELLS - 1), rtol=1e-7)
    assert atac.lsi.read("residuals").max() < 1e-4
    coords = atac.lsi.read("coords")
    assert coords.dtype == np.float32
    expected = _zscored(atac.u[:, 1:k])
    aligned = _aligned(coords, expected)
    np.testing.assert_allclose(aligned[:, :5], expected[:, :5], atol=1e-5)
    np.testing.assert_allclose(aligned, expected, atol=1e-3)


def test_exact_path_equals_a_dense_svd_everywhere(atac: Atac) -> None:
    """When the basis would span every peak, one pass of ``A^T A`` gives every component exactly."""
    n_peaks = len(atac.peaks.read("features"))
    n_iter = -(-n_peaks // 80)  # the basis of 30 + 50 columns per pass would span every peak
    exact = lsi(atac.ds, atac.norm, atac.peaks, n_comps=30, n_iter=n_iter, drop_first=False)
    cosines = np.abs(np.sum(exact.read("loadings") * atac.vt[:30].T, axis=0))
    assert (1 - cosines).max() < 1e-10
    np.testing.assert_allclose(exact.read("singular_values"), atac.s[:30], rtol=1e-12)
    assert not exact.read("residuals").any()
    expected = _zscored(atac.u[:, :30])
    np.testing.assert_allclose(_aligned(exact.read("coords"), expected), expected, atol=1e-5)


def test_signs_and_scaling(atac: Atac) -> None:
    """Each component's largest loading is positive; coords are z-scored, or U's unit columns unscaled."""
    loadings = atac.lsi.read("loadings")
    assert (loadings[np.argmax(np.abs(loadings), axis=0), np.arange(50)] > 0).all()
    coords = atac.lsi.read("coords").astype(np.float64)
    np.testing.assert_allclose(coords.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(coords.std(axis=0, ddof=1), 1, rtol=1e-5)
    unscaled = lsi(atac.ds, atac.norm, atac.peaks, n_comps=10, scale_embeddings=False)
    u = unscaled.read("coords").astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(u, axis=0), 1, rtol=1e-5)
    np.testing.assert_allclose(_aligned(u[:, :2], atac.u[:, 1:3]), atac.u[:, 1:3], atol=1e-6)


def test_depth_correlation_is_pearsons_with_log_depth(atac: Atac) -> None:
    """``depth_correlation`` is the correlation of each component of U with log10 total counts."""
    found = atac.lsi.read("depth_correlation")
    signs = np.sign(np.sum(atac.lsi.read("loadings") * atac.vt[:50].T, axis=0))
    expected = signs * [np.corrcoef(atac.u[:, j], atac.depth)[0, 1] for j in range(50)]
    np.testing.assert_allclose(found, expected, atol=1e-5)
    assert found[0] > 0.9


# --- dropping the depth component ----------------------------------------------------------


def test_first_component_dropped_when_it_tracks_depth(atac: Atac) -> None:
    """The default drops component 1 (it tracks depth); coords hold the kept components only."""
    assert atac.lsi.read("kept").tolist() == list(range(1, 50))
    assert atac.lsi.read("coords").shape == (N_CELLS, 49)
    neighbors = atac.ds.graph.neighbors(atac.lsi, k=10)
    assert neighbors.read("indices").shape == (N_CELLS, 10)
    assert neighbors.provenance["parameters"]["nComps"] == 49


def test_first_component_kept_when_forced_or_below_threshold(atac: Atac) -> None:
    """``drop_first=False`` and a threshold above the correlation keep it; True drops it always."""
    kept = lsi(atac.ds, atac.norm, atac.peaks, n_comps=10, drop_first=False)
    assert kept.read("kept").tolist() == list(range(10))
    untouched = lsi(atac.ds, atac.norm, atac.peaks, n_comps=10, depth_threshold=1.0)
    assert untouched.read("kept").tolist() == list(range(10))
    np.testing.assert_array_equal(untouched.read("coords"), kept.read("coords"))
    dropped = lsi(atac.ds, atac.norm, atac.peaks, n_comps=10, drop_first=True, depth_threshold=1.0)
    np.testing.assert_array_equal(dropped.read("coords"), kept.read("coords")[:, 1:])


# --- provenance, reuse, refusals -----------------------------------------------------------


def test_lsi_is_reused_and_recomputes_to_the_same_bits(atac: Atac) -> None:
    """The same call reuses the artifact; ``invalidate_cache`` recomputes the same bits."""
    assert lsi(atac.ds, atac.norm, atac.peaks).ref == atac.lsi.ref
    assert atac.lsi.ref.scope == "ATAC"
    inputs = atac.lsi.provenance["inputs"]
    assert list(inputs) == ["normalized", "peaks"]
    assert inputs["peaks"] == atac.peaks.ref.to_json()
    again = lsi(atac.ds, atac.norm, atac.peaks, invalidate_cache=True)
    assert again.ref != atac.lsi.ref
    for name in ("coords", "loadings", "singular_values", "depth_correlation", "residuals"):
        np.testing.assert_array_equal(_bits(again.read(name)), _bits(atac.lsi.read(name)))


def test_lsi_takes_hvgs_of_the_tfidf_values(atac: Atac) -> None:
    """HVGs selected on the TF-IDF artifact are peaks LSI takes too."""
    hv = atac.ds.features.hvgs(atac.norm, n_top=300)
    result = lsi(atac.ds, atac.norm, hv, n_comps=5)
    np.testing.assert_array_equal(result.read("features"), hv.read("features"))
    assert result.read("loadings").shape == (len(hv.read("features")), 5)


def test_lsi_refuses_foreign_peaks_and_bad_arguments(atac: Atac) -> None:
    """Peaks of another normalized artifact, and out-of-range arguments, are refused before any pass."""
    other = atac.ds.features.normalize("ATAC", target_sum=5000.0)
    with pytest.raises(OperationArgumentError, match="selected on"):
        lsi(atac.ds, other, atac.peaks)
    for options in ({"n_comps": 0}, {"depth_threshold": 2.0}, {"n_iter": 0}, {"drop_first": 1}):
        with pytest.raises(OperationArgumentError):
            lsi(atac.ds, atac.norm, atac.peaks, **options)


# --- out of core ---------------------------------------------------------------------------


def test_pass_graph_builds_without_computing(atac: Atac) -> None:
    """A pass is a lazy graph, one task per row block, whose basis is one key and not a copy per task."""
    values = normalized_values(atac.ds, atac.norm, features=atac.peaks.read("features"))
    basis = np.ones((values.shape[1], 50))
    with raise_if_dask_computes():
        products = pass_products(values.rechunk((50, -1)), basis)
    graph = dict(products.__dask_graph__())
    assert len([key for key in graph if "lsi-basis" in str(key)]) == 1
    passes = [task for key, task in graph.items() if "lsi-pass" in str(key)]
    assert len(passes) == N_CELLS // 50
    assert max(len(pickle.dumps(task)) for task in passes) < basis.nbytes // 100


def test_no_task_holds_the_whole_matrix(atac: Atac, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass task gets the CSR values of one counts shard and the basis, never a dense band."""
    module = importlib.import_module("cytearc.ops.lsi")
    seen: list[tuple[bool, tuple[int, ...], tuple[int, ...]]] = []
    original = module._accumulate

    def recording(total: Any, block: Any, basis: np.ndarray, extra: Any) -> np.ndarray:
        seen.append((sp.issparse(block), block.shape, basis.shape))
        part: np.ndarray = original(total, block, basis, extra)
        return part

    monkeypatch.setattr(module, "_accumulate", recording)
    options: dict[str, Any] = {"n_comps": 5, "oversample": 5, "n_iter": 3, "drop_first": False}
    small = lsi(atac.ds, atac.norm, atac.peaks, **options, invalidate_cache=True)
    n_peaks = len(atac.peaks.read("features"))
    shards = atac.ds.ATAC.counts.chunks[0]
    assert len(shards) > 1
    assert {(sparse, basis) for sparse, _, basis in seen} == {(True, (n_peaks, 10))}
    assert sorted(shape for _, shape, _ in seen[: len(shards)]) == sorted(
        (rows, n_peaks) for rows in shards
    )
    assert small.array("residuals").attrs["passes"] == 3
    assert len(seen) == 3 * len(shards)


def test_a_pass_larger_than_a_worker_is_refused(
    atac: Atac, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass whose task would hold more than a worker's memory raises, naming the remedy, and writes nothing."""
    monkeypatch.setattr(Engine, "worker_memory", lambda self: 4 * 2**20)
    before = {a.ref for a in atac.ds.list_artifacts("lsi")}
    with pytest.raises(MemBudgetError, match=r"n_top=.*raise mem_budget"):
        lsi(atac.ds, atac.norm, atac.peaks, n_comps=40, invalidate_cache=True)
    assert {a.ref for a in atac.ds.list_artifacts("lsi")} == before


# --- schedulers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(_engine_session: None) -> Engine:
    """The session's 2-worker local cluster, for a module fixture."""
    try:
        return get_engine(mem_budget="2GiB", workers=2)
    except EngineConfigError:
        shutdown()
        return get_engine(mem_budget="2GiB", workers=2)


@pytest.mark.slow
def test_threads_and_local_cluster_lsi_to_equal_bits(atac: Atac, engine: Engine) -> None:
    """LSI on 2 worker processes gives the threaded LSI's bits."""
    ds = DataStore(atac.path, zarr_mode="r+", show_progress=False)
    assert ds.engine.client is not None
    found = lsi(ds, atac.norm, atac.peaks, invalidate_cache=True)
    assert found.attrs["execution_options"]["scheduler"] == "distributed"
    for name in ("coords", "loadings", "singular_values", "depth_correlation", "residuals", "kept"):
        np.testing.assert_array_equal(_bits(found.read(name)), _bits(atac.lsi.read(name)))
