"""What the tasks of normalization and PCA run on blocks: normalized values, their statistics, scaled values.

:mod:`cytearc.ops.normalize` and :mod:`cytearc.ops.pca` plan the graphs;
the functions their tasks run (and those of every read of normalized
values) live here, in a module that imports NumPy, SciPy and the compiled kernels
only: a worker that unpickles one of these tasks imports this module, not
the operation's with its stores, tables and pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np
import scipy.sparse as sp

from cytearc.utils.moments import ColumnMoments

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "BAND_STATISTICS",
    "cell_scale",
    "merge_band_statistics",
    "nonzero_entries",
    "normalized_block",
    "normalized_statistics",
    "piece_statistics",
    "scaled_block",
]


def normalized_block(
    block: np.ndarray,
    library: np.ndarray,
    *,
    method: str,
    target_sum: float,
    log1p: bool,
    idf: np.ndarray | None = None,
) -> np.ndarray:
    """Normalize one band of cells (rows): float64 arithmetic, float32 out.

    Library size and TF-IDF touch only the non-zero counts (a zero stays
    zero), so a band costs its non-zeros, not its cells times features.

    Parameters
    ----------
    block
        Counts, cells x all features.
    library
        The library size (``rowSums``) of each cell.
    method
        ``"library_size"``, ``"clr"``, ``"tfidf"`` or ``"none"`` (see
        :mod:`cytearc.ops.normalize`).
    target_sum
        The library size each cell is scaled to (not used by ``"clr"`` and ``"none"``).
    log1p
        Take ``log1p`` of the scaled values (``"clr"`` always does, ``"none"`` never).
    idf
        The inverse document frequency of each feature, for ``"tfidf"``.

    Returns
    -------
    numpy.ndarray
        The normalized values (float32), shaped as ``block``.

    Examples
    --------
    >>> normalized_block(np.array([[1, 3]]), np.array([4.0]), method="library_size",
    ...                  target_sum=4.0, log1p=False)
    array([[1., 3.]], dtype=float32)
    """
    if method == "clr":
        x = np.asarray(block, dtype=np.float64)
        geo = np.exp(np.log1p(x).mean(axis=1, keepdims=True))
        clr: np.ndarray = np.log1p(x / geo).astype(np.float32)
        return clr
    counts = np.ascontiguousarray(block)
    _, _, flat, values = _sparse_normalized(
        counts, library, method=method, target_sum=target_sum, log1p=log1p, idf=idf
    )
    out = np.zeros(counts.shape, dtype=np.float32)
    out.ravel()[flat] = values
    return out


def _sparse_normalized(
    counts: np.ndarray,
    library: np.ndarray,
    *,
    method: str,
    target_sum: float,
    log1p: bool,
    idf: np.ndarray | None,
    keep: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero counts of a C-ordered band normalized (not ``"clr"``): ``(rows, columns, flat, float64 values)``.

    ``keep`` (bool, per feature) leaves out the other columns' entries. A
    negative count of ``"none"`` (signed counts) is an entry like any other
    non-zero: it stays what it is.
    """
    rows, columns, flat = nonzero_entries(counts)
    if keep is not None:
        kept = keep[columns]
        rows, columns, flat = rows[kept], columns[kept], flat[kept]
    values = counts.ravel()[flat].astype(np.float64)
    if method == "none":
        return rows, columns, flat, values
    values *= cell_scale(library, target_sum)[rows]
    if method == "tfidf":
        assert idf is not None
        values *= idf[columns]
    if log1p:
        np.log1p(values, out=values)
    return rows, columns, flat, values


