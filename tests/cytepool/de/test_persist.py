"""Saving and reading results: CSV with a JSON sidecar, Parquet, directories of group results."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytepool.de import LimmaResult, LimmaResults, limma_voom, limma_voom_result
from cytepool.errors import ResultFormatError

if TYPE_CHECKING:
    from pathlib import Path

    from cytepool import Cube

DESIGN = "~ donor + condition"


def _assert_round_trip(back: LimmaResult, result: LimmaResult) -> None:
    """Table and metadata identical; voom's matrices are not saved."""
    pd.testing.assert_frame_equal(back.table, result.table, check_exact=True)
    pd.testing.assert_frame_equal(back.design, result.design, check_exact=True)
    pd.testing.assert_series_equal(back.lib_size, result.lib_size, check_exact=True)
    pd.testing.assert_series_equal(back.norm_factors, result.norm_factors, check_exact=True)
    pd.testing.assert_series_equal(back.kept, result.kept, check_exact=True)
    assert back.prior == result.prior
    assert back.settings == result.settings
    assert back.cube == result.cube
    assert back.weights is None
    assert back.E is None


@pytest.fixture(scope="module")
def cube_result(pb_cube: Cube) -> LimmaResult:
    return limma_voom(pb_cube, group="T2", design=DESIGN)


@pytest.fixture(scope="module")
def matrix_result() -> LimmaResult:
    """A result with integer gene labels, an unnamed gene index and a filtered gene."""
    rng = np.random.default_rng(4)
    counts = pd.DataFrame(rng.poisson(60, (80, 6)), columns=[f"s{i}" for i in range(6)])
    counts.iloc[3] = 0
    samples = pd.DataFrame({"c": ["a", "b"] * 3}, index=counts.columns)
    return limma_voom_result(
        counts, samples, design="~ c", filter_by_expr=True, normalization="none"
    )


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cube_result_round_trips(cube_result: LimmaResult, tmp_path: Path, suffix: str) -> None:
    """A cube result keeps its table, fingerprint, digests, provenance and settings exactly."""
    path = tmp_path / f"result{suffix}"
    (cube_result.to_csv if suffix == ".csv" else cube_result.to_parquet)(path)
    back = LimmaResult.read(path)
    _assert_round_trip(back, cube_result)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_matrix_result_round_trips(matrix_result: LimmaResult, tmp_path: Path, suffix: str) -> None:
    """Integer gene labels, an unnamed index and the removed genes come back as they were."""
    assert not matrix_result.kept.all()
    path = tmp_path / f"result{suffix}"
    (matrix_result.to_csv if suffix == ".csv" else matrix_result.to_parquet)(path)
    back = LimmaResult.read(path)
    _assert_round_trip(back, matrix_result)
    assert back.table.index.dtype == np.int64


def test_read_result_verifies_against_its_cube(
    cube_result: LimmaResult, pb_cube: Cube, tmp_path: Path
) -> None:
    """The fingerprint read back still verifies."""
    cube_result.to_parquet(tmp_path / "r.parquet")
    LimmaResult.read(tmp_path / "r.parquet").verify(pb_cube)


def test_csv_sidecar_is_plain_json(cube_result: LimmaResult, tmp_path: Path) -> None:
    """The CSV's metadata is a readable JSON file beside it, with the format stamped."""
    cube_result.to_csv(tmp_path / "r.csv")
    meta = json.loads((tmp_path / "r.csv.json").read_text())
    assert meta["format"] == "cytepool.de.limma_result"
    assert meta["format_version"] == 1
    assert meta["cube"]["group"] == "T2"
    assert pd.read_csv(tmp_path / "r.csv").columns[0] == "gene"


