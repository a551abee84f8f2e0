"""``integration.modalities``: one kNN graph of several assays of the same cells (Seurat's WNN).

Weighted nearest neighbours (Hao et al. 2021, *Integrated analysis of
multimodal single-cell data*, Cell 184:3573) as Seurat 4.3.0's
``FindMultiModalNeighbors`` computes it with its defaults, on the embeddings
of ``M >= 2`` assays of the same cells (a few dozen numbers per cell), in the
client process. :func:`weighted_neighbors` computes, for ``k`` = ``k.nn``
(default 20):

1. **Normalised embeddings** (``l2.norm = TRUE``): each cell's coordinates
   of modality ``m`` divided by their Euclidean norm, ``E_m`` (a row of
   zeros stays zero, as Seurat's ``L2Norm`` sets non-finite values to 0).
2. **Per-modality neighbours**: the ``k`` nearest cells of each cell in
   ``E_m``, the cell itself first (``FindModalityWeights``); ``nearest_m`` is
   the distance to the first other cell (``Distances[, 2]``).
3. **Predictions** (``PredictAssay``): the within-modality prediction of a
   cell is the mean of ``E_m`` over its ``k - 1`` other neighbours in
   modality ``m``; the cross-modality prediction, the mean of ``E_m`` over its
   ``k - 1`` other neighbours in modality ``m2 != m``. Their distances
   (``impute_dist``) are ``max(|E_m[i] - prediction| - nearest_m[i], 0)``.
4. **Bandwidths** (``ComputeSNNwidth``, ``SNN_SmallestNonzero_Dist``, with
   ``prune.SNN = 0`` as ``FindModalityWeights`` uses it): the shared-
   neighbour graph of the ``k`` neighbours of step 2, ``s / (2k - s)`` for
   ``s`` shared neighbours (the cell counting itself); of a cell's non-zero
   entries (itself included), those whose value is at most the ``k``-th
   smallest (ties included) are its least similar partners, and
   ``sigma_m[i]`` is the mean of the ``k`` largest of their distances
   ``max(|E_m[j] - E_m[i]| - nearest_m[i], 0)``, times ``sd.scale = 1``.
5. **Modality weights**: the affinity ratio of modality ``m`` over ``m2`` is
   ``clip(exp(-within_m / sigma_m) / (exp(-cross_m,m2 / sigma_m) + 1e-4), 0,
   200)`` (``cross.contant.list``), and ``w_m[i] = sum_m2 exp(ratio_m,m2) /
   sum_m' sum_m2 exp(ratio_m',m2)`` (a softmax; ``smooth = FALSE``).
6. **Weighted neighbours** (``MultiModalNN``, ``knn.range = 200``): each
   cell's candidates are the union, in order, of its ``knn.range - 1`` (199)
   nearest other cells in each modality; the weighted similarity of a candidate ``j`` is
   ``theta(i, j) = sum_m w_m[i] exp(-max(|E_m[i] - E_m[j]| - nearest_m[i], 0)
   / sigma_m[i])``, and the ``k`` candidates of highest similarity (ties
   in candidate order, as R's ``order``) are the weighted neighbours. Their
   distance is Seurat's ``sqrt(clip((1 - theta) / 2, 0, 1))``, what
   ``obj[["weighted.nn"]]`` stores.

Where it differs from Seurat:

- **Neighbour search.** Seurat searches with Annoy (50 trees, its float32
  distances). Here :func:`~cytearc.ops.neighbors.knn` searches: exact
  below :data:`~cytearc.ops.neighbors.EXACT_BELOW` cells (float64 distances,
  ties by index), pynndescent (seeded) above. Exact search is what Annoy
  approximates, so neighbour sets, the nearest distances (float64 here,
  float32 there) and hence the bandwidths and weights differ where Annoy
  misses a neighbour. One search of ``max(k + 1, knn.range)`` neighbours
  serves steps 2 and 6 (Seurat searches twice; exact lists are prefixes of
  one another). On the 892 pbmc1k CITE-seq cells (RNA 30 PCs, ADT 9 PCs;
  ``tests/cytearc/ops/fixtures/wnn``) the result equals Seurat's with its
  searches made exact (RANN's kd-tree in place of Annoy): weights within
  9e-16, every neighbour list identical. Against Seurat's default Annoy run
  the RNA weights correlate at 0.903 (median difference 0.018) and 93.7 %
  of the weighted neighbours are shared, exactly the gap between Seurat's
  own Annoy and exact runs.
- ``PredictAssay`` drops the first neighbour column only when, for 50 cells
  sampled with seed 4273, it is the cell itself; here the cell itself is
  always the first neighbour (put there when a duplicate point came first)
  and always dropped.
- A bandwidth of 0 (a cell whose least similar partners are all within its
  nearest distance; duplicated points) makes Seurat's kernels ``0/0`` (NaN);
  here ``exp(-0/0)`` is taken as 1 and ``exp(-d/0)``, ``d > 0``, as 0.
- ``knn.range`` is capped at the number of cells, and raised to ``k + 1``
  for ``k >= 200`` (where Seurat's candidates could be fewer than ``k``).

Memory is that of the per-modality searches (``n x 200`` neighbours and
distances per modality) plus row blocks of about 32 MiB; time is dominated
by the exact searches of 200 neighbours (brute force, quadratic in ``n``)
and, from :data:`~cytearc.ops.neighbors.EXACT_BELOW` cells, by
pynndescent's: 12 s for 20,000 cells of 30 + 10 dimensions on two cores, 7 s
of them searching.

:func:`modalities` publishes the result as a ``neighbors`` artifact that
Leiden and UMAP read as they read ``graph.neighbors``': ``indices`` and
``distances`` hold the cell itself first (distance 0), then its ``k``
weighted neighbours (so ``k + 1`` columns), the connectivities are UMAP's
fuzzy simplicial set of that graph (:func:`~cytearc.ops.neighbors.connectivities`),
and ``weights`` holds ``w`` (cells x modalities, in the order of ``assays``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
import scipy.sparse as sp

from cytearc.artifacts import Artifact, open_artifact
from cytearc.errors import AssayNotFoundError, OperationArgumentError
from cytearc.ops.arguments import parse_int, parse_seed
from cytearc.ops.neighbors import EMBEDDINGS, connectivities, default_search, knn
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish
from cytearc.ops.selection import (
    SelectionLike,
    artifact_cell_mask,
    read_measured_mask,
    read_selection_mask,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "CROSS_CONSTANT",
    "KNN_RANGE",
    "SCORE_MAX",
    "SD_SCALE",
    "WeightedNeighbors",
    "embedding_assay",
    "modalities",
    "weighted_neighbors",
]

KNN_RANGE: Final = 200
"""Seurat's ``knn.range``: neighbours per modality (the cell included) whose union are the candidates."""

