"""The main job on the embedded default dataset: import, analyse, pool, test, plot.

:func:`run_demo` generates the seeded synthetic dataset (known cell types,
planted marker genes, six donors, a stimulation that raises 100 response
genes; :mod:`cytearc.datasets.synthetic`) as an H5AD file, imports it into a
store, runs the ``rna_standard`` recipe, pools the cells by sample and Leiden
cluster into a CytePool cube, tests stim against ctrl with limma-voom in
every cluster (``~ donor + condition``), and writes the figures and result
tables. Its summary says how well each step recovered the planted truth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
from sklearn.metrics import adjusted_rand_score

from cytearc.datasets.synthetic import Params, write_dataset
from cytearc.datastore import DataStore
from cytearc.errors import DestinationExistsError
from cytearc.io.detect import import_data
from cytearc.plots import save_figure
from cytepool import read_cube
from cytepool.de import limma_voom
from cytepool.plots import save_de_figures

if TYPE_CHECKING:
    from cytepool.de import LimmaResults

__all__ = ["DESIGN", "run_demo"]

DESIGN: Final = "~ donor + condition"
COEF: Final = "conditionstim"
RECIPE_OPTIONS: Final[dict[str, Any]] = {"n_top": 1500, "n_comps": 30, "resolution": 0.5}


def _de_summary(results: LimmaResults, response: set[str]) -> list[dict[str, Any]]:
    out = []
    for group, result in results.items():
        table = result.table
        significant = set(table.index[table["adj.P.Val"] < 0.05].astype(str))
        tested = response & set(table.index.astype(str))
        out.append(
            {
                "group": str(group),
                "samples": int(result.design.shape[0]),
                "genesTested": len(table),
                "significant": len(significant),
                "responseGenesTested": len(tested),
                "responseGenesFound": len(significant & tested),
                "falseDiscoveries": len(significant - response),
            }
        )
    return out


def _check_previous(out: Path, params: Params) -> None:
    """Reuse the store of an earlier demo in ``out`` only if it was made with the same parameters."""
    summary = out / "summary.json"
    recorded = json.loads(summary.read_text()).get("params") if summary.is_file() else None
    if recorded != params.to_json():
        msg = (
            f"{out}: holds a store from another or an unfinished demo (parameters {recorded}, "
            f"asked {params.to_json()}); choose a new output folder or remove {out / 'pbmc.zarr'}"
        )
        raise DestinationExistsError(msg)


def run_demo(
    out: str | Path,
    *,
    n_cells: int = 6000,
    n_genes: int = 3000,
    seed: int = 0,
    mem_budget: str | int | float | None = None,
    workers: int | None = None,
    cluster: object = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run the whole product on the embedded dataset into the folder ``out``; the summary.

    Writes ``source/`` (the generated H5AD and 10x folder), ``pbmc.zarr``
    (the store, with its analysis and run record), ``pbmc.cube.zarr`` (the
    cube), ``de/`` (one limma-voom table per cluster with its metadata),
    ``figures/`` and ``summary.json``. Run again into the same folder with the
    same parameters, it reopens the store and reuses every analysis artifact.

    Parameters
    ----------
    out
        The output folder (created if missing).
    n_cells, n_genes
        The size of the generated dataset.
    seed
        The seed of the generated dataset.
    mem_budget, workers, cluster
        The engine (see :class:`~cytearc.DataStore`); None for the default
        local cluster.
    show_progress
        Progress bars for the generation, the import and the analysis.

    Returns
    -------
    dict
        The summary, as written to ``summary.json``: the store, the run and
        its stages, the clusters and their adjusted Rand index to the cell
        types, the cube, the limma-voom results per cluster and the figures.

    Raises
    ------
    DestinationExistsError
        ``out`` holds the store of a demo with other parameters, or of one
        that did not finish.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    params = Params(n_cells=n_cells, n_genes=n_genes, seed=seed)
    engine = {"mem_budget": mem_budget, "workers": workers, "cluster": cluster}
    store = out / "pbmc.zarr"
    if store.exists():
        _check_previous(out, params)
        truth = json.loads((out / "source" / "truth.json").read_text())
    else:
        truth = write_dataset(params, out / "source", show_progress=show_progress)
        import_data(out / "source" / "data.h5ad", store, show_progress=show_progress, **engine)
    ds = DataStore(store, zarr_mode="r+", show_progress=show_progress, **engine)  # type: ignore[arg-type]
    run = ds.pipeline.run("rna_standard", **RECIPE_OPTIONS)
    figures = out / "figures"
    written = [
        *ds.plots.save_run_figures(run, figures),
        save_figure(ds.plots.umap("cell_type"), figures / "umap_cell_types.png"),
    ]
    cube_path = ds.compare.write_bulk(
        out / "pbmc.cube.zarr",
        sample_key="sample",
        group_key="RNA_leiden_cluster",
        cell_selection=run.outputs["cells"],
        overwrite=True,
    )
    cube = read_cube(cube_path)
    client = ds.engine.client
    results = limma_voom(cube, design=DESIGN, coef=COEF, client=client)
    results.save(out / "de", file_format="csv", overwrite=True)
    results.table().to_csv(out / "de" / "all_groups.csv")
    written += save_de_figures(results, figures, prefix="cluster")
    mask = run.artifact("cells").read("mask").astype(bool)
    labels = run.artifact("clustering").read("labels")
    cell_types = ds.cells.fetch_all("cell_type").astype(object)[mask]
    summary = {
        "params": params.to_json(),
        "store": str(store),
        "datasetFingerprint": ds.dataset_fingerprint,
        "run": {"runId": run.run_id, "stages": run.summary().to_dict(orient="records")},
        "cells": {"imported": len(mask), "keptByQc": int(mask.sum())},
        "clusters": int(labels.max()),
        "adjustedRandIndexToCellTypes": round(float(adjusted_rand_score(cell_types, labels)), 4),
        "cube": {
            "path": str(cube_path),
            "fingerprint": cube.fingerprint,
            "shape": list(cube.shape),
        },
        "de": {
            "design": DESIGN,
            "coef": COEF,
            "groups": _de_summary(results, set(truth["response_ids"])),
        },
        "figures": [str(p) for p in written],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def describe(summary: dict[str, Any]) -> str:
    """The summary in a few lines.

    Parameters
    ----------
    summary
        What :func:`run_demo` returns.

    Returns
    -------
    str
        The store, the clusters, the cube, a table of limma-voom results per
        cluster and where the figures are.
    """
    de = pd.DataFrame(summary["de"]["groups"])
    lines = [
        (
            f"store {summary['store']}: {summary['cells']['imported']} cells, "
            f"{summary['cells']['keptByQc']} kept by QC, {summary['clusters']} Leiden clusters "
            f"(ARI {summary['adjustedRandIndexToCellTypes']} to the planted cell types)"
        ),
        f"cube {summary['cube']['path']} {tuple(summary['cube']['shape'])}: {summary['cube']['fingerprint']}",
        f"limma-voom {summary['de']['design']}, {summary['de']['coef']}, per cluster:",
        de.to_string(index=False),
        f"{len(summary['figures'])} figures in {Path(summary['figures'][0]).parent}",
    ]
    return "\n".join(lines)
