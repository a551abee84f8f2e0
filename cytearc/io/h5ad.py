"""H5AD files (AnnData on HDF5), read with h5py in bands of cells.

``X`` or a layer is read as stored: a dense 2-D dataset by rows, a CSR group
by slicing ``indptr``, and a CSC group (whose every column holds cells of
any band) by bucketing its columns, on first use, into files by band of
cells in a temporary directory that ``close`` removes. ``obs`` and ``var``
are decoded from AnnData's element encodings (``dataframe``,
``string-array``, ``categorical``, ``nullable-*`` and the pre-0.7
``__categories`` layout).

A sparse matrix that stores a coordinate twice is refused as damage
(:class:`~cytearc.errors.RepeatedEntryError`), and an HDF5 chunk that cannot
be read raises :class:`~cytearc.errors.DamagedSourceError` naming the file
and the dataset.

The AnnData need not be the file's root: ``group=`` reads one stored in a
group, as a MuData file (``.h5mu``) stores each modality in ``/mod/<name>``
(:mod:`cytearc.io.h5mu`), and :func:`read_cell_table` decodes any ``obs``
dataframe, such as a MuData file's global one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import h5py
import numpy as np
import pandas as pd

from cytearc.errors import SourceFormatError
from cytearc.io.bands import (
    CHUNK_ENTRIES,
    DEFAULT_BAND_ROWS,
    GENE_EXPRESSION,
    BandBuckets,
    read_compressed_rows,
    validate_band,
    validate_band_rows,
    validate_unique_cells,
)
from cytearc.io.damage import open_hdf5, read_dataset
from cytearc.io.sources import FileSource, canonical_csr, source_location

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    import scipy.sparse as sp

    from cytearc.io.bands import EntryName
    from cytearc.io.sources import RemoteFile
    from cytepool.locations import Location

__all__ = ["H5adSource", "read_cell_table"]

NAME_COLUMNS: Final = ("gene_symbols", "feature_name", "name")
"""``var`` columns that name features, in order of preference; else the index names them."""
TYPE_COLUMNS: Final = ("feature_types", "feature_type")
"""``var`` columns that type features; else they are "Gene Expression"."""

_Column = np.ndarray | pd.Categorical | pd.api.extensions.ExtensionArray


def _attr_text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _encoding(node: h5py.Dataset | h5py.Group) -> str | None:
    value = node.attrs.get("encoding-type")
    return None if value is None else _attr_text(value)


def _where(node: h5py.Dataset | h5py.Group) -> str:
    return f"{node.file.filename}: {node.name}"


def _strings(dataset: h5py.Dataset) -> np.ndarray:
    return read_dataset(dataset, strings=True)


def _read_array(dataset: h5py.Dataset) -> np.ndarray:
    if dataset.ndim != 1:
        msg = f"{_where(dataset)}: a column must be 1-D, found shape {dataset.shape}"
        raise SourceFormatError(msg)
    if h5py.check_string_dtype(dataset.dtype) is not None:
        return _strings(dataset)
    values = read_dataset(dataset)
    if values.dtype.kind not in "biuf":
        msg = f"{_where(dataset)}: a column of {values.dtype} is not supported"
        raise SourceFormatError(msg)
    return values


def _member(group: h5py.Group, key: str, *, encoding: str) -> h5py.Dataset:
    """The dataset ``key`` of a column stored as a group, or a SourceFormatError naming both."""
    node = group.get(key)
    if not isinstance(node, h5py.Dataset):
        found = "missing" if node is None else "a group"
        msg = (
            f"{_where(group)}/{key}: expected the dataset of {key} of an AnnData {encoding} "
            f"column, found it {found}; the file is damaged or incomplete: write it again with anndata"
        )
        raise SourceFormatError(msg)
    return node


def _categorical(
    codes: h5py.Dataset, categories: h5py.Dataset, *, ordered: object
) -> pd.Categorical:
    values = _read_array(codes)
    if values.dtype.kind not in "iu":
        msg = f"{_where(codes)}: categorical codes must be integers, found {values.dtype}"
        raise SourceFormatError(msg)
    levels = _read_array(categories)
    if values.size and (values.min() < -1 or values.max() >= levels.size):
        msg = (
            f"{_where(codes)}: categorical codes must lie in [-1, {levels.size}) for the "
            f"{levels.size} categories of {categories.name}, found {values.min()}..{values.max()}; "
            "the file is damaged: write it again with anndata"
        )
        raise SourceFormatError(msg)
    try:
        dtype = pd.CategoricalDtype(pd.Index(levels), ordered=bool(ordered))
    except (ValueError, TypeError) as error:
        msg = (
            f"{_where(categories)}: expected distinct, non-missing categories, found others "
            f"({error}); the file is damaged: write it again with anndata"
        )
        raise SourceFormatError(msg) from error
    return pd.Categorical.from_codes(values.astype(np.int64), dtype=dtype)


def _referenced_categories(codes: h5py.Dataset) -> h5py.Dataset:
    """The categories of a pre-0.7 categorical column, which references them from an attribute."""
    try:
        node = codes.parent[codes.attrs["categories"]]
    except (KeyError, ValueError, TypeError) as error:
        node = None
        detail = f" ({error})"
    else:
        detail = ""
    if not isinstance(node, h5py.Dataset):
        msg = (
            f"{_where(codes)}: its attribute 'categories' must reference the dataset of its "
            f"categories, found no dataset there{detail}; the file is damaged: write it again with anndata"
        )
        raise SourceFormatError(msg)
    return node


def _read_column(node: h5py.Dataset | h5py.Group) -> _Column:
    """One ``obs`` or ``var`` column, decoded from its AnnData encoding."""
    encoding = _encoding(node)
    if isinstance(node, h5py.Dataset):
        if "categories" in node.attrs:
            categories = _referenced_categories(node)
            return _categorical(node, categories, ordered=categories.attrs.get("ordered", False))
        if encoding in {None, "array", "string-array"}:
            return _read_array(node)
    elif encoding == "categorical":
        return _categorical(
            _member(node, "codes", encoding=encoding),
            _member(node, "categories", encoding=encoding),
            ordered=node.attrs.get("ordered", False),
        )
    elif encoding in {"nullable-integer", "nullable-boolean", "nullable-string-array"}:
        values = _read_array(_member(node, "values", encoding=encoding))
        mask = _read_array(_member(node, "mask", encoding=encoding)).astype(bool)
        if mask.shape != values.shape:
            msg = (
                f"{_where(node)}: expected a mask of {values.size} values as its values, "
                f"found {mask.size}; the file is damaged: write it again with anndata"
            )
            raise SourceFormatError(msg)
        if encoding == "nullable-integer":
            return pd.arrays.IntegerArray(values, mask)
        if encoding == "nullable-boolean":
            return pd.arrays.BooleanArray(values.astype(bool), mask)
        strings = pd.array(values, dtype=pd.StringDtype())
        strings[mask] = pd.NA
        return strings
    msg = f"{_where(node)}: the encoding {encoding!r} is not supported in a table; store the column as an array, string array, categorical or nullable array"
    raise SourceFormatError(msg)


def _read_dataframe(group: h5py.Group) -> tuple[np.ndarray, dict[str, _Column]]:
    """The index and the columns of an ``obs`` or ``var`` dataframe, in column order."""
    where = _where(group)
    if not isinstance(group, h5py.Group) or "_index" not in group.attrs:
        msg = f"{where}: not an AnnData dataframe (a group with an _index attribute)"
        raise SourceFormatError(msg)
    index_key = _attr_text(group.attrs["_index"])
    order = group.attrs.get("column-order", [])
    columns = [_attr_text(name) for name in np.atleast_1d(np.asarray(order)).tolist()]
    for key in (index_key, *columns):
        if key not in group:
            msg = f"{where}: the column {key!r} named by its attributes is missing"
            raise SourceFormatError(msg)
    index_node = group[index_key]
    if (
        not isinstance(index_node, h5py.Dataset)
        or h5py.check_string_dtype(index_node.dtype) is None
    ):
        msg = f"{where}/{index_key}: the index must be a string array"
        raise SourceFormatError(msg)
    index = _strings(index_node)
    read = {key: _read_column(group[key]) for key in columns}
    for key, values in read.items():
        if len(values) != index.size:
            msg = f"{where}/{key}: {len(values)} values for {index.size} rows"
            raise SourceFormatError(msg)
    return index, read


def read_cell_table(obs: h5py.Group | h5py.Dataset, *, where: str) -> pd.DataFrame:
    """An AnnData ``obs`` dataframe as a cell table: ``ids`` (its index, unique), then its columns.

    Parameters
    ----------
    obs
        The dataframe group (``/obs``, ``/mod/rna/obs``, ...).
    where
        The file and key, for messages (``"pbmc.h5ad: obs"``).

    Returns
    -------
    pandas.DataFrame
        Categorical columns as :class:`pandas.Categorical`, nullable ones
        in pandas' nullable dtypes.

    Raises
    ------
    SourceFormatError
        If ``obs`` is not an AnnData dataframe, a column has an unsupported
        encoding or the wrong length, an id repeats, or a column is named
        ``ids``.
    """
    ids, columns = _read_dataframe(obs)
    validate_unique_cells(ids, f"{where} index")
    return _table({"ids": ids}, columns, where)


def _as_strings(values: _Column, where: str) -> np.ndarray:
    strings = np.asarray(pd.Series(values).astype(object), dtype=object)
    bad = [i for i, value in enumerate(strings) if not isinstance(value, str)]
    if bad:
        msg = f"{where}: row {bad[0]} holds {strings[bad[0]]!r}; feature names and types must be strings without missing values"
        raise SourceFormatError(msg)
    return strings


def _table(first: dict[str, np.ndarray], rest: dict[str, _Column], where: str) -> pd.DataFrame:
    for key in rest:
        if key in first:
            msg = f"{where}: the column {key!r} collides with the table's own {key!r} column; rename it before import"
            raise SourceFormatError(msg)
    return pd.DataFrame({**first, **rest})


class H5adSource(FileSource):
    """``X`` or a layer of an H5AD file (or of an AnnData group), with ``obs`` and ``var``, read in bands of cells.

    ``cells`` holds ``ids`` (the ``obs`` index) then the ``obs`` columns.
    ``features`` holds ``ids`` (the ``var`` index), ``names`` (the first
    ``var`` column of :data:`NAME_COLUMNS`, else the ids), ``feature_types``
    (from :data:`TYPE_COLUMNS`, else "Gene Expression"), then the other
    ``var`` columns. Categorical columns are :class:`pandas.Categorical` and
    nullable ones pandas' nullable dtypes.

    Parameters
    ----------
    path
        The ``.h5ad`` file: a local path or an fsspec URL (``s3://...``),
        read in byte ranges (see :func:`~cytearc.io.sources.open_remote`).
    group
        The HDF5 group that holds the AnnData (``X``, ``obs``, ``var``,
        ``layers``): the root by default, ``"/mod/rna"`` for a modality of a
        MuData file.
    layer
        The layer (of ``group``) to read instead of ``X``.
    band_rows
        Cells per on-disk bucket when the matrix is CSC.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).
    download
        Copy a file at a URL into a temporary file first (removed on
        :meth:`close`) instead of reading it in byte ranges.

    Raises
    ------
    SourceFormatError
        If the file or the group is missing, the matrix or a table column has
        an unsupported encoding, the layer is missing, or the tables do not
        match the matrix.
    StoreAccessError
        If a file at a URL cannot be read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        group: str = "/",
        layer: str | None = None,
        band_rows: int = DEFAULT_BAND_ROWS,
        storage_options: Mapping[str, Any] | None = None,
        download: bool = False,
    ) -> None:
        validate_band_rows(band_rows)
        location = source_location(path, storage_options)
        where = Path(path) if location.is_local else location
        file, remote = open_hdf5(where, remedy="give an .h5ad file", download=download)
        self._attach(
            file, remote, path=where, group=group, layer=layer, band_rows=band_rows, owns_file=True
        )

    @classmethod
    def in_open_file(
        cls,
        file: h5py.File,
        *,
        path: Path | Location,
        group: str,
        layer: str | None = None,
        band_rows: int = DEFAULT_BAND_ROWS,
    ) -> H5adSource:
        """The AnnData in ``group`` of a file that another reader holds open.

        :meth:`close` removes the source's buckets but leaves ``file`` open:
        its opener closes it, after every source read from it.

        Parameters
        ----------
        file
            The open HDF5 file.
        path
            Where it was opened from, for messages.
        group, layer, band_rows
            As for :class:`H5adSource`.

        Returns
        -------
        H5adSource

        Raises
        ------
        SourceFormatError
            As :class:`H5adSource` raises it.
        """
        validate_band_rows(band_rows)
        source = cls.__new__(cls)
        source._attach(
            file, None, path=path, group=group, layer=layer, band_rows=band_rows, owns_file=False
        )
        return source

    def _attach(
        self,
        file: h5py.File,
        remote: RemoteFile | None,
        *,
        path: Path | Location,
        group: str,
        layer: str | None,
        band_rows: int,
        owns_file: bool,
    ) -> None:
        """Read the AnnData in ``group`` of the open ``file``; on failure, close what the source holds."""
        self._path, self._file, self._remote = path, file, remote
        self._owns_file = owns_file
        self._band_rows = band_rows
        self._buckets: BandBuckets | None = None
        try:
            self._root = self._group(group)
            self._open(layer)
        except BaseException:
            self.close()
            raise

    def _group(self, group: str) -> h5py.Group:
        node = self._file.get(group)
        if not isinstance(node, h5py.Group):
            found = "missing" if node is None else "a dataset"
            msg = f"{self._path}: {group}: expected the group of an AnnData (X, obs, var), found it {found}; name an AnnData group with group="
            raise SourceFormatError(msg)
        return node

    @property
    def _within(self) -> str:
        """What holds the AnnData, for messages: the file, or its group."""
        return "the file" if self._root.name == "/" else str(self._root.name)

    @property
    def _prefix(self) -> str:
        """The group as a prefix of the keys in messages (``mod/rna/``); empty at the root."""
        return "" if self._root.name == "/" else f"{str(self._root.name).strip('/')}/"

    def _open(self, layer: str | None) -> None:
        self._matrix = self._matrix_node(layer)
        self._key = str(self._matrix.name)
        if isinstance(self._matrix, h5py.Dataset):
            self._format = "dense"
            if self._matrix.ndim != 2:
                msg = f"{self._path}: {self._key} has shape {self._matrix.shape}; a count matrix is 2-D"
                raise SourceFormatError(msg)
            shape = tuple(int(n) for n in self._matrix.shape)
            stored = self._matrix
        else:
            self._format, shape = self._sparse_layout(self._matrix)
            for key in ("data", "indices", "indptr"):
                if key not in self._matrix:
                    msg = f"{self._path}: {self._key}/{key} is missing; the sparse matrix is incomplete"
                    raise SourceFormatError(msg)
            stored = self._matrix["data"]
            if self._matrix["indices"].shape != stored.shape:
                msg = f"{self._path}: {self._key}/indices has {self._matrix['indices'].shape[0]} entries for {stored.shape[0]} values"
                raise SourceFormatError(msg)
        self._dtype: np.dtype = np.dtype(stored.dtype)
        if self._dtype.kind not in "biuf":
            msg = f"{self._path}: {self._key} holds {self._dtype} values; counts are numbers"
            raise SourceFormatError(msg)
        self._cells = self._read_cells()
        self._features = self._read_features()
        self.membership = self._read_membership()
        if shape != (len(self._cells), len(self._features)):
            msg = f"{self._path}: {self._key} is {shape[0]} x {shape[1]} but obs has {len(self._cells)} rows and var {len(self._features)}"
            raise SourceFormatError(msg)
        if self._format == "csr":
            pointers = self._matrix["indptr"].shape[0]
            if pointers != shape[0] + 1:
                msg = f"{self._path}: {self._key}/indptr has {pointers} entries for {shape[0]} rows"
                raise SourceFormatError(msg)

    def _matrix_node(self, layer: str | None) -> h5py.Dataset | h5py.Group:
        if layer is None:
            if "X" not in self._root:
                msg = f"{self._path}: {self._within} has no X; choose a layer with layer="
                raise SourceFormatError(msg)
            key = "X"
            matrix = self._root.get("uns/cytearc/matrix")
            if isinstance(matrix, h5py.Dataset) and matrix.asstr()[()] == "normed":
                msg = f"{self._path}: {self._prefix}X holds normalized values ({self._prefix}uns/cytearc/matrix is 'normed': a CyteArc export), not counts; import the raw counts of a layer with layer= ({self._within} has the layers {list(self.layers)}), or export the store with matrix='counts'"
                raise SourceFormatError(msg)
        else:
            if layer not in self.layers:
                msg = f"{self._path}: no layer {layer!r}; {self._within} has the layers {list(self.layers)}"
                raise SourceFormatError(msg)
            key = f"layers/{layer}"
        node: h5py.Dataset | h5py.Group = self._root[key]
        return node

    def _sparse_layout(self, group: h5py.Group) -> tuple[str, tuple[int, int]]:
        encoding = _encoding(group)
        if encoding is None and "h5sparse_format" in group.attrs:
            encoding = f"{_attr_text(group.attrs['h5sparse_format'])}_matrix"
        if encoding not in {"csr_matrix", "csc_matrix"}:
            msg = f"{self._path}: {self._key} has the encoding {encoding!r}; a csr_matrix, csc_matrix or dense array is needed"
            raise SourceFormatError(msg)
        shape = group.attrs.get("shape", group.attrs.get("h5sparse_shape"))
        if shape is None or len(shape) != 2:
            msg = f"{self._path}: {self._key} has no 2-D shape attribute"
            raise SourceFormatError(msg)
        return encoding.removesuffix("_matrix"), (int(shape[0]), int(shape[1]))

    def _read_cells(self) -> pd.DataFrame:
        if "obs" not in self._root:
            msg = f"{self._path}: {self._prefix}obs is missing"
            raise SourceFormatError(msg)
        return read_cell_table(self._root["obs"], where=f"{self._path}: {self._prefix}obs")

    def _read_features(self) -> pd.DataFrame:
        if "var" not in self._root:
            msg = f"{self._path}: {self._prefix}var is missing"
            raise SourceFormatError(msg)
        ids, columns = _read_dataframe(self._root["var"])
        where = f"{self._path}: {self._prefix}var"
        name_key = next((key for key in NAME_COLUMNS if key in columns), None)
        type_key = next((key for key in TYPE_COLUMNS if key in columns), None)
        first = {
            "ids": ids,
            "names": ids if name_key is None else _as_strings(columns.pop(name_key), where),
            "feature_types": (
                np.full(ids.size, GENE_EXPRESSION, dtype=object)
                if type_key is None
                else _as_strings(columns.pop(type_key), f"{where}/{type_key}")
            ),
        }
        return _table(first, columns, where)

    def _read_membership(self) -> dict[str, str]:
        """``uns["cytearc"]["assayMembership"]``: the membership column of each assay, as CyteArc exports declare it."""
        node = self._root.get("uns/cytearc/assayMembership")
        if node is None:
            return {}
        where = f"{self._path}: {self._prefix}uns/cytearc/assayMembership"
        if not isinstance(node, h5py.Group):
            msg = f"{where}: expected a mapping of assays to cell columns, found a dataset; remove it or write it again"
            raise SourceFormatError(msg)
        declared = {}
        for assay, item in node.items():
            value = item[()] if isinstance(item, h5py.Dataset) else None
            value = value.decode() if isinstance(value, bytes) else value
            if not isinstance(value, str):
                msg = f"{where}/{assay}: expected the name of a cell column, found {value!r}"
                raise SourceFormatError(msg)
            declared[assay] = value
        return declared

    @property
    def layers(self) -> tuple[str, ...]:
        """The names of the layers (``layers`` of the file or the group), sorted."""
        layers = self._root.get("layers")
        return tuple(sorted(layers)) if isinstance(layers, h5py.Group) else ()

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Cells ``start:stop``: their rows of a dense or CSR matrix, or their CSC buckets.

        Parameters
        ----------
        start, stop
            The band of cells, ``0 <= start <= stop <= n_cells``.

        Returns
        -------
        scipy.sparse.csr_matrix
            The band, cells x features, canonical (see :mod:`cytearc.io.sources`).

        Raises
        ------
        IndexError
            If the band is outside the cells.
        ValueError
            If the source is closed.
        SourceFormatError
            If the stored pointers or indices are out of range.
        RepeatedEntryError
            If a sparse matrix stores a coordinate twice.
        DamagedSourceError
            If HDF5 cannot read the band.
        """
        validate_band(start, stop, self.shape[0], self.location)
        if not self._file.id.valid:
            msg = f"{self.location}: the source is closed"
            raise ValueError(msg)
        if self._format == "dense":
            return canonical_csr(read_dataset(self._matrix, slice(start, stop)))
        if self._format == "csr":
            return canonical_csr(
                read_compressed_rows(
                    self._matrix["data"],
                    self._matrix["indices"],
                    self._matrix["indptr"],
                    start=start,
                    stop=stop,
                    n_cols=self.shape[1],
                    where=f"{self.location}: {self._key}",
                    entry_name=self._entry_name(start),
                )
            )
        return self._bucketed().read(
            start, stop, n_cols=self.shape[1], dtype=self._dtype, entry_name=self._entry_name(start)
        )

    def _entry_name(self, start: int) -> EntryName:
        def name(row: int, column: int) -> str:
            cell = start + row
            return (
                f"{self.location}: {self._key}: the entry of cell {cell} ({self._cells['ids'].iat[cell]!r}) "
                f"and feature {column} ({self._features['ids'].iat[column]!r})"
            )

        return name

    def _bucketed(self) -> BandBuckets:
        if self._buckets is None:
            self._buckets = BandBuckets.filled(band_rows=self._band_rows, fill=self._fill)
        return self._buckets

    def _fill(self, buckets: BandBuckets) -> None:
        n_cells, n_features = self.shape
        where = f"{self.location}: {self._key}"
        pointers = np.asarray(read_dataset(self._matrix["indptr"]), dtype=np.int64)
        data, indices = self._matrix["data"], self._matrix["indices"]
        if pointers.size != n_features + 1 or np.any(np.diff(pointers) < 0):
            msg = f"{where}/indptr is not {n_features + 1} non-decreasing offsets"
            raise SourceFormatError(msg)
        column = 0
        while column < n_features:
            end = int(np.searchsorted(pointers, pointers[column] + CHUNK_ENTRIES, side="right"))
            end = min(max(end - 1, column + 1), n_features)
            first, last = int(pointers[column]), int(pointers[end])
            cells = np.asarray(read_dataset(indices, slice(first, last)), dtype=np.int64)
            if cells.size and (cells.min() < 0 or cells.max() >= n_cells):
                msg = f"{where}: columns {column}:{end} hold row indices outside 0:{n_cells}"
                raise SourceFormatError(msg)
            features = np.repeat(
                np.arange(column, end, dtype=np.int64), np.diff(pointers[column : end + 1])
            )
            buckets.add(cells, features, read_dataset(data, slice(first, last)))
            column = end

    def close(self) -> None:
        """Remove any buckets, and close the file (and the remote file, or remove its downloaded copy) unless another reader opened it."""
        if self._buckets is not None:
            self._buckets.close()
        if not self._owns_file:
            return
        self._file.close()
        if self._remote is not None:
            self._remote.close()