SD_SCALE: Final = 1.0
"""Seurat's ``sd.scale``: the factor of the kernel bandwidths."""

CROSS_CONSTANT: Final = 1e-4
"""Seurat's ``cross.contant.list`` entry: added to the cross-modality kernel of the affinity ratio."""

SCORE_MAX: Final = 200.0
"""The upper clip of the affinity ratios before their softmax (Seurat's ``MinMax(max = 200)``)."""

_BLOCK_BYTES: Final = 32 * 2**20
"""Bytes of one row block's gathered coordinates (rows x candidates x dimensions, float64)."""

_OPERATION: Final = "integration.modalities"

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class WeightedNeighbors:
    """What :func:`weighted_neighbors` computes, one row per cell.

    Parameters
    ----------
    indices
        int64, ``(n, k)``: the weighted neighbours (never the cell itself),
        by decreasing similarity.
    similarity
        float64, ``(n, k)``: their weighted similarity ``theta``.
    distances
        float64, ``(n, k)``: Seurat's ``sqrt(clip((1 - theta) / 2, 0, 1))``.
    weights
        float64, ``(n, M)``: the modality weights (each row sums to 1).
    bandwidths
        float64, ``(n, M)``: the kernel bandwidths ``sigma_m``.
    nearest
        float64, ``(n, M)``: the distance to the nearest other cell in each
        normalised embedding.
    """

    indices: np.ndarray
    similarity: np.ndarray
    distances: np.ndarray
    weights: np.ndarray
    bandwidths: np.ndarray
    nearest: np.ndarray


