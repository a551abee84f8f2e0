"""CytePool stands without CyteArc; what the two share lives in CytePool; each knows its version."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import dateutil
import numpy as np
import pytest

import cytearc
import cytepool
from cytearc import _warnings as cytearc_warnings
from cytearc.errors import NonFiniteArtifactError
from cytearc.storage.finite_values import validate_finite
from cytepool._versions import UNKNOWN_VERSION, package_version
from cytepool._warnings import warn_user
from cytepool.block_checks import first_nonfinite
from cytepool.cube.tasks import validate_layer_block
from cytepool.errors import NonFiniteValueError

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.mark.slow
def test_cytepool_imports_without_cytearc() -> None:
    """A fresh interpreter imports cytepool, its cubes and limma-voom, and no cytearc module."""
    code = (
        "import sys, cytepool, cytepool.cli, cytepool.de, cytepool.plots; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cytearc'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_each_package_reports_its_distribution_version() -> None:
    """Both import packages carry the version of the one distribution that installs them."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    assert project["name"] == "cytearc"
    assert cytepool.__version__ == project["version"]
    assert cytearc.__version__ == project["version"]


@pytest.mark.slow
def test_version_is_looked_up_by_import_name() -> None:
    """An import package named unlike its distribution gets that distribution's version."""
    assert package_version("dateutil") == dateutil.__version__  # from python-dateutil
    assert package_version("no_such_package_here") == UNKNOWN_VERSION


def test_one_warning_helper_points_past_both_packages() -> None:
    """The warn_user of cytearc is cytepool's, and its warnings name this file."""
    assert cytearc_warnings.warn_user is warn_user
    with pytest.warns(UserWarning, match="shared") as record:
        warn_user("shared")
    assert record[0].filename == __file__


def test_cytepool_warnings_point_at_the_caller() -> None:
    """A warning raised deep inside cytepool.de is attributed to this file."""
    from cytepool.de.ebayes import fit_f_dist  # noqa: PLC0415

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fit_f_dist(np.array([0.0, 1.0, 2.0, 0.5]), np.array([3.0, 3.0, 3.0, 3.0]))
    assert record
    assert {w.filename for w in record} == {__file__}


def test_one_finite_value_checker_serves_both_packages() -> None:
    """Cube layers and artifact arrays report the same first non-finite value, each its own error."""
    block = np.zeros((2, 3, 4))
    block[1, 2, 0] = np.inf
    block[1, 2, 3] = np.nan
    assert first_nonfinite(block) == (1, 2, 0)
    with pytest.raises(
        NonFiniteValueError, match=r"holds inf at \(group, sample, feature\) \(1, 2, 0\)"
    ):
        validate_layer_block(block, name="log_sum", nonnegative=False)
    with pytest.raises(NonFiniteArtifactError, match="holds inf at row 11") as info:
        validate_finite(block[1], operation="pca", array="coords", first_row=9)
    assert info.value.row == 11
