"""Writing a :class:`~cytearc.io.sources.CountSource` into a new CyteArc store.

Before the destination is created, every import checks that the source has
cells and features and unique cell ids, makes repeated feature ids unique (as
anndata's ``var_names_make_unique`` does, with a warning), and makes one pass
over the source to find the value range of each assay, refusing NaN and
infinity and warning of negative values and of non-integer values in an
assay of counts. A second pass writes the counts, band by band, on the
engine. The store's root attribute ``cytearc:complete`` is set last, so an
interrupted import leaves a store that never opens.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
from tqdm.auto import tqdm

from cytearc._warnings import warn_user
from cytearc.assays.types import RNA_TYPES, assay_for_feature_type, resolve_assay_type
from cytearc.engine.cluster import Engine, get_engine
from cytearc.errors import CyteArcError, MemBudgetError, SourceFormatError
from cytearc.io.bands import validate_unique_cells
from cytearc.io.sources import CountSource, LayeredSource, iter_bands
from cytearc.metadata.membership import write_membership_columns
from cytearc.metadata.table import write_table
from cytearc.storage.count_dtype import ValueRange, resolve_count_dtype, scan_values
from cytearc.storage.counts import CountsWriter, layout_fits, write_summaries
from cytearc.storage.destinations import create_destination, validate_destination
from cytearc.storage.layout import DEFAULT_LAYOUT, CountLayout
from cytearc.storage.nodes import STORE_FORMAT, STORE_FORMAT_VERSION
from cytepool.codecs import compressor
from cytepool.cube.encoding import format_digest, utf8_str

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import TypeAlias

    import pandas as pd
    from distributed import Client

    from cytepool.codecs import Compression

    AssaySplitKey: TypeAlias = str | Callable[[pd.DataFrame], pd.Series]
    """A feature column naming each feature's assay, or a function of the feature table."""

__all__ = ["DEFAULT_COMPRESSION", "ImportResult", "write_store"]

SCAN_ROWS: Final = 2_048

DEFAULT_COMPRESSION: Final[Compression] = "lz4"
"""The codec of imported count arrays: Blosc LZ4HC decodes about three times as fast as zstd.

Every stage that reads counts (normalization, PCA's values, markers,
pooling) spends much of its time decoding them; see ``docs/store-format.md``.
"""
COUNT_TYPES: Final = frozenset({"RNA", "URNA", "ADT", "HTO", "ATAC", "CRISPR", "ANTIGEN"})
"""Assay types whose values are counts of molecules or reads, so integers; others may hold scores."""

STORE_OPTIONS_DOC: Final = """\
    assay_split_key
        The feature column naming each feature's assay, or a function of the
        feature table giving one label per feature. By default the 10x
        ``feature_types``: Gene Expression is RNA, Antibody Capture ADT,
        Peaks ATAC, and other types are assays of their own name.
    assay_types
        The preset (``"RNA"``, ``"ADT"``, ``"ATAC"``, ...) of each assay
        whose name is not itself a preset.
    layout
        The layout policy of the count arrays (default
        :data:`~cytearc.storage.layout.DEFAULT_LAYOUT`).
    compression
        ``"lz4"`` (default, :data:`DEFAULT_COMPRESSION`: Blosc LZ4HC, then
        ``crc32c``), ``"zstd"`` (a quarter fewer bytes, decodes about three
        times as slowly), ``"gzip"`` or None.
    overwrite
        Replace an unprepared CyteArc store at the destination.
    storage_options
        The options of the destination's fsspec filesystem, when it is a URL
        (``{"endpoint_url": ..., "key": ..., "secret": ...}`` for S3); never
        recorded in the store.
    mem_budget
        The total memory of the local cluster's workers: ``"8G"``,
        ``"512MiB"``, bytes, or a fraction of the machine such as ``"0.5"``
        (see :func:`~cytearc.engine.budget.resolve_budget`).
    workers
        The number of local worker processes.
    cluster
        A scheduler address such as ``"tcp://10.0.0.5:8786"``, a
        :class:`distributed.Client`, or ``"threads"`` to run in this process.
    engine
        The engine to run on, instead of ``mem_budget``, ``workers`` and
        ``cluster``.
    show_progress
        Progress bars for the scan and the write.
"""
"""The numpydoc entries of the options every import takes (:func:`write_store`'s)."""

