"""The bounded cache of remote source reads: encoded shards and shard-index suffixes on local disk.

Remote sources read through a temporary cache in the system temporary
directory (``TMPDIR`` on Linux and macOS). It keeps the encoded shards that a
read covers densely and the shard-index suffixes of sharded reads, up to
``CYTEARC_SOURCE_CACHE_BYTES`` per open composite (:func:`cache_limit`: bytes
or a size such as ``512M``, 2 GiB when unset, and ``0`` to read the sources
directly). The directory is created by the first fetch and removed when the
store closes or the process exits. A fault of the local directory turns the
cache off, and reads continue from the sources.

One :class:`SourceCache` serves an open composite; each source is read
through a :class:`~cytearc.storage.caching_store.CachingStore` that wraps the source's Zarr store and names
its keys in the cache with a prefix. Both pickle, so Dask worker processes on
the same host share the one directory and the one bound.

The directory holds

- ``.lock``, locked with :func:`fcntl.flock` (and a :class:`threading.Lock`
  within a process) around every change of the directory;
- ``DIGEST.entry``, one cached value, named by the SHA-256 of its kind and key;
  its modification time is the time of its last use (least recently used
  entries are evicted first);
- ``DIGEST.PID.TOKEN.SIZE.part``, a value being written by process ``PID``;
  its name reserves ``SIZE`` bytes until it is renamed to its entry.

Under the lock a writer sums the sizes of the entries and the reservations of
the parts (removing parts of processes that died), evicts entries until the
new value fits, and creates its part; it writes the part without the lock and
renames it to the entry under the lock. The total size of the files in the
directory therefore never exceeds the limit, whichever processes and threads
write. A value larger than the limit is never cached.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Self

from dask.utils import parse_bytes

from cytearc._warnings import warn_user
from cytearc.errors import OperationArgumentError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator


__all__ = [
    "DEFAULT_LIMIT",
    "ENV_CACHE_BYTES",
    "CacheStats",
    "SourceCache",
    "SourceCacheWarning",
    "cache_limit",
]

ENV_CACHE_BYTES: Final = "CYTEARC_SOURCE_CACHE_BYTES"
"""The environment variable of the bound of each composite's source cache."""
DEFAULT_LIMIT: Final = 2 * 2**30
"""The bound when ``CYTEARC_SOURCE_CACHE_BYTES`` is unset: 2 GiB."""

Kind = Literal["object", "suffix"]

_SIZE: Final = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-z]*)")
_LOCK_NAME: Final = ".lock"
_ENTRY: Final = re.compile(r"(?P<digest>[0-9a-f]{64})\.entry")
_PART: Final = re.compile(
    r"(?P<digest>[0-9a-f]{64})\.(?P<pid>[0-9]+)\.(?P<token>[0-9a-f]+)\.(?P<size>[0-9]+)\.part"
)


class SourceCacheWarning(RuntimeWarning):
    """The source cache's local directory failed; reads continue from the sources, uncached."""


def cache_limit(value: str | None = None) -> int:
    """Bytes of each composite's source cache, from ``CYTEARC_SOURCE_CACHE_BYTES``.

    Sizes are read by :func:`dask.utils.parse_bytes`, as the engine's memory
    budget is: ``K``/``M``/``G``/``T`` (with or without ``B``) are decimal,
    ``KiB``/``MiB``/``GiB``/``TiB`` binary, so ``"512M"`` is 512e6 bytes and
    ``"2GiB"`` 2·2³⁰.

    Parameters
    ----------
    value
        The variable's text; None reads it from :data:`os.environ`. Unset or
        blank gives :data:`DEFAULT_LIMIT`; ``"0"`` turns the cache off.

    Returns
    -------
    int
        The bound in bytes; 0 when sources are read directly.

    Raises
    ------
    OperationArgumentError
        The text is not a whole number of bytes or a number with a byte unit.

    Examples
    --------
    >>> cache_limit("1048576"), cache_limit("512M"), cache_limit("1.5GiB"), cache_limit("0")
    (1048576, 512000000, 1610612736, 0)
    """
    if value is None:
        value = os.environ.get(ENV_CACHE_BYTES)
    if value is None or not value.strip():
        return DEFAULT_LIMIT
    match = _SIZE.fullmatch(value.strip())
    n_bytes: int | None = None
    if match is not None and (match["unit"] or "." not in match["number"]):
        with contextlib.suppress(ValueError):
            n_bytes = int(parse_bytes(value.strip()))
    if n_bytes is None:
        msg = f"{ENV_CACHE_BYTES}: cannot read {value!r} as a size; give bytes such as '1048576', a size such as '512M' or '2GiB', or '0' to read the sources directly"
        raise OperationArgumentError(msg)
    return n_bytes


