"""A test kit for code that makes or reads cubes: example cubes, equality, a compute guard.

Shipped with the package, as zarr's ``testing`` and anndata's test helpers are,
so exporters can test their cubes the way CytePool tests its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

import dask
import numpy as np
import pandas as pd
from dask.local import get_sync

from cytepool import Cube

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path

    from dask.typing import Key

    from cytepool.servers import DaskProcesses

__all__ = [
    "assert_cube_equal",
    "dask_cluster_processes",
    "every_kind_table",
    "example_cube",
    "free_heap_below_a_live_block",
    "free_port",
    "raise_if_dask_computes",
    "scheduler_processes",
    "tree_snapshot",
    "wait_for_port",
]


@contextlib.contextmanager
def raise_if_dask_computes(max_computes: int = 0) -> Iterator[None]:
    """Fail if more than ``max_computes`` Dask computations run inside the block (as xarray's)."""
    count = 0

    def scheduler(dsk: Mapping[Any, Any], keys: Sequence[Key], **kwargs: object) -> object:
        nonlocal count
        count += 1
        if count > max_computes:
            msg = f"Too many computes: {count} > {max_computes}"
            raise RuntimeError(msg)
        return get_sync(dsk, keys, **kwargs)

    with dask.config.set(scheduler=scheduler):
        yield


def every_kind_table(n: int, *, seed: int = 0) -> pd.DataFrame:
    """A table with one column of every kind, including missing and non-ASCII text."""
    rng = np.random.default_rng(seed)
    text = [f"sample-{i}-é" if i % 3 else None for i in range(n)]
    text[0] = "ü∂ ☃"
    return pd.DataFrame(
        {
            "label": [f"s{i}" for i in range(n)],
            "text": pd.Series(text, dtype="str"),
            "category": pd.Categorical(rng.choice(["b", "a", "c"], n)),
            "flag": rng.random(n) < 0.5,
            "i8": rng.integers(-100, 100, n).astype(np.int8),
            "u16": rng.integers(0, 60000, n).astype(np.uint16),
            "u32": rng.integers(0, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32),
            "i64": rng.integers(-(2**40), 2**40, n),
            "f32": rng.normal(size=n).astype(np.float32),
            "f64": np.where(np.arange(n) % 4 == 1, np.nan, rng.normal(size=n)),
            "when_ns": pd.to_datetime(rng.integers(0, 2**40, n), unit="ns").values.astype(
                "datetime64[ns]"
            ),
            "when_s": np.array(
                ["2024-01-02T03:04:05", "NaT"] * (n // 2) + ["1970-01-01"] * (n % 2),
                dtype="datetime64[s]",
            ),
            "duration": pd.to_timedelta(rng.integers(0, 10**6, n), unit="ms"),
        }
    )


def example_cube(
    n_groups: int = 3,
    n_samples: int = 4,
    n_features: int = 50,
    *,
    seed: int = 0,
    bulk: bool = False,
    float_layers: bool = True,
) -> Cube:
    """A cube with counts, detected and (by default) float layers from a seeded generator."""
    rng = np.random.default_rng(seed)
    shape = (n_groups, n_samples, n_features)
    counts = rng.poisson(2.0, size=shape).astype(np.int32)
    layers: dict[str, Any] = {"counts": counts, "detected": np.minimum(counts, 3).astype(np.uint16)}
    if float_layers:
        layers["log_sum"] = np.log1p(counts * rng.random(shape))
        layers["linear_sum"] = (counts * 1.5).astype(np.float32)
    return Cube(
        samples=pd.DataFrame(
            {
                "sample": [f"S{i}" for i in range(n_samples)],
                "donor": [f"D{i // 2}" for i in range(n_samples)],
            }
        ),
        groups=pd.DataFrame({"group": [f"G{i}" for i in range(n_groups)]}),
        features=pd.DataFrame({"feature_id": [f"F{i}" for i in range(n_features)]}),
        layers=layers,
        n_cells=None if bulk else rng.integers(1, 100, size=(n_samples, n_groups)),
        normalization=None if bulk else {"method": "library_size", "target_sum": 10000},
        source={"tool": "tests", "seed": seed},
    )


def assert_cube_equal(actual: Cube, expected: Cube) -> None:
    """Assert two cubes hold the same tables, layers, cell numbers and normalization."""
    assert actual.shape == expected.shape
    for axis in ("samples", "groups", "features"):
        pairs = zip(actual.encoded_table(axis), expected.encoded_table(axis), strict=True)
        for got, want in pairs:
            assert (got.name, got.kind, got.levels) == (want.name, want.kind, want.levels)
            assert got.values.dtype == want.values.dtype, (axis, got.name)
            np.testing.assert_array_equal(got.values, want.values)
    assert sorted(actual.layers) == sorted(expected.layers)
    for name, layer in expected.layers.items():
        np.testing.assert_array_equal(np.asarray(actual.layers[name]), np.asarray(layer))
    if expected.n_cells is None:
        assert actual.n_cells is None
    else:
        np.testing.assert_array_equal(actual.n_cells, expected.n_cells)
    assert actual.normalization == expected.normalization


def tree_snapshot(root: Path) -> dict[str, str]:
    """Every path below ``root`` with the SHA-256 of its bytes (``dir`` for directories).

    Two equal snapshots taken around an operation show it changed no byte.
    """
    return {
        str(p.relative_to(root)): "dir"
        if p.is_dir()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


_PINNED: list[bytes] = []


def free_heap_below_a_live_block(megabytes: int = 64) -> int:
    """Free ``megabytes`` of small heap blocks below one kept alive; the process's RSS after, in bytes.

    glibc trims its heap only from the top, so the freed pages stay resident
    until ``malloc_trim`` (:func:`cytearc.utils.heap.release_freed_heap`).
    The live block is kept for the life of the process, so nothing later
    trims them by accident. Runs in a worker too (``client.run``).
    """
    import psutil  # noqa: PLC0415 (distributed's dependency; only this helper needs it)

    blocks = [bytes(1000) + bytes([i % 256]) for i in range(megabytes * 1000)]
    _PINNED.append(bytes(1000) + b"pin")
    del blocks
    return int(psutil.Process().memory_info().rss)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, *, timeout: float = 30.0) -> None:
    """Wait until a server listens on 127.0.0.1:``port`` (or ``timeout`` seconds pass)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)


@contextlib.contextmanager
def dask_cluster_processes(
    directory: Path,
    *,
    nannies: Sequence[bool] = (True, True),
    memory_limit: str = "1GiB",
    env: Mapping[str, str] | None = None,
) -> Iterator[DaskProcesses]:
    """Start ``dask scheduler`` and one ``dask worker`` per entry of ``nannies`` on 127.0.0.1.

    Each worker has one thread, ``memory_limit`` and its scratch space in
    ``directory``; a ``False`` in ``nannies`` starts that worker with
    ``--no-nanny`` (without the nanny's one-thread BLAS environment). ``env``
    is the processes' environment (this process's by default). They are
    terminated (then killed) on exit, with
    :func:`cytepool.servers.dask_processes`.
    """
    from cytepool.servers import dask_processes  # noqa: PLC0415 (servers imports this module)

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    python = [sys.executable, "-m"]
    scheduler = [*python, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port"]
    scheduler += [str(port), "--dashboard-address", f"127.0.0.1:{free_port()}"]
    worker = [*python, "distributed.cli.dask_worker", address, "--nthreads", "1"]
    worker += ["--memory-limit", memory_limit, "--local-directory", str(directory)]
    worker += ["--no-dashboard"]
    workers = [worker if nanny else [*worker, "--no-nanny"] for nanny in nannies]
    environment = {**(os.environ if env is None else env), "PYTHONWARNINGS": "ignore"}
    with dask_processes(scheduler, workers, address=address, env=environment) as processes:
        yield processes


@contextlib.contextmanager
def scheduler_processes(
    directory: Path,
    *,
    n_workers: int = 2,
    memory_limit: str = "1GiB",
    nanny: bool = True,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Start a Dask scheduler and ``n_workers`` workers as separate processes; yield its address.

    :func:`dask_cluster_processes` with ``n_workers`` workers alike.
    """
    nannies = (nanny,) * n_workers
    with dask_cluster_processes(
        directory, nannies=nannies, memory_limit=memory_limit, env=env
    ) as processes:
        yield processes.address
