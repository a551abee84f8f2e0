"""Fixtures of the store tools' tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cytearc import DataStore
from cytearc.datasets import write_store
from cytearc.io.importer import write_store as import_store
from cytearc.io.sources import SparseSource


def _with_features(path: Path, keep: slice, *, seed: int, n_cells: int) -> Path:
    """A synthetic store of ``n_cells`` cells keeping the genes ``keep`` (sources differ in features)."""
    full = write_store(
        path.with_suffix(".full.zarr"), n_cells=n_cells, n_genes=600, seed=seed, cluster="threads"
    )
    ds = DataStore(full)
    genes = np.zeros(600, dtype=bool)
    genes[keep] = True
    features = ds.RNA.features.to_pandas().iloc[genes].reset_index(drop=True)
    source = SparseSource(ds.RNA.counts.compute()[:, genes], ds.cells.to_pandas(), features)
    return Path(import_store(source, path, cluster="threads", show_progress=False).path)


@pytest.fixture(scope="module")
def composite_sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three local stores of 300, 200 and 250 cells with partly different features (made per module)."""
    folder = tmp_path_factory.mktemp("sources")
    return {
        "a": _with_features(folder / "a.zarr", slice(0, 600), seed=0, n_cells=300),
        "b": _with_features(folder / "b.zarr", slice(100, 600), seed=1, n_cells=200),
        "c": _with_features(folder / "c.zarr", slice(0, 550), seed=2, n_cells=250),
    }
