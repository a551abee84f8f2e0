"""Writer destinations: local paths and object-store URLs, and overwrite replaces only what CyteArc wrote."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr

from cytearc import SparseToZarr
from cytearc.errors import DestinationExistsError, RemoteDestinationError
from cytearc.storage.destinations import validate_destination, writable_location


def _store(path: Path, *, overwrite: bool = False) -> Path:
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(6)]})
    features = pd.DataFrame({"ids": ["f0", "f1", "f2"], "names": ["F0", "F1", "F2"]})
    matrix = np.arange(18).reshape(6, 3) % 4
    SparseToZarr(
        matrix,
        cells=cells,
        features=features,
        zarr_loc=path,
        overwrite=overwrite,
        cluster="threads",
        show_progress=False,
    ).dump()
    return path


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("imported") / "ds.zarr")


@pytest.mark.parametrize(
    "url", ["s3://bucket/ds.zarr", "gs://bucket/ds.zarr", "memory://b/ds.zarr"]
)
def test_object_store_urls_are_destinations(url: str) -> None:
    """A URL of a writable filesystem is a destination with its options; a Path that flattened it is refused."""
    location = writable_location(url, storage_options={"anon": True})
    assert (location.url, location.path, dict(location.storage_options)) == (
        url,
        None,
        {"anon": True},
    )
    assert "anon" not in repr(location)
    assert str(location) == url
    with pytest.raises(RemoteDestinationError, match="pass the URL as a string"):
        writable_location(Path(url))


@pytest.mark.parametrize("url", ["https://host/ds.zarr", "http://127.0.0.1:8000/ds.zarr"])
def test_read_only_protocols_are_refused(url: str) -> None:
    """HTTP serves stores read-only, so no writer takes it as a destination, before anything is read."""
    with pytest.raises(RemoteDestinationError, match="protocol is read-only"):
        validate_destination(url, overwrite=True)


def test_local_paths_with_url_characters_are_kept(tmp_path: Path) -> None:
    """A local name with ':', '#' or '?' is no URL: it stays a Path, made absolute; file:// is local."""
    for name in ("run:1/ds.zarr", "a#b?c.zarr"):
        assert writable_location(tmp_path / name).path == tmp_path / name
    for relative in ("rel.zarr", "C:/ds.zarr"):
        assert writable_location(relative).path == Path.cwd() / relative
    assert writable_location(f"file://{tmp_path}/ds.zarr").path == tmp_path / "ds.zarr"


def test_an_imported_store_is_replaceable(imported: Path) -> None:
    """Every key of an import is Zarr metadata or a chunk, so overwrite may replace it."""
    assert validate_destination(imported, overwrite=True).path == imported
    assert any("c" in Path(root).parts for root, _, _ in os.walk(imported))


@pytest.mark.parametrize(
    ("key", "named"),
    [
        ("cellData/notes.txt", "cellData/notes.txt"),
        ("matrices/RNA/.DS_Store", "matrices/RNA/.DS_Store"),
        ("matrices/RNA/counts/notes.txt", "matrices/RNA/counts/notes.txt"),
        ("matrices/RNA/counts/c/0/x", "matrices/RNA/counts/c/0/x"),
        ("RNA/featureData/extra/data.bin", "RNA/featureData/extra"),
    ],
)
def test_a_user_file_inside_a_group_blocks_overwrite(
    imported: Path, tmp_path: Path, key: str, named: str
) -> None:
    """A key that is neither Zarr metadata nor a chunk is refused naming it, and nothing is removed."""
    store = tmp_path / "ds.zarr"
    shutil.copytree(imported, store)
    (store / key).parent.mkdir(parents=True, exist_ok=True)
    (store / key).write_text("keep me")
    with pytest.raises(DestinationExistsError) as info:
        _store(store, overwrite=True)
    expected = f"refusing to replace it: {named!r} is neither Zarr metadata nor an array's chunk"
    assert expected in str(info.value), str(info.value)
    assert (store / key).read_text() == "keep me"


def test_label_claims_do_not_block_overwrite(imported: Path, tmp_path: Path) -> None:
    """The run ledger's label-claim keys are CyteArc's own, so they do not block overwrite."""
    store = tmp_path / "ds.zarr"
    shutil.copytree(imported, store)
    root = zarr.open_group(store, mode="r+")
    digest = hashlib.sha256(b"baseline").hexdigest()
    root.require_group(f"pipeline/runs/.label-claims/{digest}")
    (store / "pipeline/runs/.label-claims" / digest / "00000001.json").write_text("{}")
    assert validate_destination(store, overwrite=True).path == store
    (store / "pipeline/runs/.label-claims" / digest / "notes.json").write_text("{}")
    with pytest.raises(DestinationExistsError, match=r"notes\.json"):
        validate_destination(store, overwrite=True)
