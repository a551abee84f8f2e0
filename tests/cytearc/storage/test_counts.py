"""Count arrays: counts and countsT written shard by shard, summaries and identity in the same pass."""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import pytest
import zarr
from zarr.codecs import GzipCodec, ZstdCodec

from cytearc.storage.counts import LAYOUT_ATTRIBUTE, CountsWritten, write_count_arrays
from cytearc.storage.layout import CountLayout

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

SMALL = CountLayout(unit_bytes=2**16, chunk_bytes=2**12)


def _matrix(n_rows: int = 1100, n_cols: int = 300, *, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.negative_binomial(1, 0.6, size=(n_rows, n_cols)) * (
        rng.random((n_rows, n_cols)) < 0.1
    )
    values[600:800] = 0
    return values.astype(np.uint16)


def _write(
    path: Path,
    values: np.ndarray,
    *,
    layout: CountLayout = SMALL,
    compressor: Any = None,
    **kwargs: Any,
) -> tuple[zarr.Group, CountsWritten]:
    group = zarr.create_group(store=path, zarr_format=3)
    written = write_count_arrays(
        group,
        da.from_array(values, chunks=(333, 100)),
        layout=layout,
        compressor=compressor,
        **kwargs,
    )
    return group, written


def _reference_fingerprint(values: np.ndarray) -> str:
    """Encoding version 1 from its text, with struct and hashlib only."""
    word = "float64" if values.dtype.kind == "f" else "int64"
    fmt = "<d" if word == "float64" else "<q"
    h = hashlib.sha256(
        f"cytearc counts fingerprint 1\nshape {values.shape[0]} {values.shape[1]}\ntype {word}\n".encode()
    )
    for start in range(0, values.shape[0], 256):
        block = values[start : start + 256].ravel()
        h.update(hashlib.sha256(b"".join(struct.pack(fmt, v) for v in block.tolist())).digest())
    return "sha256:" + h.hexdigest()


def test_counts_transpose_and_summaries(tmp_path: Path) -> None:
    """Counts equals the source, countsT equals counts.T, summaries equal numpy's."""
    values = _matrix()
    group, written = _write(tmp_path / "m.zarr", values)
    counts, counts_t = group["counts"], group["countsT"]
    assert isinstance(counts, zarr.Array)
    assert isinstance(counts_t, zarr.Array)
    np.testing.assert_array_equal(counts[:], values)
    np.testing.assert_array_equal(counts_t[:], values.T)
    assert counts.shards is not None
    assert counts_t.shards is not None
    assert counts.dtype == counts_t.dtype == np.uint16
    np.testing.assert_array_equal(written.row_sums, values.sum(axis=1))
    np.testing.assert_array_equal(written.row_positive, (values > 0).sum(axis=1))
    np.testing.assert_array_equal(written.column_positive, (values > 0).sum(axis=0))
    assert (
        group.attrs[LAYOUT_ATTRIBUTE]
        == counts.attrs[LAYOUT_ATTRIBUTE]
        == counts_t.attrs[LAYOUT_ATTRIBUTE]
    )
    assert counts.attrs["content_fingerprint"] == written.content_fingerprint


def test_fingerprint_matches_reference(tmp_path: Path) -> None:
    """The content fingerprint follows the documented encoding."""
    values = _matrix(n_rows=600, n_cols=40)
    _, written = _write(tmp_path / "m.zarr", values)
    assert written.content_fingerprint == _reference_fingerprint(values)


@pytest.mark.slow
@pytest.mark.parametrize(
    "variant",
    ["halved layout", "bigger layout", "gzip", "zstd", "uint32", "int64"],
)
def test_identity_ignores_layout_compressor_and_width(tmp_path: Path, variant: str) -> None:
    """Another layout policy, compressor or integer width gives the same content fingerprint."""
    values = _matrix()
    _, base = _write(tmp_path / "a.zarr", values)
    kwargs: dict[str, Any] = {}
    other = values
    if variant == "halved layout":
        kwargs["layout"] = SMALL.halved()
    elif variant == "bigger layout":
        kwargs["layout"] = CountLayout(unit_bytes=2**20, chunk_bytes=2**14)
    elif variant == "gzip":
        kwargs["compressor"] = GzipCodec(level=1)
    elif variant == "zstd":
        kwargs["compressor"] = ZstdCodec(level=3)
    else:
        other = values.astype(variant)
    _, again = _write(tmp_path / "b.zarr", other, **kwargs)
    assert again.content_fingerprint == base.content_fingerprint


def test_one_changed_value_changes_identity(tmp_path: Path) -> None:
    """Any single value change changes the content fingerprint."""
    values = _matrix()
    changed = values.copy()
    changed[1099, 299] += 1
    assert (
        _write(tmp_path / "a.zarr", values)[1].content_fingerprint
        != _write(tmp_path / "b.zarr", changed)[1].content_fingerprint
    )


def test_zero_shards_are_not_stored(tmp_path: Path) -> None:
    """Rows 600:800 are zero, so their shards have no object."""
    values = _matrix()
    group, _ = _write(tmp_path / "m.zarr", values)
    counts = group["counts"]
    assert isinstance(counts, zarr.Array)
    assert counts.shards is not None
    shard_rows = counts.shards[0]
    stored = {int(p.parent.name) for p in (tmp_path / "m.zarr" / "counts" / "c").glob("*/0")}
    empty = {
        i
        for i in range(-(-1100 // shard_rows))
        if not values[i * shard_rows : (i + 1) * shard_rows].any()
    }
    assert empty
    assert not stored & empty
    assert stored | empty == set(range(-(-1100 // shard_rows)))


@pytest.mark.slow
def test_same_identity_on_a_local_cluster(tmp_path: Path, engine: Engine) -> None:
    """Two worker processes write the same arrays and fingerprint as the threaded scheduler."""
    values = _matrix()
    _, threaded = _write(tmp_path / "a.zarr", values)
    group, clustered = _write(tmp_path / "b.zarr", values, engine=engine)
    assert clustered.content_fingerprint == threaded.content_fingerprint
    counts_t = group["countsT"]
    assert isinstance(counts_t, zarr.Array)
    np.testing.assert_array_equal(counts_t[:], values.T)


def test_float_counts_keep_float_identity(tmp_path: Path) -> None:
    """Float counts hash as float64, with -0.0 as 0.0."""
    values = _matrix(n_rows=300, n_cols=20).astype(np.float32) / 2
    negative_zero = values.copy()
    negative_zero[values == 0] = -0.0
    _, a = _write(tmp_path / "a.zarr", values, transpose=False)
    _, b = _write(tmp_path / "b.zarr", negative_zero, transpose=False)
    assert (
        a.content_fingerprint
        == b.content_fingerprint
        == _reference_fingerprint(values.astype(np.float64))
    )


@pytest.mark.slow
@pytest.mark.parametrize("on_cluster", [False, True])
def test_band_writer_from_sparse_bands(tmp_path: Path, on_cluster: bool, engine: Engine) -> None:
    """Sparse bands fed out of order to CountsWriter give the arrays and identity of a Dask write."""
    import scipy.sparse as sp  # noqa: PLC0415

    from cytearc.storage.counts import CountsWriter  # noqa: PLC0415

    values = _matrix()
    _, reference = _write(tmp_path / "a.zarr", values)
    group = zarr.create_group(store=tmp_path / "b.zarr", zarr_format=3)
    writer = CountsWriter(
        group,
        shape=values.shape,
        dtype=np.dtype(np.uint16),
        layout=SMALL,
        compressor=None,
        engine=engine if on_cluster else None,
        max_band_rows=256,
    )
    starts = list(range(0, values.shape[0], writer.band_rows))
    assert len(starts) == 5
    for start in reversed(starts):
        band = values[start : start + writer.band_rows].astype(np.int64)
        writer.write(start, sp.csr_matrix(band))
    written = writer.finish(transpose=True)
    assert written.content_fingerprint == reference.content_fingerprint
    np.testing.assert_array_equal(written.row_sums, reference.row_sums)
    counts_t = group["countsT"]
    assert isinstance(counts_t, zarr.Array)
    np.testing.assert_array_equal(counts_t[:], values.T)


@pytest.mark.slow
def test_a_writer_sends_sparse_bands_in_the_storage_dtype(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client holds and sends each sparse band in the storage dtype, refusing a value that does not fit."""
    import scipy.sparse as sp  # noqa: PLC0415

    from cytearc.errors import CountCastError  # noqa: PLC0415
    from cytearc.storage.counts import CountsWriter  # noqa: PLC0415

    sent: list[np.dtype[Any]] = []
    submit = CountsWriter._submit

    def recording(self: CountsWriter, first_row: int, block: Any, *, attempt: int) -> None:
        sent.append(block.dtype)
        submit(self, first_row, block, attempt=attempt)

    monkeypatch.setattr(CountsWriter, "_submit", recording)
    values = _matrix()

    def writer(name: str) -> CountsWriter:
        return CountsWriter(
            zarr.create_group(store=tmp_path / name, zarr_format=3),
            shape=values.shape,
            dtype=np.dtype(np.uint16),
            layout=SMALL,
            compressor=None,
            engine=engine,
            max_band_rows=256,
        )

    counts = writer("a.zarr")
    for start in range(0, values.shape[0], counts.band_rows):
        counts.append(sp.csr_matrix(values[start : start + counts.band_rows].astype(np.int64)))
    written = counts.finish(transpose=False)
    assert set(sent) == {np.dtype(np.uint16)}
    assert written.content_fingerprint == _reference_fingerprint(values)
    too_large = values[:256].astype(np.int64)
    too_large[3, 7] = 70_000
    with pytest.raises(CountCastError, match=r"counts rows 0:.*70000"):
        writer("b.zarr").write(0, sp.csr_matrix(too_large))
