"""The run ledger: where run, stage and label-claim records live in a store, and how they change.

Layout below the store root (or workspace) group::

    pipeline/runs/{runId}                              group, attribute cytearc:run
    pipeline/runs/{runId}/stages/{ordinal:03d}-{stage} group, attribute cytearc:stage
    pipeline/runs/.label-claims/{labelDigest}/{sequence:08d}.json

``labelDigest`` is the SHA-256 hex digest of the UTF-8 label. ``.label-claims``
and each digest are plain groups; every claim is one key holding the
canonical JSON (RFC 8785) of a :class:`~cytearc.pipeline.records.LabelClaim`,
created atomically only if absent. Claims are append-only: none is ever
rewritten or deleted. Sequences start at 1, and the owner of a label is the
run of its highest sequence.

A run claims its requested label while it is finalized, before its record is
written as completed; the completed run record is then the public owner, and
a later run asking for the same label is refused (:class:`LabelTakenError`).
A failed, interrupted or removed owner can be bypassed by a new claim. An
incomplete owner (running, crashed, or with an unreadable record) blocks the
label until an operator who has confirmed that its process stopped marks it
interrupted with :func:`abandon_label_claim`; abandonment is never inferred
from elapsed time.

Run and stage records of a finished run are final: a record whose stored
status is terminal (anything but ``running``) is never written again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
import time
from typing import TYPE_CHECKING, Final

import rfc8785
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.group import GroupMetadata
from zarr.core.sync import sync
from zarr.errors import ContainsArrayError, ContainsGroupError
from zarr.storage import LocalStore, WrapperStore

from cytearc._warnings import warn_user
from cytearc.errors import (
    AtomicClaimUnsupportedError,
    LabelClaimBlockedError,
    LabelClaimError,
    LabelTakenError,
    PipelineRecordError,
    ReadOnlyStoreError,
    RunNotFoundError,
)
from cytearc.pipeline.records import Interruption, LabelClaim, RunRecord, StageRecord
from cytearc.storage.mount import MountStore
from cytearc.storage.nodes import create_group_top_down

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from zarr.abc.store import Store

__all__ = [
    "CLAIMS_NAME",
    "RUNS_PATH",
    "RUN_ATTRIBUTE",
    "STAGE_ATTRIBUTE",
    "abandon_label_claim",
    "claim_label",
    "create_run",
    "label_owner",
    "list_runs",
    "new_run_id",
    "open_run",
    "require_atomic_claims",
    "run_stages",
    "validate_label_available",
    "write_run",
    "write_stage",
]

RUNS_PATH: Final = "pipeline/runs"
"""The group of the runs, below the store root or workspace group."""
CLAIMS_NAME: Final = ".label-claims"
"""The group below :data:`RUNS_PATH` that holds the label claims; never a run."""
RUN_ATTRIBUTE: Final = "cytearc:run"
STAGE_ATTRIBUTE: Final = "cytearc:stage"

_RUN_ID: Final = re.compile(r"[0-9a-f]{32}")
_CLAIM_KEY: Final = re.compile(r"([0-9]{8})\.json")
_FIXED_RUN_FIELDS: Final = (
    "recipe",
    "requested_label",
    "assay",
    "started_at_ns",
    "cytearc_version",
    "config",
    "stage_order",
)


def new_run_id() -> str:
    """A fresh run ID: a random 128-bit token as 32 lowercase hex characters.

    Returns
    -------
    str
        The ID.

    Examples
    --------
    >>> len(new_run_id())
    32
    """
    return secrets.token_hex(16)


def _key(root: zarr.Group, *parts: str) -> str:
    return "/".join(part for part in (root.path, *parts) if part)


async def _collect(keys: AsyncIterator[str]) -> list[str]:
    return [key async for key in keys]


def _children(root: zarr.Group, path: str) -> list[str]:
    """The names directly below ``path`` in the store, metadata documents excluded."""
    names = sync(_collect(root.store.list_dir(_key(root, path))))
    return sorted(name for name in names if name != "zarr.json")


def _get_bytes(root: zarr.Group, path: str) -> bytes | None:
    buffer = sync(root.store.get(_key(root, path), prototype=default_buffer_prototype()))
    return None if buffer is None else buffer.to_bytes()


def _set_if_absent(root: zarr.Group, path: str, data: bytes) -> None:
    buffer = default_buffer_prototype().buffer.from_bytes(data)
    sync(root.store.set_if_not_exists(_key(root, path), buffer))


def _require_writable(root: zarr.Group, *, operation: str, where: str) -> None:
    if root.store.read_only:
        msg = f"{where}: {operation} needs a writable store; open it with zarr_mode='r+'"
        raise ReadOnlyStoreError(msg)


def _creates_atomically(store: Store) -> bool:
    """Whether ``store.set_if_not_exists`` is atomic.

    ``LocalStore`` writes a temporary file and links it into place, which
    fails when the key exists (zarr 3.1 ``storage/_local.py``: ``_safe_move``
    is ``os.link`` on POSIX and ``os.rename`` on Windows). A wrapper that
    does not override the method delegates it. Every other store, memory and
    fsspec included, checks and then sets, which two writers can interleave.
    """
    if isinstance(store, LocalStore):
        return type(store).set_if_not_exists is LocalStore.set_if_not_exists
    if isinstance(store, MountStore):
        return _creates_atomically(store.target)
    if isinstance(store, WrapperStore):
        delegates = type(store).set_if_not_exists is WrapperStore.set_if_not_exists
        return delegates and _creates_atomically(store._store)
    return False


def require_atomic_claims(root: zarr.Group, *, where: str) -> None:
    """Refuse a store that cannot create a key atomically only if it is absent.

    Call it before the run record of a labeled run is created, so that such a
    run fails before it writes or computes anything.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    where
        The store's printable location, for messages.

    Raises
    ------
    AtomicClaimUnsupportedError
        The store is not a local store (zarr ``LocalStore``).
    """
    if not _creates_atomically(root.store):
        msg = (
            f"{where}: run labels are claimed by creating a key atomically only if it is absent, "
            f"which {type(root.store).__name__} cannot do; run without a label, or on a local store"
        )
        raise AtomicClaimUnsupportedError(msg)


def _run_path(run_id: str) -> str:
    return f"{RUNS_PATH}/{run_id}"


def _group(root: zarr.Group, path: str, *, where: str) -> zarr.Group:
    """The group at ``path``: RunNotFoundError if nothing is there, PipelineRecordError if unreadable."""
    try:
        node = root[path]
    except KeyError:
        msg = f"{where}: {path}: no such group (never created, or removed); ds.pipeline.runs() lists the stored runs"
        raise RunNotFoundError(msg) from None
    except (ValueError, TypeError) as error:
        msg = f"{where}: {path}: unreadable Zarr metadata ({type(error).__name__}: {error})"
        raise PipelineRecordError(msg) from error
    if not isinstance(node, zarr.Group):
        msg = f"{where}: {path}: expected a group, found an array"
        raise PipelineRecordError(msg)
    return node


def _run_group(root: zarr.Group, run_id: str, *, where: str) -> zarr.Group:
    if not _RUN_ID.fullmatch(run_id):
        msg = f"{where}: {run_id!r} is not a run ID (expected 32 lowercase hex characters); ds.pipeline.runs() lists the stored runs"
        raise RunNotFoundError(msg)
    return _group(root, _run_path(run_id), where=where)


def _attribute(group: zarr.Group, name: str, *, path: str, where: str) -> object:
    if name not in group.attrs:
        msg = f"{where}: {path}: the attribute {name!r} is missing; the record was never written or was removed"
        raise PipelineRecordError(msg)
    return group.attrs[name]


def open_run(root: zarr.Group, run_id: str, *, where: str) -> RunRecord:
    """The record of run ``run_id``.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    run_id
        The run's ID, as :func:`new_run_id` made it.
    where
        The store's printable location, for messages.

    Returns
    -------
    RunRecord
        The run's record.

    Raises
    ------
    RunNotFoundError
        No run of that ID is stored.
    PipelineRecordError
        The run's group or record cannot be read; the error that a catalog
        scan (:func:`list_runs`) reports for it.
    """
    group = _run_group(root, run_id, where=where)
    path = _run_path(run_id)
    value = _attribute(group, RUN_ATTRIBUTE, path=path, where=where)
    record = RunRecord.from_json(value, where=f"{where}: {path} attribute {RUN_ATTRIBUTE!r}")
    if record.run_id != run_id:
        msg = f"{where}: {path}: the record names run {record.run_id!r}, not the run of its group"
        raise PipelineRecordError(msg)
    return record


def list_runs(root: zarr.Group, *, where: str) -> list[RunRecord]:
    """The records of every readable run, oldest first.

    Runs that cannot be read (damaged metadata, a missing or unknown field, a
    child that is not a group) are skipped, so one crashed run cannot hide
    the healthy ones; one warning names each skipped run ID and its error,
    the error :func:`open_run` raises for it.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    where
        The store's printable location, for messages.

    Returns
    -------
    list of RunRecord
        The readable runs, by start time.
    """
    records: list[RunRecord] = []
    skipped: list[str] = []
    for name in _children(root, RUNS_PATH):
        if name == CLAIMS_NAME:
            continue
        try:
            records.append(open_run(root, name, where=where))
        except (PipelineRecordError, RunNotFoundError) as error:
            skipped.append(f"{name} ({error})")
    if skipped:
        warn_user(
            f"{where}: skipped {len(skipped)} pipeline run(s) that cannot be read: "
            f"{'; '.join(skipped)}. Open one with its run ID to raise its error."
        )
    return sorted(records, key=lambda record: (record.started_at_ns, record.run_id))


def _check_stage_names(names: tuple[str, ...], *, where: str) -> None:
    for name in names:
        if not name or "/" in name or name.startswith("."):
            msg = f"{where}: stage name {name!r}: expected a non-empty name without '/' that does not start with '.'"
            raise PipelineRecordError(msg)


def create_run(root: zarr.Group, record: RunRecord, *, where: str) -> None:
    """Create the group and record of a new run, which starts ``running`` and incomplete.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    record
        The new run's record.
    where
        The store's printable location, for messages.

    Raises
    ------
    PipelineRecordError
        The record is not running, or a run of its ID exists (IDs are never reused).
    ReadOnlyStoreError
        The store is read-only.
    """
    _require_writable(root, operation=f"creating run {record.run_id}", where=where)
    if record.status != "running" or record.complete:
        msg = f"{where}: a new run record must be running and incomplete, found status {record.status!r}, complete={record.complete}"
        raise PipelineRecordError(msg)
    _check_stage_names(record.stage_order, where=where)
    path = _run_path(record.run_id)
    exists_msg = (
        f"{where}: {path} exists; a run ID is never reused - make a new one with new_run_id()"
    )
    if _children(root, path):
        raise PipelineRecordError(exists_msg)
    try:
        create_group_top_down(root, path, attributes={RUN_ATTRIBUTE: record.to_json()})
    except (ContainsGroupError, ContainsArrayError):
        raise PipelineRecordError(exists_msg) from None


def _check_complete(record: RunRecord | StageRecord, *, operation: str, where: str) -> None:
    """``complete`` marks terminal details the run committed itself: never while running, always when completed."""
    if (record.status == "running" and record.complete) or (
        record.status == "completed" and not record.complete
    ):
        msg = f"{where}: {operation}: complete={record.complete} contradicts status {record.status!r}; a running record is never complete and a completed one always is"
        raise PipelineRecordError(msg)


def _open_running(root: zarr.Group, run_id: str, *, operation: str, where: str) -> RunRecord:
    current = open_run(root, run_id, where=where)
    if current.status != "running":
        msg = (
            f"{where}: {operation}: run {run_id} is already {current.status}; "
            "the records of a finished run are final"
        )
        raise PipelineRecordError(msg)
    return current


def _check_label(root: zarr.Group, record: RunRecord, *, operation: str, where: str) -> None:
    """A record names a label only once its run owns it, and a completed run its requested label."""
    requested = record.requested_label
    if record.label is None and not (record.status == "completed" and requested is not None):
        return
    if requested is None or record.label != requested:
        msg = f"{where}: {operation}: label {record.label!r} is not the requested label {requested!r}; a completed run carries the label it requested"
        raise PipelineRecordError(msg)
    if label_owner(root, requested, where=where) != record.run_id:
        msg = f"{where}: {operation}: the run does not own label {requested!r}; claim it with claim_label before the record names it"
        raise LabelClaimError(msg)


def write_run(root: zarr.Group, record: RunRecord, *, where: str) -> None:
    """Replace the record of an existing, still running run with ``record``.

    The run's identity (recipe, requested label, assay, start, version,
    config and stage order) cannot change. A record that names a ``label``,
    and a completed record of a run that requested one, must carry the
    requested label and own it (:func:`claim_label`).

    Parameters
    ----------
    root
        The store root (or workspace) group.
    record
        The run's new record.
    where
        The store's printable location, for messages.

    Raises
    ------
    RunNotFoundError
        The run does not exist.
    PipelineRecordError
        The stored record is unreadable or terminal, ``record`` changes the
        run's identity, or names a label other than the requested one.
    LabelClaimError
        ``record`` names a label that the run does not own.
    ReadOnlyStoreError
        The store is read-only.
    """
    operation = f"writing run {record.run_id}"
    _require_writable(root, operation=operation, where=where)
    _check_complete(record, operation=operation, where=where)
    current = _open_running(root, record.run_id, operation=operation, where=where)
    changed = [
        name for name in _FIXED_RUN_FIELDS if getattr(current, name) != getattr(record, name)
    ]
    if changed:
        msg = f"{where}: {operation}: {', '.join(changed)} cannot change after the run is created"
        raise PipelineRecordError(msg)
    _check_label(root, record, operation=operation, where=where)
    group = _run_group(root, record.run_id, where=where)
    group.attrs[RUN_ATTRIBUTE] = record.to_json()


def write_stage(root: zarr.Group, run_id: str, record: StageRecord, *, where: str) -> None:
    """Create or update the record of one stage of a running run.

    The stage must be the run's ``stageOrder[ordinal]``; a stage whose stored
    record is terminal is not written again.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    run_id
        The run.
    record
        The stage's record.
    where
        The store's printable location, for messages.

    Raises
    ------
    RunNotFoundError
        The run does not exist.
    PipelineRecordError
        The run or stored stage is unreadable or terminal, or the stage is not
        at its ordinal in the run's stage order.
    ReadOnlyStoreError
        The store is read-only.
    """
    operation = f"writing stage {record.stage!r} of run {run_id}"
    _require_writable(root, operation=operation, where=where)
    _check_complete(record, operation=operation, where=where)
    run = _open_running(root, run_id, operation=operation, where=where)
    order = run.stage_order
    if record.ordinal >= len(order) or order[record.ordinal] != record.stage:
        msg = f"{where}: {operation}: ordinal {record.ordinal} is not that stage in the run's stage order {list(order)}"
        raise PipelineRecordError(msg)
    path = f"{_run_path(run_id)}/stages/{record.ordinal:03d}-{record.stage}"
    document = {STAGE_ATTRIBUTE: record.to_json()}
    try:
        group = _group(root, path, where=where)
    except RunNotFoundError:
        create_group_top_down(root, path, attributes=document)
        return
    stored = _stage(group, path=path, where=where)
    if stored.status != "running":
        msg = f"{where}: {operation}: the stage is already {stored.status}; the records of a finished stage are final"
        raise PipelineRecordError(msg)
    group.attrs[STAGE_ATTRIBUTE] = document[STAGE_ATTRIBUTE]


def _stage(group: zarr.Group, *, path: str, where: str) -> StageRecord:
    value = _attribute(group, STAGE_ATTRIBUTE, path=path, where=where)
    record = StageRecord.from_json(value, where=f"{where}: {path} attribute {STAGE_ATTRIBUTE!r}")
    name = path.rsplit("/", 1)[-1]
    if name != f"{record.ordinal:03d}-{record.stage}":
        msg = f"{where}: {path}: the record is stage {record.stage!r} at ordinal {record.ordinal}, which its group name does not match"
        raise PipelineRecordError(msg)
    return record


def run_stages(root: zarr.Group, run_id: str, *, where: str) -> list[StageRecord]:
    """The stage records of a run, in ordinal order.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    run_id
        The run.
    where
        The store's printable location, for messages.

    Returns
    -------
    list of StageRecord
        The stages written so far.

    Raises
    ------
    RunNotFoundError
        The run does not exist.
    PipelineRecordError
        A stage group or record cannot be read, or two stages share an ordinal.
    """
    _run_group(root, run_id, where=where)
    stages_path = f"{_run_path(run_id)}/stages"
    stages = [
        _stage(
            _group(root, f"{stages_path}/{name}", where=where),
            path=f"{stages_path}/{name}",
            where=where,
        )
        for name in _children(root, stages_path)
    ]
    stages.sort(key=lambda stage: stage.ordinal)
    ordinals = [stage.ordinal for stage in stages]
    if len(set(ordinals)) != len(ordinals):
        msg = f"{where}: {stages_path}: two stages share an ordinal ({ordinals})"
        raise PipelineRecordError(msg)
    return stages


def _claims_path(label: str) -> str:
    return f"{RUNS_PATH}/{CLAIMS_NAME}/{hashlib.sha256(label.encode()).hexdigest()}"


def _latest_claim(root: zarr.Group, label: str, *, where: str) -> tuple[int, LabelClaim] | None:
    """The claim of highest sequence for ``label`` and its sequence, or None if it has none."""
    path = _claims_path(label)
    sequences = [
        int(match[1]) for name in _children(root, path) if (match := _CLAIM_KEY.fullmatch(name))
    ]
    if not sequences:
        return None
    sequence = max(sequences)
    key = f"{path}/{sequence:08d}.json"
    data = _get_bytes(root, key)
    if data is None:
        msg = f"{where}: {key} vanished while it was read; label claims are append-only and never deleted"
        raise PipelineRecordError(msg)
    try:
        value = json.loads(data)
    except ValueError as error:
        msg = f"{where}: {key}: the label claim is not JSON ({error})"
        raise PipelineRecordError(msg) from error
    claim = LabelClaim.from_json(value, where=f"{where}: {key}")
    if claim.label != label:
        msg = f"{where}: {key}: the claim is for label {claim.label!r}, not {label!r} whose digest names it"
        raise PipelineRecordError(msg)
    return sequence, claim


def label_owner(root: zarr.Group, label: str, *, where: str) -> str | None:
    """The run ID of the latest claim of ``label``, or None if nobody claimed it.

    The owner may have failed, been interrupted or been removed since; see
    :func:`validate_label_available` for whether a new run can take the label.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    label
        The label.
    where
        The store's printable location, for messages.

    Returns
    -------
    str or None
        The owner's run ID.
    """
    latest = _latest_claim(root, label, where=where)
    return None if latest is None else latest[1].run_id


def _check_bypassable(root: zarr.Group, owner: LabelClaim, *, where: str) -> None:
    """Raise unless a new claim may follow ``owner``'s (failed, interrupted, or removed run)."""
    label, run_id = owner.label, owner.run_id
    try:
        run = open_run(root, run_id, where=where)
    except RunNotFoundError:
        return
    except PipelineRecordError as error:
        msg = (
            f"{where}: label {label!r} is claimed by run {run_id}, whose record cannot be read "
            f"({error}); it cannot be marked interrupted, so after confirming that its process "
            f"stopped, remove its group {_run_path(run_id)} to release the label, or choose another label"
        )
        raise LabelClaimBlockedError(msg) from error
    if run.status in {"failed", "interrupted"}:
        return
    if run.status == "completed" and run.complete:
        msg = f"{where}: label {label!r} belongs to completed run {run_id}; choose another label"
        raise LabelTakenError(msg)
    msg = (
        f"{where}: label {label!r} is claimed by run {run_id}, which is {run.status} "
        f"(complete={run.complete}); it may still be running. After confirming that its process "
        f"stopped, release the label with pipeline.abandon_label_claim(label={label!r}, "
        f"run_id={run_id!r}, reason=...), or choose another label"
    )
    raise LabelClaimBlockedError(msg)


