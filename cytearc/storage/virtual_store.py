"""The Zarr namespace of an open composite: its stored keys, with its virtual count arrays computed.

A composite stores no ``zarr.json`` and no chunk of ``matrices/{assay}/counts``
or ``countsT`` (bare Zarr finds no array there, so it cannot read zeros in
their place). During a CyteArc open, :class:`VirtualCountsStore` supplies
them: the array's document from the manifest, and each shard's bytes encoded
on request from the values the composite's
:class:`~cytearc.storage.virtual.VirtualArrayReader` gathers. So code that
reads the arrays directly through Zarr (``ds.store_root["matrices/RNA/counts"]``)
reads the composite's counts; CyteArc itself reads them through the reader.

The virtual keys are read-only; every other key is the composite's own.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.storage import MemoryStore, WrapperStore

from cytearc.errors import ReadOnlyStoreError
from cytearc.storage.virtual import Layout, VirtualArrayReader, VirtualBlocks

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping

    from zarr.abc.store import ByteRequest
    from zarr.abc.store import Store as ZarrStore
    from zarr.core.buffer import Buffer, BufferPrototype

__all__ = ["VirtualArray", "VirtualCountsStore"]

_SHARDS_KEPT: Final = 4
"""Encoded shards kept per open composite: a sharded read asks for one shard's index, then its chunks."""


@dataclass(frozen=True, kw_only=True)
class VirtualArray:
    """A virtual count array: its key in the store, its document and its orientation.

    Parameters
    ----------
    path
        The array's key prefix (``matrices/RNA/counts``).
    document
        Its ``zarr.json`` document (from the manifest).
    orientation
        ``cells`` (``counts``) or ``features`` (``countsT``).
    """

    path: str
    document: Mapping[str, Any]
    orientation: Layout

    @functools.cached_property
    def document_bytes(self) -> bytes:
        """The document as the ``zarr.json`` bytes served."""
        return json.dumps(dict(self.document)).encode()

    @functools.cached_property
    def metadata(self) -> ArrayV3Metadata:
        """The parsed document."""
        return ArrayV3Metadata.from_dict(dict(self.document))


