"""release_freed_heap gives a process's freed heap back to the system."""

from __future__ import annotations

import sys

import psutil
import pytest

from cytearc.utils import heap
from cytearc.utils.heap import release_freed_heap
from cytepool.testing import free_heap_below_a_live_block

glibc = pytest.mark.skipif(
    heap._malloc_trim() is None, reason="malloc_trim is glibc's; elsewhere nothing is released"
)


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


@glibc
def test_freed_heap_goes_back_to_the_system() -> None:
    before = free_heap_below_a_live_block(64)
    release_freed_heap()
    assert before - rss() > 32 * 2**20, "malloc_trim gave back less than half of 64 MB freed"


def test_without_glibc_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    heap._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert heap._malloc_trim() is None
        release_freed_heap()
    finally:
        heap._malloc_trim.cache_clear()
