"""Where stores, cubes and files live: a local path or an fsspec URL, with its storage options.

Every path a user gives CyteArc or CytePool becomes a :class:`Location`
through :func:`as_location`. A local path stays a :class:`pathlib.Path` all
the way to Zarr (:class:`~zarr.storage.LocalStore`), because Zarr reads a
string as a URL and would end the path at ``#``, ``?`` or ``;``. A URL
(``s3://``, ``gs://``, ``memory://``, ``http(s)://`` read-only ...) is read
and written through fsspec (:class:`~zarr.storage.FsspecStore`) with the
``storage_options`` of its filesystem, which are never shown (``repr`` and
``str`` omit them, so messages and records cannot leak credentials).

Object stores have no rename: a writer there builds its output in place and
writes its completion marker last (see ``docs/store-format.md``, *Object
stores*).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final

import fsspec
from zarr.storage import FsspecStore, LocalStore

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from fsspec import AbstractFileSystem

__all__ = ["READ_ONLY_PROTOCOLS", "Location", "as_location", "is_url", "open_filesystem"]

_URL: Final = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]+)://")
_FLATTENED_URL: Final = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]+):/(?!/)")
"""A URL that :class:`~pathlib.Path` flattened (``Path("s3://b")`` is ``s3:/b``); one letter is a drive."""
READ_ONLY_PROTOCOLS: Final = frozenset({"http", "https"})
"""Protocols whose filesystems read and never write."""


def is_url(location: object) -> bool:
    """Whether ``location`` is a string with a scheme (``s3://...``), not a local path.

    Parameters
    ----------
    location
        What a user passed.

    Returns
    -------
    bool
        True for ``"s3://b/x"``, False for paths and :class:`~pathlib.Path`.

    Examples
    --------
    >>> is_url("s3://bucket/ds.zarr"), is_url("data/ds.zarr")
    (True, False)
    """
    return isinstance(location, str) and _URL.match(location) is not None


@dataclass(frozen=True, eq=False)
class Location:
    """A local directory or file, or an object under an fsspec URL.

    Build one with :func:`as_location`. Exactly one of ``path`` and ``url``
    is set. ``storage_options`` never appear in ``repr`` or ``str``.

    Parameters
    ----------
    path
        The local path, absolute.
    url
        The URL, without a trailing ``/``.
    storage_options
        The options of the URL's fsspec filesystem.
    """

    path: Path | None = None
    url: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_local(self) -> bool:
        """Whether this is a local path."""
        return self.path is not None

    @property
    def protocol(self) -> str:
        """``"file"`` for local paths, else the URL's scheme (``"s3"``)."""
        if self.url is None:
            return "file"
        match = _URL.match(self.url)
        assert match is not None
        return match["scheme"].lower()

    @property
    def read_only(self) -> bool:
        """Whether the filesystem cannot write (``http(s)://``)."""
        return self.protocol in READ_ONLY_PROTOCOLS

    @property
    def name(self) -> str:
        """The last component (``ds.zarr``)."""
        if self.path is not None:
            return self.path.name
        assert self.url is not None
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    def child(self, key: str) -> Location:
        """The location of ``key`` (``"a/b"``) below this one."""
        if self.path is not None:
            return Location(path=self.path / key)
        return Location(url=f"{self.url}/{key.strip('/')}", storage_options=self.storage_options)

    @property
    def parent(self) -> Location:
        """The folder (or prefix) holding this location."""
        if self.path is not None:
            return Location(path=self.path.parent)
        assert self.url is not None
        match = _URL.match(self.url)
        assert match is not None
        rest = self.url[match.end() :]
        head = str(PurePosixPath(rest).parent)
        return Location(
            url=f"{match[0]}{'' if head == '.' else head}", storage_options=self.storage_options
        )

    def filesystem(self) -> tuple[AbstractFileSystem, str]:
        """The fsspec filesystem and the path within it.

        Returns
        -------
        tuple of fsspec.AbstractFileSystem and str
            For a local path, fsspec's local filesystem and the path.
        """
        if self.path is not None:
            return fsspec.filesystem("file"), str(self.path)
        assert self.url is not None
        fs, path = fsspec.core.url_to_fs(self.url, **dict(self.storage_options))
        return fs, str(path)

    def zarr_store(self, *, read_only: bool) -> LocalStore | FsspecStore:
        """A Zarr store rooted here: a :class:`~zarr.storage.LocalStore` of the path, or an :class:`~zarr.storage.FsspecStore`.

        Parameters
        ----------
        read_only
            Open for reading only (always, for read-only protocols).

        Returns
        -------
        zarr.storage.LocalStore or zarr.storage.FsspecStore
            The store; nothing is read or written yet.
        """
        if self.path is not None:
            return LocalStore(self.path, read_only=read_only)
        assert self.url is not None
        return FsspecStore.from_url(
            self.url,
            storage_options=dict(self.storage_options),
            read_only=read_only or self.read_only,
        )

    def keys(self) -> list[str]:
        """Every file (object) below this location, as ``/``-separated keys relative to it, sorted.

        Returns
        -------
        list of str
            Empty when nothing is there.
        """
        fs, root = self.filesystem()
        if not fs.isdir(root):
            return []
        found = fs.find(root, withdirs=False)
        prefix = root.rstrip("/") + "/"
        return sorted(str(p)[len(prefix) :] for p in found if str(p).startswith(prefix))

    def read_bytes(self, key: str = "") -> bytes | None:
        """The bytes of the file ``key`` below this location (or of this file), None when absent."""
        fs, root = self.filesystem()
        path = f"{root.rstrip('/')}/{key}" if key else root
        try:
            data: bytes = fs.cat_file(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return data

    def exists(self) -> bool:
        """Whether a file or folder (or any object below the prefix) is here."""
        fs, root = self.filesystem()
        return bool(fs.exists(root))

    def overlaps(self, other: Location) -> bool:
        """Whether one of ``self`` and ``other`` is, holds or lies inside the other.

        Local paths are compared after resolving links; URLs as prefixes at
        a ``/``; a local path never overlaps a URL.

        Examples
        --------
        >>> as_location("s3://b/ds.zarr").overlaps(as_location("s3://b/ds.zarr/x"))
        True
        >>> as_location("s3://b/ds.zarr").overlaps(as_location("s3://b/ds.zarr2"))
        False
        """
        if self.path is not None and other.path is not None:
            a, b = self.path.resolve(), other.path.resolve()
            return a == b or a in b.parents or b in a.parents
        if self.url is not None and other.url is not None:
            a_url, b_url = f"{self.url}/", f"{other.url}/"
            return a_url.startswith(b_url) or b_url.startswith(a_url)
        return False

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else str(self.url)

    def __fspath__(self) -> str:
        if self.path is None:
            msg = f"{self.url}: a URL has no local file-system path"
            raise TypeError(msg)
        return str(self.path)


def open_filesystem(
    location: Location, *, error: Callable[[str], Exception] = ValueError
) -> tuple[AbstractFileSystem, str]:
    """:meth:`Location.filesystem`, with a named error when fsspec cannot open the protocol.

    Parameters
    ----------
    location
        Where.
    error
        Makes the exception raised (the caller's package's error class).

    Returns
    -------
    tuple of fsspec.AbstractFileSystem and str
        The filesystem and the path within it.

    Raises
    ------
    Exception
        ``error(message)`` when the protocol is unknown to fsspec or the
        package implementing it (``gcsfs``, ``adlfs`` ...) is not installed.

    Examples
    --------
    >>> open_filesystem(as_location("nosuch://bucket/x"))
    Traceback (most recent call last):
      ...
    ValueError: nosuch://bucket/x: fsspec cannot open nosuch:// URLs (Protocol not known: nosuch); install the package of its filesystem (s3fs, gcsfs, adlfs ...) or check the URL
    """
    try:
        return location.filesystem()
    except (ImportError, ValueError) as exc:
        msg = (
            f"{location}: fsspec cannot open {location.protocol}:// URLs ({exc}); install the "
            "package of its filesystem (s3fs, gcsfs, adlfs ...) or check the URL"
        )
        raise error(msg) from exc


def as_location(
    location: str | os.PathLike[str] | Location,
    storage_options: Mapping[str, Any] | None = None,
    *,
    error: Callable[[str], Exception] = ValueError,
) -> Location:
    """``location`` as a :class:`Location`: a URL with its options, or an absolute local path.

    A ``file://`` URL is a local path. ``storage_options`` apply to URLs and
    are ignored for local paths (so one set of options serves a mix of
    local and remote sources).

    Parameters
    ----------
    location
        A local path, an fsspec URL, or a :class:`Location` (returned as it is
        when no ``storage_options`` are given).
    storage_options
        The options of the URL's fsspec filesystem.
    error
        Makes the exception raised for a malformed location (the caller's
        package's error class).

    Returns
    -------
    Location

    Raises
    ------
    Exception
        ``error(message)`` for a path that :class:`~pathlib.Path` made from a
        URL (``s3:/bucket``), or ``storage_options`` that are not a mapping.

    Examples
    --------
    >>> as_location("s3://bucket/ds.zarr/", {"anon": True})
    Location(path=None, url='s3://bucket/ds.zarr')
    >>> as_location("s3:/bucket")
    Traceback (most recent call last):
      ...
    ValueError: s3:/bucket: a URL whose '//' was lost (pathlib.Path joins 's3://' to 's3:/'); pass the URL as a string, 's3://bucket'
    """
    if storage_options is not None and not hasattr(storage_options, "keys"):
        msg = f"storage_options: expected a mapping of fsspec filesystem options, found {type(storage_options).__name__}"
        raise error(msg)
    if isinstance(location, Location):
        if storage_options is None or location.is_local:
            return location
        return Location(url=location.url, storage_options=dict(storage_options))
    text = os.fspath(location)
    if isinstance(location, str) and (match := _URL.match(text)) is not None:
        if match["scheme"].lower() == "file":
            return Location(path=Path(text[match.end() :]).absolute())
        return Location(url=text.rstrip("/"), storage_options=dict(storage_options or {}))
    flattened = _FLATTENED_URL.match(text)
    if flattened is not None:
        fixed = f"{flattened['scheme']}://{text[flattened.end() :]}"
        msg = f"{text}: a URL whose '//' was lost (pathlib.Path joins '{flattened['scheme']}://' to '{flattened['scheme']}:/'); pass the URL as a string, {fixed!r}"
        raise error(msg)
    return Location(path=Path(text).absolute())
