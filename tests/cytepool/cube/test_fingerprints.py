"""Fingerprints: an independent implementation of encoding version 1, invariances and sensitivity."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cytepool import Cube, read_cube, write_cube
from cytepool.testing import every_kind_table, example_cube

if TYPE_CHECKING:
    from pathlib import Path


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def _str(s: str) -> bytes:
    b = s.encode()
    return _u64(len(b)) + b


def _ref_value(kind: str, value: Any) -> bytes:  # noqa: PLR0911
    """One table value as the issue's encoding says, written from the text, row by row."""
    if kind == "text":
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return struct.pack("<q", -1)
        b = str(value).encode()
        return struct.pack("<q", len(b)) + b
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "int":
        return struct.pack("<q", int(value))
    if kind == "float":
        v = float(value)
        if math.isnan(v):
            return struct.pack("<Q", 0x7FF8000000000000)
        return struct.pack("<d", 0.0 if v == 0 else v)
    if pd.isna(value):
        return struct.pack("<q", -(2**63))
    unit = kind.split("[")[1].rstrip("]")
    return struct.pack(
        "<q",
        int(np.asarray(value).astype(f"{kind.split('[', maxsplit=1)[0]}[{unit}]").view(np.int64)),
    )


def _ref_kind(series: pd.Series) -> str:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype):
        return "text"
    if dtype.kind == "b":
        return "bool"
    if dtype.kind in "iu":
        return "int"
    if dtype.kind == "f":
        return "float"
    unit = np.datetime_data(dtype)[0]
    return f"{'datetime64' if dtype.kind == 'M' else 'timedelta64'}[{unit}]"


def _ref_table(table: pd.DataFrame) -> str:
    out = _u64(len(table)) + _u64(len(table.columns))
    for name in table.columns:
        kind = _ref_kind(table[name])
        out += _str(name) + _str(kind)
        values = table[name].astype(object).tolist() if kind == "text" else table[name].to_numpy()
        out += b"".join(_ref_value(kind, v) for v in values)
    return "sha256:" + hashlib.sha256(out).hexdigest()


def _ref_layer_group(values: np.ndarray) -> str:
    if values.dtype.kind == "f":
        data = b"".join(
            struct.pack("<d", 0.0 if v == 0 else float(v)) for v in values.ravel(order="C")
        )
    else:
        data = b"".join(struct.pack("<q", int(v)) for v in values.ravel(order="C"))
    return "sha256:" + hashlib.sha256(data).hexdigest()


def reference_fingerprint(cube: Cube) -> str:
    """The fingerprint computed from the issue's text with struct and hashlib only."""
    n_groups, n_samples, n_features = cube.shape
    n_cells = cube.n_cells
    norm = cube.normalization
    lines = [
        "cytepool cube fingerprint 1",
        f"shape {n_groups} {n_samples} {n_features}",
        f"samples {_ref_table(cube.samples)}",
        f"groups {_ref_table(cube.groups)}",
        f"features {_ref_table(cube.features)}",
        "n_cells "
        + (
            "none"
            if n_cells is None
            else "sha256:"
            + hashlib.sha256(
                b"".join(struct.pack("<q", int(v)) for v in n_cells.ravel())
            ).hexdigest()
        ),
        "normalization "
        + (
            "none"
            if norm is None
            else "sha256:"
            + hashlib.sha256(
                json.dumps(norm, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            ).hexdigest()
        ),
    ]
    for name in sorted(cube.layers):
        layer = np.asarray(cube.layers[name])
        word = "float64" if layer.dtype.kind == "f" else "int64"
        lines += [f"layer {name} {word} {g} {_ref_layer_group(layer[g])}" for g in range(n_groups)]
    return "sha256:" + hashlib.sha256("".join(f"{line}\n" for line in lines).encode()).hexdigest()


def test_fingerprint_matches_independent_implementation() -> None:
    """Every column kind, cell numbers, normalization and int/float layers hash as the spec says."""
    rng = np.random.default_rng(0)
    counts = rng.poisson(2, size=(3, 5, 7)).astype(np.uint16)
    floats = rng.normal(size=(3, 5, 7))
    floats[0, 0, 0] = -0.0
    cube = Cube(
        samples=every_kind_table(5, seed=1),
        groups=every_kind_table(3, seed=2),
        features=every_kind_table(7, seed=3),
        layers={"counts": counts, "zeta": floats, "flags": counts > 2},
        n_cells=rng.integers(0, 9, size=(5, 3)),
        normalization={"b": [1, "x"], "a": 2},
    )
    assert cube.fingerprint == reference_fingerprint(cube)


def test_bulk_fingerprint_matches_independent_implementation() -> None:
    """A bulk cube writes 'none' for cell numbers and normalization."""
    cube = example_cube(bulk=True)
    assert cube.fingerprint == reference_fingerprint(cube)


def test_negative_zero_and_nan_are_canonical() -> None:
    """-0.0 hashes as 0.0 in layers and tables; every NaN bit pattern in tables hashes alike."""
    base = example_cube(n_groups=1, n_samples=2, n_features=2, float_layers=False)
    nan_a = np.frombuffer(struct.pack("<Q", 0x7FF8000000000001), dtype="<f8")[0]

    def with_(layer_value: float, table_value: float) -> Cube:
        features = base.features.assign(score=[table_value, 1.0])
        log_sum = np.full((1, 2, 2), 1.0)
        log_sum[0, 0, 0] = layer_value
        return Cube(
            samples=base.samples,
            groups=base.groups,
            features=features,
            layers={"counts": np.asarray(base.layers["counts"]), "log_sum": log_sum},
        )

    assert with_(-0.0, -0.0).fingerprint == with_(0.0, 0.0).fingerprint
    assert with_(0.0, nan_a).fingerprint == with_(0.0, float("nan")).fingerprint


def _cube_from(counts: np.ndarray, floats: np.ndarray) -> Cube:
    n_groups, n_samples, n_features = counts.shape
    return Cube(
        samples=pd.DataFrame({"sample": [f"s{i}" for i in range(n_samples)]}),
        groups=pd.DataFrame({"group": [f"g{i}" for i in range(n_groups)]}),
        features=pd.DataFrame({"gene": [f"f{i}" for i in range(n_features)]}),
        layers={"counts": counts, "log_sum": floats},
        n_cells=np.ones((n_samples, n_groups), dtype=np.int32),
    )


shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 9))


