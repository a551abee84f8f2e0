"""The standard recipe finds scanpy's clusters on real PBMCs.

The reference is scanpy's standard recipe, frozen by
``fixtures/scanpy_recipe/make_scanpy_recipe.py`` (Leiden labels for ten
seeds, the top 25 Wilcoxon markers of each seed-0 cluster). Each dataset is
imported and ``rna_standard`` runs with its defaults (seed 0); the
comparisons are those of :mod:`cytearc.ops.agreement`, on the cells both
tools kept. ``benchmarks/bench_agreement.py`` measures the same for every
recipe difference (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from cytearc import DataStore
from cytearc.io.detect import import_data
from cytearc.ops import markers as marker_ops
from cytearc.ops.agreement import adjusted_rand, marker_overlap, match_clusters

if TYPE_CHECKING:
    from cytearc.pipeline.runner import PipelineRun

FIXTURES = Path(__file__).parent / "fixtures" / "scanpy_recipe"
METADATA: dict[str, Any] = json.loads((FIXTURES / "metadata.json").read_text())
N_MARKERS = 25


def _analysis(
    name: str, shared_data: Path, tmp_path_factory: pytest.TempPathFactory, **options: Any
) -> tuple[DataStore, PipelineRun]:
    info = METADATA["datasets"][name]
    source = shared_data / info["dataset"]
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert digest == info["sha256"], f"{source} changed since the fixtures were made"
    store = tmp_path_factory.mktemp(name) / "data.zarr"
    import_data(source, store, cluster="threads", show_progress=False)
    ds = DataStore(store, zarr_mode="r+", cluster="threads", show_progress=False)
    return ds, ds.pipeline.run("rna_standard", **options)


def _scanpy_labels(name: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / f"{name}.clusters.csv", index_col=0, dtype=str)


@pytest.fixture(scope="module")
def pbmc4k(
    shared_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DataStore, PipelineRun]:
    return _analysis("pbmc4k", shared_data, tmp_path_factory)


def test_pbmc4k_clusters_agree_with_scanpys(pbmc4k: tuple[DataStore, PipelineRun]) -> None:
    """ARI >= 0.85 with each of scanpy's ten seeds (scanpy's own seed-to-seed: 0.92-1.00)."""
    _, run = pbmc4k
    labels = run.clusters()
    scanpy = _scanpy_labels("pbmc4k")
    assert len(labels.index.intersection(scanpy.index)) >= 0.98 * len(scanpy)
    aris = [adjusted_rand(labels, scanpy[seed]) for seed in scanpy]
    assert min(aris) >= 0.85, aris
    assert np.median(aris) >= 0.9, aris


def test_pbmc4k_every_scanpy_population_is_a_cluster_of_its_own(
    pbmc4k: tuple[DataStore, PipelineRun],
) -> None:
    """Split is allowed, merged is not: rare pDCs (20 cells) and FCGR3A monocytes included."""
    _, run = pbmc4k
    matches = match_clusters(run.clusters(), _scanpy_labels("pbmc4k")["seed0"])
    assert matches["separated"].all(), matches
    assert matches["n_reference"].min() == 20  # the pDCs (LILRA4), separated above
    assert matches["jaccard"].median() >= 0.9, matches


def test_pbmc4k_top_markers_of_matched_clusters_are_scanpys(
    pbmc4k: tuple[DataStore, PipelineRun],
) -> None:
    """CyteArc's score is the tie-corrected Wilcoxon z: its top 25 are scanpy's tie-corrected top 25."""
    ds, run = pbmc4k
    matches = match_clusters(run.clusters(), _scanpy_labels("pbmc4k")["seed0"])
    table = marker_ops.table(ds, run.artifact("markers"), n=N_MARKERS)
    ours = {str(g): frame["name"].astype(str).tolist() for g, frame in table.groupby("group")}
    scanpy = pd.read_csv(FIXTURES / "pbmc4k.markers.csv", dtype={"cluster": str})
    overlap = {}
    for tie_correct, frame in scanpy.groupby("tie_correct"):
        reference = {
            c: group.sort_values("rank")["names"].tolist() for c, group in frame.groupby("cluster")
        }
        pairs = {str(k): str(v) for k, v in matches["best"].items()}
        overlap[bool(tie_correct)] = marker_overlap(ours, reference, pairs, n=N_MARKERS)
    assert overlap[True].median() >= 0.9, overlap[True]
    assert overlap[True].min() >= 0.6, overlap[True]
    assert overlap[False].median() >= 0.4, overlap[False]


def test_pbmc1k_agreement_is_within_scanpys_own_seed_to_seed_variation(
    shared_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On 892 CITE-seq PBMCs scanpy's own seeds agree at ARI 0.60-0.90; CyteArc's clusters within that."""
    _, run = _analysis("pbmc1k_citeseq", shared_data, tmp_path_factory)
    scanpy = _scanpy_labels("pbmc1k_citeseq")
    aris = [adjusted_rand(run.clusters(), scanpy[seed]) for seed in scanpy]
    own = METADATA["datasets"]["pbmc1k_citeseq"]["seedToSeedAri"]
    assert np.median(aris) >= own["min"], (aris, own)
