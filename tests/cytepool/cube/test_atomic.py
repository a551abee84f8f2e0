"""Atomic writes: a cube appears whole or not at all, and only a cube is ever replaced."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
from zarr.storage import LocalStore

from cytepool.cube import Cube, read_cube, write_cube
from cytepool.cube.atomic import hidden_sibling
from cytepool.errors import (
    CubeExistsError,
    CubeNotFoundError,
    CubeValueError,
    NonFiniteValueError,
)
from cytepool.testing import example_cube, tree_snapshot

if TYPE_CHECKING:
    from zarr.core.buffer import Buffer

# The child builds a 20 x 20 x 30,000 float64 layer (160 chunks) whose blocks sleep
# 50 ms each, so writing it takes several seconds; the parent kills it mid-write.
_SLOW_WRITER = """
import sys, time
import dask.array as da
import numpy as np
import pandas as pd
from cytepool.cube import Cube, write_cube

G, S, F = 20, 20, 30_000

def slow_block(block, block_info=None):
    time.sleep(0.05)
    rng = np.random.default_rng(list(block_info[None]["chunk-location"]))
    return rng.random(block.shape)

layer = da.zeros((G, S, F), chunks=(1, S, 4096)).map_blocks(slow_block, dtype=np.float64)
cube = Cube(
    samples=pd.DataFrame({"sample": [f"s{i}" for i in range(S)]}),
    groups=pd.DataFrame({"group": [f"g{i}" for i in range(G)]}),
    features=pd.DataFrame({"gene": [f"f{i}" for i in range(F)]}),
    layers={"counts": layer},
)
write_cube(cube, sys.argv[1])
print("finished", flush=True)
"""


def _small_cube(value: float = 1.0, *, layer: da.Array | None = None) -> Cube:
    return Cube(
        samples=pd.DataFrame({"sample": ["a", "b", "c"]}),
        groups=pd.DataFrame({"group": ["x", "y"]}),
        features=pd.DataFrame({"gene": [f"f{i}" for i in range(10)]}),
        layers={
            "counts": np.full((2, 3, 10), value),
            **({} if layer is None else {"log_sum": layer}),
        },
    )


def _hidden_siblings(target: Path) -> list[Path]:
    return sorted(target.parent.glob(f".{target.name}.tmp-*"))


def _nan_layer(*, group: int = 1, where: tuple[int, int] = (0, 0)) -> da.Array:
    """A lazy layer with one NaN, found only when its block is computed during the write."""
    values = np.ones((2, 3, 10))
    values[(group, *where)] = np.nan
    return da.from_array(values, chunks=(1, 3, 10))


# -- (a) a writer killed mid-write --------------------------------------------------


@pytest.mark.slow
def test_sigkilled_writer_leaves_no_target_and_next_write_succeeds(tmp_path: Path) -> None:
    """A writer killed by SIGKILL mid-write publishes nothing; the next write succeeds."""
    target = tmp_path / "big.cube.zarr"
    log = tmp_path / "child.log"
    with (
        log.open("wb") as out,
        subprocess.Popen(
            [sys.executable, "-c", _SLOW_WRITER, str(target)],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        ) as child,
    ):
        deadline = time.monotonic() + 60
        chunks: list[Path] = []
        while not chunks and child.poll() is None and time.monotonic() < deadline:
            chunks = [
                c for tmp in _hidden_siblings(target) for c in tmp.glob("layers/counts/c/*/0/*")
            ]
            time.sleep(0.01)
        running = child.poll() is None
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert running, f"the writer ended before it could be killed:\n{log.read_text()}"
    assert chunks, "no layer chunk appeared in a hidden sibling within 60 s"
    assert child.returncode == -signal.SIGKILL
    assert not target.exists()
    assert not target.is_symlink()
    with pytest.raises(CubeNotFoundError):
        read_cube(target)
    assert _hidden_siblings(target), "the killed writer left no hidden sibling to reclaim"
    small = _small_cube()
    write_cube(small, target)
    assert read_cube(target).verify_fingerprint() == small.fingerprint
    assert _hidden_siblings(target) == []


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _owner(sibling: Path, target: Path) -> tuple[str, str]:
    """The writer pid and host written in the name of a hidden sibling of ``target``."""
    pid, _, rest = sibling.name.removeprefix(f".{target.name}.tmp-").partition("-")
    return pid, rest.rsplit("-", 1)[0]


def _owned_by(sibling: Path, target: Path, *, pid: int, host: str | None = None) -> Path:
    """``sibling`` renamed as if written by ``pid`` (on ``host``)."""
    _, old_host = _owner(sibling, target)
    token = sibling.name.rsplit("-", 1)[1]
    return sibling.with_name(f".{target.name}.tmp-{pid}-{host or old_host}-{token}")


def test_a_write_reclaims_siblings_of_dead_writers_on_this_host_only(tmp_path: Path) -> None:
    """A write removes its target's hidden siblings whose writer died on this host, and no others."""
    target = tmp_path / "c.cube.zarr"
    live = hidden_sibling(target)
    pid, host = _owner(live, target)
    assert pid == str(os.getpid())
    hostname = socket.gethostname()
    assert host == hostname or not re.fullmatch(r"[A-Za-z0-9.-]+", hostname)
    dead_pid = _dead_pid()
    dead = _owned_by(live, target, pid=dead_pid)
    elsewhere = _owned_by(live, target, pid=dead_pid, host="another-host.example")
    unowned = tmp_path / f".{target.name}.tmp-{'0' * 32}"
    other = tmp_path / "d.cube.zarr"
    other_target = _owned_by(hidden_sibling(other), other, pid=dead_pid)
    for path in (live, dead, elsewhere, unowned, other_target):
        (path / "layers").mkdir(parents=True)
        (path / "zarr.json").write_text("{}", encoding="utf-8")
    write_cube(_small_cube(), target)
    assert not dead.exists()
    assert sorted(tmp_path.iterdir()) == sorted([target, live, elsewhere, unowned, other_target])


