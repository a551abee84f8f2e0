"""The one way CyteArc warns: :func:`cytepool._warnings.warn_user`, shared with CytePool."""

from cytepool._warnings import warn_user

__all__ = ["warn_user"]
