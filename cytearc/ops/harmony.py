"""``integration.harmony``: batch-corrected PCA coordinates by Harmony (the ``harmonypy`` package).

Harmony (Korsunsky et al., Nature Methods 2019) soft-clusters the cells of
an embedding with a penalty for clusters that hold few batches, and moves
each cell by a per-cluster linear correction of its batch, a few rounds
until the objective settles. The embedding is small (cells x ~50
components), so it runs in the client process on whole arrays, as the graph
does; nothing is computed on the Dask engine.

``harmonypy`` (2.x, a C++ backend) is licensed GPL-3.0-or-later while
CyteArc is MIT, so it stays an optional dependency: it is imported when the
operation runs, and a missing package is refused, naming
``pip install harmonypy``, before anything is read or written. It runs on
one thread (``ncores=1``), seeded: equal inputs give equal bits in any
process and with any number of threads (harmonypy's threads split the work,
not the arithmetic).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from cytearc.errors import ArtifactError, MissingDependencyError, OperationArgumentError
from cytearc.ops.arguments import parse_cell_column, parse_float, parse_int, parse_seed
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish, values_digest
from cytearc.ops.selection import artifact_cell_mask, group_labels

if TYPE_CHECKING:
    from types import ModuleType

    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = ["MAX_CLUSTERS", "default_clusters", "harmony", "harmonypy_module"]

MAX_CLUSTERS: Final = 100
"""The most clusters :func:`default_clusters` gives (harmonypy's and R harmony's cap)."""

_OPERATION: Final = "integration.harmony"


def harmonypy_module() -> ModuleType:
    """The ``harmonypy`` package, or the error that says how to install it.

    Returns
    -------
    types.ModuleType
        The module ``harmonypy``.

    Raises
    ------
    MissingDependencyError
        ``harmonypy`` is not installed (a ``ModuleNotFoundError``); the
        message gives the command that installs it.
    """
    try:
        return importlib.import_module("harmonypy")
    except ImportError as error:
        msg = f"{_OPERATION} runs the harmonypy package (GPL-3.0-or-later, not installed with CyteArc), which cannot be imported here ({error}); install it with `pip install harmonypy`"
        raise MissingDependencyError(msg, name="harmonypy") from error


def default_clusters(n_cells: int) -> int:
    """Harmony's default number of clusters: ``n_cells / 30`` rounded, from 1 to 100.

    harmonypy's own default, ``min(round(n_cells / 30), 100)``, raised to 1
    for fewer than 15 cells.

    Parameters
    ----------
    n_cells
        The cells of the embedding.

    Returns
    -------
    int
        The number of clusters.

    Examples
    --------
    >>> default_clusters(600), default_clusters(10), default_clusters(1_000_000)
    (20, 1, 100)
    """
    return max(1, min(round(n_cells / 30.0), MAX_CLUSTERS))


def _batch_labels(ds: AnalysisStore, batch_key: str, mask: np.ndarray) -> np.ndarray:
    """The batch of each cell of ``mask``, refused when one lacks a label or all share one."""
    values, labelled = group_labels(ds, batch_key)
    labels: np.ndarray = values[mask]
    present = labelled[mask]
    if not present.all():
        missing = np.flatnonzero(mask)[~present]
        msg = f"{ds.where}: {_OPERATION}: batch_key {batch_key!r} has no label (NaN, negative, empty or missing) for {len(missing)} of the {len(labels)} cells of the embedding, the first at row {int(missing[0])}; label those cells, or compute the embedding over labelled cells only"
        raise OperationArgumentError(msg)
    batches = np.unique(labels.astype(str) if labels.dtype.kind == "O" else labels)
    if len(batches) < 2:
        msg = f"{ds.where}: {_OPERATION}: batch_key {batch_key!r} holds one batch ({batches.tolist()[0]!r}) among the {len(labels)} cells of the embedding; harmony needs two or more batches - pass a column that tells the batches apart"
        raise OperationArgumentError(msg)
    return labels


def harmony(
    ds: AnalysisStore,
    pca: ArtifactLike,
    *,
    batch_key: str,
    n_comps: int | None = None,
    theta: float = 2.0,
    sigma: float = 0.1,
    n_clusters: int | None = None,
    lamb: float | None = None,
    alpha: float = 0.2,
    tau: float = 0.0,
    block_size: float = 0.05,
    max_iter: int = 10,
    max_iter_kmeans: int = 4,
    epsilon_cluster: float = 1e-3,
    epsilon_harmony: float = 1e-2,
    batch_prop_cutoff: float = 1e-5,
    seed: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """Harmony's batch correction of a PCA embedding (a ``harmony`` artifact).

    The artifact holds ``coords`` (float32 like the PCA's, cells x
    components: one row per cell of the PCA, in its order), harmonypy's
    ``Z_corr``. Its provenance names the PCA (input ``pca``, first, so the
    lineage leads to the cells) and the batch labels of its cells (input
    ``batch``, their :func:`~cytearc.ops.publication.values_digest`); the
    ``coords`` array's attribute ``harmonypyVersion`` records the version
    that computed it, which is no part of the identity.
    :func:`~cytearc.ops.neighbors.neighbors` takes the artifact as its
    embedding.

    Requires the optional package ``harmonypy`` (GPL-3.0-or-later):
    ``pip install harmonypy``.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    pca
        The ``pca`` artifact (:func:`~cytearc.ops.pca.pca`), or its ref.
    batch_key
        The cell column of the batches (text, categories or numbers). Every
        cell of the PCA needs a label (no NaN, negative number, empty text
        or missing value, as :func:`~cytearc.ops.selection.group_labels`
        reads them), and they must hold two batches or more.
    n_comps
        The leading components corrected; None for all of them (at most
        all of them).
    theta
        The diversity penalty (>= 0): higher mixes the batches more
        within each cluster; 0 corrects without it.
    sigma
        The width of the soft clustering (> 0): higher spreads each cell
        over more clusters.
    n_clusters
        Harmony's clusters (1 to the number of cells); None for
        :func:`default_clusters`. The value used is recorded.
    lamb
        The ridge penalty of the correction (>= 0); None estimates it in
        each cluster from ``alpha``.
    alpha
        The fraction of a cluster's expected cells (> 0) from which the
        ridge penalty is estimated (when ``lamb`` is None).
    tau
        The protection against overcorrecting small batches (>= 0; 0 for
        none): ``theta`` shrinks for batches of fewer than about
        ``n_clusters * tau`` cells.
    block_size
        The fraction of the cells (in (0, 1]) updated at once in each
        clustering round.
    max_iter
        The most rounds of clustering and correction (>= 1).
    max_iter_kmeans
        The most clustering updates per round (>= 1).
    epsilon_cluster, epsilon_harmony
        The relative changes of the clustering and of Harmony's objective
        (> 0) below which clustering, and the rounds, stop.
    batch_prop_cutoff
        The smallest fraction of a cluster (from 0 to 1) a batch must hold
        to be corrected in it.
    seed
        The seed of the initial clustering.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``harmony`` artifact, in the PCA's scope.

    Raises
    ------
    OperationArgumentError
        ``pca`` is not a ``pca`` artifact; ``batch_key`` names no cell
        column (the message lists them), leaves a cell of the embedding
        without a label, or holds a single batch; or an argument is of the
        wrong type or out of range. Nothing is written.
    MissingDependencyError
        ``harmonypy`` is not installed (``pip install harmonypy``); raised
        before anything is written, also when an artifact could be reused.
    MissingArtifactError, IncompleteArtifactError
        ``pca`` names no published artifact.
    ArtifactError
        The PCA's lineage reaches no cell selection, or its rows are not
        the selection's cells.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> path = write_store(f"{tempfile.mkdtemp()}/pbmc.zarr", n_cells=300, n_genes=600,
    ...                    cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> norm = ds.features.normalize("RNA")
    >>> pca = ds.reduce.pca(norm, ds.features.hvgs(norm, n_top=200), n_comps=10)
    >>> corrected = harmony(ds, pca, batch_key="donor")
    >>> corrected.ref.kind, corrected.read("coords").shape
    ('harmony', (300, 10))
    >>> corrected.inputs()["pca"] == pca.ref
    True
    """
    source = open_input(ds, pca, kind="pca", operation=_OPERATION)
    batch_key = parse_cell_column(ds, batch_key, name="batch_key", operation=_OPERATION)
    n_cells, total = (int(n) for n in source.array("coords").shape)
    use = total
    if n_comps is not None:
        use = min(total, parse_int(n_comps, name="n_comps", operation=_OPERATION, minimum=1))
    if n_clusters is None:
        n_clusters = default_clusters(n_cells)
    n_clusters = parse_int(
        n_clusters, name="n_clusters", operation=_OPERATION, minimum=1, maximum=n_cells
    )
    numbers = {
        "theta": parse_float(theta, name="theta", operation=_OPERATION, non_negative=True),
        "sigma": parse_float(sigma, name="sigma", operation=_OPERATION, positive=True),
        "lamb": None
        if lamb is None
        else parse_float(lamb, name="lamb", operation=_OPERATION, non_negative=True),
        "alpha": parse_float(alpha, name="alpha", operation=_OPERATION, positive=True),
        "tau": parse_float(tau, name="tau", operation=_OPERATION, non_negative=True),
        "block_size": parse_float(
            block_size, name="block_size", operation=_OPERATION, positive=True, maximum=1.0
        ),
        "epsilon_cluster": parse_float(
            epsilon_cluster, name="epsilon_cluster", operation=_OPERATION, positive=True
        ),
        "epsilon_harmony": parse_float(
            epsilon_harmony, name="epsilon_harmony", operation=_OPERATION, positive=True
        ),
        "batch_prop_cutoff": parse_float(
            batch_prop_cutoff,
            name="batch_prop_cutoff",
            operation=_OPERATION,
            non_negative=True,
            maximum=1.0,
        ),
    }
    iterations = {
        "max_iter_harmony": parse_int(max_iter, name="max_iter", operation=_OPERATION, minimum=1),
        "max_iter_kmeans": parse_int(
            max_iter_kmeans, name="max_iter_kmeans", operation=_OPERATION, minimum=1
        ),
    }
    seed = parse_seed(seed, operation=_OPERATION)
    mask = artifact_cell_mask(ds, source)
    if int(mask.sum()) != n_cells:
        msg = f"{source.ref}: expected one row of coords per cell of its selection ({int(mask.sum())}), found {n_cells}; recompute the PCA"
        raise ArtifactError(msg)
    labels = _batch_labels(ds, batch_key, mask)
    module = harmonypy_module()

    def build(writer: ArtifactWriter) -> None:
        coords = source.read("coords")[:, :use]
        # components x cells: harmonypy reads cells x components too, but a square
        # matrix would be taken the other way round
        result = module.run_harmony(
            np.ascontiguousarray(coords.T, dtype=np.float64),
            {"batch": labels},
            "batch",
            nclust=n_clusters,
            max_iter_harmony=iterations["max_iter_harmony"],
            max_iter_kmeans=iterations["max_iter_kmeans"],
            **numbers,
            verbose=False,
            random_state=seed,
            ncores=1,
        )
        corrected = np.asarray(result.Z_corr, dtype=np.float64)
        if corrected.shape != (n_cells, use):
            msg = f"{_OPERATION}: harmonypy {module.__version__} returned coordinates of shape {corrected.shape}, expected {(n_cells, use)} (cells x components); use harmonypy 2.x"
            raise ArtifactError(msg)
        writer.write(
            "coords",
            corrected.astype(coords.dtype),
            chunks=(min(n_cells, 65536), use),
            attributes={"harmonypyVersion": str(module.__version__)},
        )

    parameters: dict[str, Any] = {
        "batchKey": batch_key,
        "nComps": use,
        "theta": numbers["theta"],
        "sigma": numbers["sigma"],
        "nClusters": n_clusters,
        "lamb": numbers["lamb"],
        "alpha": numbers["alpha"],
        "tau": numbers["tau"],
        "blockSize": numbers["block_size"],
        "maxIter": iterations["max_iter_harmony"],
        "maxIterKmeans": iterations["max_iter_kmeans"],
        "epsilonCluster": numbers["epsilon_cluster"],
        "epsilonHarmony": numbers["epsilon_harmony"],
        "batchPropCutoff": numbers["batch_prop_cutoff"],
        "seed": seed,
    }
    return reuse_or_publish(
        ds,
        scope=source.ref.scope,
        kind="harmony",
        operation=_OPERATION,
        parameters=parameters,
        inputs={"pca": source.ref, "batch": values_digest(labels)},
        build=build,
        invalidate_cache=invalidate_cache,
    )
