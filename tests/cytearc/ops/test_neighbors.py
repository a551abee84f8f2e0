"""The kNN search of ``graph.neighbors`` against scipy's exact k-d tree."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.spatial

from cytearc.errors import OperationArgumentError
from cytearc.ops.neighbors import EXACT_BELOW, default_search, knn

neighbors_module = importlib.import_module("cytearc.ops.neighbors")


def _clustered(n: int, dims: int, *, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(8, dims)) * 5
    return centers[rng.integers(0, 8, n)] + rng.normal(size=(n, dims)) + 40.0


@pytest.mark.parametrize("n", [30, 3_000])
def test_exact_search_equals_a_kd_tree(n: int) -> None:
    """Indices equal scipy's exact query (no ties in continuous data), distances to 1e-12."""
    x = _clustered(n, 20, seed=n)
    indices, distances = knn(x, 15, seed=0, search="exact")
    expected_distances, expected_indices = scipy.spatial.cKDTree(x).query(x, 15)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(distances, expected_distances, rtol=0, atol=1e-12)
    assert indices.dtype == np.int64
    assert distances.dtype == np.float64


def test_exact_search_in_several_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 64 rows (the smallest) give what one block gives."""
    x = _clustered(700, 10, seed=1)
    whole = knn(x, 10, seed=0, search="exact")
    monkeypatch.setattr(neighbors_module, "_BLOCK_BYTES", 1)
    blocked = knn(x, 10, seed=0, search="exact")
    np.testing.assert_array_equal(whole[0], blocked[0])
    np.testing.assert_array_equal(whole[1], blocked[1])


def test_each_point_is_its_own_first_neighbour_among_duplicates() -> None:
    """Every point of a group of equal points lists itself first; the others follow at distance 0."""
    x = np.repeat(_clustered(40, 5, seed=2), 4, axis=0)
    indices, distances = knn(x, 6, seed=0, search="exact")
    np.testing.assert_array_equal(indices[:, 0], np.arange(len(x)))
    np.testing.assert_array_equal(distances[:, :4], 0.0)
    group = np.arange(len(x))[:, None] // 4
    assert (indices[:, :4] // 4 == group).all()
    assert (np.diff(distances, axis=1) >= 0).all()


def test_k_equal_to_the_points_ranks_all_of_them() -> None:
    """With ``k`` = all points (fewer than ``k`` + the margin), every row is a permutation by distance."""
    x = _clustered(12, 3, seed=3)
    indices, distances = knn(x, 12, seed=0, search="exact")
    expected_distances, expected_indices = scipy.spatial.cKDTree(x).query(x, 12)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(distances, expected_distances, atol=1e-12)


def test_default_search_is_exact_below_the_threshold() -> None:
    assert default_search(EXACT_BELOW - 1) == "exact"
    assert default_search(EXACT_BELOW) == "nndescent"


def test_an_unknown_search_is_refused() -> None:
    with pytest.raises(OperationArgumentError, match="search='ball_tree'"):
        knn(np.zeros((5, 2)), 2, seed=0, search="ball_tree")


@pytest.mark.slow
def test_nndescent_search_finds_most_exact_neighbours() -> None:
    """The nndescent search (pynndescent, seeded, one thread) finds at least 95 % of the exact neighbours, reproducibly."""
    x = _clustered(2_000, 20, seed=4)
    exact, _ = knn(x, 15, seed=0, search="exact")
    indices, distances = knn(x, 15, seed=0, search="nndescent")
    again, _ = knn(x, 15, seed=0, search="nndescent")
    np.testing.assert_array_equal(indices, again)
    recall = np.mean([len(set(a) & set(b)) / 15 for a, b in zip(indices, exact, strict=True)])
    assert recall >= 0.95
    np.testing.assert_array_equal(indices[:, 0], np.arange(len(x)))
    assert (np.diff(distances, axis=1) >= -1e-6).all()
