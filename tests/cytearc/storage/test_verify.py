"""Store damage fails closed: named read errors, checksummed codecs, summaries checked on use, ``verify``.

Each case makes one change on disk to a copy of a small store of several
shards and checks the named error or the damage ``verify`` reports, and that
reading and verifying wrote nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import zarr
from zarr.errors import ZarrUserWarning

from cytearc import DataStore
from cytearc.artifacts.digests import DIGESTS_ATTRIBUTE, stored_digest
from cytearc.cli import main
from cytearc.datasets import write_store
from cytearc.errors import (
    CountSummariesError,
    StoreAccessError,
    StoreDamageError,
    StoreFormatError,
)
from cytearc.storage.layout import CountLayout
from cytepool.testing import free_port

if TYPE_CHECKING:
    from collections.abc import Callable

LAYOUT = CountLayout(unit_bytes=2**15, chunk_bytes=2**12)
"""Counts of 600 x 400 uint8 in shards of 64 rows, countsT in shards of 32 features."""
COUNTS_SHARD = "matrices/RNA/counts/c/3/0"
COUNTS_T_SHARD = "matrices/RNA/countsT/c/5/0"
OLD_STORE = Path(__file__).parents[1] / "metadata" / "fixtures" / "text_encoding_store.zarr"


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str | None], Path]:
    """A small synthetic store per compression, written once for the module."""
    written: dict[str | None, Path] = {}

    def original(compression: str | None) -> Path:
        if compression not in written:
            path = tmp_path_factory.mktemp("originals") / f"{compression}.zarr"
            written[compression] = write_store(
                path,
                n_cells=600,
                n_genes=400,
                n_markers=10,
                cluster="threads",
                layout=LAYOUT,
                compression=compression,
            )
        return written[compression]

    return original


@pytest.fixture
def store(tmp_path: Path, originals: Callable[[str | None], Path]) -> Path:
    """A copy of the zstd store."""
    return Path(shutil.copytree(originals("zstd"), tmp_path / "ds.zarr"))


def _open(path: Path | str, **options: Any) -> DataStore:
    return DataStore(path, cluster="threads", show_progress=False, **options)


def _files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def _codecs(path: Path, array: str) -> list[dict[str, Any]]:
    return list(json.loads((path / array / "zarr.json").read_text())["codecs"])


# --- reading -------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["zstd", "gzip", None])
def test_new_arrays_carry_checksums(
    tmp_path: Path, originals: Callable[[str | None], Path], compression: str | None
) -> None:
    """Every chunk of new counts, countsT and summaries has a checksum, whatever the compression."""
    path = originals(compression)
    for array in ("matrices/RNA/counts", "matrices/RNA/countsT"):
        (sharding,) = _codecs(path, array)
        inner = [c["name"] for c in sharding["configuration"]["codecs"]]
        assert [c["name"] for c in sharding["configuration"]["index_codecs"]][-1] == "crc32c"
        expected = {"zstd": ["bytes", "zstd"], "gzip": ["bytes", "gzip"], None: ["bytes", "crc32c"]}
        assert inner == expected[compression]
        if compression == "zstd":
            assert sharding["configuration"]["codecs"][1]["configuration"]["checksum"] is True
    for name in ("rowSums", "rowPositive", "columnPositive"):
        zstd = _codecs(path, f"matrices/RNA/countSummaries/{name}")[-1]
        assert zstd["name"] == "zstd"
        assert zstd["configuration"]["checksum"] is True


@pytest.mark.parametrize("compression", ["zstd", "gzip", None])
def test_a_flipped_bit_fails_the_read_naming_the_shard(
    tmp_path: Path, originals: Callable[[str | None], Path], compression: str | None
) -> None:
    """Of 20 one-bit flips in a counts shard, none decodes to other values; each failure names the shard."""
    path = Path(shutil.copytree(originals(compression), tmp_path / "ds.zarr"))
    expected = _open(path).assays["RNA"].counts.compute()
    shard = path / COUNTS_SHARD
    intact = shard.read_bytes()
    rng = random.Random(0)
    messages = []
    for _ in range(20):
        flipped = bytearray(intact)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        shard.write_bytes(bytes(flipped))
        try:
            values = _open(path).assays["RNA"].counts.compute()
        except StoreDamageError as exc:
            messages.append(str(exc))
        else:
            np.testing.assert_array_equal(values, expected)
    assert len(messages) >= 15
    assert all(m.startswith(f"{path}/{COUNTS_SHARD}: ") and "cytearc verify" in m for m in messages)
    report = _open(path).verify()
    shard.write_bytes(intact)
    assert report.damage is not None
    assert (report.damage.array, report.damage.chunk) == ("matrices/RNA/counts", "c/3/0")


def test_a_store_written_before_checksums_opens_and_verifies(tmp_path: Path) -> None:
    """A frozen store of the former codecs (zstd without checksum) still opens and verifies."""
    path = Path(shutil.copytree(OLD_STORE, tmp_path / "old.zarr"))
    before = _files(path)
    report = _open(path).verify()
    assert report.ok, report
    assert {c.item for c in report.checks} >= {"matrices/RNA/counts", "matrices/RNA/countsT"}
    assert _files(path) == before


# --- verify --------------------------------------------------------------------


def test_an_intact_store_verifies_and_is_left_unchanged(store: Path) -> None:
    """Every check of an intact store is ok, and verifying changes no byte."""
    before = _files(store)
    report = _open(store).verify()
    assert report.ok
    assert report.damage is None
    assert [(c.item, c.status) for c in report.checks] == [
        ("matrices/RNA/counts", "ok"),
        ("matrices/RNA/countsT", "ok"),
        ("matrices/RNA/countSummaries/rowSums", "ok"),
        ("matrices/RNA/countSummaries/rowPositive", "ok"),
        ("matrices/RNA/countSummaries/columnPositive", "ok"),
        ("zarr.json", "ok"),
    ]
    assert _files(store) == before


@pytest.mark.parametrize(
    ("shard", "array", "chunk", "rows"),
    [
        (COUNTS_SHARD, "matrices/RNA/counts", "c/3/0", (192, 256)),
        (COUNTS_T_SHARD, "matrices/RNA/countsT", "c/5/0", (160, 192)),
    ],
)
def test_a_deleted_shard_is_named(
    store: Path, shard: str, array: str, chunk: str, rows: tuple[int, int]
) -> None:
    """A deleted shard reads as zeros; verify names its array and key, as missing."""
    ds = _open(store)
    lazy = ds.assays["RNA"].counts if array.endswith("counts") else ds.assays["RNA"].countsT
    assert int(lazy[rows[0] : rows[1]].sum().compute()) > 0
    (store / shard).unlink()
    assert int(lazy[rows[0] : rows[1]].sum().compute()) == 0
    damage = _open(store).verify().damage
    assert damage is not None
    assert (damage.array, damage.chunk) == (array, chunk)
    assert "no shard object" in damage.found
    assert "import the source again" in damage.remedy


def test_a_changed_count_value_is_placed_in_its_shard(store: Path) -> None:
    """A count rewritten in place (no checksum involved) is found in its shard by the identity."""
    counts = zarr.open_array(store / "matrices/RNA/counts", mode="r+")
    counts[200, 7] = int(np.asarray(counts[200, 7])) + 1
    report = _open(store).verify()
    assert report.damage is not None
    assert (report.damage.array, report.damage.chunk) == ("matrices/RNA/counts", "c/3/0")
    summaries = [c for c in report.checks if "countSummaries" in c.item]
    assert {c.status for c in summaries} == {"unchecked"}


def test_a_missing_summary_chunk_refuses_operations_and_pool(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deleted rowSums chunk (which read as zeros) is refused by summary(), pool and verify."""
    (store / "matrices/RNA/countSummaries/rowSums/c/0").unlink()
    with pytest.raises(CountSummariesError, match=r"countSummaries/rowSums: chunk c/0 is missing"):
        _open(store).assays["RNA"].summary("rowSums")
    cube = tmp_path / "pooled.cube.zarr"
    args = ["pool", str(store), "--sample", "sample", "--group", "cell_type", "-o", str(cube)]
    assert main([*args, "--cluster", "threads"]) == 1
    assert "CountSummariesError" in capsys.readouterr().err
    assert not cube.exists()
    assert main(["verify", str(store), "--cluster", "threads", "--json"]) == 1
    damage = json.loads(capsys.readouterr().out)["damage"]
    assert (damage["array"], damage["chunk"]) == ("matrices/RNA/countSummaries/rowSums", "c/0")


