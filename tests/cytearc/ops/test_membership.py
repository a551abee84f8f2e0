"""Assay membership: operations refuse cells the assay did not measure, before they write anything."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import zarr
from zarr.codecs import ZstdCodec

from cytearc.artifacts import ArtifactRef
from cytearc.datasets import generate
from cytearc.errors import UnmeasuredCellsError
from cytearc.metadata.membership import MEMBERSHIP_ROLE
from cytearc.metadata.table import COLUMNS_ATTRIBUTE, list_columns
from cytearc.ops.normalize import normalized_cells, normalized_values
from cytearc.ops.selection import publish_selection
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cytearc import DataStore

N_CELLS = 200
UNMEASURED = 30
"""Cells 0..29 were not measured by RNA: zero counts, ``RNA_I`` False."""


def _write_membership(
    path: Path, assay: str, measured: np.ndarray, *, attributes: dict[str, Any] | None = None
) -> None:
    """Write ``<assay>_I`` straight into the cell table, as an import would."""
    cells = zarr.open_group(path / "cellData", mode="r+")
    name = f"{assay}_I"
    array = cells.create_array(
        name,
        shape=measured.shape,
        dtype=bool,
        chunks=measured.shape,
        compressors=ZstdCodec(level=3),
        dimension_names=("cell",),
        attributes={"role": MEMBERSHIP_ROLE, "assay": assay} if attributes is None else attributes,
    )
    array[:] = measured
    list_columns(cells, [*cells.attrs[COLUMNS_ATTRIBUTE], name])


def _build(path: Path, import_matrix: Callable[..., Path], *, attributes: Any = None) -> Path:
    data = generate(n_cells=N_CELLS, n_genes=300, n_types=3, n_markers=10, nonzero=0.3, seed=4)
    rna = data.counts.toarray()
    rna[:UNMEASURED] = 0
    adt = np.random.default_rng(2).poisson(5.0, size=(N_CELLS, 6))
    features = pd.concat(
        [
            data.features,
            pd.DataFrame(
                {
                    "ids": [f"adt{i}" for i in range(6)],
                    "names": [f"CD{i}" for i in range(6)],
                    "feature_types": ["Antibody Capture"] * 6,
                }
            ),
        ],
        ignore_index=True,
    )
    cells = data.cells[["ids"]].assign(cell_type=data.cells["cell_type"].astype(str).to_numpy())
    path = import_matrix(path, np.hstack([rna, adt]), cells, features)
    measured = np.ones(N_CELLS, dtype=bool)
    measured[:UNMEASURED] = False
    _write_membership(path, "RNA", measured, attributes=attributes)
    return path


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory, import_matrix, open_threads) -> DataStore:
    path = _build(tmp_path_factory.mktemp("partial") / "ds.zarr", import_matrix)
    ds = open_threads(path, zarr_mode="r+")
    ds.qc.metrics("RNA")
    ds.qc.metrics("ADT")
    return ds


@pytest.fixture
def measured() -> np.ndarray:
    mask = np.ones(N_CELLS, dtype=bool)
    mask[:UNMEASURED] = False
    return mask


def _refused(ds: DataStore, call: Callable[[], object]) -> UnmeasuredCellsError:
    """Run ``call``, expecting UnmeasuredCellsError and no byte changed in the store."""
    before = tree_snapshot(ds.root.store.root)
    with pytest.raises(UnmeasuredCellsError) as info:
        call()
    assert tree_snapshot(ds.root.store.root) == before, "a refused operation wrote to the store"
    return info.value


def _check_error(
    error: UnmeasuredCellsError,
    *,
    operation: str,
    selected: int = N_CELLS,
    unmeasured: int = UNMEASURED,
) -> None:
    assert isinstance(error, ValueError)
    assert error.operation == operation
    assert error.assay == "RNA"
    assert error.column == "RNA_I"
    assert error.unmeasured == unmeasured
    assert error.selected == selected
    assert "select_measured_cells" in error.remedy
    assert error.remedy in str(error)
    assert operation in str(error)
    assert f"{unmeasured} of the {selected}" in str(error)


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selection", "cell_key"), [(None, "I"), ("I", "I"), ("mask", None)], ids=["None", "I", "mask"]
)
def test_normalize_refuses_unmeasured_cells(
    partial: DataStore, selection: Any, cell_key: str | None
) -> None:
    """features.normalize over cells that include unmeasured ones raises and writes nothing."""
    chosen = np.ones(N_CELLS, dtype=bool) if selection == "mask" else selection
    error = _refused(partial, lambda: partial.features.normalize("RNA", cell_selection=chosen))
    _check_error(error, operation="features.normalize")
    assert error.cell_key == cell_key


def test_normalize_refuses_a_stored_selection_with_unmeasured_cells(partial: DataStore) -> None:
    """A stored cell_selection artifact is checked by its stored mask."""
    mask = np.zeros(N_CELLS, dtype=bool)
    mask[20:60] = True
    ref = publish_selection(partial, mask).ref
    error = _refused(partial, lambda: partial.features.normalize("RNA", cell_selection=ref))
    _check_error(error, operation="features.normalize", selected=40, unmeasured=10)
    error = _refused(partial, lambda: partial.features.normalize("RNA", cell_selection=str(ref)))
    assert error.unmeasured == 10


def test_markers_search_refuses_unmeasured_cells(partial: DataStore) -> None:
    """markers.search over unmeasured cells raises and writes nothing."""
    error = _refused(partial, lambda: partial.markers.search("RNA", group_key="cell_type"))
    _check_error(error, operation="markers.search")


def test_qc_filter_refuses_a_metric_of_a_partial_assay(partial: DataStore) -> None:
    """qc.filter on RNA_nCounts (a metric of RNA) over unmeasured cells raises."""
    error = _refused(partial, lambda: partial.qc.filter({"RNA_nCounts": (1, None)}))
    _check_error(error, operation="qc.filter")


def test_qc_auto_filter_refuses_a_partial_assay(partial: DataStore) -> None:
    """qc.auto_filter on RNA's metrics over unmeasured cells raises."""
    error = _refused(partial, lambda: partial.qc.auto_filter("RNA"))
    _check_error(error, operation="qc.auto_filter")


