"""Contrasts written as strings, as limma's makeContrasts parses them, and parity with R on them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cytepool import Cube, write_cube
from cytepool.cli import main
from cytepool.cube.demo import demo_cube
from cytepool.de import (
    LimmaResult,
    LimmaResults,
    limma_voom,
    limma_voom_result,
    make_contrasts,
    run_limma_voom,
)
from cytepool.de.contrasts import parse_contrast
from cytepool.de.testing import max_relative_difference
from cytepool.de.toptable import TOP_TABLE_COLUMNS, p_adjust_bh
from cytepool.errors import DesignError, GroupSkippedError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RTOL = 1e-8
"""The tolerance of test_parity.py."""

SCENARIOS = {"cellmeans": "~ 0 + group", "intercept_batch": "~ group + batch"}
COLUMNS = ["groupA", "groupB", "groupC"]


def read_r(path: Path, *, index_col: int | None = None) -> pd.DataFrame:
    """A CSV written by R, floats parsed exactly."""
    return pd.read_csv(path, float_precision="round_trip", index_col=index_col)


def _input() -> tuple[pd.DataFrame, pd.DataFrame]:
    counts = read_r(FIXTURES / "input" / "counts.csv", index_col=0)
    samples = read_r(FIXTURES / "input" / "samples.csv", index_col=0)
    return counts, samples


def _r_contrasts(scenario: str) -> pd.DataFrame:
    return read_r(FIXTURES / scenario / "contrasts.csv", index_col=0).astype(np.float64)


_RESULTS: dict[str, dict[str, LimmaResult]] = {}


def _ours(scenario: str) -> dict[str, LimmaResult]:
    """Our results on R's contrast list, computed once per session."""
    if scenario not in _RESULTS:
        counts, samples = _input()
        _RESULTS[scenario] = limma_voom_result(
            counts,
            samples,
            design=SCENARIOS[scenario],
            contrast=list(_r_contrasts(scenario).columns),
            filter_by_expr=True,
        )
    return _RESULTS[scenario]


def _assert_matches_r(table: pd.DataFrame, expected: pd.DataFrame, *, what: str) -> None:
    assert table.index.equals(pd.Index(expected["gene"])), what
    for column in TOP_TABLE_COLUMNS:
        worst = max_relative_difference(table[column], expected[column])
        assert worst <= RTOL, (what, column, worst)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_weights_are_make_contrasts_weights(scenario: str) -> None:
    """Each string gives exactly R's makeContrasts column (Intercept naming (Intercept) as in R)."""
    r = _r_contrasts(scenario)
    ours = make_contrasts(list(r.columns), list(r.index))
    pd.testing.assert_frame_equal(ours, r, check_names=False, check_exact=True)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_top_tables_match_r_per_contrast(scenario: str) -> None:
    """A list of strings gives R's topTable(coef=j) of contrasts.fit + eBayes, for every j in order."""
    results = _ours(scenario)
    expected = read_r(FIXTURES / scenario / "toptables.csv")
    assert list(results) == list(_r_contrasts(scenario).columns)
    for name, result in results.items():
        _assert_matches_r(result.table, expected[expected["contrast"] == name], what=name)
        assert result.settings["test"]["name"] == name


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_filter_prior_and_standard_errors_match_r(scenario: str) -> None:
    """The genes filterByExpr keeps, d0, s0², each contrast's v0 and stdev.unscaled are R's."""
    keep = read_r(FIXTURES / scenario / "keep.csv", index_col=0)["keep"]
    hyper = read_r(FIXTURES / scenario / "hyper.csv", index_col=0)
    stdev = read_r(FIXTURES / scenario / "stdev_unscaled.csv", index_col=0)
    for name, result in _ours(scenario).items():
        np.testing.assert_array_equal(result.kept.to_numpy(), keep.to_numpy())
        prior = hyper.loc[name]
        assert max_relative_difference(result.prior.df_prior, prior["df.prior"]) <= RTOL
        assert max_relative_difference(result.prior.s2_prior, prior["s2.prior"]) <= RTOL
        assert max_relative_difference(result.prior.var_prior, prior["var.prior"]) <= RTOL
        assert result.fit is not None
        assert max_relative_difference(result.fit["stdev.unscaled"], stdev[name]) <= RTOL


