"""Every public exception of CyteArc.

Each subclasses :class:`CyteArcError`, a :class:`ValueError`, or also the
builtin it refines (:class:`FileExistsError`, :class:`FileNotFoundError`,
:class:`PermissionError`, :class:`KeyError`, :class:`TypeError`,
:class:`OSError`), so callers
that catch the builtin keep working. Messages name the file or key, what was
expected, what was found, and the remedy;
``tests/cytearc/test_error_messages.py`` pins them.

Examples
--------
>>> import cytearc
>>> issubclass(cytearc.errors.StoreFormatError, ValueError)
True
"""

from __future__ import annotations

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
    "StaleArtifactError",
    "StaleSelectionError",
    "StoreAccessError",
    "StoreDamageError",
    "StoreFormatError",
    "StoreNotFoundError",
    "UnmeasuredCellsError",
    "WorkspaceNotFoundError",
]


class CyteArcError(ValueError):
    """Base class of CyteArc's errors."""


# --- engine ---------------------------------------------------------------


class MemBudgetError(CyteArcError):
    """A memory budget or worker count cannot be parsed or does not fit the machine."""


class EngineConfigError(CyteArcError):
    """The process's engine is already running with other settings, or a cluster is unusable."""


class ShardAlignmentError(CyteArcError):
    """A write would split a Zarr shard between tasks, which loses data silently."""


# --- stores, sources and count arrays --------------------------------------


class StoreNotFoundError(CyteArcError, FileNotFoundError):
    """There is no CyteArc store at a local path (or no ``zarr.json`` at a URL)."""


class StoreFormatError(CyteArcError):
    """A store is incomplete, of another format, or its metadata disagrees with its arrays."""


