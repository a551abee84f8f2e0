"""integration.modalities: Seurat's weighted nearest neighbours, against Seurat 4.3.0 and on stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd
import pytest
import zarr
from zarr.codecs import ZstdCodec

from cytearc import DataStore
from cytearc.datasets import generate
from cytearc.errors import AssayNotFoundError, OperationArgumentError, UnmeasuredCellsError
from cytearc.metadata.membership import MEMBERSHIP_ROLE
from cytearc.metadata.table import COLUMNS_ATTRIBUTE, list_columns
from cytearc.ops.agreement import adjusted_rand
from cytearc.ops.clustering import leiden
from cytearc.ops.embedding import umap
from cytearc.ops.neighbors import connectivities, load_connectivities
from cytearc.ops.selection import artifact_cell_mask
from cytearc.ops.wnn import WeightedNeighbors, embedding_assay, modalities, weighted_neighbors
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import Artifact
    from cytearc.engine.cluster import Engine

FIXTURE = Path(__file__).parent / "fixtures" / "wnn"
N_CELLS = 240
N_ADT = 8
NEIGHBOURS = 20
E = TypeVar("E", bound=Exception)


def _load(name: str) -> np.ndarray:
    values: np.ndarray = np.loadtxt(FIXTURE / name, delimiter=",")
    return values


@dataclass(frozen=True)
class Seurat:
    """Seurat's FindMultiModalNeighbors of one run (Annoy's or exact neighbour searches)."""

    weights: np.ndarray
    indices: np.ndarray
    distances: np.ndarray
    bandwidths: np.ndarray
    nearest: np.ndarray


def _seurat(suffix: str) -> Seurat:
    sigma_nearest = _load(f"bandwidths{suffix}.csv.gz")
    return Seurat(
        weights=_load(f"weights{suffix}.csv.gz"),
        indices=_load(f"wnn_indices{suffix}.csv.gz").astype(np.int64),
        distances=_load(f"wnn_distances{suffix}.csv.gz"),
        bandwidths=sigma_nearest[:, :2],
        nearest=sigma_nearest[:, 2:],
    )


@pytest.fixture(scope="module")
def pbmc() -> WeightedNeighbors:
    """Our WNN of the fixture's RNA (30 PCs) and ADT (9 PCs) embeddings of the 892 pbmc1k cells."""
    return weighted_neighbors([_load("rna_pca.csv.gz"), _load("adt_pca.csv.gz")], k=NEIGHBOURS)


def _overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The fraction of each row's neighbours that both lists hold."""
    shared = np.array([len(set(x) & set(y)) for x, y in zip(a, b, strict=True)])
    fraction: np.ndarray = shared / a.shape[1]
    return fraction


# --- agreement with Seurat -----------------------------------------------------------------


def test_equals_seurat_on_exact_neighbour_searches(pbmc: WeightedNeighbors) -> None:
    """With Seurat's searches made exact, weights and bandwidths agree to 1e-15 and every neighbour list is identical."""
    seurat = _seurat("_exact")
    assert np.abs(pbmc.nearest - seurat.nearest).max() < 1e-12  # measured 2.2e-16
    assert np.abs(pbmc.bandwidths - seurat.bandwidths).max() < 1e-12  # measured 4.4e-16
    assert np.abs(pbmc.weights - seurat.weights).max() < 1e-12  # measured 8.9e-16
    np.testing.assert_array_equal(pbmc.indices, seurat.indices)
    # sqrt((1 - theta) / 2) near theta = 1 magnifies the last bits of theta: measured 1.1e-8
    assert np.abs(pbmc.distances - seurat.distances).max() < 1e-7


