"""Groups of a store, found or refused with the store's error."""

from __future__ import annotations

import json
from typing import Any, Final

import zarr

from cytearc.errors import StoreFormatError

__all__ = ["STORE_FORMAT", "STORE_FORMAT_VERSION", "child_group", "child_node", "member_names"]

STORE_FORMAT: Final = "cytearc.store"
"""The root attribute ``cytearc:format`` of every CyteArc store."""

STORE_FORMAT_VERSION: Final = 1
"""The root attribute ``cytearc:formatVersion`` this release reads and writes."""


_METADATA_ERRORS: Final = (
    json.JSONDecodeError,
    UnicodeDecodeError,
    ValueError,
    TypeError,
    KeyError,
)
"""What zarr raises for a ``zarr.json`` that is not JSON, not UTF-8 or not valid metadata."""


def child_node(parent: zarr.Group, name: str, *, where: str) -> zarr.Array[Any] | zarr.Group | None:
    """``parent.get(name)``, with a damaged ``zarr.json`` refused by name.

    Parameters
    ----------
    parent
        The group to look in.
    name
        The child's name (or a path below ``parent``).
    where
        ``parent``'s location, for the message.

    Returns
    -------
    zarr.Array or zarr.Group or None
        The child, or None when there is none.

    Raises
    ------
    StoreFormatError
        The child's ``zarr.json`` cannot be read as Zarr metadata.
    """
    try:
        return parent.get(name)
    except _METADATA_ERRORS as error:
        msg = (
            f"{where}/{name}/zarr.json: cannot be read as Zarr metadata ({type(error).__name__}: "
            f"{error}); the store is damaged - run `cytearc verify`, then restore it from a copy or "
            "import the source again"
        )
        raise StoreFormatError(msg) from error


def member_names(group: zarr.Group, *, where: str) -> set[str]:
    """The names of ``group``'s members, with a damaged member ``zarr.json`` refused by name.

    Parameters
    ----------
    group
        The group.
    where
        Its location, for the message.

    Returns
    -------
    set of str
        The member names.

    Raises
    ------
    StoreFormatError
        A member's ``zarr.json`` cannot be read as Zarr metadata.
    """
    try:
        return set(group.keys())
    except _METADATA_ERRORS as error:
        msg = (
            f"{where}: a member's zarr.json cannot be read as Zarr metadata ({type(error).__name__}: "
            f"{error}); the store is damaged - run `cytearc verify`, then restore it from a copy or "
            "import the source again"
        )
        raise StoreFormatError(msg) from error


def child_group(parent: zarr.Group, name: str, *, where: str) -> zarr.Group:
    """The group ``name`` below ``parent``.

    Parameters
    ----------
    parent
        The group to look in.
    name
        The child's name.
    where
        ``parent``'s location, for the message.

    Returns
    -------
    zarr.Group
        The child group.

    Raises
    ------
    StoreFormatError
        There is no group of that name (absent, or an array), or its
        ``zarr.json`` is damaged.
    """
    node = child_node(parent, name, where=where)
    if not isinstance(node, zarr.Group):
        msg = f"{where}/{name}: expected a group, found {'nothing' if node is None else 'an array'}; the store is incomplete - import it again"
        raise StoreFormatError(msg)
    return node
