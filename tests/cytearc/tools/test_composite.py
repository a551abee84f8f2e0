"""Composites: sources read in place give the values, analyses and cubes of a merged copy.

Two sources on S3 (moto on 127.0.0.1) and one local store, with partly
different features; the composite's virtual counts, summaries, fingerprints,
recipe results, markers and cube equal those of ``DataStoreMerge`` of the
same sources. The manifest is strict, a changed source is refused, and the
credentials of the sources are in none of the composite's bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import zarr

from cytearc import DataStore
from cytearc.datasets import write_store
from cytearc.errors import CompositeFormatError, MergePlanError, OperationArgumentError
from cytearc.storage.composite import COMPOSITE_ATTRIBUTE
from cytearc.tools import DataStoreMerge, SubsetZarr, create_composite, repack_zarr
from cytepool import read_cube

if TYPE_CHECKING:
    from cytearc.engine.cluster import Engine

SECRET = "composite-secret-never-stored"


def test_a_local_composite_has_the_merged_copys_counts_and_identity(
    composite_sources: dict[str, Path], tmp_path: Path, engine: Engine
) -> None:
    """Counts, countsT, summaries and fingerprints equal DataStoreMerge's; bare zarr finds no counts."""
    path = create_composite(
        tmp_path / "abc.zarr", composite_sources, cluster=engine.client, show_progress=False
    )
    merged = DataStoreMerge(
        list(composite_sources.values()),
        tmp_path / "m.zarr",
        names=list(composite_sources),
        cluster=engine.client,
        show_progress=False,
    ).dump()
    comp, copy = DataStore(path, cluster=engine.client), DataStore(merged)
    assert comp.RNA.shape == copy.RNA.shape
    assert comp.RNA.content_fingerprint == copy.RNA.content_fingerprint
    assert comp.dataset_fingerprint == copy.dataset_fingerprint
    np.testing.assert_array_equal(comp.RNA.counts.compute(), copy.RNA.counts.compute())
    np.testing.assert_array_equal(comp.RNA.countsT[:40].compute(), copy.RNA.countsT[:40].compute())
    np.testing.assert_array_equal(
        comp.RNA.feature_rows(np.array([5, 2, 599])), copy.RNA.feature_rows(np.array([5, 2, 599]))
    )
    for name in ("rowSums", "rowPositive", "columnPositive"):
        np.testing.assert_array_equal(comp.RNA.summary(name), copy.RNA.summary(name))
    assert comp.cells.fetch_all("ids").tolist() == copy.cells.fetch_all("ids").tolist()
    root = zarr.open_group(path, mode="r")
    assert "counts" not in root["matrices/RNA"]
    assert root.attrs[COMPOSITE_ATTRIBUTE]["complete"] is True
    subset = SubsetZarr(
        comp,
        tmp_path / "sub.zarr",
        cells=np.arange(0, 750, 2),
        cluster=engine.client,
        show_progress=False,
    ).dump()
    expected = SubsetZarr(
        copy,
        tmp_path / "sub2.zarr",
        cells=np.arange(0, 750, 2),
        cluster=engine.client,
        show_progress=False,
    ).dump()
    assert DataStore(subset).dataset_fingerprint == DataStore(expected).dataset_fingerprint
    assert "counts" in zarr.open_group(subset, mode="r")["matrices/RNA"]


