"""The lowess port against R's ``stats::lowess`` and, as a second reference, statsmodels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from statsmodels.nonparametric.smoothers_lowess import lowess as statsmodels_lowess

from cytepool.de.lmfit import lm_fit
from cytepool.de.lowess import r_lowess
from cytepool.de.testing import max_relative_difference

if TYPE_CHECKING:
    from conftest import Scenario

LOWESS_CASES = Path(__file__).resolve().parent / "data" / "r" / "lowess"


def _voom_points(scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """The points (sx, sy) of voom, recomputed from R's E, design and library sizes."""
    expression = scenario.r("E", index_col=0).to_numpy()
    design = scenario.r("design", index_col=0).to_numpy(dtype=np.float64)
    lib = scenario.r("libsizes", index_col=0)["voom.lib.size"].to_numpy()
    fit = lm_fit(expression, design)
    sx = fit.amean + np.mean(np.log2(lib + 1.0)) - np.log2(1e6)
    sy = np.sqrt(fit.sigma)
    nonzero = scenario.counts().sum(axis=1).to_numpy() != 0
    return sx[nonzero], sy[nonzero]


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_matches_r_lowess(case: int) -> None:
    """Five point sets (5 to 3001 points, ties, outliers, spans 0.1 to 2/3) give R's fit to 1e-14."""
    data = pd.read_csv(LOWESS_CASES / f"case{case}.csv", float_precision="round_trip")
    xs, fitted = r_lowess(data["x"].to_numpy(), data["y"].to_numpy(), f=float(data["f"].iloc[0]))
    np.testing.assert_array_equal(xs, data["x_sorted"].to_numpy())
    assert max_relative_difference(fitted, data["fitted"]) <= 1e-14


def test_matches_voom_trend(full_scenario: Scenario) -> None:
    """On voom's mean-variance points the port gives R's voom.line to 1e-12."""
    sx, sy = _voom_points(full_scenario)
    xs, fitted = r_lowess(sx, sy, f=0.5)
    trend = full_scenario.r("voom_trend")
    assert max_relative_difference(xs, trend["x"]) <= 1e-12
    assert max_relative_difference(fitted, trend["y"]) <= 1e-12


def test_close_to_statsmodels_on_voom_trend(full_scenario: Scenario) -> None:
    """The lowess of statsmodels (same span, iterations and delta) agrees to 1e-8 on voom's points."""
    sx, sy = _voom_points(full_scenario)
    xs, fitted = r_lowess(sx, sy, f=0.5)
    delta = 0.01 * float(sx.max() - sx.min())
    reference = statsmodels_lowess(sy, sx, frac=0.5, it=3, delta=delta)
    np.testing.assert_array_equal(xs, reference[:, 0])
    assert max_relative_difference(fitted, reference[:, 1]) <= 1e-8


def test_straight_line_is_kept() -> None:
    """A straight line is its own smooth."""
    x = np.linspace(-3.0, 5.0, 101)
    _, fitted = r_lowess(x, 0.5 * x - 2.0, f=0.3)
    np.testing.assert_allclose(fitted, 0.5 * x - 2.0, rtol=0, atol=1e-12)


def test_small_and_degenerate_inputs() -> None:
    """One point, two points, all-tied x and constant y run without warnings, as R's C code does."""
    assert r_lowess(np.array([1.0]), np.array([2.0]))[1].tolist() == [2.0]
    np.testing.assert_allclose(r_lowess(np.array([0.0, 1.0]), np.array([1.0, 3.0]))[1], [1.0, 3.0])
    tied = r_lowess(np.full(6, 2.0), np.arange(6.0), f=0.5)[1]
    np.testing.assert_allclose(tied, np.full(6, tied[0]))
    flat = r_lowess(np.arange(10.0), np.full(10, 4.0))[1]
    np.testing.assert_allclose(flat, 4.0)


def test_unsorted_input_is_sorted_stably() -> None:
    """The x values come back sorted and the fit is that of the sorted points."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=300).round(1)
    y = np.sin(x) + rng.normal(size=300) * 0.1
    order = np.argsort(x, kind="stable")
    xs, fitted = r_lowess(x, y, f=0.4)
    xs2, fitted2 = r_lowess(x[order], y[order], f=0.4)
    np.testing.assert_array_equal(xs, xs2)
    np.testing.assert_array_equal(fitted, fitted2)


def test_rejects_bad_input() -> None:
    """NaN and mismatched shapes are refused with a message."""
    with pytest.raises(ValueError, match="finite"):
        r_lowess(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="one length"):
        r_lowess(np.arange(3.0), np.arange(4.0))


def test_frame_input() -> None:
    """Series are accepted like arrays."""
    x = pd.Series(np.arange(20.0))
    assert r_lowess(x.to_numpy(), (x**2).to_numpy())[1].shape == (20,)
