"""Fuzz stores, cubes and source files: every mutation must be refused by name or read back identical.

Run from the project root::

    .venv/bin/python benchmarks/fuzz.py --n 10000
    .venv/bin/python benchmarks/fuzz.py --n 600 --targets store,cube --seed 3
    .venv/bin/python benchmarks/fuzz.py --only 4711 --seed 0      # one mutation again, with its verdict

Mutation ``i`` is drawn from the seeded generator ``default_rng([seed, i])``
for the target ``targets[i % len(targets)]`` (:mod:`cytearc.faults`: a bit
flipped in a chunk or metadata document, a file truncated or deleted, an
attribute edited, two arrays' chunks swapped; for source files a line dropped
or repeated, a field changed, a column dropped, a gzip stream damaged, an HDF5
dataset deleted, shortened or set to an invalid value), so any mutation can be
run again alone with ``--only``. ``--raw-h5`` adds flipped bits and
truncations of the HDF5 files: a hunt for crashes of the HDF5 library, whose
silent differences are expected (HDF5 raw data carries no checksum).

Mutations run in a worker process that builds the pristine targets once; a
worker killed by a signal (the HDF5 library can crash on damaged bytes) or
silent for ``--timeout`` seconds is counted as a ``crash`` of the mutation it
was judging and restarted after it. Each verdict is a line of ``--out``
(JSON); the summary counts outcomes per target, the seconds and the peak RSS
of the workers, and groups every verdict that is not ``named-error``,
``identical`` or ``warned`` by mutation and place.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import resource
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import machine, source_commit

ACCEPTED = {"named-error", "identical", "warned"}
"""Outcomes that fail closed (warned: stored as given, with a warning naming the file)."""


def _worker(args: argparse.Namespace) -> None:
    """Judge mutations ``args.start`` .. ``args.n - 1``, one JSON line each, flushed."""
    from cytearc.faults import fuzz_targets  # noqa: PLC0415 (the driver never imports CyteArc)

    resource.setrlimit(resource.RLIMIT_AS, (args.memory_limit, args.memory_limit))
    targets_names = args.targets.split(",")
    base = Path(tempfile.mkdtemp(prefix="fuzz-pristine-", dir=args.tmpdir))
    targets = fuzz_targets(base, only=tuple(targets_names))
    print(json.dumps({"ready": True}), flush=True)
    indices = [args.only] if args.only is not None else range(args.start, args.n)
    for i in indices:
        name = targets_names[i % len(targets_names)]
        mutation = targets[name].draw(_chooser(args.seed, i), raw_h5=args.raw_h5)
        print(
            json.dumps({"i": i, "target": name, "mutation": repr(mutation), "started": True}),
            flush=True,
        )
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="fuzz-", dir=args.tmpdir) as work:
            verdict = targets[name].judge(mutation, Path(work))
        line = {
            "i": i,
            "target": name,
            "mutation": repr(mutation),
            "outcome": verdict.outcome,
            "detail": verdict.detail,
            "seconds": round(time.monotonic() - started, 3),
        }
        print(json.dumps(line), flush=True)


def _chooser(seed: int, i: int) -> Callable[[int], int]:
    """The choices of mutation ``i``: a generator of its own, so that it can be drawn again alone."""
    rng = np.random.default_rng([seed, i])
    return lambda n: int(rng.integers(n))


def _drive(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run workers until every mutation has a verdict; restart after a worker dies."""
    out = Path(args.out)
    done: dict[int, dict[str, Any]] = {}
    if out.exists() and args.resume:
        for text in out.read_text(encoding="utf-8").splitlines():
            record = json.loads(text)
            done[record["i"]] = record
    start = max(done, default=-1) + 1
    with out.open("a" if args.resume else "w", encoding="utf-8") as sink:
        while start < args.n:
            command = [sys.executable, __file__, "--worker", "--start", str(start)]
            command += ["--n", str(args.n), "--seed", str(args.seed), "--targets", args.targets]
            command += ["--memory-limit", str(args.memory_limit)]
            command += ["--raw-h5"] if args.raw_h5 else []
            command += ["--tmpdir", args.tmpdir] if args.tmpdir else []
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            current: dict[str, Any] | None = None
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], args.timeout)
                line = proc.stdout.readline() if ready else ""
                if not line:
                    break
                record = json.loads(line)
                if record.get("started"):
                    current = record
                elif "outcome" in record:
                    done[record["i"]] = record
                    sink.write(line)
                    sink.flush()
                    current = None
                    start = record["i"] + 1
                    if record["i"] % 500 == 0:
                        print(f"  {record['i']} / {args.n} judged", flush=True)
            if proc.poll() is None:
                proc.kill()
            code = proc.wait()
            if current is not None:
                why = f"worker ended with {code}" if ready else f"no verdict in {args.timeout} s"
                record = {
                    **current,
                    "outcome": "crash",
                    "detail": f"{why} (signal or hang)",
                    "seconds": None,
                }
                record.pop("started")
                done[current["i"]] = record
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                start = current["i"] + 1
            elif start < args.n:
                msg = f"the worker stopped before mutation {start} (exit {code})"
                raise SystemExit(msg)
    return [done[i] for i in sorted(done)]


