"""The synthetic CITE-seq and ATAC datasets: determinism, chunking, planted structure, stores."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cytearc import DataStore
from cytearc.datasets.adt import (
    CiteseqDataset,
    citeseq_truth,
    generate_adt,
    write_citeseq_store,
)
from cytearc.datasets.atac import (
    AtacDataset,
    AtacParams,
    DrawnSource,
    atac_truth,
    build_atac_model,
    draw_atac_cells,
    generate_atac,
    write_atac_store,
)
from cytearc.errors import OperationArgumentError

if TYPE_CHECKING:
    from pathlib import Path

ATAC: dict[str, Any] = {"n_cells": 600, "n_peaks": 4000, "n_types": 4, "seed": 3}
"""Small enough to draw in a fraction of a second, with 200 specific peaks per type."""
CITE: dict[str, Any] = {"n_cells": 1500, "n_genes": 800, "n_proteins": 24, "n_types": 6, "seed": 5}
"""Two chunks of cells (the second partial), three pairs of twins."""


@pytest.fixture(scope="module")
def atac() -> AtacDataset:
    return generate_atac(**ATAC)


@pytest.fixture(scope="module")
def cite() -> CiteseqDataset:
    return generate_adt(**CITE)


def _types(cells: pd.DataFrame) -> np.ndarray:
    return cells["cell_type"].astype(str).to_numpy()


def _log_normalized(counts: sp.csr_matrix) -> np.ndarray:
    library = np.asarray(counts.sum(axis=1), dtype=np.float64)
    values: np.ndarray = np.log1p(counts.toarray() / np.maximum(library, 1) * 1e4)
    return values


def _profile_distances(values: np.ndarray, types: np.ndarray, names: list[str]) -> np.ndarray:
    """Euclidean distances between the types' mean profiles."""
    means = np.stack([values[types == name].mean(axis=0) for name in names])
    distances: np.ndarray = np.linalg.norm(means[:, None, :] - means[None, :, :], axis=2)
    return distances


# -- ATAC -----------------------------------------------------------------------


def test_atac_same_seed_same_counts(atac: AtacDataset) -> None:
    """The same parameters draw the same counts and tables; another seed draws others."""
    again = generate_atac(**ATAC)
    assert (again.counts != atac.counts).nnz == 0
    assert again.cells.equals(atac.cells)
    assert again.features.equals(atac.features)
    other = generate_atac(**{**ATAC, "seed": 4})
    assert (other.counts != atac.counts).nnz > 0


@pytest.mark.parametrize("chunk_cells", [1, 7, 256, 600])
def test_atac_chunking_changes_no_count(atac: AtacDataset, chunk_cells: int) -> None:
    """Each cell has its own stream: the cells drawn together never change a count."""
    again = generate_atac(**ATAC, chunk_cells=chunk_cells)
    assert (again.counts != atac.counts).nnz == 0


def test_atac_cells_drawn_alone_equal_in_blocks(atac: AtacDataset) -> None:
    """Any run of cells drawn alone equals the same rows of the whole matrix."""
    model = build_atac_model(AtacParams(**ATAC))
    for start, stop in [(0, 1), (17, 18), (250, 333), (599, 600)]:
        part = draw_atac_cells(model, start, stop)
        assert part.has_canonical_format
        assert (part != atac.counts[start:stop]).nnz == 0


def test_atac_counts(atac: AtacDataset) -> None:
    """Counts are canonical int32 CSR, mostly 1s, a few 2s, rare higher."""
    counts = atac.counts
    assert counts.shape == (600, 4000)
    assert counts.dtype == np.int32
    assert counts.has_canonical_format
    assert counts.data.min() >= 1
    ones, twos = np.mean(counts.data == 1), np.mean(counts.data == 2)
    assert ones > 0.85
    assert 0.02 < twos < 0.12
    assert np.mean(counts.data >= 4) < 0.01


