"""MuData files (``.h5mu``): the modalities of one set of cells, imported as one assay each.

The layout read is the one ``mudata.write_h5mu`` writes (mudata 0.2 and
later); files of muon and of older mudata lack ``/obsmap`` and are read by
the names of the cells, as mudata reads them:

- ``/mod/<name>``: one AnnData group per modality, with ``X`` (or
  ``layers/<layer>``), ``obs`` and ``var``, read by
  :class:`~cytearc.io.h5ad.H5adSource` at that group. The modalities are in
  the order of the ``mod-order`` attribute of ``/mod`` when every name it
  lists is a modality (then the listed ones only), else in HDF5's order of
  the names, as ``mudata.read_h5mu`` orders them.
- ``/obs``: the global cells, an AnnData dataframe: its index names the
  cells, its columns are the dataset's cell metadata (columns that mudata
  pulled from a modality are named ``<mod>:<column>``).
- ``/obsmap/<name>``: for each global cell, its 1-based row in the modality,
  0 when the modality lacks it (unsigned integers, one per global cell).
- ``/obsm/<name>``: whether the modality holds each global cell (booleans,
  ``n`` or ``n x 1``).
- ``/var``, ``/varm/<name>``, ``/varmap/<name>``: the global features, the
  modalities' own concatenated; not read, each modality's ``var`` is.
- The root attribute ``axis``: 0 (or absent) when the modalities share cells
  and not features, the one layout imported.

Each cell of a modality is matched to the global cell of its name, as
mudata matches them when it reads a file; ``/obsmap/<name>`` and
``/obsm/<name>``, where present, must agree with that match, and every cell
of a modality must be a global cell, or the file is refused as inconsistent.

:class:`H5muSource` presents the modalities as one cells x features matrix:
the global cells in ``/obs`` order, then each modality's features in
modality order, with ``feature_types`` the modality's assay
(:func:`assay_for_modality`), so the importer makes an assay of each
modality. A band of cells reads the rows of those cells in every modality;
a cell that a modality lacks has a zero row there and the cell column
``<assay>_I`` (declared in :attr:`H5muSource.membership`) marks it False,
so the store records the assay's membership.

The counts are read with h5py, band by band, not through mudata:
``mudata.read_h5mu`` loads every matrix into memory, and its backed mode
backs only ``X`` (not layers) and reads by AnnData's row selection, without
a band reader; CyteArc's engine never loads a whole count matrix. The
AnnData decoding is :mod:`cytearc.io.h5ad`'s, so an ``.h5ad`` file and a
modality of an ``.h5mu`` file read alike. mudata itself is the reference
the tests compare with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import h5py
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cytearc._warnings import warn_user
from cytearc.assays.types import assay_for_feature_type, parse_assay_types
from cytearc.errors import SourceFormatError
from cytearc.io.bands import (
    DEFAULT_BAND_ROWS,
    band_dtype,
    validate_band,
    validate_band_rows,
)
from cytearc.io.converters import ToZarr
from cytearc.io.damage import open_hdf5, read_dataset
from cytearc.io.h5ad import H5adSource, read_cell_table
from cytearc.io.importer import DEFAULT_COMPRESSION, STORE_OPTIONS_DOC, document_store_options
from cytearc.io.sources import FileSource, canonical_csr, source_location
from cytearc.storage.destinations import validate_destination

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping, Sequence
    from typing import TypeVar

    from distributed import Client

    from cytearc.engine.cluster import Engine
    from cytearc.io.importer import ImportResult
    from cytearc.io.sources import RemoteFile
    from cytearc.storage.layout import CountLayout
    from cytepool.codecs import Compression
    from cytepool.locations import Location

    _Documented = TypeVar("_Documented", bound=Callable[..., Any])

__all__ = [
    "MODALITY_ASSAYS",
    "H5muSource",
    "H5muToZarr",
    "assay_for_modality",
    "import_h5mu",
]

MODALITY_ASSAYS: Final = {"rna": "RNA", "atac": "ATAC", "prot": "ADT", "adt": "ADT", "hto": "HTO"}
"""The assays of the modality names of the scverse tools (muon, mudata), by lower-case name."""
MAX_SKIPPED_ROWS: Final = 16
"""Rows of a modality that one slice reads beyond those a band needs, between two needed rows.

