"""Operation results against in-memory NumPy, pandas and SciPy references on a planted store."""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import false_discovery_control, mannwhitneyu, norm
from sklearn.metrics import adjusted_rand_score

from cytearc.ops import markers as markers_module
from cytearc.ops.normalize import normalized_graph, normalized_values
from cytearc.ops.pca import feature_scaling
from cytearc.utils.moments import ColumnMoments

if TYPE_CHECKING:
    from pathlib import Path


def _values(ds: Any, norm: Any) -> np.ndarray:
    """A normalized artifact's values, rebuilt from the counts."""
    return np.asarray(normalized_values(ds, norm).compute(scheduler="threads"))


def _dense(planted, chain) -> np.ndarray:
    """The stored normalized values of the chain, float64."""
    return _values(chain.ds, chain.norm).astype(np.float64)


def _library_size_reference(x: np.ndarray, target_sum: float = 1e4) -> np.ndarray:
    x = x.astype(np.float64)
    return np.log1p(x / x.sum(axis=1, keepdims=True) * target_sum).astype(np.float32)


def _clr_reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    geometric = np.exp(np.log1p(x).mean(axis=1, keepdims=True))
    return np.log1p(x / geometric).astype(np.float32)


def _tfidf_reference(x: np.ndarray, target_sum: float = 1e4) -> np.ndarray:
    """Signac's RunTFIDF(method = 1): log1p(x / rowSums * ncol / colSums * scale.factor)."""
    x = x.astype(np.float64)
    sums = x.sum(axis=0)
    idf = np.divide(x.shape[0], sums, out=np.zeros_like(sums), where=sums > 0)
    return np.log1p(x / x.sum(axis=1, keepdims=True) * idf * target_sum).astype(np.float32)


