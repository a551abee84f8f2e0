"""The plotting functions draw what the data says, with pure matplotlib Figures and no pyplot."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from cytearc.errors import CyteArcError, PlotInputError
from cytearc.plots import dotplot, embedding, qc_violins, save_figure
from cytearc.plots._embedding import auto_point_size
from cytearc.plots._figure import MISSING_COLOR
from cytearc.plots._qc import MAX_POINTS

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.axes import Axes
    from matplotlib.collections import Collection, PathCollection


def _render(fig: Figure) -> None:
    """Draw the figure to PNG bytes so that draw-time warnings (errors here) surface."""
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def _collections(ax: Axes, gid: str) -> list[Collection]:
    return [collection for collection in ax.collections if collection.get_gid() == gid]


def _only(ax: Axes, gid: str) -> PathCollection:
    (collection,) = _collections(ax, gid)
    return collection  # type: ignore[return-value]


@pytest.fixture
def qc() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 600
    frame = pd.DataFrame(
        {
            "RNA_nCounts": rng.lognormal(8, 0.5, n),
            "RNA_nFeatures": rng.lognormal(7, 0.4, n).round(),
            "RNA_percentMito": rng.gamma(2, 2, n),
            "sample": pd.Categorical(
                rng.choice(["s2", "s1", "s3"], n), categories=["s2", "s1", "s3"]
            ),
        }
    )
    frame.loc[:4, "RNA_percentMito"] = np.nan
    return frame


@pytest.fixture
def blobs() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.concatenate([rng.normal(centre, 0.5, (40, 2)) for centre in ((0, 0), (5, 5), (0, 5))])


# qc_violins


def test_qc_one_panel_per_column_one_violin_per_group(qc: pd.DataFrame) -> None:
    """Three metrics split by three samples give three panels of three violins, in category order."""
    fig = qc_violins(qc, ["RNA_nCounts", "RNA_nFeatures", "RNA_percentMito"], groupby="sample")
    _render(fig)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert len(_collections(ax, "violin")) == 3
        assert [label.get_text() for label in ax.get_xticklabels()] == ["s2", "s1", "s3"]
        assert ax.get_xlabel() == "sample"


def test_qc_nan_left_out_and_counted(qc: pd.DataFrame) -> None:
    """NaN values are not drawn and their number is in the panel's title."""
    fig = qc_violins(qc, ["RNA_nCounts", "RNA_percentMito"])
    counts, mito = fig.axes
    assert counts.get_title() == "RNA_nCounts"
    assert mito.get_title() == "RNA_percentMito\nleft out: 5 NaN"
    assert len(_only(mito, "points").get_offsets()) == len(qc) - 5
    assert len(_collections(mito, "violin")) == 1


def test_qc_threshold_lines_at_the_bounds(qc: pd.DataFrame) -> None:
    """Dashed lines are drawn at each given bound, none for a bound of None."""
    fig = qc_violins(
        qc,
        ["RNA_nCounts", "RNA_percentMito"],
        thresholds={"RNA_nCounts": (500, 20_000), "RNA_percentMito": (None, 15)},
    )
    _render(fig)
    counts, mito = fig.axes
    lines = {line.get_gid(): line for line in counts.lines if line.get_gid()}
    assert list(lines["threshold-low"].get_ydata()) == [500, 500]
    assert list(lines["threshold-high"].get_ydata()) == [20_000, 20_000]
    assert lines["threshold-low"].get_linestyle() == "--"
    mito_lines = [line for line in mito.lines if line.get_gid()]
    assert [(line.get_gid(), line.get_ydata()[0]) for line in mito_lines] == [
        ("threshold-high", 15)
    ]
    assert mito.get_ylim()[1] > 15


def test_qc_log_scale_leaves_out_non_positive(qc: pd.DataFrame) -> None:
    """On a log scale, values <= 0 are left out and counted next to the NaN."""
    qc.loc[10:12, "RNA_percentMito"] = 0.0
    fig = qc_violins(qc, ["RNA_percentMito"], log=True, thresholds={"RNA_percentMito": (0.5, 20)})
    _render(fig)
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    assert ax.get_title() == "RNA_percentMito\nleft out: 5 NaN, 3 ≤ 0 on the log scale"
    assert (_only(ax, "points").get_offsets()[:, 1] > 0).all()


