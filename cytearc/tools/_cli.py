"""What the command lines of the store writers share: options, the printed result, errors."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from cytearc.storage.store import Store

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

__all__ = ["add_writer_options", "main", "report_store"]


def add_writer_options(parser: argparse.ArgumentParser) -> None:
    """``--overwrite``, the engine's ``--mem-budget``, ``--workers``, ``--cluster``, and ``--json``.

    Parameters
    ----------
    parser
        The command's parser.
    """
    parser.add_argument("--overwrite", action="store_true", help="replace an unprepared store")
    parser.add_argument("--mem-budget", default=None, help="worker memory in all, e.g. 4G")
    parser.add_argument(
        "--workers",
        default=None,
        help="worker processes of one thread each, or PxT: P processes of T threads "
        "(default: a task per core, two threads per process)",
    )
    parser.add_argument("--cluster", default=None, help="a scheduler address, or 'threads'")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def report_store(path: Path | str, *, as_json: bool, done: str) -> int:
    """Print the written store (its cells, assays and dataset fingerprint); return 0.

    Parameters
    ----------
    path
        The store written.
    as_json
        Print JSON instead of one line.
    done
        The line's verb and object, e.g. ``"merged into"``.

    Returns
    -------
    int
        0.
    """
    store = Store(path, show_progress=False)
    doc = {
        "path": str(path),
        "cells": store.cells.n_rows,
        "assays": {name: list(assay.shape) for name, assay in store.assays.items()},
        "datasetFingerprint": store.dataset_fingerprint,
    }
    print(json.dumps(doc, indent=2) if as_json else f"{done} {path}: {doc['cells']} cells")
    return 0


def main(
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
) -> int:
    """Parse ``argv`` and run the command: exit 0, 1 with one line naming the error, 2 on usage errors.

    Parameters
    ----------
    argv
        The arguments (default ``sys.argv[1:]``).
    prog
        The command's name, for its usage.
    description
        What it does.
    add_arguments
        Adds its arguments and sets ``run``.

    Returns
    -------
    int
        The exit code.
    """
    from cytearc.cli import report_errors  # noqa: PLC0415 (the CLI imports the tools)

    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return report_errors(lambda: int(args.run(args)), debug=False)
