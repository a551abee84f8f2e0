"""Artifact groups: publication by one metadata write, lookup, reuse and lineage.

An artifact is a group ``{scope}/artifacts/{kind}/{artifact_id}`` whose path
ends in a random 256-bit id, so it belongs to its producer alone. The producer
creates it with ``complete=False``, writes and checks the payload, and
publishes it with one attribute write that sets ``complete=True`` and records
the digest of every payload array (``cytearc:arrayDigests``, computed as each
array is written) and of its identity attributes (``cytearc:attributesDigest``:
artifact_id, kind, provenance; see :mod:`cytearc.artifacts.digests`). A
failure before that write deletes the group; after it the group stays,
complete or not, because the write may have persisted although it reported an
error. Readers and reuse only ever accept ``complete is True``; the digests
never enter reuse. A group whose identity attributes disagree with their
digest, or that records array digests without ``complete=True``, was changed
after publication: it is damaged, never read, reused or discarded.
Artifacts published before the attributes digest was recorded are read
unchecked.
"""

from __future__ import annotations

import contextlib
import contextvars
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import rfc8785
import zarr
from zarr.core.sync import sync

from cytearc.artifacts.digests import (
    ATTRIBUTES_DIGEST_ATTRIBUTE,
    DIGESTS_ATTRIBUTE,
    array_digest,
    attributes_digest,
    lazy_chunk_digests,
    stored_digest,
)
from cytearc.artifacts.refs import DATASTORE_SCOPE, ArtifactRef
from cytearc.artifacts.views import artifact_view, lineage_view
from cytearc.engine.arrays import open_lazy, store_aligned
from cytearc.errors import (
    ArtifactError,
    DamagedArtifactError,
    IncompleteArtifactError,
    MissingArtifactError,
    ReadOnlyStoreError,
)
from cytearc.storage.damage import read_region
from cytearc.storage.finite_values import checked_blocks, validate_finite
from cytearc.storage.nodes import child_node, create_group_top_down, member_names
from cytepool._versions import package_version
from cytepool.codecs import compressor

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    import dask.array as da
    from dask.delayed import Delayed

__all__ = [
    "ATTRIBUTES",
    "Artifact",
    "ArtifactWriter",
    "Lineage",
    "PlanReceipt",
    "artifact_refs",
    "discard_unpublished",
    "find_reusable",
    "lineage",
    "list_artifacts",
    "open_artifact",
    "planning_receipts",
    "produce",
]

ATTRIBUTES: Final = (
    "artifact_id",
    "kind",
    "provenance",
    "execution_options",
    "created_at_ns",
    "cytearc_version",
    "complete",
)
_COMPRESSOR: Final = compressor("zstd", error=ArtifactError)
SPILL_GROUP: Final = "_spill"
"""The subgroup of an unpublished artifact that holds :meth:`ArtifactWriter.spill`'s scratch arrays."""

_RECOMPUTE: Final = "compute it again: rerun its operation with invalidate_cache=True"


@dataclass(frozen=True)
class Artifact:
    """A published artifact: its reference, attributes and arrays.

    Parameters
    ----------
    ref
        Where it lives.
    group
        Its group.
    attrs
        Its attributes, as read when it was opened.
    """

    ref: ArtifactRef
    group: zarr.Group
    attrs: dict[str, Any]

    @property
    def provenance(self) -> dict[str, Any]:
        """``{operation, parameters, inputs[, revision]}``."""
        return dict(self.attrs["provenance"])

    @property
    def parameters(self) -> dict[str, Any]:
        """The operation's parameters."""
        return dict(self.provenance["parameters"])

    def inputs(self) -> dict[str, ArtifactRef]:
        """The upstream artifacts among the provenance inputs.

        Returns
        -------
        dict of str to ArtifactRef
            By input name.
        """
        out = {}
        for name, value in self.provenance["inputs"].items():
            ref = ArtifactRef.from_json(value)
            if ref is not None:
                out[name] = ref
        return out

    def array(self, name: str) -> zarr.Array[Any]:
        """One payload array.

        Parameters
        ----------
        name
            The array's name.

        Returns
        -------
        zarr.Array
            The array.

        Raises
        ------
        ArtifactError
            The artifact has no array of that name.
        """
        node = child_node(self.group, name, where=str(self.ref))
        if not isinstance(node, zarr.Array):
            msg = f"{self.ref}: no array {name!r}; it holds {sorted(member_names(self.group, where=str(self.ref)))}"
            raise ArtifactError(msg)
        return node

    def read(self, name: str) -> np.ndarray:
        """A small payload array, whole (never a count matrix or normalized data).

        Parameters
        ----------
        name
            The array's name.

        Returns
        -------
        numpy.ndarray
            Its values.

        Raises
        ------
        StoreDamageError
            A chunk of it fails its checksum.
        """
        return read_region(self.array(name), Ellipsis)

    def lazy(self, name: str) -> da.Array:
        """A payload array as a Dask array whose blocks are its chunks.

        Parameters
        ----------
        name
            The array's name.

        Returns
        -------
        dask.array.Array
            The lazy array.
        """
        return open_lazy(self.array(name))

    def __repr__(self) -> str:
        return f"<Artifact {self.ref} ({self.provenance['operation']})>"

    def _repr_html_(self) -> str:
        """The artifact in a notebook: ref, operation, parameters, inputs, arrays, digests and lineage."""
        return artifact_view(self)


