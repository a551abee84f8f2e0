"""Benchmark CyteArc's Matrix Market and H5AD importers against scipy and anndata reading the same files.

Run from the project root::

    .venv/bin/python benchmarks/bench_import.py
    .venv/bin/python benchmarks/bench_import.py --sizes "20k x 15k" --data /path/to/cache \
        --tmpdir /path/on/target/disk --mem-budget 4G --workers 2

For each size (cells x genes; by default "20k x 15k" and "100k x 20k") a
seeded dataset from :mod:`synthetic` (negative-binomial counts, ~7 %
non-zero, 8 cell types with planted markers, 6 donors, 2 conditions) is
generated once into ``--data`` (default ``$TMPDIR/cytearc-bench-data``) and
reused while its ``COMPLETE`` marker and parameters match. Then, in one run:

``engine start``
    ``cytearc.engine.get_engine(mem_budget, workers)``: the process's
    LocalCluster, started before anything is timed (once, first size).
``mmread + tocsr (ref)``
    The reference for the MTX import: ``scipy.io.mmread(matrix.mtx).tocsr()``
    in a subprocess of its own, so its memory stays out of the others'.
``import_data(mtx)``
    ``import_data(mtx_folder, dest, mem_budget=..., workers=..., show_progress=False)``.
``read_h5ad (ref)``
    The reference for the H5AD import: ``anndata.read_h5ad(path)`` (in
    memory) in a subprocess.
``import_data(h5ad)``
    The same import from the H5AD.

Seconds are wall time of the call alone (the reference subprocesses time the
read after their imports). Peak RSS is sampled as ``run.summary()`` samples
it (:class:`cytearc.pipeline.rss.RssSampler`, every 0.25 s): for an import,
the engine's Dask workers and the client (this process, which also hosts the
scheduler and reads the source); for a reference, the subprocess, sampled
from here (its own ``ru_maxrss`` is noted). MB are 10**6 bytes; the budget is
parsed as the engine does (``4G`` = 4e9 bytes). The budget limits the
workers; the client's memory comes on top, so both are reported. The workers are restarted (untimed)
before each import so every step starts from fresh processes.

Each import is also broken into phases (the benchmark wraps, without
changing them, the importer's ``ToZarr.__init__`` (its source opened), the importer's ``_scan``, the source's
``read_band`` and ``CountsWriter``): opening the source, the scan pass
(which for Matrix Market includes bucketing the file), the write loop
(reading bands and handing them to the workers), draining the bands in
flight, and ``countsT`` (the transpose), and the workers' task time is
summed by task kind from Dask's task stream. Files are read warm from the
page cache (they were just written or read). Times are reported, never
asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from cytearc.engine.cluster import Engine
    from cytearc.pipeline.rss import RssSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report
import synthetic

MB: Final = 1_000_000
BASELINE_SECONDS: Final = 0.5
"""A subprocess's RSS before its first step: the peak of the samples this long before it."""
DEFAULT_SIZES: Final = ("20k x 15k", "100k x 20k")
GOAL_SIZE: Final = "100k x 20k"
SPEED_GOAL: Final = 1.0
"""Import seconds / read_h5ad seconds at :data:`GOAL_SIZE`."""


# -- data -----------------------------------------------------------------------


