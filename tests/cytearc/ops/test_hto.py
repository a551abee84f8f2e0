"""``qc.hto_demultiplexing``: HTODemux's calls on planted and frozen hashtags, refusals, reuse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import zarr

from cytearc import DataStore, SparseToZarr
from cytearc.datasets.hashtags import FEATURE_TYPE, generate_hashtags, write_hashtag_store
from cytearc.errors import AssayTypeError, OperationArgumentError, UnmeasuredCellsError
from cytearc.metadata.membership import write_membership_columns
from cytearc.ops.hto import (
    GLOBAL_CLASSES,
    background_cutoff,
    clara,
    fit_negative_binomial,
    hto_calls,
    hto_demultiplexing,
)
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import Artifact
    from cytearc.engine.cluster import Engine

FIXTURES = Path(__file__).parent / "fixtures" / "hto"
ARRAYS = (
    "rows",
    "hashtags",
    "global",
    "max_id",
    "second_id",
    "margin",
    "positive",
    "cluster",
    "cutoffs",
    "background_cluster",
)


@dataclass(frozen=True)
class Planted:
    """A planted hashing store, demultiplexed on the threaded scheduler."""

    path: Path
    ds: DataStore
    result: Artifact
    calls: pd.DataFrame


def _open(path: Path | str, **options: Any) -> DataStore:
    return DataStore(path, cluster="threads", show_progress=False, **options)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    path = write_hashtag_store(
        tmp_path_factory.mktemp("hashing") / "ds.zarr", n_cells=2000, seed=0, cluster="threads"
    )
    ds = _open(path, zarr_mode="r+")
    result = hto_demultiplexing(ds, "HTO")
    return Planted(path=path, ds=ds, result=result, calls=hto_calls(ds, result))


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fixture's counts imported and demultiplexed: (CyteArc's calls, HTODemux's)."""
    table = pd.read_csv(FIXTURES / "hashtags.csv", keep_default_na=False)
    names = [c for c in table.columns if c.startswith("HTO-")]
    result = SparseToZarr(
        table[names].to_numpy(),
        cells=table[["cell"]].rename(columns={"cell": "ids"}),
        features=pd.DataFrame({"ids": names, "names": names, "feature_types": FEATURE_TYPE}),
        zarr_loc=tmp_path_factory.mktemp("frozen") / "ds.zarr",
        show_progress=False,
        cluster="threads",
    ).dump()
    ds = _open(result.path, zarr_mode="r+")
    calls = hto_calls(ds, hto_demultiplexing(ds, "HTO"))
    expected = pd.read_csv(FIXTURES / "htodemux.csv", keep_default_na=False).set_index("cell")
    return calls, expected


def _small_store(tmp_path: Path, **options: Any) -> Path:
    return write_hashtag_store(tmp_path / "ds.zarr", n_cells=300, cluster="threads", **options)


def _refused(path: Path, call: Callable[[DataStore], object], error: type[Exception]) -> Exception:
    """Run ``call`` on a writable open, expecting ``error`` and no byte changed in the store."""
    ds = _open(path, zarr_mode="r+")
    before = tree_snapshot(path)
    with pytest.raises(error) as info:
        call(ds)
    assert tree_snapshot(path) == before, "a refused demultiplexing wrote to the store"
    assert not ds.list_artifacts("hto_demultiplexing")
    return info.value


# --- calls --------------------------------------------------------------------------------


def test_calls_match_the_planted_truth(planted: Planted) -> None:
    """Singlets get their own hashtag (>= 95 %), and most doublets and negatives are found."""
    truth_global = planted.ds.cells.fetch_all("truth_global").astype(str)
    truth_hashtag = planted.ds.cells.fetch_all("truth_hashtag").astype(str)
    called = planted.calls["global"].to_numpy()
    right = (called == "Singlet") & (planted.calls["hashtag"].to_numpy() == truth_hashtag)
    # measured on seed 0: 96.6 % of singlets, every doublet, 95.3 % of negatives; a singlet's
    # five other hashtags each exceed the 99 % background quantile about 1 % of the time
    assert right[truth_global == "Singlet"].mean() >= 0.95
    doublet = truth_global == "Doublet"
    assert (called[doublet] == "Doublet").mean() >= 0.95
    assert (called[truth_global == "Negative"] == "Negative").mean() >= 0.9
    found = doublet & (called == "Doublet")
    pairs = planted.calls["classification"].to_numpy()[found]
    assert (pairs == truth_hashtag[found]).mean() >= 0.95


