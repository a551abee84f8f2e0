"""A source's Zarr store read through the bounded cache of remote reads (:mod:`cytearc.storage.cache`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, Self

from zarr.abc.store import RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import WrapperStore

from cytearc.errors import ReadOnlyStoreError

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterable

    from zarr.abc.store import ByteRequest
    from zarr.core.buffer import Buffer, BufferPrototype

    from cytearc.storage.cache import SourceCache

__all__ = ["CachingStore"]

_METADATA_NAMES: Final = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


def _is_metadata(key: str) -> bool:
    return key.rsplit("/", 1)[-1] in _METADATA_NAMES


class CachingStore(WrapperStore[Store]):
    """A read-only Zarr store that reads a source's store through a :class:`SourceCache`.

    - a whole object (``byte_range=None``: a shard that a read covers
      densely, which Zarr's sharding codec reads whole, or an unsharded
      chunk) is served from the cache and stored there on a miss;
    - a :class:`~zarr.abc.store.SuffixByteRequest` (the shard index that
      sharded reads take from a shard's end) likewise, keyed by its length,
      or served from the cached whole shard;
    - a :class:`~zarr.abc.store.RangeByteRequest` or
      :class:`~zarr.abc.store.OffsetByteRequest` (the chunks of a sparse
      read) is sliced from the cached whole shard when there is one, else
      read from the source and not stored;
    - metadata (``zarr.json``) passes through.

    A reader that covers most of a shard but not all of it asks for the
    whole shard to be cached with :meth:`prefetch` (or awaits
    :meth:`fetch_object`) before it reads; its range reads are then served
    locally. Open arrays with ``zarr.open_array(store=..., mode="r")``.
    The store pickles with its cache; closing it closes the source's store,
    and the composite closes the cache.

    Parameters
    ----------
    store
        The source's (remote) store.
    cache
        The composite's cache.
    prefix
        Names the source's keys in the cache (``"PREFIX/KEY"``); unique per source.

    Examples
    --------
    >>> import numpy as np, zarr
    >>> from cytearc.storage.cache import SourceCache
    >>> source = zarr.storage.MemoryStore()
    >>> _ = zarr.create_array(source, shape=(8,), shards=(4,), chunks=(2,), dtype="u2")
    >>> zarr.open_array(source)[:] = np.arange(8)
    >>> with SourceCache(10_000) as cache:
    ...     array = zarr.open_array(CachingStore(source, cache, prefix="demo"), mode="r")
    ...     (array[:].tolist(), int(array[:].sum()), cache.stats().hits)
    ([0, 1, 2, 3, 4, 5, 6, 7], 28, 2)
    """

    def __init__(self, store: Store, cache: SourceCache, *, prefix: str) -> None:
        super().__init__(store)
        self._cache = cache
        self._prefix = prefix.strip("/")

    @property
    def cache(self) -> SourceCache:
        """The cache reads go through."""
        return self._cache

    def _with_store(self, store: Store) -> Self:
        return type(self)(store, self._cache, prefix=self._prefix)

    def _cache_key(self, key: str) -> str:
        return f"{self._prefix}/{key}" if self._prefix else key

    @property
    def read_only(self) -> bool:
        """Always True."""
        return True

    def with_read_only(self, read_only: bool = False) -> Self:  # noqa: FBT001, FBT002 (zarr's signature)
        """The store itself: it is read-only.

        Parameters
        ----------
        read_only
            Must be True.

        Returns
        -------
        CachingStore
            ``self``.

        Raises
        ------
        ReadOnlyStoreError
            For ``read_only=False``.
        """
        if not read_only:
            self._check_writable()
        return self

    def _check_writable(self) -> None:
        msg = (
            f"{self}: a source read through the cache is read-only; write to the source's own store"
        )
        raise ReadOnlyStoreError(msg)

    @property
    def supports_writes(self) -> bool:
        """False."""
        return False

    @property
    def supports_deletes(self) -> bool:
        """False."""
        return False

    async def set(self, key: str, value: Buffer) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def _set_many(self, values: Iterable[tuple[str, Buffer]]) -> None:
        self._check_writable()

    async def delete(self, key: str) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def delete_dir(self, prefix: str) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def clear(self) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """Read ``key`` (or a byte range of it) through the cache, as the class describes.

        Parameters
        ----------
        key
            The key in the source's store.
        prototype
            The buffer type to return.
        byte_range
            None for the whole object, or a Zarr byte request.

        Returns
        -------
        Buffer or None
            None when the source has no such key.
        """
        if _is_metadata(key):
            return await self._store.get(key, prototype, byte_range)

        async def fetch() -> bytes | None:
            value = await self._store.get(key, prototype, byte_range)
            return None if value is None else value.to_bytes()

        name = self._cache_key(key)
        data: bytes | None
        if byte_range is None:
            data = await self._cache.get_or_fetch_async(name, "object", fetch)
        elif isinstance(byte_range, SuffixByteRequest):
            data = await self._cache.get_or_fetch_async(
                name, "suffix", fetch, suffix_length=byte_range.suffix
            )
        elif isinstance(byte_range, RangeByteRequest):
            data = await self._cache.range_or_fetch_async(
                name, byte_range.start, byte_range.end, fetch
            )
        else:
            data = await self._cache.range_or_fetch_async(name, byte_range.offset, None, fetch)
        return None if data is None else prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        """Read several keys or ranges through the cache, concurrently.

        Parameters
        ----------
        prototype
            The buffer type to return.
        key_ranges
            Keys and their byte requests.

        Returns
        -------
        list of Buffer or None
            In the order given.
        """
        return list(
            await asyncio.gather(*(self.get(key, prototype, rng) for key, rng in key_ranges))
        )

    async def _get_many(
        self, requests: Iterable[tuple[str, BufferPrototype, ByteRequest | None]]
    ) -> AsyncGenerator[tuple[str, Buffer | None], None]:
        for key, prototype, byte_range in requests:
            yield (key, await self.get(key, prototype, byte_range))

    async def getsize(self, key: str) -> int:
        """The size of ``key`` in the source, without reading it.

        Parameters
        ----------
        key
            The key.

        Returns
        -------
        int
            Bytes.
        """
        return await self._store.getsize(key)

    async def fetch_object(
        self, key: str, prototype: BufferPrototype | None = None
    ) -> Buffer | None:
        """Read ``key`` whole through the cache, so later range reads of it are served locally.

        Parameters
        ----------
        key
            The key of a shard (or chunk) in the source's store.
        prototype
            The buffer type to return; Zarr's default.

        Returns
        -------
        Buffer or None
            The object; None when the source has no such key.
        """
        return await self.get(key, prototype or default_buffer_prototype())

    def prefetch(self, keys: Iterable[str]) -> int:
        """Read each key whole through the cache (on Zarr's event loop), as a dense reader does first.

        Parameters
        ----------
        keys
            Keys of shards in the source's store, such as ``"counts/c/0/0"``.

        Returns
        -------
        int
            How many the source has.
        """
        from zarr.core.sync import sync  # noqa: PLC0415 (Zarr's loop, started on first use)

        async def fetch_all() -> int:
            found = await asyncio.gather(*(self.fetch_object(key) for key in keys))
            return sum(value is not None for value in found)

        return sync(fetch_all())

    def __hash__(self) -> int:
        return hash((type(self), str(self._cache.path), self._prefix))

    def __eq__(self, value: object) -> bool:
        return (
            isinstance(value, CachingStore)
            and self._store == value._store
            and self._cache.path == value._cache.path
            and self._prefix == value._prefix
        )

    def __str__(self) -> str:
        return f"cached-{self._store}"

    def __repr__(self) -> str:
        return f"CachingStore({self._store!r}, cache={str(self._cache.path)!r}, prefix={self._prefix!r})"
