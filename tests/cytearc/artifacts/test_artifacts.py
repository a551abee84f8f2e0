"""Artifact publication: one attribute write publishes, reuse by the whole provenance, fail closed."""

from __future__ import annotations

import hashlib
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Any

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import rfc8785
import scipy.sparse as sp
import zarr

from cytearc import DataStore, SparseToZarr
from cytearc.artifacts import (
    DATASTORE_SCOPE,
    ArtifactRef,
    ArtifactWriter,
    PlanReceipt,
    find_reusable,
    lineage,
    list_artifacts,
    make_provenance,
    open_artifact,
    planning_receipts,
    produce,
)
from cytearc.artifacts.digests import (
    ATTRIBUTES_DIGEST_ATTRIBUTE,
    DIGESTS_ATTRIBUTE,
    attributes_digest,
)
from cytearc.artifacts.store import ATTRIBUTES, discard_unpublished
from cytearc.engine.cluster import get_engine
from cytearc.errors import (
    ArtifactError,
    DamagedArtifactError,
    IncompleteArtifactError,
    MissingArtifactError,
    NonFiniteArtifactError,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

ID = "ab" * 32
KIND = "thing"
SCOPE = "RNA"


def _compute(*collections: Any) -> tuple[Any, ...]:
    return tuple(dask.compute(*collections, scheduler="threads"))


def _write_values(writer: ArtifactWriter) -> None:
    writer.write("values", np.arange(6.0).reshape(3, 2))


def _provenance(**parameters: Any) -> dict[str, Any]:
    return make_provenance("tests.op", parameters=parameters or {"k": 1}, inputs={"x": "sha256:0"})


def _produce(
    root: zarr.Group,
    provenance: dict[str, Any],
    build: Callable[[ArtifactWriter], None] = _write_values,
    **options: Any,
) -> Any:
    return produce(
        root,
        scope=SCOPE,
        kind=KIND,
        provenance=provenance,
        build=build,
        **{"compute": _compute, **options},
    )


def _ids(root: zarr.Group, scope: str = SCOPE, kind: str = KIND) -> list[str]:
    node = root.get(f"{scope}/artifacts/{kind}" if scope else f"artifacts/{kind}")
    return sorted(node.group_keys()) if isinstance(node, zarr.Group) else []


@pytest.fixture
def root(tmp_path: Path) -> zarr.Group:
    return zarr.open_group(tmp_path / "store.zarr", mode="w", zarr_format=3)


# --- references and provenance -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scope", "path"),
    [
        (f"RNA/artifacts/pca/{ID}", "RNA", f"RNA/artifacts/pca/{ID}"),
        (f"/artifacts/pca/{ID}/", DATASTORE_SCOPE, f"artifacts/pca/{ID}"),
    ],
)
def test_ref_parse_path_and_json_round_trip(text: str, scope: str, path: str) -> None:
    """A ref parses from its path, prints as it, and round-trips through its JSON form."""
    ref = ArtifactRef.parse(text)
    assert (ref.scope, ref.kind, ref.artifact_id) == (scope, "pca", ID)
    assert ref.path == str(ref) == path
    assert ArtifactRef.parse(ref) is ref
    assert ref.to_json() == {"scope": scope, "kind": "pca", "artifactId": ID}
    assert ArtifactRef.from_json(ref.to_json()) == ref
    assert ArtifactRef.from_json({"scope": scope, "kind": "pca"}) is None
    assert ArtifactRef.from_json("sha256:0") is None


@pytest.mark.parametrize(
    "text",
    [
        f"RNA/pca/{ID}",
        f"RNA/artifacts/pca/{ID[:-1]}",
        f"RNA/artifacts/pca/{ID.upper()}",
        f"RNA/artifacts/p ca/{ID}",
        f"R/NA/artifacts/pca/{ID}",
        "artifacts/pca",
    ],
)
def test_ref_parse_rejects_malformed_paths(text: str) -> None:
    """A malformed ref fails with an ArtifactError (a ValueError) naming the value."""
    with pytest.raises(ArtifactError) as info:
        ArtifactRef.parse(text)
    assert isinstance(info.value, ValueError)


