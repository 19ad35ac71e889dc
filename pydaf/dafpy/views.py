"""dafpy's ``views``: :func:`viewer` and its keys, over pydaf's views.

Example:
    >>> from pydaf.dafpy import ALL_SCALARS, memory_daf, viewer
    >>> daf = memory_daf(name="example!").set_scalar("version", "1.0").add_axis("cell", ["A", "B"])
    >>> view = viewer(daf, name="view!", axes={"obs": "@ cell"}, data={ALL_SCALARS: "="})
    >>> view.axis_np_vector("obs").tolist(), view.get_scalar("version")
    (['A', 'B'], '1.0')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..composition.views import viewer as pydaf_viewer
from ..keys import ALL_AXES, ALL_MATRICES, ALL_SCALARS, ALL_VECTORS
from .data import DafReader, DafReadOnly, DataKey, unwrap

__all__ = ["ALL_AXES", "ALL_MATRICES", "ALL_SCALARS", "ALL_VECTORS", "ViewAxes", "ViewData", "viewer"]

#: The axes a view exposes: ``{name in the view: query of the base axis (None: hide it)}``, in order.
ViewAxes = Mapping[str, Any]

#: The data a view exposes: ``{key in the view: query of the base data (None: hide it)}``, in order.
ViewData = Mapping[DataKey, Any]


def viewer(dset: DafReader, *, name: str | None = None, axes: ViewAxes | None = None,
           data: ViewData | None = None) -> DafReadOnly:
    """A lazy read-only view of a data set: renamed, subset or computed axes and data (pydaf's
    :func:`pydaf.viewer`). The order of the entries of ``axes`` and ``data`` matters (later ones win)."""
    return DafReadOnly(pydaf_viewer(unwrap(dset), name=name, axes=axes, data=data))
