"""A seeded synthetic cell-hashing experiment: hashtag counts whose sample of origin is known.

:func:`generate_hashtags` returns the counts and the truth in memory;
:func:`write_hashtag_store` imports them into a CyteArc store as an ``HTO``
assay, for :func:`cytearc.ops.hto.hto_demultiplexing`.

The model, all of it drawn from ``seed`` (:func:`numpy.random.default_rng`):

- hashtag ``j`` (named ``HTO-A``, ``HTO-B``, ...) has an ambient background
  in every cell, negative binomial with mean ``b_j`` (uniform 5-30) and
  size ``r_j`` (uniform 2-8: variance ``b_j + b_j**2 / r_j``), and a signal
  in the cells it stained, negative binomial with mean ``L_i * s_j`` (``s_j``
  uniform 100-500; ``L_i`` the cell's library factor, lognormal with
  sigma 0.35) and size uniform 6-12;
- a cell is a negative with probability ``negative_rate`` (background only),
  a doublet with probability ``doublet_rate`` (the signal of two distinct
  hashtags added to the background), else a singlet of one hashtag, drawn
  with uneven proportions (Dirichlet with concentration 8 per hashtag);
- a count is the background plus the signal, drawn in that order for every
  cell, so the counts of ``n_cells`` cells do not depend on the rates
  beyond the classes they draw.

The truth has the columns ``global`` (``"Singlet"``, ``"Doublet"`` or
``"Negative"``) and ``hashtag``: the singlet's hashtag, the doublet's two
hashtags sorted and joined by ``_`` (``"HTO-A_HTO-C"``, as HTODemux names a
doublet's classification), or ``""`` for a negative.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import pandas as pd
import scipy.sparse as sp

from cytearc.errors import OperationArgumentError
from cytearc.io.converters import SparseToZarr

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["FEATURE_TYPE", "generate_hashtags", "hashtag_names", "write_hashtag_store"]

FEATURE_TYPE: Final = "Multiplexing Capture"
"""The 10x feature type of hashtags, which imports as the ``HTO`` assay."""

MAX_HASHTAGS: Final = len(string.ascii_uppercase)


def hashtag_names(n_hashtags: int) -> list[str]:
    """The names of the first ``n_hashtags`` hashtags: ``HTO-A``, ``HTO-B``, ...

    Parameters
    ----------
    n_hashtags
        How many (at most 26).

    Returns
    -------
    list of str
        The names.

    Examples
    --------
    >>> hashtag_names(3)
    ['HTO-A', 'HTO-B', 'HTO-C']
    """
    return [f"HTO-{letter}" for letter in string.ascii_uppercase[:n_hashtags]]


def _validate(n_cells: int, n_hashtags: int, doublet_rate: float, negative_rate: float) -> None:
    operation = "generate_hashtags"
    if n_cells < 1:
        msg = f"{operation}: n_cells must be at least 1, found {n_cells!r}"
        raise OperationArgumentError(msg)
    if not 2 <= n_hashtags <= MAX_HASHTAGS:
        msg = f"{operation}: n_hashtags must be from 2 to {MAX_HASHTAGS}, found {n_hashtags!r}"
        raise OperationArgumentError(msg)
    for name, rate in (("doublet_rate", doublet_rate), ("negative_rate", negative_rate)):
        if not 0 <= rate < 1:
            msg = f"{operation}: {name} must be from 0 to below 1, found {rate!r}"
            raise OperationArgumentError(msg)
    if doublet_rate + negative_rate >= 1:
        msg = (
            f"{operation}: doublet_rate + negative_rate must be below 1 to leave singlets, "
            f"found {doublet_rate} + {negative_rate}; lower them"
        )
        raise OperationArgumentError(msg)


def _negative_binomial(rng: np.random.Generator, mean: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Negative-binomial draws of mean ``mean`` and size ``size`` (broadcast)."""
    mean, size = np.broadcast_arrays(np.asarray(mean, np.float64), np.asarray(size, np.float64))
    return rng.negative_binomial(size, size / (size + mean)).astype(np.int64)


