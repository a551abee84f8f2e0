"""Differential expression: limma-voom exactly as edgeR and limma compute it in R.

:func:`run_limma_voom` runs the pipeline on a genes x samples count matrix and
returns the top table, :func:`limma_voom_result` the :class:`LimmaResult` behind
it (voom's weights, library sizes, TMM factors, prior); :func:`limma_voom` runs
it on every group of a pseudobulk :class:`~cytepool.Cube` and keeps the cube's
fingerprint with each :class:`LimmaResult`. Contrasts are written as in R's
``makeContrasts`` (:func:`make_contrasts`, :mod:`.contrasts`). The formulas
are those of ``shared/limma/MATH.md``; each step lives in its own module
(:mod:`.filter`, :mod:`.tmm`, :mod:`.lowess`, :mod:`.voom`, :mod:`.lmfit`,
:mod:`.ebayes`, :mod:`.toptable`, :mod:`.design`).
"""

from cytepool.de.api import limma_voom_result, run_limma_voom
from cytepool.de.contrasts import make_contrasts
from cytepool.de.pseudobulk import limma_voom
from cytepool.de.result import CubeSource, EBayesPrior, LimmaResult, LimmaResults, VoomTrend

__all__ = [
    "CubeSource",
    "EBayesPrior",
    "LimmaResult",
    "LimmaResults",
    "VoomTrend",
    "limma_voom",
    "limma_voom_result",
    "make_contrasts",
    "run_limma_voom",
]
