"""The deployment recipes of ``deploy/`` as the tools that run them read them, without running them.

Kubernetes, SLURM and Docker are absent here, so each file is checked
against the schema or the code of the tool that consumes it: the
dask-kubernetes operator's ``DaskCluster`` CRD (with every key declared,
since Kubernetes silently drops unknown fields), Kubernetes' own schemas
(``kubernetes-validate``), dask-jobqueue's job script, and the Compose
specification (``check-jsonschema``). Every worker of every recipe runs one
thread and has a memory limit equal to its container's or job's share.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import itertools
import re
import shlex
import subprocess
import sys
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import dask.config
import jsonschema
import kubernetes_validate
import pytest
import yaml
from dask.utils import parse_bytes
from dask_jobqueue.slurm import SLURMCluster, slurm_format_bytes_ceil
from dask_kubernetes.operator import make_cluster_spec
from kubernetes.utils import parse_quantity

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from types import ModuleType

ROOT: Final = Path(__file__).resolve().parents[2]
DEPLOY: Final = ROOT / "deploy"
KUBERNETES: Final = DEPLOY / "kubernetes"
SLURM: Final = DEPLOY / "slurm"
SBATCH: Final = SLURM / "cytearc-cluster.sbatch"
CRD: Final = "deployment/helm/dask-kubernetes-operator/crds/daskcluster.yaml"
KUBERNETES_VERSIONS: Final = ("1.30", kubernetes_validate.utils.latest_version())
"""The oldest Kubernetes the recipe is for, and the newest ``kubernetes-validate`` knows."""
OBJECT_FIELDS: Final = ("apiVersion", "kind", "metadata")
"""Fields of every Kubernetes object, which a CRD's schema does not declare."""


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _daskcluster() -> dict[str, Any]:
    (document,) = _documents(KUBERNETES / "daskcluster.yaml")
    assert isinstance(document, dict)
    return document


def _quantity(text: str) -> Decimal:
    """A Kubernetes quantity (``4Gi``, ``500m``) as the number Kubernetes reads."""
    return Decimal(parse_quantity(text))  # type: ignore[no-untyped-call]


def _slurm_memory(n: int) -> str:
    """``n`` bytes as dask-jobqueue writes them in ``#SBATCH --mem``."""
    return str(slurm_format_bytes_ceil(n))  # type: ignore[no-untyped-call]


def _option(argv: Sequence[str], name: str) -> str:
    """The value of ``--name VALUE`` (or ``--name=VALUE``) in a command line; exactly one."""
    values = [b for a, b in itertools.pairwise(argv) if a == name]
    values += [a.split("=", 1)[1] for a in argv if a.startswith(f"{name}=")]
    assert len(values) == 1, f"{name} in {list(argv)}"
    return values[0]


# --- every file --------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")]),
    ids=lambda p: str(p.relative_to(DEPLOY)),
)
def test_every_yaml_file_loads(path: Path) -> None:
    """Every YAML file of ``deploy/`` is YAML whose documents are mappings."""
    documents = _documents(path)
    assert documents
    assert all(isinstance(d, dict) and d for d in documents)


