"""Cell and feature tables stored as one Zarr node per column.

A table is a Zarr group whose attribute ``cytearc:columns`` lists its columns
in order; each column is stored in the encoding of
:mod:`cytearc.metadata.encoding`, which keeps dtypes, categories and their
order, missing values and datetimes. Every table has ``ids`` and the boolean
key ``I`` (rows in use). Boolean columns serve as keys: :meth:`MetaData.fetch`
returns the rows a key marks.

Two views are read: :meth:`MetaData.fetch_all` and :meth:`MetaData.fetch`
give NumPy arrays (see :func:`~cytearc.metadata.encoding.as_numpy`);
:meth:`MetaData.fetch_series` and :meth:`MetaData.to_pandas` give the
columns with their pandas dtypes.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import zarr

from cytearc.errors import (
    ColumnNotFoundError,
    CyteArcError,
    InterruptedReplaceError,
    ReadOnlyStoreError,
    ReservedColumnError,
    StoreDamageError,
)
from cytearc.metadata.encoding import (
    DIGEST_ATTRIBUTE,
    ENCODING_ATTRIBUTE,
    EncodedColumn,
    as_numpy,
    column_digest,
    column_length,
    encode_column,
    read_column,
    write_column,
)
from cytearc.storage.nodes import child_node

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = [
    "COLUMNS_ATTRIBUTE",
    "COLUMNS_DIGEST_ATTRIBUTE",
    "GENERATED_ATTRIBUTE",
    "REPLACING_ATTRIBUTE",
    "MetaData",
    "Staging",
    "columns_digest",
    "list_columns",
    "replacing",
    "write_table",
]

COLUMNS_ATTRIBUTE: Final = "cytearc:columns"
COLUMNS_DIGEST_ATTRIBUTE: Final = "cytearc:columnsDigest"
"""The SHA-256 of ``cytearc:columns``, written with it in one ``zarr.json`` write (checked when present)."""
REPLACING_ATTRIBUTE: Final = "cytearc:replacing"
"""The columns a staged block started replacing and has not finished (absent when none)."""
GENERATED_ATTRIBUTE: Final = "cytearc:generatedBy"
"""Attribute of a column that an analysis operation wrote: ``{operation, artifact}``."""


def columns_digest(columns: list[str]) -> str:
    r"""The SHA-256 of a table's column list, as ``sha256:<hex>``.

    Over the text ``cytearc columns digest 1\n`` then each name in order,
    UTF-8, each followed by a NUL. A name removed from, added to or moved in
    ``cytearc:columns`` without the digest changes it.

    Parameters
    ----------
    columns
        The column names, in order.

    Returns
    -------
    str
        The digest.

    Examples
    --------
    >>> columns_digest(["ids", "I"]) == columns_digest(["I", "ids"])
    False
    """
    digest = hashlib.sha256(b"cytearc columns digest 1\n")
    for name in columns:
        digest.update(name.encode("utf-8") + b"\0")
    return f"sha256:{digest.hexdigest()}"


def list_columns(group: zarr.Group, columns: list[str]) -> None:
    """Write ``cytearc:columns`` and its digest in one update of the group's ``zarr.json``.

    For writers that store a column's arrays themselves (an import writing
    assay membership); :meth:`MetaData.insert` lists the columns it writes.

    Parameters
    ----------
    group
        The table group.
    columns
        Every column name, in order.
    """
    _finish_replacing(group, columns, done=())


def replacing(group: zarr.Group) -> list[str]:
    """The columns of ``group`` whose replacement together a killed writer left unfinished.

    Parameters
    ----------
    group
        The table group.

    Returns
    -------
    list of str
        The names in ``cytearc:replacing`` (empty when the attribute is absent).
    """
    names = group.attrs.get(REPLACING_ATTRIBUTE)
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        msg = f"{group.path or '/'}: attribute {REPLACING_ATTRIBUTE!r} must list column names; found {names!r}; the store is damaged - run `cytearc verify`"
        raise StoreDamageError(msg)
    return names


def _finish_replacing(group: zarr.Group, columns: list[str], *, done: Iterable[str]) -> None:
    """List ``columns`` (with their digest) and unmark ``done`` from ``cytearc:replacing``, in one ``zarr.json`` write.

    A column no longer listed is unmarked too.
    """
    remaining = [c for c in replacing(group) if c not in set(done) and c in columns]
    attributes = dict(group.attrs)
    attributes.pop(REPLACING_ATTRIBUTE, None)
    attributes |= {
        COLUMNS_ATTRIBUTE: list(columns),
        COLUMNS_DIGEST_ATTRIBUTE: columns_digest(columns),
    }
    if remaining:
        attributes[REPLACING_ATTRIBUTE] = remaining
    group.attrs.put(attributes)


def _validate_name(name: object, *, where: str) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in {".", ".."}:
        msg = f"{where}: column name {name!r} is not a non-empty string without '/'; rename the column"
        raise CyteArcError(msg)
    return name


def _validate_key(name: str, column: EncodedColumn, *, where: str) -> None:
    if name == "I" and column.encoding.type != "bool":
        msg = f"{where}: column 'I' is the key of rows in use and must be boolean, found {column.encoding.type}; rename the column"
        raise CyteArcError(msg)


def write_table(group: zarr.Group, table: pd.DataFrame, *, dimension: str, where: str) -> None:
    """Write every column of ``table`` (with ``ids`` first) and the key ``I`` into ``group``.

    Every column is encoded (and refused) before anything is written.

    Parameters
    ----------
    group
        The empty table group.
    table
        The columns, in order; the index is not stored.
    dimension
        ``"cell"`` or ``"feature"``: the dimension name of the column arrays.
    where
        Names the table in messages.

    Raises
    ------
    CyteArcError
        If a column name is not a string, is repeated or holds ``/``, or a
        column holds values no encoding stores.
    """
    names = [_validate_name(name, where=where) for name in table.columns]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        msg = f"{where}: the columns {repeated} appear more than once; rename them"
        raise CyteArcError(msg)
    n_rows = len(table)
    encoded = {
        name: encode_column(table.iloc[:, i], n_rows=n_rows, where=f"{where}/{name}")
        for i, name in enumerate(names)
    }
    for name, column in encoded.items():
        _validate_key(name, column, where=where)
    if "I" not in encoded:
        encoded["I"] = encode_column(np.ones(n_rows, dtype=bool), n_rows=n_rows, where=where)
    for name, column in encoded.items():
        write_column(group, name, column, dimension=dimension)
    list_columns(group, list(encoded))


def _rewrite_key(array: zarr.Array[Any], values: np.ndarray) -> None:
    """Write a boolean key's values in place, then the digest that reads check."""
    array[:] = values
    array.attrs[DIGEST_ATTRIBUTE] = column_digest({"": values})


