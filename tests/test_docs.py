"""The documentation: every export is in the API reference, and the examples of the pages run.

The code blocks of ``README.md`` and ``docs/*.md`` run in a fresh process per
page, in a temporary folder, in page order: ``python`` blocks share one
namespace per page, ``bash`` blocks run with ``bash -e`` and reach the
project's console scripts as ``.venv/bin/cytearc`` (the folder links
``.venv`` to this interpreter's environment). HTML comments in a page steer
its run:

- ``<!-- test: skip REASON -->`` skips the next code block;
- ``<!-- test-setup: NAME -->`` runs :data:`SETUPS` ``[NAME]`` at that point
  (data the next blocks need: a 10x file, an analysed store, ...);
- ``<!-- test-check: NAME -->`` runs :data:`CHECKS` ``[NAME]`` at that point,
  with the page's namespace (what the blocks above must have computed).

A ``bash`` block that calls anything but the two console scripts must be
marked ``skip``; a page that names an unknown setup or check fails. Blocks
of other languages (``json``, layouts without a language) are text.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import pkgutil
import re
import shutil
import struct
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT: Final = Path(__file__).resolve().parents[1]
API: Final = ROOT / "docs" / "api"
PAGES: Final = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHARED_DATA: Final = ROOT.parent / "shared" / "data"

_FENCE: Final = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
_MARK: Final = re.compile(r"^<!--\s*(test|test-setup|test-check):\s*(.*?)\s*-->\s*$")
_CLI: Final = re.compile(r"^\.venv/bin/(cytearc|cytepool) ")

# --- the API reference -------------------------------------------------------

_DIRECTIVE: Final = re.compile(
    r"^\.\. (?:py:)?(?:auto)?(module|currentmodule|function|class|exception|data|attribute|method)::\s+(\S+)",
    re.MULTILINE,
)
_UNDOCUMENTED: Final = object()


def _resolve(dotted: str) -> object:
    """The object a dotted name documents: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, _UNDOCUMENTED)
        return obj
    return _UNDOCUMENTED


def documented_names() -> set[str]:
    """Every full name the pages of ``docs/api`` document (autodoc or plain directives)."""
    names = set()
    for page in sorted(API.glob("*.rst")):
        module = ""
        for kind, target in _DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            if kind in {"module", "currentmodule"}:
                module = target
                names.add(target)
            else:
                names.add(target if "." in target or not module else f"{module}.{target}")
    return names


def public_modules() -> list[str]:
    """The packages, their public subpackages, and the modules with a page of their own."""
    found = set()
    for top in ("cytearc", "cytepool"):
        found.add(top)
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{top}."):
            if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")):
                found.add(info.name)
    found |= {page.stem for page in API.glob("*.rst") if page.stem != "index"}
    return sorted(m for m in found if hasattr(importlib.import_module(m), "__all__"))


def undocumented_exports(modules: list[str], documented: set[str]) -> list[str]:
    """``module.name`` for every name of a module's ``__all__`` that no documented name is.

    A name is documented under its own full name, or under any documented full
    name ending in the same name that is the same object
    (``cytearc.StoreFormatError`` is documented as
    ``cytearc.errors.StoreFormatError``); an exported module is documented by
    its ``automodule``.
    """
    by_last: dict[str, list[object]] = {}
    for name in documented:
        by_last.setdefault(name.rsplit(".", 1)[-1], []).append(_resolve(name))
    missing = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            full = f"{module_name}.{name}"
            if full in documented or (inspect.ismodule(obj) and obj.__name__ in documented):
                continue
            if any(candidate is obj for candidate in by_last.get(name, [])):
                continue
            missing.append(full)
    return missing


def test_every_export_is_documented() -> None:
    """Each name in the ``__all__`` of the packages and their public subpackages has an API entry."""
    missing = undocumented_exports(public_modules(), documented_names())
    assert not missing, f"add these to a page of docs/api: {missing}"


def test_every_documented_name_exists() -> None:
    """No API entry names an object that is gone (a renamed module or function)."""
    gone = sorted(n for n in documented_names() if _resolve(n) is _UNDOCUMENTED)
    assert not gone, f"docs/api documents names that do not exist: {gone}"


def test_an_undocumented_export_is_found() -> None:
    """The export check reports a name that no page documents, and accepts a re-export's original."""
    documented = documented_names() - {"cytepool.read_cube"}
    assert "cytepool.read_cube" in undocumented_exports(["cytepool"], documented)
    assert "cytearc.StoreFormatError" not in undocumented_exports(["cytearc"], documented)


