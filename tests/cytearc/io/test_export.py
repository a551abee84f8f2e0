"""Exports: H5AD (read by anndata and used by scanpy unchanged), AnnData in memory, Matrix Market."""

from __future__ import annotations

import gzip
import shutil
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
import scipy.io
import zarr

from cytearc import DataStore, import_10x_h5, import_10x_mtx, import_h5ad
from cytearc.errors import (
    DestinationExistsError,
    OperationArgumentError,
    SourceFormatError,
    UnmeasuredCellsError,
)
from cytearc.ops.normalize import normalized_values
from cytearc.testing import write_membership
from cytearc.tools import DataStoreMerge

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}


@pytest.fixture(scope="module")
def cite(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    return import_10x_h5(source, tmp_path_factory.mktemp("cite") / "cite.zarr", **THREADS).path


def _open(path: Path) -> DataStore:
    return DataStore(path, cluster="threads", show_progress=False)


def test_h5ad_equals_the_store_and_reimports_to_the_same_counts(cite: Path, tmp_path: Path) -> None:
    ds = _open(cite)
    path = ds.to_h5ad(tmp_path / "cite.h5ad")
    adata = ad.read_h5ad(path)
    np.testing.assert_array_equal(adata.X.toarray(), ds.RNA.counts.compute())
    assert adata.X.dtype == ds.RNA.dtype
    assert adata.obs_names.tolist() == ds.cells.fetch_all("ids").tolist()
    assert adata.var_names.tolist() == ds.RNA.features.fetch_all("ids").tolist()
    pd.testing.assert_series_equal(
        adata.var["gene_symbols"].reset_index(drop=True),
        ds.RNA.features.fetch_series("names"),
        check_names=False,
    )
    assert adata.uns["cytearc"]["countsFingerprint"] == ds.RNA.content_fingerprint
    again = _open(
        import_h5ad(path, tmp_path / "again.zarr", assay_types={"RNA": "RNA"}, **THREADS).path
    )
    assert again.RNA.content_fingerprint == ds.RNA.content_fingerprint


def test_scanpy_works_on_an_export_unchanged(cite: Path, tmp_path: Path) -> None:
    adata = ad.read_h5ad(_open(cite).to_h5ad(tmp_path / "cite.h5ad"))
    adata.X = adata.X.astype(np.float32)
    sc.pp.normalize_total(adata, target_sum=1e4)
    sc.pp.log1p(adata)
    adata.obs["group"] = pd.Categorical(np.where(np.arange(adata.n_obs) % 2, "a", "b"))
    sc.tl.rank_genes_groups(adata, "group", method="t-test")
    assert set(adata.uns["rank_genes_groups"]["names"].dtype.names) == {"a", "b"}
    np.testing.assert_allclose(np.asarray(np.expm1(adata.X).sum(axis=1)).ravel(), 1e4, rtol=1e-3)


def test_to_anndata_matches_to_h5ad(cite: Path, tmp_path: Path) -> None:
    ds = _open(cite)
    memory = ds.to_anndata(assay="ADT")
    disk = ad.read_h5ad(ds.to_h5ad(tmp_path / "adt.h5ad", assay="ADT"))
    np.testing.assert_array_equal(memory.X.toarray(), disk.X.toarray())
    np.testing.assert_array_equal(memory.X.toarray(), ds.ADT.counts.compute())
    assert memory.uns["cytearc"]["assay"] == "ADT"


def test_membership_is_declared_and_mtx_refuses_unmeasured_cells(
    cite: Path, shared_data: Path, tmp_path: Path
) -> None:
    pbmc = import_10x_h5(
        shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5",
        tmp_path / "pbmc.zarr",
        **THREADS,
    ).path
    merged = _open(DataStoreMerge([pbmc, cite], tmp_path / "m.zarr", **THREADS).dump())
    adata = ad.read_h5ad(merged.to_h5ad(tmp_path / "adt.h5ad", assay="ADT"))
    assert adata.uns["cytearc"]["assayMembership"] == {"ADT": "ADT_I"}
    np.testing.assert_array_equal(adata.obs["ADT_I"].to_numpy(), merged.cells.fetch_all("ADT_I"))
    assert "RNA_I" not in adata.obs.columns
    with pytest.raises(UnmeasuredCellsError, match=r"to_mtx.*did not|to_mtx: .* not measured"):
        merged.to_mtx(tmp_path / "adt-mtx", assay="ADT")
    assert not (tmp_path / "adt-mtx").exists()


def test_mtx_reads_back_in_scipy_and_reimports(cite: Path, tmp_path: Path) -> None:
    ds = _open(cite)
    folder = ds.to_mtx(tmp_path / "mtx", assay="ADT")
    with gzip.open(folder / "matrix.mtx.gz") as f:
        matrix = scipy.io.mmread(f)
    np.testing.assert_array_equal(matrix.toarray().T, ds.ADT.counts.compute())
    again = _open(import_10x_mtx(folder, tmp_path / "again.zarr", **THREADS).path)
    assert again.ADT.content_fingerprint == ds.ADT.content_fingerprint
    assert (
        again.ADT.features.fetch_all("names").tolist()
        == ds.ADT.features.fetch_all("names").tolist()
    )
    with pytest.raises(DestinationExistsError):
        ds.to_mtx(folder)
    write_membership(cite, "RNA", np.ones(ds.cells.n_rows, dtype=bool))


def test_partial_membership_survives_h5ad_and_a_second_merge(
    cite: Path, shared_data: Path, tmp_path: Path
) -> None:
    """Merge -> to_h5ad -> H5adToZarr -> merge keeps ADT_I, with its role."""
    pbmc = import_10x_h5(
        shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5",
        tmp_path / "pbmc.zarr",
        **THREADS,
    ).path
    merged = _open(DataStoreMerge([pbmc, cite], tmp_path / "m.zarr", **THREADS).dump())
    exported = merged.to_h5ad(tmp_path / "adt.h5ad", assay="ADT")
    back = _open(
        import_h5ad(
            exported,
            tmp_path / "back.zarr",
            assay_split_key=None,
            assay_types={"ADT": "ADT"},
            **THREADS,
        ).path
    )
    assert list(back.assays) == ["ADT"]
    np.testing.assert_array_equal(back.cells.fetch_all("ADT_I"), merged.cells.fetch_all("ADT_I"))
    assert back.cells.attributes("ADT_I")["role"] == "assay_membership"
    assert back.ADT.content_fingerprint == merged.ADT.content_fingerprint
    again = _open(
        DataStoreMerge(
            [back.where, cite], tmp_path / "again.zarr", names=["back", "cite"], **THREADS
        ).dump()
    )
    n = back.cells.n_rows
    np.testing.assert_array_equal(
        again.cells.fetch_all("ADT_I")[:n], merged.cells.fetch_all("ADT_I")
    )
    assert again.cells.fetch_all("ADT_I")[n:].all()


def test_an_undeclared_membership_name_is_skipped_with_a_warning(tmp_path: Path) -> None:
    import scipy.sparse as sp  # noqa: PLC0415

    from cytearc import SparseToZarr  # noqa: PLC0415

    cells = pd.DataFrame({"ids": ["a", "b"], "RNA_I": [True, False], "ADT_I": [1, 2]})
    features = pd.DataFrame({"ids": ["g1"], "names": ["G1"], "feature_types": ["Gene Expression"]})
    with pytest.warns(UserWarning, match="'RNA_I' is left out"):
        path = (
            SparseToZarr(
                sp.csr_matrix(np.ones((2, 1))),
                cells=cells,
                features=features,
                zarr_loc=tmp_path / "s.zarr",
                **THREADS,
            )
            .dump()
            .path
        )
    ds = _open(path)
    assert "RNA_I" not in ds.cells.columns
    assert ds.cells.fetch_all("ADT_I").tolist() == [1, 2]


def test_cli_export(cite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cytearc.cli import main  # noqa: PLC0415

    out = tmp_path / "cite.h5ad"
    assert (
        main(["export", str(cite), str(out), "--assay", "ADT", "--cluster", "threads", "--json"])
        == 0
    )
    assert ad.read_h5ad(out).n_vars == _open(cite).ADT.shape[1]
    capsys.readouterr()
    assert main(["export", str(cite), str(out), "--assay", "ADT", "--cluster", "threads"]) == 1
    assert "DestinationExistsError" in capsys.readouterr().err
    folder = tmp_path / "mtx"
    assert (
        main(
            [
                "export",
                str(cite),
                str(folder),
                "--assay",
                "ADT",
                "--format",
                "mtx",
                "--cluster",
                "threads",
            ]
        )
        == 0
    )
    assert sorted(p.name for p in folder.iterdir()) == [
        "barcodes.tsv.gz",
        "features.tsv.gz",
        "matrix.mtx.gz",
    ]


def test_a_run_exports_its_cells_clusters_embeddings_and_hvgs(tmp_path: Path) -> None:
    from cytearc.datasets import write_store  # noqa: PLC0415

    path = write_store(tmp_path / "ds.zarr", n_cells=800, n_genes=600, cluster="threads")
    ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    run = ds.pipeline.run(n_top=200, n_comps=8, label="first")
    cells = run.artifact("cells").read("mask").astype(bool)
    adata = ad.read_h5ad(ds.to_h5ad(tmp_path / "run.h5ad", run="first"))
    assert adata.n_obs == int(cells.sum())
    assert adata.obs_names.tolist() == ds.cells.fetch_all("ids")[cells].tolist()
    np.testing.assert_array_equal(adata.X.toarray(), ds.RNA.counts.compute()[cells])
    np.testing.assert_array_equal(adata.obsm["X_umap"], run.artifact("umap").read("coords"))
    np.testing.assert_array_equal(adata.obsm["X_pca"], run.artifact("pca").read("coords"))
    assert (
        adata.obs["RNA_leiden_cluster"].astype(int).tolist()
        == run.artifact("clustering").read("labels").tolist()
    )
    assert int(adata.var["highly_variable"].sum()) == 200
    assert adata.uns["cytearc"]["run"]["label"] == "first"
    memory = ds.to_anndata(run=run.run_id)
    np.testing.assert_array_equal(memory.obsm["X_pca"], adata.obsm["X_pca"])
    sc.tl.rank_genes_groups(adata, "RNA_leiden_cluster", method="t-test")
    assert (
        len(adata.uns["rank_genes_groups"]["names"].dtype.names)
        == adata.obs["RNA_leiden_cluster"].nunique()
    )
    normed = ad.read_h5ad(
        ds.to_h5ad(tmp_path / "normed.h5ad", run="first", matrix="normed", layers={"counts": "RNA"})
    )
    values = normalized_values(ds, run.artifact("normalized")).compute(scheduler="threads")
    np.testing.assert_array_equal(normed.X.toarray(), values)
    np.testing.assert_array_equal(normed.layers["counts"].toarray(), adata.X.toarray())
    assert normed.uns["cytearc"]["normalization"]["artifact"] == str(run.artifact("normalized").ref)
    with pytest.raises(SourceFormatError, match=r"X holds normalized values .* \['counts'\]"):
        import_h5ad(tmp_path / "normed.h5ad", tmp_path / "normed.zarr", **THREADS)
    assert not (tmp_path / "normed.zarr").exists()
    again = import_h5ad(
        tmp_path / "normed.h5ad", tmp_path / "normed.zarr", layer="counts", **THREADS
    )
    np.testing.assert_array_equal(_open(again.path).RNA.counts.compute(), adata.X.toarray())


def test_normed_without_a_run_is_the_assay_types_normalization(cite: Path) -> None:
    """RNA as scanpy's normalize_total + log1p computes it, ADT as the centred log ratio."""
    ds = _open(cite)
    rna = ds.to_anndata(matrix="normed", layers=["RNA"])
    reference = ad.AnnData(X=rna.layers["RNA"].astype(np.float64))
    sc.pp.normalize_total(reference, target_sum=1e4)
    sc.pp.log1p(reference)
    assert rna.X.dtype == np.float32
    np.testing.assert_allclose(rna.X.toarray(), reference.X.toarray(), rtol=1e-6, atol=1e-6)
    assert rna.uns["cytearc"]["normalization"]["method"] == "library_size"
    adt = ds.to_anndata(assay="ADT", matrix="normed")
    counts = ds.ADT.counts.compute().astype(np.float64)
    clr = np.log1p(counts / np.exp(np.log1p(counts).mean(axis=1, keepdims=True)))
    np.testing.assert_allclose(adt.X.toarray(), clr, rtol=1e-6, atol=1e-6)


def test_layers_are_refused_before_writing(cite: Path, tmp_path: Path) -> None:
    """A layer of other features, of an assay that did not measure every cell, or a bad matrix writes nothing."""
    store = tmp_path / "two.zarr"
    shutil.copytree(cite, store)
    for part in ("RNA", "matrices/RNA"):
        shutil.copytree(store / part, store / part.replace("RNA", "RNA2"))
    root = zarr.open_group(store, mode="r+")
    root.attrs["assayTypes"] = {**root.attrs["assayTypes"], "RNA2": "RNA"}
    ds = _open(store)
    measured = np.arange(ds.cells.n_rows) % 3 > 0
    write_membership(store, "RNA2", measured)
    ds = _open(store)
    target = tmp_path / "out.h5ad"
    with pytest.raises(OperationArgumentError, match=r"assay 'ADT' \(\d+ features\) does not have"):
        ds.to_h5ad(target, layers={"adt": "ADT"})
    with pytest.raises(UnmeasuredCellsError, match=r"layers: .*RNA2"):
        ds.to_h5ad(target, layers={"other": "RNA2"})
    with pytest.raises(
        OperationArgumentError, match=r"matrix: expected one of \['counts', 'normed'\]"
    ):
        ds.to_h5ad(target, matrix="log")
    assert not target.exists()
    with_layer = ad.read_h5ad(ds.to_h5ad(target, assay="RNA2", layers={"rna": "RNA"}))
    np.testing.assert_array_equal(with_layer.layers["rna"].toarray(), with_layer.X.toarray())
    assert with_layer.uns["cytearc"]["assayMembership"] == {"RNA2": "RNA2_I"}