def test_agrees_with_seurat_annoy_as_far_as_annoy_agrees_with_exact_search(
    pbmc: WeightedNeighbors,
) -> None:
    """Against Seurat's Annoy run: weight correlation 0.903, mean neighbour overlap 0.937, the gap being Annoy's alone."""
    annoy, exact = _seurat(""), _seurat("_exact")
    correlation = np.corrcoef(pbmc.weights[:, 0], annoy.weights[:, 0])[0, 1]
    overlap = _overlap(pbmc.indices, annoy.indices)
    assert correlation > 0.90  # measured 0.9032
    assert np.median(np.abs(pbmc.weights - annoy.weights)) < 0.02  # measured 0.0176
    assert overlap.mean() > 0.93  # measured 0.937; 41 % of the cells have all 20 in common
    # Seurat itself moves this far between Annoy's and exact searches
    assert correlation == pytest.approx(np.corrcoef(exact.weights[:, 0], annoy.weights[:, 0])[0, 1])
    assert overlap.mean() == pytest.approx(_overlap(exact.indices, annoy.indices).mean())


# --- the numpy core ------------------------------------------------------------------------


def test_weights_sum_to_one_and_neighbours_exclude_the_cell(pbmc: WeightedNeighbors) -> None:
    """Each cell's weights sum to 1; its k neighbours are distinct others, by decreasing similarity."""
    n = pbmc.indices.shape[0]
    np.testing.assert_allclose(pbmc.weights.sum(axis=1), 1.0, rtol=1e-12)
    assert not (pbmc.indices == np.arange(n)[:, None]).any()
    assert all(len(set(row)) == NEIGHBOURS for row in pbmc.indices)
    assert (np.diff(pbmc.similarity, axis=1) <= 0).all()
    np.testing.assert_allclose(pbmc.distances, np.sqrt((1 - pbmc.similarity) / 2))


def test_duplicated_cells_give_finite_weights() -> None:
    """Identical cells (zero bandwidth and distances) give finite weights and neighbours, not Seurat's NaN."""
    rng = np.random.default_rng(1)
    a = np.repeat(rng.normal(size=(10, 4)), 3, axis=0)
    b = np.repeat(rng.normal(size=(10, 3)), 3, axis=0)
    result = weighted_neighbors([a, b], k=4)
    assert np.isfinite(result.weights).all()
    assert np.isfinite(result.distances).all()
    assert not (result.indices == np.arange(30)[:, None]).any()


@pytest.mark.parametrize(
    ("embeddings", "k", "match"),
    [
        ([np.zeros((5, 2))], 2, "at least two embeddings"),
        ([np.zeros((5, 2)), np.zeros((6, 2))], 2, "the same cells"),
        ([np.ones((5, 2)), np.ones((5, 2))], 5, "k=5 needs more than 5 cells"),
        ([np.ones((5, 2)), np.ones((5, 2))], 1, "k must be an integer >= 2"),
    ],
)
def test_core_refuses_bad_inputs(embeddings: list[np.ndarray], k: int, match: str) -> None:
    """One embedding, embeddings of other cells, or k out of range are refused by name."""
    with pytest.raises(OperationArgumentError, match=match):
        weighted_neighbors(embeddings, k=k)


# --- on a store ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TwoAssays:
    """A store of RNA and ADT counts, and the per-assay PCA over a selection."""

    ds: DataStore
    path: Path
    mask: np.ndarray
    cell_type: np.ndarray
    rna: Artifact
    adt: Artifact


def _counts() -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame, np.ndarray]:
    """RNA of four types, ADT whose 8 antibodies follow the types, as one matrix to import."""
    data = generate(n_cells=N_CELLS, n_genes=300, n_types=4, n_markers=10, nonzero=0.3, seed=5)
    codes = data.cells["cell_type"].cat.codes.to_numpy()
    rng = np.random.default_rng(3)
    adt = rng.poisson(rng.lognormal(1.5, 1.0, size=(4, N_ADT))[codes])
    features = pd.concat(
        [
            data.features,
            pd.DataFrame(
                {
                    "ids": [f"adt{i}" for i in range(N_ADT)],
                    "names": [f"CD{i}" for i in range(N_ADT)],
                    "feature_types": ["Antibody Capture"] * N_ADT,
                }
            ),
        ],
        ignore_index=True,
    )
    cell_type = data.cells["cell_type"].astype(str).to_numpy()
    cells = data.cells[["ids"]].assign(cell_type=cell_type)
    return np.hstack([data.counts.toarray(), adt]), cells, features, cell_type


