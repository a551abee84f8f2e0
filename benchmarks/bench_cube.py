"""Benchmark CytePool cube fingerprinting and writing against their raw references.

Run from the project root::

    .venv/bin/python benchmarks/bench_cube.py
    .venv/bin/python benchmarks/bench_cube.py --groups 50 --samples 40 --features 30000 \
        --repeat 3 --compression zstd

Seeded layers ``counts`` and ``detected`` (int32, ~90 % zeros) and ``log_sum``
and ``linear_sum`` (float64) make a :class:`cytepool.Cube`. Four steps are
timed, each ``--repeat`` times (best and median are reported):

``fingerprint``
    ``Cube.fingerprint`` of a freshly built cube: every per-group layer digest
    (Dask graph on the current scheduler, threaded by default), plus the small
    table, cell-number and manifest digests.
``hashlib sha256``
    The reference: ``hashlib.sha256`` over the same canonical bytes (int64 /
    float64 little endian, prepared beforehand), one hash per group and layer,
    through memoryviews, in one thread.
``write_cube``
    ``write_cube`` into a temporary directory: tables, cell numbers, layers,
    digests computed in the same pass, fsync and atomic rename.
``plain zarr``
    The reference: ``zarr.create_array`` per layer with the same chunk shape,
    codecs and fill value, written by one ``arr[:] = data``.

MB are 10**6 bytes. Fingerprint MB are the canonical bytes hashed (8 per value);
write MB are the in-memory bytes of the layers (4 per int32, 8 per float64).
Peak RSS is sampled as ``run.summary()`` samples it
(:class:`cytearc.pipeline.rss.RssSampler`, every 0.25 s, and once as each
step starts and ends): this process and its children, and the workers of the
current Dask client, if any. Times are reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import dask
import numpy as np
import pandas as pd
import report
import zarr
from zarr.codecs import BytesCodec
from zarr.storage import LocalStore

from cytearc.pipeline.rss import RssSampler
from cytepool import Cube, write_cube
from cytepool.codecs import Compression, compressor
from cytepool.compute import current_client
from cytepool.cube.encoding import format_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

T = TypeVar("T")

MB: Final = 1_000_000
CHUNK_FEATURES: Final = 4096
"""Feature extent of a layer chunk, as in ``cytepool.cube.tasks.LAYER_CHUNK_FEATURES``."""
FINGERPRINT_GOAL: Final = 0.70
WRITE_GOAL: Final = 1.5


# -- memory ---------------------------------------------------------------------


def sampler() -> RssSampler:
    """A sampler of this process tree and of the current Dask client's workers."""
    return RssSampler(current_client())


def current_rss() -> int:
    """Resident bytes of this process tree (and the current client's workers) now."""
    with sampler() as rss:
        pass
    return int(rss.metrics()["peakBytes"]["total"])


# -- data -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Data:
    """Everything a cube is built from."""

    samples: pd.DataFrame
    groups: pd.DataFrame
    features: pd.DataFrame
    layers: Mapping[str, np.ndarray]
    n_cells: np.ndarray

    def cube(self) -> Cube:
        """A new cube over the same arrays (no digests known yet)."""
        return Cube(
            samples=self.samples,
            groups=self.groups,
            features=self.features,
            layers=dict(self.layers),
            n_cells=self.n_cells,
            normalization={"method": "library_size", "target_sum": 10000, "log": "log1p"},
            source={"tool": "benchmarks/bench_cube.py"},
        )


