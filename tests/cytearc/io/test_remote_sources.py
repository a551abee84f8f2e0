"""Imports whose source is a URL: S3 (moto), HTTP and memory://, read through fsspec in byte ranges.

The stores are written to local paths; each remote import must give the
dataset fingerprint of importing the same file from its local path.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec
import pandas as pd
import pytest
import s3fs
import scipy.io

import cytearc.io.sources
from cytearc.errors import SourceFormatError, StoreAccessError
from cytearc.io import import_10x_h5, import_10x_mtx, import_csv, import_data, import_h5ad
from cytearc.io.loom import import_loom
from cytearc.io.seurat import import_seurat
from cytearc.io.sources import _access_error, source_location
from cytepool.servers import FaultProxy, Faults, RequestRecord, http_server, moto_server
from cytepool.testing import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cytearc.engine.cluster import Engine

BUCKET = "cytearc-sources"
CREDENTIALS = {"key": "AKIAREMOTESOURCES", "secret": "s3cr3t/remote+sources"}
"""Credentials moto accepts, distinctive enough to be searched for in messages."""
SHARED: dict[str, str] = {
    "h5": "10x_v3_pbmc1k_chr21/filtered_feature_bc_matrix.h5",
    "h5ad": "h5ad_wu2020_tcells_200/wu2020_200.h5ad",
    "mtx": "10x_v3_pbmc1k_chr21/filtered_feature_bc_matrix",
    "loom": "loom_furlan2016_sympathetic/sympathetic.loom",
}
"""The real files of the shared data imported from URLs, by kind."""
KEYS = {"h5": "pbmc.h5", "h5ad": "wu2020.h5ad", "mtx": "pbmc-mtx", "csv": "pbmc.csv.gz"}
"""The keys of the sources in the bucket."""
BLOCKS = {"h5": 2**14, "h5ad": 2**19}
"""Block sizes for the streaming tests, so that each file spans several blocks."""
QUIET: dict[str, Any] = {"show_progress": False}


@dataclass
class Local:
    """The local sources by kind, and the fingerprints of their imports (made on first use)."""

    paths: dict[str, Path]
    fingerprints: dict[str, str] = field(default_factory=dict)
    scratch: Path | None = None

    def fingerprint(self, kind: str, engine: Engine) -> str:
        if kind not in self.fingerprints:
            assert self.scratch is not None
            destination = self.scratch / f"local-{kind}.zarr"
            result = import_data(self.paths[kind], destination, engine=engine, **QUIET)
            self.fingerprints[kind] = result.dataset_fingerprint
        return self.fingerprints[kind]


@pytest.fixture(scope="module")
def local(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Local:
    """The shared data's files, a gzipped CSV table of the real 10x counts, and a Seurat object."""
    folder = shared_data / SHARED["mtx"]
    counts = scipy.io.mmread(folder / "matrix.mtx.gz").toarray().T
    genes = pd.read_csv(folder / "features.tsv.gz", sep="\t", header=None)[0]
    cells = pd.read_csv(folder / "barcodes.tsv.gz", sep="\t", header=None)[0]
    scratch = tmp_path_factory.mktemp("local")
    table = scratch / KEYS["csv"]
    pd.DataFrame(counts, index=pd.Index(cells, name="cell"), columns=genes).to_csv(table)
    paths = {kind: shared_data / name for kind, name in SHARED.items()}
    rds = Path(__file__).parent / "fixtures" / "seurat" / "v5.rds"
    return Local(paths={**paths, "csv": table, "rds": rds}, scratch=scratch)


@pytest.fixture(scope="module")
def s3(local: Local) -> Iterator[dict[str, Any]]:
    """Moto's S3 on 127.0.0.1 with the sources of :data:`KEYS` in the bucket; yields the options."""
    with moto_server() as server:
        options = {**server, **CREDENTIALS}
        fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
        fs.mkdir(BUCKET)
        for kind, key in KEYS.items():
            path = local.paths[kind]
            fs.put(str(path), f"{BUCKET}/{key}", recursive=path.is_dir())
        yield options


@pytest.fixture
def small_blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Remote reads in the blocks of :data:`BLOCKS` for the test's ``kind``."""
    block = BLOCKS[request.node.callspec.params["kind"]]
    monkeypatch.setattr(cytearc.io.sources, "REMOTE_BLOCK_SIZE", block)
    return block


