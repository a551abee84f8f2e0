"""``pipeline.run``: a recipe's stages in order, recorded in the run ledger.

The run record is created before the first stage (``input_snapshot``); each
stage is recorded as running, then with its outputs, the dispositions of the
artifacts it planned (reused or created, with nested plans), its seconds and
the sampled RSS of the process tree and the Dask workers.

A requested label is claimed atomically right after the run record is created,
before any stage computes (so the loser of two runs of one label computes
nothing), and checked again while the run is finalized; the completed run
record then owns it. The recipe's options are checked before the record is
created. The cell columns the operations write (QC metrics, clusters, UMAP
coordinates) and the assay's ``percentFeatures`` record are staged
(:meth:`~cytearc.metadata.table.MetaData.staged`) and written only when every
stage completed, so a failed run leaves every column as the last good run left
it. Any failure or interruption after the record exists commits the terminal
stage and run details first and re-raises.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from dask.utils import format_bytes
from tqdm.auto import tqdm

from cytearc.artifacts import Artifact, ArtifactRef, open_artifact, planning_receipts
from cytearc.errors import MissingArtifactError, RunNotFoundError
from cytearc.metadata.membership import validate_measured
from cytearc.ops.namespaces import Namespace, operation
from cytearc.ops.publication import values_digest
from cytearc.ops.qc import metric_assay
from cytearc.ops.selection import MEMBERSHIP_REMEDY, row_ids_fingerprint
from cytearc.pipeline import ledger
from cytearc.pipeline.recipes import Recipe
from cytearc.pipeline.recipes import recipe as find_recipe
from cytearc.pipeline.records import (
    Interruption,
    PlanDisposition,
    RecordedError,
    RunRecord,
    StageRecord,
)
from cytearc.pipeline.rss import RssSampler
from cytearc.pipeline.snapshots import FrozenTable
from cytepool._html import code, frame, view
from cytepool._versions import package_version

if TYPE_CHECKING:
    from cytearc.artifacts import PlanReceipt
    from cytearc.pipeline.records import JSON
    from cytearc.storage.store import AnalysisStore

__all__ = ["Pipeline", "PipelineRun", "run_pipeline"]


def _plan(receipt: PlanReceipt) -> PlanDisposition:
    return PlanDisposition(
        operation=receipt.operation,
        kind=receipt.kind,
        scope=receipt.scope,
        artifact_id=receipt.artifact_id,
        disposition=receipt.disposition,  # type: ignore[arg-type]
        nested=tuple(_plan(n) for n in receipt.nested),
    )


def _count(plans: tuple[PlanDisposition, ...], disposition: str) -> int:
    return sum((p.disposition == disposition) + _count(p.nested, disposition) for p in plans)


@dataclass(frozen=True)
class PipelineRun:
    """A recorded run: its record, stages, outputs and frozen tables.

    Made by :func:`run_pipeline` and :meth:`Pipeline.open`.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    record
        The run's record.
    stages
        Its stage records, in order.
    """

    ds: AnalysisStore
    record: RunRecord
    stages: tuple[StageRecord, ...]

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.record.run_id

    @property
    def outputs(self) -> dict[str, ArtifactRef]:
        """The final outputs by name (empty until the recipe succeeded)."""
        return {k: ArtifactRef.parse(str(v)) for k, v in (self.record.outputs or {}).items()}

    def artifact(self, name: str) -> Artifact:
        """One output artifact, e.g. ``"clustering"`` or ``"markers"``.

        Parameters
        ----------
        name
            The output's name (a key of :attr:`outputs`).

        Returns
        -------
        Artifact
            The opened artifact.

        Raises
        ------
        MissingArtifactError
            The run has no output ``name`` (a :class:`KeyError`), or its
            artifact was removed.
        """
        outputs = self.outputs
        if name not in outputs:
            ended = (
                ""
                if self.record.complete
                else f" (the run is {self.record.status}: only a completed run has outputs)"
            )
            msg = f"{self.ds.where}: run {self.run_id}: no output {name!r}; its outputs are {sorted(outputs)}{ended} - pass one of them"
            raise MissingArtifactError(msg)
        return open_artifact(self.ds.root, outputs[name])

    @property
    def cells(self) -> FrozenTable:
        """The cell table as the run saw it; ``I`` is the run's final cell selection."""
        return FrozenTable(
            self.artifact("cell_metadata"),
            self.artifact("cells"),
            row_ids=row_ids_fingerprint(self.ds),
        )

    @property
    def features(self) -> FrozenTable:
        """The feature table as the run saw it; ``I`` is the run's feature universe."""
        ids = values_digest(self.ds.assays[self.record.assay].features.fetch_all("ids"))
        return FrozenTable(
            self.artifact("feature_metadata"), self.artifact("feature_universe"), row_ids=ids
        )

    def clusters(self) -> pd.Series:
        """The run's cluster labels (its ``clustering`` output), indexed by the ids of the cells it clustered.

        Returns
        -------
        pandas.Series
            int32 labels named ``cluster``, indexed by cell id (``cell``), in
            the order of the cell table; ready for
            :func:`cytearc.ops.agreement.adjusted_rand` against another
            tool's labels.

        Raises
        ------
        MissingArtifactError
            The run has no ``clustering`` or ``cells`` output.
        """
        ids = np.asarray([str(c) for c in self.ds.cells.fetch_all("ids")], dtype=object)
        mask = self.artifact("cells").read("mask").astype(bool)
        return pd.Series(
            self.artifact("clustering").read("labels"),
            index=pd.Index(ids[mask], name="cell"),
            name="cluster",
        )

    def summary(self) -> pd.DataFrame:
        """One row per stage: status, seconds, peak memory, artifacts created and reused.

        Returns
        -------
        pandas.DataFrame
            Columns ``stage``, ``status``, ``seconds``, ``peak_rss_bytes``,
            ``created`` and ``reused`` (counting nested plans).
        """
        rows = []
        for stage in self.stages:
            metrics: Any = stage.metrics
            rss = metrics.get("rss", {}).get("peakBytes", {})
            rows.append(
                {
                    "stage": stage.stage,
                    "status": stage.status,
                    "seconds": metrics.get("seconds"),
                    "peak_rss_bytes": rss.get("total"),
                    "created": _count(stage.plans, "created"),
                    "reused": _count(stage.plans, "reused"),
                }
            )
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        r = self.record
        return f"<PipelineRun {r.run_id} {r.recipe} on {r.assay}: {r.status}, label {r.label!r}>"

    def _repr_html_(self) -> str:
        """The run in a notebook: its record, the table of its stages (:meth:`summary`) and its store."""
        summary = self.summary()
        peak = summary.pop("peak_rss_bytes")
        summary.insert(3, "peak RSS", [format_bytes(int(b)) if pd.notna(b) else "" for b in peak])
        stages = frame(summary, index=False, limit=len(summary), float_format="{:.2f}".format)
        rows = [*self.record.view_rows(), ("stages", stages), ("store", code(self.ds.where))]
        return view(f"PipelineRun {self.run_id} ({self.record.recipe})", rows)


