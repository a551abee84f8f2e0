"""``graph.neighbors``, ``cluster.leiden`` and ``layout.umap``: the kNN graph and what uses it.

These read only other artifacts (PCA coordinates, the graph), which hold a
few numbers per cell, so they run in the client process on whole arrays: the
nearest-neighbour search (exact below :data:`EXACT_BELOW` cells, else
pynndescent), UMAP's fuzzy simplicial set (the connectivities), Leiden
(leidenalg on an igraph of the connectivities) and the UMAP layout
(umap-learn's ``simplicial_set_embedding``), all seeded.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Final

import numpy as np
import scipy.sparse as sp

from cytearc.artifacts import Artifact, ArtifactRef, open_artifact
from cytearc.errors import CyteArcError
from cytearc.ops._base import publish, selection_of, write_cell_column

if TYPE_CHECKING:
    from types import ModuleType

    from cytearc.artifacts import ArtifactWriter
    from cytearc.datastore import DataStore

__all__ = ["EXACT_BELOW", "connectivities", "leiden", "neighbors", "umap"]

EXACT_BELOW: Final = 10_000
"""Cells below which the kNN search is exact (brute force) instead of approximate."""

ArtifactLike = ArtifactRef | str | Artifact


def _open(ds: DataStore, value: ArtifactLike, kind: str, operation: str) -> Artifact:
    artifact = value if isinstance(value, Artifact) else open_artifact(ds.root, value)
    if artifact.ref.kind != kind:
        msg = f"{artifact.ref}: {operation} needs a {kind} artifact, found {artifact.ref.kind!r}"
        raise CyteArcError(msg)
    return artifact


def _exact_knn(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    indices = np.empty((n, k), dtype=np.int64)
    distances = np.empty((n, k), dtype=np.float64)
    sq = (x**2).sum(axis=1)
    for start in range(0, n, 1024):
        block = x[start : start + 1024]
        d2 = np.maximum(sq[start : start + 1024, None] + sq[None, :] - 2 * block @ x.T, 0)
        d2[np.arange(len(block)), np.arange(start, start + len(block))] = -1.0
        part = np.argpartition(d2, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d2, part, axis=1), axis=1, kind="stable")
        indices[start : start + 1024] = np.take_along_axis(part, order, axis=1)
        distances[start : start + 1024] = np.sqrt(
            np.maximum(np.take_along_axis(d2, indices[start : start + 1024], axis=1), 0)
        )
    return indices, distances


def knn(x: np.ndarray, k: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest neighbours of each row, the row itself first (distance 0)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[0] < EXACT_BELOW:
        return _exact_knn(x.astype(np.float64), k)
    from pynndescent import NNDescent  # noqa: PLC0415 (numba compiles on import)

    index = NNDescent(x, n_neighbors=k, metric="euclidean", random_state=seed, n_jobs=1)
    indices, distances = index.neighbor_graph
    return np.asarray(indices, dtype=np.int64), np.asarray(distances, dtype=np.float64)


def _umap_module() -> ModuleType:
    """``umap.umap_``, imported without its warning about the optional TensorFlow."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Tensorflow not installed", category=ImportWarning
        )
        return importlib.import_module("umap.umap_")


def connectivities(indices: np.ndarray, distances: np.ndarray, *, seed: int) -> sp.csr_matrix:
    """UMAP's fuzzy simplicial set of a kNN graph (scanpy's connectivities)."""
    n, k = indices.shape
    graph, _, _ = _umap_module().fuzzy_simplicial_set(
        sp.coo_matrix((n, 1)),
        k,
        np.random.RandomState(seed),
        "euclidean",
        knn_indices=indices,
        knn_dists=distances.astype(np.float32),
    )
    out: sp.csr_matrix = sp.csr_matrix(graph)
    out.sort_indices()
    return out


