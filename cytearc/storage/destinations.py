"""Where writers create stores: refusals checked before a source is read, then mode ``w-`` or ``w``.

A destination is a local path or an fsspec URL (``s3://``, ``gs://``,
``memory://`` ...; :mod:`cytepool.locations`); ``http(s)://`` is read-only
and refused with :class:`~cytearc.errors.RemoteDestinationError`. A
destination without keys is created with mode ``"w-"``, which refuses keys
that appear after the check. With ``overwrite=True`` a destination holding
keys is replaced (mode ``"w"``) only when it is an unprepared CyteArc store:
its root group has no prepared assay and no ``matrixSource``, every top-level
member is a group CyteArc writes, and inside those groups every key is Zarr
metadata (``zarr.json``), a chunk of an array, or a run label claim. Anything
else (a ``.DS_Store``, a ``notes.txt`` inside ``cellData/``) is refused with
:class:`FileExistsError` naming it. The same checks read a local folder and
the object listing of a URL. Local paths reach Zarr as :class:`pathlib.Path`,
because Zarr reads a string as a URL and would end the path at ``#``, ``?``
or ``;``.

Object stores have no rename: a store written there is built in place, and
its root attribute ``cytearc:complete`` turns true with the last write, so a
reader refuses it until then (``docs/store-format.md``, *Object stores*).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import zarr

from cytearc.errors import DestinationExistsError, RemoteDestinationError
from cytearc.storage.nodes import PENDING_ATTRIBUTE, WORKSPACE_ATTRIBUTE
from cytepool.locations import Location, as_location

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "CYTEARC_GROUPS",
    "ZARR_PARTIAL",
    "create_destination",
    "validate_destination",
    "validate_local_path",
    "writable_location",
]

CYTEARC_GROUPS: Final = frozenset(
    {"cellData", "matrices", "artifacts", "pipeline", "agent_results", "_composite"}
)
_ZARR_METADATA: Final = ("zarr.json", ".zgroup", ".zarray")
_LABEL_CLAIM: Final = re.compile(
    r"(?:[^/]+/)?pipeline/runs/\.label-claims/[0-9a-f]{64}/[0-9]{8}\.json"
)
"""The one kind of key CyteArc writes that is not Zarr's: a label claim of the store or a workspace (:mod:`cytearc.pipeline.ledger`)."""
ZARR_PARTIAL: Final = re.compile(r"[^/]+\.[0-9a-f]{32}\.partial")
"""The temporary file of zarr's atomic write (``path.with_suffix(".<uuid>.partial")``), left by a kill."""


def writable_location(
    destination: str | os.PathLike[str] | Location,
    *,
    storage_options: Mapping[str, Any] | None = None,
    kind: str = "stores",
) -> Location:
    """``destination`` as a :class:`~cytepool.locations.Location` a writer may write to.

    Parameters
    ----------
    destination
        A local path or an fsspec URL.
    storage_options
        The options of the URL's fsspec filesystem.
    kind
        What the writer writes, for the message (``"stores"``, ``"cubes"``).

    Returns
    -------
    cytepool.locations.Location
        A local path made absolute, or the URL with its options.

    Raises
    ------
    RemoteDestinationError
        The URL's protocol is read-only (``http(s)://``), or a path is a URL
        that :class:`~pathlib.Path` flattened (``s3:/bucket``).

    Examples
    --------
    >>> writable_location("memory://bucket/ds.zarr").url
    'memory://bucket/ds.zarr'
    >>> writable_location("https://example.org/ds.zarr")
    Traceback (most recent call last):
      ...
    cytearc.errors.RemoteDestinationError: https://example.org/ds.zarr: the https protocol is read-only, so stores cannot be written there; write to a local path or an object store (s3://, gs://, memory://)
    """
    location = as_location(destination, storage_options, error=RemoteDestinationError)
    if location.read_only:
        msg = f"{location}: the {location.protocol} protocol is read-only, so {kind} cannot be written there; write to a local path or an object store (s3://, gs://, memory://)"
        raise RemoteDestinationError(msg)
    return location


def validate_local_path(destination: str | os.PathLike[str], *, kind: str = "files") -> Path:
    """``destination`` as an absolute local :class:`~pathlib.Path`, refusing a URL.

    For writers whose output format needs a local file system.

    Parameters
    ----------
    destination
        Where a writer will create its output.
    kind
        What the writer writes, for the message.

    Returns
    -------
    pathlib.Path
        ``destination``, made absolute.

    Raises
    ------
    RemoteDestinationError
        If ``destination`` is a URL.
    """
    location = as_location(destination, error=RemoteDestinationError)
    if location.path is None:
        msg = f"{location}: a URL (scheme {location.protocol!r}), where a local path is expected; {kind} are written to local paths - write to a local path and upload it"
        raise RemoteDestinationError(msg)
    return location.path


