"""The compiled loops give the bits of the numpy code they replaced.

The references below are the numpy implementations that ``pool_blocks._pair_sums``,
``normalize.normalized_statistics`` and ``ColumnMoments.of_nonzero`` had before
their loops moved to :mod:`cytearc.utils.kernels` (non-zero entries, then one
``numpy.bincount`` per sum, ``numpy.maximum.at`` and ``numpy.minimum.at``).
Stored cube fingerprints and artifact statistics depend on those bits, so
every result is compared byte for byte (NaN and the sign of zero included).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cytearc.ops.normalized_blocks import nonzero_entries, normalized_statistics
from cytearc.ops.pool_blocks import _pair_sums
from cytearc.utils import kernels
from cytearc.utils.moments import ColumnMoments

COUNT_DTYPES = (
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int32",
    "int64",
    "float32",
    "float64",
)
"""Every dtype counts are stored in (:mod:`cytearc.storage.count_dtype`)."""


def _reference_pair_sums(
    block: np.ndarray,
    library: np.ndarray,
    codes: np.ndarray,
    *,
    n_codes: int,
    target_sum: float,
    cells_axis: int,
) -> tuple[np.ndarray, np.ndarray]:
    block = np.ascontiguousarray(block)
    n_features = block.shape[1 - cells_axis]
    major, minor, flat = nonzero_entries(block)
    values = block.ravel()[flat].astype(np.float64)
    cells, features = (major, minor) if cells_axis == 0 else (minor, major)
    code = codes[cells]
    keep = code >= 0
    cells, values = cells[keep], values[keep]
    keys = code[keep] * n_features + features[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(library > 0, target_sum / library, 0.0)
    linear = values * scale[cells]
    logs = np.log1p(linear)
    size = n_codes * n_features

    def pooled(weights: np.ndarray | None) -> np.ndarray:
        return np.bincount(keys, weights=weights, minlength=size).reshape(n_codes, n_features)

    integers = np.stack([np.rint(pooled(values)), pooled(None)]).astype(np.int64)
    # numpy.bincount of no keys gives int64 zeros even with weights; the sums are float64
    sums = np.stack([pooled(linear), pooled(logs), pooled(logs**2)]).astype(np.float64)
    return integers, sums


def _reference_of_nonzero(
    n: int, columns: np.ndarray, values: np.ndarray, *, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    if n == 0:
        return ColumnMoments.empty(len(low)).pack()
    n_columns = len(low)
    total = np.bincount(columns, weights=values, minlength=n_columns)
    mean = total / n
    deviation = values - mean[columns]
    zeros = n - np.bincount(columns, minlength=n_columns)
    squares = np.bincount(columns, weights=deviation * deviation, minlength=n_columns)
    m2 = np.asarray(squares, dtype=np.float64) + zeros * mean**2
    m2[low == high] = 0.0
    return ColumnMoments(
        n, total, m2, np.asarray(low, np.float64), np.asarray(high, np.float64)
    ).pack()


def _reference_normalized_statistics(
    block: np.ndarray,
    library: np.ndarray,
    *,
    method: str,
    target_sum: float,
    log1p: bool,
    idf: np.ndarray | None = None,
) -> np.ndarray:
    counts = np.ascontiguousarray(block)
    n, n_columns = counts.shape
    if n == 0:
        empty = ColumnMoments.empty(n_columns).pack()
        return np.vstack([empty, empty, np.zeros((1, n_columns))])
    rows, columns, flat = nonzero_entries(counts)
    values = counts.ravel()[flat].astype(np.float64)
    if method != "none":
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(library > 0, target_sum / np.asarray(library, np.float64), 0.0)
        values *= scale[rows]
        if method == "tfidf":
            assert idf is not None
            values *= idf[columns]
        if log1p:
            np.log1p(values, out=values)
    stored = values.astype(np.float32)
    if not stored.all():
        kept = stored != 0
        columns, stored = columns[kept], stored[kept]
    entries = stored.astype(np.float64)
    detected = np.bincount(columns, minlength=n_columns)
    high = np.zeros(n_columns, np.float32)
    np.maximum.at(high, columns, stored)
    low = np.zeros(n_columns, np.float32)
    full = detected == n
    if full.any():
        smallest = np.full(n_columns, np.inf, np.float32)
        np.minimum.at(smallest, columns, stored)
        low[full] = smallest[full]
    low64, high64 = low.astype(np.float64), high.astype(np.float64)
    log = _reference_of_nonzero(n, columns, entries, low=low64, high=high64)
    with np.errstate(over="ignore", invalid="ignore"):
        linear = _reference_of_nonzero(
            n, columns, np.expm1(entries), low=np.expm1(low64), high=np.expm1(high64)
        )
    return np.vstack([log, linear, detected.astype(np.float64)[None, :]])


def _assert_same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()
    assert np.array_equal(got, expected, equal_nan=True)


def _check_pair_sums(
    cells: np.ndarray, library: np.ndarray, codes: np.ndarray, n_codes: int, target_sum: float
) -> None:
    """Both orientations against the reference, and against each other."""
    results = []
    for cells_axis in (0, 1):
        block = cells if cells_axis == 0 else np.ascontiguousarray(cells.T)
        options: dict[str, Any] = {
            "n_codes": n_codes,
            "target_sum": target_sum,
            "cells_axis": cells_axis,
        }
        with np.errstate(all="ignore"):  # negative counts: log1p of less than -1, rint of NaN
            expected = _reference_pair_sums(block, library, codes, **options)
            got = _pair_sums(block, library, codes, **options)
        for g, e in zip(got, expected, strict=True):
            _assert_same_bits(g, e)
        results.append(got)
    for a, b in zip(*results, strict=True):
        _assert_same_bits(a, b)


def _sparse_counts(rng: np.random.Generator, shape: tuple[int, int], dtype: str) -> np.ndarray:
    counts = rng.negative_binomial(2, 0.3, size=shape) * (rng.random(shape) < 0.15)
    if np.dtype(dtype).kind == "f":
        return (counts * rng.random(shape) * 3).astype(dtype)
    return counts.astype(dtype)


@pytest.mark.parametrize("dtype", COUNT_DTYPES)
def test_pair_sums_equal_the_bincount_reference(dtype: str) -> None:
    """Random sparse counts of every count dtype, an empty cell and cells left out: the same bits."""
    rng = np.random.default_rng(11)
    cells = _sparse_counts(rng, (300, 70), dtype)
    cells[4] = 0
    cells[:, 3] = 0
    library = cells.sum(axis=1, dtype=np.float64)
    library[7] = 0.0  # a cell with counts but no library: its normalized values are 0
    codes = rng.integers(-1, 9, size=300)
    _check_pair_sums(cells, library, codes, 9, 1e4)


def test_pair_sums_of_edge_blocks() -> None:
    """All zeros, no cells, no features, every cell left out, and large and negative counts."""
    rng = np.random.default_rng(5)
    library = rng.random(20) * 100
    codes = rng.integers(0, 3, size=20)
    _check_pair_sums(np.zeros((20, 6), np.uint16), library, codes, 3, 1e4)
    _check_pair_sums(np.zeros((0, 6), np.uint16), library[:0], codes[:0], 3, 1e4)
    _check_pair_sums(np.ones((20, 0), np.uint32), library, codes, 3, 1e4)
    _check_pair_sums(_sparse_counts(rng, (20, 6), "uint8"), library, np.full(20, -1), 3, 1e4)
    big = np.full((20, 6), 2**62 + 1, np.uint64)  # not a float64: rounded on the way, as before
    _check_pair_sums(big, library, codes, 3, 1e4)
    signed = rng.integers(-5, 6, size=(20, 6)).astype(np.int32)
    _check_pair_sums(signed, library, codes, 3, 1e4)
    fractions = (rng.random((20, 6)) - 0.3).astype(np.float32)
    _check_pair_sums(fractions, library, codes, 3, 0.5)


@st.composite
def _pooling_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    dtype = draw(st.sampled_from(["uint8", "uint16", "uint32", "int32", "float32", "float64"]))
    n_cells, n_features = draw(st.integers(0, 12)), draw(st.integers(0, 8))
    if np.dtype(dtype).kind == "f":
        nonzero = st.floats(-4, 1e6, width=8 * np.dtype(dtype).itemsize, allow_subnormal=True)
    else:
        info = np.iinfo(dtype)
        nonzero = st.integers(max(-3, int(info.min)), int(info.max))
    elements = st.one_of(st.just(0), st.just(0), nonzero)
    cells = draw(hnp.arrays(dtype, (n_cells, n_features), elements=elements))
    library = draw(
        hnp.arrays(np.float64, n_cells, elements=st.one_of(st.just(0.0), st.floats(0.5, 1e6)))
    )
    n_codes = draw(st.integers(1, 4))
    codes = draw(hnp.arrays(np.int64, n_cells, elements=st.integers(-1, n_codes - 1)))
    target_sum = draw(st.sampled_from([1.0, 1e4, 0.3]))
    return cells, library, codes, n_codes, target_sum


@given(case=_pooling_cases())
def test_pair_sums_equal_the_reference_for_any_block(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, int, float],
) -> None:
    """Any small block, dtype, library and codes: the bits of the bincount reference."""
    _check_pair_sums(*case)


def test_pair_sums_refuse_codes_beyond_the_pairs() -> None:
    """A code past ``n_codes`` raises instead of writing outside the sums."""
    block = np.ones((3, 2), np.uint16)
    with pytest.raises(IndexError, match="pair code"):
        _pair_sums(block, np.ones(3), np.array([0, 1, 2]), n_codes=2, target_sum=1.0, cells_axis=0)
    with pytest.raises(ValueError, match="one scale and one code per cell"):
        _pair_sums(block, np.ones(2), np.array([0, 1]), n_codes=2, target_sum=1.0, cells_axis=0)


def _check_statistics(
    counts: np.ndarray, library: np.ndarray, *, method: str, log1p: bool, idf: np.ndarray | None
) -> None:
    options: dict[str, Any] = {"method": method, "target_sum": 1e4, "log1p": log1p, "idf": idf}
    # the reference warns of values past float32's largest, then of inf - inf in their deviations
    with np.errstate(over="ignore", invalid="ignore"):
        expected = _reference_normalized_statistics(counts, library, **options)
    _assert_same_bits(normalized_statistics(counts, library, **options), expected)


METHODS = [
    ("library_size", True),
    ("library_size", False),
    ("tfidf", True),
    ("tfidf", False),
    ("none", False),
    ("none", True),
]


@pytest.mark.parametrize(("method", "log1p"), METHODS)
@pytest.mark.parametrize("dtype", COUNT_DTYPES)
def test_normalized_statistics_equal_the_numpy_reference(
    method: str, log1p: bool, dtype: str
) -> None:
    """All-zero rows and columns, full and constant columns, float32 underflow and overflow."""
    rng = np.random.default_rng(7)
    counts = _sparse_counts(rng, (64, 40), dtype)
    counts[:, 0] = 0
    counts[5] = 0
    counts[:, 1:4] += 1  # detected in every row: their smallest value is not 0
    counts[:, 4] = 3
    if np.dtype(dtype).kind == "f":
        counts[9, 7] = 1e-44  # scaled below float32's smallest: stored as a zero
        counts[9, 8] = np.finfo(dtype).max / 4  # past float32's largest, or expm1 overflows
        counts[10, 8] = 1e-30
    if method == "none" and np.dtype(dtype).kind == "i":
        counts[11, 9] = -3
        counts[:, 10] = -2  # full, all negative
    library = counts.sum(axis=1, dtype=np.float64)
    library[12] = 0.0
    idf = 64 / (1.0 + rng.integers(0, 64, size=40)) if method == "tfidf" else None
    if idf is not None:
        idf[6] = 0.0
    _check_statistics(counts, library, method=method, log1p=log1p, idf=idf)
    _check_statistics(counts[:0], library[:0], method=method, log1p=log1p, idf=idf)
    _check_statistics(np.zeros_like(counts), np.zeros(64), method=method, log1p=log1p, idf=idf)


@st.composite
def _statistics_cases(
    draw: st.DrawFn,
) -> tuple[np.ndarray, np.ndarray, str, bool, np.ndarray | None]:
    method, log1p = draw(st.sampled_from(METHODS))
    dtype = draw(st.sampled_from(["uint8", "uint16", "uint32", "int32", "float32", "float64"]))
    n_rows, n_columns = draw(st.integers(0, 10)), draw(st.integers(0, 8))
    low = -3 if method == "none" and np.dtype(dtype).kind != "u" else 0
    if np.dtype(dtype).kind == "f":
        extremes = [1e-45, 1e-40, 1e-30, 1e30, 3e38, float(np.finfo(dtype).max)]
        nonzero = st.one_of(
            st.floats(low, 50, width=8 * np.dtype(dtype).itemsize),
            st.sampled_from([float(np.asarray(x, dtype)) for x in extremes]),
        )
    else:
        nonzero = st.integers(low, int(np.iinfo(dtype).max))
    counts = draw(hnp.arrays(dtype, (n_rows, n_columns), elements=st.one_of(st.just(0), nonzero)))
    library = draw(
        hnp.arrays(np.float64, n_rows, elements=st.one_of(st.just(0.0), st.floats(1e-30, 1e40)))
    )
    idf = None
    if method == "tfidf":
        idf = draw(hnp.arrays(np.float64, n_columns, elements=st.floats(0, 1e3)))
    return counts, library, method, log1p, idf


@given(case=_statistics_cases())
# a value that normalizes past float32's largest, without the log: it warned of 0 * inf
@example(case=(np.array([[3e38]], np.float32), np.array([1.0]), "library_size", False, None))
def test_normalized_statistics_equal_the_reference_for_any_block(
    case: tuple[np.ndarray, np.ndarray, str, bool, np.ndarray | None],
) -> None:
    """Any small block, method and library, tiny and huge values included: the reference's bits."""
    counts, library, method, log1p, idf = case
    _check_statistics(counts, library, method=method, log1p=log1p, idf=idf)


