"""Fail-closed reading: a cube file changed on disk is refused with a named error.

Every case copies a pristine cube written by ``write_cube``, changes one thing
on disk, and checks which error of :mod:`cytepool.errors` is raised, when
(at ``read_cube``, when a layer is computed, or by ``verify_fingerprint``), and
that its message names the file.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
import zarr

from cytepool.cube import Cube, read_cube, write_cube
from cytepool.errors import (
    CubeDigestError,
    CubeError,
    CubeFormatError,
    CubeMetadataError,
    CubeNotFoundError,
    CubeReadError,
)
from cytepool.testing import tree_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

N_GROUPS, N_SAMPLES, N_FEATURES = 3, 4, 5000
"""5,000 features make two feature chunks per group: features 0:4096 and 4096:5000."""

COMPRESSIONS = ("gzip", "zstd", None)
STORED_CHUNK = "layers/counts/c/0/0/1"
"""A stored chunk: group 0, second feature chunk. Group 1 is all zero and stores no chunk."""


def _make_cube() -> Cube:
    rng = np.random.default_rng(7)
    counts = rng.poisson(2.0, size=(N_GROUPS, N_SAMPLES, N_FEATURES)).astype(np.int64)
    counts[1] = 0
    samples = pd.DataFrame(
        {
            "sample": ["s1", "s2", "s3", "s4"],
            "condition": ["ctrl", "stim", None, "ctrl"],
            "treated": [False, True, True, False],
            "age": np.array([31, 45, 52, 28], dtype=np.int64),
            "weight": [70.5, np.nan, -0.0, 80.25],
            "collected": pd.to_datetime(["2024-01-02", None, "2024-03-04", "2024-05-06"]),
        }
    )
    return Cube(
        samples=samples,
        groups=pd.DataFrame({"group": ["T", "B", "NK"], "lineage": ["lymph", "lymph", "nk"]}),
        features=pd.DataFrame(
            {
                "gene": [f"GENE{i}" for i in range(N_FEATURES)],
                "length": np.arange(N_FEATURES, dtype=np.int32) + 100,
            }
        ),
        layers={"counts": counts, "log_sum": np.log1p(counts.astype(np.float64))},
        n_cells=rng.integers(1, 100, size=(N_SAMPLES, N_GROUPS)),
        normalization={"method": "library_size", "target_sum": 10000},
        source={"tool": "test_tamper"},
    )


@pytest.fixture(scope="module")
def cube() -> Cube:
    return _make_cube()


@pytest.fixture(scope="module")
def pristine(cube: Cube, tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, Path]:
    base = tmp_path_factory.mktemp("pristine")
    return {c: write_cube(cube, base / f"{c}.cube.zarr", compression=c) for c in COMPRESSIONS}


def _copy(pristine: dict[str | None, Path], tmp_path: Path, compression: str | None) -> Path:
    """A private copy of the pristine cube written with ``compression``."""
    path = tmp_path / "tampered.cube.zarr"
    shutil.copytree(pristine[compression], path, symlinks=True)
    return path


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _assert_names(exc: BaseException, where: Path) -> None:
    assert str(where) in str(exc), f"message does not name {where}: {exc}"


# -- the pristine file -----------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_untampered_cube_reads_back_and_verifies(
    cube: Cube, pristine: dict[str | None, Path], compression: str | None
) -> None:
    """An untouched file (every column kind, bool included) reads back equal and verifies."""
    back = read_cube(pristine[compression])
    assert back.fingerprint == cube.fingerprint
    assert back.verify_fingerprint() == cube.fingerprint
    for axis in ("samples", "groups", "features"):
        pd.testing.assert_frame_equal(getattr(back, axis), getattr(cube, axis), check_dtype=False)
    np.testing.assert_array_equal(back.n_cells, cube.n_cells)
    for name, layer in cube.layers.items():
        np.testing.assert_array_equal(back.layers[name].compute(), layer)


# -- layer chunks -----------------------------------------------------------------


def test_flipped_byte_in_uncompressed_chunk_fails_whole_group_read(
    cube: Cube, pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """Without compression, a flipped chunk byte is a CubeDigestError when its group is read whole."""
    path = _copy(pristine, tmp_path, None)
    _flip_byte(path / STORED_CHUNK)
    back = read_cube(path)
    with pytest.raises(CubeDigestError) as info:
        back.layers["counts"][0].compute()
    _assert_names(info.value, path / "layers" / "counts")
    with pytest.raises(CubeDigestError):
        back.layers["counts"].compute()
    np.testing.assert_array_equal(back.layers["counts"][2].compute(), cube.layers["counts"][2])


def test_flipped_byte_in_uncompressed_chunk_fails_verify_fingerprint(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """Without compression, verify_fingerprint raises a CubeDigestError naming the file."""
    path = _copy(pristine, tmp_path, None)
    _flip_byte(path / STORED_CHUNK)
    back = read_cube(path)
    with pytest.raises(CubeDigestError) as info:
        back.verify_fingerprint()
    _assert_names(info.value, path)


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_flipped_byte_in_compressed_chunk_fails_read_and_verify(
    pristine: dict[str | None, Path], tmp_path: Path, compression: str
) -> None:
    """With gzip or zstd, a flipped chunk byte fails the group read and verify_fingerprint."""
    path = _copy(pristine, tmp_path, compression)
    _flip_byte(path / STORED_CHUNK)
    back = read_cube(path)
    with pytest.raises((CubeReadError, CubeDigestError)) as info:
        back.layers["counts"][0].compute()
    _assert_names(info.value, path / "layers" / "counts")
    with pytest.raises((CubeReadError, CubeDigestError)) as info:
        back.verify_fingerprint()
    _assert_names(info.value, path)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_deleted_chunk_fails_its_group_only(
    cube: Cube, pristine: dict[str | None, Path], tmp_path: Path, compression: str | None
) -> None:
    """A deleted chunk fails a whole read of its group; other groups still read, partly or whole."""
    path = _copy(pristine, tmp_path, compression)
    (path / STORED_CHUNK).unlink()
    back = read_cube(path)
    with pytest.raises(CubeDigestError) as info:
        back.layers["counts"][0].compute()
    _assert_names(info.value, path / "layers" / "counts")
    counts = cube.layers["counts"]
    np.testing.assert_array_equal(back.layers["counts"][2, :, 10:20].compute(), counts[2, :, 10:20])
    np.testing.assert_array_equal(back.layers["counts"][2].compute(), counts[2])


def test_deleted_chunk_fails_verify_fingerprint(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """After a chunk is deleted, verify_fingerprint raises a CubeDigestError naming the file."""
    path = _copy(pristine, tmp_path, "gzip")
    (path / STORED_CHUNK).unlink()
    back = read_cube(path)
    with pytest.raises(CubeDigestError) as info:
        back.verify_fingerprint()
    _assert_names(info.value, path)


@pytest.mark.parametrize(
    ("group", "tamper"),
    [
        pytest.param(
            0,
            lambda p: shutil.copyfile(p / "layers/counts/c/2/0/0", p / "layers/counts/c/0/0/0"),
            id="chunk-replaced-by-another-groups",
        ),
        pytest.param(
            1,
            lambda p: shutil.copytree(p / "layers/counts/c/0", p / "layers/counts/c/1"),
            id="chunks-added-to-all-zero-group",
        ),
    ],
)
def test_replaced_or_added_chunk_fails_whole_group_read(
    pristine: dict[str | None, Path],
    tmp_path: Path,
    group: int,
    tamper: Callable[[Path], object],
) -> None:
    """A chunk copied from elsewhere, valid on its own, fails its group's digest."""
    path = _copy(pristine, tmp_path, "gzip")
    tamper(path)
    back = read_cube(path)
    with pytest.raises(CubeDigestError) as info:
        back.layers["counts"][group].compute()
    _assert_names(info.value, path / "layers" / "counts")


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_truncated_chunk_fails_at_read(
    pristine: dict[str | None, Path], tmp_path: Path, compression: str | None
) -> None:
    """A truncated chunk is a CubeReadError or CubeDigestError at read and at verification."""
    path = _copy(pristine, tmp_path, compression)
    chunk = path / STORED_CHUNK
    chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])
    back = read_cube(path)
    with pytest.raises((CubeReadError, CubeDigestError)) as info:
        back.layers["counts"][0].compute()
    _assert_names(info.value, path / "layers" / "counts")
    with pytest.raises((CubeReadError, CubeDigestError)) as info:
        back.verify_fingerprint()
    _assert_names(info.value, path)


