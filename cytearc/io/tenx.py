"""10x Genomics count matrices: Cell Ranger HDF5 (v2 and v3) and Matrix Market folders.

Both formats store features x cells. In HDF5 the matrix is compressed by cell
(``indptr`` runs over cells), so a band of cells is one contiguous slice of
``data`` and ``indices``, read alone. A Matrix Market file lists coordinates
in any order, so on first use its entries are bucketed by band of cells into
files in a temporary directory (:class:`BandBuckets`) that ``close`` removes.

Both readers fail closed: an entry line of a Matrix Market file must hold
exactly ``row column value`` (``row column`` for ``pattern``), a coordinate
stored twice is refused as damage (:class:`~cytearc.errors.RepeatedEntryError`),
and truncated or corrupt gzip data or HDF5 chunks raise
:class:`~cytearc.errors.DamagedSourceError` naming the file and the line or
dataset. The shared pieces live in :mod:`cytearc.io.bands` and
:mod:`cytearc.io.damage`.

Either source may be at an fsspec URL (``s3://``, ``http(s)://`` ...): the
HDF5 file is read in byte ranges, the Matrix Market files are streamed
(:mod:`cytearc.io.sources`).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import re
import warnings
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import h5py
import numpy as np
import pandas as pd

from cytearc.errors import SourceFormatError, StoreAccessError
from cytearc.io.bands import (
    DEFAULT_BAND_ROWS,
    GENE_EXPRESSION,
    BandBuckets,
    csr_from_triplets,
    read_compressed_rows,
    validate_band,
    validate_band_rows,
    validate_unique_cells,
)
from cytearc.io.damage import (
    DECOMPRESSION_ERRORS,
    damaged_text,
    open_hdf5,
    open_text,
    read_dataset,
)
from cytearc.io.sources import FileSource, canonical_csr, remote_file_exists, source_location
from cytepool.locations import Location

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    import scipy.sparse as sp

    from cytearc.io.bands import EntryName

__all__ = ["TenxH5Source", "TenxMtxSource"]


_V3_COLUMNS: Final = {"id": "ids", "name": "names", "feature_type": "feature_types"}
_ARC_EXTRA_COLUMNS: Final = ("chrom", "start", "end")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_PARSE_ERRORS: Final = (pd.errors.ParserError, pd.errors.ParserWarning, ValueError, OverflowError)
"""What pandas raises for a malformed entry (its ParserWarning made an error)."""
BLOCK_CHARS: Final = 1 << 22
"""Characters of Matrix Market entries read and parsed as one block (about 300,000 entries).

