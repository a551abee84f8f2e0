"""The bounded source cache: sharded Zarr reads through it equal the source's, and it stays in bounds.

Sources are sharded arrays in ``memory://`` and on S3 (moto on 127.0.0.1,
behind a :class:`~cytepool.servers.FaultProxy` that counts the bytes each
read fetched). A sampler thread polls the size of the cache's directory
while threads and worker processes read through one cache.
"""

from __future__ import annotations

import importlib
import os
import pickle
import random
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import zarr
from distributed import Client, LocalCluster
from zarr.abc.store import SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import FsspecStore, WrapperStore

from cytearc.errors import OperationArgumentError, ReadOnlyStoreError
from cytearc.storage.cache import (
    DEFAULT_LIMIT,
    ENV_CACHE_BYTES,
    CacheStats,
    SourceCache,
    SourceCacheWarning,
    cache_limit,
)
from cytearc.storage.caching_store import CachingStore
from cytepool.servers import FaultProxy

if TYPE_CHECKING:
    from collections.abc import Iterator

    from zarr.abc.store import ByteRequest, Store
    from zarr.core.buffer import Buffer, BufferPrototype

SHAPE = (2000, 300)
SHARDS = (200, 300)
CHUNKS = (50, 100)
N_SHARDS = SHAPE[0] // SHARDS[0]


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    """Sparse-ish counts: a fifth of the entries nonzero."""
    rng = np.random.default_rng(7)
    dense = rng.integers(1, 5000, size=SHAPE)
    return (dense * (rng.random(SHAPE) < 0.2)).astype(np.uint16)


def _write(store: Store, values: np.ndarray) -> int:
    """Write ``values`` as a sharded array at the root of ``store``; the bytes of its shards."""
    array = zarr.create_array(store, shape=SHAPE, shards=SHARDS, chunks=CHUNKS, dtype="u2")
    array[:] = values
    prototype = default_buffer_prototype()
    total = 0
    for i in range(N_SHARDS):
        shard = zarr.core.sync.sync(store.get(f"c/{i}/0", prototype))
        assert shard is not None
        total += len(shard)
    return total


@pytest.fixture
def memory_source(values: np.ndarray) -> tuple[FsspecStore, int]:
    """The values in a new ``memory://`` store, and the bytes of its shards."""
    store = FsspecStore.from_url(f"memory://cache-{uuid.uuid4().hex}/a.zarr")
    return store, _write(store, values)


class RecordingStore(WrapperStore["Store"]):
    """Records every key and byte request that reaches the source."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.requests: list[tuple[str, ByteRequest | None]] = []

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        self.requests.append((key, byte_range))
        return await self._store.get(key, prototype, byte_range)

    def data_requests(self) -> list[tuple[str, ByteRequest | None]]:
        """The requests of shards (not of metadata)."""
        return [(k, r) for k, r in self.requests if k.startswith("c/")]


def _open(store: Store) -> zarr.Array[Any]:
    return zarr.open_array(store=store, mode="r")


def _read_and_compare(store: Store, values: np.ndarray, *, times: int) -> None:
    """Read the whole array and a sparse region ``times`` times; both equal ``values``."""
    for _ in range(times):
        np.testing.assert_array_equal(_open(store)[:], values)
        np.testing.assert_array_equal(_open(store)[9:444, 2:250], values[9:444, 2:250])


def _directory_bytes(path: Path) -> int:
    """The total size of the files in ``path`` (0 when there is no such folder)."""
    total = 0
    try:
        with os.scandir(path) as items:
            for item in items:
                try:
                    total += item.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return total


class Sampler:
    """Polls the size of a cache's directory every millisecond or two, in a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.largest = 0
        self.samples = 0
        self.nonzero = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            size = _directory_bytes(self.path)
            self.largest = max(self.largest, size)
            self.samples += 1
            self.nonzero += size > 0
            time.sleep(0.001)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _regions(seed: int, n: int) -> list[tuple[int, int, int, int]]:
    """Random row and column ranges; every other one spans all columns (whole shards)."""
    rng = random.Random(seed)
    regions = []
    for i in range(n):
        r0 = rng.randrange(0, SHAPE[0] - 1)
        r1 = min(SHAPE[0], r0 + rng.randrange(1, 700))
        c0, c1 = (0, SHAPE[1]) if i % 2 else sorted(rng.sample(range(SHAPE[1] + 1), 2))
        regions.append((r0, r1, c0, c1))
    return regions


