"""``limma_voom``: limma-voom on the groups of a pseudobulk :class:`~cytepool.Cube`.

For each group, ``counts[g]`` (samples x features) is transposed to genes x
samples; samples with fewer than ``min_cells`` cells or ``min_counts`` counts
are dropped first (decoupler's defaults), then the design is built from the
remaining rows of the sample table and :func:`~cytepool.de.run_limma_voom`'s
pipeline runs. Groups run in parallel as Dask tasks, each reading only its own
group of the counts layer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, cast, overload

import dask.array as da
import numpy as np
import pandas as pd
from dask.base import compute as dask_compute
from dask.delayed import delayed

from cytepool.de.api import base_settings, fit_limma_voom, parse_normalization
from cytepool.de.design import design_matrix, resolve_test
from cytepool.de.result import CubeSource, LimmaResult, LimmaResults
from cytepool.errors import DesignError, GroupSkippedError, LimmaError

if TYPE_CHECKING:
    from distributed import Client

    from cytepool.cube.cube import Cube
    from cytepool.de.api import Normalization
    from cytepool.de.design import ContrastLike, DesignLike

__all__ = ["limma_voom"]


def _check_threshold(value: object, *, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        msg = f"{name} must be a number >= 0, found {value!r}"
        raise LimmaError(msg)
    return float(value)


def _drop_reasons(
    totals: np.ndarray,
    n_cells: np.ndarray | None,
    labels: list[Any],
    *,
    min_cells: float,
    min_counts: float,
) -> dict[Any, str]:
    reasons: dict[Any, str] = {}
    for s, label in enumerate(labels):
        why = []
        if totals[s] <= 0:
            reasons[label] = "no counts"
            continue
        if n_cells is not None and n_cells[s] < min_cells:
            why.append(f"{int(n_cells[s])} cells < min_cells={min_cells:g}")
        if totals[s] < min_counts:
            why.append(f"{totals[s]:g} counts < min_counts={min_counts:g}")
        if why:
            reasons[label] = "; ".join(why)
    return reasons


def _fit_group(
    counts: np.ndarray,
    n_cells: np.ndarray | None,
    *,
    group: Hashable,
    job: dict[str, Any],
) -> LimmaResult | str:
    """The result of one group, or the reason it has none."""
    values = np.asarray(counts, dtype=np.float64)
    samples: pd.DataFrame = job["samples"]
    labels = samples.index.tolist()
    dropped = _drop_reasons(
        values.sum(axis=1),
        n_cells,
        labels,
        min_cells=job["min_cells"],
        min_counts=job["min_counts"],
    )
    used = [s not in dropped for s in labels]
    kept_labels = [s for s, u in zip(labels, used, strict=True) if u]
    prefix = f"{len(kept_labels)} of {len(labels)} samples left"
    try:
        sample_table = samples.loc[kept_labels]
        matrix = design_matrix(job["design"], sample_table)
        test = resolve_test(list(matrix.columns), coef=job["coef"], contrast=job["contrast"])
        frame = pd.DataFrame(values[used].T, index=job["genes"], columns=sample_table.index)
        source = CubeSource(
            fingerprint=job["fingerprint"],
            digests=job["digests"],
            provenance=job["provenance"],
            group=group,
            samples_used=tuple(kept_labels),
            samples_dropped=dropped,
        )
        return fit_limma_voom(
            frame,
            matrix,
            test=test,
            normalization=job["normalization"],
            filter_by_expr=job["filter_by_expr"],
            settings={**job["settings"], "group": group},
            cube=source,
        )
    except LimmaError as error:
        return f"{prefix} ({', '.join(map(str, kept_labels))}): {error}"


def _label(value: object) -> Hashable:
    label = value.item() if isinstance(value, np.generic) else value
    if not isinstance(label, Hashable):
        msg = f"label {label!r} is not hashable"
        raise LimmaError(msg)
    return label


@overload
def limma_voom(  # type: ignore[overload-overlap]  # None is Hashable: the first overload wins
    cube: Cube,
    *,
    group: None = None,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | None = None,
    min_cells: float = 10,
    min_counts: float = 1000,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = True,
    client: Client | None = None,
) -> LimmaResults: ...


@overload
def limma_voom(
    cube: Cube,
    *,
    group: Hashable,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | None = None,
    min_cells: float = 10,
    min_counts: float = 1000,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = True,
    client: Client | None = None,
) -> LimmaResult: ...


def limma_voom(
    cube: Cube,
    *,
    group: Hashable | None = None,
    design: DesignLike,
    coef: str | int | None = None,
    contrast: ContrastLike | None = None,
    min_cells: float = 10,
    min_counts: float = 1000,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = True,
    client: Client | None = None,
) -> LimmaResult | LimmaResults:
    """limma-voom differential expression per group of a pseudobulk cube.

    Parameters
    ----------
    cube
        A :class:`~cytepool.Cube` with a ``counts`` layer of raw summed counts.
    group
        One group label (first column of the group table), or None for every group.
    design, coef, contrast, normalization, filter_by_expr
        As in :func:`~cytepool.de.run_limma_voom`; the formula is evaluated on
        the sample table (indexed by its first column) of the samples kept in
        each group. ``coef`` and ``contrast`` are resolved to column names on
        the design of all samples.
    min_cells, min_counts
        Samples of a group with fewer cells (``cube.n_cells``; not checked for
        a bulk cube) or fewer total counts are dropped before filtering.
    client
        A :class:`distributed.Client` to run the groups on; by default Dask's
        threaded scheduler.

    Returns
    -------
    LimmaResult or LimmaResults
        For one group, its result; for every group, a mapping of group label
        to result, with the groups that could not be fitted (too few samples
        left, a factor with one level, no residual degrees of freedom, ...)
        and their reasons in ``.skipped``. Each result records the cube's
        fingerprint, digests and provenance (see :meth:`LimmaResult.verify`).

    Raises
    ------
    GroupSkippedError
        When the one ``group`` asked for cannot be fitted; the message says why.
    DesignError
        When the design, coefficient or contrast does not fit the cube's samples.

    Examples
    --------
    >>> from cytepool.cube.demo import demo_cube
    >>> cube = demo_cube(n_features=300, n_donors=4)
    >>> results = limma_voom(cube, design="~ donor + condition", min_counts=100)
    >>> sorted(results) == sorted(cube.groups["group"])
    True
    >>> results["B"].settings["test"]["name"]
    'conditionstim'
    """
    normalization = parse_normalization(normalization)
    thresholds = {
        "min_cells": _check_threshold(min_cells, name="min_cells"),
        "min_counts": _check_threshold(min_counts, name="min_counts"),
    }
    if "counts" not in cube.layers:
        msg = "cube has no 'counts' layer; limma-voom needs raw summed counts"
        raise LimmaError(msg)
    sample_table = cube.samples
    samples = sample_table.set_index(sample_table.columns[0])
    full = design_matrix(design, samples)
    columns = [str(c) for c in full.columns]
    test = resolve_test(columns, coef=coef, contrast=contrast)
    weights = test.to_json(columns)["contrast"]
    settings = {
        **base_settings(
            design=design,
            test=test,
            columns=columns,
            normalization=normalization,
            filter_by_expr=bool(filter_by_expr),
        ),
        **thresholds,
        "layer": "counts",
    }
    job = {
        "samples": samples,
        "design": design,
        "coef": test.name if weights is None else None,
        "contrast": None if weights is None else weights["weights"],
        "genes": pd.Index(cube.features.iloc[:, 0].map(_label), name=cube.features.columns[0]),
        "normalization": normalization,
        "filter_by_expr": bool(filter_by_expr),
        "settings": settings,
        "fingerprint": cube.fingerprint,
        "digests": cube.digests,
        "provenance": cube.provenance,
        **thresholds,
    }
    labels = [_label(v) for v in cube.groups.iloc[:, 0]]
    layer = cube.layers["counts"]
    n_cells = cube.n_cells
    if group is not None:
        if group not in labels:
            msg = f"group {group!r} is not in the cube; its groups are {labels}"
            raise DesignError(msg)
        g = labels.index(group)
        block = layer[g]
        values = block.compute() if isinstance(block, da.Array) else block
        outcome = _fit_group(
            values, None if n_cells is None else n_cells[:, g], group=group, job=job
        )
        if isinstance(outcome, str):
            msg = f"group {group!r} cannot be fitted: {outcome}"
            raise GroupSkippedError(msg)
        return outcome
    fit = delayed(_fit_group, pure=False)
    tasks = [
        fit(layer[g], None if n_cells is None else n_cells[:, g], group=label, job=job)
        for g, label in enumerate(labels)
    ]
    if client is not None:
        outcomes = client.gather(client.compute(tasks))
    else:
        outcomes = dask_compute(*tasks, scheduler="threads")
    results: dict[Hashable, LimmaResult] = {}
    skipped: dict[Hashable, str] = {}
    for label, outcome in zip(labels, cast("list[LimmaResult | str]", list(outcomes)), strict=True):
        if isinstance(outcome, str):
            skipped[label] = outcome
        else:
            results[label] = outcome
    return LimmaResults(results=results, skipped=skipped, settings=settings)