def _two_pass(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total = values.sum(axis=0)
    return total, ((values - total / len(values)) ** 2).sum(axis=0)


# --- normalize -----------------------------------------------------------------------------


def test_library_size_data_matches_numpy(planted, chain) -> None:
    """Data is log1p(x / rowsum * 1e4) as float32, one row per selected cell, in cell order."""
    data = _values(chain.ds, chain.norm)
    assert data.dtype == np.float32
    assert data.shape == (planted.mask.sum(), planted.rna.shape[1])
    expected = _library_size_reference(planted.rna[planted.mask])
    np.testing.assert_allclose(data, expected, rtol=1e-6, atol=0)
    assert chain.norm.parameters == {
        "assay": "RNA",
        "method": "library_size",
        "targetSum": 10000,
        "log1p": True,
        "storeValues": False,
    }


def test_feature_moments_match_two_pass_sums(planted, chain) -> None:
    """feature_sum and feature_m2 are the float64 sum and squared deviations of the stored values."""
    data = _dense(planted, chain)
    total, m2 = _two_pass(data)
    assert chain.norm.array("feature_sum").dtype == np.float64
    assert chain.norm.array("feature_m2").dtype == np.float64
    np.testing.assert_allclose(chain.norm.read("feature_sum"), total, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(chain.norm.read("feature_m2"), m2, rtol=1e-10, atol=1e-12)
    assert (chain.norm.read("feature_m2") >= 0).all()


def test_sparse_normalize_equals_the_dense_computation(planted, chain) -> None:
    """Touching only the non-zeros changes no value: the data and the sums have the dense bits.

    The dense reference is the former implementation: every entry normalized
    in float64, and each band's moments by ``ColumnMoments.of`` over all its
    entries (and over ``expm1`` of them), in the bands of the normalize graph
    (one per ``counts`` shard), merged in row order. ``feature_m2``
    adds the zeros' squared deviations as ``zeros * mean**2``: equal to float64
    rounding.
    """
    counts = planted.rna[planted.mask]
    library = counts.sum(axis=1).astype(np.float64)
    x = counts.astype(np.float64) * (1e4 / library)[:, None]
    dense = np.log1p(x).astype(np.float32)
    np.testing.assert_array_equal(_values(chain.ds, chain.norm), dense)
    graph = normalized_graph(
        chain.ds.assays["RNA"],
        np.flatnonzero(planted.mask),
        method="library_size",
        target_sum=1e4,
        log1p=True,
    )
    edges = np.cumsum((0, *graph.chunks[0]))
    bands = [dense[start:end] for start, end in itertools.pairwise(edges)]
    log = ColumnMoments.merge_packed(np.vstack([ColumnMoments.of(b).pack() for b in bands]))
    linear = ColumnMoments.merge_packed(
        np.vstack([ColumnMoments.of(np.expm1(b.astype(np.float64))).pack() for b in bands])
    )
    np.testing.assert_array_equal(chain.norm.read("feature_sum"), log.total)
    np.testing.assert_array_equal(chain.norm.read("linear_sum"), linear.total)
    np.testing.assert_allclose(chain.norm.read("feature_m2"), log.m2, rtol=1e-12, atol=0)
    np.testing.assert_allclose(chain.norm.read("linear_m2"), linear.m2, rtol=1e-12, atol=0)


def test_all_zero_feature_has_exactly_zero_m2(planted, chain) -> None:
    """A gene with no count anywhere has feature_sum and feature_m2 exactly 0 and a PCA scale of 1."""
    g = planted.zero_gene
    assert chain.norm.read("feature_sum")[g] == 0.0
    assert chain.norm.read("feature_m2")[g] == 0.0
    _, sd = feature_scaling(chain.norm, np.array([g]))
    assert sd.tolist() == [1.0]


def test_constant_positive_feature_has_exactly_zero_m2(
    tmp_path: Path, import_matrix, open_threads
) -> None:
    """Equal positive stored values in every cell (equal libraries, equal counts) give m2 == 0."""
    rng = np.random.default_rng(5)
    n_cells = 70
    counts = np.zeros((n_cells, 6), dtype=np.int64)
    counts[:, 1] = 7
    counts[:, 2:5] = rng.integers(0, 30, size=(n_cells, 3))
    counts[:, 5] = 100 - counts[:, :5].sum(axis=1)
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(n_cells)]})
    features = pd.DataFrame(
        {"ids": [f"g{i}" for i in range(6)], "names": [f"G{i}" for i in range(6)]}
    )
    path = import_matrix(tmp_path / "constant.zarr", counts, cells, features)
    ds = open_threads(path, zarr_mode="r+")
    norm = ds.features.normalize("RNA", target_sum=1000.0)
    data = _values(ds, norm)
    assert np.unique(data[:, 1]).size == 1
    assert data[0, 1] > 0
    m2 = norm.read("feature_m2")
    assert m2[0] == 0.0
    assert m2[1] == 0.0
    assert (m2[2:] > 0).all()
    _, sd = feature_scaling(norm, np.arange(6))
    assert sd[:2].tolist() == [1.0, 1.0]


def test_adt_clr_matches_numpy(planted, chain) -> None:
    """An ADT assay takes the centred log ratio log1p(x / exp(mean(log1p(x)))) per cell."""
    norm = chain.ds.features.normalize("ADT", cell_selection=planted.mask)
    assert norm.parameters == {
        "assay": "ADT",
        "method": "clr",
        "targetSum": None,
        "log1p": True,
        "storeValues": False,
    }
    expected = _clr_reference(planted.adt[planted.mask])
    values = _values(chain.ds, norm)
    np.testing.assert_allclose(values, expected, rtol=1e-6, atol=0)
    total, m2 = _two_pass(values.astype(np.float64))
    np.testing.assert_allclose(norm.read("feature_m2"), m2, rtol=1e-10)
    np.testing.assert_allclose(norm.read("feature_sum"), total, rtol=1e-10)


def test_atac_tfidf_matches_numpy_over_the_selected_cells(planted, chain) -> None:
    """ATAC takes log1p(x / library * n / colSums * 1e4) with the column sums of the selected cells only."""
    norm = chain.ds.features.normalize("ATAC", cell_selection=planted.mask)
    assert norm.parameters["method"] == "tfidf"
    expected = _tfidf_reference(planted.atac[planted.mask])
    values = _values(chain.ds, norm)
    np.testing.assert_allclose(values, expected, rtol=1e-6, atol=0)
    everyone = _tfidf_reference(planted.atac)[planted.mask]
    assert not np.allclose(values, everyone, rtol=1e-6, atol=0)