A block and its parsed arrays hold about 25 MB; at most two blocks more than
:data:`PARSE_THREADS` are held at once.
"""
PARSE_THREADS: Final = max(1, min(3, os.cpu_count() or 1))
"""Threads parsing blocks of entries while the reading thread decompresses the next ones."""


@dataclass(frozen=True)
class _Block:
    """Entries of a block of lines: 0-based feature and cell indices, values, the first outside the matrix."""

    features: np.ndarray
    cells: np.ndarray
    values: np.ndarray
    outside: int | None


def _line_blocks(handle: IO[str]) -> Iterator[str]:
    """The rest of ``handle`` in blocks of whole lines of about :data:`BLOCK_CHARS` characters (the last may lack its newline)."""
    rest = ""
    while text := handle.read(BLOCK_CHARS):
        text = rest + text
        cut = text.rfind("\n") + 1
        if cut == 0:
            rest = text
            continue
        rest = text[cut:]
        yield text[:cut]
    if rest:
        yield rest


def _h5_strings(dataset: h5py.Dataset, where: str) -> np.ndarray:
    if h5py.check_string_dtype(dataset.dtype) is None:
        msg = f"{where}: expected strings, found {dataset.dtype}"
        raise SourceFormatError(msg)
    return read_dataset(dataset, strings=True)


class TenxH5Source(FileSource):
    """A Cell Ranger HDF5 feature-barcode matrix, read in bands of cells.

    Reads the v3 layout (``/matrix`` with a ``features`` group) and the v2
    layout (one group per genome with ``genes`` and ``gene_names``). Features
    are typed by ``feature_type`` in v3 and are "Gene Expression" in v2; v3's
    other feature datasets (``genome``, then the tag keys such as ``pattern``,
    ``read`` and ``sequence``) follow as columns, and v2 adds ``genome``.

    Parameters
    ----------
    path
        The ``.h5`` file: a local path or an fsspec URL (``s3://...``), read
        in byte ranges (see :func:`~cytearc.io.sources.open_remote`).
    genome
        v2: the genome group to read, needed when the file has several. v3:
        keep only the features of this genome (all features when ``None``).
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).
    download
        Copy a file at a URL into a temporary file first (removed on
        :meth:`close`) instead of reading it in byte ranges.

    Raises
    ------
    SourceFormatError
        If the file is missing or not a 10x matrix, the genome is ambiguous
        or unknown, or the datasets disagree in size.
    StoreAccessError
        If a file at a URL cannot be read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Location,
        *,
        genome: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        download: bool = False,
    ) -> None:
        location = source_location(path, storage_options)
        self._path = Path(path) if location.is_local else location
        self._file, self._remote = open_hdf5(
            self._path, remedy="give the Cell Ranger .h5 matrix", download=download
        )
        try:
            self._open(genome)
        except BaseException:
            self.close()
            raise

    def _open(self, genome: str | None) -> None:
        genome_filter: str | None = None
        matrix = self._file.get("matrix")
        if isinstance(matrix, h5py.Group) and "features" in matrix:
            self._group = matrix
            features = self._v3_features(matrix)
            genome_filter = self._checked_genome(genome, features)
        else:
            self._group = self._v2_group(genome)
            features = self._v2_features(self._group)
        group = self._group
        for key in ("data", "indices", "indptr", "shape", "barcodes"):
            if key not in group:
                msg = f"{self._path}: {group.name}/{key} is missing; the file is not a complete 10x matrix"
                raise SourceFormatError(msg)
        stored_shape = np.atleast_1d(read_dataset(group["shape"]))
        if stored_shape.shape != (2,):
            msg = f"{self._path}: {group.name}/shape is {stored_shape.tolist()}, not (features, cells)"
            raise SourceFormatError(msg)
        n_features, n_cells = (int(n) for n in stored_shape)
        self._data: h5py.Dataset = group["data"]
        self._indices: h5py.Dataset = group["indices"]
        self._indptr: h5py.Dataset = group["indptr"]
        barcodes = _h5_strings(group["barcodes"], f"{self._path}: {group.name}/barcodes")
        sizes = {
            "indptr": (self._indptr.shape[0], n_cells + 1),
            "barcodes": (barcodes.size, n_cells),
            "indices": (self._indices.shape[0], self._data.shape[0]),
            "features": (len(features), n_features),
        }
        for key, (found, expected) in sizes.items():
            if found != expected:
                msg = f"{self._path}: {group.name}/shape is {n_features} x {n_cells} but {key} has {found} entries, not {expected}; the file is damaged"
                raise SourceFormatError(msg)
        validate_unique_cells(barcodes, f"{self._path}: {group.name}/barcodes")
        self._n_stored_features = n_features
        self._stored_feature_ids = features["ids"].to_numpy()
        self._keep: np.ndarray | None = None
        if genome_filter is not None:
            keep = features["genome"].to_numpy() == genome_filter
            self._keep = np.where(keep, np.cumsum(keep) - 1, -1)
            features = features.loc[keep].reset_index(drop=True)
        self._cells = pd.DataFrame({"ids": barcodes})
        self._features = features

    def _v2_group(self, genome: str | None) -> h5py.Group:
        genomes = sorted(
            name
            for name, node in self._file.items()
            if isinstance(node, h5py.Group) and "genes" in node and "data" in node
        )
        if not genomes:
            msg = f"{self._path}: neither a v3 /matrix group nor v2 genome groups (with genes and data) found; top-level keys are {sorted(self._file)}"
            raise SourceFormatError(msg)
        if genome is None:
            if len(genomes) > 1:
                msg = f"{self._path}: the file holds the genomes {genomes}; choose one with genome="
                raise SourceFormatError(msg)
            genome = genomes[0]
        if genome not in genomes:
            msg = f"{self._path}: no genome {genome!r}; the file holds {genomes}"
            raise SourceFormatError(msg)
        group: h5py.Group = self._file[genome]
        return group

    def _v2_features(self, group: h5py.Group) -> pd.DataFrame:
        where = f"{self._path}: {group.name}"
        if "gene_names" not in group:
            msg = f"{where}/gene_names is missing; the file is not a complete 10x v2 matrix"
            raise SourceFormatError(msg)
        ids = _h5_strings(group["genes"], f"{where}/genes")
        return pd.DataFrame(
            {
                "ids": ids,
                "names": _h5_strings(group["gene_names"], f"{where}/gene_names"),
                "feature_types": np.full(ids.size, GENE_EXPRESSION, dtype=object),
                "genome": np.full(ids.size, str(group.name).strip("/"), dtype=object),
            }
        )

    def _v3_features(self, matrix: h5py.Group) -> pd.DataFrame:
        group: h5py.Group = matrix["features"]
        where = f"{self._path}: {group.name}"
        columns: dict[str, np.ndarray] = {}
        for key, column in _V3_COLUMNS.items():
            if key not in group:
                msg = f"{where}/{key} is missing; a 10x v3 matrix names its features by id, name and feature_type"
                raise SourceFormatError(msg)
            columns[column] = _h5_strings(group[key], f"{where}/{key}")
        n_features = columns["ids"].size
        tags = (
            _h5_strings(group["_all_tag_keys"], f"{where}/_all_tag_keys").tolist()
            if "_all_tag_keys" in group
            else []
        )
        shapes = {
            key: node.shape
            for key in dict.fromkeys([*_V3_COLUMNS, "genome", *tags])
            if isinstance(node := group.get(key), h5py.Dataset)
        }
        if len(set(shapes.values())) > 1 or columns["ids"].ndim != 1:
            found = ", ".join(f"{key} {shape}" for key, shape in shapes.items())
            msg = (
                f"{where}: expected its per-feature datasets to hold one entry per feature each, "
                f"found the shapes {found}; the file is damaged: copy it again or export it "
                "again from Cell Ranger"
            )
            raise SourceFormatError(msg)
        extras = ["genome", *tags, *sorted(group)]
        for key in dict.fromkeys(extras):
            node = group.get(key)
            if (
                key in _V3_COLUMNS
                or key == "_all_tag_keys"
                or not isinstance(node, h5py.Dataset)
                or node.shape != (n_features,)
            ):
                continue
            is_text = h5py.check_string_dtype(node.dtype) is not None
            columns[key] = _h5_strings(node, f"{where}/{key}") if is_text else read_dataset(node)
        return pd.DataFrame(columns)

    def _checked_genome(self, genome: str | None, features: pd.DataFrame) -> str | None:
        if genome is None:
            return None
        if "genome" not in features:
            msg = f"{self._path}: genome={genome!r} given but the features have no genome column"
            raise SourceFormatError(msg)
        genomes = sorted(set(features["genome"].tolist()))
        if genome not in genomes:
            msg = f"{self._path}: no genome {genome!r}; the features belong to {genomes}"
            raise SourceFormatError(msg)
        return genome

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values."""
        dtype: np.dtype = np.dtype(self._data.dtype)
        return dtype

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Cells ``start:stop``, reading only their slice of ``data`` and ``indices``.

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
            If a cell holds a feature twice.
        DamagedSourceError
            If HDF5 cannot read the band's slice.
        """
        validate_band(start, stop, self.shape[0], self.location)
        if not self._file.id.valid:
            msg = f"{self.location}: the source is closed"
            raise ValueError(msg)
        entry_name = self._entry_name(start)
        band = read_compressed_rows(
            self._data,
            self._indices,
            self._indptr,
            start=start,
            stop=stop,
            n_cols=self._n_stored_features,
            where=f"{self.location}: {self._group.name}",
            entry_name=entry_name,
        )
        if self._keep is not None:
            columns = self._keep[band.indices]
            kept = columns >= 0
            rows = np.repeat(np.arange(band.shape[0], dtype=np.int64), np.diff(band.indptr))
            return csr_from_triplets(
                rows[kept],
                columns[kept],
                band.data[kept],
                shape=(band.shape[0], self.shape[1]),
                entry_name=entry_name,
            )
        return canonical_csr(band)

    def _entry_name(self, start: int) -> EntryName:
        def name(row: int, column: int) -> str:
            cell, feature = start + row, self._stored_feature_ids[column]
            return (
                f"{self.location}: {self._group.name}/indices: feature {column} ({feature!r}) "
                f"of cell {cell} ({self._cells['ids'].iat[cell]!r})"
            )

        return name

    def close(self) -> None:
        """Close the HDF5 file (and the remote file, or remove its downloaded copy)."""
        self._file.close()
        if self._remote is not None:
            self._remote.close()


