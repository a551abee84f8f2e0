"""R's limma-voom outputs and small pseudobulk cubes for the tests of :mod:`cytepool.de`.

``shared/limma/fixtures`` (read-only) holds the two scenarios of the brief;
``data/r`` holds more, made by ``data/make_fixtures.sh`` with the same R
script and versions, on the shared input and on ``data/unbalanced`` (made by
``data/make_input.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from cytepool import Cube

if TYPE_CHECKING:
    from collections.abc import Callable

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "limma" / "fixtures"
DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Scenario:
    """One run of ``ref_limma_voom.R``: where its input and outputs are, and how to call us."""

    name: str
    input: Path
    output: Path
    kwargs: dict[str, Any] = field(default_factory=dict)
    full: bool = False  # has E, weights, toptable_sorted and toptable_unweighted

    def counts(self) -> pd.DataFrame:
        return read_r(self.input / "counts.csv", index_col=0)

    def samples(self) -> pd.DataFrame:
        return read_r(self.input / "samples.csv", index_col=0)

    def r(self, name: str, **kwargs: Any) -> pd.DataFrame:
        """R's output ``name``.csv."""
        return read_r(self.output / f"{name}.csv", **kwargs)


SCENARIOS = {
    s.name: s
    for s in [
        Scenario(
            "libsize_donor",
            SHARED / "input",
            SHARED / "libsize_donor",
            {"design": "~ condition + donor", "coef": "conditionstim", "normalization": "none"},
            full=True,
        ),
        Scenario(
            "tmm_cond",
            SHARED / "input",
            SHARED / "tmm_cond",
            {"design": "~ condition", "normalization": "TMM"},
            full=True,
        ),
        Scenario(
            "shared_filter_tmm_donor",
            SHARED / "input",
            DATA / "r" / "shared_filter_tmm_donor",
            {"design": "~ condition + donor", "coef": 1, "filter_by_expr": True},
        ),
        Scenario(
            "shared_contrast_donor",
            SHARED / "input",
            DATA / "r" / "shared_contrast_donor",
            {"design": "~ condition + donor", "contrast": {"donorD2": 1, "donorD3": -1}},
        ),
        Scenario(
            "unbalanced_filter_tmm",
            DATA / "unbalanced",
            DATA / "r" / "unbalanced_filter_tmm",
            {"design": "~ condition", "coef": "conditionB", "filter_by_expr": True},
        ),
        Scenario(
            "unbalanced_filter_none_donor",
            DATA / "unbalanced",
            DATA / "r" / "unbalanced_filter_none_donor",
            {
                "design": "~ condition + donor",
                "coef": "conditionB",
                "normalization": "none",
                "filter_by_expr": True,
            },
        ),
        Scenario(
            "unbalanced_filter_tmm_batch",
            DATA / "unbalanced",
            DATA / "r" / "unbalanced_filter_tmm_batch",
            {"design": "~ batch", "filter_by_expr": True},
        ),
        Scenario(
            "unbalanced_contrast",
            DATA / "unbalanced",
            DATA / "r" / "unbalanced_contrast",
            {
                "design": "~ condition + donor",
                "contrast": {"conditionC": 1, "conditionB": -1},
                "filter_by_expr": True,
            },
        ),
    ]
}


def read_r(path: Path, **kwargs: Any) -> pd.DataFrame:
    """A CSV written by R, floats parsed exactly."""
    return pd.read_csv(path, float_precision="round_trip", **kwargs)


def pseudobulk_cube(
    *,
    n_groups: int = 3,
    n_donors: int = 4,
    n_features: int = 300,
    seed: int = 0,
    layers: str = "numpy",
) -> Cube:
    """A cube of ``n_groups`` cell types x (donors x ctrl/stim) samples of summed counts."""
    rng = np.random.default_rng(seed)
    samples = pd.DataFrame(
        {
            "sample": [f"D{d + 1}_{c}" for d in range(n_donors) for c in ("ctrl", "stim")],
            "donor": [f"D{d + 1}" for d in range(n_donors) for _ in range(2)],
            "condition": ["ctrl", "stim"] * n_donors,
        }
    )
    n_samples = len(samples)
    base = rng.gamma(0.5, 80.0, size=(n_groups, 1, n_features))
    effect = np.where(rng.random((n_groups, 1, n_features)) < 0.1, 3.0, 1.0)
    stim = (samples["condition"] == "stim").to_numpy()[None, :, None]
    size = rng.lognormal(0.0, 0.3, size=(n_groups, n_samples, 1))
    mean = base * np.where(stim, effect, 1.0) * size
    counts = rng.poisson(rng.gamma(5.0, mean / 5.0 + 1e-12)).astype(np.int64)
    counts_layer: Any = counts
    if layers == "dask":
        import dask.array as da  # noqa: PLC0415

        counts_layer = da.from_array(counts, chunks=(1, n_samples, 128))
    return Cube(
        samples=samples,
        groups=pd.DataFrame({"group": [f"T{g}" for g in range(n_groups)]}),
        features=pd.DataFrame({"gene": [f"G{i:04d}" for i in range(n_features)]}),
        layers={"counts": counts_layer},
        n_cells=rng.integers(30, 300, size=(n_samples, n_groups)),
        source={"tool": "tests.cytepool.de"},
    )


@pytest.fixture(scope="session", params=list(SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> Scenario:
    """Each R scenario in turn."""
    return SCENARIOS[request.param]


@pytest.fixture(scope="session", params=[n for n, s in SCENARIOS.items() if s.full])
def full_scenario(request: pytest.FixtureRequest) -> Scenario:
    """The scenarios with every output of R's run (E, weights, sorted and unweighted tables)."""
    return SCENARIOS[request.param]


@pytest.fixture(scope="session")
def make_cube() -> Callable[..., Cube]:
    """:func:`pseudobulk_cube`: ``make_cube(n_groups=..., layers="dask", ...)``."""
    return pseudobulk_cube


@pytest.fixture(scope="session")
def pb_cube() -> Cube:
    """Three groups x (4 donors x ctrl/stim) x 300 genes, numpy layers."""
    return pseudobulk_cube()
