"""The cytearc command line: import a real 10x file, describe the store, exit codes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from cytearc import DataStore
from cytearc.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    from cytearc.engine.cluster import Engine


@pytest.mark.slow
def test_import_and_info(
    tmp_path: Path, shared_data: Path, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc import` splits GEX and ADT into RNA and ADT; `cytearc info --json` describes them."""
    source = shared_data / "10x_v3_h5_pbmc1k_citeseq" / "filtered_feature_bc_matrix.h5"
    store = tmp_path / "cite.zarr"
    code = main(["import", str(source), str(store), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["assays"] == {"RNA": "RNA", "ADT": "ADT"}
    assert result["shapes"] == {"RNA": [892, 36601], "ADT": [892, 10]}
    assert main(["info", str(store), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cells"] == 892
    assert info["assays"]["RNA"]["countsT"] is True
    assert info["assays"]["ADT"]["countsT"] is False
    assert info["datasetFingerprint"] == result["datasetFingerprint"]
    with h5py.File(source) as f:
        m = f["matrix"]
        reference = sp.csc_matrix(
            (m["data"][:], m["indices"][:], m["indptr"][:]), shape=tuple(m["shape"][:])
        ).T.toarray()
    ds = DataStore(store)
    np.testing.assert_array_equal(ds.ADT.counts.compute(), reference[:, -10:])
    assert int(ds.RNA.counts.sum().compute()) == int(reference[:, :-10].sum())


def test_errors_exit_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing source or store exits 1 with the reason."""
    assert main(["import", str(tmp_path / "nothing.h5"), str(tmp_path / "x.zarr")]) == 1
    assert "nothing.h5" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "none.zarr")]) == 1
    assert "no CyteArc store" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_unless_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug prints one line naming --debug and exits 1; with --debug the traceback is raised."""
    import cytearc.datastore  # noqa: PLC0415

    def broken(*_: object, **__: object) -> None:
        msg = "planted bug"
        raise RuntimeError(msg)

    monkeypatch.setattr(cytearc.datastore, "DataStore", broken)
    assert main(["info", "nowhere.zarr"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("internal error: RuntimeError: planted bug - ")
    assert "--debug" in err
    assert "Traceback" not in err
    with pytest.raises(RuntimeError, match="planted bug"):
        main(["--debug", "info", "nowhere.zarr"])
