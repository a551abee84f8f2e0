"""The message of every public CyteArc error, raised through the public API (as xarray's tests/test_error_messages.py).

Each case does one wrong thing to a copy of one small store and pins the whole
message: the file or key, what was expected, what was found, and the remedy.
``<store>`` in a pattern stands for the store's path.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sys
import uuid
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import fsspec  # type: ignore[import-untyped]
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import zarr
from zarr.codecs import ZstdCodec

import cytearc
from cytearc import DataStore, SparseToZarr, errors
from cytearc.artifacts import make_provenance, produce
from cytearc.engine import get_engine, open_lazy
from cytearc.metadata.membership import MEMBERSHIP_ROLE
from cytearc.metadata.table import COLUMNS_ATTRIBUTE, list_columns
from cytearc.ops.normalize import normalized_values
from cytearc.pipeline import ledger
from cytearc.pipeline.records import RunRecord
from cytearc.plots import qc_violins

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

N_CELLS, N_FEATURES = 40, 20
RUN_ID = "[0-9a-f]{32}"
ARTIFACT_ID = "[0-9a-f]{64}"
MISSING_REF = f"artifacts/cell_selection/{'0' * 64}"

BASES = {errors.CyteArcError}
"""Classes no code raises as such: they exist to be caught."""

BUILTINS: dict[type[Exception], type[Exception]] = {
    errors.AssayNotFoundError: KeyError,
    errors.ColumnNotFoundError: KeyError,
    errors.DestinationExistsError: FileExistsError,
    errors.FeatureNotFoundError: KeyError,
    errors.ImportOptionError: TypeError,
    errors.MissingArtifactError: KeyError,
    errors.ReadOnlyStoreError: PermissionError,
    errors.RunNotFoundError: KeyError,
    errors.StoreAccessError: OSError,
    errors.StoreNotFoundError: FileNotFoundError,
    errors.WorkspaceNotFoundError: KeyError,
}
"""The builtin each class refines besides ValueError, as errors.py documents."""


def _cells() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ids": [f"c{i}" for i in range(N_CELLS)],
            "sample": [f"s{i % 4}" for i in range(N_CELLS)],
            "group": [f"g{i % 2}" for i in range(N_CELLS)],
        }
    )


def _features() -> pd.DataFrame:
    return pd.DataFrame(
        {"ids": [f"f{i}" for i in range(N_FEATURES)], "names": [f"G{i}" for i in range(N_FEATURES)]}
    )


def _counts() -> np.ndarray:
    return np.random.default_rng(0).poisson(1.0, (N_CELLS, N_FEATURES)).astype(np.float64)


def _import(path: Path, counts: np.ndarray) -> Path:
    SparseToZarr(
        sp.csr_matrix(counts),
        cells=_cells(),
        features=_features(),
        zarr_loc=path,
        show_progress=False,
        cluster="threads",
    ).dump()
    return path


def _open(path: Path | str, **options: object) -> DataStore:
    return DataStore(path, cluster="threads", show_progress=False, **options)  # type: ignore[arg-type]


def _writable(path: Path) -> DataStore:
    return _open(path, zarr_mode="r+")


def _selection(path: Path) -> str:
    """A stored cell selection of every cell."""
    return str(_writable(path).select_measured_cells("RNA"))


def _new_run(ds: DataStore, *, label: str | None = None) -> RunRecord:
    """A running run recorded in ``ds``, as a run's first step writes it."""
    record = RunRecord(
        run_id=ledger.new_run_id(),
        recipe="rna_standard",
        requested_label=label,
        label=None,
        assay="RNA",
        started_at_ns=1,
        status="running",
        complete=False,
        cytearc_version=cytearc.__version__,
        config={},
        stage_order=("input_snapshot",),
    )
    ledger.create_run(ds.root, record, where=ds.where)
    if label is not None:
        ledger.claim_label(ds.root, label=label, run_id=record.run_id, where=ds.where)
    return record


