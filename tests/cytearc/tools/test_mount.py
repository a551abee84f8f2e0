"""Mounted targets: the source's counts and artifacts beneath a target that holds every new write.

A recipe the source already ran creates nothing on the mount; another
resolution writes its artifacts to the target only; the source keeps every
byte (a local source, and a read-only one on S3); ``repack_zarr`` of a mount
gives a standalone store with the artifacts of both.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import s3fs
import zarr

from cytearc import DataStore, mount_datastore
from cytearc.datasets import write_store
from cytearc.errors import DestinationExistsError, MountFormatError, ReadOnlyStoreError
from cytearc.storage.mount import MATRIX_SOURCE
from cytearc.tools import repack_zarr
from cytepool.servers import FaultProxy
from cytepool.testing import tree_snapshot

RECIPE: dict[str, Any] = {"n_top": 300, "n_comps": 10, "resolution": 0.5}


def _created(run: Any) -> int:
    return int(sum(s["created"] for s in run.summary().to_dict(orient="records")))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose standard recipe has run (its artifacts are what a mount reuses)."""
    path = write_store(
        tmp_path_factory.mktemp("source") / "shared.zarr",
        n_cells=400,
        n_genes=600,
        cluster="threads",
    )
    DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False).pipeline.run(
        "rna_standard", **RECIPE
    )
    return Path(path)


def test_a_mount_reuses_the_sources_results_and_writes_only_to_itself(
    analysed: Path, tmp_path: Path
) -> None:
    """Same recipe: nothing created; another resolution: new artifacts in the target; the source unchanged."""
    source = tmp_path / "shared.zarr"
    shutil.copytree(analysed, source)
    before = tree_snapshot(source)
    target = Path(mount_datastore(source, tmp_path / "mine.zarr"))
    record = zarr.open_group(target, mode="r").attrs[MATRIX_SOURCE]
    assert set(record) == {"location", "workspace", "assays"}
    assert record["assays"]["RNA"]["requiresTranspose"] is True
    ds = DataStore(target, zarr_mode="r+", cluster="threads", show_progress=False)
    shared = DataStore(source, cluster="threads", show_progress=False)
    assert {a.ref for a in ds.list_artifacts()} == {a.ref for a in shared.list_artifacts()}
    np.testing.assert_array_equal(ds.RNA.counts.compute(), shared.RNA.counts.compute())
    again = ds.pipeline.run("rna_standard", **RECIPE)
    assert _created(again) == 0
    other = ds.pipeline.run("rna_standard", **{**RECIPE, "resolution": 1.5})
    assert _created(other) > 0
    assert tree_snapshot(source) == before
    mine = {a.ref for a in ds.list_artifacts()} - {a.ref for a in shared.list_artifacts()}
    assert mine
    assert list(target.glob("**/artifacts/*/*/zarr.json"))  # the new groups are the target's own
    group = next(source.glob("**/artifacts/*/*/zarr.json")).parent.relative_to(source)
    with pytest.raises(ReadOnlyStoreError):
        ds.root[group.as_posix()].attrs["note"] = "x"  # type: ignore[union-attr]
    assert tree_snapshot(source) == before
    standalone = Path(
        repack_zarr(target, tmp_path / "standalone.zarr", cluster="threads", show_progress=False)
    )
    alone = DataStore(standalone)
    assert MATRIX_SOURCE not in zarr.open_group(standalone, mode="r").attrs
    assert {a.ref for a in alone.list_artifacts()} == {a.ref for a in ds.list_artifacts()}
    assert "counts" in zarr.open_group(standalone, mode="r")["matrices/RNA"]


def test_the_record_is_strict_and_the_source_must_stay_unchanged(
    analysed: Path, tmp_path: Path
) -> None:
    """Another shape, a changed source and a mount of a mount are refused by name."""
    source = tmp_path / "shared.zarr"
    shutil.copytree(analysed, source)
    target = Path(mount_datastore(source, tmp_path / "mine.zarr"))
    root = zarr.open_group(target, mode="r+")
    good = dict(root.attrs[MATRIX_SOURCE])
    for bad, match in (
        ({**good, "version": 1}, r"unknown \['version'\]"),
        ({k: v for k, v in good.items() if k != "workspace"}, r"missing \['workspace'\]"),
        (
            {**good, "assays": {"RNA": {**good["assays"]["RNA"], "extra": 1}}},
            r"unknown \['extra'\]",
        ),
    ):
        root.attrs[MATRIX_SOURCE] = bad
        with pytest.raises(MountFormatError, match=match):
            DataStore(target)
    root.attrs[MATRIX_SOURCE] = good
    with pytest.raises(MountFormatError, match="mounts of mounts"):
        mount_datastore(target, tmp_path / "twice.zarr")
    with pytest.raises(DestinationExistsError):
        mount_datastore(source, target)
    shutil.rmtree(source)
    write_store(source, n_cells=400, n_genes=600, seed=5, cluster="threads")
    with pytest.raises(MountFormatError, match="not the store that was mounted"):
        DataStore(target)


@pytest.mark.slow
def test_a_read_only_s3_source_mounted_locally_runs_its_own_leiden(
    analysed: Path, tmp_path: Path, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """The users' case: a shared store on S3 they may only read; every object's bytes are unchanged.

    The source is reached through a proxy that answers every write with S3's
    403 AccessDenied, as for a user whose policy allows only reads; the mount
    never even tries one.
    """
    fs = s3fs.S3FileSystem(**s3_options, skip_instance_cache=True)
    fs.put(str(analysed), f"{s3_bucket[5:]}/shared.zarr", recursive=True)

    def hashes() -> dict[str, str]:
        return {k: hashlib.sha256(fs.cat_file(k)).hexdigest() for k in fs.find(s3_bucket[5:])}

    before = hashes()
    url = f"{s3_bucket}/shared.zarr"
    with FaultProxy(s3_options["endpoint_url"], read_only=True) as proxy:
        reader = {**s3_options, "endpoint_url": proxy.url}
        with pytest.raises(PermissionError):
            s3fs.S3FileSystem(**reader, skip_instance_cache=True).pipe(f"{url[5:]}/x", b"no")
        refused = len(proxy.requests)
        target = Path(mount_datastore(url, tmp_path / "mine.zarr", storage_options=reader))
        ds = DataStore(
            target,
            zarr_mode="r+",
            cluster="threads",
            show_progress=False,
            source_storage_options=reader,
        )
        assert _created(ds.pipeline.run("rna_standard", **RECIPE)) == 0
        run = ds.pipeline.run("rna_standard", label="mine", **{**RECIPE, "resolution": 1.2})
        assert _created(run) > 0
        assert len(run.artifact("clustering").read("labels")) > 0
        mine = proxy.requests[refused:]
    assert mine
    assert all(r.method in {"GET", "HEAD"} for r in mine), {r.method for r in mine}
    assert hashes() == before
