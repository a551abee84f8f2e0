"""The fault kit itself: each mutation makes exactly its change, draws are reproducible, verdicts are right."""

from __future__ import annotations

import gzip
import json
import shutil
from typing import TYPE_CHECKING

import h5py
import numpy as np
import pandas as pd
import pytest

from cytearc._warnings import warn_user
from cytearc.errors import StoreFormatError
from cytearc.faults import (
    Delete,
    DropColumn,
    DropLine,
    EditAttribute,
    FlipBit,
    H5Delete,
    H5SetValue,
    H5Shorten,
    RepeatLine,
    SetField,
    SetFieldCount,
    SwapArrays,
    Truncate,
    classify,
    difference,
    draw_source_mutation,
    draw_tree_mutation,
    scan_sources,
    scan_tree,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

TABLE = b"cell,G1,G2,G3\nc1,1,0,2\nc2,0,3,0\nc3,4,0,1\n"


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    root = tmp_path / "sources"
    (root / "mtx").mkdir(parents=True)
    matrix = "%%MatrixMarket matrix coordinate integer general\n3 3 4\n1 1 1\n2 1 4\n2 2 3\n3 3 2\n"
    (root / "mtx" / "matrix.mtx.gz").write_bytes(gzip.compress(matrix.encode(), mtime=0))
    features = "".join(f"E{i}\tG{i}\tGene Expression\n" for i in range(3))
    (root / "mtx" / "features.tsv.gz").write_bytes(gzip.compress(features.encode(), mtime=0))
    (root / "counts.csv").write_bytes(TABLE)
    with h5py.File(root / "matrix.h5", "w") as f:
        m = f.create_group("matrix")
        m["data"], m["indices"], m["indptr"] = [1, 4, 3, 2], [0, 0, 1, 2], [0, 2, 3, 4]
        m["shape"] = [3, 3]
        m["data"].attrs["note"] = "kept"
    return root


def test_line_mutations_edit_gzipped_text_and_nothing_else(sources: Path) -> None:
    """Dropping, repeating and editing lines of a gzipped file change those lines only."""
    path = sources / "mtx" / "features.tsv.gz"
    before = _lines(path)
    DropLine(path="mtx/features.tsv.gz", line=1).apply(sources)
    assert _lines(path) == [before[0], before[2]]
    RepeatLine(path="mtx/features.tsv.gz", line=0).apply(sources)
    assert _lines(path) == [before[0], before[0], before[2]]
    SetFieldCount(path="mtx/features.tsv.gz", line=2, count=2, sep="\t").apply(sources)
    assert _lines(path)[2] == "E2\tG2"
    SetFieldCount(path="mtx/features.tsv.gz", line=0, count=4, sep="\t").apply(sources)
    assert _lines(path)[0] == f"{before[0]}\t1"


def test_table_mutations_change_one_cell_or_one_column_below_the_header(sources: Path) -> None:
    """SetField replaces one cell; DropColumn removes a field from every row but the header."""
    SetField(path="counts.csv", line=2, field=2, text="x", sep=",").apply(sources)
    assert (sources / "counts.csv").read_bytes() == TABLE.replace(b"c2,0,3,0", b"c2,0,x,0")
    (sources / "counts.csv").write_bytes(TABLE)
    DropColumn(path="counts.csv", column=1, sep=",").apply(sources)
    text = (sources / "counts.csv").read_text().splitlines()
    assert text == ["cell,G1,G2,G3", "c1,0,2", "c2,3,0", "c3,0,1"]


def test_h5_mutations_keep_what_they_do_not_change(sources: Path) -> None:
    """H5Shorten keeps dtype and attributes, H5SetValue sets one element, H5Delete removes one node."""
    H5Shorten(path="matrix.h5", key="matrix/data").apply(sources)
    H5SetValue(path="matrix.h5", key="matrix/indices", index=1, value=-1.0).apply(sources)
    H5Delete(path="matrix.h5", key="matrix/shape").apply(sources)
    with h5py.File(sources / "matrix.h5", "r") as f:
        data = f["matrix/data"]
        assert data[()].tolist() == [1, 4, 3]
        assert data.dtype == np.int64
        assert data.attrs["note"] == "kept"
        assert f["matrix/indices"][()].tolist() == [0, -1, 1, 2]
        assert sorted(f["matrix"]) == ["data", "indices", "indptr"]


def test_byte_mutations_and_a_missing_file(tmp_path: Path) -> None:
    """FlipBit flips one bit, Truncate keeps a prefix, Delete removes; a missing file is a named error."""
    (tmp_path / "chunk").write_bytes(bytes([0b1010, 7, 9]))
    FlipBit(path="chunk", offset=0, bit=1).apply(tmp_path)
    assert (tmp_path / "chunk").read_bytes() == bytes([0b1000, 7, 9])
    Truncate(path="chunk", size=2).apply(tmp_path)
    assert (tmp_path / "chunk").read_bytes() == bytes([0b1000, 7])
    Delete(path="chunk").apply(tmp_path)
    assert not (tmp_path / "chunk").exists()
    with pytest.raises(ValueError, match="expected a file to mutate"):
        Delete(path="chunk").apply(tmp_path)


def test_tree_mutations_edit_documents_and_swap_chunk_folders(tmp_path: Path) -> None:
    """EditAttribute sets or removes a nested value; SwapArrays exchanges two arrays' chunks, one of them absent."""
    for name, kind in (("a", "int32"), ("b", "int32")):
        (tmp_path / name).mkdir()
        doc = {"node_type": "array", "data_type": kind, "attributes": {"k": [1, 2]}}
        (tmp_path / name / "zarr.json").write_text(json.dumps(doc))
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "c" / "0").write_bytes(b"A")
    EditAttribute(path="a/zarr.json", keys=("attributes", "k", 0), remove=True).apply(tmp_path)
    EditAttribute(path="b/zarr.json", keys=("attributes", "k"), value="x").apply(tmp_path)
    assert json.loads((tmp_path / "a" / "zarr.json").read_text())["attributes"] == {"k": [2]}
    assert json.loads((tmp_path / "b" / "zarr.json").read_text())["attributes"] == {"k": "x"}
    assert scan_tree(tmp_path).alike() == [("a", "b")]
    SwapArrays(first="a", second="b").apply(tmp_path)
    assert not (tmp_path / "a" / "c").exists()
    assert (tmp_path / "b" / "c" / "0").read_bytes() == b"A"


