"""The run ledger in a real local store: runs, stages, catalog scans, and label claims."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import threading
import uuid
from typing import TYPE_CHECKING, Any

import fsspec  # type: ignore[import-untyped]
import pytest
import rfc8785
import zarr
from zarr.core.sync import sync
from zarr.storage import FsspecStore, LocalStore, MemoryStore

from cytearc.errors import (
    AtomicClaimUnsupportedError,
    LabelClaimBlockedError,
    LabelClaimError,
    LabelTakenError,
    PipelineRecordError,
    ReadOnlyStoreError,
    RunNotFoundError,
)
from cytearc.pipeline import ledger
from cytearc.pipeline.records import RecordedError, RunRecord, StageRecord

if TYPE_CHECKING:
    from pathlib import Path

WHERE = "test-store"
STAGES = ("input_snapshot", "qc", "pca")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "s.zarr"


@pytest.fixture
def root(store_path: Path) -> zarr.Group:
    return zarr.open_group(store_path, mode="w")


def new_run(
    root: zarr.Group, *, label: str | None = None, started_at_ns: int = 1, create: bool = True
) -> RunRecord:
    record = RunRecord(
        run_id=ledger.new_run_id(),
        recipe="rna_standard",
        requested_label=label,
        label=None,
        assay="RNA",
        started_at_ns=started_at_ns,
        status="running",
        complete=False,
        cytearc_version="1.0.0",
        config={"seed": 0},
        stage_order=STAGES,
    )
    if create:
        ledger.create_run(root, record, where=WHERE)
    return record


def finish(root: zarr.Group, record: RunRecord, *, status: str) -> RunRecord:
    done = dataclasses.replace(
        record,
        status=status,  # type: ignore[arg-type]
        complete=status == "completed",
        finished_at_ns=2,
        label=record.requested_label if status == "completed" else None,
        outputs={} if status == "completed" else None,
        error=RecordedError(error_type="E", message="m") if status == "failed" else None,
    )
    ledger.write_run(root, done, where=WHERE)
    return done


def stage(name: str, *, status: str = "running") -> StageRecord:
    return StageRecord(
        stage=name,
        ordinal=STAGES.index(name),
        started_at_ns=5,
        finished_at_ns=None if status == "running" else 6,
        status=status,  # type: ignore[arg-type]
        complete=status == "completed",
        metrics={"seconds": 1.0},
    )


def claims_dir(store_path: Path, label: str) -> Path:
    digest = hashlib.sha256(label.encode()).hexdigest()
    return store_path / "pipeline" / "runs" / ".label-claims" / digest


def claim_files(store_path: Path, label: str) -> list[str]:
    directory = claims_dir(store_path, label)
    return sorted(p.name for p in directory.glob("*.json") if p.name != "zarr.json")


async def _keys(store: Any) -> list[str]:
    return [key async for key in store.list_prefix("")]


# Runs and stages


def test_new_run_id_is_a_128_bit_hex_token() -> None:
    """Run IDs are 32 lowercase hex characters and do not repeat."""
    ids = {ledger.new_run_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 32 and i == i.lower() and int(i, 16) >= 0 for i in ids)


def test_create_and_open(root: zarr.Group, store_path: Path) -> None:
    """A created run opens as the same record from its group's cytearc:run attribute."""
    record = new_run(root)
    assert ledger.open_run(root, record.run_id, where=WHERE) == record
    assert (store_path / "pipeline" / "runs" / record.run_id / "zarr.json").is_file()
    group = root[f"pipeline/runs/{record.run_id}"]
    assert group.attrs["cytearc:run"] == record.to_json()


def test_create_refuses_an_existing_id(root: zarr.Group) -> None:
    """A run ID is never reused."""
    record = new_run(root)
    with pytest.raises(PipelineRecordError, match="a run ID is never reused"):
        ledger.create_run(root, record, where=WHERE)


def test_create_requires_a_running_record(root: zarr.Group) -> None:
    """A new run starts running and incomplete."""
    record = dataclasses.replace(new_run(root, create=False), status="completed", complete=True)
    with pytest.raises(PipelineRecordError, match="must be running and incomplete"):
        ledger.create_run(root, record, where=WHERE)


def test_create_refuses_unsafe_stage_names(root: zarr.Group) -> None:
    """Stage names become group names, so they cannot hold '/' or start with '.'."""
    record = dataclasses.replace(new_run(root, create=False), stage_order=("qc", "../x"))
    with pytest.raises(PipelineRecordError, match=r"stage name '\.\./x'"):
        ledger.create_run(root, record, where=WHERE)