def test_make_provenance_is_canonical_json() -> None:
    """Provenance reads back as its RFC 8785 JSON: refs as JSON, 2.0 as 2, tuples as lists."""
    ref = ArtifactRef("RNA", "normalized", ID)
    provenance = make_provenance(
        "op", parameters={"b": (1, 2), "a": 2.0, "c": 0.5}, inputs={"normalized": ref}
    )
    assert provenance == {
        "operation": "op",
        "parameters": {"a": 2, "b": [1, 2], "c": 0.5},
        "inputs": {"normalized": {"scope": "RNA", "kind": "normalized", "artifactId": ID}},
    }
    assert isinstance(provenance["parameters"]["a"], int)
    assert list(provenance) == ["inputs", "operation", "parameters"]


@pytest.mark.parametrize(("revision", "recorded"), [(1, False), (2, True), (3, True)])
def test_make_provenance_records_revision_from_two(revision: int, *, recorded: bool) -> None:
    """Revision 1 is left out so older artifacts keep their identity; 2 and more are recorded."""
    provenance = make_provenance("op", parameters={}, inputs={}, revision=revision)
    assert ("revision" in provenance) is recorded
    if recorded:
        assert provenance["revision"] == revision


# --- publication and reuse -----------------------------------------------------------------


def test_produce_publishes_exactly_the_seven_attributes(root: zarr.Group) -> None:
    """A produced group holds the seven attributes and its two digests, complete=True, and its payload."""
    provenance = _provenance()
    artifact = _produce(root, provenance, execution_options={"workers": 2})
    attrs = dict(root[artifact.ref.path].attrs)
    assert set(attrs) == {*ATTRIBUTES, DIGESTS_ATTRIBUTE, ATTRIBUTES_DIGEST_ATTRIBUTE}
    assert set(attrs[DIGESTS_ATTRIBUTE]) == set(root[artifact.ref.path].array_keys())
    assert len(ATTRIBUTES) == 7
    assert attrs["complete"] is True
    assert attrs["artifact_id"] == artifact.ref.artifact_id
    assert attrs["kind"] == KIND
    assert attrs["provenance"] == provenance
    assert attrs["execution_options"] == {"workers": 2}
    assert isinstance(attrs["created_at_ns"], int)
    assert isinstance(attrs["cytearc_version"], str)
    assert artifact.ref.scope == SCOPE
    np.testing.assert_array_equal(artifact.read("values"), np.arange(6.0).reshape(3, 2))


def test_equal_provenance_reuses_without_a_new_group(root: zarr.Group) -> None:
    """A second produce with an equal provenance returns the first artifact and writes nothing."""
    first = _produce(root, _provenance())
    calls = []
    with planning_receipts() as receipts:
        second = _produce(root, _provenance(), build=calls.append)
    assert second.ref == first.ref
    assert calls == []
    assert _ids(root) == [first.ref.artifact_id]
    assert [(r.disposition, r.artifact_id) for r in receipts] == [("reused", first.ref.artifact_id)]


def test_invalidate_cache_creates_a_new_artifact(root: zarr.Group) -> None:
    """invalidate_cache=True builds and publishes a new group beside the old one."""
    first = _produce(root, _provenance())
    second = _produce(root, _provenance(), invalidate_cache=True)
    assert second.ref != first.ref
    assert _ids(root) == sorted([first.ref.artifact_id, second.ref.artifact_id])
    assert find_reusable(root, scope=SCOPE, kind=KIND, provenance=_provenance()).ref == first.ref


def test_different_parameters_create_a_new_artifact(root: zarr.Group) -> None:
    """Any difference in the provenance mapping (here a parameter) is another artifact."""
    first = _produce(root, _provenance(k=1))
    second = _produce(root, _provenance(k=2))
    third = _produce(root, _provenance(k=1.5))
    assert len({first.ref, second.ref, third.ref}) == 3
    assert _produce(root, _provenance(k=2)).ref == second.ref


