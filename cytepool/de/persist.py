"""Saving and reading limma-voom results: CSV with a JSON sidecar, Parquet, and directories.

A result is its top table plus a JSON metadata object::

    {"format": "cytepool.de.limma_result", "format_version": 1,
     "cytepool_version": ..., "settings": {...},
     "index": {"name": <gene index name or null>, "kind": "text" | "int"},
     "design": {"name": <sample index name or null>, "samples": [...],
                "columns": [...], "values": [[...], ...]},
     "samples": {"name": <sample index name or null>, "labels": [...],
                 "lib_size": [...], "norm_factors": [...]},
     "prior": {"df_prior": ..., "s2_prior": ..., "var_prior": ...},
     "removed_genes": [{"position": <input position>, "gene": <label>}, ...],
     "cube": null | {"fingerprint", "digests", "provenance", "group",
                     "samples_used", "samples_dropped"}}

Non-finite prior values are the strings ``"inf"``/``"nan"``. CSV: the table in
``path`` (floats written in shortest round-trip form, the gene index as the
first column) and the metadata in the sidecar ``path + ".json"``. Parquet: the
metadata is the value of the schema key ``cytepool.de`` (needs pyarrow). A
directory of :class:`LimmaResults` holds ``results.json`` (format
``cytepool.de.limma_results``, the file of each group and the skipped groups
with their reasons) and one file per group, ``group-0000.parquet`` and so on;
it is published whole (written to a hidden sibling, then renamed into place),
and only a directory with such a ``results.json`` is ever replaced.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

from cytepool._versions import package_version
from cytepool.cube.atomic import fsync_tree, publish, staging
from cytepool.de.result import CubeSource, EBayesPrior, LimmaResult, LimmaResults
from cytepool.de.toptable import TOP_TABLE_COLUMNS
from cytepool.errors import LimmaError, ResultExistsError, ResultFormatError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from os import PathLike

__all__ = [
    "from_metadata",
    "read_result",
    "read_results",
    "staged_results",
    "to_metadata",
    "write_csv",
    "write_parquet",
    "write_result_files",
    "write_results",
]

FORMAT: Final = "cytepool.de.limma_result"
RESULTS_FORMAT: Final = "cytepool.de.limma_results"
FORMAT_VERSION: Final = 1
PARQUET_KEY: Final = b"cytepool.de"


def _label(value: object) -> str | int:
    """A row or column label as a JSON value."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, str | int):
        msg = f"label {value!r} of type {type(value).__name__} cannot be saved; labels must be strings or integers"
        raise ResultFormatError(msg)
    return value


def to_metadata(result: LimmaResult) -> dict[str, Any]:
    """The JSON metadata of ``result`` (everything but the table's values).

    Parameters
    ----------
    result
        The result to describe.

    Returns
    -------
    dict
        The object of this module's format, ready for :func:`json.dumps`.

    Raises
    ------
    ResultFormatError
        When a gene or sample label is neither a string nor an integer.
    """
    index = result.table.index
    kind = "int" if pd.api.types.is_integer_dtype(index.dtype) else "text"
    kept = result.kept
    removed = [
        {"position": int(i), "gene": _label(g)}
        for i, (g, k) in enumerate(zip(kept.index, kept.to_numpy(), strict=True))
        if not k
    ]
    design = result.design
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "cytepool_version": package_version("cytepool"),
        "settings": result.settings,
        "index": {"name": None if index.name is None else str(index.name), "kind": kind},
        "design": {
            "name": None if design.index.name is None else str(design.index.name),
            "samples": [_label(s) for s in design.index],
            "columns": [str(c) for c in design.columns],
            "values": design.to_numpy().tolist(),
        },
        "samples": {
            "name": None if result.lib_size.index.name is None else str(result.lib_size.index.name),
            "labels": [_label(s) for s in result.lib_size.index],
            "lib_size": result.lib_size.to_numpy(dtype=np.float64).tolist(),
            "norm_factors": result.norm_factors.to_numpy(dtype=np.float64).tolist(),
        },
        "prior": result.prior.to_json(),
        "removed_genes": removed,
        "cube": None if result.cube is None else result.cube.to_json(),
    }


