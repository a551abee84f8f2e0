"""Value checks of arrays: the first non-finite value, and Dask arrays checked block by block.

Shared by CytePool (cube layers) and CyteArc (artifact arrays); each package
raises its own error from what :func:`first_nonfinite` finds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

import dask.array as da
import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["BlockCheck", "checked_blocks", "first_nonfinite"]


class BlockCheck(Protocol):
    """A check of one block, told the index of the block's first element; it raises or returns None."""

    def __call__(self, block: np.ndarray, *, offset: tuple[int, ...]) -> None:
        """Check ``block``, whose first element is at ``offset`` in the whole array."""


def first_nonfinite(values: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first NaN or infinity of ``values`` in C order, or None.

    Arrays that are not float or complex hold finite values only.

    Examples
    --------
    >>> first_nonfinite(np.array([[1.0, 2.0], [np.inf, np.nan]]))
    (1, 0)
    >>> first_nonfinite(np.array([1, 2])) is None
    True
    """
    if values.dtype.kind not in "fc":
        return None
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), values.shape))


def _checked(
    block: np.ndarray, *, check: BlockCheck, block_info: Mapping[Any, Any] | None = None
) -> np.ndarray:
    offset = (0,) * block.ndim
    if block_info is not None and 0 in block_info:
        offset = tuple(int(start) for start, _ in block_info[0]["array-location"])
    check(block, offset=offset)
    return block


def checked_blocks(x: da.Array, check: BlockCheck) -> da.Array:
    """``x`` with ``check(block, offset=...)`` called on every block as it is computed.

    ``check`` must pickle (a module-level function or a
    :func:`functools.partial` of one) to run on a cluster's workers.
    """
    checked = da.map_blocks(_checked, x, check=check, dtype=x.dtype, meta=x._meta)
    return cast("da.Array", checked)
