"""Plots of limma-voom results: volcano, MA and voom's mean-variance trend (matplotlib).

Each function takes a :class:`~cytepool.de.LimmaResult` and returns a
:class:`~matplotlib.figure.Figure` drawn with the object-oriented API (no
pyplot state), or draws into ``ax=``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from cytepool.errors import ResultFormatError

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

    from matplotlib.axes import Axes

    from cytepool.de import LimmaResult

__all__ = ["ma_plot", "save_de_figures", "volcano", "voom_trend"]

_UP, _DOWN, _FLAT = "#c0392b", "#2e6fb7", "#b5b5b5"


def _axes(ax: Axes | None, size: tuple[float, float] = (5.0, 4.5)) -> tuple[Figure, Axes]:
    if ax is not None:
        figure = ax.get_figure()
        assert isinstance(figure, Figure)
        return figure, ax
    figure = Figure(figsize=size, layout="constrained")
    return figure, figure.subplots()


def _title(result: LimmaResult, what: str) -> str:
    test = result.settings.get("test")
    tested = test.get("name", "") if isinstance(test, dict) else ""
    group = "" if result.cube is None else f"group {result.cube.group}: "
    return f"{group}{what} {tested}".strip()


def _classes(result: LimmaResult, *, alpha: float, lfc: float) -> np.ndarray:
    table = result.table
    significant = (table["adj.P.Val"] < alpha) & (table["logFC"].abs() >= lfc)
    return np.where(significant & (table["logFC"] > 0), 1, np.where(significant, -1, 0))


def _scatter(ax: Axes, x: np.ndarray, y: np.ndarray, classes: np.ndarray) -> None:
    for value, color, label in ((0, _FLAT, "not significant"), (1, _UP, "up"), (-1, _DOWN, "down")):
        chosen = classes == value
        ax.scatter(
            x[chosen],
            y[chosen],
            s=6 if value == 0 else 10,
            c=color,
            linewidths=0,
            label=f"{label} ({int(chosen.sum())})",
            rasterized=len(x) > 5000,
        )
    ax.legend(loc="best", fontsize="small", frameon=False, markerscale=2)


def _label_top(ax: Axes, result: LimmaResult, x: np.ndarray, y: np.ndarray, n: int) -> None:
    order = np.argsort(result.table["P.Value"].to_numpy(), kind="stable")[:n]
    names = result.table.index.to_numpy()
    for i in order:
        ax.annotate(
            str(names[i]), (x[i], y[i]), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )


def volcano(
    result: LimmaResult,
    *,
    alpha: float = 0.05,
    lfc: float = 0.0,
    label_top: int = 5,
    ax: Axes | None = None,
) -> Figure:
    """log2 fold change against -log10 p-value; significant genes (BH ``adj.P.Val < alpha``) coloured.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from cytepool.de import limma_voom_result
    >>> rng = np.random.default_rng(0)
    >>> counts = pd.DataFrame(rng.poisson(50, (200, 6)), columns=list("abcdef"))
    >>> samples = pd.DataFrame({"c": ["x", "x", "x", "y", "y", "y"]}, index=list("abcdef"))
    >>> fig = volcano(limma_voom_result(counts, samples, design="~ c"))
    >>> fig.axes[0].get_xlabel()
    'log2 fold change'
    """
    _check(result)
    figure, axes = _axes(ax)
    x = result.table["logFC"].to_numpy()
    y = -np.log10(np.maximum(result.table["P.Value"].to_numpy(), np.finfo(float).tiny))
    _scatter(axes, x, y, _classes(result, alpha=alpha, lfc=lfc))
    _label_top(axes, result, x, y, label_top)
    axes.axvline(0, color="0.6", linewidth=0.6)
    axes.set_xlabel("log2 fold change")
    axes.set_ylabel("-log10 p-value")
    axes.set_title(_title(result, "volcano"), fontsize="medium")
    return figure


def ma_plot(
    result: LimmaResult, *, alpha: float = 0.05, lfc: float = 0.0, ax: Axes | None = None
) -> Figure:
    """Average log2-CPM against log2 fold change (limma's ``plotMD``)."""
    _check(result)
    figure, axes = _axes(ax)
    x = result.table["AveExpr"].to_numpy()
    y = result.table["logFC"].to_numpy()
    _scatter(axes, x, y, _classes(result, alpha=alpha, lfc=lfc))
    axes.axhline(0, color="0.6", linewidth=0.6)
    axes.set_xlabel("average log2 CPM")
    axes.set_ylabel("log2 fold change")
    axes.set_title(_title(result, "MA"), fontsize="medium")
    return figure


def voom_trend(result: LimmaResult, *, ax: Axes | None = None) -> Figure:
    """Voom's mean-variance trend: sqrt(residual SD) against average log2 count, with the lowess line."""
    _check(result)
    if result.voom_trend is None:
        msg = f"{_title(result, 'voom_trend')}: expected a result with its voom trend, found none (results read from a file keep only the table and metadata); compute it again with cytepool.limma_voom"
        raise ResultFormatError(msg)
    figure, axes = _axes(ax)
    points, line = result.voom_trend.points, result.voom_trend.line
    axes.scatter(
        points["sx"], points["sy"], s=4, c="0.35", linewidths=0, rasterized=len(points) > 5000
    )
    axes.plot(line["x"], line["y"], color=_UP, linewidth=1.5, label="lowess trend")
    axes.set_xlabel("log2( count size + 0.5 )")
    axes.set_ylabel("sqrt( standard deviation )")
    axes.set_title(_title(result, "voom: mean-variance trend"), fontsize="medium")
    axes.legend(loc="best", fontsize="small", frameon=False)
    return figure


def save_de_figures(
    results: Mapping[Hashable, LimmaResult], directory: str | Path, *, prefix: str = ""
) -> list[Path]:
    """Write the volcano, MA and voom-trend plots of every result, ``<plot>_<prefix><group>.png``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for group, result in results.items():
        for name, draw in (("volcano", volcano), ("ma", ma_plot), ("voom_trend", voom_trend)):
            path = directory / f"{name}_{prefix}{group}.png"
            draw(result).savefig(path, dpi=120)
            written.append(path)
    return written


def _check(result: LimmaResult) -> None:
    missing = {"logFC", "AveExpr", "P.Value", "adj.P.Val"} - set(result.table.columns)
    if missing:
        msg = f"{_title(result, 'table')}: expected a limma result table with columns {sorted(missing)}, found columns {list(result.table.columns)}; plot a result of cytepool.limma_voom"
        raise ResultFormatError(msg)
