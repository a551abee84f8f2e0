"""Workspaces: their own tables, artifacts and runs over the store's counts, and what the writers do with them."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import numpy as np
import pytest
import zarr

from cytearc import DataStore, import_10x_mtx
from cytearc.cli import main
from cytearc.datasets import write_store
from cytearc.errors import (
    DestinationExistsError,
    OperationArgumentError,
    PendingAssayError,
    ReadOnlyStoreError,
    WorkspaceNotFoundError,
)
from cytearc.tools import DataStoreMerge, SubsetZarr, repack_zarr
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a workspace ``second`` holding a column, a normalization and a run of its own."""
    path = write_store(
        tmp_path_factory.mktemp("ws") / "ds.zarr", n_cells=400, n_genes=600, cluster="threads"
    )
    ds = DataStore(path, zarr_mode="r+", **THREADS)
    second = ds.create_workspace("second")
    second.cells.insert("odd", np.arange(second.cells.n_rows) % 2 == 1)
    second.pipeline.run(n_top=150, n_comps=6, label="mine")
    return path


def test_a_workspace_has_its_own_tables_artifacts_and_runs(analysed: Path) -> None:
    """Analysing a workspace leaves the root's tables, artifacts and runs as they were; counts are shared."""
    root = DataStore(analysed, **THREADS)
    second = root.open_workspace("second")
    assert root.workspaces == ["second"]
    assert second.workspace == "second"
    assert "odd" in second.cells.columns
    assert "RNA_leiden_cluster" in second.cells.columns
    assert root.cells.columns == ["ids", "cell_type", "donor", "condition", "sample", "I"]
    assert root.pipeline.runs() == []
    assert [r.label for r in second.pipeline.runs()] == ["mine"]
    assert root.list_artifacts() == []
    assert second.list_artifacts()
    assert second.RNA.content_fingerprint == root.RNA.content_fingerprint
    assert second.dataset_fingerprint == root.dataset_fingerprint
    assert "matrices" not in zarr.open_group(analysed / "second", mode="r")
    np.testing.assert_array_equal(second.RNA.counts.compute(), root.RNA.counts.compute())
    assert root.verify().ok
    assert second.verify().ok


def test_a_new_workspace_starts_without_analysis_outputs(analysed: Path, tmp_path: Path) -> None:
    """Created from an analysed workspace, a workspace carries its import columns, not its results."""
    path = shutil.copytree(analysed, tmp_path / "ds.zarr")
    second = DataStore(path, zarr_mode="r+", workspace="second", **THREADS)
    third = second.create_workspace("third")
    assert third.cells.columns == ["ids", "cell_type", "donor", "condition", "sample", "I", "odd"]
    assert third.pipeline.runs() == []
    assert zarr.open_group(path / "third").attrs["cytearc:workspace"]["createdFrom"] == "second"
    assert DataStore(path).workspaces == ["second", "third"]


def test_workspace_refusals_write_nothing(analysed: Path, tmp_path: Path) -> None:
    path = shutil.copytree(analysed, tmp_path / "ds.zarr")
    before = tree_snapshot(path)
    with pytest.raises(WorkspaceNotFoundError, match=r"no workspace 'nope'; .* \['second'\]"):
        DataStore(path, workspace="nope")
    with pytest.raises(ReadOnlyStoreError, match="zarr_mode='r\\+'"):
        DataStore(path).create_workspace("third")
    ds = DataStore(path, zarr_mode="r+", **THREADS)
    with pytest.raises(DestinationExistsError, match="the workspace exists; pass overwrite=True"):
        ds.create_workspace("second")
    for name in ("RNA", "matrices", "bad/name", "1st"):
        with pytest.raises(OperationArgumentError):
            ds.create_workspace(name)
    assert tree_snapshot(path) == before


def test_a_killed_creation_does_not_open_and_is_replaced(analysed: Path, tmp_path: Path) -> None:
    """A workspace without its marker (written last) is refused by name; overwrite=True replaces it."""
    path = shutil.copytree(analysed, tmp_path / "ds.zarr")
    ds = DataStore(path, zarr_mode="r+", **THREADS)
    group = zarr.open_group(path / "second", mode="r+")
    del group.attrs["cytearc:workspace"]
    with pytest.raises(WorkspaceNotFoundError, match="not a complete workspace"):
        DataStore(path, workspace="second")
    with pytest.raises(DestinationExistsError, match="not a complete workspace"):
        ds.create_workspace("second")
    again = ds.create_workspace("second", overwrite=True)
    assert again.pipeline.runs() == []
    assert "odd" not in again.cells.columns


