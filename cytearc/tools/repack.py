"""``repack_zarr``: a store rewritten with another layout profile, or its count arrays rebuilt.

Without ``data_only`` the source must open as a store. Everything outside
``matrices/`` is copied byte for byte: tables, artifacts, pipeline runs and
their label claims, other root groups. Each assay's ``counts``, ``countsT``
and ``countSummaries`` are then written again under the profile's layout and
codec. The new counts must have the source's content fingerprints and the new
store its dataset fingerprint, or the destination stays incomplete (it never
opens) and the error names the assay.

With ``data_only`` the source is read raw, without opening its assays, so a
store whose ``countsT`` is missing, unsharded or out of agreement, whose
summaries are damaged, or which holds a retired ``{assay}/state`` group, is
repaired. ``counts``, the cell and feature tables (without the columns an
analysis wrote) and the membership columns are read. ``counts``, ``countsT`` and the
summaries are written again; artifacts and runs are left out (recompute them
on the repaired store). The dataset fingerprint is computed from the values,
so intact counts keep the store's identity.

Run it as ``python -m cytearc.tools.repack_zarr IN OUT --profile fast_local
[--data-only]`` or ``cytearc repack IN OUT``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import zarr
from zarr.codecs import ZstdCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from cytearc.assays.types import RNA_TYPES, resolve_assay_type
from cytearc.engine.arrays import open_lazy
from cytearc.engine.cluster import get_engine
from cytearc.errors import (
    CompositeFormatError,
    OperationArgumentError,
    StoreDamageError,
    StoreFormatError,
)
from cytearc.metadata.table import MetaData
from cytearc.storage.composite import COMPOSITE_ATTRIBUTE
from cytearc.storage.counts import fit_layout, write_count_arrays, write_summaries
from cytearc.storage.destinations import (
    create_destination,
    validate_destination,
    writable_location,
)
from cytearc.storage.layout import CountLayout
from cytearc.storage.mount import MATRIX_SOURCE
from cytearc.storage.nodes import (
    DERIVED_ATTRIBUTE,
    PENDING_ATTRIBUTE,
    STORE_FORMAT,
    child_group,
    child_node,
    member_names,
)
from cytearc.storage.store import Store, open_root, workspace_groups
from cytearc.tools._cli import add_writer_options, report_store
from cytearc.tools._cli import main as run_command
from cytearc.tools._writing import (
    create_store,
    finish_store,
    read_carried,
    refuse_overlap,
    refuse_pending,
    write_assay,
    write_cells,
    write_workspace,
)
from cytepool.codecs import compressor

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from zarr.abc.codec import BytesBytesCodec

    from cytearc.engine.cluster import Engine
    from cytepool.locations import Location

__all__ = ["PROFILES", "RepackProfile", "main", "repack_zarr"]


@dataclass(frozen=True, kw_only=True)
class RepackProfile:
    """A named layout and codec choice for count arrays.

    Parameters
    ----------
    name
        The profile's name.
    layout
        The layout policy (halved to fit ``mem_budget`` when needed).
    compressor
        The codec after ``bytes``.
    description
        What it is for.
    """

    name: str
    layout: CountLayout
    compressor: BytesBytesCodec | None
    description: str


PROFILES: Final = {
    "fast_local": RepackProfile(
        name="fast_local",
        layout=CountLayout(unit_bytes=64 * 2**20, chunk_bytes=2**20),
        compressor=compressor("lz4", error=OperationArgumentError),
        description="local disks: 64 MiB shards of 1 MiB chunks, LZ4 (fastest to decode)",
    ),
    "object_store": RepackProfile(
        name="object_store",
        layout=CountLayout(unit_bytes=256 * 2**20, chunk_bytes=8 * 2**20),
        compressor=ZstdCodec(level=5, checksum=True),
        description="S3, GCS and HTTP: 256 MiB shards of 8 MiB chunks (fewer, larger requests), zstd level 5",
    ),
}
"""The profiles ``repack_zarr`` knows, by name."""

_MATRICES: Final = "matrices/"


def _profile(profile: str | RepackProfile) -> RepackProfile:
    if isinstance(profile, RepackProfile):
        return profile
    if profile not in PROFILES:
        msg = f"profile {profile!r}: expected one of {sorted(PROFILES)}; pass one of them or a RepackProfile"
        raise OperationArgumentError(msg)
    return PROFILES[profile]


def repack_zarr(
    source: str | Path,
    destination: str | Path,
    *,
    profile: str | RepackProfile = "fast_local",
    data_only: bool = False,
    overwrite: bool = False,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: object = None,
    storage_options: dict[str, Any] | None = None,
    show_progress: bool = True,
    destination_storage_options: dict[str, Any] | None = None,
) -> Path | str:
    """Rewrite ``source`` at ``destination`` under a layout profile, or rebuild its count arrays.

    Parameters
    ----------
    source
        The store: a local path or an fsspec URL.
    destination
        A new local directory or fsspec URL; it may not overlap ``source``.
    profile
        A name of :data:`PROFILES` (``"fast_local"``, ``"object_store"``) or a
        :class:`RepackProfile`.
    data_only
        Read the raw store without opening its assays and rebuild the count
        arrays and summaries from ``counts`` (the repair of a damaged
        ``countsT`` or summaries); artifacts and runs are not copied.
    overwrite
        Replace an unprepared CyteArc store at the destination.
    mem_budget, workers, cluster
        The engine (see :func:`cytearc.engine.get_engine`).
    storage_options
        The fsspec options of a source URL, and of a destination URL unless
        ``destination_storage_options`` are given; never recorded.
    show_progress
        Progress bars.
    destination_storage_options
        The fsspec options of a destination URL, when they differ.

    Returns
    -------
    pathlib.Path or str
        The new store (its URL when it was written to one).

    Raises
    ------
    DestinationOverlapError
        The destination is, holds or lies inside the source.
    DestinationExistsError
        The destination holds data ``overwrite`` may not replace.
    PendingAssayError
        The source holds a pending derived assay.
    CompositeFormatError
        The source is a composite (:func:`cytearc.tools.create_composite`);
        copy it with ``SubsetZarr`` of every cell or ``DataStoreMerge``.
    StoreFormatError
        Without ``data_only``: the source does not open (the message names
        what is wrong; ``data_only`` repairs damaged count arrays). With it:
        the source has no readable ``counts`` for an assay.
    StoreDamageError
        The rewritten counts do not have the source's fingerprints (the
        destination stays incomplete).
    OperationArgumentError
        ``profile`` is unknown.

    Examples
    --------
    >>> import shutil, tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_store(f"{d}/ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    ...     shutil.rmtree(path / "matrices" / "RNA" / "countsT")  # DataStore(path) now refuses it
    ...     fixed = repack_zarr(path, f"{d}/fixed.zarr", data_only=True, cluster="threads",
    ...                         show_progress=False)
    ...     DataStore(fixed).dataset_fingerprint == zarr.open_group(path).attrs["cytearc:datasetFingerprint"]
    True
    """
    chosen = _profile(profile)
    target = writable_location(
        destination,
        storage_options=storage_options
        if destination_storage_options is None
        else destination_storage_options,
    )
    refuse_overlap([str(source)], target)
    validate_destination(target, overwrite=overwrite)
    _refuse_composite(source, storage_options=storage_options)
    engine_options: dict[str, Any] = {
        "mem_budget": mem_budget,
        "workers": workers,
        "cluster": cluster,
    }
    if data_only:
        return _rebuild(
            source,
            target,
            profile=chosen,
            overwrite=overwrite,
            engine_options=engine_options,
            storage_options=storage_options,
        )
    store = Store(source, storage_options=storage_options, show_progress=show_progress)
    path = validate_destination(target, overwrite=overwrite)
    refuse_pending(store)
    engine = get_engine(**engine_options)
    layouts = {
        name: fit_layout(
            chosen.layout,
            shape=assay.shape,
            dtype=assay.dtype,
            budget=engine.worker_memory(),
            where=f"{path}: assay {name}",
        )
        for name, assay in store.assays.items()
    }
    root = create_destination(path, overwrite=overwrite)
    attributes = {k: v for k, v in store.store_root.attrs.asdict().items() if k != MATRIX_SOURCE}
    root.attrs.update({**attributes, "cytearc:complete": False})
    _copy_outside_matrices(store.root if store.mount is not None else store.store_root, root)
    matrices = root.require_group("matrices")
    for name, assay in store.assays.items():
        written = write_count_arrays(
            matrices.create_group(name),
            assay.counts,
            layout=layouts[name],
            compressor=chosen.compressor,
            engine=engine,
            transpose=assay.assayType in RNA_TYPES,
            where=f"{path}/matrices/{name}",
        )
        if written.content_fingerprint != assay.content_fingerprint:
            msg = f"{path}: assay {name}: the rewritten counts have fingerprint {written.content_fingerprint}, the source {assay.content_fingerprint}; the source changed or is damaged - run `cytearc verify {store.where}`"
            raise StoreDamageError(msg)
        write_summaries(matrices[name], written)  # type: ignore[arg-type]
    root.attrs.update({"cytearc:complete": True})
    reopened = Store(path, show_progress=False)
    if reopened.dataset_fingerprint != store.dataset_fingerprint:  # pragma: no cover (copied)
        msg = f"{path}: dataset fingerprint {reopened.dataset_fingerprint} differs from the source's {store.dataset_fingerprint}"
        raise StoreDamageError(msg)
    return path.path or str(path)


def _refuse_composite(source: str | Path, *, storage_options: dict[str, Any] | None) -> None:
    """Refuse a composite source, whose counts are virtual, before anything is written."""
    root, where = open_root(source, mode="r", storage_options=storage_options)
    if COMPOSITE_ATTRIBUTE in root.attrs:
        msg = f"{where}: a composite store (root attribute {COMPOSITE_ATTRIBUTE!r}): its counts are read from its sources, and repacking a composite is not supported; write an ordinary store with copied counts instead - SubsetZarr({where!r}, OUT, cells=np.arange(n_cells)).dump() with every cell, or DataStoreMerge of its sources (DataStore(STORE).composite.manifest.sources)"
        raise CompositeFormatError(msg)


def _copy_outside_matrices(source: zarr.Group, target: zarr.Group) -> None:
    """Copy every key of ``source`` but the root's ``zarr.json`` and those below ``matrices/``."""
    prototype = default_buffer_prototype()

    async def copy() -> None:
        async for key in source.store.list():
            if key.startswith(_MATRICES) or key == "zarr.json":
                continue
            value = await source.store.get(key, prototype=prototype)
            if value is not None:
                await target.store.set(key, value)

    sync(copy())


def _rebuild(
    source: str | Path,
    target: Location,
    *,
    profile: RepackProfile,
    overwrite: bool,
    engine_options: dict[str, Any],
    storage_options: dict[str, Any] | None,
) -> Path | str:
    """The ``data_only`` repair: read the raw store, write a new one from its ``counts`` and tables."""
    root, where = open_root(source, mode="r", storage_options=storage_options)
    if root.attrs.get("cytearc:format") != STORE_FORMAT:
        msg = f"{where}: not a CyteArc store (attribute 'cytearc:format' is {root.attrs.get('cytearc:format')!r}); check the path"
        raise StoreFormatError(msg)
    refuse_overlap([where], target)
    path = validate_destination(target, overwrite=overwrite)
    names = []
    for scope, group in {"": root, **workspace_groups(root, where=where)}.items():
        for name in sorted(member_names(group, where=where)):
            node = child_node(group, name, where=where)
            if isinstance(node, zarr.Group) and PENDING_ATTRIBUTE in node.attrs:
                key = f"{scope}/{name}" if scope else name
                msg = f"{where}/{key}: a pending derived assay; discard it (DataStore(..., zarr_mode='r+'{f', workspace={scope!r}' if scope else ''}).discard_interrupted_assay({name!r})) before repacking"
                raise StoreFormatError(msg)
            if not scope and isinstance(node, zarr.Group) and node.attrs.get("is_assay") is True:
                names.append(name)
    recorded = root.attrs.get("assayTypes")
    types = {
        name: resolve_assay_type(
            name,
            recorded=recorded.get(name) if isinstance(recorded, dict) else None,
            where=where,
        )
        for name in names
    }
    cells = MetaData(
        child_group(root, "cellData", where=where), dimension="cell", where=f"{where}/cellData"
    )
    counts = {name: _raw_counts(root, name, where=where) for name in names}
    engine = get_engine(**engine_options)
    layouts = {
        name: fit_layout(
            profile.layout,
            shape=(int(array.shape[0]), int(array.shape[1])),
            dtype=array.dtype,
            budget=engine.worker_memory(),
            where=f"{path}: assay {name}",
        )
        for name, array in counts.items()
    }
    return _write_rebuilt(
        root,
        path,
        cells=cells,
        counts=counts,
        types=types,
        layouts=layouts,
        profile=profile,
        engine=engine,
        overwrite=overwrite,
        where=where,
    )


def _raw_counts(root: zarr.Group, name: str, *, where: str) -> zarr.Array[Any]:
    matrix = child_node(root, f"matrices/{name}", where=where)
    array = (
        child_node(matrix, "counts", where=f"{where}/matrices/{name}")
        if isinstance(matrix, zarr.Group)
        else None
    )
    if not isinstance(array, zarr.Array) or array.ndim != 2:
        msg = f"{where}/matrices/{name}/counts: expected the cells x features counts, found {'nothing' if array is None else 'another node'}; nothing to rebuild the assay from - re-import the source"
        raise StoreFormatError(msg)
    return array


def _write_rebuilt(
    root: zarr.Group,
    path: Location,
    *,
    cells: MetaData,
    counts: dict[str, zarr.Array[Any]],
    types: dict[str, str],
    layouts: dict[str, CountLayout],
    profile: RepackProfile,
    engine: Engine,
    overwrite: bool,
    where: str,
) -> Path | str:
    new = create_store(path, overwrite=overwrite, assay_types=types)
    tables = read_carried(cells, _feature_tables(root, counts, where=where))
    write_cells(new, tables.cells, membership=tables.membership, where=str(path))
    derived = {name: _derived_record(root, name, where=where) for name in counts}
    fingerprints = {
        name: write_assay(
            new,
            name,
            tables.features[name],
            open_lazy(array),
            transpose=types[name] in RNA_TYPES,
            layout=layouts[name],
            compressor=profile.compressor,
            engine=engine,
            where=str(path),
            derived=derived[name],
        )
        for name, array in counts.items()
    }
    for workspace in workspace_groups(root, where=where):
        _rebuild_workspace(
            root, new, workspace, types=types, derived=derived, where=where, destination=str(path)
        )
    finish_store(new, tables.cells, tables.features, fingerprints)
    return path.path or str(path)


def _feature_tables(scope: zarr.Group, assays: Iterable[str], *, where: str) -> dict[str, MetaData]:
    """The feature table of each assay of ``scope`` (a store's root or a workspace), read raw."""
    return {
        name: MetaData(
            child_group(
                child_group(scope, name, where=where), "featureData", where=f"{where}/{name}"
            ),
            dimension="feature",
            where=f"{where}/{name}/featureData",
        )
        for name in assays
    }


def _rebuild_workspace(
    root: zarr.Group,
    new: zarr.Group,
    name: str,
    *,
    types: dict[str, str],
    derived: dict[str, dict[str, Any] | None],
    where: str,
    destination: str,
) -> None:
    """Carry a workspace's tables (no analysis outputs) into the rebuilt store."""
    scope = child_group(root, name, where=where)
    scope_where = f"{where}/{name}"
    assays = [
        a
        for a in sorted(member_names(scope, where=scope_where))
        if a in types
        and isinstance(node := child_node(scope, a, where=scope_where), zarr.Group)
        and node.attrs.get("is_assay") is True
    ]
    cells = MetaData(
        child_group(scope, "cellData", where=scope_where),
        dimension="cell",
        where=f"{scope_where}/cellData",
    )
    recorded = scope.attrs.get("assayTypes")
    write_workspace(
        new,
        name,
        read_carried(cells, _feature_tables(scope, assays, where=scope_where)),
        assay_types={
            a: recorded.get(a, types[a]) if isinstance(recorded, dict) else types[a] for a in assays
        },
        derived=derived,
        where=destination,
        origin=None,
    )


def _derived_record(root: zarr.Group, name: str, *, where: str) -> dict[str, Any] | None:
    record = child_group(root, name, where=where).attrs.get(DERIVED_ATTRIBUTE)
    return dict(record) if isinstance(record, dict) else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``cytearc repack`` (and of this module's command line).

    Parameters
    ----------
    parser
        The parser to add them to.
    """
    parser.add_argument("source")
    parser.add_argument("destination")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="fast_local")
    parser.add_argument(
        "--data-only",
        action="store_true",
        help="rebuild counts, countsT and summaries from the raw store (repairs a damaged countsT)",
    )
    add_writer_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``cytearc repack`` from parsed arguments.

    Parameters
    ----------
    args
        The arguments of :func:`add_arguments`.

    Returns
    -------
    int
        0.
    """
    path = repack_zarr(
        args.source,
        args.destination,
        profile=args.profile,
        data_only=args.data_only,
        overwrite=args.overwrite,
        mem_budget=args.mem_budget,
        workers=args.workers,
        cluster=args.cluster,
        show_progress=not args.json,
    )
    return report_store(path, as_json=args.json, done="repacked into")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: exit 0 on success, 1 with one line naming the error, 2 on usage errors.

    Parameters
    ----------
    argv
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code.
    """
    return run_command(
        argv,
        prog="python -m cytearc.tools.repack_zarr",
        description="Rewrite a CyteArc store under a layout profile, or rebuild its count arrays (--data-only).",
        add_arguments=add_arguments,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
