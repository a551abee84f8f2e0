"""``countsT`` from ``counts`` out of core: two passes through a scratch array.

``counts`` -> ``countsT`` is an all-to-all rechunk: every ``countsT`` shard
holds a piece of every ``counts`` shard, so as one Dask rechunk the workers
end up holding the whole matrix in pieces. Here it is two graphs of
independent tasks that meet only in storage:

1. *split*: one task per band of ``counts`` rows (whole shards) reads the
   band and writes its transpose into ``_countsT_scratch`` (features x
   cells, unsharded, one chunk per feature group and band, zstd level 1).
   A count writer that knows it will transpose does this in the task that
   writes the band (:func:`split_band`), so ``counts`` is not read back;
2. *gather*: one task per feature group (whole ``countsT`` shards) reads its
   row of scratch chunks (the group's features, every cell) and writes it
   into ``countsT``.

The scratch array is then deleted. Bands and groups are sized from the
worker memory through :meth:`~cytearc.engine.geometry.ArrayGeometry.read_bytes`,
so a task holds one band or one group whatever the number of cells; a task
that fails is run again by Dask (each writes only its own chunks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np
from dask.delayed import delayed
from zarr.codecs import BytesCodec, ZstdCodec

from cytearc.engine.arrays import write_block
from cytearc.engine.cluster import compute_on, task_memory
from cytearc.engine.geometry import ArrayGeometry, rows_within
from cytearc.storage.damage import read_region

if TYPE_CHECKING:
    import zarr

    from cytearc.engine.cluster import Engine

__all__ = [
    "SCRATCH",
    "TASK_BYTES",
    "TransposePlan",
    "create_scratch",
    "gather_groups",
    "split_band",
    "transpose_counts",
]

SCRATCH: Final = "_countsT_scratch"
"""The scratch array's name in the matrix group, deleted when ``countsT`` is written."""
TASK_BYTES: Final = 64 * 2**20
"""Bytes of values one task reads at least (more for large matrices, see :class:`TransposePlan`)."""
_MAX_TASKS: Final = 128
"""Tasks per pass at most, while they fit: the scratch array has at most its square of chunks."""


