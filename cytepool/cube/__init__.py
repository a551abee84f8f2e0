"""Cubes: pooled counts per group and sample, their files, fingerprints and provenance.

The public API is imported on first use (:func:`~cytepool._lazy.lazy_exports`):
a process that runs pooling's tasks or computes a store's fingerprints
(:mod:`cytepool.cube.encoding`) loads those modules only, not the cube's
tables and with them pandas.
"""

from typing import TYPE_CHECKING, Final

from cytepool._lazy import lazy_exports

_EXPORTS: Final = {
    "FINGERPRINT_VERSION": "cytepool.cube.fingerprints",
    "FORMAT": "cytepool.cube.file_format",
    "FORMAT_VERSION": "cytepool.cube.file_format",
    "KNOWN_LAYERS": "cytepool.cube.cube",
    "Cube": "cytepool.cube.cube",
    "describe_provenance": "cytepool.cube.provenance",
    "is_cube": "cytepool.cube.writer",
    "read_cube": "cytepool.cube.reader",
    "verify_chain": "cytepool.cube.provenance",
    "write_cube": "cytepool.cube.writer",
}
"""The public API, imported on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from cytepool.cube.cube import KNOWN_LAYERS, Cube
    from cytepool.cube.file_format import FORMAT, FORMAT_VERSION
    from cytepool.cube.fingerprints import FINGERPRINT_VERSION
    from cytepool.cube.provenance import describe_provenance, verify_chain
    from cytepool.cube.reader import read_cube
    from cytepool.cube.writer import is_cube, write_cube

__all__ = [
    "FINGERPRINT_VERSION",
    "FORMAT",
    "FORMAT_VERSION",
    "KNOWN_LAYERS",
    "Cube",
    "describe_provenance",
    "is_cube",
    "read_cube",
    "verify_chain",
    "write_cube",
]
