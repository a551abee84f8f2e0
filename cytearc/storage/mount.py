"""Mounted targets: a store of its own tables, artifacts and runs over the counts of a source store.

:func:`cytearc.tools.mount_datastore` writes the target; its root attribute
``matrixSource`` binds it to the source (exactly ``location``, ``workspace``
and ``assays``, each assay exactly ``datasetFingerprint``,
``countsFingerprint`` and ``requiresTranspose``; any other shape is refused,
and so is a source that is itself a mount). Every open checks the source
against it and opens the target's root through a :class:`MountStore`, which
resolves keys in this order:

1. Keys outside the artifact roots (``artifacts`` and ``{assay}/artifacts``
   of the mounted assays) belong to the target alone: tables, ``pipeline/``.
   The counts are read from the source's ``matrices/``.
2. A key inside an artifact group ``{root}/{kind}/{id}`` is read from the
   target when the target holds the group's ``zarr.json``, else from the
   source when the source holds it.
3. Listings of an artifact root and of its kind folders are the union of
   both stores; a folder document the target lacks is read from the source.

Every write goes to the target; a write or delete inside a group the source
holds raises :class:`PermissionError` (:class:`~cytearc.errors.ReadOnlyStoreError`),
so the source is never modified. Source artifacts keep their ids, so the
target lists, loads, traces and reuses them unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from zarr.abc.store import Store as ZarrStore

from cytearc.errors import MountFormatError, ReadOnlyStoreError
from cytearc.storage.nodes import exact_fields

if TYPE_CHECKING:
    from zarr.abc.store import ByteRequest
    from zarr.core.buffer import Buffer, BufferPrototype

__all__ = ["MATRIX_SOURCE", "MatrixSource", "MountStore", "MountedAssay", "read_matrix_source"]

MATRIX_SOURCE: Final = "matrixSource"
"""The root attribute binding a mounted target to its source."""
_FIELDS: Final = ("location", "workspace", "assays")
_ASSAY_FIELDS: Final = ("datasetFingerprint", "countsFingerprint", "requiresTranspose")


def _exact(doc: object, fields: tuple[str, ...], *, what: str, where: str) -> dict[str, Any]:
    return exact_fields(
        doc,
        fields,
        what=what,
        where=where,
        error=MountFormatError,
        remedy="mount the source again with this release",
    )


@dataclass(frozen=True, kw_only=True)
class MountedAssay:
    """The identities a mounted assay's source had when it was mounted."""

    datasetFingerprint: str  # noqa: N815 (the record's field)
    countsFingerprint: str  # noqa: N815 (the record's field)
    requiresTranspose: bool  # noqa: N815 (the record's field)


@dataclass(frozen=True, kw_only=True)
class MatrixSource:
    """A target's ``matrixSource`` record.

    Parameters
    ----------
    location
        The source: an absolute local path or a URL (never credentials).
    workspace
        The source's workspace whose tables and artifacts are mounted, or None.
    assays
        Each mounted assay's identities.
    """

    location: str
    workspace: str | None
    assays: Mapping[str, MountedAssay]

    @classmethod
    def from_json(cls, doc: object, *, where: str) -> MatrixSource:
        """Read the record, refusing any other shape.

        Parameters
        ----------
        doc
            The attribute's value.
        where
            The target, for messages.

        Returns
        -------
        MatrixSource

        Raises
        ------
        MountFormatError
            A field is missing, unknown or of another type.
        """
        fields = _exact(doc, _FIELDS, what=f"attribute {MATRIX_SOURCE!r}", where=where)
        location, workspace, assays = fields["location"], fields["workspace"], fields["assays"]
        if not isinstance(location, str) or not (workspace is None or isinstance(workspace, str)):
            msg = f"{where}: attribute {MATRIX_SOURCE!r}: expected a string location and a string or null workspace, found {location!r} and {workspace!r}; mount the source again"
            raise MountFormatError(msg)
        if not isinstance(assays, Mapping) or not assays:
            msg = f"{where}: attribute {MATRIX_SOURCE!r}: 'assays' must map assay names to their identities, found {assays!r}; mount the source again"
            raise MountFormatError(msg)
        entries = {}
        for name, entry in assays.items():
            values = _exact(entry, _ASSAY_FIELDS, what=f"assay {name!r}", where=where)
            if not (
                isinstance(values["datasetFingerprint"], str)
                and isinstance(values["countsFingerprint"], str)
                and isinstance(values["requiresTranspose"], bool)
            ):
                msg = f"{where}: attribute {MATRIX_SOURCE!r}: assay {name!r}: expected two strings and a boolean, found {values!r}; mount the source again"
                raise MountFormatError(msg)
            entries[str(name)] = MountedAssay(**values)
        return cls(location=location, workspace=workspace, assays=entries)

    def to_json(self) -> dict[str, Any]:
        """The record as the root attribute stores it."""
        return {
            "location": self.location,
            "workspace": self.workspace,
            "assays": {
                name: {
                    "datasetFingerprint": a.datasetFingerprint,
                    "countsFingerprint": a.countsFingerprint,
                    "requiresTranspose": a.requiresTranspose,
                }
                for name, a in self.assays.items()
            },
        }


def read_matrix_source(attrs: Mapping[str, Any], *, where: str) -> MatrixSource | None:
    """The ``matrixSource`` record of a root's attributes, or None for a store that is no mount.

    Parameters
    ----------
    attrs
        The root's attributes.
    where
        The store, for messages.

    Returns
    -------
    MatrixSource or None

    Raises
    ------
    MountFormatError
        The attribute is present but not of the strict shape.
    """
    if MATRIX_SOURCE not in attrs:
        return None
    return MatrixSource.from_json(attrs[MATRIX_SOURCE], where=where)


