"""Provenance records: how a cube was made, in words, and checked link by link.

``Cube.provenance`` is a JSON object with three keys:

``cytepool``
    ``{"format": "cytepool.cube", "format_version": 1, "version": <package version>}``.
``source``
    The exporter's record, exactly as given to :class:`~cytepool.Cube` (or null).
``operations``
    A list of records ``{"operation", "parameters", "input", "output"}``, one per
    cube operation, oldest first; ``input`` and ``output`` are fingerprints.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cytepool.cube.encoding import DIGEST_PATTERN
from cytepool.cube.operations import replay
from cytepool.errors import ChainVerificationError, CubeFormatError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from cytepool.cube.cube import Cube

__all__ = ["describe_provenance", "parse_provenance", "verify_chain"]

_RECORD_KEYS = frozenset({"operation", "parameters", "input", "output"})


def parse_provenance(value: object, *, where: str) -> dict[str, Any]:
    """Parse a provenance object strictly; :class:`CubeFormatError` names what is wrong.

    Parameters
    ----------
    value
        The attribute's value.
    where
        The file, for the message.

    Returns
    -------
    dict
        The provenance, ``cytepool``, ``source`` and ``operations``.

    Raises
    ------
    CubeFormatError
        A key is missing, unknown or of the wrong type.
    """

    def fail(key: str, expected: str, found: object) -> CubeFormatError:
        return CubeFormatError(
            f"{where}: attribute 'provenance'{key}: expected {expected}, found {found!r}; "
            "the file was not written by write_cube or was edited - write it again"
        )

    if not isinstance(value, dict) or set(value) != {"cytepool", "source", "operations"}:
        found = sorted(value) if isinstance(value, dict) else value
        raise fail("", "an object with keys 'cytepool', 'source' and 'operations'", found)
    tool = value["cytepool"]
    if not isinstance(tool, dict) or not {"format", "format_version", "version"} <= set(tool):
        raise fail("['cytepool']", "an object with format, format_version and version", tool)
    if value["source"] is not None and not isinstance(value["source"], dict):
        raise fail("['source']", "a JSON object or null", value["source"])
    operations = value["operations"]
    if not isinstance(operations, list):
        raise fail("['operations']", "a list", operations)
    for i, record in enumerate(operations):
        key = f"['operations'][{i}]"
        if not isinstance(record, dict) or set(record) != _RECORD_KEYS:
            raise fail(key, f"an object with keys {sorted(_RECORD_KEYS)}", record)
        if not isinstance(record["operation"], str) or not isinstance(record["parameters"], dict):
            raise fail(key, "a string operation and an object of parameters", record)
        for end in ("input", "output"):
            if not isinstance(record[end], str) or not DIGEST_PATTERN.match(record[end]):
                raise fail(f"{key}['{end}']", "a fingerprint 'sha256:<64 hex>'", record[end])
    return value


def _short(fingerprint: str) -> str:
    return fingerprint[: len("sha256:") + 12] + "…"


def _describe_source(source: Mapping[str, Any] | None) -> str:
    if source is None:
        return "no source record"
    parts = []
    for key, value in source.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        parts.append(f"{key}={text if len(text) <= 60 else text[:57] + '...'}")
    return "source record: " + (", ".join(parts) if parts else "(empty)")


def _describe_axis(chosen: list[int] | None, axis: str) -> str:
    return (
        f"all {axis}" if chosen is None else f"{len(chosen)} {axis} (positions {_ranges(chosen)})"
    )


def _ranges(positions: list[int]) -> str:
    if len(positions) > 8:
        return ", ".join(map(str, positions[:8])) + ", ..."
    return ", ".join(map(str, positions))


def _describe_record(record: Mapping[str, Any]) -> str:
    name = record["operation"]
    p = record["parameters"]
    if name == "select" and set(p) == {"samples", "groups", "features"}:
        what = "; ".join(_describe_axis(p[a], a) for a in ("groups", "samples", "features"))
        text = f"select: kept {what}"
    elif name == "combine" and set(p) == {"axis", "mapping"}:
        merges = ", ".join(f"{old!r}→{new!r}" for old, new in p["mapping"][:6])
        more = ", ..." if len(p["mapping"]) > 6 else ""
        text = f"combine {p['axis']}: summed members relabelled {merges}{more}"
    else:
        text = f"{name} with parameters {json.dumps(p, sort_keys=True)}"
    return f"{text} ({_short(record['input'])} → {_short(record['output'])})"


def describe_provenance(record: Mapping[str, Any]) -> str:
    """Say a provenance object in plain words, one line per step.

    Parameters
    ----------
    record
        A cube's provenance (:attr:`Cube.provenance <cytepool.Cube.provenance>`).

    Returns
    -------
    str
        The lines.

    Examples
    --------
    >>> print(describe_provenance({
    ...     "cytepool": {"format": "cytepool.cube", "format_version": 1, "version": "0.1.0"},
    ...     "source": {"tool": "cytearc", "assay": "RNA"},
    ...     "operations": [],
    ... }))
    Made with CytePool 0.1.0 (cytepool.cube format 1) from a source record: tool=cytearc, assay=RNA
    No operations since.
    """
    tool = record["cytepool"]
    source = _describe_source(record["source"])
    lines = [
        f"Made with CytePool {tool['version']} ({tool['format']} format "
        f"{tool['format_version']}) from a {source}"
        if record["source"] is not None
        else f"Made with CytePool {tool['version']} ({tool['format']} format "
        f"{tool['format_version']}) with {source}"
    ]
    operations = record["operations"]
    if not operations:
        lines.append("No operations since.")
    lines.extend(f"{i}. {_describe_record(op)}" for i, op in enumerate(operations, start=1))
    return "\n".join(lines)


def verify_chain(cube: Cube, candidates: Iterable[Cube]) -> list[str]:
    """Replay the operations of ``cube``'s provenance and check every link.

    For each record, the candidate (or the replayed result) whose fingerprint is
    the record's ``input`` is taken, the operation replayed on it, and the
    result's fingerprint compared with the record's ``output``, with the next
    record's ``input`` and, for the last record, with ``cube.fingerprint``.

    Parameters
    ----------
    cube
        The cube whose chain is checked.
    candidates
        Cubes that may be inputs of the chain (at least its first input).

    Returns
    -------
    list of str
        The fingerprints along the chain, first input to ``cube``'s own.

    Raises
    ------
    ChainVerificationError
        Naming the record that no candidate matches or whose replay differs.
    """
    operations = cube.provenance["operations"]
    pool = {c.fingerprint: c for c in candidates}
    chain: list[str] = []
    for i, record in enumerate(operations):
        start = pool.get(record["input"])
        if start is None:
            msg = (
                f"operations[{i}] ({record['operation']}): no candidate cube has the input "
                f"fingerprint {record['input']}; pass the cube it was made from"
            )
            raise ChainVerificationError(msg)
        result = replay(start, record)
        got = result.fingerprint
        expected_next = operations[i + 1]["input"] if i + 1 < len(operations) else cube.fingerprint
        for what, want in (
            ("its recorded output", record["output"]),
            ("the next input", expected_next),
        ):
            if got != want:
                msg = (
                    f"operations[{i}] ({record['operation']}): replayed on {record['input']} it "
                    f"gives {got}, not {what} {want}; the record or a cube was changed"
                )
                raise ChainVerificationError(msg)
        chain.append(record["input"])
        pool[got] = result
    chain.append(cube.fingerprint)
    return chain
