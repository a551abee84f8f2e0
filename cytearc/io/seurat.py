"""Seurat objects saved with ``saveRDS`` (``.rds``): v4 ``Assay`` and v5 ``Assay5`` assays, read with ``rdata``.

The RDS file is parsed whole by the `rdata <https://rdata.readthedocs.io>`_
package (an R serialization is one stream, so it cannot be read in bands; R
holds the same object in memory). rdata reads a local file whole into memory,
and a file at an fsspec URL (``s3://...``) is fetched whole into memory the
same way, in one request through fsspec, with no temporary file. Each assay's counts become an assay of the
store, named as in the object (its features' ``feature_types`` is the assay
name), and ``meta.data`` becomes the cell table, its row names the cell ids.

A v4 ``Assay`` gives its ``counts`` slot (or ``data``, through
``assay_layers``). A v5 ``Assay5`` gives the union of its selected count
layers: by default every layer named ``counts`` or ``counts.<split>``, which
``SplitObject``/``split`` leave with disjoint cells. A cell that no selected
layer holds was not measured by the assay: the store records the assay's
membership (``<assay>_I``), and its counts are zeros. A feature that a layer
does not hold counts zero in that layer's cells. Selected layers that hold
the same cell are refused, since their counts would be added.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import pandas as pd
import scipy.sparse as sp

from cytearc.errors import DamagedSourceError, SourceFormatError
from cytearc.io.converters import ToZarr
from cytearc.io.importer import DEFAULT_COMPRESSION, document_store_options
from cytearc.io.sources import FileSource, canonical_csr, open_remote, source_location
from cytearc.storage.destinations import validate_destination
from cytepool.locations import Location

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence

    from distributed import Client

    from cytearc.engine.cluster import Engine
    from cytearc.io.importer import AssaySplitKey, ImportResult
    from cytearc.storage.layout import CountLayout
    from cytepool.codecs import Compression

__all__ = ["SeuratSource", "SeuratToZarr", "import_seurat"]

_V4_SLOTS: Final = ("counts", "data")


def _dgcmatrix(obj: SimpleNamespace, attrs: Mapping[str, Any]) -> sp.csc_matrix:
    """Rdata's constructor of a ``dgCMatrix`` (features x cells), with its dimnames kept."""
    del obj
    shape = tuple(int(n) for n in attrs["Dim"])
    matrix = sp.csc_matrix(
        (np.asarray(attrs["x"]), np.asarray(attrs["i"]), np.asarray(attrs["p"])), shape=shape
    )
    names = attrs.get("Dimnames")
    matrix.dimnames = tuple(
        None if n is None else np.asarray(n, dtype=object) for n in (names or (None, None))
    )
    return matrix


def _logmap(obj: Any, attrs: Mapping[str, Any]) -> pd.DataFrame:  # noqa: ANN401 (rdata's array)
    """Rdata's constructor of a ``LogMap`` (a logical matrix of names x layers), as a frame."""
    del attrs
    array = getattr(obj, "values", None)
    dims = getattr(obj, "dims", ())
    if array is None or len(dims) != 2:
        msg = (
            f"a LogMap of {type(obj).__name__}: expected a logical matrix with row and column names"
        )
        raise SourceFormatError(msg)
    rows, columns = (np.asarray(obj.coords[d].values) for d in dims)
    return pd.DataFrame(
        np.asarray(array, dtype=bool),
        index=pd.Index(rows.astype(str).astype(object)),
        columns=[str(c) for c in columns],
    )


def _fetched(location: Location) -> bytes:
    """The bytes of an RDS file at a URL, fetched whole (rdata parses one stream)."""
    remedy = "give the .rds file of a Seurat object (saveRDS)"
    with open_remote(location, remedy=remedy, sequential=True) as remote:
        return remote.readall()


