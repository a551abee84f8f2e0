"""The rna_standard recipe end to end on the seeded dataset with known cell types."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import zarr
from sklearn.metrics import adjusted_rand_score

from cytearc import DataStore
from cytearc.artifacts import list_artifacts
from cytearc.cli import main
from cytearc.datasets import SyntheticDataset, generate, write_store
from cytearc.errors import CyteArcError, LabelTakenError, PipelineRecordError, UnmeasuredCellsError
from cytearc.pipeline import ledger
from cytearc.pipeline.records import RunRecord, StageRecord
from cytearc.testing import write_membership

if TYPE_CHECKING:
    from pathlib import Path

OPTIONS: dict[str, Any] = {"n_top": 1000, "n_comps": 30, "resolution": 0.5}
RUN_FIELDS = {
    "runId", "recipe", "requestedLabel", "label", "assay", "startedAtNs", "finishedAtNs",
    "status", "complete", "cytearcVersion", "config", "stageOrder", "outputs", "fields",
    "error", "interruption",
}  # fmt: skip
STAGE_FIELDS = {
    "stage", "ordinal", "startedAtNs", "finishedAtNs", "status", "complete", "outputs",
    "plans", "metrics", "error", "interruption",
}  # fmt: skip


@pytest.fixture(scope="module")
def dataset() -> SyntheticDataset:
    return generate(n_cells=3000, n_genes=2000, seed=0)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with one completed labeled run (threaded scheduler)."""
    path = write_store(tmp_path_factory.mktemp("run") / "ds.zarr", cluster="threads")
    ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    run = ds.pipeline.run(label="first", **OPTIONS)
    return path, run.run_id


def _open(path: Path) -> DataStore:
    return DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)


@pytest.mark.slow
def test_clusters_and_markers_recover_the_truth(
    analysed: tuple[Path, str], dataset: SyntheticDataset
) -> None:
    """Leiden agrees with the planted types (ARI >= 0.9); top markers are the planted genes."""
    path, run_id = analysed
    ds = _open(path)
    run = ds.pipeline.open(run_id)
    mask = run.artifact("cells").read("mask").astype(bool)
    labels = run.artifact("clustering").read("labels")
    truth = dataset.cells["cell_type"].to_numpy()[mask]
    assert mask.sum() > 0.95 * len(mask)
    assert adjusted_rand_score(truth, labels) >= 0.9
    np.testing.assert_array_equal(ds.cells.fetch_all("RNA_leiden_cluster")[mask], labels)
    table = ds.markers.table(run.outputs["markers"], n=20)
    for group in np.unique(labels):
        majority = str(pd.Series(truth[labels == group]).mode()[0])
        top = set(table.loc[table["group"] == str(group), "feature"])
        planted = set(dataset.truth["marker_ids"][majority])
        assert len(top & planted) >= 15, (group, majority)


def test_the_recipe_clips_scaled_values_at_ten(analysed: tuple[Path, str], tmp_path: Path) -> None:
    """The run's PCA is ``reduce.pca(max_value=10)``, as scanpy's ``scale(max_value=10)``; None differs."""
    path, run_id = analysed
    shutil.copytree(path, tmp_path / "copy.zarr")
    ds = _open(tmp_path / "copy.zarr")
    run = ds.pipeline.open(run_id)
    normalized, hvgs = run.outputs["normalized"], run.outputs["hvgs"]
    n_comps = OPTIONS["n_comps"]
    clipped = ds.reduce.pca(normalized, hvgs, n_comps=n_comps, max_value=10)
    assert clipped.ref == run.outputs["pca"]
    unclipped = ds.reduce.pca(normalized, hvgs, n_comps=n_comps, max_value=None)
    assert not np.array_equal(unclipped.read("coords"), clipped.read("coords"))


@pytest.mark.slow
def test_second_identical_run_creates_nothing(analysed: tuple[Path, str]) -> None:
    """Every stage of a repeated run reuses its artifacts; the store gains no artifact."""
    path, first = analysed
    ds = _open(path)
    before = {a.ref for a in ds.list_artifacts()}
    again = ds.pipeline.run(**OPTIONS)
    assert {a.ref for a in ds.list_artifacts()} == before
    summary = again.summary()
    assert summary["created"].sum() == 0
    assert (summary["reused"] >= 1).all()
    assert again.outputs == ds.pipeline.open(first).outputs
    for stage in again.stages:
        assert all(p.disposition == "reused" for p in stage.plans)


