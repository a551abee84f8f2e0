"""filterByExpr, TMM and voom's log-CPM: small cases checked in R, and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cytepool.de.filter import filter_by_expr, min_sample_size
from cytepool.de.tmm import calc_norm_factors, quantile_type7
from cytepool.de.voom import approx_rule2, voom

SMALL = np.array(
    [
        [10, 9, 11, 12],
        [100, 90, 110, 95],
        [10, 10, 10, 11],
        [0, 0, 15, 0],
        [3, 4, 5, 2],
        [1000, 11003, 997, 1001],
        [7, 7, 7, 8],
    ],
    dtype=np.float64,
)
"""A matrix whose filterByExpr and calcNormFactors results were computed in R (edgeR 3.40.2)."""

TWO_GROUPS = np.column_stack([np.ones(4), [0.0, 0.0, 1.0, 1.0]])


def test_filter_by_expr_small_cases_from_r() -> None:
    """With a design, without one and with the design's groups, R's decisions are kept."""
    assert filter_by_expr(SMALL, design=TWO_GROUPS).tolist() == [
        True,
        True,
        True,
        False,
        False,
        True,
        False,
    ]
    assert filter_by_expr(SMALL).tolist() == [False, False, False, False, False, True, False]


def test_min_sample_size_is_inverse_max_leverage() -> None:
    """hat(design) of a 2+2 design has leverage 1/2 everywhere; R prints 0.50000000000000011."""
    assert min_sample_size(TWO_GROUPS) == pytest.approx(2.0, rel=1e-14)
    donors = np.column_stack(
        [np.ones(12), np.tile([0.0, 1.0], 6), np.kron(np.eye(6), np.ones((2, 1)))[:, 1:]]
    )
    assert min_sample_size(donors) == pytest.approx(12 / 7, rel=1e-14)


def test_large_groups_are_shrunk_towards_large_n() -> None:
    """A minimum group size above large.n counts as large.n + (m - large.n) * min.prop."""
    design = np.column_stack([np.ones(24), np.repeat([0.0, 1.0], 12)])
    y = np.vstack([np.zeros(24), np.full(24, 1e6)])
    y[0, :12] = 50.0  # 12 samples above the cutoff: 12 >= 10 + 2 * 0.7
    assert filter_by_expr(y, design=design).tolist() == [True, True]
    y[0, 11] = 0.0  # 11 < 11.4
    assert filter_by_expr(y, design=design).tolist() == [False, True]


def test_filter_by_expr_refuses_empty_libraries() -> None:
    """A sample without counts has no CPM: refused, as edgeR's cpm refuses it."""
    with pytest.raises(ValueError, match="finite and positive"):
        filter_by_expr(np.array([[1.0, 0.0], [2.0, 0.0]]))


def test_tmm_small_cases_from_r() -> None:
    """TMM (calcNormFactors) on the small matrix, with its own and with given library sizes."""
    np.testing.assert_allclose(
        calc_norm_factors(SMALL),
        [1.8012941480657307, 0.17489903747472049, 1.7595428707570828, 1.8039649271864138],
        rtol=1e-14,
    )
    np.testing.assert_allclose(
        calc_norm_factors(SMALL, lib_size=np.array([1e4, 2e4, 1.5e4, 1.2e4])),
        [1.3540731802643204, 0.61842364343506184, 0.98097095495878595, 1.2173504760447302],
        rtol=1e-14,
    )


def test_quantile_type7_from_r() -> None:
    """R's quantile(c(1, 5, 2, 2, 8, 3), c(0.75, 0.1, 0.33))."""
    x = np.array([1.0, 5.0, 2.0, 2.0, 8.0, 3.0])
    assert [quantile_type7(x, p) for p in (0.75, 0.1, 0.33)] == [4.5, 1.5, 2.0]