class _Tree:
    """The keys below a destination: its files (objects), and on a local disk its symlinked folders.

    A local folder and an object store's listing are checked alike; empty
    local folders hold no key, as on an object store.
    """

    def __init__(self, location: Location) -> None:
        self.location = location
        self.links: set[str] = set()
        if location.path is not None:
            root = location.path
            files: list[str] = []
            if root.is_dir():
                for directory, folders, names in os.walk(root, followlinks=False):
                    here = os.path.relpath(directory, root).replace(os.sep, "/")
                    prefix = "" if here == "." else f"{here}/"
                    files.extend(prefix + n for n in names)
                    self.links.update(
                        prefix + f for f in folders if Path(directory, f).is_symlink()
                    )
            self.files = frozenset(files)
        else:
            self.files = frozenset(location.keys())
        self._dirs = {
            k.rsplit("/", i)[0]
            for k in (*self.files, *self.links)
            for i in range(1, k.count("/") + 1)
        }

    def children(self, folder: str) -> list[str]:
        """The names directly below ``folder`` (``""`` for the root), sorted."""
        prefix = f"{folder}/" if folder else ""
        names = {
            k[len(prefix) :].split("/", 1)[0]
            for k in (*self.files, *self.links)
            if k.startswith(prefix)
        }
        return sorted(names)

    def is_dir(self, key: str) -> bool:
        return key in self._dirs and key not in self.links

    def below(self, folder: str) -> list[str]:
        """Every file and link below ``folder``, sorted."""
        prefix = f"{folder}/"
        return sorted(k for k in (*self.files, *self.links) if k.startswith(prefix))

    def node(self, folder: str) -> dict[str, object] | None:
        """The ``zarr.json`` document of the node at ``folder`` (``""``: the root), or None."""
        key = f"{folder}/zarr.json" if folder else "zarr.json"
        if key not in self.files:
            return None
        try:
            raw = self.location.read_bytes(key)
            doc = json.loads(raw) if raw is not None else None
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def group_attributes(self, folder: str) -> dict[str, object] | None:
        node = self.node(folder)
        if node is None or node.get("node_type") != "group":
            return None
        attrs = node.get("attributes", {})
        return attrs if isinstance(attrs, dict) else None


def _is_chunk_key(key: str, node: dict[str, object]) -> bool:
    """Whether ``key`` (relative to an array's folder) is a chunk key of its encoding."""
    encoding = node.get("chunk_key_encoding")
    name = encoding.get("name") if isinstance(encoding, dict) else "default"
    configuration = encoding.get("configuration", {}) if isinstance(encoding, dict) else {}
    separator = (
        configuration.get("separator", "/" if name == "default" else ".")
        if isinstance(configuration, dict)
        else "/"
    )
    parts = key.split(separator)
    if name == "default":
        return parts[0] == "c" and all(part.isdigit() for part in parts[1:])
    return name == "v2" and all(part.isdigit() for part in parts)


def _foreign_key(tree: _Tree, folder: str) -> str | None:
    """The first key below a group ``folder`` that is neither Zarr metadata nor a chunk, or None."""
    for name in tree.children(folder):
        key = f"{folder}/{name}"
        if key in tree.files and (
            name == "zarr.json" or _LABEL_CLAIM.fullmatch(key) or ZARR_PARTIAL.fullmatch(name)
        ):
            continue
        node = tree.node(key) if tree.is_dir(key) else None
        if node is None:
            if tree.is_dir(key) and _only_partials(tree, key):
                continue  # folders zarr made for a node whose first zarr.json a kill interrupted
            return key
        if node.get("node_type") == "group":
            found = _foreign_key(tree, key)
        elif node.get("node_type") == "array":
            found = _foreign_array_key(tree, key, node)
        else:
            found = f"{key}/zarr.json"
        if found is not None:
            return found
    return None


def _only_partials(tree: _Tree, folder: str) -> bool:
    """Whether ``folder`` holds nothing but zarr's ``.partial`` files (no data, no links)."""
    return all(
        k in tree.files and ZARR_PARTIAL.fullmatch(k.rsplit("/", 1)[-1]) for k in tree.below(folder)
    )


def _foreign_array_key(tree: _Tree, folder: str, node: dict[str, object]) -> str | None:
    for key in tree.below(folder):
        relative = key[len(folder) + 1 :]
        if key in tree.links or (
            relative != "zarr.json"
            and not _is_chunk_key(relative, node)
            and not ZARR_PARTIAL.fullmatch(relative.rsplit("/", 1)[-1])
        ):
            return key
    return None


def _replaceable(tree: _Tree) -> str | None:
    """Why the destination may not be replaced, or None when it is an unprepared CyteArc store."""
    attrs = tree.group_attributes("")
    if attrs is None:
        return "it has no Zarr root group"
    if attrs.get("cytearc:prepared"):
        return f"it holds prepared assays {attrs['cytearc:prepared']}"
    if "matrixSource" in attrs:
        return "it is a mounted store (matrixSource)"
    refusals = (_member_refusal(tree, name) for name in tree.children(""))
    return next((why for why in refusals if why is not None), None)


