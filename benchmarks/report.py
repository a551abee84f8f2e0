"""What every benchmark prints about where it ran (machine, versions, commit), file sizes, and memory.

Memory is sampled by :class:`cytearc.pipeline.rss.RssSampler`, as
``run.summary()`` reports it; it is imported when first used, so that the
reference subprocesses of the benchmarks do not load CyteArc.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

if TYPE_CHECKING:
    from cytearc.pipeline.rss import RssSampler

__all__ = ["RSS_SAMPLING", "disk_bytes", "machine", "peak_bytes", "source_commit"]

RSS_SAMPLING: Final = (
    "cytearc.pipeline.rss.RssSampler as run.summary() reports it, every 0.25 s: "
    "client = the sampled process and its descendants that are not Dask workers"
)
"""How the benchmarks measure peak RSS, for their notes."""


def source_commit() -> str:
    """The git commit of the checkout this script is in, read from ``.git`` (no subprocess)."""
    git = Path(__file__).resolve().parent.parent / ".git"
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head.removeprefix("ref: ")
        if (git / ref).is_file():
            return (git / ref).read_text(encoding="utf-8").strip()[:12]
        for line in (git / "packed-refs").read_text(encoding="utf-8").splitlines():
            if line.endswith(" " + ref):
                return line[:12]
    except OSError:
        pass
    return "unknown"


def machine(packages: tuple[str, ...], *, notes: list[str]) -> list[str]:
    """Lines saying the date, the machine, the versions of ``packages``, then ``notes``."""
    cpu = platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return [
        f"date (UTC): {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}",
        (
            f"machine: {platform.system()} {platform.machine()}, {cpu}, "
            f"nproc {len(os.sched_getaffinity(0))}, memory {memory / 2**30:.1f} GiB"
        ),
        f"python {platform.python_version()}, numpy {np.__version__}, "
        + ", ".join(f"{name} {version(name)}" for name in packages)
        + f", cytearc {version('cytearc')} (commit {source_commit()})",
        *notes,
    ]


def disk_bytes(path: Path) -> int:
    """Total size of the files at or below ``path``."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def peak_bytes(
    sampler: RssSampler, *, start: float | None = None, stop: float | None = None
) -> dict[str, int] | None:
    """Peak ``total``, ``client`` and ``workers`` bytes of the samples from ``start`` to ``stop``.

    As ``sampler.metrics(...)["peakBytes"]``; None when no sample was taken in
    the window (a step shorter than the sampling interval).
    """
    from cytearc.errors import CyteArcError  # noqa: PLC0415 (see the module docstring)

    try:
        peaks: dict[str, int] = sampler.metrics(start=start, stop=stop)["peakBytes"]
    except CyteArcError:
        return None
    return peaks
