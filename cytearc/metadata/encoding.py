"""The stored encoding of a table column, version 1: one Zarr node per column, stamped with its type.

Every column a writer creates carries the attribute ``cytearc:encoding`` =
``{"type": <type>, "version": 1, ...}`` (the type's fields below). Types whose
values need one array are a 1-D array; the others are a group of 1-D arrays.
``mask`` is True where a value is missing; masked rows of ``values`` hold
``""``, 0 or False.

===================  =====  ==========================================  ==========================
type                 node   arrays (dtype)                              fields
===================  =====  ==========================================  ==========================
``string``           array  UTF-8 ``string``, no missing value          -
``nullable-string``  group  ``values`` (string), ``mask`` (bool)        ``pandasDtype``: ``object``
                                                                        or ``string``
``bool``             array  bool                                        -
``int``              array  int8 ... int64, uint8 ... uint64            -
``float``            array  float16, float32, float64 (NaN a value)     -
``nullable-integer`` group  ``values`` (an integer dtype), ``mask``     -
``nullable-float``   group  ``values`` (float32/float64), ``mask``      -
``nullable-boolean`` group  ``values`` (bool), ``mask``                 -
``categorical``      group  ``codes`` (signed integer, -1 missing),     ``ordered`` (bool)
                            ``categories`` (string, bool, int or
                            float; unique, in order)
``datetime``         array  int64 counts of ``unit`` since the epoch,   ``unit`` (s, ms, us, ns),
                            UTC; -2**63 (NaT) missing                   ``timezone`` (name or null)
``timedelta``        array  int64 counts of ``unit``; -2**63 missing    ``unit``
===================  =====  ==========================================  ==========================

A column without the attribute was written before this encoding: a string
array is text ("" where a value was missing), a bool or numeric array holds
its values. An unknown type, version or field fails closed with
:class:`~cytearc.errors.StoreFormatError`. The prose specification, with
chunking and codecs, is ``docs/store-format.md`` ("Table columns").

Two views are read back: :func:`read_column` gives the lossless
:class:`pandas.Series`, and :func:`as_numpy` the NumPy array of its values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import zarr
from zarr.codecs import ZstdCodec

from cytearc.errors import CyteArcError, StoreDamageError, StoreFormatError
from cytearc.storage.damage import read_region
from cytearc.storage.nodes import child_node, member_names

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "DIGEST_ATTRIBUTE",
    "ENCODING_ATTRIBUTE",
    "ENCODING_VERSION",
    "ColumnEncoding",
    "EncodedColumn",
    "as_numpy",
    "column_digest",
    "column_length",
    "encode_column",
    "parse_encoding",
    "read_column",
    "write_column",
]

ENCODING_ATTRIBUTE: Final = "cytearc:encoding"
ENCODING_VERSION: Final = 1
DIGEST_ATTRIBUTE: Final = "cytearc:valuesDigest"
"""Attribute of a column: :func:`column_digest` of its stored arrays, checked on every read."""
CHUNK_ROWS: Final = 1 << 20
"""Rows per chunk of every column array (fewer when the column is shorter)."""
TIME_UNITS: Final = ("s", "ms", "us", "ns")
PANDAS_TEXT_DTYPES: Final = ("object", "string")
_COMPRESSOR: Final = ZstdCodec(level=3, checksum=True)
_NAT: Final = np.iinfo(np.int64).min

_FIELDS: Final[dict[str, frozenset[str]]] = {
    "string": frozenset(),
    "nullable-string": frozenset({"pandasDtype"}),
    "bool": frozenset(),
    "int": frozenset(),
    "float": frozenset(),
    "nullable-integer": frozenset(),
    "nullable-float": frozenset(),
    "nullable-boolean": frozenset(),
    "categorical": frozenset({"ordered"}),
    "datetime": frozenset({"unit", "timezone"}),
    "timedelta": frozenset({"unit"}),
}
"""The fields of each type of version 1, besides ``type`` and ``version``."""
_GROUP_MEMBERS: Final[dict[str, frozenset[str]]] = {
    "nullable-string": frozenset({"values", "mask"}),
    "nullable-integer": frozenset({"values", "mask"}),
    "nullable-float": frozenset({"values", "mask"}),
    "nullable-boolean": frozenset({"values", "mask"}),
    "categorical": frozenset({"codes", "categories"}),
}
"""The member arrays of the types stored as a group; the other types are one array."""


@dataclass(frozen=True, kw_only=True)
class ColumnEncoding:
    """A parsed ``cytearc:encoding`` attribute: the type, its version and its fields.

    Parameters
    ----------
    type
        The encoding type (the module docstring's table).
    version
        The encoding version.
    fields
        The type's fields besides ``type`` and ``version``.
    """

    type: str
    version: int = ENCODING_VERSION
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The attribute as stored.

        Returns
        -------
        dict
            ``{"type": ..., "version": ..., **fields}``.
        """
        return {"type": self.type, "version": self.version, **self.fields}


@dataclass(frozen=True, kw_only=True, eq=False)
class EncodedColumn:
    """A column ready to store: its encoding and its arrays (one under ``""``, or the group's members).

    Parameters
    ----------
    encoding
        The column's encoding.
    arrays
        The array of a one-array type under ``""``, else the group's member
        arrays by name.
    """

    encoding: ColumnEncoding
    arrays: Mapping[str, np.ndarray]


def parse_encoding(value: object, *, where: str) -> ColumnEncoding:
    """Parse a stored ``cytearc:encoding``; raise :class:`StoreFormatError` unless it is known.

    Parameters
    ----------
    value
        The attribute's value.
    where
        Names the column in messages.

    Returns
    -------
    ColumnEncoding
        The parsed encoding.

    Raises
    ------
    StoreFormatError
        The value is not an object with a string ``type``, or its type,
        version or fields are unknown or invalid.

    Examples
    --------
    >>> parse_encoding({"type": "categorical", "version": 1, "ordered": False}, where="t/x")
    ColumnEncoding(type='categorical', version=1, fields={'ordered': False})
    >>> parse_encoding({"type": "interval", "version": 1}, where="t/x")
    Traceback (most recent call last):
    ...
    cytearc.errors.StoreFormatError: t/x: unknown column encoding type 'interval' (known: ...); \
this store was written by a newer CyteArc: upgrade cytearc to read it
    """
    remedy = "this store was written by a newer CyteArc: upgrade cytearc to read it"
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        msg = f"{where}: attribute {ENCODING_ATTRIBUTE!r} must be an object with a string 'type', found {value!r}; re-import the store"
        raise StoreFormatError(msg)
    kind = value["type"]
    if kind not in _FIELDS:
        msg = f"{where}: unknown column encoding type {kind!r} (known: {sorted(_FIELDS)}); {remedy}"
        raise StoreFormatError(msg)
    version = value.get("version")
    if version != ENCODING_VERSION or isinstance(version, bool):
        msg = f"{where}: column encoding {kind!r} has version {version!r}; this CyteArc reads version {ENCODING_VERSION}; {remedy}"
        raise StoreFormatError(msg)
    fields = {k: v for k, v in value.items() if k not in {"type", "version"}}
    if set(fields) != _FIELDS[kind]:
        msg = f"{where}: column encoding {kind!r} version 1 has the fields {sorted(_FIELDS[kind])}, found {sorted(fields)}; {remedy}"
        raise StoreFormatError(msg)
    _validate_fields(kind, fields, where=where)
    return ColumnEncoding(type=kind, version=version, fields=fields)


def _validate_fields(kind: str, fields: Mapping[str, Any], *, where: str) -> None:
    problems = []
    if kind == "nullable-string" and fields["pandasDtype"] not in PANDAS_TEXT_DTYPES:
        problems.append(f"pandasDtype must be one of {list(PANDAS_TEXT_DTYPES)}")
    if kind == "categorical" and not isinstance(fields["ordered"], bool):
        problems.append("ordered must be true or false")
    if kind in {"datetime", "timedelta"} and fields["unit"] not in TIME_UNITS:
        problems.append(f"unit must be one of {list(TIME_UNITS)}")
    if kind == "datetime" and fields["timezone"] is not None:
        try:
            pd.DatetimeTZDtype(unit="ns", tz=fields["timezone"])
        except (TypeError, ValueError, KeyError, LookupError):
            problems.append("timezone must be null or a time zone name")
    if problems:
        msg = f"{where}: column encoding {kind!r}: {'; '.join(problems)}, found {dict(fields)}; re-import the store"
        raise StoreFormatError(msg)


# -- encoding ------------------------------------------------------------------------------


def encode_column(values: object, *, n_rows: int, where: str) -> EncodedColumn:
    """Encode one column (any sequence, array or :class:`pandas.Series`) of ``n_rows`` values.

    Parameters
    ----------
    values
        The column's values (a Series' index is ignored).
    n_rows
        The number of rows of the table.
    where
        Names the column in messages.

    Returns
    -------
    EncodedColumn
        The encoding and the arrays to store.

    Raises
    ------
    CyteArcError
        If the column does not have ``n_rows`` values, or holds values no type
        stores (mixed objects, bytes, periods, intervals, complex numbers);
        the message names the remedy.
    """
    series = values.reset_index(drop=True) if isinstance(values, pd.Series) else pd.Series(values)
    if len(series) != n_rows:
        msg = f"{where}: the column has {len(series)} values for {n_rows} rows"
        raise CyteArcError(msg)
    return _encode_series(series, where=where)


def _encode_series(series: pd.Series, *, where: str) -> EncodedColumn:  # noqa: PLR0911 (one return per dtype family)
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return _encode_categorical(series, where=where)
    if isinstance(dtype, pd.StringDtype):
        pandas_dtype = "object" if isinstance(dtype.na_value, float) else "string"
        return _encode_text(series, pandas_dtype=pandas_dtype, where=where)
    if isinstance(dtype, pd.DatetimeTZDtype):
        return _encode_datetime(series, where=where)
    if isinstance(
        series.array, pd.arrays.IntegerArray | pd.arrays.FloatingArray | pd.arrays.BooleanArray
    ):
        return _encode_masked(series)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        msg = f"{where}: columns of dtype {dtype} are not stored; convert the column with .astype(str) or to a NumPy dtype"
        raise CyteArcError(msg)
    match dtype.kind:
        case "b":
            return _single("bool", series.to_numpy())
        case "i" | "u":
            return _single("int", series.to_numpy())
        case "f":
            return _single("float", series.to_numpy())
        case "M":
            return _encode_datetime(series, where=where)
        case "m":
            unit = _time_unit(dtype, where=where)
            return _single("timedelta", series.to_numpy().view(np.int64), unit=unit)
        case "O":
            return _encode_objects(series, where=where)
    msg = f"{where}: columns of dtype {dtype} are not stored; convert the column with .astype(str) or to a bool, integer, float or datetime dtype"
    raise CyteArcError(msg)


def _single(kind: str, values: np.ndarray, **fields: Any) -> EncodedColumn:
    return EncodedColumn(
        encoding=ColumnEncoding(type=kind, fields=fields), arrays={"": np.asarray(values)}
    )


def _encode_objects(series: pd.Series, *, where: str) -> EncodedColumn:
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    has_missing = bool(series.isna().any())
    conversions: dict[str, Callable[[], pd.Series]] = {
        "boolean": lambda: series.astype("boolean" if has_missing else bool),
        "integer": lambda: series.astype("Int64" if has_missing else np.int64),
        "floating": lambda: series.astype(np.float64),
        "mixed-integer-float": lambda: series.astype(np.float64),
        "datetime64": lambda: pd.to_datetime(series),
        "datetime": lambda: pd.to_datetime(series),
    }
    if inferred in {"string", "empty"}:
        return _encode_text(series, pandas_dtype="object", where=where)
    if inferred in conversions:
        return _encode_series(conversions[inferred](), where=where)
    first = series.dropna().iloc[0]
    msg = (
        f"{where}: a column of Python objects holds {inferred} values such as {first!r} of type "
        f"{type(first).__name__}; store text, numbers, booleans or datetimes: convert the column "
        "with .astype(str) or to one dtype"
    )
    raise CyteArcError(msg)


def _encode_text(series: pd.Series, *, pandas_dtype: str, where: str) -> EncodedColumn:
    values = series.to_numpy(dtype=object, copy=True)
    missing = np.asarray(series.isna(), dtype=bool)
    bad = [i for i, v in enumerate(values) if not missing[i] and not isinstance(v, str)]
    if bad:
        value = values[bad[0]]
        msg = f"{where}: row {bad[0]} holds {value!r} of type {type(value).__name__} in a text column; convert the column with .astype(str)"
        raise CyteArcError(msg)
    values[missing] = ""
    if pandas_dtype == "object" and not missing.any():
        return _single("string", values)
    return EncodedColumn(
        encoding=ColumnEncoding(type="nullable-string", fields={"pandasDtype": pandas_dtype}),
        arrays={"values": values, "mask": missing},
    )


def _encode_masked(series: pd.Series) -> EncodedColumn:
    dtype = series.dtype
    numpy_dtype = np.dtype(dtype.numpy_dtype)  # type: ignore[union-attr]
    kind = {"b": "nullable-boolean", "f": "nullable-float"}.get(
        numpy_dtype.kind, "nullable-integer"
    )
    fill = False if numpy_dtype.kind == "b" else 0
    values = series.array.to_numpy(dtype=numpy_dtype, na_value=fill)
    mask = np.asarray(series.isna(), dtype=bool)
    return EncodedColumn(
        encoding=ColumnEncoding(type=kind), arrays={"values": values, "mask": mask}
    )


def _time_unit(dtype: np.dtype, *, where: str) -> str:
    unit, _ = np.datetime_data(dtype)
    if unit not in TIME_UNITS:
        msg = f"{where}: {dtype} has the unit {unit!r}; convert the column to one of the units {list(TIME_UNITS)}"
        raise CyteArcError(msg)
    return unit


def _encode_datetime(series: pd.Series, *, where: str) -> EncodedColumn:
    timezone = None
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        timezone = str(series.dtype.tz)
        try:
            recorded = pd.DatetimeTZDtype(unit=series.dtype.unit, tz=timezone)
        except (TypeError, ValueError, KeyError, LookupError):
            recorded = None
        if recorded is None or str(recorded.tz) != timezone:
            msg = f"{where}: the time zone {series.dtype.tz!r} has no name pandas reads back; convert the column with .dt.tz_convert('UTC') or to a named zone"
            raise CyteArcError(msg)
        series = series.dt.tz_convert(None)
    values = series.to_numpy()
    unit = _time_unit(values.dtype, where=where)
    return _single("datetime", values.view(np.int64), unit=unit, timezone=timezone)


def _encode_categorical(series: pd.Series, *, where: str) -> EncodedColumn:
    categorical: pd.Categorical = series.array
    categories = categorical.categories
    if pd.api.types.is_string_dtype(categories.dtype):
        levels = categories.to_numpy(dtype=object)
        bad = [v for v in levels if not isinstance(v, str)]
        if bad:
            msg = f"{where}: the categories hold {bad[0]!r} of type {type(bad[0]).__name__}; categories are text or numbers of one dtype: convert them with .cat.rename_categories(str)"
            raise CyteArcError(msg)
    elif categories.dtype.kind in "biuf" and not isinstance(
        categories.dtype, pd.api.extensions.ExtensionDtype
    ):
        levels = categories.to_numpy()
    else:
        msg = f"{where}: categories of dtype {categories.dtype} are not stored; convert them with .cat.rename_categories(str)"
        raise CyteArcError(msg)
    return EncodedColumn(
        encoding=ColumnEncoding(type="categorical", fields={"ordered": bool(categorical.ordered)}),
        arrays={"codes": np.asarray(categorical.codes), "categories": levels},
    )


# -- writing -------------------------------------------------------------------------------


def _create_array(
    parent: zarr.Group,
    name: str,
    values: np.ndarray,
    *,
    dimension: str,
    attributes: Mapping[str, Any],
) -> None:
    dtype: Any = str if values.dtype == object else values.dtype
    array = parent.create_array(
        name=name,
        shape=values.shape,
        dtype=dtype,
        chunks=(max(1, min(len(values), CHUNK_ROWS)),),
        compressors=_COMPRESSOR,
        dimension_names=(dimension,),
        attributes=dict(attributes),
        overwrite=True,
    )
    if len(values):
        array[:] = values


def column_digest(arrays: Mapping[str, np.ndarray]) -> str:
    r"""The SHA-256 of a column's stored arrays, as ``sha256:<hex>``.

    Over the text ``cytearc column digest 1\n``, then for each array in name
    order: its name, a NUL, its dtype (NumPy's little-endian ``dtype.str``,
    ``O`` for text), a NUL and its values: the little-endian bytes of numbers
    and booleans, each text value as its UTF-8 length (8 bytes, little
    endian) then its bytes, a missing text value as eight 0xFF bytes. A
    deleted chunk (read as the fill value), swapped arrays or an edited value
    change it.

    Parameters
    ----------
    arrays
        Member name (``""`` for a column stored as one array) to its values.

    Returns
    -------
    str
        The digest.

    Examples
    --------
    >>> column_digest({"": np.array([True, False])})[:15]
    'sha256:4c99c10e'
    """
    h = hashlib.sha256(b"cytearc column digest 1\n")
    for name in sorted(arrays):
        values = np.asarray(arrays[name])
        text = values.dtype.kind in "OTU"
        dtype = "O" if text else values.dtype.newbyteorder("<").str
        h.update(name.encode() + b"\0" + dtype.encode() + b"\0")
        if not text:
            h.update(np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes())
            continue
        for value in values.tolist():
            if value is None:
                h.update(b"\xff" * 8)
            else:
                data = str(value).encode("utf-8")
                h.update(len(data).to_bytes(8, "little") + data)
    return "sha256:" + h.hexdigest()


def _check_digest(node: _Node, arrays: Mapping[str, np.ndarray], *, where: str) -> None:
    recorded = node.attrs.get(DIGEST_ATTRIBUTE)
    if recorded is not None and recorded != column_digest(arrays):
        msg = (
            f"{where}: the column's values differ from the digest recorded when it was written "
            "(a chunk was deleted, replaced or edited); the store is damaged - run `cytearc verify` "
            "and restore the store from a copy, or import the source again"
        )
        raise StoreDamageError(msg)


def write_column(
    group: zarr.Group,
    name: str,
    column: EncodedColumn,
    *,
    dimension: str,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """Write ``column`` as the node ``name`` of ``group`` (replacing any node of that name).

    Parameters
    ----------
    group
        The table's group.
    name
        The column's name.
    column
        The encoded column (:func:`encode_column`).
    dimension
        The dimension name of the column's arrays (``"cell"`` or ``"feature"``).
    attributes
        More attributes of the node; ``cytearc:encoding`` and
        ``cytearc:valuesDigest`` are added.
    """
    stamped = {
        **(attributes or {}),
        ENCODING_ATTRIBUTE: column.encoding.to_json(),
        DIGEST_ATTRIBUTE: column_digest(column.arrays),
    }
    if name in group:
        del group[name]
    if "" in column.arrays:
        _create_array(group, name, column.arrays[""], dimension=dimension, attributes=stamped)
        return
    node = group.create_group(name, attributes=stamped)
    for member, values in column.arrays.items():
        member_dimension = "category" if member == "categories" else dimension
        _create_array(node, member, values, dimension=member_dimension, attributes={})


# -- reading -------------------------------------------------------------------------------

_Node = zarr.Array[Any] | zarr.Group


def column_length(node: _Node, *, where: str) -> int:
    """The number of rows of a stored column.

    Parameters
    ----------
    node
        The column's array, or its group.
    where
        Names the column in messages.

    Returns
    -------
    int
        The number of rows.

    Raises
    ------
    StoreFormatError
        A group whose encoding is unknown or lacks its first member array.
    """
    if isinstance(node, zarr.Array):
        return int(node.shape[0])
    encoding = parse_encoding(node.attrs.get(ENCODING_ATTRIBUTE), where=where)
    first = "codes" if encoding.type == "categorical" else "values"
    return int(_member(node, first, where=where).shape[0])


def _member(group: zarr.Group, name: str, *, where: str) -> zarr.Array[Any]:
    node = child_node(group, name, where=where)
    if not isinstance(node, zarr.Array) or len(node.shape) != 1:
        msg = f"{where}/{name}: expected a 1-D array; re-import the store"
        raise StoreFormatError(msg)
    return node


def _values(array: zarr.Array[Any]) -> np.ndarray:
    values = read_region(array, slice(None))  # a chunk that fails its checksum is named
    return values.astype(object) if values.dtype.kind in "OTU" else values


def _checked(values: np.ndarray, kinds: str, *, where: str, expected: str) -> np.ndarray:
    if values.dtype.kind not in kinds:
        msg = f"{where}: expected {expected}, found dtype {values.dtype}; re-import the store"
        raise StoreFormatError(msg)
    return values


def read_column(node: _Node, *, n_rows: int, where: str) -> pd.Series:
    """The lossless :class:`pandas.Series` of a stored column (index 0..n-1, unnamed).

    Parameters
    ----------
    node
        The column's array, or its group.
    n_rows
        The number of rows of the table.
    where
        Names the column in messages.

    Returns
    -------
    pandas.Series
        The values, with the pandas dtype they were written with.

    Raises
    ------
    StoreFormatError
        If the encoding is unknown, or the node's arrays do not match it or
        do not hold ``n_rows`` values.
    """
    stamp = node.attrs.get(ENCODING_ATTRIBUTE)
    if stamp is None:
        series = _read_unstamped(node, where=where)
    else:
        encoding = parse_encoding(stamp, where=where)
        members = _GROUP_MEMBERS.get(encoding.type)
        if members is None:
            if not isinstance(node, zarr.Array) or len(node.shape) != 1:
                msg = f"{where}: encoding {encoding.type!r} is stored as a 1-D array, found a group; re-import the store"
                raise StoreFormatError(msg)
            values = _values(node)
            series = _read_array(encoding, values, where=where)
            _check_digest(node, {"": values}, where=where)
        else:
            if not isinstance(node, zarr.Group):
                msg = f"{where}: encoding {encoding.type!r} is stored as a group of {sorted(members)}, found an array; re-import the store"
                raise StoreFormatError(msg)
            found = member_names(node, where=where)
            if found != members:
                msg = f"{where}: encoding {encoding.type!r} has the arrays {sorted(members)}, found {sorted(found)}; re-import the store"
                raise StoreFormatError(msg)
            arrays = {m: _values(_member(node, m, where=where)) for m in members}
            series = _read_group(encoding, arrays, where=where)
            _check_digest(node, arrays, where=where)
    if len(series) != n_rows:
        msg = f"{where}: {len(series)} values for the table's {n_rows} rows; re-import the store"
        raise StoreFormatError(msg)
    return series


def _read_unstamped(node: _Node, *, where: str) -> pd.Series:
    if not isinstance(node, zarr.Array) or len(node.shape) != 1:
        msg = f"{where}: a column without {ENCODING_ATTRIBUTE!r} must be a 1-D array; re-import the store"
        raise StoreFormatError(msg)
    values = _values(node)
    _checked(values, "biufO", where=where, expected="text, bool, integer or float values")
    return pd.Series(values, dtype=values.dtype)


def _read_array(encoding: ColumnEncoding, values: np.ndarray, *, where: str) -> pd.Series:
    match encoding.type:
        case "string":
            return pd.Series(_checked(values, "O", where=where, expected="strings"), dtype=object)
        case "bool":
            return pd.Series(_checked(values, "b", where=where, expected="booleans"))
        case "int":
            return pd.Series(_checked(values, "iu", where=where, expected="integers"))
        case "float":
            return pd.Series(_checked(values, "f", where=where, expected="floats"))
    if values.dtype != np.int64:
        msg = f"{where}: encoding {encoding.type!r} stores int64, found dtype {values.dtype}; re-import the store"
        raise StoreFormatError(msg)
    unit = encoding.fields["unit"]
    if encoding.type == "timedelta":
        return pd.Series(values.view(f"timedelta64[{unit}]"))
    series = pd.Series(values.view(f"datetime64[{unit}]"))
    timezone = encoding.fields["timezone"]
    return series if timezone is None else series.dt.tz_localize("UTC").dt.tz_convert(timezone)


def _read_group(
    encoding: ColumnEncoding, arrays: Mapping[str, np.ndarray], *, where: str
) -> pd.Series:
    if encoding.type == "categorical":
        return _read_categorical(encoding, arrays, where=where)
    values = arrays["values"]
    mask = _checked(arrays["mask"], "b", where=f"{where}/mask", expected="booleans")
    if len(values) != len(mask):
        msg = f"{where}: values has {len(values)} entries and mask {len(mask)}; re-import the store"
        raise StoreFormatError(msg)
    match encoding.type:
        case "nullable-integer":
            ints = _checked(values, "iu", where=f"{where}/values", expected="integers")
            return pd.Series(pd.arrays.IntegerArray(ints, mask))
        case "nullable-float":
            floats = _checked(values, "f", where=f"{where}/values", expected="floats")
            if floats.dtype not in {np.dtype(np.float32), np.dtype(np.float64)}:
                floats = floats.astype(np.float64)
            return pd.Series(pd.arrays.FloatingArray(floats, mask))
        case "nullable-boolean":
            bools = _checked(values, "b", where=f"{where}/values", expected="booleans")
            return pd.Series(pd.arrays.BooleanArray(bools, mask))
    text = _checked(values, "O", where=f"{where}/values", expected="strings").copy()
    if encoding.fields["pandasDtype"] == "string":
        series = pd.Series(text, dtype=pd.StringDtype())
        series[mask] = pd.NA
        return series
    text[mask] = None
    return pd.Series(text, dtype=object)


def _read_categorical(
    encoding: ColumnEncoding, arrays: Mapping[str, np.ndarray], *, where: str
) -> pd.Series:
    codes = _checked(arrays["codes"], "i", where=f"{where}/codes", expected="signed integers")
    categories = _checked(
        arrays["categories"], "biufO", where=f"{where}/categories", expected="categories"
    )
    if codes.size and (codes.min() < -1 or codes.max() >= len(categories)):
        msg = f"{where}/codes: codes must lie in -1..{len(categories) - 1}, found {codes.min()}..{codes.max()}; re-import the store"
        raise StoreFormatError(msg)
    index = pd.Index(categories, dtype=categories.dtype, copy=False)
    if not index.is_unique:
        msg = f"{where}/categories: categories must be unique; re-import the store"
        raise StoreFormatError(msg)
    dtype = pd.CategoricalDtype(index, ordered=encoding.fields["ordered"])
    return pd.Series(pd.Categorical.from_codes(codes, dtype=dtype))


# -- the NumPy view ------------------------------------------------------------------------


def as_numpy(series: pd.Series) -> np.ndarray:
    """The values of a column as NumPy holds them.

    Text is an object array of ``str`` (``None`` where missing); a
    categorical is its categories taken at its codes; datetimes are
    ``datetime64[unit]`` (UTC for a time zone) with NaT where missing. A
    missing value of a nullable or categorical column is NaN for floats and
    integers (which become float64), NaT for datetimes and ``None`` for text
    and booleans (which become objects).

    Parameters
    ----------
    series
        A column as :func:`read_column` returns it.

    Returns
    -------
    numpy.ndarray
        The values, one per row.

    Examples
    --------
    >>> as_numpy(pd.Series(pd.Categorical(["b", None, "a"], categories=["b", "a"])))
    array(['b', None, 'a'], dtype=object)
    >>> as_numpy(pd.Series([1, None, 3], dtype="Int64"))
    array([ 1., nan,  3.])
    """
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        categorical: pd.Categorical = series.array
        codes = np.asarray(categorical.codes)
        levels = as_numpy(pd.Series(categorical.categories))
        missing = codes < 0
        if not len(levels):
            return _with_missing(np.empty(len(codes), dtype=object), missing)
        return _with_missing(levels[np.where(missing, 0, codes)], missing)
    if isinstance(dtype, pd.DatetimeTZDtype):
        return np.asarray(series.dt.tz_convert(None).to_numpy())
    if pd.api.types.is_string_dtype(dtype):
        return _with_missing(series.to_numpy(dtype=object, copy=True), np.asarray(series.isna()))
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        numpy_dtype = np.dtype(dtype.numpy_dtype)  # type: ignore[attr-defined]
        fill = False if numpy_dtype.kind == "b" else 0
        values = series.array.to_numpy(dtype=numpy_dtype, na_value=fill)
        return _with_missing(values, np.asarray(series.isna()))
    return np.asarray(series.to_numpy())


def _with_missing(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    if not missing.any():
        return values
    kind = values.dtype.kind
    if kind in "fiu":
        out = values.astype(np.float64 if kind in "iu" else values.dtype, copy=True)
        out[missing] = np.nan
    elif kind in "Mm":
        out = values.copy()
        out[missing] = np.datetime64("NaT") if kind == "M" else np.timedelta64("NaT")
    else:
        out = values.astype(object, copy=True)
        out[missing] = None
    return out
