"""A store on an S3 server (moto on 127.0.0.1) opens through fsspec and reads the local values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import s3fs

from cytearc import DataStore
from cytearc.io.detect import CrToZarr

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine


@pytest.mark.slow
def test_store_on_s3_reads_like_local(
    tmp_path: Path, shared_data: Path, engine: Engine, s3_options: dict[str, Any], s3_bucket: str
) -> None:
    """Counts, countsT, tables and identity read from S3 equal the local store's."""
    source = shared_data / "10x_v3_pbmc1k_chr21" / "filtered_feature_bc_matrix.h5"
    local_path = (
        CrToZarr(source, tmp_path / "ds.zarr", engine=engine, show_progress=False).dump().path
    )
    fs = s3fs.S3FileSystem(**s3_options)
    fs.put(str(local_path), f"{s3_bucket[5:]}/ds.zarr", recursive=True)
    fs.invalidate_cache()
    local = DataStore(local_path)
    remote = DataStore(f"{s3_bucket}/ds.zarr", storage_options=s3_options)
    assert remote.dataset_fingerprint == local.dataset_fingerprint
    assert remote.RNA.content_fingerprint == local.RNA.content_fingerprint
    np.testing.assert_array_equal(
        remote.RNA.counts.compute(scheduler="threads"), local.RNA.counts.compute()
    )
    np.testing.assert_array_equal(
        remote.RNA.countsT[:, :100].compute(scheduler="threads"),
        local.RNA.countsT[:, :100].compute(),
    )
    assert remote.cells.fetch_all("ids").tolist() == local.cells.fetch_all("ids").tolist()
    assert (
        remote.RNA.features.fetch_all("names").tolist()
        == local.RNA.features.fetch_all("names").tolist()
    )
