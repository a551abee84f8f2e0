"""Parity with R (limma 3.54.1, edgeR 3.40.2) on every fixture scenario, quantity by quantity."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytepool.de import LimmaResult, limma_voom_result
from cytepool.de.ebayes import ebayes
from cytepool.de.lmfit import contrasts_fit, lm_fit
from cytepool.de.testing import max_relative_difference
from cytepool.de.toptable import top_table

if TYPE_CHECKING:
    from conftest import Scenario

RTOL = 1e-8
"""The brief's bound; most quantities agree to about 1e-13 (see test_parity_is_tight)."""

TABLE = ["logFC", "AveExpr", "t", "P.Value", "adj.P.Val", "B"]


_RESULTS: dict[str, LimmaResult] = {}


def _run(scenario: Scenario) -> LimmaResult:
    """The result of a scenario, computed once per session."""
    if scenario.name not in _RESULTS:
        counts, samples = scenario.counts(), scenario.samples()
        _RESULTS[scenario.name] = limma_voom_result(counts, samples, **scenario.kwargs)
    return _RESULTS[scenario.name]


@pytest.fixture
def fitted(scenario: Scenario) -> tuple[Scenario, LimmaResult]:
    return scenario, _run(scenario)


@pytest.fixture
def full_fitted(full_scenario: Scenario) -> tuple[Scenario, LimmaResult]:
    return full_scenario, _run(full_scenario)


def test_filter_keeps_what_r_keeps(fitted: tuple[Scenario, LimmaResult]) -> None:
    """The filter (filterByExpr) keeps exactly R's genes."""
    scenario, result = fitted
    keep = scenario.r("keep", index_col=0)["keep"]
    assert result.kept.index.equals(keep.index)
    np.testing.assert_array_equal(result.kept.to_numpy(), keep.to_numpy())
    assert result.table.index.equals(keep.index[keep.to_numpy()])


def test_design_is_r_model_matrix(fitted: tuple[Scenario, LimmaResult]) -> None:
    """The formula gives R's model.matrix: column names, order and values."""
    scenario, result = fitted
    design = scenario.r("design", index_col=0)
    assert list(result.design.columns) == list(design.columns)
    assert list(result.design.index) == list(design.index)
    np.testing.assert_array_equal(result.design.to_numpy(), design.to_numpy())


def test_library_sizes_and_tmm_factors(fitted: tuple[Scenario, LimmaResult]) -> None:
    """Library sizes (recomputed from kept genes) and TMM factors match libsizes.csv."""
    scenario, result = fitted
    lib = scenario.r("libsizes", index_col=0)
    np.testing.assert_array_equal(result.lib_size.to_numpy(), lib["lib.size"].to_numpy())
    assert max_relative_difference(result.norm_factors, lib["norm.factors"]) <= RTOL
    effective = result.lib_size * result.norm_factors
    assert max_relative_difference(effective, lib["eff.lib.size"]) <= RTOL
    assert max_relative_difference(effective, lib["voom.lib.size"]) <= RTOL


def test_voom_trend(fitted: tuple[Scenario, LimmaResult]) -> None:
    """The lowess line of voom (x, y) matches R's voom.line."""
    scenario, result = fitted
    trend = scenario.r("voom_trend")
    assert result.voom_trend is not None
    line = result.voom_trend.line
    assert max_relative_difference(line["x"], trend["x"]) <= RTOL
    assert max_relative_difference(line["y"], trend["y"]) <= RTOL
    assert len(result.voom_trend.points) == len(trend)


def test_fit_statistics(fitted: tuple[Scenario, LimmaResult]) -> None:
    """sigma, df.residual, s2.post, df.total, stdev.unscaled and Amean match fit.csv."""
    scenario, result = fitted
    fit = scenario.r("fit", index_col=0)
    assert result.fit is not None
    assert result.fit.index.equals(fit.index)
    for column in fit.columns:
        worst = max_relative_difference(result.fit[column], fit[column])
        assert worst <= RTOL, (column, worst)


