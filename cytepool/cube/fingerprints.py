r"""Digests and the fingerprint of a cube, encoding version 1.

The fingerprint names the values an analysis reads: the three tables, the cell
numbers, the normalization and every layer. Provenance, chunking, compression
and integer width never enter it. This docstring is the byte-by-byte
specification; ``docs/cube-format.md`` repeats it with the file layout.

Notation
--------
``u64(n)``
    ``n`` as 8 bytes, little-endian unsigned.
``str(s)``
    ``u64(len(utf8(s)))`` then ``utf8(s)``.
``i64`` / ``f64``
    8-byte little-endian two's-complement integer / IEEE 754 binary64.
digest
    ``"sha256:"`` followed by the 64 lowercase hex digits of the SHA-256 of a
    byte string.

Layer digest (one per group of each layer)
    The values of ``layer[g]``, shape ``(n_samples, n_features)``, in C order
    (sample-major), each as ``i64`` when the layer's dtype is an integer or bool
    type, else as ``f64`` with ``-0.0`` written as ``0.0``. Layers hold finite
    values only. The *type word* of the layer is ``int64`` or ``float64``
    accordingly.

Cell-number digest
    The ``(n_samples, n_groups)`` values as ``i64``, C order. ``none`` in the
    manifest when the cube has no cell numbers (a bulk cube).

Normalization digest
    The UTF-8 bytes of the RFC 8785 canonical JSON of the normalization object.
    ``none`` in the manifest when there is none.

Table digest (samples, groups, features)
    ``u64(n_rows) u64(n_columns)``, then for each column in stored order
    ``str(name) str(kind) values``. ``kind`` is ``text``, ``bool``, ``int``,
    ``float``, ``datetime64[<unit>]`` or ``timedelta64[<unit>]`` (unit ``s``,
    ``ms``, ``us`` or ``ns``). ``values`` is, row after row:

    - text: ``i64(-1)`` for a missing value, else ``i64(byte length)`` then the
      UTF-8 bytes;
    - bool: one byte, 0 or 1;
    - int: ``i64`` whatever the stored width;
    - float: ``f64`` with ``-0.0`` as ``0.0`` and every NaN as the bits
      ``0x7FF8000000000000``;
    - datetime / timedelta: ``i64`` count of the unit, NaT as ``-2**63``.

Manifest
    UTF-8 text, every line ended by ``\\n``::

        cytepool cube fingerprint 1
        shape <n_groups> <n_samples> <n_features>
        samples <digest>
        groups <digest>
        features <digest>
        n_cells <digest or none>
        normalization <digest or none>
        layer <name> <int64|float64> <group position> <digest>

    with one ``layer`` line per group of each layer, sorted by layer name (code
    point order) and then group position (0-based, decimal).

Fingerprint
    The digest of the manifest bytes.

Examples
--------
The normalization digest hashes the canonical JSON (keys sorted, no spaces):

>>> import hashlib
>>> from cytepool.cube.fingerprints import normalization_digest
>>> canonical = b'{"method":"library_size","target_sum":10000}'
>>> normalization_digest({"target_sum": 10000, "method": "library_size"}) == (
...     "sha256:" + hashlib.sha256(canonical).hexdigest()
... )
True
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from cytepool.cube.encoding import DIGEST_PATTERN, canonical_json, format_digest
from cytepool.errors import CubeFormatError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FINGERPRINT_VERSION",
    "Digests",
    "fingerprint",
    "manifest",
    "n_cells_digest",
    "normalization_digest",
    "provenance_digest",
    "sha256_digest",
]

FINGERPRINT_VERSION: Final = 1
"""Version of the byte encoding of digests and manifest."""

_TYPE_WORDS: Final = ("int64", "float64")


def sha256_digest(data: bytes | memoryview) -> str:
    """Digest of a byte string.

    Parameters
    ----------
    data
        The bytes.

    Returns
    -------
    str
        ``sha256:`` and the hex SHA-256 of ``data``.
    """
    return format_digest(hashlib.sha256(data))


def n_cells_digest(n_cells: np.ndarray) -> str:
    """Digest of the (n_samples, n_groups) cell numbers.

    Parameters
    ----------
    n_cells
        The cell numbers.

    Returns
    -------
    str
        The digest of their ``i64`` values in C order.
    """
    return sha256_digest(np.ascontiguousarray(n_cells, dtype="<i8").data)


def normalization_digest(normalization: Mapping[str, Any]) -> str:
    """Digest of the RFC 8785 canonical JSON of a normalization object.

    Parameters
    ----------
    normalization
        The cube's normalization object.

    Returns
    -------
    str
        The digest.
    """
    return sha256_digest(canonical_json(normalization, what="normalization"))


def provenance_digest(provenance: Mapping[str, Any]) -> str:
    """Digest of the RFC 8785 canonical JSON of a provenance record.

    Stored as the root attribute ``provenance_digest`` beside the provenance,
    and not part of the fingerprint: it lets a reader tell an edited record
    from the one written.

    Parameters
    ----------
    provenance
        The cube's provenance (``cytepool``, ``source``, ``operations``).

    Returns
    -------
    str
        The digest.
    """
    return sha256_digest(canonical_json(provenance, what="provenance"))


@dataclass(frozen=True, kw_only=True)
class LayerDigests:
    """The type word and per-group digests of one layer."""

    type: str
    groups: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Digests:
    """Every digest of a cube, in the form the file stores them (see :meth:`to_json`)."""

    samples: str
    groups: str
    features: str
    n_cells: str | None
    normalization: str | None
    layers: Mapping[str, LayerDigests]

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the ``digests`` attribute of a cube file.

        Returns
        -------
        dict
            ``samples``, ``groups``, ``features``, ``n_cells``,
            ``normalization`` and ``layers`` (by name, ``type`` and ``groups``).
        """
        return {
            "samples": self.samples,
            "groups": self.groups,
            "features": self.features,
            "n_cells": self.n_cells,
            "normalization": self.normalization,
            "layers": {
                name: {"type": d.type, "groups": list(d.groups)}
                for name, d in sorted(self.layers.items())
            },
        }

    @classmethod
    def from_json(cls, value: object, *, n_groups: int, where: str) -> Digests:
        """Parse the ``digests`` attribute strictly; :class:`CubeFormatError` names the key.

        Parameters
        ----------
        value
            The attribute's value.
        n_groups
            The cube's groups (each layer has one digest per group).
        where
            The file, for the message.

        Returns
        -------
        Digests
            The digests.

        Raises
        ------
        CubeFormatError
            A key is missing, unknown or not a digest.
        """

        def fail(key: str, expected: str, found: object) -> CubeFormatError:
            return CubeFormatError(
                f"{where}: attribute 'digests' key {key!r}: expected {expected}, found {found!r}; "
                "the file was not written by write_cube or was edited - write it again"
            )

        def digest(key: str, v: object, *, optional: bool = False) -> str | None:
            if v is None and optional:
                return None
            if not isinstance(v, str) or not DIGEST_PATTERN.match(v):
                raise fail(key, "'sha256:' and 64 lowercase hex digits", v)
            return v

        if not isinstance(value, dict):
            raise fail("", "a JSON object", value)
        keys = {"samples", "groups", "features", "n_cells", "normalization", "layers"}
        if set(value) != keys:
            raise fail("", f"exactly the keys {sorted(keys)}", sorted(value))
        layers_json = value["layers"]
        if not isinstance(layers_json, dict) or "counts" not in layers_json:
            raise fail("layers", "an object with at least the layer 'counts'", layers_json)
        layers: dict[str, LayerDigests] = {}
        for name, entry in layers_json.items():
            key = f"layers.{name}"
            if not isinstance(entry, dict) or set(entry) != {"type", "groups"}:
                raise fail(key, "an object with keys 'type' and 'groups'", entry)
            if entry["type"] not in _TYPE_WORDS:
                raise fail(f"{key}.type", "'int64' or 'float64'", entry["type"])
            groups = entry["groups"]
            if not isinstance(groups, list) or len(groups) != n_groups:
                raise fail(f"{key}.groups", f"a list of {n_groups} digests", groups)
            checked = tuple(str(digest(f"{key}.groups[{i}]", g)) for i, g in enumerate(groups))
            layers[name] = LayerDigests(type=entry["type"], groups=checked)
        return cls(
            samples=str(digest("samples", value["samples"])),
            groups=str(digest("groups", value["groups"])),
            features=str(digest("features", value["features"])),
            n_cells=digest("n_cells", value["n_cells"], optional=True),
            normalization=digest("normalization", value["normalization"], optional=True),
            layers=layers,
        )


