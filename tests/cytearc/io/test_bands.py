"""On-disk band buckets: named after their process, and removed by a later import once that process is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cytearc.io.bands import BandBuckets, remove_stale_buckets
from cytepool.cube.atomic import hidden_sibling

if TYPE_CHECKING:
    from pathlib import Path


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _owned_by(root: Path, pid: int, *, host: str | None = None) -> Path:
    """A bucket directory name of process ``pid`` (on this host, or on ``host``)."""
    name = hidden_sibling(root / "cytearc-bands").name
    prefix, _, rest = name.partition(f"-{os.getpid()}-")
    if host is not None:
        rest = f"{host}-{rest.rsplit('-', 1)[1]}"
    return root / f"{prefix}-{pid}-{rest}"


@pytest.fixture
def tmpdir_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR for this test alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_buckets_are_named_after_their_process(tmpdir_root: Path) -> None:
    """A bucket directory is .cytearc-bands.tmp-<pid>-<host>-<token> under TMPDIR, private, removed on close."""
    buckets = BandBuckets(band_rows=2)
    assert buckets.directory.parent == tmpdir_root
    mine = _owned_by(tmpdir_root, os.getpid()).name
    assert buckets.directory.name.rsplit("-", 1)[0] == mine.rsplit("-", 1)[0]
    assert buckets.directory.stat().st_mode & 0o077 == 0
    buckets.add(np.array([0, 3]), np.array([1, 0]), np.array([5, 6]))
    buckets.close()
    assert not buckets.directory.exists()


def test_new_buckets_remove_those_of_dead_processes_only(tmpdir_root: Path) -> None:
    """New buckets remove a folder whose pid is dead on this host; a live pid's, another host's and other names stay."""
    dead = _owned_by(tmpdir_root, _dead_pid())
    live = _owned_by(tmpdir_root, os.getppid())
    elsewhere = _owned_by(tmpdir_root, _dead_pid(), host="another-host")
    unnamed = tmpdir_root / "cytearc-bands-xyz"
    for folder in (dead, live, elsewhere, unnamed):
        folder.mkdir()
        (folder / "000000000-int64.bin").write_bytes(b"\0" * 12)
    buckets = BandBuckets(band_rows=2)
    try:
        assert not dead.exists()
        assert live.exists()
        assert elsewhere.exists()
        assert unnamed.exists()
        assert buckets.directory.exists()
        assert remove_stale_buckets() == []
    finally:
        buckets.close()


@given(
    chunks=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 9),
                st.integers(0, 4),
                st.one_of(st.integers(0, 300), st.integers(-(2**63), 2**63 - 1)),
            ),
            max_size=12,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_buckets_give_back_integers_exactly_whatever_dtype_stores_them(
    chunks: list[list[tuple[int, int, int]]],
) -> None:
    """Values added in calls of any range read back as the int64 they were, at every band."""
    entries: dict[tuple[int, int], int] = {}
    buckets = BandBuckets(band_rows=3)
    try:
        for chunk in chunks:
            fresh = {(r, c): v for r, c, v in chunk if (r, c) not in entries}
            entries.update(fresh)
            if fresh:
                rows, cols = (np.array(x, dtype=np.int64) for x in zip(*fresh, strict=True))
                buckets.add(rows, cols, np.array(list(fresh.values()), dtype=np.int64))
        expected = np.zeros((10, 5), dtype=np.int64)
        for (r, c), v in entries.items():
            expected[r, c] = v
        band = buckets.read(
            0, 10, n_cols=5, dtype=np.dtype(np.int64), entry_name=lambda r, c: f"{r},{c}"
        )
    finally:
        buckets.close()
    assert band.dtype == np.int64
    np.testing.assert_array_equal(band.toarray(), expected)


@given(
    entries=st.lists(
        st.tuples(st.integers(0, 9), st.integers(0, 4), st.integers(1, 70_000)),
        max_size=40,
        unique_by=lambda e: (e[0], e[1]),
    ),
    window=st.tuples(st.integers(0, 10), st.integers(0, 10)).map(sorted),
)
def test_any_window_of_rows_reads_back_with_32_bit_columns(
    entries: list[tuple[int, int, int]], window: list[int]
) -> None:
    """A read of whole buckets or of parts of them gives the same rows, its column indices 32-bit."""
    start, stop = window
    buckets = BandBuckets(band_rows=3)
    try:
        if entries:
            rows, cols, values = (np.array(x, dtype=np.int64) for x in zip(*entries, strict=True))
            buckets.add(rows, cols, values)
        band = buckets.read(
            start, stop, n_cols=5, dtype=np.dtype(np.int64), entry_name=lambda r, c: f"{r},{c}"
        )
    finally:
        buckets.close()
    expected = np.zeros((10, 5), dtype=np.int64)
    for r, c, v in entries:
        expected[r, c] = v
    assert band.dtype == np.int64
    assert band.indices.dtype == np.int32
    assert band.has_canonical_format
    np.testing.assert_array_equal(band.toarray(), expected[start:stop])
