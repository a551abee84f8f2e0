"""The normalized artifact's values are rebuilt from the counts: the same bits as stored ``data``, downstream too."""

from __future__ import annotations

import itertools
import shutil
from typing import TYPE_CHECKING, Any

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from cytearc.artifacts.store import SPILL_GROUP
from cytearc.errors import StaleArtifactError
from cytearc.ops.normalize import (
    FOLD_EVERY,
    band_statistics,
    folded_band_statistics,
    normalized_cells,
    normalized_values,
)
from cytearc.ops.normalized_blocks import (
    _band_statistics,
    merge_band_statistics,
    normalized_block,
    normalized_statistics,
    piece_statistics,
)
from cytepool.testing import raise_if_dask_computes

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc import DataStore
    from cytearc.artifacts import Artifact


def _bits(values: Any) -> np.ndarray:
    """The bytes of an array, so NaN, -0.0 and last-bit differences all count."""
    return np.ascontiguousarray(np.asarray(values)).view(np.uint8)


def _computed(ds: DataStore, norm: Artifact, **options: Any) -> np.ndarray:
    return np.asarray(normalized_values(ds, norm, **options).compute(scheduler="threads"))


@pytest.mark.parametrize("assay", ["RNA", "ADT", "ATAC"])
def test_rebuilt_values_equal_the_stored_data_bit_for_bit(planted, chain, assay: str) -> None:
    """Library size (RNA), CLR (ADT) and TF-IDF (ATAC): rebuilt values are the stored ``data``, chunk for chunk."""
    ds = chain.ds
    rebuilt = ds.features.normalize(assay, cell_selection=planted.mask)
    stored = ds.features.normalize(assay, cell_selection=planted.mask, store_values=True)
    assert rebuilt.ref != stored.ref
    assert "data" not in set(rebuilt.group.array_keys())
    assert stored.parameters == {**rebuilt.parameters, "storeValues": True}
    data = stored.array("data")
    values = normalized_values(ds, rebuilt)
    assert values.chunks[0][0] == data.chunks[0]
    assert normalized_cells(rebuilt) == normalized_cells(stored) == data.shape[0]
    np.testing.assert_array_equal(_bits(values.compute(scheduler="threads")), _bits(data[...]))
    for name in ("feature_sum", "feature_m2", "linear_sum", "linear_m2", "feature_nnz", "rows"):
        np.testing.assert_array_equal(_bits(rebuilt.read(name)), _bits(stored.read(name)))
    features = np.array([0, 3, 4, 11])
    np.testing.assert_array_equal(
        _bits(_computed(ds, rebuilt, features=features)), _bits(data[...][:, features])
    )


@pytest.mark.parametrize("assay", ["RNA", "ADT", "ATAC"])
def test_sparse_blocks_hold_the_same_values_per_counts_shard(planted, chain, assay: str) -> None:
    """``sparse=True``: CSR blocks of the counts' shards, the dense values' bits, from either layout."""
    ds = chain.ds
    rebuilt = ds.features.normalize(assay, cell_selection=planted.mask)
    stored = ds.features.normalize(assay, cell_selection=planted.mask, store_values=True)
    dense = _computed(ds, rebuilt)
    features = np.array([11, 0, 4, 3])
    for norm in (rebuilt, stored):
        for columns in (None, features):
            values = normalized_values(ds, norm, features=columns, sparse=True)
            blocks = list(dask.compute(*values.to_delayed().ravel(), scheduler="threads"))
            assert all(sp.isspmatrix_csr(b) and b.has_sorted_indices for b in blocks)
            assert all(b.dtype == np.float32 and (b.data != 0).all() for b in blocks)
            assert [b.shape[0] for b in blocks] == list(values.chunks[0])
            expected = dense if columns is None else dense[:, columns]
            np.testing.assert_array_equal(
                _bits(sp.vstack(blocks).toarray()), _bits(expected), err_msg=f"{norm.ref} {columns}"
            )
    assert len(values.chunks[0]) == len(ds.assays[assay].counts.chunks[0])


def test_downstream_results_do_not_depend_on_the_layout(planted, chain) -> None:
    """HVGs, PCA, the kNN graph, Leiden and markers from rebuilt values equal those from stored ``data``."""
    ds = chain.ds
    results = {}
    for store_values in (False, True):
        norm = ds.features.normalize("RNA", cell_selection=planted.mask, store_values=store_values)
        hv = ds.features.hvgs(norm, n_top=100)
        pca = ds.reduce.pca(norm, hv, n_comps=10, max_value=10)
        graph = ds.graph.neighbors(pca, k=10)
        label = f"layout_{int(store_values)}"
        ds.cluster.leiden(graph, label=label)
        markers = ds.markers.search("RNA", group_key=label, cell_selection=planted.mask)
        results[store_values] = {
            "features": hv.read("features"),
            **{name: pca.read(name) for name in ("coords", "loadings", "explained_variance")},
            **{name: graph.read(name) for name in ("indices", "distances", "conn_data")},
            "labels": ds.cells.fetch_all(label),
            "score": markers.read("score"),
        }
    for name, value in results[False].items():
        np.testing.assert_array_equal(_bits(value), _bits(results[True][name]), err_msg=name)


def test_values_build_lazily(planted, chain) -> None:
    """normalized_values builds a graph and reads nothing."""
    with raise_if_dask_computes():
        values = normalized_values(chain.ds, chain.norm, features=np.arange(10))
    assert values.shape == (planted.mask.sum(), 10)


