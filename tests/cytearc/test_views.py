"""The notebook views of a store, its assays and its runs: metadata only, no computation, no cluster."""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from dask.callbacks import Callback
from zarr.core.array import AsyncArray

from cytearc import DataStore
from cytearc._views import engine_rows
from cytearc.datasets import write_store
from cytearc.engine import cluster as engine_cluster
from cytearc.engine import resolve_budget
from cytearc.pipeline import ledger
from cytearc.pipeline.records import RecordedError, RunRecord, StageRecord
from cytepool.testing import raise_if_dask_computes

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cytearc.artifacts import Artifact

HOSTILE = "<script>alert(1)</script>"
COLUMN = '<img src=x onerror="alert(1)">'
DASHBOARD = "http://127.0.0.1:8787/status"


@dataclasses.dataclass(frozen=True)
class Analysed:
    """A small store with a normalized artifact, a completed run and a failed run."""

    path: Path
    normalized: Artifact
    run: RunRecord
    failed: RunRecord


def _record(ds: DataStore, *, label: str | None, stages: tuple[str, ...]) -> RunRecord:
    record = RunRecord(
        run_id=ledger.new_run_id(),
        recipe="rna_standard",
        requested_label=label,
        label=None,
        assay="RNA",
        started_at_ns=time.time_ns(),
        status="running",
        complete=False,
        cytearc_version="1.0.0",
        config={"n_top": 100, "note": HOSTILE},
        stage_order=stages,
    )
    ledger.create_run(ds.root, record, where=ds.where)
    return record


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    """Recorded by hand through the ledger (running the recipe would take many seconds)."""
    path = write_store(
        tmp_path_factory.mktemp("views") / "ds.zarr",
        n_cells=300,
        n_genes=600,
        cluster="threads",
        show_progress=False,
    )
    ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    ds.cells.insert(COLUMN, np.arange(300))
    normalized = ds.features.normalize("RNA")
    run = _record(ds, label=HOSTILE, stages=("normalize",))
    started = run.started_at_ns
    stage = StageRecord(
        stage="normalize",
        ordinal=0,
        started_at_ns=started,
        finished_at_ns=started + 10**9,
        status="completed",
        complete=True,
        outputs={"normalized": str(normalized.ref)},
        metrics={"seconds": 1.25, "rss": {"peakBytes": {"total": 3 * 2**20}}},
    )
    ledger.write_stage(ds.root, run.run_id, stage, where=ds.where)
    ledger.claim_label(ds.root, label=HOSTILE, run_id=run.run_id, where=ds.where)
    run = dataclasses.replace(
        run,
        label=HOSTILE,
        status="completed",
        complete=True,
        finished_at_ns=started + 2 * 10**9,
        outputs={"normalized": str(normalized.ref)},
        fields=(),
    )
    ledger.write_run(ds.root, run, where=ds.where)
    failed = _record(ds, label=None, stages=("normalize", "hvgs"))
    failed = dataclasses.replace(
        failed,
        status="failed",
        complete=True,
        finished_at_ns=failed.started_at_ns + 10**8,
        error=RecordedError(error_type="CyteArcError", message=HOSTILE),
    )
    ledger.write_run(ds.root, failed, where=ds.where)
    return Analysed(path=path, normalized=normalized, run=run, failed=failed)


class _RefuseGraphs(Callback):
    """Fails on any Dask graph run on a local scheduler, whatever scheduler the code picks."""

    def _start(self, dsk: Any) -> None:
        msg = "the view computed a Dask graph"
        raise AssertionError(msg)


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No local cluster runs; starting or reaching an engine, computing or reading a value fails."""

    def refuse(*args: object, **kwargs: object) -> None:
        msg = "the view started or reached an engine, or read an array's values"
        raise AssertionError(msg)

    monkeypatch.delenv(engine_cluster.CLUSTER_VARIABLE, raising=False)
    monkeypatch.setattr(engine_cluster, "_local", None)
    monkeypatch.setattr(engine_cluster, "get_engine", refuse)
    monkeypatch.setattr("cytearc.storage.store.get_engine", refuse)
    monkeypatch.setattr(AsyncArray, "_get_selection", refuse)
    with raise_if_dask_computes(), _RefuseGraphs():
        yield


def test_store_view_shows_location_assays_fingerprints_artifacts_and_runs(
    analysed: Analysed, parse_html
) -> None:
    """The view names the store, its cells and assays, both fingerprints, its artifacts and runs."""
    ds = DataStore(analysed.path, cluster="threads", show_progress=False)
    parsed = parse_html(ds._repr_html_())
    assert str(analysed.path) in parsed.text
    assert "300 x 600" in parsed.text
    assert ds.dataset_fingerprint in parsed.text
    assert ds.assays["RNA"].content_fingerprint in parsed.text
    assert str(analysed.normalized.ref) in parsed.text
    assert analysed.run.run_id in parsed.text
    assert analysed.failed.run_id in parsed.text
    assert "threaded scheduler" in parsed.text
    assert parsed.links == []


def test_store_view_escapes_hostile_names(analysed: Analysed, parse_html) -> None:
    """A cell column and a run label written as markup are shown as text, never as tags."""
    ds = DataStore(analysed.path, cluster="threads", show_progress=False)
    parsed = parse_html(ds._repr_html_())
    assert {"script", "img"}.isdisjoint(parsed.tags)
    assert COLUMN in parsed.text
    assert HOSTILE in parsed.text


def test_the_guard_refuses_an_engine_and_a_value_read(analysed: Analysed, no_engine: None) -> None:
    """The guard of the next test does fail on starting the engine and on reading values."""
    ds = DataStore(analysed.path, show_progress=False)
    with pytest.raises(AssertionError, match="engine"):
        ds.engine  # noqa: B018 (the property starts the engine)
    with pytest.raises(AssertionError, match="values"):
        ds.assays["RNA"].summary("rowSums")


def test_store_view_computes_nothing_and_starts_no_cluster(
    analysed: Analysed, no_engine: None, parse_html
) -> None:
    """With the default engine not yet started, the view reads no value, computes nothing, starts nothing."""
    ds = DataStore(analysed.path, show_progress=False)
    parsed = parse_html(ds._repr_html_())
    assert (
        "a local cluster of this process (the default budget), started on the first computation"
        in parsed.text
    )
    assert parsed.links == []
    assert "Assay RNA" in parse_html(ds.assays["RNA"]._repr_html_()).text


def test_store_view_links_the_dashboard_of_a_running_engine(
    analysed: Analysed, monkeypatch: pytest.MonkeyPatch, parse_html
) -> None:
    """When the process's local cluster runs, the engine row links its dashboard."""
    client = SimpleNamespace(status="running", dashboard_link=DASHBOARD)
    running = engine_cluster.Engine(client=client, budget=resolve_budget("1GiB", 2))
    monkeypatch.setattr(engine_cluster, "_local", running)
    ds = DataStore(analysed.path, show_progress=False)
    parsed = parse_html(ds._repr_html_())
    assert parsed.links == [DASHBOARD]
    assert "this process's local cluster: 1.00 GiB over 2 workers" in parsed.text


