"""The :class:`Cube`: pooled counts per group and sample, with tables and provenance."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import dask.array as da
import numpy as np

from cytepool._html import code, items, json_code, table, view
from cytepool._versions import package_version
from cytepool.compute import compute
from cytepool.cube.encoding import canonical_json, layer_type_word
from cytepool.cube.fingerprints import (
    Digests,
    LayerDigests,
    fingerprint,
    n_cells_digest,
    normalization_digest,
)
from cytepool.cube.tables import TABLE_AXES, EncodedColumn, encode_table, table_digest
from cytepool.cube.tasks import (
    as_layer_array,
    layer_digest_tasks,
    validate_layer_block,
    validated,
)
from cytepool.errors import (
    CubeShapeError,
    CubeValueError,
    FingerprintMismatchError,
    NegativeValueError,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from cytepool._html import Row

__all__ = ["KNOWN_LAYERS", "Cube", "LayerArray"]

KNOWN_LAYERS: Final = ("counts", "detected", "log_sum", "log_sum_sq", "linear_sum")
"""Layers with a meaning known to CytePool; ``counts`` is required, others may be added."""

NONNEGATIVE_LAYERS: Final = frozenset({"counts", "detected"})
_CHANGED: Final = "the values were changed or damaged since they were digested - write the cube again from its source"

FORMAT: Final = "cytepool.cube"
FORMAT_VERSION: Final = 1

LAYER_NAME: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")

LayerArray: TypeAlias = np.ndarray | da.Array


class Cube:
    """Sums over the cells of each (group, sample) pair, per feature.

    Parameters
    ----------
    samples, groups, features : pandas.DataFrame
        One row per sample, group and feature. A table is its columns, in order;
        the index is not kept (use ``reset_index()`` to keep a meaningful one).
        The first column labels the rows (:meth:`select`, :meth:`combine`).
    layers : mapping of str to numpy or Dask arrays
        Each shaped ``(n_groups, n_samples, n_features)``; ``counts`` is
        required. ``detected``, ``log_sum``, ``log_sum_sq`` and ``linear_sum``
        are the usual others; any other name is kept too. Values must be
        finite, and ``counts`` and ``detected`` non-negative. Numpy layers are
        checked here; Dask layers as their blocks are computed, so a bad value
        fails the write or fingerprint that reads it and nothing is published.
    n_cells : array of int, shape (n_samples, n_groups), optional
        Number of cells pooled into each pair; ``None`` for a bulk cube.
    normalization : dict, optional
        JSON object saying how the value layers were computed.
    source : dict, optional
        The exporter's JSON record, kept exactly as given in the provenance.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from cytepool import Cube
    >>> cube = Cube(
    ...     samples=pd.DataFrame({"sample": ["s1", "s2"], "condition": ["ctrl", "stim"]}),
    ...     groups=pd.DataFrame({"group": ["T", "B", "NK"]}),
    ...     features=pd.DataFrame({"gene": ["CD3E", "MS4A1", "NKG7", "ACTB"]}),
    ...     layers={"counts": np.arange(24).reshape(3, 2, 4)},
    ...     n_cells=np.array([[10, 5, 3], [12, 4, 6]]),
    ...     source={"tool": "example"},
    ... )
    >>> cube.shape
    (3, 2, 4)
    >>> cube.fingerprint[:7]
    'sha256:'
    """

    __slots__ = (
        "_digest_sources",
        "_digests",
        "_encoded",
        "_layers",
        "_location",
        "_n_cells",
        "_normalization",
        "_operations",
        "_origin",
        "_tables",
    )

    def __init__(
        self,
        *,
        samples: pd.DataFrame,
        groups: pd.DataFrame,
        features: pd.DataFrame,
        layers: Mapping[str, LayerArray],
        n_cells: np.ndarray | None = None,
        normalization: Mapping[str, Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> None:
        tables = {"samples": samples, "groups": groups, "features": features}
        self._encoded = {axis: encode_table(tables[axis], axis=axis) for axis in TABLE_AXES}
        self._tables = {axis: tables[axis].reset_index(drop=True) for axis in TABLE_AXES}
        shape = (len(groups), len(samples), len(features))
        for axis, n in zip(("groups", "samples", "features"), shape, strict=True):
            if n == 0:
                msg = f"{axis} table has no rows; a cube needs at least one {axis[:-1]}"
                raise CubeShapeError(msg)
        self._layers = MappingProxyType(_parse_layers(layers, shape=shape))
        self._digest_sources: Mapping[str, da.Array] | None = None
        self._n_cells = _parse_n_cells(n_cells, shape=shape)
        self._normalization = _parse_json_object(normalization, what="normalization")
        parsed_source = _parse_json_object(source, what="source")
        self._origin: dict[str, Any] = {
            "cytepool": {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "version": package_version("cytepool"),
            },
            "source": copy.deepcopy(parsed_source),
        }
        self._operations: list[dict[str, Any]] = []
        self._digests: Digests | None = None
        self._location: str | None = None

    @classmethod
    def _assemble(
        cls,
        *,
        tables: Mapping[str, pd.DataFrame],
        layers: Mapping[str, LayerArray],
        n_cells: np.ndarray | None,
        normalization: Mapping[str, Any] | None,
        origin: Mapping[str, Any],
        operations: Sequence[Mapping[str, Any]],
        digests: Digests | None = None,
        digest_sources: Mapping[str, da.Array] | None = None,
        location: str | None = None,
    ) -> Cube:
        """A cube with a given provenance and, when known, digests (for readers and operations)."""
        cube = cls(
            samples=tables["samples"],
            groups=tables["groups"],
            features=tables["features"],
            layers=layers,
            n_cells=n_cells,
            normalization=normalization,
        )
        cube._origin = copy.deepcopy(dict(origin))
        cube._operations = copy.deepcopy([dict(op) for op in operations])
        cube._digests = digests
        cube._digest_sources = digest_sources
        cube._location = location
        return cube

    # -- values ---------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(n_groups, n_samples, n_features)``."""
        return (
            len(self._tables["groups"]),
            len(self._tables["samples"]),
            len(self._tables["features"]),
        )

    @property
    def samples(self) -> pd.DataFrame:
        """The sample table (a copy)."""
        return self._tables["samples"].copy()

    @property
    def groups(self) -> pd.DataFrame:
        """The group table (a copy)."""
        return self._tables["groups"].copy()

    @property
    def features(self) -> pd.DataFrame:
        """The feature table (a copy)."""
        return self._tables["features"].copy()

    @property
    def layers(self) -> Mapping[str, LayerArray]:
        """The layers by name, each ``(n_groups, n_samples, n_features)``; read-only mapping."""
        return self._layers

    @property
    def n_cells(self) -> np.ndarray | None:
        """Cells pooled per (sample, group), int64 ``(n_samples, n_groups)``; None when bulk."""
        return None if self._n_cells is None else self._n_cells.copy()

    @property
    def is_bulk(self) -> bool:
        """True when the cube has no cell numbers."""
        return self._n_cells is None

    @property
    def normalization(self) -> dict[str, Any] | None:
        """How the value layers were computed, as given."""
        return copy.deepcopy(self._normalization)

    @property
    def source(self) -> dict[str, Any] | None:
        """The exporter's record, verbatim."""
        source: dict[str, Any] | None = copy.deepcopy(self._origin["source"])
        return source

    def encoded_table(self, axis: str) -> tuple[EncodedColumn, ...]:
        """The stored encoding of the ``axis`` table (``samples``, ``groups`` or ``features``).

        Parameters
        ----------
        axis
            ``samples``, ``groups`` or ``features``.

        Returns
        -------
        tuple of EncodedColumn
            The table's columns as the file stores them, in order.
        """
        return self._encoded[axis]

    def __repr__(self) -> str:
        g, s, f = self.shape
        kind = "bulk cube" if self.is_bulk else "cube"
        return f"<cytepool.Cube: {kind} of {g} groups x {s} samples x {f} features; layers {sorted(self._layers)}>"

    def _repr_html_(self) -> str:
        """The cube in a notebook: shape, fingerprint, layers, tables, cells, source and operations.

        Nothing is computed: the fingerprint of a cube whose digests are not
        known yet (made in memory, not yet written or fingerprinted) is said
        to be so.
        """
        g, s, f = self.shape
        known = None if self._digests is None else fingerprint(self._digests, shape=self.shape)
        tables = self._tables
        layers = [(n, x.dtype, _residence(x)) for n, x in sorted(self._layers.items())]
        operations = [(op["operation"], json_code(op["parameters"])) for op in self._operations]
        normalization = self._normalization
        pooled = "none (bulk)" if self._n_cells is None else f"{int(self._n_cells.sum()):,}"
        rows: list[Row] = [
            ("shape", f"{g:,} groups x {s:,} samples x {f:,} features"),
            (
                "fingerprint",
                code(known) if known else "not known yet (cube.fingerprint computes it)",
            ),
            ("location", None if self._location is None else code(self._location)),
            ("layers", table(layers, header=("layer", "dtype", "values"))),
            ("groups", items(tables["groups"].iloc[:, 0])),
            ("samples", items(tables["samples"].iloc[:, 0])),
            ("sample columns", items(tables["samples"].columns)),
            ("features", items(tables["features"].iloc[:, 0])),
            ("feature columns", items(tables["features"].columns)),
            ("cells pooled", pooled),
            ("normalization", None if normalization is None else json_code(normalization)),
            ("source", json_code(self._origin["source"])),
            ("operations", table(operations, header=("operation", "parameters"))),
            ("made with", f"cytepool {self._origin['cytepool']['version']}"),
        ]
        return view(f"cytepool.Cube ({'bulk cube' if self.is_bulk else 'cube'})", rows)

    # -- identity -------------------------------------------------------------

    @property
    def digests(self) -> dict[str, Any]:
        """Every digest, in the form the file stores them (attribute ``digests``)."""
        return self._known_digests().to_json()

    @property
    def fingerprint(self) -> str:
        """SHA-256 fingerprint of the cube's values (see :mod:`cytepool.cube.fingerprints`)."""
        return fingerprint(self._known_digests(), shape=self.shape)

    def _known_digests(self) -> Digests:
        if self._digests is None:
            self._digests = self._compute_digests()
        return self._digests

    def _set_digests(self, digests: Digests) -> None:
        """Record digests computed while the layers were written."""
        if self._digests is None:
            self._digests = digests

    def _compute_digests(self, *, progress: bool = False) -> Digests:
        sources = self._digest_sources or {n: as_layer_array(x) for n, x in self._layers.items()}
        names = sorted(sources)
        tasks = [layer_digest_tasks(sources[n]) for n in names]
        results = compute(*tasks, progress=progress)
        layers = {
            n: LayerDigests(type=layer_type_word(self._layers[n].dtype), groups=tuple(r))
            for n, r in zip(names, results, strict=True)
        }
        return self.static_digests(layers)

    def static_digests(self, layers: Mapping[str, LayerDigests]) -> Digests:
        """Digests of the tables, cell numbers and normalization, with the given layer digests.

        Parameters
        ----------
        layers
            Each layer's digests (computed while the layers were written).

        Returns
        -------
        Digests
            Every digest of the cube.
        """
        n_groups, n_samples, n_features = self.shape
        rows = {"samples": n_samples, "groups": n_groups, "features": n_features}
        tables = {a: table_digest(self._encoded[a], n_rows=rows[a]) for a in TABLE_AXES}
        return Digests(
            samples=tables["samples"],
            groups=tables["groups"],
            features=tables["features"],
            n_cells=None if self._n_cells is None else n_cells_digest(self._n_cells),
            normalization=None
            if self._normalization is None
            else normalization_digest(self._normalization),
            layers=dict(layers),
        )

    def verify_fingerprint(self, *, progress: bool = False) -> str:
        """Recompute every digest from the values and compare; return the fingerprint.

        Parameters
        ----------
        progress
            Show a progress bar while the layers are read.

        Returns
        -------
        str
            The fingerprint, ``sha256:`` and 64 hex digits.

        Raises
        ------
        FingerprintMismatchError
            On the first digest that differs, in manifest order, naming it.
        """
        expected = self._known_digests()
        found = self._compute_digests(progress=progress)
        where = f"{self._location}: " if self._location else ""
        for key in ("samples", "groups", "features", "n_cells", "normalization"):
            want, got = getattr(expected, key), getattr(found, key)
            if want != got:
                msg = f"{where}{key}: expected {want}, computed {got}; {_CHANGED}"
                raise FingerprintMismatchError(msg)
        for name in sorted(expected.layers):
            pairs = zip(expected.layers[name].groups, found.layers[name].groups, strict=True)
            for g, (want, got) in enumerate(pairs):
                if want != got:
                    label = self._tables["groups"].iloc[g, 0]
                    msg = f"{where}layer {name!r}, group {g} ({label!r}): expected {want}, computed {got}; {_CHANGED}"
                    raise FingerprintMismatchError(msg)
        return self.fingerprint

    # -- provenance -----------------------------------------------------------

    @property
    def provenance(self) -> dict[str, Any]:
        """JSON object with ``cytepool``, ``source`` and ``operations`` (see :mod:`.provenance`)."""
        operations = copy.deepcopy(self._operations)
        if operations and operations[-1].get("output") is None:
            operations[-1]["output"] = self.fingerprint
        return {**copy.deepcopy(self._origin), "operations": operations}

    def history(self) -> str:
        """The provenance in plain words, one line per step.

        Returns
        -------
        str
            The lines (see :func:`~cytepool.describe_provenance`).
        """
        from cytepool.cube.provenance import describe_provenance  # noqa: PLC0415

        return describe_provenance(self.provenance)

    def _derive(
        self,
        *,
        operation: str,
        parameters: Mapping[str, Any],
        tables: Mapping[str, pd.DataFrame],
        layers: Mapping[str, LayerArray],
        n_cells: np.ndarray | None,
    ) -> Cube:
        record = {
            "operation": operation,
            "parameters": dict(parameters),
            "input": self.fingerprint,
            "output": None,
        }
        canonical_json(record["parameters"], what=f"{operation} parameters")
        provenance = self.provenance
        return Cube._assemble(
            tables=tables,
            layers=layers,
            n_cells=n_cells,
            normalization=self._normalization,
            origin=self._origin,
            operations=[*provenance["operations"], record],
        )

    # -- operations -----------------------------------------------------------

    def select(
        self,
        *,
        samples: Sequence[Any] | np.ndarray | None = None,
        groups: Sequence[Any] | np.ndarray | None = None,
        features: Sequence[Any] | np.ndarray | None = None,
    ) -> Cube:
        """A cube of the chosen samples, groups and features, in the order given.

        Each argument is a list of labels (values of the table's first column)
        or a boolean mask; ``None`` keeps the axis whole. The result's provenance
        gains a ``select`` record with the chosen positions.

        Parameters
        ----------
        samples
            The samples to keep.
        groups
            The groups to keep.
        features
            The features to keep.

        Returns
        -------
        Cube
            The new cube.

        Raises
        ------
        CubeValueError
            A label is unknown or repeated, or a mask has the wrong length.
        """
        from cytepool.cube.operations import select  # noqa: PLC0415

        return select(self, samples=samples, groups=groups, features=features)

    def combine(self, *, axis: str, mapping: Mapping[Any, Any]) -> Cube:
        """Merge groups or samples: ``mapping`` sends labels to new labels.

        Layers and cell numbers of merged members are summed (``log_sum_sq``
        and the other value layers stay sums); labels absent from ``mapping``
        keep their own. New members are ordered by first appearance. Columns
        other than the label column are kept where they are constant within
        every new member.

        Parameters
        ----------
        axis
            ``groups`` or ``samples``.
        mapping
            Old label to new label.

        Returns
        -------
        Cube
            The new cube, with a ``combine`` record in its provenance.

        Raises
        ------
        CubeValueError
            ``axis`` is not one of those, or ``mapping`` names unknown labels.
        """
        from cytepool.cube.operations import combine  # noqa: PLC0415

        return combine(self, axis=axis, mapping=mapping)


