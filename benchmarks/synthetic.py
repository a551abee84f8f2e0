"""A seeded synthetic single-cell dataset, written as a 10x Matrix Market folder and an H5AD file.

Run from the project root::

    .venv/bin/python benchmarks/synthetic.py --cells 20000 --genes 15000 --out DIR --seed 0
    .venv/bin/python benchmarks/synthetic.py --self-check

The model, all of it drawn from ``--seed``:

- genes have lognormal base proportions (sigma 1.8) and negative-binomial
  dispersions ``r`` (lognormal around 2.5: variance ``mu + mu**2 / r``);
- ``--types`` cell types (8 by default) each up-weight their own
  ``--markers`` genes (20 by default, drawn among the more expressed half)
  by 4-30x; ``--donors`` donors (6) shift every gene a little (lognormal
  sigma 0.15) and their library sizes (sigma 0.2); the ``stim`` condition
  raises 100 response genes 2-6x over ``ctrl``;
- cells come in contiguous samples (donor x condition, as libraries
  concatenated by a pipeline), with per-sample type proportions around
  uneven base proportions;
- library sizes vary lognormally (sigma 0.45) per cell and by cell type;
  their overall scale is solved for so that ``--nonzero`` (7 %) of the
  counts are expected to be non-zero;
- a count is ``NegativeBinomial(mean = library * profile, r)``, drawn by
  inverse transform: one float32 uniform per matrix entry decides zero
  versus non-zero against ``P(0)``, and only the non-zero entries walk the
  CDF, so a chunk of cells costs about one pass over its dense entries.

Cells are generated in chunks of :data:`CHUNK_CELLS`, each from its own
seeded stream, and written to both files as they come, so memory stays
bounded (a few hundred MB at 20,000 genes) whatever ``--cells`` is, and the
output does not depend on how the writing is buffered.

The folder ``--out`` receives:

``mtx/``
    ``matrix.mtx`` (plain text, ``%%MatrixMarket matrix coordinate integer
    general``, genes x cells, 1-based, sorted by cell then gene, as Cell
    Ranger writes it), ``features.tsv.gz`` (id, name, ``Gene Expression``)
    and ``barcodes.tsv.gz``.
``data.h5ad``
    AnnData's on-disk layout written with h5py: ``X`` a CSR group (int32
    ``data`` and ``indices``, int64 ``indptr``, uncompressed); ``obs``
    indexed by the barcodes with categorical ``cell_type``, ``donor`` and
    ``condition``; ``var`` indexed by the gene ids with ``gene_symbols``
    and ``feature_types``.
``truth.json``
    The parameters, the marker genes of each type, the response genes, the
    solved library scale and the realized number of non-zeros.
``COMPLETE``
    Written last; a folder without it is an interrupted run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import h5py
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

CHUNK_CELLS: Final = 1000
"""Cells per generated chunk, each from its own seeded stream (fixed: the output depends on it)."""
MTX_BANNER: Final = "%%MatrixMarket matrix coordinate integer general"
COMPLETE: Final = "COMPLETE"
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
CONDITIONS: Final = ("ctrl", "stim")
N_RESPONSE_GENES: Final = 100
CALIBRATION_CELLS: Final = 400

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
F32Array = npt.NDArray[np.float32]


# -- the model ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Params:
    """What to generate."""

    n_cells: int
    n_genes: int
    seed: int = 0
    n_types: int = 8
    n_markers: int = 20
    n_donors: int = 6
    nonzero: float = 0.07

    def check(self) -> None:
        """Raise :class:`ValueError` when the sizes cannot hold the planted structure."""
        if self.n_cells < 1 or self.n_genes < 1:
            msg = f"need at least one cell and one gene, got {self.n_cells} x {self.n_genes}"
            raise ValueError(msg)
        if self.n_types * self.n_markers + N_RESPONSE_GENES > self.n_genes // 2:
            msg = (
                f"{self.n_types} types x {self.n_markers} markers + {N_RESPONSE_GENES} response "
                f"genes need at least {2 * (self.n_types * self.n_markers + N_RESPONSE_GENES)} genes"
            )
            raise ValueError(msg)
        if not 0 < self.nonzero < 0.9:
            msg = f"nonzero must be in (0, 0.9), got {self.nonzero}"
            raise ValueError(msg)


@dataclass(frozen=True, kw_only=True)
class Model:
    """Everything per gene and per cell, drawn once; chunks of counts are drawn from it."""

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
    """type x marker gene positions."""
    response: IntArray
    cell_type: npt.NDArray[np.int8]
    donor: npt.NDArray[np.int8]
    condition: npt.NDArray[np.int8]
    library: F32Array
    """Expected library size of each cell (after scaling)."""
    library_scale: float

    def profile_rows(self, cells: slice) -> IntArray:
        """The row of :attr:`profiles` of each cell."""
        p = self.params
        t = self.cell_type[cells].astype(np.int64)
        d = self.donor[cells].astype(np.int64)
        c = self.condition[cells].astype(np.int64)
        return (t * p.n_donors + d) * len(CONDITIONS) + c

    def means(self, cells: slice) -> F32Array:
        """Expected counts of the cells (dense, cells x genes, float32)."""
        means: F32Array = self.profiles[self.profile_rows(cells)]
        means *= self.library[cells, None]
        return means


def _barcodes(
    n_cells: int, donor: npt.NDArray[np.int8], condition: npt.NDArray[np.int8]
) -> list[str]:
    """Unique 16-base barcodes (a bijection of the cell number) with the sample as suffix."""
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    # an odd multiplier modulo 4**16 is a bijection, so the barcodes never collide
    code = (np.arange(n_cells, dtype=np.uint64) * np.uint64(2_654_435_761)) % np.uint64(4**16)
    letters = np.empty((n_cells, 16), dtype=np.uint8)
    for position in range(16):
        letters[:, 15 - position] = bases[(code >> np.uint64(2 * position)) & np.uint64(3)]
    sample = donor.astype(np.int64) * len(CONDITIONS) + condition + 1
    words = letters.view("S16").ravel().astype(str)
    return [f"{w}-{s}" for w, s in zip(words.tolist(), sample.tolist(), strict=True)]


def _expected_nonzero(
    model_profiles: F32Array, rows: IntArray, library: F32Array, r: F32Array
) -> float:
    """Expected fraction of non-zero counts of the cells given by ``rows`` and ``library``."""
    means = model_profiles[rows] * library[:, None]
    zero = np.exp(-r * np.log1p(means / r))
    return float(1.0 - zero.mean(dtype=np.float64))


def build_model(params: Params) -> Model:
    """Draw the genes, the types, donors and conditions, and the cells' metadata."""
    params.check()
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
    probe = np.linspace(0, params.n_cells - 1, min(params.n_cells, CALIBRATION_CELLS)).astype(
        np.int64
    )
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
    marker_of = {int(g): (t, j) for t in range(n_types) for j, g in enumerate(markers[t].tolist())}
    gene_names = []
    for g in range(n_genes):
        if g in marker_of:
            t, j = marker_of[g]
            gene_names.append(f"{type_names[t].upper()}_MARKER{j + 1:02d}")
        else:
            gene_names.append(f"SYN{g + 1:05d}")
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
    """Counts of a run of cells as CSR pieces (cell-local rows, sorted by cell then gene)."""

    first_cell: int
    n_cells: int
    indptr: IntArray
    genes: IntArray
    values: npt.NDArray[np.int32]


