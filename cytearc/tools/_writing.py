"""What the store writers of :mod:`cytearc.tools` share: source checks and the parts of a new store.

A new store is written in the order an import writes it: the root group with
``cytearc:complete=False``, the cell table (membership columns written with
their attributes in their first metadata write), each assay's feature table
and count arrays with their summaries, and last the dataset fingerprint with
``cytearc:complete=True``, so an interrupted writer leaves a store that never
opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import zarr

from cytearc.errors import DestinationOverlapError, PendingAssayError
from cytearc.io.importer import dataset_fingerprint
from cytearc.metadata.membership import membership_column, write_membership_columns
from cytearc.metadata.table import GENERATED_ATTRIBUTE, write_table
from cytearc.storage.counts import write_count_arrays, write_summaries
from cytearc.storage.destinations import create_destination
from cytearc.storage.nodes import (
    DERIVED_ATTRIBUTE,
    PENDING_ATTRIBUTE,
    STORE_FORMAT,
    STORE_FORMAT_VERSION,
    WORKSPACE_ATTRIBUTE,
    child_node,
    member_names,
)
from cytearc.storage.store import workspace_groups
from cytepool.locations import as_location

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    import dask.array as da
    import numpy as np
    from zarr.abc.codec import BytesBytesCodec

    from cytearc.engine.cluster import Engine
    from cytearc.metadata.table import MetaData
    from cytearc.storage.layout import CountLayout
    from cytearc.storage.store import Store
    from cytepool.locations import Location

__all__ = [
    "CarriedTables",
    "carried_columns",
    "create_store",
    "finish_store",
    "read_carried",
    "refuse_overlap",
    "refuse_pending",
    "table_frame",
    "write_assay",
    "write_assay_group",
    "write_cells",
    "write_workspace",
]


def refuse_pending(store: Store) -> None:
    """Refuse a source store that holds a pending derived assay.

    Parameters
    ----------
    store
        The source.

    Raises
    ------
    PendingAssayError
        A group of the root or of a workspace carries ``cytearc:pending_assay``.
    """
    base = store.store_root
    scopes = [("", base)] + [
        (f"{w}/", g) for w, g in workspace_groups(base, where=store.where).items()
    ]
    for prefix, scope in scopes:
        for name in sorted(member_names(scope, where=store.where)):
            node = child_node(scope, name, where=store.where)
            if isinstance(node, zarr.Group) and PENDING_ATTRIBUTE in node.attrs:
                operation = node.attrs[PENDING_ATTRIBUTE]
                workspace = f", workspace={prefix[:-1]!r}" if prefix else ""
                msg = (
                    f"{store.where}/{prefix}{name}: a pending derived assay (written by "
                    f"{operation!r}, not finished); wait for its writer to finish, or, once no "
                    "process writes it, remove it with DataStore(..., zarr_mode='r+'"
                    f"{workspace}).discard_interrupted_assay({name!r})"
                )
                raise PendingAssayError(msg)


def refuse_overlap(sources: Iterable[str], destination: Location) -> None:
    """Refuse a destination that is, holds or lies inside a source store.

    Parameters
    ----------
    sources
        The source locations (paths or URLs, as the stores print them).
    destination
        The destination.

    Raises
    ------
    DestinationOverlapError
        The destination overlaps a source: the same local folder (after
        resolving links) or the same object prefix.
    """
    for source in sources:
        if destination.overlaps(as_location(source)):
            msg = f"{destination}: overlaps the source store {source}; a writer never replaces or writes into its source - choose a destination outside it"
            raise DestinationOverlapError(msg)


def carried_columns(cells: MetaData, assays: Iterable[str]) -> list[str]:
    """The cell columns a new store carries from a source: neither analysis outputs nor membership.

    Columns an analysis wrote (``cytearc:generatedBy``) belong to the source's
    runs, which new stores do not copy; membership columns of the source's
    assays are written by their own rules.

    Parameters
    ----------
    cells
        The source's cell table.
    assays
        The source's assays.

    Returns
    -------
    list of str
        Column names, in table order.
    """
    membership = {membership_column(cells, name) for name in assays} - {None}
    return [
        column
        for column in cells.columns
        if column not in membership and GENERATED_ATTRIBUTE not in cells.attributes(column)
    ]


def table_frame(
    table: MetaData, columns: Sequence[str], rows: np.ndarray | None = None
) -> pd.DataFrame:
    """Columns of a table with their pandas dtypes, at ``rows`` (positions) or all rows.

    Parameters
    ----------
    table
        The table.
    columns
        The columns, in order.
    rows
        Row positions, or None for every row.

    Returns
    -------
    pandas.DataFrame
        The columns, index 0..n-1.
    """
    data = {}
    for column in columns:
        series = table.fetch_series(column)
        data[column] = (series if rows is None else series.iloc[rows]).reset_index(drop=True)
    return pd.DataFrame(data)


@dataclass(frozen=True, kw_only=True)
class CarriedTables:
    """What a new store (or workspace) carries of a source's tables: no analysis output.

    Parameters
    ----------
    cells
        The cell columns of :func:`carried_columns`, ``ids`` first.
    membership
        Each assay's ``<assay>_I`` values, for the assays that have one.
    features
        Each assay's feature table, without the columns an analysis wrote.
    """

    cells: pd.DataFrame
    membership: dict[str, np.ndarray]
    features: dict[str, pd.DataFrame]


def read_carried(cells: MetaData, features: Mapping[str, MetaData]) -> CarriedTables:
    """Read the tables a new store or workspace carries from a source.

    Parameters
    ----------
    cells
        The source's cell table.
    features
        Each assay's feature table.

    Returns
    -------
    CarriedTables
        The columns, at every row.
    """
    return CarriedTables(
        cells=table_frame(cells, carried_columns(cells, features)),
        membership={
            name: cells.fetch_all(column).astype(bool)
            for name in features
            if (column := membership_column(cells, name)) is not None
        },
        features={
            name: table_frame(table, carried_columns(table, ())) for name, table in features.items()
        },
    )


def write_workspace(
    root: zarr.Group,
    name: str,
    tables: CarriedTables,
    *,
    assay_types: Mapping[str, str],
    derived: Mapping[str, Mapping[str, Any] | None],
    where: str,
    origin: str | None,
) -> zarr.Group:
    """Write the workspace ``name`` of a store: its cell and feature tables, then its marker.

    The group carries ``cytearc:workspace`` (with ``assayTypes``, in one
    write) only once every table is written, so a killed write leaves a
    group that does not open as a workspace.

    Parameters
    ----------
    root
        The store's root group (an existing group ``name`` is replaced).
    name
        The workspace.
    tables
        Its tables (:func:`read_carried`).
    assay_types
        The declared type of each assay.
    derived
        Each assay's ``cytearc:derived`` record, or None.
    where
        The store, for messages.
    origin
        The workspace the tables were read from (None for the root), recorded.

    Returns
    -------
    zarr.Group
        The workspace's group.
    """
    group = root.create_group(name, overwrite=True)
    write_cells(group, tables.cells, membership=tables.membership, where=f"{where}/{name}")
    for assay, frame in tables.features.items():
        write_assay_group(group, assay, frame, derived=derived.get(assay), where=f"{where}/{name}")
    group.attrs.update(
        {
            "assayTypes": dict(assay_types),
            WORKSPACE_ATTRIBUTE: {"version": 1, "createdFrom": origin},
        }
    )
    return group


def create_store(
    path: Location,
    *,
    overwrite: bool,
    assay_types: Mapping[str, str],
    attributes: Mapping[str, Any] | None = None,
) -> zarr.Group:
    """The root group of a new store, incomplete until :func:`finish_store`.

    Parameters
    ----------
    path
        The destination, checked by
        :func:`~cytearc.storage.destinations.validate_destination`.
    overwrite
        Replace what is there.
    assay_types
        The declared type of each assay.
    attributes
        More root attributes (a merge's manifest).

    Returns
    -------
    zarr.Group
        The root group.
    """
    root = create_destination(path, overwrite=overwrite)
    root.attrs.update(
        {
            "cytearc:format": STORE_FORMAT,
            "cytearc:formatVersion": STORE_FORMAT_VERSION,
            "cytearc:complete": False,
            "assayTypes": dict(assay_types),
            **(attributes or {}),
        }
    )
    return root


def write_cells(
    root: zarr.Group, frame: pd.DataFrame, *, membership: Mapping[str, np.ndarray], where: str
) -> None:
    """Write the cell table, and each assay's membership column with its role attributes.

    Parameters
    ----------
    root
        The new store's root.
    frame
        The ordinary columns, ``ids`` first.
    membership
        Each assay's ``<assay>_I`` values (one boolean per cell).
    where
        The store, for messages.
    """
    group = root.create_group("cellData")
    write_table(group, frame, dimension="cell", where=f"{where}/cellData")
    write_membership_columns(group, membership, n_rows=len(frame), where=f"{where}/cellData")


def write_assay_group(
    root: zarr.Group,
    name: str,
    features: pd.DataFrame,
    *,
    derived: Mapping[str, Any] | None,
    where: str,
) -> None:
    """Create the assay's group (``is_assay``, and ``cytearc:derived`` for a derived assay) and its feature table.

    Parameters
    ----------
    root
        The new store's root.
    name
        The assay.
    features
        Its feature table.
    derived
        The source's ``cytearc:derived`` record, or None.
    where
        The store, for messages.
    """
    attributes: dict[str, Any] = {"is_assay": True}
    if derived is not None:
        attributes[DERIVED_ATTRIBUTE] = dict(derived)
    assay = root.create_group(name, attributes=attributes)
    write_table(
        assay.create_group("featureData"),
        features,
        dimension="feature",
        where=f"{where}/{name}/featureData",
    )


def write_assay(
    root: zarr.Group,
    name: str,
    features: pd.DataFrame,
    counts: da.Array,
    *,
    transpose: bool,
    layout: CountLayout,
    compressor: BytesBytesCodec | None,
    engine: Engine,
    where: str,
    derived: Mapping[str, Any] | None = None,
) -> str:
    """Write an assay's feature table, counts (and ``countsT``) and count summaries.

    Parameters
    ----------
    root
        The new store's root.
    name
        The assay.
    features
        Its feature table (``ids``, ``names``, ...).
    counts
        Cells x features in the storage dtype, lazy.
    transpose
        Write ``countsT`` (RNA-type assays).
    layout
        The layout policy, fitted to the budget.
    compressor
        The codec after ``bytes``.
    engine
        Where the graph runs.
    where
        The store, for messages.
    derived
        The source assay's ``cytearc:derived`` record, kept when it is a derived assay.

    Returns
    -------
    str
        The counts' content fingerprint.
    """
    write_assay_group(root, name, features, derived=derived, where=where)
    group = root.require_group("matrices").create_group(name)
    written = write_count_arrays(
        group,
        counts,
        layout=layout,
        compressor=compressor,
        engine=engine,
        transpose=transpose,
        where=f"{where}/matrices/{name}",
    )
    write_summaries(group, written)
    return written.content_fingerprint


def finish_store(
    root: zarr.Group,
    cells: pd.DataFrame,
    features: Mapping[str, pd.DataFrame],
    fingerprints: Mapping[str, str],
    *,
    attributes: Mapping[str, Any] | None = None,
) -> str:
    """Record the dataset fingerprint and mark the store complete (its last write).

    Derived assays (their group carries ``cytearc:derived``) are functions of
    other assays and are left out of the fingerprint, as verify leaves them out.

    Parameters
    ----------
    root
        The new store's root.
    cells
        Its cell table (``ids``).
    features
        Each assay's feature table (``ids``, ``names``).
    fingerprints
        Each assay's counts fingerprint.
    attributes
        More root attributes to write in the same write (a composite's
        completed manifest).

    Returns
    -------
    str
        The dataset fingerprint.
    """
    imported = [name for name in features if DERIVED_ATTRIBUTE not in root[name].attrs]
    fingerprint = dataset_fingerprint(
        cells, {n: features[n] for n in imported}, {n: fingerprints[n] for n in imported}
    )
    root.attrs.update(
        {
            **(attributes or {}),
            "cytearc:datasetFingerprint": fingerprint,
            "cytearc:complete": True,
        }
    )
    return fingerprint