def _residence(layer: LayerArray) -> str:
    """Where a layer's values are: in memory, or lazy Dask blocks."""
    if isinstance(layer, da.Array):
        return f"lazy (Dask, {layer.npartitions} blocks of up to {layer.chunksize})"
    return "in memory"


def _parse_layers(layers: object, *, shape: tuple[int, int, int]) -> dict[str, LayerArray]:
    if not isinstance(layers, Mapping) or "counts" not in layers:
        found = sorted(map(str, layers)) if isinstance(layers, Mapping) else type(layers).__name__
        msg = f"layers: expected a mapping of names to arrays that holds 'counts', found {found}"
        raise CubeShapeError(msg)
    parsed: dict[str, LayerArray] = {}
    for name, layer in layers.items():
        if not isinstance(name, str) or not LAYER_NAME.match(name) or name.startswith("__"):
            msg = f"layer name {name!r} is not a name a Zarr node can have; use letters, digits, '_', '.' and '-'"
            raise CubeValueError(msg)
        if not isinstance(layer, np.ndarray | da.Array):
            msg = f"layer {name!r}: expected a numpy or Dask array, found {type(layer).__name__}"
            raise CubeValueError(msg)
        if tuple(layer.shape) != shape:
            msg = f"layer {name!r}: expected shape (n_groups, n_samples, n_features) = {shape}, found {tuple(layer.shape)}"
            raise CubeShapeError(msg)
        if layer.dtype.kind not in "biuf" or layer.dtype == np.float16:
            msg = f"layer {name!r}: expected a bool, integer, float32 or float64 dtype, found {layer.dtype}"
            raise CubeValueError(msg)
        nonnegative = name in NONNEGATIVE_LAYERS
        if isinstance(layer, da.Array):
            parsed[name] = validated(layer, name=name, nonnegative=nonnegative)
            continue
        validate_layer_block(layer, name=name, nonnegative=nonnegative)
        view = layer.view()
        view.flags.writeable = False
        parsed[name] = view
    return parsed