def test_open_missing_run(root: zarr.Group) -> None:
    """A run that was never created, or a malformed ID, is not found."""
    with pytest.raises(RunNotFoundError, match="no such group"):
        ledger.open_run(root, ledger.new_run_id(), where=WHERE)
    with pytest.raises(RunNotFoundError, match="is not a run ID"):
        ledger.open_run(root, "../../x", where=WHERE)


def test_write_run_and_finality(root: zarr.Group) -> None:
    """A running run's record is replaced; a finished one's is final."""
    record = new_run(root)
    done = finish(root, record, status="completed")
    assert ledger.open_run(root, record.run_id, where=WHERE) == done
    with pytest.raises(
        PipelineRecordError, match="already completed; the records of a finished run are final"
    ):
        ledger.write_run(root, done, where=WHERE)


def test_write_run_keeps_the_run_identity(root: zarr.Group) -> None:
    """Recipe, config and the other identity fields cannot change after creation."""
    record = new_run(root)
    with pytest.raises(PipelineRecordError, match="recipe, config cannot change"):
        ledger.write_run(root, dataclasses.replace(record, recipe="other", config={}), where=WHERE)


def test_a_run_names_only_a_label_it_owns(root: zarr.Group) -> None:
    """A completed labeled run must carry its requested label, after claiming it."""
    record = new_run(root, label="baseline")
    with pytest.raises(LabelClaimError, match="does not own label 'baseline'"):
        finish(root, record, status="completed")
    with pytest.raises(PipelineRecordError, match="is not the requested label 'baseline'"):
        ledger.write_run(root, dataclasses.replace(record, label="other"), where=WHERE)
    ledger.claim_label(root, label="baseline", run_id=record.run_id, where=WHERE)
    assert finish(root, record, status="completed").label == "baseline"


def test_complete_agrees_with_status(root: zarr.Group) -> None:
    """A running record is never complete and a completed one always is; a failure may be either."""
    record = new_run(root)
    with pytest.raises(PipelineRecordError, match="complete=True contradicts status 'running'"):
        ledger.write_run(root, dataclasses.replace(record, complete=True), where=WHERE)
    with pytest.raises(PipelineRecordError, match="complete=False contradicts status 'completed'"):
        ledger.write_stage(
            root, record.run_id, dataclasses.replace(stage("qc"), status="completed"), where=WHERE
        )
    handled = dataclasses.replace(stage("qc"), status="failed", complete=True, finished_at_ns=9)
    ledger.write_stage(root, record.run_id, handled, where=WHERE)
    ledger.write_run(root, dataclasses.replace(record, status="failed", complete=True), where=WHERE)
    assert ledger.open_run(root, record.run_id, where=WHERE).complete


def test_write_run_needs_an_existing_run(root: zarr.Group) -> None:
    """Writing the record of a run that does not exist raises RunNotFoundError."""
    with pytest.raises(RunNotFoundError):
        ledger.write_run(root, new_run(root, create=False), where=WHERE)


def test_stages_in_ordinal_order(root: zarr.Group, store_path: Path) -> None:
    """Stages live in {ordinal:03d}-{stage} groups and are returned in ordinal order."""
    record = new_run(root)
    ledger.write_stage(root, record.run_id, stage("qc"), where=WHERE)
    ledger.write_stage(
        root, record.run_id, stage("input_snapshot", status="completed"), where=WHERE
    )
    ledger.write_stage(root, record.run_id, stage("qc", status="failed"), where=WHERE)
    stages = ledger.run_stages(root, record.run_id, where=WHERE)
    assert [(s.stage, s.ordinal, s.status) for s in stages] == [
        ("input_snapshot", 0, "completed"),
        ("qc", 1, "failed"),
    ]
    directory = store_path / "pipeline" / "runs" / record.run_id / "stages"
    assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == [
        "000-input_snapshot",
        "001-qc",
    ]
    stored: Any = root[f"pipeline/runs/{record.run_id}/stages/001-qc"].attrs["cytearc:stage"]
    assert stored["status"] == "failed"


def test_stage_records_are_final(root: zarr.Group) -> None:
    """A terminal stage is not rewritten, and stages of a finished run are not written."""
    record = new_run(root)
    ledger.write_stage(root, record.run_id, stage("qc", status="completed"), where=WHERE)
    with pytest.raises(
        PipelineRecordError, match="already completed; the records of a finished stage are final"
    ):
        ledger.write_stage(root, record.run_id, stage("qc"), where=WHERE)
    finish(root, record, status="failed")
    with pytest.raises(PipelineRecordError, match="already failed"):
        ledger.write_stage(root, record.run_id, stage("pca"), where=WHERE)


