"""Derived assays: features of an assay summed into groups, or ATAC peaks melded into genes.

Both write the new assay through the pending-assay protocol: the group
``{assay_label}`` is created with ``cytearc:pending_assay`` (the operation)
and no ``is_assay``, so assay scans skip it. Its declared type, feature
table, ``counts`` (and ``countsT`` for RNA types), summaries and membership
column ``{assay_label}_I`` (a copy of the source's, when it has one) follow.
Then one attribute write replaces ``cytearc:pending_assay`` with
``is_assay=True`` and the ``cytearc:derived`` record (operation, source
assay, its counts fingerprint, parameters). A process killed before that
write leaves a pending assay: :func:`discard_interrupted_assay` removes it.

Values are float64: each new feature is the sum of the source features that
map to it, per cell (a sparse matrix product on the engine, band by band of
whole shards). A derived assay is a function of its source, so it is left
out of the dataset fingerprint, which names the imported data.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import dask.array as da
import numpy as np
import pandas as pd
import scipy.sparse as sp
import zarr

from cytearc.assays.types import PRESETS, RNA_TYPES
from cytearc.errors import (
    AssayNotFoundError,
    AssayTypeError,
    ColumnNotFoundError,
    OperationArgumentError,
    ReadOnlyStoreError,
    ReservedColumnError,
)
from cytearc.metadata.membership import membership_column, write_membership_columns
from cytearc.metadata.table import COLUMNS_ATTRIBUTE, list_columns, write_table
from cytearc.storage.counts import (
    fit_layout,
    write_count_arrays,
    write_summaries,
)
from cytearc.storage.destinations import CYTEARC_GROUPS
from cytearc.storage.layout import DEFAULT_LAYOUT
from cytearc.storage.nodes import DERIVED_ATTRIBUTE, PENDING_ATTRIBUTE, child_node, member_names
from cytearc.storage.store import workspace_groups

if TYPE_CHECKING:
    from cytearc.storage.store import Store

__all__ = [
    "add_grouped_assay",
    "add_melded_assay",
    "discard_interrupted_assay",
]

_PEAK: Final = re.compile(r"^(?P<chrom>[^:\-_]+)[:\-_](?P<start>\d+)[\-_](?P<end>\d+)$")
"""A peak id as 10x (``chr1:100-200``) or Signac (``chr1-100-200``) writes it."""


def _writable(store: Store, operation: str) -> None:
    if not store.writable:
        msg = f"{store.where}: {operation} writes an assay; open the store with zarr_mode='r+'"
        raise ReadOnlyStoreError(msg)


def _refuse_label(store: Store, label: str, operation: str) -> None:
    """Refuse a label that is a group of the store, or whose membership name is a cell column."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", label) or label in CYTEARC_GROUPS:
        msg = f"{operation}: assay_label {label!r}: expected a name of letters, digits, '_', '.' or '-' that is not a group CyteArc writes"
        raise OperationArgumentError(msg)
    matrices = child_node(store.store_root, "matrices", where=store.where)
    if (
        label in member_names(store.root, where=store.where)
        or label in member_names(store.store_root, where=store.where)
        or label in store.assay_types
        or (isinstance(matrices, zarr.Group) and label in matrices)
    ):
        msg = f"{store.where}: {operation}: {label!r} is already an assay or group of the store or of one of its workspaces, which share matrices/{label} (or a pending assay: see discard_interrupted_assay); choose another assay_label"
        raise OperationArgumentError(msg)
    if f"{label}_I" in store.cells.columns:
        msg = f"{store.where}: {operation}: the membership name {label}_I of the new assay is already a cell column; drop that column or choose another assay_label"
        raise ReservedColumnError(msg)


def _sum_band(block: np.ndarray, mapping: sp.csr_matrix) -> np.ndarray:
    if not block.size:
        return np.zeros((block.shape[0], mapping.shape[1]))
    return np.asarray(
        (sp.csr_matrix(block, dtype=np.float64) @ mapping).toarray(), dtype=np.float64
    )


def _summed(x: da.Array, mapping: sp.csr_matrix) -> da.Array:
    """``x @ mapping`` in float64, band by band (``mapping``: source features x new features)."""
    x = x.rechunk({1: x.shape[1]})
    summed: da.Array = da.map_blocks(
        _sum_band, x, mapping, dtype=np.float64, chunks=(x.chunks[0], (mapping.shape[1],))
    )
    return summed


