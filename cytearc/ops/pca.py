"""``reduce.pca``: principal components of the scaled highly variable features, out of core.

Each selected feature is centred by ``feature_sum / n`` and divided by
``sqrt(feature_m2 / n)`` (1 for a constant feature), read from the
normalized artifact without reading the values; ``max_value`` clips the scaled
values as scanpy's ``scale`` does. ``mode="exact"`` sums the Gram matrix
``Z^T Z`` over row blocks and takes its eigenvectors; ``mode="randomized"``
runs Dask's compressed SVD (Halko et al.) with a fixed seed. The HVG values
are rebuilt from the counts once: the first pass spills them into a scratch
array of the unpublished artifact (:meth:`ArtifactWriter.spill`, deleted
before publication), which the projection and the SVD's passes read back.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import dask
import dask.array as da
import numpy as np
import scipy.linalg

from cytearc.engine.arrays import fold_rows
from cytearc.errors import ArtifactError, OperationArgumentError
from cytearc.ops.arguments import parse_choice, parse_float, parse_int, parse_seed
from cytearc.ops.normalize import block_moments, normalized_cells, normalized_values
from cytearc.ops.normalized_blocks import _project, _scaled_gram, scaled_block
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish
from cytearc.utils.moments import ColumnMoments

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = ["feature_moments", "feature_scaling", "pca", "scaled_graph"]


def feature_moments(
    ds: AnalysisStore | None,
    normalized: Artifact,
    *,
    compute: Callable[..., tuple[Any, ...]] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``feature_sum`` and ``feature_m2`` of a normalized artifact.

    An artifact without them (written before ``feature_m2`` existed, or
    whose arrays were removed) has them streamed from its values through
    ``compute``.

    Parameters
    ----------
    ds
        The store that holds the artifact (None: only stored moments).
    normalized
        A ``normalized`` artifact.
    compute
        Computes Dask collections and returns their results (such as an
        :class:`~cytearc.artifacts.ArtifactWriter`'s ``run``); None to
        refuse an artifact that does not store its moments.

    Returns
    -------
    tuple of numpy.ndarray
        ``(feature_sum, feature_m2)``, float64, one value per feature.

    Raises
    ------
    ArtifactError
        The artifact does not store ``feature_sum`` and ``feature_m2`` and
        ``ds`` or ``compute`` is None.
    """
    if {"feature_sum", "feature_m2"} <= set(normalized.group.array_keys()):
        return normalized.read("feature_sum"), normalized.read("feature_m2")
    if ds is None or compute is None:
        msg = f"{normalized.ref}: expected arrays feature_sum and feature_m2, found them missing; pass ds= and compute= to stream them from the values"
        raise ArtifactError(msg)
    (packed,) = compute(block_moments(normalized_values(ds, normalized)))
    moments = ColumnMoments.merge_packed(packed)
    return moments.total, moments.m2


