"""``ds.plots``: the plots of a store's results, read from its artifacts and cell columns."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cytearc.artifacts import Artifact, ArtifactRef, open_artifact
from cytearc.errors import ColumnNotFoundError, FeatureNotFoundError
from cytearc.metadata.membership import membership_column
from cytearc.ops.normalized_blocks import normalized_block
from cytearc.ops.qc import percent_columns
from cytearc.ops.selection import artifact_cell_mask
from cytearc.plots._dotplot import dotplot
from cytearc.plots._embedding import embedding
from cytearc.plots._figure import save_figure
from cytearc.plots._qc import qc_violins

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.figure import Figure

    from cytearc.pipeline.runner import PipelineRun
    from cytearc.storage.store import AnalysisStore

__all__ = ["StorePlots"]


class StorePlots:
    """Plots of one store: ``qc``, ``umap`` and ``markers``."""

    def __init__(self, ds: AnalysisStore) -> None:
        self._ds = ds

    def qc(
        self, assay: str = "RNA", *, groupby: str | None = None, log: bool = False, **options: Any
    ) -> Figure:
        """Violins of the QC metrics that ``qc.metrics`` wrote (cells in ``I``).

        Parameters
        ----------
        assay
            The assay whose metrics are drawn.
        groupby
            A cell column: one violin per group.
        log
            Log scale for the counts and features.
        **options
            More options of :func:`cytearc.plots.qc_violins`.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.

        Raises
        ------
        ColumnNotFoundError
            ``qc.metrics`` has not run on ``assay``.
        """
        ds = self._ds
        metrics = (f"{assay}_nCounts", f"{assay}_nFeatures", *percent_columns(ds, assay))
        columns = [c for c in metrics if c in ds.cells.columns]
        if not columns:
            msg = f"{ds.where}/cellData: no QC metrics of {assay!r} (expected the columns {list(metrics)}); run ds.qc.metrics({assay!r}) first"
            raise ColumnNotFoundError(msg)
        frame = pd.DataFrame(
            {c: ds.cells.fetch(c) for c in [*columns, *([groupby] if groupby else [])]}
        )
        return qc_violins(frame, columns, groupby=groupby, log=log, **options)

    def gene_values(self, gene: str, *, assay: str = "RNA", target_sum: float = 1e4) -> np.ndarray:
        """One feature's log-normalized values over all cells (NaN where the assay did not measure).

        ``gene`` is a feature name or id; reads only the chunks of ``countsT``
        that hold its row.

        Parameters
        ----------
        gene
            A feature name or id.
        assay
            The assay.
        target_sum
            The library size of the normalization (``log1p(x / rowSums * target_sum)``).

        Returns
        -------
        numpy.ndarray
            float64, one value per cell of the store.

        Raises
        ------
        FeatureNotFoundError
            ``gene`` is neither a feature name nor an id (a :class:`KeyError`).
        AssayTypeError
            The assay is not of an RNA type (it stores no ``countsT``).
        """
        ds = self._ds
        source = ds.assays[assay]
        rows = np.asarray(source.feature_positions([gene]))
        values = normalized_block(
            source.feature_rows(rows).T,
            source.summary("rowSums").astype(np.float64),
            method="library_size",
            target_sum=target_sum,
            log1p=True,
        )[:, 0].astype(np.float64)
        member = membership_column(ds.cells, assay)
        if member is not None:
            values[~ds.cells.fetch_all(member).astype(bool)] = np.nan
        return values

    def umap(
        self,
        color: str | None = None,
        *,
        assay: str = "RNA",
        umap: ArtifactRef | str | Artifact | None = None,
        **options: Any,
    ) -> Figure:
        """UMAP coloured by a cell column (e.g. ``RNA_leiden_cluster``) or a gene's expression.

        Coordinates come from ``umap`` (an artifact) or the cell columns
        ``<assay>_UMAP1/2``; cells without coordinates are left out.

        Parameters
        ----------
        color
            A cell column or a gene; None draws the cells in one colour.
        assay
            The assay of the coordinates and of a gene.
        umap
            A ``umap`` artifact to take the coordinates from.
        **options
            More options of :func:`cytearc.plots.embedding`.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.

        Raises
        ------
        ColumnNotFoundError
            There are no UMAP cell columns and no ``umap`` is given.
        FeatureNotFoundError
            ``color`` is neither a cell column nor a feature.
        """
        ds = self._ds
        if umap is not None:
            artifact = umap if isinstance(umap, Artifact) else open_artifact(ds.root, umap)
            mask = artifact_cell_mask(ds, artifact)
            coords = np.full((ds.cells.n_rows, 2), np.nan)
            coords[mask] = artifact.read("coords")[:, :2]
        else:
            names = [f"{assay}_UMAP1", f"{assay}_UMAP2"]
            if not set(names) <= set(ds.cells.columns):
                msg = f"{ds.where}/cellData: no UMAP of {assay!r} (expected the columns {names}); run ds.embedding.umap(...) or the pipeline first, or pass umap="
                raise ColumnNotFoundError(msg)
            coords = np.column_stack([ds.cells.fetch_all(n) for n in names])
        keep = np.isfinite(coords).all(axis=1)
        values: Any = None
        label = color
        if color is not None:
            if color in ds.cells.columns:
                values = ds.cells.fetch_all(color)
                if color.endswith("_cluster"):
                    values = pd.Categorical(values[keep].astype(str))
                else:
                    values = values[keep]
            else:
                try:
                    values = self.gene_values(color, assay=assay)[keep]
                except FeatureNotFoundError as error:
                    error.add_note(
                        f"color {color!r} is not a cell column either; the cell columns are {ds.cells.columns}"
                    )
                    raise
        return embedding(
            coords[keep], values=values, label=label, title=options.pop("title", color), **options
        )

    def markers(
        self,
        markers: ArtifactRef | str | Artifact,
        *,
        n: int = 3,
        genes: Sequence[str] | None = None,
        **options: Any,
    ) -> Figure:
        """Dot plot of the top ``n`` markers of each group (or of ``genes``).

        Parameters
        ----------
        markers
            A ``markers`` artifact.
        n
            Markers per group.
        genes
            The genes to show instead of the top markers.
        **options
            More options of :func:`cytearc.plots.dotplot`.

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        ds = self._ds
        artifact = markers if isinstance(markers, Artifact) else open_artifact(ds.root, markers)
        features = ds.assays[artifact.ref.scope].features
        names = features.fetch_all("names").astype(object)
        groups = [str(g) for g in artifact.read("groups")]
        score = artifact.read("score")
        if genes is None:
            chosen: list[int] = []
            for i in range(len(groups)):
                for j in np.argsort(-score[i], kind="stable")[:n]:
                    if int(j) not in chosen:
                        chosen.append(int(j))
        else:
            chosen = ds.assays[artifact.ref.scope].feature_positions(genes)
        labels = [str(names[j]) for j in chosen]
        mean = pd.DataFrame(artifact.read("mean")[:, chosen], index=groups, columns=labels)
        fraction = pd.DataFrame(artifact.read("fraction")[:, chosen], index=groups, columns=labels)
        return dotplot(mean, fraction, **options)

    def save_run_figures(self, run: PipelineRun, directory: str | Path) -> list[Path]:
        """The standard figures of a finished run: QC violins, UMAP by cluster, marker dot plot.

        Parameters
        ----------
        run
            A completed run of a built-in recipe (a recipe without a
            ``markers`` output, such as ``atac_standard``, has no dot plot).
        directory
            Where the PNG files go (created).

        Returns
        -------
        list of pathlib.Path
            The files written.
        """
        assay = run.record.assay
        directory = Path(directory)
        figures = {
            "qc_violins.png": self.qc(assay),
            "umap_clusters.png": self.umap(f"{assay}_leiden_cluster", assay=assay),
        }
        if "markers" in run.outputs:
            figures["markers_dotplot.png"] = self.markers(run.artifact("markers"), n=3)
        return [save_figure(fig, directory / name) for name, fig in figures.items()]
