"""What every operation shares: the store's engine, cell selections, publication."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from cytearc.artifacts import (
    DATASTORE_SCOPE,
    Artifact,
    ArtifactRef,
    make_provenance,
    open_artifact,
    produce,
)
from cytearc.errors import CyteArcError, StaleSelectionError
from cytearc.metadata.membership import check_measured, membership_column
from cytearc.metadata.table import GENERATED_ATTRIBUTE

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import ArtifactWriter
    from cytearc.datastore import DataStore

__all__ = [
    "MEMBERSHIP_REMEDY",
    "Selection",
    "SelectionLike",
    "checked_mask",
    "checked_selection",
    "digest",
    "group_labels",
    "publish",
    "resolve_selection",
    "row_ids_fingerprint",
    "select_measured_cells",
    "selection_mask",
    "selection_of",
    "write_cell_column",
]

PREPARED_ATTRIBUTE: Final = "cytearc:prepared"
"""Root attribute listing the assays that hold analysis artifacts."""

MEMBERSHIP_REMEDY: Final = (
    "pass cell_selection=ds.select_measured_cells(assay) (a selection of the measured cells), "
    "or a cell_key column that is True only for cells the assay measured"
)

SelectionLike = ArtifactRef | str | np.ndarray | None
"""A cell selection: an artifact ref, a boolean cell column's name, a mask, or None (``I``)."""


def digest(values: np.ndarray) -> str:
    """``sha256:`` of an array's values (text as UTF-8 joined by NUL), for provenance inputs."""
    h = hashlib.sha256()
    if values.dtype.kind in "OUT":
        h.update("\0".join(str(v) for v in values).encode())
    else:
        h.update(str(values.dtype.str).encode() + b"\n")
        h.update(np.ascontiguousarray(values).tobytes())
    return "sha256:" + h.hexdigest()


def group_labels(ds: DataStore, key: str) -> tuple[np.ndarray, np.ndarray]:
    """A cell column that groups cells, and which cells have a label.

    NaN, negative numbers (such as the ``-1`` of cells outside a clustering)
    and empty text are no label.
    """
    values = ds.cells.fetch_all(key)
    if values.dtype.kind == "f":
        return values, np.isfinite(values) & (values >= 0)
    if values.dtype.kind in "iu":
        return values, values >= 0
    values = values.astype(object)
    return values, np.array([v != "" for v in values], dtype=bool)


def row_ids_fingerprint(ds: DataStore) -> str:
    """The fingerprint of the ordered cell ids (computed once per open store)."""
    cached = ds.__dict__.get("_row_ids_fingerprint")
    if cached is None:
        cached = digest(ds.cells.fetch_all("ids"))
        ds.__dict__["_row_ids_fingerprint"] = cached
    return str(cached)


def _compute(ds: DataStore) -> Callable[..., tuple[Any, ...]]:
    def run(*collections: Any) -> tuple[Any, ...]:
        return ds.engine.compute(*collections, show_progress=ds.show_progress)

    return run


def publish(
    ds: DataStore,
    *,
    scope: str,
    kind: str,
    operation: str,
    parameters: dict[str, Any],
    inputs: dict[str, Any],
    build: Callable[[ArtifactWriter], None],
    revision: int = 1,
    invalidate_cache: bool = False,
) -> Artifact:
    """Reuse or produce the artifact of ``operation`` on this store's engine."""
    engine = ds.engine
    options = {
        "memBudget": None if engine.budget is None else engine.budget.total,
        "workers": None if engine.budget is None else engine.budget.workers,
        "scheduler": "threads" if engine.client is None else "distributed",
    }
    artifact = produce(
        ds.root,
        scope=scope,
        kind=kind,
        provenance=make_provenance(
            operation, parameters=parameters, inputs=inputs, revision=revision
        ),
        build=build,
        compute=_compute(ds),
        execution_options=options,
        invalidate_cache=invalidate_cache,
        where=ds.where,
    )
    if scope and ds.writable:
        _mark_prepared(ds, scope)
    return artifact


def _mark_prepared(ds: DataStore, assay: str) -> None:
    """Record that ``assay`` holds analysis results (an import with overwrite=True then refuses the store)."""
    prepared = ds.root.attrs.get(PREPARED_ATTRIBUTE, [])
    names = set(prepared) if isinstance(prepared, list) else set()
    if assay not in names:
        ds.root.attrs[PREPARED_ATTRIBUTE] = sorted(names | {assay})


class Selection:
    """A published cell selection and its mask over the store's cells."""

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


def _snapshot(ds: DataStore, mask: np.ndarray, *, key: str | None) -> Artifact:
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (ds.cells.n_rows,):
        msg = f"{ds.where}: a cell selection needs one boolean per cell ({ds.cells.n_rows}), found shape {mask.shape}"
        raise CyteArcError(msg)
    if not mask.any():
        msg = f"{ds.where}: the cell selection ({key or 'mask'}) selects no cell"
        raise CyteArcError(msg)
    return publish(
        ds,
        scope=DATASTORE_SCOPE,
        kind="cell_selection",
        operation="select_cells",
        parameters={"key": key},
        inputs={"rowIds": row_ids_fingerprint(ds), "mask": digest(mask)},
        build=lambda w: _write_mask(w, mask, ds),
    )


def _write_mask(writer: ArtifactWriter, mask: np.ndarray, ds: DataStore) -> None:
    writer.write("mask", mask, attributes={"rowIds": row_ids_fingerprint(ds)})


