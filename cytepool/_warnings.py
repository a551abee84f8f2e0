"""The one way CytePool and CyteArc warn: pointed at the first line of the caller's code."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["warn_user"]

_PACKAGE_ROOTS = (
    str(Path(__file__).resolve().parent),
    str(Path(__file__).resolve().parent.parent / "cytearc"),
)


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Emit ``message`` attributed to the first stack frame outside CytePool and CyteArc (as xarray's).

    Parameters
    ----------
    message
        The warning's text.
    category
        The warning's class.
    """
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_ROOTS):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)  # noqa: TID251 (the helper itself)
