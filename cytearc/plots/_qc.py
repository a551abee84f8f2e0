"""Violin plots of per-cell quality-control metrics, with the points and the filter thresholds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import numpy as np
from matplotlib import mlab
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from cytearc.errors import PlotInputError
from cytearc.plots._figure import category_colors, root_figure
from cytearc.plots._validate import (
    Categories,
    parse_categories,
    parse_flag,
    parse_metric_columns,
    parse_thresholds,
)

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd
    from matplotlib.collections import PolyCollection

__all__ = ["MAX_POINTS", "qc_violins"]

MAX_POINTS: Final = 2_000
"""Most points drawn over one violin; larger groups show a seeded random sample."""

_SEED: Final = 0
_KDE_POINTS: Final = 100
_WIDTH: Final = 0.8


@dataclass(frozen=True, kw_only=True)
class _Violin:
    """Statistics of one violin in the form :meth:`~matplotlib.axes.Axes.violin` takes."""

    stats: dict[str, Any]
    scaled: npt.NDArray[np.float64]
    coords: npt.NDArray[np.float64]
    density: npt.NDArray[np.float64]


def qc_violins(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    groupby: str | None = None,
    log: bool = False,
    thresholds: Mapping[str, tuple[float | None, float | None]] | None = None,
    ax: Axes | Sequence[Axes] | None = None,
) -> Figure:
    """Violin plots of quality-control metrics, one panel per column.

    Each panel shows the distribution of one metric (such as
    ``RNA_nCounts``, ``RNA_nFeatures``, ``RNA_percentMito``) with its median,
    the cells as points spread across the violin's width (a seeded sample
    of at most 2,000 per violin), and dashed lines at the filter thresholds.
    NaN values, and with ``log=True`` values ≤ 0, are left out and counted
    in the panel's title.

    Parameters
    ----------
    frame
        One row per cell.
    columns
        Numeric columns of ``frame`` to plot.
    groupby
        A column of categories (such as the sample) to split each panel by;
        categoricals keep their order, other values are sorted. Rows
        without a category are left out and counted.
    log
        Draw the metric on a log scale; the violins' densities are
        estimated on the log of the values.
    thresholds
        ``{column: (low, high)}`` filter bounds drawn as dashed lines; None
        for a bound that is not set.
    ax
        Axes to draw into, one per column; a new figure when omitted.

    Returns
    -------
    Figure
        The figure holding the panels (the one of ``ax`` when given).

    Examples
    --------
    >>> import pandas as pd
    >>> from cytearc.plots import qc_violins
    >>> rng = np.random.default_rng(0)
    >>> qc = pd.DataFrame({"RNA_nCounts": rng.lognormal(8, 0.5, 300), "RNA_percentMito": rng.gamma(2, 2, 300)})
    >>> fig = qc_violins(qc, ["RNA_nCounts", "RNA_percentMito"], thresholds={"RNA_percentMito": (None, 20)})
    >>> [panel.get_title() for panel in fig.axes]
    ['RNA_nCounts', 'RNA_percentMito']
    """
    names = parse_metric_columns(frame, columns)
    log = parse_flag(log, name="log")
    bounds = parse_thresholds(thresholds, columns=names, log=log)
    groups = _parse_groupby(frame, groupby)
    n_groups = 1 if groups is None else len(groups.labels)
    fig, panels = _panels(ax, n=len(names), panel_width=min(max(2.4, 0.6 * n_groups + 1.2), 9.0))
    colors = category_colors(n_groups)
    for panel, name in zip(panels, names, strict=True):
        values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
        _draw_panel(
            panel, values, name=name, groups=groups, groupby=groupby, log=log, colors=colors
        )
        for kind, bound in zip(("low", "high"), bounds.get(name, (None, None)), strict=True):
            if bound is not None:
                panel.axhline(
                    bound, color="crimson", linestyle="--", linewidth=1, gid=f"threshold-{kind}"
                )
    return fig


def _parse_groupby(frame: pd.DataFrame, groupby: object) -> Categories | None:
    if groupby is None:
        return None
    if not isinstance(groupby, str) or groupby not in frame.columns:
        msg = f"groupby: expected the name of a column of the frame, found {groupby!r}; the columns are {list(map(str, frame.columns[:10]))!r}"
        raise PlotInputError(msg)
    return parse_categories(frame[groupby], n=len(frame), name=f"frame[{groupby!r}]")


def _panels(ax: object, *, n: int, panel_width: float) -> tuple[Figure, list[Axes]]:
    if ax is None:
        fig = Figure(figsize=(panel_width * n, 4.0), layout="constrained")
        return fig, [fig.add_subplot(1, n, index + 1) for index in range(n)]
    panels = [ax] if isinstance(ax, Axes) else list(ax) if isinstance(ax, Sequence) else None
    if panels is None or not all(isinstance(panel, Axes) for panel in panels):
        msg = f"ax: expected a matplotlib Axes or a sequence of them, found {type(ax).__name__}"
        raise PlotInputError(msg)
    if len(panels) != n:
        msg = f"ax: expected {n} axes, one per column, found {len(panels)}"
        raise PlotInputError(msg)
    return root_figure(panels[0]), panels


def _draw_panel(
    ax: Axes,
    values: npt.NDArray[np.float64],
    *,
    name: str,
    groups: Categories | None,
    groupby: str | None,
    log: bool,
    colors: npt.NDArray[np.float64],
) -> None:
    codes = np.zeros(len(values), dtype=np.intp) if groups is None else groups.codes
    keep = ~np.isnan(values)
    left_out = {"NaN": int((~keep).sum())}
    if groups is not None:
        left_out[f"without {groupby}"] = int((keep & groups.missing).sum())
        keep &= ~groups.missing
    if log:
        left_out["≤ 0 on the log scale"] = int((keep & (values <= 0)).sum())
        keep &= values > 0
    violins: list[_Violin] = []
    positions: list[int] = []
    for code in range(len(colors)):
        members = values[keep & (codes == code)]
        if len(members):
            violins.append(_violin(members, log=log))
            positions.append(code)
    if violins:
        parts = ax.violin(
            [violin.stats for violin in violins],
            positions=positions,
            widths=_WIDTH,
            showmedians=True,
            showextrema=False,
        )
        for body, position in zip(
            cast("list[PolyCollection]", parts["bodies"]), positions, strict=True
        ):
            body.set_facecolor(colors[position])
            body.set_edgecolor("black")
            body.set_linewidth(0.5)
            body.set_alpha(0.6)
            body.set_gid("violin")
        parts["cmedians"].set_color("black")
        for violin, position in zip(violins, positions, strict=True):
            _draw_points(ax, violin, position=position, log=log)
        if log:
            ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no values", transform=ax.transAxes, ha="center", color="dimgrey")
    if groups is None:
        ax.set_xticks([])
    else:
        ax.set_xticks(range(len(groups.labels)), groups.labels)
        ax.set_xlabel(groupby or "")
        if len(groups.labels) > 3 or max(map(len, groups.labels), default=0) > 6:
            ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlim(-0.6, len(colors) - 0.4)
    notes = [f"{count} {reason}" for reason, count in left_out.items() if count]
    ax.set_title(f"{name}\nleft out: {', '.join(notes)}" if notes else name)


def _violin(values: npt.NDArray[np.float64], *, log: bool) -> _Violin:
    scaled = np.log10(values) if log else values
    low, high = float(scaled.min()), float(scaled.max())
    if low == high:
        coords = np.array([low, high])
        density = np.ones(2)
    else:
        coords = np.linspace(low, high, _KDE_POINTS)
        density = np.asarray(mlab.GaussianKDE(scaled, "scott").evaluate(coords), dtype=np.float64)
    back = np.power(10.0, coords) if log else coords
    median = float(np.median(values))
    stats = {
        "coords": back,
        "vals": density,
        "mean": float(np.mean(values)),
        "median": median,
        "min": float(values.min()),
        "max": float(values.max()),
    }
    return _Violin(stats=stats, scaled=scaled, coords=coords, density=density)


def _draw_points(ax: Axes, violin: _Violin, *, position: int, log: bool) -> None:
    """Points spread across the violin's width at their height, as in a sina plot."""
    rng = np.random.default_rng(_SEED)
    scaled = violin.scaled
    if len(scaled) > MAX_POINTS:
        scaled = scaled[rng.choice(len(scaled), MAX_POINTS, replace=False)]
    width = np.interp(scaled, violin.coords, violin.density) / violin.density.max()
    x = position + rng.uniform(-1.0, 1.0, len(scaled)) * width * 0.45 * _WIDTH
    y = np.power(10.0, scaled) if log else scaled
    ax.scatter(
        x,
        y,
        s=4.0 if len(scaled) <= 500 else 1.5,
        color="black",
        alpha=0.4,
        linewidths=0,
        gid="points",
        zorder=3,
    )