def test_draws_are_reproducible_and_every_drawn_mutation_applies(
    sources: Path, tmp_path: Path
) -> None:
    """The same choices draw the same mutation; 300 seeded draws of sources and a tree all apply to a copy."""
    files = scan_sources(sources)
    tree_root = tmp_path / "tree"
    shutil.copytree(sources / "mtx", tree_root)
    (tree_root / "zarr.json").write_text(json.dumps({"node_type": "group", "attributes": {"a": 1}}))
    tree = scan_tree(tree_root)

    def chooser(seed: int) -> Callable[[int], int]:
        rng = np.random.default_rng(seed)
        return lambda n: int(rng.integers(n))

    assert draw_source_mutation(files, chooser(5)) == draw_source_mutation(files, chooser(5))
    kinds = set()
    for seed in range(300):
        mutation = (
            draw_source_mutation(files, chooser(seed))
            if seed % 2
            else draw_tree_mutation(tree, chooser(seed))
        )
        kinds.add(type(mutation).__name__)
        copy = tmp_path / f"copy-{seed}"
        shutil.copytree(sources if seed % 2 else tree_root, copy)
        mutation.apply(copy)
        shutil.rmtree(copy)
    assert kinds >= {"FlipBit", "Truncate", "Delete", "EditAttribute", "DropLine", "SetField"}
    assert kinds >= {"RepeatLine", "SetFieldCount", "DropColumn", "H5Delete", "H5SetValue"}


def test_difference_compares_values_not_layout() -> None:
    """Frames compare by column names and values (NaN equals NaN, dtype width ignored); order of keys counts."""
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", None]})
    same = pd.DataFrame({"a": np.array([1, 2], dtype=np.int8), "b": ["x", np.nan]})
    assert (
        difference({"t": frame, "v": np.array([np.nan])}, {"t": same, "v": np.array([np.nan])})
        is None
    )
    assert difference({"t": frame.rename(columns={"b": "c"})}, {"t": frame}) is not None
    assert difference({"b": 1, "a": 2}, {"a": 2, "b": 1}) is not None
    assert difference(np.array([1, 2]), np.array([1, 3])) == ": values differ"


def test_classify_names_crashes_and_warned_differences() -> None:
    """A foreign exception is a crash naming where it was raised; a difference is warned only by a warning naming the file."""

    def crash() -> object:
        values: dict[str, int] = {}
        return values["missing"]

    verdict = classify(crash, {})
    assert verdict.outcome == "crash"
    assert verdict.detail.startswith("KeyError: 'missing' [raised at ")

    def warns(text: str) -> object:
        warn_user(text)
        return {"x": 2}

    assert (
        classify(lambda: warns("/data/a.mtx: negative"), {"x": 1}, where="/data").outcome
        == "warned"
    )
    assert (
        classify(lambda: warns("elsewhere"), {"x": 1}, where="/data").outcome == "silent-difference"
    )

    def refuse() -> object:
        msg = "/data/ds.zarr: not a store"
        raise StoreFormatError(msg)

    assert classify(refuse, {}).outcome == "named-error"