@dataclass(frozen=True)
class Case:
    """How to raise one error class, and the whole message it must have."""

    trigger: Callable[[Path], object]
    pattern: str


CASES: dict[type[Exception], Case] = {}


def case(cls: type[Exception], pattern: str) -> Callable[[Callable[[Path], object]], Case]:
    """Register the decorated trigger as the case of ``cls``."""

    def register(trigger: Callable[[Path], object]) -> Case:
        CASES[cls] = Case(trigger, pattern)
        return CASES[cls]

    return register


# --- stores, sources and count arrays --------------------------------------


@case(
    errors.StoreNotFoundError,
    r"<store>/none\.zarr: no CyteArc store here \(no zarr\.json\); check the path or import a dataset first",
)
def _store_not_found(store: Path) -> object:
    return _open(store / "none.zarr")


@case(
    errors.StoreFormatError,
    r"<store>: not a CyteArc store of format cytearc\.store 1 \(found 'cytearc\.store' 99\); "
    r"open it with the release that wrote it, or import the source again",
)
def _store_format(store: Path) -> object:
    zarr.open_group(store, mode="r+").attrs["cytearc:formatVersion"] = 99
    return _open(store)


@case(
    errors.CompositeFormatError,
    r"<store>: the composite's creation did not finish \(attribute 'composite' has complete=false\); "
    r"create it again with create_composite",
)
def _composite_format(store: Path) -> object:
    root = zarr.open_group(store, mode="r+")
    root.attrs["composite"] = {
        "assay": "RNA",
        "sources": [
            {
                "name": "a",
                "location": str(store),
                "workspace": None,
                "datasetFingerprint": "x",
                "countsFingerprint": "y",
            }
        ],
        "arrays": {"counts": {}},
        "maps": {"rowSources": "a", "sourceRows": "b", "featureColumns": "c"},
        "complete": False,
    }
    return _open(store)


@case(
    errors.MountFormatError,
    r"<store>: attribute 'matrixSource': expected exactly the fields \['location', 'workspace', "
    r"'assays'\], found missing \['assays'\]; this shape is strict and unversioned - mount the "
    r"source again with this release",
)
def _mount_format(store: Path) -> object:
    zarr.open_group(store, mode="r+").attrs["matrixSource"] = {"location": "x", "workspace": None}
    return _open(store)


@case(
    errors.AssayNotFoundError,
    r"<store>: no assay 'ADT2'; the store has \['RNA'\] - pass one of them",
)
def _assay_not_found(store: Path) -> object:
    return _writable(store).qc.metrics("ADT2")


@case(
    errors.AssayTypeError,
    r"<store>: the explicit type 'nonsense' of assay 'RNA' is not a preset; use one of \['RNA', .*'Assay'\]",
)
def _assay_type(store: Path) -> object:
    return _open(store, assay_types={"RNA": "nonsense"})


@case(
    errors.ColumnNotFoundError,
    r"<store>/cellData: no QC metrics of 'RNA' \(expected the columns \['RNA_nCounts', 'RNA_nFeatures'\]\); "
    r"run ds\.qc\.metrics\('RNA'\) first",
)
def _column_not_found(store: Path) -> object:
    return _open(store).plots.qc("RNA")


@case(
    errors.FeatureNotFoundError,
    r"<store>/RNA: no feature named \['CD3E'\] in assay 'RNA' \(expected a value of its feature "
    r"table's 'names' or 'ids'\) - check the spelling or the assay",
)
def _feature_not_found(store: Path) -> object:
    return _open(store).plots.gene_values("CD3E")


@case(
    errors.LayoutError,
    r"<store>/matrices/RNA: attribute 'cytearc:countMatrixLayout': expected exactly integer unitBytes "
    r"and chunkBytes, found \{'unitBytes': 1\}; re-import the source \(the store cannot be read "
    r"without its layout record\)",
)
def _layout(store: Path) -> object:
    zarr.open_group(store / "matrices" / "RNA", mode="r+").attrs["cytearc:countMatrixLayout"] = {
        "unitBytes": 1
    }
    return _open(store).assays["RNA"]


