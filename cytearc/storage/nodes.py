"""Groups of a store, found or refused with the store's error."""

from __future__ import annotations

from typing import Final

import zarr

from cytearc.errors import StoreFormatError

__all__ = ["STORE_FORMAT", "STORE_FORMAT_VERSION", "child_group"]

STORE_FORMAT: Final = "cytearc.store"
"""The root attribute ``cytearc:format`` of every CyteArc store."""

STORE_FORMAT_VERSION: Final = 1
"""The root attribute ``cytearc:formatVersion`` this release reads and writes."""


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
        There is no group of that name (absent, or an array).
    """
    node = parent.get(name)
    if not isinstance(node, zarr.Group):
        msg = f"{where}/{name}: expected a group, found {'nothing' if node is None else 'an array'}; the store is incomplete - import it again"
        raise StoreFormatError(msg)
    return node