def _read(path: Path | Location) -> Any:  # noqa: ANN401 (rdata's converted object)
    import rdata  # noqa: PLC0415 (read only for Seurat files)

    constructors = {
        **rdata.conversion.DEFAULT_CLASS_MAP,
        "dgCMatrix": _dgcmatrix,
        "LogMap": _logmap,
    }
    data = _fetched(path) if isinstance(path, Location) else None
    try:
        parsed = (
            rdata.parser.parse_file(path, extension=".rds")
            if data is None
            else rdata.parser.parse_data(data, extension=".rds")
        )
    except Exception as error:  # the parser raises what its reads meet: EOF, struct, value errors
        msg = f"{path}: cannot be parsed as an RDS file ({type(error).__name__}: {error}); it is truncated, damaged or not an RDS file - save the object again with saveRDS"
        raise DamagedSourceError(msg) from error
    try:
        with warnings.catch_warnings():  # rdata notes each S4 class it leaves as slots
            warnings.filterwarnings("ignore", message="Missing constructor", category=UserWarning)
            return rdata.conversion.convert(parsed, constructor_dict=constructors)
    except (ValueError, TypeError, KeyError, NotImplementedError) as error:
        msg = f"{path}: the RDS file holds R objects rdata cannot convert ({type(error).__name__}: {error}); give a Seurat object saved with saveRDS"
        raise SourceFormatError(msg) from error


def _slots(obj: object) -> dict[str, Any]:
    return dict(vars(obj)) if isinstance(obj, SimpleNamespace) else {}


def _class(obj: object) -> str:
    names = _slots(obj).get("class")
    return str(np.asarray(names).ravel()[0]) if names is not None else type(obj).__name__


