"""The notebook views of limma-voom results: cube, design, test, genes tested and significant, top genes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cytepool.de import LimmaResults, limma_voom

if TYPE_CHECKING:
    from cytepool import Cube

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def cube(pb_cube: Cube) -> Cube:
    """The pseudobulk cube with a group labelled by a script."""
    return pb_cube.combine(axis="groups", mapping={"T0": HOSTILE})


@pytest.fixture(scope="module")
def results(cube: Cube) -> LimmaResults:
    return limma_voom(cube, design="~ donor + condition", coef="conditionstim")


def test_result_view_shows_its_cube_test_and_counts(cube: Cube, results, parse_html) -> None:
    """One group's view names the cube's fingerprint, the design, the genes tested and significant."""
    result = results["T1"]
    parsed = parse_html(result._repr_html_())
    n_sig = int((result.table["adj.P.Val"] < 0.05).sum())
    assert cube.fingerprint in parsed.text
    assert "~ donor + condition" in parsed.text
    assert "conditionstim" in parsed.text
    assert f"{len(result.table):,} of 300" in parsed.text
    assert f"{n_sig:,} at adj.P.Val < 0.05" in parsed.text
    assert result.table["P.Value"].idxmin() in parsed.text
    assert parsed.tags.count("table") >= 2


def test_results_view_has_one_row_per_group_and_the_skipped(results, parse_html) -> None:
    """The view of all groups counts each group's genes; skipped groups show with their reason."""
    with_skipped = LimmaResults(
        results=results.results,
        skipped={"T9": f"too few samples {HOSTILE}"},
        settings=results.settings,
    )
    parsed = parse_html(with_skipped._repr_html_())
    assert "script" not in parsed.tags
    assert HOSTILE in parsed.text
    assert "3 fitted, 1 skipped" in parsed.text
    assert f"too few samples {HOSTILE}" in parsed.text
    for result in results.values():
        assert result.cube is not None
        assert result.cube.fingerprint in parsed.text


def test_hostile_group_label_is_text(results, parse_html) -> None:
    """A group labelled ``<script>`` is escaped in the view of its result."""
    parsed = parse_html(results[HOSTILE]._repr_html_())
    assert "script" not in parsed.tags
    assert HOSTILE in parsed.text
