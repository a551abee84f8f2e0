"""CSV reader: dense tables in either orientation, parsed in chunks and bucketed by band of cells."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytearc.errors import SourceFormatError
from cytearc.io import csv as csv_module
from cytearc.io.csv import CsvSource
from cytearc.io.sources import CountSource
from cytearc.testing import assemble_bands

if TYPE_CHECKING:
    from pathlib import Path

BAND_SIZES = (1, 7, 100, None)


def table(n_cells: int = 130, n_genes: int = 17, *, seed: int = 0) -> pd.DataFrame:
    """Sparse-ish integer counts, cells x genes, with string ids that look like numbers too."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(1.5, (n_cells, n_genes)) * (rng.random((n_cells, n_genes)) < 0.3)
    counts[n_cells // 3] = 0
    return pd.DataFrame(
        counts,
        index=pd.Index([f"{i:04d}" for i in range(n_cells)], name="cell"),
        columns=[f"GENE{j}" for j in range(n_genes)],
    )


@pytest.mark.parametrize("compression", ["", ".gz"])
def test_cells_x_features_reads_every_band(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    """Rows as cells: bands of 1, 7, 100 and all cells equal the table, with ids kept as strings."""
    monkeypatch.setattr(csv_module, "CHUNK_VALUES", 200)
    counts = table()
    path = tmp_path / f"counts.csv{compression}"
    counts.to_csv(path)
    with CsvSource(path, band_rows=16) as source:
        assert isinstance(source, CountSource)
        assert source.shape == counts.shape
        assert source.dtype == np.int64
        for rows in BAND_SIZES:
            band = assemble_bands(source, rows)
            assert band.dtype == np.int64
            np.testing.assert_array_equal(band.toarray(), counts.to_numpy())
        assert source.cells["ids"].tolist() == counts.index.tolist()
        assert source.features["ids"].tolist() == counts.columns.tolist()
        assert source.features["names"].tolist() == counts.columns.tolist()
        assert set(source.features["feature_types"]) == {"Gene Expression"}


def test_features_x_cells_is_transposed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows as features (tab-separated): cells come from the header and bands are transposed rows."""
    monkeypatch.setattr(csv_module, "CHUNK_VALUES", 500)
    counts = table()
    path = tmp_path / "genes_by_cells.tsv"
    counts.T.to_csv(path, sep="\t")
    with CsvSource(path, orientation="features_x_cells", sep="\t", band_rows=32) as source:
        assert source.shape == counts.shape
        for rows in BAND_SIZES:
            np.testing.assert_array_equal(assemble_bands(source, rows).toarray(), counts.to_numpy())
        assert source.cells["ids"].tolist() == counts.index.tolist()
        assert source.features["ids"].tolist() == counts.columns.tolist()


def test_float_values_make_a_float64_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A float in any chunk makes the source float64 and every band float64, parsed exactly."""
    monkeypatch.setattr(csv_module, "CHUNK_VALUES", 100)
    counts = table().astype(np.float64)
    counts.iloc[120, 3] = 0.1 + 0.2
    counts.iloc[121, 4] = 1 / 3
    path = tmp_path / "float.csv"
    counts.to_csv(path)
    with CsvSource(path, band_rows=50) as source:
        assert source.dtype == np.float64
        for rows in (1, None):
            band = assemble_bands(source, rows)
            assert band.dtype == np.float64
            np.testing.assert_array_equal(band.toarray(), counts.to_numpy())


def test_index_col_chooses_the_id_column(tmp_path: Path) -> None:
    """index_col=1 takes ids from the second column; the first becomes a feature."""
    path = tmp_path / "second.csv"
    path.write_text("a,id,b\n1,c1,0\n0,c2,3\n")
    with CsvSource(path, index_col=1) as source:
        assert source.cells["ids"].tolist() == ["c1", "c2"]
        assert source.features["ids"].tolist() == ["a", "b"]
        np.testing.assert_array_equal(assemble_bands(source, 1).toarray(), [[1, 0], [0, 3]])


@pytest.mark.parametrize(
    ("value", "shown"), [("x", "'x'"), ("", "''"), ("nan", "'nan'"), ("inf", "'inf'")]
)
def test_a_non_number_names_file_row_and_column(tmp_path: Path, value: str, shown: str) -> None:
    """Text, an empty field, nan or inf raises naming the file, line, row id and column id."""
    counts = table(n_cells=20).astype(object)
    counts.iloc[13, 5] = value
    path = tmp_path / "bad.csv"
    counts.to_csv(path)
    pattern = rf"bad\.csv: line 15, row '0013', column 'GENE5' holds {shown}, not a finite number"
    with pytest.raises(SourceFormatError, match=pattern):
        CsvSource(path)


def test_a_bad_cell_in_features_x_cells_is_named(tmp_path: Path) -> None:
    """In features x cells, the row named is the feature and the column the cell."""
    path = tmp_path / "bad_t.csv"
    path.write_text("gene,c1,c2\nG1,1,2\nG2,3,oops\n")
    with pytest.raises(SourceFormatError, match=r"line 3, row 'G2', column 'c2' holds 'oops'"):
        CsvSource(path, orientation="features_x_cells")


def test_rows_longer_than_the_header_are_refused(tmp_path: Path) -> None:
    """A row with more fields than the header raises SourceFormatError naming the file."""
    path = tmp_path / "ragged.csv"
    path.write_text("id,a,b\nc1,1,2\nc2,1,2,3\n")
    with pytest.raises(SourceFormatError, match=r"ragged\.csv: a row does not have the 3 fields"):
        CsvSource(path)


def test_repeated_cell_ids_are_refused(tmp_path: Path) -> None:
    """Cell ids must be unique: a repeated row id (or header id, transposed) raises naming it."""
    path = tmp_path / "twice.csv"
    path.write_text("id,a\nc1,1\nc1,2\n")
    with pytest.raises(SourceFormatError, match="cell id 'c1' appears more than once"):
        CsvSource(path)


def test_missing_file_and_bad_orientation(tmp_path: Path) -> None:
    """A missing file raises SourceFormatError; an unknown orientation raises ValueError."""
    with pytest.raises(SourceFormatError, match="no such file"):
        CsvSource(tmp_path / "absent.csv")
    (tmp_path / "ok.csv").write_text("id,a\nc1,1\n")
    with pytest.raises(ValueError, match="orientation"):
        CsvSource(tmp_path / "ok.csv", orientation="sideways")  # type: ignore[arg-type]


def test_close_removes_the_buckets(tmp_path: Path) -> None:
    """The buckets exist from opening until close, which removes their directory."""
    path = tmp_path / "close.csv"
    table(n_cells=10).to_csv(path)
    with CsvSource(path, band_rows=4) as source:
        directory = source._buckets.directory
        assert len(list(directory.iterdir())) == 3
    assert not directory.exists()
    with pytest.raises(ValueError, match="closed"):
        source.read_band(0, 1)
