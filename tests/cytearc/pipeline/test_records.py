"""Run, stage and label-claim documents: exact shapes, strict reads, round trips."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from cytearc.errors import CyteArcError, PipelineRecordError
from cytearc.pipeline.records import (
    Interruption,
    LabelClaim,
    PlanDisposition,
    RecordedError,
    RunRecord,
    StageRecord,
)

RUN_ID = "0123456789abcdef0123456789abcdef"


def full_run() -> RunRecord:
    return RunRecord(
        run_id=RUN_ID,
        recipe="rna_standard",
        requested_label="baseline",
        label="baseline",
        assay="RNA",
        started_at_ns=1_700_000_000_000_000_000,
        finished_at_ns=1_700_000_000_500_000_000,
        status="failed",
        complete=False,
        cytearc_version="1.2.0",
        config={"pca": {"n_comps": 30, "seed": 0}, "future_key": [1.5, None, True]},
        stage_order=("input_snapshot", "qc", "pca"),
        outputs={"pca": {"artifactId": "a" * 64}},
        fields=({"name": "leiden", "display": {"palette": "tab20"}, "extra": 1},),
        error=RecordedError(error_type="MemBudgetError", message="too small"),
        interruption=Interruption(reason="ctrl-c", at_ns=5, by="KeyboardInterrupt"),
    )


def full_stage() -> StageRecord:
    inner = PlanDisposition(
        operation="normalize",
        kind="normalized",
        scope="RNA",
        artifact_id="b" * 64,
        disposition="reused",
    )
    outer = PlanDisposition(
        operation="pca",
        kind="embedding",
        scope="RNA",
        artifact_id="c" * 64,
        disposition="created",
        nested=(inner,),
    )
    return StageRecord(
        stage="pca",
        ordinal=2,
        started_at_ns=10,
        finished_at_ns=20,
        status="completed",
        complete=True,
        outputs={"embedding": "c" * 64},
        plans=(outer,),
        metrics={"seconds": 0.5, "rss": {"peakBytes": {"total": 123}}},
        error=None,
        interruption=None,
    )


def claim() -> LabelClaim:
    return LabelClaim(label="baseline", run_id=RUN_ID)


RECORDS: list[tuple[type[Any], Any]] = [
    (RunRecord, full_run),
    (StageRecord, full_stage),
    (LabelClaim, claim),
]


@pytest.mark.parametrize(("cls", "make"), RECORDS)
def test_round_trip(cls: type[Any], make: Any) -> None:
    """A record survives to_json, a JSON text round trip, and from_json unchanged."""
    record = make()
    document = json.loads(json.dumps(record.to_json()))
    assert cls.from_json(document, where="w") == record
    assert cls.from_json(document, where="w").to_json() == record.to_json()


def test_json_names() -> None:
    """Documents carry exactly the JSON names of the layout."""
    assert list(full_run().to_json()) == [
        "runId",
        "recipe",
        "requestedLabel",
        "label",
        "assay",
        "startedAtNs",
        "finishedAtNs",
        "status",
        "complete",
        "cytearcVersion",
        "config",
        "stageOrder",
        "outputs",
        "fields",
        "error",
        "interruption",
    ]
    assert list(full_stage().to_json()) == [
        "stage",
        "ordinal",
        "startedAtNs",
        "finishedAtNs",
        "status",
        "complete",
        "outputs",
        "plans",
        "metrics",
        "error",
        "interruption",
    ]
    stage: Any = full_stage().to_json()
    assert stage["plans"][0]["nested"][0] == {
        "operation": "normalize",
        "kind": "normalized",
        "scope": "RNA",
        "artifactId": "b" * 64,
        "disposition": "reused",
        "nested": [],
    }
    assert full_run().to_json()["error"] == {"type": "MemBudgetError", "message": "too small"}
    assert full_run().to_json()["interruption"] == {
        "reason": "ctrl-c",
        "atNs": 5,
        "by": "KeyboardInterrupt",
    }


@pytest.mark.parametrize(
    ("cls", "name"),
    [(RunRecord, name) for name in full_run().to_json()]
    + [(StageRecord, name) for name in full_stage().to_json()]
    + [(LabelClaim, name) for name in claim().to_json()],
)
def test_every_missing_field_is_named(cls: type[Any], name: str) -> None:
    """Dropping any one field fails closed with a PipelineRecordError naming it and the location."""
    make = dict(RECORDS)[cls]
    document = make().to_json()
    del document[name]
    with pytest.raises(PipelineRecordError, match=rf"^store/x: .*missing field '{name}'"):
        cls.from_json(document, where="store/x")


@pytest.mark.parametrize(("cls", "make"), RECORDS)
def test_unknown_field_fails_closed(cls: type[Any], make: Any) -> None:
    """A field this release does not know is refused, not ignored."""
    document = make().to_json()
    document["addedLater"] = 1
    with pytest.raises(PipelineRecordError, match="unknown field 'addedLater'"):
        cls.from_json(document, where="w")


def test_error_is_a_cytearc_value_error() -> None:
    """The record error subclasses CyteArcError and so ValueError."""
    assert issubclass(PipelineRecordError, CyteArcError)
    assert issubclass(PipelineRecordError, ValueError)


def _with(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target: Any = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("startedAtNs",), True, "'startedAtNs': expected an integer, found bool True"),
        (("startedAtNs",), 1.0, "'startedAtNs': expected an integer, found float 1.0"),
        (("finishedAtNs",), "1", "'finishedAtNs': expected an integer, found str '1'"),
        (("complete",), 1, "'complete': expected true or false, found int 1"),
        (
            ("status",),
            "done",
            "'status': expected one of 'running', 'completed', 'failed', 'interrupted'",
        ),
        (("runId",), "0123456789ABCDEF0123456789ABCDEF", "'runId': expected 32 lowercase hex"),
        (("runId",), "abc", "'runId': expected 32 lowercase hex"),
        (("recipe",), None, "'recipe': expected a string, found NoneType None"),
        (("requestedLabel",), 3, "'requestedLabel': expected a string"),
        (("stageOrder",), ["qc", 1], "'stageOrder': expected a list of strings"),
        (("config",), [], "'config': expected a JSON object, found list"),
        (("config", "pca"), float("nan"), r"'config'\['pca'\]: expected a JSON value"),
        (("outputs",), "x", "'outputs': expected a JSON object"),
        (("fields",), {}, "'fields': expected a list"),
        (
            ("fields", 0, "display"),
            "bold",
            "'fields' item 0 field 'display': expected a JSON object",
        ),
        (("fields", 0, "name"), 5, "'fields' item 0 field 'name': expected a string"),
        (("error",), {"type": "E"}, "'error': missing field 'message'"),
        (("error", "message"), 5, "'error' field 'message': expected a string"),
        (("interruption", "atNs"), False, "'interruption' field 'atNs': expected an integer"),
        (("interruption", "when"), 1, "'interruption': unknown field 'when'"),
    ],
)
def test_run_wrong_types(path: tuple[Any, ...], value: Any, message: str) -> None:
    """A run field of the wrong type or value is refused, naming the field, expectation and value."""
    document = _with(full_run().to_json(), path, value)
    with pytest.raises(PipelineRecordError, match=message):
        RunRecord.from_json(document, where="w")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("ordinal",), -1, "'ordinal': expected an integer >= 0, found int -1"),
        (("ordinal",), False, "'ordinal': expected an integer"),
        (("complete",), 0, "'complete': expected true or false"),
        (("metrics",), None, "'metrics': expected a JSON object"),
        (("outputs",), None, "'outputs': expected a JSON object"),
        (
            ("plans", 0, "disposition"),
            "copied",
            "'disposition': expected one of 'reused', 'created'",
        ),
        (("plans", 0, "artifactId"), "c" * 63, "'artifactId': expected 64 lowercase hex"),
        (("plans", 0, "nested", 0, "kind"), 1, "'plans' item 0 field 'nested' item 0 field 'kind'"),
        (("plans", 0, "nested", 0, "extra"), 1, "unknown field 'extra'"),
        (("plans", 0, "nested"), None, "'nested': expected a list"),
    ],
)
def test_stage_wrong_types(path: tuple[Any, ...], value: Any, message: str) -> None:
    """A stage field, or a field of a nested plan, of the wrong type is refused."""
    document = _with(full_stage().to_json(), path, value)
    with pytest.raises(PipelineRecordError, match=message):
        StageRecord.from_json(document, where="w")


@pytest.mark.parametrize("value", [None, [], "x", 3])
def test_a_document_must_be_an_object(value: Any) -> None:
    """A record that is not a JSON object is refused."""
    with pytest.raises(PipelineRecordError, match="w: run record: expected a JSON object"):
        RunRecord.from_json(value, where="w")


def test_construction_validates() -> None:
    """A record that would not read back cannot be built."""
    with pytest.raises(PipelineRecordError, match="'complete': expected true or false"):
        dataclasses.replace(full_run(), complete=1)  # type: ignore[arg-type]
    with pytest.raises(PipelineRecordError, match="'runId'"):
        LabelClaim(label="x", run_id="not-hex")
    with pytest.raises(PipelineRecordError, match=r"'metrics'\['x'\]: expected a JSON value"):
        dataclasses.replace(full_stage(), metrics={"x": object()})  # type: ignore[dict-item]
    with pytest.raises(PipelineRecordError, match="'plans' item 0: missing fields"):
        dataclasses.replace(full_stage(), plans=({"operation": "pca"},))  # type: ignore[arg-type]


def test_records_do_not_alias_their_json() -> None:
    """Mutating a document or an input mapping leaves the record unchanged."""
    config: dict[str, Any] = {"pca": {"n_comps": 30}}
    record = dataclasses.replace(full_run(), config=config)
    config["pca"]["n_comps"] = 5
    document: Any = record.to_json()
    document["config"]["pca"]["n_comps"] = 7
    assert record.config == {"pca": {"n_comps": 30}}
    assert record.stage_order == ("input_snapshot", "qc", "pca")


def test_open_mappings_keep_unknown_keys() -> None:
    """Config and field-descriptor keys are not checked one by one, so later keys survive."""
    document = full_run().to_json()
    document["config"] = {"tsne": {"parallel": True}}
    document["fields"] = [{"name": "f", "display": {"newer": 1}, "later": {"a": [1]}}]
    record = RunRecord.from_json(document, where="w")
    assert record.config == {"tsne": {"parallel": True}}
    assert record.fields == ({"name": "f", "display": {"newer": 1}, "later": {"a": [1]}},)


def test_recorded_error_from_exception() -> None:
    """An exception records its class name and message."""
    assert RecordedError.from_exception(ValueError("bad")) == RecordedError(
        error_type="ValueError", message="bad"
    )
