"""Count dtype: narrowest unsigned for non-negative integers, else the source's; finite; checked casts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cytearc.errors import CountCastError, NonFiniteCountsError
from cytearc.storage.count_dtype import ValueRange, checked_cast, resolve_count_dtype, scan_values


@pytest.mark.parametrize(
    ("values", "dtype", "expected"),
    [
        ([0, 255], np.int64, np.uint8),
        ([0, 256], np.int64, np.uint16),
        ([65535], np.int32, np.uint16),
        ([65536], np.int32, np.uint32),
        ([2**32], np.int64, np.uint64),
        ([0.0, 255.0], np.float64, np.uint8),
        ([1.0, 300.0], np.float32, np.uint16),
        ([0.5, 2.0], np.float32, np.float32),
        ([0.5, 2.0], np.float64, np.float64),
        ([0.5], np.float16, np.float32),
        ([-1, 5], np.int16, np.int16),
        ([-1.0, 5.0], np.float64, np.float64),
        ([True, False], np.bool_, np.uint8),
    ],
)
def test_resolved_dtype(values: list[float], dtype: type, expected: type) -> None:
    """The 255/256 boundary, float counts, negatives and float16 resolve as the seed says."""
    assert resolve_count_dtype(scan_values(np.array(values, dtype=dtype))) == np.dtype(expected)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_counts_are_refused(bad: float) -> None:
    """NaN and infinity raise a named ValueError before any dtype is chosen."""
    with pytest.raises(NonFiniteCountsError, match="finite") as info:
        scan_values(np.array([1.0, bad]), where="RNA counts")
    assert isinstance(info.value, ValueError)
    assert "RNA counts" in str(info.value)


def test_ranges_merge_across_batches() -> None:
    """Batches merge into the range of all values, so a streamed scan equals one scan."""
    values = np.array([3, 0, 70000, 12, 5], dtype=np.int64)
    merged = scan_values(values[:2]).merge(scan_values(values[2:])).merge(scan_values(values[:0]))
    assert merged == scan_values(values)
    assert resolve_count_dtype(merged) == np.uint32
    assert resolve_count_dtype(ValueRange(source=np.dtype(np.int64))) == np.uint8


@given(values=hnp.arrays(np.int64, st.integers(1, 50), elements=st.integers(-(2**40), 2**40)))
def test_resolved_dtype_holds_every_value(values: np.ndarray) -> None:
    """The resolved dtype stores every value exactly (a checked cast round-trips)."""
    dtype = resolve_count_dtype(scan_values(values))
    stored = checked_cast(values, dtype)
    np.testing.assert_array_equal(stored.astype(np.int64), values)
    if values.min() >= 0:
        assert dtype.kind == "u"
        smaller = [
            t for t in (np.uint8, np.uint16, np.uint32) if np.dtype(t).itemsize < dtype.itemsize
        ]
        assert all(values.max() > np.iinfo(t).max for t in smaller)


def test_checked_cast_refuses_wrapping() -> None:
    """A value the target cannot hold raises instead of wrapping or truncating."""
    with pytest.raises(CountCastError, match="do not fit uint8"):
        checked_cast(np.array([0, 256]), np.dtype(np.uint8))
    with pytest.raises(CountCastError, match="do not fit"):
        checked_cast(np.array([-1, 2]), np.dtype(np.uint16))
    with pytest.raises(CountCastError, match="non-integer"):
        checked_cast(np.array([1.5]), np.dtype(np.uint16))