def _proxied(proxy: FaultProxy, options: dict[str, Any]) -> dict[str, Any]:
    """The options of S3 through ``proxy``, its bucket listed first.

    The proxy answers HEAD with ``Content-Length: 0`` (the length of the
    empty body it forwards), so s3fs would size every object 0; a listing
    gives s3fs the sizes instead.
    """
    proxied = {**options, "endpoint_url": proxy.url}
    s3fs.S3FileSystem(**proxied).ls(BUCKET, refresh=True)
    return proxied


def _gets(proxy: FaultProxy, key: str) -> list[RequestRecord]:
    return [r for r in proxy.requests if r.method == "GET" and r.path == f"/{BUCKET}/{key}"]


def _shows_no_credentials(error: BaseException) -> bool:
    text = str(error)
    return all(secret not in text for secret in CREDENTIALS.values())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["h5", "h5ad", "mtx", "csv"])
def test_s3_source_imports_as_the_local_file(
    kind: str, s3: dict[str, Any], local: Local, engine: Engine, tmp_path: Path
) -> None:
    """10x HDF5, H5AD, a 10x Matrix Market folder and a gzipped CSV from s3:// give the local fingerprint."""
    result = import_data(
        f"s3://{BUCKET}/{KEYS[kind]}",
        tmp_path / "remote.zarr",
        source_storage_options=s3,
        engine=engine,
        **QUIET,
    )
    assert result.dataset_fingerprint == local.fingerprint(kind, engine)
    assert result.path == tmp_path / "remote.zarr"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["h5", "h5ad"])
def test_hdf5_is_read_in_byte_ranges_and_downloaded_once_when_asked(
    kind: str, s3: dict[str, Any], local: Local, engine: Engine, small_blocks: int
) -> None:
    """Every GET of the file asks for one block at most; download=True fetches the file once, whole."""
    assert local.scratch is not None
    size = local.paths[kind].stat().st_size
    url = f"s3://{BUCKET}/{KEYS[kind]}"
    with FaultProxy(s3["endpoint_url"]) as proxy:
        options = {"source_storage_options": _proxied(proxy, s3), "engine": engine, **QUIET}
        ranged = import_data(url, local.scratch / f"ranged-{kind}.zarr", **options)
        gets = _gets(proxy, KEYS[kind])
        assert len(gets) > 1
        assert all(r.range is not None and r.range.startswith("bytes=") for r in gets)
        assert max(r.body_bytes for r in gets) <= small_blocks
        assert sum(r.body_bytes for r in gets) <= 3 * size  # a scan and a write, never whole reads
        proxy.requests.clear()
        downloaded = import_data(
            url, local.scratch / f"downloaded-{kind}.zarr", download=True, **options
        )
        assert [r.body_bytes for r in _gets(proxy, KEYS[kind])] == [size]
    expected = local.fingerprint(kind, engine)
    assert ranged.dataset_fingerprint == downloaded.dataset_fingerprint == expected


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["h5", "mtx"])
def test_http_source_imports_as_the_local_file(
    kind: str, shared_data: Path, local: Local, engine: Engine, tmp_path: Path
) -> None:
    """A 10x HDF5 file and a Matrix Market folder served over HTTP give the local fingerprint."""
    with http_server(shared_data) as url:
        result = import_data(
            f"{url}/{SHARED[kind]}", tmp_path / "http.zarr", engine=engine, **QUIET
        )
    assert result.dataset_fingerprint == local.fingerprint(kind, engine)