def _check_attrs(attrs: dict[str, Any], ref: ArtifactRef) -> None:
    missing = [k for k in ATTRIBUTES if k not in attrs]
    if missing:
        msg = f"{ref}: artifact attributes {missing} are missing; the artifact is unusable - compute it again"
        raise ArtifactError(msg)
    if attrs["artifact_id"] != ref.artifact_id or attrs["kind"] != ref.kind:
        msg = f"{ref}: attributes name artifact {attrs['artifact_id']!r} of kind {attrs['kind']!r}"
        raise ArtifactError(msg)
    provenance = attrs["provenance"]
    if not isinstance(provenance, dict) or not {"operation", "parameters", "inputs"} <= set(
        provenance
    ):
        msg = f"{ref}: provenance must map operation, parameters and inputs; found {provenance!r}"
        raise ArtifactError(msg)
    recorded = attrs.get(ATTRIBUTES_DIGEST_ATTRIBUTE)
    if recorded is None:
        return
    try:
        found = attributes_digest(attrs)
    except rfc8785.CanonicalizationError as exc:
        found = f"no digest ({exc})"
    if found != recorded:
        msg = f"{ref}: the identity attributes (artifact_id, kind, provenance) have digest {found}, not the {ATTRIBUTES_DIGEST_ATTRIBUTE!r} {recorded!r} recorded at publication; they were edited after publication and the artifact is never read or reused - {_RECOMPUTE}"
        raise DamagedArtifactError(msg)


def open_artifact(root: zarr.Group, ref: ArtifactRef | str) -> Artifact:
    """The published artifact at ``ref``.

    Parameters
    ----------
    root
        The store's root group.
    ref
        The artifact's reference or path.

    Returns
    -------
    Artifact
        The artifact.

    Raises
    ------
    MissingArtifactError
        No group there (removed, or never created).
    IncompleteArtifactError
        The group was never published; it is never read.
    DamagedArtifactError
        The group was changed after publication: its identity attributes
        disagree with their digest, or it records array digests (written
        only by publication) but not ``complete=True``.
    ArtifactError
        Its attributes are missing or malformed.
    """
    ref = ArtifactRef.parse(ref)
    node = child_node(root, ref.path, where=".")
    if not isinstance(node, zarr.Group):
        msg = (
            f"{ref}: no such artifact in the store; recompute it (its inputs may have been removed)"
        )
        raise MissingArtifactError(msg)
    attrs = dict(node.attrs)
    if attrs.get("complete") is not True and DIGESTS_ATTRIBUTE in attrs:
        found = f"complete={attrs['complete']!r}" if "complete" in attrs else "no 'complete'"
        msg = f"{ref}: the artifact records {DIGESTS_ATTRIBUTE!r}, which only its publication writes, but {found} (expected complete=True); its attributes were changed after publication and it is never read or reused - {_RECOMPUTE}"
        raise DamagedArtifactError(msg)
    if attrs.get("complete") is not True:
        msg = f"{ref}: the artifact was never published (complete={attrs.get('complete')!r}); it is left by an interrupted producer and is never read - compute it again"
        raise IncompleteArtifactError(msg)
    _check_attrs(attrs, ref)
    return Artifact(ref, node, attrs)


