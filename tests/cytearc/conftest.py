"""Fixtures of the CyteArc tests: one engine per session, the shared real data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cytearc.engine.cluster import Engine, get_engine, shutdown
from cytearc.errors import EngineConfigError

if TYPE_CHECKING:
    from collections.abc import Iterator

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="session")
def _engine_session() -> Iterator[None]:
    yield
    shutdown()


@pytest.fixture
def engine(_engine_session: None) -> Engine:
    """The process's local cluster of two worker processes with 2 GiB between them.

    Started on first use and reused; started again if a test shut it down or
    left an engine of other settings running.
    """
    try:
        return get_engine(mem_budget="2GiB", workers=2)
    except EngineConfigError:
        shutdown()
        return get_engine(mem_budget="2GiB", workers=2)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of small real datasets beside the project."""
    assert SHARED_DATA.is_dir(), f"expected the shared data at {SHARED_DATA}"
    return SHARED_DATA
