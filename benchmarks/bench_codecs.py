"""Encode and decode one shard of a store's count array with each candidate codec.

The codec of the count arrays sets how fast every stage that reads counts
can go: a shard is dense and mostly zeros, and each pass over the counts
decodes it. This script takes the first shard of ``counts`` (or
``countsT``) of an imported store, cuts it into its inner chunks as they
are stored, and times each codec on them in this one thread (numcodecs, as
Zarr and :mod:`cytearc.storage.shards` call it)::

    .venv/bin/python benchmarks/bench_codecs.py /tmp/p/small.zarr
    .venv/bin/python benchmarks/bench_codecs.py /tmp/p/small.zarr --array countsT --json

Columns: stored megabytes, encode and decode milliseconds (best of
``--repeat``), and the decode speed in GB/s of values.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

os.environ.setdefault("BLOSC_NTHREADS", "1")

import numpy as np
import zarr
from numcodecs import Blosc, Zstd

if TYPE_CHECKING:
    from numcodecs.abc import Codec

CODECS: dict[str, Codec] = {
    "zstd 3 + checksum (the default before)": Zstd(level=3, checksum=True),
    "blosc lz4hc 3 shuffle (lz4, the default)": Blosc(
        cname="lz4hc", clevel=3, shuffle=Blosc.SHUFFLE
    ),
    "blosc lz4hc 5 shuffle": Blosc(cname="lz4hc", clevel=5, shuffle=Blosc.SHUFFLE),
    "blosc lz4hc 2 shuffle": Blosc(cname="lz4hc", clevel=2, shuffle=Blosc.SHUFFLE),
    "blosc lz4 5 shuffle": Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE),
    "blosc zstd 3 shuffle": Blosc(cname="zstd", clevel=3, shuffle=Blosc.SHUFFLE),
    "blosc lz4hc 3 bitshuffle": Blosc(cname="lz4hc", clevel=3, shuffle=Blosc.BITSHUFFLE),
}


def measure(codec: Codec, chunks: list[bytes], *, repeat: int) -> dict[str, float]:
    """Stored bytes, encode seconds (one pass) and the best decode seconds of ``repeat``."""
    start = time.perf_counter()
    encoded = [codec.encode(chunk) for chunk in chunks]
    encode = time.perf_counter() - start
    decode = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for frame in encoded:
            codec.decode(frame)
        decode = min(decode, time.perf_counter() - start)
    return {"stored": float(sum(len(e) for e in encoded)), "encode": encode, "decode": decode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("store", help="an imported CyteArc store")
    parser.add_argument("--assay", default="RNA")
    parser.add_argument("--array", default="counts", choices=["counts", "countsT"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    array = zarr.open_array(f"{args.store}/matrices/{args.assay}/{args.array}", mode="r")
    if array.shards is None:
        print(f"{args.store}: {args.array} is not sharded", file=sys.stderr)
        return 2
    rows, inner = array.shards[0], array.chunks[0]
    shard = np.asarray(array[:rows])
    chunks = [np.ascontiguousarray(shard[i : i + inner]).tobytes() for i in range(0, rows, inner)]
    values = float(sum(len(c) for c in chunks))
    results: dict[str, Any] = {
        "shard": list(shard.shape),
        "dtype": str(shard.dtype),
        "innerChunks": len(chunks),
        "nonzero": float(np.count_nonzero(shard) / max(1, shard.size)),
        "codecs": {
            name: measure(codec, chunks, repeat=args.repeat) for name, codec in CODECS.items()
        },
    }
    if args.json:
        print(json.dumps(results))
        return 0
    print(
        f"shard {shard.shape[0]} x {shard.shape[1]} {shard.dtype}, {len(chunks)} inner chunks, "
        f"{results['nonzero']:.1%} non-zero, {values / 1e6:.1f} MB of values"
    )
    print(f"{'codec':42s} {'MB':>7s} {'encode ms':>10s} {'decode ms':>10s} {'GB/s':>6s}")
    for name, row in results["codecs"].items():
        print(
            f"{name:42s} {row['stored'] / 1e6:7.2f} {row['encode'] * 1e3:10.0f} "
            f"{row['decode'] * 1e3:10.1f} {values / row['decode'] / 1e9:6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
