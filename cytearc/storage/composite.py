"""Composite stores: the cells of several source stores as one dataset, their counts read in place.

A composite (:func:`cytearc.tools.create_composite`) has ordinary local cell
and feature tables, count summaries and artifacts. Its root attribute
``composite`` is the manifest, in a strict, unversioned shape: exactly
``assay``, ``sources``, ``arrays``, ``maps`` and ``complete``; each source
binding exactly ``name``, ``location``, ``workspace``, ``datasetFingerprint``
and ``countsFingerprint``. A missing or unknown field fails closed
(:class:`~cytearc.errors.CompositeFormatError`); there is no migration.

The group ``_composite`` stores ``rowSources`` and ``sourceRows`` (each
output cell's source and row there) and ``featureColumns`` (each output
feature's column in each source, ``-1`` contributing zeros); the manifest's
``maps`` records their SHA-256 digests. ``arrays`` holds the ``zarr.json``
documents of the virtual ``{assay}/counts`` (and ``countsT`` for RNA types):
no such arrays are stored, so a bare Zarr reader finds no counts rather
than zeros. A CyteArc open checks every source against its binding, the
maps against their digests, and reads the counts through a
:class:`~cytearc.storage.virtual.VirtualArrayReader`; remote sources go
through a bounded :class:`~cytearc.storage.cache.SourceCache` in ``TMPDIR``.
Source credentials are given at each open (``source_storage_options``) and
never written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
import zarr

from cytearc.assays.assay import Assay
from cytearc.errors import AssayTypeError, CompositeFormatError, StoreFormatError
from cytearc.storage.cache import SourceCache
from cytearc.storage.caching_store import CachingStore
from cytearc.storage.composite_map import CompositeMap
from cytearc.storage.counts import LAYOUT_ATTRIBUTE
from cytearc.storage.damage import read_region
from cytearc.storage.layout import CountLayout
from cytearc.storage.nodes import child_group, child_node, exact_fields
from cytearc.storage.virtual import SourceArrays, VirtualArrayReader, virtual_dask_array
from cytearc.storage.virtual_store import VirtualArray, VirtualCountsStore

if TYPE_CHECKING:
    import dask.array as da
    from zarr.abc.codec import BytesBytesCodec

    from cytearc.storage.store import Store

__all__ = [
    "COMPOSITE_ATTRIBUTE",
    "COMPOSITE_GROUP",
    "MAP_ARRAYS",
    "CompositeAssay",
    "CompositeManifest",
    "CompositeSources",
    "SourceBinding",
    "map_digest",
    "open_composite",
    "read_manifest",
]

COMPOSITE_ATTRIBUTE: Final = "composite"
"""The root attribute holding a composite's manifest."""
COMPOSITE_GROUP: Final = "_composite"
"""The group of the mapping arrays."""
MAP_ARRAYS: Final = ("rowSources", "sourceRows", "featureColumns")
_BINDING_FIELDS: Final = (
    "name",
    "location",
    "workspace",
    "datasetFingerprint",
    "countsFingerprint",
)
_MANIFEST_FIELDS: Final = ("assay", "sources", "arrays", "maps", "complete")


def map_digest(values: np.ndarray) -> str:
    """The digest of a mapping array: SHA-256 of its little-endian dtype, shape and bytes.

    Parameters
    ----------
    values
        The array.

    Returns
    -------
    str
        ``sha256:`` and 64 hexadecimal digits.

    Examples
    --------
    >>> map_digest(np.arange(3, dtype=np.int64))[:15]
    'sha256:06928876'
    """
    array = np.ascontiguousarray(values)
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    digest = hashlib.sha256(f"{little.dtype.str} {list(array.shape)}\n".encode())
    digest.update(little.tobytes())
    return f"sha256:{digest.hexdigest()}"


def _fields(doc: object, expected: tuple[str, ...], *, what: str, where: str) -> dict[str, Any]:
    return exact_fields(
        doc,
        expected,
        what=what,
        where=where,
        error=CompositeFormatError,
        remedy="create the composite again with this release",
    )


