"""10x readers: Cell Ranger HDF5 (v2, v3) and Matrix Market folders, on real and synthetic files."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

from cytearc.errors import SourceFormatError
from cytearc.io import tenx
from cytearc.io.sources import CountSource
from cytearc.io.tenx import TenxH5Source, TenxMtxSource
from cytearc.testing import assemble_bands

if TYPE_CHECKING:
    from collections.abc import Sequence

DATA = Path(__file__).parents[3].parent / "shared" / "data"
BAND_SIZES = (1, 7, 100, None)

MTX_FOLDERS = [
    "10x_v2_mtx_hg19_chr21",
    "10x_v2_mtx_soupx_toy_raw_filtered/raw_gene_bc_matrices/GRCh38",
    "10x_v2_mtx_soupx_toy_raw_filtered/filtered_gene_bc_matrices/GRCh38",
    "10x_v3_pbmc1k_chr21/filtered_feature_bc_matrix",
]
H5_FILES = [
    ("10x_v2_h5_hg19_chr21/filtered_gene_bc_matrices_h5.h5", None, "/hg19_chr21"),
    ("10x_v2_h5_hg19_chr21/multiple_genomes.h5", "hg19_chr21", "/hg19_chr21"),
    ("10x_v2_h5_hg19_chr21/multiple_genomes.h5", "another_genome", "/another_genome"),
    ("10x_v3_pbmc1k_chr21/filtered_feature_bc_matrix.h5", None, "/matrix"),
    ("10x_v3_h5_pbmc1k_citeseq/filtered_feature_bc_matrix.h5", None, "/matrix"),
]


def assert_same(actual: sp.csr_matrix, expected: sp.spmatrix) -> None:
    assert actual.shape == expected.shape
    assert (actual != sp.csr_matrix(expected)).nnz == 0


def mtx_reference(folder: Path) -> sp.csr_matrix:
    (matrix,) = folder.glob("matrix.mtx*")
    return sp.csr_matrix(scipy.io.mmread(matrix).T)


def tsv(folder: Path, stem: str) -> pd.DataFrame:
    (path,) = folder.glob(f"{stem}.tsv*")
    return pd.read_csv(path, sep="\t", header=None, dtype=str, na_filter=False)


def h5_reference(path: Path, group: str) -> sp.csr_matrix:
    with h5py.File(path) as f:
        g = f[group]
        n_features, n_cells = g["shape"][()]
        stored = sp.csc_matrix(
            (g["data"][()], g["indices"][()], g["indptr"][()]), shape=(n_features, n_cells)
        )
    return sp.csr_matrix(stored.T)


def write_mtx(
    folder: Path,
    entries: Sequence[tuple[int, int, float | int]],
    *,
    shape: tuple[int, int],
    field: str = "integer",
    symmetry: str = "general",
    compress: bool = False,
) -> Path:
    """A v3 folder with ``entries`` as 1-based (feature, cell, value) lines."""
    folder.mkdir(parents=True, exist_ok=True)
    n_features, n_cells = shape
    lines = [f"%%MatrixMarket matrix coordinate {field} {symmetry}", "%metadata_json: {}"]
    lines += [f"{n_features} {n_cells} {len(entries)}", *(f"{r} {c} {v!r}" for r, c, v in entries)]
    texts = {
        "matrix.mtx": "\n".join(lines) + "\n",
        "features.tsv": "".join(f"ENSG{i}\tG{i}\tGene Expression\n" for i in range(n_features)),
        "barcodes.tsv": "".join(f"AAAC{i}-1\n" for i in range(n_cells)),
    }
    for name, text in texts.items():
        if compress:
            with gzip.open(folder / f"{name}.gz", "wt") as handle:
                handle.write(text)
        else:
            (folder / name).write_text(text)
    return folder


@pytest.fixture(params=[tenx.BLOCK_CHARS, 1, 4096], ids=["blocks", "lines", "4k"])
def block_chars(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The parse blocks of the MTX reader: the default, one line each (every read cuts a line), 4 KiB."""
    monkeypatch.setattr(tenx, "BLOCK_CHARS", request.param)
    return int(request.param)


