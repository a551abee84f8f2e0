"""``create_composite``: the cells of several stores as one dataset, without copying their counts.

The composite is laid out as :class:`~cytearc.tools.DataStoreMerge` would
lay out the merge of its sources (cells in source order with ids
``<name>__<id>``, features the union by id in order of first appearance),
with its own cell and feature tables, membership column, count summaries and
the manifest of :mod:`cytearc.storage.composite`; its counts stay in the
sources and are read in place. The summaries and the counts fingerprint are
computed from the virtual counts, so they equal a merged copy's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from dask.delayed import delayed
from tqdm.auto import tqdm

from cytearc.assays.types import RNA_TYPES
from cytearc.engine.arrays import aligned_rows
from cytearc.engine.cluster import get_engine
from cytearc.errors import CompositeFormatError, MergePlanError
from cytearc.storage.composite import (
    COMPOSITE_ATTRIBUTE,
    COMPOSITE_GROUP,
    CompositeManifest,
    SourceBinding,
    map_digest,
)
from cytearc.storage.composite_map import CompositeMap
from cytearc.storage.counts import (
    LAYOUT_ATTRIBUTE,
    band_result,
    band_unit,
    combine_bands,
    count_array_document,
    fit_layout,
    write_summaries,
)
from cytearc.storage.destinations import validate_destination, writable_location
from cytearc.storage.store import Store
from cytearc.storage.virtual import SourceArrays, VirtualArrayReader, virtual_dask_array
from cytearc.tools._writing import (
    create_store,
    finish_store,
    refuse_overlap,
    refuse_pending,
    write_assay_group,
    write_cells,
)
from cytearc.tools.datastore_merge import DataStoreMerge

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    import zarr

    from cytearc.engine.cluster import Engine
    from cytearc.storage.counts import CountsWritten

__all__ = ["create_composite"]


def _sources(
    sources: Mapping[str, str | os.PathLike[str]],
    *,
    options: Mapping[str, Mapping[str, Any]],
    workspaces: Mapping[str, str],
    assay: str,
) -> dict[str, Store]:
    """Each source opened, refusing composites, mounts, pending assays and sources without the assay."""
    if not sources:
        msg = "sources: a composite needs at least one source store, found none; map source names to store locations"
        raise MergePlanError(msg)
    unknown = sorted((set(options) | set(workspaces)) - set(sources))
    if unknown:
        msg = f"source_storage_options, workspaces: no source named {unknown}; the sources are {list(sources)}"
        raise MergePlanError(msg)
    stores = {}
    for name, location in sources.items():
        store = Store(
            location if isinstance(location, str) else Path(location),
            storage_options=options.get(name),
            workspace=workspaces.get(name),
            show_progress=False,
        )
        if store.composite is not None or "matrixSource" in store.store_root.attrs:
            msg = f"{store.where}: source {name!r} is a {'composite' if store.composite else 'mounted store'}; nested composites and composites of mounts are not supported - use a merged copy (DataStoreMerge) or repack it first"
            raise CompositeFormatError(msg)
        refuse_pending(store)
        if assay not in store.assays:
            msg = f"{store.where}: source {name!r} has no assay {assay!r} (it has {list(store.assays)}); every source of a composite holds its assay - leave it out, or merge it with DataStoreMerge, which zero-fills"
            raise MergePlanError(msg)
        stores[name] = store
    return stores


def create_composite(
    destination: str | os.PathLike[str],
    sources: Mapping[str, str | os.PathLike[str]],
    *,
    assay: str = "RNA",
    source_storage_options: Mapping[str, Mapping[str, Any]] | None = None,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: object = None,
    storage_options: Mapping[str, Any] | None = None,
    workspaces: Mapping[str, str] | None = None,
    show_progress: bool = True,
    overwrite: bool = False,
) -> Path | str:
    """Create a composite of ``sources`` at ``destination``: one dataset whose counts stay in the sources.

    Parameters
    ----------
    destination
        A new local directory or fsspec URL (created with mode ``w-``); it
        may not overlap a source.
    sources
        Source names (the prefixes of their cell ids) to store locations,
        local or remote, in cell order.
    assay
        The assay whose counts the composite reads from the sources.
    source_storage_options
        The fsspec options of each remote source, by name; used to read
        them and never written (pass them again to
        ``DataStore(composite, source_storage_options=...)``).
    mem_budget, workers, cluster
        The engine the summaries are computed on (see
        :func:`cytearc.engine.get_engine`).
    storage_options
        The fsspec options of a destination URL.
    workspaces
        The workspace whose tables are read, by source name (default each
        store's root).
    show_progress
        A progress bar over the cells.
    overwrite
        Replace an unprepared CyteArc store at the destination, such as a
        composite whose creation was interrupted.

    Returns
    -------
    pathlib.Path or str
        The composite (its URL when it was written to one).

    Raises
    ------
    MergePlanError
        No source, a source without ``assay``, sources of different assay
        types or without a common integer dtype, or options naming no source.
    CompositeFormatError
        A source is itself a composite or a mounted store.
    PendingAssayError
        A source holds a pending derived assay.
    DestinationExistsError, DestinationOverlapError
        The destination holds keys, lies in another Zarr hierarchy or
        overlaps a source.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     a = write_store(f"{d}/a.zarr", n_cells=200, n_genes=600, cluster="threads")
    ...     b = write_store(f"{d}/b.zarr", n_cells=100, n_genes=600, cluster="threads", seed=1)
    ...     path = create_composite(f"{d}/ab.zarr", {"a": a, "b": b}, cluster="threads",
    ...                             show_progress=False)
    ...     DataStore(path).RNA.shape
    (300, 600)
    """
    location = writable_location(destination, storage_options=storage_options)
    stores = _sources(
        sources, options=source_storage_options or {}, workspaces=workspaces or {}, assay=assay
    )
    names, opened = list(stores), list(stores.values())
    refuse_overlap([s.where for s in opened], location)
    merge = DataStoreMerge(opened, str(location), names=names, assays=[assay])
    plan = merge.plan_assay(opened, names, assay)
    cells = merge.plan_cells(opened, names, [plan])
    validate_destination(location, overwrite=overwrite)
    lengths = [s.cells.n_rows for s in opened]
    shape = (sum(lengths), len(plan.features))
    feature_columns = np.full((len(opened), shape[1]), -1, dtype=np.int64)
    for source, positions in enumerate(plan.positions):
        assert positions is not None  # every source holds the assay
        feature_columns[source, positions] = np.arange(len(positions))
    maps = {
        "rowSources": np.repeat(np.arange(len(opened), dtype=np.int32), lengths),
        "sourceRows": np.concatenate([np.arange(n, dtype=np.int64) for n in lengths]),
        "featureColumns": feature_columns,
    }
    arrays = [
        SourceArrays(counts=c, counts_t=t, name=n)
        for n, (c, t) in zip(names, (s.assays[assay].stored_arrays() for s in opened), strict=True)
    ]
    composite_map = CompositeMap(
        row_sources=maps["rowSources"].astype(np.int64),
        source_rows=maps["sourceRows"],
        feature_columns=feature_columns,
        n_sources=len(opened),
    )
    reader = VirtualArrayReader(composite_map, arrays, dtype=plan.dtype, shape=shape)
    engine = get_engine(mem_budget=mem_budget, workers=workers, cluster=cluster)
    first = opened[0].assays[assay]
    layout = fit_layout(
        first.layout,
        shape=shape,
        dtype=plan.dtype,
        budget=engine.worker_memory(),
        where=f"{location}: assay {assay}",
    )
    shard_rows = layout.array_layout(shape, itemsize=plan.dtype.itemsize).shards[0]
    written = _summaries(
        reader, shape, plan.dtype, shard_rows, engine=engine, show_progress=show_progress
    )
    transposed = plan.assay_type in RNA_TYPES
    documents = {
        "counts": count_array_document(
            shape=shape,
            dtype=plan.dtype,
            layout=layout,
            compressor=first.compressor,
            transposed=False,
            attributes={"content_fingerprint": written.content_fingerprint},
        )
    }
    if transposed:
        documents["countsT"] = count_array_document(
            shape=(shape[1], shape[0]),
            dtype=plan.dtype,
            layout=layout,
            compressor=first.compressor,
            transposed=True,
            attributes={},
        )
    manifest = CompositeManifest(
        assay=assay,
        sources=tuple(
            SourceBinding(
                name=n,
                location=s.where,
                workspace=s.workspace,
                datasetFingerprint=s.dataset_fingerprint,
                countsFingerprint=s.assays[assay].content_fingerprint,
            )
            for n, s in stores.items()
        ),
        arrays=documents,
        maps={k: map_digest(v) for k, v in maps.items()},
        complete=False,
    )
    root = create_store(
        location,
        overwrite=overwrite,
        assay_types={assay: plan.assay_type},
        attributes={COMPOSITE_ATTRIBUTE: manifest.to_json()},
    )
    where = str(location)
    write_cells(root, cells, membership={assay: np.concatenate(plan.membership)}, where=where)
    write_assay_group(root, assay, plan.features, derived=None, where=where)
    _write_maps(root, maps)
    matrix = root.require_group("matrices").create_group(
        assay, attributes={LAYOUT_ATTRIBUTE: layout.to_json()}
    )
    write_summaries(matrix, written)
    done = CompositeManifest(**{**manifest.__dict__, "complete": True})
    finish_store(
        root,
        cells,
        {assay: plan.features},
        {assay: written.content_fingerprint},
        attributes={COMPOSITE_ATTRIBUTE: done.to_json()},
    )
    return location.path or where


def _summaries(
    reader: VirtualArrayReader,
    shape: tuple[int, int],
    dtype: np.dtype,
    shard_rows: int,
    *,
    engine: Engine,
    show_progress: bool,
) -> CountsWritten:
    """The counts fingerprint and summaries of the virtual counts, band by band on the engine."""
    rows = aligned_rows(
        budget=engine.worker_memory(),
        row_bytes=max(shape[1], 1) * 8,
        shard_rows=band_unit(shard_rows),
        n_rows=shape[0],
    )
    x = virtual_dask_array(reader, orientation="cells", block_rows=rows)
    starts = np.cumsum((0, *x.chunks[0][:-1])).tolist()
    tasks = [
        delayed(band_result, pure=True)(block, start, shape[0])
        for block, start in zip(x.to_delayed()[:, 0], starts, strict=True)
    ]
    results: list[Any] = []
    bar = tqdm(total=shape[0], desc="composite summaries", unit="cells", disable=not show_progress)
    batch = 4
    for first in range(0, len(tasks), batch):
        part = engine.compute(*tasks[first : first + batch])
        results.extend(part)
        bar.update(sum(r[1].shape[0] for r in part))
    bar.close()
    return combine_bands(results, shape=shape, dtype=dtype)


def _write_maps(root: zarr.Group, maps: Mapping[str, np.ndarray]) -> None:
    group = root.create_group(COMPOSITE_GROUP)
    for name, values in maps.items():
        group.create_array(
            name,
            data=values,
            chunks=(max(1, min(len(values), 1 << 20)), *values.shape[1:]),
            dimension_names=("cell",) if name != "featureColumns" else ("source", "feature"),
        )
