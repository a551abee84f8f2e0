"""The import classes by format, each writing a store from one kind of source.

``SparseToZarr`` imports an in-memory matrix; ``CrToZarr``, ``MtxToZarr``,
``H5adToZarr`` and ``CSVtoZarr`` import files (their readers live beside this
module). Each takes the destination and the options of
:func:`~cytearc.io.importer.write_store`, and :meth:`dump` writes the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cytearc.io.importer import ImportResult, write_store
from cytearc.io.sources import CountSource, SparseSource

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import pandas as pd
    import scipy.sparse as sp

__all__ = ["SparseToZarr", "ToZarr"]


class ToZarr:
    """Writes a :class:`~cytearc.io.sources.CountSource` to ``zarr_loc`` on :meth:`dump`."""

    def __init__(self, source: CountSource, zarr_loc: str | Path, **options: Any) -> None:
        self.source = source
        self.zarr_loc = zarr_loc
        self.options = options

    def dump(self) -> ImportResult:
        """Import the source; closes it afterwards."""
        try:
            return write_store(self.source, self.zarr_loc, **self.options)
        finally:
            self.source.close()


class SparseToZarr(ToZarr):
    """Import an in-memory SciPy sparse (or numpy) matrix, cells x features, with its tables.

    ``cells`` needs an ``ids`` column; ``features`` needs ``ids`` and ``names``
    (``feature_types`` defaults to "Gene Expression").

    Examples
    --------
    >>> import tempfile, numpy as np, pandas as pd, scipy.sparse as sp
    >>> from cytearc import DataStore
    >>> matrix = sp.random(50, 20, density=0.2, format="csr", random_state=0) * 10
    >>> cells = pd.DataFrame({"ids": [f"c{i}" for i in range(50)]})
    >>> features = pd.DataFrame({"ids": [f"g{i}" for i in range(20)], "names": [f"G{i}" for i in range(20)]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     result = SparseToZarr(matrix.floor(), cells=cells, features=features,
    ...                           zarr_loc=f"{d}/ds.zarr", show_progress=False).dump()
    ...     DataStore(result.path).RNA.counts.shape
    (50, 20)
    """

    def __init__(
        self,
        matrix: sp.spmatrix | sp.sparray | np.ndarray,
        *,
        cells: pd.DataFrame,
        features: pd.DataFrame,
        zarr_loc: str | Path,
        **options: Any,
    ) -> None:
        features = features.copy()
        if "feature_types" not in features.columns:
            features.insert(
                2 if "names" in features.columns else 1, "feature_types", "Gene Expression"
            )
        super().__init__(SparseSource(matrix, cells, features), zarr_loc, **options)
