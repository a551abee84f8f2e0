r"""Identity of count matrices: a content fingerprint that no layout, chunking or dtype width changes.

Encoding version 1 of the content fingerprint of an ``(n_rows, n_cols)``
count matrix (``counts``: cells x features):

- values are taken as ``int64`` little endian when the matrix dtype is an
  integer or bool type, else as ``float64`` little endian with ``-0.0``
  written as ``0.0`` (the *type word* ``int64`` or ``float64``);
- the rows are cut into identity blocks of :data:`IDENTITY_ROWS` rows (the
  last may be shorter); a block digest is the raw 32-byte SHA-256 of its
  values in C order (row by row, each row across all columns);
- the fingerprint is ``sha256:`` and the hex SHA-256 of the UTF-8 header
  ``"cytearc counts fingerprint 1\nshape <n_rows> <n_cols>\ntype <word>\n"``
  followed by the block digests in row order.

Write tasks own whole identity blocks (shard rows divide or are multiples of
256, see :mod:`cytearc.storage.layout`), so the digests are computed while the
counts are written and combined in order afterwards.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from cytearc.storage.layout import IDENTITY_ROWS
from cytepool.cube.encoding import canonical_layer, format_digest, layer_type_word

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy as np

__all__ = ["COUNTS_FINGERPRINT_VERSION", "block_digests", "counts_fingerprint"]

COUNTS_FINGERPRINT_VERSION: Final = 1


def block_digests(block: np.ndarray, *, first_row: int, n_rows: int) -> list[bytes]:
    """The identity-block digests of rows ``first_row`` onward held by ``block``.

    ``first_row`` must start an identity block, and ``block`` must end at a
    block boundary or at the matrix's last row ``n_rows``.

    Parameters
    ----------
    block
        Rows of the matrix, in storage dtype.
    first_row
        The matrix row ``block`` starts at.
    n_rows
        The matrix's rows.

    Returns
    -------
    list of bytes
        One raw 32-byte digest per identity block, in row order.

    Raises
    ------
    ValueError
        ``block`` does not cover whole identity blocks.
    """
    rows = block.shape[0]
    end = first_row + rows
    if first_row % IDENTITY_ROWS or (end % IDENTITY_ROWS and end != n_rows):
        msg = f"rows {first_row}:{end} do not cover whole identity blocks of {IDENTITY_ROWS} rows"
        raise ValueError(msg)
    out = []
    for start in range(0, rows, IDENTITY_ROWS):
        h = hashlib.sha256()
        for row in block[start : start + IDENTITY_ROWS]:
            h.update(canonical_layer(row).data)
        out.append(h.digest())
    return out


def counts_fingerprint(*, shape: tuple[int, int], dtype: np.dtype, digests: Iterable[bytes]) -> str:
    """Combine identity-block digests, in row order, into the content fingerprint.

    Parameters
    ----------
    shape
        The matrix's ``(n_rows, n_cols)``.
    dtype
        Its storage dtype (gives the type word).
    digests
        Every identity block's digest, in row order (:func:`block_digests`).

    Returns
    -------
    str
        ``sha256:`` and 64 hex digits.
    """
    header = (
        f"cytearc counts fingerprint {COUNTS_FINGERPRINT_VERSION}\n"
        f"shape {shape[0]} {shape[1]}\ntype {layer_type_word(dtype)}\n"
    )
    h = hashlib.sha256(header.encode())
    for digest in digests:
        h.update(digest)
    return format_digest(h)