def test_tmm_degenerate_inputs() -> None:
    """One sample, all-zero counts and identical samples give factors of 1."""
    assert calc_norm_factors(np.array([[1.0], [2.0]])).tolist() == [1.0]
    assert calc_norm_factors(np.zeros((3, 2))).tolist() == [1.0, 1.0]
    same = np.tile(np.arange(1.0, 30.0)[:, None], (1, 3))
    np.testing.assert_allclose(calc_norm_factors(same), 1.0, rtol=1e-15)


counts_matrices = st.builds(
    lambda seed, n_genes, n_samples: np.random.default_rng(seed).poisson(
        np.random.default_rng(seed + 1).gamma(0.7, 40.0, size=(n_genes, 1))
        * np.random.default_rng(seed + 2).lognormal(0.0, 0.4, size=(1, n_samples))
    ),
    st.integers(0, 2**32),
    st.integers(30, 200),
    st.integers(3, 9),
)


@given(counts=counts_matrices)
def test_tmm_factors_have_geometric_mean_one(counts: np.ndarray) -> None:
    """TMM factors are scaled to geometric mean 1."""
    factors = calc_norm_factors(counts)
    assert np.exp(np.mean(np.log(factors))) == pytest.approx(1.0, abs=1e-14)


@given(counts=counts_matrices, k=st.integers(2, 50))
def test_tmm_factors_unchanged_by_scaling_counts(counts: np.ndarray, k: int) -> None:
    """Multiplying every count by an integer leaves the TMM factors unchanged."""
    np.testing.assert_allclose(calc_norm_factors(counts * k), calc_norm_factors(counts), rtol=1e-10)


@given(counts=counts_matrices, seed=st.integers(0, 2**32))
def test_tmm_factors_follow_a_sample_permutation(counts: np.ndarray, seed: int) -> None:
    """Permuting the samples permutes the factors (when the reference column is unambiguous)."""
    order = np.random.default_rng(seed).permutation(counts.shape[1])
    lib = counts.sum(axis=0)
    kept = counts[(counts > 0).any(axis=1)]
    f75 = np.array([quantile_type7(kept[:, j], 0.75) for j in range(kept.shape[1])]) / lib
    distances = np.sort(np.abs(f75 - f75.mean()))
    if len(distances) > 1 and distances[1] - distances[0] < 1e-12:
        return  # two equally good reference columns: R picks the first, so order matters
    np.testing.assert_allclose(
        calc_norm_factors(counts[:, order]), calc_norm_factors(counts)[order], rtol=1e-10
    )


@pytest.mark.slow
@given(counts=counts_matrices, scale=st.floats(0.01, 100.0))
def test_voom_log_cpm_shifts_with_library_sizes(counts: np.ndarray, scale: float) -> None:
    """Scaling every library size by c shifts sample j's log-CPM by log2((L_j + 1) / (c L_j + 1))."""
    lib = counts.sum(axis=0).astype(np.float64) + 1.0
    design = np.column_stack([np.ones(counts.shape[1]), np.arange(counts.shape[1]) % 2])
    if counts.shape[1] < 3 or np.linalg.matrix_rank(design) < 2:
        return
    base = voom(counts, design, lib_size=lib).expression
    scaled = voom(counts, design, lib_size=lib * scale).expression
    np.testing.assert_allclose(
        scaled - base,
        np.broadcast_to(np.log2((lib + 1) / (lib * scale + 1)), base.shape),
        atol=1e-12,
    )


def test_approx_rule2_is_r_approxfun() -> None:
    """Constant beyond the ends, linear inside, ties collapsed to their mean."""
    x = np.array([0.0, 1.0, 1.0, 3.0])
    y = np.array([1.0, 2.0, 4.0, 5.0])
    v = np.array([-5.0, 0.0, 0.5, 1.0, 2.0, 3.0, 9.0])
    np.testing.assert_allclose(approx_rule2(v, x, y), [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 5.0])
    assert approx_rule2(np.array([0.0, 7.0]), np.array([2.0]), np.array([3.0])).tolist() == [
        3.0,
        3.0,
    ]
