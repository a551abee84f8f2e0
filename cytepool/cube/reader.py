"""``read_cube``: open a cube file strictly, with lazy layers whose whole-group reads are verified."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from zarr.storage import FsspecStore

from cytepool.cube.cube import Cube
from cytepool.cube.encoding import hash_rows
from cytepool.cube.file_format import (
    DIMENSIONS,
    FORMAT,
    FORMAT_VERSION,
    ROOT_ATTRIBUTES,
    layer_chunks_ok,
    validate_array,
)
from cytepool.cube.fingerprints import (
    FINGERPRINT_VERSION,
    Digests,
    fingerprint,
    n_cells_digest,
    normalization_digest,
    provenance_digest,
)
from cytepool.cube.provenance import parse_provenance
from cytepool.cube.tables import (
    TABLE_AXES,
    EncodedColumn,
    decode_column,
    table_digest,
    validate_kind,
)
from cytepool.errors import (
    CubeDigestError,
    CubeError,
    CubeFormatError,
    CubeNotFoundError,
    CubeReadError,
    CubeTableError,
    CubeValueError,
)
from cytepool.locations import as_location, is_url, open_filesystem

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Collection, Iterable, Mapping

    import pandas as pd

    from cytepool.locations import Location

__all__ = ["read_cube"]

_METADATA_ERRORS = (OSError, ValueError, TypeError, KeyError, AttributeError)
"""What zarr raises for a ``zarr.json`` that is not readable Zarr v3 metadata.

