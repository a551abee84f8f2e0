"""The ``cytearc`` command line: ``import``, ``info``, ``workspace``, ``verify``, ``subset``, ``merge``, ``repack``, ``export``, ``run``, ``runs``, ``pool``, ``demo`` and ``cluster``.

Exit codes: 0 success, 1 the import or open failed (the message says why),
2 usage errors. ``verify``: 0 every value matches what the store recorded, 1
naming the first damaged array, chunk and the remedy, 3 no store at the path
(or a remote store that cannot be reached), as ``cytepool verify``.

Every path may be an fsspec URL (``s3://bucket/ds.zarr``); the options of
its filesystem come from ``--storage-options`` (before the command) or
fsspec's ``FSSPEC_<PROTOCOL>`` environment variables. Every command takes
``--cluster ADDRESS`` (a scheduler address or scheduler file; by default the
environment variable ``CYTEARC_CLUSTER``) to run on an existing Dask
cluster; ``cytearc cluster`` starts one from a memory budget and prints its
address and dashboard for other processes to join.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import fsspec.config

from cytearc import __version__
from cytepool.compute import CLUSTER_VARIABLE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from cytearc.datastore import DataStore

__all__ = ["main", "report_errors", "storage_configuration"]


def _import(args: argparse.Namespace) -> int:
    from cytearc.io.detect import import_data  # noqa: PLC0415

    options: dict[str, Any] = {
        "mem_budget": args.mem_budget,
        "workers": args.workers,
        "cluster": args.cluster,
        "overwrite": args.overwrite,
        "show_progress": not args.json,
    }
    if args.compression is not None:
        options["compression"] = None if args.compression == "none" else args.compression
    for name in ("genome", "layer", "orientation", "sep", "index_col", "assay_split_key"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    result = import_data(args.source, args.destination, **options)
    doc = {
        "path": str(result.path),
        "assays": dict(result.assays),
        "shapes": {k: list(v) for k, v in result.shapes.items()},
        "dtypes": dict(result.dtypes),
        "datasetFingerprint": result.dataset_fingerprint,
    }
    print(
        json.dumps(doc, indent=2)
        if args.json
        else f"imported {args.source} into {result.path}: "
        + ", ".join(
            f"{a} ({t}) {result.shapes[a][0]} x {result.shapes[a][1]} {result.dtypes[a]}"
            for a, t in result.assays.items()
        )
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    from cytearc.datastore import DataStore  # noqa: PLC0415

    ds = DataStore(args.store, workspace=args.workspace, cluster=args.cluster)
    doc: dict[str, Any] = {
        "path": ds.where,
        "workspace": ds.workspace,
        "workspaces": ds.workspaces,
        "cells": ds.cells.n_rows,
        "datasetFingerprint": ds.dataset_fingerprint,
        "cellColumns": ds.cells.columns,
        "assays": {
            name: {
                "type": assay.assayType,
                "shape": list(assay.shape),
                "dtype": str(assay.dtype),
                "layout": assay.layout.to_json(),
                "shards": list(assay._counts.shards or ()),
                "countsT": assay._counts_t is not None,
                "contentFingerprint": assay.content_fingerprint,
            }
            for name, assay in ds.assays.items()
        },
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    place = doc["path"] if ds.workspace is None else f"{doc['path']} (workspace {ds.workspace})"
    print(f"store {place}: {doc['cells']} cells, dataset {doc['datasetFingerprint']}")
    if ds.workspaces:
        print(f"  workspaces: {', '.join(ds.workspaces)}")
    for name, a in doc["assays"].items():
        print(
            f"  {name} ({a['type']}): {a['shape'][0]} x {a['shape'][1]} {a['dtype']}, shards {a['shards']}, layout {a['layout']}, countsT {'yes' if a['countsT'] else 'no'}"
        )
        print(f"    counts {a['contentFingerprint']}")
    return 0


def _workspace(args: argparse.Namespace) -> int:
    from cytearc.datastore import DataStore  # noqa: PLC0415

    ds = DataStore(
        args.store,
        zarr_mode="r+",
        workspace=args.workspace,
        cluster=args.cluster,
        show_progress=False,
    )
    created = ds.create_workspace(args.name, overwrite=args.overwrite)
    doc = {"path": created.where, "workspace": created.workspace, "workspaces": created.workspaces}
    print(
        json.dumps(doc, indent=2)
        if args.json
        else f"created workspace {created.workspace} of {created.where} ({created.cells.n_rows} cells)"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from cytearc.datastore import DataStore  # noqa: PLC0415
    from cytearc.errors import CyteArcError, StoreAccessError, StoreNotFoundError  # noqa: PLC0415

    error: CyteArcError
    try:
        ds = DataStore(
            args.store,
            zarr_mode="r+" if args.discard_unpublished else "r",
            workspace=args.workspace,
            mem_budget=args.mem_budget,
            workers=args.workers,
            cluster=args.cluster,
            show_progress=not args.json,
        )
    except (StoreNotFoundError, StoreAccessError) as exc:
        error, code = exc, 3
    except CyteArcError as exc:
        error, code = exc, 1
    else:
        if args.discard_unpublished:
            for ref in ds.discard_unpublished_artifacts():
                print(f"discarded unpublished artifact {ref}", file=sys.stderr)
        report = ds.verify()
        print(json.dumps(report.to_json(), indent=2) if args.json else report)
        if report.damage is not None and not args.json:
            print(f"DAMAGED {ds.where}: {report.damage}", file=sys.stderr)
        return 0 if report.ok else 1
    if args.json:
        doc = {
            "path": str(args.store),
            "ok": False,
            "error": {"type": type(error).__name__, "message": str(error)},
        }
        print(json.dumps(doc, indent=2))
    else:
        label = "DAMAGED" if code == 1 else "error"
        print(f"{label} {args.store}: {type(error).__name__}: {error}", file=sys.stderr)
    return code


def _option(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        msg = f"--set expects NAME=VALUE, found {text!r}"
        raise argparse.ArgumentTypeError(msg)
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def _writable_store(args: argparse.Namespace) -> DataStore:
    """The store of a command that writes results, on the engine its options ask for."""
    from cytearc.datastore import DataStore  # noqa: PLC0415

    return DataStore(
        args.store,
        zarr_mode="r+",
        workspace=args.workspace,
        mem_budget=args.mem_budget,
        workers=args.workers,
        cluster=args.cluster,
        show_progress=not args.json,
    )


def _run(args: argparse.Namespace) -> int:
    ds = _writable_store(args)
    run = ds.pipeline.run(args.recipe, assay=args.assay, label=args.label, **dict(args.set))
    plots = [str(p) for p in ds.plots.save_run_figures(run, args.plots)] if args.plots else []
    summary = run.summary()
    doc = {
        "runId": run.run_id,
        "recipe": run.record.recipe,
        "label": run.record.label,
        "status": run.record.status,
        "outputs": {k: str(v) for k, v in run.outputs.items()},
        "stages": summary.to_dict(orient="records"),
        "plots": plots,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"run {run.run_id} ({run.record.recipe}, label {run.record.label!r}): {run.record.status}"
    )
    print(summary.to_string(index=False))
    for path in plots:
        print(f"  wrote {path}")
    return 0


def _runs(args: argparse.Namespace) -> int:
    from cytearc.datastore import DataStore  # noqa: PLC0415

    if args.abandon is not None:
        if not args.label or not args.reason:
            print("error: --abandon RUN_ID needs --label and --reason", file=sys.stderr)
            return 2
        ds = DataStore(
            args.store, zarr_mode="r+", cluster=args.cluster or "threads", workspace=args.workspace
        )
        ds.pipeline.abandon_label_claim(label=args.label, run_id=args.abandon, reason=args.reason)
    else:
        ds = DataStore(args.store, cluster=args.cluster or "threads", workspace=args.workspace)
    runs = [
        {
            "runId": r.run_id,
            "recipe": r.recipe,
            "label": r.label,
            "requestedLabel": r.requested_label,
            "status": r.status,
            "complete": r.complete,
            "startedAtNs": r.started_at_ns,
            "finishedAtNs": r.finished_at_ns,
        }
        for r in sorted(ds.pipeline.runs(), key=lambda r: r.started_at_ns)
    ]
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    for run in runs:
        label = run["label"] or run["requestedLabel"] or "-"
        print(f"{run['runId']}  {run['status']:<11} {run['recipe']}  label {label}")
    return 0


def _pool(args: argparse.Namespace) -> int:
    from cytepool import read_cube  # noqa: PLC0415

    ds = _writable_store(args)
    path = ds.compare.write_bulk(
        args.output,
        args.assay,
        sample_key=args.sample,
        group_key=args.group,
        cell_selection=args.cell_selection,
        compression=None if args.compression == "none" else args.compression,
        overwrite=args.overwrite,
    )
    cube = read_cube(path)
    doc = {
        "path": str(path),
        "fingerprint": cube.fingerprint,
        "shape": dict(zip(("groups", "samples", "features"), cube.shape, strict=True)),
        "groups": [str(g) for g in cube.groups.iloc[:, 0]],
        "samples": [str(s) for s in cube.samples.iloc[:, 0]],
        "sampleColumns": list(cube.samples.columns),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        g, s_, f = cube.shape
        print(f"pooled {ds.where} into {path}: {g} groups x {s_} samples x {f} features")
        print(f"  fingerprint {cube.fingerprint}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from cytearc.demo import describe, run_demo  # noqa: PLC0415

    summary = run_demo(
        args.output,
        n_cells=args.cells,
        n_genes=args.genes,
        seed=args.seed,
        mem_budget=args.mem_budget,
        workers=args.workers,
        cluster=args.cluster,
        show_progress=not args.json,
    )
    print(json.dumps(summary, indent=2) if args.json else describe(summary))
    return 0


def _cluster_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="a Dask scheduler address (tcp://HOST:8786) or scheduler file to run on, or 'threads' "
        f"(default: ${CLUSTER_VARIABLE}, else a local cluster of --mem-budget)",
    )


def _budget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mem-budget",
        default=None,
        help="worker memory in all, e.g. 4G (default: half the memory)",
    )
    p.add_argument(
        "--workers",
        default=None,
        help="worker processes of one thread each, or PxT: P processes of T threads "
        "(default: a task per core, two threads per process)",
    )


def _cluster(args: argparse.Namespace) -> int:
    """Run a local cluster of the budget for other processes to join, until SIGINT or SIGTERM."""
    from distributed import Client  # noqa: PLC0415

    from cytearc.engine.budget import resolve_budget  # noqa: PLC0415
    from cytearc.engine.cluster import start_local_cluster  # noqa: PLC0415
    from cytepool.compute import limit_blas_threads  # noqa: PLC0415

    budget = resolve_budget(args.mem_budget, args.workers)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with (
        start_local_cluster(
            budget, host=args.host, port=args.port, dashboard_port=args.dashboard_port
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        limit_blas_threads(client)
        if args.scheduler_file:
            client.write_scheduler_file(args.scheduler_file)
        doc = {
            "address": cluster.scheduler_address,
            "dashboard": client.dashboard_link,
            "workers": budget.workers,
            "threadsPerWorker": budget.threads,
            "memoryLimitPerWorker": budget.per_worker,
            "schedulerFile": args.scheduler_file,
        }
        if args.json:
            print(json.dumps(doc), flush=True)
        else:
            print(
                f"CyteArc cluster: {budget}\n  address   {doc['address']}\n"
                f"  dashboard {doc['dashboard']}\n"
                f"  join it with --cluster {doc['address']} or "
                f"export {CLUSTER_VARIABLE}={doc['address']}; Ctrl-C stops it",
                flush=True,
            )
        while not stop.wait(1.0):
            pass
    return 0


def _engine_arguments(p: argparse.ArgumentParser) -> None:
    _budget_arguments(p)
    _cluster_argument(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _workspace_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace", default=None, help="open this workspace of the store (default its root)"
    )


def _separator(text: str) -> str:
    r"""A field delimiter as typed in a shell, where a tab is written ``\t``."""
    return "\t" if text == "\\t" else text


def _store_commands(sub: Any) -> None:  # noqa: ANN401 (argparse's private subparsers type)
    p = sub.add_parser("import", help="import 10x (h5 or mtx folder), H5AD or CSV into a new store")
    p.add_argument("source")
    p.add_argument("destination")
    p.add_argument(
        "--compression",
        choices=["lz4", "zstd", "gzip", "none"],
        default=None,
        help="the codec of the count arrays (default: lz4, the importer's; zstd stores less)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an unprepared CyteArc store")
    p.add_argument(
        "--genome", default=None, help=".h5: the genome to read (v2) or keep the features of (v3)"
    )
    p.add_argument(
        "--layer", default=None, help=".h5ad and .h5mu: the layer to import instead of X"
    )
    p.add_argument(
        "--orientation",
        choices=["cells_x_features", "features_x_cells"],
        default=None,
        help="table: what the rows are (default cells_x_features)",
    )
    p.add_argument(
        "--sep",
        type=_separator,
        default=None,
        help=r"table: the field delimiter, '\t' for a tab (default by the name: tab or comma)",
    )
    p.add_argument(
        "--index-col", type=int, default=None, help="table: the position of the column of row ids"
    )
    p.add_argument(
        "--assay-split-key", default=None, help="feature column naming each feature's assay"
    )
    _engine_arguments(p)
    p.set_defaults(run=_import)
    p = sub.add_parser(
        "info", help="assays, types, shapes, dtypes, layout and fingerprints of a store"
    )
    p.add_argument("store")
    p.add_argument("--json", action="store_true")
    _cluster_argument(p)
    _workspace_argument(p)
    p.set_defaults(run=_info)
    p = sub.add_parser(
        "workspace",
        help="create a workspace: its own cell and feature tables, artifacts and runs over the store's counts",
    )
    p.add_argument("store")
    p.add_argument("name", help="the new workspace")
    p.add_argument(
        "--from",
        dest="workspace",
        default=None,
        help="start from this workspace's tables (default the store's root)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a workspace of that name")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _cluster_argument(p)
    p.set_defaults(run=_workspace)
    p = sub.add_parser(
        "verify",
        help="read every value and check it against the store's fingerprints, summaries and digests",
    )
    p.add_argument("store")
    p.add_argument(
        "--discard-unpublished",
        action="store_true",
        help="first delete artifact groups a killed producer left unpublished "
        "(only when no process is writing to the store)",
    )
    _engine_arguments(p)
    _workspace_argument(p)
    p.set_defaults(run=_verify)


def _export(args: argparse.Namespace) -> int:
    from cytearc.datastore import DataStore  # noqa: PLC0415

    ds = DataStore(
        args.store,
        workspace=args.workspace,
        mem_budget=args.mem_budget,
        workers=args.workers,
        cluster=args.cluster,
        show_progress=not args.json,
    )
    if args.format == "mtx":
        if args.run_label is not None or args.matrix != "counts" or args.layer:
            msg = "--run, --matrix and --layer: a Matrix Market folder holds raw counts only; export them as h5ad"
            raise ValueError(msg)
        path = ds.to_mtx(args.output, assay=args.assay, overwrite=args.overwrite)
    else:
        path = ds.to_h5ad(
            args.output,
            assay=args.assay,
            matrix=args.matrix,
            run=args.run_label,
            layers=_layers(args.layer),
            overwrite=args.overwrite,
        )
    doc = {"path": str(path), "format": args.format, "assay": args.assay, "cells": ds.cells.n_rows}
    print(
        json.dumps(doc, indent=2) if args.json else f"exported {args.assay} of {ds.where} to {path}"
    )
    return 0


def _layers(given: list[str]) -> dict[str, str]:
    """``--layer NAME=ASSAY`` (or ``--layer ASSAY``) as ``{layer: assay}``."""
    layers = {}
    for item in given:
        name, _, assay = item.partition("=")
        layers[name] = assay or name
    return layers


def _tool_commands(sub: Any) -> None:  # noqa: ANN401 (argparse's private subparsers type)
    from cytearc.tools import datastore_merge, repack, subset_zarr  # noqa: PLC0415 (the tools import the store)

    subset_zarr.add_arguments(
        sub.add_parser("subset", help="write some cells of a store into a new store")
    )
    datastore_merge.add_arguments(
        sub.add_parser("merge", help="merge stores into a new store (resumable)")
    )
    p = sub.add_parser(
        "export", help="write an assay's raw counts as H5AD or a 10x Matrix Market folder"
    )
    p.add_argument("store")
    p.add_argument("output", help="the .h5ad file, or the folder for --format mtx")
    p.add_argument("--assay", default="RNA")
    p.add_argument("--format", choices=["h5ad", "mtx"], default="h5ad")
    p.add_argument(
        "--run",
        dest="run_label",
        default=None,
        help="a run's label or id: its cells, clusters, PCA, UMAP and HVGs",
    )
    p.add_argument(
        "--matrix",
        choices=["counts", "normed"],
        default="counts",
        help="X: the raw counts, or normalized values (the run's, else the assay type's)",
    )
    p.add_argument(
        "--layer",
        action="append",
        default=[],
        metavar="NAME=ASSAY",
        help="add an assay of the same features as a layer of raw counts (repeatable)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing file or folder")
    _engine_arguments(p)
    _workspace_argument(p)
    p.set_defaults(run=_export)
    repack.add_arguments(
        sub.add_parser(
            "repack",
            help="rewrite a store under a layout profile, or rebuild its count arrays (--data-only)",
        )
    )


def _analysis_commands(sub: Any) -> None:  # noqa: ANN401
    p = sub.add_parser("run", help="run an analysis recipe (QC to markers) and record the run")
    p.add_argument("store")
    p.add_argument("--recipe", default="rna_standard")
    p.add_argument("--assay", default="RNA")
    p.add_argument("--label", default=None, help="claim this run label (unique per store)")
    p.add_argument("--plots", default=None, metavar="DIR", help="write the standard figures here")
    p.add_argument(
        "--set",
        type=_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a stage option, e.g. --set n_top=3000 --set resolution=0.8 (JSON values)",
    )
    _engine_arguments(p)
    _workspace_argument(p)
    p.set_defaults(run=_run)
    p = sub.add_parser(
        "runs",
        help="list the pipeline runs of a store; --abandon releases the label of a stopped run",
    )
    p.add_argument("store")
    p.add_argument(
        "--abandon",
        metavar="RUN_ID",
        default=None,
        help="mark this incomplete run interrupted (only once its process is known to have stopped)",
    )
    p.add_argument("--label", default=None, help="with --abandon: the label the run holds")
    p.add_argument(
        "--reason", default=None, help="with --abandon: why the process is known to have stopped"
    )
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    _cluster_argument(p)
    _workspace_argument(p)
    p.set_defaults(run=_runs)
    p = sub.add_parser("pool", help="pool cells by sample and group into a CytePool cube")
    p.add_argument("store")
    p.add_argument("--sample", required=True, help="cell column naming each cell's sample")
    p.add_argument("--group", required=True, help="cell column naming each cell's group")
    p.add_argument("-o", "--output", required=True, help="the cube to write (NAME.cube.zarr)")
    p.add_argument("--assay", default="RNA")
    p.add_argument("--cell-selection", default=None, help="a cell_selection ref or boolean column")
    p.add_argument("--compression", choices=["gzip", "zstd", "none"], default="gzip")
    p.add_argument("--overwrite", action="store_true")
    _engine_arguments(p)
    _workspace_argument(p)
    p.set_defaults(run=_pool)
    p = sub.add_parser(
        "demo",
        help="the main job on the embedded dataset: import, analyse, pool, limma-voom, figures",
    )
    p.add_argument(
        "-o", "--output", required=True, help="folder for the store, cube, tables, figures"
    )
    p.add_argument("--cells", type=int, default=6000)
    p.add_argument("--genes", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    _engine_arguments(p)
    p.set_defaults(run=_demo)
    p = sub.add_parser(
        "cluster",
        help="start a local Dask cluster of a memory budget for other processes to join "
        "(prints its address and dashboard; runs until Ctrl-C or SIGTERM)",
    )
    _budget_arguments(p)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on (0.0.0.0 to let other machines join; default 127.0.0.1)",
    )
    p.add_argument("--port", type=int, default=0, help="scheduler port (default: a free one)")
    p.add_argument(
        "--dashboard-port", type=int, default=0, help="dashboard port (default: a free one)"
    )
    p.add_argument(
        "--scheduler-file", default=None, help="also write the scheduler file (JSON) here"
    )
    p.add_argument("--json", action="store_true", help="print the address as one JSON line")
    p.set_defaults(run=_cluster)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cytearc", description="CyteArc: single-cell datasets in Zarr v3 stores."
    )
    parser.add_argument("--version", action="version", version=f"cytearc {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error instead of one line"
    )
    parser.add_argument(
        "--storage-options",
        type=_storage_options,
        default={},
        metavar="JSON",
        help="fsspec options of the URLs the command reads and writes, by protocol: "
        '\'{"s3": {"endpoint_url": "http://...", "key": "...", "secret": "..."}}\' '
        "(as fsspec's FSSPEC_S3 environment variable sets them)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _store_commands(sub)
    _tool_commands(sub)
    _analysis_commands(sub)
    return parser


def report_errors(call: Callable[[], int], *, debug: bool) -> int:
    """Run a command; an error becomes one line on stderr and exit code 1 (130 on Ctrl-C).

    Parameters
    ----------
    call
        The command, returning its exit code.
    debug
        Let errors raise, with their traceback.

    Returns
    -------
    int
        The exit code.
    """
    try:
        return call()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        if isinstance(exc, ValueError | OSError | KeyError):
            print(f"error: {type(exc).__name__}: {text}", file=sys.stderr)
        else:
            print(
                f"internal error: {type(exc).__name__}: {text} - this is a bug of cytearc; "
                "rerun with --debug and report the traceback",
                file=sys.stderr,
            )
        return 1


def _storage_options(text: str) -> dict[str, dict[str, Any]]:
    """``--storage-options``: a JSON object of fsspec options by protocol."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"expected a JSON object, found {text!r} ({exc})"
        raise argparse.ArgumentTypeError(msg) from exc
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        msg = 'expected a JSON object of options by protocol, such as {"s3": {"anon": true}}'
        raise argparse.ArgumentTypeError(msg)
    return value


@contextlib.contextmanager
def storage_configuration(options: Mapping[str, Mapping[str, Any]]) -> Iterator[None]:
    """Give every fsspec filesystem this process makes ``options`` of its protocol, until the block ends.

    fsspec applies its configuration (``fsspec.config.conf``, which the
    ``FSSPEC_<PROTOCOL>`` environment variables fill) to every filesystem it
    creates, so the command line passes storage options this way to every
    reader and writer. Filesystems pickled to workers carry them.

    Parameters
    ----------
    options
        Options by protocol (``{"s3": {"endpoint_url": ...}}``).

    Yields
    ------
    None
    """
    saved = {name: dict(fsspec.config.conf.get(name, {})) for name in options}
    missing = [name for name in options if name not in fsspec.config.conf]
    for name, values in options.items():
        fsspec.config.conf[name] = {**saved[name], **values}
    try:
        yield
    finally:
        for name in options:
            if name in missing:
                fsspec.config.conf.pop(name, None)
            else:
                fsspec.config.conf[name] = saved[name]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = _parser().parse_args(argv)
    with storage_configuration(args.storage_options):
        return report_errors(lambda: int(args.run(args)), debug=args.debug)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