@pytest.mark.parametrize("revision", [1, 0, "2", 2.5, True, None])
def test_stored_stale_or_malformed_revision_is_never_reused(
    root: zarr.Group, revision: object
) -> None:
    """A stored provenance recording revision 1 or a non-integer revision is not current."""
    first = _produce(root, _provenance())
    recorded = {**_provenance(), "revision": revision}
    _publish_attributes(root[first.ref.path], provenance=recorded)
    assert open_artifact(root, first.ref).provenance == recorded
    assert find_reusable(root, scope=SCOPE, kind=KIND, provenance=recorded) is None
    again = _produce(root, recorded)
    assert again.ref != first.ref
    assert len(_ids(root)) == 2


def test_stored_revision_two_is_reused(root: zarr.Group) -> None:
    """An integer revision of 2 or more is current: equal provenance is reused."""
    provenance = make_provenance("tests.op", parameters={}, inputs={}, revision=2)
    first = _produce(root, provenance)
    assert _produce(root, provenance).ref == first.ref
    assert _produce(root, make_provenance("tests.op", parameters={}, inputs={})).ref != first.ref


def test_execution_details_never_affect_reuse(root: zarr.Group) -> None:
    """execution_options, created_at_ns and cytearc_version do not enter the reuse comparison."""
    first = _produce(root, _provenance(), execution_options={"scheduler": "threads"})
    group = root[first.ref.path]
    group.attrs.update({"created_at_ns": 1, "cytearc_version": "0.0.0-other"})
    again = _produce(root, _provenance(), execution_options={"scheduler": "distributed"})
    assert again.ref == first.ref
    assert len(_ids(root)) == 1


def test_reuse_picks_the_oldest_equal_artifact(root: zarr.Group) -> None:
    """Among several published artifacts of equal provenance, reuse takes the oldest."""
    first = _produce(root, _provenance())
    second = _produce(root, _provenance(), invalidate_cache=True)
    assert _produce(root, _provenance()).ref == first.ref
    root[second.ref.path].attrs["created_at_ns"] = 0
    assert _produce(root, _provenance()).ref == second.ref


# --- failures before publication -----------------------------------------------------------


def test_failed_build_deletes_its_group_and_propagates(root: zarr.Group) -> None:
    """A build that raises after writing leaves nothing under the kind and re-raises."""

    def build(writer: ArtifactWriter) -> None:
        writer.write("part", np.ones(3))
        msg = "boom"
        raise RuntimeError(msg)

    with planning_receipts() as receipts, pytest.raises(RuntimeError, match="boom"):
        _produce(root, _provenance(), build=build)
    assert _ids(root) == []
    assert [r.disposition for r in receipts] == [""]
    assert list_artifacts(root, scopes=[SCOPE]) == []


def test_interrupted_build_deletes_its_group(root: zarr.Group) -> None:
    """A KeyboardInterrupt during the build also deletes the group and propagates."""

    def build(writer: ArtifactWriter) -> None:
        writer.write("part", np.ones(3))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _produce(root, _provenance(), build=build)
    assert _ids(root) == []


def test_non_finite_small_write_is_refused(root: zarr.Group) -> None:
    """writer.write of a NaN raises NonFiniteArtifactError naming operation, array and row."""
    values = np.zeros((5, 3))
    values[3, 1] = np.nan

    def build(writer: ArtifactWriter) -> None:
        writer.write("loadings", values)

    with pytest.raises(NonFiniteArtifactError) as info:
        _produce(root, _provenance(), build=build)
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.operation, error.array, error.row) == ("tests.op", "loadings", 3)
    assert "tests.op" in str(error)
    assert "'loadings'" in str(error)
    assert "row 3" in str(error)
    assert _ids(root) == []


def test_non_finite_allowed_where_declared(root: zarr.Group) -> None:
    """finite=False stores NaN (for arrays such as dispersions that may be undefined)."""

    def build(writer: ArtifactWriter) -> None:
        writer.write("dispersion", np.array([1.0, np.nan]), finite=False)

    artifact = _produce(root, _provenance(), build=build)
    assert np.isnan(artifact.read("dispersion")[1])