def test_stage_must_match_the_stage_order(root: zarr.Group) -> None:
    """A stage is written at its ordinal in the run's stage order only."""
    record = new_run(root)
    wrong = dataclasses.replace(stage("qc"), ordinal=2)
    with pytest.raises(PipelineRecordError, match="ordinal 2 is not that stage"):
        ledger.write_stage(root, record.run_id, wrong, where=WHERE)


def test_run_without_stages(root: zarr.Group) -> None:
    """A new run has no stages; a missing run raises."""
    record = new_run(root)
    assert ledger.run_stages(root, record.run_id, where=WHERE) == []
    with pytest.raises(RunNotFoundError):
        ledger.run_stages(root, ledger.new_run_id(), where=WHERE)


def test_read_only_store_refuses_writes(root: zarr.Group, store_path: Path) -> None:
    """Writes to a read-only store raise ReadOnlyStoreError; reads work."""
    record = new_run(root, label="x")
    reader = zarr.open_group(LocalStore(store_path, read_only=True), mode="r")
    with pytest.raises(ReadOnlyStoreError, match="needs a writable store"):
        ledger.create_run(reader, new_run(root, create=False), where=WHERE)
    with pytest.raises(ReadOnlyStoreError):
        ledger.write_run(reader, record, where=WHERE)
    with pytest.raises(ReadOnlyStoreError):
        ledger.write_stage(reader, record.run_id, stage("qc"), where=WHERE)
    with pytest.raises(ReadOnlyStoreError):
        ledger.claim_label(reader, label="x", run_id=record.run_id, where=WHERE)
    assert ledger.open_run(reader, record.run_id, where=WHERE) == record


def test_runs_in_a_workspace_group(root: zarr.Group, store_path: Path) -> None:
    """Records and claims live below the workspace group that is passed as root."""
    workspace = root.create_group("ws")
    record = new_run(workspace, label="w")
    ledger.claim_label(workspace, label="w", run_id=record.run_id, where=WHERE)
    assert (store_path / "ws" / "pipeline" / "runs" / record.run_id / "zarr.json").is_file()
    assert claim_files(store_path / "ws", "w") == ["00000001.json"]
    assert ledger.list_runs(root, where=WHERE) == []
    assert ledger.list_runs(workspace, where=WHERE) == [record]


# Catalog scans


@pytest.mark.parametrize(
    "damage",
    ["unknown-field", "wrong-type", "no-attribute", "bad-json", "array", "no-metadata"],
)
def test_catalog_skips_unreadable_runs(root: zarr.Group, store_path: Path, damage: str) -> None:
    """One damaged run is skipped with one warning naming it; opening it exactly raises that error."""
    healthy = [new_run(root, started_at_ns=t) for t in (3, 1)]
    bad = new_run(root, label="lab", started_at_ns=2)
    ledger.claim_label(root, label="lab", run_id=bad.run_id, where=WHERE)
    path = f"pipeline/runs/{bad.run_id}"
    run_dir = store_path / path
    if damage == "unknown-field":
        root[path].attrs["cytearc:run"] = {**bad.to_json(), "later": 1}
    elif damage == "wrong-type":
        root[path].attrs["cytearc:run"] = {**bad.to_json(), "complete": 0}
    elif damage == "no-attribute":
        root[path].attrs.put({})
    elif damage == "bad-json":
        (run_dir / "zarr.json").write_text('{"attributes": {"cytearc:run": ')
    elif damage == "array":
        shutil.rmtree(run_dir)
        root.create_array(path, shape=(1,), dtype="i1")
    else:
        (run_dir / "zarr.json").unlink()
        (run_dir / "stages").mkdir()
    with pytest.warns(
        UserWarning, match=rf"skipped 1 pipeline run\(s\) that cannot be read: {bad.run_id} "
    ) as record:
        runs = ledger.list_runs(root, where=WHERE)
    assert len(record) == 1
    assert record[0].filename == __file__
    assert runs == sorted(healthy, key=lambda r: r.started_at_ns)
    expected = RunNotFoundError if damage == "no-metadata" else PipelineRecordError
    with pytest.raises(expected) as error:
        ledger.open_run(root, bad.run_id, where=WHERE)
    assert str(error.value) in str(record[0].message)


