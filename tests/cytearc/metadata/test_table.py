"""Cell and feature tables: NumPy and pandas views, insert, keys, and stores of the first encoding."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import zarr

from cytearc import DataStore, SparseToZarr
from cytearc.errors import (
    CyteArcError,
    InterruptedReplaceError,
    ReadOnlyStoreError,
    ReservedColumnError,
    StoreDamageError,
    StoreFormatError,
)
from cytearc.metadata.encoding import ENCODING_ATTRIBUTE
from cytearc.metadata.table import MetaData, write_table
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.engine.cluster import Engine

FIXTURES = Path(__file__).parent / "fixtures"
TIMES = ["2020-01-01T00:00", None, "2021-05-03T12:30", "2020-01-02T08:00"]


def _kinds() -> dict[str, tuple[pd.Series, np.ndarray]]:
    """Each column kind: the values written, and the NumPy array fetch_all documents for them."""
    when = pd.to_datetime(TIMES, format="ISO8601")
    return {
        "text": (pd.Series(["a", "b", "", "d"]), np.array(["a", "b", "", "d"], dtype=object)),
        "text_missing": (
            pd.Series(["a", None, "c", "d"]),
            np.array(["a", None, "c", "d"], dtype=object),
        ),
        "pandas_string": (
            pd.Series(["a", None, "c", "d"], dtype="string"),
            np.array(["a", None, "c", "d"], dtype=object),
        ),
        "categorical": (
            pd.Series(pd.Categorical(["T", "B", None, "T"], categories=["B", "T", "NK"])),
            np.array(["T", "B", None, "T"], dtype=object),
        ),
        "ordered": (
            pd.Series(
                pd.Categorical(
                    ["lo", "hi", "lo", "mid"], categories=["lo", "mid", "hi"], ordered=True
                )
            ),
            np.array(["lo", "hi", "lo", "mid"], dtype=object),
        ),
        "int_categories": (
            pd.Series(pd.Categorical([3, 1, 3, 1])),
            np.array([3, 1, 3, 1]),
        ),
        "bool": (pd.Series([True, False, True, True]), np.array([True, False, True, True])),
        "int": (pd.Series([1, 2, 3, 4], dtype=np.int32), np.array([1, 2, 3, 4], dtype=np.int32)),
        "float": (pd.Series([0.5, np.nan, 1.5, 2.0]), np.array([0.5, np.nan, 1.5, 2.0])),
        "Int64": (pd.Series([1, None, 3, 4], dtype="Int64"), np.array([1.0, np.nan, 3.0, 4.0])),
        "boolean": (
            pd.Series([True, None, False, True], dtype="boolean"),
            np.array([True, None, False, True], dtype=object),
        ),
        "datetime": (pd.Series(when), when.to_numpy()),
        "datetime_tz": (
            pd.Series(when.tz_localize("Europe/Paris")),
            when.tz_localize("Europe/Paris").tz_convert(None).to_numpy(),
        ),
        "timedelta": (
            pd.Series(pd.to_timedelta([1, None, 3, 4], unit="s")),
            pd.to_timedelta([1, None, 3, 4], unit="s").to_numpy(),
        ),
    }


def _table(tmp_path: Path, *, writable: bool = True) -> MetaData:
    frame = pd.DataFrame({"ids": [f"c{i}" for i in range(4)]})
    for name, (series, _) in _kinds().items():
        frame[name] = series
    group = zarr.open_group(tmp_path / "cells.zarr", mode="a")
    if "ids" not in group:
        write_table(group, frame, dimension="cell", where="cells")
    return MetaData(group, dimension="cell", where="cells", writable=writable)


def _plain(value: object) -> object:
    """A comparable form of an idiom's result: its type, dtype and values (NaN and NaT as "missing")."""
    if isinstance(value, np.ndarray | pd.Series | pd.Index):
        items = [_plain(v) for v in value.tolist()]
        return type(value).__name__, str(value.dtype), items
    if isinstance(value, list):
        return [_plain(v) for v in value]
    missing = value is pd.NaT or (isinstance(value, float | np.floating) and np.isnan(value))
    return "missing" if missing else value


def _outcome(idiom: Callable[[Any], object], values: object) -> object:
    try:
        return _plain(idiom(values))
    except (TypeError, ValueError) as error:
        return "raises", type(error).__name__


