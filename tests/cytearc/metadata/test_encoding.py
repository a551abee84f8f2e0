"""The column encoding on disk: each type's nodes, dtypes and attributes, read back losslessly, and refusals."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import zarr

from cytearc.errors import CyteArcError, StoreFormatError
from cytearc.metadata.encoding import (
    ENCODING_ATTRIBUTE,
    as_numpy,
    encode_column,
    read_column,
    write_column,
)

if TYPE_CHECKING:
    from pathlib import Path

N_ROWS = 5
NAT = np.iinfo(np.int64).min


def _columns() -> dict[str, pd.Series]:
    """One column of every kind a table stores, with missing values where the kind has them."""
    times = ["2020-01-01T00:00", None, "2021-05-03T12:30", "1999-12-31T23:59:59", "2020-01-02"]
    return {
        "string": pd.Series(["a", "", "é", "a", "b"]),
        "object_missing": pd.Series(["a", None, "c", np.nan, "e"]),
        "pandas_string": pd.Series(["a", None, "c", "d", "e"], dtype="string"),
        "bool": pd.Series([True, False, True, True, False]),
        "int8": pd.Series(np.array([-3, 0, 1, 127, -128], dtype=np.int8)),
        "uint64": pd.Series(np.array([0, 1, 2, 3, 2**64 - 1], dtype=np.uint64)),
        "float32": pd.Series(np.array([0.5, np.nan, -1.0, np.inf, 2.0], dtype=np.float32)),
        "Int64": pd.Series([1, None, 3, 4, None], dtype="Int64"),
        "UInt16": pd.Series([1, 2, 3, 4, 5], dtype="UInt16"),
        "Float64": pd.Series([1.5, None, 3.0, 4.0, 5.0], dtype="Float64"),
        "boolean": pd.Series([True, None, False, True, True], dtype="boolean"),
        "categorical": pd.Series(
            pd.Categorical(["T", "B", None, "T", "B"], categories=["B", "T", "NK"])
        ),
        "ordered": pd.Series(
            pd.Categorical(
                ["lo", "hi", "lo", "mid", None], categories=["lo", "mid", "hi"], ordered=True
            )
        ),
        "int_categories": pd.Series(pd.Categorical([3, 1, 3, None, 1], categories=[3, 1, 2])),
        "no_categories": pd.Series(pd.Categorical([None] * N_ROWS, categories=[])),
        "datetime": pd.Series(pd.to_datetime(times, format="ISO8601")),
        "datetime_s": pd.Series(pd.to_datetime(times, format="ISO8601").as_unit("s")),
        "datetime_tz": pd.Series(
            pd.to_datetime(times, format="ISO8601").tz_localize("Europe/Paris")
        ),
        "timedelta": pd.Series(pd.to_timedelta([1, None, 3, 4, 5], unit="ms").as_unit("ms")),
    }


def _written(tmp_path: Path, name: str, series: pd.Series) -> zarr.Group:
    group = zarr.open_group(tmp_path / "t.zarr", mode="a")
    encoded = encode_column(series, n_rows=len(series), where=f"t/{name}")
    write_column(group, name, encoded, dimension="cell", attributes={"note": name})
    return group


@pytest.mark.parametrize("name", list(_columns()))
def test_every_kind_reads_back_with_its_dtype(tmp_path: Path, name: str) -> None:
    """A column of each kind reads back equal, with its dtype, categories, order and missing values."""
    series = _columns()[name]
    group = _written(tmp_path, name, series)
    back = read_column(group[name], n_rows=N_ROWS, where=f"t/{name}")
    expected = series.astype(object) if name == "object_missing" else series
    if name == "object_missing":
        expected = expected.where(expected.notna(), None)
    pd.testing.assert_series_equal(back, expected)
    assert group[name].attrs["note"] == name


def _array_layout(path: Path) -> tuple[Any, ...]:
    doc = json.loads((path / "zarr.json").read_text())
    assert doc["node_type"] == "array"
    chunks = doc["chunk_grid"]["configuration"]["chunk_shape"]
    return doc["data_type"], tuple(doc["dimension_names"]), tuple(chunks)


def _node_layout(path: Path) -> dict[str, Any]:
    """What a Zarr v3 reader finds in the column's zarr.json files: each array's dtype, dimensions, chunks."""
    doc = json.loads((path / "zarr.json").read_text())
    if doc["node_type"] == "array":
        return {"": _array_layout(path)}
    return {p.name: _array_layout(p) for p in sorted(path.iterdir()) if p.is_dir()}


@pytest.mark.parametrize(
    ("name", "encoding", "layout"),
    [
        ("string", {"type": "string"}, {"": ("string", ("cell",), (5,))}),
        (
            "pandas_string",
            {"type": "nullable-string", "pandasDtype": "string"},
            {"values": ("string", ("cell",), (5,)), "mask": ("bool", ("cell",), (5,))},
        ),
        (
            "object_missing",
            {"type": "nullable-string", "pandasDtype": "object"},
            {"values": ("string", ("cell",), (5,)), "mask": ("bool", ("cell",), (5,))},
        ),
        ("bool", {"type": "bool"}, {"": ("bool", ("cell",), (5,))}),
        ("uint64", {"type": "int"}, {"": ("uint64", ("cell",), (5,))}),
        ("float32", {"type": "float"}, {"": ("float32", ("cell",), (5,))}),
        (
            "Int64",
            {"type": "nullable-integer"},
            {"values": ("int64", ("cell",), (5,)), "mask": ("bool", ("cell",), (5,))},
        ),
        (
            "boolean",
            {"type": "nullable-boolean"},
            {"values": ("bool", ("cell",), (5,)), "mask": ("bool", ("cell",), (5,))},
        ),
        (
            "ordered",
            {"type": "categorical", "ordered": True},
            {"codes": ("int8", ("cell",), (5,)), "categories": ("string", ("category",), (3,))},
        ),
        (
            "no_categories",
            {"type": "categorical", "ordered": False},
            {"codes": ("int8", ("cell",), (5,)), "categories": ("string", ("category",), (1,))},
        ),
        (
            "datetime_tz",
            {"type": "datetime", "unit": "ns", "timezone": "Europe/Paris"},
            {"": ("int64", ("cell",), (5,))},
        ),
        ("timedelta", {"type": "timedelta", "unit": "ms"}, {"": ("int64", ("cell",), (5,))}),
    ],
)
def test_stored_layout_is_the_documented_one(
    tmp_path: Path, name: str, encoding: dict[str, Any], layout: dict[str, Any]
) -> None:
    """Each type is the node, member arrays, dtypes, dimension names and attribute of docs/store-format.md."""
    group = _written(tmp_path, name, _columns()[name])
    assert group[name].attrs[ENCODING_ATTRIBUTE] == {**encoding, "version": 1}
    assert _node_layout(tmp_path / "t.zarr" / name) == layout


def test_stored_values_follow_the_missing_value_rules(tmp_path: Path) -> None:
    """Masks are True where missing with "", 0 or False beneath; codes -1; NaT is -2**63; datetimes are UTC."""
    columns = _columns()
    group = zarr.open_group(tmp_path / "t.zarr", mode="a")
    for name in ("pandas_string", "Int64", "boolean", "categorical", "datetime_tz", "timedelta"):
        _written(tmp_path, name, columns[name])
    assert group["pandas_string/values"][:].tolist() == ["a", "", "c", "d", "e"]
    assert group["pandas_string/mask"][:].tolist() == [False, True, False, False, False]
    assert group["Int64/values"][:].tolist() == [1, 0, 3, 4, 0]
    assert group["boolean/values"][:].tolist() == [True, False, False, True, True]
    assert group["categorical/codes"][:].tolist() == [1, 0, -1, 1, 0]
    assert group["categorical/categories"][:].tolist() == ["B", "T", "NK"]
    utc = columns["datetime_tz"].dt.tz_convert("UTC")
    stamps = [NAT if pd.isna(t) else t.value for t in utc]
    assert group["datetime_tz"][:].tolist() == stamps
    assert group["timedelta"][:].tolist() == [1, NAT, 3, 4, 5]


def test_numpy_view_of_every_kind() -> None:
    """as_numpy: text as str objects with None; categories at their codes; nullable ints as float NaN."""
    columns = _columns()
    view = {name: as_numpy(series) for name, series in columns.items()}
    assert view["object_missing"].tolist() == ["a", None, "c", None, "e"]
    assert view["pandas_string"].tolist() == ["a", None, "c", "d", "e"]
    assert view["categorical"].tolist() == ["T", "B", None, "T", "B"]
    assert view["int_categories"].dtype == np.float64
    np.testing.assert_array_equal(view["int_categories"], [3, 1, 3, np.nan, 1])
    assert view["no_categories"].tolist() == [None] * N_ROWS
    np.testing.assert_array_equal(view["Int64"], [1, np.nan, 3, 4, np.nan])
    assert view["UInt16"].dtype == np.uint16
    assert view["boolean"].tolist() == [True, None, False, True, True]
    assert view["datetime_tz"].dtype == np.dtype("datetime64[ns]")
    np.testing.assert_array_equal(
        view["datetime_tz"], columns["datetime_tz"].dt.tz_convert(None).to_numpy()
    )
    for name in ("string", "bool", "int8", "float32", "datetime", "timedelta"):
        np.testing.assert_array_equal(view[name], columns[name].to_numpy())


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (pd.Series([b"x", b"y"]), "bytes values"),
        (pd.Series(["a", 1], dtype=object), "mixed"),
        (pd.Series(pd.period_range("2020-01", periods=2, freq="M")), "period"),
        (pd.Series(pd.Categorical([pd.Timestamp(0), pd.Timestamp(1)])), "categories of dtype"),
        (pd.Series([1 + 2j, 3j]), "complex"),
    ],
)
def test_values_no_type_stores_are_refused(values: pd.Series, match: str) -> None:
    """Bytes, mixed objects, periods, datetime categories and complex numbers raise with a remedy."""
    with pytest.raises(CyteArcError, match=match):
        encode_column(values, n_rows=len(values), where="t/x")


def test_length_must_match_the_table() -> None:
    """A column of another length than the table is refused."""
    with pytest.raises(CyteArcError, match="3 values for 4 rows"):
        encode_column([1, 2, 3], n_rows=4, where="t/x")


def _edit_attribute(node_dir: Path, edit: Any) -> None:
    path = node_dir / "zarr.json"
    doc = json.loads(path.read_text())
    edit(doc["attributes"][ENCODING_ATTRIBUTE])
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("name", "edit", "match"),
    [
        (
            "string",
            lambda e: e.update({"type": "interval"}),
            "unknown column encoding type 'interval'.*upgrade",
        ),
        ("string", lambda e: e.update({"version": 2}), "version 2.*upgrade"),
        ("string", lambda e: e.pop("version"), "version None"),
        ("categorical", lambda e: e.pop("ordered"), "has the fields"),
        ("categorical", lambda e: e.update({"ordered": "yes"}), "ordered must be true or false"),
        ("datetime", lambda e: e.update({"unit": "D"}), "unit must be one of"),
        ("datetime", lambda e: e.update({"timezone": "Mars/Olympus"}), "timezone must be"),
        ("pandas_string", lambda e: e.update({"pandasDtype": "arrow"}), "pandasDtype"),
        (
            "string",
            lambda e: e.update({"type": "categorical", "ordered": False}),
            "stored as a group",
        ),
        ("Int64", lambda e: e.update({"type": "float"}), "stored as a 1-D array"),
        (
            "bool",
            lambda e: e.update({"type": "datetime", "unit": "s", "timezone": None}),
            "stores int64",
        ),
    ],
)
def test_unknown_or_mismatched_encodings_fail_closed(
    tmp_path: Path, name: str, edit: Any, match: str
) -> None:
    """An unknown type, version or field, or an encoding its node does not match, raises StoreFormatError."""
    group = _written(tmp_path, name, _columns()[name])
    _edit_attribute(tmp_path / "t.zarr" / name, edit)
    with pytest.raises(StoreFormatError, match=match):
        read_column(zarr.open_group(tmp_path / "t.zarr", mode="r")[name], n_rows=N_ROWS, where=name)
    del group


@pytest.mark.parametrize(
    ("name", "damage", "match"),
    [
        ("categorical", lambda g: g["codes"].__setitem__(0, 7), "codes must lie in -1..2"),
        ("categorical", lambda g: g["categories"].__setitem__(1, "B"), "unique"),
        ("Int64", lambda g: g.create_array("extra", shape=(1,), dtype="int8"), "found \\['extra'"),
        ("Int64", lambda g: g.__delitem__("mask"), "found \\['values'\\]"),
    ],
)
def test_damaged_groups_fail_closed(tmp_path: Path, name: str, damage: Any, match: str) -> None:
    """Codes out of range, repeated categories, or missing or extra member arrays raise StoreFormatError."""
    group = _written(tmp_path, name, _columns()[name])
    damage(group[name])
    with pytest.raises(StoreFormatError, match=match):
        read_column(group[name], n_rows=N_ROWS, where=name)


def test_unstamped_columns_read_in_the_first_encoding(tmp_path: Path) -> None:
    """Arrays without cytearc:encoding read as text (with its "" kept), bool or numbers, as first written."""
    group = zarr.open_group(tmp_path / "t.zarr", mode="w")
    group.create_array("text", shape=(3,), dtype=str)[:] = np.array(["a", "", "c"], dtype=object)
    group.create_array("x", data=np.array([1.5, np.nan, 2.0]))
    text = read_column(group["text"], n_rows=3, where="text")
    assert text.dtype == object
    assert text.tolist() == ["a", "", "c"]
    assert read_column(group["x"], n_rows=3, where="x").dtype == np.float64
    group.create_array("when", data=np.array(["2020-01-01"], dtype="datetime64[ns]"))
    with pytest.raises(StoreFormatError, match="text, bool, integer or float"):
        read_column(group["when"], n_rows=1, where="when")
    with pytest.raises(StoreFormatError, match="3 values for the table's 4 rows"):
        read_column(group["x"], n_rows=4, where="x")
