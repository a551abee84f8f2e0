"""``embedding.umap``: UMAP coordinates from the stored kNN graph (umap-learn's layout), seeded."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from cytearc.artifacts import Artifact, open_artifact
from cytearc.errors import OperationArgumentError
from cytearc.ops.arguments import parse_float, parse_int, parse_seed
from cytearc.ops.neighbors import load_connectivities, umap_module
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish, write_cell_column
from cytearc.ops.selection import artifact_cell_mask

if TYPE_CHECKING:
    from cytearc.artifacts import ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = ["umap"]


def umap(
    ds: AnalysisStore,
    graph: ArtifactLike,
    *,
    n_components: int = 2,
    min_dist: float = 0.5,
    spread: float = 1.0,
    n_epochs: int | None = None,
    seed: int = 0,
    label: str | None = None,
    invalidate_cache: bool = False,
) -> Artifact:
    """UMAP coordinates from the stored graph (a ``umap`` artifact), initialised from PCA.

    Also written to the cell columns ``<assay>_UMAP1``, ``<assay>_UMAP2``
    (or ``<label>1``, ``<label>2``; NaN outside the selection).

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    graph
        The ``neighbors`` artifact (:func:`~cytearc.ops.neighbors.neighbors`),
        or its ref; its embedding (input ``pca`` or ``embedding``) gives the
        initial layout.
    n_components
        Dimensions of the embedding (the first two are written as cell
        columns).
    min_dist
        UMAP's ``min_dist`` (>= 0 and at most ``spread``): how tightly points may pack.
    spread
        UMAP's ``spread`` (> 0): the scale of the embedded points.
    n_epochs
        Optimisation epochs; None: 500 up to 10,000 cells, else 200.
    seed
        The seed of the layout's random state.
    label
        The prefix of the two cell columns written (``<label>1``,
        ``<label>2``); None for ``<assay>_UMAP``.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``umap`` artifact: ``coords`` (float32, cells x ``n_components``).

    Raises
    ------
    OperationArgumentError
        ``graph`` is not a ``neighbors`` artifact, or an argument is of the
        wrong type or out of range.
    MissingArtifactError, IncompleteArtifactError
        ``graph`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    """
    operation = "layout.umap"
    source = open_input(ds, graph, kind="neighbors", operation=operation)
    n_components = parse_int(n_components, name="n_components", operation=operation, minimum=1)
    spread = parse_float(spread, name="spread", operation=operation, positive=True)
    parse_float(min_dist, name="min_dist", operation=operation, non_negative=True, maximum=spread)
    if n_epochs is not None:
        n_epochs = parse_int(n_epochs, name="n_epochs", operation=operation, minimum=1)
    seed = parse_seed(seed, operation=operation)
    if label is not None and (not isinstance(cast("object", label), str) or not label):
        msg = f"{operation}: label must be a non-empty column prefix or None, found {label!r}"
        raise OperationArgumentError(msg)
    inputs = source.inputs()
    pca_ref = inputs.get("pca", inputs.get("embedding"))
    if pca_ref is None:
        msg = f"{source.ref}: {operation} starts from the embedding of the graph (its input 'pca' or 'embedding'), found inputs {sorted(inputs)}; pass a graph made by graph.neighbors or integration.modalities"
        raise OperationArgumentError(msg)

    def build(writer: ArtifactWriter) -> None:
        umap_ = umap_module()
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

    artifact = reuse_or_publish(
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
    mask = artifact_cell_mask(ds, artifact)
    coords = artifact.read("coords")
    prefix = label or f"{source.ref.scope}_UMAP"
    for i in range(min(2, n_components)):
        write_cell_column(
            ds,
            f"{prefix}{i + 1}",
            coords[:, i].astype(np.float64),
            mask=mask,
            fill=np.nan,
            artifact=artifact,
        )
    return artifact
