"""Every reader/writer result Julia recorded in ``../shared/fixtures/julia/api`` (the ones that need no chain),
reproduced on the example data sets built in each backend."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pydaf

from .julia_examples import FIXTURES, example_daf, needs_fixtures

API = FIXTURES / "julia" / "api"


def record(name: str) -> dict:
    return json.loads((API / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def build(backend, tmp_path):
    """Build ``cells`` or ``metacells`` in the backend under test."""

    def make(which: str) -> pydaf.DafWriter:
        daf = backend.new(tmp_path, f"{which}!")
        example_daf("c" if which == "cells" else "m", daf)
        if which == "cells":
            daf.set_scalar("organism", "human").set_scalar("reference", "test")
        return daf

    return make


@needs_fixtures
def test_reader_records(build):
    cells, metacells = build("cells"), build("metacells")
    assert sorted(cells.axes_set()) == record("readers_axes_set_cells")["values"]
    type_dict = record("readers_axis_dict_metacells_type")
    assert metacells.axis_dict("type") == {key: value - 1 for key, value in zip(type_dict["keys"],
                                                                                 type_dict["values"], strict=True)}
    assert metacells.axis_entries("type", [2, -1], allow_empty=True).tolist() == record(
        "readers_axis_entries_allow_empty")["values"]
    assert (metacells.axis_indices("type", ["MPP", ""], allow_empty=True) + 1).tolist() == record(
        "readers_axis_indices_allow_empty")["values"]
    assert cells.has_axis("metacell") == record("readers_has_axis_cells_metacell")["value"]
    assert metacells.has_axis("metacell") == record("readers_has_axis_metacells_metacell")["value"]
    assert cells.has_scalar("organism") == record("readers_has_scalar_cells_organism")["value"]
    assert metacells.has_scalar("organism") == record("readers_has_scalar_metacells_organism")["value"]
    assert cells.has_vector("cell", "type") == record("readers_has_vector_cells_cell_type")["value"]
    assert metacells.has_vector("metacell", "type") == record("readers_has_vector_metacells_metacell_type")["value"]
    assert sorted(cells.matrices_set("gene", "cell")) == record("readers_matrices_set_cells_gene_cell")["values"]
    fraction = record("readers_get_matrix_metacells_gene_metacell_fraction")
    matrix = metacells.get_matrix("gene", "metacell", "fraction")
    assert matrix.shape == (fraction["rows"], fraction["cols"]) and matrix.dtype == np.float32
    assert metacells.axis_vector("metacell").tolist() == fraction["col_names"]
    np.testing.assert_allclose(matrix[:8, :].reshape(-1, order="F"), fraction["head"], rtol=1e-6)
    assert float(matrix.sum()) == pytest.approx(fraction["checksum"], rel=1e-6)


@needs_fixtures
def test_version_counter_records(build, backend):
    if not backend.rewrites:
        pytest.skip(f"the records overwrite and delete, which the backend: {backend} refuses")
    metacells = build("metacells")
    axis = record("readers_axis_version_counter_type")
    assert metacells.axis_version_counter("type") == axis["before"]
    metacells.delete_axis("type").add_axis("type", ["Foo", "Bar", "Baz"])
    assert metacells.axis_version_counter("type") == axis["after"]
    metacells = build("metacells")
    vector = record("readers_vector_version_counter_color")
    assert metacells.vector_version_counter("type", "color") == vector["before"]
    metacells.set_vector("type", "color", [str(index) for index in range(1, 5)], overwrite=True)
    assert metacells.vector_version_counter("type", "color") == vector["after"]
    matrix = record("readers_matrix_version_counter_fraction")
    assert metacells.matrix_version_counter("gene", "metacell", "fraction") == matrix["before"]
    metacells.set_matrix("gene", "metacell", "fraction", np.random.default_rng(1).random((683, 7), np.float32),
                         overwrite=True)
    assert metacells.matrix_version_counter("gene", "metacell", "fraction") == matrix["after"]


@needs_fixtures
def test_writer_records(build, backend):
    if not backend.rewrites:
        pytest.skip(f"the records overwrite and delete, which the backend: {backend} refuses")
    cells, metacells = build("cells"), build("metacells")
    scalar = record("writers_set_scalar_overwrite")
    cells.set_scalar("version", float(scalar["first"]))
    assert cells.get_scalar("version") == scalar["first"]
    cells.set_scalar("version", float(scalar["second"]), overwrite=True)
    assert cells.get_scalar("version") == scalar["second"]
    for name, before_after, action in [
        ("writers_add_axis_block", lambda: cells.has_axis("block"), lambda: cells.add_axis("block", ["B1", "B2"])),
        ("writers_delete_scalar_organism", lambda: cells.has_scalar("organism"),
         lambda: cells.delete_scalar("organism")),
        ("writers_delete_vector_color", lambda: metacells.has_vector("type", "color"),
         lambda: metacells.delete_vector("type", "color")),
        ("writers_delete_axis_type", lambda: metacells.has_axis("type"), lambda: metacells.delete_axis("type")),
    ]:
        expected = record(name)
        assert before_after() == expected["before"], name
        action()
        assert before_after() == expected["after"], name
    metacells = build("metacells")
    mebemp = record("writers_set_vector_is_mebemp")
    stages = [metacells.has_vector("type", "is_mebemp")]
    metacells.set_vector("type", "is_mebemp", [True, True, False, False])
    stages.append(metacells.has_vector("type", "is_mebemp"))
    metacells.set_vector("type", "is_mebemp", mebemp["final"], overwrite=True)
    stages.append(metacells.has_vector("type", "is_mebemp"))
    assert stages == mebemp["stages"]
    assert metacells.get_vector("type", "is_mebemp").tolist() == mebemp["final"]


@needs_fixtures
def test_matrix_writer_records(build, backend):
    if not backend.rewrites:
        pytest.skip(f"the records overwrite and delete, which the backend: {backend} refuses")
    metacells = build("metacells")
    confidence = record("writers_set_matrix_confidence")

    def stage() -> list[bool]:
        return [metacells.has_matrix("gene", "metacell", "confidence"),
                metacells.has_matrix("gene", "metacell", "confidence", relayout=False),
                metacells.has_matrix("metacell", "gene", "confidence", relayout=False)]

    assert stage() == confidence["stage0"]
    metacells.set_matrix("metacell", "gene", "confidence", np.zeros((7, 683), np.float32), relayout=False)
    assert stage() == confidence["stage1"]
    metacells.relayout_matrix("metacell", "gene", "confidence")
    assert stage() == confidence["stage2"]

    cells = build("cells")
    umis = record("writers_delete_matrix_UMIs")

    def umis_stage() -> list[bool]:
        return [cells.has_matrix("gene", "cell", "UMIs"), cells.has_matrix("gene", "cell", "UMIs", relayout=False),
                cells.has_matrix("cell", "gene", "UMIs", relayout=False)]

    assert umis_stage() == umis["stage0"]
    cells.delete_matrix("gene", "cell", "UMIs", relayout=False)
    assert umis_stage() == umis["stage1"]
    cells.delete_matrix("gene", "cell", "UMIs")
    assert umis_stage() == umis["stage2"]
