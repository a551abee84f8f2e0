"""``graph.neighbors``: the kNN graph of an embedding and its UMAP connectivities.

The graph reads only the embedding (a ``pca``, ``lsi`` or ``harmony``
artifact: a few numbers per cell), so it is built
in the client process on whole arrays: the nearest-neighbour search (exact
brute force below :data:`EXACT_BELOW` cells, else pynndescent) and UMAP's
fuzzy simplicial set (the connectivities, as scanpy computes them), seeded.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import pkgutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final

import numpy as np
import scipy.sparse as sp

from cytearc.errors import OperationArgumentError
from cytearc.ops.arguments import parse_choice, parse_int, parse_seed
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType

__all__ = [
    "EMBEDDINGS",
    "EXACT_BELOW",
    "SEARCHES",
    "connectivities",
    "default_search",
    "knn",
    "load_connectivities",
    "neighbors",
    "pynndescent_module",
    "umap_module",
]

EXACT_BELOW: Final = 50_000
"""Cells below which :func:`knn` searches exactly (brute force) instead of approximately."""

EMBEDDINGS: Final = ("pca", "lsi", "harmony")
"""The kinds of artifact whose ``coords`` :func:`neighbors` takes."""

SEARCHES: Final = ("exact", "nndescent")
"""The kNN searches of :func:`knn`."""

_BLOCK_BYTES: Final = 64 * 2**20
"""Bytes of one block's float32 distances and int64 candidates (rows x all points)."""

_MARGIN: Final = 16
"""Candidates beyond ``k`` that the float32 pass keeps for the float64 refinement."""


