"""Loom files (``.loom``, HDF5): ``/matrix`` or a layer, genes x cells, with row and column attributes.

The matrix is stored features x cells, so a band of cells is a block of
columns; each is read once, transposed and made canonical CSR. Cells get
their ids from the column attribute ``CellID`` (loompy's convention), else
``obs_names``, ``Cell_id`` or ``cell_id``; features theirs from ``Accession``
(else the gene names), their names from ``Gene`` (else ``var_names``,
``gene_symbols``). The other one-dimensional attributes become table columns;
attributes of more dimensions (embeddings) are left out with a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import h5py
import numpy as np
import pandas as pd

from cytearc._warnings import warn_user
from cytearc.errors import DamagedSourceError, SourceFormatError, StoreAccessError
from cytearc.io.converters import ToZarr
from cytearc.io.damage import open_hdf5
from cytearc.io.importer import DEFAULT_COMPRESSION, document_store_options
from cytearc.io.sources import FileSource, canonical_csr, source_location
from cytearc.storage.destinations import validate_destination

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    import scipy.sparse as sp
    from distributed import Client

    from cytearc.engine.cluster import Engine
    from cytearc.io.importer import AssaySplitKey, ImportResult
    from cytearc.storage.layout import CountLayout
    from cytepool.codecs import Compression

__all__ = [
    "CELL_ID_ATTRIBUTES",
    "FEATURE_ID_ATTRIBUTES",
    "FEATURE_NAME_ATTRIBUTES",
    "LoomSource",
    "LoomToZarr",
    "import_loom",
]

CELL_ID_ATTRIBUTES: Final = ("CellID", "obs_names", "Cell_id", "cell_id")
FEATURE_ID_ATTRIBUTES: Final = ("Accession", "gene_ids", "var_names")
FEATURE_NAME_ATTRIBUTES: Final = ("Gene", "var_names", "gene_symbols", "Gene_name")


def _values(dataset: h5py.Dataset, where: str) -> np.ndarray:
    try:
        values = dataset[()]
    except StoreAccessError:
        raise
    except OSError as error:
        msg = f"{where}: cannot be read ({error}); the file is damaged - copy or download it again"
        raise DamagedSourceError(msg) from error
    if values.dtype.kind in "SO":
        return np.array(
            [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values], dtype=object
        )
    return np.asarray(values)


def _attributes(group: h5py.Group | None, n: int, where: str) -> dict[str, np.ndarray]:
    """The one-dimensional attributes of ``n`` values; others are left out with a warning."""
    found: dict[str, np.ndarray] = {}
    if group is None:
        return found
    skipped = []
    for name, node in group.items():
        if not isinstance(node, h5py.Dataset) or node.ndim != 1:
            skipped.append(name)
            continue
        if node.shape[0] != n:
            msg = f"{where}/{name}: {node.shape[0]} values for {n} rows; the file is inconsistent"
            raise SourceFormatError(msg)
        found[name] = _values(node, f"{where}/{name}")
    if skipped:
        warn_user(
            f"{where}: attributes {skipped} are not one value per row (embeddings or graphs) and are "
            "left out; compute them again on the store"
        )
    return found


def _pick(attributes: dict[str, np.ndarray], names: tuple[str, ...]) -> str | None:
    return next((name for name in names if name in attributes), None)


class LoomSource(FileSource):
    """A loom file's main matrix (or a layer) and attributes, read in bands of cells.

    Parameters
    ----------
    path
        The ``.loom`` file: a local path or an fsspec URL (``s3://...``),
        read in byte ranges (see :func:`~cytearc.io.sources.open_remote`).
    layer
        A layer of ``/layers`` to read instead of ``/matrix``.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).
    download
        Copy a file at a URL into a temporary file first (removed on
        :meth:`close`) instead of reading it in byte ranges.

    Raises
    ------
    SourceFormatError
        If the file is missing or not HDF5, has no 2-D numeric ``/matrix``
        (or no such layer), or its attributes do not match the matrix.
    DamagedSourceError
        If the file is truncated.
    StoreAccessError
        If a file at a URL cannot be read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        layer: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        download: bool = False,
    ) -> None:
        location = source_location(path, storage_options)
        self._path = Path(path) if location.is_local else location
        self._file, self._remote = open_hdf5(
            self._path, remedy="give a .loom file", download=download
        )
        try:
            self._open(layer)
        except BaseException:
            self.close()
            raise

    def _open(self, layer: str | None) -> None:
        key = "matrix" if layer is None else f"layers/{layer}"
        matrix = self._file.get(key)
        if not isinstance(matrix, h5py.Dataset) or matrix.ndim != 2:
            layers = (
                sorted(self._file["layers"])
                if isinstance(self._file.get("layers"), h5py.Group)
                else []
            )
            msg = f"{self._path}: no 2-D dataset /{key}; a loom file stores genes x cells in /matrix (its layers: {layers})"
            raise SourceFormatError(msg)
        if matrix.dtype.kind not in "biuf":
            msg = f"{self._path}: /{key} holds {matrix.dtype} values; counts are numbers"
            raise SourceFormatError(msg)
        self._matrix = matrix
        self._key = key
        self._dtype = np.dtype(matrix.dtype)
        n_features, n_cells = (int(n) for n in matrix.shape)
        columns = _attributes(self._file.get("col_attrs"), n_cells, f"{self._path}: col_attrs")
        rows = _attributes(self._file.get("row_attrs"), n_features, f"{self._path}: row_attrs")
        cell_key = _pick(columns, CELL_ID_ATTRIBUTES)
        cell_ids = (
            columns.pop(cell_key).astype(str).astype(object)
            if cell_key is not None
            else np.array([f"cell-{i}" for i in range(n_cells)], dtype=object)
        )
        name_key = _pick(rows, FEATURE_NAME_ATTRIBUTES)
        names = rows.pop(name_key).astype(str).astype(object) if name_key is not None else None
        id_key = _pick(rows, FEATURE_ID_ATTRIBUTES)
        ids = rows.pop(id_key).astype(str).astype(object) if id_key is not None else names
        if ids is None:
            ids = np.array([f"feature-{i}" for i in range(n_features)], dtype=object)
        self._cells = pd.DataFrame({"ids": cell_ids, **columns})
        self._features = pd.DataFrame(
            {
                "ids": ids,
                "names": ids if names is None else names,
                "feature_types": np.full(n_features, "Gene Expression", dtype=object),
                **{k: v for k, v in rows.items() if k not in {"ids", "names", "feature_types"}},
            }
        )

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Cells ``start:stop``: a block of the matrix's columns, transposed.

        Parameters
        ----------
        start, stop
            The band of cells.

        Returns
        -------
        scipy.sparse.csr_matrix
            The band, cells x features, canonical.

        Raises
        ------
        DamagedSourceError
            If HDF5 cannot read the block.
        """
        try:
            block = self._matrix[:, start:stop]
        except StoreAccessError:
            raise
        except OSError as error:
            msg = f"{self._path}: /{self._key}[:, {start}:{stop}] cannot be read ({error}); the file is damaged - copy or download it again"
            raise DamagedSourceError(msg) from error
        return canonical_csr(np.ascontiguousarray(block.T))

    def close(self) -> None:
        """Close the file (and the remote file, or remove its downloaded copy)."""
        self._file.close()
        if self._remote is not None:
            self._remote.close()


@document_store_options
class LoomToZarr(ToZarr):
    """Import a loom file's ``/matrix`` (or a layer) with its row and column attributes.

    Parameters
    ----------
    path
        The ``.loom`` file: a local path or an fsspec URL, read in byte ranges.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    layer
        A layer of ``/layers`` to import instead of ``/matrix``.
    source_storage_options
        The options of the source's fsspec filesystem when ``path`` is a URL
        (``s3://``, ``gs://``, ``http(s)://``): credentials, ``endpoint_url``;
        never recorded nor shown in messages.
    download
        Copy a file at a URL into a temporary file (under ``TMPDIR``, removed
        afterwards) and read the copy, instead of reading it in byte ranges.
    %(store_options)s

    Raises
    ------
    SourceFormatError
        If the file has no 2-D numeric matrix (or no such layer), or its
        attributes do not match it.

    Examples
    --------
    See :func:`import_loom`, which runs ``LoomToZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "loom file"

    def __init__(
        self,
        path: str | os.PathLike[str],
        zarr_loc: str | Path,
        *,
        layer: str | None = None,
        source_storage_options: Mapping[str, Any] | None = None,
        download: bool = False,
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
            LoomSource(
                path, layer=layer, storage_options=source_storage_options, download=download
            ),
            zarr_loc,
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
        )


@document_store_options
def import_loom(
    source: str | os.PathLike[str],
    destination: str | Path,
    *,
    layer: str | None = None,
    source_storage_options: Mapping[str, Any] | None = None,
    download: bool = False,
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
    """Import a loom file into a new store: ``LoomToZarr(source, destination, ...).dump()``.

    Parameters
    ----------
    source
        The ``.loom`` file: a local path or an fsspec URL, read in byte ranges.
    destination
        The store to create, a local directory.
    layer
        A layer of ``/layers`` to import instead of ``/matrix``.
    source_storage_options
        The options of the source's fsspec filesystem when ``source`` is a
        URL (``s3://``, ``gs://``, ``http(s)://``): credentials,
        ``endpoint_url``; never recorded nor shown in messages.
    download
        Copy a file at a URL into a temporary file (under ``TMPDIR``, removed
        afterwards) and read the copy, instead of reading it in byte ranges.
    %(store_options)s

    Returns
    -------
    ImportResult
        The new store's path, assays, shapes, dtypes and dataset fingerprint.

    Raises
    ------
    SourceFormatError
        If the file has no 2-D numeric matrix (or no such layer), or its
        attributes do not match it.
    %(store_raises)s

    Examples
    --------
    A loom file of 3 cells and 2 genes, written with h5py:

    >>> import tempfile, h5py, numpy as np
    >>> from cytearc import DataStore
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with h5py.File(f"{d}/x.loom", "w") as f:
    ...         _ = f.create_dataset("matrix", data=np.array([[1, 0, 2], [0, 3, 0]]))
    ...         _ = f.create_dataset("row_attrs/Gene", data=np.array([b"A", b"B"]))
    ...         _ = f.create_dataset("col_attrs/CellID", data=np.array([b"c1", b"c2", b"c3"]))
    ...     result = import_loom(f"{d}/x.loom", f"{d}/ds.zarr", cluster="threads", show_progress=False)
    ...     DataStore(result.path).RNA.counts.compute().tolist()
    [[1, 0], [0, 3], [2, 0]]
    """
    return LoomToZarr(
        source,
        destination,
        layer=layer,
        source_storage_options=source_storage_options,
        download=download,
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
