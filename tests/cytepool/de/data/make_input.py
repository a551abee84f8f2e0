"""Write ``unbalanced/counts.csv`` and ``unbalanced/samples.csv``: the second R parity input.

24 samples in three conditions of unequal size (A: 11, B: 8, C: 5) from 8 donors,
and two batches of 12 (a design whose smallest group is above filterByExpr's
``large.n``); 600 genes of gamma-Poisson counts with many low and zero counts,
so that filterByExpr, TMM trimming, lowess ties and a three-level factor are
all exercised. Run from this folder::

    python make_input.py
"""

from pathlib import Path

import numpy as np
import pandas as pd


def main() -> None:
    """Write the two files."""
    rng = np.random.default_rng(20240611)
    n_genes = 600
    conditions = ["A"] * 11 + ["B"] * 8 + ["C"] * 5
    donors = [f"D{i % 8 + 1}" for i in range(24)]
    samples = pd.DataFrame(
        {
            "sample": [f"S{i + 1:02d}" for i in range(24)],
            "condition": conditions,
            "donor": donors,
            "batch": ["X", "Y"] * 12,
        }
    )
    base = rng.gamma(0.35, 60.0, size=n_genes)
    base[rng.random(n_genes) < 0.1] = 0.0
    effect = {"A": np.ones(n_genes), "B": np.ones(n_genes), "C": np.ones(n_genes)}
    de = rng.random(n_genes) < 0.08
    effect["B"][de] = rng.choice([0.3, 3.0], de.sum())
    de_c = rng.random(n_genes) < 0.08
    effect["C"][de_c] = rng.choice([0.5, 2.0], de_c.sum())
    size = rng.lognormal(0.0, 0.4, size=24)
    counts = np.empty((n_genes, 24), dtype=np.int64)
    for j, cond in enumerate(conditions):
        mean = base * effect[cond] * size[j]
        counts[:, j] = rng.poisson(rng.gamma(4.0, mean / 4.0 + 1e-12))
    out = Path(__file__).resolve().parent / "unbalanced"
    out.mkdir(exist_ok=True)
    frame = pd.DataFrame(
        counts, index=[f"gene{i:04d}" for i in range(n_genes)], columns=samples["sample"]
    )
    frame.index.name = "gene"
    frame.to_csv(out / "counts.csv")
    samples.to_csv(out / "samples.csv", index=False)


if __name__ == "__main__":
    main()