def test_artifact_holds_the_calls_per_selected_cell(planted: Planted) -> None:
    """The artifact is the assay's, over every cell of ``I``, with the documented arrays."""
    result = planted.result
    assert result.ref.scope == "HTO"
    assert result.ref.kind == "hto_demultiplexing"
    assert sorted(result.group.array_keys()) == sorted(ARRAYS)
    np.testing.assert_array_equal(result.read("rows"), np.arange(2000))
    assert result.read("global").dtype == np.int8
    assert result.read("positive").shape == (2000, 6)
    n_positive = result.read("positive").sum(axis=1)
    np.testing.assert_array_equal(result.read("global"), np.minimum(n_positive, 2))
    assert result.parameters == {
        "assay": "HTO",
        "positiveQuantile": 0.99,
        "nClusters": 7,
        "seed": 0,
    }
    assert result.provenance["inputs"]["counts"] == planted.ds.assays["HTO"].content_fingerprint
    assert "cells" in result.inputs()
    assert not any(c.startswith("HTO_") for c in planted.ds.cells.columns), "no cell column"


def test_calls_table_follows_htodemux_names(planted: Planted) -> None:
    """``hashtag`` is HTODemux's hash.ID and ``classification`` names a doublet's sorted pair."""
    calls = planted.calls
    assert calls.index.name == "cell"
    assert calls.index[0] == "cell000000"
    assert set(calls["global"]) == set(GLOBAL_CLASSES)
    singlet = calls["global"] == "Singlet"
    assert (calls.loc[singlet, "hashtag"] == calls.loc[singlet, "max_id"]).all()
    assert (calls.loc[~singlet, "hashtag"] == calls.loc[~singlet, "global"]).all()
    doublets = calls[calls["global"] == "Doublet"]
    expected = [
        "_".join(sorted(pair))
        for pair in zip(doublets["max_id"], doublets["second_id"], strict=True)
    ]
    assert doublets["classification"].tolist() == expected
    assert (calls["margin"] >= 0).all()


def test_second_call_reuses_the_artifact(planted: Planted) -> None:
    """The same call reuses the artifact; invalidate_cache makes a new one of the same values."""
    again = hto_demultiplexing(planted.ds, "HTO", n_clusters=7)
    assert again.ref == planted.result.ref
    fresh = hto_demultiplexing(planted.ds, "HTO", invalidate_cache=True)
    assert fresh.ref != planted.result.ref
    for name in ARRAYS:
        np.testing.assert_array_equal(fresh.read(name), planted.result.read(name))


def test_cell_selection_narrows_the_cells(planted: Planted) -> None:
    """A mask demultiplexes only its cells, whose ids index the calls."""
    mask = np.zeros(2000, dtype=bool)
    mask[::2] = True
    result = hto_demultiplexing(planted.ds, "HTO", cell_selection=mask)
    np.testing.assert_array_equal(result.read("rows"), np.arange(0, 2000, 2))
    calls = hto_calls(planted.ds, result)
    assert calls.index.tolist() == planted.calls.index[::2].tolist()
    assert (calls["global"] == planted.calls["global"].iloc[::2]).mean() >= 0.97


# --- HTODemux ------------------------------------------------------------------------------


