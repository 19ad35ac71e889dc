"""Julia's recorded outputs (``../shared/fixtures/julia/api``) reproduced on the rebuilt example data sets."""

from __future__ import annotations

import json

from .julia_examples import FIXTURES, example_cells_daf, example_chain_daf, example_metacells_daf, needs_fixtures

API = FIXTURES / "julia" / "api"


def record(name: str) -> dict:
    return json.loads((API / name).read_text(encoding="utf-8"))


@needs_fixtures
def test_cells_description_matches_julia():
    assert example_cells_daf().description() == record("example_data_cells_description.json")["raw_text"]


@needs_fixtures
def test_metacells_description_matches_julia():
    assert example_metacells_daf().description() == record("example_data_metacells_description.json")["raw_text"]


@needs_fixtures
def test_reader_records_match_julia():
    cells, metacells = example_cells_daf(), example_metacells_daf()
    assert cells.get_scalar("organism") == record("readers_get_scalar_cells_organism.json")["value"]
    assert metacells.get_scalar("organism", default=None) is record(
        "readers_get_scalar_metacells_default_nothing.json")["value"]
    assert metacells.axis_length("type") == record("readers_axis_length_metacells_type.json")["value"]
    assert metacells.axis_vector("type").tolist() == record("readers_axis_vector_metacells_type.json")["values"]
    color = record("readers_get_vector_metacells_type_color.json")
    series = metacells.get_pd_vector("type", "color")
    assert series.index.tolist() == color["names"] and series.tolist() == color["values"]
    assert cells.has_matrix("gene", "cell", "UMIs") == record("readers_has_matrix_cells_gene_cell_UMIs.json")["value"]
    assert sorted(cells.scalars_set()) == sorted(record("readers_scalars_set_cells.json")["values"])
    assert sorted(cells.vectors_set("cell")) == sorted(record("readers_vectors_set_cells_cell.json")["values"])


@needs_fixtures
def test_cells_description_through_h5df_matches_julia(tmp_path):
    import pydaf

    from .julia_examples import example_daf

    daf = example_daf("c", pydaf.H5df(tmp_path / "cells.h5df", "w", name="cells!"))
    daf.set_scalar("organism", "human").set_scalar("reference", "test")
    expected = record("example_data_cells_description.json")["raw_text"]
    text = daf.description()
    assert text.startswith(f"name: cells!\ntype: H5df\nroot: HDF5.File: (read-write) {tmp_path / 'cells.h5df'}\n"
                           "mode: w\n")
    assert text[text.index("scalars:"):] == expected[expected.index("scalars:"):]


@needs_fixtures
def test_chain_descriptions_match_julia():
    assert example_chain_daf().description() == record("example_data_chain_description.json")["raw_text"]
    assert example_chain_daf().description(deep=True) == record("readers_description_chain_deep.json")["raw_text"]