def test_run_limma_voom_gives_the_tables_of_the_results() -> None:
    """run_limma_voom with a list returns, per expression, the table of limma_voom_result."""
    counts, samples = _input()
    names = list(_r_contrasts("cellmeans").columns)
    tables = run_limma_voom(
        counts, samples, design="~ 0 + group", contrast=names, filter_by_expr=True
    )
    assert list(tables) == names
    for name, table in tables.items():
        pd.testing.assert_frame_equal(table, _ours("cellmeans")[name].table, check_exact=True)


def test_one_string_is_the_first_of_a_list() -> None:
    """A single string gives the same result as that string alone in a list."""
    counts, samples = _input()
    name = "(groupA+groupB)/2-groupC"
    table = run_limma_voom(
        counts, samples, design="~ 0 + group", contrast=name, filter_by_expr=True
    )
    pd.testing.assert_frame_equal(table, _ours("cellmeans")[name].table, check_exact=True)


def test_backticks_and_intercept_alias_agree() -> None:
    """`(Intercept)` in backticks and R's Intercept name the same column."""
    columns = ["(Intercept)", "groupB", "conditionstim:donorD2"]
    quoted = parse_contrast("`(Intercept)`+groupB - `conditionstim:donorD2`/2", columns)
    alias = parse_contrast("Intercept+groupB-`conditionstim:donorD2`/2", columns)
    np.testing.assert_array_equal(quoted, [1.0, 1.0, -0.5])
    np.testing.assert_array_equal(alias, quoted)


def _cube(*, drop_c_in_second_group: bool) -> Cube:
    counts, samples = _input()
    layer = np.stack([counts.to_numpy().T, counts.to_numpy().T]).astype(np.int64)
    if drop_c_in_second_group:
        layer[1, (samples["group"] == "C").to_numpy()] = 0
    return Cube(
        samples=samples.reset_index(),
        groups=pd.DataFrame({"celltype": ["T", "B"]}),
        features=pd.DataFrame({"gene": counts.index}),
        layers={"counts": layer},
        n_cells=np.full((len(samples), 2), 100),
        source={"tool": "tests.cytepool.de.test_contrasts"},
    )


def test_cube_groups_match_r_for_each_contrast() -> None:
    """limma_voom on a cube with a list gives, per expression, a LimmaResults of R's tables."""
    names = list(_r_contrasts("cellmeans").columns)
    cube = _cube(drop_c_in_second_group=False)
    every = limma_voom(cube, design="~ 0 + group", contrast=names, min_cells=0, min_counts=0)
    expected = read_r(FIXTURES / "cellmeans" / "toptables.csv")
    assert list(every) == names
    for name, results in every.items():
        assert isinstance(results, LimmaResults)
        assert results.settings["test"]["name"] == name
        for group in ("T", "B"):
            _assert_matches_r(
                results[group].table, expected[expected["contrast"] == name], what=name
            )
            results[group].verify(cube)


def test_a_contrast_the_group_design_lacks_skips_only_that_contrast() -> None:
    """A group without samples of a level skips the contrasts that need it, and fits the others."""
    cube = _cube(drop_c_in_second_group=True)
    names = ["groupB-groupC", "groupA-groupB"]
    every = limma_voom(cube, design="~ 0 + group", contrast=names, min_cells=0, min_counts=0)
    assert list(every["groupB-groupC"]) == ["T"]
    assert "groupC" in every["groupB-groupC"].skipped["B"]
    assert list(every["groupA-groupB"]) == ["T", "B"]
    one = limma_voom(
        cube, group="B", design="~ 0 + group", contrast=["groupA-groupB"], min_counts=0
    )
    pd.testing.assert_frame_equal(one["groupA-groupB"].table, every["groupA-groupB"]["B"].table)
    with pytest.raises(GroupSkippedError, match=r"for contrast 'groupB-groupC'.*groupC"):
        limma_voom(cube, group="B", design="~ 0 + group", contrast=names, min_counts=0)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("groupB*groupC", "expected a number on one side of '\\*', found design columns on both"),
        ("groupB/(groupC-groupA)", "expected a number after '/'"),
        ("groupB+1", "joins a number and a combination of design columns"),
        ("2", "found a number only"),
        ("", "found nothing"),
        ("groupD-groupA", "'groupD' is not a design column; expected one of \\['groupA'"),
        ("(groupB-groupC", "at position 14, expected '\\)'"),
        ("groupB-groupC)", "at position 13, expected an operator"),
        ("groupB-`groupC", "unclosed backtick"),
        ("groupB^2", "found '\\^'"),
        ("groupB-groupB", "not all zero"),
        ("groupB/0", "finite"),
        ("(" * 101 + "groupB" + ")" * 101, "at most 100 nested"),
    ],
)
def test_refused_expressions_say_what_was_expected(expression: str, message: str) -> None:
    """Non-linear, malformed or unknown expressions raise DesignError naming the expression."""
    with pytest.raises(DesignError, match=message) as caught:
        parse_contrast(expression, COLUMNS)
    assert repr(expression)[:40] in str(caught.value)