# -- array metadata ---------------------------------------------------------------


def test_changed_layer_shape_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """A layer whose zarr.json shape was edited is a CubeMetadataError at open."""
    path = _copy(pristine, tmp_path, "gzip")
    _edit_json(path / "layers/counts/zarr.json", lambda d: d.update(shape=[3, 4, 4999]))
    with pytest.raises(CubeMetadataError) as info:
        read_cube(path)
    _assert_names(info.value, path / "layers" / "counts")
    assert "shape" in str(info.value)


def _set_chunk_shape(shape: list[int]) -> Callable[[dict[str, Any]], object]:
    return lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=shape)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda d: d["codecs"][0]["configuration"].update(endian="big"), id="endian-big"
        ),
        pytest.param(
            lambda d: d["codecs"].insert(
                0, {"name": "transpose", "configuration": {"order": [0, 2, 1]}}
            ),
            id="transpose-codec",
        ),
        pytest.param(lambda d: d["codecs"].append({"name": "crc32c"}), id="crc32c-codec"),
        pytest.param(
            lambda d: d.update(dimension_names=["group", "feature", "sample"]),
            id="dimension-names",
        ),
        pytest.param(lambda d: d.update(dimension_names=None), id="no-dimension-names"),
        pytest.param(_set_chunk_shape([1, 2, 4096]), id="chunk-splits-samples"),
        pytest.param(_set_chunk_shape([3, 4, 4096]), id="chunk-holds-groups"),
        pytest.param(_set_chunk_shape([1, 4, 5000]), id="chunk-wider-than-4096"),
        pytest.param(
            lambda d: d["chunk_key_encoding"]["configuration"].update(separator="."),
            id="chunk-key-separator",
        ),
        pytest.param(lambda d: d.update(fill_value=7), id="fill-value"),
    ],
)
def test_changed_layer_metadata_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path, edit: Callable[[dict[str, Any]], object]
) -> None:
    """Codecs, dimension names, chunk shape, chunk keys or fill value edited: CubeMetadataError at open."""
    path = _copy(pristine, tmp_path, "gzip")
    _edit_json(path / "layers/counts/zarr.json", edit)
    with pytest.raises(CubeMetadataError) as info:
        read_cube(path)
    _assert_names(info.value, path / "layers" / "counts")


