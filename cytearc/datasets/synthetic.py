"""A seeded synthetic single-cell dataset with known cell types, marker genes, donors and conditions.

:func:`generate` returns it in memory, :func:`write_store` imports it into a
CyteArc store, and :func:`write_dataset` writes it as a 10x Matrix Market
folder and an H5AD file. All three draw the same counts for the same
parameters.

The model, all of it drawn from ``seed``:

- genes have lognormal base proportions (sigma 1.8) and negative-binomial
  dispersions ``r`` (lognormal around 2.5: variance ``mu + mu**2 / r``);
- ``n_types`` cell types (8 by default) each up-weight their own
  ``n_markers`` genes (20 by default, drawn among the more expressed half)
  by 4-30x; ``n_donors`` donors (6) shift every gene a little (lognormal
  sigma 0.15) and their library sizes (sigma 0.2); the ``stim`` condition
  raises 100 response genes 2-6x over ``ctrl``;
- cells come in contiguous samples (donor x condition, as libraries
  concatenated by a pipeline), with per-sample type proportions around
  uneven base proportions;
- library sizes vary lognormally (sigma 0.45) per cell and by cell type;
  their overall scale is solved for so that ``nonzero`` (7 %) of the counts
  are expected to be non-zero;
- a count is ``NegativeBinomial(mean = library * profile, r)``, drawn by
  inverse transform: one float32 uniform per matrix entry decides zero
  versus non-zero against ``P(0)``, and only the non-zero entries walk the
  CDF, so a chunk of cells costs about one pass over its dense entries;
- among the genes that are neither markers nor response genes, 13 are named
  as the mitochondrial genes (``MT-ND1`` ...), picked among genes whose base
  proportions add up to about 4 % (so a cell's percent mito is a few
  percent), and 60 as ribosomal genes (``RPL3`` ... ``RPS28``), picked
  among the more expressed half. Names are drawn from a stream of their
  own: they change no count.

Cells are generated in chunks of :data:`CHUNK_CELLS`, each from its own
seeded stream, so memory stays bounded whatever ``n_cells`` is and the
counts do not depend on how they are buffered.

:func:`write_dataset` fills a folder with:

``mtx/``
    ``matrix.mtx`` (plain text, ``%%MatrixMarket matrix coordinate integer
    general``, genes x cells, 1-based, sorted by cell then gene, as Cell
    Ranger writes it), ``features.tsv.gz`` (id, name, ``Gene Expression``)
    and ``barcodes.tsv.gz``.
``data.h5ad``
    AnnData's on-disk layout written with h5py: ``X`` a CSR group (int32
    ``data`` and ``indices``, int64 ``indptr``, uncompressed); ``obs``
    indexed by the barcodes with categorical ``cell_type``, ``donor``,
    ``condition`` and ``sample``; ``var`` indexed by the gene ids with ``gene_symbols``
    and ``feature_types``.
``truth.json``
    The truth record (see :attr:`SyntheticDataset.truth`).
``COMPLETE``
    Written last; a folder without it is an interrupted run.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import h5py
import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp
from tqdm.auto import tqdm

from cytearc.errors import OperationArgumentError
from cytearc.io.converters import SparseToZarr

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "CHUNK_CELLS",
    "CONDITIONS",
    "GENERATOR_VERSION",
    "MITO_NAMES",
    "RIBOSOMAL_NAMES",
    "Chunk",
    "Model",
    "Params",
    "SyntheticDataset",
    "build_model",
    "cells_table",
    "draw_chunk",
    "generate",
    "is_complete",
    "iter_chunks",
    "write_dataset",
    "write_store",
]

CHUNK_CELLS: Final = 1000
"""Cells per generated chunk, each from its own seeded stream (fixed: the counts depend on it)."""
GENERATOR_VERSION: Final = 2
"""Incremented whenever the output for the same parameters changes (2: mitochondrial and ribosomal names)."""
CONDITIONS: Final = ("ctrl", "stim")
TYPE_NAMES: Final = (
    "T_cell",
    "B_cell",
    "NK_cell",
    "CD14_monocyte",
    "CD16_monocyte",
    "dendritic",
    "plasmacytoid_DC",
    "megakaryocyte",
)
N_RESPONSE_GENES: Final = 100
MITO_NAMES: Final = (
    "MT-ND1",
    "MT-ND2",
    "MT-CO1",
    "MT-CO2",
    "MT-ATP8",
    "MT-ATP6",
    "MT-CO3",
    "MT-ND3",
    "MT-ND4L",
    "MT-ND4",
    "MT-ND5",
    "MT-ND6",
    "MT-CYB",
)
"""The 13 protein-coding mitochondrial genes, in genome order."""
RIBOSOMAL_NAMES: Final = tuple(
    [f"RPL{n}" for n in range(3, 36)] + [f"RPS{n}" for n in range(2, 29)]
)
"""60 ribosomal protein genes."""
MITO_SHARE: Final = 0.04
"""Target sum of the base proportions of the mitochondrial genes."""
FEATURE_TYPE: Final = "Gene Expression"
_CALIBRATION_CELLS: Final = 400
_MTX_BANNER: Final = "%%MatrixMarket matrix coordinate integer general"
_COMPLETE: Final = "COMPLETE"

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
F32Array = npt.NDArray[np.float32]
CodeArray = npt.NDArray[np.int8]


# -- the model ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Params:
    """What to generate (see the module docstring for the model).

    Parameters
    ----------
    n_cells, n_genes
        The size of the matrix.
    seed
        Everything is drawn from it.
    n_types
        Cell types, each with its own marker genes (1 to 127).
    n_markers
        Marker genes per cell type.
    n_donors
        Donors, each with a ``ctrl`` and a ``stim`` sample (1 to 127).
    nonzero
        Expected fraction of non-zero counts, in (0, 0.9).
    """

    n_cells: int
    n_genes: int
    seed: int = 0
    n_types: int = 8
    n_markers: int = 20
    """Marker genes per cell type."""
    n_donors: int = 6
    nonzero: float = 0.07
    """Expected fraction of non-zero counts."""

    def validate(self) -> None:
        """Raise :class:`~cytearc.errors.OperationArgumentError` when the sizes cannot hold the planted structure.

        Raises
        ------
        OperationArgumentError
            A size is out of range, or the genes cannot hold the markers and
            response genes in their more expressed half.
        """
        if self.n_cells < 1 or self.n_genes < 1:
            msg = f"n_cells, n_genes: need at least one cell and one gene, got {self.n_cells} x {self.n_genes}; raise them"
            raise OperationArgumentError(msg)
        for name, value in (("n_types", self.n_types), ("n_donors", self.n_donors)):
            if not 1 <= value <= 127:
                msg = f"{name}: expected 1 to 127 (stored as int8 codes), got {value}"
                raise OperationArgumentError(msg)
        if self.n_markers < 1:
            msg = f"n_markers: expected at least 1, got {self.n_markers}"
            raise OperationArgumentError(msg)
        if self.n_types * self.n_markers + N_RESPONSE_GENES > self.n_genes // 2:
            msg = (
                f"{self.n_types} types x {self.n_markers} markers + {N_RESPONSE_GENES} response "
                f"genes need at least {2 * (self.n_types * self.n_markers + N_RESPONSE_GENES)} "
                f"genes, got {self.n_genes}: raise n_genes or lower n_types or n_markers"
            )
            raise OperationArgumentError(msg)
        if not 0 < self.nonzero < 0.9:
            msg = f"nonzero: expected a fraction in (0, 0.9), got {self.nonzero}"
            raise OperationArgumentError(msg)

    def to_json(self) -> dict[str, Any]:
        """The parameters as recorded in the truth record.

        Returns
        -------
        dict
            The parameters, the chunk size and :data:`GENERATOR_VERSION`.
        """
        return {
            "n_cells": self.n_cells,
            "n_genes": self.n_genes,
            "seed": self.seed,
            "n_types": self.n_types,
            "n_markers": self.n_markers,
            "n_donors": self.n_donors,
            "nonzero_target": self.nonzero,
            "chunk_cells": CHUNK_CELLS,
            "generator_version": GENERATOR_VERSION,
        }


@dataclass(frozen=True, kw_only=True)
class Model:
    """Everything per gene and per cell, drawn once; chunks of counts are drawn from it.

    Made by :func:`build_model`; each field is described below its declaration.

    Parameters
    ----------
    params
        What was generated.
    gene_ids, gene_names
        One per gene.
    type_names, donor_names
        One per cell type and per donor.
    dispersion, profiles, markers, response, mito, ribosomal
        Per gene and per profile (see the attributes).
    cell_type, donor, condition
        The int8 codes of each cell.
    library
        Expected library size of each cell (after scaling).
    library_scale
        The scale solved for so that ``params.nonzero`` of the counts are
        expected to be non-zero.
    """

    params: Params
    gene_ids: list[str]
    gene_names: list[str]
    type_names: list[str]
    donor_names: list[str]
    dispersion: F32Array
    """``r`` per gene."""
    profiles: F32Array
    """(type, donor, condition) x gene expression proportions, each row summing to 1."""
    markers: IntArray
    """Type x marker gene positions."""
    response: IntArray
    """Positions of the genes the ``stim`` condition raises, sorted."""
    mito: IntArray
    """Positions of the genes named as mitochondrial, sorted."""
    ribosomal: IntArray
    """Positions of the genes named as ribosomal, sorted."""
    cell_type: CodeArray
    donor: CodeArray
    condition: CodeArray
    library: F32Array
    """Expected library size of each cell (after scaling)."""
    library_scale: float

    def profile_rows(self, cells: slice) -> IntArray:
        """The row of :attr:`profiles` of each cell.

        Parameters
        ----------
        cells
            A run of cells.

        Returns
        -------
        numpy.ndarray
            One int64 row index per cell.
        """
        t = self.cell_type[cells].astype(np.int64)
        d = self.donor[cells].astype(np.int64)
        c = self.condition[cells].astype(np.int64)
        return (t * self.params.n_donors + d) * len(CONDITIONS) + c

    def means(self, cells: slice) -> F32Array:
        """Expected counts of the cells (dense, cells x genes, float32).

        Parameters
        ----------
        cells
            A run of cells.

        Returns
        -------
        numpy.ndarray
            The expected counts, float32, cells x genes.
        """
        means: F32Array = self.profiles[self.profile_rows(cells)]
        means *= self.library[cells, None]
        return means

    def barcodes(self) -> list[str]:
        """Unique 16-base barcodes (a bijection of the cell number) with the sample number as suffix.

        Returns
        -------
        list of str
            One barcode per cell, such as ``AAAAAAAAAAAAAAAA-1``.
        """
        n_cells = self.params.n_cells
        bases = np.frombuffer(b"ACGT", dtype=np.uint8)
        # an odd multiplier modulo 4**16 is a bijection, so the barcodes never collide
        code = (np.arange(n_cells, dtype=np.uint64) * np.uint64(2_654_435_761)) % np.uint64(4**16)
        letters = np.empty((n_cells, 16), dtype=np.uint8)
        for position in range(16):
            letters[:, 15 - position] = bases[(code >> np.uint64(2 * position)) & np.uint64(3)]
        sample = self.donor.astype(np.int64) * len(CONDITIONS) + self.condition + 1
        words = letters.view("S16").ravel().astype(str)
        return [f"{w}-{s}" for w, s in zip(words.tolist(), sample.tolist(), strict=True)]


def _expected_nonzero(profiles: F32Array, rows: IntArray, library: F32Array, r: F32Array) -> float:
    """Expected fraction of non-zero counts of the cells given by ``rows`` and ``library``."""
    means = profiles[rows] * library[:, None]
    zero = np.exp(-r * np.log1p(means / r))
    return float(1.0 - zero.mean(dtype=np.float64))


def _named_genes(base: FloatArray, special: IntArray, *, seed: int) -> tuple[IntArray, IntArray]:
    """Mitochondrial and ribosomal gene positions, among genes not in ``special``, from their own stream."""
    rng = np.random.default_rng([seed, 2])
    free = np.setdiff1d(np.arange(base.size), special)
    target = np.log(MITO_SHARE / len(MITO_NAMES))
    nearest = np.argsort(np.abs(np.log(base[free]) - target), kind="stable")
    candidates = free[nearest[: 3 * len(MITO_NAMES)]]
    mito = np.sort(rng.choice(candidates, size=len(MITO_NAMES), replace=False))
    rest = np.setdiff1d(free, mito)
    pool = rest[base[rest] >= np.median(base)]
    if pool.size < len(RIBOSOMAL_NAMES):
        pool = rest
    ribosomal = np.sort(rng.choice(pool, size=len(RIBOSOMAL_NAMES), replace=False))
    return mito.astype(np.int64), ribosomal.astype(np.int64)


def build_model(params: Params) -> Model:
    """Draw the genes, the types, donors and conditions, and the cells' metadata.

    Parameters
    ----------
    params
        What to generate; validated first.

    Returns
    -------
    Model
        The per-gene and per-cell parameters the counts are drawn from.

    Raises
    ------
    OperationArgumentError
        ``params`` fails :meth:`Params.validate`.
    """
    params.validate()
    rng = np.random.default_rng([params.seed, 0])
    n_genes, n_types, n_donors = params.n_genes, params.n_types, params.n_donors
    base = rng.lognormal(0.0, 1.8, size=n_genes)
    base /= base.sum()
    dispersion = rng.lognormal(np.log(2.5), 0.5, size=n_genes).astype(np.float32)

    # markers and response genes: disjoint, among the more expressed half of the genes
    expressed = np.flatnonzero(base >= np.median(base))
    picked = rng.choice(
        expressed, size=n_types * params.n_markers + N_RESPONSE_GENES, replace=False
    )
    markers = picked[: n_types * params.n_markers].reshape(n_types, params.n_markers)
    response = np.sort(picked[n_types * params.n_markers :])
    type_profiles = np.tile(base, (n_types, 1))
    for t in range(n_types):
        type_profiles[t, markers[t]] *= rng.uniform(4.0, 30.0, size=params.n_markers)
    donor_effect = rng.lognormal(0.0, 0.15, size=(n_donors, n_genes))
    stim_effect = np.ones(n_genes)
    stim_effect[response] = rng.uniform(2.0, 6.0, size=response.size)
    condition_effect = np.stack([np.ones(n_genes), stim_effect])
    profiles = (
        type_profiles[:, None, None, :]
        * donor_effect[None, :, None, :]
        * condition_effect[None, None, :, :]
    ).reshape(-1, n_genes)
    profiles /= profiles.sum(axis=1, keepdims=True)

    # samples (donor x condition) are contiguous runs of cells of uneven sizes
    n_samples = n_donors * len(CONDITIONS)
    sizes = rng.multinomial(params.n_cells, rng.dirichlet(np.full(n_samples, 8.0)))
    sample = np.repeat(np.arange(n_samples), sizes)
    donor = (sample // len(CONDITIONS)).astype(np.int8)
    condition = (sample % len(CONDITIONS)).astype(np.int8)
    type_share = rng.dirichlet(np.full(n_types, 1.5))
    cell_type = np.empty(params.n_cells, dtype=np.int8)
    start = 0
    for size in sizes.tolist():
        share = rng.dirichlet(50.0 * type_share + 0.5)
        cell_type[start : start + size] = rng.choice(n_types, size=size, p=share)
        start += size
    type_library = rng.lognormal(0.0, 0.3, size=n_types)
    donor_library = rng.lognormal(0.0, 0.2, size=n_donors)
    library = (
        rng.lognormal(0.0, 0.45, size=params.n_cells)
        * type_library[cell_type]
        * donor_library[donor]
    ).astype(np.float32)

    profiles32 = profiles.astype(np.float32)
    rows = (cell_type.astype(np.int64) * n_donors + donor) * len(CONDITIONS) + condition
    probe = np.linspace(0, params.n_cells - 1, min(params.n_cells, _CALIBRATION_CELLS))
    probe = probe.astype(np.int64)
    low, high = 1.0, 1e7  # library scale: bisect in log space for the non-zero fraction
    for _ in range(40):
        middle = float(np.sqrt(low * high))
        found = _expected_nonzero(
            profiles32, rows[probe], library[probe] * np.float32(middle), dispersion
        )
        low, high = (middle, high) if found < params.nonzero else (low, middle)
    scale = float(np.sqrt(low * high))

    type_names = [
        TYPE_NAMES[t] if n_types <= len(TYPE_NAMES) else f"type_{t:02d}" for t in range(n_types)
    ]
    gene_names = [f"SYN{g + 1:05d}" for g in range(n_genes)]
    for t in range(n_types):
        for j, g in enumerate(markers[t].tolist()):
            gene_names[g] = f"{type_names[t].upper()}_MARKER{j + 1:02d}"
    mito, ribosomal = _named_genes(base, picked, seed=params.seed)
    for g, name in zip(
        [*mito.tolist(), *ribosomal.tolist()], MITO_NAMES + RIBOSOMAL_NAMES, strict=True
    ):
        gene_names[g] = name
    return Model(
        params=params,
        gene_ids=[f"ENSSYN{g + 1:011d}" for g in range(n_genes)],
        gene_names=gene_names,
        type_names=type_names,
        donor_names=[f"donor{d + 1}" for d in range(n_donors)],
        dispersion=dispersion,
        profiles=profiles32,
        markers=markers.astype(np.int64),
        response=response.astype(np.int64),
        mito=mito,
        ribosomal=ribosomal,
        cell_type=cell_type,
        donor=donor,
        condition=condition,
        library=(library * np.float32(scale)).astype(np.float32),
        library_scale=scale,
    )


def _nb_nonzero(means: FloatArray, r: FloatArray, u: FloatArray) -> IntArray:
    """Negative-binomial draws known to be non-zero, by walking the CDF up to ``u``.

    ``u`` is uniform above ``P(0)`` (the same uniform that decided non-zero),
    so this is an exact inverse-transform draw conditioned on a non-zero.
    """
    out = np.ones(means.size, dtype=np.int64)
    q = means / (r + means)
    pmf = np.exp(-r * np.log1p(means / r))
    cdf = pmf.copy()
    active = np.arange(means.size)
    k = 0
    while active.size:
        k += 1
        pmf *= (k - 1 + r) / k * q
        cdf += pmf
        done = (cdf >= u) | ((k > 10 * (means + 10)) & (pmf < 1e-12))
        out[active[done]] = k
        keep = ~done
        active, means, r, u = active[keep], means[keep], r[keep], u[keep]
        q, pmf, cdf = q[keep], pmf[keep], cdf[keep]
    return out


@dataclass(frozen=True, kw_only=True)
class Chunk:
    """Counts of a run of cells as CSR pieces (cell-local rows, sorted by cell then gene).

    Parameters
    ----------
    first_cell
        The first cell of the run.
    n_cells
        The cells in the run.
    indptr
        CSR row pointers, ``n_cells + 1`` of them, from 0.
    genes
        The gene of each non-zero count.
    values
        The non-zero counts (int32).
    """

    first_cell: int
    n_cells: int
    indptr: IntArray
    genes: IntArray
    values: npt.NDArray[np.int32]


def draw_chunk(model: Model, index: int) -> Chunk:
    """The counts of chunk ``index`` (cells ``index * CHUNK_CELLS`` onward), from its own stream.

    Parameters
    ----------
    model
        The model the counts are drawn from.
    index
        The chunk's number, from 0.

    Returns
    -------
    Chunk
        Its counts.
    """
    p = model.params
    first = index * CHUNK_CELLS
    cells = slice(first, min(first + CHUNK_CELLS, p.n_cells))
    rng = np.random.default_rng([p.seed, 1, index])
    means = model.means(cells)
    r = model.dispersion
    zero = np.exp(-r * np.log1p(means / r))
    u = rng.random(means.shape, dtype=np.float32)
    local, genes = np.nonzero(u > zero)
    values = _nb_nonzero(
        means[local, genes].astype(np.float64),
        r[genes].astype(np.float64),
        u[local, genes].astype(np.float64),
    )
    n = cells.stop - cells.start
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(local, minlength=n), out=indptr[1:])
    return Chunk(
        first_cell=first,
        n_cells=n,
        indptr=indptr,
        genes=genes.astype(np.int64),
        values=values.astype(np.int32),
    )


def iter_chunks(model: Model) -> Iterator[Chunk]:
    """Every chunk of cells, in order.

    Parameters
    ----------
    model
        The model the counts are drawn from.

    Yields
    ------
    Chunk
        The counts of :data:`CHUNK_CELLS` cells (fewer in the last chunk).
    """
    for index in range(-(-model.params.n_cells // CHUNK_CELLS)):
        yield draw_chunk(model, index)


def _truth(model: Model, *, n_values: int, total_counts: int) -> dict[str, Any]:
    p = model.params
    ids, names = model.gene_ids, model.gene_names
    markers = {name: model.markers[t].tolist() for t, name in enumerate(model.type_names)}
    response = model.response.tolist()
    return {
        "params": p.to_json(),
        "n_values": n_values,
        "nonzero_fraction": n_values / (p.n_cells * p.n_genes),
        "total_counts": total_counts,
        "library_scale": model.library_scale,
        "cells_per_type": dict(
            zip(
                model.type_names,
                np.bincount(model.cell_type, minlength=p.n_types).tolist(),
                strict=True,
            )
        ),
        "markers": markers,
        "marker_ids": {t: [ids[g] for g in genes] for t, genes in markers.items()},
        "marker_names": {t: [names[g] for g in genes] for t, genes in markers.items()},
        "response_genes": response,
        "response_ids": [ids[g] for g in response],
        "response_names": [names[g] for g in response],
        "mito_genes": model.mito.tolist(),
        "ribosomal_genes": model.ribosomal.tolist(),
    }


# -- in memory ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, eq=False)
class SyntheticDataset:
    """A generated dataset in memory, with the truth it was drawn from.

    Parameters
    ----------
    counts
        Cells x genes.
    cells
        The cell table.
    features
        The feature table.
    truth
        What the dataset was drawn from.
    """

    counts: sp.csr_matrix
    """Cells x genes, int32, canonical CSR."""
    cells: pd.DataFrame
    """``ids`` (barcodes) and categorical ``cell_type``, ``donor``, ``condition`` and ``sample``."""
    features: pd.DataFrame
    """``ids``, ``names`` (gene symbols) and ``feature_types`` (``Gene Expression``)."""
    truth: dict[str, Any]
    """What ``truth.json`` holds: ``params``, ``markers`` of each type (gene positions) with
    their ``marker_ids`` and ``marker_names``, ``response_genes`` (``response_ids``,
    ``response_names``), ``mito_genes``, ``ribosomal_genes``, ``cells_per_type``,
    ``library_scale``, ``n_values``, ``nonzero_fraction`` and ``total_counts``."""


def _categories(codes: npt.NDArray[np.integer[Any]], names: Sequence[str]) -> pd.Categorical[Any]:
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(list(names)))


def cells_table(model: Model) -> pd.DataFrame:
    """The cell table of a model's cells: ids, planted type, donor, condition and sample.

    Parameters
    ----------
    model
        The model (:func:`build_model`).

    Returns
    -------
    pandas.DataFrame
        One row per cell; ``cell_type``, ``donor``, ``condition`` and ``sample`` categorical.
    """
    samples = [f"{d}_{c}" for d in model.donor_names for c in CONDITIONS]
    sample = model.donor.astype(np.int64) * len(CONDITIONS) + model.condition
    return pd.DataFrame(
        {
            "ids": model.barcodes(),
            "cell_type": _categories(model.cell_type, model.type_names),
            "donor": _categories(model.donor, model.donor_names),
            "condition": _categories(model.condition, CONDITIONS),
            "sample": _categories(sample, samples),
        }
    )


def _features_table(model: Model) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ids": model.gene_ids,
            "names": model.gene_names,
            "feature_types": [FEATURE_TYPE] * model.params.n_genes,
        }
    )


def generate(
    *,
    n_cells: int = 3000,
    n_genes: int = 2000,
    seed: int = 0,
    n_types: int = 8,
    n_markers: int = 20,
    n_donors: int = 6,
    nonzero: float = 0.07,
) -> SyntheticDataset:
    """Generate the synthetic dataset in memory.

    The counts equal those :func:`write_dataset` writes for the same
    parameters. Memory is that of the dense float32 means of
    :data:`CHUNK_CELLS` cells plus the result, so this suits small sizes;
    write large ones with :func:`write_dataset`.

    Parameters
    ----------
    n_cells, n_genes
        The size of the matrix.
    seed
        Everything is drawn from it.
    n_types
        Cell types, each with its own marker genes.
    n_markers
        Marker genes per cell type.
    n_donors
        Donors, each with a ``ctrl`` and a ``stim`` sample.
    nonzero
        Expected fraction of non-zero counts.

    Returns
    -------
    SyntheticDataset
        The counts, the cell and feature tables, and the truth record.

    Raises
    ------
    OperationArgumentError
        The genes cannot hold the markers and response genes, or a parameter
        is out of range.

    Examples
    --------
    >>> from cytearc.datasets import generate
    >>> data = generate(n_cells=500, n_genes=600, seed=1)
    >>> data.counts.shape, data.counts.dtype
    ((500, 600), dtype('int32'))
    >>> data.cells.columns.tolist()
    ['ids', 'cell_type', 'donor', 'condition', 'sample']
    >>> data.truth["marker_names"]["B_cell"][:2]
    ['B_CELL_MARKER01', 'B_CELL_MARKER02']
    >>> int(data.features["names"].str.startswith("MT-").sum())
    13
    """
    params = Params(
        n_cells=n_cells,
        n_genes=n_genes,
        seed=seed,
        n_types=n_types,
        n_markers=n_markers,
        n_donors=n_donors,
        nonzero=nonzero,
    )
    model = build_model(params)
    chunks = list(iter_chunks(model))
    indptr = np.zeros(n_cells + 1, dtype=np.int64)
    n_values = 0
    for chunk in chunks:
        start = chunk.first_cell
        indptr[start + 1 : start + chunk.n_cells + 1] = chunk.indptr[1:] + n_values
        n_values += chunk.values.size
    values = np.concatenate([c.values for c in chunks])
    genes = np.concatenate([c.genes for c in chunks]).astype(np.int32)
    counts = sp.csr_matrix((values, genes, indptr), shape=(n_cells, n_genes))
    return SyntheticDataset(
        counts=counts,
        cells=cells_table(model),
        features=_features_table(model),
        truth=_truth(model, n_values=n_values, total_counts=int(values.sum(dtype=np.int64))),
    )


def write_store(
    path: str | Path,
    *,
    n_cells: int = 3000,
    n_genes: int = 2000,
    seed: int = 0,
    n_types: int = 8,
    n_markers: int = 20,
    n_donors: int = 6,
    nonzero: float = 0.07,
    overwrite: bool = False,
    show_progress: bool = False,
    **options: Any,
) -> Path | str:
    """Generate the synthetic dataset and import it into a new CyteArc store.

    Parameters
    ----------
    path
        The store to create.
    n_cells, n_genes, seed, n_types, n_markers, n_donors, nonzero
        What to generate (see :func:`generate`).
    overwrite
        Replace an existing CyteArc store at ``path``.
    show_progress
        Progress bars for the import.
    **options
        More options of the import (``mem_budget``, ``workers``, ``cluster``,
        ``layout``, ``compression`` ...; see
        :func:`~cytearc.io.importer.write_store`).

    Returns
    -------
    pathlib.Path or str
        The store's path (its URL when written to one).

    Raises
    ------
    OperationArgumentError
        The genes cannot hold the markers and response genes, or a parameter
        is out of range (nothing is written).
    DestinationExistsError
        ``path`` holds anything but a CyteArc store that ``overwrite`` may
        replace.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_store(f"{d}/synthetic.zarr", n_cells=300, n_genes=600, cluster="threads")
    ...     DataStore(path).RNA.shape
    (300, 600)
    """
    data = generate(
        n_cells=n_cells,
        n_genes=n_genes,
        seed=seed,
        n_types=n_types,
        n_markers=n_markers,
        n_donors=n_donors,
        nonzero=nonzero,
    )
    result = SparseToZarr(
        data.counts,
        cells=data.cells,
        features=data.features,
        zarr_loc=path,
        overwrite=overwrite,
        show_progress=show_progress,
        **options,
    ).dump()
    return result.path


# -- files ----------------------------------------------------------------------

_POWERS: Final = 10 ** np.arange(1, 19, dtype=np.int64)


def _format_triplets(columns: Sequence[IntArray]) -> npt.NDArray[np.uint8]:
    """Lines of space-separated non-negative integers, one line per position, as ASCII bytes.

    Vectorized: each digit is scattered into its place, so a line costs a
    few numpy operations per digit instead of a Python format call.
    """
    digits = [np.searchsorted(_POWERS, c, side="right") + 1 for c in columns]
    line = sum(digits) + len(columns)
    ends = np.cumsum(line)
    out = np.empty(int(ends[-1]) if ends.size else 0, dtype=np.uint8)
    if not out.size:
        return out
    start = ends - line
    for values, width in zip(columns, digits, strict=True):
        out[start + width] = ord(" ")
        position = start + width - 1
        remaining, left = values.copy(), width.copy()
        while position.size:
            out[position] = 48 + remaining % 10
            remaining //= 10
            left -= 1
            keep = left > 0
            position, remaining, left = position[keep] - 1, remaining[keep], left[keep]
        start = start + width + 1
    out[ends - 1] = ord("\n")
    return out


def _write_gzip_lines(path: Path, lines: Iterable[str]) -> None:
    """Text lines gzipped with no time stamp in the header, so the same lines give the same bytes."""
    with (
        gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) as packed,
        io.TextIOWrapper(packed, encoding="utf-8") as handle,
    ):
        for text in lines:
            handle.write(text + "\n")


def _string_array(group: h5py.Group, name: str, values: Sequence[str]) -> None:
    dataset = group.create_dataset(
        name, data=np.asarray(values, dtype=object), dtype=h5py.string_dtype("utf-8")
    )
    dataset.attrs.update({"encoding-type": "string-array", "encoding-version": "0.2.0"})


def _categorical(
    group: h5py.Group, name: str, codes: npt.NDArray[Any], categories: Sequence[str]
) -> None:
    node = group.create_group(name)
    node.attrs.update(
        {"encoding-type": "categorical", "encoding-version": "0.2.0", "ordered": False}
    )
    _string_array(node, "categories", categories)
    dataset = node.create_dataset("codes", data=codes.astype(np.int8))
    dataset.attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})


def _dataframe(
    parent: h5py.File, name: str, index: Sequence[str], columns: Sequence[str]
) -> h5py.Group:
    group = parent.create_group(name)
    group.attrs.update(
        {
            "encoding-type": "dataframe",
            "encoding-version": "0.2.0",
            "_index": "_index",
            "column-order": np.asarray(list(columns), dtype=h5py.string_dtype("utf-8")),
        }
    )
    _string_array(group, "_index", index)
    return group


class _H5adWriter:
    """An H5AD file whose CSR ``X`` grows chunk by chunk (h5py, AnnData's on-disk encodings)."""

    def __init__(self, path: Path, model: Model, barcodes: Sequence[str]) -> None:
        p = model.params
        self.file = h5py.File(path, "w")
        f = self.file
        f.attrs.update({"encoding-type": "anndata", "encoding-version": "0.1.0"})
        x = f.create_group("X")
        x.attrs.update(
            {
                "encoding-type": "csr_matrix",
                "encoding-version": "0.1.0",
                "shape": np.array([p.n_cells, p.n_genes], dtype=np.int64),
            }
        )
        self.data = x.create_dataset(
            "data", shape=(0,), maxshape=(None,), dtype=np.int32, chunks=(1 << 18,)
        )
        self.indices = x.create_dataset(
            "indices", shape=(0,), maxshape=(None,), dtype=np.int32, chunks=(1 << 18,)
        )
        self.indptr = x.create_dataset("indptr", shape=(p.n_cells + 1,), dtype=np.int64)
        self.indptr[0] = 0
        self.n_values = 0
        obs = _dataframe(f, "obs", barcodes, ("cell_type", "donor", "condition", "sample"))
        _categorical(obs, "cell_type", model.cell_type, model.type_names)
        _categorical(obs, "donor", model.donor, model.donor_names)
        _categorical(obs, "condition", model.condition, list(CONDITIONS))
        sample = model.donor.astype(np.int64) * len(CONDITIONS) + model.condition
        _categorical(
            obs, "sample", sample, [f"{d}_{c}" for d in model.donor_names for c in CONDITIONS]
        )
        var = _dataframe(f, "var", model.gene_ids, ("gene_symbols", "feature_types"))
        _string_array(var, "gene_symbols", model.gene_names)
        _categorical(var, "feature_types", np.zeros(p.n_genes, dtype=np.int8), [FEATURE_TYPE])
        for name in ("layers", "obsm", "obsp", "uns", "varm", "varp"):
            f.create_group(name).attrs.update(
                {"encoding-type": "dict", "encoding-version": "0.1.0"}
            )

    def append(self, chunk: Chunk) -> None:
        """Add the chunk's rows after the rows written so far."""
        n = chunk.values.size
        end = self.n_values + n
        self.data.resize((end,))
        self.indices.resize((end,))
        self.data[self.n_values : end] = chunk.values
        self.indices[self.n_values : end] = chunk.genes.astype(np.int32)
        first = chunk.first_cell
        self.indptr[first + 1 : first + chunk.n_cells + 1] = chunk.indptr[1:] + self.n_values
        self.n_values = end

    def close(self) -> None:
        """Close the file."""
        self.file.close()


def write_dataset(params: Params, out: Path, *, show_progress: bool = False) -> dict[str, Any]:
    """Generate the dataset into the folder ``out`` (MTX, H5AD, ``truth.json``; see the module docstring).

    Parameters
    ----------
    params
        What to generate.
    out
        The folder (created); a ``COMPLETE`` file in it is written last.
    show_progress
        A progress bar over the cells.

    Returns
    -------
    dict
        The truth record, as written to ``truth.json``.

    Raises
    ------
    OperationArgumentError
        ``params`` fails :meth:`Params.validate` (nothing is written).
    """
    model = build_model(params)
    out.mkdir(parents=True, exist_ok=True)
    (out / _COMPLETE).unlink(missing_ok=True)
    mtx = out / "mtx"
    mtx.mkdir(exist_ok=True)
    barcodes = model.barcodes()
    _write_gzip_lines(mtx / "barcodes.tsv.gz", barcodes)
    _write_gzip_lines(
        mtx / "features.tsv.gz",
        (
            f"{i}\t{n}\t{FEATURE_TYPE}"
            for i, n in zip(model.gene_ids, model.gene_names, strict=True)
        ),
    )
    h5ad = _H5adWriter(out / "data.h5ad", model, barcodes)
    n_values = 0
    total = 0
    bar = tqdm(
        total=params.n_cells, desc="synthetic cells", unit="cells", disable=not show_progress
    )
    body_path: Path | None = None
    try:
        # the size line needs the number of entries: write them first, then the header and them
        with tempfile.NamedTemporaryFile(dir=mtx, prefix=".entries-", delete=False) as body:
            body_path = Path(body.name)
            for chunk in iter_chunks(model):
                cells = np.repeat(
                    np.arange(chunk.first_cell + 1, chunk.first_cell + chunk.n_cells + 1),
                    np.diff(chunk.indptr),
                )
                body.write(
                    _format_triplets([chunk.genes + 1, cells, chunk.values.astype(np.int64)]).data
                )
                h5ad.append(chunk)
                n_values += chunk.values.size
                total += int(chunk.values.sum(dtype=np.int64))
                bar.update(chunk.n_cells)
        with (mtx / "matrix.mtx").open("wb") as handle:
            handle.write(f"{_MTX_BANNER}\n{params.n_genes} {params.n_cells} {n_values}\n".encode())
            with body_path.open("rb") as entries:
                shutil.copyfileobj(entries, handle, 1 << 24)
    finally:
        bar.close()
        h5ad.close()
        if body_path is not None:
            body_path.unlink(missing_ok=True)
    truth = _truth(model, n_values=n_values, total_counts=total)
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    (out / _COMPLETE).write_text("ok\n", encoding="utf-8")
    return truth


def is_complete(out: Path, params: Params) -> bool:
    """Whether ``out`` holds a finished dataset of exactly these parameters and this generator version.

    Parameters
    ----------
    out
        The folder :func:`write_dataset` wrote.
    params
        The parameters asked for.

    Returns
    -------
    bool
        True when ``COMPLETE`` exists and ``truth.json`` records ``params``.
    """
    if not (out / _COMPLETE).is_file():
        return False
    try:
        truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(isinstance(truth, dict) and truth.get("params") == params.to_json())
