"""Shared pieces of the file readers: band checks, canonical bands, and on-disk band buckets.

A format that lists entries in any order (Matrix Market, CSC H5AD, CSV) is
read once and its entries bucketed by band of cells into files in a temporary
directory (:class:`BandBuckets`), which the source removes when it closes.
The directory is named after the process that writes it
(``.cytearc-bands.tmp-<pid>-<host>-<token>``, as CytePool names the hidden
folders of its writers, :mod:`cytepool.cube.atomic`), so a later import
removes the buckets of a process of this host that was killed
(:func:`remove_stale_buckets`).

A file that stores one coordinate twice is damaged: the readers refuse it
with :class:`~cytearc.errors.RepeatedEntryError` rather than sum the repeats
(only an in-memory matrix, :class:`~cytearc.io.sources.SparseSource`, sums
them, as SciPy does).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import pandas as pd
import scipy.sparse as sp

from cytearc.errors import RepeatedEntryError, SourceFormatError
from cytearc.io.damage import read_dataset
from cytearc.storage.count_dtype import resolve_count_dtype, scan_values
from cytearc.utils.heap import release_freed_heap
from cytepool.cube.atomic import hidden_sibling, reclaim_stale_siblings

if TYPE_CHECKING:
    import os
    from collections.abc import Callable
    from typing import TypeAlias

    import h5py

    EntryName: TypeAlias = Callable[[int, int], str]
    """How a reader names the entry at (row of the band, column) in messages: its file and coordinate."""

__all__ = [
    "CHUNK_ENTRIES",
    "DEFAULT_BAND_ROWS",
    "GENE_EXPRESSION",
    "BandBuckets",
    "band_dtype",
    "csr_from_triplets",
    "read_compressed_rows",
    "remove_stale_buckets",
    "validate_band",
    "validate_band_rows",
    "validate_unique_cells",
    "validate_unique_entries",
]

GENE_EXPRESSION: Final = "Gene Expression"
DEFAULT_BAND_ROWS: Final = 2_048
"""Cells per on-disk bucket (and per band of an H5AD read): a band read holds about this many cells."""
CHUNK_ENTRIES: Final = 1 << 20
"""Entries parsed or read per step when a source buckets its file."""
BUCKETS_NAME: Final = "cytearc-bands"
"""The name whose hidden siblings in ``TMPDIR`` are the bucket directories."""


def band_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of canonical bands of values stored as ``dtype``.

    Integers and booleans widen to int64 and float16 to float32, as
    :func:`cytearc.io.sources.canonical_csr` does; other dtypes are kept.
    """
    if dtype.kind in "biu":
        return np.dtype(np.int64)
    if dtype == np.float16:
        return np.dtype(np.float32)
    return dtype


def validate_band(start: int, stop: int, n_cells: int, location: str) -> None:
    """Raise :class:`IndexError` unless ``0 <= start <= stop <= n_cells``."""
    if not 0 <= start <= stop <= n_cells:
        msg = f"{location}: band {start}:{stop} is outside the {n_cells} cells; ask for 0 <= start <= stop <= {n_cells}"
        raise IndexError(msg)


def validate_band_rows(band_rows: int) -> None:
    """Raise :class:`ValueError` unless ``band_rows`` is a bucket height :class:`BandBuckets` takes."""
    if not 1 <= band_rows < 2**31:
        msg = f"band_rows must be between 1 and 2**31 - 1, got {band_rows}"
        raise ValueError(msg)


def validate_unique_cells(ids: np.ndarray, location: str) -> None:
    """Raise :class:`SourceFormatError` if cell ids repeat, naming the first repeated id."""
    repeated = pd.Index(ids).duplicated()
    if repeated.any():
        first = ids[int(np.flatnonzero(repeated)[0])]
        msg = f"{location}: cell id {first!r} appears more than once; cell ids must be unique (make them unique before import)"
        raise SourceFormatError(msg)


def _refuse_repeats(ordered: np.ndarray, *, n_cols: int, entry_name: EntryName) -> None:
    """Raise :class:`~cytearc.errors.RepeatedEntryError` if sorted keys ``row * n_cols + col`` repeat."""
    repeated = ordered[1:] == ordered[:-1]
    if not repeated.any():
        return
    key = int(ordered[int(np.argmax(repeated))])
    times = int(np.count_nonzero(ordered == key))
    row, col = divmod(key, max(n_cols, 1))
    msg = (
        f"{entry_name(row, col)} is stored {times} times; a count matrix stores each coordinate "
        "once, so the file is damaged - write it again from its source (to add repeats up on "
        "purpose, sum them in memory with scipy's sum_duplicates and import with SparseToZarr)"
    )
    raise RepeatedEntryError(msg)


def validate_unique_entries(
    rows: np.ndarray, cols: np.ndarray, *, n_cols: int, entry_name: EntryName
) -> None:
    """Raise :class:`~cytearc.errors.RepeatedEntryError` if a (row, column) coordinate repeats.

    Parameters
    ----------
    rows, cols
        The coordinates of a band's entries, in any order.
    n_cols
        The band's number of columns.
    entry_name
        Names the entry at (row, column) of the band, with its file.

    Raises
    ------
    RepeatedEntryError
        Naming the first repeated coordinate (in row, then column order),
        how often it is stored, and the remedy.
    """
    keys = rows.astype(np.int64) * max(n_cols, 1) + cols
    if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
        _refuse_repeats(np.sort(keys), n_cols=n_cols, entry_name=entry_name)


