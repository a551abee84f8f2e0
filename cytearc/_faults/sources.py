"""Mutations that make a source file invalid (Matrix Market, TSV, CSV, 10x HDF5, H5AD), and example sources."""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import h5py
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cytearc._faults.trees import FlipBit, Truncate, mutated_file

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from cytearc._faults.trees import Choose

__all__ = [
    "DropColumn",
    "DropLine",
    "H5Delete",
    "H5SetValue",
    "H5Shorten",
    "RepeatLine",
    "SetField",
    "SetFieldCount",
    "SourceFile",
    "SourceMutation",
    "draw_source_mutation",
    "scan_sources",
    "write_sources",
]


def _read_text(target: Path) -> bytes:
    return gzip.decompress(target.read_bytes()) if target.suffix == ".gz" else target.read_bytes()


def _edit_lines(root: Path, path: str, edit: Callable[[list[bytes]], list[bytes]]) -> None:
    """Apply ``edit`` to the lines of a text file, gzipped again (without a time stamp) if it was."""
    target = mutated_file(root, path)
    data = _read_text(target)
    lines = edit(data.removesuffix(b"\n").split(b"\n"))
    text = b"\n".join(lines) + (b"\n" if data.endswith(b"\n") else b"")
    target.write_bytes(gzip.compress(text, mtime=0) if target.suffix == ".gz" else text)


def _replace_line(lines: list[bytes], index: int, line: bytes) -> list[bytes]:
    return [*lines[:index], line, *lines[index + 1 :]]


@dataclass(frozen=True, kw_only=True)
class DropLine:
    """Remove line ``line`` (0-based) of a text file, gzipped or not.

    Parameters
    ----------
    path
        The file, below the sources' root.
    line
        The line, 0-based.
    """

    path: str
    line: int

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        _edit_lines(root, self.path, lambda lines: lines[: self.line] + lines[self.line + 1 :])


@dataclass(frozen=True, kw_only=True)
class RepeatLine:
    """Write line ``line`` twice: a repeated coordinate, barcode, feature or cell.

    Parameters
    ----------
    path
        The file, below the sources' root.
    line
        The line, 0-based.
    """

    path: str
    line: int

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        _edit_lines(root, self.path, lambda lines: lines[: self.line + 1] + lines[self.line :])


@dataclass(frozen=True, kw_only=True)
class SetField:
    """Replace field ``field`` of line ``line`` (fields split at ``sep``) by ``text``.

    Parameters
    ----------
    path
        The file, below the sources' root.
    line
        The line, 0-based.
    field
        The field, 0-based.
    text
        What the field becomes.
    sep
        The field separator.
    """

    path: str
    line: int
    field: int
    text: str
    sep: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        sep = self.sep.encode()

        def edit(lines: list[bytes]) -> list[bytes]:
            fields = lines[self.line].split(sep)
            fields[self.field] = self.text.encode()
            return _replace_line(lines, self.line, sep.join(fields))

        _edit_lines(root, self.path, edit)


@dataclass(frozen=True, kw_only=True)
class SetFieldCount:
    """Cut line ``line`` to ``count`` fields, or pad it with fields ``1`` to ``count``.

    Parameters
    ----------
    path
        The file, below the sources' root.
    line
        The line, 0-based.
    count
        The fields the line then has.
    sep
        The field separator.
    """

    path: str
    line: int
    count: int
    sep: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        sep = self.sep.encode()

        def edit(lines: list[bytes]) -> list[bytes]:
            fields = (lines[self.line].split(sep) + [b"1"] * self.count)[: self.count]
            return _replace_line(lines, self.line, sep.join(fields))

        _edit_lines(root, self.path, edit)


@dataclass(frozen=True, kw_only=True)
class DropColumn:
    """Remove field ``column`` from every line but the header: rows one field shorter than it.

    Parameters
    ----------
    path
        The file, below the sources' root.
    column
        The field, 0-based.
    sep
        The field separator.
    """

    path: str
    column: int
    sep: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        sep = self.sep.encode()

        def edit(lines: list[bytes]) -> list[bytes]:
            rows = [line.split(sep) for line in lines[1:]]
            return [lines[0], *(sep.join(r[: self.column] + r[self.column + 1 :]) for r in rows)]

        _edit_lines(root, self.path, edit)


@dataclass(frozen=True, kw_only=True)
class H5Delete:
    """Delete the dataset or group ``key`` of an HDF5 file (10x ``.h5``, ``.h5ad``).

    Parameters
    ----------
    path
        The file, below the sources' root.
    key
        The dataset's or group's path in the file.
    """

    path: str
    key: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        with h5py.File(mutated_file(root, self.path), "r+") as f:
            del f[self.key]


