"""Fixtures of the deployment recipes' tests: the example scripts as modules, the Compose file.

:class:`Compose` reads ``deploy/compose/compose.yaml`` as Docker Compose does:
YAML anchors and merge keys resolved, then every ``${VAR:-default}``,
``${VAR-default}``, ``${VAR}`` and ``$VAR`` replaced from the given
variables (``$$`` is a ``$``), and an ``environment`` entry without a value
passed through from them.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import yaml

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import ModuleType

DEPLOY: Final = Path(__file__).resolve().parents[2] / "deploy"

_VARIABLE: Final = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<colon>:?)-(?P<default>[^}]*))?\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


_UNSUPPORTED: Final = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[?+]")


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with its variables replaced as Compose replaces them."""
    if _UNSUPPORTED.search(text):
        msg = f"{text!r}: a variable form these tests do not interpolate (${{VAR:?error}} or ${{VAR:+value}})"
        raise ValueError(msg)

    def value(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        found = variables.get(match["braced"] or match["plain"])
        if match["default"] is not None and (found is None or (found == "" and match["colon"])):
            return match["default"]
        return found or ""

    return _VARIABLE.sub(value, text)


def _interpolated(node: object, variables: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, variables)
    if isinstance(node, dict):
        return {key: _interpolated(value, variables) for key, value in node.items()}
    if isinstance(node, list):
        return [_interpolated(value, variables) for value in node]
    return node


class Compose:
    """``compose.yaml`` as Compose reads it with ``variables`` set (in place of the shell's)."""

    path: Final = DEPLOY / "compose" / "compose.yaml"
    interpolate = staticmethod(interpolate)

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.variables = dict(variables)
        self.document: dict[str, Any] = _interpolated(
            yaml.safe_load(self.path.read_text()), self.variables
        )

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        """The services, by name."""
        return self.document["services"]  # type: ignore[no-any-return]

    def command(self, service: str) -> list[str]:
        """The command line of ``service``."""
        command = self.services[service]["command"]
        return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]

    def environment(self, service: str) -> dict[str, str]:
        """The environment Compose gives ``service``: its entries, unset ones passed through."""
        entries = self.services[service].get("environment", {})
        if isinstance(entries, dict):
            entries = [f"{k}={v}" if v is not None else k for k, v in entries.items()]
        out = {}
        for entry in entries:
            name, given, value = str(entry).partition("=")
            if given:
                out[name] = value
            elif name in self.variables:
                out[name] = self.variables[name]
        return out

    def replicas(self, service: str) -> int:
        """How many containers of ``service`` Compose starts."""
        return int(self.services[service].get("deploy", {}).get("replicas", 1))


@pytest.fixture
def compose() -> Callable[[Mapping[str, str]], Compose]:
    """Read ``compose.yaml`` with the given variables."""
    return Compose


def load_example(path: Path) -> ModuleType:
    """Import an example script of ``deploy/`` (not a package) as a module, without running it."""
    spec = importlib.util.spec_from_file_location(f"deploy_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def kube_example() -> ModuleType:
    """``deploy/kubernetes/kube_cluster.py``."""
    return load_example(DEPLOY / "kubernetes" / "kube_cluster.py")


@pytest.fixture(scope="session")
def slurm_example() -> ModuleType:
    """``deploy/slurm/slurm_cluster.py``."""
    return load_example(DEPLOY / "slurm" / "slurm_cluster.py")