def validate_label_available(root: zarr.Group, *, label: str, where: str) -> None:
    """Raise unless a new run could claim ``label``, without writing anything.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    label
        The label.
    where
        The store's printable location, for messages.

    Raises
    ------
    LabelTakenError
        A completed run owns the label.
    LabelClaimBlockedError
        The owner's run is incomplete (running, crashed, or unreadable).
    PipelineRecordError
        The latest claim cannot be read.
    """
    latest = _latest_claim(root, label, where=where)
    if latest is not None:
        _check_bypassable(root, latest[1], where=where)


def _ensure_groups(root: zarr.Group, paths: tuple[str, ...]) -> None:
    """Create the groups at ``paths`` that are missing, never touching one that exists."""
    metadata = GroupMetadata().to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()
    for path in paths:
        _set_if_absent(root, f"{path}/zarr.json", metadata)


def claim_label(root: zarr.Group, *, label: str, run_id: str, where: str) -> LabelClaim:
    """Claim ``label`` for run ``run_id``, which is running and requested that label.

    Called when the run starts, right after its record is created (a second
    run of the label is then refused before it computes anything), and again
    while the run is finalized, before its record is written as completed. A run that already owns the label gets its claim back;
    otherwise the next claim is created atomically, once the current owner is
    known to be failed, interrupted or removed.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    label
        The label the run requested.
    run_id
        The run.
    where
        The store's printable location, for messages.

    Returns
    -------
    LabelClaim
        The claim the run owns.

    Raises
    ------
    AtomicClaimUnsupportedError
        The store cannot create a key atomically only if it is absent.
    LabelTakenError
        A completed run owns the label.
    LabelClaimBlockedError
        The owner's run is incomplete, or a concurrent claim won the race.
    LabelClaimError
        Run ``run_id`` is not running or did not request ``label``.
    ReadOnlyStoreError
        The store is read-only.
    """
    _require_writable(root, operation=f"claiming label {label!r}", where=where)
    require_atomic_claims(root, where=where)
    claim = LabelClaim(label=label, run_id=run_id)
    run = open_run(root, run_id, where=where)
    if run.status != "running" or run.requested_label != label:
        msg = (
            f"{where}: run {run_id} cannot claim label {label!r}: only a running run claims the "
            f"label it requested (it is {run.status} and requested {run.requested_label!r})"
        )
        raise LabelClaimError(msg)
    latest = _latest_claim(root, label, where=where)
    if latest is not None:
        if latest[1].run_id == run_id:
            return latest[1]
        _check_bypassable(root, latest[1], where=where)
    path = _claims_path(label)
    _ensure_groups(root, ("pipeline", RUNS_PATH, f"{RUNS_PATH}/{CLAIMS_NAME}", path))
    key = f"{path}/{1 if latest is None else latest[0] + 1:08d}.json"
    data = rfc8785.dumps(claim.to_json())
    _set_if_absent(root, key, data)
    if _get_bytes(root, key) != data:
        msg = (
            f"{where}: label {label!r}: a concurrent claim by run {label_owner(root, label, where=where)} "
            f"created {key} first; choose another label, or retry once that run has finished"
        )
        raise LabelClaimBlockedError(msg)
    return claim


