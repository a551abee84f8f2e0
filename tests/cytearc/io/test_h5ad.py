"""H5AD reader: X or a layer (dense, CSR, CSC) in bands, obs and var decoded without anndata."""

from __future__ import annotations

import warnings
from pathlib import Path

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cytearc.errors import RepeatedEntryError, SourceFormatError
from cytearc.io.h5ad import H5adSource
from cytearc.io.sources import CountSource
from cytearc.testing import assemble_bands

DATA = Path(__file__).parents[3].parent / "shared" / "data"
BAND_SIZES = (1, 7, 100, None)
REAL_FILES = [
    "h5ad_wu2020_tcells_200/wu2020_200.h5ad",
    "h5ad_hagai2018_lps_toy/hagai2018_lps_toy.h5ad",
    "10x_multiome_pbmc_subset/test_rna.h5ad",
]


def read_reference(path: Path) -> ad.AnnData:
    """The file read by anndata; test_rna.h5ad predates encoding metadata, which anndata warns about."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.OldFormatWarning)
        return ad.read_h5ad(path)


def assert_tables_match(source: H5adSource, adata: ad.AnnData) -> None:
    """The cell and feature tables equal obs and var: ids, then every column with its dtype."""
    cells, features = source.cells, source.features
    assert cells["ids"].tolist() == adata.obs_names.tolist()
    assert list(cells.columns) == ["ids", *adata.obs.columns]
    for column in adata.obs.columns:
        pd.testing.assert_series_equal(
            cells[column], adata.obs[column].reset_index(drop=True), check_names=False
        )
    var = adata.var
    assert features["ids"].tolist() == adata.var_names.tolist()
    names = var.get("gene_symbols", adata.var_names)
    assert features["names"].tolist() == list(names)
    types = var["feature_types"].astype(str) if "feature_types" in var else None
    expected_types = ["Gene Expression"] * adata.n_vars if types is None else types.tolist()
    assert features["feature_types"].tolist() == expected_types
    rest = [c for c in var.columns if c not in {"gene_symbols", "feature_types"}]
    assert list(features.columns) == ["ids", "names", "feature_types", *rest]
    for column in rest:
        pd.testing.assert_series_equal(
            features[column], var[column].reset_index(drop=True), check_names=False
        )


def example(n_cells: int = 60, n_genes: int = 9, *, seed: int = 0) -> ad.AnnData:
    """Small counts with every kind of obs and var column anndata writes."""
    rng = np.random.default_rng(seed)
    counts = (rng.poisson(2.0, (n_cells, n_genes)) * (rng.random((n_cells, n_genes)) < 0.4)).astype(
        np.float32
    )
    counts[n_cells // 2] = 0
    groups = rng.choice(["T", "B", "NK"], n_cells).astype(object)
    groups[3] = None
    obs = pd.DataFrame(
        {
            "group": pd.Categorical(groups),
            "donor": pd.Categorical(rng.choice(["d1", "d2"], n_cells), ordered=True),
            "n_umis": pd.array(rng.integers(0, 9, n_cells), dtype="Int64"),
            "doublet": pd.array(rng.random(n_cells) < 0.5, dtype="boolean"),
            "score": rng.random(n_cells),
            "batch": rng.integers(0, 3, n_cells),
            "note": [f"cell {i}" for i in range(n_cells)],
        },
        index=[f"BC{i:03d}-1" for i in range(n_cells)],
    )
    obs.loc[obs.index[2], "n_umis"] = pd.NA
    obs.loc[obs.index[4], "doublet"] = pd.NA
    var = pd.DataFrame(
        {
            "gene_symbols": [f"GENE{j}" for j in range(n_genes)],
            "feature_types": pd.Categorical(
                ["Gene Expression"] * (n_genes - 2) + ["Antibody Capture"] * 2
            ),
            "highly_variable": rng.random(n_genes) < 0.5,
        },
        index=[f"ENSG{j:05d}" for j in range(n_genes)],
    )
    return ad.AnnData(X=sp.csr_matrix(counts), obs=obs, var=var)


@pytest.mark.parametrize("file", REAL_FILES)
def test_real_files_match_anndata(file: str) -> None:
    """Bands of 1, 7, 100 and all cells equal anndata's X; obs and var columns equal anndata's."""
    path = DATA / file
    adata = read_reference(path)
    with H5adSource(path) as source:
        assert isinstance(source, CountSource)
        assert source.shape == adata.shape
        assert source.dtype == np.float32
        for rows in BAND_SIZES:
            band = assemble_bands(source, rows)
            assert band.dtype == np.float32
            assert (band != adata.X).nnz == 0
        assert_tables_match(source, adata)


def test_wu2020_keeps_categorical_obs_with_missing_values() -> None:
    """Wu 2020 obs: categoricals, codes of -1 as missing, and the file's literal 'nan' categories kept."""
    with H5adSource(DATA / "h5ad_wu2020_tcells_200" / "wu2020_200.h5ad") as source:
        cells = source.cells
        assert isinstance(cells["patient"].dtype, pd.CategoricalDtype)
        assert cells["source"].value_counts().to_dict() == {"Tumor": 95, "NAT": 85, "Blood": 20}
        assert cells["patient"].nunique() == 14
        assert cells["IR_VJ_1_d_call"].isna().sum() == 74
        assert cells["extra_chains"].isna().all()
        assert len(cells["extra_chains"].cat.categories) == 0
        assert "nan" in cells["IR_VJ_1_locus"].cat.categories
        assert cells["IR_VJ_1_duplicate_count"].isna().sum() == 74
        assert source.features["gene_ids"].iloc[0] == "GeneID:100505874"