# --- the code blocks of the pages --------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Step:
    """One thing a page's run does: a code block, a setup or a check."""

    kind: str
    """``python``, ``bash``, ``setup`` or ``check``."""
    text: str
    """The code, or the setup's or check's name."""
    line: int
    """The line of the page the code starts on (1-based)."""


def page_steps(page: Path) -> list[Step]:
    """The steps of a page in order; refuses an unmarked ``bash`` block that is not a console script."""
    lines = page.read_text(encoding="utf-8").splitlines()
    steps: list[Step] = []
    skip = False
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i])
        fence = _FENCE.match(lines[i].lstrip())
        if mark:
            kind, value = mark.groups()
            if kind == "test":
                assert value.startswith("skip "), (
                    f"{page.name}:{i + 1}: expected 'test: skip REASON'"
                )
                skip = True
            else:
                steps.append(Step(kind=kind.removeprefix("test-"), text=value, line=i + 1))
        elif fence:
            ticks, language = fence.groups()
            indent = len(lines[i]) - len(lines[i].lstrip())
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks)
            code = "\n".join(line[indent:] for line in lines[i + 1 : end])
            if language in {"python", "bash"} and not skip:
                if language == "bash":
                    commands = [c for c in code.splitlines() if c.strip()]
                    bad = [c for c in commands if not _CLI.match(c)]
                    assert not bad, (
                        f"{page.name}:{i + 2}: bash blocks run only .venv/bin/cytearc and "
                        f".venv/bin/cytepool; mark this one '<!-- test: skip REASON -->': {bad}"
                    )
                steps.append(Step(kind=language, text=code, line=i + 2))
            skip = False
            i = end
        i += 1
    return steps


RUNNABLE: Final = [p for p in PAGES if any(s.kind in {"python", "bash"} for s in page_steps(p))]


def test_steps_name_known_setups_and_checks() -> None:
    """Every setup and check a page names exists, and every page with examples has steps."""
    for page in PAGES:
        for step in page_steps(page):
            table = {"setup": SETUPS, "check": CHECKS}.get(step.kind)
            assert table is None or step.text in table, f"{page.name}:{step.line}: {step.text}"
    assert any(s.kind == "python" for s in page_steps(ROOT / "README.md"))


