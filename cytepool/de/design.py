"""Design matrices as R's ``model.matrix`` makes them, and the coefficient or contrast to test.

A formula is expanded by formulaic with R's conventions: treatment coding
against the first level, text columns turned into factors whose levels are
sorted (code-point order, R's ``factor()`` in the C locale), categorical
columns keeping their category order (unused categories dropped), booleans
as factors with levels ``FALSE``/``TRUE``, and columns named like R's:
``(Intercept)``, ``conditionstim``, ``donorD2``, ``conditionstim:donorD2``.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd

from cytepool.de.contrasts import INTERCEPT, parse_contrast
from cytepool.errors import DesignError

if TYPE_CHECKING:
    from formulaic import ModelSpec

__all__ = [
    "Comparison",
    "ContrastLike",
    "ContrastList",
    "DesignLike",
    "design_matrix",
    "is_contrast_list",
    "resolve_test",
    "resolve_tests",
]

DesignLike: TypeAlias = str | pd.DataFrame
"""A formula such as ``"~ condition + donor"`` or a design matrix (rows = samples)."""

ContrastLike: TypeAlias = str | Mapping[str, float] | Sequence[float] | np.ndarray | pd.Series
"""One contrast: an R expression (``"groupB-groupC"``, see :mod:`cytepool.de.contrasts`), or
weights over the design columns, as a mapping ``{column: weight}`` or one weight per column."""

ContrastList: TypeAlias = list[str] | tuple[str, ...]
"""Several contrasts, one R expression each: the columns of R's ``makeContrasts``."""