def _compute_sync(*collections: Any) -> tuple[Any, ...]:
    return tuple(dask.compute(*collections, scheduler="sync"))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_dask_block_names_the_global_row(root: zarr.Group, value: float) -> None:
    """A planned Dask write holding a non-finite value fails with the row in the whole array."""
    values = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
    values[23, 2] = value

    def build(writer: ArtifactWriter) -> None:
        writer.store("data", da.from_array(values, chunks=(7, 3)), chunks=(10, 3))
        writer.write("after", np.ones(2))

    with pytest.raises(NonFiniteArtifactError) as info:
        _produce(root, _provenance(), build=build, compute=_compute_sync)
    assert (info.value.operation, info.value.array, info.value.row) == ("tests.op", "data", 23)
    assert "row 23" in str(info.value)
    assert _ids(root) == []


def _nan_first_then_slow(block: np.ndarray, block_info: dict[Any, Any] | None = None) -> np.ndarray:
    assert block_info is not None
    if block_info[0]["array-location"][0][0] == 0:
        block = block.copy()
        block[0, 0] = np.nan
    else:
        time.sleep(0.3)
    return block


@pytest.mark.slow
def test_failed_dask_write_leaves_no_chunk_behind(tmp_path: Path) -> None:
    """After a failed threaded Dask write, nothing of the artifact is left on disk."""
    path = tmp_path / "store.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=3)

    def build(writer: ArtifactWriter) -> None:
        x = da.ones((60, 2), chunks=(10, 2)).map_blocks(_nan_first_then_slow, dtype=np.float64)
        writer.store("data", x, chunks=(10, 2))

    with dask.config.set(num_workers=4), pytest.raises(NonFiniteArtifactError):
        _produce(root, _provenance(), build=build, compute=get_engine(cluster="threads").compute)
    time.sleep(1.0)
    kind_dir = path / SCOPE / "artifacts" / KIND
    assert sorted(p.name for p in kind_dir.iterdir()) == ["zarr.json"]
    assert list_artifacts(root, scopes=[SCOPE]) == []


def test_dask_payload_is_written_at_publication(root: zarr.Group) -> None:
    """Planned Dask writes run before publication and land in the published artifact."""
    values = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)

    def build(writer: ArtifactWriter) -> None:
        writer.store("data", da.from_array(values, chunks=(7, 3)), chunks=(10, 3))
        (total,) = writer.run(da.from_array(values, chunks=(7, 3)).sum(axis=0))
        writer.write("total", np.asarray(total, dtype=np.float64))

    artifact = _produce(root, _provenance(), build=build)
    assert artifact.array("data").chunks == (10, 3)
    np.testing.assert_array_equal(artifact.read("data"), values)
    np.testing.assert_array_equal(artifact.read("total"), values.sum(axis=0))
    np.testing.assert_array_equal(artifact.lazy("data").compute(scheduler="sync"), values)


def _ordered_run(root: zarr.Group, mixed: tuple[Any, ...]) -> tuple[Any, ...]:
    """writer.run(*mixed) inside a build that also planned a Dask write, on the threads engine."""
    results: list[tuple[Any, ...]] = []

    def build(writer: ArtifactWriter) -> None:
        writer.store("data", da.ones((4, 2), chunks=(2, 2)), chunks=(2, 2))
        results.append(writer.run(*mixed))

    produce(
        root,
        scope=SCOPE,
        kind=KIND,
        provenance=_provenance(),
        build=build,
        compute=get_engine(cluster="threads").compute,
    )
    return results[0]


def test_writer_run_returns_extras_in_order(root: zarr.Group) -> None:
    """writer.run returns its extras' results in order (collections of one type)."""
    first, second = da.full(2, 1.0, chunks=1), da.full(3, 2.0, chunks=1)
    a, b = _ordered_run(root, (first, second))
    assert (a.tolist(), b.tolist()) == ([1.0, 1.0], [2.0, 2.0, 2.0])