A band's cells are usually consecutive rows of each modality (mudata writes
modalities in the global order), so a band is one slice per modality. When
they are not, needed rows at most this far apart share a slice, and others
are read apart: a band never reads more than ``1 + MAX_SKIPPED_ROWS`` times
its rows."""


def assay_for_modality(name: str) -> str:
    """The assay of a MuData modality: :data:`MODALITY_ASSAYS`, else the name made a safe assay name.

    An assay named after a preset (RNA, ATAC, ADT, HTO) takes that type;
    another takes the generic ``Assay`` type unless ``assay_types`` names
    one (see :func:`~cytearc.assays.types.resolve_assay_type`).

    Parameters
    ----------
    name
        The modality, as ``/mod/<name>`` names it.

    Returns
    -------
    str

    Examples
    --------
    >>> assay_for_modality("rna"), assay_for_modality("prot"), assay_for_modality("spatial coords")
    ('RNA', 'ADT', 'spatial_coords')
    """
    return MODALITY_ASSAYS.get(name.lower()) or assay_for_feature_type(name)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, kw_only=True, eq=False)
class _Modality:
    """One modality read: its name and assay, its reader, and the row of each global cell in it (-1: absent)."""

    name: str
    assay: str
    source: H5adSource
    rows: np.ndarray

    def read_rows(self, start: int, stop: int, dtype: np.dtype) -> sp.csr_matrix:
        """The modality's rows of global cells ``start:stop``, empty rows for the cells it lacks."""
        positions = self.rows[start:stop]
        n_features = self.source.shape[1]
        present = np.flatnonzero(positions >= 0)
        if present.size == 0:
            return sp.csr_matrix((stop - start, n_features), dtype=dtype)
        wanted = positions[present]
        order = np.argsort(wanted, kind="stable")
        ordered = wanted[order]
        runs = np.split(ordered, np.flatnonzero(np.diff(ordered) > MAX_SKIPPED_ROWS + 1) + 1)
        pieces = []
        for run in runs:
            first, last = int(run[0]), int(run[-1]) + 1
            block = self.source.read_band(first, last)
            pieces.append(block if run.size == last - first else block[run - first])
        gathered = sp.vstack(pieces, format="csr")
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        in_order = gathered[inverse]
        lengths = np.zeros(stop - start + 1, dtype=np.int64)
        lengths[present + 1] = np.diff(in_order.indptr)
        return sp.csr_matrix(
            (in_order.data.astype(dtype, copy=False), in_order.indices, np.cumsum(lengths)),
            shape=(stop - start, n_features),
        )


