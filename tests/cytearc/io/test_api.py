"""The public import API: one function per format, its class, import_data, and their options."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest
import scipy.io

import cytearc
import cytearc.io
from cytearc import DataStore
from cytearc.cli import main
from cytearc.errors import ImportOptionError
from cytearc.io import (
    CrToZarr,
    CSVtoZarr,
    H5adToZarr,
    MtxToZarr,
    SparseToZarr,
    ToZarr,
    import_10x_h5,
    import_10x_mtx,
    import_csv,
    import_data,
    import_h5ad,
    importer_options,
    write_store,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cytearc.engine.cluster import Engine
    from cytearc.io.importer import ImportResult

V3_H5 = ("10x_v3_pbmc1k_chr21", "filtered_feature_bc_matrix.h5")
V3_MTX = ("10x_v3_pbmc1k_chr21", "filtered_feature_bc_matrix")
V2_H5 = ("10x_v2_h5_hg19_chr21", "filtered_gene_bc_matrices_h5.h5")
WU_H5AD = ("h5ad_wu2020_tcells_200", "wu2020_200.h5ad")
V2_MTX = "10x_v2_mtx_hg19_chr21"

FUNCTIONS: dict[Callable[..., ImportResult], Callable[..., ToZarr]] = {
    import_10x_h5: CrToZarr,
    import_10x_mtx: MtxToZarr,
    import_h5ad: H5adToZarr,
    import_csv: CSVtoZarr,
}


def _v2_counts_as_tsv(shared_data: Path, tmp_path: Path) -> Path:
    """The real v2 10x counts, genes x cells, written as a tab-separated table."""
    folder = shared_data / V2_MTX
    counts = scipy.io.mmread(folder / "matrix.mtx").toarray()
    genes = pd.read_csv(folder / "genes.tsv", sep="\t", header=None)[0]
    barcodes = pd.read_csv(folder / "barcodes.tsv", sep="\t", header=None)[0]
    path = tmp_path / "counts.tsv"
    pd.DataFrame(counts, index=genes, columns=barcodes).to_csv(path, sep="\t")
    return path


def _keyword_only(callable_: Callable[..., object]) -> list[tuple[str, object, object]]:
    return [
        (p.name, p.default, p.annotation)
        for p in inspect.signature(callable_).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("function", "options"),
    [
        (import_10x_h5, {}),
        (import_10x_h5, {"genome": "GRCh38_chr21"}),
        (import_10x_mtx, {}),
        (import_h5ad, {}),
        (import_csv, {"orientation": "features_x_cells"}),
    ],
    ids=["10x_h5", "10x_h5_genome", "10x_mtx", "h5ad", "csv"],
)
def test_function_class_and_import_data_give_one_dataset(
    tmp_path: Path,
    shared_data: Path,
    engine: Engine,
    function: Callable[..., ImportResult],
    options: dict[str, Any],
) -> None:
    """Each format's function, its class and import_data import a real file to one dataset fingerprint."""
    source = {
        import_10x_h5: shared_data.joinpath(*V3_H5),
        import_10x_mtx: shared_data.joinpath(*V3_MTX),
        import_h5ad: shared_data.joinpath(*WU_H5AD),
    }.get(function) or _v2_counts_as_tsv(shared_data, tmp_path)
    common: dict[str, Any] = {"engine": engine, "show_progress": False}
    by_function = function(source, tmp_path / "function.zarr", **options, **common)
    by_class = FUNCTIONS[function](source, tmp_path / "class.zarr", **options, **common).dump()
    detected = import_data(source, tmp_path / "detected.zarr", **options, **common)
    assert by_function.path == tmp_path / "function.zarr"
    assert by_function.dataset_fingerprint == by_class.dataset_fingerprint
    assert by_function.dataset_fingerprint == detected.dataset_fingerprint
    assert DataStore(by_function.path).dataset_fingerprint == by_function.dataset_fingerprint
    assert by_function.shapes == by_class.shapes == detected.shapes


def test_csv_counts_equal_the_10x_counts(tmp_path: Path, shared_data: Path, engine: Engine) -> None:
    """A real 10x matrix written as TSV imports, tab inferred from the name, to the 10x counts fingerprint."""
    table = import_csv(
        _v2_counts_as_tsv(shared_data, tmp_path),
        tmp_path / "csv.zarr",
        orientation="features_x_cells",
        engine=engine,
        show_progress=False,
    )
    tenx = import_10x_mtx(
        shared_data / V2_MTX, tmp_path / "mtx.zarr", engine=engine, show_progress=False
    )
    assert (
        DataStore(table.path).assays["RNA"].content_fingerprint
        == DataStore(tenx.path).assays["RNA"].content_fingerprint
    )


@pytest.mark.parametrize(
    ("parts", "option", "importers"),
    [
        (V3_H5, "layer", ("CrToZarr", "H5adToZarr, H5muToZarr and LoomToZarr take it")),
        (V3_MTX, "genome", ("MtxToZarr", "CrToZarr takes it")),
        (WU_H5AD, "orientation", ("H5adToZarr", "CSVtoZarr takes it")),
    ],
)
def test_option_of_another_format_is_refused_before_writing(
    tmp_path: Path,
    shared_data: Path,
    parts: tuple[str, str],
    option: str,
    importers: tuple[str, str],
) -> None:
    """import_data refuses an option the detected format's importer does not take, naming it, the importer that takes it and the options, and writes nothing."""
    importer, taken_by = importers
    destination = tmp_path / "ds.zarr"
    with pytest.raises(ImportOptionError) as caught:
        import_data(shared_data.joinpath(*parts), destination, **{option: "x"})
    message = str(caught.value)
    assert f"no option {option!r} ({taken_by})" in message
    assert f"whose importer {importer} takes" in message
    accepted = ", ".join(importer_options(getattr(cytearc.io, importer)))
    assert f"it takes {accepted}." in message
    assert not destination.exists()


