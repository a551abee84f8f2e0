"""Writing an assay's count arrays: ``counts``, ``countsT``, ``countSummaries`` and identity.

``counts`` (cells x features) is written by one task per row band, each band
a whole number of shards and identity blocks; the task also computes the
band's identity-block digests and its summaries, so nothing reads the matrix
back for them. ``countsT`` (features x cells) is then a rechunk-and-store graph
over the stored ``counts`` whose writers own whole ``countsT`` shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from dask.base import compute as dask_compute
from dask.delayed import delayed
from zarr.codecs import BytesCodec

from cytearc.engine.arrays import aligned_rows, check_aligned, open_lazy, store_aligned
from cytearc.storage.identity import block_digests, counts_fingerprint
from cytearc.storage.layout import IDENTITY_ROWS, CountLayout

if TYPE_CHECKING:
    from collections.abc import Sequence

    import dask.array as da
    import zarr
    from zarr.abc.codec import BytesBytesCodec

    from cytearc.engine.cluster import Engine

__all__ = ["LAYOUT_ATTRIBUTE", "CountsWritten", "write_count_arrays"]

LAYOUT_ATTRIBUTE: Final = "cytearc:countMatrixLayout"
_ARRAY_CONFIG: Final = {"write_empty_chunks": False}


@dataclass(frozen=True, kw_only=True)
class CountsWritten:
    """What writing an assay's counts produced, besides the arrays."""

    content_fingerprint: str
    row_sums: np.ndarray
    row_positive: np.ndarray
    column_positive: np.ndarray


def _create(
    group: zarr.Group,
    name: str,
    *,
    shape: tuple[int, int],
    dtype: np.dtype,
    layout: CountLayout,
    compressor: BytesBytesCodec | None,
    dimension_names: tuple[str, str],
) -> zarr.Array[Any]:
    geometry = layout.array_layout(shape, itemsize=dtype.itemsize)
    return group.create_array(
        name=name,
        shape=shape,
        dtype=dtype,
        shards=geometry.shards,
        chunks=geometry.chunks,
        serializer=BytesCodec(endian="little"),
        compressors=compressor,
        fill_value=0,
        dimension_names=dimension_names,
        attributes={LAYOUT_ATTRIBUTE: layout.to_json()},
        config=_ARRAY_CONFIG,  # type: ignore[arg-type]
    )


def _write_band(
    block: np.ndarray, array: zarr.Array[Any], first_row: int
) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """Write one row band of ``counts`` and return its digests and summaries."""
    array[first_row : first_row + block.shape[0]] = block
    positive = block > 0
    sums_dtype = np.float64 if block.dtype.kind == "f" else np.int64
    return (
        block_digests(block, first_row=first_row, n_rows=array.shape[0]),
        block.sum(axis=1, dtype=sums_dtype),
        positive.sum(axis=1, dtype=np.int64),
        positive.sum(axis=0, dtype=np.int64),
    )


def _band_unit(shard_rows: int) -> int:
    """Rows a band is a whole multiple of: whole shards and whole identity blocks."""
    return max(shard_rows, IDENTITY_ROWS)


def write_count_arrays(
    group: zarr.Group,
    x: da.Array,
    *,
    layout: CountLayout,
    compressor: BytesBytesCodec | None,
    engine: Engine | None = None,
    transpose: bool = True,
    where: str = "counts",
) -> CountsWritten:
    """Write ``x`` (cells x features, in its storage dtype) as ``counts`` and, if asked, ``countsT``.

    Parameters
    ----------
    group
        The matrix group (``matrices/<assay>``); it receives the layout record.
    x
        The counts, already in their storage dtype with finite values.
    layout
        The layout policy of both arrays.
    compressor
        The codec after ``bytes``, or None.
    engine
        Where the graphs run; Dask's current scheduler when None.
    transpose
        Also write ``countsT`` (RNA-type assays).
    where
        Names the assay in errors.
    """
    n_rows, n_cols = x.shape
    dtype = np.dtype(x.dtype)
    group.attrs[LAYOUT_ATTRIBUTE] = layout.to_json()
    counts = _create(
        group,
        "counts",
        shape=(n_rows, n_cols),
        dtype=dtype,
        layout=layout,
        compressor=compressor,
        dimension_names=("cell", "feature"),
    )
    shard_rows = counts.shards[0] if counts.shards else counts.chunks[0]
    unit = _band_unit(shard_rows)
    budget = engine.worker_memory() if engine is not None else 2**30
    band = aligned_rows(budget=budget, row_bytes=max(n_cols, 1) * 8, shard_rows=unit, n_rows=n_rows)
    x = x.rechunk((band, n_cols))
    check_aligned(x.chunks, counts, where=where)
    starts = np.cumsum((0, *x.chunks[0][:-1])).tolist()
    blocks = x.to_delayed()[:, 0]
    write = delayed(_write_band, pure=False)
    tasks = [write(b, counts, start) for b, start in zip(blocks, starts, strict=True)]
    results = _compute(engine, *tasks)
    digests = [d for result in results for d in result[0]]
    written = CountsWritten(
        content_fingerprint=counts_fingerprint(
            shape=(n_rows, n_cols), dtype=dtype, digests=digests
        ),
        row_sums=np.concatenate([r[1] for r in results]) if results else np.zeros(0),
        row_positive=np.concatenate([r[2] for r in results]) if results else np.zeros(0, np.int64),
        column_positive=np.sum([r[3] for r in results], axis=0)
        if results
        else np.zeros(n_cols, np.int64),
    )
    counts.attrs["content_fingerprint"] = written.content_fingerprint
    if transpose:
        counts_t = _create(
            group,
            "countsT",
            shape=(n_cols, n_rows),
            dtype=dtype,
            layout=layout,
            compressor=compressor,
            dimension_names=("feature", "cell"),
        )
        source = open_lazy(counts)
        target_block = counts_t.shards or counts_t.chunks
        _compute(engine, store_aligned(source.T.rechunk(target_block), counts_t, where=f"{where}T"))
    return written


def _compute(engine: Engine | None, *tasks: Any) -> Sequence[Any]:  # noqa: ANN401
    if engine is not None:
        return engine.compute(*tasks)
    return tuple(dask_compute(*tasks))