@dataclass(frozen=True, kw_only=True)
class H5SetValue:
    """Set element ``index`` of the dataset ``key`` to ``value``, a value no valid file holds there.

    Parameters
    ----------
    path
        The file, below the sources' root.
    key
        The dataset's path in the file.
    index
        The element.
    value
        Its new value, cast to the dataset's dtype.
    """

    path: str
    key: str
    index: int
    value: float

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        with h5py.File(mutated_file(root, self.path), "r+") as f:
            dataset = f[self.key]
            with np.errstate(invalid="ignore", over="ignore"):
                dataset[self.index] = np.asarray(self.value).astype(dataset.dtype)


@dataclass(frozen=True, kw_only=True)
class H5Shorten:
    """Rewrite the 1-D dataset ``key`` without its last element, keeping its dtype and attributes.

    Parameters
    ----------
    path
        The file, below the sources' root.
    key
        The dataset's path in the file.
    """

    path: str
    key: str

    def apply(self, root: Path) -> None:
        """Make the change below ``root``.

        Parameters
        ----------
        root
            The root folder of the copy to change.
        """
        with h5py.File(mutated_file(root, self.path), "r+") as f:
            dataset = f[self.key]
            data, dtype, attrs = dataset[()], dataset.dtype, dict(dataset.attrs)
            del f[self.key]
            f.create_dataset(self.key, data=data[:-1], dtype=dtype).attrs.update(attrs)


SourceMutation: TypeAlias = (
    FlipBit
    | Truncate
    | DropLine
    | RepeatLine
    | SetField
    | SetFieldCount
    | DropColumn
    | H5Delete
    | H5SetValue
    | H5Shorten
)
"""A mutation of a source file."""

_INDEX_TEXTS: Final = ("x", "-1", "0", "1.5", "99999999")
"""Matrix Market row or column indices that are not indices of the matrix."""
_VALUE_TEXTS: Final = ("x", "-1", "2.5", "nan", "1e999")
"""Matrix Market values that are not integer counts."""
_CELL_TEXTS: Final = ("x", "", "-1", "2.5", "nan", "1e999")
"""CSV cells that are not counts."""


@dataclass(frozen=True, kw_only=True)
class SourceFile:
    """A pristine source file and what may be mutated in it.

    Parameters
    ----------
    path
        Its path below the sources' root.
    kind
        ``mtx`` (a Matrix Market matrix), ``table`` (a CSV of counts),
        ``lines`` (a TSV of barcodes or features) or ``h5``.
    size
        Its size in bytes.
    n_lines
        Text lines, without the final newline.
    first_data_line
        The first line that holds values (after a Matrix Market file's
        banner, comments and size line; after a table's header).
    n_fields
        Fields of the first data line.
    sep
        The field separator.
    datasets
        HDF5: every dataset's key, length (0 for a scalar) and the invalid
        values it may be set to.
    groups
        HDF5: every group's key.
    """

    path: str
    kind: Literal["mtx", "table", "lines", "h5"]
    size: int
    n_lines: int = 0
    first_data_line: int = 0
    n_fields: int = 0
    sep: str = "\t"
    datasets: tuple[tuple[str, int, tuple[float, ...]], ...] = ()
    groups: tuple[str, ...] = ()

    @property
    def gzipped(self) -> bool:
        """Whether the file is gzip-compressed, so that its bytes carry a CRC."""
        return self.path.endswith(".gz")


def _invalid_values(name: str, dataset: h5py.Dataset) -> tuple[float, ...]:
    """Values no valid CSR or CSC matrix holds: negative or non-finite data, indices and pointers out of range."""
    if name == "data":
        return (-1.0, math.nan, math.inf) if dataset.dtype.kind == "f" else (-1.0,)
    if name == "indices":
        return (-1.0, float(np.iinfo(dataset.dtype).max))
    if name == "indptr":
        sibling = dataset.parent.get("data")
        return (-1.0, float(len(sibling) + 1 if sibling is not None else 1))
    if name == "shape":
        return (0.0, -1.0)
    return ()


def _scan_h5(path: Path, rel: str) -> SourceFile:
    datasets: list[tuple[str, int, tuple[float, ...]]] = []
    groups: list[str] = []

    def visit(key: str, node: h5py.Dataset | h5py.Group) -> None:
        if isinstance(node, h5py.Dataset):
            length = node.shape[0] if node.shape else 0
            datasets.append((key, length, _invalid_values(key.rsplit("/", 1)[-1], node)))
        else:
            groups.append(key)

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return SourceFile(
        path=rel,
        kind="h5",
        size=path.stat().st_size,
        datasets=tuple(datasets),
        groups=tuple(groups),
    )


