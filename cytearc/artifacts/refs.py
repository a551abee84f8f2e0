"""Artifact references and provenance mappings."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import rfc8785

from cytearc.errors import ArtifactError

__all__ = ["DATASTORE_SCOPE", "ArtifactRef", "canonical", "make_provenance"]

DATASTORE_SCOPE: Final = ""
"""The scope of datastore-level artifacts (``artifacts/...``); assay scopes are assay names."""

_ID: Final = re.compile(r"[0-9a-f]{64}")
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]+")


def canonical(value: Any) -> Any:  # noqa: ANN401 (a JSON value)
    """``value`` as the JSON value its canonical (RFC 8785) serialization reads back as.

    Parameters
    ----------
    value
        A JSON value (numpy scalars and tuples are not).

    Returns
    -------
    object
        The canonical value: keys sorted, numbers as RFC 8785 writes them.
    """
    return json.loads(rfc8785.dumps(value))


@dataclass(frozen=True, order=True)
class ArtifactRef:
    """Where an artifact lives: ``{scope}/artifacts/{kind}/{artifact_id}``.

    Parameters
    ----------
    scope
        An assay name, or ``""`` (:data:`DATASTORE_SCOPE`) for the datastore.
    kind
        The artifact kind (``pca``, ``cell_selection``, ...).
    artifact_id
        64 lowercase hex digits.

    Raises
    ------
    ArtifactError
        A part is not of that form.

    Examples
    --------
    >>> ref = ArtifactRef("RNA", "pca", "ab" * 32)
    >>> ref.path[:18], ArtifactRef.parse(str(ref)) == ref
    ('RNA/artifacts/pca/', True)
    """

    scope: str
    kind: str
    artifact_id: str

    def __post_init__(self) -> None:
        if self.scope and not _NAME.fullmatch(self.scope):
            msg = f"artifact scope {self.scope!r}: expected an assay name or '' (the datastore)"
            raise ArtifactError(msg)
        if not _NAME.fullmatch(self.kind):
            msg = f"artifact kind {self.kind!r}: expected letters, digits, '_', '.' or '-'"
            raise ArtifactError(msg)
        if not _ID.fullmatch(self.artifact_id):
            msg = f"artifact id {self.artifact_id!r}: expected 64 lowercase hex digits"
            raise ArtifactError(msg)

    @property
    def path(self) -> str:
        """The group's path in the store."""
        base = f"{self.scope}/artifacts" if self.scope else "artifacts"
        return f"{base}/{self.kind}/{self.artifact_id}"

    def __str__(self) -> str:
        return self.path

    @classmethod
    def parse(cls, value: str | ArtifactRef) -> ArtifactRef:
        """A reference from its path (or itself).

        Parameters
        ----------
        value
            ``[<assay>/]artifacts/<kind>/<id>``, or a reference.

        Returns
        -------
        ArtifactRef
            The reference.

        Raises
        ------
        ArtifactError
            ``value`` is not such a path.
        """
        if isinstance(value, ArtifactRef):
            return value
        parts = str(value).strip("/").split("/")
        if len(parts) == 3 and parts[0] == "artifacts":
            return cls(DATASTORE_SCOPE, parts[1], parts[2])
        if len(parts) == 4 and parts[1] == "artifacts":
            return cls(parts[0], parts[2], parts[3])
        msg = f"artifact ref {value!r}: expected '[<assay>/]artifacts/<kind>/<id>'; pass an ArtifactRef or str(artifact.ref) of an artifact of the store"
        raise ArtifactError(msg)

    def to_json(self) -> dict[str, str]:
        """The JSON form provenance inputs record.

        Returns
        -------
        dict of str to str
            ``{"scope", "kind", "artifactId"}``.
        """
        return {"scope": self.scope, "kind": self.kind, "artifactId": self.artifact_id}

    @classmethod
    def from_json(cls, value: object) -> ArtifactRef | None:
        """A reference from its JSON form, or None when ``value`` is not one.

        Parameters
        ----------
        value
            A JSON value, such as a provenance input.

        Returns
        -------
        ArtifactRef or None
            The reference, when ``value`` has exactly the keys of :meth:`to_json`.
        """
        if isinstance(value, dict) and set(value) == {"scope", "kind", "artifactId"}:
            return cls(value["scope"], value["kind"], value["artifactId"])
        return None


def make_provenance(
    operation: str,
    *,
    parameters: dict[str, Any],
    inputs: dict[str, Any],
    revision: int = 1,
) -> dict[str, Any]:
    """The provenance mapping of an operation, as canonical JSON values.

    ``revision`` is recorded only from 2 on, so artifacts of revision 1 keep
    their identities.

    Parameters
    ----------
    operation
        The operation's name (``features.normalize``, ...).
    parameters
        Its parameters, as JSON values.
    inputs
        Its inputs: artifact references or fingerprints.
    revision
        The revision of the operation's algorithm.

    Returns
    -------
    dict
        ``{operation, parameters, inputs[, revision]}``, as their RFC 8785
        canonical JSON reads back.
    """
    provenance: dict[str, Any] = {
        "operation": operation,
        "parameters": parameters,
        "inputs": {k: v.to_json() if isinstance(v, ArtifactRef) else v for k, v in inputs.items()},
    }
    if revision >= 2:
        provenance["revision"] = revision
    return dict(canonical(provenance))
