"""The ``cytepool`` command line: inspect, verify, history, de and demo.

Exit codes: 0 success; 1 a cube failed verification (a value, digest, chunk,
metadata or provenance link differs) or a differential expression test could
not run (a design, coefficient or group that does not fit the cube); 2 usage
errors; 3 no cube at the path (and, for commands other than ``verify``, a
cube that cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from cytepool._versions import package_version
from cytepool.cube.provenance import describe_provenance, verify_chain
from cytepool.cube.reader import read_cube
from cytepool.cube.writer import write_cube
from cytepool.errors import CubeError, CubeNotFoundError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cytepool.cube.cube import Cube

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_MISMATCH: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNREADABLE: Final = 3


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


def _inspect(args: argparse.Namespace) -> int:
    cube = read_cube(args.path)
    info = _summary(cube, str(args.path))
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        _print_summary(info)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    try:
        cube = read_cube(args.path)
        fingerprint = cube.verify_fingerprint(progress=args.progress)
        chain = verify_chain(cube, [read_cube(p) for p in args.chain]) if args.chain else None
    except CubeNotFoundError as exc:
        _report(args, ok=False, error=exc)
        return EXIT_UNREADABLE
    except CubeError as exc:
        _report(args, ok=False, error=exc)
        return EXIT_MISMATCH
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
    else:
        print(f"MISMATCH {args.path}: {type(error).__name__}: {error}", file=sys.stderr)


def _history(args: argparse.Namespace) -> int:
    cube = read_cube(args.path)
    if args.json:
        print(json.dumps(cube.provenance, indent=2))
    else:
        print(describe_provenance(cube.provenance))
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from cytepool.cube.demo import demo_cube  # noqa: PLC0415

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    cube = demo_cube()
    path = write_cube(cube, out / "demo.cube.zarr", compression="zstd", overwrite=True)
    merged = read_cube(path).combine(axis="groups", mapping={"CD4 T": "T", "CD8 T": "T"})
    chain_path = write_cube(
        merged.select(samples=merged.samples["sample"].iloc[:4].tolist()),
        out / "demo-T.cube.zarr",
        overwrite=True,
    )
    print(f"wrote {path} and {chain_path}")
    return EXIT_OK


def _de(args: argparse.Namespace) -> int:
    from cytepool.de import LimmaResult, LimmaResults, limma_voom  # noqa: PLC0415
    from cytepool.errors import DesignError, GroupSkippedError, LimmaError  # noqa: PLC0415
    from cytepool.plots import save_de_figures  # noqa: PLC0415

    cube = read_cube(args.path)
    try:
        contrast = json.loads(args.contrast) if args.contrast else None
    except json.JSONDecodeError:
        contrast = args.contrast  # an R expression such as "groupB-groupC"
    if isinstance(contrast, list) and all(isinstance(c, str) for c in contrast):
        print(
            "error: --contrast takes one contrast; run cytepool de once per contrast",
            file=sys.stderr,
        )
        return EXIT_MISMATCH
    options: dict[str, Any] = {
        "design": args.design,
        "coef": args.coef,
        "contrast": contrast,
        "min_cells": args.min_cells,
        "min_counts": args.min_counts,
        "normalization": args.normalization,
        "filter_by_expr": not args.no_filter,
    }
    try:
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
                    skipped[labels[g]] = str(exc)
            results = LimmaResults(results=fitted, skipped=skipped)
        else:
            results = limma_voom(cube, **options)
    except LimmaError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_MISMATCH
    out = Path(args.output)
    results.save(out, file_format=args.format, overwrite=args.overwrite)
    figures = [str(p) for p in save_de_figures(results, out / "figures")] if args.plots else []
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
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "inspect", help="shape, tables, layers, fingerprint and provenance of a cube"
    )
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_inspect)
    p = sub.add_parser("verify", help="read every value and check it against the stored digests")
    p.add_argument("path")
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
    p = sub.add_parser("history", help="the provenance of a cube in plain words")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="print the provenance JSON")
    p.set_defaults(run=_history)
    p = sub.add_parser("de", help="limma-voom differential expression per group of a cube")
    p.add_argument("path")
    p.add_argument(
        "--design", required=True, help='a formula on the sample table, e.g. "~ donor + condition"'
    )
    p.add_argument("--coef", default=None, help="the design column to test (default: the last)")
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
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--plots", action="store_true", help="also write volcano, MA and voom plots")
    p.add_argument("--alpha", type=float, default=0.05, help="FDR for the summary counts")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_de)
    p = sub.add_parser("demo", help="write a demo cube and a cube derived from it")
    p.add_argument(
        "-o", "--output", default="demo", help="directory to write into (default: ./demo)"
    )
    p.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except CubeError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