def test_writer_run_returns_mixed_extras_in_order(root: zarr.Group) -> None:
    """writer.run returns its extras' results in order, whatever their collection types."""
    mixed = (da.full(2, 1.0, chunks=1), dask.delayed(str)("text"), da.full(3, 2.0, chunks=1))
    a, text, b = _ordered_run(root, mixed)
    assert isinstance(text, str), f"the second result is {text!r}"
    assert (np.asarray(a).tolist(), np.asarray(b).tolist()) == ([1.0, 1.0], [2.0, 2.0, 2.0])


# --- unpublished groups --------------------------------------------------------------------

_KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    import dask, numpy as np, zarr
    from cytearc.artifacts import make_provenance, produce

    root = zarr.open_group(sys.argv[1], mode="r+")

    def build(writer):
        writer.write("part", np.arange(10.0))
        print(writer.ref.artifact_id, flush=True)
        time.sleep(300)

    produce(
        root, scope="RNA", kind="thing",
        provenance=make_provenance("tests.op", parameters={"k": 1}, inputs={"x": "sha256:0"}),
        build=build, compute=lambda *c: dask.compute(*c, scheduler="threads"),
    )
    """
)


def _run_and_kill(script: str, *args: str) -> str:
    """Run ``script`` until it prints a line, SIGKILL it, and return the line."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the producer printed nothing within 120 s"
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return line


def _assert_never_read_or_reused(
    root: zarr.Group,
    ref: ArtifactRef,
    *,
    error: type[ArtifactError] = IncompleteArtifactError,
    provenance: dict[str, Any] | None = None,
) -> None:
    provenance = provenance or _provenance()
    with pytest.raises(error) as info:
        open_artifact(root, ref)
    assert isinstance(info.value, ArtifactError)
    assert str(ref) in str(info.value)
    assert list_artifacts(root, scopes=[SCOPE]) == []
    assert find_reusable(root, scope=SCOPE, kind=KIND, provenance=provenance) is None
    with pytest.raises(error):
        lineage(root, ref)
    fresh = _produce(root, provenance)
    assert fresh.ref != ref
    assert root.get(ref.path) is not None, "an unpublished group is never deleted by reuse"
    assert list_artifacts(root, scopes=[SCOPE]) == [fresh]


@pytest.mark.slow
def test_killed_producer_leaves_an_unpublished_group(tmp_path: Path) -> None:
    """SIGKILL mid-build leaves complete=False: never opened, listed or reused; a new produce builds."""
    path = tmp_path / "store.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=3)
    artifact_id = _run_and_kill(_KILLED_PRODUCER, str(path))
    ref = ArtifactRef(SCOPE, KIND, artifact_id)
    root = zarr.open_group(path, mode="r+")
    group = root[ref.path]
    assert group.attrs["complete"] is False
    assert "part" in set(group.array_keys())
    _assert_never_read_or_reused(root, ref)


def _unpublish(group: zarr.Group, complete: object) -> None:
    """Make ``group`` as its producer left it before the publish write: no digests, ``complete``."""
    attrs = {k: v for k, v in group.attrs.items() if not k.startswith("cytearc:")}
    group.attrs.clear()
    group.attrs.update({**attrs, "complete": complete})


def _publish_attributes(group: zarr.Group, **changes: object) -> None:
    """Change identity attributes of ``group`` as if it had been published with them."""
    attrs = {**group.attrs, **changes}
    group.attrs.update({**changes, ATTRIBUTES_DIGEST_ATTRIBUTE: attributes_digest(attrs)})


@pytest.mark.parametrize("complete", [False, None, "true", 1])
def test_persisted_unpublished_attribute_is_never_read(root: zarr.Group, complete: object) -> None:
    """A group without digests whose complete is other than True is unpublished; discard deletes it."""
    artifact = _produce(root, _provenance())
    _unpublish(root[artifact.ref.path], complete)
    _assert_never_read_or_reused(root, artifact.ref)
    assert discard_unpublished(root, scopes=[SCOPE]) == [artifact.ref]
    assert root.get(artifact.ref.path) is None


