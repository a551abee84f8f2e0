"""Every importer on the real files: counts equal direct reads, and one dataset gives one identity."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

from cytearc import DataStore
from cytearc.io.detect import CrToZarr, CSVtoZarr, H5adToZarr, MtxToZarr, import_data

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine


def _store(result_path: Path) -> DataStore:
    return DataStore(result_path)


@pytest.mark.slow
def test_v3_folder_and_h5_give_one_identity(
    tmp_path: Path, shared_data: Path, engine: Engine
) -> None:
    """The 10x v3 Matrix Market folder and HDF5 of one dataset import to the same fingerprints."""
    folder = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix"
    h5 = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5"
    a = MtxToZarr(folder, tmp_path / "mtx.zarr", engine=engine, show_progress=False).dump()
    b = CrToZarr(h5, tmp_path / "h5.zarr", engine=engine, show_progress=False).dump()
    assert a.dataset_fingerprint == b.dataset_fingerprint
    reference = scipy.io.mmread(folder / "matrix.mtx.gz").T.toarray()
    np.testing.assert_array_equal(_store(a.path).assays["RNA"].counts.compute(), reference)
    np.testing.assert_array_equal(_store(b.path).assays["RNA"].countsT.compute(), reference.T)


def test_v2_folder_and_h5_give_one_identity(
    tmp_path: Path, shared_data: Path, engine: Engine
) -> None:
    """The 10x v2 folder and v2 HDF5 (genome hg19_chr21) import to the same counts."""
    folder = shared_data / "10x_v2_mtx_hg19_chr21"
    h5 = shared_data / "10x_v2_h5_hg19_chr21" / "filtered_gene_bc_matrices_h5.h5"
    a = import_data(folder, tmp_path / "mtx.zarr", engine=engine, show_progress=False)
    b = import_data(h5, tmp_path / "h5.zarr", engine=engine, show_progress=False)
    assert (
        _store(a.path).assays["RNA"].content_fingerprint
        == _store(b.path).assays["RNA"].content_fingerprint
    )
    reference = scipy.io.mmread(folder / "matrix.mtx").T.toarray()
    np.testing.assert_array_equal(_store(b.path).assays["RNA"].counts.compute(), reference)
    assert a.dtypes["RNA"] == "uint8"


@pytest.mark.parametrize("layout", ["csr", "csc", "dense"])
def test_h5ad_and_csv_give_the_10x_identity(
    tmp_path: Path, shared_data: Path, engine: Engine, layout: str
) -> None:
    """The same counts written as H5AD (CSR, CSC, dense) and CSV import to the 10x counts fingerprint."""
    h5 = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5"
    tenx = _store(
        CrToZarr(h5, tmp_path / "h5.zarr", engine=engine, show_progress=False).dump().path
    )
    counts = tenx.assays["RNA"].counts.compute()
    cells = tenx.cells.fetch_all("ids")
    genes = tenx.assays["RNA"].features.to_pandas()
    matrix = {
        "csr": sp.csr_matrix(counts),
        "csc": sp.csc_matrix(counts),
        "dense": counts.astype(np.int32),
    }[layout]
    adata = ad.AnnData(
        X=matrix,
        obs=pd.DataFrame(index=cells),
        var=pd.DataFrame(
            {"gene_symbols": genes["names"].to_numpy()}, index=genes["ids"].to_numpy()
        ),
    )
    adata.write_h5ad(tmp_path / "x.h5ad")
    from_h5ad = _store(
        H5adToZarr(tmp_path / "x.h5ad", tmp_path / "h5ad.zarr", engine=engine, show_progress=False)
        .dump()
        .path
    )
    assert from_h5ad.assays["RNA"].content_fingerprint == tenx.assays["RNA"].content_fingerprint
    assert from_h5ad.dataset_fingerprint == tenx.dataset_fingerprint
    if layout == "dense":
        frame = pd.DataFrame(counts[:200], index=cells[:200], columns=genes["ids"])
        frame.to_csv(tmp_path / "x.csv")
        from_csv = _store(
            CSVtoZarr(tmp_path / "x.csv", tmp_path / "csv.zarr", engine=engine, show_progress=False)
            .dump()
            .path
        )
        np.testing.assert_array_equal(from_csv.assays["RNA"].counts.compute(), counts[:200])
        frame.T.to_csv(tmp_path / "t.csv")
        transposed = _store(
            CSVtoZarr(
                tmp_path / "t.csv",
                tmp_path / "t.zarr",
                orientation="features_x_cells",
                engine=engine,
                show_progress=False,
            )
            .dump()
            .path
        )
        assert (
            transposed.assays["RNA"].content_fingerprint
            == from_csv.assays["RNA"].content_fingerprint
        )


@pytest.mark.slow
def test_citeseq_h5_splits_assays(tmp_path: Path, shared_data: Path, engine: Engine) -> None:
    """Antibody Capture features of a CITE-seq file become the ADT assay, without countsT."""
    h5 = shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    ds = _store(
        CrToZarr(h5, tmp_path / "cite.zarr", engine=engine, show_progress=False).dump().path
    )
    assert ds.assay_types == {"ADT": "ADT", "RNA": "RNA"}
    assert ds.assays["ADT"].features.fetch_all("names").tolist() == [
        "CD3",
        "CD4",
        "CD8",
        "CD11c",
        "CD14",
        "CD16",
        "CD19",
        "CD56",
        "CD45",
        "IgG1_control_TotalSeqC",
    ]
    assert ds.assays["ADT"].counts.shape == (892, 10)
    assert (
        int(ds.assays["RNA"].counts.sum().compute()) + int(ds.assays["ADT"].counts.sum().compute())
        == 8_671_085
    )


@pytest.mark.slow
def test_real_h5ad_keeps_obs_columns(tmp_path: Path, shared_data: Path, engine: Engine) -> None:
    """An H5AD's X and obs columns import as the counts and cell table anndata reads."""
    path = shared_data / "h5ad_wu2020_tcells_200" / "wu2020_200.h5ad"
    ds = _store(
        H5adToZarr(path, tmp_path / "wu.zarr", engine=engine, show_progress=False).dump().path
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adata = ad.read_h5ad(path)
    np.testing.assert_array_equal(
        ds.assays["RNA"].counts.compute(), np.asarray(sp.csr_matrix(adata.X).toarray())
    )
    assert ds.cells.fetch_all("ids").tolist() == adata.obs_names.tolist()
    for column in adata.obs.columns[:5]:
        assert column in ds.cells.columns


def test_h5ad_assay_split_key_and_layer(tmp_path: Path, engine: Engine) -> None:
    """assay_split_key names each feature's assay; layer= imports a layer instead of X."""
    rng = np.random.default_rng(0)
    counts = rng.poisson(1.0, size=(300, 40)).astype(np.int32)
    var = pd.DataFrame(
        {"modality": ["Gene Expression"] * 35 + ["Antibody Capture"] * 5},
        index=[f"f{i}" for i in range(40)],
    )
    adata = ad.AnnData(
        X=sp.csr_matrix(counts * 0.5),
        obs=pd.DataFrame(index=[f"c{i}" for i in range(300)]),
        var=var,
        layers={"counts": sp.csr_matrix(counts)},
    )
    adata.write_h5ad(tmp_path / "x.h5ad")
    result = H5adToZarr(
        tmp_path / "x.h5ad",
        tmp_path / "x.zarr",
        layer="counts",
        assay_split_key="modality",
        engine=engine,
        show_progress=False,
    ).dump()
    assert result.assays == {"RNA": "RNA", "ADT": "ADT"}
    assert result.dtypes == {"RNA": "uint8", "ADT": "uint8"}
    ds = _store(result.path)
    np.testing.assert_array_equal(ds.assays["ADT"].counts.compute(), counts[:, 35:])
    np.testing.assert_array_equal(ds.assays["RNA"].countsT.compute(), counts[:, :35].T)
