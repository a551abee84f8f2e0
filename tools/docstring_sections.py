"""Count the public functions whose numpydoc docstring lacks a section it needs.

A public function or method (no leading underscore, in a module without one)
needs ``Parameters`` when it takes arguments besides ``self``/``cls``,
``Returns`` (or ``Yields``) when its return annotation is not ``None``, and
``Raises`` when its body raises an exception of its own (``raise X``, not a
bare re-raise). Properties and overloads are left out. The docs build checks
Parameters and Returns of the documented API (``numpydoc_validation_checks``
in ``docs/conf.py``); this counts every public function, Raises included::

    .venv/bin/python tools/docstring_sections.py [--list]
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

from numpydoc.docscrape import NumpyDocString  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[1]


def _needs(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    names = [a.arg for a in args if a.arg not in {"self", "cls"}]
    if node.args.vararg or node.args.kwarg:
        names.append("*")
    needs = {"Parameters"} if names else set()
    returns = node.returns
    if returns is not None and not (isinstance(returns, ast.Constant) and returns.value is None):
        needs.add("Returns")
    own = [n for n in ast.walk(node) if isinstance(n, ast.Raise) and n.exc is not None]
    if own:
        needs.add("Raises")
    return needs


def _has(doc: str) -> set[str]:
    parsed = NumpyDocString(doc)
    found = {s for s in ("Parameters", "Returns", "Yields", "Raises") if parsed[s]}
    if "Yields" in found:
        found.add("Returns")
    return found


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out.extend(
                (f"{node.name}.{item.name}", item)
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    decorated = {"property", "overload", "cached_property"}
    return [
        (name, f)
        for name, f in out
        if not name.rsplit(".", 1)[-1].startswith("_")
        and not any(getattr(d, "id", getattr(d, "attr", "")) in decorated for d in f.decorator_list)
    ]


def lacking() -> tuple[int, dict[str, list[tuple[str, set[str]]]]]:
    """The number of public functions, and each module's that lack a section, with what they lack."""
    report: dict[str, list[tuple[str, set[str]]]] = {}
    n_functions = 0
    for path in sorted([*ROOT.glob("cytearc/**/*.py"), *ROOT.glob("cytepool/**/*.py")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        module = ".".join(p for p in parts if p != "__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, node in _functions(tree):
            n_functions += 1
            missing = _needs(node) - _has(ast.get_docstring(node) or "")
            if missing:
                report.setdefault(module, []).append((name, missing))
    return n_functions, report


def main(argv: list[str]) -> int:
    """Print the count per module and section (``--list``: every function too)."""
    n_functions, report = lacking()
    total: Counter[str] = Counter()
    for module, entries in report.items():
        counts = Counter(s for _, missing in entries for s in missing)
        total.update(counts)
        print(
            f"{module}: {len(entries)} ({', '.join(f'{s} {n}' for s, n in sorted(counts.items()))})"
        )
        if "--list" in argv:
            for name, missing in entries:
                print(f"    {name}: {', '.join(sorted(missing))}")
    functions = sum(len(e) for e in report.values())
    print(
        f"total: {functions} of {n_functions} public functions lack a section "
        f"({dict(sorted(total.items()))})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