def cell_scale(library: np.ndarray, target_sum: float) -> np.ndarray:
    """The factor of each cell's counts, ``target_sum / library`` (0 for an empty cell), float64.

    Parameters
    ----------
    library
        The library size of each cell.
    target_sum
        The library size each cell is scaled to.

    Returns
    -------
    numpy.ndarray
        float64, one factor per cell.

    Examples
    --------
    >>> cell_scale(np.array([4, 0]), 2.0).tolist()
    [0.5, 0.0]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        scale: np.ndarray = np.where(library > 0, target_sum / np.asarray(library, np.float64), 0.0)
    return scale


def nonzero_entries(block: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero entries of a 2-D block in row-major order, as :func:`numpy.nonzero` gives them.

    ``flatnonzero`` of a boolean mask is several times faster than the 2-D
    ``nonzero`` on a band of counts; the rows and columns follow by division.

    Parameters
    ----------
    block
        A 2-D array (copied first if it is not C-contiguous).

    Returns
    -------
    tuple of numpy.ndarray
        ``(rows, columns, flat)``: each entry's row, column and index in
        ``block.ravel()``.

    Examples
    --------
    >>> nonzero_entries(np.array([[0, 5], [7, 0]]))
    (array([0, 1]), array([1, 0]), array([1, 2]))
    """
    values = np.ascontiguousarray(block)
    flat = np.flatnonzero(values != 0)
    rows, columns = np.divmod(flat, max(1, values.shape[1]))
    return rows, columns, flat


def _packed_moments(block: np.ndarray) -> np.ndarray:
    return ColumnMoments.of(block).pack()


BAND_STATISTICS: Final = 11
"""Rows of :func:`~cytearc.ops.normalize.band_statistics` per band: the packed moments of the values and of their ``expm1``, and the non-zeros."""


def _linear_moments(
    n: int, columns: np.ndarray, entries: np.ndarray, *, low: np.ndarray, high: np.ndarray
) -> ColumnMoments:
    """The moments of ``expm1`` of the values (infinite where values that are not logs overflow)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return ColumnMoments.of_nonzero(
            n, columns, np.expm1(entries), low=np.expm1(low), high=np.expm1(high)
        )


def _band_statistics(block: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(block)
    n, n_columns = values.shape
    if n == 0:
        empty = ColumnMoments.empty(n_columns).pack()
        return np.vstack([empty, empty, np.zeros((1, n_columns))])
    _, columns, flat = nonzero_entries(values)
    entries = values.ravel()[flat].astype(np.float64)
    low, high = values.min(axis=0).astype(np.float64), values.max(axis=0).astype(np.float64)
    log = ColumnMoments.of_nonzero(n, columns, entries, low=low, high=high)
    linear = _linear_moments(n, columns, entries, low=low, high=high)
    detected = np.bincount(columns, minlength=n_columns).astype(np.float64)
    return np.vstack([log.pack(), linear.pack(), detected[None, :]])


def normalized_statistics(
    block: np.ndarray,
    library: np.ndarray,
    *,
    method: str,
    target_sum: float,
    log1p: bool,
    idf: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`~cytearc.ops.normalize.band_statistics` of :func:`normalized_block` of a band of counts, without the dense band.

    Library size and TF-IDF map a zero count to zero and a positive count to
    a non-negative value, so the statistics follow from the non-zero counts
    alone: the same float32 values in the same row-major order, each
    column's smallest value 0 unless every row holds an entry, so the same
    bits as the statistics of the dense normalized band, for a fraction of
    its memory and time. ``"clr"``, whose zeros are not zero, normalizes the
    dense band.

    Parameters
    ----------
    block, library, method, target_sum, log1p, idf
        As in :func:`normalized_block` (non-negative counts).

    Returns
    -------
    numpy.ndarray
        float64, ``(BAND_STATISTICS, n_features)``.

    Examples
    --------
    >>> counts, library = np.array([[1, 0], [2, 5]]), np.array([1.0, 7.0])
    >>> options = dict(method="library_size", target_sum=10.0, log1p=True)
    >>> np.array_equal(normalized_statistics(counts, library, **options),
    ...                _band_statistics(normalized_block(counts, library, **options)))
    True
    """
    return piece_statistics(
        iter([(0, np.asarray(block))]),
        np.ones(len(library), dtype=bool),
        np.asarray(library),
        method=method,
        target_sum=target_sum,
        log1p=log1p,
        idf=idf,
    )


