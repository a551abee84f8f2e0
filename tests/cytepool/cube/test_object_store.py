"""Cubes on object stores: S3 (moto), memory:// and HTTP, written root-last and read strictly.

An object store has no rename, so ``write_cube`` writes a URL in place and
its root ``zarr.json`` last: a writer killed mid-write leaves arrays that
nothing opens as a cube, which ``overwrite=True`` replaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import s3fs
import zarr

from cytepool import Cube, is_cube, read_cube, write_cube
from cytepool.cli import EXIT_FAILURE, EXIT_NO_CUBE, EXIT_OK, main
from cytepool.cube.writer import _RootHeldStore
from cytepool.errors import (
    CubeExistsError,
    CubeFormatError,
    CubeNotFoundError,
    CubeValueError,
    CytePoolError,
    NonFiniteValueError,
)
from cytepool.locations import as_location
from cytepool.servers import FaultProxy, Faults, _RangeHandler, http_server, moto_server
from cytepool.testing import assert_cube_equal, example_cube

if TYPE_CHECKING:
    from collections.abc import Iterator

BUCKET = "cubes"
WRITER = (
    "import json, sys; from cytepool import write_cube; from cytepool.testing import example_cube; "
    "write_cube(example_cube(30, 4, 20, seed=3), sys.argv[1], storage_options=json.loads(sys.argv[2]))"
)
"""A subprocess writing a cube of 30 groups (120 layer chunks, one at a time) to ``argv[1]``."""


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    """The s3fs storage options of a moto S3 server with the bucket ``cubes``."""
    with moto_server() as options:
        s3fs.S3FileSystem(**options).mkdir(BUCKET)
        yield options


def _url(name: str) -> str:
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}.cube.zarr"


def _objects(url: str, options: dict[str, Any]) -> dict[str, bytes]:
    """Every object below ``url`` with its bytes, keyed relative to it."""
    location = as_location(url, options)
    fs, _ = location.filesystem()
    fs.invalidate_cache()
    keys = location.keys()
    data = {key: location.read_bytes(key) for key in keys}
    return {key: value for key, value in data.items() if value is not None}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _nan_cube() -> Cube:
    """A cube whose lazy layer holds a NaN that the write finds in group 1, after group 0 is written."""
    values = np.ones((2, 3, 10))
    values[1, 0, 0] = np.nan
    return Cube(
        samples=pd.DataFrame({"sample": ["a", "b", "c"]}),
        groups=pd.DataFrame({"group": ["x", "y"]}),
        features=pd.DataFrame({"gene": [f"f{i}" for i in range(10)]}),
        layers={"counts": np.ones((2, 3, 10)), "log_sum": da.from_array(values, chunks=(1, 3, 10))},
    )


# -- round trips ----------------------------------------------------------------------


@pytest.mark.slow
def test_s3_round_trip_is_the_local_cube_byte_for_byte(s3: dict[str, Any], tmp_path: Path) -> None:
    """A cube written to S3 reads back equal, with the fingerprint and the very bytes of a local write."""
    cube = example_cube()
    url = _url("round-trip")
    assert write_cube(cube, url, compression="zstd", storage_options=s3) == url
    local = write_cube(example_cube(), tmp_path / "local.cube.zarr", compression="zstd")
    back = read_cube(url, storage_options=s3)
    assert_cube_equal(back, cube)
    assert back.fingerprint == read_cube(local).fingerprint == cube.fingerprint
    assert back.verify_fingerprint() == cube.fingerprint
    assert is_cube(url, storage_options=s3)
    assert _objects(url, s3) == _files(local)


@pytest.mark.slow
def test_the_root_zarr_json_is_put_last_and_once(s3: dict[str, Any]) -> None:
    """Every array and chunk is stored before the root zarr.json, which is stored once."""
    url = _url("order")
    root = f"/{url.removeprefix('s3://')}/zarr.json"
    with FaultProxy(s3["endpoint_url"]) as proxy:
        write_cube(example_cube(), url, storage_options={**s3, "endpoint_url": proxy.url})
        puts = [r.path for r in proxy.requests if r.method == "PUT"]
    assert puts[-1] == root
    assert puts.count(root) == 1
    assert any("/layers/counts/c/" in p for p in puts)


def test_memory_round_trip() -> None:
    """memory:// is an object store too: the cube reads back equal, its lazy layers verified."""
    cube = example_cube(bulk=True)
    url = f"memory://cubes-{uuid.uuid4().hex}/x.cube.zarr"
    assert write_cube(cube, url, compression="zstd") == url
    assert is_cube(url)
    back = read_cube(url)
    assert_cube_equal(back, cube)
    assert back.verify_fingerprint() == cube.fingerprint
    np.testing.assert_array_equal(back.layers["counts"][1].compute(), cube.layers["counts"][1])