@dataclass(frozen=True, kw_only=True)
class SourceBinding:
    """One source of a composite: where it is and the identities it had when the composite was made.

    Parameters
    ----------
    name
        The source's name (its cells' id prefix).
    location
        An absolute local path or a URL; never credentials.
    workspace
        The source's workspace whose tables were read, or None.
    datasetFingerprint
        The source's dataset fingerprint.
    countsFingerprint
        The content fingerprint of the source's counts of the composite's assay.
    """

    name: str
    location: str
    workspace: str | None
    datasetFingerprint: str  # noqa: N815 (the manifest's field)
    countsFingerprint: str  # noqa: N815 (the manifest's field)

    @classmethod
    def from_json(cls, doc: object, *, where: str) -> SourceBinding:
        """Read a binding, refusing any other shape.

        Parameters
        ----------
        doc
            The binding's JSON.
        where
            The composite, for messages.

        Returns
        -------
        SourceBinding

        Raises
        ------
        CompositeFormatError
            A field is missing, unknown or of another type.
        """
        fields = _fields(doc, _BINDING_FIELDS, what="a source binding", where=where)
        strings = [k for k in _BINDING_FIELDS if k != "workspace"]
        bad = [k for k in strings if not isinstance(fields[k], str) or not fields[k]]
        if bad or not (fields["workspace"] is None or isinstance(fields["workspace"], str)):
            msg = f"{where}: source binding {fields.get('name')!r}: expected strings for {strings} and a string or null workspace, found {({k: fields[k] for k in bad}) or fields['workspace']!r}; create the composite again"
            raise CompositeFormatError(msg)
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        """The binding as the manifest stores it."""
        return {k: getattr(self, k) for k in _BINDING_FIELDS}


@dataclass(frozen=True, kw_only=True)
class CompositeManifest:
    """A composite's ``composite`` root attribute.

    Parameters
    ----------
    assay
        The assay whose counts are virtual.
    sources
        The source bindings, in cell order.
    arrays
        The ``zarr.json`` documents of the virtual ``counts`` and, for RNA
        types, ``countsT``, by name.
    maps
        The digest of each mapping array of ``_composite``.
    complete
        Whether the creation finished.
    """

    assay: str
    sources: tuple[SourceBinding, ...]
    arrays: Mapping[str, Mapping[str, Any]]
    maps: Mapping[str, str]
    complete: bool

    @classmethod
    def from_json(cls, doc: object, *, where: str) -> CompositeManifest:
        """Read a manifest, refusing any other shape.

        Parameters
        ----------
        doc
            The attribute's JSON.
        where
            The composite, for messages.

        Returns
        -------
        CompositeManifest

        Raises
        ------
        CompositeFormatError
            A field is missing, unknown or malformed.
        """
        fields = _fields(doc, _MANIFEST_FIELDS, what="attribute 'composite'", where=where)
        sources = fields["sources"]
        if not isinstance(sources, list) or not sources:
            msg = f"{where}: attribute 'composite': 'sources' must be a non-empty list of bindings, found {sources!r}; create the composite again"
            raise CompositeFormatError(msg)
        arrays, maps = fields["arrays"], fields["maps"]
        if (
            not isinstance(arrays, Mapping)
            or "counts" not in arrays
            or set(arrays) - {"counts", "countsT"}
        ):
            msg = f"{where}: attribute 'composite': 'arrays' must hold the documents of 'counts' (and 'countsT'), found {sorted(arrays) if isinstance(arrays, Mapping) else arrays!r}; create the composite again"
            raise CompositeFormatError(msg)
        _fields(maps, MAP_ARRAYS, what="'maps'", where=where)
        if not all(isinstance(v, str) for v in maps.values()):
            msg = f"{where}: attribute 'composite': 'maps' must map {list(MAP_ARRAYS)} to digests, found {maps!r}; create the composite again"
            raise CompositeFormatError(msg)
        if not isinstance(fields["assay"], str) or not isinstance(fields["complete"], bool):
            msg = f"{where}: attribute 'composite': expected a string 'assay' and a boolean 'complete', found {fields['assay']!r} and {fields['complete']!r}; create the composite again"
            raise CompositeFormatError(msg)
        bindings = tuple(SourceBinding.from_json(b, where=where) for b in sources)
        names = [b.name for b in bindings]
        if len(set(names)) != len(names):
            msg = f"{where}: attribute 'composite': source names repeat ({names}); create the composite again"
            raise CompositeFormatError(msg)
        return cls(
            assay=fields["assay"],
            sources=bindings,
            arrays={k: dict(v) for k, v in arrays.items()},
            maps=dict(maps),
            complete=fields["complete"],
        )

    def to_json(self) -> dict[str, Any]:
        """The manifest as the root attribute stores it."""
        return {
            "assay": self.assay,
            "sources": [b.to_json() for b in self.sources],
            "arrays": {k: dict(v) for k, v in self.arrays.items()},
            "maps": dict(self.maps),
            "complete": self.complete,
        }


