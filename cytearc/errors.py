"""Exceptions raised by CyteArc.

Each subclasses :class:`ValueError` (or the builtin it refines, such as
:class:`FileExistsError`) so callers that catch the builtin keep working.
Messages name the file or key, what was expected, what was found, and the
remedy.
"""

from __future__ import annotations

__all__ = ["CyteArcError", "EngineConfigError", "MemBudgetError", "ShardAlignmentError"]


class CyteArcError(ValueError):
    """Base class of CyteArc's errors."""


class MemBudgetError(CyteArcError):
    """A memory budget or worker count cannot be parsed or does not fit the machine."""


class EngineConfigError(CyteArcError):
    """The process's engine is already running with other settings, or a cluster is unusable."""


class ShardAlignmentError(CyteArcError):
    """A write would split a Zarr shard between tasks, which loses data silently."""