def _workspace_refusal(tree: _Tree, key: str, member: dict[str, object]) -> str | None:
    """Why the workspace ``key`` may not be replaced: prepared assays, or a member CyteArc does not write."""
    if member.get("cytearc:prepared"):
        return f"its workspace {key!r} holds prepared assays {member['cytearc:prepared']}"
    inner = (_member_refusal(tree, f"{key}/{n}", nested=True) for n in tree.children(key))
    return next((why for why in inner if why is not None), None)


def _member_refusal(tree: _Tree, key: str, *, nested: bool = False) -> str | None:
    """Why the top-level ``key`` of a store (or of a workspace, ``nested``) is not one CyteArc writes, or None."""
    name = key.rsplit("/", 1)[-1]
    if key in tree.files and (name == "zarr.json" or ZARR_PARTIAL.fullmatch(name)):
        return None
    member = tree.group_attributes(key) if tree.is_dir(key) else None
    if member is None:
        return f"{key!r} is not a Zarr group CyteArc writes"
    if WORKSPACE_ATTRIBUTE in member and not nested:
        return _workspace_refusal(tree, key, member)
    if (
        name not in CYTEARC_GROUPS
        and not member.get("is_assay")
        and PENDING_ATTRIBUTE not in member
    ):
        return f"{key!r} is not a group CyteArc writes"
    foreign = _foreign_key(tree, key)
    if foreign is not None:
        return f"{foreign!r} is neither Zarr metadata nor an array's chunk, so CyteArc did not write it"
    return None


def _enclosing_hierarchy(location: Location) -> str | None:
    """The nearest folder above ``location`` that holds Zarr metadata, or None."""
    fs, path = location.filesystem()
    parts = path.rstrip("/").split("/")
    scheme = "" if location.is_local else f"{location.protocol}://"
    for n in range(len(parts) - 1, 0, -1):
        parent = "/".join(parts[:n]) or "/"
        if any(fs.exists(f"{parent.rstrip('/')}/{name}") for name in _ZARR_METADATA):
            return scheme + parent
    return None


def validate_destination(
    destination: str | os.PathLike[str] | Location,
    *,
    overwrite: bool,
    storage_options: Mapping[str, Any] | None = None,
) -> Location:
    """Refuse a destination a writer may not create or replace; return its location.

    Parameters
    ----------
    destination
        A local directory or an fsspec URL (see :func:`writable_location`).
    overwrite
        Whether an unprepared CyteArc store there may be replaced.
    storage_options
        The options of the URL's fsspec filesystem.

    Returns
    -------
    cytepool.locations.Location
        The destination: a local path made absolute, or the URL.

    Raises
    ------
    RemoteDestinationError
        The URL's protocol is read-only (see :func:`writable_location`).
    DestinationExistsError
        The destination lies inside another Zarr hierarchy or is an assay
        group of another store; or it holds keys and ``overwrite`` is False,
        or it is not a replaceable store (a key CyteArc does not write is
        named).
    """
    location = writable_location(destination, storage_options=storage_options)
    enclosing = _enclosing_hierarchy(location)
    if enclosing is not None:
        msg = f"{location}: lies inside the Zarr hierarchy at {enclosing}; expected a destination outside any Zarr hierarchy - choose one outside it"
        raise DestinationExistsError(msg)
    fs, path = location.filesystem()
    if fs.isfile(path):
        if not overwrite:
            msg = f"{location}: already exists and holds data; pass overwrite=True to replace a CyteArc store"
            raise DestinationExistsError(msg)
        msg = f"{location}: refusing to replace it: it is a file; move what you keep out of it, or choose another destination"
        raise DestinationExistsError(msg)
    tree = _Tree(location)
    attrs = tree.group_attributes("")
    if attrs is not None and attrs.get("is_assay"):
        msg = f"{location}: expected a new directory or a CyteArc store, found an assay group of another store; choose the store's own directory or a new one"
        raise DestinationExistsError(msg)
    if tree.files or tree.links:
        if not overwrite:
            msg = f"{location}: already exists and holds data; pass overwrite=True to replace a CyteArc store"
            raise DestinationExistsError(msg)
        why = _replaceable(tree)
        if why is not None:
            msg = f"{location}: refusing to replace it: {why}; move what you keep out of it, or choose another destination"
            raise DestinationExistsError(msg)
    return location


def create_destination(location: Location, *, overwrite: bool) -> zarr.Group:
    """Create the root group: mode ``w-`` (refusing keys that appeared) or ``w`` when replacing.

    Parameters
    ----------
    location
        The destination, checked by :func:`validate_destination`.
    overwrite
        Replace what is there.

    Returns
    -------
    zarr.Group
        The new, empty root group.

    Raises
    ------
    DestinationExistsError
        Keys appeared at the destination since it was checked, and ``overwrite`` is false.
    """
    tree = _Tree(location)
    replacing = overwrite and bool(tree.files or tree.links)
    store = location.zarr_store(read_only=False)
    try:
        return zarr.open_group(store=store, mode="w" if replacing else "w-", zarr_format=3)
    except (FileExistsError, zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError) as exc:
        msg = f"{location}: keys appeared after the destination was checked; nothing was written"
        raise DestinationExistsError(msg) from exc
