"""``features.detected``: how many of the selected cells have a count of each feature."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cytearc.engine.arrays import take_rows
from cytearc.ops.publication import reuse_or_publish
from cytearc.ops.selection import SelectionLike, publish_measured_selection

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = ["detected"]


def detected(
    ds: AnalysisStore,
    assay: str = "RNA",
    *,
    cell_selection: SelectionLike = None,
    invalidate_cache: bool = False,
) -> Artifact:
    """The cells with a non-zero count of each feature, over the selected cells (a ``detected`` artifact).

    scanpy's ``n_cells_by_counts`` and Scarf's ``nCells`` of a feature. The
    artifact holds ``n_cells`` (int64) and ``fraction`` (float64, of the
    selected cells), one value per feature. Over every cell of the store
    they are the stored count summary ``columnPositive`` (nothing is read);
    over a selection, one pass over the selected rows of ``counts``.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        The assay.
    cell_selection
        The cells: a ``cell_selection`` artifact or its ref, the name of a
        boolean cell column, a boolean mask over every cell, or None for ``I``.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``detected`` artifact.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    UnmeasuredCellsError
        A selected cell was not measured by ``assay`` (checked before anything is written).
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=300, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> found = ds.features.detected("RNA")
    >>> found.read("n_cells").shape, bool((found.read("fraction") <= 1).all())
    ((600,), True)
    """
    operation = "features.detected"
    selection = publish_measured_selection(ds, assay, cell_selection, operation=operation)
    source = ds.assays[assay]

    def build(writer: ArtifactWriter) -> None:
        rows = selection.rows.astype(np.int64)
        if len(rows) == source.shape[0]:
            n_cells = source.summary("columnPositive").astype(np.int64)
        else:
            counts = take_rows(source.counts, rows)
            (found,) = writer.run((counts != 0).sum(axis=0, dtype=np.int64))
            n_cells = np.asarray(found, dtype=np.int64)
        writer.write("n_cells", n_cells)
        writer.write("fraction", n_cells / max(1, len(rows)))

    return reuse_or_publish(
        ds,
        scope=assay,
        kind="detected",
        operation=operation,
        parameters={"assay": assay},
        inputs={"cells": selection.ref, "counts": source.content_fingerprint},
        build=build,
        invalidate_cache=invalidate_cache,
    )