IDIOMS: dict[str, Callable[[Any], object]] = {
    "astype(str)": lambda v: v.astype(str),
    "tolist()": lambda v: v.tolist(),
    "pd.Index": pd.Index,
    "== list": lambda v: v == list(v),
    "pd.Series": pd.Series,
}


@pytest.mark.parametrize("name", list(_kinds()))
def test_common_idioms_work_on_every_column_kind(tmp_path: Path, name: str) -> None:
    """fetch_all and fetch behave as the documented NumPy array, fetch_series as the Series written."""
    table = _table(tmp_path)
    series, view = _kinds()[name]
    values = table.fetch_all(name)
    assert type(values) is np.ndarray
    for label, idiom in IDIOMS.items():
        assert _outcome(idiom, values) == _outcome(idiom, view), label
        fetched = table.fetch_series(name)
        assert _outcome(idiom, fetched) == _outcome(idiom, series.rename(name)), label
    assert values.astype(str).dtype.kind == "U"
    table.update_key(np.array([True, False, True, True]), key="I")
    keep = np.array([True, False, True, True])
    assert _plain(table.fetch(name)) == _plain(view[keep])
    subset = table.fetch_series(name, key="I")
    pd.testing.assert_series_equal(subset, series[keep].reset_index(drop=True).rename(name))


def test_to_pandas_keeps_every_dtype(tmp_path: Path) -> None:
    """to_pandas returns every column with the dtype, categories, order and missing values written."""
    frame = _table(tmp_path).to_pandas()
    assert list(frame.columns) == ["ids", *_kinds(), "I"]
    for name, (series, _) in _kinds().items():
        pd.testing.assert_series_equal(frame[name], series.rename(name))
    assert frame["I"].dtype == np.bool_


def test_insert_keeps_the_encoding_of_a_series(tmp_path: Path) -> None:
    """A categorical, datetime or nullable Series inserted by a user reads back with its dtype."""
    table = _table(tmp_path)
    for name, (series, _) in _kinds().items():
        table.insert(f"new_{name}", series.set_axis(list("wxyz")))
        pd.testing.assert_series_equal(
            table.fetch_series(f"new_{name}"), series.rename(f"new_{name}")
        )
    assert table.attributes("new_categorical")[ENCODING_ATTRIBUTE] == {
        "type": "categorical",
        "version": 1,
        "ordered": False,
    }