def parse_size(text: str) -> tuple[int, int]:
    """``"20k x 15k"`` (or ``20kx15k``, ``20000x15000``, ``1M x 30k``) as (cells, genes)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)\s*[xX*]\s*(\d+)\s*([kKmM]?)\s*", text)
    if match is None:
        msg = f"size {text!r}: expected CELLS x GENES such as '20k x 15k'"
        raise argparse.ArgumentTypeError(msg)
    scale = {"": 1, "k": 1000, "m": 1_000_000}
    cells = int(match[1]) * scale[match[2].lower()]
    genes = int(match[3]) * scale[match[4].lower()]
    return cells, genes


def size_label(cells: int, genes: int) -> str:
    """``20k x 15k`` for (20000, 15000)."""

    def short(n: int) -> str:
        if n % 1_000_000 == 0:
            return f"{n // 1_000_000}M"
        return f"{n // 1000}k" if n % 1000 == 0 else str(n)

    return f"{short(cells)} x {short(genes)}"


@dataclass(frozen=True, kw_only=True)
class Dataset:
    """A generated dataset on disk."""

    label: str
    folder: Path
    params: synthetic.Params
    truth: dict[str, Any]
    generated: float | None
    """Seconds to generate it in this run; None when reused."""

    @property
    def mtx(self) -> Path:
        """The Matrix Market folder."""
        return self.folder / "mtx"

    @property
    def h5ad(self) -> Path:
        """The H5AD file."""
        return self.folder / "data.h5ad"


def ensure_dataset(cells: int, genes: int, *, data: Path, seed: int) -> Dataset:
    """The cached dataset of this size and seed, generated first when missing or incomplete."""
    params = synthetic.Params(n_cells=cells, n_genes=genes, seed=seed)
    folder = data / f"cells{cells}_genes{genes}_seed{seed}"
    generated = None
    if not synthetic.is_complete(folder, params):
        print(f"generating {size_label(cells, genes)} into {folder} ...", file=sys.stderr)
        start = time.perf_counter()
        synthetic.write_dataset(params, folder)
        generated = time.perf_counter() - start
    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    return Dataset(
        label=size_label(cells, genes),
        folder=folder,
        params=params,
        truth=truth,
        generated=generated,
    )


# -- the reference reads (run in a subprocess) ----------------------------------


def reference_main(kind: str, path: str) -> int:
    """Time one reference read in this (child) process; print a JSON record on the last line."""
    if kind == "mmread":
        import scipy.io  # noqa: PLC0415 (imported before timing, in the child only)

        def read() -> Any:  # noqa: ANN401 (a scipy sparse matrix)
            return scipy.io.mmread(path).tocsr()

    elif kind == "read_h5ad":
        import anndata  # type: ignore[import-untyped]  # noqa: PLC0415

        def read() -> Any:  # noqa: ANN401 (an AnnData)
            return anndata.read_h5ad(path).X

    else:
        print(f"unknown reference {kind!r}", file=sys.stderr)
        return 2
    gc.collect()
    start = time.perf_counter()
    matrix = read()
    seconds = time.perf_counter() - start
    record = {
        "seconds": seconds,
        "start": start,
        "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "nnz": int(matrix.nnz),
        "total": int(matrix.sum(dtype=np.int64)),
        "shape": list(matrix.shape),
    }
    print(json.dumps(record))
    return 0


@dataclass(kw_only=True)
class Row:
    """One measured step."""

    step: str
    size: str
    seconds: float
    peak_all: int
    peak_workers: int | None = None
    peak_client: int | None = None
    ratio: float | None = None
    baseline: int = 0
    notes: list[str] = field(default_factory=list)


def subprocess_baseline(rss: RssSampler, start: float) -> int:
    """RSS of a sampled subprocess just before ``start`` (0 when no sample fell there)."""
    peaks = report.peak_bytes(rss, start=start - BASELINE_SECONDS, stop=start)
    return 0 if peaks is None else peaks["total"]


def run_reference(kind: str, path: Path, label: str, step: str) -> tuple[Row, dict[str, Any]]:
    """Run :func:`reference_main` in a subprocess, sampling its RSS from here."""
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415 (see report)

    command = [sys.executable, str(Path(__file__).resolve()), "--reference", kind, str(path)]
    wall = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    with RssSampler(None, pid=proc.pid) as rss:
        out, _ = proc.communicate()
    wall = time.perf_counter() - wall
    if proc.returncode:
        msg = f"{step} failed with exit code {proc.returncode}"
        raise RuntimeError(msg)
    record: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    baseline = subprocess_baseline(rss, float(record["start"]))
    row = Row(
        step=step,
        size=label,
        seconds=float(record["seconds"]),
        peak_all=rss.metrics()["peakBytes"]["total"],
        baseline=baseline,
    )
    row.notes.append(
        f"subprocess wall {wall:.1f} s with interpreter start and imports; "
        f"RSS {baseline / MB:,.0f} MB before the read; its ru_maxrss {record['maxrss'] / MB:,.0f} MB"
    )
    return row, record


# -- the imports, with their phases ---------------------------------------------


@dataclass
class Phases:
    """Times of the importer's phases, from wrapped functions (perf_counter seconds)."""

    marks: dict[str, float] = field(default_factory=dict)
    reads: dict[str, float] = field(default_factory=dict)
    read_calls: dict[str, int] = field(default_factory=dict)
    current: str = "open"

    def mark(self, name: str) -> None:
        """Record the time of event ``name`` (the first time it happens, or the last for ``*_last``)."""
        now = time.perf_counter()
        if name.endswith("_last") or name not in self.marks:
            self.marks[name] = now

    def add_read(self, seconds: float) -> None:
        """Count a ``read_band`` call of ``seconds`` against the current phase."""
        self.reads[self.current] = self.reads.get(self.current, 0.0) + seconds
        self.read_calls[self.current] = self.read_calls.get(self.current, 0) + 1