def test_catalog_of_a_store_without_runs(root: zarr.Group) -> None:
    """A store without pipeline records lists no runs and does not warn."""
    assert ledger.list_runs(root, where=WHERE) == []


def test_catalog_ignores_label_claims(root: zarr.Group) -> None:
    """The .label-claims group is not a run."""
    record = new_run(root, label="lab")
    ledger.claim_label(root, label="lab", run_id=record.run_id, where=WHERE)
    assert ledger.list_runs(root, where=WHERE) == [record]
    runs = root["pipeline/runs"]
    assert isinstance(runs, zarr.Group)
    assert sorted(runs.group_keys()) == sorted([".label-claims", record.run_id])


# Label claims


def test_first_claim(root: zarr.Group, store_path: Path) -> None:
    """The first claim is 00000001.json holding the canonical JSON of the claim document."""
    record = new_run(root, label="baseline")
    assert ledger.label_owner(root, "baseline", where=WHERE) is None
    ledger.validate_label_available(root, label="baseline", where=WHERE)
    claim = ledger.claim_label(root, label="baseline", run_id=record.run_id, where=WHERE)
    assert claim.run_id == record.run_id
    assert claim_files(store_path, "baseline") == ["00000001.json"]
    data = (claims_dir(store_path, "baseline") / "00000001.json").read_bytes()
    assert data == rfc8785.dumps({"label": "baseline", "runId": record.run_id})
    assert ledger.label_owner(root, "baseline", where=WHERE) == record.run_id


def test_claim_again_by_the_owner_writes_nothing(root: zarr.Group, store_path: Path) -> None:
    """The owner claiming its label again gets its claim back without a new key."""
    record = new_run(root, label="x")
    first = ledger.claim_label(root, label="x", run_id=record.run_id, where=WHERE)
    assert ledger.claim_label(root, label="x", run_id=record.run_id, where=WHERE) == first
    assert claim_files(store_path, "x") == ["00000001.json"]


def test_claimant_must_be_running_with_that_label(root: zarr.Group) -> None:
    """Only a running run claims the label it requested."""
    other = new_run(root, label="other")
    with pytest.raises(LabelClaimError, match="only a running run claims the label it requested"):
        ledger.claim_label(root, label="x", run_id=other.run_id, where=WHERE)
    done = finish(root, new_run(root, label="x"), status="failed")
    with pytest.raises(LabelClaimError, match="it is failed"):
        ledger.claim_label(root, label="x", run_id=done.run_id, where=WHERE)
    with pytest.raises(RunNotFoundError):
        ledger.claim_label(root, label="x", run_id=ledger.new_run_id(), where=WHERE)


def test_label_taken_by_a_completed_run(root: zarr.Group, store_path: Path) -> None:
    """A completed owner keeps its label: later runs are refused, before and at the claim."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    finish(root, first, status="completed")
    second = new_run(root, label="baseline")
    with pytest.raises(LabelTakenError, match=f"belongs to completed run {first.run_id}"):
        ledger.validate_label_available(root, label="baseline", where=WHERE)
    with pytest.raises(LabelTakenError):
        ledger.claim_label(root, label="baseline", run_id=second.run_id, where=WHERE)
    assert claim_files(store_path, "baseline") == ["00000001.json"]


def test_label_blocked_by_a_running_owner(root: zarr.Group, store_path: Path) -> None:
    """An incomplete owner blocks the label; the message names it and the remedy."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    second = new_run(root, label="baseline")
    remedy = f"pipeline.abandon_label_claim(label='baseline', run_id='{first.run_id}', reason=...)"
    with pytest.raises(LabelClaimBlockedError, match=f"claimed by run {first.run_id}") as error:
        ledger.claim_label(root, label="baseline", run_id=second.run_id, where=WHERE)
    assert remedy in str(error.value)
    with pytest.raises(LabelClaimBlockedError):
        ledger.validate_label_available(root, label="baseline", where=WHERE)
    assert claim_files(store_path, "baseline") == ["00000001.json"]


