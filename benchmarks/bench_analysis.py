"""Benchmark CyteArc's ``rna_standard`` pipeline against the same analysis in scanpy, on the same data.

Run from the project root::

    .venv/bin/python benchmarks/bench_analysis.py
    .venv/bin/python benchmarks/bench_analysis.py --sizes "5000 x 3000"      # a quick check
    .venv/bin/python benchmarks/bench_analysis.py --sizes "20k x 15k" --data /path/to/cache \
        --tmpdir /path/on/target/disk --mem-budget 4G --workers 2 --leiden-flavor leidenalg

For each size (cells x genes; by default "20k x 15k" and "100k x 20k") the
seeded dataset of :mod:`synthetic` is generated once into ``--data`` (default
``$TMPDIR/cytearc-bench-data``) and reused while its ``COMPLETE`` marker and
parameters match. Then, each in a subprocess of its own, one after the other:

``import``
    ``cytearc.import_data(data.h5ad, store, mem_budget, workers)``
    into a scratch store. Timed and reported, but not part of the goal.
``CyteArc``
    ``DataStore(store, zarr_mode="r+", mem_budget, workers, show_progress=False)``,
    the engine started (``ds.engine``; the "load" step), then
    ``ds.pipeline.run("rna_standard", n_top=2000, n_comps=50, k=15,
    resolution=1.0)``; stage seconds come from ``run.summary()``.
``scanpy``
    In memory: ``read_h5ad`` (the "load" step), ``normalize_total(target_sum=1e4)``,
    ``log1p``, ``highly_variable_genes(n_top_genes=2000, flavor="seurat")``,
    ``adata.raw = adata`` and the subset to the HVGs, ``scale``,
    ``pca(n_comps=50)``, ``neighbors(n_neighbors=15)``, ``leiden(resolution=1.0)``
    (``--leiden-flavor``: ``leidenalg``, undirected and to convergence, the
    implementation CyteArc calls, or ``igraph`` with ``n_iterations=2``),
    ``umap`` and ``rank_genes_groups(groupby="leiden", method="wilcoxon")``
    (on ``raw``: all genes, log-normalized, as CyteArc's markers).

Seconds are wall time of each step inside its subprocess, after the imports;
numba compiles pynndescent and UMAP in both runs (a fresh process each).
Peak RSS is sampled from this process as ``run.summary()`` samples it
(:class:`cytearc.pipeline.rss.RssSampler`, every 0.25 s): the subprocess
plus all its descendants (for CyteArc the client, which hosts the scheduler,
and the Dask workers), as absolute values that include the interpreter and
the imported libraries (the RSS just before the first step is shown). A
step's peak is the largest sample within its window ("-" for a step shorter
than the interval); CyteArc's own per-stage peaks (``run.summary()``, client
and workers apart) are printed below the table. MB are 10**6 bytes. scanpy 1.11
fails in ``neighbors`` above 8,192 cells with scipy 1.17 (``csr_array`` has
no ``getnnz``); the scanpy subprocess hands it a ``csr_matrix`` there (see
:func:`_patch_scanpy_neighbors`).

Clusterings are compared with scikit-learn's ``adjusted_rand_score``:
CyteArc's Leiden labels against scanpy's on the cells both kept (CyteArc's
QC ``auto_filter`` may drop cells, its selection is the run's ``cells``
output), and each against the planted ``cell_type``. The goal of the issue,
checked at 100k x 20k: end to end no slower than scanpy, at most a third of
its peak memory under ``mem_budget="4G"``, and an ARI with scanpy of at
least 0.8. Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from cytearc.pipeline.rss import RssSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report
import synthetic
from bench_import import parse_size, size_label, subprocess_baseline

MB: Final = 1_000_000
DEFAULT_SIZES: Final = ("20k x 15k", "100k x 20k")
GOAL_SIZE: Final = "100k x 20k"
GOAL_SPEED: Final = 1.0
"""CyteArc end-to-end seconds / scanpy end-to-end seconds, at most."""
GOAL_MEMORY: Final = 1 / 3
"""CyteArc peak RSS of all processes / scanpy's, at most."""
GOAL_ARI: Final = 0.8
"""Adjusted Rand index of the two clusterings, at least."""
RECIPE_OPTIONS: Final = {"n_top": 2000, "n_comps": 50, "k": 15, "resolution": 1.0}

