"""File → store → DataFrame: the imported tables read back as anndata (or the file) has them."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cytearc import DataStore
from cytearc.io.detect import CrToZarr, CSVtoZarr, H5adToZarr, MtxToZarr

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

N_CELLS = 6
REAL_H5AD = [
    "h5ad_wu2020_tcells_200/wu2020_200.h5ad",
    "h5ad_hagai2018_lps_toy/hagai2018_lps_toy.h5ad",
]


def _annotated() -> ad.AnnData:
    """Every obs and var column kind that anndata writes, with missing values and an unused category."""
    obs = pd.DataFrame(
        {
            "cluster": pd.Categorical(
                ["T", "B", None, "T", "NK", "B"], categories=["NK", "T", "B", "DC"]
            ),
            "stage": pd.Categorical(
                ["lo", "hi", "lo", "mid", "hi", "lo"], categories=["lo", "mid", "hi"], ordered=True
            ),
            "barcode_note": ["a", "b", "c", "d", "e", "f"],
            "comment": pd.array(["x", None, "y", "z", None, "w"], dtype="string"),
            "doublet": [True, False, False, True, False, False],
            "n_genes": np.array([10, 20, 30, 40, 50, 60], dtype=np.int32),
            "score": [0.5, np.nan, 1.5, 2.0, -1.0, np.inf],
            "n_reads": pd.array([1, None, 3, 4, None, 6], dtype="Int64"),
            "passed": pd.array([True, None, False, True, True, None], dtype="boolean"),
        },
        index=[f"cell{i}" for i in range(N_CELLS)],
    )
    var = pd.DataFrame(
        {
            "gene_symbols": ["CD3E", "MS4A1", "ACTB", "NKG7"],
            "chrom": pd.Categorical(
                ["chr11", "chr11", "chr7", "chr19"], categories=["chr7", "chr11", "chr19", "chrX"]
            ),
            "highly_variable": [True, False, True, True],
            "length": pd.array([100, None, 300, 400], dtype="Int64"),
        },
        index=["ENSG1", "ENSG2", "ENSG3", "ENSG4"],
    )
    counts = np.arange(N_CELLS * 4, dtype=np.float32).reshape(N_CELLS, 4) % 5
    return ad.AnnData(X=sp.csr_matrix(counts), obs=obs, var=var)


def _read(path: Path) -> ad.AnnData:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.OldFormatWarning)
        return ad.read_h5ad(path)


def _assert_tables_are_anndatas(ds: DataStore, adata: ad.AnnData) -> None:
    """The cell table is ids, obs, I; the feature table ids, names, feature_types, the other var columns, I."""
    cells = ds.cells.to_pandas()
    assert cells["ids"].tolist() == adata.obs_names.tolist()
    pd.testing.assert_frame_equal(
        cells.drop(columns=["ids", "I"]), adata.obs.reset_index(drop=True), check_index_type=False
    )
    features = pd.concat(
        [ds.assays[name].features.to_pandas() for name in ds.assays], ignore_index=True
    )
    names = [c for c in ("gene_symbols", "feature_name", "name") if c in adata.var.columns][:1]
    types = [c for c in ("feature_types", "feature_type") if c in adata.var.columns][:1]
    rest = adata.var.drop(columns=names + types).reset_index(drop=True)
    order = np.argsort(features["ids"].map(adata.var_names.get_loc).to_numpy(), kind="stable")
    features = features.iloc[order].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        features.drop(columns=["ids", "names", "feature_types", "I"]), rest, check_index_type=False
    )


def test_h5ad_tables_keep_dtypes_categories_and_missing_values(
    tmp_path: Path, engine: Engine
) -> None:
    """The obs and var of every kind read back from the store as anndata reads them from the H5AD."""
    with ad.settings.override(allow_write_nullable_strings=True):
        _annotated().write_h5ad(tmp_path / "x.h5ad", convert_strings_to_categoricals=False)
    result = H5adToZarr(
        tmp_path / "x.h5ad", tmp_path / "x.zarr", engine=engine, show_progress=False
    ).dump()
    ds = DataStore(result.path)
    adata = _read(tmp_path / "x.h5ad")
    _assert_tables_are_anndatas(ds, adata)
    cluster = ds.cells.fetch_series("cluster")
    assert cluster.cat.categories.tolist() == ["NK", "T", "B", "DC"]
    assert ds.cells.fetch_series("stage").cat.ordered
    assert ds.cells.fetch_all("cluster").astype(str).tolist() == ["T", "B", "None", "T", "NK", "B"]


@pytest.mark.slow
@pytest.mark.parametrize("file", REAL_H5AD)
def test_real_h5ad_tables_round_trip(
    tmp_path: Path, shared_data: Path, engine: Engine, file: str
) -> None:
    """The real H5AD files' obs and var read back from the store as anndata reads them."""
    path = shared_data / file
    result = H5adToZarr(path, tmp_path / "x.zarr", engine=engine, show_progress=False).dump()
    _assert_tables_are_anndatas(DataStore(result.path), _read(path))


def test_10x_and_csv_tables_are_text(tmp_path: Path, shared_data: Path, engine: Engine) -> None:
    """10x and CSV tables hold text columns read as str objects, as their files hold them."""
    folder = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix"
    mtx = DataStore(
        MtxToZarr(folder, tmp_path / "mtx.zarr", engine=engine, show_progress=False).dump().path
    )
    h5 = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5"
    cr = DataStore(
        CrToZarr(h5, tmp_path / "h5.zarr", engine=engine, show_progress=False).dump().path
    )
    barcodes = pd.read_csv(folder / "barcodes.tsv.gz", header=None, sep="\t")[0].tolist()
    genes = pd.read_csv(folder / "features.tsv.gz", header=None, sep="\t")
    for ds in (mtx, cr):
        ids = ds.cells.fetch_all("ids")
        assert ids.dtype == object
        assert ids.astype(str).tolist() == barcodes
        features = ds.RNA.features.to_pandas()
        assert features["ids"].tolist() == genes[0].tolist()
        assert features["names"].tolist() == genes[1].tolist()
        assert all(features[c].dtype == object for c in features.columns if c != "I")
    frame = pd.DataFrame(
        mtx.RNA.counts.compute()[:20, :5], index=barcodes[:20], columns=genes[0][:5].tolist()
    )
    frame.to_csv(tmp_path / "x.csv")
    csv = DataStore(
        CSVtoZarr(tmp_path / "x.csv", tmp_path / "csv.zarr", engine=engine, show_progress=False)
        .dump()
        .path
    )
    assert csv.cells.fetch_all("ids").tolist() == barcodes[:20]
    assert pd.Index(csv.RNA.features.fetch_all("ids")).equals(pd.Index(genes[0][:5]))
