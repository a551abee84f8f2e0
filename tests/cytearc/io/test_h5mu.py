"""MuData import: every modality an assay, read band by band with h5py, checked against mudata's reader."""

from __future__ import annotations

import json
import tempfile
import warnings
from typing import TYPE_CHECKING, Any

import anndata as ad
import fsspec
import h5py
import mudata
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cytearc import DataStore, import_data, import_h5ad, import_h5mu
from cytearc.cli import main
from cytearc.errors import AssayTypeError, SourceFormatError
from cytearc.io.detect import detect_importer
from cytearc.io.h5ad import H5adSource
from cytearc.io.h5mu import MAX_SKIPPED_ROWS, H5muSource, H5muToZarr
from cytearc.testing import assemble_bands

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

THREADS = {"cluster": "threads", "show_progress": False}
MULTIOME = ("10x_multiome_pbmc_subset", "test_rna_atac.h5mu")
ABSENT = (3, 4, 17, 39)
"""The global cells that the synthetic file's prot modality lacks."""


@pytest.fixture(autouse=True)
def mudata_options() -> Iterator[None]:
    """Use mudata's coming default, without the FutureWarning its current default gives on every update."""
    with mudata.set_options(pull_on_update=False):
        yield


def read_reference(path: Path) -> mudata.MuData:
    """The file read by mudata; the multiome file predates mudata's header and anndata's encoding metadata, which they warn about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The HDF5 file was not created by muon/mudata")
        warnings.simplefilter("ignore", ad.OldFormatWarning)
        return mudata.read_h5mu(path)


def aligned(reference: mudata.MuData, name: str, layer: str | None = None) -> np.ndarray:
    """Modality ``name`` (or its layer) on mudata's global cells through mudata's obsmap, zeros where it lacks a cell."""
    modality = reference[name]
    values = modality.X if layer is None else modality.layers[layer]
    dense = values.toarray() if sp.issparse(values) else np.asarray(values)
    rows = reference.obsmap[name]
    out = np.zeros((reference.n_obs, modality.n_vars), dtype=np.float64)
    out[rows > 0] = dense[rows[rows > 0].astype(np.int64) - 1]
    return out


def write_multimodal(
    path: Path, *, n_cells: int = 40, normalized_x: bool = False, seed: int = 0
) -> Path:
    """RNA of every cell and a protein panel lacking the cells ABSENT, stored in another order, written by mudata."""
    rng = np.random.default_rng(seed)
    cells = [f"BC{i:03d}-1" for i in range(n_cells)]
    counts = (rng.poisson(2.0, (n_cells, 12)) * (rng.random((n_cells, 12)) < 0.5)).astype(
        np.float32
    )
    rna = ad.AnnData(
        sp.csr_matrix(counts),
        obs=pd.DataFrame({"n_genes": (counts > 0).sum(axis=1)}, index=cells),
        var=pd.DataFrame({"gene_ids": [f"ENSG{j:05d}" for j in range(12)]}, index=[f"G{j}" for j in range(12)]),
    )  # fmt: skip
    if normalized_x:
        rna.layers["counts"] = sp.csr_matrix(counts.astype(np.int32))
        rna.X = sp.csr_matrix(np.log1p(counts / 3))
    measured = [c for i, c in enumerate(cells) if i not in ABSENT]
    stored = rng.permutation(measured)
    prot = ad.AnnData(
        sp.csr_matrix(rng.poisson(30, (stored.size, 5)).astype(np.int64)),
        obs=pd.DataFrame(index=stored),
        var=pd.DataFrame(index=[f"CD{k}" for k in range(5)]),
    )
    data = mudata.MuData({"rna": rna, "prot": prot})
    data.obs["donor"] = pd.Categorical(rng.choice(["d1", "d2"], n_cells))
    data.write_h5mu(path)
    return path


def test_the_multiome_file_imports_rna_and_atac_as_mudata_reads_them(
    shared_data: Path, tmp_path: Path
) -> None:
    """test_rna_atac.h5mu: RNA (with countsT) and ATAC (counts only) equal mudata's modalities, with their cells and features."""
    path = shared_data.joinpath(*MULTIOME)
    reference = read_reference(path)
    result = import_h5mu(path, tmp_path / "m.zarr", **THREADS)
    assert result.assays == {"ATAC": "ATAC", "RNA": "RNA"}
    assert result.shapes == {"ATAC": (1000, 174), "RNA": (1000, 45)}
    assert result.dtypes == {"ATAC": "uint8", "RNA": "uint8"}
    ds = DataStore(result.path)
    for assay, name in (("RNA", "rna"), ("ATAC", "atac")):
        expected = aligned(reference, name)
        np.testing.assert_array_equal(ds.assays[assay].counts.compute(), expected)
        features = ds.assays[assay].features
        var = reference[name].var
        assert features.fetch_all("ids").tolist() == var.index.tolist()
        assert features.fetch_all("gene_ids").tolist() == var["gene_ids"].tolist()
        assert features.fetch_all("interval").tolist() == var["interval"].tolist()
        assert set(features.fetch_all("feature_types")) == {assay}
    np.testing.assert_array_equal(ds.RNA.countsT.compute(), aligned(reference, "rna").T)
    with pytest.raises(AttributeError, match="no countsT"):
        _ = ds.ATAC.countsT
    assert ds.cells.fetch_all("ids").tolist() == reference.obs_names.tolist()
    assert not {"RNA_I", "ATAC_I"} & set(ds.cells.columns)
    alone = import_h5ad(path.with_name("test_rna.h5ad"), tmp_path / "rna.zarr", **THREADS)
    assert (
        ds.assays["RNA"].content_fingerprint
        == DataStore(alone.path).assays["RNA"].content_fingerprint
    )