def test_fixture_input_is_the_one_r_read() -> None:
    """The frozen counts are those whose SHA-256 the R script recorded."""
    metadata = json.loads((FIXTURES / "metadata.json").read_text())
    assert sha256((FIXTURES / "hashtags.csv").read_bytes()).hexdigest() == metadata["input_sha256"]
    assert metadata["packages"]["Seurat"] == "4.3.0"


def test_calls_agree_with_htodemux(frozen: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """>= 99 % of cells get HTODemux's global class and hash.ID; the ids and margins are its own.

    Measured: 99.2 % of the 1,500 cells (12 differ, all at a cutoff: CLARA's
    samples differ from R's, so two hashtags take another background cluster).
    """
    calls, expected = frozen
    assert calls.index.tolist() == expected.index.tolist()
    assert (calls["global"] == expected["global"]).mean() >= 0.99
    assert (calls["hashtag"] == expected["hash_id"]).mean() >= 0.99
    agree = calls["global"] == expected["global"]
    assert (calls["classification"] == expected["classification"])[agree].all()
    assert (calls["max_id"] == expected["max_id"]).all()
    assert (calls["second_id"] == expected["second_id"]).all()
    np.testing.assert_allclose(calls["margin"], expected["margin"], rtol=0, atol=1e-12)


def test_background_fit_matches_fitdistrplus() -> None:
    """On R's clusters, the NB fit is fitdistrplus's (to its optimiser) and the cutoffs are R's."""
    table = pd.read_csv(FIXTURES / "hashtags.csv", keep_default_na=False)
    clusters = pd.read_csv(FIXTURES / "htodemux.csv")["clara_cluster"].to_numpy()
    fits = pd.read_csv(FIXTURES / "cutoffs.csv")
    for row in fits.itertuples():
        values = table[row.hashtag].to_numpy()[clusters == row.background_cluster]
        mu, size = fit_negative_binomial(values)
        assert mu == pytest.approx(row.mu, rel=1e-3)
        assert size == pytest.approx(row.size, rel=1e-3)
        assert background_cutoff(values, quantile=0.99) == row.cutoff


def test_negative_binomial_fit_is_the_maximum_likelihood() -> None:
    """The fitted size maximises the likelihood; counts no more spread than Poisson get size inf."""
    from scipy import stats  # noqa: PLC0415

    values = np.random.default_rng(3).negative_binomial(3.0, 3.0 / (3.0 + 12.0), size=400)
    mu, size = fit_negative_binomial(values)
    assert mu == values.mean()

    def loglik(r: float) -> float:
        return float(stats.nbinom.logpmf(values, r, r / (r + mu)).sum())

    assert loglik(size) >= max(loglik(size * 0.99), loglik(size * 1.01))
    assert fit_negative_binomial(np.array([4, 5, 6, 5, 4, 6]))[1] == np.inf


def test_clara_finds_separated_groups_and_numbers_them_by_first_row() -> None:
    """Three separated blobs are three clusters, numbered by their first row, for any seed."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    labels = rng.integers(0, 3, 500)
    x = centres[labels] + rng.normal(0.0, 0.5, (500, 2))
    for seed in (0, 1):
        found = clara(x, 3, seed=seed)
        _, first = np.unique(found, return_index=True)
        assert np.all(np.diff(first) > 0)
        assert len({(a, b) for a, b in zip(found, labels, strict=True)}) == 3


# --- refusals ------------------------------------------------------------------------------


def test_a_non_hto_assay_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """An assay declared ADT raises AssayTypeError naming its type and the declaration to paste."""
    path = _small_store(tmp_path, assay_type="ADT")
    error = _refused(path, lambda ds: hto_demultiplexing(ds, "HTO"), AssayTypeError)
    assert "assay 'HTO' is declared ADT" in str(error)
    assert "assay_types={'HTO': 'HTO'}" in str(error)
    declared = _open(path, zarr_mode="r+", assay_types={"HTO": "HTO"})
    assert hto_demultiplexing(declared, "HTO").ref.kind == "hto_demultiplexing"


def test_unmeasured_cells_are_refused(tmp_path: Path) -> None:
    """Cells that ``HTO_I`` marks unmeasured raise UnmeasuredCellsError; nothing is written."""
    path = _small_store(tmp_path)
    measured = np.ones(300, dtype=bool)
    measured[:20] = False
    write_membership_columns(
        zarr.open_group(path / "cellData", mode="r+"), {"HTO": measured}, n_rows=300, where="test"
    )
    error = _refused(path, lambda ds: hto_demultiplexing(ds, "HTO"), UnmeasuredCellsError)
    assert isinstance(error, UnmeasuredCellsError)
    assert (error.operation, error.assay, error.column) == ("qc.hto_demultiplexing", "HTO", "HTO_I")
    assert (error.unmeasured, error.selected) == (20, 300)
    ds = _open(path, zarr_mode="r+")
    assert len(hto_calls(ds, hto_demultiplexing(ds, "HTO", cell_selection=measured))) == 280


@pytest.mark.parametrize(
    "options",
    [
        {"positive_quantile": 1.0},
        {"positive_quantile": 0},
        {"positive_quantile": "0.99"},
        {"n_clusters": 1},
        {"n_clusters": True},
        {"n_clusters": 301},
        {"seed": -1},
        {"invalidate_cache": "yes"},
    ],
)
def test_bad_arguments_are_refused(tmp_path: Path, options: dict[str, Any]) -> None:
    """Arguments out of their domain raise OperationArgumentError before anything is written."""
    path = _small_store(tmp_path)
    _refused(path, lambda ds: hto_demultiplexing(ds, "HTO", **options), OperationArgumentError)


def test_a_cluster_without_counts_stops_as_htodemux(tmp_path: Path) -> None:
    """Cells without hashtag counts form a cluster whose zero mean stops it, publishing nothing."""
    counts, _ = generate_hashtags(n_cells=300, doublet_rate=0.0, negative_rate=0.0, seed=2)
    dense = counts.toarray()
    dense[:40] = 0
    names = [f"HTO-{c}" for c in "ABCDEF"]
    result = SparseToZarr(
        dense,
        cells=pd.DataFrame({"ids": [f"c{i}" for i in range(300)]}),
        features=pd.DataFrame({"ids": names, "names": names, "feature_types": FEATURE_TYPE}),
        zarr_loc=tmp_path / "ds.zarr",
        show_progress=False,
        cluster="threads",
    ).dump()
    ds = _open(result.path, zarr_mode="r+")
    with pytest.raises(OperationArgumentError, match="Cells with zero counts exist as a cluster"):
        hto_demultiplexing(ds, "HTO")
    assert not ds.list_artifacts("hto_demultiplexing")
    kind = Path(result.path) / "HTO" / "artifacts" / "hto_demultiplexing"
    assert not [p for p in kind.iterdir() if p.is_dir()], "the unpublished group was left"


# --- schedulers ----------------------------------------------------------------------------


@pytest.mark.slow
def test_threads_and_local_cluster_give_equal_arrays(planted: Planted, engine: Engine) -> None:
    """On a 2-worker LocalCluster the artifact's arrays are bit-identical to the threaded ones."""
    del engine
    ds = DataStore(planted.path, zarr_mode="r+", show_progress=False)
    assert ds.engine.client is not None
    on_cluster = hto_demultiplexing(ds, "HTO", invalidate_cache=True)
    assert on_cluster.attrs["execution_options"]["scheduler"] == "distributed"
    assert planted.result.attrs["execution_options"]["scheduler"] == "threads"
    assert on_cluster.provenance == planted.result.provenance
    for name in ARRAYS:
        ours, theirs = on_cluster.read(name), planted.result.read(name)
        assert ours.dtype == theirs.dtype
        if ours.dtype.kind in "OUT":
            assert ours.tolist() == theirs.tolist()
        else:
            np.testing.assert_array_equal(
                np.ascontiguousarray(ours).view(np.uint8),
                np.ascontiguousarray(theirs).view(np.uint8),
            )
