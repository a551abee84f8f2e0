"""Both command lines on an existing cluster: --cluster everywhere, CYTEARC_CLUSTER, `cytearc cluster`."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from distributed import Client

from cytearc.cli import _parser as cytearc_parser
from cytearc.cli import main as cytearc_main
from cytearc.engine.cluster import shutdown
from cytepool.cli import _parser as cytepool_parser
from cytepool.cli import main as cytepool_main

if TYPE_CHECKING:
    from pathlib import Path


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("parser", [cytearc_parser, cytepool_parser], ids=["cytearc", "cytepool"])
def test_every_command_takes_cluster(parser) -> None:
    """Each subcommand of both programs has a --cluster option."""
    for name, command in _commands(parser()).items():
        if name == "cluster":  # it starts the cluster the others join
            continue
        options = {o for action in command._actions for o in action.option_strings}
        assert "--cluster" in options, name


def _transitions(address: str) -> int:
    with Client(address, set_as_default=False) as client:
        return int(
            client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
        )


@pytest.mark.slow
def test_cluster_command_serves_other_processes(
    tmp_path: Path,
    shared_data: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`cytearc cluster` prints its address; imports and cube checks run there; SIGTERM stops it."""
    scheduler_file = tmp_path / "scheduler.json"
    command = [sys.executable, "-m", "cytearc.cli", "cluster", "--mem-budget", "1GiB"]
    command += ["--workers", "2", "--json", "--scheduler-file", str(scheduler_file)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
        assert doc["address"].startswith("tcp://127.0.0.1:")
        assert doc["dashboard"].startswith("http://127.0.0.1:")
        assert (doc["workers"], doc["threadsPerWorker"]) == (2, 1)
        assert doc["memoryLimitPerWorker"] == 2**29
        assert json.loads(scheduler_file.read_text())["address"] == doc["address"]

        source = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5"
        monkeypatch.setenv("CYTEARC_CLUSTER", doc["address"])
        before = _transitions(doc["address"])
        assert cytearc_main(["import", str(source), str(tmp_path / "s.zarr"), "--json"]) == 0
        assert _transitions(doc["address"]) > before
        monkeypatch.delenv("CYTEARC_CLUSTER")

        assert cytepool_main(["demo", "-o", str(tmp_path / "demo")]) == 0
        capsys.readouterr()
        before = _transitions(doc["address"])
        cube = str(tmp_path / "demo" / "demo.cube.zarr")
        assert cytepool_main(["verify", cube, "--cluster", str(scheduler_file), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["ok"] is True
        assert _transitions(doc["address"]) > before
    finally:
        shutdown()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        assert proc.stdout is not None
        proc.stdout.close()
    assert code == 0


def test_unreachable_cluster_is_exit_code_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --cluster scheduler file that does not exist is one error line and exit code 1."""
    missing = str(tmp_path / "missing.json")
    assert cytepool_main(["verify", str(tmp_path / "x.cube.zarr"), "--cluster", missing]) == 1
    assert "ClusterConnectError" in capsys.readouterr().err
    assert cytearc_main(["info", str(tmp_path / "x.zarr"), "--cluster", missing]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
