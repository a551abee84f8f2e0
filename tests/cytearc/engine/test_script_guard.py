"""A plain script that starts the local cluster without a main guard gets a named error with the fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

START = """
from cytearc.engine import get_engine

engine = get_engine(mem_budget="1G", workers=1)
print("workers:", len(engine.client.scheduler_info()["workers"]))
"""


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=script.parent,
    )


@pytest.mark.slow
def test_unguarded_script_gets_engine_config_error(tmp_path: Path) -> None:
    """Without `if __name__ == "__main__":` the script fails with EngineConfigError naming the remedy."""
    script = tmp_path / "plain.py"
    script.write_text(START)
    result = _run(script)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("cytearc.errors.EngineConfigError: ")
    assert str(script) in last
    assert 'if __name__ == "__main__":' in last
    assert 'cluster="threads"' in last


@pytest.mark.slow
def test_guarded_script_starts_the_cluster(tmp_path: Path) -> None:
    """The same code under the main guard starts the cluster."""
    script = tmp_path / "guarded.py"
    body = textwrap.indent(START.strip(), "    ")
    script.write_text(f'if __name__ == "__main__":\n{body}\n')
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert "workers: 1" in result.stdout
