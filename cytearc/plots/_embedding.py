"""Scatter plots of an embedding (UMAP, PCA), coloured by categories or by numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
from matplotlib import patheffects
from matplotlib.colors import Colormap, Normalize
from matplotlib.lines import Line2D

from cytearc.errors import PlotInputError
from cytearc.plots._figure import MISSING_COLOR, category_colors, resolve_cmap, target_axes
from cytearc.plots._validate import Categories, Numbers, parse_coords, parse_values

if TYPE_CHECKING:
    import numpy.typing as npt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

    from cytearc.plots._validate import ValuesLike

__all__ = ["auto_point_size", "embedding"]

LegendLoc = Literal["right margin", "on data"]

_LEGEND_LOCS: Final = ("right margin", "on data")
_SIZE_RANGE: Final = (0.1, 200.0)
_RASTERIZE_ABOVE: Final = 10_000
_SHUFFLE_SEED: Final = 0


def auto_point_size(n: int) -> float:
    """Marker area in points² for ``n`` cells: ``120000 / n`` as in scanpy, clipped to [0.1, 200].

    Examples
    --------
    >>> auto_point_size(1_000), auto_point_size(3), auto_point_size(10**7)
    (120.0, 200.0, 0.1)
    """
    return float(np.clip(120_000 / max(n, 1), *_SIZE_RANGE))


def embedding(
    coords: npt.ArrayLike,
    *,
    values: ValuesLike | None = None,
    title: str | None = None,
    label: str | None = None,
    point_size: float | None = None,
    cmap: str | Colormap | None = None,
    legend_loc: LegendLoc = "right margin",
    ax: Axes | None = None,
) -> Figure:
    """Scatter plot of cells in two dimensions, such as a UMAP or the first two PCs.

    Categorical ``values`` get one colour each, drawn in a fixed shuffled
    order so that no group hides another, with a legend or labels at the
    group medians. Numeric ``values`` (a gene's expression) get a colormap
    and a colorbar, drawn with the highest values on top. Cells without a
    value (NaN, None) are drawn in light grey beneath the others and counted
    in a note in the corner.

    Parameters
    ----------
    coords
        Coordinates of shape ``(n, 2)``, one row per cell.
    values
        One value per cell, matched by position: strings, integers, booleans
        or a pandas categorical are categories (a categorical keeps its order,
        others are sorted); floats are numbers. ``None`` draws all cells in one
        colour.
    title
        Title of the axes.
    label
        Name of the values: the legend's title or the colorbar's label.
    point_size
        Marker area in points²; by default ``120000 / n``, clipped to [0.1, 200].
    cmap
        Colormap of numeric values (default ``"viridis"``) or palette of
        categories (default ``tab10``, ``tab20``, then ``turbo``).
    legend_loc
        ``"right margin"`` for a legend beside the axes, ``"on data"`` to write
        each category at the median of its cells.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    Figure
        The figure holding the plot (the one of ``ax`` when given).

    Examples
    --------
    >>> from cytearc.plots import embedding
    >>> fig = embedding(np.zeros((3, 2)), values=["a", "b", "a"])
    >>> len(fig.axes)
    1
    >>> [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    ['a', 'b']
    >>> fig = embedding(np.random.default_rng(0).normal(size=(50, 2)), values=np.arange(50.0))
    >>> len(fig.axes)  # the plot and its colorbar
    2
    """
    points = parse_coords(coords)
    n = len(points)
    parsed = None if values is None else parse_values(values, n=n)
    if legend_loc not in _LEGEND_LOCS:
        msg = f"legend_loc: expected one of {_LEGEND_LOCS!r}, found {legend_loc!r}"
        raise PlotInputError(msg)
    size = _parse_point_size(point_size, n=n)
    colormap = None if cmap is None else resolve_cmap(cmap)
    wide = isinstance(parsed, Categories) and legend_loc == "right margin"
    fig, axes = target_axes(ax, figsize=(6.0 if wide else 5.0, 4.5))
    style: dict[str, Any] = {"s": size, "linewidths": 0, "rasterized": n > _RASTERIZE_ABOVE}
    if parsed is not None and parsed.missing.any():
        _draw_missing(axes, points, parsed.missing, style=style)
    if isinstance(parsed, Categories):
        colors = category_colors(len(parsed.labels), cmap=colormap)
        _draw_categories(axes, points, parsed, colors=colors, style=style)
        if legend_loc == "right margin":
            _legend_in_margin(axes, parsed, colors=colors, label=label)
        else:
            _labels_on_data(axes, points, parsed)
    elif isinstance(parsed, Numbers):
        colormap = resolve_cmap("viridis") if colormap is None else colormap
        _draw_numbers(axes, fig, points, parsed, cmap=colormap, label=label, style=style)
    else:
        axes.scatter(points[:, 0], points[:, 1], color="C0", gid="values", **style)
    axes.set_xticks([])
    axes.set_yticks([])
    if title is not None:
        axes.set_title(title)
    return fig


def _parse_point_size(point_size: object, *, n: int) -> float:
    if point_size is None:
        return auto_point_size(n)
    if isinstance(point_size, bool) or not isinstance(point_size, int | float):
        msg = f"point_size: expected a positive number or None, found {point_size!r}"
        raise PlotInputError(msg)
    if not 0 < point_size < np.inf:
        msg = f"point_size: expected a positive finite marker area in points², found {point_size!r}"
        raise PlotInputError(msg)
    return float(point_size)


def _draw_missing(
    ax: Axes,
    points: npt.NDArray[np.float64],
    missing: npt.NDArray[np.bool_],
    *,
    style: dict[str, Any],
) -> None:
    count = int(missing.sum())
    ax.scatter(points[missing, 0], points[missing, 1], color=MISSING_COLOR, gid="missing", **style)
    ax.text(
        0.01,
        0.01,
        f"{count} of {len(points)} cells without a value (grey)",
        transform=ax.transAxes,
        fontsize="x-small",
        color="dimgrey",
        gid="missing-note",
    )


def _draw_categories(
    ax: Axes,
    points: npt.NDArray[np.float64],
    categories: Categories,
    *,
    colors: npt.NDArray[np.float64],
    style: dict[str, Any],
) -> None:
    present = np.flatnonzero(~categories.missing)
    order = np.random.default_rng(_SHUFFLE_SEED).permutation(present)
    ax.scatter(
        points[order, 0],
        points[order, 1],
        c=colors[categories.codes[order]],
        gid="values",
        **style,
    )


def _legend_in_margin(
    ax: Axes, categories: Categories, *, colors: npt.NDArray[np.float64], label: str | None
) -> None:
    handles = [_dot(color) for color in colors]
    labels = list(categories.labels)
    if categories.missing.any():
        handles.append(_dot(MISSING_COLOR))
        labels.append("NA")
    n_labels = len(labels)
    ax.legend(
        handles,
        labels,
        title=label,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        frameon=False,
        ncols=1 if n_labels <= 14 else 2 if n_labels <= 30 else 3,
        fontsize="small",
    )


def _dot(color: ColorType) -> Line2D:
    return Line2D([], [], linestyle="", marker="o", markersize=7, color=color)


def _labels_on_data(ax: Axes, points: npt.NDArray[np.float64], categories: Categories) -> None:
    outline = [patheffects.withStroke(linewidth=3, foreground="white")]
    for code, name in enumerate(categories.labels):
        members = points[categories.codes == code]
        if len(members) == 0:
            continue
        x, y = np.median(members, axis=0)
        ax.text(
            x,
            y,
            name,
            ha="center",
            va="center",
            fontweight="bold",
            fontsize="small",
            path_effects=outline,
            gid="category-label",
        )


def _draw_numbers(
    ax: Axes,
    fig: Figure,
    points: npt.NDArray[np.float64],
    numbers: Numbers,
    *,
    cmap: Colormap,
    label: str | None,
    style: dict[str, Any],
) -> None:
    present = np.flatnonzero(~numbers.missing)
    if len(present) == 0:
        return
    order = present[np.argsort(numbers.values[present], kind="stable")]
    measured = numbers.values[order]
    mappable = ax.scatter(
        points[order, 0],
        points[order, 1],
        c=measured,
        cmap=cmap,
        norm=Normalize(vmin=float(measured[0]), vmax=float(measured[-1])),
        gid="values",
        **style,
    )
    fig.colorbar(mappable, ax=ax, label=label, fraction=0.05, pad=0.02)
