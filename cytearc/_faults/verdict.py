"""Reading everything a store or cube holds, and judging a read against the original's values."""

from __future__ import annotations

import hashlib
import math
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
import pandas as pd

from cytearc.errors import CyteArcError
from cytepool.errors import CytePoolError

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc.artifacts import Artifact
    from cytearc.datastore import DataStore

__all__ = [
    "MAX_VALUES",
    "NAMED_ERRORS",
    "Detected",
    "Outcome",
    "Oversized",
    "Verdict",
    "classify",
    "cube_values",
    "difference",
    "exception_text",
    "store_values",
]

Outcome = Literal["named-error", "identical", "warned", "silent-difference", "crash"]
"""What reading a mutated thing gave (see :func:`classify`)."""

NAMED_ERRORS: Final = (CyteArcError, CytePoolError)
"""The exceptions that are a named refusal: those of :mod:`cytearc.errors` and :mod:`cytepool.errors`."""

MAX_VALUES: Final = 5_000_000
"""Arrays larger than this are not read (a shape a mutation made larger): :class:`Oversized`."""


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The outcome of one read, with what was raised or the first difference.

    Parameters
    ----------
    outcome
        ``named-error``, ``identical``, ``warned``, ``silent-difference`` or
        ``crash``.
    detail
        The exception's class and message (its traceback for a crash), or
        the first difference.
    """

    outcome: Outcome
    detail: str


@dataclass(frozen=True, kw_only=True)
class Detected:
    """A read that completed but whose verification reported damage: a named detection.

    Parameters
    ----------
    detail
        The first damage the verification reported.
    """

    detail: str


@dataclass(frozen=True)
class Oversized:
    """An array too large to read, in place of its values; equal to no original value.

    Parameters
    ----------
    name
        The array.
    shape
        Its shape.
    """

    name: str
    shape: tuple[int, ...]


def exception_text(exc: BaseException, *, frames: bool = False) -> str:
    """``Class: message`` of an exception, and with ``frames`` where it was raised.

    Parameters
    ----------
    exc
        The exception.
    frames
        Add the frame that raised it and the innermost frame of CyteArc or
        CytePool on the way (the code that let it through).

    Returns
    -------
    str
        At most 2,000 characters.
    """
    text = f"{type(exc).__name__}: {exc}"[:1500]
    if frames:
        stack = traceback.extract_tb(exc.__traceback__)
        ours = [f for f in stack if f.filename.startswith(_PACKAGES) and _HERE not in f.filename]
        places = [("raised at", stack[-1:]), ("through", ours[-1:])]
        for label, found in places:
            text += "".join(f" [{label} {f.filename}:{f.lineno} {f.name}]" for f in found)
    return text[:2000]


_PACKAGES: Final = tuple(
    str(Path(__file__).resolve().parents[2] / p) for p in ("cytearc", "cytepool")
)
_HERE: Final = str(Path(__file__).resolve().parent)


def difference(got: object, expected: object, *, where: str = "") -> str | None:  # noqa: PLR0911 (one return per kind of value)
    """The first place where two snapshots of values differ, or None when they are the same.

    Dictionaries compare key by key (and their keys in order), DataFrames
    column by column (names, order and values, not dtypes), arrays by shape
    and values (NaN equal to NaN), other values with ``==``.

    Parameters
    ----------
    got, expected
        Snapshots such as :func:`store_values` returns.
    where
        The path of these values in an outer snapshot, for the message.

    Returns
    -------
    str or None
        ``"<path>: <what differs>"``, or None.

    Examples
    --------
    >>> difference({"a": [1, 2]}, {"a": [1, 3]})
    "['a'][1]: 2 != 3"
    """
    if isinstance(expected, dict):
        if not isinstance(got, dict) or list(got) != list(expected):
            found = list(got) if isinstance(got, dict) else type(got).__name__
            return f"{where or '.'}: keys {found} != {list(expected)}"
        pairs = [(got[k], v, f"{where}[{k!r}]") for k, v in expected.items()]
    elif isinstance(expected, pd.DataFrame):
        if not isinstance(got, pd.DataFrame) or list(got.columns) != list(expected.columns):
            found = list(got.columns) if isinstance(got, pd.DataFrame) else type(got).__name__
            return f"{where}: columns {found} != {list(expected.columns)}"
        pairs = [
            (got[c].to_numpy(), expected[c].to_numpy(), f"{where}.{c}") for c in expected.columns
        ]
    elif isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return f"{where}: {got!r} != {expected!r}"
        pairs = [
            (a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(got, expected, strict=True))
        ]
    elif isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray) or got.shape != expected.shape:
            found = got.shape if isinstance(got, np.ndarray) else type(got).__name__
            return f"{where}: shape {found} != {expected.shape}"
        return None if _same_array(got, expected) else f"{where}: values differ"
    else:
        return None if _same_scalar(got, expected) else f"{where}: {got!r} != {expected!r}"
    return next((d for a, b, w in pairs if (d := difference(a, b, where=w)) is not None), None)


def _missing(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _same_scalar(a: object, b: object) -> bool:
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
        nan = a.dtype.kind == "f" and b.dtype.kind == "f"
        return bool(np.array_equal(a, b, equal_nan=nan))
    return all(_same_scalar(x, y) for x, y in zip(a.ravel(), b.ravel(), strict=True))


def classify(read: Callable[[], object], expected: object, *, where: str | None = None) -> Verdict:
    """Read a mutated thing and judge the outcome against the original's values.

    Parameters
    ----------
    read
        Opens and reads everything (:func:`store_values`, :func:`cube_values`);
        it may return :class:`Detected`.
    expected
        What ``read`` returns for the original.
    where
        A text (the mutated file's folder) that a warning must contain to make
        a difference *warned*; None for any warning.

    Returns
    -------
    Verdict
        ``named-error`` (an exception of :data:`NAMED_ERRORS`, or
        :class:`Detected`), ``identical``, ``warned`` (different values after
        a warning naming the file), ``silent-difference``, or ``crash`` (any
        other exception).

    Examples
    --------
    >>> from cytearc.errors import StoreFormatError
    >>> def refuse():
    ...     raise StoreFormatError("ds.zarr: not a store")
    >>> classify(refuse, {}).outcome
    'named-error'
    >>> classify(lambda: {"x": 2}, {"x": 1})
    Verdict(outcome='silent-difference', detail="['x']: 2 != 1")
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = read()
        except NAMED_ERRORS as exc:
            return Verdict(outcome="named-error", detail=exception_text(exc))
        except Exception as exc:  # any other exception is the crash being judged
            return Verdict(outcome="crash", detail=exception_text(exc, frames=True))
    if isinstance(got, Detected):
        return Verdict(outcome="named-error", detail=f"verify: {got.detail}")
    found = difference(got, expected)
    if found is None:
        return Verdict(outcome="identical", detail="")
    named = [w for w in caught if where is None or where in str(w.message)]
    if named:
        return Verdict(outcome="warned", detail=f"{found}; warned: {named[0].message}")
    return Verdict(outcome="silent-difference", detail=found)


def store_values(
    location: str | Path,
    *,
    artifacts: Literal["full", "content", "none"] = "full",
    max_values: int = MAX_VALUES,
) -> dict[str, Any] | Detected:
    """Open a store and read every value a user reads, then verify it.

    Reads the dataset fingerprint, the cell table, and for every assay its
    feature table, ``counts`` and ``countsT`` (dense, on the store's engine)
    and its count summaries; then the published artifacts; then
    :meth:`cytearc.DataStore.verify`.

    Parameters
    ----------
    location
        The store.
    artifacts
        ``"full"``: every artifact by reference, with its provenance and
        arrays; ``"content"``: the sorted kinds and value digests of the
        artifacts, whatever their ids; ``"none"``: none.
    max_values
        Larger arrays are not read (:class:`Oversized`).

    Returns
    -------
    dict or Detected
        The values by name, or :class:`Detected` when the verification found
        damage.

    Raises
    ------
    CyteArcError
        Whatever opening or reading raises.
    """
    from cytearc.datastore import DataStore  # noqa: PLC0415 (DataStore imports the whole analysis)

    ds = DataStore(location, cluster="threads", show_progress=False)
    values: dict[str, Any] = {"datasetFingerprint": ds.dataset_fingerprint}
    values["cells"] = (
        Oversized("cells", (ds.cells.n_rows,))
        if ds.cells.n_rows > max_values
        else ds.cells.to_pandas()
    )
    for name, assay in ds.assays.items():
        n_features = assay.features.n_rows
        values[f"{name}/features"] = (
            Oversized(f"{name}/features", (n_features,))
            if n_features > max_values
            else assay.features.to_pandas()
        )
        if math.prod(assay.shape) > max_values:
            values[f"{name}/counts"] = Oversized(f"{name}/counts", assay.shape)
            continue
        lazy = {"counts": assay.counts}
        if hasattr(assay, "countsT"):  # RNA types only
            lazy["countsT"] = assay.countsT
        for key, array in zip(lazy, ds.engine.compute(*lazy.values()), strict=True):
            values[f"{name}/{key}"] = np.asarray(array)
        for summary in ("rowSums", "rowPositive", "columnPositive"):
            values[f"{name}/{summary}"] = np.asarray(assay.summary(summary))
    if artifacts == "full":
        for artifact in ds.list_artifacts():
            values[str(artifact.ref)] = {
                "provenance": artifact.provenance,
                **_artifact_arrays(ds, artifact, max_values),
            }
    elif artifacts == "content":
        values["artifacts"] = sorted({_content(ds, a, max_values) for a in ds.list_artifacts()})
    report = ds.verify()
    if not report.ok:
        return Detected(detail=str(report.damage))
    return values


def _artifact_arrays(ds: DataStore, artifact: Artifact, max_values: int) -> dict[str, Any]:
    """The payload arrays an artifact recorded at publication, read through :meth:`Artifact.lazy`."""
    from cytearc.artifacts.digests import DIGESTS_ATTRIBUTE  # noqa: PLC0415

    recorded = artifact.attrs.get(DIGESTS_ATTRIBUTE)
    names = sorted(recorded) if isinstance(recorded, dict) else sorted(artifact.group.array_keys())
    arrays = {k: artifact.lazy(k) for k in names}
    small = {k: a for k, a in arrays.items() if math.prod(a.shape) <= max_values}
    out: dict[str, Any] = {
        k: Oversized(f"{artifact.ref}/{k}", tuple(a.shape))
        for k, a in arrays.items()
        if k not in small
    }
    results = ds.engine.compute(*small.values()) if small else ()
    out.update({k: np.asarray(v) for k, v in zip(small, results, strict=True)})
    return dict(sorted(out.items()))


def _content(ds: DataStore, artifact: Artifact, max_values: int) -> str:
    digest = hashlib.sha256()
    for name, value in _artifact_arrays(ds, artifact, max_values).items():
        digest.update(name.encode())
        if isinstance(value, Oversized):
            digest.update(repr(value).encode())
        else:
            digest.update(f"{value.shape}{value.dtype.str}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
    return f"{artifact.ref.kind}:{digest.hexdigest()[:16]}"


def cube_values(path: str | Path, *, max_values: int = MAX_VALUES) -> dict[str, Any]:
    """Open a cube strictly, read every value and its provenance, then verify its fingerprint.

    Parameters
    ----------
    path
        The cube.
    max_values
        Larger layers are not read (:class:`Oversized`).

    Returns
    -------
    dict
        Tables, cell numbers, normalization, source, provenance, every layer
        and the verified fingerprint.

    Raises
    ------
    CytePoolError
        Whatever :func:`cytepool.read_cube`, reading a layer or
        :meth:`cytepool.Cube.verify_fingerprint` raises.
    """
    from cytepool import read_cube  # noqa: PLC0415 (kept out of the import of cytearc.faults)

    cube = read_cube(path)
    values: dict[str, Any] = {
        "samples": cube.samples,
        "groups": cube.groups,
        "features": cube.features,
        "n_cells": cube.n_cells,
        "normalization": cube.normalization,
        "source": cube.source,
        "provenance": cube.provenance,
    }
    for name in sorted(cube.layers):
        layer = cube.layers[name]
        values[f"layers/{name}"] = (
            Oversized(name, tuple(layer.shape))
            if math.prod(layer.shape) > max_values
            else np.asarray(layer)
        )
    values["fingerprint"] = cube.verify_fingerprint()
    return values
