"""Sample, group and feature tables: their column kinds, stored encoding and digest.

A table is its columns, in order; the index of a :class:`pandas.DataFrame` is
not stored. Each column is encoded as one 1-D array:

========================  =====================  =========================================
column                    kind                   stored array
========================  =====================  =========================================
strings, categoricals     ``text``               int32 codes, ``levels`` in order of first
                                                 appearance, -1 for a missing value
bool                      ``bool``               bool
any integer width         ``int``                the integer dtype itself
float16/32/64             ``float``              the float dtype itself (NaN allowed)
datetime64[unit]          ``datetime64[unit]``   int64 counts of the unit, NaT as -2**63
timedelta64[unit]         ``timedelta64[unit]``  int64 counts of the unit, NaT as -2**63
========================  =====================  =========================================
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import numpy as np
import pandas as pd

from cytepool.cube.encoding import canonical_float64, format_digest, u64, utf8_str
from cytepool.errors import CubeTableError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "TABLE_AXES",
    "EncodedColumn",
    "decode_column",
    "encode_column",
    "encode_table",
    "table_digest",
]

TABLE_AXES: Final = ("samples", "groups", "features")
"""The three tables of a cube, in the order of the manifest."""

_TIME_KIND = re.compile(r"^(datetime64|timedelta64)\[(s|ms|us|ns)\]$")
_MISSING_TEXT: Final = np.int64(-1).astype("<i8").tobytes()
_INT64_MAX: Final = np.iinfo(np.int64).max


@dataclass(frozen=True, kw_only=True, eq=False)
class EncodedColumn:
    """One table column as it is stored: name, kind, values and text levels."""

    name: str
    kind: str
    values: np.ndarray
    levels: tuple[str, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        validate_kind(self.kind, self.values.dtype, where=f"column {self.name!r}")
        if (self.kind == "text") != (self.levels is not None):
            msg = f"column {self.name!r}: levels go with kind 'text' only, found kind {self.kind!r}"
            raise CubeTableError(msg)


def validate_kind(kind: str, dtype: np.dtype, *, where: str) -> None:
    """Raise :class:`CubeTableError` unless ``dtype`` is the stored dtype of ``kind``.

    Parameters
    ----------
    kind
        The column's kind (``text``, ``bool``, ``int``, ``float``, ``datetime64[...]`` ...).
    dtype
        The stored array's dtype.
    where
        The array, for the message.

    Raises
    ------
    CubeTableError
        ``dtype`` is not the one ``kind`` is stored as.
    """
    ok = (
        (kind == "text" and dtype == np.int32)
        or (kind == "bool" and dtype == np.bool_)
        or (kind == "int" and dtype.kind in "iu")
        or (kind == "float" and dtype.kind == "f")
        or (_TIME_KIND.match(kind) is not None and dtype == np.int64)
    )
    if not ok:
        msg = (
            f"{where}: kind {kind!r} cannot be stored as dtype {dtype}; expected text→int32, "
            "bool→bool, int→an integer dtype, float→a float dtype, datetime64[unit] and "
            "timedelta64[unit] (unit s, ms, us or ns)→int64"
        )
        raise CubeTableError(msg)


def encode_table(table: object, *, axis: str) -> tuple[EncodedColumn, ...]:
    """Encode every column of ``table`` (the ``axis`` table of a cube), in order.

    Parameters
    ----------
    table
        A DataFrame.
    axis
        ``samples``, ``groups`` or ``features``, for messages.

    Returns
    -------
    tuple of EncodedColumn
        The columns.

    Raises
    ------
    CubeTableError
        ``table`` is not a DataFrame with unique string column names, or a
        column cannot be encoded.
    """
    if not isinstance(table, pd.DataFrame):
        msg = f"{axis} table: expected a pandas DataFrame, found {type(table).__name__}"
        raise CubeTableError(msg)
    names: list[object] = list(table.columns)
    for name in names:
        if not isinstance(name, str):
            msg = (
                f"{axis} table: column names must be strings, found {name!r} of type "
                f"{type(name).__name__}; rename the column"
            )
            raise CubeTableError(msg)
    if len(set(names)) != len(names):
        dupes = sorted({str(n) for n in names if names.count(n) > 1})
        msg = f"{axis} table: column names must be unique, found duplicates {dupes}"
        raise CubeTableError(msg)
    if not names:
        msg = f"{axis} table has no columns; expected at least one (its first column labels rows)"
        raise CubeTableError(msg)
    return tuple(encode_column(str(name), table[name], axis=axis) for name in names)


def encode_column(name: str, column: pd.Series, *, axis: str) -> EncodedColumn:
    """Encode one column; raise :class:`CubeTableError` for a column no kind can hold.

    Parameters
    ----------
    name
        The column's name.
    column
        Its values.
    axis
        The table's axis, for messages.

    Returns
    -------
    EncodedColumn
        The column's kind and stored values.

    Raises
    ------
    CubeTableError
        No kind can hold the column's values.
    """
    where = f"{axis} table, column {name!r}"
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype):
        return _encode_text(name, column, where=where)
    if isinstance(dtype, pd.DatetimeTZDtype):
        msg = (
            f"{where}: time zone aware datetimes ({dtype}) are not stored; convert with "
            "`.dt.tz_convert('UTC').dt.tz_localize(None)` or to text"
        )
        raise CubeTableError(msg)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        if column.isna().any():
            msg = (
                f"{where}: nullable {dtype} column has missing values, which this kind cannot "
                "hold; fill them, or use a float column (NaN) or a text column"
            )
            raise CubeTableError(msg)
        numpy_dtype = getattr(dtype, "numpy_dtype", None)
        if numpy_dtype is None:
            msg = f"{where}: extension dtype {dtype} is not supported; convert it to a numpy dtype"
            raise CubeTableError(msg)
        column = column.astype(numpy_dtype)
        dtype = column.dtype
    values = np.asarray(column.to_numpy())
    match values.dtype.kind:
        case "b":
            return EncodedColumn(name=name, kind="bool", values=values.astype(np.bool_))
        case "i" | "u":
            if values.dtype == np.uint64 and values.size and int(values.max()) > _INT64_MAX:
                msg = f"{where}: uint64 values above 2**63-1 cannot be fingerprinted as int64"
                raise CubeTableError(msg)
            return EncodedColumn(name=name, kind="int", values=values)
        case "f":
            return EncodedColumn(name=name, kind="float", values=values)
        case "M" | "m":
            unit, _ = np.datetime_data(values.dtype)
            base = "datetime64" if values.dtype.kind == "M" else "timedelta64"
            kind = f"{base}[{unit}]"
            if not _TIME_KIND.match(kind):
                msg = f"{where}: unit {unit!r} of {values.dtype} is not one of s, ms, us, ns"
                raise CubeTableError(msg)
            return EncodedColumn(name=name, kind=kind, values=values.view(np.int64))
        case "O":
            return _encode_text(name, column, where=where)
    msg = f"{where}: dtype {values.dtype} is not a text, bool, int, float, datetime or timedelta"
    raise CubeTableError(msg)


def _encode_text(name: str, column: pd.Series, *, where: str) -> EncodedColumn:
    codes, uniques = pd.factorize(np.asarray(column.astype(object)), use_na_sentinel=True)
    levels = tuple(uniques.tolist())
    for level in levels:
        if not isinstance(level, str):
            msg = (
                f"{where}: text columns hold strings and missing values only, found "
                f"{level!r} of type {type(level).__name__}; convert the column with .astype(str)"
            )
            raise CubeTableError(msg)
    return EncodedColumn(name=name, kind="text", values=codes.astype(np.int32), levels=levels)


def decode_column(column: EncodedColumn) -> pd.Series:
    """Turn a stored column back into a :class:`pandas.Series` named like it.

    Parameters
    ----------
    column
        The stored column.

    Returns
    -------
    pandas.Series
        Its values.
    """
    values = column.values
    if column.levels is not None:
        objects = np.empty(values.shape, dtype=object)
        levels = np.array(column.levels, dtype=object)
        present = values >= 0
        objects[present] = levels[values[present]] if len(levels) else objects[present]
        objects[~present] = None
        return pd.Series(objects, name=column.name, dtype="str")
    match = _TIME_KIND.match(column.kind)
    if match:
        return pd.Series(values.view(column.kind), name=column.name)
    return pd.Series(values, name=column.name)


def table_digest(columns: Sequence[EncodedColumn], *, n_rows: int) -> str:
    """Digest of a table: see :mod:`cytepool.cube.fingerprints` for the byte encoding.

    Parameters
    ----------
    columns
        The table's columns, in stored order.
    n_rows
        Its rows.

    Returns
    -------
    str
        The table digest.
    """
    h = hashlib.sha256()
    h.update(u64(n_rows))
    h.update(u64(len(columns)))
    for column in columns:
        h.update(utf8_str(column.name))
        h.update(utf8_str(column.kind))
        _update_values(h, column)
    return format_digest(h)


def _update_values(h: hashlib._Hash, column: EncodedColumn) -> None:
    values = column.values
    if column.levels is not None:
        encoded = [u64(len(b)) + b for b in (level.encode() for level in column.levels)]
        h.update(b"".join(encoded[c] if c >= 0 else _MISSING_TEXT for c in values.tolist()))
    elif column.kind == "bool":
        h.update(np.ascontiguousarray(values, dtype=np.uint8).data)
    elif column.kind == "float":
        h.update(canonical_float64(values, nan=True).data)
    else:
        h.update(np.ascontiguousarray(values, dtype="<i8").data)
