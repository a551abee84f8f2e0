"""Composites verified, refused by repack, exported like the merged copy, and killed mid-creation.

Three small local sources with partly different features. ``verify`` reads
the virtual counts through the sources and names a damaged source shard;
``repack_zarr`` refuses a composite before writing; ``to_h5ad``, ``to_mtx``
and ``to_anndata(matrix="normed")`` equal those of ``DataStoreMerge`` of the
same sources; a ``create_composite`` killed after it started writing leaves
a store that does not open, at a destination that must be removed first.
"""

from __future__ import annotations

import gzip
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
import zarr

from cytearc import DataStore
from cytearc.errors import CompositeFormatError, DestinationExistsError, StoreFormatError
from cytearc.storage.composite import COMPOSITE_ATTRIBUTE, COMPOSITE_GROUP
from cytearc.tools import DataStoreMerge, create_composite, repack_zarr

if TYPE_CHECKING:
    from cytearc.engine.cluster import Engine

SOURCE_COUNTS = "matrices/RNA/counts"
SOURCE_COUNTS_T = "matrices/RNA/countsT"


@pytest.fixture(scope="module")
def sources(composite_sources: dict[str, Path]) -> dict[str, Path]:
    """The three sources (tests/cytearc/tools/conftest.py), under a shorter name."""
    return composite_sources