@case(
    errors.SourceFormatError,
    r"<store>/bad\.csv: line 2, row 'c0', column 'f1' holds 'x', not a finite number; "
    r"a count table holds numbers only",
)
def _source_format(store: Path) -> object:
    (store / "bad.csv").write_text("id,f0,f1\nc0,1,x\n")
    return cytearc.import_csv(
        store / "bad.csv", store.parent / "new.zarr", cluster="threads", show_progress=False
    )


@case(
    errors.ImportOptionError,
    r"<store>/table\.csv: detected as a CSV table, whose importer CSVtoZarr takes no option 'genome' "
    r"\(CrToZarr takes it\); it takes orientation, .*, show_progress\. Remove or correct the option",
)
def _import_option(store: Path) -> object:
    (store / "table.csv").write_text("id,f0\nc0,1\n")
    return cytearc.import_data(store / "table.csv", store.parent / "new.zarr", genome="GRCh38")


@case(
    errors.MissingDependencyError,
    r"integration\.harmony runs the harmonypy package \(GPL-3\.0-or-later, not installed with "
    r"CyteArc\), which cannot be imported here \(.+\); install it with `pip install harmonypy`",
)
def _missing_dependency(store: Path) -> object:
    ds = _open(store, zarr_mode="r+")
    norm = ds.features.normalize("RNA")
    pca = ds.reduce.pca(norm, ds.features.hvgs(norm, n_top=10, min_cells=0), n_comps=3)
    saved = sys.modules.get("harmonypy")
    sys.modules["harmonypy"] = None  # type: ignore[assignment]  # how Python marks a module unimportable
    try:
        return ds.integration.harmony(pca, batch_key="sample")
    finally:
        if saved is None:
            del sys.modules["harmonypy"]
        else:
            sys.modules["harmonypy"] = saved


@case(
    errors.NonFiniteCountsError,
    r"<in-memory matrix>: assay RNA, cells 0:40: counts hold nan; expected finite counts - "
    r"fix or drop them before importing",
)
def _non_finite_counts(store: Path) -> object:
    counts = _counts()
    counts[3, 2] = np.nan
    return _import(store.parent / "new.zarr", counts)


@case(
    errors.NegativeCountsError,
    r"\S+/new\.zarr/RNA: features\.normalize: 1 selected cells have negative counts, the first "
    r"cell 'c3' \(row 3\) at feature 'f2' \(column 2\) holds -4; normalization needs non-negative "
    r"counts - import the raw counts \(for an H5AD file, the counts layer with --layer / layer=\)",
)
def _negative_counts(store: Path) -> object:
    counts = _counts()
    counts[3, 2] = -4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the import warns of the negative value
        path = _import(store.parent / "new.zarr", counts)
    return _open(path, zarr_mode="r+").features.normalize("RNA")


@case(
    errors.CountCastError,
    r"counts: the largest value 1e\+20 does not fit uint64, the widest count dtype; "
    r"check that the source holds counts",
)
def _count_cast(store: Path) -> object:
    counts = _counts()
    counts[3, 2] = 1e20
    return _import(store.parent / "new.zarr", counts)


@case(
    errors.DestinationExistsError,
    r"<store>: already exists and holds data; pass overwrite=True to replace a CyteArc store",
)
def _destination_exists(store: Path) -> object:
    return _import(store, _counts())


@case(
    errors.ReadOnlyStoreError,
    r"<store>: qc\.metrics writes cell columns; open the store with zarr_mode='r\+'",
)
def _read_only(store: Path) -> object:
    return _open(store).qc.metrics("RNA")


@case(
    errors.ReservedColumnError,
    r"<store>/cellData: 'RNA_I' is reserved for assay membership; insert refuses it before "
    r"reading any value - choose another name",
)
def _reserved_column(store: Path) -> object:
    return _writable(store).cells.insert("RNA_I", np.ones(N_CELLS, dtype=bool))