async def _collect(keys: AsyncIterator[str]) -> list[str]:
    return [key async for key in keys]


def _child_groups(group: zarr.Group) -> list[str]:
    """The names of ``group``'s child groups; a child folder without ``zarr.json`` is skipped quietly.

    ``cytearc verify`` reports such folders; ``group_keys()`` would warn about them in Zarr's words.
    """
    names = sync(_collect(group.store.list_dir(group.path)))
    return sorted(
        name
        for name in names
        if name != "zarr.json" and isinstance(child_node(group, name, where=group.path), zarr.Group)
    )


def _kind_groups(root: zarr.Group, scope: str, kind: str | None) -> Iterator[tuple[str, str]]:
    base = child_node(root, f"{scope}/artifacts" if scope else "artifacts", where="")
    if not isinstance(base, zarr.Group):
        return
    kinds = _child_groups(base) if kind is None else [kind]
    for name in kinds:
        group = base.get(name)
        if isinstance(group, zarr.Group):
            for artifact_id in _child_groups(group):
                yield name, artifact_id


def artifact_refs(
    root: zarr.Group, *, scopes: list[str], kind: str | None = None
) -> list[ArtifactRef]:
    """Every artifact group of ``scopes`` (``""`` for the datastore), published or not.

    Parameters
    ----------
    root
        The store's root group.
    scopes
        Assay names, and ``""`` for the datastore.
    kind
        Only groups of this kind.

    Returns
    -------
    list of ArtifactRef
        By scope, kind and id.
    """
    return [
        ArtifactRef(scope, kind_name, artifact_id)
        for scope in scopes
        for kind_name, artifact_id in _kind_groups(root, scope, kind)
    ]


def discard_unpublished(root: zarr.Group, *, scopes: list[str]) -> list[ArtifactRef]:
    """Delete the artifact groups that were never published (``complete`` is not true).

    A producer killed outright (SIGKILL, power loss) leaves its group with
    ``complete=False``; it is never read or reused, only takes space. A group
    that records array digests was published and later damaged: it is kept,
    for ``cytearc verify`` to report. Call
    this only after confirming that no process is writing to the store: a
    producer still running would lose its group. CyteArc never infers that a
    producer stopped.

    Parameters
    ----------
    root
        The store's root group, writable.
    scopes
        Assay names, and ``""`` for the datastore.

    Returns
    -------
    list of ArtifactRef
        The groups deleted.

    Raises
    ------
    ReadOnlyStoreError
        The store is read-only.
    """
    if root.store.read_only:
        msg = "discarding unpublished artifacts needs a writable store; open it with zarr_mode='r+'"
        raise ReadOnlyStoreError(msg)
    removed = []
    for ref in artifact_refs(root, scopes=scopes):
        node = child_node(root, ref.path, where=".")
        if (
            isinstance(node, zarr.Group)
            and node.attrs.get("complete") is not True
            and DIGESTS_ATTRIBUTE not in node.attrs
        ):
            parent = root[ref.path.rsplit("/", 1)[0]]
            assert isinstance(parent, zarr.Group)
            del parent[ref.artifact_id]
            removed.append(ref)
    return removed


def list_artifacts(
    root: zarr.Group, *, scopes: list[str], kind: str | None = None
) -> list[Artifact]:
    """Published artifacts of ``scopes`` (``""`` for the datastore), oldest first.

    Unpublished, damaged or unreadable groups are left out (``cytearc verify``
    reports the damaged ones).

    Parameters
    ----------
    root
        The store's root group.
    scopes
        Assay names, and ``""`` for the datastore.
    kind
        Only artifacts of this kind.

    Returns
    -------
    list of Artifact
        The artifacts, by creation time.
    """
    out = []
    for ref in artifact_refs(root, scopes=scopes, kind=kind):
        try:
            out.append(open_artifact(root, ref))
        except ArtifactError:
            continue
    return sorted(out, key=lambda a: (a.attrs["created_at_ns"], a.ref))


