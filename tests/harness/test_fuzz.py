"""Fuzzing (issue 10, fail closed): a mutated store, cube or source is refused by name or reads back identical.

Hypothesis draws mutations (:mod:`cytearc.faults`) of three pristine targets
built once per module: a small store with a ``normalized`` artifact, the
example cube, and one dataset in every source format. Each example mutates a
private copy, reads everything (a source: imports it, then reads the store)
and is judged by :func:`cytearc.faults.classify`.

The findings of the harness are :data:`FINDINGS`. The property tests let a
verdict through when it is an open one; ``test_finding_is_still_open``
reproduces each open one as a strict xfail, so that a fix makes it pass and
asks for the entry to be marked ``fixed``; ``test_a_fixed_finding_stays_fixed``
then keeps its reproduction as a regression test.
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from cytearc.faults import (
    FUZZ_TARGETS,
    Delete,
    EditAttribute,
    FlipBit,
    FuzzTarget,
    H5Delete,
    H5Shorten,
    SetField,
    SetFieldCount,
    SwapArrays,
    Truncate,
    Verdict,
    fuzz_targets,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from cytearc.faults import Mutation

ACCEPTED = {"named-error", "identical", "warned"}
"""Failing closed: refused by name, read back identical, or stored as given with a warning naming the file."""

EXAMPLES = {"store": 40, "cube": 80, "sources": 150}
"""Examples per target, sized so that the module takes under a minute on 2 loaded cores."""


@pytest.fixture(scope="module", autouse=True)
def _address_space_guard() -> Iterator[None]:
    """At most 16 GiB of address space while fuzzing: a damaged chunk header can make a decoder allocate without bound."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 16 << 30
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FuzzTarget]:
    return fuzz_targets(tmp_path_factory.mktemp("pristine"))


def _path(mutation: Mutation) -> str:
    return getattr(mutation, "path", getattr(mutation, "first", ""))


