"""Recipes are data: a user's recipe of existing operations runs and is recorded like a built-in one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cytearc import DataStore, ops
from cytearc.datasets import write_store
from cytearc.errors import OperationArgumentError, RecipeError
from cytearc.pipeline.recipes import (
    ASSAY,
    INPUT_SNAPSHOT,
    RNA_STANDARD,
    AssayName,
    Option,
    Output,
    Recipe,
    Stage,
)

if TYPE_CHECKING:
    from pathlib import Path


def _clusters_recipe() -> Recipe:
    return Recipe(
        name="rna_clusters",
        stages=(
            INPUT_SNAPSHOT,
            Stage(
                name="normalize",
                operation=ops.normalize,
                outputs=("normalized",),
                arguments={"assay": ASSAY, "cell_selection": Output("cells")},
            ),
            Stage(
                name="hvgs",
                operation=ops.hvgs,
                outputs=("hvgs",),
                arguments={
                    "normalized": Output("normalized"),
                    "n_top": Option("n_top", 200),
                    "flavor": "log",
                },
            ),
            Stage(
                name="pca",
                operation=ops.pca,
                outputs=("pca",),
                arguments={
                    "normalized": Output("normalized"),
                    "hvgs": Output("hvgs"),
                    "n_comps": Option("n_comps", 10),
                },
            ),
            Stage(
                name="neighbors",
                operation=ops.neighbors,
                outputs=("neighbors",),
                arguments={"pca": Output("pca")},
            ),
            Stage(
                name="leiden",
                operation=ops.leiden,
                outputs=("clustering",),
                arguments={
                    "graph": Output("neighbors"),
                    "label": AssayName("{assay}_my_clusters"),
                },
            ),
        ),
    )


@pytest.mark.slow
def test_user_recipe_runs_and_is_recorded(tmp_path: Path) -> None:
    """A recipe of existing operations runs, records its name, stages and options, and reuses on a rerun."""
    path = write_store(tmp_path / "ds.zarr", n_cells=800, n_genes=600, cluster="threads")
    ds = DataStore(path, zarr_mode="r+", cluster="threads", show_progress=False)
    mine = _clusters_recipe()
    run = ds.pipeline.run(mine, n_top=150)
    assert run.record.recipe == "rna_clusters"
    assert run.record.stage_order == (
        "input_snapshot", "normalize", "hvgs", "pca", "neighbors", "leiden",
    )  # fmt: skip
    assert run.record.config == {"cell_key": "I", "n_top": 150, "n_comps": 10}
    assert set(run.outputs) == {
        "cells", "feature_universe", "cell_metadata", "feature_metadata",
        "normalized", "hvgs", "pca", "neighbors", "clustering",
    }  # fmt: skip
    assert "RNA_my_clusters" in ds.cells.columns
    assert ds.load_artifact(run.outputs["hvgs"]).provenance["parameters"]["nTop"] == 150
    again = ds.pipeline.run(mine, n_top=150)
    assert again.outputs == run.outputs
    summary = again.summary()
    assert summary["created"].sum() == 0


def test_unknown_option_of_a_user_recipe_is_refused() -> None:
    """An option the recipe does not read is refused, naming those it takes."""
    with pytest.raises(
        RecipeError, match=r"unknown options \['k'\]; it takes \['cell_key', 'n_comps', 'n_top'\]"
    ):
        _clusters_recipe().config({"k": 10})


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ((), "the first stage must be INPUT_SNAPSHOT"),
        (
            (
                INPUT_SNAPSHOT,
                Stage(name="pca", operation=ops.pca, outputs=("pca",),
                      arguments={"normalized": Output("normalized"), "hvgs": Output("hvgs")}),
            ),
            "reads output 'normalized', which no earlier stage makes",
        ),
        ((INPUT_SNAPSHOT, INPUT_SNAPSHOT), "stage names must be unique"),
        (
            (
                INPUT_SNAPSHOT,
                Stage(name="a", operation=ops.normalize, outputs=("n",),
                      arguments={"target_sum": Option("target_sum", 1e4)}),
                Stage(name="b", operation=ops.normalize, outputs=("m",),
                      arguments={"target_sum": Option("target_sum", 1e6)}),
            ),
            "option 'target_sum' has two defaults",
        ),
    ],
)  # fmt: skip
def test_malformed_recipes_are_refused_when_made(stages: tuple[Stage, ...], message: str) -> None:
    """Recipes are validated when constructed, before any run."""
    with pytest.raises(RecipeError, match=message):
        Recipe(name="bad", stages=stages)


def test_standard_recipe_options_are_the_recorded_ones() -> None:
    """The data form of rna_standard takes exactly the options runs have always recorded."""
    assert RNA_STANDARD.config({}) == {
        "cell_key": "I", "qc_patterns": {"percentMito": "^MT-", "percentRibo": "^RP[SL]"},
        "qc_filter": True, "qc_nmads": 5.0, "qc_sample_key": None, "qc_bounds": None,
        "target_sum": 1e4, "n_top": 2000, "min_cells": 3, "hvg_flavor": "seurat",
        "n_comps": 50, "max_value": 10.0, "pca_mode": "exact", "seed": 0, "k": 15,
        "knn_search": None,
        "resolution": 1.0, "leiden_iterations": 2, "leiden_flavor": "igraph", "min_dist": 0.5,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"qc_bounds": [200, None]}, r"qc_bounds: bounds must map metric columns"),
        ({"qc_bounds": {"RNA_nFeatures": (300, 200)}}, r"has low 300.0 above high 200.0"),
        ({"min_cells": -1}, r"min_cells"),
        ({"hvg_flavor": "cell_ranger"}, r"hvg_flavor"),
        ({"leiden_iterations": -2}, r"leiden_iterations"),
        ({"leiden_flavor": "louvain"}, r"leiden_flavor"),
        ({"knn_search": "kd_tree"}, r"knn_search"),
    ],
)  # fmt: skip
def test_standard_recipe_refuses_malformed_options(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(OperationArgumentError, match=message):
        RNA_STANDARD.config(options)


def test_standard_recipe_records_qc_bounds_as_lists() -> None:
    config = RNA_STANDARD.config({"qc_bounds": {"RNA_percentMito": (None, 20)}})
    assert config["qc_bounds"] == {"RNA_percentMito": [None, 20.0]}
