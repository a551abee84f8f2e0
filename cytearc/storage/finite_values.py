"""Finite-value checks of artifact arrays, made as the arrays are written."""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from cytearc.errors import NonFiniteArtifactError

__all__ = ["check_finite", "checked_blocks"]


def check_finite(values: np.ndarray, *, operation: str, array: str, first_row: int = 0) -> None:
    """Raise :class:`NonFiniteArtifactError` at the first row of ``values`` with a non-finite value.

    Examples
    --------
    >>> check_finite(np.array([[1.0, np.inf]]), operation="pca", array="coords", first_row=7)
    Traceback (most recent call last):
    ...
    cytearc.errors.NonFiniteArtifactError: pca: array 'coords' holds inf at row 7; ...
    """
    if values.dtype.kind not in "fc":
        return
    bad = ~np.isfinite(values)
    if bad.any():
        index = np.unravel_index(int(np.argmax(bad)), values.shape)
        raise NonFiniteArtifactError(
            operation=operation,
            array=array,
            row=first_row + int(index[0]),
            value=float(values[index]),
        )


def _check_block(
    block: np.ndarray, *, operation: str, array: str, block_info: dict[Any, Any] | None = None
) -> np.ndarray:
    first = 0 if block_info is None else int(block_info[0]["array-location"][0][0])
    check_finite(block, operation=operation, array=array, first_row=first)
    return block


def checked_blocks(x: da.Array, *, operation: str, array: str) -> da.Array:
    """``x`` with every block checked for finite values as it is computed."""
    checked: da.Array = da.map_blocks(
        _check_block, x, operation=operation, array=array, dtype=x.dtype
    )
    return checked
