"""``graph.neighbors``: the kNN graph of PCA coordinates and its UMAP connectivities.

The graph reads only the PCA artifact (a few numbers per cell), so it is built
in the client process on whole arrays: the nearest-neighbour search (exact
below :data:`EXACT_BELOW` cells, else pynndescent) and UMAP's fuzzy
simplicial set (the connectivities, as scanpy computes them), seeded.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import warnings
from typing import TYPE_CHECKING, Final

import numpy as np
import scipy.sparse as sp

from cytearc.errors import OperationArgumentError
from cytearc.ops.arguments import parse_int, parse_seed
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "EXACT_BELOW",
    "connectivities",
    "knn",
    "load_connectivities",
    "neighbors",
    "umap_module",
]

EXACT_BELOW: Final = 10_000
"""Cells below which the kNN search is exact (brute force) instead of approximate."""


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
    """The ``k`` nearest neighbours of each row, the row itself first (distance 0).

    Exact (brute force, in blocks of rows) below :data:`EXACT_BELOW` rows,
    else approximate (pynndescent); Euclidean distances.

    Parameters
    ----------
    x
        The points, one row each (such as PCA coordinates).
    k
        Neighbours per row, counting the row itself.
    seed
        The seed of the approximate search (the exact search ignores it).

    Returns
    -------
    tuple of numpy.ndarray
        ``(indices, distances)``: int64 and float64, shape ``(n_rows, k)``,
        each row by increasing distance.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[0] < EXACT_BELOW:
        return _exact_knn(x.astype(np.float64), k)
    from pynndescent import NNDescent  # noqa: PLC0415 (numba compiles on import)

    index = NNDescent(x, n_neighbors=k, metric="euclidean", random_state=seed, n_jobs=1)
    indices, distances = index.neighbor_graph
    return np.asarray(indices, dtype=np.int64), np.asarray(distances, dtype=np.float64)


_COMPILED: Final = {
    "umap.umap_": ("smooth_knn_dist", "compute_membership_strengths"),
    "umap.layouts": ("_nb_optimize_layout_euclidean_single_epoch", "clip", "rdist"),
    "umap.utils": ("tau_rand", "tau_rand_int"),
}
"""UMAP's numba functions that the graph and the embedding compile, by module."""


@functools.cache
def umap_module() -> ModuleType:
    """``umap.umap_``, imported without its warning about the optional TensorFlow.

    The numba functions of :data:`_COMPILED` keep their machine code in
    numba's on-disk cache (``cache=True``, which umap-learn does not set), so
    only the first process on a machine pays their ten seconds of
    compilation; where no cache folder is writable they compile as before.

    Returns
    -------
    types.ModuleType
        The module ``umap.umap_``.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Tensorflow not installed", category=ImportWarning
        )
        module = importlib.import_module("umap.umap_")
    for name, functions in _COMPILED.items():
        namespace = vars(importlib.import_module(name))
        for function in functions:
            dispatcher = namespace.get(function)
            if dispatcher is not None and hasattr(dispatcher, "enable_caching"):
                with contextlib.suppress(RuntimeError):  # numba found no writable cache folder
                    dispatcher.enable_caching()
    return module


def connectivities(indices: np.ndarray, distances: np.ndarray, *, seed: int) -> sp.csr_matrix:
    """UMAP's fuzzy simplicial set of a kNN graph (scanpy's connectivities).

    Parameters
    ----------
    indices, distances
        The kNN graph, as :func:`knn` returns it.
    seed
        The seed of UMAP's random state.

    Returns
    -------
    scipy.sparse.csr_matrix
        The symmetric ``(n_rows, n_rows)`` connectivities, indices sorted.
    """
    n, k = indices.shape
    graph, _, _ = umap_module().fuzzy_simplicial_set(
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
    ds: AnalysisStore,
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

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    pca
        The ``pca`` artifact (:func:`~cytearc.ops.pca.pca`), or its ref.
    k
        Neighbours per cell, counting the cell itself (2 to the number of cells).
    n_comps
        The leading components used; None for all of them.
    seed
        The seed of the approximate search and of the connectivities.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``neighbors`` artifact.

    Raises
    ------
    OperationArgumentError
        ``pca`` is not a ``pca`` artifact, or an argument is of the wrong
        type or out of range (``k`` below 2 or above the number of cells).
    MissingArtifactError, IncompleteArtifactError
        ``pca`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    """
    operation = "graph.neighbors"
    source = open_input(ds, pca, kind="pca", operation=operation)
    n_cells, total = (int(n) for n in source.array("coords").shape)
    k = parse_int(k, name="k", operation=operation, minimum=2)
    if k > n_cells:
        msg = f"{operation}: k={k} is more than the {n_cells} cells; pass a smaller k"
        raise OperationArgumentError(msg)
    if n_comps is not None:
        n_comps = parse_int(n_comps, name="n_comps", operation=operation, minimum=1)
    seed = parse_seed(seed, operation=operation)
    use = total if n_comps is None else min(n_comps, total)

    def build(writer: ArtifactWriter) -> None:
        coords = source.read("coords")[:, :use]
        indices, distances = knn(coords, k, seed=seed)
        graph = connectivities(indices, distances, seed=seed)
        writer.write("indices", indices.astype(np.int32))
        writer.write("distances", distances.astype(np.float32))
        writer.write("conn_indptr", graph.indptr.astype(np.int64))
        writer.write("conn_indices", graph.indices.astype(np.int32))
        writer.write("conn_data", graph.data.astype(np.float32))

    return reuse_or_publish(
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
    """The stored connectivities of a neighbors artifact.

    Parameters
    ----------
    graph
        A ``neighbors`` artifact.

    Returns
    -------
    scipy.sparse.csr_matrix
        The ``(n_cells, n_cells)`` connectivities.

    Raises
    ------
    ArtifactError
        The artifact lacks one of the ``conn_*`` arrays.
    """
    n = int(graph.array("indices").shape[0])
    return sp.csr_matrix(
        (graph.read("conn_data"), graph.read("conn_indices"), graph.read("conn_indptr")),
        shape=(n, n),
    )
