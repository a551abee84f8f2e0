"""Fault injection: mutations of stores, cubes and source files, the verdict on reading them, kill points.

The fuzzing and kill-point harnesses of the tests (``tests/harness``) and of
the benchmarks (``benchmarks/fuzz.py``, ``benchmarks/kill_points.py``) share
this module, and exporters may use it to test their own files.

A *mutation* is a frozen dataclass that changes one thing below a root
folder, ``mutation.apply(root)``; its ``repr`` names it completely, so a
reported mutation can be applied again to a fresh copy. Mutations are drawn
from a scan of a pristine tree (:func:`scan_tree`, :func:`scan_sources`) by
:func:`draw_tree_mutation` and :func:`draw_source_mutation` with a
:data:`Choose` function, which hypothesis or a seeded generator provides.

Only mutations that make a file invalid are drawn. A text file's digits carry
no checksum, so a changed count in a Matrix Market or CSV file is another
valid dataset, not a fault any reader could see: bytes are flipped only where
the format checks them (gzip, Zarr chunks and metadata, HDF5), values are
set only to values no valid file holds there, and text is truncated only
inside gzip.

Reading a mutated thing is judged by :func:`classify`: a *named error* (an
exception of :mod:`cytearc.errors` or :mod:`cytepool.errors`, or damage
reported by :meth:`cytearc.DataStore.verify`), values *identical* to the
original's, values that differ after a warning naming the file (*warned*:
the importers store negative and non-integer counts as given, and say so),
a *silent difference*, or a *crash* (any other exception: a traceback a user
would see). Failing closed means one of the first three.

A kill point runs a writer (:data:`KILL_WRITERS`) in a child of a
:class:`ForkServer` and SIGKILLs it after a delay; :func:`judge_kill` then
says whether the destination is refused, complete, untouched, partial (an
in-place writer's published artifacts) or a readable half-write.

Examples
--------
>>> import pathlib, tempfile
>>> from cytearc.faults import FlipBit, classify
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "chunk").write_bytes(bytes([0, 1]))
>>> FlipBit(path="chunk", offset=1, bit=1).apply(root)
>>> list((root / "chunk").read_bytes())
[0, 3]
>>> classify(lambda: {"x": 1}, {"x": 1})
Verdict(outcome='identical', detail='')
"""

from typing import TypeAlias

from cytearc._faults.kills import (
    KILL_WRITERS,
    TOOL_WRITERS,
    ForkServer,
    KillCase,
    KillRun,
    KillVerdict,
    judge_kill,
    kill_case,
    write_kill_inputs,
)
from cytearc._faults.sources import (
    DropColumn,
    DropLine,
    H5Delete,
    H5SetValue,
    H5Shorten,
    RepeatLine,
    SetField,
    SetFieldCount,
    SourceFile,
    SourceMutation,
    draw_source_mutation,
    scan_sources,
    write_sources,
)
from cytearc._faults.targets import FUZZ_TARGETS, FuzzTarget, fuzz_targets
from cytearc._faults.trees import (
    Choose,
    Delete,
    EditAttribute,
    FlipBit,
    SwapArrays,
    Tree,
    TreeMutation,
    Truncate,
    draw_tree_mutation,
    scan_tree,
)
from cytearc._faults.verdict import (
    MAX_VALUES,
    NAMED_ERRORS,
    Detected,
    Outcome,
    Oversized,
    Verdict,
    classify,
    cube_values,
    difference,
    store_values,
)

__all__ = [
    "FUZZ_TARGETS",
    "KILL_WRITERS",
    "MAX_VALUES",
    "NAMED_ERRORS",
    "TOOL_WRITERS",
    "Choose",
    "Delete",
    "Detected",
    "DropColumn",
    "DropLine",
    "EditAttribute",
    "FlipBit",
    "ForkServer",
    "FuzzTarget",
    "H5Delete",
    "H5SetValue",
    "H5Shorten",
    "KillCase",
    "KillRun",
    "KillVerdict",
    "Mutation",
    "Outcome",
    "Oversized",
    "RepeatLine",
    "SetField",
    "SetFieldCount",
    "SourceFile",
    "SourceMutation",
    "SwapArrays",
    "Tree",
    "TreeMutation",
    "Truncate",
    "Verdict",
    "classify",
    "cube_values",
    "difference",
    "draw_source_mutation",
    "draw_tree_mutation",
    "fuzz_targets",
    "judge_kill",
    "kill_case",
    "scan_sources",
    "scan_tree",
    "store_values",
    "write_kill_inputs",
    "write_sources",
]

Mutation: TypeAlias = TreeMutation | SourceMutation
"""Every mutation: of a store or cube (:data:`TreeMutation`) or of a source file (:data:`SourceMutation`)."""
