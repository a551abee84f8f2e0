"""``run_limma_voom``: the limma-voom pipeline of edgeR and limma on a count matrix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from cytepool.cube.cube import package_version
from cytepool.de.design import Comparison, ContrastLike, DesignLike, design_matrix, resolve_test
from cytepool.de.ebayes import ebayes
from cytepool.de.filter import filter_by_expr as filter_genes
from cytepool.de.lmfit import check_design, contrasts_fit, lm_fit
from cytepool.de.result import EBayesPrior, LimmaResult, VoomTrend
from cytepool.de.tmm import calc_norm_factors
from cytepool.de.toptable import top_table
from cytepool.de.voom import voom
from cytepool.errors import DesignError, LimmaError

if TYPE_CHECKING:
    from cytepool.de.result import CubeSource

__all__ = ["Normalization", "run_limma_voom"]

Normalization = Literal["TMM", "none"]

SPAN = 0.5
"""voom's lowess span."""


def parse_normalization(normalization: object) -> Normalization:
    """``"TMM"`` or ``"none"``, or :class:`DesignError` naming what was given."""
    if normalization == "TMM":
        return "TMM"
    if normalization == "none":
        return "none"
    msg = f"normalization must be 'TMM' or 'none', found {normalization!r}"
    raise DesignError(msg)


def parse_counts(counts: object) -> pd.DataFrame:
    """``counts`` checked: a DataFrame of finite, non-negative numbers with unique labels."""
    if not isinstance(counts, pd.DataFrame):
        msg = (
            f"counts: expected a pandas DataFrame (genes x samples), found {type(counts).__name__}"
        )
        raise LimmaError(msg)
    if counts.index.has_duplicates or counts.columns.has_duplicates:
        msg = "counts: gene (row) and sample (column) labels must be unique"
        raise LimmaError(msg)
    try:
        values = counts.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as error:
        msg = f"counts: expected numbers, found dtypes {sorted({str(d) for d in counts.dtypes})}"
        raise LimmaError(msg) from error
    if not np.isfinite(values).all() or (values < 0).any():
        msg = "counts: values must be finite and non-negative (raw summed counts)"
        raise LimmaError(msg)
    empty = [c for c, total in zip(counts.columns, values.sum(axis=0), strict=True) if total <= 0]
    if empty:
        msg = f"counts: samples {empty[:5]} have no counts at all; drop them"
        raise LimmaError(msg)
    return counts


def _samples_for(counts: pd.DataFrame, samples: object) -> pd.DataFrame:
    if not isinstance(samples, pd.DataFrame):
        msg = f"samples: expected a pandas DataFrame indexed by sample, found {type(samples).__name__}"
        raise LimmaError(msg)
    missing = [c for c in counts.columns if c not in samples.index]
    if missing:
        msg = f"samples: no row for count columns {missing[:5]}; index the sample table by the count columns"
        raise LimmaError(msg)
    return samples.loc[counts.columns]


def base_settings(
    *,
    design: DesignLike,
    test: Comparison,
    columns: list[str],
    normalization: str,
    filter_by_expr: bool,
) -> dict[str, Any]:
    """The JSON settings of a fit."""
    return {
        "method": "limma-voom",
        "design": design if isinstance(design, str) else "matrix",
        "design_columns": columns,
        "test": {"name": test.name, **test.to_json(columns)},
        "normalization": normalization,
        "filter_by_expr": filter_by_expr,
        "lib_size": "column sums of the kept genes",
        "span": SPAN,
        "cytepool_version": package_version(),
    }


