"""The engine behind cubes: lazy layers as Dask arrays and the graphs run over them.

Everything in :mod:`cytepool.cube` that touches layer values goes through this
module. A layer's natural block is one group, every sample and up to
:data:`LAYER_CHUNK_FEATURES` features, the chunk of the file. Graphs run on
Dask's current scheduler: the threaded one by default, or the cluster of an
active :class:`distributed.Client`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, cast

import dask
import dask.array as da
import numpy as np
from dask.base import compute as dask_compute
from dask.delayed import delayed
from dask.diagnostics.progress import ProgressBar
from distributed import default_client, wait
from distributed import progress as cluster_progress

from cytepool.cube.encoding import hash_rows
from cytepool.errors import CubeValueError, NegativeValueError, NonFiniteValueError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dask.delayed import Delayed
    from distributed import Client

__all__ = [
    "LAYER_CHUNK_FEATURES",
    "as_layer_array",
    "check_layer_block",
    "compute",
    "group_tasks",
    "layer_chunks",
    "layer_digest_tasks",
    "validated",
]

_INT64_MAX: Final = int(np.iinfo(np.int64).max)

LAYER_CHUNK_FEATURES: Final = 4096
"""Largest number of features in one chunk of a layer."""


def layer_chunks(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """Chunk shape of a layer of ``shape``: one group, every sample, up to 4,096 features."""
    _, n_samples, n_features = shape
    return (1, max(n_samples, 1), max(min(n_features, LAYER_CHUNK_FEATURES), 1))


def as_layer_array(layer: np.ndarray | da.Array) -> da.Array:
    """A layer as a Dask array; a numpy layer becomes one block per group.

    The blocks are views of the numpy array: nothing is copied, and the graph
    is named at random rather than by hashing the values.
    """
    if isinstance(layer, da.Array):
        return layer
    n_groups, n_samples, n_features = layer.shape
    name = f"cytepool-numpy-{uuid.uuid4().hex}"
    graph = {(name, g, 0, 0): layer[g : g + 1] for g in range(n_groups)}
    chunks = ((1,) * n_groups, (n_samples,), (n_features,))
    return da.Array(graph, name, chunks, meta=layer[:0, :0, :0])


def check_layer_block(
    block: np.ndarray, *, name: str, nonnegative: bool, offset: tuple[int, ...] = (0, 0, 0)
) -> None:
    """Raise a named error if ``block`` of layer ``name`` holds NaN, infinity or, if asked, < 0."""
    if block.dtype.kind == "f":
        bad = ~np.isfinite(block)
        if bad.any():
            where = _first(bad, offset)
            msg = (
                f"layer {name!r} holds {block[tuple(np.argwhere(bad)[0])].item()!r} at (group, sample, "
                f"feature) {where}; layers hold finite values only - drop or fix the value"
            )
            raise NonFiniteValueError(msg)
    if block.dtype == np.uint64 and block.size and int(block.max()) > _INT64_MAX:
        msg = f"layer {name!r} holds uint64 values above 2**63-1, which cannot be fingerprinted as int64"
        raise CubeValueError(msg)
    if nonnegative and block.dtype.kind in "if":
        negative = block < 0
        if negative.any():
            where = _first(negative, offset)
            msg = (
                f"layer {name!r} holds the negative value "
                f"{block[tuple(np.argwhere(negative)[0])].item()!r} at (group, sample, feature) {where}; "
                "counts and detected cells cannot be negative"
            )
            raise NegativeValueError(msg)


def _first(mask: np.ndarray, offset: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) + o for i, o in zip(np.argwhere(mask)[0], offset, strict=True))


def _checked_block(
    block: np.ndarray, *, layer: str, nonnegative: bool, block_info: dict[Any, Any] | None = None
) -> np.ndarray:
    offset = (0, 0, 0)
    if block_info is not None and 0 in block_info:
        offset = tuple(start for start, _ in block_info[0]["array-location"])
    check_layer_block(block, name=layer, nonnegative=nonnegative, offset=offset)
    return block


def validated(x: da.Array, *, name: str, nonnegative: bool) -> da.Array:
    """``x`` with every block checked, as it is computed, for values a layer may not hold."""
    checked = da.map_blocks(
        _checked_block, x, layer=name, nonnegative=nonnegative, dtype=x.dtype, meta=x._meta
    )
    return cast("da.Array", checked)


def group_tasks(
    x: da.Array, func: Callable[..., Any], *args: object, pure: bool = True
) -> list[Delayed]:
    """One delayed ``func(g, blocks, *args)`` per group, ``blocks`` in feature order.

    ``x`` is rechunked, if needed, to one group and every sample per block, so
    each task owns a whole group: every chunk of it in the file.
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
    """Delayed digests of every group of a layer, computed in parallel."""
    return group_tasks(x, _digest_group)


def _cluster_client() -> Client | None:
    """The distributed client Dask would use now, if any."""
    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        return cast("Client", default_client())
    except ValueError:
        return None


def compute(*tasks: Any, progress: bool = False) -> tuple[Any, ...]:
    """Run graphs on the current Dask scheduler and return their results.

    Whether the graphs succeed or fail, no task is still running when this
    returns, so a caller that cleans up after a failure (a writer removing its
    staging directory) never races a task still writing into it. On a
    distributed client every task is awaited; on the threaded scheduler the
    pool is owned here and shut down, cancelling what has not started.

    With ``progress``, a bar is shown: distributed's for a cluster client, else
    Dask's local progress bar on standard error.
    """
    client = _cluster_client()
    if client is not None:
        futures = client.compute(list(tasks))
        if progress:
            cluster_progress(futures)
        wait(futures)
        return tuple(client.gather(futures))
    bar = ProgressBar(out=sys.stderr) if progress else contextlib.nullcontext()
    if dask.config.get("scheduler", None) not in (None, "threads", "threading"):
        with bar:
            return tuple(dask_compute(*tasks))
    n_threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
    pool = ThreadPoolExecutor(n_threads)
    try:
        with bar:
            return tuple(dask_compute(*tasks, scheduler="threads", pool=pool))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
