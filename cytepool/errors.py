"""Exceptions raised by CytePool.

Every error subclasses :class:`CytePoolError`, itself a :class:`ValueError`:
errors of cubes subclass :class:`CubeError`, errors of differential expression
:class:`LimmaError`. Some also subclass the builtin they refine
(:class:`FileExistsError`, :class:`FileNotFoundError`), so callers that catch
the builtin keep working. Messages name the file, the array or attribute, what
was expected, what was found and what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

__all__ = [
    "ChainVerificationError",
    "ClusterConnectError",
    "ClusterLostError",
    "ContrastFormatError",
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
]


class CytePoolError(ValueError):
    """Base class of every CytePool error: catch it to catch them all."""


class ClusterConnectError(CytePoolError, ConnectionError):
    """No Dask scheduler answers at the address, or the scheduler file given does not exist."""


class ClusterLostError(CytePoolError, ConnectionError):
    """The Dask scheduler was lost while a computation ran; what the computation wrote is not published."""


class CubeError(CytePoolError):
    """Base class of every CytePool cube error."""


class CubeShapeError(CubeError):
    """A layer, table or cell-number array does not have the shape the cube needs."""


class CubeTableError(CubeError):
    """A sample, group or feature table cannot be stored as a cube table."""


class CubeValueError(CubeError):
    """A value given to a cube is of the wrong type or outside its domain."""


class NegativeValueError(CubeValueError):
    """A count-like layer or the cell numbers hold a negative value."""


class NonFiniteValueError(CubeValueError):
    """A layer holds NaN or infinity."""


class CubeFormatError(CubeError):
    """A file is not a cube of a format this version reads, or a known attribute is malformed."""


class CubeMetadataError(CubeFormatError):
    """An array of a cube file has metadata (shape, dtype, chunks, codecs, names) it should not."""


class CubeDigestError(CubeError):
    """Stored values do not match their stored digest: the file was changed or damaged."""


class CubeReadError(CubeError):
    """A chunk of a cube file could not be read or decoded."""


class FingerprintMismatchError(CubeDigestError):
    """A recomputed digest or fingerprint differs from the one expected."""


class ChainVerificationError(CubeError):
    """A provenance chain could not be replayed to the cube it describes."""


class CubeExistsError(CubeError, FileExistsError):
    """The target of a write exists and may not be replaced."""


class CubeNotFoundError(CubeError, FileNotFoundError):
    """There is no cube at the given path."""


class LimmaError(CytePoolError):
    """Base class of the errors of differential expression (:mod:`cytepool.de`)."""


class DesignError(LimmaError):
    """A design, coefficient or contrast cannot be fitted to the samples given."""


class GroupSkippedError(LimmaError):
    """A cube group has too few usable samples to fit its design; the message says why.

    Parameters
    ----------
    message
        The message, naming the group.
    reason
        Why, without the group's name; the message if not given.

    Attributes
    ----------
    reason
        Why, without the group's name (as :attr:`LimmaResults.skipped
        <cytepool.de.LimmaResults.skipped>` records it); the message if not given.
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason: str = message if reason is None else reason


class NoGroupFittedError(GroupSkippedError):
    """No group of a cube could be fitted; the message lists each group and why it was skipped.

    Parameters
    ----------
    message
        The message.
    skipped
        Group label to the reason it was skipped.

    Attributes
    ----------
    skipped
        Group label to the reason it was skipped, in cube group order.
    """

    def __init__(self, message: str, *, skipped: Mapping[Hashable, str] | None = None) -> None:
        super().__init__(message)
        self.skipped: dict[Hashable, str] = dict(skipped or {})


class ContrastFormatError(DesignError):
    """A contrast written as JSON weights (``cytepool de --contrast``) does not parse or is not weights."""


class ResultMismatchError(LimmaError):
    """A differential expression result was not computed from the cube it is checked against."""


class ResultExistsError(LimmaError, FileExistsError):
    """A directory already holds saved differential expression results that may not be replaced."""


class ResultFormatError(LimmaError):
    """A saved differential expression result cannot be read: missing, edited or of another version."""