def _scan_text(path: Path, rel: str) -> SourceFile:
    lines = _read_text(path).removesuffix(b"\n").split(b"\n")
    name = path.name
    kind: Literal["mtx", "table", "lines"]
    if name.startswith("matrix.mtx"):
        first = next(i for i, line in enumerate(lines) if not line.startswith(b"%")) + 1
        kind, sep = "mtx", " "
    elif ".csv" in name:
        first, kind, sep = 1, "table", ","
    else:
        first, kind, sep = 0, "lines", "\t"
    fields = len(lines[first].split(sep.encode())) if len(lines) > first else 0
    return SourceFile(
        path=rel,
        kind=kind,
        size=path.stat().st_size,
        n_lines=len(lines),
        first_data_line=first,
        n_fields=fields,
        sep=sep,
    )


def scan_sources(root: Path) -> tuple[SourceFile, ...]:
    """The source files below ``root`` and what may be mutated in them.

    Parameters
    ----------
    root
        The pristine sources (as :func:`write_sources` writes them).

    Returns
    -------
    tuple of SourceFile
        Sorted by path.
    """
    return tuple(
        _scan_h5(p, p.relative_to(root).as_posix())
        if p.suffix in {".h5", ".h5ad"}
        else _scan_text(p, p.relative_to(root).as_posix())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    )


def draw_source_mutation(
    files: Sequence[SourceFile], choose: Choose, *, raw_h5: bool = False
) -> SourceMutation:
    """One mutation that makes a source file invalid.

    Text files, gzipped or not: a line dropped or repeated (a CSV table's
    data line only repeated, since a table without one is another valid
    table), a line given a field too few or too many, a Matrix Market index
    or value or a CSV count replaced by text that is not one, a CSV column
    dropped below its header; gzipped files also a flipped bit or a
    truncation. HDF5 files: a dataset or group deleted, an element of a
    matrix's ``data``, ``indices``, ``indptr`` or ``shape`` set to an invalid
    value, a 1-D dataset one element short; with ``raw_h5`` also flipped
    bits and truncations, which can crash the HDF5 library itself (apply
    those in a child process).

    Parameters
    ----------
    files
        The pristine sources (:func:`scan_sources`).
    choose
        ``choose(n)`` gives an integer in ``range(n)``.
    raw_h5
        Also draw byte-level damage of HDF5 files.

    Returns
    -------
    SourceMutation
        The mutation, to apply to a copy of the sources' root.
    """
    f = files[choose(len(files))]
    if f.kind == "h5":
        return _draw_h5(f, choose, raw_h5=raw_h5)
    kinds = [
        "repeat",
        "fields",
        *(["drop"] if f.kind != "table" else []),
        *(["set"] if f.kind in {"mtx", "table"} else []),
        *(["column"] if f.kind == "table" and f.n_fields > 1 else []),
        *(["flip", "truncate"] if f.gzipped else []),
    ]
    kind = kinds[choose(len(kinds))]
    if kind in {"set", "fields", "repeat"} and f.kind != "lines":
        line = f.first_data_line + choose(max(f.n_lines - f.first_data_line, 1))
    else:
        line = choose(f.n_lines)
    builders: dict[str, Callable[[], SourceMutation]] = {
        "flip": lambda: FlipBit(path=f.path, offset=choose(f.size), bit=choose(8)),
        "truncate": lambda: Truncate(path=f.path, size=choose(f.size)),
        "drop": lambda: DropLine(path=f.path, line=line),
        "repeat": lambda: RepeatLine(path=f.path, line=line),
        "column": lambda: DropColumn(path=f.path, column=1 + choose(f.n_fields - 1), sep=f.sep),
        "fields": lambda: SetFieldCount(
            path=f.path, line=line, count=max(f.n_fields + (1, -1)[choose(2)], 1), sep=f.sep
        ),
        "set": lambda: _set_field(f, line, choose),
    }
    return builders[kind]()


def _set_field(f: SourceFile, line: int, choose: Choose) -> SetField:
    if f.kind == "mtx":
        column = choose(3)
        texts: tuple[str, ...] = _INDEX_TEXTS if column < 2 else _VALUE_TEXTS
    else:
        column = 1 + choose(f.n_fields - 1)
        texts = _CELL_TEXTS
    text = texts[choose(len(texts))]
    return SetField(path=f.path, line=line, field=column, text=text, sep=f.sep)


