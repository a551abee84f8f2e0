"""limma's ``topTable`` for one coefficient, and Benjamini-Hochberg adjustment as ``p.adjust``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from cytepool.de.ebayes import EBayesFit
    from cytepool.de.lmfit import LinearFit

__all__ = ["TOP_TABLE_COLUMNS", "p_adjust_bh", "top_table"]

TOP_TABLE_COLUMNS: Final = ("logFC", "AveExpr", "t", "P.Value", "adj.P.Val", "B")
"""The columns of a top table, named as limma names them."""


def p_adjust_bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values, as R's ``p.adjust(p, "BH")``; NaN stays NaN.

    NaN values are left out of the number of tests, as R leaves out ``NA``.

    Parameters
    ----------
    p
        p-values, any shape.

    Returns
    -------
    numpy.ndarray
        The adjusted values, float64, shaped like ``p``.

    Examples
    --------
    >>> p_adjust_bh(np.array([0.01, 0.04, 0.03, 0.2])).round(6).tolist()
    [0.04, 0.053333, 0.053333, 0.2]
    """
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    present = ~np.isnan(p)
    values = p[present]
    n = values.size
    if n == 0:
        return out
    order = np.argsort(-values, kind="stable")
    i = np.arange(n, 0, -1, dtype=np.float64)
    adjusted = np.minimum(1.0, np.minimum.accumulate(n / i * values[order]))
    result = np.empty(n)
    result[order] = adjusted
    out[present] = result
    return out


def top_table(fit: LinearFit, eb: EBayesFit, *, coef: int, genes: pd.Index) -> pd.DataFrame:
    """The statistics of coefficient ``coef`` for every gene, in gene order (``sort.by="none"``).

    Parameters
    ----------
    fit
        The linear fits.
    eb
        Their moderated statistics (:func:`~cytepool.de.ebayes.ebayes` of ``fit``).
    coef
        The 0-based coefficient position.
    genes
        The gene labels, one per fit.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``genes``, columns :data:`TOP_TABLE_COLUMNS`; ``adj.P.Val``
        is Benjamini-Hochberg over these genes.

    Examples
    --------
    >>> from cytepool.de.ebayes import ebayes
    >>> from cytepool.de.lmfit import lm_fit
    >>> rng = np.random.default_rng(1)
    >>> x = np.column_stack([np.ones(6), [0.0, 0, 0, 1, 1, 1]])
    >>> fit = lm_fit(rng.normal(size=(50, 6)), x)
    >>> table = top_table(fit, ebayes(fit), coef=1, genes=pd.RangeIndex(50, name="gene"))
    >>> list(table.columns)
    ['logFC', 'AveExpr', 't', 'P.Value', 'adj.P.Val', 'B']
    """
    p_value = eb.p_value[:, coef]
    return pd.DataFrame(
        {
            "logFC": fit.coefficients[:, coef],
            "AveExpr": fit.amean,
            "t": eb.t[:, coef],
            "P.Value": p_value,
            "adj.P.Val": p_adjust_bh(p_value),
            "B": eb.lods[:, coef],
        },
        index=genes,
    )
