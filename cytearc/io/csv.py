"""Dense count tables in CSV (or any delimited text), read in bands of cells.

The table has a header row of ids and a column of ids. It is parsed once, in
chunks of rows, when the source is opened: each chunk is checked to hold only
numbers and its non-zero entries are bucketed by band of cells into files in
a temporary directory (transposed first when features are the rows), which
``close`` removes. Values are int64 when every entry is an integer and
float64 otherwise; text such as ``nan``, ``inf`` or an empty field is refused.
A header of one field (a table whose separator is not the one given) is
refused naming ``sep``, and truncated or corrupt compressed data raises
:class:`~cytearc.errors.DamagedSourceError` naming the line.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

import numpy as np
import pandas as pd

from cytearc.errors import ImportOptionError, SourceFormatError, StoreAccessError
from cytearc.io.bands import (
    DEFAULT_BAND_ROWS,
    GENE_EXPRESSION,
    BandBuckets,
    validate_band,
    validate_unique_cells,
)
from cytearc.io.damage import DECOMPRESSION_ERRORS, damaged_text
from cytearc.io.sources import FileSource, open_remote_text, source_location

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator, Mapping

    import scipy.sparse as sp

__all__ = ["CsvSource", "Orientation", "default_separator"]

Orientation = Literal["cells_x_features", "features_x_cells"]
CHUNK_VALUES: Final = 1 << 22
"""Table fields parsed per chunk."""
TAB_SUFFIXES: Final = (".tsv", ".txt")
"""Suffixes (before an optional ``.gz``) of tab-separated tables."""
_SEPARATORS: Final = (",", "\t", ";", "|", " ")
"""Delimiters a one-field header is searched for, to name the likely one."""


def default_separator(path: str | os.PathLike[str]) -> str:
    r"""The field delimiter a table's name implies: a tab for ``.tsv`` and ``.txt``, else a comma.

    Parameters
    ----------
    path
        The table.

    Returns
    -------
    str
        ``"\t"`` or ``","``.

    Examples
    --------
    >>> default_separator("counts.tsv.gz"), default_separator("counts.csv")
    ('\t', ',')
    """
    name = Path(path).name.lower().removesuffix(".gz")
    return "\t" if name.endswith(TAB_SUFFIXES) else ","


class CsvSource(FileSource):
    r"""A dense table of counts, cells x features or features x cells, read in bands of cells.

    Parameters
    ----------
    path
        The table (compressed files are read as pandas infers from the
        suffix): a local path, or an fsspec URL (``s3://...``) streamed
        front to back, never downloaded whole.
    orientation
        ``"cells_x_features"`` when rows are cells, ``"features_x_cells"``
        when rows are features.
    sep
        The field delimiter; by default a tab when the name ends in ``.tsv``
        or ``.txt`` (optionally followed by ``.gz``), else a comma.
    index_col
        The position of the column of row ids; the header's field there names
        that column and is not an id.
    band_rows
        Cells per on-disk bucket; any band can be read whatever this is.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).

    Raises
    ------
    SourceFormatError
        If a field is not a number (naming the file, line, row and column),
        the header has one field (check ``sep``), a row has more fields than
        the header, or cell ids repeat.
    DamagedSourceError
        If compressed data is truncated or corrupt.
    StoreAccessError
        If a table at a URL cannot be read.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "counts.csv"
    ...     _ = path.write_text("cell,CD3E,MS4A1\nAAAC-1,3,0\nAAAG-1,0,7\n")
    ...     with CsvSource(path) as source:
    ...         source.shape, source.dtype, source.read_band(1, 2).toarray().tolist()
    ((2, 2), dtype('int64'), [[0, 7]])
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        orientation: Orientation = "cells_x_features",
        sep: str | None = None,
        index_col: int = 0,
        band_rows: int = DEFAULT_BAND_ROWS,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if orientation not in {"cells_x_features", "features_x_cells"}:
            msg = f"{path}: orientation must be 'cells_x_features' or 'features_x_cells', found {orientation!r}; pass one of them"
            raise ImportOptionError(msg)
        location = source_location(path, storage_options)
        self._path = Path(path) if location.is_local else location
        self._sep = default_separator(self._path.name) if sep is None else sep
        self._index_col = index_col
        header = self._read_header()
        column_ids = np.asarray([field for i, field in enumerate(header) if i != index_col], object)
        self._buckets = BandBuckets(band_rows=band_rows)
        try:
            row_ids, self._dtype = self._fill(
                len(header), column_ids, transpose=orientation == "features_x_cells"
            )
            cell_ids, feature_ids = (
                (row_ids, column_ids)
                if orientation == "cells_x_features"
                else (column_ids, row_ids)
            )
            validate_unique_cells(cell_ids, str(self._path))
        except BaseException:
            self._buckets.close()
            raise
        self._cells = pd.DataFrame({"ids": cell_ids})
        self._features = pd.DataFrame(
            {
                "ids": feature_ids,
                "names": feature_ids,
                "feature_types": np.full(feature_ids.size, GENE_EXPRESSION, dtype=object),
            }
        )

    def _opened(self) -> contextlib.AbstractContextManager[Path | IO[str]]:
        """What pandas reads: a local path (pandas infers its compression), or a URL's text stream."""
        if isinstance(self._path, Path):
            return contextlib.nullcontext(self._path)
        return open_remote_text(self._path, remedy="give the CSV table of counts")

    def _read_header(self) -> list[str]:
        try:
            with self._opened() as table:
                first = pd.read_csv(
                    table, sep=self._sep, header=None, nrows=1, dtype=str, na_filter=False
                )
        except FileNotFoundError as error:
            msg = f"{self._path}: no such file; give the CSV table of counts"
            raise SourceFormatError(msg) from error
        except DECOMPRESSION_ERRORS as error:
            raise damaged_text(self._path, error) from error
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
            msg = f"{self._path}: cannot read a header row of ids ({error})"
            raise SourceFormatError(msg) from error
        header = [str(field) for field in first.iloc[0].tolist()]
        if len(header) == 1:
            found = [sep for sep in _SEPARATORS if sep != self._sep and sep in header[0]]
            hint = f"; the header holds {found[0]!r}: pass sep={found[0]!r}" if found else ""
            msg = (
                f"{self._path}: the header {header[0][:80]!r} is one field when split at {self._sep!r}; "
                f"a count table has a column of ids and a column per feature or cell - check the "
                f"separator and pass sep= (--sep on the command line){hint}"
            )
            raise SourceFormatError(msg)
        if not 0 <= self._index_col < len(header):
            msg = (
                f"{self._path}: index_col={self._index_col} but the header has {len(header)} fields"
            )
            raise SourceFormatError(msg)
        return header

    def _fill(
        self, n_fields: int, column_ids: np.ndarray, *, transpose: bool
    ) -> tuple[np.ndarray, np.dtype]:
        """Parse the table into the buckets; return the row ids and the value dtype."""
        with self._opened() as table:
            return self._fill_from(table, n_fields, column_ids, transpose=transpose)

    def _fill_from(
        self, table: Path | IO[str], n_fields: int, column_ids: np.ndarray, *, transpose: bool
    ) -> tuple[np.ndarray, np.dtype]:
        with self._parsing(n_fields):
            reader = pd.read_csv(
                table,
                sep=self._sep,
                header=None,
                skiprows=1,
                names=list(range(n_fields)),
                index_col=self._index_col,
                dtype={self._index_col: str},
                na_filter=False,
                float_precision="round_trip",
                chunksize=max(1, CHUNK_VALUES // n_fields),
            )
        ids: list[np.ndarray] = []
        dtype = np.dtype(np.int64)
        offset = 0
        with reader:
            while True:
                with self._parsing(n_fields):
                    chunk = next(reader, None)
                if chunk is None:
                    break
                values = self._numbers(chunk, column_ids, offset)
                dtype = np.promote_types(dtype, values.dtype)
                rows, cols = np.nonzero(values)
                if transpose:
                    self._buckets.add(cols.astype(np.int64), rows + offset, values[rows, cols])
                else:
                    self._buckets.add(rows + offset, cols.astype(np.int64), values[rows, cols])
                ids.append(chunk.index.to_numpy(dtype=object))
                offset += len(chunk)
        row_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=object)
        return row_ids, dtype

    @contextlib.contextmanager
    def _parsing(self, n_fields: int) -> Iterator[None]:
        """Turn what pandas raises into an error naming the file."""
        try:
            yield
        except StoreAccessError:
            raise
        except DECOMPRESSION_ERRORS as error:
            raise damaged_text(self._path, error) from error
        except (pd.errors.ParserError, ValueError) as error:
            msg = f"{self._path}: a row does not have the {n_fields} fields of the header ({error})"
            raise SourceFormatError(msg) from error

    def _numbers(self, chunk: pd.DataFrame, column_ids: np.ndarray, offset: int) -> np.ndarray:
        """The chunk's values as one numeric array; a non-number raises naming its cell."""
        if chunk.empty:
            return np.zeros(chunk.shape, dtype=np.int64)
        for position, dtype in enumerate(chunk.dtypes):
            column = chunk.iloc[:, position]
            if dtype.kind in "iu":
                continue
            if dtype.kind == "f":
                bad = np.flatnonzero(~np.isfinite(column.to_numpy()))
            elif dtype.kind == "b":
                bad = np.zeros(1, dtype=np.int64)
            else:
                parsed = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
                bad = np.flatnonzero(~np.isfinite(parsed))
                if bad.size == 0:
                    msg = f"{self._path}: column {column_ids[position]!r} holds a number beyond 64 bits between lines {offset + 2} and {offset + len(chunk) + 1}"
                    raise SourceFormatError(msg)
            if bad.size:
                row = int(bad[0])
                msg = f"{self._path}: line {offset + row + 2}, row {chunk.index[row]!r}, column {column_ids[position]!r} holds {str(column.iat[row])!r}, not a finite number; a count table holds numbers only"
                raise SourceFormatError(msg)
        result = np.result_type(*chunk.dtypes) if len(chunk.columns) else np.dtype(np.int64)
        return chunk.to_numpy(dtype=result)

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Cells ``start:stop``, from the buckets they overlap.

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
        """
        validate_band(start, stop, self.shape[0], self.location)
        return self._buckets.read(
            start,
            stop,
            n_cols=self.shape[1],
            dtype=self._dtype,
            entry_name=lambda row, column: (
                f"{self._path}: the field of cell {self._cells['ids'].iat[start + row]!r} "
                f"and feature {self._features['ids'].iat[column]!r}"
            ),
        )

    def close(self) -> None:
        """Remove the buckets."""
        self._buckets.close()
