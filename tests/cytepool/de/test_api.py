"""run_limma_voom and limma_voom_result: inputs refused, invariants kept, a 20k x 12 smoke run."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cytepool.de import LimmaResult, limma_voom_result, run_limma_voom
from cytepool.de.testing import max_relative_difference
from cytepool.de.tmm import quantile_type7
from cytepool.errors import DesignError, LimmaError

if TYPE_CHECKING:
    from pathlib import Path


def _data(seed: int, n_genes: int = 150, n_donors: int = 4) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    samples = pd.DataFrame(
        {
            "condition": ["ctrl", "stim"] * n_donors,
            "donor": [f"D{d}" for d in range(n_donors) for _ in range(2)],
        },
        index=[f"D{d}_{c}" for d in range(n_donors) for c in ("ctrl", "stim")],
    )
    mean = rng.gamma(0.6, 60.0, size=(n_genes, 1)) * rng.lognormal(0, 0.3, size=(1, len(samples)))
    stim = (samples["condition"] == "stim").to_numpy()
    mean[: n_genes // 10, stim] *= 4.0
    counts = pd.DataFrame(
        rng.poisson(rng.gamma(4.0, mean / 4.0 + 1e-12)),
        index=pd.Index([f"g{i}" for i in range(n_genes)], name="gene"),
        columns=samples.index,
    )
    return counts, samples


def test_result_shapes_and_settings() -> None:
    """The result holds the table in gene order and every attribute of the brief."""
    counts, samples = _data(0)
    result = limma_voom_result(counts, samples, design="~ donor + condition", filter_by_expr=True)
    assert isinstance(result, LimmaResult)
    assert list(result.table.columns) == ["logFC", "AveExpr", "t", "P.Value", "adj.P.Val", "B"]
    assert result.table.index.equals(counts.index[result.kept.to_numpy()])
    assert result.kept.index.equals(counts.index)
    assert result.weights is not None
    assert result.E is not None
    assert result.weights.shape == result.E.shape == (len(result.table), len(samples))
    assert list(result.lib_size.index) == list(samples.index)
    assert result.voom_trend is not None
    assert list(result.voom_trend.line.columns) == ["x", "y"]
    assert result.settings["test"] == {
        "name": "conditionstim",
        "coef": "conditionstim",
        "contrast": None,
    }
    assert result.settings["design"] == "~ donor + condition"
    assert result.cube is None
    assert "conditionstim" in repr(result)


def test_run_limma_voom_returns_the_table_of_the_result() -> None:
    """run_limma_voom returns a plain DataFrame, the table of limma_voom_result for the same call."""
    counts, samples = _data(4)
    table = run_limma_voom(counts, samples, design="~ donor + condition", filter_by_expr=True)
    assert type(table) is pd.DataFrame
    assert table.attrs == {}
    result = limma_voom_result(counts, samples, design="~ donor + condition", filter_by_expr=True)
    pd.testing.assert_frame_equal(table, result.table, check_exact=True)


def test_top_table_serves_common_dataframe_idioms(tmp_path: Path) -> None:
    """head, sort_values, .loc, pd.concat of two tables, CSV and Parquet round trips all work."""
    counts, samples = _data(5)
    first = run_limma_voom(counts, samples, design="~ donor + condition")
    second = run_limma_voom(counts, samples, design="~ donor + condition", coef="donorD1")
    assert first.head(3).index.equals(first.index[:3])
    ordered = first.sort_values("P.Value")
    assert ordered["P.Value"].is_monotonic_increasing
    gene = first.index[5]
    assert math.isclose(first.loc[gene, "logFC"], first["logFC"].iloc[5])
    both = pd.concat({"conditionstim": first, "donorD1": second}, names=["test"])
    assert len(both) == len(first) + len(second)
    pd.testing.assert_frame_equal(both.loc["donorD1"], second)
    first.to_csv(tmp_path / "t.csv")
    back = pd.read_csv(tmp_path / "t.csv", index_col=0, float_precision="round_trip")
    pd.testing.assert_frame_equal(back, first)
    first.to_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t.parquet"), first)


def test_design_matrix_frame_gives_the_formula_result() -> None:
    """A design-matrix DataFrame (rows in any order) gives the formula's result."""
    counts, samples = _data(1)
    by_formula = limma_voom_result(counts, samples, design="~ condition")
    frame = by_formula.design.iloc[::-1]
    by_matrix = limma_voom_result(counts, samples, design=frame, coef="conditionstim")
    pd.testing.assert_frame_equal(by_matrix.table, by_formula.table)
    assert by_matrix.settings["design"] == "matrix"