@given(
    values=hnp.arrays(
        np.float64,
        st.integers(0, 40),
        elements=st.floats(-1e300, 1e300, allow_subnormal=True),
    ),
    data=st.data(),
)
def test_moments_of_non_zeros_equal_the_bincount_reference(
    values: np.ndarray, data: st.DataObject
) -> None:
    """Entries in any column order, equal extremes included: the bits of bincount's sums."""
    n_columns = data.draw(st.integers(1, 6))
    columns = data.draw(hnp.arrays(np.int64, len(values), elements=st.integers(0, n_columns - 1)))
    n = len(values) + data.draw(st.integers(0, 3))
    low = data.draw(hnp.arrays(np.float64, n_columns, elements=st.sampled_from([0.0, 1.0])))
    high = data.draw(hnp.arrays(np.float64, n_columns, elements=st.sampled_from([0.0, 1.0])))
    with np.errstate(over="ignore", invalid="ignore"):
        expected = _reference_of_nonzero(n, columns, values, low=low, high=high)
        got = ColumnMoments.of_nonzero(n, columns, values, low=low, high=high).pack()
    _assert_same_bits(got, expected)


def test_moments_refuse_columns_out_of_range() -> None:
    """A column past the band's, or a column missing, raises instead of going outside an array."""
    with pytest.raises(IndexError, match="out of range"):
        ColumnMoments.of_nonzero(
            2, np.array([0, 2]), np.array([1.0, 2.0]), low=np.zeros(2), high=np.ones(2)
        )
    with pytest.raises(ValueError, match="one column per value"):
        ColumnMoments.of_nonzero(
            2, np.array([0]), np.array([1.0, 2.0]), low=np.zeros(2), high=np.ones(2)
        )