def neighbors(
    ds: DataStore,
    pca: ArtifactLike,
    *,
    k: int = 15,
    n_comps: int | None = None,
    seed: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """The kNN graph of PCA coordinates (a ``neighbors`` artifact).

    Holds ``indices`` and ``distances`` (cells x k, the cell itself first) and
    the connectivities as CSR arrays ``conn_indptr``, ``conn_indices``,
    ``conn_data``.
    """
    source = _open(ds, pca, "pca", "graph.neighbors")
    total = int(source.array("coords").shape[1])
    use = total if n_comps is None else min(n_comps, total)

    def build(writer: ArtifactWriter) -> None:
        coords = source.read("coords")[:, :use]
        if k > coords.shape[0]:
            msg = f"graph.neighbors: k={k} is more than the {coords.shape[0]} cells"
            raise CyteArcError(msg)
        indices, distances = knn(coords, k, seed=seed)
        graph = connectivities(indices, distances, seed=seed)
        writer.write("indices", indices.astype(np.int32))
        writer.write("distances", distances.astype(np.float32))
        writer.write("conn_indptr", graph.indptr.astype(np.int64))
        writer.write("conn_indices", graph.indices.astype(np.int32))
        writer.write("conn_data", graph.data.astype(np.float32))

    return publish(
        ds,
        scope=source.ref.scope,
        kind="neighbors",
        operation="graph.neighbors",
        parameters={"k": k, "nComps": use, "metric": "euclidean", "seed": seed},
        inputs={"pca": source.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )


def load_connectivities(graph: Artifact) -> sp.csr_matrix:
    """The stored connectivities of a neighbors artifact."""
    n = int(graph.array("indices").shape[0])
    return sp.csr_matrix(
        (graph.read("conn_data"), graph.read("conn_indices"), graph.read("conn_indptr")),
        shape=(n, n),
    )


def leiden(
    ds: DataStore,
    graph: ArtifactLike,
    *,
    resolution: float = 1.0,
    seed: int = 0,
    n_iterations: int = -1,
    label: str | None = None,
    invalidate_cache: bool = False,
) -> Artifact:
    """Leiden clusters of the connectivities (a ``clustering`` artifact).

    Clusters are numbered from 1 by decreasing size. The labels are also
    written to the cell column ``<assay>_leiden_cluster`` (or ``label``),
    with -1 for cells outside the selection.
    """
    source = _open(ds, graph, "neighbors", "cluster.leiden")

    def build(writer: ArtifactWriter) -> None:
        import igraph  # noqa: PLC0415
        import leidenalg  # noqa: PLC0415

        conn = sp.triu(load_connectivities(source), k=1).tocoo()
        g = igraph.Graph(
            n=conn.shape[0],
            edges=list(zip(conn.row.tolist(), conn.col.tolist(), strict=True)),
            directed=False,
        )
        partition = leidenalg.find_partition(
            g,
            leidenalg.RBConfigurationVertexPartition,
            weights=conn.data.astype(np.float64).tolist(),
            resolution_parameter=resolution,
            n_iterations=n_iterations,
            seed=seed,
        )
        raw = np.asarray(partition.membership, dtype=np.int64)
        sizes = np.bincount(raw)
        order = np.argsort(-sizes, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(1, len(order) + 1)
        writer.write("labels", rank[raw].astype(np.int32))

    artifact = publish(
        ds,
        scope=source.ref.scope,
        kind="clustering",
        operation="cluster.leiden",
        parameters={"resolution": float(resolution), "seed": seed, "nIterations": n_iterations},
        inputs={"neighbors": source.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )
    column = label or f"{source.ref.scope}_leiden_cluster"
    write_cell_column(
        ds,
        column,
        artifact.read("labels"),
        mask=selection_of(ds, artifact),
        fill=-1,
        artifact=artifact,
    )
    return artifact


def umap(
    ds: DataStore,
    graph: ArtifactLike,
    *,
    n_components: int = 2,
    min_dist: float = 0.5,
    spread: float = 1.0,
    n_epochs: int | None = None,
    seed: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """UMAP coordinates from the stored graph (a ``umap`` artifact), initialised from PCA.

    Also written to the cell columns ``<assay>_UMAP1``, ``<assay>_UMAP2``
    (NaN outside the selection).
    """
    source = _open(ds, graph, "neighbors", "layout.umap")
    pca_ref = source.inputs()["pca"]

    def build(writer: ArtifactWriter) -> None:
        umap_ = _umap_module()
        conn = load_connectivities(source).tocoo()
        coords = open_artifact(ds.root, pca_ref).read("coords")
        init = coords[:, :n_components].astype(np.float64)
        init = 10 * (init - init.mean(0)) / np.maximum(np.abs(init).max(0), 1e-12) / 2
        a, b = umap_.find_ab_params(spread, min_dist)
        epochs = n_epochs or (500 if conn.shape[0] <= 10000 else 200)
        embedding, _ = umap_.simplicial_set_embedding(
            data=coords,
            graph=conn,
            n_components=n_components,
            initial_alpha=1.0,
            a=a,
            b=b,
            gamma=1.0,
            negative_sample_rate=5,
            n_epochs=epochs,
            init=init,
            random_state=np.random.RandomState(seed),
            metric="euclidean",
            metric_kwds={},
            densmap=False,
            densmap_kwds={},
            output_dens=False,
        )
        writer.write("coords", np.asarray(embedding, dtype=np.float32))

    artifact = publish(
        ds,
        scope=source.ref.scope,
        kind="umap",
        operation="layout.umap",
        parameters={
            "nComponents": n_components,
            "minDist": float(min_dist),
            "spread": float(spread),
            "nEpochs": n_epochs,
            "seed": seed,
        },
        inputs={"neighbors": source.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )
    mask = selection_of(ds, artifact)
    coords = artifact.read("coords")
    for i in range(min(2, n_components)):
        write_cell_column(
            ds,
            f"{source.ref.scope}_UMAP{i + 1}",
            coords[:, i].astype(np.float64),
            mask=mask,
            fill=np.nan,
            artifact=artifact,
        )
    return artifact