@pytest.mark.parametrize("folder", MTX_FOLDERS)
def test_mtx_folders_match_mmread(folder: str, block_chars: int) -> None:
    """Bands of 1, 7, 100 and all cells of each real MTX folder equal scipy's mmread, transposed."""
    path = DATA / folder
    expected = mtx_reference(path)
    with TenxMtxSource(path, band_rows=64) as source:
        assert isinstance(source, CountSource)
        assert source.shape == expected.shape
        assert source.dtype == np.int64
        for rows in BAND_SIZES:
            band = assemble_bands(source, rows)
            assert band.dtype == np.int64
            assert_same(band, expected)


@pytest.mark.parametrize("folder", MTX_FOLDERS)
def test_mtx_tables_match_the_tsv_files(folder: str) -> None:
    """Barcodes, ids, names and types come from barcodes.tsv and genes.tsv / features.tsv."""
    path = DATA / folder
    barcodes = tsv(path, "barcodes")
    genes = tsv(path, "features") if list(path.glob("features.tsv*")) else tsv(path, "genes")
    with TenxMtxSource(path) as source:
        assert source.cells["ids"].tolist() == barcodes[0].tolist()
        assert list(source.features.columns[:3]) == ["ids", "names", "feature_types"]
        assert source.features["ids"].tolist() == genes[0].tolist()
        assert source.features["names"].tolist() == genes[1].tolist()
        expected_types = genes[2] if genes.shape[1] > 2 else ["Gene Expression"] * len(genes)
        assert source.features["feature_types"].tolist() == list(expected_types)


def test_soupx_barcodes_keep_their_form() -> None:
    """The filtered SoupX barcodes (14 bp, no -1 suffix) are a subset of the raw ones, read as is."""
    root = DATA / "10x_v2_mtx_soupx_toy_raw_filtered"
    with (
        TenxMtxSource(root / "raw_gene_bc_matrices" / "GRCh38") as raw,
        TenxMtxSource(root / "filtered_gene_bc_matrices" / "GRCh38") as filtered,
    ):
        cells = filtered.cells["ids"]
        assert cells.str.len().eq(14).all()
        assert not cells.str.endswith("-1").any()
        assert set(cells) <= set(raw.cells["ids"])
        assert raw.shape == (1289, 226)
        assert filtered.shape == (62, 226)


@pytest.mark.parametrize(("file", "genome", "group"), H5_FILES)
def test_h5_files_match_h5py(file: str, genome: str | None, group: str) -> None:
    """Bands of each real 10x HDF5 matrix equal its CSC datasets read whole with h5py, transposed."""
    path = DATA / file
    expected = h5_reference(path, group)
    with TenxH5Source(path, genome=genome) as source:
        assert isinstance(source, CountSource)
        assert source.dtype == np.int32
        for rows in BAND_SIZES:
            band = assemble_bands(source, rows)
            assert band.dtype == np.int64
            assert_same(band, expected)


@pytest.mark.parametrize(("file", "genome", "group"), H5_FILES)
def test_h5_tables_match_h5py(file: str, genome: str | None, group: str) -> None:
    """Barcodes and feature ids, names and types decode to the strings h5py reads."""
    path = DATA / file
    with h5py.File(path) as f, TenxH5Source(path, genome=genome) as source:
        g = f[group]
        assert source.cells["ids"].tolist() == g["barcodes"].asstr()[()].tolist()
        if group == "/matrix":
            ids, names = g["features/id"], g["features/name"]
            types = g["features/feature_type"].asstr()[()].tolist()
        else:
            ids, names = g["genes"], g["gene_names"]
            types = ["Gene Expression"] * ids.shape[0]
            assert set(source.features["genome"]) == {group.strip("/")}
        assert source.features["ids"].tolist() == ids.asstr()[()].tolist()
        assert source.features["names"].tolist() == names.asstr()[()].tolist()
        assert source.features["feature_types"].tolist() == types
        assert all(isinstance(v, str) for v in source.features["names"])