LOAD: Final = "load"
STEPS: Final = (
    # (row, CyteArc stages, scanpy steps)
    ("load (open + engine / read_h5ad)", (LOAD,), (LOAD,)),
    ("input snapshot", ("input_snapshot",), ()),
    ("qc (metrics, auto_filter)", ("qc",), ()),
    ("normalize + log1p", ("normalize",), ("normalize_total", "log1p")),
    ("highly variable genes", ("hvgs",), ("highly_variable_genes",)),
    ("pca (+ subset, scale)", ("pca",), ("raw + subset to HVGs", "scale", "pca")),
    ("neighbors", ("neighbors",), ("neighbors",)),
    ("leiden", ("leiden",), ("leiden",)),
    ("umap", ("umap",), ("umap",)),
    ("markers (wilcoxon)", ("markers",), ("rank_genes_groups",)),
)


# -- data -----------------------------------------------------------------------


def ensure_dataset(cells: int, genes: int, *, data: Path, seed: int) -> tuple[Path, float | None]:
    """The cached dataset folder of this size and seed, and the seconds to generate it (None: reused).

    A missing or stale dataset is generated into a sibling folder and renamed
    into place, so a concurrent reader never sees a half-written one.
    """
    params = synthetic.Params(n_cells=cells, n_genes=genes, seed=seed)
    folder = data / f"cells{cells}_genes{genes}_seed{seed}"
    if synthetic.is_complete(folder, params):
        return folder, None
    print(f"generating {size_label(cells, genes)} into {folder} ...", file=sys.stderr)
    data.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=data))
    start = time.perf_counter()
    synthetic.write_dataset(params, staging)
    seconds = time.perf_counter() - start
    if folder.exists():
        stale = folder.with_name(f".{folder.name}-stale-{os.getpid()}")
        with contextlib.suppress(OSError):
            folder.rename(stale)
            shutil.rmtree(stale, ignore_errors=True)
    try:
        staging.rename(folder)
    except OSError:  # someone else put a dataset there meanwhile
        shutil.rmtree(staging, ignore_errors=True)
        if not synthetic.is_complete(folder, params):
            raise
    return folder, seconds


# -- the subprocesses -----------------------------------------------------------


def _write_record(out: Path, record: dict[str, Any]) -> None:
    (out / "record.json").write_text(json.dumps(record, indent=1), encoding="utf-8")


def child_import(source: Path, out: Path, args: argparse.Namespace) -> int:
    """Import ``source`` into ``out/data.zarr``; write the seconds to ``out/record.json``."""
    from cytearc import import_data  # noqa: PLC0415

    gc.collect()
    start = time.perf_counter()
    result = import_data(
        source,
        out / "data.zarr",
        mem_budget=args.mem_budget,
        workers=args.workers,
        show_progress=False,
    )
    stop = time.perf_counter()
    _write_record(
        out,
        {
            "seconds": stop - start,
            "start": start,
            "stop": stop,
            "dtypes": result.dtypes,
            "store_bytes": report.disk_bytes(out / "data.zarr"),
        },
    )
    return 0


def child_cytearc(store: Path, out: Path, args: argparse.Namespace) -> int:
    """Open ``store``, start the engine and run ``rna_standard``; write stages and labels to ``out``."""
    import cytearc  # noqa: PLC0415

    gc.collect()
    start = time.perf_counter()
    ds = cytearc.DataStore(
        store,
        zarr_mode="r+",
        mem_budget=args.mem_budget,
        workers=args.workers,
        show_progress=False,
    )
    engine = ds.engine
    loaded = time.perf_counter()
    run = ds.pipeline.run("rna_standard", **RECIPE_OPTIONS)
    stop = time.perf_counter()
    # stage records carry wall-clock nanoseconds; map them onto perf_counter (CLOCK_MONOTONIC)
    offset = time.perf_counter() - time.time()
    summary = run.summary()
    stages = [{"stage": LOAD, "seconds": loaded - start, "start": start, "stop": loaded}]
    for record, row in zip(run.stages, summary.itertuples(), strict=True):
        rss: Any = record.metrics.get("rss", {})
        stages.append(
            {
                "stage": str(row.stage),
                "seconds": float(row.seconds),
                "start": record.started_at_ns / 1e9 + offset,
                "stop": (record.finished_at_ns or 0) / 1e9 + offset,
                "peak_rss_bytes": int(row.peak_rss_bytes),
                "peak_client": int(rss.get("peakBytes", {}).get("client", 0)),
                "peak_workers": int(rss.get("peakBytes", {}).get("workers", 0)),
                "created": int(row.created),
                "reused": int(row.reused),
            }
        )
    mask = run.artifact("cells").read("mask").astype(bool)
    labels = np.full(mask.shape, -1, dtype=np.int64)
    labels[mask] = run.artifact("clustering").read("labels")
    np.save(out / "labels.npy", labels)
    np.save(out / "ids.npy", np.array(ds.cells.fetch_all("ids").tolist(), dtype=str))
    _write_record(
        out,
        {
            "stages": stages,
            "start": start,
            "stop": stop,
            "kept": int(mask.sum()),
            "clusters": int(np.unique(labels[mask]).size),
            "engine": repr(engine.budget),
            "run_id": run.run_id,
        },
    )
    return 0


