"""Where writers create stores: refusals checked before a source is read, then mode ``w-`` or ``w``.

A destination without keys is created with mode ``"w-"``, which refuses keys
that appear after the check. With ``overwrite=True`` a destination holding
keys is replaced (mode ``"w"``) only when it is an unprepared CyteArc store:
its root group has no prepared assay and no ``matrixSource``, and every
top-level member is a group CyteArc writes. Anything else is refused with
:class:`FileExistsError`. Local paths reach Zarr as :class:`pathlib.Path`,
because Zarr reads a string as a URL and would end the path at ``#``, ``?``
or ``;``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import zarr

from cytearc.errors import DestinationExistsError

__all__ = ["create_destination", "validate_destination"]

CYTEARC_GROUPS: Final = frozenset(
    {"cellData", "matrices", "artifacts", "pipeline", "agent_results"}
)
_ZARR_METADATA: Final = ("zarr.json", ".zgroup", ".zarray")


def _root_attributes(path: Path) -> dict[str, object] | None:
    try:
        doc = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("node_type") != "group":
        return None
    attrs = doc.get("attributes", {})
    return attrs if isinstance(attrs, dict) else None


def _replaceable(path: Path) -> str | None:
    """Why ``path`` may not be replaced, or None when it is an unprepared CyteArc store."""
    attrs = _root_attributes(path)
    if attrs is None:
        return "it has no Zarr root group"
    if attrs.get("cytearc:prepared"):
        return f"it holds prepared assays {attrs['cytearc:prepared']}"
    if "matrixSource" in attrs:
        return "it is a mounted store (matrixSource)"
    for entry in path.iterdir():
        if entry.name == "zarr.json":
            continue
        member = _root_attributes(entry) if entry.is_dir() else None
        if member is None:
            return f"{entry.name!r} is not a Zarr group CyteArc writes"
        if (
            entry.name not in CYTEARC_GROUPS
            and not member.get("is_assay")
            and "cytearc:pending_assay" not in member
        ):
            return f"{entry.name!r} is not a group CyteArc writes"
    return None


def validate_destination(destination: str | Path, *, overwrite: bool) -> Path:
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
        The destination.

    Raises
    ------
    DestinationExistsError
        The destination lies inside another Zarr hierarchy or is an assay
        group of another store; or it holds keys and ``overwrite`` is False,
        or it is not a replaceable store.
    """
    path = Path(destination).absolute()
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
            msg = f"{path}: refusing to replace it: {why}"
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