def fit_limma_voom(
    counts: pd.DataFrame,
    design: pd.DataFrame,
    *,
    test: Comparison,
    normalization: Normalization,
    filter_by_expr: bool,
    settings: dict[str, Any],
    cube: CubeSource | None = None,
) -> LimmaResult:
    """The pipeline on checked inputs: filter, library sizes, TMM, voom, lmFit, eBayes, topTable."""
    x = design.to_numpy(dtype=np.float64)
    names = tuple(str(c) for c in design.columns)
    check_design(x, names=names)
    y = counts.to_numpy(dtype=np.float64)
    keep = filter_genes(y, design=x) if filter_by_expr else np.ones(y.shape[0], dtype=bool)
    y = y[keep]
    genes = counts.index[keep]
    if y.shape[0] < 2:
        msg = f"{int(keep.sum())} gene(s) left after filtering; voom needs at least two"
        raise LimmaError(msg)
    lib_size = y.sum(axis=0)
    factors = (
        calc_norm_factors(y, lib_size=lib_size) if normalization == "TMM" else np.ones(y.shape[1])
    )
    v = voom(y, x, lib_size=lib_size * factors, span=SPAN)
    fit = lm_fit(v.expression, x, weights=v.weights, names=names)
    column = int(test.coef or 0)
    tested = (
        fit.column(column)
        if test.contrast is None
        else contrasts_fit(fit, np.asarray(test.contrast), name=test.name)
    )
    eb = ebayes(tested)
    samples = counts.columns
    return LimmaResult(
        table=top_table(tested, eb, coef=0, genes=genes),
        settings=settings,
        design=design,
        lib_size=pd.Series(lib_size, index=samples, name="lib_size"),
        norm_factors=pd.Series(factors, index=samples, name="norm_factors"),
        prior=EBayesPrior(
            df_prior=eb.df_prior, s2_prior=eb.s2_prior, var_prior=float(eb.var_prior[0])
        ),
        kept=pd.Series(keep, index=counts.index, name="kept"),
        cube=cube,
        weights=pd.DataFrame(v.weights, index=genes, columns=samples),
        E=pd.DataFrame(v.expression, index=genes, columns=samples),
        voom_trend=VoomTrend(
            points=pd.DataFrame({"sx": v.sx, "sy": v.sy}, index=genes[v.trend_genes]),
            line=pd.DataFrame({"x": v.line_x, "y": v.line_y}),
        ),
        fit=pd.DataFrame(
            {
                "sigma": fit.sigma,
                "df.residual": fit.df_residual,
                "s2.post": eb.s2_post,
                "df.total": eb.df_total,
                "stdev.unscaled": tested.stdev_unscaled[:, 0],
                "Amean": fit.amean,
            },
            index=genes,
        ),
    )


def run_limma_voom(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | None = None,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> LimmaResult:
    """Differential expression by limma-voom, as edgeR and limma compute it in R.

    The steps of the R pipeline ``DGEList -> filterByExpr -> calcNormFactors
    -> voom -> lmFit -> [contrasts.fit] -> eBayes -> topTable``: genes are
    filtered with the design (``filterByExpr(y, design=design)``), library
    sizes are then recomputed from the kept genes, TMM factors scale them
    (``normalization="TMM"``), voom fits its trend with a lowess of span 0.5,
    and p-values are adjusted by Benjamini-Hochberg over the kept genes.

    Parameters
    ----------
    counts
        Raw counts, genes x samples, with unique gene and sample labels.
    samples
        One row per sample, indexed by the column labels of ``counts``.
    design
        A formula over the columns of ``samples`` (``"~ condition + donor"``;
        text columns become factors with sorted levels, the first the
        reference) or a design-matrix DataFrame indexed by sample.
    coef
        The design column to test, by name or 0-based position; the last
        column by default. With ``"~ condition + donor"`` pass
        ``coef="conditionstim"``, or write ``"~ donor + condition"``.
    contrast
        Instead of ``coef``: weights over the design columns, as a mapping
        ``{"conditionB": -1, "conditionC": 1}`` or one weight per column.
    normalization
        ``"TMM"`` (edgeR's calcNormFactors) or ``"none"``.
    filter_by_expr
        Drop lowly expressed genes with edgeR's filterByExpr first.

    Returns
    -------
    LimmaResult
        ``.table`` in input gene order, plus voom's weights, log-CPM, trend,
        library sizes, TMM factors, empirical Bayes prior and the settings.

    Raises
    ------
    DesignError
        For a design that cannot be fitted or a coefficient or contrast it lacks.
    LimmaError
        For malformed counts or samples.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> samples = pd.DataFrame(
    ...     {"condition": ["ctrl", "stim"] * 3, "donor": ["d1", "d1", "d2", "d2", "d3", "d3"]},
    ...     index=[f"s{i}" for i in range(6)],
    ... )
    >>> counts = pd.DataFrame(
    ...     rng.poisson(100, size=(200, 6)), index=[f"g{i}" for i in range(200)], columns=samples.index
    ... )
    >>> result = run_limma_voom(counts, samples, design="~ donor + condition")
    >>> result.settings["test"]["name"]
    'conditionstim'
    >>> list(result.table.columns)
    ['logFC', 'AveExpr', 't', 'P.Value', 'adj.P.Val', 'B']
    """
    counts = parse_counts(counts)
    normalization = parse_normalization(normalization)
    sample_table = _samples_for(counts, samples)
    matrix = design_matrix(design, sample_table)
    columns = [str(c) for c in matrix.columns]
    test = resolve_test(columns, coef=coef, contrast=contrast)
    settings = base_settings(
        design=design,
        test=test,
        columns=columns,
        normalization=normalization,
        filter_by_expr=bool(filter_by_expr),
    )
    return fit_limma_voom(
        counts,
        matrix,
        test=test,
        normalization=normalization,
        filter_by_expr=bool(filter_by_expr),
        settings=settings,
    )