def test_misspelt_options_are_named_with_the_likely_option(tmp_path: Path) -> None:
    """Every unknown option is named, with the closest option it takes, before the source is read."""
    missing = tmp_path / "never-written.csv"
    with pytest.raises(
        TypeError,
        match=r"'sepp' \(did you mean 'sep'\?\), 'layot' \(did you mean 'layout'\?\), 'colour'; it takes",
    ):
        import_data(missing, tmp_path / "ds.zarr", sepp=";", layot=None, colour="red")
    assert not (tmp_path / "ds.zarr").exists()


@pytest.mark.parametrize("function", list(FUNCTIONS), ids=lambda f: f.__name__)
def test_function_takes_exactly_its_class_options(function: Callable[..., ImportResult]) -> None:
    """Each function's keyword-only options are its class's, with the same defaults and types."""
    assert _keyword_only(function) == _keyword_only(FUNCTIONS[function])
    assert inspect.signature(function).return_annotation == "ImportResult"


@pytest.mark.parametrize(
    "importer", [ToZarr, SparseToZarr, CrToZarr, MtxToZarr, H5adToZarr, CSVtoZarr]
)
def test_importers_take_every_store_option(importer: type[ToZarr]) -> None:
    """Each importer ends with write_store's options, with its defaults and types."""
    store_options = _keyword_only(write_store)
    assert _keyword_only(importer)[-len(store_options) :] == store_options


def test_function_refuses_an_unknown_option_before_writing(
    tmp_path: Path, shared_data: Path
) -> None:
    """A format's function refuses an option it does not take with a TypeError, writing nothing."""
    with pytest.raises(TypeError, match="genome"):
        import_h5ad(shared_data.joinpath(*WU_H5AD), tmp_path / "ds.zarr", genome="hg19")  # type: ignore[call-arg]
    assert not (tmp_path / "ds.zarr").exists()


def test_top_level_exports_the_import_functions() -> None:
    """The package exports import_data and the format functions, the same objects as cytearc.io."""
    for name in ("import_data", "import_10x_h5", "import_10x_mtx", "import_h5ad", "import_csv"):
        assert getattr(cytearc, name) is getattr(cytearc.io, name)
        assert name in cytearc.__all__


def _sections(doc: str) -> dict[str, list[str]]:
    """The entry names of each numpydoc section of a docstring."""
    sections: dict[str, list[str]] = {}
    lines = inspect.cleandoc(doc).splitlines()
    current: list[str] | None = None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1]) and line:
            current = sections.setdefault(line, [])
        elif (
            current is not None and line and not line[0].isspace() and not re.fullmatch(r"-+", line)
        ):
            current.extend(name.strip().lstrip("*") for name in line.split(" : ")[0].split(","))
    return sections


def _public(module: object) -> list[tuple[str, Any]]:
    return [(name, getattr(module, name)) for name in getattr(module, "__all__", [])]


@pytest.mark.parametrize(
    "module",
    ["converters", "detect", "importer", "tenx", "h5ad", "csv"],
)
def test_public_api_is_documented(module: str) -> None:
    """Every public function and class of the module documents each parameter, its return and its errors."""
    namespace = importlib.import_module(f"cytearc.io.{module}")
    for name, value in _public(namespace):
        if not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        doc = value.__doc__ or ""
        assert "%(" not in doc, f"{name}: an unfilled mark in its docstring"
        sections = _sections(doc)
        parameters = [
            p.name for p in inspect.signature(value).parameters.values() if p.name != "self"
        ]
        documented = sections.get("Parameters", []) + sections.get("Attributes", [])
        assert sorted(parameters) == sorted(documented), name
        if inspect.isfunction(value):
            assert "Returns" in sections, name
        if inspect.isfunction(value) and name.startswith("import_"):
            assert "Raises" in sections, name
            assert "Examples" in sections, name


def test_cli_refuses_an_option_of_another_format(
    tmp_path: Path, shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cytearc import x.h5 --layer L` exits 1 naming ImportOptionError, and creates nothing."""
    destination = tmp_path / "ds.zarr"
    code = main(
        ["import", str(shared_data.joinpath(*V2_H5)), str(destination), "--layer", "counts"]
    )
    assert code == 1
    assert "ImportOptionError" in capsys.readouterr().err
    assert not destination.exists()


def test_cli_reads_a_table_with_its_options(
    tmp_path: Path, shared_data: Path, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    r"""`cytearc import` passes --orientation, --sep '\t' and --index-col to the table importer (a tab table named .csv)."""
    table = _v2_counts_as_tsv(shared_data, tmp_path).rename(tmp_path / "counts.csv")
    code = main(
        [
            "import",
            str(table),
            str(tmp_path / "ds.zarr"),
            "--orientation",
            "features_x_cells",
            "--sep",
            "\\t",
            "--index-col",
            "0",
            "--json",
        ]
    )
    output = capsys.readouterr()
    assert code == 0, output.err
    assert json.loads(output.out)["shapes"] == {"RNA": [12, 343]}
