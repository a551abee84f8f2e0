"""The main job (`cytearc demo`) end to end on a small embedded dataset."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from cytearc.cli import main
from cytepool import read_cube
from cytepool.de import LimmaResults

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.slow
def test_demo_recovers_the_planted_truth_and_reuses_its_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Import, recipe, pooling and limma-voom: clusters match the types, DE finds the response genes.

    A second demo into the same folder reuses every artifact and writes the
    same cube; other parameters are refused.
    """
    out = tmp_path / "demo"
    args = ["demo", "-o", str(out), "--cells", "2500", "--genes", "1200", "--cluster", "threads"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["adjustedRandIndexToCellTypes"] >= 0.9
    cube = read_cube(out / "pbmc.cube.zarr")
    cube.verify_fingerprint()
    assert summary["cube"]["fingerprint"] == cube.fingerprint
    results = LimmaResults.read(out / "de")
    assert len(results) >= 4
    for result in results.values():
        result.verify(cube)
    tested = [g for g in summary["de"]["groups"] if g["responseGenesTested"] >= 20]
    assert tested
    for group in tested:
        assert group["responseGenesFound"] >= 0.5 * group["responseGenesTested"], group
        assert group["falseDiscoveries"] <= 0.5 * max(group["significant"], 1), group
    names = {p.split("/")[-1] for p in summary["figures"]}
    assert {"qc_violins.png", "umap_clusters.png", "markers_dotplot.png"} <= names
    assert any(n.startswith("volcano_") for n in names)
    assert (out / "summary.json").is_file()
    assert main([*args, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert sum(s["created"] for s in again["run"]["stages"]) == 0
    assert again["cube"]["fingerprint"] == summary["cube"]["fingerprint"]
    assert main([*args[:4], "2600", *args[5:]]) == 1
    assert "choose a new output folder" in capsys.readouterr().err
