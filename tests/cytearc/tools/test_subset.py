"""SubsetZarr: the selected cells' counts, tables, membership and types, and its refusals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from cytearc import DataStore
from cytearc.datasets import write_store
from cytearc.errors import (
    AssayNotFoundError,
    DestinationExistsError,
    DestinationOverlapError,
    OperationArgumentError,
)
from cytearc.ops.selection import publish_selection
from cytearc.testing import write_membership
from cytearc.tools import SubsetZarr

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_store(
        tmp_path_factory.mktemp("source") / "ds.zarr", n_cells=600, n_genes=600, cluster="threads"
    )
    ds = DataStore(path, zarr_mode="r+")
    ds.cells.insert("odd", np.arange(ds.cells.n_rows) % 2 == 1)
    return path


@pytest.mark.parametrize("how", ["column", "mask", "positions", "selection"])
def test_the_selected_cells_are_kept(source: Path, tmp_path: Path, how: str) -> None:
    ds = DataStore(source, zarr_mode="r+")
    odd = np.arange(ds.cells.n_rows) % 2 == 1
    cells: object = {"column": "odd", "mask": odd, "positions": np.flatnonzero(odd)}.get(how)
    if how == "selection":
        cells = str(publish_selection(ds, "odd").ref)
        assert "/artifacts/cell_selection/" in f"/{cells}"
    out = SubsetZarr(source, tmp_path / "odd.zarr", cells=cells, **THREADS).dump()  # type: ignore[arg-type]
    sub = DataStore(out)
    np.testing.assert_array_equal(sub.RNA.counts.compute(), ds.RNA.counts.compute()[odd])
    np.testing.assert_array_equal(sub.RNA.countsT.compute(), ds.RNA.counts.compute()[odd].T)
    assert sub.cells.fetch_all("ids").tolist() == ds.cells.fetch_all("ids")[odd].tolist()
    assert sub.RNA.dtype == ds.RNA.dtype
    assert sub.RNA.layout == ds.RNA.layout
    assert sub.RNA.features.fetch_all("ids").tolist() == ds.RNA.features.fetch_all("ids").tolist()
    assert sub.assay_types == ds.assay_types
    assert sub.verify().ok


def test_positions_keep_their_order(source: Path, tmp_path: Path) -> None:
    ds = DataStore(source)
    rows = np.array([5, 3, 400, 0])
    sub = DataStore(SubsetZarr(source, tmp_path / "s.zarr", cells=rows, **THREADS).dump())
    np.testing.assert_array_equal(sub.RNA.counts.compute(), ds.RNA.counts.compute()[rows])


def test_membership_is_kept_for_the_selected_rows(source: Path, tmp_path: Path) -> None:
    partial = SubsetZarr(source, tmp_path / "p.zarr", cells=np.arange(100), **THREADS).dump()
    measured = np.ones(100, dtype=bool)
    write_membership(partial, "RNA", measured)
    sub = DataStore(
        SubsetZarr(partial, tmp_path / "s.zarr", cells=np.arange(0, 100, 3), **THREADS).dump()
    )
    assert sub.cells.fetch_all("RNA_I").all()
    assert sub.cells.attributes("RNA_I")["role"] == "assay_membership"


def test_analysis_outputs_are_not_copied(source: Path, tmp_path: Path) -> None:
    ds = DataStore(source, zarr_mode="r+")
    ds.features.normalize("RNA")
    sub = DataStore(SubsetZarr(source, tmp_path / "s.zarr", cells="odd", **THREADS).dump())
    assert sub.list_artifacts() == []
    assert sub.root.attrs.get("cytearc:prepared") is None


def test_refusals_before_writing(source: Path, tmp_path: Path) -> None:
    with pytest.raises(DestinationOverlapError):
        SubsetZarr(source, source / "sub.zarr", cells="odd", **THREADS).dump()
    with pytest.raises(DestinationOverlapError):
        SubsetZarr(source, source, cells="odd", overwrite=True, **THREADS).dump()
    with pytest.raises(OperationArgumentError, match="boolean column"):
        SubsetZarr(source, tmp_path / "a.zarr", cells="cell_type", **THREADS).dump()
    with pytest.raises(OperationArgumentError, match="selects no cell"):
        SubsetZarr(source, tmp_path / "a.zarr", cells=np.zeros(600, bool), **THREADS).dump()
    with pytest.raises(OperationArgumentError, match="repeat"):
        SubsetZarr(source, tmp_path / "a.zarr", cells=[1, 1], **THREADS).dump()
    with pytest.raises(OperationArgumentError, match=r"0\.\.599"):
        SubsetZarr(source, tmp_path / "a.zarr", cells=[600], **THREADS).dump()
    with pytest.raises(AssayNotFoundError):
        SubsetZarr(source, tmp_path / "a.zarr", cells="odd", assays=["ADT"], **THREADS).dump()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(DestinationExistsError):
        SubsetZarr(source, tmp_path / "full", cells="odd", overwrite=True, **THREADS).dump()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_a_subset_keeps_the_sources_codec(tmp_path: Path, compression: str) -> None:
    """LZ4 counts are copied as LZ4 (then crc32c), zstd counts as zstd, and read back the same."""
    path = write_store(
        tmp_path / "ds.zarr", n_cells=300, n_genes=600, compression=compression, **THREADS
    )
    ds = DataStore(path)
    odd = np.arange(ds.cells.n_rows) % 2 == 1
    out = SubsetZarr(path, tmp_path / "odd.zarr", cells=odd, **THREADS).dump()
    sub = DataStore(out)
    assert type(sub.RNA.compressor) is type(ds.RNA.compressor)
    assert sub.RNA.compressor == ds.RNA.compressor
    np.testing.assert_array_equal(sub.RNA.countsT.compute(), ds.RNA.counts.compute()[odd].T)
    assert sub.verify().ok