def read_manifest(root: zarr.Group, *, where: str) -> CompositeManifest | None:
    """The manifest of a composite's root, or None for an ordinary store.

    Parameters
    ----------
    root
        The store's root group.
    where
        Its location, for messages.

    Returns
    -------
    CompositeManifest or None

    Raises
    ------
    CompositeFormatError
        The attribute is present but not a manifest of the strict shape.
    """
    if COMPOSITE_ATTRIBUTE not in root.attrs:
        return None
    return CompositeManifest.from_json(root.attrs[COMPOSITE_ATTRIBUTE], where=where)


class VirtualCounts:
    """What :class:`~cytearc.assays.assay.Assay` reads of a count array, from a virtual document.

    Parameters
    ----------
    document
        The array's ``zarr.json`` document from the manifest.
    where
        The array, for messages.
    """

    def __init__(self, document: Mapping[str, Any], *, where: str) -> None:
        try:
            metadata = zarr.core.metadata.v3.ArrayV3Metadata.from_dict(dict(document))
            rows, columns = (int(n) for n in metadata.shape)
            self.shape: tuple[int, int] = (rows, columns)
            self.dtype = np.dtype(metadata.data_type.to_native_dtype())
            sharding: Any = metadata.codecs[0]
            grid: Any = metadata.chunk_grid
            self.shards: tuple[int, ...] = tuple(int(n) for n in grid.chunk_shape)
            self.chunks: tuple[int, ...] = tuple(int(n) for n in sharding.chunk_shape)
            self.attrs: dict[str, Any] = dict(metadata.attributes)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            msg = f"{where}: the virtual array's document in attribute 'composite' is not sharded Zarr v3 metadata ({type(exc).__name__}: {exc}); create the composite again"
            raise CompositeFormatError(msg) from exc


@dataclass(frozen=True, kw_only=True)
class CompositeSources:
    """A composite's open sources: the reader of its virtual counts and the cache it reads through.

    Parameters
    ----------
    manifest
        The manifest.
    reader
        The reader of the virtual counts.
    stores
        Each source, opened.
    cache
        The cache of remote sources (closed with the composite).
    """

    manifest: CompositeManifest
    reader: VirtualArrayReader
    stores: Mapping[str, Store]
    cache: SourceCache


def _maps(root: zarr.Group, manifest: CompositeManifest, *, where: str) -> CompositeMap:
    group = child_group(root, COMPOSITE_GROUP, where=where)
    values = {}
    for name in MAP_ARRAYS:
        array = child_node(group, name, where=f"{where}/{COMPOSITE_GROUP}")
        if not isinstance(array, zarr.Array):
            msg = f"{where}/{COMPOSITE_GROUP}/{name}: expected the mapping array, found {'nothing' if array is None else 'a group'}; the composite is damaged - create it again"
            raise CompositeFormatError(msg)
        values[name] = read_region(array, ...)
        if map_digest(values[name]) != manifest.maps[name]:
            msg = f"{where}/{COMPOSITE_GROUP}/{name}: its digest {map_digest(values[name])} is not the manifest's {manifest.maps[name]}; the mapping was changed or damaged - create the composite again"
            raise CompositeFormatError(msg)
    try:
        return CompositeMap(
            row_sources=values["rowSources"].astype(np.int64),
            source_rows=values["sourceRows"],
            feature_columns=values["featureColumns"],
            n_sources=len(manifest.sources),
        )
    except StoreFormatError as exc:
        msg = f"{where}/{COMPOSITE_GROUP}: {exc}"
        raise CompositeFormatError(msg) from exc


def _source_arrays(
    store: Store, binding: SourceBinding, assay: str, cache: SourceCache
) -> SourceArrays:
    """The source's count arrays, read through the cache when the source is remote."""
    opened = store.assays[assay]
    counts, counts_t = opened.stored_arrays()
    if "://" not in store.where or not cache.enabled:
        return SourceArrays(counts=counts, counts_t=counts_t, name=binding.name)
    cached = CachingStore(store.store_root.store, cache, prefix=binding.name)
    root = zarr.open_group(store=cached, mode="r", zarr_format=3)
    matrix = f"matrices/{assay}"
    return SourceArrays(
        counts=root[f"{matrix}/counts"],  # type: ignore[arg-type]
        counts_t=None if counts_t is None else root[f"{matrix}/countsT"],  # type: ignore[arg-type]
        name=binding.name,
    )