def test_a_held_root_store_pickles_for_workers() -> None:
    """Layer tasks hold the Zarr array; the store it writes through pickles and still writes."""
    location = as_location(f"memory://cubes-{uuid.uuid4().hex}/p.zarr")
    store = _RootHeldStore(location.zarr_store(read_only=False), where=str(location))
    root = zarr.create_group(store=store, zarr_format=3)
    array = root.create_array("a", shape=(2,), dtype="int64", chunks=(1,))
    copy = pickle.loads(pickle.dumps(array))
    copy[1:] = 7
    assert location.keys() == ["a/c/1", "a/zarr.json"]
    assert "zarr.json" in pickle.loads(pickle.dumps(store))._held
    np.testing.assert_array_equal(array[...], [0, 7])


@contextlib.contextmanager
def _server_without_listings(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over HTTP as a static host does: files by name, directories 404."""

    class Handler(_RangeHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)

        def list_directory(self, path: str | os.PathLike[str]) -> None:
            self.send_error(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_http_read_with_and_without_directory_listings(tmp_path: Path) -> None:
    """A cube served over HTTP reads back equal, listed or not, and the lazy layers verify."""
    cube = example_cube()
    write_cube(cube, tmp_path / "x.cube.zarr")
    for serve in (http_server, _server_without_listings):
        with serve(tmp_path) as base, FaultProxy(base) as proxy:
            url = f"{proxy.url}/x.cube.zarr"
            assert is_cube(url)
            back = read_cube(url)
            assert_cube_equal(back, cube)
            assert back.verify_fingerprint() == cube.fingerprint
            assert all(r.status in {200, 206, 301, 404} for r in proxy.requests)
        with serve(tmp_path) as base, pytest.raises(CubeNotFoundError, match=r"no zarr\.json"):
            read_cube(f"{base}/absent.cube.zarr")


@pytest.mark.slow
def test_http_read_keeps_the_extra_array_check_where_the_server_lists(tmp_path: Path) -> None:
    """An array the attributes do not name is refused over HTTP as it is locally."""
    path = write_cube(example_cube(), tmp_path / "x.cube.zarr")
    zarr.open_group(path, mode="a").create_array("layers/extra", shape=(1,), dtype="int8")
    with http_server(tmp_path) as base, pytest.raises(CubeFormatError, match="exactly the arrays"):
        read_cube(f"{base}/x.cube.zarr")


# -- a killed writer -------------------------------------------------------------------


@pytest.mark.slow
def test_a_writer_killed_mid_write_leaves_no_cube_and_overwrite_replaces_it(
    s3: dict[str, Any],
) -> None:
    """Killed once layer chunks exist, the writer leaves arrays that nothing opens; overwrite=True replaces them."""
    url = _url("killed")
    fs = s3fs.S3FileSystem(**s3)
    prefix = url.removeprefix("s3://")
    env = {**os.environ, "DASK_NUM_WORKERS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url, json.dumps(s3)], env=env)
    try:
        deadline = time.monotonic() + 45
        while not any("/layers/" in k and "/c/" in k for k in fs.find(prefix)):
            assert proc.poll() is None, "the writer ended before a layer chunk was seen"
            assert time.monotonic() < deadline, "no layer chunk was written in 45 s"
            time.sleep(0.02)
            fs.invalidate_cache()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    fs.invalidate_cache()
    keys = fs.find(prefix)
    assert f"{prefix}/zarr.json" not in keys, "the write completed before the kill"
    assert any("/layers/" in k and "/c/" in k for k in keys)
    with pytest.raises(CubeNotFoundError, match="a write may be in progress or was interrupted"):
        read_cube(url, storage_options=s3)
    assert not is_cube(url, storage_options=s3)
    with pytest.raises(FileNotFoundError):
        zarr.open_group(url, mode="r", storage_options=s3)
    with pytest.raises(CubeExistsError, match="pass overwrite=True"):
        write_cube(example_cube(), url, storage_options=s3)
    cube = example_cube(seed=5)
    write_cube(cube, url, overwrite=True, storage_options=s3)
    back = read_cube(url, storage_options=s3)
    assert_cube_equal(back, cube)
    assert back.verify_fingerprint() == cube.fingerprint
    assert sorted(_objects(url, s3)) == sorted(as_location(url, s3).keys())


# -- faults ----------------------------------------------------------------------------


@pytest.mark.slow
def test_faulty_network_gives_equal_values_or_a_named_error(
    s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 20 % of GETs and PUTs answered 503 and 20 % dropped mid-body, s3fs retries and values are equal."""
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 10)  # s3fs's quick backoff, not botocore's
    cube = example_cube(2, 3, 20, float_layers=False)
    faults = Faults(error_rate=0.2, drop_rate=0.2, methods=frozenset({"GET", "PUT"}), seed=7)
    with FaultProxy(s3["endpoint_url"], faults=faults) as proxy:
        options = {
            **s3,
            "endpoint_url": proxy.url,
            "config_kwargs": {"retries": {"total_max_attempts": 1}},
        }
        url = _url("faults")
        written = False
        with contextlib.suppress(CytePoolError):  # a named error is allowed; wrong values are not
            write_cube(cube, url, storage_options=options)
            written = True
            back = read_cube(url, storage_options=options)
            assert_cube_equal(back, cube)
            assert back.verify_fingerprint() == cube.fingerprint
        if written:
            assert_cube_equal(read_cube(url, storage_options=s3), cube)
        else:
            assert not is_cube(url, storage_options=s3)
        injected = {(r.method, r.fault) for r in proxy.requests if r.fault}
    assert {("GET", "error"), ("GET", "drop"), ("PUT", "error")} <= injected