def _embeddings(ds: DataStore, mask: Any, **options: Any) -> tuple[Artifact, Artifact]:
    """PCA of RNA (log HVGs) and of ADT (every antibody) over ``mask``."""
    norm = ds.features.normalize("RNA", cell_selection=mask, **options)
    rna = ds.reduce.pca(norm, ds.features.hvgs(norm, n_top=100, flavor="log"), n_comps=10)
    norm = ds.features.normalize("ADT", cell_selection=mask, **options)
    adt = ds.reduce.pca(norm, ds.features.hvgs(norm, n_top=N_ADT), n_comps=N_ADT - 1)
    return rna, adt


@pytest.fixture(scope="module")
def two(
    tmp_path_factory: pytest.TempPathFactory,
    import_matrix: Callable[..., Path],
    open_threads: Callable[..., DataStore],
) -> TwoAssays:
    counts, cells, features, cell_type = _counts()
    path = import_matrix(tmp_path_factory.mktemp("wnn") / "ds.zarr", counts, cells, features)
    ds = open_threads(path, zarr_mode="r+")
    mask = np.random.default_rng(11).random(N_CELLS) >= 0.1
    rna, adt = _embeddings(ds, mask)
    return TwoAssays(ds=ds, path=path, mask=mask, cell_type=cell_type, rna=rna, adt=adt)


@pytest.fixture(scope="module")
def graph(two: TwoAssays) -> Artifact:
    return modalities(two.ds, ["RNA", "ADT"], embeddings=[two.rna, two.adt])


def _refused(path: Path, error: type[E], match: str, call: Callable[[], object]) -> E:
    """Run ``call``, expecting ``error`` and no byte changed in the store at ``path``."""
    before = tree_snapshot(path)
    with pytest.raises(error, match=match) as info:
        call()
    assert tree_snapshot(path) == before, "a refused call wrote to the store"
    return info.value


def test_publishes_a_neighbors_artifact_of_the_weighted_graph(
    two: TwoAssays, graph: Artifact
) -> None:
    """The artifact holds the cell then its k weighted neighbours, the weights, and its provenance."""
    n = int(two.mask.sum())
    assert (graph.ref.scope, graph.ref.kind) == ("RNA", "neighbors")
    assert graph.provenance["operation"] == "integration.modalities"
    assert graph.parameters["assays"] == ["RNA", "ADT"]
    assert graph.parameters["k"] == NEIGHBOURS
    assert graph.parameters["nComps"] == [10, N_ADT - 1]
    assert graph.inputs() == {"embedding": two.rna.ref, "embedding2": two.adt.ref}
    expected = weighted_neighbors(
        [two.rna.read("coords"), two.adt.read("coords")], k=NEIGHBOURS, seed=0
    )
    indices, distances = graph.read("indices"), graph.read("distances")
    assert (indices.dtype, distances.dtype) == (np.dtype(np.int32), np.dtype(np.float32))
    assert indices.shape == (n, NEIGHBOURS + 1)
    np.testing.assert_array_equal(indices[:, 0], np.arange(n))
    np.testing.assert_array_equal(indices[:, 1:], expected.indices)
    np.testing.assert_array_equal(distances[:, 0], 0)
    np.testing.assert_array_equal(distances[:, 1:], expected.distances.astype(np.float32))
    np.testing.assert_array_equal(graph.read("weights"), expected.weights)
    conn = connectivities(indices, distances, seed=0)
    assert (load_connectivities(graph) != conn.astype(np.float32)).nnz == 0
    np.testing.assert_array_equal(artifact_cell_mask(two.ds, graph), two.mask)