def test_the_dockerfile_installs_the_project_with_one_pip_install() -> None:
    """One ``RUN`` installs the project with its ``s3`` and ``jupyter`` extras, from the copied sources."""
    text = (DEPLOY / "Dockerfile").read_text()
    instructions = [
        " ".join(line.split())
        for line in re.sub(r"\\\n", " ", text).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    runs = [i for i in instructions if i.startswith("RUN ")]
    installs = [r for r in runs if "pip install" in r]
    assert len(installs) == 1, runs
    assert sum(r.count("pip install") for r in runs) == 1
    (target,) = re.findall(r'pip install "?(/\S+?)\[([^\]]+)\]"?', installs[0])
    extras = set(target[1].split(","))
    assert {"s3", "jupyter"} <= extras
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras <= set(declared["optional-dependencies"])
    copies = [i.split()[1:] for i in instructions if i.startswith("COPY ")]
    assert all((ROOT / s).exists() for c in copies for s in c[:-1]), copies
    into = {c[-1].rstrip("/"): c[:-1] for c in copies}
    assert "pyproject.toml" in into[target[0]]
    assert {f"{target[0]}/cytearc", f"{target[0]}/cytepool"} <= set(into)
    assert any(i.startswith("USER ") and i != "USER root" for i in instructions)


# --- Kubernetes --------------------------------------------------------------


@functools.cache
def _crd_schema(api_version: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the installed operator's ``DaskCluster`` CRD for ``api_version``."""
    crd = yaml.safe_load(
        importlib.resources.files("dask_kubernetes.operator").joinpath(CRD).read_text()
    )
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert found["served"]
    return found["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def undeclared(value: object, schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """The paths of the keys of ``value`` that ``schema`` does not declare (Kubernetes prunes them).

    A key is declared by ``properties``, or by an ``additionalProperties``
    schema; below ``x-kubernetes-preserve-unknown-fields`` anything is kept.
    """
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", False)
        for key, item in value.items():
            if key in properties:
                yield from undeclared(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                yield from undeclared(item, extra, f"{path}.{key}")
            elif extra is not True:
                yield f"{path}.{key}"
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from undeclared(item, schema["items"], f"{path}[{i}]")


def _crd_problems(manifest: dict[str, Any]) -> list[str]:
    """What the API server would refuse (schema errors) or silently drop (undeclared keys)."""
    schema = _crd_schema(manifest["apiVersion"])
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft4Validator(schema).iter_errors(manifest)
    ]
    body = {k: v for k, v in manifest.items() if k not in OBJECT_FIELDS}
    return errors + [f"undeclared {p}" for p in undeclared(body, schema)]


def test_the_daskcluster_is_valid_for_the_operators_crd() -> None:
    """The ``DaskCluster`` validates against the CRD's schema, and the CRD declares every key."""
    manifest = _daskcluster()
    assert manifest["kind"] == "DaskCluster"
    assert _crd_problems(manifest) == []


def test_the_crd_check_finds_a_wrong_type_and_a_misspelt_key() -> None:
    """The check is not vacuous: a string count is an error, a misspelt key is reported."""
    manifest = _daskcluster()
    wrong = copy.deepcopy(manifest)
    wrong["spec"]["worker"]["replicas"] = "two"
    assert any("'two' is not of type 'integer'" in p for p in _crd_problems(wrong))
    misspelt = copy.deepcopy(manifest)
    container = misspelt["spec"]["worker"]["spec"]["containers"][0]
    container["resource"] = container.pop("resources")
    assert _crd_problems(misspelt) == ["undeclared .spec.worker.spec.containers[0].resource"]


def _kubernetes_objects() -> Iterator[tuple[str, dict[str, Any]]]:
    """The Kubernetes objects of ``deploy/kubernetes``, the DaskCluster's pods as ``Pod`` objects."""
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in _documents(path):
            if document["kind"] != "DaskCluster":
                yield f"{path.name}:{document['kind']}", document
                continue
            for role in ("scheduler", "worker"):
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": document["metadata"],
                    "spec": document["spec"][role]["spec"],
                }
                yield f"{path.name}:{role}", pod
            service = document["spec"]["scheduler"]["service"]
            yield (
                f"{path.name}:service",
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": service},
            )


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("obj", [pytest.param(o, id=n) for n, o in _kubernetes_objects()])
def test_every_kubernetes_object_is_valid(obj: dict[str, Any], version: str) -> None:
    """The pods of the DaskCluster, its service, the Jupyter Deployment and Service, the claim: strictly valid."""
    kubernetes_validate.validate(obj, version, strict=True)


def test_kubernetes_validate_refuses_a_misspelt_key() -> None:
    """Strict validation is not vacuous: a misspelt container field is refused."""
    pod = dict(next(o for n, o in _kubernetes_objects() if n.endswith(":worker")))
    pod["spec"] = copy.deepcopy(pod["spec"])
    pod["spec"]["containers"][0]["memoryLimit"] = "4Gi"
    with pytest.raises(kubernetes_validate.ValidationError, match="memoryLimit"):
        kubernetes_validate.validate(pod, KUBERNETES_VERSIONS[-1], strict=True)


def test_kubernetes_workers_have_one_thread_and_their_containers_memory() -> None:
    """Each worker's ``--memory-limit`` is its container's memory limit (and request), ``--nthreads 1``."""
    worker = _daskcluster()["spec"]["worker"]
    (container,) = worker["spec"]["containers"]
    argv = container["args"]
    assert argv[:2] == ["dask", "worker"]
    assert _option(argv, "--nthreads") == "1"
    memory = parse_bytes(_option(argv, "--memory-limit"))
    resources = container["resources"]
    assert _quantity(resources["limits"]["memory"]) == memory
    assert _quantity(resources["requests"]["memory"]) == memory
    assert _quantity(resources["limits"]["cpu"]) == 1
    assert worker["replicas"] >= 2


def test_the_kubecluster_example_makes_the_manifest(kube_example: ModuleType) -> None:
    """``make_cluster_spec`` of the example's parameters has the manifest's image, resources and workers.

    With its volumes, the example's spec is the manifest itself.
    """
    manifest = _daskcluster()
    made = make_cluster_spec(
        name=kube_example.NAME,
        image=kube_example.IMAGE,
        n_workers=kube_example.N_WORKERS,
        resources=kube_example.RESOURCES,
        env=kube_example.ENV,
        worker_command=kube_example.WORKER_COMMAND,
    )
    assert made["metadata"] == manifest["metadata"]
    assert made["spec"]["worker"]["replicas"] == manifest["spec"]["worker"]["replicas"]
    for role in ("scheduler", "worker"):
        (want,) = manifest["spec"][role]["spec"]["containers"]
        (got,) = made["spec"][role]["spec"]["containers"]
        assert (got["image"], got["resources"], got["env"]) == (
            want["image"],
            want["resources"],
            want["env"],
        )
    worker_args = manifest["spec"]["worker"]["spec"]["containers"][0]["args"]
    assert made["spec"]["worker"]["spec"]["containers"][0]["args"] == worker_args
    assert kube_example.cluster_spec() == manifest


def test_jupyter_runs_the_image_and_points_at_the_scheduler() -> None:
    """The Jupyter pod runs the workers' image, mounts their data volume at their path, names the scheduler."""
    cluster = _daskcluster()
    deployment = next(
        d for d in _documents(KUBERNETES / "jupyter.yaml") if d["kind"] == "Deployment"
    )
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    worker = cluster["spec"]["worker"]["spec"]
    assert container["image"] == worker["containers"][0]["image"]
    port = next(
        p["port"]
        for p in cluster["spec"]["scheduler"]["service"]["ports"]
        if p["name"] == "tcp-comm"
    )
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CYTEARC_CLUSTER"] == f"tcp://{cluster['metadata']['name']}-scheduler:{port}"
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    worker_claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in worker["volumes"]
        if "persistentVolumeClaim" in v
    }
    (claim,) = {_documents(KUBERNETES / "data.yaml")[0]["metadata"]["name"]}
    assert set(claims.values()) == set(worker_claims.values()) == {claim}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    worker_mounts = {m["name"]: m["mountPath"] for m in worker["containers"][0]["volumeMounts"]}
    assert {mounts[n] for n in claims} == {worker_mounts[n] for n in worker_claims} == {"/data"}


# --- SLURM -------------------------------------------------------------------


def test_jobqueue_yaml_sets_only_keys_dask_jobqueue_knows() -> None:
    """Every key of ``jobqueue.yaml`` is one of dask-jobqueue's SLURM settings (no typo goes unread)."""
    ours = yaml.safe_load((SLURM / "jobqueue.yaml").read_text())
    defaults = yaml.safe_load(
        importlib.resources.files("dask_jobqueue").joinpath("jobqueue.yaml").read_text()
    )
    assert list(ours) == ["jobqueue"]
    assert list(ours["jobqueue"]) == ["slurm"]
    assert set(ours["jobqueue"]["slurm"]) <= set(defaults["jobqueue"]["slurm"])


def test_the_slurmcluster_job_script_requests_one_thread_and_the_budget_per_worker(
    slurm_example: ModuleType,
) -> None:
    """``SLURMCluster`` with ``jobqueue.yaml`` writes the configured ``#SBATCH`` lines and worker command.

    Each worker has ``memory / processes`` as ``--memory-limit`` and one thread.
    """
    config = yaml.safe_load((SLURM / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    local = {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    with (
        dask.config.set(slurm_example.load_config()),
        SLURMCluster(scheduler_options=local) as cluster,
    ):
        script = cluster.job_script()
        address = cluster.scheduler_address
    directives = [
        line.split(None, 1)[1] for line in script.splitlines() if line.startswith("#SBATCH")
    ]
    assert f"-J {config['name']}" in directives
    assert f"--cpus-per-task={config['cores']}" in directives
    assert f"--mem={_slurm_memory(parse_bytes(config['memory']))}" in directives
    assert f"-t {config['walltime']}" in directives
    (line,) = [line for line in script.splitlines() if "distributed.cli.dask_worker" in line]
    argv = shlex.split(line)
    assert argv[3] == address
    assert _option(argv, "--nthreads") == "1"
    assert config["cores"] == config["processes"]
    memory = parse_bytes(_option(argv, "--memory-limit"))
    assert memory == pytest.approx(parse_bytes(config["memory"]) / config["processes"], rel=1e-3)
    assert int(_option(argv, "--nworkers")) == config["processes"]
    assert _option(argv, "--local-directory") == config["local-directory"]


def test_the_sbatch_script_asks_one_cpu_per_worker_task() -> None:
    """The batch script is valid bash; it asks one CPU and a memory per task, and ``srun``s its workers."""
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)
    text = SBATCH.read_text()
    directives = re.findall(r"^#SBATCH (\S+)", text, re.MULTILINE)
    assert "--cpus-per-task=1" in directives
    assert any(d.startswith("--mem-per-cpu=") for d in directives)
    assert re.search(r"^srun .*\\\n\s+dask worker \\$", text, re.MULTILINE)
    assert "--scheduler-file" in text


def test_the_sbatch_script_refuses_to_guess_the_worker_memory(tmp_path: Path) -> None:
    """Without ``--mem-per-cpu`` (nor ``CYTEARC_WORKER_MEMORY``) the script stops before starting anything."""
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "1", "SLURM_NTASKS": "2", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(SBATCH)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "#SBATCH --mem-per-cpu" in done.stderr
    assert list(tmp_path.iterdir()) == []


# --- Compose -----------------------------------------------------------------


def test_the_compose_file_is_valid_for_the_compose_specification() -> None:
    """``check-jsonschema`` validates ``compose.yaml`` against the Compose specification it vendors."""
    path = DEPLOY / "compose" / "compose.yaml"
    argv = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    done = subprocess.run([*argv, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_compose_schema_check_refuses_a_misspelt_key(tmp_path: Path) -> None:
    """The Compose check is not vacuous: a misspelt service key is refused."""
    path = tmp_path / "compose.yaml"
    path.write_text((DEPLOY / "compose" / "compose.yaml").read_text().replace("deploy:", "deploi:"))
    argv = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    done = subprocess.run([*argv, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "deploi" in done.stdout


@pytest.mark.parametrize(
    "variables", [{}, {"CYTEARC_WORKER_MEMORY": "1536MiB"}], ids=["default", "set"]
)
def test_compose_workers_have_one_thread_and_their_containers_memory(
    compose: Callable[[Mapping[str, str]], Any], variables: dict[str, str]
) -> None:
    """Two workers, each ``--nthreads 1`` with ``--memory-limit`` equal to the container's memory limit.

    The limit is ``CYTEARC_WORKER_MEMORY``, 4 GiB unless it is set.
    """
    recipe = compose(variables)
    expected = parse_bytes(variables.get("CYTEARC_WORKER_MEMORY", "4GiB"))
    workers = [n for n in recipe.services if recipe.command(n)[:2] == ["dask", "worker"]]
    assert sum(recipe.replicas(n) for n in workers) == 2
    for name in workers:
        argv = recipe.command(name)
        assert _option(argv, "--nthreads") == "1"
        assert parse_bytes(_option(argv, "--memory-limit")) == expected
        limits = recipe.services[name]["deploy"]["resources"]["limits"]
        assert parse_bytes(limits["memory"]) == expected
        assert float(limits["cpus"]) == 1


def test_compose_services_share_the_image_and_the_data_volume(
    compose: Callable[[Mapping[str, str]], Any],
) -> None:
    """Scheduler, workers and Jupyter run one image built from ``deploy/Dockerfile``, with ``/data`` shared.

    Workers and Jupyter reach the scheduler by its service name and port.
    """
    recipe = compose({})
    services = recipe.services
    assert {"scheduler", "jupyter"} <= set(services)
    assert len({s["image"] for s in services.values()}) == 1
    for service in services.values():
        build = service["build"]
        context = (recipe.path.parent / build["context"]).resolve()
        assert context / build["dockerfile"] == DEPLOY / "Dockerfile"
        assert "data:/data" in service["volumes"]
    assert "data" in recipe.document["volumes"]
    port = _option(recipe.command("scheduler"), "--port")
    address = f"tcp://scheduler:{port}"
    assert recipe.environment("jupyter")["CYTEARC_CLUSTER"] == address
    assert recipe.command("worker")[2] == address


def test_compose_interpolation_follows_compose(
    compose: Callable[[Mapping[str, str]], Any],
) -> None:
    """The tests read variables as Compose does: defaults for unset (and, with ``:-``, empty) ones."""
    interpolate = compose.interpolate  # type: ignore[attr-defined]
    assert interpolate("--memory-limit ${MEM:-4GiB} $$HOME", {}) == "--memory-limit 4GiB $HOME"
    assert interpolate("${MEM:-4GiB}|${MEM-none}|$MEM", {"MEM": ""}) == "4GiB||"
    assert interpolate("${MEM:-4GiB}", {"MEM": "2GiB"}) == "2GiB"
    with pytest.raises(ValueError, match="do not interpolate"):
        interpolate("${MEM:?set it}", {})