def _find_file(directory: Path | Location, names: Sequence[str]) -> Path | Location:
    for name in names:
        if isinstance(directory, Location):
            for remote in (directory.child(name), directory.child(f"{name}.gz")):
                if remote_file_exists(remote):
                    return remote
            continue
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    expected = " or ".join(f"{name}[.gz]" for name in names)
    missing = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), f"{directory}/{names[0]}")
    msg = f"{directory}: no {expected} found; a 10x Matrix Market folder holds matrix.mtx, features.tsv (or genes.tsv) and barcodes.tsv, each optionally gzipped"
    raise SourceFormatError(msg) from missing


def _read_tsv(path: Path | Location) -> pd.DataFrame:
    opened = open_text(path) if isinstance(path, Location) else contextlib.nullcontext(path)
    try:
        with opened as source:
            return pd.read_csv(
                source, sep="\t", header=None, dtype=str, na_filter=False, quoting=csv.QUOTE_NONE
            )
    except pd.errors.EmptyDataError:
        return pd.DataFrame({0: np.zeros(0, dtype=object)})
    except DECOMPRESSION_ERRORS as error:
        raise damaged_text(path, error) from error
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        msg = f"{path}: not a tab-separated table ({error})"
        raise SourceFormatError(msg) from error


def _check_field_counts(path: Path | Location) -> None:
    """Refuse a table whose lines do not all hold as many fields as its first line."""
    expected: int | None = None
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\r\n")
            if not text:
                continue
            found = text.count("\t") + 1
            if expected is None:
                expected = found
            elif found != expected:
                msg = (
                    f"{path}: line {number}: expected {expected} tab-separated fields as on the "
                    f"first line, found {found} ({text!r}); 10x writes the same fields on every "
                    "line (id and name in v2, then the feature type in v3): repair the line or "
                    "export the file again"
                )
                raise SourceFormatError(msg)