class AssayNotFoundError(CyteArcError, KeyError):
    """The store has no assay of that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class AssayTypeError(CyteArcError):
    """An assay type is not a preset, names no assay, conflicts with the recorded one, or lacks what an operation reads."""


class ColumnNotFoundError(CyteArcError, KeyError):
    """A cell or feature table (or a run's snapshot of one) has no column of that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class WorkspaceNotFoundError(CyteArcError, KeyError):
    """The store has no (complete) workspace of that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class FeatureNotFoundError(CyteArcError, KeyError):
    """An assay has no feature of that name or id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class LayoutError(CyteArcError):
    """A layout record is missing, malformed, or disagrees with the arrays."""


class SourceFormatError(CyteArcError):
    """A source file is not in the format its reader expects (named file, key, remedy)."""


class NonFiniteCountsError(CyteArcError):
    """Counts hold NaN or infinity."""


class NegativeCountsError(CyteArcError):
    """Counts hold a negative value where an operation needs non-negative counts (normalization)."""


class CountCastError(CyteArcError):
    """Counts are not numbers, or a count does not fit the storage dtype it is cast to."""


class DestinationExistsError(CyteArcError, FileExistsError):
    """The destination holds keys a writer may not replace."""


class ReadOnlyStoreError(CyteArcError, PermissionError):
    """A write was asked of a store opened read-only."""


class ReservedColumnError(CyteArcError):
    """A column name is reserved (``<assay>_I``) or protected and cannot be written or dropped."""


class UnmeasuredCellsError(CyteArcError):
    """An operation would read an assay's values for cells the assay did not measure.

    Each parameter is kept as the attribute of its name.

    Parameters
    ----------
    operation
        The refused operation.
    assay
        The assay.
    column
        The assay's membership column (``<assay>_I``).
    unmeasured
        How many selected cells the assay did not measure.
    selected
        How many cells were selected.
    remedy
        What to do instead, as code to paste.
    cell_key
        The cell column that selected the cells, when one did.
    """

    def __init__(  # noqa: PLR0917 (each attribute is named in the seed)
        self,
        operation: str,
        assay: str,
        column: str,
        unmeasured: int,
        selected: int,
        remedy: str,
        cell_key: str | None = None,
    ) -> None:
        self.operation = operation
        self.assay = assay
        self.column = column
        self.unmeasured = unmeasured
        self.selected = selected
        self.remedy = remedy
        self.cell_key = cell_key
        super().__init__(
            f"{operation}: {unmeasured} of the {selected} selected cells were not measured by assay "
            f"{assay!r} (membership column {column!r}); their zero counts are no measurement - {remedy}"
        )


class ImportOptionError(CyteArcError, TypeError):
    """An import was given an option that the detected format's importer does not take."""


class OperationArgumentError(CyteArcError):
    """An operation was given an argument of the wrong type or outside its domain; nothing was written."""


class MissingDependencyError(CyteArcError, ModuleNotFoundError):
    """An operation needs an optional package that is not installed; the message gives the install command.

    Parameters
    ----------
    message
        What is missing and how to install it.
    name
        The package's module name, as :class:`ModuleNotFoundError` carries it.
    """

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


# --- artifacts ------------------------------------------------------------


class NonFiniteArtifactError(CyteArcError):
    """An artifact array holds NaN or infinity; nothing is published.

    Attributes ``operation``, ``array`` and ``row`` name the first bad value.

    Parameters
    ----------
    operation
        The operation producing the artifact.
    array
        The payload array.
    row
        The row of the first bad value.
    value
        That value.
    """

    def __init__(self, *, operation: str, array: str, row: int, value: float) -> None:
        self.operation = operation
        self.array = array
        self.row = row
        super().__init__(
            f"{operation}: array {array!r} holds {value} at row {row}; "
            "artifact values must be finite - check the input counts and parameters"
        )


class ArtifactError(CyteArcError):
    """An artifact group or reference is malformed."""


class MissingArtifactError(ArtifactError, KeyError):
    """No artifact group at a reference's path, or no output of that name in a run."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class IncompleteArtifactError(ArtifactError):
    """An artifact was never published (``complete`` is not True): it is never read or reused."""


class DamagedArtifactError(ArtifactError):
    """A published artifact was changed after publication (its identity attributes or its ``complete`` flag): it is never read or reused."""


class StaleSelectionError(ArtifactError):
    """A stored cell or feature selection was made for other row identities."""


class StaleArtifactError(ArtifactError):
    """An artifact whose values are rebuilt from the counts (``normalized``) was made from other counts."""


# --- pipeline runs --------------------------------------------------------


class PipelineRecordError(CyteArcError):
    """A run, stage or label-claim document is missing a field, has an unknown one, or a wrong value."""


class RunNotFoundError(CyteArcError, KeyError):
    """No run of that ID or label is stored (never created, or removed)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class LabelClaimError(CyteArcError):
    """A run label cannot be claimed, or a claim cannot be abandoned."""


class LabelTakenError(LabelClaimError):
    """The label belongs to a completed run; choose another label."""


class LabelClaimBlockedError(LabelClaimError):
    """The label's current owner is incomplete (running, crashed, or unreadable), or a concurrent claim won."""


class RecipeError(CyteArcError):
    """A recipe is malformed, or a run gives it an option it does not take."""


class AtomicClaimUnsupportedError(LabelClaimError):
    """The store cannot create a key atomically only if it is absent, so labels cannot be claimed safely."""


# --- plots ----------------------------------------------------------------


class PlotInputError(CyteArcError):
    """Data given to a plotting function has the wrong shape, type or labels."""


# --- store damage ---------------------------------------------------------


class StoreDamageError(CyteArcError):
    """A stored chunk fails its checksum or cannot be decoded: the store is damaged (run ``cytearc verify``)."""


class InterruptedReplaceError(StoreDamageError):
    """A writer was killed while replacing columns of a table together: their values may mix two writes."""


class CompositeFormatError(StoreFormatError):
    """A composite's manifest or mapping is malformed, its creation did not finish, or a source changed."""


class MountFormatError(StoreFormatError):
    """A mounted target's ``matrixSource`` record is malformed, or its source changed or is itself a mount."""


class CountSummariesError(StoreFormatError):
    """An assay's count summaries are missing, malformed, incomplete, or bound to other counts."""


class StoreAccessError(CyteArcError, OSError):
    """A remote store cannot be reached or read: the endpoint refuses or times out, or credentials are refused."""


# --- source files and destinations of imports -------------------------------


class DamagedSourceError(SourceFormatError):
    """A source file is damaged: truncated or corrupt compressed data, or an HDF5 chunk that cannot be read."""


class RepeatedEntryError(DamagedSourceError):
    """A source file stores one matrix coordinate more than once; file imports refuse it rather than sum the repeats."""


class RemoteDestinationError(CyteArcError):
    """A writer was given a URL (``s3://``, ``gs://``, ...) where it writes only local paths."""


class DestinationOverlapError(DestinationExistsError):
    """A writer's destination is, contains or lies inside one of its source stores."""


class PendingAssayError(CyteArcError):
    """A source store holds a pending derived assay (``cytearc:pending_assay``): a writer is adding it, or was killed."""


class MergePlanError(CyteArcError):
    """Sources that cannot be merged: names, dtypes, assay types or membership columns that break the rules."""


class MergeResumeError(CyteArcError):
    """An interrupted merge cannot be finished: its sources or plan changed since it started."""