def test_hyperparameters(fitted: tuple[Scenario, LimmaResult]) -> None:
    """d0, s0² and v0 of the tested coefficient match hyper.csv, and the coefficient name too."""
    scenario, result = fitted
    hyper = scenario.r("hyper").iloc[0]
    assert result.settings["test"]["name"] == hyper["coef"]
    assert max_relative_difference(result.prior.df_prior, hyper["df.prior"]) <= RTOL
    assert max_relative_difference(result.prior.s2_prior, hyper["s2.prior"]) <= RTOL
    assert max_relative_difference(result.prior.var_prior, hyper["var.prior"]) <= RTOL


def test_top_table(fitted: tuple[Scenario, LimmaResult]) -> None:
    """logFC, AveExpr, t, P.Value, adj.P.Val and B match topTable(sort.by="none")."""
    scenario, result = fitted
    table = scenario.r("toptable", index_col=0)
    assert list(result.table.columns) == TABLE
    assert result.table.index.equals(table.index)
    for column in TABLE:
        worst = max_relative_difference(result.table[column], table[column])
        assert worst <= RTOL, (column, worst)


def test_parity_is_tight(fitted: tuple[Scenario, LimmaResult]) -> None:
    """Beyond the brief's 1e-8: p-values, AveExpr and the fit agree to 1e-11 relative."""
    scenario, result = fitted
    table = scenario.r("toptable", index_col=0)
    for column in ["AveExpr", "P.Value", "adj.P.Val"]:
        assert max_relative_difference(result.table[column], table[column]) <= 1e-11
    scale = np.abs(table["logFC"]).max()
    assert np.abs(result.table["logFC"] - table["logFC"]).max() <= 1e-12 * scale
    fit = scenario.r("fit", index_col=0)
    assert result.fit is not None
    assert max_relative_difference(result.fit["sigma"], fit["sigma"]) <= 1e-11


def test_log_cpm_and_weights(full_fitted: tuple[Scenario, LimmaResult]) -> None:
    """The log-CPM E and the voom weights match E.csv and weights.csv entry by entry."""
    scenario, result = full_fitted
    assert result.E is not None
    assert result.weights is not None
    expression = scenario.r("E", index_col=0)
    weights = scenario.r("weights", index_col=0)
    pd.testing.assert_index_equal(result.E.columns, expression.columns)
    assert max_relative_difference(result.E, expression) <= RTOL
    assert max_relative_difference(result.weights, weights) <= RTOL


def test_sorted_top_table(full_fitted: tuple[Scenario, LimmaResult]) -> None:
    """R's default order (by B, decreasing) is a decreasing order of our B too."""
    scenario, result = full_fitted
    ordered = scenario.r("toptable_sorted", index_col=0)
    b = result.table.loc[ordered.index, "B"].to_numpy()
    assert np.all(np.diff(b) <= 1e-9 * np.abs(b[1:]))


def test_unweighted_variant(full_fitted: tuple[Scenario, LimmaResult]) -> None:
    """An unweighted lmFit on E, then eBayes and topTable, matches toptable_unweighted.csv."""
    scenario, result = full_fitted
    assert result.E is not None
    names = tuple(result.design.columns)
    fit = lm_fit(result.E.to_numpy(), result.design.to_numpy(), names=names)
    test = result.settings["test"]
    if test["contrast"] is not None:
        weights = test["contrast"]["weights"]
        vector = np.array([weights.get(c, 0.0) for c in names])
        tested = contrasts_fit(fit, vector, name=test["name"])
    else:
        tested = fit.column(names.index(test["coef"]))
    table = top_table(tested, ebayes(tested), coef=0, genes=result.table.index)
    expected = scenario.r("toptable_unweighted", index_col=0)
    for column in TABLE:
        assert max_relative_difference(table[column], expected[column]) <= RTOL, column
