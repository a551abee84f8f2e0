"""``cytepool de`` and the volcano, MA and voom-trend plots, on the demo cube."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cytepool import limma_voom, write_cube
from cytepool.cli import main
from cytepool.cube.demo import demo_cube
from cytepool.de import LimmaResult, LimmaResults
from cytepool.errors import ResultFormatError
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
