"""release_freed_heap gives a process's freed heap back to the system."""

from __future__ import annotations

import gc
import sys

import psutil
import pytest

from cytearc.utils import heap
from cytearc.utils.heap import release_freed_heap

glibc = pytest.mark.skipif(
    heap._malloc_trim() is None, reason="malloc_trim is glibc's; elsewhere nothing is released"
)


def freed_below_a_live_block(megabytes: int = 64) -> object:
    """Free ``megabytes`` of small heap blocks that lie below a block still in use (returns that block).

    glibc trims its heap only from the top, so these freed pages stay
    resident until ``malloc_trim``.
    """
    blocks = [bytes(1000) + bytes([i % 256]) for i in range(megabytes * 1000)]
    pinned = bytes(1000) + b"pin"
    del blocks
    gc.collect()
    return pinned


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


@glibc
def test_freed_heap_goes_back_to_the_system() -> None:
    pinned = freed_below_a_live_block()
    before = rss()
    release_freed_heap()
    assert before - rss() > 32 * 2**20, "malloc_trim gave back less than half of 64 MB freed"
    assert pinned.endswith(b"pin")


def test_without_glibc_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    heap._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert heap._malloc_trim() is None
        release_freed_heap()
    finally:
        heap._malloc_trim.cache_clear()
