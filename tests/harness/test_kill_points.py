"""Kill points (issue 10, fail closed): a writer SIGKILLed at a random point leaves nothing a reader accepts half-written.

Each writer of :data:`cytearc.faults.KILL_WRITERS` (an import with its
transpose, an artifact publication, a pipeline run, pooling into a cube, a
cube write) runs once to completion in a child of a
:class:`cytearc.faults.ForkServer`, which measures it; then it is run again
and SIGKILLed after a seeded random delay within that time. Afterwards the
destination is refused with a named error, complete, untouched, or (an
in-place writer) partial with only artifacts a complete run publishes; and
the same command run again (with ``overwrite=True`` where the writer needs
it) succeeds, with no manual cleanup, and leaves the complete result.
"""

from __future__ import annotations

import random
import uuid
from typing import TYPE_CHECKING, Any

import pytest
import zarr

from cytearc import import_10x_mtx
from cytearc.faults import (
    KILL_WRITERS,
    ForkServer,
    KillCase,
    KillRun,
    judge_kill,
    kill_case,
    write_kill_inputs,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

KILLS_PER_WRITER = 2
"""Kill points per writer in CI; ``benchmarks/kill_points.py`` runs a hundred or more."""

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kill-points")


@pytest.fixture(scope="module")
def inputs(work: Path) -> dict[str, Path]:
    return write_kill_inputs(work / "inputs", n_cells=1500, n_genes=300)


@pytest.fixture(scope="module")
def server(work: Path) -> Iterator[ForkServer]:
    with ForkServer(log=work / "fork-server.log") as running:
        yield running


def _complete_run(server: ForkServer, case: KillCase, code: str) -> KillRun:
    run = server.run(code)
    assert not run.killed, f"{case.writer}: the unkilled run was killed after {run.seconds:.0f} s"
    assert run.exit == 0, f"{case.writer}: the run failed:\n{run.stderr}"
    return run


@pytest.mark.parametrize("writer", KILL_WRITERS)
def test_a_killed_writer_leaves_no_readable_half_write(
    server: ForkServer, inputs: dict[str, Path], work: Path, writer: str
) -> None:
    """After SIGKILL at random points the destination is refused, complete, untouched or partial; a rerun completes it."""
    case = kill_case(writer, inputs, work / writer)
    case.reset()
    before: dict[str, Any] | None = None
    if case.in_place:
        read = case.read()
        assert isinstance(read, dict), read
        before = read
    seconds = _complete_run(server, case, case.code).seconds
    after = case.read()
    assert isinstance(after, dict), after
    draw = random.Random(f"kill-points-{writer}")
    for _ in range(KILLS_PER_WRITER):
        case.reset()
        delay = draw.uniform(0.0, seconds)
        run = server.run(case.code, kill_after=delay)
        verdict = judge_kill(case, before=before, after=after)
        assert verdict.ok, f"{writer} killed after {delay:.2f} s (killed: {run.killed}): {verdict}"
        _complete_run(server, case, case.rerun)
        again = judge_kill(case, before=before, after=after)
        assert again.outcome == "complete", (
            f"{writer}: the rerun after a kill at {delay:.2f} s left {again}"
        )


def test_a_child_that_is_killed_reports_it(server: ForkServer) -> None:
    """A child still running when its delay passes is SIGKILLed and reported killed; one that ends reports its exit code."""
    killed = server.run("import time\ntime.sleep(30)\n", kill_after=0.2)
    assert killed.killed
    assert killed.exit is None
    assert killed.seconds < 10
    finished = server.run("raise SystemExit(3)\n", kill_after=20)
    assert not finished.killed
    assert finished.exit == 3


@pytest.mark.parametrize(
    "leftover",
    ["matrices/RNA/counts/c/0/0", "matrices/RNA/zarr", "zarr", "cellData/new/member/zarr"],
)
def test_rerun_after_a_killed_chunk_write_succeeds(
    inputs: dict[str, Path], tmp_path: Path, leftover: str
) -> None:
    """An import killed while zarr wrote a chunk or a zarr.json (its temporary .partial file left) is replaced by a rerun.

    The last case is a new column's member whose folders zarr had made for
    its first ``zarr.json`` (the kill-point benchmark found it for SubsetZarr).
    """
    destination = tmp_path / "imported.zarr"
    options: dict[str, Any] = {"cluster": "threads", "show_progress": False}
    import_10x_mtx(inputs["mtx"], destination, **options)
    zarr.open_group(destination, mode="r+").attrs["cytearc:complete"] = False
    partial = destination / f"{leftover}.{uuid.uuid4().hex}.partial"
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"half a chunk")
    import_10x_mtx(inputs["mtx"], destination, overwrite=True, **options)
    assert zarr.open_group(destination, mode="r").attrs["cytearc:complete"] is True