# -- tables and cell numbers ------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_edited_text_level_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path, compression: str | None
) -> None:
    """One text level edited in a column's zarr.json is a CubeDigestError at open."""
    path = _copy(pristine, tmp_path, compression)
    meta = path / "samples/condition/zarr.json"
    assert json.loads(meta.read_text(encoding="utf-8"))["attributes"]["levels"] == ["ctrl", "stim"]
    _edit_json(meta, lambda d: d["attributes"]["levels"].__setitem__(1, "stimulated"))
    with pytest.raises(CubeDigestError) as info:
        read_cube(path)
    _assert_names(info.value, path)
    assert "samples" in str(info.value)


def _bump_first(values: np.ndarray) -> np.ndarray:
    out = values.copy()
    out.flat[0] += 1
    return out


@pytest.mark.parametrize("array", ["n_cells", "samples/age", "groups/lineage", "features/length"])
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_tampered_stored_values_fail_at_open(
    pristine: dict[str | None, Path], tmp_path: Path, compression: str | None, array: str
) -> None:
    """Cell numbers or table values rewritten through Zarr are a CubeDigestError at open."""
    path = _copy(pristine, tmp_path, compression)
    stored = zarr.open_array(path / array, mode="r+")
    stored[...] = _bump_first(np.asarray(stored[...]))
    with pytest.raises(CubeDigestError) as info:
        read_cube(path)
    _assert_names(info.value, path)
    assert array.partition("/")[0] in str(info.value)


def test_deleted_table_column_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """A table column array deleted from the file is a CubeFormatError at open."""
    path = _copy(pristine, tmp_path, "gzip")
    shutil.rmtree(path / "samples" / "age")
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, path / "samples")


