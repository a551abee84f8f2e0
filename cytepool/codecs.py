"""The compressors CytePool and CyteArc write: gzip level 1, or zstd level 3 with its frame checksum.

The checksum makes a damaged zstd chunk fail to decode instead of decoding to
other values. Compression never changes a fingerprint: digests are of the
decoded values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from zarr.codecs import GzipCodec, ZstdCodec

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["GZIP_LEVEL", "ZSTD_LEVEL", "Compression", "compressor"]

Compression = Literal["gzip", "zstd"] | None

GZIP_LEVEL: Final = 1
ZSTD_LEVEL: Final = 3


def compressor(
    compression: str | None, *, error: Callable[[str], Exception]
) -> GzipCodec | ZstdCodec | None:
    """The Zarr codec after ``bytes`` for a compression name.

    Parameters
    ----------
    compression
        ``"gzip"``, ``"zstd"`` or None (no compressor).
    error
        Makes the exception raised for any other name from its message (the
        caller's package's error class).

    Returns
    -------
    GzipCodec, ZstdCodec or None

    Raises
    ------
    Exception
        ``error(message)``, for a name that is not one of the above.

    Examples
    --------
    >>> compressor("zstd", error=ValueError)
    ZstdCodec(level=3, checksum=True)
    >>> compressor("lz4", error=ValueError)
    Traceback (most recent call last):
    ...
    ValueError: compression: expected 'gzip', 'zstd' or None, found 'lz4'
    """
    match compression:
        case "gzip":
            return GzipCodec(level=GZIP_LEVEL)
        case "zstd":
            return ZstdCodec(level=ZSTD_LEVEL, checksum=True)
        case None:
            return None
    msg = f"compression: expected 'gzip', 'zstd' or None, found {compression!r}"
    raise error(msg)
