"""CyteArc: single-cell datasets in Zarr v3 stores, analysed out of core on Dask.

Import a dataset (:func:`~cytearc.io.converters.SparseToZarr` and the file
importers), open it with :class:`DataStore`, and run the same code on a laptop
or a cluster: every large array is a lazy Dask array whose blocks are the
store's shards, and ``mem_budget`` sizes the engine.
"""

from cytearc import errors
from cytearc.datastore import DataStore
from cytearc.errors import (
    ArtifactError,
    AssayNotFoundError,
    AssayTypeError,
    AtomicClaimUnsupportedError,
    ColumnNotFoundError,
    CountCastError,
    CyteArcError,
    DestinationExistsError,
    EngineConfigError,
    FeatureNotFoundError,
    ImportOptionError,
    IncompleteArtifactError,
    LabelClaimBlockedError,
    LabelClaimError,
    LabelTakenError,
    LayoutError,
    MemBudgetError,
    MissingArtifactError,
    NonFiniteArtifactError,
    NonFiniteCountsError,
    OperationArgumentError,
    PipelineRecordError,
    PlotInputError,
    ReadOnlyStoreError,
    RecipeError,
    ReservedColumnError,
    RunNotFoundError,
    ShardAlignmentError,
    SourceFormatError,
    StaleSelectionError,
    StoreFormatError,
    StoreNotFoundError,
    UnmeasuredCellsError,
)
from cytearc.io import (
    SparseToZarr,
    import_10x_h5,
    import_10x_mtx,
    import_csv,
    import_data,
    import_h5ad,
)
from cytepool._versions import package_version

__version__ = package_version("cytearc")

__all__ = [
    "ArtifactError",
    "AssayNotFoundError",
    "AssayTypeError",
    "AtomicClaimUnsupportedError",
    "ColumnNotFoundError",
    "CountCastError",
    "CyteArcError",
    "DataStore",
    "DestinationExistsError",
    "EngineConfigError",
    "FeatureNotFoundError",
    "ImportOptionError",
    "IncompleteArtifactError",
    "LabelClaimBlockedError",
    "LabelClaimError",
    "LabelTakenError",
    "LayoutError",
    "MemBudgetError",
    "MissingArtifactError",
    "NonFiniteArtifactError",
    "NonFiniteCountsError",
    "OperationArgumentError",
    "PipelineRecordError",
    "PlotInputError",
    "ReadOnlyStoreError",
    "RecipeError",
    "ReservedColumnError",
    "RunNotFoundError",
    "ShardAlignmentError",
    "SourceFormatError",
    "SparseToZarr",
    "StaleSelectionError",
    "StoreFormatError",
    "StoreNotFoundError",
    "UnmeasuredCellsError",
    "__version__",
    "errors",
    "import_10x_h5",
    "import_10x_mtx",
    "import_csv",
    "import_data",
    "import_h5ad",
]