# --- the limit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1048576", 1048576),
        ("512M", 512 * 10**6),
        ("2G", 2 * 10**9),
        ("1.5GiB", 3 * 2**29),
        ("300k", 300_000),
        ("64 MiB", 64 * 2**20),
        (" 0 ", 0),
    ],
)
def test_cache_limit_reads_bytes_and_sizes(text: str, expected: int) -> None:
    """Bytes and sizes read as dask's parse_bytes does: bare letters decimal, ...iB binary."""
    assert cache_limit(text) == expected


def test_cache_limit_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a value the variable is read; unset or blank gives 2 GiB, 0 turns the cache off."""
    monkeypatch.delenv(ENV_CACHE_BYTES, raising=False)
    assert cache_limit() == DEFAULT_LIMIT == 2 * 2**30
    monkeypatch.setenv(ENV_CACHE_BYTES, "  ")
    assert cache_limit() == DEFAULT_LIMIT
    monkeypatch.setenv(ENV_CACHE_BYTES, "300k")
    assert cache_limit() == 300_000
    assert SourceCache.from_env().limit == 300_000
    monkeypatch.setenv(ENV_CACHE_BYTES, "0")
    assert cache_limit() == 0
    assert not SourceCache.from_env().enabled


@pytest.mark.parametrize("text", ["lots", "-1", "1.5", "M", "12 parsecs", "1e6", "0x10"])
def test_a_malformed_limit_is_a_named_error(text: str) -> None:
    """A value that is not bytes or a size names the variable, the value and an example."""
    with pytest.raises(OperationArgumentError) as caught:
        cache_limit(text)
    message = str(caught.value)
    assert ENV_CACHE_BYTES in message
    assert repr(text) in message
    assert "'512M'" in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("limit", [-1, 1.5, True, "1G"])
def test_a_limit_that_is_not_bytes_is_refused(limit: object) -> None:
    """The constructor takes a number of bytes >= 0 only."""
    with pytest.raises(OperationArgumentError, match="limit: expected a number of bytes"):
        SourceCache(limit, parent=None)  # type: ignore[arg-type]


# --- reading through the cache -----------------------------------------------


def test_a_memory_source_reads_equal_and_the_second_read_is_local(
    memory_source: tuple[FsspecStore, int], values: np.ndarray, tmp_path: Path
) -> None:
    """Whole shards are cached: a second full read fetches nothing from the source."""
    source, encoded = memory_source
    recorder = RecordingStore(source)
    with SourceCache(2 * encoded, parent=tmp_path) as cache:
        array = _open(CachingStore(recorder, cache, prefix="a"))
        np.testing.assert_array_equal(array[:], values)
        first = cache.stats()
        assert first.misses == N_SHARDS
        assert first.bytes_fetched == encoded
        assert first.stored == N_SHARDS
        assert _directory_bytes(cache.path) == encoded
        recorder.requests.clear()
        np.testing.assert_array_equal(array[:], values)
        assert recorder.data_requests() == []
        second = cache.stats()
        assert second.bytes_fetched == first.bytes_fetched
        assert second.hits == N_SHARDS
        assert second.bytes_served_from_cache == encoded
        recorder.requests.clear()
        np.testing.assert_array_equal(array[17:1333, 30:170], values[17:1333, 30:170])
        assert recorder.data_requests() == []


def test_shard_index_suffixes_are_cached(
    memory_source: tuple[FsspecStore, int], values: np.ndarray, tmp_path: Path
) -> None:
    """A sparse read takes each shard's index once; the chunk ranges themselves pass through."""
    source, encoded = memory_source
    recorder = RecordingStore(source)
    with SourceCache(encoded, parent=tmp_path) as cache:
        array = _open(CachingStore(recorder, cache, prefix="a"))
        np.testing.assert_array_equal(array[120:850, 10:60], values[120:850, 10:60])
        suffixes = [k for k, r in recorder.data_requests() if isinstance(r, SuffixByteRequest)]
        assert sorted(suffixes) == [f"c/{i}/0" for i in range(5)]
        recorder.requests.clear()
        np.testing.assert_array_equal(array[120:850, 10:60], values[120:850, 10:60])
        again = recorder.data_requests()
        assert again, "the chunks of a sparse read are not cached"
        assert not any(isinstance(r, SuffixByteRequest) for _, r in again)
        assert cache.stats().hits == 5