@pytest.mark.parametrize(
    ("contrast", "message"),
    [
        ([], "expected a list of expressions"),
        (["groupB-groupC", 1.0, 0.0], "expected a list of expressions"),
        (["groupB-groupC", "groupB-groupC"], "repeats \\['groupB-groupC'\\]"),
    ],
)
def test_refused_lists(contrast: list[object], message: str) -> None:
    """An empty list, a list mixing strings and numbers and a repeated expression are refused."""
    counts, samples = _input()
    with pytest.raises(DesignError, match=message):
        run_limma_voom(counts, samples, design="~ 0 + group", contrast=contrast)  # type: ignore[arg-type]


def _linear(names: list[str]) -> st.SearchStrategy[str]:
    """Random linear expressions over ``names`` in R (and Python) syntax."""
    numbers = st.sampled_from(["2", "0.5", "3", "1e-1", ".25", "10"])
    leaves = st.sampled_from(names)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-"]), inner).map(" ".join),
            st.tuples(numbers, inner).map(lambda t: f"{t[0]}*{t[1]}"),
            st.tuples(inner, numbers).map(lambda t: f"{t[0]}/{t[1]}"),
            inner.map(lambda e: f"-{e}"),
            inner.map(lambda e: f"({e})"),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@given(expression=_linear(COLUMNS))
def test_weights_are_the_arithmetic_of_indicator_vectors(expression: str) -> None:
    """Any linear expression gives the value of its arithmetic on indicator vectors, as R evaluates it."""
    indicators = {name: np.eye(len(COLUMNS))[k] for k, name in enumerate(COLUMNS)}
    expected = eval(expression, {"__builtins__": {}}, indicators) + 0.0
    if not np.isfinite(expected).all() or not expected.any():
        with pytest.raises(DesignError, match="not all zero"):
            parse_contrast(expression, COLUMNS)
        return
    np.testing.assert_array_equal(parse_contrast(expression, COLUMNS), expected)


def _p_adjust_cases() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    frame = read_r(FIXTURES / "p_adjust.csv")
    return {
        str(case): (
            rows["p"].to_numpy(dtype=np.float64),
            rows["adjusted"].to_numpy(dtype=np.float64),
        )
        for case, rows in frame.groupby("case", sort=False)
    }


@pytest.mark.parametrize("case", ["short", "long", "all_na", "one"])
def test_p_adjust_bh_is_r_p_adjust(case: str) -> None:
    """p_adjust_bh gives R's p.adjust(p, "BH") to the last bit: NaN stays NaN and ties tie."""
    p, expected = _p_adjust_cases()[case]
    assert np.isnan(p).any() or case == "one"
    np.testing.assert_array_equal(p_adjust_bh(p), expected)


def test_command_line_takes_an_expression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytepool de --contrast EXPR` tests the expression; a JSON list of them exits 1."""
    path = write_cube(demo_cube(n_features=200), tmp_path / "demo.cube.zarr")
    args = ["de", str(path), "--design", "~ 0 + condition", "--min-counts", "100", "--group", "B"]
    expression = "conditionstim-conditionctrl"
    assert main([*args, "--contrast", expression, "-o", str(tmp_path / "de")]) == 0
    saved = LimmaResults.read(tmp_path / "de")["B"]
    assert saved.settings["test"]["name"] == expression
    many = json.dumps([expression, "conditionctrl-conditionstim"])
    assert main([*args, "--contrast", many, "-o", str(tmp_path / "de2")]) == 1
    assert "one contrast" in capsys.readouterr().err
