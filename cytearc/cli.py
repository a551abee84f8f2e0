"""The ``cytearc`` command line."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cytearc import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="cytearc", description="CyteArc: single-cell datasets in Zarr v3 stores."
    )
    parser.add_argument("--version", action="version", version=f"cytearc {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0
