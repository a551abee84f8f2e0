"""Shared pieces of the file readers: band checks, canonical bands, and on-disk band buckets.

A format that lists entries in any order (Matrix Market, CSC H5AD, CSV) is
read once and its entries bucketed by band of cells into files in a temporary
directory (:class:`BandBuckets`), which the source removes when it closes.
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

from cytearc.errors import SourceFormatError
from cytearc.io.sources import canonical_csr

if TYPE_CHECKING:
    from collections.abc import Callable

    import h5py

__all__ = [
    "CHUNK_ENTRIES",
    "DEFAULT_BAND_ROWS",
    "GENE_EXPRESSION",
    "BandBuckets",
    "band_dtype",
    "canonical_band",
    "csr_from_triplets",
    "read_compressed_rows",
    "validate_band",
    "validate_band_rows",
    "validate_unique_cells",
]

GENE_EXPRESSION: Final = "Gene Expression"
DEFAULT_BAND_ROWS: Final = 10_000
CHUNK_ENTRIES: Final = 1 << 20
"""Entries parsed or read per step when a source buckets its file."""


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


def csr_from_triplets(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray, *, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A canonical CSR matrix from coordinates in source order.

    Values take :func:`band_dtype`; entries at the same coordinate are summed
    in source order (integers exactly in int64), zeros are dropped and indices
    sorted.
    """
    values = np.asarray(values, dtype=band_dtype(np.dtype(values.dtype)))
    keys = rows.astype(np.int64) * shape[1] + cols
    if keys.size > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
        order = np.argsort(keys, kind="stable")
        rows, cols, values = rows[order], cols[order], values[order]
    if rows.size > 1:
        starts = np.empty(rows.size, dtype=bool)
        starts[0] = True
        np.not_equal(rows[1:], rows[:-1], out=starts[1:])
        starts[1:] |= cols[1:] != cols[:-1]
        if not starts.all():
            group = np.cumsum(starts) - 1
            summed = np.zeros(int(group[-1]) + 1, dtype=values.dtype)
            np.add.at(summed, group, values)
            rows, cols, values = rows[starts], cols[starts], summed
    nonzero = values != 0
    rows, cols, values = rows[nonzero], cols[nonzero], values[nonzero]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((values, cols, indptr), shape=shape)


def canonical_band(band: sp.csr_matrix) -> sp.csr_matrix:
    """``band`` in canonical form; float duplicates are summed in source order."""
    if band.dtype.kind == "f" and not band.has_canonical_format:
        rows = np.repeat(np.arange(band.shape[0], dtype=np.int64), np.diff(band.indptr))
        return csr_from_triplets(rows, band.indices, band.data, shape=band.shape)
    return canonical_csr(band)


def read_compressed_rows(
    data: h5py.Dataset,
    indices: h5py.Dataset,
    indptr: h5py.Dataset,
    *,
    start: int,
    stop: int,
    n_cols: int,
    where: str,
) -> sp.csr_matrix:
    """Rows ``start:stop`` of a matrix compressed by row, reading only their slice of the file.

    ``where`` names the matrix in messages. The result is raw (not yet
    canonical): pass it to :func:`canonical_band`.
    """
    pointers = np.asarray(indptr[start : stop + 1], dtype=np.int64)
    first, last = int(pointers[0]), int(pointers[-1])
    if np.any(np.diff(pointers) < 0) or first < 0 or last > data.shape[0]:
        msg = f"{where}: indptr[{start}:{stop + 1}] is not a non-decreasing run of offsets into {data.shape[0]} stored values; the file is damaged"
        raise SourceFormatError(msg)
    band_indices = np.asarray(indices[first:last])
    if band_indices.size and (band_indices.min() < 0 or band_indices.max() >= n_cols):
        msg = f"{where}: rows {start}:{stop} hold column indices outside 0:{n_cols}; the file is damaged"
        raise SourceFormatError(msg)
    return sp.csr_matrix(
        (np.asarray(data[first:last]), band_indices, pointers - first), shape=(stop - start, n_cols)
    )


class BandBuckets:
    """Matrix entries bucketed on disk by band of rows, for files not stored in row order.

    Entries are appended with :meth:`add` in source order to one file per band
    (and value dtype) in a new :func:`tempfile.mkdtemp` directory under
    ``TMPDIR``; :meth:`read` loads only the buckets a band of rows overlaps.
    :meth:`close` (or garbage collection) removes the directory. Rows within a
    band and columns are stored as 32-bit indices.

    Parameters
    ----------
    band_rows
        Rows per bucket.
    """

    def __init__(self, *, band_rows: int) -> None:
        validate_band_rows(band_rows)
        self.band_rows = band_rows
        self.directory = Path(tempfile.mkdtemp(prefix="cytearc-bands-"))
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

    def read(self, start: int, stop: int, *, n_cols: int, dtype: np.dtype) -> sp.csr_matrix:
        """Rows ``start:stop`` of ``n_cols`` columns, canonical, of values stored as ``dtype``."""
        if not self._cleanup.alive:
            msg = f"{self.directory}: the buckets are closed"
            raise ValueError(msg)
        rows: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        cols: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        values: list[np.ndarray] = [np.zeros(0, dtype=band_dtype(dtype))]
        bands = range(start // self.band_rows, -(-stop // self.band_rows)) if stop > start else []
        for band in bands:
            for value_dtype in self._value_dtypes.get(band, []):
                records = np.fromfile(
                    self._path(band, value_dtype), dtype=self._records(value_dtype)
                )
                matrix_rows = records["row"].astype(np.int64) + band * self.band_rows
                inside = (matrix_rows >= start) & (matrix_rows < stop)
                rows.append(matrix_rows[inside] - start)
                cols.append(records["col"][inside].astype(np.int64))
                values.append(records["value"][inside].astype(band_dtype(dtype)))
        return csr_from_triplets(
            np.concatenate(rows),
            np.concatenate(cols),
            np.concatenate(values),
            shape=(stop - start, n_cols),
        )

    def close(self) -> None:
        """Remove the directory of buckets."""
        self._cleanup()
