"""Fuzz targets: a pristine store, cube or set of source files, its values, and how a mutated copy is judged."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from cytearc._faults.sources import draw_source_mutation, scan_sources, write_sources
from cytearc._faults.trees import draw_tree_mutation, scan_tree
from cytearc._faults.verdict import Verdict, classify, cube_values, store_values

if TYPE_CHECKING:
    from collections.abc import Callable

    from cytearc._faults.sources import SourceFile, SourceMutation
    from cytearc._faults.trees import Choose, Tree, TreeMutation

__all__ = ["FUZZ_TARGETS", "FuzzTarget", "fuzz_targets"]

FUZZ_TARGETS: Final = ("store", "cube", "sources")
"""The targets :func:`fuzz_targets` builds."""

TargetName = Literal["store", "cube", "sources"]


@dataclass(frozen=True, kw_only=True)
class FuzzTarget:
    """A pristine thing to mutate, what reading it gives, and the verdict on a mutated copy.

    Parameters
    ----------
    name
        ``store`` (a small store with a ``normalized`` artifact), ``cube``
        or ``sources`` (every format of :func:`write_sources`).
    pristine
        The pristine store, cube or folder of sources.
    expected
        What reading the pristine thing gives: :func:`store_values`,
        :func:`cube_values`, or for sources each source's import read with
        :func:`store_values`, by the source's name below ``pristine``.
    tree
        The scan of a store or cube (None for sources).
    sources
        The scan of the sources (empty for a store or cube).
    """

    name: TargetName
    pristine: Path
    expected: dict[str, Any]
    tree: Tree | None = None
    sources: tuple[SourceFile, ...] = ()

    def draw(self, choose: Choose, *, raw_h5: bool = False) -> TreeMutation | SourceMutation:
        """One mutation of this target.

        Parameters
        ----------
        choose
            ``choose(n)`` gives an integer in ``range(n)``.
        raw_h5
            Sources: also flip bits in and truncate HDF5 files (see
            :func:`draw_source_mutation`).

        Returns
        -------
        TreeMutation or SourceMutation
            The mutation.
        """
        if self.tree is not None:
            return draw_tree_mutation(self.tree, choose)
        return draw_source_mutation(self.sources, choose, raw_h5=raw_h5)

    def judge(self, mutation: TreeMutation | SourceMutation, work: Path) -> Verdict:
        """Apply ``mutation`` to a copy below ``work``, read the copy (a source: import it, then read the store) and classify.

        Parameters
        ----------
        mutation
            A mutation drawn by :meth:`draw`.
        work
            An empty folder the copy and any import are written to.

        Returns
        -------
        Verdict
            The outcome (:func:`classify`).
        """
        root = work / self.pristine.name
        shutil.copytree(self.pristine, root)
        mutation.apply(root)
        where = str(root)
        if self.name == "store":
            return classify(lambda: store_values(root), self.expected, where=where)
        if self.name == "cube":
            return classify(lambda: cube_values(root), self.expected, where=where)
        source = getattr(mutation, "path", "").split("/", 1)[0]
        read = _import_and_read(root / source, work / "imported.zarr")
        return classify(read, self.expected[source], where=where)


def _import_and_read(source: Path, destination: Path) -> Callable[[], object]:
    from cytearc.io import import_data  # noqa: PLC0415 (the importers load the engine)

    def read() -> object:
        result = import_data(source, destination, cluster="threads", show_progress=False)
        return store_values(result.path)

    return read


def fuzz_targets(folder: Path, *, only: tuple[str, ...] = FUZZ_TARGETS) -> dict[str, FuzzTarget]:
    """Build the pristine targets below ``folder`` and read them.

    The store is a 60-cell, 210-gene synthetic dataset in shards of 2 KiB
    (several shards and inner chunks per count array) with a ``normalized``
    artifact; the cube is :func:`cytepool.testing.example_cube`; the sources
    are :func:`write_sources`'s, each imported once for its expected values.

    Parameters
    ----------
    folder
        An empty folder (created).
    only
        The targets to build, of :data:`FUZZ_TARGETS`.

    Returns
    -------
    dict of str to FuzzTarget
        By name.
    """
    from cytearc.datasets import write_store  # noqa: PLC0415 (imports the importers)
    from cytearc.datastore import DataStore  # noqa: PLC0415
    from cytearc.storage.layout import CountLayout  # noqa: PLC0415
    from cytepool import write_cube  # noqa: PLC0415
    from cytepool.testing import example_cube  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    targets: dict[str, FuzzTarget] = {}
    if "store" in only:
        store = Path(
            write_store(
                folder / "store.zarr",
                n_cells=60,
                n_genes=210,
                n_types=1,
                n_markers=1,
                n_donors=2,
                cluster="threads",
                layout=CountLayout(unit_bytes=2**11, chunk_bytes=2**9),
            )
        )
        DataStore(
            store, zarr_mode="r+", cluster="threads", show_progress=False
        ).features.normalize()
        values = store_values(store)
        assert isinstance(values, dict), values
        targets["store"] = FuzzTarget(
            name="store", pristine=store, expected=values, tree=scan_tree(store)
        )
    if "cube" in only:
        cube = write_cube(example_cube(), folder / "example.cube.zarr")
        targets["cube"] = FuzzTarget(
            name="cube", pristine=cube, expected=cube_values(cube), tree=scan_tree(cube)
        )
    if "sources" in only:
        root = folder / "sources"
        expected = {}
        for path in write_sources(root).values():
            imported = _import_and_read(path, folder / f"imported-{path.name}.zarr")()
            assert isinstance(imported, dict), imported
            expected[path.name] = imported
        targets["sources"] = FuzzTarget(
            name="sources", pristine=root, expected=expected, sources=scan_sources(root)
        )
    return targets