@case(
    errors.UnmeasuredCellsError,
    r"features\.normalize: 10 of the 40 selected cells were not measured by assay 'RNA' \(membership "
    r"column 'RNA_I'\); their zero counts are no measurement - .*select_measured_cells.*",
)
def _unmeasured_cells(store: Path) -> object:
    cells = zarr.open_group(store / "cellData", mode="r+")
    measured = np.arange(N_CELLS) >= 10
    column = cells.create_array(
        "RNA_I",
        shape=measured.shape,
        dtype=bool,
        chunks=measured.shape,
        compressors=ZstdCodec(level=3),
        dimension_names=("cell",),
        attributes={"role": MEMBERSHIP_ROLE, "assay": "RNA"},
    )
    column[:] = measured
    list_columns(cells, [*cells.attrs[COLUMNS_ATTRIBUTE], "RNA_I"])  # type: ignore[misc]
    return _writable(store).features.normalize("RNA")


@case(
    errors.OperationArgumentError,
    r"<store>: markers\.search: group_key must name a cell column, found 'cluster'; "
    r"the cell table has \['I', 'group', 'ids', 'sample'\]",
)
def _operation_argument(store: Path) -> object:
    return _writable(store).markers.search("RNA", group_key="cluster")


# --- engine ---------------------------------------------------------------


@case(
    errors.MemBudgetError,
    r"mem_budget: cannot read 'lots' as a size; write it as '8G', '512MiB', bytes, "
    r"or a fraction such as '0\.5'",
)
def _mem_budget(store: Path) -> object:
    return get_engine(mem_budget="lots", cluster="threads")


@case(
    errors.EngineConfigError,
    r"cluster: expected a scheduler address or a distributed\.Client, found int",
)
def _engine_config(store: Path) -> object:
    return get_engine(cluster=42)


@case(
    errors.ShardAlignmentError,
    r"rows_per_block 300 is not a multiple of the shard's 200 rows",
)
def _shard_alignment(store: Path) -> object:
    array = zarr.create_array(
        store={}, shape=(1000, 30), shards=(200, 30), chunks=(50, 30), dtype="u2", fill_value=0
    )
    return open_lazy(array, rows_per_block=300)


# --- artifacts ------------------------------------------------------------


@case(
    errors.ArtifactError,
    r"artifact ref 'pca': expected '\[<assay>/\]artifacts/<kind>/<id>'; "
    r"pass an ArtifactRef or str\(artifact\.ref\) of an artifact of the store",
)
def _artifact(store: Path) -> object:
    return _open(store).load_artifact("pca")


@case(
    errors.MissingArtifactError,
    f"{MISSING_REF}: no such artifact in the store; recompute it "
    r"\(its inputs may have been removed\)",
)
def _missing_artifact(store: Path) -> object:
    return _open(store).load_artifact(MISSING_REF)


@case(
    errors.IncompleteArtifactError,
    f"artifacts/cell_selection/{ARTIFACT_ID}: the artifact was never published "
    r"\(complete=False\); it is left by an interrupted producer and is never read - compute it again",
)
def _incomplete_artifact(store: Path) -> object:
    ref = _selection(store)
    group = zarr.open_group(store / ref, mode="r+")
    unpublished = {k: v for k, v in group.attrs.items() if not k.startswith("cytearc:")}
    group.attrs.clear()
    group.attrs.update({**unpublished, "complete": False})
    return _open(store).load_artifact(ref)


