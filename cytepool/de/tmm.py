"""edgeR's TMM normalization factors (``calcNormFactors(method="TMM")``, ``.calcFactorTMM``).

Sums that R accumulates in long double are taken with :func:`math.fsum`
(correctly rounded), the closest double-precision equivalent.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["calc_norm_factors", "quantile_type7"]


def quantile_type7(values: np.ndarray, p: float) -> float:
    """R's ``quantile(values, p)`` (type 7), with R's interpolation formula.

    Parameters
    ----------
    values
        At least one number.
    p
        The probability, in [0, 1].

    Returns
    -------
    float

    Examples
    --------
    >>> quantile_type7(np.array([1.0, 2.0, 3.0, 4.0]), 0.75)
    3.25
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    index = 1.0 + max(n - 1, 0) * p
    lo, hi = math.floor(index), math.ceil(index)
    q = float(x[lo - 1])
    if index > lo and x[hi - 1] != q:
        h = index - lo
        q = (1.0 - h) * q + h * float(x[hi - 1])
    return q


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """R's ``rank(values)``: 1-based ranks, ties given their average rank."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]
    block_rank = (starts + 1 + ends) / 2.0
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(block_rank, ends - starts)
    return ranks


def _tmm_factor(
    obs: np.ndarray,
    ref: np.ndarray,
    *,
    lib_obs: float,
    lib_ref: float,
    logratio_trim: float,
    sum_trim: float,
    a_cutoff: float,
) -> float:
    """``.calcFactorTMM`` with weighting: the trimmed weighted mean of M, as 2**M."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_r = np.log2((obs / lib_obs) / (ref / lib_ref))
        abs_e = (np.log2(obs / lib_obs) + np.log2(ref / lib_ref)) / 2.0
        v = (lib_obs - obs) / lib_obs / obs + (lib_ref - ref) / lib_ref / ref
    finite = np.isfinite(log_r) & np.isfinite(abs_e) & (abs_e > a_cutoff)
    log_r, abs_e, v = log_r[finite], abs_e[finite], v[finite]
    if log_r.size == 0 or np.max(np.abs(log_r)) < 1e-6:
        return 1.0
    n = log_r.size
    lo_l = math.floor(n * logratio_trim) + 1
    hi_l = n + 1 - lo_l
    lo_s = math.floor(n * sum_trim) + 1
    hi_s = n + 1 - lo_s
    rank_r = _average_ranks(log_r)
    rank_e = _average_ranks(abs_e)
    keep = (rank_r >= lo_l) & (rank_r <= hi_l) & (rank_e >= lo_s) & (rank_e <= hi_s)
    numerator = math.fsum((log_r[keep] / v[keep]).tolist())
    denominator = math.fsum((1.0 / v[keep]).tolist())
    f = numerator / denominator if denominator != 0.0 else math.nan
    if math.isnan(f):
        f = 0.0
    return float(np.power(2.0, f))


def calc_norm_factors(
    counts: np.ndarray,
    *,
    lib_size: np.ndarray | None = None,
    logratio_trim: float = 0.3,
    sum_trim: float = 0.05,
    a_cutoff: float = -1e10,
) -> np.ndarray:
    """TMM normalization factors of the columns of ``counts``, scaled to geometric mean 1.

    Parameters
    ----------
    counts
        Genes x samples, non-negative.
    lib_size
        Library sizes; the column sums when None.
    logratio_trim, sum_trim, a_cutoff
        edgeR's ``logratioTrim``, ``sumTrim`` and ``Acutoff``.

    Returns
    -------
    numpy.ndarray
        One factor per sample; the effective library size is ``lib_size * factor``.

    Examples
    --------
    >>> y = np.array([[10, 22], [30, 58], [5, 11], [1, 3]])
    >>> calc_norm_factors(y).tolist()  # R: 0.9637705924859461 1.0375913187189123
    [0.9637705924859461, 1.0375913187189123]
    """
    x = np.asarray(counts, dtype=np.float64)
    n_samples = x.shape[1]
    lib = x.sum(axis=0) if lib_size is None else np.asarray(lib_size, dtype=np.float64)
    x = x[(x > 0).sum(axis=1) > 0]
    if x.shape[0] == 0 or n_samples == 1:
        return np.ones(n_samples)
    f75 = np.array([quantile_type7(x[:, j], 0.75) for j in range(n_samples)]) / lib
    if float(np.median(f75)) < 1e-20:
        ref = int(np.argmax(np.sqrt(x).sum(axis=0)))
    else:
        mean_f75 = math.fsum(f75.tolist()) / n_samples
        ref = int(np.argmin(np.abs(f75 - mean_f75)))
    factors = np.array(
        [
            _tmm_factor(
                x[:, j],
                x[:, ref],
                lib_obs=float(lib[j]),
                lib_ref=float(lib[ref]),
                logratio_trim=logratio_trim,
                sum_trim=sum_trim,
                a_cutoff=a_cutoff,
            )
            for j in range(n_samples)
        ]
    )
    return factors / math.exp(math.fsum(np.log(factors).tolist()) / n_samples)
