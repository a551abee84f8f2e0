r"""Verifying a store: every stored value read back and checked against what the store recorded.

:func:`verify_store` (``ds.verify()``, ``cytearc verify STORE``) reads each
assay's ``counts`` and ``countsT`` in bands of whole shards on the engine, one
task per band, and checks, in one graph:

- ``counts``: the content fingerprint of the values read
  (:mod:`cytearc.storage.identity`) equals its ``content_fingerprint``;
- ``countsT``: it holds the values of ``counts``, transposed. Both
  orientations give every nonzero count at cell ``i``, feature ``j`` with
  canonical 64-bit value ``v`` (the fingerprint's int64 or float64 bits) the
  check word ``h = m(m(i * n_features + j) xor v)``, ``m`` the SplitMix64
  finalizer, and sum the words modulo 2\ :sup:`64` per cell and per
  feature (over each shard column); the sums of the two orientations agree
  exactly when the values do, and the first that differs names the damaged
  shard;
- ``countSummaries``: ``rowSums``, ``rowPositive`` and ``columnPositive``
  equal the values recomputed from ``counts`` in the same pass (float row
  sums to a relative 1e-9, since a sum's order may differ);
- the dataset fingerprint recomputed from the cell ids, the feature ids and
  names, and the counts fingerprints;
- every published artifact: each array's digest
  (:mod:`cytearc.artifacts.digests`) equals the one recorded at publication,
  and so does the digest of its identity attributes (artifact_id, kind,
  provenance). Artifacts published before digests were recorded, and groups
  never published, are *unchecked*, not damaged; a group that records array
  digests (written only by publication) but not ``complete=True`` is damaged;
- on a local store, every folder of an artifact, of an artifact kind, or of
  a scope's ``artifacts`` that holds files but no group ``zarr.json`` (Zarr
  no longer sees the artifacts in it) is damaged.

A missing shard reads as zeros, which is also what an all-zero shard left
unwritten reads as; it is damage exactly when the values then disagree with
the recorded identity. A chunk that fails its checksum is damage naming the
chunk. Nothing is written.

A composite (:mod:`cytearc.storage.composite`) stores no count arrays. Its
virtual ``counts`` are read band by band through a
:class:`~cytearc.storage.virtual.VirtualArrayReader` of the sources'
``counts`` and its virtual ``countsT`` gathered from the sources' ``countsT``
(whichever orientation the composite's own reader would choose, each
source array is read once) and checked as above: the content fingerprint,
the same values in both orientations, and the summaries. A source chunk that
fails to decode is damage naming the source's array and shard; values that
differ between the orientations name the cells and their source. Each
source's dataset and counts fingerprints are also read again and checked
against its binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

import numpy as np
import pandas as pd
import zarr
from dask.delayed import delayed
from zarr.storage import LocalStore, WrapperStore

from cytearc.artifacts.digests import (
    DIGESTS_ATTRIBUTE,
    array_digest,
    chunk_digest,
)
from cytearc.artifacts.store import artifact_refs, open_artifact
from cytearc.assays.types import RNA_TYPES
from cytearc.engine.arrays import aligned_rows
from cytearc.errors import (
    ArtifactError,
    CountSummariesError,
    CyteArcError,
    IncompleteArtifactError,
    StoreDamageError,
)
from cytearc.io.importer import dataset_fingerprint
from cytearc.metadata.table import REPLACING_ATTRIBUTE, replacing
from cytearc.storage.composite import COMPOSITE_ATTRIBUTE, VirtualCounts
from cytearc.storage.counts import band_result, band_unit
from cytearc.storage.damage import (
    DECODE_ERRORS,
    Check,
    Damage,
    VerifyReport,
    locate_failure,
    missing_units,
    store_location,
    unit_key,
    unit_regions,
    unit_shape,
)
from cytearc.storage.destinations import ZARR_PARTIAL
from cytearc.storage.identity import counts_fingerprint
from cytearc.storage.nodes import ACCESS_ERRORS
from cytearc.storage.virtual import SourceArrays, VirtualArrayReader
from cytepool.cube.encoding import DIGEST_PATTERN, canonical_layer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dask.delayed import Delayed

    from cytearc.artifacts.refs import ArtifactRef
    from cytearc.assays.assay import Assay
    from cytearc.storage.composite import CompositeSources
    from cytearc.storage.store import Store

__all__ = ["Check", "Damage", "VerifyReport", "verify_store"]

COUNTS_REMEDY: Final = "restore the store from a copy, or import the source again"
SOURCE_REMEDY: Final = "run `cytearc verify` on each source (a composite reads its counts in place) and restore the damaged one from a copy, or create the composite again from intact sources"
COMPOSITE_REMEDY: Final = (
    "restore the composite from a copy, or create it again with create_composite"
)
ARTIFACT_REMEDY: Final = "compute it again: open the store with zarr_mode='r+' and rerun its operation with invalidate_cache=True"
_COPIES: Final = 8.0
_SPLIT_EVERY: Final = 8
_FLOAT_RTOL: Final = 1e-9


# --- tasks ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Unreadable:
    """A region of an array that failed to decode."""

    key: str
    found: str
    array: str = ""
    """The array that failed, when it is not the one checked (a composite's source), else empty."""


@dataclass(frozen=True, kw_only=True, eq=False)
class _VirtualArray:
    """A composite's virtual ``counts`` (``layout="cells"``) or ``countsT`` (``"features"``).

    ``counts`` is read through a reader of the sources' ``counts`` only,
    ``countsT`` gathered from the sources' ``countsT``: each source array is
    read once, whichever orientation the composite's reader would choose.
    """

    reader: VirtualArrayReader
    layout: Literal["cells", "features"]
    path: str
    shape: tuple[int, int]
    shards: tuple[int, ...]


_Counts: TypeAlias = "zarr.Array[Any] | _VirtualArray"


def _units(array: _Counts) -> tuple[int, ...]:
    """The shape of one storage unit (for a virtual array, of a shard of its layout)."""
    return array.shards if isinstance(array, _VirtualArray) else unit_shape(array)


def _in_source(failure: _Unreadable, array: zarr.Array[Any], name: str) -> _Unreadable:
    return _Unreadable(
        key=failure.key,
        found=f"in source {name!r}, {failure.found}",
        array=f"{store_location(array)}/{array.path}",
    )


def _cells_band(reader: VirtualArrayReader, cells: slice) -> np.ndarray | _Unreadable:
    """Cells of the virtual counts, read from the sources' ``counts``, or the shard that fails."""
    try:
        return reader.read(cells, slice(None))
    except StoreDamageError as exc:
        rows = reader.composite.rows_by_source(cells)
        columns = reader.composite.columns_by_source(slice(None))
        for source, (_, r), (_, c) in zip(reader.sources, rows, columns, strict=True):
            if not len(r) or not len(c):
                continue
            region = (slice(int(r.min()), int(r.max()) + 1), slice(int(c.min()), int(c.max()) + 1))
            failure = _read(source.counts, region)
            if isinstance(failure, _Unreadable):
                return _in_source(failure, source.counts, source.name)
        return _Unreadable(key="", found=f"a read of the sources does not decode ({exc})")


def _sorted_index(values: np.ndarray) -> tuple[slice | np.ndarray, np.ndarray]:
    """The distinct ``values`` (a slice when contiguous), and where each value lies among them."""
    distinct, inverse = np.unique(values, return_inverse=True)
    if len(distinct) and distinct[-1] - distinct[0] + 1 == len(distinct):
        return slice(int(distinct[0]), int(distinct[-1]) + 1), inverse
    return distinct, inverse


def _features_band(reader: VirtualArrayReader, features: slice) -> np.ndarray | _Unreadable:
    """Features of the virtual countsT, gathered from the sources' ``countsT``, or the shard that fails."""
    out = np.zeros((features.stop - features.start, reader.shape[0]), dtype=reader.dtype)
    rows = reader.composite.rows_by_source(slice(None))
    columns = reader.composite.columns_by_source(features)
    for source, (cells, r), (at, c) in zip(reader.sources, rows, columns, strict=True):
        if not len(cells) or not len(at):
            continue
        counts_t = cast("zarr.Array[Any]", source.counts_t)
        (feature_index, feature_inverse), (cell_index, cell_inverse) = (
            _sorted_index(c),
            _sorted_index(r),
        )
        try:
            block = np.asarray(counts_t.get_orthogonal_selection((feature_index, cell_index)))
        except CyteArcError:
            raise
        except DECODE_ERRORS as exc:
            region = (slice(int(c.min()), int(c.max()) + 1), slice(int(r.min()), int(r.max()) + 1))
            key, part = locate_failure(counts_t, region)
            failure = _Unreadable(
                key=key, found=f"{part} does not decode ({type(exc).__name__}: {exc})"
            )
            return _in_source(failure, counts_t, source.name)
        out[np.ix_(at, cells)] = block[np.ix_(feature_inverse, cell_inverse)]
    return out


def _read_virtual(array: _VirtualArray, rows: slice) -> np.ndarray | _Unreadable:
    if array.layout == "cells":
        return _cells_band(array.reader, rows)
    return _features_band(array.reader, rows)


def _read(array: _Counts, region: tuple[slice, ...]) -> np.ndarray | _Unreadable:
    if isinstance(array, _VirtualArray):
        return _read_virtual(array, region[0])
    try:
        return np.asarray(array[region])
    except CyteArcError:
        raise
    except DECODE_ERRORS as exc:
        key, part = locate_failure(array, region)
        return _Unreadable(key=key, found=f"{part} does not decode ({type(exc).__name__}: {exc})")


def _mix(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finalizer, element-wise on uint64."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return np.asarray(x ^ (x >> np.uint64(31)))


def _check_words(
    block: np.ndarray, *, first_row: int, n_features: int, transposed: bool
) -> np.ndarray:
    """The check word of every entry of a band of ``counts`` (or of ``countsT``), 0 for a zero."""
    bits = canonical_layer(block).view("<u8")
    rows = np.arange(first_row, first_row + block.shape[0], dtype=np.uint64)[:, None]
    cols = np.arange(block.shape[1], dtype=np.uint64)[None, :]
    cell, feature = (cols, rows) if transposed else (rows, cols)
    with np.errstate(over="ignore"):
        words = _mix(_mix(cell * np.uint64(n_features) + feature) ^ bits)
    words[bits == 0] = 0
    return words


def _group_sums(words: np.ndarray, *, axis: int, first: int, width: int, groups: int) -> np.ndarray:
    """Sums (mod 2**64) of ``words`` along ``axis`` in groups of ``width`` positions from ``first``."""
    other = words.shape[1 - axis]
    out = np.zeros((groups, other), dtype=np.uint64)
    n = words.shape[axis]
    if not n or not other:
        return out
    ids = (first + np.arange(n)) // width
    starts = np.flatnonzero(np.diff(ids, prepend=-1))
    sums = np.add.reduceat(words, starts, axis=axis, dtype=np.uint64)
    out[ids[starts]] = sums if axis == 0 else sums.T
    return out


@dataclass(frozen=True, kw_only=True)
class _Geometry:
    """The shard columns of both orientations, which the check sums follow."""

    n_cells: int
    n_features: int
    feature_width: int
    cell_width: int

    @property
    def feature_groups(self) -> int:
        return -(-self.n_features // self.feature_width)

    @property
    def cell_groups(self) -> int:
        return -(-self.n_cells // self.cell_width)


def _counts_band(
    array: _Counts, first_row: int, n_rows: int, geometry: _Geometry
) -> tuple[Any, Any]:
    """Digests, summaries and check sums of ``counts`` rows ``first_row`` on."""
    block = _read(array, (slice(first_row, first_row + n_rows), slice(None)))
    if isinstance(block, _Unreadable):
        return block, None
    words = _check_words(
        block, first_row=first_row, n_features=geometry.n_features, transposed=False
    )
    digests, row_sums, row_positive, column_positive = band_result(
        block, first_row, geometry.n_cells
    )
    rows = (
        digests,
        row_sums,
        row_positive,
        _group_sums(
            words, axis=1, first=0, width=geometry.feature_width, groups=geometry.feature_groups
        ).T,
    )
    columns = (
        column_positive,
        _group_sums(
            words, axis=0, first=first_row, width=geometry.cell_width, groups=geometry.cell_groups
        ),
    )
    return rows, columns


def _counts_t_band(
    array: _Counts, first_row: int, n_rows: int, geometry: _Geometry
) -> tuple[Any, Any]:
    """Check sums of ``countsT`` rows (features) ``first_row`` on."""
    block = _read(array, (slice(first_row, first_row + n_rows), slice(None)))
    if isinstance(block, _Unreadable):
        return block, None
    words = _check_words(
        block, first_row=first_row, n_features=geometry.n_features, transposed=True
    )
    per_feature = _group_sums(
        words, axis=1, first=0, width=geometry.cell_width, groups=geometry.cell_groups
    ).T
    per_cell = _group_sums(
        words, axis=0, first=first_row, width=geometry.feature_width, groups=geometry.feature_groups
    )
    return per_feature, per_cell


def _add(*parts: Any) -> Any:  # noqa: ANN401 (tuples of arrays, or arrays, or None)
    if any(p is None for p in parts):
        return None
    if isinstance(parts[0], tuple):
        return tuple(_add(*fields) for fields in zip(*parts, strict=True))
    total = parts[0].copy()
    for p in parts[1:]:
        total += p
    return total


def _tree_sum(parts: list[Delayed]) -> Delayed:
    while len(parts) > 1:
        parts = [
            delayed(_add, pure=False)(*parts[i : i + _SPLIT_EVERY])
            for i in range(0, len(parts), _SPLIT_EVERY)
        ]
    return parts[0]


def _chunk(array: zarr.Array[Any], region: tuple[slice, ...]) -> bytes | _Unreadable:
    block = _read(array, region)
    return block if isinstance(block, _Unreadable) else chunk_digest(block)


# --- plans: the tasks of a check and how to judge their results -----------------


@dataclass(kw_only=True)
class _Plan:
    """Tasks to compute, and the function that turns their results into checks."""

    tasks: list[Delayed] = field(default_factory=list)
    judge: Callable[[Sequence[Any]], list[Check]] = lambda _: []


def _bands(array: _Counts, *, unit: int, row_bytes: int, budget: int) -> list[tuple[int, int]]:
    n_rows = int(array.shape[0])
    if not n_rows:
        return []
    step = aligned_rows(
        budget=budget, row_bytes=max(row_bytes, 1), shard_rows=unit, n_rows=n_rows, copies=_COPIES
    )
    return [(start, min(step, n_rows - start)) for start in range(0, n_rows, step)]


def _unreadable(path: str, what: str, failure: _Unreadable, remedy: str) -> Check:
    return Check(
        item=path,
        what=what,
        status="damaged",
        damage=Damage(
            array=failure.array or path,
            chunk=failure.key or None,
            expected="chunks that decode",
            found=failure.found,
            remedy=remedy,
        ),
    )


def _first(mask: np.ndarray) -> tuple[int, ...] | None:
    hits = np.argwhere(mask)
    return tuple(int(i) for i in hits[0]) if len(hits) else None


def _placed(array: zarr.Array[Any], coords: tuple[int, ...]) -> tuple[str, bool]:
    key = unit_key(array, coords)
    return key, key in missing_units(array)


def _array(group: zarr.Group, name: str) -> zarr.Array[Any]:
    """An array the open already validated."""
    array = group[name]
    assert isinstance(array, zarr.Array)
    return array


def _count_arrays(
    assay: Assay, composite: CompositeSources | None
) -> tuple[_Counts, _Counts | None]:
    """The assay's ``counts`` and ``countsT``: stored arrays, or a composite's virtual ones."""
    if composite is None or assay.name != composite.manifest.assay:
        counts_t = (
            _array(assay.matrix, "countsT") if "countsT" in set(assay.matrix.array_keys()) else None
        )
        return _array(assay.matrix, "counts"), counts_t
    documents = composite.manifest.arrays
    reader = composite.reader
    counts_only = VirtualArrayReader(
        reader.composite,
        [SourceArrays(counts=s.counts, counts_t=None, name=s.name) for s in reader.sources],
        dtype=reader.dtype,
        shape=reader.shape,
    )

    def virtual(name: str, layout: Literal["cells", "features"]) -> _VirtualArray:
        document = VirtualCounts(documents[name], where=f"{assay.where}/{name}")
        return _VirtualArray(
            reader=counts_only if layout == "cells" else reader,
            layout=layout,
            path=f"{assay.matrix.path}/{name}",
            shape=document.shape,
            shards=document.shards,
        )

    transposed = assay.assayType in RNA_TYPES and "countsT" in documents
    return virtual("counts", "cells"), virtual("countsT", "features") if transposed else None


def _assay_plan(assay: Assay, *, budget: int, composite: CompositeSources | None) -> _Plan:
    counts, counts_t = _count_arrays(assay, composite)
    n_cells, n_features = assay.shape
    geometry = _Geometry(
        n_cells=n_cells,
        n_features=n_features,
        feature_width=max(1, _units(counts)[1]),
        cell_width=max(1, _units(counts_t)[1]) if counts_t is not None else max(1, n_cells),
    )
    plan = _Plan()
    rows_a, cols_a = [], []
    read_a: Any = delayed(counts, traverse=False) if isinstance(counts, _VirtualArray) else counts
    for first, n in _bands(
        counts, unit=band_unit(_units(counts)[0]), row_bytes=n_features * 8, budget=budget
    ):
        part = delayed(_counts_band, nout=2, pure=False)(read_a, first, n, geometry)
        rows_a.append(part[0])
        cols_a.append(part[1])
    rows_t, cols_t = [], []
    if counts_t is not None:
        read_t: Any = (
            delayed(counts_t, traverse=False) if isinstance(counts_t, _VirtualArray) else counts_t
        )
        for first, n in _bands(
            counts_t, unit=_units(counts_t)[0], row_bytes=n_cells * 8, budget=budget
        ):
            part = delayed(_counts_t_band, nout=2, pure=False)(read_t, first, n, geometry)
            rows_t.append(part[0])
            cols_t.append(part[1])
    plan.tasks = [*rows_a, *rows_t]
    if cols_a:
        plan.tasks.append(_tree_sum(cols_a))
    if cols_t:
        plan.tasks.append(_tree_sum(cols_t))

    def judge(results: Sequence[Any]) -> list[Check]:
        a = list(results[: len(rows_a)])
        t = list(results[len(rows_a) : len(rows_a) + len(rows_t)])
        rest = list(results[len(rows_a) + len(rows_t) :])
        total_a = rest.pop(0) if cols_a else None
        total_t = rest.pop(0) if cols_t else None
        return _judge_assay(assay, counts, counts_t, geometry, a, total_a, t, total_t)

    plan.judge = judge
    return plan


def _empty_rows(geometry: _Geometry) -> tuple[np.ndarray, ...]:
    return (
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.zeros((0, geometry.feature_groups), np.uint64),
    )


def _judge_assay(  # noqa: PLR0917 (the parts of one assay's results)
    assay: Assay,
    counts: _Counts,
    counts_t: _Counts | None,
    geometry: _Geometry,
    rows_a: list[Any],
    total_a: Any,  # noqa: ANN401
    rows_t: list[Any],
    total_t: Any,  # noqa: ANN401
) -> list[Check]:
    path, path_t = counts.path, counts_t.path if counts_t is not None else ""
    virtual = isinstance(counts, _VirtualArray)
    remedy = SOURCE_REMEDY if virtual else COUNTS_REMEDY
    summaries = f"{assay.matrix.path}/countSummaries"
    failed_a = next((r for r in rows_a if isinstance(r, _Unreadable)), None)
    failed_t = next((r for r in rows_t if isinstance(r, _Unreadable)), None)
    checks = []
    cell_t = feature_t = None
    if counts_t is not None and failed_t is None:
        feature_t = (
            np.concatenate(rows_t) if rows_t else np.zeros((0, geometry.cell_groups), np.uint64)
        )
        cell_t = (
            total_t.T
            if total_t is not None
            else np.zeros((geometry.n_cells, geometry.feature_groups), np.uint64)
        )
    if total_a is None:
        total_a = (
            np.zeros(geometry.n_features, np.int64),
            np.zeros((geometry.cell_groups, geometry.n_features), np.uint64),
        )
    if failed_a is not None:
        checks.append(_unreadable(path, "content fingerprint", failed_a, remedy))
        counts_ok = False
    else:
        digests = [d for r in rows_a for d in r[0]]
        row_sums, row_positive, cell_a = (
            tuple(np.concatenate([r[i] for r in rows_a]) for i in (1, 2, 3))
            if rows_a
            else _empty_rows(geometry)
        )
        found = counts_fingerprint(shape=assay.shape, dtype=assay.dtype, digests=digests)
        counts_ok = found == assay.content_fingerprint
        if counts_ok:
            checks.append(Check(item=path, what="content fingerprint", status="ok"))
        else:
            checks.append(
                _counts_mismatch(counts, found, assay.content_fingerprint, cell_a, cell_t, geometry)
            )
    if counts_t is not None:
        if failed_t is not None:
            checks.append(_unreadable(path_t, "same values as counts", failed_t, remedy))
        elif not counts_ok:
            checks.append(
                Check(
                    item=path_t,
                    what="same values as counts",
                    status="unchecked",
                    note="counts are damaged, and countsT is checked against them",
                )
            )
        else:
            checks.append(
                _transpose_check(counts_t, total_a[1], feature_t, cell_a, cell_t, geometry)
            )
    if not counts_ok:
        checks.extend(
            Check(
                item=f"{summaries}/{name}",
                what="summary of counts",
                status="unchecked",
                note="counts are damaged",
            )
            for name in ("rowSums", "rowPositive", "columnPositive")
        )
        return checks
    column_positive = total_a[0]
    for name, values in (
        ("rowSums", row_sums),
        ("rowPositive", row_positive),
        ("columnPositive", column_positive),
    ):
        checks.append(
            _summary_check(
                assay, name, values, remedy=COMPOSITE_REMEDY if virtual else COUNTS_REMEDY
            )
        )
    return checks


def _counts_mismatch(  # noqa: PLR0917 (the parts of one assay's results)
    counts: _Counts,
    found: str,
    expected: str,
    cell_a: np.ndarray,
    cell_t: np.ndarray | None,
    geometry: _Geometry,
) -> Check:
    if isinstance(counts, _VirtualArray):
        return _virtual_mismatch(counts, found, expected, cell_a, cell_t, geometry)
    missing = missing_units(counts)
    where = _first(cell_a != cell_t) if cell_t is not None else None
    shards = unit_shape(counts)
    if where is not None:
        key = unit_key(counts, (where[0] // shards[0], where[1]))
        detail = (
            "no shard object (it reads as zeros)"
            if key in missing
            else f"values that differ from countsT there (the values read have content fingerprint {found})"
        )
    elif missing and cell_t is None:
        key = missing[0]
        detail = f"content fingerprint {found}; shard {key} is missing (it reads as zeros) and is the likely damage"
    else:
        key = None
        detail = f"content fingerprint {found}" + (
            "; countsT holds the same values, so the recorded fingerprint itself may have changed"
            if cell_t is not None
            else ""
        )
    return Check(
        item=counts.path,
        what="content fingerprint",
        status="damaged",
        damage=Damage(
            array=counts.path,
            chunk=key,
            expected=f"the values of content_fingerprint {expected}",
            found=detail,
            remedy=COUNTS_REMEDY,
        ),
    )


def _transpose_check(  # noqa: PLR0917 (the parts of one assay's results)
    counts_t: _Counts,
    feature_a: np.ndarray,
    feature_t: np.ndarray | None,
    cell_a: np.ndarray,
    cell_t: np.ndarray | None,
    geometry: _Geometry,
) -> Check:
    if isinstance(counts_t, _VirtualArray):
        return _virtual_transpose_check(counts_t, feature_a, feature_t, cell_a, cell_t, geometry)
    assert feature_t is not None
    assert cell_t is not None
    where = _first(feature_t != feature_a.T)
    if where is None and not np.array_equal(cell_a, cell_t):
        where = (0, 0)
    if where is None:
        return Check(item=counts_t.path, what="same values as counts", status="ok")
    shards = unit_shape(counts_t)
    key, missing = _placed(counts_t, (where[0] // shards[0], where[1]))
    return Check(
        item=counts_t.path,
        what="same values as counts",
        status="damaged",
        damage=Damage(
            array=counts_t.path,
            chunk=key,
            expected="the values of counts, transposed",
            found="no shard object (it reads as zeros)"
            if missing
            else f"other values (first at feature {where[0]})",
            remedy=COUNTS_REMEDY,
        ),
    )


def _sources_of(reader: VirtualArrayReader, cells: slice) -> list[str]:
    """The names of the sources holding a range of a composite's cells, in source order."""
    held = np.unique(reader.composite.row_sources[cells])
    return [reader.sources[int(i)].name for i in held]


def _virtual_mismatch(  # noqa: PLR0917 (the parts of one assay's results)
    counts: _VirtualArray,
    found: str,
    expected: str,
    cell_a: np.ndarray,
    cell_t: np.ndarray | None,
    geometry: _Geometry,
) -> Check:
    where = _first(cell_a != cell_t) if cell_t is not None else None
    if where is not None:
        cell, group = where
        row = int(counts.reader.composite.source_rows[cell])
        (source,) = _sources_of(counts.reader, slice(cell, cell + 1))
        first = group * geometry.feature_width
        detail = f"values at cell {cell} (row {row} of source {source!r}), features {first}:{min(first + geometry.feature_width, geometry.n_features)}, that differ from countsT there (the values read have content fingerprint {found})"
    else:
        detail = f"content fingerprint {found}" + (
            "; countsT holds the same values, so a source's values changed under its recorded fingerprint, or the recorded fingerprint itself changed"
            if cell_t is not None
            else ""
        )
    return Check(
        item=counts.path,
        what="content fingerprint",
        status="damaged",
        damage=Damage(
            array=counts.path,
            chunk=None,
            expected=f"the values of content_fingerprint {expected}",
            found=detail,
            remedy=SOURCE_REMEDY,
        ),
    )


def _virtual_transpose_check(  # noqa: PLR0917 (the parts of one assay's results)
    counts_t: _VirtualArray,
    feature_a: np.ndarray,
    feature_t: np.ndarray | None,
    cell_a: np.ndarray,
    cell_t: np.ndarray | None,
    geometry: _Geometry,
) -> Check:
    assert feature_t is not None
    assert cell_t is not None
    where = _first(feature_t != feature_a.T)
    if where is None and not np.array_equal(cell_a, cell_t):
        where = (0, 0)
    if where is None:
        return Check(item=counts_t.path, what="same values as counts", status="ok")
    feature, group = where
    cells = slice(group * geometry.cell_width, (group + 1) * geometry.cell_width)
    return Check(
        item=counts_t.path,
        what="same values as counts",
        status="damaged",
        damage=Damage(
            array=counts_t.path,
            chunk=None,
            expected="the values of counts, transposed",
            found=f"other values (first at feature {feature}, cells {cells.start}:{min(cells.stop, geometry.n_cells)} of the sources {_sources_of(counts_t.reader, cells)})",
            remedy=SOURCE_REMEDY,
        ),
    )


def _summary_check(assay: Assay, name: str, values: np.ndarray, *, remedy: str) -> Check:
    path = f"{assay.matrix.path}/countSummaries/{name}"
    node = assay.matrix.get(f"countSummaries/{name}")
    array = node if isinstance(node, zarr.Array) else None
    try:
        stored = assay.summary(name)
    except CountSummariesError as exc:
        missing = missing_units(array) if array is not None else []
        return Check(
            item=path,
            what="summary of counts",
            status="damaged",
            damage=Damage(
                array=path,
                chunk=missing[0] if missing else None,
                expected="a complete summary bound to the counts",
                found=str(exc),
                remedy=remedy,
            ),
        )
    except StoreDamageError as exc:
        assert array is not None
        key, _ = locate_failure(array, (slice(None),))
        return Check(
            item=path,
            what="summary of counts",
            status="damaged",
            damage=Damage(
                array=path,
                chunk=key or None,
                expected="chunks that decode",
                found=str(exc),
                remedy=remedy,
            ),
        )
    if values.dtype.kind == "f":
        differ = ~np.isclose(stored, values, rtol=_FLOAT_RTOL, atol=0.0)
    else:
        differ = stored != values
    where = _first(differ)
    if where is None:
        return Check(item=path, what="summary of counts", status="ok")
    assert array is not None
    (i,) = where
    return Check(
        item=path,
        what="summary of counts",
        status="damaged",
        damage=Damage(
            array=path,
            chunk=unit_key(array, (i // unit_shape(array)[0],)),
            expected=f"{name}[{i}] = {values[i]} (recomputed from counts)",
            found=f"{stored[i]}",
            remedy=remedy,
        ),
    )


def _open_assays(store: Store) -> tuple[list[Assay], list[Check]]:
    """The assays that open, and a damaged check for each that does not."""
    opened, refused = [], []
    for name in store.assays:
        try:
            opened.append(store.assays[name])
        except CyteArcError as exc:
            refused.append(
                Check(
                    item=f"matrices/{name}",
                    what="the assay opens",
                    status="damaged",
                    damage=Damage(
                        array=f"matrices/{name}",
                        chunk=None,
                        expected="counts, countsT (RNA types) and summaries that agree with their records",
                        found=f"{type(exc).__name__}: {exc}",
                        remedy=COMPOSITE_REMEDY
                        if store.composite is not None
                        else (
                            "rebuild the count arrays: python -m cytearc.tools.repack_zarr "
                            f"{store.where} OUT --data-only, or import the source again"
                        ),
                    ),
                )
            )
    return opened, refused


def _source_identity(source: Store, assay: str) -> tuple[object, object]:
    """A source's dataset fingerprint and its counts fingerprint of ``assay``, read from storage again."""
    root = zarr.open_group(
        store=source.store_root.store, path=source.store_root.path, mode="r", zarr_format=3
    )
    counts = root.get(f"matrices/{assay}/counts")
    return (
        root.attrs.get("cytearc:datasetFingerprint"),
        counts.attrs.get("content_fingerprint") if isinstance(counts, zarr.Array) else None,
    )


def _binding_checks(composite: CompositeSources) -> list[Check]:
    """Each source of a composite, its identities read again and checked against its binding."""
    assay = composite.manifest.assay
    what = "source matches its binding"
    checks = []
    for binding in composite.manifest.sources:
        item = f"zarr.json/{COMPOSITE_ATTRIBUTE}/sources/{binding.name}"
        expected = (binding.datasetFingerprint, binding.countsFingerprint)
        try:
            found = _source_identity(composite.stores[binding.name], assay)
        except (*ACCESS_ERRORS, *DECODE_ERRORS, KeyError) as exc:
            found = (f"{type(exc).__name__}: {exc}", None)
        if found == expected:
            checks.append(Check(item=item, what=what, status="ok", note=binding.location))
            continue
        damage = Damage(
            array=binding.location,
            chunk=None,
            expected=f"dataset fingerprint {expected[0]} and {assay} counts fingerprint {expected[1]} (the binding)",
            found=f"dataset fingerprint {found[0]} and {assay} counts fingerprint {found[1]}",
            remedy="restore the source as it was, or create the composite again from the sources as they are",
        )
        checks.append(Check(item=item, what=what, status="damaged", damage=damage))
    return checks


def _dataset_check(store: Store) -> Check:
    item = "zarr.json"
    what = "dataset fingerprint"
    remedy = COUNTS_REMEDY if store.composite is None else COMPOSITE_REMEDY
    try:
        cells = pd.DataFrame({"ids": store.cells.fetch_all("ids")})
        features = {
            name: pd.DataFrame(
                {"ids": a.features.fetch_all("ids"), "names": a.features.fetch_all("names")}
            )
            for name, a in store.assays.items()
            if a.derived is None
        }
    except (CyteArcError, *DECODE_ERRORS) as exc:
        return Check(
            item=item,
            what=what,
            status="damaged",
            damage=Damage(
                array="cellData or featureData",
                chunk=None,
                expected="ids and names that read",
                found=f"{type(exc).__name__}: {exc}",
                remedy=remedy,
            ),
        )
    found = dataset_fingerprint(
        cells, features, {name: store.assays[name].content_fingerprint for name in features}
    )
    if found == store.dataset_fingerprint:
        return Check(item=item, what=what, status="ok")
    return Check(
        item=item,
        what=what,
        status="damaged",
        damage=Damage(
            array="zarr.json",
            chunk=None,
            expected=f"cytearc:datasetFingerprint {store.dataset_fingerprint}",
            found=f"{found} from the cell ids, feature ids and names and counts fingerprints",
            remedy=remedy,
        ),
    )


def _artifact_entry(  # noqa: PLR0911 (one return per outcome of the checks)
    store: Store, ref: ArtifactRef
) -> Check | list[tuple[zarr.Array[Any], str]]:
    """The check of an artifact that needs no reading, or its arrays and their recorded digests."""
    what = "array digests"

    def damaged(array: str, expected: str, found: str) -> Check:
        damage = Damage(
            array=array, chunk=None, expected=expected, found=found, remedy=ARTIFACT_REMEDY
        )
        return Check(item=ref.path, what=what, status="damaged", damage=damage)

    try:
        artifact = open_artifact(store.root, ref)
    except IncompleteArtifactError:
        return Check(
            item=ref.path,
            what=what,
            status="unchecked",
            note="never published (left by an interrupted producer, never read)",
        )
    except ArtifactError as exc:
        return damaged(ref.path, "a published artifact's attributes", str(exc))
    recorded = artifact.attrs.get(DIGESTS_ATTRIBUTE)
    if recorded is None:
        return Check(
            item=ref.path,
            what=what,
            status="unchecked",
            note="published before array digests were recorded",
        )
    if not isinstance(recorded, dict) or not all(
        isinstance(v, str) and DIGEST_PATTERN.match(v) for v in recorded.values()
    ):
        return damaged(
            ref.path,
            f"attribute {DIGESTS_ATTRIBUTE!r} mapping array names to sha256 digests",
            repr(recorded),
        )
    arrays = dict(artifact.group.arrays())
    absent = sorted(set(recorded) - set(arrays))
    if absent:
        return damaged(f"{ref.path}/{absent[0]}", "the array recorded at publication", "no array")
    added = sorted(set(arrays) - set(recorded))
    if added:
        return damaged(
            f"{ref.path}/{added[0]}",
            "only the arrays recorded at publication",
            "an array added after publication",
        )
    return [(arrays[name], recorded[name]) for name in sorted(arrays)]


def _artifact_plan(store: Store) -> _Plan:
    entries = [
        (ref, _artifact_entry(store, ref))
        for ref in artifact_refs(store.root, scopes=["", *store.assays])
    ]
    plan = _Plan()
    for _, entry in entries:
        if isinstance(entry, list):
            for array, _digest in entry:
                plan.tasks.extend(
                    delayed(_chunk, pure=False)(array, region) for _, region in unit_regions(array)
                )

    def judge(results: Sequence[Any]) -> list[Check]:
        out = []
        position = 0
        for ref, entry in entries:
            if isinstance(entry, Check):
                out.append(entry)
                continue
            arrays = []
            for array, expected in entry:
                n = sum(1 for _ in unit_regions(array))
                arrays.append(
                    _array_check(ref.path, array, expected, list(results[position : position + n]))
                )
                position += n
            damaged = next((c for c in arrays if c.damage is not None), None)
            out.append(damaged or Check(item=ref.path, what="array digests", status="ok"))
        return out

    plan.judge = judge
    return plan


_GROUP_LEVELS: Final = (
    ("the artifacts group", "the artifacts in it are not found until it is restored"),
    ("an artifact kind group", "the artifacts in it are not found until it is restored"),
    ("an artifact's group", "or delete the folder and " + ARTIFACT_REMEDY),
)


def _headless_groups(store: Store) -> list[Check]:
    """The folders of artifact groups of a local store that hold files but no group ``zarr.json``."""
    local = store.root.store
    while isinstance(local, WrapperStore):  # a composite's namespace wraps its own store
        local = local._store
    if not isinstance(local, LocalStore):
        return []
    top = Path(local.root, store.root.path)
    checks = []
    for scope in ["", *store.assays]:
        base = top / scope / "artifacts" if scope else top / "artifacts"
        folders = [base, *sorted(base.glob("*")), *sorted(base.glob("*/*"))]
        for folder in folders:
            if (
                not folder.is_dir()
                or (folder / "zarr.json").is_file()
                or not any(
                    f.is_file() and not ZARR_PARTIAL.fullmatch(f.name) for f in folder.rglob("*")
                )
            ):
                continue  # a killed zarr write leaves only its <key>.<uuid>.partial: nothing lost
            path = folder.relative_to(top).as_posix()
            group, remedy = _GROUP_LEVELS[len(folder.relative_to(base).parts)]
            damage = Damage(
                array=path,
                chunk=None,
                expected=f"{group} metadata ({path}/zarr.json)",
                found=f"arrays or chunks but no zarr.json: {group} metadata is missing",
                remedy=f"restore {path}/zarr.json from a copy of the store; {remedy}",
            )
            checks.append(Check(item=path, what="group metadata", status="damaged", damage=damage))
    return checks


def _interrupted_replacements(store: Store, assays: list[Assay]) -> list[Check]:
    """The tables whose ``cytearc:replacing`` a commit killed while replacing columns left."""
    checks = []
    for table in [store.cells, *(a.features for a in assays)]:
        marked = replacing(table.group)
        if not marked:
            continue
        path = table.group.path
        damage = Damage(
            array=path,
            chunk=None,
            expected=f"no {REPLACING_ATTRIBUTE} (every column written whole)",
            found=f"{REPLACING_ATTRIBUTE} {marked}: a writer was killed while replacing these columns",
            remedy="run the operation that writes them again (for a pipeline run: `cytearc run` again), or drop them with the table's .drop(name)",
        )
        checks.append(Check(item=path, what="column replacement", status="damaged", damage=damage))
    return checks


def _array_check(item: str, array: zarr.Array[Any], expected: str, parts: list[Any]) -> Check:
    failed = next((p for p in parts if isinstance(p, _Unreadable)), None)
    if failed is not None:
        check = _unreadable(array.path, "array digests", failed, ARTIFACT_REMEDY)
        return Check(item=item, what=check.what, status="damaged", damage=check.damage)
    found = array_digest(shape=tuple(array.shape), dtype=array.dtype, chunks=parts)
    if found == expected:
        return Check(item=item, what="array digests", status="ok")
    missing = missing_units(array)
    return Check(
        item=item,
        what="array digests",
        status="damaged",
        damage=Damage(
            array=array.path,
            chunk=missing[0] if missing else None,
            expected=f"digest {expected} (recorded at publication)",
            found=f"digest {found}"
            + ("; the chunk is missing (it reads as fill values)" if missing else ""),
            remedy=ARTIFACT_REMEDY,
        ),
    )


def verify_store(store: Store) -> VerifyReport:
    """Read every value of ``store`` and check it against what the store recorded.

    Parameters
    ----------
    store
        An open store (:class:`~cytearc.storage.store.Store` or
        :class:`~cytearc.DataStore`).

    Returns
    -------
    VerifyReport
        Every check in order (a composite's sources against their bindings,
        each assay's ``counts``, ``countsT`` and summaries, the dataset
        fingerprint, the artifacts, the artifact
        folders that lost their group metadata, then the tables a killed
        commit left replacing columns) and the first damage found.

    Raises
    ------
    MemBudgetError
        One band of whole shards does not fit a worker's memory.
    """
    engine = store.engine
    budget = engine.worker_memory()
    opened, refused = _open_assays(store)
    plans = [_assay_plan(assay, budget=budget, composite=store.composite) for assay in opened]
    artifacts = _artifact_plan(store)
    tasks = [t for p in (*plans, artifacts) for t in p.tasks]
    results = engine.compute(*tasks, show_progress=store.show_progress) if tasks else ()
    checks = _binding_checks(store.composite) if store.composite is not None else []
    position = 0
    for plan in plans:
        checks.extend(plan.judge(results[position : position + len(plan.tasks)]))
        position += len(plan.tasks)
    checks.extend(refused)
    checks.append(
        _dataset_check(store)
        if not refused
        else Check(
            item="zarr.json",
            what="dataset fingerprint",
            status="unchecked",
            note="an assay does not open",
        )
    )
    checks.extend(artifacts.judge(results[position:]))
    checks.extend(_headless_groups(store))
    checks.extend(_interrupted_replacements(store, opened))
    return VerifyReport(location=store.where, checks=tuple(checks))