def find_reusable(
    root: zarr.Group, *, scope: str, kind: str, provenance: dict[str, Any]
) -> Artifact | None:
    """The oldest published artifact whose whole provenance mapping equals ``provenance``.

    An artifact whose recorded ``revision`` is not an integer of 2 or more is
    never reused.

    Parameters
    ----------
    root
        The store's root group.
    scope
        The scope to look in.
    kind
        The kind to look for.
    provenance
        The provenance the artifact must record.

    Returns
    -------
    Artifact or None
        The artifact, or None when there is none.
    """
    for artifact in list_artifacts(root, scopes=[scope], kind=kind):
        recorded = artifact.attrs["provenance"]
        if "revision" in recorded and (
            not isinstance(recorded["revision"], int)
            or isinstance(recorded["revision"], bool)
            or recorded["revision"] < 2
        ):
            continue
        if recorded == provenance:
            return artifact
    return None


@dataclass
class PlanReceipt:
    """How a planned artifact was satisfied: ``reused`` or ``created``, with the plans it made.

    Parameters
    ----------
    operation
        The operation that planned it.
    kind
        The artifact's kind.
    scope
        The artifact's scope.
    artifact_id
        The artifact's id, once known.
    disposition
        ``reused`` or ``created``, once known.
    nested
        The receipts of the artifacts its production planned.
    """

    operation: str
    kind: str
    scope: str
    artifact_id: str = ""
    disposition: str = ""
    nested: list[PlanReceipt] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The stage record's plan entry.

        Returns
        -------
        dict
            ``{operation, kind, scope, artifactId, disposition, nested}``.
        """
        return {
            "operation": self.operation,
            "kind": self.kind,
            "scope": self.scope,
            "artifactId": self.artifact_id,
            "disposition": self.disposition,
            "nested": [n.to_json() for n in self.nested],
        }


_receipts: contextvars.ContextVar[list[PlanReceipt] | None] = contextvars.ContextVar(
    "cytearc_plan_receipts", default=None
)


@contextlib.contextmanager
def planning_receipts() -> Iterator[list[PlanReceipt]]:
    """Collect the receipts of the artifacts planned inside the block (the pipeline's ledger).

    Yields
    ------
    list of PlanReceipt
        The receipts, filled in as the block plans artifacts.
    """
    receipts: list[PlanReceipt] = []
    token = _receipts.set(receipts)
    try:
        yield receipts
    finally:
        _receipts.reset(token)


class ArtifactWriter:
    """The payload of one artifact being produced (unpublished until :func:`produce` returns).

    Parameters
    ----------
    group
        The artifact's unpublished group.
    ref
        Its reference.
    operation
        The operation producing it, for messages.
    compute
        Computes Dask collections (the engine's), returning their results.
    """

    def __init__(
        self,
        group: zarr.Group,
        *,
        ref: ArtifactRef,
        operation: str,
        compute: Callable[..., tuple[Any, ...]],
    ) -> None:
        self.group = group
        self.ref = ref
        self.operation = operation
        self._compute = compute
        self._pending: list[Delayed] = []
        self._lazy_digests: list[tuple[zarr.Array[Any], da.Array]] = []
        self._digests: dict[str, str] = {}

    def write(
        self,
        name: str,
        values: np.ndarray,
        *,
        chunks: tuple[int, ...] | None = None,
        finite: bool = True,
        attributes: dict[str, Any] | None = None,
    ) -> zarr.Array[Any]:
        """Store a small array now, checking finite values first.

        Parameters
        ----------
        name
            The array's name.
        values
            Its values; text is stored as variable-length UTF-8 strings.
        chunks
            Its chunk shape; default one chunk.
        finite
            Refuse NaN and infinity.
        attributes
            The array's attributes.

        Returns
        -------
        zarr.Array
            The stored array.

        Raises
        ------
        NonFiniteArtifactError
            ``finite`` and a value is NaN or infinite.
        """
        values = np.asarray(values)
        if finite:
            validate_finite(values, operation=self.operation, array=name)
        dtype: Any = str if values.dtype.kind in "OUT" else values.dtype
        array = self.group.create_array(
            name,
            shape=values.shape,
            dtype=dtype,
            chunks=chunks or tuple(max(1, s) for s in values.shape),
            compressors=_COMPRESSOR,
            attributes=attributes or {},
        )
        if values.size:
            array[...] = values.astype(object) if dtype is str else values
        self._digests[name] = stored_digest(array)
        return array

    def store(
        self,
        name: str,
        x: da.Array,
        *,
        chunks: tuple[int, ...],
        finite: bool = True,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        """Plan the write of a Dask array (rechunked to ``chunks``), run at publication.

        Parameters
        ----------
        name
            The array's name.
        x
            Its values.
        chunks
            Its chunk shape; each task writes whole chunks.
        finite
            Refuse NaN and infinity (checked block by block as it is written).
        attributes
            The array's attributes.
        """
        x = x.rechunk(chunks)
        if finite:
            x = checked_blocks(x, operation=self.operation, array=name)
        array = self.group.create_array(
            name,
            shape=x.shape,
            dtype=x.dtype,
            chunks=tuple(max(1, c) for c in chunks),
            compressors=_COMPRESSOR,
            attributes=attributes or {},
        )
        self._pending.append(store_aligned(x, array, where=f"{self.ref}/{name}"))
        self._lazy_digests.append((array, lazy_chunk_digests(x)))

    def spill(self, name: str, x: da.Array) -> None:
        """Plan a write of ``x`` into a scratch array of the group, for a later pass to read back.

        A second pass over values that cost more to compute than to read
        (normalized values rebuilt from gzip counts) reads them from the
        scratch array (:meth:`spilled`) instead. Scratch arrays are deleted
        before publication and are not part of the payload.

        Parameters
        ----------
        name
            The scratch array's name.
        x
            Its values; its blocks are the chunks.
        """
        scratch = self.group.require_group(SPILL_GROUP)
        array = scratch.create_array(
            name,
            shape=x.shape,
            dtype=x.dtype,
            chunks=tuple(max(1, c[0]) for c in x.chunks),
            compressors=_COMPRESSOR,
        )
        self._pending.append(store_aligned(x, array, where=f"{self.ref}/{SPILL_GROUP}/{name}"))

    def spilled(self, name: str) -> da.Array:
        """A scratch array written by :meth:`spill` (after a :meth:`run`), lazily.

        Parameters
        ----------
        name
            The scratch array's name.

        Returns
        -------
        dask.array.Array
            Its values, one block per chunk.
        """
        array = self.group[f"{SPILL_GROUP}/{name}"]
        assert isinstance(array, zarr.Array)
        return open_lazy(array)

    def drop_spills(self) -> None:
        """Delete the scratch arrays (before publication)."""
        if SPILL_GROUP in self.group:
            del self.group[SPILL_GROUP]

    def run(self, *extra: Any) -> tuple[Any, ...]:
        """Compute the planned writes together with ``extra`` collections; the results of ``extra``.

        One graph, so a block that both a write and a statistic need is read once.

        Parameters
        ----------
        *extra
            Dask collections to compute with the writes.

        Returns
        -------
        tuple
            The results of ``extra``, in order.
        """
        pending, self._pending = self._pending, []
        lazy, self._lazy_digests = self._lazy_digests, []
        if not pending and not lazy and not extra:
            return ()
        results = self._compute(*pending, *(digests for _, digests in lazy), *extra)
        for (array, _), chunks in zip(lazy, results[len(pending) :], strict=False):
            self._digests[array.basename] = array_digest(
                shape=tuple(array.shape),
                dtype=array.dtype,
                chunks=[d for d in np.asarray(chunks).ravel() if d],
            )
        return tuple(results[len(pending) + len(lazy) :])

    def digests(self) -> dict[str, str]:
        """The digest of every payload array, by name, as publication records them.

        Arrays written through :meth:`write` and :meth:`store` were digested as
        they were written; any other array of the group is read once here.

        Returns
        -------
        dict of str to str
            ``{name: "sha256:..."}``, sorted by name.
        """
        for name, array in self.group.arrays():
            if name not in self._digests:
                self._digests[name] = stored_digest(array)
        return dict(sorted(self._digests.items()))


def _new_group(
    root: zarr.Group, *, scope: str, kind: str, provenance: dict[str, Any], options: dict[str, Any]
) -> tuple[ArtifactRef, zarr.Group]:
    ref = ArtifactRef(scope, kind, secrets.token_hex(32))
    attrs = {
        "artifact_id": ref.artifact_id,
        "kind": kind,
        "provenance": provenance,
        "execution_options": options,
        "created_at_ns": time.time_ns(),
        "cytearc_version": package_version("cytearc"),
        "complete": False,
    }
    return ref, create_group_top_down(root, ref.path, attributes=attrs)


def produce(
    root: zarr.Group,
    *,
    scope: str,
    kind: str,
    provenance: dict[str, Any],
    build: Callable[[ArtifactWriter], None],
    compute: Callable[..., tuple[Any, ...]],
    execution_options: dict[str, Any] | None = None,
    invalidate_cache: bool = False,
    where: str = "store",
) -> Artifact:
    """Reuse the artifact with this provenance, or build, check and publish a new one.

    ``build`` writes the payload through the :class:`ArtifactWriter`; its
    planned Dask writes run through ``compute`` (the engine's, called with
    Dask collections, returning their results). A failure
    before publication deletes the group and re-raises.

    Parameters
    ----------
    root
        The store's root group.
    scope
        An assay name, or ``""`` for the datastore.
    kind
        The artifact's kind.
    provenance
        Its provenance (:func:`~cytearc.artifacts.make_provenance`).
    build
        Writes the payload.
    compute
        Computes Dask collections, returning their results.
    execution_options
        The engine's settings, recorded for diagnosis.
    invalidate_cache
        Create a new artifact even when one with this provenance exists.
    where
        The store's location, for messages.

    Returns
    -------
    Artifact
        The reused or newly published artifact.

    Raises
    ------
    ReadOnlyStoreError
        There is no artifact to reuse and the store is read-only.
    """
    receipt = PlanReceipt(str(provenance["operation"]), kind, scope or DATASTORE_SCOPE)
    outer = _receipts.get()
    if outer is not None:
        outer.append(receipt)
    if not invalidate_cache:
        found = find_reusable(root, scope=scope, kind=kind, provenance=provenance)
        if found is not None:
            receipt.artifact_id, receipt.disposition = found.ref.artifact_id, "reused"
            return found
    if root.store.read_only:
        msg = f"{where}: {receipt.operation} has no published result to reuse and the store is read-only; open it with zarr_mode='r+' to compute it"
        raise ReadOnlyStoreError(msg)
    ref, group = _new_group(
        root, scope=scope, kind=kind, provenance=provenance, options=execution_options or {}
    )
    receipt.artifact_id = ref.artifact_id
    writer = ArtifactWriter(group, ref=ref, operation=receipt.operation, compute=compute)
    token = _receipts.set(receipt.nested)
    try:
        build(writer)
        writer.run()
        writer.drop_spills()
        digests = writer.digests()
    except BaseException:
        parent = root[ref.path.rsplit("/", 1)[0]]
        assert isinstance(parent, zarr.Group)
        del parent[ref.artifact_id]
        raise
    finally:
        _receipts.reset(token)
    group.attrs.update(
        {
            "complete": True,
            DIGESTS_ATTRIBUTE: digests,
            ATTRIBUTES_DIGEST_ATTRIBUTE: attributes_digest(dict(group.attrs)),
        }
    )
    receipt.disposition = "created"
    return open_artifact(root, ref)


@dataclass(frozen=True)
class Lineage:
    """An artifact and the chain of artifacts it was computed from; prints as a tree.

    Parameters
    ----------
    artifact
        The artifact.
    parents
        The lineage of each upstream artifact, by input name.
    """

    artifact: Artifact
    parents: dict[str, Lineage]

    def lines(self, *, depth: int = 0, name: str = "") -> list[str]:
        """The tree, one artifact per line, inputs indented under what used them.

        Parameters
        ----------
        depth
            The indentation of this artifact's line.
        name
            The input name this artifact is known by, shown before it.

        Returns
        -------
        list of str
            The lines.
        """
        p = self.artifact.provenance
        label = f"{name}: " if name else ""
        out = [f"{'  ' * depth}{label}{p['operation']} -> {self.artifact.ref}"]
        for input_name, parent in self.parents.items():
            out.extend(parent.lines(depth=depth + 1, name=input_name))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        """The lineage in a notebook: the artifact, then the tree of the artifacts it was computed from."""
        return lineage_view(self)


def lineage(root: zarr.Group, ref: ArtifactRef | str) -> Lineage:
    """The upstream chain of ``ref``; a missing or unpublished input fails closed.

    Parameters
    ----------
    root
        The store's root group.
    ref
        The artifact.

    Returns
    -------
    Lineage
        The artifact and its inputs, recursively.

    Raises
    ------
    MissingArtifactError, IncompleteArtifactError
        An artifact of the chain is missing or unpublished.
    """
    artifact = open_artifact(root, ref)
    return Lineage(artifact, {k: lineage(root, v) for k, v in artifact.inputs().items()})
