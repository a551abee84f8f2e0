"""``cluster.leiden``: Leiden clusters of the kNN graph's connectivities (igraph or leidenalg), seeded."""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
import scipy.sparse as sp

from cytearc.errors import OperationArgumentError
from cytearc.ops.arguments import parse_choice, parse_float, parse_int, parse_seed
from cytearc.ops.neighbors import load_connectivities
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish, write_cell_column
from cytearc.ops.selection import artifact_cell_mask

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = ["LEIDEN_FLAVORS", "leiden"]

LEIDEN_FLAVORS: Final = ("igraph", "leidenalg")
"""The Leiden implementations :func:`leiden` runs (scanpy's ``flavor`` names)."""
_IGRAPH_RNG = threading.Lock()
"""igraph's random number generator is one per process: one seeded run holds it at a time."""


def leiden(
    ds: AnalysisStore,
    graph: ArtifactLike,
    *,
    resolution: float = 1.0,
    seed: int = 0,
    n_iterations: int = 2,
    flavor: Literal["igraph", "leidenalg"] = "igraph",
    label: str | None = None,
    invalidate_cache: bool = False,
) -> Artifact:
    """Leiden clusters of the connectivities (a ``clustering`` artifact).

    Both flavors maximise the same quality, modularity with a resolution
    (leidenalg's RB configuration model) on the undirected weighted graph,
    as scanpy's ``tl.leiden(flavor=...)`` does: ``"igraph"`` is igraph's C
    implementation (``Graph.community_leiden``, ``beta=0.01``), an order of
    magnitude faster; ``"leidenalg"`` is the leidenalg package's
    ``RBConfigurationVertexPartition``. Clusters are numbered from 1 by
    decreasing size. The labels are also written to the cell column
    ``<assay>_leiden_cluster`` (or ``label``), with -1 for cells outside the
    selection.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    graph
        The ``neighbors`` artifact (:func:`~cytearc.ops.neighbors.neighbors`),
        or its ref.
    resolution
        The resolution of modularity (> 0); a higher one gives more, smaller
        clusters.
    seed
        The seed of the optimiser (igraph's random numbers come from a
        :class:`random.Random` of this seed).
    n_iterations
        Iterations of the optimiser (2, scanpy's default); -1 iterates
        until an iteration no longer improves the partition.
    flavor
        ``"igraph"`` (the default) or ``"leidenalg"``.
    label
        The cell column the labels are written to (default
        ``<assay>_leiden_cluster``).
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``clustering`` artifact: ``labels`` (int32), one cluster per
        cell of the graph.

    Raises
    ------
    OperationArgumentError
        ``graph`` is not a ``neighbors`` artifact, or an argument is of the
        wrong type or out of range (``resolution`` <= 0, an empty ``label``).
    MissingArtifactError, IncompleteArtifactError
        ``graph`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    """
    operation = "cluster.leiden"
    source = open_input(ds, graph, kind="neighbors", operation=operation)
    resolution = parse_float(resolution, name="resolution", operation=operation, positive=True)
    seed = parse_seed(seed, operation=operation)
    n_iterations = parse_int(n_iterations, name="n_iterations", operation=operation, minimum=-1)
    flavor = parse_choice(flavor, LEIDEN_FLAVORS, name="flavor", operation=operation)
    if label is not None and not label:
        msg = f"{operation}: label must be a non-empty column name or None, found {label!r}"
        raise OperationArgumentError(msg)

    def build(writer: ArtifactWriter) -> None:
        import igraph  # noqa: PLC0415

        conn = sp.triu(load_connectivities(source), k=1).tocoo()
        g = igraph.Graph(
            n=conn.shape[0],
            edges=list(zip(conn.row.tolist(), conn.col.tolist(), strict=True)),
            directed=False,
        )
        weights = conn.data.astype(np.float64).tolist()
        if flavor == "igraph":
            with _IGRAPH_RNG:
                igraph.set_random_number_generator(random.Random(seed))
                try:
                    membership = g.community_leiden(
                        objective_function="modularity",
                        weights=weights,
                        resolution=resolution,
                        beta=0.01,
                        n_iterations=n_iterations,
                    ).membership
                finally:
                    igraph.set_random_number_generator(random)
        else:
            import leidenalg  # noqa: PLC0415

            membership = leidenalg.find_partition(
                g,
                leidenalg.RBConfigurationVertexPartition,
                weights=weights,
                resolution_parameter=resolution,
                n_iterations=n_iterations,
                seed=seed,
            ).membership
        raw = np.asarray(membership, dtype=np.int64)
        sizes = np.bincount(raw)
        order = np.argsort(-sizes, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(1, len(order) + 1)
        writer.write("labels", rank[raw].astype(np.int32))

    artifact = reuse_or_publish(
        ds,
        scope=source.ref.scope,
        kind="clustering",
        operation="cluster.leiden",
        parameters={
            "resolution": float(resolution),
            "seed": seed,
            "nIterations": n_iterations,
            "flavor": flavor,
        },
        inputs={"neighbors": source.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )
    column = label or f"{source.ref.scope}_leiden_cluster"
    write_cell_column(
        ds,
        column,
        artifact.read("labels"),
        mask=artifact_cell_mask(ds, artifact),
        fill=-1,
        artifact=artifact,
    )
    return artifact