@dataclass(frozen=True, kw_only=True)
class CacheStats:
    """What one process did through one :class:`SourceCache` (all its copies in the process).

    Parameters
    ----------
    hits
        Reads served from the cache.
    misses
        Reads that went to the source (every read while the cache is off).
    bytes_fetched
        Bytes the misses read from the source.
    bytes_served_from_cache
        Bytes the hits returned.
    stored
        Values this process wrote to the cache.
    evictions
        Entries this process removed to make room.
    """

    hits: int = 0
    misses: int = 0
    bytes_fetched: int = 0
    bytes_served_from_cache: int = 0
    stored: int = 0
    evictions: int = 0


@dataclass
class _Local:
    """What one process knows of one cache directory, shared by every copy of the cache in it."""

    pid: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    counts_lock: threading.Lock = field(default_factory=threading.Lock)
    fd: int | None = None
    created: tuple[int, int] | None = None
    closed: bool = False
    off: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, **increments: int) -> None:
        with self.counts_lock:
            for name, n in increments.items():
                self.counts[name] = self.counts.get(name, 0) + n


_LOCALS: dict[str, _Local] = {}
_LOCALS_LOCK = threading.Lock()


def _local(path: str) -> _Local:
    """The state of the directory ``path`` in this process (new after a fork)."""
    pid = os.getpid()
    with _LOCALS_LOCK:
        local = _LOCALS.get(path)
        if local is None or local.pid != pid:
            local = _LOCALS[path] = _Local(pid=pid)
        return local


def _digest(key: str, kind: Kind, suffix_length: int | None) -> str:
    return hashlib.sha256(f"{kind}\0{suffix_length}\0{key}".encode()).hexdigest()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_directory(path: str, identity: tuple[int, int]) -> bool:
    """Whether ``path`` is still the directory of ``identity`` (device, inode)."""
    try:
        status = Path(path).lstat()
    except OSError:
        return False
    return (status.st_dev, status.st_ino) == identity


