"""Plots of single-cell data: QC violins, embeddings and marker dot plots, drawn with matplotlib.

Every function takes plain data (numpy arrays, pandas objects), draws with
matplotlib's object-oriented API (no pyplot state, so it works headless and
in notebooks) and returns the :class:`~matplotlib.figure.Figure`; pass
``ax=`` to draw into axes of your own. :func:`save_figure` writes PNG, PDF
or SVG. Bad input raises :class:`~cytearc.errors.PlotInputError`, a :class:`ValueError`.
"""

from cytearc.plots._dotplot import dotplot
from cytearc.plots._embedding import embedding
from cytearc.plots._figure import save_figure
from cytearc.plots._qc import qc_violins

__all__ = ["dotplot", "embedding", "qc_violins", "save_figure"]
