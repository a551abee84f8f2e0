"""The operation namespaces of a store: ``ds.qc``, ``ds.features``, ``ds.reduce`` ...

Each namespace lists its operations as :class:`operation` descriptors over
the functions of :mod:`cytearc.ops`, so ``ds.features.normalize`` *is*
:func:`cytearc.ops.normalize.normalize` with the store bound: the same
signature (checked by mypy), the same docstring (shown by ``help()``).
Adding an operation is writing its function and one line in its namespace.

Examples
--------
>>> import inspect
>>> from cytearc.ops.namespaces import Features
>>> list(inspect.signature(Features(object()).normalize).parameters)[:3]  # doctest: +SKIP
['assay', 'method', 'cell_selection']
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from cytearc.ops.clustering import leiden
from cytearc.ops.compare import compute_bulk, write_bulk
from cytearc.ops.detection import detected
from cytearc.ops.embedding import umap
from cytearc.ops.harmony import harmony
from cytearc.ops.hto import hto_demultiplexing
from cytearc.ops.hvgs import hvgs
from cytearc.ops.lsi import lsi, prevalent_peaks
from cytearc.ops.markers import search, table
from cytearc.ops.neighbors import neighbors
from cytearc.ops.normalize import normalize
from cytearc.ops.pca import pca
from cytearc.ops.qc import auto_filter, feature_percentage, filter_cells, metrics
from cytearc.ops.wnn import modalities

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Concatenate, Self

    from cytearc.storage.store import AnalysisStore

__all__ = [
    "Cluster",
    "Compare",
    "Embedding",
    "Features",
    "Graph",
    "Integration",
    "Markers",
    "Namespace",
    "Qc",
    "Reduce",
    "operation",
]

P = ParamSpec("P")
R = TypeVar("R")


class Namespace:
    """A group of operations bound to one store.

    Parameters
    ----------
    store
        The store the operations run on (any
        :class:`~cytearc.storage.store.AnalysisStore`); a
        :class:`~cytearc.DataStore` makes its namespaces itself.
    """

    def __init__(self, store: AnalysisStore) -> None:
        self._store = store

    def __dir__(self) -> list[str]:
        return sorted(name for name in dir(type(self)) if not name.startswith("_"))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._store.where}: {', '.join(dir(self))}>"


class operation(Generic[P, R]):  # noqa: N801 (a descriptor used like a decorator, as functools.cached_property)
    """An operation of a namespace: ``func`` with the namespace's store bound as its first argument.

    Parameters
    ----------
    func
        An operation taking the store first.
    """

    def __init__(self, func: Callable[Concatenate[AnalysisStore, P], R]) -> None:
        self.func = func
        parameters = list(inspect.signature(func).parameters.values())[1:]
        self.signature = inspect.signature(func).replace(parameters=parameters)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__module__ = func.__module__  # doctest collects the example once, in its own module

    @overload
    def __get__(self, namespace: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, namespace: Namespace, owner: type[Any]) -> Callable[P, R]: ...

    def __get__(self, namespace: Namespace | None, owner: type[Any]) -> Self | Callable[P, R]:
        if namespace is None:
            return self
        func, store = self.func, namespace._store

        @functools.wraps(func)
        def bound(*args: P.args, **kwargs: P.kwargs) -> R:
            return func(store, *args, **kwargs)

        bound.__signature__ = self.signature  # type: ignore[attr-defined]
        return bound


class Qc(Namespace):
    """Quality control: per-cell metrics and cell selections by bounds or MAD outliers."""

    metrics = operation(metrics)
    filter = operation(filter_cells)
    auto_filter = operation(auto_filter)
    feature_percentage = operation(feature_percentage)
    hto_demultiplexing = operation(hto_demultiplexing)


class Features(Namespace):
    """Feature-wise operations: normalization, highly variable genes, detection, prevalent peaks."""

    normalize = operation(normalize)
    hvgs = operation(hvgs)
    detected = operation(detected)
    prevalent_peaks = operation(prevalent_peaks)


class Reduce(Namespace):
    """Dimension reduction: PCA, and LSI of ATAC peaks."""

    pca = operation(pca)
    lsi = operation(lsi)


class Graph(Namespace):
    """Cell graphs: the kNN graph and its connectivities."""

    neighbors = operation(neighbors)


class Integration(Namespace):
    """Integration: batch correction of an embedding, and joint graphs of several assays."""

    harmony = operation(harmony)
    modalities = operation(modalities)


class Cluster(Namespace):
    """Clustering: Leiden."""

    leiden = operation(leiden)


class Embedding(Namespace):
    """Embeddings of the kNN graph: UMAP."""

    umap = operation(umap)


class Markers(Namespace):
    """Marker genes: the search, and its table."""

    search = operation(search)
    table = operation(table)


class Compare(Namespace):
    """Pseudobulk: a cube with lazy layers, or the cube written."""

    compute_bulk = operation(compute_bulk)
    write_bulk = operation(write_bulk)
