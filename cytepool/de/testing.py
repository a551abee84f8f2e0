"""A test kit for limma-voom results: compare them with each other or with R's numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from cytepool.de.result import LimmaResult

__all__ = ["assert_result_equal", "max_relative_difference"]


def max_relative_difference(actual: object, expected: object) -> float:
    """The largest ``|a - e| / |e|`` over the entries (``|a - e|`` where ``e`` is 0).

    NaN equals NaN, and equal entries (infinities included) differ by 0.

    Parameters
    ----------
    actual, expected
        Array-likes of one shape.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        When the shapes differ.

    Examples
    --------
    >>> max_relative_difference([1.0, 2.0, 0.0], [1.0, 2.0 + 2e-12, 0.0]) < 1.1e-12
    True
    """
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        msg = f"shapes differ: {a.shape} and {e.shape}"
        raise ValueError(msg)
    if a.size == 0:
        return 0.0
    same = (a == e) | (np.isnan(a) & np.isnan(e))
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - e))
    scale = np.where(e == 0.0, 1.0, np.abs(e))
    return float(np.max(diff / scale))


def _assert_frame(
    actual: pd.DataFrame | None, expected: pd.DataFrame | None, *, rtol: float, what: str
) -> None:
    if expected is None or actual is None:
        assert actual is None, f"{what}: only the actual result has it"
        assert expected is None, f"{what}: only the expected result has it"
        return
    pd.testing.assert_index_equal(actual.index, expected.index, obj=f"{what} index")
    pd.testing.assert_index_equal(actual.columns, expected.columns, obj=f"{what} columns")
    worst = max_relative_difference(actual.to_numpy(), expected.to_numpy())
    assert worst <= rtol, f"{what}: largest relative difference {worst:.3g} > {rtol:g}"


def assert_result_equal(actual: LimmaResult, expected: LimmaResult, *, rtol: float = 0.0) -> None:
    """Assert two results hold the same table, design, library sizes, prior, filter and metadata.

    Numbers may differ by ``rtol`` relatively; labels, settings and cube
    records must be equal. voom's matrices are compared when both have them.

    Parameters
    ----------
    actual, expected
        The results.
    rtol
        The largest relative difference allowed (see :func:`max_relative_difference`).

    Raises
    ------
    AssertionError
        Naming the first part that differs.
    """
    _assert_frame(actual.table, expected.table, rtol=rtol, what="table")
    _assert_frame(actual.design, expected.design, rtol=rtol, what="design")
    _assert_frame(actual.weights, expected.weights, rtol=rtol, what="weights")
    _assert_frame(actual.E, expected.E, rtol=rtol, what="E")
    _assert_frame(actual.fit, expected.fit, rtol=rtol, what="fit")
    for name in ("lib_size", "norm_factors"):
        a, e = getattr(actual, name), getattr(expected, name)
        pd.testing.assert_index_equal(a.index, e.index, obj=name)
        assert max_relative_difference(a, e) <= rtol, name
    pd.testing.assert_series_equal(actual.kept, expected.kept, obj="kept")
    prior_a, prior_e = actual.prior, expected.prior
    for name in ("df_prior", "s2_prior", "var_prior"):
        a, e = getattr(prior_a, name), getattr(prior_e, name)
        assert max_relative_difference(a, e) <= rtol, f"prior.{name}: {a!r} != {e!r}"
    assert actual.settings == expected.settings, "settings differ"
    assert actual.cube == expected.cube, "cube records differ"
