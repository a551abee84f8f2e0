"""The notebook view of a cube: shape, fingerprint, layers, tables and provenance, computing nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dask.array as da
import numpy as np

from cytepool import Cube, read_cube, write_cube
from cytepool.testing import example_cube, raise_if_dask_computes

if TYPE_CHECKING:
    from pathlib import Path

HOSTILE = "<script>alert(1)</script>"


def test_view_of_a_written_cube_shows_its_fingerprint_and_location(
    tmp_path: Path, parse_html
) -> None:
    """A cube read back shows its recorded fingerprint, its file and its lazy layers, computing nothing."""
    cube = example_cube()
    path = write_cube(cube, tmp_path / "c.cube.zarr")
    again = read_cube(path)
    with raise_if_dask_computes():
        parsed = parse_html(again._repr_html_())
    assert cube.fingerprint in parsed.text
    assert str(path) in parsed.text
    assert "3 groups x 4 samples x 50 features" in parsed.text
    assert "lazy (Dask" in parsed.text
    assert "sample, donor" in parsed.text
    assert '"tool": "tests"' in parsed.text


def test_view_of_a_lazy_cube_computes_no_fingerprint(parse_html) -> None:
    """Before its digests are known the view says so, instead of computing them."""
    cube = example_cube(n_groups=2, n_samples=3, n_features=20)
    lazy = Cube(
        samples=cube.samples,
        groups=cube.groups,
        features=cube.features,
        layers={n: da.from_array(np.asarray(x)) for n, x in cube.layers.items()},
        n_cells=cube.n_cells,
    )
    with raise_if_dask_computes():
        parsed = parse_html(lazy._repr_html_())
    assert "not known yet" in parsed.text
    assert "sha256:" not in parsed.text
    fingerprint = lazy.fingerprint  # reading it computes the digests
    assert fingerprint in parse_html(lazy._repr_html_()).text


def test_view_escapes_labels_and_lists_operations(parse_html) -> None:
    """Hostile sample labels and source records are text; a selection shows in the operations."""
    cube = example_cube(bulk=True)
    samples = cube.samples.assign(sample=[HOSTILE, "S1", "S2", "S3"])
    hostile = Cube(
        samples=samples,
        groups=cube.groups,
        features=cube.features,
        layers=dict(cube.layers),
        source={"tool": HOSTILE},
    ).select(samples=["S1", "S2"])
    parsed = parse_html(hostile._repr_html_())
    assert "script" not in parsed.tags
    assert "bulk cube" in parsed.text
    assert HOSTILE in parsed.text
    assert "select" in parsed.text
    assert "S1, S2" in parsed.text


def test_long_tables_are_truncated(parse_html) -> None:
    """Fifty features show as the first ten and a count of the rest."""
    parsed = parse_html(example_cube()._repr_html_())
    assert "F0, F1" in parsed.text
    assert "and 40 more" in parsed.text