def test_bands_of_every_size_equal_mudata(shared_data: Path, tmp_path: Path) -> None:
    """Bands of 1 (the small file), 7, 100 and all cells are mudata's modalities side by side, in modality order."""
    for path, sizes in (
        (shared_data.joinpath(*MULTIOME), (7, 100, None)),
        (write_multimodal(tmp_path / "x.h5mu"), (1, 7, 100, None)),
    ):
        reference = read_reference(path)
        expected = np.hstack([aligned(reference, name) for name in reference.mod])
        with H5muSource(path) as source:
            assert source.modalities == tuple(reference.mod)
            assert source.shape == expected.shape
            for rows in sizes:
                np.testing.assert_array_equal(assemble_bands(source, rows).toarray(), expected)


def test_a_band_reads_only_nearby_rows_of_each_modality(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A band reads just its rows of a modality stored in global order, and of a shuffled one its rows and at most MAX_SKIPPED_ROWS between two."""
    path = write_multimodal(tmp_path / "x.h5mu", n_cells=600)
    reads: list[tuple[str, int]] = []
    read_band = H5adSource.read_band

    def recording(self: H5adSource, start: int, stop: int) -> sp.csr_matrix:
        reads.append((self._key, stop - start))
        return read_band(self, start, stop)

    monkeypatch.setattr(H5adSource, "read_band", recording)
    with H5muSource(path) as source:
        for start in range(0, 600, 10):
            reads.clear()
            source.read_band(start, start + 10)
            assert [n for key, n in reads if key == "/mod/rna/X"] == [10]
            wanted = int(source.cells["ADT_I"].iloc[start : start + 10].sum())
            read = sum(n for key, n in reads if key == "/mod/prot/X")
            assert wanted <= read <= wanted + MAX_SKIPPED_ROWS * (wanted - 1)


@pytest.mark.parametrize("maps", ["obsmap", "names only"])
def test_a_modality_lacking_cells_has_zero_rows_and_membership(tmp_path: Path, maps: str) -> None:
    """The prot modality lacks 4 cells: ADT_I is False exactly there, their ADT rows are zero, the rest is mudata's; without /obsmap the names match."""
    path = write_multimodal(tmp_path / "x.h5mu")
    reference = read_reference(path)
    if maps == "names only":
        with h5py.File(path, "r+") as f:
            del f["obsmap"], f["obsm"]
    result = H5muToZarr(path, tmp_path / "m.zarr", **THREADS).dump()
    assert result.assays == {"RNA": "RNA", "ADT": "ADT"}
    ds = DataStore(result.path)
    measured = np.ones(40, dtype=bool)
    measured[list(ABSENT)] = False
    np.testing.assert_array_equal(ds.cells.fetch_all("ADT_I"), measured)
    assert ds.cells.attributes("ADT_I")["role"] == "assay_membership"
    assert "RNA_I" not in ds.cells.columns
    adt = ds.ADT.counts.compute()
    assert not adt[~measured].any()
    np.testing.assert_array_equal(adt, aligned(reference, "prot"))
    np.testing.assert_array_equal(ds.RNA.counts.compute(), aligned(reference, "rna"))
    assert ds.cells.fetch_all("donor").tolist() == reference.obs["donor"].tolist()
    assert ds.ADT.features.fetch_all("ids").tolist() == [f"CD{k}" for k in range(5)]


def test_modalities_and_layer_choose_what_is_imported(tmp_path: Path) -> None:
    """modalities= imports only those (on every global cell); layer= reads a modality's layer, by name for all or per modality."""
    path = write_multimodal(tmp_path / "x.h5mu", normalized_x=True)
    reference = read_reference(path)
    only = DataStore(import_h5mu(path, tmp_path / "adt.zarr", modalities=["prot"], **THREADS).path)
    assert list(only.assays) == ["ADT"]
    assert only.cells.n_rows == 40
    assert int(only.cells.fetch_all("ADT_I").sum()) == 40 - len(ABSENT)
    layered = import_h5mu(
        path, tmp_path / "counts.zarr", layer={"rna": "counts"}, **THREADS
    )  # fmt: skip
    assert layered.dtypes == {"RNA": "uint8", "ADT": "uint8"}
    ds = DataStore(layered.path)
    np.testing.assert_array_equal(ds.RNA.counts.compute(), aligned(reference, "rna", "counts"))
    np.testing.assert_array_equal(ds.ADT.counts.compute(), aligned(reference, "prot"))
    rna_only = import_h5mu(
        path, tmp_path / "rna.zarr", modalities=["rna"], layer="counts", **THREADS
    )
    assert rna_only.assays == {"RNA": "RNA"}
    assert ds.assays["RNA"].content_fingerprint == (
        DataStore(rna_only.path).assays["RNA"].content_fingerprint
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"modalities": ["gex"]}, r"no modality 'gex' \(mod/gex\); the file holds the modalities \['rna', 'prot'\]"),
        ({"layer": "counts"}, r"mod/prot/layers/counts is missing; modality 'prot' has the layers \[\]: .*layer=\{'prot': None\}"),
        ({"layer": {"rna": "spliced"}}, r"mod/rna/layers/spliced is missing; modality 'rna' has the layers \['counts'\]"),
        ({"modalities": ["rna"], "layer": {"prot": "counts"}}, r"layer= names the modality 'prot', which the import does not read"),
    ],
    ids=["modality", "layer of all", "layer of one", "layer of another"],
)  # fmt: skip
def test_a_missing_modality_or_layer_is_refused_before_writing(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    """A modality or layer that the file lacks is refused naming the file, the key, what exists and the option to pass; no store appears."""
    path = write_multimodal(tmp_path / "x.h5mu", normalized_x=True)
    destination = tmp_path / "m.zarr"
    with pytest.raises(SourceFormatError, match=message) as caught:
        import_h5mu(path, destination, **options, **THREADS)
    assert str(path) in str(caught.value)
    assert not destination.exists()


def _short_indptr(f: h5py.File) -> None:
    indptr = f["mod/rna/X/indptr"][()]
    del f["mod/rna/X/indptr"]
    f["mod/rna/X/indptr"] = indptr[:-1]


def _swapped_obsmap(f: h5py.File) -> None:
    values = f["obsmap/prot"][()]
    first, second = np.flatnonzero(values)[:2]
    values[[first, second]] = values[[second, first]]
    f["obsmap/prot"][...] = values


def _stranger_cell(f: h5py.File) -> None:
    index = f["mod/prot/obs/_index"].asstr()[()].astype(object)
    index[0] = "NOT-A-GLOBAL-CELL"
    del f["mod/prot/obs/_index"]
    f.create_dataset("mod/prot/obs/_index", data=index.astype(h5py.string_dtype()))


def _shared_features(f: h5py.File) -> None:
    f.attrs["axis"] = 1


def _no_modalities(f: h5py.File) -> None:
    del f["mod"]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_short_indptr, r"/mod/rna/X/indptr has 40 entries for 40 rows"),
        (_swapped_obsmap, r"obsmap/prot: expected the 1-based row of each global cell .* found \d+ for global cell \d+, where the names give \d+"),
        (_stranger_cell, r"mod/prot/obs: 1 of the modality's 36 cells are not global cells \(in obs\), the first 'NOT-A-GLOBAL-CELL'"),
        (_shared_features, r"the attribute 'axis' of the root is 1"),
        (_no_modalities, r"mod: expected a group of modalities"),
    ],
    ids=["short indptr", "swapped obsmap", "stranger cell", "shared features", "no modalities"],
)  # fmt: skip
def test_a_damaged_or_inconsistent_file_is_refused_before_writing(
    tmp_path: Path, damage: Callable[[h5py.File], None], message: str
) -> None:
    """Short pointers, an obsmap that contradicts the names, a stranger cell, shared features or no /mod: SourceFormatError, no store."""
    path = write_multimodal(tmp_path / "x.h5mu")
    with h5py.File(path, "r+") as f:
        damage(f)
    destination = tmp_path / "m.zarr"
    with pytest.raises(SourceFormatError, match=message):
        import_h5mu(path, destination, **THREADS)
    assert not destination.exists()


