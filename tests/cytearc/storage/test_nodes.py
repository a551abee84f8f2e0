"""Groups found, refused and created in an order that a kill cannot break."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import zarr
from zarr.storage import LocalStore, WrapperStore

from cytearc.errors import StoreFormatError
from cytearc.storage.nodes import child_node, create_group_top_down

if TYPE_CHECKING:
    from pathlib import Path

    from zarr.core.buffer import Buffer


class _Recording(WrapperStore[LocalStore]):
    """A local store that records the metadata keys it has finished writing, in order."""

    written: list[str]

    async def set(self, key: str, value: Buffer) -> None:
        await super().set(key, value)
        self.written.append(key)

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        existed = await self.exists(key)
        await super().set_if_not_exists(key, value)
        if not existed:
            self.written.append(key)


def _recording(path: Path) -> tuple[zarr.Group, list[str]]:
    store = _Recording(LocalStore(path))
    store.written = []
    return zarr.open_group(store, mode="a"), store.written


def test_every_ancestor_is_written_before_the_group_below_it(tmp_path: Path) -> None:
    """Zarr alone writes a child's zarr.json concurrently with its parents'; top-down writes each level first."""
    root, written = _recording(tmp_path / "store.zarr")
    written.clear()
    create_group_top_down(root, "RNA/artifacts/pca/abc", attributes={"complete": False})
    keys = [k for k in written if k.endswith("zarr.json")]
    assert keys == [
        "RNA/zarr.json",
        "RNA/artifacts/zarr.json",
        "RNA/artifacts/pca/zarr.json",
        "RNA/artifacts/pca/abc/zarr.json",
    ]
    assert (
        zarr.open_group(tmp_path / "store.zarr", mode="r")["RNA/artifacts/pca/abc"].attrs[
            "complete"
        ]
        is False
    )


def test_existing_ancestors_are_kept(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "store.zarr", mode="w")
    root.create_group("RNA", attributes={"is_assay": True})
    create_group_top_down(root, "RNA/artifacts/pca/abc")
    create_group_top_down(root, "RNA/artifacts/pca/def")
    reopened = zarr.open_group(tmp_path / "store.zarr", mode="r")
    assert reopened["RNA"].attrs["is_assay"] is True
    assert sorted(reopened["RNA/artifacts/pca"].group_keys()) == ["abc", "def"]


def _edit(path: Path, **changes: Any) -> None:
    document = json.loads(path.read_text())
    document.update(changes)
    path.write_text(json.dumps(document))


@pytest.mark.parametrize(
    "changes",
    [{"zarr_format": 2}, {"node_type": "table"}, {"attributes": []}],
    ids=["zarr_format-2", "node_type", "attributes-list"],
)
def test_a_child_whose_zarr_json_is_not_v3_metadata_is_refused(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    """Not reported as absent (which would hide what it holds), and not zarr's own exception."""
    root = zarr.open_group(tmp_path / "store.zarr", mode="w")
    root.create_group("artifacts").create_group("pca")
    _edit(tmp_path / "store.zarr" / "artifacts" / "zarr.json", **changes)
    with pytest.raises(StoreFormatError, match=r"artifacts/zarr\.json"):
        child_node(zarr.open_group(tmp_path / "store.zarr", mode="r"), "artifacts", where=".")


def test_a_folder_without_zarr_json_is_absent(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "store.zarr", mode="w")
    (tmp_path / "store.zarr" / "loose").mkdir()
    assert child_node(root, "loose", where=".") is None
    assert child_node(root, "missing", where=".") is None


def test_staged_new_columns_are_listed_in_one_write(tmp_path: Path) -> None:
    """A run's new cell columns appear together: a kill between their writes leaves none listed."""
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415

    import cytearc.metadata.table as tables  # noqa: PLC0415
    from cytearc.metadata.table import MetaData, write_table  # noqa: PLC0415

    root = zarr.open_group(tmp_path / "cells.zarr", mode="w")
    write_table(root, pd.DataFrame({"ids": ["a", "b"]}), dimension="cell", where="cells")
    table = MetaData(root, dimension="cell", where="cells", writable=True)
    listings: list[list[str]] = []
    original = tables._finish_replacing

    def record(group: zarr.Group, columns: list[str], **options: object) -> None:
        listings.append(list(columns))
        original(group, columns, **options)  # type: ignore[arg-type]

    tables._finish_replacing = record  # type: ignore[assignment]
    try:
        with table.staged():
            for name in ("n_counts", "n_features", "percent_mito"):
                table.insert(name, np.array([1.0, 2.0]))
    finally:
        tables._finish_replacing = original
    assert listings == [["ids", "I", "n_counts", "n_features", "percent_mito"]]
    assert root.attrs["cytearc:columns"] == listings[0]


def test_verify_ignores_a_folder_holding_only_a_killed_zarr_write(tmp_path: Path) -> None:
    """A kill during zarr's atomic write of a new group leaves <key>.<uuid>.partial: nothing was published."""
    from cytearc import DataStore  # noqa: PLC0415
    from cytearc.datasets import write_store  # noqa: PLC0415

    path = write_store(tmp_path / "ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    zarr.open_group(path, mode="r+").require_group("artifacts")
    folder = path / "artifacts" / "cell_selection"
    folder.mkdir()
    (folder / f"zarr.json.{'0' * 32}.partial").write_text("{")
    report = DataStore(path, cluster="threads", show_progress=False).verify()
    assert report.ok, [c.to_json() for c in report.checks if c.status == "damaged"]
    (folder / "c").mkdir()
    (folder / "c" / "0").write_bytes(b"chunk")
    assert not DataStore(path, cluster="threads", show_progress=False).verify().ok


def test_a_killed_write_of_a_groups_zarr_json_leaves_no_member(tmp_path: Path) -> None:
    """A kill inside zarr's atomic write of an existing zarr.json leaves zarr.<uuid>.partial beside it: not a member."""
    from cytearc import DataStore  # noqa: PLC0415
    from cytearc.datasets import write_store  # noqa: PLC0415

    path = write_store(tmp_path / "ds.zarr", n_cells=300, n_genes=600, cluster="threads")
    (path / f"zarr.{'0' * 32}.partial").write_text('{"zarr_format": 3, "node_ty')
    ds = DataStore(path, cluster="threads", show_progress=False)
    assert ds.assays["RNA"].shape == (300, 600)
    report = ds.verify()
    assert report.ok, [c.to_json() for c in report.checks if c.status == "damaged"]