@pytest.mark.parametrize("density", [0.01, 0.03, 0.1])
def test_atac_density_near_target(density: float) -> None:
    """The fraction of non-zero counts is within 10 % of the density asked for."""
    data = generate_atac(n_cells=400, n_peaks=5000, density=density, seed=1)
    found = data.counts.nnz / (400 * 5000)
    assert found == pytest.approx(density, rel=0.1)


def test_atac_specific_peaks_open_in_their_type(atac: AtacDataset) -> None:
    """A type's specific peaks hold a larger share of its cells' counts than of the others'."""
    types = _types(atac.cells)
    counts = atac.counts
    library = np.asarray(counts.sum(axis=1)).ravel()
    specific = atac.truth["specific_peaks"]
    assert len({p for peaks in specific.values() for p in peaks}) == 4 * 200
    for name, peaks in specific.items():
        share = np.asarray(counts[:, peaks].sum(axis=1)).ravel() / library
        inside, outside = share[types == name].mean(), share[types != name].mean()
        assert inside > 3 * outside, name


def test_atac_first_lsi_component_tracks_depth(atac: AtacDataset) -> None:
    """Depth varies most between cells, so the first LSI component follows it (as in real data)."""
    counts = atac.counts.astype(np.float64)
    depth = np.asarray(counts.sum(axis=1)).ravel()
    idf = counts.shape[0] / np.maximum(np.asarray((counts > 0).sum(axis=0)).ravel(), 1)
    tfidf = sp.csr_matrix(sp.diags(1 / depth) @ counts @ sp.diags(idf))
    tfidf.data = np.log1p(tfidf.data * 1e4)
    gram = (tfidf @ tfidf.T).toarray()
    _, vectors = np.linalg.eigh(gram)
    assert abs(np.corrcoef(vectors[:, -1], np.log(depth))[0, 1]) > 0.8


def test_atac_features_are_peaks(atac: AtacDataset) -> None:
    """Peaks are named chrom:start-end, in genome order, apart from each other, columns matching."""
    features = atac.features
    assert features.columns.tolist() == ["ids", "names", "feature_types", "chrom", "start", "end"]
    assert (features["feature_types"] == "Peaks").all()
    assert features["ids"].is_unique
    for name, chrom, start, end in (
        features[["names", "chrom", "start", "end"]].head(50).itertuples(index=False)
    ):
        assert re.fullmatch(r"chr[0-9XY]+:\d+-\d+", name)
        assert name == f"{chrom}:{start}-{end}"
        assert 0 <= start < end
    for _, peaks in features.groupby("chrom", sort=False):
        assert (peaks["start"].to_numpy()[1:] >= peaks["end"].to_numpy()[:-1]).all()


def test_atac_truth(atac: AtacDataset) -> None:
    """The truth record survives JSON, equals atac_truth and agrees with the cell table."""
    truth = atac_truth(**ATAC)
    assert json.loads(json.dumps(truth)) == truth == atac.truth
    assert truth["cell_types"] == _types(atac.cells).tolist()
    assert sum(truth["cells_per_type"].values()) == 600
    assert truth["params"]["density_target"] == 0.03


def test_drawn_source_draws_each_block_once_per_pass() -> None:
    """Bands read in order draw each block once and keep at most two."""
    drawn: list[int] = []
    blocks = sp.csr_matrix(np.arange(100 * 3).reshape(100, 3))

    def draw(index: int) -> sp.csr_matrix:
        drawn.append(index)
        return sp.csr_matrix(blocks[index * 8 : (index + 1) * 8])

    source = DrawnSource(
        cells=pd.DataFrame({"ids": [f"c{i}" for i in range(100)]}),
        features=pd.DataFrame({"ids": ["a", "b", "c"]}),
        block_cells=8,
        draw_block=draw,
        location="<test>",
    )
    for rows in (1, 5, 8, 13, 100):
        drawn.clear()
        band = sp.vstack([source.read_band(s, min(s + rows, 100)) for s in range(0, 100, rows)])
        assert (band != blocks).nnz == 0
        assert sorted(drawn) == sorted(set(drawn))
        assert len(source._blocks) <= 2
        source.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n_types": 17}, "n_types: expected 1 to 16, got 17"),
        ({"n_peaks": 100}, "need 160 to 10,000,000 peaks, got 100"),
        ({"density": 0.7}, r"density: expected a fraction in \(0, 0.5\], got 0.7"),
        ({"n_cells": 0}, "n_cells: expected at least 1, got 0"),
        ({"chunk_cells": 0}, "chunk_cells: expected at least 1 cell, got 0"),
    ],
)
def test_atac_refuses_bad_parameters(options: dict[str, Any], message: str) -> None:
    """Parameters out of range raise OperationArgumentError naming the parameter."""
    with pytest.raises(OperationArgumentError, match=message):
        generate_atac(**{"n_cells": 50, "n_peaks": 1000, **options})


