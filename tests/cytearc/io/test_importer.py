"""Importing in-memory matrices: counts, countsT, dtype, identity, destinations, and the DataStore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import zarr

from cytearc import DataStore, SparseToZarr
from cytearc.errors import CyteArcError, DestinationExistsError, LayoutError, NonFiniteCountsError
from cytearc.storage.layout import CountLayout
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from cytearc.engine.cluster import Engine
    from cytearc.io.importer import ImportResult

SMALL = CountLayout(unit_bytes=2**16, chunk_bytes=2**12)


def _tables(n_cells: int, n_features: int, *, adt: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    cells = pd.DataFrame(
        {
            "ids": [f"AAAC-{i}" for i in range(n_cells)],
            "sample": ["s1", "s2"] * (n_cells // 2) + ["s1"] * (n_cells % 2),
        }
    )
    types = ["Gene Expression"] * (n_features - adt) + ["Antibody Capture"] * adt
    features = pd.DataFrame(
        {
            "ids": [f"ENSG{i:05d}" for i in range(n_features)],
            "names": [f"GENE{i}" for i in range(n_features)],
            "feature_types": types,
        }
    )
    return cells, features


def _matrix(
    n_cells: int = 700, n_features: int = 120, *, seed: int = 0, high: int = 30
) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.integers(0, high, size=(n_cells, n_features)) * (
        rng.random((n_cells, n_features)) < 0.15
    )
    return sp.csr_matrix(dense)


def _import(
    matrix: Any, path: Path, engine: Engine, *, adt: int = 0, **options: Any
) -> ImportResult:
    cells, features = _tables(matrix.shape[0], matrix.shape[1], adt=adt)
    options.setdefault("layout", SMALL)
    return SparseToZarr(
        matrix,
        cells=cells,
        features=features,
        zarr_loc=path,
        engine=engine,
        show_progress=False,
        **options,
    ).dump()


def test_import_and_open(tmp_path: Path, engine: Engine) -> None:
    """Counts and countsT equal the matrix; tables, summaries and types are as imported."""
    matrix = _matrix()
    result = _import(matrix, tmp_path / "ds.zarr", engine)
    ds = DataStore(result.path)
    dense = matrix.toarray()
    np.testing.assert_array_equal(ds.assays["RNA"].counts.compute(), dense)
    np.testing.assert_array_equal(ds.assays["RNA"].countsT.compute(), dense.T)
    shards = ds.assays["RNA"]._counts.shards
    assert shards is not None
    assert ds.assays["RNA"].counts.chunks[0][0] == shards[0]
    assert ds.assay_types == {"RNA": "RNA"}
    assert ds.cells.fetch_all("ids")[3] == "AAAC-3"
    assert ds.cells.fetch("sample").tolist()[:2] == ["s1", "s2"]
    assert ds.assays["RNA"].features.fetch_all("names")[5] == "GENE5"
    np.testing.assert_array_equal(ds.assays["RNA"].summary("rowSums"), dense.sum(axis=1))
    np.testing.assert_array_equal(
        ds.assays["RNA"].summary("columnPositive"), (dense > 0).sum(axis=0)
    )
    assert ds.dataset_fingerprint == result.dataset_fingerprint


def test_an_import_releases_the_freed_heap_once(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the counts are written, the client and the workers trim their heaps."""
    calls: list[object] = []

    def release_memory(self: object) -> None:
        calls.append(self)

    monkeypatch.setattr(type(engine), "release_memory", release_memory)
    _import(_matrix(), tmp_path / "ds.zarr", engine)
    assert calls == [engine]


def test_feature_types_become_assays(tmp_path: Path, engine: Engine) -> None:
    """Gene Expression becomes RNA (with countsT) and Antibody Capture ADT (counts only)."""
    matrix = _matrix(n_features=110)
    result = _import(matrix, tmp_path / "ds.zarr", engine, adt=10)
    ds = DataStore(result.path)
    assert ds.assay_types == {"ADT": "ADT", "RNA": "RNA"}
    np.testing.assert_array_equal(ds.assays["ADT"].counts.compute(), matrix.toarray()[:, 100:])
    np.testing.assert_array_equal(ds.assays["RNA"].countsT.compute(), matrix.toarray()[:, :100].T)
    with pytest.raises(AttributeError, match="no countsT"):
        _ = ds.assays["ADT"].countsT