def _as_factor(column: pd.Series) -> pd.Series:
    """A text, categorical or boolean column as a categorical with R's levels."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.remove_unused_categories()
    if pd.api.types.is_bool_dtype(column.dtype):
        text = column.map({True: "TRUE", False: "FALSE"})
        levels = [v for v in ("FALSE", "TRUE") if (text == v).any()]
        return pd.Series(pd.Categorical(text, categories=levels), index=column.index)
    values = column.astype(object)
    levels = sorted({v for v in values if isinstance(v, str)})
    return pd.Series(pd.Categorical(values, categories=levels), index=column.index)


def _prepare(samples: pd.DataFrame) -> pd.DataFrame:
    data = samples.copy()
    for name in data.columns:
        column = data[name]
        dtype = column.dtype
        if (
            isinstance(dtype, pd.CategoricalDtype)
            or pd.api.types.is_bool_dtype(dtype)
            or pd.api.types.is_string_dtype(dtype)
            or pd.api.types.is_object_dtype(dtype)
        ):
            data[name] = _as_factor(column)
    return data


def _r_names(spec: ModelSpec) -> dict[str, str]:
    """Map formulaic's column names (``c[T.b]``, ``c[b]``) to R's (``cb``)."""
    state = spec.encoder_state
    names: dict[str, str] = {"Intercept": "(Intercept)"}
    for structure in spec.structure:
        for scoped in structure.scoped_terms:
            pieces = []
            for scoped_factor in scoped.factors:
                expr = str(scoped_factor.factor)
                kind, detail = state.get(expr, (None, {}))
                if getattr(kind, "value", None) == "categorical":
                    levels = [str(v) for v in detail["categories"]]
                    if scoped_factor.reduced:
                        if len(levels) < 2:
                            found = f" ({levels[0]!r})" if levels else ""
                            msg = (
                                f"factor {expr!r} has {len(levels)} level{found} among the samples; "
                                "a factor in a design needs at least two levels"
                            )
                            raise DesignError(msg)
                        pieces.append([(f"{expr}[T.{v}]", f"{expr}{v}") for v in levels[1:]])
                    else:
                        pieces.append([(f"{expr}[{v}]", f"{expr}{v}") for v in levels])
                else:
                    pieces.append([(expr, expr)])
            for combo in itertools.product(*pieces):
                names[":".join(p[0] for p in combo)] = ":".join(p[1] for p in combo)
    return names


def _from_formula(formula: str, samples: pd.DataFrame) -> pd.DataFrame:
    import formulaic  # noqa: PLC0415 (imported when a formula is given)

    try:
        matrix = formulaic.model_matrix(formula, _prepare(samples), na_action="raise")
    except DesignError:
        raise
    except Exception as error:
        msg = f"cannot build a design from formula {formula!r} over sample columns {list(samples.columns)}: {error}"
        raise DesignError(msg) from error
    names = _r_names(matrix.model_spec)
    frame = pd.DataFrame(
        np.asarray(matrix, dtype=np.float64),
        index=samples.index,
        columns=[names.get(str(c), str(c)) for c in matrix.columns],
    )
    if frame.columns.has_duplicates:
        msg = f"formula {formula!r} gives duplicate design columns {list(frame.columns)}"
        raise DesignError(msg)
    return frame


def design_matrix(design: object, samples: pd.DataFrame) -> pd.DataFrame:
    """The design matrix over the rows of ``samples``, as R's ``model.matrix`` names it.

    Parameters
    ----------
    design : str or pandas.DataFrame
        A formula (``"~ condition + donor"``) evaluated on the columns of
        ``samples``, or a numeric design-matrix DataFrame whose index holds the
        sample names (reordered to ``samples.index``).
    samples
        One row per sample, indexed by sample name.

    Returns
    -------
    pandas.DataFrame
        Float64, indexed like ``samples``, one column per coefficient.

    Raises
    ------
    DesignError
        When the formula cannot be evaluated on the sample columns, a factor
        has one level, the formula gives duplicate columns, or a design-matrix
        DataFrame lacks a sample row, repeats one or is not numeric.

    Examples
    --------
    >>> samples = pd.DataFrame(
    ...     {"condition": ["ctrl", "stim", "ctrl", "stim"], "donor": ["d1", "d1", "d2", "d2"]},
    ...     index=["a", "b", "c", "d"],
    ... )
    >>> design_matrix("~ condition + donor", samples).columns.tolist()
    ['(Intercept)', 'conditionstim', 'donord2']
    """
    if isinstance(design, str):
        return _from_formula(design, samples)
    if not isinstance(design, pd.DataFrame):
        msg = f"design: expected a formula string or a design-matrix DataFrame, found {type(design).__name__}"
        raise DesignError(msg)
    missing = [s for s in samples.index if s not in design.index]
    if missing or design.index.has_duplicates:
        msg = f"design matrix rows must be named by sample, once each; missing {missing[:5]}" + (
            " and duplicated names" if design.index.has_duplicates else ""
        )
        raise DesignError(msg)
    frame = design.loc[samples.index]
    try:
        values = frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as error:
        msg = (
            f"design matrix must be numeric, found dtypes {sorted({str(d) for d in frame.dtypes})}"
        )
        raise DesignError(msg) from error
    return pd.DataFrame(values, index=samples.index, columns=[str(c) for c in frame.columns])


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """What is tested: one design column (``coef``) or a contrast of columns.

    Attributes
    ----------
    name
        The column name, or the contrast's name (the expression as written,
        or one made like R's ``makeContrasts`` from a mapping or vector).
    coef
        The 0-based position of the tested column; None for a contrast.
    contrast
        One weight per design column; None for a coefficient.
    """

    name: str
    coef: int | None
    contrast: tuple[float, ...] | None

    def to_json(self, columns: Sequence[str]) -> dict[str, Any]:
        """The JSON form kept in a result's settings.

        Parameters
        ----------
        columns
            The design columns the test was resolved on.

        Returns
        -------
        dict
            ``{"coef": name, "contrast": None}`` or ``{"coef": None, "contrast":
            {"name": ..., "weights": {column: weight}}}`` (non-zero weights only).
        """
        if self.contrast is None:
            return {"coef": self.name, "contrast": None}
        weights = {c: w for c, w in zip(columns, self.contrast, strict=True) if w != 0.0}
        return {"coef": None, "contrast": {"name": self.name, "weights": weights}}

    def on_columns(self, source: Sequence[str], target: Sequence[str]) -> Comparison:
        """The same test on a design with columns ``target``, matched by column name.

        A cube group's design is built from the samples the group keeps, so it
        may lack columns of the design of all samples (``source``).

        Parameters
        ----------
        source
            The design columns this test was resolved on.
        target
            The columns of the design to test on.

        Returns
        -------
        Comparison
            The same name, with the coefficient position or the weights of ``target``.

        Raises
        ------
        DesignError
            When the tested column, or a column with a non-zero weight, is not in ``target``.

        Examples
        --------
        >>> test = resolve_test(["(Intercept)", "donord2", "conditionstim"], coef=None, contrast=None)
        >>> test.on_columns(["(Intercept)", "donord2", "conditionstim"], ["(Intercept)", "conditionstim"])
        Comparison(name='conditionstim', coef=1, contrast=None)
        """
        target = list(target)
        if self.contrast is None:
            missing = [self.name] if self.name not in target else []
        else:
            weights = dict(zip(source, self.contrast, strict=True))
            missing = [c for c, w in weights.items() if w != 0.0 and c not in target]
        if missing:
            msg = (
                f"{self.name!r} needs design columns {missing}, which this design lacks "
                f"(its samples have no such level); its columns are {target}"
            )
            raise DesignError(msg)
        if self.contrast is None:
            return Comparison(name=self.name, coef=target.index(self.name), contrast=None)
        return Comparison(
            name=self.name,
            coef=None,
            contrast=tuple(weights.get(c, 0.0) for c in target),
        )


def _contrast_name(terms: Sequence[tuple[str, float]]) -> str:
    """R's ``makeContrasts`` style: ``conditionC-conditionB``, ``0.5*a+0.5*b``."""
    parts = []
    for column, w in terms:
        if w == 0.0:
            continue
        size = abs(w)
        factor = "" if size == 1.0 else f"{size:g}*"
        parts.append(f"{'-' if w < 0 else '+'}{factor}{column}")
    return "".join(parts).removeprefix("+")


