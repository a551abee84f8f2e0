"""``import_data``: detect a source's format and import it with that format's importer.

A folder holding ``matrix.mtx`` (or ``matrix.mtx.gz``) is a 10x Matrix
Market folder (:class:`~cytearc.io.converters.MtxToZarr`); otherwise the
name decides: ``.h5ad`` is H5AD (:class:`~cytearc.io.converters.H5adToZarr`),
``.h5mu`` is MuData (:class:`~cytearc.io.h5mu.H5muToZarr`), ``.loom`` is loom
(:class:`~cytearc.io.loom.LoomToZarr`), ``.rds`` a Seurat object
(:class:`~cytearc.io.seurat.SeuratToZarr`), ``.h5`` and ``.hdf5`` are Cell Ranger HDF5
(:class:`~cytearc.io.converters.CrToZarr`), and ``.csv``, ``.tsv`` and
``.txt``, optionally gzipped, are dense tables
(:class:`~cytearc.io.converters.CSVtoZarr`). The options of
:func:`import_data` are the keyword-only parameters of that importer; one it
does not take is refused before the source is read.

A source at an fsspec URL (``s3://bucket/pbmc.h5``) is detected the same
way: by the suffix of the URL, or, for a URL without one, as a Matrix
Market folder when ``matrix.mtx`` or ``matrix.mtx.gz`` is below it.
"""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cytearc.errors import ImportOptionError, SourceFormatError
from cytearc.io.converters import CrToZarr, CSVtoZarr, H5adToZarr, MtxToZarr
from cytearc.io.h5mu import H5muToZarr
from cytearc.io.loom import LoomToZarr
from cytearc.io.seurat import SeuratToZarr
from cytearc.io.sources import remote_file_exists, source_location
from cytepool.locations import is_url

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping
    from typing import TypeAlias

    from cytearc.io.importer import ImportResult
    from cytepool.locations import Location

    FileImporter: TypeAlias = (
        type[CrToZarr]
        | type[MtxToZarr]
        | type[H5adToZarr]
        | type[H5muToZarr]
        | type[LoomToZarr]
        | type[SeuratToZarr]
        | type[CSVtoZarr]
    )

__all__ = [
    "CSVtoZarr",
    "CrToZarr",
    "H5adToZarr",
    "MtxToZarr",
    "detect_importer",
    "import_data",
    "importer_options",
]

_TABLE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz")
_BY_SUFFIX: tuple[tuple[tuple[str, ...], FileImporter], ...] = (
    ((".h5ad",), H5adToZarr),
    ((".h5mu",), H5muToZarr),
    ((".loom",), LoomToZarr),
    ((".rds",), SeuratToZarr),
    ((".h5", ".hdf5"), CrToZarr),
    (_TABLE_SUFFIXES, CSVtoZarr),
)
"""The importer of each file name suffix (lower case)."""
_IMPORTERS: tuple[FileImporter, ...] = (
    CrToZarr,
    MtxToZarr,
    H5adToZarr,
    H5muToZarr,
    LoomToZarr,
    SeuratToZarr,
    CSVtoZarr,
)


