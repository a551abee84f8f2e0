"""``SubsetZarr``: a new store holding some cells of a source store.

Counts keep the source dtype and layout policy (halved until its writes fit
``mem_budget``); each kept assay keeps its membership column (the selected
rows) and its declared type. Cell and feature columns that an analysis wrote,
artifacts and pipeline runs are not copied: recompute them on the subset.

Run it as ``cytearc subset SRC DEST --cells COLUMN`` or
``python -m cytearc.tools.subset_zarr SRC DEST --cells COLUMN``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cytearc.artifacts.refs import ArtifactRef
from cytearc.assays.types import RNA_TYPES
from cytearc.engine.cluster import get_engine
from cytearc.errors import ArtifactError, AssayNotFoundError, OperationArgumentError
from cytearc.metadata.membership import membership_column
from cytearc.ops.selection import open_selection
from cytearc.storage.counts import fit_layout
from cytearc.storage.destinations import validate_destination, writable_location
from cytearc.storage.store import Store
from cytearc.tools._cli import add_writer_options, report_store
from cytearc.tools._cli import main as run_command
from cytearc.tools._writing import (
    carried_columns,
    create_store,
    finish_store,
    refuse_overlap,
    refuse_pending,
    table_frame,
    write_assay,
    write_cells,
)

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from cytearc.engine.cluster import Engine
    from cytepool.locations import Location

__all__ = ["SubsetZarr", "main"]

CellsLike = str | ArtifactRef | np.ndarray | Sequence[int] | Sequence[bool]
"""A boolean cell column, a cell-selection artifact ref, a boolean mask or integer positions."""


def _rows(store: Store, cells: CellsLike) -> np.ndarray:
    """The source rows ``cells`` selects, as increasing or given positions."""
    n = store.cells.n_rows
    if isinstance(cells, ArtifactRef) or (isinstance(cells, str) and "/artifacts/" in f"/{cells}"):
        try:
            ref = ArtifactRef.parse(cells)
        except ArtifactError as exc:
            msg = f"cells {cells!r}: not a cell column, and not a cell_selection ref ({exc})"
            raise OperationArgumentError(msg) from exc
        return np.flatnonzero(open_selection(store, ref).mask)
    if isinstance(cells, str):
        values = store.cells.fetch_series(cells)
        if values.dtype != bool:
            msg = f"{store.where}/cellData/{cells}: cells: expected a boolean column (without missing values), found dtype {values.dtype}; pass a boolean column, mask or positions"
            raise OperationArgumentError(msg)
        return np.flatnonzero(values.to_numpy())
    array = np.asarray(cells)
    if array.dtype == bool:
        if array.shape != (n,):
            msg = f"cells: a boolean mask of {array.shape} values for the {n} cells of {store.where}; pass one value per cell"
            raise OperationArgumentError(msg)
        return np.flatnonzero(array)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        msg = f"cells: expected a boolean column name, a mask, integer positions or a cell_selection ref, found an array of dtype {array.dtype} and shape {array.shape}"
        raise OperationArgumentError(msg)
    rows = array.astype(np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        msg = f"cells: positions must lie in 0..{n - 1} (the cells of {store.where}), found {rows.min()}..{rows.max()}"
        raise OperationArgumentError(msg)
    if len(np.unique(rows)) != len(rows):
        msg = "cells: positions repeat; a cell can be kept once (cell ids must stay unique)"
        raise OperationArgumentError(msg)
    return rows


class SubsetZarr:
    """Write the cells ``cells`` of ``source`` into a new store at ``destination``.

    Parameters
    ----------
    source
        The source store: a path, an fsspec URL or an open store.
    destination
        A new local directory or fsspec URL (or an unprepared store that
        ``overwrite`` replaces); it may not overlap ``source``.
    cells
        A boolean cell column name, a boolean mask, integer positions (in the
        order the subset keeps them), or the ref of a ``cell_selection``
        artifact.
    assays
        The assays to keep (default all).
    overwrite
        Replace an unprepared CyteArc store at the destination.
    mem_budget, workers, cluster
        The engine (see :func:`cytearc.engine.get_engine`).
    storage_options
        The fsspec options of a source URL, and of a destination URL unless
        ``destination_storage_options`` are given; never recorded.
    destination_storage_options
        The fsspec options of a destination URL, when they differ.
    show_progress
        Progress bars.
    workspace
        Read the cells, tables and membership of this workspace of a source
        given by its location (an open store brings its own). The subset is
        a store of its own: it holds no workspace and no run.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_store(f"{d}/ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    ...     out = SubsetZarr(path, f"{d}/half.zarr", cells=np.arange(150), cluster="threads",
    ...                      show_progress=False).dump()
    ...     DataStore(out).RNA.shape
    (150, 600)
    """

    def __init__(
        self,
        source: str | Path | Store,
        destination: str | Path,
        *,
        cells: CellsLike,
        assays: Sequence[str] | None = None,
        overwrite: bool = False,
        mem_budget: str | int | float | None = None,
        workers: int | str | None = None,
        cluster: object = None,
        storage_options: dict[str, Any] | None = None,
        destination_storage_options: dict[str, Any] | None = None,
        show_progress: bool = True,
        workspace: str | None = None,
    ) -> None:
        self.source = source
        self.workspace = workspace
        self.destination = destination
        self.cells = cells
        self.assays = None if assays is None else list(assays)
        self.overwrite = overwrite
        self.engine_options: dict[str, Any] = {
            "mem_budget": mem_budget,
            "workers": workers,
            "cluster": cluster,
        }
        self.storage_options = storage_options
        self.destination_storage_options = (
            storage_options if destination_storage_options is None else destination_storage_options
        )
        self.show_progress = show_progress

    def dump(self) -> Path | str:
        """Write the subset; nothing is written before every check passed.

        Returns
        -------
        pathlib.Path or str
            The new store (its URL when it was written to one).

        Raises
        ------
        DestinationOverlapError
            The destination is, holds or lies inside the source.
        DestinationExistsError
            The destination holds data ``overwrite`` may not replace.
        PendingAssayError
            The source holds a pending derived assay.
        AssayNotFoundError
            ``assays`` names an assay the source does not have.
        OperationArgumentError
            ``cells`` selects no cell, is not a boolean column, mask,
            positions in range without repeats, or a cell_selection ref.
        MemBudgetError
            Not even count shards of one row fit a worker's memory.
        """
        destination = writable_location(
            self.destination, storage_options=self.destination_storage_options
        )
        store = (
            self.source
            if isinstance(self.source, Store)
            else Store(
                self.source,
                storage_options=self.storage_options,
                show_progress=self.show_progress,
                workspace=self.workspace,
            )
        )
        refuse_overlap([store.where], destination)
        path = validate_destination(destination, overwrite=self.overwrite)
        refuse_pending(store)
        names = list(store.assays) if self.assays is None else self.assays
        for name in names:
            if name not in store.assays:
                msg = f"{store.where}: assays: no assay {name!r}; it has {list(store.assays)}"
                raise AssayNotFoundError(msg)
        rows = _rows(store, self.cells)
        if not len(rows):
            msg = f"{store.where}: cells {self.cells!r} selects no cell; a store needs at least one"
            raise OperationArgumentError(msg)
        engine = get_engine(**self.engine_options)
        layouts = {
            name: fit_layout(
                store.assays[name].layout,
                shape=(len(rows), store.assays[name].shape[1]),
                dtype=store.assays[name].dtype,
                budget=engine.worker_memory(),
                where=f"{path}: assay {name}",
            )
            for name in names
        }
        return self._write(store, path, names=names, rows=rows, layouts=layouts, engine=engine)

    def _write(
        self,
        store: Store,
        path: Location,
        *,
        names: list[str],
        rows: np.ndarray,
        layouts: dict[str, Any],
        engine: Engine,
    ) -> Path | str:
        root = create_store(
            path,
            overwrite=self.overwrite,
            assay_types={name: store.assay_types[name] for name in names},
        )
        cells = table_frame(store.cells, carried_columns(store.cells, store.assays), rows)
        membership = {
            name: store.cells.fetch_all(column)[rows].astype(bool)
            for name in names
            if (column := membership_column(store.cells, name)) is not None
        }
        write_cells(root, cells, membership=membership, where=str(path))
        features, fingerprints = {}, {}
        for name in names:
            assay = store.assays[name]
            features[name] = table_frame(assay.features, carried_columns(assay.features, ()))
            fingerprints[name] = write_assay(
                root,
                name,
                features[name],
                assay.counts[rows],
                transpose=store.assay_types[name] in RNA_TYPES,
                layout=layouts[name],
                compressor=assay.compressor,
                engine=engine,
                where=str(path),
                derived=assay.derived,
            )
        finish_store(root, cells, features, fingerprints)
        return path.path or str(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``cytearc subset`` (and of this module's command line).

    Parameters
    ----------
    parser
        The parser to add them to.
    """
    parser.add_argument("source")
    parser.add_argument("destination")
    parser.add_argument(
        "--cells", required=True, help="a boolean cell column, or a cell_selection artifact ref"
    )
    parser.add_argument(
        "--assays", default=None, help="comma-separated assays to keep (default all)"
    )
    parser.add_argument(
        "--workspace", default=None, help="read the source's tables from this workspace"
    )
    add_writer_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``cytearc subset`` from parsed arguments.

    Parameters
    ----------
    args
        The arguments of :func:`add_arguments`.

    Returns
    -------
    int
        0.
    """
    path = SubsetZarr(
        args.source,
        args.destination,
        cells=args.cells,
        assays=None if args.assays is None else args.assays.split(","),
        overwrite=args.overwrite,
        mem_budget=args.mem_budget,
        workers=args.workers,
        cluster=args.cluster,
        show_progress=not args.json,
        workspace=args.workspace,
    ).dump()
    return report_store(path, as_json=args.json, done="wrote the subset")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: exit 0 on success, 1 with one line naming the error, 2 on usage errors.

    Parameters
    ----------
    argv
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code.
    """
    return run_command(
        argv,
        prog="python -m cytearc.tools.subset_zarr",
        description="Write some cells of a CyteArc store into a new store.",
        add_arguments=add_arguments,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
