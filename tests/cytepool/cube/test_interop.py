"""A cube file is plain Zarr v3: zarr-python and TensorStore read every value CytePool wrote.

Values are compared with the in-memory cube through its public tables, layers
and cell numbers, decoded by the rules of the format alone (text as int32 codes
with ``levels`` and -1 for missing; datetimes and timedeltas as int64 counts),
never through ``read_cube``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import rfc8785
import tensorstore as ts
import zarr

from cytepool.cube import Cube, write_cube

if TYPE_CHECKING:
    from pathlib import Path

N_GROUPS, N_SAMPLES, N_FEATURES = 3, 4, 5000
COMPRESSIONS = ("gzip", "zstd", None)
AXES = {"samples": "sample", "groups": "group", "features": "feature"}


def _make_cube(
    n_groups: int = N_GROUPS, n_samples: int = N_SAMPLES, n_features: int = N_FEATURES
) -> Cube:
    """A cube (at most 4 samples) whose group 1 is all zero, with a column of every kind."""
    rng = np.random.default_rng(11)
    shape = (n_groups, n_samples, n_features)
    counts = rng.poisson(1.5, size=shape).astype(np.int64)
    counts[1] = 0
    when = ["2024-01-02T03:04:05", "NaT", "1970-01-01", "2030-12-31"]
    samples = pd.DataFrame(
        {
            "sample": [f"s{i}" for i in range(n_samples)],
            "condition": ["stim", None, "ctrl", "stim"][:n_samples],
            "treated": [True, False, False, True][:n_samples],
            "age": np.array([20, 31, 42, 53][:n_samples], dtype=np.int16),
            "weight": [70.5, np.nan, -0.0, 1e300][:n_samples],
            "collected": np.array(when[:n_samples], dtype="datetime64[s]"),
            "duration": pd.to_timedelta(np.arange(n_samples) * 1500, unit="ms"),
        }
    )
    chrom = pd.Categorical(rng.choice(["chrX", "chr1", "chr2"], n_features))
    return Cube(
        samples=samples,
        groups=pd.DataFrame(
            {"group": [f"G{i}" for i in range(n_groups)], "size": np.arange(n_groups) * 1.5}
        ),
        features=pd.DataFrame({"gene": [f"GENE{i}" for i in range(n_features)], "chrom": chrom}),
        layers={"counts": counts, "log_sum": np.log1p(counts * rng.random(shape))},
        n_cells=rng.integers(1, 100, size=(n_samples, n_groups)),
        normalization={"method": "library_size", "target_sum": 10000, "log": "log1p"},
        source={"tool": "test_interop"},
    )


@pytest.fixture(scope="module")
def cube() -> Cube:
    return _make_cube()


@pytest.fixture(scope="module")
def written(cube: Cube, tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, Path]:
    base = tmp_path_factory.mktemp("interop")
    return {c: write_cube(cube, base / f"{c}.cube.zarr", compression=c) for c in COMPRESSIONS}


def _metadata(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
    return doc


def _tensorstore_read(path: Path) -> np.ndarray:
    store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    return np.asarray(store.read().result())


def _expected_column(column: pd.Series, kind: str, levels: list[str] | None) -> np.ndarray:
    """The stored values of a table column, derived from the format's rules."""
    if kind == "text":
        assert levels is not None
        text = [None if pd.isna(v) else str(v) for v in column]
        first_seen = list(dict.fromkeys(v for v in text if v is not None))
        assert levels == first_seen, "levels are the distinct values in order of first appearance"
        return np.array([-1 if v is None else levels.index(v) for v in text], dtype=np.int32)
    values = column.to_numpy()
    if values.dtype.kind in "mM":
        unit, _ = np.datetime_data(values.dtype)
        base = "datetime64" if values.dtype.kind == "M" else "timedelta64"
        assert kind == f"{base}[{unit}]"
        return values.view(np.int64)
    assert kind == {"b": "bool", "i": "int", "u": "int", "f": "float"}[values.dtype.kind]
    return values