@pytest.mark.parametrize(
    ("high", "kind", "expected", "warning"),
    [
        (256, "int", "uint8", None),
        (257, "int", "uint16", None),
        (30, "float-integral", "uint8", None),
        (30, "float", "float32", "non-integer values where counts are integers"),
        (30, "negative", "int64", "holds 1 negative values"),
    ],
)
def test_count_dtype(
    tmp_path: Path, engine: Engine, *, high: int, kind: str, expected: str, warning: str | None
) -> None:
    """The 255/256 boundary, integral floats, real floats and negatives resolve as the seed says; the last two warn."""
    matrix = _matrix(high=high).astype(np.float32 if kind.startswith("float") else np.int64)
    if kind == "float":
        matrix = matrix * 0.5
    if kind == "negative":
        matrix = matrix.tolil()
        matrix[0, 0] = -3
        matrix = matrix.tocsr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _import(matrix, tmp_path / "ds.zarr", engine)
    assert [warning in str(w.message) for w in caught] == ([] if warning is None else [True])
    assert result.dtypes["RNA"] == expected
    ds = DataStore(result.path)
    np.testing.assert_array_equal(ds.assays["RNA"].counts.compute(), matrix.toarray())


def test_duplicates_are_summed(tmp_path: Path, engine: Engine) -> None:
    """Duplicate coordinates add up, in 64-bit integers."""
    coo = sp.coo_matrix(
        (np.array([200, 100, 7]), (np.array([0, 0, 3]), np.array([1, 1, 2]))), shape=(600, 120)
    )
    ds = DataStore(_import(coo, tmp_path / "ds.zarr", engine).path)
    assert ds.assays["RNA"].counts[0, 1].compute() == 300
    assert ds.assays["RNA"].counts.dtype == np.uint16


def test_nan_is_refused_before_the_destination_exists(tmp_path: Path, engine: Engine) -> None:
    """Non-finite counts raise before anything is created."""
    matrix = _matrix().astype(np.float64).tolil()
    matrix[5, 5] = np.nan
    matrix = matrix.tocsr()
    with pytest.raises(NonFiniteCountsError, match="finite"):
        _import(matrix, tmp_path / "ds.zarr", engine)
    assert not (tmp_path / "ds.zarr").exists()


def test_identity_ignores_layout_and_compressor(tmp_path: Path, engine: Engine) -> None:
    """Another layout policy and compressor give the same dataset and counts fingerprints."""
    matrix = _matrix()
    a = _import(matrix, tmp_path / "a.zarr", engine)
    b = _import(matrix, tmp_path / "b.zarr", engine, layout=SMALL.halved(), compression="zstd")
    assert a.dataset_fingerprint == b.dataset_fingerprint
    assert (
        DataStore(a.path).assays["RNA"].content_fingerprint
        == DataStore(b.path).assays["RNA"].content_fingerprint
    )


def test_counts_are_lz4_with_a_checksum_that_another_zarr_reads(
    tmp_path: Path, engine: Engine
) -> None:
    """The default codec is Blosc LZ4HC then crc32c; tensorstore reads both orientations as imported."""
    tensorstore = pytest.importorskip("tensorstore")
    from zarr.codecs import BloscCodec, Crc32cCodec, ShardingCodec  # noqa: PLC0415

    matrix = _matrix()
    result = _import(matrix, tmp_path / "ds.zarr", engine)
    for name, expected in (("counts", matrix.toarray()), ("countsT", matrix.toarray().T)):
        path = Path(result.path) / "matrices" / "RNA" / name
        (sharding,) = zarr.open_array(path).metadata.codecs
        assert isinstance(sharding, ShardingCodec)
        _, blosc, checksum = sharding.codecs
        assert isinstance(blosc, BloscCodec)
        assert (blosc.cname.value, blosc.clevel, blosc.shuffle.value) == ("lz4hc", 3, "shuffle")
        assert isinstance(checksum, Crc32cCodec)
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
        found = np.asarray(tensorstore.open(spec).result().read().result())
        np.testing.assert_array_equal(found, expected)