# -- (b) overwrite rules ------------------------------------------------------------


def test_existing_cube_is_refused_without_overwrite(tmp_path: Path) -> None:
    """Writing over an existing cube without overwrite=True raises CubeExistsError and keeps it."""
    target = write_cube(_small_cube(1.0), tmp_path / "c.cube.zarr")
    before = tree_snapshot(target)
    with pytest.raises(CubeExistsError) as info:
        write_cube(_small_cube(2.0), target)
    assert isinstance(info.value, FileExistsError)
    assert str(target) in str(info.value)
    assert tree_snapshot(target) == before
    assert _hidden_siblings(target) == []


def test_overwrite_replaces_a_cube(tmp_path: Path) -> None:
    """With overwrite=True an existing cube is replaced and the new fingerprint is read."""
    old, new = _small_cube(1.0), _small_cube(2.0)
    target = write_cube(old, tmp_path / "c.cube.zarr")
    assert write_cube(new, target, overwrite=True) == target
    again = read_cube(target)
    assert again.fingerprint == new.fingerprint != old.fingerprint
    assert again.verify_fingerprint() == new.fingerprint
    assert _hidden_siblings(target) == []


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", ["directory-with-text-file", "empty-directory", "file"])
def test_non_cube_is_never_replaced(tmp_path: Path, kind: str, overwrite: bool) -> None:
    """A directory or file that is not a cube is refused, even with overwrite=True, and untouched."""
    target = tmp_path / "notes.cube.zarr"
    if kind == "file":
        target.write_text("not a cube\n", encoding="utf-8")
    else:
        target.mkdir()
        if kind == "directory-with-text-file":
            (target / "notes.txt").write_text("keep me\n", encoding="utf-8")
    before = tree_snapshot(tmp_path)
    with pytest.raises(CubeExistsError) as info:
        write_cube(_small_cube(), target, overwrite=overwrite)
    assert isinstance(info.value, FileExistsError)
    assert str(target) in str(info.value)
    assert tree_snapshot(tmp_path) == before


def test_overwrite_through_a_symlink_to_a_cube_is_clean(tmp_path: Path) -> None:
    """Overwriting a symlink to a cube succeeds, leaves no hidden sibling and keeps the linked cube."""
    old, new = _small_cube(1.0), _small_cube(2.0)
    real = write_cube(old, tmp_path / "real.cube.zarr")
    link = tmp_path / "link.cube.zarr"
    link.symlink_to(real, target_is_directory=True)
    assert write_cube(new, link, overwrite=True) == link
    assert read_cube(link).fingerprint == new.fingerprint
    assert _hidden_siblings(link) == []
    assert read_cube(real).verify_fingerprint() == old.fingerprint


