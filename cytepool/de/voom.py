"""limma's ``voom``: log-CPM and precision weights from the mean-variance trend."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cytepool.de.lmfit import lm_fit
from cytepool.de.lowess import r_lowess
from cytepool.errors import LimmaError

__all__ = ["VoomFit", "approx_rule2", "voom"]


@dataclass(frozen=True, kw_only=True, eq=False)
class VoomFit:
    """What ``voom`` returns, with its plot data (``save.plot=TRUE``).

    Attributes
    ----------
    expression, weights
        Genes x samples: log2-CPM ``E`` and precision weights.
    lib_size
        The library sizes used (times normalization factors).
    trend_genes
        Which genes enter the trend (those with a non-zero count).
    sx, sy
        The trend's points for those genes: average log2 count and
        square root of the residual standard deviation.
    line_x, line_y
        The lowess fit through them (R's ``voom.line``), sorted by ``line_x``.
    """

    expression: np.ndarray
    weights: np.ndarray
    lib_size: np.ndarray
    trend_genes: np.ndarray
    sx: np.ndarray
    sy: np.ndarray
    line_x: np.ndarray
    line_y: np.ndarray


def approx_rule2(v: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """R's ``approxfun(x, y, rule=2, ties=list("ordered", mean))(v)`` for sorted ``x``.

    Linear interpolation with R's formula ``y[i] + (y[j]-y[i]) * ((v-x[i]) / (x[j]-x[i]))``,
    tied ``x`` collapsed to the mean of their ``y``, constant beyond the ends.

    Parameters
    ----------
    v
        Where to interpolate.
    x, y
        The points, ``x`` sorted increasingly (ties allowed), at least one.

    Returns
    -------
    numpy.ndarray
        Shaped like ``v``.

    Examples
    --------
    >>> approx_rule2(np.array([-1.0, 0.5, 1.0, 9.0]), np.array([0.0, 1.0, 1.0, 2.0]),
    ...              np.array([0.0, 1.0, 3.0, 4.0])).tolist()
    [0.0, 1.0, 2.0, 4.0]
    """
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    xu = x[starts]
    counts = np.diff(np.r_[starts, x.size])
    yu = np.add.reduceat(y, starts) / counts if starts.size < x.size else y
    if xu.size == 1:
        return np.full(v.shape, yu[0])
    i = np.clip(np.searchsorted(xu, v, side="right") - 1, 0, xu.size - 2)
    j = i + 1
    xi, xj, yi, yj = xu[i], xu[j], yu[i], yu[j]
    out = yi + (yj - yi) * ((v - xi) / (xj - xi))
    out = np.where(v == xi, yi, out)
    out = np.where(v == xj, yj, out)
    out = np.where(v < xu[0], yu[0], out)
    return np.where(v > xu[-1], yu[-1], out)


def voom(
    counts: np.ndarray, design: np.ndarray, *, lib_size: np.ndarray, span: float = 0.5
) -> VoomFit:
    """Log-CPM and voom precision weights of ``counts`` (genes x samples) for ``design``.

    Parameters
    ----------
    counts
        Genes x samples, non-negative.
    design
        Samples x coefficients, full column rank with residual degrees of freedom.
    lib_size
        Library sizes, times the normalization factors when there are any.
    span
        The lowess span of the mean-variance trend.

    Returns
    -------
    VoomFit

    Raises
    ------
    LimmaError
        When there are fewer than two genes or a count is negative or not finite.
    DesignError
        When the design is not valid (see :func:`~cytepool.de.lmfit.validate_design`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.poisson(50, size=(100, 6))
    >>> x = np.column_stack([np.ones(6), [0.0, 0, 0, 1, 1, 1]])
    >>> v = voom(y, x, lib_size=y.sum(axis=0))
    >>> v.weights.shape, bool((v.weights > 0).all())
    ((100, 6), True)
    """
    y = np.asarray(counts, dtype=np.float64)
    x = np.asarray(design, dtype=np.float64)
    lib = np.asarray(lib_size, dtype=np.float64)
    if y.shape[0] < 2:
        msg = f"voom needs at least two genes to fit a mean-variance trend, found {y.shape[0]}"
        raise LimmaError(msg)
    if (y < 0).any() or not np.isfinite(y).all():
        msg = "voom: counts must be finite and non-negative"
        raise LimmaError(msg)
    expression = np.log2((y + 0.5) / (lib + 1.0) * 1e6)
    fit = lm_fit(expression, x)
    mean_log_lib = math.fsum(np.log2(lib + 1.0).tolist()) / lib.size
    sx = fit.amean + mean_log_lib - math.log2(1e6)
    sy = np.sqrt(fit.sigma)
    trend_genes = y.sum(axis=1) != 0
    line_x, line_y = r_lowess(sx[trend_genes], sy[trend_genes], f=span)
    fitted_values = fit.coefficients @ x.T
    fitted_count = 1e-6 * (np.power(2.0, fitted_values) * (lib + 1.0))
    weights = 1.0 / np.power(approx_rule2(np.log2(fitted_count), line_x, line_y), 4.0)
    return VoomFit(
        expression=expression,
        weights=weights,
        lib_size=lib,
        trend_genes=trend_genes,
        sx=sx[trend_genes],
        sy=sy[trend_genes],
        line_x=line_x,
        line_y=line_y,
    )
