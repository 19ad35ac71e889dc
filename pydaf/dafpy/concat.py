"""dafpy's ``concat``: concatenate data sets along axes (pydaf's :func:`pydaf.concatenate`).

Example:
    >>> from pydaf.dafpy import MergeAction, concatenate, memory_daf
    >>> sources = [memory_daf(name="a!").add_axis("cell", ["A"]), memory_daf(name="b!").add_axis("cell", ["B"])]
    >>> destination = memory_daf(name="both!")
    >>> concatenate(destination, "cell", sources, merge={"version": MergeAction.LastValue})
    >>> destination.axis_np_vector("cell").tolist(), destination.axis_np_vector("dataset").tolist()
    (['A', 'B'], ['a!', 'b!'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from ..composition.concat import MergeAction
from ..composition.concat import concatenate as pydaf_concatenate
from .copies import EmptyData
from .data import DafReader, DafWriter, PropertyKey, unwrap
from .julia_import import _given

__all__ = ["MergeAction", "concatenate"]

#: How to merge each property: ``{key: MergeAction}`` (Julia's ``MergeData``).
MergeData = Mapping[PropertyKey, MergeAction]


def concatenate(destination: DafWriter, axis: str | Sequence[str], sources: Sequence[DafReader],
                names: Sequence[str] | None = None, dataset_axis: str | None = "dataset",
                dataset_property: bool | None = None, prefix: bool | Sequence[bool] | None = None,
                prefixed: Set[str] | Sequence[Set[str]] | None = None, empty: EmptyData | None = None,
                sparse_if_saves_storage_fraction: float | None = None, merge: MergeData | None = None,
                overwrite: bool | None = None) -> None:
    """Concatenate ``sources`` into ``destination`` along ``axis`` (or several axes); ``dataset_axis`` (``None``:
    none) records which source each entry came from."""
    pydaf_concatenate(unwrap(destination), axis, [unwrap(source) for source in sources], dataset_axis=dataset_axis,
                      progress=False, **_given(names=names, dataset_property=dataset_property, prefix=prefix,
                                               prefixed=prefixed, empty=empty, merge=merge, overwrite=overwrite,
                                               sparse_if_saves_storage_fraction=sparse_if_saves_storage_fraction))