def test_clr_method_can_be_asked_for_on_rna(planted, chain) -> None:
    """method='clr' on an RNA assay applies the CLR formula to the RNA counts."""
    norm = chain.ds.features.normalize("RNA", cell_selection=planted.mask, method="clr")
    expected = _clr_reference(planted.rna[planted.mask])
    np.testing.assert_allclose(_values(chain.ds, norm), expected, rtol=1e-6, atol=0)


# --- ColumnMoments -------------------------------------------------------------------------


@st.composite
def _split_matrices(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    n_rows = draw(st.integers(1, 60))
    n_cols = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    offset = draw(st.sampled_from([0.0, 1e8, -1e8, 3e9]))
    noise = draw(st.sampled_from([0.0, 1e-3, 1.0, 10.0]))
    rng = np.random.default_rng(seed)
    values = offset + noise * rng.standard_normal((n_rows, n_cols))
    cuts = draw(st.lists(st.integers(1, max(1, n_rows - 1)), max_size=6, unique=True))
    return values, sorted(c for c in cuts if c < n_rows)


def _bands(values: np.ndarray, cuts: list[int]) -> list[ColumnMoments]:
    edges = [0, *cuts, len(values)]
    return [ColumnMoments.of(values[a:b]) for a, b in itertools.pairwise(edges)]


@given(_split_matrices())
def test_merged_moments_equal_the_two_pass_reference(case: tuple[np.ndarray, list[int]]) -> None:
    """Chan's merge over any band split equals the two-pass moments, also with offsets of 1e8."""
    values, cuts = case
    bands = _bands(values, cuts)
    left = bands[0]
    for band in bands[1:]:
        left = left.merge(band)
    pairs = bands
    while len(pairs) > 1:
        pairs = [a.merge(b) for a, b in zip(pairs[::2], pairs[1::2], strict=False)] + (
            [pairs[-1]] if len(pairs) % 2 else []
        )
    total, m2 = _two_pass(values)
    n = len(values)
    rounding = 8 * np.finfo(np.float64).eps * np.abs(values).max(axis=0)
    for merged in (left, pairs[0]):
        assert merged.n == n
        assert (np.abs(merged.total - total) <= n * rounding).all()
        tolerance = 1e-6 * m2 + n * rounding**2 + 2 * rounding * np.sqrt(n * m2)
        assert (np.abs(merged.m2 - m2) <= tolerance).all(), (merged.m2, m2)
        assert (merged.m2 >= 0).all()
        assert (merged.variance >= 0).all()


def test_naive_moments_fail_where_chan_does_not() -> None:
    """At an offset of 1e8, E[x^2] - E[x]^2 loses the variance (even its sign); the merge keeps it."""
    rng = np.random.default_rng(0)
    values = 1e8 + rng.standard_normal((1000, 8))
    reference = values.var(axis=0)
    naive = (values**2).mean(axis=0) - values.mean(axis=0) ** 2
    merged = ColumnMoments.empty(8)
    for start in range(0, 1000, 37):
        merged = merged.merge(ColumnMoments.of(values[start : start + 37]))
    assert np.abs(naive - reference).max() > 0.5
    np.testing.assert_allclose(merged.variance, reference, rtol=1e-7)


def test_constant_float32_bands_have_exactly_zero_m2() -> None:
    """Equal float32 values (as stored data) have m2 exactly 0 however the rows are banded."""
    values = np.full((1001, 3), np.float32(0.1))
    values[:, 2] = np.float32(123456.789)
    merged = ColumnMoments.empty(3)
    for start in range(0, 1001, 97):
        merged = merged.merge(ColumnMoments.of(values[start : start + 97]))
    assert merged.m2.tolist() == [0.0, 0.0, 0.0]


def test_constant_float64_column_has_exactly_zero_m2() -> None:
    """The ColumnMoments docstring: a column whose values are all equal has m2 exactly zero."""
    assert ColumnMoments.of(np.full((3, 1), 0.1)).m2.tolist() == [0.0]


# --- hvgs ----------------------------------------------------------------------------------


def _hvg_reference(dense: np.ndarray, *, n_bins: int, n_top: int) -> pd.DataFrame:
    """scanpy-'seurat'-style statistics from the hvgs docstring, on the dense matrix.

    The bins are equal-width over the means of the features whose dispersion
    is positive (the others have no log dispersion to bin); std is pandas'
    (ddof=1); a bin of one feature scores 1.
    """
    frame = pd.DataFrame({"mean": dense.mean(axis=0), "variance": dense.var(axis=0, ddof=1)})
    frame["dispersion"] = frame["variance"] / frame["mean"].where(frame["mean"] > 0)
    log_disp = np.log(frame["dispersion"].where(frame["dispersion"] > 0))
    defined = log_disp.notna()
    binned = pd.cut(frame.loc[defined, "mean"], bins=n_bins)
    groups = log_disp[defined].groupby(binned, observed=True)
    bin_mean = groups.transform("mean")
    bin_std = groups.transform("std")
    single = groups.transform("size") == 1
    norm_disp = (log_disp[defined] - bin_mean) / bin_std
    norm_disp[single] = 1.0
    frame["dispersion_norm"] = norm_disp.reindex(frame.index)
    eligible = frame[frame["dispersion_norm"].notna() & frame["mean"].between(0.0125, 3.0)]
    top = eligible["dispersion_norm"].sort_values(ascending=False, kind="stable").index[:n_top]
    frame["highly_variable"] = frame.index.isin(top)
    return frame


def test_hvg_statistics_match_a_pandas_reimplementation(planted, chain) -> None:
    """flavor="log": mean, variance, dispersions and the selection equal the reference."""
    hvgs = chain.hvgs
    expected = _hvg_reference(_dense(planted, chain), n_bins=20, n_top=100)
    for column in ("mean", "variance", "dispersion", "dispersion_norm"):
        np.testing.assert_allclose(
            hvgs.read(column), expected[column].to_numpy(), rtol=1e-9, equal_nan=True
        )
    selected = hvgs.read("highly_variable")
    np.testing.assert_array_equal(selected, expected["highly_variable"].to_numpy())
    np.testing.assert_array_equal(hvgs.read("features"), np.flatnonzero(selected))
    assert selected.sum() == 100
    assert not selected[planted.zero_gene]
    assert np.isnan(hvgs.read("dispersion")[planted.zero_gene])


def _seurat_reference(dense_log: np.ndarray, *, n_bins: int, n_top: int) -> pd.DataFrame:
    """Scanpy's highly_variable_genes(flavor="seurat") rewritten from its source, on expm1(data)."""
    x = np.expm1(dense_log.astype(np.float64))
    mean, var = x.mean(axis=0), x.var(axis=0, ddof=1)
    mean[mean == 0] = 1e-12
    dispersion = var / mean
    dispersion[dispersion == 0] = np.nan
    frame = pd.DataFrame(
        {"mean": np.log1p(mean), "variance": var, "dispersion": np.log(dispersion)}
    )
    frame["bin"] = pd.cut(frame["mean"], bins=n_bins)
    stats = frame.groupby("bin", observed=True)["dispersion"].agg(avg="mean", dev="std")
    one = stats["dev"].isna()
    stats.loc[one, "dev"] = stats.loc[one, "avg"]
    stats.loc[one, "avg"] = 0.0
    per = stats.loc[frame["bin"]].set_index(frame.index)
    frame["dispersion_norm"] = (frame["dispersion"] - per["avg"]) / per["dev"]
    norm = frame["dispersion_norm"].to_numpy()
    cutoff = np.sort(norm[~np.isnan(norm)])[::-1][n_top - 1]
    frame["highly_variable"] = np.nan_to_num(norm, nan=-np.inf) >= cutoff
    return frame


def test_seurat_hvgs_match_scanpys_algorithm(planted, chain) -> None:
    """The default flavor equals scanpy's seurat statistics and selection on the same values."""
    hvgs = chain.ds.features.hvgs(chain.norm, n_top=100)
    expected = _seurat_reference(_dense(planted, chain), n_bins=20, n_top=100)
    for column in ("mean", "variance", "dispersion", "dispersion_norm"):
        np.testing.assert_allclose(
            hvgs.read(column), expected[column].to_numpy(), rtol=1e-8, equal_nan=True
        )
    selected = hvgs.read("highly_variable")
    np.testing.assert_array_equal(selected, expected["highly_variable"].to_numpy())
    assert hvgs.parameters["flavor"] == "seurat"


def test_normalized_feature_nnz_counts_the_cells_of_each_feature(planted, chain) -> None:
    dense = _dense(planted, chain)
    np.testing.assert_array_equal(chain.norm.read("feature_nnz"), (dense != 0).sum(axis=0))


@pytest.mark.parametrize("min_cells", [1, 150, 300])
def test_seurat_hvgs_with_min_cells_are_scanpys_after_filter_genes(
    planted, chain, min_cells: int
) -> None:
    """min_cells gives scanpy's statistics and selection on the genes filter_genes(min_cells) keeps."""
    dense = _dense(planted, chain)
    keep = (dense > 0).sum(axis=0) >= min_cells
    assert 0 < keep.sum() < keep.size
    hvgs = chain.ds.features.hvgs(chain.norm, n_top=40, min_cells=min_cells)
    expected = _seurat_reference(dense[:, keep], n_bins=20, n_top=40)
    np.testing.assert_allclose(
        hvgs.read("dispersion_norm")[keep],
        expected["dispersion_norm"].to_numpy(),
        rtol=1e-8,
        equal_nan=True,
    )
    assert np.isnan(hvgs.read("dispersion_norm")[~keep]).all()
    np.testing.assert_array_equal(
        hvgs.read("features"), np.flatnonzero(keep)[expected["highly_variable"].to_numpy()]
    )
    assert hvgs.parameters["minCells"] == min_cells


def test_log_hvgs_with_min_cells_select_only_detected_features(planted, chain) -> None:
    dense = _dense(planted, chain)
    keep = (dense > 0).sum(axis=0) >= 150
    hvgs = chain.ds.features.hvgs(chain.norm, n_top=40, flavor="log", min_cells=150, min_mean=0.0)
    assert keep[hvgs.read("features")].all()
    assert np.isnan(hvgs.read("dispersion_norm")[~keep]).all()
    everything = chain.ds.features.hvgs(chain.norm, n_top=40, flavor="log", min_mean=0.0)
    assert not keep[everything.read("features")].all()


# --- PCA -----------------------------------------------------------------------------------


def _scaled(planted, chain) -> np.ndarray:
    x = _dense(planted, chain)[:, chain.hvgs.read("features")]
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    return (x - x.mean(axis=0)) / sd


def test_exact_pca_matches_numpy_svd(planted, chain) -> None:
    """Explained variance is S^2/(n-1) of the scaled matrix; coords are U*S up to a sign each."""
    z = _scaled(planted, chain)
    u, s, _ = np.linalg.svd(z, full_matrices=False)
    k = 10
    n = len(z)
    np.testing.assert_allclose(
        chain.pca.read("explained_variance"), s[:k] ** 2 / (n - 1), rtol=1e-4
    )
    np.testing.assert_allclose(
        chain.pca.read("explained_variance_ratio"), s[:k] ** 2 / (s**2).sum(), rtol=1e-4
    )
    coords = chain.pca.read("coords")
    assert coords.dtype == np.float32
    assert coords.shape == (n, k)
    reference = u[:, :k] * s[:k]
    gaps = np.abs(np.diff(s[: k + 1] ** 2)) / s[0] ** 2
    separated = [j for j in range(k) if gaps[j] > 1e-3 and (j == 0 or gaps[j - 1] > 1e-3)]
    assert len(separated) >= 3
    for j in separated:
        sign = np.sign(coords[:, j] @ reference[:, j])
        np.testing.assert_allclose(
            sign * coords[:, j],
            reference[:, j],
            rtol=1e-4,
            atol=1e-4 * np.abs(reference[:, j]).max(),
        )
    loadings = chain.pca.read("loadings")
    np.testing.assert_allclose(loadings.T @ loadings, np.eye(k), atol=1e-10)
    x = _dense(planted, chain)[:, chain.hvgs.read("features")]
    np.testing.assert_allclose(chain.pca.read("mean"), x.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(chain.pca.read("scale"), x.std(axis=0), rtol=1e-8)


def test_randomized_pca_is_close_to_exact(chain) -> None:
    """Randomized PCA's explained variance ratios are within 1e-3 of the exact ones."""
    randomized = chain.ds.reduce.pca(chain.norm, chain.hvgs, n_comps=10, mode="randomized")
    assert randomized.parameters["seed"] == 0
    np.testing.assert_allclose(
        randomized.read("explained_variance_ratio")[:5],
        chain.pca.read("explained_variance_ratio")[:5],
        atol=1e-3,
    )


@pytest.fixture
def without_m2(tmp_path: Path, import_matrix, open_threads) -> tuple[Any, Any, Any, Any]:
    """A small store's normalize, hvgs and PCA; then feature_m2 is deleted from the normalized."""
    rng = np.random.default_rng(9)
    counts = rng.poisson(rng.lognormal(0, 1, 40), size=(150, 40))
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(150)]})
    features = pd.DataFrame(
        {"ids": [f"g{i}" for i in range(40)], "names": [f"G{i}" for i in range(40)]}
    )
    ds = open_threads(import_matrix(tmp_path / "m2.zarr", counts, cells, features), zarr_mode="r+")
    norm = ds.features.normalize("RNA")
    hv = ds.features.hvgs(norm, n_top=15, min_mean=0.0)
    pca = ds.reduce.pca(norm, hv, n_comps=3)
    del ds.root[norm.ref.path]["feature_m2"]
    return ds, norm, hv, pca


