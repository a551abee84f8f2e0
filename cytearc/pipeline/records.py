"""The documents of the run ledger: run, stage and label-claim records.

Each record has one strict, unversioned JSON shape. Reading fails closed: a
missing or unknown field, or a field of the wrong type, raises
:class:`~cytearc.errors.PipelineRecordError` naming the field, what
was expected and what was found. There is no migration: within 1.x a release
may only add fields (and must still read records written without them), and
no release removes, renames, retypes or reinterprets one.

A run's ``config`` and a field descriptor's ``display`` are JSON mappings
read without checking their keys, so a later release may add keys to them.

Constructing a record validates it the same way, so a record that exists can
be written and read back unchanged:

>>> claim = LabelClaim(label="baseline", run_id="0" * 32)
>>> claim.to_json()
{'label': 'baseline', 'runId': '00000000000000000000000000000000'}
>>> LabelClaim.from_json({"label": "baseline"}, where="claims/00000001.json")
Traceback (most recent call last):
...
cytearc.errors.PipelineRecordError: claims/00000001.json: label claim: missing field 'runId'; ...
"""

from __future__ import annotations

import math
import re
import reprlib
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Literal,
    NoReturn,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
)

from cytearc.errors import PipelineRecordError
from cytepool._html import code, items, json_code, mapping, table, view, when

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Self

    from cytepool._html import Row

__all__ = [
    "DISPOSITIONS",
    "JSON",
    "STATUSES",
    "Disposition",
    "Interruption",
    "LabelClaim",
    "PlanDisposition",
    "RecordedError",
    "RunRecord",
    "StageRecord",
    "Status",
]

JSON: TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"
"""A JSON value as Python holds it: objects are dicts with string keys, arrays lists."""

Status: TypeAlias = Literal["running", "completed", "failed", "interrupted"]
Disposition: TypeAlias = Literal["reused", "created"]

STATUSES: Final[tuple[Status, ...]] = ("running", "completed", "failed", "interrupted")
"""The states of a run or stage; every state but ``running`` is terminal."""

DISPOSITIONS: Final[tuple[Disposition, ...]] = ("reused", "created")
"""What a stage did with a planned artifact."""

_RUN_ID: Final = re.compile(r"[0-9a-f]{32}")
_ARTIFACT_ID: Final = re.compile(r"[0-9a-f]{64}")
_NO_MIGRATION: Final = (
    "pipeline records have one strict shape and are never migrated; "
    "a record damaged or written by a later release cannot be read by this one - "
    "read it with the release that wrote it, or run the recipe again"
)


def _describe(value: object) -> str:
    return f"{type(value).__name__} {reprlib.repr(value)}"


class _NotJSONError(Exception):
    def __init__(self, path: str, value: object) -> None:
        super().__init__(path)
        self.path = path
        self.value = value


