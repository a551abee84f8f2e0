"""The main job on clusters started from the recipes' own command lines equals the local run.

No SLURM or Docker here: the SLURM batch script runs in ``bash`` with the
variables SLURM sets and an ``srun`` that starts ``--ntasks`` copies of its
command, and the scheduler and workers of ``compose.yaml`` run as processes
with the service host ``scheduler`` and its ports replaced by 127.0.0.1 and
free ports. Each cluster runs :func:`cytearc.demo.run_demo` through its
scheduler; the datasets, every artifact of the store (provenance and
arrays), the cube and the limma-voom tables equal those of the same demo
on Dask's threads in this process. Artifact ids are random, so the two
stores' artifacts are paired by kind and provenance first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from dask.utils import parse_bytes
from distributed import Client

from cytearc._faults.verdict import cube_values, difference, store_values
from cytearc.demo import run_demo
from cytearc.engine import shutdown
from cytepool.servers import dask_processes
from cytepool.testing import free_port

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

DEPLOY: Final = Path(__file__).resolve().parents[2] / "deploy"
SBATCH: Final = DEPLOY / "slurm" / "cytearc-cluster.sbatch"
DEMO: Final[dict[str, Any]] = {"n_cells": 1000, "n_genes": 600, "seed": 0, "show_progress": False}
"""The smallest demo whose clusters and limma-voom results are still those of the planted truth."""
WORKER_MEMORY: Final = parse_bytes("1GiB")
BIN: Final = str(Path(sys.executable).parent)
"""This environment's ``bin``, first on the processes' ``PATH`` so that ``dask`` is this Dask."""
FAKE_SRUN: Final = """#!/usr/bin/env bash
# srun for tests: drop srun's options (--name=value only) and start --ntasks copies of the command.
ntasks=1
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in
        --ntasks=*) ntasks=${1#--ntasks=} ;;
        --*=*) ;;
        *) echo "fake srun: unsupported option $1" >&2; exit 2 ;;
    esac
    shift
done
for ((task = 0; task < ntasks; task++)); do
    SLURM_PROCID=$task "$@" &
done
wait
"""
_ARTIFACT_ID: Final = re.compile(r"\b[0-9a-f]{64}\b")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The demo on Dask's threads in this process: its folder and summary."""
    out = tmp_path_factory.mktemp("local") / "demo"
    summary = run_demo(out, cluster="threads", **DEMO)
    assert summary["clusters"] >= 4
    assert summary["adjustedRandIndexToCellTypes"] >= 0.9
    assert summary["de"]["groups"]
    return out, summary


# --- comparing two demos -----------------------------------------------------


def _translate(node: Any, ids: Mapping[str, str]) -> Any:
    """``node`` with the artifact ids in its texts and keys replaced by ``ids``."""
    if isinstance(node, str):
        return _ARTIFACT_ID.sub(lambda m: ids.get(m[0], m[0]), node)
    if isinstance(node, dict):
        return {_translate(k, ids): _translate(v, ids) for k, v in node.items()}
    if isinstance(node, list):
        return [_translate(v, ids) for v in node]
    return node


def _is_artifact(key: str) -> bool:
    """Whether a key of :func:`store_values` is an artifact's reference (``[scope/]artifacts/kind/id``)."""
    return key.startswith("artifacts/") or "/artifacts/" in key


def _paired_ids(got: Mapping[str, Any], expected: Mapping[str, Any]) -> dict[str, str]:
    """The artifact ids of ``got`` mapped to those of ``expected``: same scope, kind and provenance.

    An artifact's provenance names its inputs by id, so artifacts are paired
    once their inputs are, in as many rounds as the lineage is deep.
    """
    targets: dict[str, list[str]] = {}
    for key in filter(_is_artifact, expected):
        targets.setdefault(key.rsplit("/", 1)[0], []).append(key)
    pending = list(filter(_is_artifact, got))
    ids: dict[str, str] = {}
    while pending:
        left = []
        for key in pending:
            where, artifact_id = key.rsplit("/", 1)
            provenance = _translate(got[key]["provenance"], ids)
            same = [t for t in targets.get(where, []) if expected[t]["provenance"] == provenance]
            if len(same) == 1:
                ids[artifact_id] = same[0].rsplit("/", 1)[1]
            else:
                left.append(key)
        if len(left) == len(pending):
            break
        pending = left
    return ids


def assert_same_demo(got: Path, expected: Path) -> None:
    """Two demo folders hold the same store (every artifact), cube and limma-voom tables."""
    expected_store = store_values(expected / "pbmc.zarr")
    got_store = store_values(got / "pbmc.zarr")
    assert isinstance(expected_store, dict)
    assert isinstance(got_store, dict)
    ids = _paired_ids(got_store, expected_store)
    translated = dict(sorted(_translate(got_store, ids).items()))
    assert difference(translated, dict(sorted(expected_store.items()))) is None
    cube = _translate(cube_values(got / "pbmc.cube.zarr"), ids)
    assert difference(cube, cube_values(expected / "pbmc.cube.zarr")) is None
    files = sorted(p.name for p in (expected / "de").iterdir())
    assert sorted(p.name for p in (got / "de").iterdir()) == files
    for name in files:
        if name.endswith(".json"):
            found = _translate(json.loads((got / "de" / name).read_text()), ids)
            assert found == json.loads((expected / "de" / name).read_text()), name
        else:
            assert (got / "de" / name).read_bytes() == (expected / "de" / name).read_bytes(), name


