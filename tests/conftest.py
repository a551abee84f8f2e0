"""Shared fixtures and the hypothesis profiles of the test suite."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from cytepool.servers import moto_server
from cytepool.testing import example_cube

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from cytepool import Cube

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=40)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.load_profile("ci")

LONGEST_FIRST = (
    "tests/test_docs.py",
    "tests/cytearc/tools/test_merge.py",
    "tests/cytearc/test_memory_bound.py",
    "tests/cytearc/storage/test_object_stores.py",
    "tests/cytearc/test_main_job_on_s3.py",
    "tests/cytearc/io/test_export.py",
    "tests/harness/test_kill_points.py",
    "tests/cytearc/io/test_remote_sources.py",
    "tests/test_notebooks.py",
    "tests/cytearc/engine/test_worker_loss.py",
    "tests/deploy/test_simulated_cluster.py",
)
"""Files that take a minute or more on 2 cores: started first, so that ``--dist loadfile``
does not leave one worker running a long file alone at the end."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the longest files first (a stable sort: the order within a file is kept)."""
    del config
    root = str(Path(__file__).parent.parent)

    def rank(item: pytest.Item) -> int:
        path = str(item.path).removeprefix(root).lstrip("/")
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)


@pytest.fixture
def cube() -> Cube:
    return example_cube()


@pytest.fixture(scope="session")
def s3_options() -> Iterator[dict[str, Any]]:
    """A moto S3 server on 127.0.0.1 for the session; the storage options of s3fs."""
    with moto_server() as options:
        yield options


@pytest.fixture
def s3_bucket(s3_options: dict[str, Any]) -> str:
    """A new, empty bucket on the session's S3 server, as ``s3://NAME``."""
    import s3fs  # noqa: PLC0415 (only tests on S3 load it)

    name = f"t-{uuid.uuid4().hex[:16]}"
    s3fs.S3FileSystem(**s3_options, skip_instance_cache=True).mkdir(name)
    return f"s3://{name}"


@dataclass
class ParsedHtml:
    """What a notebook view holds: its tags in order, its link targets and its text, unescaped."""

    tags: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    text: str = ""


class _BalancedHtml(HTMLParser):
    """Parses markup, failing on a tag closed out of order, left open, or written ``<tag/>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parsed = ParsedHtml()
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open.append(tag)
        self.parsed.tags.append(tag)
        if tag == "a":
            self.parsed.links.append(dict(attrs)["href"] or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        msg = f"self-closing <{tag}/> in a view"
        raise AssertionError(msg)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            msg = f"</{tag}> closes {self.open[-1] if self.open else 'nothing'}"
            raise AssertionError(msg)
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.parsed.text += data


def parse_balanced_html(markup: str) -> ParsedHtml:
    """Parse a view, asserting that every tag is closed in order."""
    parser = _BalancedHtml()
    parser.feed(markup)
    parser.close()
    assert not parser.open, f"tags left open: {parser.open}"
    return parser.parsed


@pytest.fixture(name="parse_html", scope="session")
def parse_html_fixture() -> Callable[[str], ParsedHtml]:
    """:func:`parse_balanced_html`, for the tests of notebook views (which cannot import this file)."""
    return parse_balanced_html
