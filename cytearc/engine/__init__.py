"""The engine: Dask clusters sized from ``mem_budget``, and lazy arrays aligned with Zarr shards.

The names are imported on first use (:func:`~cytepool._lazy.lazy_exports`):
a worker that unpickles the engine's worker plugin (:mod:`cytearc.engine.cluster`)
does not import :mod:`dask.array` with it (see
:func:`~cytearc.engine.cluster.import_dask_array_without_xarray`).
"""

from typing import TYPE_CHECKING, Final

from cytepool._lazy import lazy_exports

_EXPORTS: Final = {
    "aligned_rows": "cytearc.engine.arrays",
    "map_row_pieces": "cytearc.engine.arrays",
    "open_lazy": "cytearc.engine.arrays",
    "store_aligned": "cytearc.engine.arrays",
    "write_block": "cytearc.engine.arrays",
    "Budget": "cytearc.engine.budget",
    "parse_mem_budget": "cytearc.engine.budget",
    "parse_workers": "cytearc.engine.budget",
    "resolve_budget": "cytearc.engine.budget",
    "Engine": "cytearc.engine.cluster",
    "get_engine": "cytearc.engine.cluster",
    "shutdown": "cytearc.engine.cluster",
    "warm_kernels": "cytearc.engine.cluster",
}
"""The public API, imported on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
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
