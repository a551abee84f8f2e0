"""Parsing of the plotting functions' inputs: normalised values, or a :class:`PlotInputError`."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cytearc.errors import PlotInputError

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy.typing as npt

    ValuesLike: TypeAlias = npt.ArrayLike | pd.Series[Any] | pd.Categorical | pd.Index[Any]
    """One value per cell: a sequence, an array, a Series or a categorical."""

__all__ = [
    "Categories",
    "Numbers",
    "parse_categories",
    "parse_coords",
    "parse_flag",
    "parse_metric_columns",
    "parse_thresholds",
    "parse_values",
]


@dataclass(frozen=True, kw_only=True)
class Categories:
    """Values read as categories: one code per cell, ``-1`` where the value is missing."""

    codes: npt.NDArray[np.intp]
    labels: tuple[str, ...]

    @property
    def missing(self) -> npt.NDArray[np.bool_]:
        """Mask of the cells without a category."""
        return self.codes < 0


@dataclass(frozen=True, kw_only=True)
class Numbers:
    """Values read as numbers: one float per cell, NaN where the value is missing."""

    values: npt.NDArray[np.float64]

    @property
    def missing(self) -> npt.NDArray[np.bool_]:
        """Mask of the cells without a value."""
        return np.isnan(self.values)


def _describe(value: object) -> str:
    """Short description of an input for error messages: its type, and shape when it has one."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} of shape {tuple(shape)}"
    return type(value).__name__


