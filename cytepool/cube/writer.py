"""``write_cube``: a cube to a Zarr v3 directory or object-store prefix, digests computed as it is written.

A local cube is built in a hidden sibling and renamed into place
(:mod:`cytepool.cube.atomic`). An object store has no rename, so a cube
under a URL is written in place with its root ``zarr.json``, which carries
``format`` and every root attribute, held back until everything else is
written (:class:`_RootHeldStore`): until then nothing there opens as a cube.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, overload

import numpy as np
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.codecs import BytesCodec
from zarr.storage import LocalStore, WrapperStore

from cytepool.codecs import CUBE_COMPRESSIONS, CubeCompression, compressor
from cytepool.compute import compute
from cytepool.cube.atomic import fsync_tree, publish, staging
from cytepool.cube.encoding import hash_rows, layer_type_word
from cytepool.cube.file_format import (
    DIMENSIONS,
    FORMAT,
    FORMAT_VERSION,
    column_array_names,
)
from cytepool.cube.fingerprints import (
    FINGERPRINT_VERSION,
    Digests,
    LayerDigests,
    fingerprint,
    provenance_digest,
)
from cytepool.cube.tables import TABLE_AXES
from cytepool.cube.tasks import as_layer_array, group_tasks, layer_chunks
from cytepool.errors import (
    CubeExistsError,
    CubeNotFoundError,
    CubeValueError,
    FingerprintMismatchError,
)
from cytepool.locations import as_location, is_url, open_filesystem

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Self

    from zarr.abc.codec import BytesBytesCodec
    from zarr.abc.store import ByteRequest
    from zarr.core.array_spec import ArrayConfigParams
    from zarr.core.buffer import Buffer, BufferPrototype

    from cytepool.cube.cube import Cube
    from cytepool.locations import Location

__all__ = ["is_cube", "write_cube"]

_ARRAY_CONFIG: ArrayConfigParams = {"write_empty_chunks": False}
_ROOT: Final = "zarr.json"
_LEFT_BY_A_WRITER: Final = re.compile(r"(?:[^/]+/)*zarr\.json|(?:[^/]+/)+c(?:/[0-9]+)+")
"""Keys a killed writer leaves: Zarr v3 metadata documents and array chunks (``<array>/c/0/1``)."""


def is_cube(
    path: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> bool:
    """True when ``path`` holds a root ``zarr.json`` that says format ``cytepool.cube``.

    Only that attribute is read; :func:`read_cube` checks the rest. A prefix
    of an object store whose writer has not finished (or was killed) has no
    root ``zarr.json`` yet, so it is not a cube.

    Parameters
    ----------
    path
        A local path or an fsspec URL (``s3://bucket/x.cube.zarr``).
    storage_options
        The options of the URL's fsspec filesystem (ignored for local paths).

    Returns
    -------
    bool
        Whether it holds a cube.

    Raises
    ------
    CubeValueError
        ``path`` is a URL whose ``//`` was lost or whose protocol fsspec cannot
        open, or ``storage_options`` is not a mapping.
    """
    location = as_location(path, storage_options, error=CubeValueError)
    if not location.is_local:
        open_filesystem(location, error=CubeValueError)
    try:
        if location.path is not None:
            doc = json.loads((location.path / _ROOT).read_text(encoding="utf-8"))
        else:
            data = location.read_bytes(_ROOT)
            if data is None:
                return False
            doc = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("attributes", {}).get("format") == FORMAT


@overload
def write_cube(
    cube: Cube,
    path: os.PathLike[str],
    *,
    compression: CubeCompression = ...,
    overwrite: bool = ...,
    progress: bool = ...,
    storage_options: Mapping[str, Any] | None = ...,
) -> Path: ...
@overload
def write_cube(
    cube: Cube,
    path: str,
    *,
    compression: CubeCompression = ...,
    overwrite: bool = ...,
    progress: bool = ...,
    storage_options: Mapping[str, Any] | None = ...,
) -> Path | str: ...
def write_cube(
    cube: Cube,
    path: str | os.PathLike[str],
    *,
    compression: CubeCompression = "gzip",
    overwrite: bool = False,
    progress: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Write ``cube`` to ``path`` (by convention ``<name>.cube.zarr``), a local path or an object-store URL.

    The layers are written by a Dask graph of one task per group, each owning
    the group's chunks and computing its digest as it writes.

    A local cube is built in a hidden directory beside ``path`` and renamed
    into place when complete, so ``path`` holds the whole cube or nothing new.

    Under a URL (``s3://``, ``gs://``, ``memory://`` ...), which has no
    rename, the cube is written in place and its root ``zarr.json`` (the
    format and every root attribute) is written last, after every array and
    chunk: until then neither :func:`read_cube`, :func:`is_cube` nor Zarr sees
    a cube there. A failed write deletes what it wrote; a killed one leaves
    arrays without a root, which :func:`read_cube` reports and
    ``overwrite=True`` replaces. Writers of one URL are not coordinated.

    Parameters
    ----------
    cube
        The cube to write.
    path
        Target: a local directory, whose parent must exist, or an fsspec URL
        (not ``http(s)://``, which is read-only), whose bucket must exist.
    compression
        ``"gzip"`` (default), ``"zstd"`` or ``None``.
    overwrite
        Replace an existing cube at ``path``. Anything that is not a cube is
        never replaced, except, under a URL, what an interrupted write left
        (Zarr metadata and array chunks without a root ``zarr.json``). Under
        a URL the old cube is deleted before the new one is written, so
        readers see no cube while it is being replaced (object stores have
        no rename), and none if the write then fails.
    progress
        Show a progress bar while the layers are written.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint,
        ...); ignored for local paths.

    Returns
    -------
    pathlib.Path or str
        The written path (as given), or the URL (without a trailing ``/``).

    Raises
    ------
    CubeExistsError
        ``path`` exists (a URL: holds any key) and ``overwrite`` is False, or
        it is not a cube (nor, under a URL, the remains of an interrupted write).
    CubeNotFoundError
        The parent directory (or the bucket) does not exist.
    CubeValueError
        ``path`` is an ``http(s)://`` URL (read-only), a URL whose ``//``
        was lost or whose protocol fsspec cannot open, or ``storage_options``
        is not a mapping.
    FingerprintMismatchError
        The cube's values differ from digests it already claimed (a damaged
        source file); nothing is written.

    Examples
    --------
    >>> import tempfile, numpy as np, pandas as pd
    >>> from cytepool import Cube, read_cube, write_cube
    >>> cube = Cube(
    ...     samples=pd.DataFrame({"sample": ["a", "b"]}),
    ...     groups=pd.DataFrame({"group": ["g"]}),
    ...     features=pd.DataFrame({"gene": ["x", "y", "z"]}),
    ...     layers={"counts": np.array([[[1, 0, 2], [0, 0, 5]]])},
    ... )
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_cube(cube, f"{d}/demo.cube.zarr", compression="zstd")
    ...     read_cube(path).fingerprint == cube.fingerprint
    True
    >>> write_cube(cube, "memory://doc/demo.cube.zarr", overwrite=True)
    'memory://doc/demo.cube.zarr'
    >>> read_cube("memory://doc/demo.cube.zarr").fingerprint == cube.fingerprint
    True
    """
    location = as_location(path, storage_options, error=CubeValueError)
    codec = compressor(compression, error=CubeValueError, choices=CUBE_COMPRESSIONS)
    if not location.is_local:
        return _write_to_url(cube, location, codec, overwrite=overwrite, progress=progress)
    target = location.path if is_url(path) else Path(path)
    assert target is not None
    if not target.parent.is_dir():
        msg = f"{target}: parent directory {target.parent} does not exist; create it first"
        raise CubeNotFoundError(msg)
    exists = target.exists() or target.is_symlink()
    if exists and not overwrite:
        msg = f"{target}: already exists; pass overwrite=True to replace a cube"
        raise CubeExistsError(msg)
    if exists and not is_cube(target):
        msg = f"{target}: exists and is not a cube (no zarr.json with format {FORMAT!r}); refusing to replace it"
        raise CubeExistsError(msg)
    with staging(target) as tmp:
        root, attributes = _write_contents(
            cube, LocalStore(tmp), codec, progress=progress, where=str(target)
        )
        root.attrs.update(attributes)
        fsync_tree(tmp)
        publish(tmp, target, replace=exists)
    return target


def _write_contents(
    cube: Cube,
    store: Store,
    codec: BytesBytesCodec | None,
    *,
    progress: bool,
    where: str,
) -> tuple[zarr.Group, dict[str, Any]]:
    """Write the tables, cell numbers and layers of ``cube``; return the root group and its attributes.

    The root group is created without attributes; the caller writes them
    (the root ``zarr.json``) when it publishes the cube.
    """
    root = zarr.create_group(store=store, zarr_format=3)
    arrays = {axis: _write_table(root, cube, axis, codec) for axis in TABLE_AXES}
    if cube.n_cells is not None:
        _write_array(
            root,
            "n_cells",
            cube.n_cells,
            codec,
            dimension_names=("sample", "group"),
            chunks=None,
        )
    digests = cube.static_digests(_write_layers(root, cube, codec, progress=progress))
    claimed = cube._digests
    if claimed is not None and claimed != digests:
        msg = (
            f"{where}: the cube's values no longer match its digests (fingerprint "
            f"{fingerprint(claimed, shape=cube.shape)}); its source was changed or damaged, "
            "nothing was written - run verify_fingerprint() on the source"
        )
        raise FingerprintMismatchError(msg)
    cube._set_digests(digests)
    return root, _root_attributes(cube, digests, arrays)


def _write_to_url(
    cube: Cube,
    location: Location,
    codec: BytesBytesCodec | None,
    *,
    overwrite: bool,
    progress: bool,
) -> str:
    """Write ``cube`` in place under a URL, its root ``zarr.json`` last; if that fails, delete the Zarr keys there."""
    if location.read_only:
        msg = (
            f"{location}: {location.protocol}:// is read-only, where write_cube writes; write the "
            "cube to a local path or a writable store (s3://, gs://, ...) and serve it from there"
        )
        raise CubeValueError(msg)
    open_filesystem(location, error=CubeValueError)
    _clear_for_writing(location, overwrite=overwrite)
    store = _RootHeldStore(location.zarr_store(read_only=False), where=str(location))
    try:
        root, attributes = _write_contents(
            cube, store, codec, progress=progress, where=str(location)
        )
        root.attrs.update(attributes)
        fs, prefix = location.filesystem()
        fs.pipe_file(f"{prefix}/{_ROOT}", store.held_root())
    except BaseException:
        with contextlib.suppress(Exception):
            written = [k for k in _fresh_keys(location) if _LEFT_BY_A_WRITER.fullmatch(k)]
            _delete_keys(location, written)
        raise
    return str(location)


def _fresh_keys(location: Location) -> list[str]:
    """The keys below ``location``, listed anew (the filesystem forgets listings it cached)."""
    fs, _ = location.filesystem()
    fs.invalidate_cache()
    return location.keys()


def _clear_for_writing(location: Location, *, overwrite: bool) -> None:
    """Refuse a URL that holds anything but a cube or an interrupted write; delete those with ``overwrite``."""
    keys = _fresh_keys(location)
    if not keys:
        if location.exists():
            msg = f"{location}: an object (a file), not a cube; refusing to replace it"
            raise CubeExistsError(msg)
        return
    if not overwrite:
        msg = f"{location}: already holds {len(keys)} objects (first {keys[0]!r}); pass overwrite=True to replace a cube"
        raise CubeExistsError(msg)
    if _ROOT in keys:
        if not is_cube(location):
            msg = f"{location}: holds a zarr.json without format {FORMAT!r}, so it is not a cube; refusing to replace it"
            raise CubeExistsError(msg)
    else:
        foreign = [key for key in keys if not _LEFT_BY_A_WRITER.fullmatch(key)]
        if foreign:
            msg = (
                f"{location}: holds no root zarr.json (no cube) and {foreign[0]!r}, which is "
                "neither Zarr metadata nor an array chunk, so not what an interrupted cube write "
                "leaves; refusing to replace it - delete the prefix yourself or choose another"
            )
            raise CubeExistsError(msg)
    _delete_keys(location, keys)


def _delete_keys(location: Location, keys: Iterable[str]) -> None:
    """Delete ``keys`` below ``location``: the root ``zarr.json`` first, then chunks, then metadata.

    Deleting the root first hides a cube before any of it goes; an
    interrupted deletion leaves only what ``overwrite=True`` may replace.
    """
    fs, prefix = location.filesystem()
    keys = list(keys)
    metadata = sorted((k for k in keys if k.rsplit("/", 1)[-1] == _ROOT), key=len, reverse=True)
    for batch in (
        [k for k in metadata if k == _ROOT],
        [k for k in keys if k.rsplit("/", 1)[-1] != _ROOT],
        [k for k in metadata if k != _ROOT],
    ):
        if batch:
            fs.rm([f"{prefix}/{k}" for k in batch])
    fs.invalidate_cache()


class _RootHeldStore(WrapperStore[Store]):
    """A store that keeps every write of the root ``zarr.json`` in memory, for publishing it last.

    Zarr writes a group's ``zarr.json`` when the group is created and
    (``set_if_not_exists``) for every missing parent of a node it creates.
    On an object store the root document is the cube's completion marker, so
    this store answers reads of it from memory and passes every other key
    through; :meth:`held_root` gives the document to publish. Copies
    (``with_read_only``) share what is held; pickled (for Dask workers,
    which write chunks only) it carries its own copy.

    Parameters
    ----------
    store
        The store written to.
    where
        The store's URL, for messages.
    held
        What is held (shared with the store this one was made from).
    """

    def __init__(self, store: Store, *, where: str, held: dict[str, bytes] | None = None) -> None:
        super().__init__(store)
        self._where = where
        self._held: dict[str, bytes] = {} if held is None else held

    def _with_store(self, store: Store) -> Self:
        return type(self)(store, where=self._where, held=self._held)

    def held_root(self) -> bytes:
        """The root ``zarr.json`` written so far."""
        return self._held[_ROOT]

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        if key != _ROOT:
            return await self._store.get(key, prototype, byte_range)
        data = self._held.get(_ROOT)
        return None if data is None else prototype.buffer.from_bytes(_sliced(data, byte_range))

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        key_ranges = list(key_ranges)
        if all(key != _ROOT for key, _ in key_ranges):
            return await self._store.get_partial_values(prototype, key_ranges)
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        if key == _ROOT:
            return _ROOT in self._held
        return await self._store.exists(key)

    async def set(self, key: str, value: Buffer) -> None:
        if key == _ROOT:
            self._held[_ROOT] = value.to_bytes()
            return
        try:
            await self._store.set(key, value)
        except FileNotFoundError as exc:
            msg = f"{self._where}/{key}: cannot be written ({exc}); create the bucket (or container) first"
            raise CubeNotFoundError(msg) from exc

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        if key == _ROOT:
            self._held.setdefault(_ROOT, value.to_bytes())
            return
        await self._store.set_if_not_exists(key, value)

    async def _set_many(self, values: Iterable[tuple[str, Buffer]]) -> None:
        for key, value in values:
            await self.set(key, value)

    async def delete(self, key: str) -> None:
        if key == _ROOT:
            self._held.pop(_ROOT, None)
            return
        await self._store.delete(key)

    def __repr__(self) -> str:
        return f"_RootHeldStore({self._store!r})"


def _sliced(data: bytes, byte_range: ByteRequest | None) -> bytes:
    """The bytes of ``data`` that ``byte_range`` asks for."""
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[max(len(data) - byte_range.suffix, 0) :]
    return data


def _root_attributes(cube: Cube, digests: Digests, arrays: dict[str, list[str]]) -> dict[str, Any]:
    n_groups, n_samples, n_features = cube.shape
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fingerprint_version": FINGERPRINT_VERSION,
        "shape": {"groups": n_groups, "samples": n_samples, "features": n_features},
        "columns": {axis: [c.name for c in cube.encoded_table(axis)] for axis in TABLE_AXES},
        "arrays": arrays,
        "normalization": cube.normalization,
        "digests": digests.to_json(),
        "fingerprint": fingerprint(digests, shape=cube.shape),
        "provenance": cube.provenance,
        "provenance_digest": provenance_digest(cube.provenance),
    }


