"""CLR and TF-IDF equal their frozen references: Seurat 4.3's NormalizeData and Signac/muon's TF-IDF.

The fixtures (``fixtures/modalities/``, with the scripts that made them and
their README) hold the real CITE-seq ADT counts of
``10x_v3_h5_pbmc1k_citeseq`` normalized by Debian's ``r-cran-seurat`` and
the real multiome peaks of ``10x_multiome_pbmc_subset`` by Signac's
``RunTFIDF`` method 1 (R) and muon's ``tfidf`` (Python).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytearc.ops.normalize import normalized_values

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc import DataStore

FIXTURES = Path(__file__).parent / "fixtures" / "modalities"


def _store(
    name: str,
    feature_type: str,
    tmp_path: Path,
    import_matrix: Callable[..., Path],
    open_threads: Callable[..., DataStore],
) -> tuple[DataStore, pd.DataFrame]:
    counts = pd.read_csv(FIXTURES / f"{name}_counts.csv", index_col=0)
    features = pd.DataFrame(
        {
            "ids": counts.columns.astype(str),
            "names": counts.columns.astype(str),
            "feature_types": [feature_type] * counts.shape[1],
        }
    )
    cells = pd.DataFrame({"ids": counts.index.astype(str)})
    path = import_matrix(tmp_path / f"{name}.zarr", counts.to_numpy(), cells, features)
    return open_threads(path, zarr_mode="r+"), counts


def test_adt_clr_equals_seurat(tmp_path: Path, import_matrix, open_threads) -> None:
    """ADT's CLR equals Seurat's NormalizeData(normalization.method = "CLR", margin = 2) to 1e-6."""
    ds, counts = _store("adt", "Antibody Capture", tmp_path, import_matrix, open_threads)
    norm = ds.features.normalize("ADT")
    assert norm.parameters["method"] == "clr"
    values = normalized_values(ds, norm).compute().astype(np.float64)
    seurat = pd.read_csv(FIXTURES / "adt_clr_margin2.csv", index_col=0)
    assert list(seurat.index) == list(counts.index)
    np.testing.assert_allclose(values, seurat.to_numpy(), rtol=1e-6, atol=1e-6)
    per_feature = pd.read_csv(FIXTURES / "adt_clr_margin1.csv", index_col=0).to_numpy()
    assert not np.allclose(values, per_feature, atol=1e-3), "margin 1 normalizes features instead"


@pytest.mark.parametrize("reference", ["atac_tfidf_signac_method1", "atac_tfidf_logtfidf"])
def test_atac_tfidf_equals_signac_and_muon(
    reference: str, tmp_path: Path, import_matrix, open_threads
) -> None:
    """ATAC's TF-IDF equals Signac's RunTFIDF(method = 1) and muon's tfidf(log_tfidf=True) to 1e-6."""
    ds, counts = _store("atac", "Peaks", tmp_path, import_matrix, open_threads)
    norm = ds.features.normalize("ATAC")
    assert norm.parameters["method"] == "tfidf"
    values = normalized_values(ds, norm).compute().astype(np.float64)
    expected = pd.read_csv(FIXTURES / f"{reference}.csv", index_col=0).to_numpy()
    assert expected.shape == counts.shape
    np.testing.assert_array_equal(values == 0, expected == 0)
    np.testing.assert_allclose(values, expected, rtol=1e-6, atol=0)


def test_tfidf_counts_only_the_measured_cells(tmp_path: Path, import_matrix, open_threads) -> None:
    """The IDF of a selection is that of the selected cells alone (Signac on the subset)."""
    ds, counts = _store("atac", "Peaks", tmp_path, import_matrix, open_threads)
    keep = np.arange(len(counts)) % 3 != 0
    norm = ds.features.normalize("ATAC", cell_selection=keep)
    x = counts.to_numpy()[keep].astype(np.float64)
    sums = x.sum(axis=0)
    idf = np.divide(len(x), sums, out=np.zeros_like(sums), where=sums > 0)
    library = x.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(x > 0, np.log1p(x / library * idf * 1e4), 0.0)
    np.testing.assert_allclose(norm.read("idf"), idf)
    values = normalized_values(ds, norm).compute().astype(np.float64)
    np.testing.assert_allclose(values, expected, rtol=1e-6, atol=0)
