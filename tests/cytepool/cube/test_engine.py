"""The engine rule: the same fingerprints on the threaded scheduler, a LocalCluster and a scheduler address."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from distributed import Client, LocalCluster

from cytepool import read_cube, write_cube
from cytepool.testing import example_cube, scheduler_processes

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cytepool import Cube


def _roundtrip(cube: Cube, path: Path) -> tuple[str, str, str, int]:
    """Fingerprint computed, written, re-verified from the file, and a verified whole-layer read."""
    computed = example_cube(n_groups=4, n_samples=3, n_features=5000, seed=7).fingerprint
    write_cube(cube, path, compression="zstd")
    again = read_cube(path)
    total = int(again.layers["counts"].sum().compute())
    return computed, again.fingerprint, again.verify_fingerprint(), total


@pytest.fixture(scope="module")
def threaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str, int]:
    cube = example_cube(n_groups=4, n_samples=3, n_features=5000, seed=7)
    return _roundtrip(cube, tmp_path_factory.mktemp("threaded") / "c.cube.zarr")


@pytest.mark.slow
def test_local_cluster_of_two_processes(
    tmp_path: Path, threaded: tuple[str, str, str, int]
) -> None:
    """Two worker processes compute, write and verify the threaded scheduler's fingerprints."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster),
    ):
        cube = example_cube(n_groups=4, n_samples=3, n_features=5000, seed=7)
        assert _roundtrip(cube, tmp_path / "c.cube.zarr") == threaded


@pytest.fixture
def scheduler_address(tmp_path: Path) -> Iterator[str]:
    """A dask scheduler and two workers started as separate processes on 127.0.0.1."""
    with scheduler_processes(tmp_path / "workers") as address:
        yield address


@pytest.mark.slow
def test_external_scheduler(
    tmp_path: Path, scheduler_address: str, threaded: tuple[str, str, str, int]
) -> None:
    """A scheduler and workers in other processes give the same fingerprints."""
    with Client(scheduler_address, timeout=30) as client:
        client.wait_for_workers(2, timeout=30)
        cube = example_cube(n_groups=4, n_samples=3, n_features=5000, seed=7)
        assert _roundtrip(cube, tmp_path / "c.cube.zarr") == threaded