def test_write_atac_store(atac: AtacDataset, tmp_path: Path) -> None:
    """The store holds one ATAC assay without countsT, the counts and tables drawn in memory."""
    path = write_atac_store(tmp_path / "atac.zarr", **ATAC, cluster="threads")
    ds = DataStore(path)
    assert list(ds.assays) == ["ATAC"]
    assay = ds.assays["ATAC"]
    assert assay.assayType == "ATAC"
    assert assay.shape == (600, 4000)
    assert assay.stored_arrays()[1] is None
    counts = np.asarray(assay.counts.compute(scheduler="threads"))
    np.testing.assert_array_equal(counts, atac.counts.toarray())
    assert ds.cells.fetch_all("ids").tolist() == atac.cells["ids"].tolist()
    assert ds.cells.fetch_all("cell_type").tolist() == _types(atac.cells).tolist()
    assert assay.features.fetch_all("ids").tolist() == atac.features["ids"].tolist()
    assert assay.features.fetch_all("start").tolist() == atac.features["start"].tolist()


def test_write_atac_store_same_fingerprint(tmp_path: Path) -> None:
    """Written twice, with other chunk sizes, the store has the same dataset fingerprint."""
    options: dict[str, Any] = {"n_cells": 300, "n_peaks": 2000, "seed": 8, "cluster": "threads"}
    first = DataStore(write_atac_store(tmp_path / "a.zarr", **options))
    again = DataStore(write_atac_store(tmp_path / "b.zarr", **options, chunk_cells=7))
    assert first.dataset_fingerprint == again.dataset_fingerprint


# -- CITE-seq -------------------------------------------------------------------


def test_citeseq_same_seed_same_counts(cite: CiteseqDataset) -> None:
    """The same parameters draw the same RNA, ADT and tables; another seed draws others."""
    again = generate_adt(**CITE)
    assert (again.rna != cite.rna).nnz == 0
    assert (again.adt != cite.adt).nnz == 0
    assert again.cells.equals(cite.cells)
    other = generate_adt(**{**CITE, "seed": 6})
    assert (other.adt != cite.adt).nnz > 0


def test_citeseq_shapes_and_tables(cite: CiteseqDataset) -> None:
    """Both matrices cover the same cells; the tables carry types, samples and feature types."""
    assert cite.rna.shape == (1500, 800)
    assert cite.adt.shape == (1500, 24)
    assert cite.rna.dtype == cite.adt.dtype == np.int32
    assert cite.rna.has_canonical_format
    assert cite.adt.has_canonical_format
    assert {"ids", "cell_type", "sample"} <= set(cite.cells.columns)
    assert (cite.rna_features["feature_types"] == "Gene Expression").all()
    assert (cite.adt_features["feature_types"] == "Antibody Capture").all()


def test_citeseq_adt_counts_tens_to_thousands(cite: CiteseqDataset) -> None:
    """ADT counts sit in the tens off the markers and in the hundreds to thousands on them."""
    adt = cite.adt.toarray()
    assert 5 <= np.median(adt) <= 60
    assert np.percentile(adt, 99.5) > 500
    assert np.mean(adt == 0) < 0.05


