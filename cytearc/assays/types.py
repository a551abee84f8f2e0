"""Assay types: the presets, and how an assay's type is resolved.

The root attribute ``assayTypes`` maps each assay to a preset. The preset
selects the assay class (and so its normalization); RNA-type assays also
store ``countsT``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from cytearc._warnings import warn_user
from cytearc.errors import AssayTypeError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FEATURE_TYPE_ASSAYS",
    "PRESETS",
    "RNA_TYPES",
    "assay_for_feature_type",
    "resolve_assay_type",
]

PRESETS: Final = (
    "RNA",
    "ATAC",
    "ADT",
    "HTO",
    "CRISPR",
    "ANTIGEN",
    "CUSTOM",
    "GeneActivity",
    "GeneScores",
    "URNA",
    "Assay",
)
RNA_TYPES: Final = frozenset({"RNA", "GeneActivity", "URNA"})
"""Types whose assays store ``countsT`` and open as RNA assays."""

FEATURE_TYPE_ASSAYS: Final = {
    "Gene Expression": "RNA",
    "Antibody Capture": "ADT",
    "Peaks": "ATAC",
    "CRISPR Guide Capture": "CRISPR",
    "Multiplexing Capture": "HTO",
    "Antigen Capture": "ANTIGEN",
}
"""10x feature types and the assays they become; others are named after their type."""


def assay_for_feature_type(feature_type: str) -> str:
    """The assay name of a 10x feature type: the known ones, else the type made a safe name.

    Examples
    --------
    >>> assay_for_feature_type("Antibody Capture"), assay_for_feature_type("Custom tags")
    ('ADT', 'Custom_tags')
    """
    known = FEATURE_TYPE_ASSAYS.get(feature_type)
    if known is not None:
        return known
    name = re.sub(r"[^A-Za-z0-9_]+", "_", feature_type.strip()).strip("_")
    return name or "Assay"


def resolve_assay_type(
    assay: str,
    *,
    explicit: str | None = None,
    recorded: str | None = None,
    where: str = "assayTypes",
) -> str:
    """The preset of ``assay``: explicit, else recorded, else its name's, else ``Assay`` with a warning."""
    for source, value in (("explicit", explicit), ("recorded", recorded)):
        if value is not None and value not in PRESETS:
            msg = f"{where}: the {source} type {value!r} of assay {assay!r} is not a preset; use one of {list(PRESETS)}"
            raise AssayTypeError(msg)
    if explicit is not None:
        return explicit
    if recorded is not None:
        return recorded
    if assay in PRESETS:
        return assay
    warn_user(
        f"assay {assay!r} has no type and its name is no preset; it opens as the generic 'Assay' "
        "(pass assay_types={...} to choose one)"
    )
    return "Assay"


def parse_assay_types(
    assay_types: Mapping[str, str] | None, assays: set[str], *, where: str
) -> dict[str, str]:
    """Validate an ``assay_types`` argument against the assays of a store."""
    if assay_types is None:
        return {}
    unknown = sorted(set(assay_types) - assays)
    if unknown:
        msg = f"{where}: assay_types names {unknown}, which are not assays of the store ({sorted(assays)})"
        raise AssayTypeError(msg)
    for name, value in assay_types.items():
        resolve_assay_type(name, explicit=value, where=where)
    return dict(assay_types)
