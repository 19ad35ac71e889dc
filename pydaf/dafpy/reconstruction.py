"""dafpy's ``reconstruction``: make an axis of the values of a property (pydaf's :func:`pydaf.reconstruct_axis`).

Example:
    >>> from pydaf.dafpy import memory_daf, reconstruct_axis
    >>> daf = memory_daf(name="example!").add_axis("cell", ["A", "B", "C"])
    >>> daf = daf.set_vector("cell", "batch", ["X", "X", "Y"]).set_vector("cell", "age", [1, 1, 2])
    >>> reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch")
    {'age': None}
    >>> daf.get_np_vector("batch", "age").tolist()
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from ..composition.reconstruction import reconstruct_axis as pydaf_reconstruct_axis
from .data import DafWriter, python_scalar, unwrap
from .storage_types import StorageScalar

__all__ = ["reconstruct_axis"]


def reconstruct_axis(dset: DafWriter, *, existing_axis: str, implicit_axis: str, rename_axis: str | None = None,
                     empty_implicit: StorageScalar | None = None, implicit_properties: Set[str] | None = None,
                     skipped_properties: Set[str] | None = None) -> Mapping[str, StorageScalar | None]:
    """Create the axis ``implicit_axis`` (or ``rename_axis``) of the values of that property of ``existing_axis``,
    moving the properties that are the same for all its entries to it; returns each moved property's value for the
    entries with no implicit value (``None`` when there are none)."""
    result = pydaf_reconstruct_axis(unwrap(dset), existing_axis=existing_axis, implicit_axis=implicit_axis,
                                    rename_axis=rename_axis, empty_implicit=empty_implicit,
                                    implicit_properties=implicit_properties, skipped_properties=skipped_properties)
    return {name: python_scalar(value) for name, value in result.items()}