def test_unreadable_files_say_why(cube_result: LimmaResult, tmp_path: Path) -> None:
    """A missing sidecar, a newer format version and a foreign Parquet file are named errors."""
    cube_result.to_csv(tmp_path / "r.csv")
    (tmp_path / "r.csv.json").rename(tmp_path / "elsewhere.json")
    with pytest.raises(ResultFormatError, match=r"sidecar r\.csv\.json is missing"):
        LimmaResult.read(tmp_path / "r.csv")
    meta = json.loads((tmp_path / "elsewhere.json").read_text())
    meta["format_version"] = 99
    (tmp_path / "r.csv.json").write_text(json.dumps(meta))
    with pytest.raises(ResultFormatError, match="version 99"):
        LimmaResult.read(tmp_path / "r.csv")
    cube_result.table.to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(ResultFormatError, match="not a limma result"):
        LimmaResult.read(tmp_path / "plain.parquet")
    with pytest.raises(ResultFormatError, match="no such file"):
        LimmaResult.read(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    ("key", "edit", "message"),
    [
        ("prior", lambda prior: prior.pop("s2_prior"), "expected numbers df_prior"),
        ("cube", lambda cube: cube.pop("digests"), "expected fingerprint, digests"),
    ],
)
def test_edited_sidecar_entries_are_named(
    cube_result: LimmaResult, tmp_path: Path, key: str, edit: object, message: str
) -> None:
    """A prior or cube record missing a field raises ResultFormatError, not a KeyError."""
    cube_result.to_csv(tmp_path / "r.csv")
    meta = json.loads((tmp_path / "r.csv.json").read_text())
    edit(meta[key])  # type: ignore[operator]
    (tmp_path / "r.csv.json").write_text(json.dumps(meta))
    with pytest.raises(ResultFormatError, match=message):
        LimmaResult.read(tmp_path / "r.csv")


