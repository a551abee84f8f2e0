"""R's ``stats::lowess``: a direct port of ``clowess`` in R's ``src/library/stats/src/lowess.c``.

voom fits its mean-variance trend with it. The port keeps the C code's order
of operations: its sums run left to right (``np.cumsum``, a sequential
accumulation, where numpy's ``sum`` would add pairwise), cubes and squares are
products, not powers, and the window moves, weights, ties and the skipping of
points within ``delta`` follow the C loops branch for branch. On voom's trend
it reproduces R to within a few units in the last place.
"""

from __future__ import annotations

import numpy as np

from cytepool.errors import LimmaError

__all__ = ["r_lowess"]


def _sequential_sum(values: np.ndarray) -> float:
    """Sum from left to right, as a C loop ``s += v[j]`` does."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def _local_fit(
    x: np.ndarray,
    y: np.ndarray,
    *,
    i: int,
    window: tuple[int, int],
    robustness: np.ndarray | None,
) -> float | None:
    """``lowest``: the local (linear) fit at ``x[i]``; None when every weight is zero."""
    n = x.size
    nleft, nright = window
    xs = x[i]
    x_range = x[n - 1] - x[0]
    h = max(xs - x[nleft], x[nright] - xs)
    h9 = 0.999 * h
    h1 = 0.001 * h
    # The C loop scans from nleft and stops at the first point right of xs beyond h9;
    # points beyond xs + h are certainly past it, so the scan never needs to go further.
    stop = min(int(np.searchsorted(x, xs + h, side="right")) + 1, n)
    xj = x[nleft:stop]
    r = np.abs(xj - xs)
    beyond = (r > h9) & (xj > xs)
    end = int(np.argmax(beyond)) if beyond.any() else xj.size
    xj, r = xj[:end], r[:end]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = r / h
    u = 1.0 - q * q * q
    w = np.where(r <= h1, 1.0, u * u * u)
    w[r > h9] = 0.0
    if robustness is not None:
        w = w * robustness[nleft : nleft + end]
    a = _sequential_sum(w)
    if a <= 0.0:
        return None
    w = w / a
    if h > 0.0:
        a = _sequential_sum(w * xj)
        b = xs - a
        d = xj - a
        c = _sequential_sum(w * (d * d))
        if np.sqrt(c) > 0.001 * x_range:
            b /= c
            w = w * (b * d + 1.0)
    return _sequential_sum(w * y[nleft : nleft + end])


def _next_window(x: np.ndarray, *, i: int, nleft: int, ns: int) -> int:
    """The ``nleft`` the C loop moves to for point ``i``: right while the radius shrinks."""
    n = x.size
    # x[i] - x[k] falls and x[k + ns] - x[i] rises with k, also after rounding: the C
    # loop's condition holds for a prefix of the lefts, scanned here in growing blocks.
    block = 64
    while nleft + ns < n:
        lefts = np.arange(nleft, min(nleft + block, n - ns))
        moves = (x[i] - x[lefts]) > (x[lefts + ns] - x[i])
        if not moves.all():
            return nleft + int(np.argmin(moves))
        nleft += moves.size
        block *= 2
    return nleft


def _smooth_pass(
    x: np.ndarray, y: np.ndarray, *, ns: int, delta: float, robustness: np.ndarray | None
) -> np.ndarray:
    """One pass of the C ``for(;;)`` loop: fitted values at every point."""
    n = x.size
    ys = np.empty(n)
    nleft, last, i = 0, -1, 0
    while True:
        nleft = _next_window(x, i=i, nleft=nleft, ns=ns)
        fitted = _local_fit(x, y, i=i, window=(nleft, nleft + ns - 1), robustness=robustness)
        ys[i] = y[i] if fitted is None else fitted
        if last < i - 1:
            between = slice(last + 1, i)
            alpha = (x[between] - x[last]) / (x[i] - x[last])
            ys[between] = alpha * ys[i] + (1.0 - alpha) * ys[last]
        last = i
        ties_end = int(np.searchsorted(x, x[last], side="right")) - 1
        if ties_end > last:
            ys[last + 1 : ties_end + 1] = ys[last]
            last = ties_end
        beyond_cut = int(np.searchsorted(x, x[last] + delta, side="right"))
        i = max(last + 1, beyond_cut - 1)
        if last >= n - 1:
            return ys


def _robustness_weights(residuals: np.ndarray) -> np.ndarray | None:
    """Bisquare weights of the residuals over six MADs; None when the residuals are all ~0."""
    n = residuals.size
    abs_res = np.abs(residuals)
    scale = _sequential_sum(abs_res) / n
    ordered = np.sort(abs_res)
    m1 = n // 2
    cmad = 3.0 * (ordered[m1] + ordered[n - m1 - 1]) if n % 2 == 0 else 6.0 * ordered[m1]
    if cmad < 1e-7 * scale:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        q = abs_res / cmad
    u = 1.0 - q * q
    return np.where(abs_res <= 0.001 * cmad, 1.0, np.where(abs_res <= 0.999 * cmad, u * u, 0.0))


def r_lowess(
    x: np.ndarray,
    y: np.ndarray,
    *,
    f: float = 2.0 / 3.0,
    iterations: int = 3,
    delta: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Locally weighted scatterplot smoothing, exactly as R's ``lowess(x, y, f, iter, delta)``.

    Parameters
    ----------
    x, y
        The points, any order; NaN is not allowed.
    f
        The smoother span: the fraction of points in each local fit.
    iterations
        Robustifying iterations after the first fit (R's ``iter``).
    delta
        Points closer than ``delta`` to the last fitted one are interpolated;
        R's default ``0.01 * (max(x) - min(x))`` when None.

    Returns
    -------
    x_sorted, fitted
        ``x`` in increasing order (stable) and the smoothed values there,
        R's ``list(x, y)``.

    Raises
    ------
    LimmaError
        When ``x`` and ``y`` are not 1-D of one length, or hold NaN or infinity.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(10.0)
    >>> xs, ys = r_lowess(x, 2.0 * x + 1.0, f=0.5)
    >>> np.allclose(ys, 2.0 * x + 1.0)
    True
    """
    x_in = np.asarray(x, dtype=np.float64)
    y_in = np.asarray(y, dtype=np.float64)
    if x_in.shape != y_in.shape or x_in.ndim != 1:
        msg = (
            f"lowess: x and y must be 1-D of one length, found shapes {x_in.shape} and {y_in.shape}"
        )
        raise LimmaError(msg)
    if not (np.isfinite(x_in).all() and np.isfinite(y_in).all()):
        msg = "lowess: x and y must be finite"
        raise LimmaError(msg)
    if delta is None:
        delta = 0.01 * (float(x_in.max()) - float(x_in.min())) if x_in.size else 0.0
    order = np.argsort(x_in, kind="stable")
    xs, ys_in = x_in[order], y_in[order]
    n = xs.size
    if n < 2:
        return xs, ys_in.copy()
    ns = max(2, min(n, int(f * n + 1e-7)))
    robustness: np.ndarray | None = None
    fitted = ys_in
    for iteration in range(iterations + 1):
        fitted = _smooth_pass(xs, ys_in, ns=ns, delta=delta, robustness=robustness)
        if iteration == iterations:
            break
        robustness = _robustness_weights(ys_in - fitted)
        if robustness is None:
            break
    return xs, fitted