def generate_hashtags(
    *,
    n_cells: int = 2000,
    n_hashtags: int = 6,
    doublet_rate: float = 0.08,
    negative_rate: float = 0.05,
    seed: int = 0,
) -> tuple[sp.csr_matrix, pd.DataFrame]:
    """Draw the hashtag counts of a cell-hashing experiment (see the module docstring).

    Parameters
    ----------
    n_cells
        Cells (rows).
    n_hashtags
        Hashtags (columns), from 2 to 26.
    doublet_rate
        The probability that a cell is a doublet of two hashtags.
    negative_rate
        The probability that a cell is stained by no hashtag.
    seed
        Everything is drawn from it.

    Returns
    -------
    tuple
        ``(counts, truth)``: the int64 counts, cells x hashtags, as a CSR
        matrix, and one row per cell with ``global`` and ``hashtag``.

    Raises
    ------
    OperationArgumentError
        A parameter is out of its range.

    Examples
    --------
    >>> counts, truth = generate_hashtags(n_cells=500, n_hashtags=4, seed=1)
    >>> counts.shape, counts.dtype.name
    ((500, 4), 'int64')
    >>> sorted(truth["global"].unique())
    ['Doublet', 'Negative', 'Singlet']
    >>> truth.loc[truth["global"] == "Doublet", "hashtag"].iloc[0]
    'HTO-B_HTO-C'
    """
    _validate(n_cells, n_hashtags, doublet_rate, negative_rate)
    rng = np.random.default_rng(seed)
    names = np.array(hashtag_names(n_hashtags))
    background_mean = rng.uniform(5.0, 30.0, n_hashtags)
    background_size = rng.uniform(2.0, 8.0, n_hashtags)
    signal_mean = rng.uniform(100.0, 500.0, n_hashtags)
    signal_size = rng.uniform(6.0, 12.0, n_hashtags)
    proportions = rng.dirichlet(np.full(n_hashtags, 8.0))

    draw = rng.random(n_cells)
    negative = draw < negative_rate
    doublet = ~negative & (draw < negative_rate + doublet_rate)
    first = rng.choice(n_hashtags, size=n_cells, p=proportions)
    second = (first + rng.integers(1, n_hashtags, size=n_cells)) % n_hashtags
    library = rng.lognormal(0.0, 0.35, n_cells)

    stained = np.zeros((n_cells, n_hashtags), dtype=bool)
    cells = np.arange(n_cells)
    stained[cells[~negative], first[~negative]] = True
    stained[cells[doublet], second[doublet]] = True

    counts = _negative_binomial(
        rng, np.broadcast_to(background_mean, stained.shape), background_size
    )
    signal = _negative_binomial(rng, library[:, None] * signal_mean[None, :], signal_size)
    counts += np.where(stained, signal, 0)

    pairs = np.sort(np.stack([names[first], names[second]], axis=1), axis=1)
    hashtag = np.where(
        negative,
        "",
        np.where(doublet, np.char.add(np.char.add(pairs[:, 0], "_"), pairs[:, 1]), names[first]),
    )
    truth = pd.DataFrame(
        {
            "global": np.where(negative, "Negative", np.where(doublet, "Doublet", "Singlet")),
            "hashtag": hashtag.astype(object),
        }
    )
    return sp.csr_matrix(counts), truth


def write_hashtag_store(
    path: str | Path,
    *,
    n_cells: int = 2000,
    n_hashtags: int = 6,
    doublet_rate: float = 0.08,
    negative_rate: float = 0.05,
    seed: int = 0,
    assay_type: str = "HTO",
    overwrite: bool = False,
    mem_budget: str | int | float | None = None,
    workers: int | str | None = None,
    cluster: str | Client | None = None,
    show_progress: bool = False,
) -> Path:
    """Generate hashtag counts and import them into a new store as the assay ``HTO``.

    The cell table holds the truth as ``truth_global`` and ``truth_hashtag``.

    Parameters
    ----------
    path
        The store to create (a local directory).
    n_cells, n_hashtags, doublet_rate, negative_rate, seed
        What to generate (see :func:`generate_hashtags`).
    assay_type
        The type the assay is declared as (a preset; ``"HTO"`` for
        demultiplexing, another to test its refusal).
    overwrite
        Replace an existing CyteArc store at ``path``.
    mem_budget, workers, cluster
        The engine of the import (:func:`cytearc.engine.get_engine`).
    show_progress
        Progress bars for the import.

    Returns
    -------
    pathlib.Path
        The store's path.

    Raises
    ------
    OperationArgumentError
        A parameter is out of its range (nothing is written).
    AssayTypeError
        ``assay_type`` is not a preset.
    DestinationExistsError
        ``path`` holds anything but a CyteArc store that ``overwrite`` may
        replace.

    Examples
    --------
    >>> import tempfile
    >>> from cytearc import DataStore
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_hashtag_store(f"{d}/hashing.zarr", n_cells=300, cluster="threads")
    ...     hto = DataStore(path).assays["HTO"]
    ...     hto.shape, hto.assayType
    ((300, 6), 'HTO')
    """
    counts, truth = generate_hashtags(
        n_cells=n_cells,
        n_hashtags=n_hashtags,
        doublet_rate=doublet_rate,
        negative_rate=negative_rate,
        seed=seed,
    )
    names = hashtag_names(n_hashtags)
    cells = pd.DataFrame(
        {
            "ids": [f"cell{i:06d}" for i in range(n_cells)],
            "truth_global": truth["global"].to_numpy(),
            "truth_hashtag": truth["hashtag"].to_numpy(),
        }
    )
    features = pd.DataFrame({"ids": names, "names": names, "feature_types": FEATURE_TYPE})
    result = SparseToZarr(
        counts,
        cells=cells,
        features=features,
        zarr_loc=Path(path),
        assay_types={"HTO": assay_type},
        overwrite=overwrite,
        mem_budget=mem_budget,
        workers=workers,
        cluster=cluster,
        show_progress=show_progress,
    ).dump()
    return Path(result.path)
