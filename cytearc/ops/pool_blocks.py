"""What the tasks of pooling run on blocks of counts: the five sums of each (group, sample) pair.

:mod:`cytearc.ops.compare` plans the tasks and writes the cube; the
functions the tasks run live here, in a module that imports NumPy and the
compiled kernels only, so a worker that unpickles one does not import the
operation's stores, tables and pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from cytearc.ops.normalized_blocks import cell_scale

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["INTEGER_LAYERS", "LAYERS", "VALUE_LAYERS"]


INTEGER_LAYERS: Final = ("counts", "detected")


VALUE_LAYERS: Final = ("linear_sum", "log_sum", "log_sum_sq")


LAYERS: Final = INTEGER_LAYERS + VALUE_LAYERS


def _scaled_pair_sums(
    block: np.ndarray, scale: np.ndarray, codes: np.ndarray, *, n_codes: int, cells_axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """The five float64 sums of a dense block (see :func:`_pair_sums`), counts and detected not yet rounded."""
    from cytearc.utils import kernels  # noqa: PLC0415 (numba is slow to import)

    block = np.ascontiguousarray(block)
    n_features = block.shape[1 - cells_axis]
    integers = np.zeros((2, n_codes, n_features))
    values = np.zeros((3, n_codes, n_features))
    size = np.count_nonzero(block)
    linear, keys = np.empty(size), np.empty(size, np.int64)
    k = kernels.pair_entries(block, scale, codes, cells_axis, integers, values[0], linear, keys)
    kernels.pair_squares(keys[:k], np.log1p(linear[:k]), values[1], values[2])
    return integers, values


def _pair_sums(
    block: np.ndarray,
    library: np.ndarray,
    codes: np.ndarray,
    *,
    n_codes: int,
    target_sum: float,
    cells_axis: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The five sums of a dense block of counts per pair code, on its non-zero values.

    ``block`` is cells x features (``cells_axis=0``, a ``counts`` shard) or
    features x cells (``cells_axis=1``, a ``countsT`` shard). Returns int64
    ``(2, n_codes, n_features)`` (counts, detected) and float64
    ``(3, n_codes, n_features)`` (linear_sum, log_sum, log_sum_sq); cells of
    code ``-1`` are left out. Each sum adds its cells' values in increasing
    cell order (the block's non-zeros in row-major order, as
    ``numpy.bincount`` of them would), so it does not depend on the block's
    orientation or on the scheduler; counts are added in float64 and
    rounded, as they were by ``numpy.bincount``.
    """
    integers, values = _scaled_pair_sums(
        block,
        cell_scale(library, target_sum),
        np.asarray(codes, np.int64),
        n_codes=n_codes,
        cells_axis=cells_axis,
    )
    return np.rint(integers).astype(np.int64), values


def _pool_block(
    block: np.ndarray, library: np.ndarray, codes: np.ndarray, *, n_codes: int, target_sum: float
) -> tuple[np.ndarray, np.ndarray]:
    """Sums of one ``counts`` shard's cells, with a leading axis for adding shards up."""
    integers, values = _pair_sums(
        block, library, codes, n_codes=n_codes, target_sum=target_sum, cells_axis=0
    )
    return integers[None], values[None]


def _pool_pieces(
    pieces: Iterator[tuple[int, np.ndarray]],
    *,
    library: np.ndarray,
    codes: np.ndarray,
    n_codes: int,
    target_sum: float,
) -> np.ndarray:
    """The five sums of a band of ``countsT`` (features x every cell) that arrives in pieces of features.

    Returns float64 ``(n_features, 5, n_codes)``: each feature's sums
    (counts, detected, linear_sum, log_sum, log_sum_sq) per pair code, the
    first two rounded to integers. A feature's sums are all in one piece,
    added in increasing cell order: the bits of :func:`_pair_sums` of the
    dense band.
    """
    scale, codes = cell_scale(library, target_sum), np.asarray(codes, np.int64)
    parts = []
    for _, piece in pieces:
        integers, values = _scaled_pair_sums(piece, scale, codes, n_codes=n_codes, cells_axis=1)
        parts.append(np.concatenate([np.rint(integers), values]).transpose(2, 0, 1))
    return np.concatenate(parts) if parts else np.zeros((0, len(LAYERS), n_codes))


def _band_layer(sums: np.ndarray, *, i: int, n_groups: int, n_samples: int) -> np.ndarray:
    """Layer ``i`` of a band's sums ``(n_features, 5, n_codes)`` as ``(n_groups, n_samples, n_features)``."""
    layer = sums[:, i, :].T.reshape(n_groups, n_samples, len(sums))
    return layer.astype(np.int64) if LAYERS[i] in INTEGER_LAYERS else np.ascontiguousarray(layer)