def draw_chunk(model: Model, index: int) -> Chunk:
    """The counts of chunk ``index`` (cells ``index * CHUNK_CELLS`` onward), from its own stream."""
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
    """Every chunk of cells, in order."""
    for index in range(-(-model.params.n_cells // CHUNK_CELLS)):
        yield draw_chunk(model, index)


# -- writing --------------------------------------------------------------------

_POWERS: Final = 10 ** np.arange(1, 19, dtype=np.int64)


def format_triplets(columns: Sequence[IntArray]) -> npt.NDArray[np.uint8]:
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


def _write_gzip_lines(path: Path, lines: Iterator[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as handle:
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
    parent: h5py.File, name: str, index: Sequence[str], columns: dict[str, Any]
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


class H5adWriter:
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
        obs = _dataframe(f, "obs", barcodes, {"cell_type": None, "donor": None, "condition": None})
        _categorical(obs, "cell_type", model.cell_type, model.type_names)
        _categorical(obs, "donor", model.donor, model.donor_names)
        _categorical(obs, "condition", model.condition, list(CONDITIONS))
        var = _dataframe(f, "var", model.gene_ids, {"gene_symbols": None, "feature_types": None})
        _string_array(var, "gene_symbols", model.gene_names)
        _categorical(var, "feature_types", np.zeros(p.n_genes, dtype=np.int8), ["Gene Expression"])
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


def write_dataset(params: Params, out: Path, *, verbose: bool = True) -> dict[str, Any]:
    """Generate the dataset into ``out`` (see the module docstring); returns the truth record."""
    start = time.perf_counter()
    model = build_model(params)
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPLETE).unlink(missing_ok=True)
    mtx = out / "mtx"
    mtx.mkdir(exist_ok=True)
    barcodes = _barcodes(params.n_cells, model.donor, model.condition)
    _write_gzip_lines(mtx / "barcodes.tsv.gz", iter(barcodes))
    _write_gzip_lines(
        mtx / "features.tsv.gz",
        (
            f"{i}\t{n}\tGene Expression"
            for i, n in zip(model.gene_ids, model.gene_names, strict=True)
        ),
    )
    h5ad = H5adWriter(out / "data.h5ad", model, barcodes)
    n_values = 0
    total = 0
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
                    format_triplets([chunk.genes + 1, cells, chunk.values.astype(np.int64)]).data
                )
                h5ad.append(chunk)
                n_values += chunk.values.size
                total += int(chunk.values.sum(dtype=np.int64))
                if verbose and (chunk.first_cell // CHUNK_CELLS) % 20 == 19:
                    done = chunk.first_cell + chunk.n_cells
                    print(
                        f"  {done:,} / {params.n_cells:,} cells, {time.perf_counter() - start:.0f} s",
                        file=sys.stderr,
                    )
        with (mtx / "matrix.mtx").open("wb") as handle:
            handle.write(f"{MTX_BANNER}\n{params.n_genes} {params.n_cells} {n_values}\n".encode())
            with body_path.open("rb") as entries:
                shutil.copyfileobj(entries, handle, 1 << 24)
    finally:
        h5ad.close()
        if "body_path" in locals():
            body_path.unlink(missing_ok=True)
    truth = {
        "params": {
            "n_cells": params.n_cells,
            "n_genes": params.n_genes,
            "seed": params.seed,
            "n_types": params.n_types,
            "n_markers": params.n_markers,
            "n_donors": params.n_donors,
            "nonzero_target": params.nonzero,
            "chunk_cells": CHUNK_CELLS,
        },
        "n_values": n_values,
        "nonzero_fraction": n_values / (params.n_cells * params.n_genes),
        "total_counts": total,
        "library_scale": model.library_scale,
        "cells_per_type": dict(
            zip(
                model.type_names,
                np.bincount(model.cell_type, minlength=params.n_types).tolist(),
                strict=True,
            )
        ),
        "markers": {name: model.markers[t].tolist() for t, name in enumerate(model.type_names)},
        "response_genes": model.response.tolist(),
        "seconds": round(time.perf_counter() - start, 2),
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    (out / COMPLETE).write_text("ok\n", encoding="utf-8")
    return truth


def is_complete(out: Path, params: Params) -> bool:
    """Whether ``out`` holds a finished dataset of exactly these parameters."""
    if not (out / COMPLETE).is_file():
        return False
    try:
        truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    p = truth.get("params", {})
    return bool(
        p.get("n_cells") == params.n_cells
        and p.get("n_genes") == params.n_genes
        and p.get("seed") == params.seed
        and p.get("n_types") == params.n_types
        and p.get("n_markers") == params.n_markers
        and p.get("n_donors") == params.n_donors
        and p.get("nonzero_target") == params.nonzero
        and p.get("chunk_cells") == CHUNK_CELLS
    )


# -- self-check -----------------------------------------------------------------


def _check_planted(x: Any, obs: Any, truth: dict[str, Any]) -> None:  # noqa: ANN401
    """Each type's markers are higher in that type than elsewhere; counts are overdispersed."""
    import scipy.sparse as sp  # noqa: PLC0415

    # planted structure: each type's markers are higher in that type than elsewhere
    library = np.asarray(x.sum(axis=1)).ravel()
    normalized = sp.diags(1e4 / np.maximum(library, 1)) @ x
    codes = obs["cell_type"].cat.codes.to_numpy()
    for t, name in enumerate(obs["cell_type"].cat.categories):
        genes = truth["markers"][name]
        inside = np.asarray(normalized[codes == t][:, genes].mean(axis=0)).ravel()
        outside = np.asarray(normalized[codes != t][:, genes].mean(axis=0)).ravel()
        assert np.median(inside / np.maximum(outside, 1e-9)) > 3, f"markers of {name}"
    # overdispersion: variance above the mean for expressed genes of one type
    dense = x[codes == 0].toarray().astype(np.float64)
    mean, variance = dense.mean(axis=0), dense.var(axis=0)
    expressed = mean > 1
    assert np.median(variance[expressed] / mean[expressed]) > 1.2


def self_check(n_cells: int = 3000, n_genes: int = 2000, *, seed: int = 0) -> None:
    """Generate a small dataset and check it with scipy and anndata; raise AssertionError if wrong."""
    import anndata  # type: ignore[import-untyped]  # noqa: PLC0415 (only the check needs it)
    import pandas as pd  # noqa: PLC0415
    import scipy.io  # noqa: PLC0415
    import scipy.sparse as sp  # noqa: PLC0415

    params = Params(n_cells=n_cells, n_genes=n_genes, seed=seed)
    with tempfile.TemporaryDirectory(prefix="cytearc-synthetic-") as d:
        out = Path(d)
        truth = write_dataset(params, out, verbose=False)
        assert is_complete(out, params)
        adata = anndata.read_h5ad(out / "data.h5ad", backed="r")
        try:
            assert adata.shape == (n_cells, n_genes), adata.shape
            x = sp.csr_matrix(adata.X[:])
            obs = adata.obs.copy()
            var = adata.var.copy()
        finally:
            adata.file.close()
        assert x.dtype == np.int32, x.dtype
        assert x.has_canonical_format
        mtx = sp.csr_matrix(scipy.io.mmread(out / "mtx" / "matrix.mtx").T)
        assert mtx.shape == x.shape
        assert (mtx != x).nnz == 0, "MTX and H5AD counts differ"
        assert x.nnz == truth["n_values"]
        assert x.data.min() >= 1
        fraction = x.nnz / (n_cells * n_genes)
        assert abs(fraction - params.nonzero) < 0.01, f"non-zero fraction {fraction:.4f}"
        barcodes = pd.read_csv(out / "mtx" / "barcodes.tsv.gz", header=None, sep="\t")[0]
        features = pd.read_csv(out / "mtx" / "features.tsv.gz", header=None, sep="\t")
        assert barcodes.tolist() == obs.index.tolist()
        assert barcodes.is_unique
        assert features[0].tolist() == var.index.tolist()
        assert features[1].tolist() == var["gene_symbols"].tolist()
        assert set(features[2]) == {"Gene Expression"}
        for column in ("cell_type", "donor", "condition"):
            assert isinstance(obs[column].dtype, pd.CategoricalDtype), column
        assert obs["cell_type"].nunique() == params.n_types
        assert obs["donor"].nunique() == params.n_donors
        assert set(obs["condition"]) == set(CONDITIONS)
        _check_planted(x, obs, truth)
        # determinism: a second generation is byte-identical
        again = out / "again"
        write_dataset(params, again, verbose=False)
        assert (again / "mtx" / "matrix.mtx").read_bytes() == (
            out / "mtx" / "matrix.mtx"
        ).read_bytes()
    print(
        f"self-check passed: {n_cells} x {n_genes}, {fraction:.2%} non-zero, "
        f"{params.n_types} types with planted markers, MTX == H5AD, deterministic"
    )


# -- main -----------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--genes", type=int, default=15_000)
    parser.add_argument("--out", type=Path, help="output folder (created)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--types", type=int, default=8)
    parser.add_argument("--markers", type=int, default=20, help="marker genes per type")
    parser.add_argument("--donors", type=int, default=6)
    parser.add_argument("--nonzero", type=float, default=0.07, help="target non-zero fraction")
    parser.add_argument(
        "--self-check", action="store_true", help="generate a small dataset and check it"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.self_check:
        self_check(seed=args.seed)
        return 0
    if args.out is None:
        print("--out is required (or --self-check)", file=sys.stderr)
        return 2
    params = Params(
        n_cells=args.cells,
        n_genes=args.genes,
        seed=args.seed,
        n_types=args.types,
        n_markers=args.markers,
        n_donors=args.donors,
        nonzero=args.nonzero,
    )
    truth = write_dataset(params, args.out)
    print(
        f"{args.out}: {params.n_cells:,} cells x {params.n_genes:,} genes, "
        f"{truth['n_values']:,} non-zero ({truth['nonzero_fraction']:.2%}), "
        f"written in {truth['seconds']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