@pytest.mark.parametrize("complete", ["delete", False, None])
def test_published_group_that_lost_complete_is_damaged_and_kept(
    root: zarr.Group, complete: object
) -> None:
    """A group recording array digests but not complete=True is damaged: never read, reused or discarded."""
    artifact = _produce(root, _provenance())
    group = root[artifact.ref.path]
    if complete == "delete":
        del group.attrs["complete"]
    else:
        group.attrs["complete"] = complete
    with pytest.raises(
        DamagedArtifactError, match=r"only its publication writes.*invalidate_cache=True"
    ):
        open_artifact(root, artifact.ref)
    assert discard_unpublished(root, scopes=[SCOPE]) == []
    _assert_never_read_or_reused(root, artifact.ref, error=DamagedArtifactError)
    assert discard_unpublished(root, scopes=[SCOPE]) == []
    assert root.get(artifact.ref.path) is not None


@pytest.mark.parametrize(
    "edit",
    [
        {"parameters": {"k": 2}},
        {"parameters": {"k": 1, "extra": True}},
        {"inputs": {"x": "sha256:1"}},
        {"operation": "tests.other"},
    ],
)
def test_edited_provenance_is_damaged_never_read_or_reused(
    root: zarr.Group, edit: dict[str, Any]
) -> None:
    """A provenance edited after publication disagrees with its attributes digest: never read or reused."""
    artifact = _produce(root, _provenance())
    edited = {**_provenance(), **edit}
    root[artifact.ref.path].attrs["provenance"] = edited
    with pytest.raises(
        DamagedArtifactError, match=r"edited after publication.*invalidate_cache=True"
    ):
        open_artifact(root, artifact.ref)
    _assert_never_read_or_reused(root, artifact.ref, error=DamagedArtifactError, provenance=edited)
    assert discard_unpublished(root, scopes=[SCOPE]) == []


def test_an_edit_to_a_non_identity_attribute_is_read(root: zarr.Group) -> None:
    """The attributes digest covers artifact_id, kind and provenance only: execution options may change."""
    artifact = _produce(root, _provenance(), execution_options={"workers": 2})
    root[artifact.ref.path].attrs["execution_options"] = {"workers": 3}
    assert open_artifact(root, artifact.ref).attrs["execution_options"] == {"workers": 3}
    assert _produce(root, _provenance()).ref == artifact.ref


def test_an_artifact_published_before_the_attributes_digest_is_read_unchecked(
    root: zarr.Group,
) -> None:
    """Without a recorded attributes digest, an artifact opens and is reused as its provenance says."""
    artifact = _produce(root, _provenance())
    group = root[artifact.ref.path]
    del group.attrs[ATTRIBUTES_DIGEST_ATTRIBUTE]
    group.attrs["provenance"] = _provenance(k=2)
    assert open_artifact(root, artifact.ref).parameters == {"k": 2}
    assert _produce(root, _provenance(k=2)).ref == artifact.ref


def test_the_attributes_digest_follows_its_specification(root: zarr.Group) -> None:
    """The recorded attributes digest recomputed with hashlib and rfc8785 from the module's description."""
    artifact = _produce(root, _provenance(k=0.5))
    identity = {
        "artifact_id": artifact.ref.artifact_id,
        "kind": KIND,
        "provenance": _provenance(k=0.5),
    }
    h = hashlib.sha256(b"cytearc attributes digest 1\n" + rfc8785.dumps(identity))
    assert artifact.attrs[ATTRIBUTES_DIGEST_ATTRIBUTE] == "sha256:" + h.hexdigest()
    assert ATTRIBUTES_DIGEST_ATTRIBUTE not in artifact.provenance


def test_missing_group_fails_closed(root: zarr.Group) -> None:
    """Opening a ref with no group raises MissingArtifactError (a KeyError) naming the ref."""
    ref = ArtifactRef(SCOPE, KIND, ID)
    with pytest.raises(MissingArtifactError) as info:
        open_artifact(root, ref)
    assert isinstance(info.value, KeyError)
    assert str(ref) in str(info.value)