class SeuratSource(FileSource):
    """A Seurat object's cell metadata and the counts of its assays, read in bands of cells.

    Parameters
    ----------
    path
        The ``.rds`` file (``saveRDS`` of a ``Seurat`` object): a local path,
        or an fsspec URL (``s3://...``), fetched whole into memory as rdata
        reads a local file.
    assays
        The assays to read (default all, in the object's order).
    assay_layers
        Per assay, the layers holding its counts: slot ``counts`` (default)
        or ``data`` of a v4 ``Assay``; layer names of a v5 ``Assay5``
        (default those named ``counts`` or ``counts.<split>``).
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).

    Raises
    ------
    SourceFormatError
        The file is not a Seurat object, an assay or layer is missing, its
        names disagree with the cells, selected layers share cells, or the
        metadata holds a column named ``<assay>_I`` of an assay read.
    DamagedSourceError
        The file is truncated.
    StoreAccessError
        A file at a URL cannot be read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        assays: Sequence[str] | None = None,
        assay_layers: Mapping[str, Sequence[str]] | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        location = source_location(path, storage_options)
        self._path = Path(path) if location.is_local else location
        obj = _read(self._path)
        slots = _slots(obj)
        if _class(obj) != "Seurat" or "assays" not in slots or "meta.data" not in slots:
            msg = f"{self._path}: expected a Seurat object (saveRDS of a Seurat object), found an R {_class(obj)}; save the Seurat object itself"
            raise SourceFormatError(msg)
        meta = slots["meta.data"]
        available: dict[str, Any] = {str(k): v for k, v in dict(slots["assays"]).items()}
        chosen = list(available) if assays is None else list(assays)
        missing = [a for a in chosen if a not in available]
        if missing or not chosen:
            msg = f"{self._path}: assays {missing or chosen}: the object has the assays {list(available)}; pass some of them"
            raise SourceFormatError(msg)
        unknown = sorted(set(assay_layers or {}) - set(chosen))
        if unknown:
            msg = f"{self._path}: assay_layers names assays {unknown} that are not read (the assays read: {chosen})"
            raise SourceFormatError(msg)
        cell_ids = np.asarray(meta.index.astype(str), dtype=object)
        blocks, tables, membership = [], [], {}
        for name in chosen:
            block, features, measured = self._assay(
                name, available[name], cell_ids, (assay_layers or {}).get(name)
            )
            blocks.append(block)
            tables.append(features)
            if not measured.all():
                membership[name] = measured
        cells = self._cell_table(meta, cell_ids, chosen)
        for name, measured in membership.items():
            cells[f"{name}_I"] = measured
        self._cells = cells
        self._features = pd.concat(tables, ignore_index=True)
        self.membership = {name: f"{name}_I" for name in membership}
        """The membership column of each assay some cells lack (see :mod:`cytearc.io.importer`)."""
        self._matrix = canonical_csr(sp.hstack(blocks, format="csr"))
        kinds = {np.dtype(b.dtype) for b in blocks}
        self._dtype = np.result_type(*kinds)

    def _cell_table(
        self, meta: pd.DataFrame, cell_ids: np.ndarray, assays: list[str]
    ) -> pd.DataFrame:
        reserved = [f"{a}_I" for a in assays if f"{a}_I" in meta.columns]
        if reserved:
            msg = f"{self._path}: meta.data has the columns {reserved}, a name CyteArc reserves for the membership of an assay read; rename them in R (or leave the assay out)"
            raise SourceFormatError(msg)
        frame = meta.reset_index(drop=True)
        frame.columns = [str(c) for c in frame.columns]
        for column in frame.columns:
            if isinstance(frame[column].dtype, np.dtype) and frame[column].dtype.kind == "S":
                frame[column] = frame[column].astype(str)
        return pd.concat([pd.DataFrame({"ids": cell_ids}), frame], axis=1)

    def _assay(
        self, name: str, assay: object, cell_ids: np.ndarray, layers: Sequence[str] | None
    ) -> tuple[sp.csr_matrix, pd.DataFrame, np.ndarray]:
        """The assay's counts over every cell (cells x features), its feature table, and the cells it measured."""
        kind = _class(assay)
        slots = _slots(assay)
        where = f"{self._path}: assay {name!r}"
        if kind == "Assay":
            slot = self._v4_slot(layers, where=where)
            matrix = slots.get(slot)
            if not isinstance(matrix, sp.csc_matrix):
                msg = f"{where}: slot {slot!r} is not a dgCMatrix; the object is damaged or of another version"
                raise SourceFormatError(msg)
            features = self._names(matrix, 0, where=f"{where} {slot}")
            cells = self._names(matrix, 1, where=f"{where} {slot}")
            if len(cells) != len(cell_ids) or not np.array_equal(cells, cell_ids):
                msg = f"{where}: the cells of {slot!r} are not the object's cells (meta.data row names); the object is inconsistent - check it in R with validObject()"
                raise SourceFormatError(msg)
            counts = canonical_csr(matrix.T)
            measured = np.ones(len(cell_ids), dtype=bool)
            extra = slots.get("meta.features")
        elif kind == "Assay5":
            counts, features, measured = self._v5(name, slots, cell_ids, layers, where=where)
            extra = slots.get("meta.data")
        else:
            msg = f"{where}: an R {kind}; expected a Seurat Assay (v4) or Assay5 (v5)"
            raise SourceFormatError(msg)
        table = pd.DataFrame(
            {
                "ids": features,
                "names": features,
                "feature_types": np.full(len(features), name, dtype=object),
            }
        )
        if isinstance(extra, pd.DataFrame) and len(extra) == len(features) and len(extra.columns):
            kept = extra.reset_index(drop=True)
            kept = kept[[c for c in kept.columns if c not in table.columns]]
            table = pd.concat([table, kept], axis=1)
        return counts, table, measured

    def _v4_slot(self, layers: Sequence[str] | None, *, where: str) -> str:
        chosen = list(layers or ["counts"])
        if len(chosen) != 1 or chosen[0] not in _V4_SLOTS:
            msg = f"{where}: a v4 Assay holds one matrix per slot; assay_layers must name one of {list(_V4_SLOTS)}, found {chosen}"
            raise SourceFormatError(msg)
        return chosen[0]

    def _names(self, matrix: sp.csc_matrix, axis: int, *, where: str) -> np.ndarray:
        names = getattr(matrix, "dimnames", (None, None))[axis]
        if names is None:
            msg = f"{where}: the matrix has no {'row' if axis == 0 else 'column'} names; the object is damaged or of another version"
            raise SourceFormatError(msg)
        return np.asarray(names, dtype=str).astype(object)

    def _v5(
        self,
        name: str,
        slots: dict[str, Any],
        cell_ids: np.ndarray,
        layers: Sequence[str] | None,
        *,
        where: str,
    ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        stored: dict[str, Any] = {str(k): v for k, v in dict(slots.get("layers") or {}).items()}
        cells_map, features_map = slots.get("cells"), slots.get("features")
        if not isinstance(cells_map, pd.DataFrame) or not isinstance(features_map, pd.DataFrame):
            msg = f"{where}: an Assay5 without its cells and features LogMaps; the object is damaged or of another version"
            raise SourceFormatError(msg)
        chosen = (
            list(layers)
            if layers is not None
            else [n for n in stored if n == "counts" or n.startswith("counts.")]
        )
        missing = [n for n in chosen if n not in stored or n not in cells_map.columns]
        if missing or not chosen:
            msg = f"{where}: layers {missing or chosen}: the assay has the layers {list(stored)}; choose its count layers with assay_layers={{{name!r}: [...]}}"
            raise SourceFormatError(msg)
        position = pd.Index(cell_ids)
        unknown = cells_map.index.difference(position)
        if len(unknown):
            msg = f"{where}: the assay holds cells {list(unknown[:3])} that are not the object's cells (meta.data row names); the object is inconsistent"
            raise SourceFormatError(msg)
        features = np.asarray(features_map.index.astype(str), dtype=object)
        rows, columns, values = [], [], []
        measured = np.zeros(len(cell_ids), dtype=bool)
        for layer in chosen:
            matrix = stored[layer]
            held_cells = cells_map.index[cells_map[layer].to_numpy()]
            held_features = np.flatnonzero(features_map[layer].to_numpy())
            if not isinstance(matrix, sp.csc_matrix) or matrix.shape != (
                len(held_features),
                len(held_cells),
            ):
                msg = f"{where}: layer {layer!r} is not a dgCMatrix of its {len(held_features)} features x {len(held_cells)} cells; the object is damaged"
                raise SourceFormatError(msg)
            at = position.get_indexer(held_cells)
            if measured[at].any():
                msg = f"{where}: the layers {chosen} hold cell {cell_ids[at[measured[at]][0]]!r} more than once, so their counts would be added; select disjoint layers with assay_layers={{{name!r}: [...]}}"
                raise SourceFormatError(msg)
            measured[at] = True
            entries = matrix.tocoo()  # the layer's own features x cells, placed in the assay's
            rows.append(at[entries.col])
            columns.append(held_features[entries.row])
            values.append(entries.data)
        counts = sp.coo_matrix(
            (np.concatenate(values), (np.concatenate(rows), np.concatenate(columns))),
            shape=(len(cell_ids), len(features)),
        )
        return canonical_csr(counts), features, measured

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Cells ``start:stop`` of every assay read, side by side.

        Parameters
        ----------
        start, stop
            The band of cells.

        Returns
        -------
        scipy.sparse.csr_matrix
            The band, cells x features, canonical.
        """
        band: sp.csr_matrix = self._matrix[start:stop]
        return band

    def close(self) -> None:
        """Nothing is held open: the file was read whole."""


def _by_assay(features: pd.DataFrame) -> pd.Series:
    """The assay of each feature: the Seurat assay's own name."""
    return features["feature_types"]


@document_store_options
class SeuratToZarr(ToZarr):
    """Import a Seurat v4 or v5 object (``saveRDS``): its assays' counts and its cell metadata.

    Parameters
    ----------
    path
        The ``.rds`` file: a local path, or an fsspec URL whose file is
        fetched whole into memory (as rdata reads a local file), never to a
        temporary file.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    assays
        The assays to import (default all).
    assay_layers
        Per assay, the layers (v5) or slot (v4) holding its counts; see
        :class:`SeuratSource`. Each Seurat assay is an assay of its own name
        (its features' ``feature_types``) unless ``assay_split_key`` says
        otherwise.
    source_storage_options
        The options of the source's fsspec filesystem when ``path`` is a URL
        (``s3://``, ``gs://``, ``http(s)://``): credentials, ``endpoint_url``;
        never recorded nor shown in messages.
    %(store_options)s

    Raises
    ------
    SourceFormatError
        The file is not a Seurat object, or an assay or layer is missing or
        inconsistent (see :class:`SeuratSource`).

    Examples
    --------
    See :func:`import_seurat`, which runs ``SeuratToZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "Seurat object"

    def __init__(
        self,
        path: str | os.PathLike[str],
        zarr_loc: str | Path,
        *,
        assays: Sequence[str] | None = None,
        assay_layers: Mapping[str, Sequence[str]] | None = None,
        source_storage_options: Mapping[str, Any] | None = None,
        assay_split_key: AssaySplitKey | None = None,
        assay_types: Mapping[str, str] | None = None,
        layout: CountLayout | None = None,
        compression: Compression = DEFAULT_COMPRESSION,
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        mem_budget: str | int | float | None = None,
        workers: int | str | None = None,
        cluster: str | Client | None = None,
        engine: Engine | None = None,
        show_progress: bool = True,
    ) -> None:
        validate_destination(zarr_loc, overwrite=overwrite, storage_options=storage_options)
        super().__init__(
            SeuratSource(
                path,
                assays=assays,
                assay_layers=assay_layers,
                storage_options=source_storage_options,
            ),
            zarr_loc,
            assay_split_key=assay_split_key or _by_assay,
            assay_types=assay_types,
            layout=layout,
            compression=compression,
            overwrite=overwrite,
            storage_options=storage_options,
            mem_budget=mem_budget,
            workers=workers,
            cluster=cluster,
            engine=engine,
            show_progress=show_progress,
        )


@document_store_options
def import_seurat(
    source: str | os.PathLike[str],
    destination: str | Path,
    *,
    assays: Sequence[str] | None = None,
    assay_layers: Mapping[str, Sequence[str]] | None = None,
    source_storage_options: Mapping[str, Any] | None = None,
    assay_split_key: AssaySplitKey | None = None,
    assay_types: Mapping[str, str] | None = None,
    layout: CountLayout | None = None,
    compression: Compression = DEFAULT_COMPRESSION,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: str | Client | None = None,
    engine: Engine | None = None,
    show_progress: bool = True,
) -> ImportResult:
    """Import a Seurat object into a new store: ``SeuratToZarr(source, destination, ...).dump()``.

    Parameters
    ----------
    source
        The ``.rds`` file: a local path, or an fsspec URL whose file is
        fetched whole into memory (as rdata reads a local file).
    destination
        The store to create, a local directory.
    assays
        The assays to import (default all).
    assay_layers
        Per assay, the layers (v5) or slot (v4) holding its counts.
    source_storage_options
        The options of the source's fsspec filesystem when ``source`` is a
        URL (``s3://``, ``gs://``, ``http(s)://``): credentials,
        ``endpoint_url``; never recorded nor shown in messages.
    %(store_options)s

    Returns
    -------
    ImportResult
        The new store's path, assays, shapes, dtypes and dataset fingerprint.

    Raises
    ------
    SourceFormatError
        The file is not a Seurat object, or an assay or layer is missing or
        inconsistent.
    %(store_raises)s
    """
    return SeuratToZarr(
        source,
        destination,
        assays=assays,
        assay_layers=assay_layers,
        source_storage_options=source_storage_options,
        assay_split_key=assay_split_key,
        assay_types=assay_types,
        layout=layout,
        compression=compression,
        overwrite=overwrite,
        storage_options=storage_options,
        mem_budget=mem_budget,
        workers=workers,
        cluster=cluster,
        engine=engine,
        show_progress=show_progress,
    ).dump()