def test_reuses_the_artifact_of_the_same_provenance(two: TwoAssays, graph: Artifact) -> None:
    """A second call (refs instead of artifacts) returns the same artifact."""
    again = modalities(
        two.ds, ("RNA", "ADT"), embeddings=[str(two.rna.ref), two.adt.ref], n_comps=[50, 50]
    )
    assert again.ref == graph.ref


def test_leiden_clusters_the_weighted_graph(two: TwoAssays, graph: Artifact) -> None:
    """Leiden reads the graph unchanged and recovers the four planted types."""
    clusters = leiden(two.ds, graph, resolution=0.5, label="wnn_cluster")
    labels = pd.Series(clusters.read("labels"))
    truth = pd.Series(two.cell_type[two.mask])
    assert adjusted_rand(labels, truth) > 0.9
    assert (two.ds.cells.fetch_all("wnn_cluster")[~two.mask] == -1).all()


def test_umap_lays_out_the_weighted_graph_from_the_first_embedding(
    two: TwoAssays, graph: Artifact
) -> None:
    """UMAP reads the graph unchanged and starts from its input ``embedding`` (the RNA PCA)."""
    layout = umap(two.ds, graph, n_epochs=50)
    assert layout.read("coords").shape == (int(two.mask.sum()), 2)
    assert np.isnan(two.ds.cells.fetch_all("RNA_UMAP1")[~two.mask]).all()


def test_embedding_assay_follows_the_lineage(two: TwoAssays) -> None:
    """A PCA's assay is the assay its normalized artifact was computed from."""
    assert embedding_assay(two.ds, two.rna) == "RNA"
    assert embedding_assay(two.ds, two.adt) == "ADT"


def test_refuses_an_embedding_of_another_assay(two: TwoAssays) -> None:
    """Embeddings in the wrong order are refused by assay, before anything is written."""
    _refused(
        two.path,
        OperationArgumentError,
        "for assay 'RNA' was computed from assay 'ADT'",
        lambda: modalities(two.ds, ["RNA", "ADT"], embeddings=[two.adt, two.rna]),
    )


def test_refuses_embeddings_of_different_selections(two: TwoAssays) -> None:
    """Embeddings over other cells are refused naming both, before anything is written."""
    other = two.mask.copy()
    other[np.flatnonzero(other)[:5]] = False
    _, adt = _embeddings(two.ds, other)
    error = _refused(
        two.path,
        OperationArgumentError,
        "different cell selections",
        lambda: modalities(two.ds, ["RNA", "ADT"], embeddings=[two.rna, adt]),
    )
    assert str(two.rna.ref) in str(error)
    assert str(adt.ref) in str(error)


@dataclass(frozen=True)
class Refusal:
    """A call of :func:`modalities` with bad arguments, and the error it raises."""

    assays: Any
    n_embeddings: int
    error: type[Exception]
    match: str
    options: dict[str, Any] = field(default_factory=dict)