def test_malformed_attributes_fail_closed(root: zarr.Group) -> None:
    """A published group that lost an attribute or names another id is not an artifact."""
    artifact = _produce(root, _provenance())
    group = root[artifact.ref.path]
    group.attrs["artifact_id"] = ID
    with pytest.raises(ArtifactError, match="attributes name artifact"):
        open_artifact(root, artifact.ref)
    assert list_artifacts(root, scopes=[SCOPE]) == []
    group.attrs["artifact_id"] = artifact.ref.artifact_id
    group.attrs.update({"provenance": {"operation": "tests.op"}})
    with pytest.raises(ArtifactError, match="provenance must map"):
        open_artifact(root, artifact.ref)


# --- receipts and lineage ------------------------------------------------------------------


def _walk(receipts: list[PlanReceipt]) -> list[PlanReceipt]:
    out = []
    for receipt in receipts:
        out.append(receipt)
        out.extend(_walk(receipt.nested))
    return out


def _flatten(receipts: list[PlanReceipt]) -> list[tuple[str, str, str]]:
    return [(r.kind, r.operation, r.disposition) for r in _walk(receipts)]


def test_planning_receipts_record_nested_plans(root: zarr.Group) -> None:
    """Plans made inside a build nest under it, with reused/created and the artifact id."""

    def inner(writer: ArtifactWriter) -> None:
        writer.write("v", np.ones(2))

    def outer(writer: ArtifactWriter) -> None:
        upstream = produce(
            root,
            scope=DATASTORE_SCOPE,
            kind="inner",
            provenance=make_provenance("tests.inner", parameters={}, inputs={}),
            build=inner,
            compute=_compute,
        )
        writer.write("from", np.array([upstream.ref.artifact_id], dtype=object))

    with planning_receipts() as first:
        made = _produce(root, _provenance(), build=outer)
    (receipt,) = first
    assert (receipt.operation, receipt.kind, receipt.scope) == ("tests.op", KIND, SCOPE)
    assert (receipt.disposition, receipt.artifact_id) == ("created", made.ref.artifact_id)
    (nested,) = receipt.nested
    assert (nested.kind, nested.scope, nested.disposition) == ("inner", "", "created")
    assert nested.artifact_id == _ids(root, DATASTORE_SCOPE, "inner")[0]
    assert receipt.to_json()["nested"][0]["artifactId"] == nested.artifact_id

    with planning_receipts() as second:
        _produce(root, _provenance(), build=outer, invalidate_cache=True)
    assert _flatten(second) == [
        (KIND, "tests.op", "created"),
        ("inner", "tests.inner", "reused"),
    ]
    with planning_receipts() as third:
        _produce(root, _provenance(), build=outer)
    assert _flatten(third) == [(KIND, "tests.op", "reused")]


def test_receipts_are_collected_only_inside_the_block(root: zarr.Group) -> None:
    """Outside planning_receipts nothing is collected; blocks do not see each other's plans."""
    _produce(root, _provenance())
    with planning_receipts() as outer:
        with planning_receipts() as inner:
            _produce(root, _provenance())
        assert len(inner) == 1
        assert outer == []


def _chain(root: zarr.Group) -> list[ArtifactRef]:
    refs: list[ArtifactRef] = []
    for step in range(3):
        inputs: dict[str, Any] = {"seed": step}
        if refs:
            inputs["upstream"] = refs[-1]
        artifact = produce(
            root,
            scope=SCOPE,
            kind=f"step{step}",
            provenance=make_provenance(f"tests.step{step}", parameters={}, inputs=inputs),
            build=_write_values,
            compute=_compute,
        )
        refs.append(artifact.ref)
    return refs


def test_lineage_prints_the_chain(root: zarr.Group) -> None:
    """Lineage follows the ref inputs of each provenance and prints one indented line per artifact."""
    refs = _chain(root)
    tree = lineage(root, refs[-1])
    assert str(tree).splitlines() == [
        f"tests.step2 -> {refs[2]}",
        f"  upstream: tests.step1 -> {refs[1]}",
        f"    upstream: tests.step0 -> {refs[0]}",
    ]
    assert tree.parents["upstream"].artifact.ref == refs[1]