@pytest.mark.parametrize("operation", ["filter", "auto_filter"])
def test_qc_filters_refuse_before_writing_a_selection(
    partial: DataStore, measured: np.ndarray, operation: str
) -> None:
    """The QC filters check membership before they snapshot a new cell selection."""
    mask = np.ones(N_CELLS, dtype=bool)
    mask[-1 if operation == "filter" else -2] = False
    if operation == "filter":
        _refused(
            partial, lambda: partial.qc.filter({"RNA_nCounts": (1, None)}, cell_selection=mask)
        )
    else:
        _refused(partial, lambda: partial.qc.auto_filter("RNA", cell_selection=mask))


def test_refusal_on_a_read_only_store(partial: DataStore, open_threads) -> None:
    """A read-only store refuses unmeasured cells with UnmeasuredCellsError, not a write error."""
    ds = open_threads(partial.root.store.root)
    error = _refused(ds, lambda: ds.features.normalize("RNA"))
    _check_error(error, operation="features.normalize")
    _refused(ds, lambda: ds.markers.search("RNA", group_key="cell_type"))


def test_qc_filter_refusal_on_a_read_only_store_with_a_new_selection(
    partial: DataStore, open_threads
) -> None:
    """The membership refusal comes first on a read-only store too."""
    ds = open_threads(partial.root.store.root)
    mask = np.ones(N_CELLS, dtype=bool)
    mask[-3] = False
    _refused(ds, lambda: ds.qc.filter({"RNA_nCounts": (1, None)}, cell_selection=mask))