def _draw_h5(f: SourceFile, choose: Choose, *, raw_h5: bool) -> SourceMutation:
    settable = [d for d in f.datasets if d[2] and d[1] > 0]
    vectors = [d[0] for d in f.datasets if d[1] > 0]
    kinds = [
        "delete",
        *(["shorten"] if vectors else []),
        *(["set"] if settable else []),
        *(["flip", "truncate"] if raw_h5 else []),
    ]
    kind = kinds[choose(len(kinds))]
    if kind == "flip":
        return FlipBit(path=f.path, offset=choose(f.size), bit=choose(8))
    if kind == "truncate":
        return Truncate(path=f.path, size=choose(f.size))
    if kind == "set":
        key, length, values = settable[choose(len(settable))]
        value = values[choose(len(values))]
        return H5SetValue(path=f.path, key=key, index=choose(length), value=value)
    if kind == "shorten":
        return H5Shorten(path=f.path, key=vectors[choose(len(vectors))])
    keys = [d[0] for d in f.datasets] + list(f.groups)
    return H5Delete(path=f.path, key=keys[choose(len(keys))])


def write_sources(
    folder: Path, *, n_cells: int = 40, n_genes: int = 210, seed: int = 0
) -> dict[str, Path]:
    """Write one small synthetic dataset in every format the importers read.

    The dataset is :func:`cytearc.datasets.generate`'s with one cell type,
    one marker gene and two donors.
    :func:`cytearc.datasets.synthetic.write_dataset` writes its 10x Matrix
    Market folder (``mtx/``: a plain ``matrix.mtx``, gzipped tables) and
    ``data.h5ad``; this adds ``mtx_gz/`` (every file gzipped), ``matrix.h5``
    (10x v3 HDF5) and the counts, cells x genes with the cell ids, as
    ``counts.csv`` and ``counts.csv.gz``.

    Parameters
    ----------
    folder
        Where the sources are written (created).
    n_cells, n_genes, seed
        What is generated (``n_genes`` at least 202, for the planted genes).

    Returns
    -------
    dict of str to Path
        The source to import, by name: ``mtx``, ``mtx_gz``, ``h5``, ``h5ad``,
        ``csv`` and ``csv_gz``.

    Raises
    ------
    OperationArgumentError
        The sizes cannot hold the planted genes.
    """
    from cytearc.datasets.synthetic import Params, generate, write_dataset  # noqa: PLC0415 (imports the importers)

    sizes = {"n_cells": n_cells, "n_genes": n_genes, "n_types": 1, "n_markers": 1, "n_donors": 2}
    data = generate(**sizes, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    write_dataset(Params(**sizes, seed=seed), folder)
    for name in ("truth.json", "COMPLETE"):
        (folder / name).unlink()
    (folder / "mtx_gz").mkdir(exist_ok=True)
    for source in sorted((folder / "mtx").iterdir()):
        packed = source.read_bytes()
        name = source.name if source.suffix == ".gz" else f"{source.name}.gz"
        (folder / "mtx_gz" / name).write_bytes(
            packed if source.suffix == ".gz" else gzip.compress(packed, mtime=0)
        )
    counts = sp.csc_matrix(data.counts.T)
    with h5py.File(folder / "matrix.h5", "w") as f:
        matrix = f.create_group("matrix")
        matrix["data"], matrix["indices"], matrix["indptr"] = (
            counts.data,
            counts.indices,
            counts.indptr,
        )
        matrix["shape"] = np.array(counts.shape, dtype=np.int32)
        matrix["barcodes"] = np.asarray(data.cells["ids"], dtype="S")
        for key, column in (("id", "ids"), ("name", "names"), ("feature_type", "feature_types")):
            matrix[f"features/{key}"] = np.asarray(data.features[column], dtype="S")
    table = pd.DataFrame(
        data.counts.toarray(),
        index=pd.Index(data.cells["ids"], name="cell"),
        columns=data.features["ids"],
    )
    table.to_csv(folder / "counts.csv")
    (folder / "counts.csv.gz").write_bytes(
        gzip.compress((folder / "counts.csv").read_bytes(), mtime=0)
    )
    names = {"mtx": "mtx", "mtx_gz": "mtx_gz", "h5": "matrix.h5", "h5ad": "data.h5ad"}
    return {
        **{k: folder / v for k, v in names.items()},
        "csv": folder / "counts.csv",
        "csv_gz": folder / "counts.csv.gz",
    }