STORE_RAISES_DOC: Final = """\
    RemoteDestinationError
        If the destination's protocol is read-only (``http(s)://``).
    DestinationExistsError
        If the destination holds anything but an unprepared CyteArc store
        that ``overwrite`` may replace.
    SourceFormatError
        If the source has no cells or no features, or cell ids repeat; the
        destination is not created.
    NonFiniteCountsError
        If a count is NaN or infinite; the destination is not created.
    DamagedSourceError
        If a source file is truncated or corrupt, naming the line or
        dataset; its subclass RepeatedEntryError if it stores a coordinate
        twice. The destination is not created.
    MemBudgetError
        If the layout's bands do not fit a worker's memory; the message
        names the halving of the layout that fits.
    AssayTypeError
        If an assay's name is not a preset and ``assay_types`` gives none.
    CyteArcError
        If ``assay_split_key`` is not a feature column, ``compression`` is
        unknown, or the destination lies inside another Zarr hierarchy.
"""
"""The numpydoc entries of the errors every import can raise once its source is open."""

_Documented = TypeVar("_Documented")


def document_store_options(documented: _Documented) -> _Documented:
    """Put :data:`STORE_OPTIONS_DOC` and :data:`STORE_RAISES_DOC` in a docstring.

    The docstring marks their places with lines ``%(store_options)s`` and
    ``%(store_raises)s``, indented by four spaces.

    Parameters
    ----------
    documented
        A function or class whose docstring holds the marks.

    Returns
    -------
    object
        ``documented``, with the marks replaced.
    """
    doc = documented.__doc__
    if doc is not None:
        documented.__doc__ = doc.replace("    %(store_options)s\n", STORE_OPTIONS_DOC).replace(
            "    %(store_raises)s\n", STORE_RAISES_DOC
        )
    return documented


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """What an import wrote.

    Attributes
    ----------
    path
        The new store: a :class:`~pathlib.Path`, or the URL it was written to.
    assays
        The type of each assay, by assay name, in the store's order.
    shapes
        Each assay's ``(n_cells, n_features)``.
    dtypes
        Each assay's storage dtype of counts (the narrowest that holds them).
    dataset_fingerprint
        The store's ``cytearc:datasetFingerprint``: a SHA-256 over the cell
        ids, each assay's feature ids and names, and its counts fingerprint,
        the same whatever the source format, layout or compression.
    """

    path: Path | str
    assays: Mapping[str, str]
    shapes: Mapping[str, tuple[int, int]]
    dtypes: Mapping[str, str]
    dataset_fingerprint: str


def _assays_of(
    features: pd.DataFrame, split: str | Callable[[pd.DataFrame], pd.Series] | None
) -> dict[str, np.ndarray]:
    """Feature positions of each assay, in order of first appearance."""
    if split is None:
        labels = features["feature_types"].astype(str).map(assay_for_feature_type)
    elif callable(split):
        labels = split(features).astype(str)
    else:
        if split not in features.columns:
            msg = f"assay_split_key {split!r} is not a feature column; columns are {list(features.columns)}"
            raise CyteArcError(msg)
        labels = features[split].astype(str).map(assay_for_feature_type)
    return {name: np.flatnonzero((labels == name).to_numpy()) for name in dict.fromkeys(labels)}


@dataclass(frozen=True, kw_only=True)
class _Scanned:
    """What the pass over an assay's values found."""

    range: ValueRange
    negative: int = 0
    non_integer: int = 0

    def merge(self, values: np.ndarray, *, where: str) -> _Scanned:
        return _Scanned(
            range=self.range.merge(scan_values(values, where=where)),
            negative=self.negative + int(np.count_nonzero(values < 0)),
            non_integer=self.non_integer
            + (
                int(np.count_nonzero(values != np.floor(values))) if values.dtype.kind == "f" else 0
            ),
        )


def _scan(
    source: CountSource, assays: Mapping[str, np.ndarray], *, show_progress: bool
) -> dict[str, _Scanned]:
    scanned = {name: _Scanned(range=ValueRange(source=np.dtype(source.dtype))) for name in assays}
    n_cells = source.shape[0]
    bar = tqdm(total=n_cells, desc="scan counts", unit="cells", disable=not show_progress)
    for start, band in iter_bands(source, SCAN_ROWS):
        for name, columns in assays.items():
            part = band[:, columns] if len(assays) > 1 else band
            where = f"{source.location}: assay {name}, cells {start}:{start + band.shape[0]}"
            scanned[name] = scanned[name].merge(part.data, where=where)
        bar.update(band.shape[0])
    bar.close()
    return scanned