def parse_coords(coords: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Finite float coordinates of shape ``(n, 2)``.

    Examples
    --------
    >>> parse_coords([[0, 1], [2, 3]]).dtype
    dtype('float64')
    """
    try:
        array = np.asarray(coords, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"coords: expected a numeric array of shape (n, 2), found {_describe(coords)} that is not numeric"
        raise PlotInputError(msg) from exc
    if array.ndim != 2 or array.shape[1] != 2:
        msg = f"coords: expected an array of shape (n, 2), found shape {array.shape}; pass two columns, such as X_umap[:, :2]"
        raise PlotInputError(msg)
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        msg = f"coords: expected finite coordinates, found {int(bad.sum())} rows with NaN or infinity (first at row {int(np.argmax(bad))})"
        raise PlotInputError(msg)
    return array


def parse_values(values: ValuesLike, *, n: int, name: str = "values") -> Categories | Numbers:
    """One value per cell, read as categories or as numbers.

    Categories are pandas categoricals (in their category order), strings,
    booleans and integers (both in sorted order); numbers are floats. Missing
    values (None, NaN, ``pd.NA``) are kept as missing; the index of a
    :class:`pandas.Series` is ignored (values are matched to cells by position).

    Examples
    --------
    >>> parse_values(["b", "a", None], n=3)
    Categories(codes=array([ 1,  0, -1]), labels=('a', 'b'))
    >>> parse_values([0.5, float("nan")], n=2).values
    array([0.5, nan])
    """
    series = _as_series(values, name=name)
    if len(series) != n:
        msg = f"{name}: expected {n} values, one per cell, found {len(series)}"
        raise PlotInputError(msg)
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return _categories(series)
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        return _categories(series)
    if pd.api.types.is_float_dtype(dtype):
        return _numbers(series, name=name)
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return _from_objects(series, name=name)
    msg = f"{name}: expected strings, integers, booleans, floats or a categorical, found dtype {dtype}"
    raise PlotInputError(msg)


def _as_series(values: ValuesLike, *, name: str) -> pd.Series[Any]:
    if isinstance(values, pd.Series):
        return values.reset_index(drop=True)
    if isinstance(values, pd.Categorical | pd.Index):
        return pd.Series(values)
    # Lists stay Python objects so that numpy does not turn ["a", nan] into the strings "a", "nan".
    array = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if array.ndim != 1:
        msg = f"{name}: expected one value per cell (a 1-D sequence), found {_describe(array)}"
        raise PlotInputError(msg)
    return pd.Series(array)


def _categories(series: pd.Series[Any]) -> Categories:
    categorical = pd.Categorical(series)
    return Categories(
        codes=np.asarray(categorical.codes, dtype=np.intp),
        labels=tuple(str(label) for label in categorical.categories),
    )


def _numbers(series: pd.Series[Any], *, name: str) -> Numbers:
    floats = series.to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = int(np.isinf(floats).sum())
    if infinite:
        msg = (
            f"{name}: expected finite numbers or NaN for missing, found {infinite} infinite values"
        )
        raise PlotInputError(msg)
    return Numbers(values=floats)


_CATEGORY_KINDS = frozenset({"string", "integer", "boolean"})
_NUMBER_KINDS = frozenset({"floating", "mixed-integer-float", "decimal", "empty"})


def _from_objects(series: pd.Series[Any], *, name: str) -> Categories | Numbers:
    kind = pd.api.types.infer_dtype(series, skipna=True)
    if kind in _CATEGORY_KINDS:
        return _categories(series)
    if kind in _NUMBER_KINDS:
        return _numbers(series, name=name)
    found = sorted({type(value).__name__ for value in series[series.notna()]})
    msg = f"{name}: expected all strings or all numbers, found {', '.join(found)} ({kind}); convert them to one type first"
    raise PlotInputError(msg)


def parse_categories(values: ValuesLike, *, n: int, name: str) -> Categories:
    """Values that must be categories, such as the column to group by.

    Examples
    --------
    >>> parse_categories(["s1", "s2", "s1"], n=3, name="groupby").labels
    ('s1', 's2')
    """
    parsed = parse_values(values, n=n, name=name)
    if isinstance(parsed, Numbers):
        msg = f"{name}: expected categories (strings, integers or a categorical), found floats; convert the column with .astype('category') if it names groups"
        raise PlotInputError(msg)
    return parsed


def parse_flag(value: object, *, name: str) -> bool:
    """A boolean option, refusing truthy stand-ins such as ``"no"`` or ``1``.

    Examples
    --------
    >>> parse_flag(True, name="log")
    True
    """
    if not isinstance(value, bool | np.bool_):
        msg = f"{name}: expected True or False, found {value!r}"
        raise PlotInputError(msg)
    return bool(value)


def parse_metric_columns(frame: object, columns: object) -> tuple[str, ...]:
    """Names of numeric columns of ``frame`` to plot, checked to exist.

    Examples
    --------
    >>> parse_metric_columns(pd.DataFrame({"a": [1.0], "b": ["x"]}), ["a"])
    ('a',)
    """
    if not isinstance(frame, pd.DataFrame):
        msg = f"frame: expected a pandas DataFrame, found {_describe(frame)}"
        raise PlotInputError(msg)
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        msg = f"columns: expected a sequence of column names, found {columns!r}; wrap a single name in a list"
        raise PlotInputError(msg)
    names = tuple(columns)
    if not names:
        msg = "columns: expected at least one column name, found none"
        raise PlotInputError(msg)
    if len(set(names)) != len(names):
        msg = f"columns: expected distinct names, found {list(names)!r}"
        raise PlotInputError(msg)
    unknown = [name for name in names if name not in frame.columns]
    if unknown:
        msg = f"columns: {unknown!r} not in the frame, whose columns are {_preview(frame.columns)}; pass names of its columns"
        raise PlotInputError(msg)
    for name in names:
        dtype = frame[name].dtype
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            msg = f"frame[{name!r}]: expected numbers to draw as a violin, found dtype {dtype}"
            raise PlotInputError(msg)
    return names


def _preview(labels: pd.Index[Any], limit: int = 10) -> str:
    shown = [str(label) for label in labels[:limit]]
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return f"{shown!r}{more}"


def parse_thresholds(
    thresholds: object,
    *,
    columns: tuple[str, ...],
    log: bool,
) -> dict[str, tuple[float | None, float | None]]:
    """Lower and upper filter thresholds per plotted column.

    Examples
    --------
    >>> parse_thresholds({"n": (200, None)}, columns=("n",), log=False)
    {'n': (200.0, None)}
    """
    if thresholds is None:
        return {}
    if not isinstance(thresholds, Mapping):
        msg = f"thresholds: expected a mapping of column name to (low, high), found {_describe(thresholds)}"
        raise PlotInputError(msg)
    parsed: dict[str, tuple[float | None, float | None]] = {}
    for key, bounds in thresholds.items():
        if key not in columns:
            msg = f"thresholds: {key!r} is not one of the plotted columns {list(columns)!r}"
            raise PlotInputError(msg)
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            msg = f"thresholds[{key!r}]: expected a pair (low, high) with None for no bound, found {bounds!r}"
            raise PlotInputError(msg)
        low, high = (_parse_bound(bound, key=key, log=log) for bound in bounds)
        if low is not None and high is not None and low > high:
            msg = f"thresholds[{key!r}]: expected low <= high, found ({low:g}, {high:g})"
            raise PlotInputError(msg)
        parsed[key] = (low, high)
    return parsed


def _parse_bound(bound: object, *, key: str, log: bool) -> float | None:
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, numbers.Real):
        msg = f"thresholds[{key!r}]: expected numbers or None, found {bound!r}"
        raise PlotInputError(msg)
    value = float(bound)
    if not np.isfinite(value):
        msg = f"thresholds[{key!r}]: expected finite numbers or None, found {bound!r}"
        raise PlotInputError(msg)
    if log and value <= 0:
        msg = f"thresholds[{key!r}]: {value:g} cannot be drawn on a log scale; give a positive bound or None, or plot with log=False"
        raise PlotInputError(msg)
    return value
