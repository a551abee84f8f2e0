"""Cube operations: each returns a new cube and appends a record to its provenance.

A record's ``parameters`` hold what is needed to replay the operation exactly
(:func:`replay`), which is how :func:`cytepool.verify_chain` checks a chain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any, Final, cast

import dask.array as da
import numpy as np
import pandas as pd

from cytepool.cube.tasks import as_layer_array
from cytepool.errors import ChainVerificationError, CubeValueError

if TYPE_CHECKING:
    from cytepool.cube.cube import Cube, LayerArray

__all__ = ["OPERATIONS", "combine", "replay", "select"]

_LAYER_AXIS: Final = {"groups": 0, "samples": 1, "features": 2}
_N_CELLS_AXIS: Final = {"samples": 0, "groups": 1}


def _label_column(cube: Cube, axis: str) -> pd.Series:
    table: pd.DataFrame = getattr(cube, axis)
    return table.iloc[:, 0]


def _positions(
    cube: Cube, axis: str, choice: Sequence[Any] | np.ndarray | None
) -> list[int] | None:
    """Positions chosen by labels or a boolean mask, in the order given."""
    if choice is None:
        return None
    labels = _label_column(cube, axis)
    values = np.asarray(choice)
    if values.dtype == np.bool_:
        if values.shape != (len(labels),):
            msg = f"select {axis}: boolean mask of length {len(values)} for {len(labels)} {axis}"
            raise CubeValueError(msg)
        return [int(i) for i in np.flatnonzero(values)]
    if not labels.is_unique:
        msg = (
            f"select {axis}: labels of column {labels.name!r} are not unique, so labels cannot "
            "choose rows; pass a boolean mask"
        )
        raise CubeValueError(msg)
    index = pd.Index(labels.astype(object))
    wanted = list(choice)
    found = index.get_indexer(pd.Index(wanted, dtype=object))
    missing = [w for w, f in zip(wanted, found, strict=True) if f < 0]
    if missing:
        msg = f"select {axis}: no {axis[:-1]} labelled {missing[:5]!r} in column {labels.name!r}"
        raise CubeValueError(msg)
    if len(set(found.tolist())) != len(found):
        msg = f"select {axis}: a label is chosen twice in {wanted!r}"
        raise CubeValueError(msg)
    return [int(i) for i in found]


def select(
    cube: Cube,
    *,
    samples: Sequence[Any] | np.ndarray | None = None,
    groups: Sequence[Any] | np.ndarray | None = None,
    features: Sequence[Any] | np.ndarray | None = None,
) -> Cube:
    """The chosen samples, groups and features of ``cube`` (:meth:`Cube.select <cytepool.Cube.select>`).

    Parameters
    ----------
    cube
        The cube.
    samples
        Sample labels or a boolean mask; None keeps every sample.
    groups
        Group labels or a boolean mask; None keeps every group.
    features
        Feature labels or a boolean mask; None keeps every feature.

    Returns
    -------
    Cube
        The new cube.
    """
    chosen = {
        "samples": _positions(cube, "samples", samples),
        "groups": _positions(cube, "groups", groups),
        "features": _positions(cube, "features", features),
    }
    return _select_positions(cube, chosen)


def _select_positions(cube: Cube, chosen: Mapping[str, list[int] | None]) -> Cube:
    for axis, positions in chosen.items():
        if positions is not None and not positions:
            msg = f"select {axis}: nothing chosen; a cube keeps at least one {axis[:-1]}"
            raise CubeValueError(msg)
    index = tuple(
        slice(None) if chosen[axis] is None else np.asarray(chosen[axis])
        for axis in ("groups", "samples", "features")
    )
    layers: dict[str, LayerArray] = {}
    for name, layer in cube.layers.items():
        x = as_layer_array(layer)
        for dim, sel in enumerate(index):
            if not isinstance(sel, slice):
                x = x[(slice(None),) * dim + (sel,)]
        layers[name] = x
    tables = {
        axis: getattr(cube, axis)
        if chosen[axis] is None
        else getattr(cube, axis).iloc[chosen[axis]].reset_index(drop=True)
        for axis in ("samples", "groups", "features")
    }
    n_cells = cube.n_cells
    if n_cells is not None:
        if chosen["samples"] is not None:
            n_cells = n_cells[chosen["samples"], :]
        if chosen["groups"] is not None:
            n_cells = n_cells[:, chosen["groups"]]
    return cube._derive(
        operation="select",
        parameters=dict(chosen),
        tables=tables,
        layers=layers,
        n_cells=n_cells,
    )


def _json_label(value: Any) -> Any:  # noqa: ANN401 (a table label)
    if isinstance(value, np.generic):
        return value.item()
    return value


def combine(cube: Cube, *, axis: str, mapping: object) -> Cube:
    """Merge groups or samples of ``cube`` (:meth:`Cube.combine <cytepool.Cube.combine>`).

    Parameters
    ----------
    cube
        The cube.
    axis
        ``groups`` or ``samples``.
    mapping
        Old label to new label.

    Returns
    -------
    Cube
        The new cube.

    Raises
    ------
    CubeValueError
        ``axis`` or ``mapping`` is malformed, or names unknown labels.
    """
    if axis not in _N_CELLS_AXIS:
        msg = f"combine: axis must be 'groups' or 'samples', found {axis!r}"
        raise CubeValueError(msg)
    if not isinstance(mapping, Mapping):
        msg = f"combine: mapping must be a mapping of labels to new labels, found {type(mapping).__name__}"
        raise CubeValueError(msg)
    labels = [_json_label(v) for v in _label_column(cube, axis).tolist()]
    unknown = [k for k in mapping if k not in set(labels)]
    if unknown:
        msg = f"combine {axis}: no {axis[:-1]} labelled {unknown[:5]!r}"
        raise CubeValueError(msg)
    new_labels = [_json_label(mapping.get(label, label)) for label in labels]
    order = list(dict.fromkeys(new_labels))
    members = [[i for i, n in enumerate(new_labels) if n == new] for new in order]

    table = getattr(cube, axis)
    key = table.columns[0]
    columns: dict[str, Any] = {key: pd.Series(order)}
    for name in table.columns[1:]:
        column = table[name]
        firsts = []
        for rows in members:
            part = column.iloc[rows]
            if part.nunique(dropna=False) != 1:
                break
            firsts.append(rows[0])
        else:
            columns[name] = column.iloc[firsts].reset_index(drop=True)
    tables = {a: getattr(cube, a) for a in ("samples", "groups", "features")}
    tables[axis] = pd.DataFrame(columns)

    dim = _LAYER_AXIS[axis]
    layers = {
        name: _sum_members(as_layer_array(layer), members, dim=dim)
        for name, layer in cube.layers.items()
    }
    n_cells = cube.n_cells
    if n_cells is not None:
        along = _N_CELLS_AXIS[axis]
        n_cells = np.stack(
            [n_cells.take(m, axis=along).sum(axis=along) for m in members], axis=along
        )
    pairs = [[_json_label(k), _json_label(v)] for k, v in mapping.items()]
    return cube._derive(
        operation="combine",
        parameters={"axis": axis, "mapping": pairs},
        tables=tables,
        layers=layers,
        n_cells=n_cells,
    )


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind == "f":
        return np.dtype(np.float64)
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    return np.dtype(np.int64)


def _sum_members(x: da.Array, members: list[list[int]], *, dim: int) -> da.Array:
    """Members summed in order, one after the other, so every scheduler adds the same way."""
    dtype = _sum_dtype(x.dtype)

    def take(i: int) -> da.Array:
        return cast("da.Array", x[(slice(None),) * dim + (i,)].astype(dtype))

    parts = [reduce(lambda a, b: a + b, (take(i) for i in m)) for m in members]
    return cast("da.Array", da.stack(parts, axis=dim))


def _replay_select(cube: Cube, parameters: Mapping[str, Any]) -> Cube:
    expected = {"samples", "groups", "features"}
    if set(parameters) != expected:
        msg = f"select record: parameters must have keys {sorted(expected)}, found {sorted(parameters)}"
        raise ChainVerificationError(msg)
    chosen: dict[str, list[int] | None] = {}
    for axis in sorted(expected):
        value = parameters[axis]
        if value is not None and not (
            isinstance(value, list) and all(isinstance(i, int) and i >= 0 for i in value)
        ):
            msg = f"select record: parameters[{axis!r}] must be null or a list of positions, found {value!r}"
            raise ChainVerificationError(msg)
        if value is not None and max(value, default=-1) >= len(getattr(cube, axis)):
            msg = f"select record: position out of range for {len(getattr(cube, axis))} {axis}"
            raise ChainVerificationError(msg)
        chosen[axis] = value
    return _select_positions(cube, chosen)


def _replay_combine(cube: Cube, parameters: Mapping[str, Any]) -> Cube:
    if set(parameters) != {"axis", "mapping"} or not isinstance(parameters["mapping"], list):
        msg = f"combine record: parameters must be {{'axis', 'mapping': [[old, new], ...]}}, found {parameters!r}"
        raise ChainVerificationError(msg)
    pairs = parameters["mapping"]
    if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        msg = f"combine record: mapping must be a list of [old, new] pairs, found {pairs!r}"
        raise ChainVerificationError(msg)
    return combine(cube, axis=parameters["axis"], mapping=dict(pairs))


OPERATIONS: Final = {"select": _replay_select, "combine": _replay_combine}
"""Replay functions of the operations a provenance record can name."""


def replay(cube: Cube, record: Mapping[str, Any]) -> Cube:
    """Apply the operation of a provenance record to ``cube``.

    Parameters
    ----------
    cube
        The cube the record's operation was applied to.
    record
        One entry of a provenance's ``operations``.

    Returns
    -------
    Cube
        The cube the operation gives.

    Raises
    ------
    ChainVerificationError
        The operation is unknown, or its parameters do not apply to ``cube``.
    """
    name = record.get("operation")
    if name not in OPERATIONS:
        msg = f"operation {name!r} cannot be replayed; known: {sorted(OPERATIONS)}"
        raise ChainVerificationError(msg)
    parameters = record.get("parameters")
    if not isinstance(parameters, dict):
        msg = f"{name} record: parameters must be a JSON object, found {parameters!r}"
        raise ChainVerificationError(msg)
    try:
        return OPERATIONS[name](cube, parameters)
    except CubeValueError as exc:
        msg = f"{name} record cannot be replayed on cube {cube.fingerprint}: {exc}"
        raise ChainVerificationError(msg) from exc