def csr_from_triplets(
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    *,
    shape: tuple[int, int],
    entry_name: EntryName,
) -> sp.csr_matrix:
    """A canonical CSR matrix from coordinates in any order, each stored once.

    Values take :func:`band_dtype`; zeros are dropped and indices sorted.

    Raises
    ------
    RepeatedEntryError
        If a coordinate repeats (:func:`validate_unique_entries`).
    """
    values = np.asarray(values, dtype=band_dtype(np.dtype(values.dtype)))
    keys = rows.astype(np.int64) * shape[1] + cols
    if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
        order = np.argsort(keys, kind="stable")
        _refuse_repeats(keys[order], n_cols=shape[1], entry_name=entry_name)
        rows, cols, values = rows[order], cols[order], values[order]
    nonzero = values != 0
    if not nonzero.all():
        rows, cols, values = rows[nonzero], cols[nonzero], values[nonzero]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((values, cols, indptr), shape=shape)


def _validate_unique_in_rows(
    pointers: np.ndarray, indices: np.ndarray, *, n_cols: int, entry_name: EntryName
) -> None:
    """:func:`validate_unique_entries` of a CSR band, in one pass over ``indices`` when each row is sorted."""
    if indices.size < 2:
        return
    descending = np.diff(indices.astype(np.int64, copy=False)) <= 0
    row_starts = pointers[1:-1] - pointers[0]
    descending[row_starts[(row_starts > 0) & (row_starts < indices.size)] - 1] = False
    if descending.any():
        rows = np.repeat(np.arange(pointers.size - 1, dtype=np.int64), np.diff(pointers))
        validate_unique_entries(rows, indices, n_cols=n_cols, entry_name=entry_name)


def read_compressed_rows(
    data: h5py.Dataset,
    indices: h5py.Dataset,
    indptr: h5py.Dataset,
    *,
    start: int,
    stop: int,
    n_cols: int,
    where: str,
    entry_name: EntryName,
) -> sp.csr_matrix:
    """Rows ``start:stop`` of a matrix compressed by row, reading only their slice of the file.

    ``where`` names the matrix in messages, ``entry_name`` an entry of the
    band. The result holds each coordinate once but is not yet canonical:
    pass it to :func:`~cytearc.io.sources.canonical_csr`.

    Raises
    ------
    SourceFormatError
        If the pointers or indices are out of range.
    RepeatedEntryError
        If a row holds a column twice.
    DamagedSourceError
        If HDF5 cannot read the slice.
    """
    pointers = np.asarray(read_dataset(indptr, slice(start, stop + 1)), dtype=np.int64)
    first, last = int(pointers[0]), int(pointers[-1])
    if np.any(np.diff(pointers) < 0) or first < 0 or last > data.shape[0]:
        msg = f"{where}: indptr[{start}:{stop + 1}] is not a non-decreasing run of offsets into {data.shape[0]} stored values; the file is damaged"
        raise SourceFormatError(msg)
    band_indices = read_dataset(indices, slice(first, last))
    if band_indices.size and (band_indices.min() < 0 or band_indices.max() >= n_cols):
        msg = f"{where}: rows {start}:{stop} hold column indices outside 0:{n_cols}; the file is damaged"
        raise SourceFormatError(msg)
    _validate_unique_in_rows(pointers, band_indices, n_cols=n_cols, entry_name=entry_name)
    return sp.csr_matrix(
        (read_dataset(data, slice(first, last)), band_indices, pointers - first),
        shape=(stop - start, n_cols),
    )