def _patch_scanpy_neighbors() -> None:
    """Let scanpy 1.11 read the kNN distances of pynndescent under scipy >= 1.17.

    Above 8,192 cells ``sc.pp.neighbors`` gets a ``csr_array`` from its
    transformer and calls ``getnnz(axis=1)``, which sparse arrays no longer
    have (scanpy supports sparse matrices only, scverse/scanpy#2773); the
    distances are handed over as a ``csr_matrix`` instead (a cheap copy of
    cells x 15 values).
    """
    import scipy.sparse as sp  # noqa: PLC0415
    from scanpy import neighbors  # type: ignore[import-untyped]  # noqa: PLC0415

    original = neighbors._get_indices_distances_from_sparse_matrix

    def from_matrix(d: Any, /, n_neighbors: int) -> Any:  # noqa: ANN401 (scanpy's types)
        return original(sp.csr_matrix(d), n_neighbors)

    neighbors._get_indices_distances_from_sparse_matrix = from_matrix


def child_scanpy(source: Path, out: Path, args: argparse.Namespace) -> int:
    """Run the scanpy analysis of ``source`` in memory; write the steps and labels to ``out``."""
    import scanpy as sc  # type: ignore[import-untyped]  # noqa: PLC0415

    _patch_scanpy_neighbors()
    steps: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def step(name: str) -> Iterator[None]:
        begin = time.perf_counter()
        yield
        end = time.perf_counter()
        steps.append({"stage": name, "seconds": end - begin, "start": begin, "stop": end})

    gc.collect()
    start = time.perf_counter()
    with step(LOAD):
        adata = sc.read_h5ad(source)
    with step("normalize_total"):
        sc.pp.normalize_total(adata, target_sum=1e4)
    with step("log1p"):
        sc.pp.log1p(adata)
    with step("highly_variable_genes"):
        sc.pp.highly_variable_genes(adata, n_top_genes=2000, flavor="seurat")
    with step("raw + subset to HVGs"):
        adata.raw = adata
        adata = adata[:, adata.var["highly_variable"]].copy()
    with step("scale"):
        sc.pp.scale(adata)
    with step("pca"):
        sc.tl.pca(adata, n_comps=50)
    with step("neighbors"):
        sc.pp.neighbors(adata, n_neighbors=15)
    with step("leiden"):
        if args.leiden_flavor == "igraph":
            sc.tl.leiden(adata, resolution=1.0, flavor="igraph", n_iterations=2, directed=False)
        else:
            sc.tl.leiden(adata, resolution=1.0, flavor="leidenalg", n_iterations=-1, directed=False)
    with step("umap"):
        sc.tl.umap(adata)
    with step("rank_genes_groups"):
        sc.tl.rank_genes_groups(adata, groupby="leiden", method="wilcoxon")
    stop = time.perf_counter()
    labels = adata.obs["leiden"].cat.codes.to_numpy().astype(np.int64)
    np.save(out / "labels.npy", labels)
    np.save(out / "truth.npy", adata.obs["cell_type"].cat.codes.to_numpy().astype(np.int64))
    np.save(out / "ids.npy", np.array(adata.obs_names.tolist(), dtype=str))
    _write_record(
        out,
        {
            "stages": steps,
            "start": start,
            "stop": stop,
            "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "clusters": int(np.unique(labels).size),
            "svd_solver": str(adata.uns["pca"]["params"].get("svd_solver", "default")),
        },
    )
    return 0


CHILDREN: Final = {"import": child_import, "cytearc": child_cytearc, "scanpy": child_scanpy}


