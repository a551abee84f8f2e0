"""CytePool: pseudobulk cubes of single-cell data, identified by fingerprint, with provenance.

A :class:`Cube` holds, for every (group, sample) pair, sums over its cells per
feature. :func:`write_cube` stores it as a Zarr v3 directory any Zarr reader
opens; :func:`read_cube` opens one strictly.
"""

from typing import TYPE_CHECKING, Final

from cytepool import errors
from cytepool._lazy import lazy_exports
from cytepool._versions import package_version
from cytepool.errors import (
    ChainVerificationError,
    ContrastFormatError,
    CubeDigestError,
    CubeError,
    CubeExistsError,
    CubeFormatError,
    CubeMetadataError,
    CubeNotFoundError,
    CubeReadError,
    CubeShapeError,
    CubeTableError,
    CubeValueError,
    CytePoolError,
    DesignError,
    FingerprintMismatchError,
    GroupSkippedError,
    LimmaError,
    NegativeValueError,
    NoGroupFittedError,
    NonFiniteValueError,
    ResultExistsError,
    ResultFormatError,
    ResultMismatchError,
)

__version__ = package_version("cytepool")

_EXPORTS: Final = {
    "FINGERPRINT_VERSION": "cytepool.cube",
    "FORMAT": "cytepool.cube",
    "FORMAT_VERSION": "cytepool.cube",
    "KNOWN_LAYERS": "cytepool.cube",
    "Cube": "cytepool.cube",
    "describe_provenance": "cytepool.cube",
    "is_cube": "cytepool.cube",
    "read_cube": "cytepool.cube",
    "verify_chain": "cytepool.cube",
    "write_cube": "cytepool.cube",
    "limma_voom": "cytepool.de",
    "limma_voom_result": "cytepool.de",
    "run_limma_voom": "cytepool.de",
}
"""The public API that importing ``cytepool`` does not load until it is used (:func:`~cytepool._lazy.lazy_exports`)."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from cytepool.cube import (
        FINGERPRINT_VERSION,
        FORMAT,
        FORMAT_VERSION,
        KNOWN_LAYERS,
        Cube,
        describe_provenance,
        is_cube,
        read_cube,
        verify_chain,
        write_cube,
    )
    from cytepool.de import limma_voom, limma_voom_result, run_limma_voom

__all__ = [
    "FINGERPRINT_VERSION",
    "FORMAT",
    "FORMAT_VERSION",
    "KNOWN_LAYERS",
    "ChainVerificationError",
    "ContrastFormatError",
    "Cube",
    "CubeDigestError",
    "CubeError",
    "CubeExistsError",
    "CubeFormatError",
    "CubeMetadataError",
    "CubeNotFoundError",
    "CubeReadError",
    "CubeShapeError",
    "CubeTableError",
    "CubeValueError",
    "CytePoolError",
    "DesignError",
    "FingerprintMismatchError",
    "GroupSkippedError",
    "LimmaError",
    "NegativeValueError",
    "NoGroupFittedError",
    "NonFiniteValueError",
    "ResultExistsError",
    "ResultFormatError",
    "ResultMismatchError",
    "__version__",
    "describe_provenance",
    "errors",
    "is_cube",
    "limma_voom",
    "limma_voom_result",
    "read_cube",
    "run_limma_voom",
    "verify_chain",
    "write_cube",
]