@st.composite
def layer_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    shape = draw(shapes)
    counts = draw(hnp.arrays(np.uint8, shape, elements=st.integers(0, 255)))
    floats = draw(
        hnp.arrays(
            np.float64, shape, elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
        )
    )
    return counts, floats


@pytest.mark.slow
@given(
    pair=layer_pairs(), width=st.sampled_from([np.uint8, np.uint16, np.int32, np.int64, np.uint64])
)
def test_fingerprint_ignores_integer_width(
    pair: tuple[np.ndarray, np.ndarray], width: type
) -> None:
    """The same integer values give the same fingerprint in any integer dtype."""
    counts, floats = pair
    assert (
        _cube_from(counts, floats).fingerprint
        == _cube_from(counts.astype(width), floats).fingerprint
    )


@pytest.mark.slow
@given(pair=layer_pairs(), chunk=st.integers(1, 9))
def test_fingerprint_ignores_chunking(pair: tuple[np.ndarray, np.ndarray], chunk: int) -> None:
    """Dask layers of any chunking give the numpy fingerprint."""
    counts, floats = pair
    lazy = _cube_from(
        da.from_array(counts, chunks=(1, 2, chunk)), da.from_array(floats, chunks=(2, 1, chunk))
    )  # type: ignore[arg-type]
    assert lazy.fingerprint == _cube_from(counts, floats).fingerprint


@pytest.mark.slow
@given(pair=layer_pairs(), data=st.data())
def test_any_single_value_change_changes_fingerprint(
    pair: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    """Changing one layer value, one label or the cell numbers changes the fingerprint."""
    counts, floats = pair
    before = _cube_from(counts, floats).fingerprint
    index = tuple(data.draw(st.integers(0, n - 1)) for n in counts.shape)
    changed = counts.copy()
    changed[index] = (int(changed[index]) + 1) % 256
    assert _cube_from(changed, floats).fingerprint != before
    moved = floats.copy()
    moved[index] = moved[index] + 1.0 if abs(moved[index]) < 1e6 else 0.5
    assert _cube_from(counts, moved).fingerprint != before
    relabel = _cube_from(counts, floats)
    samples = relabel.samples
    samples.loc[0, "sample"] = "other"
    renamed = Cube(
        samples=samples,
        groups=relabel.groups,
        features=relabel.features,
        layers=dict(relabel.layers),
        n_cells=relabel.n_cells,
    )
    assert renamed.fingerprint != before


@pytest.mark.parametrize("change", ["layer name", "column name", "normalization key", "n_cells"])
def test_named_changes_change_fingerprint(change: str) -> None:
    """Layer names, column names, normalization keys and cell numbers are part of identity."""
    cube = example_cube()
    parts: dict[str, Any] = {
        "samples": cube.samples,
        "groups": cube.groups,
        "features": cube.features,
        "layers": dict(cube.layers),
        "n_cells": cube.n_cells,
        "normalization": cube.normalization,
    }
    if change == "layer name":
        parts["layers"]["log_sum_2"] = parts["layers"].pop("log_sum")
    elif change == "column name":
        parts["samples"] = parts["samples"].rename(columns={"donor": "Donor"})
    elif change == "normalization key":
        parts["normalization"] = {**parts["normalization"], "target": 1}
    else:
        parts["n_cells"] = parts["n_cells"] + np.eye(*parts["n_cells"].shape, dtype=int)
    assert Cube(**parts).fingerprint != cube.fingerprint


@pytest.mark.slow
@given(pair=layer_pairs(), compression=st.sampled_from(["gzip", "zstd", None]))
def test_fingerprint_ignores_compression(
    pair: tuple[np.ndarray, np.ndarray],
    compression: str | None,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A written and re-read cube has the same fingerprint whatever the compression."""
    counts, floats = pair
    cube = _cube_from(counts, floats)
    path: Path = tmp_path_factory.mktemp("fp") / "c.cube.zarr"
    write_cube(cube, path, compression=compression)  # type: ignore[arg-type]
    again = read_cube(path)
    assert again.fingerprint == cube.fingerprint
    assert again.verify_fingerprint() == cube.fingerprint


def test_digests_have_the_stored_form(cube: Cube) -> None:
    """Cube.digests lists table, cell-number, normalization and per-group layer digests."""
    digests = cube.digests
    assert set(digests) == {"samples", "groups", "features", "n_cells", "normalization", "layers"}
    assert digests["layers"]["counts"]["type"] == "int64"
    assert digests["layers"]["log_sum"]["type"] == "float64"
    assert len(digests["layers"]["counts"]["groups"]) == cube.shape[0]
    assert all(
        d.startswith("sha256:") and len(d) == 71 for d in digests["layers"]["counts"]["groups"]
    )