def open_composite(
    root: zarr.Group,
    manifest: CompositeManifest,
    *,
    where: str,
    source_storage_options: Mapping[str, Mapping[str, Any]] | None,
    show_progress: bool,
) -> CompositeSources:
    """Open a composite's sources, check them against their bindings, and build its reader.

    Parameters
    ----------
    root
        The composite's root group.
    manifest
        Its manifest.
    where
        Its location, for messages.
    source_storage_options
        The fsspec options of each remote source, by source name.
    show_progress
        Progress bars of the sources.

    Returns
    -------
    CompositeSources

    Raises
    ------
    CompositeFormatError
        The creation did not finish, a source's identities differ from its
        binding (a source changed), or the mapping arrays do not match their
        digests.
    """
    from cytearc.storage.store import Store  # noqa: PLC0415 (the store opens composites)

    if not manifest.complete:
        msg = f"{where}: the composite's creation did not finish (attribute 'composite' has complete=false); create it again with create_composite"
        raise CompositeFormatError(msg)
    options = dict(source_storage_options or {})
    unknown = sorted(set(options) - {b.name for b in manifest.sources})
    if unknown:
        msg = f"{where}: source_storage_options: no source named {unknown}; the composite's sources are {[b.name for b in manifest.sources]}"
        raise CompositeFormatError(msg)
    stores: dict[str, Store] = {}
    for binding in manifest.sources:
        store = Store(
            binding.location,
            storage_options=options.get(binding.name),
            workspace=binding.workspace,
            show_progress=show_progress,
        )
        if store.dataset_fingerprint != binding.datasetFingerprint or (
            manifest.assay not in store.assays
            or store.assays[manifest.assay].content_fingerprint != binding.countsFingerprint
        ):
            msg = f"{where}: source {binding.name!r} at {binding.location} is not the store the composite was made from (its dataset or {manifest.assay} counts fingerprint changed); sources must stay unchanged - restore it, or create the composite again"
            raise CompositeFormatError(msg)
        stores[binding.name] = store
    composite_map = _maps(root, manifest, where=where)
    cache = SourceCache.from_env()
    counts = VirtualCounts(manifest.arrays["counts"], where=f"{where}/{manifest.assay}/counts")
    arrays = [_source_arrays(stores[b.name], b, manifest.assay, cache) for b in manifest.sources]
    try:
        composite_map.validate_sources(
            [a.counts.shape for a in arrays], names=[b.name for b in manifest.sources]
        )
        reader = VirtualArrayReader(composite_map, arrays, dtype=counts.dtype, shape=counts.shape)
    except StoreFormatError as exc:
        cache.close()
        msg = f"{where}: {exc}"
        raise CompositeFormatError(msg) from exc
    return CompositeSources(manifest=manifest, reader=reader, stores=stores, cache=cache)


def composite_namespace(root: zarr.Group, sources: CompositeSources, *, where: str) -> zarr.Group:
    """The composite's root group with its virtual count arrays supplied (:mod:`cytearc.storage.virtual_store`).

    Parameters
    ----------
    root
        The composite's root group, as stored.
    sources
        Its open sources.
    where
        The composite, for messages.

    Returns
    -------
    zarr.Group
        The same group, opened over a :class:`~cytearc.storage.virtual_store.VirtualCountsStore`.
    """
    prefix = f"{root.path}/" if root.path else ""
    manifest = sources.manifest
    arrays = [
        VirtualArray(
            path=f"{prefix}matrices/{manifest.assay}/{name}",
            document=document,
            orientation="cells" if name == "counts" else "features",
        )
        for name, document in manifest.arrays.items()
    ]
    store = VirtualCountsStore(root.store, arrays=arrays, reader=sources.reader, where=where)
    return zarr.open_group(
        store=store, path=root.path, mode="r" if root.store.read_only else "r+", zarr_format=3
    )


def _shard_rows(array: object) -> int:
    """The rows of one shard of a virtual array (the blocks its Dask array has)."""
    assert isinstance(array, VirtualCounts)
    return array.shards[0]