def _fields(assay: str, outputs: dict[str, str]) -> list[dict[str, JSON]]:
    return [
        {
            "name": f"{assay}_leiden_cluster",
            "display": {"kind": "categorical", "artifact": outputs.get("clustering")},
        },
        {
            "name": f"{assay}_UMAP1",
            "display": {"kind": "embedding", "artifact": outputs.get("umap")},
        },
        {
            "name": f"{assay}_UMAP2",
            "display": {"kind": "embedding", "artifact": outputs.get("umap")},
        },
    ]


def _check_cells(ds: AnalysisStore, assay: str, config: dict[str, Any]) -> None:
    key = config["cell_key"]
    mask = ds.cells.fetch_all(key).astype(bool)
    validate_measured(
        ds.cells, assay, mask, operation="pipeline.run", remedy=MEMBERSHIP_REMEDY, cell_key=key
    )
    for column in ("nCounts", "nFeatures", *config.get("qc_patterns", {})):
        other = metric_assay(ds, f"{assay}_{column}")
        if other is not None and other != assay:
            validate_measured(
                ds.cells,
                other,
                mask,
                operation="pipeline.run",
                remedy=MEMBERSHIP_REMEDY,
                cell_key=key,
            )


def _ended(error: BaseException) -> dict[str, Any]:
    """The record fields of a run or stage that ``error`` ended."""
    if isinstance(error, KeyboardInterrupt):
        reason = Interruption(reason=type(error).__name__, at_ns=time.time_ns(), by="signal")
        return {"status": "interrupted", "interruption": reason}
    return {"status": "failed", "error": RecordedError.from_exception(error)}


