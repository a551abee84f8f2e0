"""LoomToZarr on the real loom file of the shared data, checked against h5py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest

from cytearc import DataStore, import_data, import_loom
from cytearc.errors import SourceFormatError
from cytearc.io.detect import detect_importer
from cytearc.io.loom import LoomToZarr

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}


def test_the_sympathetic_loom_imports_with_its_counts(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "loom_furlan2016_sympathetic" / "sympathetic.loom"
    with h5py.File(path, "r") as f:
        expected = f["matrix"][()].T
        genes = f["row_attrs/Gene"].asstr()[()]
        cells = f["col_attrs/Cell_id"].asstr()[()]
        clusters = f["col_attrs/Cell_cluster"].asstr()[()]
    ds = DataStore(import_loom(path, tmp_path / "s.zarr", **THREADS).path)
    np.testing.assert_array_equal(ds.RNA.counts.compute(), expected)
    assert ds.RNA.dtype == np.uint16 or ds.RNA.dtype.kind == "u"
    assert ds.cells.fetch_all("ids").tolist() == cells.tolist()
    assert ds.cells.fetch_all("Cell_cluster").tolist() == clusters.tolist()
    names = ds.RNA.features.fetch_all("names").tolist()
    assert names == genes.tolist()
    assert len(set(ds.RNA.features.fetch_all("ids"))) == len(genes)
    assert detect_importer(path) is LoomToZarr
    again = DataStore(import_data(path, tmp_path / "again.zarr", **THREADS).path)
    assert again.dataset_fingerprint == ds.dataset_fingerprint


def test_a_file_without_a_matrix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.loom"
    with h5py.File(path, "w") as f:
        f.create_dataset("row_attrs/Gene", data=np.array([b"A"]))
    with pytest.raises(SourceFormatError, match="no 2-D dataset /matrix"):
        import_loom(path, tmp_path / "s.zarr", **THREADS)
    assert not (tmp_path / "s.zarr").exists()


def test_attributes_of_the_wrong_length_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.loom"
    with h5py.File(path, "w") as f:
        f.create_dataset("matrix", data=np.ones((2, 3), dtype=np.int32))
        f.create_dataset("col_attrs/CellID", data=np.array([b"a", b"b"]))
    with pytest.raises(SourceFormatError, match="2 values for 3 rows"):
        import_loom(path, tmp_path / "s.zarr", **THREADS)
