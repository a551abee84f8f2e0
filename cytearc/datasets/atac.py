"""A seeded synthetic scATAC-seq dataset (peaks x cells counts) with planted cell types.

:func:`generate_atac` returns it in memory, :func:`write_atac_store` streams
it into a CyteArc store (assay ``ATAC`` of type ATAC: ``counts`` only) and
:func:`atac_truth` gives its truth record without drawing a count. All three
draw the same counts for the same parameters.

The model, all of it drawn from ``seed``:

- peaks have lognormal base accessibilities (sigma :data:`BASE_SIGMA`);
- each of ``n_types`` cell types (1 to 16) opens its own
  :data:`SPECIFIC_SHARE` of the peaks (disjoint sets): their accessibility
  in that type is 3-8x the base, elsewhere the base. A type's peak shares
  ``p[t]`` are its accessibilities divided by their sum;
- cells come in :data:`N_SAMPLES` contiguous samples of uneven sizes, with
  per-sample type proportions around uneven base proportions;
- each cell has a depth ``d`` (expected fragments in peaks): lognormal
  (sigma :data:`DEPTH_SIGMA`) times a factor of its type (sigma 0.2) and of
  its sample (sigma 0.15), times an overall scale solved for so that
  ``density`` of the counts are expected to be non-zero. Depth varies most
  between cells, so the first LSI component tracks it, as in real data;
- the count of a peak in a cell is ``Poisson(d * p[t, peak])``: mostly 1,
  some 2s and rare 3s and more. It is drawn as the real process makes it: a
  ``Poisson(d)`` number of fragments, each falling in a peak drawn from
  ``p[t]``. Each cell's fragments come from a stream of its own
  (``[seed, 21, cell]``): ``n + 1`` exponential spacings give ``n`` sorted
  uniforms, inverted through the cumulative shares with a guide table
  (Chen & Asau), so each cell's peaks come out sorted and a cell costs
  about one pass over its fragments.

The counts of a cell depend on nothing but the parameters and the cell's
number: ``chunk_cells`` (the cells drawn together) bounds memory and never
changes a count. Peaks are named ``chr1:start-end`` from a stream of their
own, spread over the GRCh38 chromosomes (chr1-22, X) in proportion to their
lengths; the feature table also has ``chrom``, ``start`` and ``end``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from cytearc.datasets.synthetic import TYPE_NAMES
from cytearc.errors import OperationArgumentError
from cytearc.io.converters import ToZarr

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from distributed import Client

__all__ = [
    "ATAC_GENERATOR_VERSION",
    "AtacDataset",
    "AtacModel",
    "AtacParams",
    "DrawnSource",
    "atac_truth",
    "build_atac_model",
    "draw_atac_cells",
    "generate_atac",
    "write_atac_store",
]

ATAC_GENERATOR_VERSION: Final = 1
"""Incremented whenever the output for the same parameters changes."""
BASE_SIGMA: Final = 1.0
"""Sigma of the lognormal base accessibility of the peaks."""
SPECIFIC_SHARE: Final = 0.05
"""The share of the peaks each cell type opens."""
SPECIFIC_GAIN: Final = (3.0, 8.0)
"""The range of the uniform factor a type's specific peaks are opened by."""
DEPTH_SIGMA: Final = 0.5
"""Sigma of the lognormal depth of the cells."""
N_SAMPLES: Final = 4
"""Samples the cells come in, as contiguous runs."""
FEATURE_TYPE: Final = "Peaks"
CHROMOSOMES: Final = (
    ("chr1", 248_956_422),
    ("chr2", 242_193_529),
    ("chr3", 198_295_559),
    ("chr4", 190_214_555),
    ("chr5", 181_538_259),
    ("chr6", 170_805_979),
    ("chr7", 159_345_973),
    ("chr8", 145_138_636),
    ("chr9", 138_394_717),
    ("chr10", 133_797_422),
    ("chr11", 135_086_622),
    ("chr12", 133_275_309),
    ("chr13", 114_364_328),
    ("chr14", 107_043_718),
    ("chr15", 101_991_189),
    ("chr16", 90_338_345),
    ("chr17", 83_257_441),
    ("chr18", 80_373_285),
    ("chr19", 58_617_616),
    ("chr20", 64_444_167),
    ("chr21", 46_709_983),
    ("chr22", 50_818_468),
    ("chrX", 156_040_895),
)
"""GRCh38 chromosome lengths, the peaks' coordinates lie in."""
_FRAGMENTS_PER_BLOCK: Final = 2**20
"""Expected fragments drawn together when ``chunk_cells`` is not given."""
_PROBE_CELLS: Final = 256
_PROBE_PEAKS: Final = 4096

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
CodeArray = npt.NDArray[np.int8]


