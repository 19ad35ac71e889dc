"""Julia's example data sets, as pydaf ships them (``pydaf.example_cells_daf`` and friends), and the location of the
shared Julia-written fixtures. Tests that read those fixtures skip when ``../shared`` is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

import pydaf

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures"
EXAMPLE_DATA = FIXTURES / "julia" / "example_data"

needs_fixtures = pytest.mark.skipif(not EXAMPLE_DATA.is_dir(),
                                    reason=f"the Julia-written fixtures are not at {FIXTURES}")

example_cells_daf = pydaf.example_cells_daf
example_metacells_daf = pydaf.example_metacells_daf
example_chain_daf = pydaf.example_chain_daf


def example_daf(which: str, daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Fill ``daf`` (of any backend) with the axes, vectors and matrices (not the scalars) of the cells (``which`` =
    ``"c"``) or metacells (``"m"``) example, each matrix written once in its stored layout (and relaid out where the
    example holds both layouts, as Julia's builder does)."""
    source = example_cells_daf() if which == "c" else example_metacells_daf()
    axes = sorted(source.axes_set())
    for axis in axes:
        daf.add_axis(axis, source.axis_vector(axis))
    for axis in axes:
        for name in sorted(source.vectors_set(axis)):
            daf.set_vector(axis, name, source.get_vector(axis, name))
    for rows_axis in axes:
        for columns_axis in axes:
            for name in sorted(source.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False)):
                if daf.has_matrix(rows_axis, columns_axis, name, relayout=False):
                    continue  # written as the relayout of the other layout
                both = rows_axis != columns_axis and source.has_matrix(columns_axis, rows_axis, name, relayout=False)
                daf.set_matrix(rows_axis, columns_axis, name,
                               source.get_stored_matrix(rows_axis, columns_axis, name, relayout=False), relayout=both)
    return daf