class H5muSource(FileSource):
    """The modalities of a MuData file as one matrix: global cells x each modality's features.

    ``cells`` holds ``ids`` (the index of ``/obs``), the columns of
    ``/obs``, then ``<assay>_I`` for each modality that lacks some global
    cells (True where it holds the cell), declared in :attr:`membership`.
    ``features`` holds each modality's features as
    :class:`~cytearc.io.h5ad.H5adSource` reads them (``ids``, ``names``,
    then the ``var`` columns), in modality order, with ``feature_types`` the
    modality's assay. See the module docstring for the layout.

    Parameters
    ----------
    path
        The ``.h5mu`` file: a local path or an fsspec URL, read in byte
        ranges.
    modalities
        The modalities to import, in this order (by default all, in the
        file's order).
    layer
        The layer to read instead of ``X``: one name for every modality, or
        a mapping from modalities to layers (a modality it leaves out, or
        maps to None, reads ``X``).
    band_rows
        Cells per on-disk bucket of a modality stored as CSC.
    storage_options
        The options of the URL's fsspec filesystem (credentials, endpoint).
    download
        Copy a file at a URL into a temporary file first (removed on
        :meth:`close`) instead of reading it in byte ranges.

    Raises
    ------
    SourceFormatError
        If the file is not a MuData file of shared cells (``axis`` 0), a
        modality or layer asked for is missing, two modalities become one
        assay, a modality's cells are not global cells or its maps disagree
        with their names, or a modality is not a readable AnnData (as
        :class:`~cytearc.io.h5ad.H5adSource` raises).
    StoreAccessError
        If a file at a URL cannot be read.

    Examples
    --------
    >>> import tempfile, anndata as ad, mudata, numpy as np, pandas as pd
    >>> rna = ad.AnnData(np.array([[1, 0], [0, 2], [3, 0]]),
    ...                  obs=pd.DataFrame(index=["c1", "c2", "c3"]),
    ...                  var=pd.DataFrame(index=["CD3E", "MS4A1"]))
    >>> prot = ad.AnnData(np.array([[5], [7]]), obs=pd.DataFrame(index=["c3", "c1"]),
    ...                   var=pd.DataFrame(index=["CD3"]))
    >>> with tempfile.TemporaryDirectory() as d, mudata.set_options(pull_on_update=False):
    ...     mudata.MuData({"rna": rna, "prot": prot}).write_h5mu(f"{d}/x.h5mu")
    ...     with H5muSource(f"{d}/x.h5mu") as source:
    ...         band = source.read_band(0, 3).toarray().tolist()
    ...         declared, measured = source.membership, source.cells["ADT_I"].tolist()
    >>> band, declared, measured
    ([[1, 0, 7], [0, 2, 0], [3, 0, 5]], {'ADT': 'ADT_I'}, [True, False, True])
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        modalities: Sequence[str] | None = None,
        layer: str | Mapping[str, str | None] | None = None,
        band_rows: int = DEFAULT_BAND_ROWS,
        storage_options: Mapping[str, Any] | None = None,
        download: bool = False,
    ) -> None:
        validate_band_rows(band_rows)
        location = source_location(path, storage_options)
        self._path: Path | Location = Path(path) if location.is_local else location
        self._modalities: list[_Modality] = []
        self._file: h5py.File
        self._remote: RemoteFile | None
        self._file, self._remote = open_hdf5(
            self._path, remedy="give a MuData .h5mu file", download=download
        )
        try:
            self._open(modalities, layer, band_rows)
        except BaseException:
            self.close()
            raise

    def _open(
        self,
        modalities: Sequence[str] | None,
        layer: str | Mapping[str, str | None] | None,
        band_rows: int,
    ) -> None:
        self._validate_axis()
        chosen = self._choose(modalities)
        layers = self._layers(chosen, layer)
        assays = self._assays(chosen)
        obs = self._file.get("obs")
        if not isinstance(obs, h5py.Group):
            msg = f"{self._path}: obs: expected the global cells (an AnnData dataframe), found it {'missing' if obs is None else 'a dataset'}; write the file with mudata (MuData.write_h5mu)"
            raise SourceFormatError(msg)
        cells = read_cell_table(obs, where=f"{self._path}: obs")
        for name in chosen:
            self._validate_matrix(name, layers[name])
            source = H5adSource.in_open_file(
                self._file,
                path=self._path,
                group=f"/mod/{name}",
                layer=layers[name],
                band_rows=band_rows,
            )
            try:
                rows = self._rows(name, source.cells["ids"].to_numpy(), cells["ids"].to_numpy())
            except BaseException:
                source.close()
                raise
            self._modalities.append(
                _Modality(name=name, assay=assays[name], source=source, rows=rows)
            )
        self._cells, self.membership = self._with_membership(cells)
        self._features = pd.concat(
            [m.source.features.assign(feature_types=m.assay) for m in self._modalities],
            ignore_index=True,
        )
        self._dtype: np.dtype = np.result_type(*(m.source.dtype for m in self._modalities))
        self._band_dtype = band_dtype(self._dtype)

    def _validate_axis(self) -> None:
        axis = self._file.attrs.get("axis", 0)
        if not isinstance(axis, int | np.integer) or axis != 0:
            msg = f"{self._path}: the attribute 'axis' of the root is {np.asarray(axis).tolist()!r}: the modalities share features (1) or both axes (-1), not only cells (0); import each modality's AnnData on its own (mudata.read_h5mu(...)[name].write_h5ad(...), then import_h5ad)"
            raise SourceFormatError(msg)

    def _available(self) -> tuple[str, ...]:
        """The modalities in mudata's order: ``mod-order`` when every name it lists is one, else HDF5's."""
        group = self._file.get("mod")
        names = tuple(group) if isinstance(group, h5py.Group) else ()
        if not names:
            msg = f"{self._path}: mod: expected a group of modalities (/mod/<name>), found {'none' if group is None else 'no modality'}; give a MuData .h5mu file, or import an AnnData .h5ad file with import_h5ad"
            raise SourceFormatError(msg)
        assert isinstance(group, h5py.Group)
        order = group.attrs.get("mod-order")
        if order is not None:
            listed = tuple(_text(name) for name in np.atleast_1d(np.asarray(order)).tolist())
            if listed and all(name in group for name in listed):
                names = listed
        return names

    def _choose(self, modalities: Sequence[str] | None) -> tuple[str, ...]:
        available = self._available()
        if modalities is None:
            return available
        chosen = (modalities,) if isinstance(modalities, str) else tuple(modalities)
        missing = [name for name in chosen if name not in available]
        if missing or not chosen or len(set(chosen)) != len(chosen):
            found = (
                f"no modality {missing[0]!r} (mod/{missing[0]})"
                if missing
                else f"modalities={list(chosen)}"
            )
            msg = f"{self._path}: {found}; the file holds the modalities {list(available)}: pass modalities= a list of distinct ones of them, or None for all"
            raise SourceFormatError(msg)
        return chosen

    def _layers(
        self, chosen: tuple[str, ...], layer: str | Mapping[str, str | None] | None
    ) -> dict[str, str | None]:
        if layer is None or isinstance(layer, str):
            return dict.fromkeys(chosen, layer)
        unknown = [name for name in layer if name not in chosen]
        if unknown:
            msg = f"{self._path}: layer= names the modality {unknown[0]!r}, which the import does not read; it reads the modalities {list(chosen)}: name layers of those only"
            raise SourceFormatError(msg)
        return {name: layer.get(name) for name in chosen}

    def _validate_matrix(self, name: str, layer: str | None) -> None:
        """Refuse a modality without the matrix asked for, naming its layers and the option to pass."""
        group = self._file.get(f"mod/{name}")
        if not isinstance(group, h5py.Group):
            msg = f"{self._path}: mod/{name}: expected the AnnData group of modality {name!r}, found a dataset; write the file again with mudata"
            raise SourceFormatError(msg)
        stored = group.get("layers")
        layers = sorted(stored) if isinstance(stored, h5py.Group) else []
        if layer is None and "X" not in group:
            msg = f"{self._path}: mod/{name}/X is missing; modality {name!r} has the layers {layers}: read one with layer={{{name!r}: ...}}"
            raise SourceFormatError(msg)
        if layer is not None and layer not in layers:
            msg = f"{self._path}: mod/{name}/layers/{layer} is missing; modality {name!r} has the layers {layers}: read one of them with layer={{{name!r}: ...}}, or X with layer={{{name!r}: None}}"
            raise SourceFormatError(msg)

    def _assays(self, chosen: tuple[str, ...]) -> dict[str, str]:
        assays = {name: assay_for_modality(name) for name in chosen}
        by_assay: dict[str, list[str]] = {}
        for name, assay in assays.items():
            by_assay.setdefault(assay, []).append(name)
        for assay, names in by_assay.items():
            if len(names) > 1:
                msg = f"{self._path}: the modalities {names} would all become assay {assay}; import one of them with modalities= (and the others into another store)"
                raise SourceFormatError(msg)
        return assays

    def _rows(self, name: str, ids: np.ndarray, global_ids: np.ndarray) -> np.ndarray:
        """The row of each global cell in modality ``name`` (-1 where it lacks the cell), by name."""
        where = f"{self._path}: mod/{name}/obs"
        in_global = pd.Index(global_ids).get_indexer(ids)
        outside = np.flatnonzero(in_global < 0)
        if outside.size:
            msg = f"{where}: {outside.size} of the modality's {ids.size} cells are not global cells (in obs), the first {ids[outside[0]]!r}; the file is inconsistent: rebuild it with mudata (MuData(mdata.mod).write_h5mu(...))"
            raise SourceFormatError(msg)
        rows = np.full(global_ids.size, -1, dtype=np.int64)
        rows[in_global] = np.arange(ids.size)
        self._validate_maps(name, rows)
        return rows

    def _validate_maps(self, name: str, rows: np.ndarray) -> None:
        """Refuse ``obsmap/<name>`` or a boolean ``obsm/<name>`` that disagrees with the match by names."""
        for key, expected in ((f"obsmap/{name}", rows + 1), (f"obsm/{name}", rows >= 0)):
            node = self._file.get(key)
            if not isinstance(node, h5py.Dataset):
                continue
            if key.startswith("obsm/") and node.dtype != bool:
                continue
            stored = read_dataset(node)
            if stored.shape in {(rows.size,), (rows.size, 1)} and stored.dtype.kind in "biu":
                differ = np.flatnonzero(stored.reshape(-1) != expected)
                if differ.size == 0:
                    continue
                found = f"{stored.reshape(-1)[differ[0]]} for global cell {differ[0]}, where the names give {expected[differ[0]]}"
            else:
                found = f"{stored.dtype} values of shape {stored.shape}"
            what = (
                "the 1-based row of each global cell in the modality (0 where it lacks the cell)"
                if key.startswith("obsmap/")
                else "whether the modality holds each global cell"
            )
            msg = f"{self._path}: {key}: expected {what}, {rows.size} values that agree with the cells' names; found {found}; the file is inconsistent: rebuild it with mudata (MuData(mdata.mod).write_h5mu(...))"
            raise SourceFormatError(msg)

    def _with_membership(self, cells: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
        """The cell table with ``<assay>_I`` of each modality lacking cells, and the declaration of those columns."""
        membership = {}
        for modality in self._modalities:
            column = f"{modality.assay}_I"
            if column in cells.columns:
                warn_user(
                    f"{self._path}: obs column {column!r} is left out: the name is reserved for the "
                    f"membership of assay {modality.assay}, which the cells of modality "
                    f"{modality.name!r} give (rename the column to keep it)"
                )
                cells = cells.drop(columns=[column])
            measured = modality.rows >= 0
            if not measured.all():
                cells[column] = measured
                membership[modality.assay] = column
        return cells, membership

    @property
    def modalities(self) -> tuple[str, ...]:
        """The modalities read, in feature order."""
        return tuple(m.name for m in self._modalities)

    @property
    def assays(self) -> dict[str, str]:
        """The assay of each modality read (:func:`assay_for_modality`)."""
        return {m.name: m.assay for m in self._modalities}

    def read_band(self, start: int, stop: int) -> sp.csr_matrix:
        """Global cells ``start:stop``: their rows of every modality, side by side.

        Parameters
        ----------
        start, stop
            The band of cells, ``0 <= start <= stop <= n_cells``.

        Returns
        -------
        scipy.sparse.csr_matrix
            The band, cells x features, canonical (see
            :mod:`cytearc.io.sources`), in the dtype of every modality's
            values (int64 when all are integers); a cell's row of a modality
            that lacks it is empty.

        Raises
        ------
        IndexError
            If the band is outside the cells.
        ValueError
            If the source is closed.
        SourceFormatError, RepeatedEntryError, DamagedSourceError
            As :meth:`H5adSource.read_band <cytearc.io.h5ad.H5adSource.read_band>`
            raises them for a modality.
        """
        validate_band(start, stop, self.shape[0], self.location)
        if not self._file.id.valid:
            msg = f"{self.location}: the source is closed"
            raise ValueError(msg)
        blocks = [m.read_rows(start, stop, self._band_dtype) for m in self._modalities]
        return canonical_csr(sp.hstack(blocks, format="csr", dtype=self._band_dtype))

    def close(self) -> None:
        """Close the modalities' readers, then the file (and the remote file, or remove its downloaded copy)."""
        for modality in self._modalities:
            modality.source.close()
        self._file.close()
        if self._remote is not None:
            self._remote.close()


