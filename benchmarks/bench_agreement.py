"""How far CyteArc's ``rna_standard`` clusters agree with scanpy's on real PBMCs, one recipe difference at a time.

Run from the project root::

    .venv/bin/python benchmarks/bench_agreement.py              # both datasets, every variant
    .venv/bin/python benchmarks/bench_agreement.py --datasets pbmc4k --markdown

The reference is scanpy's standard recipe frozen by
``tests/cytearc/pipeline/fixtures/scanpy_recipe/make_scanpy_recipe.py``:
its Leiden labels for seeds 0-9 (scanpy's own seed-to-seed ARI is in the
fixture's ``metadata.json``) and the 25 top Wilcoxon markers of each seed-0
cluster. Each dataset is imported once into a scratch store; each variant
is ``ds.pipeline.run("rna_standard", **options)`` (artifacts of identical
provenance are reused between variants), and its clusters are compared on
the cells both tools kept (:mod:`cytearc.ops.agreement`):

- **ARI**: the median (min-max) over every pair of a CyteArc seed
  (``--seeds``, 0-4 by default: the seed of PCA, graph, Leiden and UMAP)
  and one of scanpy's ten;
- **separated** (of CyteArc's seed 0): scanpy's seed-0 clusters that a CyteArc cluster holds at
  least half of, with at least 85 % of its cells from that cluster (split is
  allowed, merged is not);
- **markers**: the median (and least) share of a scanpy cluster's top 25
  markers among the top 25 (by score) of its best-matching CyteArc cluster,
  against scanpy's tie-corrected Wilcoxon (the statistic CyteArc's score is)
  and against scanpy's default (no tie correction).

Prints one row per (dataset, variant), as a Markdown table with ``--markdown``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from cytearc import DataStore
    from cytearc.pipeline.runner import PipelineRun

ROOT: Final = Path(__file__).resolve().parents[1]
FIXTURES: Final = ROOT / "tests" / "cytearc" / "pipeline" / "fixtures" / "scanpy_recipe"
SHARED_DATA: Final = ROOT.parent / "shared" / "data"
SCANPY_QC: Final = {"RNA_nFeatures": [200, None], "RNA_percentMito": [None, 20.0]}
"""The fixed thresholds of scanpy's recipe (filter_cells(min_genes=200), pct_counts_mt <= 20)."""

VARIANTS: Final[dict[str, dict[str, Any]]] = {
    "default": {},
    "before this change: no gene filter": {"min_cells": 0},
    "before the last change: no gene filter, no clipping": {"min_cells": 0, "max_value": None},
    "no clipping (max_value=None)": {"max_value": None},
    "scanpy's QC (fixed thresholds, no MAD)": {"qc_bounds": SCANPY_QC, "qc_filter": False},
    "scanpy's QC, no gene filter": {"qc_bounds": SCANPY_QC, "qc_filter": False, "min_cells": 0},
    "fixed thresholds and MAD": {"qc_bounds": SCANPY_QC},
    "no QC filter": {"qc_filter": False},
    "30 PCs": {"n_comps": 30},
    "40 PCs": {"n_comps": 40},
    "randomized PCA": {"pca_mode": "randomized"},
    "Leiden: leidenalg, 2 iterations": {"leiden_flavor": "leidenalg"},
    "Leiden: leidenalg to convergence": {"leiden_flavor": "leidenalg", "leiden_iterations": -1},
    "flavor of HVGs: 'log'": {"hvg_flavor": "log"},
}


def _metadata() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / "metadata.json").read_text())
    return loaded


def scanpy_reference(name: str) -> tuple[pd.DataFrame, dict[bool, dict[str, list[str]]]]:
    """The frozen scanpy labels (one column per seed) and top markers (by tie correction, then cluster)."""
    labels = pd.read_csv(FIXTURES / f"{name}.clusters.csv", index_col=0, dtype=str)
    markers = pd.read_csv(FIXTURES / f"{name}.markers.csv", dtype={"cluster": str})
    ranked = {
        bool(tie): {
            str(c): group.sort_values("rank")["names"].tolist()
            for c, group in frame.groupby("cluster")
        }
        for tie, frame in markers.groupby("tie_correct")
    }
    return labels, ranked


