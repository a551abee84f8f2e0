"""Kill every writer with SIGKILL at random points: no destination may be a readable half-write.

Run from the project root::

    .venv/bin/python benchmarks/kill_points.py --kills 100
    .venv/bin/python benchmarks/kill_points.py --kills 20 --writers import,cube --seed 1
    .venv/bin/python benchmarks/kill_points.py --kills 100 --full-pipeline   # the whole rna_standard recipe
    .venv/bin/python benchmarks/kill_points.py --kills 30 --writers subset,merge,repack   # the store tools

For each writer of :data:`cytearc.faults.KILL_WRITERS` (a 10x import with its
transpose, ``features.normalize``, a pipeline run, ``compare.write_bulk``,
``cytepool.write_cube``), or of :data:`cytearc.faults.TOOL_WRITERS`
(``SubsetZarr``, a resumed ``DataStoreMerge``, ``repack_zarr``), the inputs are written once (``--cells`` x
``--genes``), one unkilled run in a child of a
:class:`cytearc.faults.ForkServer` measures the writer, and then ``--kills``
runs are each SIGKILLed after a delay drawn uniformly from 0 to that time
(seeded). After each kill the destination is judged
(:func:`cytearc.faults.judge_kill`: refused, complete, untouched, partial,
half-write or crash), the hidden temporary folders left beside it are
counted, and the writer's command is run again (with ``overwrite=True`` where
it needs it), which must succeed and leave the complete result. The summary
gives per writer the outcomes, the reruns that failed, the kills that
landed after the write had finished, the leftovers, the seconds and the peak
RSS of the children.
"""

from __future__ import annotations

import argparse
import collections
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import machine, source_commit

if TYPE_CHECKING:
    from cytearc.faults import ForkServer, KillCase

OUTCOMES = ("refused", "complete", "untouched", "partial", "half-write", "crash")


def _writer(
    name: str, args: argparse.Namespace, inputs: dict[str, Path], work: Path, server: ForkServer
) -> dict[str, Any]:
    from cytearc.faults import judge_kill, kill_case  # noqa: PLC0415 (imported after the arguments parse)

    case = kill_case(name, inputs, work / name, full_pipeline=args.full_pipeline)
    case.reset()
    before = _values(case) if case.in_place else None
    reference = server.run(case.code)
    if reference.exit != 0:
        msg = f"{name}: the unkilled run failed:\n{reference.stderr}"
        raise SystemExit(msg)
    after = _values(case)
    draw = random.Random(f"{args.seed}-{name}")
    outcomes: collections.Counter[str] = collections.Counter()
    causes: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    finished = leftovers = leftovers_after = rerun_failed = rerun_incomplete = 0
    started = time.monotonic()
    for k in range(args.kills):
        case.reset()
        delay = draw.uniform(0.0, reference.seconds)
        run = server.run(case.code, kill_after=delay)
        finished += not run.killed
        verdict = judge_kill(case, before=before, after=after)
        outcomes[verdict.outcome] += 1
        if not verdict.ok:
            failures.append(
                f"kill {k} after {delay:.3f} s: {verdict.outcome}: {verdict.detail[:300]}"
            )
        leftovers += bool(case.leftovers())
        rerun = server.run(case.rerun)
        if rerun.exit != 0:
            rerun_failed += 1
            failures.append(
                f"kill {k} after {delay:.3f} s: the rerun exited {rerun.exit}; see {server.log}"
            )
            continue
        again = judge_kill(case, before=before, after=after)
        if again.outcome != "complete":
            rerun_incomplete += 1
            failures.append(f"kill {k}: after the rerun: {again.outcome}: {again.detail[:300]}")
        leftovers_after += bool(case.leftovers())
    return {
        "writer": name,
        "reference": reference.seconds,
        "outcomes": outcomes,
        "finished": finished,
        "leftovers": leftovers,
        "leftovers_after": leftovers_after,
        "rerun_failed": rerun_failed,
        "rerun_incomplete": rerun_incomplete,
        "seconds": time.monotonic() - started,
        "failures": failures,
        "causes": causes,
    }