def test_qc_points_subsampled_and_seeded() -> None:
    """A violin of many cells shows a sample of at most 2,000 points, the same on every call."""
    frame = pd.DataFrame({"RNA_nCounts": np.random.default_rng(0).lognormal(8, 0.5, 5_000)})
    first = _only(qc_violins(frame, ["RNA_nCounts"]).axes[0], "points").get_offsets()
    again = _only(qc_violins(frame, ["RNA_nCounts"]).axes[0], "points").get_offsets()
    assert len(first) == MAX_POINTS
    np.testing.assert_array_equal(first, again)
    assert np.isin(first[:, 1], frame["RNA_nCounts"]).all()
    assert np.abs(first[:, 0]).max() < 0.4


def test_qc_constant_and_empty_groups() -> None:
    """A group of one value draws a flat violin and a group without values none, without warnings."""
    frame = pd.DataFrame(
        {
            "RNA_nCounts": [5.0, 5.0, 5.0, np.nan, np.nan, 1.0, 2.0, 4.0],
            "sample": ["a", "a", "a", "b", "b", "c", "c", None],
        }
    )
    fig = qc_violins(frame, ["RNA_nCounts"], groupby="sample")
    _render(fig)
    (ax,) = fig.axes
    assert len(_collections(ax, "violin")) == 2
    assert [label.get_text() for label in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_title() == "RNA_nCounts\nleft out: 2 NaN, 1 without sample"


def test_qc_draws_into_given_axes(qc: pd.DataFrame) -> None:
    """Given axes, one per column, are drawn into and their figure returned."""
    figure = Figure()
    axes = [figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)]
    assert qc_violins(qc, ["RNA_nCounts", "RNA_nFeatures"], ax=axes) is figure
    assert all(_collections(ax, "violin") for ax in axes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": "RNA_nCounts"}, "wrap a single name in a list"),
        ({"columns": []}, "at least one column"),
        ({"columns": ["RNA_nCount"]}, r"\['RNA_nCount'\] not in the frame"),
        ({"columns": ["sample"]}, r"frame\['sample'\]: expected numbers"),
        ({"groupby": "batch"}, "groupby: expected the name of a column"),
        ({"groupby": "RNA_nCounts"}, "expected categories"),
        ({"thresholds": {"RNA_nFeatures": (1, None)}}, "not one of the plotted columns"),
        ({"thresholds": {"RNA_nCounts": (10, 1)}}, r"low <= high, found \(10, 1\)"),
        ({"thresholds": {"RNA_nCounts": 10}}, r"a pair \(low, high\)"),
        ({"thresholds": {"RNA_nCounts": (0, None)}, "log": True}, "cannot be drawn on a log scale"),
        ({"log": "yes"}, "log: expected True or False"),
        ({"ax": [Figure().add_subplot()] * 2}, "expected 1 axes, one per column, found 2"),
    ],
)
def test_qc_bad_input(qc: pd.DataFrame, kwargs: dict[str, object], message: str) -> None:
    """Bad columns, groups, thresholds and axes raise PlotInputError naming what was expected."""
    arguments: dict[str, object] = {"columns": ["RNA_nCounts"], **kwargs}
    columns = arguments.pop("columns")
    with pytest.raises(PlotInputError, match=message):
        qc_violins(qc, columns, **arguments)  # type: ignore[arg-type]


# embedding


def test_embedding_legend_is_the_categories_in_order(blobs: np.ndarray) -> None:
    """A categorical keeps its category order in the legend, one colour per category."""
    values = pd.Categorical(np.repeat(["T", "B", "NK"], 40), categories=["T", "NK", "B"])
    fig = embedding(blobs, values=values, label="cell type")
    _render(fig)
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert legend is not None
    assert [text.get_text() for text in legend.get_texts()] == ["T", "NK", "B"]
    assert legend.get_title().get_text() == "cell type"
    points = _only(ax, "values")
    assert len(points.get_offsets()) == 120
    assert len({tuple(color) for color in points.get_facecolors()}) == 3


def test_embedding_strings_and_integers_sorted(blobs: np.ndarray) -> None:
    """Strings and integer cluster ids are categories in sorted order."""
    clusters = np.repeat([10, 2, 0], 40)
    labels = ax_labels(embedding(blobs, values=clusters))
    assert labels == ["0", "2", "10"]
    assert ax_labels(embedding(blobs, values=list(np.repeat(["c", "a", "b"], 40)))) == [
        "a",
        "b",
        "c",
    ]


def ax_labels(fig: Figure) -> list[str]:
    legend = fig.axes[0].get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()]


