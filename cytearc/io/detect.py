"""``import_data``: detect a source's format and import it with the matching importer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cytearc.errors import SourceFormatError
from cytearc.io.converters import ToZarr

if TYPE_CHECKING:
    from cytearc.io.csv import Orientation
    from cytearc.io.importer import ImportResult
    from cytearc.io.sources import CountSource

__all__ = ["CSVtoZarr", "CrToZarr", "H5adToZarr", "MtxToZarr", "detect_source", "import_data"]

_SOURCE_OPTIONS = {"genome", "layer", "orientation", "sep", "index_col"}


class CrToZarr(ToZarr):
    """Import a Cell Ranger HDF5 file (v2 or v3); ``genome=`` chooses among v2 genomes."""

    def __init__(
        self, path: str | Path, zarr_loc: str | Path, *, genome: str | None = None, **options: Any
    ) -> None:
        from cytearc.io.tenx import TenxH5Source  # noqa: PLC0415

        super().__init__(TenxH5Source(path, genome=genome), zarr_loc, **options)


class MtxToZarr(ToZarr):
    """Import a 10x Matrix Market directory (v2 ``genes.tsv`` or v3 ``features.tsv.gz``)."""

    def __init__(self, path: str | Path, zarr_loc: str | Path, **options: Any) -> None:
        from cytearc.io.tenx import TenxMtxSource  # noqa: PLC0415

        super().__init__(TenxMtxSource(path), zarr_loc, **options)


class H5adToZarr(ToZarr):
    """Import an H5AD file's ``X`` or a named ``layer``; ``assay_split_key`` splits assays."""

    def __init__(
        self, path: str | Path, zarr_loc: str | Path, *, layer: str | None = None, **options: Any
    ) -> None:
        from cytearc.io.h5ad import H5adSource  # noqa: PLC0415

        super().__init__(H5adSource(path, layer=layer), zarr_loc, **options)


class CSVtoZarr(ToZarr):
    """Import a dense CSV table, cells x features or features x cells (``orientation=``)."""

    def __init__(
        self,
        path: str | Path,
        zarr_loc: str | Path,
        *,
        orientation: Orientation = "cells_x_features",
        sep: str = ",",
        index_col: int = 0,
        **options: Any,
    ) -> None:
        from cytearc.io.csv import CsvSource  # noqa: PLC0415

        source = CsvSource(path, orientation=orientation, sep=sep, index_col=index_col)
        super().__init__(source, zarr_loc, **options)


def detect_source(source: str | Path, **options: Any) -> CountSource:
    """Open ``source`` with the reader its name and contents call for."""
    path = Path(source)
    if path.is_dir():
        names = {p.name for p in path.iterdir()}
        if names & {"matrix.mtx", "matrix.mtx.gz"}:
            from cytearc.io.tenx import TenxMtxSource  # noqa: PLC0415

            return TenxMtxSource(path)
        msg = f"{path}: a directory without matrix.mtx(.gz); expected a 10x Matrix Market folder"
        raise SourceFormatError(msg)
    name = path.name.lower()
    if name.endswith(".h5ad"):
        from cytearc.io.h5ad import H5adSource  # noqa: PLC0415

        return H5adSource(path, layer=options.get("layer"))
    if name.endswith((".h5", ".hdf5")):
        from cytearc.io.tenx import TenxH5Source  # noqa: PLC0415

        return TenxH5Source(path, genome=options.get("genome"))
    if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz")):
        from cytearc.io.csv import CsvSource  # noqa: PLC0415

        sep = options.get("sep") or ("\t" if ".tsv" in name or ".txt" in name else ",")
        return CsvSource(
            path,
            orientation=options.get("orientation", "cells_x_features"),
            sep=sep,
            index_col=options.get("index_col", 0),
        )
    if not path.exists():
        msg = f"{path}: no such file or directory"
        raise SourceFormatError(msg)
    msg = f"{path}: unknown format; expected a 10x .h5, a Matrix Market folder, .h5ad or .csv/.tsv"
    raise SourceFormatError(msg)


def import_data(source: str | Path, destination: str | Path, **options: Any) -> ImportResult:
    """Import ``source`` (any supported format, detected) into a new store at ``destination``.

    Reader options (``genome``, ``layer``, ``orientation``, ``sep``) go to the
    reader; the rest to :func:`~cytearc.io.importer.write_store`.
    """
    reader_options = {k: options.pop(k) for k in list(options) if k in _SOURCE_OPTIONS}
    return ToZarr(detect_source(source, **reader_options), destination, **options).dump()