def test_reuse_does_not_require_feature_m2(without_m2) -> None:
    """A normalized artifact without feature_m2 is still reused (it has data and feature_sum)."""
    ds, norm, _, _ = without_m2
    assert ds.features.normalize("RNA").ref == norm.ref


def test_hvgs_min_cells_without_feature_nnz_stream_it_from_data(without_m2) -> None:
    """A normalized artifact older than feature_nnz gives min_cells the same counts, from data."""
    ds, norm, _, _ = without_m2
    with_nnz = ds.features.hvgs(norm, n_top=15, min_mean=0.0, min_cells=100)
    del ds.root[norm.ref.path]["feature_nnz"]
    streamed = ds.features.hvgs(
        ds.load_artifact(norm.ref), n_top=15, min_mean=0.0, min_cells=100, invalidate_cache=True
    )
    np.testing.assert_array_equal(streamed.read("features"), with_nnz.read("features"))
    np.testing.assert_array_equal(
        streamed.read("dispersion_norm"), with_nnz.read("dispersion_norm")
    )


def test_pca_scaling_without_feature_m2_streams_from_data(without_m2) -> None:
    """PCA of a normalized artifact without feature_m2 scales from data and gives the same PCA."""
    ds, norm, hv, pca = without_m2
    again = ds.reduce.pca(ds.load_artifact(norm.ref), hv, n_comps=3, invalidate_cache=True)
    np.testing.assert_allclose(again.read("scale"), pca.read("scale"), rtol=1e-10)
    np.testing.assert_allclose(again.read("coords"), pca.read("coords"), rtol=1e-5, atol=1e-5)