def test_an_unmarked_shell_block_is_refused(tmp_path: Path) -> None:
    """A ``bash`` block that runs something else than the console scripts must be marked skip."""
    page = tmp_path / "page.md"
    page.write_text("```bash\npip install cytearc\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="mark this one"):
        page_steps(page)
    page.write_text("<!-- test: skip installs -->\n```bash\npip install cytearc\n```\n")
    assert page_steps(page) == []


@pytest.mark.slow
@pytest.mark.timeout(900)  # a page runs the recipe and the CLIs, each starting a local cluster
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    """The page's python and bash blocks run in order without an error or a warning."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    done = subprocess.run(
        [sys.executable, "-P", __file__, str(page)],  # -P: tests/cytepool must not shadow cytepool
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
    )
    assert done.returncode == 0, f"{page.name}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


# --- setups and checks, run in the page's process ------------------------------


def _synthetic_store(path: str, *, analysed: bool) -> None:
    from cytearc import DataStore  # noqa: PLC0415 (runs in the page's process)
    from cytearc.datasets import write_store  # noqa: PLC0415

    if Path(path).exists():
        shutil.rmtree(path)
    write_store(path, n_cells=1200, n_genes=600, cluster="threads")
    if analysed:
        ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
        ds.pipeline.run("rna_standard", n_top=300, resolution=1.0)


def _setup_tenx_h5(namespace: dict[str, Any]) -> None:
    """``filtered_feature_bc_matrix.h5``: the real 10x v3 CITE-seq file of the shared data."""
    del namespace
    shutil.copy(
        SHARED_DATA / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5", Path.cwd()
    )


def _setup_synthetic_store(namespace: dict[str, Any]) -> None:
    """``pbmc.zarr``: the synthetic dataset (1,200 cells, donors, conditions, named genes)."""
    del namespace
    _synthetic_store("pbmc.zarr", analysed=False)


def _setup_analysed_store(namespace: dict[str, Any]) -> None:
    """``pbmc.zarr`` after the standard recipe: clusters in ``RNA_leiden_cluster``."""
    del namespace
    _synthetic_store("pbmc.zarr", analysed=True)


def _setup_cube_layer(namespace: dict[str, Any]) -> None:
    """``cube``, one of its integer layers as numpy ``layer`` and a group position ``g``."""
    import numpy as np  # noqa: PLC0415

    from cytepool.testing import example_cube  # noqa: PLC0415

    cube = example_cube()
    namespace.update(cube=cube, layer=np.asarray(cube.layers["counts"]), g=1)


def _check_cube_layer_digest(namespace: dict[str, Any]) -> None:
    """The block's digest is the cube's digest of that layer group."""
    cube, g = namespace["cube"], namespace["g"]
    assert namespace["digest"] == cube.digests["layers"]["counts"]["groups"][g], (
        "the digest differs"
    )


SETUPS: Final[dict[str, Callable[[dict[str, Any]], None]]] = {
    "tenx_h5": _setup_tenx_h5,
    "synthetic_store": _setup_synthetic_store,
    "analysed_store": _setup_analysed_store,
    "cube_layer": _setup_cube_layer,
}
CHECKS: Final[dict[str, Callable[[dict[str, Any]], None]]] = {
    "cube_layer_digest": _check_cube_layer_digest,
}


def run_page(page: Path) -> Iterator[str]:
    """Run a page's steps in the current folder; yields each step's place as it starts."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for step in page_steps(page):
        yield f"{page.name}:{step.line} ({step.kind})"
        if step.kind == "setup":
            SETUPS[step.text](namespace)
        elif step.kind == "check":
            CHECKS[step.text](namespace)
        elif step.kind == "bash":
            subprocess.run(["bash", "-e", "-c", step.text], check=True)
        else:
            code = compile("\n" * (step.line - 1) + step.text, str(page), "exec")
            exec(code, namespace)


# --- the store format page -------------------------------------------------------


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return _u64(len(b)) + b


def _column_digest(columns: list[tuple[str, list[str]]]) -> bytes:
    """The raw SHA-256 over ``str(name)`` then ``str(value)`` of each value, column after column."""
    h = hashlib.sha256()
    for name, values in columns:
        h.update(_str(name))
        for value in values:
            h.update(_str(value))
    return h.digest()


def test_dataset_fingerprint_follows_the_store_format_page(tmp_path: Path) -> None:
    """The root's ``cytearc:datasetFingerprint`` recomputed from docs/store-format.md with hashlib alone."""
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415
    import zarr  # noqa: PLC0415

    from cytearc.io import SparseToZarr  # noqa: PLC0415

    cells = pd.DataFrame({"ids": ["AAAC-1", "AAAG-1", "ÄCGT-1"]})
    features = pd.DataFrame(
        {
            "ids": ["ENSG1", "ENSG2", "ADT1"],
            "names": ["CD3E", "MS4A1", "CD3"],
            "feature_types": ["Gene Expression", "Gene Expression", "Antibody Capture"],
        }
    )
    counts = np.array([[1, 0, 5], [0, 2, 0], [3, 4, 1]])
    path = tmp_path / "ds.zarr"
    SparseToZarr(
        counts,
        cells=cells,
        features=features,
        zarr_loc=path,
        cluster="threads",
        show_progress=False,
    ).dump()
    root = zarr.open_group(path, mode="r")

    def stored(group: str, name: str) -> list[str]:
        array = root[f"{group}/{name}"]
        assert isinstance(array, zarr.Array)
        return [str(v) for v in np.asarray(array[...]).tolist()]

    h = hashlib.sha256(b"cytearc dataset fingerprint 1\n")
    h.update(_column_digest([("ids", stored("cellData", "ids"))]))
    for assay in sorted(("ADT", "RNA")):
        h.update(_str(assay))
        table = f"{assay}/featureData"
        h.update(_column_digest([("ids", stored(table, "ids")), ("names", stored(table, "names"))]))
        h.update(_str(str(root[f"matrices/{assay}/counts"].attrs["content_fingerprint"])))
    assert root.attrs["cytearc:datasetFingerprint"] == "sha256:" + h.hexdigest()


if __name__ == "__main__":
    warnings.simplefilter("error")
    start = time.perf_counter()
    for place in run_page(Path(sys.argv[1])):
        print(f"{time.perf_counter() - start:6.1f} s: {place}", flush=True)