def _parse_metadata(value: object, *, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        found = value.get("format") if isinstance(value, dict) else type(value).__name__
        msg = f"{where}: expected limma result metadata (format {FORMAT!r}), found {found!r}"
        raise ResultFormatError(msg)
    version = value.get("format_version")
    if version != FORMAT_VERSION:
        msg = (
            f"{where}: limma result format version {version!r} is not one this CytePool reads "
            f"({FORMAT_VERSION}); read it with the CytePool version that wrote it "
            f"({value.get('cytepool_version')!r}) or recompute the result"
        )
        raise ResultFormatError(msg)
    keys = {"settings", "index", "design", "samples", "prior", "removed_genes", "cube"}
    missing = sorted(keys - set(value))
    if missing:
        msg = f"{where}: limma result metadata lacks keys {missing}; the file was edited or damaged"
        raise ResultFormatError(msg)
    return value


def from_metadata(metadata: dict[str, Any], table: pd.DataFrame, *, where: str) -> LimmaResult:
    """The result made of a table read back and its metadata.

    Parameters
    ----------
    metadata
        The metadata object (:func:`to_metadata`'s output, parsed from JSON).
    table
        The top table read back.
    where
        The file it was read from, for messages.

    Returns
    -------
    LimmaResult
        Without ``weights``, ``E``, ``voom_trend`` and ``fit``.

    Raises
    ------
    ResultFormatError
        When the metadata is of another format or version or lacks keys, or
        the table's columns are not those of a top table.
    """
    meta = _parse_metadata(metadata, where=where)
    if tuple(table.columns) != TOP_TABLE_COLUMNS:
        msg = f"{where}: expected table columns {list(TOP_TABLE_COLUMNS)}, found {list(table.columns)}"
        raise ResultFormatError(msg)
    table = table.astype(np.float64)
    table.index.name = meta["index"]["name"]
    removed = meta["removed_genes"]
    n_genes = len(table) + len(removed)
    genes: list[Any] = [None] * n_genes
    kept = np.ones(n_genes, dtype=bool)
    for entry in removed:
        genes[entry["position"]] = entry["gene"]
        kept[entry["position"]] = False
    for position, gene in zip(np.flatnonzero(kept), table.index.tolist(), strict=True):
        genes[position] = gene
    design = meta["design"]
    samples = meta["samples"]
    labels = pd.Index(samples["labels"], name=samples.get("name"))
    return LimmaResult(
        table=table,
        settings=meta["settings"],
        design=pd.DataFrame(
            np.asarray(design["values"], dtype=np.float64).reshape(
                len(design["samples"]), len(design["columns"])
            ),
            index=pd.Index(design["samples"], name=design.get("name")),
            columns=design["columns"],
        ),
        lib_size=pd.Series(samples["lib_size"], index=labels, name="lib_size", dtype=np.float64),
        norm_factors=pd.Series(
            samples["norm_factors"], index=labels, name="norm_factors", dtype=np.float64
        ),
        prior=EBayesPrior.from_json(meta["prior"]),
        kept=pd.Series(kept, index=pd.Index(genes, name=table.index.name), name="kept"),
        cube=None if meta["cube"] is None else CubeSource.from_json(meta["cube"]),
    )


def _table_for_file(result: LimmaResult) -> pd.DataFrame:
    table = result.table.loc[:, list(TOP_TABLE_COLUMNS)].copy()
    if table.index.name is None:
        table.index.name = "gene"
    return table


def write_csv(result: LimmaResult, path: str | PathLike[str]) -> None:
    """Write the table to ``path`` and the metadata to ``path + ".json"``.

    Parameters
    ----------
    result
        The result to write.
    path
        The CSV file; replaced if it exists, as is its sidecar.

    Raises
    ------
    ResultFormatError
        When a label cannot be saved (see :func:`to_metadata`).
    """
    target = Path(path)
    metadata = to_metadata(result)
    _table_for_file(result).to_csv(target)
    Path(f"{target}.json").write_text(json.dumps(metadata, indent=1), encoding="utf-8")


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa  # noqa: PLC0415 (optional dependency)
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError as error:
        msg = "saving or reading limma results as Parquet needs pyarrow: pip install pyarrow"
        raise ImportError(msg) from error
    return pa, pq


def write_parquet(result: LimmaResult, path: str | PathLike[str]) -> None:
    """Write the table to ``path`` with the metadata in the Parquet schema.

    Parameters
    ----------
    result
        The result to write.
    path
        The Parquet file; replaced if it exists.

    Raises
    ------
    ImportError
        When pyarrow is not installed.
    ResultFormatError
        When a label cannot be saved (see :func:`to_metadata`).
    """
    pa, pq = _pyarrow()
    metadata = to_metadata(result)
    table = pa.Table.from_pandas(_table_for_file(result), preserve_index=True)
    schema_metadata = {**(table.schema.metadata or {}), PARQUET_KEY: json.dumps(metadata).encode()}
    pq.write_table(table.replace_schema_metadata(schema_metadata), Path(path))


def _read_csv(path: Path) -> LimmaResult:
    sidecar = Path(f"{path}.json")
    if not sidecar.is_file():
        msg = f"{path}: the metadata sidecar {sidecar.name} is missing; a limma result CSV is read with its sidecar"
        raise ResultFormatError(msg)
    try:
        metadata = json.loads(sidecar.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        msg = f"{sidecar}: not valid JSON ({error})"
        raise ResultFormatError(msg) from error
    meta = _parse_metadata(metadata, where=str(sidecar))
    index_dtype: Any = np.int64 if meta["index"]["kind"] == "int" else str
    header = pd.read_csv(path, nrows=0).columns
    table = pd.read_csv(
        path,
        index_col=0,
        dtype={header[0]: index_dtype},
        float_precision="round_trip",
        keep_default_na=False,
        na_values=["", "NaN", "nan"],
    )
    return from_metadata(meta, table, where=str(path))


def _read_parquet(path: Path) -> LimmaResult:
    _, pq = _pyarrow()
    table = pq.read_table(path)
    raw = (table.schema.metadata or {}).get(PARQUET_KEY)
    if raw is None:
        msg = f"{path}: the Parquet schema has no {PARQUET_KEY.decode()!r} metadata; not a limma result"
        raise ResultFormatError(msg)
    return from_metadata(json.loads(raw), table.to_pandas(), where=str(path))


def read_result(path: str | PathLike[str]) -> LimmaResult:
    """Read a result written by :func:`write_csv` or :func:`write_parquet`, by extension.

    Parameters
    ----------
    path
        A ``.parquet`` (or ``.pq``) file, or a CSV file with its ``.json`` sidecar.

    Returns
    -------
    LimmaResult
        Without ``weights``, ``E``, ``voom_trend`` and ``fit``.

    Raises
    ------
    ResultFormatError
        When the file or its sidecar is missing, is not valid JSON, or its
        metadata is of another format or version or was edited.
    ImportError
        For a Parquet file when pyarrow is not installed.
    """
    source = Path(path)
    if not source.is_file():
        msg = f"{source}: no such file"
        raise ResultFormatError(msg)
    if source.suffix.lower() in {".parquet", ".pq"}:
        return _read_parquet(source)
    return _read_csv(source)


def _parse_file_format(file_format: object) -> str:
    if file_format not in {"parquet", "csv"}:
        msg = f"file_format: expected 'parquet' or 'csv', found {file_format!r}; pass one of them"
        raise LimmaError(msg)
    if file_format == "parquet":
        _pyarrow()
    return str(file_format)


def _is_results_directory(root: Path) -> bool:
    """Whether ``root`` holds a ``results.json`` manifest that this module wrote."""
    try:
        document = json.loads((root / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and document.get("format") == RESULTS_FORMAT


def _validate_target(root: Path, *, overwrite: bool) -> bool:
    """Whether publishing at ``root`` replaces something; raise if it may not."""
    if not root.exists() and not root.is_symlink():
        return False
    if root.is_dir() and _is_results_directory(root):
        if not overwrite:
            msg = f"{root}: expected a directory without limma results, found results.json; pass overwrite=True to replace them or choose another directory"
            raise ResultExistsError(msg)
        return True
    if root.is_dir() and not any(root.iterdir()):
        return True
    kind = "directory" if root.is_dir() else "file"
    msg = (
        f"{root}: expected a directory of limma results written by cytepool (with a results.json "
        f"of format {RESULTS_FORMAT!r}) or none, found a {kind} without one; nothing was "
        "replaced - choose another directory or remove it"
    )
    raise ResultExistsError(msg)


@contextlib.contextmanager
def staged_results(directory: str | PathLike[str], *, overwrite: bool) -> Iterator[Path]:
    """Yield an empty hidden sibling of ``directory`` to write into, then publish it as ``directory``.

    When the block succeeds, the sibling is flushed to disk and renamed into
    place; an earlier result directory is swapped out atomically and only
    then deleted. When it fails, the sibling is removed and ``directory`` is
    left as it was.

    Parameters
    ----------
    directory
        The result directory; its parents are created if needed. It may
        exist as an empty directory, or, with ``overwrite``, as a directory
        of results written by this module.
    overwrite
        Replace a directory of results.

    Yields
    ------
    pathlib.Path
        The directory to write the results (and anything that belongs with them) into.

    Raises
    ------
    ResultExistsError
        When ``directory`` holds results and ``overwrite`` is False, or holds
        anything else (a file, a directory without a cytepool ``results.json``).
    """
    root = Path(directory)
    replace = _validate_target(root, overwrite=overwrite)
    root.parent.mkdir(parents=True, exist_ok=True)
    with staging(root) as tmp:
        tmp.mkdir()
        yield tmp
        fsync_tree(tmp)
        publish(tmp, root, replace=replace, exists_error=ResultExistsError)


def write_result_files(
    results: LimmaResults, directory: str | PathLike[str], *, file_format: str
) -> None:
    """Write every result of ``results`` and the ``results.json`` manifest into ``directory``.

    Parameters
    ----------
    results
        The results to write.
    directory
        An existing directory (the one :func:`staged_results` yields).
    file_format
        ``"parquet"`` or ``"csv"``.

    Raises
    ------
    LimmaError
        When ``file_format`` is neither ``"parquet"`` nor ``"csv"``.
    ImportError
        For Parquet when pyarrow is not installed.
    ResultFormatError
        When a group or gene label cannot be saved.
    """
    file_format = _parse_file_format(file_format)
    root = Path(directory)
    entries = []
    for position, (group, result) in enumerate(results.items()):
        name = f"group-{position:04d}.{file_format}"
        (write_parquet if file_format == "parquet" else write_csv)(result, root / name)
        entries.append({"group": _label(group), "file": name})
    skipped = [{"group": _label(g), "reason": reason} for g, reason in results.skipped.items()]
    document = {
        "format": RESULTS_FORMAT,
        "format_version": FORMAT_VERSION,
        "cytepool_version": package_version("cytepool"),
        "settings": results.settings,
        "groups": entries,
        "skipped": skipped,
    }
    (root / "results.json").write_text(json.dumps(document, indent=1), encoding="utf-8")


def write_results(
    results: LimmaResults, directory: str | PathLike[str], *, file_format: str, overwrite: bool
) -> None:
    """Write every result of ``results`` and the ``results.json`` manifest to ``directory``, atomically.

    The files are written into a hidden sibling that replaces ``directory``
    when complete (:func:`staged_results`): ``directory`` then holds these
    results and nothing else, and a failure leaves it as it was.

    Parameters
    ----------
    results
        The results to write.
    directory
        Created if needed; may be an empty directory.
    file_format
        ``"parquet"`` or ``"csv"``.
    overwrite
        Replace a directory of results written earlier.

    Raises
    ------
    LimmaError
        When ``file_format`` is neither ``"parquet"`` nor ``"csv"``.
    ResultExistsError
        When ``directory`` holds results and ``overwrite`` is False, or holds
        anything other than results written by cytepool (a :class:`FileExistsError`).
    ImportError
        For Parquet when pyarrow is not installed.
    ResultFormatError
        When a group or gene label cannot be saved.
    """
    file_format = _parse_file_format(file_format)
    with staged_results(directory, overwrite=overwrite) as tmp:
        write_result_files(results, tmp, file_format=file_format)


def read_results(directory: str | PathLike[str]) -> LimmaResults:
    """Read a directory written by :func:`write_results`.

    Parameters
    ----------
    directory
        The directory holding ``results.json``.

    Returns
    -------
    LimmaResults

    Raises
    ------
    ResultFormatError
        When there is no manifest, it is of another format or version, or a
        result file cannot be read (see :func:`read_result`).
    """
    root = Path(directory)
    manifest = root / "results.json"
    if not manifest.is_file():
        msg = f"{root}: no results.json; not a directory of limma results"
        raise ResultFormatError(msg)
    document = json.loads(manifest.read_text(encoding="utf-8"))
    if document.get("format") != RESULTS_FORMAT or document.get("format_version") != FORMAT_VERSION:
        msg = (
            f"{manifest}: expected format {RESULTS_FORMAT!r} version {FORMAT_VERSION}, found "
            f"{document.get('format')!r} version {document.get('format_version')!r}"
        )
        raise ResultFormatError(msg)
    return LimmaResults(
        results={e["group"]: read_result(root / e["file"]) for e in document["groups"]},
        skipped={e["group"]: e["reason"] for e in document["skipped"]},
        settings=document["settings"],
    )
