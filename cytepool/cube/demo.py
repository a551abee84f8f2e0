"""A small, seeded pseudobulk cube for examples, the README's main job and tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cytepool.cube.cube import Cube

__all__ = ["demo_cube"]

_GROUPS = ("CD4 T", "CD8 T", "B", "NK")


def demo_cube(*, n_features: int = 2000, n_donors: int = 3, seed: int = 0) -> Cube:
    """A cube of 4 cell types x (donors x ctrl/stim) samples x ``n_features`` genes.

    Cells are simulated per (group, sample) with gamma-Poisson counts around
    group-specific gene means, and pooled into ``counts``, ``detected``,
    ``linear_sum``, ``log_sum`` and ``log_sum_sq`` of library-size normalized
    values (target sum 10,000), as an exporter would.

    Parameters
    ----------
    n_features
        The genes.
    n_donors
        The donors; each has a ``ctrl`` and a ``stim`` sample.
    seed
        Seed of the generator.

    Returns
    -------
    Cube
        The cube, with ``n_cells`` and a ``normalization`` record.

    Examples
    --------
    >>> cube = demo_cube(n_features=50)
    >>> cube.shape
    (4, 6, 50)
    >>> sorted(cube.layers)
    ['counts', 'detected', 'linear_sum', 'log_sum', 'log_sum_sq']
    """
    rng = np.random.default_rng(seed)
    samples = pd.DataFrame(
        {
            "sample": [f"D{d + 1}-{c}" for d in range(n_donors) for c in ("ctrl", "stim")],
            "donor": [f"D{d + 1}" for d in range(n_donors) for _ in range(2)],
            "condition": ["ctrl", "stim"] * n_donors,
        }
    )
    n_samples, n_groups = len(samples), len(_GROUPS)
    base = rng.gamma(0.6, 0.5, size=n_features)
    group_means = base * rng.lognormal(0.0, 0.7, size=(n_groups, n_features))
    stim_effect = np.where(rng.random(n_features) < 0.05, rng.choice([0.25, 4.0], n_features), 1.0)
    n_cells = rng.integers(20, 200, size=(n_samples, n_groups))
    shape = (n_groups, n_samples, n_features)
    layers = {
        name: np.zeros(shape, dtype=np.float64) for name in ("linear_sum", "log_sum", "log_sum_sq")
    }
    counts = np.zeros(shape, dtype=np.int64)
    detected = np.zeros(shape, dtype=np.int64)
    for g in range(n_groups):
        for s in range(n_samples):
            mean = group_means[g] * (stim_effect if samples["condition"][s] == "stim" else 1.0)
            size = rng.lognormal(0.0, 0.3, size=(n_cells[s, g], 1))
            cells = rng.poisson(rng.gamma(2.0, mean * size / 2.0))
            counts[g, s] = cells.sum(axis=0)
            detected[g, s] = (cells > 0).sum(axis=0)
            norm = cells / np.maximum(cells.sum(axis=1, keepdims=True), 1) * 1e4
            logs = np.log1p(norm)
            layers["linear_sum"][g, s] = norm.sum(axis=0)
            layers["log_sum"][g, s] = logs.sum(axis=0)
            layers["log_sum_sq"][g, s] = (logs**2).sum(axis=0)
    return Cube(
        samples=samples,
        groups=pd.DataFrame({"group": list(_GROUPS), "n_cells": n_cells.sum(axis=0)}),
        features=pd.DataFrame(
            {
                "feature_id": [f"ENSG{i:011d}" for i in range(n_features)],
                "feature_name": [f"GENE{i}" for i in range(n_features)],
            }
        ),
        layers={"counts": counts, "detected": detected, **layers},
        n_cells=n_cells,
        normalization={"method": "library_size", "target_sum": 10000, "log": "log1p"},
        source={
            "tool": "cytepool.demo",
            "seed": seed,
            "note": "simulated cells pooled per group and sample",
        },
    )
