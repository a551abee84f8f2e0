"""The builder of the notebook views: escaped text, truncated lists, links only to HTTP(S)."""

from __future__ import annotations

import pandas as pd
import pytest

from cytepool._html import (
    LIMIT,
    Html,
    bullets,
    code,
    frame,
    items,
    json_code,
    link,
    mapping,
    table,
    text,
    view,
)

HOSTILE = '<script>alert("x")</script>'


def test_text_escapes_everything_but_markup_of_the_builder() -> None:
    """A value is escaped, quotes included; markup the builder made is kept as it is."""
    assert text(HOSTILE) == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    assert text(1.5) == "1.5"
    assert text(Html("<b>x</b>")) == "<b>x</b>"
    assert code(HOSTILE) == f"<code>{text(HOSTILE)}</code>"


def test_every_builder_escapes_a_hostile_value(parse_html) -> None:
    """In rows, lists, tables, mappings and data frames a script is text, never a tag."""
    df = pd.DataFrame({HOSTILE: [HOSTILE]}, index=pd.Index([HOSTILE], name=HOSTILE))
    markup = view(
        HOSTILE,
        [
            (HOSTILE, HOSTILE),
            ("items", items([HOSTILE])),
            ("bullets", bullets([HOSTILE])),
            ("table", table([[HOSTILE]], header=[HOSTILE])),
            ("mapping", mapping({HOSTILE: HOSTILE})),
            ("frame", frame(df)),
            ("link", link("https://example.org/", HOSTILE)),
        ],
    )
    parsed = parse_html(markup)
    assert "script" not in parsed.tags
    assert parsed.text.count("<script>") >= 8


def test_parse_html_catches_unbalanced_markup(parse_html) -> None:
    """The checker the view tests use fails on a tag closed out of order or left open."""
    with pytest.raises(AssertionError, match="closes"):
        parse_html("<div><b></div></b>")
    with pytest.raises(AssertionError, match="left open"):
        parse_html("<div><table>")


def test_lists_and_tables_show_the_first_entries_and_count_the_rest(parse_html) -> None:
    """Past LIMIT entries, lists, bullets, tables and frames say how many more there are."""
    n = LIMIT + 15
    assert items(range(n)) == ", ".join(map(str, range(LIMIT))) + ", and 15 more"
    assert items([]) == "none"
    assert parse_html(bullets(list(range(n)))).tags.count("li") == LIMIT + 1
    rows = parse_html(table([[i] for i in range(n)], header=["i"]))
    assert rows.tags.count("tr") == 1 + LIMIT + 1
    assert rows.text.endswith("and 15 more")
    assert table([], header=["i"]) == "none"
    shown = parse_html(frame(pd.DataFrame({"i": range(n)})))
    assert shown.tags.count("tr") == 1 + LIMIT
    assert shown.text.strip().endswith("and 15 more")


def test_view_leaves_out_rows_without_a_value(parse_html) -> None:
    """A row whose value is None is not shown; other rows keep their order."""
    parsed = parse_html(view("T", [("a", 1), ("b", None), ("c", 0)]))
    assert parsed.tags.count("tr") == 2
    assert parsed.text == "Ta1c0"


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("http://127.0.0.1:8787/status", True),
        ("https://dask.example.org/status?x=1&y=2", True),
        ("javascript:alert(1)", False),
        ("tcp://10.0.0.5:8786", False),
    ],
)
def test_only_http_addresses_are_linked(parse_html, url: str, *, linked: bool) -> None:
    """A dashboard link is an ``<a href>`` to its address; other schemes are shown as text."""
    parsed = parse_html(link(url))
    assert parsed.links == ([url] if linked else [])
    assert parsed.text == url


def test_json_code_is_compact_and_cut_to_its_width() -> None:
    """Mappings are shown as compact JSON, cut with an ellipsis past the width."""
    assert json_code({"a": [1, None]}) == "<code>{&quot;a&quot;: [1, null]}</code>"
    assert json_code("x" * 50, width=10) == "<code>&quot;xxxxxx...</code>"
