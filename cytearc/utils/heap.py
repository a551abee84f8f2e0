"""Returning the freed heap memory of a process to the system.

glibc's allocator keeps memory that a process freed in its arenas (below a
block still in use, or under its trim threshold) and reuses it, so a
process's resident memory stays at its highest after a large computation.
:func:`release_freed_heap` asks glibc to give the free pages back
(``malloc_trim(0)``); on other C libraries it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys

__all__ = ["release_freed_heap"]


@functools.cache
def _malloc_trim() -> ctypes._FuncPointer | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def release_freed_heap() -> None:
    """Return the freed memory of this process's malloc arenas to the system (glibc only).

    Examples
    --------
    >>> release_freed_heap()
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
