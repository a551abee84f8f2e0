"""Versions of import packages, read from the distribution that installed them.

An import package and its distribution need not share a name: ``cytepool``
and ``cytearc`` are both installed by the distribution ``cytearc`` (see
``pyproject.toml``), as ``sklearn`` is by ``scikit-learn``.
"""

from __future__ import annotations

import functools
from importlib.metadata import distributions, packages_distributions, version

__all__ = ["UNKNOWN_VERSION", "package_version"]

UNKNOWN_VERSION = "0+unknown"
"""The version of a package that no installed distribution provides (a bare source tree)."""


@functools.cache
def package_version(package: str) -> str:
    """The version of the installed distribution that provides the import package ``package``.

    Parameters
    ----------
    package
        A top-level import name, such as ``"cytepool"``.

    Returns
    -------
    str
        The distribution's version, or :data:`UNKNOWN_VERSION` when no
        installed distribution provides ``package``.

    Examples
    --------
    >>> package_version("cytepool") == package_version("cytearc")
    True
    >>> package_version("no_such_package")
    '0+unknown'
    """
    for dist in distributions():
        if package in (dist.read_text("top_level.txt") or "").split():
            return dist.version
    names = packages_distributions().get(package)
    return version(names[0]) if names else UNKNOWN_VERSION
