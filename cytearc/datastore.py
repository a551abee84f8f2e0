"""``DataStore``: the store users open, with its operations, plots and pipeline.

:class:`DataStore` is :class:`~cytearc.storage.store.Store` (opening and
validation) with the operation namespaces on top. Operations never import
this module: they take the narrow :class:`~cytearc.storage.store.AnalysisStore`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cytearc.artifacts import Artifact, ArtifactRef, Lineage, lineage, list_artifacts, open_artifact
from cytearc.ops.namespaces import (
    Cluster,
    Compare,
    Embedding,
    Features,
    Graph,
    Integration,
    Markers,
    Qc,
    Reduce,
)
from cytearc.ops.selection import SelectionLike, select_measured_cells
from cytearc.storage.store import Store

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    import pandas as pd
    from anndata import AnnData

    from cytearc.assays import Assay
    from cytearc.pipeline.runner import Pipeline
    from cytearc.plots.store import StorePlots

__all__ = ["DataStore"]


class DataStore(Store):
    """A CyteArc store, opened for reading (default) or writing, with its analysis.

    Parameters
    ----------
    location
        A local path or an fsspec URL (``s3://bucket/ds.zarr``).
    mem_budget, workers, cluster
        The engine the store's computations run on (see
        :func:`cytearc.engine.get_engine`); no cluster starts until something
        is computed.
    assay_types
        Presets for assays whose names are not presets, or to override.
    zarr_mode
        ``"r"`` (default; reading never changes a byte) or ``"r+"``.
    storage_options
        For fsspec URLs (``{"endpoint_url": ..., "key": ..., "secret": ...}``).
    show_progress
        Progress bars on long computations.
    workspace
        Open this workspace of the store (:meth:`create_workspace` makes
        one): its own cell table, feature tables, artifacts and runs over
        the store's count matrices. None (default) for the store's root.
    source_storage_options
        For a composite (:func:`cytearc.tools.create_composite`): the fsspec
        options of each remote source, by source name. For a mounted target
        (:func:`cytearc.tools.mount_datastore`): the fsspec options of its
        source. Kept in memory only, never written.

    Raises
    ------
    FileNotFoundError
        There is no store at a local ``location``.
    StoreFormatError
        The store is of another format, incomplete, or its arrays disagree
        with its metadata.
    WorkspaceNotFoundError
        The store has no complete workspace ``workspace``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from cytearc.datasets import write_store
    >>> path = write_store(pathlib.Path(tempfile.mkdtemp()) / "demo.zarr", n_cells=300, n_genes=600, show_progress=False)
    >>> ds = DataStore(path, cluster="threads", show_progress=False)
    >>> ds.assays["RNA"].shape
    (300, 600)
    >>> ds.RNA is ds.assays["RNA"]
    True
    """

    if not TYPE_CHECKING:
        # ds.RNA for users; type checkers see only ds.assays["RNA"], so ds.pipline is an error.
        def __getattr__(self, name: str) -> Assay:
            assays = self.__dict__.get("assays", {})
            if name in assays:
                return assays[name]
            msg = f"{type(self).__name__!r} has no attribute or assay {name!r}; its assays are {sorted(assays)}"
            raise AttributeError(msg)

    def open_workspace(self, name: str | None) -> DataStore:
        """The same store opened in the workspace ``name`` (None: its root), with the same options.

        Parameters
        ----------
        name
            A workspace of :attr:`workspaces`, or None.

        Returns
        -------
        DataStore
            A new open store.

        Raises
        ------
        WorkspaceNotFoundError
            The store has no complete workspace ``name``.
        """
        return type(self)(**{**self._reopen, "workspace": name})

    def create_workspace(self, name: str, *, overwrite: bool = False) -> DataStore:
        """Create the workspace ``name`` from this store's tables and open it (see :func:`cytearc.tools.create_workspace`).

        Parameters
        ----------
        name
            The new workspace.
        overwrite
            Replace a workspace of that name (its tables, artifacts and runs).

        Returns
        -------
        DataStore
            The store opened in the new workspace.

        Raises
        ------
        ReadOnlyStoreError
            The store was opened read-only.
        OperationArgumentError
            ``name`` is not valid or names an assay.
        DestinationExistsError
            The workspace exists and ``overwrite`` is False.
        """
        from cytearc.tools.workspace import create_workspace  # noqa: PLC0415 (the tools import the store)

        create_workspace(self, name, overwrite=overwrite)
        return self.open_workspace(name)

    def select_measured_cells(
        self, assay: str, cell_selection: SelectionLike = None
    ) -> ArtifactRef:
        """The cells of ``cell_selection`` (default: the ``I`` column) that ``assay`` measured.

        See :func:`cytearc.ops.selection.select_measured_cells`.

        Parameters
        ----------
        assay
            The assay.
        cell_selection
            A selection artifact ref, a boolean cell column, a mask, or None (``I``).

        Returns
        -------
        ArtifactRef
            A datastore ``cell_selection`` artifact (the prior selection itself
            when the assay measured all of it).

        Raises
        ------
        CyteArcError
            The assay measured none of the selected cells.
        """
        return select_measured_cells(self, assay, cell_selection)

    def add_grouped_assay(
        self, *, from_assay: str, group_key: str, assay_label: str, assay_type: str = "Assay"
    ) -> str:
        """Add an assay of ``from_assay``'s features summed by a feature grouping (see :func:`cytearc.ops.derived.add_grouped_assay`).

        Parameters
        ----------
        from_assay
            The source assay.
        group_key
            Its feature column naming each feature's group.
        assay_label
            The new assay's name.
        assay_type
            Its preset.

        Returns
        -------
        str
            The new assay's name.
        """
        from cytearc.ops.derived import add_grouped_assay  # noqa: PLC0415

        return add_grouped_assay(
            self,
            from_assay=from_assay,
            group_key=group_key,
            assay_label=assay_label,
            assay_type=assay_type,
        )

    def add_melded_assay(
        self,
        *,
        from_assay: str = "ATAC",
        gene_coordinates: pd.DataFrame,
        assay_label: str = "GeneActivity",
        upstream: int = 2000,
        downstream: int = 0,
    ) -> str:
        """Add a gene activity assay of ATAC peaks melded into genes (see :func:`cytearc.ops.derived.add_melded_assay`).

        Parameters
        ----------
        from_assay
            The ATAC assay.
        gene_coordinates
            ``chrom``, ``start``, ``end``, ``gene`` (and ``strand``, ``name``).
        assay_label
            The new assay's name.
        upstream, downstream
            The promoter extension, bases.

        Returns
        -------
        str
            The new assay's name.
        """
        from cytearc.ops.derived import add_melded_assay  # noqa: PLC0415

        return add_melded_assay(
            self,
            from_assay=from_assay,
            gene_coordinates=gene_coordinates,
            assay_label=assay_label,
            upstream=upstream,
            downstream=downstream,
        )

    def discard_interrupted_assay(self, name: str) -> None:
        """Remove a pending derived assay a killed writer left (see :func:`cytearc.ops.derived.discard_interrupted_assay`).

        Parameters
        ----------
        name
            The pending assay.
        """
        from cytearc.ops.derived import discard_interrupted_assay  # noqa: PLC0415

        discard_interrupted_assay(self, name)
        self.reopen_assays()

    def to_anndata(
        self,
        *,
        assay: str = "RNA",
        matrix: str = "counts",
        run: str | None = None,
        layers: Mapping[str, str] | Sequence[str] | None = None,
    ) -> AnnData:
        """The assay's counts (or normalized values) and the tables in memory (see :func:`cytearc.io.export.to_anndata`).

        Parameters
        ----------
        assay
            The assay to export.
        matrix
            ``"counts"`` (raw, storage dtype) or ``"normed"`` (the run's
            normalized values, or the assay type's normalization).
        run
            A completed run's label or id: its cells, clusters, PCA, UMAP and HVGs.
        layers
            Raw counts of assays with the same features as layers:
            ``{layer: assay}`` or assay names (``{"counts": "RNA"}``).

        Returns
        -------
        anndata.AnnData
            ``X`` (CSR), ``obs``, ``var``, ``layers`` and ``uns["cytearc"]``.
        """
        from cytearc.io.export import to_anndata  # noqa: PLC0415 (anndata loads on use)

        return to_anndata(self, assay=assay, matrix=matrix, run=run, layers=layers)

    def to_h5ad(
        self,
        path: str | Path,
        *,
        assay: str = "RNA",
        matrix: str = "counts",
        run: str | None = None,
        layers: Mapping[str, str] | Sequence[str] | None = None,
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Path | str:
        """Write the assay as an H5AD file, ``X`` and layers streamed band by band (see :func:`cytearc.io.export.to_h5ad`).

        Parameters
        ----------
        path
            The file: a local path or an fsspec URL.
        assay
            The assay to export.
        matrix
            ``"counts"`` or ``"normed"``, as for :meth:`to_anndata`.
        run
            A completed run's label or id: its cells, clusters, PCA, UMAP and HVGs.
        layers
            Raw counts of assays with the same features, as for :meth:`to_anndata`.
        overwrite
            Replace an existing file.
        storage_options
            The fsspec options of a URL ``path``.

        Returns
        -------
        pathlib.Path or str
            The file (its URL when it was written to one).
        """
        from cytearc.io.export import to_h5ad  # noqa: PLC0415

        return to_h5ad(
            self,
            path,
            assay=assay,
            matrix=matrix,
            run=run,
            layers=layers,
            overwrite=overwrite,
            storage_options=storage_options,
        )

    def to_mtx(
        self,
        directory: str | Path,
        *,
        assay: str = "RNA",
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Path | str:
        """Write the assay as a 10x Matrix Market folder (see :func:`cytearc.io.export.to_mtx`).

        Parameters
        ----------
        directory
            The folder: a local path or an fsspec URL.
        assay
            The assay to export.
        overwrite
            Replace an existing folder.
        storage_options
            The fsspec options of a URL ``directory``.

        Returns
        -------
        pathlib.Path or str
            The folder (its URL when it was written to one).
        """
        from cytearc.io.export import to_mtx  # noqa: PLC0415

        return to_mtx(
            self, directory, assay=assay, overwrite=overwrite, storage_options=storage_options
        )

    def list_artifacts(self, kind: str | None = None) -> list[Artifact]:
        """Published artifacts of the datastore and its assays, oldest first.

        Parameters
        ----------
        kind
            Only artifacts of this kind (``normalized``, ``pca``, ...).

        Returns
        -------
        list of Artifact
            The artifacts.
        """
        return list_artifacts(self.root, scopes=["", *self.assays], kind=kind)

    def load_artifact(self, ref: ArtifactRef | str) -> Artifact:
        """A published artifact.

        Parameters
        ----------
        ref
            Its ref.

        Returns
        -------
        Artifact
            The artifact.

        Raises
        ------
        MissingArtifactError, IncompleteArtifactError
            There is no published artifact at ``ref``.
        """
        return open_artifact(self.root, ref)

    def lineage(self, ref: ArtifactRef | str) -> Lineage:
        """The chain of artifacts ``ref`` was computed from (prints as a tree).

        Parameters
        ----------
        ref
            The artifact.

        Returns
        -------
        Lineage
            Its inputs, recursively.
        """
        return lineage(self.root, ref)

    def _repr_html_(self) -> str:
        """The store in a notebook: location, cells, assays, fingerprint, artifacts, runs and engine.

        Read from metadata alone: no count value is read, nothing is
        computed, and no cluster is started or reached (see :mod:`cytearc._views`).
        """
        from cytearc._views import engine_rows, store_view  # noqa: PLC0415 (views load on display)

        options = self._reopen
        engine = engine_rows(
            cluster=options["cluster"], mem_budget=options["mem_budget"], workers=options["workers"]
        )
        return store_view(self, engine=engine)

    @property
    def qc(self) -> Qc:
        """Quality control: ``metrics``, ``filter``, ``auto_filter``."""
        return Qc(self)

    @property
    def features(self) -> Features:
        """Feature-wise operations: ``normalize`` and ``hvgs``."""
        return Features(self)

    @property
    def reduce(self) -> Reduce:
        """Dimension reduction: ``pca``."""
        return Reduce(self)

    @property
    def graph(self) -> Graph:
        """Cell graphs: ``neighbors``."""
        return Graph(self)

    @property
    def integration(self) -> Integration:
        """Integration: ``harmony`` (batch correction), ``modalities`` (a joint graph of assays)."""
        return Integration(self)

    @property
    def cluster(self) -> Cluster:
        """Clustering: ``leiden``."""
        return Cluster(self)

    @property
    def embedding(self) -> Embedding:
        """Embeddings: ``umap``."""
        return Embedding(self)

    @property
    def markers(self) -> Markers:
        """Marker genes: ``search`` and ``table``."""
        return Markers(self)

    @property
    def compare(self) -> Compare:
        """Pseudobulk: ``compute_bulk`` pools cells into a CytePool cube, ``write_bulk`` writes it."""
        return Compare(self)

    @property
    def plots(self) -> StorePlots:
        """Plots of the store's results: ``qc``, ``umap``, ``markers``."""
        from cytearc.plots.store import StorePlots  # noqa: PLC0415 (matplotlib loads on use)

        return StorePlots(self)

    @property
    def pipeline(self) -> Pipeline:
        """Recipes and their recorded runs: ``run``, ``runs``, ``open``, ``abandon_label_claim``."""
        from cytearc.pipeline.runner import Pipeline  # noqa: PLC0415 (the pipeline loads tqdm and the recipes)

        return Pipeline(self)