def read_entry_table(text: str, dtypes: Mapping[str, np.dtype | type[object]]) -> pd.DataFrame:
    """``text``'s Matrix Market entry lines as pandas' C parser reads them, one column per key of ``dtypes``.

    The MTX reader's parse of any block its compiled parser declines; a
    block of comment lines only is a table without rows.
    """
    try:
        return pd.read_csv(
            io.StringIO(text),
            sep=r"\s+",
            header=None,
            comment="%",
            names=list(dtypes),
            index_col=False,
            dtype=dict(dtypes),
            float_precision="round_trip",
        )
    except pd.errors.EmptyDataError:
        return pd.DataFrame({name: np.zeros(0, dtype=dtype) for name, dtype in dtypes.items()})


@dataclass(frozen=True, kw_only=True)
class _MtxHeader:
    """What a Matrix Market file's banner and size line say."""

    field: str
    """``integer``, ``real`` or ``pattern`` (``double`` reads as ``real``)."""
    dtype: np.dtype
    n_rows: int
    n_cols: int
    n_entries: int
    lines: int
    """Lines up to and including the size line."""

    @property
    def layout(self) -> str:
        """The fields of an entry line."""
        return "row column" if self.field == "pattern" else "row column value"


def _mtx_header(handle: IO[str], path: Path | Location) -> _MtxHeader:
    """The banner and size line of a Matrix Market file; leaves ``handle`` at the entries."""
    banner = handle.readline().split()
    if len(banner) != 5 or banner[0].lower() != "%%matrixmarket" or banner[1].lower() != "matrix":
        msg = f"{path}: the first line is not a '%%MatrixMarket matrix ...' banner"
        raise SourceFormatError(msg)
    layout, field, symmetry = (token.lower() for token in banner[2:])
    if layout != "coordinate":
        msg = f"{path}: a {layout!r} Matrix Market matrix is not supported; write it in coordinate format"
        raise SourceFormatError(msg)
    dtype: np.dtype
    if field in {"integer", "pattern"}:
        dtype = np.dtype(np.int64)
    elif field in {"real", "double"}:
        dtype, field = np.dtype(np.float64), "real"
    else:
        msg = f"{path}: a {field!r} Matrix Market matrix has no count values; integer, real or pattern is needed"
        raise SourceFormatError(msg)
    if symmetry != "general":
        msg = f"{path}: a {symmetry!r} Matrix Market matrix is not supported; write every entry (general)"
        raise SourceFormatError(msg)
    lines = 2
    line = handle.readline()
    while line and (not line.strip() or line.lstrip().startswith("%")):
        line = handle.readline()
        lines += 1
    size = line.split()
    if len(size) != 3 or not all(token.isdigit() for token in size):
        msg = f"{path}: expected the size line 'rows columns entries' after the comments, found {line.strip()!r}"
        raise SourceFormatError(msg)
    n_rows, n_cols, n_entries = (int(token) for token in size)
    return _MtxHeader(
        field=field, dtype=dtype, n_rows=n_rows, n_cols=n_cols, n_entries=n_entries, lines=lines
    )