def test_label_blocked_by_an_unreadable_owner(root: zarr.Group) -> None:
    """An owner whose record cannot be read blocks the label (fails closed)."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    root[f"pipeline/runs/{first.run_id}"].attrs["cytearc:run"] = {"runId": first.run_id}
    second = new_run(root, label="baseline")
    with pytest.raises(LabelClaimBlockedError, match="whose record cannot be read"):
        ledger.claim_label(root, label="baseline", run_id=second.run_id, where=WHERE)


@pytest.mark.parametrize("ending", ["failed", "interrupted", "removed"])
def test_bypass_of_ended_predecessor(root: zarr.Group, store_path: Path, ending: str) -> None:
    """A failed, interrupted or removed owner is bypassed by a new claim; old claims stay as written."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    first_claim = claims_dir(store_path, "baseline") / "00000001.json"
    before = (first_claim.read_bytes(), first_claim.stat().st_mtime_ns)
    if ending == "removed":
        shutil.rmtree(store_path / "pipeline" / "runs" / first.run_id)
    else:
        finish(root, first, status=ending)
    second = new_run(root, label="baseline")
    ledger.validate_label_available(root, label="baseline", where=WHERE)
    ledger.claim_label(root, label="baseline", run_id=second.run_id, where=WHERE)
    assert claim_files(store_path, "baseline") == ["00000001.json", "00000002.json"]
    assert (first_claim.read_bytes(), first_claim.stat().st_mtime_ns) == before
    assert ledger.label_owner(root, "baseline", where=WHERE) == second.run_id


def test_abandon_only_the_exact_incomplete_owner(root: zarr.Group, store_path: Path) -> None:
    """abandon_label_claim marks the incomplete owner interrupted; anyone else is refused."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    second = new_run(root, label="baseline")
    with pytest.raises(
        LabelClaimError, match=f"does not own label 'baseline' \\(its owner is {first.run_id}\\)"
    ):
        ledger.abandon_label_claim(
            root, label="baseline", run_id=second.run_id, reason="r", where=WHERE
        )
    with pytest.raises(LabelClaimError, match="its owner is nobody"):
        ledger.abandon_label_claim(
            root, label="other", run_id=first.run_id, reason="r", where=WHERE
        )
    with pytest.raises(LabelClaimError, match="needs a reason"):
        ledger.abandon_label_claim(
            root, label="baseline", run_id=first.run_id, reason=" ", where=WHERE
        )

    abandoned = ledger.abandon_label_claim(
        root, label="baseline", run_id=first.run_id, reason="host rebooted", where=WHERE
    )
    assert ledger.open_run(root, first.run_id, where=WHERE) == abandoned
    assert (abandoned.status, abandoned.complete) == ("interrupted", False)
    assert abandoned.interruption is not None
    assert (abandoned.interruption.reason, abandoned.interruption.by) == (
        "host rebooted",
        "abandon_label_claim",
    )
    assert abandoned.finished_at_ns == abandoned.interruption.at_ns
    with pytest.raises(LabelClaimError, match="already interrupted"):
        ledger.abandon_label_claim(
            root, label="baseline", run_id=first.run_id, reason="r", where=WHERE
        )

    ledger.claim_label(root, label="baseline", run_id=second.run_id, where=WHERE)
    assert claim_files(store_path, "baseline") == ["00000001.json", "00000002.json"]


def test_abandon_refuses_a_completed_owner(root: zarr.Group) -> None:
    """A completed owner cannot be abandoned."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    finish(root, first, status="completed")
    with pytest.raises(LabelClaimError, match="already completed"):
        ledger.abandon_label_claim(
            root, label="baseline", run_id=first.run_id, reason="r", where=WHERE
        )


def test_damaged_latest_claim_fails_closed(root: zarr.Group, store_path: Path) -> None:
    """A latest claim that is not a claim document makes the owner unknown: reads raise."""
    first = new_run(root, label="baseline")
    ledger.claim_label(root, label="baseline", run_id=first.run_id, where=WHERE)
    (claims_dir(store_path, "baseline") / "00000002.json").write_bytes(
        b'{"label": "other", "runId": 1}'
    )
    with pytest.raises(PipelineRecordError, match=r"00000002\.json"):
        ledger.label_owner(root, "baseline", where=WHERE)
    (claims_dir(store_path, "baseline") / "00000003.json").write_bytes(b"{")
    with pytest.raises(PipelineRecordError, match="not JSON"):
        ledger.validate_label_available(root, label="baseline", where=WHERE)


def _racing_runs(root: zarr.Group, *, labels: int, racers: int) -> dict[str, list[str]]:
    return {
        f"label-{i}": [new_run(root, label=f"label-{i}").run_id for _ in range(racers)]
        for i in range(labels)
    }


