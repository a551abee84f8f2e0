"""Provenance: operations append records, history says them, verify_chain replays them."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cytepool import Cube, describe_provenance, read_cube, verify_chain, write_cube
from cytepool._versions import package_version
from cytepool.errors import ChainVerificationError, CubeValueError
from cytepool.testing import example_cube

if TYPE_CHECKING:
    from pathlib import Path


def test_new_cube_has_three_keys(cube: Cube) -> None:
    """A fresh cube records the format, package version and the source verbatim, no operations."""
    prov = cube.provenance
    assert prov == {
        "cytepool": {
            "format": "cytepool.cube",
            "format_version": 1,
            "version": package_version("cytepool"),
        },
        "source": {"tool": "tests", "seed": 0},
        "operations": [],
    }


def test_select_by_labels_and_masks(cube: Cube) -> None:
    """Select takes labels (first column) or boolean masks and records positions."""
    mask = np.array([True, False, True, False])
    picked = cube.select(samples=mask, groups=["G2", "G0"], features=[f"F{i}" for i in (5, 1)])
    assert picked.shape == (2, 2, 2)
    assert picked.groups["group"].tolist() == ["G2", "G0"]
    counts = np.asarray(cube.layers["counts"])
    np.testing.assert_array_equal(
        np.asarray(picked.layers["counts"]), counts[[2, 0]][:, [0, 2]][:, :, [5, 1]]
    )
    assert picked.n_cells is not None
    assert cube.n_cells is not None
    np.testing.assert_array_equal(picked.n_cells, cube.n_cells[[0, 2]][:, [2, 0]])
    (record,) = picked.provenance["operations"]
    assert record == {
        "operation": "select",
        "parameters": {"samples": [0, 2], "groups": [2, 0], "features": [5, 1]},
        "input": cube.fingerprint,
        "output": picked.fingerprint,
    }


def test_combine_sums_layers_and_cells(cube: Cube) -> None:
    """Combine sums layers (value layers stay sums) and cell numbers of merged members."""
    merged = cube.combine(axis="groups", mapping={"G0": "A", "G2": "A", "G1": "B"})
    assert merged.groups["group"].tolist() == ["A", "B"]
    for name, layer in cube.layers.items():
        x = np.asarray(layer, dtype=np.float64)
        want = np.stack([x[0] + x[2], x[1]])
        np.testing.assert_allclose(
            np.asarray(merged.layers[name], dtype=np.float64), want, rtol=1e-6
        )
    assert cube.n_cells is not None
    assert merged.n_cells is not None
    np.testing.assert_array_equal(merged.n_cells[:, 0], cube.n_cells[:, 0] + cube.n_cells[:, 2])
    by_donor = cube.combine(
        axis="samples", mapping={"S0": "D0", "S1": "D0", "S2": "D1", "S3": "D1"}
    )
    assert by_donor.samples.columns.tolist() == ["sample", "donor"]
    assert by_donor.samples["donor"].tolist() == ["D0", "D1"]
    assert by_donor.provenance["operations"][0]["parameters"] == {
        "axis": "samples",
        "mapping": [["S0", "D0"], ["S1", "D0"], ["S2", "D1"], ["S3", "D1"]],
    }


def test_bad_operations_fail_with_named_errors(cube: Cube) -> None:
    """Unknown labels, empty selections and bad axes raise CubeValueError."""
    with pytest.raises(CubeValueError, match="no sample labelled"):
        cube.select(samples=["nope"])
    with pytest.raises(CubeValueError, match="nothing chosen"):
        cube.select(groups=np.zeros(3, dtype=bool))
    with pytest.raises(CubeValueError, match="axis"):
        cube.combine(axis="features", mapping={})


def test_chain_replays_through_files(tmp_path: Path, cube: Cube) -> None:
    """Select then combine, written and read back, replays link by link to the final fingerprint."""
    source = read_cube(write_cube(cube, tmp_path / "a.cube.zarr"))
    step = source.select(samples=["S3", "S1", "S0"], features=np.arange(50) % 2 == 0)
    final = step.combine(axis="groups", mapping={"G1": "G0"})
    final = read_cube(write_cube(final, tmp_path / "b.cube.zarr"))
    chain = verify_chain(final, [source])
    assert chain == [source.fingerprint, step.fingerprint, final.fingerprint]
    text = final.history()
    assert "1. select: kept all groups; 3 samples (positions 3, 1, 0); 25 features" in text
    assert "2. combine groups: summed members relabelled 'G1'→'G0'" in text
    assert describe_provenance(final.provenance) == text


def test_forged_record_is_caught(tmp_path: Path, cube: Cube) -> None:
    """A record whose parameters were edited does not replay to the recorded output."""
    final = cube.select(samples=["S0", "S1"])
    forged = copy.deepcopy(final.provenance)
    forged["operations"][0]["parameters"]["samples"] = [0, 2]
    fake = Cube._assemble(
        tables={"samples": final.samples, "groups": final.groups, "features": final.features},
        layers=dict(final.layers),
        n_cells=final.n_cells,
        normalization=final.normalization,
        origin=forged,
        operations=forged["operations"],
    )
    with pytest.raises(ChainVerificationError, match="not its recorded output"):
        verify_chain(fake, [cube])


def test_missing_input_is_named(cube: Cube) -> None:
    """verify_chain says which input fingerprint no candidate has."""
    final = cube.select(samples=["S0"])
    with pytest.raises(ChainVerificationError, match=cube.fingerprint):
        verify_chain(final, [example_cube(seed=5)])
