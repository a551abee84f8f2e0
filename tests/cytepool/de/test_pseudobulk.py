"""limma_voom on a cube: per-group results, dropped samples, skipped groups, verify, engines, laziness."""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from cytepool import Cube
from cytepool.de import LimmaResult, LimmaResults, limma_voom, limma_voom_result
from cytepool.de.testing import assert_result_equal
from cytepool.errors import (
    DesignError,
    GroupSkippedError,
    NoGroupFittedError,
    ResultMismatchError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

DESIGN = "~ donor + condition"


def _with_layer(cube: Cube, counts: Any, *, n_cells: np.ndarray | None = None) -> Cube:
    return Cube(
        samples=cube.samples,
        groups=cube.groups,
        features=cube.features,
        layers={"counts": counts},
        n_cells=cube.n_cells if n_cells is None else n_cells,
        source=cube.source,
    )


def _by_hand(cube: Cube, g: int, *, drop: list[str] | None = None, **kwargs: Any) -> LimmaResult:
    """limma_voom_result on group g's counts, transposed by hand."""
    counts = np.asarray(cube.layers["counts"][g])
    samples = cube.samples.set_index("sample")
    frame = pd.DataFrame(
        counts.T, index=pd.Index(cube.features["gene"], name="gene"), columns=samples.index
    )
    keep = [s for s in samples.index if s not in (drop or [])]
    return limma_voom_result(
        frame[keep], samples.loc[keep], design=DESIGN, filter_by_expr=True, **kwargs
    )


def test_each_group_equals_run_limma_voom_on_its_matrix(pb_cube: Cube) -> None:
    """Every group's table, weights, E and prior are those of limma_voom_result on its counts."""
    results = limma_voom(pb_cube, design=DESIGN)
    assert isinstance(results, LimmaResults)
    assert list(results) == ["T0", "T1", "T2"]
    assert results.skipped == {}
    for g, label in enumerate(results):
        result = results[label]
        by_hand = _by_hand(pb_cube, g)
        pd.testing.assert_frame_equal(result.table, by_hand.table, check_exact=True)
        assert result.weights is not None
        pd.testing.assert_frame_equal(result.weights, by_hand.weights, check_exact=True)
        assert result.prior == by_hand.prior
        assert result.cube is not None
        assert result.cube.group == label
        assert result.cube.fingerprint == pb_cube.fingerprint
        assert result.cube.digests == pb_cube.digests
        assert result.cube.provenance == pb_cube.provenance
        assert result.settings["group"] == label
        assert result.settings["min_cells"] == 10.0


def test_samples_with_few_cells_or_counts_are_dropped_before_filtering(
    make_cube: Callable[..., Cube],
) -> None:
    """Samples under min_cells or min_counts leave before filterByExpr, TMM and the design."""
    cube = make_cube(seed=5)
    n_cells = cube.n_cells
    assert n_cells is not None
    n_cells[0, 1] = 4  # D1_ctrl in group T1 has 4 cells
    counts = np.asarray(cube.layers["counts"]).copy()
    counts[1, 3] = 0
    counts[1, 3, :5] = 100  # D2_stim in group T1 has 500 counts
    cube = _with_layer(cube, counts, n_cells=n_cells)
    result = limma_voom(cube, group="T1", design=DESIGN)
    assert result.cube is not None
    assert result.cube.samples_dropped == {
        "D1_ctrl": "4 cells < min_cells=10",
        "D2_stim": "500 counts < min_counts=1000",
    }
    assert "D1_ctrl" not in result.lib_size.index
    assert_result_equal(
        result, _with_cube(_by_hand(cube, 1, drop=["D1_ctrl", "D2_stim"]), result), rtol=0.0
    )


def _with_cube(result: LimmaResult, like: LimmaResult) -> LimmaResult:
    """``result`` with the cube record and settings of ``like`` (to compare everything else)."""
    from dataclasses import replace  # noqa: PLC0415

    return replace(result, cube=like.cube, settings=like.settings)


def test_groups_without_enough_samples_are_skipped_with_a_reason(
    make_cube: Callable[..., Cube],
) -> None:
    """A group left with too few samples for its design is skipped, not fatal; asked alone it raises."""
    cube = make_cube(seed=6)
    n_cells = cube.n_cells
    assert n_cells is not None
    n_cells[:5, 2] = 1  # group T2 keeps 3 of 8 samples
    cube = _with_layer(cube, np.asarray(cube.layers["counts"]), n_cells=n_cells)
    results = limma_voom(cube, design=DESIGN)
    assert list(results) == ["T0", "T1"]
    reason = results.skipped["T2"]
    assert reason.startswith("3 of 8 samples left")
    with pytest.raises(GroupSkippedError, match="group 'T2' cannot be fitted: 3 of 8 samples left"):
        limma_voom(cube, group="T2", design=DESIGN)


def test_one_level_left_is_a_reason_too(make_cube: Callable[..., Cube]) -> None:
    """When every stim sample of a group is dropped, the condition has one level: skipped."""
    cube = make_cube(seed=7)
    n_cells = cube.n_cells
    assert n_cells is not None
    n_cells[1::2, 0] = 0
    cube = _with_layer(cube, np.asarray(cube.layers["counts"]), n_cells=n_cells)
    results = limma_voom(cube, design=DESIGN)
    assert "at least two levels" in results.skipped["T0"]


def _with_batch_as_donor(cube: Cube) -> Cube:
    """``cube`` with a sample column ``batch`` that repeats ``donor``: ``~ donor + batch`` is rank deficient."""
    samples = cube.samples.assign(batch=cube.samples["donor"].str.replace("D", "B"))
    return Cube(
        samples=samples,
        groups=cube.groups,
        features=cube.features,
        layers={"counts": np.asarray(cube.layers["counts"])},
        n_cells=cube.n_cells,
        source=cube.source,
    )


def test_no_group_fitted_raises_naming_every_group_and_reason(pb_cube: Cube) -> None:
    """A design no group can fit raises NoGroupFittedError listing each group and why, not an empty result."""
    cube = _with_batch_as_donor(pb_cube)
    with pytest.raises(NoGroupFittedError) as info:
        limma_voom(cube, design="~ donor + batch + condition")
    assert isinstance(info.value, GroupSkippedError)
    assert list(info.value.skipped) == ["T0", "T1", "T2"]
    message = str(info.value)
    assert message.startswith(
        "no group of the cube could be fitted with design '~ donor + batch + condition'"
    )
    for label, reason in info.value.skipped.items():
        assert "rank" in reason
        assert f"{label!r}: {reason}" in message


def test_no_group_fitted_for_one_contrast_of_a_list_raises_naming_it(pb_cube: Cube) -> None:
    """With a list of contrasts, a contrast that no group can test raises, naming that contrast."""
    n_cells = pb_cube.n_cells
    assert n_cells is not None
    n_cells = n_cells.copy()
    n_cells[pb_cube.samples["donor"].to_numpy() == "D4"] = 0
    cube = _with_layer(pb_cube, np.asarray(pb_cube.layers["counts"]), n_cells=n_cells)
    names = ["conditionstim", "donorD4-donorD2"]
    with pytest.raises(NoGroupFittedError, match=r"for contrast 'donorD4-donorD2'") as info:
        limma_voom(cube, design="~ 0 + donor + condition", contrast=names)
    assert list(info.value.skipped) == ["T0", "T1", "T2"]
    every = limma_voom(cube, design="~ 0 + donor + condition", contrast=names[:1])
    assert list(every["conditionstim"]) == ["T0", "T1", "T2"]


def test_user_errors_raise_up_front(pb_cube: Cube) -> None:
    """A coefficient the design lacks or an unknown group is an error, not a skipped group."""
    with pytest.raises(DesignError, match="not a design column"):
        limma_voom(pb_cube, design=DESIGN, coef="conditionSTIM")
    with pytest.raises(DesignError, match="not in the cube"):
        limma_voom(pb_cube, group="T9", design=DESIGN)


def test_verify_passes_on_the_cube_and_names_what_changed(pb_cube: Cube) -> None:
    """Verifying accepts the same cube and names the layer and group of a changed count."""
    result = limma_voom(pb_cube, group="T0", design=DESIGN)
    result.verify(pb_cube)
    counts = np.asarray(pb_cube.layers["counts"]).copy()
    counts[1, 2, 3] += 1
    changed = _with_layer(pb_cube, counts)
    with pytest.raises(ResultMismatchError, match=r"differ in layer 'counts' of group 'T1'"):
        result.verify(changed)
    with pytest.raises(ResultMismatchError, match="the samples table"):
        result.verify(pb_cube.select(samples=list(pb_cube.samples["sample"][::-1])))
    assert issubclass(ResultMismatchError, ValueError)


def test_verify_of_a_matrix_result_says_there_is_no_cube() -> None:
    """A result of plain matrices has nothing to verify against."""
    counts = pd.DataFrame(np.random.default_rng(0).poisson(50, (40, 4)), columns=list("abcd"))
    samples = pd.DataFrame({"c": ["x", "x", "y", "y"]}, index=list("abcd"))
    result = limma_voom_result(counts, samples, design="~ c")
    with pytest.raises(ResultMismatchError, match="not from a cube"):
        result.verify(
            Cube(
                samples=pd.DataFrame({"s": list("abcd")}),
                groups=pd.DataFrame({"g": ["G"]}),
                features=pd.DataFrame({"f": list(range(40))}),
                layers={"counts": counts.to_numpy().T[None]},
            )
        )


def test_all_groups_in_parallel_equal_one_by_one(pb_cube: Cube) -> None:
    """The threaded all-groups run gives each group's one-by-one result."""
    results = limma_voom(pb_cube, design=DESIGN, contrast={"conditionstim": 1})
    for label, result in results.items():
        alone = limma_voom(pb_cube, group=label, design=DESIGN, contrast={"conditionstim": 1})
        assert_result_equal(result, alone)


def test_dask_layers_give_the_numpy_results(make_cube: Callable[..., Cube]) -> None:
    """A cube with lazy Dask layers has the fingerprint and results of its numpy twin."""
    eager = make_cube(seed=3)
    lazy = make_cube(seed=3, layers="dask")
    assert isinstance(lazy.layers["counts"], da.Array)
    assert lazy.fingerprint == eager.fingerprint
    for label, result in limma_voom(eager, design=DESIGN).items():
        assert_result_equal(limma_voom(lazy, group=label, design=DESIGN), result)


class _Reads:
    """A Dask counts layer that records which groups' blocks are computed."""

    def __init__(self, counts: np.ndarray) -> None:
        self.groups: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.layer = da.from_array(counts, chunks=(1, counts.shape[1], 100)).map_blocks(
            self._record, dtype=counts.dtype
        )

    def _record(self, block: np.ndarray, block_info: dict[Any, Any] | None = None) -> np.ndarray:
        if block_info is not None and 0 in block_info:
            with self.lock:
                self.groups[block_info[0]["chunk-location"][0]] += 1
        return block


def test_lazy_layers_are_read_one_group_at_a_time(pb_cube: Cube) -> None:
    """One group reads only its blocks; all groups read each group's blocks once."""
    reads = _Reads(np.asarray(pb_cube.layers["counts"]))
    lazy = _with_layer(pb_cube, reads.layer)
    assert lazy.fingerprint == pb_cube.fingerprint  # the digests read every block once, first
    reads.groups.clear()
    limma_voom(lazy, group="T1", design=DESIGN)
    assert reads.groups == Counter({1: 3})  # 300 genes in blocks of 100
    reads.groups.clear()
    limma_voom(lazy, design=DESIGN)
    assert reads.groups == Counter({0: 3, 1: 3, 2: 3})


def test_distributed_client_gives_the_threaded_results(pb_cube: Cube) -> None:
    """On a distributed client the groups give the threaded scheduler's results."""
    threaded = limma_voom(pb_cube, design=DESIGN)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        on_cluster = limma_voom(pb_cube, design=DESIGN, client=client)
    assert list(on_cluster) == list(threaded)
    for label, result in threaded.items():
        assert_result_equal(on_cluster[label], result)


def test_bulk_cube_uses_counts_only(make_cube: Callable[..., Cube]) -> None:
    """A cube without cell numbers drops samples by total counts only."""
    cube = make_cube(seed=8)
    bulk = Cube(
        samples=cube.samples,
        groups=cube.groups,
        features=cube.features,
        layers={"counts": np.asarray(cube.layers["counts"])},
    )
    result = limma_voom(bulk, group="T0", design=DESIGN, min_cells=10**6)
    assert result.cube is not None
    assert result.cube.samples_dropped == {}


def test_samples_without_counts_are_always_dropped(make_cube: Callable[..., Cube]) -> None:
    """A sample with no counts in a group leaves it even with min_counts=0 (it has no CPM)."""
    cube = make_cube(seed=9)
    counts = np.asarray(cube.layers["counts"]).copy()
    counts[0, 4] = 0
    result = limma_voom(_with_layer(cube, counts), group="T0", design=DESIGN, min_counts=0)
    assert result.cube is not None
    assert result.cube.samples_dropped == {"D3_ctrl": "no counts"}
