r"""CyteArc's run of the anchor harness (``../shared/anchors``): the standard recipe, side by side with Scarf and scanpy.

The harness runs this script as it runs ``bench_scarf.py`` and
``bench_scanpy.py`` (same command line, one JSON line on stdout, the step
names of its README), so the three tools are measured in one invocation on
the same data::

    export ANCHORS_RESULTS=$PWD/benchmarks/anchors
    bash ../shared/anchors/setup.sh
    ANCHORS_TOOLS="scarf scanpy cytearc" \
    ANCHORS_SCRIPT_cytearc=$PWD/benchmarks/bench_cytearc.py \
    ANCHORS_PY_cytearc=$PWD/.venv/bin/python \
        ../shared/anchors/run_all.sh small medium

Steps, each with its wall seconds, CPU seconds and peak RSS of **all the
processes** (this client and the local cluster's workers together, as
``run.summary()`` samples them with :class:`cytearc.pipeline.rss.RssSampler`):

``import``
    ``import cytearc``.
``load``
    ``import_data(<data>/mtx or data.h5ad, store, mem_budget, workers)``: the
    local cluster starts, the counts are written in both orientations.
``qc`` ... ``markers``
    ``ds.pipeline.run("rna_standard", n_top, n_comps, k, resolution, max_value)``; the
    stages ``input_snapshot`` + ``qc`` are the harness's ``qc``, ``hvgs`` is
    ``hvg``, ``neighbors`` is ``knn``, the others keep their names. Seconds
    and peaks are the run's own (``run.summary()``); CPU seconds are the
    process tree's, sampled every 0.1 s and cut at the stages' start and end.

``peak_rss_mb`` is the largest all-process peak of any step, and
``client_peak_rss_mb`` the harness's own measure of this process alone.
``--mem-budget`` (default ``4G``) is the local cluster's memory and
``--threads`` the number of tasks it runs at once (see below).

With ``CYTEARC_CLUSTER=threads`` in the environment the engine is Dask's
threaded scheduler in this process (``--threads`` threads, plans sized by
``--mem-budget``) and the tool is named ``cytearc_threads``, so both engines
can be measured in one invocation; ``benchmarks/cytearc-threads-python`` is
an interpreter that sets it::

    ANCHORS_TOOLS="scarf scanpy cytearc cytearc_threads" \
    ANCHORS_SCRIPT_cytearc_threads=$PWD/benchmarks/bench_cytearc.py \
    ANCHORS_PY_cytearc_threads=$PWD/benchmarks/cytearc-threads-python ...

The local cluster runs ``--threads`` tasks at once as the engine does by
default (:func:`cytearc.engine.budget.default_topology`: one worker process
of two threads for 2). With ``CYTEARC_WORKERS`` (``2``, ``PxT``) it has
those workers instead and the tool is named ``cytearc_<workers>``;
``benchmarks/cytearc-2x1-python`` runs two worker processes of one thread,
the default before 2026-12-07 (tool ``cytearc_2x1``, script and interpreter
given as above).
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Final

ANCHORS: Final = Path(
    os.environ.get("ANCHORS_DIR", Path(__file__).resolve().parents[2] / "shared" / "anchors")
)
sys.path.insert(0, str(ANCHORS))
import benchlib  # noqa: E402

STEPS: Final = {
    "load": "load",
    "input_snapshot": "qc",
    "qc": "qc",
    "normalize": "normalize",
    "hvgs": "hvg",
    "pca": "pca",
    "neighbors": "knn",
    "leiden": "leiden",
    "umap": "umap",
    "markers": "markers",
}
"""Recipe stage (and ``load``) -> the harness's step name."""


class CpuClock:
    """Cumulative CPU seconds of this process and its descendants, sampled in a thread."""

    def __init__(self, interval: float = 0.1) -> None:
        import psutil  # noqa: PLC0415 (a dependency of distributed)

        self._root = psutil.Process()
        self._psutil = psutil
        self._interval = interval
        self._dead = 0.0
        self._seen: dict[int, float] = {}
        self.times: list[int] = []
        self.cpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        now: dict[int, float] = {}
        for process in [self._root, *self._root.children(recursive=True)]:
            try:
                t = process.cpu_times()
                now[process.pid] = t.user + t.system
            except self._psutil.Error:
                continue
        self._dead += sum(v for pid, v in self._seen.items() if pid not in now)
        self._seen = now
        self.times.append(time.time_ns())
        self.cpu.append(self._dead + sum(now.values()))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> CpuClock:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def at(self, t_ns: int) -> float:
        """CPU seconds used up to ``t_ns`` (the nearest sample at or after it)."""
        i = min(bisect.bisect_left(self.times, t_ns), len(self.times) - 1)
        return self.cpu[i]


def _record(
    bench: benchlib.Bench, stage: str, *, wall: float, cpu: float, peak: int | None
) -> None:
    """Add a recipe stage (or ``load``) to the harness step it belongs to (:data:`STEPS`)."""
    rec = bench.result["steps"].setdefault(STEPS[stage], {"wall_s": 0.0, "cpu_s": 0.0})
    rec["wall_s"] = round(rec["wall_s"] + wall, 3)
    rec["cpu_s"] = round(rec["cpu_s"] + cpu, 3)
    mb = float("nan") if peak is None else round(peak / 2**20, 1)
    if peak is not None:
        rec["step_peak_rss_mb"] = max(rec.get("step_peak_rss_mb", 0.0), mb)
    print(
        f"[cytearc] {STEPS[stage]:<10s} {wall:9.2f} s  cpu {cpu:9.2f} s  all-process peak "
        f"{mb:8.1f} MB  ({stage})",
        file=sys.stderr,
        flush=True,
    )


