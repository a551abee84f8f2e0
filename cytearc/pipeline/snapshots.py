"""The first stage's immutable inputs: the feature universe and metadata snapshots.

A run's frozen views read these artifacts, never the live tables, so later
edits of the tables (a new ``I``, a dropped column) do not change what a run
reports; replaced or reordered row identities make them fail closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cytearc.artifacts import DATASTORE_SCOPE, Artifact
from cytearc.errors import ColumnNotFoundError, StaleSelectionError
from cytearc.metadata.table import GENERATED_ATTRIBUTE
from cytearc.ops.publication import reuse_or_publish, values_digest
from cytearc.ops.selection import publish_selection

if TYPE_CHECKING:
    from cytearc.artifacts import ArtifactWriter
    from cytearc.metadata.table import MetaData
    from cytearc.storage.store import AnalysisStore

__all__ = ["FrozenTable", "feature_universe", "input_snapshot", "snapshot_table"]


def feature_universe(ds: AnalysisStore, assay: str) -> Artifact:
    """An all-feature selection of ``assay`` bound to its ordered feature ids.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay.

    Returns
    -------
    Artifact
        A ``feature_selection`` of the assay: ``mask``, True for every feature.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    ReadOnlyStoreError
        It is not published yet and the store is read-only.
    """
    ids = values_digest(ds.assays[assay].features.fetch_all("ids"))
    n = ds.assays[assay].shape[1]

    def build(writer: ArtifactWriter) -> None:
        writer.write("mask", np.ones(n, dtype=bool), attributes={"rowIds": ids})

    return reuse_or_publish(
        ds,
        scope=assay,
        kind="feature_selection",
        operation="feature_universe",
        parameters={"assay": assay},
        inputs={"rowIds": ids},
        build=build,
    )


def _table(ds: AnalysisStore, table: str) -> MetaData:
    return ds.cells if table == "cells" else ds.assays[table].features


def snapshot_table(ds: AnalysisStore, table: str) -> Artifact:
    """A copy of the cell table (``"cells"``) or of an assay's feature table.

    Columns that analysis operations generated (``cytearc:generatedBy``) are
    outputs, not inputs, and are left out, so a run's own outputs do not
    change the snapshot of the next identical run.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    table
        ``"cells"``, or an assay's name for its feature table.

    Returns
    -------
    Artifact
        A ``metadata_snapshot``: one array per column, its ``columns``
        attribute naming them in order.

    Raises
    ------
    AssayNotFoundError
        ``table`` is neither ``"cells"`` nor an assay of the store.
    ReadOnlyStoreError
        It is not published yet and the store is read-only.
    """
    source = _table(ds, table)
    columns = [c for c in source.columns if GENERATED_ATTRIBUTE not in source.attributes(c)]
    values = {c: source.fetch_all(c) for c in columns}

    def build(writer: ArtifactWriter) -> None:
        for i, column in enumerate(columns):
            data = values[column]
            stored = data.astype(object) if data.dtype.kind in "OUT" else data
            writer.write(f"c{i:04d}", stored, finite=False, attributes={"column": column})
        writer.group.attrs["columns"] = columns

    return reuse_or_publish(
        ds,
        scope=DATASTORE_SCOPE if table == "cells" else table,
        kind="metadata_snapshot",
        operation="snapshot_metadata",
        parameters={"table": table},
        inputs={"columns": {c: values_digest(v) for c, v in values.items()}},
        build=build,
    )


class FrozenTable:
    """A run's view of a table: its snapshot, with ``I`` from the run's selection.

    ``table["I"]`` is the stored selection, checked against the current
    ordered row ids (a :class:`~cytearc.errors.StaleSelectionError` when they
    were replaced or reordered); other columns are the snapshot's values (a
    :class:`~cytearc.errors.ColumnNotFoundError` for a column it lacks).

    Parameters
    ----------
    snapshot
        The table's ``metadata_snapshot`` (:func:`snapshot_table`).
    selection
        The run's cell or feature selection (``mask``).
    row_ids
        The fingerprint of the current ordered row ids.
    """

    def __init__(self, snapshot: Artifact, selection: Artifact, *, row_ids: str) -> None:
        self._snapshot = snapshot
        self._selection = selection
        self._row_ids = row_ids
        names = snapshot.group.attrs["columns"]
        assert isinstance(names, list)
        self.columns: list[str] = [str(c) for c in names]

    def __getitem__(self, column: str) -> np.ndarray:
        if column == "I":
            mask = self._selection.array("mask")
            if mask.attrs.get("rowIds") != self._row_ids:
                msg = f"{self._selection.ref}: the run's selection was made for other row ids (replaced or reordered)"
                raise StaleSelectionError(msg)
            return np.asarray(mask[...], dtype=bool)
        if column not in self.columns:
            msg = f"{self._snapshot.ref}: no column {column!r}; the run's snapshot holds {self.columns} - pass one of them"
            raise ColumnNotFoundError(msg)
        return self._snapshot.read(f"c{self.columns.index(column):04d}")

    def __repr__(self) -> str:
        return f"<FrozenTable {self._snapshot.ref}: {self.columns}>"


def input_snapshot(
    ds: AnalysisStore, assay: str = "RNA", *, cell_key: str = "I"
) -> dict[str, Artifact]:
    """What a run starts from, frozen: its cells, its feature universe and both tables.

    The first stage of every recipe.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The run's assay.
    cell_key
        The boolean cell column the run starts from.

    Returns
    -------
    dict of str to Artifact
        ``cells`` (a ``cell_selection``), ``feature_universe``,
        ``cell_metadata`` and ``feature_metadata``.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    OperationArgumentError
        ``cell_key`` is not a boolean cell column, or selects no cell.
    ReadOnlyStoreError
        They are not published yet and the store is read-only.
    """
    return {
        "cells": publish_selection(ds, cell_key).artifact,
        "feature_universe": feature_universe(ds, assay),
        "cell_metadata": snapshot_table(ds, "cells"),
        "feature_metadata": snapshot_table(ds, assay),
    }