def _parse_n_cells(n_cells: np.ndarray | None, *, shape: tuple[int, int, int]) -> np.ndarray | None:
    if n_cells is None:
        return None
    array = np.asarray(n_cells)
    n_groups, n_samples, _ = shape
    if array.shape != (n_samples, n_groups):
        msg = f"n_cells: expected shape (n_samples, n_groups) = {(n_samples, n_groups)}, found {array.shape}"
        raise CubeShapeError(msg)
    if array.dtype.kind not in "iu":
        msg = f"n_cells: expected integers, found dtype {array.dtype}"
        raise CubeValueError(msg)
    if array.dtype == np.uint64 and array.size and int(array.max()) > np.iinfo(np.int64).max:
        msg = "n_cells: values above 2**63-1 cannot be stored as int64"
        raise CubeValueError(msg)
    if array.size and array.min() < 0:
        where = tuple(int(i) for i in np.argwhere(array < 0)[0])
        msg = f"n_cells: negative value {array[where]} at (sample, group) {where}; cell numbers count cells"
        raise NegativeValueError(msg)
    out = array.astype(np.int64, copy=True)
    out.flags.writeable = False
    return out


def _parse_json_object(value: Mapping[str, Any] | None, *, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        msg = f"{what}: expected a JSON object (dict) or None, found {type(value).__name__}"
        raise CubeValueError(msg)
    canonical_json(value, what=what)
    return copy.deepcopy(value)