def _assert_same_bits(found: np.ndarray, expected: np.ndarray) -> None:
    assert found.dtype == expected.dtype, (found.dtype, expected.dtype)
    assert found.shape == expected.shape
    if found.dtype.kind == "f":
        found, expected = found.view(f"u{found.itemsize}"), expected.view(f"u{expected.itemsize}")
    np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_root_is_a_zarr_v3_group_with_the_cube_members(
    cube: Cube, written: dict[str | None, Path], compression: str | None
) -> None:
    """zarr.open_group reads the root: format attributes, three tables, n_cells and the layers."""
    root = zarr.open_group(written[compression], mode="r")
    assert root.metadata.zarr_format == 3
    assert root.attrs["format"] == "cytepool.cube"
    assert root.attrs["format_version"] == 1
    assert root.attrs["shape"] == {"groups": N_GROUPS, "samples": N_SAMPLES, "features": N_FEATURES}
    assert root.attrs["fingerprint"] == cube.fingerprint
    assert sorted(root.group_keys()) == ["features", "groups", "layers", "samples"]
    assert sorted(root.array_keys()) == ["n_cells"]
    layers = root["layers"]
    assert isinstance(layers, zarr.Group)
    assert sorted(layers.array_keys()) == sorted(cube.layers)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_table_arrays_hold_the_table_values(
    cube: Cube, written: dict[str | None, Path], compression: str | None
) -> None:
    """Every table column is a 1-D array named by the attributes, holding its encoded values."""
    path = written[compression]
    root = zarr.open_group(path, mode="r")
    for axis, dimension in AXES.items():
        table: pd.DataFrame = getattr(cube, axis)
        assert root.attrs["columns"][axis] == list(table.columns)
        names = root.attrs["arrays"][axis]
        assert len(names) == table.shape[1]
        group = root[axis]
        assert isinstance(group, zarr.Group)
        assert sorted(group.array_keys()) == sorted(names)
        for column, name in zip(table.columns, names, strict=True):
            array = group[name]
            assert isinstance(array, zarr.Array)
            assert array.shape == (len(table),)
            assert array.chunks == (len(table),)
            assert array.metadata.dimension_names == (dimension,)
            kind = array.attrs["kind"]
            levels = array.attrs.get("levels")
            assert (levels is not None) == (kind == "text"), (axis, column)
            expected = _expected_column(table[column], kind, levels)
            _assert_same_bits(np.asarray(array[...]), expected)
            _assert_same_bits(_tensorstore_read(path / axis / name), expected)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_n_cells_array_holds_the_cell_numbers(
    cube: Cube, written: dict[str | None, Path], compression: str | None
) -> None:
    """n_cells is an integer (sample, group) array in one chunk, read alike by zarr and TensorStore."""
    path = written[compression]
    array = zarr.open_array(path / "n_cells", mode="r")
    assert cube.n_cells is not None
    assert array.shape == (N_SAMPLES, N_GROUPS)
    assert array.chunks == (N_SAMPLES, N_GROUPS)
    assert array.metadata.dimension_names == ("sample", "group")
    assert np.dtype(array.dtype).kind in "iu"
    np.testing.assert_array_equal(np.asarray(array[...]), cube.n_cells)
    np.testing.assert_array_equal(_tensorstore_read(path / "n_cells"), cube.n_cells)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_layer_arrays_hold_the_layer_values(
    cube: Cube, written: dict[str | None, Path], compression: str | None
) -> None:
    """Each layer is a (group, sample, feature) array chunked (1, S, min(4096, F)) with exact values."""
    path = written[compression]
    for name, layer in cube.layers.items():
        array = zarr.open_array(path / "layers" / name, mode="r")
        assert array.shape == (N_GROUPS, N_SAMPLES, N_FEATURES)
        assert array.chunks == (1, N_SAMPLES, min(4096, N_FEATURES))
        assert array.metadata.dimension_names == ("group", "sample", "feature")
        _assert_same_bits(np.asarray(array[...]), np.asarray(layer))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_tensorstore_reads_every_layer_exactly(
    cube: Cube, written: dict[str | None, Path], compression: str | None
) -> None:
    """TensorStore's zarr3 driver reads every layer with the same dtype and bits."""
    path = written[compression]
    for name, layer in cube.layers.items():
        _assert_same_bits(_tensorstore_read(path / "layers" / name), np.asarray(layer))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_array_uses_bytes_little_endian_then_the_compression(
    cube: Cube, written: dict[str | None, Path], compression: str | None
) -> None:
    """Every array's codecs are bytes (little endian) followed by gzip, zstd or nothing."""
    path = written[compression]
    arrays = sorted(
        p.parent for p in path.rglob("zarr.json") if _metadata(p.parent)["node_type"] == "array"
    )
    n_columns = sum(getattr(cube, axis).shape[1] for axis in AXES)
    assert len(arrays) == n_columns + 1 + len(cube.layers)
    for array in arrays:
        meta = _metadata(array)
        codecs = meta["codecs"]
        assert [c["name"] for c in codecs] == ["bytes"] + ([compression] if compression else []), (
            array
        )
        endian = codecs[0].get("configuration", {}).get("endian")
        if np.dtype(meta["data_type"]).itemsize == 1:
            assert endian in {None, "little"}, array
        else:
            assert endian == "little", array
        assert meta["chunk_key_encoding"] == {
            "name": "default",
            "configuration": {"separator": "/"},
        }
        assert meta.get("storage_transformers", []) == []


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_all_zero_group_stores_no_chunk(
    written: dict[str | None, Path], compression: str | None
) -> None:
    """Chunks of zeros are not stored: group 1, all zero, has no chunk files."""
    path = written[compression]
    for name in ("counts", "log_sum"):
        chunks = path / "layers" / name / "c"
        assert not (chunks / "1").exists()
        stored = sorted(str(p.relative_to(chunks)) for p in chunks.rglob("*") if p.is_file())
        assert stored == ["0/0/0", "0/0/1", "2/0/0", "2/0/1"]


