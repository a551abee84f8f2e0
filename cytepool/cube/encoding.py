"""Byte-level building blocks of digests (see :mod:`cytepool.cube.fingerprints`)."""

from __future__ import annotations

import hashlib
import re
import struct
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import rfc8785

from cytepool.errors import CubeValueError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DIGEST_PATTERN",
    "canonical_float64",
    "canonical_json",
    "canonical_layer",
    "format_digest",
    "hash_rows",
    "layer_type_word",
    "u64",
    "utf8_str",
]

DIGEST_PATTERN: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
_CANONICAL_NAN: Final = np.uint64(0x7FF8000000000000)


def u64(n: int) -> bytes:
    """Eight bytes, little-endian unsigned.

    Parameters
    ----------
    n
        A non-negative integer below 2**64.

    Returns
    -------
    bytes
        ``struct.pack("<Q", n)``.
    """
    return struct.pack("<Q", n)


def utf8_str(s: str) -> bytes:
    """``u64(len(utf8(s))) utf8(s)``.

    Parameters
    ----------
    s
        The text.

    Returns
    -------
    bytes
        Its length-prefixed UTF-8 bytes.
    """
    b = s.encode("utf-8")
    return u64(len(b)) + b


def format_digest(h: hashlib._Hash) -> str:
    """``sha256:`` and the 64 lowercase hex digits of a finished SHA-256.

    Parameters
    ----------
    h
        The hash object.

    Returns
    -------
    str
        The digest text.
    """
    return "sha256:" + h.hexdigest()


def canonical_float64(values: np.ndarray, *, nan: bool = False) -> np.ndarray:
    """C-ordered little-endian float64 copy with -0.0 as 0.0 (and NaN as 0x7FF8..., if asked).

    Parameters
    ----------
    values
        Any real values.
    nan
        Write every NaN as the bits ``0x7FF8000000000000``.

    Returns
    -------
    numpy.ndarray
        The canonical copy.
    """
    out: np.ndarray = np.add(values, 0.0, dtype="<f8", order="C", casting="unsafe")
    if nan:
        bits = out.view("<u8")
        bits[np.isnan(out)] = _CANONICAL_NAN
    return out


def layer_type_word(dtype: np.dtype) -> str:
    """``int64`` for integer and bool layers, ``float64`` for float layers.

    Parameters
    ----------
    dtype
        The layer's data type.

    Returns
    -------
    str
        The type word of the fingerprint manifest.
    """
    return "float64" if dtype.kind == "f" else "int64"


def canonical_layer(block: np.ndarray) -> np.ndarray:
    """A layer block as its digest bytes: int64 or float64 little endian, C order.

    Parameters
    ----------
    block
        Values of a layer.

    Returns
    -------
    numpy.ndarray
        The canonical array (``block`` itself when it is already int64 and C-ordered).
    """
    if block.dtype.kind == "f":
        return canonical_float64(block)
    if block.dtype == np.dtype("<i8") and block.flags.c_contiguous:
        return block
    return np.ascontiguousarray(block, dtype="<i8")


_HASH_PIECE_BYTES: Final = 1 << 18


def hash_rows(blocks: Sequence[np.ndarray]) -> str:
    """Digest of one group of a layer from its feature blocks, each (n_samples, n_features_j).

    The bytes are the group's (n_samples, n_features) values in C order: for each
    sample, its row across the blocks in feature order. Rows are converted in
    pieces of about 256 KiB, hashed while they are still in cache.

    Parameters
    ----------
    blocks
        The group's feature blocks, in feature order.

    Returns
    -------
    str
        The group's digest.
    """
    h = hashlib.sha256()
    if not blocks:
        return format_digest(h)
    n_samples = blocks[0].shape[0]
    if len(blocks) == 1:
        block = blocks[0]
        step = max(1, _HASH_PIECE_BYTES // max(8 * block.shape[1], 1))
        for start in range(0, n_samples, step):
            h.update(canonical_layer(block[start : start + step]).data)
    else:
        for s in range(n_samples):
            for block in blocks:
                h.update(canonical_layer(block[s]).data)
    return format_digest(h)


def canonical_json(value: Any, *, what: str) -> bytes:  # noqa: ANN401 (any JSON value)
    """RFC 8785 canonical JSON bytes of ``value``; :class:`CubeValueError` if it is not JSON.

    Parameters
    ----------
    value
        A JSON value.
    what
        What it is, for the message.

    Returns
    -------
    bytes
        The canonical serialization.

    Raises
    ------
    CubeValueError
        ``value`` is not a JSON value RFC 8785 can canonicalize.
    """
    try:
        return bytes(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        msg = (
            f"{what} must be a JSON value (dict, list, str, finite number, bool or None) "
            f"that RFC 8785 can canonicalize: {exc}"
        )
        raise CubeValueError(msg) from exc