@pytest.fixture(scope="module")
def built(sources: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The composite of the sources and their merged copy."""
    folder = tmp_path_factory.mktemp("built")
    composite = create_composite(
        folder / "abc.zarr", sources, cluster="threads", show_progress=False
    )
    merged = DataStoreMerge(
        list(sources.values()),
        folder / "m.zarr",
        names=list(sources),
        cluster="threads",
        show_progress=False,
    ).dump()
    return Path(composite), Path(merged)


def _files(*paths: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() for path in paths for p in sorted(path.rglob("*")) if p.is_file()
    }


def _flip(shard: Path) -> bytes:
    """Invert a run of bytes in the middle of ``shard``; return its intact bytes."""
    intact = shard.read_bytes()
    damaged = bytearray(intact)
    middle = len(damaged) // 2
    damaged[middle : middle + 64] = bytes(b ^ 0xFF for b in damaged[middle : middle + 64])
    shard.write_bytes(bytes(damaged))
    return intact


def test_a_composite_verifies_and_is_left_unchanged(
    built: tuple[Path, Path], sources: dict[str, Path], engine: Engine
) -> None:
    """Bindings, virtual counts and countsT, summaries and the dataset fingerprint are all ok."""
    composite, _ = built
    before = _files(composite, *sources.values())
    report = DataStore(composite, cluster=engine.client, show_progress=False).verify()
    assert report.ok, report
    assert [(c.item, c.what, c.status) for c in report.checks] == [
        *(
            (f"zarr.json/{COMPOSITE_ATTRIBUTE}/sources/{name}", "source matches its binding", "ok")
            for name in sources
        ),
        ("matrices/RNA/counts", "content fingerprint", "ok"),
        ("matrices/RNA/countsT", "same values as counts", "ok"),
        ("matrices/RNA/countSummaries/rowSums", "summary of counts", "ok"),
        ("matrices/RNA/countSummaries/rowPositive", "summary of counts", "ok"),
        ("matrices/RNA/countSummaries/columnPositive", "summary of counts", "ok"),
        ("zarr.json", "dataset fingerprint", "ok"),
    ]
    assert _files(composite, *sources.values()) == before


def test_verify_names_the_damaged_shard_of_a_source(
    sources: dict[str, Path], tmp_path: Path, engine: Engine
) -> None:
    """A source shard that no longer decodes opens (identities are attributes) but verify names it.

    Damage of the source's ``counts`` is found reading the virtual counts,
    damage of its ``countsT`` reading the virtual countsT; values changed
    under the source's recorded fingerprint, and a source whose identity
    changed after the composite was opened, are damage too.
    """
    copy = Path(shutil.copytree(sources["b"], tmp_path / "b.zarr"))
    composite = create_composite(
        tmp_path / "ab.zarr",
        {"a": sources["a"], "b": copy},
        cluster="threads",
        show_progress=False,
    )

    def verify() -> tuple[DataStore, object]:
        ds = DataStore(composite, cluster=engine.client, show_progress=False)
        return ds, ds.verify()

    for array, check in (
        (SOURCE_COUNTS, "content fingerprint"),
        (SOURCE_COUNTS_T, "same values as counts"),
    ):
        shard = copy / array / "c" / "0" / "0"
        intact = _flip(shard)
        try:
            ds, report = verify()
        finally:
            shard.write_bytes(intact)
        assert not report.ok, report
        (damaged,) = report.damaged
        assert (damaged.item, damaged.what) == (f"matrices/RNA/{Path(array).name}", check)
        assert damaged.damage is not None
        assert (damaged.damage.array, damaged.damage.chunk) == (f"{copy}/{array}", "c/0/0")
        assert "source 'b'" in damaged.damage.found
        assert "cytearc verify" in damaged.damage.remedy
    counts = zarr.open_array(copy / SOURCE_COUNTS, mode="r+")
    counts[5, 7] = counts[5, 7] + 3
    _, report = verify()
    assert report.damage is not None
    assert report.damage.array == "matrices/RNA/counts"
    assert "cell 305 (row 5 of source 'b')" in report.damage.found
    counts[5, 7] = counts[5, 7] - 3
    ds, report = verify()
    assert report.ok, report
    root = zarr.open_group(copy, mode="r+")
    fingerprint = root.attrs["cytearc:datasetFingerprint"]
    root.attrs["cytearc:datasetFingerprint"] = "sha256:" + "0" * 64
    try:
        report = ds.verify()
    finally:
        root.attrs["cytearc:datasetFingerprint"] = fingerprint
    (damaged,) = report.damaged
    assert damaged.item == f"zarr.json/{COMPOSITE_ATTRIBUTE}/sources/b"
    assert damaged.damage is not None
    assert damaged.damage.array == str(copy)


@pytest.mark.parametrize("data_only", [False, True])
def test_repack_refuses_a_composite_and_writes_nothing(
    built: tuple[Path, Path], tmp_path: Path, data_only: bool
) -> None:
    """Both paths of repack_zarr refuse a composite by name, naming SubsetZarr and DataStoreMerge."""
    composite, _ = built
    destination = tmp_path / "repacked.zarr"
    with pytest.raises(CompositeFormatError, match=r"SubsetZarr.*DataStoreMerge"):
        repack_zarr(
            composite, destination, data_only=data_only, cluster="threads", show_progress=False
        )
    assert not destination.exists()


def _mtx(folder: Path) -> tuple[sp.coo_matrix, bytes, bytes]:
    with gzip.open(folder / "matrix.mtx.gz") as f:
        matrix = sp.coo_matrix(scipy.io.mmread(f))
    return (
        matrix,
        gzip.decompress((folder / "features.tsv.gz").read_bytes()),
        gzip.decompress((folder / "barcodes.tsv.gz").read_bytes()),
    )


def test_exports_of_a_composite_equal_the_merged_copys(
    built: tuple[Path, Path], tmp_path: Path, engine: Engine
) -> None:
    """to_h5ad, to_mtx and to_anndata(matrix='normed') give the merged copy's values and tables."""
    stores = {
        name: DataStore(path, cluster=engine.client, show_progress=False)
        for name, path in zip(("composite", "merged"), built, strict=True)
    }
    h5ad = {
        name: ad.read_h5ad(ds.to_h5ad(tmp_path / f"{name}.h5ad")) for name, ds in stores.items()
    }
    assert h5ad["composite"].shape == h5ad["merged"].shape == (750, 600)
    assert (h5ad["composite"].X != h5ad["merged"].X).nnz == 0
    assert h5ad["composite"].X.dtype == h5ad["merged"].X.dtype
    assert h5ad["composite"].obs_names.tolist() == h5ad["merged"].obs_names.tolist()
    assert h5ad["composite"].var_names.tolist() == h5ad["merged"].var_names.tolist()
    mtx = {name: _mtx(Path(ds.to_mtx(tmp_path / f"{name}.mtx"))) for name, ds in stores.items()}
    (matrix, features, barcodes), (m_matrix, m_features, m_barcodes) = mtx.values()
    assert matrix.shape == (600, 750)
    assert (matrix.tocsr() != m_matrix.tocsr()).nnz == 0
    assert (features, barcodes) == (m_features, m_barcodes)
    normed = {name: ds.to_anndata(matrix="normed") for name, ds in stores.items()}
    np.testing.assert_array_equal(normed["composite"].X.toarray(), normed["merged"].X.toarray())
    assert (
        normed["composite"].uns["cytearc"]["normalization"]
        == (normed["merged"].uns["cytearc"]["normalization"])
    )


_KILLED = textwrap.dedent(
    """
    import sys, time
    import cytearc.tools.composite as composite

    write_maps = composite._write_maps

    def slow(root, maps):
        write_maps(root, maps)
        print("maps written", flush=True)
        time.sleep(120)

    composite._write_maps = slow
    names = sys.argv[2::2]
    composite.create_composite(
        sys.argv[1], dict(zip(names, sys.argv[3::2])), cluster="threads", show_progress=False
    )
    """
)


@pytest.mark.slow
def test_a_killed_creation_leaves_a_store_that_does_not_open(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    """SIGKILL after the maps are written: the store is refused, and its destination must be removed.

    The child pauses after writing the ``_composite`` maps (before the
    summaries and the completing attributes), so the kill lands mid-write.
    """
    destination = tmp_path / "killed.zarr"
    arguments = [str(v) for name, path in sources.items() for v in (name, path)]
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(destination), *arguments],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "maps written"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert (destination / COMPOSITE_GROUP / "zarr.json").is_file()
    assert zarr.open_group(destination, mode="r").attrs[COMPOSITE_ATTRIBUTE]["complete"] is False
    with pytest.raises(
        StoreFormatError, match="the create_composite that created this store did not finish"
    ):
        DataStore(destination)
    with pytest.raises(DestinationExistsError, match=re.escape(str(destination))):
        create_composite(destination, sources, cluster="threads", show_progress=False)
    create_composite(destination, sources, cluster="threads", show_progress=False, overwrite=True)
    assert DataStore(destination, cluster="threads").verify().ok