def test_lineage_with_a_removed_input_fails_closed(root: zarr.Group) -> None:
    """Deleting an upstream group makes lineage raise MissingArtifactError naming it."""
    refs = _chain(root)
    parent = root[f"{SCOPE}/artifacts/step0"]
    del parent[refs[0].artifact_id]
    with pytest.raises(MissingArtifactError, match=refs[0].artifact_id):
        lineage(root, refs[-1])
    assert open_artifact(root, refs[-1]).inputs() == {"upstream": refs[1]}


# --- receipts and lineage of real operations -----------------------------------------------


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    n_cells, n_genes = 200, 60
    counts = sp.csr_matrix(rng.poisson(rng.lognormal(0, 1, n_genes), size=(n_cells, n_genes)))
    cells = pd.DataFrame({"ids": [f"c{i}" for i in range(n_cells)]})
    features = pd.DataFrame(
        {
            "ids": [f"g{i}" for i in range(n_genes)],
            "names": [f"G{i}" for i in range(n_genes)],
        }
    )
    path = tmp_path_factory.mktemp("artifacts") / "ds.zarr"
    SparseToZarr(
        counts,
        cells=cells,
        features=features,
        zarr_loc=str(path),
        show_progress=False,
        cluster="threads",
    ).dump()
    return path


def test_normalize_receipts_record_its_cell_selection(store_path: Path) -> None:
    """Normalize with cell_selection=None plans the I snapshot and itself; a rerun reuses both."""
    ds = DataStore(store_path, zarr_mode="r+", cluster="threads", show_progress=False)
    with planning_receipts() as first:
        norm = ds.features.normalize("RNA", target_sum=1234.0)
    flat = _flatten(first)
    assert ("normalized", "features.normalize", "created") in flat
    assert sum(kind == "cell_selection" for kind, _, _ in flat) == 1
    (selection,) = [r for r in _walk(first) if r.kind == "cell_selection"]
    assert selection.artifact_id == norm.inputs()["cells"].artifact_id
    with planning_receipts() as second:
        again = ds.features.normalize("RNA", target_sum=1234.0)
    assert again.ref == norm.ref
    assert {d for _, _, d in _flatten(second)} == {"reused"}
    assert sorted(kind for kind, _, _ in _flatten(second)) == ["cell_selection", "normalized"]
    with planning_receipts() as third:
        ds.features.normalize("RNA", target_sum=1234.0, invalidate_cache=True)
    assert sorted(_flatten(third)) == [
        ("cell_selection", "select_cells", "reused"),
        ("normalized", "features.normalize", "created"),
    ]


def test_lineage_of_an_operation_chain(store_path: Path) -> None:
    """PCA's lineage names hvgs, normalize and the cell selection; removing normalize breaks it."""
    ds = DataStore(store_path, zarr_mode="r+", cluster="threads", show_progress=False)
    norm = ds.features.normalize("RNA", target_sum=2000.0)
    hv = ds.features.hvgs(norm, n_top=20, min_mean=0.0)
    pc = ds.reduce.pca(norm, hv, n_comps=5)
    lines = str(ds.lineage(pc.ref)).splitlines()
    assert lines[0] == f"reduce.pca -> {pc.ref}"
    assert f"  normalized: features.normalize -> {norm.ref}" in lines
    assert f"  hvgs: features.hvgs -> {hv.ref}" in lines
    assert any(line.strip().startswith("cells: select_cells -> artifacts/") for line in lines)
    del ds.root["RNA/artifacts/normalized"][norm.ref.artifact_id]
    with pytest.raises(MissingArtifactError, match=norm.ref.artifact_id):
        ds.lineage(pc.ref)
    with pytest.raises(MissingArtifactError):
        ds.lineage(hv.ref)
    assert ds.load_artifact(pc.ref).ref == pc.ref