def _remove_directory(path: str, owner_pid: int) -> None:
    """Close the cache at ``path`` in its creating process and remove the directory it created."""
    if os.getpid() != owner_pid:
        return
    local = _local(path)
    with local.lock:
        local.closed = True
        fd, local.fd = local.fd, None
        if local.created is None or not _is_directory(path, local.created):
            if fd is not None:
                os.close(fd)
            return
        doomed = path
        try:
            if fd is None:
                fd = os.open(Path(path) / _LOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
            fcntl.flock(fd, fcntl.LOCK_EX)
            doomed = f"{path}.closing-{secrets.token_hex(4)}"
            Path(path).rename(doomed)  # no writer can add a file to it after this
        except OSError:
            doomed = path
        finally:
            if fd is not None:
                os.close(fd)
        shutil.rmtree(doomed, ignore_errors=True)


class SourceCache:
    """The bounded local cache of one open composite's remote source reads.

    Constructing it touches no disk: its directory,
    ``PARENT/cytearc-source-cache-PID-RANDOM``, is created by the first value
    stored in the creating process, or when the cache is first pickled to
    share it with Dask worker processes (copies never create it, so none can
    outlive :meth:`close`). A copy unpickled in another process on the same
    host uses the same directory and bound. The creating process removes the
    directory on :meth:`close`, when the cache is garbage collected, or at
    exit; a copy's :meth:`close` only makes that copy read directly.

    Any fault of the directory (it cannot be created, a write fails with
    ``ENOSPC`` or ``EROFS``, its path is a file) turns the cache off for the
    process, warns once with :class:`SourceCacheWarning`, and reads continue
    from the sources. Nothing the cache does raises to a reader.

    Parameters
    ----------
    limit
        The most bytes the directory holds (see :func:`cache_limit`); 0 never
        touches the disk.
    parent
        The folder the directory is made in; :func:`tempfile.gettempdir` by
        default.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as parent, SourceCache(1000, parent=parent) as cache:
    ...     first = cache.get_or_fetch("src/c/0", "object", lambda: b"shard bytes")
    ...     again = cache.get_or_fetch("src/c/0", "object", lambda: b"not read")
    ...     (first, again, cache.stats().hits)
    (b'shard bytes', b'shard bytes', 1)
    """

    _path: Path
    _limit: int
    _owner: bool
    _owner_pid: int
    _closed: bool
    _finalizer: weakref.finalize[[str, int], SourceCache] | None

    def __init__(self, limit: int, *, parent: Path | str | None = None) -> None:
        _check_limit(limit)
        root = Path(parent) if parent is not None else Path(tempfile.gettempdir())
        self._path = root / f"cytearc-source-cache-{os.getpid()}-{secrets.token_hex(8)}"
        self._limit = limit
        self._owner = True
        self._owner_pid = os.getpid()
        self._closed = False
        self._finalizer = (
            weakref.finalize(self, _remove_directory, str(self._path), self._owner_pid)
            if limit
            else None
        )

    @classmethod
    def from_env(cls, *, parent: Path | str | None = None) -> SourceCache:
        """A cache bounded by ``CYTEARC_SOURCE_CACHE_BYTES`` (see :func:`cache_limit`).

        Parameters
        ----------
        parent
            The folder the directory is made in; the system temporary folder by default.

        Returns
        -------
        SourceCache
            Not yet on disk.
        """
        return cls(cache_limit(), parent=parent)

    @property
    def path(self) -> Path:
        """The cache's directory (which exists only once a value was stored)."""
        return self._path

    @property
    def limit(self) -> int:
        """The most bytes the directory holds."""
        return self._limit

    @property
    def enabled(self) -> bool:
        """Whether reads in this process go through the directory (not closed, off or of limit 0)."""
        if not self._limit or self._closed:
            return False
        local = _local(str(self._path))
        return not (local.off or local.closed)

    def stats(self) -> CacheStats:
        """Counts of this process's reads through the cache (by every copy of it in the process).

        Returns
        -------
        CacheStats
            Counts since the cache was made or first used in this process.
        """
        local = _local(str(self._path))
        with local.counts_lock:
            return CacheStats(**local.counts)

    def close(self) -> None:
        """Read directly from now on; the creating process also removes the directory."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        local = _local(str(self._path))
        if self._owner and self.enabled:
            try:
                with local.lock:
                    self._lock_fd(local)  # create it now, so the copies find it
            except OSError as error:
                self._fault(local, error)
        return (_restore, (str(self._path), self._limit, self._owner_pid, not self.enabled))

    def __dask_tokenize__(self) -> tuple[str, str, int]:
        return ("cytearc.SourceCache", str(self._path), self._limit)

    def __repr__(self) -> str:
        return f"SourceCache({self._limit}, path={str(self._path)!r})"

    # --- reading -----------------------------------------------------------

    def lookup(self, key: str, kind: Kind, *, suffix_length: int | None = None) -> bytes | None:
        """The cached bytes of ``key``, or None.

        Parameters
        ----------
        key
            The store key, prefixed by its source (``"SOURCE/counts/c/0/0"``).
        kind
            ``"object"`` for the whole object, ``"suffix"`` for its last
            ``suffix_length`` bytes (also served from a cached whole object).
        suffix_length
            The suffix's length; only with ``kind="suffix"``.

        Returns
        -------
        bytes or None
            None when not cached or the cache is off.
        """
        _check_kind(kind, suffix_length)
        if kind == "suffix":
            assert suffix_length is not None
            found = self._read(_digest(key, "suffix", suffix_length), None, None)
            if found is None:
                found = self._read(_digest(key, "object", None), -suffix_length, None)
        else:
            found = self._read(_digest(key, "object", None), None, None)
        return found

    def lookup_range(self, key: str, start: int, stop: int | None) -> bytes | None:
        """Bytes ``[start:stop]`` of the cached whole object ``key``, or None.

        Parameters
        ----------
        key
            The store key, prefixed by its source.
        start
            The first byte (>= 0).
        stop
            The byte after the last (past the end reads to the end); None for the end.

        Returns
        -------
        bytes or None
            None when the object is not cached, the cache is off, or ``start``
            is at or past the end (the source answers that).
        """
        return self._read(_digest(key, "object", None), start, stop)

    def _read(self, digest: str, start: int | None, stop: int | None) -> bytes | None:
        if not self.enabled:
            return None
        local = _local(str(self._path))
        path = self._path / f"{digest}.entry"
        try:
            with path.open("rb") as file:
                size = os.fstat(file.fileno()).st_size
                if start is not None and start >= size:
                    return None
                begin, end, _ = slice(start, stop).indices(size)
                file.seek(begin)
                data = file.read(max(0, end - begin))
                with contextlib.suppress(OSError):
                    os.utime(file.fileno())  # the entry's last use, for eviction
        except FileNotFoundError:
            return None
        except OSError as error:
            self._fault(local, error)
            return None
        local.count(hits=1, bytes_served_from_cache=len(data))
        return data

    # --- storing -----------------------------------------------------------

    def put(self, key: str, kind: Kind, data: bytes, *, suffix_length: int | None = None) -> bool:
        """Store ``data`` as the value of ``key`` if it fits, evicting least recently used entries.

        Parameters
        ----------
        key
            The store key, prefixed by its source.
        kind
            ``"object"`` or ``"suffix"``, as in :meth:`lookup`.
        data
            The bytes read from the source.
        suffix_length
            The suffix's length; only with ``kind="suffix"``.

        Returns
        -------
        bool
            Whether it was stored: False when it is empty or larger than the
            limit, is already cached or being cached, other writers' values
            in progress leave no room, or the cache is off.
        """
        _check_kind(kind, suffix_length)
        if not data or len(data) > self._limit or not self.enabled:
            return False
        local = _local(str(self._path))
        digest = _digest(key, kind, suffix_length)
        part: Path | None = None
        try:
            with self._locked(local):
                part = self._reserve(local, digest, len(data))
            if part is None:
                return False
            with part.open("r+b") as file:
                file.write(data)
            with self._locked(local):
                part.replace(self._path / f"{digest}.entry")
            part = None
        except OSError as error:
            self._fault(local, error)
            return False
        finally:
            if part is not None:
                with contextlib.suppress(OSError):
                    part.unlink()
        local.count(stored=1)
        return True

    def _reserve(self, local: _Local, digest: str, size: int) -> Path | None:
        """Make room for ``size`` bytes and create the part reserving them; the lock is held."""
        ledger = self._ledger(digest)
        if ledger is None:
            return None
        entries, pinned = ledger
        if pinned + size > self._limit:
            return None
        used = pinned + sum(entry[1] for entry in entries)
        evicted = 0
        for _, entry_size, name in sorted(entries):
            if used + size <= self._limit:
                break
            with contextlib.suppress(FileNotFoundError):
                (self._path / name).unlink()
            used -= entry_size
            evicted += 1
        if evicted:
            local.count(evictions=evicted)
        part = self._path / f"{digest}.{os.getpid()}.{secrets.token_hex(4)}.{size}.part"
        os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        return part

    def _ledger(self, digest: str) -> tuple[list[tuple[int, int, str]], int] | None:
        """The entries (last use, size, name) and the bytes that cannot be evicted; the lock is held.

        Parts of processes that died are removed. None when ``digest`` is
        cached or being cached already.
        """
        entries: list[tuple[int, int, str]] = []
        pinned = 0
        with os.scandir(self._path) as items:
            for item in items:
                if item.name == _LOCK_NAME:
                    continue
                match = _ENTRY.fullmatch(item.name) or _PART.fullmatch(item.name)
                if match is not None and match["digest"] == digest:
                    return None
                if match is not None and match.re is _PART:
                    if _alive(int(match["pid"])):
                        pinned += int(match["size"])
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            Path(item.path).unlink()
                    continue
                try:
                    status = item.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if match is not None:
                    entries.append((status.st_mtime_ns, status.st_size, item.name))
                else:
                    pinned += status.st_size  # not the cache's: counted, never removed
        return entries, pinned

    @contextlib.contextmanager
    def _locked(self, local: _Local) -> Iterator[None]:
        """Hold this process's lock of the directory and its file lock."""
        with local.lock:
            if local.closed:
                raise FileNotFoundError(self._path)
            fd = self._lock_fd(local)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_fd(self, local: _Local) -> int:
        """The open lock file, the directory created first by its creating process; ``local.lock`` is held."""
        if local.fd is None:
            if self._owner and local.created is None:
                self._path.mkdir(mode=0o700)
                status = self._path.stat()
                local.created = (status.st_dev, status.st_ino)
            local.fd = os.open(
                self._path / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        return local.fd

    def _fault(self, local: _Local, error: OSError) -> None:
        """Turn the cache off for this process; warn unless its creator closed it."""
        with local.counts_lock:
            first = not local.off
            local.off = True
        closed = local.closed or (not self._owner and not self._path.exists())
        if first and not closed:
            warn_user(
                f"The source cache at {self._path} cannot be used ({type(error).__name__}: {error}); reads continue from the sources, uncached",
                SourceCacheWarning,
            )

    # --- reading through --------------------------------------------------

    def get_or_fetch(
        self,
        key: str,
        kind: Kind,
        fetch: Callable[[], bytes],
        *,
        suffix_length: int | None = None,
    ) -> bytes:
        """The cached bytes of ``key``, else ``fetch()``'s, stored if they fit.

        Parameters
        ----------
        key
            The store key, prefixed by its source.
        kind
            ``"object"`` or ``"suffix"``, as in :meth:`lookup`.
        fetch
            Reads the bytes from the source.
        suffix_length
            The suffix's length; only with ``kind="suffix"``.

        Returns
        -------
        bytes
            The value.
        """
        found = self.lookup(key, kind, suffix_length=suffix_length)
        if found is not None:
            return found
        data = fetch()
        _local(str(self._path)).count(misses=1, bytes_fetched=len(data))
        self.put(key, kind, data, suffix_length=suffix_length)
        return data

    async def get_or_fetch_async(
        self,
        key: str,
        kind: Kind,
        fetch: Callable[[], Awaitable[bytes | None]],
        *,
        suffix_length: int | None = None,
    ) -> bytes | None:
        """:meth:`get_or_fetch` for a coroutine ``fetch``; the disk is used from a thread.

        Parameters
        ----------
        key
            The store key, prefixed by its source.
        kind
            ``"object"`` or ``"suffix"``, as in :meth:`lookup`.
        fetch
            Reads the bytes from the source; None when the source has no such key.
        suffix_length
            The suffix's length; only with ``kind="suffix"``.

        Returns
        -------
        bytes or None
            The value; None (never cached) when the source has none.
        """
        _check_kind(kind, suffix_length)
        if self.enabled:
            found = await asyncio.to_thread(self.lookup, key, kind, suffix_length=suffix_length)
            if found is not None:
                return found
        data = await fetch()
        if data is None:
            return None
        _local(str(self._path)).count(misses=1, bytes_fetched=len(data))
        if self.enabled:
            await asyncio.to_thread(self.put, key, kind, data, suffix_length=suffix_length)
        return data

    async def range_or_fetch_async(
        self,
        key: str,
        start: int,
        stop: int | None,
        fetch: Callable[[], Awaitable[bytes | None]],
    ) -> bytes | None:
        """Bytes ``[start:stop]`` of a cached whole object, else ``fetch()``'s, not stored (a sparse read).

        Parameters
        ----------
        key
            The store key, prefixed by its source.
        start
            The first byte.
        stop
            The byte after the last; None for the end.
        fetch
            Reads the range from the source.

        Returns
        -------
        bytes or None
            The bytes; None when the source has no such key.
        """
        if self.enabled:
            found = await asyncio.to_thread(self.lookup_range, key, start, stop)
            if found is not None:
                return found
        data = await fetch()
        if data is not None:
            _local(str(self._path)).count(misses=1, bytes_fetched=len(data))
        return data


def _restore(path: str, limit: int, owner_pid: int, off: bool) -> SourceCache:  # noqa: FBT001 (called by pickle)
    """A copy of a pickled :class:`SourceCache`: the same directory and bound, never its remover."""
    cache = SourceCache.__new__(SourceCache)
    cache._path = Path(path)
    cache._limit = limit
    cache._owner = False
    cache._owner_pid = owner_pid
    cache._closed = off
    cache._finalizer = None
    return cache


def _check_limit(limit: object) -> None:
    if type(limit) is not int or limit < 0:
        msg = f"limit: expected a number of bytes >= 0, found {limit!r}; use cache_limit() to read {ENV_CACHE_BYTES}"
        raise OperationArgumentError(msg)


def _check_kind(kind: str, suffix_length: int | None) -> None:
    if kind == "object" and suffix_length is None:
        return
    if kind == "suffix" and isinstance(suffix_length, int) and suffix_length > 0:
        return
    msg = f"kind {kind!r} with suffix_length {suffix_length!r}: expected 'object' without a suffix_length, or 'suffix' with a positive suffix_length"
    raise OperationArgumentError(msg)