def _l2_normalize(x: np.ndarray) -> np.ndarray:
    """Seurat's ``L2Norm``: each row over its Euclidean norm, non-finite results 0."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.sqrt((x**2).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = x / norms[:, None]
    out[~np.isfinite(out)] = 0.0
    return out


def _self_first(indices: np.ndarray, distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's own index first at distance 0 (moved there, or put there in place of the last)."""
    rows = np.arange(indices.shape[0])
    if (indices[:, 0] == rows).all():
        return indices, distances
    indices, distances = indices.copy(), distances.copy()
    for i in np.flatnonzero(indices[:, 0] != rows):
        others = indices[i][indices[i] != i]
        kept = distances[i][indices[i] != i]
        width = indices.shape[1] - 1
        indices[i] = np.concatenate([[i], others[:width]])
        distances[i] = np.concatenate([[0.0], kept[:width]])
    return indices, distances


def _row_blocks(n: int, row_bytes: int) -> list[slice]:
    rows = int(np.clip(_BLOCK_BYTES // max(row_bytes, 1), 16, max(n, 16)))
    return [slice(start, min(n, start + rows)) for start in range(0, n, rows)]


def _map_blocks(blocks: list[slice], function: Callable[[slice], T]) -> list[T]:
    """``function`` of each row block on two threads, in order."""
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        return list(pool.map(function, blocks))


def _relu_distance(a: np.ndarray, b: np.ndarray, nearest: np.ndarray) -> np.ndarray:
    """``max(|a - b| - nearest, 0)`` over the last axis (Seurat's ``impute_dist`` and ``NNdist``)."""
    d = np.sqrt(((a - b) ** 2).sum(axis=-1))
    out: np.ndarray = np.maximum(d - nearest, 0.0)
    return out


def _kernel(distance: np.ndarray, bandwidth: np.ndarray) -> np.ndarray:
    """``exp(-distance / bandwidth)``, with ``0 / 0`` taken as 0 (a kernel of 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = distance / bandwidth
    out: np.ndarray = np.exp(-np.where(distance == 0, 0.0, ratio))
    return out


def _predicted(x: np.ndarray, neighbours: np.ndarray, *, nearest: np.ndarray) -> np.ndarray:
    """``impute_dist`` of each cell to the mean of ``x`` over its neighbours (``PredictAssay``)."""

    def block(rows: slice) -> np.ndarray:
        mean = x[neighbours[rows]].mean(axis=1)
        return _relu_distance(x[rows], mean, nearest[rows])

    blocks = _row_blocks(x.shape[0], 8 * neighbours.shape[1] * x.shape[1])
    return np.concatenate(_map_blocks(blocks, block))


def _bandwidths(x: np.ndarray, neighbours: np.ndarray, *, nearest: np.ndarray) -> np.ndarray:
    """``SNN_SmallestNonzero_Dist`` of the shared-neighbour graph of ``neighbours`` (the cell first)."""
    n, k = neighbours.shape
    adjacency = sp.csr_matrix(
        (np.ones(n * k, dtype=np.int64), neighbours.ravel(), np.arange(0, n * k + 1, k)),
        shape=(n, n),
    )
    transposed = adjacency.T.tocsr()

    def block(rows: slice) -> np.ndarray:
        shared = (adjacency[rows] @ transposed).tocsr()
        shared.sum_duplicates()
        n_rows = rows.stop - rows.start
        counts = np.diff(shared.indptr)
        local = np.repeat(np.arange(n_rows), counts)
        take = np.minimum(k, counts)
        # the take-th smallest shared count of each row, from the rows' histograms of counts
        histogram = np.bincount(local * (k + 1) + shared.data, minlength=n_rows * (k + 1))
        below = np.cumsum(histogram.reshape(n_rows, k + 1), axis=1)
        threshold = (below < take[:, None]).sum(axis=1)
        chosen = shared.data <= threshold[local]
        local = local[chosen]
        cells = local + rows.start
        d = _relu_distance(x[shared.indices[chosen]], x[cells], nearest[cells])
        # each row's distances in decreasing order, then the sum of its first take
        order = np.argsort(-d, kind="stable")
        order = order[np.argsort(local[order], kind="stable")]
        first = np.concatenate([[0], np.cumsum(np.bincount(local, minlength=n_rows))[:-1]])
        rank = np.arange(len(order)) - first[local[order]]
        keep = order[rank < take[local[order]]]
        sums = np.bincount(local[keep], weights=d[keep], minlength=n_rows)
        out: np.ndarray = sums / take
        return out

    return np.concatenate(_map_blocks(_row_blocks(n, 8 * k * k * (x.shape[1] + 4)), block))


def _modality_weights(
    normed: Sequence[np.ndarray],
    neighbours: Sequence[np.ndarray],
    *,
    nearest: np.ndarray,
    bandwidths: np.ndarray,
) -> np.ndarray:
    """The per-cell modality weights: a softmax of the clipped affinity ratios (``FindModalityWeights``)."""
    n_mod = len(normed)
    scores: list[np.ndarray] = []
    for m in range(n_mod):
        within = _kernel(
            _predicted(normed[m], neighbours[m][:, 1:], nearest=nearest[:, m]), bandwidths[:, m]
        )
        for m2 in range(n_mod):
            if m2 == m:
                continue
            cross = _kernel(
                _predicted(normed[m], neighbours[m2][:, 1:], nearest=nearest[:, m]),
                bandwidths[:, m],
            )
            scores.append(np.clip(within / (cross + CROSS_CONSTANT), 0.0, SCORE_MAX))
    exp = np.exp(np.stack(scores, axis=1)).reshape(-1, n_mod, n_mod - 1)
    per_modality = exp.sum(axis=2)
    out: np.ndarray = per_modality / exp.reshape(exp.shape[0], -1).sum(axis=1)[:, None]
    return out


def _weighted_block(
    rows: slice,
    normed: Sequence[np.ndarray],
    candidates: np.ndarray,
    *,
    k: int,
    nearest: np.ndarray,
    bandwidths: np.ndarray,
    weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar candidates of a block of rows, and their similarities."""
    cand = candidates[rows]
    order = np.argsort(cand, axis=1, kind="stable")
    ranked = np.take_along_axis(cand, order, axis=1)
    repeated = np.zeros(cand.shape, dtype=bool)
    repeated[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
    duplicate = np.empty_like(repeated)
    np.put_along_axis(duplicate, order, repeated, axis=1)
    theta = np.zeros(cand.shape, dtype=np.float64)
    for m, x in enumerate(normed):
        d = _relu_distance(x[cand], x[rows][:, None, :], nearest[rows, m][:, None])
        theta += _kernel(d, bandwidths[rows, m][:, None]) * weights[rows, m][:, None]
    theta[duplicate] = -np.inf
    top = np.argsort(-theta, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(cand, top, axis=1), np.take_along_axis(theta, top, axis=1)


def weighted_neighbors(
    embeddings: Sequence[np.ndarray], *, k: int = 20, seed: int = 0, search: str | None = None
) -> WeightedNeighbors:
    """Seurat's weighted nearest neighbours of ``M >= 2`` embeddings of the same cells.

    The algorithm, and where it differs from Seurat, is in the module
    docstring (:mod:`cytearc.ops.wnn`).

    Parameters
    ----------
    embeddings
        One array per modality, cells x dimensions, the same cells in the
        same order (such as PCA coordinates of RNA and of ADT).
    k
        Seurat's ``k.nn``: neighbours per modality (the cell included) for
        the weights and bandwidths, and weighted neighbours per cell (the
        cell excluded); 2 to ``n - 1``.
    seed
        The seed of an approximate neighbour search.
    search
        ``"exact"`` or ``"nndescent"`` (:func:`~cytearc.ops.neighbors.knn`);
        None for exact below :data:`~cytearc.ops.neighbors.EXACT_BELOW` cells.

    Returns
    -------
    WeightedNeighbors
        The weighted neighbours, their similarities and distances, and the
        modality weights and bandwidths.

    Raises
    ------
    OperationArgumentError
        Fewer than two embeddings, embeddings of different numbers of cells,
        or ``k`` out of range.

    Examples
    --------
    Two modalities of 60 cells in three groups; the second separates the
    groups and the first is noise, so the second weighs more:

    >>> rng = np.random.default_rng(0)
    >>> groups = np.repeat(np.arange(3), 20)
    >>> noise = rng.normal(size=(60, 5))
    >>> informative = rng.normal(size=(60, 5)) * 0.1 + 3 * np.eye(5)[groups]
    >>> wnn = weighted_neighbors([noise, informative], k=10)
    >>> wnn.indices.shape, bool(wnn.weights[:, 1].mean() > 0.5)
    ((60, 10), True)
    >>> bool((groups[wnn.indices] == groups[:, None]).all())
    True
    """
    if len(embeddings) < 2:
        msg = f"{_OPERATION}: expected at least two embeddings, found {len(embeddings)}; pass one per modality"
        raise OperationArgumentError(msg)
    normed = [_l2_normalize(x) for x in embeddings]
    n = normed[0].shape[0]
    if any(x.ndim != 2 or x.shape[0] != n for x in normed):
        shapes = [tuple(x.shape) for x in normed]
        msg = f"{_OPERATION}: expected embeddings of the same cells (one row each), found shapes {shapes}"
        raise OperationArgumentError(msg)
    k = parse_int(k, name="k", operation=_OPERATION, minimum=2)
    if k > n - 1:
        msg = f"{_OPERATION}: k={k} needs more than {n} cells; pass a smaller k"
        raise OperationArgumentError(msg)
    width = min(n, max(k + 1, KNN_RANGE))
    found = [_self_first(*knn(x, width, seed=seed, search=search)) for x in normed]
    neighbours = [indices[:, :k] for indices, _ in found]
    nearest = np.stack([distances[:, 1] for _, distances in found], axis=1)
    bandwidths = SD_SCALE * np.stack(
        [
            _bandwidths(x, nn, nearest=nearest[:, m])
            for m, (x, nn) in enumerate(zip(normed, neighbours, strict=True))
        ],
        axis=1,
    )
    weights = _modality_weights(normed, neighbours, nearest=nearest, bandwidths=bandwidths)
    candidates = np.concatenate([indices[:, 1:width] for indices, _ in found], axis=1)
    row_bytes = 8 * candidates.shape[1] * (max(x.shape[1] for x in normed) + 4)
    blocks = _map_blocks(
        _row_blocks(n, row_bytes),
        lambda rows: _weighted_block(
            rows,
            normed,
            candidates,
            k=k,
            nearest=nearest,
            bandwidths=bandwidths,
            weights=weights,
        ),
    )
    similarity = np.concatenate([theta for _, theta in blocks])
    return WeightedNeighbors(
        indices=np.concatenate([top for top, _ in blocks]).astype(np.int64),
        similarity=similarity,
        distances=np.sqrt(np.clip((1.0 - similarity) / 2.0, 0.0, 1.0)),
        weights=weights,
        bandwidths=bandwidths,
        nearest=nearest,
    )


def embedding_assay(ds: AnalysisStore, embedding: Artifact) -> str:
    """The assay an embedding was computed from: its lineage's ``normalized`` artifact's ``assay``.

    The lineage is followed through an input of kind ``normalized`` where
    there is one, else through the first input (as a ``harmony`` artifact's
    ``pca``).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    embedding
        An artifact computed from normalized values (such as a ``pca``).

    Returns
    -------
    str
        The ``assay`` parameter of the ``normalized`` artifact.

    Raises
    ------
    OperationArgumentError
        The lineage reaches no ``normalized`` artifact.
    MissingArtifactError, IncompleteArtifactError
        An artifact of the lineage was removed or never published.
    """
    node = embedding
    while node.ref.kind != "normalized":
        parents = node.inputs()
        if not parents:
            msg = f"{embedding.ref}: {_OPERATION}: expected an embedding whose lineage reaches a normalized artifact, found none; pass an embedding computed by reduce.pca (or lsi, harmony) from normalized values"
            raise OperationArgumentError(msg)
        normalized = [ref for ref in parents.values() if ref.kind == "normalized"]
        node = open_artifact(ds.root, normalized[0] if normalized else next(iter(parents.values())))
    return str(node.parameters["assay"])


def _parse_names(value: object, *, name: str) -> list[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        msg = f"{_OPERATION}: {name} must be a list, found {value!r}"
        raise OperationArgumentError(msg)
    return list(value)


def _parse_assays(ds: AnalysisStore, assays: object) -> list[str]:
    names = _parse_names(assays, name="assays")
    if len(names) < 2 or not all(isinstance(a, str) for a in names):
        msg = f"{_OPERATION}: assays must be a list of at least two assay names, found {assays!r}"
        raise OperationArgumentError(msg)
    if len(set(names)) != len(names):
        msg = f"{_OPERATION}: assays must name each assay once, found {names!r}"
        raise OperationArgumentError(msg)
    for assay in names:
        if assay not in ds.assays:
            msg = f"{ds.where}: {_OPERATION}: no assay {assay!r}; the store has {sorted(ds.assays)} - pass some of them"
            raise AssayNotFoundError(msg)
    return names


def _parse_n_comps(n_comps: object, n_modalities: int) -> list[int] | None:
    if n_comps is None:
        return None
    values = _parse_names(n_comps, name="n_comps")
    if len(values) != n_modalities:
        msg = f"{_OPERATION}: n_comps must hold one count per assay ({n_modalities}), found {n_comps!r}"
        raise OperationArgumentError(msg)
    return [parse_int(v, name="n_comps", operation=_OPERATION, minimum=1) for v in values]


def _shared_mask(ds: AnalysisStore, sources: Sequence[Artifact]) -> np.ndarray:
    """The cells of the embeddings, refused unless every one stands for the same cells."""
    masks = [artifact_cell_mask(ds, source) for source in sources]
    for source, mask in zip(sources, masks, strict=True):
        if not np.array_equal(mask, masks[0]):
            msg = f"{ds.where}: {_OPERATION}: the embeddings {sources[0].ref} ({int(masks[0].sum())} cells) and {source.ref} ({int(mask.sum())} cells) were computed over different cell selections; compute every embedding over the same cell_selection"
            raise OperationArgumentError(msg)
        rows = int(source.array("coords").shape[0])
        if rows != int(mask.sum()):
            msg = f"{source.ref}: {_OPERATION}: expected one coords row per selected cell ({int(mask.sum())}), found {rows}"
            raise OperationArgumentError(msg)
    return masks[0]


def modalities(
    ds: AnalysisStore,
    assays: Sequence[str],
    *,
    embeddings: Sequence[ArtifactLike],
    n_comps: Sequence[int] | None = None,
    k: int = 20,
    cell_selection: SelectionLike = None,
    seed: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """One kNN graph of several assays of the same cells: Seurat's WNN (a ``neighbors`` artifact).

    Each cell weighs the assays by how well each predicts its own
    neighbourhood, and its neighbours are the cells most similar under that
    weighting (:func:`weighted_neighbors`, whose module docstring states the
    algorithm and its differences from Seurat's ``FindMultiModalNeighbors``).
    The artifact, scoped to the first assay, holds ``indices`` (int32) and
    ``distances`` (float32), cells x ``k + 1``: the cell itself at distance 0,
    then its ``k`` weighted neighbours at Seurat's distance
    ``sqrt((1 - theta) / 2)`` of their weighted similarity ``theta``; the
    connectivities (UMAP's fuzzy simplicial set, ``conn_indptr``,
    ``conn_indices``, ``conn_data``), which Leiden and UMAP read as they read
    those of ``graph.neighbors``; and ``weights`` (float64, cells x assays),
    each cell's modality weights. Its inputs are the embeddings, named
    ``embedding``, ``embedding2``, ...: the first gives the cells and UMAP's
    initial layout.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assays
        Two or more assays of the store, each named once.
    embeddings
        One embedding per assay, in the same order: a ``pca``, ``lsi`` or
        ``harmony`` artifact (or its ref) computed from that assay, all over
        the same cell selection.
    n_comps
        The leading components of each embedding to use; None for all.
    k
        Seurat's ``k.nn``: neighbours per cell (2 to the number of cells
        minus one), also of the per-modality searches that set the weights.
    cell_selection
        The cells of the embeddings (a selection's ref, a boolean cell
        column, or a mask), checked to be theirs; None takes them from the
        embeddings. Every one must have been measured by every assay.
    seed
        The seed of an approximate neighbour search (from
        :data:`~cytearc.ops.neighbors.EXACT_BELOW` cells) and of the
        connectivities.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``neighbors`` artifact; provenance operation
        ``integration.modalities``.

    Raises
    ------
    OperationArgumentError
        The lists are of other lengths, an embedding is not of an embedding
        kind or was computed from another assay, the embeddings stand for
        different cells (or others than ``cell_selection``), or an argument
        is of the wrong type or out of range.
    AssayNotFoundError
        An assay is not in the store.
    UnmeasuredCellsError
        An assay did not measure some of the cells.
    MissingArtifactError, IncompleteArtifactError
        An embedding, or an artifact of its lineage, names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    RNA and ADT counts of 60 cells in two groups, imported as one matrix:

    >>> import tempfile, pandas as pd, scipy.sparse as sp
    >>> from cytearc import DataStore, SparseToZarr
    >>> rng = np.random.default_rng(0)
    >>> group = np.repeat([0, 1], 30)
    >>> rna = rng.poisson(1 + 4 * np.eye(2)[group].repeat(10, axis=1))
    >>> adt = rng.poisson(5 + 20 * np.eye(2)[group].repeat(3, axis=1))
    >>> features = pd.DataFrame({
    ...     "ids": [f"g{i}" for i in range(20)] + [f"a{i}" for i in range(6)],
    ...     "names": [f"G{i}" for i in range(20)] + [f"CD{i}" for i in range(6)],
    ...     "feature_types": ["Gene Expression"] * 20 + ["Antibody Capture"] * 6})
    >>> cells = pd.DataFrame({"ids": [f"c{i}" for i in range(60)]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = SparseToZarr(sp.csr_matrix(np.hstack([rna, adt])), cells=cells,
    ...                         features=features, zarr_loc=f"{d}/ds.zarr", cluster="threads",
    ...                         show_progress=False).dump().path
    ...     ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    ...     pcs = []
    ...     for assay in ("RNA", "ADT"):
    ...         norm = ds.features.normalize(assay)
    ...         pcs.append(ds.reduce.pca(norm, ds.features.hvgs(norm, n_top=20), n_comps=4))
    ...     graph = modalities(ds, ["RNA", "ADT"], embeddings=pcs, k=10)
    ...     graph.read("weights").shape, graph.read("indices").shape
    ((60, 2), (60, 11))
    """
    names = _parse_assays(ds, assays)
    refs = _parse_names(embeddings, name="embeddings")
    if len(refs) != len(names):
        msg = f"{_OPERATION}: expected one embedding per assay ({len(names)}), found {len(refs)}; pass embeddings=[...] in the order of assays"
        raise OperationArgumentError(msg)
    sources = [open_input(ds, ref, kind=EMBEDDINGS, operation=_OPERATION) for ref in refs]
    counts = _parse_n_comps(n_comps, len(names))
    k = parse_int(k, name="k", operation=_OPERATION, minimum=2)
    seed = parse_seed(seed, operation=_OPERATION)
    mask = _shared_mask(ds, sources)
    for assay, source in zip(names, sources, strict=True):
        found = embedding_assay(ds, source)
        if found != assay:
            msg = f"{source.ref}: {_OPERATION}: the embedding for assay {assay!r} was computed from assay {found!r}; pass an embedding of {assay!r} in that position"
            raise OperationArgumentError(msg)
    n_cells = int(mask.sum())
    if k > n_cells - 1:
        msg = f"{_OPERATION}: k={k} needs more than the {n_cells} cells; pass a smaller k"
        raise OperationArgumentError(msg)
    if cell_selection is not None:
        chosen = read_selection_mask(ds, cell_selection)
        if chosen.shape != mask.shape or not np.array_equal(chosen, mask):
            msg = f"{ds.where}: {_OPERATION}: cell_selection selects {int(chosen.sum())} cells, not the {n_cells} cells of the embeddings ({sources[0].ref}); pass the embeddings' selection, or None"
            raise OperationArgumentError(msg)
    for assay in names:
        read_measured_mask(
            ds, assay, mask if cell_selection is None else cell_selection, operation=_OPERATION
        )
    totals = [int(source.array("coords").shape[1]) for source in sources]
    used = totals if counts is None else [min(c, t) for c, t in zip(counts, totals, strict=True)]
    search = default_search(n_cells)

    def build(writer: ArtifactWriter) -> None:
        coords = [s.read("coords")[:, :u] for s, u in zip(sources, used, strict=True)]
        result = weighted_neighbors(coords, k=k, seed=seed, search=search)
        cells = np.arange(n_cells)[:, None]
        indices = np.concatenate([cells, result.indices], axis=1)
        distances = np.concatenate([np.zeros((n_cells, 1)), result.distances], axis=1)
        graph = connectivities(indices, distances, seed=seed)
        writer.write("indices", indices.astype(np.int32))
        writer.write("distances", distances.astype(np.float32))
        writer.write("conn_indptr", graph.indptr.astype(np.int64))
        writer.write("conn_indices", graph.indices.astype(np.int32))
        writer.write("conn_data", graph.data.astype(np.float32))
        writer.write("weights", result.weights)

    return reuse_or_publish(
        ds,
        scope=names[0],
        kind="neighbors",
        operation=_OPERATION,
        parameters={
            "assays": names,
            "k": k,
            "nComps": used,
            "metric": "euclidean",
            "l2Norm": True,
            "knnRange": KNN_RANGE,
            "sdScale": SD_SCALE,
            "crossConstant": CROSS_CONSTANT,
            "search": search,
            "seed": seed,
        },
        inputs={
            ("embedding" if i == 0 else f"embedding{i + 1}"): source.ref
            for i, source in enumerate(sources)
        },
        build=build,
        invalidate_cache=invalidate_cache,
    )
