"""The standard analysis against scanpy's own outputs, frozen on real PBMCs.

``fixtures/scanpy/`` holds what scanpy 1.11.5 computed on the 2,170 PBMCs of
``h5ad_pbmc4k_soupx_2170cells`` (``make_scanpy_fixtures.py`` made it; its
``metadata.json`` names every version and parameter). Here the same file is
imported into a store and normalize, hvgs, exact PCA and markers run on it;
scanpy is not needed.

What corresponds:

- ``features.normalize`` (library size, 1e4, log1p) is scanpy's
  ``normalize_total(target_sum=1e4)`` + ``log1p``. scanpy computes in float32
  on the float32 counts of the file, CyteArc in float64 rounded to float32,
  so values differ in the last float32 bits.
- ``features.hvgs(flavor="seurat")`` is ``highly_variable_genes(flavor="seurat")``:
  ``mean`` and ``dispersion`` are scanpy's ``means`` and ``dispersions``
  (log1p of the mean and log of the dispersion of the values before the log).
- ``reduce.pca(mode="exact")`` scales by the population standard deviation,
  scanpy's ``scale`` by the sample one (ddof=1): the ratios and loadings are
  the same, CyteArc's explained variance and coordinates are scanpy's times
  ``n / (n - 1)`` and ``sqrt(n / (n - 1))``. Signs of components are free.
- ``markers.search`` against the rest is ``rank_genes_groups(method="wilcoxon",
  tie_correct=True)``: ``score`` is scanpy's ``scores`` (the z of the rank sum
  with the tie-corrected variance), ``pvalue`` its ``pvals`` (two-sided
  normal), ``padj`` its ``pvals_adj`` (BH over all genes), ``logfc`` its
  ``logfoldchanges``. scanpy's default, ``tie_correct=False``, divides the
  same rank-sum deviation by the uncorrected sigma ``sqrt(n1 n2 (n + 1) / 12)``,
  so ``AUROC = 0.5 + z_no_tie * sqrt((n + 1) / (12 n1 n2))`` exactly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from cytearc import DataStore
from cytearc.io.detect import H5adToZarr

if TYPE_CHECKING:
    from cytearc.artifacts import Artifact

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "scanpy"
METADATA = json.loads((FIXTURES / "metadata.json").read_text())
U_SLACK = 3.0
"""Rank sums agree within 3: scanpy normalizes in float32, CyteArc in float64 rounded to float32,
and the last bit decides a few ties (NKG7 in NK: 754 distinct values here, 755 in scanpy)."""


@dataclass(frozen=True)
class Analysis:
    """The store's artifacts for the fixture's parameters, and the store's gene ids."""

    ds: DataStore
    genes: np.ndarray
    norm: Artifact
    hvgs: Artifact
    pca: Artifact
    markers: Artifact

    def column(self, artifact: Artifact, name: str, genes: pd.Series) -> np.ndarray:
        """Per-gene values of ``artifact``'s array ``name`` at ``genes`` (ids)."""
        index = pd.Index(self.genes).get_indexer(genes)
        assert (index >= 0).all()
        values: np.ndarray = artifact.read(name)[index]
        return values


@pytest.fixture(scope="module")
def source(shared_data: Path) -> Path:
    path = shared_data / METADATA["dataset"]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == METADATA["sha256"], f"{path} changed since the fixtures were made"
    return path


@pytest.fixture(scope="module")
def analysis(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    destination = tmp_path_factory.mktemp("scanpy") / "pbmc4k.zarr"
    H5adToZarr(source, destination, cluster="threads", show_progress=False).dump()
    ds = DataStore(destination, zarr_mode="r+", cluster="threads", show_progress=False)
    norm = ds.features.normalize("RNA", target_sum=1e4)
    hv = ds.features.hvgs(norm, n_top=2000, n_bins=20)
    pca = ds.reduce.pca(norm, hv, n_comps=METADATA["nComps"], mode="exact")
    markers = ds.markers.search("RNA", group_key=METADATA["groupby"])
    genes = np.array([str(g) for g in ds.RNA.features.fetch_all("ids")], dtype=object)
    return Analysis(ds=ds, genes=genes, norm=norm, hvgs=hv, pca=pca, markers=markers)


@pytest.fixture(scope="module")
def scanpy_hvgs() -> pd.DataFrame:
    return pd.read_csv(FIXTURES / "hvgs.csv", keep_default_na=False, na_values=[""])


@pytest.fixture(scope="module")
def scanpy_pca() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "pca.npz", allow_pickle=False) as npz:
        return dict(npz)


