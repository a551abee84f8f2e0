"""The engine: Dask clusters sized from ``mem_budget``, and lazy arrays aligned with Zarr shards."""

from cytearc.engine.arrays import (
    aligned_rows,
    map_row_pieces,
    open_lazy,
    store_aligned,
    write_block,
)
from cytearc.engine.budget import Budget, parse_mem_budget, parse_workers, resolve_budget
from cytearc.engine.cluster import Engine, get_engine, shutdown, warm_kernels

__all__ = [
    "Budget",
    "Engine",
    "aligned_rows",
    "get_engine",
    "map_row_pieces",
    "open_lazy",
    "parse_mem_budget",
    "parse_workers",
    "resolve_budget",
    "shutdown",
    "store_aligned",
    "warm_kernels",
    "write_block",
]
