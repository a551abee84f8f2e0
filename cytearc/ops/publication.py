"""Publication of operation results: reuse an artifact or produce it, and write cell columns.

Every operation ends in :func:`reuse_or_publish`: the artifact whose whole
provenance matches is reused, else ``build`` writes a new one on the store's
engine and one metadata write publishes it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from cytearc.artifacts import Artifact, ArtifactRef, make_provenance, open_artifact, produce
from cytearc.errors import OperationArgumentError
from cytearc.metadata.table import GENERATED_ATTRIBUTE
from cytepool.cube.encoding import format_digest

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import ArtifactWriter
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "PREPARED_ATTRIBUTE",
    "ArtifactLike",
    "open_input",
    "reuse_or_publish",
    "values_digest",
    "write_cell_column",
]

PREPARED_ATTRIBUTE: Final = "cytearc:prepared"
"""Root attribute listing the assays that hold analysis artifacts."""

ArtifactLike = ArtifactRef | str | Artifact
"""An artifact given to an operation: opened, or its ref (object or text)."""


def values_digest(values: np.ndarray) -> str:
    """``sha256:`` of an array's values (text as UTF-8 joined by NUL), for provenance inputs.

    Numbers are hashed with their dtype, so ``int32`` and ``int64`` values
    differ; text is hashed by value alone.

    Parameters
    ----------
    values
        A 1-D array.

    Returns
    -------
    str
        ``"sha256:"`` and 64 hex digits.

    Examples
    --------
    >>> values_digest(np.array(["a", "b"])) == values_digest(np.array(["a", "b"], dtype=object))
    True
    >>> values_digest(np.array([1], dtype=np.int32)) == values_digest(np.array([1], dtype=np.int64))
    False
    """
    h = hashlib.sha256()
    if values.dtype.kind in "OUT":
        h.update("\0".join(str(v) for v in values).encode())
    else:
        h.update(str(values.dtype.str).encode() + b"\n")
        h.update(np.ascontiguousarray(values).tobytes())
    return format_digest(h)


def open_input(
    ds: AnalysisStore, value: ArtifactLike, *, kind: str | tuple[str, ...], operation: str
) -> Artifact:
    """The artifact an operation reads, refused unless it is published and of ``kind``.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    value
        The artifact, or its ref.
    kind
        The kind the operation needs (``normalized``, ``pca``, ...), or the
        kinds it takes.
    operation
        The operation, for the message.

    Returns
    -------
    Artifact
        The opened artifact.

    Raises
    ------
    OperationArgumentError
        The artifact is of another kind.
    MissingArtifactError, IncompleteArtifactError
        No published artifact at the ref.
    """
    artifact = value if isinstance(value, Artifact) else open_artifact(ds.root, value)
    kinds = (kind,) if isinstance(kind, str) else kind
    if artifact.ref.kind not in kinds:
        needed = " or ".join(kinds)
        msg = f"{artifact.ref}: {operation} needs a {needed} artifact, found {artifact.ref.kind!r}; pass the output of the operation that makes {needed} artifacts"
        raise OperationArgumentError(msg)
    return artifact


def _compute(ds: AnalysisStore) -> Callable[..., tuple[Any, ...]]:
    def run(*collections: Any) -> tuple[Any, ...]:
        return ds.engine.compute(*collections, show_progress=ds.show_progress)

    return run


def reuse_or_publish(
    ds: AnalysisStore,
    *,
    scope: str,
    kind: str,
    operation: str,
    parameters: dict[str, Any],
    inputs: dict[str, Any],
    build: Callable[[ArtifactWriter], None],
    revision: int = 1,
    invalidate_cache: bool = False,
) -> Artifact:
    """Reuse or produce the artifact of ``operation`` on this store's engine.

    The artifact of ``scope`` and ``kind`` whose provenance (operation,
    parameters, inputs, revision) matches is returned as it is; else
    ``build`` writes a new one, which is checked and published
    (:func:`~cytearc.artifacts.produce`), and the assay is marked as holding
    analysis results.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    scope
        The assay the artifact belongs to, or ``""`` for the datastore.
    kind
        The artifact kind (``normalized``, ``pca``, ...).
    operation
        The operation's name, as recorded in the provenance.
    parameters
        The operation's parameters, as recorded (JSON values).
    inputs
        The artifacts (refs) and digests the result depends on.
    build
        Writes the payload through the writer it is given.
    revision
        The operation's revision; raise it when the same parameters and
        inputs give other values.
    invalidate_cache
        Build a new artifact even when one of the same provenance exists.

    Returns
    -------
    Artifact
        The published artifact, reused or new.

    Raises
    ------
    ReadOnlyStoreError
        No artifact of this provenance exists and the store is read-only.
    NonFiniteArtifactError
        ``build`` writes NaN or infinity; nothing is published.
    """
    engine = ds.engine
    options = {
        "memBudget": None if engine.budget is None else engine.budget.total,
        "workers": None if engine.budget is None else engine.budget.workers,
        "threadsPerWorker": None if engine.budget is None else engine.budget.threads,
        "scheduler": "threads" if engine.client is None else "distributed",
    }
    artifact = produce(
        ds.root,
        scope=scope,
        kind=kind,
        provenance=make_provenance(
            operation, parameters=parameters, inputs=inputs, revision=revision
        ),
        build=build,
        compute=_compute(ds),
        execution_options=options,
        invalidate_cache=invalidate_cache,
        where=ds.where,
    )
    if scope and ds.writable:
        _mark_prepared(ds, scope)
    return artifact


def _mark_prepared(ds: AnalysisStore, assay: str) -> None:
    """Record that ``assay`` holds analysis results (an import with overwrite=True then refuses the store)."""
    prepared = ds.root.attrs.get(PREPARED_ATTRIBUTE, [])
    names = set(prepared) if isinstance(prepared, list) else set()
    if assay not in names:
        ds.root.attrs[PREPARED_ATTRIBUTE] = sorted(names | {assay})


def write_cell_column(
    ds: AnalysisStore,
    name: str,
    values: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    fill: Any = None,  # noqa: ANN401
    artifact: Artifact | None = None,
    operation: str | None = None,
) -> None:
    """Write a column that an operation generates (unless it holds these values already).

    Generated columns carry ``cytearc:generatedBy`` (the operation and
    artifact), so run snapshots of the input metadata leave them out. On a
    read-only store nothing is written.

    Parameters
    ----------
    ds
        The store (any :class:`~cytearc.storage.store.AnalysisStore`).
    name
        The cell column.
    values
        One value per cell, or per cell of ``mask``.
    mask
        The cells ``values`` are for; None for every cell.
    fill
        The value of the cells outside ``mask``.
    artifact
        The artifact the values come from (recorded with its operation).
    operation
        The operation recorded when there is no ``artifact``.

    Raises
    ------
    ReservedColumnError
        ``name`` is reserved (``ids``, ``I`` or an assay membership column).
    CyteArcError
        The values cannot be stored in a column.
    """
    if not ds.writable:
        return
    full = values
    if mask is not None:
        full = np.full(len(mask), fill, dtype=values.dtype)
        full[mask] = values
    if name in ds.cells.columns:
        old = ds.cells.fetch_all(name)
        if old.dtype == full.dtype and np.array_equal(old, full, equal_nan=full.dtype.kind == "f"):
            return
    marker = {
        "operation": artifact.provenance["operation"] if artifact else operation,
        "artifact": str(artifact.ref) if artifact else None,
    }
    ds.cells.insert(name, full, overwrite=True, attributes={GENERATED_ATTRIBUTE: marker})