def feature_scaling(
    normalized: Artifact,
    features: np.ndarray,
    *,
    ds: AnalysisStore | None = None,
    compute: Callable[..., tuple[Any, ...]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (population; 1 for a constant feature) of ``features``.

    Parameters
    ----------
    normalized
        A ``normalized`` artifact.
    features
        The feature indices.
    ds, compute
        As in :func:`feature_moments`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(mean, sd)`` of ``features``, float64.

    Raises
    ------
    ArtifactError
        The artifact does not store ``feature_sum`` and ``feature_m2`` and
        ``ds`` or ``compute`` is None.
    """
    n = normalized_cells(normalized)
    total, m2 = feature_moments(ds, normalized, compute=compute)
    sd = np.sqrt(m2[features] / n)
    sd[sd == 0] = 1.0
    return total[features] / n, sd


def scaled_graph(
    ds: AnalysisStore,
    normalized: Artifact,
    features: np.ndarray,
    *,
    mean: np.ndarray,
    sd: np.ndarray,
    max_value: float | None,
) -> da.Array:
    """The lazy scaled values of ``features`` of a normalized artifact (blocks of its values' rows).

    Parameters
    ----------
    ds
        The store that holds the artifact.
    normalized
        A ``normalized`` artifact.
    features
        The feature indices.
    mean, sd, max_value
        As in :func:`scaled_block`.

    Returns
    -------
    dask.array.Array
        The scaled values (float64), cells x ``features``, one block per
        row block of :func:`~cytearc.ops.normalize.normalized_values`.
    """
    return _scaled(
        normalized_values(ds, normalized, features=features),
        mean=mean,
        sd=sd,
        max_value=max_value,
    )


def _scaled(
    values: da.Array, *, mean: np.ndarray, sd: np.ndarray, max_value: float | None
) -> da.Array:
    z: da.Array = da.map_blocks(
        scaled_block, values, mean=mean, sd=sd, max_value=max_value, dtype=np.float64
    ).rechunk({1: -1})
    return z


def _signs(loadings: np.ndarray) -> np.ndarray:
    """Flip each component so its largest-magnitude loading is positive (deterministic signs)."""
    idx = np.argmax(np.abs(loadings), axis=0)
    flip: np.ndarray = np.sign(loadings[idx, np.arange(loadings.shape[1])])
    flip[flip == 0] = 1.0
    return flip


def pca(
    ds: AnalysisStore,
    normalized: ArtifactLike,
    hvgs: ArtifactLike,
    *,
    n_comps: int = 50,
    mode: str = "exact",
    max_value: float | None = None,
    seed: int = 0,
    invalidate_cache: bool = False,
) -> Artifact:
    """PCA of the scaled HVG columns of ``normalized`` (a ``pca`` artifact).

    The artifact holds ``coords`` (float32, cells x components), ``loadings``
    (HVGs x components), ``explained_variance`` (eigenvalues / (n - 1)),
    ``explained_variance_ratio``, and the ``features``, ``mean`` and ``scale``
    used.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    normalized
        The ``normalized`` artifact (:func:`~cytearc.ops.normalize.normalize`),
        or its ref.
    hvgs
        The ``hvgs`` artifact selected on ``normalized``
        (:func:`~cytearc.ops.hvgs.hvgs`), or its ref.
    n_comps
        Components to compute, at most (capped at the number of HVGs and at
        the number of cells minus one).
    mode
        ``"exact"`` (eigenvectors of the Gram matrix) or ``"randomized"``
        (Dask's compressed SVD).
    max_value
        Scaled values above it are clipped to it (> 0); None clips nothing.
    seed
        The seed of ``mode="randomized"``.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``pca`` artifact.

    Raises
    ------
    OperationArgumentError
        ``normalized`` or ``hvgs`` is of another kind, the HVGs were selected
        on another normalized artifact, an argument is of the wrong type or
        out of range, or the cells and features leave no component.
    MissingArtifactError, IncompleteArtifactError
        ``normalized`` or ``hvgs`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    """
    operation = "reduce.pca"
    norm = open_input(ds, normalized, kind="normalized", operation=operation)
    hv = open_input(ds, hvgs, kind="hvgs", operation=operation)
    if hv.inputs().get("normalized") != norm.ref:
        msg = f"{hv.ref}: these HVGs were selected on {hv.inputs().get('normalized')}, not {norm.ref}; pass the hvgs of this normalized artifact"
        raise OperationArgumentError(msg)
    n_comps = parse_int(n_comps, name="n_comps", operation=operation, minimum=1)
    mode = parse_choice(mode, ("exact", "randomized"), name="mode", operation=operation)
    if max_value is not None:
        parse_float(max_value, name="max_value", operation=operation, positive=True)
    seed = parse_seed(seed, operation=operation)
    features = hv.read("features")
    n_cells = normalized_cells(norm)
    k = min(n_comps, len(features), n_cells - 1)
    if k < 1:
        msg = f"reduce.pca: {n_cells} cells and {len(features)} features leave no component; select more cells or features"
        raise OperationArgumentError(msg)

    def build(writer: ArtifactWriter) -> None:
        total_sum, m2 = feature_moments(ds, norm, compute=writer.run)
        mean, sd = total_sum[features] / n_cells, np.sqrt(m2[features] / n_cells)
        varying = sd > 0
        sd[~varying] = 1.0
        scaling = {"mean": mean, "sd": sd, "max_value": max_value}
        # the values are rebuilt from the counts once: the pass that needs them first also
        # spills them, and every later pass reads them back (the same bits, the same blocks)
        values = normalized_values(ds, norm, features=features)
        writer.spill("values", values)
        total = float(n_cells * np.count_nonzero(varying))
        eig, loadings, total = _components(
            writer, values, scaling, mode=mode, k=k, seed=seed, total=total
        )
        loadings = loadings * _signs(loadings)
        z = _scaled(writer.spilled("values"), **scaling)
        coords = da.map_blocks(
            _project, z, loadings=loadings, dtype=np.float32, chunks=(z.chunks[0], (k,))
        )
        writer.store("coords", coords, chunks=(min(n_cells, 65536), k))
        writer.write("loadings", loadings)
        writer.write("explained_variance", eig / max(n_cells - 1, 1))
        writer.write("explained_variance_ratio", eig / total if total > 0 else eig * 0)
        writer.write("features", features)
        writer.write("mean", mean)
        writer.write("scale", sd)

    parameters: dict[str, Any] = {
        "nComps": k,
        "mode": mode,
        "maxValue": max_value,
        "seed": seed if mode == "randomized" else None,
    }
    return reuse_or_publish(
        ds,
        scope=norm.ref.scope,
        kind="pca",
        operation="reduce.pca",
        parameters=parameters,
        inputs={"normalized": norm.ref, "hvgs": hv.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )


def _components(
    writer: ArtifactWriter,
    values: da.Array,
    scaling: dict[str, Any],
    *,
    mode: str,
    k: int,
    seed: int,
    total: float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Eigenvalues, loadings and the total variance of the scaled values (spilled as ``values``)."""
    clipped = scaling["max_value"] is not None
    if mode == "exact":
        m = values.shape[1]
        # each task scales its block itself: a scaled float64 block is twice its values, and
        # as a task's output it would wait in a worker's memory (or move) until folded
        step = functools.partial(_scaled_gram, **scaling)
        # unfused, the blocks keep the fold's priorities: each is made near its fold step
        with dask.config.set({"optimization.fuse.active": False}):
            (gram,) = writer.run(fold_rows(values, step, shape=(m, m), dtype=np.float64))
        eigenvalues, vectors = scipy.linalg.eigh(gram, subset_by_index=[m - k, m - 1])
        order = np.argsort(eigenvalues)[::-1]
        total = float(np.trace(gram)) if clipped else total
        return np.clip(eigenvalues[order], 0, None), vectors[:, order], total
    writer.run()
    z = _scaled(writer.spilled("values"), **scaling)
    _, s, vt = da.linalg.svd_compressed(z, k, n_power_iter=4, seed=seed)
    s, vt = writer.run(s, vt)
    if clipped:
        (sum_of_squares,) = writer.run((z**2).sum())
        total = float(sum_of_squares)
    return s**2, vt.T, total
