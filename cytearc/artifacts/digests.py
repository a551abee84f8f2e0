r"""Digests of artifact arrays, recorded at publication and recomputed by ``cytearc verify``.

Version 1 of the digest of a stored array of shape ``(d_0, ..., d_k)``:

- its chunks (its shards, for a sharded array) are taken in C order of the
  chunk grid, each clipped to the array's shape; a chunk's bytes are its
  values in C order: for numbers and bool the values in the array's dtype,
  little endian; for text the ``u64`` little-endian UTF-8 byte length of each
  value, then the UTF-8 bytes of every value, concatenated;
- a chunk digest is the raw 32-byte SHA-256 of its bytes;
- the digest is ``sha256:`` and the hex SHA-256 of the UTF-8 header
  ``"cytearc array digest 1\nshape <d_0> ... <d_k>\ndtype <word>\n"``
  (``<word>`` the little-endian NumPy type string, such as ``<f4`` or ``|b1``,
  or ``text``) followed by the chunk digests in order.

Version 1 of the attributes digest of an artifact is ``sha256:`` and the hex
SHA-256 of the UTF-8 header ``"cytearc attributes digest 1\n"`` followed by
the canonical JSON (RFC 8785) of ``{"artifact_id", "kind", "provenance"}``,
as its attributes record them.

Digests are a check that what a reader finds is what the producer wrote, not
an identity: they depend on the chunking and never enter provenance or reuse.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final, cast

import dask.array as da
import numpy as np
import rfc8785

from cytearc.storage.damage import read_region, unit_regions
from cytepool.cube.encoding import format_digest

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    import zarr

__all__ = [
    "ATTRIBUTES_DIGEST_ATTRIBUTE",
    "DIGESTS_ATTRIBUTE",
    "IDENTITY_ATTRIBUTES",
    "array_digest",
    "attributes_digest",
    "chunk_digest",
    "dtype_word",
    "lazy_chunk_digests",
    "stored_digest",
]

DIGESTS_ATTRIBUTE: Final = "cytearc:arrayDigests"
"""The artifact attribute mapping each payload array's name to its digest."""

ATTRIBUTES_DIGEST_ATTRIBUTE: Final = "cytearc:attributesDigest"
"""The artifact attribute holding the digest of its identity attributes."""

IDENTITY_ATTRIBUTES: Final = ("artifact_id", "kind", "provenance")
"""The attributes an artifact is found and reused by, which its attributes digest covers."""

ARRAY_DIGEST_VERSION: Final = 1
ATTRIBUTES_DIGEST_VERSION: Final = 1


def dtype_word(dtype: np.dtype | Any) -> str:  # noqa: ANN401 (zarr's string dtypes are not np.dtype)
    """The ``dtype`` word of the digest header: ``text``, or the little-endian type string.

    Parameters
    ----------
    dtype
        The array's dtype.

    Returns
    -------
    str
        For example ``<f4``, ``|b1`` or ``text``.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "OUT":
        return "text"
    return dtype.newbyteorder("<").str


def chunk_digest(block: np.ndarray) -> bytes:
    """The raw SHA-256 of one chunk's values (see the module docstring).

    Parameters
    ----------
    block
        The chunk's values.

    Returns
    -------
    bytes
        32 bytes.
    """
    h = hashlib.sha256()
    if dtype_word(block.dtype) == "text":
        encoded = [str(v).encode("utf-8") for v in np.asarray(block).ravel()]
        h.update(np.array([len(e) for e in encoded], dtype="<u8").tobytes())
        for e in encoded:
            h.update(e)
    else:
        h.update(np.ascontiguousarray(block, dtype=block.dtype.newbyteorder("<")).tobytes())
    return h.digest()


def array_digest(*, shape: tuple[int, ...], dtype: np.dtype | Any, chunks: Iterable[bytes]) -> str:  # noqa: ANN401
    """Combine the chunk digests of an array, in C order of its chunk grid, into its digest.

    Parameters
    ----------
    shape
        The array's shape.
    dtype
        Its dtype.
    chunks
        Every chunk's :func:`chunk_digest`, in order.

    Returns
    -------
    str
        ``sha256:`` and 64 hex digits.
    """
    header = (
        f"cytearc array digest {ARRAY_DIGEST_VERSION}\n"
        f"shape {' '.join(str(n) for n in shape)}\ndtype {dtype_word(dtype)}\n"
    )
    h = hashlib.sha256(header.encode("utf-8"))
    for digest in chunks:
        h.update(digest)
    return format_digest(h)


def attributes_digest(attrs: Mapping[str, Any]) -> str:
    """The digest of an artifact's identity attributes (see the module docstring).

    Parameters
    ----------
    attrs
        The artifact's attributes; only :data:`IDENTITY_ATTRIBUTES` are read.

    Returns
    -------
    str
        ``sha256:`` and 64 hex digits.

    Raises
    ------
    rfc8785.CanonicalizationError
        An attribute holds a value RFC 8785 cannot write (NaN, infinity, an
        integer beyond 2**53), which no published artifact records.

    Examples
    --------
    >>> attrs = {"artifact_id": "ab" * 32, "kind": "pca", "provenance": {"operation": "pca"}}
    >>> attributes_digest(attrs) == attributes_digest({**attrs, "complete": True})
    True
    >>> attributes_digest(attrs) == attributes_digest({**attrs, "kind": "umap"})
    False
    """
    h = hashlib.sha256(f"cytearc attributes digest {ATTRIBUTES_DIGEST_VERSION}\n".encode())
    h.update(rfc8785.dumps({k: attrs.get(k) for k in IDENTITY_ATTRIBUTES}))
    return format_digest(h)


def stored_digest(array: zarr.Array[Any]) -> str:
    """The digest of a stored array, read chunk by chunk in this process.

    Parameters
    ----------
    array
        The array.

    Returns
    -------
    str
        Its digest.

    Raises
    ------
    StoreDamageError
        A chunk fails to decode.
    """
    return array_digest(
        shape=tuple(array.shape),
        dtype=array.dtype,
        chunks=(chunk_digest(read_region(array, region)) for _, region in unit_regions(array)),
    )


def _block_digest(block: np.ndarray) -> np.ndarray:
    out = np.empty((1,) * block.ndim, dtype=object)
    out[(0,) * block.ndim] = chunk_digest(block) if block.size else b""
    return out


def lazy_chunk_digests(x: da.Array) -> da.Array:
    """The chunk digests of ``x`` as it will be stored (its blocks being the chunks), lazily.

    Computed in one graph with the write of ``x``, each block is hashed from
    the values the write stores, with no second read.

    Parameters
    ----------
    x
        The values, in blocks equal to the stored chunks.

    Returns
    -------
    dask.array.Array
        An object array with one element per block: its 32-byte digest
        (empty bytes for an empty block, which no chunk holds).
    """
    return cast(
        "da.Array",
        da.map_blocks(
            _block_digest,
            x,
            dtype=object,
            chunks=tuple((1,) * len(c) for c in x.chunks),
            meta=np.empty((0,) * x.ndim, dtype=object),
        ),
    )
