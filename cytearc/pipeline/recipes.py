"""Recipes as data: stages that name an operation, its inputs from earlier stages and its options.

A :class:`Stage` calls one operation of :mod:`cytearc.ops` (any function
taking the store first) with arguments built from :class:`Output` (an artifact
of an earlier stage), :class:`Option` (a setting of the recipe, with its
default, that ``pipeline.run(..., name=value)`` overrides), :data:`ASSAY`
(the run's assay), :class:`AssayName` (a name made from it) or a constant.
The operation returns one artifact, named by the stage's only output, or a
mapping of its outputs. The first stage of every recipe is
:data:`INPUT_SNAPSHOT`, whose artifacts back a run's frozen views.

Examples
--------
A recipe of one's own from the existing operations: QC without the outlier
filter, then normalization, HVGs, PCA, the graph and Leiden, no UMAP.

>>> from cytearc import ops
>>> mine = Recipe(
...     name="rna_clusters",
...     stages=(
...         INPUT_SNAPSHOT,
...         Stage(
...             name="normalize",
...             operation=ops.normalize,
...             outputs=("normalized",),
...             arguments={"assay": ASSAY, "cell_selection": Output("cells"),
...                        "target_sum": Option("target_sum", 1e4)},
...         ),
...         Stage(name="hvgs", operation=ops.hvgs, outputs=("hvgs",),
...               arguments={"normalized": Output("normalized"), "n_top": Option("n_top", 500)}),
...         Stage(name="pca", operation=ops.pca, outputs=("pca",),
...               arguments={"normalized": Output("normalized"), "hvgs": Output("hvgs"),
...                          "n_comps": Option("n_comps", 20)}),
...         Stage(name="neighbors", operation=ops.neighbors, outputs=("neighbors",),
...               arguments={"pca": Output("pca"), "k": Option("k", 15)}),
...         Stage(name="leiden", operation=ops.leiden, outputs=("clustering",),
...               arguments={"graph": Output("neighbors"), "resolution": Option("resolution", 1.0)}),
...     ),
... )
>>> sorted(mine.config({"n_top": 1000}).items())
[('cell_key', 'I'), ('k', 15), ('n_comps', 20), ('n_top', 1000), ('resolution', 1.0), ('target_sum', 10000.0)]

``ds.pipeline.run(mine, label="clusters")`` runs and records it like a
built-in recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from cytearc.artifacts import Artifact
from cytearc.errors import OperationArgumentError, RecipeError
from cytearc.ops import qc
from cytearc.ops.arguments import (
    parse_bool,
    parse_choice,
    parse_float,
    parse_int,
    parse_patterns,
    parse_seed,
)
from cytearc.ops.clustering import LEIDEN_FLAVORS, leiden
from cytearc.ops.embedding import umap
from cytearc.ops.hvgs import hvgs
from cytearc.ops.lsi import lsi, prevalent_peaks
from cytearc.ops.markers import search
from cytearc.ops.neighbors import SEARCHES, neighbors
from cytearc.ops.normalize import normalize
from cytearc.ops.pca import pca
from cytearc.ops.wnn import modalities
from cytearc.pipeline.snapshots import input_snapshot

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cytearc.artifacts import ArtifactRef
    from cytearc.storage.store import AnalysisStore

__all__ = [
    "ADT_STANDARD",
    "ASSAY",
    "ATAC_STANDARD",
    "CITESEQ_WNN",
    "INPUT_SNAPSHOT",
    "RECIPES",
    "RNA_STANDARD",
    "AssayName",
    "Option",
    "Output",
    "Recipe",
    "Stage",
    "recipe",
]


@dataclass(frozen=True)
class Output:
    """An artifact of an earlier stage, by output name (passed to the operation as its ref).

    Parameters
    ----------
    name
        The output's name (``normalized``, ``pca``, ...).
    """

    name: str


Check = Callable[..., object]
"""Checks an option's value: called as ``check(value, name=..., operation=...)``,
returns the value to run with or raises :class:`~cytearc.errors.OperationArgumentError`
(the parsers of :mod:`cytearc.ops.arguments` are checks)."""


@dataclass(frozen=True)
class Option:
    """A setting of the recipe: ``pipeline.run(..., <name>=value)`` overrides ``default``.

    Parameters
    ----------
    name
        The option's name.
    default
        Its value when the run does not set it.
    check
        Checks a value the run gives before the first stage runs, such as
        ``partial(parse_float, positive=True)``; None accepts any value (the
        operation checks it when its stage runs).
    """

    name: str
    default: Any
    check: Check | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AssayName:
    """A name made from the run's assay, such as ``AssayName("{assay}_leiden_cluster")``.

    Parameters
    ----------
    template
        The name, with ``{assay}`` where the assay's name goes.
    """

    template: str


@dataclass(frozen=True)
class _RunAssay:
    def __repr__(self) -> str:
        return "ASSAY"


ASSAY: Final = _RunAssay()
"""The run's assay, as an argument."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One step of a recipe: an operation and where each of its arguments comes from.

    Parameters
    ----------
    name
        The stage's name in the run record.
    operation
        A function taking the store first, returning an :class:`Artifact` or a
        mapping of output names to artifacts.
    outputs
        The names its artifacts take in the run (and for later stages).
    arguments
        The operation's keyword arguments: :class:`Output`, :class:`Option`,
        :data:`ASSAY`, :class:`AssayName` or a constant.
    """

    name: str
    operation: Callable[..., Artifact | Mapping[str, Artifact]]
    outputs: tuple[str, ...]
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """The recipe options this stage reads, with their defaults.

        Returns
        -------
        dict
            Option name to default.
        """
        return {a.name: a.default for a in self.arguments.values() if isinstance(a, Option)}

    def run(
        self,
        ds: AnalysisStore,
        *,
        assay: str,
        context: Mapping[str, Artifact],
        config: Mapping[str, Any],
    ) -> dict[str, Artifact]:
        """Call the operation with its arguments resolved; returns its outputs by name.

        Parameters
        ----------
        ds
            The store.
        assay
            The run's assay.
        context
            The artifacts of the earlier stages by output name.
        config
            The run's options.

        Returns
        -------
        dict of str to Artifact
            This stage's outputs.

        Raises
        ------
        RecipeError
            The operation returned other outputs than the stage names.
        """
        kwargs = {key: _resolve(v, assay, context, config) for key, v in self.arguments.items()}
        result = self.operation(ds, **kwargs)
        outputs = {self.outputs[0]: result} if isinstance(result, Artifact) else dict(result)
        if tuple(sorted(outputs)) != tuple(sorted(self.outputs)):
            msg = f"stage {self.name!r}: {self.operation.__name__} returned outputs {sorted(outputs)}, the stage names {sorted(self.outputs)}; fix the stage's outputs"
            raise RecipeError(msg)
        return outputs


def _resolve(
    value: object, assay: str, context: Mapping[str, Artifact], config: Mapping[str, Any]
) -> object:
    if isinstance(value, Output):
        return context[value.name].ref
    if isinstance(value, Option):
        return config[value.name]
    if isinstance(value, AssayName):
        return value.template.format(assay=assay)
    if value is ASSAY:
        return assay
    return value


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A named sequence of stages, validated when it is made.

    Parameters
    ----------
    name
        Recorded as the run's ``recipe``.
    stages
        The stages in order; the first is :data:`INPUT_SNAPSHOT`.

    Raises
    ------
    RecipeError
        Stage names repeat, an :class:`Output` names no earlier output, one
        option has two defaults, or the first stage is not the input snapshot.
    """

    name: str
    stages: tuple[Stage, ...]

    def __post_init__(self) -> None:
        where = f"recipe {self.name!r}"
        if not self.stages or self.stages[0] != INPUT_SNAPSHOT:
            msg = f"{where}: the first stage must be INPUT_SNAPSHOT (runs freeze their inputs there), found {[s.name for s in self.stages[:1]]}"
            raise RecipeError(msg)
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            msg = f"{where}: stage names must be unique, found {names}"
            raise RecipeError(msg)
        available: set[str] = set()
        defaults: dict[str, Any] = {}
        for stage in self.stages:
            for key, value in stage.arguments.items():
                if isinstance(value, Output) and value.name not in available:
                    msg = f"{where}: stage {stage.name!r} argument {key!r} reads output {value.name!r}, which no earlier stage makes (earlier outputs: {sorted(available)})"
                    raise RecipeError(msg)
                if isinstance(value, Option):
                    if value.name in defaults and defaults[value.name] != value.default:
                        msg = f"{where}: option {value.name!r} has two defaults, {defaults[value.name]!r} and {value.default!r}; give every use the same default"
                        raise RecipeError(msg)
                    defaults[value.name] = value.default
            available |= set(stage.outputs)

    def config(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every option of the recipe, defaults overridden by ``options``.

        Parameters
        ----------
        options
            The options a run gives.

        Returns
        -------
        dict
            The run's configuration.

        Raises
        ------
        RecipeError
            An option the recipe does not take.
        OperationArgumentError
            An option's value fails its check, e.g. "pipeline.run: resolution
            must be a finite number > 0, found -1".
        """
        known = {k: v for s in self.stages for k, v in s.options().items()}
        unknown = sorted(set(options) - set(known))
        if unknown:
            msg = f"recipe {self.name!r}: unknown options {unknown}; it takes {sorted(known)}"
            raise RecipeError(msg)
        checks = {
            a.name: a.check
            for s in self.stages
            for a in s.arguments.values()
            if isinstance(a, Option) and a.check is not None
        }
        config = {**known, **options}
        for name, value in options.items():
            if name in checks:
                config[name] = checks[name](value, name=name, operation="pipeline.run")
        return config


def _column_name(value: object, *, name: str, operation: str, optional: bool = False) -> object:
    if (value is None and optional) or (isinstance(value, str) and value):
        return value
    expected = "a cell column's name" + (" or None" if optional else "")
    msg = f"{operation}: {name} must be {expected}, found {value!r}"
    raise OperationArgumentError(msg)


def _patterns(value: object, *, name: str, operation: str) -> object:
    del name
    return parse_patterns(value, operation=operation)


def _max_value(value: object, *, name: str, operation: str) -> object:
    return (
        None if value is None else parse_float(value, name=name, operation=operation, positive=True)
    )


def _bounds(value: object, *, name: str, operation: str) -> object:
    if value is None:
        return None
    parsed = qc.parse_bounds(value, operation=f"{operation}: {name}")
    return {column: list(pair) for column, pair in sorted(parsed.items())}


def _hvg_flavor(value: object, *, name: str, operation: str) -> object:
    return parse_choice(value, ("seurat", "log"), name=name, operation=operation)


def _pca_mode(value: object, *, name: str, operation: str) -> object:
    return parse_choice(value, ("exact", "randomized"), name=name, operation=operation)


def _leiden_flavor(value: object, *, name: str, operation: str) -> object:
    return parse_choice(value, LEIDEN_FLAVORS, name=name, operation=operation)


def _knn_search(value: object, *, name: str, operation: str) -> object:
    if value is None:
        return None
    return parse_choice(value, SEARCHES, name=name, operation=operation)


def _optional_count(value: object, *, name: str, operation: str) -> object:
    return None if value is None else parse_int(value, name=name, operation=operation, minimum=1)


def _wnn(
    ds: AnalysisStore,
    *,
    assay: str,
    adt_assay: str,
    rna: ArtifactRef,
    adt: ArtifactRef,
    k: int,
    rna_comps: int,
    adt_comps: int,
    seed: int,
) -> Artifact:
    """``integration.modalities`` of the run's assay and its antibody panel (the WNN stage)."""
    return modalities(
        ds,
        [assay, adt_assay],
        embeddings=[rna, adt],
        n_comps=[rna_comps, adt_comps],
        k=k,
        seed=seed,
    )


INPUT_SNAPSHOT: Final = Stage(
    name="input_snapshot",
    operation=input_snapshot,
    outputs=("cells", "feature_universe", "cell_metadata", "feature_metadata"),
    arguments={"assay": ASSAY, "cell_key": Option("cell_key", "I", check=_column_name)},
)
"""The first stage of every recipe: the run's cells, feature universe and tables, frozen."""

_SEED: Final = Option("seed", 0, check=parse_seed)


def _analysis_stages(
    *, embedding: str, markers: bool, n_comps: Option | None = None
) -> tuple[Stage, ...]:
    """Neighbors of ``embedding`` (its first ``n_comps``), Leiden, UMAP (and markers)."""
    arguments: dict[str, Any] = {
        "pca": Output(embedding),
        "k": Option("k", 15, check=partial(parse_int, minimum=2)),
        "seed": _SEED,
        "search": Option("knn_search", None, check=_knn_search),
    }
    if n_comps is not None:
        arguments["n_comps"] = n_comps
    return (
        Stage(name="neighbors", operation=neighbors, outputs=("neighbors",), arguments=arguments),
        *_cluster_and_layout(graph="neighbors", markers=markers),
    )


def _cluster_and_layout(*, graph: str, markers: bool) -> tuple[Stage, ...]:
    stages = [
        Stage(
            name="leiden",
            operation=leiden,
            outputs=("clustering",),
            arguments={
                "graph": Output(graph),
                "resolution": Option("resolution", 1.0, check=partial(parse_float, positive=True)),
                "n_iterations": Option(
                    "leiden_iterations", 2, check=partial(parse_int, minimum=-1)
                ),
                "flavor": Option("leiden_flavor", "igraph", check=_leiden_flavor),
                "seed": _SEED,
            },
        ),
        Stage(
            name="umap",
            operation=umap,
            outputs=("umap",),
            arguments={
                "graph": Output(graph),
                "min_dist": Option(
                    "min_dist", 0.5, check=partial(parse_float, non_negative=True, maximum=1.0)
                ),
                "seed": _SEED,
            },
        ),
    ]
    if markers:
        stages.append(
            Stage(
                name="markers",
                operation=search,
                outputs=("markers",),
                arguments={
                    "assay": ASSAY,
                    "group_key": AssayName("{assay}_leiden_cluster"),
                    "cell_selection": Output("cells"),
                },
            )
        )
    return tuple(stages)


def _qc(*, patterns: Mapping[str, str], filter_outliers: bool) -> Stage:
    return Stage(
        name="qc",
        operation=qc.metrics_and_filter,
        outputs=("cells",),
        arguments={
            "assay": ASSAY,
            "patterns": Option("qc_patterns", dict(patterns), check=_patterns),
            "filter_outliers": Option("qc_filter", default=filter_outliers, check=parse_bool),
            "nmads": Option("qc_nmads", 5.0, check=partial(parse_float, positive=True)),
            "sample_key": Option("qc_sample_key", None, check=partial(_column_name, optional=True)),
            "bounds": Option("qc_bounds", None, check=_bounds),
            "cell_selection": Output("cells"),
        },
    )


RNA_STANDARD: Final = Recipe(
    name="rna_standard",
    stages=(
        INPUT_SNAPSHOT,
        _qc(patterns=qc.DEFAULT_PATTERNS, filter_outliers=True),
        Stage(
            name="normalize",
            operation=normalize,
            outputs=("normalized",),
            arguments={
                "assay": ASSAY,
                "cell_selection": Output("cells"),
                "target_sum": Option("target_sum", 1e4, check=partial(parse_float, positive=True)),
            },
        ),
        Stage(
            name="hvgs",
            operation=hvgs,
            outputs=("hvgs",),
            arguments={
                "normalized": Output("normalized"),
                "n_top": Option("n_top", 2000, check=partial(parse_int, minimum=1)),
                "min_cells": Option("min_cells", 3, check=partial(parse_int, minimum=0)),
                "flavor": Option("hvg_flavor", "seurat", check=_hvg_flavor),
            },
        ),
        Stage(
            name="pca",
            operation=pca,
            outputs=("pca",),
            arguments={
                "normalized": Output("normalized"),
                "hvgs": Output("hvgs"),
                "n_comps": Option("n_comps", 50, check=partial(parse_int, minimum=1)),
                "max_value": Option("max_value", 10.0, check=_max_value),
                "mode": Option("pca_mode", "exact", check=_pca_mode),
                "seed": _SEED,
            },
        ),
        *_analysis_stages(embedding="pca", markers=True),
    ),
)
"""QC to markers: the standard scRNA-seq analysis."""

ADT_STANDARD: Final = Recipe(
    name="adt_standard",
    stages=(
        INPUT_SNAPSHOT,
        _qc(patterns={}, filter_outliers=False),
        Stage(
            name="normalize",
            operation=normalize,
            outputs=("normalized",),
            arguments={"assay": ASSAY, "cell_selection": Output("cells")},
        ),
        Stage(
            name="hvgs",
            operation=hvgs,
            outputs=("hvgs",),
            arguments={
                "normalized": Output("normalized"),
                "n_top": Option("n_top", 2000, check=partial(parse_int, minimum=1)),
                "min_cells": Option("min_cells", 3, check=partial(parse_int, minimum=0)),
            },
        ),
        Stage(
            name="pca",
            operation=pca,
            outputs=("pca",),
            arguments={
                "normalized": Output("normalized"),
                "hvgs": Output("hvgs"),
                "n_comps": Option("n_comps", 18, check=partial(parse_int, minimum=1)),
                "max_value": Option("max_value", 10.0, check=_max_value),
                "seed": _SEED,
            },
        ),
        *_analysis_stages(embedding="pca", markers=True),
    ),
)
"""An antibody panel (ADT) alone, as Seurat's ADT workflow: QC metrics (no outlier filter:
a panel's features saturate), CLR per cell, every protein of the panel (HVGs of a panel smaller
than ``n_top``), scaled PCA (18 components at most, Seurat's ``apca`` dims), neighbors, Leiden,
UMAP, markers from ``counts``."""

ATAC_STANDARD: Final = Recipe(
    name="atac_standard",
    stages=(
        INPUT_SNAPSHOT,
        _qc(patterns={}, filter_outliers=True),
        Stage(
            name="normalize",
            operation=normalize,
            outputs=("normalized",),
            arguments={
                "assay": ASSAY,
                "cell_selection": Output("cells"),
                "target_sum": Option("target_sum", 1e4, check=partial(parse_float, positive=True)),
            },
        ),
        Stage(
            name="prevalent_peaks",
            operation=prevalent_peaks,
            outputs=("peaks",),
            arguments={
                "normalized": Output("normalized"),
                "min_cells_fraction": Option(
                    "min_cells_fraction",
                    0.01,
                    check=partial(parse_float, non_negative=True, maximum=1.0),
                ),
                "n_top": Option("n_top", None, check=_optional_count),
            },
        ),
        Stage(
            name="lsi",
            operation=lsi,
            outputs=("lsi",),
            arguments={
                "normalized": Output("normalized"),
                "peaks": Output("peaks"),
                "n_comps": Option("n_comps", 50, check=partial(parse_int, minimum=2)),
                "seed": _SEED,
            },
        ),
        *_analysis_stages(
            embedding="lsi",
            markers=False,
            n_comps=Option("lsi_dims", 29, check=partial(parse_int, minimum=1)),
        ),
    ),
)
"""Chromatin accessibility (ATAC) as Signac and Scarf analyse it: QC (MAD filter of counts and
detected peaks), log TF-IDF, the peaks detected in at least 1 % of the cells, LSI (its first
component dropped when it tracks sequencing depth), neighbors of the next 29 components (Signac's
``dims = 2:30``; all 49 give the noise components, each scaled to unit variance, as much weight
as the structure), Leiden, UMAP."""

CITESEQ_WNN: Final = Recipe(
    name="citeseq_wnn",
    stages=(
        *RNA_STANDARD.stages[:5],
        Stage(
            name="normalize_adt",
            operation=normalize,
            outputs=("normalized_adt",),
            arguments={
                "assay": Option("adt_assay", "ADT", check=_column_name),
                "cell_selection": Output("cells"),
            },
        ),
        Stage(
            name="hvgs_adt",
            operation=hvgs,
            outputs=("hvgs_adt",),
            arguments={"normalized": Output("normalized_adt"), "min_cells": 0},
        ),
        Stage(
            name="pca_adt",
            operation=pca,
            outputs=("pca_adt",),
            arguments={
                "normalized": Output("normalized_adt"),
                "hvgs": Output("hvgs_adt"),
                "n_comps": Option("adt_comps", 18, check=partial(parse_int, minimum=1)),
                "max_value": Option("max_value", 10.0, check=_max_value),
                "seed": _SEED,
            },
        ),
        Stage(
            name="wnn",
            operation=_wnn,
            outputs=("neighbors",),
            arguments={
                "assay": ASSAY,
                "adt_assay": Option("adt_assay", "ADT", check=_column_name),
                "rna": Output("pca"),
                "adt": Output("pca_adt"),
                "k": Option("wnn_k", 20, check=partial(parse_int, minimum=2)),
                "rna_comps": Option("wnn_rna_comps", 30, check=partial(parse_int, minimum=1)),
                "adt_comps": Option("adt_comps", 18, check=partial(parse_int, minimum=1)),
                "seed": _SEED,
            },
        ),
        *_cluster_and_layout(graph="neighbors", markers=True),
    ),
)
"""RNA and antibodies of the same cells (CITE-seq) in one graph, as Seurat's weighted nearest
neighbours: the RNA standard recipe to PCA, CLR and PCA of the ADT panel over the same cells,
``integration.modalities`` (WNN: per-cell modality weights; 30 RNA and 18 ADT components as
Seurat's vignette), then Leiden, UMAP and RNA markers of the joint clusters."""

RECIPES: Final = {r.name: r for r in (RNA_STANDARD, ADT_STANDARD, ATAC_STANDARD, CITESEQ_WNN)}
"""The recipes :func:`recipe` knows, by name."""


def recipe(name: str | Recipe) -> Recipe:
    """A recipe by name (or the recipe given).

    Parameters
    ----------
    name
        A name in :data:`RECIPES`, or a :class:`Recipe`.

    Returns
    -------
    Recipe
        The recipe.

    Raises
    ------
    RecipeError
        No recipe has that name.
    """
    if isinstance(name, Recipe):
        return name
    if name not in RECIPES:
        msg = f"no recipe {name!r}; recipes are {sorted(RECIPES)}, or pass a Recipe of your own (see cytearc.pipeline.recipes)"
        raise RecipeError(msg)
    return RECIPES[name]
