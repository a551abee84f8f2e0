"""Writers that reshape stores: :class:`SubsetZarr` and :class:`DataStoreMerge`.

Each writes a new store on the engine, one task per band of whole shards
sized from ``mem_budget``, and refuses a bad destination or source before it
writes anything. Each is also a command: ``cytearc subset``, ``cytearc
merge``, ``python -m cytearc.tools.subset_zarr`` and ``python -m
cytearc.tools.datastore_merge``.
"""

from cytearc.tools.datastore_merge import DataStoreMerge
from cytearc.tools.subset_zarr import SubsetZarr

__all__ = ["DataStoreMerge", "SubsetZarr"]