# -- (c) a failure during the write -------------------------------------------------


def test_failed_write_leaves_no_target_and_no_hidden_sibling(tmp_path: Path) -> None:
    """A layer block that fails while written leaves neither the target nor a hidden sibling."""
    target = tmp_path / "c.cube.zarr"
    with dask.config.set(scheduler="synchronous"), pytest.raises(NonFiniteValueError):
        write_cube(_small_cube(layer=_nan_layer()), target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_old_cube(tmp_path: Path) -> None:
    """A failed write with overwrite=True leaves the old cube byte for byte, same fingerprint."""
    old = _small_cube(1.0)
    target = write_cube(old, tmp_path / "c.cube.zarr")
    before = tree_snapshot(tmp_path)
    with dask.config.set(scheduler="synchronous"), pytest.raises(NonFiniteValueError):
        write_cube(_small_cube(2.0, layer=_nan_layer()), target, overwrite=True)
    assert tree_snapshot(tmp_path) == before
    assert _hidden_siblings(target) == []
    assert read_cube(target).verify_fingerprint() == old.fingerprint


def test_failed_write_names_the_position_of_the_bad_value(tmp_path: Path) -> None:
    """The error of a failed write gives the (group, sample, feature) of the bad value."""
    target = tmp_path / "c.cube.zarr"
    with dask.config.set(scheduler="synchronous"), pytest.raises(NonFiniteValueError) as info:
        write_cube(_small_cube(layer=_nan_layer(group=1, where=(2, 7))), target)
    assert "log_sum" in str(info.value)
    assert "(1, 2, 7)" in str(info.value)


@pytest.mark.parametrize("overwrite", [False, True])
def test_failed_write_with_chunk_writes_in_flight_leaves_no_hidden_sibling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overwrite: bool
) -> None:
    """A chunk write still running when another block fails is not left behind in a hidden sibling."""
    target = tmp_path / "c.cube.zarr"
    old = _small_cube(1.0)
    if overwrite:
        write_cube(old, target)
    writing, written = threading.Event(), threading.Event()
    original_set = LocalStore.set

    async def slow_set(self: LocalStore, key: str, value: Buffer) -> None:
        if not key.startswith("layers/counts/c/0/"):
            return await original_set(self, key, value)
        writing.set()
        await asyncio.sleep(0.3)
        try:
            return await original_set(self, key, value)
        finally:
            written.set()

    def fail_once_group_0_writes(block: np.ndarray) -> np.ndarray:
        writing.wait(10)
        return block * np.nan

    healthy = da.ones((1, 3, 10), chunks=(1, 3, 10))
    failing = da.ones((1, 3, 10), chunks=(1, 3, 10)).map_blocks(
        fail_once_group_0_writes, dtype=np.float64, meta=np.empty((0, 0, 0))
    )
    layer = da.concatenate([healthy, failing], axis=0)
    monkeypatch.setattr(LocalStore, "set", slow_set)
    with (
        dask.config.set(scheduler="threads", num_workers=4),
        pytest.raises(NonFiniteValueError),
    ):
        write_cube(_small_cube(2.0, layer=layer), target, overwrite=overwrite)
    assert written.wait(10), "group 0's chunk write never ran"
    time.sleep(0.1)
    assert _hidden_siblings(target) == []
    if overwrite:
        assert read_cube(target).verify_fingerprint() == old.fingerprint
    else:
        assert not target.exists()


@pytest.mark.parametrize("url", ["s3://bucket/x.cube.zarr", "gs://b/x.cube.zarr"])
def test_a_url_flattened_by_pathlib_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``Path("s3://b/x")`` reads ``s3:/b/x``: refused, not written as ./s3:/bucket/..."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s3:").mkdir()  # even when a local folder of the scheme's name exists
    (tmp_path / "s3:" / "bucket").mkdir()
    with pytest.raises(CubeValueError, match="pass the URL as a string"):
        write_cube(example_cube(), Path(url))
    assert [p.name for p in (tmp_path / "s3:" / "bucket").iterdir()] == []
