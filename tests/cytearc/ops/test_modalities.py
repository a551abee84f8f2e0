"""Assay classes by type, their default normalizations, and the modality-generic operations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytearc.assays import ADTassay, Assay, ATACassay, RNAassay, assay_class
from cytearc.assays.types import PRESETS, RNA_TYPES
from cytearc.errors import AssayTypeError, FeatureNotFoundError, OperationArgumentError
from cytearc.ops.normalize import normalized_values

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cytearc import DataStore


def test_every_preset_has_a_class_and_only_rna_types_store_counts_t() -> None:
    """Each preset opens as one class; the classes that store countsT are exactly the RNA types."""
    transposed = {preset for preset in PRESETS if assay_class(preset).stores_transpose}
    assert transposed == set(RNA_TYPES)
    assert assay_class("HTO") is ADTassay
    assert assay_class("GeneScores") is Assay
    with pytest.raises(AssayTypeError, match="not a preset"):
        assay_class("Protein")


def test_assays_open_as_their_classes(planted, open_threads) -> None:
    """ds.RNA, ds.ADT and ds.ATAC are instances of their classes, with their defaults."""
    ds = open_threads(planted.path)
    assert type(ds.RNA) is RNAassay
    assert type(ds.ADT) is ADTassay
    assert type(ds.ATAC) is ATACassay
    assert [ds.assays[a].defaults.normalization for a in ("RNA", "ADT", "ATAC")] == [
        "library_size",
        "clr",
        "tfidf",
    ]
    assert ds.ATAC.defaults.reduction == "lsi"
    with pytest.raises(AttributeError, match="no countsT"):
        _ = ds.ADT.countsT


def test_declared_types_choose_the_class(
    planted, import_matrix: Callable[..., Path], open_threads, tmp_path: Path
) -> None:
    """assay_types={"ADT": "HTO"} opens an ADTassay of type HTO; "CRISPR" opens the generic class."""
    features = pd.DataFrame(
        {
            "ids": [f"f{i}" for i in range(8)],
            "names": [f"f{i}" for i in range(8)],
            "feature_types": ["Antibody Capture"] * 4 + ["Peaks"] * 4,
        }
    )
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(len(planted.adt))]})
    counts = np.hstack([planted.adt[:, :4], planted.atac[:, :4]])
    path = import_matrix(tmp_path / "typed.zarr", counts, cells, features)
    ds = open_threads(path, zarr_mode="r+", assay_types={"ADT": "HTO", "ATAC": "CRISPR"})
    assert type(ds.ADT) is ADTassay
    assert ds.ADT.assayType == "HTO"
    assert type(ds.ATAC) is Assay
    assert ds.ATAC.defaults.normalization == "none"


def test_generic_assays_normalize_to_their_counts(
    planted, import_matrix: Callable[..., Path], open_threads, tmp_path: Path
) -> None:
    """The generic type's normalization is the counts themselves (no library scaling, no log)."""
    counts = planted.adt[:, :5]
    features = pd.DataFrame(
        {
            "ids": [f"g{i}" for i in range(5)],
            "names": [f"guide{i}" for i in range(5)],
            "feature_types": ["CRISPR Guide Capture"] * 5,
        }
    )
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(len(counts))]})
    path = import_matrix(tmp_path / "crispr.zarr", counts, cells, features)
    ds = open_threads(path, zarr_mode="r+")
    assert type(ds.CRISPR) is Assay
    norm = ds.features.normalize("CRISPR")
    assert norm.parameters["method"] == "none"
    assert norm.parameters["log1p"] is False
    values = normalized_values(ds, norm).compute()
    np.testing.assert_array_equal(values, counts.astype(np.float32))
    np.testing.assert_allclose(norm.read("feature_sum"), counts.sum(axis=0))


def test_detected_counts_the_selected_cells_with_a_count(planted, open_threads) -> None:
    """features.detected counts, per feature, the selected cells with a non-zero count."""
    ds = open_threads(planted.path, zarr_mode="r+")
    everyone = ds.features.detected("ADT")
    np.testing.assert_array_equal(everyone.read("n_cells"), (planted.adt > 0).sum(axis=0))
    some = ds.features.detected("ATAC", cell_selection=planted.mask)
    expected = (planted.atac[planted.mask] > 0).sum(axis=0)
    np.testing.assert_array_equal(some.read("n_cells"), expected)
    np.testing.assert_allclose(some.read("fraction"), expected / planted.mask.sum())
    assert ds.features.detected("ATAC", cell_selection=planted.mask).ref == some.ref