@case(
    errors.DamagedArtifactError,
    f"artifacts/cell_selection/{ARTIFACT_ID}: the identity attributes \\(artifact_id, kind, "
    "provenance\\) have digest sha256:[0-9a-f]{64}, not the 'cytearc:attributesDigest' "
    "'sha256:[0-9a-f]{64}' recorded at publication; they were edited after publication and "
    "the artifact is never read or reused - compute it again: rerun its operation with "
    "invalidate_cache=True",
)
def _damaged_artifact(store: Path) -> object:
    ref = _selection(store)
    group = zarr.open_group(store / ref, mode="r+")
    provenance = dict(group.attrs["provenance"])
    group.attrs["provenance"] = {**provenance, "parameters": {"edited": True}}
    return _open(store).load_artifact(ref)


@case(
    errors.StaleSelectionError,
    f"artifacts/cell_selection/{ARTIFACT_ID}: the selection was made for other cell ids "
    r"\(they were replaced or reordered\); make the selection again",
)
def _stale_selection(store: Path) -> object:
    ref = _selection(store)
    zarr.open_array(store / ref / "mask", mode="r+").attrs["rowIds"] = "sha256:" + "0" * 64
    return _writable(store).features.normalize("RNA", cell_selection=ref)


@case(
    errors.StaleArtifactError,
    f"RNA/artifacts/normalized/{ARTIFACT_ID}: its values are rebuilt from the counts of assay "
    r"'RNA'; expected counts sha256:[0-9a-f]{64}, found sha256:0{64} \(the counts were "
    r"rewritten\) - recompute it with features.normalize\(\.\.\., invalidate_cache=True\)",
)
def _stale_artifact(store: Path) -> object:
    ref = _writable(store).features.normalize("RNA").ref
    other = "sha256:" + "0" * 64
    matrix = zarr.open_group(store / "matrices" / "RNA", mode="r+")
    matrix["counts"].attrs["content_fingerprint"] = other
    matrix["countSummaries"].attrs["source_fingerprint"] = other
    ds = _open(store)
    return normalized_values(ds, ds.load_artifact(ref))


@case(
    errors.NonFiniteArtifactError,
    r"tests\.op: array 'coords' holds inf at row 1; artifact values must be finite - "
    r"check the input counts and parameters",
)
def _non_finite_artifact(store: Path) -> object:
    ds = _writable(store)
    return produce(
        ds.root,
        scope="RNA",
        kind="test",
        provenance=make_provenance("tests.op", parameters={}, inputs={}),
        build=lambda writer: writer.write("coords", np.array([0.0, np.inf])),
        compute=ds.engine.compute,
    )


# --- pipeline runs --------------------------------------------------------


@case(
    errors.RecipeError,
    r"no recipe 'rna_fast'; recipes are \['adt_standard', 'atac_standard', 'citeseq_wnn', 'rna_standard'\], "
    r"or pass a Recipe of your own "
    r"\(see cytearc\.pipeline\.recipes\)",
)
def _recipe(store: Path) -> object:
    return _writable(store).pipeline.run("rna_fast")


@case(
    errors.RunNotFoundError,
    r"<store>: no run claimed the label 'baseline'; ds\.pipeline\.runs\(\) lists the runs with their labels",
)
def _run_not_found(store: Path) -> object:
    return _open(store).pipeline.by_label("baseline")


@case(
    errors.PipelineRecordError,
    f"<store>: pipeline/runs/{RUN_ID} attribute 'cytearc:run': run record: missing fields 'recipe', "
    r".*'interruption'; expected exactly runId, .*, interruption; pipeline records have one strict "
    r"shape and are never migrated; a record damaged or written by a later release cannot be read "
    r"by this one - read it with the release that wrote it, or run the recipe again",
)
def _pipeline_record(store: Path) -> object:
    ds = _writable(store)
    run = _new_run(ds)
    ds.root[f"pipeline/runs/{run.run_id}"].attrs["cytearc:run"] = {"runId": run.run_id}
    return ds.pipeline.open(run.run_id)


@case(
    errors.LabelClaimError,
    r"<store>: abandoning the claim of label 'baseline' needs a reason \(why the run's process is "
    r"known to have stopped\), found ' '; pass reason='\.\.\.'",
)
def _label_claim(store: Path) -> object:
    ds = _writable(store)
    run = _new_run(ds, label="baseline")
    return ds.pipeline.abandon_label_claim(label="baseline", run_id=run.run_id, reason=" ")