def test_v2_genomes_are_chosen_by_name() -> None:
    """Several v2 genomes without genome= raise naming both; an unknown genome names the available ones."""
    path = DATA / "10x_v2_h5_hg19_chr21" / "multiple_genomes.h5"
    with pytest.raises(SourceFormatError, match=r"another_genome.*hg19_chr21.*genome="):
        TenxH5Source(path)
    with pytest.raises(SourceFormatError, match=r"no genome 'mm10'.*another_genome.*hg19_chr21"):
        TenxH5Source(path, genome="mm10")
    with TenxH5Source(path, genome="another_genome") as other:
        assert other.features["names"].iloc[0] == "gene_0"
        assert assemble_bands(other, None).sum() == 13


def test_citeseq_keeps_antibody_capture_and_tag_columns() -> None:
    """The CITE-seq h5 has 36,601 Gene Expression and 10 Antibody Capture features with their tags."""
    path = DATA / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    with TenxH5Source(path) as source:
        features = source.features
        assert source.shape == (892, 36611)
        assert list(features.columns) == [
            "ids", "names", "feature_types", "genome", "read", "pattern", "sequence"
        ]  # fmt: skip
        assert features["feature_types"].value_counts().to_dict() == {
            "Gene Expression": 36601,
            "Antibody Capture": 10,
        }
        adt = features[features["feature_types"] == "Antibody Capture"]
        assert {"CD3", "CD4", "CD19"} <= set(adt["ids"])
        assert set(adt["read"]) == {"R2"}
        assert set(adt["genome"]) == {""}
        assert int(assemble_bands(source, 300).sum()) == 8_671_085


def test_v3_genome_keeps_only_its_features() -> None:
    """genome= on a v3 file keeps the features of that genome, columns renumbered in order."""
    path = DATA / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    expected = h5_reference(path, "/matrix")
    with TenxH5Source(path) as whole:
        keep = np.flatnonzero(whole.features["genome"].to_numpy() == "GRCh38")
    with TenxH5Source(path, genome="GRCh38") as source:
        assert source.shape == (892, 36601)
        assert set(source.features["feature_types"]) == {"Gene Expression"}
        assert_same(assemble_bands(source, 100), expected[:, keep])
    with pytest.raises(SourceFormatError, match=r"no genome 'mm10'.*GRCh38"):
        TenxH5Source(path, genome="mm10")


def test_v3_folder_and_h5_agree() -> None:
    """The v3 mtx.gz folder and the v3 h5 of pbmc1k chr21 give the same matrix and tables."""
    root = DATA / "10x_v3_pbmc1k_chr21"
    with (
        TenxMtxSource(root / "filtered_feature_bc_matrix", band_rows=100) as folder,
        TenxH5Source(root / "filtered_feature_bc_matrix.h5") as h5,
    ):
        assert folder.shape == h5.shape == (1107, 507)
        assert_same(assemble_bands(folder, 50), assemble_bands(h5, 50))
        pd.testing.assert_frame_equal(folder.cells, h5.cells)
        first = ["ids", "names", "feature_types"]
        pd.testing.assert_frame_equal(folder.features[first], h5.features[first])
        assert set(h5.features["genome"]) == {"GRCh38_chr21"}


def test_h5_band_reads_only_its_slice() -> None:
    """A band reads only its cells' slice of data and indices, never the whole matrix."""
    path = DATA / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    with TenxH5Source(path) as source, h5py.File(path) as f:
        indptr = f["matrix/indptr"][()]
        reads: list[slice] = []
        data = source._data

        class Spy:
            shape = data.shape

            def __getitem__(self, key: slice) -> np.ndarray:
                reads.append(key)
                return np.asarray(data[key])

        source._data = Spy()
        band = source.read_band(100, 103)
        assert reads == [slice(int(indptr[100]), int(indptr[103]))]
        assert band.nnz == indptr[103] - indptr[100]


