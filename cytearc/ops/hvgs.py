"""``features.hvgs``: highly variable features from a mean-dispersion trend.

Statistics come from the normalized artifact's ``feature_sum`` and
``feature_m2`` without reading ``data``: for each feature the mean, the
sample variance ``m2 / (n - 1)`` and the dispersion ``variance / mean``. The
trend is the mean and standard deviation of ``log(dispersion)`` in
``n_bins`` equal-width bins of the mean (scanpy's ``flavor="seurat"`` binning);
a feature's score is its normalized dispersion, ``(log dispersion - bin mean) /
bin std`` (1 for a bin of one feature), and the ``n_top`` highest scores among
features with ``min_mean <= mean <= max_mean`` are selected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cytearc.artifacts import Artifact, ArtifactRef, open_artifact
from cytearc.errors import CyteArcError
from cytearc.ops._base import publish

if TYPE_CHECKING:
    from cytearc.artifacts import ArtifactWriter
    from cytearc.datastore import DataStore

__all__ = ["hvg_statistics", "hvgs"]


def hvg_statistics(
    feature_sum: np.ndarray, feature_m2: np.ndarray, n_cells: int, *, n_bins: int = 20
) -> pd.DataFrame:
    """Mean, variance, dispersion and normalized dispersion per feature.

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


def hvgs(
    ds: DataStore,
    normalized: ArtifactRef | str | Artifact,
    *,
    n_top: int = 2000,
    n_bins: int = 20,
    min_mean: float = 0.0125,
    max_mean: float = 3.0,
    invalidate_cache: bool = False,
) -> Artifact:
    """Select the ``n_top`` most variable features of a normalized artifact (an ``hvgs`` artifact).

    The artifact holds ``mean``, ``variance``, ``dispersion`` and
    ``dispersion_norm`` per feature (NaN where undefined), ``highly_variable``
    (bool) and ``features``, the selected feature indices in increasing order.
    """
    source = normalized if isinstance(normalized, Artifact) else open_artifact(ds.root, normalized)
    if source.ref.kind != "normalized":
        msg = f"{source.ref}: features.hvgs needs a normalized artifact"
        raise CyteArcError(msg)
    n_cells = int(source.array("data").shape[0])

    def build(writer: ArtifactWriter) -> None:
        stats = hvg_statistics(
            source.read("feature_sum"), source.read("feature_m2"), n_cells, n_bins=n_bins
        )
        score = stats["dispersion_norm"].to_numpy()
        eligible = np.isfinite(score) & (stats["mean"] >= min_mean) & (stats["mean"] <= max_mean)
        ranked = np.flatnonzero(eligible)[np.argsort(-score[eligible], kind="stable")]
        chosen = np.sort(ranked[:n_top])
        if chosen.size == 0:
            msg = f"{source.ref}: no feature has a finite dispersion with mean in [{min_mean}, {max_mean}]"
            raise CyteArcError(msg)
        selected = np.zeros(len(stats), dtype=bool)
        selected[chosen] = True
        for column in ("mean", "variance"):
            writer.write(column, stats[column].to_numpy())
        for column in ("dispersion", "dispersion_norm"):
            writer.write(column, stats[column].to_numpy(), finite=False)
        writer.write("highly_variable", selected)
        writer.write("features", chosen.astype(np.int64))

    return publish(
        ds,
        scope=source.ref.scope,
        kind="hvgs",
        operation="features.hvgs",
        parameters={
            "nTop": n_top,
            "nBins": n_bins,
            "minMean": float(min_mean),
            "maxMean": float(max_mean),
        },
        inputs={"normalized": source.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )
