"""Importers: 10x (HDF5 and Matrix Market), H5AD, MuData, loom, Seurat, CSV and in-memory matrices.

:func:`import_data` detects the format; :func:`import_10x_h5`,
:func:`import_10x_mtx`, :func:`import_h5ad`, :func:`import_h5mu` and
:func:`import_csv` (and the others) import one format with its options
named and typed; the classes (``CrToZarr`` ...) do
the same in two steps, open then :meth:`~ToZarr.dump`.
"""

from typing import TYPE_CHECKING, Final

from cytepool._lazy import lazy_exports

if TYPE_CHECKING:
    from cytearc.io.converters import (
        CrToZarr,
        CSVtoZarr,
        H5adToZarr,
        MtxToZarr,
        SparseToZarr,
        ToZarr,
        import_10x_h5,
        import_10x_mtx,
        import_csv,
        import_h5ad,
    )
    from cytearc.io.detect import detect_importer, import_data, importer_options
    from cytearc.io.h5mu import H5muToZarr, import_h5mu
    from cytearc.io.importer import ImportResult, write_store
    from cytearc.io.loom import LoomToZarr, import_loom
    from cytearc.io.seurat import SeuratToZarr, import_seurat

__all__ = [
    "CSVtoZarr",
    "CrToZarr",
    "H5adToZarr",
    "H5muToZarr",
    "ImportResult",
    "LoomToZarr",
    "MtxToZarr",
    "SeuratToZarr",
    "SparseToZarr",
    "ToZarr",
    "detect_importer",
    "import_10x_h5",
    "import_10x_mtx",
    "import_csv",
    "import_data",
    "import_h5ad",
    "import_h5mu",
    "import_loom",
    "import_seurat",
    "importer_options",
    "write_store",
]


_EXPORTS: Final = {
    "CrToZarr": "cytearc.io.converters",
    "CSVtoZarr": "cytearc.io.converters",
    "H5adToZarr": "cytearc.io.converters",
    "MtxToZarr": "cytearc.io.converters",
    "SparseToZarr": "cytearc.io.converters",
    "ToZarr": "cytearc.io.converters",
    "import_10x_h5": "cytearc.io.converters",
    "import_10x_mtx": "cytearc.io.converters",
    "import_csv": "cytearc.io.converters",
    "import_h5ad": "cytearc.io.converters",
    "detect_importer": "cytearc.io.detect",
    "import_data": "cytearc.io.detect",
    "importer_options": "cytearc.io.detect",
    "H5muToZarr": "cytearc.io.h5mu",
    "import_h5mu": "cytearc.io.h5mu",
    "ImportResult": "cytearc.io.importer",
    "write_store": "cytearc.io.importer",
    "LoomToZarr": "cytearc.io.loom",
    "import_loom": "cytearc.io.loom",
    "SeuratToZarr": "cytearc.io.seurat",
    "import_seurat": "cytearc.io.seurat",
}
"""Imported on first use (:func:`~cytepool._lazy.lazy_exports`): a worker that runs one importer's tasks loads only its module."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
