"""Write the seeded synthetic single-cell dataset as a 10x Matrix Market folder and an H5AD file.

Run from the project root::

    .venv/bin/python benchmarks/synthetic.py --cells 20000 --genes 15000 --out DIR --seed 0
    .venv/bin/python benchmarks/synthetic.py --self-check

A command line over :mod:`cytearc.datasets.synthetic`, where the model and the
layout of the folder ``--out`` are described. :func:`write_dataset`,
:class:`Params` and :func:`is_complete` are what ``bench_import.py`` uses.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cytearc.datasets import synthetic
from cytearc.datasets.synthetic import CONDITIONS, MITO_NAMES, Params, is_complete

__all__ = ["Params", "is_complete", "main", "self_check", "write_dataset"]


def write_dataset(params: Params, out: Path, *, verbose: bool = True) -> dict[str, Any]:
    """Generate the dataset into ``out``, with a progress bar when ``verbose``; returns the truth record."""
    return synthetic.write_dataset(params, out, show_progress=verbose)


# -- self-check -----------------------------------------------------------------


def _check_planted(x: Any, obs: Any, var: Any, truth: dict[str, Any]) -> None:  # noqa: ANN401
    """Each type's markers are higher in that type than elsewhere; counts are overdispersed."""
    import scipy.sparse as sp  # noqa: PLC0415

    library = np.asarray(x.sum(axis=1)).ravel()
    normalized = sp.diags(1e4 / np.maximum(library, 1)) @ x
    codes = obs["cell_type"].cat.codes.to_numpy()
    for t, name in enumerate(obs["cell_type"].cat.categories):
        genes = truth["markers"][name]
        assert var["gene_symbols"].iloc[genes].tolist() == truth["marker_names"][name], name
        inside = np.asarray(normalized[codes == t][:, genes].mean(axis=0)).ravel()
        outside = np.asarray(normalized[codes != t][:, genes].mean(axis=0)).ravel()
        assert np.median(inside / np.maximum(outside, 1e-9)) > 3, f"markers of {name}"
    # overdispersion: variance above the mean for expressed genes of one type
    dense = x[codes == 0].toarray().astype(np.float64)
    mean, variance = dense.mean(axis=0), dense.var(axis=0)
    expressed = mean > 1
    assert np.median(variance[expressed] / mean[expressed]) > 1.2
    # mitochondrial genes: named, not markers, a few percent of each cell's counts
    mito = np.flatnonzero(var["gene_symbols"].str.startswith("MT-").to_numpy())
    assert len(mito) == len(MITO_NAMES)
    assert not set(mito.tolist()) & {g for genes in truth["markers"].values() for g in genes}
    percent = 100 * np.median(np.asarray(x[:, mito].sum(axis=1)).ravel() / np.maximum(library, 1))
    assert 1 < percent < 10, f"median percent mito {percent:.2f}"


def self_check(n_cells: int = 3000, n_genes: int = 2000, *, seed: int = 0) -> None:
    """Generate a small dataset and check it with scipy and anndata; raise AssertionError if wrong."""
    import anndata  # noqa: PLC0415 (only the check needs it)
    import pandas as pd  # noqa: PLC0415
    import scipy.io  # noqa: PLC0415
    import scipy.sparse as sp  # noqa: PLC0415

    params = Params(n_cells=n_cells, n_genes=n_genes, seed=seed)
    with tempfile.TemporaryDirectory(prefix="cytearc-synthetic-") as d:
        out = Path(d)
        truth = write_dataset(params, out, verbose=False)
        assert is_complete(out, params)
        adata = anndata.read_h5ad(out / "data.h5ad", backed="r")
        try:
            assert adata.shape == (n_cells, n_genes), adata.shape
            x = sp.csr_matrix(adata.X[:])
            obs = adata.obs.copy()
            var = adata.var.copy()
        finally:
            adata.file.close()
        assert x.dtype == np.int32, x.dtype
        assert x.has_canonical_format
        mtx = sp.csr_matrix(scipy.io.mmread(out / "mtx" / "matrix.mtx").T)
        assert mtx.shape == x.shape
        assert (mtx != x).nnz == 0, "MTX and H5AD counts differ"
        assert x.nnz == truth["n_values"]
        assert x.data.min() >= 1
        fraction = x.nnz / (n_cells * n_genes)
        assert abs(fraction - params.nonzero) < 0.01, f"non-zero fraction {fraction:.4f}"
        barcodes = pd.read_csv(out / "mtx" / "barcodes.tsv.gz", header=None, sep="\t")[0]
        features = pd.read_csv(out / "mtx" / "features.tsv.gz", header=None, sep="\t")
        assert barcodes.tolist() == obs.index.tolist()
        assert barcodes.is_unique
        assert features[0].tolist() == var.index.tolist()
        assert features[1].tolist() == var["gene_symbols"].tolist()
        assert set(features[2]) == {"Gene Expression"}
        for column in ("cell_type", "donor", "condition"):
            assert isinstance(obs[column].dtype, pd.CategoricalDtype), column
        assert obs["cell_type"].nunique() == params.n_types
        assert obs["donor"].nunique() == params.n_donors
        assert set(obs["condition"]) == set(CONDITIONS)
        _check_planted(x, obs, var, truth)
        # determinism: a second generation is byte-identical
        again = out / "again"
        write_dataset(params, again, verbose=False)
        assert (again / "mtx" / "matrix.mtx").read_bytes() == (
            out / "mtx" / "matrix.mtx"
        ).read_bytes()
    print(
        f"self-check passed: {n_cells} x {n_genes}, {fraction:.2%} non-zero, "
        f"{params.n_types} types with planted markers, MTX == H5AD, deterministic"
    )


# -- main -----------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--genes", type=int, default=15_000)
    parser.add_argument("--out", type=Path, help="output folder (created)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--types", type=int, default=8)
    parser.add_argument("--markers", type=int, default=20, help="marker genes per type")
    parser.add_argument("--donors", type=int, default=6)
    parser.add_argument("--nonzero", type=float, default=0.07, help="target non-zero fraction")
    parser.add_argument(
        "--self-check", action="store_true", help="generate a small dataset and check it"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.self_check:
        self_check(seed=args.seed)
        return 0
    if args.out is None:
        print("--out is required (or --self-check)", file=sys.stderr)
        return 2
    params = Params(
        n_cells=args.cells,
        n_genes=args.genes,
        seed=args.seed,
        n_types=args.types,
        n_markers=args.markers,
        n_donors=args.donors,
        nonzero=args.nonzero,
    )
    start = time.perf_counter()
    truth = write_dataset(params, args.out)
    print(
        f"{args.out}: {params.n_cells:,} cells x {params.n_genes:,} genes, "
        f"{truth['n_values']:,} non-zero ({truth['nonzero_fraction']:.2%}), "
        f"written in {time.perf_counter() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