def compare(
    ds: DataStore, runs: list[PipelineRun], name: str, *, n_markers: int = 25
) -> dict[str, Any]:
    """The agreement of runs' clusters (every seed) and of the first run's markers with scanpy's."""
    from cytearc.ops import markers as marker_ops  # noqa: PLC0415
    from cytearc.ops.agreement import adjusted_rand, marker_overlap, match_clusters  # noqa: PLC0415

    reference, reference_markers = scanpy_reference(name)
    every = [run.clusters() for run in runs]
    aris = [adjusted_rand(labels, reference[seed]) for labels in every for seed in reference]
    labels = every[0]
    matches = match_clusters(labels, reference["seed0"])
    table = marker_ops.table(ds, runs[0].artifact("markers"), n=n_markers)
    ours = {str(g): frame["name"].astype(str).tolist() for g, frame in table.groupby("group")}
    pairs = matches["best"].to_dict()
    overlap = {
        tie: marker_overlap(ours, reference_markers[tie], pairs, n=n_markers)
        for tie in (True, False)
    }
    return {
        "cells": len(labels),
        "common": len(labels.index.intersection(reference.index)),
        "clusters": int(labels.nunique()),
        "scanpy_clusters": int(reference["seed0"].nunique()),
        "ari_median": float(np.median(aris)),
        "ari_min": float(min(aris)),
        "ari_max": float(max(aris)),
        "separated": int(matches["separated"].sum()),
        "unseparated": [str(c) for c in matches.index[~matches["separated"]]],
        "markers_median": float(overlap[True].median()),
        "markers_min": float(overlap[True].min()),
        "markers_default_median": float(overlap[False].median()),
    }


def main() -> None:
    """Run every variant on every dataset and print the table."""
    from cytearc import DataStore  # noqa: PLC0415
    from cytearc.io.detect import import_data  # noqa: PLC0415

    metadata = _metadata()
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=list(metadata["datasets"]))
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--seeds", type=int, default=5, help="CyteArc's seeds 0..N-1 (each ARI pair)")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="cytearc_agreement_"))
    try:
        for name in a.datasets:
            info = metadata["datasets"][name]
            store = tmp / f"{name}.zarr"
            import_data(
                SHARED_DATA / info["dataset"], store, cluster="threads", show_progress=False
            )
            ds = DataStore(store, zarr_mode="r+", cluster="threads", show_progress=False)
            seeds = info["seedToSeedAri"]
            for variant in a.variants:
                start = time.perf_counter()
                runs = [
                    ds.pipeline.run("rna_standard", **VARIANTS[variant], seed=seed)
                    for seed in range(a.seeds)
                ]
                row = {"dataset": name, "variant": variant, **compare(ds, runs, name)}
                row["seconds"] = round(time.perf_counter() - start, 1)
                row["scanpy_seed_to_seed"] = (
                    f"{seeds['median']:.2f} ({seeds['min']:.2f}-{seeds['max']:.2f})"
                )
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    frame = pd.DataFrame(rows)
    if a.markdown:
        print(_markdown(frame))
    else:
        print(frame.to_string(index=False))


def _markdown(frame: pd.DataFrame) -> str:
    lines = [
        "| dataset | variant | cells (common) | clusters (scanpy) | ARI median (min-max) | separated | markers: tie-corrected median (min); scanpy's default |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in frame.itertuples():
        missing = f" (not: {', '.join(r.unseparated)})" if r.unseparated else ""
        lines.append(
            f"| {r.dataset} | {r.variant} | {r.cells} ({r.common}) | {r.clusters} ({r.scanpy_clusters}) "
            f"| {r.ari_median:.3f} ({r.ari_min:.3f}-{r.ari_max:.3f}) | {r.separated}/{r.scanpy_clusters}{missing} "
            f"| {r.markers_median:.2f} ({r.markers_min:.2f}); {r.markers_default_median:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
