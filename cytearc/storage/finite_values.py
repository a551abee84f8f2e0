"""Finite-value checks of artifact arrays, made as the arrays are written.

The checks are :mod:`cytepool.block_checks`'s, shared with cube layers; a
non-finite value raises :class:`~cytearc.errors.NonFiniteArtifactError`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from cytearc.errors import NonFiniteArtifactError
from cytepool.block_checks import checked_blocks as _checked_blocks
from cytepool.block_checks import first_nonfinite

if TYPE_CHECKING:
    import dask.array as da
    import numpy as np

__all__ = ["checked_blocks", "validate_finite"]


def validate_finite(values: np.ndarray, *, operation: str, array: str, first_row: int = 0) -> None:
    """Raise :class:`NonFiniteArtifactError` at the first row of ``values`` with a non-finite value.

    Parameters
    ----------
    values
        An artifact array's values (or a band of its rows).
    operation
        The operation producing it, for the message.
    array
        The array's name, for the message.
    first_row
        The row of the array where ``values`` start.

    Raises
    ------
    NonFiniteArtifactError
        A value is NaN or infinite; the error names its row.

    Examples
    --------
    >>> import numpy as np
    >>> validate_finite(np.array([[1.0, np.inf]]), operation="pca", array="coords", first_row=7)
    Traceback (most recent call last):
    ...
    cytearc.errors.NonFiniteArtifactError: pca: array 'coords' holds inf at row 7; ...
    """
    index = first_nonfinite(values)
    if index is not None:
        raise NonFiniteArtifactError(
            operation=operation,
            array=array,
            row=first_row + index[0],
            value=float(values[index]),
        )


def _check_block(block: np.ndarray, *, offset: tuple[int, ...], operation: str, array: str) -> None:
    validate_finite(block, operation=operation, array=array, first_row=offset[0])


def checked_blocks(x: da.Array, *, operation: str, array: str) -> da.Array:
    """``x`` with every block checked for finite values as it is computed.

    Parameters
    ----------
    x
        The array's values.
    operation
        The operation producing it, for messages.
    array
        The array's name, for messages.

    Returns
    -------
    dask.array.Array
        ``x``, each block checked by :func:`validate_finite` with its global row.
    """
    return _checked_blocks(x, functools.partial(_check_block, operation=operation, array=array))