def make_data(n_groups: int, n_samples: int, n_features: int, *, seed: int) -> Data:
    """Seeded pseudobulk-like layers: sparse int32 counts and detected, float64 sums."""
    rng = np.random.default_rng(seed)
    shape = (n_groups, n_samples, n_features)
    n_cells = rng.integers(20, 2000, size=(n_samples, n_groups))
    gene_mean = rng.gamma(0.6, 4.0, size=n_features)
    # ~10 % of (group, sample, feature) values are non-zero
    nonzero = np.flatnonzero(rng.random(shape, dtype=np.float32) < 0.1)
    feature = nonzero % n_features
    g = nonzero // (n_samples * n_features)
    s = (nonzero // n_features) % n_samples
    cells = n_cells[s, g]
    counts_nz = 1 + rng.poisson(gene_mean[feature] * cells / 200.0)
    detected_nz = np.minimum(1 + rng.binomial(counts_nz - 1, 0.6), cells)
    counts = np.zeros(shape, dtype=np.int32)
    detected = np.zeros(shape, dtype=np.int32)
    counts.flat[nonzero] = counts_nz
    detected.flat[nonzero] = detected_nz
    # library-size normalized sums over the pooled cells, target sum 10,000
    library = cells * rng.lognormal(np.log(2000.0), 0.3, size=nonzero.size)
    linear_nz = counts_nz * (1e4 * cells / library) * rng.lognormal(0.0, 0.1, size=nonzero.size)
    log_nz = detected_nz * np.log1p(linear_nz / detected_nz)
    linear_sum = np.zeros(shape, dtype=np.float64)
    log_sum = np.zeros(shape, dtype=np.float64)
    linear_sum.flat[nonzero] = linear_nz
    log_sum.flat[nonzero] = log_nz
    donors = [f"D{i // 2 + 1}" for i in range(n_samples)]
    conditions = ["ctrl" if i % 2 == 0 else "stim" for i in range(n_samples)]
    return Data(
        samples=pd.DataFrame(
            {
                "sample": [f"{d}-{c}" for d, c in zip(donors, conditions, strict=True)],
                "donor": donors,
                "condition": conditions,
            }
        ),
        groups=pd.DataFrame({"group": [f"celltype_{i:03d}" for i in range(n_groups)]}),
        features=pd.DataFrame(
            {
                "feature_id": [f"ENSG{i:011d}" for i in range(n_features)],
                "feature_name": [f"GENE{i}" for i in range(n_features)],
            }
        ),
        layers={
            "counts": counts,
            "detected": detected,
            "linear_sum": linear_sum,
            "log_sum": log_sum,
        },
        n_cells=n_cells,
    )


def canonical_bytes(layers: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The digest bytes of every layer: int64 / float64 little endian, C order, -0.0 as 0.0."""
    out = {}
    for name, x in layers.items():
        if x.dtype.kind == "f":
            out[name] = np.add(x, 0.0, dtype="<f8", order="C")
        else:
            out[name] = np.ascontiguousarray(x, dtype="<i8")
    return out


# -- steps ----------------------------------------------------------------------


def sha256_groups(canonical: Mapping[str, np.ndarray]) -> dict[str, list[str]]:
    """One SHA-256 per group of each layer, through memoryviews, in this thread."""
    return {
        name: [format_digest(hashlib.sha256(x[g].data)) for g in range(x.shape[0])]
        for name, x in sorted(canonical.items())
    }


def write_plain_zarr(
    layers: Mapping[str, np.ndarray], path: Path, compression: Compression
) -> None:
    """Each layer as its own array of ``path``, same chunks and codecs as a cube, one write each."""
    store = LocalStore(path)
    for name, x in sorted(layers.items()):
        arr = zarr.create_array(
            store=store,
            name=name,
            shape=x.shape,
            dtype=x.dtype,
            chunks=(1, x.shape[1], min(x.shape[2], CHUNK_FEATURES)),
            serializer=BytesCodec(),
            compressors=compressor(compression, error=ValueError),
            fill_value=0,
        )
        arr[:] = x


# -- measuring ------------------------------------------------------------------


@dataclass(kw_only=True)
class Row:
    """Timings of one step."""

    step: str
    megabytes: float
    times: list[float] = field(default_factory=list)
    peak_rss: int = 0
    ratio: float | None = None

    @property
    def best(self) -> float:
        """Fastest repetition, seconds."""
        return min(self.times)

    @property
    def median(self) -> float:
        """Median repetition, seconds."""
        return statistics.median(self.times)

    @property
    def mb_per_s(self) -> float:
        """Throughput of the fastest repetition."""
        return self.megabytes / self.best


@dataclass(frozen=True, kw_only=True)
class Step(Generic[T]):
    """A step to time: ``setup`` (untimed) makes the argument of ``run`` (timed)."""

    row: Row
    setup: Callable[[], T]
    run: Callable[[T], object]
    teardown: Callable[[T], None] = lambda _: None


def measure(steps: Sequence[Step[Any]], repeat: int) -> None:
    """Time each step ``repeat`` times, the steps interleaved within each repetition."""
    for _ in range(repeat):
        for step in steps:
            arg = step.setup()
            gc.collect()
            with sampler() as rss:
                start = time.perf_counter()
                step.run(arg)
                elapsed = time.perf_counter() - start
            step.teardown(arg)
            step.row.times.append(elapsed)
            step.row.peak_rss = max(step.row.peak_rss, rss.metrics()["peakBytes"]["total"])


# -- report ---------------------------------------------------------------------


def machine() -> list[str]:
    """Lines describing the machine, the library versions and how memory is measured."""
    scheduler = dask.config.get("scheduler", None) or "threads (default)"
    return report.machine(
        ("zarr", "numcodecs", "dask"),
        notes=[f"dask scheduler: {scheduler}; peak RSS: {report.RSS_SAMPLING}"],
    )


def table(rows: list[Row]) -> str:
    """The results as a plain-text table."""
    header = ("step", "s (best)", "s (median)", "MB/s", "ratio to ref", "peak RSS MB")
    lines = [
        (
            r.step,
            f"{r.best:.3f}",
            f"{r.median:.3f}",
            f"{r.mb_per_s:,.0f}",
            "ref" if r.ratio is None else f"{r.ratio:.2f}",
            f"{r.peak_rss / MB:,.0f}",
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in (header, *lines)) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join((first, *rest))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(x) for x in lines)])


# -- main -----------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--features", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compression", choices=("gzip", "zstd", "none"), default="gzip")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tmpdir", type=Path, default=None, help="where the files are written (default: $TMPDIR)"
    )
    return parser.parse_args(argv)


@contextlib.contextmanager
def scratch(parent: Path | None) -> Iterator[Path]:
    """A temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench_cube-", dir=parent) as d:
        yield Path(d)


@dataclass(frozen=True, kw_only=True)
class FingerprintResult:
    """The fingerprint step: its row, fingerprints of every repetition, the last digests."""

    row: Row
    fingerprints: list[str]
    digests: dict[str, Any]


def bench_fingerprint(data: Data, megabytes: float, repeat: int) -> FingerprintResult:
    """``Cube.fingerprint`` of a new cube each repetition, so every digest is computed."""
    row = Row(step="fingerprint (Cube.fingerprint)", megabytes=megabytes)
    fingerprints: list[str] = []
    last: list[Cube] = []

    def fresh() -> Cube:
        last.clear()  # drop the previous cube before building the next
        return data.cube()

    def run(cube: Cube) -> None:
        fingerprints.append(cube.fingerprint)
        last.append(cube)

    measure([Step(row=row, setup=fresh, run=run)], repeat)
    return FingerprintResult(row=row, fingerprints=fingerprints, digests=last[-1].digests)


def bench_hashlib(
    data: Data, megabytes: float, repeat: int
) -> tuple[Row, dict[str, list[str]], float]:
    """SHA-256 over canonical bytes prepared beforehand; the row, digests and preparation time."""
    start = time.perf_counter()
    canonical = canonical_bytes(data.layers)
    prepare = time.perf_counter() - start
    row = Row(step="hashlib sha256 (1 thread)", megabytes=megabytes)
    digests: list[dict[str, list[str]]] = []

    def run(c: Mapping[str, np.ndarray]) -> None:
        digests.append(sha256_groups(c))

    measure([Step(row=row, setup=lambda: canonical, run=run)], repeat)
    return row, digests[-1], prepare


def bench_write(
    data: Data, megabytes: float, *, compression: Compression, repeat: int, tmpdir: Path | None
) -> tuple[Row, Row, dict[str, int]]:
    """write_cube and plain zarr, interleaved, each into a new directory; rows and disk sizes."""
    zarr_row = Row(step="plain zarr (arr[:] = data)", megabytes=megabytes)
    cube_row = Row(step="write_cube", megabytes=megabytes)
    sizes: dict[str, int] = {}
    cubes: list[Cube] = []
    with scratch(tmpdir) as tmp:

        def remove(name: str) -> Callable[[Path], None]:
            def teardown(path: Path) -> None:
                sizes[name] = report.disk_bytes(path)
                shutil.rmtree(path)

            return teardown

        def cube_setup() -> Path:
            cubes.clear()
            cubes.append(data.cube())  # a new cube: its digests are computed by the write
            return tmp / "bench.cube.zarr"

        measure(
            [
                Step(
                    row=zarr_row,
                    setup=lambda: tmp / "plain.zarr",
                    run=lambda p: write_plain_zarr(data.layers, p, compression),
                    teardown=remove("plain zarr"),
                ),
                Step(
                    row=cube_row,
                    setup=cube_setup,
                    run=lambda p: write_cube(cubes[0], p, compression=compression),
                    teardown=remove("cube"),
                ),
            ],
            repeat,
        )
    return cube_row, zarr_row, sizes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compression: Compression = None if args.compression == "none" else args.compression
    if args.repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return 2
    for line in machine():
        print(line)
    shape = (args.groups, args.samples, args.features)
    print(
        f"cube: {shape[0]} groups x {shape[1]} samples x {shape[2]:,} features, "
        "layers counts/detected int32 + linear_sum/log_sum float64, "
        f"compression {compression}, repeat {args.repeat}, seed {args.seed}"
    )
    start = time.perf_counter()
    data = make_data(*shape, seed=args.seed)
    gc.collect()
    n_values = shape[0] * shape[1] * shape[2]
    source_mb = sum(x.nbytes for x in data.layers.values()) / MB
    hashed_mb = len(data.layers) * n_values * 8 / MB
    baseline = current_rss()
    print(
        f"data: {source_mb:,.0f} MB of layers in memory, "
        f"{np.count_nonzero(data.layers['counts']) / n_values:.1%} non-zero counts, "
        f"generated in {time.perf_counter() - start:.1f} s; RSS {baseline / MB:,.0f} MB"
    )

    fp = bench_fingerprint(data, hashed_mb, args.repeat)
    ref_row, ref_digests, prepare = bench_hashlib(data, hashed_mb, args.repeat)
    gc.collect()
    cube_row, zarr_row, sizes = bench_write(
        data, source_mb, compression=compression, repeat=args.repeat, tmpdir=args.tmpdir
    )
    fp_row = fp.row
    fp_row.ratio = fp_row.mb_per_s / ref_row.mb_per_s
    cube_row.ratio = cube_row.best / zarr_row.best
    rows = [fp_row, ref_row, cube_row, zarr_row]

    print()
    print(table(rows))
    print()
    print(
        f"ratio: fingerprint = its MB/s / hashlib MB/s (goal >= {FINGERPRINT_GOAL:.2f}); "
        f"write_cube = its seconds / plain zarr seconds (goal <= {WRITE_GOAL:.2f}); "
        "best repetitions"
    )
    print(
        f"median ratios: fingerprint {ref_row.median / fp_row.median:.2f}, "
        f"write_cube {cube_row.median / zarr_row.median:.2f}"
    )
    print(
        f"MB: fingerprint/hashlib = canonical bytes hashed ({hashed_mb:,.0f}); write = layer "
        f"bytes in memory ({source_mb:,.0f}); hashlib input prepared in {prepare:.2f} s (untimed)"
    )
    print(
        f"on disk: cube {sizes['cube'] / MB:,.0f} MB, plain zarr {sizes['plain zarr'] / MB:,.0f} MB"
    )
    same = all(fp.digests["layers"][n]["groups"] == d for n, d in ref_digests.items())
    print(
        f"layer digests equal to the hashlib reference: {'yes' if same else 'NO'}; fingerprint "
        f"{fp.fingerprints[-1][:23]}... (same every repetition: {len(set(fp.fingerprints)) == 1})"
    )
    self_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(
        f"peak RSS overall: {max(r.peak_rss for r in rows) / MB:,.0f} MB sampled; "
        f"ru_maxrss self {self_peak / MB:,.0f} MB, children {child_peak / MB:,.0f} MB"
    )
    print(
        f"goals: fingerprint >= {FINGERPRINT_GOAL:.0%} of SHA-256 "
        f"{'met' if fp_row.ratio >= FINGERPRINT_GOAL else 'NOT met'} ({fp_row.ratio:.0%}); "
        f"write_cube <= {WRITE_GOAL}x plain zarr "
        f"{'met' if cube_row.ratio <= WRITE_GOAL else 'NOT met'} ({cube_row.ratio:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
