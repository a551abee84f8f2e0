"""Results of limma-voom: :class:`LimmaResult` for one fit, :class:`LimmaResults` for cube groups."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import pandas as pd

from cytepool._html import Html, code, frame, items, json_code, view
from cytepool._html import table as html_table
from cytepool.errors import ResultFormatError, ResultMismatchError

if TYPE_CHECKING:
    from os import PathLike

    from cytepool._html import Row
    from cytepool.cube.cube import Cube

__all__ = ["CubeSource", "EBayesPrior", "LimmaResult", "LimmaResults", "VoomTrend"]

_FDR: Final = 0.05
"""The adjusted p-value below which the repr and views of results count a gene as significant."""


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


@dataclass(frozen=True, kw_only=True)
class EBayesPrior:
    """The empirical Bayes hyperparameters (limma's ``df.prior``, ``s2.prior``, ``var.prior``).

    Attributes
    ----------
    df_prior
        d0, the prior degrees of freedom; may be infinite.
    s2_prior
        s0², the prior variance.
    var_prior
        v0, the prior variance of the tested coefficient or contrast (for B).
    """

    df_prior: float
    s2_prior: float
    var_prior: float

    def to_json(self) -> dict[str, float | str]:
        """The JSON object of the three values.

        Returns
        -------
        dict
            ``df_prior``, ``s2_prior``, ``var_prior``; non-finite values as the
            strings ``"inf"`` or ``"nan"``.
        """
        return {
            "df_prior": _json_float(self.df_prior),
            "s2_prior": _json_float(self.s2_prior),
            "var_prior": _json_float(self.var_prior),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> EBayesPrior:
        """Parse :meth:`to_json`'s output.

        Parameters
        ----------
        value
            The JSON object.

        Returns
        -------
        EBayesPrior

        Raises
        ------
        ResultFormatError
            When a value is missing or not a number.
        """
        try:
            return cls(**{k: float(value[k]) for k in ("df_prior", "s2_prior", "var_prior")})
        except (KeyError, TypeError, ValueError) as error:
            msg = (
                "prior: expected numbers df_prior, s2_prior and var_prior, found "
                f"{value!r}; the result file was edited or damaged"
            )
            raise ResultFormatError(msg) from error


@dataclass(frozen=True, kw_only=True, eq=False)
class VoomTrend:
    """voom's mean-variance trend, to plot.

    Attributes
    ----------
    points
        Per gene with a non-zero count: ``sx`` (average log2 count) and ``sy``
        (square root of the residual standard deviation), indexed by gene.
    line
        The lowess fit through them: columns ``x`` and ``y``, sorted by ``x``.
    """

    points: pd.DataFrame
    line: pd.DataFrame


@dataclass(frozen=True, kw_only=True)
class CubeSource:
    """Which cube and group a result was computed from.

    Attributes
    ----------
    fingerprint, digests, provenance
        The cube's, as :class:`cytepool.Cube` gives them.
    group
        The group label (first column of the cube's group table).
    samples_used
        The sample labels that entered the fit, in cube order.
    samples_dropped
        Sample label to the reason it was left out (too few cells or counts).
    """

    fingerprint: str
    digests: dict[str, Any]
    provenance: dict[str, Any]
    group: Hashable
    samples_used: tuple[Hashable, ...]
    samples_dropped: dict[Hashable, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of every field.

        Returns
        -------
        dict
            The fields; ``samples_dropped`` as a list of ``{"sample", "reason"}``.
        """
        return {
            "fingerprint": self.fingerprint,
            "digests": self.digests,
            "provenance": self.provenance,
            "group": self.group,
            "samples_used": list(self.samples_used),
            "samples_dropped": [
                {"sample": sample, "reason": reason}
                for sample, reason in self.samples_dropped.items()
            ],
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> CubeSource:
        """Parse :meth:`to_json`'s output.

        Parameters
        ----------
        value
            The JSON object.

        Returns
        -------
        CubeSource

        Raises
        ------
        ResultFormatError
            When a field is missing or malformed.
        """
        try:
            return cls(
                fingerprint=value["fingerprint"],
                digests=value["digests"],
                provenance=value["provenance"],
                group=value["group"],
                samples_used=tuple(value["samples_used"]),
                samples_dropped={d["sample"]: d["reason"] for d in value["samples_dropped"]},
            )
        except (KeyError, TypeError) as error:
            msg = (
                f"cube: expected fingerprint, digests, provenance, group, samples_used and "
                f"samples_dropped, found keys {sorted(value)}; the result file was edited or damaged"
            )
            raise ResultFormatError(msg) from error


def _digest_differences(
    recorded: Mapping[str, Any], current: Mapping[str, Any], cube: Cube
) -> list[str]:
    labels = cube.groups.iloc[:, 0].tolist()
    found = []
    for key in ("samples", "groups", "features", "n_cells", "normalization"):
        if recorded.get(key) != current.get(key):
            found.append(f"the {key} table" if key in {"samples", "groups", "features"} else key)
    rec_layers, cur_layers = recorded.get("layers", {}), current.get("layers", {})
    for name in sorted(set(rec_layers) | set(cur_layers)):
        if name not in cur_layers or name not in rec_layers:
            found.append(f"layer {name!r} ({'missing' if name not in cur_layers else 'added'})")
            continue
        rec, cur = rec_layers[name]["groups"], cur_layers[name]["groups"]
        if len(rec) != len(cur):
            found.append(f"layer {name!r} (number of groups)")
            continue
        changed = [labels[g] for g, (a, b) in enumerate(zip(rec, cur, strict=True)) if a != b]
        if changed:
            found.append(
                f"layer {name!r} of group{'s' if len(changed) > 1 else ''} {', '.join(map(repr, changed))}"
            )
    return found or ["the cube's shape"]


def _n_significant(table: pd.DataFrame) -> int:
    """The genes of a top table at an adjusted p-value below ``_FDR``."""
    return int((table["adj.P.Val"] < _FDR).sum())


def _settings_rows(settings: Mapping[str, Any]) -> list[Row]:
    """The test and the design of a result's settings, as rows of its view."""
    test = {k: v for k, v in settings.get("test", {}).items() if v is not None}
    name = test.pop("name", None)
    design = settings.get("design")
    columns = settings.get("design_columns")
    return [
        ("test", None if name is None else Html(f"{code(name)} {json_code(test)}")),
        (
            "design",
            None if design is None else Html(f"{code(design)}, columns {items(columns or [])}"),
        ),
        ("normalization", settings.get("normalization")),
    ]


def _top(table: pd.DataFrame, n: int = 5) -> Html:
    """The ``n`` genes of smallest p-value of a top table."""
    return frame(table.sort_values("P.Value").head(n), float_format="{:.3g}".format)


@dataclass(frozen=True, kw_only=True, eq=False)
class LimmaResult:
    """One limma-voom fit: the top table, voom's output and what it was computed from.

    :func:`~cytepool.de.limma_voom_result` returns one for matrices (its
    ``table`` is what :func:`~cytepool.de.run_limma_voom` returns), and
    :func:`~cytepool.de.limma_voom` for a cube group.

    Attributes
    ----------
    table
        Indexed by gene in input order (filtered genes left out), columns
        ``logFC``, ``AveExpr``, ``t``, ``P.Value``, ``adj.P.Val``, ``B``.
    settings
        JSON object of what was asked (design, tested coefficient or contrast,
        normalization, filtering, ...).
    design
        The design matrix, samples x coefficients.
    lib_size, norm_factors
        Per sample: library sizes recomputed from the kept genes, and TMM
        factors (1 without TMM); voom used their product.
    prior
        The empirical Bayes hyperparameters.
    kept
        Per input gene, whether filterByExpr kept it.
    cube
        The cube, group and samples of the fit; None for plain matrices.
    weights, E
        voom's precision weights and log2-CPM, genes x samples.
    voom_trend
        The mean-variance trend (points and lowess line).
    fit
        Per gene: ``sigma``, ``df.residual``, ``s2.post``, ``df.total``,
        ``stdev.unscaled`` (of the tested coefficient) and ``Amean``.

    ``weights``, ``E``, ``voom_trend`` and ``fit`` are not saved by
    :meth:`to_csv` or :meth:`to_parquet` and are None in a result read back.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from cytepool.cube.demo import demo_cube
    >>> from cytepool.de import limma_voom
    >>> cube = demo_cube(n_features=200)
    >>> result = limma_voom(cube, group="NK", design="~ donor + condition", min_counts=100)
    >>> result.verify(cube)  # silent: computed from this cube
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "nk.csv"
    ...     result.to_csv(path)  # and nk.csv.json beside it
    ...     back = LimmaResult.read(path)
    >>> back.table.equals(result.table), back.cube == result.cube
    (True, True)
    """

    table: pd.DataFrame
    settings: dict[str, Any]
    design: pd.DataFrame
    lib_size: pd.Series
    norm_factors: pd.Series
    prior: EBayesPrior
    kept: pd.Series
    cube: CubeSource | None = None
    weights: pd.DataFrame | None = None
    E: pd.DataFrame | None = None
    voom_trend: VoomTrend | None = None
    fit: pd.DataFrame | None = None

    def __repr__(self) -> str:
        where = "matrices" if self.cube is None else f"cube group {self.cube.group!r}"
        n_sig = _n_significant(self.table)
        return (
            f"<LimmaResult: {self.settings.get('test', {}).get('name')!r} on {where}; "
            f"{len(self.table)} genes, {n_sig} at adj.P.Val < 0.05>"
        )

    def _repr_html_(self) -> str:
        """The result in a notebook: test, design, cube, samples, genes tested and significant, top genes."""
        table = self.table
        n_sig = _n_significant(table)
        up = int(((table["adj.P.Val"] < _FDR) & (table["logFC"] > 0)).sum())
        source = self.cube
        dropped = None
        if source is not None and source.samples_dropped:
            dropped = html_table(list(source.samples_dropped.items()), header=("sample", "reason"))
        rows: list[Row] = [
            ("fitted on", "matrices" if source is None else f"cube group {source.group!r}"),
            *_settings_rows(self.settings),
            ("cube fingerprint", None if source is None else code(source.fingerprint)),
            (
                "samples",
                f"{len(self.design):,}"
                if source is None
                else Html(f"{len(source.samples_used)}: {items(source.samples_used)}"),
            ),
            ("samples dropped", dropped),
            ("genes tested", f"{len(table):,} of {len(self.kept):,} (the others filtered out)"),
            ("significant", f"{n_sig:,} at adj.P.Val < {_FDR} ({up:,} up, {n_sig - up:,} down)"),
            ("prior", f"df.prior {self.prior.df_prior:.3g}, s2.prior {self.prior.s2_prior:.3g}"),
            ("top genes", _top(table)),
        ]
        return view(f"LimmaResult: {self.settings.get('test', {}).get('name')}", rows)

    def verify(self, cube: Cube) -> None:
        """Check that this result was computed from ``cube``.

        Parameters
        ----------
        cube
            The cube the result should have been computed from.

        Raises
        ------
        ResultMismatchError
            When the cube's fingerprint is not the recorded one; the message
            names the tables, layers and groups whose digests differ.
        """
        if self.cube is None:
            msg = "this result was computed from matrices, not from a cube; there is no cube to verify against"
            raise ResultMismatchError(msg)
        current = cube.fingerprint
        if current == self.cube.fingerprint:
            return
        differences = _digest_differences(self.cube.digests, cube.digests, cube)
        msg = (
            f"result of group {self.cube.group!r} was computed from cube {self.cube.fingerprint}, "
            f"not from this cube {current}: they differ in {'; '.join(differences)}. "
            "Recompute the result with limma_voom on this cube."
        )
        raise ResultMismatchError(msg)

    def to_csv(self, path: str | PathLike[str]) -> None:
        """Write the table to CSV and the metadata to the JSON sidecar ``path + ".json"``.

        Parameters
        ----------
        path
            The CSV file; replaced if it exists, as is its sidecar.

        Raises
        ------
        ResultFormatError
            When a gene or sample label is neither a string nor an integer.
        """
        from cytepool.de.persist import write_csv  # noqa: PLC0415 (persist imports this module)

        write_csv(self, path)

    def to_parquet(self, path: str | PathLike[str]) -> None:
        """Write the table to Parquet with the metadata in the schema (needs pyarrow).

        Parameters
        ----------
        path
            The Parquet file; replaced if it exists.

        Raises
        ------
        ImportError
            When pyarrow is not installed.
        ResultFormatError
            When a gene or sample label is neither a string nor an integer.
        """
        from cytepool.de.persist import write_parquet  # noqa: PLC0415

        write_parquet(self, path)

    @classmethod
    def read(cls, path: str | PathLike[str]) -> LimmaResult:
        """Read a result written by :meth:`to_csv` or :meth:`to_parquet` (by extension).

        Parameters
        ----------
        path
            A ``.parquet`` file, or a CSV file with its ``.json`` sidecar.

        Returns
        -------
        LimmaResult
            Without ``weights``, ``E``, ``voom_trend`` and ``fit``.

        Raises
        ------
        ResultFormatError
            When the file or its sidecar is missing, edited, or of another format version.
        """
        from cytepool.de.persist import read_result  # noqa: PLC0415

        return read_result(path)


@dataclass(frozen=True, kw_only=True, eq=False)
class LimmaResults(Mapping[Hashable, LimmaResult]):
    """limma-voom results of several cube groups: a mapping of group label to :class:`LimmaResult`.

    Attributes
    ----------
    results
        Group label to result, in cube group order.
    skipped
        Group label to the reason it has no result (too few samples left, a
        design column constant, ...).
    settings
        What was asked, as in each result.

    Examples
    --------
    >>> from cytepool.cube.demo import demo_cube
    >>> from cytepool.de import limma_voom
    >>> results = limma_voom(demo_cube(n_features=200), design="~ donor + condition", min_counts=100)
    >>> list(results), results.skipped
    (['CD4 T', 'CD8 T', 'B', 'NK'], {})
    >>> results.table().columns[:2].tolist()
    ['group', 'logFC']
    """

    results: dict[Hashable, LimmaResult]
    skipped: dict[Hashable, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, group: Hashable) -> LimmaResult:
        return self.results[group]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __repr__(self) -> str:
        return f"<LimmaResults: {len(self.results)} groups, {len(self.skipped)} skipped>"

    def _repr_html_(self) -> str:
        """The results in a notebook: test, design, cube, each group's genes tested and significant, top genes."""
        fingerprints = sorted({r.cube.fingerprint for r in self.values() if r.cube is not None})
        groups = [
            (
                group,
                len(r.design),
                f"{len(r.table):,}",
                f"{_n_significant(r.table):,}",
                r.table["P.Value"].idxmin() if len(r.table) else "",
            )
            for group, r in self.items()
        ]
        skipped = list(self.skipped.items())
        rows: list[Row] = [
            ("groups", f"{len(self.results)} fitted, {len(self.skipped)} skipped"),
            *_settings_rows(self.settings),
            ("cube fingerprint", items(code(f) for f in fingerprints) if fingerprints else None),
            (
                "per group",
                html_table(
                    groups,
                    header=("group", "samples", "genes tested", f"adj.P.Val < {_FDR}", "top gene"),
                ),
            ),
            ("skipped", html_table(skipped, header=("group", "reason")) if skipped else None),
            ("top genes", _top(self.table())),
        ]
        return view(f"LimmaResults: {self.settings.get('test', {}).get('name')}", rows)

    def table(self) -> pd.DataFrame:
        """Every group's table, one after the other, with a first column ``group``.

        Returns
        -------
        pandas.DataFrame
            Indexed by gene (each gene once per group).
        """
        frames = []
        for group, result in self.items():
            frame = result.table.copy()
            frame.insert(
                0, "group", pd.Series([group] * len(frame), index=frame.index, dtype=object)
            )
            frames.append(frame)
        if not frames:
            return pd.DataFrame(
                columns=["group", "logFC", "AveExpr", "t", "P.Value", "adj.P.Val", "B"]
            )
        return pd.concat(frames)

    def verify(self, cube: Cube) -> None:
        """Check every result against ``cube`` (see :meth:`LimmaResult.verify`).

        Parameters
        ----------
        cube
            The cube the results should have been computed from.

        Raises
        ------
        ResultMismatchError
            For the first result not computed from ``cube``.
        """
        for result in self.values():
            result.verify(cube)

    def save(
        self,
        directory: str | PathLike[str],
        *,
        file_format: Literal["parquet", "csv"] = "parquet",
        overwrite: bool = False,
    ) -> None:
        """Write every result and a ``results.json`` manifest (with the skipped groups) to ``directory``.

        The directory is written beside its target and renamed into place when
        complete: it then holds these results only, and a failed save leaves
        an earlier one as it was.

        Parameters
        ----------
        directory
            Created if needed; may be an empty directory.
        file_format
            ``"parquet"`` (needs pyarrow) or ``"csv"``, one file per group.
        overwrite
            Replace the whole directory of results saved earlier (only a
            directory with a cytepool ``results.json`` is ever replaced).

        Raises
        ------
        ResultExistsError
            When ``directory`` holds results and ``overwrite`` is False, or
            holds anything else, such as files without a cytepool
            ``results.json`` (a :class:`FileExistsError`).
        LimmaError
            For another ``file_format``.
        ResultFormatError
            When a group or gene label is neither a string nor an integer.
        """
        from cytepool.de.persist import write_results  # noqa: PLC0415

        write_results(self, directory, file_format=file_format, overwrite=overwrite)

    @classmethod
    def read(cls, directory: str | PathLike[str]) -> LimmaResults:
        """Read results written by :meth:`save`.

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
            When the manifest or a result file is missing, edited, or of another format version.
        """
        from cytepool.de.persist import read_results  # noqa: PLC0415

        return read_results(directory)