@case(
    errors.LabelTakenError,
    f"<store>: label 'baseline' belongs to completed run {RUN_ID}; choose another label",
)
def _label_taken(store: Path) -> object:
    ds = _writable(store)
    run = _new_run(ds, label="baseline")
    done = dataclasses.replace(
        run, status="completed", complete=True, finished_at_ns=2, label="baseline", outputs={}
    )
    ledger.write_run(ds.root, done, where=ds.where)
    return ds.pipeline.run(label="baseline")


@case(
    errors.LabelClaimBlockedError,
    f"<store>: label 'baseline' is claimed by run ({RUN_ID}), which is running \\(complete=False\\); "
    r"it may still be running\. After confirming that its process stopped, release the label with "
    r"pipeline\.abandon_label_claim\(label='baseline', run_id='\1', reason=\.\.\.\), "
    r"or choose another label",
)
def _label_claim_blocked(store: Path) -> object:
    ds = _writable(store)
    _new_run(ds, label="baseline")
    return ds.pipeline.run(label="baseline")


@case(
    errors.AtomicClaimUnsupportedError,
    r"memory://[0-9a-f]{32}/s\.zarr: run labels are claimed by creating a key atomically only if it "
    r"is absent, which FsspecStore cannot do; run without a label, or on a local store",
)
def _atomic_claim_unsupported(store: Path) -> object:
    name = uuid.uuid4().hex
    memory = fsspec.filesystem("memory")
    memory.put(str(store), f"/{name}/s.zarr", recursive=True)
    try:
        return _open(f"memory://{name}/s.zarr", zarr_mode="r+").pipeline.run(label="baseline")
    finally:
        memory.rm(f"/{name}", recursive=True)


# --- plots ----------------------------------------------------------------


@case(
    errors.PlotInputError,
    r"columns: \['RNA_nCount'\] not in the frame, whose columns are \['RNA_nCounts'\]; "
    r"pass names of its columns",
)
def _plot_input(store: Path) -> object:
    return qc_violins(pd.DataFrame({"RNA_nCounts": [1.0, 2.0]}), ["RNA_nCount"])


# --- store damage ---------------------------------------------------------------


@case(
    errors.StoreDamageError,
    r"<store>/matrices/RNA/counts/c/0/0: every inner chunk of the shard \(or its index\) cannot be "
    r"decoded \(ValueError: inner chunk \(0, 0\) does not match its crc32c checksum\); the store is "
    r"damaged - run "
    r"`cytearc verify <store>` to find every damaged chunk, then restore the store from a copy or "
    r"import the source again",
)
def _store_damage(store: Path) -> object:
    shard = store / "matrices" / "RNA" / "counts" / "c" / "0" / "0"
    shard.write_bytes(b"\0" * 10 + shard.read_bytes()[10:])
    return _open(store).assays["RNA"].counts.compute()


@case(
    errors.WorkspaceNotFoundError,
    r"<store>: no workspace 'second'; the store has the workspaces \[\] - pass one of them, or "
    r"create it with DataStore\(\.\.\., zarr_mode='r\+'\)\.create_workspace\('second'\)",
)
def _workspace_not_found(store: Path) -> object:
    return _open(store, workspace="second")


@case(
    errors.InterruptedReplaceError,
    r"<store>/cellData/group: a writer was killed while replacing the columns \['sample', "
    r"'group'\] together, so their values may mix two writes; run the operation that writes them "
    r"again \(for a pipeline run: `cytearc run` again\), or drop them with the table's "
    r"\.drop\('group'\) and recompute them",
)
def _interrupted_replace(store: Path) -> object:
    cells = zarr.open_group(store / "cellData", mode="r+")
    cells.attrs["cytearc:replacing"] = ["sample", "group"]
    return _open(store).cells.fetch_all("group")