def test_mtx_reads_int64_exactly_and_drops_explicit_zeros(tmp_path: Path) -> None:
    """Integers beyond 32 bits read exactly in int64, explicit zeros are dropped, at any band size."""
    big = 2**40 + 1
    entries = [(1, 1, big), (2, 3, 9), (3, 2, 0), (1, 4, 7)]
    folder = write_mtx(tmp_path / "ints", entries, shape=(3, 4))
    expected = np.zeros((4, 3), dtype=np.int64)
    expected[0, 0], expected[2, 1], expected[3, 0] = big, 9, 7
    for band_rows in (1, 3, 10):
        with TenxMtxSource(folder, band_rows=band_rows) as source:
            for rows in (1, 2, None):
                band = assemble_bands(source, rows)
                assert band.dtype == np.int64
                np.testing.assert_array_equal(band.toarray(), expected)
                assert band.nnz == 3


def test_mtx_blocks_keep_comments_and_a_last_line_without_newline(
    tmp_path: Path, block_chars: int
) -> None:
    """Comment lines anywhere in the entries (a block of only comments too) and no final newline."""
    folder = write_mtx(tmp_path / "m", [(1, 1, 5), (2, 1, 6), (1, 2, 7)], shape=(2, 2))
    lines = (folder / "matrix.mtx").read_text().splitlines()
    lines[4:4] = ["% a comment", "%" + "x" * 5000, "% another"]
    (folder / "matrix.mtx").write_text("\n".join(lines))
    with TenxMtxSource(folder) as source:
        np.testing.assert_array_equal(assemble_bands(source, None).toarray(), [[5, 6], [7, 0]])


def test_mtx_real_values_are_float64_parsed_exactly(tmp_path: Path) -> None:
    """A real .mtx reads as float64 parsed exactly (round trip)."""
    entries = [(1, 1, 0.1), (2, 2, 1 / 3), (2, 1, 2.5e-7)]
    folder = write_mtx(tmp_path / "real", entries, shape=(2, 2), field="real", compress=True)
    with TenxMtxSource(folder) as source:
        assert source.dtype == np.float64
        band = assemble_bands(source, None)
        assert band.dtype == np.float64
        assert band[0, 0] == 0.1
        assert band[0, 1] == 2.5e-7
        assert band[1, 1] == 1 / 3
        assert_same(band, mtx_reference(folder))


def test_mtx_pattern_values_are_ones(tmp_path: Path) -> None:
    """A pattern .mtx (entry lines 'row column') reads each entry as the integer 1, as scipy's mmread."""
    folder = write_mtx(tmp_path / "pattern", [(1, 1, 1), (2, 1, 1)], shape=(2, 2))
    lines = (folder / "matrix.mtx").read_text().splitlines()
    lines[0] = "%%MatrixMarket matrix coordinate pattern general"
    lines[3:] = [" ".join(line.split()[:2]) for line in lines[3:]]
    (folder / "matrix.mtx").write_text("\n".join(lines) + "\n")
    with TenxMtxSource(folder) as source:
        band = assemble_bands(source, None)
        assert band.dtype == np.int64
        np.testing.assert_array_equal(band.toarray(), [[1, 1], [0, 0]])


def test_mtx_reads_v2_and_gzipped_files(tmp_path: Path) -> None:
    """genes.tsv with two columns types features as Gene Expression; .gz and plain both read."""
    entries = [(1, 2, 3), (2, 1, 1)]
    folder = write_mtx(tmp_path / "v2", entries, shape=(2, 2), compress=True)
    (folder / "features.tsv.gz").unlink()
    (folder / "genes.tsv").write_text("ENSG0\tA\nENSG1\tB\n")
    with TenxMtxSource(folder) as source:
        assert source.features["names"].tolist() == ["A", "B"]
        assert source.features["feature_types"].tolist() == ["Gene Expression"] * 2
        np.testing.assert_array_equal(assemble_bands(source, 1).toarray(), [[0, 1], [3, 0]])


