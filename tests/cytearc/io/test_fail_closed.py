"""Imports fail closed: a malformed, damaged, empty or ambiguous source raises a named error before the destination exists."""

from __future__ import annotations

import gzip
import re
import zlib
from typing import TYPE_CHECKING, Any

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cytearc import (
    DamagedSourceError,
    DataStore,
    RemoteDestinationError,
    RepeatedEntryError,
    SourceFormatError,
    SparseToZarr,
    import_10x_h5,
    import_10x_mtx,
    import_csv,
    import_data,
    import_h5ad,
)
from cytearc.cli import main
from cytearc.io import tenx
from cytearc.io.sources import SparseSource

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

QUIET: dict[str, Any] = {"cluster": "threads", "show_progress": False}


def write_mtx(
    folder: Path,
    entries: Sequence[str],
    *,
    shape: tuple[int, int],
    field: str = "integer",
    feature_ids: Sequence[str] | None = None,
    barcodes: Sequence[str] | None = None,
    compress: bool = False,
) -> Path:
    """A v3 Matrix Market folder whose matrix holds ``entries`` as raw lines after the size line (line 3)."""
    folder.mkdir(parents=True, exist_ok=True)
    n_features, n_cells = shape
    ids = list(feature_ids) if feature_ids is not None else [f"G{i}" for i in range(n_features)]
    cells = list(barcodes) if barcodes is not None else [f"C{i}-1" for i in range(n_cells)]
    matrix = "\n".join(
        [
            f"%%MatrixMarket matrix coordinate {field} general",
            f"{n_features} {n_cells} {len(entries)}",
            *entries,
        ]
    )
    texts = {
        "matrix.mtx": matrix + "\n",
        "features.tsv": "".join(f"{i}\t{i.lower()}\tGene Expression\n" for i in ids),
        "barcodes.tsv": "".join(f"{c}\n" for c in cells),
    }
    for name, text in texts.items():
        if compress and name == "matrix.mtx":
            (folder / "matrix.mtx.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (folder / name).write_text(text)
    return folder


def write_h5(
    path: Path,
    counts: sp.csr_matrix,
    *,
    indices: np.ndarray | None = None,
    chunks: int | None = None,
) -> Path:
    """A Cell Ranger v3 .h5 of ``counts`` (cells x features); ``indices`` replaces the stored indices."""
    n_cells, n_features = counts.shape
    with h5py.File(path, "w") as f:
        m = f.create_group("matrix")
        options = {} if chunks is None else {"chunks": (chunks,), "compression": "gzip"}
        m.create_dataset("data", data=counts.data.astype(np.int32), **options)
        m["indices"] = counts.indices if indices is None else indices
        m["indptr"] = counts.indptr
        m["shape"] = [n_features, n_cells]
        text = h5py.string_dtype()
        m.create_dataset("barcodes", data=[f"C{i}-1" for i in range(n_cells)], dtype=text)
        for key, values in {
            "id": [f"G{i}" for i in range(n_features)],
            "name": [f"g{i}" for i in range(n_features)],
            "feature_type": ["Gene Expression"] * n_features,
        }.items():
            m.create_dataset(f"features/{key}", data=values, dtype=text)
    return path


def counts(n_cells: int = 30, n_features: int = 8, *, seed: int = 0) -> sp.csr_matrix:
    return sp.csr_matrix(np.random.default_rng(seed).poisson(1.0, (n_cells, n_features)))


def corrupt_chunk(path: Path, dataset: str, chunk: int) -> None:
    """Overwrite bytes inside one stored chunk of ``dataset``, as a disk or transfer error would."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(chunk)
    with path.open("r+b") as handle:
        handle.seek(info.byte_offset + 4)
        handle.write(b"\xff" * 16)


# --- 1. Matrix Market entry lines ---------------------------------------------


@pytest.mark.parametrize(
    ("field", "line", "found"),
    [
        ("integer", "1 1 2 3", r"holds 4 fields \('1 1 2 3'\), expected 3 \('row column value'\)"),
        ("integer", "2 2", r"holds 2 fields \('2 2'\), expected 3 \('row column value'\)"),
        ("real", "1 2 0.5 7 7", r"holds 5 fields \('1 2 0\.5 7 7'\), expected 3"),
        ("pattern", "1 2 1", r"holds 3 fields \('1 2 1'\), expected 2 \('row column'\)"),
    ],
)
@pytest.mark.parametrize("block_chars", [None, 1, 8])
def test_an_entry_line_with_other_fields_is_refused_naming_its_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    field: str,
    line: str,
    *,
    found: str,
    block_chars: int | None,
) -> None:
    """An entry line of another field count (a 4th field would shift the others) raises naming file and line.

    Also when the reader's parse blocks are a line each, or cut lines (the
    line then starts a block, where pandas only warns of a field too many).
    """
    if block_chars is not None:
        monkeypatch.setattr(tenx, "BLOCK_CHARS", block_chars)
    good = "2 1" if field == "pattern" else "2 1 4"
    folder = write_mtx(tmp_path / "mtx", [good, good, line, good], shape=(2, 2), field=field)
    with pytest.raises(SourceFormatError) as info:
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert re.match(rf"{re.escape(str(folder / 'matrix.mtx'))}: line 5 {found}", str(info.value))
    assert not (tmp_path / "ds.zarr").exists()


@pytest.mark.parametrize("line", ["1 1 2 3", "1 1 2 3 9", "2 2"])
def test_a_first_entry_line_with_other_fields_is_refused_naming_it(
    tmp_path: Path, line: str
) -> None:
    """The first entry line, whose field count pandas could take for the file's, is checked as well."""
    folder = write_mtx(tmp_path / "mtx", [line, "2 1 4"], shape=(2, 2))
    with pytest.raises(SourceFormatError) as info:
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    fields = len(line.split())
    assert re.match(
        rf"{re.escape(str(folder / 'matrix.mtx'))}: line 3 holds {fields} fields", str(info.value)
    )
    assert not (tmp_path / "ds.zarr").exists()


