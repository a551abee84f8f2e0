"""The HTML views of notebooks (``_repr_html_``): a title over a table of labelled rows.

Every view of CyteArc and CytePool is built with these functions, so the
views look alike and escape alike: a value is inserted as text, escaped with
:func:`html.escape`, unless it is :class:`Html` that a function of this module
made. Long lists and tables show their first :data:`LIMIT` entries and say
how many more there are. There is no JavaScript and no style sheet (only
inline alignment), so a view reads the same in Jupyter, JupyterLab, VS Code
and an exported HTML page.

>>> view("Cube <b>", [("shape", "3 x 4"), ("skipped", None), ("layers", items(["a", "b"]))])
'<div><strong>Cube &lt;b&gt;</strong><table><tr><th ...>shape</th><td ...>3 x 4</td></tr><tr><th ...>layers</th><td ...>a, b</td></tr></table></div>'
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    import pandas as pd

__all__ = [
    "LIMIT",
    "Html",
    "Row",
    "bullets",
    "code",
    "frame",
    "items",
    "json_code",
    "link",
    "mapping",
    "table",
    "text",
    "view",
    "when",
]

LIMIT: Final = 10
"""The entries a list or table of a view shows; the rest are counted."""

_WIDTH: Final = 120
_CELL: Final = 'style="text-align:left;vertical-align:top"'


class Html(str):
    """Markup made by this module, inserted as it is; any other value is escaped."""

    __slots__ = ()


Row: TypeAlias = tuple[str, object]
"""A row of a view: its label and its value (None leaves the row out)."""


def text(value: object) -> Html:
    """``value`` as HTML: markup of this module as it is, anything else as escaped text.

    Parameters
    ----------
    value
        The value; ``str(value)`` is shown.

    Returns
    -------
    Html
        The markup.

    Examples
    --------
    >>> text("<script>"), text(text("<b>"))
    ('&lt;script&gt;', '&lt;b&gt;')
    """
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def code(value: object) -> Html:
    """``value`` as escaped text in ``<code>``, such as a fingerprint or a ref.

    Parameters
    ----------
    value
        The value.

    Returns
    -------
    Html
        The markup.
    """
    return Html(f"<code>{text(value)}</code>")


def json_code(value: object, *, width: int = _WIDTH) -> Html:
    """``value`` as compact JSON in ``<code>``, cut to ``width`` characters.

    Parameters
    ----------
    value
        A JSON value (anything else is shown as its ``str``).
    width
        The characters shown; a longer text ends in ``...``.

    Returns
    -------
    Html
        The markup.
    """
    try:
        shown = json.dumps(value, separators=(", ", ": "), default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = str(value)
    return code(shown if len(shown) <= width else f"{shown[: width - 3]}...")


def link(url: str, label: object = None) -> Html:
    """A link to ``url`` that opens in a new tab; an address not of HTTP(S) is shown unlinked.

    Parameters
    ----------
    url
        The address, such as a Dask dashboard's.
    label
        The text of the link; the address by default.

    Returns
    -------
    Html
        The markup.
    """
    shown = text(url if label is None else label)
    if not url.startswith(("http://", "https://")):
        return code(shown)
    return Html(f'<a href="{html.escape(url, quote=True)}" target="_blank">{shown}</a>')


def _more(n_more: int) -> str:
    return f"and {n_more} more" if n_more else ""


def items(values: Iterable[object], *, limit: int = LIMIT) -> Html:
    """Values separated by commas: the first ``limit``, then how many more.

    Parameters
    ----------
    values
        The values.
    limit
        The values shown.

    Returns
    -------
    Html
        The markup; ``none`` for no values.
    """
    listed = list(values)
    shown = [str(text(v)) for v in listed[:limit]]
    if len(listed) > limit:
        shown.append(_more(len(listed) - limit))
    return Html(", ".join(shown) if shown else "none")


def bullets(values: Sequence[object], *, limit: int = LIMIT) -> Html:
    """A bulleted list of the first ``limit`` values, then how many more (nested lists make trees).

    Parameters
    ----------
    values
        The entries (markup of this module, such as another list, is kept).
    limit
        The entries shown.

    Returns
    -------
    Html
        The markup.
    """
    entries = [f"<li>{text(v)}</li>" for v in values[:limit]]
    if len(values) > limit:
        entries.append(f"<li>{_more(len(values) - limit)}</li>")
    return Html(f'<ul style="margin:0">{"".join(entries)}</ul>')


def table(rows: Sequence[Sequence[object]], *, header: Sequence[str], limit: int = LIMIT) -> Html:
    """A small table of the first ``limit`` rows, then how many more.

    Parameters
    ----------
    rows
        The rows, each with one value per column.
    header
        The column names.
    limit
        The rows shown.

    Returns
    -------
    Html
        The markup; ``none`` for no rows.
    """
    if not rows:
        return Html("none")
    head = "".join(f"<th {_CELL}>{text(h)}</th>" for h in header)
    body = [
        "<tr>" + "".join(f"<td {_CELL}>{text(v)}</td>" for v in row) + "</tr>"
        for row in rows[:limit]
    ]
    if len(rows) > limit:
        body.append(f'<tr><td {_CELL} colspan="{len(header)}">{_more(len(rows) - limit)}</td></tr>')
    return Html(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def mapping(values: Mapping[str, object], *, limit: int = LIMIT) -> Html:
    """A table of keys and their values as compact JSON, such as parameters or settings.

    Parameters
    ----------
    values
        The mapping.
    limit
        The keys shown.

    Returns
    -------
    Html
        The markup; ``none`` for an empty mapping.
    """
    rows = [(key, json_code(value)) for key, value in values.items()]
    return table(rows, header=("key", "value"), limit=limit)


def frame(
    df: pd.DataFrame,
    *,
    limit: int = LIMIT,
    index: bool = True,
    float_format: Callable[[float], str] | None = None,
) -> Html:
    """The first ``limit`` rows of a data frame as pandas renders them, escaped, then how many more.

    Parameters
    ----------
    df
        The data frame.
    limit
        The rows shown.
    index
        Show the index.
    float_format
        Formats each float (pandas' default when None).

    Returns
    -------
    Html
        The markup.
    """
    shown = df.head(limit).to_html(escape=True, border=0, index=index, float_format=float_format)
    more = f"<div>{_more(len(df) - limit)}</div>" if len(df) > limit else ""
    return Html(shown + more)


def view(title: object, rows: Iterable[Row]) -> Html:
    """A view: the title in bold over a table of the rows, each a label and its value.

    Parameters
    ----------
    title
        The title, such as ``"DataStore"`` and its location.
    rows
        The labels and their values; a row whose value is None is left out.

    Returns
    -------
    Html
        The markup, one ``<div>``.
    """
    body = "".join(
        f"<tr><th {_CELL}>{text(label)}</th><td {_CELL}>{text(value)}</td></tr>"
        for label, value in rows
        if value is not None
    )
    return Html(f"<div><strong>{text(title)}</strong><table>{body}</table></div>")


def when(ns: int) -> str:
    """A time in nanoseconds since the epoch as a UTC date and time, to the second.

    Parameters
    ----------
    ns
        Nanoseconds since the epoch (``time.time_ns()``).

    Returns
    -------
    str
        Such as ``"2025-01-31 09:30:00 UTC"``.

    Examples
    --------
    >>> when(0)
    '1970-01-01 00:00:00 UTC'
    """
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
