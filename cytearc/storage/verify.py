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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import zarr
from dask.delayed import delayed
from zarr.storage import LocalStore

from cytearc.artifacts.digests import (
    DIGESTS_ATTRIBUTE,
    array_digest,
    chunk_digest,
)
from cytearc.artifacts.store import artifact_refs, open_artifact
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
from cytearc.storage.counts import band_summaries, band_unit
from cytearc.storage.damage import (
    DECODE_ERRORS,
    Check,
    Damage,
    VerifyReport,
    locate_failure,
    missing_units,
    unit_key,
    unit_regions,
    unit_shape,
)
from cytearc.storage.destinations import ZARR_PARTIAL
from cytearc.storage.identity import block_digests, counts_fingerprint
from cytepool.cube.encoding import DIGEST_PATTERN, canonical_layer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dask.delayed import Delayed

    from cytearc.artifacts.refs import ArtifactRef
    from cytearc.assays.assay import Assay
    from cytearc.storage.store import Store

__all__ = ["Check", "Damage", "VerifyReport", "verify_store"]

COUNTS_REMEDY: Final = "restore the store from a copy, or import the source again"
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


def _read(array: zarr.Array[Any], region: tuple[slice, ...]) -> np.ndarray | _Unreadable:
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
    array: zarr.Array[Any], first_row: int, n_rows: int, geometry: _Geometry
) -> tuple[Any, Any]:
    """Digests, summaries and check sums of ``counts`` rows ``first_row`` on."""
    block = _read(array, (slice(first_row, first_row + n_rows), slice(None)))
    if isinstance(block, _Unreadable):
        return block, None
    words = _check_words(
        block, first_row=first_row, n_features=geometry.n_features, transposed=False
    )
    row_sums, row_positive, column_positive = band_summaries(block)
    rows = (
        block_digests(block, first_row=first_row, n_rows=geometry.n_cells),
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
    array: zarr.Array[Any], first_row: int, n_rows: int, geometry: _Geometry
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


def _bands(
    array: zarr.Array[Any], *, unit: int, row_bytes: int, budget: int
) -> list[tuple[int, int]]:
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
            array=path,
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


def _assay_plan(assay: Assay, *, budget: int) -> _Plan:
    counts = _array(assay.matrix, "counts")
    counts_t = (
        _array(assay.matrix, "countsT") if "countsT" in set(assay.matrix.array_keys()) else None
    )
    n_cells, n_features = assay.shape
    geometry = _Geometry(
        n_cells=n_cells,
        n_features=n_features,
        feature_width=max(1, unit_shape(counts)[1]),
        cell_width=max(1, unit_shape(counts_t)[1]) if counts_t is not None else max(1, n_cells),
    )
    plan = _Plan()
    rows_a, cols_a = [], []
    for first, n in _bands(
        counts, unit=band_unit(unit_shape(counts)[0]), row_bytes=n_features * 8, budget=budget
    ):
        part = delayed(_counts_band, nout=2, pure=False)(counts, first, n, geometry)
        rows_a.append(part[0])
        cols_a.append(part[1])
    rows_t, cols_t = [], []
    if counts_t is not None:
        for first, n in _bands(
            counts_t, unit=unit_shape(counts_t)[0], row_bytes=n_cells * 8, budget=budget
        ):
            part = delayed(_counts_t_band, nout=2, pure=False)(counts_t, first, n, geometry)
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
    counts: zarr.Array[Any],
    counts_t: zarr.Array[Any] | None,
    geometry: _Geometry,
    rows_a: list[Any],
    total_a: Any,  # noqa: ANN401
    rows_t: list[Any],
    total_t: Any,  # noqa: ANN401
) -> list[Check]:
    path, path_t = counts.path, counts_t.path if counts_t is not None else ""
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
        checks.append(_unreadable(path, "content fingerprint", failed_a, COUNTS_REMEDY))
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
                _counts_mismatch(counts, found, assay.content_fingerprint, cell_a, cell_t)
            )
    if counts_t is not None:
        if failed_t is not None:
            checks.append(_unreadable(path_t, "same values as counts", failed_t, COUNTS_REMEDY))
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
            checks.append(_transpose_check(counts_t, total_a[1], feature_t, cell_a, cell_t))
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
        checks.append(_summary_check(assay, name, values))
    return checks


def _counts_mismatch(
    counts: zarr.Array[Any],
    found: str,
    expected: str,
    cell_a: np.ndarray,
    cell_t: np.ndarray | None,
) -> Check:
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


def _transpose_check(
    counts_t: zarr.Array[Any],
    feature_a: np.ndarray,
    feature_t: np.ndarray | None,
    cell_a: np.ndarray,
    cell_t: np.ndarray | None,
) -> Check:
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


def _summary_check(assay: Assay, name: str, values: np.ndarray) -> Check:
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
                remedy=COUNTS_REMEDY,
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
                remedy=COUNTS_REMEDY,
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
            remedy=COUNTS_REMEDY,
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
                        remedy=(
                            "rebuild the count arrays: python -m cytearc.tools.repack_zarr "
                            f"{store.where} OUT --data-only, or import the source again"
                        ),
                    ),
                )
            )
    return opened, refused


def _dataset_check(store: Store) -> Check:
    item = "zarr.json"
    what = "dataset fingerprint"
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
                remedy=COUNTS_REMEDY,
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
            remedy=COUNTS_REMEDY,
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
        Every check in order (each assay's ``counts``, ``countsT`` and
        summaries, the dataset fingerprint, the artifacts, the artifact
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
    plans = [_assay_plan(assay, budget=budget) for assay in opened]
    artifacts = _artifact_plan(store)
    tasks = [t for p in (*plans, artifacts) for t in p.tasks]
    results = engine.compute(*tasks, show_progress=store.show_progress) if tasks else ()
    checks: list[Check] = []
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
