"""dafpy's ``adapters``: run a computation on renamed data with a ``with`` block (pydaf's :func:`pydaf.adapter`).

Example:
    >>> from pydaf.dafpy import adapter, memory_daf
    >>> daf = memory_daf(name="example!").set_scalar("INPUT", 1)
    >>> with adapter(daf, input_data={"input": ". INPUT"}, output_data={"OUTPUT": ". output"}) as adapted:
    ...     _ = adapted.set_scalar("output", adapted.get_scalar("input") + 1)
    >>> daf.get_scalar("OUTPUT")
    2
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..composition.adapters import adapter as pydaf_adapter
from .copies import EmptyData
from .data import DafWriter, unwrap
from .formats import memory_daf
from .julia_import import _given
from .views import ViewAxes, ViewData

__all__ = ["adapter"]


@contextmanager
def adapter(daf: DafWriter, *, input_axes: ViewAxes | None = None, input_data: ViewData | None = None,
            capture: Callable[..., DafWriter] = memory_daf, output_axes: ViewAxes | None = None,
            output_data: ViewData | None = None, empty: EmptyData | None = None, relayout: bool | None = None,
            overwrite: bool | None = None) -> Iterator[DafWriter]:
    """``with adapter(daf, ...) as adapted:`` a writer over a view of ``daf`` (``input_axes``/``input_data``) and
    a ``capture`` data set; on exit, a view of what was written (``output_axes``/``output_data``) is copied into
    ``daf``."""

    def captured(**options: Any) -> Any:
        return unwrap(capture(**options))

    with pydaf_adapter(unwrap(daf), input_axes=input_axes, input_data=input_data, capture=captured,
                       output_axes=output_axes, output_data=output_data, empty=empty,
                       **_given(relayout=relayout, overwrite=overwrite)) as adapted:
        yield DafWriter(adapted)
