"""Contrasts written as R users write them: ``"groupB-groupC"``, ``"(groupA+groupB)/2-groupC"``.

limma's ``makeContrasts(contrasts=..., levels=design)`` parses each string as
an R expression and evaluates it with every design column bound to its
indicator vector (1 for that column, 0 for the others). This module does the
same for the linear part of R's arithmetic, without evaluating code: a
tokenizer and a recursive-descent parser over numbers, design column names,
``+``, ``-``, ``*``, ``/`` and parentheses, with R's precedence (unary minus
binds tighter than ``*`` and ``/``, which bind tighter than binary ``+`` and
``-``). The weights are computed as R computes them, one float vector per
sub-expression, so they are R's bit for bit.

Names are R's syntactic names (letters, digits, ``.`` and ``_``, starting
with a letter or with ``.`` not followed by a digit); any column, such as
``(Intercept)`` or ``conditionstim:donorD2``, may be written between
backticks as R allows. As in ``makeContrasts``, ``Intercept`` names the
column ``(Intercept)`` when the design has no column of that name.

The result must be linear in the design columns: a product of two names, a
division by a name, or a number added to a name (which R would spread over
every column) is refused with a :class:`~cytepool.errors.DesignError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pandas as pd

from cytepool.errors import DesignError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["make_contrasts", "parse_contrast"]

_TOKEN: Final = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<name>(?:[^\W\d_]|\.(?!\d))[\w.]*)
    | (?P<quoted>`[^`]*`)
    | (?P<operator>[-+*/()])
    """,
    re.VERBOSE,
)

_R_NAME: Final = re.compile(r"(?:[^\W\d_]|\.(?!\d))[\w.]*")

INTERCEPT: Final = "(Intercept)"

