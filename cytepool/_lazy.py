"""Package attributes imported on first use (PEP 562), so that importing one module stays light.

A Dask worker that unpickles a task imports the task's module, and with it
every ``__init__`` above it: the packages' ``__init__`` modules name their
public API through :func:`lazy_exports` instead of importing it, so a
worker that runs CyteArc's count kernels does not also load the importers,
h5py, scipy.stats and the other operations' modules.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each export from its module on first use.

    An export keeps its name when a submodule of that name is imported (the
    function ``pca`` of the module ``ops.pca``): the import system binds an
    imported submodule to the package attribute of its name, which the
    package's module class declines for the names of ``exports``, as an
    eager ``from .pca import pca`` in the ``__init__`` did.

    Parameters
    ----------
    package
        The package's name (``__name__`` in its ``__init__``), already in
        :data:`sys.modules`.
    exports
        Attribute name -> the module that defines it, or ``"module:name"``
        when the module defines it under another name.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)`` to assign in the package's ``__init__``.

    Examples
    --------
    >>> import types, sys
    >>> sys.modules["demo_package"] = types.ModuleType("demo_package")
    >>> getattr_, dir_ = lazy_exports("demo_package", {"root": "math:sqrt"})
    >>> getattr_("root")(9.0), "root" in dir_()
    (3.0, True)
    """
    module = sys.modules[package]
    namespace = module.__dict__

    def __getattr__(name: str) -> object:  # noqa: N807 (the PEP 562 hook)
        source = exports.get(name)
        if source is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        source, _, defined = source.partition(":")
        value = getattr(importlib.import_module(source), defined or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807 (the PEP 562 hook)
        return sorted({*namespace, *exports})

    class LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: object) -> None:
            if name in exports and getattr(value, "__name__", None) == f"{package}.{name}":
                return
            super().__setattr__(name, value)

        def __reduce__(self) -> tuple[Callable[[str], types.ModuleType], tuple[str]]:
            # pickled by name as a plain module is, so a task or result may refer to it
            return importlib.import_module, (self.__name__,)

    module.__class__ = LazyPackage
    return __getattr__, __dir__