def test_parquet_without_pyarrow_says_how_to_install(
    cube_result: LimmaResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pyarrow, Parquet fails with an ImportError naming `pip install pyarrow`."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match="pip install pyarrow"):
        cube_result.to_parquet(tmp_path / "r.parquet")


@pytest.fixture(scope="module")
def group_results(pb_cube: Cube) -> LimmaResults:
    from cytepool import Cube  # noqa: PLC0415

    n_cells = pb_cube.n_cells
    assert n_cells is not None
    n_cells[:6, 1] = 0  # group T1 is left with 2 samples: skipped
    cube = Cube(
        samples=pb_cube.samples,
        groups=pb_cube.groups,
        features=pb_cube.features,
        layers=dict(pb_cube.layers),
        n_cells=n_cells,
    )
    return limma_voom(cube, design=DESIGN)


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_group_results_round_trip_as_a_directory(
    group_results: LimmaResults, tmp_path: Path, file_format: str
) -> None:
    """Every group result, the skipped groups with reasons and the settings come back."""
    assert list(group_results.skipped) == ["T1"]
    group_results.save(tmp_path / "de", file_format=file_format)  # type: ignore[arg-type]
    back = LimmaResults.read(tmp_path / "de")
    assert list(back) == list(group_results)
    assert back.skipped == group_results.skipped
    assert back.settings == group_results.settings
    for label in group_results:
        _assert_round_trip(back[label], group_results[label])
    pd.testing.assert_frame_equal(back.table(), group_results.table(), check_exact=True)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        group_results.save(tmp_path / "de", file_format=file_format)  # type: ignore[arg-type]
    group_results.save(tmp_path / "de", file_format=file_format, overwrite=True)  # type: ignore[arg-type]


def test_table_stacks_the_groups(group_results: LimmaResults) -> None:
    """table() stacks the group tables with a first column 'group'."""
    table = group_results.table()
    assert list(table.columns) == ["group", "logFC", "AveExpr", "t", "P.Value", "adj.P.Val", "B"]
    assert table["group"].unique().tolist() == ["T0", "T2"]
    assert len(table) == sum(len(r.table) for r in group_results.values())
    assert "2 groups, 1 skipped" in repr(group_results)


def test_index_names_round_trip(tmp_path: Path) -> None:
    """Differently named sample axes (counts columns, sample table index) are kept apart."""
    counts = pd.DataFrame(np.random.default_rng(1).poisson(40, (30, 4)), columns=list("abcd"))
    counts.index.name = "feature"
    samples = pd.DataFrame({"c": ["x", "x", "y", "y"]}, index=pd.Index(list("abcd"), name="id"))
    result = limma_voom_result(counts, samples, design="~ c")
    result.to_csv(tmp_path / "r.csv")
    _assert_round_trip(LimmaResult.read(tmp_path / "r.csv"), result)


def _hidden_siblings(directory: Path) -> list[Path]:
    return sorted(directory.parent.glob(f".{directory.name}.tmp-*"))


def test_overwrite_replaces_the_whole_result_directory(
    group_results: LimmaResults, tmp_path: Path
) -> None:
    """Saving with overwrite=True leaves only the new results: no table of the earlier save remains."""
    out = tmp_path / "de"
    group_results.save(out, file_format="csv")
    (out / "notes.txt").write_text("written beside the results\n")
    one = LimmaResults(
        results={"T2": group_results["T2"]}, skipped={}, settings=group_results.settings
    )
    one.save(out, file_format="parquet", overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["group-0000.parquet", "results.json"]
    assert list(LimmaResults.read(out)) == ["T2"]
    assert _hidden_siblings(out) == []


def test_a_failed_overwrite_keeps_the_old_results(
    group_results: LimmaResults, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that fails midway leaves the earlier results byte for byte and no hidden sibling."""
    from cytepool.de import persist  # noqa: PLC0415
    from cytepool.testing import tree_snapshot  # noqa: PLC0415

    out = tmp_path / "de"
    group_results.save(out, file_format="csv")
    before = tree_snapshot(tmp_path)
    calls = []

    def fail_on_second(result: LimmaResult, path: Path) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(path))
        persist.write_csv(result, path)

    monkeypatch.setattr(persist, "write_csv", fail_on_second)
    reordered = LimmaResults(
        results={g: group_results[g] for g in reversed(list(group_results))},
        settings=group_results.settings,
    )
    with pytest.raises(OSError, match="No space left"):
        reordered.save(out, file_format="csv", overwrite=True)
    assert len(calls) == 2
    assert tree_snapshot(tmp_path) == before


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", ["directory-with-a-file", "file", "foreign-results-json"])
def test_a_directory_that_is_not_results_is_never_replaced(
    group_results: LimmaResults, tmp_path: Path, kind: str, overwrite: bool
) -> None:
    """A folder without a cytepool results manifest (or a file) is refused, even with overwrite, and untouched."""
    from cytepool.errors import ResultExistsError  # noqa: PLC0415
    from cytepool.testing import tree_snapshot  # noqa: PLC0415

    out = tmp_path / "de"
    if kind == "file":
        out.write_text("not results\n")
    else:
        out.mkdir()
        name = "results.json" if kind == "foreign-results-json" else "thesis.tex"
        (out / name).write_text('{"format": "something-else"}\n')
    before = tree_snapshot(tmp_path)
    with pytest.raises(ResultExistsError) as info:
        group_results.save(out, file_format="csv", overwrite=overwrite)
    assert str(info.value) == (
        f"{out}: expected a directory of limma results written by cytepool (with a results.json "
        f"of format 'cytepool.de.limma_results') or none, found a {'file' if kind == 'file' else 'directory'} "
        "without one; nothing was replaced - choose another directory or remove it"
    )
    assert tree_snapshot(tmp_path) == before


def test_an_empty_directory_is_filled(group_results: LimmaResults, tmp_path: Path) -> None:
    """An existing empty directory (made with mkdir beforehand) takes the results."""
    out = tmp_path / "de"
    out.mkdir()
    group_results.save(out, file_format="csv")
    assert list(LimmaResults.read(out)) == list(group_results)
    assert _hidden_siblings(out) == []