def test_normalized_codes_refuse_factors_of_other_shapes() -> None:
    """A keep mask or scale that is not one per row, or an idf not one per column, raises instead of reading past it."""
    out = np.empty(4)
    block, every = np.ones((2, 2), np.uint8), np.empty(0, np.bool_)
    for keep, scale, idf, match in (
        (every, np.ones(3), np.empty(0), "one keep and one scale per row"),
        (np.ones(3, np.bool_), np.ones(2), np.empty(0), "one keep and one scale per row"),
        (every, np.ones(2), np.ones(3), "one idf per column"),
    ):
        with pytest.raises(ValueError, match=match):
            kernels.normalized_codes(
                block, keep, scale, idf, True, out, np.empty(4, np.intp), np.empty(4, np.intp)
            )


def test_normalized_codes_list_each_rows_equal_counts_once() -> None:
    """Equal small counts of a row share a value; large, float and idf-weighted ones do not."""
    block = np.array([[2, 0, 2, 5], [2, 2000, 2000, 0]], np.uint16)
    distinct, codes, columns = np.empty(6), np.empty(6, np.intp), np.empty(6, np.intp)
    scale, every = np.array([0.5, 0.25]), np.empty(0, np.bool_)
    found = kernels.normalized_codes(
        block, every, scale, np.empty(0), True, distinct, codes, columns
    )
    assert found == (6, 5)
    assert distinct[:5].tolist() == [1.0, 2.5, 0.5, 500.0, 500.0]
    assert codes.tolist() == [0, 0, 1, 2, 3, 4]
    assert columns.tolist() == [0, 2, 3, 0, 1, 2]
    for block_, idf in ((block.astype(np.float32), np.empty(0)), (block, np.ones(4))):
        found = kernels.normalized_codes(
            block_, every, scale, idf, block_.dtype.kind == "u", distinct, codes, columns
        )
        assert found == (6, 6)
        assert codes.tolist() == list(range(6))