class MountStore(ZarrStore):
    """The namespace of a mounted target: its own keys, with the source's artifact groups beneath.

    Parameters
    ----------
    target
        The target's Zarr store.
    source
        The source's Zarr store (its root).
    roots
        The artifact roots: each target key prefix (``artifacts``,
        ``RNA/artifacts``) to the source's (``ws/artifacts`` ...).
    where
        The target, for messages.
    """

    def __init__(
        self, target: ZarrStore, source: ZarrStore, *, roots: Mapping[str, str], where: str
    ) -> None:
        super().__init__(read_only=target.read_only)
        self.target, self.source = target, source
        self.roots = dict(roots)
        self.where = where

    def __eq__(self, value: object) -> bool:
        return (
            isinstance(value, MountStore)
            and value.target == self.target
            and value.source == self.source
            and value.roots == self.roots
        )

    def __hash__(self) -> int:
        return hash((id(self.target), id(self.source)))

    def _root_of(self, key: str) -> tuple[str, str] | None:
        """The artifact root holding ``key`` and the rest of the key, or None."""
        for root in self.roots:
            if key == root or key.startswith(f"{root}/"):
                return root, key[len(root) + 1 :]
        return None

    async def _place(self, key: str) -> tuple[ZarrStore, str]:
        """Where ``key`` is read: the target, or the source (and the key there)."""
        found = self._root_of(key)
        if found is None:
            return self.target, key
        root, rest = found
        parts = rest.split("/") if rest else []
        source_root = self.roots[root]
        if len(parts) >= 3:  # inside {kind}/{id}
            group = f"{root}/{parts[0]}/{parts[1]}"
            if await self.target.exists(f"{group}/zarr.json"):
                return self.target, key
            source_group = f"{source_root}/{parts[0]}/{parts[1]}"
            if await self.source.exists(f"{source_group}/zarr.json"):
                return self.source, f"{source_root}/{rest}"
            return self.target, key
        if await self.target.exists(key):
            return self.target, key
        return self.source, f"{source_root}/{rest}" if rest else source_root

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """The value of ``key`` from the store that holds it."""
        store, place = await self._place(key)
        return await store.get(place, prototype, byte_range)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        """Byte ranges of keys, each from the store that holds it."""
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        """Whether the store that holds ``key`` has it."""
        store, place = await self._place(key)
        return await store.exists(place)

    @property
    def supports_writes(self) -> bool:
        """Whether the target takes writes."""
        return self.target.supports_writes

    async def _refuse_source_group(self, key: str, operation: str) -> None:
        found = self._root_of(key)
        if found is None:
            return
        root, rest = found
        parts = rest.split("/") if rest else []
        if len(parts) < 2:
            return
        group = f"{parts[0]}/{parts[1]}"
        if not await self.target.exists(f"{root}/{group}/zarr.json") and await self.source.exists(
            f"{self.roots[root]}/{group}/zarr.json"
        ):
            msg = f"{self.where}/{root}/{group}: {operation} inside a group of the mounted source; the source is never modified - write new artifacts (they go to the target), or open the source itself"
            raise ReadOnlyStoreError(msg)

    async def set(self, key: str, value: Buffer) -> None:
        """Write ``key`` to the target; refused inside a source group."""
        await self._refuse_source_group(key, "writing")
        await self.target.set(key, value)

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        """Write ``key`` to the target unless either store has it."""
        if self._root_of(key) is not None and await self.exists(key):
            return
        await self._refuse_source_group(key, "writing")
        await self.target.set_if_not_exists(key, value)

    @property
    def supports_deletes(self) -> bool:
        """Whether the target deletes."""
        return self.target.supports_deletes

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the target; refused inside a source group."""
        await self._refuse_source_group(key, "deleting")
        await self.target.delete(key)

    @property
    def supports_listing(self) -> bool:
        """Listings are the union of both stores."""
        return True

    async def list(self) -> AsyncIterator[str]:
        """Every key: the target's, then the source's artifact keys the target lacks."""
        seen = set()
        async for key in self.target.list():
            seen.add(key)
            yield key
        for root, source_root in self.roots.items():
            async for key in self.source.list_prefix(f"{source_root}/"):
                mine = f"{root}/{key[len(source_root) + 1 :]}"
                if mine not in seen and (await self._place(mine))[0] is self.source:
                    yield mine

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Every key below ``prefix``."""
        async for key in self.list():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The members of a folder: the union in artifact roots and kind folders."""
        key = prefix.rstrip("/")
        found = self._root_of(key) if key else None
        if found is None:
            async for name in self.target.list_dir(prefix):
                yield name
            return
        root, rest = found
        if (
            len(rest.split("/") if rest else []) >= 2
        ):  # inside a group: the store holding it lists it
            store, place = await self._place(f"{key}/zarr.json")
            async for name in store.list_dir(place.removesuffix("/zarr.json")):
                yield name
            return
        names = set()
        async for name in self.target.list_dir(prefix):
            names.add(name)
            yield name
        async for name in self.source.list_dir(
            f"{self.roots[root]}/{rest}" if rest else self.roots[root]
        ):
            if name not in names:
                yield name

    def with_read_only(self, read_only: bool = False) -> MountStore:  # noqa: FBT001, FBT002 (zarr's signature)
        """The same namespace, its target opened read-only or writable."""
        return MountStore(
            self.target.with_read_only(read_only), self.source, roots=self.roots, where=self.where
        )

    def __repr__(self) -> str:
        return f"MountStore({self.where})"
