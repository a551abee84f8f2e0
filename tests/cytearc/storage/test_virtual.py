"""Virtual counts of a composite store: gathered reads, the chunk-byte rule, batched streams, Dask, damage."""

from __future__ import annotations

import collections
import math
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st
from zarr.codecs import ZstdCodec
from zarr.storage import LocalStore, WrapperStore

from cytearc.errors import OperationArgumentError, StoreDamageError, StoreFormatError
from cytearc.storage.composite_map import CompositeMap, merge_map
from cytearc.storage.virtual import SourceArrays, VirtualArrayReader, virtual_dask_array

if TYPE_CHECKING:
    from pathlib import Path

    from zarr.abc.store import ByteRequest
    from zarr.core.buffer import Buffer, BufferPrototype

    from cytearc.engine.cluster import Engine

OUT_DTYPE = np.dtype("u4")


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """One source: its cells, feature ids, dtype, geometry of counts and countsT (None: no countsT)."""

    name: str
    n_cells: int
    feature_ids: list[str]
    dtype: str
    shards: tuple[int, int]
    chunks: tuple[int, int]
    shards_t: tuple[int, int] | None
    chunks_t: tuple[int, int] | None


SPECS = (
    SourceSpec(
        name="a",
        n_cells=50,
        feature_ids=[f"g{i}" for i in range(30)],
        dtype="u2",
        shards=(16, 30),
        chunks=(4, 10),
        shards_t=(8, 64),
        chunks_t=(4, 16),
    ),
    SourceSpec(
        name="b",
        n_cells=40,
        feature_ids=[f"g{i}" for i in range(25, 10, -1)] + [f"h{i}" for i in range(10)],
        dtype="u2",
        shards=(8, 25),
        chunks=(2, 25),
        shards_t=(5, 40),
        chunks_t=(5, 8),
    ),
    SourceSpec(
        name="c",
        n_cells=30,
        feature_ids=["h3", "g0", "k0", "k1", "g29", "h9"],
        dtype="u1",
        shards=(10, 6),
        chunks=(5, 3),
        shards_t=None,
        chunks_t=None,
    ),
)


Gets = collections.Counter[tuple[str, str]]


class CountingStore(WrapperStore[LocalStore]):
    """A local store that counts each chunk ``get`` by store, key and byte range, in a shared counter."""

    def __init__(self, store: LocalStore, gets: Gets) -> None:
        super().__init__(store)
        self.gets = gets

    def _with_store(self, store: LocalStore) -> CountingStore:
        return type(self)(store, self.gets)

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        if not key.endswith("zarr.json"):
            self.gets[f"{self._store.root}/{key}", repr(byte_range)] += 1
        return await self._store.get(key, prototype, byte_range)


