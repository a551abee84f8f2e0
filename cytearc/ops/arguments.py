"""Argument checks that every operation runs before it reads, publishes or writes anything.

Each ``parse_*`` returns the value normalised (an ``int`` from a NumPy
integer, a ``float`` from an int) or raises
:class:`~cytearc.errors.OperationArgumentError` naming the operation, the
argument, what was expected and what was found.

Examples
--------
>>> parse_int(15, name="k", operation="graph.neighbors", minimum=1)
15
>>> parse_float("ten thousand", name="target_sum", operation="features.normalize", positive=True)
Traceback (most recent call last):
...
cytearc.errors.OperationArgumentError: features.normalize: target_sum must be a finite number > 0, found 'ten thousand'
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from cytearc.errors import OperationArgumentError

if TYPE_CHECKING:
    from collections.abc import Collection

    from cytearc.storage.store import AnalysisStore

__all__ = [
    "parse_bool",
    "parse_cell_column",
    "parse_choice",
    "parse_float",
    "parse_int",
    "parse_patterns",
    "parse_seed",
]

T = TypeVar("T")


def _refuse(operation: str, name: str, expected: str, found: object) -> OperationArgumentError:
    return OperationArgumentError(f"{operation}: {name} must be {expected}, found {found!r}")


def parse_int(
    value: object,
    *,
    name: str,
    operation: str,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """An integer argument (a bool is not one), from ``minimum`` to ``maximum``.

    Parameters
    ----------
    value
        The argument.
    name, operation
        For the message.
    minimum, maximum
        The smallest and largest values allowed (None: no bound).

    Returns
    -------
    int
        The value.

    Raises
    ------
    OperationArgumentError
        Not an integer, or out of the bounds.
    """
    bound = (
        f" from {minimum} to {maximum}"
        if minimum is not None and maximum is not None
        else ""
        if minimum is None and maximum is None
        else f" >= {minimum}"
        if minimum is not None
        else f" <= {maximum}"
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _refuse(operation, name, f"an integer{bound}", value)
    if (minimum is not None and int(value) < minimum) or (
        maximum is not None and int(value) > maximum
    ):
        raise _refuse(operation, name, f"an integer{bound}", value)
    return int(value)


def parse_seed(value: object, *, name: str = "seed", operation: str) -> int:
    """A random seed: an integer from 0 to 2**32 - 1 (what NumPy, igraph and UMAP accept).

    Parameters
    ----------
    value
        The argument.
    name, operation
        For the message.

    Returns
    -------
    int
        The seed.

    Raises
    ------
    OperationArgumentError
        Not an integer in that range.
    """
    return parse_int(value, name=name, operation=operation, minimum=0, maximum=2**32 - 1)


def parse_float(
    value: object,
    *,
    name: str,
    operation: str,
    positive: bool = False,
    non_negative: bool = False,
    maximum: float | None = None,
) -> float:
    """A finite real argument (a bool is not one), > 0 or >= 0 when asked, at most ``maximum``.

    Parameters
    ----------
    value
        The argument.
    name, operation
        For the message.
    positive, non_negative
        The lower bound.
    maximum
        The largest value allowed (None: no upper bound).

    Returns
    -------
    float
        The value.

    Raises
    ------
    OperationArgumentError
        Not a finite number, or outside the bound.
    """
    bound = " > 0" if positive else " >= 0" if non_negative else ""
    if maximum is not None:
        bound += f" and <= {maximum:g}" if bound else f" <= {maximum:g}"
    expected = f"a finite number{bound}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _refuse(operation, name, expected, value)
    number = float(value)
    if (
        not math.isfinite(number)
        or (positive and number <= 0)
        or (non_negative and number < 0)
        or (maximum is not None and number > maximum)
    ):
        raise _refuse(operation, name, expected, value)
    return number


def parse_bool(value: object, *, name: str, operation: str) -> bool:
    """A boolean argument (True or False, also NumPy's).

    Parameters
    ----------
    value
        The argument.
    name, operation
        For the message.

    Returns
    -------
    bool
        The value.

    Raises
    ------
    OperationArgumentError
        Anything else, such as ``"yes"`` or 1.
    """
    if value is True or value is False or type(value).__name__ == "bool_":
        return bool(value)
    raise _refuse(operation, name, "True or False", value)


def parse_choice(value: T, choices: Collection[T], *, name: str, operation: str) -> T:
    """One of ``choices``.

    Parameters
    ----------
    value
        The argument.
    choices
        What it may be.
    name, operation
        For the message.

    Returns
    -------
    object
        The value.

    Raises
    ------
    OperationArgumentError
        Another value.
    """
    if isinstance(value, str | int | float | bool | type(None)) and value in choices:
        return value
    raise _refuse(operation, name, f"one of {sorted(map(repr, choices))}", value)


def parse_cell_column(ds: AnalysisStore, column: object, *, name: str, operation: str) -> str:
    """The name of a cell column of the store.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    column
        The argument.
    name, operation
        For the message.

    Returns
    -------
    str
        The column name.

    Raises
    ------
    OperationArgumentError
        Not a string, or no such column.
    """
    if not isinstance(column, str) or column not in ds.cells.columns:
        msg = f"{ds.where}: {operation}: {name} must name a cell column, found {column!r}; the cell table has {sorted(ds.cells.columns)}"
        raise OperationArgumentError(msg)
    return column


def parse_patterns(value: object, *, operation: str) -> dict[str, str] | None:
    """A mapping of column suffixes to regular expressions, each compiled once to check it.

    Parameters
    ----------
    value
        The argument, or None.
    operation
        For the message.

    Returns
    -------
    dict or None
        The patterns.

    Raises
    ------
    OperationArgumentError
        Not a mapping of text to text, or a pattern that does not compile.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _refuse(
            operation, "patterns", "a mapping of column suffixes to regular expressions", value
        )
    for key, pattern in value.items():
        try:
            re.compile(pattern)
        except re.error as error:
            msg = f"{operation}: patterns[{key!r}] = {pattern!r} is not a regular expression ({error})"
            raise OperationArgumentError(msg) from None
    return dict(value)