def test_feature_percentage_matches_numpy(planted, open_threads) -> None:
    """qc.feature_percentage writes 100 * counts in the features / all counts, NaN outside the selection."""
    ds = open_threads(planted.path, zarr_mode="r+")
    column = ds.qc.feature_percentage(
        "ADT", features=["CD0", "adt3"], name="percentTwo", cell_selection=planted.mask
    )
    assert column == "ADT_percentTwo"
    values = ds.cells.fetch_all(column)
    totals = planted.adt.sum(axis=1)
    expected = 100.0 * planted.adt[:, [0, 3]].sum(axis=1) / totals
    np.testing.assert_allclose(values[planted.mask], expected[planted.mask])
    assert np.isnan(values[~planted.mask]).all()
    by_pattern = ds.qc.feature_percentage("RNA", "^MT-", name="percentMT")
    assert by_pattern in ds.root["RNA"].attrs["percentFeatures"]


def test_feature_percentage_refuses_bad_arguments(planted, open_threads) -> None:
    """Neither or both of pattern and features, an unmatched pattern or an unknown name are refused."""
    ds = open_threads(planted.path, zarr_mode="r+")
    with pytest.raises(OperationArgumentError, match="give one of"):
        ds.qc.feature_percentage("ADT")
    with pytest.raises(OperationArgumentError, match="matches no feature"):
        ds.qc.feature_percentage("ADT", "^NOPE")
    with pytest.raises(FeatureNotFoundError, match="NOPE"):
        ds.qc.feature_percentage("ADT", features=["NOPE"])


def test_adt_markers_read_counts_with_clr(planted, open_threads) -> None:
    """markers.search of an ADT assay reads counts, normalized by CLR, and finds the type-scaled proteins."""
    ds = open_threads(planted.path, zarr_mode="r+")
    markers = ds.markers.search("ADT", group_key="cell_type")
    assert markers.parameters["method"] == "clr"
    mean = markers.read("mean")
    groups = [str(g) for g in markers.read("groups")]
    x = planted.adt.astype(np.float64)
    clr = np.log1p(x / np.exp(np.log1p(x).mean(axis=1, keepdims=True))).astype(np.float32)
    for i, group in enumerate(groups):
        np.testing.assert_allclose(
            mean[i], clr[planted.cell_type == group].astype(np.float64).mean(axis=0), rtol=1e-6
        )


def test_markers_of_a_wide_assay_without_counts_t_are_refused(
    planted, open_threads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An assay without countsT whose features need too many bands is refused before anything is written."""
    ds = open_threads(planted.path, zarr_mode="r+")
    monkeypatch.setattr("cytearc.ops.markers.BAND_BYTES", 4 * 600)
    before = len(ds.list_artifacts("markers"))
    with pytest.raises(AssayTypeError, match="bands"):
        ds.markers.search("ATAC", group_key="cell_type")
    assert len(ds.list_artifacts("markers")) == before


@pytest.fixture(scope="module")
def unmeasured_adt(
    tmp_path_factory: pytest.TempPathFactory, planted, import_matrix, open_threads
) -> DataStore:
    """The planted RNA and ADT counts with the first 20 cells unmeasured by ADT (ADT_I False)."""
    from tests.cytearc.ops.test_membership import _write_membership  # noqa: PLC0415

    adt = planted.adt.copy()
    adt[:20] = 0
    features = pd.DataFrame(
        {
            "ids": [f"adt{i}" for i in range(adt.shape[1])],
            "names": [f"CD{i}" for i in range(adt.shape[1])],
            "feature_types": ["Antibody Capture"] * adt.shape[1],
        }
    )
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(len(adt))]})
    path = import_matrix(tmp_path_factory.mktemp("adt") / "ds.zarr", adt, cells, features)
    measured = np.ones(len(adt), dtype=bool)
    measured[:20] = False
    _write_membership(path, "ADT", measured)
    return open_threads(path, zarr_mode="r+")


@pytest.mark.parametrize(
    "call",
    [
        lambda ds: ds.features.normalize("ADT"),
        lambda ds: ds.features.detected("ADT"),
        lambda ds: ds.qc.feature_percentage("ADT", "^CD", name="percentCD"),
        lambda ds: ds.markers.search("ADT", group_key="ADT_I"),
    ],
    ids=["normalize", "detected", "feature_percentage", "markers"],
)
def test_adt_operations_refuse_unmeasured_cells(unmeasured_adt: DataStore, call) -> None:
    """Every ADT operation over cells ADT did not measure raises UnmeasuredCellsError and writes nothing."""
    from cytearc.errors import UnmeasuredCellsError  # noqa: PLC0415
    from cytepool.testing import tree_snapshot  # noqa: PLC0415

    before = tree_snapshot(unmeasured_adt.root.store.root)
    with pytest.raises(UnmeasuredCellsError, match="ADT"):
        call(unmeasured_adt)
    assert tree_snapshot(unmeasured_adt.root.store.root) == before
    measured = unmeasured_adt.select_measured_cells("ADT")
    found = unmeasured_adt.features.detected("ADT", cell_selection=measured).read("n_cells")
    np.testing.assert_array_equal(found, (unmeasured_adt.ADT.counts[20:] > 0).sum(axis=0).compute())
