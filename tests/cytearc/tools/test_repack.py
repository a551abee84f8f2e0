"""repack_zarr: a profile change keeps every identity; --data-only repairs damaged count arrays."""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import numpy as np
import pytest
import zarr

from cytearc import DataStore
from cytearc.artifacts import list_artifacts
from cytearc.datasets import write_store
from cytearc.errors import (
    DestinationOverlapError,
    OperationArgumentError,
    PendingAssayError,
    StoreFormatError,
)
from cytearc.testing import write_membership
from cytearc.tools import PROFILES, repack_zarr

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_store(
        tmp_path_factory.mktemp("source") / "ds.zarr", n_cells=600, n_genes=600, cluster="threads"
    )
    write_membership(path, "RNA", np.ones(600, dtype=bool))
    ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    ds.features.normalize("RNA")
    return path


def _copy(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.zarr"
    shutil.copytree(source, copy)
    return copy


def test_a_profile_change_keeps_every_identity_but_the_layout(source: Path, tmp_path: Path) -> None:
    out = repack_zarr(source, tmp_path / "s3.zarr", profile="object_store", **THREADS)
    before, after = DataStore(source), DataStore(out)
    assert after.dataset_fingerprint == before.dataset_fingerprint
    assert after.RNA.content_fingerprint == before.RNA.content_fingerprint
    assert after.RNA.layout == PROFILES["object_store"].layout
    assert after.RNA.layout != before.RNA.layout
    np.testing.assert_array_equal(after.RNA.countsT.compute(), before.RNA.countsT.compute())
    assert [a.ref for a in after.list_artifacts()] == [a.ref for a in before.list_artifacts()]
    assert after.cells.attributes("RNA_I")["role"] == "assay_membership"
    assert after.root.attrs.asdict() == before.root.attrs.asdict()
    assert after.verify().ok


def test_data_only_repairs_a_deleted_counts_t(source: Path, tmp_path: Path) -> None:
    damaged = _copy(source, tmp_path)
    shutil.rmtree(damaged / "matrices" / "RNA" / "countsT")
    with pytest.raises(StoreFormatError, match=r"countsT is missing.*repack_zarr .* --data-only"):
        DataStore(damaged).assays["RNA"]
    with pytest.raises(StoreFormatError, match="countsT is missing"):
        repack_zarr(damaged, tmp_path / "no.zarr", **THREADS)
    fixed = repack_zarr(damaged, tmp_path / "fixed.zarr", data_only=True, **THREADS)
    repaired, original = DataStore(fixed), DataStore(source)
    assert repaired.dataset_fingerprint == original.dataset_fingerprint
    np.testing.assert_array_equal(repaired.RNA.countsT.compute(), original.RNA.countsT.compute())
    assert list_artifacts(repaired.root, scopes=["", "RNA"]) == []
    assert repaired.cells.fetch_all("RNA_I").all()
    assert repaired.verify().ok


@pytest.mark.parametrize("damage", ["countSummaries", "state"])
def test_data_only_repairs_summaries_and_drops_a_retired_state_group(
    source: Path, tmp_path: Path, damage: str
) -> None:
    damaged = _copy(source, tmp_path)
    if damage == "countSummaries":
        shutil.rmtree(damaged / "matrices" / "RNA" / "countSummaries")
    else:
        zarr.open_group(damaged / "RNA", mode="r+").create_group("state")
    with pytest.raises(StoreFormatError):
        DataStore(damaged).assays["RNA"]
    fixed = DataStore(repack_zarr(damaged, tmp_path / "fixed.zarr", data_only=True, **THREADS))
    assert fixed.dataset_fingerprint == DataStore(source).dataset_fingerprint


def test_refusals_before_writing(source: Path, tmp_path: Path) -> None:
    with pytest.raises(DestinationOverlapError):
        repack_zarr(source, source / "inner.zarr", **THREADS)
    with pytest.raises(DestinationOverlapError):
        repack_zarr(source, source, data_only=True, overwrite=True, **THREADS)
    with pytest.raises(OperationArgumentError, match="fast_local"):
        repack_zarr(source, tmp_path / "x.zarr", profile="fastest", **THREADS)
    pending = _copy(source, tmp_path)
    zarr.open_group(pending, mode="r+").create_group(
        "G", attributes={"cytearc:pending_assay": "add_grouped_assay"}
    )
    with pytest.raises(PendingAssayError):
        repack_zarr(pending, tmp_path / "p.zarr", **THREADS)
    with pytest.raises(StoreFormatError, match="pending derived assay"):
        repack_zarr(pending, tmp_path / "p.zarr", data_only=True, **THREADS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.zarr"]


def test_python_m_entry_point(source: Path, tmp_path: Path) -> None:
    damaged = _copy(source, tmp_path)
    shutil.rmtree(damaged / "matrices" / "RNA" / "countsT")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cytearc.tools.repack_zarr",
            str(damaged),
            str(tmp_path / "out.zarr"),
            "--profile",
            "fast_local",
            "--data-only",
            "--cluster",
            "threads",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr
    assert (
        DataStore(tmp_path / "out.zarr").dataset_fingerprint
        == DataStore(source).dataset_fingerprint
    )
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "cytearc.tools.repack_zarr",
            str(damaged),
            str(tmp_path / "out.zarr"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert again.returncode == 1
    assert again.stderr.startswith("error: DestinationExistsError")