def test_modalities_are_named_and_typed_as_assays(tmp_path: Path) -> None:
    """Modalities adt and prot both become ADT and are refused together; another name is an assay of its own, typed by assay_types."""
    path = write_multimodal(tmp_path / "x.h5mu")
    reference = read_reference(path)
    panel = reference["prot"]
    other = panel.copy()
    other.var_names = [f"A{k}" for k in range(5)]
    mudata.MuData({"prot": panel, "adt": other}).write_h5mu(tmp_path / "two.h5mu")
    with pytest.raises(
        SourceFormatError, match=r"the modalities \['prot', 'adt'\] would all become assay ADT"
    ):
        import_h5mu(tmp_path / "two.h5mu", tmp_path / "two.zarr", **THREADS)
    mudata.MuData({"rna": reference["rna"], "tags x": panel}).write_h5mu(tmp_path / "tags.h5mu")
    with pytest.raises(AssayTypeError, match=r"assay_types names \['HTO'\]"):
        import_h5mu(
            tmp_path / "tags.h5mu", tmp_path / "tags.zarr", assay_types={"HTO": "HTO"}, **THREADS
        )
    assert not (tmp_path / "tags.zarr").exists()
    result = import_h5mu(
        tmp_path / "tags.h5mu", tmp_path / "tags.zarr", assay_types={"tags_x": "HTO"}, **THREADS
    )
    assert result.assays == {"RNA": "RNA", "tags_x": "HTO"}
    assert DataStore(result.path).cells.fetch_all("tags_x_I").sum() == 40 - len(ABSENT)  # fmt: skip


