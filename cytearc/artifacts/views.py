"""The notebook views of an artifact and of its lineage (built with :mod:`cytepool._html`).

Both read attributes and array metadata only, never an array's values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import zarr

from cytearc.artifacts.digests import ATTRIBUTES_DIGEST_ATTRIBUTE, DIGESTS_ATTRIBUTE
from cytearc.artifacts.refs import ArtifactRef
from cytearc.errors import ArtifactError
from cytepool._html import Html, bullets, code, json_code, mapping, table, text, view, when

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cytearc.artifacts.store import Artifact, Lineage
    from cytepool._html import Row

__all__ = ["artifact_view", "lineage_tree", "lineage_view"]


def _step(artifact: Artifact) -> Html:
    """An artifact as a step of a lineage: its operation and its ref."""
    return Html(f"{text(artifact.provenance['operation'])} {code(artifact.ref)}")


def lineage_tree(parents: Mapping[str, Lineage]) -> Html:
    """The upstream artifacts as a nested list: each input's name, operation and ref, then its own inputs.

    Parameters
    ----------
    parents
        The lineage of each input, by input name (:attr:`Lineage.parents`).

    Returns
    -------
    Html
        The markup; a note when there are no upstream artifacts.
    """
    if not parents:
        return Html("none (computed from the store's tables and counts)")
    return bullets(
        [
            Html(
                f"{text(name)}: {_step(parent.artifact)}"
                + (lineage_tree(parent.parents) if parent.parents else "")
            )
            for name, parent in parents.items()
        ]
    )


def lineage_view(lineage: Lineage) -> Html:
    """The view of a lineage: the artifact, then the tree of what it was computed from.

    Parameters
    ----------
    lineage
        The lineage.

    Returns
    -------
    Html
        The markup.
    """
    rows: list[Row] = [
        ("artifact", _step(lineage.artifact)),
        ("computed from", lineage_tree(lineage.parents)),
    ]
    return view(f"Lineage of {lineage.artifact.ref}", rows)


def _store_root(artifact: Artifact) -> zarr.Group:
    """The group ``artifact.ref`` is relative to: the store's root or the workspace's."""
    prefix = artifact.group.path.removesuffix(artifact.ref.path).rstrip("/")
    return zarr.open_group(store=artifact.group.store, path=prefix, mode="r")


def _lineage(artifact: Artifact) -> Html:
    from cytearc.artifacts.store import lineage  # noqa: PLC0415 (the store module imports this one)

    try:
        chain = lineage(_store_root(artifact), artifact.ref)
    except ArtifactError as error:
        return Html(f"cannot be followed: {text(error)}")
    return lineage_tree(chain.parents)


def _inputs(artifact: Artifact) -> Html:
    rows = []
    for name, value in artifact.provenance["inputs"].items():
        ref = ArtifactRef.from_json(value)
        rows.append([name, code(ref) if ref is not None else json_code(value)])
    return table(rows, header=("input", "artifact or fingerprint"))


def _arrays(artifact: Artifact) -> Html:
    digests = artifact.attrs.get(DIGESTS_ATTRIBUTE) or {}
    rows = [
        [name, tuple(array.shape), array.dtype, code(digests.get(name, "not recorded"))]
        for name, array in sorted(artifact.group.arrays())
    ]
    return table(rows, header=("array", "shape", "dtype", "digest"))


def artifact_view(artifact: Artifact) -> Html:
    """The view of an artifact: kind, ref, operation, parameters, inputs, arrays, digests and lineage.

    Parameters
    ----------
    artifact
        The artifact.

    Returns
    -------
    Html
        The markup.
    """
    provenance = artifact.provenance
    ref = artifact.ref
    attrs = artifact.attrs
    digest = attrs.get(ATTRIBUTES_DIGEST_ATTRIBUTE)
    rows: list[Row] = [
        ("ref", code(ref)),
        ("scope", ref.scope or "datastore"),
        ("operation", provenance["operation"]),
        ("revision", provenance.get("revision")),
        ("parameters", mapping(provenance["parameters"])),
        ("inputs", _inputs(artifact)),
        ("arrays", _arrays(artifact)),
        ("attributes digest", code(digest) if digest else "not recorded (read unchecked)"),
        ("created", f"{when(attrs['created_at_ns'])} by cytearc {attrs['cytearc_version']}"),
        ("execution options", json_code(attrs["execution_options"])),
        ("lineage", _lineage(artifact)),
    ]
    return view(f"Artifact {ref.kind} ({provenance['operation']})", rows)
