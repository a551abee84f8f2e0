"""How a clustering agrees with a reference one (another tool's, or published cell types).

Three views, as one compares CyteArc's clusters with scanpy's on the same
cells: the adjusted Rand index over the cells both label
(:func:`adjusted_rand`), for every reference cluster the cluster that best
matches it and whether it is *separated*, a cluster of its own rather than
merged into another (:func:`match_clusters`), and the overlap of the top
markers of matched clusters (:func:`marker_overlap`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cytearc.errors import OperationArgumentError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["adjusted_rand", "marker_overlap", "match_clusters"]


def _series(value: object, name: str) -> pd.Series:
    if not isinstance(value, pd.Series) or not value.index.is_unique:
        msg = f"agreement: {name} must be a pandas Series indexed by unique cell ids, found {type(value).__name__}"
        raise OperationArgumentError(msg)
    return value


def _common(labels: object, reference: object) -> tuple[pd.Series, pd.Series]:
    ours, theirs = _series(labels, "labels"), _series(reference, "reference")
    common = ours.index.intersection(theirs.index, sort=False)
    if common.empty:
        msg = "agreement: labels and reference share no cell id; index both by the same cell ids"
        raise OperationArgumentError(msg)
    return ours.loc[common].astype(str), theirs.loc[common].astype(str)


def adjusted_rand(labels: pd.Series, reference: pd.Series) -> float:
    """The adjusted Rand index of two labelings, over the cells both label.

    Parameters
    ----------
    labels, reference
        Cluster labels indexed by cell id.

    Returns
    -------
    float
        scikit-learn's ``adjusted_rand_score`` on the common cells: 1 for
        the same partition, about 0 for unrelated ones.

    Raises
    ------
    OperationArgumentError
        An input is not a Series with a unique index, or they share no cell.

    Examples
    --------
    >>> a = pd.Series(["x", "x", "y", "y"], index=list("abcd"))
    >>> adjusted_rand(a, pd.Series([1, 1, 2, 2], index=list("dcba")))
    1.0
    """
    from sklearn.metrics import adjusted_rand_score  # noqa: PLC0415 (slow import)

    ours, theirs = _common(labels, reference)
    return float(adjusted_rand_score(theirs.to_numpy(), ours.to_numpy()))


def match_clusters(
    labels: pd.Series,
    reference: pd.Series,
    *,
    purity: float = 0.85,
    coverage: float = 0.5,
) -> pd.DataFrame:
    """For each reference cluster, the best-matching cluster and whether the population is separated.

    Over the cells both label. A reference cluster is *separated* when some
    cluster holds at least ``coverage`` of its cells and at least ``purity``
    of that cluster's cells are its own: the population may be split into
    several clusters, but it is not merged into another one.

    Parameters
    ----------
    labels
        The clusters to judge, indexed by cell id.
    reference
        The reference clusters (such as scanpy's), indexed by cell id.
    purity
        The share of a cluster's cells that must belong to the reference cluster.
    coverage
        The share of the reference cluster's cells that cluster must hold.

    Returns
    -------
    pandas.DataFrame
        One row per reference cluster (index ``reference``), largest first,
        labels compared as strings:
        ``n_reference``; ``best``, the cluster of the highest Jaccard index
        with it, with ``n_best``, ``shared``, ``precision`` (shared / n_best),
        ``recall`` (shared / n_reference) and ``jaccard``; and ``separated``.

    Raises
    ------
    OperationArgumentError
        An input is not a Series with a unique index, they share no cell, or
        ``purity`` or ``coverage`` is outside (0, 1].

    Examples
    --------
    >>> ref = pd.Series(["T"] * 6 + ["B"] * 3 + ["pDC"], index=range(10))
    >>> ours = pd.Series([1, 1, 1, 2, 2, 2, 3, 3, 3, 3], index=range(10))
    >>> matches = match_clusters(ours, ref)  # T is split in two, B and pDC merged
    >>> matches["best"].tolist(), matches["separated"].tolist()
    (['1', '3', '3'], [True, False, False])
    """
    for name, value in (("purity", purity), ("coverage", coverage)):
        if not 0 < value <= 1:
            msg = f"agreement: {name} must be in (0, 1], found {value!r}"
            raise OperationArgumentError(msg)
    ours, theirs = _common(labels, reference)
    table = pd.crosstab(theirs, ours)
    sizes = table.sum(axis=1).to_numpy()
    cluster_sizes = table.sum(axis=0).to_numpy()
    shared = table.to_numpy()
    jaccard = shared / (sizes[:, None] + cluster_sizes[None, :] - shared)
    precision = shared / cluster_sizes[None, :]
    recall = shared / sizes[:, None]
    best = jaccard.argmax(axis=1)
    rows = np.arange(len(sizes))
    frame = pd.DataFrame(
        {
            "n_reference": sizes,
            "best": table.columns.to_numpy()[best],
            "n_best": cluster_sizes[best],
            "shared": shared[rows, best],
            "precision": precision[rows, best],
            "recall": recall[rows, best],
            "jaccard": jaccard[rows, best],
            "separated": ((precision >= purity) & (recall >= coverage)).any(axis=1),
        },
        index=pd.Index(table.index, name="reference"),
    )
    return frame.sort_values("n_reference", ascending=False, kind="stable")


def marker_overlap(
    markers: Mapping[str, Sequence[str]],
    reference: Mapping[str, Sequence[str]],
    pairs: Mapping[str, str],
    *,
    n: int = 25,
) -> pd.Series:
    """The share of each reference cluster's top ``n`` markers among its matched cluster's top ``n``.

    Parameters
    ----------
    markers
        Per cluster, its marker genes best first.
    reference
        Per reference cluster, its marker genes best first.
    pairs
        Reference clusters mapped to their matched clusters (such as the
        ``best`` column of :func:`match_clusters`).
    n
        The markers compared on each side.

    Returns
    -------
    pandas.Series
        Per reference cluster of ``pairs``, ``|top n of both| / n``.

    Raises
    ------
    OperationArgumentError
        A cluster of ``pairs`` has no markers on its side, or ``n`` is below 1.

    Examples
    --------
    >>> marker_overlap({"1": ["CD3E", "IL7R"]}, {"T": ["IL7R", "LTB"]}, {"T": "1"}, n=2)
    T    0.5
    dtype: float64
    """
    if n < 1:
        msg = f"agreement: n must be at least 1, found {n!r}"
        raise OperationArgumentError(msg)
    shares = {}
    for ref, cluster in pairs.items():
        if ref not in reference or cluster not in markers:
            msg = f"agreement: pair {ref!r} -> {cluster!r} has no markers (reference clusters: {sorted(reference)}, clusters: {sorted(markers)})"
            raise OperationArgumentError(msg)
        shares[ref] = len(set(reference[ref][:n]) & set(markers[cluster][:n])) / n
    return pd.Series(shares, dtype=np.float64)