def _json_copy(value: object, path: str = "") -> JSON:
    """A deep copy of a JSON value, raising :class:`_NotJSONError` at the first value that is not."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJSONError(path, value)
        return float(value)
    if isinstance(value, list):
        return [_json_copy(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        copy: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJSONError(f"{path} key", key)
            copy[key] = _json_copy(item, f"{path}[{key!r}]")
        return copy
    raise _NotJSONError(path, value)


def _unchecked_json(value: object) -> object:
    """Records as their JSON, tuples as lists, everything else as is (checked by the parser)."""
    if isinstance(value, _Record):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [_unchecked_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _unchecked_json(item) for key, item in value.items()}
    return value


_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class _Parse(Protocol[_T_co]):
    def __call__(self, value: object, *, what: str, where: str) -> _T_co: ...


class _Document:
    """One JSON object read strictly: exactly ``names`` (at least them when ``open``)."""

    def __init__(
        self,
        value: object,
        *,
        names: tuple[str, ...],
        what: str,
        where: str,
        open_keys: bool = False,
    ) -> None:
        self.what = what
        self.where = where
        if not isinstance(value, dict):
            msg = f"{where}: {what}: expected a JSON object, found {_describe(value)}; {_NO_MIGRATION}"
            raise PipelineRecordError(msg)
        missing = [name for name in names if name not in value]
        unknown = [] if open_keys else sorted(map(str, set(value) - set(names)))
        if missing or unknown:
            problems = [
                f"{label} field{'s' * (len(found) > 1)} {', '.join(map(repr, found))}"
                for label, found in (("missing", missing), ("unknown", unknown))
                if found
            ]
            msg = (
                f"{where}: {what}: {' and '.join(problems)}; expected exactly {', '.join(names)}"
                f"{' (and other keys)' * open_keys}; {_NO_MIGRATION}"
            )
            raise PipelineRecordError(msg)
        self._value: dict[Any, object] = value

    def fail(self, name: str, expected: str, found: object) -> NoReturn:
        msg = f"{self.where}: {self.what} field {name!r}: expected {expected}, found {_describe(found)}"
        raise PipelineRecordError(msg)

    def text(self, name: str) -> str:
        value = self._value[name]
        if not isinstance(value, str):
            self.fail(name, "a string", value)
        return value

    def integer(self, name: str, *, minimum: int | None = None) -> int:
        value = self._value[name]
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(name, "an integer", value)
        if minimum is not None and value < minimum:
            self.fail(name, f"an integer >= {minimum}", value)
        return int(value)

    def boolean(self, name: str) -> bool:
        value = self._value[name]
        if not isinstance(value, bool):
            self.fail(name, "true or false", value)
        return value

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        value = self._value[name]
        if not isinstance(value, str) or value not in choices:
            self.fail(name, f"one of {', '.join(map(repr, choices))}", value)
        return value

    def token(self, name: str, *, pattern: re.Pattern[str], expected: str) -> str:
        value = self._value[name]
        if not isinstance(value, str) or not pattern.fullmatch(value):
            self.fail(name, expected, value)
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        value = self._value[name]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.fail(name, "a list of strings", value)
        return tuple(value)

    def mapping(self, name: str) -> dict[str, JSON]:
        value = self._value[name]
        if not isinstance(value, dict):
            self.fail(name, "a JSON object", value)
        try:
            copy = _json_copy(value)
        except _NotJSONError as error:
            msg = (
                f"{self.where}: {self.what} field {name!r}{error.path}: expected a JSON value "
                f"(null, true/false, integer, finite float, string, list, object with string keys), "
                f"found {_describe(error.value)}"
            )
            raise PipelineRecordError(msg) from None
        return cast("dict[str, JSON]", copy)

    def whole(self) -> dict[str, JSON]:
        """The whole object as a checked JSON copy (for documents with open keys)."""
        try:
            copy = _json_copy(self._value)
        except _NotJSONError as error:
            msg = f"{self.where}: {self.what}{error.path}: expected a JSON value, found {_describe(error.value)}"
            raise PipelineRecordError(msg) from None
        return cast("dict[str, JSON]", copy)

    def items(self, name: str, parse: _Parse[_T]) -> tuple[_T, ...]:
        value = self._value[name]
        if not isinstance(value, list):
            self.fail(name, "a list", value)
        return tuple(
            parse(item, what=f"{self.what} field {name!r} item {i}", where=self.where)
            for i, item in enumerate(value)
        )

    def record(self, name: str, parse: _Parse[_T]) -> _T:
        return parse(self._value[name], what=f"{self.what} field {name!r}", where=self.where)

    def optional(self, name: str, read: Callable[[str], _T]) -> _T | None:
        return None if self._value[name] is None else read(name)


class _Record:
    """The JSON plumbing the record dataclasses share.

    ``_FIELDS`` maps each JSON name to its attribute; ``_parse`` reads a
    document into attribute values. Construction runs the same parser over
    the record's own JSON and keeps the parsed copies, so a record holds
    only checked values and no alias of the caller's containers.
    """

    _FIELDS: ClassVar[Mapping[str, str]]
    _WHAT: ClassVar[str]

    def __post_init__(self) -> None:
        parsed = self._parse(self.to_json(), what=self._WHAT, where=type(self).__name__)
        for attribute, value in parsed.items():
            object.__setattr__(self, attribute, value)

    def to_json(self) -> dict[str, JSON]:
        """The record as a JSON document (a fresh copy, with the JSON field names)."""
        return {
            name: cast("JSON", _unchecked_json(getattr(self, attribute)))
            for name, attribute in self._FIELDS.items()
        }

    @classmethod
    def from_json(cls, value: object, *, where: str) -> Self:
        """Read a document strictly; errors name ``where``, the field, the expectation and the value.

        Raises
        ------
        PipelineRecordError
            A field is missing, unknown, or of the wrong type or value.
        """
        return cls._read(value, what=cls._WHAT, where=where)

    @classmethod
    def _read(cls, value: object, *, what: str, where: str) -> Self:
        return cls(**cls._parse(value, what=what, where=where))

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class RecordedError(_Record):
    """The error that ended a run or stage: ``{"type": ..., "message": ...}``."""

    error_type: str
    message: str

    _FIELDS: ClassVar[Mapping[str, str]] = {"type": "error_type", "message": "message"}
    _WHAT: ClassVar[str] = "error"

    @classmethod
    def from_exception(cls, error: BaseException) -> Self:
        """The record of a raised exception: its qualified class name and message.

        Parameters
        ----------
        error
            The exception.

        Returns
        -------
        RecordedError
            Its record.

        Examples
        --------
        >>> RecordedError.from_exception(KeyError("x")).to_json()
        {'type': 'KeyError', 'message': "'x'"}
        """
        return cls(error_type=type(error).__qualname__, message=str(error))

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        doc = _Document(value, names=tuple(cls._FIELDS), what=what, where=where)
        return {"error_type": doc.text("type"), "message": doc.text("message")}


@dataclass(frozen=True, kw_only=True)
class Interruption(_Record):
    """Why a run or stage was interrupted, when (ns since the epoch), and by what."""

    reason: str
    at_ns: int
    by: str

    _FIELDS: ClassVar[Mapping[str, str]] = {"reason": "reason", "atNs": "at_ns", "by": "by"}
    _WHAT: ClassVar[str] = "interruption"

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        doc = _Document(value, names=tuple(cls._FIELDS), what=what, where=where)
        return {"reason": doc.text("reason"), "at_ns": doc.integer("atNs"), "by": doc.text("by")}


@dataclass(frozen=True, kw_only=True)
class PlanDisposition(_Record):
    """One planned artifact of a stage, whether it was reused or created, and the plans it made."""

    operation: str
    kind: str
    scope: str
    artifact_id: str
    disposition: Disposition
    nested: tuple[PlanDisposition, ...] = ()

    _FIELDS: ClassVar[Mapping[str, str]] = {
        "operation": "operation",
        "kind": "kind",
        "scope": "scope",
        "artifactId": "artifact_id",
        "disposition": "disposition",
        "nested": "nested",
    }
    _WHAT: ClassVar[str] = "artifact plan"

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        doc = _Document(value, names=tuple(cls._FIELDS), what=what, where=where)
        return {
            "operation": doc.text("operation"),
            "kind": doc.text("kind"),
            "scope": doc.text("scope"),
            "artifact_id": doc.token(
                "artifactId", pattern=_ARTIFACT_ID, expected="64 lowercase hex characters"
            ),
            "disposition": doc.choice("disposition", DISPOSITIONS),
            "nested": doc.items("nested", cls._read),
        }


def _field_descriptor(value: object, *, what: str, where: str) -> dict[str, JSON]:
    """A field descriptor: a JSON object with at least a string ``name`` and an object ``display``."""
    doc = _Document(value, names=("name", "display"), what=what, where=where, open_keys=True)
    doc.text("name")
    doc.mapping("display")
    return doc.whole()


@dataclass(frozen=True, kw_only=True)
class RunRecord(_Record):
    """The document of one pipeline run, the attribute ``cytearc:run`` of its group.

    ``outputs`` and ``fields`` stay ``None`` until the whole recipe succeeds;
    ``error`` and ``interruption`` are set by a handled failure or interruption.
    ``complete`` is true once the run committed its terminal details itself (a
    completed run, or a handled failure or interruption); a run whose process
    died, or that was abandoned, stays incomplete.

    Examples
    --------
    >>> run = RunRecord(
    ...     run_id="0" * 32, recipe="rna_standard", requested_label=None, label=None,
    ...     assay="RNA", started_at_ns=1, status="running", complete=False,
    ...     cytearc_version="1.0.0", config={"n_pcs": 30}, stage_order=("qc", "pca"),
    ... )
    >>> RunRecord.from_json(run.to_json(), where="runs") == run
    True
    >>> RunRecord(**{**run.__dict__, "complete": 1})
    Traceback (most recent call last):
    ...
    cytearc.errors.PipelineRecordError: RunRecord: run record field 'complete': expected true or false, found int 1
    """

    run_id: str
    recipe: str
    requested_label: str | None
    label: str | None
    assay: str
    started_at_ns: int
    finished_at_ns: int | None = None
    status: Status
    complete: bool
    cytearc_version: str
    config: Mapping[str, JSON]
    stage_order: tuple[str, ...]
    outputs: Mapping[str, JSON] | None = None
    fields: tuple[Mapping[str, JSON], ...] | None = None
    error: RecordedError | None = None
    interruption: Interruption | None = None

    _FIELDS: ClassVar[Mapping[str, str]] = {
        "runId": "run_id",
        "recipe": "recipe",
        "requestedLabel": "requested_label",
        "label": "label",
        "assay": "assay",
        "startedAtNs": "started_at_ns",
        "finishedAtNs": "finished_at_ns",
        "status": "status",
        "complete": "complete",
        "cytearcVersion": "cytearc_version",
        "config": "config",
        "stageOrder": "stage_order",
        "outputs": "outputs",
        "fields": "fields",
        "error": "error",
        "interruption": "interruption",
    }
    _WHAT: ClassVar[str] = "run record"

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        doc = _Document(value, names=tuple(cls._FIELDS), what=what, where=where)
        return {
            "run_id": doc.token("runId", pattern=_RUN_ID, expected="32 lowercase hex characters"),
            "recipe": doc.text("recipe"),
            "requested_label": doc.optional("requestedLabel", doc.text),
            "label": doc.optional("label", doc.text),
            "assay": doc.text("assay"),
            "started_at_ns": doc.integer("startedAtNs"),
            "finished_at_ns": doc.optional("finishedAtNs", doc.integer),
            "status": doc.choice("status", STATUSES),
            "complete": doc.boolean("complete"),
            "cytearc_version": doc.text("cytearcVersion"),
            "config": doc.mapping("config"),
            "stage_order": doc.texts("stageOrder"),
            "outputs": doc.optional("outputs", doc.mapping),
            "fields": doc.optional("fields", lambda name: doc.items(name, _field_descriptor)),
            "error": doc.optional("error", lambda name: doc.record(name, RecordedError._read)),
            "interruption": doc.optional(
                "interruption", lambda name: doc.record(name, Interruption._read)
            ),
        }

    def view_rows(self) -> list[Row]:
        """The record as the labelled rows of a notebook view (see :mod:`cytepool._html`).

        Returns
        -------
        list of Row
            Run id, recipe, assay, label, status (with the error or
            interruption), times, version, configuration and outputs.
        """
        label: object = self.label
        if label is None and self.requested_label is not None:
            label = f"{self.requested_label} (requested; claimed when the run completes)"
        ended: object = None
        if self.error is not None:
            ended = json_code(f"{self.error.error_type}: {self.error.message}")
        elif self.interruption is not None:
            i = self.interruption
            ended = f"{i.reason} by {i.by} at {when(i.at_ns)}"
        finished = None
        if self.finished_at_ns is not None:
            seconds = (self.finished_at_ns - self.started_at_ns) / 1e9
            finished = f"{when(self.finished_at_ns)} ({seconds:.1f} s)"
        settled = self.complete or self.status == "running"
        outputs = [(name, code(ref)) for name, ref in (self.outputs or {}).items()]
        return [
            ("run", code(self.run_id)),
            ("recipe", self.recipe),
            ("assay", self.assay),
            ("label", label),
            ("status", self.status if settled else f"{self.status} (incomplete)"),
            ("ended by", ended),
            ("started", when(self.started_at_ns)),
            ("finished", finished),
            ("cytearc version", self.cytearc_version),
            ("configuration", mapping(self.config)),
            ("outputs", table(outputs, header=("output", "ref")) if outputs else None),
        ]

    def _repr_html_(self) -> str:
        """The run record in a notebook: its rows and the recipe's stages."""
        stages = ("stages", items(self.stage_order))
        return view(f"Run {self.run_id} ({self.recipe})", [*self.view_rows(), stages])


