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
from dask.delayed import delayed

from cytepool.compute import compute
from cytepool.de.api import base_settings, comparison_settings, fit_limma_voom, parse_normalization
from cytepool.de.design import design_matrix, is_contrast_list, resolve_tests
from cytepool.de.result import CubeSource, LimmaResult, LimmaResults
from cytepool.errors import DesignError, GroupSkippedError, LimmaError, NoGroupFittedError

if TYPE_CHECKING:
    from distributed import Client

    from cytepool.cube.cube import Cube
    from cytepool.de.api import Normalization
    from cytepool.de.design import Comparison, ContrastLike, ContrastList, DesignLike

__all__ = ["limma_voom", "validate_some_fitted"]


def _parse_threshold(value: object, *, name: str) -> float:
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
) -> list[LimmaResult | str]:
    """The result of one group for each test, or the reason it has none."""
    values = np.asarray(counts, dtype=np.float64)
    samples: pd.DataFrame = job["samples"]
    tests: tuple[Comparison, ...] = job["tests"]
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

    def reason(error: LimmaError) -> str:
        return f"{prefix} ({', '.join(map(str, kept_labels))}): {error}"

    try:
        sample_table = samples.loc[kept_labels]
        matrix = design_matrix(job["design"], sample_table)
    except LimmaError as error:
        return [reason(error)] * len(tests)
    reasons: list[str | None] = []
    fitted: list[Comparison] = []
    for test in tests:
        try:
            fitted.append(test.on_columns(job["columns"], list(matrix.columns)))
            reasons.append(None)
        except LimmaError as error:
            reasons.append(reason(error))
    if not fitted:
        return [r for r in reasons if r is not None]
    frame = pd.DataFrame(values[used].T, index=job["genes"], columns=sample_table.index)
    source = CubeSource(
        fingerprint=job["fingerprint"],
        digests=job["digests"],
        provenance=job["provenance"],
        group=group,
        samples_used=tuple(kept_labels),
        samples_dropped=dropped,
    )
    try:
        results: list[LimmaResult | str] = list(
            fit_limma_voom(
                frame,
                matrix,
                tests=fitted,
                normalization=job["normalization"],
                filter_by_expr=job["filter_by_expr"],
                settings={**job["settings"], "group": group},
                cube=source,
            )
        )
    except LimmaError as error:
        results = [reason(error)] * len(fitted)
    answers = iter(results)
    return [next(answers) if r is None else r for r in reasons]


