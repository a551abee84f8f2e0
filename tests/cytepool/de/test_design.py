"""Design matrices named and coded like R's model.matrix, and the tested coefficient or contrast."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cytepool.de import run_limma_voom
from cytepool.de.design import design_matrix, resolve_test, resolve_tests
from cytepool.errors import DesignError, LimmaError

SAMPLES = pd.DataFrame(
    {
        "condition": ["stim", "ctrl", "stim", "ctrl", "stim", "ctrl"],
        "donor": ["d2", "d2", "d1", "d1", "d3", "d3"],
        "age": [30.0, 30.0, 41.0, 41.0, 55.0, 55.0],
        "treated": [True, False, True, False, True, False],
    },
    index=[f"s{i}" for i in range(6)],
)


def test_treatment_coding_with_sorted_levels() -> None:
    """Text columns become factors with sorted levels; the first is the reference."""
    design = design_matrix("~ condition + donor", SAMPLES)
    assert list(design.columns) == ["(Intercept)", "conditionstim", "donord2", "donord3"]
    assert design.index.equals(SAMPLES.index)
    np.testing.assert_array_equal(design["conditionstim"], [1, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(design["donord2"], [1, 1, 0, 0, 0, 0])


def test_capital_letters_sort_before_lower_case() -> None:
    """Levels sort by code point (R's factor() in the C locale): 'B' < 'a'."""
    samples = SAMPLES.assign(batch=["a", "B", "a", "B", "a", "B"])
    assert list(design_matrix("~ batch", samples).columns) == ["(Intercept)", "batcha"]


def test_categorical_keeps_its_level_order() -> None:
    """A categorical column's category order is its level order, as a factor's; unused levels go."""
    samples = SAMPLES.assign(
        condition=pd.Categorical(SAMPLES["condition"], categories=["stim", "ctrl", "unused"])
    )
    assert list(design_matrix("~ condition", samples).columns) == ["(Intercept)", "conditionctrl"]


def test_numbers_booleans_interactions_and_no_intercept() -> None:
    """Numeric columns enter as they are, booleans as FALSE/TRUE factors, interactions with ':'."""
    design = design_matrix("~ age + treated", SAMPLES)
    assert list(design.columns) == ["(Intercept)", "age", "treatedTRUE"]
    interaction = design_matrix("~ condition * donor", SAMPLES)
    assert list(interaction.columns)[-2:] == ["conditionstim:donord2", "conditionstim:donord3"]
    cell_means = design_matrix("~ 0 + condition", SAMPLES)
    assert list(cell_means.columns) == ["conditionctrl", "conditionstim"]


def test_design_matrix_frame_is_reordered_to_the_samples() -> None:
    """A design-matrix DataFrame is taken by sample name, in the samples' order."""
    frame = pd.DataFrame({"x": np.arange(6.0), "(Intercept)": 1.0}, index=SAMPLES.index[::-1])
    design = design_matrix(frame, SAMPLES)
    assert design.index.equals(SAMPLES.index)
    np.testing.assert_array_equal(design["x"], np.arange(6.0)[::-1])


def test_design_errors_say_what_is_wrong() -> None:
    """Unknown columns, one-level factors, missing rows and non-numeric matrices are refused."""
    with pytest.raises(DesignError, match="cannot build a design"):
        design_matrix("~ nothere", SAMPLES)
    with pytest.raises(DesignError, match="at least two levels"):
        design_matrix("~ condition", SAMPLES.iloc[[0, 2]])
    with pytest.raises(DesignError, match="missing"):
        design_matrix(pd.DataFrame({"x": [1.0]}, index=["s0"]), SAMPLES)
    with pytest.raises(DesignError, match="numeric"):
        design_matrix(SAMPLES[["condition"]], SAMPLES)
    with pytest.raises(DesignError, match="formula string or a design-matrix"):
        design_matrix(42, SAMPLES)
    assert issubclass(DesignError, LimmaError)
    assert issubclass(DesignError, ValueError)


COLUMNS = ["(Intercept)", "conditionstim", "donord2", "donord3"]


def test_coef_by_name_position_and_default() -> None:
    """The coefficient is a name or a 0-based position (negative from the end); the last column by default."""
    assert resolve_test(COLUMNS, coef=None, contrast=None).coef == 3
    assert resolve_test(COLUMNS, coef="conditionstim", contrast=None).coef == 1
    assert resolve_test(COLUMNS, coef=1, contrast=None).name == "conditionstim"
    assert resolve_test(COLUMNS, coef=-1, contrast=None).name == "donord3"
    assert resolve_test(COLUMNS, coef=np.int64(2), contrast=None).name == "donord2"


def test_contrast_as_mapping_vector_or_series() -> None:
    """A contrast is named like R's makeContrasts expression."""
    by_name = resolve_test(COLUMNS, coef=None, contrast={"donord3": 1, "donord2": -1})
    assert by_name.name == "donord3-donord2"
    assert by_name.contrast == (0.0, 0.0, -1.0, 1.0)
    vector = resolve_test(COLUMNS, coef=None, contrast=[0, 0.5, 0.5, 0])
    assert vector.name == "0.5*conditionstim+0.5*donord2"
    series = resolve_test(COLUMNS, coef=None, contrast=pd.Series({"conditionstim": 2.0}))
    assert series.contrast == (0.0, 2.0, 0.0, 0.0)
    assert by_name.to_json(COLUMNS) == {
        "coef": None,
        "contrast": {"name": "donord3-donord2", "weights": {"donord2": -1.0, "donord3": 1.0}},
    }


@pytest.mark.parametrize(
    ("coef", "contrast", "message"),
    [
        ("nope", None, "not a design column"),
        (7, None, "outside"),
        (True, None, "0-based position"),
        (1.5, None, "0-based position"),
        ("conditionstim", {"donord2": 1}, "not both"),
        (None, {"nope": 1}, "not design columns"),
        (None, [1, 2], "4 design columns"),
        (None, [0, 0, 0, 0], "not all zero"),
        (None, [0, np.nan, 1, 0], "finite"),
        (None, "conditionstim * donord2", "found design columns on both"),
        (None, "conditionstim - donor2", "'donor2' is not a design column; expected one of"),
        (None, ["conditionstim"], "expected one contrast here"),
    ],
)
def test_bad_coef_or_contrast(coef: object, contrast: object, message: str) -> None:
    """Each malformed request names what is wrong and the design columns."""
    with pytest.raises(DesignError, match=message):
        resolve_test(COLUMNS, coef=coef, contrast=contrast)


@pytest.mark.parametrize("coef", [None, 0, -1])
def test_the_intercept_is_not_tested_unless_named(coef: int | None) -> None:
    """A design whose default or given position is (Intercept) is refused, naming its columns and the remedy."""
    with pytest.raises(DesignError) as info:
        resolve_test(["(Intercept)"], coef=coef, contrast=None)
    assert str(info.value) == (
        "coef: the coefficient to test would be '(Intercept)', which tests whether mean "
        "log-expression is zero, not a difference between samples; the design's columns are "
        "['(Intercept)']. Name the coefficient to test (coef='...', --coef NAME on the command "
        "line; coef='(Intercept)' to test the intercept on purpose) or pass a contrast"
    )


def test_the_intercept_named_explicitly_is_tested() -> None:
    """coef='(Intercept)' or a contrast of the intercept tests it."""
    assert resolve_test(["(Intercept)"], coef="(Intercept)", contrast=None).coef == 0
    assert resolve_test(["(Intercept)"], coef=None, contrast="Intercept").contrast == (1.0,)
    assert resolve_test(COLUMNS, coef=None, contrast=None).name == "donord3"


def test_limma_voom_result_refuses_an_intercept_only_design() -> None:
    """run_limma_voom with '~ 1' and no coef raises instead of reporting every gene significant."""
    rng = np.random.default_rng(0)
    counts = pd.DataFrame(rng.poisson(100, size=(50, 6)), columns=SAMPLES.index)
    with pytest.raises(DesignError, match=r"would be '\(Intercept\)'"):
        run_limma_voom(counts, SAMPLES, design="~ 1")
    table = run_limma_voom(counts, SAMPLES, design="~ 1", coef="(Intercept)")
    assert len(table) == 50


@pytest.mark.parametrize("weight", ["x", None, [1]])
def test_a_contrast_weight_that_is_not_a_number_is_a_design_error(weight: object) -> None:
    """A mapping whose weight is not a number names the column and the weight."""
    with pytest.raises(
        DesignError, match=r"contrast weight of 'donord2': expected a number, found"
    ):
        resolve_test(COLUMNS, coef=None, contrast={"donord2": weight, "donord3": -1})


def test_contrast_as_an_r_expression() -> None:
    """A string is parsed as makeContrasts does and named as written."""
    test = resolve_test(COLUMNS, coef=None, contrast="(donord2 + donord3)/2 - `(Intercept)`")
    assert test.name == "(donord2 + donord3)/2 - `(Intercept)`"
    assert test.contrast == (-1.0, 0.0, 0.5, 0.5)
    assert test.coef is None


def test_several_contrasts_keep_their_order_and_names() -> None:
    """A list of expressions gives one test per expression, in order; a coef alongside is refused."""
    tests = resolve_tests(COLUMNS, coef=None, contrast=("donord3-donord2", "conditionstim"))
    assert [t.name for t in tests] == ["donord3-donord2", "conditionstim"]
    assert [t.contrast for t in tests] == [(0.0, 0.0, -1.0, 1.0), (0.0, 1.0, 0.0, 0.0)]
    assert resolve_tests(COLUMNS, coef=1, contrast=None) == (
        resolve_test(COLUMNS, coef=1, contrast=None),
    )
    with pytest.raises(DesignError, match="not both"):
        resolve_tests(COLUMNS, coef="donord2", contrast=["donord3-donord2"])


def test_a_test_moves_to_a_design_by_column_name() -> None:
    """on_columns finds the coefficient or weights by name, and names the columns a design lacks."""
    smaller = ["(Intercept)", "conditionstim", "donord3"]
    coef = resolve_test(COLUMNS, coef="donord3", contrast=None).on_columns(COLUMNS, smaller)
    assert coef.coef == 2
    contrast = resolve_test(COLUMNS, coef=None, contrast="donord3-conditionstim")
    assert contrast.on_columns(COLUMNS, smaller).contrast == (0.0, -1.0, 1.0)
    with pytest.raises(DesignError, match=r"needs design columns \['donord2'\]"):
        resolve_test(COLUMNS, coef=None, contrast="donord2").on_columns(COLUMNS, smaller)