def test_prefetch_caches_whole_shards_for_a_dense_reader(
    memory_source: tuple[FsspecStore, int], values: np.ndarray, tmp_path: Path
) -> None:
    """After prefetch, the index and chunk ranges of partial reads are served from the cached shards."""
    source, encoded = memory_source
    recorder = RecordingStore(source)
    with SourceCache(encoded, parent=tmp_path) as cache:
        store = CachingStore(recorder, cache, prefix="a")
        assert store.prefetch([f"c/{i}/0" for i in range(3)] + ["c/99/0"]) == 3
        recorder.requests.clear()
        np.testing.assert_array_equal(_open(store)[5:590, 1:299], values[5:590, 1:299])
        assert recorder.data_requests() == []


def test_sources_are_kept_apart_by_their_prefixes(values: np.ndarray, tmp_path: Path) -> None:
    """Two sources with the same keys read through one cache give their own values."""
    other = (values // 2).astype(np.uint16)
    first = FsspecStore.from_url(f"memory://cache-{uuid.uuid4().hex}/a.zarr")
    second = FsspecStore.from_url(f"memory://cache-{uuid.uuid4().hex}/a.zarr")
    encoded = _write(first, values) + _write(second, other)
    with SourceCache(encoded, parent=tmp_path) as cache:
        for _ in range(2):
            np.testing.assert_array_equal(_open(CachingStore(first, cache, prefix="x"))[:], values)
            np.testing.assert_array_equal(_open(CachingStore(second, cache, prefix="y"))[:], other)
        assert cache.stats().hits == 2 * N_SHARDS


def test_the_caching_store_is_read_only(memory_source: tuple[FsspecStore, int]) -> None:
    """Writes through the cache are refused with a named error; Zarr's write modes too."""
    source, _ = memory_source
    store = CachingStore(source, SourceCache(0), prefix="a")
    assert store.read_only
    assert not store.supports_writes
    buffer = default_buffer_prototype().buffer.from_bytes(b"x")
    with pytest.raises(ReadOnlyStoreError, match="read-only"):
        zarr.core.sync.sync(store.set("c/0/0", buffer))
    with pytest.raises(ReadOnlyStoreError):
        store.with_read_only(read_only=False)
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_array(store=store, mode="r+")


def test_the_caching_store_pickles_with_its_cache(
    memory_source: tuple[FsspecStore, int], tmp_path: Path
) -> None:
    """A pickled copy names the same directory and bound; the directory exists for it to use."""
    source, encoded = memory_source
    with SourceCache(encoded, parent=tmp_path) as cache:
        store = CachingStore(source, cache, prefix="a")
        copy = pickle.loads(pickle.dumps(store))
        assert copy == store
        assert copy.cache.path == cache.path
        assert copy.cache.limit == encoded
        assert cache.path.is_dir()
        copy.cache.close()
        assert cache.path.is_dir(), "only the creating cache removes the directory"
        assert not copy.cache.enabled
        assert cache.enabled
    assert not cache.path.exists()


@pytest.mark.slow
def test_an_s3_source_is_fetched_once(
    s3_options: dict[str, Any], s3_bucket: str, values: np.ndarray, tmp_path: Path
) -> None:
    """Through a proxy that counts GETs: a second full read and a second index read fetch nothing."""
    url = f"{s3_bucket}/a.zarr"
    encoded = _write(FsspecStore.from_url(url, storage_options=s3_options), values)
    with (
        FaultProxy(s3_options["endpoint_url"]) as proxy,
        SourceCache(encoded, parent=tmp_path) as cache,
    ):
        proxied = {**s3_options, "endpoint_url": proxy.url}
        store = CachingStore(FsspecStore.from_url(url, storage_options=proxied), cache, prefix="s3")
        array = _open(store)

        np.testing.assert_array_equal(array[300:900, 40:80], values[300:900, 40:80])
        suffix_gets = [
            r for r in proxy.requests if r.method == "GET" and (r.range or "").startswith("bytes=-")
        ]
        assert sorted(r.path.rsplit("/c/", 1)[1] for r in suffix_gets) == [
            "1/0",
            "2/0",
            "3/0",
            "4/0",
        ]
        before = len(proxy.requests)
        np.testing.assert_array_equal(array[300:900, 40:80], values[300:900, 40:80])
        assert not [r for r in proxy.requests[before:] if (r.range or "").startswith("bytes=-")]

        np.testing.assert_array_equal(array[:], values)
        assert cache.stats().stored == 4 + N_SHARDS
        fetched = proxy.bytes_sent(path_contains="/c/")
        np.testing.assert_array_equal(array[:], values)
        np.testing.assert_array_equal(array[1:1999, 3:299], values[1:1999, 3:299])
        assert proxy.bytes_sent(path_contains="/c/") == fetched


# --- the bound ---------------------------------------------------------------


def test_the_bound_holds_under_threads(tmp_path: Path) -> None:
    """Eight threads caching values of random sizes: the directory never holds more than the limit."""
    limit = 200_000
    sizes = random.Random(3).choices(range(1, 60_000), k=60)
    payloads = {f"src/c/{i}": bytes([i % 251]) * size for i, size in enumerate(sizes)}
    keys = list(payloads)
    cache = SourceCache(limit, parent=tmp_path)
    assert cache.put("src/too-big", "object", b"x" * (limit + 1)) is False

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(150):
            key = rng.choice(keys[: rng.choice([10, 60])])
            assert cache.get_or_fetch(key, "object", lambda key=key: payloads[key]) == payloads[key]

    with Sampler(cache.path) as sampler, ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    stats = cache.stats()
    cache.close()
    assert sampler.largest <= limit
    assert sampler.nonzero > 10
    assert stats.evictions > 0
    assert stats.hits > 0
    assert stats.hits + stats.misses == 8 * 150


@pytest.mark.slow
def test_the_bound_holds_under_threads_and_worker_processes(
    s3_options: dict[str, Any], s3_bucket: str, values: np.ndarray, tmp_path: Path
) -> None:
    """Eight threads and two worker processes read random regions through one cache a third of the data."""
    url = f"{s3_bucket}/a.zarr"
    encoded = _write(FsspecStore.from_url(url, storage_options=s3_options), values)
    limit = encoded // 3
    cache = SourceCache(limit, parent=tmp_path)
    store = CachingStore(FsspecStore.from_url(url, storage_options=s3_options), cache, prefix="s3")

    def read_region(
        store: CachingStore, region: tuple[int, int, int, int]
    ) -> tuple[Any, CacheStats, int, float, float]:
        began = time.monotonic()
        r0, r1, c0, c1 = region
        block = zarr.open_array(store=store, mode="r")[r0:r1, c0:c1]
        return block, store.cache.stats(), os.getpid(), began, time.monotonic()

    def in_thread(seed: int) -> tuple[float, float]:
        began = time.monotonic()
        array = _open(store)
        for r0, r1, c0, c1 in _regions(seed, 6):
            np.testing.assert_array_equal(array[r0:r1, c0:c1], values[r0:r1, c0:c1])
        return began, time.monotonic()

    regions = _regions(100, 24)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(lambda: importlib.import_module("cytearc.storage.cache") and None)
        with Sampler(cache.path) as sampler, ThreadPoolExecutor(8) as pool:
            futures = [client.submit(read_region, store, r, pure=False) for r in regions]
            threads = [pool.submit(in_thread, seed) for seed in range(8)]
            results = client.gather(futures)
            spans = [t.result() for t in threads]
    for (r0, r1, c0, c1), (block, *_) in zip(regions, results, strict=True):
        np.testing.assert_array_equal(block, values[r0:r1, c0:c1])
    threads_began, threads_ended = min(b for b, _ in spans), max(e for _, e in spans)
    assert any(b < threads_ended and e > threads_began for *_, b, e in results), "concurrent"
    assert len({pid for _, _, pid, _, _ in results} - {os.getpid()}) == 2
    in_workers: dict[int, CacheStats] = {}
    for _, stats, pid, _, _ in results:
        if pid not in in_workers or stats.hits + stats.misses > sum(
            (in_workers[pid].hits, in_workers[pid].misses)
        ):
            in_workers[pid] = stats
    assert sampler.largest <= limit
    assert sampler.nonzero > 10
    evictions = cache.stats().evictions + sum(s.evictions for s in in_workers.values())
    assert evictions > 0
    assert any(s.hits for s in in_workers.values()), "the workers used the shared directory"
    assert cache.path.is_dir(), "worker processes leave the directory to its creator"
    cache.close()
    assert not cache.path.exists()


# --- the directory's life ----------------------------------------------------


def test_close_removes_the_directory_and_reads_continue(tmp_path: Path) -> None:
    """The first fetch creates the directory, close removes it; later reads go to the source."""
    cache = SourceCache(1000, parent=tmp_path)
    assert cache.path.parent == tmp_path
    assert cache.path.name.startswith(f"cytearc-source-cache-{os.getpid()}-")
    assert not cache.path.exists()
    assert cache.get_or_fetch("s/c/0", "object", lambda: b"abc") == b"abc"
    assert cache.path.is_dir()
    cache.close()
    assert not cache.path.exists()
    assert cache.get_or_fetch("s/c/0", "object", lambda: b"fresh") == b"fresh"
    assert not cache.path.exists()
    assert list(tmp_path.iterdir()) == []


def test_the_default_parent_is_the_temporary_directory() -> None:
    """Without a parent the directory is made in tempfile.gettempdir() (TMPDIR)."""
    import tempfile  # noqa: PLC0415

    with SourceCache(100) as cache:
        assert cache.path.parent == Path(tempfile.gettempdir())


@pytest.mark.slow
def test_a_process_that_exits_removes_its_directory(tmp_path: Path) -> None:
    """A process that fetched and exits normally leaves no directory behind."""
    script = (
        "import sys\n"
        "from cytearc.storage.cache import SourceCache\n"
        "cache = SourceCache(1000, parent=sys.argv[1])\n"
        "assert cache.get_or_fetch('s/c/0', 'object', lambda: b'x' * 10) == b'x' * 10\n"
        "assert cache.path.is_dir()\n"
        "print(cache.path)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    path = Path(done.stdout.strip())
    assert path.parent == tmp_path
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_limit_zero_never_creates_the_directory(
    memory_source: tuple[FsspecStore, int], values: np.ndarray, tmp_path: Path
) -> None:
    """With limit 0 reads go to the source and nothing is written, not even when pickled."""
    source, _ = memory_source
    cache = SourceCache(0, parent=tmp_path)
    store = CachingStore(source, cache, prefix="a")
    for _ in range(2):
        np.testing.assert_array_equal(_open(store)[:], values)
        np.testing.assert_array_equal(_open(store)[3:77, 5:9], values[3:77, 5:9])
    pickle.loads(pickle.dumps(store))
    cache.close()
    assert list(tmp_path.iterdir()) == []
    assert cache.stats().hits == 0
    assert cache.stats().stored == 0


def test_parts_of_dead_processes_are_reclaimed(tmp_path: Path) -> None:
    """A value a killed process was writing stops reserving space at the next write."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    cache = SourceCache(100, parent=tmp_path)
    assert cache.put("s/c/0", "object", b"a" * 10)
    stale = cache.path / f"{'0' * 64}.{dead.pid}.ab12.100.part"
    stale.write_bytes(b"half")
    assert cache.put("s/c/1", "object", b"b" * 60)
    assert not stale.exists()
    assert cache.lookup("s/c/1", "object") == b"b" * 60
    cache.close()


# --- faults of the local directory -------------------------------------------


def test_a_file_at_the_cache_path_turns_the_cache_off(
    memory_source: tuple[FsspecStore, int], values: np.ndarray, tmp_path: Path
) -> None:
    """A file where the directory goes: one warning, correct values, no use of the cache."""
    source, encoded = memory_source
    cache = SourceCache(encoded, parent=tmp_path)
    cache.path.write_bytes(b"not a directory")
    store = CachingStore(source, cache, prefix="a")
    with pytest.warns(SourceCacheWarning, match="reads continue from the sources") as record:
        _read_and_compare(store, values, times=3)
    assert len(record) == 1
    assert str(cache.path) in str(record[0].message)
    assert not cache.enabled
    stats = cache.stats()
    assert (stats.hits, stats.stored, stats.bytes_served_from_cache) == (0, 0, 0)
    assert stats.bytes_fetched >= 3 * encoded
    cache.close()
    assert cache.path.read_bytes() == b"not a directory", "close removes only what it created"


def test_a_parent_that_is_a_file_turns_the_cache_off(
    memory_source: tuple[FsspecStore, int], values: np.ndarray, tmp_path: Path
) -> None:
    """A parent that is a file: the directory cannot be made, reads continue, one warning."""
    source, encoded = memory_source
    parent = tmp_path / "a-file"
    parent.write_bytes(b"")
    cache = SourceCache(encoded, parent=parent)
    with pytest.warns(SourceCacheWarning) as record:
        _read_and_compare(CachingStore(source, cache, prefix="a"), values, times=2)
    copy = pickle.loads(pickle.dumps(cache))
    assert len(record) == 1
    assert not copy.enabled
    assert cache.stats().stored == 0
    assert cache.get_or_fetch("a/c/0", "object", lambda: b"direct") == b"direct"


def test_a_directory_replaced_by_a_file_turns_the_cache_off(tmp_path: Path) -> None:
    """A directory removed under a running cache and replaced by a file: one warning, reads continue."""
    cache = SourceCache(1000, parent=tmp_path)
    assert cache.get_or_fetch("s/c/0", "object", lambda: b"one") == b"one"
    for item in cache.path.iterdir():
        item.unlink()
    cache.path.rmdir()
    cache.path.write_bytes(b"")
    with pytest.warns(SourceCacheWarning) as record:
        got = [cache.get_or_fetch(f"s/c/{i}", "object", lambda i=i: bytes([i])) for i in range(5)]
    assert got == [bytes([i]) for i in range(5)]
    assert len(record) == 1
    assert cache.stats().stored == 1
    cache.close()
    assert cache.path.is_file()


@pytest.fixture(autouse=True)
def _no_directory_left() -> Iterator[None]:
    """No test leaves a cache directory in the system temporary folder."""
    import tempfile  # noqa: PLC0415

    mine = f"cytearc-source-cache-{os.getpid()}-"
    before = {p.name for p in Path(tempfile.gettempdir()).glob(f"{mine}*")}
    yield
    after = {p.name for p in Path(tempfile.gettempdir()).glob(f"{mine}*")}
    assert after <= before