@pytest.mark.parametrize(
    ("banner", "match"),
    [
        ("%%MatrixMarket matrix coordinate integer symmetric", "'symmetric'"),
        ("%%MatrixMarket matrix array integer general", "'array'"),
        ("%%MatrixMarket matrix coordinate complex general", "'complex'"),
        ("not a banner", "banner"),
    ],
)
def test_mtx_refuses_other_kinds(tmp_path: Path, banner: str, match: str) -> None:
    """Symmetric, array and complex matrices (and a missing banner) raise SourceFormatError."""
    folder = write_mtx(tmp_path / "kind", [(1, 1, 1)], shape=(1, 1))
    text = (folder / "matrix.mtx").read_text().splitlines()
    (folder / "matrix.mtx").write_text("\n".join([banner, *text[1:]]) + "\n")
    with pytest.raises(SourceFormatError, match=match):
        TenxMtxSource(folder)


@pytest.mark.parametrize("missing", ["matrix.mtx", "features.tsv", "barcodes.tsv"])
def test_mtx_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    """A folder without one of its three files raises naming that file, chained to FileNotFoundError."""
    folder = write_mtx(tmp_path / "incomplete", [(1, 1, 1)], shape=(1, 1))
    (folder / missing).unlink()
    with pytest.raises(SourceFormatError, match=missing) as info:
        TenxMtxSource(folder)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    with pytest.raises(SourceFormatError, match="not a folder"):
        TenxMtxSource(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([(1, 1, 1), (3, 1, 1)], "outside"),
        ([(1, 1, 1)], "announces 2 entries"),
        ([(1, 1, 1), (1, 2, "x")], r"line 5 holds the value 'x', expected an integer"),
    ],
)
def test_mtx_bad_entries_are_refused_on_first_read(
    tmp_path: Path, entries: list[tuple[int, int, object]], match: str
) -> None:
    """Out-of-range coordinates, a wrong entry count or a non-integer value raise on the first band."""
    folder = write_mtx(tmp_path / "bad", [(1, 1, 1), (2, 2, 1)], shape=(2, 2))
    lines = (folder / "matrix.mtx").read_text().splitlines()[:3]
    lines += [f"{r} {c} {v}" for r, c, v in entries]
    (folder / "matrix.mtx").write_text("\n".join(lines) + "\n")
    with TenxMtxSource(folder) as source, pytest.raises(SourceFormatError, match=match):
        source.read_band(0, 1)


def test_mtx_tables_must_match_the_size_line(tmp_path: Path) -> None:
    """More barcodes than the matrix has cells raises naming barcodes.tsv."""
    folder = write_mtx(tmp_path / "sizes", [(1, 1, 1)], shape=(1, 1))
    (folder / "barcodes.tsv").write_text("A-1\nB-1\n")
    with pytest.raises(SourceFormatError, match=r"barcodes\.tsv: 2 barcodes for a matrix of 1"):
        TenxMtxSource(folder)


def test_close_removes_the_buckets(tmp_path: Path) -> None:
    """The buckets live under TMPDIR until close; reading after close raises."""
    folder = write_mtx(tmp_path / "close", [(1, 1, 1), (2, 2, 2)], shape=(2, 2))
    with TenxMtxSource(folder, band_rows=1) as source:
        source.read_band(0, 2)
        assert source._buckets is not None
        directory = source._buckets.directory
        assert len(list(directory.iterdir())) == 2
    assert not directory.exists()
    with pytest.raises(ValueError, match="closed"):
        source.read_band(0, 1)


def test_bands_outside_the_cells_raise() -> None:
    """A band past the last cell or with stop before start raises IndexError."""
    with TenxH5Source(DATA / "10x_v2_h5_hg19_chr21" / "filtered_gene_bc_matrices_h5.h5") as source:
        assert source.read_band(5, 5).shape == (0, 343)
        with pytest.raises(IndexError, match="outside the 12 cells"):
            source.read_band(10, 13)
        with pytest.raises(IndexError):
            source.read_band(4, 3)


def test_h5_that_is_not_10x_is_refused(tmp_path: Path) -> None:
    """An HDF5 file without /matrix or genome groups, or no HDF5 at all, raises SourceFormatError."""
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(SourceFormatError, match=r"top-level keys are \['x'\]"):
        TenxH5Source(tmp_path / "other.h5")
    (tmp_path / "text.h5").write_text("hello")
    with pytest.raises(SourceFormatError, match="cannot open as an HDF5 file"):
        TenxH5Source(tmp_path / "text.h5")
