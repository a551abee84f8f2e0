"""The tutorials in notebooks/ run from top to bottom without an error or a warning."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    """Every cell executes (in a temporary folder) and no cell prints a warning of ours.

    Third-party import-time warnings (tqdm without ipywidgets) come from
    ``site-packages`` and are left to those packages.
    """
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("name") == "stderr":
                ours = [
                    line
                    for line in output.get("text", "").splitlines()
                    if "Warning" in line and "site-packages" not in line
                ]
                assert not ours, output["text"]


def test_notebooks_exist() -> None:
    """The tutorial is there to run."""
    assert [p.name for p in NOTEBOOKS] == ["tutorial.ipynb"]