def test_each_stage_ends_by_releasing_the_freed_heap(
    analysed: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After every stage the engine's processes trim their heaps, once."""
    from cytearc.engine.cluster import Engine  # noqa: PLC0415

    calls: list[Engine] = []

    def release_memory(self: Engine) -> None:
        calls.append(self)

    monkeypatch.setattr(Engine, "release_memory", release_memory)
    run = _open(analysed[0]).pipeline.run(**OPTIONS)
    assert len(calls) == len(run.stages)


@pytest.mark.slow
def test_records_have_exactly_the_seed_fields(analysed: tuple[Path, str]) -> None:
    """Run and stage documents on disk carry exactly the seed's fields; metrics hold RSS samples."""
    path, run_id = analysed
    group = zarr.open_group(path, mode="r")
    run_doc = dict(group[f"{ledger.RUNS_PATH}/{run_id}"].attrs)[ledger.RUN_ATTRIBUTE]
    assert set(run_doc) == RUN_FIELDS
    assert run_doc["status"] == "completed"
    assert run_doc["label"] == "first"
    stages = group[f"{ledger.RUNS_PATH}/{run_id}/stages"]
    docs = [dict(g.attrs)[ledger.STAGE_ATTRIBUTE] for _, g in sorted(stages.groups())]
    assert [d["stage"] for d in docs] == run_doc["stageOrder"]
    for doc in docs:
        assert set(doc) == STAGE_FIELDS
        assert doc["metrics"]["rss"]["peakBytes"]["total"] > 0
        assert doc["plans"], doc["stage"]
    normalize = next(d for d in docs if d["stage"] == "normalize")
    assert normalize["plans"][0]["disposition"] == "created"
    with pytest.raises(PipelineRecordError, match="unknown"):
        RunRecord.from_json({**run_doc, "extra": 1}, where="test")
    with pytest.raises(PipelineRecordError, match="metrics"):
        StageRecord.from_json({k: v for k, v in docs[0].items() if k != "metrics"}, where="test")


@pytest.mark.slow
def test_frozen_views_and_labels(analysed: tuple[Path, str]) -> None:
    """Frozen tables survive live edits; a completed run's label cannot be taken again."""
    path, run_id = analysed
    ds = _open(path)
    run = ds.pipeline.by_label("first")
    assert run.run_id == run_id
    assert run.features["I"].all()
    assert "RNA_leiden_cluster" not in run.cells.columns
    kept = run.cells["I"]
    ds.cells.update_key(np.zeros(ds.cells.n_rows, dtype=bool), key="I")
    try:
        np.testing.assert_array_equal(ds.pipeline.open(run_id).cells["I"], kept)
    finally:
        ds.cells.reset_key("I")
    with pytest.raises(LabelTakenError):
        ds.pipeline.run(label="first", **OPTIONS)


def test_failed_stage_is_recorded(tmp_path: Path) -> None:
    """A stage that raises commits failed stage and run records, then re-raises."""
    ds = _open(write_store(tmp_path / "ds.zarr", n_cells=400, n_genes=600, cluster="threads"))
    with pytest.raises(CyteArcError, match="k=500"):
        ds.pipeline.run(n_top=200, n_comps=10, k=500)
    (record,) = ds.pipeline.runs()
    assert (record.status, record.complete) == ("failed", True)
    assert record.error is not None
    assert "k=500" in record.error.message
    stages = ds.pipeline.open(record.run_id).stages
    assert [s.status for s in stages][-1] == "failed"
    assert stages[-1].stage == "neighbors"
    with pytest.raises(CyteArcError, match="unknown options"):
        ds.pipeline.run(n_pcs=3)


def test_unmeasured_cells_refused_before_any_record(tmp_path: Path) -> None:
    """A cell_key holding cells the assay did not measure is refused before the run starts."""
    path = write_store(tmp_path / "ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    write_membership(path, "RNA", np.arange(300) % 3 != 0)
    ds = _open(path)
    with pytest.raises(UnmeasuredCellsError) as info:
        ds.pipeline.run(n_top=100, n_comps=5)
    assert (info.value.unmeasured, info.value.selected) == (100, 300)
    assert info.value.cell_key == "I"
    assert ds.pipeline.runs() == []
    assert list_artifacts(ds.root, scopes=["", "RNA"]) == []


@pytest.mark.slow
def test_cli_run_writes_json_and_plots(
    analysed: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc run --json --plots` reuses the analysis and writes the three figures."""
    path, _ = analysed
    args = ["run", str(path), "--cluster", "threads", "--json", "--plots", str(tmp_path)]
    sets = [f"--set={k}={json.dumps(v)}" for k, v in OPTIONS.items()]
    assert main([*args, *sets]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "completed"
    assert sum(s["created"] for s in doc["stages"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "markers_dotplot.png",
        "qc_violins.png",
        "umap_clusters.png",
    ]
    assert main([*args, "--set", "nonsense=1"]) == 1
    assert "unknown options" in capsys.readouterr().err


@pytest.mark.slow
def test_store_plots(analysed: tuple[Path, str], dataset: SyntheticDataset) -> None:
    """ds.plots draws QC violins, UMAP by cluster and by gene, and the marker dot plot."""
    path, run_id = analysed
    ds = _open(path)
    run = ds.pipeline.open(run_id)
    assert len(ds.plots.qc().axes) >= 3
    gene = str(dataset.features["names"].iloc[0])
    values = ds.plots.gene_values(gene)
    counts = dataset.counts[:, 0].toarray().ravel()
    library = np.asarray(dataset.counts.sum(axis=1)).ravel()
    np.testing.assert_allclose(values, np.log1p(counts / library * 1e4), rtol=1e-6)
    assert ds.plots.umap(gene).axes
    assert ds.plots.umap("RNA_leiden_cluster", umap=run.outputs["umap"]).axes
    assert ds.plots.markers(run.outputs["markers"], n=2).axes
    with pytest.raises(KeyError, match="no feature"):
        ds.plots.gene_values("NOT_A_GENE")


@pytest.mark.slow
def test_an_analysed_store_is_not_replaced_by_an_import(analysed: tuple[Path, str]) -> None:
    """Artifacts mark their assay prepared; an import with overwrite=True then refuses the store."""
    path, _ = analysed
    assert zarr.open_group(path, mode="r").attrs["cytearc:prepared"] == ["RNA"]
    with pytest.raises(FileExistsError, match="prepared assays"):
        write_store(path, cluster="threads", overwrite=True)