_SPLIT_KEY_DOC: Final = STORE_OPTIONS_DOC[: STORE_OPTIONS_DOC.index("    assay_types\n")]


def _document_h5mu_options(documented: _Documented) -> _Documented:
    """:func:`~cytearc.io.importer.document_store_options`, without ``assay_split_key``: modalities are the assays."""
    documented = document_store_options(documented)
    if documented.__doc__ is not None:
        documented.__doc__ = documented.__doc__.replace(_SPLIT_KEY_DOC, "")
    return documented


@_document_h5mu_options
class H5muToZarr(ToZarr):
    """Import a MuData file's modalities, one assay each, with the global cells.

    Modality ``rna`` becomes assay RNA (with ``countsT``), ``atac`` ATAC,
    ``prot`` and ``adt`` ADT, ``hto`` HTO, and another modality an assay of
    its name (:func:`~cytearc.io.h5mu.assay_for_modality`). The store's cells
    are the file's global cells (``/obs``); an assay whose modality lacks
    some of them has zero rows there and the membership column
    ``<assay>_I``. See :class:`~cytearc.io.h5mu.H5muSource`.

    Parameters
    ----------
    path
        The ``.h5mu`` file: a local path or an fsspec URL, read in byte ranges.
    zarr_loc
        The store to create: a local directory or an fsspec URL.
    modalities
        The modalities to import, in this order (default: all, in the
        file's order).
    layer
        The layer to import instead of ``X``: one name for every modality
        (``"counts"``), or a mapping from modalities to layers
        (``{"rna": "counts"}``; the others read ``X``).
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
        If the file is not a MuData file of shared cells, a modality or
        layer asked for is missing, two modalities become one assay, or the
        modalities' cells and maps disagree (see
        :class:`~cytearc.io.h5mu.H5muSource`).
    AssayTypeError
        If ``assay_types`` names an assay that the import does not write, or
        a type that is not a preset.
    StoreAccessError
        If a file at a URL cannot be read.

    Examples
    --------
    See :func:`import_h5mu`, which runs ``H5muToZarr(...).dump()``.
    """

    format_name: ClassVar[str] = "MuData file"

    def __init__(
        self,
        path: str | os.PathLike[str],
        zarr_loc: str | Path,
        *,
        modalities: Sequence[str] | None = None,
        layer: str | Mapping[str, str | None] | None = None,
        source_storage_options: Mapping[str, Any] | None = None,
        download: bool = False,
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
        source = H5muSource(
            path,
            modalities=modalities,
            layer=layer,
            storage_options=source_storage_options,
            download=download,
        )
        try:
            parse_assay_types(
                assay_types, set(source.assays.values()), where=f"{source.location}: assay_types"
            )
        except BaseException:
            source.close()
            raise
        super().__init__(
            source,
            zarr_loc,
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


@_document_h5mu_options
def import_h5mu(
    source: str | os.PathLike[str],
    destination: str | Path,
    *,
    modalities: Sequence[str] | None = None,
    layer: str | Mapping[str, str | None] | None = None,
    source_storage_options: Mapping[str, Any] | None = None,
    download: bool = False,
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
    """Import a MuData file into a new store: ``H5muToZarr(source, destination, ...).dump()``.

    Each modality becomes an assay (``rna`` RNA, ``atac`` ATAC, ``prot`` and
    ``adt`` ADT, ``hto`` HTO, another one an assay of its name); the cells
    are the file's global cells, and an assay whose modality lacks some of
    them records its membership in ``<assay>_I``.

    Parameters
    ----------
    source
        The ``.h5mu`` file: a local path or an fsspec URL, read in byte ranges.
    destination
        The store to create, a local directory.
    modalities
        The modalities to import, in this order (default: all, in the
        file's order).
    layer
        The layer to import instead of ``X``: one name for every modality
        (``"counts"``), or a mapping from modalities to layers
        (``{"rna": "counts"}``; the others read ``X``).
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
        If the file is not a MuData file of shared cells, a modality or
        layer asked for is missing, two modalities become one assay, or the
        modalities' cells and maps disagree.
    StoreAccessError
        If a file at a URL cannot be read.
    %(store_raises)s

    Examples
    --------
    RNA of three cells and a protein panel of two of them, written with mudata:

    >>> import tempfile, anndata as ad, mudata, numpy as np, pandas as pd
    >>> from cytearc import DataStore
    >>> rna = ad.AnnData(np.array([[1, 0], [0, 2], [3, 0]]),
    ...                  obs=pd.DataFrame(index=["c1", "c2", "c3"]),
    ...                  var=pd.DataFrame(index=["CD3E", "MS4A1"]))
    >>> prot = ad.AnnData(np.array([[5], [7]]), obs=pd.DataFrame(index=["c1", "c3"]),
    ...                   var=pd.DataFrame(index=["CD3"]))
    >>> with tempfile.TemporaryDirectory() as d, mudata.set_options(pull_on_update=False):
    ...     mudata.MuData({"rna": rna, "prot": prot}).write_h5mu(f"{d}/x.h5mu")
    ...     result = import_h5mu(f"{d}/x.h5mu", f"{d}/ds.zarr",
    ...                          cluster="threads", show_progress=False)
    ...     ds = DataStore(result.path)
    ...     result.assays, ds.ADT.counts.compute().tolist(), ds.cells.fetch_all("ADT_I").tolist()
    ({'RNA': 'RNA', 'ADT': 'ADT'}, [[5], [0], [7]], [True, False, True])
    """
    return H5muToZarr(
        source,
        destination,
        modalities=modalities,
        layer=layer,
        source_storage_options=source_storage_options,
        download=download,
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