def _write_derived(
    store: Store,
    *,
    operation: str,
    from_assay: str,
    label: str,
    assay_type: str,
    features: pd.DataFrame,
    mapping: sp.csr_matrix,
    parameters: dict[str, Any],
) -> str:
    """The pending-assay protocol (see the module documentation); returns the new assay's name."""
    source = store.assays[from_assay]
    engine = store.engine
    layout = fit_layout(
        DEFAULT_LAYOUT,
        shape=(source.shape[0], mapping.shape[1]),
        dtype=np.dtype(np.float64),
        budget=engine.worker_memory(),
        where=f"{store.where}: {operation}",
    )
    measured_column = membership_column(store.cells, from_assay)
    measured = (
        None if measured_column is None else store.cells.fetch_all(measured_column).astype(bool)
    )
    group = store.root.create_group(label, attributes={PENDING_ATTRIBUTE: operation})
    recorded = store.root.attrs.get("assayTypes")
    store.root.attrs["assayTypes"] = {
        **(recorded if isinstance(recorded, dict) else {}),
        label: assay_type,
    }
    write_table(
        group.create_group("featureData"),
        features,
        dimension="feature",
        where=f"{store.where}/{label}/featureData",
    )
    matrix = store.store_root.require_group("matrices").create_group(label)
    written = write_count_arrays(
        matrix,
        _summed(source.counts, mapping),
        layout=layout,
        compressor=source.compressor,
        engine=engine,
        transpose=assay_type in RNA_TYPES,
        where=f"{store.where}/matrices/{label}",
    )
    write_summaries(matrix, written)
    if measured is not None:
        cells = store.cells.group
        write_membership_columns(
            cells, {label: measured}, n_rows=len(measured), where=f"{store.where}/cellData"
        )
    group.attrs.put(
        {
            "is_assay": True,
            DERIVED_ATTRIBUTE: {
                "operation": operation,
                "fromAssay": from_assay,
                "sourceCountsFingerprint": source.content_fingerprint,
                "parameters": parameters,
            },
        }
    )
    store.reopen_assays()
    return label


def add_grouped_assay(
    store: Store,
    *,
    from_assay: str,
    group_key: str,
    assay_label: str,
    assay_type: str = "Assay",
) -> str:
    """Add an assay whose features are ``from_assay``'s summed by a feature-table grouping.

    Parameters
    ----------
    store
        A store opened with ``zarr_mode="r+"``.
    from_assay
        The source assay.
    group_key
        A column of its feature table naming each feature's group (gene
        sets, feature clusters); features whose value is missing are left out.
    assay_label
        The new assay's name.
    assay_type
        Its preset (default ``"Assay"``, the generic type).

    Returns
    -------
    str
        The new assay's name.

    Raises
    ------
    ReadOnlyStoreError
        The store was opened read-only.
    AssayNotFoundError
        ``from_assay`` is not an assay of the store.
    ColumnNotFoundError
        ``group_key`` is not a column of its feature table.
    OperationArgumentError
        ``assay_label`` is taken (also by a pending assay) or not a name, or
        no feature has a group.
    ReservedColumnError
        ``{assay_label}_I`` is already a cell column.
    AssayTypeError
        ``assay_type`` is not a preset.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from cytearc import DataStore
    >>> from cytearc.datasets import write_store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_store(f"{d}/ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    ...     ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    ...     ds.RNA.features.insert("set", np.where(np.arange(600) < 300, "first", "second"))
    ...     name = ds.add_grouped_assay(from_assay="RNA", group_key="set", assay_label="Sets")
    ...     name, ds.Sets.shape, ds.Sets.features.fetch_all("ids").tolist()
    ('Sets', (300, 2), ['first', 'second'])
    """
    operation = "add_grouped_assay"
    _writable(store, operation)
    if from_assay not in store.assays:
        msg = f"{store.where}: {operation}: no assay {from_assay!r}; the store has {sorted(store.assays)}"
        raise AssayNotFoundError(msg)
    if assay_type not in PRESETS:
        msg = f"{operation}: assay_type {assay_type!r} is not a preset; use one of {list(PRESETS)}"
        raise AssayTypeError(msg)
    _refuse_label(store, assay_label, operation)
    source = store.assays[from_assay]
    if group_key not in source.features.columns:
        msg = f"{source.where}/featureData: {operation}: no column {group_key!r}; columns are {source.features.columns}"
        raise ColumnNotFoundError(msg)
    labels = source.features.fetch_series(group_key)
    present = ~labels.isna().to_numpy()
    groups = pd.unique(labels[present].astype(str))
    if not len(groups):
        msg = f"{source.where}/featureData/{group_key}: {operation}: no feature has a group; give a column with group names"
        raise OperationArgumentError(msg)
    position = {g: i for i, g in enumerate(groups)}
    rows = np.flatnonzero(present)
    columns = np.array([position[str(v)] for v in labels[present]], dtype=np.int64)
    mapping = sp.csr_matrix(
        (np.ones(len(rows)), (rows, columns)), shape=(source.shape[1], len(groups))
    )
    sizes = np.bincount(columns, minlength=len(groups))
    features = pd.DataFrame(
        {"ids": groups.astype(object), "names": groups.astype(object), "n_features": sizes}
    )
    return _write_derived(
        store,
        operation=operation,
        from_assay=from_assay,
        label=assay_label,
        assay_type=assay_type,
        features=features,
        mapping=mapping,
        parameters={"groupKey": group_key, "assayType": assay_type},
    )


