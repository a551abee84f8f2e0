"""DataStoreMerge on real 10x files: counts against a scipy outer join, membership, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from cytearc import DataStore, import_10x_h5
from cytearc.errors import (
    DestinationOverlapError,
    MergePlanError,
    MergeResumeError,
    PendingAssayError,
)
from cytearc.testing import write_membership
from cytearc.tools import DataStoreMerge, SubsetZarr
from cytearc.tools.datastore_merge import MANIFEST_ATTRIBUTE

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}
SMALL = {**THREADS, "mem_budget": "256MiB"}
"""Bands of 256 cells for the 33k features of the CITE-seq file: several bands to kill between."""


def _h5(path: Path) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """Cells x features, feature ids and types, barcodes: read with h5py and scipy alone."""
    with h5py.File(path, "r") as f:
        m = f["matrix"]
        n_features, n_cells = m["shape"][:]
        x = sp.csc_matrix(
            (m["data"][:], m["indices"][:], m["indptr"][:]), shape=(n_features, n_cells)
        )
        ids = m["features/id"][:].astype(str)
        types = m["features/feature_type"][:].astype(str)
        barcodes = m["barcodes"][:].astype(str)
    return x.T.tocsr(), ids, types, barcodes


@pytest.fixture(scope="module")
def sources(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sources")
    files = {
        "pbmc": shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5",
        "cite": shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5",
    }
    out = {
        name: import_10x_h5(path, folder / f"{name}.zarr", **THREADS).path
        for name, path in files.items()
    }
    out.update({f"{name}.h5": path for name, path in files.items()})
    return out


@pytest.fixture(scope="module")
def merged(sources: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    destination = tmp_path_factory.mktemp("merged") / "merged.zarr"
    return DataStoreMerge([sources["pbmc"], sources["cite"]], destination, **SMALL).dump()


def _outer_join(parts: list[tuple[sp.csr_matrix, np.ndarray]]) -> tuple[np.ndarray, list[str]]:
    union = list(dict.fromkeys(i for _, ids in parts for i in ids))
    column = {f: j for j, f in enumerate(union)}
    blocks = []
    for x, ids in parts:
        mapping = sp.csr_matrix(
            (np.ones(len(ids)), ([*range(len(ids))], [column[i] for i in ids])),
            shape=(len(ids), len(union)),
        )
        blocks.append(x @ mapping)
    return sp.vstack(blocks).toarray(), union


def test_merged_counts_equal_a_scipy_outer_join(sources: dict[str, Path], merged: Path) -> None:
    """RNA: genes joined by id in order of first appearance; ADT: zeros for the cells of the file without it."""
    pbmc, pbmc_ids, _, pbmc_cells = _h5(sources["pbmc.h5"])
    cite, cite_ids, cite_types, cite_cells = _h5(sources["cite.h5"])
    rna = cite_types == "Gene Expression"
    expected, union = _outer_join([(pbmc, pbmc_ids), (cite[:, rna], cite_ids[rna])])
    ds = DataStore(merged)
    np.testing.assert_array_equal(ds.RNA.counts.compute(), expected)
    np.testing.assert_array_equal(ds.RNA.countsT.compute(), expected.T)
    assert ds.RNA.features.fetch_all("ids").tolist() == union
    adt = cite[:, ~rna].toarray()
    np.testing.assert_array_equal(
        ds.ADT.counts.compute(),
        np.vstack([np.zeros((len(pbmc_cells), adt.shape[1]), adt.dtype), adt]),
    )
    ids = ds.cells.fetch_all("ids").tolist()
    assert ids == [f"pbmc__{b}" for b in pbmc_cells] + [f"cite__{b}" for b in cite_cells]
    assert ds.assay_types == {"ADT": "ADT", "RNA": "RNA"}
    assert ds.RNA.dtype == np.result_type(
        DataStore(sources["pbmc"]).RNA.dtype, DataStore(sources["cite"]).RNA.dtype
    )
    assert ds.verify().ok


def test_membership_of_merged_assays(sources: dict[str, Path], merged: Path) -> None:
    """False where a source lacks the assay, True where it has no column; the role attributes are on the column."""
    ds = DataStore(merged)
    n_pbmc = DataStore(sources["pbmc"]).cells.n_rows
    adt = ds.cells.fetch_all("ADT_I")
    assert not adt[:n_pbmc].any()
    assert adt[n_pbmc:].all()
    assert ds.cells.fetch_all("RNA_I").all()
    attributes = ds.cells.attributes("ADT_I")
    assert {k: attributes[k] for k in ("role", "assay")} == {
        "role": "assay_membership",
        "assay": "ADT",
    }
    manifest = ds.root.attrs[MANIFEST_ATTRIBUTE]
    assert [s["membership"] for s in manifest["sources"]] == [
        {"RNA": "all", "ADT": "missing"},
        {"RNA": "all", "ADT": "all"},
    ]


def test_a_merge_keeps_partial_membership(
    sources: dict[str, Path], merged: Path, tmp_path: Path
) -> None:
    """A source's own membership column is merged into the same column, with its values."""
    again = DataStoreMerge(
        [merged, sources["pbmc"]], tmp_path / "again.zarr", names=["m", "p"], **THREADS
    ).dump()
    ds, first = DataStore(again), DataStore(merged)
    n = first.cells.n_rows
    adt = ds.cells.fetch_all("ADT_I")
    np.testing.assert_array_equal(adt[:n], first.cells.fetch_all("ADT_I"))
    assert not adt[n:].any()
    assert "orig_ADT_I" not in ds.cells.columns
    assert ds.root.attrs[MANIFEST_ATTRIBUTE]["sources"][0]["membership"]["ADT"].startswith(
        "sha256:"
    )