@pytest.fixture(scope="module")
def scanpy_markers() -> pd.DataFrame:
    return pd.read_csv(FIXTURES / "markers.csv", keep_default_na=False, na_values=[""])


def test_hvg_set_is_scanpys(analysis: Analysis, scanpy_hvgs: pd.DataFrame) -> None:
    """The 2,000 seurat-flavor HVGs are exactly the genes scanpy selects."""
    ours = set(analysis.genes[analysis.hvgs.read("features")])
    theirs = set(scanpy_hvgs.loc[scanpy_hvgs["highly_variable"], "gene"])
    assert len(theirs) == METADATA["nHvgs"]
    assert ours == theirs, (len(ours & theirs), sorted(ours ^ theirs))


def test_hvg_statistics_are_scanpys(analysis: Analysis, scanpy_hvgs: pd.DataFrame) -> None:
    """Means, dispersions and normalized dispersions equal scanpy's, HVGs and the next 100."""
    genes = scanpy_hvgs["gene"]
    for ours, theirs, rtol in (
        ("mean", "means", 2e-6),
        ("dispersion", "dispersions", 2e-6),
        ("dispersion_norm", "dispersions_norm", 5e-6),
    ):
        np.testing.assert_allclose(
            analysis.column(analysis.hvgs, ours, genes),
            scanpy_hvgs[theirs].to_numpy(),
            rtol=rtol,
            err_msg=ours,
        )


def test_pca_explained_variance_is_scanpys(
    analysis: Analysis, scanpy_pca: dict[str, np.ndarray]
) -> None:
    """Explained variance ratios equal scanpy's; variances are scanpy's times n / (n - 1)."""
    n = METADATA["shape"][0]
    np.testing.assert_allclose(
        analysis.pca.read("explained_variance_ratio"), scanpy_pca["variance_ratio"], rtol=1e-6
    )
    np.testing.assert_allclose(
        analysis.pca.read("explained_variance"), scanpy_pca["variance"] * n / (n - 1), rtol=1e-6
    )


def _separated(variance: np.ndarray, k: int) -> list[int]:
    """Components among the first ``k`` whose eigenvalue is apart from its neighbours' by 0.1 %."""
    gaps = np.abs(np.diff(variance[: k + 1])) / variance[: k + 1].max()
    return [j for j in range(k) if gaps[j] > 1e-3 and (j == 0 or gaps[j - 1] > 1e-3)]


def test_pca_components_are_scanpys_up_to_sign(
    analysis: Analysis, scanpy_pca: dict[str, np.ndarray]
) -> None:
    """Loadings and cell coordinates of the separated leading components match scanpy's up to sign."""
    n = METADATA["shape"][0]
    order = pd.Index(analysis.genes[analysis.pca.read("features")]).get_indexer(scanpy_pca["genes"])
    assert (order >= 0).all()
    loadings = analysis.pca.read("loadings")[order]
    coords = analysis.pca.read("coords").astype(np.float64)
    components = _separated(scanpy_pca["variance"], scanpy_pca["loadings"].shape[1])
    assert len(components) >= 8, components
    for j in components:
        sign = np.sign(loadings[:, j] @ scanpy_pca["loadings"][:, j])
        np.testing.assert_allclose(
            sign * loadings[:, j], scanpy_pca["loadings"][:, j], atol=1e-6, err_msg=f"PC{j + 1}"
        )
        expected = scanpy_pca["coords"][:, j] * np.sqrt(n / (n - 1))
        np.testing.assert_allclose(
            sign * coords[:, j],
            expected,
            atol=1e-5 * np.abs(expected).max(),
            err_msg=f"PC{j + 1}",
        )