def _load(bench: benchlib.Bench, args: argparse.Namespace, store: Path) -> Any:  # noqa: ANN401
    from cytearc import DataStore, import_data  # noqa: PLC0415
    from cytearc.engine import get_engine  # noqa: PLC0415
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415

    source = Path(args.data) / ("mtx" if args.input == "mtx" else "data.h5ad")
    options = {"mem_budget": args.mem_budget, "workers": _workers(args)}
    start = time.perf_counter()
    with CpuClock() as clock:
        engine = get_engine(**options)  # the import and the store use this local cluster
        with RssSampler(engine.client, interval=0.25) as rss:
            import_data(source, store, show_progress=False, **options)
            ds = DataStore(store, zarr_mode="r+", show_progress=False, **options)
    _record(
        bench,
        "load",
        wall=time.perf_counter() - start,
        cpu=clock.cpu[-1] - clock.cpu[0],
        peak=rss.metrics()["peakBytes"]["total"],
    )
    return ds


def _workers(args: argparse.Namespace) -> str:
    """``--threads`` tasks at once as the engine runs them by default, unless ``CYTEARC_WORKERS`` gives the workers."""
    from cytearc.engine.budget import default_topology  # noqa: PLC0415

    processes, threads = default_topology(args.threads)
    return os.environ.get("CYTEARC_WORKERS") or f"{processes}x{threads}"


def _tool(args: argparse.Namespace) -> str:
    """``cytearc``; ``cytearc_threads`` on the threaded engine, ``cytearc_<workers>`` on the workers ``CYTEARC_WORKERS`` gives."""
    if os.environ.get("CYTEARC_CLUSTER") == "threads":
        return "cytearc_threads"
    given = os.environ.get("CYTEARC_WORKERS")
    return f"cytearc_{given.strip().lower()}" if given else "cytearc"


def main() -> None:  # noqa: PLR0915 (a linear script)
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="dataset dir made by gen_dataset.py")
    ap.add_argument("--input", choices=["mtx", "h5ad"], default="mtx")
    ap.add_argument("--threads", type=int, default=2, help="tasks the local cluster runs at once")
    ap.add_argument("--workdir", default=None, help="where the store goes (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the store")
    ap.add_argument("--mem-budget", default="4G")
    ap.add_argument("--n-hvg", type=int, default=2000)
    ap.add_argument("--n-pcs", type=int, default=50)
    ap.add_argument("--k", type=int, default=15)
    ap.add_argument("--resolution", type=float, default=1.0)
    ap.add_argument(
        "--max-value",
        default="10",
        help="the recipe's max_value: PCA clips scaled values at it ('none': no clipping)",
    )
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    benchlib.set_thread_env(1)  # one BLAS thread per task; the engine runs --threads tasks

    params = {k: v for k, v in vars(a).items() if k not in ("data", "label", "workdir", "keep")}
    params["cluster"] = os.environ.get("CYTEARC_CLUSTER") or "local"
    params["workers"] = _workers(a)
    b = benchlib.Bench(
        _tool(a),
        dataset=Path(a.data).resolve().name,
        dataset_meta=benchlib.dataset_meta(a.data),
        label=a.label,
        params=params,
    )
    tmp = Path(tempfile.mkdtemp(prefix="cytearc_bench_", dir=a.workdir))
    store = tmp / "data.zarr"
    try:
        with b.step("import"):
            import cytearc  # noqa: PLC0415, F401
        import importlib.metadata as im  # noqa: PLC0415

        b.result["versions"] = {
            p: im.version(p)
            for p in (
                "cytearc",
                "zarr",
                "dask",
                "distributed",
                "numpy",
                "leidenalg",
                "umap-learn",
                "pynndescent",
            )
        }
        ds = _load(b, a, store)
        with CpuClock() as clock:
            run = ds.pipeline.run(
                "rna_standard",
                n_top=a.n_hvg,
                n_comps=a.n_pcs,
                k=a.k,
                resolution=a.resolution,
                max_value=None if a.max_value.lower() == "none" else float(a.max_value),
            )
        peaks = {row.stage: row.peak_rss_bytes for row in run.summary().itertuples()}
        for stage in run.stages:
            cpu = clock.at(stage.finished_at_ns) - clock.at(stage.started_at_ns)
            peak = peaks.get(stage.stage)
            _record(
                b,
                stage.stage,
                wall=(stage.finished_at_ns - stage.started_at_ns) / 1e9,
                cpu=cpu,
                peak=None if peak is None or math.isnan(peak) else int(peak),
            )
        cells = ds.cells.fetch_all("ids")
        mask = run.artifact("cells").read("mask").astype(bool)
        labels = run.artifact("clustering").read("labels")
        names = cells[mask]
        b.result["n_cells_in"] = len(cells)
        b.result["n_cells_qc"] = int(mask.sum())
        b.result["n_genes_in"] = int(ds.RNA.shape[1])
        extra: dict[str, Any] = {
            "n_clusters": len(set(labels.tolist())),
            "store_mb": benchlib.dir_size_mb(store),
            "mem_budget": a.mem_budget,
        }
        truth = benchlib.read_truth(a.data)
        if truth:
            from sklearn.metrics import adjusted_rand_score  # noqa: PLC0415

            t = [truth.get(x, "NA") for x in names]
            extra["ari_vs_truth"] = round(float(adjusted_rand_score(t, labels)), 4)
        b.finish("ok", client_peak_rss_mb=round(benchlib.ru_maxrss_mb(), 1), **extra)
    except Exception as e:  # still emit a JSON line for the table
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        b.finish("error", error=f"{type(e).__name__}: {e}"[:500])
        sys.exit(1)
    finally:
        if a.keep:
            print(f"[cytearc] kept store at {store}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
