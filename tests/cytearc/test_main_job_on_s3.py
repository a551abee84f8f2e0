"""The main job with every object on S3 (moto on 127.0.0.1) equals the same job on local paths.

Import from ``s3://`` to ``s3://``, the standard recipe on the S3 store, a
cube pooled to S3, limma-voom on it and an H5AD export to S3: the dataset,
the run's outputs, the cube's fingerprint, the limma-voom table and the
exported counts are those of the local run, and the storage options (the
credentials) appear in none of the bytes written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anndata as ad
import numpy as np
import pytest
import s3fs

from cytearc import DataStore
from cytearc.datasets.synthetic import Params, write_dataset
from cytearc.io.detect import import_data
from cytepool import read_cube
from cytepool.de import limma_voom

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine

RECIPE: dict[str, Any] = {"n_top": 300, "n_comps": 10, "resolution": 0.5}
SECRET = "s3cr3t-never-stored"


def _job(
    source: str | Path,
    store: str | Path,
    cube: str | Path,
    h5ad: str | Path,
    *,
    engine: Engine,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    """Import, recipe, pool, limma-voom and export; what each produced."""
    remote = {"storage_options": options} if options else {}
    imported = import_data(
        source,
        store,
        cluster=engine.client,
        show_progress=False,
        **remote,
        **({"source_storage_options": options} if options else {}),
    )
    ds = DataStore(
        imported.path, zarr_mode="r+", cluster=engine.client, show_progress=False, **remote
    )
    run = ds.pipeline.run("rna_standard", **RECIPE)
    written = ds.compare.write_bulk(
        cube,
        sample_key="sample",
        group_key="RNA_leiden_cluster",
        cell_selection=run.outputs["cells"],
        **remote,
    )
    pooled = read_cube(written, **remote)
    pooled.verify_fingerprint()
    table = limma_voom(pooled, design="~ donor + condition", coef="conditionstim").table()
    exported = ds.to_h5ad(h5ad, run=run.run_id, **remote)
    return {
        "dataset": ds.dataset_fingerprint,
        "labels": run.artifact("clustering").read("labels"),
        "pca": run.artifact("pca").read("coords"),
        "cube": pooled.fingerprint,
        "table": table,
        "exported": exported,
    }


@pytest.mark.slow
def test_the_main_job_on_s3_equals_the_local_run(
    tmp_path: Path, engine: Engine, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """Every fingerprint and value of the S3 run equals the local run's; the secret is in no object."""
    source = tmp_path / "source"
    write_dataset(Params(n_cells=700, n_genes=600, seed=3), source)
    local = _job(
        source / "data.h5ad",
        tmp_path / "ds.zarr",
        tmp_path / "pool.cube.zarr",
        tmp_path / "ds.h5ad",
        engine=engine,
        options=None,
    )
    options = {**s3_options, "secret": SECRET}
    fs = s3fs.S3FileSystem(**s3_options, skip_instance_cache=True)
    fs.put_file(str(source / "data.h5ad"), f"{s3_bucket[5:]}/source/data.h5ad")
    before = set(fs.find(s3_bucket[5:]))
    remote = _job(
        f"{s3_bucket}/source/data.h5ad",
        f"{s3_bucket}/ds.zarr",
        f"{s3_bucket}/pool.cube.zarr",
        f"{s3_bucket}/ds.h5ad",
        engine=engine,
        options=options,
    )
    assert remote["dataset"] == local["dataset"]
    np.testing.assert_array_equal(remote["labels"], local["labels"])
    np.testing.assert_array_equal(remote["pca"], local["pca"])
    assert remote["cube"] == local["cube"]
    assert remote["table"].equals(local["table"])
    assert remote["exported"] == f"{s3_bucket}/ds.h5ad"
    fs.get_file(f"{s3_bucket[5:]}/ds.h5ad", str(tmp_path / "back.h5ad"))
    back, mine = ad.read_h5ad(tmp_path / "back.h5ad"), ad.read_h5ad(local["exported"])
    assert (back.X != mine.X).nnz == 0
    assert back.obs.equals(mine.obs)
    written = sorted(set(fs.find(s3_bucket[5:])) - before)
    assert any(k.endswith("ds.zarr/zarr.json") for k in written)
    assert any(k.endswith("pool.cube.zarr/zarr.json") for k in written)
    leaked = [k for k in written if SECRET.encode() in fs.cat_file(k)]
    assert not leaked