HEADER = (
    f"{'writer':10}{'ref s':>7}"
    + "".join(f"{o:>11}" for o in OUTCOMES)
    + f"{'finished':>10}{'rerun fail':>11}{'leftovers':>10}{'after rerun':>12}{'s':>7}"
)
"""The columns of a writer's row: its outcomes, kills after it finished, failed reruns, leftover folders."""


def _row(r: dict[str, Any]) -> str:
    """One writer's row of the table, printed as soon as the writer is done."""
    outcomes = "".join(f"{r['outcomes'][o]:>11}" for o in OUTCOMES)
    rerun = r["rerun_failed"] + r["rerun_incomplete"]
    tail = f"{r['finished']:>10}{rerun:>11}{r['leftovers']:>10}{r['leftovers_after']:>12}"
    return f"{r['writer']:10}{r['reference']:>7.2f}{outcomes}{tail}{r['seconds']:>7.0f}"


def _values(case: KillCase) -> dict[str, Any]:
    """What the destination holds when no run was killed; it must verify."""
    values = case.read()
    if not isinstance(values, dict):
        msg = f"{case.writer}: {case.destination} fails verification without any kill: {values}"
        raise SystemExit(msg)
    return values


def _cause(line: str) -> str:
    """The exception class of a traceback's last line, and whether it names a zarr ``.partial`` file."""
    name = line.split(":", 1)[0].rsplit(".", 1)[-1]
    return f"{name} naming a zarr .partial file" if ".partial" in line else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=100, help="kill points per writer")
    parser.add_argument(
        "--writers",
        default="import,normalize,pipeline,pool,cube",
        help="comma-separated writers of cytearc.faults.KILL_WRITERS and TOOL_WRITERS "
        "(subset, merge, repack)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cells", type=int, default=3000)
    parser.add_argument("--genes", type=int, default=400)
    parser.add_argument(
        "--full-pipeline",
        action="store_true",
        help="the whole rna_standard recipe, not its stages through PCA",
    )
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args()

    from cytearc.faults import ForkServer, write_kill_inputs  # noqa: PLC0415

    started, commit = time.monotonic(), source_commit()
    work = Path(tempfile.mkdtemp(prefix="kill-points-", dir=args.tmpdir))
    inputs = write_kill_inputs(work / "inputs", n_cells=args.cells, n_genes=args.genes)
    results = []
    with ForkServer(log=work / "fork-server.log") as server:
        print(HEADER, flush=True)
        for name in args.writers.split(","):
            results.append(_writer(name, args, inputs, work, server))
            print(_row(results[-1]), flush=True)
    recipe = "rna_standard" if args.full_pipeline else "rna_standard through pca"
    notes = [
        f"kill points: --kills {args.kills} --seed {args.seed} --cells {args.cells} --genes {args.genes}; pipeline recipe {recipe}",
        f"cytearc at commit {commit} (when the run started) with the working tree's changes; work folder {work}",
    ]
    lines = machine(("zarr", "numcodecs", "dask"), notes=notes)
    lines.append(HEADER)
    lines += [_row(r) for r in results]
    readable = sum(r["outcomes"]["half-write"] + r["outcomes"]["crash"] for r in results)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    lines.append(
        f"{sum(args.kills for _ in results)} kills in {time.monotonic() - started:,.0f} s; "
        f"readable half-writes or crashes: {readable}; reruns that failed: "
        f"{sum(r['rerun_failed'] + r['rerun_incomplete'] for r in results)}; peak RSS of a child {rss:,.0f} MB"
    )
    for r in results:
        for cause, count in r["causes"].most_common():
            lines.append(f"  {r['writer']}: {count} reruns failed with {cause}")
        for failure in r["failures"][:5]:
            lines.append(f"  {r['writer']}: {failure}")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
