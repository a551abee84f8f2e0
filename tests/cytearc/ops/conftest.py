"""Stores of the operation tests, built once per session.

``planted`` is the synthetic dataset of :mod:`cytearc.datasets.synthetic`
(600 cells x 300 genes, four cell types with twelve marker genes each) with
one gene zeroed everywhere, plus an ADT assay (12 antibodies) and an ATAC
assay (60 peaks) drawn here, imported from one matrix whose ``feature_types``
split it into the three assays. ``chain`` runs normalize, hvgs and exact PCA
on it on the threaded scheduler, over a selection that drops about a tenth of
the cells.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cytearc import DataStore, SparseToZarr
from cytearc.datasets import generate

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cytearc.artifacts import Artifact

N_CELLS = 600
N_GENES = 300
N_ADT = 12
N_ATAC = 60


@dataclass(frozen=True)
class Planted:
    """A planted store and the dense counts it was imported from."""

    path: Path
    rna: np.ndarray
    adt: np.ndarray
    atac: np.ndarray
    cell_type: np.ndarray
    marker_ids: dict[str, list[str]]
    gene_ids: np.ndarray
    zero_gene: int
    mask: np.ndarray
    """The cell selection of :func:`chain` (drops about a tenth of the cells)."""


@dataclass(frozen=True)
class Chain:
    """The artifacts of normalize, hvgs and PCA over ``Planted.mask``, on the threaded scheduler."""

    ds: DataStore
    norm: Artifact
    hvgs: Artifact
    pca: Artifact


def open_threads(path: Path, **options: Any) -> DataStore:
    """A store on Dask's threaded scheduler, without progress bars."""
    return DataStore(path, cluster="threads", show_progress=False, **options)


def import_matrix(path: Path, counts: Any, cells: pd.DataFrame, features: pd.DataFrame) -> Path:
    """Import a cells x features matrix into a new store at ``path``."""
    result = SparseToZarr(
        sp.csr_matrix(counts),
        cells=cells,
        features=features,
        zarr_loc=str(path),
        show_progress=False,
        cluster="threads",
    ).dump()
    return result.path


@pytest.fixture(name="open_threads", scope="session")
def open_threads_fixture() -> Callable[..., DataStore]:
    """:func:`open_threads`, for the test modules (which cannot import this file)."""
    return open_threads


@pytest.fixture(name="import_matrix", scope="session")
def import_matrix_fixture() -> Callable[..., Path]:
    """:func:`import_matrix`, for the test modules."""
    return import_matrix


@pytest.fixture(scope="session")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    data = generate(n_cells=N_CELLS, n_genes=N_GENES, n_types=4, n_markers=12, nonzero=0.3)
    rna = data.counts.toarray().astype(np.int64)
    markers = {int(g) for genes in data.truth["markers"].values() for g in genes}
    zero_gene = next(g for g in range(N_GENES) if g not in markers and rna[:, g].any())
    rna[:, zero_gene] = 0
    cell_type = data.cells["cell_type"].astype(str).to_numpy()
    codes = data.cells["cell_type"].cat.codes.to_numpy()
    rng = np.random.default_rng(7)
    adt = rng.poisson(rng.lognormal(2.0, 1.0, N_ADT)[None, :] * (1.0 + codes[:, None]))
    atac = rng.poisson(0.4, size=(N_CELLS, N_ATAC)) * (rng.random((N_CELLS, N_ATAC)) < 0.5)
    atac[np.arange(N_CELLS), rng.integers(0, N_ATAC, N_CELLS)] += 1
    features = pd.concat(
        [
            data.features,
            pd.DataFrame(
                {
                    "ids": [f"adt{i}" for i in range(N_ADT)] + [f"peak{i}" for i in range(N_ATAC)],
                    "names": [f"CD{i}" for i in range(N_ADT)]
                    + [f"chr1-{i}" for i in range(N_ATAC)],
                    "feature_types": ["Antibody Capture"] * N_ADT + ["Peaks"] * N_ATAC,
                }
            ),
        ],
        ignore_index=True,
    )
    cells = data.cells[["ids"]].assign(cell_type=cell_type)
    path = import_matrix(
        tmp_path_factory.mktemp("planted") / "ds.zarr",
        np.hstack([rna, adt, atac]),
        cells,
        features,
    )
    return Planted(
        path=path,
        rna=rna,
        adt=adt,
        atac=atac,
        cell_type=cell_type,
        marker_ids={str(t): list(ids) for t, ids in data.truth["marker_ids"].items()},
        gene_ids=data.features["ids"].to_numpy().astype(str),
        zero_gene=zero_gene,
        mask=np.random.default_rng(11).random(N_CELLS) >= 0.1,
    )


@pytest.fixture(scope="session")
def chain(planted: Planted) -> Chain:
    ds = open_threads(planted.path, zarr_mode="r+")
    norm = ds.features.normalize("RNA", cell_selection=planted.mask)
    # 100 of these 300 genes respond to the stimulation; dispersions of the values before
    # the log (flavor="seurat", the default) rank them first and the clusters split by
    # condition, so the chain selects on the log values to test clustering of the types
    hv = ds.features.hvgs(norm, n_top=100, flavor="log")
    pca = ds.reduce.pca(norm, hv, n_comps=10)
    return Chain(ds=ds, norm=norm, hvgs=hv, pca=pca)


@pytest.fixture
def normalized_blocks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per call of ``normalized_block`` (by the tasks, in :mod:`cytearc.ops.normalized_blocks`) while the test runs."""
    module = importlib.import_module("cytearc.ops.normalized_blocks")
    calls: list[int] = []
    original = module.normalized_block

    def counting(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "normalized_block", counting)
    return calls
