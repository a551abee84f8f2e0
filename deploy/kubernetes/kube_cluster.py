"""CyteArc on Kubernetes from Python: the cluster of ``daskcluster.yaml`` started with ``KubeCluster``.

The dask-kubernetes operator must run in the cluster (see README.md). This
script creates the ``DaskCluster`` (two workers of one thread, whose Dask
memory limit is their container's memory limit: the per-worker budget),
runs the standard analysis of a store on the shared data volume, and
deletes the cluster when it ends::

    python deploy/kubernetes/kube_cluster.py /data/pbmc.zarr

Run it where the scheduler's service is reachable: in the Jupyter pod of
``jupyter.yaml``, or anywhere with ``kubectl`` access (``KubeCluster``
forwards the scheduler's port).
"""

from __future__ import annotations

import sys
from typing import Any, Final

from dask_kubernetes.operator import KubeCluster, make_cluster_spec
from distributed import Client

from cytearc import DataStore

NAME: Final = "cytearc"
IMAGE: Final = "cytearc:0.1.0"
N_WORKERS: Final = 2
WORKER_MEMORY: Final = "4GiB"
"""Each worker's ``--memory-limit``: the per-worker budget CyteArc sizes its plans by."""
RESOURCES: Final = {
    "requests": {"cpu": "1", "memory": "4Gi"},
    "limits": {"cpu": "1", "memory": "4Gi"},
}
"""Of every pod (``make_cluster_spec`` gives the scheduler the workers' resources): ``4Gi`` is ``4GiB``."""
WORKER_COMMAND: Final = [
    *("dask", "worker", "--nthreads", "1", "--memory-limit", WORKER_MEMORY),
    *("--local-directory", "/scratch"),
]
SCHEDULER_COMMAND: Final = ["dask", "scheduler", "--host", "0.0.0.0"]
"""Listening on every address of the pod. The image has Dask's ``dask`` command, not the
``dask-scheduler`` that ``make_cluster_spec`` writes."""
ENV: Final = [
    {
        "name": name,
        "valueFrom": {"secretKeyRef": {"name": "cytearc-s3", "key": name, "optional": True}},
    }
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
]
"""S3 credentials from the secret ``cytearc-s3``, when it exists."""
DATA_CLAIM: Final = "cytearc-data"
"""The ``ReadWriteMany`` volume claim of ``data.yaml``, mounted at ``/data`` on every worker."""
SECURITY: Final = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000, "runAsNonRoot": True}


def cluster_spec() -> dict[str, Any]:
    """The ``DaskCluster`` resource: ``make_cluster_spec`` of the parameters, with the volumes.

    Returns
    -------
    dict
        The resource, as ``daskcluster.yaml`` writes it.
    """
    spec = make_cluster_spec(
        name=NAME,
        image=IMAGE,
        n_workers=N_WORKERS,
        resources=RESOURCES,
        env=ENV,
        worker_command=WORKER_COMMAND,
    )
    scheduler = spec["spec"]["scheduler"]["spec"]
    scheduler["containers"][0]["args"] = SCHEDULER_COMMAND
    worker = spec["spec"]["worker"]["spec"]
    worker["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    worker["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}},
        {"name": "scratch", "emptyDir": {}},
    ]
    for pod in (scheduler, worker):
        pod["securityContext"] = SECURITY
    return spec  # type: ignore[no-any-return]


def main(store: str) -> None:
    """Start the cluster, run the standard analysis of ``store`` on it, delete the cluster.

    Parameters
    ----------
    store
        A store on the data volume (``/data/...``) or on S3.
    """
    with (
        KubeCluster(custom_cluster_spec=cluster_spec()) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(N_WORKERS)
        ds = DataStore(store, zarr_mode="r+", cluster=client)
        run = ds.pipeline.run("rna_standard")
        print(run.summary())


if __name__ == "__main__":
    main(sys.argv[1])