def load_selection(ds: DataStore, ref: ArtifactRef | str) -> Selection:
    """A stored selection, checked against the current ordered cell ids."""
    artifact = open_artifact(ds.root, ref)
    if artifact.ref.kind != "cell_selection":
        msg = f"{artifact.ref}: expected a cell_selection artifact, found {artifact.ref.kind!r}"
        raise CyteArcError(msg)
    array = artifact.array("mask")
    if array.attrs.get("rowIds") != row_ids_fingerprint(ds) or array.shape != (ds.cells.n_rows,):
        msg = f"{artifact.ref}: the selection was made for other cell ids (they were replaced or reordered); make the selection again"
        raise StaleSelectionError(msg)
    return Selection(artifact, artifact.read("mask").astype(bool))


def resolve_selection(ds: DataStore, cell_selection: SelectionLike = None) -> Selection:
    """The cell selection of an operation: a stored ref, a key column, a mask, or ``I``."""
    if isinstance(cell_selection, ArtifactRef) or (
        isinstance(cell_selection, str) and "/" in cell_selection
    ):
        return load_selection(ds, cell_selection)
    if isinstance(cell_selection, str) or cell_selection is None:
        key = cell_selection or "I"
        mask = ds.cells.fetch_all(key)
        if mask.dtype != np.bool_:
            msg = f"{ds.where}: cell_selection {key!r} must be a boolean cell column, found {mask.dtype}"
            raise CyteArcError(msg)
        return load_selection(ds, _snapshot(ds, mask, key=key).ref)
    return load_selection(ds, _snapshot(ds, np.asarray(cell_selection), key=None).ref)


def selection_mask(ds: DataStore, cell_selection: SelectionLike = None) -> np.ndarray:
    """The cells a selection names, read without publishing anything (for checks that come first)."""
    if isinstance(cell_selection, ArtifactRef) or (
        isinstance(cell_selection, str) and "/" in cell_selection
    ):
        return load_selection(ds, cell_selection).mask
    if isinstance(cell_selection, str) or cell_selection is None:
        return np.asarray(ds.cells.fetch_all(cell_selection or "I"), dtype=bool)
    return np.asarray(cell_selection, dtype=bool)


def checked_mask(
    ds: DataStore, assay: str, cell_selection: SelectionLike, *, operation: str
) -> np.ndarray:
    """The cells of an operation that reads ``assay``'s values, refused if it holds unmeasured cells.

    Reads only: nothing is published, so a refusal writes nothing.
    """
    if assay not in ds.assays:
        msg = f"{ds.where}: {operation}: no assay {assay!r}; the store has {sorted(ds.assays)}"
        raise CyteArcError(msg)
    key = None
    if cell_selection is None or (isinstance(cell_selection, str) and "/" not in cell_selection):
        key = cell_selection or "I"
    mask = selection_mask(ds, cell_selection)
    check_measured(
        ds.cells, assay, mask, operation=operation, remedy=MEMBERSHIP_REMEDY, cell_key=key
    )
    return mask


def checked_selection(
    ds: DataStore, assay: str, cell_selection: SelectionLike, *, operation: str
) -> Selection:
    """:func:`checked_mask`, then the selection published (or reused) as an artifact."""
    checked_mask(ds, assay, cell_selection, operation=operation)
    return resolve_selection(ds, cell_selection)


def select_measured_cells(
    ds: DataStore, assay: str, cell_selection: SelectionLike = None
) -> ArtifactRef:
    """The cells of a selection (default: ``I``) that ``assay`` measured, as a selection artifact.

    Returns the prior selection itself when the assay has no membership
    column or measured every selected cell.
    """
    prior = resolve_selection(ds, cell_selection)
    column = membership_column(ds.cells, assay)
    if column is None:
        return prior.ref
    membership = ds.cells.fetch_all(column).astype(bool)
    measured = prior.mask & membership
    if not measured.any():
        msg = f"{ds.where}: assay {assay!r} measured none of the {prior.n_cells} selected cells"
        raise CyteArcError(msg)
    if measured.sum() == prior.n_cells:
        return prior.ref
    return publish(
        ds,
        scope=DATASTORE_SCOPE,
        kind="cell_selection",
        operation="select_measured_cells",
        parameters={"assay": assay},
        inputs={"cells": prior.ref, "membership": digest(membership)},
        build=lambda w: _write_mask(w, measured, ds),
    ).ref


def write_cell_column(
    ds: DataStore,
    name: str,
    values: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    fill: Any = None,  # noqa: ANN401
    artifact: Artifact | None = None,
    operation: str | None = None,
) -> None:
    """Write a column that an operation generates (unless it holds these values already).

    Generated columns carry ``cytearc:generatedBy`` (the operation and
    artifact), so run snapshots of the input metadata leave them out.
    """
    if not ds.writable:
        return
    full = values
    if mask is not None:
        full = np.full(len(mask), fill, dtype=values.dtype)
        full[mask] = values
    if name in ds.cells.columns:
        old = ds.cells.fetch_all(name)
        if old.dtype == full.dtype and np.array_equal(old, full, equal_nan=full.dtype.kind == "f"):
            return
    marker = {
        "operation": artifact.provenance["operation"] if artifact else operation,
        "artifact": str(artifact.ref) if artifact else None,
    }
    ds.cells.insert(name, full, overwrite=True, attributes={GENERATED_ATTRIBUTE: marker})


def selection_of(ds: DataStore, artifact: Artifact) -> np.ndarray:
    """The cell mask an artifact's rows stand for, following its lineage to the selection."""
    node = artifact
    while "cells" not in node.inputs():
        parents = node.inputs()
        if not parents:
            msg = f"{artifact.ref}: its lineage names no cell selection"
            raise CyteArcError(msg)
        node = open_artifact(ds.root, next(iter(parents.values())))
    return load_selection(ds, node.inputs()["cells"]).mask
