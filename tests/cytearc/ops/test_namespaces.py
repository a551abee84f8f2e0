"""The store's operation namespaces keep each operation's exact signature and docstring."""

from __future__ import annotations

import inspect
import pydoc
import shutil
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cytearc import DataStore
from cytearc.ops import namespaces
from cytearc.ops.normalize import normalize

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[3]


def _operations() -> list[tuple[type[namespaces.Namespace], str, namespaces.operation]]:
    found = []
    for _, cls in inspect.getmembers(namespaces, inspect.isclass):
        if issubclass(cls, namespaces.Namespace) and cls is not namespaces.Namespace:
            for name, member in vars(cls).items():
                if isinstance(member, namespaces.operation):
                    found.append((cls, name, member))
    return found


@pytest.mark.parametrize(
    ("cls", "name", "op"), _operations(), ids=lambda v: getattr(v, "__name__", str(v))
)
def test_bound_operation_has_the_functions_signature_and_docstring(
    planted: Any,
    open_threads: Callable[..., DataStore],
    cls: type[namespaces.Namespace],
    name: str,
    op: namespaces.operation,
) -> None:
    """``ds.<namespace>.<op>`` shows the operation's parameters (without the store) and docstring."""
    bound = getattr(cls(open_threads(planted.path)), name)
    expected = list(inspect.signature(op.func).parameters)[1:]
    assert list(inspect.signature(bound).parameters) == expected
    assert bound.__doc__ == op.func.__doc__
    assert bound.__doc__
    assert "See " not in bound.__doc__.split("\n")[0]


def test_help_shows_the_parameters(planted: Any, open_threads: Callable[..., DataStore]) -> None:
    """``help(ds.features.normalize)`` lists its options and its docstring."""
    text = pydoc.render_doc(open_threads(planted.path).features.normalize, renderer=pydoc.plaintext)
    assert "target_sum" in text
    assert "invalidate_cache" in text
    assert normalize.__doc__ is not None
    assert normalize.__doc__.split("\n")[0] in text


def test_bound_operation_calls_the_function_with_the_store(
    planted: Any, open_threads: Callable[..., DataStore]
) -> None:
    """The bound call and the function called with the store give the same artifact."""
    ds = DataStore(planted.path, zarr_mode="r+", cluster="threads", show_progress=False)
    assert ds.features.normalize("RNA").ref == normalize(ds, "RNA").ref


def test_namespace_dir_lists_its_operations(
    planted: Any, open_threads: Callable[..., DataStore]
) -> None:
    """``dir(ds.qc)`` is its operations, for tab completion."""
    assert dir(open_threads(planted.path).qc) == [
        "auto_filter",
        "feature_percentage",
        "filter",
        "hto_demultiplexing",
        "metrics",
    ]


@pytest.mark.slow
def test_mypy_rejects_bad_calls_and_unknown_attributes(tmp_path: Path) -> None:
    """Mypy strict rejects a wrong option type, an unknown option and ``ds.pipline``; accepts the right calls."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from cytearc import DataStore

            ds = DataStore("x.zarr")
            ds.features.normalize("RNA", target_sum="ten thousand", no_such_option=True)
            ds.pipline
            good = ds.features.normalize("RNA", target_sum=1e4)
            reveal_type(ds.graph.neighbors)
            ds.assays["RNA"].counts
            """
        )
    )
    cache = tmp_path / "cache"
    if (
        ROOT / ".mypy_cache"
    ).is_dir():  # README's line ran mypy on the packages: start from its cache
        shutil.copytree(ROOT / ".mypy_cache", cache)
    out, _, status = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            str(snippet),
        ]
    )
    assert status == 1, out
    lines = [line for line in out.splitlines() if "snippet.py" in line]
    assert any('"target_sum"' in line and "incompatible type" in line for line in lines), out
    assert any('"no_such_option"' in line for line in lines), out
    assert any('"pipline"' in line for line in lines), out
    assert any("def (pca:" in line for line in lines), out
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 3, out