def test_citeseq_marker_proteins_higher_in_their_type(cite: CiteseqDataset) -> None:
    """Each type's marker proteins count several times more in its cells than in the others'."""
    adt = cite.adt.toarray()
    types = _types(cite.cells)
    pairs = cite.truth["adt_twins"]
    twins = dict(pairs) | {b: a for a, b in pairs}
    for name, proteins in cite.truth["protein_markers"].items():
        others = (types != name) & (types != twins.get(name, name))
        inside = adt[types == name][:, proteins].mean(axis=0)
        outside = adt[others][:, proteins].mean(axis=0)
        assert (inside > 4 * outside).all(), name


def test_citeseq_twins_need_the_other_modality(cite: CiteseqDataset) -> None:
    """RNA twins look alike in RNA but not in ADT, ADT twins the reverse; other types differ in both."""
    truth = cite.truth
    names = truth["types"]
    types = _types(cite.cells)
    rna = _profile_distances(_log_normalized(cite.rna), types, names)
    adt = _profile_distances(np.log1p(cite.adt.toarray()), types, names)
    assert truth["adt_only_separable"] == [t for pair in truth["rna_twins"] for t in pair]
    assert truth["rna_only_separable"] == [t for pair in truth["adt_twins"] for t in pair]
    for same, other, pairs in ((rna, adt, truth["rna_twins"]), (adt, rna, truth["adt_twins"])):
        for a, b in pairs:
            i, j = names.index(a), names.index(b)
            rest = [k for k in range(len(names)) if k not in (i, j)]
            assert same[i, j] < 0.5 * min(same[i, rest]), (a, b)
            assert other[i, j] > 0.5 * min(other[i, rest]), (a, b)


def test_citeseq_truth(cite: CiteseqDataset) -> None:
    """The truth record survives JSON, equals citeseq_truth and names real features."""
    truth = citeseq_truth(**CITE)
    assert json.loads(json.dumps(truth)) == truth == cite.truth
    assert truth["rna_twins"] == [["T_cell", "B_cell"], ["CD16_monocyte", "dendritic"]]
    assert truth["adt_twins"] == [["NK_cell", "CD14_monocyte"]]
    assert truth["cell_types"] == _types(cite.cells).tolist()
    names = cite.rna_features["names"].to_numpy()
    for name, genes in truth["rna_markers"].items():
        assert names[genes].tolist() == truth["rna_marker_names"][name]
    assert truth["rna_markers"]["B_cell"] == truth["rna_markers"]["T_cell"]
    assert truth["protein_markers"]["CD14_monocyte"] == truth["protein_markers"]["NK_cell"]


def test_citeseq_refuses_too_few_proteins() -> None:
    """Too few proteins for every profile's markers raise OperationArgumentError with the remedy."""
    with pytest.raises(OperationArgumentError, match="need at least 18 proteins, got 10"):
        generate_adt(n_cells=50, n_genes=800, n_proteins=10, n_types=8)


def test_write_citeseq_store(cite: CiteseqDataset, tmp_path: Path) -> None:
    """The store holds RNA (with countsT) and ADT (without) over the same cells, as drawn in memory."""
    path = write_citeseq_store(tmp_path / "cite.zarr", **CITE, cluster="threads")
    ds = DataStore(path)
    assert {name: assay.assayType for name, assay in ds.assays.items()} == {
        "RNA": "RNA",
        "ADT": "ADT",
    }
    assert ds.assays["RNA"].stored_arrays()[1] is not None
    assert ds.assays["ADT"].stored_arrays()[1] is None
    np.testing.assert_array_equal(
        np.asarray(ds.assays["RNA"].counts.compute(scheduler="threads")), cite.rna.toarray()
    )
    np.testing.assert_array_equal(
        np.asarray(ds.assays["ADT"].counts.compute(scheduler="threads")), cite.adt.toarray()
    )
    assert ds.cells.fetch_all("sample").tolist() == cite.cells["sample"].astype(str).tolist()
    assert ds.assays["ADT"].features.fetch_all("ids").tolist() == cite.adt_features["ids"].tolist()
    again = DataStore(write_citeseq_store(tmp_path / "again.zarr", **CITE, cluster="threads"))
    assert again.dataset_fingerprint == ds.dataset_fingerprint
