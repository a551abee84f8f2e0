"""Shared fixtures and the hypothesis profiles of the test suite."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from cytepool.servers import moto_server
from cytepool.testing import example_cube

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cytepool import Cube

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=40)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.load_profile("ci")


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
