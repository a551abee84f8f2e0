"""``features.hvgs``: highly variable features from a mean-dispersion trend.

Statistics come from the normalized artifact's per-feature sums and squared
deviations, without reading ``data``. Two flavors:

``"seurat"`` (default, as scanpy's ``highly_variable_genes(flavor="seurat")``)
    on the values before the log (``linear_sum``, ``linear_m2``: moments of
    ``expm1`` of the stored values): mean ``m`` (``1e-12`` where zero), sample
    variance, ``log(variance / m)`` (NaN where the variance is zero), bins of
    ``log1p(m)`` cut into ``n_bins`` equal widths over all features; the score
    is ``(log dispersion - bin mean) / bin std``, and a bin with one value gets
    ``std = its mean`` and ``mean = 0``. The features whose score is at least
    the ``n_top``-th highest are selected (ties included).
``"log"``
    the same trend on the stored (log) values themselves (``feature_sum``,
    ``feature_m2``), bins spanning the means of the features with a defined
    dispersion, and the ``n_top`` highest scores among features with
    ``min_mean <= mean <= max_mean``.

With ``min_cells`` both fit their trend on, and select from, only the
features detected in at least that many cells (``feature_nnz``), as scanpy
does after ``filter_genes(min_cells=...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dask.array as da
import numpy as np
import pandas as pd

from cytearc.errors import OperationArgumentError
from cytearc.ops.arguments import parse_choice, parse_float, parse_int
from cytearc.ops.normalize import normalized_cells, normalized_values
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = ["hvg_statistics", "hvgs", "seurat_statistics"]


def hvg_statistics(
    feature_sum: np.ndarray,
    feature_m2: np.ndarray,
    n_cells: int,
    *,
    n_bins: int = 20,
    keep: np.ndarray | None = None,
) -> pd.DataFrame:
    """Mean, variance, dispersion and normalized dispersion per feature.

    The ``"log"`` flavor's trend, on the moments of the stored (log) values.

    Parameters
    ----------
    feature_sum
        Per feature, the sum of the values over the cells.
    feature_m2
        Per feature, the sum of squared deviations from its mean.
    n_cells
        The number of cells summed.
    n_bins
        Equal-width bins of the mean, spanning the means of the features
        whose dispersion is defined.
    keep
        Booleans, one per feature: the features the trend is fitted on (as
        if the others were filtered out first); their ``dispersion_norm``
        is NaN. None keeps every feature.

    Returns
    -------
    pandas.DataFrame
        One row per feature: ``mean``, ``variance`` (sample), ``dispersion``
        (variance / mean, NaN where the mean is zero) and ``dispersion_norm``
        (the log dispersion standardized within its bin; NaN where undefined).

    Examples
    --------
    >>> s = hvg_statistics(np.array([2.0, 4.0, 0.0]), np.array([1.0, 8.0, 0.0]), 3, n_bins=1)
    >>> s["dispersion"].round(3).tolist()
    [0.75, 3.0, nan]
    """
    n = max(n_cells, 1)
    mean = feature_sum / n
    variance = feature_m2 / max(n_cells - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        dispersion = np.where(mean > 0, variance / mean, np.nan)
        log_disp = np.log(np.where(dispersion > 0, dispersion, np.nan))
    if keep is not None:
        log_disp[~keep] = np.nan
    frame = pd.DataFrame({"mean": mean, "variance": variance, "dispersion": dispersion})
    finite_mean = mean[np.isfinite(log_disp)]
    if finite_mean.size == 0:
        frame["dispersion_norm"] = np.nan
        return frame
    edges = np.linspace(finite_mean.min(), finite_mean.max(), n_bins + 1)
    bins = np.clip(np.searchsorted(edges, mean, side="right") - 1, 0, n_bins - 1)
    stats = (
        pd.DataFrame({"bin": bins, "v": log_disp})
        .dropna()
        .groupby("bin")["v"]
        .agg(["mean", "std", "count"])
    )
    one = stats["count"] == 1
    stats.loc[one, "std"] = stats.loc[one, "mean"]
    stats.loc[one, "mean"] = 0.0
    bin_mean = stats["mean"].reindex(range(n_bins)).to_numpy()[bins]
    bin_std = stats["std"].reindex(range(n_bins)).to_numpy()[bins]
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["dispersion_norm"] = (log_disp - bin_mean) / bin_std
    return frame


def seurat_statistics(
    linear_sum: np.ndarray,
    linear_m2: np.ndarray,
    n_cells: int,
    *,
    n_bins: int = 20,
    keep: np.ndarray | None = None,
) -> pd.DataFrame:
    """Scanpy's ``flavor="seurat"`` statistics from the moments of the values before the log.

    Parameters
    ----------
    linear_sum
        Per feature, the sum over the cells of ``expm1`` of the stored values.
    linear_m2
        Per feature, the sum of squared deviations of those values from their mean.
    n_cells
        The number of cells summed.
    n_bins
        Equal-width bins of ``log1p(mean)`` over all (kept) features.
    keep
        Booleans, one per feature: the features the bins span and the trend
        is fitted on, as scanpy's on the genes ``filter_genes`` left; the
        others get a NaN ``dispersion_norm``. None keeps every feature.

    Returns
    -------
    pandas.DataFrame
        One row per feature: ``mean`` (``log1p`` of the mean), ``variance``
        (sample), ``dispersion`` (``log(variance / mean)``, NaN where the
        variance is zero) and ``dispersion_norm`` (standardized within its bin).

    Examples
    --------
    >>> s = seurat_statistics(np.array([2.0, 4.0, 0.0]), np.array([1.0, 8.0, 0.0]), 3, n_bins=1)
    >>> s["dispersion"].round(3).tolist()
    [-0.288, 1.099, nan]
    """
    mean = linear_sum / max(n_cells, 1)
    variance = linear_m2 / max(n_cells - 1, 1)
    mean = np.where(mean == 0, 1e-12, mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        dispersion = variance / mean
        dispersion[dispersion == 0] = np.nan
        dispersion = np.log(dispersion)
    log_mean = np.log1p(mean)
    frame = pd.DataFrame({"mean": log_mean, "variance": variance, "dispersion": dispersion})
    frame["dispersion_norm"] = np.nan
    kept = frame if keep is None else frame[keep]
    if kept.empty:
        return frame
    bins = pd.cut(kept["mean"], bins=n_bins)
    stats = kept.groupby(bins, observed=True)["dispersion"].agg(avg="mean", dev="std")
    one = stats["dev"].isna()
    stats.loc[one, "dev"] = stats.loc[one, "avg"]
    stats.loc[one, "avg"] = 0.0
    per_feature = stats.loc[bins].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        score = (kept["dispersion"].to_numpy() - per_feature[:, 0]) / per_feature[:, 1]
    frame.loc[kept.index, "dispersion_norm"] = score
    return frame


def hvgs(
    ds: AnalysisStore,
    normalized: ArtifactLike,
    *,
    n_top: int = 2000,
    flavor: str = "seurat",
    n_bins: int = 20,
    min_mean: float = 0.0125,
    max_mean: float = 3.0,
    min_cells: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """Select the ``n_top`` most variable features of a normalized artifact (an ``hvgs`` artifact).

    The artifact holds ``mean``, ``variance``, ``dispersion`` and
    ``dispersion_norm`` per feature (NaN where undefined), ``highly_variable``
    (bool) and ``features``, the selected feature indices in increasing order.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    normalized
        The ``normalized`` artifact (:func:`~cytearc.ops.normalize.normalize`),
        or its ref.
    n_top
        How many features to select (ties at the cutoff are kept with
        ``flavor="seurat"``).
    flavor
        ``"seurat"`` (scanpy's, on the values before the log) or ``"log"``
        (on the stored values); see the module docstring.
    n_bins
        Bins of the mean within which dispersions are standardized.
    min_mean, max_mean
        With ``flavor="log"``, only features whose mean lies in this range
        are selected.
    min_cells
        Fit the trend on, and select from, only the features with a non-zero
        value in at least this many of the normalized cells, as scanpy's
        ``filter_genes(min_cells=...)`` before ``highly_variable_genes``
        (0: every feature). The counts come from the artifact's
        ``feature_nnz``, or are streamed from ``data`` where it predates it.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``hvgs`` artifact.

    Raises
    ------
    OperationArgumentError
        ``normalized`` is not a ``normalized`` artifact (or predates the
        moments ``flavor="seurat"`` needs), an argument is of the wrong type
        or out of range, ``min_mean`` exceeds ``max_mean``, or no feature
        qualifies.
    MissingArtifactError, IncompleteArtifactError
        ``normalized`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    """
    operation = "features.hvgs"
    source = open_input(ds, normalized, kind="normalized", operation=operation)
    n_cells = normalized_cells(source)
    n_top = parse_int(n_top, name="n_top", operation=operation, minimum=1)
    flavor = parse_choice(flavor, ("seurat", "log"), name="flavor", operation=operation)
    n_bins = parse_int(n_bins, name="n_bins", operation=operation, minimum=1)
    min_mean = parse_float(min_mean, name="min_mean", operation=operation)
    max_mean = parse_float(max_mean, name="max_mean", operation=operation)
    if min_mean > max_mean:
        msg = f"{operation}: min_mean ({min_mean}) must not exceed max_mean ({max_mean})"
        raise OperationArgumentError(msg)
    min_cells = parse_int(min_cells, name="min_cells", operation=operation, minimum=0)
    if flavor == "seurat" and "linear_m2" not in set(source.group.array_keys()):
        msg = f"{source.ref}: flavor='seurat' needs linear_sum and linear_m2, which this normalized artifact predates; run features.normalize with invalidate_cache=True, or pass flavor='log'"
        raise OperationArgumentError(msg)

    def build(writer: ArtifactWriter) -> None:
        keep = None
        if min_cells:
            keep = _detected_cells(ds, source, writer) >= min_cells
        if flavor == "seurat":
            stats = seurat_statistics(
                source.read("linear_sum"),
                source.read("linear_m2"),
                n_cells,
                n_bins=n_bins,
                keep=keep,
            )
            score = stats["dispersion_norm"].to_numpy()
            finite = score[np.isfinite(score)]
            cutoff = np.sort(finite)[::-1][min(n_top, len(finite)) - 1] if len(finite) else np.inf
            chosen = np.flatnonzero(np.nan_to_num(score, nan=-np.inf) >= cutoff)
        else:
            stats = hvg_statistics(
                source.read("feature_sum"),
                source.read("feature_m2"),
                n_cells,
                n_bins=n_bins,
                keep=keep,
            )
            score = stats["dispersion_norm"].to_numpy()
            eligible = (
                np.isfinite(score) & (stats["mean"] >= min_mean) & (stats["mean"] <= max_mean)
            )
            ranked = np.flatnonzero(eligible)[np.argsort(-score[eligible], kind="stable")]
            chosen = np.sort(ranked[:n_top])
        if chosen.size == 0:
            msg = f"{source.ref}: hvgs: expected features with a finite dispersion and a mean in [{min_mean}, {max_mean}], found none; widen min_mean and max_mean"
            raise OperationArgumentError(msg)
        selected = np.zeros(len(stats), dtype=bool)
        selected[chosen] = True
        for column in ("mean", "variance"):
            writer.write(column, stats[column].to_numpy())
        for column in ("dispersion", "dispersion_norm"):
            writer.write(column, stats[column].to_numpy(), finite=False)
        writer.write("highly_variable", selected)
        writer.write("features", chosen.astype(np.int64))

    return reuse_or_publish(
        ds,
        scope=source.ref.scope,
        kind="hvgs",
        operation="features.hvgs",
        parameters={
            "flavor": flavor,
            "nTop": n_top,
            "nBins": n_bins,
            "minMean": float(min_mean) if flavor == "log" else None,
            "maxMean": float(max_mean) if flavor == "log" else None,
            "minCells": min_cells,
        },
        inputs={"normalized": source.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )


def _detected_cells(ds: AnalysisStore, source: Artifact, writer: ArtifactWriter) -> np.ndarray:
    """Per feature, the normalized cells with a non-zero value."""
    if "feature_nnz" in set(source.group.array_keys()):
        return source.read("feature_nnz")
    (detected,) = writer.run(da.count_nonzero(normalized_values(ds, source), axis=0))
    return np.asarray(detected, dtype=np.int64)
