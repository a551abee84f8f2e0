"""The notebook view of a :class:`~cytearc.DataStore`, read from its metadata alone.

The view (``DataStore._repr_html_``, built with :mod:`cytepool._html`) reads
attributes and small JSON documents: the cell table's column list, each
assay's array metadata, the artifacts' and runs' records. It reads no count
value, computes nothing, and never starts or reaches a cluster: the engine
row says which engine the store will use, and links the Dask dashboard only
when that engine is already running in this process.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from distributed import Client

from cytearc.engine import cluster as engine_cluster
from cytearc.errors import CyteArcError
from cytearc.pipeline import ledger
from cytepool._html import Html, code, items, link, table, text, view, when

if TYPE_CHECKING:
    from cytearc.datastore import DataStore
    from cytearc.engine import Engine
    from cytepool._html import Row

__all__ = ["engine_rows", "store_view"]


def _dashboard(engine: Engine | None) -> Html | None:
    """The dashboard link of an engine that is running, else None."""
    if engine is None or engine.client is None or engine.client.status != "running":
        return None
    try:
        address = engine.dashboard_link
    except Exception:  # a view never fails: a scheduler that went away has no link
        return None
    return None if address is None else link(address)


def engine_rows(*, cluster: object, mem_budget: object, workers: object) -> list[Row]:
    """The engine of a store's options and its dashboard, without starting or reaching a cluster.

    Parameters
    ----------
    cluster, mem_budget, workers
        The store's engine options (see :func:`cytearc.engine.get_engine`).

    Returns
    -------
    list of Row
        ``engine`` and, when that engine runs in this process, ``dashboard``.
    """
    variable = engine_cluster.CLUSTER_VARIABLE
    named = ""
    if cluster is None and os.environ.get(variable):
        cluster, named = os.environ[variable], f" (named by {variable})"
    if cluster == "threads":
        return [("engine", f"Dask's threaded scheduler in this process{named} (no dashboard)")]
    if isinstance(cluster, Client):
        running = engine_cluster.Engine(client=cluster, budget=None)
        return [
            ("engine", f"the distributed.Client given ({cluster.status})"),
            ("dashboard", _dashboard(running)),
        ]
    if isinstance(cluster, str):
        dashboard = _dashboard(engine_cluster.running_engine(cluster))
        state = "connected" if dashboard else "connected on the first computation"
        return [
            ("engine", Html(f"the cluster at {code(cluster)}{text(named)}, {state}")),
            ("dashboard", dashboard),
        ]
    local = engine_cluster.running_engine()
    dashboard = _dashboard(local)
    if dashboard is not None and local is not None:
        return [
            ("engine", f"this process's local cluster: {local.budget}"),
            ("dashboard", dashboard),
        ]
    given = ", ".join(
        f"{name}={value!r}"
        for name, value in (("mem_budget", mem_budget), ("workers", workers))
        if value is not None
    )
    budget = given or "the default budget"
    return [
        ("engine", f"a local cluster of this process ({budget}), started on the first computation")
    ]


def _assay_rows(ds: DataStore) -> list[list[object]]:
    """One row per assay; an assay that does not open says so, and the others still show."""
    rows: list[list[object]] = []
    for name in ds.assays:
        try:
            assay = ds.assays[name]
        except CyteArcError as error:
            broken = f"does not open: {type(error).__name__}"
            rows.append([name, ds.assay_types.get(name, ""), broken, "", ""])
            continue
        n_cells, n_features = assay.shape
        shape = f"{n_cells:,} x {n_features:,}"
        rows.append([name, assay.assayType, shape, assay.dtype, code(assay.content_fingerprint)])
    return rows


def _artifacts(ds: DataStore) -> Html:
    """How many published artifacts there are, and the newest."""
    listed = ds.list_artifacts()
    if not listed:
        return Html("none")
    rows = [
        [a.ref.kind, a.ref.scope or "datastore", a.provenance["operation"], code(a.ref)]
        for a in reversed(listed)
    ]
    shown = table(rows, header=("kind", "scope", "operation", "ref"))
    return Html(f"{len(listed)}, newest first{shown}")


def _runs(ds: DataStore) -> Html:
    """How many readable runs there are, and the newest."""
    records = ledger.list_runs(ds.root, where=ds.where)
    if not records:
        return Html("none")
    rows = [
        [code(r.run_id), r.recipe, r.assay, r.label or "", r.status, when(r.started_at_ns)]
        for r in reversed(records)
    ]
    shown = table(rows, header=("run", "recipe", "assay", "label", "status", "started"))
    return Html(f"{len(records)}, newest first{shown}")


def _sources(ds: DataStore) -> Html | None:
    """What a composite or a mounted target reads its counts from, else None."""
    if ds.composite is not None:
        names = [b.name for b in ds.composite.manifest.sources]
        return Html(f"a composite of {len(names)} sources: {items(names)}")
    if ds.mount is not None:
        return Html(f"mounted from {code(ds.mount.where)}")
    return None


def store_view(ds: DataStore, *, engine: list[Row]) -> Html:
    """The view of an open store: location, cells, assays, fingerprint, artifacts, runs and engine.

    Parameters
    ----------
    ds
        The store.
    engine
        Its :func:`engine_rows`.

    Returns
    -------
    Html
        The markup.
    """
    workspaces = ds.workspaces
    if ds.workspace is not None:
        workspace: object = ds.workspace
    else:
        workspace = Html(f"the root (workspaces: {items(workspaces)})") if workspaces else None
    assays = table(
        _assay_rows(ds), header=("assay", "type", "cells x features", "dtype", "counts fingerprint")
    )
    pending = items(ds.pending_assays) if ds.pending_assays else None
    rows: list[Row] = [
        ("location", code(ds.where)),
        ("workspace", workspace),
        ("opened", "for writing" if ds.writable else "read-only"),
        ("sources", _sources(ds)),
        ("cells", f"{ds.cells.n_rows:,}"),
        ("cell columns", items(ds.cells.columns)),
        ("assays", assays),
        ("pending assays", pending),
        ("dataset fingerprint", code(ds.dataset_fingerprint)),
        ("artifacts", _artifacts(ds)),
        ("runs", _runs(ds)),
        *engine,
    ]
    return view(f"{type(ds).__name__} {ds.where}", rows)