REFUSALS = {
    "one assay": Refusal(["RNA"], 1, OperationArgumentError, "at least two assay names"),
    "a string": Refusal("RNA", 1, OperationArgumentError, "assays must be a list"),
    "a repeat": Refusal(["RNA", "RNA"], 2, OperationArgumentError, "each assay once"),
    "no such assay": Refusal(["RNA", "HTO"], 2, AssayNotFoundError, "no assay 'HTO'"),
    "few embeddings": Refusal(["RNA", "ADT"], 1, OperationArgumentError, "one embedding per"),
    "n_comps": Refusal(
        ["RNA", "ADT"], 2, OperationArgumentError, "one count per assay", {"n_comps": [5]}
    ),
    "k": Refusal(["RNA", "ADT"], 2, OperationArgumentError, "k=1000 needs more", {"k": 1000}),
    "cells": Refusal(
        ["RNA", "ADT"], 2, OperationArgumentError, "cell_selection", {"cell_selection": "I"}
    ),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_refuses_bad_arguments_before_writing(two: TwoAssays, case: Refusal) -> None:
    """Wrong lists, unknown assays, k out of range and another cell_selection are refused by name."""
    embeddings = [two.rna, two.adt][: case.n_embeddings]
    _refused(
        two.path,
        case.error,
        case.match,
        lambda: modalities(two.ds, case.assays, embeddings=embeddings, **case.options),
    )


def test_refuses_a_neighbors_artifact_as_embedding(two: TwoAssays, graph: Artifact) -> None:
    """Only pca, lsi and harmony artifacts are embeddings."""
    _refused(
        two.path,
        OperationArgumentError,
        "needs a pca or lsi or harmony artifact",
        lambda: modalities(two.ds, ["RNA", "ADT"], embeddings=[two.rna, graph]),
    )


def test_accepts_the_embeddings_selection(two: TwoAssays, graph: Artifact) -> None:
    """cell_selection equal to the embeddings' cells (here as a mask) is accepted."""
    again = modalities(
        two.ds, ["RNA", "ADT"], embeddings=[two.rna, two.adt], cell_selection=two.mask
    )
    assert again.ref == graph.ref


def _write_membership(path: Path, assay: str, measured: np.ndarray) -> None:
    """Write ``<assay>_I`` straight into the cell table, as an import would."""
    cells = zarr.open_group(path / "cellData", mode="r+")
    name = f"{assay}_I"
    array = cells.create_array(
        name,
        shape=measured.shape,
        dtype=bool,
        chunks=measured.shape,
        compressors=ZstdCodec(level=3),
        dimension_names=("cell",),
        attributes={"role": MEMBERSHIP_ROLE, "assay": assay},
    )
    array[:] = measured
    columns = cells.attrs[COLUMNS_ATTRIBUTE]
    assert isinstance(columns, list)
    list_columns(cells, [*columns, name])


def test_refuses_cells_an_assay_did_not_measure(
    tmp_path: Path, import_matrix: Callable[..., Path], open_threads: Callable[..., DataStore]
) -> None:
    """Embeddings over cells that ADT_I marks unmeasured raise UnmeasuredCellsError, writing nothing."""
    counts, cells, features, _ = _counts()
    path = import_matrix(tmp_path / "ds.zarr", counts, cells, features)
    ds = open_threads(path, zarr_mode="r+")
    rna, adt = _embeddings(ds, None)
    measured = np.ones(N_CELLS, dtype=bool)
    measured[:7] = False
    _write_membership(path, "ADT", measured)
    ds = open_threads(path, zarr_mode="r+")
    error = _refused(
        path,
        UnmeasuredCellsError,
        "integration.modalities",
        lambda: modalities(ds, ["RNA", "ADT"], embeddings=[rna, adt]),
    )
    assert (error.operation, error.assay, error.column) == (
        "integration.modalities",
        "ADT",
        "ADT_I",
    )
    assert (error.unmeasured, error.selected) == (7, N_CELLS)


# --- schedulers ----------------------------------------------------------------------------


@pytest.mark.slow
def test_threads_and_local_cluster_give_equal_arrays(
    two: TwoAssays, graph: Artifact, engine: Engine
) -> None:
    """The embeddings and the graph recomputed on the 2-worker cluster have the threaded arrays."""
    ds = DataStore(two.path, zarr_mode="r+", show_progress=False)
    assert ds.engine.client is not None
    rna, adt = _embeddings(ds, two.mask, invalidate_cache=True)
    assert rna.ref != two.rna.ref
    again = modalities(ds, ["RNA", "ADT"], embeddings=[rna, adt], invalidate_cache=True)
    assert again.attrs["execution_options"]["scheduler"] == "distributed"
    for name in ("indices", "distances", "conn_indptr", "conn_indices", "conn_data", "weights"):
        np.testing.assert_array_equal(again.read(name), graph.read(name))