def test_contrast_of_one_coefficient_is_that_coefficient() -> None:
    """contrast={c: 1} gives coef=c's table."""
    counts, samples = _data(2)
    by_coef = limma_voom_result(counts, samples, design="~ donor + condition", coef="conditionstim")
    by_contrast = limma_voom_result(
        counts, samples, design="~ donor + condition", contrast={"conditionstim": 1.0}
    )
    assert max_relative_difference(by_contrast.table, by_coef.table) <= 1e-12


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda c, s: (c.to_numpy(), s, {}), LimmaError, "DataFrame"),
        (lambda c, s: (-c, s, {}), LimmaError, "non-negative"),
        (lambda c, s: (c.assign(**{c.columns[0]: 0}), s, {}), LimmaError, "no counts"),
        (lambda c, s: (c, s.iloc[1:], {}), LimmaError, "no row for count columns"),
        (lambda c, s: (c, s, {"normalization": "upperquartile"}), DesignError, "TMM"),
        (
            lambda c, s: (c, s, {"design": "~ condition + donor + condition:donor"}),
            DesignError,
            "no residual",
        ),
        (
            lambda c, s: (c, s.assign(same=s["donor"]), {"design": "~ donor + same"}),
            DesignError,
            "rank",
        ),
    ],
)
def test_refused_inputs(change: object, error: type[Exception], message: str) -> None:
    """Malformed counts, samples, options and unfittable designs raise named errors."""
    counts, samples = _data(3)
    new_counts, new_samples, options = change(counts, samples)  # type: ignore[operator]
    kwargs = {"design": "~ condition", **options}
    with pytest.raises(error, match=message):
        limma_voom_result(new_counts, new_samples, **kwargs)


def _unambiguous_reference(counts: pd.DataFrame) -> bool:
    """Whether TMM's reference sample is unique (else R's 'first' depends on sample order)."""
    values = counts.to_numpy(dtype=np.float64)
    values = values[(values > 0).any(axis=1)]
    f75 = np.array([quantile_type7(values[:, j], 0.75) for j in range(values.shape[1])])
    distance = np.sort(np.abs(f75 / values.sum(axis=0) - np.mean(f75 / values.sum(axis=0))))
    return bool(distance[1] - distance[0] > 1e-12)


@pytest.mark.slow
@given(
    seed=st.integers(0, 2**32),
    order_seed=st.integers(0, 2**32),
    normalization=st.sampled_from(["TMM", "none"]),
)
def test_permuting_samples_permutes_weights_and_keeps_statistics(
    seed: int, order_seed: int, normalization: str
) -> None:
    """Reordering the samples (and their rows) reorders weights and E and keeps logFC, t, p and B."""
    counts, samples = _data(seed % 1000, n_genes=120)
    assume(normalization == "none" or _unambiguous_reference(counts))
    order = np.random.default_rng(order_seed).permutation(len(samples))
    base = limma_voom_result(counts, samples, design="~ condition", normalization=normalization)
    moved = limma_voom_result(
        counts.iloc[:, order],
        samples.iloc[order],
        design="~ condition",
        normalization=normalization,
    )
    assert base.weights is not None
    assert moved.weights is not None
    assert base.E is not None
    assert moved.E is not None
    names = list(samples.index)
    assert max_relative_difference(moved.weights[names], base.weights) <= 1e-9
    assert max_relative_difference(moved.E[names], base.E) <= 1e-12
    assert max_relative_difference(moved.norm_factors[names], base.norm_factors) <= 1e-12
    for column in ["logFC", "AveExpr", "P.Value", "adj.P.Val"]:
        assert max_relative_difference(moved.table[column], base.table[column]) <= 1e-8, column
    scale = float(np.abs(base.table["t"]).max())
    assert float(np.abs(moved.table["t"] - base.table["t"]).max()) <= 1e-9 * scale


def test_twenty_thousand_genes_by_twelve_samples() -> None:
    """Smoke: 20,000 genes x 12 samples with TMM, filtering and a donor design runs (time printed)."""
    rng = np.random.default_rng(0)
    n_genes = 20_000
    samples = pd.DataFrame(
        {"condition": ["ctrl", "stim"] * 6, "donor": np.repeat([f"D{i}" for i in range(6)], 2)},
        index=[f"s{i}" for i in range(12)],
    )
    mean = rng.gamma(0.5, 200.0, size=(n_genes, 1)) * rng.lognormal(0, 0.3, size=(1, 12))
    counts = pd.DataFrame(
        rng.poisson(rng.gamma(5.0, mean / 5.0 + 1e-9)),
        index=[f"g{i}" for i in range(n_genes)],
        columns=samples.index,
    )
    start = time.perf_counter()
    result = limma_voom_result(counts, samples, design="~ donor + condition", filter_by_expr=True)
    elapsed = time.perf_counter() - start
    print(f"limma-voom on {n_genes} genes x 12 samples: {elapsed:.3f} s")
    assert len(result.table) == int(result.kept.sum()) > 10_000
