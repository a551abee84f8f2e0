"""The on-disk layout of a cube file, format ``cytepool.cube`` version 1.

Shared by the writer and the strict reader, so that what one writes is what
the other demands. ``docs/cube-format.md`` describes it for other programs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from zarr.codecs import BytesCodec, GzipCodec, ZstdCodec
from zarr.codecs.bytes import Endian
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.metadata.v3 import ArrayV3Metadata

from cytepool.cube.tasks import LAYER_CHUNK_FEATURES
from cytepool.errors import CubeMetadataError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import zarr

__all__ = [
    "DIMENSIONS",
    "FORMAT",
    "FORMAT_VERSION",
    "ROOT_ATTRIBUTES",
    "column_array_names",
    "validate_array",
]

FORMAT: Final = "cytepool.cube"
FORMAT_VERSION: Final = 1

DIMENSIONS: Final = {"samples": "sample", "groups": "group", "features": "feature"}
"""Dimension name of each table axis; layers are ``(group, sample, feature)``."""

ROOT_ATTRIBUTES: Final = (
    "format",
    "format_version",
    "fingerprint_version",
    "shape",
    "columns",
    "arrays",
    "normalization",
    "digests",
    "fingerprint",
    "provenance",
)
"""The attributes of the root group that CytePool writes and reads; others are ignored."""

_SAFE_NAME: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


def column_array_names(names: Sequence[str]) -> list[str]:
    """Array names of table columns: the column name where it is a safe node name, else ``column-<i>``.

    Names are unique even on a case-insensitive filesystem.

    Parameters
    ----------
    names
        The table's column names, in order.

    Returns
    -------
    list of str
        One array name per column.
    """
    taken: set[str] = set()
    out = []
    for i, name in enumerate(names):
        candidate = name if _SAFE_NAME.match(name) and not name.startswith("__") else f"column-{i}"
        while candidate.casefold() in taken:
            candidate = f"column-{i}-{len(taken)}"
        taken.add(candidate.casefold())
        out.append(candidate)
    return out


def _codecs_ok(meta: ArrayV3Metadata, itemsize: int) -> bool:
    """``bytes`` (little endian; no endianness for one-byte types) then at most one compressor."""
    codecs = meta.codecs
    if not codecs or not isinstance(codecs[0], BytesCodec):
        return False
    if codecs[0].endian not in ((None, Endian.little) if itemsize == 1 else (Endian.little,)):
        return False
    rest = codecs[1:]
    return len(rest) == 0 or (len(rest) == 1 and isinstance(rest[0], GzipCodec | ZstdCodec))


def validate_array(
    array: zarr.Array[Any],
    *,
    where: str,
    shape: tuple[int, ...],
    chunks: Callable[[tuple[int, ...]], bool],
    chunks_expected: str,
    dtype: Callable[[np.dtype[Any]], bool],
    dtype_expected: str,
    dimension_names: tuple[str, ...],
) -> None:
    """Raise :class:`CubeMetadataError` naming the first metadata field that is not as expected.

    Parameters
    ----------
    array
        The array to check.
    where
        Its path, for the message.
    shape
        The shape it must have.
    chunks
        Whether a chunk shape is allowed.
    chunks_expected
        The chunk rule, for the message.
    dtype
        Whether a data type is allowed.
    dtype_expected
        The data type rule, for the message.
    dimension_names
        The dimension names it must have.

    Raises
    ------
    CubeMetadataError
        The format, shape, data type, chunks, fill value, codecs, dimension
        names, chunk key encoding or storage transformers are not the format's.
    """
    meta = array.metadata

    def fail(field: str, expected: object, found: object) -> CubeMetadataError:
        return CubeMetadataError(
            f"{where}: {field}: expected {expected}, found {found}; the file was not written by "
            "write_cube or was changed - write it again from its source"
        )

    if not isinstance(meta, ArrayV3Metadata):
        raise fail("zarr_format", 3, meta.zarr_format)
    if tuple(array.shape) != shape:
        raise fail("shape", shape, tuple(array.shape))
    if not dtype(np.dtype(array.dtype)):
        raise fail("data_type", dtype_expected, array.dtype)
    if array.shards is not None or not chunks(tuple(array.chunks)):
        raise fail("chunk shape", chunks_expected, array.shards or array.chunks)
    if not bool(np.asarray(meta.fill_value) == 0):
        raise fail("fill_value", 0, meta.fill_value)
    if not _codecs_ok(meta, np.dtype(array.dtype).itemsize):
        raise fail(
            "codecs",
            "bytes (little endian) then gzip, zstd or nothing",
            list(meta.codecs),
        )
    if tuple(meta.dimension_names or ()) != dimension_names:
        raise fail("dimension_names", list(dimension_names), meta.dimension_names)
    key_encoding = meta.chunk_key_encoding
    if not isinstance(key_encoding, DefaultChunkKeyEncoding) or key_encoding.separator != "/":
        raise fail("chunk_key_encoding", "default with separator '/'", key_encoding)
    if getattr(meta, "storage_transformers", ()):
        raise fail("storage_transformers", "none", meta.storage_transformers)


def layer_chunks_ok(n_samples: int) -> Callable[[tuple[int, ...]], bool]:
    """Chunk rule of layers: one group, every sample, 1 to 4,096 features.

    Parameters
    ----------
    n_samples
        The cube's samples.

    Returns
    -------
    callable
        Whether a chunk shape follows the rule.
    """

    def ok(chunks: tuple[int, ...]) -> bool:
        return (
            len(chunks) == 3
            and chunks[0] == 1
            and chunks[1] == max(n_samples, 1)
            and 1 <= chunks[2] <= LAYER_CHUNK_FEATURES
        )

    return ok
