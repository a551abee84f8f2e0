"""Marker dot plots: groups by genes, dot size the fraction expressing, colour the mean."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

import numpy as np
import pandas as pd
from matplotlib.colors import Colormap, Normalize
from matplotlib.lines import Line2D

from cytearc.errors import PlotInputError
from cytearc.plots._figure import resolve_cmap, target_axes

if TYPE_CHECKING:
    import numpy.typing as npt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["dot_area", "dotplot"]

StandardScale = Literal["var", "group"]

_SCALES: Final = ("var", "group", None)
_LARGEST_DOT: Final = 200.0
_SIZE_EXPONENT: Final = 1.5
_LEGEND_STEP: Final = 0.2
_COLOUR_TITLES: Final = {
    "var": "Mean expression\n(scaled per gene)",
    "group": "Mean expression\n(scaled per group)",
    None: "Mean expression",
}


def dot_area(fraction: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Marker area in points² of a fraction of cells expressing: ``200 * fraction**1.5`` as in scanpy.

    Examples
    --------
    >>> dot_area([0.0, 0.25, 1.0])
    array([  0.,  25., 200.])
    """
    return _LARGEST_DOT * np.asarray(fraction, dtype=np.float64) ** _SIZE_EXPONENT


def dotplot(
    mean: pd.DataFrame,
    fraction: pd.DataFrame,
    *,
    standard_scale: StandardScale | None = "var",
    cmap: str | Colormap = "Reds",
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Dot plot of marker genes: one row per group, one column per gene.

    A dot's area grows with the fraction of the group's cells that express
    the gene (zero for none, the largest for all); its colour is the group's
    mean expression.

    Parameters
    ----------
    mean
        Mean expression, indexed by group, one column per gene.
    fraction
        Fraction in [0, 1] of each group's cells expressing each gene, with
        the same groups and genes as ``mean`` (in any order; drawn in the
        order of ``mean``).
    standard_scale
        ``"var"`` scales each gene's means to [0, 1] across groups,
        ``"group"`` each group's means across genes, None keeps the means.
        A gene (or group) with one mean throughout gets 0.
    cmap
        Colormap of the means.
    title
        Title of the axes.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    Figure
        The figure holding the plot, its colorbar and a legend of dot sizes.

    Examples
    --------
    >>> from cytearc.plots import dotplot
    >>> groups, genes = ["B", "T"], ["MS4A1", "CD3E", "NKG7"]
    >>> mean = pd.DataFrame([[2.0, 0.1, 0.2], [0.1, 1.5, 0.4]], index=groups, columns=genes)
    >>> fraction = pd.DataFrame([[0.9, 0.1, 0.2], [0.05, 0.8, 0.3]], index=groups, columns=genes)
    >>> fig = dotplot(mean, fraction)
    >>> [label.get_text() for label in fig.axes[0].get_xticklabels()]
    ['MS4A1', 'CD3E', 'NKG7']
    """
    means, fractions = _parse_frames(mean, fraction)
    if standard_scale not in _SCALES:
        msg = f"standard_scale: expected 'var', 'group' or None, found {standard_scale!r}"
        raise PlotInputError(msg)
    colormap = resolve_cmap(cmap)
    colour = _scaled(means.to_numpy(dtype=np.float64), standard_scale)
    groups = [str(group) for group in means.index]
    genes = [str(gene) for gene in means.columns]
    fig, axes = target_axes(
        ax, figsize=(max(4.0, 0.4 * len(genes) + 3.2), max(3.4, 0.4 * len(groups) + 1.6))
    )
    x, y = np.meshgrid(np.arange(len(genes)), np.arange(len(groups)))
    norm = (
        Normalize(vmin=0.0, vmax=1.0)
        if standard_scale
        else Normalize(vmin=float(colour.min()), vmax=float(colour.max()))
    )
    dots = axes.scatter(
        x.ravel(),
        y.ravel(),
        s=dot_area(fractions.to_numpy(dtype=np.float64)).ravel(),
        c=colour.ravel(),
        cmap=colormap,
        norm=norm,
        edgecolors="grey",
        linewidths=0.5,
        gid="dots",
    )
    axes.set_xticks(range(len(genes)), genes, rotation=90)
    axes.set_yticks(range(len(groups)), groups)
    axes.set_xlim(-0.6, len(genes) - 0.4)
    axes.set_ylim(len(groups) - 0.4, -0.6)
    axes.set_axisbelow(True)
    axes.grid(visible=True, color="0.92", linewidth=0.5)
    if title is not None:
        axes.set_title(title)
    colorbar = fig.colorbar(
        dots, ax=axes, location="right", shrink=0.5, anchor=(0.0, 1.0), aspect=10, pad=0.03
    )
    colorbar.ax.set_title(_COLOUR_TITLES[standard_scale], fontsize="small", loc="left")
    _size_legend(colorbar.ax, largest=float(fractions.to_numpy().max()))
    return fig


def _parse_frame(frame: object, *, name: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        msg = f"{name}: expected a pandas DataFrame indexed by group with one column per gene, found {type(frame).__name__}"
        raise PlotInputError(msg)
    if frame.empty:
        msg = f"{name}: expected at least one group and one gene, found shape {frame.shape}"
        raise PlotInputError(msg)
    for axis, labels in (("groups (index)", frame.index), ("genes (columns)", frame.columns)):
        if labels.has_duplicates:
            msg = f"{name}: expected distinct {axis}, found repeats of {labels[labels.duplicated()].unique().tolist()!r}"
            raise PlotInputError(msg)
    return frame


def _parse_frames(mean: object, fraction: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    mean = _parse_frame(mean, name="mean")
    fraction = _parse_frame(fraction, name="fraction")
    for axis, ours, theirs in (
        ("groups (index)", mean.index, fraction.index),
        ("genes (columns)", mean.columns, fraction.columns),
    ):
        if set(ours) != set(theirs):
            only_mean = [str(label) for label in ours.difference(theirs)][:5]
            only_fraction = [str(label) for label in theirs.difference(ours)][:5]
            msg = f"fraction: expected the same {axis} as mean, found {only_mean!r} only in mean and {only_fraction!r} only in fraction"
            raise PlotInputError(msg)
    fraction = fraction.loc[mean.index, mean.columns]
    for name, frame in (("mean", mean), ("fraction", fraction)):
        try:
            array = frame.to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as exc:
            msg = f"{name}: expected numbers, found dtypes {sorted(set(map(str, frame.dtypes)))!r}"
            raise PlotInputError(msg) from exc
        missing = int((~np.isfinite(array)).sum())
        if missing:
            msg = f"{name}: expected finite numbers, found {missing} NaN or infinite entries; fill them (a group that does not express a gene has mean 0 and fraction 0)"
            raise PlotInputError(msg)
    values = fraction.to_numpy(dtype=np.float64)
    if values.min() < 0 or values.max() > 1:
        hint = "; they look like percentages, divide by 100" if values.max() <= 100 else ""
        msg = f"fraction: expected fractions in [0, 1], found values in [{values.min():g}, {values.max():g}]{hint}"
        raise PlotInputError(msg)
    return mean, fraction


def _scaled(
    values: npt.NDArray[np.float64], standard_scale: StandardScale | None
) -> npt.NDArray[np.float64]:
    if standard_scale is None:
        return values
    axis = 0 if standard_scale == "var" else 1
    low = values.min(axis=axis, keepdims=True)
    span = values.max(axis=axis, keepdims=True) - low
    scaled: npt.NDArray[np.float64] = np.divide(
        values - low, span, out=np.zeros_like(values), where=span > 0
    )
    return scaled


def _size_legend(ax: Axes, *, largest: float) -> None:
    """Legend of dot areas, from 20 % up to the smallest step that holds the largest fraction."""
    top = max(_LEGEND_STEP, np.ceil(largest / _LEGEND_STEP - 1e-9) * _LEGEND_STEP)
    steps = np.arange(_LEGEND_STEP, top + 1e-9, _LEGEND_STEP)
    handles = [
        Line2D(
            [],
            [],
            linestyle="",
            marker="o",
            markersize=float(np.sqrt(area)),
            markerfacecolor="dimgrey",
            markeredgecolor="grey",
        )
        for area in dot_area(steps)
    ]
    ax.legend(
        handles,
        [f"{step:.0%}" for step in steps],
        title="Cells expressing",
        loc="upper left",
        bbox_to_anchor=(0.0, -0.08),
        frameon=False,
        fontsize="small",
        title_fontsize="small",
        labelspacing=1.0,
    )