def test_engine_rows_of_a_scheduler_address(monkeypatch: pytest.MonkeyPatch, parse_html) -> None:
    """An address (given, or in CYTEARC_CLUSTER) is connected on first use; then its dashboard is linked."""
    monkeypatch.delenv(engine_cluster.CLUSTER_VARIABLE, raising=False)
    address = "tcp://10.0.0.5:8786"
    (row,) = engine_rows(cluster=address, mem_budget=None, workers=None)[:1]
    assert "connected on the first computation" in row[1]
    client = SimpleNamespace(status="running", dashboard_link=DASHBOARD)
    monkeypatch.setitem(
        engine_cluster._external,
        address,
        engine_cluster.Engine(client=client, budget=None),
    )
    rows = dict(engine_rows(cluster=address, mem_budget=None, workers=None))
    assert parse_html(rows["dashboard"]).links == [DASHBOARD]
    monkeypatch.setenv(engine_cluster.CLUSTER_VARIABLE, address)
    named = dict(engine_rows(cluster=None, mem_budget=None, workers=None))
    assert f"named by {engine_cluster.CLUSTER_VARIABLE}" in named["engine"]
    assert parse_html(named["dashboard"]).links == [DASHBOARD]


def test_engine_rows_of_a_local_cluster_name_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the local cluster starts, the row names the budget it will be started with."""
    monkeypatch.delenv(engine_cluster.CLUSTER_VARIABLE, raising=False)
    monkeypatch.setattr(engine_cluster, "_local", None)
    (row,) = engine_rows(cluster=None, mem_budget="4GiB", workers=2)
    assert "mem_budget='4GiB', workers=2" in str(row[1])


def test_assay_view_shows_type_shape_layout_and_fingerprint(analysed: Analysed, parse_html) -> None:
    """The assay's view names its type, shape, shards and chunks and its counts fingerprint."""
    assay = DataStore(analysed.path, cluster="threads", show_progress=False).assays["RNA"]
    parsed = parse_html(assay._repr_html_())
    counts, counts_t = assay.stored_arrays()
    assert counts_t is not None
    assert "300 cells x 600 features" in parsed.text
    assert f"shards {tuple(counts.shards or ())}, chunks {tuple(counts.chunks)}" in parsed.text
    assert f"shards {tuple(counts_t.shards or ())}" in parsed.text
    assert assay.content_fingerprint in parsed.text
    assert "ids, names" in parsed.text


def test_run_view_shows_record_stage_table_and_outputs(analysed: Analysed, parse_html) -> None:
    """A reopened run shows its id, escaped label, status, stage table with peak memory, and outputs."""
    ds = DataStore(analysed.path, cluster="threads", show_progress=False)
    run = ds.pipeline.open(analysed.run.run_id)
    parsed = parse_html(run._repr_html_())
    assert "script" not in parsed.tags
    assert analysed.run.run_id in parsed.text
    assert HOSTILE in parsed.text
    assert "completed" in parsed.text
    assert "3.00 MiB" in parsed.text
    assert "1.25" in parsed.text
    assert str(analysed.normalized.ref) in parsed.text
    assert "(2.0 s)" in parsed.text


def test_run_record_view_shows_its_error_and_stages(analysed: Analysed, parse_html) -> None:
    """A failed run's record shows the error that ended it and the recipe's stages."""
    parsed = parse_html(analysed.failed._repr_html_())
    assert "script" not in parsed.tags
    assert f"CyteArcError: {HOSTILE}" in parsed.text
    assert "normalize, hvgs" in parsed.text
    assert "failed" in parsed.text