def _peaks(ids: np.ndarray, where: str) -> pd.DataFrame:
    parsed = [_PEAK.match(str(i)) for i in ids]
    bad = [str(i) for i, m in zip(ids, parsed, strict=True) if m is None]
    if bad:
        msg = f"{where}: peak ids {bad[:3]} are not chrom:start-end (or chrom-start-end); add_melded_assay needs peak coordinates"
        raise OperationArgumentError(msg)
    return pd.DataFrame(
        {
            "chrom": [m["chrom"] for m in parsed if m],
            "start": np.array([int(m["start"]) for m in parsed if m]),
            "end": np.array([int(m["end"]) for m in parsed if m]),
        }
    )


def _gene_table(genes: pd.DataFrame) -> pd.DataFrame:
    needed = {"chrom", "start", "end", "gene"}
    missing = sorted(needed - set(genes.columns))
    if missing:
        msg = f"gene_coordinates: columns {missing} are missing; expected chrom, start, end, gene (and strand, '+' or '-')"
        raise OperationArgumentError(msg)
    table = genes.reset_index(drop=True).copy()
    if "strand" not in table.columns:
        table["strand"] = "+"
    if (table["end"] < table["start"]).any():
        msg = "gene_coordinates: a gene ends before it starts; check start and end"
        raise OperationArgumentError(msg)
    return table