def test_counts_outside_the_membership_are_refused(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    partial = tmp_path / "partial.zarr"
    SubsetZarr(sources["cite"], partial, cells=np.arange(100), **THREADS).dump()
    write_membership(partial, "ADT", np.arange(100) % 4 != 0)
    with pytest.raises(MergePlanError, match="outside its membership column"):
        DataStoreMerge([sources["pbmc"], partial], tmp_path / "m.zarr", **THREADS).dump()
    assert not (tmp_path / "m.zarr").exists()


def test_subset_then_merge_of_the_halves_gives_the_original_counts(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    ds = DataStore(sources["cite"])
    half = ds.cells.n_rows // 2
    first = SubsetZarr(
        sources["cite"], tmp_path / "a.zarr", cells=np.arange(half), **THREADS
    ).dump()
    mask = np.arange(ds.cells.n_rows) >= half
    second = SubsetZarr(sources["cite"], tmp_path / "b.zarr", cells=mask, **THREADS).dump()
    again = DataStoreMerge([first, second], tmp_path / "ab.zarr", **THREADS).dump()
    back = DataStore(again)
    for name in ("RNA", "ADT"):
        assert back.assays[name].content_fingerprint == ds.assays[name].content_fingerprint
        assert back.assays[name].dtype == ds.assays[name].dtype
    assert back.cells.fetch_all("ids").tolist() == [
        f"{p}__{i}"
        for p, i in zip(
            ["a"] * half + ["b"] * (ds.cells.n_rows - half), ds.cells.fetch_all("ids"), strict=True
        )
    ]


_CHILD = """
import sys
from cytearc.tools import DataStoreMerge
DataStoreMerge(sys.argv[1:3], sys.argv[3], cluster="threads", mem_budget="256MiB", show_progress=False).dump()
"""


def _written(destination: Path) -> list[list[int]]:
    try:
        doc = json.loads((destination / "zarr.json").read_text())
    except (OSError, ValueError):
        return []
    return doc["attributes"].get(MANIFEST_ATTRIBUTE, {}).get("written", {}).get("RNA", [])


def _kill_after_bands(sources: dict[str, Path], destination: Path, bands: int) -> list[list[int]]:
    log = destination.with_suffix(".log")
    with log.open("wb") as stderr:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _CHILD,
                str(sources["pbmc"]),
                str(sources["cite"]),
                str(destination),
            ],
            stderr=stderr,
        )
        deadline = time.monotonic() + 300
        while (
            len(_written(destination)) < bands
            and child.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL, log.read_text()
    log.unlink()
    return _written(destination)


def test_a_killed_merge_resumes_to_the_same_store(
    sources: dict[str, Path], merged: Path, tmp_path: Path
) -> None:
    """SIGKILL after 1 band, then the resumed merge again after 3; the last rerun keeps the written shards and gives the fingerprints of an uninterrupted merge."""
    destination = tmp_path / "merged.zarr"
    assert len(_kill_after_bands(sources, destination, 1)) >= 1
    shard = destination / "matrices" / "RNA" / "counts" / "c" / "0" / "0"
    before = shard.stat().st_mtime_ns
    assert len(_kill_after_bands(sources, destination, 3)) >= 3
    with pytest.raises(Exception):  # noqa: B017, PT011 (any refusal: the store is incomplete)
        DataStore(destination)
    DataStoreMerge([sources["pbmc"], sources["cite"]], destination, **SMALL).dump()
    assert shard.stat().st_mtime_ns == before, "a completed shard was written again"
    resumed, complete = DataStore(destination), DataStore(merged)
    assert resumed.dataset_fingerprint == complete.dataset_fingerprint
    for name in ("RNA", "ADT"):
        assert resumed.assays[name].content_fingerprint == complete.assays[name].content_fingerprint
    assert resumed.verify().ok


def test_a_changed_source_is_not_resumed(sources: dict[str, Path], tmp_path: Path) -> None:
    destination = tmp_path / "merged.zarr"
    _kill_after_bands(sources, destination, 1)
    other = SubsetZarr(
        sources["cite"], tmp_path / "cite.zarr", cells=np.arange(50), **THREADS
    ).dump()
    with pytest.raises(MergeResumeError, match="overwrite=True"):
        DataStoreMerge([sources["pbmc"], other], destination, **THREADS).dump()
    DataStoreMerge([sources["pbmc"], other], destination, overwrite=True, **THREADS).dump()
    assert DataStore(destination).cells.n_rows == DataStore(sources["pbmc"]).cells.n_rows + 50


def test_refusals_before_writing(sources: dict[str, Path], tmp_path: Path) -> None:
    pair = [sources["pbmc"], sources["cite"]]
    with pytest.raises(DestinationOverlapError):
        DataStoreMerge(pair, sources["pbmc"] / "inside.zarr", **THREADS).dump()
    with pytest.raises(MergePlanError, match="at least two"):
        DataStoreMerge(pair[:1], tmp_path / "one.zarr", **THREADS).dump()
    with pytest.raises(MergePlanError, match="unique"):
        DataStoreMerge(pair, tmp_path / "same.zarr", names=["x", "x"], **THREADS).dump()
    pending = tmp_path / "pending.zarr"
    SubsetZarr(sources["pbmc"], pending, cells=np.arange(10), **THREADS).dump()
    zarr.open_group(pending, mode="r+").create_group(
        "GeneSets", attributes={"cytearc:pending_assay": "add_grouped_assay"}
    )
    with pytest.raises(PendingAssayError, match="discard_interrupted_assay"):
        DataStoreMerge([pending, sources["cite"]], tmp_path / "p.zarr", **THREADS).dump()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pending.zarr"]


def test_integer_sources_without_a_common_integer_dtype_are_refused() -> None:
    from cytearc.tools.datastore_merge import _common_dtype  # noqa: PLC0415

    assert _common_dtype("RNA", [np.dtype("u1"), np.dtype("u2")], ["a", "b"]) == np.dtype("u2")
    assert _common_dtype("RNA", [np.dtype("u1"), np.dtype("i1")], ["a", "b"]) == np.dtype("i2")
    assert _common_dtype("RNA", [np.dtype("f4"), np.dtype("u2")], ["a", "b"]) == np.dtype("f4")
    with pytest.raises(MergePlanError, match="no common integer dtype"):
        _common_dtype("RNA", [np.dtype("u8"), np.dtype("i1")], ["a", "b"])


def test_cli_merge_and_subset(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cytearc.cli import main  # noqa: PLC0415

    out = tmp_path / "m.zarr"
    args = [
        "merge",
        str(sources["pbmc"]),
        str(sources["cite"]),
        "-o",
        str(out),
        "--cluster",
        "threads",
        "--json",
    ]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["assays"]["ADT"][0] == doc["cells"]
    ds = DataStore(out, zarr_mode="r+")
    ds.cells.insert("keep", np.arange(ds.cells.n_rows) < 10)
    sub = tmp_path / "s.zarr"
    assert (
        main(["subset", str(out), str(sub), "--cells", "keep", "--cluster", "threads", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["cells"] == 10
    assert main(["subset", str(out), str(sub), "--cells", "keep", "--cluster", "threads"]) == 1
    assert "DestinationExistsError" in capsys.readouterr().err
