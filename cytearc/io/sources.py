"""Count sources: what every importer reads, whatever the file format.

A :class:`CountSource` presents a file as a cells x features count matrix
with its cell and feature tables, read in bands of cells. Importers make one
pass over the bands to find value ranges (:mod:`cytearc.storage.count_dtype`),
then a second to write; so a source must give the same band every time it is
asked, and must never load the whole matrix to answer.

Conventions every source keeps:

- ``cells`` has the column ``ids`` (barcodes, unique strings) and optionally
  more metadata columns; ``features`` has ``ids``, ``names`` and
  ``feature_types`` (10x's "Gene Expression", "Antibody Capture", "Peaks", ...;
  "Gene Expression" when the format has none), as strings, plus any other
  columns the format carries.
- :meth:`CountSource.read_band` returns a ``scipy.sparse.csr_matrix`` of the
  rows ``start:stop`` (cells) and all features, canonical: each coordinate
  once, indices sorted, explicit zeros removed, in the source's dtype widened
  to int64 for integers. A file that stores a coordinate twice is damaged and
  its reader raises :class:`~cytearc.errors.RepeatedEntryError`; only
  :class:`SparseSource`, an in-memory matrix, sums repeated coordinates (in
  int64 for integers), as SciPy does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

import numpy as np
import scipy.sparse as sp

from cytearc.errors import SourceFormatError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import pandas as pd

__all__ = [
    "CountSource",
    "FileSource",
    "LayeredSource",
    "SparseSource",
    "canonical_csr",
    "iter_bands",
]


@runtime_checkable
class CountSource(Protocol):
    """A count matrix to import, cells x features, read in bands of cells."""

    @property
    def location(self) -> str:
        """The file or directory read, for messages."""
        ...

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        ...

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values (before any storage dtype is chosen)."""
        ...

    @property
    def cells(self) -> pd.DataFrame:
        """One row per cell; column ``ids`` first."""
        ...

    @property
    def features(self) -> pd.DataFrame:
        """One row per feature; columns ``ids``, ``names``, ``feature_types`` first."""
        ...

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Rows ``start:stop`` as a canonical CSR matrix (see the module docstring)."""
        ...

    def close(self) -> None:
        """Release open files."""
        ...


@runtime_checkable
class LayeredSource(Protocol):
    """A source read from one of several matrices of its file (an H5AD file's ``X`` or layers)."""

    @property
    def layers(self) -> tuple[str, ...]:
        """The names of the file's layers."""
        ...


class FileSource:
    """Shared parts of the sources read from a file or folder.

    A subclass sets ``_path``, ``_cells``, ``_features`` and ``_dtype`` when it
    opens, and implements ``read_band`` and ``close``; it is a context manager
    that closes on exit.
    """

    _path: Path
    _cells: pd.DataFrame
    _features: pd.DataFrame
    _dtype: np.dtype

    @property
    def location(self) -> str:
        """The file or folder read."""
        return str(self._path)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        return (len(self._cells), len(self._features))

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values (int64 or float64 for text formats)."""
        return self._dtype

    @property
    def cells(self) -> pd.DataFrame:
        """``ids`` (the barcodes), then the format's cell columns."""
        return self._cells

    @property
    def features(self) -> pd.DataFrame:
        """``ids``, ``names``, ``feature_types``, then the format's other feature columns."""
        return self._features

    def close(self) -> None:
        """Release what the source holds open."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def canonical_csr(matrix: sp.spmatrix | sp.sparray | np.ndarray) -> sp.csr_matrix:
    """A canonical CSR copy: duplicates summed (integers in int64), sorted, no explicit zeros.

    The file readers call it on bands they have checked hold each coordinate
    once, so only :class:`SparseSource` ever sums here.
    """
    csr = sp.csr_matrix(matrix)
    if csr.dtype.kind in "biu":
        csr = csr.astype(np.int64)
    elif csr.dtype == np.float16:
        csr = csr.astype(np.float32)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    csr.sort_indices()
    return csr


def iter_bands(source: CountSource, rows: int) -> Iterator[tuple[int, sp.csr_matrix]]:
    """``(start, band)`` over the source in bands of ``rows`` cells."""
    n_cells = source.shape[0]
    for start in range(0, n_cells, rows):
        yield start, source.read_band(start, min(start + rows, n_cells))


@dataclass(eq=False)
class SparseSource:
    """An in-memory SciPy sparse (or numpy) matrix, cells x features, with its tables."""

    matrix: sp.spmatrix | sp.sparray | np.ndarray
    cells: pd.DataFrame
    features: pd.DataFrame
    location: str = "<in-memory matrix>"
    _csr: sp.csr_matrix = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._csr = canonical_csr(self.matrix)
        n_cells, n_features = self._csr.shape
        if len(self.cells) != n_cells or len(self.features) != n_features:
            msg = (
                f"{self.location}: a {n_cells} x {n_features} matrix needs {n_cells} cells and "
                f"{n_features} features, found tables of {len(self.cells)} and {len(self.features)} rows"
            )
            raise SourceFormatError(msg)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        return (int(self._csr.shape[0]), int(self._csr.shape[1]))

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the values."""
        return np.dtype(self.matrix.dtype)

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Rows ``start:stop``."""
        return self._csr[start:stop]

    def close(self) -> None:
        """Nothing to release."""
