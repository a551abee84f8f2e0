"""SeuratToZarr: v4 and v5 objects made by Debian's R (fixtures/seurat/make_fixtures.R) import with the counts R reports."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cytearc import DataStore, import_data, import_seurat
from cytearc.errors import DamagedSourceError, SourceFormatError
from cytearc.io import SeuratToZarr
from cytearc.io.detect import detect_importer

FIXTURES = Path(__file__).parent / "fixtures" / "seurat"
THREADS = {"cluster": "threads", "show_progress": False}


def _r_counts(name: str) -> pd.DataFrame:
    """An assay's counts as R wrote them: cells x features, with R's names."""
    return pd.read_csv(FIXTURES / name, index_col=0)


def _store(version: str, tmp_path: Path, **options: object) -> DataStore:
    result = import_seurat(
        FIXTURES / f"{version}.rds", tmp_path / f"{version}.zarr", **THREADS, **options
    )  # type: ignore[arg-type]
    return DataStore(result.path, **THREADS)


@pytest.mark.parametrize("version", ["v4", "v5"])
def test_counts_and_names_are_those_r_reports(version: str, tmp_path: Path) -> None:
    ds = _store(version, tmp_path)
    rna = _r_counts(f"{version}_RNA_counts.csv")
    assert ds.cells.fetch_all("ids").tolist() == rna.index.tolist()
    assert ds.RNA.features.fetch_all("ids").tolist() == rna.columns.tolist()
    np.testing.assert_array_equal(ds.RNA.counts.compute(), rna.to_numpy())
    assert ds.RNA.dtype == np.uint8  # R's doubles, stored in the narrowest type that holds them
    assert ds.assay_types == {"ADT": "ADT", "RNA": "RNA"}
    assert ds.verify().ok


def test_v4_cell_metadata_keeps_its_kinds(tmp_path: Path) -> None:
    ds = _store("v4", tmp_path)
    meta = pd.read_csv(FIXTURES / "meta_data.csv", index_col=0)
    sample = ds.cells.fetch_series("sample")
    assert sample.cat.categories.tolist() == ["s3", "s1", "s2"]  # R's level order
    assert sample.astype(str).tolist() == meta["sample"].tolist()
    np.testing.assert_array_equal(ds.cells.fetch_all("score"), meta["score"].to_numpy())
    assert ds.cells.fetch_all("doublet").tolist() == meta["doublet"].tolist()
    assert ds.cells.fetch_all("donor").tolist() == meta["donor"].tolist()
    np.testing.assert_array_equal(ds.cells.fetch_all("nCount_RNA"), meta["nCount_RNA"].to_numpy())
    adt = _r_counts("v4_ADT_counts.csv")
    np.testing.assert_array_equal(ds.ADT.counts.compute(), adt.to_numpy())
    assert "ADT_I" not in ds.cells.columns  # every cell measured


def test_v5_partial_assay_gets_membership(tmp_path: Path) -> None:
    """ADT's one counts layer holds 100 of the 150 cells: membership marks them; the others count zero."""
    ds = _store("v5", tmp_path)
    adt = _r_counts("v5_ADT_counts.csv")
    ids = ds.cells.fetch_all("ids")
    measured = ds.cells.fetch_all("ADT_I")
    assert measured.tolist() == np.isin(ids, adt.index).tolist()
    assert int(measured.sum()) == 100
    counts = ds.ADT.counts.compute()
    np.testing.assert_array_equal(counts[measured], adt.loc[ids[measured]].to_numpy())
    assert not counts[~measured].any()
    assert ds.cells.attributes("ADT_I")["role"] == "assay_membership"
    assert "RNA_I" not in ds.cells.columns


def test_assay_layers_choose_the_counts_and_membership_follows(tmp_path: Path) -> None:
    """With only counts.1 selected, a cell held only by counts.2 is not a member of RNA."""
    ds = _store("v5", tmp_path, assays=["RNA"], assay_layers={"RNA": ["counts.1"]})
    assert list(ds.assays) == ["RNA"]
    rna = _r_counts("v5_RNA_counts.csv")
    measured = ds.cells.fetch_all("RNA_I")
    assert int(measured.sum()) == 70
    np.testing.assert_array_equal(ds.RNA.counts.compute()[:70], rna.to_numpy()[:70])


@pytest.mark.parametrize(
    ("file", "options", "match"),
    [
        ("v5.rds", {"assay_layers": {"RNA": ["counts.1", "counts.1"]}}, "more than once"),
        ("v5.rds", {"assay_layers": {"RNA": ["spliced"]}}, r"layers \['spliced'\]: the assay has"),
        ("v4.rds", {"assay_layers": {"RNA": ["scale.data"]}}, "one of \\['counts', 'data'\\]"),
        ("v4.rds", {"assays": ["SCT"]}, r"the object has the assays \['RNA', 'ADT'\]"),
        ("v4.rds", {"assay_layers": {"HTO": ["counts"]}}, "names assays \\['HTO'\\]"),
        ("reserved.rds", {}, r"meta\.data has the columns \['ADT_I'\]"),
    ],
)
def test_refusals_write_nothing(
    file: str, options: dict[str, object], match: str, tmp_path: Path
) -> None:
    with pytest.raises(SourceFormatError, match=match):
        SeuratToZarr(FIXTURES / file, tmp_path / "out.zarr", **THREADS, **options)  # type: ignore[arg-type]
    assert not (tmp_path / "out.zarr").exists()


def test_other_and_damaged_rds_files_are_named(tmp_path: Path) -> None:
    import rdata  # noqa: PLC0415

    plain = tmp_path / "list.rds"
    rdata.write_rds(plain, {"a": np.arange(3)})
    with pytest.raises(SourceFormatError, match="expected a Seurat object"):
        import_seurat(plain, tmp_path / "a.zarr", **THREADS)
    truncated = tmp_path / "truncated.rds"
    with gzip.open(FIXTURES / "v4.rds") as f:
        data = f.read()
    with gzip.open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(DamagedSourceError, match="truncated, damaged or not an RDS file"):
        import_seurat(truncated, tmp_path / "b.zarr", **THREADS)
    assert not (tmp_path / "a.zarr").exists()
    assert not (tmp_path / "b.zarr").exists()


def test_import_data_detects_rds(tmp_path: Path) -> None:
    source = shutil.copy(FIXTURES / "v4.rds", tmp_path / "object.RDS")
    assert detect_importer(source) is SeuratToZarr
    result = import_data(source, tmp_path / "ds.zarr", assays=["ADT"], **THREADS)
    assert list(result.shapes) == ["ADT"]
