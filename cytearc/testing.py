"""A test kit for code that reads or writes CyteArc sources and stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
import zarr

from cytearc.metadata.membership import MEMBERSHIP_ROLE
from cytearc.metadata.table import COLUMNS_ATTRIBUTE, list_columns

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.io.sources import CountSource

__all__ = ["assemble_bands", "write_membership"]


def write_membership(store: Path, assay: str, measured: np.ndarray) -> None:
    """Write ``<assay>_I`` into a store's cell table, as an import of a partly measured assay would.

    Directly in storage, with the membership attributes in the same write, so
    a reader never sees the column without them.
    """
    cells = zarr.open_group(store / "cellData", mode="r+")
    cells.create_array(
        f"{assay}_I",
        data=np.asarray(measured, dtype=bool),
        chunks=(max(1, len(measured)),),
        dimension_names=("cell",),
        attributes={"role": MEMBERSHIP_ROLE, "assay": assay},
    )
    columns = cells.attrs[COLUMNS_ATTRIBUTE]
    assert isinstance(columns, list)
    list_columns(cells, [*columns, f"{assay}_I"])


def assemble_bands(source: CountSource, rows: int | None) -> sp.csr_matrix:
    """Every band of ``rows`` cells (all at once for None) stacked, each checked to be canonical.

    A band must be a CSR matrix with sorted indices, no duplicates, no explicit
    zeros, and every feature column.
    """
    n_cells, n_features = source.shape
    step = rows or max(n_cells, 1)
    bands = [source.read_band(s, min(s + step, n_cells)) for s in range(0, n_cells, step)]
    for band in bands:
        assert isinstance(band, sp.csr_matrix)
        assert band.has_canonical_format
        assert np.all(band.data != 0)
        assert band.shape[1] == n_features
    return sp.vstack(bands, format="csr")
