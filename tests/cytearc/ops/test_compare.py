"""compare.compute_bulk: pooled cubes against a numpy group-by-sum, on every scheduler."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from dask._task_spec import Alias
from dask.base import collections_to_expr
from dask.utils import key_split

from cytearc import DataStore
from cytearc.cli import main
from cytearc.datasets import SyntheticDataset, generate, write_store
from cytearc.engine.arrays import feature_bands
from cytearc.errors import OperationArgumentError, UnmeasuredCellsError
from cytearc.ops.compare import LAYERS, MIN_BANDS
from cytearc.storage.counts import BAND_BYTES
from cytearc.storage.layout import CountLayout
from cytearc.testing import write_membership
from cytepool import read_cube
from cytepool.testing import raise_if_dask_computes, tree_snapshot

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

SIZE = {"n_cells": 1500, "n_genes": 800, "seed": 3}


@pytest.fixture(scope="module")
def dataset() -> SyntheticDataset:
    return generate(**SIZE)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("bulk") / "ds.zarr", cluster="threads", **SIZE)


def _threads(path: Path, *, mode: str = "r") -> DataStore:
    return DataStore(path, zarr_mode=mode, cluster="threads", show_progress=False)


def _reference(
    dataset: SyntheticDataset, groups: list[str], samples: list[str], keep: np.ndarray
) -> dict[str, np.ndarray]:
    x = dataset.counts.toarray().astype(np.float64)
    library = x.sum(axis=1)
    v = x / library[:, None] * 1e4
    logs = np.log1p(v)
    g_of = dataset.cells["cell_type"].astype(str).to_numpy()
    s_of = dataset.cells["sample"].astype(str).to_numpy()
    shape = (len(groups), len(samples), x.shape[1])
    out = {
        k: np.zeros(shape) for k in ("counts", "detected", "linear_sum", "log_sum", "log_sum_sq")
    }
    n_cells = np.zeros((len(samples), len(groups)), dtype=np.int64)
    for gi, g in enumerate(groups):
        for si, s in enumerate(samples):
            rows = keep & (g_of == g) & (s_of == s)
            out["counts"][gi, si] = x[rows].sum(axis=0)
            out["detected"][gi, si] = (x[rows] > 0).sum(axis=0)
            out["linear_sum"][gi, si] = v[rows].sum(axis=0)
            out["log_sum"][gi, si] = logs[rows].sum(axis=0)
            out["log_sum_sq"][gi, si] = (logs[rows] ** 2).sum(axis=0)
            n_cells[si, gi] = rows.sum()
    out["n_cells"] = n_cells
    return out


def test_pooling_equals_numpy_group_by_sum(store: Path, dataset: SyntheticDataset) -> None:
    """Every layer and the cell numbers equal a numpy group-by-sum; tables are what users expect."""
    ds = _threads(store)
    with raise_if_dask_computes():
        cube = ds.compare.compute_bulk(sample_key="sample", group_key="cell_type")
    groups = [str(g) for g in cube.groups["group"]]
    samples = [str(s) for s in cube.samples["sample"]]
    assert groups == sorted(dataset.cells["cell_type"].astype(str).unique())
    assert list(cube.samples.columns) == ["sample", "donor", "condition"]
    truth = dataset.cells.drop_duplicates("sample").set_index("sample")
    for _, row in cube.samples.iterrows():
        assert row["donor"] == truth.loc[row["sample"], "donor"]
        assert row["condition"] == truth.loc[row["sample"], "condition"]
    reference = _reference(dataset, groups, samples, np.ones(SIZE["n_cells"], dtype=bool))
    np.testing.assert_array_equal(cube.n_cells, reference["n_cells"])
    np.testing.assert_array_equal(cube.groups["n_cells"], reference["n_cells"].sum(axis=0))
    for name in ("counts", "detected"):
        layer = np.asarray(cube.layers[name].compute(scheduler="threads"))
        assert layer.dtype == np.int64
        np.testing.assert_array_equal(layer, reference[name])
    for name in ("linear_sum", "log_sum", "log_sum_sq"):
        np.testing.assert_allclose(
            cube.layers[name].compute(scheduler="threads"), reference[name], rtol=1e-9, atol=1e-9
        )
    assert list(cube.features["id"]) == list(dataset.features["ids"])
    text = json.dumps(cube.provenance)
    for expected in (ds.dataset_fingerprint, ds.RNA.content_fingerprint, "cell_type", "sample"):
        assert expected in text


def test_cell_selection_and_missing_labels(store: Path, dataset: SyntheticDataset) -> None:
    """A selection narrows the pooled cells; the cube records its fingerprint."""
    ds = _threads(store, mode="r+")
    keep = np.arange(SIZE["n_cells"]) % 4 != 0
    cube = ds.compare.compute_bulk(sample_key="sample", group_key="cell_type", cell_selection=keep)
    groups = [str(g) for g in cube.groups["group"]]
    samples = [str(s) for s in cube.samples["sample"]]
    reference = _reference(dataset, groups, samples, keep)
    np.testing.assert_array_equal(cube.n_cells, reference["n_cells"])
    np.testing.assert_array_equal(cube.layers["counts"].compute(), reference["counts"])
    assert cube.n_cells.sum() == keep.sum()


@pytest.mark.slow
def test_same_fingerprint_on_threads_and_a_local_cluster(
    store: Path, tmp_path: Path, engine: Engine
) -> None:
    """Written on the threaded scheduler and on a 2-worker LocalCluster, the cubes are identical."""
    threads = _threads(store).compare.write_bulk(
        tmp_path / "t.cube.zarr", sample_key="sample", group_key="cell_type"
    )
    on_cluster = DataStore(store, show_progress=False).compare.write_bulk(
        tmp_path / "c.cube.zarr", sample_key="sample", group_key="cell_type"
    )
    assert read_cube(threads).fingerprint == read_cube(on_cluster).fingerprint
    read_cube(on_cluster).verify_fingerprint()


def test_bands_of_many_small_shards_give_the_same_cube_and_markers(
    store: Path, tmp_path: Path
) -> None:
    """Shards of one feature (countsT at a million cells) are read in bands: the same bits."""
    shards = shutil.copytree(store, tmp_path / "shards.zarr")
    small = write_store(
        tmp_path / "small.zarr",
        cluster="threads",
        layout=CountLayout(unit_bytes=2048, chunk_bytes=1024),
        **SIZE,
    )
    by_feature = _threads(small, mode="r+")
    counts_t = by_feature.assays["RNA"].countsT
    assert counts_t.chunks[0][0] == 1
    assert feature_bands(counts_t, target_bytes=BAND_BYTES).numblocks[0] == 1
    cubes = [
        _threads(path, mode="r+").compare.write_bulk(
            tmp_path / f"{name}.cube.zarr", sample_key="sample", group_key="cell_type"
        )
        for name, path in (("shards", shards), ("features", small))
    ]
    assert read_cube(cubes[0]).fingerprint == read_cube(cubes[1]).fingerprint
    markers = [
        _threads(path, mode="r+").markers.search("RNA", group_key="cell_type")
        for path in (shards, small)
    ]
    for name in ("score", "auroc", "mean", "pvalue"):
        np.testing.assert_array_equal(
            markers[0].read(name).view(np.uint8), markers[1].read(name).view(np.uint8)
        )


def test_a_band_is_one_task_and_each_layer_block_one_more(store: Path, tmp_path: Path) -> None:
    """Pooling's graph: a task per band of whole countsT shards, and one per layer and band.

    The cube's checks run in the layer's task (no alias tasks), and there are
    at least MIN_BANDS bands where countsT has that many shards.
    """
    small = write_store(
        tmp_path / "small.zarr",
        cluster="threads",
        layout=CountLayout(unit_bytes=2048, chunk_bytes=1024),
        **SIZE,
    )
    for path in (store, small):
        ds = _threads(path)
        cube = ds.compare.compute_bulk(sample_key="sample", group_key="cell_type")
        layers = [cube.layers[name] for name in sorted(cube.layers)]
        bands = layers[0].chunks[2]
        shard = ds.assays["RNA"].row_source("countsT").shards[0]
        assert all(b % shard == 0 for b in bands[:-1])
        assert len(bands) >= min(MIN_BANDS, -(-SIZE["n_genes"] // shard))
        graph = collections_to_expr(layers, optimize_graph=True).optimize().__dask_graph__()
        assert not [key for key, task in graph.items() if isinstance(task, Alias)]
        names = Counter(key_split(key) for key in graph)
        assert names["row-pieces"] == len(bands)
        assert names["checked"] == len(LAYERS) * len(bands)


def test_unmeasured_cells_are_refused(tmp_path: Path) -> None:
    """Pooling cells the assay did not measure raises before anything is written."""
    path = write_store(tmp_path / "ds.zarr", cluster="threads", n_cells=300, n_genes=600)
    write_membership(path, "RNA", np.arange(300) % 5 != 0)
    ds = _threads(path, mode="r+")
    before = tree_snapshot(path)
    with pytest.raises(UnmeasuredCellsError) as info:
        ds.compare.compute_bulk(sample_key="sample", group_key="cell_type")
    assert (info.value.unmeasured, info.value.operation) == (60, "compare.compute_bulk")
    assert "select_measured_cells" in str(info.value)
    assert tree_snapshot(path) == before
    cube = ds.compare.compute_bulk(
        sample_key="sample", group_key="cell_type", cell_selection=ds.select_measured_cells("RNA")
    )
    assert cube.n_cells.sum() == 240


def test_cli_pool(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cytearc pool` writes a verified cube and describes it as JSON; bad keys exit 1."""
    out = tmp_path / "pool.cube.zarr"
    args = [
        "pool",
        str(store),
        "--sample",
        "sample",
        "--group",
        "cell_type",
        "--cluster",
        "threads",
    ]
    assert main([*args, "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cube = read_cube(out)
    assert doc["fingerprint"] == cube.fingerprint
    assert doc["sampleColumns"] == ["sample", "donor", "condition"]
    assert isinstance(cube.samples, pd.DataFrame)
    assert main([*args[:3], "nothing", *args[4:], "-o", str(tmp_path / "x.cube.zarr")]) == 1
    assert "nothing" in capsys.readouterr().err


def test_a_float_group_column_is_refused(tmp_path: Path) -> None:
    """A float column of measurements (one group per value) is refused before anything is written."""
    path = write_store(tmp_path / "ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    ds = _threads(path, mode="r+")
    ds.cells.insert("score", np.linspace(0.0, 1.0, 300))
    ds.cells.insert("whole", np.arange(300) % 3 * 1.0)  # whole floats are labels
    before = tree_snapshot(path)
    with pytest.raises(OperationArgumentError, match=r"group_key 'score' is a float column"):
        ds.compare.compute_bulk(sample_key="sample", group_key="score")
    assert tree_snapshot(path) == before
    cube = ds.compare.compute_bulk(sample_key="sample", group_key="whole")
    assert cube.groups.iloc[:, 0].tolist() == ["0", "1", "2"]


def test_pool_refuses_a_read_only_url_and_a_cube_inside_the_store(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc pool -o https://...` (read-only) and a cube inside the source store exit 1 and write nothing."""
    monkeypatch.chdir(tmp_path)
    before = tree_snapshot(store)
    for output, message in (
        ("https://host/pbmc.cube.zarr", "the https protocol is read-only"),
        (str(store / "RNA" / "pbmc.cube.zarr"), "would be written inside the store"),
    ):
        code = main(
            [
                "pool",
                str(store),
                "--sample",
                "sample",
                "--group",
                "cell_type",
                "-o",
                output,
                "--cluster",
                "threads",
            ]
        )
        err = capsys.readouterr().err
        assert code == 1, err
        assert message in err
        assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    assert tree_snapshot(store) == before


def _sparse_product_sums(
    cells: np.ndarray, library: np.ndarray, codes: np.ndarray, n_codes: int, target_sum: float
) -> tuple[np.ndarray, np.ndarray]:
    """The five sums as scipy's indicator products compute them (the implementation before bincount)."""
    import scipy.sparse as sp  # noqa: PLC0415

    x = sp.csr_matrix(cells, dtype=np.float64)
    keep = np.flatnonzero(codes >= 0)
    indicator = sp.csr_matrix(
        (np.ones(len(keep)), (codes[keep], keep)), shape=(n_codes, x.shape[0])
    )
    scale = np.where(library > 0, target_sum / np.where(library > 0, library, 1), 0.0)
    linear = x.copy()
    linear.data *= np.repeat(scale, np.diff(x.indptr))
    logs = linear.copy()
    logs.data = np.log1p(logs.data)
    squares = logs.copy()
    squares.data **= 2
    detected = x.copy()
    detected.data[:] = 1.0
    pooled = [np.asarray((indicator @ m).toarray()) for m in (x, detected, linear, logs, squares)]
    return np.rint(np.stack(pooled[:2])).astype(np.int64), np.stack(pooled[2:])


@pytest.mark.parametrize("cells_axis", [0, 1])
def test_pair_sums_equal_scipys_indicator_products_bit_for_bit(cells_axis: int) -> None:
    """The bincount sums add each pair's cells in the order scipy's sparse product does: the same bits, either orientation."""
    from cytearc.ops.pool_blocks import _pair_sums  # noqa: PLC0415

    rng = np.random.default_rng(7)
    cells = (rng.negative_binomial(2, 0.3, size=(700, 90)) * (rng.random((700, 90)) < 0.15)).astype(
        np.uint16
    )
    cells[5] = 0  # an empty cell (library 0)
    library = cells.sum(axis=1).astype(np.float64)
    codes = rng.integers(-1, 6, size=700)
    expected = _sparse_product_sums(cells, library, codes, 6, 1e4)
    block = cells if cells_axis == 0 else np.ascontiguousarray(cells.T)
    got = _pair_sums(block, library, codes, n_codes=6, target_sum=1e4, cells_axis=cells_axis)
    assert got[0].dtype == np.int64
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1].tobytes() == expected[1].tobytes()
