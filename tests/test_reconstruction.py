"""Reconstructing implicit axes (Julia's ``reconstruction.jl``) on MemoryDaf and H5df: Julia's results and messages,
what pydaf refuses before writing anything, and a large axis."""

from __future__ import annotations

import doctest
import time
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.composition.reconstruction import reconstruct_axis


@pytest.fixture(params=["memory", "h5df"])
def new_daf(request, tmp_path):
    def make(name: str = "memory!") -> pydaf.DafWriter:
        if request.param == "memory":
            return pydaf.MemoryDaf(name=name)
        return pydaf.H5df(tmp_path / f"{len(list(tmp_path.iterdir()))}.h5df", "w", name=name)

    return make


def julia_setup(daf: pydaf.DafWriter, batch: list) -> pydaf.DafWriter:
    """The common setup of test/reconstruction.jl."""
    daf.add_axis("cell", ["A", "B", "C", "D"])
    daf.set_vector("cell", "age", [1, 1, 2, 3]).set_vector("cell", "score", [0.0, 0.5, 1.0, 2.0])
    return daf.set_vector("cell", "batch", batch)


JULIA_DESCRIPTION = """name: memory!
type: {type}
axes:
  batch: {n_batches} entries
  cell: 4 entries
vectors:
  batch:
    age: {n_batches} x Int64 (Dense)
  cell:
    batch: 4 x Str (Dense)
    score: 4 x Float64 (Dense)
"""


def expected_description(daf: pydaf.DafReader, n_batches: int) -> str:
    # (The records name MemoryDaf; on H5df the same text with its type, root and mode, which the parity run skips.)
    text = JULIA_DESCRIPTION.format(type=type(daf).__name__, n_batches=n_batches)
    if isinstance(daf, pydaf.H5df):
        root = f"root: HDF5.File: (read-write) {daf.complete_path()}\nmode: w\n"
        text = text.replace("type: H5df\n", f"type: H5df\n{root}")
    return text


def snapshot(daf: pydaf.DafReader) -> dict:
    return {axis: (daf.axis_vector(axis).tolist(), {name: daf.get_vector(axis, name).tolist()
                                                   for name in sorted(daf.vectors_set(axis))})
            for axis in sorted(daf.axes_set())}


def test_julia_default(new_daf):
    daf = julia_setup(new_daf(), ["X", "X", "Y", ""])
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch")
    assert results == {"age": 3} and isinstance(results["age"], np.int64)
    assert daf.description() == expected_description(daf, 2)
    assert daf.axis_vector("batch").tolist() == ["X", "Y"]
    assert daf.get_vector("batch", "age").tolist() == [1, 2]
    assert daf.get_vector("cell", "batch").tolist() == ["X", "X", "Y", ""]


def test_julia_integer(new_daf):
    daf = julia_setup(new_daf(), [1, 1, 2, 0])
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", empty_implicit=0)
    assert results == {"age": 3}
    assert daf.description() == expected_description(daf, 2)
    assert daf.get_vector("cell", "batch").tolist() == ["1", "1", "2", ""]


def test_julia_manual_default(new_daf):
    daf = julia_setup(new_daf(), ["X", "X", "Y", ""])
    daf.add_axis("batch", ["X", "Y", "Z"])
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", properties_defaults={"age": 4})
    assert set(results) == {"age"} and results["age"] == 3
    assert daf.description() == expected_description(daf, 3)
    assert daf.get_vector("batch", "age").tolist() == [1, 2, 4]


@pytest.mark.parametrize(("batch_axis", "kwargs", "error", "message"), [
    (None, {"implicit_properties": {"age", "score"}}, pydaf.DafValueError,
     "inconsistent values: 0.5 != 0.0\nof the property: score\nfor the same implicit axis value: X\nof the axis: "
     "cell\nfor the reconstructed axis: batch\nin the daf data: memory!"),
    (["X", "Z"], {}, pydaf.DafMissingError,
     "missing used entry: Y\nfrom the existing reconstructed axis: batch\nin the daf data: memory!"),
    (["X", "Y", "Z"], {}, pydaf.DafMissingError,
     "no default value specified for the unused entry: Z\nof the reconstructed property: age\nin the daf data: "
     "memory!"),
])
def test_julia_errors_write_nothing(new_daf, batch_axis, kwargs, error, message):
    daf = julia_setup(new_daf(), ["X", "X", "Y", ""])
    if batch_axis is not None:
        daf.add_axis("batch", batch_axis)
    before = snapshot(daf)
    with pytest.raises(error) as caught:
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", **kwargs)
    assert str(caught.value).startswith(message)
    assert snapshot(daf) == before


def test_numbers_sort_as_numbers_and_print_as_julia(new_daf):
    daf = new_daf().add_axis("cell", ["a", "b", "c", "d", "e"])
    daf.set_vector("cell", "size", [10.0, 9.0, 1e6, 9.0, 10.0]).set_vector("cell", "flag", [1, 2, 3, 2, 1])
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="size", rename_axis="bin")
    assert daf.axis_vector("bin").tolist() == ["9.0", "10.0", "1.0e6"]  # (numeric order; Julia's string(1e6))
    assert daf.get_vector("bin", "flag").tolist() == [2, 1, 3]
    assert results == {"flag": None}  # (no entry without a value)
    assert daf.get_vector("cell", "size").tolist() == ["10.0", "9.0", "1.0e6", "9.0", "10.0"]
    assert not daf.has_axis("size") and daf.vectors_set("cell") == {"size"}