def _resolve_coef(columns: list[str], coef: object) -> Comparison:
    if isinstance(coef, str):
        if coef not in columns:
            msg = f"coef {coef!r} is not a design column; the columns are {columns}"
            raise DesignError(msg)
        return Comparison(name=coef, coef=columns.index(coef), contrast=None)
    if coef is None:
        position = len(columns) - 1
    elif isinstance(coef, bool) or not isinstance(coef, numbers.Integral):
        msg = f"coef must be a column name or a 0-based position, found {coef!r}"
        raise DesignError(msg)
    else:
        position = int(coef)
    if not -len(columns) <= position < len(columns):
        msg = f"coef position {position} is outside the {len(columns)} design columns {columns}"
        raise DesignError(msg)
    position %= len(columns)
    if columns[position] == INTERCEPT:
        msg = (
            f"coef: the coefficient to test would be {INTERCEPT!r}, which tests whether mean "
            "log-expression is zero, not a difference between samples; the design's columns are "
            f"{columns}. Name the coefficient to test (coef='...', --coef NAME on the command "
            f"line; coef={INTERCEPT!r} to test the intercept on purpose) or pass a contrast"
        )
        raise DesignError(msg)
    return Comparison(name=columns[position], coef=position, contrast=None)


def _weight(value: object, *, column: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"contrast weight of {column!r}: expected a number, found {value!r}; give each design column a number"
        raise DesignError(msg)
    return float(value)


def _resolve_contrast(columns: list[str], contrast: object) -> Comparison:
    if isinstance(contrast, str):
        weights = parse_contrast(contrast, columns)
        return Comparison(name=contrast, coef=None, contrast=tuple(weights.tolist()))
    if is_contrast_list(contrast):
        msg = (
            f"contrast: expected one contrast here, found the list {contrast!r}; "
            "pass a list of expressions to run_limma_voom or limma_voom"
        )
        raise DesignError(msg)
    if isinstance(contrast, pd.Series):
        contrast = contrast.to_dict()
    if isinstance(contrast, Mapping):
        unknown = [k for k in contrast if k not in columns]
        if unknown:
            msg = (
                f"contrast names {unknown}, which are not design columns; the columns are {columns}"
            )
            raise DesignError(msg)
        weights = np.array([_weight(contrast.get(c, 0.0), column=c) for c in columns])
        terms = [(str(k), float(v)) for k, v in contrast.items()]
    else:
        try:
            weights = np.asarray(contrast, dtype=np.float64)
        except (TypeError, ValueError) as error:
            msg = f"contrast must be a mapping of design columns to weights or a vector, found {contrast!r}"
            raise DesignError(msg) from error
        if weights.shape != (len(columns),):
            msg = f"contrast has {weights.size} weights for the {len(columns)} design columns {columns}"
            raise DesignError(msg)
        terms = list(zip(columns, weights.tolist(), strict=True))
    if not all(math.isfinite(w) for w in weights.tolist()) or not weights.any():
        msg = f"contrast weights must be finite and not all zero, found {weights.tolist()}"
        raise DesignError(msg)
    return Comparison(name=_contrast_name(terms), coef=None, contrast=tuple(weights.tolist()))


def is_contrast_list(contrast: object) -> bool:
    """Whether ``contrast`` is several contrasts: a list or tuple whose items are all strings.

    Parameters
    ----------
    contrast
        What was passed as ``contrast``.

    Returns
    -------
    bool

    Examples
    --------
    >>> is_contrast_list(["b-a", "c-a"]), is_contrast_list("b-a"), is_contrast_list([0, 1])
    (True, False, False)
    """
    return (
        isinstance(contrast, list | tuple)
        and len(contrast) > 0
        and all(isinstance(c, str) for c in contrast)
    )


def resolve_test(columns: Sequence[str], *, coef: object, contrast: object) -> Comparison:
    """The coefficient or contrast to test, checked against the design columns.

    Parameters
    ----------
    columns
        The design column names, in order.
    coef
        A column name or a 0-based position (negative counts from the end);
        the last column when both ``coef`` and ``contrast`` are None. The
        column ``(Intercept)`` is tested only when given by name.
    contrast
        An R expression over the column names (``"groupB-groupC"``,
        ``"(groupA+groupB)/2-groupC"``; see :func:`~cytepool.de.contrasts.parse_contrast`),
        a mapping of column names to weights, or one weight per column.

    Returns
    -------
    Comparison

    Raises
    ------
    DesignError
        When both ``coef`` and ``contrast`` are given, the column or position
        is not in the design, the default or the position is ``(Intercept)``,
        or the contrast does not parse, names columns the design lacks or has
        weights that are not numbers, all zero or not finite.

    Examples
    --------
    >>> cols = ["(Intercept)", "conditionstim", "donord2"]
    >>> resolve_test(cols, coef=None, contrast=None).name
    'donord2'
    >>> resolve_test(cols, coef=None, contrast={"conditionstim": 1, "donord2": -1}).name
    'conditionstim-donord2'
    >>> resolve_test(cols, coef=None, contrast="(conditionstim+donord2)/2").contrast
    (0.0, 0.5, 0.5)
    """
    if coef is not None and contrast is not None:
        msg = "give either coef or contrast, not both"
        raise DesignError(msg)
    if contrast is None:
        return _resolve_coef(list(columns), coef)
    return _resolve_contrast(list(columns), contrast)


def resolve_tests(
    columns: Sequence[str], *, coef: object, contrast: object
) -> tuple[Comparison, ...]:
    """Every test asked for: one per expression of a list of contrasts, else :func:`resolve_test`'s one.

    Parameters
    ----------
    columns
        The design column names, in order.
    coef, contrast
        As in :func:`resolve_test`; ``contrast`` may also be a list or tuple
        of R expressions, the columns of R's ``makeContrasts``.

    Returns
    -------
    tuple of Comparison
        In the order of the list, each named by its expression as written.

    Raises
    ------
    DesignError
        As :func:`resolve_test`, for each expression; and when the list is
        empty, holds something other than strings, or repeats an expression.

    Examples
    --------
    >>> cols = ["groupA", "groupB", "groupC"]
    >>> [t.contrast for t in resolve_tests(cols, coef=None, contrast=["groupB-groupC", "(groupA+groupB)/2-groupC"])]
    [(0.0, 1.0, -1.0), (0.5, 0.5, -1.0)]
    """
    if not is_contrast_list(contrast):
        if isinstance(contrast, list | tuple) and (
            not contrast or any(isinstance(c, str) for c in contrast)
        ):
            msg = (
                f"contrast: expected a list of expressions such as ['groupB-groupC', "
                f"'(groupA+groupB)/2-groupC'] or one weight per design column, found {contrast!r}"
            )
            raise DesignError(msg)
        return (resolve_test(columns, coef=coef, contrast=contrast),)
    assert isinstance(contrast, list | tuple)
    if coef is not None:
        msg = "give either coef or contrast, not both"
        raise DesignError(msg)
    repeated = sorted({c for c in contrast if contrast.count(c) > 1})
    if repeated:
        msg = f"contrast list repeats {repeated}; give each expression once"
        raise DesignError(msg)
    return tuple(resolve_test(columns, coef=None, contrast=c) for c in contrast)