@dataclass(kw_only=True)
class ChildRun:
    """What a subprocess recorded, and the RSS of its process tree sampled from here."""

    record: dict[str, Any]
    rss: RssSampler
    wall: float

    @property
    def peak(self) -> int:
        """Peak RSS of the subprocess and its descendants."""
        return int(self.rss.metrics()["peakBytes"]["total"])

    @property
    def rss_before(self) -> int:
        """RSS of the subprocess just before its first step."""
        return subprocess_baseline(self.rss, float(self.record["start"]))

    def stage(self, name: str) -> dict[str, Any] | None:
        """The record of stage ``name``."""
        return next((s for s in self.record["stages"] if s["stage"] == name), None)

    def peak_in(self, names: Sequence[str]) -> int | None:
        """The largest total RSS sampled within the windows of the stages ``names`` (None if none)."""
        found = [s for s in (self.stage(n) for n in names) if s is not None]
        peaks = [report.peak_bytes(self.rss, start=s["start"], stop=s["stop"]) for s in found]
        return max((p["total"] for p in peaks if p is not None), default=None)


def run_child(kind: str, source: Path, out: Path, args: argparse.Namespace) -> ChildRun:
    """Run :data:`CHILDREN` ``[kind]`` in a subprocess, sampling its process tree from here."""
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415 (the children do not load CyteArc)

    out.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        kind,
        str(source),
        str(out),
        "--mem-budget",
        str(args.mem_budget),
        "--workers",
        str(args.workers),
        "--leiden-flavor",
        args.leiden_flavor,
    ]
    wall = time.perf_counter()
    proc = subprocess.Popen(command)
    with RssSampler(None, pid=proc.pid) as rss:
        proc.wait()
    wall = time.perf_counter() - wall
    if proc.returncode:
        msg = f"{kind} failed with exit code {proc.returncode}"
        raise RuntimeError(msg)
    record = json.loads((out / "record.json").read_text(encoding="utf-8"))
    return ChildRun(record=record, rss=rss, wall=wall)


# -- comparison -----------------------------------------------------------------


@dataclass(kw_only=True)
class Comparison:
    """The measured runs of one size and what they agree on."""

    label: str
    imported: ChildRun
    cytearc: ChildRun
    scanpy: ChildRun
    ari_between: float
    ari_cytearc_truth: float
    ari_scanpy_truth: float
    ari_scanpy_truth_kept: float
    same_cells: bool
    n_cells: int
    kept: int

    @property
    def seconds(self) -> tuple[float, float]:
        """End-to-end seconds (first step start to last step end) of CyteArc and scanpy."""
        return tuple(r.record["stop"] - r.record["start"] for r in (self.cytearc, self.scanpy))  # type: ignore[return-value]


