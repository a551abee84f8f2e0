"""The ATAC recipe out of core against muon's TF-IDF + LSI in memory, on the same peaks in one run.

Run from the project root; the dataset is generated once into ``--data``
(100,000 cells x 200,000 peaks, ~3 % non-zero: about 5-7 minutes) and
exported once as H5AD for muon; later runs reuse both::

    python3 -m venv /tmp/muonvenv && /tmp/muonvenv/bin/pip install muon
    .venv/bin/python benchmarks/bench_atac.py --muon-python /tmp/muonvenv/bin/python
    .venv/bin/python benchmarks/bench_atac.py --cells 20000 --peaks 50000   # a quick look

Steps, each timed with the peak RSS of all processes (this one, its
children and the Dask workers; ``RssSampler`` as ``run.summary()``):

- **cytearc**: ``ds.pipeline.run("atac_standard", assay="ATAC")`` within
  ``--mem-budget`` on ``--workers`` workers; its stages' seconds and peaks
  from ``run.summary()``, and the TF-IDF + LSI part (``normalize``,
  ``prevalent_peaks``, ``lsi``) summed;
- **muon** (a subprocess of ``--muon-python``, so CyteArc is not loaded
  there): ``anndata.read_h5ad`` of the same counts into memory, then
  ``muon.atac.pp.tfidf(log_tf=False, log_idf=False, log_tfidf=True)`` (the
  TF-IDF CyteArc computes) and ``muon.atac.tl.lsi(n_comps=50)`` on every
  peak, as muon's tutorial runs them.

Goal of the issue: the TF-IDF + LSI part no slower than muon's, at most a
third of its peak memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import RSS_SAMPLING, machine

MUON_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import anndata, muon
    start = time.perf_counter()
    adata = anndata.read_h5ad(sys.argv[1])
    adata.X = adata.X.astype("float32")
    read = time.perf_counter()
    muon.atac.pp.tfidf(adata, log_tf=False, log_idf=False, log_tfidf=True, scale_factor=1e4)
    tfidf = time.perf_counter()
    muon.atac.tl.lsi(adata, n_comps=50)
    lsi = time.perf_counter()
    print(json.dumps({"read": read - start, "tfidf": tfidf - read, "lsi": lsi - tfidf,
                      "shape": list(adata.shape), "muon": muon.__version__}))
    """
)

PART = ("normalize", "prevalent_peaks", "lsi")
"""The stages of the recipe that muon's TF-IDF + LSI correspond to."""


