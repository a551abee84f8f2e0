"""The ``cytepool`` command line: inspect, verify, history, de and demo.

Exit codes, the same for every command:

- 0: success (for ``de``: at least one group was fitted; the skipped ones are
  reported);
- 1: a cube was found but cannot be read or fails verification (a value,
  digest, chunk, metadata or provenance link differs), a differential
  expression test cannot run (a design, coefficient, contrast or group that
  does not fit the cube, or no group left to fit), or another error of the
  input (a bad option value, an output that exists): one line
  ``error: <ErrorName>: <message>`` on stderr;
- 2: usage errors (argparse);
- 3: no cube at a path given (nothing there, or not a cube: a file, an empty
  directory, a Zarr store of another kind, an object-store prefix whose write
  is in progress or was interrupted).

A cube path may be a local path or an fsspec URL (``s3://bucket/x.cube.zarr``,
``gs://...``, ``https://...`` to read); ``--storage-options`` gives the URL's
filesystem options as a JSON object (``'{"anon": true}'``,
``'{"endpoint_url": "http://127.0.0.1:9000"}'``), and is ignored for local
paths.

``inspect``, ``history`` and ``verify`` open the cube the same way, so they
share codes 0, 1 and 3; ``verify`` reads every value as well. A traceback is
printed only with ``--debug`` (before or after the command), which lets the
error propagate.

``--cluster ADDRESS`` (a scheduler address or scheduler file; by default the
environment variable ``CYTEARC_CLUSTER``) runs the commands that compute
(``verify``, ``de``, ``demo``) on that Dask cluster; the others read only metadata and
do not connect. A cluster that cannot be reached is exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from cytepool._versions import package_version
from cytepool.compute import CLUSTER_VARIABLE, connect
from cytepool.cube.provenance import describe_provenance, verify_chain
from cytepool.cube.reader import read_cube
from cytepool.cube.writer import write_cube
from cytepool.errors import ContrastFormatError, CubeError, CubeNotFoundError, CubeValueError
from cytepool.locations import is_url

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from cytepool.cube.cube import Cube
    from cytepool.de.design import ContrastLike

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_NO_CUBE: Final = 3

_COMPUTING: Final = frozenset({"verify", "de", "demo"})
_PATH_HELP: Final = "the cube: a local path or a URL (s3://, gs://, https:// ...)"
_CONTRAST_EXAMPLES: Final = (
    "expected JSON weights of design columns such as "
    """'{"conditionstim": 1, "conditionctrl": -1}' or '[0, 1, -1]', or an R expression """
    "such as 'conditionstim-conditionctrl'"
)


def _exit_code(error: BaseException) -> int:
    return EXIT_NO_CUBE if isinstance(error, CubeNotFoundError) else EXIT_FAILURE


def _summary(cube: Cube, path: str) -> dict[str, Any]:
    n_groups, n_samples, n_features = cube.shape
    return {
        "path": path,
        "shape": {"groups": n_groups, "samples": n_samples, "features": n_features},
        "bulk": cube.is_bulk,
        "tables": {
            axis: [{"name": c.name, "kind": c.kind} for c in cube.encoded_table(axis)]
            for axis in ("samples", "groups", "features")
        },
        "layers": {name: str(layer.dtype) for name, layer in sorted(cube.layers.items())},
        "normalization": cube.normalization,
        "fingerprint": cube.fingerprint,
        "provenance": cube.provenance,
        "history": cube.history(),
    }


def _print_summary(info: dict[str, Any]) -> None:
    shape = info["shape"]
    print(f"cube {info['path']}")
    kind = "bulk (no cell numbers)" if info["bulk"] else "with cell numbers"
    print(
        f"  shape: {shape['groups']} groups x {shape['samples']} samples x {shape['features']} features, {kind}"
    )
    for axis, columns in info["tables"].items():
        cols = ", ".join(f"{c['name']} ({c['kind']})" for c in columns)
        print(f"  {axis}: {cols}")
    print("  layers: " + ", ".join(f"{n} ({d})" for n, d in info["layers"].items()))
    if info["normalization"] is not None:
        print(f"  normalization: {json.dumps(info['normalization'], sort_keys=True)}")
    print(f"  fingerprint: {info['fingerprint']}")
    print("  provenance:")
    for line in info["history"].splitlines():
        print(f"    {line}")


def _storage_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The value of ``--storage-options``: a JSON object of fsspec filesystem options, or None."""
    text: str | None = args.storage_options
    if text is None:
        return None
    expected = """expected a JSON object of fsspec filesystem options such as '{"anon": true}'"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        msg = f"--storage-options: {expected}, found invalid JSON at line {error.lineno}, column {error.colno} ({error.msg})"
        raise CubeValueError(msg) from error
    if not isinstance(value, dict):
        msg = f"--storage-options: {expected}, found a JSON {type(value).__name__}"
        raise CubeValueError(msg)
    return value


def _inspect(args: argparse.Namespace) -> int:
    cube = read_cube(args.path, storage_options=_storage_options(args))
    info = _summary(cube, str(args.path))
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        _print_summary(info)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    try:
        options = _storage_options(args)
        cube = read_cube(args.path, storage_options=options)
        fingerprint = cube.verify_fingerprint(progress=args.progress)
        inputs = [read_cube(p, storage_options=options) for p in args.chain]
        chain = verify_chain(cube, inputs) if args.chain else None
    except CubeError as exc:
        _report(args, ok=False, error=exc)
        if args.debug:
            raise
        return _exit_code(exc)
    _report(args, ok=True, fingerprint=fingerprint, chain=chain)
    return EXIT_OK


def _report(args: argparse.Namespace, *, ok: bool, **fields: Any) -> None:
    error = fields.pop("error", None)
    if args.json:
        doc: dict[str, Any] = {"path": str(args.path), "ok": ok, **fields}
        if error is not None:
            doc["error"] = {"type": type(error).__name__, "message": str(error)}
        print(json.dumps(doc, indent=2))
    elif ok:
        print(f"OK {args.path}: every digest matches, fingerprint {fields['fingerprint']}")
        if fields.get("chain"):
            print(
                f"   provenance chain of {len(fields['chain']) - 1} operations replayed and matched"
            )
    elif isinstance(error, CubeNotFoundError):
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
    else:
        print(f"MISMATCH {args.path}: {type(error).__name__}: {error}", file=sys.stderr)


def _history(args: argparse.Namespace) -> int:
    cube = read_cube(args.path, storage_options=_storage_options(args))
    if args.json:
        print(json.dumps(cube.provenance, indent=2))
    else:
        print(describe_provenance(cube.provenance))
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from cytepool.cube.demo import demo_cube  # noqa: PLC0415

    options = _storage_options(args)
    if is_url(args.output):
        folder = args.output.rstrip("/")
    else:
        Path(args.output).mkdir(parents=True, exist_ok=True)
        folder = str(Path(args.output))
    cube = demo_cube()
    path = write_cube(
        cube,
        f"{folder}/demo.cube.zarr",
        compression="zstd",
        overwrite=True,
        storage_options=options,
    )
    merged = read_cube(path, storage_options=options).combine(
        axis="groups", mapping={"CD4 T": "T", "CD8 T": "T"}
    )
    chain_path = write_cube(
        merged.select(samples=merged.samples["sample"].iloc[:4].tolist()),
        f"{folder}/demo-T.cube.zarr",
        overwrite=True,
        storage_options=options,
    )
    print(f"wrote {path} and {chain_path}")
    return EXIT_OK


def _contrast_option(text: str | None) -> ContrastLike | None:
    """The value of ``--contrast``: JSON weights when it starts with ``{`` or ``[``, else an R expression."""
    if text is None or not text.lstrip().startswith(("{", "[")):
        return text

    def refuse(found: str) -> ContrastFormatError:
        return ContrastFormatError(f"--contrast {text!r}: {_CONTRAST_EXAMPLES}; found {found}")

    def number(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        found = f"invalid JSON at line {error.lineno}, column {error.colno} ({error.msg})"
        raise refuse(found) from error
    if not value:
        raise refuse(f"no weights ({text.strip()})")
    if isinstance(value, dict):
        for column, weight in value.items():
            if not number(weight):
                raise refuse(f"the weight of {column!r} is {json.dumps(weight)}, not a number")
        return {str(k): float(v) for k, v in value.items()}
    if all(isinstance(v, str) for v in value):
        raise refuse(f"a list of {len(value)} expressions; cytepool de tests one contrast per run")
    for position, weight in enumerate(value):
        if not number(weight):
            raise refuse(f"item {position} is {json.dumps(weight)}, not a number")
    return [float(v) for v in value]


def _de(args: argparse.Namespace) -> int:
    from cytepool.de import LimmaResult, LimmaResults, limma_voom  # noqa: PLC0415
    from cytepool.de.persist import staged_results, write_result_files  # noqa: PLC0415
    from cytepool.de.pseudobulk import validate_some_fitted  # noqa: PLC0415
    from cytepool.errors import DesignError, GroupSkippedError  # noqa: PLC0415
    from cytepool.plots import save_de_figures  # noqa: PLC0415

    contrast = _contrast_option(args.contrast)
    cube = read_cube(args.path, storage_options=_storage_options(args))
    options: dict[str, Any] = {
        "design": args.design,
        "coef": args.coef,
        "contrast": contrast,
        "min_cells": args.min_cells,
        "min_counts": args.min_counts,
        "normalization": args.normalization,
        "filter_by_expr": not args.no_filter,
    }
    if args.group:
        labels = {str(g): g for g in cube.groups.iloc[:, 0]}
        unknown = [g for g in args.group if g not in labels]
        if unknown:
            msg = f"{args.path}: --group: no group {unknown}; the cube's groups are {sorted(labels)} - pass one of them"
            raise DesignError(msg)
        fitted: dict[Any, LimmaResult] = {}
        skipped: dict[Any, str] = {}
        for g in args.group:
            try:
                fitted[labels[g]] = limma_voom(cube, group=labels[g], **options)
            except GroupSkippedError as exc:
                skipped[labels[g]] = exc.reason
        results = LimmaResults(results=fitted, skipped=skipped)
        validate_some_fitted(results, design=args.design)
        first = next(iter(fitted.values())).settings
        settings = {key: value for key, value in first.items() if key != "group"}
        results = LimmaResults(results=fitted, skipped=skipped, settings=settings)
    else:
        results = limma_voom(cube, **options)
    out = Path(args.output)
    with staged_results(out, overwrite=args.overwrite) as staging:
        write_result_files(results, staging, file_format=args.format)
        drawn = save_de_figures(results, staging / "figures") if args.plots else []
    figures = [str(out / p.relative_to(staging)) for p in drawn]
    summary = {
        "cube": args.path,
        "fingerprint": cube.fingerprint,
        "output": str(out),
        "groups": {
            str(group): {
                "samples": int(result.design.shape[0]),
                "genes": len(result.table),
                "significant": int((result.table["adj.P.Val"] < args.alpha).sum()),
            }
            for group, result in results.items()
        },
        "skipped": {str(k): v for k, v in results.skipped.items()},
        "figures": figures,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_OK
    print(f"limma-voom on {args.path} ({cube.fingerprint}): results in {out}")
    for group, info in summary["groups"].items():
        print(
            f"  {group}: {info['samples']} samples, {info['genes']} genes, "
            f"{info['significant']} with adj.P.Val < {args.alpha}"
        )
    for group, reason in summary["skipped"].items():
        print(f"  {group}: skipped ({reason})")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cytepool", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version", action="version", version=f"cytepool {package_version('cytepool')}"
    )
    debug_help = "let errors propagate with their traceback instead of one line"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    common.add_argument(
        "--storage-options",
        default=None,
        metavar="JSON",
        help="""fsspec filesystem options of the cube URLs, a JSON object such as '{"anon": true}'""",
    )
    common.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help=f"a Dask scheduler address or scheduler file to compute on, or 'threads' (default: ${CLUSTER_VARIABLE}, else this process's threads)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    p = command("inspect", help="shape, tables, layers, fingerprint and provenance of a cube")
    p.add_argument("path", help=_PATH_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_inspect)
    p = command("verify", help="read every value and check it against the stored digests")
    p.add_argument("path", help=_PATH_HELP)
    p.add_argument(
        "--chain",
        nargs="*",
        default=[],
        metavar="CUBE",
        help="also replay the provenance chain from these input cubes",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.set_defaults(run=_verify)
    p = command("history", help="the provenance of a cube in plain words")
    p.add_argument("path", help=_PATH_HELP)
    p.add_argument("--json", action="store_true", help="print the provenance JSON")
    p.set_defaults(run=_history)
    p = command("de", help="limma-voom differential expression per group of a cube")
    p.add_argument("path", help=_PATH_HELP)
    p.add_argument(
        "--design", required=True, help='a formula on the sample table, e.g. "~ donor + condition"'
    )
    p.add_argument(
        "--coef",
        default=None,
        help="the design column to test (default: the last; (Intercept) only when named)",
    )
    p.add_argument(
        "--contrast",
        default=None,
        help="a contrast: an R expression such as 'groupB-groupC' or JSON weights '{\"conditionstim\": 1}'",
    )
    p.add_argument("--group", action="append", default=[], help="test only this group (repeatable)")
    p.add_argument("--min-cells", type=float, default=10, help="drop samples with fewer cells")
    p.add_argument("--min-counts", type=float, default=1000, help="drop samples with fewer counts")
    p.add_argument("--normalization", choices=["TMM", "none"], default="TMM")
    p.add_argument("--no-filter", action="store_true", help="skip filterByExpr")
    p.add_argument("-o", "--output", required=True, help="directory for the result tables")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the whole output directory of an earlier cytepool de run",
    )
    p.add_argument("--plots", action="store_true", help="also write volcano, MA and voom plots")
    p.add_argument("--alpha", type=float, default=0.05, help="FDR for the summary counts")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_de)
    p = command("demo", help="write a demo cube and a cube derived from it")
    p.add_argument(
        "-o",
        "--output",
        default="demo",
        help="directory (or object-store URL prefix) to write into (default: ./demo)",
    )
    p.set_defaults(run=_demo)
    return parser


@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[None]:
    """For a command that computes, the cluster of ``--cluster`` (or the environment) as Dask's current one."""
    address = args.cluster or os.environ.get(CLUSTER_VARIABLE)
    if args.command not in _COMPUTING or not address or address == "threads":
        yield
        return
    with connect(address) as client, client.as_current():
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    Parameters
    ----------
    argv
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit code (see the module docstring).

    Raises
    ------
    SystemExit
        For usage errors, ``--help`` and ``--version`` (argparse).
    ValueError, OSError, KeyError
        Only with ``--debug``: the error that stopped the command.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        with _cluster(args):
            code: int = args.run(args)
    except (ValueError, OSError, KeyError) as exc:
        if args.debug:
            raise
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return _exit_code(exc)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
