"""The compressors CytePool and CyteArc write: gzip level 1, zstd level 3 with its frame checksum, or LZ4.

The checksum makes a damaged zstd chunk fail to decode instead of decoding to
other values. ``"lz4"`` is Blosc with LZ4HC at level 3 and byte shuffle, for
count matrices read again and again (it decodes about three times as fast as
zstd, for half as much again of stored bytes); it has no checksum of its own,
so CyteArc follows it with ``crc32c``. Cubes are written with gzip, zstd or
nothing (:data:`CUBE_COMPRESSIONS`). Compression never changes a
fingerprint: digests are of the decoded values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "COMPRESSIONS",
    "CUBE_COMPRESSIONS",
    "GZIP_LEVEL",
    "LZ4_LEVEL",
    "ZSTD_LEVEL",
    "Compression",
    "CubeCompression",
    "compressor",
]

Compression = Literal["gzip", "zstd", "lz4"] | None
CubeCompression = Literal["gzip", "zstd"] | None

COMPRESSIONS: Final[tuple[str | None, ...]] = ("gzip", "zstd", "lz4", None)
"""Every compression name :func:`compressor` knows."""

CUBE_COMPRESSIONS: Final[tuple[str | None, ...]] = ("gzip", "zstd", None)
"""The compressions of a cube's arrays (the cube format's own list)."""

GZIP_LEVEL: Final = 1
ZSTD_LEVEL: Final = 3
LZ4_LEVEL: Final = 3
"""Blosc's level for LZ4HC: higher levels write much more slowly for little gain in size or speed."""


def compressor(
    compression: str | None,
    *,
    error: Callable[[str], Exception],
    choices: tuple[str | None, ...] = COMPRESSIONS,
) -> GzipCodec | ZstdCodec | BloscCodec | None:
    """The Zarr codec after ``bytes`` for a compression name.

    Parameters
    ----------
    compression
        ``"gzip"``, ``"zstd"``, ``"lz4"`` or None (no compressor).
    error
        Makes the exception raised for any other name from its message (the
        caller's package's error class).
    choices
        The names accepted (a cube takes :data:`CUBE_COMPRESSIONS`).

    Returns
    -------
    GzipCodec, ZstdCodec, BloscCodec or None

    Raises
    ------
    Exception
        ``error(message)``, for a name that is not one of the above.

    Examples
    --------
    >>> compressor("zstd", error=ValueError)
    ZstdCodec(level=3, checksum=True)
    >>> compressor("lz4", error=ValueError).cname.value
    'lz4hc'
    >>> compressor("lz4", error=ValueError, choices=CUBE_COMPRESSIONS)
    Traceback (most recent call last):
    ...
    ValueError: compression: expected 'gzip', 'zstd' or None, found 'lz4'
    """
    if compression in choices:
        match compression:
            case "gzip":
                return GzipCodec(level=GZIP_LEVEL)
            case "zstd":
                return ZstdCodec(level=ZSTD_LEVEL, checksum=True)
            case "lz4":
                return BloscCodec(cname="lz4hc", clevel=LZ4_LEVEL, shuffle="shuffle")
            case None:
                return None
    names = ", ".join(repr(c) for c in choices if c is not None)
    msg = f"compression: expected {names} or None, found {compression!r}"
    raise error(msg)
