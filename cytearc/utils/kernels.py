"""Compiled loops over the non-zero entries of blocks, adding in the order numpy adds.

Each loop visits a block's non-zero entries in row-major order, as
:func:`numpy.nonzero` lists them, and adds each entry's value to its bin
where :func:`numpy.bincount` would, in the same order and in float64 without
fused multiply-adds (no ``fastmath``): the sums have the bits of the numpy
code they replace. Transcendental functions (``log1p``, ``expm1``) stay numpy
calls on whole vectors between the loops, since numba's libm may round them
otherwise than numpy's SIMD loops.

numba takes about half a second to import: callers import this module inside
the functions that use it, so ``import cytearc`` does not import numba. Each
function compiles once per argument dtype, on first use, into numba's disk
cache when a cache folder is writable.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final, TypeVar, cast

import numba
import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DISTINCT_COUNTS",
    "SUMS",
    "coded_squares",
    "coded_sums",
    "column_squares",
    "column_sums",
    "compiled",
    "normalized_codes",
    "pair_entries",
    "pair_squares",
    "warm",
]

_F = TypeVar("_F", bound="Callable[..., object]")


def compiled(function: _F) -> _F:
    """``function`` compiled by numba (released GIL, no bounds checks), cached on disk if possible."""
    dispatcher = numba.njit(nogil=True, boundscheck=False)(function)
    with contextlib.suppress(RuntimeError):  # numba found no writable cache folder
        dispatcher.enable_caching()
    return cast("_F", dispatcher)


@compiled
def _row_nonzeros(row: np.ndarray, positions: np.ndarray) -> int:
    """Write the positions of ``row``'s non-zero values to the front of ``positions`` (one longer than ``row``).

    Every position is written and only the non-zero ones advance: no branch
    to mispredict on a sparse row, 20 % less time than testing each value.
    """
    found = 0
    for i in range(row.shape[0]):
        positions[found] = i
        found += row[i] != 0
    return found


@compiled
def pair_entries(  # noqa: PLR0917 (numba compiles positional parameters only)
    block: np.ndarray,
    scale: np.ndarray,
    codes: np.ndarray,
    cells_axis: int,
    integers: np.ndarray,
    linear_sum: np.ndarray,
    linear_out: np.ndarray,
    key_out: np.ndarray,
) -> int:
    """Add up a block of counts per (pair code, feature); list its scaled non-zero values.

    Parameters
    ----------
    block
        Counts, C-ordered: cells x features (``cells_axis=0``) or features x
        cells (``cells_axis=1``).
    scale
        The factor of each cell's normalized values (float64).
    codes
        The pair code of each cell, or -1 for a cell left out.
    cells_axis
        The axis of ``block`` that runs over cells.
    integers
        float64 ``(2, n_codes, n_features)``, added to: the counts (float64,
        as ``numpy.bincount`` adds weights) and the number of non-zeros.
    linear_sum
        float64 ``(n_codes, n_features)``, added to: the scaled values.
    linear_out, key_out
        At least as long as the block's non-zeros: receive each kept entry's
        scaled value and its bin ``code * n_features + feature``.

    Returns
    -------
    int
        The number of kept entries written to ``linear_out`` and ``key_out``.

    Raises
    ------
    ValueError
        ``scale`` or ``codes`` does not have one value per cell.
    IndexError
        A code of a cell with a non-zero count (of a kept cell, for
        ``cells_axis=0``) is not below ``n_codes``; checked where the cell
        is met, so a call costs the block, not every cell's code.
    """
    n0, n1 = block.shape
    n_cells = n0 if cells_axis == 0 else n1
    if scale.shape[0] != n_cells or codes.shape[0] != n_cells:
        raise ValueError("pair_entries: expected one scale and one code per cell of the block")
    n_codes = linear_sum.shape[0]
    k = 0
    if cells_axis == 0:
        for cell in range(n0):
            code = codes[cell]
            if code < 0:
                continue
            if code >= n_codes:
                raise IndexError("pair_entries: a pair code is not below the number of pairs")
            factor = scale[cell]
            for feature in range(n1):
                x = block[cell, feature]
                if x == 0:
                    continue
                v = np.float64(x)
                lin = v * factor
                integers[0, code, feature] += v
                integers[1, code, feature] += 1.0
                linear_sum[code, feature] += lin
                linear_out[k] = lin
                key_out[k] = code * n1 + feature
                k += 1
        return k
    positions = np.empty(n1 + 1, np.int64)
    for feature in range(n0):
        found = _row_nonzeros(block[feature], positions)
        for i in range(found):
            cell = positions[i]
            code = codes[cell]
            if code < 0:
                continue
            if code >= n_codes:
                raise IndexError("pair_entries: a pair code is not below the number of pairs")
            v = np.float64(block[feature, cell])
            lin = v * scale[cell]
            integers[0, code, feature] += v
            integers[1, code, feature] += 1.0
            linear_sum[code, feature] += lin
            linear_out[k] = lin
            key_out[k] = code * n0 + feature
            k += 1
    return k


@compiled
def pair_squares(
    keys: np.ndarray, logs: np.ndarray, log_sum: np.ndarray, log_sq: np.ndarray
) -> None:
    """Add each value and its square to its bin, in order.

    Parameters
    ----------
    keys
        The flat bin of each value.
    logs
        The values (float64).
    log_sum, log_sq
        C-ordered float64 bins, added to: the values and their squares.
    """
    flat_sum = log_sum.reshape(-1)
    flat_sq = log_sq.reshape(-1)
    for i in range(keys.shape[0]):
        y = logs[i]
        flat_sum[keys[i]] += y
        flat_sq[keys[i]] += y * y


DISTINCT_COUNTS: Final = 1024
"""Integer counts below this share one normalized value per row in :func:`normalized_codes`."""
SUMS: Final = 4
"""The figures per column of :func:`coded_sums` and :func:`coded_squares`."""


@compiled
def normalized_codes(  # noqa: PLR0917 (numba compiles positional parameters only)
    block: np.ndarray,
    keep: np.ndarray,
    scale: np.ndarray,
    idf: np.ndarray,
    integral: bool,  # noqa: FBT001
    distinct_out: np.ndarray,
    codes_out: np.ndarray,
    columns_out: np.ndarray,
) -> tuple[int, int]:
    """List the non-zero entries of a C-ordered block as columns and codes of their float64 values.

    An entry's value is its count times its row's scale and its column's
    idf. Without idf, the entries of one row with the same integer count
    (below :data:`DISTINCT_COUNTS`) have the same value, listed once: a band
    of RNA counts has some 30 distinct values per cell against 1,000
    non-zeros, so the caller takes ``log1p`` and ``expm1`` of a small list
    and the entries' values are ``distinct_out[codes_out]``.

    Parameters
    ----------
    block
        Counts, rows x columns.
    keep
        bool per row: the rows listed (the others are skipped, not copied
        out first), or empty for every row.
    scale
        The factor of each row of ``block`` (float64), or empty for none.
    idf
        The factor of each column (float64, applied after ``scale``), or
        empty for none.
    integral
        Whether the counts are integers (a float count is never shared).
    distinct_out
        At least as long as the kept rows' non-zeros: receives the distinct values.
    codes_out, columns_out
        At least as long as the kept rows' non-zeros: receive each entry's
        index in ``distinct_out`` and its column, in row-major order.

    Returns
    -------
    tuple of int
        The number of entries and of distinct values.

    Raises
    ------
    ValueError
        ``keep``, ``scale`` or ``idf`` is neither empty nor of one value per
        row or column.
    """
    n0, n1 = block.shape
    selected = keep.shape[0] > 0
    scaled = scale.shape[0] > 0
    weighted = idf.shape[0] > 0
    if (selected and keep.shape[0] != n0) or (scaled and scale.shape[0] != n0):
        raise ValueError("normalized_codes: expected one keep and one scale per row")
    if weighted and idf.shape[0] != n1:
        raise ValueError("normalized_codes: expected one idf per column")
    shared = integral and not weighted
    slot = np.empty(DISTINCT_COUNTS, np.int64)
    slot_row = np.full(DISTINCT_COUNTS, -1, np.int64)
    k = 0
    d = 0
    positions = np.empty(n1 + 1, np.int64)
    for row in range(n0):
        if selected and not keep[row]:
            continue
        factor = scale[row] if scaled else 1.0
        found = _row_nonzeros(block[row], positions)
        for i in range(found):
            column = positions[i]
            x = block[row, column]
            columns_out[k] = column
            if shared and x > 0 and x < DISTINCT_COUNTS:
                small = np.int64(x)
                if slot_row[small] == row:
                    codes_out[k] = slot[small]
                    k += 1
                    continue
                slot_row[small] = row
                slot[small] = d
            v = np.float64(x)
            if scaled:
                v = v * factor
            if weighted:
                v = v * idf[column]
            distinct_out[d] = v
            codes_out[k] = d
            d += 1
            k += 1
    return k, d


@compiled
def coded_sums(  # noqa: PLR0917 (numba compiles positional parameters only)
    codes: np.ndarray,
    columns: np.ndarray,
    values: np.ndarray,
    linear: np.ndarray,
    detected: np.ndarray,
    sums: np.ndarray,
) -> None:
    """Add the non-zero coded entries to their columns, in order; entries whose value is zero are left out.

    The four float64 figures of a column lie side by side in a row of
    ``sums``, so an entry updates one cache line instead of four.

    Parameters
    ----------
    codes, columns
        Each entry's index in ``values`` and ``linear``, and its column.
    values, linear
        float64: the distinct values and a second value of each (``expm1``).
    detected
        int64 per column, added to: the entries kept.
    sums
        float64, a row per column: its smallest and largest kept value,
        updated as ``numpy.minimum.at`` and ``numpy.maximum.at`` would (a
        NaN sticks), and the kept entries' values and linear values, added to.

    Raises
    ------
    ValueError
        ``codes`` and ``columns`` differ in length, or ``sums`` is not a row
        of four per column.
    IndexError
        A column is negative or not below ``len(detected)``.
    """
    if codes.shape[0] != columns.shape[0]:
        raise ValueError("coded_sums: expected one column per code")
    n_columns = detected.shape[0]
    if sums.shape[0] != n_columns or sums.shape[1] != SUMS:
        raise ValueError("coded_sums: expected a row of four sums per column")
    for k in range(codes.shape[0]):
        code = codes[k]
        y = values[code]
        if y == 0:
            continue
        column = columns[k]
        if column < 0 or column >= n_columns:
            raise IndexError("coded_sums: a column is out of range")
        detected[column] += 1
        low = sums[column, 0]
        if not (np.isnan(low) or low <= y):
            sums[column, 0] = y
        high = sums[column, 1]
        if not (np.isnan(high) or high >= y):
            sums[column, 1] = y
        sums[column, 2] += y
        sums[column, 3] += linear[code]


@compiled
def coded_squares(
    codes: np.ndarray,
    columns: np.ndarray,
    values: np.ndarray,
    linear: np.ndarray,
    squares: np.ndarray,
) -> None:
    """Add the squared deviations of the non-zero coded entries from their columns' means, in order.

    Parameters
    ----------
    codes, columns, values, linear
        As in :func:`coded_sums` (checked there).
    squares
        float64, a row per column: the mean of its values and of its linear
        values, read, then the squared deviations of each, added to.

    Raises
    ------
    ValueError
        ``squares`` is not a row of four per column.
    """
    if squares.shape[1] != SUMS:
        raise ValueError("coded_squares: expected a row of four figures per column")
    for k in range(codes.shape[0]):
        code = codes[k]
        y = values[code]
        if y == 0:
            continue
        column = columns[k]
        deviation = y - squares[column, 0]
        squares[column, 2] += deviation * deviation
        deviation = linear[code] - squares[column, 1]
        squares[column, 3] += deviation * deviation


@compiled
def column_sums(
    columns: np.ndarray, values: np.ndarray, total: np.ndarray, count: np.ndarray
) -> None:
    """Add each value to its column's total, in order, and count the values of each column.

    Parameters
    ----------
    columns
        The column of each value.
    values
        The values (float64).
    total
        float64 per column, added to.
    count
        int64 per column, added to.

    Raises
    ------
    ValueError
        ``columns`` and ``values`` differ in length.
    IndexError
        A column is negative or not below ``len(total)``.
    """
    if values.shape[0] != columns.shape[0]:
        raise ValueError("column_sums: expected one column per value")
    n_columns = total.shape[0]
    for i in range(columns.shape[0]):
        column = columns[i]
        if column < 0 or column >= n_columns:
            raise IndexError("column_sums: a column is out of range")
        total[column] += values[i]
        count[column] += 1


@compiled
def column_squares(
    columns: np.ndarray, values: np.ndarray, mean: np.ndarray, squares: np.ndarray
) -> None:
    """Add each value's squared deviation from its column's mean to the column's total, in order.

    Parameters
    ----------
    columns
        The column of each value.
    values
        The values (float64).
    mean
        The mean of each column (float64).
    squares
        float64 per column, added to.
    """
    for i in range(columns.shape[0]):
        column = columns[i]
        deviation = values[i] - mean[column]
        squares[column] += deviation * deviation


WARM_DTYPES: Final = (np.uint8, np.uint16, np.uint32)
"""The count dtypes :func:`warm` loads the kernels for (the unsigned storage dtypes of real counts)."""


def warm() -> None:
    """Load every kernel of this module for :data:`WARM_DTYPES` (from numba's disk cache, else compile it).

    numba loads a kernel on its first call with each signature; a process
    that calls this while it waits (a worker starting, an import reading its
    input) spares the first normalization or pooling about half a second.

    Examples
    --------
    >>> warm()
    """
    one, row, entry = np.ones(1), np.zeros(1, np.intp), np.zeros(1, np.int32)
    for dtype in WARM_DTYPES:
        block = np.ones((1, 1), dtype)
        entries = (np.empty(1), entry, entry)
        normalized_codes(block, np.ones(1, np.bool_), one, np.empty(0), True, *entries)  # noqa: FBT003
        pair_entries(
            block,
            one,
            row.astype(np.int64),
            0,
            np.zeros((2, 1, 1)),
            np.zeros((1, 1)),
            np.empty(1),
            np.empty(1, np.int64),
        )
    values = np.ones(1)
    coded_sums(entry, entry, values, values, np.zeros(1, np.int64), np.ones((1, SUMS)))
    coded_squares(entry, entry, values, values, np.zeros((1, SUMS)))
    column_sums(row, values, np.zeros(1), np.zeros(1, np.int64))
    column_squares(row, values, np.zeros(1), np.zeros(1))
    pair_squares(row.astype(np.int64), values, np.zeros((1, 1)), np.zeros((1, 1)))