def add_melded_assay(
    store: Store,
    *,
    from_assay: str = "ATAC",
    gene_coordinates: pd.DataFrame,
    assay_label: str = "GeneActivity",
    upstream: int = 2000,
    downstream: int = 0,
) -> str:
    """Add a gene activity assay: ATAC peaks melded into the genes whose body (plus promoter) they overlap.

    As Signac's ``GeneActivity``: each gene's region is its body extended
    ``upstream`` bases before its transcription start (strand-aware) and
    ``downstream`` after its end; a gene's value in a cell is the sum of the
    counts of the peaks that overlap its region (a peak overlapping two
    genes counts for both). Genes that no peak overlaps are left out.

    Parameters
    ----------
    store
        A store opened with ``zarr_mode="r+"``.
    from_assay
        The ATAC assay; its feature ids are peaks ``chrom:start-end``.
    gene_coordinates
        One row per gene: ``chrom``, ``start``, ``end``, ``gene`` (its id)
        and optionally ``strand`` and ``name``.
    assay_label
        The new assay's name (type ``GeneActivity``, an RNA type: it gets
        ``countsT``).
    upstream, downstream
        The promoter extension before the start and after the end, bases.

    Returns
    -------
    str
        The new assay's name.

    Raises
    ------
    OperationArgumentError
        Peak ids are not coordinates, ``gene_coordinates`` lacks a column,
        no peak overlaps a gene, or ``assay_label`` is taken.
    ReservedColumnError
        ``{assay_label}_I`` is already a cell column.
    ReadOnlyStoreError
        The store was opened read-only.
    AssayNotFoundError
        ``from_assay`` is not an assay of the store.
    """
    operation = "add_melded_assay"
    _writable(store, operation)
    if from_assay not in store.assays:
        msg = f"{store.where}: {operation}: no assay {from_assay!r}; the store has {sorted(store.assays)}"
        raise AssayNotFoundError(msg)
    if upstream < 0 or downstream < 0:
        msg = (
            f"{operation}: upstream and downstream must be >= 0, found {upstream} and {downstream}"
        )
        raise OperationArgumentError(msg)
    _refuse_label(store, assay_label, operation)
    source = store.assays[from_assay]
    peaks = _peaks(source.features.fetch_all("ids"), f"{source.where}/featureData/ids")
    genes = _gene_table(gene_coordinates)
    plus = genes["strand"].astype(str) != "-"
    begin = np.where(plus, genes["start"] - upstream, genes["start"] - downstream).clip(min=0)
    finish = np.where(plus, genes["end"] + downstream, genes["end"] + upstream)
    rows, columns = [], []
    for chrom, on_chrom in peaks.groupby("chrom", sort=False).groups.items():
        gene_rows = np.flatnonzero((genes["chrom"].astype(str) == chrom).to_numpy())
        if not len(gene_rows):
            continue
        peak_rows = np.asarray(on_chrom)
        starts = peaks["start"].to_numpy()[peak_rows]
        ends = peaks["end"].to_numpy()[peak_rows]
        for g in gene_rows:
            hit = peak_rows[(starts <= finish[g]) & (ends >= begin[g])]
            rows.extend(hit.tolist())
            columns.extend([g] * len(hit))
    if not rows:
        msg = f"{source.where}: {operation}: no peak overlaps a gene region of gene_coordinates; check that chromosome names match (chr1 or 1)"
        raise OperationArgumentError(msg)
    used = np.unique(columns)
    remap = {g: i for i, g in enumerate(used)}
    mapping = sp.csr_matrix(
        (np.ones(len(rows)), (rows, [remap[g] for g in columns])),
        shape=(source.shape[1], len(used)),
    )
    names = genes["name"] if "name" in genes.columns else genes["gene"]
    features = pd.DataFrame(
        {
            "ids": genes["gene"].astype(str).to_numpy(dtype=object)[used],
            "names": names.astype(str).to_numpy(dtype=object)[used],
            "n_peaks": np.bincount([remap[g] for g in columns], minlength=len(used)),
        }
    )
    return _write_derived(
        store,
        operation=operation,
        from_assay=from_assay,
        label=assay_label,
        assay_type="GeneActivity",
        features=features,
        mapping=mapping,
        parameters={"upstream": upstream, "downstream": downstream, "genes": len(genes)},
    )


def _published(store: Store, name: str) -> bool:
    """Whether the store's root or one of its workspaces published an assay ``name`` (whose counts stay)."""
    scopes = [store.store_root, *workspace_groups(store.store_root, where=store.where).values()]
    return any(
        isinstance(node := child_node(scope, name, where=store.where), zarr.Group)
        and node.attrs.get("is_assay") is True
        for scope in scopes
    )


def discard_interrupted_assay(store: Store, name: str) -> None:
    """Remove a pending derived assay a killed writer left: its group, counts, type and membership column.

    Call it only after confirming that no process is writing it.

    Parameters
    ----------
    store
        A store opened with ``zarr_mode="r+"``.
    name
        The pending assay.

    Raises
    ------
    ReadOnlyStoreError
        The store was opened read-only.
    OperationArgumentError
        ``name`` is not a pending assay (a published assay is never removed).
    """
    _writable(store, "discard_interrupted_assay")
    node = child_node(store.root, name, where=store.where)
    if not isinstance(node, zarr.Group) or PENDING_ATTRIBUTE not in node.attrs:
        kind = (
            "a published assay"
            if isinstance(node, zarr.Group) and node.attrs.get("is_assay")
            else "not a pending assay"
        )
        msg = f"{store.where}/{name}: discard_interrupted_assay: {kind}; only an assay a killed writer left pending (cytearc:pending_assay) is removed"
        raise OperationArgumentError(msg)
    cells = store.cells.group
    column = f"{name}_I"
    if column in cells:
        recorded = cells.attrs[COLUMNS_ATTRIBUTE]
        assert isinstance(recorded, list)
        listed = [str(c) for c in recorded if c != column]
        list_columns(cells, listed)
        del cells[column]
    matrices = child_node(store.store_root, "matrices", where=store.where)
    if isinstance(matrices, zarr.Group) and name in matrices and not _published(store, name):
        del matrices[name]
    recorded_types = store.root.attrs.get("assayTypes")
    types = dict(recorded_types) if isinstance(recorded_types, dict) else {}
    if name in types:
        del types[name]
        store.root.attrs["assayTypes"] = types
    del store.root[name]
