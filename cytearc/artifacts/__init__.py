"""Analysis artifacts: groups published by one metadata write, found again by their provenance."""

from cytearc.artifacts.refs import DATASTORE_SCOPE, ArtifactRef, make_provenance
from cytearc.artifacts.store import (
    Artifact,
    ArtifactWriter,
    Lineage,
    PlanReceipt,
    find_reusable,
    lineage,
    list_artifacts,
    open_artifact,
    planning_receipts,
    produce,
)

__all__ = [
    "DATASTORE_SCOPE",
    "Artifact",
    "ArtifactRef",
    "ArtifactWriter",
    "Lineage",
    "PlanReceipt",
    "find_reusable",
    "lineage",
    "list_artifacts",
    "make_provenance",
    "open_artifact",
    "planning_receipts",
    "produce",
]