def manifest(digests: Digests, *, shape: tuple[int, int, int]) -> bytes:
    """The manifest text of the fingerprint, as UTF-8 bytes.

    Parameters
    ----------
    digests
        The cube's digests.
    shape
        ``(n_groups, n_samples, n_features)``.

    Returns
    -------
    bytes
        The manifest.
    """
    n_groups, n_samples, n_features = shape
    lines = [
        f"cytepool cube fingerprint {FINGERPRINT_VERSION}",
        f"shape {n_groups} {n_samples} {n_features}",
        f"samples {digests.samples}",
        f"groups {digests.groups}",
        f"features {digests.features}",
        f"n_cells {digests.n_cells or 'none'}",
        f"normalization {digests.normalization or 'none'}",
    ]
    for name in sorted(digests.layers):
        layer = digests.layers[name]
        lines.extend(f"layer {name} {layer.type} {g} {d}" for g, d in enumerate(layer.groups))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def fingerprint(digests: Digests, *, shape: tuple[int, int, int]) -> str:
    """The fingerprint: the digest of the manifest.

    Parameters
    ----------
    digests
        The cube's digests.
    shape
        ``(n_groups, n_samples, n_features)``.

    Returns
    -------
    str
        ``sha256:`` and the hex SHA-256 of :func:`manifest`.
    """
    return sha256_digest(manifest(digests, shape=shape))