def _under_table(path: str) -> bool:
    return path.startswith("cellData/") or "/featureData/" in path


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A way the code failed open: which verdicts it explains, one reproduction, and whether it is fixed."""

    name: str
    target: str
    reason: str
    matches: Callable[[Mutation, Verdict], bool]
    example: Callable[[FuzzTarget], Mutation]
    fixed: bool = False
    """Fixed: its reproduction must fail closed and it excuses no verdict any more."""


def _artifact_array_document(target: FuzzTarget, kind: str, array: str) -> str:
    document = _artifact_document(target, kind)
    return document.replace("/zarr.json", f"/{array}/zarr.json")


def _artifact_document(target: FuzzTarget, kind: str) -> str:
    assert target.tree is not None
    return next(
        p
        for p, _ in target.tree.metadata
        if p.count("/") == 4 and p.startswith(f"RNA/artifacts/{kind}/")
    )


FINDINGS = (
    Finding(
        name="store-metadata-crash",
        target="store",
        reason="a zarr.json below a store's root that is JSON but not valid Zarr metadata (chunk_grid replaced, zarr_format 4, node_type removed, a key renamed by a flipped bit) escapes as zarr's own exception (ValueError, TypeError, MetadataValidationError) from cytearc/storage/store.py open_root and _open and cytearc/assays/assay.py _count_array and summary; damaged JSON of table members is already a StoreFormatError",
        matches=lambda m, v: (
            v.outcome == "crash" and _path(m).endswith("zarr.json") and "artifacts/" not in _path(m)
        ),
        example=lambda t: EditAttribute(
            path="matrices/RNA/counts/zarr.json", keys=("chunk_grid",), value=[]
        ),
        fixed=True,
    ),
    Finding(
        name="table-member-json-crash",
        target="store",
        reason="a truncated zarr.json of a table column escaped as JSONDecodeError from cytearc/metadata/encoding.py read_column",
        matches=lambda m, v: False,
        example=lambda t: Truncate(path="cellData/donor/categories/zarr.json", size=200),
        fixed=True,
    ),
    Finding(
        name="artifact-array-metadata-crash",
        target="store",
        reason="a damaged zarr.json of an artifact's payload array (not JSON, not UTF-8, or not valid Zarr metadata) escapes as json's or zarr's own exception from cytearc/artifacts/store.py Artifact.array",
        matches=lambda m, v: (
            v.outcome == "crash" and _path(m).endswith("zarr.json") and "artifacts/" in _path(m)
        ),
        example=lambda t: FlipBit(
            path=_artifact_array_document(t, "normalized", "feature_sum"), offset=0, bit=0
        ),
        fixed=True,
    ),
    Finding(
        name="cube-metadata-crash",
        target="cube",
        reason="a damaged zarr.json of a cube's layers, layer arrays or n_cells escapes as json's or zarr's own exception from cytepool/cube/reader.py _open_layers and _read_n_cells",
        matches=lambda m, v: v.outcome == "crash" and _path(m).endswith("zarr.json"),
        example=lambda t: FlipBit(path="layers/counts/zarr.json", offset=28, bit=0),
        fixed=True,
    ),
    Finding(
        name="h5-structure-crash",
        target="sources",
        reason="an HDF5 source whose feature datasets differ in length (10x v3: cytearc/io/tenx.py _v3_features, pandas ValueError) or whose categorical column lost its codes or categories (H5AD: cytearc/io/h5ad.py _read_column KeyError, _categorical ValueError) crashes instead of a SourceFormatError",
        matches=lambda m, v: v.outcome == "crash" and isinstance(m, (H5Shorten, H5Delete)),
        example=lambda t: H5Shorten(path="matrix.h5", key="matrix/features/id"),
        fixed=True,
    ),
    Finding(
        name="features-field-count",
        target="sources",
        reason="a 10x features.tsv line with a field too few (no feature type) is imported as a feature of a second assay 'Assay', the RNA assay silently losing it; a first line with a field too many adds a column 'column_4' to every feature",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and isinstance(m, SetFieldCount)
            and m.path.endswith("features.tsv.gz")
        ),
        example=lambda t: SetFieldCount(path="mtx/features.tsv.gz", line=77, count=2, sep="\t"),
        fixed=True,
    ),
    Finding(
        name="table-chunk-deleted",
        target="store",
        reason="a deleted chunk of a cell or feature table column (sample, donor, I, categories) reads as the fill value; verify checks no table column but ids and names",
        matches=lambda m, v: (
            v.outcome == "silent-difference" and isinstance(m, Delete) and _under_table(m.path)
        ),
        example=lambda t: Delete(path="cellData/sample/codes/c/0"),
        fixed=True,
    ),
    Finding(
        name="table-columns-swapped",
        target="store",
        reason="two categorical cell columns of one dtype whose chunks are swapped read as each other's codes; no digest covers table columns",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and isinstance(m, SwapArrays)
            and _under_table(m.first)
            and _under_table(m.second)
        ),
        example=lambda t: SwapArrays(
            first="cellData/condition/codes", second="cellData/donor/codes"
        ),
        fixed=True,
    ),
    Finding(
        name="artifact-dropped",
        target="store",
        reason="an artifact whose group metadata is deleted or whose 'complete' attribute is removed silently disappears from list_artifacts, and DataStore.verify() reports OK",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and "artifacts" in _path(m)
            and v.detail.startswith(".: keys")
        ),
        example=lambda t: Delete(path=_artifact_document(t, "normalized")),
        fixed=True,
    ),
    Finding(
        name="summaries-group-metadata-crash",
        target="store",
        reason="a zarr.json of an assay's countSummaries group that is not JSON, not UTF-8 or not valid Zarr metadata (zarr_format 4, node_type removed) escapes as zarr's or json's own exception from cytearc/assays/assay.py _summaries",
        matches=lambda m, v: v.outcome == "crash" and _path(m).endswith("countSummaries/zarr.json"),
        example=lambda t: EditAttribute(
            path="matrices/RNA/countSummaries/zarr.json", keys=("zarr_format",), value=4
        ),
        fixed=True,
    ),
    Finding(
        name="column-attributes-crash",
        target="store",
        reason="a table column whose zarr.json attributes are a list instead of an object escapes as TypeError ('list indices must be integers') from cytearc/metadata/encoding.py read_column",
        matches=lambda m, v: (
            v.outcome == "crash"
            and isinstance(m, EditAttribute)
            and m.keys == ("attributes",)
            and _under_table(m.path)
        ),
        example=lambda t: EditAttribute(
            path="RNA/featureData/names/zarr.json", keys=("attributes",), value=[]
        ),
        fixed=True,
    ),
    Finding(
        name="artifact-kind-group-hidden",
        target="store",
        reason="an artifact kind group (RNA/artifacts/normalized) or artifacts group whose zarr.json says zarr_format 2 hides its artifacts: list_artifacts leaves them out and DataStore.verify() reports OK",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and "artifacts" in _path(m)
            and v.detail.startswith(".: keys")
        ),
        example=lambda t: EditAttribute(
            path="RNA/artifacts/normalized/zarr.json", keys=("zarr_format",), value=2
        ),
        fixed=True,
    ),
    Finding(
        name="table-column-list-edited",
        target="store",
        reason="a name removed from a table's cytearc:columns attribute hides that column (the array is still there) without an error",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and isinstance(m, EditAttribute)
            and m.keys[:2] == ("attributes", "cytearc:columns")
        ),
        example=lambda t: EditAttribute(
            path="RNA/featureData/zarr.json", keys=("attributes", "cytearc:columns", 2), remove=True
        ),
        fixed=True,
    ),
    Finding(
        name="artifact-provenance-edited",
        target="store",
        reason="an edited provenance of a published artifact (parameters, inputs; edited or a bit flipped) is read without complaint: no digest covers provenance, and reuse looks artifacts up by it",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and "artifacts" in _path(m)
            and "['provenance']" in v.detail
        ),
        example=lambda t: EditAttribute(
            path=_artifact_document(t, "normalized"),
            keys=("attributes", "provenance", "parameters", "targetSum"),
            value=20000.0,
        ),
        fixed=True,
    ),
    Finding(
        name="cube-provenance-edited",
        target="cube",
        reason="an edited provenance of a cube (its source, operations, or the cytepool format and version it records) is read without complaint: the fingerprint leaves provenance out and nothing else covers it",
        matches=lambda m, v: (
            v.outcome == "silent-difference"
            and _path(m) == "zarr.json"
            and v.detail.startswith(("['provenance']", "['source']"))
        ),
        example=lambda t: EditAttribute(
            path="zarr.json", keys=("attributes", "provenance", "source", "tool"), value="another"
        ),
        fixed=True,
    ),
)


OPEN = tuple(f for f in FINDINGS if not f.fixed)


def _known(target: str, mutation: Mutation, verdict: Verdict) -> Finding | None:
    return next((f for f in OPEN if f.target == target and f.matches(mutation, verdict)), None)


def _judge(target: FuzzTarget, mutation: Mutation) -> Verdict:
    with tempfile.TemporaryDirectory() as work:
        return target.judge(mutation, Path(work))


@pytest.mark.parametrize("name", FUZZ_TARGETS)
def test_every_mutation_fails_closed(targets: dict[str, FuzzTarget], name: str) -> None:
    """Each drawn mutation is refused by a named error, reads back identical, or warns; or is a listed finding."""
    target = targets[name]

    @settings(
        max_examples=EXAMPLES[name],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        mutation = target.draw(lambda n: data.draw(st.integers(0, n - 1)))
        note(repr(mutation))
        verdict = _judge(target, mutation)
        assert verdict.outcome in ACCEPTED or _known(name, mutation, verdict), (
            f"{mutation!r} does not fail closed: {verdict.outcome}: {verdict.detail}"
        )

    check()


@pytest.mark.parametrize(
    "finding",
    [
        pytest.param(
            f,
            id=f.name,
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=f.reason),
        )
        for f in OPEN
    ],
)
def test_finding_is_still_open(targets: dict[str, FuzzTarget], finding: Finding) -> None:
    """The reproduction of each listed finding fails closed (a strict xfail until it is fixed; then remove the entry)."""
    target = targets[finding.target]
    mutation = finding.example(target)
    verdict = _judge(target, mutation)
    if verdict.outcome not in ACCEPTED and _known(finding.target, mutation, verdict) is not finding:
        pytest.fail(f"{mutation!r} no longer shows {finding.name}, yet fails open: {verdict}")
    assert verdict.outcome in ACCEPTED, f"{mutation!r}: {verdict.outcome}: {verdict.detail}"


@pytest.mark.parametrize("finding", [f for f in FINDINGS if f.fixed], ids=lambda f: f.name)
def test_a_fixed_finding_stays_fixed(targets: dict[str, FuzzTarget], finding: Finding) -> None:
    """The reproduction of each fixed finding fails closed: refused by name, or identical."""
    mutation = finding.example(targets[finding.target])
    verdict = _judge(targets[finding.target], mutation)
    assert verdict.outcome in ACCEPTED, f"{mutation!r}: {verdict.outcome}: {verdict.detail}"


_ISOLATED = """
import resource, shutil, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from cytearc.faults import EditAttribute, classify, store_values
root = Path(sys.argv[2])
shutil.copytree(sys.argv[1], root)
codecs = [{"name": "vlen-utf8", "configuration": {}}]
EditAttribute(path="RNA/featureData/feature_types/zarr.json", keys=("codecs",), value=codecs).apply(root)
verdict = classify(lambda: store_values(root), {})
print(verdict.outcome, verdict.detail[:300])
"""


def test_a_codec_list_without_its_compressor_is_refused(
    targets: dict[str, FuzzTarget], tmp_path: Path
) -> None:
    """A string column whose codecs lost the compressor is a named error, not a 31.6 GiB allocation (child limited to 4 GiB)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _ISOLATED,
            str(targets["store"].pristine),
            str(tmp_path / "store.zarr"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("named-error"), done.stdout


# --- the oracle itself ----------------------------------------------------------------


def test_a_valid_but_different_source_is_a_silent_difference(
    targets: dict[str, FuzzTarget],
) -> None:
    """Another count in a CSV (a valid file of other values) is judged a silent difference: the oracle sees values."""
    target = targets["sources"]
    table = (target.pristine / "counts.csv").read_text(encoding="utf-8").splitlines()
    count = int(table[1].split(",")[1])
    verdict = _judge(
        target, SetField(path="counts.csv", line=1, field=1, text=str(count + 1), sep=",")
    )
    assert verdict.outcome == "silent-difference", verdict
    assert "counts" in verdict.detail or "datasetFingerprint" in verdict.detail


@pytest.mark.parametrize("name", ["store", "cube"])
def test_a_flipped_chunk_bit_is_refused_by_name(targets: dict[str, FuzzTarget], name: str) -> None:
    """A bit flipped in the first count chunk of the store or cube is a named error, not a crash or a difference."""
    target = targets[name]
    assert target.tree is not None
    prefix = "matrices/RNA/counts/c/" if name == "store" else "layers/counts/c/"
    path, size = next(f for f in target.tree.chunks if f[0].startswith(prefix))
    verdict = _judge(target, FlipBit(path=path, offset=size // 2, bit=3))
    assert verdict.outcome == "named-error", verdict


def test_gzip_header_bytes_that_carry_no_data_read_back_identical(
    targets: dict[str, FuzzTarget],
) -> None:
    """A flipped bit in a gzip member's time stamp changes no value: the import is identical."""
    target = targets["sources"]
    packed = (target.pristine / "counts.csv.gz").read_bytes()
    assert gzip.decompress(packed)
    verdict = _judge(target, FlipBit(path="counts.csv.gz", offset=5, bit=0))
    assert verdict.outcome == "identical", verdict


def test_a_removed_format_attribute_is_refused(targets: dict[str, FuzzTarget]) -> None:
    """Removing the store's format attribute from the root document is a named error."""
    target = targets["store"]
    root = json.loads((target.pristine / "zarr.json").read_text(encoding="utf-8"))
    assert "cytearc:format" in root["attributes"]
    mutation = EditAttribute(path="zarr.json", keys=("attributes", "cytearc:format"), remove=True)
    assert _judge(target, mutation).outcome == "named-error"
