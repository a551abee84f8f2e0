"""Assay membership: the cells an assay measured, and the refusal of the others.

A store's boolean cell column ``<assay>_I`` (attributes ``role="assay_membership"``
and ``assay``) marks the cells an assay measured; a store without it measured
every cell. Operations that read an assay's values check the cells they read
against it before they plan, reuse or write anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from cytearc.errors import UnmeasuredCellsError

if TYPE_CHECKING:
    from collections.abc import Mapping

    import zarr

    from cytearc.metadata.table import MetaData

__all__ = [
    "MEMBERSHIP_ROLE",
    "membership_column",
    "validate_measured",
    "write_membership_columns",
]

MEMBERSHIP_ROLE: Final = "assay_membership"


def membership_column(cells: MetaData, assay: str) -> str | None:
    """The membership column of ``assay``, or None when the assay measured every cell.

    A column named ``<assay>_I`` without ``role="assay_membership"`` and
    ``assay=<assay>`` is ordinary metadata, not a membership column.

    Parameters
    ----------
    cells
        The cell table.
    assay
        The assay's name.

    Returns
    -------
    str or None
        ``<assay>_I``, or None when the assay has no membership column.
    """
    column = f"{assay}_I"
    if column not in cells.columns:
        return None
    attrs = cells.attributes(column)
    if attrs.get("role") != MEMBERSHIP_ROLE or attrs.get("assay") != assay:
        return None
    return column


def validate_measured(
    cells: MetaData,
    assay: str,
    selected: np.ndarray,
    *,
    operation: str,
    remedy: str,
    cell_key: str | None = None,
) -> None:
    """Raise :class:`UnmeasuredCellsError` when ``selected`` (a mask) holds a cell ``assay`` did not measure.

    Parameters
    ----------
    cells
        The cell table.
    assay
        The assay whose values would be read.
    selected
        One boolean per cell: the cells the operation reads.
    operation
        The operation, for the message.
    remedy
        What the user should do, for the message.
    cell_key
        The boolean cell column the cells came from, if any.

    Raises
    ------
    UnmeasuredCellsError
        A selected cell is not in the assay's membership column.

    Examples
    --------
    >>> import numpy as np, pandas as pd, zarr
    >>> from cytearc.metadata.table import MetaData, write_table
    >>> group = zarr.group(zarr.storage.MemoryStore())
    >>> write_table(group, pd.DataFrame({"ids": ["c1", "c2"]}), dimension="cell", where="cells")
    >>> cells = MetaData(group, dimension="cell", where="cells", writable=True)
    >>> cells.insert("ADT_I", [True, False], attributes={"role": "assay_membership", "assay": "ADT"})
    >>> validate_measured(cells, "ADT", np.array([True, True]), operation="qc.metrics",
    ...                   remedy="select measured cells")
    Traceback (most recent call last):
    ...
    cytearc.errors.UnmeasuredCellsError: qc.metrics: 1 of the 2 selected cells were not measured by assay 'ADT' ...
    """
    column = membership_column(cells, assay)
    if column is None:
        return
    measured = cells.fetch_all(column).astype(bool)
    unmeasured = int((selected & ~measured).sum())
    if unmeasured:
        raise UnmeasuredCellsError(
            operation, assay, column, unmeasured, int(selected.sum()), remedy, cell_key
        )


def write_membership_columns(
    group: zarr.Group, membership: Mapping[str, np.ndarray], *, n_rows: int, where: str
) -> None:
    """Write each assay's ``<assay>_I`` into a new cell table, with the role attributes in its first write.

    What imports, merges, subsets and repacks do, so a reader never finds the
    column without its attributes; the columns are listed after the table's
    others.

    Parameters
    ----------
    group
        The cell table's group (written by
        :func:`~cytearc.metadata.table.write_table`).
    membership
        Each assay's values, one boolean per cell.
    n_rows
        The cells.
    where
        The table, for messages.
    """
    from cytearc.metadata.encoding import encode_column, write_column  # noqa: PLC0415 (the table imports this module)
    from cytearc.metadata.table import COLUMNS_ATTRIBUTE, list_columns  # noqa: PLC0415

    names = []
    for assay, values in membership.items():
        name = f"{assay}_I"
        column = encode_column(
            np.asarray(values, dtype=bool), n_rows=n_rows, where=f"{where}/{name}"
        )
        write_column(
            group,
            name,
            column,
            dimension="cell",
            attributes={"role": MEMBERSHIP_ROLE, "assay": assay},
        )
        names.append(name)
    if names:
        listed = group.attrs[COLUMNS_ATTRIBUTE]
        assert isinstance(listed, list)
        list_columns(group, [*map(str, listed), *names])
