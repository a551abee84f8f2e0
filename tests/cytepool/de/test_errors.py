"""Every CytePool error shares one root, CytePoolError, a ValueError."""

from __future__ import annotations

import inspect

import pytest

from cytepool import errors


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_a_cytepool_error(name: str) -> None:
    """Each exported error subclasses CytePoolError (so ValueError), and each class is exported."""
    cls = getattr(errors, name)
    assert issubclass(cls, errors.CytePoolError)
    assert issubclass(cls, ValueError)
    defined = {
        n for n, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)


def test_cube_and_limma_errors_are_the_two_branches() -> None:
    """CubeError and LimmaError derive from CytePoolError directly; DesignError is a LimmaError."""
    assert errors.CubeError.__bases__ == (errors.CytePoolError,)
    assert errors.LimmaError.__bases__ == (errors.CytePoolError,)
    assert issubclass(errors.DesignError, errors.LimmaError)
    assert not issubclass(errors.LimmaError, errors.CubeError)
