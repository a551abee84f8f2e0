"""The importers by format, each writing a new store from one kind of source.

``SparseToZarr`` imports an in-memory matrix; ``CrToZarr`` (10x HDF5),
``MtxToZarr`` (10x Matrix Market), ``H5adToZarr`` and ``CSVtoZarr`` import
files, whose readers live beside this module; they check the destination
(:func:`~cytearc.storage.destinations.validate_destination`) before they open
their file, and :meth:`ToZarr.dump` checks it again. Each takes the source, the
destination, the options of its reader and those of
:func:`~cytearc.io.importer.write_store`, all keyword-only after the first
two; :meth:`ToZarr.dump` writes the store. A file importer's source is a
local path or an fsspec URL (``s3://``, ``gs://``, ``http(s)://``) with
``source_storage_options``: HDF5 files are read in byte ranges (or copied to
a temporary file first with ``download=True``) and text files streamed,
never downloaded whole. The functions
:func:`import_10x_h5`, :func:`import_10x_mtx`, :func:`import_h5ad` and
:func:`import_csv` take the same options and write at once, and
:func:`~cytearc.io.detect.import_data` picks the importer from the file.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar

from cytearc.io.importer import (
    DEFAULT_COMPRESSION,
    ImportResult,
    document_store_options,
    write_store,
)
from cytearc.io.sources import CountSource, SparseSource
from cytearc.storage.destinations import validate_destination

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping
    from pathlib import Path

    import numpy as np
    import pandas as pd
    import scipy.sparse as sp
    from distributed import Client

    from cytearc.engine.cluster import Engine
    from cytearc.io.csv import Orientation
    from cytearc.io.importer import AssaySplitKey
    from cytearc.storage.layout import CountLayout
    from cytepool.codecs import Compression

    PathLike = str | os.PathLike[str]

__all__ = [
    "CSVtoZarr",
    "CrToZarr",
    "H5adToZarr",
    "MtxToZarr",
    "SparseToZarr",
    "ToZarr",
    "import_10x_h5",
    "import_10x_mtx",
    "import_csv",
    "import_h5ad",
]


@document_store_options
class ToZarr:
    """Writes a :class:`~cytearc.io.sources.CountSource` to ``zarr_loc`` on :meth:`dump`.

    Parameters
    ----------
    source
        The counts and tables to import; :meth:`dump` closes it.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    %(store_options)s
    """

    format_name: ClassVar[str] = "count source"
    """The format read, as messages name it."""

    def __init__(
        self,
        source: CountSource,
        zarr_loc: str | Path,
        *,
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
        self.source = source
        self.zarr_loc = zarr_loc
        self._write: Callable[[], ImportResult] = functools.partial(
            write_store,
            source,
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

    def dump(self) -> ImportResult:
        """Import the source into the new store, then close the source.

        Returns
        -------
        ImportResult
            The new store's path, assays, shapes, dtypes and dataset
            fingerprint.

        Raises
        ------
        DestinationExistsError, NonFiniteCountsError, MemBudgetError, AssayTypeError, CyteArcError
            As :func:`~cytearc.io.importer.write_store` raises them.
        """
        try:
            return self._write()
        finally:
            self.source.close()


@document_store_options
class SparseToZarr(ToZarr):
    """Import an in-memory SciPy sparse (or numpy) matrix, cells x features, with its tables.

    Parameters
    ----------
    matrix
        The counts, one row per cell.
    cells
        One row per cell, with an ``ids`` column.
    features
        One row per feature, with ``ids`` and ``names`` columns
        (``feature_types`` defaults to "Gene Expression").
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    %(store_options)s

    Raises
    ------
    SourceFormatError
        If the tables' lengths do not match the matrix.

    Examples
    --------
    >>> import tempfile, numpy as np, pandas as pd, scipy.sparse as sp
    >>> from cytearc import DataStore
    >>> matrix = sp.random(50, 20, density=0.2, format="csr", random_state=0) * 10
    >>> cells = pd.DataFrame({"ids": [f"c{i}" for i in range(50)]})
    >>> features = pd.DataFrame({"ids": [f"g{i}" for i in range(20)], "names": [f"G{i}" for i in range(20)]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     result = SparseToZarr(matrix.floor(), cells=cells, features=features,
    ...                           zarr_loc=f"{d}/ds.zarr", show_progress=False).dump()
    ...     DataStore(result.path).RNA.counts.shape
    (50, 20)
    """

    format_name: ClassVar[str] = "in-memory matrix"

    def __init__(
        self,
        matrix: sp.spmatrix | sp.sparray | np.ndarray,
        *,
        cells: pd.DataFrame,
        features: pd.DataFrame,
        zarr_loc: str | Path,
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
        features = features.copy()
        if "feature_types" not in features.columns:
            features.insert(
                2 if "names" in features.columns else 1, "feature_types", "Gene Expression"
            )
        super().__init__(
            SparseSource(matrix, cells, features),
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
class CrToZarr(ToZarr):
    """Import a Cell Ranger HDF5 feature-barcode matrix (v2 or v3).

    The file is opened (and checked) here; :meth:`~ToZarr.dump` writes.

    Parameters
    ----------
    path
        The ``.h5`` file.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    genome
        v2: the genome group to read, needed when the file holds several.
        v3: keep only the features of this genome (all when None).
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
        If the file is missing or not a 10x matrix, or the genome is
        ambiguous or unknown.
    StoreAccessError
        If a file at a URL cannot be read (the endpoint is unreachable or
        refuses the credentials).

    Examples
    --------
    See :func:`import_10x_h5`, which runs ``CrToZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "10x HDF5 matrix"

    def __init__(
        self,
        path: PathLike,
        zarr_loc: str | Path,
        *,
        genome: str | None = None,
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
        from cytearc.io.tenx import TenxH5Source  # noqa: PLC0415 (h5py only when used)

        validate_destination(zarr_loc, overwrite=overwrite, storage_options=storage_options)
        super().__init__(
            TenxH5Source(
                path, genome=genome, storage_options=source_storage_options, download=download
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
class MtxToZarr(ToZarr):
    """Import a 10x Matrix Market folder (v2 ``genes.tsv`` or v3 ``features.tsv``, gzipped or not).

    Parameters
    ----------
    path
        The folder holding ``matrix.mtx``, ``barcodes.tsv`` and
        ``features.tsv`` (or ``genes.tsv``); at a URL they are streamed.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    source_storage_options
        The options of the source's fsspec filesystem when ``path`` is a URL
        (``s3://``, ``gs://``, ``http(s)://``): credentials, ``endpoint_url``;
        never recorded nor shown in messages.
    %(store_options)s

    Raises
    ------
    SourceFormatError
        If a file is missing or the tables do not match the matrix.
    StoreAccessError
        If a file at a URL cannot be read.

    Examples
    --------
    See :func:`import_10x_mtx`, which runs ``MtxToZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "10x Matrix Market folder"

    def __init__(
        self,
        path: PathLike,
        zarr_loc: str | Path,
        *,
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
        from cytearc.io.tenx import TenxMtxSource  # noqa: PLC0415

        validate_destination(zarr_loc, overwrite=overwrite, storage_options=storage_options)
        super().__init__(
            TenxMtxSource(path, storage_options=source_storage_options),
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
class H5adToZarr(ToZarr):
    """Import an H5AD file's ``X`` or one of its layers, with ``obs`` and ``var``.

    Parameters
    ----------
    path
        The ``.h5ad`` file.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    layer
        The layer to import instead of ``X``.
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
        If the file is missing, the matrix or a table column has an
        unsupported encoding, or the layer is missing.
    StoreAccessError
        If a file at a URL cannot be read.

    Examples
    --------
    See :func:`import_h5ad`, which runs ``H5adToZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "H5AD file"

    def __init__(
        self,
        path: PathLike,
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
        from cytearc.io.h5ad import H5adSource  # noqa: PLC0415

        validate_destination(zarr_loc, overwrite=overwrite, storage_options=storage_options)
        super().__init__(
            H5adSource(
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
class CSVtoZarr(ToZarr):
    """Import a dense table of counts, cells x features or features x cells.

    The table is parsed once, here (see :class:`~cytearc.io.csv.CsvSource`).

    Parameters
    ----------
    path
        The table, optionally compressed (``.gz``, ...).
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    orientation
        ``"cells_x_features"`` when rows are cells, ``"features_x_cells"``
        when rows are features.
    sep
        The field delimiter; by default a tab for ``.tsv`` and ``.txt``
        files and a comma otherwise.
    index_col
        The position of the column of row ids.
    source_storage_options
        The options of the source's fsspec filesystem when ``path`` is a URL
        (``s3://``, ``gs://``, ``http(s)://``): credentials, ``endpoint_url``;
        never recorded nor shown in messages.
    %(store_options)s

    Raises
    ------
    SourceFormatError
        If the file is missing, a field is not a finite number, a row has
        more fields than the header, or cell ids repeat.
    StoreAccessError
        If a table at a URL cannot be read.
    ValueError
        If ``orientation`` is neither of the two.

    Examples
    --------
    See :func:`import_csv`, which runs ``CSVtoZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "CSV table"

    def __init__(
        self,
        path: PathLike,
        zarr_loc: str | Path,
        *,
        orientation: Orientation = "cells_x_features",
        sep: str | None = None,
        index_col: int = 0,
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
        from cytearc.io.csv import CsvSource  # noqa: PLC0415

        validate_destination(zarr_loc, overwrite=overwrite, storage_options=storage_options)
        super().__init__(
            CsvSource(
                path,
                orientation=orientation,
                sep=sep,
                index_col=index_col,
                storage_options=source_storage_options,
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
def import_10x_h5(
    source: PathLike,
    destination: str | Path,
    *,
    genome: str | None = None,
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
    """Import a Cell Ranger HDF5 feature-barcode matrix (v2 or v3) into a new store.

    ``CrToZarr(source, destination, ...).dump()``: Gene Expression features
    become the RNA assay, Antibody Capture the ADT assay, Peaks ATAC.

    Parameters
    ----------
    source
        The ``.h5`` file: a local path or an fsspec URL, read in byte ranges.
    destination
        The store to create, a local directory.
    genome
        v2: the genome group to read, needed when the file holds several.
        v3: keep only the features of this genome (all when None).
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
        If the file is missing or not a 10x matrix, or the genome is
        ambiguous or unknown.
    StoreAccessError
        If a file at a URL cannot be read (the endpoint is unreachable or
        refuses the credentials).
    %(store_raises)s

    Examples
    --------
    A v3 file of 3 cells and 2 features, written with h5py:

    >>> import tempfile, h5py, numpy as np
    >>> from cytearc import DataStore, import_10x_h5
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with h5py.File(f"{d}/matrix.h5", "w") as f:
    ...         m = f.create_group("matrix")
    ...         m["data"], m["indices"], m["indptr"] = [4, 1, 7], [0, 1, 1], [0, 1, 2, 3]
    ...         m["shape"], m["barcodes"] = [2, 3], ["AAAC-1", "AAAG-1", "AAAT-1"]
    ...         for key, values in {"id": ["ENSG1", "ENSG2"], "name": ["CD3E", "MS4A1"],
    ...                             "feature_type": ["Gene Expression"] * 2}.items():
    ...             m[f"features/{key}"] = values
    ...     result = import_10x_h5(f"{d}/matrix.h5", f"{d}/pbmc.zarr",
    ...                            cluster="threads", show_progress=False)
    ...     DataStore(result.path).RNA.counts.compute().tolist()
    [[4, 0], [0, 1], [0, 7]]
    """
    return CrToZarr(
        source,
        destination,
        genome=genome,
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


@document_store_options
def import_10x_mtx(
    source: PathLike,
    destination: str | Path,
    *,
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
    """Import a 10x Matrix Market folder (Cell Ranger v2 or v3) into a new store.

    ``MtxToZarr(source, destination, ...).dump()``.

    Parameters
    ----------
    source
        The folder holding ``matrix.mtx``, ``barcodes.tsv`` and
        ``features.tsv`` (or ``genes.tsv``), each optionally gzipped: a local
        path or an fsspec URL, whose files are streamed.
    destination
        The store to create, a local directory.
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
        If a file is missing or the tables do not match the matrix.
    StoreAccessError
        If a file at a URL cannot be read.
    %(store_raises)s

    Examples
    --------
    A folder of the synthetic generator (:mod:`cytearc.datasets`):

    >>> import tempfile, pathlib
    >>> from cytearc import import_10x_mtx
    >>> from cytearc.datasets.synthetic import Params, write_dataset
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_dataset(Params(n_cells=40, n_genes=240, n_types=2, n_markers=5),
    ...                       pathlib.Path(d))
    ...     result = import_10x_mtx(f"{d}/mtx", f"{d}/ds.zarr",
    ...                             cluster="threads", show_progress=False)
    ...     result.shapes
    {'RNA': (40, 240)}
    """
    return MtxToZarr(
        source,
        destination,
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


@document_store_options
def import_h5ad(
    source: PathLike,
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
    """Import an H5AD file's ``X`` (or a layer) with ``obs`` and ``var`` into a new store.

    ``H5adToZarr(source, destination, ...).dump()``: ``obs`` becomes the cell
    table, ``var`` the feature table (see :class:`~cytearc.io.h5ad.H5adSource`).

    Parameters
    ----------
    source
        The ``.h5ad`` file: a local path or an fsspec URL, read in byte ranges.
    destination
        The store to create, a local directory.
    layer
        The layer to import instead of ``X``.
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
        If the file is missing, the matrix or a table column has an
        unsupported encoding, or the layer is missing.
    StoreAccessError
        If a file at a URL cannot be read.
    %(store_raises)s

    Examples
    --------
    An H5AD file of the synthetic generator (:mod:`cytearc.datasets`):

    >>> import tempfile, pathlib
    >>> from cytearc import DataStore, import_h5ad
    >>> from cytearc.datasets.synthetic import Params, write_dataset
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_dataset(Params(n_cells=40, n_genes=240, n_types=2, n_markers=5),
    ...                       pathlib.Path(d))
    ...     result = import_h5ad(f"{d}/data.h5ad", f"{d}/ds.zarr",
    ...                          cluster="threads", show_progress=False)
    ...     DataStore(result.path).RNA.counts.shape
    (40, 240)
    """
    return H5adToZarr(
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


@document_store_options
def import_csv(
    source: PathLike,
    destination: str | Path,
    *,
    orientation: Orientation = "cells_x_features",
    sep: str | None = None,
    index_col: int = 0,
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
    r"""Import a dense table of counts (CSV, TSV, ...) into a new store.

    ``CSVtoZarr(source, destination, ...).dump()``. The table has a header
    row of ids and a column of ids; its features are "Gene Expression" and
    named by their ids.

    Parameters
    ----------
    source
        The table, optionally compressed (``.gz``, ...): a local path or an
        fsspec URL, streamed.
    destination
        The store to create, a local directory.
    orientation
        ``"cells_x_features"`` when rows are cells, ``"features_x_cells"``
        when rows are features.
    sep
        The field delimiter; by default a tab for ``.tsv`` and ``.txt``
        files and a comma otherwise.
    index_col
        The position of the column of row ids.
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
        If the file is missing, a field is not a finite number, a row has
        more fields than the header, or cell ids repeat.
    StoreAccessError
        If a table at a URL cannot be read.
    ValueError
        If ``orientation`` is neither of the two.
    %(store_raises)s

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from cytearc import DataStore, import_csv
    >>> with tempfile.TemporaryDirectory() as d:
    ...     table = pathlib.Path(d) / "counts.tsv"
    ...     _ = table.write_text("gene\tAAAC-1\tAAAG-1\nCD3E\t3\t0\nMS4A1\t0\t7\n")
    ...     result = import_csv(table, f"{d}/ds.zarr", orientation="features_x_cells",
    ...                         cluster="threads", show_progress=False)
    ...     DataStore(result.path).RNA.counts.compute().tolist()
    [[3, 0], [0, 7]]
    """
    return CSVtoZarr(
        source,
        destination,
        orientation=orientation,
        sep=sep,
        index_col=index_col,
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