@case(
    errors.CountSummariesError,
    r"<store>/matrices/RNA/countSummaries/rowSums: chunk c/0 is missing \(it would read as zeros\); "
    r"the summaries of a store are complete - re-import the source, or rebuild the count arrays "
    r"from counts: python -m cytearc\.tools\.repack_zarr <store> OUT --data-only",
)
def _count_summaries(store: Path) -> object:
    (store / "matrices" / "RNA" / "countSummaries" / "rowSums" / "c" / "0").unlink()
    return _open(store).assays["RNA"].summary("rowSums")


@case(
    errors.StoreAccessError,
    r"s3://bucket/x\.zarr: cannot reach the store at endpoint http://127\.0\.0\.1:\d+ "
    r"\(EndpointConnectionError: .*\); check endpoint_url in storage_options \(or its "
    r"client_kwargs\), the network and the credentials",
)
def _store_access(store: Path) -> object:
    from cytepool.testing import free_port  # noqa: PLC0415

    options = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{free_port()}"},
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
    }
    return _open("s3://bucket/x.zarr", storage_options=options)


# --- import sources and destinations ----------------------------------------------


def _mtx_folder(folder: Path, entries: list[str]) -> Path:
    """A 10x Matrix Market folder of 2 features x 2 cells whose matrix holds ``entries``."""
    folder.mkdir()
    header = ["%%MatrixMarket matrix coordinate integer general", f"2 2 {len(entries)}"]
    (folder / "matrix.mtx").write_text("\n".join([*header, *entries]) + "\n")
    (folder / "features.tsv").write_text("G0\tg0\tGene Expression\nG1\tg1\tGene Expression\n")
    (folder / "barcodes.tsv").write_text("C0\nC1\n")
    return folder


@case(
    errors.DamagedSourceError,
    r"<store>/mtx/matrix\.mtx\.gz: the compressed data is damaged after line \d \(EOFError: "
    r"Compressed file ended before the end-of-stream marker was reached\); the file is truncated "
    r"or corrupt - copy or download it again \(gzip -t checks a \.gz file\)",
)
def _damaged_source(store: Path) -> object:
    import gzip  # noqa: PLC0415

    folder = _mtx_folder(store / "mtx", [f"{i % 2 + 1} {i // 2 % 2 + 1} 1" for i in range(4)])
    data = gzip.compress((folder / "matrix.mtx").read_bytes())
    (folder / "matrix.mtx").unlink()
    (folder / "matrix.mtx.gz").write_bytes(data[:-12])
    return cytearc.import_10x_mtx(
        folder, store.parent / "new.zarr", cluster="threads", show_progress=False
    )


@case(
    errors.RepeatedEntryError,
    r"<store>/mtx/matrix\.mtx: the entry at row 2, column 1 \(feature 'G1', cell 'C0'\) is stored "
    r"2 times; a count matrix stores each coordinate once, so the file is damaged - write it again "
    r"from its source \(to add repeats up on purpose, sum them in memory with scipy's "
    r"sum_duplicates and import with SparseToZarr\)",
)
def _repeated_entry(store: Path) -> object:
    folder = _mtx_folder(store / "mtx", ["2 1 3", "1 2 1", "2 1 4"])
    return cytearc.import_10x_mtx(
        folder, store.parent / "new.zarr", cluster="threads", show_progress=False
    )


@case(
    errors.RemoteDestinationError,
    r"https://host/ds\.zarr: the https protocol is read-only, so stores cannot be written there; "
    r"write to a local path or an object store \(s3://, gs://, memory://\)",
)
def _remote_destination(store: Path) -> object:
    (store / "table.csv").write_text("id,f0\nc0,1\n")
    return cytearc.import_csv(
        store / "table.csv", "https://host/ds.zarr", cluster="threads", show_progress=False
    )