@pytest.mark.slow
@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("kind", ["h5", "h5ad"])
def test_faults_give_the_same_counts_or_a_named_error(
    kind: str, s3: dict[str, Any], local: Local, engine: Engine, tmp_path: Path
) -> None:
    """With 503s and dropped connections on a fifth of the GETs each, s3fs retries: the same data or a named error."""
    url = f"s3://{BUCKET}/{KEYS[kind]}"
    failure: StoreAccessError | SourceFormatError | None = None
    with FaultProxy(s3["endpoint_url"]) as proxy:
        options = _proxied(proxy, s3)
        proxy.faults = Faults(error_rate=0.2, drop_rate=0.2, methods=frozenset({"GET"}))
        try:
            result = import_data(
                url,
                tmp_path / "faults.zarr",
                source_storage_options=options,
                engine=engine,
                **QUIET,
            )
        except (StoreAccessError, SourceFormatError) as error:
            failure = error
        assert any(r.fault is not None for r in _gets(proxy, KEYS[kind]))
    if failure is None:
        assert result.dataset_fingerprint == local.fingerprint(kind, engine)
    else:
        assert url in str(failure)
        assert _shows_no_credentials(failure)
        assert not (tmp_path / "faults.zarr").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("function", "key", "options"),
    [
        (import_10x_h5, "missing.h5", {}),
        (import_h5ad, "missing.h5ad", {}),
        (import_h5ad, "missing.h5ad", {"download": True}),
        (import_10x_mtx, "missing-mtx", {}),
        (import_csv, "missing.csv.gz", {}),
        (import_data, "missing", {}),
    ],
    ids=["h5", "h5ad", "h5ad_download", "mtx", "csv", "import_data"],
)
def test_missing_s3_key_is_a_source_format_error_naming_the_url(
    function: Any, key: str, options: dict[str, Any], s3: dict[str, Any], tmp_path: Path
) -> None:
    """A missing key raises the SourceFormatError of a missing local file, naming the URL and no credential."""
    url = f"s3://{BUCKET}/{key}"
    with pytest.raises(SourceFormatError, match=rf"^{url}: no ") as caught:
        function(url, tmp_path / "ds.zarr", source_storage_options=s3, **options, **QUIET)
    assert _shows_no_credentials(caught.value)
    assert not (tmp_path / "ds.zarr").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "source", ["s3://bucket/pbmc.h5", "s3://bucket/pbmc-mtx", "s3://bucket/t.csv", "http"]
)
def test_unreachable_endpoint_is_a_store_access_error_naming_it(
    source: str, tmp_path: Path
) -> None:
    """A refused connection raises StoreAccessError (an OSError) naming the endpoint, not botocore's error."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    options = {
        **CREDENTIALS,
        "endpoint_url": endpoint,
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
    }
    if source == "http":
        source, options = f"{endpoint}/pbmc.h5ad", {}
    with pytest.raises(StoreAccessError, match=rf"cannot .* at endpoint {endpoint} ") as caught:
        import_data(source, tmp_path / "ds.zarr", source_storage_options=options, **QUIET)
    assert isinstance(caught.value, OSError)
    assert str(caught.value).startswith(source)
    assert _shows_no_credentials(caught.value)
    assert not (tmp_path / "ds.zarr").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("function", "kind", "download"),
    [(import_loom, "loom", False), (import_loom, "loom", True), (import_seurat, "rds", False)],
    ids=["loom", "loom_download", "seurat"],
)
def test_memory_source_imports_as_the_local_file(
    function: Any, kind: str, download: bool, local: Local, engine: Engine
) -> None:
    """A loom file (read in ranges, or downloaded to TMPDIR and removed) and a Seurat object from memory://."""
    assert local.scratch is not None
    path = local.paths[kind]
    fsspec.filesystem("memory").pipe(f"/remote-sources/{path.name}", path.read_bytes())
    options: dict[str, Any] = {"download": True} if download else {}
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as scratch:
        patch.setattr(tempfile, "tempdir", scratch)
        remote = function(
            f"memory://remote-sources/{path.name}",
            local.scratch / f"memory-{kind}-{download}.zarr",
            engine=engine,
            **options,
            **QUIET,
        )
        assert not any(Path(scratch).iterdir()), "a downloaded copy is removed"
    assert remote.dataset_fingerprint == local.fingerprint(kind, engine)


def test_access_errors_mask_credentials() -> None:
    """A credential that a failure's text holds is masked; the URL and the endpoint are named."""
    location = source_location(
        "s3://bucket/pbmc.h5",
        {**CREDENTIALS, "client_kwargs": {"endpoint_url": "https://s3.example.org"}},
    )
    error = _access_error(
        location, RuntimeError(f"signature for {CREDENTIALS['secret']} refused"), doing="open it"
    )
    assert isinstance(error, StoreAccessError)
    assert str(error).startswith(
        "s3://bucket/pbmc.h5: cannot open it at endpoint https://s3.example.org ("
    )
    assert "signature for *** refused" in str(error)
    assert _shows_no_credentials(error)
    assert "AKIA" not in repr(location)