def test_old_categories_layout_is_read() -> None:
    """test_rna.h5ad's pre-0.7 var (codes with a reference to __categories) reads as categoricals."""
    with H5adSource(DATA / "10x_multiome_pbmc_subset" / "test_rna.h5ad") as source:
        features = source.features
        assert list(features.columns) == [
            "ids", "names", "feature_types", "gene_ids", "genome", "interval"
        ]  # fmt: skip
        assert features["genome"].dtype == pd.CategoricalDtype(["GRCh38"])
        assert set(features["feature_types"]) == {"Gene Expression"}
        assert features["interval"].iloc[0] == "chr1:100345021-100352949"


@pytest.mark.parametrize("layout", ["csr", "csc", "dense"])
def test_every_matrix_layout_reads_the_same(tmp_path: Path, layout: str) -> None:
    """CSR, CSC (bucketed) and dense X give the same canonical bands at every band size."""
    adata = example()
    expected = sp.csr_matrix(adata.X)
    if layout == "csc":
        adata.X = sp.csc_matrix(expected)
    elif layout == "dense":
        adata.X = expected.toarray()
    path = tmp_path / f"{layout}.h5ad"
    adata.write_h5ad(path)
    with H5adSource(path, band_rows=8) as source:
        assert source.dtype == np.float32
        for rows in BAND_SIZES:
            band = assemble_bands(source, rows)
            assert (band != expected).nnz == 0
        assert source.read_band(30, 31).nnz == 0
        assert_tables_match(source, ad.read_h5ad(path))


def test_nullable_and_categorical_columns_keep_their_dtypes(tmp_path: Path) -> None:
    """Categoricals (ordered too) stay Categorical, nullable columns keep pd.NA, strings stay strings."""
    path = tmp_path / "tables.h5ad"
    example().write_h5ad(path)
    with H5adSource(path) as source:
        cells = source.cells
        assert cells["group"].isna().tolist()[3]
        assert cells["donor"].cat.ordered
        assert cells["n_umis"].dtype == "Int64"
        assert cells["n_umis"].isna().sum() == 1
        assert cells["doublet"].dtype == "boolean"
        assert cells["doublet"].isna().sum() == 1
        assert cells["note"].iloc[7] == "cell 7"
        features = source.features
        assert features["names"].tolist()[:2] == ["GENE0", "GENE1"]
        assert features["feature_types"].tolist()[-2:] == ["Antibody Capture"] * 2
        assert features["highly_variable"].dtype == bool


def test_layer_is_read_instead_of_x(tmp_path: Path) -> None:
    """layer= reads that layer (here integer, so int64 bands); an unknown layer names the others."""
    adata = example()
    raw = sp.csr_matrix(adata.X).astype(np.int32)
    adata.layers["counts"] = raw
    adata.layers["dense"] = raw.toarray().astype(np.uint16)
    adata.X = sp.csr_matrix(adata.X) / 2
    path = tmp_path / "layers.h5ad"
    adata.write_h5ad(path)
    for layer, dtype in [("counts", np.int32), ("dense", np.uint16)]:
        with H5adSource(path, layer=layer) as source:
            assert source.dtype == dtype
            band = assemble_bands(source, 7)
            assert band.dtype == np.int64
            assert (band != raw).nnz == 0
    with pytest.raises(SourceFormatError, match=r"no layer 'spliced'.*\['counts', 'dense'\]"):
        H5adSource(path, layer="spliced")


