"""Opening a CyteArc store: its root, format, cell table, assays and engine, validated.

:class:`Store` is the storage level: it opens and checks what is on disk and
knows nothing of analysis. :class:`~cytearc.DataStore` is the facade users
open, :class:`Store` with the operation namespaces on top. Operations,
pipeline stages and plots take :class:`AnalysisStore`, the narrow protocol of
what they use, never :class:`~cytearc.DataStore` itself.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, Self

import zarr
from zarr.storage import LocalStore

from cytearc.assays.assay import Assay
from cytearc.assays.modalities import assay_class, with_storage
from cytearc.assays.types import parse_assay_types, resolve_assay_type
from cytearc.engine.cluster import Engine, get_engine
from cytearc.errors import (
    AssayNotFoundError,
    AssayTypeError,
    CyteArcError,
    MountFormatError,
    OperationArgumentError,
    ReadOnlyStoreError,
    StoreAccessError,
    StoreFormatError,
    StoreNotFoundError,
    WorkspaceNotFoundError,
)
from cytearc.metadata.table import MetaData
from cytearc.storage.composite import (
    COMPOSITE_ATTRIBUTE,
    CompositeAssay,
    CompositeSources,
    composite_namespace,
    open_composite,
    read_manifest,
)
from cytearc.storage.mount import MATRIX_SOURCE, MountStore, read_matrix_source
from cytearc.storage.nodes import (
    PENDING_ATTRIBUTE,
    STORE_FORMAT,
    STORE_FORMAT_VERSION,
    WORKSPACE_ATTRIBUTE,
    child_group,
    child_node,
    member_names,
)
from cytepool.locations import Location, as_location

if TYPE_CHECKING:
    from cytearc.artifacts.refs import ArtifactRef
    from cytearc.storage.verify import VerifyReport

__all__ = ["AnalysisStore", "Assays", "Store", "open_root", "workspace_groups"]

_MODES: Final = ("r", "r+")


def workspace_groups(root: zarr.Group, *, where: str) -> dict[str, zarr.Group]:
    """The complete workspaces of a store (groups of its root carrying ``cytearc:workspace``), by name.

    Parameters
    ----------
    root
        The store's root group.
    where
        The store, for messages.

    Returns
    -------
    dict of str to zarr.Group
        Their groups, sorted by name.
    """
    return {
        n: g
        for n in sorted(member_names(root, where=where))
        if isinstance(g := child_node(root, n, where=where), zarr.Group)
        and WORKSPACE_ATTRIBUTE in g.attrs
    }


class Assays(Mapping[str, Assay]):
    """The assays of a store by name, each opened (and validated) when first accessed.

    A damaged assay raises its named error when it is accessed, so the other
    assays of a store stay usable; an unknown name raises
    :class:`AssayNotFoundError`.

    Parameters
    ----------
    openers
        Each assay's name and the function that opens it.
    where
        The store's location, for messages.
    """

    def __init__(self, openers: Mapping[str, Callable[[], Assay]], *, where: str) -> None:
        self._openers = dict(openers)
        self._open: dict[str, Assay] = {}
        self._where = where

    def __getitem__(self, name: str) -> Assay:
        if name not in self._openers:
            msg = f"{self._where}: no assay {name!r}; the store has {sorted(self._openers)} - pass one of them"
            raise AssayNotFoundError(msg)
        if name not in self._open:
            self._open[name] = self._openers[name]()
        return self._open[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._openers)

    def __len__(self) -> int:
        return len(self._openers)

    def __repr__(self) -> str:
        return f"Assays({', '.join(self._openers)})"


class AnalysisStore(Protocol):
    """What operations, pipeline stages and plots use of an open store.

    :class:`Store` and :class:`~cytearc.DataStore` provide it; so can a test
    double or a composite store.
    """

    @property
    def root(self) -> zarr.Group:
        """The group of the tables, artifacts and runs: the store's root, or the open workspace's."""

    @property
    def store_root(self) -> zarr.Group:
        """The store's root group, which holds the count matrices (``matrices/{assay}``)."""

    @property
    def where(self) -> str:
        """The store's location, for messages."""

    @property
    def writable(self) -> bool:
        """Whether the store was opened for writing."""

    @property
    def show_progress(self) -> bool:
        """Whether long computations show progress."""

    @property
    def cells(self) -> MetaData:
        """The cell table."""

    @property
    def assays(self) -> Mapping[str, Assay]:
        """The assays by name."""

    @property
    def assay_types(self) -> Mapping[str, str]:
        """Each assay's preset."""

    @property
    def engine(self) -> Engine:
        """The engine computations run on."""

    @property
    def dataset_fingerprint(self) -> str:
        """The identity of the cell ids, feature tables and counts."""

    @property
    def cache(self) -> dict[str, Any]:
        """Values computed once per open store (such as the cell ids' fingerprint)."""


