"""Reading source files so that a damaged file is named, not reported by a codec deep in a stack.

Text tables (Matrix Market, TSV, CSV) may be compressed: a truncated or
corrupt stream surfaces from :mod:`gzip`, :mod:`zlib`, :mod:`bz2` or
:mod:`lzma` as :class:`EOFError`, ``BadGzipFile`` ("CRC check failed") or a
codec error, with no file named. HDF5 files surface an unreadable chunk from
h5py as an :class:`OSError` ("Can't synchronously read data") naming neither
the file nor the dataset. The readers catch these where they read and raise
:class:`~cytearc.errors.DamagedSourceError` from :func:`damaged_text` or
:func:`read_dataset`, naming the file, the line or dataset, and the remedy.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

import numpy as np

from cytearc.errors import DamagedSourceError

if TYPE_CHECKING:
    import os

    import h5py

__all__ = [
    "DECOMPRESSION_ERRORS",
    "damaged_text",
    "open_text",
    "read_dataset",
]

DECOMPRESSION_ERRORS: Final = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
"""What the standard library's codecs raise for truncated or corrupt compressed data."""

_CODECS: Final[dict[str, type[gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile]]] = {
    ".gz": gzip.GzipFile,
    ".bz2": bz2.BZ2File,
    ".xz": lzma.LZMAFile,
}


def open_text(path: Path) -> IO[str]:
    """``path`` as UTF-8 text, decompressed when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _lines_before_damage(path: Path) -> int | None:
    """How many whole lines decompress before the stream fails, or None for a format not read here."""
    codec = _CODECS.get(path.suffix.lower())
    if codec is None:
        return None
    lines = 0
    try:
        with codec(path, "rb") as handle:
            for _ in handle:
                lines += 1
    except (*DECOMPRESSION_ERRORS, OSError):
        return lines
    return None


def damaged_text(path: str | os.PathLike[str], error: BaseException) -> DamagedSourceError:
    r"""The error to raise for compressed text whose stream failed with ``error`` while it was read.

    The file is decompressed again, line by line, to name the last whole line
    before the damage (only on this error path).

    Parameters
    ----------
    path
        The compressed file.
    error
        What the codec raised.

    Returns
    -------
    DamagedSourceError
        Naming the file, the line and the remedy; raise it ``from error``.

    Examples
    --------
    >>> import gzip, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = pathlib.Path(d) / "t.csv.gz"
    ...     _ = path.write_bytes(gzip.compress(b"a,b\n1,2\n" * 1000)[:-20])
    ...     print(damaged_text(path, EOFError("Compressed file ended")).args[0].replace(d, "<d>"))  # doctest: +ELLIPSIS
    <d>/t.csv.gz: the compressed data is damaged after line ... (EOFError: Compressed file ended); the file is truncated or corrupt - copy or download it again (gzip -t checks a .gz file)
    """
    where = Path(path)
    lines = _lines_before_damage(where)
    position = "" if lines is None else f" after line {lines}"
    msg = (
        f"{where}: the compressed data is damaged{position} ({type(error).__name__}: {error}); "
        "the file is truncated or corrupt - copy or download it again (gzip -t checks a .gz file)"
    )
    return DamagedSourceError(msg)


def _selection_text(selection: slice | tuple[()]) -> str:
    if isinstance(selection, slice):
        return f"[{'' if selection.start is None else selection.start}:{'' if selection.stop is None else selection.stop}]"
    return ""


def read_dataset(
    dataset: h5py.Dataset, selection: slice | tuple[()] = (), *, strings: bool = False
) -> np.ndarray:
    """``dataset[selection]`` (UTF-8 strings as objects when ``strings``), naming a damaged file.

    Parameters
    ----------
    dataset
        An HDF5 dataset.
    selection
        A slice of its first axis, or ``()`` for all of it.
    strings
        Decode stored strings to Python ``str``.

    Returns
    -------
    numpy.ndarray
        The values read.

    Raises
    ------
    DamagedSourceError
        If HDF5 cannot read the values (a corrupt or missing chunk, a
        truncated file), naming the file, the dataset and the range.
    """
    try:
        if strings:
            return np.asarray(dataset.asstr()[selection], dtype=object)
        return np.asarray(dataset[selection])
    except OSError as error:
        msg = (
            f"{dataset.file.filename}: dataset {dataset.name}{_selection_text(selection)} cannot be read "
            f"({error}); the file is damaged - copy or download it again"
        )
        raise DamagedSourceError(msg) from error
