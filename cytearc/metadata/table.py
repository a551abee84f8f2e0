"""Cell and feature tables stored as one 1-D Zarr array per column.

A table is a Zarr group whose attribute ``cytearc:columns`` lists its columns
in order; each column is a 1-D array with dimension name ``cell`` or
``feature``. Text is stored as variable-length UTF-8 strings, booleans, integers
and floats as themselves. Every table has ``ids`` and the boolean key ``I``
(rows in use). Boolean columns serve as keys: :meth:`MetaData.fetch` returns
the rows a key marks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import zarr
from zarr.codecs import ZstdCodec

from cytearc.errors import CyteArcError, ReadOnlyStoreError, ReservedColumnError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "COLUMNS_ATTRIBUTE",
    "GENERATED_ATTRIBUTE",
    "MetaData",
    "write_table",
]

COLUMNS_ATTRIBUTE: Final = "cytearc:columns"
GENERATED_ATTRIBUTE: Final = "cytearc:generatedBy"
"""Attribute of a column that an analysis operation wrote: ``{operation, artifact}``."""
_CHUNK_ROWS: Final = 1 << 20
_COMPRESSOR: Final = ZstdCodec(level=3)


def _as_text(series: pd.Series) -> np.ndarray:
    return np.array(["" if pd.isna(v) else str(v) for v in series.astype(object)], dtype=object)


def _as_storable(name: str, values: Any, *, n_rows: int, where: str) -> np.ndarray:  # noqa: ANN401
    """A column as a numpy array Zarr stores: bool, integer, float, or text.

    Nullable numbers with missing values become float64 with NaN; text,
    categoricals, datetimes and anything else become strings ("" for missing).
    """
    series = pd.Series(values)
    if len(series) != n_rows:
        msg = f"{where}: column {name!r} has {len(series)} values for {n_rows} rows"
        raise CyteArcError(msg)
    dtype = series.dtype
    extension = isinstance(dtype, pd.api.extensions.ExtensionDtype)
    numeric = dtype.kind in "biuf" and not isinstance(dtype, pd.CategoricalDtype)
    if numeric and not extension:
        return np.asarray(series.to_numpy())
    if numeric and not series.isna().any():
        return np.asarray(series.to_numpy(dtype=getattr(dtype, "numpy_dtype", None)))
    if numeric and dtype.kind != "b":
        return np.asarray(series.to_numpy(dtype=np.float64, na_value=np.nan))
    return _as_text(series)


def _create_column(
    group: zarr.Group,
    name: str,
    values: np.ndarray,
    *,
    dimension: str,
    attributes: dict[str, Any] | None = None,
) -> None:
    dtype: Any = str if values.dtype == object else values.dtype
    array = group.create_array(
        name=name,
        shape=values.shape,
        dtype=dtype,
        chunks=(max(1, min(len(values), _CHUNK_ROWS)),),
        compressors=_COMPRESSOR,
        dimension_names=(dimension,),
        attributes=attributes or {},
        overwrite=True,
    )
    if len(values):
        array[:] = values


def write_table(group: zarr.Group, table: pd.DataFrame, *, dimension: str, where: str) -> None:
    """Write every column of ``table`` (with ``ids`` first) and the key ``I`` into ``group``."""
    n_rows = len(table)
    names = list(table.columns)
    for name in names:
        _create_column(
            group,
            name,
            _as_storable(name, table[name], n_rows=n_rows, where=where),
            dimension=dimension,
        )
    if "I" not in names:
        _create_column(group, "I", np.ones(n_rows, dtype=bool), dimension=dimension)
        names.append("I")
    group.attrs[COLUMNS_ATTRIBUTE] = names


class MetaData:
    """A cell or feature table of a store.

    Parameters
    ----------
    group
        The table's Zarr group.
    dimension
        ``"cell"`` or ``"feature"``.
    where
        Names the table in messages (store path and group).
    reserved
        Returns column names that may not be written (``<assay>_I`` of every
        assay, for the cell table).
    writable
        False for a store opened read-only: every write raises
        :class:`ReadOnlyStoreError`.
    """

    def __init__(
        self,
        group: zarr.Group,
        *,
        dimension: str,
        where: str,
        reserved: Callable[[], Iterable[str]] = tuple,
        writable: bool = False,
    ) -> None:
        self._group = group
        self.dimension = dimension
        self.where = where
        self._reserved = reserved
        self.writable = writable
        columns = group.attrs.get(COLUMNS_ATTRIBUTE)
        if (
            not isinstance(columns, list)
            or not all(isinstance(c, str) for c in columns)
            or "ids" not in columns
            or "I" not in columns
        ):
            msg = f"{where}: attribute {COLUMNS_ATTRIBUTE!r} must list the columns, with 'ids' and 'I'; found {columns!r}; re-import the store"
            raise CyteArcError(msg)
        self.n_rows = int(self._array("ids").shape[0])

    @property
    def columns(self) -> list[str]:
        """Column names, in order."""
        return list(self._group.attrs[COLUMNS_ATTRIBUTE])  # type: ignore[arg-type]

    def _array(self, column: str) -> zarr.Array[Any]:
        if column not in self.columns:
            msg = f"{self.where}: no column {column!r}; columns are {self.columns}"
            raise KeyError(msg)
        node = self._group[column]
        if not isinstance(node, zarr.Array):
            msg = f"{self.where}/{column}: expected an array"
            raise CyteArcError(msg)
        return node

    def fetch_all(self, column: str) -> np.ndarray:
        """Every value of ``column``."""
        values: np.ndarray = np.asarray(self._array(column)[:])
        return values

    def attributes(self, column: str) -> dict[str, Any]:
        """The stored attributes of ``column``."""
        return dict(self._array(column).attrs)

    def _key_mask(self, key: str) -> np.ndarray:
        mask = self.fetch_all(key)
        if mask.dtype != np.bool_:
            msg = f"{self.where}: key column {key!r} must be boolean, found {mask.dtype}"
            raise CyteArcError(msg)
        return mask

    def fetch(self, column: str, key: str = "I") -> np.ndarray:
        """The values of ``column`` in the rows that the boolean column ``key`` marks."""
        values: np.ndarray = self.fetch_all(column)[self._key_mask(key)]
        return values

    def to_pandas(self, key: str | None = None) -> pd.DataFrame:
        """The table as a DataFrame (all rows, or those ``key`` marks)."""
        frame = pd.DataFrame({c: self.fetch_all(c) for c in self.columns})
        return frame if key is None else frame[self._key_mask(key)].reset_index(drop=True)

    def _check_write(self, column: str, *, operation: str) -> None:
        if not self.writable:
            msg = f"{self.where}: {operation} {column!r} needs a writable store; open it with zarr_mode='r+'"
            raise ReadOnlyStoreError(msg)
        if column in set(self._reserved()):
            msg = (
                f"{self.where}: {column!r} is reserved for assay membership; {operation} refuses it "
                "before reading any value - choose another name"
            )
            raise ReservedColumnError(msg)

    def insert(
        self,
        column: str,
        values: Any,  # noqa: ANN401 (any sequence or array of column values)
        *,
        key: str = "I",
        overwrite: bool = False,
        fill_value: object = None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        """Add ``column``: one value per row of the table, or per row that ``key`` marks.

        Rows outside ``key`` take ``fill_value`` (NaN for numbers, "" for text,
        False for booleans when None). ``attributes`` are stored on the column
        (operations mark the columns they write with ``cytearc:generatedBy``).
        """
        self._check_write(column, operation="insert")
        if column in self.columns and not overwrite:
            msg = f"{self.where}: column {column!r} exists; pass overwrite=True to replace it"
            raise CyteArcError(msg)
        if column in ("ids", "I"):
            msg = f"{self.where}: column {column!r} belongs to the table; it cannot be replaced"
            raise ReservedColumnError(msg)
        series = pd.Series(values)
        if len(series) != self.n_rows:
            mask = self._key_mask(key)
            if len(series) != int(mask.sum()):
                msg = f"{self.where}: {len(series)} values for {self.n_rows} rows or the {int(mask.sum())} rows of key {key!r}"
                raise CyteArcError(msg)
            stored = _as_storable(column, series, n_rows=len(series), where=self.where)
            full = np.empty(self.n_rows, dtype=stored.dtype if stored.dtype.kind != "b" else bool)
            if fill_value is None:
                fill_value = {"b": False, "O": ""}.get(stored.dtype.kind, np.nan)
                if stored.dtype.kind in "iu":
                    full = full.astype(np.float64)
            full[:] = fill_value
            full[mask] = stored
            stored = full
        else:
            stored = _as_storable(column, series, n_rows=self.n_rows, where=self.where)
        _create_column(self._group, column, stored, dimension=self.dimension, attributes=attributes)
        if column not in self.columns:
            self._group.attrs[COLUMNS_ATTRIBUTE] = [*self.columns, column]

    def update_key(self, values: np.ndarray, key: str) -> None:
        """Set the boolean column ``key``: ``values`` for the rows it marks now, False elsewhere."""
        self._check_write(key, operation="update_key")
        mask = self._key_mask(key)
        values = np.asarray(values, dtype=bool)
        if len(values) != int(mask.sum()):
            msg = f"{self.where}: update_key needs {int(mask.sum())} values for the rows of {key!r}, found {len(values)}"
            raise CyteArcError(msg)
        updated = np.zeros(self.n_rows, dtype=bool)
        updated[mask] = values
        self._array(key)[:] = updated

    def reset_key(self, key: str) -> None:
        """Mark every row in the boolean column ``key``."""
        self._check_write(key, operation="reset_key")
        self._key_mask(key)
        self._array(key)[:] = np.ones(self.n_rows, dtype=bool)

    def drop(self, column: str) -> None:
        """Remove ``column``; ``ids``, ``I`` and assay-membership columns are protected."""
        if not self.writable:
            msg = (
                f"{self.where}: drop {column!r} needs a writable store; open it with zarr_mode='r+'"
            )
            raise ReadOnlyStoreError(msg)
        if column in ("ids", "I") or self._array(column).attrs.get("role") == "assay_membership":
            msg = f"{self.where}: column {column!r} is protected and cannot be dropped"
            raise ReservedColumnError(msg)
        self._group.attrs[COLUMNS_ATTRIBUTE] = [c for c in self.columns if c != column]
        del self._group[column]
