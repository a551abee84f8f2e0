"""The assay classes of the modalities, and the class each assay type opens as.

The preset of an assay (the root attribute ``assayTypes``) selects its
class, and so its defaults (:class:`~cytearc.assays.assay.AssayDefaults`):

============================  ===============  ==============================  ==============
preset                        class            normalization                   reduction
============================  ===============  ==============================  ==============
RNA, GeneActivity, URNA       :class:`RNAassay`  library size, ``log1p``        PCA of HVGs
ADT, HTO                      :class:`ADTassay`  centred log ratio per cell     PCA
ATAC                          :class:`ATACassay` log TF-IDF (Signac method 1)   LSI of prevalent peaks
CRISPR, ANTIGEN, CUSTOM,      :class:`Assay`     none (the counts)              PCA of HVGs
GeneScores, Assay
============================  ===============  ==============================  ==============

Only RNA types store ``countsT``. HTO shares the ADT class but keeps its
type, which ``qc.hto_demultiplexing`` requires. The generic type makes no
assumption about its counts (guides, antigens, precomputed gene scores):
its "normalization" leaves the counts as they are, as Scarf's generic
assay does; pass ``method=`` to ``features.normalize`` for another.

Examples
--------
>>> assay_class("URNA").__name__, assay_class("HTO").__name__, assay_class("CRISPR").__name__
('RNAassay', 'ADTassay', 'Assay')
>>> assay_class("ATAC").defaults.reduction
'lsi'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final, TypeVar

from cytearc.assays.assay import Assay, AssayDefaults
from cytearc.assays.types import PRESETS, RNA_TYPES
from cytearc.errors import AssayTypeError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ASSAY_CLASSES", "ADTassay", "ATACassay", "RNAassay", "assay_class", "with_storage"]


class RNAassay(Assay):
    """An RNA-type assay (RNA, GeneActivity, URNA): ``counts`` and ``countsT``.

    Normalized by library size (``log1p(x / rowSums * target_sum)``), HVGs
    (scanpy's ``seurat`` flavour), PCA. Opening requires a complete sharded
    ``countsT`` that agrees with ``counts`` (the seed's "Opening an RNA assay").

    Parameters
    ----------
    name, assay_type, root, where, writable, matrices_root, workspace
        As for :class:`~cytearc.assays.assay.Assay`.
    """

    defaults: ClassVar[AssayDefaults] = AssayDefaults(
        normalization="library_size", feature_selection="hvgs", reduction="pca"
    )
    stores_transpose: ClassVar[bool] = True


class ADTassay(Assay):
    """An antibody-derived tag assay (ADT, and HTO, which keeps its own type): ``counts`` only.

    Normalized by the centred log ratio of each cell (Seurat's
    ``NormalizeData(normalization.method = "CLR", margin = 2)``), every
    feature of a panel kept by the HVG selection (panels are smaller than
    its ``n_top``), PCA.

    Parameters
    ----------
    name, assay_type, root, where, writable, matrices_root, workspace
        As for :class:`~cytearc.assays.assay.Assay`.
    """

    defaults: ClassVar[AssayDefaults] = AssayDefaults(
        normalization="clr", feature_selection="hvgs", reduction="pca"
    )


class ATACassay(Assay):
    """A chromatin accessibility assay of peaks: ``counts`` only.

    Normalized by log TF-IDF (Signac's ``RunTFIDF`` method 1), the peaks
    detected in enough cells (``features.prevalent_peaks``), LSI
    (``reduce.lsi``).

    Parameters
    ----------
    name, assay_type, root, where, writable, matrices_root, workspace
        As for :class:`~cytearc.assays.assay.Assay`.
    """

    defaults: ClassVar[AssayDefaults] = AssayDefaults(
        normalization="tfidf", feature_selection="prevalent_peaks", reduction="lsi"
    )


ASSAY_CLASSES: Final[Mapping[str, type[Assay]]] = {
    **dict.fromkeys(sorted(RNA_TYPES), RNAassay),
    "ADT": ADTassay,
    "HTO": ADTassay,
    "ATAC": ATACassay,
    **dict.fromkeys(("CRISPR", "ANTIGEN", "CUSTOM", "GeneScores", "Assay"), Assay),
}
"""The class of each preset."""


def assay_class(assay_type: str) -> type[Assay]:
    """The class an assay of ``assay_type`` opens as.

    Parameters
    ----------
    assay_type
        A preset (:data:`cytearc.assays.types.PRESETS`).

    Returns
    -------
    type
        :class:`RNAassay`, :class:`ADTassay`, :class:`ATACassay` or the generic :class:`Assay`.

    Raises
    ------
    AssayTypeError
        ``assay_type`` is not a preset.
    """
    cls = ASSAY_CLASSES.get(assay_type)
    if cls is None:
        msg = f"assay type {assay_type!r} is not a preset; use one of {list(PRESETS)}"
        raise AssayTypeError(msg)
    return cls


A = TypeVar("A", bound=Assay)

_COMBINED: dict[tuple[type[Assay], type[Assay]], type[Assay]] = {}


def with_storage(storage: type[A], modality: type[Assay]) -> type[A]:
    """A class that reads counts as ``storage`` does (a composite's) and analyses them as ``modality``.

    Parameters
    ----------
    storage
        A subclass of :class:`Assay` that overrides how counts are read.
    modality
        The assay class of the type.

    Returns
    -------
    type
        ``storage`` itself when ``modality`` is the generic :class:`Assay`,
        else a subclass of both (one per pair).
    """
    if modality is Assay or issubclass(storage, modality):
        return storage
    key = (storage, modality)
    if key not in _COMBINED:
        _COMBINED[key] = type(f"{storage.__name__}{modality.__name__}", (storage, modality), {})
    combined: type[A] = _COMBINED[key]  # type: ignore[assignment]  # a subclass of storage
    return combined
