"""limma's empirical Bayes moderation: ``fitFDist``, ``squeezeVar``, ``eBayes``, ``tmixture``.

Without a trend and without robustness (limma's defaults). Means and sums that
R accumulates in long double use :func:`math.fsum`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from cytepool._warnings import warn_user
from cytepool.errors import LimmaError

if TYPE_CHECKING:
    from cytepool.de.lmfit import LinearFit

__all__ = [
    "EBayesFit",
    "ebayes",
    "fit_f_dist",
    "squeeze_var",
    "tmixture_vector",
    "trigamma_inverse",
]


def _mean(values: np.ndarray) -> float:
    return math.fsum(np.asarray(values, dtype=np.float64).ravel().tolist()) / values.size


def _t_sf(t: np.ndarray, df: np.ndarray | float) -> np.ndarray:
    """Upper tail of Student's t, R's ``pt(t, df, lower.tail=FALSE)``."""
    return np.asarray(special.stdtr(df, -t))


def _t_isf(p: np.ndarray, df: np.ndarray | float) -> np.ndarray:
    """Upper-tail quantile of Student's t, R's ``qt(p, df, lower.tail=FALSE)``."""
    return np.asarray(-special.stdtrit(df, p))


def _warn(message: str) -> None:
    warn_user(message)


def trigamma_inverse(x: float) -> float:
    """The ``y`` with ``trigamma(y) == x``, by limma's Newton iteration.

    Parameters
    ----------
    x
        A trigamma value.

    Returns
    -------
    float
        ``y``; NaN for a negative or NaN ``x``. A warning is shown when the
        iteration limit (50) is reached.

    Examples
    --------
    >>> y = trigamma_inverse(0.5)
    >>> abs(float(special.polygamma(1, y)) - 0.5) < 1e-12
    True
    """
    if math.isnan(x):
        return math.nan
    if x < 0:
        return math.nan
    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for iteration in range(1, 52):
        tri = float(special.polygamma(1, y))
        dif = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += dif
        if -dif / y < 1e-8:
            break
        if iteration > 50:
            _warn("trigammaInverse: iteration limit exceeded")
            break
    return y


def fit_f_dist(x: np.ndarray, df1: np.ndarray) -> tuple[float, float]:
    """Moment estimates ``(scale, df2)`` of ``x ~ scale * F(df1, df2)`` (limma's ``fitFDist``).

    Parameters
    ----------
    x
        Per gene, the residual variances.
    df1
        Per gene, their degrees of freedom.

    Returns
    -------
    scale, df2
        The prior variance s0² and degrees of freedom d0 (infinite when the
        variances vary no more than their sampling error; NaN for no genes).
        A warning is shown when variances are exactly zero.
    """
    n = x.size
    if n == 0:
        return math.nan, math.nan
    if n == 1:
        return float(x[0]), 0.0
    ok = np.isfinite(df1) & (df1 > 1e-15) & np.isfinite(x) & (x > -1e-15)
    if int(ok.sum()) == 1:
        return float(x[ok][0]), 0.0
    x, df1 = np.maximum(x[ok], 0.0), df1[ok]
    m = float(np.median(x))
    if m == 0.0:
        _warn("More than half of residual variances are exactly zero: eBayes unreliable")
        m = 1.0
    elif (x == 0.0).any():
        _warn("Zero sample variances detected, have been offset away from zero")
    x = np.maximum(x, 1e-5 * m)
    e = np.log(x) - special.digamma(df1 / 2.0) + np.log(df1 / 2.0)
    e_mean = _mean(e)
    e_var = math.fsum(((e - e_mean) ** 2).tolist()) / (e.size - 1)
    e_var -= _mean(special.polygamma(1, df1 / 2.0))
    if e_var > 0:
        df2 = 2.0 * trigamma_inverse(e_var)
        scale = math.exp(e_mean + float(special.digamma(df2 / 2.0)) - math.log(df2 / 2.0))
    else:
        df2 = math.inf
        scale = _mean(x)
    return scale, df2


def squeeze_var(var: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Posterior variances ``(var_post, var_prior, df_prior)`` (limma's ``squeezeVar``).

    Parameters
    ----------
    var
        Per gene, the residual variances.
    df
        Per gene, their degrees of freedom.

    Returns
    -------
    var_post, var_prior, df_prior
        The moderated variances per gene, s0² and d0.

    Raises
    ------
    LimmaError
        When the prior degrees of freedom cannot be estimated (no gene has a usable variance).
    """
    if var.size == 1:
        return var.copy(), float(var[0]), 0.0
    var = np.where(df == 0, 0.0, var)
    var_prior, df_prior = fit_f_dist(var, df)
    if math.isnan(df_prior):
        msg = "could not estimate the prior degrees of freedom: no gene has a usable variance"
        raise LimmaError(msg)
    if math.isinf(df_prior):
        return np.full(var.shape, var_prior), var_prior, df_prior
    return (df * var + df_prior * var_prior) / (df + df_prior), var_prior, df_prior


def tmixture_vector(
    t: np.ndarray,
    stdev_unscaled: np.ndarray,
    df: np.ndarray,
    *,
    proportion: float,
    v0_lim: tuple[float, float] | None,
) -> float:
    """Prior variance of the non-zero coefficients from the largest ``|t|`` (``tmixture.vector``).

    Parameters
    ----------
    t
        Per gene, the moderated t of one coefficient.
    stdev_unscaled
        Per gene, its unscaled standard error.
    df
        Per gene, the total degrees of freedom.
    proportion
        The assumed proportion of differentially expressed genes.
    v0_lim
        Bounds the estimates are clipped into, or None.

    Returns
    -------
    float
        v0; NaN when too few genes give an estimate.
    """
    keep = ~np.isnan(t)
    t, u, df = np.abs(t[keep]), stdev_unscaled[keep], df[keep].astype(np.float64)
    n_genes = t.size
    n_target = math.ceil(proportion / 2.0 * n_genes)
    if n_target < 1:
        return math.nan
    p = max(n_target / n_genes, proportion)
    max_df = float(df.max())
    lower = df < max_df
    if lower.any():
        t = t.copy()
        t[lower] = _t_isf(_t_sf(t[lower], df[lower]), max_df)
    order = np.argsort(-t, kind="stable")[:n_target]
    t_top = t[order]
    v1 = u[order] ** 2
    r = np.arange(1, n_target + 1, dtype=np.float64)
    p0 = 2.0 * _t_sf(t_top, max_df)
    p_target = ((r - 0.5) / n_genes - (1.0 - p) * p0) / p
    v0 = np.zeros(n_target)
    pos = p_target > p0
    if pos.any():
        q_target = _t_isf(p_target[pos] / 2.0, max_df)
        v0[pos] = v1[pos] * ((t_top[pos] / q_target) ** 2 - 1.0)
    if v0_lim is not None:
        v0 = np.minimum(np.maximum(v0, v0_lim[0]), v0_lim[1])
    return _mean(v0)


@dataclass(frozen=True, kw_only=True, eq=False)
class EBayesFit:
    """Moderated statistics of every coefficient of a :class:`~cytepool.de.lmfit.LinearFit`.

    Attributes
    ----------
    t, p_value, lods
        ``(G, p)``: moderated t, its two-sided p-value and the B statistic.
    s2_post, df_total
        ``(G,)``: posterior variances and total degrees of freedom.
    df_prior, s2_prior
        The prior degrees of freedom d0 and variance s0².
    var_prior
        ``(p,)``: v0, the prior variance of each non-zero coefficient.
    """

    t: np.ndarray
    p_value: np.ndarray
    lods: np.ndarray
    s2_post: np.ndarray
    df_total: np.ndarray
    df_prior: float
    s2_prior: float
    var_prior: np.ndarray


def ebayes(
    fit: LinearFit, *, proportion: float = 0.01, stdev_coef_lim: tuple[float, float] = (0.1, 4.0)
) -> EBayesFit:
    """Moderated t, p-values and B-statistics: limma's ``eBayes(fit)``.

    Without a trend and not robust (limma's defaults).

    Parameters
    ----------
    fit
        The gene-wise linear fits.
    proportion
        The assumed proportion of differentially expressed genes (for B).
    stdev_coef_lim
        Bounds of the prior standard deviation of the coefficients (for B).

    Returns
    -------
    EBayesFit

    Raises
    ------
    LimmaError
        When the fits have no residual degrees of freedom, or the prior cannot be estimated.

    Examples
    --------
    >>> from cytepool.de.lmfit import lm_fit
    >>> rng = np.random.default_rng(0)
    >>> x = np.column_stack([np.ones(6), [0.0, 0, 0, 1, 1, 1]])
    >>> eb = ebayes(lm_fit(rng.normal(size=(200, 6)), x))
    >>> eb.t.shape, bool(eb.df_prior > 0)
    ((200, 2), True)
    """
    beta, u = fit.coefficients, fit.stdev_unscaled
    df_residual = fit.df_residual
    if float(df_residual.max()) == 0.0:
        msg = "no residual degrees of freedom in the linear model fits"
        raise LimmaError(msg)
    s2 = fit.sigma**2
    s2_post, s2_prior, df_prior = squeeze_var(s2, df_residual)
    t = beta / u / np.sqrt(s2_post)[:, None]
    df_total = np.minimum(df_residual + df_prior, math.fsum(df_residual.tolist()))
    p_value = 2.0 * _t_sf(np.abs(t), df_total[:, None])
    lim = (stdev_coef_lim[0] ** 2 / s2_prior, stdev_coef_lim[1] ** 2 / s2_prior)
    var_prior = np.array(
        [
            tmixture_vector(t[:, k], u[:, k], df_total, proportion=proportion, v0_lim=lim)
            for k in range(beta.shape[1])
        ]
    )
    if np.isnan(var_prior).any():
        var_prior[np.isnan(var_prior)] = 1.0 / s2_prior
        _warn("Estimation of var.prior failed - set to default value")
    u2 = u**2
    r = (u2 + var_prior[None, :]) / u2
    t2 = t**2
    dt = df_total[:, None]
    if df_prior > 1e6:
        kernel = t2 * (1.0 - 1.0 / r) / 2.0
    else:
        kernel = (1.0 + dt) / 2.0 * np.log((t2 + dt) / (t2 / r + dt))
    lods = math.log(proportion / (1.0 - proportion)) - np.log(r) / 2.0 + kernel
    return EBayesFit(
        t=t,
        p_value=p_value,
        lods=lods,
        s2_post=s2_post,
        df_total=df_total,
        df_prior=df_prior,
        s2_prior=s2_prior,
        var_prior=var_prior,
    )
