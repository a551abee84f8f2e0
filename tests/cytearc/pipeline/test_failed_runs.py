"""A failed run leaves the store as the last good run left it (issue: fail closed, finding 1)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from cytearc import DataStore
from cytearc.cli import main
from cytearc.datasets import write_store
from cytearc.errors import CyteArcError, LabelClaimBlockedError, OperationArgumentError
from cytearc.ops.qc import PERCENT_ATTRIBUTE
from cytearc.pipeline import ledger
from cytearc.pipeline.recipes import RNA_STANDARD, Recipe, Stage

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.pipeline.records import RunRecord

OPTIONS: dict[str, Any] = {"n_top": 200, "n_comps": 10, "resolution": 0.5}


def _open(path: Path) -> DataStore:
    return DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)


class PlantedError(CyteArcError):
    """The planted failure of the last stage."""


def _boom(ds: DataStore, **_: object) -> Any:
    msg = "planted failure after leiden"
    raise PlantedError(msg)


FAILS_AT_THE_END = Recipe(
    name="rna_standard_then_fail",
    stages=(*RNA_STANDARD.stages, Stage(name="boom", operation=_boom, outputs=("boom",))),
)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose run "first" completed."""
    path = write_store(
        tmp_path_factory.mktemp("failed") / "ds.zarr", n_cells=500, n_genes=600, cluster="threads"
    )
    _open(path).pipeline.run(label="first", **OPTIONS)
    return path


def test_a_failed_run_changes_no_column(analysed: Path) -> None:
    """Clusters, UMAP and QC columns and the assay's percent record stay as run "first" left them."""
    ds = _open(analysed)
    before = {c: ds.cells.fetch_all(c) for c in ds.cells.columns}
    percent = dict(ds.root["RNA"].attrs[PERCENT_ATTRIBUTE])
    with pytest.raises(PlantedError):
        ds.pipeline.run(
            FAILS_AT_THE_END,
            label="second",
            n_top=150,
            n_comps=8,
            resolution=3.0,
            qc_patterns={"percentRibo": "^RP[SL]"},
        )
    again = _open(analysed)
    assert again.cells.columns == list(before)
    for column, values in before.items():
        np.testing.assert_array_equal(again.cells.fetch_all(column), values, err_msg=column)
    assert dict(again.root["RNA"].attrs[PERCENT_ATTRIBUTE]) == percent
    first = again.pipeline.by_label("first")
    assert first.record.status == "completed"
    failed = [r for r in again.pipeline.runs() if r.requested_label == "second"]
    assert [(r.status, r.complete) for r in failed] == [("failed", True)]


def test_a_completed_run_writes_its_columns(tmp_path: Path) -> None:
    """The staged columns are written when the run completes, and read back inside it."""
    path = write_store(tmp_path / "ds.zarr", n_cells=400, n_genes=600, cluster="threads")
    run = _open(path).pipeline.run(**OPTIONS)
    labels = run.artifact("clustering").read("labels")
    mask = run.artifact("cells").read("mask").astype(bool)
    cells = _open(path).cells
    np.testing.assert_array_equal(cells.fetch_all("RNA_leiden_cluster")[mask], labels)
    assert "RNA_UMAP1" in cells.columns


def _running_holder(ds: DataStore, label: str) -> RunRecord:
    """A run record that holds ``label`` and is still running (or was killed), as a live run leaves it."""
    record = ledger.open_run(ds.root, ds.pipeline.by_label("first").run_id, where=ds.where)
    holder = dataclasses.replace(
        record,
        run_id=ledger.new_run_id(),
        requested_label=label,
        label=None,
        status="running",
        complete=False,
        finished_at_ns=None,
        outputs=None,
        fields=None,
    )
    ledger.create_run(ds.root, holder, where=ds.where)
    ledger.claim_label(ds.root, label=label, run_id=holder.run_id, where=ds.where)
    return holder


def test_a_label_held_by_a_running_run_is_refused_before_computing(analysed: Path) -> None:
    """The label is claimed when the run starts: a second run of it fails before any stage."""
    ds = _open(analysed)
    holder = _running_holder(ds, "busy")
    runs = len(ds.pipeline.runs())
    with pytest.raises(LabelClaimBlockedError, match=holder.run_id):
        ds.pipeline.run(label="busy", **OPTIONS)
    assert len(ds.pipeline.runs()) == runs  # refused before a run record


BAD_OPTIONS = [
    ("n_top", 0, "n_top must be an integer >= 1, found 0"),
    ("n_top", 1.5, "n_top must be an integer >= 1, found 1.5"),
    ("k", 0, "k must be an integer >= 2, found 0"),
    ("resolution", -1, "resolution must be a finite number > 0, found -1"),
    ("target_sum", -5, "target_sum must be a finite number > 0, found -5"),
    ("seed", -1, "seed must be an integer from 0 to 4294967295, found -1"),
    ("min_dist", "abc", "min_dist must be a finite number >= 0 and <= 1, found 'abc'"),
    ("min_dist", 2.0, "min_dist must be a finite number >= 0 and <= 1, found 2.0"),
    ("qc_filter", "maybe", "qc_filter must be True or False, found 'maybe'"),
    ("qc_nmads", 0, "qc_nmads must be a finite number > 0, found 0"),
    ("pca_mode", "fast", "pca_mode must be one of"),
    ("cell_key", "", "cell_key must be a cell column's name, found ''"),
    ("qc_sample_key", 3, "qc_sample_key must be a cell column's name or None, found 3"),
    ("qc_patterns", {"percentMito": "("}, "is not a regular expression"),
]


@pytest.mark.parametrize(
    ("name", "value", "message"), BAD_OPTIONS, ids=[f"{n}={v!r}" for n, v, _ in BAD_OPTIONS]
)
def test_a_bad_option_is_refused_before_the_run_starts(
    analysed: Path, name: str, value: object, message: str
) -> None:
    """Every option of rna_standard is checked before the run record or any stage, naming it."""
    ds = _open(analysed)
    runs = len(ds.pipeline.runs())
    with pytest.raises(OperationArgumentError) as info:
        ds.pipeline.run(**{name: value})
    assert str(info.value).startswith("pipeline.run: "), info.value
    assert message in str(info.value)
    assert len(ds.pipeline.runs()) == runs


def test_the_cli_names_a_bad_option_without_a_traceback(
    analysed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc run --set resolution=-1` exits 1 with one line naming the option."""
    code = main(["run", str(analysed), "--cluster", "threads", "--set", "resolution=-1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "resolution must be a finite number > 0, found -1" in err
    assert "Traceback" not in err


def test_cli_lists_runs_and_releases_the_label_of_a_stopped_run(
    analysed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc runs` shows a stuck run; `--abandon` marks it interrupted and the label is free again."""
    ds = _open(analysed)
    stuck = _running_holder(ds, "killed")
    assert main(["runs", str(analysed), "--json"]) == 0
    listed = {r["runId"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed[stuck.run_id]["status"] == "running"
    args = ["runs", str(analysed), "--abandon", stuck.run_id, "--label", "killed"]
    assert main([*args, "--reason", "its process was SIGKILLed"]) == 0
    capsys.readouterr()
    assert ds.pipeline.open(stuck.run_id).record.status == "interrupted"
    run = ds.pipeline.run(label="killed", **OPTIONS)
    assert ds.pipeline.by_label("killed").run_id == run.run_id