class DrawnSource:
    """A :class:`~cytearc.io.sources.CountSource` whose rows are drawn on demand, block by block.

    A band is cut from the blocks of cells it overlaps; the two blocks
    drawn last are kept, so an import's consecutive bands draw each block
    about once per pass. A block must be the same every time it is drawn.

    Parameters
    ----------
    cells, features
        The tables (``ids`` first; ``features`` with ``names`` and
        ``feature_types``).
    block_cells
        The cells of each block (the last may have fewer).
    draw_block
        The canonical int64 CSR counts of block ``index``.
    location
        What messages name the source by.
    """

    def __init__(
        self,
        *,
        cells: pd.DataFrame,
        features: pd.DataFrame,
        block_cells: int,
        draw_block: Callable[[int], sp.csr_matrix],
        location: str,
    ) -> None:
        self.cells = cells
        self.features = features
        self.location = location
        self._block_cells = block_cells
        self._draw_block = draw_block
        self._blocks: OrderedDict[int, sp.csr_matrix] = OrderedDict()

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)``."""
        return (len(self.cells), len(self.features))

    @property
    def dtype(self) -> np.dtype[np.int32]:
        """int32: the values are counts."""
        return np.dtype(np.int32)

    def _block(self, index: int) -> sp.csr_matrix:
        block = self._blocks.get(index)
        if block is None:
            block = self._draw_block(index)
            self._blocks[index] = block
            while len(self._blocks) > 2:
                self._blocks.popitem(last=False)
        return block

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Rows ``start:stop``, canonical CSR with int64 values.

        Parameters
        ----------
        start, stop
            The cells.

        Returns
        -------
        scipy.sparse.csr_matrix
            The counts of the cells.
        """
        size = self._block_cells
        parts = [
            self._block(index)[max(start - index * size, 0) : min(stop - index * size, size)]
            for index in range(start // size, -(-stop // size))
        ]
        if len(parts) == 1:
            return parts[0]
        return sp.csr_matrix(sp.vstack(parts, format="csr"))

    def close(self) -> None:
        """Forget the blocks kept."""
        self._blocks.clear()


# -- the model ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AtacParams:
    """What to generate (see the module docstring for the model).

    Parameters
    ----------
    n_cells, n_peaks
        The size of the matrix.
    seed
        Everything is drawn from it.
    n_types
        Cell types, each opening its own peaks (1 to 16).
    density
        Expected fraction of non-zero counts, in (0, 0.5].
    """

    n_cells: int
    n_peaks: int
    seed: int = 0
    n_types: int = 8
    density: float = 0.03

    @property
    def n_specific(self) -> int:
        """Peaks each type opens."""
        return max(1, round(SPECIFIC_SHARE * self.n_peaks))

    def validate(self) -> None:
        """Raise :class:`~cytearc.errors.OperationArgumentError` for sizes that cannot hold the model.

        Raises
        ------
        OperationArgumentError
            A size or the density is out of range.
        """
        if self.n_cells < 1:
            msg = f"n_cells: expected at least 1, got {self.n_cells}"
            raise OperationArgumentError(msg)
        if not 1 <= self.n_types <= 16:
            msg = f"n_types: expected 1 to 16, got {self.n_types}"
            raise OperationArgumentError(msg)
        least = round(self.n_types / SPECIFIC_SHARE)
        if not least <= self.n_peaks <= 10_000_000:
            msg = f"n_peaks: {self.n_types} types opening {SPECIFIC_SHARE:.0%} of the peaks each need {least} to 10,000,000 peaks, got {self.n_peaks}"
            raise OperationArgumentError(msg)
        if not 0 < self.density <= 0.5:
            msg = f"density: expected a fraction in (0, 0.5], got {self.density}"
            raise OperationArgumentError(msg)

    def to_json(self) -> dict[str, Any]:
        """The parameters as recorded in the truth record.

        Returns
        -------
        dict
            The parameters and :data:`ATAC_GENERATOR_VERSION`.
        """
        return {
            "n_cells": self.n_cells,
            "n_peaks": self.n_peaks,
            "seed": self.seed,
            "n_types": self.n_types,
            "density_target": self.density,
            "generator_version": ATAC_GENERATOR_VERSION,
        }


@dataclass(frozen=True, kw_only=True)
class AtacModel:
    """Everything per peak and per cell, drawn once; the counts of any cells are drawn from it.

    Made by :func:`build_atac_model`.

    Parameters
    ----------
    params
        What was generated.
    type_names, sample_names
        One per cell type and per sample.
    specific, gain
        Type x specific peak positions (sorted) and the factor opening each.
    cell_type, sample
        The int8 codes of each cell.
    depth
        Expected fragments in peaks of each cell (after scaling).
    depth_scale
        The scale solved for so that ``params.density`` of the counts are
        expected to be non-zero.
    boundaries
        Type x peak cumulative shares, each row increasing; the last is
        infinite, so that every uniform falls in a peak.
    guide
        Type x ``guide_scale + 1``: the first peak whose boundary is above
        ``k / guide_scale``, for each ``k``.
    guide_scale
        A power of two, at least half ``n_peaks``.
    """

    params: AtacParams
    type_names: list[str]
    sample_names: list[str]
    specific: IntArray
    gain: FloatArray
    cell_type: CodeArray
    sample: CodeArray
    depth: FloatArray
    depth_scale: float
    boundaries: FloatArray
    guide: IntArray
    guide_scale: int

    def locate(self, cell_type: int, keys: FloatArray) -> IntArray:
        """The peak each uniform falls in: ``searchsorted(boundaries[cell_type], keys, side="right")``.

        Parameters
        ----------
        cell_type
            The type whose shares are inverted.
        keys
            Uniforms in ``[0, 1]``.

        Returns
        -------
        numpy.ndarray
            One int64 peak per key.
        """
        boundaries = self.boundaries[cell_type]
        # the scale is a power of two: key * scale and its floor are exact
        found: IntArray = self.guide[cell_type][(keys * self.guide_scale).astype(np.int64)]
        behind = np.flatnonzero(boundaries[found] <= keys)
        while behind.size:
            found[behind] += 1
            behind = behind[boundaries[found[behind]] <= keys[behind]]
        return found

    def truth(self) -> dict[str, Any]:
        """The truth record (JSON-serializable).

        Returns
        -------
        dict
            ``params``, ``types``, ``cell_types`` (each cell's type),
            ``cells_per_type``, ``specific_peaks`` (positions per type),
            ``samples`` and ``depth_scale``.
        """
        p = self.params
        return {
            "params": p.to_json(),
            "types": list(self.type_names),
            "cell_types": np.asarray(self.type_names)[self.cell_type].tolist(),
            "cells_per_type": dict(
                zip(
                    self.type_names,
                    np.bincount(self.cell_type, minlength=p.n_types).tolist(),
                    strict=True,
                )
            ),
            "specific_peaks": {
                name: self.specific[t].tolist() for t, name in enumerate(self.type_names)
            },
            "samples": list(self.sample_names),
            "depth_scale": self.depth_scale,
        }


def _expected_density(depth: FloatArray, shares: FloatArray) -> float:
    """Expected non-zero fraction of cells of these depths over peaks of these shares (cell x peak)."""
    return float(-np.expm1(-depth[:, None] * shares).mean())


def _solve_scale(depth: FloatArray, shares: FloatArray, target: float) -> float:
    """The depth scale whose expected non-zero fraction is ``target``, bisected in log space."""
    low, high = 1e-6, 1e12
    for _ in range(48):
        middle = float(np.sqrt(low * high))
        if _expected_density(depth * middle, shares) < target:
            low = middle
        else:
            high = middle
    return float(np.sqrt(low * high))


def build_atac_model(params: AtacParams) -> AtacModel:
    """Draw the peaks, the types and samples, and the cells' types and depths.

    Parameters
    ----------
    params
        What to generate; validated first.

    Returns
    -------
    AtacModel
        What the counts are drawn from.

    Raises
    ------
    OperationArgumentError
        ``params`` fails :meth:`AtacParams.validate`.
    """
    params.validate()
    rng = np.random.default_rng([params.seed, 20])
    n_cells, n_peaks, n_types = params.n_cells, params.n_peaks, params.n_types
    base = rng.lognormal(0.0, BASE_SIGMA, size=n_peaks)
    n_specific = params.n_specific
    specific = np.sort(
        rng.permutation(n_peaks)[: n_types * n_specific].reshape(n_types, n_specific), axis=1
    )
    gain = rng.uniform(*SPECIFIC_GAIN, size=(n_types, n_specific))
    shares = np.tile(base, (n_types, 1))
    for t in range(n_types):
        shares[t, specific[t]] *= gain[t]
    shares /= shares.sum(axis=1, keepdims=True)

    sizes = rng.multinomial(n_cells, rng.dirichlet(np.full(N_SAMPLES, 8.0)))
    sample = np.repeat(np.arange(N_SAMPLES), sizes).astype(np.int8)
    type_share = rng.dirichlet(np.full(n_types, 1.5))
    cell_type = np.empty(n_cells, dtype=np.int8)
    start = 0
    for size in sizes.tolist():
        share = rng.dirichlet(50.0 * type_share + 0.5)
        cell_type[start : start + size] = rng.choice(n_types, size=size, p=share)
        start += size
    depth = (
        rng.lognormal(0.0, DEPTH_SIGMA, size=n_cells)
        * rng.lognormal(0.0, 0.2, size=n_types)[cell_type]
        * rng.lognormal(0.0, 0.15, size=N_SAMPLES)[sample]
    )

    cells = np.linspace(0, n_cells - 1, min(n_cells, _PROBE_CELLS)).astype(np.int64)
    peaks = np.linspace(0, n_peaks - 1, min(n_peaks, _PROBE_PEAKS)).astype(np.int64)
    probe = shares[:, peaks][cell_type[cells].astype(np.int64)]
    scale = _solve_scale(depth[cells], probe, params.density)

    boundaries = np.cumsum(shares, axis=1)
    boundaries[:, -1] = np.inf
    guide_scale = 1 << max(0, n_peaks.bit_length() - 1)
    steps = np.arange(guide_scale + 1) / guide_scale
    guide = np.stack([np.searchsorted(row, steps, side="right") for row in boundaries])
    names = TYPE_NAMES if n_types <= len(TYPE_NAMES) else ()
    return AtacModel(
        params=params,
        type_names=[names[t] if names else f"type_{t:02d}" for t in range(n_types)],
        sample_names=[f"sample{s + 1}" for s in range(N_SAMPLES)],
        specific=specific.astype(np.int64),
        gain=gain,
        cell_type=cell_type,
        sample=sample,
        depth=depth * scale,
        depth_scale=scale,
        boundaries=boundaries,
        guide=guide,
        guide_scale=guide_scale,
    )


def _runs(found: IntArray, lengths: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """CSR row pointers, peaks and counts of cells whose sorted fragment peaks are ``found``, ``lengths`` each."""
    cell_starts = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=cell_starts[1:])
    first = np.ones(found.size, dtype=bool)
    np.not_equal(found[1:], found[:-1], out=first[1:])
    first[cell_starts[:-1][lengths > 0]] = True
    runs = np.flatnonzero(first)
    return np.searchsorted(runs, cell_starts), found[runs], np.diff(runs, append=found.size)


def draw_atac_cells(model: AtacModel, start: int, stop: int) -> sp.csr_matrix:
    """The counts of cells ``start:stop``, each cell from its own stream.

    Parameters
    ----------
    model
        What the counts are drawn from.
    start, stop
        The cells.

    Returns
    -------
    scipy.sparse.csr_matrix
        Cells x peaks, canonical, int64 values.
    """
    p = model.params
    n = stop - start
    types = model.cell_type[start:stop].astype(np.int64)
    fragments = np.zeros(n, dtype=np.int64)
    uniforms: list[list[FloatArray]] = [[] for _ in range(p.n_types)]
    for k, cell in enumerate(range(start, stop)):
        rng = np.random.default_rng([p.seed, 21, cell])
        m = int(rng.poisson(model.depth[cell]))
        spacings = np.cumsum(rng.standard_exponential(m + 1))
        uniforms[types[k]].append(spacings[:m] / spacings[m])
        fragments[k] = m
    # one type at a time, so that the lookups stay within one type's tables
    groups = []
    for t in range(p.n_types):
        if uniforms[t]:
            keys = np.concatenate(uniforms[t])
            uniforms[t] = []
            cells = np.flatnonzero(types == t)
            groups.append((cells, *_runs(model.locate(t, keys), fragments[cells])))
    indptr = np.zeros(n + 1, dtype=np.int64)
    for cells, group_indptr, _, _ in groups:
        indptr[cells + 1] = np.diff(group_indptr)
    np.cumsum(indptr, out=indptr)
    peaks = np.empty(int(indptr[-1]), dtype=np.int32)
    values = np.empty(int(indptr[-1]), dtype=np.int64)
    for cells, group_indptr, group_peaks, group_values in groups:
        lengths = np.diff(group_indptr)
        target = np.repeat(indptr[cells] - group_indptr[:-1], lengths) + np.arange(group_peaks.size)
        peaks[target] = group_peaks
        values[target] = group_values
    return sp.csr_matrix((values, peaks, indptr), shape=(n, p.n_peaks))


def _block_cells(model: AtacModel, chunk_cells: int | None) -> int:
    """The cells drawn together: ``chunk_cells``, or those of about :data:`_FRAGMENTS_PER_BLOCK` fragments."""
    if chunk_cells is None:
        per_cell = max(float(model.depth.mean()), 1.0)
        return int(min(model.params.n_cells, max(1, _FRAGMENTS_PER_BLOCK // per_cell)))
    if chunk_cells < 1:
        msg = f"chunk_cells: expected at least 1 cell, got {chunk_cells}"
        raise OperationArgumentError(msg)
    return chunk_cells


def _cells_table(model: AtacModel) -> pd.DataFrame:
    sample = model.sample.tolist()
    return pd.DataFrame(
        {
            "ids": [f"atac{c + 1:07d}-{s + 1}" for c, s in enumerate(sample)],
            "cell_type": pd.Categorical.from_codes(
                model.cell_type, dtype=pd.CategoricalDtype(model.type_names)
            ),
            "sample": pd.Categorical.from_codes(
                model.sample, dtype=pd.CategoricalDtype(model.sample_names)
            ),
        }
    )


def _features_table(params: AtacParams) -> pd.DataFrame:
    """Peaks spread over the chromosomes by length, each in its own slot, from their own stream."""
    rng = np.random.default_rng([params.seed, 22])
    n_peaks = params.n_peaks
    lengths = np.array([length for _, length in CHROMOSOMES], dtype=np.int64)
    exact = n_peaks * lengths / lengths.sum()
    per = np.floor(exact).astype(np.int64)
    extra = np.argsort(per - exact, kind="stable")[: n_peaks - int(per.sum())]
    per[extra] += 1
    chrom = np.repeat(np.arange(len(CHROMOSOMES)), per)
    rank = np.arange(n_peaks) - np.repeat(np.cumsum(per) - per, per)
    slot = lengths[chrom] // np.maximum(per[chrom], 1)
    width = np.maximum(np.minimum(rng.integers(200, 1200, size=n_peaks), slot // 2), 1)
    start = rank * slot + (rng.random(n_peaks) * (slot - width + 1)).astype(np.int64)
    end = start + width
    chroms = np.asarray([name for name, _ in CHROMOSOMES])[chrom]
    names = [
        f"{c}:{s}-{e}"
        for c, s, e in zip(chroms.tolist(), start.tolist(), end.tolist(), strict=True)
    ]
    return pd.DataFrame(
        {
            "ids": names,
            "names": names,
            "feature_types": [FEATURE_TYPE] * n_peaks,
            "chrom": chroms,
            "start": start,
            "end": end,
        }
    )


def _params(*, n_cells: int, n_peaks: int, n_types: int, density: float, seed: int) -> AtacParams:
    return AtacParams(n_cells=n_cells, n_peaks=n_peaks, seed=seed, n_types=n_types, density=density)


def atac_truth(
    *,
    n_cells: int = 3000,
    n_peaks: int = 20000,
    n_types: int = 8,
    density: float = 0.03,
    seed: int = 0,
) -> dict[str, Any]:
    """The truth record of the dataset of these parameters, without drawing a count.

    Parameters
    ----------
    n_cells, n_peaks, n_types, density, seed
        What :func:`generate_atac` or :func:`write_atac_store` generated.

    Returns
    -------
    dict
        JSON-serializable: see :meth:`AtacModel.truth`; it equals
        ``generate_atac(...).truth``.

    Raises
    ------
    OperationArgumentError
        A parameter is out of range.

    Examples
    --------
    >>> truth = atac_truth(n_cells=100, n_peaks=1000, n_types=2, seed=1)
    >>> truth["types"], len(truth["specific_peaks"]["B_cell"]), len(truth["cell_types"])
    (['T_cell', 'B_cell'], 50, 100)
    """
    params = _params(n_cells=n_cells, n_peaks=n_peaks, n_types=n_types, density=density, seed=seed)
    return build_atac_model(params).truth()


@dataclass(frozen=True, kw_only=True, eq=False)
class AtacDataset:
    """A generated scATAC-seq dataset in memory, with the truth it was drawn from.

    Parameters
    ----------
    counts
        Cells x peaks, int32, canonical CSR.
    cells
        ``ids``, and categorical ``cell_type`` and ``sample``.
    features
        ``ids`` and ``names`` (``chr1:start-end``), ``feature_types``
        (``Peaks``), ``chrom``, ``start`` and ``end``.
    truth
        See :meth:`AtacModel.truth`.
    """

    counts: sp.csr_matrix
    cells: pd.DataFrame
    features: pd.DataFrame
    truth: dict[str, Any]


def generate_atac(
    *,
    n_cells: int = 3000,
    n_peaks: int = 20000,
    n_types: int = 8,
    density: float = 0.03,
    seed: int = 0,
    chunk_cells: int | None = None,
) -> AtacDataset:
    """Generate the scATAC-seq dataset in memory (see the module docstring for the model).

    Parameters
    ----------
    n_cells, n_peaks
        The size of the matrix.
    n_types
        Cell types, each opening its own peaks (1 to 16).
    density
        Expected fraction of non-zero counts, in (0, 0.5].
    seed
        Everything is drawn from it.
    chunk_cells
        Cells drawn together (by default those of about a million
        fragments); it changes no count.

    Returns
    -------
    AtacDataset
        The counts, the cell and feature tables, and the truth record.

    Raises
    ------
    OperationArgumentError
        A parameter is out of range.

    Examples
    --------
    >>> data = generate_atac(n_cells=200, n_peaks=2000, n_types=4, seed=1)
    >>> data.counts.shape, data.counts.dtype
    ((200, 2000), dtype('int32'))
    >>> round(data.counts.nnz / (200 * 2000), 2)
    0.03
    >>> data.features.columns.tolist()
    ['ids', 'names', 'feature_types', 'chrom', 'start', 'end']
    """
    params = _params(n_cells=n_cells, n_peaks=n_peaks, n_types=n_types, density=density, seed=seed)
    model = build_atac_model(params)
    size = _block_cells(model, chunk_cells)
    blocks = [
        draw_atac_cells(model, start, min(start + size, n_cells))
        for start in range(0, n_cells, size)
    ]
    counts = sp.csr_matrix(sp.vstack(blocks, format="csr"), dtype=np.int32)
    return AtacDataset(
        counts=counts,
        cells=_cells_table(model),
        features=_features_table(params),
        truth=model.truth(),
    )


def write_atac_store(
    path: str | Path,
    *,
    n_cells: int = 3000,
    n_peaks: int = 20000,
    n_types: int = 8,
    density: float = 0.03,
    seed: int = 0,
    chunk_cells: int | None = None,
    overwrite: bool = False,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: str | Client | None = None,
    show_progress: bool = False,
) -> Path | str:
    """Generate the scATAC-seq dataset into a new store, streaming: never the whole matrix in memory.

    The store has one assay, ``ATAC`` of type ATAC (``counts`` only). The
    cells are drawn ``chunk_cells`` at a time as the import asks for them
    (twice: it scans the values, then writes), so memory is that of a few
    blocks and an import band whatever ``n_cells`` is.

    Parameters
    ----------
    path
        The store to create.
    n_cells, n_peaks, n_types, density, seed, chunk_cells
        What to generate (see :func:`generate_atac`).
    overwrite
        Replace an existing CyteArc store at ``path``.
    mem_budget, workers, cluster
        The engine of the import (see :func:`~cytearc.io.importer.write_store`).
    show_progress
        Progress bars for the import.

    Returns
    -------
    pathlib.Path or str
        The store's path (its URL when written to one).

    Raises
    ------
    OperationArgumentError
        A parameter is out of range (nothing is written).
    DestinationExistsError
        ``path`` holds anything but a CyteArc store that ``overwrite`` may
        replace.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_atac_store(f"{d}/atac.zarr", n_cells=300, n_peaks=2000, cluster="threads")
    ...     ds = DataStore(path)
    ...     ds.ATAC.shape, ds.ATAC.assayType, ds.ATAC.features.fetch_all("ids")[0]
    ((300, 2000), 'ATAC', 'chr1:...-...')
    """
    params = _params(n_cells=n_cells, n_peaks=n_peaks, n_types=n_types, density=density, seed=seed)
    model = build_atac_model(params)
    size = _block_cells(model, chunk_cells)
    source = DrawnSource(
        cells=_cells_table(model),
        features=_features_table(params),
        block_cells=size,
        draw_block=lambda index: draw_atac_cells(
            model, index * size, min((index + 1) * size, n_cells)
        ),
        location=f"<synthetic ATAC, seed {seed}>",
    )
    result = ToZarr(
        source,
        path,
        overwrite=overwrite,
        mem_budget=mem_budget,
        workers=workers,
        cluster=cluster,
        show_progress=show_progress,
    ).dump()
    return result.path
