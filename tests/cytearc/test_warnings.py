"""Warnings point at the user's line, not at CyteArc's."""

from __future__ import annotations

import pytest

from cytearc.assays.types import resolve_assay_type


def test_warning_points_at_the_caller() -> None:
    """An assay named after no preset warns, attributed to this file."""
    with pytest.warns(UserWarning, match="no preset") as record:
        assert resolve_assay_type("Custom_tags") == "Assay"
    assert record[0].filename == __file__