def test_subset_and_merge_read_a_workspace(analysed: Path, tmp_path: Path) -> None:
    """A subset selects by the workspace's columns; a merge of the root and a workspace records both."""
    second = DataStore(analysed, workspace="second", **THREADS)
    odd = second.cells.fetch_all("odd")
    out = SubsetZarr(analysed, tmp_path / "odd.zarr", cells="odd", workspace="second", **THREADS)
    sub = DataStore(out.dump())
    np.testing.assert_array_equal(sub.RNA.counts.compute(), second.RNA.counts.compute()[odd])
    assert sub.workspaces == []
    assert "RNA_leiden_cluster" not in sub.cells.columns
    merged = DataStoreMerge(
        [analysed, analysed], tmp_path / "m.zarr", workspaces=[None, "second"], **THREADS
    ).dump()
    ds = DataStore(merged)
    ids = ds.cells.fetch_all("ids")
    assert ids[0].startswith("ds__")
    assert ids[-1].startswith("ds_second__")
    manifest = zarr.open_group(merged).attrs["cytearc:merge"]
    assert [s["workspace"] for s in manifest["sources"]] == [None, "second"]  # type: ignore[index]
    with pytest.raises(Exception, match="2 workspaces for 3 sources"):
        DataStoreMerge([analysed] * 3, tmp_path / "x.zarr", workspaces=[None, "second"]).dump()


def test_repack_keeps_workspaces_and_data_only_carries_their_tables(
    analysed: Path, tmp_path: Path
) -> None:
    """A repack copies a workspace byte for byte; a data-only rebuild keeps its tables without results."""
    packed = repack_zarr(analysed, tmp_path / "packed.zarr", **THREADS)
    second = DataStore(packed, workspace="second", **THREADS)
    assert [r.label for r in second.pipeline.runs()] == ["mine"]
    source = tree_snapshot(analysed / "second")
    assert tree_snapshot(packed / "second") == source
    rebuilt = repack_zarr(analysed, tmp_path / "rebuilt.zarr", data_only=True, **THREADS)
    again = DataStore(rebuilt, workspace="second", **THREADS)
    assert again.cells.columns == ["ids", "cell_type", "donor", "condition", "sample", "I", "odd"]
    assert again.pipeline.runs() == []
    assert again.dataset_fingerprint == DataStore(analysed).dataset_fingerprint


def test_a_derived_assay_of_a_workspace_shares_the_matrices(analysed: Path, tmp_path: Path) -> None:
    """Its counts are matrices/{label} of the store, so the label is refused everywhere; a pending one blocks the writers."""
    path = shutil.copytree(analysed, tmp_path / "ds.zarr")
    second = DataStore(path, zarr_mode="r+", workspace="second", **THREADS)
    features = second.RNA.features
    features.insert("half", np.where(np.arange(features.n_rows) < 300, "a", "b"))
    second.add_grouped_assay(from_assay="RNA", group_key="half", assay_label="Halves")
    assert "Halves" in second.open_workspace("second").assays
    root = DataStore(path, zarr_mode="r+", **THREADS)
    assert "Halves" not in root.assays
    assert "Halves" in zarr.open_group(path / "matrices", mode="r")
    root.RNA.features.insert("half", np.where(np.arange(features.n_rows) < 300, "a", "b"))
    with pytest.raises(OperationArgumentError, match="share matrices/Halves"):
        root.add_grouped_assay(from_assay="RNA", group_key="half", assay_label="Halves")
    zarr.open_group(path / "second").create_group(
        "Pending", attributes={"cytearc:pending_assay": "add_grouped_assay"}
    )
    with pytest.raises(PendingAssayError, match=r"second/Pending: .* workspace='second'"):
        SubsetZarr(path, tmp_path / "sub.zarr", cells="I", **THREADS).dump()


def test_a_store_with_workspaces_is_replaced_only_when_cytearc_wrote_it(
    analysed: Path, shared_data: Path, tmp_path: Path
) -> None:
    """overwrite=True replaces workspaces of tables and runs, never one with prepared assays or foreign keys."""
    mtx = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix"
    prepared = shutil.copytree(analysed, tmp_path / "prepared.zarr")
    with pytest.raises(DestinationExistsError, match="workspace 'second' holds prepared assays"):
        import_10x_mtx(mtx, prepared, overwrite=True, **THREADS)
    path = write_store(tmp_path / "ds.zarr", n_cells=100, n_genes=600, cluster="threads")
    DataStore(path, zarr_mode="r+", **THREADS).create_workspace("plain")
    (path / "plain" / "notes.txt").write_text("mine")
    with pytest.raises(DestinationExistsError, match=r"plain/notes\.txt"):
        import_10x_mtx(mtx, path, overwrite=True, **THREADS)
    (path / "plain" / "notes.txt").unlink()
    assert DataStore(import_10x_mtx(mtx, path, overwrite=True, **THREADS).path).workspaces == []


def test_cli_workspace_and_info(
    analysed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shutil.copytree(analysed, tmp_path / "ds.zarr")
    assert main(["workspace", str(path), "third", "--from", "second", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["workspaces"] == ["second", "third"]
    assert main(["info", str(path), "--workspace", "third", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workspace"] == "third"
    assert "odd" in doc["cellColumns"]
    assert main(["info", str(path), "--workspace", "nope"]) == 1
    assert "WorkspaceNotFoundError" in capsys.readouterr().err