def test_embedding_missing_categories_grey_and_counted(blobs: np.ndarray) -> None:
    """Cells without a category are drawn grey beneath the others, counted, and listed as NA."""
    values = np.repeat(["a", "b", "c"], 40).astype(object)
    values[::10] = None
    fig = embedding(blobs, values=values)
    (ax,) = fig.axes
    missing = _only(ax, "missing")
    assert len(missing.get_offsets()) == 12
    np.testing.assert_array_equal(missing.get_offsets(), blobs[::10])
    assert tuple(missing.get_facecolors()[0]) == to_rgba(MISSING_COLOR)
    assert ax.collections.index(missing) < ax.collections.index(_only(ax, "values"))
    assert len(_only(ax, "values").get_offsets()) == 108
    notes = [text.get_text() for text in ax.texts if text.get_gid() == "missing-note"]
    assert notes == ["12 of 120 cells without a value (grey)"]
    assert ax_labels(fig) == ["a", "b", "c", "NA"]


def test_embedding_numbers_colorbar_and_grey_nan(blobs: np.ndarray) -> None:
    """Numbers get a colorbar over their range; NaN cells are grey, and high values drawn last."""
    expression = np.linspace(0.0, 3.0, 120)
    expression[:7] = np.nan
    fig = embedding(blobs, values=expression, label="CD3E", cmap="Reds")
    _render(fig)
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    points = _only(ax, "values")
    assert points.colorbar is not None
    assert points.colorbar.ax.get_ylabel() == "CD3E"
    assert (points.norm.vmin, points.norm.vmax) == (expression[7], 3.0)
    drawn = np.asarray(points.get_array())
    assert len(drawn) == 113
    assert (np.diff(drawn) >= 0).all()
    assert points.get_cmap().name == "Reds"
    missing = _only(ax, "missing")
    assert len(missing.get_offsets()) == 7
    assert tuple(missing.get_facecolors()[0]) == to_rgba(MISSING_COLOR)


def test_embedding_without_any_value_is_all_grey(blobs: np.ndarray) -> None:
    """Numbers that are all NaN draw every cell grey, with no colorbar to mislead."""
    fig = embedding(blobs, values=np.full(120, np.nan))
    _render(fig)
    (ax,) = fig.axes
    assert len(_only(ax, "missing").get_offsets()) == 120
    assert _collections(ax, "values") == []


def test_embedding_constant_and_nullable_values(blobs: np.ndarray) -> None:
    """One value throughout still gets a colorbar; nullable integers are categories with NA."""
    _render(embedding(blobs, values=np.full(120, 2.0)))
    clusters = pd.Series(np.repeat([3, 1, 2], 40), dtype="Int64", index=np.arange(120) + 1000)
    clusters.iloc[0] = pd.NA
    fig = embedding(blobs, values=clusters)
    _render(fig)
    assert ax_labels(fig) == ["1", "2", "3", "NA"]
    np.testing.assert_array_equal(_only(fig.axes[0], "missing").get_offsets(), blobs[:1])


def test_embedding_shuffle_is_deterministic(blobs: np.ndarray) -> None:
    """Categories are drawn in one shuffled order, the same on every call."""
    values = np.repeat(["a", "b", "c"], 40)
    first = _only(embedding(blobs, values=values).axes[0], "values").get_offsets()
    again = _only(embedding(blobs, values=values).axes[0], "values").get_offsets()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, blobs)
    np.testing.assert_array_equal(np.sort(first, axis=0), np.sort(blobs, axis=0))


def test_embedding_labels_on_data_at_medians(blobs: np.ndarray) -> None:
    """With legend_loc="on data" each category is written at the median of its cells."""
    fig = embedding(blobs, values=np.repeat(["a", "b", "c"], 40), legend_loc="on data")
    _render(fig)
    (ax,) = fig.axes
    assert ax.get_legend() is None
    labels = {text.get_text(): text.get_position() for text in ax.texts}
    np.testing.assert_allclose(labels["b"], np.median(blobs[40:80], axis=0))
    assert set(labels) == {"a", "b", "c"}


def test_embedding_point_size(blobs: np.ndarray) -> None:
    """Points are 120000 / n points² by default, clipped, or the size given."""
    assert auto_point_size(120) == 200.0
    assert auto_point_size(60_000) == 2.0
    assert auto_point_size(10**8) == 0.1
    assert _only(embedding(blobs).axes[0], "values").get_sizes()[0] == 200.0
    assert _only(embedding(blobs, point_size=3).axes[0], "values").get_sizes()[0] == 3.0


