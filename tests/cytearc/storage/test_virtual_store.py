"""Zarr reads of a composite's virtual count arrays (cytearc.storage.virtual_store).

A composite stores no counts; during a CyteArc open, reading
``store_root["matrices/RNA/counts"]`` through Zarr computes each shard from
the sources. The reference is a merged copy (DataStoreMerge) and numpy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import zarr

from cytearc import DataStore
from cytearc.errors import ReadOnlyStoreError
from cytearc.io.importer import write_store as import_store
from cytearc.io.sources import SparseSource
from cytearc.storage.layout import CountLayout
from cytearc.tools import DataStoreMerge, create_composite

SMALL = CountLayout(unit_bytes=2**13, chunk_bytes=2**11)
"""Shards of a few rows, so a read crosses shards and sources."""


def _source(folder: Path, name: str, *, n_cells: int, genes: range, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    counts = sp.random(
        n_cells, len(genes), density=0.2, random_state=rng, format="csr", dtype=np.float64
    )
    counts.data = np.ceil(counts.data * 40)
    cells = pd.DataFrame({"ids": [f"{name}-{i}" for i in range(n_cells)]})
    features = pd.DataFrame(
        {
            "ids": [f"ENSG{g:05d}" for g in genes],
            "names": [f"G{g}" for g in genes],
            "feature_types": ["Gene Expression"] * len(genes),
        }
    )
    source = SparseSource(counts.astype(np.uint16), cells, features)
    path = folder / f"{name}.zarr"
    import_store(source, path, layout=SMALL, cluster="threads", show_progress=False)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("virtual-store")
    sources = {
        "a": _source(folder, "a", n_cells=70, genes=range(90), seed=0),
        "b": _source(folder, "b", n_cells=45, genes=range(30, 120), seed=1),
    }
    options = {"cluster": "threads", "show_progress": False}
    composite = create_composite(folder / "ab.zarr", sources, **options)
    merged = DataStoreMerge(
        list(sources.values()), folder / "m.zarr", names=list(sources), **options
    ).dump()
    return Path(composite), Path(merged)


def test_zarr_reads_the_computed_chunks_of_both_orientations(stores: tuple[Path, Path]) -> None:
    """Every region through Zarr equals the merged copy's counts; bare Zarr still finds none."""
    composite, merged = stores
    copy = zarr.open_group(merged, mode="r")
    ds = DataStore(composite, cluster="threads", show_progress=False)
    for name in ("counts", "countsT"):
        virtual = ds.store_root[f"matrices/RNA/{name}"]
        stored = copy[f"matrices/RNA/{name}"]
        assert isinstance(virtual, zarr.Array)
        assert isinstance(stored, zarr.Array)
        assert virtual.shape == stored.shape
        assert virtual.dtype == stored.dtype
        assert virtual.shards == stored.shards
        assert virtual.shards is not None
        assert virtual.shards[0] < virtual.shape[0]  # the reads below cross shards
        np.testing.assert_array_equal(virtual[...], stored[...])
        np.testing.assert_array_equal(virtual[7:61, 11:100:3], stored[7:61, 11:100:3])
        rows = np.array([3, 0, 80, 114 if name == "counts" else 100])
        np.testing.assert_array_equal(
            virtual.get_orthogonal_selection((rows, slice(None))),
            stored.get_orthogonal_selection((rows, slice(None))),
        )
    assert "counts" in ds.store_root["matrices/RNA"]
    assert sorted(ds.store_root["matrices/RNA"].array_keys()) == ["counts", "countsT"]
    np.testing.assert_array_equal(
        ds.store_root["matrices/RNA/counts"][...], ds.RNA.counts.compute()
    )
    assert "counts" not in zarr.open_group(composite, mode="r")["matrices/RNA"]


def test_the_virtual_arrays_are_read_only_and_the_rest_stays_writable(
    stores: tuple[Path, Path], tmp_path: Path
) -> None:
    """Writes into a virtual array are refused and store nothing; artifacts and tables still write."""
    composite, _ = stores
    ds = DataStore(composite, zarr_mode="r+", cluster="threads", show_progress=False)
    virtual = ds.store_root["matrices/RNA/counts"]
    assert isinstance(virtual, zarr.Array)
    with pytest.raises(ReadOnlyStoreError, match="virtual count array"):
        virtual[0, 0] = 7
    with pytest.raises(ReadOnlyStoreError, match="virtual count array"):
        ds.store_root["matrices/RNA"].create_array("counts", shape=(1,), dtype="u1", overwrite=True)
    listed = sorted(p.relative_to(composite).as_posix() for p in composite.rglob("*"))
    assert not any(p.startswith("matrices/RNA/counts") for p in listed)
    ds.cells.insert("flag", np.arange(ds.cells.n_rows) % 2 == 0)
    assert DataStore(composite).cells.fetch_all("flag").sum() == (ds.cells.n_rows + 1) // 2