def compare(
    label: str, imported: ChildRun, cyte: ChildRun, scan: ChildRun, out: Path
) -> Comparison:
    """ARIs between the two clusterings and against the planted cell types."""
    from sklearn.metrics import adjusted_rand_score  # noqa: PLC0415

    cyte_labels = np.load(out / "cytearc" / "labels.npy")
    scan_labels = np.load(out / "scanpy" / "labels.npy")
    truth = np.load(out / "scanpy" / "truth.npy")
    same = bool(
        np.array_equal(np.load(out / "cytearc" / "ids.npy"), np.load(out / "scanpy" / "ids.npy"))
    )
    kept = cyte_labels >= 0
    return Comparison(
        label=label,
        imported=imported,
        cytearc=cyte,
        scanpy=scan,
        ari_between=float(adjusted_rand_score(scan_labels[kept], cyte_labels[kept])),
        ari_cytearc_truth=float(adjusted_rand_score(truth[kept], cyte_labels[kept])),
        ari_scanpy_truth=float(adjusted_rand_score(truth, scan_labels)),
        ari_scanpy_truth_kept=float(adjusted_rand_score(truth[kept], scan_labels[kept])),
        same_cells=same,
        n_cells=len(cyte_labels),
        kept=int(kept.sum()),
    )


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value / MB:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def table(c: Comparison) -> str:
    """Steps with seconds and peak RSS of both, their ratios, and the totals."""
    header = (
        "step",
        "CyteArc s",
        "scanpy s",
        "ratio",
        "CyteArc peak MB",
        "scanpy peak MB",
        "ratio",
    )
    rows = []
    for name, cyte_stages, scan_stages in STEPS:
        cyte_s = [s["seconds"] for s in map(c.cytearc.stage, cyte_stages) if s is not None]
        scan_s = [s["seconds"] for s in map(c.scanpy.stage, scan_stages) if s is not None]
        a = sum(cyte_s) if cyte_s else None
        b = sum(scan_s) if scan_s else None
        ma, mb = c.cytearc.peak_in(cyte_stages), c.scanpy.peak_in(scan_stages)
        rows.append(
            (
                name,
                "-" if a is None else f"{a:.2f}",
                "-" if b is None else f"{b:.2f}",
                _ratio(a, b),
                _mb(ma),
                _mb(mb),
                _ratio(ma, mb),
            )
        )
    load_a = c.cytearc.stage(LOAD)["seconds"]  # type: ignore[index]
    load_b = c.scanpy.stage(LOAD)["seconds"]  # type: ignore[index]
    ta, tb = c.seconds
    analysis = (ta - load_a, tb - load_b)
    rows.append(
        ("analysis (without load)", *(f"{x:.2f}" for x in analysis), _ratio(*analysis), "", "", "")
    )
    rows.append(
        (
            "end to end",
            f"{ta:.2f}",
            f"{tb:.2f}",
            _ratio(ta, tb),
            _mb(c.cytearc.peak),
            _mb(c.scanpy.peak),
            _ratio(c.cytearc.peak, c.scanpy.peak),
        )
    )
    widths = [max(len(x[i]) for x in (header, *rows)) for i in range(len(header))]

    def fmt(cells: Sequence[str]) -> str:
        rest = (v.rjust(w) for v, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join((cells[0].ljust(widths[0]), *rest))

    rule = "  ".join("-" * w for w in widths)
    body = [fmt(r) for r in rows]
    return "\n".join([fmt(header), rule, *body[:-2], rule, *body[-2:]])


def details(c: Comparison, budget: int) -> list[str]:
    """Lines on the import, CyteArc's own stage metrics, scanpy's steps and the agreement."""
    imp, cyte, scan = c.imported, c.cytearc, c.scanpy
    lines = [
        (
            f"  import_data(h5ad): {imp.record['seconds']:.1f} s (not in the goal), peak RSS all "
            f"{_mb(imp.peak)} MB; store {_mb(imp.record['store_bytes'])} MB, dtypes {imp.record['dtypes']}"
        ),
        (
            f"  CyteArc: RSS {_mb(cyte.rss_before)} MB before the load (interpreter, imports); "
            f"peak all {_mb(cyte.peak)} MB; budget {budget / MB:,.0f} MB; "
            f"subprocess wall {cyte.wall:.1f} s"
        ),
        "  CyteArc run.summary() (its own sampler, client and workers apart):",
    ]
    for s in cyte.record["stages"]:
        if s["stage"] == LOAD:
            continue
        lines.append(
            f"    {s['stage']:<15} {s['seconds']:8.2f} s  peak {_mb(s['peak_rss_bytes']):>6} MB "
            f"(client {_mb(s['peak_client']):>6}, workers {_mb(s['peak_workers']):>6}); "
            f"created {s['created']}, reused {s['reused']}"
        )
    lines.append(
        f"  scanpy: RSS {_mb(scan.rss_before)} MB before the load; peak "
        f"{_mb(scan.peak)} MB (ru_maxrss {_mb(scan.record['maxrss'])} MB); pca svd_solver "
        f"{scan.record['svd_solver']}; subprocess wall {scan.wall:.1f} s; steps:"
    )
    for s in scan.record["stages"]:
        peak = scan.peak_in([s["stage"]])
        lines.append(f"    {s['stage']:<22} {s['seconds']:8.2f} s  peak {_mb(peak):>6} MB")
    lines += [
        (
            f"  cells: {c.n_cells:,}; CyteArc kept {c.kept:,} after QC; same cell order in both: "
            f"{'yes' if c.same_cells else 'NO'}; clusters: CyteArc {cyte.record['clusters']}, "
            f"scanpy {scan.record['clusters']}"
        ),
        (
            f"  ARI CyteArc vs scanpy (kept cells): {c.ari_between:.3f}; vs cell_type: CyteArc "
            f"{c.ari_cytearc_truth:.3f}, scanpy {c.ari_scanpy_truth:.3f} "
            f"(on the kept cells {c.ari_scanpy_truth_kept:.3f})"
        ),
    ]
    return lines


def goals(c: Comparison | None, budget: int) -> str:
    """Whether each goal of the issue is met at :data:`GOAL_SIZE`."""
    if c is None:
        return f"goals: not checked ({GOAL_SIZE} not run)"
    ta, tb = c.seconds
    speed = ta / tb
    memory = c.cytearc.peak / c.scanpy.peak

    def met(ok: bool) -> str:  # noqa: FBT001
        return "met" if ok else "NOT met"

    return (
        f"goals at {GOAL_SIZE}: end to end no slower than scanpy {met(speed <= GOAL_SPEED)} "
        f"({speed:.2f}x scanpy's seconds); peak memory at most a third of scanpy's "
        f"{met(memory <= GOAL_MEMORY)} ({memory:.2f}x: {_mb(c.cytearc.peak)} vs "
        f"{_mb(c.scanpy.peak)} MB; within the budget of {budget / MB:,.0f} MB: "
        f"{'yes' if c.cytearc.peak <= budget else 'no'}); ARI with scanpy >= {GOAL_ARI} "
        f"{met(c.ari_between >= GOAL_ARI)} ({c.ari_between:.3f})"
    )


# -- main -----------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=parse_size,
        default=[parse_size(s) for s in DEFAULT_SIZES],
        help="cells x genes, e.g. '20k x 15k' '100k x 20k' (default both)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "cytearc-bench-data",
        help="cache of generated datasets (default: $TMPDIR/cytearc-bench-data)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget", default="4G")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--leiden-flavor", choices=("leidenalg", "igraph"), default="leidenalg")
    parser.add_argument(
        "--tmpdir", type=Path, default=None, help="where the stores are written (default: $TMPDIR)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the scratch stores and outputs (path printed)"
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "SRC", "OUT"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        kind, source, out = args.child
        return CHILDREN[kind](Path(source), Path(out), args)

    from cytearc.engine import parse_mem_budget  # noqa: PLC0415

    budget = parse_mem_budget(args.mem_budget)
    packages = ("zarr", "dask", "distributed", "scipy", "anndata", "scanpy", "scikit-learn")
    packages += ("pynndescent", "umap-learn", "leidenalg", "igraph")
    sampling = f"{report.RSS_SAMPLING}; the subprocess and all its descendants"
    for line in report.machine(packages, notes=[f"peak RSS: {sampling}"]):
        print(line)
    print(
        f"CyteArc: mem_budget {args.mem_budget} ({budget / MB:,.0f} MB) over {args.workers} "
        f"workers; recipe rna_standard {RECIPE_OPTIONS}; scanpy leiden flavor "
        f"{args.leiden_flavor}; data cache {args.data}; stores in "
        f"{args.tmpdir or tempfile.gettempdir()}"
    )
    with contextlib.suppress(OSError):
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    goal: Comparison | None = None
    for cells, genes in args.sizes:
        label = size_label(cells, genes)
        folder, generated = ensure_dataset(cells, genes, data=args.data, seed=args.seed)
        truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
        made = "reused from the cache" if generated is None else f"generated in {generated:.0f} s"
        print(
            f"\ndata {label}: {truth['n_values']:,} non-zero ({truth['nonzero_fraction']:.2%}), "
            f"h5ad {report.disk_bytes(folder / 'data.h5ad') / MB:,.0f} MB; {made}; {folder}"
        )
        scratch = Path(tempfile.mkdtemp(prefix="bench_analysis-", dir=args.tmpdir))
        try:
            h5ad = folder / "data.h5ad"
            imported = run_child("import", h5ad, scratch / "import", args)
            store = scratch / "import" / "data.zarr"
            cyte = run_child("cytearc", store, scratch / "cytearc", args)
            scan = run_child("scanpy", h5ad, scratch / "scanpy", args)
            c = compare(label, imported, cyte, scan, scratch)
        finally:
            if args.keep:
                print(f"kept {scratch}")
            else:
                shutil.rmtree(scratch, ignore_errors=True)
        print(f"\n{label}:")
        print(table(c))
        print("ratio: CyteArc / scanpy; peaks are of all processes (CyteArc client + workers)")
        for line in details(c, budget):
            print(line)
        with contextlib.suppress(OSError):
            print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if label == GOAL_SIZE:
            goal = c
    print()
    print(goals(goal, budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