def _run_stages(
    ds: AnalysisStore,
    plan: Recipe,
    *,
    assay: str,
    config: dict[str, Any],
    run_id: str,
    stages: list[StageRecord],
) -> dict[str, Artifact]:
    """Run and record each stage in order (a failed stage is recorded, then re-raised)."""
    where = ds.where
    client = ds.engine.client
    context: dict[str, Artifact] = {}
    bar = tqdm(plan.stages, desc="pipeline", unit="stage", disable=not ds.show_progress)
    for ordinal, stage in enumerate(bar):
        bar.set_description(stage.name)
        started = StageRecord(
            stage=stage.name,
            ordinal=ordinal,
            started_at_ns=time.time_ns(),
            status="running",
            complete=False,
        )
        ledger.write_stage(ds.root, run_id, started, where=where)
        clock = time.perf_counter()
        with planning_receipts() as receipts, RssSampler(client) as sampler:
            try:
                outputs = stage.run(ds, assay=assay, context=context, config=config)
            except BaseException as error:
                failed = StageRecord(
                    stage=stage.name,
                    ordinal=ordinal,
                    started_at_ns=started.started_at_ns,
                    finished_at_ns=time.time_ns(),
                    complete=True,
                    plans=tuple(_plan(r) for r in receipts if r.disposition),
                    metrics={"seconds": time.perf_counter() - clock},
                    **_ended(error),
                )
                ledger.write_stage(ds.root, run_id, failed, where=where)
                raise
        context.update(outputs)
        # the next stage starts from the memory in use, not from this stage's peak
        ds.engine.release_memory()
        done = StageRecord(
            stage=stage.name,
            ordinal=ordinal,
            started_at_ns=started.started_at_ns,
            finished_at_ns=time.time_ns(),
            status="completed",
            complete=True,
            outputs={k: str(v.ref) for k, v in outputs.items()},
            plans=tuple(_plan(r) for r in receipts),
            metrics={"seconds": time.perf_counter() - clock, "rss": sampler.metrics()},
        )
        ledger.write_stage(ds.root, run_id, done, where=where)
        stages.append(done)
    return context


def run_pipeline(
    ds: AnalysisStore,
    /,
    recipe: str | Recipe = "rna_standard",
    *,
    assay: str = "RNA",
    label: str | None = None,
    **stage_options: Any,
) -> PipelineRun:
    """Run ``recipe`` on ``assay``; a second identical run reuses every artifact.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    recipe
        A recipe's name in :data:`~cytearc.pipeline.recipes.RECIPES`, or a
        :class:`~cytearc.pipeline.recipes.Recipe`.
    assay
        The assay the recipe analyses.
    label
        A name for the run, claimed when it completes
        (:meth:`Pipeline.by_label` reopens it); None for no label.
    **stage_options
        The recipe's options, overriding their defaults; for
        ``rna_standard``: ``cell_key``, ``qc_patterns``, ``qc_filter``,
        ``qc_nmads``, ``qc_sample_key``, ``qc_bounds``, ``target_sum``,
        ``n_top``, ``min_cells``, ``hvg_flavor``, ``n_comps``, ``max_value``,
        ``pca_mode``, ``k``, ``knn_search``, ``resolution``, ``leiden_iterations``,
        ``leiden_flavor``, ``min_dist`` and ``seed`` (``docs/analysis.md`` has their defaults).

    Returns
    -------
    PipelineRun
        The completed run: its record, stage records and outputs.

    Raises
    ------
    RecipeError
        No recipe has that name, or it takes no such option.
    AssayNotFoundError
        The store has no assay ``assay``.
    UnmeasuredCellsError
        The cells of ``cell_key`` include cells the assay did not measure
        (before any record is written).
    LabelTakenError, LabelClaimBlockedError, AtomicClaimUnsupportedError
        The label cannot be claimed (checked before the run starts, and again
        atomically when it is finalized).
    ReadOnlyStoreError
        The store is read-only.
    CyteArcError
        A stage failed (any of the errors of its operation); the stage and
        the run are recorded as failed first.
    """
    plan = find_recipe(recipe)
    config = plan.config(stage_options)
    where = ds.where
    ds.assays[assay]
    _check_cells(ds, assay, config)
    if label is not None:
        ledger.require_atomic_claims(ds.root, where=where)
        ledger.validate_label_available(ds.root, label=label, where=where)
    record = RunRecord(
        run_id=ledger.new_run_id(),
        recipe=plan.name,
        requested_label=label,
        label=None,
        assay=assay,
        started_at_ns=time.time_ns(),
        status="running",
        complete=False,
        cytearc_version=package_version("cytearc"),
        config=config,
        stage_order=tuple(s.name for s in plan.stages),
    )
    ledger.create_run(ds.root, record, where=where)
    stages: list[StageRecord] = []
    try:
        if label is not None:  # before any computation: the loser of a race computes nothing
            ledger.claim_label(ds.root, label=label, run_id=record.run_id, where=where)
        with ds.cells.staged():  # the cell columns of the run are written only if it completes
            context = _run_stages(
                ds, plan, assay=assay, config=config, run_id=record.run_id, stages=stages
            )
            if label is not None:
                ledger.claim_label(ds.root, label=label, run_id=record.run_id, where=where)
    except BaseException as error:
        record = dataclasses.replace(
            record, finished_at_ns=time.time_ns(), complete=True, **_ended(error)
        )
        ledger.write_run(ds.root, record, where=where)
        raise
    final = {k: str(v.ref) for k, v in context.items()}
    record = dataclasses.replace(
        record,
        label=label,
        finished_at_ns=time.time_ns(),
        status="completed",
        complete=True,
        outputs=final,
        fields=tuple(_fields(assay, final)),
    )
    ledger.write_run(ds.root, record, where=where)
    return PipelineRun(ds, record, tuple(stages))