def test_a_global_column_of_a_membership_name_is_left_out_with_a_warning(tmp_path: Path) -> None:
    """An obs column named ADT_I is not the membership: it is left out with a warning, and ADT_I comes from prot's cells."""
    path = write_multimodal(tmp_path / "x.h5mu")
    with h5py.File(path, "r+") as f:
        f["obs/ADT_I"] = np.ones(40, dtype=bool)
        f["obs"].attrs["column-order"] = [*f["obs"].attrs["column-order"], "ADT_I"]
    with pytest.warns(UserWarning, match=r"obs column 'ADT_I' is left out"):
        ds = DataStore(import_h5mu(path, tmp_path / "m.zarr", **THREADS).path)
    assert int(ds.cells.fetch_all("ADT_I").sum()) == 40 - len(ABSENT)


def test_cytearc_import_detects_h5mu(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc import file.h5mu store.zarr` and import_data pick H5muToZarr and write the same store."""
    path = shared_data.joinpath(*MULTIOME)
    assert detect_importer(path) is H5muToZarr
    store = tmp_path / "cli.zarr"
    assert main(["import", str(path), str(store), "--cluster", "threads", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["assays"] == {"ATAC": "ATAC", "RNA": "RNA"}
    again = import_data(path, tmp_path / "again.zarr", **THREADS)
    assert again.dataset_fingerprint == printed["datasetFingerprint"]


@pytest.mark.parametrize("download", [False, True], ids=["ranges", "download"])
def test_a_url_source_reads_as_the_local_file(
    shared_data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    download: bool,
) -> None:
    """The multiome file at memory:// (read in byte ranges, or downloaded once and removed) gives the local file's bands."""
    path = shared_data.joinpath(*MULTIOME)
    memory = fsspec.filesystem("memory")
    memory.pipe(f"/h5mu-tests/{path.name}", path.read_bytes())
    request.addfinalizer(lambda: memory.rm("/h5mu-tests", recursive=True))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with (
        H5muSource(f"memory://h5mu-tests/{path.name}", download=download) as remote,
        H5muSource(path) as local,
    ):
        assert remote.location == f"memory://h5mu-tests/{path.name}"
        assert len(list(scratch.iterdir())) == int(download)
        assert (assemble_bands(remote, 300) != assemble_bands(local, None)).nnz == 0
        pd.testing.assert_frame_equal(remote.features, local.features)
    assert not any(scratch.iterdir()), "the downloaded copy is removed"