@dataclass(frozen=True, kw_only=True)
class StageRecord(_Record):
    """The document of one stage of a run, the attribute ``cytearc:stage`` of its group.

    ``plans`` holds the exact artifact-plan dispositions of the stage;
    ``metrics`` its timing and sampled RSS (see :mod:`cytearc.pipeline.rss`).
    """

    stage: str
    ordinal: int
    started_at_ns: int
    finished_at_ns: int | None = None
    status: Status
    complete: bool
    outputs: Mapping[str, JSON] = field(default_factory=dict)
    plans: tuple[PlanDisposition, ...] = ()
    metrics: Mapping[str, JSON] = field(default_factory=dict)
    error: RecordedError | None = None
    interruption: Interruption | None = None

    _FIELDS: ClassVar[Mapping[str, str]] = {
        "stage": "stage",
        "ordinal": "ordinal",
        "startedAtNs": "started_at_ns",
        "finishedAtNs": "finished_at_ns",
        "status": "status",
        "complete": "complete",
        "outputs": "outputs",
        "plans": "plans",
        "metrics": "metrics",
        "error": "error",
        "interruption": "interruption",
    }
    _WHAT: ClassVar[str] = "stage record"

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        doc = _Document(value, names=tuple(cls._FIELDS), what=what, where=where)
        return {
            "stage": doc.text("stage"),
            "ordinal": doc.integer("ordinal", minimum=0),
            "started_at_ns": doc.integer("startedAtNs"),
            "finished_at_ns": doc.optional("finishedAtNs", doc.integer),
            "status": doc.choice("status", STATUSES),
            "complete": doc.boolean("complete"),
            "outputs": doc.mapping("outputs"),
            "plans": doc.items("plans", PlanDisposition._read),
            "metrics": doc.mapping("metrics"),
            "error": doc.optional("error", lambda name: doc.record(name, RecordedError._read)),
            "interruption": doc.optional(
                "interruption", lambda name: doc.record(name, Interruption._read)
            ),
        }


@dataclass(frozen=True, kw_only=True)
class LabelClaim(_Record):
    """One append-only claim of a run label: the label and the claiming run's ID."""

    label: str
    run_id: str

    _FIELDS: ClassVar[Mapping[str, str]] = {"label": "label", "runId": "run_id"}
    _WHAT: ClassVar[str] = "label claim"

    @classmethod
    def _parse(cls, value: object, *, what: str, where: str) -> dict[str, Any]:
        doc = _Document(value, names=tuple(cls._FIELDS), what=what, where=where)
        return {
            "label": doc.text("label"),
            "run_id": doc.token("runId", pattern=_RUN_ID, expected="32 lowercase hex characters"),
        }
