"""Where writers create stores: refusals checked before a source is read, then mode ``w-`` or ``w``.

A destination is a local path: a URL (``s3://``, ``gs://``, ``http://``,
``memory://`` ...) is refused with :class:`~cytearc.errors.RemoteDestinationError`,
since writing stores to object storage is not supported yet
(:func:`validate_local_path`). A destination without keys is created with
mode ``"w-"``, which refuses keys that appear after the check. With
``overwrite=True`` a destination holding keys is replaced (mode ``"w"``) only
when it is an unprepared CyteArc store: its root group has no prepared assay
and no ``matrixSource``, every top-level member is a group CyteArc writes,
and inside those groups every key is Zarr metadata (``zarr.json``), a chunk
of an array, or a run label claim. Anything else (a ``.DS_Store``, a
``notes.txt`` inside ``cellData/``) is refused with :class:`FileExistsError`
naming it. Local paths reach Zarr as :class:`pathlib.Path`, because Zarr
reads a string as a URL and would end the path at ``#``, ``?`` or ``;``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Final

import zarr

from cytearc.errors import DestinationExistsError, RemoteDestinationError
from cytearc.storage.nodes import PENDING_ATTRIBUTE, WORKSPACE_ATTRIBUTE

__all__ = [
    "CYTEARC_GROUPS",
    "ZARR_PARTIAL",
    "create_destination",
    "validate_destination",
    "validate_local_path",
]

CYTEARC_GROUPS: Final = frozenset(
    {"cellData", "matrices", "artifacts", "pipeline", "agent_results"}
)
_ZARR_METADATA: Final = ("zarr.json", ".zgroup", ".zarray")
_URL: Final = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]+):/")
"""A scheme of two or more characters then ``:/`` (one letter is a Windows drive)."""
_LABEL_CLAIM: Final = re.compile(
    r"(?:[^/]+/)?pipeline/runs/\.label-claims/[0-9a-f]{64}/[0-9]{8}\.json"
)
"""The one kind of key CyteArc writes that is not Zarr's: a label claim of the store or a workspace (:mod:`cytearc.pipeline.ledger`)."""


def validate_local_path(destination: str | os.PathLike[str], *, kind: str = "stores") -> Path:
    """``destination`` as a local :class:`~pathlib.Path`, refusing a URL.

    A string such as ``s3://bucket/ds.zarr`` (any scheme: ``gs``, ``http``,
    ``memory`` ...) is refused, and so is a path whose first component is a
    scheme (``Path("s3://bucket")`` reads as ``s3:/bucket``), rather than
    written below the working directory as ``./s3:/bucket/...``.

    Parameters
    ----------
    destination
        Where a writer will create its output.
    kind
        What the writer writes, for the message (``"stores"``, ``"cubes"``).

    Returns
    -------
    pathlib.Path
        ``destination``, made absolute.

    Raises
    ------
    RemoteDestinationError
        If ``destination`` is a URL.

    Examples
    --------
    >>> validate_local_path("s3://bucket/ds.zarr")
    Traceback (most recent call last):
      ...
    cytearc.errors.RemoteDestinationError: s3://bucket/ds.zarr: a URL (scheme 's3'), where a local path is expected; writing stores to object storage is not supported yet - write to a local path and upload it
    """
    text = os.fspath(destination)
    match = _URL.match(text)
    if match is not None:
        msg = (
            f"{text}: a URL (scheme {match['scheme']!r}), where a local path is expected; writing "
            f"{kind} to object storage is not supported yet - write to a local path and upload it"
        )
        raise RemoteDestinationError(msg)
    return Path(text).absolute()


def _root_attributes(path: Path) -> dict[str, object] | None:
    node = _node(path)
    if node is None or node.get("node_type") != "group":
        return None
    attrs = node.get("attributes", {})
    return attrs if isinstance(attrs, dict) else None


def _node(path: Path) -> dict[str, object] | None:
    """The ``zarr.json`` document of the node at ``path``, or None."""
    try:
        doc = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


ZARR_PARTIAL: Final = re.compile(r"[^/]+\.[0-9a-f]{32}\.partial")
"""The temporary file of zarr's atomic write (``path.with_suffix(".<uuid>.partial")``), left by a kill."""


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


def _foreign_key(folder: Path, store: Path) -> str | None:
    """The first key below a group ``folder`` that is neither Zarr metadata nor a chunk, or None."""
    for entry in sorted(folder.iterdir()):
        key = entry.relative_to(store).as_posix()
        if entry.is_file() and (
            entry.name == "zarr.json"
            or _LABEL_CLAIM.fullmatch(key)
            or ZARR_PARTIAL.fullmatch(entry.name)
        ):
            continue
        node = _node(entry) if entry.is_dir() and not entry.is_symlink() else None
        if node is None:
            if entry.is_dir() and not entry.is_symlink() and _only_partials(entry):
                continue  # folders zarr made for a node whose first zarr.json a kill interrupted
            return key
        if node.get("node_type") == "group":
            found = _foreign_key(entry, store)
        elif node.get("node_type") == "array":
            found = _foreign_array_key(entry, node, store)
        else:
            found = f"{key}/zarr.json"
        if found is not None:
            return found
    return None


