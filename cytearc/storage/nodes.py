"""Groups of a store, found or refused with the store's error."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import aiohttp
import zarr
from botocore.exceptions import BotoCoreError
from zarr.core.sync import sync
from zarr.errors import ZarrUserWarning

from cytearc.errors import StoreAccessError, StoreFormatError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DERIVED_ATTRIBUTE",
    "PENDING_ATTRIBUTE",
    "STORE_FORMAT",
    "STORE_FORMAT_VERSION",
    "WORKSPACE_ATTRIBUTE",
    "child_group",
    "child_node",
    "create_group_top_down",
    "member_names",
]

STORE_FORMAT: Final = "cytearc.store"
"""The root attribute ``cytearc:format`` of every CyteArc store."""

STORE_FORMAT_VERSION: Final = 1
"""The root attribute ``cytearc:formatVersion`` this release reads and writes."""

PENDING_ATTRIBUTE: Final = "cytearc:pending_assay"
"""Marks a derived assay still being written (it has no ``is_assay``): assay scans skip it."""

WORKSPACE_ATTRIBUTE: Final = "cytearc:workspace"
"""Marks a complete workspace group: its own cell table, feature tables, artifacts and runs."""

DERIVED_ATTRIBUTE: Final = "cytearc:derived"
"""How a derived assay was derived; derived assays are left out of the dataset fingerprint."""


ACCESS_ERRORS: Final = (OSError, TimeoutError, aiohttp.ClientError, BotoCoreError)
"""What a read raises when the storage does not answer: the network, the endpoint, the disk."""


def exact_fields(
    doc: object,
    fields: tuple[str, ...],
    *,
    what: str,
    where: str,
    error: Callable[[str], Exception],
    remedy: str,
) -> dict[str, Any]:
    """``doc`` as a mapping of exactly ``fields``, for records of a strict, unversioned shape.

    Parameters
    ----------
    doc
        The record's JSON.
    fields
        The fields it holds, no more and no fewer.
    what
        The record, for the message.
    where
        The store, for the message.
    error
        The error class to raise.
    remedy
        What to do, for the message.

    Returns
    -------
    dict
        The record.

    Raises
    ------
    Exception
        ``error(message)``: ``doc`` is not a mapping, or a field is missing or unknown.

    Examples
    --------
    >>> exact_fields({"a": 1, "c": 2}, ("a", "b"), what="x", where="s", error=ValueError, remedy="fix it")
    Traceback (most recent call last):
      ...
    ValueError: s: x: expected exactly the fields ['a', 'b'], found missing ['b'] and unknown ['c']; this shape is strict and unversioned - fix it
    """
    if not isinstance(doc, Mapping):
        msg = f"{where}: {what}: expected an object, found {type(doc).__name__}; {remedy}"
        raise error(msg)
    missing = [k for k in fields if k not in doc]
    unknown = sorted(set(doc) - set(fields))
    if missing or unknown:
        found = " and ".join(
            part
            for part in (
                f"missing {missing}" if missing else "",
                f"unknown {unknown}" if unknown else "",
            )
            if part
        )
        msg = f"{where}: {what}: expected exactly the fields {list(fields)}, found {found}; this shape is strict and unversioned - {remedy}"
        raise error(msg)
    return dict(doc)


def access_error(where: str, what: str, error: BaseException) -> StoreAccessError:
    """The named error of a read of ``what`` at ``where`` that the storage did not answer.

    Parameters
    ----------
    where
        The node or array read.
    what
        What was read, for the message.
    error
        The error of the read (s3fs's, after its retries).

    Returns
    -------
    StoreAccessError
        To raise ``from error``.
    """
    msg = (
        f"{where}: {what} could not be read ({type(error).__name__}: {error}); the storage did "
        "not answer or broke off after its retries - check the network, the endpoint and the "
        "credentials, then run again (nothing was published from this read)"
    )
    return StoreAccessError(msg)


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
        The child's ``zarr.json`` cannot be read as Zarr metadata, or its
        attributes are not an object.
    """
    try:
        node = parent.get(name)
    except StoreAccessError:
        raise
    except ACCESS_ERRORS as error:
        raise access_error(f"{where}/{name}", "its zarr.json", error) from error
    except _METADATA_ERRORS as error:
        msg = (
            f"{where}/{name}/zarr.json: cannot be read as Zarr metadata ({type(error).__name__}: "
            f"{error}); the store is damaged - run `cytearc verify`, then restore it from a copy or "
            "import the source again"
        )
        raise StoreFormatError(msg) from error
    if (node is None and _has_metadata(parent, name)) or (
        node is not None and node.metadata.zarr_format != 3
    ):
        msg = (
            f"{where}/{name}/zarr.json: is not Zarr v3 metadata of an array or a group (zarr_format "
            "or node_type damaged); the store is damaged - run `cytearc verify`, then restore it "
            "from a copy or import the source again"
        )
        raise StoreFormatError(msg)
    attributes: object = None if node is None else node.metadata.attributes
    if node is not None and not isinstance(attributes, Mapping):
        msg = (
            f"{where}/{name}/zarr.json: 'attributes' is expected to be an object, found "
            f"{type(attributes).__name__}; the store is damaged - run `cytearc verify`, "
            "then restore it from a copy or import the source again"
        )
        raise StoreFormatError(msg)
    return node


def _has_metadata(parent: zarr.Group, name: str) -> bool:
    key = f"{parent.path}/{name}/zarr.json" if parent.path else f"{name}/zarr.json"
    return bool(sync(parent.store.exists(key)))


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
        with warnings.catch_warnings():
            # a writer killed inside zarr's atomic write leaves <key>.<uuid>.partial: nothing was published
            warnings.filterwarnings(
                "ignore", r"Object at .*\.partial is not recognized", ZarrUserWarning
            )
            return set(group.keys())
    except StoreAccessError:
        raise
    except ACCESS_ERRORS as error:
        raise access_error(where, "its member listing", error) from error
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


def create_group_top_down(
    root: zarr.Group, path: str, *, attributes: dict[str, Any] | None = None
) -> zarr.Group:
    """Create the group at ``path`` below ``root``, each missing ancestor's ``zarr.json`` first.

    Zarr writes a new node's metadata and its missing parents' concurrently,
    so a process killed in between leaves a group without its parent's
    ``zarr.json``, which ``cytearc verify`` reports as damage. Here each
    level is complete before anything below it is written.

    Parameters
    ----------
    root
        The group ``path`` is relative to.
    path
        ``/``-separated names.
    attributes
        The new group's attributes.

    Returns
    -------
    zarr.Group
        The new group.
    """
    *ancestors, name = path.split("/")
    group = root
    for part in ancestors:
        group = group.require_group(part)
    return group.create_group(name, attributes=attributes)
