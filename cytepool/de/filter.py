"""edgeR's ``filterByExpr``: keep genes with enough counts in enough samples."""

from __future__ import annotations

import numpy as np

from cytepool.errors import LimmaError

__all__ = ["filter_by_expr", "min_sample_size"]

_TOLERANCE = 1e-14


def min_sample_size(design: np.ndarray) -> float:
    """The smallest group size a design implies: ``1 / max(hat(design))``.

    As R's ``stats::hat(design)``, the leverages are those of the column space
    of ``[1, design]`` (an intercept is prepended; a design that already has one
    is unchanged by it).

    Parameters
    ----------
    design
        Samples x coefficients.

    Returns
    -------
    float

    Examples
    --------
    >>> x = np.column_stack([np.ones(6), [0, 0, 0, 0, 1, 1]])
    >>> round(min_sample_size(x), 12)
    2.0
    """
    x = np.column_stack([np.ones(design.shape[0]), np.asarray(design, dtype=np.float64)])
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    rank = int((s > 1e-7 * s[0]).sum()) if s.size else 0
    leverage = (u[:, :rank] ** 2).sum(axis=1)
    return float(1.0 / leverage.max())


def filter_by_expr(
    counts: np.ndarray,
    *,
    design: np.ndarray | None = None,
    lib_size: np.ndarray | None = None,
    min_count: float = 10.0,
    min_total_count: float = 15.0,
    large_n: float = 10.0,
    min_prop: float = 0.7,
) -> np.ndarray:
    """Which genes edgeR's ``filterByExpr(y, design=design)`` keeps.

    Parameters
    ----------
    counts
        Genes x samples.
    design
        Samples x coefficients; the minimum group size is ``1 / max(leverage)``.
        None means one group of every sample.
    lib_size
        Library sizes (times normalization factors, if any); column sums when None.
    min_count, min_total_count, large_n, min_prop
        edgeR's defaults.

    Returns
    -------
    numpy.ndarray of bool
        One entry per gene, True to keep.

    Raises
    ------
    LimmaError
        When a library size is not finite and positive.

    Examples
    --------
    >>> y = np.array([[0, 0, 1, 0], [100, 120, 90, 110], [30, 1, 0, 0]])
    >>> filter_by_expr(y).tolist()
    [False, True, False]
    """
    y = np.asarray(counts, dtype=np.float64)
    lib = y.sum(axis=0) if lib_size is None else np.asarray(lib_size, dtype=np.float64)
    if not (np.isfinite(lib).all() and (lib > 0).all()):
        msg = f"filterByExpr: library sizes must be finite and positive, found {lib.tolist()}"
        raise LimmaError(msg)
    m = float(y.shape[1]) if design is None else min_sample_size(design)
    if m > large_n:
        m = large_n + (m - large_n) * min_prop
    cutoff = min_count / float(np.median(lib)) * 1e6
    cpm = y * (1e6 / lib)
    keep_cpm = (cpm >= cutoff).sum(axis=1) >= m - _TOLERANCE
    keep_total = y.sum(axis=1) >= min_total_count - _TOLERANCE
    return np.asarray(keep_cpm & keep_total)