def _membership(
    source: CountSource, assays: Mapping[str, np.ndarray]
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The cell table to write, and the membership columns the source declares for imported assays.

    A declared column (``source.membership``, from an H5AD export's
    ``uns["cytearc"]["assayMembership"]``) of an assay the import writes must
    be boolean without missing values and becomes ``<assay>_I`` with its
    role; any other column named ``<assay>_I`` of such an assay is left out
    with a warning, because the name is reserved for membership.
    """
    cells = source.cells.reset_index(drop=True)
    declared = getattr(source, "membership", None) or {}
    membership = {}
    for assay, column in declared.items():
        if assay not in assays:
            continue
        if column not in cells.columns:
            msg = f"{source.location}: the membership of assay {assay} is declared as cell column {column!r}, which the file does not hold; remove the declaration or add the column"
            raise SourceFormatError(msg)
        values = cells[column]
        if values.dtype != bool:
            msg = f"{source.location}: the membership column {column!r} of assay {assay}: expected booleans without missing values, found dtype {values.dtype}; fix the column or remove the declaration"
            raise SourceFormatError(msg)
        membership[assay] = values.to_numpy()
        cells = cells.drop(columns=[column])
    for assay in assays:
        reserved = f"{assay}_I"
        if reserved in cells.columns:
            warn_user(
                f"{source.location}: cell column {reserved!r} is left out: the name is reserved for "
                f"the membership of assay {assay}, and the file does not declare it as such (rename "
                "it to keep it)"
            )
            cells = cells.drop(columns=[reserved])
    return cells, membership


def _validate_shape(source: CountSource) -> None:
    n_cells, n_features = source.shape
    if n_cells == 0 or n_features == 0:
        msg = (
            f"{source.location}: the matrix has {n_cells} cells and {n_features} features; an import "
            "needs at least one of each - check that this is the matrix you meant (filtered or raw, "
            "the genome, the layer)"
        )
        raise SourceFormatError(msg)


def _unique_feature_ids(features: pd.DataFrame, *, location: str) -> pd.DataFrame:
    """``features`` with repeated ``ids`` made unique as anndata's ``var_names_make_unique`` does.

    The first of each repeated id is kept; the others become ``id-1``,
    ``id-2``, ..., skipping a suffix that is already an id. ``names`` keeps
    the original values. A warning names the repeated ids and how many.

    Parameters
    ----------
    features
        The source's feature table, with ``ids``.
    location
        The source, for the warning.

    Returns
    -------
    pandas.DataFrame
        ``features`` itself when its ids are unique, else a copy with new ids.

    Examples
    --------
    >>> import warnings, pandas as pd
    >>> table = pd.DataFrame({"ids": ["a", "a", "a-1", "b", "a"], "names": list("AAABA")})
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # it warns of the repeated ids
    ...     _unique_feature_ids(table, location="t.csv")["ids"].tolist()
    ['a', 'a-2', 'a-1', 'b', 'a-3']
    """
    ids = features["ids"].astype(str)
    repeated = ids.duplicated(keep="first").to_numpy()
    if not repeated.any():
        return features
    taken = set(ids)
    counter: Counter[str] = Counter()
    new_ids = ids.to_numpy(dtype=object).copy()
    for position in np.flatnonzero(repeated):
        base = new_ids[position]
        while True:
            counter[base] += 1
            candidate = f"{base}-{counter[base]}"
            if candidate not in taken:
                break
        taken.add(candidate)
        new_ids[position] = candidate
    times = Counter(ids[repeated])
    shown = ", ".join(f"{key!r} ({n + 1} times)" for key, n in list(times.items())[:5])
    more = f" and {len(times) - 5} more" if len(times) > 5 else ""
    warn_user(
        f"{location}: {len(times)} feature ids appear more than once: {shown}{more}; "
        f"{int(repeated.sum())} features were renamed id-1, id-2, ... as anndata's "
        "var_names_make_unique does (their names keep the originals) - give unique ids in the "
        "source to choose others"
    )
    unique = features.copy()
    unique["ids"] = new_ids
    return unique


def _unique_within_assays(
    features: pd.DataFrame, assays: Mapping[str, np.ndarray], *, location: str
) -> pd.DataFrame:
    """``features`` with the ids of each assay made unique (:func:`_unique_feature_ids`); assays may share ids."""
    unique = features
    for cols in assays.values():
        part = features.iloc[cols]
        renamed = _unique_feature_ids(part, location=location)
        if renamed is not part:
            if unique is features:
                unique = features.copy()
            unique.loc[unique.index[cols], "ids"] = renamed["ids"].to_numpy()
    return unique


def _warn_of_values(
    source: CountSource, scanned: Mapping[str, _Scanned], types: Mapping[str, str]
) -> None:
    """Warn of negative values, and of non-integer values in an assay of counts."""
    for name, found in scanned.items():
        if found.negative:
            warn_user(
                f"{source.location}: assay {name} holds {found.negative} negative values (the "
                f"smallest {found.range.minimum}); they are stored as given, in a signed dtype, but "
                "normalization and the other count-based analyses refuse negative counts - import "
                "the raw counts"
            )
        if found.non_integer and types[name] in COUNT_TYPES:
            layers = source.layers if isinstance(source, LayeredSource) else None
            where = (
                f" (this file's layers: {list(layers)})"
                if layers
                else " (for an H5AD file, the layer that holds them)"
            )
            warn_user(
                f"{source.location}: assay {name} of type {types[name]} holds {found.non_integer} "
                "non-integer values where counts are integers; normalized values would be "
                "normalized again - import the raw counts instead: layer='counts' (--layer counts "
                f"on the command line){where}"
            )


def _fit_layout(
    layout: CountLayout,
    *,
    shape: tuple[int, int],
    dtype: np.dtype,
    budget: int,
    explicit: bool,
    where: str,
) -> CountLayout:
    """``layout`` when its counts bands and countsT shards fit a worker, else a refusal naming the halving that fits."""

    def fits(policy: CountLayout) -> bool:
        return layout_fits(policy, shape=shape, dtype=dtype, budget=budget)

    if fits(layout):
        return layout
    candidate = layout.halved()
    while not fits(candidate) and candidate.chunk_bytes > 1:
        candidate = candidate.halved()
    hint = (
        f"the largest halving that fits is {candidate.to_json()}"
        if fits(candidate)
        else "no halving fits"
    )
    kind = "the given layout" if explicit else "the default layout"
    msg = (
        f"{where}: {kind} {layout.to_json()} does not fit a worker's memory ({budget} bytes); "
        f"{hint}: pass layout=CountLayout(...) with it, or raise mem_budget (on a cluster CyteArc did not start: the workers' --memory-limit)"
    )
    raise MemBudgetError(msg)


def _table_digest(table: pd.DataFrame, columns: tuple[str, ...]) -> bytes:
    h = hashlib.sha256()
    for name in columns:
        h.update(utf8_str(name))
        for value in table[name].astype(str):
            h.update(utf8_str(value))
    return h.digest()


def dataset_fingerprint(
    cells: pd.DataFrame, features: Mapping[str, pd.DataFrame], counts: Mapping[str, str]
) -> str:
    """SHA-256 over the cell ids, each assay's feature ids and names, and its counts fingerprint."""
    h = hashlib.sha256(b"cytearc dataset fingerprint 1\n")
    h.update(_table_digest(cells, ("ids",)))
    for name in sorted(features):
        h.update(utf8_str(name))
        h.update(_table_digest(features[name], ("ids", "names")))
        h.update(utf8_str(counts[name]))
    return format_digest(h)


@document_store_options
def write_store(
    source: CountSource,
    destination: str | Path,
    *,
    assay_split_key: AssaySplitKey | None = None,
    assay_types: Mapping[str, str] | None = None,
    layout: CountLayout | None = None,
    compression: Compression = DEFAULT_COMPRESSION,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: str | Client | None = None,
    engine: Engine | None = None,
    show_progress: bool = True,
) -> ImportResult:
    """Import ``source`` into a new store at ``destination``.

    Every file importer (:mod:`cytearc.io.converters`) opens its source and
    calls this; the source stays open (close it afterwards).

    Parameters
    ----------
    source
        The counts and tables to import.
    destination
        A local directory or an fsspec URL (created; see
        :mod:`cytearc.storage.destinations`).
    %(store_options)s

    Returns
    -------
    ImportResult
        The new store's path, assays, shapes, dtypes and dataset fingerprint.

    Raises
    ------
    %(store_raises)s

    Examples
    --------
    >>> import tempfile, numpy as np, pandas as pd
    >>> from cytearc.io.sources import SparseSource
    >>> source = SparseSource(
    ...     np.array([[1, 0], [0, 2], [3, 4]]),
    ...     pd.DataFrame({"ids": ["c1", "c2", "c3"]}),
    ...     pd.DataFrame({"ids": ["g1", "g2"], "names": ["G1", "G2"],
    ...                   "feature_types": ["Gene Expression"] * 2}),
    ... )
    >>> with tempfile.TemporaryDirectory() as d:
    ...     result = write_store(source, f"{d}/ds.zarr", cluster="threads", show_progress=False)
    ...     result.shapes, result.dtypes
    ({'RNA': (3, 2)}, {'RNA': 'uint8'})
    """
    location = validate_destination(
        destination, overwrite=overwrite, storage_options=storage_options
    )
    path = location.path or str(location)
    _validate_shape(source)
    validate_unique_cells(source.cells["ids"].to_numpy(), source.location)
    engine = engine or get_engine(mem_budget=mem_budget, workers=workers, cluster=cluster)
    codec = compressor(compression, error=CyteArcError)
    n_cells, _ = source.shape
    features = source.features.reset_index(drop=True)
    assays = _assays_of(features, assay_split_key)
    features = _unique_within_assays(features, assays, location=source.location)
    types = {
        name: resolve_assay_type(name, explicit=(assay_types or {}).get(name), where=str(path))
        for name in assays
    }
    cells, membership = _membership(source, assays)
    scanned = _scan(source, assays, show_progress=show_progress)
    _warn_of_values(source, scanned, types)
    dtypes = {name: resolve_count_dtype(scanned[name].range) for name in assays}
    layouts = {
        name: _fit_layout(
            layout or DEFAULT_LAYOUT,
            shape=(n_cells, len(cols)),
            dtype=dtypes[name],
            budget=engine.worker_memory(),
            explicit=layout is not None,
            where=f"{path}: assay {name}",
        )
        for name, cols in assays.items()
    }
    root = create_destination(location, overwrite=overwrite)
    root.attrs.update(
        {
            "cytearc:format": STORE_FORMAT,
            "cytearc:formatVersion": STORE_FORMAT_VERSION,
            "cytearc:complete": False,
            "assayTypes": types,
        }
    )
    cells_group = root.create_group("cellData")
    write_table(cells_group, cells, dimension="cell", where=f"{path}/cellData")
    write_membership_columns(cells_group, membership, n_rows=n_cells, where=f"{path}/cellData")
    matrices = root.create_group("matrices")
    writers = {}
    feature_tables = {}
    for name, cols in assays.items():
        assay = root.create_group(name, attributes={"is_assay": True})
        feature_tables[name] = features.iloc[cols].reset_index(drop=True)
        write_table(
            assay.create_group("featureData"),
            feature_tables[name],
            dimension="feature",
            where=f"{path}/{name}/featureData",
        )
        writers[name] = CountsWriter(
            matrices.create_group(name),
            shape=(n_cells, len(cols)),
            dtype=dtypes[name],
            layout=layouts[name],
            compressor=codec,
            engine=engine,
            where=f"{path}/matrices/{name}",
            transpose=types[name] in RNA_TYPES,
        )
    band_rows = min(w.band_rows for w in writers.values())
    bar = tqdm(total=n_cells, desc="write counts", unit="cells", disable=not show_progress)
    for _, band in iter_bands(source, band_rows):
        for name, cols in assays.items():
            writers[name].append(band[:, cols] if len(assays) > 1 else band)
        bar.update(band.shape[0])
    bar.close()
    fingerprints = {}
    for name, writer in writers.items():
        written = writer.finish(transpose=types[name] in RNA_TYPES)
        write_summaries(matrices[name], written)  # type: ignore[arg-type]
        fingerprints[name] = written.content_fingerprint
    fingerprint = dataset_fingerprint(cells, feature_tables, fingerprints)
    root.attrs.update({"cytearc:datasetFingerprint": fingerprint, "cytearc:complete": True})
    engine.release_memory()
    return ImportResult(
        path=path,
        assays=types,
        shapes={name: (n_cells, len(cols)) for name, cols in assays.items()},
        dtypes={name: str(dtype) for name, dtype in dtypes.items()},
        dataset_fingerprint=fingerprint,
    )
