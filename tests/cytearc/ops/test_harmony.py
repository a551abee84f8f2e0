"""``integration.harmony``: batches mixed and types kept, harmonypy's bits, refusals before writing."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

from cytearc import DataStore
from cytearc.datasets import write_store
from cytearc.errors import MissingDependencyError, OperationArgumentError
from cytearc.ops.harmony import harmony, harmonypy_module
from cytearc.ops.publication import reuse_or_publish, values_digest
from cytearc.ops.selection import artifact_cell_mask, publish_selection
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.engine.cluster import Engine

harmonypy = harmonypy_module()

N_CELLS = 400


@dataclass(frozen=True)
class Chain:
    """A synthetic store (6 donors, 8 types), its PCA, and the batch columns the refusals read."""

    path: Path
    ds: DataStore
    pca: Artifact


def _open(path: Path) -> DataStore:
    return DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values).view(np.uint8)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Chain:
    path = Path(
        write_store(
            tmp_path_factory.mktemp("harmony") / "ds.zarr",
            n_cells=N_CELLS,
            n_genes=600,
            cluster="threads",
        )
    )
    ds = _open(path)
    norm = ds.features.normalize("RNA")
    pca = ds.reduce.pca(norm, ds.features.hvgs(norm, n_top=200), n_comps=10)
    unlabelled = ds.cells.fetch_all("donor").astype(object)
    unlabelled[7] = None
    ds.cells.insert("batch_nan", np.where(np.arange(N_CELLS) == 7, np.nan, 1.0))
    ds.cells.insert("batch_none", unlabelled)
    ds.cells.insert("batch_one", np.full(N_CELLS, "lane1", dtype=object))
    return Chain(path=path, ds=ds, pca=pca)


def _harmony_artifacts(ds: DataStore) -> set[Any]:
    return {a.ref for a in ds.list_artifacts("harmony")}


# --- what it computes -------------------------------------------------------------------


def _synthetic_embedding(ds: DataStore) -> tuple[Artifact, np.ndarray, np.ndarray]:
    """A ``pca`` artifact of 4 types 10 apart, its cells in 2 batches shifted 6 apart."""
    rng = np.random.default_rng(0)
    types = rng.integers(0, 4, N_CELLS)
    batch = np.where(rng.random(N_CELLS) < 0.5, "A", "B").astype(object)
    centres = rng.normal(size=(4, 10))
    gaps = np.linalg.norm(centres[:, None] - centres[None], axis=2)[np.triu_indices(4, 1)]
    shift = rng.normal(size=10)
    coords = (
        centres[types] * 10 / gaps.min()
        + (batch == "B")[:, None] * shift * 6 / np.linalg.norm(shift)
        + rng.normal(size=(N_CELLS, 10))
    ).astype(np.float32)
    cells = publish_selection(ds, None)

    def build(writer: ArtifactWriter) -> None:
        writer.write("coords", coords)

    artifact = reuse_or_publish(
        ds,
        scope="RNA",
        kind="pca",
        operation="test.synthetic_embedding",
        parameters={},
        inputs={"cells": cells.ref, "coords": values_digest(coords.ravel())},
        build=build,
    )
    ds.cells.insert("synthetic_batch", batch, overwrite=True)
    return artifact, types, batch


def _scores(coords: np.ndarray, types: np.ndarray, batch: np.ndarray) -> dict[str, float]:
    """Batch mixing (iLISI, kNN), type separation (cLISI, k-means ARI)."""
    lisi = harmonypy.compute_lisi(coords, {"batch": batch, "type": types}, ["batch", "type"])
    neighbours = NearestNeighbors(n_neighbors=16).fit(coords).kneighbors(coords)[1][:, 1:]
    clusters = KMeans(4, n_init=10, random_state=0).fit_predict(coords)
    return {
        "ilisi": float(lisi[:, 0].mean()),
        "mixing": float((batch[neighbours] != batch[:, None]).mean()),
        "clisi": float(lisi[:, 1].mean()),
        "ari": adjusted_rand_score(types, clusters),
    }


def test_harmony_mixes_batches_and_keeps_types(chain: Chain) -> None:
    """Two batches shifted apart mix after Harmony (iLISI ~1 to > 1.7) while the 4 types stay apart."""
    embedding, types, batch = _synthetic_embedding(chain.ds)
    corrected = harmony(chain.ds, embedding, batch_key="synthetic_batch")
    before = _scores(embedding.read("coords"), types, batch)
    after = _scores(corrected.read("coords"), types, batch)
    assert before["ilisi"] < 1.1
    assert before["mixing"] < 0.05
    assert after["ilisi"] > 1.7
    assert after["mixing"] > 0.4
    assert after["clisi"] < 1.05
    assert after["ari"] > 0.95


def test_coords_are_harmonypy_bits(chain: Chain) -> None:
    """The coords are harmonypy's Z_corr for the PCA's first n_comps and the cells' batches, as float32."""
    ds, pca = chain.ds, chain.pca
    corrected = harmony(
        ds,
        pca,
        batch_key="donor",
        n_comps=8,
        n_clusters=7,
        theta=1.5,
        sigma=0.2,
        tau=5.0,
        max_iter_kmeans=6,
        seed=3,
    )
    donors = ds.cells.fetch_all("donor")[artifact_cell_mask(ds, pca)]
    direct = harmonypy.run_harmony(
        pca.read("coords")[:, :8],
        {"donor": donors},
        "donor",
        nclust=7,
        theta=1.5,
        sigma=0.2,
        tau=5.0,
        max_iter_kmeans=6,
        random_state=3,
        verbose=False,
    )
    coords = corrected.read("coords")
    assert coords.dtype == pca.read("coords").dtype == np.float32
    np.testing.assert_array_equal(_bits(coords), _bits(direct.Z_corr.astype(np.float32)))
    assert corrected.inputs() == {"pca": pca.ref}
    assert corrected.provenance["inputs"]["batch"] == values_digest(donors)
    assert corrected.ref.scope == pca.ref.scope
    parameters = corrected.provenance["parameters"]
    assert parameters["batchKey"] == "donor"
    assert (parameters["nComps"], parameters["nClusters"], parameters["seed"]) == (8, 7, 3)
    assert (parameters["theta"], parameters["sigma"], parameters["tau"]) == (1.5, 0.2, 5.0)
    assert corrected.array("coords").attrs["harmonypyVersion"] == harmonypy.__version__
    np.testing.assert_array_equal(artifact_cell_mask(ds, corrected), artifact_cell_mask(ds, pca))