def test_an_integer_beyond_64_bits_is_named_by_its_line(tmp_path: Path) -> None:
    """A value beyond int64 raises a SourceFormatError naming its line, not pandas' OverflowError."""
    huge = str(10**22)
    folder = write_mtx(tmp_path / "mtx", ["1 1 3", f"2 2 {huge}"], shape=(2, 2))
    with pytest.raises(
        SourceFormatError, match=rf"line 4 holds the value {huge}, beyond the 64-bit"
    ):
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


# --- 2. repeated coordinates ----------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_a_repeated_mtx_coordinate_is_refused(tmp_path: Path, *, compress: bool) -> None:
    """A coordinate listed twice in a .mtx is damage: refused naming it, never summed."""
    entries = ["1 1 3", "2 3 4", "2 3 5"]
    folder = write_mtx(tmp_path / "mtx", entries, shape=(2, 3), compress=compress)
    with pytest.raises(RepeatedEntryError) as info:
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert "the entry at row 2, column 3 (feature 'G1', cell 'C2-1') is stored 2 times" in str(
        info.value
    )
    assert "SparseToZarr" in str(info.value)
    assert not (tmp_path / "ds.zarr").exists()


def test_a_repeated_h5_index_is_refused(tmp_path: Path) -> None:
    """A cell whose indices name one feature twice in a 10x .h5 is refused naming cell and feature."""
    matrix = sp.csr_matrix(np.ones((4, 3), dtype=np.int64))
    indices = matrix.indices.copy()
    indices[1] = indices[0]
    path = write_h5(tmp_path / "m.h5", matrix, indices=indices)
    with pytest.raises(
        RepeatedEntryError, match=r"/matrix/indices: feature 0 \('G0'\) of cell 0 \('C0-1'\)"
    ):
        import_10x_h5(path, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_unsorted_distinct_h5_indices_still_import(tmp_path: Path) -> None:
    """Indices in another order within a cell, none repeated, are no damage: the counts import as stored."""
    matrix = counts(6, 5)
    shuffled = matrix.copy()
    for row in range(6):
        lo, hi = shuffled.indptr[row], shuffled.indptr[row + 1]
        shuffled.indices[lo:hi] = shuffled.indices[lo:hi][::-1]
        shuffled.data[lo:hi] = shuffled.data[lo:hi][::-1]
    path = write_h5(tmp_path / "m.h5", shuffled)
    result = import_10x_h5(path, tmp_path / "ds.zarr", **QUIET)
    stored = DataStore(result.path).assays["RNA"].counts.compute()
    np.testing.assert_array_equal(stored, matrix.toarray())


def test_an_in_memory_matrix_still_sums_repeats() -> None:
    """The in-memory source (SparseToZarr's) keeps SciPy's meaning of repeated COO coordinates: they add up."""
    coo = sp.coo_matrix((np.array([2, 3]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    cells = pd.DataFrame({"ids": ["a", "b"]})
    features = pd.DataFrame({"ids": ["f", "g"], "names": ["F", "G"]})
    band = SparseSource(coo, cells, features).read_band(0, 2)
    assert band.toarray().tolist() == (coo.tocsr().toarray()).tolist()
    assert band.nnz == 1


# --- 3. repeated ids ----------------------------------------------------------------


def _repeated_ids_sources(tmp_path: Path, ids: list[str]) -> dict[str, Path]:
    n = len(ids)
    matrix = counts(5, n)
    mtx = write_mtx(
        tmp_path / "mtx",
        [f"{f + 1} {c + 1} {v}" for c, f, v in zip(*sp.find(matrix), strict=True)],
        shape=(n, 5),
        feature_ids=ids,
    )
    adata = ad.AnnData(
        matrix.astype(np.float32),
        obs=pd.DataFrame(index=[f"C{i}" for i in range(5)]),
        var=pd.DataFrame(index=[f"tmp{i}" for i in range(n)]),
    )
    adata.write_h5ad(tmp_path / "x.h5ad")
    with h5py.File(tmp_path / "x.h5ad", "r+") as f:
        del f["var/_index"]
        f["var"].create_dataset("_index", data=ids, dtype=h5py.string_dtype())
    table = pd.DataFrame(matrix.toarray(), columns=ids, index=[f"C{i}" for i in range(5)])
    table.index.name = "cell"
    table.to_csv(tmp_path / "x.csv")
    return {"mtx": mtx, "h5ad": tmp_path / "x.h5ad", "csv": tmp_path / "x.csv"}


@pytest.mark.parametrize("kind", ["mtx", "h5ad", "csv"])
def test_repeated_feature_ids_are_made_unique_as_anndata_does(tmp_path: Path, kind: str) -> None:
    """Repeated feature ids become id-1, id-2 ... exactly as anndata's make_index_unique, with a warning."""
    ids = ["A", "B", "A", "A-1", "A", "B"]
    source = _repeated_ids_sources(tmp_path, ids)[kind]
    with pytest.warns(
        UserWarning,
        match=r"2 feature ids appear more than once: 'A' \(3 times\), 'B' \(2 times\); 3 features were renamed",
    ):
        result = import_data(source, tmp_path / "ds.zarr", **QUIET)
    stored = DataStore(result.path).assays["RNA"].features.fetch_all("ids").tolist()
    with pytest.warns(UserWarning, match="Suffix used"):
        expected = ad.utils.make_index_unique(pd.Index(ids)).tolist()
    assert stored == expected
    assert len(set(stored)) == len(ids)


def test_repeated_cell_ids_are_refused_by_every_import(tmp_path: Path) -> None:
    """A barcode listed twice is refused (MTX, CSV, in-memory) before the destination exists."""
    folder = write_mtx(tmp_path / "mtx", ["1 1 3"], shape=(2, 2), barcodes=["C0", "C0"])
    with pytest.raises(SourceFormatError, match="cell id 'C0' appears more than once"):
        import_10x_mtx(folder, tmp_path / "a.zarr", **QUIET)
    (tmp_path / "t.csv").write_text("cell,G0\nC0,1\nC0,2\n")
    with pytest.raises(SourceFormatError, match="cell id 'C0' appears more than once"):
        import_csv(tmp_path / "t.csv", tmp_path / "b.zarr", **QUIET)
    cells = pd.DataFrame({"ids": ["C0", "C0"]})
    features = pd.DataFrame({"ids": ["f"], "names": ["F"]})
    with pytest.raises(SourceFormatError, match="cell id 'C0' appears more than once"):
        SparseToZarr(
            np.ones((2, 1)), cells=cells, features=features, zarr_loc=tmp_path / "c.zarr", **QUIET
        ).dump()
    assert not any((tmp_path / name).exists() for name in ("a.zarr", "b.zarr", "c.zarr"))


# --- 4. empty sources -------------------------------------------------------------------


def _empty_sources(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    no_cells = sp.csr_matrix((0, 3), dtype=np.int64)
    no_features = sp.csr_matrix((4, 0), dtype=np.int64)
    for name, matrix in (("cells", no_cells), ("features", no_features)):
        adata = ad.AnnData(
            matrix.astype(np.float32),
            obs=pd.DataFrame(index=[f"C{i}" for i in range(matrix.shape[0])]),
            var=pd.DataFrame(index=[f"G{i}" for i in range(matrix.shape[1])]),
        )
        adata.write_h5ad(tmp_path / f"no_{name}.h5ad")
        write_h5(tmp_path / f"no_{name}.h5", matrix)
    (tmp_path / "header_only.csv").write_text("cell,G0,G1\n")
    return {
        "mtx cells": (write_mtx(tmp_path / "m0", [], shape=(3, 0)), "0 cells and 3 features"),
        "mtx features": (write_mtx(tmp_path / "m1", [], shape=(0, 2)), "2 cells and 0 features"),
        "h5 cells": (tmp_path / "no_cells.h5", "0 cells and 3 features"),
        "h5 features": (tmp_path / "no_features.h5", "4 cells and 0 features"),
        "h5ad cells": (tmp_path / "no_cells.h5ad", "0 cells and 3 features"),
        "h5ad features": (tmp_path / "no_features.h5ad", "4 cells and 0 features"),
        "csv": (tmp_path / "header_only.csv", "0 cells and 2 features"),
    }


@pytest.mark.parametrize(
    "kind",
    ["mtx cells", "mtx features", "h5 cells", "h5 features", "h5ad cells", "h5ad features", "csv"],
)
def test_a_source_without_cells_or_features_is_refused(tmp_path: Path, kind: str) -> None:
    """0 cells or 0 features raise naming the shape, and nothing is created."""
    source, found = _empty_sources(tmp_path)[kind]
    with pytest.raises(
        SourceFormatError, match=rf"the matrix has {found}; an import needs at least one"
    ):
        import_data(source, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_a_table_of_one_column_names_the_separator(tmp_path: Path) -> None:
    """A ';'-separated table read at ',' is one column: the error names sep= and --sep, and the likely one."""
    (tmp_path / "t.csv").write_text("cell;A;B\nc1;1;2\nc2;3;4\n")
    with pytest.raises(
        SourceFormatError,
        match=r"check the separator and pass sep= \(--sep on the command line\); the header holds ';': pass sep=';'",
    ):
        import_csv(tmp_path / "t.csv", tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()
    assert import_csv(tmp_path / "t.csv", tmp_path / "ds.zarr", sep=";", **QUIET).shapes == {
        "RNA": (2, 2)
    }


# --- 5. damaged files ----------------------------------------------------------------------


def _truncated_mtx(tmp_path: Path) -> tuple[Path, int]:
    """A folder whose matrix.mtx.gz is cut in half, and the lines that still decompress whole."""
    entries = [f"{i % 50 + 1} {i // 50 + 1} {i % 7 + 1}" for i in range(20_000)]
    folder = write_mtx(tmp_path / "mtx", entries, shape=(50, 400), compress=True)
    data = (folder / "matrix.mtx.gz").read_bytes()
    cut = data[: len(data) // 2]
    (folder / "matrix.mtx.gz").write_bytes(cut)
    return folder, zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")


def test_a_truncated_gzip_matrix_names_the_last_whole_line(tmp_path: Path) -> None:
    """A .mtx.gz cut short raises DamagedSourceError naming the file and the last whole line, not EOFError."""
    folder, lines = _truncated_mtx(tmp_path)
    with pytest.raises(
        DamagedSourceError,
        match=rf"matrix\.mtx\.gz: the compressed data is damaged after line {lines} \(EOFError",
    ):
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_a_gzip_crc_failure_is_a_damaged_source(tmp_path: Path) -> None:
    """A gzip member whose CRC does not match raises DamagedSourceError ("CRC check failed" named)."""
    folder = write_mtx(tmp_path / "mtx", ["1 1 3", "2 2 4"], shape=(2, 2), compress=True)
    data = bytearray((folder / "matrix.mtx.gz").read_bytes())
    data[-8] ^= 0xFF
    (folder / "matrix.mtx.gz").write_bytes(bytes(data))
    with pytest.raises(DamagedSourceError, match="CRC check failed"):
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_a_corrupt_hdf5_chunk_names_file_and_dataset(tmp_path: Path) -> None:
    """An unreadable chunk of /matrix/data raises DamagedSourceError naming the file and the dataset."""
    path = write_h5(tmp_path / "m.h5", counts(300, 50), chunks=500)
    corrupt_chunk(path, "matrix/data", 2)
    with pytest.raises(
        DamagedSourceError,
        match=rf"{re.escape(str(path))}: dataset /matrix/data\[\d+:\d+\] cannot be read",
    ):
        import_10x_h5(path, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_a_corrupt_h5ad_chunk_names_file_and_dataset(tmp_path: Path) -> None:
    """An unreadable chunk of an H5AD's X raises DamagedSourceError naming the dataset."""
    path = tmp_path / "x.h5ad"
    ad.AnnData(
        counts(300, 50).astype(np.float32),
        obs=pd.DataFrame(index=[f"C{i}" for i in range(300)]),
        var=pd.DataFrame(index=[f"G{i}" for i in range(50)]),
    ).write_h5ad(path, compression="gzip")
    with h5py.File(path, "r") as f:
        chunks = f["X/data"].id.get_num_chunks()
    corrupt_chunk(path, "X/data", chunks - 1)
    with pytest.raises(DamagedSourceError, match=r"dataset /X/data\[\d+:\d+\] cannot be read"):
        import_h5ad(path, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_the_cli_prints_damage_as_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc import` of a damaged file exits 1 with `error: DamagedSourceError: ...`, no traceback."""
    folder, _ = _truncated_mtx(tmp_path)
    path = write_h5(tmp_path / "m.h5", counts(300, 50), chunks=500)
    corrupt_chunk(path, "matrix/data", 1)
    for source in (folder, path):
        code = main(
            ["import", str(source), str(tmp_path / "ds.zarr"), "--cluster", "threads", "--json"]
        )
        err = capsys.readouterr().err
        assert code == 1
        assert err.startswith("error: DamagedSourceError: "), err
        assert "Traceback" not in err
    assert not (tmp_path / "ds.zarr").exists()


# --- 6. values that counts do not hold --------------------------------------------------------


def test_negative_counts_warn_and_keep_a_signed_dtype(tmp_path: Path) -> None:
    """Negative values import as a signed dtype with a warning naming the file, how many, and normalize."""
    folder = write_mtx(tmp_path / "mtx", ["1 1 -3", "2 2 4", "2 1 -1"], shape=(2, 2))
    with pytest.warns(
        UserWarning,
        match=r"mtx: assay RNA holds 2 negative values \(the smallest -3\).*normalization",
    ):
        result = import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert np.dtype(result.dtypes["RNA"]).kind == "i"


def test_non_integer_values_of_an_assay_of_counts_name_the_layer(tmp_path: Path) -> None:
    """A log-normalized X imported as RNA warns naming layer= and --layer; its counts layer imports quietly."""
    raw = counts(20, 6)
    adata = ad.AnnData(
        np.log1p(raw.astype(np.float32)),
        obs=pd.DataFrame(index=[f"C{i}" for i in range(20)]),
        var=pd.DataFrame(index=[f"G{i}" for i in range(6)]),
        layers={"counts": raw.astype(np.float32)},
    )
    adata.write_h5ad(tmp_path / "x.h5ad")
    n = int(np.count_nonzero(adata.X.data != np.floor(adata.X.data)))
    with pytest.warns(
        UserWarning,
        match=rf"assay RNA of type RNA holds {n} non-integer values.*layer='counts' \(--layer counts on the command line\) \(this file's layers: \['counts'\]\)",
    ):
        import_h5ad(tmp_path / "x.h5ad", tmp_path / "a.zarr", **QUIET)
    result = import_h5ad(tmp_path / "x.h5ad", tmp_path / "b.zarr", layer="counts", **QUIET)
    assert result.dtypes["RNA"].startswith("uint")


def test_scores_of_a_type_that_is_not_counts_import_quietly(tmp_path: Path) -> None:
    """Non-integer values of a GeneScores assay are no counts to warn about."""
    cells = pd.DataFrame({"ids": ["a", "b"]})
    features = pd.DataFrame({"ids": ["f"], "names": ["F"], "feature_types": ["Scores"]})
    result = SparseToZarr(
        np.array([[0.5], [1.25]]),
        cells=cells,
        features=features,
        zarr_loc=tmp_path / "ds.zarr",
        assay_types={"Scores": "GeneScores"},
        **QUIET,
    ).dump()
    assert result.dtypes == {"Scores": "float64"}


# --- 7. destinations that are URLs -------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["http://host/ds.zarr", "https://host/ds.zarr", "s3:/bucket/ds.zarr"]
)
def test_a_read_only_or_flattened_url_destination_is_refused_before_the_source_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """HTTP is read-only and ``s3:/b`` a URL that lost its '//': refused before the source opens, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("cell;A\n")
    with pytest.raises(
        RemoteDestinationError, match=r"protocol is read-only|pass the URL as a string"
    ):
        import_csv(tmp_path / "t.csv", url, **QUIET)
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_a_memory_url_destination_is_written_there(tmp_path: Path) -> None:
    """An fsspec URL of a writable filesystem is a destination; nothing is written locally."""
    (tmp_path / "t.csv").write_text("cell,A,B\nc1,1,0\nc2,0,2\n")
    result = import_csv(tmp_path / "t.csv", "memory://fail-closed/ds.zarr", **QUIET)
    assert result.path == "memory://fail-closed/ds.zarr"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


# --- 8. files whose structure disagrees with itself -------------------------------------------


@pytest.mark.parametrize("key", ["id", "name", "feature_type", "genome"])
def test_h5_feature_datasets_of_other_lengths_are_refused(tmp_path: Path, key: str) -> None:
    """A 10x v3 .h5 whose per-feature datasets differ in length names the file and every shape."""
    path = write_h5(tmp_path / "m.h5", counts(30, 8))
    with h5py.File(path, "r+") as f:
        features = f["matrix/features"]
        features.create_dataset("genome", data=["GRCh38"] * 8, dtype=h5py.string_dtype())
        values = features[key][:-1]
        del features[key]
        features.create_dataset(key, data=values, dtype=h5py.string_dtype())
    with pytest.raises(SourceFormatError) as info:
        import_10x_h5(path, tmp_path / "ds.zarr", **QUIET)
    message = str(info.value)
    assert message.startswith(f"{path}: /matrix/features: expected its per-feature datasets")
    assert f"{key} (7,)" in message
    assert "(8,)" in message
    assert not (tmp_path / "ds.zarr").exists()


def _h5ad_with_categories(path: Path) -> Path:
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(["T", "B", "NK"] * 10)},
        index=[f"C{i}" for i in range(30)],
    )
    var = pd.DataFrame(index=[f"G{i}" for i in range(8)])
    ad.AnnData(counts(30, 8).astype(np.float32), obs=obs, var=var).write_h5ad(path)
    return path


@pytest.mark.parametrize("lost", ["codes", "categories"])
def test_an_h5ad_categorical_without_codes_or_categories_is_refused(
    tmp_path: Path, lost: str
) -> None:
    """An H5AD categorical column that lost its codes or categories names the file and the dataset."""
    path = _h5ad_with_categories(tmp_path / "x.h5ad")
    with h5py.File(path, "r+") as f:
        del f[f"obs/cell_type/{lost}"]
    with pytest.raises(
        SourceFormatError,
        match=rf"^{re.escape(str(path))}: /obs/cell_type/{lost}: expected the dataset of {lost} "
        r"of an AnnData categorical column, found it missing",
    ):
        import_h5ad(path, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_h5ad_codes_beyond_the_categories_are_refused(tmp_path: Path) -> None:
    """Categorical codes past the end of a shortened categories dataset name the codes and the range."""
    path = _h5ad_with_categories(tmp_path / "x.h5ad")
    with h5py.File(path, "r+") as f:
        column = f["obs/cell_type"]
        kept = column["categories"][:2]
        del column["categories"]
        column.create_dataset("categories", data=kept, dtype=h5py.string_dtype())
    with pytest.raises(
        SourceFormatError,
        match=rf"^{re.escape(str(path))}: /obs/cell_type/codes: categorical codes must lie in "
        r"\[-1, 2\) for the 2 categories of /obs/cell_type/categories, found 0\.\.2",
    ):
        import_h5ad(path, tmp_path / "ds.zarr", **QUIET)
    assert not (tmp_path / "ds.zarr").exists()


def test_repeated_h5ad_categories_are_refused(tmp_path: Path) -> None:
    """A categories dataset that repeats a category names the dataset."""
    path = _h5ad_with_categories(tmp_path / "x.h5ad")
    with h5py.File(path, "r+") as f:
        column = f["obs/cell_type"]
        size = column["categories"].shape[0]
        del column["categories"]
        column.create_dataset("categories", data=["T"] * size, dtype=h5py.string_dtype())
    with pytest.raises(
        SourceFormatError,
        match=rf"^{re.escape(str(path))}: /obs/cell_type/categories: expected distinct",
    ):
        import_h5ad(path, tmp_path / "ds.zarr", **QUIET)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_features_line_with_a_field_missing_is_refused(tmp_path: Path, *, compress: bool) -> None:
    """A features.tsv line without its feature type names the file, the line, expected and found."""
    folder = write_mtx(tmp_path / "mtx", ["1 1 2"], shape=(3, 2))
    lines = (folder / "features.tsv").read_text().splitlines(keepends=True)
    lines[1] = "G1\tg1\n"
    text = "".join(lines)
    (folder / "features.tsv").unlink()
    features = folder / ("features.tsv.gz" if compress else "features.tsv")
    if compress:
        features.write_bytes(gzip.compress(text.encode()))
    else:
        features.write_text(text)
    with pytest.raises(SourceFormatError) as info:
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert str(info.value).startswith(
        f"{features}: line 2: expected 3 tab-separated fields as on the first line, found 2"
    )
    assert not (tmp_path / "ds.zarr").exists()


def test_a_features_line_with_a_field_more_is_refused(tmp_path: Path) -> None:
    """A v2 features.tsv line with a third field names the file, the line, expected and found."""
    folder = write_mtx(tmp_path / "mtx", ["1 1 2"], shape=(3, 2))
    (folder / "features.tsv").write_text("G0\tg0\nG1\tg1\nG2\tg2\tGene Expression\n")
    with pytest.raises(SourceFormatError, match=r"line 3, saw 3") as info:
        import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert str(folder / "features.tsv") in str(info.value)
    assert not (tmp_path / "ds.zarr").exists()


def test_a_v2_features_file_of_two_fields_imports(tmp_path: Path) -> None:
    """A features.tsv with id and name on every line (10x v2) imports as Gene Expression."""
    folder = write_mtx(tmp_path / "mtx", ["1 1 2"], shape=(3, 2))
    (folder / "features.tsv").write_text("G0\tg0\nG1\tg1\nG2\tg2\n")
    ds = import_10x_mtx(folder, tmp_path / "ds.zarr", **QUIET)
    assert ds.shapes == {"RNA": (2, 3)}
