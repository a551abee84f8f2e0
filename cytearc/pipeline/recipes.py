"""Recipes: named sequences of stages, each with its options and defaults.

A stage is a function ``(ds, assay, context, options) -> outputs`` where
``context`` holds the artifacts of the earlier stages by output name and
``outputs`` maps this stage's output names to artifacts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from cytearc.errors import CyteArcError
from cytearc.ops import graph as graph_ops
from cytearc.ops import markers as marker_ops
from cytearc.ops import qc as qc_ops
from cytearc.ops._base import resolve_selection
from cytearc.ops.hvgs import hvgs
from cytearc.ops.normalize import normalize
from cytearc.ops.pca import pca
from cytearc.pipeline.snapshots import feature_universe, snapshot_table

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from cytearc.artifacts import Artifact
    from cytearc.datastore import DataStore

__all__ = ["RECIPES", "Recipe", "Stage", "recipe"]

Outputs = dict[str, "Artifact"]


@dataclass(frozen=True)
class Stage:
    """One step of a recipe: its name, function and options with their defaults."""

    name: str
    run: Callable[[DataStore, str, Mapping[str, Artifact], Mapping[str, Any]], Outputs]
    defaults: Mapping[str, Any]


@dataclass(frozen=True)
class Recipe:
    """A named sequence of stages."""

    name: str
    stages: tuple[Stage, ...]

    def config(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every option of the recipe, defaults overridden by ``options``; unknown ones raise."""
        known = {k: v for s in self.stages for k, v in s.defaults.items()}
        unknown = sorted(set(options) - set(known))
        if unknown:
            msg = f"recipe {self.name!r}: unknown options {unknown}; it takes {sorted(known)}"
            raise CyteArcError(msg)
        return {**known, **options}


def _input_snapshot(
    ds: DataStore, assay: str, _: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {
        "cells": resolve_selection(ds, options["cell_key"]).artifact,
        "feature_universe": feature_universe(ds, assay),
        "cell_metadata": snapshot_table(ds, "cells"),
        "feature_metadata": snapshot_table(ds, assay),
    }


def _qc(
    ds: DataStore, assay: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    patterns = dict(options["qc_patterns"])
    columns = [f"{assay}_{c}" for c in ("nCounts", "nFeatures", *patterns)]
    if not set(columns) <= set(ds.cells.columns) or qc_ops.percent_columns(ds, assay) != {
        f"{assay}_{k}": v for k, v in patterns.items()
    }:
        qc_ops.metrics(ds, assay, patterns=patterns)
    if not options["qc_filter"]:
        return {"cells": context["cells"]}
    return {
        "cells": qc_ops.auto_filter(
            ds,
            assay,
            nmads=options["qc_nmads"],
            sample_key=options["qc_sample_key"],
            cell_selection=context["cells"].ref,
        )
    }


def _normalize(
    ds: DataStore, assay: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {
        "normalized": normalize(
            ds, assay, cell_selection=context["cells"].ref, target_sum=options["target_sum"]
        )
    }


def _hvgs(
    ds: DataStore, _: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {"hvgs": hvgs(ds, context["normalized"], n_top=options["n_top"])}


def _pca(
    ds: DataStore, _: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {
        "pca": pca(
            ds,
            context["normalized"],
            context["hvgs"],
            n_comps=options["n_comps"],
            mode=options["pca_mode"],
            seed=options["seed"],
        )
    }


def _neighbors(
    ds: DataStore, _: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {
        "neighbors": graph_ops.neighbors(ds, context["pca"], k=options["k"], seed=options["seed"])
    }


def _leiden(
    ds: DataStore, _: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {
        "clustering": graph_ops.leiden(
            ds, context["neighbors"], resolution=options["resolution"], seed=options["seed"]
        )
    }


def _umap(
    ds: DataStore, _: str, context: Mapping[str, Artifact], options: Mapping[str, Any]
) -> Outputs:
    return {
        "umap": graph_ops.umap(
            ds, context["neighbors"], min_dist=options["min_dist"], seed=options["seed"]
        )
    }


def _markers(
    ds: DataStore, assay: str, context: Mapping[str, Artifact], _: Mapping[str, Any]
) -> Outputs:
    return {
        "markers": marker_ops.search(
            ds, assay, group_key=f"{assay}_leiden_cluster", cell_selection=context["cells"].ref
        )
    }


RNA_STANDARD: Final = Recipe(
    "rna_standard",
    (
        Stage("input_snapshot", _input_snapshot, {"cell_key": "I", "seed": 0}),
        Stage(
            "qc",
            _qc,
            {
                "qc_filter": True,
                "qc_nmads": 5.0,
                "qc_sample_key": None,
                "qc_patterns": dict(qc_ops.DEFAULT_PATTERNS),
            },
        ),
        Stage("normalize", _normalize, {"target_sum": 1e4}),
        Stage("hvgs", _hvgs, {"n_top": 2000}),
        Stage("pca", _pca, {"n_comps": 50, "pca_mode": "exact"}),
        Stage("neighbors", _neighbors, {"k": 15}),
        Stage("leiden", _leiden, {"resolution": 1.0}),
        Stage("umap", _umap, {"min_dist": 0.5}),
        Stage("markers", _markers, {}),
    ),
)

RECIPES: Final = {RNA_STANDARD.name: RNA_STANDARD}


def recipe(name: str) -> Recipe:
    """The recipe called ``name``."""
    if name not in RECIPES:
        msg = f"no recipe {name!r}; recipes are {sorted(RECIPES)}"
        raise CyteArcError(msg)
    return RECIPES[name]
