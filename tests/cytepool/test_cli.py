"""The cytepool command line: inspect, verify, history, demo; JSON output, exit codes and --debug."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import zarr

from cytepool import read_cube, write_cube
from cytepool.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    from cytepool import Cube


def test_inspect_json(tmp_path: Path, cube: Cube, capsys: pytest.CaptureFixture[str]) -> None:
    """Inspect --json gives shape, tables with kinds, layers, fingerprint and provenance."""
    path = write_cube(cube, tmp_path / "c.cube.zarr")
    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["shape"] == {"groups": 3, "samples": 4, "features": 50}
    assert info["fingerprint"] == cube.fingerprint
    assert info["tables"]["samples"] == [
        {"name": "sample", "kind": "text"},
        {"name": "donor", "kind": "text"},
    ]
    assert info["layers"]["counts"] == "int32"
    assert info["provenance"]["source"] == {"tool": "tests", "seed": 0}


def test_inspect_text(tmp_path: Path, cube: Cube, capsys: pytest.CaptureFixture[str]) -> None:
    """Inspect prints the shape, the fingerprint and the provenance in words."""
    path = write_cube(cube.select(groups=["G1"]), tmp_path / "c.cube.zarr")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 groups x 4 samples x 50 features" in out
    assert "1. select: kept 1 groups (positions 1)" in out


def test_verify_exit_codes(tmp_path: Path, cube: Cube, capsys: pytest.CaptureFixture[str]) -> None:
    """Verify exits 0 when all matches, 1 naming the first mismatch, 3 for no cube."""
    path = write_cube(cube, tmp_path / "c.cube.zarr", compression=None)
    assert main(["verify", str(path)]) == 0
    assert cube.fingerprint in capsys.readouterr().out
    chunk = path / "layers" / "counts" / "c" / "2" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[5] ^= 0xFF
    chunk.write_bytes(bytes(data))
    assert main(["verify", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert report["error"]["type"] == "FingerprintMismatchError"
    assert "layer 'counts', group 2" in report["error"]["message"]
    assert main(["verify", str(tmp_path / "nothing.cube.zarr")]) == 3


def _no_cube(kind: str, path: Path) -> Path:
    """Something at ``path`` that is not a cube."""
    if kind == "file":
        path.write_text("not a cube\n", encoding="utf-8")
    elif kind == "empty-directory":
        path.mkdir()
    elif kind == "zarr-group":
        zarr.create_group(store=str(path), zarr_format=3, attributes={"title": "other data"})
    elif kind == "zarr-array":
        zarr.create_array(store=str(path), shape=(3,), dtype="int8", zarr_format=3)
    return path


def _damaged(cube: Cube, path: Path) -> Path:
    """A cube whose cell numbers no longer match their digest (found when it is opened)."""
    write_cube(cube, path)
    n_cells = zarr.open_array(path / "n_cells", mode="r+")
    n_cells[0, 0] = int(n_cells[0, 0]) + 1
    return path


@pytest.mark.parametrize("command", ["verify", "inspect", "history"])
@pytest.mark.parametrize("kind", ["missing", "file", "empty-directory", "zarr-group", "zarr-array"])
def test_no_cube_at_the_path_exits_3(
    tmp_path: Path, command: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify, inspect and history exit 3 when nothing at the path is a cube, naming the path."""
    path = _no_cube(kind, tmp_path / "x.cube.zarr")
    assert main([command, str(path)]) == 3
    err = capsys.readouterr().err
    assert "CubeNotFoundError" in err
    assert f"{path}: no cube here" in err


@pytest.mark.parametrize("command", ["verify", "inspect", "history"])
def test_a_damaged_cube_exits_1_and_a_sound_one_0(
    tmp_path: Path, cube: Cube, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify, inspect and history exit 0 on a sound cube and 1 naming the damage of a damaged one."""
    sound = write_cube(cube, tmp_path / "a.cube.zarr")
    assert main([command, str(sound)]) == 0
    capsys.readouterr()
    damaged = _damaged(cube, tmp_path / "b.cube.zarr")
    assert main([command, str(damaged)]) == 1
    err = capsys.readouterr().err
    assert f"CubeDigestError: {damaged}: n_cells: values give sha256:" in err


def test_verify_json_reports_no_cube(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`verify --json` exits 3 on a Zarr group that is not a cube and says so in its report."""
    path = _no_cube("zarr-group", tmp_path / "x.zarr")
    assert main(["verify", str(path), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert report["error"]["type"] == "CubeNotFoundError"


def test_user_errors_print_one_line_and_debug_reraises(
    tmp_path: Path, cube: Cube, capsys: pytest.CaptureFixture[str]
) -> None:
    """An OSError from user input is `error: ...` with exit 1; with --debug it propagates."""
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    args = ["demo", "-o", str(blocker / "out")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: NotADirectoryError: ")
    assert str(blocker) in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(OSError, match=str(blocker)):
        main([*args, "--debug"])
    with pytest.raises(OSError, match=str(blocker)):
        main(["--debug", *args])


def test_verify_chain_and_history(
    tmp_path: Path, cube: Cube, capsys: pytest.CaptureFixture[str]
) -> None:
    """Verify --chain replays the provenance from input files; history prints it."""
    source = write_cube(cube, tmp_path / "a.cube.zarr")
    derived = write_cube(
        read_cube(source).combine(axis="samples", mapping={"S1": "S0"}), tmp_path / "b.cube.zarr"
    )
    assert main(["verify", str(derived), "--chain", str(source)]) == 0
    assert "chain of 1 operations" in capsys.readouterr().out
    assert main(["history", str(derived)]) == 0
    assert "combine samples" in capsys.readouterr().out


@pytest.mark.slow
def test_console_script_demo(tmp_path: Path) -> None:
    """The installed `cytepool demo` writes two cubes that verify as a chain."""
    out = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "cytepool.cli", "demo", "-o", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "demo.cube.zarr" in run.stdout
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "cytepool.cli",
            "verify",
            str(out / "demo-T.cube.zarr"),
            "--chain",
            str(out / "demo.cube.zarr"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["ok"] is True
