"""``features.prevalent_peaks`` and ``reduce.lsi``: latent semantic indexing of peaks, out of core.

**Prevalent peaks** are those detected (a non-zero value) in at least
``min_cells_fraction`` of the normalized cells, from the ``normalized``
artifact's ``feature_nnz`` (no count is read), at most the ``n_top`` most
prevalent. Signac's ``FindTopFeatures(min.cutoff = "q5")`` keeps the peaks
above the 5th percentile of total counts, Scarf's ``mark_prevalent_peaks``
the ``top_n`` (10,000) largest sums of TF-IDF values; muon's tutorial
filters on the cells detecting a peak, as here.

**LSI** is the truncated SVD ``A ~ U S V^T`` of the log TF-IDF values ``A``
(normalized cells x selected peaks), not centred (Signac's ``RunSVD``,
muon's ``lsi``), by block Krylov iteration on ``A^T A`` (randomized block
Lanczos, Musco & Musco 2015), never holding ``A`` or a peaks x peaks
matrix. With ``l = n_comps + oversample`` and ``p`` peaks:

1. ``Z_0``: ``default_rng(seed).standard_normal((p, l))``, orthonormalized.
2. Pass ``i`` reads the values once, as CSR blocks of the counts' shards
   built from their non-zero counts
   (:func:`~cytearc.ops.normalize.normalized_values` with ``sparse=True``:
   a product costs the entries, not cells x peaks), and sums
   ``G_i = sum_b A_b^T (A_b Z_i)`` in :data:`~cytearc.engine.arrays.FOLD_CHAINS`
   chains of consecutive blocks added in a fixed order (the same bits on
   any scheduler); a task holds its block, ``Z_i`` (one key of the graph)
   and two ``p x l`` sums. The first pass also sums ``1^T A`` and ``d^T A``
   (``d``: the centred log10 total counts of the cells).
3. The client keeps ``K = [Z_0 ... Z_i]``: ``K^T G_i`` is block column ``i``
   of ``T = K^T A^T A K``; ``G_i`` orthogonalized against ``K`` (twice) and
   QR-factored (``R``) gives ``Z_{i+1}``. The Ritz pairs ``(theta, w)`` of
   ``T`` give ``s = sqrt(theta)``, ``V = K w`` and the residuals
   ``||A^T A v - theta v|| = ||R w_i||`` (``w_i``: the rows of block ``i``),
   without another pass. It stops once every component has
   ``||A^T u - s v|| <= tol * s_1`` (irlba's test; Signac's ``tol = 1e-5``)
   or after ``n_iter`` passes.
4. Each component's largest loading is made positive. ``U = A V / s`` has
   columns of norm 1 (a Ritz property), so their means, deviations and
   depth correlations follow from ``1^T A`` and ``d^T A``, and one last pass
   writes the coordinates block by block.

When ``p <= n_iter * l`` the basis would span every peak: one pass sums
``A^T A`` (no larger than the basis) and its eigenvectors are exact.
An LSI reads the counts ``n_iter + 1`` times at most (twice on the exact
path). The client holds ``K``, ``8 * p * l * n_iter`` bytes: 400 MB for
50,000 peaks with the defaults (``n_top`` of :func:`prevalent_peaks` caps it).

The defaults (``l = n_comps + 50``, 10 passes) were measured on
:func:`~cytearc.datasets.write_atac_store` data (5,000 cells, 8 types,
14,623 prevalent peaks, 50 components) against a dense SVD: the 9
components above the noise bulk agree to ``1 - |cos| < 3e-7``, every
variance to 6e-4, and a 15-nearest-neighbour graph of the 49 kept
components shares 94 % of its neighbours with the dense SVD's (the same
share of same-type neighbours, 0.816). The other 41 components lie in a
flat noise bulk (relative eigengaps of 1e-4 to 1e-3) that converges
slowly: 8 passes of ``l = 60`` share 51 % of the neighbours (variances to
2 %), 12 passes of ``l = 100`` 99 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.base import tokenize
from dask.delayed import delayed
from dask.utils import format_bytes
from threadpoolctl import threadpool_limits

from cytearc.engine.arrays import FOLD_CHAINS
from cytearc.errors import MemBudgetError, OperationArgumentError
from cytearc.ops.arguments import parse_bool, parse_float, parse_int, parse_seed
from cytearc.ops.normalize import normalized_cells, normalized_values
from cytearc.ops.publication import ArtifactLike, open_input, reuse_or_publish

if TYPE_CHECKING:
    from collections.abc import Callable

    from dask.delayed import Delayed

    from cytearc.artifacts import Artifact, ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "PEAK_SELECTIONS",
    "Spectrum",
    "krylov_spectrum",
    "lsi",
    "pass_products",
    "prevalent_peaks",
]

PEAK_SELECTIONS: Final = ("prevalent_peaks", "hvgs")
"""The kinds of feature selection :func:`lsi` takes."""

_COORD_CHUNK_ROWS: Final = 65536


def _tfidf_input(ds: AnalysisStore, normalized: ArtifactLike, *, operation: str) -> Artifact:
    """The normalized artifact, refused unless it is TF-IDF (LSI is the SVD of TF-IDF values)."""
    norm = open_input(ds, normalized, kind="normalized", operation=operation)
    method = norm.parameters.get("method")
    if method != "tfidf":
        assay = norm.parameters.get("assay")
        msg = f"{norm.ref}: {operation} needs log TF-IDF values (method 'tfidf'), found method {method!r}; normalize the peaks with ds.features.normalize({assay!r}, method='tfidf')"
        raise OperationArgumentError(msg)
    return norm


def prevalent_peaks(
    ds: AnalysisStore,
    normalized: ArtifactLike,
    *,
    min_cells_fraction: float = 0.01,
    n_top: int | None = None,
    invalidate_cache: bool = False,
) -> Artifact:
    """Select the peaks detected in enough of the normalized cells (a ``prevalent_peaks`` artifact).

    The artifact holds ``prevalence`` (int64, per peak: the normalized cells
    with a non-zero value, the artifact's ``feature_nnz``), ``selected``
    (bool) and ``features`` (int64, the selected peaks' positions, increasing).
    No count is read.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    normalized
        A TF-IDF ``normalized`` artifact (:func:`~cytearc.ops.normalize.normalize`),
        or its ref.
    min_cells_fraction
        Select the peaks detected in at least this fraction (0 to 1) of the
        normalized cells, and in one cell at least.
    n_top
        Keep at most this many of them, the most prevalent (ties by
        position); None keeps all.
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``prevalent_peaks`` artifact, in the scope of ``normalized``.

    Raises
    ------
    OperationArgumentError
        ``normalized`` is not a TF-IDF normalized artifact (or predates
        ``feature_nnz``), an argument is of the wrong type or out of range,
        or fewer than 2 peaks qualify.
    MissingArtifactError, IncompleteArtifactError
        ``normalized`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_atac_store
    >>> path = write_atac_store(f"{tempfile.mkdtemp()}/atac.zarr", n_cells=200, n_peaks=300,
    ...                         cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> peaks = prevalent_peaks(ds, ds.features.normalize("ATAC"), min_cells_fraction=0.02)
    >>> bool((peaks.read("prevalence")[peaks.read("features")] >= 4).all())
    True
    """
    operation = "features.prevalent_peaks"
    norm = _tfidf_input(ds, normalized, operation=operation)
    fraction = parse_float(
        min_cells_fraction,
        name="min_cells_fraction",
        operation=operation,
        non_negative=True,
        maximum=1.0,
    )
    if n_top is not None:
        n_top = parse_int(n_top, name="n_top", operation=operation, minimum=1)
    if "feature_nnz" not in set(norm.group.array_keys()):
        msg = f"{norm.ref}: {operation} counts the cells detecting each peak from feature_nnz, which this normalized artifact predates; run features.normalize with invalidate_cache=True"
        raise OperationArgumentError(msg)
    n_cells = normalized_cells(norm)
    prevalence = norm.read("feature_nnz").astype(np.int64)
    # the rounding keeps 0.07 * 100 at 7 cells, not 7.000000000000001
    min_cells = max(1, int(np.ceil(round(fraction * n_cells, 9))))
    eligible = np.flatnonzero(prevalence >= min_cells)
    if n_top is not None and len(eligible) > n_top:
        order = np.argsort(-prevalence[eligible], kind="stable")
        eligible = np.sort(eligible[order[:n_top]])
    if len(eligible) < 2:
        msg = f"{norm.ref}: {operation}: expected at least 2 peaks detected in {min_cells} of the {n_cells} cells (min_cells_fraction={fraction:g}), found {len(eligible)}; lower min_cells_fraction"
        raise OperationArgumentError(msg)

    def build(writer: ArtifactWriter) -> None:
        selected = np.zeros(len(prevalence), dtype=bool)
        selected[eligible] = True
        writer.write("prevalence", prevalence)
        writer.write("selected", selected)
        writer.write("features", eligible.astype(np.int64))

    return reuse_or_publish(
        ds,
        scope=norm.ref.scope,
        kind="prevalent_peaks",
        operation=operation,
        parameters={"minCellsFraction": fraction, "nTop": n_top},
        inputs={"normalized": norm.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )


def _float64(block: np.ndarray | sp.csr_matrix) -> sp.csc_matrix:
    """A block as float64 CSC.

    Its products with a dense matrix walk the peaks in order (the basis rows
    read, the sum's rows written, one after the other: 1.5 times faster than
    CSR's scattered rows at 143,000 peaks) and add each entry in the order
    CSR would, so the bits are CSR's.
    """
    return sp.csc_matrix(block if sp.issparse(block) else np.asarray(block), dtype=np.float64)


def _accumulate(
    total: np.ndarray | None,
    block: np.ndarray | sp.csr_matrix,
    basis: np.ndarray,
    extra: np.ndarray | None,
) -> np.ndarray:
    a = _float64(block)
    y = np.asarray(a @ basis)
    if extra is not None:
        y = np.hstack([y, extra])
    part: np.ndarray = np.asarray(a.T @ y)
    # add into this task's own partial: the running total is read again if a task is retried
    if total is not None:
        part += total
    return part


def _add_chains(totals: list[np.ndarray]) -> np.ndarray:
    result = totals[0].copy()
    for total in totals[1:]:
        result += total
    return result


def pass_products(
    values: da.Array, basis: np.ndarray, *, extra: da.Array | None = None
) -> da.Array:
    """``sum_b A_b^T [A_b Z, E_b]`` over the row blocks of ``A``: one pass, summed in a fixed order.

    :data:`~cytearc.engine.arrays.FOLD_CHAINS` runs of consecutive blocks,
    each task adding its block's product to its run's sum, the runs added in
    order: the same bits on any scheduler. ``Z`` is one key of the graph.

    Parameters
    ----------
    values
        ``A``, a lazy 2-D array with one block across its columns.
    basis
        ``Z``, columns x ``l``.
    extra
        ``E``, rows x ``e`` in the row blocks of ``values`` (one block across), or None.

    Returns
    -------
    dask.array.Array
        float64, columns x ``(l + e)``, one block.

    Examples
    --------
    >>> a = np.arange(12.0).reshape(6, 2)
    >>> x = da.from_array(a, chunks=(2, 2))
    >>> bool(np.allclose(pass_products(x, np.eye(2)).compute(), a.T @ a))
    True
    """
    if values.numblocks[1] != 1 or (extra is not None and extra.chunks[0] != values.chunks[0]):
        msg = f"pass_products: expected one block across the columns (and extra in the row blocks of the values), found {values.numblocks}"
        raise ValueError(msg)
    blocks = values.to_delayed().ravel().tolist()
    extras: list[Any] = (
        [None] * len(blocks) if extra is None else extra.to_delayed().ravel().tolist()
    )
    width = basis.shape[1] + (0 if extra is None else extra.shape[1])
    token = tokenize(values, basis, extra, FOLD_CHAINS)
    shared = delayed(np.ascontiguousarray(basis, np.float64), name=f"lsi-basis-{token}", pure=True)
    runs = min(FOLD_CHAINS, len(blocks))
    totals = []
    for run in range(runs):
        total: Any = None
        for index in range(run * len(blocks) // runs, (run + 1) * len(blocks) // runs):
            total = delayed(_accumulate, pure=True)(
                total,
                blocks[index],
                shared,
                extras[index],
                dask_key_name=f"lsi-pass-{token}-{index}",
            )
        totals.append(total)
    result: Delayed = delayed(_add_chains, pure=True)(totals, dask_key_name=f"lsi-sum-{token}")
    summed: da.Array = da.from_delayed(result, shape=(values.shape[1], width), dtype=np.float64)
    return summed


@dataclass(frozen=True, kw_only=True)
class Spectrum:
    """What :func:`krylov_spectrum` finds.

    ``singular_values`` (decreasing), ``vectors`` (``V``), ``residuals`` (``||A^T u - s v||
    / s_1``, 0 on the exact path), ``passes`` over ``A`` and ``sums`` (``A^T E``).
    """

    singular_values: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray
    passes: int
    sums: np.ndarray


def _top(t: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of a symmetric matrix, largest first."""
    theta, w = np.linalg.eigh((t + t.T) / 2)
    return theta[::-1][:k], w[:, ::-1][:, :k]


def krylov_spectrum(
    run: Callable[..., tuple[Any, ...]],
    values: da.Array,
    *,
    k: int,
    width: int,
    n_iter: int,
    tol: float,
    seed: int,
    extra: da.Array | None = None,
) -> Spectrum:
    """The top ``k`` right singular vectors and values of ``A`` by block Krylov iteration.

    See the module docstring. Each pass is one :func:`pass_products` computed
    by ``run``; the client's linear algebra runs on one BLAS thread, so the
    bits are the same on every machine.

    Parameters
    ----------
    run
        Computes Dask collections (an :class:`~cytearc.artifacts.ArtifactWriter`'s ``run``).
    values
        ``A``, lazy, one block across its columns.
    k, width, n_iter
        Components, columns of each block of the basis (``k`` or more), passes at most.
    tol
        Stop once every component has ``||A^T u - s v|| <= tol * s_1``.
    seed
        Seed of the starting block.
    extra
        ``E``, whose ``A^T E`` the first pass also sums, in the row blocks of ``A``.

    Returns
    -------
    Spectrum
        ``s``, ``V``, the residuals, the passes and ``A^T E``.

    Examples
    --------
    >>> a = np.random.default_rng(0).standard_normal((40, 30)) * 0.7 ** np.arange(30)
    >>> x = da.from_array(a, chunks=(8, 30))
    >>> found = krylov_spectrum(lambda *c: da.compute(*c), x, k=3, width=5, n_iter=5, tol=1e-8, seed=0)
    >>> found.passes, bool(np.allclose(found.singular_values, np.linalg.svd(a, compute_uv=False)[:3]))
    (4, True)
    """
    p = values.shape[1]
    n_extra = 0 if extra is None else extra.shape[1]
    if p <= n_iter * width:
        (gram,) = run(pass_products(values, np.eye(p), extra=extra))
        with threadpool_limits(limits=1):
            theta, w = _top(gram[:, :p], k)
        s = np.sqrt(np.clip(theta, 0, None))
        return Spectrum(singular_values=s, vectors=w, residuals=0 * s, passes=1, sums=gram[:, p:])
    with threadpool_limits(limits=1):
        start, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((p, width)))
    basis = np.empty((p, n_iter * width))
    basis[:, :width] = start
    t = np.zeros((n_iter * width, n_iter * width))
    sums = np.zeros((p, n_extra))
    for i in range(n_iter):
        lo, hi = i * width, (i + 1) * width
        (g,) = run(pass_products(values, basis[:, lo:hi], extra=extra if i == 0 else None))
        if i == 0:
            g, sums = g[:, :width], g[:, width:]
        with threadpool_limits(limits=1):
            known = basis[:, :hi]
            c = known.T @ g
            t[:hi, lo:hi], t[lo:hi, :hi] = c, c.T
            r = g - known @ c
            r -= known @ (known.T @ r)
            following, r_factor = np.linalg.qr(r)
            theta, w = _top(t[:hi, :hi], k)
            s = np.sqrt(np.clip(theta, 0, None))
            residual = np.linalg.norm(r_factor @ w[lo:hi], axis=0)
            residuals = np.divide(residual, s, out=residual.copy(), where=s > 0) / max(s[0], 1e-300)
            if i == n_iter - 1 or (residuals <= tol).all():
                break
            # restore orthogonality where G_i had little outside the basis
            following -= known @ (known.T @ following)
            basis[:, hi : hi + width], _ = np.linalg.qr(following)
    with threadpool_limits(limits=1):
        vectors = basis[:, :hi] @ w
    return Spectrum(
        singular_values=s, vectors=vectors, residuals=residuals, passes=i + 1, sums=sums
    )


def _signs(loadings: np.ndarray) -> np.ndarray:
    """Flip each component so its largest-magnitude loading is positive (deterministic signs)."""
    idx = np.argmax(np.abs(loadings), axis=0)
    flip: np.ndarray = np.sign(loadings[idx, np.arange(loadings.shape[1])])
    flip[flip == 0] = 1.0
    return flip


def _moments(
    vectors: np.ndarray, s: np.ndarray, sums: np.ndarray, *, depth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, sd (ddof=1) and depth correlation of each ``u = A v / s``, from ``A^T [1, d]``."""
    n = len(depth)
    inverse = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
    projected = vectors.T @ sums * inverse[:, None]
    mean = projected[:, 0] / n
    # each u has norm 1 (0 for a zero singular value): n - 1 times its variance is 1 - n mean^2
    spread = np.clip((s > 0).astype(np.float64) - n * mean**2, 0, None)
    sd = np.sqrt(spread / max(n - 1, 1))
    denominator = np.sqrt(spread * float(depth @ depth))
    correlation = np.divide(
        projected[:, 1], denominator, out=np.zeros_like(s), where=denominator > 0
    )
    return mean, np.where(sd > 0, sd, 1.0), np.clip(correlation, -1, 1)


def _embed(
    block: np.ndarray | sp.csr_matrix, weights: np.ndarray, *, shift: np.ndarray
) -> np.ndarray:
    coords: np.ndarray = (np.asarray(_float64(block) @ weights) + shift).astype(np.float32)
    return coords


def _validate_task_memory(
    ds: AnalysisStore, norm: Artifact, values: da.Array, *, features: np.ndarray, width: int
) -> None:
    """Refuse a pass whose tasks would hold more than a worker's memory (before any pass).

    A task holds the basis, its sum and the running sum (``3 p l`` float64),
    a shard of counts of every peak with its non-zero mask, and the entries of
    the selected peaks (their positions, float64 values and the CSR: 48 bytes
    each, twice the mean of a block for the densest).
    """
    p = int(values.shape[1])
    rows = max(values.chunks[0], default=0)
    counts = ds.assays[norm.parameters["assay"]].counts
    band = rows * counts.shape[1] * (counts.dtype.itemsize + 1)
    per_row = float(norm.read("feature_nnz")[features].sum()) / max(values.shape[0], 1)
    need = 3 * p * width * 8 + band + int(2 * 48 * per_row * rows)
    have = ds.engine.worker_memory()
    if need > have:
        msg = f"reduce.lsi: a pass over {p} peaks with a basis of {width} columns holds {format_bytes(need)} per task, more than the {format_bytes(have)} a worker has; select fewer peaks (features.prevalent_peaks(..., n_top=...)), ask for fewer components, or raise mem_budget"
        raise MemBudgetError(msg)


def _write_lsi(
    writer: ArtifactWriter,
    values: da.Array,
    spectrum: Spectrum,
    *,
    depth: np.ndarray,
    drop_first: bool | None,
    depth_threshold: float,
    scale_embeddings: bool,
) -> None:
    """Orient the components, decide which to keep, plan the coordinates' pass and write the rest."""
    n_cells, k = len(depth), len(spectrum.singular_values)
    vectors = spectrum.vectors * _signs(spectrum.vectors)
    s = spectrum.singular_values
    with threadpool_limits(limits=1):
        mean, sd, correlation = _moments(vectors, s, spectrum.sums, depth=depth)
    tracks_depth = bool(abs(correlation[0]) >= depth_threshold)
    drop = k >= 2 and (tracks_depth if drop_first is None else drop_first)
    kept = np.arange(1 if drop else 0, k, dtype=np.int64)
    inverse = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
    if scale_embeddings:
        scale, shift = inverse / sd, -mean / sd
    else:
        scale, shift = inverse, np.zeros(k)
    weights = vectors[:, kept] * scale[kept]
    coords = da.blockwise(
        _embed,
        "ij",
        values,
        "ik",
        da.from_array(weights, chunks=weights.shape),
        "kj",
        shift=shift[kept],
        concatenate=True,
        dtype=np.float32,
        adjust_chunks={"j": len(kept)},
    )
    writer.store("coords", coords, chunks=(min(n_cells, _COORD_CHUNK_ROWS), len(kept)))
    writer.write("singular_values", s)
    writer.write("variance", s**2 / max(n_cells - 1, 1))
    writer.write("stdev", s / np.sqrt(max(n_cells - 1, 1)))
    writer.write("loadings", vectors)
    writer.write("depth_correlation", correlation)
    writer.write("residuals", spectrum.residuals, attributes={"passes": spectrum.passes})
    writer.write("kept", kept)


def lsi(
    ds: AnalysisStore,
    normalized: ArtifactLike,
    peaks: ArtifactLike,
    *,
    n_comps: int = 50,
    drop_first: bool | None = None,
    depth_threshold: float = 0.75,
    n_iter: int = 10,
    oversample: int = 50,
    tol: float = 1e-5,
    seed: int = 0,
    scale_embeddings: bool = True,
    invalidate_cache: bool = False,
) -> Artifact:
    """Latent semantic indexing: the truncated SVD of the TF-IDF values of the selected peaks (an ``lsi`` artifact).

    Out of core, on the store's engine (see the module docstring). The
    artifact holds ``coords`` (float32, cells x the kept components: each
    component of ``U`` z-scored with R's ``sd`` when ``scale_embeddings``, as
    Signac and muon), ``singular_values``, ``variance`` (``s**2 / (n - 1)``),
    ``stdev`` (``s / sqrt(n - 1)``, muon's), ``loadings`` (peaks x
    components), ``depth_correlation`` (Pearson's, of each component of ``U``
    with log10 of the cells' total counts ``rowSums``, at least 1; Signac's
    ``DepthCor``), ``residuals`` (``||A^T u - s v|| / s_1``; its attribute
    ``passes``: the passes of the iteration), ``kept`` (int64, the
    components in ``coords``) and ``features`` (the peaks). ``graph.neighbors``
    reads ``coords``, so it uses the kept components.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    normalized
        The TF-IDF ``normalized`` artifact, or its ref.
    peaks
        The peaks selected on it (:func:`prevalent_peaks`, or ``hvgs``), or its ref.
    n_comps
        Components to compute (capped at the peaks and at the cells minus one).
    drop_first
        Leave the first component out of ``coords``: None (default) when
        ``|depth_correlation[0]| >= depth_threshold`` (the first component of
        log TF-IDF tracks depth; Signac's tutorial drops it), or always (True, False).
    depth_threshold
        From which ``drop_first=None`` drops it (ArchR's ``corCutOff``, 0.75).
    n_iter, oversample, tol, seed
        At most ``n_iter`` passes with a basis of ``n_comps + oversample``
        columns each, fewer once every component has ``||A^T u - s v|| <= tol
        * s_1`` (irlba's test; 0: all passes); ``seed`` draws the first block.
    scale_embeddings
        z-score each component in ``coords``; False stores ``U`` (columns of norm 1).
    invalidate_cache
        Compute a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The ``lsi`` artifact, in the scope of ``normalized``.

    Raises
    ------
    OperationArgumentError
        ``normalized`` is not TF-IDF, ``peaks`` was selected on another (or is
        of another kind), an argument is of the wrong type or out of range, or
        the cells and peaks leave too few components.
    MemBudgetError
        A task of a pass would hold more than a worker's memory.
    MissingArtifactError, IncompleteArtifactError
        ``normalized`` or ``peaks`` names no published artifact.
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_atac_store
    >>> path = write_atac_store(f"{tempfile.mkdtemp()}/atac.zarr", n_cells=200, n_peaks=300,
    ...                         cluster="threads")
    >>> ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    >>> norm = ds.features.normalize("ATAC")
    >>> result = lsi(ds, norm, prevalent_peaks(ds, norm), n_comps=10)
    >>> result.read("kept").tolist()  # the first component tracks depth
    [1, 2, 3, 4, 5, 6, 7, 8, 9]
    >>> result.read("coords").shape
    (200, 9)
    """
    operation = "reduce.lsi"
    norm = _tfidf_input(ds, normalized, operation=operation)
    selection = open_input(ds, peaks, kind=PEAK_SELECTIONS, operation=operation)
    if selection.inputs().get("normalized") != norm.ref:
        msg = f"{selection.ref}: these peaks were selected on {selection.inputs().get('normalized')}, not {norm.ref}; pass the peaks of this normalized artifact"
        raise OperationArgumentError(msg)
    n_comps = parse_int(n_comps, name="n_comps", operation=operation, minimum=1)
    if drop_first is not None:
        drop_first = parse_bool(drop_first, name="drop_first", operation=operation)
    depth_threshold = parse_float(
        depth_threshold, name="depth_threshold", operation=operation, non_negative=True, maximum=1.0
    )
    n_iter = parse_int(n_iter, name="n_iter", operation=operation, minimum=1)
    oversample = parse_int(oversample, name="oversample", operation=operation, minimum=0)
    tol = parse_float(tol, name="tol", operation=operation, non_negative=True)
    seed = parse_seed(seed, operation=operation)
    scale_embeddings = parse_bool(scale_embeddings, name="scale_embeddings", operation=operation)
    features = selection.read("features").astype(np.int64)
    n_cells = normalized_cells(norm)
    k = min(n_comps, len(features), n_cells - 1)
    if k < (2 if drop_first else 1):
        msg = f"{operation}: {n_cells} cells and {len(features)} peaks leave {max(k, 0)} components{', and drop_first=True needs 2' if drop_first else ''}; select more cells or peaks"
        raise OperationArgumentError(msg)
    width = k + oversample

    def build(writer: ArtifactWriter) -> None:
        values = normalized_values(ds, norm, features=features, sparse=True)
        exact = len(features) <= n_iter * width
        _validate_task_memory(
            ds, norm, values, features=features, width=len(features) if exact else width
        )
        library = ds.assays[norm.parameters["assay"]].summary("rowSums")
        depth = np.log10(np.maximum(np.asarray(library, np.float64)[norm.read("rows")], 1.0))
        depth -= depth.mean()
        extra = da.from_array(
            np.column_stack([np.ones(n_cells), depth]), chunks=(values.chunks[0], 2)
        )
        spectrum = krylov_spectrum(
            writer.run, values, k=k, width=width, n_iter=n_iter, tol=tol, seed=seed, extra=extra
        )
        _write_lsi(
            writer,
            values,
            spectrum,
            depth=depth,
            drop_first=drop_first,
            depth_threshold=depth_threshold,
            scale_embeddings=scale_embeddings,
        )
        writer.write("features", features)

    parameters: dict[str, Any] = {
        "nComps": k,
        "dropFirst": drop_first,
        "depthThreshold": depth_threshold,
        "nIter": n_iter,
        "oversample": oversample,
        "tol": tol,
        "seed": seed,
        "scaleEmbeddings": scale_embeddings,
    }
    return reuse_or_publish(
        ds,
        scope=norm.ref.scope,
        kind="lsi",
        operation=operation,
        parameters=parameters,
        inputs={"normalized": norm.ref, "peaks": selection.ref},
        build=build,
        invalidate_cache=invalidate_cache,
    )
