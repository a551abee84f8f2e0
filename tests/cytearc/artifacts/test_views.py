"""The notebook views of an artifact and its lineage: ref, digests, parameters, inputs, upstream chain."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dask
import numpy as np
import pytest
import zarr

from cytearc.artifacts import ArtifactWriter, lineage, make_provenance, produce
from cytearc.artifacts.digests import ATTRIBUTES_DIGEST_ATTRIBUTE, DIGESTS_ATTRIBUTE

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.artifacts import Artifact

HOSTILE = "<script>alert(1)</script>"


def _compute(*collections: Any) -> tuple[Any, ...]:
    return tuple(dask.compute(*collections, scheduler="threads"))


def _write(writer: ArtifactWriter) -> None:
    writer.write("values", np.arange(6.0).reshape(3, 2))


def _chain(root: zarr.Group) -> list[Artifact]:
    """Three artifacts, each computed from the one before; the first from a fingerprint."""
    made: list[Artifact] = []
    for step in range(3):
        inputs: dict[str, Any] = {"upstream": made[-1].ref} if made else {"x": "sha256:0"}
        provenance = make_provenance(
            f"tests.step{step}", parameters={"note": HOSTILE, "step": step}, inputs=inputs
        )
        made.append(
            produce(
                root,
                scope="RNA",
                kind=f"step{step}",
                provenance=provenance,
                build=_write,
                compute=_compute,
            )
        )
    return made


@pytest.fixture(params=["root", "workspace"])
def root(tmp_path: Path, request: pytest.FixtureRequest) -> zarr.Group:
    """A store's root group, or a workspace group below it (refs are relative to it)."""
    group = zarr.open_group(tmp_path / "store.zarr", mode="w", zarr_format=3)
    return group if request.param == "root" else group.create_group("ws")


def test_artifact_view_shows_ref_digests_parameters_and_lineage(
    root: zarr.Group, parse_html
) -> None:
    """The view names the ref, every digest, the (escaped) parameters, the inputs and the chain."""
    first, second, last = _chain(root)
    parsed = parse_html(last._repr_html_())
    assert "script" not in parsed.tags
    assert HOSTILE in parsed.text
    assert str(last.ref) in parsed.text
    assert last.attrs[ATTRIBUTES_DIGEST_ATTRIBUTE] in parsed.text
    assert last.attrs[DIGESTS_ATTRIBUTE]["values"] in parsed.text
    assert "tests.step2" in parsed.text
    assert f"upstream: tests.step1 {second.ref}" in parsed.text
    assert f"upstream: tests.step0 {first.ref}" in parsed.text
    assert parsed.tags.count("ul") == 2
    assert "sha256:0" in parse_html(first._repr_html_()).text


def test_lineage_view_is_the_tree_of_lineage(root: zarr.Group, parse_html) -> None:
    """``ds.lineage(ref)`` shows in a notebook as nested lists, one level per upstream artifact."""
    first, second, last = _chain(root)
    parsed = parse_html(lineage(root, last.ref)._repr_html_())
    assert parsed.tags.count("li") == 2
    assert parsed.text.index(str(second.ref)) < parsed.text.index(str(first.ref))
    assert "none (computed from" in parse_html(lineage(root, first.ref)._repr_html_()).text


def test_a_broken_lineage_is_reported_not_raised(root: zarr.Group, parse_html) -> None:
    """With an upstream artifact removed the view says the lineage cannot be followed."""
    first, _, last = _chain(root)
    del root["RNA/artifacts/step0"][first.ref.artifact_id]
    parsed = parse_html(last._repr_html_())
    assert "cannot be followed" in parsed.text
    assert first.ref.artifact_id in parsed.text