def assert_same_summary(got: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """The fingerprints, clusters and limma-voom results of two demo summaries are equal."""
    assert got["datasetFingerprint"] == expected["datasetFingerprint"]
    assert got["cube"]["fingerprint"] == expected["cube"]["fingerprint"]
    for key in ("cells", "clusters", "adjustedRandIndexToCellTypes", "de"):
        assert got[key] == expected[key], key


def _assert_workers(client: Client, n: int) -> None:
    """``n`` workers on 127.0.0.1, each one thread with a memory limit of :data:`WORKER_MEMORY`."""
    workers = client.scheduler_info()["workers"]
    assert len(workers) == n
    for address, worker in workers.items():
        assert address.startswith("tcp://127.0.0.1:")
        assert (worker["nthreads"], worker["memory_limit"]) == (1, WORKER_MEMORY)


# --- SLURM -------------------------------------------------------------------


@contextlib.contextmanager
def _batch_job(env: Mapping[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run the batch script in a session of its own; kill the whole session on exit."""
    with log.open("wb") as output:
        job = subprocess.Popen(
            ["bash", str(SBATCH)],
            env=dict(env),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield job
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.wait(timeout=20)


def _wait_for_file(path: Path, job: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.is_file():
        assert job.poll() is None, f"the batch script exited ({job.returncode}):\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no scheduler file after 60 s:\n{log.read_text()}"
        time.sleep(0.2)


@pytest.mark.slow
def test_the_slurm_batch_script_runs_the_main_job(
    tmp_path: Path, reference: tuple[Path, dict[str, Any]]
) -> None:
    """The batch script's scheduler and ``srun`` workers run the demo as the threads do.

    Two tasks of one CPU and 1024 MiB each give two one-thread workers with a
    1 GiB memory limit; CyteArc connects through the scheduler file.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    scheduler_file = tmp_path / "scheduler.json"
    (tmp_path / "scratch").mkdir()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(bin_dir), BIN, os.environ["PATH"]]),
        "TMPDIR": str(tmp_path / "scratch"),
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": "2",
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_MEM_PER_CPU": "1024",
        "CYTEARC_SCHEDULER_HOST": "127.0.0.1",
        "CYTEARC_SCHEDULER_PORT": str(free_port()),
        "CYTEARC_DASHBOARD_PORT": str(free_port()),
        "CYTEARC_SCHEDULER_FILE": str(scheduler_file),
        "CYTEARC_LOCAL_DIRECTORY": str(tmp_path / "scratch"),
    }
    log = tmp_path / "job.log"
    with _batch_job(env, log) as job:
        _wait_for_file(scheduler_file, job, log)
        with Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
            _assert_workers(client, 2)
        try:
            summary = run_demo(tmp_path / "demo", cluster=str(scheduler_file), **DEMO)
        finally:
            shutdown()
    assert_same_summary(summary, reference[1])
    assert_same_demo(tmp_path / "demo", reference[0])


# --- Compose -----------------------------------------------------------------


def _on_this_machine(argv: list[str], *, port: int, dashboard: int) -> list[str]:
    """A command line of ``compose.yaml`` with the service host and ports of 127.0.0.1 and free ports."""
    out = []
    for arg in argv:
        local = arg.replace("tcp://scheduler:8786", f"tcp://127.0.0.1:{port}")
        local = local.replace("0.0.0.0:8787", f"127.0.0.1:{dashboard}")
        local = local.replace("0.0.0.0", "127.0.0.1")
        out.append(str(port) if local == "8786" else local)
    left = [a for a in out if re.search(r"scheduler:|0\.0\.0\.0|\b878[67]\b", a)]
    assert not left, f"compose.yaml has host names or ports the test does not replace: {left}"
    return out


@pytest.mark.slow
def test_the_compose_services_run_the_main_job(
    tmp_path: Path,
    reference: tuple[Path, dict[str, Any]],
    compose: Callable[[Mapping[str, str]], Any],
) -> None:
    """The scheduler and the two workers of ``compose.yaml``, as processes, run the demo as the threads do.

    ``CYTEARC_WORKER_MEMORY=1GiB`` reaches every worker's memory limit.
    """
    recipe = compose({"CYTEARC_WORKER_MEMORY": "1GiB"})
    port, dashboard = free_port(), free_port()
    scheduler = _on_this_machine(recipe.command("scheduler"), port=port, dashboard=dashboard)
    worker = _on_this_machine(recipe.command("worker"), port=port, dashboard=dashboard)
    assert recipe.environment("scheduler") == recipe.environment("worker")
    (tmp_path / "scratch").mkdir()
    env = {
        **os.environ,
        **recipe.environment("worker"),
        "PATH": os.pathsep.join([BIN, os.environ["PATH"]]),
        "TMPDIR": str(tmp_path / "scratch"),
    }
    workers = [worker] * recipe.replicas("worker")
    address = f"tcp://127.0.0.1:{port}"
    with dask_processes(scheduler, workers, address=address, env=env) as cluster:
        with Client(cluster.address, timeout="30s") as client:
            _assert_workers(client, 2)
        try:
            summary = run_demo(tmp_path / "demo", cluster=cluster.address, **DEMO)
        finally:
            shutdown()
    assert_same_summary(summary, reference[1])
    assert_same_demo(tmp_path / "demo", reference[0])
