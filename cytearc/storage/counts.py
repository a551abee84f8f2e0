"""Writing an assay's count arrays: ``counts``, ``countsT``, ``countSummaries`` and identity.

``counts`` (cells x features) is written by one task per row band, each band
a whole number of shards and identity blocks; the task also computes the
band's identity-block digests and its summaries, so nothing reads the matrix
back for them. ``countsT`` (features x cells) is then written from the stored
``counts`` out of core, through a scratch array (:mod:`cytearc.storage.transpose`).
"""

from __future__ import annotations

import json
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import scipy.sparse as sp
import zarr
from dask.delayed import delayed
from distributed import Future, wait
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ZstdCodec
from zarr.storage import MemoryStore

from cytearc.engine.arrays import (
    validate_aligned,
    write_block,
)
from cytearc.engine.cluster import compute_on, task_memory
from cytearc.engine.geometry import ArrayGeometry, rows_within
from cytearc.errors import CyteArcError, MemBudgetError, ShardAlignmentError
from cytearc.storage.count_dtype import checked_cast
from cytearc.storage.damage import read_region
from cytearc.storage.identity import block_digests, counts_fingerprint
from cytearc.storage.layout import IDENTITY_ROWS, CountLayout
from cytearc.storage.transpose import (
    TransposePlan,
    create_scratch,
    gather_groups,
    split_band,
    transpose_counts,
)
from cytearc.utils.heap import release_freed_heap
from cytepool.codecs import compressor as named_compressor
from cytepool.errors import ClusterLostError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import dask.array as da
    from zarr.abc.codec import BytesBytesCodec

    from cytearc.engine.cluster import Engine

__all__ = [
    "BAND_BYTES",
    "LAYOUT_ATTRIBUTE",
    "SUMMARY_COMPRESSORS",
    "CountsWritten",
    "band_result",
    "band_rows_for",
    "band_summaries",
    "band_unit",
    "checksummed",
    "combine_bands",
    "count_array_document",
    "fit_layout",
    "layout_fits",
    "read_band_result",
    "source_compressor",
    "write_band",
    "write_count_arrays",
    "write_summaries",
]

BAND_BYTES: Final = 32 * 2**20
"""Bytes of values a band holds at most (one shard and identity block more if they are larger).

Bands larger than this write no faster, and each one is held by the client
until its worker has written it; at most two per worker are in flight."""
_BAND_ATTEMPTS: Final = 4
"""How many times a band is sent, when the workers holding it are lost."""
LAYOUT_ATTRIBUTE: Final = "cytearc:countMatrixLayout"
_ARRAY_CONFIG: Final = {"write_empty_chunks": True}
"""Count arrays store every chunk of a shard that holds a count: Zarr's comparison of each
chunk with the fill value cost a quarter of an import; :func:`~cytearc.engine.arrays.write_block`
leaves out a shard of zeros."""


def checksummed(compressor: BytesBytesCodec | None) -> tuple[BytesBytesCodec, ...]:
    """The codecs after ``bytes`` of a new count array: ``compressor``, then ``crc32c`` unless it checks itself.

    gzip carries a CRC-32 and zstd with its frame checksum an xxhash of each
    chunk, so a damaged chunk fails to decode instead of decoding to other
    values; any other compressor, and none, is followed by ``crc32c``.

    Parameters
    ----------
    compressor
        The import's compressor, or None.

    Returns
    -------
    tuple of codecs
        The bytes-to-bytes codecs, in order.

    Examples
    --------
    >>> checksummed(None)
    (Crc32cCodec(),)
    >>> checksummed(ZstdCodec(level=3))
    (ZstdCodec(level=3, checksum=False), Crc32cCodec())
    """
    if compressor is None:
        return (Crc32cCodec(),)
    if isinstance(compressor, GzipCodec) or (
        isinstance(compressor, ZstdCodec) and compressor.checksum
    ):
        return (compressor,)
    return (compressor, Crc32cCodec())


SUMMARY_COMPRESSORS: Final[tuple[BytesBytesCodec, ...]] = checksummed(
    named_compressor("zstd", error=CyteArcError)
)
"""The codecs after ``bytes`` of ``countSummaries`` arrays: zstd with its frame checksum."""


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
        compressors=checksummed(compressor),
        fill_value=0,
        dimension_names=dimension_names,
        attributes={LAYOUT_ATTRIBUTE: layout.to_json()},
        config=_ARRAY_CONFIG,  # type: ignore[arg-type]
    )


