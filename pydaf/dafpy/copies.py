"""dafpy's ``copies``: copy data between data sets (pydaf's :mod:`pydaf.composition.copies`).

Example:
    >>> from pydaf.dafpy import copy_all, copy_scalar, memory_daf
    >>> source = memory_daf(name="source!").set_scalar("version", "1.0").add_axis("cell", ["A", "B"])
    >>> destination = memory_daf(name="destination!")
    >>> copy_scalar(source=source, destination=destination, name="version", rename="release")
    >>> copy_all(source=source, destination=destination)
    >>> sorted(destination.scalars_set()), destination.axis_np_vector("cell").tolist()
    (['release', 'version'], ['A', 'B'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..composition import copies
from ..core.undef import Undef
from .data import DafReader, DafWriter, DataKey, unwrap
from .julia_import import _given
from .storage_types import StorageScalar

__all__ = ["EmptyData", "copy_all", "copy_axis", "copy_matrix", "copy_scalar", "copy_tensor", "copy_vector"]

#: The value to use for each missing property when copying: ``{key: value}`` (Julia's ``EmptyData``).
EmptyData = Mapping[DataKey, StorageScalar]


def copy_scalar(*, destination: DafWriter, source: DafReader, name: str, rename: str | None = None,
                default: Any = Undef, overwrite: bool | None = None) -> None:
    """Copy a scalar (as ``rename``); a missing one is ``default`` (``None``: copy nothing)."""
    copies.copy_scalar(destination=unwrap(destination), source=unwrap(source), name=name, rename=rename,
                       default=default, **_given(overwrite=overwrite))


def copy_axis(*, destination: DafWriter, source: DafReader, axis: str, rename: str | None = None,
              default: Any = Undef, overwrite: bool | None = None, insist: bool | None = None) -> None:
    """Copy an axis (as ``rename``); a missing one is an error unless ``default`` is ``None``."""
    copies.copy_axis(destination=unwrap(destination), source=unwrap(source), axis=axis, rename=rename,
                     default=default, **_given(overwrite=overwrite, insist=insist))


def copy_vector(*, destination: DafWriter, source: DafReader, axis: str, name: str, reaxis: str | None = None,
                rename: str | None = None, default: Any = Undef, empty: StorageScalar | None = None,
                overwrite: bool | None = None) -> None:
    """Copy a vector (into the axis ``reaxis``, as ``rename``); entries the source lacks get ``empty``."""
    copies.copy_vector(destination=unwrap(destination), source=unwrap(source), axis=axis, name=name, reaxis=reaxis,
                       rename=rename, default=default, empty=empty, **_given(overwrite=overwrite))


def copy_matrix(*, destination: DafWriter, source: DafReader, rows_axis: str, columns_axis: str, name: str,
                rows_reaxis: str | None = None, columns_reaxis: str | None = None, rename: str | None = None,
                default: Any = Undef, empty: StorageScalar | None = None, relayout: bool | None = None,
                overwrite: bool | None = None) -> None:
    """Copy a matrix (into the axes ``rows_reaxis``/``columns_reaxis``, as ``rename``)."""
    copies.copy_matrix(destination=unwrap(destination), source=unwrap(source), rows_axis=rows_axis,
                       columns_axis=columns_axis, name=name, rows_reaxis=rows_reaxis, columns_reaxis=columns_reaxis,
                       rename=rename, default=default, empty=empty, **_given(relayout=relayout, overwrite=overwrite))


def copy_tensor(*, destination: DafWriter, source: DafReader, main_axis: str, rows_axis: str, columns_axis: str,
                name: str, rows_reaxis: str | None = None, columns_reaxis: str | None = None,
                rename: str | None = None, empty: StorageScalar | None = None, relayout: bool | None = None,
                overwrite: bool | None = None) -> None:
    """Copy the matrices ``<entry>_<name>`` of each entry of ``main_axis``; missing ones are filled with ``empty``."""
    copies.copy_tensor(destination=unwrap(destination), source=unwrap(source), main_axis=main_axis,
                       rows_axis=rows_axis, columns_axis=columns_axis, name=name, rows_reaxis=rows_reaxis,
                       columns_reaxis=columns_reaxis, rename=rename, empty=empty,
                       **_given(relayout=relayout, overwrite=overwrite))


def copy_all(*, destination: DafWriter, source: DafReader, empty: EmptyData | None = None,
             overwrite: bool | None = None, relayout: bool | None = None) -> None:
    """Copy everything of ``source`` into ``destination``."""
    copies.copy_all(unwrap(destination), unwrap(source), empty=empty, progress=False,
                    **_given(overwrite=overwrite, relayout=relayout))
