"""A composite of two stores on S3 (moto) against a local merged copy: rna_standard seconds, memory, bytes fetched.

Run from the project root (the two seeded source stores are generated once
into ``--out`` and reused; everything else is made again each run)::

    .venv/bin/python benchmarks/bench_composite.py                     # 2 x 50k cells x 10k genes
    .venv/bin/python benchmarks/bench_composite.py --cells 3000 --genes 2000   # quick check
    .venv/bin/python benchmarks/bench_composite.py --json results.json  # also write the JSON

Steps, in one process and on one local Dask cluster (``--mem-budget``,
``--workers``):

- **sources** (not timed in the goal): ``cytearc.datasets.write_store`` of
  ``--cells`` x ``--genes`` with seeds ``--seed`` and ``--seed + 1`` (the
  same gene ids), reused while they open with that shape;
- **warm-up** (not timed): the recipe on a fresh 2,000 x 3,000 store and one
  pynndescent search of 10,000 points, so that numba's compilation of
  pynndescent and UMAP (once per process) falls in neither timed run;
- **upload** (not timed in the goal): a moto S3 server on 127.0.0.1
  (:func:`cytepool.servers.moto_server`) with a
  :class:`cytepool.servers.FaultProxy` in front of it (no faults; it records
  every request, so the bytes each GET returned are counted by key and
  range); each source is written to ``s3://bench/NAME.zarr`` by
  ``repack_zarr`` (profile ``fast_local``: the same layout, zstd) straight to
  moto, not through the proxy;
- **composite**: ``create_composite`` of the two S3 sources (read through the
  proxy), a local directory; then ``DataStore(composite, zarr_mode="r+",
  source_storage_options=...)`` and ``ds.pipeline.run("rna_standard", ...)``
  with the source cache at its default (``CYTEARC_SOURCE_CACHE_BYTES`` as
  set; 2 GiB when unset);
- **merged copy**: ``DataStoreMerge`` of the same two S3 sources (through the
  proxy: the bytes a full copy fetches, measured) into a local store, then
  the same recipe on it.

Each step is timed with the peak RSS of all processes
(:class:`cytearc.pipeline.rss.RssSampler` as ``run.summary()`` samples it:
this process and its descendants, which include the moto server and the
in-process proxy, plus the Dask workers); the recipe's stages come from
``run.summary()``. The moto server's own RSS is printed, as it is inside
every peak of both runs.

Bytes: the GET bodies of the sources' count shards (``counts`` and
``countsT``, keys ``.../c/...``) that the proxy returned in each window,
against the encoded bytes of those arrays on S3 (what a full copy would
fetch); repeats are counted by (key, Range header) and, exactly, as bytes
of a key covered by more than one GET (suffix ranges resolved with the
object's size). Cache statistics are summed over this process and each
worker (``SourceCache.stats()`` is per process).

Goals of the issue: the recipe on the composite within 1.5x its seconds on
the local merged copy with the cache at its default, and no source byte
fetched twice while the cache holds it. Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import RSS_SAMPLING, machine

from cytearc import DataStore
from cytearc.datasets import write_store
from cytearc.engine.cluster import get_engine
from cytearc.ops.neighbors import EXACT_BELOW, knn
from cytearc.pipeline.rss import RssSampler
from cytearc.storage.cache import ENV_CACHE_BYTES, SourceCache, cache_limit
from cytearc.tools import DataStoreMerge, create_composite, repack_zarr
from cytepool.servers import FaultProxy, moto_server

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from distributed import Client

    from cytepool.servers import RequestRecord

RECIPE: Final = "rna_standard"
RECIPE_OPTIONS: Final = {"n_top": 2000, "n_comps": 50, "k": 15, "resolution": 1.0}
"""As ``bench_analysis.py`` runs it."""
BUCKET: Final = "bench"
NAMES: Final = ("a", "b")
COUNT_ARRAYS: Final = ("counts", "countsT")
MB: Final = 1e6


# -- steps ------------------------------------------------------------------------


def ensure_sources(args: argparse.Namespace) -> dict[str, Path]:
    """The two seeded source stores (generated once into ``--out``, then reused)."""
    folder = args.out / f"cells{args.cells}_genes{args.genes}_seed{args.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    stores = {}
    for offset, name in enumerate(NAMES):
        path = folder / f"{name}.zarr"
        try:
            shape = DataStore(path, show_progress=False).RNA.shape
        except Exception:  # absent or partial: write it again
            shape = None
        if shape != (args.cells, args.genes):
            print(f"generating {path} ...", file=sys.stderr)
            start = time.perf_counter()
            write_store(
                path,
                n_cells=args.cells,
                n_genes=args.genes,
                seed=args.seed + offset,
                overwrite=True,
                mem_budget=args.mem_budget,
                workers=args.workers,
            )
            print(f"  {time.perf_counter() - start:.1f} s", file=sys.stderr)
        stores[name] = path
    return stores


class Clock:
    """Samples, every ``interval`` s, the requests the proxy has recorded and the CPU seconds of all processes.

    CPU seconds (user + system) are summed over this process (the client,
    with the proxy's threads), the Dask workers and the moto server; unlike
    wall seconds they hardly change when other work shares the machine.
    """

    def __init__(
        self,
        proxy: FaultProxy,
        processes: dict[str, list[psutil.Process]],
        *,
        interval: float = 0.1,
    ) -> None:
        self.proxy = proxy
        self.processes = processes
        self.interval = interval
        self.marks: list[tuple[float, int, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-clock", daemon=True)

    def _mark(self) -> None:
        self.marks.append((time.time(), len(self.proxy.requests), cpu_seconds(self.processes)))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._mark()

    def __enter__(self) -> Clock:
        self._mark()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._mark()

    def at(self, when: float) -> tuple[int, dict[str, float]]:
        """Requests recorded and CPU seconds by wall-clock time ``when`` (the last mark not after it)."""
        found = self.marks[0]
        for mark in self.marks:
            if mark[0] > when:
                break
            found = mark
        return found[1], found[2]

    def cpu_between(self, start: float, stop: float) -> dict[str, float]:
        """CPU seconds of each group of processes from ``start`` to ``stop`` (wall clock)."""
        first, last = self.at(start)[1], self.at(stop)[1]
        return {name: last[name] - first[name] for name in last}


def cpu_seconds(processes: dict[str, list[psutil.Process]]) -> dict[str, float]:
    """User + system CPU seconds of each group of processes so far."""
    seconds = {}
    for name, group in processes.items():
        total = 0.0
        for process in group:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
        seconds[name] = total
    return seconds


def timed(
    client: Client | None,
    work: Callable[[], Any],
    processes: dict[str, list[psutil.Process]] | None = None,
) -> tuple[dict[str, Any], Any]:
    """Run ``work()``: its seconds, the peak RSS of all processes, CPU seconds, and its result."""
    before = cpu_seconds(processes or {})
    with RssSampler(client) as sampler:
        start = time.perf_counter()
        result = work()
        seconds = time.perf_counter() - start
    after = cpu_seconds(processes or {})
    row: dict[str, Any] = {"seconds": seconds, "peak": sampler.metrics()["peakBytes"]}
    if processes:
        row["cpu"] = {name: after[name] - before[name] for name in after}
    return row, result


def moto_process() -> psutil.Process | None:
    """The moto server this process started (a child running ``moto.server``), to report its RSS."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "moto.server" in " ".join(child.cmdline()):
                return child
    return None


def _worker_cache_stats(cache: SourceCache) -> dict[str, int]:
    """Run on a worker: what that process read through the composite's cache."""
    return dataclasses.asdict(cache.stats())


def cache_report(ds: DataStore, client: Client | None) -> dict[str, Any]:
    """The composite's cache: its bound, its bytes on disk, and stats summed over all processes."""
    assert ds.composite is not None
    cache = ds.composite.cache
    per_process = {"client": dataclasses.asdict(cache.stats())}
    if client is not None:
        per_process.update(client.run(_worker_cache_stats, cache))
    total: Counter[str] = Counter()
    for stats in per_process.values():
        total.update(stats)
    on_disk = (
        sum(p.stat().st_size for p in cache.path.glob("*.entry")) if cache.path.is_dir() else 0
    )
    return {
        "limit": cache.limit,
        "entries": len(list(cache.path.glob("*.entry"))) if cache.path.is_dir() else 0,
        "bytesOnDisk": on_disk,
        "total": dict(total),
        "perProcess": per_process,
    }


# -- bytes ------------------------------------------------------------------------


def count_keys(fs: Any, url: str) -> dict[str, int]:  # noqa: ANN401
    """The shard keys of a store's count arrays on S3 (``bucket/...``) and their sizes."""
    keys = {}
    for array in COUNT_ARRAYS:
        prefix = f"{url.removeprefix('s3://')}/matrices/RNA/{array}/c/"
        found = fs.find(prefix.rstrip("/"), detail=True)
        keys.update({k: int(v["size"]) for k, v in found.items() if k.startswith(prefix)})
    return keys


def _key(record: RequestRecord) -> str:
    return unquote(urlsplit(record.path).path).lstrip("/")


def _interval(byte_range: str | None, size: int) -> tuple[int, int, str]:
    """The bytes ``[start, stop)`` of an object of ``size`` bytes a GET with this Range header asks for."""
    if byte_range is None:
        return 0, size, "whole"
    first, _, last = byte_range.removeprefix("bytes=").partition("-")
    if not first:
        return max(size - int(last), 0), size, "suffix"
    return int(first), min(int(last) + 1, size) if last else size, "range"


def _union(intervals: list[tuple[int, int]]) -> int:
    covered, reach = 0, -1
    for start, stop in sorted(intervals):
        if stop <= reach:
            continue
        covered += stop - max(start, reach)
        reach = stop
    return covered


def fetch_report(records: list[RequestRecord], keys: dict[str, int]) -> dict[str, Any]:
    """GETs of count shards in ``records``: bytes, repeats by (key, range) and bytes covered twice."""
    gets = [r for r in records if r.method == "GET" and 200 <= r.status < 300]
    shard_gets = [r for r in gets if _key(r) in keys]
    repeats = Counter((_key(r), r.range) for r in shard_gets)
    by_kind: Counter[str] = Counter()
    repeated_by_kind: Counter[str] = Counter()
    repeated_bytes = 0
    body_by_request: dict[tuple[str, str | None], int] = {}
    intervals: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in shard_gets:
        key = _key(r)
        start, stop, kind = _interval(r.range, keys[key])
        by_kind[kind] += r.body_bytes
        intervals[key].append((start, stop))
        body_by_request[key, r.range] = r.body_bytes
    for (key, byte_range), n in repeats.items():
        if n > 1:
            kind = _interval(byte_range, keys[key])[2]
            repeated_by_kind[kind] += 1
            repeated_bytes += (n - 1) * body_by_request[key, byte_range]
    repeated = sorted(((n, k, rng) for (k, rng), n in repeats.items() if n > 1), reverse=True)
    fetched = sum(r.body_bytes for r in shard_gets)
    distinct = sum(_union(v) for v in intervals.values())
    return {
        "getRequests": len(gets),
        "getBytes": sum(r.body_bytes for r in gets),
        "shardGets": len(shard_gets),
        "shardBytes": fetched,
        "shardBytesByKind": dict(by_kind),
        "distinctShardBytes": distinct,
        "bytesFetchedTwiceOrMore": fetched - distinct,
        "repeatedKeyRanges": sum(1 for n in repeats.values() if n > 1),
        "repeatedKeyRangesByKind": dict(repeated_by_kind),
        "repeatedKeyRangeBytes": repeated_bytes,
        "keysTouched": len(intervals),
        "keysFetchedWhole": len({_key(r) for r in shard_gets if r.range is None}),
        "repeatedExamples": [{"key": k, "range": rng, "gets": n} for n, k, rng in repeated[:10]],
    }


# -- the run ----------------------------------------------------------------------


def stage_rows(run: Any, clock: Clock) -> list[dict]:  # noqa: ANN401
    """``run.summary()`` per stage, with the request window and CPU seconds of each stage."""
    summary = run.summary()
    rows = []
    for record, row in zip(run.stages, summary.itertuples(), strict=True):
        rss: Any = record.metrics.get("rss", {}).get("peakBytes", {})
        start = record.started_at_ns / 1e9
        stop = (record.finished_at_ns or time.time_ns()) / 1e9
        rows.append(
            {
                "stage": str(row.stage),
                "seconds": float(row.seconds),
                "peak": {k: int(rss.get(k, 0)) for k in ("total", "client", "workers")},
                "cpu": clock.cpu_between(start, stop),
                "window": (clock.at(start)[0], clock.at(stop + 0.2)[0]),
            }
        )
    return rows


def open_store(
    store: Path,
    client: Client | None,
    args: argparse.Namespace,
    processes: dict[str, list[psutil.Process]],
    **options: Any,
) -> tuple[dict, DataStore]:
    """``DataStore(store, zarr_mode="r+", ...)``, timed."""
    return timed(
        client,
        lambda: DataStore(
            store,
            zarr_mode="r+",
            mem_budget=args.mem_budget,
            workers=args.workers,
            show_progress=False,
            **options,
        ),
        processes,
    )


def run_recipe(ds: DataStore, client: Client | None) -> tuple[dict, Any]:
    """The recipe on ``ds``, timed."""
    return timed(client, lambda: ds.pipeline.run(RECIPE, **RECIPE_OPTIONS))


def benchmark(args: argparse.Namespace) -> dict[str, Any]:  # noqa: PLR0915 (a linear script)
    header = machine(("zarr", "dask", "distributed", "s3fs", "moto"), notes=[])
    sources = ensure_sources(args)
    engine = get_engine(mem_budget=args.mem_budget, workers=args.workers)
    client = engine.client
    work = args.out / "run"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    # numba compiles pynndescent's and UMAP's kernels on their first use in a process;
    # a recipe on a small fresh store and one approximate kNN search (the recipe's search
    # is exact below EXACT_BELOW cells) first, so that neither timed run pays for it
    start = time.perf_counter()
    warm = write_store(
        work / "warmup.zarr",
        n_cells=2000,
        n_genes=3000,
        seed=args.seed,
        mem_budget=args.mem_budget,
        workers=args.workers,
    )
    DataStore(
        warm, zarr_mode="r+", mem_budget=args.mem_budget, workers=args.workers, show_progress=False
    ).pipeline.run(RECIPE, **RECIPE_OPTIONS)
    points = np.random.default_rng(args.seed).random((EXACT_BELOW, 50), dtype=np.float32)
    knn(points, int(RECIPE_OPTIONS["k"]), seed=args.seed)
    warmup_seconds = time.perf_counter() - start
    result: dict[str, Any] = {
        "machine": header,
        "warmupSeconds": warmup_seconds,
        "loadAverageBefore": os.getloadavg(),
        "cellsPerSource": args.cells,
        "genes": args.genes,
        "seed": args.seed,
        "memBudget": args.mem_budget,
        "workers": args.workers,
        "recipe": {"name": RECIPE, **RECIPE_OPTIONS},
        "cacheLimit": cache_limit(),
        "cacheEnv": os.environ.get(ENV_CACHE_BYTES),
    }
    import s3fs  # noqa: PLC0415 (only the S3 part needs it)

    with moto_server() as direct, FaultProxy(direct["endpoint_url"]) as proxy:
        proxied = {**direct, "endpoint_url": proxy.url}
        fs = s3fs.S3FileSystem(**direct, skip_instance_cache=True)
        fs.mkdir(BUCKET)
        urls: dict[str, str] = {}
        start = time.perf_counter()
        for name, path in sources.items():
            urls[name] = str(
                repack_zarr(
                    path,
                    f"s3://{BUCKET}/{name}.zarr",
                    destination_storage_options=direct,
                    mem_budget=args.mem_budget,
                    workers=args.workers,
                    show_progress=False,
                )
            )
        result["uploadSeconds"] = time.perf_counter() - start
        keys: dict[str, int] = {}
        encoded = {}
        for name, url in urls.items():
            found = count_keys(fs, url)
            keys.update(found)
            for array in COUNT_ARRAYS:
                encoded[f"{name}/{array}"] = sum(
                    size for k, size in found.items() if f"/matrices/RNA/{array}/c/" in k
                )
        result["encodedBytes"] = encoded
        result["countShardKeys"] = len(keys)
        options = dict.fromkeys(NAMES, proxied)
        moto = moto_process()
        worker_pids = client.run(os.getpid) if client is not None else {}
        processes = {
            "client": [psutil.Process()],
            "workers": [psutil.Process(pid) for pid in worker_pids.values()],
            "moto": [moto] if moto else [],
        }
        result["motoRssBytes"] = {"afterUpload": moto.memory_info().rss if moto else None}

        # the composite
        composite = work / "composite.zarr"
        mark = len(proxy.requests)
        build, _ = timed(
            client,
            lambda: create_composite(
                composite,
                urls,
                source_storage_options=options,
                mem_budget=args.mem_budget,
                workers=args.workers,
                show_progress=False,
            ),
            processes,
        )
        build["fetch"] = fetch_report(proxy.requests[mark:], keys)
        mark = len(proxy.requests)
        steps: dict[str, Any] = {}
        steps["open"], ds = open_store(
            composite, client, args, processes, source_storage_options=options
        )
        steps["open"]["fetch"] = fetch_report(proxy.requests[mark:], keys)
        mark = len(proxy.requests)
        with Clock(proxy, processes) as clock:
            steps["recipe"], run = run_recipe(ds, client)
        records = list(proxy.requests)
        steps["recipe"]["fetch"] = fetch_report(records[mark:], keys)
        steps["recipe"]["cpu"] = clock.cpu_between(clock.marks[0][0], clock.marks[-1][0])
        stages = stage_rows(run, clock)
        for stage in stages:
            first, last = stage.pop("window")
            stage["fetch"] = fetch_report(records[first:last], keys)
        steps["recipe"]["stages"] = stages
        steps["recipe"]["cache"] = cache_report(ds, client)
        labels = {"composite": run.artifact("clustering").read("labels")}
        ds.close()
        result["composite"] = {"build": build, **steps}
        result["motoRssBytes"]["afterComposite"] = moto.memory_info().rss if moto else None

        # the local merged copy, from the same S3 sources
        merged = work / "merged.zarr"
        mark = len(proxy.requests)
        build, _ = timed(
            client,
            lambda: DataStoreMerge(
                list(urls.values()),
                merged,
                names=list(urls),
                storage_options=proxied,
                mem_budget=args.mem_budget,
                workers=args.workers,
                show_progress=False,
            ).dump(),
            processes,
        )
        build["fetch"] = fetch_report(proxy.requests[mark:], keys)
        steps = {}
        steps["open"], ds = open_store(merged, client, args, processes)
        steps["open"]["fetch"] = fetch_report([], keys)
        mark = len(proxy.requests)
        with Clock(proxy, processes) as clock:
            steps["recipe"], run = run_recipe(ds, client)
        steps["recipe"]["fetch"] = fetch_report(proxy.requests[mark:], keys)
        steps["recipe"]["cpu"] = clock.cpu_between(clock.marks[0][0], clock.marks[-1][0])
        steps["recipe"]["stages"] = stage_rows(run, clock)
        for stage in steps["recipe"]["stages"]:
            del stage["window"]
        labels["merged"] = run.artifact("clustering").read("labels")
        ds.close()
        result["merged"] = {"build": build, **steps}
        result["motoRssBytes"]["end"] = moto.memory_info().rss if moto else None
    result["loadAverageAfter"] = os.getloadavg()
    result["sameClusters"] = bool(np.array_equal(labels["composite"], labels["merged"]))
    result["clusters"] = int(np.unique(labels["merged"]).size)
    if not args.keep:
        shutil.rmtree(work)
    return result


# -- the report -------------------------------------------------------------------


def _gb(peak: dict[str, int]) -> str:
    return f"{peak['total'] / 1e9:.2f}"


def _mb(n: float) -> str:
    return f"{n / MB:,.1f}"


def fetch_lines(result: dict[str, Any]) -> Iterator[str]:
    """One line of GETs per step."""
    c, m = result["composite"], result["merged"]
    full = sum(result["encodedBytes"].values())
    for label, fetch in (
        ("create_composite", c["build"]["fetch"]),
        ("composite open", c["open"]["fetch"]),
        ("composite recipe", c["recipe"]["fetch"]),
        ("DataStoreMerge (full copy)", m["build"]["fetch"]),
        ("merged recipe", m["recipe"]["fetch"]),
    ):
        yield (
            f"GETs {label}: {fetch['getRequests']:,} requests, {_mb(fetch['getBytes'])} MB; "
            f"count shards {fetch['shardGets']:,} GETs, {_mb(fetch['shardBytes'])} MB "
            f"= {fetch['shardBytes'] / full:.2f}x counts + countsT "
            f"(by kind { ({k: _mb(v) for k, v in fetch['shardBytesByKind'].items()}) }); "
            f"bytes fetched more than once {_mb(fetch['bytesFetchedTwiceOrMore'])} MB; "
            f"(key, range) repeated {fetch['repeatedKeyRanges']:,} "
            f"{fetch['repeatedKeyRangesByKind']} ({_mb(fetch['repeatedKeyRangeBytes'])} MB again); "
            f"keys {fetch['keysTouched']:,} of {result['countShardKeys']:,}, whole {fetch['keysFetchedWhole']:,}"
        )


def heading(result: dict[str, Any]) -> Iterator[str]:
    """Where and what ran."""
    yield from result["machine"]
    yield f"peak RSS: {RSS_SAMPLING}; includes the moto server (a child) and the proxy (threads)"
    yield (
        f"sources: 2 x {result['cellsPerSource']:,} cells x {result['genes']:,} genes "
        f"(seeds {result['seed']}, {result['seed'] + 1}), on moto S3 behind a FaultProxy; "
        f"upload {result['uploadSeconds']:.1f} s, warm-up (recipe on 2,000 x 3,000, "
        f"pynndescent on {EXACT_BELOW:,} points) {result['warmupSeconds']:.1f} s (neither timed)"
    )
    cache_env = result["cacheEnv"]
    yield (
        f"mem_budget {result['memBudget']}, {result['workers']} workers; recipe {RECIPE} "
        f"{RECIPE_OPTIONS}; source cache {result['cacheLimit'] / 2**30:.2f} GiB "
        f"({ENV_CACHE_BYTES}={'unset' if cache_env is None else cache_env})"
    )
    yield (
        "load average before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}".format(
            *result["loadAverageBefore"], *result["loadAverageAfter"]
        )
    )


def report(result: dict[str, Any]) -> Iterator[str]:
    """The table and notes of a run."""
    c, m = result["composite"], result["merged"]
    encoded = result["encodedBytes"]
    full = sum(encoded.values())
    counts_only = sum(v for k, v in encoded.items() if k.endswith("/counts"))
    yield from heading(result)
    yield ""
    header = (
        f"{'step':34s} {'comp. s':>8s} {'merged s':>8s} {'ratio':>6s} {'comp. CPU':>9s} "
        f"{'mrg. CPU':>8s} {'ratio':>6s} {'comp. GB':>8s} {'mrg. GB':>7s} {'GETs':>6s} {'GET MB':>7s}"
    )
    yield header
    yield "-" * len(header)

    def line(name: str, cs: dict[str, Any], ms: dict[str, Any]) -> str:
        wall = cs["seconds"] / ms["seconds"] if ms["seconds"] else float("nan")
        if "cpu" in cs:
            c_cpu, m_cpu = sum(cs["cpu"].values()), sum(ms["cpu"].values())
            cpu = f"{c_cpu:9.1f} {m_cpu:8.1f} {c_cpu / m_cpu if m_cpu else float('nan'):6.2f}"
        else:
            cpu = f"{'-':>9s} {'-':>8s} {'-':>6s}"
        return (
            f"{name:34s} {cs['seconds']:8.2f} {ms['seconds']:8.2f} {wall:6.2f} {cpu} "
            f"{_gb(cs['peak']):>8s} {_gb(ms['peak']):>7s} {cs['fetch']['shardGets']:>6,} "
            f"{_mb(cs['fetch']['shardBytes']):>7s}"
        )

    yield line("build (composite / merge from S3)", c["build"], m["build"])
    yield line("open (DataStore)", c["open"], m["open"])
    cr, mr = c["recipe"], m["recipe"]
    for cs, ms in zip(cr["stages"], mr["stages"], strict=True):
        yield line(f"  {cs['stage']}", cs, ms)
    yield line(f"{RECIPE} (whole run)", cr, mr)
    ratio = cr["seconds"] / mr["seconds"]
    cpu_ratio = sum(cr["cpu"].values()) / sum(mr["cpu"].values())
    yield "-" * len(header)
    yield (
        "ratio: composite / merged; s: wall seconds; CPU: user + system seconds of the client "
        "(with the proxy), the workers and moto; GB: peak RSS of all processes (10^9 bytes); "
        "GETs, GET MB: GETs of the sources' count shards during the composite's step and their bodies"
    )
    yield "CPU seconds of the recipe by process: composite {}; merged {}".format(
        *({k: round(v, 1) for k, v in x["cpu"].items()} for x in (cr, mr))
    )
    moto = result["motoRssBytes"]
    if moto["afterUpload"] is not None:
        yield (
            "moto server RSS (inside every peak above): "
            + ", ".join(f"{k} {v / MB:,.0f} MB" for k, v in moto.items() if v is not None)
        )
    yield (
        f"encoded count shards on S3: {_mb(full)} MB "
        f"(counts {_mb(counts_only)} MB, countsT {_mb(full - counts_only)} MB); "
        + ", ".join(f"{k} {_mb(v)}" for k, v in encoded.items())
    )
    copy = m["build"]["fetch"]["shardBytes"]
    yield (
        f"a full copy (DataStoreMerge from S3) fetched {_mb(copy)} MB of count shards; "
        f"the composite's recipe {_mb(cr['fetch']['shardBytes'])} MB = "
        f"{cr['fetch']['shardBytes'] / copy:.2f}x the full copy, "
        f"{cr['fetch']['shardBytes'] / counts_only:.2f}x the encoded counts, "
        f"{cr['fetch']['shardBytes'] / full:.2f}x counts + countsT"
    )
    yield from fetch_lines(result)
    cache = cr["cache"]
    yield (
        f"cache after the composite's recipe: limit {cache['limit'] / 2**30:.2f} GiB, "
        f"{cache['entries']:,} entries, {_mb(cache['bytesOnDisk'])} MB on disk; "
        f"summed over {len(cache['perProcess'])} processes {cache['total']}"
    )
    yield (
        f"clusters: {result['clusters']}; composite labels equal the merged copy's: "
        f"{'yes' if result['sameClusters'] else 'NO'}"
    )
    fetch = cr["fetch"]
    for example in fetch["repeatedExamples"][:5]:
        yield f"  fetched {example['gets']}x: {example['key']} {example['range'] or '(whole)'}"
    evictions = cache["total"].get("evictions", 0)
    twice = fetch["bytesFetchedTwiceOrMore"]
    held = sum(v for k, v in fetch["repeatedKeyRangesByKind"].items() if k != "range")
    speed = "met" if ratio <= 1.5 else "NOT met"
    refetch = "met" if twice == 0 else "NOT met"
    yield (
        f"goals: composite recipe within 1.5x the merged copy's {speed} ({ratio:.2f}x wall, "
        f"{cpu_ratio:.2f}x CPU); "
        f"no source byte fetched twice {refetch} ({_mb(twice)} MB fetched again; "
        f"{held} repeated whole-shard or index GETs, {evictions} evictions)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cells", type=int, default=50_000, help="cells per source")
    parser.add_argument("--genes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget", default="4G")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "cytearc-bench-composite",
        help="work folder: the cached sources and the run's stores",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        help="also write the results as JSON to this file (- stdout)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the composite and the merged copy"
    )
    args = parser.parse_args(argv)
    result = benchmark(args)
    print("\n".join(report(result)))
    if args.json:
        text = json.dumps(result, indent=1, default=str)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