class Pipeline(Namespace):
    """``ds.pipeline``: run recipes, list and reopen runs, abandon a stuck label claim.

    Parameters
    ----------
    store
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    """

    run = operation(run_pipeline)

    def runs(self) -> list[RunRecord]:
        """Every readable run (unreadable ones are skipped with a warning naming them).

        Returns
        -------
        list of RunRecord
            The runs' records.
        """
        return ledger.list_runs(self._store.root, where=self._store.where)

    def open(self, run_id: str) -> PipelineRun:
        """A recorded run; an unreadable one raises its error.

        Parameters
        ----------
        run_id
            The run's id.

        Returns
        -------
        PipelineRun
            The run, with its stage records.

        Raises
        ------
        RunNotFoundError
            No run of that id is stored.
        PipelineRecordError
            Its record or a stage record is missing a field or has a wrong value.
        """
        root, where = self._store.root, self._store.where
        record = ledger.open_run(root, run_id, where=where)
        return PipelineRun(self._store, record, tuple(ledger.run_stages(root, run_id, where=where)))

    def by_label(self, label: str) -> PipelineRun:
        """The completed run that owns ``label``.

        Parameters
        ----------
        label
            The run's label.

        Returns
        -------
        PipelineRun
            The run.

        Raises
        ------
        RunNotFoundError
            No run claimed ``label`` (a :class:`KeyError`).
        """
        owner = ledger.label_owner(self._store.root, label, where=self._store.where)
        if owner is None:
            msg = f"{self._store.where}: no run claimed the label {label!r}; ds.pipeline.runs() lists the runs with their labels"
            raise RunNotFoundError(msg)
        return self.open(owner)

    def abandon_label_claim(self, *, label: str, run_id: str, reason: str) -> RunRecord:
        """Mark the incomplete run that owns ``label`` interrupted, after confirming its process stopped.

        Only for an operator who has confirmed that the run's process
        stopped: CyteArc never infers abandonment from elapsed time. A new
        run can then claim the label.

        Parameters
        ----------
        label
            The label.
        run_id
            The run that owns it, exactly.
        reason
            Why the run's process is known to have stopped (recorded).

        Returns
        -------
        RunRecord
            The run's new record (``interrupted``).

        Raises
        ------
        LabelClaimError
            ``reason`` is empty, ``run_id`` is not the label's current owner,
            or its run is not incomplete.
        RunNotFoundError, PipelineRecordError
            The owner's run is removed or unreadable.
        ReadOnlyStoreError
            The store is read-only.
        """
        return ledger.abandon_label_claim(
            self._store.root, label=label, run_id=run_id, reason=reason, where=self._store.where
        )