def test_deleted_table_group_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """A whole table group deleted from the file is a CubeFormatError at open."""
    path = _copy(pristine, tmp_path, "gzip")
    shutil.rmtree(path / "samples")
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, path)


def test_unparsable_column_metadata_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """A column whose zarr.json is not JSON is a CubeFormatError naming that array."""
    path = _copy(pristine, tmp_path, "gzip")
    (path / "samples/age/zarr.json").write_text("{", encoding="utf-8")
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, path / "samples")


# -- root attributes and root metadata --------------------------------------------


def _set_attr(key: str, value: object) -> Callable[[dict[str, Any]], object]:
    return lambda d: d["attributes"].__setitem__(key, value)


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        pytest.param(_set_attr("format", "anndata"), CubeNotFoundError, id="format"),
        pytest.param(_set_attr("format_version", 2), CubeFormatError, id="format_version-2"),
        pytest.param(
            _set_attr("fingerprint_version", 2), CubeFormatError, id="fingerprint_version-2"
        ),
        pytest.param(
            _set_attr("fingerprint", "sha256:" + "0" * 64), CubeDigestError, id="fingerprint"
        ),
        pytest.param(
            lambda d: d["attributes"]["digests"].update(samples="sha256:xyz"),
            CubeFormatError,
            id="digests-malformed",
        ),
        pytest.param(_set_attr("digests", "none"), CubeFormatError, id="digests-not-an-object"),
        pytest.param(
            lambda d: d["attributes"].pop("provenance"), CubeFormatError, id="provenance-removed"
        ),
        pytest.param(
            lambda d: d["attributes"]["provenance"].update(operations="none"),
            CubeFormatError,
            id="provenance-malformed",
        ),
        pytest.param(
            lambda d: d["attributes"]["shape"].update(features=4999),
            CubeDigestError,
            id="shape",
        ),
        pytest.param(
            _set_attr("normalization", {"method": "none"}), CubeDigestError, id="normalization"
        ),
        pytest.param(
            lambda d: d["attributes"]["provenance"]["cytepool"].update(version="0.0.1"),
            CubeDigestError,
            id="provenance-version",
        ),
        pytest.param(
            lambda d: d["attributes"]["provenance"].update(source={"tool": "another"}),
            CubeDigestError,
            id="provenance-source",
        ),
        pytest.param(
            _set_attr("provenance_digest", 7), CubeFormatError, id="provenance-digest-not-text"
        ),
    ],
)
def test_edited_root_attribute_fails_at_open(
    pristine: dict[str | None, Path],
    tmp_path: Path,
    edit: Callable[[dict[str, Any]], object],
    error: type[CubeError],
) -> None:
    """An edited known root attribute is refused at open with the named error."""
    path = _copy(pristine, tmp_path, "gzip")
    _edit_json(path / "zarr.json", edit)
    with pytest.raises(error) as info:
        read_cube(path)
    _assert_names(info.value, path)


def test_a_cube_without_a_provenance_digest_reads(
    cube: Cube, pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """provenance_digest is optional: cubes of other writers (and earlier releases) open as before."""
    path = _copy(pristine, tmp_path, "gzip")
    _edit_json(path / "zarr.json", lambda d: d["attributes"].pop("provenance_digest"))
    back = read_cube(path)
    assert back.provenance == cube.provenance
    assert back.verify_fingerprint() == cube.fingerprint


def test_unknown_root_attribute_is_ignored(
    cube: Cube, pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """An extra root attribute such as a title is ignored: same values, same fingerprint."""
    path = _copy(pristine, tmp_path, "gzip")
    _edit_json(path / "zarr.json", _set_attr("title", "A pseudobulk cube"))
    back = read_cube(path)
    assert back.fingerprint == cube.fingerprint
    assert back.verify_fingerprint() == cube.fingerprint
    np.testing.assert_array_equal(back.layers["counts"].compute(), cube.layers["counts"])


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
        pytest.param(lambda b: b[:100], id="truncated-to-100-bytes"),
        pytest.param(lambda _: b"", id="empty"),
        pytest.param(lambda _: b"null", id="json-null"),
        pytest.param(lambda _: b"[]", id="json-list"),
    ],
)
def test_damaged_root_metadata_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    """A truncated or non-object root zarr.json is a CubeFormatError at open."""
    path = _copy(pristine, tmp_path, "gzip")
    root = path / "zarr.json"
    root.write_bytes(damage(root.read_bytes()))
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, path)


