"""The packages name their API lazily: importing a task's module loads that module's needs only."""

from __future__ import annotations

import importlib
import json
import pickle
import subprocess
import sys
import types
from typing import TYPE_CHECKING

import cloudpickle
import pytest

from cytepool._lazy import lazy_exports

if TYPE_CHECKING:
    from collections.abc import Iterator

HEAVY = ("cytearc.io", "cytearc.plots", "cytearc.datastore", "h5py", "scipy.stats", "anndata")


def _imported_by(statement: str) -> list[str]:
    code = (
        "import json, sys\n"
        f"{statement}\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    found: list[str] = json.loads(done.stdout)
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    "statement",
    [
        "import cytearc",
        "import cytepool",
        "import cytearc.ops.normalize, cytearc.ops.pca, cytearc.storage.counts",
        "import cytepool.cube.tasks",
        "from cytearc.engine import cluster; [__import__(m) for m in cluster.TASK_MODULES]",
    ],
)
def test_a_task_module_imports_no_importer_store_or_plot(statement: str) -> None:
    """What a worker imports to run the recipe's tasks leaves out the importers, h5py and plots."""
    assert _imported_by(statement) == []


def test_an_export_stays_itself_when_its_submodule_is_imported() -> None:
    """``cytearc.ops.pca`` is the function after ``import cytearc.ops.pca``, as an eager import kept it."""
    import cytearc.ops  # noqa: PLC0415
    import cytearc.ops.pca  # noqa: PLC0415
    import cytearc.tools.repack_zarr  # noqa: PLC0415

    assert isinstance(cytearc.ops.pca, types.FunctionType)
    assert cytearc.ops.pca.__module__ == "cytearc.ops.pca"
    assert isinstance(cytearc.tools.repack_zarr, types.FunctionType)
    assert "pca" in dir(cytearc.ops)


@pytest.fixture
def demo_package() -> Iterator[types.ModuleType]:
    module = types.ModuleType("cytepool_lazy_demo")
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_exports_resolve_once_and_unknown_names_raise(demo_package: types.ModuleType) -> None:
    getattr_, dir_ = lazy_exports(
        demo_package.__name__, {"root": "math:sqrt", "JSONDecoder": "json"}
    )
    demo_package.__getattr__ = getattr_  # type: ignore[attr-defined]
    demo_package.__dir__ = dir_  # type: ignore[method-assign]
    assert demo_package.root(16.0) == 4.0
    assert demo_package.__dict__["root"] is importlib.import_module("math").sqrt
    assert demo_package.JSONDecoder is json.JSONDecoder
    assert {"root", "JSONDecoder"} <= set(dir(demo_package))
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        _ = demo_package.missing


@pytest.mark.parametrize("name", ["cytearc", "cytepool", "cytearc.ops", "cytearc.tools"])
def test_a_lazy_package_pickles_by_name(name: str) -> None:
    """A task or result that holds the package (``client.run(import_module, ...)``) pickles it by name."""
    package = importlib.import_module(name)
    assert pickle.loads(pickle.dumps(package)) is package
    assert cloudpickle.loads(cloudpickle.dumps(package)) is package
