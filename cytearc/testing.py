"""A test kit for code that reads or writes CyteArc sources and stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from cytearc.io.sources import CountSource

__all__ = ["assemble_bands"]


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
