"""The engine: Dask clusters sized from ``mem_budget``, and lazy arrays aligned with Zarr shards."""

from cytearc.engine.arrays import aligned_rows, open_lazy, store_aligned, write_block
from cytearc.engine.budget import Budget, parse_mem_budget, parse_workers, resolve_budget
from cytearc.engine.cluster import Engine, get_engine, shutdown

__all__ = [
    "Budget",
    "Engine",
    "aligned_rows",
    "get_engine",
    "open_lazy",
    "parse_mem_budget",
    "parse_workers",
    "resolve_budget",
    "shutdown",
    "store_aligned",
    "write_block",
]
