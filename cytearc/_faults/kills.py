"""Kill points: a writer run in a forked child, SIGKILLed after a delay, and what it left judged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from cytearc._faults.verdict import (
    NAMED_ERRORS,
    Detected,
    cube_values,
    difference,
    exception_text,
    store_values,
)
from cytearc.errors import OperationArgumentError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "KILL_WRITERS",
    "TOOL_WRITERS",
    "ForkServer",
    "KillCase",
    "KillRun",
    "KillVerdict",
    "judge_kill",
    "kill_case",
    "write_kill_inputs",
]

_SERVER: Final = """
import importlib, json, os, signal, sys, tempfile, time, traceback
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    err = tempfile.TemporaryFile()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(err.fileno(), 2)
            exec(compile(request["code"], "<kill-point child>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    kill_at = start + request["kill_after"] if request["kill_after"] is not None else None
    deadline = start + request["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if now >= deadline or (kill_at is not None and now >= kill_at):
            os.kill(pid, signal.SIGKILL)
            kill_at, deadline = None, float("inf")
        time.sleep(0.002)
    signalled = os.WIFSIGNALED(status)
    exit_code = None if signalled else os.WEXITSTATUS(status)
    err.seek(0)
    stderr = err.read().decode("utf-8", "replace")
    err.close()
    sys.stderr.write(stderr)
    sys.stderr.flush()
    reply = {"seconds": time.monotonic() - start, "killed": signalled, "exit": exit_code, "stderr": stderr[-4000:]}
    print(json.dumps(reply), flush=True)
"""
"""The fork server: imports its arguments, then forks one child per request line and reaps it."""


@dataclass(frozen=True, kw_only=True)
class KillRun:
    """How a child of a :class:`ForkServer` ended.

    Parameters
    ----------
    seconds
        From the fork to the child's end.
    killed
        It ended by SIGKILL (it was still running when the delay passed).
    exit
        Its exit code when it ended by itself (1 when its code raised), else
        None.
    stderr
        The end of what it wrote to stderr (the traceback when it raised).
    """

    seconds: float
    killed: bool
    exit: int | None
    stderr: str = ""


class ForkServer:
    """A process that imports CyteArc once and forks a child per run, which it may SIGKILL.

    A child runs a script as ``python -c`` would, with its stdout discarded
    and its stderr appended to ``log``. The server kills a child itself,
    before reaping it, so the pid it kills cannot have been reused. A child
    starts in milliseconds instead of the seconds an interpreter takes to
    import CyteArc; nothing in the server has started a thread when it
    forks. Linux and ``os.fork`` only. Use it as a context manager.

    Parameters
    ----------
    log
        The file the server's and its children's stderr go to.
    preload
        The modules the server imports before it forks.

    Raises
    ------
    OperationArgumentError
        The server stopped before it was ready (its log says why).
    """

    def __init__(
        self,
        *,
        log: Path,
        preload: Sequence[str] = ("cytearc", "cytearc.datastore", "cytearc.pipeline.runner"),
    ) -> None:
        self.log = log
        self._log: IO[bytes] = log.open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            cwd=log.parent,
        )
        self._reply()

    def _reply(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            tail = self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
            msg = f"{self.log}: the fork server stopped; expected a reply, found the end of its output. Its log ends:\n{tail}"
            raise OperationArgumentError(msg)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, code: str, *, kill_after: float | None = None, timeout: float = 600.0) -> KillRun:
        """Run ``code`` in a forked child; SIGKILL it after ``kill_after`` seconds if it still runs.

        Parameters
        ----------
        code
            The child's script.
        kill_after
            Seconds after the fork; None to let it finish.
        timeout
            The child is killed after this long in any case.

        Returns
        -------
        KillRun
            How the child ended.

        Raises
        ------
        OperationArgumentError
            The server stopped.
        """
        assert self._proc.stdin is not None
        request = {"code": code, "kill_after": kill_after, "timeout": timeout}
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        reply = self._reply()
        return KillRun(
            seconds=float(reply["seconds"]), killed=bool(reply["killed"]), exit=reply["exit"]
        )

    def close(self) -> None:
        """Stop the server: it ends when its input closes."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._log.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


KILL_WRITERS: Final = ("import", "normalize", "pipeline", "pool", "cube")
"""The writers of :func:`kill_case`: a 10x import (its counts, transpose and summaries), an artifact
publication (``features.normalize``), a pipeline run, pooling into a cube (``compare.write_bulk``)
and a cube write (``cytepool.write_cube``)."""

TOOL_WRITERS: Final = ("subset", "merge", "repack")
"""More writers of :func:`kill_case`, the store tools: ``SubsetZarr`` (half the cells),
``DataStoreMerge`` of the store with itself (resumed by its rerun, not overwritten) and
``repack_zarr`` to the ``object_store`` profile."""

_HEAD: Final = (
    "from cytearc import DataStore, import_10x_mtx\nfrom cytepool import read_cube, write_cube\n"
)
_LAYOUT: Final = "CountLayout(unit_bytes=2**14, chunk_bytes=2**12)"
_SHORT_RECIPE: Final = (
    "from cytearc.pipeline.recipes import RNA_STANDARD, Recipe\n"
    "recipe = Recipe(name='rna_through_pca', stages=RNA_STANDARD.stages[:5])\n"
)


def write_kill_inputs(folder: Path, *, n_cells: int = 3000, n_genes: int = 400) -> dict[str, Path]:
    """Write what the writers of :func:`kill_case` read: a 10x folder, a store and a cube.

    Parameters
    ----------
    folder
        Where they are written (created).
    n_cells, n_genes
        The size of the synthetic dataset (:mod:`cytearc.datasets`, two cell
        types, two donors).

    Returns
    -------
    dict of str to Path
        ``mtx`` (the dataset's 10x Matrix Market folder), ``store`` (the same
        counts and cell table imported, in shards of 16 KiB), ``cube`` (the
        store pooled by sample and cell type).
    """
    from cytearc.datasets import write_store  # noqa: PLC0415 (imports the importers)
    from cytearc.datasets.synthetic import Params, write_dataset  # noqa: PLC0415
    from cytearc.datastore import DataStore  # noqa: PLC0415
    from cytearc.storage.layout import CountLayout  # noqa: PLC0415

    params = Params(n_cells=n_cells, n_genes=n_genes, n_types=2, n_markers=5, n_donors=2)
    folder.mkdir(parents=True, exist_ok=True)
    write_dataset(params, folder / "data")
    store = Path(
        write_store(
            folder / "base.zarr",
            n_cells=n_cells,
            n_genes=n_genes,
            n_types=2,
            n_markers=5,
            n_donors=2,
            cluster="threads",
            layout=CountLayout(unit_bytes=2**14, chunk_bytes=2**12),
        )
    )
    cube = folder / "base.cube.zarr"
    ds = DataStore(store, cluster="threads", show_progress=False)
    ds.compare.write_bulk(cube, sample_key="sample", group_key="cell_type")
    return {"mtx": folder / "data" / "mtx", "store": store, "cube": cube}


@dataclass(frozen=True, kw_only=True)
class KillCase:
    """One writer to run, kill, judge, and run again.

    Parameters
    ----------
    writer
        Its name, one of :data:`KILL_WRITERS`.
    code
        The script of the run that is killed (and of the reference run).
    rerun
        The script run after the kill, which must succeed: ``code`` with
        ``overwrite=True`` where the writer refuses an existing destination.
    destination
        What the writer writes: a new store or cube, or the store it changes.
    kind
        ``store`` or ``cube``: how the destination is read.
    in_place
        The writer changes an existing store, copied from ``prepare`` before
        each run.
    prepare
        ``(source, destination)`` folders copied before each run.
    """

    writer: str
    code: str
    rerun: str
    destination: Path
    kind: Literal["store", "cube"]
    in_place: bool
    prepare: tuple[tuple[Path, Path], ...] = field(default=())

    def reset(self) -> None:
        """Remove the destination and its hidden siblings, then copy the writer's inputs afresh."""
        name = self.destination.name
        for sibling in self.destination.parent.iterdir():
            if sibling.name == name or sibling.name.startswith(f".{name}"):
                if sibling.is_dir():
                    shutil.rmtree(sibling)
                else:
                    sibling.unlink()
        for source, target in self.prepare:
            shutil.copytree(source, target)

    def read(self) -> dict[str, Any] | Detected:
        """Everything the destination holds: :func:`store_values` (artifacts by content) or :func:`cube_values`.

        Returns
        -------
        dict or Detected
            The values, or :class:`Detected` when the store fails verification.

        Raises
        ------
        CyteArcError, cytepool.errors.CytePoolError
            Whatever opening or reading raises.
        """
        if self.kind == "cube":
            return cube_values(self.destination)
        return store_values(self.destination, artifacts="content")

    def leftovers(self) -> list[str]:
        """The hidden siblings of the destination (a writer's temporary folders) that remain.

        Returns
        -------
        list of str
            Their names.
        """
        prefix = f".{self.destination.name}"
        return sorted(
            p.name for p in self.destination.parent.iterdir() if p.name.startswith(prefix)
        )


def kill_case(
    writer: str, inputs: dict[str, Path], work: Path, *, full_pipeline: bool = False
) -> KillCase:
    """The scripts and the destination of one writer, writing below ``work``.

    Parameters
    ----------
    writer
        One of :data:`KILL_WRITERS` or :data:`TOOL_WRITERS`.
    inputs
        What :func:`write_kill_inputs` wrote.
    work
        A folder of this writer's own (created).
    full_pipeline
        Run the whole ``rna_standard`` recipe (through UMAP and markers)
        instead of its stages through PCA.

    Returns
    -------
    KillCase
        The case.

    Raises
    ------
    OperationArgumentError
        ``writer`` is not one of :data:`KILL_WRITERS`.
    """
    work.mkdir(parents=True, exist_ok=True)
    if writer == "import":
        dest = work / "imported.zarr"
        head = f"{_HEAD}from cytearc.storage.layout import CountLayout\n"
        call = f"import_10x_mtx({str(inputs['mtx'])!r}, {str(dest)!r}, cluster='threads', show_progress=False, layout={_LAYOUT}"
        kind: Literal["store", "cube"] = "store"
    elif writer == "pool":
        dest = work / "pooled.cube.zarr"
        head = f"{_HEAD}ds = DataStore({str(inputs['store'])!r}, cluster='threads', show_progress=False)\n"
        call = f"ds.compare.write_bulk({str(dest)!r}, sample_key='sample', group_key='cell_type'"
        kind = "cube"
    elif writer == "cube":
        dest = work / "written.cube.zarr"
        head = _HEAD
        call = f"write_cube(read_cube({str(inputs['cube'])!r}), {str(dest)!r}"
        kind = "cube"
    elif writer in TOOL_WRITERS:
        return _tool_case(writer, inputs, work)
    elif writer in {"normalize", "pipeline"}:
        dest = work / "store.zarr"
        head = f"{_HEAD}ds = DataStore({str(dest)!r}, zarr_mode='r+', cluster='threads', show_progress=False)\n"
        if writer == "normalize":
            code = f"{head}ds.features.normalize()\n"
        elif full_pipeline:
            code = f"{head}ds.pipeline.run(n_top=150, n_comps=8, resolution=0.5)\n"
        else:
            code = f"{head}{_SHORT_RECIPE}ds.pipeline.run(recipe, n_top=150, n_comps=8)\n"
        return KillCase(
            writer=writer,
            code=code,
            rerun=code,
            destination=dest,
            kind="store",
            in_place=True,
            prepare=((inputs["store"], dest),),
        )
    else:
        msg = f"writer: expected one of {[*KILL_WRITERS, *TOOL_WRITERS]}, found {writer!r}; pass one of them"
        raise OperationArgumentError(msg)
    return KillCase(
        writer=writer,
        code=f"{head}{call})\n",
        rerun=f"{head}{call}, overwrite=True)\n",
        destination=dest,
        kind=kind,
        in_place=False,
    )


def _tool_case(writer: str, inputs: dict[str, Path], work: Path) -> KillCase:
    """The kill case of a store tool (:data:`TOOL_WRITERS`)."""
    store = str(inputs["store"])
    head = (
        "import numpy as np\n"
        "from cytearc.tools import DataStoreMerge, SubsetZarr, repack_zarr\n"
        "options = {'cluster': 'threads', 'show_progress': False}\n"
    )
    dest = work / f"{writer}.zarr"
    if writer == "subset":
        head += f"from cytearc import DataStore\nhalf = np.arange(0, DataStore({store!r}).cells.n_rows, 2)\n"
        call = f"SubsetZarr({store!r}, {str(dest)!r}, cells=half, **options"
        rerun = f"{call}, overwrite=True).dump()\n"
    elif writer == "merge":
        call = f"DataStoreMerge([{store!r}, {store!r}], {str(dest)!r}, names=['a', 'b'], mem_budget='256MiB', **options"
        rerun = f"{call}).dump()\n"  # the same merge again resumes it
    else:
        call = f"repack_zarr({store!r}, {str(dest)!r}, profile='object_store', **options"
        rerun = f"{call}, overwrite=True)\n"
    suffix = ").dump()\n" if writer != "repack" else ")\n"
    return KillCase(
        writer=writer,
        code=f"{head}{call}{suffix}",
        rerun=f"{head}{rerun}",
        destination=dest,
        kind="store",
        in_place=False,
    )


KillOutcome = Literal["refused", "complete", "untouched", "partial", "half-write", "crash"]
"""What a killed writer left (see :class:`KillVerdict`)."""


@dataclass(frozen=True, kw_only=True)
class KillVerdict:
    """What a killed writer left.

    Parameters
    ----------
    outcome
        ``refused`` (opening or reading raises a named error), ``complete``
        (the values of a complete run), ``untouched`` (an in-place writer's
        store as before), ``partial`` (an in-place writer's store whose
        cells, features and counts are as before or as after, and whose
        published artifacts each hold values a complete run publishes),
        ``half-write`` (anything else that opens, or a store that opens and
        fails verification) or ``crash`` (another exception).
    detail
        What was raised or different.
    """

    outcome: KillOutcome
    detail: str

    @property
    def ok(self) -> bool:
        """The destination is refused, complete, untouched or partial: never a readable half-write."""
        return self.outcome in {"refused", "complete", "untouched", "partial"}


def judge_kill(
    case: KillCase, *, before: dict[str, Any] | None, after: dict[str, Any]
) -> KillVerdict:
    """Judge what a killed run left, against the states before and after a complete run.

    Parameters
    ----------
    case
        The writer.
    before
        ``case.read()`` before the run, for an in-place writer; else None.
    after
        ``case.read()`` after a complete run.

    Returns
    -------
    KillVerdict
        The outcome.
    """
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            got = case.read()
        except NAMED_ERRORS as exc:
            return KillVerdict(outcome="refused", detail=exception_text(exc))
        except Exception as exc:  # any other exception is the crash being judged
            return KillVerdict(outcome="crash", detail=exception_text(exc, frames=True))
    if isinstance(got, Detected):
        return KillVerdict(outcome="half-write", detail=f"opens, then fails verify: {got.detail}")
    if (found := difference(got, after)) is None:
        return KillVerdict(outcome="complete", detail="")
    if before is None:
        return KillVerdict(outcome="half-write", detail=found)
    return _judge_in_place(got, before=before, after=after)


def _judge_in_place(
    got: dict[str, Any], *, before: dict[str, Any], after: dict[str, Any]
) -> KillVerdict:
    if difference(got, before) is None:
        return KillVerdict(outcome="untouched", detail="")
    published = set(got["artifacts"])
    foreign = sorted(published - set(after["artifacts"]))
    if foreign:
        return KillVerdict(
            outcome="half-write", detail=f"artifacts no complete run publishes: {foreign}"
        )
    core = {k: v for k, v in got.items() if k != "artifacts"}
    against = [{k: v for k, v in state.items() if k != "artifacts"} for state in (before, after)]
    differences = [difference(core, state) for state in against]
    if None in differences:
        detail = (
            f"{len(published)} of the {len(set(after['artifacts']))} artifacts of a complete run"
        )
        return KillVerdict(outcome="partial", detail=detail)
    return KillVerdict(
        outcome="half-write",
        detail=f"cells or counts as neither before nor after: {differences[0]}",
    )
