"""``DataStoreMerge``: stores merged into one, cells concatenated and features joined by id.

Cells follow the sources in order, their ids prefixed ``<name>__``; ordinary
cell columns become ``<prepend_text>_<column>`` (missing where a source lacks
the column). Each merged assay's features are the sources' features joined by
id in order of first appearance; a source without a feature (or without the
assay) contributes zeros. The count dtype is the common type of the sources'
dtypes: every merged value comes from exactly one source value, since a
store's feature ids are unique, so the common type holds every value without
widening; integer sources without a common integer dtype are refused. Each
merged assay gets the membership column ``<assay>_I``: False where a source
lacks the assay, True where it has no membership column, the source's values
otherwise.

A merge is resumable: the root attribute ``cytearc:merge`` (the manifest)
records the sources (dataset and counts fingerprints, membership state per
assay), each assay's layout, and the rows of ``counts`` already written. Run
the same merge again after a kill and it writes only the bands it had not
finished; a source that changed in between is refused, and a changed
``mem_budget`` keeps the persisted layout.

Run it as ``cytearc merge SRC1 SRC2 ... -o DEST`` or
``python -m cytearc.tools.datastore_merge SRC1 SRC2 ... -o DEST``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import dask.array as da
import numpy as np
import pandas as pd
import zarr
from dask.delayed import delayed
from tqdm.auto import tqdm

from cytearc.assays.types import RNA_TYPES
from cytearc.engine.cluster import get_engine
from cytearc.errors import AssayNotFoundError, MergePlanError, MergeResumeError
from cytearc.metadata.encoding import column_digest
from cytearc.metadata.membership import MEMBERSHIP_ROLE
from cytearc.storage.counts import (
    CountsWriter,
    fit_layout,
    read_band_result,
    write_band,
    write_summaries,
)
from cytearc.storage.destinations import validate_destination, writable_location
from cytearc.storage.layout import CountLayout
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
    write_assay_group,
    write_cells,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from cytearc.engine.cluster import Engine
    from cytepool.locations import Location

__all__ = ["MANIFEST_ATTRIBUTE", "DataStoreMerge", "main"]

MANIFEST_ATTRIBUTE: Final = "cytearc:merge"
"""The root attribute of a merged store that records its sources and progress."""


@dataclass(frozen=True, kw_only=True)
class AssayPlan:
    """How one assay is merged."""

    name: str
    assay_type: str
    dtype: np.dtype
    features: pd.DataFrame
    positions: list[np.ndarray | None]
    """Per source: the merged column of each of its features, or None when it lacks the assay."""
    membership: list[np.ndarray]
    states: list[str]
    """Per source: ``missing``, ``all`` or the digest of its membership column."""


def _common_dtype(name: str, dtypes: list[np.dtype], sources: list[str]) -> np.dtype:
    common = np.result_type(*dtypes)
    if all(d.kind in "iu" for d in dtypes) and common.kind not in "iu":
        listed = ", ".join(f"{s}: {d}" for s, d in zip(sources, dtypes, strict=True))
        msg = f"assay {name}: the sources' integer count dtypes ({listed}) have no common integer dtype; refusing to store counts as floats - merge sources of compatible dtypes"
        raise MergePlanError(msg)
    return np.dtype(common)


def _concat(parts: list[pd.Series | None], lengths: list[int]) -> pd.Series:
    """One merged column from each source's series (None where a source lacks the column)."""
    present = [p for p in parts if p is not None]
    if all(isinstance(p.dtype, pd.CategoricalDtype) for p in present):
        categories = pd.Index(pd.unique(pd.concat([pd.Series(p.cat.categories) for p in present])))
        pieces = [
            pd.Series(pd.Categorical([None] * n, categories=categories))
            if p is None
            else p.cat.set_categories(categories)
            for p, n in zip(parts, lengths, strict=True)
        ]
        return pd.concat(pieces, ignore_index=True)
    if len(present) < len(parts):
        present = [
            p.astype("boolean")
            if p.dtype == bool
            else p.astype("Int64")
            if p.dtype.kind in "iu"
            else p
            for p in present
        ]
        template = present[0].iloc[:0]
        filled = iter(present)
        pieces = [
            template.reindex(range(n)) if p is None else next(filled)
            for p, n in zip(parts, lengths, strict=True)
        ]
        return pd.concat(pieces, ignore_index=True)
    return pd.concat(present, ignore_index=True)