def validate_some_fitted(
    results: LimmaResults, *, design: DesignLike, contrast: str | None = None
) -> None:
    """Raise when ``results`` holds no fitted group: every group was skipped.

    Parameters
    ----------
    results
        The results of the groups of a cube.
    design
        The design they were fitted with, for the message.
    contrast
        The contrast's name, when it is one of a list.

    Raises
    ------
    NoGroupFittedError
        When ``results`` is empty; the message lists each skipped group and
        its reason, and :attr:`~cytepool.errors.NoGroupFittedError.skipped` holds them.
    """
    if len(results) > 0:
        return
    described = repr(design) if isinstance(design, str) else "the given design matrix"
    tested = "" if contrast is None else f" for contrast {contrast!r}"
    reasons = "; ".join(f"{group!r}: {reason}" for group, reason in results.skipped.items())
    msg = (
        f"no group of the cube could be fitted with design {described}{tested}: "
        f"{reasons or 'the cube has no groups'}. Change the design, or lower min_cells and "
        "min_counts if too few samples were left"
    )
    raise NoGroupFittedError(msg, skipped=results.skipped)


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
    contrast: ContrastList,
    min_cells: float = 10,
    min_counts: float = 1000,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = True,
    client: Client | None = None,
) -> dict[str, LimmaResults]: ...


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
    contrast: ContrastList,
    min_cells: float = 10,
    min_counts: float = 1000,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = True,
    client: Client | None = None,
) -> dict[str, LimmaResult]: ...


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
    contrast: ContrastLike | ContrastList | None = None,
    min_cells: float = 10,
    min_counts: float = 1000,
    normalization: Normalization = "TMM",
    filter_by_expr: bool = True,
    client: Client | None = None,
) -> LimmaResult | LimmaResults | dict[str, LimmaResult] | dict[str, LimmaResults]:
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
        each group. ``coef`` and ``contrast`` are resolved on the design of
        all samples, then matched by column name to each group's design.
        ``contrast`` may be a list of R expressions (``["groupB-groupC",
        "(groupA+groupB)/2-groupC"]``): voom and lmFit run once per group and
        each contrast is tested on that fit.
    min_cells, min_counts
        Samples of a group with fewer cells (``cube.n_cells``; not checked for
        a bulk cube) or fewer total counts are dropped before filtering.
    client
        A :class:`distributed.Client` to run the groups on; by default Dask's
        current scheduler (the cluster of an active client, else threads).

    Returns
    -------
    LimmaResult, LimmaResults or dict
        For one group, its result; for every group, a mapping of group label
        to result (at least one), with the groups that could not be fitted (too few samples
        left, a factor with one level, no residual degrees of freedom, a
        contrast column that the group's design lacks, ...) and their reasons
        in ``.skipped``. Each result records the cube's fingerprint, digests
        and provenance (see :meth:`LimmaResult.verify`). With a list of
        contrasts, a dict from each expression, in list order, to what one
        contrast gives.

    Raises
    ------
    GroupSkippedError
        When the one ``group`` asked for cannot be fitted (for one contrast of
        a list: any of them); the message says why.
    NoGroupFittedError
        When ``group`` is None and no group can be fitted (for a list of
        contrasts: no group for one of them); the message lists each group
        and why it was skipped.
    DesignError
        When the design, coefficient or contrast does not fit the cube's
        samples, or ``group`` is not in the cube.
    LimmaError
        When the cube has no ``counts`` layer or a threshold is not a number >= 0.

    Examples
    --------
    >>> from cytepool.cube.demo import demo_cube
    >>> cube = demo_cube(n_features=300, n_donors=4)
    >>> results = limma_voom(cube, design="~ donor + condition", min_counts=100)
    >>> sorted(results) == sorted(cube.groups["group"])
    True
    >>> results["B"].settings["test"]["name"]
    'conditionstim'
    >>> by_contrast = limma_voom(
    ...     cube, group="B", design="~ 0 + condition", contrast=["conditionstim-conditionctrl"]
    ... )
    >>> by_contrast["conditionstim-conditionctrl"].settings["test"]["contrast"]["weights"]
    {'conditionctrl': -1.0, 'conditionstim': 1.0}
    """
    normalization = parse_normalization(normalization)
    thresholds = {
        "min_cells": _parse_threshold(min_cells, name="min_cells"),
        "min_counts": _parse_threshold(min_counts, name="min_counts"),
    }
    if "counts" not in cube.layers:
        msg = "cube has no 'counts' layer; limma-voom needs raw summed counts"
        raise LimmaError(msg)
    sample_table = cube.samples
    samples = sample_table.set_index(sample_table.columns[0])
    full = design_matrix(design, samples)
    columns = [str(c) for c in full.columns]
    tests = resolve_tests(columns, coef=coef, contrast=contrast)
    settings = {
        **base_settings(
            design=design,
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
        "columns": columns,
        "tests": tests,
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
    several = is_contrast_list(contrast)
    if group is not None:
        if group not in labels:
            msg = f"group {group!r} is not in the cube; its groups are {labels}"
            raise DesignError(msg)
        g = labels.index(group)
        block = layer[g]
        values = block.compute() if isinstance(block, da.Array) else block
        outcomes = _fit_group(
            values, None if n_cells is None else n_cells[:, g], group=group, job=job
        )
        one: dict[str, LimmaResult] = {}
        for test, outcome in zip(tests, outcomes, strict=True):
            if isinstance(outcome, str):
                tested = f" for contrast {test.name!r}" if several else ""
                msg = f"group {group!r} cannot be fitted{tested}: {outcome}"
                raise GroupSkippedError(msg, reason=outcome)
            one[test.name] = outcome
        return one if several else one[tests[0].name]
    fit = delayed(_fit_group, pure=False)
    tasks = [
        fit(layer[g], None if n_cells is None else n_cells[:, g], group=label, job=job)
        for g, label in enumerate(labels)
    ]
    computed = compute(*tasks, client=client)
    per_group = cast("list[list[LimmaResult | str]]", list(computed))
    every: dict[str, LimmaResults] = {}
    for position, test in enumerate(tests):
        results: dict[Hashable, LimmaResult] = {}
        skipped: dict[Hashable, str] = {}
        for label, outcomes in zip(labels, per_group, strict=True):
            outcome = outcomes[position]
            if isinstance(outcome, str):
                skipped[label] = outcome
            else:
                results[label] = outcome
        every[test.name] = LimmaResults(
            results=results,
            skipped=skipped,
            settings={**settings, "test": comparison_settings(test, columns)},
        )
        validate_some_fitted(
            every[test.name], design=design, contrast=test.name if several else None
        )
    return every if several else every[tests[0].name]
