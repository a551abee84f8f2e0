"""The storage dtype of count arrays, resolved from the values themselves.

Counts are stored unsigned, in the narrowest of uint8, uint16, uint32 and
uint64 that holds the largest value, exactly when every value is a
non-negative integer. Other counts keep their source dtype: float32 or
float64, or a signed integer dtype when values are negative; float16 is never
a storage dtype. The dtype depends only on the (duplicate-summed) values, so
the same counts from any format give the same store. Non-finite values are
refused, and every cast is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from cytearc.errors import CountCastError, NonFiniteCountsError

__all__ = [
    "ValueRange",
    "checked_cast",
    "resolve_count_dtype",
    "scan_values",
]

_UNSIGNED: Final = (np.uint8, np.uint16, np.uint32, np.uint64)


@dataclass(frozen=True, kw_only=True)
class ValueRange:
    """What a pass over the values of an assay found: enough to choose its storage dtype.

    ``source`` is the dtype values arrive in (float16 is read as float32).
    Ranges of batches merge with :meth:`merge`; an empty range has no values.
    """

    source: np.dtype
    minimum: float | int | None = None
    maximum: float | int | None = None
    integral: bool = True
    n_values: int = 0

    def merge(self, other: ValueRange) -> ValueRange:
        """The range of both batches.

        Parameters
        ----------
        other
            The range of another batch of the same source.

        Returns
        -------
        ValueRange
            The range of the values of both.
        """
        if other.n_values == 0:
            return replace(self, source=np.promote_types(self.source, other.source))
        if self.n_values == 0:
            return replace(other, source=np.promote_types(self.source, other.source))
        return ValueRange(
            source=np.promote_types(self.source, other.source),
            minimum=min(self.minimum, other.minimum),  # type: ignore[type-var]
            maximum=max(self.maximum, other.maximum),  # type: ignore[type-var]
            integral=self.integral and other.integral,
            n_values=self.n_values + other.n_values,
        )


def scan_values(values: np.ndarray, *, where: str = "counts") -> ValueRange:
    """The range of one batch of (already duplicate-summed) values; refuses NaN and infinity.

    Parameters
    ----------
    values
        The batch's stored values (a sparse matrix's ``data``, or a dense band).
    where
        The source and rows, for messages.

    Returns
    -------
    ValueRange
        The minimum, maximum, whether every value is an integer, and the
        source dtype.

    Raises
    ------
    CountCastError
        The values are not of a number dtype.
    NonFiniteCountsError
        A value is NaN or infinite.

    Examples
    --------
    >>> r = scan_values(np.array([0, 3, 255]))
    >>> (r.minimum, r.maximum, r.integral)
    (0, 255, True)
    """
    source = np.dtype(np.float32) if values.dtype == np.float16 else values.dtype
    if source.kind not in "biuf":
        msg = f"{where}: expected counts of a number dtype, found dtype {values.dtype}; convert the matrix to integers or floats before importing"
        raise CountCastError(msg)
    if values.size == 0:
        return ValueRange(source=source)
    if source.kind == "f":
        finite = np.isfinite(values)
        if not finite.all():
            bad = values[~finite][0]
            msg = f"{where}: counts hold {bad}; expected finite counts - fix or drop them before importing"
            raise NonFiniteCountsError(msg)
        integral = bool(np.all(values == np.floor(values)))
        return ValueRange(
            source=source,
            minimum=float(values.min()),
            maximum=float(values.max()),
            integral=integral,
            n_values=int(values.size),
        )
    return ValueRange(
        source=np.dtype(np.int64) if source.kind == "b" else source,
        minimum=int(values.min()),
        maximum=int(values.max()),
        n_values=int(values.size),
    )


def resolve_count_dtype(value_range: ValueRange) -> np.dtype:
    """The storage dtype of counts with this range.

    Parameters
    ----------
    value_range
        The range of every value of the assay (:func:`scan_values`, merged).

    Returns
    -------
    numpy.dtype
        The narrowest unsigned integer dtype that holds non-negative integer
        counts, else float32 or float64 as the source, else the source's
        signed integer dtype.

    Raises
    ------
    CountCastError
        Non-negative integer counts do not fit uint64.

    Examples
    --------
    >>> resolve_count_dtype(scan_values(np.array([0.0, 255.0])))
    dtype('uint8')
    >>> resolve_count_dtype(scan_values(np.array([0, 256])))
    dtype('uint16')
    >>> resolve_count_dtype(scan_values(np.array([0.5], dtype=np.float32)))
    dtype('float32')
    >>> resolve_count_dtype(scan_values(np.array([-1, 2], dtype=np.int16)))
    dtype('int16')
    """
    r = value_range
    if r.n_values == 0:
        return np.dtype(np.uint8)
    if r.integral and r.minimum is not None and r.minimum >= 0:
        for dtype in _UNSIGNED:
            if r.maximum is not None and r.maximum <= np.iinfo(dtype).max:
                return np.dtype(dtype)
        msg = f"counts: the largest value {r.maximum!r} does not fit uint64, the widest count dtype; check that the source holds counts"
        raise CountCastError(msg)
    if r.source.kind == "f":
        return np.dtype(np.float64) if r.source.itemsize > 4 else np.dtype(np.float32)
    return r.source


def checked_cast(values: np.ndarray, dtype: np.dtype, *, where: str = "counts") -> np.ndarray:
    """``values`` as ``dtype``, raising :class:`CountCastError` instead of wrapping or truncating.

    Parameters
    ----------
    values
        The values.
    dtype
        The storage dtype.
    where
        The rows, for messages.

    Returns
    -------
    numpy.ndarray
        The values in ``dtype`` (``values`` itself when already of it).

    Raises
    ------
    CountCastError
        A non-integer value would go to an integer dtype, or a value is out
        of the dtype's range.
    """
    target = np.dtype(dtype)
    if values.dtype == target:
        return values
    if values.size and target.kind in "iu":
        if values.dtype.kind == "f" and not np.all(values == np.floor(values)):
            msg = f"{where}: non-integer counts cannot be stored as {target}; keep a float dtype for them"
            raise CountCastError(msg)
        info = np.iinfo(target)
        low, high = values.min(), values.max()
        if low < info.min or high > info.max:
            msg = f"{where}: counts from {low} to {high} do not fit {target} ({info.min}..{info.max}); choose a wider dtype"
            raise CountCastError(msg)
    return values.astype(target)