def test_read_only_open_changes_nothing(tmp_path: Path, engine: Engine) -> None:
    """Opening, reading every array and every table leaves every byte and path as it was."""
    path = _import(_matrix(), tmp_path / "ds.zarr", engine).path
    before = tree_snapshot(path)
    ds = DataStore(path, assay_types={"RNA": "RNA"})
    ds.assays["RNA"].counts.sum().compute()
    ds.assays["RNA"].countsT.sum().compute()
    ds.cells.to_pandas()
    with pytest.raises(PermissionError):
        ds.cells.insert("x", np.zeros(ds.cells.n_rows))
    assert tree_snapshot(path) == before


def _edit_json(path: Path, edit: Any) -> None:
    doc = json.loads(path.read_text())
    edit(doc["attributes"])
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("target", "edit", "error", "match"),
    [
        (
            "zarr.json",
            lambda a: a.update({"cytearc:complete": False}),
            CyteArcError,
            "did not finish",
        ),
        (
            "matrices/RNA/zarr.json",
            lambda a: a.update(
                {"cytearc:countMatrixLayout": {"unitBytes": 2**20, "chunkBytes": 2**12}}
            ),
            LayoutError,
            "disagrees|layout",
        ),
        (
            "matrices/RNA/countsT/zarr.json",
            lambda a: a.pop("cytearc:countMatrixLayout"),
            LayoutError,
            "countMatrixLayout",
        ),
        (
            "matrices/RNA/countSummaries/zarr.json",
            lambda a: a.update({"source_fingerprint": "sha256:00"}),
            CyteArcError,
            "countSummaries",
        ),
        ("zarr.json", lambda a: a.update({"assayTypes": ["RNA"]}), CyteArcError, "assayTypes"),
    ],
)
def test_tampered_metadata_fails_closed(  # noqa: PLR0917 (parametrized)
    tmp_path: Path, engine: Engine, target: str, edit: Any, error: type[Exception], match: str
) -> None:
    """Missing or mismatched layout, summaries, completion or types refuse the store or its assay."""
    path = _import(_matrix(), tmp_path / "ds.zarr", engine).path
    _edit_json(path / target, edit)
    with pytest.raises(error, match=match):
        DataStore(path).assays["RNA"]


def test_missing_counts_t_refuses_rna(tmp_path: Path, engine: Engine) -> None:
    """An RNA assay without countsT does not open, naming the remedy."""
    import shutil  # noqa: PLC0415

    path = _import(_matrix(), tmp_path / "ds.zarr", engine).path
    shutil.rmtree(path / "matrices" / "RNA" / "countsT")
    with pytest.raises(
        CyteArcError, match=r"countsT is missing.*re-import the source.*--data-only"
    ):
        DataStore(path).assays["RNA"]


def test_assay_types(tmp_path: Path, engine: Engine) -> None:
    """Explicit types must be presets; a read-only open cannot change one; a writable open records it."""
    path = _import(_matrix(), tmp_path / "ds.zarr", engine).path
    with pytest.raises(CyteArcError, match="not a preset"):
        DataStore(path, assay_types={"RNA": "Protein"})
    with pytest.raises(CyteArcError, match="not assays of the store"):
        DataStore(path, assay_types={"ATAC": "ATAC"})
    with pytest.raises(CyteArcError, match="zarr_mode='r\\+'"):
        DataStore(path, assay_types={"RNA": "URNA"})
    ds = DataStore(path, assay_types={"RNA": "URNA"}, zarr_mode="r+")
    assert ds.assays["RNA"].assayType == "URNA"
    assert DataStore(path).assay_types == {"RNA": "URNA"}


def test_membership_columns_are_reserved(tmp_path: Path, engine: Engine) -> None:
    """<assay>_I cannot be inserted, and inserted columns read back."""
    path = _import(_matrix(), tmp_path / "ds.zarr", engine).path
    ds = DataStore(path, zarr_mode="r+")
    with pytest.raises(CyteArcError, match="reserved"):
        ds.cells.insert("RNA_I", np.ones(ds.cells.n_rows, dtype=bool))
    ds.cells.insert("score", np.arange(ds.cells.n_rows, dtype=float))
    ds.cells.update_key(np.arange(ds.cells.n_rows) % 2 == 0, key="I")
    assert DataStore(path).cells.fetch("score").tolist()[:3] == [0.0, 2.0, 4.0]
    selection = ds.load_artifact(ds.select_measured_cells("RNA"))
    assert selection.read("mask").sum() == (ds.cells.n_rows + 1) // 2


