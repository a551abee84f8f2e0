"""Shared fixtures and the hypothesis profiles of the test suite."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from cytepool.testing import example_cube

if TYPE_CHECKING:
    from cytepool import Cube

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=40)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.load_profile("ci")


@pytest.fixture
def cube() -> Cube:
    return example_cube()