class VirtualCountsStore(WrapperStore["ZarrStore"]):
    """A composite's store with its virtual count arrays supplied.

    Parameters
    ----------
    store
        The composite's Zarr store.
    arrays
        The virtual arrays.
    reader
        The reader of the composite's counts.
    where
        The composite, for messages.

    Examples
    --------
    >>> import numpy as np
    >>> from cytearc.storage.composite_map import merge_map
    >>> from cytearc.storage.virtual import SourceArrays
    >>> counts = zarr.create_array(store={}, shape=(5, 2), shards=(2, 2), chunks=(1, 2), dtype="u2")
    >>> counts[...] = np.arange(10).reshape(5, 2)
    >>> layout, _ = merge_map(n_cells=[5], feature_ids=[["a", "b"]])
    >>> reader = VirtualArrayReader(layout, [SourceArrays(counts=counts, counts_t=None, name="s")],
    ...                             dtype="u2", shape=(5, 2))
    >>> document = counts.metadata.to_dict()
    >>> store = VirtualCountsStore(MemoryStore(), arrays=[VirtualArray(
    ...     path="matrices/RNA/counts", document=document, orientation="cells")],
    ...     reader=reader, where="demo")
    >>> zarr.open_array(store=store, path="matrices/RNA/counts", mode="r")[3:5]
    array([[6, 7],
           [8, 9]], dtype=uint16)
    """

    def __init__(
        self,
        store: ZarrStore,
        *,
        arrays: list[VirtualArray],
        reader: VirtualArrayReader,
        where: str,
    ) -> None:
        super().__init__(store)
        self.arrays = {array.path: array for array in arrays}
        self.reader = reader
        self.where = where
        self._shards: OrderedDict[str, asyncio.Task[bytes | None]] = OrderedDict()

    def _with_store(self, store: ZarrStore) -> VirtualCountsStore:
        return VirtualCountsStore(
            store, arrays=list(self.arrays.values()), reader=self.reader, where=self.where
        )

    def __eq__(self, value: object) -> bool:
        return (
            isinstance(value, VirtualCountsStore)
            and value._store == self._store
            and value.reader is self.reader
        )

    def __hash__(self) -> int:
        return hash((id(self._store), id(self.reader)))

    def __repr__(self) -> str:
        return f"VirtualCountsStore({self.where})"

    def _virtual(self, key: str) -> tuple[VirtualArray, str] | None:
        """The virtual array holding ``key`` and the rest of the key, or None."""
        for path, array in self.arrays.items():
            if key == path or key.startswith(f"{path}/"):
                return array, key[len(path) + 1 :]
        return None

    def _shard_region(self, array: VirtualArray, rest: str) -> tuple[slice, slice] | None:
        """The region of the shard at chunk key ``rest``, or None when it names no shard."""
        metadata = array.metadata
        # zarr 3.1's DefaultChunkKeyEncoding.decode_chunk_key("c/1/0") fails on the
        # separator after "c"; the indices are read here and checked by encoding them back
        index = tuple(int(part) for part in re.findall(r"\d+", rest))
        shard: Any = metadata.chunk_grid
        shape = metadata.shape
        if len(index) != len(shape) or not all(
            0 <= i < -(-n // s) for i, n, s in zip(index, shape, shard.chunk_shape, strict=True)
        ):
            return None
        if metadata.chunk_key_encoding.encode_chunk_key(index) != rest:
            return None
        first, second = (
            slice(i * s, min((i + 1) * s, n))
            for i, n, s in zip(index, shape, shard.chunk_shape, strict=True)
        )
        return first, second

    def _encode(self, array: VirtualArray, rest: str, region: tuple[slice, slice]) -> bytes | None:
        """The shard's bytes as Zarr writes them (None when every value is the fill value)."""
        values = VirtualBlocks(self.reader, array.orientation)[region]
        memory: dict[str, Buffer] = {
            "zarr.json": default_buffer_prototype().buffer.from_bytes(array.document_bytes)
        }
        target = zarr.open_array(store=MemoryStore(memory), mode="r+", zarr_format=3)
        target[region] = np.asarray(values, dtype=target.dtype)
        value = memory.get(rest)
        return None if value is None else value.to_bytes()

    async def _shard(
        self, array: VirtualArray, rest: str, region: tuple[slice, slice]
    ) -> bytes | None:
        key = f"{array.path}/{rest}"
        task = self._shards.get(key)
        if task is None:
            task = asyncio.ensure_future(asyncio.to_thread(self._encode, array, rest, region))
            self._shards[key] = task
            while len(self._shards) > _SHARDS_KEPT:
                self._shards.popitem(last=False)
        else:
            self._shards.move_to_end(key)
        try:
            return await asyncio.shield(task)
        except BaseException:
            if self._shards.get(key) is task:
                del self._shards[key]
            raise

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """A key of the composite, or of a virtual array (its document, or a computed shard)."""
        found = self._virtual(key)
        if found is None:
            return await self._store.get(key, prototype, byte_range)
        array, rest = found
        if rest == "zarr.json":
            data: bytes | None = array.document_bytes
        else:
            region = self._shard_region(array, rest)
            data = None if region is None else await self._shard(array, rest, region)
        if data is None:
            return None
        if isinstance(byte_range, RangeByteRequest):
            data = data[byte_range.start : byte_range.end]
        elif isinstance(byte_range, OffsetByteRequest):
            data = data[byte_range.offset :]
        elif isinstance(byte_range, SuffixByteRequest):
            data = data[-byte_range.suffix :] if byte_range.suffix else b""
        return prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        """Byte ranges of keys, virtual ones computed."""
        return list(await asyncio.gather(*(self.get(key, prototype, r) for key, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        """Whether the composite holds ``key``, or a virtual array's document or shard is ``key``."""
        found = self._virtual(key)
        if found is None:
            return await self._store.exists(key)
        array, rest = found
        return rest == "zarr.json" or self._shard_region(array, rest) is not None

    def _refuse(self, key: str, operation: str) -> None:
        if self._virtual(key) is not None:
            msg = f"{self.where}/{key}: {operation} a virtual count array of the composite; its counts are the sources' and never change - write an artifact, or make a merged copy (DataStoreMerge) to edit counts"
            raise ReadOnlyStoreError(msg)

    async def set(self, key: str, value: Buffer) -> None:
        """Write ``key`` to the composite; refused inside a virtual array."""
        self._refuse(key, "writing")
        await self._store.set(key, value)

    async def delete(self, key: str) -> None:
        """Delete ``key`` from the composite; refused inside a virtual array."""
        self._refuse(key, "deleting")
        await self._store.delete(key)

    async def delete_dir(self, prefix: str) -> None:
        """Delete the keys below ``prefix``; refused inside a virtual array."""
        self._refuse(prefix.rstrip("/"), "deleting")
        await self._store.delete_dir(prefix)

    async def list(self) -> AsyncIterator[str]:
        """The composite's keys, then the virtual arrays' documents."""
        async for key in self._store.list():
            yield key
        for path in self.arrays:
            yield f"{path}/zarr.json"

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The keys below ``prefix``, the virtual documents among them."""
        async for key in self._store.list_prefix(prefix):
            yield key
        for path in self.arrays:
            if f"{path}/zarr.json".startswith(prefix):
                yield f"{path}/zarr.json"

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The members of a folder, a virtual array's name among its group's."""
        folder = prefix.rstrip("/")
        found = self._virtual(folder) if folder else None
        if found is not None:
            if found[1] == "":
                yield "zarr.json"
            return
        names = set()
        async for name in self._store.list_dir(prefix):
            names.add(name)
            yield name
        for path in self.arrays:
            parent, _, name = path.rpartition("/")
            if parent == folder and name not in names:
                yield name