def piece_statistics(
    pieces: Iterator[tuple[int, np.ndarray]],
    keep: np.ndarray,
    library: np.ndarray,
    *,
    method: str,
    target_sum: float,
    log1p: bool,
    idf: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`normalized_statistics` of the kept rows of a band of counts that arrives in pieces.

    The band's rows come as consecutive pieces
    (:func:`~cytearc.engine.arrays.map_row_pieces`); each piece's non-zero
    counts are listed, normalized, while it is in the CPU's cache, and the
    statistics follow from the list: the same entries in the same order as
    from the dense band of the kept rows, so the same bits.

    Parameters
    ----------
    pieces
        ``(offset, piece)``: rows ``offset:offset + len(piece)`` of the band,
        every feature; a piece may be overwritten by the next.
    keep
        bool per row of the band: the rows normalized (the selected cells).
    library
        The library size of each row of the band.
    method, target_sum, log1p, idf
        As in :func:`normalized_block` (non-negative counts).

    Returns
    -------
    numpy.ndarray
        float64, ``(BAND_STATISTICS, n_features)``.

    Examples
    --------
    >>> counts, library = np.array([[1, 0], [9, 9], [2, 5]]), np.array([1.0, 18.0, 7.0])
    >>> keep = np.array([True, False, True])
    >>> options = dict(method="library_size", target_sum=10.0, log1p=True)
    >>> pieces = iter([(0, counts[:2]), (2, counts[2:])])
    >>> np.array_equal(piece_statistics(pieces, keep, library, **options),
    ...                normalized_statistics(counts[keep], library[keep], **options))
    True
    """
    if method == "clr":
        kept = [piece[keep[offset : offset + len(piece)]] for offset, piece in pieces]
        block = np.concatenate(kept) if kept else np.zeros((0, 0))
        return _band_statistics(
            normalized_block(
                block, library[keep], method=method, target_sum=target_sum, log1p=log1p
            )
        )
    from cytearc.utils import kernels  # noqa: PLC0415 (numba is slow to import)

    none = np.empty(0)
    scale = none if method == "none" else cell_scale(library, target_sum)
    weights = none
    if method == "tfidf":
        if idf is None:
            msg = "piece_statistics: TF-IDF needs the idf of each feature"
            raise ValueError(msg)
        weights = np.asarray(idf, np.float64)
    n = int(np.count_nonzero(keep))
    n_columns, values, codes, columns = _coded_entries(pieces, keep, scale, weights)
    if n_columns is None or n == 0:
        return _band_statistics(np.zeros((0, 0 if n_columns is None else n_columns), np.float32))
    if log1p and method != "none":
        np.log1p(values, out=values)
    with np.errstate(over="ignore", invalid="ignore"):
        # each value as float32 stores it; one below float32's smallest is stored as a zero
        values = values.astype(np.float32).astype(np.float64)
        linear = np.expm1(values)
    detected = np.zeros(n_columns, np.int64)
    sums = np.zeros((n_columns, kernels.SUMS))
    sums[:, 0] = np.inf
    kernels.coded_sums(codes, columns, values, linear, detected, sums)
    smallest, high, total, linear_total = sums.T
    # the means, then the squared deviations from them, side by side as well
    deviations = np.zeros_like(sums)
    deviations[:, 0], deviations[:, 1] = total / n, linear_total / n
    kernels.coded_squares(codes, columns, values, linear, deviations)
    squares, linear_squares = deviations[:, 2], deviations[:, 3]
    low = np.where(detected == n, smallest, 0.0)
    # values past float32's largest are stored as inf (and expm1 overflows): inf - inf and
    # 0 * inf in their deviations give the NaN the finite-value check refuses, as the reference
    with np.errstate(over="ignore", invalid="ignore"):
        log = ColumnMoments.of_sums(n, total, squares, detected, low=low, high=high)
        moments = ColumnMoments.of_sums(
            n, linear_total, linear_squares, detected, low=np.expm1(low), high=np.expm1(high)
        )
    return np.vstack([log.pack(), moments.pack(), detected.astype(np.float64)[None, :]])


def _coded_entries(
    pieces: Iterator[tuple[int, np.ndarray]],
    keep: np.ndarray,
    scale: np.ndarray,
    weights: np.ndarray,
) -> tuple[int | None, np.ndarray, np.ndarray, np.ndarray]:
    """The kept rows' non-zero entries of a band that arrives in pieces, as :func:`~cytearc.utils.kernels.normalized_codes` lists them.

    Returns the number of columns (None without pieces), the distinct
    float64 values, and each entry's code (its index among them) and
    column, in row-major order. The lists grow in place, so they are
    written once and never concatenated.
    """
    from cytearc.utils import kernels  # noqa: PLC0415 (numba is slow to import)

    distinct, codes, columns = np.empty(0), np.empty(0, np.int32), np.empty(0, np.int32)
    n_columns, n_entries, n_distinct = None, 0, 0
    for offset, piece in pieces:
        part = np.ascontiguousarray(piece)
        rows = keep[offset : offset + len(part)]
        n_columns, integral = part.shape[1], part.dtype.kind in "biu"
        # every value of the kept rows, at most, is an entry: no pass to count them first
        most = int(np.count_nonzero(rows)) * n_columns
        if n_entries + most > len(codes):
            # room for this piece, and for the rest of the band at the density so far and a quarter more
            rest = (len(keep) - offset) * n_entries // max(1, offset)
            capacity = n_entries + most + rest + rest // 4
            index = np.int32 if len(keep) * n_columns < 2**31 else np.int64
            codes = _grown(codes, capacity, n_entries, dtype=index)
            columns = _grown(columns, capacity, n_entries, dtype=index)
        if n_distinct + most > len(distinct):
            distinct = _grown(distinct, max(2 * len(distinct), n_distinct + most), n_distinct)
        found_entries, found = kernels.normalized_codes(
            part,
            rows,
            scale[offset : offset + len(part)] if len(scale) else scale,
            weights,
            integral,
            distinct[n_distinct:],
            codes[n_entries:],
            columns[n_entries:],
        )
        codes[n_entries : n_entries + found_entries] += n_distinct
        n_entries += found_entries
        n_distinct += found
    return n_columns, distinct[:n_distinct], codes[:n_entries], columns[:n_entries]


def _grown(
    array: np.ndarray, capacity: int, used: int, *, dtype: type[np.integer[Any]] | None = None
) -> np.ndarray:
    """``array`` with room for ``capacity`` items (of ``dtype``, else its own), its first ``used`` kept."""
    out = np.empty(capacity, dtype=dtype or array.dtype)
    out[:used] = array[:used]
    return out


def merge_band_statistics(
    stacked: np.ndarray,
) -> tuple[ColumnMoments, ColumnMoments, np.ndarray]:
    """The moments of the values and of their ``expm1``, and the non-zeros per column, of all bands.

    Parameters
    ----------
    stacked
        :func:`~cytearc.ops.normalize.band_statistics`, computed.

    Returns
    -------
    tuple
        ``(moments, linear_moments, nnz)``; the moments merged band by band
        in row order (:meth:`ColumnMoments.merge_packed`), ``nnz`` int64.
    """
    bands = np.asarray(stacked, dtype=np.float64).reshape(-1, BAND_STATISTICS, stacked.shape[-1])
    log = ColumnMoments.merge_packed(bands[:, :5])
    linear = ColumnMoments.merge_packed(bands[:, 5:10])
    return log, linear, bands[:, 10].sum(axis=0).astype(np.int64)


def _fold_band_statistics(*parts: np.ndarray) -> np.ndarray:
    log, linear, nnz = merge_band_statistics(np.concatenate(parts))
    return np.vstack([log.pack(), linear.pack(), nnz.astype(np.float64)[None, :]])


_CSR_META: Final = sp.csr_matrix((0, 0), dtype=np.float32)


def _csr_from_entries(
    rows: np.ndarray, columns: np.ndarray, values: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A float32 CSR matrix of row-major entries; an entry that rounds to 0 in float32 is left out."""
    stored = values.astype(np.float32)
    kept = stored != 0
    rows, columns, stored = rows[kept], columns[kept], stored[kept]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    matrix = sp.csr_matrix((stored, columns, indptr), shape=shape)
    matrix.sort_indices()
    return matrix


def _csr_block(block: np.ndarray) -> sp.csr_matrix:
    values = np.ascontiguousarray(block)
    rows, columns, flat = nonzero_entries(values)
    return _csr_from_entries(rows, columns, values.ravel()[flat], values.shape)


def _csr_band(
    block: np.ndarray,
    library: np.ndarray,
    position: np.ndarray,
    idf: np.ndarray | None = None,
    **options: Any,
) -> sp.csr_matrix:
    """The normalized values of a band of counts as CSR, column ``position[f]`` for feature ``f`` (-1: left out)."""
    counts = np.ascontiguousarray(block)
    width = int(position.max(initial=-1)) + 1
    keep = position >= 0
    rows, columns, _, values = _sparse_normalized(
        counts, library, idf=idf, keep=None if keep.all() else keep, **options
    )
    return _csr_from_entries(rows, position[columns], values, (counts.shape[0], width))


def _normalize_band(block: np.ndarray, library: np.ndarray, **options: Any) -> np.ndarray:
    return normalized_block(block, library[:, 0], **options)


def _normalize_pieces(
    pieces: Iterator[tuple[int, np.ndarray]],
    library: np.ndarray,
    *,
    features: np.ndarray,
    **options: Any,
) -> np.ndarray:
    """The normalized values of the columns ``features`` of a block of cells that arrives in pieces."""
    out = np.zeros((len(library), len(features)), dtype=np.float32)
    for offset, piece in pieces:
        rows = slice(offset, offset + len(piece))
        out[rows] = normalized_block(piece[:, features], library[rows], **options)
    return out


def scaled_block(
    block: np.ndarray, *, mean: np.ndarray, sd: np.ndarray, max_value: float | None
) -> np.ndarray:
    """One block of scaled values (float64).

    Parameters
    ----------
    block
        Normalized values, cells x the scaled features.
    mean, sd
        Each feature's centre and scale.
    max_value
        Scaled values above it are clipped to it; None clips nothing.

    Returns
    -------
    numpy.ndarray
        ``(block - mean) / sd``, clipped.
    """
    z: np.ndarray = (np.asarray(block, dtype=np.float64) - mean) / sd
    if max_value is not None:
        np.clip(z, None, max_value, out=z)
    return z


def _gram(block: np.ndarray) -> np.ndarray:
    # NumPy multiplies an unaligned block (as a worker may receive one) by way of aligned
    # copies of each operand, with gemm instead of syrk: other bits than where it was made
    aligned = np.require(block, requirements="A")
    gram: np.ndarray = aligned.T @ aligned
    return gram


def _scaled_gram(
    block: np.ndarray, *, mean: np.ndarray, sd: np.ndarray, max_value: float | None
) -> np.ndarray:
    """The Gram matrix of a block's scaled values, which live only in this task."""
    return _gram(scaled_block(block, mean=mean, sd=sd, max_value=max_value))


def _project(block: np.ndarray, *, loadings: np.ndarray) -> np.ndarray:
    projected: np.ndarray = (block @ loadings).astype(np.float32)
    return projected
