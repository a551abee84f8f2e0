"""Assays open on first access: a damaged assay does not keep the others of its store from opening."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cytearc import DataStore, import_10x_h5
from cytearc.errors import StoreFormatError

if TYPE_CHECKING:
    from pathlib import Path


def test_a_damaged_rna_assay_leaves_adt_usable(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    path = import_10x_h5(
        source, tmp_path / "cite.zarr", cluster="threads", show_progress=False
    ).path
    adt = DataStore(path).ADT.counts.compute()
    shutil.rmtree(path / "matrices" / "RNA" / "countsT")
    ds = DataStore(path)
    assert sorted(ds.assays) == ["ADT", "RNA"]
    np.testing.assert_array_equal(ds.ADT.counts.compute(), adt)
    with pytest.raises(StoreFormatError, match=r"RNA: countsT is missing"):
        ds.assays["RNA"]
    assert "RNA (does not open: StoreFormatError)" in repr(ds)


def test_verify_reports_an_assay_that_does_not_open(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    path = import_10x_h5(
        source, tmp_path / "cite.zarr", cluster="threads", show_progress=False
    ).path
    shutil.rmtree(path / "matrices" / "RNA" / "countSummaries")
    report = DataStore(path, cluster="threads", show_progress=False).verify()
    assert not report.ok
    damaged = [c for c in report.checks if c.status == "damaged"]
    assert [c.item for c in damaged] == ["matrices/RNA"]
    assert "repack_zarr" in damaged[0].damage.remedy  # type: ignore[union-attr]
    assert any(c.item.startswith("matrices/ADT") and c.status == "ok" for c in report.checks)
