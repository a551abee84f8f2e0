"""Mutations of a store's or cube's directory tree, and drawing them from its files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from cytearc.errors import OperationArgumentError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = [
    "Choose",
    "Delete",
    "EditAttribute",
    "FlipBit",
    "SwapArrays",
    "Tree",
    "TreeMutation",
    "Truncate",
    "draw_tree_mutation",
    "mutated_file",
    "scan_tree",
]

Choose: TypeAlias = Callable[[int], int]
"""``choose(n)`` returns an integer in ``range(n)``: ``lambda n: draw(st.integers(0, n - 1))``
under hypothesis, ``lambda n: int(rng.integers(n))`` with a seeded generator."""


def mutated_file(root: Path, path: str) -> Path:
    """The file ``path`` below ``root`` that a mutation changes.

    Parameters
    ----------
    root
        The tree's root.
    path
        The file's path below it.

    Returns
    -------
    Path
        The file.

    Raises
    ------
    OperationArgumentError
        There is no such file.
    """
    target = root / path
    if not target.is_file():
        msg = f"{target}: expected a file to mutate, found none; draw mutations from a scan of this tree"
        raise OperationArgumentError(msg)
    return target


@dataclass(frozen=True, kw_only=True)
class FlipBit:
    """Flip bit ``bit`` (0 to 7) of byte ``offset`` of the file ``path``.

    Parameters
    ----------
    path
        The file, below the root.
    offset
        The byte.
    bit
        The bit of that byte, 0 to 7.
    """

    path: str
    offset: int
    bit: int

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        target = mutated_file(root, self.path)
        data = bytearray(target.read_bytes())
        data[self.offset] ^= 1 << self.bit
        target.write_bytes(bytes(data))


@dataclass(frozen=True, kw_only=True)
class Truncate:
    """Cut the file ``path`` to its first ``size`` bytes.

    Parameters
    ----------
    path
        The file, below the root.
    size
        The bytes kept.
    """

    path: str
    size: int

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        target = mutated_file(root, self.path)
        target.write_bytes(target.read_bytes()[: self.size])


@dataclass(frozen=True, kw_only=True)
class Delete:
    """Delete the file ``path``.

    Parameters
    ----------
    path
        The file, below the root.
    """

    path: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        mutated_file(root, self.path).unlink()


@dataclass(frozen=True, kw_only=True)
class EditAttribute:
    """Set the value at ``keys`` of the JSON document ``path`` (a ``zarr.json``), or remove it.

    Parameters
    ----------
    path
        The document, below the root.
    keys
        The keys and list positions from the document to the value.
    value
        The new value (JSON).
    remove
        Remove the value instead (from its object or list).
    """

    path: str
    keys: tuple[str | int, ...]
    value: Any = None
    remove: bool = False

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        target = mutated_file(root, self.path)
        doc = json.loads(target.read_text(encoding="utf-8"))
        parent = doc
        for key in self.keys[:-1]:
            parent = parent[key]
        if self.remove:
            del parent[self.keys[-1]]
        else:
            parent[self.keys[-1]] = self.value
        target.write_text(json.dumps(doc, indent=2), encoding="utf-8")


@dataclass(frozen=True, kw_only=True)
class SwapArrays:
    """Swap the chunk folders (``c``) of the arrays ``first`` and ``second``: two arrays reordered.

    Parameters
    ----------
    first, second
        The arrays' folders, below the root.
    """

    first: str
    second: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        a, b = root / self.first / "c", root / self.second / "c"
        parked = root / self.first / ".c-swapped"
        if a.exists():
            a.rename(parked)
        if b.exists():
            b.rename(a)
        if parked.exists():
            parked.rename(b)


TreeMutation: TypeAlias = FlipBit | Truncate | Delete | EditAttribute | SwapArrays
"""A mutation of a store or cube."""


@dataclass(frozen=True, kw_only=True)
class Tree:
    """The files of a pristine store or cube, from which mutations are drawn.

    Parameters
    ----------
    root
        Its root folder.
    files
        Each file's path below the root and its size in bytes, sorted.
    arrays
        The folders of its arrays, each with its data type.
    """

    root: Path
    files: tuple[tuple[str, int], ...]
    arrays: tuple[tuple[str, str], ...]

    def alike(self) -> list[tuple[str, str]]:
        """Every pair of arrays of one data type, which decode each other's chunks.

        Returns
        -------
        list of tuple
            Pairs of array folders, sorted.
        """
        return [
            (a, b)
            for i, (a, kind) in enumerate(self.arrays)
            for b, other in self.arrays[i + 1 :]
            if kind == other
        ]

    @property
    def metadata(self) -> tuple[tuple[str, int], ...]:
        """The ``zarr.json`` documents, with their sizes."""
        return tuple(f for f in self.files if f[0].rsplit("/", 1)[-1] == "zarr.json")

    @property
    def chunks(self) -> tuple[tuple[str, int], ...]:
        """The chunk and shard files, with their sizes."""
        return tuple(f for f in self.files if f[0].rsplit("/", 1)[-1] != "zarr.json")


def scan_tree(root: Path) -> Tree:
    """The files and arrays of a store or cube.

    Parameters
    ----------
    root
        The pristine tree.

    Returns
    -------
    Tree
        Its files and arrays.
    """
    files = sorted(
        (p.relative_to(root).as_posix(), p.stat().st_size) for p in root.rglob("*") if p.is_file()
    )
    arrays = []
    for path in sorted(root.rglob("zarr.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("node_type") == "array":
            arrays.append((path.parent.relative_to(root).as_posix(), json.dumps(doc["data_type"])))
    return Tree(root=root, files=tuple(files), arrays=tuple(arrays))


def _json_nodes(
    doc: Any,  # noqa: ANN401 (a JSON document)
    keys: tuple[str | int, ...] = (),
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if keys:
        yield keys, doc
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        yield from _json_nodes(value, (*keys, key))


def _replacements(value: Any) -> list[Any]:  # noqa: ANN401, PLR0911 (a JSON value; one return per JSON type)
    """Values of another value or type than ``value``."""
    if isinstance(value, bool):
        return [not value, int(value)]
    if isinstance(value, int):
        return [value + 1, value - 1, -value - 1, str(value)]
    if isinstance(value, float):
        return [value * 2 + 1, -value - 1, str(value)]
    if isinstance(value, str):
        return ["", value + "x", value[:-1]] if value else ["x", 0]
    if isinstance(value, list):
        return [[], [*value, value[-1]], value[:-1]] if value else [[0]]
    if isinstance(value, dict):
        return [{}, []]
    return [0, "x"]


def draw_tree_mutation(tree: Tree, choose: Choose) -> TreeMutation:
    """One mutation of a store or cube.

    A bit flipped in a chunk or in a metadata document, a file truncated or
    deleted, a value of a ``zarr.json`` replaced (by another value or type)
    or removed, or the chunks of two arrays of one data type swapped (so
    that each decodes as the other).

    Parameters
    ----------
    tree
        The pristine tree (:func:`scan_tree`).
    choose
        ``choose(n)`` gives an integer in ``range(n)`` (:data:`Choose`).

    Returns
    -------
    TreeMutation
        The mutation, to apply to a copy of the tree.
    """
    kinds = ["flip-chunk", "flip-metadata", "truncate", "delete", "attribute"]
    pairs = tree.alike()
    kinds += ["swap"] if pairs else []
    kind = kinds[choose(len(kinds))]
    files = [f for f in tree.files if f[1] > 0]
    if kind in {"flip-chunk", "flip-metadata"}:
        pool = [f for f in (tree.chunks if kind == "flip-chunk" else tree.metadata) if f[1] > 0]
        path, size = (pool or files)[choose(len(pool or files))]
        return FlipBit(path=path, offset=choose(size), bit=choose(8))
    if kind == "truncate":
        path, size = files[choose(len(files))]
        return Truncate(path=path, size=choose(size))
    if kind == "delete":
        return Delete(path=tree.files[choose(len(tree.files))][0])
    if kind == "swap":
        first, second = pairs[choose(len(pairs))]
        return SwapArrays(first=first, second=second)
    return _edit_attribute(tree, choose)


def _edit_attribute(tree: Tree, choose: Choose) -> EditAttribute:
    path = tree.metadata[choose(len(tree.metadata))][0]
    nodes = list(_json_nodes(json.loads((tree.root / path).read_text(encoding="utf-8"))))
    keys, value = nodes[choose(len(nodes))]
    replacements = _replacements(value)
    pick = choose(len(replacements) + 1)
    if pick == len(replacements):
        return EditAttribute(path=path, keys=keys, remove=True)
    return EditAttribute(path=path, keys=keys, value=replacements[pick])
