"""Figures without pyplot: new axes or the caller's, category palettes, and saving to disk."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Colormap, ListedColormap
from matplotlib.figure import Figure, SubFigure

from cytearc.errors import PlotInputError

if TYPE_CHECKING:
    import os

    import numpy.typing as npt

__all__ = [
    "MISSING_COLOR",
    "category_colors",
    "resolve_cmap",
    "root_figure",
    "save_figure",
    "target_axes",
]

MISSING_COLOR: Final = "#d3d3d3"
"""Light grey of cells without a value, drawn beneath the others."""

_FORMATS: Final = (".png", ".pdf", ".svg")
_UNDATED: Final = {".pdf": {"CreationDate": None}, ".svg": {"Date": None}}
_SVG_SALT: Final = "cytearc"
"""Fixed salt of the ids in SVG files, which are random by default."""


def root_figure(ax: Axes) -> Figure:
    """The top-level figure that holds ``ax``, also when ``ax`` sits in a subfigure."""
    figure = ax.figure
    return figure.figure if isinstance(figure, SubFigure) else figure


def target_axes(ax: object, *, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """The caller's axes and their figure, or one new axes on a new constrained-layout figure."""
    if ax is None:
        figure = Figure(figsize=figsize, layout="constrained")
        return figure, figure.add_subplot()
    if not isinstance(ax, Axes):
        msg = f"ax: expected a matplotlib Axes or None, found {type(ax).__name__}"
        raise PlotInputError(msg)
    return root_figure(ax), ax


def category_colors(n: int, *, cmap: str | Colormap | None = None) -> npt.NDArray[np.float64]:
    """RGBA colours of ``n`` categories, shape ``(n, 4)``.

    Without ``cmap``: ``tab10`` up to 10 categories, ``tab20`` up to 20, then
    colours spread over ``turbo``. A listed colormap with enough colours
    (``"Set2"``) gives its first ``n``; any other is sampled evenly.

    Examples
    --------
    >>> category_colors(3).shape
    (3, 4)
    """
    if cmap is None:
        cmap = "tab10" if n <= 10 else "tab20" if n <= 20 else "turbo"
    colormap = resolve_cmap(cmap)
    if isinstance(colormap, ListedColormap) and n <= colormap.N:
        return np.asarray(colormap(np.arange(n)), dtype=np.float64).reshape(n, 4)
    return np.asarray(colormap(np.linspace(0.0, 1.0, n)), dtype=np.float64).reshape(n, 4)


def resolve_cmap(cmap: object) -> Colormap:
    """The colormap of a name, or the colormap given.

    Examples
    --------
    >>> resolve_cmap("Reds").name
    'Reds'
    """
    if isinstance(cmap, Colormap):
        return cmap
    if not isinstance(cmap, str):
        msg = (
            f"cmap: expected a colormap name or a matplotlib Colormap, found {type(cmap).__name__}"
        )
        raise PlotInputError(msg)
    try:
        return mpl.colormaps[cmap]
    except KeyError as exc:
        msg = f"cmap: {cmap!r} is not a matplotlib colormap; see matplotlib.colormaps for the names"
        raise PlotInputError(msg) from exc


def save_figure(fig: Figure, path: str | os.PathLike[str], *, dpi: float = 150) -> Path:
    """Write ``fig`` to ``path`` as PNG, PDF or SVG, chosen by the suffix.

    Parent folders are created. Legends outside the axes are kept (the
    bounding box is fitted to the drawing). PDF and SVG files carry no
    creation date and SVG ids are not random, so a figure drawn again from
    the same data writes the same bytes.

    Parameters
    ----------
    fig
        The figure, such as the one a plotting function returns.
    path
        A file name ending in ``.png``, ``.pdf`` or ``.svg``.
    dpi
        Dots per inch of PNG images and of rasterised points in PDF and SVG.

    Returns
    -------
    Path
        The path written.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc.plots import embedding, save_figure
    >>> fig = embedding(np.zeros((3, 2)), values=[1.0, 2.0, 3.0])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save_figure(fig, Path(folder) / "umap" / "values.png").name
    'values.png'
    """
    figure = _parse_figure(fig)
    resolution = _parse_dpi(dpi)
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in _FORMATS:
        msg = f"path: expected a file ending in .png, .pdf or .svg, found {str(target)!r}"
        raise PlotInputError(msg)
    target.parent.mkdir(parents=True, exist_ok=True)
    with mpl.rc_context({"svg.hashsalt": _SVG_SALT}):
        figure.savefig(
            target,
            dpi=resolution,
            format=suffix[1:],
            bbox_inches="tight",
            metadata=_UNDATED.get(suffix),
        )
    return target


def _parse_figure(fig: object) -> Figure:
    if not isinstance(fig, Figure):
        msg = f"fig: expected a matplotlib Figure, found {type(fig).__name__}"
        raise PlotInputError(msg)
    return fig


def _parse_dpi(dpi: object) -> float:
    if isinstance(dpi, bool) or not isinstance(dpi, int | float) or not 0 < dpi < np.inf:
        msg = f"dpi: expected a positive number, found {dpi!r}"
        raise PlotInputError(msg)
    return float(dpi)