def test_destination_rules(tmp_path: Path, engine: Engine) -> None:
    """An existing store needs overwrite=True; anything not a CyteArc store is never replaced."""
    matrix = _matrix()
    path = _import(matrix, tmp_path / "ds.zarr", engine).path
    with pytest.raises(DestinationExistsError) as info:
        _import(matrix, path, engine)
    assert isinstance(info.value, FileExistsError)
    _import(_matrix(seed=1), path, engine, overwrite=True)
    np.testing.assert_array_equal(
        DataStore(path).assays["RNA"].counts.compute(), _matrix(seed=1).toarray()
    )
    (path / ".DS_Store").write_text("x")
    with pytest.raises(DestinationExistsError, match=r"\.DS_Store"):
        _import(matrix, path, engine, overwrite=True)
    other = tmp_path / "notes"
    other.mkdir()
    (other / "a.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        _import(matrix, other, engine, overwrite=True)
    assert (other / "a.txt").read_text() == "keep"
    with pytest.raises(ValueError, match="inside the Zarr hierarchy"):
        _import(matrix, path / "matrices" / "inner.zarr", engine)


@pytest.mark.slow
def test_killed_import_leaves_nothing_that_opens(tmp_path: Path) -> None:
    """An import killed with SIGKILL mid-write leaves a store that refuses to open; a new import succeeds."""
    target = tmp_path / "ds.zarr"
    script = f"""
import numpy as np, pandas as pd, scipy.sparse as sp
from cytearc import SparseToZarr
from cytearc.storage.layout import CountLayout
rng = np.random.default_rng(0)
m = sp.random(60000, 400, density=0.2, format="csr", random_state=0)
m.data = np.floor(m.data * 50)
cells = pd.DataFrame({{"ids": [f"c{{i}}" for i in range(60000)]}})
features = pd.DataFrame({{"ids": [f"g{{i}}" for i in range(400)], "names": [f"G{{i}}" for i in range(400)]}})
SparseToZarr(m, cells=cells, features=features, zarr_loc={str(target)!r}, mem_budget="1GiB", workers=1,
             layout=CountLayout(unit_bytes=2**14, chunk_bytes=2**12), show_progress=False).dump()
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    counts = target / "matrices" / "RNA" / "counts" / "c"
    while time.monotonic() < deadline and not (counts.exists() and any(counts.iterdir())):
        assert proc.poll() is None, "the import finished before it could be killed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert (target / "zarr.json").exists()
    with pytest.raises(CyteArcError, match="did not finish"):
        DataStore(target)
    assert zarr.open_group(target, mode="r").attrs["cytearc:complete"] is False


@pytest.mark.slow
def test_layout_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    """A layout whose bands exceed a worker's memory is refused before the destination exists, naming the halving that fits."""
    from cytearc.engine.cluster import get_engine  # noqa: PLC0415
    from cytearc.errors import MemBudgetError  # noqa: PLC0415

    small = get_engine(cluster="threads", mem_budget="300MiB")
    matrix = sp.random(2000, 20000, density=0.001, format="csr", random_state=0)
    matrix.data = np.ceil(matrix.data * 5)
    big = CountLayout(unit_bytes=2**30, chunk_bytes=2**20)
    with pytest.raises(
        MemBudgetError,
        match=r"largest halving that fits is \{'unitBytes': \d+, 'chunkBytes': \d+\}",
    ) as info:
        _import(matrix, tmp_path / "ds.zarr", small, layout=big)
    assert "the given layout" in str(info.value)
    assert not (tmp_path / "ds.zarr").exists()
    halving = info.value.args[0].split("fits is ")[1].split("}")[0] + "}"
    fitted = CountLayout.from_json(json.loads(halving.replace("'", '"')), where="test")
    result = _import(matrix, tmp_path / "ds.zarr", small, layout=fitted)
    np.testing.assert_array_equal(
        DataStore(result.path).assays["RNA"].counts.compute(), matrix.toarray()
    )