def _only_partials(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but folders and zarr's ``.partial`` files (no data)."""
    return all(
        (p.is_dir() and not p.is_symlink()) or (p.is_file() and ZARR_PARTIAL.fullmatch(p.name))
        for p in folder.rglob("*")
    )


def _foreign_array_key(folder: Path, node: dict[str, object], store: Path) -> str | None:
    for directory, folders, files in os.walk(folder, followlinks=False):
        folders.sort()
        for name in sorted(files):
            path = Path(directory) / name
            key = path.relative_to(folder).as_posix()
            if (
                key != "zarr.json"
                and not _is_chunk_key(key, node)
                and not ZARR_PARTIAL.fullmatch(name)
            ):
                return path.relative_to(store).as_posix()
        links = [name for name in folders if (Path(directory) / name).is_symlink()]
        if links:
            return (Path(directory) / links[0]).relative_to(store).as_posix()
    return None


def _replaceable(path: Path) -> str | None:
    """Why ``path`` may not be replaced, or None when it is an unprepared CyteArc store."""
    attrs = _root_attributes(path)
    if attrs is None:
        return "it has no Zarr root group"
    if attrs.get("cytearc:prepared"):
        return f"it holds prepared assays {attrs['cytearc:prepared']}"
    if "matrixSource" in attrs:
        return "it is a mounted store (matrixSource)"
    refusals = (_member_refusal(entry, path) for entry in sorted(path.iterdir()))
    return next((why for why in refusals if why is not None), None)


def _workspace_refusal(entry: Path, member: dict[str, object], store: Path) -> str | None:
    """Why the workspace ``entry`` may not be replaced: prepared assays, or a member CyteArc does not write."""
    if member.get("cytearc:prepared"):
        return f"its workspace {entry.name!r} holds prepared assays {member['cytearc:prepared']}"
    inner = (_member_refusal(e, store, nested=True) for e in sorted(entry.iterdir()))
    return next((why for why in inner if why is not None), None)


def _member_refusal(entry: Path, store: Path, *, nested: bool = False) -> str | None:
    """Why the top-level ``entry`` of ``store`` (or of a workspace, ``nested``) is not one CyteArc writes, or None."""
    if entry.name == "zarr.json" or (entry.is_file() and ZARR_PARTIAL.fullmatch(entry.name)):
        return None
    member = _root_attributes(entry) if entry.is_dir() and not entry.is_symlink() else None
    if member is None:
        return f"{entry.relative_to(store).as_posix()!r} is not a Zarr group CyteArc writes"
    if WORKSPACE_ATTRIBUTE in member and not nested:
        return _workspace_refusal(entry, member, store)
    if (
        entry.name not in CYTEARC_GROUPS
        and not member.get("is_assay")
        and PENDING_ATTRIBUTE not in member
    ):
        return f"{entry.relative_to(store).as_posix()!r} is not a group CyteArc writes"
    foreign = _foreign_key(entry, store)
    if foreign is not None:
        return f"{foreign!r} is neither Zarr metadata nor an array's chunk, so CyteArc did not write it"
    return None


def validate_destination(destination: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """Refuse a destination a writer may not create or replace; return it as a Path.

    Parameters
    ----------
    destination
        A local directory.
    overwrite
        Whether an unprepared CyteArc store there may be replaced.

    Returns
    -------
    pathlib.Path
        The destination, absolute.

    Raises
    ------
    RemoteDestinationError
        If the destination is a URL (see :func:`validate_local_path`).
    DestinationExistsError
        The destination lies inside another Zarr hierarchy or is an assay
        group of another store; or it holds keys and ``overwrite`` is False,
        or it is not a replaceable store (a key CyteArc does not write is
        named).
    """
    path = validate_local_path(destination)
    for parent in path.parents:
        if any((parent / name).exists() for name in _ZARR_METADATA):
            msg = f"{path}: lies inside the Zarr hierarchy at {parent}; expected a destination outside any Zarr hierarchy - choose one outside it"
            raise DestinationExistsError(msg)
    attrs = _root_attributes(path)
    if attrs is not None and attrs.get("is_assay"):
        msg = f"{path}: expected a new directory or a CyteArc store, found an assay group of another store; choose the store's own directory or a new one"
        raise DestinationExistsError(msg)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        if not overwrite:
            msg = f"{path}: already exists and holds data; pass overwrite=True to replace a CyteArc store"
            raise DestinationExistsError(msg)
        why = _replaceable(path) if path.is_dir() else "it is a file"
        if why is not None:
            msg = f"{path}: refusing to replace it: {why}; move what you keep out of it, or choose another destination"
            raise DestinationExistsError(msg)
    return path


def create_destination(path: Path, *, overwrite: bool) -> zarr.Group:
    """Create the root group: mode ``w-`` (refusing keys that appeared) or ``w`` when replacing.

    Parameters
    ----------
    path
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
        Keys appeared at ``path`` since it was checked, and ``overwrite`` is false.
    """
    replacing = overwrite and path.exists() and any(path.iterdir())
    try:
        return zarr.open_group(store=path, mode="w" if replacing else "w-", zarr_format=3)
    except FileExistsError as exc:
        msg = f"{path}: keys appeared after the destination was checked; nothing was written"
        raise DestinationExistsError(msg) from exc
