"""``mount_datastore``: a target of its own tables, artifacts and runs over a source store's counts.

The target copies the source's cell and feature tables (membership columns
with their attributes, no analysis outputs) and binds itself to the source
with ``matrixSource`` (:mod:`cytearc.storage.mount`). Opening it reads the
counts and the source's artifacts from the source, which is never written:
a read-only source (a bucket policy, a static web server) is the case it is
made for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cytearc.assays.types import RNA_TYPES
from cytearc.errors import AssayNotFoundError, MountFormatError
from cytearc.metadata.membership import membership_column
from cytearc.storage.destinations import validate_destination, writable_location
from cytearc.storage.mount import MATRIX_SOURCE, MatrixSource, MountedAssay
from cytearc.storage.store import Store
from cytearc.tools._writing import (
    carried_columns,
    create_store,
    finish_store,
    refuse_overlap,
    refuse_pending,
    table_frame,
    write_assay_group,
    write_cells,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence

__all__ = ["mount_datastore"]


def mount_datastore(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    assays: Sequence[str] | None = None,
    workspace: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    target_storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Mount ``source`` at ``target``: the target's own tables, artifacts and runs over the source's counts.

    Open the target with ``DataStore(target, zarr_mode="r+")`` (and
    ``source_storage_options=`` the source's fsspec options when it is
    remote): it lists, loads and reuses the source's artifacts with their
    ids, and writes everything new to itself.

    Parameters
    ----------
    source
        The store whose counts are mounted (a local path or URL; it may be
        read-only). Its absolute location is recorded.
    target
        A new local directory or fsspec URL (mode ``w-``); it may not
        overlap the source.
    assays
        The assays to mount (default every assay of the source).
    workspace
        Mount this workspace of the source: its tables and artifacts.
    storage_options
        The fsspec options of a remote source; never written.
    target_storage_options
        The fsspec options of a target URL.

    Returns
    -------
    pathlib.Path or str
        The target (its URL when it was written to one).

    Raises
    ------
    MountFormatError
        The source is itself a mount or a composite.
    AssayNotFoundError
        ``assays`` names an assay the source does not have.
    PendingAssayError
        The source holds a pending derived assay.
    DestinationExistsError, DestinationOverlapError
        The target holds keys, lies in another Zarr hierarchy or overlaps
        the source.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     source = write_store(f"{d}/shared.zarr", n_cells=300, n_genes=600, cluster="threads")
    ...     mine = mount_datastore(source, f"{d}/mine.zarr")
    ...     DataStore(mine).RNA.shape
    (300, 600)
    """
    src = Store(
        source if isinstance(source, str) else Path(source),
        storage_options=storage_options,
        workspace=workspace,
        show_progress=False,
    )
    if src.mount is not None or src.composite is not None:
        msg = f"{src.where}: the source is a {'mounted store' if src.mount else 'composite'}; mounts of mounts and of composites are not supported - mount the original store"
        raise MountFormatError(msg)
    refuse_pending(src)
    names = list(src.assays) if assays is None else list(assays)
    for name in names:
        if name not in src.assays:
            msg = f"{src.where}: assays: no assay {name!r}; it has {list(src.assays)}"
            raise AssayNotFoundError(msg)
    location = writable_location(target, storage_options=target_storage_options)
    refuse_overlap([src.where], location)
    validate_destination(location, overwrite=False)
    record = MatrixSource(
        location=src.where,
        workspace=workspace,
        assays={
            name: MountedAssay(
                datasetFingerprint=src.dataset_fingerprint,
                countsFingerprint=src.assays[name].content_fingerprint,
                requiresTranspose=src.assay_types[name] in RNA_TYPES,
            )
            for name in names
        },
    )
    root = create_store(
        location,
        overwrite=False,
        assay_types={name: src.assay_types[name] for name in names},
        attributes={MATRIX_SOURCE: record.to_json()},
    )
    where = str(location)
    cells = table_frame(src.cells, carried_columns(src.cells, src.assays))
    membership = {
        name: src.cells.fetch_all(column).astype(bool)
        for name in names
        if (column := membership_column(src.cells, name)) is not None
    }
    write_cells(root, cells, membership=membership, where=where)
    features = {}
    for name in names:
        assay = src.assays[name]
        features[name] = table_frame(assay.features, carried_columns(assay.features, ()))
        write_assay_group(root, name, features[name], derived=assay.derived, where=where)
        root[name].create_group("artifacts")  # type: ignore[union-attr]
    root.create_group("artifacts")
    finish_store(
        root, cells, features, {name: src.assays[name].content_fingerprint for name in names}
    )
    return location.path or where
