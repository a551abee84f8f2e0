"""Cell selections: which cells an operation reads, checked and published as artifacts.

Functions whose name starts with ``read_`` or ``open_`` only read; those that
start with ``publish_`` (and :func:`select_measured_cells`) publish, or reuse,
a ``cell_selection`` artifact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from cytearc.artifacts import DATASTORE_SCOPE, Artifact, ArtifactRef, open_artifact
from cytearc.errors import (
    ArtifactError,
    AssayNotFoundError,
    OperationArgumentError,
    StaleSelectionError,
)
from cytearc.metadata.membership import membership_column, validate_measured
from cytearc.ops.publication import reuse_or_publish, values_digest

if TYPE_CHECKING:
    from cytearc.artifacts import ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "MEMBERSHIP_REMEDY",
    "Selection",
    "SelectionLike",
    "artifact_cell_mask",
    "group_labels",
    "open_selection",
    "publish_measured_selection",
    "publish_selection",
    "read_measured_mask",
    "read_selection_mask",
    "row_ids_fingerprint",
    "select_measured_cells",
    "write_selection_mask",
]

MEMBERSHIP_REMEDY: Final = (
    "pass cell_selection=ds.select_measured_cells(assay) (a selection of the measured cells), "
    "or a cell_key column that is True only for cells the assay measured"
)

SelectionLike = ArtifactRef | str | np.ndarray | None
"""A cell selection: an artifact ref, a boolean cell column's name, a mask, or None (``I``)."""


def group_labels(ds: AnalysisStore, key: str) -> tuple[np.ndarray, np.ndarray]:
    """A cell column that groups cells, and which cells have a label.

    NaN, negative numbers (such as the ``-1`` of cells outside a clustering)
    and empty or missing (None) text are no label.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    key
        The cell column.

    Returns
    -------
    tuple of numpy.ndarray
        ``(values, labelled)``: the column's values (text as objects) and a
        boolean mask of the cells that have a label.

    Raises
    ------
    KeyError
        The cell table has no column ``key``.
    """
    values = ds.cells.fetch_all(key)
    if values.dtype.kind == "f":
        return values, np.isfinite(values) & (values >= 0)
    if values.dtype.kind in "iu":
        return values, values >= 0
    values = values.astype(object)
    return values, np.array([v is not None and v != "" for v in values], dtype=bool)


def row_ids_fingerprint(ds: AnalysisStore) -> str:
    """The fingerprint of the ordered cell ids (computed once per open store).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).

    Returns
    -------
    str
        The :func:`~cytearc.ops.publication.values_digest` of the cell ids.
    """
    cached = ds.cache.get("row_ids_fingerprint")
    if cached is None:
        cached = values_digest(ds.cells.fetch_all("ids"))
        ds.cache["row_ids_fingerprint"] = cached
    return str(cached)


class Selection:
    """A published cell selection and its mask over the store's cells.

    Parameters
    ----------
    artifact
        The ``cell_selection`` artifact.
    mask
        One boolean per cell of the store, True for the selected cells.
    """

    def __init__(self, artifact: Artifact, mask: np.ndarray) -> None:
        self.artifact = artifact
        self.mask = mask

    @property
    def ref(self) -> ArtifactRef:
        """The selection's artifact."""
        return self.artifact.ref

    @property
    def n_cells(self) -> int:
        """How many cells it selects."""
        return int(self.mask.sum())

    @property
    def rows(self) -> np.ndarray:
        """The selected rows, in order."""
        return np.flatnonzero(self.mask)


def _snapshot(ds: AnalysisStore, mask: np.ndarray, *, key: str | None) -> Artifact:
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (ds.cells.n_rows,):
        msg = f"{ds.where}: cell_selection: expected one boolean per cell, shape ({ds.cells.n_rows},), found shape {mask.shape}; pass a mask over every cell"
        raise OperationArgumentError(msg)
    if not mask.any():
        msg = f"{ds.where}: cell_selection ({key or 'mask'}): expected at least one selected cell, found none; select some cells"
        raise OperationArgumentError(msg)
    return reuse_or_publish(
        ds,
        scope=DATASTORE_SCOPE,
        kind="cell_selection",
        operation="select_cells",
        parameters={"key": key},
        inputs={"rowIds": row_ids_fingerprint(ds), "mask": values_digest(mask)},
        build=lambda w: write_selection_mask(w, mask, ds),
    )


