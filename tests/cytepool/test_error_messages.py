"""The message of every public CytePool error, raised through the public API (as xarray's tests/test_error_messages.py).

Each case does one wrong thing to a small cube (or a copy of its file, or a
result computed from it) and pins the whole message: the file, array or
attribute, what was expected, what was found, and the remedy. ``<dir>`` in a
pattern stands for the case's temporary directory.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import zarr
from distributed import Client, LocalCluster

from cytepool import Cube, errors, limma_voom, read_cube, verify_chain, write_cube
from cytepool.cli import main
from cytepool.compute import compute, connect
from cytepool.cube.demo import demo_cube
from cytepool.de import LimmaResult, LimmaResults

if TYPE_CHECKING:
    from collections.abc import Callable

DIGEST = "sha256:[0-9a-f]{64}"
FIRST_GROUP = "CD4 T"

BASES = {errors.CubeError}
"""Classes no code raises as such: they exist to be caught."""

BUILTINS: dict[type[Exception], type[Exception]] = {
    errors.CubeExistsError: FileExistsError,
    errors.CubeNotFoundError: FileNotFoundError,
    errors.ResultExistsError: FileExistsError,
    errors.ClusterConnectError: ConnectionError,
    errors.ClusterLostError: ConnectionError,
}
"""The builtin each class refines besides ValueError, as errors.py documents."""


@dataclass(frozen=True)
class Fixture:
    """What a case starts from: a cube, its file, its limma-voom results, and a directory of its own."""

    cube: Cube
    path: Path
    results: LimmaResults
    directory: Path

    def copy(self) -> Path:
        """A copy of the cube file to damage."""
        return Path(shutil.copytree(self.path, self.directory / "copy.cube.zarr"))


@dataclass(frozen=True)
class Case:
    """How to raise one error class, and the whole message it must have."""

    trigger: Callable[[Fixture], object]
    pattern: str


CASES: dict[type[Exception], Case] = {}


def case(cls: type[Exception], pattern: str) -> Callable[[Callable[[Fixture], object]], Case]:
    """Register the decorated trigger as the case of ``cls``."""

    def register(trigger: Callable[[Fixture], object]) -> Case:
        CASES[cls] = Case(trigger, pattern)
        return CASES[cls]

    return register


def _with(cube: Cube, **changes: Any) -> Cube:
    """A new cube with the tables, layers and cell numbers of ``cube``, some replaced."""
    arguments: dict[str, Any] = {
        "samples": cube.samples,
        "groups": cube.groups,
        "features": cube.features,
        "layers": {name: np.asarray(layer) for name, layer in cube.layers.items()},
        "n_cells": cube.n_cells,
        "normalization": cube.normalization,
        "source": {"tool": "tests"},
    }
    return Cube(**{**arguments, **changes})


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))


# --- making cubes ----------------------------------------------------------


@case(
    errors.CubeShapeError,
    r"layer 'counts': expected shape \(n_groups, n_samples, n_features\) = \(4, 4, 40\), "
    r"found \(4, 4, 39\)",
)
def _cube_shape(given: Fixture) -> object:
    counts = np.asarray(given.cube.layers["counts"])[:, :, 1:]
    return _with(given.cube, layers={"counts": counts})


@case(
    errors.CubeTableError,
    r"groups table, column 'group': text columns hold strings and missing values only, found 7 of "
    r"type int; convert the column with \.astype\(str\)",
)
def _cube_table(given: Fixture) -> object:
    labels = pd.Series(["CD4 T", "CD8 T", "B", 7], dtype=object)
    return _with(given.cube, groups=pd.DataFrame({"group": labels}))


@case(
    errors.CubeValueError,
    r"layer 'counts': expected a numpy or Dask array, found list",
)
def _cube_value(given: Fixture) -> object:
    return _with(given.cube, layers={"counts": np.asarray(given.cube.layers["counts"]).tolist()})


@case(
    errors.NegativeValueError,
    r"layer 'counts' holds the negative value -1 at \(group, sample, feature\) \(1, 2, 3\); "
    r"counts and detected cells cannot be negative",
)
def _negative_value(given: Fixture) -> object:
    counts = np.asarray(given.cube.layers["counts"]).copy()
    counts[1, 2, 3] = -1
    return _with(given.cube, layers={"counts": counts})


@case(
    errors.NonFiniteValueError,
    r"layer 'log_sum' holds nan at \(group, sample, feature\) \(1, 2, 3\); layers hold finite "
    r"values only - drop or fix the value",
)
def _non_finite_value(given: Fixture) -> object:
    log_sum = np.asarray(given.cube.layers["log_sum"]).copy()
    log_sum[1, 2, 3] = np.nan
    layers = {name: np.asarray(layer) for name, layer in given.cube.layers.items()}
    return _with(given.cube, layers={**layers, "log_sum": log_sum})


# --- writing and reading files ---------------------------------------------


@case(
    errors.CubeExistsError,
    r"<dir>/cube\.zarr: already exists; pass overwrite=True to replace a cube",
)
def _cube_exists(given: Fixture) -> object:
    return write_cube(given.cube, given.path)


@case(
    errors.CubeNotFoundError,
    r"<dir>/none\.cube\.zarr: no cube here \(no zarr\.json\); check the path",
)
def _cube_not_found(given: Fixture) -> object:
    return read_cube(given.directory / "none.cube.zarr")


@case(
    errors.CubeFormatError,
    r"<dir>/copy\.cube\.zarr: attribute 'format_version': expected 1, found 2; "
    r"upgrade CytePool to read newer cube files",
)
def _cube_format(given: Fixture) -> object:
    path = given.copy()
    _edit_json(path / "zarr.json", lambda d: d["attributes"].update(format_version=2))
    return read_cube(path)


@case(
    errors.CubeMetadataError,
    r"<dir>/copy\.cube\.zarr/layers/counts: fill_value: expected 0, found 7; the file was not "
    r"written by write_cube or was changed - write it again from its source",
)
def _cube_metadata(given: Fixture) -> object:
    path = given.copy()
    _edit_json(path / "layers" / "counts" / "zarr.json", lambda d: d.update(fill_value=7))
    return read_cube(path)


@case(
    errors.CubeDigestError,
    f"<dir>/copy\\.cube\\.zarr: n_cells: values give {DIGEST}, not the stored digest {DIGEST}; "
    "the file was changed or damaged",
)
def _cube_digest(given: Fixture) -> object:
    path = given.copy()
    n_cells = zarr.open_array(path / "n_cells", mode="r+")
    n_cells[0, 0] = int(n_cells[0, 0]) + 1
    return read_cube(path)


@case(
    errors.FingerprintMismatchError,
    f"<dir>/copy\\.cube\\.zarr: layer 'counts', group 0 \\('{FIRST_GROUP}'\\): expected {DIGEST}, "
    f"computed {DIGEST}; the values were changed or damaged since they were digested - write the "
    "cube again from its source",
)
def _fingerprint_mismatch(given: Fixture) -> object:
    path = given.copy()
    counts = zarr.open_array(path / "layers" / "counts", mode="r+")
    counts[0, 0, 0] = int(counts[0, 0, 0]) + 1
    return read_cube(path).verify_fingerprint()


@case(
    errors.CubeReadError,
    r"<dir>/copy\.cube\.zarr/layers/counts: chunk of group 0, features 0:40 cannot be read or "
    r"decoded \(BadGzipFile: .*\); the file is damaged",
)
def _cube_read(given: Fixture) -> object:
    path = given.copy()
    (path / "layers" / "counts" / "c" / "0" / "0" / "0").write_bytes(b"not gzip")
    return read_cube(path).layers["counts"].compute()


@case(
    errors.ChainVerificationError,
    f"operations\\[0\\] \\(select\\): no candidate cube has the input fingerprint {DIGEST}; "
    "pass the cube it was made from",
)
def _chain_verification(given: Fixture) -> object:
    return verify_chain(given.cube.select(groups=[FIRST_GROUP]), [])


# --- differential expression ------------------------------------------------


@case(
    errors.DesignError,
    r"cannot build a design from formula '~ treatment' over sample columns \['donor', "
    r"'condition'\]: .*`treatment` is not present in the dataset.*",
)
def _design(given: Fixture) -> object:
    return limma_voom(given.cube, design="~ treatment", group=FIRST_GROUP)


@case(
    errors.GroupSkippedError,
    f"group '{FIRST_GROUP}' cannot be fitted: 2 of 4 samples left \\(D1-ctrl, D2-ctrl\\): factor "
    "'condition' has 1 level \\('ctrl'\\) among the samples; a factor in a design needs at least "
    "two levels",
)
def _group_skipped(given: Fixture) -> object:
    n_cells = np.full((4, 4), 50)
    n_cells[[1, 3], 0] = 1
    few_stim = _with(given.cube, n_cells=n_cells)
    return limma_voom(few_stim, design="~ condition", group=FIRST_GROUP, min_cells=10)


@case(
    errors.NoGroupFittedError,
    r"no group of the cube could be fitted with design '~ donor \* condition': "
    + "; ".join(
        f"'{group}': 4 of 4 samples left \\(D1-ctrl, D1-stim, D2-ctrl, D2-stim\\): design has 4 "
        "coefficients for 4 samples: no residual degrees of freedom; limma needs more samples "
        "than coefficients"
        for group in ("CD4 T", "CD8 T", "B", "NK")
    )
    + r"\. Change the design, or lower min_cells and min_counts if too few samples were left",
)
def _no_group_fitted(given: Fixture) -> object:
    return limma_voom(given.cube, design="~ donor * condition", min_cells=0, min_counts=0)


@case(
    errors.ContrastFormatError,
    r"--contrast '\{\"conditionstim\": 1,\}': expected JSON weights of design columns such as "
    r"'\{\"conditionstim\": 1, \"conditionctrl\": -1\}' or '\[0, 1, -1\]', or an R expression such as "
    r"'conditionstim-conditionctrl'; found invalid JSON at line 1, column 21 \(Expecting property "
    r"name enclosed in double quotes\)",
)
def _contrast_format(given: Fixture) -> object:
    options = ["--design", "~ 0 + condition", "--contrast", '{"conditionstim": 1,}']
    return main(["de", str(given.path), *options, "-o", str(given.directory / "de"), "--debug"])


@case(
    errors.LimmaError,
    r"file_format: expected 'parquet' or 'csv', found 'xml'; pass one of them",
)
def _limma(given: Fixture) -> object:
    return given.results.save(given.directory / "de", file_format="xml")  # type: ignore[arg-type]


@case(
    errors.ResultExistsError,
    r"<dir>/de: expected a directory without limma results, found results\.json; "
    r"pass overwrite=True to replace them or choose another directory",
)
def _result_exists(given: Fixture) -> object:
    given.results.save(given.directory / "de", file_format="csv")
    return given.results.save(given.directory / "de", file_format="csv")


@case(
    errors.ResultFormatError,
    r"<dir>/table\.csv: the metadata sidecar table\.csv\.json is missing; "
    r"a limma result CSV is read with its sidecar",
)
def _result_format(given: Fixture) -> object:
    (given.directory / "table.csv").write_text("gene,logFC\nG1,0.5\n")
    return LimmaResult.read(given.directory / "table.csv")


@case(
    errors.ResultMismatchError,
    f"result of group '{FIRST_GROUP}' was computed from cube {DIGEST}, not from this cube {DIGEST}: "
    f"they differ in layer 'counts' of group '{FIRST_GROUP}'\\. "
    "Recompute the result with limma_voom on this cube\\.",
)
def _result_mismatch(given: Fixture) -> object:
    result = given.results[FIRST_GROUP]
    counts = np.asarray(given.cube.layers["counts"]).copy()
    counts[0, 0, 0] += 1
    layers = {name: np.asarray(layer) for name, layer in given.cube.layers.items()}
    changed = _with(given.cube, layers={**layers, "counts": counts})
    return result.verify(changed)


# --- computing --------------------------------------------------------------


@case(
    errors.CytePoolError,
    r"compute: n_threads must be a positive integer, found 0",
)
def _cytepool(given: Fixture) -> object:
    return compute(given.cube.layers["counts"].sum(), n_threads=0)


@case(
    errors.ClusterConnectError,
    r"cluster: the scheduler file <dir>/scheduler\.json does not exist; start the scheduler "
    r"with `dask scheduler --scheduler-file` first, or give its address \(tcp://HOST:8786\)",
)
def _cluster_connect(given: Fixture) -> object:
    return connect(str(given.directory / "scheduler.json"))


@case(
    errors.ClusterLostError,
    r"the client's Dask scheduler is gone \(the client is closed\); nothing was published - "
    r"restart the scheduler \(its log says why it stopped\) and run again",
)
def _cluster_lost(given: Fixture) -> object:
    cluster = LocalCluster(n_workers=1, processes=False, dashboard_address=None)
    with Client(cluster, set_as_default=False) as client:
        cluster.close()
        return compute(given.cube.layers["counts"].sum(), client=client)


# --- the tests ------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cube, Path, LimmaResults]:
    cube = demo_cube(n_features=40, n_donors=2)
    path = write_cube(cube, tmp_path_factory.mktemp("source") / "cube.zarr")
    return cube, path, limma_voom(cube, design="~ condition")


@pytest.fixture
def given(source: tuple[Cube, Path, LimmaResults], tmp_path: Path) -> Fixture:
    """The small cube, a file of it in this case's directory, its results, and the directory."""
    cube, path, results = source
    return Fixture(cube, Path(shutil.copytree(path, tmp_path / "cube.zarr")), results, tmp_path)