MAX_DEPTH: Final = 100
"""Nesting deeper than this is refused (before Python's recursion limit)."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "name", "operator" or "end"
    text: str
    position: int


@dataclass(frozen=True)
class _Value:
    """A sub-expression's value: R's vector over the design columns, and whether it names any."""

    vector: np.ndarray
    linear: bool


def _tokens(expression: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None:
            rest = expression[position:]
            what = "an unclosed backtick" if rest.startswith("`") else repr(rest[0])
            msg = (
                f"contrast {expression!r}: at position {position}, expected a number, a design "
                f"column name, an operator (+ - * /) or a parenthesis, found {what}"
            )
            raise DesignError(msg)
        kind = match.lastgroup
        assert kind is not None
        if kind == "quoted":
            tokens.append(_Token("name", match.group()[1:-1], position))
        elif kind != "space":
            tokens.append(_Token(kind, match.group(), position))
        position = match.end()
    tokens.append(_Token("end", "", len(expression)))
    return tokens


class _Parser:
    """A recursive-descent parser of one expression, evaluating as it goes.

    Grammar: ``sum := product (('+'|'-') product)*``, ``product := unary
    (('*'|'/') unary)*``, ``unary := ('+'|'-') unary | atom``, ``atom := number
    | name | '(' sum ')'``.
    """

    def __init__(self, expression: str, columns: Sequence[str]) -> None:
        self.expression = expression
        self.columns = list(columns)
        self.tokens = _tokens(expression)
        self.at = 0
        self.depth = 0

    def _fail(self, token: _Token, expected: str) -> DesignError:
        shown = "the end" if token.kind == "end" else repr(token.text)
        return DesignError(
            f"contrast {self.expression!r}: at position {token.position}, expected {expected}, "
            f"found {shown}"
        )

    def _peek(self) -> _Token:
        return self.tokens[self.at]

    def _take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def parse(self) -> np.ndarray:
        if self._peek().kind == "end":
            msg = (
                f"contrast {self.expression!r}: expected an expression over the design columns "
                f"{self.columns}, such as {self._example()!r}, found nothing"
            )
            raise DesignError(msg)
        value = self._sum()
        token = self._peek()
        if token.kind != "end":
            raise self._fail(token, "an operator (+ - * /) or the end")
        if not value.linear:
            msg = (
                f"contrast {self.expression!r}: expected a combination of design columns such as "
                f"{self._example()!r}, found a number only; the columns are {self.columns}"
            )
            raise DesignError(msg)
        return value.vector

    def _example(self) -> str:
        names = [c if _R_NAME.fullmatch(c) else f"`{c}`" for c in self.columns[-2:]]
        return "-".join(reversed(names))

    def _sum(self) -> _Value:
        left = self._product()
        while self._peek().text in {"+", "-"} and self._peek().kind == "operator":
            operator = self._take()
            right = self._product()
            if left.linear != right.linear:
                msg = (
                    f"contrast {self.expression!r}: at position {operator.position}, "
                    f"{operator.text!r} joins a number and a combination of design columns; "
                    "expected both sides to name design columns (R would add the number to every "
                    "column's weight). Multiply or divide by numbers instead, as in '(a+b)/2-c'"
                )
                raise DesignError(msg)
            vector = (
                left.vector + right.vector if operator.text == "+" else left.vector - right.vector
            )
            left = _Value(vector, left.linear)
        return left

    def _product(self) -> _Value:
        left = self._unary()
        while self._peek().text in {"*", "/"} and self._peek().kind == "operator":
            operator = self._take()
            right = self._unary()
            if operator.text == "*":
                if left.linear and right.linear:
                    msg = (
                        f"contrast {self.expression!r}: at position {operator.position}, expected "
                        "a number on one side of '*', found design columns on both; a contrast is "
                        "linear in the design columns"
                    )
                    raise DesignError(msg)
                left = _Value(left.vector * right.vector, left.linear or right.linear)
                continue
            if right.linear:
                msg = (
                    f"contrast {self.expression!r}: at position {operator.position}, expected a "
                    "number after '/', found an expression of design columns; a contrast is linear "
                    "in the design columns"
                )
                raise DesignError(msg)
            with np.errstate(divide="ignore", invalid="ignore"):
                left = _Value(left.vector / right.vector, left.linear)
        return left

    def _unary(self) -> _Value:
        token = self._peek()
        if token.kind == "operator" and token.text in {"+", "-"}:
            self._take()
            self._deeper(token)
            value = self._unary()
            self.depth -= 1
            return value if token.text == "+" else _Value(-value.vector, value.linear)
        return self._atom()

    def _atom(self) -> _Value:
        token = self._take()
        if token.kind == "number":
            return _Value(np.full(len(self.columns), float(token.text)), linear=False)
        if token.kind == "name":
            return _Value(self._indicator(token), linear=True)
        if token.kind == "operator" and token.text == "(":
            self._deeper(token)
            value = self._sum()
            self.depth -= 1
            closing = self._take()
            if closing.text != ")" or closing.kind != "operator":
                raise self._fail(closing, "')' or an operator (+ - * /)")
            return value
        raise self._fail(token, "a number, a design column name or '('")

    def _deeper(self, token: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            msg = (
                f"contrast {self.expression[:40]!r}...: at position {token.position}, expected at "
                f"most {MAX_DEPTH} nested parentheses or signs, found more"
            )
            raise DesignError(msg)

    def _indicator(self, token: _Token) -> np.ndarray:
        name = token.text
        if name not in self.columns and name == "Intercept" and INTERCEPT in self.columns:
            name = INTERCEPT
        if name not in self.columns:
            hint = (
                " (write names that are not R names between backticks, as `(Intercept)`)"
                if any(not _R_NAME.fullmatch(c) for c in self.columns)
                else ""
            )
            msg = (
                f"contrast {self.expression!r}: at position {token.position}, {name!r} is not a "
                f"design column; expected one of {self.columns}{hint}"
            )
            raise DesignError(msg)
        vector = np.zeros(len(self.columns))
        vector[self.columns.index(name)] = 1.0
        return vector


def parse_contrast(expression: str, columns: Sequence[str]) -> np.ndarray:
    """The weights of one contrast expression over the design columns, as ``makeContrasts`` gives them.

    Parameters
    ----------
    expression
        An R expression such as ``"groupB-groupC"``, ``"(groupA+groupB)/2-groupC"``
        or ``"`(Intercept)`+0.5*x"``: numbers, design column names (in
        backticks when they are not R names), ``+``, ``-``, ``*``, ``/`` and
        parentheses.
    columns
        The design column names, in order.

    Returns
    -------
    numpy.ndarray
        One float64 weight per design column.

    Raises
    ------
    DesignError
        When the expression does not parse, names a column the design lacks
        (the message lists the columns), is not linear in the columns
        (a product of two names, a division by a name, a number added to a
        name), is a number only, or gives weights that are all zero or not
        finite (``"a-a"``, ``"a/0"``).

    Examples
    --------
    >>> parse_contrast("(groupA+groupB)/2-groupC", ["groupA", "groupB", "groupC"]).tolist()
    [0.5, 0.5, -1.0]
    >>> parse_contrast("groupB*groupC", ["groupA", "groupB", "groupC"])
    Traceback (most recent call last):
    ...
    cytepool.errors.DesignError: contrast 'groupB*groupC': at position 6, expected a number on one side of '*', found design columns on both; a contrast is linear in the design columns
    """
    weights = _Parser(expression, columns).parse() + 0.0  # + 0.0 turns R's -0 weights into 0
    if not np.isfinite(weights).all() or not weights.any():
        msg = (
            f"contrast {expression!r}: expected finite weights, not all zero, found "
            f"{dict(zip(columns, weights.tolist(), strict=True))}"
        )
        raise DesignError(msg)
    return weights


def make_contrasts(expressions: Sequence[str], columns: Sequence[str]) -> pd.DataFrame:
    """The contrast matrix of R's ``makeContrasts(contrasts=expressions, levels=columns)``.

    Parameters
    ----------
    expressions
        One expression per contrast (see :func:`parse_contrast`).
    columns
        The design column names, in order.

    Returns
    -------
    pandas.DataFrame
        Design columns x contrasts, named by the expressions as written.

    Raises
    ------
    DesignError
        When an expression cannot be parsed (see :func:`parse_contrast`).

    Examples
    --------
    >>> make_contrasts(["b-a", "(a+b)/2-c"], ["a", "b", "c"])
         b-a  (a+b)/2-c
    a   -1.0        0.5
    b    1.0        0.5
    c    0.0       -1.0
    """
    weights = [parse_contrast(expression, columns) for expression in expressions]
    return pd.DataFrame(
        np.column_stack(weights) if weights else np.zeros((len(columns), 0)),
        index=pd.Index(list(columns)),
        columns=pd.Index(list(expressions), dtype=object),
    )
