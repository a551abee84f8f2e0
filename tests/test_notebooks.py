"""The notebooks in notebooks/ run from top to bottom, on a cluster of separate processes, without a warning.

Both run with ``CYTEARC_CLUSTER`` naming a scheduler and two ``dask worker``
processes on 127.0.0.1, as a facility's cluster; ``cluster.ipynb`` also
keeps its store on the session's S3 server (moto).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
import pytest
from nbclient import NotebookClient

from cytepool.testing import scheduler_processes

if TYPE_CHECKING:
    from collections.abc import Iterator

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3_options: dict[str, Any]) -> Iterator[str]:
    """A scheduler and two workers, each a process, with the S3 server's credentials."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_options["key"],
        "AWS_SECRET_ACCESS_KEY": s3_options["secret"],
        "AWS_ENDPOINT_URL": s3_options["endpoint_url"],
    }
    with scheduler_processes(tmp_path_factory.mktemp("workers"), env=env) as address:
        yield address


@pytest.fixture
def notebook_bucket(
    cluster: str, s3_options: dict[str, Any], s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The environment a notebook kernel starts with: the cluster, the S3 credentials, a store URL."""
    monkeypatch.setenv("CYTEARC_CLUSTER", cluster)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_options["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_options["secret"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_options["endpoint_url"])
    monkeypatch.setenv("CYTEARC_NOTEBOOK_STORE", f"{s3_bucket}/pbmc.zarr")
    return s3_bucket


def _run(path: Path, folder: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    return notebook


def _outputs(notebook: nbformat.NotebookNode) -> Iterator[dict[str, Any]]:
    for cell in notebook.cells:
        yield from cell.get("outputs", [])


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_a_cluster(
    path: Path, tmp_path: Path, notebook_bucket: str, s3_options: dict[str, Any]
) -> None:
    """Every cell executes on the cluster, shows its dashboard link, and prints no warning of ours.

    Third-party import-time warnings come from ``site-packages`` and are
    left to those packages.
    """
    notebook = _run(path, tmp_path)
    printed = "".join(o.get("text", "") for o in _outputs(notebook) if o.get("name") == "stdout")
    assert "dashboard: http://127.0.0.1:" in printed
    for output in _outputs(notebook):
        if output.get("name") == "stderr":
            ours = [
                line
                for line in output.get("text", "").splitlines()
                if "Warning" in line and "site-packages" not in line
            ]
            assert not ours, output["text"]
    if path.stem == "cluster":
        import s3fs  # noqa: PLC0415 (only tests on S3 load it)

        fs = s3fs.S3FileSystem(**s3_options, skip_instance_cache=True)
        assert fs.exists(f"{notebook_bucket}/pbmc.zarr/zarr.json")
        html = [o for o in _outputs(notebook) if "text/html" in o.get("data", {})]
        assert html, "the store and the run show as HTML views"


def test_notebooks_exist() -> None:
    """The tutorial and the cluster walk-through are there to run."""
    assert [p.name for p in NOTEBOOKS] == ["cluster.ipynb", "tutorial.ipynb"]