def test_values_of_other_counts_are_refused(planted, chain, tmp_path: Path, open_threads) -> None:
    """Counts rewritten under the artifact: rebuilding its values raises and names the remedy."""
    copy = tmp_path / "copy.zarr"
    shutil.copytree(planted.path, copy)
    ds = open_threads(copy, zarr_mode="r+")
    norm = ds.load_artifact(chain.norm.ref)
    np.testing.assert_array_equal(_computed(ds, norm), _computed(chain.ds, chain.norm))
    other = "sha256:" + "0" * 64
    matrix = zarr.open_group(copy / "matrices" / "RNA", mode="r+")
    matrix["counts"].attrs["content_fingerprint"] = other
    matrix["countSummaries"].attrs["source_fingerprint"] = other
    changed = open_threads(copy, zarr_mode="r+")
    with pytest.raises(StaleArtifactError, match="invalidate_cache=True") as info:
        normalized_values(changed, changed.load_artifact(chain.norm.ref))
    assert str(chain.norm.ref) in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("mode", ["exact", "randomized"])
def test_pca_rebuilds_the_values_once_and_spills_nothing(
    planted, chain, normalized_blocks: list[int], mode: str
) -> None:
    """PCA normalizes each counts block once (later passes read the spill); no scratch is published."""
    pca = chain.ds.reduce.pca(chain.norm, chain.hvgs, n_comps=10, mode=mode, invalidate_cache=True)
    blocks = len(chain.ds.assays["RNA"].counts.chunks[0])
    assert (
        blocks <= len(normalized_blocks) <= blocks + 1
    )  # one per block (and at most one for Dask's meta)
    assert SPILL_GROUP not in pca.group
    assert set(pca.group.group_keys()) == set()
    if mode == "exact":
        np.testing.assert_array_equal(_bits(pca.read("coords")), _bits(chain.pca.read("coords")))


@pytest.mark.parametrize(
    ("method", "log1p"), [("library_size", True), ("library_size", False), ("tfidf", True)]
)
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_statistics_from_the_non_zeros_equal_those_of_the_dense_band(
    method: str, log1p: bool, dtype: str
) -> None:
    """The statistics normalize takes from the non-zero counts alone have the bits of those of the dense normalized band.

    The band has all-zero rows and columns, columns detected in every row
    (their smallest value is not 0), a constant column, and float counts
    small enough that their scaled value is stored as a float32 zero.
    """
    rng = np.random.default_rng(7)
    counts = rng.poisson(0.4, size=(64, 40)).astype(dtype)
    counts[:, 0] = 0
    counts[5] = 0
    counts[:, 1:4] += 1
    counts[:, 4] = 3
    if dtype == "float32":
        counts[9, 7] = 1e-44
        counts[9, 8] = 3e38
    library = counts.sum(axis=1, dtype=np.float64)
    options: dict[str, Any] = {"method": method, "target_sum": 1e4, "log1p": log1p}
    if method == "tfidf":
        options["idf"] = 64 / (1.0 + rng.integers(0, 64, size=40))
    dense = normalized_block(counts, library, **options)
    if dtype == "float32":
        assert dense[9, 7] == 0
    expected = _band_statistics(dense)
    np.testing.assert_array_equal(
        _bits(normalized_statistics(counts, library, **options)), _bits(expected)
    )
    empty = counts[:0]
    np.testing.assert_array_equal(
        _bits(normalized_statistics(empty, library[:0], **options)),
        _bits(_band_statistics(normalized_block(empty, library[:0], **options))),
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    method=st.sampled_from(["library_size", "tfidf", "none", "clr"]),
    cuts=st.lists(st.integers(0, 40), max_size=6),
    kept=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_statistics_of_pieces_equal_those_of_the_kept_rows(
    seed: int, method: str, cuts: list[int], kept: float
) -> None:
    """A band in any pieces, with any rows left out, has the bits of the band of its kept rows."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.5, size=(40, 17)).astype(np.uint16)
    counts[:, 3] = 2
    library = counts.sum(axis=1, dtype=np.float64)
    keep = rng.random(40) < kept
    options: dict[str, Any] = {"method": method, "target_sum": 1e4, "log1p": method != "none"}
    if method == "tfidf":
        options["idf"] = 40 / (1.0 + rng.integers(0, 40, size=17))
    bounds = [0, *sorted(set(cuts)), 40]
    pieces = [(a, counts[a:b].copy()) for a, b in itertools.pairwise(bounds) if b > a]
    expected = normalized_statistics(counts[keep], library[keep], **options)
    np.testing.assert_array_equal(
        _bits(piece_statistics(iter(pieces), keep, library, **options)), _bits(expected)
    )


def test_statistics_folded_on_the_workers_equal_those_merged_at_once() -> None:
    """The chain of folds merges the bands in row order as merge_band_statistics does: the same bits."""
    rng = np.random.default_rng(3)
    rows = rng.integers(1, 9, size=2 * FOLD_EVERY + 5)
    values = np.log1p(rng.poisson(0.7, size=(int(rows.sum()), 12)).astype(np.float32))
    values[:, 0] = 0
    values[:, 1] = 2.5
    statistics = band_statistics(da.from_array(values, chunks=(tuple(rows.tolist()), 12)))
    stacked = statistics.compute(scheduler="synchronous")
    (folded,) = dask.compute(folded_band_statistics(statistics), scheduler="threads")
    assert folded.shape == (11, 12)
    (log, linear, nnz), (log_once, linear_once, nnz_once) = (
        merge_band_statistics(folded),
        merge_band_statistics(stacked),
    )
    np.testing.assert_array_equal(nnz, nnz_once)
    for merged, once in ((log, log_once), (linear, linear_once)):
        assert merged.n == once.n == values.shape[0]
        for name in ("total", "m2", "low", "high"):
            np.testing.assert_array_equal(
                _bits(getattr(merged, name)), _bits(getattr(once, name)), err_msg=name
            )