class Staging:
    """Column writes and group attributes held back until :meth:`MetaData.staged` ends well.

    Staged columns are kept in memory in their stored encoding, so reads
    inside the block see exactly what the commit will write.
    """

    def __init__(self) -> None:
        self.group = zarr.group(zarr.storage.MemoryStore())
        self.columns: dict[str, tuple[EncodedColumn, dict[str, Any] | None]] = {}
        self.attributes: dict[tuple[str, str], tuple[zarr.Group | zarr.Array[Any], Any]] = {}

    def set_attribute(self, group: zarr.Group | zarr.Array[Any], key: str, value: object) -> None:
        """Stage ``group.attrs[key] = value``.

        Parameters
        ----------
        group
            A group of the store.
        key
            The attribute.
        value
            Its JSON value.
        """
        self.attributes[group.path, key] = (group, value)

    def attribute(
        self,
        group: zarr.Group | zarr.Array[Any],
        key: str,
        default: object = None,
    ) -> Any:  # noqa: ANN401
        """``group.attrs[key]`` as the commit will leave it.

        Parameters
        ----------
        group
            A group of the store.
        key
            The attribute.
        default
            The value when neither the staging nor the group has it.

        Returns
        -------
        object
            The staged value, else the stored one, else ``default``.
        """
        staged = self.attributes.get((group.path, key))
        return staged[1] if staged is not None else group.attrs.get(key, default)


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

    Raises
    ------
    CyteArcError
        The group's ``cytearc:columns`` does not list the columns with
        ``ids`` and ``I``, or a listed column is not stored.

    Examples
    --------
    >>> import pandas as pd, zarr
    >>> group = zarr.group(zarr.storage.MemoryStore())
    >>> frame = pd.DataFrame({"ids": ["c1", "c2", "c3"], "kind": pd.Categorical(["T", "B", "T"])})
    >>> write_table(group, frame, dimension="cell", where="cells")
    >>> cells = MetaData(group, dimension="cell", where="cells", writable=True)
    >>> cells.columns, cells.n_rows
    (['ids', 'kind', 'I'], 3)
    >>> cells.insert("is_t", cells.fetch_all("kind") == "T")
    >>> cells.fetch("ids", key="is_t")
    array(['c1', 'c3'], dtype=object)
    >>> cells.fetch_series("kind").cat.categories.tolist()
    ['B', 'T']
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
        self.staging: Staging | None = None
        """The writes held back by an active :meth:`staged` block, else None."""
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
        recorded = group.attrs.get(COLUMNS_DIGEST_ATTRIBUTE)
        if recorded is not None and recorded != columns_digest(columns):
            msg = (
                f"{where}: attribute {COLUMNS_ATTRIBUTE!r} differs from the digest recorded with it "
                f"({COLUMNS_DIGEST_ATTRIBUTE!r}): a column name was removed, added or moved; the "
                "store is damaged - run `cytearc verify` and restore the store from a copy, or "
                "import the source again"
            )
            raise StoreDamageError(msg)
        self.n_rows = column_length(self._node("ids"), where=f"{where}/ids")

    @property
    def group(self) -> zarr.Group:
        """The table's Zarr group (writers that store a column themselves write through it)."""
        return self._group

    @property
    def columns(self) -> list[str]:
        """Column names, in order (with the columns a :meth:`staged` block holds)."""
        stored: list[str] = list(self._group.attrs[COLUMNS_ATTRIBUTE])  # type: ignore[arg-type]
        if self.staging is None:
            return stored
        return stored + [c for c in self.staging.columns if c not in stored]

    @contextmanager
    def staged(self) -> Iterator[Staging]:
        """Hold back :meth:`insert` (and staged group attributes) until the block ends without error.

        Inside the block the table reads as if the columns were written; when
        the block raises, nothing of it is written. A pipeline run stages the
        columns its operations write, so a failed run leaves every column as
        it was.

        Yields
        ------
        Staging
            The held-back writes (:meth:`Staging.set_attribute` stages an
            attribute of another group with them).

        Raises
        ------
        CyteArcError
            A staged block is already active on this table.

        Examples
        --------
        >>> import pandas as pd, zarr
        >>> group = zarr.group(zarr.storage.MemoryStore())
        >>> write_table(group, pd.DataFrame({"ids": ["c1", "c2"]}), dimension="cell", where="cells")
        >>> cells = MetaData(group, dimension="cell", where="cells", writable=True)
        >>> try:
        ...     with cells.staged():
        ...         cells.insert("score", [0.5, 0.7])
        ...         raise RuntimeError("a later step failed")
        ... except RuntimeError:
        ...     pass
        >>> "score" in cells.columns
        False
        """
        if self.staging is not None:
            msg = f"{self.where}: a staged block is already active on this table; finish it first"
            raise CyteArcError(msg)
        staging = self.staging = Staging()
        try:
            yield staging
        finally:
            self.staging = None
        listed = self.columns
        replaced = [c for c in staging.columns if c in listed]
        marked = replacing(self._group)
        if replaced:  # readers refuse these until the block's last write unmarks them
            self._group.attrs[REPLACING_ATTRIBUTE] = [
                *marked,
                *(c for c in replaced if c not in marked),
            ]
        for column, (encoded, attributes) in staging.columns.items():
            write_column(
                self._group, column, encoded, dimension=self.dimension, attributes=attributes
            )
        added = [c for c in staging.columns if c not in listed]
        if added or replaced:  # new columns appear, replaced ones are unmarked, in one write
            _finish_replacing(self._group, [*listed, *added], done=staging.columns)
        for (_, key), (group, value) in staging.attributes.items():
            group.attrs[key] = value

    def _node(self, column: str) -> zarr.Array[Any] | zarr.Group:
        if column not in self.columns:
            msg = (
                f"{self.where}: no column {column!r}; columns are {self.columns} - pass one of them"
            )
            raise ColumnNotFoundError(msg)
        if self.staging is not None and column in self.staging.columns:
            return self.staging.group[column]
        if column in (marked := replacing(self._group)):
            msg = (
                f"{self.where}/{column}: a writer was killed while replacing the columns {marked} "
                "together, so their values may mix two writes; run the operation that writes them "
                f"again (for a pipeline run: `cytearc run` again), or drop them with the table's "
                f".drop({column!r}) and recompute them"
            )
            raise InterruptedReplaceError(msg)
        node = child_node(self._group, column, where=self.where)
        if not isinstance(node, zarr.Array | zarr.Group):
            msg = f"{self.where}/{column}: the column is listed in {COLUMNS_ATTRIBUTE!r} but not stored (a writer was killed while replacing it); drop it with the table's .drop({column!r}) and recompute it, or re-import the store"
            raise CyteArcError(msg)
        return node

    def fetch_series(self, column: str, key: str | None = None) -> pd.Series:
        """``column`` with its pandas dtype (all rows, or those the boolean column ``key`` marks).

        Categoricals keep their categories and order, datetimes their unit
        and time zone, nullable columns their dtype, and missing values are
        missing (``None`` in text, ``<NA>``, NaN or NaT).

        Parameters
        ----------
        column
            The column's name.
        key
            A boolean column; None for every row. The rows keep their order,
            indexed from 0.

        Returns
        -------
        pandas.Series
            Named ``column``.

        Raises
        ------
        KeyError
            If the table has no such column.
        StoreFormatError
            If the column's stored encoding is unknown or damaged.
        """
        series = read_column(self._node(column), n_rows=self.n_rows, where=f"{self.where}/{column}")
        series.name = column
        if key is None:
            return series
        return series[self._key_mask(key)].reset_index(drop=True)

    def fetch_all(self, column: str) -> np.ndarray:
        """Every value of ``column`` as a NumPy array.

        Text (and categoricals of text) is an object array of ``str``, with
        ``None`` where a value is missing, so ``.astype(str)``, ``.tolist()``,
        ``pd.Index(...)`` and ``==`` work as on any NumPy array; see
        :func:`~cytearc.metadata.encoding.as_numpy` for every kind, and
        :meth:`fetch_series` for the pandas dtype.

        Parameters
        ----------
        column
            The column's name.

        Returns
        -------
        numpy.ndarray
            One value per row.

        Raises
        ------
        KeyError
            If the table has no such column.
        StoreFormatError
            If the column's stored encoding is unknown or damaged.
        """
        return as_numpy(self.fetch_series(column))

    def attributes(self, column: str) -> dict[str, Any]:
        """The stored attributes of ``column`` (its encoding under ``cytearc:encoding``).

        Parameters
        ----------
        column
            The column's name.

        Returns
        -------
        dict
            A copy of the attributes.

        Raises
        ------
        KeyError
            If the table has no such column.
        """
        return dict(self._node(column).attrs)

    def _key_mask(self, key: str) -> np.ndarray:
        mask = self.fetch_all(key)
        if mask.dtype != np.bool_:
            msg = f"{self.where}: key column {key!r} must be boolean, found {mask.dtype}"
            raise CyteArcError(msg)
        return mask

    def _key_array(self, key: str) -> zarr.Array[Any]:
        self._key_mask(key)
        node = self._node(key)
        if not isinstance(node, zarr.Array):
            msg = f"{self.where}: key column {key!r} is a nullable boolean; only a bool column is updated as a key"
            raise CyteArcError(msg)
        return node

    def fetch(self, column: str, key: str = "I") -> np.ndarray:
        """The values of ``column`` (as :meth:`fetch_all`) in the rows that the boolean column ``key`` marks.

        Parameters
        ----------
        column
            The column's name.
        key
            A boolean column.

        Returns
        -------
        numpy.ndarray
            One value per row of ``key``, in row order.

        Raises
        ------
        KeyError
            If the table has no column ``column`` or ``key``.
        CyteArcError
            If ``key`` is not boolean.
        """
        values: np.ndarray = self.fetch_all(column)[self._key_mask(key)]
        return values

    def to_pandas(self, key: str | None = None) -> pd.DataFrame:
        """The table as a DataFrame with each column's pandas dtype (all rows, or those ``key`` marks).

        Parameters
        ----------
        key
            A boolean column; None for every row.

        Returns
        -------
        pandas.DataFrame
            One column per column of the table, in order, indexed from 0.

        Raises
        ------
        KeyError
            If the table has no column ``key``.
        CyteArcError
            If ``key`` is not boolean.
        """
        mask = None if key is None else self._key_mask(key)
        frame = pd.DataFrame({c: self.fetch_series(c) for c in self.columns})
        return frame if mask is None else frame[mask].reset_index(drop=True)

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

    def _refuse_staged(self, operation: str) -> None:
        if self.staging is not None:
            msg = f"{self.where}: {operation} writes at once, so it cannot run inside a staged block (a pipeline run); call it before or after"
            raise CyteArcError(msg)

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

        The column keeps its dtype (categories and their order, datetimes,
        nullable dtypes, missing values), as the import writes them.

        Parameters
        ----------
        column
            The new column's name.
        values
            A sequence, NumPy array or :class:`pandas.Series` (its index is
            ignored) of one value per row, or per row of ``key``.
        key
            The boolean column whose rows ``values`` fill when there are fewer
            values than rows.
        overwrite
            Replace an existing column.
        fill_value
            The value of the rows outside ``key``. None: False for booleans,
            else a missing value (NaN for floats, and integers, which become
            float64; NaT; missing text or category; ``<NA>`` for pandas'
            nullable dtypes).
        attributes
            Stored on the column (operations mark the columns they write with
            ``cytearc:generatedBy``).

        Raises
        ------
        ReadOnlyStoreError
            If the store was opened read-only.
        ReservedColumnError
            If ``column`` is ``ids``, ``I`` or an assay membership column.
        CyteArcError
            If the column exists and ``overwrite`` is False, the number of
            values matches neither the rows nor the rows of ``key``, or the
            values cannot be stored.
        """
        self._check_write(column, operation="insert")
        _validate_name(column, where=self.where)
        if column in self.columns and not overwrite:
            msg = f"{self.where}: column {column!r} exists; pass overwrite=True to replace it"
            raise CyteArcError(msg)
        if column in ("ids", "I"):
            msg = f"{self.where}: column {column!r} belongs to the table; it cannot be replaced"
            raise ReservedColumnError(msg)
        if attributes and {ENCODING_ATTRIBUTE, DIGEST_ATTRIBUTE} & set(attributes):
            msg = f"{self.where}: attributes {ENCODING_ATTRIBUTE!r} and {DIGEST_ATTRIBUTE!r} of {column!r} are written from the values; leave them out"
            raise CyteArcError(msg)
        series = (
            values.reset_index(drop=True) if isinstance(values, pd.Series) else pd.Series(values)
        )
        if len(series) != self.n_rows:
            mask = self._key_mask(key)
            if len(series) != int(mask.sum()):
                msg = f"{self.where}: {len(series)} values for {self.n_rows} rows or the {int(mask.sum())} rows of key {key!r}"
                raise CyteArcError(msg)
            series = self._expanded(series, mask, fill_value=fill_value, column=column)
        encoded = encode_column(series, n_rows=self.n_rows, where=f"{self.where}/{column}")
        if self.staging is not None:
            write_column(
                self.staging.group, column, encoded, dimension=self.dimension, attributes=attributes
            )
            self.staging.columns[column] = (encoded, attributes)
            return
        write_column(self._group, column, encoded, dimension=self.dimension, attributes=attributes)
        if column not in self.columns:
            list_columns(self._group, [*self.columns, column])
        elif column in replacing(self._group):
            _finish_replacing(self._group, self.columns, done=[column])

    def _expanded(
        self, series: pd.Series, mask: np.ndarray, *, fill_value: object, column: str
    ) -> pd.Series:
        """``series`` at the rows ``mask`` marks, ``fill_value`` (or missing) elsewhere."""
        dtype = series.dtype
        numpy_dtype = not isinstance(dtype, pd.api.extensions.ExtensionDtype)
        if fill_value is None and numpy_dtype and dtype.kind == "b":
            fill_value = False
        if numpy_dtype and dtype.kind in "biufMm":
            values = series.to_numpy()
            fill: Any = fill_value
            if fill is None:
                fill = np.nan if dtype.kind in "iuf" else np.array("NaT", dtype=values.dtype)
            try:
                full = np.full(self.n_rows, fill, dtype=np.result_type(values, fill))
            except (TypeError, ValueError) as error:
                msg = f"{self.where}: fill_value {fill_value!r} does not fit column {column!r} of dtype {dtype} ({error}); give a fill_value of that dtype"
                raise CyteArcError(msg) from error
            full[mask] = values
            return pd.Series(full)
        full_series = series.set_axis(np.flatnonzero(mask)).reindex(range(self.n_rows))
        if fill_value is not None:
            try:
                full_series[~mask] = fill_value
            except (TypeError, ValueError) as error:
                msg = f"{self.where}: fill_value {fill_value!r} does not fit column {column!r} of dtype {dtype} ({error}); give a fill_value of that dtype"
                raise CyteArcError(msg) from error
        return full_series

    def update_key(self, values: np.ndarray, key: str) -> None:
        """Set the boolean column ``key``: ``values`` for the rows it marks now, False elsewhere.

        Parameters
        ----------
        values
            One boolean per row that ``key`` marks now.
        key
            A boolean column (such as ``I``).

        Raises
        ------
        ReadOnlyStoreError
            If the store was opened read-only.
        ReservedColumnError
            If ``key`` is an assay membership column.
        KeyError
            If the table has no column ``key``.
        CyteArcError
            If ``key`` is not a bool column, or ``values`` has not one value
            per row it marks.
        """
        self._check_write(key, operation="update_key")
        self._refuse_staged("update_key")
        array = self._key_array(key)
        mask = self._key_mask(key)
        values = np.asarray(values, dtype=bool)
        if len(values) != int(mask.sum()):
            msg = f"{self.where}: update_key needs {int(mask.sum())} values for the rows of {key!r}, found {len(values)}"
            raise CyteArcError(msg)
        updated = np.zeros(self.n_rows, dtype=bool)
        updated[mask] = values
        _rewrite_key(array, updated)

    def reset_key(self, key: str) -> None:
        """Mark every row in the boolean column ``key``.

        Parameters
        ----------
        key
            A boolean column (such as ``I``).

        Raises
        ------
        ReadOnlyStoreError
            If the store was opened read-only.
        ReservedColumnError
            If ``key`` is an assay membership column.
        KeyError
            If the table has no column ``key``.
        CyteArcError
            If ``key`` is not a bool column.
        """
        self._check_write(key, operation="reset_key")
        self._refuse_staged("reset_key")
        _rewrite_key(self._key_array(key), np.ones(self.n_rows, dtype=bool))

    def drop(self, column: str) -> None:
        """Remove ``column``; ``ids``, ``I`` and assay-membership columns are protected.

        Parameters
        ----------
        column
            The column's name.

        Raises
        ------
        ReadOnlyStoreError
            If the store was opened read-only.
        ReservedColumnError
            If ``column`` is ``ids``, ``I`` or an assay membership column.
        KeyError
            If the table has no such column.
        """
        if not self.writable:
            msg = (
                f"{self.where}: drop {column!r} needs a writable store; open it with zarr_mode='r+'"
            )
            raise ReadOnlyStoreError(msg)
        self._refuse_staged("drop")
        if column not in self.columns:
            msg = (
                f"{self.where}: no column {column!r}; columns are {self.columns} - pass one of them"
            )
            raise ColumnNotFoundError(msg)
        node = child_node(
            self._group, column, where=self.where
        )  # None: a writer killed mid-replace
        if column in ("ids", "I") or (
            node is not None and node.attrs.get("role") == "assay_membership"
        ):
            msg = f"{self.where}: column {column!r} is protected and cannot be dropped"
            raise ReservedColumnError(msg)
        _finish_replacing(self._group, [c for c in self.columns if c != column], done=[column])
        if node is not None:
            del self._group[column]
