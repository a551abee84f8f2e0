"""limma's ``lmFit`` (gene-wise weighted least squares) and ``contrasts.fit``.

Every gene is fitted at once: a batched QR decomposition of ``sqrt(w_g) X``
over the stacked ``(G, n, p)`` systems, as R's ``lm.wfit`` does gene by gene.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cytepool.errors import DesignError

__all__ = ["LinearFit", "contrasts_fit", "lm_fit", "validate_design"]


@dataclass(frozen=True, kw_only=True, eq=False)
class LinearFit:
    """Gene-wise linear model fits (limma's ``MArrayLM`` before ``eBayes``).

    Attributes
    ----------
    coefficients, stdev_unscaled
        ``(G, p)``: estimates and their unscaled standard errors, which are
        gene-specific when the fit is weighted.
    sigma, df_residual
        ``(G,)``: residual standard deviation and degrees of freedom.
    amean
        ``(G,)``: unweighted mean of each gene's expression.
    cov_coefficients
        ``(p, p)``: the unweighted ``(X'X)^-1`` (or its contrast transform).
    names
        The coefficient (or contrast) names.
    """

    coefficients: np.ndarray
    stdev_unscaled: np.ndarray
    sigma: np.ndarray
    df_residual: np.ndarray
    amean: np.ndarray
    cov_coefficients: np.ndarray
    names: tuple[str, ...]

    def column(self, k: int) -> LinearFit:
        """The fit of coefficient ``k`` alone (eBayes treats coefficients separately).

        Parameters
        ----------
        k
            The 0-based coefficient position.

        Returns
        -------
        LinearFit
            With one coefficient.
        """
        return LinearFit(
            coefficients=self.coefficients[:, k : k + 1],
            stdev_unscaled=self.stdev_unscaled[:, k : k + 1],
            sigma=self.sigma,
            df_residual=self.df_residual,
            amean=self.amean,
            cov_coefficients=self.cov_coefficients[k : k + 1, k : k + 1],
            names=(self.names[k],),
        )


def validate_design(design: np.ndarray, *, names: tuple[str, ...] = ()) -> None:
    """Check that ``design`` is finite, of full column rank, with residual degrees of freedom.

    Parameters
    ----------
    design
        Samples x coefficients.
    names
        The coefficient names, for the message.

    Raises
    ------
    DesignError
        When ``design`` holds NaN or infinity, is rank deficient, or has as
        many coefficients as samples or more.
    """
    n, p = design.shape
    if not np.isfinite(design).all():
        msg = "design matrix holds NaN or infinity; every entry must be a finite number"
        raise DesignError(msg)
    rank = int(np.linalg.matrix_rank(design)) if design.size else 0
    if rank < p:
        cols = f" (columns {list(names)})" if names else ""
        msg = (
            f"design matrix{cols} has rank {rank} < {p} columns: some coefficients are not "
            "estimable; drop or merge the confounded terms"
        )
        raise DesignError(msg)
    if n - p < 1:
        msg = (
            f"design has {p} coefficients for {n} samples: no residual degrees of freedom; "
            "limma needs more samples than coefficients"
        )
        raise DesignError(msg)


def _householder(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR of every ``a[:, :, g]`` (``(n, p, G or 1)``), applied to ``b`` (``(n, G)``).

    LINPACK's ``dqrdc2``/``dqrsl`` steps (what R's ``lm.fit`` and ``lm.wfit``
    run), vectorized over genes on the last axis: returns ``R``
    (``(p, p, G or 1)``) and the effects ``Q' b`` (``(n, G)``).
    """
    a = a.copy()
    b = b.copy()
    p = a.shape[1]
    r = np.zeros((p, p, a.shape[2]))
    for k in range(p):
        x = a[k:, k, :]
        norm = np.sqrt((x * x).sum(axis=0))
        norm = np.where(x[0] < 0, -norm, norm)
        v = x / np.where(norm == 0.0, 1.0, norm)
        v[0] += 1.0
        if k + 1 < p:
            rest = a[k:, k + 1 :, :]
            rest -= v[:, None, :] * ((v[:, None, :] * rest).sum(axis=0) / v[0])
            r[k, k + 1 :] = rest[0]
        b[k:] -= v * ((v * b[k:]).sum(axis=0) / v[0])
        r[k, k] = -norm
    return r, b


def _back_substitute(r: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Solve ``R x = y`` for upper triangular ``r`` (``(p, p, G or 1)``) and ``y`` (``(p, ..., G)``)."""
    p = r.shape[0]
    x = np.zeros(np.broadcast_shapes(y.shape, (p,) + (1,) * (y.ndim - 2) + r.shape[2:]))
    extra = (slice(None),) + (None,) * (y.ndim - 2)
    for k in range(p - 1, -1, -1):
        known = (r[k, k + 1 :][extra] * x[k + 1 :]).sum(axis=0) if k + 1 < p else 0.0
        x[k] = (y[k] - known) / r[k, k]
    return x


def _unscaled_sd(r: np.ndarray) -> np.ndarray:
    """``sqrt(diag((R'R)^-1))`` from the rows of ``R^-1``: the unscaled standard errors, ``(p, G)``."""
    p = r.shape[0]
    r_inv = _back_substitute(r, np.eye(p)[:, :, None])
    sd: np.ndarray = np.sqrt((r_inv**2).sum(axis=1))
    return sd


def lm_fit(
    expression: np.ndarray,
    design: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    names: tuple[str, ...] = (),
) -> LinearFit:
    """Fit ``expression[g] ~ design`` for every gene ``g``, weighted if ``weights`` is given.

    As R's ``lm.fit``/``lm.wfit``: a Householder QR of ``sqrt(w_g) X``, the
    coefficients by back-substitution and ``sigma`` from the effects beyond
    the rank.

    Parameters
    ----------
    expression
        Genes x samples (log-CPM).
    design
        Samples x coefficients, full column rank.
    weights
        Genes x samples precision weights, all > 0; None for ordinary least squares.
    names
        Coefficient names, one per design column.

    Returns
    -------
    LinearFit

    Raises
    ------
    DesignError
        When the design is not valid (see :func:`validate_design`), or the
        weights are not positive or not shaped like the expression.

    Examples
    --------
    >>> x = np.column_stack([np.ones(4), [0.0, 0.0, 1.0, 1.0]])
    >>> fit = lm_fit(np.array([[1.0, 3.0, 4.0, 6.0]]), x)
    >>> np.round(fit.coefficients, 12).tolist(), fit.df_residual.tolist()
    ([[2.0, 3.0]], [2.0])
    """
    e = np.asarray(expression, dtype=np.float64)
    x = np.asarray(design, dtype=np.float64)
    validate_design(x, names=names)
    n, p = x.shape
    if weights is None:
        r, effects = _householder(x[:, :, None], e.T)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != e.shape or not (w > 0).all():
            msg = f"weights must be positive and shaped like the expression {e.shape}, found {w.shape}"
            raise DesignError(msg)
        sw = np.sqrt(w.T)
        r, effects = _householder(x[:, :, None] * sw[:, None, :], sw * e.T)
    beta = _back_substitute(r, effects[:p]).T
    stdev = np.broadcast_to(_unscaled_sd(r).T, beta.shape).copy()
    sigma = np.sqrt((effects[p:] ** 2).mean(axis=0))
    r_x, _ = _householder(x[:, :, None], np.zeros((n, 1)))
    r_x_inv = _back_substitute(r_x, np.eye(p)[:, :, None])[:, :, 0]
    return LinearFit(
        coefficients=beta,
        stdev_unscaled=stdev,
        sigma=sigma,
        df_residual=np.full(e.shape[0], float(n - p)),
        amean=e.mean(axis=1),
        cov_coefficients=r_x_inv @ r_x_inv.T,
        names=names or tuple(f"x{k + 1}" for k in range(p)),
    )


def _cov2cor(cov: np.ndarray) -> np.ndarray:
    scale: np.ndarray = np.sqrt(1.0 / np.diag(cov))
    cor: np.ndarray = scale[:, None] * cov * scale[None, :]
    np.fill_diagonal(cor, 1.0)
    return cor


def contrasts_fit(fit: LinearFit, contrast: np.ndarray, *, name: str) -> LinearFit:
    """The fit of one contrast ``contrast @ coefficients``, as limma's ``contrasts.fit``.

    With weights, limma's standard error of a contrast of non-orthogonal
    coefficients is an approximation that uses the unweighted correlation of
    the coefficients; it is reproduced here exactly.

    Parameters
    ----------
    fit
        The fits of the design's coefficients.
    contrast
        One weight per coefficient.
    name
        The contrast's name.

    Returns
    -------
    LinearFit
        With the one contrast as its coefficient.

    Raises
    ------
    DesignError
        When ``contrast`` does not have one weight per coefficient, or all are zero.

    Examples
    --------
    >>> x = np.column_stack([np.ones(4), [0.0, 0.0, 1.0, 1.0]])
    >>> fit = lm_fit(np.array([[1.0, 3.0, 4.0, 6.0]]), x)
    >>> contrasts_fit(fit, np.array([1.0, 1.0]), name="b").coefficients.tolist()
    [[5.0]]
    """
    c = np.asarray(contrast, dtype=np.float64)
    if c.shape != (fit.coefficients.shape[1],):
        msg = f"contrast has {c.size} weights for {fit.coefficients.shape[1]} coefficients {list(fit.names)}"
        raise DesignError(msg)
    if not c.any():
        msg = "contrast has only zero weights; give at least one non-zero weight"
        raise DesignError(msg)
    used = np.flatnonzero(c != 0.0)
    c_used = c[used]
    cor = _cov2cor(fit.cov_coefficients)[np.ix_(used, used)]
    coefficients = fit.coefficients[:, used] @ c_used
    u = fit.stdev_unscaled[:, used]
    orthogonal = cor.shape[0] < 2 or bool(
        np.all(np.abs(cor[np.tril_indices_from(cor, -1)]) < 1e-14)
    )
    if orthogonal:
        stdev = np.sqrt((u**2) @ (c_used**2))
    else:
        uc = u * c_used
        stdev = np.sqrt(np.einsum("gi,ij,gj->g", uc, cor, uc))
    cov = fit.cov_coefficients
    return LinearFit(
        coefficients=coefficients[:, None],
        stdev_unscaled=stdev[:, None],
        sigma=fit.sigma,
        df_residual=fit.df_residual,
        amean=fit.amean,
        cov_coefficients=np.array([[c @ cov @ c]]),
        names=(name,),
    )