def ensure_data(args: argparse.Namespace) -> tuple[Path, Path]:
    """The ATAC store and its H5AD export (made once, then reused)."""
    from cytearc import DataStore  # noqa: PLC0415
    from cytearc.datasets import write_atac_store  # noqa: PLC0415

    folder = args.data / f"atac_{args.cells}x{args.peaks}_{args.density}_{args.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    store, h5ad = folder / "atac.zarr", folder / "atac.h5ad"
    if not (store / "zarr.json").is_file():
        print(f"writing {store} ...", file=sys.stderr)
        start = time.perf_counter()
        write_atac_store(
            store,
            n_cells=args.cells,
            n_peaks=args.peaks,
            density=args.density,
            seed=args.seed,
            mem_budget=args.mem_budget,
            workers=args.workers,
            show_progress=True,
        )
        print(f"  {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if not h5ad.is_file() and args.muon_python:
        print(f"exporting {h5ad} ...", file=sys.stderr)
        ds = DataStore(store, mem_budget=args.mem_budget, workers=args.workers)
        ds.to_h5ad(h5ad, assay="ATAC")
    return store, h5ad


def run_cytearc(store: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The recipe on a fresh workspace of the store: seconds and peaks per stage, and in all."""
    from cytearc import DataStore  # noqa: PLC0415
    from cytearc.engine.cluster import get_engine  # noqa: PLC0415
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415

    engine = get_engine(mem_budget=args.mem_budget, workers=args.workers)
    root = DataStore(store, zarr_mode="r+", mem_budget=args.mem_budget, workers=args.workers)
    name = f"bench{int(time.time())}"
    ds = root.create_workspace(name)
    with RssSampler(engine.client) as sampler:
        start = time.perf_counter()
        run = ds.pipeline.run("atac_standard", assay="ATAC")
        seconds = time.perf_counter() - start
    summary = run.summary()
    stages = {
        str(row.stage): {"seconds": float(row.seconds), "peak_gb": float(row.peak_rss_bytes) / 1e9}
        for row in summary.itertuples()
    }
    part = [stages[s] for s in PART]
    lsi = run.artifact("lsi")
    return {
        "stages": stages,
        "seconds": seconds,
        "peak_gb": sampler.metrics()["peakBytes"]["total"] / 1e9,
        "part_seconds": sum(s["seconds"] for s in part),
        "part_peak_gb": max(s["peak_gb"] for s in part),
        "peaks_selected": len(run.artifact("peaks").read("features")),
        "kept_components": lsi.read("kept").tolist()[:3],
        "depth_correlation_first": float(lsi.read("depth_correlation")[0]),
        "workspace": name,
    }


def run_muon(h5ad: Path, python: str) -> dict[str, Any]:
    """Muon's TF-IDF + LSI in a subprocess: its step seconds and the peak RSS of the subprocess."""
    from cytearc.pipeline.rss import RssSampler  # noqa: PLC0415

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(MUON_SCRIPT)
    with RssSampler(None) as sampler:
        start = time.perf_counter()
        done = subprocess.run(
            [python, script.name, str(h5ad)], capture_output=True, text=True, check=True
        )
        seconds = time.perf_counter() - start
    Path(script.name).unlink()
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        **steps,
        "seconds": seconds,
        "part_seconds": steps["tfidf"] + steps["lsi"],
        "peak_gb": sampler.metrics()["peakBytes"]["total"] / 1e9,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--peaks", type=int, default=200_000)
    parser.add_argument("--density", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget", default="4G")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "cytearc-bench-data"
    )
    parser.add_argument("--muon-python", default=None, help="a Python with muon installed")
    args = parser.parse_args(argv)
    store, h5ad = ensure_data(args)
    muon = run_muon(h5ad, args.muon_python) if args.muon_python else None
    ours = run_cytearc(store, args)
    notes = [f"peak memory: {RSS_SAMPLING}", f"mem_budget {args.mem_budget}, {args.workers} workers"]
    print("\n".join(machine(("zarr", "dask", "distributed"), notes=notes)))
    print(f"{args.cells} cells x {args.peaks} peaks, density {args.density}, seed {args.seed}\n")
    print(f"{'step':28s} {'seconds':>8s} {'peak GB':>8s}")
    for stage, row in ours["stages"].items():
        print(f"cytearc {stage:20s} {row['seconds']:8.1f} {row['peak_gb']:8.2f}")
    print(f"{'cytearc recipe':28s} {ours['seconds']:8.1f} {ours['peak_gb']:8.2f}")
    print(f"{'cytearc TF-IDF + LSI':28s} {ours['part_seconds']:8.1f} {ours['part_peak_gb']:8.2f}")
    result: dict[str, Any] = {"cytearc": ours}
    if muon is not None:
        for step in ("read", "tfidf", "lsi"):
            print(f"muon {step:23s} {muon[step]:8.1f}")
        print(f"{'muon TF-IDF + LSI':28s} {muon['part_seconds']:8.1f} {muon['peak_gb']:8.2f}")
        speed = ours["part_seconds"] / muon["part_seconds"]
        memory = ours["part_peak_gb"] / muon["peak_gb"]
        result |= {
            "muon": muon,
            "secondsOverMuon": round(speed, 3),
            "peakOverMuon": round(memory, 3),
            "goalMet": speed <= 1.0 and memory <= 1 / 3,
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
