"""Stores written to and read from object storage: S3 (moto on 127.0.0.1) and read-only HTTP.

Every writer takes an fsspec URL as its destination; the stores it writes
there are the stores it writes locally (same fingerprints). A writer killed
on S3 leaves a store that readers refuse, and faults of the network give
the same values or a named error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import anndata as ad
import fsspec.config
import numpy as np
import pytest
import s3fs
import zarr

from cytearc import DataStore
from cytearc.cli import main
from cytearc.datasets import write_store
from cytearc.errors import (
    DestinationExistsError,
    DestinationOverlapError,
    ReadOnlyStoreError,
    StoreAccessError,
    StoreFormatError,
)
from cytearc.io.importer import write_store as import_store
from cytearc.io.sources import SparseSource
from cytearc.tools import DataStoreMerge, SubsetZarr, repack_zarr
from cytepool.servers import FaultProxy, Faults, http_server

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic store on the local disk (with donors, conditions and cell types)."""
    path = tmp_path_factory.mktemp("local") / "ds.zarr"
    return write_store(path, n_cells=300, n_genes=600, cluster="threads")


def _fs(options: dict[str, Any]) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(**options, skip_instance_cache=True)


def test_every_writer_writes_the_same_store_to_s3(
    local_store: Path,
    tmp_path: Path,
    s3_options: dict[str, Any],
    s3_bucket: str,
) -> None:
    """Import, repack, subset and merge to s3:// give the fingerprints of the same writes to local paths."""
    local = DataStore(local_store)
    counts = local.RNA.counts.compute()
    source = SparseSource(
        counts, local.cells.to_pandas(), local.RNA.features.to_pandas(), location="memory"
    )
    imported = import_store(
        source, f"{s3_bucket}/imported.zarr", storage_options=s3_options, cluster="threads"
    )
    assert imported.path == f"{s3_bucket}/imported.zarr"
    remote = DataStore(imported.path, storage_options=s3_options)
    assert remote.RNA.content_fingerprint == local.RNA.content_fingerprint

    repacked = repack_zarr(
        local_store,
        f"{s3_bucket}/repacked.zarr",
        profile="object_store",
        destination_storage_options=s3_options,
        cluster="threads",
        show_progress=False,
    )
    assert DataStore(repacked, storage_options=s3_options).dataset_fingerprint == (
        local.dataset_fingerprint
    )
    rows = np.arange(0, 300, 3)
    options = {"cluster": "threads", "show_progress": False}
    sub_remote = SubsetZarr(
        repacked, f"{s3_bucket}/sub.zarr", cells=rows, storage_options=s3_options, **options
    ).dump()
    sub_local = SubsetZarr(local_store, tmp_path / "sub.zarr", cells=rows, **options).dump()
    assert (
        DataStore(sub_remote, storage_options=s3_options).dataset_fingerprint
        == DataStore(sub_local).dataset_fingerprint
    )
    merged_remote = DataStoreMerge(
        [repacked, sub_local],
        f"{s3_bucket}/merged.zarr",
        names=["a", "b"],
        storage_options=s3_options,
        **options,
    ).dump()
    merged_local = DataStoreMerge(
        [local_store, sub_local], tmp_path / "merged.zarr", names=["a", "b"], **options
    ).dump()
    assert (
        DataStore(merged_remote, storage_options=s3_options).dataset_fingerprint
        == DataStore(merged_local).dataset_fingerprint
    )
    listing = _fs(s3_options).find(s3_bucket[5:])
    assert not [key for key in listing if key.endswith(".partial")]


