"""``run_limma_voom``: the limma-voom pipeline of edgeR and limma on a count matrix.

:func:`run_limma_voom` returns the top table, a plain :class:`pandas.DataFrame`;
:func:`limma_voom_result` runs the same pipeline and returns the
:class:`~cytepool.de.LimmaResult` that holds the table with voom's weights,
the library sizes, TMM factors, empirical Bayes prior and settings. (The rest
is not kept in ``DataFrame.attrs``: pandas deep-copies attrs on most
operations, ``pd.concat`` compares them, and ``to_parquet`` writes them as
JSON, which voom's matrices and the prior are not.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import pandas as pd

from cytepool._versions import package_version
from cytepool.de.design import (
    Comparison,
    ContrastLike,
    ContrastList,
    DesignLike,
    design_matrix,
    is_contrast_list,
    resolve_tests,
)
from cytepool.de.ebayes import ebayes
from cytepool.de.filter import filter_by_expr as filter_genes
from cytepool.de.lmfit import LinearFit, contrasts_fit, lm_fit, validate_design
from cytepool.de.result import EBayesPrior, LimmaResult, VoomTrend
from cytepool.de.tmm import calc_norm_factors
from cytepool.de.toptable import top_table
from cytepool.de.voom import VoomFit, voom
from cytepool.errors import DesignError, LimmaError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cytepool.de.result import CubeSource

__all__ = ["Normalization", "limma_voom_result", "run_limma_voom"]

Normalization = Literal["TMM", "none"]

SPAN = 0.5
"""voom's lowess span."""


def parse_normalization(normalization: object) -> Normalization:
    """``"TMM"`` or ``"none"``, checked.

    Parameters
    ----------
    normalization
        What was passed as ``normalization``.

    Returns
    -------
    str
        ``"TMM"`` or ``"none"``.

    Raises
    ------
    DesignError
        For anything else; the message names what was given.
    """
    if normalization == "TMM":
        return "TMM"
    if normalization == "none":
        return "none"
    msg = f"normalization must be 'TMM' or 'none', found {normalization!r}"
    raise DesignError(msg)


def parse_counts(counts: object) -> pd.DataFrame:
    """``counts`` checked: a DataFrame of finite, non-negative numbers with unique labels.

    Parameters
    ----------
    counts
        What was passed as ``counts`` (genes x samples).

    Returns
    -------
    pandas.DataFrame
        ``counts`` itself.

    Raises
    ------
    LimmaError
        When ``counts`` is not a DataFrame, repeats a label, holds values that
        are not finite non-negative numbers, or has a sample without counts.
    """
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
    columns: list[str],
    normalization: str,
    filter_by_expr: bool,
) -> dict[str, Any]:
    """The JSON settings of a fit, all but its ``"test"`` entry (:func:`comparison_settings`).

    Parameters
    ----------
    design
        The formula, or a design matrix (recorded as ``"matrix"``).
    columns
        The design column names.
    normalization, filter_by_expr
        As given to :func:`run_limma_voom`.

    Returns
    -------
    dict
    """
    return {
        "method": "limma-voom",
        "design": design if isinstance(design, str) else "matrix",
        "design_columns": columns,
        "normalization": normalization,
        "filter_by_expr": filter_by_expr,
        "lib_size": "column sums of the kept genes",
        "span": SPAN,
        "cytepool_version": package_version("cytepool"),
    }


def comparison_settings(test: Comparison, columns: Sequence[str]) -> dict[str, Any]:
    """The ``"test"`` entry of a result's settings: the name and the coefficient or contrast weights.

    Parameters
    ----------
    test
        The coefficient or contrast tested.
    columns
        The design columns it was resolved on.

    Returns
    -------
    dict
        ``{"name": ..., "coef": ..., "contrast": ...}`` (see :meth:`Comparison.to_json`).
    """
    return {"name": test.name, **test.to_json(columns)}


@dataclass(frozen=True, kw_only=True, eq=False)
class _Voomed:
    """The pipeline up to lmFit, shared by every coefficient or contrast tested on it."""

    design: pd.DataFrame
    keep: pd.Series
    genes: pd.Index
    samples: pd.Index
    lib_size: np.ndarray
    factors: np.ndarray
    voom: VoomFit
    fit: LinearFit