def detect_importer(
    source: str | os.PathLike[str], *, source_storage_options: Mapping[str, Any] | None = None
) -> FileImporter:
    """The importer class of ``source``'s format, from its name (and, for a folder, its files).

    Parameters
    ----------
    source
        A 10x Matrix Market folder, or a ``.h5``/``.hdf5``, ``.h5ad``,
        ``.h5mu``, ``.loom``, ``.rds`` or ``.csv``/``.tsv``/``.txt``
        (optionally ``.gz``) file: a local path or an fsspec URL.
    source_storage_options
        The options of the URL's fsspec filesystem; only a URL without a
        known suffix is looked up (for ``matrix.mtx``).

    Returns
    -------
    type
        :class:`~cytearc.io.converters.MtxToZarr`,
        :class:`~cytearc.io.converters.CrToZarr`,
        :class:`~cytearc.io.converters.H5adToZarr`,
        :class:`~cytearc.io.h5mu.H5muToZarr`,
        :class:`~cytearc.io.loom.LoomToZarr`,
        :class:`~cytearc.io.seurat.SeuratToZarr` or
        :class:`~cytearc.io.converters.CSVtoZarr`.

    Raises
    ------
    SourceFormatError
        If ``source`` is a folder without ``matrix.mtx``, does not exist, or
        has a name of no supported format.
    StoreAccessError
        If a URL without a known suffix cannot be looked up.

    Examples
    --------
    >>> detect_importer("pbmc.h5ad").__name__, detect_importer("counts.tsv.gz").__name__
    ('H5adToZarr', 'CSVtoZarr')
    >>> detect_importer("multiome.h5mu").__name__
    'H5muToZarr'
    >>> detect_importer("s3://bucket/pbmc/filtered_feature_bc_matrix.h5").__name__
    'CrToZarr'
    """
    if is_url(source):
        return _detect_url(source_location(source, source_storage_options))
    path = Path(source)
    if path.is_dir():
        if any((path / name).is_file() for name in ("matrix.mtx", "matrix.mtx.gz")):
            return MtxToZarr
        msg = f"{path}: a folder without matrix.mtx(.gz); expected a 10x Matrix Market folder"
        raise SourceFormatError(msg)
    name = path.name.lower()
    importer = _by_name(name)
    if importer is not None:
        return importer
    if not path.exists():
        msg = f"{path}: no such file or folder"
        raise SourceFormatError(msg)
    msg = f"{path}: unknown format; expected a 10x .h5, a 10x Matrix Market folder, .h5ad, .h5mu, .loom, a Seurat .rds, or .csv/.tsv/.txt"
    raise SourceFormatError(msg)


def _by_name(name: str) -> FileImporter | None:
    """The importer a file's lower-case name implies, or None."""
    return next((importer for suffixes, importer in _BY_SUFFIX if name.endswith(suffixes)), None)


def _detect_url(location: Location) -> FileImporter:
    """The importer of a URL: by its suffix, else a Matrix Market folder if ``matrix.mtx[.gz]`` is below it."""
    importer = _by_name(location.name.lower())
    if importer is not None:
        return importer
    if any(remote_file_exists(location.child(name)) for name in ("matrix.mtx", "matrix.mtx.gz")):
        return MtxToZarr
    if not location.exists():
        msg = f"{location}: no such file or folder"
        raise SourceFormatError(msg)
    msg = f"{location}: unknown format, and no matrix.mtx(.gz) below it; expected a 10x .h5, a 10x Matrix Market folder, .h5ad, .h5mu, .loom, a Seurat .rds, or .csv/.tsv/.txt"
    raise SourceFormatError(msg)


def importer_options(importer: FileImporter) -> tuple[str, ...]:
    """The options ``importer`` takes: its keyword-only parameters, in order.

    Parameters
    ----------
    importer
        An importer class such as :class:`~cytearc.io.converters.CrToZarr`.

    Returns
    -------
    tuple of str
        The names of its reader's options, then those of
        :func:`~cytearc.io.importer.write_store`.

    Examples
    --------
    >>> importer_options(CrToZarr)[:4]
    ('genome', 'source_storage_options', 'download', 'assay_split_key')
    """
    parameters = inspect.signature(importer).parameters.values()
    return tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


