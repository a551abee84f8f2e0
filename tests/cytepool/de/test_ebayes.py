"""Empirical Bayes pieces against values computed in R (limma 3.54.1), and their edge cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cytepool.de.ebayes import ebayes, fit_f_dist, squeeze_var, tmixture_vector, trigamma_inverse
from cytepool.de.lmfit import LinearFit, lm_fit
from cytepool.de.toptable import p_adjust_bh

X = np.array([0.31, 0.52, 0.77, 1.2, 0.05, 0.91, 0.44, 2.3, 0.66, 0.18, 1.05, 0.29])


def test_trigamma_inverse_from_r() -> None:
    """trigammaInverse(c(1e-8, 0.5, 1, 10, 1e8)) in R, including both asymptotic branches."""
    got = [trigamma_inverse(v) for v in (1e-8, 0.5, 1.0, 10.0, 1e8)]
    expected = [1e8, 2.4599529483523073, 1.4262551202150788, 0.33508104437803565, 1e-4]
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert math.isnan(trigamma_inverse(-1.0))


def test_fit_f_dist_from_r() -> None:
    """The F-distribution fit (fitFDist) with equal and with unequal residual df."""
    scale, df2 = fit_f_dist(X, np.full(12, 4.0))
    assert (scale, df2) == pytest.approx((0.55601280984897905, 6.35538415412665358), rel=1e-13)
    d3 = np.array([4, 4, 4, 5, 5, 5, 3, 3, 3, 4, 4, 4], dtype=np.float64)
    assert fit_f_dist(X, d3) == pytest.approx((0.55992836817770308, 6.23589185341842356), rel=1e-13)


def test_zero_variances_warn_as_in_r() -> None:
    """Zero variances are offset with R's warning, pointed at the caller."""
    x = X.copy()
    x[:2] = 0.0
    with pytest.warns(UserWarning, match="Zero sample variances detected"):
        scale, df2 = fit_f_dist(x, np.full(12, 4.0))
    assert (scale, df2) == pytest.approx((0.00438398522479168, 0.45846345294756718), rel=1e-12)


def test_equal_variances_give_an_infinite_prior() -> None:
    """With no spread beyond the chi-square's, d0 is infinite and s0² the mean (R: 2, Inf)."""
    post, prior, df_prior = squeeze_var(np.full(10, 2.0), np.full(10, 3.0))
    assert (prior, df_prior) == (2.0, math.inf)
    np.testing.assert_array_equal(post, 2.0)


def test_tmixture_vector_from_r() -> None:
    """tmixture.vector with constant and with unequal df (the qt/pt rescaling branch)."""
    t = np.array([8, -6, 5, 2, 1, -0.5, 0.2, 3, -4, 0.1])
    u = np.array([0.5, 0.6, 0.7, 0.5, 0.4, 0.6, 0.5, 0.55, 0.45, 0.5])
    df = np.array([10, 10, 12, 10, 12, 10, 10, 12, 10, 10], dtype=np.float64)
    got = tmixture_vector(t, u, df, proportion=0.2, v0_lim=(0.01, 100.0))
    assert got == pytest.approx(8.4740577808694599, rel=1e-10)
    got = tmixture_vector(t, u, np.full(10, 10.0), proportion=0.2, v0_lim=None)
    assert got == pytest.approx(10.475425293137427, rel=1e-12)


def test_ebayes_with_an_infinite_prior_uses_the_limit_kernel() -> None:
    """When d0 is infinite the B-statistic takes limma's large-df kernel and t is finite."""
    fit = LinearFit(
        coefficients=np.array([[0.5], [1.0], [-2.0], [0.0]]),
        stdev_unscaled=np.full((4, 1), 0.5),
        sigma=np.full(4, 1.0),
        df_residual=np.full(4, 4.0),
        amean=np.zeros(4),
        cov_coefficients=np.eye(1),
        names=("x",),
    )
    eb = ebayes(fit)
    assert eb.df_prior == math.inf
    np.testing.assert_allclose(eb.df_total, 16.0)
    assert np.isfinite(eb.lods).all()


def test_benjamini_hochberg_keeps_nan_out() -> None:
    """NaN p-values stay NaN and do not count in n, as p.adjust does."""
    adjusted = p_adjust_bh(np.array([0.01, np.nan, 0.04, 0.03]))
    np.testing.assert_allclose(adjusted, [0.03, np.nan, 0.04, 0.04])


def test_unweighted_and_unit_weights_agree() -> None:
    """Weights of one give the ordinary least squares fit."""
    rng = np.random.default_rng(0)
    design = pd.get_dummies(pd.Series(list("aabbcc")), drop_first=True).to_numpy(dtype=np.float64)
    design = np.column_stack([np.ones(6), design])
    e = rng.normal(size=(30, 6))
    plain, weighted = lm_fit(e, design), lm_fit(e, design, weights=np.ones((30, 6)))
    np.testing.assert_allclose(weighted.coefficients, plain.coefficients, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(weighted.sigma, plain.sigma, rtol=1e-12)
    np.testing.assert_allclose(weighted.stdev_unscaled, plain.stdev_unscaled, rtol=1e-12)