def _values(spec: SourceSpec, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (spec.n_cells, len(spec.feature_ids))
    values = rng.integers(1, 200, size=shape) * (rng.random(shape) < 0.3)
    return values.astype(spec.dtype)


def _write(path: Path, spec: SourceSpec, values: np.ndarray) -> None:
    group = zarr.open_group(LocalStore(path), mode="w").require_group("matrices/RNA")
    options: dict[str, Any] = {
        "dtype": spec.dtype,
        "fill_value": 0,
        "compressors": (ZstdCodec(level=1, checksum=True),),
    }
    counts = group.create_array(
        "counts", shape=values.shape, shards=spec.shards, chunks=spec.chunks, **options
    )
    counts[...] = values
    if spec.shards_t is not None:
        counts_t = group.create_array(
            "countsT", shape=values.T.shape, shards=spec.shards_t, chunks=spec.chunks_t, **options
        )
        counts_t[...] = values.T


def _open(path: Path, spec: SourceSpec, *, gets: Gets | None = None) -> SourceArrays:
    store = LocalStore(path, read_only=True)
    root: Any = store if gets is None else CountingStore(store, gets)
    counts = zarr.open_array(root, path="matrices/RNA/counts", mode="r")
    counts_t = (
        zarr.open_array(root, path="matrices/RNA/countsT", mode="r")
        if spec.shards_t is not None
        else None
    )
    return SourceArrays(counts=counts, counts_t=counts_t, name=spec.name)


def _reference(values: list[np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """The composite by hand: cells stacked in source order, features outer-joined by id, zeros elsewhere."""
    ids: list[str] = []
    for spec in SPECS:
        ids += [i for i in spec.feature_ids if i not in ids]
    out = np.zeros((sum(s.n_cells for s in SPECS), len(ids)), dtype=OUT_DTYPE)
    start = 0
    for spec, source in zip(SPECS, values, strict=True):
        for column, feature in enumerate(spec.feature_ids):
            out[start : start + spec.n_cells, ids.index(feature)] = source[:, column]
        start += spec.n_cells
    return out, ids


@dataclass(frozen=True, kw_only=True)
class Composite:
    paths: list[Path]
    values: list[np.ndarray]
    reference: np.ndarray
    reader: VirtualArrayReader

    def reader_counting(self) -> tuple[VirtualArrayReader, Gets]:
        """A reader over the same stores, and the counter of its chunk gets."""
        gets: Gets = collections.Counter()
        sources = [_open(p, s, gets=gets) for p, s in zip(self.paths, SPECS, strict=True)]
        reader = VirtualArrayReader(
            self.reader.composite, sources, dtype=OUT_DTYPE, shape=self.reference.shape
        )
        return reader, gets


def _composite(root: Path) -> Composite:
    paths = [root / f"{s.name}.zarr" for s in SPECS]
    values = [_values(s, seed) for seed, s in enumerate(SPECS)]
    for path, spec, v in zip(paths, SPECS, values, strict=True):
        _write(path, spec, v)
    reference, ids = _reference(values)
    composite, merged_ids = merge_map(
        n_cells=[s.n_cells for s in SPECS], feature_ids=[s.feature_ids for s in SPECS]
    )
    assert merged_ids == ids
    sources = [_open(p, s) for p, s in zip(paths, SPECS, strict=True)]
    reader = VirtualArrayReader(composite, sources, dtype=OUT_DTYPE, shape=reference.shape)
    return Composite(paths=paths, values=values, reference=reference, reader=reader)


@pytest.fixture(scope="module")
def composite(tmp_path_factory: pytest.TempPathFactory) -> Composite:
    return _composite(tmp_path_factory.mktemp("virtual"))


def _selection(n: int) -> st.SearchStrategy[Any]:
    bound = st.integers(-n - 2, n + 2) | st.none()
    slices = st.builds(slice, bound, bound, st.sampled_from([None, 1, 2, 3, -1, -2]))
    fancy = st.lists(st.integers(0, n - 1), max_size=2 * n).map(
        lambda v: np.asarray(v, dtype=np.int64)
    )
    negative = st.lists(st.integers(-n, n - 1), min_size=1, max_size=8).map(np.asarray)
    masks = st.lists(st.booleans(), min_size=n, max_size=n).map(np.asarray)
    return slices | fancy | negative | masks


N_CELLS = sum(s.n_cells for s in SPECS)
N_FEATURES = len({i for s in SPECS for i in s.feature_ids})


def test_merge_map_is_the_merge_layout(composite: Composite) -> None:
    """Cells in source order; features the union by id in order of first appearance, -1 where missing."""
    mapped = composite.reader.composite
    assert mapped.shape == composite.reference.shape == (N_CELLS, N_FEATURES)
    assert mapped.row_sources.tolist() == [0] * 50 + [1] * 40 + [2] * 30
    assert mapped.source_rows.tolist() == [*range(50), *range(40), *range(30)]
    assert mapped.feature_columns[2, :5].tolist() == [1, -1, -1, -1, -1]
    assert mapped.feature_columns[1, 25].tolist() == 0
    assert not mapped.feature_columns.flags.writeable


@given(rows=_selection(N_CELLS), features=_selection(N_FEATURES))
def test_read_equals_the_numpy_composite(composite: Composite, rows: Any, features: Any) -> None:
    """Slices, fancy (unsorted, repeated, negative) and masks read the hand-built outer join, in both layouts."""
    expected = composite.reference[rows][:, features]
    got = composite.reader.read(rows, features)
    assert got.dtype == OUT_DTYPE
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(
        composite.reader.read(rows, features, layout="features"), expected.T
    )
    sparse = composite.reader.read_sparse(rows, features)
    assert sparse.dtype == OUT_DTYPE
    assert sparse.has_sorted_indices
    np.testing.assert_array_equal(sparse.toarray(), expected)


def _touched_bytes(array: zarr.Array[Any], first: np.ndarray, second: np.ndarray) -> int:
    """Chunks of ``array`` intersecting first x second, times one chunk's bytes: the rule, by sets."""
    a, b = array.chunks
    chunks = {(i // a, j // b) for i in first.tolist() for j in second.tolist()}
    return len(chunks) * math.prod(array.chunks) * np.dtype(array.dtype).itemsize


@pytest.mark.parametrize(
    ("rows", "features", "orientations"),
    [
        (slice(None), [12, 29], {"a": "countsT", "b": "countsT", "c": "counts"}),
        (slice(None), [20], {"a": "countsT", "b": "countsT"}),
        ([3, 60, 100], slice(None), {"a": "counts", "b": "counts", "c": "counts"}),
        (slice(0, 4), slice(None), {"a": "counts"}),
    ],
)
def test_orientation_follows_the_chunk_byte_rule(
    composite: Composite, rows: Any, features: Any, orientations: dict[str, str]
) -> None:
    """Few features of many cells read countsT, few cells read counts, a source without countsT reads counts."""
    reader = composite.reader
    plans = reader.plan(rows, features)
    assert {p.name: p.orientation for p in plans} == orientations
    row_shares = reader.composite.rows_by_source(rows)
    column_shares = reader.composite.columns_by_source(features)
    for plan in plans:
        source = reader.sources[plan.source]
        source_rows = row_shares[plan.source][1]
        source_columns = column_shares[plan.source][1]
        assert plan.counts_bytes == _touched_bytes(source.counts, source_rows, source_columns)
        if source.counts_t is None:
            assert plan.counts_t_bytes is None
            continue
        assert plan.counts_t_bytes == _touched_bytes(source.counts_t, source_columns, source_rows)
        cheaper = "countsT" if plan.counts_t_bytes < plan.counts_bytes else "counts"
        assert plan.orientation == cheaper


def test_orientation_ties_read_counts(tmp_path: Path) -> None:
    """Equal chunk bytes in both orientations read counts."""
    values = np.arange(24, dtype="u2").reshape(6, 4)
    spec = SourceSpec(
        name="t",
        n_cells=6,
        feature_ids=list("wxyz"),
        dtype="u2",
        shards=(2, 4),
        chunks=(2, 2),
        shards_t=(4, 6),
        chunks_t=(2, 2),
    )
    _write(tmp_path / "t.zarr", spec, values)
    composite, _ = merge_map(n_cells=[6], feature_ids=[spec.feature_ids])
    reader = VirtualArrayReader(
        composite, [_open(tmp_path / "t.zarr", spec)], dtype="u2", shape=(6, 4)
    )
    (plan,) = reader.plan([0], [0])
    assert (plan.orientation, plan.counts_bytes, plan.counts_t_bytes) == ("counts", 8, 8)


def test_plan_skips_sources_the_selection_misses(composite: Composite) -> None:
    """A source with no selected cells, or none of the selected features, is not read."""
    assert [p.name for p in composite.reader.plan(slice(0, 50), slice(None))] == ["a"]
    k0 = 40  # features k0 and k1 exist only in source c
    assert composite.reader.composite.feature_columns[:, k0].tolist() == [-1, -1, 2]
    assert composite.reader.plan(slice(0, 90), [k0]) == ()
    np.testing.assert_array_equal(composite.reader.read(slice(0, 90), [k0]), 0)


GROUPS = [np.arange(i, min(i + 7, N_FEATURES)) for i in range(0, N_FEATURES, 7)]
GROUPS += [np.array([41, 3, 3, 17]), slice(40, 10, -3), np.zeros(0, dtype=np.int64)]


@pytest.mark.parametrize("budget", [1, 15_000, 10**9])
def test_feature_stream_yields_each_group(composite: Composite, budget: int) -> None:
    """Every group is yielded once, in order, with its values, whatever the batching."""
    rows = np.array([5, 70, 119, 0, 60, 61])
    batches = composite.reader.batch_groups(GROUPS, rows=rows, budget_bytes=budget)
    assert [i for b in batches for i in b] == list(range(len(GROUPS)))
    if budget == 1:
        assert all(len(b) == 1 for b in batches)
    if budget == 10**9:
        assert batches == (range(len(GROUPS)),)
    seen = []
    for index, block in composite.reader.feature_stream(GROUPS, rows=rows, budget_bytes=budget):
        seen.append(index)
        np.testing.assert_array_equal(block, composite.reference[rows][:, GROUPS[index]])
    assert seen == list(range(len(GROUPS)))


def test_feature_stream_batches_fit_the_budget(composite: Composite) -> None:
    """A batch of several groups holds its dense output plus touched chunks within the budget."""
    reader = composite.reader
    budget = 15_000
    batches = reader.batch_groups(GROUPS[:8], budget_bytes=budget)
    assert 1 < len(batches) < 8
    for batch in batches:
        features = np.concatenate([np.arange(N_FEATURES)[GROUPS[i]] for i in batch])
        need = N_CELLS * len(features) * OUT_DTYPE.itemsize + sum(
            p.read_bytes for p in reader.plan(slice(None), features)
        )
        assert need <= budget or len(batch) == 1


def test_feature_stream_fetches_each_chunk_once_per_batch(composite: Composite) -> None:
    """Within a batch each source chunk (key and byte range) is fetched once, only when the batch starts."""
    reader, gets = composite.reader_counting()
    groups = GROUPS[:8]
    budget = 15_000
    batches = reader.batch_groups(groups, budget_bytes=budget)
    starts = {b[0]: b for b in batches}
    stream = reader.feature_stream(groups, budget_bytes=budget)
    for index, _ in stream:
        if index in starts:
            assert gets, f"the batch starting at group {index} fetched nothing"
            assert max(gets.values()) == 1, gets.most_common(3)
        else:
            assert not gets, f"group {index} fetched {gets} inside its batch"
        gets.clear()
    batched = 0
    for _ in reader.feature_stream(groups, budget_bytes=budget):
        batched += sum(gets.values())
        gets.clear()
    for _ in reader.feature_stream(groups, budget_bytes=1):
        pass
    assert sum(gets.values()) > batched


@pytest.mark.parametrize("orientation", ["cells", "features"])
def test_dask_arrays_compute_to_the_reference_on_threads(
    composite: Composite, orientation: Literal["cells", "features"]
) -> None:
    """Blocks of block_rows along the first axis, full width, compute to the reference."""
    x = virtual_dask_array(composite.reader, orientation=orientation, block_rows=32)
    expected = composite.reference if orientation == "cells" else composite.reference.T
    assert x.shape == expected.shape
    assert x.dtype == OUT_DTYPE
    assert x.chunks[0][0] == 32
    assert x.chunks[1] == (expected.shape[1],)
    np.testing.assert_array_equal(x.compute(scheduler="threads"), expected)
    np.testing.assert_array_equal(x[7].compute(scheduler="threads"), expected[7])
    np.testing.assert_array_equal(
        x[3:40:5, ::-2].compute(scheduler="threads"), expected[3:40:5, ::-2]
    )
    again = virtual_dask_array(composite.reader, orientation=orientation, block_rows=32)
    assert again.name == x.name


def test_reader_pickles(composite: Composite) -> None:
    """The reader travels to worker processes: a pickled copy reads the same values."""
    copy = pickle.loads(pickle.dumps(composite.reader))
    np.testing.assert_array_equal(copy.read(slice(None), slice(None)), composite.reference)


@pytest.mark.slow
def test_dask_arrays_compute_on_a_local_cluster(composite: Composite, engine: Engine) -> None:
    """Two worker processes compute both orientations to the reference."""
    assert engine.client is not None
    cells = virtual_dask_array(composite.reader, orientation="cells", block_rows=16)
    features = virtual_dask_array(composite.reader, orientation="features", block_rows=16)
    for x, expected in ((cells, composite.reference), (features, composite.reference.T)):
        np.testing.assert_array_equal(engine.client.compute(x).result(), expected)


def test_a_damaged_chunk_raises_store_damage_error_naming_it(tmp_path: Path) -> None:
    """Garbage in a shard of counts fails the read with the array and the shard's key named."""
    built = _composite(tmp_path)
    shard = built.paths[1] / "matrices" / "RNA" / "counts" / "c" / "1" / "0"
    shard.write_bytes(b"garbage" * 40)
    rows = np.array([50 + 9, 50 + 10])  # source b, rows 9 and 10: its second shard of 8 rows
    assert {p.name: p.orientation for p in built.reader.plan(rows, slice(None))}["b"] == "counts"
    with pytest.raises(
        StoreDamageError, match=r"b\.zarr/matrices/RNA/counts/c/1/0: .*cytearc verify"
    ):
        built.reader.read(rows, slice(None))
    np.testing.assert_array_equal(  # countsT of source b is intact and still read
        built.reader.read(slice(50, 90), [25]), built.reference[50:90, [25]]
    )


def _map(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "row_sources": np.array([0, 1]),
        "source_rows": np.array([0, 0], dtype=np.int64),
        "feature_columns": np.array([[0, -1], [0, 1]], dtype=np.int64),
        "n_sources": 2,
    }
    return fields | changes


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"row_sources": [0, 1]}, r"row_sources: expected a numpy array, found list"),
        (
            {"row_sources": np.array([0.0, 1.0])},
            r"row_sources: expected an integer dtype, found dtype float64",
        ),
        (
            {"source_rows": np.array([0, 0], dtype=np.int32)},
            r"source_rows: expected int64, found dtype int32",
        ),
        ({"source_rows": np.zeros(3, dtype=np.int64)}, r"source_rows: 3 rows, row_sources has 2"),
        (
            {"feature_columns": np.zeros(2, dtype=np.int64)},
            r"feature_columns: expected 2 dimension\(s\)",
        ),
        (
            {"feature_columns": np.zeros((3, 2), dtype=np.int64)},
            r"feature_columns: 3 rows, expected one per source \(2\)",
        ),
        (
            {"row_sources": np.array([0, -1])},
            r"source index -1 at output row 1 is outside \[0, 2\)",
        ),
        (
            {"source_rows": np.array([0, -4], dtype=np.int64)},
            r"source_rows: row -4 at output row 1 is negative",
        ),
        (
            {"feature_columns": np.array([[0, -2], [0, 1]], dtype=np.int64)},
            r"column -2 of source 0 at output feature 1 is below -1",
        ),
        ({"n_sources": True}, r"n_sources: expected an integer, found True"),
        (
            {"n_sources": 0, "feature_columns": np.zeros((0, 2), dtype=np.int64)},
            r"expected at least one source",
        ),
    ],
)
def test_composite_map_refuses_malformed_arrays(changes: dict[str, Any], message: str) -> None:
    """Each wrong type, shape, dtype or range raises StoreFormatError naming the field."""
    with pytest.raises(StoreFormatError, match=message):
        CompositeMap(**_map(**changes))


def test_reader_refuses_sources_that_disagree(composite: Composite) -> None:
    """Rows or columns outside a source, a wrong recorded shape, an unsafe dtype, a non-transposed countsT."""
    mapped = composite.reader.composite
    sources = list(composite.reader.sources)
    shape = composite.reference.shape
    with pytest.raises(StoreFormatError, match=r"3 sources given, the map has 2"):
        CompositeMap(**_map()).validate_sources([(1, 2)] * 3, names=["x", "y", "z"])
    rows = mapped.source_rows.copy()
    rows[0] = 50
    shifted = CompositeMap(
        row_sources=mapped.row_sources,
        source_rows=rows,
        feature_columns=mapped.feature_columns,
        n_sources=3,
    )
    with pytest.raises(StoreFormatError, match=r"row 50 of source 'a' is outside its 50 cells"):
        VirtualArrayReader(shifted, sources, dtype=OUT_DTYPE, shape=shape)
    with pytest.raises(
        StoreFormatError, match=r"composite shape \(120, 50\) disagrees with its map's \(120, 42\)"
    ):
        VirtualArrayReader(mapped, sources, dtype=OUT_DTYPE, shape=(120, 50))
    with pytest.raises(
        StoreFormatError, match=r"source 'a': counts of dtype uint16 do not cast safely"
    ):
        VirtualArrayReader(mapped, sources, dtype="u1", shape=shape)
    with pytest.raises(StoreFormatError, match=r"source 'a': countsT has shape \(50, 30\)"):
        SourceArrays(counts=sources[0].counts, counts_t=sources[0].counts, name="a")
    with pytest.raises(StoreFormatError, match=r"source 1 repeats feature id 'x'"):
        merge_map(n_cells=[1, 1], feature_ids=[["x"], ["x", "y", "x"]])


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (np.array([120]), r"rows: position 120 is outside the 120 positions"),
        (np.array([[0]]), r"rows: expected a slice, a boolean mask or 1-D integers"),
        (np.array([0.5]), r"rows: expected a slice, a boolean mask or 1-D integers"),
        (np.ones(5, dtype=bool), r"rows: a boolean mask of shape \(5,\), expected \(120,\)"),
    ],
)
def test_selections_outside_the_output_are_refused(
    composite: Composite, rows: Any, message: str
) -> None:
    """A position outside the output, or a selection of the wrong kind, raises OperationArgumentError."""
    with pytest.raises(OperationArgumentError, match=message):
        composite.reader.read(rows, slice(None))


def test_stream_and_dask_options_are_checked(composite: Composite) -> None:
    """A budget or block size that is not a positive integer, or an unknown orientation, is refused."""
    with pytest.raises(
        OperationArgumentError, match=r"budget_bytes must be a positive integer, found 0"
    ):
        composite.reader.batch_groups(GROUPS, budget_bytes=0)
    with pytest.raises(
        OperationArgumentError, match=r"block_rows must be a positive integer, found 2.0"
    ):
        virtual_dask_array(composite.reader, orientation="cells", block_rows=2.0)  # type: ignore[arg-type]
    with pytest.raises(OperationArgumentError, match=r"orientation must be 'cells' or 'features'"):
        virtual_dask_array(composite.reader, orientation="genes", block_rows=2)  # type: ignore[arg-type]


def test_a_stream_of_no_groups_is_empty(composite: Composite) -> None:
    """No groups give no batches and yield nothing; the first group of a stream comes first, full height."""
    assert composite.reader.batch_groups([], budget_bytes=10) == ()
    assert list(composite.reader.feature_stream([], budget_bytes=10)) == []
    first, block = next(iter(composite.reader.feature_stream(GROUPS, budget_bytes=10)))
    assert (first, block.shape) == (0, (N_CELLS, 7))