def _validate_options(
    source: str | os.PathLike[str], importer: FileImporter, options: dict[str, Any]
) -> None:
    accepted = importer_options(importer)
    unknown = [name for name in options if name not in accepted]
    if not unknown:
        return
    hints = []
    for name in unknown:
        owners = [other.__name__ for other in _IMPORTERS if name in importer_options(other)]
        close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.75)
        if owners:
            verb = "takes" if len(owners) == 1 else "take"
            listed = " and ".join([", ".join(owners[:-1]), owners[-1]] if owners[:-1] else owners)
            hints.append(f"{name!r} ({listed} {verb} it)")
        elif close:
            hints.append(f"{name!r} (did you mean {close[0]!r}?)")
        else:
            hints.append(repr(name))
    noun = "option" if len(unknown) == 1 else "options"
    msg = (
        f"{source}: detected as a {importer.format_name}, whose importer {importer.__name__} "
        f"takes no {noun} {', '.join(hints)}; it takes {', '.join(accepted)}. Remove or correct the {noun}"
    )
    raise ImportOptionError(msg)


def import_data(
    source: str | os.PathLike[str], destination: str | Path, **options: Any
) -> ImportResult:
    r"""Import ``source``, in any supported format (detected), into a new store at ``destination``.

    ``detect_importer(source)(source, destination, **options).dump()``, after
    checking that the importer takes every option. To have the options
    type-checked, call the format's function instead:
    :func:`~cytearc.io.converters.import_10x_h5`,
    :func:`~cytearc.io.converters.import_10x_mtx`,
    :func:`~cytearc.io.converters.import_h5ad`,
    :func:`~cytearc.io.h5mu.import_h5mu` or
    :func:`~cytearc.io.converters.import_csv`.

    Parameters
    ----------
    source
        A 10x Matrix Market folder, or a ``.h5``/``.hdf5``, ``.h5ad``,
        ``.h5mu`` or ``.csv``/``.tsv``/``.txt`` (optionally ``.gz``) file
        (and the others of :func:`detect_importer`): a local path,
        or an fsspec URL (``s3://``, ``gs://``, ``http(s)://``) read in byte
        ranges or streamed, never downloaded whole (unless ``download=True``,
        for HDF5 files).
    destination
        The store to create, a local directory.
    **options
        The keyword-only options of the format's importer
        (:func:`importer_options`): its reader's (``genome`` for 10x HDF5;
        ``layer`` for H5AD; ``modalities`` and ``layer`` for MuData;
        ``orientation``, ``sep`` and ``index_col`` for
        tables; ``source_storage_options``, the options of a source URL's
        fsspec filesystem such as credentials and ``endpoint_url``, never
        recorded nor shown in messages, for every format; ``download`` for
        HDF5 files) and those of :func:`~cytearc.io.importer.write_store`.

    Returns
    -------
    ImportResult
        The new store's path, assays, shapes, dtypes and dataset fingerprint.

    Raises
    ------
    ImportOptionError
        If the format's importer does not take an option; nothing is read
        or written. It is also a :class:`TypeError`.
    SourceFormatError
        If the format is unknown, or the source is missing or not what its
        name says.
    StoreAccessError
        If a source at a URL cannot be read (the endpoint is unreachable or
        refuses the credentials).
    DestinationExistsError, NonFiniteCountsError, MemBudgetError, AssayTypeError, CyteArcError
        As :func:`~cytearc.io.importer.write_store` raises them.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from cytearc import import_data
    >>> with tempfile.TemporaryDirectory() as d:
    ...     table = pathlib.Path(d) / "counts.csv"
    ...     _ = table.write_text("cell,CD3E,MS4A1\nAAAC-1,3,0\nAAAG-1,0,7\n")
    ...     import_data(table, f"{d}/ds.zarr", cluster="threads", show_progress=False).shapes
    {'RNA': (2, 2)}
    >>> import_data("pbmc.h5", "pbmc.zarr", layer="counts")
    Traceback (most recent call last):
      ...
    cytearc.errors.ImportOptionError: pbmc.h5: detected as a 10x HDF5 matrix, whose importer CrToZarr takes no option 'layer' (H5adToZarr, H5muToZarr and LoomToZarr take it); it takes genome, ...
    """
    importer = detect_importer(source, source_storage_options=options.get("source_storage_options"))
    _validate_options(source, importer, options)
    return importer(source, destination, **options).dump()