def _read_mtx_header(path: Path | Location) -> _MtxHeader:
    try:
        with open_text(path) as handle:
            return _mtx_header(handle, path)
    except DECOMPRESSION_ERRORS as error:
        raise damaged_text(path, error) from error
    except UnicodeDecodeError as error:
        msg = f"{path}: the header is not UTF-8 text ({error}); give a Matrix Market file"
        raise SourceFormatError(msg) from error


def _entry_problem(fields: list[str], header: _MtxHeader) -> str | None:
    """What is wrong with one entry line's fields, or None."""
    n_fields = len(header.layout.split())
    if len(fields) != n_fields:
        return f"holds {len(fields)} fields ({' '.join(fields)!r}), expected {n_fields} ({header.layout!r}) in {'an' if header.field == 'integer' else 'a'} {header.field} coordinate matrix"
    for name, token in zip(("row", "column"), fields, strict=False):
        if not _INTEGER.fullmatch(token):
            return f"holds the {name} index {token!r}, expected a positive integer"
    return None if header.field == "pattern" else _value_problem(fields[2], header.field)


def _value_problem(token: str, field: str) -> str | None:
    """What is wrong with an entry's value of an ``integer`` or ``real`` matrix, or None."""
    if field == "real":
        try:
            float(token)
        except ValueError:
            return f"holds the value {token!r}, expected a real number"
        return None
    if not _INTEGER.fullmatch(token):
        return f"holds the value {token!r}, expected an integer as the banner's 'integer' says (declare the matrix 'real' for other numbers)"
    if not -(2**63) <= int(token) < 2**63:
        return f"holds the value {token}, beyond the 64-bit integers (|value| < 2**63) that counts fit in"
    return None