# --- measured selections -------------------------------------------------------------------


def test_select_measured_cells_makes_a_selection_that_works(
    partial: DataStore, measured: np.ndarray
) -> None:
    """select_measured_cells keeps the measured cells of I; normalize, markers and QC accept it."""
    ref = partial.select_measured_cells("RNA")
    assert isinstance(ref, ArtifactRef)
    selection = partial.load_artifact(ref)
    assert selection.provenance["operation"] == "select_measured_cells"
    assert selection.parameters == {"assay": "RNA"}
    assert set(selection.provenance["inputs"]) == {"cells", "membership"}
    np.testing.assert_array_equal(selection.read("mask"), measured)
    norm = partial.features.normalize("RNA", cell_selection=ref)
    values = normalized_values(partial, norm).compute(scheduler="threads")
    assert values.shape == (N_CELLS - UNMEASURED, 300)
    assert np.isfinite(values).all()
    markers = partial.markers.search("RNA", group_key="cell_type", cell_selection=ref)
    assert markers.read("n_cells").sum() == N_CELLS - UNMEASURED
    kept = partial.qc.filter({"RNA_nCounts": (1, None)}, cell_selection=ref)
    np.testing.assert_array_equal(kept.read("mask"), measured)
    auto = partial.qc.auto_filter("RNA", cell_selection=ref)
    assert not auto.read("mask")[:UNMEASURED].any()
    assert partial.select_measured_cells("RNA") == ref


def test_select_measured_cells_returns_a_fully_measured_prior_itself(
    partial: DataStore, measured: np.ndarray
) -> None:
    """A selection the assay measured entirely, or an assay without a column, keeps its ref."""
    ref = partial.select_measured_cells("RNA")
    assert partial.select_measured_cells("RNA", cell_selection=ref) == ref
    subset = measured.copy()
    subset[100:] = False
    prior = publish_selection(partial, subset).ref
    assert partial.select_measured_cells("RNA", cell_selection=subset) == prior
    assert partial.select_measured_cells("ADT") == publish_selection(partial, None).ref
    assert partial.select_measured_cells("ADT", cell_selection=subset) == prior


def test_select_measured_cells_of_no_measured_cell_raises(partial: DataStore) -> None:
    """A selection of unmeasured cells only raises ValueError naming the assay."""
    mask = np.zeros(N_CELLS, dtype=bool)
    mask[:UNMEASURED] = True
    with pytest.raises(ValueError, match="'RNA' measured none"):
        partial.select_measured_cells("RNA", cell_selection=mask)


def test_other_assays_are_not_checked_against_rna_membership(partial: DataStore) -> None:
    """ADT has no membership column: every cell counts as measured by it."""
    norm = partial.features.normalize("ADT")
    assert normalized_values(partial, norm).shape == (N_CELLS, 6)
    kept = partial.qc.filter({"ADT_nCounts": (0, None)})
    assert kept.read("mask").all()


def test_qc_metrics_leave_percentages_of_unmeasured_cells_missing(partial: DataStore) -> None:
    """Percent columns are NaN for the cells an assay did not measure; nCounts is 0 there."""
    assert np.isnan(partial.cells.fetch_all("RNA_percentMito")[:UNMEASURED]).all()
    assert np.isfinite(partial.cells.fetch_all("RNA_percentMito")[UNMEASURED:]).all()
    assert (partial.cells.fetch_all("RNA_nCounts")[:UNMEASURED] == 0).all()


def test_a_column_without_the_membership_role_is_not_membership(
    tmp_path: Path, import_matrix, open_threads
) -> None:
    """A cell column named RNA_I without role="assay_membership" does not restrict RNA."""
    path = _build(tmp_path / "ds.zarr", import_matrix, attributes={"note": "ordinary"})
    ds = open_threads(path, zarr_mode="r+")
    norm = ds.features.normalize("RNA", target_sum=1e4)
    assert normalized_cells(norm) == N_CELLS