def test_concurrent_claims_threads(root: zarr.Group, store_path: Path) -> None:
    """Threads claiming the same label at once: exactly one wins each label, with one claim key."""
    runs = _racing_runs(root, labels=20, racers=4)
    barrier = threading.Barrier(4)
    wins: list[tuple[str, str]] = []
    losses: list[BaseException] = []
    lock = threading.Lock()

    def racer(index: int) -> None:
        for label, run_ids in runs.items():
            barrier.wait()
            try:
                ledger.claim_label(root, label=label, run_id=run_ids[index], where=WHERE)
            except LabelClaimBlockedError as error:
                with lock:
                    losses.append(error)
            else:
                with lock:
                    wins.append((label, run_ids[index]))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(label for label, _ in wins) == sorted(runs)
    assert len(losses) == 3 * len(runs)
    for label, run_id in wins:
        assert claim_files(store_path, label) == ["00000001.json"]
        assert ledger.label_owner(root, label, where=WHERE) == run_id


_CLAIMER = """
import json, pathlib, sys, time
import zarr
from cytearc.pipeline import ledger
from cytearc.errors import LabelClaimBlockedError

store, barrier, me, pairs = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
group = zarr.open_group(store, mode="r+")
for i, (label, run_id) in enumerate(pairs):
    (barrier / f"{i}-{me}").touch()
    deadline = time.monotonic() + 30
    while len(list(barrier.glob(f"{i}-*"))) < 2:
        if time.monotonic() > deadline:
            sys.exit("barrier timeout")
        time.sleep(0.0001)
    try:
        ledger.claim_label(group, label=label, run_id=run_id, where="racer")
    except LabelClaimBlockedError:
        print(json.dumps([label, run_id, False]), flush=True)
    else:
        print(json.dumps([label, run_id, True]), flush=True)
"""


@pytest.mark.slow
def test_concurrent_claims_processes(root: zarr.Group, store_path: Path, tmp_path: Path) -> None:
    """Two processes claiming the same labels at the same moment: one winner each, one claim key."""
    runs = _racing_runs(root, labels=15, racers=2)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _CLAIMER,
                str(store_path),
                str(barrier),
                str(i),
                json.dumps([(label, ids[i]) for label, ids in runs.items()]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outcomes: list[list[Any]] = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        outcomes.extend(json.loads(line) for line in out.splitlines())
    assert len(outcomes) == 2 * len(runs)
    winners = {label: run_id for label, run_id, won in outcomes if won}
    assert sorted(winners) == sorted(runs)
    assert len([won for *_, won in outcomes if won]) == len(runs)
    for label, run_id in winners.items():
        assert claim_files(store_path, label) == ["00000001.json"]
        assert ledger.label_owner(root, label, where=WHERE) == run_id


def test_memory_store_refuses_claims(tmp_path: Path) -> None:
    """A MemoryStore cannot create atomically: the claim is refused before anything is written."""
    root = zarr.open_group(MemoryStore(), mode="w")
    record = new_run(root, label="x")
    before = sorted(sync(_keys(root.store)))
    with pytest.raises(AtomicClaimUnsupportedError, match="MemoryStore cannot do"):
        ledger.require_atomic_claims(root, where=WHERE)
    with pytest.raises(AtomicClaimUnsupportedError):
        ledger.claim_label(root, label="x", run_id=record.run_id, where=WHERE)
    assert sorted(sync(_keys(root.store))) == before


def test_fsspec_store_refuses_claims() -> None:
    """An fsspec store cannot create atomically: refused before any key is written."""
    url = f"memory://cytearc-{uuid.uuid4().hex}/s.zarr"
    store = FsspecStore.from_url(url)
    try:
        root = zarr.open_group(store, mode="w")
        before = sorted(sync(_keys(root.store)))
        with pytest.raises(AtomicClaimUnsupportedError, match="FsspecStore cannot do"):
            ledger.claim_label(root, label="x", run_id=ledger.new_run_id(), where=WHERE)
        assert sorted(sync(_keys(root.store))) == before
    finally:
        memory = fsspec.filesystem("memory")
        memory.rm(url.removeprefix("memory://").split("/")[0], recursive=True)


def test_local_store_creates_atomically(root: zarr.Group) -> None:
    """A local store passes the check (its set_if_not_exists links a complete file into place)."""
    ledger.require_atomic_claims(root, where=WHERE)


def test_claim_keys_survive_later_writes(root: zarr.Group, store_path: Path) -> None:
    """Writing runs and stages never touches existing claim keys."""
    first = new_run(root, label="a")
    ledger.claim_label(root, label="a", run_id=first.run_id, where=WHERE)
    path = claims_dir(store_path, "a") / "00000001.json"
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    finish(root, first, status="completed")
    new_run(root, label="a")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