def _write_array(
    group: zarr.Group,
    name: str,
    values: np.ndarray,
    codec: BytesBytesCodec | None,
    *,
    dimension_names: tuple[str, ...],
    chunks: tuple[int, ...] | None,
    attributes: dict[str, Any] | None = None,
) -> zarr.Array[Any]:
    array = group.create_array(
        name=name,
        shape=values.shape,
        dtype=values.dtype,
        chunks=chunks or tuple(max(n, 1) for n in values.shape),
        serializer=BytesCodec(endian="little"),
        compressors=codec,
        fill_value=0,
        dimension_names=dimension_names,
        attributes=attributes,
        config=_ARRAY_CONFIG,
    )
    if values.size:
        array[...] = values
    return array


def _write_table(
    root: zarr.Group, cube: Cube, axis: str, codec: BytesBytesCodec | None
) -> list[str]:
    group = root.create_group(axis)
    columns = cube.encoded_table(axis)
    names = column_array_names([c.name for c in columns])
    for name, column in zip(names, columns, strict=True):
        attributes: dict[str, Any] = {"kind": column.kind}
        if column.levels is not None:
            attributes["levels"] = list(column.levels)
        _write_array(
            group,
            name,
            column.values,
            codec,
            dimension_names=(DIMENSIONS[axis],),
            chunks=None,
            attributes=attributes,
        )
    return names


def _write_group(g: int, blocks: Sequence[np.ndarray], array: zarr.Array[Any]) -> str:
    """Write group ``g`` (its blocks side by side) in one call and return its digest."""
    block = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=2)
    array[g : g + 1] = block
    return hash_rows([block[0]])


def _write_layers(
    root: zarr.Group, cube: Cube, codec: BytesBytesCodec | None, *, progress: bool
) -> dict[str, LayerDigests]:
    group = root.create_group("layers")
    chunks = layer_chunks(cube.shape)
    names = sorted(cube.layers)
    tasks = []
    for name in names:
        x = as_layer_array(cube.layers[name])
        array = group.create_array(
            name=name,
            shape=cube.shape,
            dtype=x.dtype,
            chunks=chunks,
            serializer=BytesCodec(endian="little"),
            compressors=codec,
            fill_value=0,
            dimension_names=("group", "sample", "feature"),
            config=_ARRAY_CONFIG,
        )
        tasks.append(group_tasks(x, _write_group, array, pure=False))
    results = compute(*tasks, progress=progress)
    return {
        name: LayerDigests(type=layer_type_word(cube.layers[name].dtype), groups=tuple(r))
        for name, r in zip(names, results, strict=True)
    }
