"""A million cells end to end on two workers: import, the standard recipe, pooling, limma-voom.

Run from the project root (``--workdir`` needs about 40 GB: the generated
MTX and H5AD, then the store and the cube)::

    .venv/bin/python benchmarks/bench_million.py --workdir /big/disk
    .venv/bin/python benchmarks/bench_million.py --workdir /tmp/m --cells 20000   # a quick check

Stages, each timed with the peak RSS of all processes (this one, its
children, the Dask workers; :class:`cytearc.pipeline.rss.RssSampler`):

``generate``
    the seeded synthetic dataset (``--cells`` x ``--genes``, ~7 % non-zero;
    :func:`cytearc.datasets.synthetic.write_dataset` draws it chunk by chunk
    and never holds it), into ``<workdir>/data``; not part of the goal;
``import``
    ``import_data(data.h5ad, store, mem_budget, workers)``;
``recipe``
    ``ds.pipeline.run("rna_standard")``, with each stage's seconds and peaks
    from ``run.summary()``;
``pool``
    ``ds.compare.write_bulk`` of the Leiden clusters by sample (donor x condition);
``limma-voom``
    ``cytepool.limma_voom(cube, design="~ donor + condition",
    coef="conditionstim")`` on every cluster.

The run is resumable stage by stage: every finished stage is recorded in
``<workdir>/million.json`` (its seconds and peak) and its result stays (the
dataset's ``COMPLETE`` marker, the store, the recipe's published artifacts,
which a second ``pipeline.run`` reuses, the cube), so a second invocation
after an interruption runs only what is left. A recipe resumed that way
reuses the stages an earlier invocation computed: their seconds and peaks are
in that invocation's run record in the store (``pipeline/runs``), not in the
printed totals, and ``goalMet`` is then ``null`` with the reused stages named. ``--restart`` forgets the
records, and the store and the cube are made again (an import that is not
recorded starts from an empty store; the generated data is kept). The goal of the issue: at 1,000,000 x 20,000 on 2
cores within ``mem_budget="8G"`` (peak of all processes <= 8 GB) in <= 60
minutes, generation excluded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_import import ensure_dataset
from report import machine

from cytearc import DataStore, import_data
from cytearc.engine.budget import parse_mem_budget
from cytearc.engine.cluster import get_engine
from cytearc.pipeline.rss import RssSampler
from cytepool import limma_voom, read_cube

if TYPE_CHECKING:
    from collections.abc import Callable

    from distributed import Client

DESIGN = "~ donor + condition"
RECORD = "million.json"


def _records(path: Path) -> dict[str, Any]:
    if path.is_file():
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded
    return {}


def _stage(
    records: dict[str, Any],
    path: Path,
    name: str,
    client: Client | None,
    work: Callable[[], dict[str, Any] | None],
) -> None:
    """Run ``work`` unless ``name`` is recorded; record its seconds, all-process peak and extras."""
    if name in records:
        print(f"[million] {name}: done in an earlier invocation, skipped", file=sys.stderr)
        return
    print(f"[million] {name} ...", file=sys.stderr, flush=True)
    with RssSampler(client) as sampler:
        start = time.perf_counter()
        extra = work() or {}
        seconds = time.perf_counter() - start
    peak = sampler.metrics()["peakBytes"]
    records[name] = {"seconds": round(seconds, 1), "peakGB": round(peak["total"] / 1e9, 2), **extra}
    path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    print(f"[million] {name}: {records[name]}", file=sys.stderr, flush=True)


def _recipe_stages(run: Any) -> list[dict[str, Any]]:  # noqa: ANN401 (a PipelineRun)
    return [
        {
            "stage": row.stage,
            "seconds": round(float(row.seconds), 1),
            "peakGB": None
            if row.peak_rss_bytes != row.peak_rss_bytes
            else round(row.peak_rss_bytes / 1e9, 2),
            "reused": bool(row.reused and not row.created),
        }
        for row in run.summary().itertuples()
    ]


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 (a linear script)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--genes", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget", default="8G")
    parser.add_argument(
        "--workers",
        default=None,
        help="worker processes, or PxT (e.g. 1x2); the engine's default if not given",
    )
    parser.add_argument(
        "--compression",
        choices=["gzip", "zstd", "none"],
        default=None,
        help="the codec of the imported counts (default: import_data's)",
    )
    parser.add_argument("--restart", action="store_true", help="forget the recorded stages")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    record_path = args.workdir / RECORD
    records = {} if args.restart else _records(record_path)
    size = {"cells": args.cells, "genes": args.genes, "seed": args.seed}
    if records.get("size", size) != size:
        msg = f"{record_path} records a run of {records['size']}, not {size}; pass --restart or another --workdir"
        raise SystemExit(msg)
    records["size"] = size
    data = args.workdir / "data"
    data.mkdir(exist_ok=True)

    def generate() -> dict[str, Any]:
        dataset = ensure_dataset(args.cells, args.genes, data=data, seed=args.seed)
        return {"nonzero": dataset.truth.get("n_values")}

    _stage(records, record_path, "generate", None, generate)
    dataset = ensure_dataset(
        args.cells, args.genes, data=data, seed=args.seed
    )  # only reads its marker now
    engine = get_engine(mem_budget=args.mem_budget, workers=args.workers)
    client = engine.client
    store = args.workdir / "million.zarr"
    cube_path = args.workdir / "million.cube.zarr"
    options = {"mem_budget": args.mem_budget, "workers": args.workers, "show_progress": False}

    def load() -> None:
        # what an unrecorded import left (an interrupted store, or one of a forgotten run) is the
        # benchmark's own: it and everything computed from it are made again
        for made in (store, cube_path):
            shutil.rmtree(made, ignore_errors=True)
        codec = {} if args.compression is None else {"compression": args.compression}
        import_data(dataset.folder / "data.h5ad", store, **options, **codec)

    _stage(records, record_path, "import", client, load)
    ds = DataStore(store, zarr_mode="r+", **options)

    def recipe() -> dict[str, Any]:
        run = ds.pipeline.run("rna_standard")
        return {"stages": _recipe_stages(run), "clusters": int(run.clusters().nunique())}

    _stage(records, record_path, "recipe", client, recipe)

    def pool() -> dict[str, Any]:
        path = ds.compare.write_bulk(
            cube_path,
            sample_key="sample",
            group_key="RNA_leiden_cluster",
            overwrite=True,
        )
        return {"cube": str(path)}

    _stage(records, record_path, "pool", client, pool)

    def test() -> dict[str, Any]:
        results = limma_voom(read_cube(cube_path), design=DESIGN, coef="conditionstim")
        return {"groupsWithResults": len(results)}

    _stage(records, record_path, "limma-voom", None, test)
    timed = [name for name in ("import", "recipe", "pool", "limma-voom") if name in records]
    total = sum(records[name]["seconds"] for name in timed)
    peak = max(records[name]["peakGB"] for name in timed)
    print("\n".join(machine(("zarr", "dask", "distributed"), notes=[])))
    print(f"{args.cells} cells x {args.genes} genes, engine {engine.budget}")
    print(f"{'stage':24s} {'seconds':>9s} {'peak GB':>8s}")
    for name in ("generate", *timed):
        print(f"{name:24s} {records[name]['seconds']:9.1f} {records[name]['peakGB']:8.2f}")
        if name == "recipe":
            for row in records[name]["stages"]:
                peak_gb = "-" if row["peakGB"] is None else f"{row['peakGB']:.2f}"
                print(f"  {row['stage']:22s} {row['seconds']:9.1f} {peak_gb:>8s}")
    # a recipe resumed after an interruption reused the stages an earlier invocation computed:
    # their seconds and peaks are in that invocation's run record, not in these totals
    reused = [
        row["stage"] for row in records.get("recipe", {}).get("stages", []) if row.get("reused")
    ]
    met = total <= 3600 and peak * 1e9 <= parse_mem_budget(args.mem_budget)
    print(
        json.dumps(
            {
                "endToEndSeconds": round(total, 1),
                "peakGB": peak,
                "budgetGB": round(parse_mem_budget(args.mem_budget) / 1e9, 2),
                "goalMet": None if reused else met,
                "reusedRecipeStages": reused,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