def _block_rows(n: int) -> int:
    return int(np.clip(_BLOCK_BYTES // (12 * max(n, 1)), 64, 1024))


def _exact_block(
    x: np.ndarray, x32: np.ndarray, sq32: np.ndarray, start: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    stop = min(n, start + _block_rows(n))
    rows = np.arange(start, stop)
    d2 = sq32[start:stop, None] + sq32[None, :]
    d2 -= 2 * (x32[start:stop] @ x32.T)
    d2[rows - start, rows] = -np.inf
    m = min(n, k + _MARGIN)
    if m < n:
        candidates = np.argpartition(d2, m - 1, axis=1)[:, :m]
    else:
        candidates = np.tile(np.arange(n), (len(rows), 1))
    candidates.sort(axis=1)
    exact = ((x[candidates] - x[rows, None, :]) ** 2).sum(axis=2)
    exact[candidates == rows[:, None]] = -1.0
    order = np.argsort(exact, axis=1, kind="stable")[:, :k]
    indices = np.take_along_axis(candidates, order, axis=1)
    distances = np.sqrt(np.maximum(np.take_along_axis(exact, order, axis=1), 0.0))
    return indices, distances


def _exact_knn(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute force in blocks of rows: float32 distances pick ``k + 16`` candidates, float64 ranks them."""
    x = np.asarray(x, dtype=np.float64)
    x = x - x.mean(axis=0)
    x32 = x.astype(np.float32)
    sq32 = (x32.astype(np.float64) ** 2).sum(axis=1).astype(np.float32)
    indices = np.empty((x.shape[0], k), dtype=np.int64)
    distances = np.empty((x.shape[0], k), dtype=np.float64)
    starts = range(0, x.shape[0], _block_rows(x.shape[0]))
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        blocks = pool.map(lambda start: _exact_block(x, x32, sq32, start, k), starts)
        for start, (block_indices, block_distances) in zip(starts, blocks, strict=True):
            indices[start : start + len(block_indices)] = block_indices
            distances[start : start + len(block_indices)] = block_distances
    return indices, distances


def default_search(n_rows: int) -> str:
    """The search :func:`knn` uses for ``n_rows`` points: exact below :data:`EXACT_BELOW`.

    Parameters
    ----------
    n_rows
        The number of points.

    Returns
    -------
    str
        ``"exact"`` or ``"nndescent"``.

    Examples
    --------
    >>> default_search(20_000), default_search(1_000_000)
    ('exact', 'nndescent')
    """
    return "exact" if n_rows < EXACT_BELOW else "nndescent"


def knn(
    x: np.ndarray, k: int, *, seed: int, search: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest neighbours of each row, the row itself first (distance 0).

    ``"exact"`` is brute force in blocks of 1,024 rows on two threads:
    float32 squared distances of the centred points choose each row's
    ``k + 16`` nearest candidates, whose float64 distances (the squared
    differences summed) rank them, ties by index. ``"nndescent"`` is
    pynndescent's approximate search (seeded, one thread), its numba
    functions compiled once per machine (:func:`pynndescent_module`).

    Parameters
    ----------
    x
        The points, one row each (such as PCA coordinates).
    k
        Neighbours per row, counting the row itself.
    seed
        The seed of the approximate search (the exact search ignores it).
    search
        ``"exact"`` or ``"nndescent"``; None for :func:`default_search`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(indices, distances)``: int64 and float64, shape ``(n_rows, k)``,
        each row by increasing distance.

    Examples
    --------
    >>> points = np.array([[0.0], [1.0], [3.0]])
    >>> indices, distances = knn(points, 2, seed=0)
    >>> indices.tolist(), distances.tolist()
    ([[0, 1], [1, 0], [2, 1]], [[0.0, 1.0], [0.0, 1.0], [0.0, 2.0]])
    """
    search = search or default_search(x.shape[0])
    if search == "exact":
        return _exact_knn(x, k)
    if search not in SEARCHES:
        msg = f"knn: search={search!r} is not one of {SEARCHES}"
        raise OperationArgumentError(msg)
    x = np.ascontiguousarray(x, dtype=np.float32)
    nndescent = pynndescent_module().NNDescent
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Cannot cache compiled function")
        index = nndescent(x, n_neighbors=k, metric="euclidean", random_state=seed, n_jobs=1)
        indices, distances = index.neighbor_graph
    return np.asarray(indices, dtype=np.int64), np.asarray(distances, dtype=np.float64)


def _cache_compiled(modules: Iterable[ModuleType], names: Iterable[str] | None = None) -> None:
    """Turn on numba's disk cache for the dispatchers of ``modules`` (all of them, or ``names``)."""
    from numba.core.dispatcher import Dispatcher  # noqa: PLC0415 (numba is slow to import)

    for module in modules:
        namespace = vars(module)
        for name in names if names is not None else list(namespace):
            dispatcher = namespace.get(name)
            if isinstance(dispatcher, Dispatcher):
                with contextlib.suppress(RuntimeError):  # numba found no writable cache folder
                    dispatcher.enable_caching()


@functools.cache
def pynndescent_module() -> ModuleType:
    """``pynndescent``, with numba's disk cache turned on for its compiled functions.

    pynndescent compiles its functions on first use in each process (about a
    minute on two cores); cached, a later process loads all but the two that
    numba cannot cache (``nn_descent``, ``nn_descent_internal``: 13 s).

    Returns
    -------
    types.ModuleType
        The module ``pynndescent``.
    """
    module = importlib.import_module("pynndescent")
    names = [
        info.name
        for info in pkgutil.walk_packages(module.__path__, "pynndescent.")
        if "test" not in info.name
    ]
    _cache_compiled(importlib.import_module(name) for name in names)
    return module


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
        _cache_compiled([importlib.import_module(name)], functions)
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
    search: str | None = None,
    invalidate_cache: bool = False,
) -> Artifact:
    """The kNN graph of an embedding's coordinates (a ``neighbors`` artifact).

    Holds ``indices`` and ``distances`` (cells x k, the cell itself first) and
    the connectivities as CSR arrays ``conn_indptr``, ``conn_indices``,
    ``conn_data``. The embedding is recorded as the input ``pca`` when it is
    a ``pca`` artifact (the name earlier artifacts carry) and as
    ``embedding`` otherwise; UMAP starts from it.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    pca
        The embedding: a ``pca`` (:func:`~cytearc.ops.pca.pca`), ``lsi``
        (:func:`~cytearc.ops.lsi.lsi`) or ``harmony``
        (:func:`~cytearc.ops.harmony.harmony`) artifact, or its ref.
    k
        Neighbours per cell, counting the cell itself (2 to the number of cells).
    n_comps
        The leading components used; None for all of them.
    seed
        The seed of the approximate search and of the connectivities.
    search
        ``"exact"`` or ``"nndescent"`` (see :func:`knn`); None for exact
        below :data:`EXACT_BELOW` cells, else ``"nndescent"``. Recorded in
        the provenance as ``search``.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``neighbors`` artifact.

    Raises
    ------
    OperationArgumentError
        ``pca`` is not an embedding artifact, or an argument is of the wrong
        type or out of range (``k`` below 2 or above the number of cells).
    MissingArtifactError, IncompleteArtifactError
        ``pca`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    """
    operation = "graph.neighbors"
    source = open_input(ds, pca, kind=EMBEDDINGS, operation=operation)
    n_cells, total = (int(n) for n in source.array("coords").shape)
    k = parse_int(k, name="k", operation=operation, minimum=2)
    if k > n_cells:
        msg = f"{operation}: k={k} is more than the {n_cells} cells; pass a smaller k"
        raise OperationArgumentError(msg)
    if n_comps is not None:
        n_comps = parse_int(n_comps, name="n_comps", operation=operation, minimum=1)
    seed = parse_seed(seed, operation=operation)
    search = parse_choice(
        search or default_search(n_cells), SEARCHES, name="search", operation=operation
    )
    use = total if n_comps is None else min(n_comps, total)

    def build(writer: ArtifactWriter) -> None:
        coords = source.read("coords")[:, :use]
        indices, distances = knn(coords, k, seed=seed, search=search)
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
        parameters={
            "k": k,
            "nComps": use,
            "metric": "euclidean",
            "search": search,
            "seed": seed,
        },
        inputs={"pca" if source.ref.kind == "pca" else "embedding": source.ref},
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