def abandon_label_claim(
    root: zarr.Group, *, label: str, run_id: str, reason: str, where: str
) -> RunRecord:
    """Mark the incomplete run that owns ``label`` interrupted, so a new run can claim the label.

    Only for an operator who has confirmed that the run's process stopped:
    CyteArc never infers abandonment from elapsed time. The run's record
    becomes ``interrupted`` with an interruption by ``abandon_label_claim``;
    its stage records and the claims are left as they are.

    Parameters
    ----------
    root
        The store root (or workspace) group.
    label
        The label.
    run_id
        The run that owns it, as the operator confirmed it stopped.
    reason
        Why, recorded in the run's interruption.
    where
        The store's printable location, for messages.

    Returns
    -------
    RunRecord
        The run's new record.

    Raises
    ------
    LabelClaimError
        ``run_id`` is not the label's current owner, or its run is not incomplete.
    RunNotFoundError, PipelineRecordError
        The owner's run is removed or unreadable.
    ReadOnlyStoreError
        The store is read-only.
    """
    _require_writable(root, operation=f"abandoning the claim of label {label!r}", where=where)
    if not reason.strip():
        msg = f"{where}: abandoning the claim of label {label!r} needs a reason (why the run's process is known to have stopped), found {reason!r}; pass reason='...'"
        raise LabelClaimError(msg)
    owner = label_owner(root, label, where=where)
    if owner != run_id:
        msg = (
            f"{where}: run {run_id} does not own label {label!r} (its owner is {owner or 'nobody'}); "
            "only the exact current owner can be abandoned"
        )
        raise LabelClaimError(msg)
    run = open_run(root, run_id, where=where)
    if run.status != "running" or run.complete:
        msg = (
            f"{where}: run {run_id} is already {run.status}; only an incomplete run can be "
            "marked interrupted"
        )
        raise LabelClaimError(msg)
    now = time.time_ns()
    abandoned = dataclasses.replace(
        run,
        status="interrupted",
        finished_at_ns=now,
        interruption=Interruption(reason=reason, at_ns=now, by="abandon_label_claim"),
    )
    write_run(root, abandoned, where=where)
    return abandoned
