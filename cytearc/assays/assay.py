"""``Assay``: one assay of a store, its feature table and its count arrays, validated on open.

:class:`Assay` is also the generic assay type (the presets ``CRISPR``,
``ANTIGEN``, ``CUSTOM``, ``GeneScores`` and ``Assay``): it stores ``counts``
only and has no modality-specific normalization. The modality classes
(:mod:`cytearc.assays.modalities`) subclass it with their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import zarr

from cytearc.engine.arrays import open_lazy
from cytearc.errors import (
    AssayTypeError,
    CountSummariesError,
    FeatureNotFoundError,
    LayoutError,
    OperationArgumentError,
    StoreFormatError,
)
from cytearc.metadata.table import MetaData
from cytearc.storage.counts import LAYOUT_ATTRIBUTE, source_compressor
from cytearc.storage.damage import missing_units, read_region
from cytearc.storage.layout import CountLayout
from cytearc.storage.nodes import DERIVED_ATTRIBUTE, child_group, child_node
from cytepool._html import code, items, json_code, view

if TYPE_CHECKING:
    from collections.abc import Sequence

    import dask.array as da
    from zarr.abc.codec import BytesBytesCodec

    from cytepool._html import Row

__all__ = ["SUMMARIES", "Assay", "AssayDefaults"]

SUMMARIES = ("rowSums", "rowPositive", "columnPositive")
"""The arrays of an assay's ``countSummaries`` group."""


@dataclass(frozen=True, kw_only=True)
class AssayDefaults:
    """What an assay class analyses its counts with unless told otherwise.

    Parameters
    ----------
    normalization
        The method of ``features.normalize``: ``"library_size"``, ``"clr"``,
        ``"tfidf"`` or ``"none"`` (see :mod:`cytearc.ops.normalize`).
    feature_selection
        The operation ``features.select`` runs: ``"hvgs"`` or ``"prevalent_peaks"``.
    reduction
        The operation ``reduce.default`` runs: ``"pca"`` or ``"lsi"``.
    """

    normalization: str
    feature_selection: str
    reduction: str