Undecodable bytes and invalid JSON (:class:`UnicodeDecodeError`,
:class:`json.JSONDecodeError`) and zarr's ``MetadataValidationError`` are
:class:`ValueError`; JSON of the wrong shape gives :class:`TypeError`,
:class:`KeyError` or :class:`AttributeError`.
"""


def read_cube(
    path: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> Cube:
    """Open the cube at ``path`` strictly; its layers are lazy Dask arrays chunked as stored.

    On open the format, every known attribute and every array's metadata are
    checked, and the tables, cell numbers and normalization are read and
    compared with their digests. Layer values are read when computed; a
    computation that reads a whole group of a layer checks that group's
    digest. Reading never writes to the file.

    ``path`` may be an fsspec URL: ``s3://``, ``gs://``, ``memory://``, or
    ``http(s)://`` for a cube directory served by a web server. Every node is
    read by its key; a server that lists no directories (a static web host)
    is read all the same, without the check for arrays the attributes do not
    name (which needs a listing).

    Parameters
    ----------
    path
        The cube's directory, or its URL.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint,
        ...); ignored for local paths.

    Returns
    -------
    Cube
        The cube, with lazy layers.

    Raises
    ------
    CubeNotFoundError
        Nothing at ``path`` claims to be a cube: no ``zarr.json``, or one of a
        Zarr array or of a group without the attribute ``format`` =
        ``"cytepool.cube"`` (another kind of Zarr store). Under a URL whose
        prefix holds objects but no root ``zarr.json``, the message says a
        write is in progress or was interrupted.
    CubeFormatError, CubeMetadataError
        The root ``zarr.json`` cannot be read, the cube is not of format
        version 1, or a known attribute or an array's metadata is missing or wrong.
    CubeDigestError
        A table, the cell numbers or the normalization differ from their
        digest (at open), or a layer group differs from its digest (at read).
    CubeReadError
        A chunk cannot be read or decoded (at read).
    CubeValueError
        ``path`` is a URL whose ``//`` was lost or whose protocol fsspec cannot
        open, or ``storage_options`` is not a mapping.
    """
    location = as_location(path, storage_options, error=CubeValueError)
    where = str(Path(path)) if location.is_local and not is_url(path) else str(location)
    _require_root(location, where=where)
    root = _open_group(location, where=where)
    attrs = _root_attributes(root, where=where)
    shape = _parse_shape(attrs["shape"], where=where)
    n_groups, n_samples, n_features = shape
    rows = {"samples": n_samples, "groups": n_groups, "features": n_features}
    digests = Digests.from_json(attrs["digests"], n_groups=n_groups, where=where)
    claimed = attrs["fingerprint"]
    if not isinstance(claimed, str) or claimed != fingerprint(digests, shape=shape):
        msg = (
            f"{where}: attribute 'fingerprint': expected the digest of the manifest "
            f"{fingerprint(digests, shape=shape)}, found {claimed!r}; the file was edited"
        )
        raise CubeDigestError(msg)
    columns = _parse_names(attrs, "columns", where=where)
    arrays = _parse_names(attrs, "arrays", where=where)
    tables = {}
    for axis in TABLE_AXES:
        encoded = _read_table(
            root,
            axis,
            columns[axis],
            arrays[axis],
            n_rows=rows[axis],
            where=where,
            location=location,
        )
        found = table_digest(encoded, n_rows=rows[axis])
        _check_digest(where, axis, expected=getattr(digests, axis), found=found)
        tables[axis] = _as_frame(encoded, n_rows=rows[axis])
    n_cells = _read_n_cells(root, digests, shape=shape, where=where, location=location)
    normalization = attrs["normalization"]
    if (normalization is None) != (digests.normalization is None) or (
        normalization is not None and not isinstance(normalization, dict)
    ):
        msg = (
            f"{where}: attribute 'normalization': expected "
            f"{'an object' if digests.normalization else 'null'} as its digest says, found {normalization!r}"
        )
        raise CubeFormatError(msg)
    if normalization is not None:
        found = normalization_digest(normalization)
        _check_digest(where, "normalization", expected=digests.normalization, found=found)
    provenance = parse_provenance(attrs["provenance"], where=where)
    if "provenance_digest" in attrs:
        recorded = attrs["provenance_digest"]
        if not isinstance(recorded, str):
            msg = f"{where}: attribute 'provenance_digest': expected a digest string, found {recorded!r}; the file was edited"
            raise CubeFormatError(msg)
        _check_digest(
            where, "provenance", expected=recorded, found=provenance_digest(attrs["provenance"])
        )
    layers, raw = _open_layers(root, digests, shape=shape, where=where, location=location)
    try:
        return Cube._assemble(
            tables=tables,
            layers=layers,
            n_cells=n_cells,
            normalization=normalization,
            origin={"cytepool": provenance["cytepool"], "source": provenance["source"]},
            operations=provenance["operations"],
            digests=digests,
            digest_sources=raw,
            location=where,
        )
    except CubeError as exc:
        msg = f"{where}: the stored values do not make a valid cube: {exc}"
        raise CubeFormatError(msg) from exc


def _require_root(location: Location, *, where: str) -> None:
    """Raise :class:`CubeNotFoundError` unless a root ``zarr.json`` is at ``location``.

    Under a URL the message tells an empty prefix from one that holds
    objects: a cube being written to an object store, or whose writer was
    killed, has every array but no root ``zarr.json`` yet.
    """
    if location.path is not None:
        if not (location.path / "zarr.json").is_file():
            msg = f"{where}: no cube here (no zarr.json); check the path"
            raise CubeNotFoundError(msg)
        return
    fs, _ = open_filesystem(location, error=CubeValueError)
    fs.invalidate_cache()
    if location.read_bytes("zarr.json") is not None:
        return
    try:
        keys = location.keys()
    except OSError:
        keys = []
    if not keys:
        msg = f"{where}: no cube here (no zarr.json); check the URL"
        raise CubeNotFoundError(msg)
    msg = (
        f"{where}: no cube here (no root zarr.json, but {len(keys)} objects such as "
        f"{keys[0]!r}); a write may be in progress or was interrupted: wait for it to finish, "
        "or write the cube again with overwrite=True"
    )
    raise CubeNotFoundError(msg)


def _open_group(location: Location, *, where: str) -> zarr.Group:
    store = location.zarr_store(read_only=True)
    if isinstance(store, FsspecStore):
        store.fs.invalidate_cache()
    try:
        node = zarr.open(store=store, mode="r", zarr_format=3)
    except _METADATA_ERRORS as exc:
        msg = f"{where}/zarr.json: not readable as Zarr v3 metadata ({exc}); the file is damaged"
        raise CubeFormatError(msg) from exc
    if not isinstance(node, zarr.Group):
        msg = f"{where}: no cube here (zarr.json is a Zarr array, not a group); check the path"
        raise CubeNotFoundError(msg)
    return node


def _root_attributes(root: zarr.Group, *, where: str) -> dict[str, Any]:
    attrs = _attributes(root, where=where)
    if attrs.get("format") != FORMAT:
        msg = (
            f"{where}: no cube here (zarr.json is a Zarr group whose attribute 'format' is "
            f"{attrs.get('format')!r}, not {FORMAT!r}); check the path"
        )
        raise CubeNotFoundError(msg)
    if attrs.get("format_version") != FORMAT_VERSION or isinstance(
        attrs.get("format_version"), bool
    ):
        msg = (
            f"{where}: attribute 'format_version': expected {FORMAT_VERSION}, found "
            f"{attrs.get('format_version')!r}; upgrade CytePool to read newer cube files"
        )
        raise CubeFormatError(msg)
    if attrs.get("fingerprint_version") != FINGERPRINT_VERSION:
        msg = (
            f"{where}: attribute 'fingerprint_version': expected {FINGERPRINT_VERSION}, found "
            f"{attrs.get('fingerprint_version')!r}"
        )
        raise CubeFormatError(msg)
    for key in ROOT_ATTRIBUTES:
        if key not in attrs:
            msg = f"{where}: attribute {key!r} is missing; the file is incomplete or was edited"
            raise CubeFormatError(msg)
    return attrs


def _attributes(node: zarr.Array[Any] | zarr.Group, *, where: str) -> dict[str, Any]:
    attributes: object = node.metadata.attributes
    if not isinstance(attributes, dict):
        msg = (
            f"{where}/zarr.json: 'attributes': expected a JSON object, found {attributes!r}; "
            "the file was edited or damaged: restore the cube from a copy or write it again"
        )
        raise CubeFormatError(msg)
    return attributes


def _parse_shape(value: object, *, where: str) -> tuple[int, int, int]:
    keys = ("groups", "samples", "features")
    if (
        not isinstance(value, dict)
        or set(value) != set(keys)
        or not all(
            isinstance(value[k], int) and not isinstance(value[k], bool) and value[k] > 0
            for k in keys
        )
    ):
        msg = f"{where}: attribute 'shape': expected {{'groups', 'samples', 'features'}} positive integers, found {value!r}"
        raise CubeFormatError(msg)
    return (value["groups"], value["samples"], value["features"])


def _parse_names(attrs: Mapping[str, Any], key: str, *, where: str) -> dict[str, list[str]]:
    value = attrs[key]
    if (
        not isinstance(value, dict)
        or set(value) != set(TABLE_AXES)
        or not all(
            isinstance(v, list) and v and all(isinstance(s, str) for s in v) for v in value.values()
        )
    ):
        msg = f"{where}: attribute {key!r}: expected a non-empty list of strings for each of {list(TABLE_AXES)}, found {value!r}"
        raise CubeFormatError(msg)
    return value


def _check_digest(path: str, what: str, *, expected: str | None, found: str) -> None:
    if expected != found:
        msg = f"{path}: {what}: values give {found}, not the stored digest {expected}; the file was changed or damaged"
        raise CubeDigestError(msg)


def _open_node(group: zarr.Group, name: str, *, where: str) -> zarr.Array[Any] | zarr.Group:
    try:
        return group[name]
    except _METADATA_ERRORS as exc:
        msg = (
            f"{where}/zarr.json: expected Zarr v3 metadata, found it missing or unreadable "
            f"({type(exc).__name__}: {exc}); the file is incomplete or damaged: restore the cube "
            "from a copy or write it again"
        )
        raise CubeFormatError(msg) from exc


def _open_array(group: zarr.Group, name: str, *, where: str) -> zarr.Array[Any]:
    node = _open_node(group, name, where=where)
    if not isinstance(node, zarr.Array):
        msg = f"{where}: expected an array, found a group"
        raise CubeFormatError(msg)
    return node


def _open_subgroup(group: zarr.Group, name: str, *, where: str) -> zarr.Group:
    node = _open_node(group, name, where=where)
    if not isinstance(node, zarr.Group):
        msg = f"{where}: expected a group, found an array"
        raise CubeFormatError(msg)
    return node


def _check_members(
    group: zarr.Group, expected: Collection[str], *, where: str, location: Location, what: str
) -> None:
    """Raise unless ``group`` holds exactly the arrays ``expected``.

    A read-only (HTTP) server may list no directories; there the listing is
    empty or fails, and the arrays not named cannot be seen (the named ones
    were all opened and are checked).
    """
    try:
        listed = _array_names(group, where=where)
    except CubeError:
        raise
    except Exception:
        if not location.read_only:
            raise
        listed = []
    if location.read_only and not listed:
        return
    if listed != sorted(expected):
        msg = f"{where}: expected exactly the arrays {sorted(expected)}{what}, found {listed}"
        raise CubeFormatError(msg)


def _array_names(group: zarr.Group, *, where: str) -> list[str]:
    try:
        return sorted(group.array_keys())
    except _METADATA_ERRORS as exc:
        msg = (
            f"{where}: a member's zarr.json is not readable Zarr v3 metadata "
            f"({type(exc).__name__}: {exc}); the file is damaged: restore the cube from a copy "
            "or write it again"
        )
        raise CubeFormatError(msg) from exc


def _read_values(array: zarr.Array[Any], *, where: str) -> np.ndarray:
    try:
        return np.asarray(array[...])
    except Exception as exc:
        msg = f"{where}: a chunk cannot be read or decoded ({type(exc).__name__}: {exc}); the file is damaged"
        raise CubeReadError(msg) from exc


def _read_table(
    root: zarr.Group,
    axis: str,
    columns: list[str],
    arrays: list[str],
    *,
    n_rows: int,
    where: str,
    location: Location,
) -> tuple[EncodedColumn, ...]:
    if len(columns) != len(arrays) or len(set(columns)) != len(columns):
        msg = f"{where}: attributes 'columns' and 'arrays' of {axis!r} disagree: {columns} vs {arrays}"
        raise CubeFormatError(msg)
    group = _open_subgroup(root, axis, where=f"{where}/{axis}")
    opened = {name: _open_array(group, name, where=f"{where}/{axis}/{name}") for name in arrays}
    _check_members(group, arrays, where=f"{where}/{axis}", location=location, what="")
    out = []
    for column, name in zip(columns, arrays, strict=True):
        w = f"{where}/{axis}/{name}"
        array = opened[name]
        attributes = _attributes(array, where=w)
        kind = attributes.get("kind")
        if not isinstance(kind, str):
            raise CubeFormatError(f"{w}: attribute 'kind': expected a column kind, found {kind!r}")
        validate_array(
            array,
            where=w,
            shape=(n_rows,),
            chunks=lambda c: c == (max(n_rows, 1),),
            chunks_expected=f"({n_rows},)",
            dtype=lambda _: True,
            dtype_expected="",
            dimension_names=(DIMENSIONS[axis],),
        )
        try:
            validate_kind(kind, np.dtype(array.dtype), where=w)
        except CubeTableError as exc:
            raise CubeFormatError(str(exc)) from exc
        levels: Any = attributes.get("levels") if kind == "text" else None
        if kind == "text" and (
            not isinstance(levels, list)
            or not all(isinstance(v, str) for v in levels)
            or len(set(levels)) != len(levels)
        ):
            raise CubeFormatError(
                f"{w}: attribute 'levels': expected a list of distinct strings, found {levels!r}"
            )
        values = _read_values(array, where=w)
        if (
            levels is not None
            and values.size
            and (values.min() < -1 or values.max() >= len(levels))
        ):
            msg = (
                f"{w}: codes must lie in [-1, {len(levels)}), found {values.min()}..{values.max()}"
            )
            raise CubeFormatError(msg)
        out.append(
            EncodedColumn(
                name=column,
                kind=kind,
                values=values,
                levels=None if levels is None else tuple(levels),
            )
        )
    return tuple(out)


def _as_frame(columns: Iterable[EncodedColumn], *, n_rows: int) -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415

    series = [decode_column(c) for c in columns]
    return pd.DataFrame({s.name: s for s in series}, index=pd.RangeIndex(n_rows))


def _read_n_cells(
    root: zarr.Group,
    digests: Digests,
    *,
    shape: tuple[int, int, int],
    where: str,
    location: Location,
) -> np.ndarray | None:
    if location.path is not None:
        present = (location.path / "n_cells" / "zarr.json").is_file()
    else:
        present = location.read_bytes("n_cells/zarr.json") is not None
    if present != (digests.n_cells is not None):
        msg = f"{where}: array 'n_cells' is {'present' if present else 'absent'} but its digest says {digests.n_cells}"
        raise CubeFormatError(msg)
    if not present:
        return None
    w = f"{where}/n_cells"
    n_groups, n_samples, _ = shape
    array = _open_array(root, "n_cells", where=w)
    validate_array(
        array,
        where=w,
        shape=(n_samples, n_groups),
        chunks=lambda c: c == (n_samples, n_groups),
        chunks_expected=str((n_samples, n_groups)),
        dtype=lambda d: d.kind in "iu",
        dtype_expected="an integer type",
        dimension_names=("sample", "group"),
    )
    values = _read_values(array, where=w)
    _check_digest(where, "n_cells", expected=digests.n_cells, found=n_cells_digest(values))
    return values


def _layer_dtype_rule(type_word: str) -> Callable[[np.dtype[Any]], bool]:
    if type_word == "float64":
        return lambda d: d in (np.float32, np.float64)
    return lambda d: d.kind in "biu"


def _open_layers(
    root: zarr.Group,
    digests: Digests,
    *,
    shape: tuple[int, int, int],
    where: str,
    location: Location,
) -> tuple[dict[str, da.Array], dict[str, da.Array]]:
    group = _open_subgroup(root, "layers", where=f"{where}/layers")
    opened = {
        name: _open_array(group, name, where=f"{where}/layers/{name}") for name in digests.layers
    }
    _check_members(
        group,
        digests.layers,
        where=f"{where}/layers",
        location=location,
        what=" of attribute 'digests'",
    )
    layers, raw = {}, {}
    for name, layer_digests in digests.layers.items():
        w = f"{where}/layers/{name}"
        array = opened[name]
        validate_array(
            array,
            where=w,
            shape=shape,
            chunks=layer_chunks_ok(shape[1]),
            chunks_expected=f"(1, {shape[1]}, 1 to 4096)",
            dtype=_layer_dtype_rule(layer_digests.type),
            dtype_expected=f"a type hashed as {layer_digests.type}",
            dimension_names=("group", "sample", "feature"),
        )
        layers[name] = _verified_array(array, layer_digests.groups, where=w, verify=True)
        raw[name] = _verified_array(array, layer_digests.groups, where=w, verify=False)
    return layers, raw


def _read_chunk(array: zarr.Array[Any], g: int, start: int, stop: int, where: str) -> np.ndarray:
    try:
        return np.asarray(array[g : g + 1, :, start:stop])
    except Exception as exc:
        msg = (
            f"{where}: chunk of group {g}, features {start}:{stop} cannot be read or decoded "
            f"({type(exc).__name__}: {exc}); the file is damaged"
        )
        raise CubeReadError(msg) from exc


def _verify_group(where: str, g: int, expected: str, *blocks: np.ndarray) -> str:
    found = hash_rows([b[0] for b in blocks])
    if found != expected:
        msg = (
            f"{where}: group {g} gives {found}, not its stored digest {expected}; the file was "
            "changed or damaged (a chunk edited, deleted or replaced)"
        )
        raise CubeDigestError(msg)
    return found


def _pass(block: np.ndarray, _verified: str) -> np.ndarray:
    return block


class _GroupVerifiedLayer(MaterializedLayer):
    """The blocks of a stored layer; culled to a group's blocks, it also checks that group's digest.

    Dask culls a graph to the keys a computation needs. When every block of a
    group is needed, the blocks pass through a task that hashes them and
    compares with the stored digest; when only some are, they are read plainly.
    """

    def __init__(
        self,
        *,
        name: str,
        array: zarr.Array[Any],
        digests: tuple[str, ...],
        bounds: list[tuple[int, int]],
        where: str,
        verify: bool,
    ) -> None:
        self.spec = (name, array, digests, bounds, where, verify)
        groups = range(len(digests)) if verify else ()
        super().__init__(self._tasks(range(len(digests)), verified=set(groups)))

    def _tasks(
        self, groups: Iterable[int], *, verified: set[int], wanted: set[Any] | None = None
    ) -> dict[Any, Any]:
        name, array, digests, bounds, where, _ = self.spec
        raw, check = f"{name}-raw", f"{name}-verify"
        tasks: dict[Any, Any] = {}
        for g in groups:
            if g in verified:
                keys = [(raw, g, j) for j in range(len(bounds))]
                for key, (start, stop) in zip(keys, bounds, strict=True):
                    tasks[key] = (_read_chunk, array, g, start, stop, where)
                tasks[(check, g)] = (_verify_group, where, g, digests[g], *keys)
                for j, key in enumerate(keys):
                    tasks[(name, g, 0, j)] = (_pass, key, (check, g))
            else:
                for j, (start, stop) in enumerate(bounds):
                    if wanted is None or (name, g, 0, j) in wanted:
                        tasks[(name, g, 0, j)] = (_read_chunk, array, g, start, stop, where)
        return tasks

    def cull(
        self, keys: set[Any], all_hlg_keys: Collection[Any]
    ) -> tuple[MaterializedLayer, dict[Any, set[Any]]]:
        name, _, _digests, bounds, _, verify = self.spec
        wanted = {k for k in keys if isinstance(k, tuple) and k and k[0] == name}
        groups = sorted({k[1] for k in wanted})
        complete = {
            g
            for g in groups
            if verify and all((name, g, 0, j) in wanted for j in range(len(bounds)))
        }
        tasks = self._tasks(groups, verified=complete, wanted=wanted)
        return MaterializedLayer(tasks), {k: set() for k in tasks}


def _verified_array(
    array: zarr.Array[Any], digests: tuple[str, ...], *, where: str, verify: bool
) -> da.Array:
    n_groups, n_samples, n_features = array.shape
    width = array.chunks[2]
    bounds = [(s, min(s + width, n_features)) for s in range(0, n_features, width)]
    name = f"cytepool-layer-{tokenize(where, digests, verify)}"
    layer = _GroupVerifiedLayer(
        name=name, array=array, digests=digests, bounds=bounds, where=where, verify=verify
    )
    graph = HighLevelGraph({name: layer}, {name: set()})
    chunks = ((1,) * n_groups, (n_samples,), tuple(stop - start for start, stop in bounds))
    return da.Array(graph, name, chunks, meta=np.empty((0, 0, 0), dtype=array.dtype))
