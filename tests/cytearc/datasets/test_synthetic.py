"""The synthetic dataset: determinism, files equal to memory, planted structure, QC names, stores."""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from cytearc import DataStore
from cytearc.datasets import SyntheticDataset, generate, write_store
from cytearc.datasets.synthetic import (
    MITO_NAMES,
    RIBOSOMAL_NAMES,
    Params,
    is_complete,
    write_dataset,
)
from cytearc.errors import CyteArcError, DestinationExistsError

if TYPE_CHECKING:
    from pathlib import Path

SMALL = Params(n_cells=1200, n_genes=600, seed=3, n_types=4, n_markers=10, n_donors=3)
"""Two chunks of cells, a partial last one, and few enough genes to write fast."""


@pytest.fixture(scope="module")
def default() -> SyntheticDataset:
    return generate()


@pytest.fixture(scope="module")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthetic") / "small"
    write_dataset(SMALL, out)
    return out


def _generate(params: Params) -> SyntheticDataset:
    return generate(
        n_cells=params.n_cells,
        n_genes=params.n_genes,
        seed=params.seed,
        n_types=params.n_types,
        n_markers=params.n_markers,
        n_donors=params.n_donors,
        nonzero=params.nonzero,
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _normalized(counts: sp.csr_matrix) -> sp.csr_matrix:
    library = np.asarray(counts.sum(axis=1)).ravel()
    return sp.csr_matrix(sp.diags(1e4 / np.maximum(library, 1)) @ counts)


def test_same_seed_same_bytes(small_files: Path, tmp_path: Path) -> None:
    """Writing the same parameters again gives byte-identical files, gzip headers included."""
    write_dataset(SMALL, tmp_path / "again")
    first, again = _files(small_files), _files(tmp_path / "again")
    assert sorted(first) == [
        "COMPLETE",
        "data.h5ad",
        "mtx/barcodes.tsv.gz",
        "mtx/features.tsv.gz",
        "mtx/matrix.mtx",
        "truth.json",
    ]
    assert first == again


def test_different_seed_differs() -> None:
    """Another seed draws other counts, types and markers."""
    a = generate(n_cells=300, n_genes=600, seed=0)
    b = generate(n_cells=300, n_genes=600, seed=1)
    assert (a.counts != b.counts).nnz > 0
    assert a.truth["markers"] != b.truth["markers"]
    assert not a.cells["cell_type"].equals(b.cells["cell_type"])


def test_generate_equals_files(small_files: Path) -> None:
    """The in-memory counts, tables and truth equal the MTX, H5AD and truth.json written."""
    data = _generate(SMALL)
    counts = data.counts
    assert isinstance(counts, sp.csr_matrix)
    assert counts.dtype == np.int32
    assert counts.has_canonical_format
    assert counts.shape == (SMALL.n_cells, SMALL.n_genes)

    mtx = sp.csr_matrix(scipy.io.mmread(small_files / "mtx" / "matrix.mtx").T)
    assert (mtx != counts).nnz == 0
    with h5py.File(small_files / "data.h5ad", "r") as f:
        x = f["X"]
        h5 = sp.csr_matrix(
            (x["data"][:], x["indices"][:], x["indptr"][:]), shape=tuple(x.attrs["shape"])
        )
        obs_codes = {c: f["obs"][c]["codes"][:] for c in ("cell_type", "donor", "condition")}
        symbols = f["var"]["gene_symbols"].asstr()[:].tolist()
    np.testing.assert_array_equal(h5.indptr, counts.indptr)
    np.testing.assert_array_equal(h5.indices, counts.indices)
    np.testing.assert_array_equal(h5.data, counts.data)
    for column, codes in obs_codes.items():
        np.testing.assert_array_equal(data.cells[column].cat.codes.to_numpy(), codes)

    with gzip.open(small_files / "mtx" / "barcodes.tsv.gz", "rt", encoding="utf-8") as f:
        assert f.read().splitlines() == data.cells["ids"].tolist()
    with gzip.open(small_files / "mtx" / "features.tsv.gz", "rt", encoding="utf-8") as f:
        rows = [line.split("\t") for line in f.read().splitlines()]
    assert rows == data.features[["ids", "names", "feature_types"]].to_numpy().tolist()
    assert symbols == data.features["names"].tolist()
    assert json.loads((small_files / "truth.json").read_text(encoding="utf-8")) == data.truth
    assert data.truth["n_values"] == counts.nnz
    assert data.truth["total_counts"] == counts.sum()


def test_tables(default: SyntheticDataset) -> None:
    """Cells carry unique barcodes, type, donor, condition and sample; features ids, names, types."""
    cells, features = default.cells, default.features
    assert cells.columns.tolist() == ["ids", "cell_type", "donor", "condition", "sample"]
    assert cells["ids"].is_unique
    assert cells["cell_type"].cat.categories.tolist() == list(default.truth["markers"])
    assert cells["condition"].cat.categories.tolist() == ["ctrl", "stim"]
    assert cells["donor"].nunique() == 6
    assert (
        cells["sample"].astype(str)
        == cells["donor"].astype(str) + "_" + cells["condition"].astype(str)
    ).all()
    assert features.columns.tolist() == ["ids", "names", "feature_types"]
    assert features["ids"].is_unique
    assert features["names"].is_unique
    assert set(features["feature_types"]) == {"Gene Expression"}


def test_qc_gene_names(default: SyntheticDataset) -> None:
    """13 MT- and 60 RPL/RPS genes exist, none a marker or response gene; percent mito is a few percent."""
    names = default.features["names"]
    mito = np.flatnonzero(names.str.startswith("MT-").to_numpy())
    ribosomal = np.flatnonzero(names.str.match(r"RP[LS]\d+$").to_numpy())
    assert sorted(names.iloc[mito]) == sorted(MITO_NAMES)
    assert sorted(names.iloc[ribosomal]) == sorted(RIBOSOMAL_NAMES)
    assert mito.tolist() == default.truth["mito_genes"]
    assert ribosomal.tolist() == default.truth["ribosomal_genes"]
    planted = {g for genes in default.truth["markers"].values() for g in genes}
    planted |= set(default.truth["response_genes"])
    assert not planted & {*mito.tolist(), *ribosomal.tolist()}
    counts = default.counts
    library = np.asarray(counts.sum(axis=1)).ravel()
    percent = 100 * np.asarray(counts[:, mito].sum(axis=1)).ravel() / library
    assert 1 < np.median(percent) < 10


def test_types_balanced(default: SyntheticDataset) -> None:
    """Every type of the default dataset holds at least 3 % and at most 30 % of the cells."""
    shares = default.cells["cell_type"].value_counts(normalize=True)
    assert len(shares) == 8
    assert shares.min() > 0.03
    assert shares.max() < 0.3
    assert (
        default.truth["cells_per_type"]
        == default.cells["cell_type"].value_counts(sort=False).to_dict()
    )


def test_markers_higher_in_their_type(default: SyntheticDataset) -> None:
    """Each marker gene's mean is over 2x higher in its type than elsewhere, and tops its type's ranking."""
    normalized = _normalized(default.counts)
    codes = default.cells["cell_type"].cat.codes.to_numpy()
    names = default.features["names"].to_numpy()
    for t, (cell_type, genes) in enumerate(default.truth["markers"].items()):
        inside = np.asarray(normalized[codes == t].mean(axis=0)).ravel()
        outside = np.asarray(normalized[codes != t].mean(axis=0)).ravel()
        ratio = inside / np.maximum(outside, 1e-9)
        assert ratio[genes].min() > 2, cell_type
        top = np.argsort(-np.log1p(inside) + np.log1p(outside), kind="stable")[:10]
        assert set(top.tolist()) <= set(genes), cell_type
        assert names[genes].tolist() == default.truth["marker_names"][cell_type]


def test_write_store(tmp_path: Path) -> None:
    """write_store imports the generated counts and tables into a store that opens as a DataStore."""
    options: dict[str, Any] = {"n_cells": 400, "n_genes": 600, "seed": 2, "cluster": "threads"}
    path = write_store(tmp_path / "synthetic.zarr", **options, mem_budget="1GiB")
    assert path == tmp_path / "synthetic.zarr"
    data = generate(n_cells=400, n_genes=600, seed=2)
    ds = DataStore(path)
    counts = ds.RNA.counts.compute(scheduler="threads")
    np.testing.assert_array_equal(np.asarray(counts), data.counts.toarray())
    assert ds.cells.fetch_all("ids").tolist() == data.cells["ids"].tolist()
    assert ds.cells.fetch_all("cell_type").tolist() == data.cells["cell_type"].astype(str).tolist()

    with pytest.raises(DestinationExistsError):
        write_store(path, **options)
    write_store(path, **options, overwrite=True)


def test_is_complete(small_files: Path) -> None:
    """A finished folder matches its own parameters only, and not once COMPLETE is gone."""
    assert is_complete(small_files, SMALL)
    assert not is_complete(small_files, Params(n_cells=1200, n_genes=600, seed=4))
    assert not is_complete(small_files / "missing", SMALL)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n_genes": 300}, "need at least 520 genes, got 300"),
        ({"n_cells": 0}, "need at least one cell"),
        ({"n_types": 0}, "n_types: expected 1 to 127"),
        ({"n_markers": 0}, "n_markers: expected at least 1"),
        ({"nonzero": 0.95}, "nonzero: expected a fraction in (0, 0.9)"),
    ],
)
def test_invalid_parameters(options: dict[str, Any], message: str) -> None:
    """Parameters that cannot hold the planted structure are refused with what to change."""
    with pytest.raises(CyteArcError) as info:
        generate(**options)
    assert message in str(info.value)