def _marker_values(analysis: Analysis, frame: pd.DataFrame, name: str) -> np.ndarray:
    groups = [str(g) for g in analysis.markers.read("groups")]
    rows = np.array([groups.index(g) for g in frame["group"]])
    columns = pd.Index(analysis.genes).get_indexer(frame["names"])
    assert (columns >= 0).all()
    values: np.ndarray = analysis.markers.read(name)[rows, columns]
    return values


def test_marker_groups_are_the_annotation(analysis: Analysis) -> None:
    """One marker group per published annotation, of the sizes scanpy saw."""
    groups = [str(g) for g in analysis.markers.read("groups")]
    sizes = dict(zip(groups, analysis.markers.read("n_cells").tolist(), strict=True))
    assert sizes == METADATA["groupSizes"]


def _sigmas(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: group size, the uncorrected sigma, and the tie-corrected one (from scanpy's two z)."""
    sizes = pd.Series(METADATA["groupSizes"])
    n = int(sizes.sum())
    n1 = sizes[frame["group"]].to_numpy().astype(np.float64)
    plain = np.sqrt(n1 * (n - n1) * (n + 1) / 12)
    corrected = frame["scores_no_tie"].to_numpy() * plain / frame["scores"].to_numpy()
    return n1, plain, corrected


def test_marker_statistics_are_scanpys_tie_corrected_wilcoxon(
    analysis: Analysis, scanpy_markers: pd.DataFrame
) -> None:
    """score, pvalue, padj and logfc are wilcoxon(tie_correct=True)'s scores, pvals, pvals_adj, logfoldchanges.

    Rank sums may differ by ``U_SLACK`` (see the AUROC test), so z by
    ``U_SLACK / sigma`` and ln p by ``(|z| + 1)`` times that.
    """
    frame = scanpy_markers
    _, _, sigma = _sigmas(frame)
    slack = U_SLACK / sigma
    score = _marker_values(analysis, frame, "score")
    assert (np.abs(score - frame["scores"]) <= slack + 1e-6 * np.abs(score)).all()
    pvalue = _marker_values(analysis, frame, "pvalue")
    np.testing.assert_array_equal(pvalue == 0, frame["pvals"] == 0)
    for ours, theirs, bound in (
        (pvalue, frame["pvals"].to_numpy(), (np.abs(score) + 1) * slack),
        (_marker_values(analysis, frame, "padj"), frame["pvals_adj"].to_numpy(), 0.01),
    ):
        positive = theirs > 0
        gap = np.abs(np.log(ours[positive]) - np.log(theirs[positive]))
        assert (gap <= np.broadcast_to(bound, theirs.shape)[positive]).all(), gap.max()
    np.testing.assert_allclose(
        _marker_values(analysis, frame, "logfc"), frame["logfoldchanges"], rtol=1e-5, atol=1e-5
    )


def test_marker_auroc_follows_scanpys_default_wilcoxon(
    analysis: Analysis, scanpy_markers: pd.DataFrame
) -> None:
    """AUROC * n1 * n2 is the U of scanpy's default z (U = z * sigma + n1 n2 / 2), within U_SLACK."""
    frame = scanpy_markers
    n1, plain, _ = _sigmas(frame)
    n = sum(METADATA["groupSizes"].values())
    product = n1 * (n - n1)
    u = frame["scores_no_tie"].to_numpy() * plain + product / 2
    auroc = _marker_values(analysis, frame, "auroc")
    assert np.abs(auroc * product - u).max() <= U_SLACK
    score = _marker_values(analysis, frame, "score")
    assert (np.sign(score) == np.sign(frame["scores_no_tie"])).all()


def test_top_markers_are_scanpys(analysis: Analysis, scanpy_markers: pd.DataFrame) -> None:
    """Each group's 30 highest-scoring genes are scanpy's 30 (tie-corrected wilcoxon)."""
    n_top = METADATA["nTopMarkers"]
    table = analysis.ds.markers.table(analysis.markers, n=n_top)
    for group, theirs in scanpy_markers.groupby("group"):
        ours = set(table.loc[table["group"] == group, "feature"])
        assert ours == set(theirs["names"].head(n_top)), group