def test_wide_cube_has_a_chunk_per_4096_features(tmp_path: Path) -> None:
    """With 9,000 features a group's layer is stored in chunks j = 0, 1, 2 of shape (1, S, 4096)."""
    wide = _make_cube(n_groups=2, n_samples=3, n_features=9000)
    path = write_cube(wide, tmp_path / "wide.cube.zarr")
    for name, layer in wide.layers.items():
        array = zarr.open_array(path / "layers" / name, mode="r")
        assert array.chunks == (1, 3, 4096)
        assert _metadata(path / "layers" / name)["chunk_grid"]["configuration"]["chunk_shape"] == [
            1,
            3,
            4096,
        ]
        chunks = path / "layers" / name / "c"
        assert sorted(p.name for p in (chunks / "0" / "0").iterdir()) == ["0", "1", "2"]
        assert not (chunks / "1").exists()
        _assert_same_bits(_tensorstore_read(path / "layers" / name), np.asarray(layer))


def _sha256(data: bytes | memoryview) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_stored_digests_can_be_recomputed_from_the_arrays(
    written: dict[str | None, Path], compression: str | None
) -> None:
    """Layer, cell-number and normalization digests and the fingerprint follow from what Zarr reads."""
    path = written[compression]
    attrs = _metadata(path)["attributes"]
    digests = attrs["digests"]
    for name, entry in digests["layers"].items():
        values = _tensorstore_read(path / "layers" / name)
        word = "float64" if values.dtype.kind == "f" else "int64"
        assert entry["type"] == word
        canonical = values.astype("<f8") + 0.0 if word == "float64" else values.astype("<i8")
        assert entry["groups"] == [
            _sha256(np.ascontiguousarray(canonical[g]).data) for g in range(N_GROUPS)
        ]
    n_cells = _tensorstore_read(path / "n_cells").astype("<i8")
    assert digests["n_cells"] == _sha256(np.ascontiguousarray(n_cells).data)
    assert digests["normalization"] == _sha256(rfc8785.dumps(attrs["normalization"]))
    lines = [
        "cytepool cube fingerprint 1",
        f"shape {N_GROUPS} {N_SAMPLES} {N_FEATURES}",
        *(
            f"{key} {digests[key] or 'none'}"
            for key in ("samples", "groups", "features", "n_cells", "normalization")
        ),
        *(
            f"layer {name} {digests['layers'][name]['type']} {g} {d}"
            for name in sorted(digests["layers"])
            for g, d in enumerate(digests["layers"][name]["groups"])
        ),
    ]
    assert attrs["fingerprint"] == _sha256("".join(f"{line}\n" for line in lines).encode())