def count_array_document(
    *,
    shape: tuple[int, int],
    dtype: np.dtype,
    layout: CountLayout,
    compressor: BytesBytesCodec | None,
    transposed: bool,
    attributes: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``zarr.json`` document ``counts`` (or ``countsT``) of this shape and layout would have.

    For the virtual counts of a composite, whose documents are kept in its
    manifest rather than stored as arrays.

    Parameters
    ----------
    shape
        The array's shape (features x cells when ``transposed``).
    dtype
        Its storage dtype.
    layout
        The layout policy.
    compressor
        The codec after ``bytes``, or None.
    transposed
        Whether it is ``countsT``.
    attributes
        More attributes (the content fingerprint).

    Returns
    -------
    dict
        The document.
    """
    group = zarr.open_group(store=MemoryStore(), mode="w", zarr_format=3)
    array = _create(
        group,
        "countsT" if transposed else "counts",
        shape=shape,
        dtype=np.dtype(dtype),
        layout=layout,
        compressor=compressor,
        dimension_names=("feature", "cell") if transposed else ("cell", "feature"),
    )
    array.attrs.update(dict(attributes))
    document: dict[str, Any] = json.loads(json.dumps(array.metadata.to_dict(), default=str))
    return document


def band_summaries(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The count summaries of a dense band of ``counts`` rows.

    Parameters
    ----------
    dense
        Rows of the counts, in storage dtype.

    Returns
    -------
    tuple of numpy.ndarray
        Row sums (float64 for float counts, else int64), features with a
        count above 0 per row, and rows with a count above 0 per feature (int64).
    """
    nonzero = dense > 0
    return (
        dense.sum(axis=1, dtype=np.float64 if dense.dtype.kind == "f" else np.int64),
        nonzero.sum(axis=1, dtype=np.int64),
        nonzero.sum(axis=0, dtype=np.int64),
    )


def _stored_values(
    block: sp.spmatrix | sp.sparray, dtype: np.dtype, *, where: str
) -> sp.csr_matrix:
    """A sparse band as CSR of its values cast (checked) to the storage ``dtype``, sharing its indices."""
    csr = sp.csr_matrix(block)
    if csr.dtype == dtype:
        return csr
    data = checked_cast(csr.data, dtype, where=where)
    return sp.csr_matrix((data, csr.indices, csr.indptr), shape=csr.shape)


def write_band(
    block: np.ndarray | sp.csr_matrix,
    array: zarr.Array[Any],
    first_row: int,
    scratch: zarr.Array[Any] | None = None,
) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """Write one row band of ``counts`` (dense or sparse) in the array's dtype.

    Values are cast (checked) before a sparse band is densified, straight into
    the storage dtype. The band's buffers (the dense band, the encoder's) are
    given back to the system afterwards
    (:func:`~cytearc.utils.heap.release_freed_heap`): kept in the heap, they
    made each process of an import hold the most any band needed (the 20k
    anchor import peaked at 1,418-1,428 MB instead of 1,300-1,331).

    Parameters
    ----------
    block
        The band's rows, whole shards.
    array
        ``counts``.
    first_row
        The band's first row.
    scratch
        The scratch array of ``countsT`` to split the band into as well
        (:mod:`cytearc.storage.transpose`), or None.

    Returns
    -------
    tuple
        The band's identity-block digests, row sums, detected features per
        row and detected cells per feature.
    """
    result = _write_band(block, array, first_row, scratch)
    release_freed_heap()
    return result


def _write_band(
    block: np.ndarray | sp.csr_matrix,
    array: zarr.Array[Any],
    first_row: int,
    scratch: zarr.Array[Any] | None,
) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    dtype = np.dtype(array.dtype)
    where = f"counts rows {first_row}:"
    if isinstance(block, sp.spmatrix | sp.sparray):
        csr = _stored_values(block, dtype, where=where)
        dense = np.asarray(csr.toarray())
        positive = csr.data > 0
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        row_positive = np.bincount(rows[positive], minlength=csr.shape[0])
        column_positive = np.bincount(csr.indices[positive], minlength=csr.shape[1])
        row_sums = np.asarray(
            csr.sum(axis=1, dtype=np.float64 if dtype.kind == "f" else np.int64)
        ).ravel()
    else:
        dense = checked_cast(np.asarray(block), dtype, where=where)
        row_sums, row_positive, column_positive = band_summaries(dense)
    write_block(array, dense, (first_row, 0), where=where)
    if scratch is not None:
        split_band(dense, scratch, first_row)
    return (
        block_digests(dense, first_row=first_row, n_rows=array.shape[0]),
        row_sums,
        row_positive.astype(np.int64),
        column_positive.astype(np.int64),
    )


def combine_bands(
    results: Sequence[Any], *, shape: tuple[int, int], dtype: np.dtype
) -> CountsWritten:
    """The identity and summaries of counts from their bands' results, in row order.

    Parameters
    ----------
    results
        Each band's digests, row sums, detected features per row and
        detected cells per feature (:func:`write_band`, :func:`band_result`).
    shape
        The counts' shape.
    dtype
        Their storage dtype.

    Returns
    -------
    CountsWritten
        The content fingerprint and the count summaries.
    """
    return CountsWritten(
        content_fingerprint=counts_fingerprint(
            shape=shape, dtype=dtype, digests=[d for r in results for d in r[0]]
        ),
        row_sums=np.concatenate([r[1] for r in results]) if results else np.zeros(0),
        row_positive=np.concatenate([r[2] for r in results]) if results else np.zeros(0, np.int64),
        column_positive=np.sum([r[3] for r in results], axis=0)
        if results
        else np.zeros(shape[1], np.int64),
    )


def band_result(
    dense: np.ndarray, first_row: int, n_rows: int
) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`write_band` returns for a band, computed without writing it.

    Parameters
    ----------
    dense
        The band's rows, in storage dtype; ``first_row`` is a multiple of
        the identity block.
    first_row
        The band's first row.
    n_rows
        The rows of the whole counts.

    Returns
    -------
    tuple
        The band's identity-block digests, row sums, detected features per
        row and detected cells per feature.
    """
    row_sums, row_positive, column_positive = band_summaries(dense)
    return (
        block_digests(dense, first_row=first_row, n_rows=n_rows),
        row_sums,
        row_positive,
        column_positive,
    )


def _existing_counts(
    group: zarr.Group, *, shape: tuple[int, int], dtype: np.dtype, layout: CountLayout, where: str
) -> zarr.Array[Any]:
    """The ``counts`` an interrupted writer created, refused unless it is the array it would create."""
    counts = group.get("counts")
    expected = layout.array_layout(shape, itemsize=dtype.itemsize)
    if (
        not isinstance(counts, zarr.Array)
        or tuple(counts.shape) != shape
        or np.dtype(counts.dtype) != dtype
        or counts.shards != expected.shards
        or group.attrs.get(LAYOUT_ATTRIBUTE) != layout.to_json()
    ):
        found = (
            f"shape {counts.shape}, dtype {counts.dtype}"
            if isinstance(counts, zarr.Array)
            else "no array"
        )
        msg = f"{where}/counts: expected the partly written counts of shape {shape}, dtype {dtype} and layout {layout.to_json()}, found {found}; start again with overwrite=True"
        raise ShardAlignmentError(msg)
    return counts


def read_band_result(
    array: zarr.Array[Any], first_row: int, rows: int
) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`write_band` returned for a band already written, from its stored values.

    Parameters
    ----------
    array
        ``counts``.
    first_row
        The band's first row.
    rows
        Its rows.

    Returns
    -------
    tuple
        The band's identity-block digests, row sums, detected features per
        row and detected cells per feature.
    """
    return band_result(
        read_region(array, slice(first_row, first_row + rows)), first_row, array.shape[0]
    )


def band_rows_for(
    counts: ArrayGeometry,
    *,
    budget: int,
    transpose: bool,
    where: str,
    max_band_rows: int | None = None,
) -> int:
    """Rows of the bands a count writer writes ``counts`` in: whole shards and identity blocks.

    A band's write is charged what its read would hold
    (:meth:`~cytearc.engine.geometry.ArrayGeometry.read_bytes`: the band,
    the shards' copies and encoded chunks), its source rows (CSR: at most 8
    bytes a value) and, when it splits for ``countsT``, its transpose and the
    encoded scratch chunks; a band holds at most :data:`BAND_BYTES` of values.

    Parameters
    ----------
    counts
        The geometry of ``counts``.
    budget
        The memory of one worker, bytes.
    transpose
        Whether the bands are also split into the ``countsT`` scratch array.
    where
        The array, for the message.
    max_band_rows
        At most this many rows (rounded down to whole units; at least one unit).

    Returns
    -------
    int
        Rows per band.

    Raises
    ------
    MemBudgetError
        Not even one unit fits ``budget``.
    """
    unit = band_unit(counts.unit_rows)
    rows = rows_within(
        counts,
        budget=budget,
        row_bytes=max(counts.shape[1], 1) * (8 + (2 * counts.itemsize if transpose else 0)),
        unit=unit,
        target=BAND_BYTES,
        where=where,
    )
    if max_band_rows is not None:
        rows = max(unit, min(rows, max_band_rows - max_band_rows % unit))
    return rows


def layout_fits(
    layout: CountLayout, *, shape: tuple[int, int], dtype: np.dtype, budget: int
) -> bool:
    """Whether the bands of ``counts`` and the ``countsT`` transposition under ``layout`` fit ``budget``.

    The plans checked are those the writers make (:func:`band_rows_for`
    with the split for ``countsT``, and :class:`~cytearc.storage.transpose.TransposePlan`),
    so a layout that fits is never refused once writing has begun.

    Parameters
    ----------
    layout
        The policy.
    shape
        ``(n_cells, n_features)``.
    dtype
        The storage dtype.
    budget
        The memory of one worker, bytes.

    Returns
    -------
    bool
        True when every task of the write fits.
    """
    itemsize = np.dtype(dtype).itemsize
    counts, counts_t = (
        ArrayGeometry.of_layout(
            layout.array_layout(s, itemsize=itemsize), shape=s, itemsize=itemsize
        )
        for s in (shape, (shape[1], shape[0]))
    )
    try:
        rows = band_rows_for(counts, budget=budget, transpose=True, where="counts")
        TransposePlan(counts, counts_t, budget=budget, where="counts", band_rows=rows)
        TransposePlan(counts, counts_t, budget=budget, where="counts")
    except MemBudgetError:
        return False
    return True


def fit_layout(
    layout: CountLayout, *, shape: tuple[int, int], dtype: np.dtype, budget: int, where: str
) -> CountLayout:
    """``layout``, halved (both sizes together) until its writes fit ``budget``.

    What subset, merge and repack do with the default policy (an import
    refuses instead and names the halving).

    Parameters
    ----------
    layout
        The policy to start from.
    shape
        ``(n_cells, n_features)``.
    dtype
        The storage dtype.
    budget
        The memory of one worker, bytes.
    where
        The assay, for the message.

    Returns
    -------
    CountLayout
        The largest halving that fits.

    Raises
    ------
    MemBudgetError
        Not even shards of one row fit.
    """
    candidate = layout
    while not layout_fits(candidate, shape=shape, dtype=dtype, budget=budget):
        if candidate.chunk_bytes <= 1 and candidate.unit_bytes <= 1:
            msg = f"{where}: no halving of the layout {layout.to_json()} fits a worker's memory ({budget} bytes), not even shards of one row; raise mem_budget (on a cluster CyteArc did not start: the workers' --memory-limit)"
            raise MemBudgetError(msg)
        candidate = candidate.halved()
    return candidate


def source_compressor(array: zarr.Array[Any]) -> BytesBytesCodec | None:
    """The compressor of a source count array (gzip, zstd or Blosc), or None.

    Parameters
    ----------
    array
        ``counts`` of a source assay.

    Returns
    -------
    codec or None
        The compressor a new array is written with; ``crc32c`` is added by
        :func:`~cytearc.storage.counts.checksummed`.
    """
    for codec in array.compressors:
        if isinstance(codec, GzipCodec | ZstdCodec | BloscCodec):
            return codec
    return None


def write_summaries(group: zarr.Group, written: CountsWritten) -> None:
    """Write ``countSummaries`` (row sums, detected features per cell and cells per feature).

    Parameters
    ----------
    group
        The assay's matrix group.
    written
        What writing its counts produced.
    """
    summaries = group.create_group(
        "countSummaries", attributes={"source_fingerprint": written.content_fingerprint}
    )
    for name, values, dim in (
        ("rowSums", written.row_sums, "cell"),
        ("rowPositive", written.row_positive, "cell"),
        ("columnPositive", written.column_positive, "feature"),
    ):
        array = summaries.create_array(
            name=name,
            shape=values.shape,
            dtype=values.dtype,
            chunks=(max(1, min(len(values), 1 << 20)),),
            dimension_names=(dim,),
            compressors=SUMMARY_COMPRESSORS,
            config={"write_empty_chunks": True},
        )
        if len(values):
            array[:] = values


class CountsWriter:
    """Writes one assay's count arrays from row bands, in order, each a whole number of shards.

    Create it, feed :meth:`write` the bands of :attr:`band_rows` rows (the last
    may be shorter) in any order, or :meth:`append` rows of any count in
    order, then call :meth:`finish`, which writes
    ``countsT`` and returns the identity and summaries. On an engine the bands
    are written by workers, at most two per worker in flight; without one, in
    this process. Bands are sized to the worker memory through
    :meth:`~cytearc.engine.geometry.ArrayGeometry.read_bytes`, at most
    :data:`BAND_BYTES` of values and at most ``max_band_rows`` (rounded down to
    whole shards and identity blocks).
    """

    def __init__(
        self,
        group: zarr.Group,
        *,
        shape: tuple[int, int],
        dtype: np.dtype,
        layout: CountLayout,
        compressor: BytesBytesCodec | None,
        engine: Engine | None = None,
        where: str = "counts",
        max_band_rows: int | None = None,
        resume: bool = False,
        transpose: bool = False,
    ) -> None:
        self.group, self.shape, self.dtype = group, shape, np.dtype(dtype)
        self.layout, self.compressor, self.engine, self.where = layout, compressor, engine, where
        if resume:
            self.counts = _existing_counts(
                group, shape=shape, dtype=self.dtype, layout=layout, where=where
            )
        else:
            group.attrs[LAYOUT_ATTRIBUTE] = layout.to_json()
            self.counts = _create(
                group,
                "counts",
                shape=shape,
                dtype=self.dtype,
                layout=layout,
                compressor=compressor,
                dimension_names=("cell", "feature"),
            )
        budget = task_memory(engine)
        fused = transpose and not resume
        geometry = ArrayGeometry.of(self.counts)
        self.band_rows = band_rows_for(
            geometry,
            budget=budget,
            transpose=fused,
            where=where,
            max_band_rows=max_band_rows,
        )
        self._transposing: tuple[zarr.Array[Any], TransposePlan, zarr.Array[Any]] | None = None
        if fused:
            counts_t = self._create_counts_t()
            plan = TransposePlan(
                geometry,
                ArrayGeometry.of(counts_t),
                budget=budget,
                where=where,
                band_rows=self.band_rows,
            )
            self._transposing = (counts_t, plan, create_scratch(group, counts_t, plan))
        self._results: dict[int, Any] = {}
        self._in_flight: dict[Future[Any], tuple[int, np.ndarray | sp.csr_matrix, int]] = {}
        self._buffer: list[np.ndarray | sp.csr_matrix] = []
        self._buffered = 0
        self._next_row = 0

    def write(self, first_row: int, block: np.ndarray | sp.csr_matrix) -> None:
        """Write the band starting at ``first_row`` (a multiple of :attr:`band_rows`).

        Parameters
        ----------
        first_row
            The band's first row.
        block
            Its rows, dense or CSR; :attr:`band_rows` of them, fewer only for the last band.

        Raises
        ------
        ShardAlignmentError
            The block is not such a band.
        """
        rows = block.shape[0]
        if first_row % self.band_rows or (
            rows != self.band_rows and first_row + rows != self.shape[0]
        ):
            msg = f"{self.where}: band {first_row}:{first_row + rows} is not a band of {self.band_rows} rows"
            raise ShardAlignmentError(msg)
        if self.engine is None or self.engine.client is None:
            self._results[first_row] = write_band(block, self.counts, first_row, self.scratch)
            return
        if isinstance(block, sp.spmatrix | sp.sparray):
            # held here until written and sent: in the storage dtype, a quarter of the
            # sources' int64 values for most counts
            block = _stored_values(block, self.dtype, where=f"{self.where} rows {first_row}:")
        self._submit(first_row, block, attempt=1)
        # reading the band from its source freed several times its size into the heap
        release_freed_heap()
        # two bands per worker process, not per thread: a band waiting in a worker holds its
        # memory, and one worker of two threads imported the 20k anchor data as fast with two
        # in flight as with four, at 1,015-1,030 MB instead of 1,177-1,192 (three runs each)
        limit = 2 * max(1, len(self.engine.client.scheduler_info()["workers"]))
        while len(self._in_flight) >= limit:
            self._collect(return_when="FIRST_COMPLETED")

    def _submit(self, first_row: int, block: np.ndarray | sp.csr_matrix, *, attempt: int) -> None:
        """Send a band to a worker; this process keeps it until the band's small result is back."""
        assert self.engine is not None
        assert self.engine.client is not None
        client = self.engine.client
        for tries in range(1, _BAND_ATTEMPTS + 1):
            try:
                data = client.scatter(block, hash=False)
                break
            except (OSError, CancelledError) as error:  # the worker it went to died meanwhile
                if client.status != "running" or tries == _BAND_ATTEMPTS:
                    msg = f"{self.where}: band {first_row} could not be sent to a worker ({type(error).__name__}: {error})"
                    raise ClusterLostError(msg) from error
                client.wait_for_workers(1, timeout=60)
        future = client.submit(write_band, data, self.counts, first_row, self.scratch, pure=False)
        self._in_flight[future] = (first_row, block, attempt)

    def _collect(self, *, return_when: str) -> None:
        """Keep the results of finished bands; send again a band whose worker was lost.

        A scattered band lives on one worker: when that worker dies, Dask
        cannot run the band's write again and cancels it, so the band is sent
        again from this process (its chunk writes are idempotent).
        """
        assert self.engine is not None
        assert self.engine.client is not None
        try:
            with self.engine.client.as_current():
                done, _ = wait(list(self._in_flight), return_when=return_when)
        except CancelledError:  # distributed's wait raises when a future was cancelled
            done = {future for future in self._in_flight if future.done()}
        finished = [future for future in done if future.status == "finished"]
        try:
            results = self.engine.client.gather(finished)
        except CancelledError:  # a result was lost with its worker since: the next call resends
            return
        for future, result in zip(finished, results, strict=True):
            first_row, _, _ = self._in_flight.pop(future)
            self._results[first_row] = result
        for future in set(done).difference(finished):
            first_row, block, attempt = self._in_flight.pop(future)
            if future.status == "cancelled" and attempt < _BAND_ATTEMPTS:
                self._submit(first_row, block, attempt=attempt + 1)
            else:
                future.result()  # raises the band's error (KilledWorker after repeated losses)
                msg = f"{self.where}: band {first_row} was lost {attempt} times with its worker"
                raise ClusterLostError(msg)

    def append(self, block: np.ndarray | sp.csr_matrix) -> None:
        """Add the next rows, in order; whole bands are written as soon as they are complete.

        Parameters
        ----------
        block
            The rows after those appended so far, dense or CSR.
        """
        self._buffer.append(block)
        self._buffered += block.shape[0]
        while self._buffered >= self.band_rows or (
            self._buffered and self._next_row + self._buffered == self.shape[0]
        ):
            rows = min(self.band_rows, self._buffered)
            band = _stack(self._buffer)
            if rows == band.shape[0]:
                self.write(self._next_row, band)
                self._buffer = []
            else:
                self.write(self._next_row, band[:rows])
                self._buffer = [band[rows:]]
            self._buffered -= rows
            self._next_row += rows

    def finish(self, *, transpose: bool) -> CountsWritten:
        """Gather the bands' results, record the identity, and write ``countsT`` if asked.

        Parameters
        ----------
        transpose
            Write ``countsT`` (RNA-type assays).

        Returns
        -------
        CountsWritten
            The content fingerprint and the count summaries.

        Raises
        ------
        ShardAlignmentError
            Rows are missing: appended rows stop short of the end, or a band
            was never written.
        """
        if self._buffered:
            msg = f"{self.where}: {self._buffered} rows appended after row {self._next_row} do not reach the end ({self.shape[0]})"
            raise ShardAlignmentError(msg)
        while self._in_flight:
            self._collect(return_when="ALL_COMPLETED")
        starts = sorted(self._results)
        expected = list(range(0, self.shape[0], self.band_rows))
        if starts != expected:
            msg = f"{self.where}: bands written start at {starts[:5]}..., expected every multiple of {self.band_rows} below {self.shape[0]}"
            raise ShardAlignmentError(msg)
        return self.complete([self._results[s] for s in starts], transpose=transpose)

    @property
    def scratch(self) -> zarr.Array[Any] | None:
        """The scratch array bands are split into as they are written, if this writer transposes."""
        return None if self._transposing is None else self._transposing[2]

    def _create_counts_t(self) -> zarr.Array[Any]:
        n_rows, n_cols = self.shape
        return _create(
            self.group,
            "countsT",
            shape=(n_cols, n_rows),
            dtype=self.dtype,
            layout=self.layout,
            compressor=self.compressor,
            dimension_names=("feature", "cell"),
        )

    def complete(self, results: Sequence[Any], *, transpose: bool) -> CountsWritten:
        """Combine band results (in row order) into identity and summaries; write ``countsT``.

        Parameters
        ----------
        results
            Each band's digests, row sums, detected features per row and
            detected cells per feature, in row order.
        transpose
            Write ``countsT`` too.

        Returns
        -------
        CountsWritten
            The content fingerprint and the count summaries.
        """
        if self._transposing is not None and not transpose:
            msg = f"{self.where}: this writer was made to write countsT (transpose=True), so it must complete with transpose=True"
            raise ValueError(msg)
        written = combine_bands(results, shape=self.shape, dtype=self.dtype)
        self.counts.attrs["content_fingerprint"] = written.content_fingerprint
        if self._transposing is not None:
            counts_t, plan, scratch = self._transposing
            gather_groups(self.group, scratch, counts_t, plan, engine=self.engine, where=self.where)
        elif transpose:
            transpose_counts(
                self.group,
                self.counts,
                self._create_counts_t(),
                engine=self.engine,
                where=self.where,
            )
        return written


def _stack(blocks: Sequence[np.ndarray | sp.csr_matrix]) -> np.ndarray | sp.csr_matrix:
    if len(blocks) == 1:
        return blocks[0]
    if all(isinstance(b, np.ndarray) for b in blocks):
        return np.concatenate(blocks, axis=0)
    return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")


def band_unit(shard_rows: int) -> int:
    """Rows a band of ``counts`` is a whole multiple of: whole shards and whole identity blocks.

    Parameters
    ----------
    shard_rows
        Rows of a ``counts`` shard.

    Returns
    -------
    int
        The larger of ``shard_rows`` and the identity block's 256 rows.
    """
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
    """Write a Dask array ``x`` (cells x features, storage dtype) as ``counts`` and ``countsT``.

    The array's bands are computed and written by one task each (a graph, on
    the engine or Dask's current scheduler); see :class:`CountsWriter`.

    Parameters
    ----------
    group
        The assay's matrix group (``matrices/<assay>``).
    x
        The counts.
    layout
        The layout policy.
    compressor
        The codec after ``bytes``, or None.
    engine
        The engine to write on; None for Dask's current scheduler.
    transpose
        Write ``countsT`` too.
    where
        The group's location, for messages.

    Returns
    -------
    CountsWritten
        The content fingerprint and the count summaries.
    """
    writer = CountsWriter(
        group,
        shape=(int(x.shape[0]), int(x.shape[1])),
        dtype=np.dtype(x.dtype),
        layout=layout,
        compressor=compressor,
        engine=engine,
        where=where,
        transpose=transpose,
    )
    x = x.rechunk((writer.band_rows, x.shape[1]))
    validate_aligned(x.chunks, writer.counts, where=where)
    starts = np.cumsum((0, *x.chunks[0][:-1])).tolist()
    write = delayed(write_band, pure=False)
    tasks = [
        write(b, writer.counts, s, writer.scratch)
        for b, s in zip(x.to_delayed()[:, 0], starts, strict=True)
    ]
    return writer.complete(compute_on(engine, *tasks), transpose=transpose)
