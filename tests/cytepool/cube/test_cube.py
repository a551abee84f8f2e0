"""Building a cube: shapes, dtypes, values and tables are checked with named errors."""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest

from cytepool import Cube
from cytepool.cube.demo import demo_cube
from cytepool.errors import (
    CubeError,
    CubeShapeError,
    CubeTableError,
    CubeValueError,
    NegativeValueError,
    NonFiniteValueError,
)
from cytepool.testing import example_cube, raise_if_dask_computes


def _parts(**changes: Any) -> dict[str, Any]:
    cube = example_cube(n_groups=2, n_samples=3, n_features=4)
    parts: dict[str, Any] = {
        "samples": cube.samples,
        "groups": cube.groups,
        "features": cube.features,
        "layers": {k: np.asarray(v) for k, v in cube.layers.items()},
        "n_cells": cube.n_cells,
        "normalization": cube.normalization,
    }
    parts.update(changes)
    return parts


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"layers": {"detected": np.zeros((2, 3, 4))}}, CubeShapeError, "'counts'"),
        (
            {"layers": {"counts": np.zeros((2, 3, 5), int)}},
            CubeShapeError,
            r"expected shape .* \(2, 3, 4\)",
        ),
        ({"layers": {"counts": np.zeros((2, 3, 4), "U1")}}, CubeValueError, "dtype"),
        ({"layers": {"counts": -np.ones((2, 3, 4), int)}}, NegativeValueError, "negative"),
        (
            {"layers": {"counts": np.ones((2, 3, 4)), "x": np.full((2, 3, 4), np.inf)}},
            NonFiniteValueError,
            "inf",
        ),
        (
            {"layers": {"counts": np.ones((2, 3, 4)), "a/b": np.ones((2, 3, 4))}},
            CubeValueError,
            "layer name",
        ),
        (
            {"layers": {"counts": np.full((2, 3, 4), 2**63, np.uint64)}},
            CubeValueError,
            r"2\*\*63-1",
        ),
        ({"n_cells": np.ones((2, 3), int)}, CubeShapeError, "n_cells"),
        ({"n_cells": np.ones((3, 2))}, CubeValueError, "integers"),
        ({"n_cells": -np.ones((3, 2), int)}, NegativeValueError, "n_cells"),
        ({"samples": pd.DataFrame({"s": ["a", "b"]})}, CubeShapeError, "shape"),
        ({"samples": pd.DataFrame({"s": ["a", 1, "c"]})}, CubeTableError, "strings"),
        (
            {"samples": pd.DataFrame({0: ["a", "b", "c"]})},
            CubeTableError,
            "column names must be strings",
        ),
        ({"samples": pd.DataFrame(index=range(3))}, CubeTableError, "no columns"),
        (
            {"samples": pd.DataFrame({"s": pd.array([1, None, 3], dtype="Int64")})},
            CubeTableError,
            "missing",
        ),
        (
            {"samples": pd.DataFrame({"t": pd.date_range("2020", periods=3, tz="UTC")})},
            CubeTableError,
            "time zone",
        ),
        ({"normalization": {"x": float("nan")}}, CubeValueError, "normalization"),
        ({"normalization": [1, 2]}, CubeValueError, "JSON object"),
        ({"source": {"x": object()}}, CubeValueError, "source"),
    ],
)
def test_construction_errors(changes: dict[str, Any], error: type[CubeError], match: str) -> None:
    """Each bad input raises its named error (all ValueErrors) saying what was expected."""
    with pytest.raises(error, match=match) as info:
        Cube(**_parts(**changes))
    assert isinstance(info.value, ValueError)


def test_dask_layers_are_checked_when_computed() -> None:
    """Dask layers stay lazy at construction; a bad value fails the fingerprint that reads it."""
    bad = np.ones((2, 3, 4))
    bad[1, 2, 3] = np.nan
    with raise_if_dask_computes():
        cube = Cube(
            **_parts(
                layers={
                    "counts": np.ones((2, 3, 4), int),
                    "log_sum": da.from_array(bad, chunks=(1, 3, 2)),
                }
            )
        )
    with pytest.raises(NonFiniteValueError, match=r"\(1, 2, 3\)"):
        _ = cube.fingerprint


def test_tables_keep_columns_and_drop_index() -> None:
    """A table is its columns in order; the index is not kept."""
    samples = pd.DataFrame({"sample": ["a", "b", "c"], "age": [1, 2, 3]}, index=["x", "y", "z"])
    cube = Cube(**_parts(samples=samples))
    assert cube.samples.index.tolist() == [0, 1, 2]
    assert cube.samples.columns.tolist() == ["sample", "age"]
    kept = Cube(**_parts(samples=samples.reset_index()))
    assert kept.samples.columns.tolist() == ["index", "sample", "age"]


def test_cube_is_immutable_from_outside() -> None:
    """Tables, cell numbers and records handed out are copies; layers is read-only."""
    cube = example_cube()
    before = cube.fingerprint
    samples = cube.samples
    samples.loc[0, "sample"] = "changed"
    n_cells = cube.n_cells
    assert n_cells is not None
    n_cells[0, 0] += 1
    with pytest.raises(TypeError):
        cube.layers["counts"] = np.zeros(cube.shape)  # type: ignore[index]
    with pytest.raises(ValueError, match="read-only"):
        cube.layers["counts"][0, 0, 0] = 7  # type: ignore[index]
    assert cube._compute_digests() == cube._known_digests()
    assert cube.fingerprint == before


def test_demo_cube_is_a_valid_pseudobulk() -> None:
    """The demo cube has every known layer, detected <= n_cells and log sums of its counts."""
    cube = demo_cube(n_features=100)
    assert sorted(cube.layers) == ["counts", "detected", "linear_sum", "log_sum", "log_sum_sq"]
    detected = np.asarray(cube.layers["detected"])
    assert cube.n_cells is not None
    assert (detected <= cube.n_cells.T[:, :, None]).all()
    assert np.asarray(cube.layers["log_sum_sq"]).min() >= 0