@pytest.mark.parametrize(
    ("values", "fill_value", "expected"),
    [
        (pd.Series([1, 2, 3], dtype=np.int32), None, pd.Series([1.0, np.nan, 2.0, 3.0])),
        (pd.Series([1, 2, 3], dtype=np.int32), -1, pd.Series([1, -1, 2, 3], dtype=np.int32)),
        (pd.Series([True, True, True]), None, pd.Series([True, False, True, True])),
        (pd.Series(["a", "b", "c"]), None, pd.Series(["a", None, "b", "c"], dtype=object)),
        (pd.Series(["a", "b", "c"]), "", pd.Series(["a", "", "b", "c"])),
        (
            pd.Series(pd.Categorical(["x", "y", "x"], categories=["y", "x"])),
            None,
            pd.Series(pd.Categorical(["x", None, "y", "x"], categories=["y", "x"])),
        ),
        (
            pd.Series(pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-03"])),
            None,
            pd.Series(pd.to_datetime(["2020-01-01", None, "2020-01-02", "2020-01-03"])),
        ),
        (
            pd.Series([1, 2, 3], dtype="Int64"),
            None,
            pd.Series([1, None, 2, 3], dtype="Int64"),
        ),
    ],
)
def test_insert_for_the_rows_of_a_key(
    tmp_path: Path, values: pd.Series, fill_value: object, expected: pd.Series
) -> None:
    """Values for the rows of a key fill the others with fill_value, or False or a missing value."""
    table = _table(tmp_path)
    table.update_key(np.array([True, False, True, True]), key="I")
    table.insert("x", values, fill_value=fill_value)
    pd.testing.assert_series_equal(table.fetch_series("x"), expected.rename("x"))


def test_insert_refusals_write_nothing(tmp_path: Path) -> None:
    """Bad fill values, lengths, names, attributes and unstorable values are refused before a write."""
    table = _table(tmp_path)
    before = tree_snapshot(tmp_path / "cells.zarr")
    table.update_key(np.array([True, False, True, True]), key="I")
    after_key = tree_snapshot(tmp_path / "cells.zarr")
    categorical = pd.Series(pd.Categorical(["x", "y", "x"]))
    with pytest.raises(CyteArcError, match="fill_value 'z' does not fit"):
        table.insert("x", categorical, fill_value="z")
    with pytest.raises(CyteArcError, match="fill_value 'z' does not fit"):
        table.insert("x", np.arange(3), fill_value="z")
    with pytest.raises(CyteArcError, match="2 values for 4 rows or the 3 rows"):
        table.insert("x", [1, 2])
    with pytest.raises(CyteArcError, match="without '/'"):
        table.insert("a/b", np.arange(4))
    with pytest.raises(CyteArcError, match="leave them out"):
        table.insert("x", np.arange(4), attributes={ENCODING_ATTRIBUTE: {"type": "int"}})
    with pytest.raises(CyteArcError, match="convert the column"):
        table.insert("x", pd.Series([b"a", b"b", b"c", b"d"]))
    with pytest.raises(CyteArcError, match="exists; pass overwrite=True"):
        table.insert("text", np.arange(4))
    with pytest.raises(ReservedColumnError):
        table.insert("ids", np.arange(4), overwrite=True)
    assert tree_snapshot(tmp_path / "cells.zarr") == after_key
    assert before != after_key


def test_overwrite_replaces_a_column_of_another_kind(tmp_path: Path) -> None:
    """overwrite=True turns a one-array column into a group column and back."""
    table = _table(tmp_path)
    table.insert("int", pd.Series(pd.Categorical(list("abab"))), overwrite=True)
    assert table.fetch_all("int").tolist() == list("abab")
    table.insert("int", np.arange(4), overwrite=True)
    assert table.fetch_all("int").tolist() == [0, 1, 2, 3]
    assert table.columns.count("int") == 1


def test_keys_drop_and_read_only(tmp_path: Path) -> None:
    """Keys are bool columns; nullable booleans only read as keys; drop protects ids and I; read-only refuses writes."""
    table = _table(tmp_path)
    table.insert("k", pd.Series([True, False, True, False], dtype="boolean"))
    assert table.fetch("int", key="k").tolist() == [1, 3]
    with pytest.raises(CyteArcError, match="nullable boolean"):
        table.update_key(np.array([True, True]), key="k")
    with pytest.raises(CyteArcError, match="must be boolean"):
        table.fetch("int", key="text")
    table.reset_key("I")
    table.drop("categorical")
    assert "categorical" not in table.columns
    assert "categorical" not in zarr.open_group(tmp_path / "cells.zarr", mode="r")
    with pytest.raises(ReservedColumnError):
        table.drop("ids")
    read_only = _table(tmp_path, writable=False)
    with pytest.raises(ReadOnlyStoreError):
        read_only.insert("y", np.arange(4))
    with pytest.raises(ReadOnlyStoreError):
        read_only.drop("text")


def test_write_table_validates_before_writing(tmp_path: Path) -> None:
    """Repeated or non-string names, a non-boolean I, and unstorable columns leave the group empty."""
    group = zarr.open_group(tmp_path / "t.zarr", mode="w")
    frames = {
        "appear more than once": pd.DataFrame([[1, 2]], columns=["ids", "ids"]),
        "not a non-empty string": pd.DataFrame({"ids": ["a"], 3: [1]}),
        "must be boolean": pd.DataFrame({"ids": ["a"], "I": [1]}),
        "convert the column": pd.DataFrame({"ids": ["a"], "x": [b"a"]}),
    }
    for match, frame in frames.items():
        with pytest.raises(CyteArcError, match=match):
            write_table(group, frame, dimension="cell", where="t")
        assert list(group.keys()) == []


# -- stores of the first encoding ----------------------------------------------------------


def fixture_tables() -> tuple[pd.DataFrame, pd.DataFrame, sp.csr_matrix]:
    """The source of fixtures/text_encoding_store.zarr (see fixtures/README.md)."""
    cells = pd.DataFrame(
        {
            "ids": ["AAAC-1", "AAAG-1", "AACT-1", "AAGT-1"],
            "sample": ["s1", None, "s2", "s1"],
            "cluster": pd.Categorical(["T", "B", None, "T"], categories=["B", "T", "NK"]),
            "stage": pd.Categorical(
                ["lo", "hi", "lo", "mid"], categories=["lo", "mid", "hi"], ordered=True
            ),
            "when": pd.to_datetime(
                ["2020-01-01T00:00:00", None, "2021-05-03T12:30:00", "2020-01-02T00:00:00"]
            ),
            "n_reads": pd.array([10, None, 30, 40], dtype="Int64"),
            "flag": [True, False, True, False],
            "score": [0.5, np.nan, 1.5, 2.0],
            "n": np.arange(4, dtype=np.int64),
        }
    )
    features = pd.DataFrame(
        {
            "ids": ["ENSG1", "ENSG2", "ENSG3"],
            "names": ["CD3E", "MS4A1", "ACTB"],
            "feature_types": ["Gene Expression"] * 3,
            "chrom": pd.Categorical(["chr11", "chr11", "chr7"]),
        }
    )
    matrix = sp.csr_matrix(np.array([[1, 0, 3], [0, 2, 0], [4, 0, 0], [0, 0, 5]]))
    return cells, features, matrix


def _first_encoding(series: pd.Series) -> pd.Series:
    """The first encoding's rule: numbers and bools as themselves, nullable numbers with NA as float64, the rest as text with ""."""
    if series.dtype.kind in "biuf" and not isinstance(series.dtype, pd.CategoricalDtype):
        return series.astype(np.float64) if series.isna().any() else series
    return pd.Series(["" if pd.isna(v) else str(v) for v in series.astype(object)], dtype=object)


def _copied_fixture(tmp_path: Path) -> Path:
    path = tmp_path / "old.zarr"
    shutil.copytree(FIXTURES / "text_encoding_store.zarr", path)
    return path


def test_store_of_the_first_encoding_reads_as_before(tmp_path: Path) -> None:
    """A store written before the column encoding opens and reads its text with "", and reading writes nothing."""
    path = _copied_fixture(tmp_path)
    before = tree_snapshot(path)
    ds = DataStore(path)
    cells, features, _ = fixture_tables()
    frame = ds.cells.to_pandas()
    for name in cells.columns:
        pd.testing.assert_series_equal(frame[name], _first_encoding(cells[name]).rename(name))
    genes = ds.RNA.features.to_pandas()
    for name in features.columns:
        pd.testing.assert_series_equal(genes[name], _first_encoding(features[name]).rename(name))
    ids = ds.cells.fetch_all("ids")
    assert ids.astype(str).tolist() == cells["ids"].tolist()
    assert (ids == cells["ids"].tolist()).all()
    assert pd.Index(ds.cells.fetch("cluster")).tolist() == ["T", "B", "", "T"]
    assert tree_snapshot(path) == before


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<Q", len(data)) + data


def _columns_digest(table: MetaData, names: tuple[str, ...]) -> bytes:
    """The documented column digest: str(name) then str(value) of every value, per column, in one SHA-256."""
    h = hashlib.sha256()
    for name in names:
        h.update(_text(name))
        for value in table.fetch_all(name).tolist():
            h.update(_text(value))
    return h.digest()


def test_dataset_fingerprint_recomputes_from_read_ids_and_a_new_import_keeps_it(
    tmp_path: Path, engine: Engine
) -> None:
    """The old store's fingerprint follows from its read ids and names; importing its source today gives it again."""
    ds = DataStore(_copied_fixture(tmp_path))
    h = hashlib.sha256(b"cytearc dataset fingerprint 1\n")
    h.update(_columns_digest(ds.cells, ("ids",)))
    h.update(_text("RNA") + _columns_digest(ds.RNA.features, ("ids", "names")))
    h.update(_text(ds.RNA.content_fingerprint))
    assert ds.dataset_fingerprint == "sha256:" + h.hexdigest()
    cells, features, matrix = fixture_tables()
    result = SparseToZarr(
        matrix,
        cells=cells,
        features=features,
        zarr_loc=tmp_path / "new.zarr",
        engine=engine,
        show_progress=False,
    ).dump()
    assert result.dataset_fingerprint == ds.dataset_fingerprint
    new = DataStore(result.path)
    assert new.cells.fetch_all("ids").tolist() == ds.cells.fetch_all("ids").tolist()
    pd.testing.assert_series_equal(
        new.cells.fetch_series("cluster"), cells["cluster"].rename("cluster")
    )
    pd.testing.assert_series_equal(new.cells.fetch_series("when"), cells["when"].rename("when"))


def test_staged_inserts_are_read_inside_and_written_only_on_success(tmp_path: Path) -> None:
    """Inside staged(), inserts read back; an error discards them, a clean exit writes them."""
    table = _table(tmp_path)
    before = list(table.columns)

    def fail_inside() -> None:
        with table.staged():
            table.insert("score", np.arange(table.n_rows, dtype=np.float64))
            np.testing.assert_array_equal(table.fetch_all("score"), np.arange(table.n_rows))
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail_inside()
    assert table.columns == before
    with table.staged():
        table.insert("score", np.arange(table.n_rows, dtype=np.float64))
        with pytest.raises(CyteArcError, match="inside a staged block"):
            table.drop("score")
    np.testing.assert_array_equal(table.fetch_all("score"), np.arange(table.n_rows))


def test_a_column_lost_mid_replace_can_be_dropped(tmp_path: Path) -> None:
    """A listed column whose node a killed writer deleted names the repair, and drop removes it."""
    table = _table(tmp_path)
    table.insert("score", np.arange(table.n_rows, dtype=np.float64))
    del table._group["score"]  # what a kill between delete and create leaves
    with pytest.raises(CyteArcError, match=r"listed .* but not stored .* \.drop\('score'\)"):
        table.fetch_all("score")
    table.drop("score")
    assert "score" not in table.columns


class _Killed(BaseException):
    """Stands for SIGKILL inside a commit: no handler runs, nothing after it is written."""


def _replace_killed_after(table: MetaData, monkeypatch: pytest.MonkeyPatch, *, writes: int) -> None:
    """A staged block replacing ``a`` and ``b`` and adding ``c``, killed after ``writes`` column writes."""
    import cytearc.metadata.table as module  # noqa: PLC0415

    real = module.write_column
    calls = 0

    def write(group: zarr.Group, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        if group is table.group:
            if calls == writes:
                raise _Killed
            calls += 1
        real(group, *args, **kwargs)

    monkeypatch.setattr(module, "write_column", write)

    def run() -> None:
        with table.staged():
            for name in ("a", "b", "c"):
                table.insert(name, np.full(table.n_rows, 2.0), overwrite=True)

    with pytest.raises(_Killed):
        run()
    monkeypatch.setattr(module, "write_column", real)


@pytest.mark.parametrize("writes", [0, 1, 2])
def test_a_commit_killed_while_replacing_columns_refuses_them_until_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    """Replaced columns never read as a mix of two writes: they are refused until rewritten or dropped."""
    table = _table(tmp_path)
    for name in ("a", "b"):
        table.insert(name, np.ones(table.n_rows))
    _replace_killed_after(table, monkeypatch, writes=writes)
    reopened = MetaData(table.group, dimension="cell", where="cells", writable=True)
    assert "c" not in reopened.columns  # added columns appear only with the last write
    for name in ("a", "b"):
        with pytest.raises(InterruptedReplaceError, match=r"\['a', 'b'\] together"):
            reopened.fetch_all(name)
    assert reopened.fetch_all("bool").dtype == bool  # other columns read as before
    with reopened.staged():  # the run again, which writes a but not b
        reopened.insert("a", np.full(reopened.n_rows, 3.0), overwrite=True)
    np.testing.assert_array_equal(reopened.fetch_all("a"), 3.0)
    with pytest.raises(InterruptedReplaceError, match=r"\['b'\] together"):
        reopened.fetch_all("b")
    reopened.insert("b", np.full(reopened.n_rows, 4.0), overwrite=True)
    np.testing.assert_array_equal(reopened.fetch_all("b"), 4.0)
    assert "cytearc:replacing" not in reopened.group.attrs


def test_a_column_left_mid_replace_can_be_dropped_and_verify_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drop removes a refused column; verify reports the table a killed commit left."""
    table = _table(tmp_path)
    for name in ("a", "b"):
        table.insert(name, np.ones(table.n_rows))
    _replace_killed_after(table, monkeypatch, writes=1)
    table.drop("a")
    assert table.group.attrs["cytearc:replacing"] == ["b"]
    table.drop("b")
    assert "cytearc:replacing" not in table.group.attrs
    store = _copied_fixture(tmp_path)
    ds = DataStore(store, zarr_mode="r+", cluster="threads", show_progress=False)
    ds.cells.insert("a", np.ones(ds.cells.n_rows))
    _replace_killed_after(ds.cells, monkeypatch, writes=0)
    report = DataStore(store, cluster="threads", show_progress=False).verify()
    assert report.damage is not None
    assert report.damage.array == "cellData"
    assert "cytearc:replacing" in report.damage.found


def test_a_flipped_bit_in_a_column_chunk_is_named(tmp_path: Path) -> None:
    """Column chunks carry a zstd checksum: a flipped bit raises StoreDamageError, not wrong values."""
    table = _table(tmp_path)
    table.insert("score", np.arange(table.n_rows, dtype=np.float64) + 0.5)
    (chunk,) = (
        p
        for p in (tmp_path / "cells.zarr" / "score").rglob("*")
        if p.is_file() and p.name != "zarr.json"
    )
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x10
    chunk.write_bytes(bytes(data))
    with pytest.raises(StoreDamageError, match=r"score.*cannot be decoded.*cytearc verify"):
        table.fetch_all("score")


def test_a_deleted_or_swapped_column_chunk_is_named(tmp_path: Path) -> None:
    """A column's digest catches swapped chunks and a deleted chunk (read as the fill value)."""
    table = _table(tmp_path)
    table.insert("a", np.arange(1, table.n_rows + 1, dtype=np.int64))
    table.insert("b", np.arange(10, 10 + table.n_rows, dtype=np.int64))
    root = tmp_path / "cells.zarr"
    (root / "a" / "c").rename(root / "a-chunks")
    (root / "b" / "c").rename(root / "a" / "c")
    (root / "a-chunks").rename(root / "b" / "c")
    for column in ("a", "b"):
        with pytest.raises(StoreDamageError, match=rf"cells/{column}: the column's values differ"):
            table.fetch_all(column)
    shutil.rmtree(root / "a" / "c")
    with pytest.raises(StoreDamageError, match="a chunk was deleted, replaced or edited"):
        table.fetch_all("a")


def test_key_updates_keep_the_digest(tmp_path: Path) -> None:
    """update_key and reset_key rewrite the key's digest with its values."""
    table = _table(tmp_path)
    table.update_key(np.array([True, False, True, False]), "I")
    np.testing.assert_array_equal(table.fetch_all("I"), [True, False, True, False])
    table.reset_key("I")
    assert table.fetch_all("I").all()


@pytest.mark.parametrize(
    "document", ["score/zarr.json", "kind/categories/zarr.json", "kind/zarr.json"]
)
def test_a_damaged_column_document_is_named(tmp_path: Path, document: str) -> None:
    """A truncated zarr.json of a column or of a member array is a StoreFormatError naming the column."""
    table = _table(tmp_path)
    table.insert("score", np.arange(table.n_rows, dtype=np.float64))
    table.insert("kind", pd.Categorical(["T", "B", "T", "B"]))
    path = tmp_path / "cells.zarr" / document
    path.write_bytes(path.read_bytes()[:40])
    column = document.split("/", maxsplit=1)[0]
    with pytest.raises(StoreFormatError, match=rf"cells(/{column})?.*zarr\.json.*cannot be read"):
        MetaData(table._group, dimension="cell", where="cells").fetch_all(column)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda c: c.remove("score"), id="name-removed"),
        pytest.param(lambda c: c.reverse(), id="order-changed"),
        pytest.param(lambda c: c.append("score"), id="name-repeated"),
    ],
)
def test_an_edited_column_list_is_named(tmp_path: Path, edit: Callable[[list[str]], None]) -> None:
    """cytearc:columns is written with its digest in one zarr.json write; an edit of the list alone is StoreDamageError."""
    table = _table(tmp_path)
    table.insert("score", np.arange(table.n_rows, dtype=np.float64))
    table.drop("score")
    table.insert("score", np.arange(table.n_rows, dtype=np.float64))
    MetaData(table._group, dimension="cell", where="cells")
    document_path = tmp_path / "cells.zarr" / "zarr.json"
    document = json.loads(document_path.read_text())
    edit(document["attributes"]["cytearc:columns"])
    document_path.write_text(json.dumps(document))
    with pytest.raises(StoreDamageError, match=r"cells: attribute 'cytearc:columns' differs"):
        MetaData(
            zarr.open_group(tmp_path / "cells.zarr", mode="r"), dimension="cell", where="cells"
        )