def _classes() -> set[type[Exception]]:
    return {getattr(errors, name) for name in errors.__all__}


@pytest.mark.parametrize("cls", sorted(CASES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_message_names_key_expected_found_and_remedy(cls: type[Exception], given: Fixture) -> None:
    """Each error, raised through the public API, has exactly its pinned message."""
    pattern = CASES[cls].pattern.replace("<dir>", re.escape(str(given.directory)))
    with pytest.raises(cls) as info:
        CASES[cls].trigger(given)
    assert type(info.value) is cls
    assert re.fullmatch(pattern, str(info.value)), f"{str(info.value)!r}\n  !~ {pattern!r}"


def test_every_public_error_has_a_case() -> None:
    """Every class in cytepool.errors.__all__ is pinned here, or is a base that none raises."""
    assert set(CASES) | BASES == _classes()
    assert not set(CASES) & BASES


def test_errors_subclass_the_root_and_their_builtin() -> None:
    """Every error is a CytePoolError (so a ValueError), a cube or a limma error, and the builtin it refines."""
    for cls in _classes():
        assert issubclass(cls, errors.CytePoolError), cls
        assert issubclass(cls, ValueError), cls
        assert issubclass(cls, BUILTINS.get(cls, ValueError)), cls
    assert set(BUILTINS) <= _classes()
    cube = {c for c in _classes() if issubclass(c, errors.CubeError)}
    limma = {c for c in _classes() if issubclass(c, errors.LimmaError)}
    cluster = {errors.ClusterConnectError, errors.ClusterLostError}
    assert not cube & limma
    assert cube | limma | cluster | {errors.CytePoolError} == _classes()
    assert {errors.CubeShapeError, errors.ChainVerificationError, errors.NegativeValueError} <= cube
    assert {errors.DesignError, errors.ResultExistsError, errors.ResultMismatchError} <= limma