class TransposePlan:
    """Bands of ``counts`` rows and groups of ``countsT`` rows that fit a worker.

    Each task reads about :data:`TASK_BYTES` of values, or a 128th of the
    matrix when that is more (the scratch array has one chunk per band and
    group, so at most 128 x 128 chunks), and never more than a worker's
    memory affords: a band is charged its read of ``counts``, its transpose
    and the encoded scratch chunks; a group its read of the scratch array,
    the ``countsT`` shards being encoded and their encoded bytes.

    Parameters
    ----------
    source, target
        The geometries of ``counts`` and ``countsT``.
    budget
        The memory of one worker, bytes.
    where
        The assay, for messages.
    band_rows
        The bands of a count writer that splits as it writes (their
        memory is its plan's); sized here when omitted.

    Attributes
    ----------
    band_rows
        Cells per split task: whole ``counts`` shards.
    group_rows
        Features per gather task: whole ``countsT`` shards.
    """

    def __init__(
        self,
        source: ArrayGeometry,
        target: ArrayGeometry,
        *,
        budget: int,
        where: str,
        band_rows: int | None = None,
    ) -> None:
        n_cells, n_features = source.shape
        task = max(TASK_BYTES, n_cells * n_features * source.itemsize // _MAX_TASKS)
        if band_rows is None:
            band_rows = rows_within(
                source,
                budget=budget,
                row_bytes=2 * n_features * source.itemsize,
                target=task,
                where=f"{where}: counts",
            )
        self.band_rows = band_rows
        # a group of whole countsT units reads whole chunk rows of the scratch array,
        # so its read is charged the same whatever height the chunks get
        scratch = ArrayGeometry(
            shape=target.shape, chunks=(target.unit_rows, self.band_rows), itemsize=target.itemsize
        )
        self.group_rows = rows_within(
            scratch,
            budget=budget,
            row_bytes=2 * n_cells * target.itemsize,
            unit=target.unit_rows,
            target=task,
            where=f"{where}: countsT",
        )
        self.n_cells, self.n_features = n_cells, n_features

    def bands(self) -> list[tuple[int, int]]:
        """The ``(first, stop)`` cells of each split task."""
        return _ranges(self.n_cells, self.band_rows)

    def groups(self) -> list[tuple[int, int]]:
        """The ``(first, stop)`` features of each gather task."""
        return _ranges(self.n_features, self.group_rows)


def _ranges(length: int, step: int) -> list[tuple[int, int]]:
    return [(start, min(start + step, length)) for start in range(0, length, step)]


def split_band(band: np.ndarray, scratch: zarr.Array[Any], first: int) -> None:
    """Write the transpose of a dense band of ``counts`` rows into the scratch array.

    Parameters
    ----------
    band
        Rows ``first:first + len(band)`` of ``counts``, dense.
    scratch
        The scratch array (:func:`create_scratch`).
    first
        The band's first row.

    Notes
    -----
    One row of scratch chunks (a feature group) is transposed and written at
    a time, so the task holds the band and one group's piece of its
    transpose, not a second copy of the band (at 20,000 x 15,000, a band's
    write peaked 99 MB above the band, now 10).
    """
    stop = first + band.shape[0]
    group_rows = scratch.chunks[0]
    for lo in range(0, band.shape[1], group_rows):
        hi = min(lo + group_rows, band.shape[1])
        scratch[lo:hi, first:stop] = np.ascontiguousarray(band[:, lo:hi].T)


def _split(counts: zarr.Array[Any], scratch: zarr.Array[Any], first: int, stop: int) -> None:
    split_band(read_region(counts, slice(first, stop)), scratch, first)


def _gather(
    scratch: zarr.Array[Any], counts_t: zarr.Array[Any], first: int, stop: int, where: str
) -> None:
    group = read_region(scratch, slice(first, stop))
    write_block(counts_t, group, (first, 0), where=where)


def create_scratch(
    group: zarr.Group, counts_t: zarr.Array[Any], plan: TransposePlan
) -> zarr.Array[Any]:
    """The empty scratch array of ``plan`` in the matrix group (replacing a stale one).

    Parameters
    ----------
    group
        The matrix group.
    counts_t
        The created ``countsT``.
    plan
        The bands and groups.

    Returns
    -------
    zarr.Array
        Features x cells, one chunk per group and band.
    """
    return group.create_array(
        name=SCRATCH,
        shape=counts_t.shape,
        dtype=counts_t.dtype,
        chunks=(plan.group_rows, plan.band_rows),
        serializer=BytesCodec(endian="little"),
        compressors=(ZstdCodec(level=1),),
        fill_value=0,
        config={"write_empty_chunks": False},
        overwrite=True,
    )


def gather_groups(
    group: zarr.Group,
    scratch: zarr.Array[Any],
    counts_t: zarr.Array[Any],
    plan: TransposePlan,
    *,
    engine: Engine | None,
    where: str = "counts",
) -> None:
    """Write ``countsT`` from a filled scratch array, one group per task, then delete the scratch.

    Parameters
    ----------
    group
        The matrix group.
    scratch
        The scratch array, every band split into it.
    counts_t
        The created ``countsT``.
    plan
        The bands and groups.
    engine
        The engine to run on; None for Dask's current scheduler.
    where
        The assay, for messages.
    """
    gather = delayed(_gather, pure=False)
    compute_on(engine, *[gather(scratch, counts_t, a, b, f"{where}T") for a, b in plan.groups()])
    del group[SCRATCH]


def transpose_counts(
    group: zarr.Group,
    counts: zarr.Array[Any],
    counts_t: zarr.Array[Any],
    *,
    engine: Engine | None,
    where: str = "counts",
) -> None:
    """Write ``counts_t`` as the transpose of ``counts``, one band or group per task.

    Parameters
    ----------
    group
        The matrix group holding both arrays (the scratch array goes there).
    counts
        The written counts, cells x features.
    counts_t
        The created ``countsT``, features x cells.
    engine
        The engine to run on; None for Dask's current scheduler.
    where
        The assay, for messages.

    Raises
    ------
    MemBudgetError
        Not even one shard of either array fits a worker's memory.
    """
    budget = task_memory(engine)
    plan = TransposePlan(
        ArrayGeometry.of(counts), ArrayGeometry.of(counts_t), budget=budget, where=where
    )
    scratch = create_scratch(group, counts_t, plan)
    split = delayed(_split, pure=False)
    compute_on(engine, *[split(counts, scratch, a, b) for a, b in plan.bands()])
    gather_groups(group, scratch, counts_t, plan, engine=engine, where=where)