class CompositeAssay(Assay):
    """The assay of a composite: its feature table and summaries local, its counts virtual.

    ``counts`` and ``countsT`` are lazy Dask arrays whose blocks (one per
    shard of the virtual layout) the composite's reader gathers from the
    sources; every operation reads them as it reads a stored assay's.

    Parameters
    ----------
    sources
        The composite's open sources.
    **options
        As for :class:`~cytearc.assays.assay.Assay`.
    """

    def __init__(self, *, sources: CompositeSources, **options: Any) -> None:
        self._sources = sources
        super().__init__(**options)

    def _count_array(self, name: str, *, shape: tuple[int, int] | None) -> Any:  # noqa: ANN401 (a VirtualCounts in the place of the zarr array)
        document = self._sources.manifest.arrays.get(name)
        if document is None:
            msg = f"{self.where}: {name}: the composite's manifest has no document of it; an {self.assayType} assay needs it - create the composite again"
            raise StoreFormatError(msg)
        array = VirtualCounts(document, where=f"{self.where}/{name}")
        if shape is not None and array.shape != shape:
            msg = f"{self.where}: {name} has shape {array.shape}, expected {shape} (counts transposed); create the composite again"
            raise CompositeFormatError(msg)
        recorded = CountLayout.from_json(array.attrs.get(LAYOUT_ATTRIBUTE), where=self.where)
        if recorded != self.layout:
            msg = f"{self.where}: {name}: layout {recorded.to_json()} disagrees with the matrix group's {self.layout.to_json()}; create the composite again"
            raise CompositeFormatError(msg)
        return array

    @property
    def counts(self) -> da.Array:
        """Cells x features, lazy, one block per shard of the virtual layout."""
        return virtual_dask_array(
            self._sources.reader, orientation="cells", block_rows=_shard_rows(self._counts)
        )

    @property
    def countsT(self) -> da.Array:  # noqa: N802 (the store's array name)
        """Features x cells, lazy, one block per shard of the virtual layout (RNA-type assays).

        Raises
        ------
        AttributeError
            The assay is not of an RNA type.
        """
        if self._counts_t is None:
            msg = f"{self.where}: a {self.assayType} assay has no countsT (only RNA-type assays have it); use counts"
            raise AttributeError(msg)
        return virtual_dask_array(
            self._sources.reader, orientation="features", block_rows=_shard_rows(self._counts_t)
        )

    def feature_rows(self, features: np.ndarray) -> np.ndarray:
        """The counts of a few features over every cell, gathered from the sources.

        Parameters
        ----------
        features
            Feature positions.

        Returns
        -------
        numpy.ndarray
            ``(len(features), n_cells)``.

        Raises
        ------
        AssayTypeError
            The assay is not of an RNA type.
        """
        if self._counts_t is None:
            msg = f"{self.where}: feature_rows reads countsT, which only RNA-type assays have; this {self.assayType} assay has none - read columns of counts instead"
            raise AssayTypeError(msg)
        rows = np.asarray(features, dtype=np.int64)
        return self._sources.reader.read(slice(None), rows, layout="features")

    @property
    def compressor(self) -> BytesBytesCodec | None:
        """The codec of the first source's counts (what a copy of these counts is written with)."""
        first = next(iter(self._sources.stores.values()))
        return first.assays[self._sources.manifest.assay].compressor

    def row_source(self, name: Literal["counts", "countsT"] = "counts") -> da.Array:
        """What :func:`~cytearc.engine.arrays.map_row_pieces` reads of ``counts`` or ``countsT``: the lazy virtual array.

        Parameters
        ----------
        name
            ``"counts"`` or ``"countsT"``.

        Returns
        -------
        dask.array.Array
            :attr:`counts` or :attr:`countsT`.
        """
        lazy: da.Array = self.countsT if name == "countsT" else self.counts
        return lazy

    def stored_arrays(self) -> tuple[zarr.Array[Any], zarr.Array[Any] | None]:
        """A composite stores no count arrays.

        Raises
        ------
        CompositeFormatError
            Always: composites of composites are not supported.
        """
        msg = f"{self.where}: a composite's counts are virtual; composites of composites and mounts of composites are not supported - use a merged copy (DataStoreMerge) as the source"
        raise CompositeFormatError(msg)

    def __repr__(self) -> str:
        return f"<Assay {self.name} ({self.assayType}, composite of {len(self._sources.stores)} sources): {self.shape[0]} cells x {self.shape[1]} features, {self.dtype}>"