def _voom_and_fit(
    counts: pd.DataFrame,
    design: pd.DataFrame,
    *,
    normalization: Normalization,
    filter_by_expr: bool,
) -> _Voomed:
    x = design.to_numpy(dtype=np.float64)
    names = tuple(str(c) for c in design.columns)
    validate_design(x, names=names)
    y = counts.to_numpy(dtype=np.float64)
    keep = filter_genes(y, design=x) if filter_by_expr else np.ones(y.shape[0], dtype=bool)
    y = y[keep]
    if y.shape[0] < 2:
        msg = f"{int(keep.sum())} gene(s) left after filtering; voom needs at least two"
        raise LimmaError(msg)
    lib_size = y.sum(axis=0)
    factors = (
        calc_norm_factors(y, lib_size=lib_size) if normalization == "TMM" else np.ones(y.shape[1])
    )
    v = voom(y, x, lib_size=lib_size * factors, span=SPAN)
    return _Voomed(
        design=design,
        keep=pd.Series(keep, index=counts.index, name="kept"),
        genes=counts.index[keep],
        samples=counts.columns,
        lib_size=lib_size,
        factors=factors,
        voom=v,
        fit=lm_fit(v.expression, x, weights=v.weights, names=names),
    )


def _tested(
    voomed: _Voomed, test: Comparison, *, settings: Mapping[str, Any], cube: CubeSource | None
) -> LimmaResult:
    """contrasts.fit (or the coefficient alone), eBayes and topTable of one test."""
    fit, v, genes, samples = voomed.fit, voomed.voom, voomed.genes, voomed.samples
    tested = (
        fit.column(int(test.coef or 0))
        if test.contrast is None
        else contrasts_fit(fit, np.asarray(test.contrast), name=test.name)
    )
    eb = ebayes(tested)
    return LimmaResult(
        table=top_table(tested, eb, coef=0, genes=genes),
        settings={**settings, "test": comparison_settings(test, fit.names)},
        design=voomed.design,
        lib_size=pd.Series(voomed.lib_size, index=samples, name="lib_size"),
        norm_factors=pd.Series(voomed.factors, index=samples, name="norm_factors"),
        prior=EBayesPrior(
            df_prior=eb.df_prior, s2_prior=eb.s2_prior, var_prior=float(eb.var_prior[0])
        ),
        kept=voomed.keep,
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


def fit_limma_voom(
    counts: pd.DataFrame,
    design: pd.DataFrame,
    *,
    tests: Sequence[Comparison],
    normalization: Normalization,
    filter_by_expr: bool,
    settings: Mapping[str, Any],
    cube: CubeSource | None = None,
) -> list[LimmaResult]:
    """The pipeline on checked inputs: filter, library sizes, TMM, voom, lmFit, then each test.

    voom and lmFit run once; each coefficient or contrast then goes through
    ``contrasts.fit``, ``eBayes`` and ``topTable`` on its own, which gives what
    R gives for each column of a contrast matrix (eBayes's prior depends on the
    residual variances only, and ``var.prior`` is per column).

    Parameters
    ----------
    counts
        Checked counts (:func:`parse_counts`), genes x samples.
    design
        The design matrix, samples (in the order of ``counts``' columns) x coefficients.
    tests
        The coefficients or contrasts, resolved on ``design``'s columns.
    normalization, filter_by_expr
        As given to :func:`run_limma_voom`.
    settings
        The settings every result records (:func:`base_settings`); each adds its ``"test"``.
    cube
        The cube source of the fit, if any.

    Returns
    -------
    list of LimmaResult
        One per test, in order.

    Raises
    ------
    DesignError
        When the design is rank deficient or leaves no residual degrees of freedom.
    LimmaError
        When fewer than two genes are left after filtering, or eBayes cannot estimate its prior.
    """
    voomed = _voom_and_fit(
        counts, design, normalization=normalization, filter_by_expr=filter_by_expr
    )
    return [_tested(voomed, test, settings=settings, cube=cube) for test in tests]


@overload
def limma_voom_result(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastList,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> dict[str, LimmaResult]: ...


@overload
def limma_voom_result(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | None = None,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> LimmaResult: ...


def limma_voom_result(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | ContrastList | None = None,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> LimmaResult | dict[str, LimmaResult]:
    """The limma-voom result object of :func:`run_limma_voom`: its table and everything behind it.

    Parameters
    ----------
    counts, samples, design, coef, contrast, normalization, filter_by_expr
        As in :func:`run_limma_voom`.

    Returns
    -------
    LimmaResult or dict of str to LimmaResult
        ``.table`` (what :func:`run_limma_voom` returns), voom's ``weights``,
        ``E`` and trend, ``lib_size``, ``norm_factors``, ``prior`` (d0, s0²,
        v0), ``design``, ``kept``, ``fit`` and ``settings``. With a list of
        contrasts, a dict from each expression, in list order, to its result.

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
    >>> samples = pd.DataFrame({"group": list("AABBCC")}, index=[f"s{i}" for i in range(6)])
    >>> counts = pd.DataFrame(rng.poisson(100, size=(200, 6)), columns=samples.index)
    >>> result = limma_voom_result(counts, samples, design="~ 0 + group", contrast="groupB-groupC")
    >>> result.settings["test"]["contrast"]["weights"]
    {'groupB': 1.0, 'groupC': -1.0}
    >>> result.weights.shape, result.lib_size.size, round(result.prior.df_prior, 3) > 0
    ((200, 6), 6, True)
    """
    counts = parse_counts(counts)
    normalization = parse_normalization(normalization)
    sample_table = _samples_for(counts, samples)
    matrix = design_matrix(design, sample_table)
    columns = [str(c) for c in matrix.columns]
    tests = resolve_tests(columns, coef=coef, contrast=contrast)
    results = fit_limma_voom(
        counts,
        matrix,
        tests=tests,
        normalization=normalization,
        filter_by_expr=bool(filter_by_expr),
        settings=base_settings(
            design=design,
            columns=columns,
            normalization=normalization,
            filter_by_expr=bool(filter_by_expr),
        ),
    )
    if is_contrast_list(contrast):
        return {test.name: result for test, result in zip(tests, results, strict=True)}
    return results[0]


@overload
def run_limma_voom(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastList,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> dict[str, pd.DataFrame]: ...


@overload
def run_limma_voom(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | None = None,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> pd.DataFrame: ...


def run_limma_voom(
    counts: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | ContrastList | None = None,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = False,
) -> pd.DataFrame | dict[str, pd.DataFrame]:
    """Differential expression by limma-voom, as edgeR and limma compute it in R: the top table.

    The steps of the R pipeline ``DGEList -> filterByExpr -> calcNormFactors
    -> voom -> lmFit -> [contrasts.fit] -> eBayes -> topTable``: genes are
    filtered with the design (``filterByExpr(y, design=design)``), library
    sizes are then recomputed from the kept genes, TMM factors scale them
    (``normalization="TMM"``), voom fits its trend with a lowess of span 0.5,
    and p-values are adjusted by Benjamini-Hochberg over the kept genes.
    voom's weights, the library sizes, TMM factors and empirical Bayes prior
    are in the result object that :func:`limma_voom_result` returns for the
    same arguments.

    Parameters
    ----------
    counts
        Raw counts, genes x samples, with unique gene and sample labels.
    samples
        One row per sample, indexed by the column labels of ``counts``.
    design
        A formula over the columns of ``samples`` (``"~ condition + donor"``,
        ``"~ 0 + group"``; text columns become factors with sorted levels, the
        first the reference) or a design-matrix DataFrame indexed by sample.
    coef
        The design column to test, by name or 0-based position; the last
        column by default. With ``"~ condition + donor"`` pass
        ``coef="conditionstim"``, or write ``"~ donor + condition"``.
        ``(Intercept)`` is tested only when named (``coef="(Intercept)"``):
        with ``"~ 1"`` and no ``coef`` a :class:`~cytepool.errors.DesignError`
        is raised.
    contrast
        Instead of ``coef``, a contrast of the design columns: an R expression
        as ``limma::makeContrasts`` takes it (``"groupB-groupC"``,
        ``"(groupA+groupB)/2-groupC"``; names that are not R names in
        backticks), a mapping ``{"conditionB": -1, "conditionC": 1}`` or one
        weight per column. A list of expressions tests each, as R's
        ``contrasts.fit`` with their contrast matrix, then ``eBayes`` and
        ``topTable(coef=j)`` for each column ``j``.
    normalization
        ``"TMM"`` (edgeR's calcNormFactors) or ``"none"``.
    filter_by_expr
        Drop lowly expressed genes with edgeR's filterByExpr first.

    Returns
    -------
    pandas.DataFrame or dict of str to pandas.DataFrame
        R's ``topTable(..., number=Inf, sort.by="none")``: indexed by gene in
        input order (filtered genes left out), columns ``logFC``, ``AveExpr``,
        ``t``, ``P.Value``, ``adj.P.Val``, ``B``. With a list of contrasts, a
        dict from each expression, in list order, to its table.

    Raises
    ------
    DesignError
        For a design that cannot be fitted, or a coefficient or contrast it
        lacks or that does not parse (the message names the design's columns).
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
    >>> table = run_limma_voom(counts, samples, design="~ donor + condition")
    >>> list(table.columns)
    ['logFC', 'AveExpr', 't', 'P.Value', 'adj.P.Val', 'B']
    >>> tables = run_limma_voom(
    ...     counts, samples, design="~ 0 + donor", contrast=["donord2-donord1", "donord3-donord1"]
    ... )
    >>> list(tables)
    ['donord2-donord1', 'donord3-donord1']
    """
    result = limma_voom_result(
        counts,
        samples,
        design=design,
        coef=coef,
        contrast=contrast,
        normalization=normalization,
        filter_by_expr=filter_by_expr,
    )
    if isinstance(result, dict):
        return {name: r.table for name, r in result.items()}
    return result.table