@case(
    errors.DestinationOverlapError,
    r"<store>/sub\.zarr: overlaps the source store <store>; a writer never replaces or writes "
    r"into its source - choose a destination outside it",
)
def _overlapping_destination(store: Path) -> object:
    from cytearc.tools import SubsetZarr  # noqa: PLC0415

    return SubsetZarr(store, store / "sub.zarr", cells=[0], cluster="threads").dump()


@case(
    errors.PendingAssayError,
    r"<store>/GeneSets: a pending derived assay \(written by 'add_grouped_assay', not finished\); "
    r"wait for its writer to finish, or, once no process writes it, remove it with "
    r"DataStore\(\.\.\., zarr_mode='r\+'\)\.discard_interrupted_assay\('GeneSets'\)",
)
def _pending_assay(store: Path) -> object:
    from cytearc.tools import SubsetZarr  # noqa: PLC0415

    zarr.open_group(store, mode="r+").create_group(
        "GeneSets", attributes={"cytearc:pending_assay": "add_grouped_assay"}
    )
    return SubsetZarr(store, store.parent / "sub.zarr", cells=[0], cluster="threads").dump()


@case(
    errors.MergePlanError,
    r"sources: a merge needs at least two stores, found 1; copy one store with SubsetZarr or "
    r"repack_zarr",
)
def _one_source(store: Path) -> object:
    from cytearc.tools import DataStoreMerge  # noqa: PLC0415

    return DataStoreMerge([store], store.parent / "m.zarr", cluster="threads").dump()


@case(
    errors.MergeResumeError,
    r"<store>-merged: already holds a complete merge; pass overwrite=True to replace it, or "
    r"choose another destination",
)
def _complete_merge(store: Path) -> object:
    from cytearc.tools import DataStoreMerge, SubsetZarr  # noqa: PLC0415

    other = SubsetZarr(
        store, store.parent / "b.zarr", cells=[0], cluster="threads", show_progress=False
    ).dump()
    merge = DataStoreMerge(
        [store, other], f"{store}-merged", cluster="threads", show_progress=False
    )
    merge.dump()
    return merge.dump()


# --- the tests ------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _import(tmp_path_factory.mktemp("source") / "s.zarr", _counts())


@pytest.fixture
def store(source: Path, tmp_path: Path) -> Path:
    """A fresh copy of the small store, for one case to damage."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(source, copy)
    return copy


def _classes() -> set[type[Exception]]:
    return {getattr(errors, name) for name in errors.__all__}


@pytest.mark.parametrize("cls", sorted(CASES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_message_names_key_expected_found_and_remedy(cls: type[Exception], store: Path) -> None:
    """Each error, raised through the public API, has exactly its pinned message."""
    pattern = CASES[cls].pattern.replace("<store>", re.escape(str(store)))
    with pytest.raises(cls) as info:
        CASES[cls].trigger(store)
    assert type(info.value) is cls
    assert re.fullmatch(pattern, str(info.value)), f"{str(info.value)!r}\n  !~ {pattern!r}"


def test_every_public_error_has_a_case() -> None:
    """Every class in cytearc.errors.__all__ is pinned here, or is a base that none raises."""
    assert set(CASES) | BASES == _classes()
    assert not set(CASES) & BASES


def test_errors_subclass_the_root_and_their_builtin() -> None:
    """Every error is a CyteArcError (so a ValueError) and the builtin errors.py says it refines."""
    for cls in _classes():
        assert issubclass(cls, errors.CyteArcError), cls
        assert issubclass(cls, ValueError), cls
        assert issubclass(cls, BUILTINS.get(cls, ValueError)), cls
    assert set(BUILTINS) <= _classes()
    for base in BASES:
        assert all(issubclass(cls, base) for cls in _classes())


def test_top_level_exports_every_error() -> None:
    """``cytearc`` exports each class of cytearc.errors.__all__ by its name."""
    for name in errors.__all__:
        assert getattr(cytearc, name) is getattr(errors, name)
        assert name in cytearc.__all__
