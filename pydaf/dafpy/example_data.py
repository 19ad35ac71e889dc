"""dafpy's ``example_data``: Julia's example data sets (pydaf's :mod:`pydaf.example_data`).

Example:
    >>> from pydaf.dafpy import example_chain_daf
    >>> example_chain_daf().axis_length("metacell")
    7
"""

from __future__ import annotations

from ..example_data import example_cells_daf as pydaf_example_cells_daf
from ..example_data import example_chain_daf as pydaf_example_chain_daf
from ..example_data import example_metacells_daf as pydaf_example_metacells_daf
from .data import DafWriter
from .julia_import import _given

__all__ = ["example_cells_daf", "example_chain_daf", "example_metacells_daf"]


def example_cells_daf(*, name: str | None = None) -> DafWriter:
    """The cells example data, in memory (named ``cells!`` by default)."""
    return DafWriter(pydaf_example_cells_daf(**_given(name=name)))


def example_metacells_daf(*, name: str | None = None) -> DafWriter:
    """The metacells example data, in memory (named ``metacells!`` by default)."""
    return DafWriter(pydaf_example_metacells_daf(**_given(name=name)))


def example_chain_daf(*, name: str | None = None) -> DafWriter:
    """A write chain of the cells and metacells example data (named ``chain!`` by default)."""
    return DafWriter(pydaf_example_chain_daf(**_given(name=name)))
