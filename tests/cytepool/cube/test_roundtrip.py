"""Writing and reading cubes: every column kind, compressions, bulk cubes, chunking, laziness."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr

from cytepool import Cube, read_cube, write_cube
from cytepool.errors import CubeValueError
from cytepool.testing import (
    assert_cube_equal,
    every_kind_table,
    example_cube,
    raise_if_dask_computes,
)

if TYPE_CHECKING:
    from pathlib import Path


def _kinds_cube() -> Cube:
    rng = np.random.default_rng(3)
    samples = every_kind_table(6, seed=1)
    groups = every_kind_table(2, seed=2)
    features = every_kind_table(9, seed=3)
    counts = rng.poisson(3.0, size=(2, 6, 9)).astype(np.uint8)
    return Cube(
        samples=samples,
        groups=groups,
        features=features,
        layers={"counts": counts, "log_sum": np.log1p(counts.astype(np.float64))},
        n_cells=rng.integers(0, 50, size=(6, 2)),
        normalization={"method": "library_size", "target_sum": 1e4, "nested": {"a": [1, 2]}},
        source={"tool": "tests", "note": "ü"},
    )


@pytest.mark.parametrize("compression", ["gzip", "zstd", None])
def test_every_column_kind_round_trips(tmp_path: Path, compression: str | None) -> None:
    """Text (missing, non-ASCII), bool, int8..uint32, float with NaN, datetimes, timedeltas survive."""
    cube = _kinds_cube()
    path = write_cube(cube, tmp_path / "kinds.cube.zarr", compression=compression)  # type: ignore[arg-type]
    again = read_cube(path)
    assert_cube_equal(again, cube)
    assert again.fingerprint == cube.fingerprint
    samples = again.samples
    original = cube.samples
    assert list(samples.columns) == list(original.columns)
    assert samples["text"].isna().tolist() == original["text"].isna().tolist()
    assert samples["text"][0] == "ü∂ ☃"
    assert samples["category"].tolist() == original["category"].astype(str).tolist()
    for name in ("flag", "i8", "u16", "u32", "i64", "when_ns", "when_s", "duration"):
        pd.testing.assert_series_equal(samples[name], original[name])
    np.testing.assert_array_equal(samples["f64"], original["f64"])
    assert again.source == cube.source
    assert again.normalization == cube.normalization


def test_levels_in_order_of_first_appearance(tmp_path: Path) -> None:
    """Text codes index levels listed in order of first appearance, -1 for missing."""
    cube = example_cube(n_groups=1, n_samples=4, n_features=3)
    samples = pd.DataFrame({"sample": ["b", None, "a", "b"]})
    cube = Cube(
        samples=samples,
        groups=cube.groups,
        features=cube.features,
        layers={"counts": np.ones((1, 4, 3), np.int64)},
    )
    path = write_cube(cube, tmp_path / "levels.cube.zarr")
    root = zarr.open_group(path, mode="r")
    array = root["samples/sample"]
    assert isinstance(array, zarr.Array)
    assert array.attrs["levels"] == ["b", "a"]
    assert array.attrs["kind"] == "text"
    np.testing.assert_array_equal(array[:], [0, -1, 1, 0])
    assert array.dtype == np.int32


def test_bulk_cube_round_trips(tmp_path: Path) -> None:
    """A cube without cell numbers or normalization stores no n_cells array and reads back bulk."""
    cube = example_cube(bulk=True)
    path = write_cube(cube, tmp_path / "bulk.cube.zarr")
    assert not (path / "n_cells").exists()
    again = read_cube(path)
    assert again.is_bulk
    assert again.normalization is None
    assert again.digests["n_cells"] is None
    assert_cube_equal(again, cube)


def test_layers_are_lazy_and_chunked_as_stored(tmp_path: Path) -> None:
    """read_cube computes nothing, and layers are Dask arrays with the stored chunks."""
    cube = example_cube(n_groups=2, n_samples=3, n_features=9000, float_layers=False)
    path = write_cube(cube, tmp_path / "wide.cube.zarr")
    with raise_if_dask_computes():
        again = read_cube(path)
        counts = again.layers["counts"]
        subset = again.select(groups=["G1"]).layers["counts"]
    assert isinstance(counts, da.Array)
    assert isinstance(subset, da.Array)
    assert counts.chunks == ((1, 1), (3,), (4096, 4096, 808))
    np.testing.assert_array_equal(
        counts[1, :, 5000:5010].compute(), cube.layers["counts"][1, :, 5000:5010]
    )


def test_dask_layers_are_written_without_loading_whole(tmp_path: Path) -> None:
    """A cube built from lazy Dask layers writes and fingerprints like its numpy twin."""
    cube = example_cube(n_groups=3, n_samples=5, n_features=5000)
    with raise_if_dask_computes():
        lazy = Cube(
            samples=cube.samples,
            groups=cube.groups,
            features=cube.features,
            layers={
                n: da.from_array(np.asarray(x), chunks=(2, 5, 1000)) for n, x in cube.layers.items()
            },
            n_cells=cube.n_cells,
            normalization=cube.normalization,
        )
        assert isinstance(lazy.layers["counts"], da.Array)
    path = write_cube(lazy, tmp_path / "lazy.cube.zarr", compression="zstd")
    assert read_cube(path).fingerprint == cube.fingerprint == lazy.fingerprint


def test_bad_compression_is_refused(tmp_path: Path, cube: Cube) -> None:
    """An unknown compression name raises before anything is written."""
    with pytest.raises(CubeValueError, match="compression"):
        write_cube(cube, tmp_path / "x.cube.zarr", compression="lz4")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_provenance_and_source_are_stored_verbatim(tmp_path: Path, cube: Cube) -> None:
    """The source record and provenance written are the cube's, key for key."""
    path = write_cube(cube, tmp_path / "p.cube.zarr")
    attrs = zarr.open_group(path, mode="r").attrs.asdict()
    assert attrs["provenance"] == cube.provenance
    assert attrs["provenance"]["source"] == {"tool": "tests", "seed": 0}
    assert attrs["format"] == "cytepool.cube"
    assert attrs["format_version"] == 1
    assert attrs["fingerprint"] == cube.fingerprint
    assert attrs["digests"] == cube.digests
    assert attrs["columns"]["samples"] == ["sample", "donor"]
