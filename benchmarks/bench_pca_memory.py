"""PCA on a store's latest recipe run, with what each worker holds while it runs.

Run from the project root on a store the recipe ran on (such as
``bench_million.py``'s ``million.zarr``)::

    .venv/bin/python benchmarks/bench_pca_memory.py /tmp/m/million.zarr --workers 2

Each call recomputes ``reduce.pca`` of the run's ``normalized`` and ``hvgs``
artifacts (``invalidate_cache=True``; 50 components, clipped at 10, as the
recipe) and prints its seconds, the peak RSS of all processes
(:class:`cytearc.pipeline.rss.RssSampler`: client and workers), and, from the
scheduler polled every second, the bytes of results each worker holds at the
moment they are highest, by task name (``dask.utils.key_split``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from typing import Any

from dask.utils import key_split

from cytearc import DataStore
from cytearc.pipeline.rss import RssSampler


def _held(dask_scheduler: Any) -> dict[str, Any]:  # noqa: ANN401 (a distributed Scheduler)
    held = {}
    for worker in dask_scheduler.workers.values():
        names: Counter[str] = Counter()
        for task in worker.has_what:
            names[key_split(task.key)] += task.nbytes
        held[worker.address] = {
            "heldMB": round(worker.nbytes / 1e6),
            "results": len(worker.has_what),
            "byTaskMB": {name: round(n / 1e6) for name, n in names.most_common(4)},
        }
    return held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("store")
    parser.add_argument("--mem-budget", default="8G")
    parser.add_argument("--workers", default=None, help="worker processes, or PxT")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    ds = DataStore(
        args.store,
        zarr_mode="r+",
        mem_budget=args.mem_budget,
        workers=args.workers,
        show_progress=False,
    )
    client = ds.engine.client
    run = ds.pipeline.open(ds.pipeline.runs()[-1].run_id)
    normalized, hvgs = run.artifact("normalized"), run.artifact("hvgs")
    for _ in range(args.repeat):
        polls: list[tuple[float, dict[str, Any]]] = []
        done = threading.Event()

        def poll(
            polls: list[tuple[float, dict[str, Any]]] = polls, done: threading.Event = done
        ) -> None:
            while not done.wait(1.0):
                if client is not None:
                    polls.append((time.perf_counter(), client.run_on_scheduler(_held)))

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        with RssSampler(client, interval=0.1) as sampler:
            start = time.perf_counter()
            ds.reduce.pca(normalized, hvgs, n_comps=50, max_value=10, invalidate_cache=True)
            seconds = time.perf_counter() - start
        done.set()
        poller.join()
        peak = sampler.metrics()["peakBytes"]
        most = max(polls, default=None, key=lambda p: sum(w["heldMB"] for w in p[1].values()))
        print(
            json.dumps(
                {
                    "seconds": round(seconds, 1),
                    "peakMB": {k: round(v / 1e6) for k, v in peak.items()},
                    "mostHeld": None
                    if most is None
                    else {"atSeconds": round(most[0] - start, 1), "workers": most[1]},
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
