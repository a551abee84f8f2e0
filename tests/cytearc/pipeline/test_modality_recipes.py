"""The modality recipes recover planted types: ADT alone, ATAC alone, and RNA + ADT by WNN."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytearc import DataStore, import_10x_h5
from cytearc.datasets import write_atac_store, write_citeseq_store
from cytearc.datasets.adt import citeseq_truth
from cytearc.ops.agreement import adjusted_rand
from cytearc.ops.normalize import normalized_values
from cytearc.pipeline.recipes import RECIPES

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.pipeline.runner import PipelineRun

CITESEQ = {"n_cells": 1200, "n_genes": 800, "n_proteins": 24, "n_types": 6, "seed": 3}


def _open(path: Path | str) -> DataStore:
    return DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)


def _types(ds: DataStore, run_clusters: pd.Series) -> pd.Series:
    ids = np.asarray([str(c) for c in ds.cells.fetch_all("ids")], dtype=object)
    types = pd.Series(ds.cells.fetch_all("cell_type").astype(str), index=ids)
    return types.loc[run_clusters.index]


@pytest.fixture(scope="module")
def citeseq(tmp_path_factory: pytest.TempPathFactory) -> DataStore:
    path = write_citeseq_store(
        tmp_path_factory.mktemp("cite") / "cite.zarr", cluster="threads", **CITESEQ
    )
    return _open(path)


def test_modality_recipes_are_registered() -> None:
    """adt_standard, atac_standard and citeseq_wnn are recipes beside rna_standard."""
    assert {"rna_standard", "adt_standard", "atac_standard", "citeseq_wnn"} <= set(RECIPES)
    assert "lsi" in [s.name for s in RECIPES["atac_standard"].stages]


@pytest.mark.slow
def test_adt_standard_recovers_the_protein_types(citeseq: DataStore) -> None:
    """adt_standard clusters the ADT panel into its protein profiles (ADT twins merged), ARI >= 0.9."""
    run = citeseq.pipeline.run("adt_standard", assay="ADT", resolution=0.3)
    assert [s.stage for s in run.stages][-1] == "markers"
    clusters = run.clusters()
    types = _types(citeseq, clusters)
    truth = citeseq_truth(**CITESEQ)
    merged = types.copy()
    for first, second in truth["adt_twins"]:
        merged[merged == second] = first
    assert adjusted_rand(clusters, merged) >= 0.9


def _type_purity(ds: DataStore, run: PipelineRun) -> float:
    """The mean over planted types of the fraction of a cell's graph neighbours of its own type."""
    labels = _types(ds, run.clusters()).to_numpy()
    neighbours = labels[run.artifact("neighbors").read("indices")[:, 1:]]
    same = (neighbours == labels[:, None]).mean(axis=1)
    return float(pd.Series(same).groupby(labels).mean().mean())


@pytest.mark.slow
def test_citeseq_wnn_separates_what_each_modality_alone_merges(citeseq: DataStore) -> None:
    """The joint graph's neighbours are of the cell's type more often than RNA's or ADT's; ARI >= 0.9."""
    joint = citeseq.pipeline.run("citeseq_wnn", resolution=0.3)
    assert joint.artifact("neighbors").provenance["operation"] == "integration.modalities"
    clusters = joint.clusters()
    types = _types(citeseq, clusters)
    assert adjusted_rand(clusters, types) >= 0.9
    rna = citeseq.pipeline.run("rna_standard", resolution=0.3)
    adt = citeseq.pipeline.run("adt_standard", assay="ADT", resolution=0.3)
    purity = {
        name: _type_purity(citeseq, run)
        for name, run in (("joint", joint), ("rna", rna), ("adt", adt))
    }
    assert purity["joint"] > max(purity["rna"], purity["adt"]) + 0.05, purity
    weights = joint.artifact("neighbors").read("weights")
    assert weights.shape == (len(clusters), 2)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)


@pytest.mark.slow
def test_atac_standard_recovers_the_planted_types(tmp_path: Path) -> None:
    """atac_standard (TF-IDF, prevalent peaks, LSI without the depth component) finds the types, ARI >= 0.9."""
    path = write_atac_store(
        tmp_path / "atac.zarr", n_cells=1500, n_peaks=6000, n_types=5, seed=2, cluster="threads"
    )
    ds = _open(path)
    run = ds.pipeline.run("atac_standard", assay="ATAC")
    lsi = run.artifact("lsi")
    assert abs(lsi.read("depth_correlation")[0]) >= 0.75
    assert 0 not in lsi.read("kept").tolist()
    clusters = run.clusters()
    assert adjusted_rand(clusters, _types(ds, clusters)) >= 0.9
    written = ds.plots.save_run_figures(run, tmp_path / "figures")
    assert sorted(p.name for p in written) == ["qc_violins.png", "umap_clusters.png"]


def _marker_identity(ds: DataStore, rna: PipelineRun, *, n_markers: int = 10) -> pd.Series:
    """Each cell's RNA-cluster marker set of highest score (z-scored mean log expression)."""
    markers = rna.artifact("markers")
    groups = np.asarray([str(g) for g in markers.read("groups")])
    score = markers.read("score")
    top = [np.argsort(-score[i], kind="stable")[:n_markers] for i in range(len(groups))]
    genes = np.unique(np.concatenate(top))
    norm = rna.artifact("normalized")
    values = normalized_values(ds, norm, features=genes).compute().astype(np.float64)
    sets = np.column_stack([values[:, np.searchsorted(genes, t)].mean(axis=1) for t in top])
    sets = (sets - sets.mean(axis=0)) / sets.std(axis=0)
    ids = np.asarray([str(c) for c in ds.cells.fetch_all("ids")], dtype=object)
    return pd.Series(groups[sets.argmax(axis=1)], index=ids[norm.read("rows")])


def _purity(clusters: pd.Series, identity: pd.Series) -> float:
    table = pd.crosstab(clusters.to_numpy(), identity.loc[clusters.index].to_numpy())
    return float(table.max(axis=1).sum() / table.to_numpy().sum())


@pytest.mark.slow
def test_real_citeseq_joint_clusters_against_the_rna_markers(
    tmp_path: Path, shared_data: Path
) -> None:
    """On the real pbmc1k CITE-seq cells the WNN clusters are purer in RNA-marker identity than ADT's.

    Each cell's identity is the RNA-only clusters' marker set (top 10 genes by
    score) with the highest z-scored mean log expression; a clustering's
    purity is the share of cells in their cluster's most common identity.
    Measured: RNA alone 0.77 (its own markers), WNN 0.63, ADT alone 0.54; the
    joint graph weighs the 10-protein panel at 0.61 on average (Seurat's weights).
    """
    imported = import_10x_h5(
        shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5",
        tmp_path / "cite.zarr",
        cluster="threads",
        show_progress=False,
    )
    ds = _open(imported.path)
    rna = ds.pipeline.run("rna_standard")
    joint = ds.pipeline.run("citeseq_wnn")
    adt = ds.pipeline.run("adt_standard", assay="ADT")
    identity = _marker_identity(ds, rna)
    common = sorted(set(identity.index) & set(joint.clusters().index) & set(adt.clusters().index))
    purity = {
        name: _purity(run.clusters().loc[common], identity)
        for name, run in (("rna", rna), ("joint", joint), ("adt", adt))
    }
    assert purity["joint"] >= purity["adt"] + 0.05, purity