def test_normalized_codes_skip_the_rows_not_kept() -> None:
    """Rows outside ``keep`` are not listed; each kept row takes its own scale, as if the others were never there."""
    block = np.array([[2, 0, 2, 5], [7, 7, 0, 0], [2, 2000, 2000, 0]], np.uint16)
    scale, keep = np.array([0.5, 100.0, 0.25]), np.array([True, False, True])
    out = np.empty(8), np.empty(8, np.intp), np.empty(8, np.intp)
    found = kernels.normalized_codes(block, keep, scale, np.empty(0), True, *out)
    expected = np.empty(8), np.empty(8, np.intp), np.empty(8, np.intp)
    assert found == kernels.normalized_codes(
        block[keep], np.empty(0, np.bool_), scale[keep], np.empty(0), True, *expected
    )
    n_entries, n_distinct = found
    assert out[0][:n_distinct].tolist() == expected[0][:n_distinct].tolist()
    for listed, reference in zip(out[1:], expected[1:], strict=True):
        assert listed[:n_entries].tolist() == reference[:n_entries].tolist()


def test_coded_sums_and_squares_equal_numpy() -> None:
    """The side-by-side sums of each column are numpy's, entries of value zero left out."""
    rng = np.random.default_rng(5)
    values, linear = rng.random(6), rng.random(6)
    values[2] = 0.0
    codes, columns = (
        rng.integers(0, 6, 40).astype(np.int32),
        rng.integers(0, 4, 40).astype(np.int32),
    )
    detected, sums = np.zeros(4, np.int64), np.zeros((4, kernels.SUMS))
    sums[:, 0] = np.inf
    kernels.coded_sums(codes, columns, values, linear, detected, sums)
    kept = values[codes] != 0
    y, lin, col = values[codes][kept], linear[codes][kept], columns[kept]
    low, high = np.full(4, np.inf), np.zeros(4)
    np.minimum.at(low, col, y)
    np.maximum.at(high, col, y)
    assert detected.tolist() == np.bincount(col, minlength=4).tolist()
    np.testing.assert_allclose(
        sums, np.column_stack([low, high, np.bincount(col, y, 4), np.bincount(col, lin, 4)])
    )
    deviations = np.zeros((4, kernels.SUMS))
    deviations[:, 0], deviations[:, 1] = sums[:, 2] / 10, sums[:, 3] / 10
    kernels.coded_squares(codes, columns, values, linear, deviations)
    np.testing.assert_allclose(deviations[:, 2], np.bincount(col, (y - deviations[col, 0]) ** 2, 4))
    np.testing.assert_allclose(
        deviations[:, 3], np.bincount(col, (lin - deviations[col, 1]) ** 2, 4)
    )
    with pytest.raises(ValueError, match="four sums per column"):
        kernels.coded_sums(codes, columns, values, linear, detected, np.zeros((4, 3)))
    with pytest.raises(IndexError, match="out of range"):
        kernels.coded_sums(codes, columns + 4, values, linear, detected, sums)
    with pytest.raises(ValueError, match="four figures per column"):
        kernels.coded_squares(codes, columns, values, linear, np.zeros((4, 2)))
