"""Derived assays: grouped and melded values against numpy, the pending protocol, and its repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import pytest
import zarr

from cytearc import DataStore, SparseToZarr
from cytearc.datasets import write_store
from cytearc.errors import (
    OperationArgumentError,
    PendingAssayError,
    ReadOnlyStoreError,
    ReservedColumnError,
)
from cytearc.testing import write_membership
from cytearc.tools import SubsetZarr

if TYPE_CHECKING:
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}


def _store(tmp_path: Path) -> DataStore:
    path = write_store(tmp_path / "ds.zarr", n_cells=400, n_genes=600, cluster="threads")
    ds = DataStore(path, zarr_mode="r+", **THREADS)
    sets = np.array([f"set{i % 7}" if i % 5 else None for i in range(600)], dtype=object)
    ds.RNA.features.insert("set", sets)
    return ds


def test_grouped_values_equal_numpy(tmp_path: Path) -> None:
    ds = _store(tmp_path)
    fingerprint = ds.dataset_fingerprint
    write_membership(ds.root.store.root, "RNA", np.ones(400, dtype=bool))  # type: ignore[attr-defined]
    ds = DataStore(ds.where, zarr_mode="r+", **THREADS)
    assert ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets") == "Sets"
    sets = ds.RNA.features.fetch_series("set")
    order = pd.unique(sets.dropna())
    counts = ds.RNA.counts.compute().astype(np.float64)
    expected = np.column_stack([counts[:, (sets == s).to_numpy()].sum(axis=1) for s in order])
    np.testing.assert_array_equal(ds.Sets.counts.compute(), expected)
    assert ds.Sets.dtype == np.float64
    assert ds.Sets.features.fetch_all("ids").tolist() == list(order)
    assert ds.Sets.derived["operation"] == "add_grouped_assay"  # type: ignore[index]
    assert ds.assay_types["Sets"] == "Assay"
    assert ds.cells.attributes("Sets_I")["role"] == "assay_membership"
    reopened = DataStore(ds.where, **THREADS)
    assert reopened.dataset_fingerprint == fingerprint
    assert reopened.verify().ok


def test_refusals_before_computing(tmp_path: Path) -> None:
    ds = _store(tmp_path)
    with pytest.raises(ReadOnlyStoreError):
        DataStore(ds.where, **THREADS).add_grouped_assay(
            from_assay="RNA", group_key="set", assay_label="S"
        )
    with pytest.raises(OperationArgumentError, match="already an assay"):
        ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="RNA")
    ds.cells.insert("S_I", np.ones(400, dtype=bool))
    with pytest.raises(ReservedColumnError, match="S_I"):
        ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="S")
    with pytest.raises(KeyError, match="nope"):
        ds.add_grouped_assay(from_assay="RNA", group_key="nope", assay_label="T")
    assert sorted(ds.assays) == ["RNA"]
    assert "T" not in zarr.open_group(ds.where, mode="r")


def test_an_interrupted_assay_is_pending_until_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = _store(tmp_path)
    from cytearc.ops import derived  # noqa: PLC0415

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(derived, "write_summaries", fail)
    with pytest.raises(RuntimeError):
        ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets")
    monkeypatch.undo()
    again = DataStore(ds.where, zarr_mode="r+", **THREADS)
    assert list(again.assays) == ["RNA"]
    assert again.pending_assays == ["Sets"]
    with pytest.raises(ReservedColumnError):
        again.cells.insert("Sets_I", np.ones(400, dtype=bool))
    with pytest.raises(PendingAssayError, match="discard_interrupted_assay"):
        SubsetZarr(ds.where, tmp_path / "sub.zarr", cells=np.arange(10), **THREADS).dump()
    with pytest.raises(OperationArgumentError, match="published assay"):
        again.discard_interrupted_assay("RNA")
    again.discard_interrupted_assay("Sets")
    root = zarr.open_group(ds.where, mode="r")
    assert "Sets" not in root
    assert "Sets" not in root["matrices"]
    assert "Sets" not in root.attrs["assayTypes"]
    assert again.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets") == "Sets"


_CHILD = """
import sys
from cytearc import DataStore
ds = DataStore(sys.argv[1], zarr_mode="r+", cluster="threads", show_progress=False)
ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets")
"""


def test_a_sigkilled_writer_leaves_a_pending_assay(tmp_path: Path) -> None:
    ds = _store(tmp_path)
    marker = tmp_path / "ds.zarr" / "matrices" / "Sets" / "counts" / "zarr.json"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, ds.where], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    group = json.loads((tmp_path / "ds.zarr" / "Sets" / "zarr.json").read_text())
    if group["attributes"].get("is_assay"):
        pytest.skip("the writer finished before the kill")
    again = DataStore(ds.where, zarr_mode="r+", **THREADS)
    assert list(again.assays) == ["RNA"]
    assert again.pending_assays == ["Sets"]
    again.discard_interrupted_assay("Sets")
    again.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets")
    assert again.Sets.shape == (400, 7)


def test_melded_gene_activity_equals_an_overlap_loop(shared_data: Path, tmp_path: Path) -> None:
    with h5py.File(shared_data / "10x_multiome_pbmc_subset" / "test_rna_atac.h5mu", "r") as f:
        atac = ad.AnnData(
            X=ad.io.read_elem(f["mod/atac/X"]),
            obs=pd.DataFrame(index=f["mod/atac/obs/_index"].asstr()[()]),
            var=pd.DataFrame(index=f["mod/atac/var/_index"].asstr()[()]),
        )
        genes_var = pd.DataFrame(
            {key: f[f"mod/rna/var/{key}"].asstr()[()] for key in ("gene_ids", "interval")},
            index=f["mod/rna/var/_index"].asstr()[()],
        )
    features = pd.DataFrame(
        {
            "ids": atac.var_names.astype(str),
            "names": atac.var_names.astype(str),
            "feature_types": "Peaks",
        }
    )
    cells = pd.DataFrame({"ids": atac.obs_names.astype(str)})
    path = (
        SparseToZarr(
            atac.X, cells=cells, features=features, zarr_loc=tmp_path / "atac.zarr", **THREADS
        )
        .dump()
        .path
    )
    intervals = (
        genes_var["interval"]
        .astype(str)
        .str.extract(r"^(?P<chrom>[^:]+):(?P<start>\d+)-(?P<end>\d+)$")
    )
    genes = pd.DataFrame(
        {
            "chrom": intervals["chrom"],
            "start": intervals["start"].astype(int),
            "end": intervals["end"].astype(int),
            "gene": genes_var["gene_ids"].astype(str).to_numpy(),
            "name": genes_var.index.astype(str),
        }
    )
    ds = DataStore(path, zarr_mode="r+", **THREADS)
    ds.add_melded_assay(from_assay="ATAC", gene_coordinates=genes, upstream=2000)
    peaks = atac.var_names.astype(str).str.extract(
        r"^(?P<chrom>[^:]+):(?P<start>\d+)-(?P<end>\d+)$"
    )
    x = np.asarray(atac.X.toarray(), dtype=np.float64)
    columns, ids = [], []
    for _, gene in genes.iterrows():
        lo, hi = max(gene["start"] - 2000, 0), gene["end"]
        hit = (
            (peaks["chrom"] == gene["chrom"])
            & (peaks["start"].astype(int) <= hi)
            & (peaks["end"].astype(int) >= lo)
        )
        if hit.any():
            columns.append(x[:, hit.to_numpy()].sum(axis=1))
            ids.append(gene["gene"])
    assert ds.GeneActivity.features.fetch_all("ids").tolist() == ids
    np.testing.assert_allclose(ds.GeneActivity.counts.compute(), np.column_stack(columns))
    np.testing.assert_allclose(ds.GeneActivity.countsT.compute(), np.column_stack(columns).T)
    assert ds.assay_types["GeneActivity"] == "GeneActivity"
    with pytest.raises(OperationArgumentError, match="no peak overlaps"):
        ds.add_melded_assay(gene_coordinates=genes.assign(chrom="chrZ"), assay_label="None")


def test_a_derived_assay_stays_derived_through_subset_and_repack(tmp_path: Path) -> None:
    from cytearc.tools import repack_zarr  # noqa: PLC0415

    ds = _store(tmp_path)
    ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets")
    sub = DataStore(
        SubsetZarr(ds.where, tmp_path / "sub.zarr", cells=np.arange(100), **THREADS).dump()
    )
    assert sub.Sets.derived is not None
    plain = DataStore(
        SubsetZarr(
            ds.where, tmp_path / "plain.zarr", cells=np.arange(100), assays=["RNA"], **THREADS
        ).dump()
    )
    assert sub.dataset_fingerprint == plain.dataset_fingerprint
    repacked = DataStore(repack_zarr(ds.where, tmp_path / "r.zarr", data_only=True, **THREADS))
    assert repacked.Sets.derived == ds.Sets.derived
    assert repacked.dataset_fingerprint == ds.dataset_fingerprint
    assert repacked.verify().ok
