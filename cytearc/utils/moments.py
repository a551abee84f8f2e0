"""Per-column sums and squared deviations, merged band by band without cancellation.

Chan, Golub and LeVeque's pairwise update: a band of ``n_b`` rows with column
means ``mean_b`` and squared deviations ``m2_b`` merges into running totals
``(n, mean, m2)`` as ``m2 += m2_b + delta**2 * n * n_b / (n + n_b)`` with
``delta = mean_b - mean``. The variance is never a mean of squares minus a
squared mean, so it is never negative, and a column whose values are all equal
has ``m2`` exactly zero: the running minimum and maximum of each column are
kept, and a column whose minimum equals its maximum gets ``m2 = 0`` (the
rounding of a mean such as ``0.1 + 0.1 + 0.1`` would otherwise leave a
deviation of the order of 1e-34).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ColumnMoments"]


@dataclass(frozen=True)
class ColumnMoments:
    """Row count, per-column sums and squared deviations from the column means.

    Parameters
    ----------
    n
        The number of rows.
    total
        Per column, the sum of the values.
    m2
        Per column, the sum of squared deviations from the column mean.
    low, high
        Per column, the smallest and largest value (``inf`` and ``-inf``
        for no rows).

    Examples
    --------
    >>> x = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]])
    >>> m = ColumnMoments.of(x[:1]).merge(ColumnMoments.of(x[1:]))
    >>> m.n, m.total.tolist(), m.m2.tolist()
    (3, [9.0, 15.0], [8.0, 0.0])
    """

    n: int
    total: np.ndarray
    m2: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, block: np.ndarray) -> ColumnMoments:
        """The moments of one band of rows (computed in float64).

        Parameters
        ----------
        block
            Rows x columns.

        Returns
        -------
        ColumnMoments
            The block's moments.
        """
        values = np.asarray(block, dtype=np.float64)
        n = values.shape[0]
        if n == 0:
            return cls.empty(values.shape[1])
        total = values.sum(axis=0)
        low, high = values.min(axis=0), values.max(axis=0)
        m2 = ((values - total / n) ** 2).sum(axis=0)
        m2[low == high] = 0.0
        return cls(n, total, m2, low, high)

    @classmethod
    def of_nonzero(
        cls,
        n: int,
        columns: np.ndarray,
        values: np.ndarray,
        *,
        low: np.ndarray,
        high: np.ndarray,
    ) -> ColumnMoments:
        """The moments of a band of ``n`` rows from its non-zero entries only (the rest are zeros).

        ``total`` adds each column's values in row order, as :meth:`of` does
        (a zero adds nothing), so it has the same bits; ``m2`` is the sum of
        the squared deviations of the entries (added in order, as
        ``numpy.bincount`` would) plus ``mean**2`` for each zero.

        Parameters
        ----------
        n
            The band's rows.
        columns
            The column of each non-zero entry, in row-major order.
        values
            The entries (float64), in the same order.
        low, high
            Per column, the band's smallest and largest value (zeros included).

        Returns
        -------
        ColumnMoments
            The band's moments.

        Raises
        ------
        ValueError
            ``columns`` and ``values`` differ in length.
        IndexError
            A column is negative or not below ``len(low)``.

        Examples
        --------
        >>> x = np.array([[0.0, 2.0], [4.0, 0.0], [0.0, 0.0]])
        >>> rows, cols = np.nonzero(x)
        >>> m = ColumnMoments.of_nonzero(3, cols, x[rows, cols], low=x.min(0), high=x.max(0))
        >>> np.allclose(m.m2, ColumnMoments.of(x).m2), m.total.tolist()
        (True, [4.0, 2.0])
        """
        from cytearc.utils import kernels  # noqa: PLC0415 (numba is slow to import)

        if n == 0:
            return cls.empty(len(low))
        n_columns = len(low)
        columns = np.asarray(columns, dtype=np.intp)
        values = np.asarray(values, dtype=np.float64)
        total, detected = np.zeros(n_columns), np.zeros(n_columns, np.int64)
        kernels.column_sums(columns, values, total, detected)
        squares = np.zeros(n_columns)
        kernels.column_squares(columns, values, total / n, squares)
        return cls.of_sums(n, total, squares, detected, low=low, high=high)

    @classmethod
    def of_sums(
        cls,
        n: int,
        total: np.ndarray,
        squares: np.ndarray,
        detected: np.ndarray,
        *,
        low: np.ndarray,
        high: np.ndarray,
    ) -> ColumnMoments:
        """The moments of a band of ``n`` rows from the sums over its non-zero entries.

        Parameters
        ----------
        n
            The band's rows (at least 1).
        total
            Per column, the sum of the entries.
        squares
            Per column, the sum of the entries' squared deviations from
            ``total / n``.
        detected
            Per column, the number of entries; each other row holds a zero,
            which adds ``mean**2`` to ``m2``.
        low, high
            Per column, the band's smallest and largest value (zeros included).

        Returns
        -------
        ColumnMoments
            The band's moments.

        Examples
        --------
        >>> m = ColumnMoments.of_sums(4, np.array([2.0]), np.array([0.5]), np.array([2]),
        ...                           low=np.zeros(1), high=np.ones(1))
        >>> m.m2.tolist()  # 0.5 + 2 zeros * 0.5**2
        [1.0]
        """
        mean = total / n
        m2 = squares + (n - detected) * mean**2
        m2[low == high] = 0.0
        return cls(n, total, m2, np.asarray(low, np.float64), np.asarray(high, np.float64))

    @classmethod
    def empty(cls, n_columns: int) -> ColumnMoments:
        """No rows yet.

        Parameters
        ----------
        n_columns
            The number of columns.

        Returns
        -------
        ColumnMoments
            Zero rows, zero sums and deviations.
        """
        zeros = np.zeros(n_columns)
        return cls(0, zeros, zeros.copy(), np.full(n_columns, np.inf), np.full(n_columns, -np.inf))

    def merge(self, other: ColumnMoments) -> ColumnMoments:
        """The moments of the rows of both (Chan's parallel update).

        Parameters
        ----------
        other
            The moments of more rows (of the same columns).

        Returns
        -------
        ColumnMoments
            The merged moments.
        """
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        delta = other.total / other.n - self.total / self.n
        m2 = self.m2 + other.m2 + delta**2 * (self.n * other.n / n)
        low, high = np.minimum(self.low, other.low), np.maximum(self.high, other.high)
        m2[low == high] = 0.0
        return ColumnMoments(n, self.total + other.total, m2, low, high)

    def pack(self) -> np.ndarray:
        """The moments as a ``(5, n_columns)`` float64 array (n, total, m2, low, high).

        Returns
        -------
        numpy.ndarray
            The packed moments; :meth:`merge_packed` reads them back.
        """
        n = np.full_like(self.total, float(self.n))
        return np.stack([n, self.total, self.m2, self.low, self.high])

    @classmethod
    def merge_packed(cls, packed: np.ndarray) -> ColumnMoments:
        """Merge row bands packed by :meth:`pack` and stacked in row order, one after another.

        Each band merges its moments into the running ones in order, as the
        seed's "Normalized feature statistics" describes, so the result does
        not depend on how the bands were computed.

        Parameters
        ----------
        packed
            The packed bands, ``(5 * n_bands, n_columns)`` (or
            ``(n_bands, 5, n_columns)``).

        Returns
        -------
        ColumnMoments
            The moments of all the rows.
        """
        bands = np.asarray(packed, dtype=np.float64).reshape(-1, 5, packed.shape[-1])
        out = cls.empty(packed.shape[-1])
        for n, total, m2, low, high in bands:
            out = out.merge(cls(int(n[0]) if n.size else 0, total, m2, low, high))
        return out

    @property
    def mean(self) -> np.ndarray:
        """Column means (zero for no rows)."""
        return self.total / max(self.n, 1)

    @property
    def variance(self) -> np.ndarray:
        """Population variance ``m2 / n``."""
        return self.m2 / max(self.n, 1)