def open_root(
    location: str | Path | Location,
    *,
    mode: str,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[zarr.Group, str]:
    """The root group of a store and its location for messages.

    Parameters
    ----------
    location
        A local path (kept a :class:`~pathlib.Path` down to zarr, so ``#``,
        ``?`` and ``;`` in names work), an fsspec URL, or a
        :class:`~cytepool.locations.Location`.
    mode
        ``"r"`` or ``"r+"``.
    storage_options
        For fsspec URLs.

    Returns
    -------
    tuple of zarr.Group and str
        The root group and the location (never its storage options).

    Raises
    ------
    StoreNotFoundError
        There is no ``zarr.json`` at the location (a :class:`FileNotFoundError`).
    StoreFormatError
        The root is an array, or its ``zarr.json`` is not JSON (truncated or damaged).
    StoreAccessError
        A remote location cannot be reached or read (an :class:`OSError`).
    ReadOnlyStoreError
        ``mode="r+"`` on a read-only protocol (``http(s)://``).
    OperationArgumentError
        The filesystem of a remote location refuses ``storage_options``.
    """
    read_only = mode == "r"
    place = as_location(location, storage_options, error=OperationArgumentError)
    where = str(place)
    if place.path is not None and not (place.path / "zarr.json").is_file():
        msg = f"{where}: no CyteArc store here (no zarr.json); check the path or import a dataset first"
        raise StoreNotFoundError(msg)
    if place.read_only and not read_only:
        msg = f"{where}: the {place.protocol} protocol is read-only; open the store with zarr_mode='r' (the default), or copy it to a local path or an object store to write to it"
        raise ReadOnlyStoreError(msg)
    store: Any = place.zarr_store(read_only=read_only)
    try:
        node = zarr.open(store=store, mode=mode, zarr_format=3)  # type: ignore[arg-type]
    except json.JSONDecodeError as exc:
        msg = f"{where}/zarr.json: expected the store's root metadata as JSON, found text that does not parse ({exc}); the file is truncated or damaged - restore the store from a copy or import the source again"
        raise StoreFormatError(msg) from exc
    except FileNotFoundError as exc:
        msg = f"{where}: no CyteArc store here (no zarr.json); check the location or import a dataset first"
        raise StoreNotFoundError(msg) from exc
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        if isinstance(store, LocalStore) or not isinstance(exc, TypeError):
            msg = f"{where}/zarr.json: cannot be read as the store's root Zarr metadata ({type(exc).__name__}: {exc}); the file is damaged - restore the store from a copy or import the source again"
            raise StoreFormatError(msg) from exc
        msg = f"{where}: storage_options: the filesystem refuses them ({exc}); pass the options of its fsspec filesystem (such as key, secret, client_kwargs={{'endpoint_url': ...}})"
        raise OperationArgumentError(msg) from exc
    except Exception as exc:
        if isinstance(store, LocalStore):
            raise
        msg = f"{where}: cannot reach the store at {_endpoint(place.storage_options)} ({type(exc).__name__}: {exc}); check endpoint_url in storage_options (or its client_kwargs), the network and the credentials"
        raise StoreAccessError(msg) from exc
    if not isinstance(node, zarr.Group):
        msg = f"{where}: expected a Zarr v3 group at the root, found an array"
        raise StoreFormatError(msg)
    return node, where


def _endpoint(storage_options: Mapping[str, Any] | None) -> str:
    """The endpoint ``storage_options`` name, for messages."""
    options = dict(storage_options or {})
    client = options.get("client_kwargs")
    url = options.get("endpoint_url") or (
        client.get("endpoint_url") if isinstance(client, dict) else None
    )
    return f"endpoint {url}" if url else "the default endpoint of its protocol"


def _unparsable_metadata(where: str) -> str:
    """The first ``zarr.json`` below a local store that is not JSON, or the store itself."""
    root = Path(where)
    if root.is_dir():
        for path in sorted(root.rglob("zarr.json")):
            try:
                json.loads(path.read_bytes())
            except (json.JSONDecodeError, UnicodeDecodeError):
                return str(path)
    return f"{where} (a zarr.json below it)"


class Store:
    """A CyteArc store opened and validated: root, cell table, assays and engine.

    Parameters
    ----------
    location
        A local path or an fsspec URL (``s3://bucket/ds.zarr``).
    mem_budget, workers, cluster
        The engine the store's computations run on (see
        :func:`cytearc.engine.get_engine`); no cluster starts until something
        is computed.
    assay_types
        Presets for assays whose names are not presets, or to override.
    zarr_mode
        ``"r"`` (default; reading never changes a byte) or ``"r+"``.
    storage_options
        For fsspec URLs (``{"endpoint_url": ..., "key": ..., "secret": ...}``).
    show_progress
        Progress bars on long computations.
    workspace
        Open this workspace of the store (see
        :func:`cytearc.tools.create_workspace`): its own cell table, feature
        tables, artifacts and pipeline runs over the store's count matrices.
        None for the store's root.
    source_storage_options
        For a composite (:func:`cytearc.tools.create_composite`): the fsspec
        options of each remote source, by source name. For a mounted target
        (:func:`cytearc.tools.mount_datastore`): the fsspec options of its
        source. Kept in memory only, never written.

    Raises
    ------
    OperationArgumentError
        ``zarr_mode`` is neither ``"r"`` nor ``"r+"``.
    WorkspaceNotFoundError
        The store has no complete workspace ``workspace``.
    StoreNotFoundError
        There is no store at a local ``location`` (a :class:`FileNotFoundError`).
    StoreFormatError
        The store is of another format, was not completely imported, its
        arrays disagree with its metadata, or a ``zarr.json`` is not JSON.
    StoreAccessError
        A remote ``location`` cannot be reached or read.
    AssayTypeError
        The recorded or given assay types are unknown or conflict.
    """

    def __init__(
        self,
        location: str | Path | Location,
        *,
        mem_budget: str | int | float | None = None,
        workers: int | str | None = None,
        cluster: object = None,
        assay_types: Mapping[str, str] | None = None,
        zarr_mode: str = "r",
        storage_options: Mapping[str, Any] | None = None,
        show_progress: bool = True,
        workspace: str | None = None,
        source_storage_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if zarr_mode not in _MODES:
            msg = f"zarr_mode: expected 'r' (read) or 'r+' (read and write), found {zarr_mode!r}; pass one of them"
            raise OperationArgumentError(msg)
        self.writable = zarr_mode == "r+"
        self.show_progress = show_progress
        self.cache: dict[str, Any] = {}
        self._reopen: dict[str, Any] = {
            "location": location,
            "mem_budget": mem_budget,
            "workers": workers,
            "cluster": cluster,
            "zarr_mode": zarr_mode,
            "storage_options": storage_options,
            "show_progress": show_progress,
            "source_storage_options": source_storage_options,
        }
        """The options of this open, which the engine and ``open_workspace`` use (in memory only)."""
        self.composite: CompositeSources | None = None
        """The open sources of a composite (:mod:`cytearc.storage.composite`), else None."""
        self.store_root, self.where = open_root(
            location, mode=zarr_mode, storage_options=storage_options
        )
        self.root = self.store_root
        self.workspace = workspace
        """The open workspace, or None for the store's root."""
        try:
            self._open(assay_types)
        except json.JSONDecodeError as exc:
            msg = f"{_unparsable_metadata(self.where)}: expected Zarr metadata as JSON, found text that does not parse ({exc}); the file is truncated or damaged - restore the store from a copy or import the source again"
            raise StoreFormatError(msg) from exc

    def _open(self, assay_types: Mapping[str, str] | None) -> None:
        """Validate the root, then open the workspace, the cell table and the assays."""
        attrs = dict(self.store_root.attrs)
        if (
            attrs.get("cytearc:format") != STORE_FORMAT
            or attrs.get("cytearc:formatVersion") != STORE_FORMAT_VERSION
        ):
            msg = f"{self.where}: not a CyteArc store of format {STORE_FORMAT} {STORE_FORMAT_VERSION} (found {attrs.get('cytearc:format')!r} {attrs.get('cytearc:formatVersion')!r}); open it with the release that wrote it, or import the source again"
            raise StoreFormatError(msg)
        if attrs.get("cytearc:complete") is not True:
            writer = "create_composite" if COMPOSITE_ATTRIBUTE in attrs else "import"
            msg = f"{self.where}: the {writer} that created this store did not finish; run it again (overwrite=True)"
            raise StoreFormatError(msg)
        if not isinstance(attrs.get("cytearc:datasetFingerprint"), str):
            msg = f"{self.where}: attribute 'cytearc:datasetFingerprint': expected a string, found {attrs.get('cytearc:datasetFingerprint')!r}; import the source again (overwrite=True)"
            raise StoreFormatError(msg)
        self._open_composite()
        self._open_mount()
        if self.workspace is not None:
            self.root = self._workspace_group(self.workspace)
        tables = self.where if self.workspace is None else f"{self.where}/{self.workspace}"
        self.cells = MetaData(
            child_group(self.root, "cellData", where=tables),
            dimension="cell",
            where=f"{tables}/cellData",
            reserved=lambda: {f"{n}_I" for n in (*self.assay_types, *self.pending_assays)},
            writable=self.writable,
        )
        self._scan_assays(assay_types)

    def _open_composite(self) -> None:
        """Open a composite's sources (checked against their bindings), or refuse their options."""
        options = self._reopen["source_storage_options"]
        manifest = read_manifest(self.store_root, where=self.where)
        if manifest is None:
            if options is not None and MATRIX_SOURCE not in self.store_root.attrs:
                msg = f"{self.where}: source_storage_options: the store is neither a composite nor a mount, so it has no sources to open; pass storage_options for the store itself"
                raise OperationArgumentError(msg)
            return
        if self.workspace is not None:
            msg = f"{self.where}: workspaces of a composite are not supported; open the composite's root"
            raise WorkspaceNotFoundError(msg)
        self.composite = open_composite(
            self.store_root,
            manifest,
            where=self.where,
            source_storage_options=options,
            show_progress=self.show_progress,
        )
        self.store_root = composite_namespace(self.store_root, self.composite, where=self.where)
        self.root = self.store_root

    def _open_mount(self) -> None:
        """Open a mounted target's source (checked against ``matrixSource``) and its key namespace."""
        record = read_matrix_source(dict(self.store_root.attrs), where=self.where)
        self.mount: Store | None = None
        """The source of a mounted target (:mod:`cytearc.storage.mount`), else None."""
        if record is None:
            return
        if self.workspace is not None:
            msg = f"{self.where}: workspaces of a mounted target are not supported; open its root"
            raise WorkspaceNotFoundError(msg)
        options = self._reopen["source_storage_options"]
        source = Store(
            record.location,
            storage_options=options,
            workspace=record.workspace,
            show_progress=self.show_progress,
        )
        if source.mount is not None or source.composite is not None:
            msg = f"{self.where}: its source {record.location} is itself a {'mounted store' if source.mount else 'composite'}; mounts of mounts and of composites are not supported - mount the original store"
            raise MountFormatError(msg)
        for name, entry in record.assays.items():
            assay = source.assays.get(name)
            if (
                source.dataset_fingerprint != entry.datasetFingerprint
                or assay is None
                or assay.content_fingerprint != entry.countsFingerprint
            ):
                msg = f"{self.where}: the source {record.location} is not the store that was mounted (its dataset or {name} counts fingerprint changed); a mount needs its source unchanged - restore the source, or mount it again"
                raise MountFormatError(msg)
            if entry.requiresTranspose and assay.stored_arrays()[1] is None:
                msg = f"{self.where}: assay {name!r} opens as an RNA type and needs the source's countsT, which {record.location} lacks; repair the source with repack_zarr --data-only, or mount it again"
                raise MountFormatError(msg)
        prefix = f"{record.workspace}/" if record.workspace else ""
        roots = {
            "artifacts": f"{prefix}artifacts",
            **{f"{a}/artifacts": f"{prefix}{a}/artifacts" for a in record.assays},
        }
        namespace = MountStore(
            self.store_root.store, source.store_root.store, roots=roots, where=self.where
        )
        self.root = zarr.open_group(store=namespace, mode="r+" if self.writable else "r")
        self.mount = source
        self._mounted = set(record.assays)

    def close(self) -> None:
        """Release what the open holds: a composite's cache of remote sources (its directory is removed).

        The store stays readable; a composite reads its remote sources
        directly after it is closed.
        """
        if self.composite is not None:
            self.composite.cache.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _workspace_group(self, name: str) -> zarr.Group:
        node = child_node(self.store_root, name, where=self.where) if name else None
        if isinstance(node, zarr.Group) and WORKSPACE_ATTRIBUTE in node.attrs:
            return node
        found = list(workspace_groups(self.store_root, where=self.where))
        if isinstance(node, zarr.Group) and not node.attrs.get("is_assay"):
            msg = f"{self.where}/{name}: the group is not a complete workspace (no {WORKSPACE_ATTRIBUTE!r}: its creation did not finish); create it again with DataStore({self.where!r}, zarr_mode='r+').create_workspace({name!r}, overwrite=True)"
        else:
            msg = f"{self.where}: no workspace {name!r}; the store has the workspaces {found} - pass one of them, or create it with DataStore(..., zarr_mode='r+').create_workspace({name!r})"
        raise WorkspaceNotFoundError(msg)

    @property
    def workspaces(self) -> list[str]:
        """The store's complete workspaces, sorted."""
        return list(workspace_groups(self.store_root, where=self.where))

    def _scan_assays(self, assay_types: Mapping[str, str] | None) -> None:
        """Find the assays (``is_assay``) and pending derived assays of the root, and resolve the types."""
        groups = {
            n: g
            for n in sorted(member_names(self.root, where=self.where))
            if isinstance(g := child_node(self.root, n, where=self.where), zarr.Group)
        }
        names = [n for n, g in groups.items() if g.attrs.get("is_assay") is True]
        self.pending_assays = [n for n, g in groups.items() if PENDING_ATTRIBUTE in g.attrs]
        """Groups a derived-assay writer created and did not finish (see ``discard_interrupted_assay``)."""
        for name in names:
            if "state" in member_names(groups[name], where=f"{self.where}/{name}"):
                msg = f"{self.where}/{name}/state: the former assay state document is not supported; re-import or rebuild the dataset"
                raise StoreFormatError(msg)
        self.assay_types = self._resolve_types(
            self.root.attrs.get("assayTypes"), set(names), assay_types
        )
        self.assays = Assays(
            {name: functools.partial(self._open_assay, name) for name in sorted(names)},
            where=self.where,
        )

    def reopen_assays(self) -> None:
        """Scan the assays again, after a writer added or removed one."""
        self._scan_assays(None)

    def _open_assay(self, name: str) -> Assay:
        modality = assay_class(self.assay_types[name])
        kind = (
            functools.partial(with_storage(CompositeAssay, modality), sources=self.composite)
            if self.composite is not None and name == self.composite.manifest.assay
            else modality
        )
        mounted = self.mount is not None and name in self._mounted
        assay = kind(
            name=name,
            assay_type=self.assay_types[name],
            root=self.root,
            where=self.where,
            writable=self.writable,
            matrices_root=self.mount.store_root if mounted and self.mount else self.store_root,
            workspace=self.workspace,
        )
        if assay.shape[0] != self.cells.n_rows:
            msg = f"{assay.where}: counts has {assay.shape[0]} cells, the cell table {self.cells.n_rows}; re-import the store"
            raise StoreFormatError(msg)
        return assay

    def _resolve_types(
        self, recorded: object, names: set[str], explicit: Mapping[str, str] | None
    ) -> dict[str, str]:
        if recorded is None:
            recorded = {}
        if not isinstance(recorded, dict):
            msg = f"{self.where}: attribute 'assayTypes' must map assays to presets, found {recorded!r}; open with zarr_mode='r+' and assay_types for every assay to replace it"
            raise AssayTypeError(msg)
        given = parse_assay_types(explicit, names, where=self.where)
        if not self.writable:
            for name, value in given.items():
                if recorded.get(name) not in (None, value):
                    msg = f"{self.where}: assay {name!r} is recorded as {recorded[name]!r}; a read-only open cannot record {value!r} - open once with zarr_mode='r+'"
                    raise AssayTypeError(msg)
        types = {
            n: resolve_assay_type(
                n, explicit=given.get(n), recorded=recorded.get(n), where=self.where
            )
            for n in sorted(names)
        }
        kept = {**types, **{p: recorded[p] for p in self.pending_assays if p in recorded}}
        if self.writable and kept != recorded:
            self.root.attrs["assayTypes"] = kept
        return types

    def verify(self) -> VerifyReport:
        """Read every value of the store and check it against what the store recorded.

        Reads each assay's ``counts`` and ``countsT`` shard by shard on the
        engine, recomputes the content fingerprint, checks that ``countsT``
        holds the same values and that the count summaries describe the
        counts, recomputes the dataset fingerprint, and checks every published
        artifact against the digests recorded at its publication. Nothing is
        written. See :mod:`cytearc.storage.verify` and ``docs/store-format.md``
        (*Verifying a store*).

        Returns
        -------
        VerifyReport
            Every check, and the first damage found (``report.ok`` when none).

        Raises
        ------
        MemBudgetError
            One band of whole shards does not fit a worker's memory.
        """
        from cytearc.storage.verify import verify_store  # noqa: PLC0415 (verify reads artifacts and tables, which import the store)

        return verify_store(self)

    def discard_unpublished_artifacts(self) -> list[ArtifactRef]:
        """Delete the artifact groups a killed producer left unpublished (``complete=False``).

        Call it only after confirming that no process is writing to the
        store; :meth:`verify` lists such groups as unchecked.

        Returns
        -------
        list of ArtifactRef
            The groups deleted.

        Raises
        ------
        ReadOnlyStoreError
            The store was opened read-only.
        """
        from cytearc.artifacts.store import discard_unpublished  # noqa: PLC0415 (artifacts import the store)

        return discard_unpublished(self.root, scopes=["", *self.assays])

    @property
    def engine(self) -> Engine:
        """The engine computations run on, started (or reused) on first use."""
        options = self._reopen
        return get_engine(
            mem_budget=options["mem_budget"], workers=options["workers"], cluster=options["cluster"]
        )

    @property
    def dataset_fingerprint(self) -> str:
        """Identity of the cell ids, each assay's feature ids and names and its counts."""
        return str(self.store_root.attrs["cytearc:datasetFingerprint"])

    def _describe(self, name: str) -> str:
        try:
            return repr(self.assays[name])
        except CyteArcError as exc:
            return f"{name} (does not open: {type(exc).__name__})"

    def __repr__(self) -> str:
        assays = ", ".join(self._describe(name) for name in self.assays)
        place = (
            self.where if self.workspace is None else f"{self.where} workspace {self.workspace!r}"
        )
        return f"<{type(self).__name__} {place}: {self.cells.n_rows} cells; {assays}>"