def test_embedding_draws_into_given_axes(blobs: np.ndarray) -> None:
    """Given axes are drawn into and their figure returned, with a title."""
    figure = Figure()
    ax = figure.add_subplot()
    assert embedding(blobs, values=np.arange(120.0), ax=ax, title="UMAP") is figure
    assert ax.get_title() == "UMAP"


@pytest.mark.parametrize(
    ("coords", "kwargs", "message"),
    [
        (np.zeros((5, 3)), {}, r"expected an array of shape \(n, 2\), found shape \(5, 3\)"),
        (np.zeros(5), {}, r"found shape \(5,\)"),
        (np.array([[0, 0], [np.nan, 1]]), {}, "1 rows with NaN or infinity"),
        ([["a", "b"]], {}, "not numeric"),
        (np.zeros((3, 2)), {"values": ["a", "b"]}, "expected 3 values, one per cell, found 2"),
        (np.zeros((2, 2)), {"values": ["a", 1]}, "all strings or all numbers, found int, str"),
        (np.zeros((2, 2)), {"values": [1.0, np.inf]}, "1 infinite values"),
        (np.zeros((2, 2)), {"values": np.zeros((2, 2))}, "1-D sequence"),
        (np.zeros((2, 2)), {"legend_loc": "left"}, "legend_loc: expected one of"),
        (np.zeros((2, 2)), {"cmap": "no-such-map"}, "not a matplotlib colormap"),
        (np.zeros((2, 2)), {"point_size": -1}, "point_size"),
        (np.zeros((2, 2)), {"ax": "axes"}, "ax: expected a matplotlib Axes"),
    ],
)
def test_embedding_bad_input(coords: object, kwargs: dict[str, object], message: str) -> None:
    """Bad coordinates and options raise PlotInputError naming what was expected and found."""
    with pytest.raises(PlotInputError, match=message) as caught:
        embedding(coords, **kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, CyteArcError | ValueError)


# dotplot


@pytest.fixture
def markers() -> tuple[pd.DataFrame, pd.DataFrame]:
    groups, genes = ["B", "T", "NK"], ["MS4A1", "CD3E", "NKG7", "ACTB"]
    mean = pd.DataFrame(
        [[2.0, 0.1, 0.2, 5.0], [0.1, 1.5, 0.4, 5.0], [0.0, 0.5, 3.0, 5.0]],
        index=groups,
        columns=genes,
    )
    fraction = pd.DataFrame(
        [[0.9, 0.1, 0.2, 1.0], [0.05, 0.8, 0.3, 1.0], [0.0, 0.4, 0.95, 1.0]],
        index=groups,
        columns=genes,
    )
    return mean, fraction


