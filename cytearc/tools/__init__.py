"""Writers that reshape stores: :class:`SubsetZarr`, :class:`DataStoreMerge`, :func:`repack_zarr`, :func:`create_workspace` and :func:`create_composite`.

Each writes a new store on the engine, one task per band of whole shards
sized from ``mem_budget``, and refuses a bad destination or source before it
writes anything. Each is also a command: ``cytearc subset``, ``cytearc
merge``, ``cytearc repack``, and ``python -m cytearc.tools.subset_zarr``,
``python -m cytearc.tools.datastore_merge`` and ``python -m
cytearc.tools.repack_zarr``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from cytepool._lazy import lazy_exports

if TYPE_CHECKING:
    from cytearc.tools.composite import create_composite
    from cytearc.tools.datastore_merge import DataStoreMerge
    from cytearc.tools.mount import mount_datastore
    from cytearc.tools.repack import PROFILES, RepackProfile, repack_zarr
    from cytearc.tools.subset_zarr import SubsetZarr
    from cytearc.tools.workspace import create_workspace

__all__ = [
    "PROFILES",
    "DataStoreMerge",
    "RepackProfile",
    "SubsetZarr",
    "create_composite",
    "create_workspace",
    "mount_datastore",
    "repack_zarr",
]

_EXPORTS: Final = {
    "DataStoreMerge": "cytearc.tools.datastore_merge",
    "PROFILES": "cytearc.tools.repack",
    "RepackProfile": "cytearc.tools.repack",
    "SubsetZarr": "cytearc.tools.subset_zarr",
    "create_composite": "cytearc.tools.composite",
    "create_workspace": "cytearc.tools.workspace",
    "mount_datastore": "cytearc.tools.mount",
    "repack_zarr": "cytearc.tools.repack",
}
"""Imported on first use (:func:`~cytepool._lazy.lazy_exports`), so ``python -m cytearc.tools.<module>`` runs its module once; ``repack_zarr`` stays the function when the module of that name is imported."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
