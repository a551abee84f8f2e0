"""Dask tasks over cube layers: lazy layers, their blocks checked, and one task per group.

Everything in :mod:`cytepool.cube` that touches layer values goes through this
module. A layer's natural block is one group, every sample and up to
:data:`LAYER_CHUNK_FEATURES` features, the chunk of the file. The tasks are
computed by :func:`cytepool.compute.compute`, on Dask's current scheduler.
"""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING, Any, Final

import dask.array as da
import numpy as np
from dask.delayed import delayed

from cytepool.block_checks import checked_blocks, first_nonfinite
from cytepool.cube.encoding import hash_rows
from cytepool.errors import CubeValueError, NegativeValueError, NonFiniteValueError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dask.delayed import Delayed

__all__ = [
    "LAYER_CHUNK_FEATURES",
    "as_layer_array",
    "group_tasks",
    "layer_chunks",
    "layer_digest_tasks",
    "validate_layer_block",
    "validated",
]

_INT64_MAX: Final = int(np.iinfo(np.int64).max)

LAYER_CHUNK_FEATURES: Final = 4096
"""Largest number of features in one chunk of a layer."""


def layer_chunks(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """Chunk shape of a layer of ``shape``: one group, every sample, up to 4,096 features.

    Parameters
    ----------
    shape
        ``(n_groups, n_samples, n_features)``.

    Returns
    -------
    tuple of int
        The chunk shape (each at least 1).
    """
    _, n_samples, n_features = shape
    return (1, max(n_samples, 1), max(min(n_features, LAYER_CHUNK_FEATURES), 1))


def as_layer_array(layer: np.ndarray | da.Array) -> da.Array:
    """A layer as a Dask array; a numpy layer becomes one block per group.

    The blocks are views of the numpy array: nothing is copied, and the graph
    is named at random rather than by hashing the values.

    Parameters
    ----------
    layer
        A numpy or Dask layer.

    Returns
    -------
    dask.array.Array
        The layer (itself, if it is a Dask array).
    """
    if isinstance(layer, da.Array):
        return layer
    n_groups, n_samples, n_features = layer.shape
    name = f"cytepool-numpy-{uuid.uuid4().hex}"
    graph = {(name, g, 0, 0): layer[g : g + 1] for g in range(n_groups)}
    chunks = ((1,) * n_groups, (n_samples,), (n_features,))
    return da.Array(graph, name, chunks, meta=layer[:0, :0, :0])


def validate_layer_block(
    block: np.ndarray, *, name: str, nonnegative: bool, offset: tuple[int, ...] = (0, 0, 0)
) -> None:
    """Raise a named error if ``block`` of layer ``name`` holds NaN, infinity or, if asked, < 0.

    Parameters
    ----------
    block
        Values of the layer.
    name
        The layer's name, for the message.
    nonnegative
        Refuse negative values too.
    offset
        The block's position in the layer, so the message names the value's index.

    Raises
    ------
    NonFiniteValueError
        A value is NaN or infinite.
    NegativeValueError
        ``nonnegative`` and a value is below 0.
    CubeValueError
        A uint64 value is above 2**63-1 (it has no int64 digest).
    """
    bad = first_nonfinite(block)
    if bad is not None:
        msg = (
            f"layer {name!r} holds {block[bad].item()!r} at (group, sample, "
            f"feature) {_shifted(bad, offset)}; layers hold finite values only - drop or fix the value"
        )
        raise NonFiniteValueError(msg)
    if block.dtype == np.uint64 and block.size and int(block.max()) > _INT64_MAX:
        msg = f"layer {name!r} holds uint64 values above 2**63-1, which cannot be fingerprinted as int64"
        raise CubeValueError(msg)
    if nonnegative and block.dtype.kind in "if":
        negative = block < 0
        if negative.any():
            first = tuple(int(i) for i in np.argwhere(negative)[0])
            msg = (
                f"layer {name!r} holds the negative value "
                f"{block[first].item()!r} at (group, sample, feature) {_shifted(first, offset)}; "
                "counts and detected cells cannot be negative"
            )
            raise NegativeValueError(msg)


def _shifted(index: tuple[int, ...], offset: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(i + o for i, o in zip(index, offset, strict=True))


def validated(x: da.Array, *, name: str, nonnegative: bool) -> da.Array:
    """``x`` with every block checked, as it is computed, for values a layer may not hold.

    Parameters
    ----------
    x
        A layer.
    name
        Its name, for messages.
    nonnegative
        Refuse negative values too.

    Returns
    -------
    dask.array.Array
        ``x``, each block checked by :func:`validate_layer_block`.
    """
    return checked_blocks(
        x, functools.partial(validate_layer_block, name=name, nonnegative=nonnegative)
    )


def group_tasks(
    x: da.Array, func: Callable[..., Any], *args: object, pure: bool = True
) -> list[Delayed]:
    """One delayed ``func(g, blocks, *args)`` per group, ``blocks`` in feature order.

    ``x`` is rechunked, if needed, to one group and every sample per block, so
    each task owns a whole group: every chunk of it in the file.

    Parameters
    ----------
    x
        A layer.
    func
        Called with the group position, its feature blocks and ``args``.
    *args
        More arguments of ``func``.
    pure
        Whether ``func`` is pure (tasks named by their arguments).

    Returns
    -------
    list of dask.delayed.Delayed
        One task per group, in group order.
    """
    n_groups, n_samples, _ = x.shape
    if x.chunks[0] != (1,) * n_groups or len(x.chunks[1]) > 1:
        x = x.rechunk((1, max(n_samples, 1), x.chunks[2]))
    blocks = x.to_delayed(optimize_graph=False)
    call = delayed(func, pure=pure)
    return [call(g, list(blocks[g, 0, :]), *args) for g in range(n_groups)]


def _digest_group(_g: int, blocks: Sequence[np.ndarray]) -> str:
    return hash_rows([b[0] for b in blocks])


def layer_digest_tasks(x: da.Array) -> list[Delayed]:
    """Delayed digests of every group of a layer, computed in parallel.

    Parameters
    ----------
    x
        A layer.

    Returns
    -------
    list of dask.delayed.Delayed
        One digest per group, in group order.
    """
    return group_tasks(x, _digest_group)