def write_selection_mask(writer: ArtifactWriter, mask: np.ndarray, ds: AnalysisStore) -> None:
    """Write a selection artifact's ``mask``, bound to the current ordered cell ids.

    Parameters
    ----------
    writer
        The writer of the ``cell_selection`` artifact being produced.
    mask
        One boolean per cell.
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    """
    writer.write("mask", mask, attributes={"rowIds": row_ids_fingerprint(ds)})


def open_selection(ds: AnalysisStore, ref: ArtifactRef | str) -> Selection:
    """A stored selection, checked against the current ordered cell ids.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    ref
        The ``cell_selection`` artifact's ref.

    Returns
    -------
    Selection
        The selection and its mask.

    Raises
    ------
    OperationArgumentError
        The artifact is of another kind.
    StaleSelectionError
        The selection was made for other cell ids (replaced or reordered).
    MissingArtifactError, IncompleteArtifactError
        ``ref`` names no published artifact.
    """
    artifact = open_artifact(ds.root, ref)
    if artifact.ref.kind != "cell_selection":
        msg = f"{artifact.ref}: cell_selection: expected a cell_selection artifact, found one of kind {artifact.ref.kind!r}; pass a selection's ref, a boolean cell column or a mask"
        raise OperationArgumentError(msg)
    array = artifact.array("mask")
    if array.attrs.get("rowIds") != row_ids_fingerprint(ds) or array.shape != (ds.cells.n_rows,):
        msg = f"{artifact.ref}: the selection was made for other cell ids (they were replaced or reordered); make the selection again"
        raise StaleSelectionError(msg)
    return Selection(artifact, artifact.read("mask").astype(bool))


def publish_selection(ds: AnalysisStore, cell_selection: SelectionLike = None) -> Selection:
    """The cell selection of an operation: a stored ref, a key column, a mask, or ``I``.

    A key column or a mask is published (or reused) as a ``cell_selection``
    artifact; a ref is opened and checked.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    cell_selection
        A ``cell_selection`` artifact's ref, the name of a boolean cell
        column, a boolean mask over every cell, or None for ``I``.

    Returns
    -------
    Selection
        The published selection.

    Raises
    ------
    OperationArgumentError
        The column is not boolean, the mask is not one boolean per cell, no
        cell is selected, or the ref is of another kind.
    KeyError
        The cell table has no such column.
    StaleSelectionError
        A stored selection was made for other cell ids.
    ReadOnlyStoreError
        The selection is not published yet and the store is read-only.
    """
    if isinstance(cell_selection, ArtifactRef) or (
        isinstance(cell_selection, str) and "/" in cell_selection
    ):
        return open_selection(ds, cell_selection)
    if isinstance(cell_selection, str) or cell_selection is None:
        key = cell_selection or "I"
        mask = ds.cells.fetch_all(key)
        if mask.dtype != np.bool_:
            msg = f"{ds.where}: cell_selection {key!r}: expected a boolean cell column, found dtype {mask.dtype}; pass a boolean column or a mask"
            raise OperationArgumentError(msg)
        return open_selection(ds, _snapshot(ds, mask, key=key).ref)
    return open_selection(ds, _snapshot(ds, np.asarray(cell_selection), key=None).ref)


def read_selection_mask(ds: AnalysisStore, cell_selection: SelectionLike = None) -> np.ndarray:
    """The cells a selection names, read without publishing anything (for checks that come first).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    cell_selection
        A ``cell_selection`` artifact's ref, the name of a boolean cell
        column, a boolean mask over every cell, or None for ``I``.

    Returns
    -------
    numpy.ndarray
        The boolean mask of the selected cells (not checked for shape or
        emptiness: :func:`publish_selection` does that).

    Raises
    ------
    KeyError
        The cell table has no such column.
    StaleSelectionError
        A stored selection was made for other cell ids.
    """
    if isinstance(cell_selection, ArtifactRef) or (
        isinstance(cell_selection, str) and "/" in cell_selection
    ):
        return open_selection(ds, cell_selection).mask
    if isinstance(cell_selection, str) or cell_selection is None:
        return np.asarray(ds.cells.fetch_all(cell_selection or "I"), dtype=bool)
    return np.asarray(cell_selection, dtype=bool)