def test_unsupported_encodings_name_the_key(tmp_path: Path) -> None:
    """A table column or a matrix in an encoding the reader lacks raises naming its key."""
    path = tmp_path / "odd.h5ad"
    example().write_h5ad(path)
    with h5py.File(path, "r+") as f:
        odd = f["obs"].create_group("ragged")
        odd.attrs["encoding-type"] = "awkward-array"
        f["obs"].attrs["column-order"] = [*f["obs"].attrs["column-order"], "ragged"]
    with pytest.raises(SourceFormatError, match=r"/obs/ragged: the encoding 'awkward-array'"):
        H5adSource(path)
    example().write_h5ad(path)
    with h5py.File(path, "r+") as f:
        f["X"].attrs["encoding-type"] = "coo_matrix"
    with pytest.raises(SourceFormatError, match=r"/X has the encoding 'coo_matrix'"):
        H5adSource(path)


def test_legacy_h5sparse_csc_is_bucketed(tmp_path: Path) -> None:
    """An old X marked only by h5sparse_format='csc' reads like an encoded CSC matrix."""
    adata = example(n_cells=30)
    expected = sp.csr_matrix(adata.X)
    adata.X = sp.csc_matrix(expected)
    path = tmp_path / "old.h5ad"
    adata.write_h5ad(path)
    with h5py.File(path, "r+") as f:
        for key in ("encoding-type", "encoding-version", "shape"):
            del f["X"].attrs[key]
        f["X"].attrs["h5sparse_format"] = "csc"
        f["X"].attrs["h5sparse_shape"] = expected.shape
    with H5adSource(path, band_rows=4) as source:
        assert (assemble_bands(source, 3) != expected).nnz == 0


def test_a_csc_column_that_repeats_a_cell_is_refused(tmp_path: Path) -> None:
    """A CSC column that stores one cell twice is refused as damage, naming the cell and the feature."""
    adata = example(n_cells=6, n_genes=2)
    adata.X = sp.csc_matrix(np.zeros((6, 2), dtype=np.float64))
    path = tmp_path / "dups.h5ad"
    adata.write_h5ad(path)
    with h5py.File(path, "r+") as f:
        x = f["X"]
        for key, values in {
            "data": np.array([0.1, 0.2, 0.3, 5.0]),
            "indices": np.array([1, 2, 1, 3], dtype=np.int32),
            "indptr": np.array([0, 3, 4], dtype=np.int32),
        }.items():
            del x[key]
            x[key] = values
    cell, gene = adata.obs_names[1], adata.var_names[0]
    with H5adSource(path, band_rows=2) as source, pytest.raises(RepeatedEntryError) as info:
        assemble_bands(source, None)
    assert f"/X: the entry of cell 1 ('{cell}') and feature 0 ('{gene}') is stored 2 times" in str(
        info.value
    )


def test_tables_must_match_the_matrix(tmp_path: Path) -> None:
    """X with a shape that obs and var do not have raises naming both sizes."""
    path = tmp_path / "shape.h5ad"
    example(n_cells=10).write_h5ad(path)
    with h5py.File(path, "r+") as f:
        f["X"].attrs["shape"] = np.array([11, 9])
    with pytest.raises(SourceFormatError, match=r"11 x 9 but obs has 10 rows and var 9"):
        H5adSource(path)


def test_close_removes_buckets_and_file(tmp_path: Path) -> None:
    """Closing removes the CSC buckets and closes the file; reading afterwards raises."""
    adata = example()
    adata.X = sp.csc_matrix(adata.X)
    path = tmp_path / "close.h5ad"
    adata.write_h5ad(path)
    with H5adSource(path, band_rows=16) as source:
        source.read_band(0, 3)
        assert source._buckets is not None
        directory = source._buckets.directory
        assert directory.is_dir()
    assert not directory.exists()
    with pytest.raises(ValueError, match="closed"):
        source.read_band(0, 1)
