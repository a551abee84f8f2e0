"""Agreement of a clustering with a reference: ARI, population matches, marker overlap."""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest

from cytearc.errors import OperationArgumentError
from cytearc.ops.agreement import adjusted_rand, marker_overlap, match_clusters


def _hubert_arabie(a: list[str], b: list[str]) -> float:
    """The ARI from its definition (Hubert and Arabie 1985), on pair counts."""
    table = pd.crosstab(pd.Series(a), pd.Series(b)).to_numpy()
    index = sum(comb(int(n), 2) for n in table.ravel())
    rows = sum(comb(int(n), 2) for n in table.sum(axis=1))
    columns = sum(comb(int(n), 2) for n in table.sum(axis=0))
    expected = rows * columns / comb(len(a), 2)
    return (index - expected) / ((rows + columns) / 2 - expected)


def test_adjusted_rand_is_its_definition_on_the_common_cells() -> None:
    rng = np.random.default_rng(3)
    ours = pd.Series(rng.integers(0, 4, 60), index=[f"c{i}" for i in range(60)])
    reference = pd.Series(rng.choice(list("abc"), 50), index=[f"c{i}" for i in range(10, 60)])
    common = reference.index
    expected = _hubert_arabie(ours.loc[common].astype(str).tolist(), reference.tolist())
    assert adjusted_rand(ours, reference.sample(frac=1, random_state=0)) == pytest.approx(expected)


def test_adjusted_rand_ignores_label_names() -> None:
    ours = pd.Series([1, 1, 2, 2, 3], index=list("abcde"))
    assert adjusted_rand(ours, ours.map({1: "x", 2: "y", 3: "z"})) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("labels", "reference", "message"),
    [
        ([1, 2], pd.Series([1, 2]), "labels must be a pandas Series"),
        (pd.Series([1, 2], index=["a", "a"]), pd.Series([1, 2], index=["a", "b"]), "unique"),
        (pd.Series([1, 2], index=["a", "b"]), pd.Series([1, 2], index=["c", "d"]), "share no cell"),
    ],
)
def test_agreement_refuses_labels_it_cannot_align(labels, reference, message: str) -> None:
    with pytest.raises(OperationArgumentError, match=message):
        adjusted_rand(labels, reference)


def test_a_split_population_is_separated_and_a_merged_one_is_not() -> None:
    reference = pd.Series(["T"] * 40 + ["B"] * 20 + ["pDC"] * 4, index=range(64))
    ours = pd.Series([1] * 25 + [2] * 15 + [3] * 20 + [3] * 4, index=range(64))
    matches = match_clusters(ours, reference)
    assert matches.index.tolist() == ["T", "B", "pDC"]
    assert matches["separated"].to_dict() == {"T": True, "B": False, "pDC": False}
    t = matches.loc["T"]
    assert (t["best"], t["shared"], t["n_best"]) == ("1", 25, 25)
    assert t["recall"] == pytest.approx(25 / 40)
    assert t["jaccard"] == pytest.approx(25 / 40)
    assert matches.loc["B", "precision"] == pytest.approx(20 / 24)


def test_purity_and_coverage_set_what_separated_means() -> None:
    reference = pd.Series(["A"] * 10 + ["B"] * 10, index=range(20))
    ours = pd.Series([1] * 9 + [2] + [2] * 10, index=range(20))
    assert match_clusters(ours, reference, purity=0.9)["separated"].all()
    assert not match_clusters(ours, reference, purity=0.95)["separated"].loc["B"]
    assert not match_clusters(ours, reference, coverage=0.95)["separated"].loc["A"]
    with pytest.raises(OperationArgumentError, match="purity must be in"):
        match_clusters(ours, reference, purity=0)


def test_marker_overlap_is_the_shared_share_of_the_top_n() -> None:
    ours = {"1": ["A", "B", "C", "D"], "2": ["E", "F"]}
    reference = {"x": ["B", "A", "Z", "C"], "y": ["F", "Q"]}
    overlap = marker_overlap(ours, reference, {"x": "1", "y": "2"}, n=3)
    assert overlap.to_dict() == {"x": pytest.approx(2 / 3), "y": pytest.approx(1 / 3)}
    with pytest.raises(OperationArgumentError, match="has no markers"):
        marker_overlap(ours, reference, {"x": "9"})
