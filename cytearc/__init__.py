"""CyteArc: single-cell datasets in Zarr v3 stores, analysed out of core on Dask.

Import a dataset (:func:`~cytearc.io.converters.SparseToZarr` and the file
importers), open it with :class:`DataStore`, and run the same code on a laptop
or a cluster: every large array is a lazy Dask array whose blocks are the
store's shards, and ``mem_budget`` sizes the engine.
"""

from typing import TYPE_CHECKING, Final

from cytearc import errors
from cytearc.errors import (
    ArtifactError,
    AssayNotFoundError,
    AssayTypeError,
    AtomicClaimUnsupportedError,
    ColumnNotFoundError,
    CompositeFormatError,
    CountCastError,
    CountSummariesError,
    CyteArcError,
    DamagedArtifactError,
    DamagedSourceError,
    DestinationExistsError,
    DestinationOverlapError,
    EngineConfigError,
    FeatureNotFoundError,
    ImportOptionError,
    IncompleteArtifactError,
    InterruptedReplaceError,
    LabelClaimBlockedError,
    LabelClaimError,
    LabelTakenError,
    LayoutError,
    MemBudgetError,
    MergePlanError,
    MergeResumeError,
    MissingArtifactError,
    MissingDependencyError,
    MountFormatError,
    NegativeCountsError,
    NonFiniteArtifactError,
    NonFiniteCountsError,
    OperationArgumentError,
    PendingAssayError,
    PipelineRecordError,
    PlotInputError,
    ReadOnlyStoreError,
    RecipeError,
    RemoteDestinationError,
    RepeatedEntryError,
    ReservedColumnError,
    RunNotFoundError,
    ShardAlignmentError,
    SourceFormatError,
    StaleArtifactError,
    StaleSelectionError,
    StoreAccessError,
    StoreDamageError,
    StoreFormatError,
    StoreNotFoundError,
    UnmeasuredCellsError,
    WorkspaceNotFoundError,
)
from cytepool._lazy import lazy_exports
from cytepool._versions import package_version

__version__ = package_version("cytearc")

_EXPORTS: Final = {
    "DataStore": "cytearc.datastore",
    **dict.fromkeys(
        (
            "SparseToZarr",
            "import_10x_h5",
            "import_10x_mtx",
            "import_csv",
            "import_data",
            "import_h5ad",
            "import_h5mu",
            "import_loom",
            "import_seurat",
        ),
        "cytearc.io",
    ),
    "create_composite": "cytearc.tools.composite",
    "mount_datastore": "cytearc.tools.mount",
}
"""The public API that importing ``cytearc`` does not load until it is used (:func:`~cytepool._lazy.lazy_exports`)."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from cytearc.datastore import DataStore
    from cytearc.io import (
        SparseToZarr,
        import_10x_h5,
        import_10x_mtx,
        import_csv,
        import_data,
        import_h5ad,
        import_h5mu,
        import_loom,
        import_seurat,
    )
    from cytearc.tools.composite import create_composite
    from cytearc.tools.mount import mount_datastore

__all__ = [
    "ArtifactError",
    "AssayNotFoundError",
    "AssayTypeError",
    "AtomicClaimUnsupportedError",
    "ColumnNotFoundError",
    "CompositeFormatError",
    "CountCastError",
    "CountSummariesError",
    "CyteArcError",
    "DamagedArtifactError",
    "DamagedSourceError",
    "DataStore",
    "DestinationExistsError",
    "DestinationOverlapError",
    "EngineConfigError",
    "FeatureNotFoundError",
    "ImportOptionError",
    "IncompleteArtifactError",
    "InterruptedReplaceError",
    "LabelClaimBlockedError",
    "LabelClaimError",
    "LabelTakenError",
    "LayoutError",
    "MemBudgetError",
    "MergePlanError",
    "MergeResumeError",
    "MissingArtifactError",
    "MissingDependencyError",
    "MountFormatError",
    "NegativeCountsError",
    "NonFiniteArtifactError",
    "NonFiniteCountsError",
    "OperationArgumentError",
    "PendingAssayError",
    "PipelineRecordError",
    "PlotInputError",
    "ReadOnlyStoreError",
    "RecipeError",
    "RemoteDestinationError",
    "RepeatedEntryError",
    "ReservedColumnError",
    "RunNotFoundError",
    "ShardAlignmentError",
    "SourceFormatError",
    "SparseToZarr",
    "StaleArtifactError",
    "StaleSelectionError",
    "StoreAccessError",
    "StoreDamageError",
    "StoreFormatError",
    "StoreNotFoundError",
    "UnmeasuredCellsError",
    "WorkspaceNotFoundError",
    "__version__",
    "create_composite",
    "errors",
    "import_10x_h5",
    "import_10x_mtx",
    "import_csv",
    "import_data",
    "import_h5ad",
    "import_h5mu",
    "import_loom",
    "import_seurat",
    "mount_datastore",
]
