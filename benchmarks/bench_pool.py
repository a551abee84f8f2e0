"""Pool a store into a cube and run limma-voom on every group, against one read of the counts.

Run from the project root (the 100k x 20k dataset is generated and imported
once into ``--data``; later runs reuse it)::

    .venv/bin/python benchmarks/bench_pool.py
    .venv/bin/python benchmarks/bench_pool.py --cells 20000 --genes 15000 --groups 15

Steps, each timed with the peak RSS of this process, its children and the
Dask workers:

- **read counts**: one read of every ``counts`` shard on the engine (decode
  and a column sum), the reference;
- **pool**: ``ds.compare.compute_bulk`` computed on the engine (the five
  layers of ``groups x samples x genes``);
- **write cube**: ``ds.compare.write_bulk`` (pool, write, digests, atomic
  rename);
- **limma-voom**: ``cytepool.limma_voom`` on each group alone (20k genes x 12
  samples with ``~ donor + condition``), then on every group at once.

Groups are ``--groups`` seeded pseudo-clusters (each cell's type and a seeded
split of it), samples the 12 donor x condition libraries. Goals of the issue:
pooling within 1.5x the read of the counts; limma-voom under 1 s per group.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_import import ensure_dataset
from report import machine

from cytearc import DataStore, import_data
from cytearc.engine.cluster import get_engine
from cytearc.pipeline.rss import RssSampler
from cytepool import limma_voom, read_cube
from cytepool.errors import GroupSkippedError

DESIGN = "~ donor + condition"


def ensure_store(args: argparse.Namespace) -> Path:
    """The imported store of the dataset (imported once, then reused)."""
    dataset = ensure_dataset(args.cells, args.genes, data=args.data, seed=args.seed)
    store = dataset.folder / "bench_pool.zarr"
    if not (store / "zarr.json").is_file():
        print(f"importing {dataset.h5ad} into {store} ...", file=sys.stderr)
        import_data(
            dataset.h5ad,
            store,
            mem_budget=args.mem_budget,
            workers=args.workers,
            show_progress=False,
        )
    ds = DataStore(store, zarr_mode="r+", mem_budget=args.mem_budget, workers=args.workers)
    columns = ds.cells.columns
    if "bench_group" not in columns:
        cell_type = ds.cells.fetch_all("cell_type").astype(object)
        types = sorted(set(cell_type))
        rng = np.random.default_rng(args.seed)
        split = rng.integers(0, 2, len(cell_type))
        labels = [
            f"g{(types.index(t) * 2 + s) % args.groups:02d}"
            for t, s in zip(cell_type, split, strict=True)
        ]
        ds.cells.insert("bench_group", np.asarray(labels, dtype=object))
    if "bench_sample" not in columns:
        donor = ds.cells.fetch_all("donor").astype(object)
        condition = ds.cells.fetch_all("condition").astype(object)
        ds.cells.insert(
            "bench_sample",
            np.asarray([f"{d}_{c}" for d, c in zip(donor, condition, strict=True)], dtype=object),
        )
    return store


def timed(label: str, client: Any, work: Any) -> tuple[dict[str, Any], Any]:  # noqa: ANN401
    """Run ``work()``; its seconds and peak RSS of all processes."""
    with RssSampler(client) as sampler:
        start = time.perf_counter()
        result = work()
        seconds = time.perf_counter() - start
    peak = sampler.metrics()["peakBytes"]
    return {"step": label, "seconds": seconds, "peak_gb": peak["total"] / 1e9}, result


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 (a linear script)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--genes", type=int, default=20_000)
    parser.add_argument("--groups", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget", default="4G")
    parser.add_argument(
        "--workers",
        default=None,
        help="worker processes, or PxT (e.g. 1x2); the engine's default if not given",
    )
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "cytearc-bench-data"
    )
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    store = ensure_store(args)
    engine = get_engine(mem_budget=args.mem_budget, workers=args.workers)
    ds = DataStore(store, zarr_mode="r+", show_progress=False)
    client = engine.client
    rows: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        row, _ = timed(
            "read counts", client, lambda: engine.compute(ds.RNA.counts.sum(axis=0, dtype="i8"))
        )
        rows.append(row)

        def pool() -> Any:  # noqa: ANN401
            cube = ds.compare.compute_bulk(sample_key="bench_sample", group_key="bench_group")
            return engine.compute(*(cube.layers[n] for n in sorted(cube.layers)))

        row, _ = timed("pool (compute layers)", client, pool)
        rows.append(row)
    with tempfile.TemporaryDirectory(dir=args.data) as tmp:
        row, path = timed(
            "write cube",
            client,
            lambda: ds.compare.write_bulk(
                Path(tmp) / "bench.cube.zarr", sample_key="bench_sample", group_key="bench_group"
            ),
        )
        rows.append(row)
        cube = read_cube(path)
        groups = [str(g) for g in cube.groups.iloc[:, 0]]
        per_group, unfiltered = [], []
        for group in groups:
            start = time.perf_counter()
            try:
                result = limma_voom(cube, group=group, design=DESIGN, coef="conditionstim")
            except GroupSkippedError:
                continue
            per_group.append((time.perf_counter() - start, len(result.table)))
            start = time.perf_counter()
            result = limma_voom(
                cube, group=group, design=DESIGN, coef="conditionstim", filter_by_expr=False
            )
            unfiltered.append((time.perf_counter() - start, len(result.table)))
        row, results = timed(
            "limma-voom, every group (threads)",
            None,
            lambda: limma_voom(cube, design=DESIGN, coef="conditionstim"),
        )
        rows.append(row)
        shape = cube.shape
    best = {}
    for row in rows:
        if row["step"] not in best or row["seconds"] < best[row["step"]]["seconds"]:
            best[row["step"]] = row
    reference = best["read counts"]["seconds"]
    print("\n".join(machine(("zarr", "dask", "distributed"), notes=[])))
    print(
        f"store {store}: {args.cells} cells x {args.genes} genes; cube {shape} (groups x samples x genes)"
    )
    print(f"engine {engine.budget}; best of {args.repeat}\n")
    print(f"{'step':36s} {'seconds':>8s} {'x read':>7s} {'peak GB':>8s}")
    for row in best.values():
        print(
            f"{row['step']:36s} {row['seconds']:8.2f} {row['seconds'] / reference:7.2f} {row['peak_gb']:8.2f}"
        )
    for label, timings in (("after filterByExpr", per_group), ("without filtering", unfiltered)):
        seconds = [s for s, _ in timings]
        genes = [g for _, g in timings]
        print(
            f"limma-voom per group alone, {label} ({len(groups)} groups, {min(genes)}-{max(genes)} "
            f"genes, {shape[1]} samples): median {statistics.median(seconds):.3f} s, "
            f"max {max(seconds):.3f} s"
        )
    seconds = [s for s, _ in per_group + unfiltered]
    pool_ratio = best["pool (compute layers)"]["seconds"] / reference
    print(
        json.dumps(
            {
                "poolOverRead": round(pool_ratio, 3),
                "poolGoalMet": pool_ratio <= 1.5,
                "limmaMaxSecondsPerGroup": round(max(seconds), 3),
                "limmaGoalMet": max(seconds) < 1.0,
                "groupsWithResults": len(results),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