class TenxMtxSource(FileSource):
    """A 10x Matrix Market folder (Cell Ranger v2 or v3), read in bands of cells.

    The folder holds ``matrix.mtx`` (features x cells, coordinate, integer,
    real or pattern (every value 1), general), ``barcodes.tsv`` and ``features.tsv`` (v3: id, name, type
    and, for Cell Ranger ARC, chrom, start and end) or ``genes.tsv`` (v2: id
    and name; "Gene Expression"), each optionally gzipped. On the first read
    the entries are parsed in chunks and bucketed by band of ``band_rows``
    cells in a temporary directory, which :meth:`close` removes.

    Parameters
    ----------
    path
        The folder: a local path, or an fsspec URL (``s3://bucket/sample``)
        whose files are streamed front to back, never downloaded whole.
    band_rows
        Cells per on-disk bucket; any band can be read whatever this is.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).

    Raises
    ------
    SourceFormatError
        If a file is missing, the matrix is not integer or real general
        coordinates, or the tables do not match the matrix.
    StoreAccessError
        If a file at a URL cannot be read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Location,
        *,
        band_rows: int = DEFAULT_BAND_ROWS,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        validate_band_rows(band_rows)
        location = source_location(path, storage_options)
        if location.is_local:
            self._path = local = Path(path)
            if not local.is_dir():
                missing = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(local))
                msg = f"{local}: not a folder; give the folder that holds matrix.mtx, features.tsv and barcodes.tsv"
                raise SourceFormatError(msg) from missing
        else:
            self._path = location
        self._matrix_path = _find_file(self._path, ["matrix.mtx"])
        features_path = _find_file(self._path, ["features.tsv", "genes.tsv"])
        barcodes_path = _find_file(self._path, ["barcodes.tsv"])
        self._header = _read_mtx_header(self._matrix_path)
        self._dtype = self._header.dtype
        self._n_entries = self._header.n_entries
        self._cells = self._read_barcodes(barcodes_path, self._header.n_cols)
        self._features = self._read_features(features_path, self._header.n_rows)
        self._band_rows = band_rows
        self._buckets: BandBuckets | None = None
        self._closed = False

    @staticmethod
    def _read_barcodes(path: Path | Location, n_cells: int) -> pd.DataFrame:
        table = _read_tsv(path)
        if len(table) != n_cells:
            msg = f"{path}: {len(table)} barcodes for a matrix of {n_cells} cells"
            raise SourceFormatError(msg)
        ids = table[0].to_numpy(dtype=object)
        validate_unique_cells(ids, str(path))
        return pd.DataFrame({"ids": ids})

    @staticmethod
    def _read_features(path: Path | Location, n_features: int) -> pd.DataFrame:
        table = _read_tsv(path)
        _check_field_counts(path)
        if len(table) != n_features:
            msg = f"{path}: {len(table)} features for a matrix of {n_features} features"
            raise SourceFormatError(msg)
        n_columns = table.shape[1]
        if n_columns < 2 and n_features:
            msg = f"{path}: expected tab-separated id and name columns, found {n_columns} column"
            raise SourceFormatError(msg)
        columns: dict[str, np.ndarray] = {
            "ids": table[0].to_numpy(dtype=object),
            "names": table[1].to_numpy(dtype=object) if n_columns > 1 else np.zeros(0, object),
            "feature_types": (
                table[2].to_numpy(dtype=object)
                if n_columns > 2
                else np.full(len(table), GENE_EXPRESSION, dtype=object)
            ),
        }
        extras = (
            _ARC_EXTRA_COLUMNS
            if n_columns == 6
            else tuple(f"column_{i + 1}" for i in range(3, n_columns))
        )
        for position, name in enumerate(extras, start=3):
            columns[name] = table[position].to_numpy(dtype=object)
        return pd.DataFrame(columns)

    def _bucketed(self) -> BandBuckets:
        if self._closed:
            msg = f"{self.location}: the source is closed"
            raise ValueError(msg)
        if self._buckets is None:
            self._buckets = BandBuckets.filled(band_rows=self._band_rows, fill=self._fill)
        return self._buckets

    def _entries(self, handle: IO[str]) -> Iterator[_Block]:
        """The entries after the header, in order, each line checked to hold exactly its fields.

        The text is read in blocks of whole lines (:data:`BLOCK_CHARS`)
        that :data:`PARSE_THREADS` threads parse and turn into 0-based
        indices at once, while this thread decompresses the next. Lines of
        whole numbers are parsed by a compiled loop
        (:func:`cytearc.io.mtx_entries.integer_entries`); a block it declines
        (real values, signs, inline comments, a malformed line) by pandas'
        C parser (both release the GIL). A line with a field too many makes
        pandas' C parser raise (after a block's first line, "Expected 3
        fields"; on the first, its ParserWarning of lost data, made an
        error), and a missing field leaves a NaN that fails the integer
        dtype or the NaN check; any anomaly sends the file to
        :meth:`_diagnose`, which names the line.
        """
        header = self._header
        names = [*header.layout.replace("row", "feature").replace("column", "cell").split()]
        dtypes: dict[str, np.dtype | type[object]] = {name: np.dtype(np.int64) for name in names}
        if header.field != "pattern":
            dtypes["value"] = self._dtype

        from cytearc.io.mtx_entries import integer_entries  # noqa: PLC0415 (imports numba)

        def parse(text: str) -> _Block:
            if header.field != "real":
                fields = integer_entries(text, len(names))
                if fields is not None:
                    values = fields[2] if header.field == "integer" else None
                    return self._block(fields[0], fields[1], values)
            chunk = read_entry_table(text, dtypes)
            chunk = self._checked(chunk, dtypes)
            values = None if header.field == "pattern" else chunk["value"].to_numpy()
            return self._block(chunk["feature"].to_numpy(), chunk["cell"].to_numpy(), values)

        # the warning filter is process-wide, so it holds in the parsing threads too
        with self._parsing(), ThreadPoolExecutor(PARSE_THREADS) as pool:
            pending: deque[Future[_Block]] = deque()
            try:
                for block in _line_blocks(handle):
                    pending.append(pool.submit(parse, block))
                    if len(pending) > PARSE_THREADS:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()

    def _checked(
        self, chunk: pd.DataFrame, dtypes: Mapping[str, np.dtype | type[object]]
    ) -> pd.DataFrame:
        """``chunk``, unless a column did not parse as its dtype or a value is NaN (then the error naming the line)."""
        malformed = any(chunk[name].dtype != dtype for name, dtype in dtypes.items())
        if malformed or (self._dtype.kind == "f" and chunk["value"].isna().any()):
            found = self._diagnose()
            if found is not None:
                raise found
            if malformed:
                raise self._unparsed(None)
        return chunk

    def _block(self, rows: np.ndarray, columns: np.ndarray, values: np.ndarray | None) -> _Block:
        """The 0-based indices and values (1 for ``pattern``) of parsed entries, and the first outside the matrix."""
        n_cells, n_features = self.shape
        features = rows - 1
        cells = columns - 1
        outside = np.flatnonzero(
            (features < 0) | (features >= n_features) | (cells < 0) | (cells >= n_cells)
        )
        if values is None:
            values = np.ones(rows.size, dtype=np.int64)
        return _Block(features, cells, values, int(outside[0]) if outside.size else None)

    @contextlib.contextmanager
    def _parsing(self) -> Iterator[None]:
        """Turn what pandas raises (and its ParserWarning) into the error naming the file and line."""
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            try:
                yield
            except (StoreAccessError, SourceFormatError):  # already named
                raise
            except DECOMPRESSION_ERRORS as error:
                raise damaged_text(self._matrix_path, error) from error
            except _PARSE_ERRORS as error:
                raise self._diagnose() or self._unparsed(str(error)) from error

    def _unparsed(self, detail: str | None) -> SourceFormatError:
        """The error when the fast parse failed but no line is malformed on its own."""
        reason = "" if detail is None else f" ({detail})"
        msg = f"{self._matrix_path}: the entries could not be parsed as {self._header.layout!r} lines{reason}; check the file"
        return SourceFormatError(msg)

    def _diagnose(self) -> SourceFormatError | None:
        """The first malformed entry line, found by reading the file again line by line (error path only).

        None when every line holds its fields as numbers (a NaN the fast
        parse found is then a ``nan`` the file holds, which the scan refuses).
        """
        path, header = self._matrix_path, self._header
        number = header.lines
        try:
            with open_text(path) as handle:
                _mtx_header(handle, path)
                for number, line in enumerate(handle, start=header.lines + 1):
                    fields = line.split("%", 1)[0].split()
                    problem = _entry_problem(fields, header) if fields else None
                    if problem is not None:
                        msg = f"{path}: line {number} {problem}; the file is damaged or not a Matrix Market matrix - write it again (e.g. scipy.io.mmwrite)"
                        return SourceFormatError(msg)
        except DECOMPRESSION_ERRORS as error:
            return damaged_text(path, error)
        except UnicodeDecodeError as error:
            msg = f"{path}: the text after line {number} is not UTF-8 ({error}); the file is damaged - copy or download it again"
            return SourceFormatError(msg)
        return None

    def _fill(self, buckets: BandBuckets) -> None:
        n_cells, n_features = self.shape
        path = self._matrix_path
        seen = 0
        with open_text(path) as handle:
            _mtx_header(handle, path)
            for block in self._entries(handle):
                if block.outside is not None:
                    at = block.outside
                    msg = f"{path}: entry {seen + at + 1} at ({block.features[at] + 1}, {block.cells[at] + 1}) is outside the {n_features} x {n_cells} matrix of the size line"
                    raise SourceFormatError(msg)
                buckets.add(block.cells, block.features, block.values)
                seen += block.values.size
        if seen != self._n_entries:
            msg = f"{path}: the size line announces {self._n_entries} entries but the file holds {seen}"
            raise SourceFormatError(msg)

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Cells ``start:stop``, from the buckets they overlap (bucketing the file on first use).

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
            If an entry line of the matrix is malformed or outside it (found on first use).
        RepeatedEntryError
            If a coordinate is stored twice.
        DamagedSourceError
            If the gzip data is truncated or corrupt (found on first use).
        """
        validate_band(start, stop, self.shape[0], self.location)
        return self._bucketed().read(
            start, stop, n_cols=self.shape[1], dtype=self._dtype, entry_name=self._entry_name(start)
        )

    def _entry_name(self, start: int) -> EntryName:
        def name(row: int, column: int) -> str:
            cell = start + row
            return (
                f"{self._matrix_path}: the entry at row {column + 1}, column {cell + 1} (feature "
                f"{self._features['ids'].iat[column]!r}, cell {self._cells['ids'].iat[cell]!r})"
            )

        return name

    def close(self) -> None:
        """Remove the buckets."""
        self._closed = True
        if self._buckets is not None:
            self._buckets.close()
