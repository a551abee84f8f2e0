"""What the tasks of the marker search run on bands of features: the statistics of each group.

:mod:`cytearc.ops.markers` plans the tasks and publishes their results; the
functions the tasks run live here, in a module that imports NumPy and
SciPy only, so a worker that unpickles one does not import the operation's
stores, tables and pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtr

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SLICE_BYTES", "STATISTICS", "band_statistics"]


STATISTICS = ("mean", "fraction", "mean_rest", "logfc", "auroc", "score", "pvalue")


def _indicator(codes: np.ndarray, n_groups: int) -> sp.csr_matrix:
    n = len(codes)
    return sp.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, n_groups))


def band_statistics(
    values: np.ndarray | sp.spmatrix | sp.sparray,
    codes: np.ndarray,
    n_groups: int,
    *,
    indicator: sp.csr_matrix | None = None,
) -> dict[str, np.ndarray]:
    """Marker statistics of a band of features (rows) over cells (columns) labelled ``codes``.

    ``values`` (dense or sparse) are non-negative with zero exactly where the
    count is zero; only the non-zero values are touched, a few percent of a
    band.

    Parameters
    ----------
    values
        Normalized values, features x cells.
    codes
        The group of each cell (column), ``0 .. n_groups - 1``.
    n_groups
        The number of groups.
    indicator
        The cells x groups indicator matrix of ``codes`` (made when None;
        bands of the same cells can share one).

    Returns
    -------
    dict of str to numpy.ndarray
        Each of :data:`STATISTICS`, of shape ``(n_groups, n_features_in_band)``.
    """
    m = sp.csr_matrix(values, dtype=np.float64)
    m.eliminate_zeros()
    n_rows, n = m.shape
    onehot = _indicator(codes, n_groups) if indicator is None else indicator
    sizes = np.bincount(codes, minlength=n_groups).astype(np.float64)
    rest = n - sizes
    sums = np.asarray((m @ onehot).toarray())
    present = m.copy()
    present.data[:] = 1.0
    expressed = np.asarray((present @ onehot).toarray())
    total = sums.sum(axis=1, keepdims=True)
    mean = (sums / sizes).T
    mean_rest = ((total - sums) / np.maximum(rest, 1)).T
    from scipy.stats import rankdata  # noqa: PLC0415 (scipy.stats takes 0.6 s to import; only markers need it)

    rank_sums = np.empty((n_rows, n_groups))
    ties = np.empty(n_rows)
    for i in range(n_rows):
        span = slice(m.indptr[i], m.indptr[i + 1])
        row, cells = m.data[span], m.indices[span]
        zeros = n - len(row)
        ranks = rankdata(row) + zeros
        rank_sums[i] = np.bincount(codes[cells], weights=ranks, minlength=n_groups) + (
            zeros + 1
        ) / 2 * (sizes - expressed[i])
        _, counts = np.unique(row, return_counts=True)
        ties[i] = float(zeros**3 - zeros) + float((counts.astype(np.float64) ** 3 - counts).sum())
    u = rank_sums.T - (sizes * (sizes + 1) / 2)[:, None]
    product = (sizes * rest)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(product / 12 * ((n + 1) - ties[None, :] / (n * (n - 1))))
        z = np.where(sigma > 0, (u - product / 2) / sigma, 0.0)
        auroc = u / product
    return {
        "mean": mean,
        "fraction": (expressed / sizes).T,
        "mean_rest": mean_rest,
        "logfc": np.log2((np.expm1(mean) + 1e-9) / (np.expm1(mean_rest) + 1e-9)),
        "auroc": auroc,
        "score": z,
        "pvalue": np.minimum(2 * ndtr(-np.abs(z)), 1.0),
    }


SLICE_BYTES: Final = 8 * 2**20
"""Counts of one slice of a ``countsT`` shard that :func:`~cytearc.ops.markers.marker_tasks` turns into statistics at a time."""


def _band_pieces(
    pieces: Iterator[tuple[int, np.ndarray]],
    *,
    rows: np.ndarray,
    library: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    target_sum: float,
    step: int,
) -> np.ndarray:
    """The statistics of a band of ``countsT`` (features x every cell) that arrives in pieces of features.

    Returns float64 ``(n_features, len(STATISTICS), n_groups)``. The selected
    cells (``rows``) of each piece are kept as a sparse matrix until a slice
    of ``step`` features has arrived, whose statistics are then
    computed, so a task holds a piece, a slice's non-zeros and its float64
    forms, never the band; the features do not depend on each other, so the
    statistics are the same bits as those of the whole band at once.
    """
    scale = np.where(library > 0, target_sum / np.where(library > 0, library, 1.0), 0.0)
    indicator = _indicator(codes, n_groups)
    pending: list[sp.csr_matrix] = []
    held = 0
    parts: list[np.ndarray] = []

    def flush() -> None:
        values = sp.vstack(pending, format="csr", dtype=np.float64)
        pending.clear()
        values.data = (
            np.log1p(values.data * scale[values.indices]).astype(np.float32).astype(np.float64)
        )
        statistics = band_statistics(values, codes, n_groups, indicator=indicator)
        parts.append(np.stack([statistics[name].T for name in STATISTICS], axis=1))

    for _, piece in pieces:
        every = len(rows) == piece.shape[1]
        for first in range(0, piece.shape[0], step):
            part = piece[first : first + step]
            pending.append(sp.csr_matrix(part if every else part[:, rows]))
            held += part.shape[0]
            if held >= step:
                flush()
                held = 0
    if pending:
        flush()
    return np.concatenate(parts) if parts else np.zeros((0, len(STATISTICS), n_groups))


def _band_statistics(block: np.ndarray) -> dict[str, np.ndarray]:
    return {name: block[:, i].T for i, name in enumerate(STATISTICS)}


def _counts_band(values: np.ndarray, codes: np.ndarray, *, n_groups: int) -> dict[str, np.ndarray]:
    return band_statistics(np.ascontiguousarray(values.T), codes, n_groups)