def _timed_source(source: Any, phases: Phases) -> Any:  # noqa: ANN401 (a CountSource)
    original = source.read_band

    @functools.wraps(original)
    def read_band(start: int, stop: int) -> Any:  # noqa: ANN401 (a CSR band)
        t = time.perf_counter()
        try:
            return original(start, stop)
        finally:
            phases.add_read(time.perf_counter() - t)

    source.read_band = read_band
    return source


@contextlib.contextmanager
def instrumented() -> Iterator[Phases]:
    """Wrap the importer's steps to time them; everything is restored afterwards."""
    import cytearc.io.importer as importer_module  # noqa: PLC0415
    from cytearc.io.converters import ToZarr  # noqa: PLC0415
    from cytearc.storage.counts import CountsWriter  # noqa: PLC0415

    phases = Phases()
    open_source = ToZarr.__init__
    saved: list[tuple[object, str, Any]] = [
        (importer_module, "_scan", importer_module._scan),
        (CountsWriter, "__init__", CountsWriter.__init__),
        (CountsWriter, "finish", CountsWriter.finish),
        (CountsWriter, "complete", CountsWriter.complete),
    ]
    originals = {name: function for _, name, function in saved}

    def importer_init(self: ToZarr, source: Any, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        open_source(self, _timed_source(source, phases), *args, **kwargs)
        phases.mark("open_end")

    def scan(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        phases.mark("scan_start")
        phases.current = "scan"
        try:
            return originals["_scan"](*args, **kwargs)
        finally:
            phases.current = "setup"
            phases.mark("scan_end")

    def writer_init(self: CountsWriter, *args: Any, **kwargs: Any) -> None:
        originals["__init__"](self, *args, **kwargs)
        phases.current = "write"
        phases.mark("write_start_last")

    def finish(self: CountsWriter, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        phases.current = "finish"
        phases.mark("finish_start")
        return originals["finish"](self, *args, **kwargs)

    def complete(self: CountsWriter, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        phases.mark("complete_start")
        try:
            return originals["complete"](self, *args, **kwargs)
        finally:
            phases.mark("complete_end_last")

    replacements = {
        "_scan": scan,
        "__init__": writer_init,
        "finish": finish,
        "complete": complete,
    }
    try:
        for owner, name, _ in saved:
            setattr(owner, name, replacements[name])
        ToZarr.__init__ = importer_init  # type: ignore[method-assign]
        phases.mark("open_start")
        yield phases
    finally:
        ToZarr.__init__ = open_source  # type: ignore[method-assign]
        for owner, name, function in saved:
            setattr(owner, name, function)


@dataclass(kw_only=True)
class ImportRun:
    """An import's row and what it wrote."""

    row: Row
    fingerprint: str
    dtype: str
    store_bytes: int
    check: str
    phase_lines: list[str]
    task_lines: list[str]


def _task_summary(tasks: Sequence[dict[str, Any]]) -> list[str]:
    """Worker time by task kind: compute and transfer seconds summed over the workers."""
    from dask.utils import key_split  # noqa: PLC0415

    kinds: dict[str, dict[str, float]] = {}
    for task in tasks:
        kind = kinds.setdefault(
            str(key_split(task["key"])),
            {"n": 0, "compute": 0.0, "transfer": 0.0, "disk": 0.0, "first": np.inf, "last": 0.0},
        )
        kind["n"] += 1
        for part in task.get("startstops", ()):
            seconds = float(part["stop"]) - float(part["start"])
            action = str(part["action"])
            if action == "compute":
                kind["compute"] += seconds
                kind["first"] = min(kind["first"], float(part["start"]))
                kind["last"] = max(kind["last"], float(part["stop"]))
            elif action == "transfer":
                kind["transfer"] += seconds
            else:
                kind["disk"] += seconds
    lines = []
    for name, k in sorted(kinds.items(), key=lambda item: -item[1]["compute"]):
        span = k["last"] - k["first"] if k["last"] else 0.0
        lines.append(
            f"    {name:<28} {int(k['n']):>6} tasks  compute {k['compute']:7.1f} s  "
            f"transfer {k['transfer']:6.1f} s  spill {k['disk']:5.1f} s  span {span:6.1f} s"
        )
    return lines


def _phase_lines(phases: Phases, start: float, stop: float, rss: RssSampler) -> list[str]:
    m = phases.marks
    edges = [
        ("open source (tables)", start, m.get("open_end", start)),
        ("scan pass", m.get("scan_start", start), m.get("scan_end", start)),
        ("setup (layout, tables)", m.get("scan_end", start), m.get("write_start_last", start)),
        (
            "write loop (read+submit)",
            m.get("write_start_last", start),
            m.get("finish_start", start),
        ),
        ("drain bands in flight", m.get("finish_start", start), m.get("complete_start", start)),
        ("countsT (transpose)", m.get("complete_start", start), m.get("complete_end_last", start)),
        ("summaries, close", m.get("complete_end_last", start), stop),
    ]
    reads = {
        "scan pass": ("scan", "read_band incl. bucketing" if "scan" in phases.reads else ""),
        "write loop (read+submit)": ("write", "read_band"),
    }
    lines = []
    for name, a, b in edges:
        peak = report.peak_bytes(rss, start=a, stop=b)
        memory = (
            "no RSS sample"
            if peak is None
            else f"peak RSS all {peak['total'] / MB:7,.0f} MB, "
            f"workers {peak['workers'] / MB:7,.0f} MB, client {peak['client'] / MB:6,.0f} MB"
        )
        text = f"    {name:<26} {b - a:7.1f} s   {memory}"
        if name in reads:
            key, _ = reads[name]
            text += (
                f"; read_band {phases.reads.get(key, 0.0):.1f} s "
                f"in {phases.read_calls.get(key, 0)} calls"
            )
        lines.append(text)
    return lines


def _store_check(path: Path, dataset: Dataset) -> str:
    """Compare the store's count summaries with the generator's totals."""
    import zarr  # noqa: PLC0415

    group = zarr.open_group(str(path), mode="r")
    summaries: Any = group["matrices/RNA/countSummaries"]
    total = int(np.asarray(summaries["rowSums"][:]).sum(dtype=np.int64))
    nnz = int(np.asarray(summaries["rowPositive"][:]).sum(dtype=np.int64))
    ok = total == dataset.truth["total_counts"] and nnz == dataset.truth["n_values"]
    matrices: Any = group["matrices/RNA"]
    arrays = sorted(str(k) for k in matrices.array_keys())
    return (
        f"{'ok' if ok else 'MISMATCH'}: sum {total:,}, non-zero {nnz:,} "
        f"(generated {dataset.truth['total_counts']:,}, {dataset.truth['n_values']:,}); "
        f"arrays {arrays}"
    )


def run_import(
    kind: str, source: Path, dataset: Dataset, *, engine: Engine, args: argparse.Namespace
) -> ImportRun:
    """``import_data`` of ``source`` into a scratch store, measured."""
    from distributed import get_task_stream  # noqa: PLC0415

    from cytearc import import_data  # noqa: PLC0415
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415

    client = engine.client
    if client is None:  # typed Client | None by distributed's stubs
        msg = "the engine has no client"
        raise RuntimeError(msg)
    client.restart()
    workers_before = set(client.scheduler_info()["workers"])
    scratch = Path(tempfile.mkdtemp(prefix="bench_import-", dir=args.tmpdir))
    dest = scratch / f"{kind}.zarr"
    try:
        gc.collect()
        with (
            instrumented() as phases,
            RssSampler(client) as rss,
            get_task_stream(client=client) as stream,
        ):
            start = time.perf_counter()
            result = import_data(
                source,
                dest,
                mem_budget=args.mem_budget,
                workers=args.workers,
                show_progress=False,
            )
            stop = time.perf_counter()
        workers_after = set(client.scheduler_info()["workers"])
        peak = rss.metrics()["peakBytes"]
        baseline = rss.metrics(stop=start)["peakBytes"]["total"]
        row = Row(
            step=f"import_data({kind})",
            size=dataset.label,
            seconds=stop - start,
            peak_all=peak["total"],
            peak_workers=peak["workers"],
            peak_client=peak["client"],
            baseline=baseline,
        )
        row.notes.append(
            f"worker limit {engine.worker_memory() / MB:,.0f} MB each; "
            f"RSS {baseline / MB:,.0f} MB before"
        )
        if workers_after != workers_before:
            row.notes.append(
                f"WORKERS CHANGED during the import: {len(workers_before - workers_after)} gone, "
                f"{len(workers_after - workers_before)} new (killed for memory?)"
            )
        return ImportRun(
            row=row,
            fingerprint=result.dataset_fingerprint,
            dtype=",".join(f"{k} {v}" for k, v in result.dtypes.items()),
            store_bytes=report.disk_bytes(dest),
            check=_store_check(dest, dataset),
            phase_lines=_phase_lines(phases, start, stop, rss),
            task_lines=_task_summary(stream.data),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- report ---------------------------------------------------------------------


def machine() -> list[str]:
    """Lines describing the machine, the library versions and how memory is measured."""
    packages = ("zarr", "numcodecs", "dask", "distributed", "scipy", "h5py", "anndata", "pandas")
    return report.machine(packages, notes=[f"peak RSS: {report.RSS_SAMPLING}"])


def table(rows: Sequence[Row], budget: int) -> str:
    """The results as a plain-text table."""
    label = f"{budget / 1e9:g}G"
    header = (
        "step",
        "size",
        "seconds",
        "peak RSS MB (all)",
        "workers MB",
        "client MB",
        "ratio to ref",
        f"within {label}: workers / all",
    )

    def mb(value: int | None) -> str:
        return "-" if value is None else f"{value / MB:,.0f}"

    lines = []
    for r in rows:
        workers = "-" if r.peak_workers is None else ("yes" if r.peak_workers <= budget else "NO")
        lines.append(
            (
                r.step,
                r.size,
                f"{r.seconds:.2f}",
                mb(r.peak_all),
                mb(r.peak_workers),
                mb(r.peak_client),
                "-" if r.ratio is None else f"{r.ratio:.2f}",
                f"{workers} / {'yes' if r.peak_all <= budget else 'NO'}",
            )
        )
    widths = [max(len(x[i]) for x in (header, *lines)) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        first = (cells[0].ljust(widths[0]), cells[1].ljust(widths[1]))
        rest = (c.rjust(w) for c, w in zip(cells[2:], widths[2:], strict=True))
        return "  ".join((*first, *rest))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(x) for x in lines)])


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
    parser.add_argument(
        "--tmpdir", type=Path, default=None, help="where the stores are written (default: $TMPDIR)"
    )
    parser.add_argument("--reference", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 (a linear script)
    args = parse_args(argv)
    if args.reference:
        return reference_main(*args.reference)

    from cytearc.engine import get_engine, parse_mem_budget  # noqa: PLC0415
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415

    budget = parse_mem_budget(args.mem_budget)
    for line in machine():
        print(line)
    print(
        f"engine: mem_budget {args.mem_budget} ({budget / MB:,.0f} MB) over {args.workers} "
        f"workers; data cache {args.data}; stores in {args.tmpdir or tempfile.gettempdir()}"
    )
    datasets = []
    for cells, genes in args.sizes:
        dataset = ensure_dataset(cells, genes, data=args.data, seed=args.seed)
        truth = dataset.truth
        made = (
            f"generated in {dataset.generated:.0f} s"
            if dataset.generated is not None
            else "reused from the cache"
        )
        print(
            f"data {dataset.label}: {truth['n_values']:,} non-zero "
            f"({truth['nonzero_fraction']:.2%}), {truth['total_counts']:,} counts; "
            f"matrix.mtx {report.disk_bytes(dataset.mtx / 'matrix.mtx') / MB:,.0f} MB, "
            f"h5ad {report.disk_bytes(dataset.h5ad) / MB:,.0f} MB; {made}"
        )
        datasets.append(dataset)

    rows: list[Row] = []
    details: list[str] = []
    gc.collect()
    with RssSampler(None) as rss:
        start = time.perf_counter()
        engine = get_engine(mem_budget=args.mem_budget, workers=args.workers)
        startup = time.perf_counter() - start
    rows.append(
        Row(
            step=f"engine start ({args.workers} workers)",
            size="-",
            seconds=startup,
            peak_all=rss.metrics()["peakBytes"]["total"],
        )
    )
    speed_ratio: float | None = None
    for dataset in datasets:
        mmread_row, mmread = run_reference(
            "mmread", dataset.mtx / "matrix.mtx", dataset.label, "mmread + tocsr (ref)"
        )
        mtx = run_import("mtx", dataset.mtx, dataset, engine=engine, args=args)
        mtx.row.ratio = mtx.row.seconds / mmread_row.seconds
        h5ad_row, h5ad = run_reference("read_h5ad", dataset.h5ad, dataset.label, "read_h5ad (ref)")
        imported = run_import("h5ad", dataset.h5ad, dataset, engine=engine, args=args)
        imported.row.ratio = imported.row.seconds / h5ad_row.seconds
        if dataset.label == GOAL_SIZE:
            speed_ratio = imported.row.ratio
        rows += [mmread_row, mtx.row, h5ad_row, imported.row]
        details.append(f"{dataset.label}:")
        for row in (mmread_row, mtx.row, h5ad_row, imported.row):
            details.append(f"  {row.step}: " + "; ".join(row.notes))
        same = "yes" if mtx.fingerprint == imported.fingerprint else "NO"
        details.append(
            f"  dataset fingerprints of the two imports equal: {same} ({mtx.fingerprint[:23]}...); "
            f"storage dtype {mtx.dtype}; store {mtx.store_bytes / MB:,.0f} MB on disk"
        )
        details.append(f"  store check, mtx: {mtx.check}")
        details.append(f"  store check, h5ad: {imported.check}")
        ref_ok = all(
            r["nnz"] == dataset.truth["n_values"] and r["total"] == dataset.truth["total_counts"]
            for r in (mmread, h5ad)
        )
        details.append(f"  references read the generated counts: {'yes' if ref_ok else 'NO'}")
        for run in (mtx, imported):
            details.append(f"  {run.row.step} phases ({run.row.seconds:.1f} s):")
            details += run.phase_lines
            details.append("   worker tasks by kind:")
            details += run.task_lines

    print()
    print(table(rows, budget))
    print()
    print(
        "ratio: import seconds / reference seconds (mtx vs mmread + tocsr, h5ad vs read_h5ad); "
        "workers = all child processes, client = this process (scheduler, source reading)"
    )
    for line in details:
        print(line)
    imports = [r for r in rows if r.peak_workers is not None and r.step.startswith("import")]
    workers_ok = all((r.peak_workers or 0) <= budget for r in imports)
    all_ok = all(r.peak_all <= budget for r in imports)
    speed = (
        "not measured (size not run)"
        if speed_ratio is None
        else f"{'met' if speed_ratio <= SPEED_GOAL else 'NOT met'} ({speed_ratio:.2f}x read_h5ad)"
    )
    print(
        f"goals: peak memory within {args.mem_budget}: workers "
        f"{'met' if workers_ok else 'NOT met'}, workers + client {'met' if all_ok else 'NOT met'} "
        f"(largest all {max(r.peak_all for r in imports) / MB:,.0f} MB); "
        f"import h5ad at {GOAL_SIZE} no slower than read_h5ad: {speed}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
