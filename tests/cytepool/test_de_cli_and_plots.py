"""``cytepool de`` and the volcano, MA and voom-trend plots, on the demo cube."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cytepool import Cube, limma_voom, write_cube
from cytepool.cli import main
from cytepool.cube.demo import demo_cube
from cytepool.de import LimmaResult, LimmaResults
from cytepool.errors import ContrastFormatError, ResultFormatError
from cytepool.plots import ma_plot, volcano, voom_trend

if TYPE_CHECKING:
    from pathlib import Path

DESIGN = "~ donor + condition"


@pytest.fixture(scope="module")
def cube_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("de") / "demo.cube.zarr"
    write_cube(demo_cube(n_features=300), path)
    return path


@pytest.fixture(scope="module")
def result() -> LimmaResult:
    return limma_voom(demo_cube(n_features=300), group="B", design=DESIGN, min_counts=100)


@pytest.mark.slow
def test_cli_de_writes_results_that_read_back(
    cube_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytepool de --json --plots` writes every group's table and figures; they read back."""
    out = tmp_path / "results"
    args = ["de", str(cube_path), "--design", DESIGN, "--min-counts", "100", "-o", str(out)]
    assert main([*args, "--plots", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary["groups"]) == {"CD4 T", "CD8 T", "B", "NK"}
    assert len(summary["figures"]) == 12
    saved = LimmaResults.read(out)
    direct = limma_voom(demo_cube(n_features=300), design=DESIGN, min_counts=100)
    for group in direct:
        np.testing.assert_allclose(
            saved[group].table.to_numpy(), direct[group].table.to_numpy(), rtol=1e-12
        )
        assert saved[group].cube is not None
        assert saved[group].cube.fingerprint == summary["fingerprint"]


def test_cli_de_one_group_and_errors(
    cube_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--group narrows the test; an unknown group or design exits 1 naming it; no cube exits 3."""
    base = ["de", str(cube_path), "--min-counts", "100", "-o"]
    assert main([*base, str(tmp_path / "a"), "--design", DESIGN, "--group", "NK"]) == 0
    assert "NK: " in capsys.readouterr().out
    assert main([*base, str(tmp_path / "b"), "--design", DESIGN, "--group", "Z"]) == 1
    assert "no group ['Z']" in capsys.readouterr().err
    assert main([*base, str(tmp_path / "c"), "--design", "~ batch"]) == 1
    assert "batch" in capsys.readouterr().err
    missing = ["de", str(tmp_path / "none.cube.zarr"), "--design", DESIGN, "-o", str(tmp_path)]
    assert main(missing) == 3


def _write_variant(
    path: Path, *, batch_as_donor: bool = False, empty_group: int | None = None
) -> Path:
    """The demo cube with a sample column ``batch`` repeating ``donor``, or one group without cells."""
    cube = demo_cube(n_features=300)
    samples = cube.samples
    if batch_as_donor:
        samples = samples.assign(batch=samples["donor"].str.replace("D", "B"))
    n_cells = cube.n_cells
    assert n_cells is not None
    if empty_group is not None:
        n_cells = n_cells.copy()
        n_cells[:, empty_group] = 0
    variant = Cube(
        samples=samples,
        groups=cube.groups,
        features=cube.features,
        layers={"counts": np.asarray(cube.layers["counts"])},
        n_cells=n_cells,
        source={"tool": "tests"},
    )
    return write_cube(variant, path)


def test_cli_de_exits_1_when_no_group_is_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rank-deficient design in every group exits 1 naming each group and why; nothing is written."""
    path = _write_variant(tmp_path / "batch.cube.zarr", batch_as_donor=True)
    out = tmp_path / "out"
    args = ["de", str(path), "--design", "~ donor + batch + condition", "--min-counts", "100"]
    for extra in ([], ["--group", "B", "--group", "NK"]):
        assert main([*args, *extra, "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(
            "error: NoGroupFittedError: no group of the cube could be fitted with design "
            "'~ donor + batch + condition': "
        )
        groups = ["B", "NK"] if extra else ["CD4 T", "CD8 T", "B", "NK"]
        for group in groups:
            assert f"'{group}': 6 of 6 samples left" in err
        assert err.count("rank") == len(groups)
        assert not out.exists()


def test_cli_de_exits_0_when_some_groups_are_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group without usable samples is reported as skipped while the others are tested: exit 0."""
    path = _write_variant(tmp_path / "empty.cube.zarr", empty_group=0)
    out = tmp_path / "out"
    args = ["de", str(path), "--design", DESIGN, "--min-counts", "100", "-o", str(out), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert list(summary["groups"]) == ["CD8 T", "B", "NK"]
    assert list(summary["skipped"]) == ["CD4 T"]
    assert summary["skipped"]["CD4 T"].startswith("0 of 6 samples left")
    assert LimmaResults.read(out).skipped == {"CD4 T": summary["skipped"]["CD4 T"]}


def test_cli_de_refuses_to_test_the_intercept_by_default(
    cube_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--design "~ 1"` without --coef exits 1 naming the design's columns; --coef "(Intercept)" tests it."""
    base = ["de", str(cube_path), "--design", "~ 1", "--min-counts", "100", "--group", "B", "-o"]
    assert main([*base, str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert "error: DesignError: coef: the coefficient to test would be '(Intercept)'" in err
    assert "the design's columns are ['(Intercept)']" in err
    assert "--coef NAME" in err
    assert not (tmp_path / "a").exists()
    assert main([*base, str(tmp_path / "b"), "--coef", "(Intercept)"]) == 0


def test_cli_de_overwrite_replaces_the_whole_output(
    cube_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--overwrite leaves only the new run's tables; a folder that is not a result folder is refused."""
    out = tmp_path / "out"
    base = ["de", str(cube_path), "--min-counts", "100", "-o", str(out)]
    assert main([*base, "--design", DESIGN]) == 0
    assert main([*base, "--design", DESIGN]) == 1
    assert "pass overwrite=True" in capsys.readouterr().err
    assert main([*base, "--design", "~ condition", "--group", "NK", "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "group-0000.csv",
        "group-0000.csv.json",
        "results.json",
    ]
    saved = LimmaResults.read(out)
    assert list(saved) == ["NK"]
    assert saved.settings["design"] == "~ condition"
    assert list(tmp_path.glob(".out.tmp-*")) == []
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "draft.txt").write_text("mine\n")
    capsys.readouterr()
    args = ["de", str(cube_path), "--design", DESIGN, "--min-counts", "100", "-o", str(notes)]
    assert main([*args, "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert f"error: ResultExistsError: {notes}: expected a directory of limma results" in err
    assert sorted(p.name for p in notes.iterdir()) == ["draft.txt"]


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ('{"conditionstim": 1', "invalid JSON at line 1, column 20 (Expecting ',' delimiter)"),
        ('{"conditionstim": "x"}', "the weight of 'conditionstim' is \"x\", not a number"),
        ('[1, "a"]', 'item 1 is "a", not a number'),
        ("{}", "no weights ({})"),
        (
            '["conditionstim", "conditionctrl"]',
            "a list of 2 expressions; cytepool de tests one contrast per run",
        ),
    ],
)
def test_cli_de_bad_contrast_json_is_one_named_error(
    cube_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, found: str
) -> None:
    """--contrast with bad JSON exits 1 with a ContrastFormatError naming the option, the place and an example."""
    args = ["de", str(cube_path), "--design", "~ 0 + condition", "--contrast", value]
    assert main([*args, "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: ContrastFormatError: --contrast {value!r}: expected JSON weights of design "
        f"columns such as '{{\"conditionstim\": 1, \"conditionctrl\": -1}}' or '[0, 1, -1]', or an R "
        f"expression such as 'conditionstim-conditionctrl'; found {found}\n"
    )
    with pytest.raises(ContrastFormatError):
        main([*args, "-o", str(tmp_path / "out"), "--debug"])


def test_plots_draw_the_result(result: LimmaResult) -> None:
    """The volcano and MA plots place every gene; the trend plot draws voom's points and line."""
    fig = volcano(result)
    ax = fig.axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(result.table)
    assert "conditionstim" in ax.get_title()
    ma = ma_plot(result).axes[0]
    offsets = np.concatenate([c.get_offsets() for c in ma.collections])
    assert sorted(offsets[:, 0]) == pytest.approx(sorted(result.table["AveExpr"]))
    trend = voom_trend(result).axes[0]
    assert result.voom_trend is not None
    assert len(trend.collections[0].get_offsets()) == len(result.voom_trend.points)
    np.testing.assert_allclose(trend.lines[0].get_xdata(), result.voom_trend.line["x"])


def test_voom_trend_needs_the_fit(result: LimmaResult, tmp_path: Path) -> None:
    """A result read back from a file keeps no trend; the plot says so."""
    result.to_csv(tmp_path / "b.csv")
    with pytest.raises(ResultFormatError, match=r"found none \(results read from a file"):
        voom_trend(LimmaResult.read(tmp_path / "b.csv"))
