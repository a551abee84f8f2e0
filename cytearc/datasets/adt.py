"""A seeded synthetic CITE-seq dataset: RNA and antibody-derived tags (ADT) of the same cells.

:func:`generate_adt` returns it in memory, :func:`write_citeseq_store`
streams it into a CyteArc store with two assays over the same cells, ``RNA``
(type RNA) and ``ADT`` (type ADT), and :func:`citeseq_truth` gives its truth
record without drawing a count. All three draw the same counts for the same
parameters.

The model, all of it drawn from ``seed``:

- RNA is the model of :mod:`cytearc.datasets.synthetic` (its genes, cell
  types, donors, conditions, samples and libraries: ``build_model`` of the
  same ``n_cells``, ``n_genes``, ``n_types`` and ``seed``), drawn by its
  ``draw_chunk``. The types are drawn once there and the ADT uses them;
- the types come in consecutive pairs (0, 1), (2, 3), ...: the first,
  third, ... pairs are *RNA twins* (the second type takes the first's RNA
  profiles and markers, so only the ADT separates them) and the others *ADT
  twins* (one ADT profile, so only the RNA separates them). An odd last type
  is separable by both. A joint graph separates every type; either
  modality alone merges its twins. The RNA model's library scale, solved
  before the twins are made, is kept: the RNA non-zero fraction is near
  7 %, not exactly 7 %;
- every ADT profile (a type, or a pair of ADT twins) has
  :data:`PROTEIN_MARKERS` proteins of its own (disjoint) at a lognormal
  abundance around 300 (sigma 0.5); every other abundance is low (lognormal
  around 5, sigma 0.6);
- cells have a lognormal capture efficiency (sigma 0.4) and proteins an
  ambient background of 5-20 counts (uniform);
- an ADT count is ``NegativeBinomial(mean = ambient + capture *
  abundance, r)``, with ``r`` lognormal around 5 (sigma 0.2): tens of
  counts off a type's markers, hundreds to thousands on them.

The counts come in chunks of :data:`~cytearc.datasets.synthetic.CHUNK_CELLS`
cells, the RNA from the synthetic model's streams and the ADT from streams
of their own (``[seed, 31, chunk]``), so memory stays bounded whatever
``n_cells`` is and the counts do not depend on how they are buffered.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from cytearc.datasets.atac import DrawnSource
from cytearc.datasets.synthetic import (
    CHUNK_CELLS,
    CONDITIONS,
    Model,
    Params,
    build_model,
    cells_table,
    draw_chunk,
)
from cytearc.datasets.synthetic import FEATURE_TYPE as RNA_FEATURE_TYPE
from cytearc.errors import OperationArgumentError
from cytearc.io.converters import ToZarr

if TYPE_CHECKING:
    from pathlib import Path

    from distributed import Client

__all__ = [
    "CITESEQ_GENERATOR_VERSION",
    "PROTEIN_MARKERS",
    "CiteseqDataset",
    "CiteseqModel",
    "CiteseqParams",
    "build_citeseq_model",
    "citeseq_truth",
    "draw_citeseq_chunk",
    "generate_adt",
    "write_citeseq_store",
]

CITESEQ_GENERATOR_VERSION: Final = 1
"""Incremented whenever the output for the same parameters changes."""
PROTEIN_MARKERS: Final = 3
"""Proteins of each ADT profile's own."""
ADT_FEATURE_TYPE: Final = "Antibody Capture"

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class CiteseqParams:
    """What to generate (see the module docstring for the model).

    Parameters
    ----------
    n_cells, n_genes, n_proteins
        The sizes of the matrices.
    n_types
        Cell types (1 to 127).
    seed
        Everything is drawn from it.
    """

    n_cells: int
    n_genes: int
    n_proteins: int = 30
    n_types: int = 8
    seed: int = 0

    @property
    def rna(self) -> Params:
        """The parameters of the RNA model."""
        return Params(
            n_cells=self.n_cells, n_genes=self.n_genes, seed=self.seed, n_types=self.n_types
        )

    def twins(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The RNA twins and the ADT twins: consecutive pairs of types, alternately.

        Returns
        -------
        tuple of lists
            The pairs of types that share their RNA profiles, then those that
            share their ADT profile.
        """
        pairs = [(t, t + 1) for t in range(0, self.n_types - 1, 2)]
        return pairs[0::2], pairs[1::2]

    @property
    def n_adt_profiles(self) -> int:
        """Distinct ADT profiles: the types, ADT twins counted once."""
        return self.n_types - len(self.twins()[1])

    def validate(self) -> None:
        """Raise :class:`~cytearc.errors.OperationArgumentError` when the sizes cannot hold the model.

        Raises
        ------
        OperationArgumentError
            The RNA parameters fail
            :meth:`~cytearc.datasets.synthetic.Params.validate`, or the
            proteins cannot hold every profile's markers.
        """
        self.rna.validate()
        least = self.n_adt_profiles * PROTEIN_MARKERS
        if self.n_proteins < least:
            msg = f"n_proteins: {self.n_types} types have {self.n_adt_profiles} ADT profiles of {PROTEIN_MARKERS} marker proteins each, so need at least {least} proteins, got {self.n_proteins}: raise n_proteins or lower n_types"
            raise OperationArgumentError(msg)

    def to_json(self) -> dict[str, Any]:
        """The parameters as recorded in the truth record.

        Returns
        -------
        dict
            The parameters, those of the RNA model, and
            :data:`CITESEQ_GENERATOR_VERSION`.
        """
        return {
            "n_cells": self.n_cells,
            "n_genes": self.n_genes,
            "n_proteins": self.n_proteins,
            "n_types": self.n_types,
            "seed": self.seed,
            "rna": self.rna.to_json(),
            "generator_version": CITESEQ_GENERATOR_VERSION,
        }


@dataclass(frozen=True, kw_only=True)
class CiteseqModel:
    """The RNA model with its twins, and everything per protein and per cell of the ADT.

    Made by :func:`build_citeseq_model`.

    Parameters
    ----------
    params
        What was generated.
    rna
        The synthetic RNA model, RNA twins sharing profiles and markers.
    protein_ids
        One per protein.
    adt_profile
        The ADT profile of each type.
    protein_markers
        ADT profile x marker protein positions.
    abundance
        ADT profile x protein expected counts at a capture of 1.
    ambient
        Expected background count of each protein.
    dispersion
        ``r`` of each protein.
    capture
        Capture efficiency of each cell.
    """

    params: CiteseqParams
    rna: Model
    protein_ids: list[str]
    adt_profile: IntArray
    protein_markers: IntArray
    abundance: FloatArray
    ambient: FloatArray
    dispersion: FloatArray
    capture: FloatArray

    def truth(self) -> dict[str, Any]:
        """The truth record (JSON-serializable).

        Returns
        -------
        dict
            ``params``, ``types``, ``cell_types`` (each cell's type),
            ``cells_per_type``, ``rna_markers`` and ``rna_marker_names``
            (gene positions and names per type, shared by RNA twins),
            ``protein_markers`` and ``protein_marker_names`` (per type,
            shared by ADT twins), ``rna_twins`` and ``adt_twins`` (pairs of
            type names), ``adt_only_separable`` (the RNA twins: only the ADT
            tells them apart), ``rna_only_separable`` (the ADT twins) and
            ``ambient`` (per protein).
        """
        names = self.rna.type_names
        rna_twins, adt_twins = self.params.twins()
        genes = self.rna.gene_names
        markers = {name: self.rna.markers[t].tolist() for t, name in enumerate(names)}
        proteins = {
            name: self.protein_markers[self.adt_profile[t]].tolist() for t, name in enumerate(names)
        }
        return {
            "params": self.params.to_json(),
            "types": list(names),
            "cell_types": np.asarray(names)[self.rna.cell_type].tolist(),
            "cells_per_type": dict(
                zip(
                    names,
                    np.bincount(self.rna.cell_type, minlength=len(names)).tolist(),
                    strict=True,
                )
            ),
            "rna_markers": markers,
            "rna_marker_names": {t: [genes[g] for g in m] for t, m in markers.items()},
            "protein_markers": proteins,
            "protein_marker_names": {
                t: [self.protein_ids[p] for p in m] for t, m in proteins.items()
            },
            "rna_twins": [[names[a], names[b]] for a, b in rna_twins],
            "adt_twins": [[names[a], names[b]] for a, b in adt_twins],
            "adt_only_separable": [names[t] for pair in rna_twins for t in pair],
            "rna_only_separable": [names[t] for pair in adt_twins for t in pair],
            "ambient": self.ambient.tolist(),
        }


def _with_rna_twins(model: Model, twins: list[tuple[int, int]]) -> Model:
    """``model`` with the second type of each pair given the first's profiles, markers and depth.

    The second type's own marker genes become ordinary genes, named as such,
    and its cells' library sizes are scaled to the first type's geometric
    mean (the synthetic model gives each type a library factor, which would
    let the RNA tell twins apart by depth alone).
    """
    library = model.library.copy()
    log_library = np.log(library.astype(np.float64))
    profiles = model.profiles.copy()
    markers = model.markers.copy()
    gene_names = list(model.gene_names)
    per_type = model.params.n_donors * len(CONDITIONS)
    for first, second in twins:
        profiles[second * per_type : (second + 1) * per_type] = profiles[
            first * per_type : (first + 1) * per_type
        ]
        for g in markers[second].tolist():
            gene_names[g] = f"SYN{g + 1:05d}"
        markers[second] = markers[first]
        ours, theirs = model.cell_type == first, model.cell_type == second
        if ours.any() and theirs.any():
            shift = log_library[ours].mean() - log_library[theirs].mean()
            library[theirs] = (library[theirs] * np.exp(shift)).astype(library.dtype)
    return dataclasses.replace(
        model, profiles=profiles, markers=markers, gene_names=gene_names, library=library
    )


def build_citeseq_model(params: CiteseqParams) -> CiteseqModel:
    """Draw the RNA model, make its twins, and draw the proteins and the cells' capture.

    Parameters
    ----------
    params
        What to generate; validated first.

    Returns
    -------
    CiteseqModel
        What the counts are drawn from.

    Raises
    ------
    OperationArgumentError
        ``params`` fails :meth:`CiteseqParams.validate`.
    """
    params.validate()
    rna_twins, adt_twins = params.twins()
    rna = _with_rna_twins(build_model(params.rna), rna_twins)
    rng = np.random.default_rng([params.seed, 30])
    n_proteins, n_profiles = params.n_proteins, params.n_adt_profiles
    adt_profile = np.arange(params.n_types)
    for first, second in adt_twins:
        adt_profile[second] = adt_profile[first]
    _, adt_profile = np.unique(adt_profile, return_inverse=True)
    picked = rng.choice(n_proteins, size=n_profiles * PROTEIN_MARKERS, replace=False)
    protein_markers = np.sort(picked.reshape(n_profiles, PROTEIN_MARKERS), axis=1)
    abundance = rng.lognormal(np.log(5.0), 0.6, size=(n_profiles, n_proteins))
    for k in range(n_profiles):
        abundance[k, protein_markers[k]] = rng.lognormal(np.log(300.0), 0.5, size=PROTEIN_MARKERS)
    return CiteseqModel(
        params=params,
        rna=rna,
        protein_ids=[f"ADT{p + 1:03d}" for p in range(n_proteins)],
        adt_profile=adt_profile.astype(np.int64),
        protein_markers=protein_markers.astype(np.int64),
        abundance=abundance,
        ambient=rng.uniform(5.0, 20.0, size=n_proteins),
        dispersion=rng.lognormal(np.log(5.0), 0.2, size=n_proteins),
        capture=rng.lognormal(0.0, 0.4, size=params.n_cells),
    )


def draw_citeseq_chunk(model: CiteseqModel, index: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The RNA and ADT counts of chunk ``index`` (cells ``index * CHUNK_CELLS`` onward).

    Parameters
    ----------
    model
        What the counts are drawn from.
    index
        The chunk's number, from 0.

    Returns
    -------
    tuple of scipy.sparse.csr_matrix
        The chunk's RNA (cells x genes) and ADT (cells x proteins) counts,
        canonical, int64 values.
    """
    chunk = draw_chunk(model.rna, index)
    rna = sp.csr_matrix(
        (chunk.values.astype(np.int64), chunk.genes.astype(np.int32), chunk.indptr),
        shape=(chunk.n_cells, model.params.n_genes),
    )
    cells = slice(chunk.first_cell, chunk.first_cell + chunk.n_cells)
    types = model.rna.cell_type[cells].astype(np.int64)
    means = model.ambient + model.capture[cells, None] * model.abundance[model.adt_profile[types]]
    r = model.dispersion
    rng = np.random.default_rng([model.params.seed, 31, index])
    adt = rng.negative_binomial(r, r / (r + means)).astype(np.int64)
    return rna, sp.csr_matrix(adt)


def _features(model: CiteseqModel) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The RNA and ADT feature tables."""
    rna = pd.DataFrame(
        {
            "ids": model.rna.gene_ids,
            "names": model.rna.gene_names,
            "feature_types": [RNA_FEATURE_TYPE] * len(model.rna.gene_ids),
        }
    )
    adt = pd.DataFrame(
        {
            "ids": model.protein_ids,
            "names": model.protein_ids,
            "feature_types": [ADT_FEATURE_TYPE] * len(model.protein_ids),
        }
    )
    return rna, adt


def citeseq_truth(
    *,
    n_cells: int = 3000,
    n_genes: int = 2000,
    n_proteins: int = 30,
    n_types: int = 8,
    seed: int = 0,
) -> dict[str, Any]:
    """The truth record of the dataset of these parameters, without drawing a count.

    Parameters
    ----------
    n_cells, n_genes, n_proteins, n_types, seed
        What :func:`generate_adt` or :func:`write_citeseq_store` generated.

    Returns
    -------
    dict
        JSON-serializable: see :meth:`CiteseqModel.truth`; it equals
        ``generate_adt(...).truth``.

    Raises
    ------
    OperationArgumentError
        A parameter is out of range.

    Examples
    --------
    >>> truth = citeseq_truth(n_cells=100, n_genes=600, n_types=4)
    >>> truth["rna_twins"], truth["adt_twins"]
    ([['T_cell', 'B_cell']], [['NK_cell', 'CD14_monocyte']])
    >>> truth["adt_only_separable"]
    ['T_cell', 'B_cell']
    """
    params = CiteseqParams(
        n_cells=n_cells, n_genes=n_genes, n_proteins=n_proteins, n_types=n_types, seed=seed
    )
    return build_citeseq_model(params).truth()


@dataclass(frozen=True, kw_only=True, eq=False)
class CiteseqDataset:
    """A generated CITE-seq dataset in memory, with the truth it was drawn from.

    Parameters
    ----------
    rna
        Cells x genes, int32, canonical CSR.
    adt
        Cells x proteins, int32, canonical CSR.
    cells
        ``ids`` (barcodes) and categorical ``cell_type``, ``donor``,
        ``condition`` and ``sample``.
    rna_features, adt_features
        ``ids``, ``names`` and ``feature_types`` (``Gene Expression``,
        ``Antibody Capture``).
    truth
        See :meth:`CiteseqModel.truth`.
    """

    rna: sp.csr_matrix
    adt: sp.csr_matrix
    cells: pd.DataFrame
    rna_features: pd.DataFrame
    adt_features: pd.DataFrame
    truth: dict[str, Any]


def generate_adt(
    *,
    n_cells: int = 3000,
    n_genes: int = 2000,
    n_proteins: int = 30,
    n_types: int = 8,
    seed: int = 0,
) -> CiteseqDataset:
    """Generate the CITE-seq dataset (RNA and ADT of the same cells) in memory.

    Parameters
    ----------
    n_cells, n_genes, n_proteins
        The sizes of the matrices.
    n_types
        Cell types (see the module docstring for their twins).
    seed
        Everything is drawn from it.

    Returns
    -------
    CiteseqDataset
        The counts of both modalities, the tables and the truth record.

    Raises
    ------
    OperationArgumentError
        A parameter is out of range.

    Examples
    --------
    >>> data = generate_adt(n_cells=300, n_genes=600, n_proteins=20, n_types=4, seed=1)
    >>> data.rna.shape, data.adt.shape
    ((300, 600), (300, 20))
    >>> data.truth["protein_marker_names"]["T_cell"]
    ['ADT002', 'ADT007', 'ADT018']
    """
    params = CiteseqParams(
        n_cells=n_cells, n_genes=n_genes, n_proteins=n_proteins, n_types=n_types, seed=seed
    )
    model = build_citeseq_model(params)
    chunks = [draw_citeseq_chunk(model, index) for index in range(-(-n_cells // CHUNK_CELLS))]
    rna_features, adt_features = _features(model)
    return CiteseqDataset(
        rna=sp.csr_matrix(sp.vstack([rna for rna, _ in chunks], format="csr"), dtype=np.int32),
        adt=sp.csr_matrix(sp.vstack([adt for _, adt in chunks], format="csr"), dtype=np.int32),
        cells=cells_table(model.rna),
        rna_features=rna_features,
        adt_features=adt_features,
        truth=model.truth(),
    )


def write_citeseq_store(
    path: str | Path,
    *,
    n_cells: int = 3000,
    n_genes: int = 2000,
    n_proteins: int = 30,
    n_types: int = 8,
    seed: int = 0,
    overwrite: bool = False,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: str | Client | None = None,
    show_progress: bool = False,
) -> Path | str:
    """Generate the CITE-seq dataset into a new store with assays ``RNA`` and ``ADT``, streaming.

    The chunks of cells are drawn as the import asks for them (twice: it
    scans the values, then writes), so memory is that of a few chunks and an
    import band whatever ``n_cells`` is.

    Parameters
    ----------
    path
        The store to create.
    n_cells, n_genes, n_proteins, n_types, seed
        What to generate (see :func:`generate_adt`).
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
    ...     path = write_citeseq_store(f"{d}/cite.zarr", n_cells=300, n_genes=600, cluster="threads")
    ...     ds = DataStore(path)
    ...     ds.RNA.shape, ds.ADT.shape, ds.ADT.assayType
    ((300, 600), (300, 30), 'ADT')
    """
    params = CiteseqParams(
        n_cells=n_cells, n_genes=n_genes, n_proteins=n_proteins, n_types=n_types, seed=seed
    )
    model = build_citeseq_model(params)
    rna_features, adt_features = _features(model)

    def draw_block(index: int) -> sp.csr_matrix:
        return sp.csr_matrix(sp.hstack(draw_citeseq_chunk(model, index), format="csr"))

    source = DrawnSource(
        cells=cells_table(model.rna),
        features=pd.concat([rna_features, adt_features], ignore_index=True),
        block_cells=CHUNK_CELLS,
        draw_block=draw_block,
        location=f"<synthetic CITE-seq, seed {seed}>",
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