# -- reading never writes ---------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_reading_never_modifies_the_store(
    pristine: dict[str | None, Path], tmp_path: Path, compression: str | None
) -> None:
    """Opening, computing every layer and verifying leave every file and path unchanged."""
    path = _copy(pristine, tmp_path, compression)
    before = tree_snapshot(path)
    back = read_cube(path)
    for layer in back.layers.values():
        layer.compute()
    back.layers["counts"][2, :, :5].compute()
    back.verify_fingerprint()
    assert back.n_cells is not None
    assert tree_snapshot(path) == before


def test_failed_reads_never_modify_the_store(
    pristine: dict[str | None, Path], tmp_path: Path
) -> None:
    """Reads that fail on a damaged file leave every file and path unchanged too."""
    path = _copy(pristine, tmp_path, None)
    _flip_byte(path / STORED_CHUNK)
    before = tree_snapshot(path)
    back = read_cube(path)
    with pytest.raises(CubeDigestError):
        back.layers["counts"].compute()
    with pytest.raises(CubeDigestError):
        back.verify_fingerprint()
    assert tree_snapshot(path) == before


# -- damaged metadata of the layers group, the layers, n_cells and table columns ------


METADATA_FILES = (
    "layers/zarr.json",
    "layers/counts/zarr.json",
    "n_cells/zarr.json",
    "samples/age/zarr.json",
    "features/gene/zarr.json",
)


def _flipped(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize("metadata", METADATA_FILES)
@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_flipped, id="flipped-byte"),
        pytest.param(lambda _: b"{", id="invalid-json"),
        pytest.param(lambda _: b"null", id="json-null"),
        pytest.param(lambda _: b'{"zarr_format": 3}', id="no-node-type"),
        pytest.param(
            lambda _: b'{"zarr_format": 3, "node_type": "array"}', id="array-without-fields"
        ),
        pytest.param(lambda _: b'{"zarr_format": 2}', id="zarr-v2"),
    ],
)
def test_damaged_member_metadata_fails_at_open(
    pristine: dict[str | None, Path],
    tmp_path: Path,
    metadata: str,
    damage: Callable[[bytes], bytes],
) -> None:
    """A damaged zarr.json of the layers group, a layer, n_cells or a column is a CubeFormatError naming it."""
    path = _copy(pristine, tmp_path, "gzip")
    target = path / metadata
    target.write_bytes(damage(target.read_bytes()))
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, target.parent)


@pytest.mark.parametrize("metadata", [m for m in METADATA_FILES if m != "layers/zarr.json"])
def test_truncated_array_metadata_fails_at_open(
    pristine: dict[str | None, Path], tmp_path: Path, metadata: str
) -> None:
    """An array's zarr.json cut to 200 bytes is a CubeFormatError naming that array."""
    path = _copy(pristine, tmp_path, "gzip")
    target = path / metadata
    assert target.stat().st_size > 200
    target.write_bytes(target.read_bytes()[:200])
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, target.parent)


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        pytest.param(lambda d: d.update(shape="abc"), "zarr.json", id="shape-not-a-list"),
        pytest.param(lambda d: d.update(data_type="float1"), "zarr.json", id="unknown-data-type"),
        pytest.param(
            lambda d: d.update(codecs=[{"name": "nope"}]), "zarr.json", id="unknown-codec"
        ),
        pytest.param(lambda d: d.update(attributes=[1]), "'attributes'", id="attributes-a-list"),
    ],
)
def test_invalid_column_metadata_fails_at_open(
    pristine: dict[str | None, Path],
    tmp_path: Path,
    edit: Callable[[dict[str, Any]], object],
    found: str,
) -> None:
    """Valid JSON that is not valid Zarr array metadata is a CubeFormatError naming the column."""
    path = _copy(pristine, tmp_path, "gzip")
    _edit_json(path / "samples/age/zarr.json", edit)
    with pytest.raises(CubeFormatError) as info:
        read_cube(path)
    _assert_names(info.value, path / "samples/age")
    assert found in str(info.value)
