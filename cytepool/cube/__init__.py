"""Cubes: pooled counts per group and sample, their files, fingerprints and provenance."""

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