def test_destinations_on_s3_are_checked_like_local_ones(
    local_store: Path, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """Keys at the destination, a foreign object in a store, and a store inside a store are refused."""
    url = f"{s3_bucket}/ds.zarr"
    options = {"destination_storage_options": s3_options, "cluster": "threads"}
    repack_zarr(local_store, url, show_progress=False, **options)
    with pytest.raises(DestinationExistsError, match="pass overwrite=True"):
        repack_zarr(local_store, url, show_progress=False, **options)
    with pytest.raises(DestinationExistsError, match="lies inside the Zarr hierarchy"):
        repack_zarr(local_store, f"{url}/inner.zarr", show_progress=False, **options)
    fs = _fs(s3_options)
    fs.pipe(f"{url[5:]}/cellData/notes.txt", b"keep me")
    with pytest.raises(DestinationExistsError, match=r"'cellData/notes\.txt' is neither"):
        repack_zarr(local_store, url, overwrite=True, show_progress=False, **options)
    assert fs.cat(f"{url[5:]}/cellData/notes.txt") == b"keep me"
    fs.rm(f"{url[5:]}/cellData/notes.txt")
    repack_zarr(local_store, url, overwrite=True, show_progress=False, **options)
    with pytest.raises(DestinationOverlapError):
        SubsetZarr(
            url, f"{url}/sub", cells=np.arange(5), storage_options=s3_options, cluster="threads"
        ).dump()


_KILLED_IMPORT = """
import sys
from cytearc.datasets import write_store
write_store(sys.argv[1], n_cells=1500, n_genes=600, cluster="threads",
            storage_options={"endpoint_url": sys.argv[2], "key": "testing", "secret": "testing"},
            layout=__import__("cytearc.storage.layout", fromlist=["CountLayout"]).CountLayout(
                unit_bytes=2**16, chunk_bytes=2**12))
"""


def test_a_writer_killed_on_s3_leaves_a_store_readers_refuse(
    tmp_path: Path, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """SIGKILLed while its count shards are uploading, an import leaves complete=False: opening it fails closed.

    The writer's requests go through a proxy that slows them, so the kill
    lands while objects are still being written; a bare Zarr open then sees
    the incomplete root, and ``overwrite=True`` writes the store again.
    """
    url = f"{s3_bucket}/killed.zarr"
    fs = _fs(s3_options)
    with FaultProxy(s3_options["endpoint_url"], faults=Faults(delay=0.05)) as proxy:
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        writer = subprocess.Popen(
            [sys.executable, "-c", _KILLED_IMPORT, url, proxy.url],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline and writer.poll() is None:
                keys = fs.find(url[5:]) if fs.exists(url[5:]) else []
                if sum("/counts/c/" in k for k in keys) >= 3:
                    break
                time.sleep(0.2)
                fs.invalidate_cache()
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
    assert writer.returncode == -signal.SIGKILL, "the import finished before it was killed"
    with pytest.raises(StoreFormatError, match="did not finish"):
        DataStore(url, storage_options=s3_options)
    root = zarr.open_group(url, mode="r", storage_options=s3_options)
    assert root.attrs["cytearc:complete"] is False
    write_store(
        url,
        n_cells=120,
        n_genes=600,
        overwrite=True,
        storage_options=s3_options,
        cluster="threads",
    )
    assert DataStore(url, storage_options=s3_options).RNA.shape == (120, 600)


def test_exports_are_written_to_s3(
    local_store: Path, tmp_path: Path, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """to_h5ad uploads one object and to_mtx a folder whose matrix is written last; both read back."""
    ds = DataStore(local_store, cluster="threads", show_progress=False)
    url = ds.to_h5ad(f"{s3_bucket}/ds.h5ad", storage_options=s3_options)
    fs = _fs(s3_options)
    fs.get(str(url)[5:], str(tmp_path / "back.h5ad"))
    back = ad.read_h5ad(tmp_path / "back.h5ad")
    np.testing.assert_array_equal(back.X.toarray(), ds.RNA.counts.compute())
    with pytest.raises(DestinationExistsError):
        ds.to_h5ad(f"{s3_bucket}/ds.h5ad", storage_options=s3_options)
    folder = ds.to_mtx(f"{s3_bucket}/mtx", storage_options=s3_options)
    assert sorted(k.rsplit("/", 1)[-1] for k in fs.find(str(folder)[5:])) == [
        "barcodes.tsv.gz",
        "features.tsv.gz",
        "matrix.mtx.gz",
    ]
    assert not list(tmp_path.glob(".*tmp*"))


def test_a_store_over_http_reads_like_local_and_refuses_writes(
    local_store: Path, engine: Engine
) -> None:
    """A static web server serves a store read-only: same values, verify passes, r+ is refused."""
    local = DataStore(local_store)
    with http_server(local_store.parent) as url:
        remote = DataStore(f"{url}/{local_store.name}", cluster=engine.client)
        assert remote.dataset_fingerprint == local.dataset_fingerprint
        np.testing.assert_array_equal(
            remote.RNA.counts.compute(scheduler="threads"), local.RNA.counts.compute()
        )
        assert remote.verify().ok
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            DataStore(f"{url}/{local_store.name}", zarr_mode="r+")


def test_faults_of_the_network_give_the_values_or_a_named_error(
    local_store: Path, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """503s and connections dropped mid-body are retried to the same values; a dead endpoint is named."""
    _fs(s3_options).put(str(local_store), f"{s3_bucket[5:]}/ds.zarr", recursive=True)
    expected = DataStore(local_store).RNA.counts.compute()
    faults = Faults(error_rate=0.15, drop_rate=0.15, methods=frozenset({"GET"}), seed=1)
    with FaultProxy(s3_options["endpoint_url"], faults=faults) as proxy:
        options = {**s3_options, "endpoint_url": proxy.url}
        ds = DataStore(f"{s3_bucket}/ds.zarr", storage_options=options, cluster="threads")
        np.testing.assert_array_equal(ds.RNA.counts.compute(scheduler="threads"), expected)
        assert {r.fault for r in proxy.requests} >= {"error", "drop"}
        proxy.faults = Faults()
        few_retries = {**options, "config_kwargs": {"retries": {"max_attempts": 1}}}
        dead = DataStore(f"{s3_bucket}/ds.zarr", storage_options=few_retries, cluster="threads")
        proxy.faults = Faults(error_rate=1.0, methods=frozenset({"GET"}))
        with pytest.raises(StoreAccessError, match="cannot reach the store"):
            DataStore(f"{s3_bucket}/ds.zarr", storage_options=few_retries)
        with pytest.raises(StoreAccessError, match="could not be read") as info:
            dead.RNA.countsT[:, :1].compute(scheduler="threads")
        assert "testing" not in str(info.value)


def test_the_command_line_reaches_s3_with_storage_options(
    local_store: Path,
    s3_options: dict[str, Any],
    s3_bucket: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--storage-options`` gives every command its S3 endpoint; nothing of it is printed or kept."""
    url = f"{s3_bucket}/cli.zarr"
    flag = ["--storage-options", json.dumps({"s3": s3_options})]
    assert main([*flag, "repack", str(local_store), url, "--cluster", "threads"]) == 0
    assert main([*flag, "info", url, "--json"]) == 0
    out = capsys.readouterr().out
    assert "testing" not in out
    assert json.loads(out[out.index("{") :])["datasetFingerprint"] == (
        DataStore(local_store).dataset_fingerprint
    )
    assert "s3" not in fsspec.config.conf
    assert main(["info", url]) == 1