class Assay:
    """One assay of a store: its type, feature table, and count arrays as lazy Dask arrays.

    As a class of its own, the generic assay type: ``counts`` only, no
    modality-specific normalization (``"none"``: the counts themselves, as
    Scarf's generic assay), highly variable features and PCA.

    Opening checks what the seed requires of the assay's arrays: ``counts``
    (and ``countsT`` for RNA types) sharded Zarr v3 arrays whose shards and
    chunks are those of the recorded layout, a feature table of as many rows
    as counts has columns, and count summaries bound to these counts.

    Parameters
    ----------
    name
        The assay's group name below the store root.
    assay_type
        Its preset (see :mod:`cytearc.assays.types`).
    root
        The group holding the assay's group: the store's root, or a workspace's.
    where
        The store's location, for messages.
    writable
        Whether the feature table may be written.
    matrices_root
        The store's root group, which holds ``matrices/{name}``; None for ``root``.
    workspace
        The workspace ``root`` is, or None.

    Raises
    ------
    StoreFormatError
        A group or array is missing, of another kind or shape, or the
        summaries describe other counts.
    LayoutError
        The layout records of the arrays disagree with each other or the arrays.
    """

    defaults: ClassVar[AssayDefaults] = AssayDefaults(
        normalization="none", feature_selection="hvgs", reduction="pca"
    )
    """The class's normalization, feature selection and reduction."""
    stores_transpose: ClassVar[bool] = False
    """Whether the assay stores ``countsT`` beside ``counts`` (RNA types)."""

    def __init__(
        self,
        *,
        name: str,
        assay_type: str,
        root: zarr.Group,
        where: str,
        writable: bool,
        matrices_root: zarr.Group | None = None,
        workspace: str | None = None,
    ) -> None:
        self.name = name
        self.assayType = assay_type
        tables = where if workspace is None else f"{where}/{workspace}"
        self.where = f"{tables}/{name}"
        self._repair = (
            "re-import the source, or rebuild the count arrays from counts: "
            f"python -m cytearc.tools.repack_zarr {where} OUT --data-only"
        )
        group = child_group(root, name, where=tables)
        self._group = group
        self.features = MetaData(
            child_group(group, "featureData", where=self.where),
            dimension="feature",
            where=f"{self.where}/featureData",
            writable=writable,
        )
        self.matrix = child_group(
            child_group(root if matrices_root is None else matrices_root, "matrices", where=where),
            name,
            where=f"{where}/matrices",
        )
        self._matrix_where = f"{where}/matrices/{name}"
        self.layout = CountLayout.from_json(
            self.matrix.attrs.get(LAYOUT_ATTRIBUTE), where=f"{where}/matrices/{name}"
        )
        self._counts = self._count_array("counts", shape=None)
        n_cells, n_features = self._counts.shape
        if n_features != self.features.n_rows:
            msg = f"{self.where}: counts has {n_features} features, the feature table {self.features.n_rows}; re-import the store"
            raise StoreFormatError(msg)
        self._counts_t = None
        if self.stores_transpose:
            self._counts_t = self._count_array("countsT", shape=(n_features, n_cells))
            if self._counts_t.dtype != self._counts.dtype:
                msg = f"{self.where}: countsT has dtype {self._counts_t.dtype}, counts {self._counts.dtype}; {self._repair}"
                raise StoreFormatError(msg)
        self._validate_summaries()

    def _count_array(self, name: str, *, shape: tuple[int, int] | None) -> zarr.Array[Any]:
        where = f"{self.where}: {name}"
        remedy = "re-import the source" if name == "counts" else self._repair
        array = child_node(self.matrix, name, where=self._matrix_where)
        if array is None:
            msg = f"{where} is missing; an {self.assayType} assay needs it - {remedy}"
            raise StoreFormatError(msg)
        if (
            not isinstance(array, zarr.Array)
            or array.metadata.zarr_format != 3
            or array.shards is None
        ):
            msg = f"{where} must be a sharded Zarr v3 array; {remedy}"
            raise StoreFormatError(msg)
        if shape is not None and tuple(array.shape) != shape:
            msg = f"{where} has shape {tuple(array.shape)}, expected {shape} (counts transposed); {remedy}"
            raise StoreFormatError(msg)
        recorded = CountLayout.from_json(array.attrs.get(LAYOUT_ATTRIBUTE), where=where)
        if recorded != self.layout:
            msg = f"{where}: layout {recorded.to_json()} disagrees with the matrix group's {self.layout.to_json()}"
            raise LayoutError(msg)
        rows, cols = array.shape
        expected = self.layout.array_layout((rows, cols), itemsize=np.dtype(array.dtype).itemsize)
        if (tuple(array.shards), tuple(array.chunks)) != (expected.shards, expected.chunks):
            msg = f"{where}: shards {array.shards} and chunks {array.chunks} are not the layout's {expected.shards} and {expected.chunks}"
            raise LayoutError(msg)
        return array

    def _validate_summaries(self) -> None:
        fingerprint = self._counts.attrs.get("content_fingerprint")
        if not isinstance(fingerprint, str):
            msg = f"{self.where}: counts attribute 'content_fingerprint': expected a string, found {fingerprint!r}; re-import the source"
            raise StoreFormatError(msg)
        self._summaries()

    def _summaries(self) -> zarr.Group:
        """The ``countSummaries`` group, refused unless it is bound to these counts."""
        summaries = child_node(self.matrix, "countSummaries", where=self._matrix_where)
        if not isinstance(summaries, zarr.Group):
            msg = f"{self._matrix_where}/countSummaries: expected the group of count summaries, found {'nothing' if summaries is None else 'an array'}; {self._repair}"
            raise CountSummariesError(msg)
        bound = summaries.attrs.get("source_fingerprint")
        if bound != self.content_fingerprint:
            msg = f"{self._matrix_where}/countSummaries: attribute 'source_fingerprint': expected the counts' content fingerprint {self.content_fingerprint}, found {bound!r} (summaries of other counts); {self._repair}"
            raise CountSummariesError(msg)
        return summaries

    @property
    def derived(self) -> dict[str, Any] | None:
        """The ``cytearc:derived`` record of a derived assay (operation, source, parameters), else None."""
        record = self._group.attrs.get(DERIVED_ATTRIBUTE)
        return dict(record) if isinstance(record, dict) else None

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_cells, n_features)`` of the counts."""
        n_cells, n_features = self._counts.shape
        return (n_cells, n_features)

    @property
    def dtype(self) -> np.dtype:
        """The storage dtype of ``counts`` and ``countsT``."""
        return np.dtype(self._counts.dtype)

    @property
    def content_fingerprint(self) -> str:
        """The identity of the counts (see :mod:`cytearc.storage.identity`)."""
        return str(self._counts.attrs["content_fingerprint"])

    @property
    def counts(self) -> da.Array:
        """Cells x features, lazy, one block per shard."""
        return open_lazy(self._counts)

    @property
    def countsT(self) -> da.Array:  # noqa: N802 (the store's array name)
        """Features x cells, lazy, one block per shard (RNA-type assays).

        Raises
        ------
        AttributeError
            The assay is not of an RNA type and stores no ``countsT``.
        """
        return open_lazy(self._stored_transpose())

    def _stored_transpose(self) -> zarr.Array[Any]:
        if self._counts_t is None:
            msg = f"{self.where}: a {self.assayType} assay has no countsT (only RNA-type assays store it); use counts"
            raise AttributeError(msg)
        return self._counts_t

    @property
    def compressor(self) -> BytesBytesCodec | None:
        """The codec after ``bytes`` of ``counts`` (what copies of these counts are written with)."""
        return source_compressor(self._counts)

    def row_source(
        self, name: Literal["counts", "countsT"] = "counts"
    ) -> zarr.Array[Any] | da.Array:
        """What :func:`~cytearc.engine.arrays.map_row_pieces` reads of ``counts`` or ``countsT``: the stored array.

        Parameters
        ----------
        name
            ``"counts"`` or ``"countsT"``.

        Returns
        -------
        zarr.Array or dask.array.Array
            The stored array (decoded piece by piece where it is in CyteArc's
            layout); other assay classes return a lazy array.

        Raises
        ------
        AttributeError
            ``countsT`` of an assay that does not store it.
        """
        return self._stored_transpose() if name == "countsT" else self._counts

    def stored_arrays(self) -> tuple[zarr.Array[Any], zarr.Array[Any] | None]:
        """The stored ``counts`` and ``countsT`` (None for assays without it), for readers of their chunks.

        Returns
        -------
        tuple of zarr.Array and zarr.Array or None
            The arrays.
        """
        return self._counts, self._counts_t

    def feature_positions(self, features: Sequence[str]) -> list[int]:
        """The position of each feature, found by name or id (the first match).

        Parameters
        ----------
        features
            Names or ids of the feature table.

        Returns
        -------
        list of int
            One position per feature, in order.

        Raises
        ------
        FeatureNotFoundError
            A feature is neither a name nor an id of the assay.
        """
        names = self.features.fetch_all("names").astype(object)
        ids = self.features.fetch_all("ids").astype(object)
        positions, missing = [], []
        for feature in features:
            hits = np.flatnonzero((names == feature) | (ids == feature))
            if len(hits):
                positions.append(int(hits[0]))
            else:
                missing.append(feature)
        if missing:
            msg = f"{self.where}: no feature named {missing[:5]!r} in assay {self.name!r} (expected a value of its feature table's 'names' or 'ids') - check the spelling or the assay"
            raise FeatureNotFoundError(msg)
        return positions

    def feature_rows(self, features: np.ndarray) -> np.ndarray:
        """The counts of a few features over every cell.

        Read from ``countsT`` with an orthogonal selection, so only the inner
        chunks that hold these features are fetched and decoded (a handful of
        genes reads a fraction of a percent of the matrix).

        Parameters
        ----------
        features
            Feature positions.

        Returns
        -------
        numpy.ndarray
            ``(len(features), n_cells)`` of the storage dtype.

        Raises
        ------
        AssayTypeError
            The assay is not of an RNA type and stores no ``countsT``.
        """
        if self._counts_t is None:
            msg = f"{self.where}: feature_rows reads countsT, which only RNA-type assays store; this {self.assayType} assay has none - read columns of counts instead"
            raise AssayTypeError(msg)
        rows = np.asarray(features, dtype=np.int64)
        if not len(rows):
            return np.zeros((0, self.shape[0]), dtype=self.dtype)
        return np.asarray(self._counts_t.get_orthogonal_selection((rows, slice(None))))

    def summary(self, name: str) -> np.ndarray:
        """A count summary, one value per cell or per feature.

        Parameters
        ----------
        name
            ``rowSums``, ``rowPositive`` or ``columnPositive``.

        Returns
        -------
        numpy.ndarray
            The summary's values.

        Raises
        ------
        OperationArgumentError
            ``name`` is not one of the summaries.
        CountSummariesError
            The summaries are bound to other counts, or this one is missing,
            of another shape or dtype, or lacks a chunk (which would read as
            zeros).
        StoreDamageError
            A chunk of it fails its checksum.
        """
        if name not in SUMMARIES:
            msg = f"{self._matrix_where}/countSummaries: no summary {name!r}; expected one of {list(SUMMARIES)} - pass one of them"
            raise OperationArgumentError(msg)
        where = f"{self._matrix_where}/countSummaries/{name}"
        array = child_node(self._summaries(), name, where=f"{self._matrix_where}/countSummaries")
        length = self.shape[1] if name == "columnPositive" else self.shape[0]
        kind = "f" if name == "rowSums" and self.dtype.kind == "f" else "i"
        if not isinstance(array, zarr.Array):
            msg = f"{where}: expected an array of {length} values, found {'nothing' if array is None else 'a group'}; {self._repair}"
            raise CountSummariesError(msg)
        if tuple(array.shape) != (length,) or np.dtype(array.dtype) != np.dtype(f"{kind}8"):
            msg = f"{where}: expected shape ({length},) and dtype {np.dtype(f'{kind}8')}, found {tuple(array.shape)} and {array.dtype}; {self._repair}"
            raise CountSummariesError(msg)
        missing = missing_units(array)
        if missing:
            msg = f"{where}: chunk {missing[0]} is missing (it would read as zeros); the summaries of a store are complete - {self._repair}"
            raise CountSummariesError(msg)
        return read_region(array, slice(None))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.assayType}): {self._counts.shape[0]} cells x {self._counts.shape[1]} features, {self._counts.dtype}>"

    def _repr_html_(self) -> str:
        """The assay in a notebook: type, shape, storage layout and counts fingerprint (no value read)."""
        n_cells, n_features = self.shape
        derived = self.derived
        transposed = self._counts_t
        rows: list[Row] = [
            ("type", self.assayType),
            ("shape", f"{n_cells:,} cells x {n_features:,} features"),
            ("dtype", self.dtype),
            ("counts", _stored(self._counts)),
            ("countsT", None if transposed is None else _stored(transposed)),
            ("compressor", self.compressor or "none"),
            ("counts fingerprint", code(self.content_fingerprint)),
            ("feature columns", items(self.features.columns)),
            ("derived", None if derived is None else json_code(derived)),
            ("location", code(self.where)),
        ]
        return view(f"Assay {self.name}", rows)


def _stored(array: zarr.Array[Any]) -> str:
    """The shape of a stored count array's shards and chunks."""
    return f"shards {tuple(array.shards or ())}, chunks {tuple(array.chunks)}"