# -- refusals --------------------------------------------------------------------------


@pytest.mark.slow
def test_s3_refusals(s3: dict[str, Any]) -> None:
    """Non-cube keys, foreign keys in an interrupted prefix, existing cubes and missing buckets are refused."""
    fs = s3fs.S3FileSystem(**s3)
    cube = example_cube(2, 2, 5, float_layers=False)
    other = _url("other")
    fs.pipe_file(f"{other.removeprefix('s3://')}/notes.txt", b"mine")
    with pytest.raises(CubeExistsError, match=r"already holds 1 objects \(first 'notes.txt'\)"):
        write_cube(cube, other, storage_options=s3)
    with pytest.raises(CubeExistsError, match=r"'notes\.txt', which is neither Zarr metadata"):
        write_cube(cube, other, overwrite=True, storage_options=s3)
    assert list(_objects(other, s3)) == ["notes.txt"]

    interrupted = _url("interrupted")
    write_cube(cube, interrupted, storage_options=s3)
    fs.rm(f"{interrupted.removeprefix('s3://')}/zarr.json")
    fs.pipe_file(f"{interrupted.removeprefix('s3://')}/layers/counts/c/readme.md", b"x")
    before = _objects(interrupted, s3)
    with pytest.raises(CubeExistsError, match=r"'layers/counts/c/readme\.md'"):
        write_cube(cube, interrupted, overwrite=True, storage_options=s3)
    assert _objects(interrupted, s3) == before

    plain = _url("plain-zarr")
    zarr.create_group(plain, storage_options=s3).create_array("a", shape=(1,), dtype="int8")
    with pytest.raises(CubeExistsError, match=r"without format 'cytepool\.cube'"):
        write_cube(cube, plain, overwrite=True, storage_options=s3)

    existing = _url("existing")
    write_cube(cube, existing, storage_options=s3)
    with pytest.raises(CubeExistsError, match="pass overwrite=True"):
        write_cube(example_cube(), existing, storage_options=s3)
    replacement = example_cube(2, 3, 4, seed=9, bulk=True)
    write_cube(replacement, existing, overwrite=True, storage_options=s3)
    assert_cube_equal(read_cube(existing, storage_options=s3), replacement)
    assert "n_cells/zarr.json" not in _objects(existing, s3)

    with pytest.raises(CubeNotFoundError, match="create the bucket"):
        write_cube(cube, "s3://no-such-bucket/x.cube.zarr", storage_options=s3)
    with pytest.raises(CubeNotFoundError, match=r"no cube here \(no zarr.json\); check the URL"):
        read_cube(_url("empty"), storage_options=s3)


