"""CyteArc on SLURM with dask-jobqueue: workers submitted as batch jobs, set up by ``jobqueue.yaml``.

Run it on a login node, where the scheduler then runs (in this process);
the store must be on a filesystem every node mounts at the same path, or on
S3::

    python deploy/slurm/slurm_cluster.py /shared/project/pbmc.zarr

With ``jobqueue.yaml`` copied to ``~/.config/dask/``, a plain
``SLURMCluster()`` has the same settings.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final, cast

import dask.config
from dask_jobqueue.slurm import SLURMCluster
from distributed import Client

from cytearc import DataStore

CONFIG: Final = Path(__file__).with_name("jobqueue.yaml")
JOBS: Final = 2
"""SLURM jobs to submit; each runs ``jobqueue.slurm.processes`` workers."""


def load_config(path: Path = CONFIG) -> dict[str, Any]:
    """Dask's configuration with ``jobqueue.yaml`` merged in, as if it were in ``~/.config/dask/``.

    Parameters
    ----------
    path
        A Dask configuration file with a ``jobqueue.slurm`` section.

    Returns
    -------
    dict
        The configuration, for ``dask.config.set``.
    """
    return cast(
        "dict[str, Any]",
        dask.config.merge(dask.config.config, *dask.config.collect_yaml([str(path)])),
    )


def main(store: str) -> None:
    """Submit the workers, run the standard analysis of ``store`` on them, cancel the jobs.

    Parameters
    ----------
    store
        A store on the shared filesystem or on S3.
    """
    with (
        dask.config.set(load_config()),
        SLURMCluster() as cluster,
        Client(cluster) as client,
    ):
        cluster.scale(jobs=JOBS)
        client.wait_for_workers(JOBS * dask.config.get("jobqueue.slurm.processes"))
        ds = DataStore(store, zarr_mode="r+", cluster=client)
        run = ds.pipeline.run("rna_standard")
        print(run.summary())


if __name__ == "__main__":
    main(sys.argv[1])
