"""Every public operation checks its arguments before it writes anything to the store."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from cytearc.errors import CyteArcError, OperationArgumentError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cytearc import DataStore


@dataclass(frozen=True)
class Prepared:
    """A store with QC columns and one artifact of each kind, and their refs."""

    path: Path
    refs: dict[str, str]


@pytest.fixture(scope="module")
def prepared(
    planted: Any, tmp_path_factory: pytest.TempPathFactory, open_threads: Callable[..., DataStore]
) -> Prepared:
    path = tmp_path_factory.mktemp("prepared") / "ds.zarr"
    shutil.copytree(planted.path, path)
    ds = open_threads(path, zarr_mode="r+")
    ds.qc.metrics("RNA")
    norm = ds.features.normalize("RNA")
    hv = ds.features.hvgs(norm, n_top=50, flavor="log")
    pca = ds.reduce.pca(norm, hv, n_comps=5)
    graph = ds.graph.neighbors(pca, k=10)
    clusters = ds.cluster.leiden(graph)
    markers = ds.markers.search("RNA", group_key="RNA_leiden_cluster")
    ds.cells.insert("sample", np.arange(ds.cells.n_rows) % 3)
    refs = {
        "normalized": str(norm.ref),
        "hvgs": str(hv.ref),
        "pca": str(pca.ref),
        "neighbors": str(graph.ref),
        "clustering": str(clusters.ref),
        "markers": str(markers.ref),
    }
    return Prepared(path=path, refs=refs)


def _files(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


BAD_CALLS: dict[str, Callable[[DataStore, dict[str, str]], object]] = {
    "qc.metrics unknown assay": lambda ds, r: ds.qc.metrics("ADT2"),
    "qc.metrics bad pattern": lambda ds, r: ds.qc.metrics("RNA", patterns={"percentMito": "(MT-"}),
    "qc.filter unknown column": lambda ds, r: ds.qc.filter({"nope": (0, 1)}),
    "qc.filter low above high": lambda ds, r: ds.qc.filter({"RNA_nCounts": (10, 1)}),
    "qc.auto_filter negative nmads": lambda ds, r: ds.qc.auto_filter("RNA", nmads=-1),
    "qc.auto_filter unknown sample key": lambda ds, r: ds.qc.auto_filter("RNA", sample_key="nope"),
    "normalize bogus method": lambda ds, r: ds.features.normalize("RNA", method="bogus"),
    "normalize text target_sum": lambda ds, r: ds.features.normalize(
        "RNA",
        target_sum="ten thousand",  # type: ignore[arg-type]
    ),
    "normalize zero target_sum": lambda ds, r: ds.features.normalize("RNA", target_sum=0),
    "normalize unknown assay": lambda ds, r: ds.features.normalize("RNA2"),
    "hvgs zero n_top": lambda ds, r: ds.features.hvgs(r["normalized"], n_top=0),
    "hvgs bogus flavor": lambda ds, r: ds.features.hvgs(r["normalized"], flavor="bogus"),
    "hvgs of a pca": lambda ds, r: ds.features.hvgs(r["pca"]),
    "pca zero n_comps": lambda ds, r: ds.reduce.pca(r["normalized"], r["hvgs"], n_comps=0),
    "pca bogus mode": lambda ds, r: ds.reduce.pca(r["normalized"], r["hvgs"], mode="bogus"),
    "neighbors zero k": lambda ds, r: ds.graph.neighbors(r["pca"], k=0),
    "neighbors of hvgs": lambda ds, r: ds.graph.neighbors(r["hvgs"]),
    "leiden negative resolution": lambda ds, r: ds.cluster.leiden(r["neighbors"], resolution=-1),
    "leiden unknown flavor": lambda ds, r: ds.cluster.leiden(r["neighbors"], flavor="louvain"),
    "umap negative min_dist": lambda ds, r: ds.embedding.umap(r["neighbors"], min_dist=-1),
    "umap zero components": lambda ds, r: ds.embedding.umap(r["neighbors"], n_components=0),
    "markers unknown group key": lambda ds, r: ds.markers.search("RNA", group_key="nope"),
    "markers zero target_sum": lambda ds, r: ds.markers.search(
        "RNA", group_key="RNA_leiden_cluster", target_sum=0
    ),
    "compute_bulk unknown sample key": lambda ds, r: ds.compare.compute_bulk(
        "RNA", sample_key="nope", group_key="RNA_leiden_cluster"
    ),
    "compute_bulk unknown group key": lambda ds, r: ds.compare.compute_bulk(
        "RNA", sample_key="sample", group_key="nope"
    ),
    "write_bulk bogus compression": lambda ds, r: ds.compare.write_bulk(
        "x.cube.zarr",
        "RNA",
        sample_key="sample",
        group_key="RNA_leiden_cluster",
        compression="bogus",  # type: ignore[arg-type]
    ),
    "select_measured_cells unknown assay": lambda ds, r: ds.select_measured_cells("RNA2"),
    "pipeline unknown assay": lambda ds, r: ds.pipeline.run(assay="RNA2"),
    "pipeline unknown option": lambda ds, r: ds.pipeline.run(no_such_option=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_argument_raises_and_writes_nothing(
    prepared: Prepared, tmp_path: Path, open_threads: Callable[..., DataStore], case: str
) -> None:
    """A bad argument raises a named error and leaves every file of the store as it was."""
    path = tmp_path / "ds.zarr"
    shutil.copytree(prepared.path, path)
    ds = open_threads(path, zarr_mode="r+")
    before = _files(path)
    with pytest.raises(CyteArcError) as info:
        BAD_CALLS[case](ds, prepared.refs)
    assert type(info.value) is not CyteArcError, "a named subclass, not the root"
    assert _files(path) == before
    assert not (tmp_path / "x.cube.zarr").exists()


@pytest.mark.slow
def test_argument_errors_name_the_operation_and_what_was_found(
    prepared: Prepared, open_threads: Callable[..., DataStore]
) -> None:
    """The message names the operation, the argument, what was expected and what was found."""
    ds = open_threads(prepared.path, zarr_mode="r+")
    with pytest.raises(OperationArgumentError) as info:
        ds.features.normalize("RNA", method="bogus")
    message = str(info.value)
    assert "features.normalize" in message
    assert "method" in message
    assert "'bogus'" in message
    assert "'library_size'" in message
