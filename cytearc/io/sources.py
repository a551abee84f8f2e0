"""Count sources: what every importer reads, whatever the file format.

A :class:`CountSource` presents a file as a cells x features count matrix
with its cell and feature tables, read in bands of cells. Importers make one
pass over the bands to find value ranges (:mod:`cytearc.storage.count_dtype`),
then a second to write; so a source must give the same band every time it is
asked, and must never load the whole matrix to answer.

Conventions every source keeps:

- ``cells`` has the column ``ids`` (barcodes, unique strings) and optionally
  more metadata columns; ``features`` has ``ids``, ``names`` and
  ``feature_types`` (10x's "Gene Expression", "Antibody Capture", "Peaks", ...;
  "Gene Expression" when the format has none), as strings, plus any other
  columns the format carries.
- :meth:`CountSource.read_band` returns a ``scipy.sparse.csr_matrix`` of the
  rows ``start:stop`` (cells) and all features, canonical: each coordinate
  once, indices sorted, explicit zeros removed, in the source's dtype widened
  to int64 for integers. A file that stores a coordinate twice is damaged and
  its reader raises :class:`~cytearc.errors.RepeatedEntryError`; only
  :class:`SparseSource`, an in-memory matrix, sums repeated coordinates (in
  int64 for integers), as SciPy does.

A source at an fsspec URL (``s3://``, ``gs://``, ``http(s)://``,
``memory://``) is read through fsspec and never downloaded whole unless the
user asks (``download=True``): :func:`open_remote` reads an HDF5 file in
blocks of :data:`REMOTE_BLOCK_SIZE` bytes, one ranged GET each, kept in a
small cache; :func:`open_remote_text` streams a text file (decompressed as
its suffix says) front to back. A missing file raises the
:class:`~cytearc.errors.SourceFormatError` a missing local file raises, and a
failed request a :class:`~cytearc.errors.StoreAccessError` naming the URL
and the endpoint; neither ever shows the storage options (credentials).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Final, Protocol, Self, cast, runtime_checkable

import numpy as np
import scipy.sparse as sp

from cytearc.errors import SourceFormatError, StoreAccessError
from cytepool.locations import Location, as_location

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator, Mapping

    import pandas as pd
    from _typeshed import WriteableBuffer

__all__ = [
    "REMOTE_BLOCK_SIZE",
    "REMOTE_CACHE_BLOCKS",
    "CountSource",
    "FileSource",
    "LayeredSource",
    "RemoteFile",
    "RemoteReader",
    "SparseSource",
    "canonical_csr",
    "decompressed",
    "iter_bands",
    "open_remote",
    "open_remote_text",
    "remote_file_exists",
    "source_location",
]


@runtime_checkable
class CountSource(Protocol):
    """A count matrix to import, cells x features, read in bands of cells."""

    @property
    def location(self) -> str:
        """The file or directory read, for messages."""
        ...

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        ...

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values (before any storage dtype is chosen)."""
        ...

    @property
    def cells(self) -> pd.DataFrame:
        """One row per cell; column ``ids`` first."""
        ...

    @property
    def features(self) -> pd.DataFrame:
        """One row per feature; columns ``ids``, ``names``, ``feature_types`` first."""
        ...

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Rows ``start:stop`` as a canonical CSR matrix (see the module docstring)."""
        ...

    def close(self) -> None:
        """Release open files."""
        ...


@runtime_checkable
class LayeredSource(Protocol):
    """A source read from one of several matrices of its file (an H5AD file's ``X`` or layers)."""

    @property
    def layers(self) -> tuple[str, ...]:
        """The names of the file's layers."""
        ...


class FileSource:
    """Shared parts of the sources read from a file or folder.

    A subclass sets ``_path`` (a :class:`~pathlib.Path`, or the
    :class:`~cytepool.locations.Location` of a URL, which prints as the URL),
    ``_cells``, ``_features`` and ``_dtype`` when it opens, and implements
    ``read_band`` and ``close``; it is a context manager that closes on exit.
    """

    _path: Path | Location
    _cells: pd.DataFrame
    _features: pd.DataFrame
    _dtype: np.dtype

    @property
    def location(self) -> str:
        """The file or folder read."""
        return str(self._path)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        return (len(self._cells), len(self._features))

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values (int64 or float64 for text formats)."""
        return self._dtype

    @property
    def cells(self) -> pd.DataFrame:
        """``ids`` (the barcodes), then the format's cell columns."""
        return self._cells

    @property
    def features(self) -> pd.DataFrame:
        """``ids``, ``names``, ``feature_types``, then the format's other feature columns."""
        return self._features

    def close(self) -> None:
        """Release what the source holds open."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def canonical_csr(matrix: sp.spmatrix | sp.sparray | np.ndarray) -> sp.csr_matrix:
    """A canonical CSR copy: duplicates summed (integers in int64), sorted, no explicit zeros.

    The file readers call it on bands they have checked hold each coordinate
    once, so only :class:`SparseSource` ever sums here.
    """
    csr = sp.csr_matrix(matrix)
    if csr.dtype.kind in "biu":
        csr = csr.astype(np.int64)
    elif csr.dtype == np.float16:
        csr = csr.astype(np.float32)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    csr.sort_indices()
    return csr


def iter_bands(source: CountSource, rows: int) -> Iterator[tuple[int, sp.csr_matrix]]:
    """``(start, band)`` over the source in bands of ``rows`` cells."""
    n_cells = source.shape[0]
    for start in range(0, n_cells, rows):
        yield start, source.read_band(start, min(start + rows, n_cells))


@dataclass(eq=False)
class SparseSource:
    """An in-memory SciPy sparse (or numpy) matrix, cells x features, with its tables."""

    matrix: sp.spmatrix | sp.sparray | np.ndarray
    cells: pd.DataFrame
    features: pd.DataFrame
    location: str = "<in-memory matrix>"
    _csr: sp.csr_matrix = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._csr = canonical_csr(self.matrix)
        n_cells, n_features = self._csr.shape
        if len(self.cells) != n_cells or len(self.features) != n_features:
            msg = (
                f"{self.location}: a {n_cells} x {n_features} matrix needs {n_cells} cells and "
                f"{n_features} features, found tables of {len(self.cells)} and {len(self.features)} rows"
            )
            raise SourceFormatError(msg)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        return (int(self._csr.shape[0]), int(self._csr.shape[1]))

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the values."""
        return np.dtype(self.matrix.dtype)

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Rows ``start:stop``."""
        return self._csr[start:stop]

    def close(self) -> None:
        """Nothing to release."""


# --- sources at URLs ---------------------------------------------------------------

REMOTE_BLOCK_SIZE: Final = 8 * 2**20
"""Bytes of each ranged read (one GET) of a source at a URL: 8 MiB.

HDF5 reads jump between the file's metadata and the slices of a band; blocks
of 8 MiB keep requests few (a round trip costs as much as megabytes of
transfer) without fetching much that a band does not need."""
REMOTE_CACHE_BLOCKS: Final = 8
"""Blocks of a remote HDF5 file kept in memory, the least recently used dropped first: 64 MiB at most."""
_SECRET_NAME: Final = re.compile(
    r"key|secret|token|passw|credential|auth|session|signature", re.IGNORECASE
)
"""Names of storage options whose values are never shown, at any depth of the options."""


def source_location(
    source: str | os.PathLike[str] | Location, storage_options: Mapping[str, Any] | None = None
) -> Location:
    """Where ``source`` is: a local path, or a URL with the options of its fsspec filesystem.

    Parameters
    ----------
    source
        A local path, an fsspec URL (``s3://bucket/pbmc.h5``), or a
        :class:`~cytepool.locations.Location`.
    storage_options
        The options of the URL's filesystem (ignored for local paths).

    Returns
    -------
    cytepool.locations.Location

    Raises
    ------
    SourceFormatError
        If ``source`` is a URL whose ``//`` :class:`~pathlib.Path` lost
        (``s3:/bucket``), or the options are not a mapping.

    Examples
    --------
    >>> source_location("s3://bucket/pbmc.h5", {"anon": True})
    Location(path=None, url='s3://bucket/pbmc.h5')
    >>> source_location("pbmc.h5").is_local
    True
    """
    return as_location(source, storage_options, error=SourceFormatError)


def _secrets(options: object) -> list[str]:
    """The non-empty string values of ``options`` under the names of credentials, at any depth."""
    found: list[str] = []
    if isinstance(options, dict):
        for name, value in options.items():
            if isinstance(value, str) and _SECRET_NAME.search(str(name)):
                found.append(value)
            else:
                found.extend(_secrets(value))
    elif isinstance(options, list | tuple):
        for value in options:
            found.extend(_secrets(value))
    return [value for value in found if value]


def _scrubbed(text: str, location: Location) -> str:
    """``text`` with the credentials of ``location``'s storage options masked."""
    for secret in sorted(_secrets(dict(location.storage_options)), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _endpoint(location: Location) -> str:
    """The endpoint a URL is read from, for messages."""
    if location.read_only:
        assert location.url is not None
        match = re.match(r"^[A-Za-z]+://[^/]*", location.url)
        return f"endpoint {match[0] if match else location.url}"
    options = dict(location.storage_options)
    client = options.get("client_kwargs")
    url = options.get("endpoint_url") or (
        client.get("endpoint_url") if isinstance(client, dict) else None
    )
    return f"endpoint {url}" if url else f"the default endpoint of {location.protocol}://"


def _access_error(location: Location, error: BaseException, *, doing: str) -> StoreAccessError:
    """The error for a failed request of a source at a URL: the URL and the endpoint, never the options."""
    detail = _scrubbed(f"{type(error).__name__}: {error}", location)
    msg = (
        f"{location}: cannot {doing} at {_endpoint(location)} ({detail}); check the URL, "
        "endpoint_url in source_storage_options (or its client_kwargs), the network and the credentials"
    )
    return StoreAccessError(msg)


def _missing(location: Location, remedy: str) -> SourceFormatError:
    return SourceFormatError(f"{location}: no such file; {remedy}")


def _is_missing(error: FileNotFoundError) -> bool:
    """Whether ``error`` says the file is absent, rather than that the request failed.

    fsspec's HTTP filesystem raises :class:`FileNotFoundError` from whatever
    made a lookup fail, a refused connection included; s3fs raises it alone
    or from the service's ``NoSuchKey``.
    """
    cause = error.__cause__
    if cause is None or isinstance(cause, FileNotFoundError):
        return True
    status = getattr(cause, "status", None)
    if isinstance(status, int):
        return status in {404, 410}
    return not isinstance(cause, OSError) and not type(cause).__module__.startswith("aiohttp")


def _filesystem(location: Location) -> tuple[Any, str]:
    """The fsspec filesystem of a URL and the path in it; a filesystem that cannot be made is a SourceFormatError."""
    try:
        return location.filesystem()
    except (ImportError, ValueError, TypeError) as error:
        detail = _scrubbed(f"{type(error).__name__}: {error}", location)
        msg = (
            f"{location}: cannot open the {location.protocol}:// filesystem ({detail}); install its "
            "fsspec implementation (s3fs for s3://, gcsfs for gs://, aiohttp for http://) and check "
            "source_storage_options"
        )
        raise SourceFormatError(msg) from error


def remote_file_exists(location: Location) -> bool:
    """Whether a file (an object, not a prefix) is at the URL ``location``.

    Parameters
    ----------
    location
        A URL.

    Returns
    -------
    bool

    Raises
    ------
    StoreAccessError
        If the endpoint cannot be reached or refuses the request.
    """
    fs, path = _filesystem(location)
    try:
        info = fs.info(path)
    except FileNotFoundError as error:
        if _is_missing(error):
            return False
        raise _access_error(location, error.__cause__ or error, doing="look up the file") from error
    except Exception as error:
        raise _access_error(location, error, doing="look up the file") from error
    return bool(info.get("type") == "file")


class RemoteReader(io.RawIOBase):
    """A file at a URL as a binary file that seeks, as h5py and the text readers take it.

    Reads go through the fsspec file ``handle`` (and its cache). ``repr`` is
    the URL, so h5py names the file by it (``h5py.File.filename``); a failed
    read raises :class:`~cytearc.errors.StoreAccessError` naming the URL,
    which h5py passes through.

    Parameters
    ----------
    location
        The URL.
    handle
        The fsspec file opened for reading.
    """

    def __init__(self, location: Location, handle: Any) -> None:  # noqa: ANN401 (an fsspec file)
        super().__init__()
        self.location = location
        self._handle = handle

    def readable(self) -> bool:
        """Always."""
        return True

    def seekable(self) -> bool:
        """Always."""
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``offset`` (from ``whence``); nothing is read."""
        return int(self._handle.seek(offset, whence))

    def tell(self) -> int:
        """The position."""
        return int(self._handle.tell())

    def readinto(self, buffer: WriteableBuffer) -> int:
        """Read up to ``len(buffer)`` bytes into ``buffer``; the count read (0 at the end)."""
        view = memoryview(buffer).cast("B")
        data = self._read(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        """The bytes from the position to the end."""
        return self._read(-1)

    def _read(self, size: int) -> bytes:
        start = self.tell()
        try:
            data: bytes = self._handle.read(size)
        except Exception as error:
            raise _access_error(self.location, error, doing=f"read from byte {start}") from error
        return data

    def close(self) -> None:
        """Close the fsspec file."""
        if not self.closed:
            try:
                self._handle.close()
            finally:
                super().close()

    def __repr__(self) -> str:
        return str(self.location)


def open_remote(location: Location, *, remedy: str, sequential: bool = False) -> RemoteReader:
    """Open the file at the URL ``location`` to be read in byte ranges, never whole.

    Parameters
    ----------
    location
        The URL.
    remedy
        What to give instead, for the message of a missing file (``"give the
        Cell Ranger .h5 matrix"``).
    sequential
        The file is read front to back (text): each request reads
        :data:`REMOTE_BLOCK_SIZE` bytes ahead. Otherwise (HDF5) each request
        is one block of :data:`REMOTE_BLOCK_SIZE` bytes and the last
        :data:`REMOTE_CACHE_BLOCKS` blocks are kept.

    Returns
    -------
    RemoteReader
        Close it when done.

    Raises
    ------
    SourceFormatError
        If no file is there.
    StoreAccessError
        If the endpoint cannot be reached or refuses the request.

    Examples
    --------
    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/doc/a.txt", b"hello")
    >>> with open_remote(source_location("memory://doc/a.txt"), remedy="give a file") as f:
    ...     f.read(), repr(f)
    (b'hello', 'memory://doc/a.txt')
    """
    fs, path = _filesystem(location)
    cache: dict[str, Any] = (
        {"cache_type": "readahead"}
        if sequential
        else {"cache_type": "blockcache", "cache_options": {"maxblocks": REMOTE_CACHE_BLOCKS}}
    )
    try:
        handle = fs.open(path, "rb", block_size=REMOTE_BLOCK_SIZE, **cache)
    except FileNotFoundError as error:
        if _is_missing(error):
            raise _missing(location, remedy) from error
        cause = error.__cause__ or error
        raise _access_error(location, cause, doing="open the file") from error
    except IsADirectoryError as error:
        raise _missing(location, remedy) from error
    except Exception as error:
        raise _access_error(location, error, doing="open the file") from error
    return RemoteReader(location, handle)


def decompressed(raw: RemoteReader, name: str) -> IO[bytes]:
    """``raw`` decompressed as the file ``name``'s suffix says (``.gz``, ``.bz2``, ``.xz``), else buffered.

    Parameters
    ----------
    raw
        The remote file.
    name
        Its name.

    Returns
    -------
    IO[bytes]
        The stream of its bytes; closing it leaves ``raw`` open.
    """
    suffix = PurePosixPath(name).suffix.lower()
    stream: io.BufferedIOBase
    if suffix == ".gz":
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    elif suffix == ".bz2":
        stream = bz2.BZ2File(raw, "rb")
    elif suffix == ".xz":
        stream = lzma.LZMAFile(cast("IO[bytes]", raw), "rb")  # noqa: SIM115 (the caller closes it)
    else:
        stream = io.BufferedReader(raw)
    return cast("IO[bytes]", stream)


class _RemoteText(io.TextIOWrapper):
    """UTF-8 text of a (decompressed) remote file; closing it closes the remote file."""

    def __init__(self, binary: IO[bytes], raw: RemoteReader) -> None:
        super().__init__(binary, encoding="utf-8")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_remote_text(location: Location, *, remedy: str) -> io.TextIOWrapper:
    """The file at the URL ``location`` as UTF-8 text, streamed front to back.

    It is decompressed as its name says (``.gz``, ``.bz2``, ``.xz``), as
    pandas infers compression for a local path.

    Parameters
    ----------
    location
        The URL.
    remedy
        What to give instead, for the message of a missing file.

    Returns
    -------
    io.TextIOWrapper
        Close it when done.

    Raises
    ------
    SourceFormatError
        If no file is there.
    StoreAccessError
        If the endpoint cannot be reached or refuses the request (also while
        it is read).
    """
    raw = open_remote(location, remedy=remedy, sequential=True)
    return _RemoteText(decompressed(raw, location.name), raw)


class RemoteFile:
    """A file at a URL opened for a reader that seeks (h5py): read in byte ranges, or downloaded first.

    Parameters
    ----------
    location
        The URL.
    download
        Copy the file whole into a temporary folder (under ``TMPDIR``) first
        and read the copy, which :meth:`close` removes. Otherwise it is read
        in ranged requests (:func:`open_remote`) and never whole.
    remedy
        What to give instead, for the message of a missing file.

    Attributes
    ----------
    file
        What to open: a :class:`RemoteReader`, or the path of the copy.

    Raises
    ------
    SourceFormatError
        If no file is there.
    StoreAccessError
        If the endpoint cannot be reached or refuses a request.
    """

    def __init__(self, location: Location, *, download: bool, remedy: str) -> None:
        self.location = location
        self._directory: Path | None = None
        self.file: RemoteReader | Path
        if not download:
            self.file = open_remote(location, remedy=remedy)
            return
        fs, path = _filesystem(location)
        self._directory = Path(tempfile.mkdtemp(prefix="cytearc-download-"))
        self.file = self._directory / (location.name or "source")
        try:
            fs.get_file(path, str(self.file))
        except BaseException as error:
            self.close()
            missing = isinstance(error, FileNotFoundError) and _is_missing(error)
            if missing or isinstance(error, IsADirectoryError):
                raise _missing(location, remedy) from error
            if isinstance(error, FileNotFoundError):
                cause = error.__cause__ or error
                raise _access_error(location, cause, doing="download the file") from error
            if isinstance(error, Exception):
                raise _access_error(location, error, doing="download the file") from error
            raise

    def close(self) -> None:
        """Close the remote file, or remove the copy."""
        if isinstance(self.file, RemoteReader):
            self.file.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