def test_the_manifest_is_strict_and_sources_must_stay_unchanged(
    composite_sources: dict[str, Path], tmp_path: Path
) -> None:
    """Unknown or missing fields, an unfinished creation, a changed map or source are refused by name."""
    path = Path(
        create_composite(
            tmp_path / "ab.zarr",
            {"a": composite_sources["a"], "b": composite_sources["b"]},
            cluster="threads",
            show_progress=False,
        )
    )
    root = zarr.open_group(path, mode="r+")
    good = dict(root.attrs[COMPOSITE_ATTRIBUTE])
    for bad, match in (
        ({**good, "version": 2}, r"unknown \['version'\]"),
        ({k: v for k, v in good.items() if k != "maps"}, r"missing \['maps'\]"),
        ({**good, "complete": False}, "did not finish"),
        (
            {**good, "sources": [{**good["sources"][0], "secret": "x"}, good["sources"][1]]},
            r"unknown \['secret'\]",
        ),
    ):
        root.attrs[COMPOSITE_ATTRIBUTE] = bad
        with pytest.raises(CompositeFormatError, match=match):
            DataStore(path)
    root.attrs[COMPOSITE_ATTRIBUTE] = good
    rows = root["_composite/sourceRows"]
    saved = rows[:]
    rows[0] = 1
    with pytest.raises(CompositeFormatError, match="digest"):
        DataStore(path)
    rows[:] = saved
    assert DataStore(path).RNA.shape[0] == 500
    with pytest.raises(OperationArgumentError, match="neither a composite nor a mount"):
        DataStore(composite_sources["a"], source_storage_options={"a": {}})
    with pytest.raises(CompositeFormatError, match="no source named"):
        DataStore(path, source_storage_options={"z": {}})
    with pytest.raises(CompositeFormatError, match="nested composites"):
        create_composite(
            tmp_path / "nested.zarr", {"x": path, "c": composite_sources["c"]}, cluster="threads"
        )
    with pytest.raises(MergePlanError, match="no assay"):
        create_composite(
            tmp_path / "none.zarr", {"a": composite_sources["a"]}, assay="ADT", cluster="threads"
        )
    changed = tmp_path / "b-changed.zarr"
    import shutil  # noqa: PLC0415

    shutil.copytree(composite_sources["b"], changed)
    other = Path(
        create_composite(
            tmp_path / "ac.zarr",
            {"a": composite_sources["a"], "b": changed},
            cluster="threads",
            show_progress=False,
        )
    )
    DataStore(changed, zarr_mode="r+").cells.insert("note", np.zeros(200, dtype=np.int64))
    assert DataStore(other).RNA.shape[0] == 500  # a new cell column is no change of identity
    shutil.rmtree(changed)
    write_store(changed, n_cells=200, n_genes=600, seed=9, cluster="threads")
    with pytest.raises(CompositeFormatError, match="not the store the composite was made from"):
        DataStore(other)


@pytest.mark.slow
def test_a_composite_of_s3_and_composite_sources_analyses_like_the_merged_copy(
    composite_sources: dict[str, Path],
    tmp_path: Path,
    engine: Engine,
    s3_options: dict[str, Any],
    s3_bucket: str,
) -> None:
    """Two sources on S3 and one local: virtual counts, the recipe's clusters, markers and the cube equal the merge's.

    The sources' credentials (a secret the server does not check) appear in
    no byte of the composite, its artifacts or its run; the cache's folder
    is gone once the composite is closed.
    """
    secret_options = {**s3_options, "secret": SECRET}
    remote = {
        name: repack_zarr(
            composite_sources[name],
            f"{s3_bucket}/{name}.zarr",
            destination_storage_options=s3_options,
            cluster=engine.client,
            show_progress=False,
        )
        for name in ("a", "b")
    }
    sources = {"a": remote["a"], "b": remote["b"], "c": composite_sources["c"]}
    options = {"a": secret_options, "b": secret_options}
    path = Path(
        create_composite(
            tmp_path / "abc.zarr",
            sources,
            source_storage_options=options,
            cluster=engine.client,
            show_progress=False,
        )
    )
    merged = DataStoreMerge(
        list(composite_sources.values()),
        tmp_path / "m.zarr",
        names=["a", "b", "c"],
        cluster=engine.client,
        show_progress=False,
    ).dump()
    results = {}
    for name, store, extra in (
        ("composite", path, {"source_storage_options": options}),
        ("merged", merged, {}),
    ):
        ds = DataStore(store, zarr_mode="r+", cluster=engine.client, show_progress=False, **extra)
        run = ds.pipeline.run("rna_standard", n_top=300, n_comps=10, resolution=0.5)
        cube = ds.compare.write_bulk(
            tmp_path / f"{name}.cube.zarr",
            sample_key="orig_sample",
            group_key="RNA_leiden_cluster",
            cell_selection=run.outputs["cells"],
        )
        results[name] = {
            "labels": run.artifact("clustering").read("labels"),
            "markers": run.artifact("markers").read("padj"),
            "cube": read_cube(cube).fingerprint,
            "counts": ds.RNA.counts[::7].compute(),
        }
        if name == "composite":
            assert ds.composite is not None
            cache = ds.composite.cache.path
            assert cache.is_dir()  # the workers read the S3 sources through it
            ds.close()
            assert not cache.exists()
    np.testing.assert_array_equal(results["composite"]["counts"], results["merged"]["counts"])
    np.testing.assert_array_equal(results["composite"]["labels"], results["merged"]["labels"])
    np.testing.assert_array_equal(results["composite"]["markers"], results["merged"]["markers"])
    assert results["composite"]["cube"] == results["merged"]["cube"]
    leaked = [p for p in path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaked
    assert SECRET not in json.dumps(dict(zarr.open_group(path, mode="r").attrs))
