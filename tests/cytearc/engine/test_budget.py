"""mem_budget and workers: sizes, fractions, the environment, and refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cytearc.engine import budget as budget_module
from cytearc.engine.budget import (
    MIN_WORKER_BYTES,
    detected_memory,
    parse_mem_budget,
    parse_topology,
    parse_workers,
    resolve_budget,
)
from cytearc.errors import MemBudgetError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("8G", 8_000_000_000),
        ("8GiB", 8 * 2**30),
        ("512MiB", 512 * 2**20),
        ("512M", 512_000_000),
        (123456, 123456),
        ("1.5G", 1_500_000_000),
    ],
)
def test_sizes(value: str | int, expected: int) -> None:
    """Sizes use dask's units: G is 1e9, GiB is 2**30; ints are bytes."""
    assert parse_mem_budget(value, total=2**40) == expected


def test_a_budget_above_the_memory_is_refused() -> None:
    """A size above the memory this process may use (5T on a laptop) is refused, naming both."""
    with pytest.raises(MemBudgetError, match=r"'5T' \(4.55 TiB\) is more than the 16.00 GiB"):
        parse_mem_budget("5T", total=16 * 2**30)
    with pytest.raises(MemBudgetError, match="is more than the"):
        parse_mem_budget(detected_memory() + 1)


@given(fraction=st.floats(min_value=0.01, max_value=1.0), total=st.integers(2**20, 2**40))
def test_fractions_of_total(fraction: float, total: int) -> None:
    """A fraction in (0, 1], as a float or a string, is a share of the memory given."""
    assert parse_mem_budget(fraction, total=total) == int(fraction * total)
    assert parse_mem_budget(repr(fraction), total=total) == int(float(repr(fraction)) * total)


def test_default_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a value, CYTEARC_MEM_BUDGET and CYTEARC_WORKERS apply, else half the detected memory."""
    monkeypatch.delenv("CYTEARC_MEM_BUDGET", raising=False)
    monkeypatch.delenv("CYTEARC_WORKERS", raising=False)
    assert parse_mem_budget(None) == detected_memory() // 2
    monkeypatch.setenv("CYTEARC_MEM_BUDGET", "3GiB")
    monkeypatch.setenv("CYTEARC_WORKERS", "3")
    budget = resolve_budget()
    assert (budget.total, budget.workers, budget.per_worker) == (3 * 2**30, 3, 2**30)


def test_detected_memory_is_bounded_by_the_machine() -> None:
    """Detected memory is positive and at most the physical memory (cgroups can only lower it)."""
    import psutil  # noqa: PLC0415

    assert 0 < detected_memory() <= psutil.virtual_memory().total


@pytest.mark.parametrize("value", ["lots", "-1G", "0", "1.5", 0, True, [1]])
def test_bad_budgets_are_named(value: object) -> None:
    """Unreadable, non-positive or out-of-range budgets raise MemBudgetError saying the forms."""
    with pytest.raises(MemBudgetError, match="mem_budget"):
        parse_mem_budget(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -2, "two", "1.5", True])
def test_bad_workers(value: object) -> None:
    """Worker counts are positive whole numbers."""
    with pytest.raises(MemBudgetError, match="workers"):
        parse_workers(value, budget=2**30)  # type: ignore[arg-type]


def test_default_workers_fit_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a worker count, each worker gets at least the minimum memory."""
    monkeypatch.delenv("CYTEARC_WORKERS", raising=False)
    assert parse_workers(None, budget=MIN_WORKER_BYTES) == 1


def test_too_small_per_worker_is_refused() -> None:
    """A budget that leaves a worker less than 256 MiB names the remedy."""
    with pytest.raises(MemBudgetError, match="raise mem_budget or use fewer workers"):
        resolve_budget("300MiB", 2)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1x2", (1, 2)), ("2X3", (2, 3)), (" 1x2 ", (1, 2)), (3, (3, 1)), ("4", (4, 1))],
)
def test_workers_of_several_threads(value: str | int, expected: tuple[int, int]) -> None:
    """``"PxT"`` is P worker processes of T threads; a number is that many of one thread."""
    assert parse_topology(value, budget=2**32) == expected


@pytest.mark.parametrize("value", ["1x", "x2", "0x2", "1x0", "ax2", "1x2x3", "1.5x2"])
def test_bad_workers_of_several_threads(value: str) -> None:
    """A part of ``"PxT"`` that is not a positive whole number names both forms."""
    with pytest.raises(MemBudgetError, match=r"'PxT'"):
        parse_topology(value, budget=2**30)


def test_threads_share_their_workers_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each thread's task plans for its worker's limit over the threads; the environment takes PxT too."""
    budget = resolve_budget("4GiB", "1x2")
    assert (budget.workers, budget.threads, budget.per_worker, budget.per_task) == (
        1,
        2,
        2**32,
        2**31,
    )
    assert str(budget) == "4.00 GiB over 1 worker of 2 threads (4.00 GiB each)"
    monkeypatch.setenv("CYTEARC_WORKERS", "2x2")
    budget = resolve_budget("4GiB")
    assert (budget.workers, budget.threads, budget.per_task) == (2, 2, 2**30)


@pytest.mark.parametrize(
    ("cores", "expected"), [(1, (1, 1)), (2, (1, 2)), (3, (1, 3)), (4, (2, 2)), (8, (4, 2))]
)
def test_default_workers_run_two_threads_each(
    monkeypatch: pytest.MonkeyPatch, cores: int, expected: tuple[int, int]
) -> None:
    """Without ``workers``, each core runs a task, in processes of two threads (one of one on one core)."""
    monkeypatch.delenv("CYTEARC_WORKERS", raising=False)
    monkeypatch.setattr(budget_module, "CPU_COUNT", cores)
    assert parse_topology(None, budget=2**34) == expected
    assert parse_topology(None, budget=MIN_WORKER_BYTES) == (1, 1)