def test_second_call_reuses_and_recomputing_gives_the_same_bits(chain: Chain) -> None:
    """A second call reuses the artifact; invalidate_cache=True recomputes the same bits."""
    first = harmony(chain.ds, chain.pca, batch_key="donor")
    created = _harmony_artifacts(chain.ds)
    assert harmony(chain.ds, chain.pca, batch_key="donor", n_clusters=13).ref == first.ref
    assert _harmony_artifacts(chain.ds) == created
    again = harmony(chain.ds, chain.pca, batch_key="donor", invalidate_cache=True)
    assert again.ref != first.ref
    assert again.provenance == first.provenance
    np.testing.assert_array_equal(_bits(again.read("coords")), _bits(first.read("coords")))


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"batch_key": "lane"},
            r"batch_key must name a cell column, found 'lane'; the cell table has \[.*'donor'",
        ),
        ({"batch_key": "batch_nan"}, "'batch_nan' has no label .* for 1 of the 400 cells .* row 7"),
        ({"batch_key": "batch_none"}, "'batch_none' has no label .* for 1 of the 400 cells"),
        ({"batch_key": "batch_one"}, "'batch_one' holds one batch \\('lane1'\\) among the 400"),
        ({"batch_key": "donor", "theta": -1.0}, "theta must be a finite number >= 0"),
        ({"batch_key": "donor", "n_clusters": 401}, "n_clusters must be an integer from 1 to 400"),
        ({"batch_key": "donor", "block_size": 1.5}, "block_size must be a finite number > 0"),
    ],
)
def test_refusals_write_nothing(chain: Chain, options: dict[str, Any], message: str) -> None:
    """A missing, unlabelled or one-batch column, or a bad option, is refused before any write."""
    before = tree_snapshot(chain.path)
    with pytest.raises(OperationArgumentError, match=message):
        harmony(chain.ds, chain.pca, **options)
    assert tree_snapshot(chain.path) == before


def test_another_kind_is_refused(chain: Chain) -> None:
    """Only a pca artifact is corrected."""
    norm = chain.pca.inputs()["normalized"]
    with pytest.raises(OperationArgumentError, match="needs a pca artifact, found 'normalized'"):
        harmony(chain.ds, norm, batch_key="donor")


def test_missing_harmonypy_is_refused_before_writing(
    chain: Chain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without harmonypy the error says `pip install harmonypy`, and nothing is written."""
    monkeypatch.setitem(sys.modules, "harmonypy", None)
    before = tree_snapshot(chain.path)
    with pytest.raises(MissingDependencyError, match="pip install harmonypy") as info:
        harmony(chain.ds, chain.pca, batch_key="donor", seed=99)
    assert info.value.name == "harmonypy"
    assert tree_snapshot(chain.path) == before


# --- downstream and schedulers ----------------------------------------------------------


def test_neighbors_take_the_corrected_embedding(chain: Chain) -> None:
    """graph.neighbors builds its graph on the harmony coords, recorded as its embedding."""
    corrected = harmony(chain.ds, chain.pca, batch_key="donor")
    graph = chain.ds.graph.neighbors(corrected, k=10)
    assert graph.inputs() == {"embedding": corrected.ref}
    np.testing.assert_array_equal(artifact_cell_mask(chain.ds, graph), np.ones(N_CELLS, bool))
    coords = corrected.read("coords").astype(np.float64)
    indices = graph.read("indices")
    distances = np.linalg.norm(coords[indices] - coords[:, None], axis=2)
    np.testing.assert_allclose(graph.read("distances"), distances, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_local_cluster_gives_the_threaded_bits(chain: Chain, engine: Engine) -> None:
    """On a store opened on the 2-worker local cluster harmony gives the threaded bits."""
    threaded = harmony(chain.ds, chain.pca, batch_key="donor")
    ds = DataStore(chain.path, zarr_mode="r+", show_progress=False)
    assert ds.engine.client is not None
    on_cluster = harmony(ds, chain.pca.ref, batch_key="donor", invalidate_cache=True)
    assert on_cluster.attrs["execution_options"]["scheduler"] == "distributed"
    assert on_cluster.provenance == threaded.provenance
    np.testing.assert_array_equal(_bits(on_cluster.read("coords")), _bits(threaded.read("coords")))