def remove_stale_buckets(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the bucket directories of processes of this host that no longer run.

    A directory ``.cytearc-bands.tmp-<pid>-<host>-<token>`` is stale when
    ``<host>`` is this host and no process ``<pid>`` runs (a killed import
    left it); :func:`cytepool.cube.atomic.reclaim_stale_siblings` decides
    and removes. Directories of live processes, of other hosts sharing
    ``directory``, and of any other name are kept.

    Parameters
    ----------
    directory
        Where bucket directories are made; by default
        :func:`tempfile.gettempdir` (``TMPDIR``).

    Returns
    -------
    list of pathlib.Path
        The directories removed.
    """
    root = Path(tempfile.gettempdir() if directory is None else directory)
    return reclaim_stale_siblings(root / BUCKETS_NAME)


class BandBuckets:
    """Matrix entries bucketed on disk by band of rows, for files not stored in row order.

    Entries are appended with :meth:`add` in source order to one file per band
    (and value dtype) in a new directory under ``TMPDIR``, private to its
    user and named ``.cytearc-bands.tmp-<pid>-<host>-<token>``; creating one
    first removes those of dead processes (:func:`remove_stale_buckets`).
    :meth:`read` loads only the buckets a band of rows overlaps. :meth:`close`
    (or garbage collection) removes the directory. Rows within a band and
    columns are stored as 32-bit indices, non-negative integer values in the
    narrowest unsigned dtype of their call (most counts in 16 bits: 10 bytes
    an entry instead of 16); :meth:`read` widens them again.

    Parameters
    ----------
    band_rows
        Rows per bucket.
    """

    def __init__(self, *, band_rows: int) -> None:
        validate_band_rows(band_rows)
        self.band_rows = band_rows
        remove_stale_buckets()
        self.directory = hidden_sibling(Path(tempfile.gettempdir()) / BUCKETS_NAME)
        self.directory.mkdir(mode=0o700)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.directory, ignore_errors=True)
        self._value_dtypes: dict[int, list[np.dtype]] = {}

    @classmethod
    def filled(cls, *, band_rows: int, fill: Callable[[BandBuckets], None]) -> BandBuckets:
        """New buckets that ``fill`` adds every entry to; removed again if ``fill`` fails."""
        buckets = cls(band_rows=band_rows)
        try:
            fill(buckets)
        except BaseException:
            buckets.close()
            raise
        finally:
            # the parsing threads freed their blocks into arenas of their own: 100k anchor
            # data, single runs: load peak 1,272 MB instead of 1,463
            release_freed_heap()
        return buckets

    @staticmethod
    def _records(value_dtype: np.dtype) -> np.dtype:
        return np.dtype([("row", "<i4"), ("col", "<i4"), ("value", value_dtype)])

    def _path(self, band: int, value_dtype: np.dtype) -> Path:
        return self.directory / f"{band:09d}-{value_dtype.name}.bin"

    def add(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        """Append entries (row and column indices from 0) to the buckets of their rows."""
        if not self._cleanup.alive:
            msg = f"{self.directory}: the buckets are closed"
            raise ValueError(msg)
        if cols.size and cols.max() >= 2**31:
            msg = f"{self.directory}: column {cols.max()} does not fit the 32-bit column indices of the buckets"
            raise ValueError(msg)
        if values.dtype.kind in "iu" and values.size:
            values = values.astype(resolve_count_dtype(scan_values(values)), copy=False)
        value_dtype = np.dtype(values.dtype).newbyteorder("<")
        bands = rows // self.band_rows
        order = None if np.all(bands[1:] >= bands[:-1]) else np.argsort(bands, kind="stable")
        if order is not None:
            rows, cols, values, bands = rows[order], cols[order], values[order], bands[order]
        edges = [0, *(np.flatnonzero(bands[1:] != bands[:-1]) + 1).tolist(), rows.size]
        for lo, hi in itertools.pairwise(edges):
            if lo == hi:
                continue
            band = int(bands[lo])
            records = np.empty(hi - lo, dtype=self._records(value_dtype))
            records["row"] = rows[lo:hi] - band * self.band_rows
            records["col"] = cols[lo:hi]
            records["value"] = values[lo:hi]
            with self._path(band, value_dtype).open("ab") as handle:
                records.tofile(handle)
            known = self._value_dtypes.setdefault(band, [])
            if value_dtype not in known:
                known.append(value_dtype)

    def read(
        self, start: int, stop: int, *, n_cols: int, dtype: np.dtype, entry_name: EntryName
    ) -> sp.csr_matrix:
        """Rows ``start:stop`` of ``n_cols`` columns, canonical, of values stored as ``dtype``.

        ``entry_name`` names an entry of the band (its row counted from
        ``start``) when a coordinate repeats (:func:`csr_from_triplets`).
        """
        if not self._cleanup.alive:
            msg = f"{self.directory}: the buckets are closed"
            raise ValueError(msg)
        rows: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        cols: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]
        values: list[np.ndarray] = [np.zeros(0, dtype=band_dtype(dtype))]
        bands = range(start // self.band_rows, -(-stop // self.band_rows)) if stop > start else []
        for band in bands:
            first = band * self.band_rows
            for value_dtype in self._value_dtypes.get(band, []):
                records = np.fromfile(
                    self._path(band, value_dtype), dtype=self._records(value_dtype)
                )
                if start <= first and first + self.band_rows <= stop:  # the whole bucket
                    rows.append(records["row"] + np.int64(first - start))
                    cols.append(np.ascontiguousarray(records["col"]))
                    values.append(records["value"])
                    continue
                matrix_rows = records["row"].astype(np.int64) + first
                inside = (matrix_rows >= start) & (matrix_rows < stop)
                rows.append(matrix_rows[inside] - start)
                cols.append(records["col"][inside])
                values.append(records["value"][inside])
        # columns stay 32-bit (the CSR's indices), values take the band dtype
        return csr_from_triplets(
            np.concatenate(rows) if len(rows) > 2 else rows[-1],
            np.concatenate(cols) if len(cols) > 2 else cols[-1],
            np.concatenate(values, dtype=band_dtype(dtype)),
            shape=(stop - start, n_cols),
            entry_name=entry_name,
        )

    def close(self) -> None:
        """Remove the directory of buckets."""
        self._cleanup()
