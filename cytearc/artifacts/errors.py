"""Exceptions of artifact publication, lookup and reuse."""

from __future__ import annotations

from cytearc.errors import CyteArcError

__all__ = [
    "ArtifactError",
    "IncompleteArtifactError",
    "MissingArtifactError",
    "StaleSelectionError",
]


class ArtifactError(CyteArcError):
    """An artifact group or reference is malformed."""


class MissingArtifactError(ArtifactError, KeyError):
    """No artifact group at a reference's path."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class IncompleteArtifactError(ArtifactError):
    """An artifact was never published (``complete`` is not True): it is never read or reused."""


class StaleSelectionError(ArtifactError):
    """A stored cell or feature selection was made for other row identities."""
