"""Subset, merge, repack and to_h5ad of a 100k x 20k store, against one read plus one write of the same bytes.

Run from the project root (the dataset is generated and imported once into
``--data``; later runs reuse it)::

    .venv/bin/python benchmarks/bench_tools.py
    .venv/bin/python benchmarks/bench_tools.py --cells 20000 --genes 5000 --repeat 1   # quick check

Steps, each timed with the peak RSS of this process, its children and the
Dask workers (:class:`cytearc.pipeline.rss.RssSampler`):

- **floor**: one read of every ``counts`` shard written into a new array of
  the same layout (read + write of ``counts``' bytes), measured in the same
  run; the tools write ``counts`` and ``countsT``, so their floor is that
  time for each array they write (twice, as ``countsT`` holds the same bytes);
- **subset**: ``SubsetZarr`` of the first half of the cells (then the second
  half, the other source of the merge);
- **merge**: ``DataStoreMerge`` of the two 50k halves;
- **repack**: ``repack_zarr`` to the ``object_store`` profile;
- **to_h5ad**: the RNA counts streamed into an H5AD file.

Goal of the issue: each within 1.5x its floor, peak memory of all processes
within ``mem_budget``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_import import ensure_dataset
from report import machine

from cytearc import DataStore, import_data
from cytearc.engine.arrays import store_aligned
from cytearc.engine.budget import parse_mem_budget
from cytearc.engine.cluster import get_engine
from cytearc.pipeline.rss import RssSampler
from cytearc.tools import DataStoreMerge, SubsetZarr, repack_zarr


def ensure_store(args: argparse.Namespace) -> Path:
    """The imported store of the dataset (imported once, then reused)."""
    dataset = ensure_dataset(args.cells, args.genes, data=args.data, seed=args.seed)
    store = dataset.folder / "bench_tools.zarr"
    if not (store / "zarr.json").is_file():
        print(f"importing {dataset.h5ad} into {store} ...", file=sys.stderr)
        import_data(
            dataset.h5ad,
            store,
            mem_budget=args.mem_budget,
            workers=args.workers,
            show_progress=False,
        )
    return store


def timed(label: str, client: Any, work: Any) -> dict[str, Any]:  # noqa: ANN401
    """Run ``work()``: its seconds and the peak RSS of all processes."""
    with RssSampler(client) as sampler:
        start = time.perf_counter()
        work()
        seconds = time.perf_counter() - start
    return {
        "step": label,
        "seconds": seconds,
        "peak_gb": sampler.metrics()["peakBytes"]["total"] / 1e9,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--genes", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget", default="4G")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "cytearc-bench-data"
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    store = ensure_store(args)
    engine = get_engine(mem_budget=args.mem_budget, workers=args.workers)
    client = engine.client
    ds = DataStore(store, show_progress=False)
    n_cells = ds.cells.n_rows
    options = {"mem_budget": args.mem_budget, "workers": args.workers, "show_progress": False}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.data) as tmp:
        work = Path(tmp)
        for _ in range(args.repeat):

            def floor() -> None:
                counts = ds.RNA.matrix["counts"]
                target = zarr.open_group(work / "floor.zarr", mode="w").create_array(
                    "counts",
                    shape=counts.shape,
                    dtype=counts.dtype,
                    shards=counts.shards,
                    chunks=counts.chunks,
                    compressors=counts.compressors,
                    fill_value=0,
                )
                engine.compute(store_aligned(ds.RNA.counts, target, where="floor"))

            rows.append(timed("floor: read + write counts", client, floor))
            half = np.arange(n_cells) < n_cells // 2
            for name, cells in (("a", half), ("b", ~half)):
                label = "subset (half the cells)" if name == "a" else "subset (other half)"
                rows.append(
                    timed(
                        label,
                        client,
                        lambda n=name, c=cells: SubsetZarr(
                            store, work / f"{n}.zarr", cells=c, **options
                        ).dump(),
                    )
                )
            rows.append(
                timed(
                    "merge (two halves)",
                    client,
                    lambda: DataStoreMerge(
                        [work / "a.zarr", work / "b.zarr"],
                        work / "ab.zarr",
                        **options,
                    ).dump(),
                )
            )
            rows.append(
                timed(
                    "repack (object_store)",
                    client,
                    lambda: repack_zarr(
                        store, work / "repacked.zarr", profile="object_store", **options
                    ),
                )
            )
            rows.append(timed("to_h5ad", client, lambda: ds.to_h5ad(work / "x.h5ad")))
            for path in work.iterdir():
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["step"] not in best or row["seconds"] < best[row["step"]]["seconds"]:
            best[row["step"]] = row
    floor_seconds = best["floor: read + write counts"]["seconds"]
    floors = {
        "subset (half the cells)": floor_seconds,  # half the cells, two arrays
        "subset (other half)": floor_seconds,
        "merge (two halves)": 2 * floor_seconds,  # all cells, two arrays
        "repack (object_store)": 2 * floor_seconds,
        "to_h5ad": floor_seconds,  # one read, one write of X
    }
    budget_gb = parse_mem_budget(args.mem_budget) / 1e9
    print("\n".join(machine(("zarr", "dask", "distributed", "h5py", "anndata"), notes=[])))
    print(f"store {store}: {n_cells} cells x {ds.RNA.shape[1]} genes, {ds.RNA.dtype}")
    print(f"mem_budget {args.mem_budget}, {args.workers} workers; best of {args.repeat}\n")
    print(f"{'step':30s} {'seconds':>8s} {'floor s':>8s} {'x floor':>8s} {'peak GB':>8s}")
    summary = {}
    for step, row in best.items():
        base = floors.get(step, floor_seconds)
        ratio = row["seconds"] / base
        print(f"{step:30s} {row['seconds']:8.2f} {base:8.2f} {ratio:8.2f} {row['peak_gb']:8.2f}")
        if step in floors:
            summary[step] = {
                "xFloor": round(ratio, 3),
                "goalMet": ratio <= 1.5,
                "withinBudget": row["peak_gb"] <= budget_gb,
            }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
