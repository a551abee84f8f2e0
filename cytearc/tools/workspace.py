"""``create_workspace``: a named group of a store with its own tables, artifacts and runs.

A workspace holds a cell table, each assay's group with its feature table,
``artifacts`` and ``pipeline``, and shares the store's count matrices
(``matrices/{assay}`` at the root): a second analysis of the same counts,
with its own QC keys and runs, that never touches the root's.
:class:`~cytearc.DataStore` opens one with ``workspace="name"``.

A new workspace starts from the tables of the store (or workspace) it is
created from, without what an analysis wrote: the import's cell columns,
``I``, the membership columns, and each assay's feature table. Its marker
``cytearc:workspace`` is written last, with the assay types, so a killed
creation leaves a group that does not open as a workspace.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import zarr

from cytearc.errors import DestinationExistsError, OperationArgumentError, ReadOnlyStoreError
from cytearc.storage.destinations import CYTEARC_GROUPS
from cytearc.storage.nodes import PENDING_ATTRIBUTE, child_node
from cytearc.storage.store import workspace_groups
from cytearc.tools._writing import read_carried, write_workspace

if TYPE_CHECKING:
    from cytearc.storage.store import Store

__all__ = ["create_workspace"]

_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def create_workspace(store: Store, name: str, *, overwrite: bool = False) -> str:
    """Create the workspace ``name`` from the tables ``store`` has open.

    Parameters
    ----------
    store
        A store opened with ``zarr_mode="r+"``, at its root or in a workspace
        (whose tables the new workspace starts from).
    name
        The workspace: letters, digits, ``_``, ``.`` and ``-``, starting with
        a letter; not an assay or a group CyteArc writes.
    overwrite
        Replace a workspace of that name (its tables, artifacts and runs
        are deleted), or the group a killed creation left.

    Returns
    -------
    str
        ``name``.

    Raises
    ------
    ReadOnlyStoreError
        The store was opened read-only.
    OperationArgumentError
        ``name`` is not a valid name, or names an assay or a group of the store.
    DestinationExistsError
        The workspace exists and ``overwrite`` is False.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=200, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> second = ds.create_workspace("second")
    >>> second.workspace, ds.workspaces
    ('second', ['second'])
    >>> second.RNA.counts is not None and second.cells.n_rows == ds.cells.n_rows
    True
    """
    if not store.writable:
        msg = f"{store.where}: create_workspace writes the store; open it with zarr_mode='r+'"
        raise ReadOnlyStoreError(msg)
    base = store.store_root
    if not _NAME.fullmatch(name) or name in CYTEARC_GROUPS:
        msg = f"create_workspace: name {name!r}: expected letters, digits, '_', '.' or '-', starting with a letter, that is not a group CyteArc writes ({sorted(CYTEARC_GROUPS)})"
        raise OperationArgumentError(msg)
    existing = child_node(base, name, where=store.where)
    if existing is not None:
        if (
            not isinstance(existing, zarr.Group)
            or existing.attrs.get("is_assay")
            or PENDING_ATTRIBUTE in existing.attrs
        ):
            msg = f"{store.where}/{name}: an assay or array of the store; choose another workspace name"
            raise OperationArgumentError(msg)
        if not overwrite:
            state = (
                "the workspace exists"
                if name in workspace_groups(base, where=store.where)
                else "a group that is not a complete workspace (a killed creation left it)"
            )
            msg = f"{store.where}/{name}: {state}; pass overwrite=True to replace it (its tables, artifacts and runs are deleted), or choose another name"
            raise DestinationExistsError(msg)
    tables = read_carried(store.cells, {a: store.assays[a].features for a in store.assays})
    write_workspace(
        base,
        name,
        tables,
        assay_types=dict(store.assay_types),
        derived={a: store.assays[a].derived for a in store.assays},
        where=store.where,
        origin=store.workspace,
    )
    return name