def read_measured_mask(
    ds: AnalysisStore, assay: str, cell_selection: SelectionLike, *, operation: str
) -> np.ndarray:
    """The cells of an operation that reads ``assay``'s values, refused if it holds unmeasured cells.

    Reads only: nothing is published, so a refusal writes nothing.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose values the operation reads.
    cell_selection
        A ``cell_selection`` artifact's ref, the name of a boolean cell
        column, a boolean mask over every cell, or None for ``I``.
    operation
        The operation, for the message.

    Returns
    -------
    numpy.ndarray
        The boolean mask of the selected cells.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay``.
    KeyError
        The cell table has no such column.
    StaleSelectionError
        A stored selection was made for other cell ids.
    """
    if assay not in ds.assays:
        msg = f"{ds.where}: {operation}: no assay {assay!r}; the store has {sorted(ds.assays)} - pass one of them"
        raise AssayNotFoundError(msg)
    key = None
    if cell_selection is None or (isinstance(cell_selection, str) and "/" not in cell_selection):
        key = cell_selection or "I"
    mask = read_selection_mask(ds, cell_selection)
    validate_measured(
        ds.cells, assay, mask, operation=operation, remedy=MEMBERSHIP_REMEDY, cell_key=key
    )
    return mask


def publish_measured_selection(
    ds: AnalysisStore, assay: str, cell_selection: SelectionLike, *, operation: str
) -> Selection:
    """:func:`read_measured_mask`, then the selection published (or reused) as an artifact.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay whose values the operation reads.
    cell_selection
        A ``cell_selection`` artifact's ref, the name of a boolean cell
        column, a boolean mask over every cell, or None for ``I``.
    operation
        The operation, for the message.

    Returns
    -------
    Selection
        The published selection.

    Raises
    ------
    AssayNotFoundError, UnmeasuredCellsError
        As in :func:`read_measured_mask` (checked before anything is published).
    OperationArgumentError, KeyError, StaleSelectionError, ReadOnlyStoreError
        As in :func:`publish_selection`.
    """
    read_measured_mask(ds, assay, cell_selection, operation=operation)
    return publish_selection(ds, cell_selection)


def select_measured_cells(
    ds: AnalysisStore, assay: str, cell_selection: SelectionLike = None
) -> ArtifactRef:
    """The cells of a selection (default: ``I``) that ``assay`` measured, as a selection artifact.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay.
    cell_selection
        A ``cell_selection`` artifact's ref, the name of a boolean cell
        column, a boolean mask over every cell, or None for ``I``.

    Returns
    -------
    ArtifactRef
        The ref of a datastore ``cell_selection``: the prior selection itself
        when the assay has no membership column or measured every selected
        cell, else the selected cells that the assay measured.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    OperationArgumentError
        The assay measured none of the selected cells, or the selection is
        malformed (as in :func:`publish_selection`).
    StaleSelectionError
        A stored selection was made for other cell ids.
    ReadOnlyStoreError
        The selection is not published yet and the store is read-only.
    """
    ds.assays[assay]
    column = membership_column(ds.cells, assay)
    membership = None if column is None else ds.cells.fetch_all(column).astype(bool)
    if membership is not None:
        mask = read_selection_mask(ds, cell_selection)
        if not (mask & membership).any():
            msg = f"{ds.where}: select_measured_cells: assay {assay!r} measured none of the {int(mask.sum())} selected cells; select cells the assay measured"
            raise OperationArgumentError(msg)
    prior = publish_selection(ds, cell_selection)
    if membership is None:
        return prior.ref
    measured = prior.mask & membership
    if measured.sum() == prior.n_cells:
        return prior.ref
    return reuse_or_publish(
        ds,
        scope=DATASTORE_SCOPE,
        kind="cell_selection",
        operation="select_measured_cells",
        parameters={"assay": assay},
        inputs={"cells": prior.ref, "membership": values_digest(membership)},
        build=lambda w: write_selection_mask(w, measured, ds),
    ).ref


def artifact_cell_mask(ds: AnalysisStore, artifact: Artifact) -> np.ndarray:
    """The cell mask an artifact's rows stand for, following its lineage to the selection.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    artifact
        An artifact computed over cells (such as a ``pca`` or ``umap``).

    Returns
    -------
    numpy.ndarray
        One boolean per cell of the store, True for the artifact's rows.

    Raises
    ------
    ArtifactError
        The artifact's lineage reaches no cell selection.
    StaleSelectionError
        The selection was made for other cell ids.
    """
    node = artifact
    while "cells" not in node.inputs():
        parents = node.inputs()
        if not parents:
            msg = f"{artifact.ref}: expected a lineage that reaches a cell selection, found none; pass an artifact computed over cells (such as a umap or pca)"
            raise ArtifactError(msg)
        node = open_artifact(ds.root, next(iter(parents.values())))
    return open_selection(ds, node.inputs()["cells"]).mask
