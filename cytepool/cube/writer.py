"""``write_cube``: a cube to a Zarr v3 directory, atomically, digests computed as it is written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr
from zarr.codecs import BytesCodec
from zarr.storage import LocalStore

from cytepool.codecs import Compression, compressor
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

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zarr.codecs import GzipCodec, ZstdCodec
    from zarr.core.array_spec import ArrayConfigParams

    from cytepool.cube.cube import Cube

__all__ = ["is_cube", "write_cube"]

_ARRAY_CONFIG: ArrayConfigParams = {"write_empty_chunks": False}


def is_cube(path: str | Path) -> bool:
    """True when ``path`` is a directory whose root ``zarr.json`` says format ``cytepool.cube``.

    Only that attribute is read; :func:`read_cube` checks the rest.

    Parameters
    ----------
    path
        A path.

    Returns
    -------
    bool
        Whether it holds a cube.
    """
    meta = Path(path) / "zarr.json"
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("attributes", {}).get("format") == FORMAT


def write_cube(
    cube: Cube,
    path: str | Path,
    *,
    compression: Compression = "gzip",
    overwrite: bool = False,
    progress: bool = False,
) -> Path:
    """Write ``cube`` to ``path`` (by convention ``<name>.cube.zarr``), atomically.

    The layers are written by a Dask graph of one task per group, each owning
    the group's chunks and computing its digest as it writes. The store is
    built in a hidden directory beside ``path`` and renamed into place when
    complete, so ``path`` holds the whole cube or nothing new.

    Parameters
    ----------
    cube
        The cube to write.
    path
        Target directory; its parent must exist.
    compression
        ``"gzip"`` (default), ``"zstd"`` or ``None``.
    overwrite
        Replace an existing cube at ``path``. Anything that is not a cube is
        never replaced.
    progress
        Show a progress bar while the layers are written.

    Returns
    -------
    pathlib.Path
        The written path.

    Raises
    ------
    CubeExistsError
        ``path`` exists and ``overwrite`` is False, or it is not a cube.
    CubeValueError
        ``path`` is a URL (``s3://...``): cubes are written to local paths.
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
    """
    if isinstance(path, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.\-]+://", path):
        msg = f"{path}: a URL, where write_cube writes a local path; write the cube to a local path and upload the folder"
        raise CubeValueError(msg)
    target = Path(path)
    codec = compressor(compression, error=CubeValueError)
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
        root = zarr.create_group(store=LocalStore(tmp), zarr_format=3)
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
                f"{target}: the cube's values no longer match its digests (fingerprint "
                f"{fingerprint(claimed, shape=cube.shape)}); its source was changed or damaged, "
                "nothing was written - run verify_fingerprint() on the source"
            )
            raise FingerprintMismatchError(msg)
        cube._set_digests(digests)
        root.attrs.update(_root_attributes(cube, digests, arrays))
        fsync_tree(tmp)
        publish(tmp, target, replace=exists)
    return target


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
    codec: GzipCodec | ZstdCodec | None,
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
    root: zarr.Group, cube: Cube, axis: str, codec: GzipCodec | ZstdCodec | None
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
    root: zarr.Group, cube: Cube, codec: GzipCodec | ZstdCodec | None, *, progress: bool
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
