"""Writers that reshape stores: :class:`SubsetZarr`, :class:`DataStoreMerge`, :func:`repack_zarr`, :func:`create_workspace` and :func:`create_composite`.

Each writes a new store on the engine, one task per band of whole shards
sized from ``mem_budget``, and refuses a bad destination or source before it
writes anything. Each is also a command: ``cytearc subset``, ``cytearc
merge``, ``cytearc repack``, and ``python -m cytearc.tools.subset_zarr``,
``python -m cytearc.tools.datastore_merge`` and ``python -m
cytearc.tools.repack_zarr``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

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

_MODULES = {
    "DataStoreMerge": "datastore_merge",
    "PROFILES": "repack",
    "RepackProfile": "repack",
    "SubsetZarr": "subset_zarr",
    "create_composite": "composite",
    "create_workspace": "workspace",
    "mount_datastore": "mount",
    "repack_zarr": "repack",
}
"""Imported on first use, so ``python -m cytearc.tools.<module>`` runs its module once."""


class _Tools(types.ModuleType):
    """The package module: its ``repack_zarr`` stays the function once the module of that name is imported.

    ``python -m cytearc.tools.repack_zarr`` needs a module of that name; the
    import system binds an imported submodule to the package attribute of its
    name, which would hide the function :func:`repack_zarr`.
    """

    @property
    def repack_zarr(self) -> object:
        return __getattr__("repack_zarr")

    @repack_zarr.setter
    def repack_zarr(self, value: object) -> None:
        del value  # the submodule; the function keeps the name


sys.modules[__name__].__class__ = _Tools


def __getattr__(name: str) -> object:
    if name in _MODULES:
        return getattr(importlib.import_module(f"cytearc.tools.{_MODULES[name]}"), name)
    msg = f"module 'cytearc.tools' has no attribute {name!r}"
    raise AttributeError(msg)