def test_a_failed_write_deletes_what_it_wrote() -> None:
    """A NaN found while the layers are written leaves nothing under the URL."""
    url = f"memory://cubes-{uuid.uuid4().hex}/nan.cube.zarr"
    with pytest.raises(NonFiniteValueError):
        write_cube(_nan_cube(), url)
    assert as_location(url).keys() == []
    with pytest.raises(CubeNotFoundError, match=r"no zarr\.json"):
        read_cube(url)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/x.cube.zarr", "https://example.org/x.cube.zarr"]
)
def test_an_http_destination_is_refused(url: str) -> None:
    """HTTP is read-only: writing there is refused before any request."""
    with pytest.raises(CubeValueError, match="read-only, where write_cube writes"):
        write_cube(example_cube(), url)


def test_a_flattened_url_an_unknown_protocol_and_bad_storage_options_are_refused() -> None:
    """``Path("s3://b")`` lost its ``//``; fsspec must know the protocol; options must be a mapping."""
    for call in (write_cube, lambda *a: read_cube(a[-1]), lambda *a: is_cube(a[-1])):
        with pytest.raises(CubeValueError, match=r"fsspec cannot open nosuch:// URLs"):
            call(example_cube(), "nosuch://bucket/x.cube.zarr")
    with pytest.raises(CubeValueError, match="a URL whose '//' was lost"):
        write_cube(example_cube(), Path("s3://bucket/x.cube.zarr"))
    with pytest.raises(CubeValueError, match="storage_options: expected a mapping"):
        read_cube("memory://x/y", storage_options=["anon"])  # type: ignore[arg-type]


# -- the command line -------------------------------------------------------------------


@pytest.mark.slow
def test_cli_reads_urls_with_storage_options(
    s3: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The commands inspect and verify take a URL and --storage-options; an interrupted prefix exits 3."""
    cube = example_cube(2, 2, 5)
    url = write_cube(cube, _url("cli"), storage_options=s3)
    options = json.dumps(s3)
    assert main(["inspect", str(url), "--storage-options", options, "--json"]) == EXIT_OK
    info = json.loads(capsys.readouterr().out)
    assert (info["path"], info["fingerprint"]) == (url, cube.fingerprint)
    assert main(["verify", str(url), "--storage-options", options, "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["inspect", str(url), "--storage-options", "[1]"]) == EXIT_FAILURE
    assert "--storage-options: expected a JSON object" in capsys.readouterr().err
    s3fs.S3FileSystem(**s3).rm(f"{str(url).removeprefix('s3://')}/zarr.json")
    assert main(["verify", str(url), "--storage-options", options, "--json"]) == EXIT_NO_CUBE
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["type"] == "CubeNotFoundError"
    assert "interrupted" in error["message"]
    assert "secret" not in error["message"]