def test_a_changed_summary_value_is_named(store: Path) -> None:
    """A summary value that no longer matches the counts is named with both values."""
    row_sums = zarr.open_array(store / "matrices/RNA/countSummaries/rowSums", mode="r+")
    original = int(np.asarray(row_sums[5]))
    row_sums[5] = original + 1
    damage = _open(store).verify().damage
    assert damage is not None
    assert (damage.array, damage.chunk) == ("matrices/RNA/countSummaries/rowSums", "c/0")
    assert damage.expected.startswith(f"rowSums[5] = {original} ")
    assert damage.found == str(original + 1)


def test_artifact_digests_are_recorded_checked_and_not_identity(store: Path) -> None:
    """Publication records each array's digest outside provenance; verify checks it, or says unchecked."""
    ds = _open(store, zarr_mode="r+")
    normalized = ds.features.normalize("RNA", store_values=True)
    recorded = normalized.attrs[DIGESTS_ATTRIBUTE]
    assert set(recorded) == set(normalized.group.array_keys())
    assert recorded == {name: stored_digest(normalized.array(name)) for name in recorded}
    assert DIGESTS_ATTRIBUTE not in json.dumps(normalized.provenance)
    assert ds.features.normalize("RNA", store_values=True).ref == normalized.ref
    report = _open(store).verify()
    assert report.ok
    assert {c.item: c.status for c in report.checks}[normalized.ref.path] == "ok"

    data = zarr.open_array(store / normalized.ref.path / "data", mode="r+")
    data[0, 0] = np.asarray(data[0, 0]) + 1
    damage = _open(store).verify().damage
    assert damage is not None
    assert damage.array == f"{normalized.ref.path}/data"
    assert "invalidate_cache=True" in damage.remedy

    group = zarr.open_group(store / normalized.ref.path, mode="r+")
    del group.attrs[DIGESTS_ATTRIBUTE]
    report = _open(store).verify()
    check = {c.item: c for c in report.checks}[normalized.ref.path]
    assert check.status == "unchecked"
    assert "before array digests" in check.note
    assert report.ok