_ID = re.compile(r"[0-9a-f]{64}|/tmp/\S+?/(?=\S)|\d+")


def _group(record: dict[str, Any]) -> str:
    """A key that groups verdicts of one finding: target, outcome, mutation class, where it was raised or what differed."""
    kind = record["mutation"].split("(", 1)[0]
    detail = record["detail"]
    places = re.findall(r"\[(?:raised at|through) ([^\]]+)\]", detail)
    head = detail.split(":", 1)[0]
    what = " ".join([head, *places]) if places else head
    return _ID.sub("#", f"{record['target']} {record['outcome']} {kind}: {what}")[:300]


def _summary(records: list[dict[str, Any]], seconds: float, args: argparse.Namespace) -> list[str]:
    counts: collections.Counter[tuple[str, str]] = collections.Counter(
        (r["target"], r["outcome"]) for r in records
    )
    outcomes = ["named-error", "identical", "warned", "silent-difference", "crash"]
    targets = args.targets.split(",")
    lines = [f"{'target':10}" + "".join(f"{o:>19}" for o in outcomes) + f"{'total':>8}"]
    for target in [*targets, "all"]:
        row = [
            counts[(target, o)] if target != "all" else sum(counts[(t, o)] for t in targets)
            for o in outcomes
        ]
        lines.append(f"{target:10}" + "".join(f"{n:>19,}" for n in row) + f"{sum(row):>8,}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    lines.append(
        f"{len(records):,} mutations in {seconds:,.0f} s ({seconds / max(len(records), 1):.2f} s each); "
        f"peak RSS of a worker {rss:,.0f} MB; silent differences {counts_of(records, 'silent-difference')}, "
        f"crashes {counts_of(records, 'crash')}"
    )
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in records:
        if r["outcome"] not in ACCEPTED:
            groups[_group(r)].append(r)
    if groups:
        lines.append("")
        lines.append("not failing closed, grouped (count, first example):")
    for key, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        first = members[0]
        lines.append(f"{len(members):6,}  {key}")
        lines.append(f"        e.g. --only {first['i']}: {first['mutation']}")
        lines.append(f"        {first['detail'][:400]}")
    return lines


def counts_of(records: list[dict[str, Any]], outcome: str) -> int:
    return sum(1 for r in records if r["outcome"] == outcome)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=10_000, help="mutations to judge")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default="store,cube,sources")
    parser.add_argument(
        "--only", type=int, default=None, help="judge mutation ONLY alone and print it"
    )
    parser.add_argument("--out", default="fuzz-verdicts.jsonl", help="one JSON line per verdict")
    parser.add_argument(
        "--resume", action="store_true", help="keep the verdicts of --out, go on after them"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds without a verdict before the worker is killed",
    )
    parser.add_argument(
        "--memory-limit", type=int, default=8 << 30, help="address-space limit of a worker, bytes"
    )
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument(
        "--raw-h5",
        action="store_true",
        help="also flip bits in and truncate HDF5 sources: a hunt for crashes of the HDF5 library "
        "(their raw data carries no checksum, so a changed value there is another valid file)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    if args.only is not None:
        args.worker = True
        _worker(args)
        return
    started, commit = time.monotonic(), source_commit()
    records = _drive(args)
    seconds = time.monotonic() - started
    raw = " --raw-h5" if args.raw_h5 else ""
    notes = [
        f"fuzz: --n {args.n} --seed {args.seed} --targets {args.targets}{raw}",
        f"cytearc at commit {commit} (when the run started) with the working tree's changes",
    ]
    for line in [
        *machine(("zarr", "numcodecs", "h5py", "dask"), notes=notes),
        *_summary(records, seconds, args),
    ]:
        print(line)


if __name__ == "__main__":
    main()