# --- markers -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def markers_by_type(planted, chain) -> tuple[object, pd.DataFrame]:
    artifact = chain.ds.markers.search("RNA", group_key="cell_type", cell_selection=planted.mask)
    return artifact, chain.ds.markers.table(artifact, n=None)


def test_marker_statistics_match_scipy(planted, chain, markers_by_type) -> None:
    """Means, fractions, logfc, AUROC, Mann-Whitney p-values, scores and BH padj match references."""
    artifact, _ = markers_by_type
    groups = [str(g) for g in artifact.read("groups")]
    assert groups == sorted(set(planted.cell_type[planted.mask]))
    values = _library_size_reference(planted.rna[planted.mask]).astype(np.float64)
    counts = planted.rna[planted.mask]
    labels = planted.cell_type[planted.mask]
    varying = np.ptp(values, axis=0) > 0
    assert not varying[planted.zero_gene]
    for i, group in enumerate(groups):
        inside = labels == group
        assert artifact.read("n_cells")[i] == inside.sum()
        mean_in, mean_rest = values[inside].mean(axis=0), values[~inside].mean(axis=0)
        np.testing.assert_allclose(artifact.read("mean")[i], mean_in, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(artifact.read("mean_rest")[i], mean_rest, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(artifact.read("fraction")[i], (counts[inside] > 0).mean(axis=0))
        logfc = np.log2((np.expm1(mean_in) + 1e-9) / (np.expm1(mean_rest) + 1e-9))
        np.testing.assert_allclose(artifact.read("logfc")[i], logfc, rtol=1e-8, atol=1e-8)
        test = mannwhitneyu(
            values[inside][:, varying],
            values[~inside][:, varying],
            method="asymptotic",
            use_continuity=False,
            alternative="two-sided",
            axis=0,
        )
        auroc = test.statistic / (inside.sum() * (~inside).sum())
        np.testing.assert_allclose(artifact.read("auroc")[i][varying], auroc, rtol=1e-12)
        pvalue = artifact.read("pvalue")[i]
        np.testing.assert_allclose(pvalue[varying], test.pvalue, rtol=1e-6, atol=1e-300)
        score = artifact.read("score")[i][varying]
        assert (np.sign(score) == np.sign(auroc - 0.5)).all()
        finite = test.pvalue > 1e-280
        np.testing.assert_allclose(
            np.abs(score[finite]), norm.isf(test.pvalue[finite] / 2), rtol=1e-6
        )
        assert pvalue[planted.zero_gene] == 1.0
        assert artifact.read("score")[i][planted.zero_gene] == 0.0
        assert artifact.read("auroc")[i][planted.zero_gene] == 0.5
        np.testing.assert_allclose(
            artifact.read("padj")[i], false_discovery_control(pvalue, method="bh"), rtol=1e-10
        )


def test_marker_statistics_do_not_depend_on_the_slices_of_a_shard(
    planted, chain, markers_by_type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Markers computed a feature at a time have the bits of those of whole shards at once."""
    artifact, _ = markers_by_type
    counts_t = chain.ds.assays["RNA"].countsT
    assert counts_t.numblocks[0] < counts_t.shape[0]  # a shard holds several features
    monkeypatch.setattr(markers_module, "SLICE_BYTES", 1)
    sliced = chain.ds.markers.search(
        "RNA", group_key="cell_type", cell_selection=planted.mask, invalidate_cache=True
    )
    for name in (*markers_module.STATISTICS, "padj"):
        np.testing.assert_array_equal(
            np.asarray(sliced.read(name)).view(np.uint8),
            np.asarray(artifact.read(name)).view(np.uint8),
            err_msg=name,
        )


def test_marker_table_ranks_the_planted_markers(planted, markers_by_type) -> None:
    """Each type's top 12 genes by score are its 12 planted markers."""
    _, table = markers_by_type
    for cell_type, ids in planted.marker_ids.items():
        top = table[table["group"] == cell_type].head(len(ids))
        assert set(top["feature"]) == set(ids), cell_type


# --- graph, clusters and markers of clusters -----------------------------------------------


@pytest.fixture(scope="module")
def clusters(chain) -> np.ndarray:
    graph = chain.ds.graph.neighbors(chain.pca, k=15)
    clustering = chain.ds.cluster.leiden(graph, resolution=0.8)
    return clustering.read("labels")


@pytest.mark.slow
def test_leiden_recovers_the_planted_types(planted, clusters: np.ndarray, open_threads) -> None:
    """Leiden on the kNN graph of the PCA agrees with the truth; its labels are the cell column."""
    assert adjusted_rand_score(planted.cell_type[planted.mask], clusters) >= 0.85
    column = open_threads(planted.path).cells.fetch_all("RNA_leiden_cluster")
    np.testing.assert_array_equal(column[planted.mask], clusters)
    assert (column[~planted.mask] == -1).all()


@pytest.mark.slow
@pytest.mark.parametrize("flavor", ["igraph", "leidenalg"])
def test_leiden_flavors_recover_the_planted_types_over_seeds(planted, chain, flavor: str) -> None:
    """Over seeds 0-4 each flavor finds the 4 planted types (ARI 1) at least 3 times, never below 0.85.

    One seed of either may split a type in two (ARI 0.885 here), as scanpy's
    clusters do from seed to seed.
    """
    graph = chain.ds.graph.neighbors(chain.pca, k=15)
    truth = planted.cell_type[planted.mask]
    scores = [
        adjusted_rand_score(
            truth,
            chain.ds.cluster.leiden(
                graph, resolution=0.8, seed=seed, flavor=flavor, label=f"{flavor}{seed}"
            ).read("labels"),
        )
        for seed in range(5)
    ]
    assert min(scores) >= 0.85, scores
    assert sum(score > 0.999 for score in scores) >= 3, scores


@pytest.mark.slow
def test_igraph_leiden_is_seeded_apart_from_random(chain, clusters: np.ndarray) -> None:
    """The igraph flavor's labels depend on the seed alone: the op neither uses nor moves `random`'s state."""
    graph = chain.ds.graph.neighbors(chain.pca, k=15)
    state = random.getstate()
    random.seed(12345)  # igraph's default generator is this module
    again = chain.ds.cluster.leiden(graph, resolution=0.8, label="again", invalidate_cache=True)
    drawn = random.random()
    random.setstate(state)
    assert again.parameters["flavor"] == "igraph"
    np.testing.assert_array_equal(again.read("labels"), clusters)
    assert drawn == random.Random(12345).random()


@pytest.mark.slow
def test_cluster_markers_recover_the_planted_genes(planted, chain, clusters: np.ndarray) -> None:
    """The top 20 markers by score of each cluster hold most planted markers of its majority type."""
    artifact = chain.ds.markers.search(
        "RNA", group_key="RNA_leiden_cluster", cell_selection=planted.mask
    )
    table = chain.ds.markers.table(artifact, n=20)
    types = planted.cell_type[planted.mask]
    for label in np.unique(clusters):
        majority = pd.Series(types[clusters == label]).mode()[0]
        top = set(table[table["group"] == str(label)]["feature"])
        assert len(top & set(planted.marker_ids[majority])) >= 10, (label, majority)


def test_qc_metrics_match_numpy(planted, open_threads, tmp_path) -> None:
    """nCounts, nFeatures and pattern percentages equal numpy sums (RNA via countsT rows, ADT via counts)."""
    import shutil  # noqa: PLC0415

    path = tmp_path / "qc.zarr"
    shutil.copytree(planted.path, path)
    ds = open_threads(path, zarr_mode="r+")
    names = [str(n) for n in ds.RNA.features.fetch_all("names").tolist()]
    ds.qc.metrics("RNA")
    ds.qc.metrics("ADT", patterns={"percentLow": "^CD[0-4]$"})
    rna, adt = planted.rna.astype(np.float64), planted.adt.astype(np.float64)
    mito = np.array([n.upper().startswith("MT-") for n in names])
    assert mito.any()
    np.testing.assert_array_equal(ds.cells.fetch_all("RNA_nCounts"), rna.sum(axis=1))
    np.testing.assert_array_equal(ds.cells.fetch_all("RNA_nFeatures"), (rna > 0).sum(axis=1))
    np.testing.assert_allclose(
        ds.cells.fetch_all("RNA_percentMito"), 100 * rna[:, mito].sum(axis=1) / rna.sum(axis=1)
    )
    low = np.array([f"CD{i}" in {f"CD{j}" for j in range(5)} for i in range(adt.shape[1])])
    np.testing.assert_allclose(
        ds.cells.fetch_all("ADT_percentLow"), 100 * adt[:, low].sum(axis=1) / adt.sum(axis=1)
    )