def test_unpublished_groups_are_listed_and_discarded_on_request(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group a killed producer left (complete=False) is unchecked; --discard-unpublished removes it."""
    ds = _open(store, zarr_mode="r+")
    normalized = ds.features.normalize("RNA")
    group = zarr.open_group(store / normalized.ref.path, mode="r+")
    unpublished = {k: v for k, v in group.attrs.items() if not k.startswith("cytearc:")}
    group.attrs.clear()
    group.attrs.update({**unpublished, "complete": False})
    check = {c.item: c for c in _open(store).verify().checks}[normalized.ref.path]
    assert (check.status, check.note) == (
        "unchecked",
        "never published (left by an interrupted producer, never read)",
    )
    assert main(["verify", str(store), "--discard-unpublished", "--cluster", "threads"]) == 0
    assert f"discarded unpublished artifact {normalized.ref}" in capsys.readouterr().err
    assert not (store / normalized.ref.path).exists()
    assert _open(store, zarr_mode="r+").discard_unpublished_artifacts() == []


def test_an_edited_provenance_is_damage_and_is_computed_again(store: Path) -> None:
    """A provenance edited after publication is damage naming the artifact; normalize computes a new one."""
    normalized = _open(store, zarr_mode="r+").features.normalize("RNA")
    group = zarr.open_group(store / normalized.ref.path, mode="r+")
    provenance = dict(group.attrs["provenance"])
    provenance["parameters"] = {**provenance["parameters"], "target_sum": 20000.0}
    group.attrs["provenance"] = provenance
    report = _open(store).verify()
    damage = report.damage
    assert damage is not None
    assert damage.array == normalized.ref.path
    assert "edited after publication" in damage.found
    assert "invalidate_cache=True" in damage.found
    assert {c.item: c.status for c in report.checks}[normalized.ref.path] == "damaged"
    again = _open(store, zarr_mode="r+").features.normalize("RNA")
    assert again.ref != normalized.ref
    assert (store / normalized.ref.path).is_dir()


@pytest.mark.parametrize("complete", ["delete", False])
def test_a_published_artifact_that_lost_complete_is_damage_and_kept(
    store: Path, complete: object
) -> None:
    """A group recording array digests but not complete=True is damaged, not unpublished: never discarded."""
    normalized = _open(store, zarr_mode="r+").features.normalize("RNA")
    group = zarr.open_group(store / normalized.ref.path, mode="r+")
    if complete == "delete":
        del group.attrs["complete"]
    else:
        group.attrs["complete"] = complete
    report = _open(store).verify()
    assert not report.ok
    check = {c.item: c for c in report.checks}[normalized.ref.path]
    assert check.status == "damaged"
    assert check.damage is not None
    assert "only its publication writes" in check.damage.found
    assert _open(store, zarr_mode="r+").discard_unpublished_artifacts() == []
    assert (store / normalized.ref.path / "zarr.json").is_file()


@pytest.mark.parametrize(
    ("level", "group"),
    [(0, "an artifact's group"), (1, "an artifact kind group"), (2, "the artifacts group")],
)
def test_an_artifact_folder_without_group_metadata_is_damage(
    store: Path, level: int, group: str
) -> None:
    """A deleted zarr.json of an artifact, its kind or its scope's artifacts is damage naming the folder."""
    normalized = _open(store, zarr_mode="r+").features.normalize("RNA")
    folder = store / normalized.ref.path
    for _ in range(level):
        folder = folder.parent
    (folder / "zarr.json").unlink()
    path = folder.relative_to(store).as_posix()
    with contextlib.ExitStack() as stack:
        if level == 2:  # the assay's group listing meets the folder: Zarr's own warning
            stack.enter_context(pytest.warns(ZarrUserWarning, match="Object at artifacts"))
        report = _open(store).verify()
    assert "array digests" not in {c.what for c in report.checks if c.item == normalized.ref.path}
    damage = report.damage
    assert damage is not None
    assert damage.array == path
    assert damage.found == f"arrays or chunks but no zarr.json: {group} metadata is missing"
    assert f"restore {path}/zarr.json" in damage.remedy
    assert [c.item for c in report.checks if c.status == "damaged"] == [path]


def test_the_array_digest_follows_its_specification(store: Path) -> None:
    """An artifact array's digest recomputed with hashlib from the module's description."""
    ds = _open(store, zarr_mode="r+")
    artifact = ds.features.normalize("RNA", store_values=True)
    array = artifact.array("data")
    values = np.asarray(array[...])
    rows = array.chunks[0]
    h = hashlib.sha256(
        f"cytearc array digest 1\nshape {values.shape[0]} {values.shape[1]}\ndtype <f4\n".encode()
    )
    for start in range(0, values.shape[0], rows):
        h.update(hashlib.sha256(values[start : start + rows].astype("<f4").tobytes()).digest())
    assert artifact.attrs[DIGESTS_ATTRIBUTE]["data"] == "sha256:" + h.hexdigest()


def test_cli_verify_exit_codes(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc verify` exits 0 when intact, 1 naming the damaged array and shard, 3 without a store."""
    assert main(["verify", str(store), "--cluster", "threads", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    (store / COUNTS_SHARD).unlink()
    assert main(["verify", str(store), "--cluster", "threads"]) == 1
    err = capsys.readouterr().err
    assert f"DAMAGED {store}: matrices/RNA/counts/c/3/0: expected the values of" in err
    assert "import the source again" in err
    assert main(["verify", str(tmp_path / "none.zarr"), "--cluster", "threads"]) == 3
    assert "StoreNotFoundError" in capsys.readouterr().err


# --- opening -------------------------------------------------------------------


@pytest.mark.parametrize("document", ["zarr.json", "matrices/RNA/counts/zarr.json"])
def test_a_truncated_zarr_json_names_the_file(store: Path, document: str) -> None:
    """A truncated metadata document is a StoreFormatError naming the file and the remedy."""
    target = store / document
    target.write_bytes(target.read_bytes()[:40])
    with pytest.raises(StoreFormatError) as info:
        _open(store).assays["RNA"]
    assert str(info.value).startswith(f"{target}: ")
    assert "restore" in str(info.value)


def test_an_unreachable_s3_endpoint_is_named() -> None:
    """A closed endpoint is a StoreAccessError naming it and the remedy, not a botocore traceback."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    options = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": endpoint},
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
    }
    with pytest.raises(StoreAccessError) as info:
        _open("s3://bucket/x.zarr", storage_options=options)
    message = str(info.value)
    assert message.startswith(
        f"s3://bucket/x.zarr: cannot reach the store at endpoint {endpoint} ("
    )
    assert "EndpointConnectionError" in message
    assert "check endpoint_url" in message
    assert isinstance(info.value, OSError)