def _stack(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Tables stacked, with every column of any (missing where a table lacks it)."""
    columns = list(dict.fromkeys(c for t in tables for c in t.columns))
    lengths = [len(t) for t in tables]
    return pd.DataFrame(
        {c: _concat([t[c] if c in t.columns else None for t in tables], lengths) for c in columns}
    )


def _widen(block: np.ndarray, positions: np.ndarray, n_out: int, dtype: np.dtype) -> np.ndarray:
    out = np.zeros((block.shape[0], n_out), dtype=dtype)
    out[:, positions] = block
    return out


class DataStoreMerge:
    """Merge ``sources`` into a new store at ``destination``.

    Parameters
    ----------
    sources
        The source stores (paths, fsspec URLs or open stores), at least two.
    destination
        A new local directory or fsspec URL, or an interrupted merge of the
        same sources to finish; it may not overlap a source.
    names
        One name per source, prefixed to its cell ids (default the store
        folders' names without ``.zarr``).
    assays
        The assays to merge (default every assay of any source).
    overwrite
        Replace an unprepared CyteArc store (or an interrupted merge) at the
        destination instead of finishing it.
    mem_budget, workers, cluster
        The engine (see :func:`cytearc.engine.get_engine`).
    prepend_text
        The prefix of ordinary cell columns (``orig_sample`` for ``sample``);
        None keeps their names.
    storage_options
        The fsspec options of source URLs, and of a destination URL unless
        ``destination_storage_options`` are given; never recorded.
    destination_storage_options
        The fsspec options of a destination URL, when they differ.
    show_progress
        Progress bars.
    workspaces
        One workspace (or None for the root) per source given by its
        location, whose cells, tables and membership are merged; an open
        store brings its own. The manifest records each source's workspace.
        The merged store holds no workspace and no run.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     a = write_store(f"{d}/a.zarr", n_cells=200, n_genes=600, cluster="threads")
    ...     b = write_store(f"{d}/b.zarr", n_cells=100, n_genes=600, cluster="threads", seed=1)
    ...     out = DataStoreMerge([a, b], f"{d}/ab.zarr", cluster="threads", show_progress=False).dump()
    ...     merged = DataStore(out)
    ...     merged.RNA.shape, merged.cells.fetch_all("ids")[0][:3], merged.cells.columns[:2]
    ((300, 600), 'a__', ['ids', 'orig_cell_type'])
    """

    def __init__(
        self,
        sources: Sequence[str | Path | Store],
        destination: str | Path,
        *,
        names: Sequence[str] | None = None,
        assays: Sequence[str] | None = None,
        overwrite: bool = False,
        mem_budget: str | int | float | None = None,
        workers: int | str | None = None,
        cluster: object = None,
        prepend_text: str | None = "orig",
        storage_options: dict[str, Any] | None = None,
        destination_storage_options: dict[str, Any] | None = None,
        show_progress: bool = True,
        workspaces: Sequence[str | None] | None = None,
    ) -> None:
        self.sources = list(sources)
        self.workspaces = None if workspaces is None else list(workspaces)
        self.destination = destination
        self.names = None if names is None else list(names)
        self.assays = None if assays is None else list(assays)
        self.overwrite = overwrite
        self.engine_options: dict[str, Any] = {
            "mem_budget": mem_budget,
            "workers": workers,
            "cluster": cluster,
        }
        self.prepend_text = prepend_text
        self.storage_options = storage_options
        self.destination_storage_options = (
            storage_options if destination_storage_options is None else destination_storage_options
        )
        self.show_progress = show_progress

    # --- planning: every refusal before anything is written ------------------------

    def _open(self) -> list[Store]:
        if len(self.sources) < 2:
            msg = f"sources: a merge needs at least two stores, found {len(self.sources)}; copy one store with SubsetZarr or repack_zarr"
            raise MergePlanError(msg)
        workspaces = self.workspaces or [None] * len(self.sources)
        if len(workspaces) != len(self.sources):
            msg = f"workspaces: {len(workspaces)} workspaces for {len(self.sources)} sources; give one per source (None for a store's root)"
            raise MergePlanError(msg)
        return [
            s
            if isinstance(s, Store)
            else Store(
                s, storage_options=self.storage_options, show_progress=False, workspace=workspace
            )
            for s, workspace in zip(self.sources, workspaces, strict=True)
        ]

    def _names(self, stores: list[Store]) -> list[str]:
        names = self.names
        if names is None:
            names = [
                Path(s.where.rstrip("/")).name.removesuffix(".zarr")
                + ("" if s.workspace is None else f"_{s.workspace}")
                for s in stores
            ]
        if len(names) != len(stores):
            msg = f"names: {len(names)} names for {len(stores)} sources; give one per source"
            raise MergePlanError(msg)
        bad = [n for n in names if not n or "/" in n or "__" in n]
        if bad or len(set(names)) != len(names):
            msg = f"names {names}: each source needs a unique non-empty name without '/' or '__' (it prefixes the cell ids); pass names=[...]"
            raise MergePlanError(msg)
        return names

    def _assay_names(self, stores: list[Store]) -> list[str]:
        found = list(dict.fromkeys(name for s in stores for name in s.assays))
        if self.assays is None:
            return found
        missing = [n for n in self.assays if n not in found]
        if missing:
            msg = f"assays: no source has {missing}; the sources have {found}"
            raise AssayNotFoundError(msg)
        return list(dict.fromkeys(self.assays))

    def _membership(self, store: Store, assay: str) -> tuple[np.ndarray, str]:
        """A source's membership of ``assay`` and its manifest state, refusing a broken column."""
        n = store.cells.n_rows
        if assay not in store.assays:
            return np.zeros(n, dtype=bool), "missing"
        column = f"{assay}_I"
        if column not in store.cells.columns:
            return np.ones(n, dtype=bool), "all"
        attrs = store.cells.attributes(column)
        values = store.cells.fetch_series(column)
        if (
            values.dtype != bool
            or attrs.get("role") != MEMBERSHIP_ROLE
            or attrs.get("assay") != assay
        ):
            msg = (
                f"{store.where}/cellData/{column}: the reserved membership name of assay {assay}, "
                f"but dtype {values.dtype}, role {attrs.get('role')!r}, assay {attrs.get('assay')!r} "
                f"(expected bool without missing values, role {MEMBERSHIP_ROLE!r}, assay {assay!r}); "
                "drop or rename the column in the source, then merge"
            )
            raise MergePlanError(msg)
        measured = values.to_numpy()
        sums = store.assays[assay].summary("rowSums")
        outside = int(np.count_nonzero(sums[~measured]))
        if outside:
            msg = f"{store.where}: assay {assay}: {outside} cells outside its membership column {column} hold counts; the membership is wrong - re-import the source"
            raise MergePlanError(msg)
        return measured, column_digest({"": measured})

    def plan_assay(self, stores: list[Store], names: list[str], assay: str) -> AssayPlan:
        """How ``assay`` is merged: its type, common dtype, the union of features and each source's columns."""
        holders = [(s, n) for s, n in zip(stores, names, strict=True) if assay in s.assays]
        types = {s.assay_types[assay] for s, _ in holders}
        if len(types) != 1:
            listed = ", ".join(f"{n}: {s.assay_types[assay]}" for s, n in holders)
            msg = f"assay {assay}: the sources declare different types ({listed}); open each source once with zarr_mode='r+' and the same assay_types, then merge"
            raise MergePlanError(msg)
        dtype = _common_dtype(
            assay, [s.assays[assay].dtype for s, _ in holders], [n for _, n in holders]
        )
        tables = {
            n: table_frame(s.assays[assay].features, carried_columns(s.assays[assay].features, ()))
            for s, n in holders
        }
        seen: set[str] = set()
        new_rows = []
        for table in tables.values():
            ids = table["ids"].astype(str)
            fresh = ~ids.isin(seen).to_numpy()
            new_rows.append(table[fresh].reset_index(drop=True))
            seen.update(ids[fresh])
        features = _stack(new_rows)
        index = pd.Index(features["ids"])
        positions = [
            index.get_indexer(tables[n]["ids"]).astype(np.int64) if assay in s.assays else None
            for s, n in zip(stores, names, strict=True)
        ]
        membership = [self._membership(s, assay) for s in stores]
        return AssayPlan(
            name=assay,
            assay_type=types.pop(),
            dtype=dtype,
            features=features,
            positions=positions,
            membership=[m for m, _ in membership],
            states=[state for _, state in membership],
        )

    def plan_cells(
        self, stores: list[Store], names: list[str], plans: list[AssayPlan]
    ) -> pd.DataFrame:
        """The merged cell table: ids prefixed by the source names, carried columns joined."""
        lengths = [s.cells.n_rows for s in stores]
        carried = [carried_columns(s.cells, s.assays) for s in stores]
        ids = pd.Series(
            np.concatenate(
                [
                    np.array([f"{n}__{i}" for i in s.cells.fetch_all("ids")], dtype=object)
                    for s, n in zip(stores, names, strict=True)
                ]
            )
        )
        frame: dict[str, pd.Series] = {"ids": ids}
        reserved = {f"{p.name}_I" for p in plans}
        for column in dict.fromkeys(c for cs in carried for c in cs if c != "ids"):
            target = (
                column
                if column == "I" or self.prepend_text is None
                else f"{self.prepend_text}_{column}"
            )
            if target in reserved:
                msg = f"cell column {column!r}: merged as {target!r}, the membership column of assay {target[:-2]}; rename it in the source or pass another prepend_text"
                raise MergePlanError(msg)
            parts = [
                s.cells.fetch_series(column) if column in cs else None
                for s, cs in zip(stores, carried, strict=True)
            ]
            frame[target] = _concat(parts, lengths)
        return pd.DataFrame(frame)

    def _manifest(
        self, stores: list[Store], names: list[str], plans: list[AssayPlan]
    ) -> dict[str, Any]:
        return {
            "sources": [
                {
                    "name": n,
                    "location": s.where,
                    "workspace": s.workspace,
                    "datasetFingerprint": s.dataset_fingerprint,
                    "counts": {
                        p.name: s.assays[p.name].content_fingerprint if p.name in s.assays else None
                        for p in plans
                    },
                    "membership": {p.name: p.states[i] for p in plans},
                }
                for i, (s, n) in enumerate(zip(stores, names, strict=True))
            ],
            "assays": [p.name for p in plans],
            "dtypes": {p.name: str(p.dtype) for p in plans},
            "prependText": self.prepend_text,
            "layouts": {},
            "written": {},
        }

    # --- writing ---------------------------------------------------------------------

    def dump(self) -> Path | str:
        """Write the merge, or finish an interrupted one.

        Returns
        -------
        pathlib.Path or str
            The merged store.

        Raises
        ------
        MergePlanError
            Fewer than two sources, names that are not unique, assays of
            different declared types, integer dtypes without a common integer
            dtype, or membership columns that break the rules.
        MergeResumeError
            The destination is an interrupted merge of other sources (or of
            sources changed since); pass ``overwrite=True`` to start again.
        DestinationOverlapError
            The destination is, holds or lies inside a source.
        DestinationExistsError
            The destination holds data that is neither an interrupted merge
            nor replaceable.
        PendingAssayError
            A source holds a pending derived assay.
        AssayNotFoundError
            ``assays`` names an assay no source has.
        """
        destination = writable_location(
            self.destination, storage_options=self.destination_storage_options
        )
        stores = self._open()
        refuse_overlap([s.where for s in stores], destination)
        for store in stores:
            refuse_pending(store)
        names = self._names(stores)
        plans = [self.plan_assay(stores, names, a) for a in self._assay_names(stores)]
        cells = self.plan_cells(stores, names, plans)
        manifest = self._manifest(stores, names, plans)
        engine = get_engine(**self.engine_options)
        root, manifest = self._destination(
            destination, manifest, types={p.name: p.assay_type for p in plans}
        )
        where = str(destination)
        for name in ("cellData", *(p.name for p in plans)):
            if name in root:
                del root[name]
        write_cells(
            root,
            cells,
            membership={p.name: np.concatenate(p.membership) for p in plans},
            where=where,
        )
        fingerprints = {}
        for plan in plans:
            derived = next(
                (s.assays[plan.name].derived for s in stores if plan.name in s.assays), None
            )
            write_assay_group(root, plan.name, plan.features, derived=derived, where=where)
            fingerprints[plan.name] = self._write_counts(
                root, stores, plan, manifest, engine, where=where
            )
        finish_store(root, cells, {p.name: p.features for p in plans}, fingerprints)
        return destination.path or str(destination)

    def _destination(
        self, path: Location, manifest: dict[str, Any], *, types: dict[str, str]
    ) -> tuple[zarr.Group, dict[str, Any]]:
        """The destination's root: a new store, or the interrupted merge to finish (its manifest checked)."""
        existing = None
        if not self.overwrite and path.child("zarr.json").exists():
            try:
                existing = zarr.open_group(store=path.zarr_store(read_only=False), mode="r+")
            except (ValueError, KeyError, TypeError, FileNotFoundError):
                existing = None
        recorded = None if existing is None else existing.attrs.get(MANIFEST_ATTRIBUTE)
        if existing is None or not isinstance(recorded, dict):
            validate_destination(path, overwrite=self.overwrite)
            root = create_store(
                path,
                overwrite=self.overwrite,
                assay_types=types,
                attributes={MANIFEST_ATTRIBUTE: manifest},
            )
            return root, manifest
        if existing.attrs.get("cytearc:complete") is True:
            msg = f"{path}: already holds a complete merge; pass overwrite=True to replace it, or choose another destination"
            raise MergeResumeError(msg)
        plan_keys = ("sources", "assays", "dtypes", "prependText")
        changed = [k for k in plan_keys if recorded.get(k) != manifest[k]]
        if changed:
            msg = f"{path}: an interrupted merge of other sources or options (its manifest differs in {changed}: a source changed, or other sources, names or assays were given); pass overwrite=True to start it again"
            raise MergeResumeError(msg)
        return existing, recorded

    def _counts_group(
        self,
        root: zarr.Group,
        stores: list[Store],
        plan: AssayPlan,
        manifest: dict[str, Any],
        *,
        shape: tuple[int, int],
        budget: int,
        where: str,
    ) -> tuple[zarr.Group, CountLayout, bool]:
        """The matrix group to write, its layout, and whether it resumes an interrupted write."""
        matrices = root.require_group("matrices")
        recorded = manifest["layouts"].get(plan.name)
        existing = matrices.get(plan.name)
        if recorded is not None and isinstance(existing, zarr.Group) and "counts" in existing:
            for stale in ("countsT", "countSummaries"):
                if stale in existing:
                    del existing[stale]
            return existing, CountLayout.from_json(recorded, where=f"{where}: manifest"), True
        start = next(s.assays[plan.name].layout for s in stores if plan.name in s.assays)
        layout = fit_layout(
            start, shape=shape, dtype=plan.dtype, budget=budget, where=f"{where}: assay {plan.name}"
        )
        if plan.name in matrices:
            del matrices[plan.name]
        group = matrices.create_group(plan.name)
        manifest["layouts"][plan.name] = layout.to_json()
        manifest["written"][plan.name] = []
        root.attrs[MANIFEST_ATTRIBUTE] = manifest
        return group, layout, False

    def _write_counts(
        self,
        root: zarr.Group,
        stores: list[Store],
        plan: AssayPlan,
        manifest: dict[str, Any],
        engine: Engine,
        *,
        where: str,
    ) -> str:
        shape = (sum(s.cells.n_rows for s in stores), len(plan.features))
        group, layout, resume = self._counts_group(
            root, stores, plan, manifest, shape=shape, budget=engine.worker_memory(), where=where
        )
        holder = next(s for s in stores if plan.name in s.assays)
        writer = CountsWriter(
            group,
            shape=shape,
            dtype=plan.dtype,
            layout=layout,
            compressor=holder.assays[plan.name].compressor,
            engine=engine,
            where=f"{where}/matrices/{plan.name}",
            resume=resume,
        )
        x = self._merged(stores, plan).rechunk((writer.band_rows, shape[1]))
        starts = np.cumsum((0, *x.chunks[0][:-1])).tolist()
        done = [tuple(r) for r in manifest["written"].get(plan.name, [])]
        blocks = x.to_delayed()[:, 0]
        results: dict[int, Any] = {}
        pending = []
        read = delayed(read_band_result, pure=False)
        write = delayed(write_band, pure=False)
        for start, rows, block in zip(starts, x.chunks[0], blocks, strict=True):
            if any(a <= start and start + rows <= b for a, b in done):
                results[start] = read(writer.counts, start, rows)
            else:
                pending.append((start, rows, write(block, writer.counts, start)))
        if results:
            keys = list(results)
            for key, value in zip(keys, engine.compute(*results.values()), strict=True):
                results[key] = value
        left = sum(rows for _, rows, _ in pending)
        bar = tqdm(
            total=shape[0],
            initial=shape[0] - left,
            desc=f"merge {plan.name}",
            unit="cells",
            disable=not self.show_progress,
        )
        batch = 2 * engine.task_slots()
        for first in range(0, len(pending), batch):
            part = pending[first : first + batch]
            values = engine.compute(*(task for _, _, task in part))
            for (start, rows, _), value in zip(part, values, strict=True):
                results[start] = value
                manifest["written"][plan.name].append([start, start + rows])
                bar.update(rows)
            root.attrs[MANIFEST_ATTRIBUTE] = manifest
        bar.close()
        written = writer.complete(
            [results[s] for s in starts], transpose=plan.assay_type in RNA_TYPES
        )
        write_summaries(group, written)
        return written.content_fingerprint

    def _merged(self, stores: list[Store], plan: AssayPlan) -> da.Array:
        """The merged counts, lazy: each source's rows widened to the merged features."""
        n_out = len(plan.features)
        parts = []
        for store, positions in zip(stores, plan.positions, strict=True):
            if positions is None:
                rows = store.cells.n_rows
                parts.append(
                    da.zeros((rows, n_out), dtype=plan.dtype, chunks=(min(rows, 4096), n_out))
                )
                continue
            x = store.assays[plan.name].counts
            x = x.rechunk({1: x.shape[1]})
            parts.append(
                x.map_blocks(
                    _widen,
                    positions,
                    n_out,
                    plan.dtype,
                    dtype=plan.dtype,
                    chunks=(x.chunks[0], (n_out,)),
                )
            )
        return cast("da.Array", da.concatenate(parts, axis=0))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``cytearc merge`` (and of this module's command line).

    Parameters
    ----------
    parser
        The parser to add them to.
    """
    parser.add_argument("sources", nargs="+", help="the stores to merge, in order")
    parser.add_argument("-o", "--output", required=True, help="the merged store to write")
    parser.add_argument("--names", default=None, help="comma-separated names, one per source")
    parser.add_argument("--assays", default=None, help="comma-separated assays (default all)")
    parser.add_argument(
        "--workspaces",
        default=None,
        help="comma-separated workspaces, one per source (empty for a store's root)",
    )
    add_writer_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``cytearc merge`` from parsed arguments.

    Parameters
    ----------
    args
        The arguments of :func:`add_arguments`.

    Returns
    -------
    int
        0.
    """
    path = DataStoreMerge(
        args.sources,
        args.output,
        names=None if args.names is None else args.names.split(","),
        assays=None if args.assays is None else args.assays.split(","),
        workspaces=None
        if args.workspaces is None
        else [w or None for w in args.workspaces.split(",")],
        overwrite=args.overwrite,
        mem_budget=args.mem_budget,
        workers=args.workers,
        cluster=args.cluster,
        show_progress=not args.json,
    ).dump()
    return report_store(path, as_json=args.json, done="merged into")


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
        prog="python -m cytearc.tools.datastore_merge",
        description="Merge CyteArc stores into a new store (resumable after a kill).",
        add_arguments=add_arguments,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
