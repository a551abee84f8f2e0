"""``qc.hto_demultiplexing``: each cell's sample from its hashtag counts, as Seurat's HTODemux.

Seurat 4.3's ``HTODemux(positive.quantile=0.99)`` after the hashing
vignette's ``NormalizeData(normalization.method="CLR")``, over the selected
cells. Hashtag counts are a few numbers per cell, so the counts are read
through the engine and the rest runs in the client:

1. **CLR across cells** per hashtag, ``log1p(x / exp(mean(log1p(x))))``,
   NormalizeData's default ``margin = 1`` on which HTODemux clusters; not
   ``features.normalize(method="clr")``, which centres each cell over its
   features (``margin = 2``) and gives other clusters and margins.
2. **k-medoids** (``n_clusters``, default hashtags + 1) in Euclidean
   distance by CLARA, as ``cluster::clara(samples=100)``: samples of
   ``min(n, 40 + 2k)`` cells, each after the first holding the best medoids
   so far, clustered by PAM (BUILD, then the best swap while one lowers the
   cost); the medoids with the lowest sum of distances over all cells
   assign each cell to its nearest; clusters are numbered by their first
   cell. The samples come from ``numpy.random.default_rng(seed)``, not
   clara's own generator, so the medoids can differ from R's.
3. **Background and cutoff.** Per hashtag, the cluster with the lowest mean
   of ``expm1`` of the values (``AverageExpression``) is the background.
   ``fitdistrplus::fitdist(distr="nbinom")`` fits its counts by maximum
   likelihood with Nelder-Mead; here ``mu`` is the sample mean (its exact
   MLE) and the size the root of the profile score (Brent's method; the
   Poisson limit when the variance does not exceed the mean). The cutoff is
   the ``positive_quantile`` quantile of the fit; a count above it is
   positive. A cluster with a zero mean of some hashtag stops, as in R.
4. **Calls.** No positive hashtag: Negative; one: a Singlet of it; more: a
   Doublet. ``max_id`` holds the highest value and ``second_id`` the first
   hashtag holding the second highest (``MaxN``: the highest again when two
   share it); ``margin`` is their difference.

The result is an artifact of the assay's cells, not cell columns;
:func:`hto_calls` reads it as HTODemux's metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import pandas as pd
from scipy import optimize, special, stats
from scipy.spatial.distance import cdist

from cytearc.engine.arrays import take_rows
from cytearc.errors import AssayTypeError, NegativeCountsError, OperationArgumentError
from cytearc.ops.arguments import parse_bool, parse_float, parse_int, parse_seed
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish
from cytearc.ops.selection import SelectionLike, publish_measured_selection, read_measured_mask

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "CLARA_SAMPLES",
    "GLOBAL_CLASSES",
    "background_cutoff",
    "clara",
    "demultiplex",
    "fit_negative_binomial",
    "hto_calls",
    "hto_demultiplexing",
]

OPERATION: Final = "qc.hto_demultiplexing"
KIND: Final = "hto_demultiplexing"
GLOBAL_CLASSES: Final = ("Negative", "Singlet", "Doublet")
"""The names of the ``global`` codes 0, 1 and 2."""
CLARA_SAMPLES: Final = 100
"""Samples CLARA draws (HTODemux's ``nsamples``)."""
_LARGEST_SIZE: Final = 1e10
"""Negative-binomial sizes above this are the Poisson limit."""


def _clr_across_cells(counts: np.ndarray) -> np.ndarray:
    """Seurat's CLR with ``margin = 1``: ``log1p(x / exp(mean(log1p(x))))`` per hashtag (column)."""
    x = np.asarray(counts, dtype=np.float64)
    centre = np.exp(np.log1p(x).mean(axis=0))
    normalized: np.ndarray = np.log1p(x / centre)
    return normalized


def _pam(d: np.ndarray, k: int) -> np.ndarray:
    """PAM on a distance matrix: BUILD, then the best swap while it lowers the cost."""
    medoids = [int(np.argmin(d.sum(axis=1)))]
    nearest = d[medoids[0]].copy()
    for _ in range(1, k):
        gain = np.maximum(nearest[None, :] - d, 0.0).sum(axis=1)
        gain[medoids] = -1.0
        medoids.append(int(np.argmax(gain)))
        nearest = np.minimum(nearest, d[medoids[-1]])
    chosen = np.array(medoids)
    while True:
        to_medoids = d[chosen]
        order = np.argsort(to_medoids, axis=0, kind="stable")
        first = np.take_along_axis(to_medoids, order[:1], axis=0)[0]
        second = np.sort(to_medoids, axis=0)[1] if k > 1 else np.full(len(d), np.inf)
        candidates = np.setdiff1d(np.arange(len(d)), chosen)
        if not len(candidates):
            return chosen
        best, swap = -1e-12 * max(1.0, float(first.sum())), None
        for i in range(k):
            kept = np.where(order[0] == i, second, first)
            delta = (np.minimum(kept[None, :], d[candidates]) - first).sum(axis=1)
            h = int(np.argmin(delta))
            if delta[h] < best:
                best, swap = float(delta[h]), (i, int(candidates[h]))
        if swap is None:
            return chosen
        chosen[swap[0]] = swap[1]


def clara(x: np.ndarray, k: int, *, samples: int = CLARA_SAMPLES, seed: int = 0) -> np.ndarray:
    """k-medoids clusters of the rows of ``x`` by CLARA (Euclidean), numbered by their first row.

    Parameters
    ----------
    x
        Rows to cluster (float64).
    k
        Clusters (at most the rows).
    samples
        Samples of ``min(n, 40 + 2k)`` rows, each clustered by PAM; one when
        that is every row.
    seed
        Seeds :func:`numpy.random.default_rng`, which draws the samples.

    Returns
    -------
    numpy.ndarray
        int32 cluster of each row, from 0; rows in order meet the clusters
        in order.

    Examples
    --------
    >>> x = np.array([[0.0], [0.1], [5.0], [5.2], [0.2], [9.0]])
    >>> clara(x, 3).tolist()
    [0, 0, 1, 1, 0, 2]
    """
    n = len(x)
    size = min(n, 40 + 2 * k)
    rng = np.random.default_rng(seed)
    best_cost, best_medoids = np.inf, np.arange(k)
    for step in range(samples if size < n else 1):
        if size == n:
            sample = np.arange(n)
        elif step == 0:
            sample = np.sort(rng.choice(n, size, replace=False))
        else:  # the best medoids so far, and other rows
            drawn = rng.choice(n - k, size - k, replace=False)
            for medoid in best_medoids:
                drawn[drawn >= medoid] += 1
            sample = np.sort(np.concatenate([best_medoids, drawn]))
        medoids = sample[_pam(cdist(x[sample], x[sample]), k)]
        cost = float(cdist(x, x[medoids]).min(axis=1).sum())
        if cost < best_cost:
            best_cost, best_medoids = cost, np.sort(medoids)
    raw = np.argmin(cdist(x, x[best_medoids]), axis=1)
    present, first_rows = np.unique(raw, return_index=True)
    rank = np.zeros(k, dtype=np.int32)
    rank[present[np.argsort(first_rows)]] = np.arange(len(present), dtype=np.int32)
    labels: np.ndarray = rank[raw]
    return labels


def fit_negative_binomial(values: np.ndarray) -> tuple[float, float]:
    """The maximum-likelihood negative binomial of counts: ``(mu, size)``; size inf is Poisson.

    Parameters
    ----------
    values
        Non-negative integer counts.

    Returns
    -------
    tuple of float
        The mean (its MLE) and the size solving the profile score equation,
        or ``inf`` when the counts' variance (over n) does not exceed their
        mean.

    Examples
    --------
    >>> mu, size = fit_negative_binomial(np.array([0, 2, 3, 10, 1, 7, 0, 4]))
    >>> round(mu, 3), round(size, 3)
    (3.375, 1.077)
    """
    x = np.asarray(values, dtype=np.float64)
    n, mu = len(x), float(x.mean())
    if mu == 0.0 or float(x.var()) <= mu:
        return mu, np.inf

    def score(log_size: float) -> float:
        r = np.exp(log_size)
        return float((special.digamma(x + r) - special.digamma(r)).sum() + n * np.log(r / (r + mu)))

    high = np.log(mu**2 / (float(x.var()) - mu))
    while score(high) > 0.0:
        if high > np.log(_LARGEST_SIZE):
            return mu, np.inf
        high += 2.0
    low = high - 2.0
    while score(low) < 0.0:
        low -= 2.0
    return mu, float(np.exp(optimize.brentq(score, low, high, xtol=1e-12, rtol=1e-12)))


def background_cutoff(values: np.ndarray, *, quantile: float) -> float:
    """The ``quantile`` quantile (a whole count) of :func:`fit_negative_binomial` of counts.

    Parameters
    ----------
    values
        A hashtag's counts in its background cells.
    quantile
        HTODemux's ``positive.quantile``.

    Returns
    -------
    float
        :func:`scipy.stats.nbinom.ppf` of the fit (``poisson.ppf`` for an
        infinite size).

    Examples
    --------
    >>> background_cutoff(np.array([0, 2, 3, 10, 1, 7, 0, 4]), quantile=0.99)
    17.0
    """
    mu, size = fit_negative_binomial(values)
    if np.isinf(size):
        return float(stats.poisson.ppf(quantile, mu))
    return float(stats.nbinom.ppf(quantile, size, size / (size + mu)))


def demultiplex(
    counts: np.ndarray, *, positive_quantile: float, n_clusters: int, seed: int
) -> dict[str, np.ndarray]:
    """HTODemux's calls of hashtag counts in memory (the steps of the module docstring).

    Parameters
    ----------
    counts
        Cells x hashtags (at least 2).
    positive_quantile, n_clusters, seed
        As in :func:`hto_demultiplexing` (``n_clusters`` resolved).

    Returns
    -------
    dict of str to numpy.ndarray
        The arrays of the artifact of :func:`hto_demultiplexing` but
        ``rows`` and ``hashtags``: per cell ``global``, ``max_id``,
        ``second_id``, ``margin``, ``positive`` and ``cluster``, per hashtag
        ``cutoffs`` and ``background_cluster``.

    Raises
    ------
    OperationArgumentError
        A cluster holds no count of some hashtag (HTODemux: "Cells with zero
        counts exist as a cluster").
    """
    counts = np.asarray(counts)
    data = _clr_across_cells(counts)
    clusters = clara(data, n_clusters, seed=seed)
    sizes = np.bincount(clusters, minlength=n_clusters)
    totals = [np.bincount(clusters, weights=v, minlength=n_clusters) for v in np.expm1(data).T]
    with np.errstate(invalid="ignore"):
        average = np.stack(totals, axis=1) / sizes[:, None]
    average[sizes == 0] = np.inf  # a medoid that shares its values with another keeps no cell
    if (average == 0).any():
        cluster, hashtag = np.argwhere(average == 0)[0]
        msg = (
            f"{OPERATION}: cluster {cluster} ({sizes[cluster]} cells) holds no count of hashtag "
            f"column {hashtag}, so it has no background to fit (HTODemux: 'Cells with zero "
            "counts exist as a cluster'); select the cells with hashtag counts, e.g. after "
            "ds.qc.metrics('HTO'), cell_selection=ds.qc.filter({'HTO_nCounts': (1, None)}).ref"
        )
        raise OperationArgumentError(msg)
    background = np.argmin(average, axis=0).astype(np.int32)
    cutoffs = np.array(
        [
            background_cutoff(counts[clusters == c, j], quantile=positive_quantile)
            for j, c in enumerate(background)
        ]
    )
    positive = counts > cutoffs[None, :]
    n_positive = positive.sum(axis=1)
    top = np.sort(data, axis=1)
    return {
        "global": np.minimum(n_positive, 2).astype(np.int8),
        "max_id": np.argmax(data, axis=1).astype(np.int32),
        "second_id": np.argmax(data == top[:, -2:-1], axis=1).astype(np.int32),
        "margin": top[:, -1] - top[:, -2],
        "positive": positive,
        "cluster": clusters,
        "cutoffs": cutoffs,
        "background_cluster": background,
    }


def hto_demultiplexing(
    ds: AnalysisStore,
    assay: str = "HTO",
    *,
    cell_selection: SelectionLike = None,
    positive_quantile: float = 0.99,
    n_clusters: int | None = None,
    seed: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """Demultiplex the selected cells by their hashtag counts, as Seurat's HTODemux.

    The artifact (kind ``hto_demultiplexing``, scope ``assay``) holds, per
    selected cell: ``rows`` (int64), ``global`` (int8: 0 Negative, 1
    Singlet, 2 Doublet), ``max_id`` and ``second_id`` (int32 hashtag
    columns), ``margin`` (float64), ``positive`` (bool, cells x hashtags)
    and ``cluster`` (int32, the initial k-medoids cluster); per hashtag:
    ``hashtags`` (the feature names), ``cutoffs`` (float64 counts) and
    ``background_cluster`` (int32). :func:`hto_calls` reads it as a table.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    assay
        An assay declared ``HTO`` holding at least two hashtags.
    cell_selection
        The cells to demultiplex: a ``cell_selection`` artifact or its ref,
        the name of a boolean cell column, a boolean mask over every cell,
        or None for ``I``; the normalization and the fits are over them.
    positive_quantile
        The quantile of each hashtag's background fit that a count must
        exceed to be positive (> 0 and < 1; HTODemux's ``positive.quantile``).
    n_clusters
        Clusters of the initial k-medoids, from 2 to the selected cells;
        None for the hashtags + 1 (HTODemux's ``init``).
    seed
        Seeds the samples of the k-medoids.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``hto_demultiplexing`` artifact.

    Raises
    ------
    AssayNotFoundError
        The store has no assay ``assay``.
    AssayTypeError
        The assay is not declared ``HTO``, or holds fewer than two hashtags.
    OperationArgumentError
        An argument is of the wrong type or out of its domain, or a cluster
        holds no count of some hashtag (nothing is published).
    UnmeasuredCellsError
        A selected cell was not measured by ``assay``.
    StaleSelectionError
        ``cell_selection`` was made for other cell ids.
    NegativeCountsError
        A selected cell holds a negative count (nothing is published).
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets.hashtags import write_hashtag_store
    >>> path = write_hashtag_store(f"{tempfile.mkdtemp()}/hashing.zarr", n_cells=1000,
    ...                            cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> result = hto_demultiplexing(ds, "HTO")
    >>> calls = hto_calls(ds, result)
    >>> calls.columns.tolist()
    ['global', 'hashtag', 'classification', 'max_id', 'second_id', 'margin']
    >>> truth = ds.cells.fetch_all("truth_global")  # the generator's planted classes
    >>> bool((calls["global"].to_numpy() == truth).mean() > 0.9)
    True
    >>> hto_demultiplexing(ds, "HTO").ref == result.ref  # reused
    True
    """
    q = parse_float(positive_quantile, name="positive_quantile", operation=OPERATION, positive=True)
    if q >= 1.0:
        msg = f"{OPERATION}: positive_quantile must be a number > 0 and < 1, found {q!r}"
        raise OperationArgumentError(msg)
    if n_clusters is not None:
        n_clusters = parse_int(n_clusters, name="n_clusters", operation=OPERATION, minimum=2)
    seed = parse_seed(seed, operation=OPERATION)
    invalidate_cache = parse_bool(invalidate_cache, name="invalidate_cache", operation=OPERATION)
    source = ds.assays[assay]
    if source.assayType != "HTO":
        msg = (
            f"{ds.where}: {OPERATION}: demultiplexes an assay declared HTO; assay {assay!r} is "
            f"declared {source.assayType} - if it holds hashtag counts, declare it in a writable "
            f"open: DataStore(path, zarr_mode='r+', assay_types={{{assay!r}: 'HTO'}})"
        )
        raise AssayTypeError(msg)
    if source.shape[1] < 2:
        msg = (
            f"{ds.where}: {OPERATION}: assay {assay!r} holds {source.shape[1]} hashtag; "
            "demultiplexing needs at least 2"
        )
        raise AssayTypeError(msg)
    k = source.shape[1] + 1 if n_clusters is None else n_clusters
    selected = int(read_measured_mask(ds, assay, cell_selection, operation=OPERATION).sum())
    if k > selected:
        msg = (
            f"{OPERATION}: n_clusters must be at most the {selected} selected cells, found {k}; "
            "select more cells or ask for fewer clusters"
        )
        raise OperationArgumentError(msg)
    selection = publish_measured_selection(ds, assay, cell_selection, operation=OPERATION)

    def build(writer: ArtifactWriter) -> None:
        rows = selection.rows.astype(np.int64)
        (counts,) = writer.run(take_rows(source.counts.rechunk({1: -1}), rows))
        counts = np.asarray(counts)
        if (counts < 0).any():
            row, column = np.argwhere(counts < 0)[0]
            msg = (
                f"{source.where}: {OPERATION}: cell row {rows[row]} holds {counts[row, column]} "
                f"of hashtag column {column}; hashtag counts cannot be negative - import the "
                "raw counts"
            )
            raise NegativeCountsError(msg)
        calls = demultiplex(counts, positive_quantile=q, n_clusters=k, seed=seed)
        hashtags = np.asarray([str(n) for n in source.features.fetch_all("names")], dtype=object)
        for name, values in {"rows": rows, "hashtags": hashtags, **calls}.items():
            writer.write(name, values)

    return reuse_or_publish(
        ds,
        scope=assay,
        kind=KIND,
        operation=OPERATION,
        parameters={"assay": assay, "positiveQuantile": q, "nClusters": k, "seed": seed},
        inputs={"cells": selection.ref, "counts": source.content_fingerprint},
        build=build,
        invalidate_cache=invalidate_cache,
    )


def hto_calls(ds: AnalysisStore, artifact: ArtifactLike) -> pd.DataFrame:
    """The calls of an ``hto_demultiplexing`` artifact as HTODemux's metadata, indexed by cell id.

    Parameters
    ----------
    ds
        The store that holds the artifact.
    artifact
        The artifact of :func:`hto_demultiplexing`, or its ref.

    Returns
    -------
    pandas.DataFrame
        One row per selected cell: ``global`` (``HTO_classification.global``),
        ``hashtag`` (``hash.ID``: the singlet's hashtag, else ``"Doublet"``
        or ``"Negative"``), ``classification`` (``HTO_classification``: a
        doublet's two hashtags sorted and joined by ``_``), ``max_id``,
        ``second_id`` (hashtag names) and ``margin``.

    Raises
    ------
    OperationArgumentError
        The artifact is of another kind.
    """
    result = open_input(ds, artifact, kind=KIND, operation="hto_calls")
    names = np.array([str(n) for n in result.read("hashtags")])
    rows = result.read("rows")
    global_class = np.asarray(GLOBAL_CLASSES)[result.read("global")]
    max_id, second_id = names[result.read("max_id")], names[result.read("second_id")]
    pair = np.sort(np.stack([max_id, second_id], axis=1), axis=1)
    doublet = np.char.add(np.char.add(pair[:, 0], "_"), pair[:, 1])
    singlet, double = global_class == "Singlet", global_class == "Doublet"
    return pd.DataFrame(
        {
            "global": global_class,
            "hashtag": np.where(singlet, max_id, global_class),
            "classification": np.where(singlet, max_id, np.where(double, doublet, global_class)),
            "max_id": max_id,
            "second_id": second_id,
            "margin": result.read("margin"),
        },
        index=pd.Index(ds.cells.fetch_all("ids")[rows].astype(str), name="cell"),
    )