def test_dotplot_sizes_grow_with_fraction(markers: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """Dot area increases with the fraction expressing, zero for none."""
    mean, fraction = markers
    fig = dotplot(mean, fraction)
    _render(fig)
    dots = _only(fig.axes[0], "dots")
    sizes = dots.get_sizes()
    order = np.argsort(fraction.to_numpy().ravel(), kind="stable")
    fractions = fraction.to_numpy().ravel()[order]
    assert (np.diff(sizes[order]) >= 0).all()
    assert (np.diff(sizes[order])[np.diff(fractions) > 0] > 0).all()
    assert sizes[fraction.to_numpy().ravel() == 0].tolist() == [0.0]


def test_dotplot_layout_and_scaled_colour(markers: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """Genes run along x and groups down y; colours are each gene's means scaled to [0, 1]."""
    mean, fraction = markers
    fig = dotplot(mean, fraction, title="markers")
    ax, colorbar_ax = fig.axes
    assert [label.get_text() for label in ax.get_xticklabels()] == list(mean.columns)
    assert [label.get_text() for label in ax.get_yticklabels()] == list(mean.index)
    assert ax.get_ylim()[0] > ax.get_ylim()[1]
    colour = np.asarray(_only(ax, "dots").get_array()).reshape(mean.shape)
    np.testing.assert_allclose(colour.min(axis=0), [0, 0, 0, 0])
    np.testing.assert_allclose(colour.max(axis=0), [1, 1, 1, 0])
    np.testing.assert_allclose(colour[:, 0], [1.0, 0.05, 0.0])
    assert "scaled per gene" in colorbar_ax.get_title(loc="left")
    legend = colorbar_ax.get_legend()
    assert legend is not None
    assert [text.get_text() for text in legend.get_texts()] == ["20%", "40%", "60%", "80%", "100%"]
    assert ax.get_title() == "markers"


def test_dotplot_unscaled_and_realigned(markers: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """Without scaling the colours are the means; fraction is aligned to mean's labels."""
    mean, fraction = markers
    shuffled = fraction.iloc[::-1, ::-1]
    dots = _only(dotplot(mean, shuffled, standard_scale=None).axes[0], "dots")
    np.testing.assert_allclose(np.asarray(dots.get_array()), mean.to_numpy().ravel())
    np.testing.assert_allclose(dots.get_sizes(), 200 * fraction.to_numpy().ravel() ** 1.5)
    assert (dots.norm.vmin, dots.norm.vmax) == (0.0, 5.0)
    by_group = _only(dotplot(mean, fraction, standard_scale="group").axes[0], "dots")
    colour = np.asarray(by_group.get_array()).reshape(mean.shape)
    np.testing.assert_allclose(colour.max(axis=1), 1.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda m, f: (m, f.drop(columns="ACTB")),
            r"same genes \(columns\).*\['ACTB'\] only in mean",
        ),
        (lambda m, f: (m, f * 100), "look like percentages, divide by 100"),
        (lambda m, f: (m.where(m > 0.1), f), "found 3 NaN or infinite entries"),
        (lambda m, f: (m.iloc[:0], f), r"found shape \(0, 4\)"),
        (lambda m, f: (m.to_numpy(), f), "mean: expected a pandas DataFrame"),
        (lambda m, f: (m.assign(MS4A1="high"), f), "mean: expected numbers"),
    ],
)
def test_dotplot_bad_input(
    markers: tuple[pd.DataFrame, pd.DataFrame], change: object, message: str
) -> None:
    """Mismatched labels, percentages, NaN and non-numbers raise PlotInputError."""
    mean, fraction = change(*markers)  # type: ignore[operator]
    with pytest.raises(PlotInputError, match=message):
        dotplot(mean, fraction)


def test_dotplot_bad_scale(markers: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """An unknown standard_scale names the choices."""
    with pytest.raises(PlotInputError, match="'var', 'group' or None"):
        dotplot(*markers, standard_scale="gene")  # type: ignore[arg-type]


# save_figure


def test_save_png_reads_back(tmp_path: Path, blobs: np.ndarray) -> None:
    """A PNG is written into new folders and reads back as an RGBA image sized by the dpi."""
    fig = embedding(blobs, values=np.repeat(["a", "b", "c"], 40))
    path = save_figure(fig, tmp_path / "figures" / "umap" / "types.png", dpi=50)
    assert path == tmp_path / "figures" / "umap" / "types.png"
    image = matplotlib.image.imread(path)
    height, width, channels = image.shape
    assert channels == 4
    assert 100 < height < 50 * 4.5 + 10
    assert width > height
    assert image[..., :3].std() > 0
    sharper = matplotlib.image.imread(save_figure(fig, tmp_path / "sharp.PNG", dpi=100))
    assert sharper.shape[0] == pytest.approx(2 * height, abs=4)


def test_save_pdf_and_svg_reproducible(tmp_path: Path, blobs: np.ndarray) -> None:
    """PDF and SVG files have their formats' headers, and the same plot drawn twice the same bytes."""
    for suffix, header in ((".pdf", b"%PDF"), (".svg", b"<?xml")):
        first, again = (
            save_figure(embedding(blobs, values=np.arange(120.0)), tmp_path / f"{name}{suffix}")
            for name in ("first", "again")
        )
        assert first.read_bytes().startswith(header)
        assert first.read_bytes() == again.read_bytes()


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("plot.jpg", {}, r"\.png, \.pdf or \.svg, found '.*plot\.jpg'"),
        ("plot", {}, r"\.png, \.pdf or \.svg"),
        ("plot.png", {"dpi": 0}, "dpi: expected a positive number, found 0"),
    ],
)
def test_save_bad_input(tmp_path: Path, name: str, kwargs: dict[str, object], message: str) -> None:
    """Unknown formats and bad dpi raise PlotInputError before anything is written."""
    with pytest.raises(PlotInputError, match=message):
        save_figure(Figure(), tmp_path / name, **kwargs)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_save_needs_a_figure(tmp_path: Path) -> None:
    """Passing axes instead of their figure says what was expected."""
    with pytest.raises(PlotInputError, match="fig: expected a matplotlib Figure, found Axes"):
        save_figure(Figure().add_subplot(), tmp_path / "a.png")  # type: ignore[arg-type]