def test_string_empty_implicit_and_skipped(new_daf):
    daf = new_daf().add_axis("cell", ["a", "b", "c", "d"])
    daf.set_vector("cell", "type", ["T", "none", "B", "T"]).set_vector("cell", "color", ["red", "grey", "blue", "red"])
    daf.set_vector("cell", "tissue", ["x", "y", "z", "x"])
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="type", empty_implicit="none",
                               skipped_properties=["tissue"])
    assert results == {"color": "grey"}
    assert daf.axis_vector("type").tolist() == ["B", "T"]
    assert daf.get_vector("type", "color").tolist() == ["blue", "red"]
    assert daf.get_vector("cell", "type").tolist() == ["T", "", "B", "T"]
    assert daf.vectors_set("cell") == {"type", "tissue"}


def test_inconsistent_properties_stay_when_not_explicit(new_daf):
    daf = new_daf().add_axis("cell", ["a", "b", "c"])
    daf.set_vector("cell", "type", ["T", "T", "B"]).set_vector("cell", "umis", [1.5, float("nan"), 2.0])
    daf.set_vector("cell", "nans", [float("nan"), float("nan"), float("nan")])
    daf.set_vector("cell", "one_nan", [1.0, 1.0, float("nan")])
    assert reconstruct_axis(daf, existing_axis="cell", implicit_axis="type") == {"one_nan": None}
    # (NaN != NaN, as in Julia: a group of two NaNs is inconsistent; a lone NaN is its group's value.)
    assert daf.vectors_set("cell") == {"type", "umis", "nans"}
    assert np.isnan(daf.get_vector("type", "one_nan")).tolist() == [True, False]


def test_refusals_before_writing(new_daf):
    daf = julia_setup(new_daf(), ["X", "X", "Y", ""])
    before = snapshot(daf)
    with pytest.raises(pydaf.DafValueError, match="the implicit axis: batch\nis also in the implicit_properties"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", implicit_properties={"batch", "age"})
    with pytest.raises(pydaf.DafMissingError, match=r"missing vector: agge\nof the axis: cell\nin the "
                                                    r"implicit_properties(.|\n)*did you mean: age"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", implicit_properties={"agge"})
    with pytest.raises(pydaf.DafTypeError, match="the string 'age'"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", implicit_properties="age")
    with pytest.raises(pydaf.DafTypeError, match="invalid property default: None"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", properties_defaults={"age": None})
    with pytest.raises(pydaf.DafMissingError, match="missing vector: batches"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batches")
    daf.add_axis("batch", ["X", "Y", "Z"])
    before = snapshot(daf)
    with pytest.raises(pydaf.DafInexactError):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", properties_defaults={"age": 4.5})
    with pytest.raises(pydaf.DafTypeError, match="invalid default: old\nof the reconstructed property: age"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", properties_defaults={"age": "old"})
    daf.set_vector("batch", "age", [7, 8, 9])
    before = snapshot(daf)
    with pytest.raises(pydaf.DafExistsError, match="existing vector: age\nof the reconstructed axis: batch"):
        reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch", properties_defaults={"age": 4})
    assert snapshot(daf) == before


def test_read_only_is_refused(new_daf):
    daf = julia_setup(new_daf(), ["X", "X", "Y", ""])
    with pytest.raises(pydaf.DafReadOnlyError, match="can't reconstruct_axis: the daf data is read-only"):
        reconstruct_axis(daf.read_only(), existing_axis="cell", implicit_axis="batch")
    assert not daf.has_axis("batch")


def test_defaults_convert_exactly(new_daf):
    daf = julia_setup(new_daf(), ["X", "X", "Y", ""])
    daf.add_axis("batch", ["Z", "Y", "X"])
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch",
                               properties_defaults=[("age", 4.0), ("score", 0)], skipped_properties={"score"})
    assert results == {"age": 3}
    age = daf.get_vector("batch", "age")
    assert age.dtype == np.int64 and age.tolist() == [4, 2, 1]  # (the existing axis' order)


def test_large_axis(new_daf):
    n_cells, n_batches = 1_000_000, 2_000
    rng = np.random.default_rng(5)
    batch_of_cell = rng.integers(0, n_batches, size=n_cells)
    names = np.array([f"B{index:04d}" for index in range(n_batches)], dtype=object)
    daf = new_daf("large!").add_axis("cell", [f"C{index}" for index in range(n_cells)])
    daf.set_vector("cell", "batch", names[batch_of_cell])
    daf.set_vector("cell", "donor_age", (batch_of_cell % 90).astype(np.int32))
    daf.set_vector("cell", "lab", np.array(["lab" + str(index % 7) for index in range(n_batches)],
                                           dtype=object)[batch_of_cell])
    daf.set_vector("cell", "umis", rng.random(n_cells))
    start = time.perf_counter()
    results = reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch")
    elapsed = time.perf_counter() - start
    assert results == {"donor_age": None, "lab": None}
    assert daf.axis_vector("batch").tolist() == names.tolist()
    assert daf.get_vector("batch", "donor_age").tolist() == (np.arange(n_batches) % 90).tolist()
    assert daf.get_vector("batch", "donor_age").dtype == np.int32
    assert daf.vectors_set("cell") == {"batch", "umis"}
    assert elapsed < 30, f"reconstruct_axis of 1M cells took {elapsed:.1f} s"


def test_docs_page_examples_run():
    page = Path(__file__).resolve().parent.parent / "docs" / "reconstruction.md"
    failures, attempted = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert attempted >= 10 and failures == 0
