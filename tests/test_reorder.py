"""reorder_axes / reset_reorder_axes as orchestrated across data sets (pydaf.core.reorder), on MemoryDaf: the
checks and refusals that come before any storage is touched, several data sets in one call, and cache invalidation.
The formats' own hooks are tested by the conformance suite and tests/test_reorder_<format>.py."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pytest

import pydaf


def _cells(name: str) -> pydaf.MemoryDaf:
    daf = pydaf.MemoryDaf(name=name).add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    return daf.set_vector("cell", "age", [1, 2, 3]).set_matrix("cell", "gene", "UMIs", np.arange(6).reshape(3, 2))


def test_non_leaves_are_refused_with_julias_message():
    chain = pydaf.chain_writer([pydaf.MemoryDaf(name="first!"), pydaf.MemoryDaf(name="second!")], name="chain!")
    with pytest.raises(pydaf.DafUnsupportedError, match="non-leaf type: WriteChain\nfor the daf data: chain!\n"
                                                        "given to reorder_axes!"):
        pydaf.reorder_axes(chain, {"cell": [0]})
    daf = _cells("cells!")
    for wrapper in (pydaf.read_only(daf), pydaf.viewer(daf)):
        with pytest.raises(pydaf.DafTypeError, match="not a writable daf data"):
            pydaf.reorder_axes(wrapper, {"cell": [0, 1, 2]})
    assert daf.axis_vector("cell").tolist() == ["A", "B", "C"]


@pytest.mark.parametrize(("permutation", "message"), [
    ([0, 1], "permutation length: 2\ndoes not match axis: cell\nlength: 3"),
    ([0, 0, 1], "missing position: 2"),
    ([0, 1, 3], "position out of range: 3"),
    ([0, 1, -1], "position out of range: -1"),
    ([0.0, 1.0, 2.0], "expected a vector of integer positions"),
    ([True, False, True], "expected a vector of integer positions"),
])
def test_invalid_permutations_are_refused(permutation, message):
    daf = _cells("cells!")
    with pytest.raises(pydaf.DafValueError, match=message):
        pydaf.reorder_axes(daf, {"cell": permutation})
    assert daf.get_vector("cell", "age").tolist() == [1, 2, 3] and not daf.format.format_has_reorder_lock()


def test_several_data_sets_in_one_call():
    first, second, other = _cells("first!"), _cells("second!"), pydaf.MemoryDaf(name="other!").add_axis("x", ["a"])
    pydaf.reorder_axes([first, second, other], {"cell": np.array([2, 1, 0], np.uint8)}, progress=False)
    for daf in (first, second):
        assert daf.axis_vector("cell").tolist() == ["C", "B", "A"]
        assert daf.get_matrix("gene", "cell", "UMIs").tolist() == [[4, 2, 0], [5, 3, 1]]
    assert other.axis_vector("x").tolist() == ["a"]


def test_data_sets_with_different_entries_are_refused():
    first, second = _cells("first!"), _cells("second!")
    second.add_axis("cell", ["A", "B", "D"], overwrite=True)
    # (in the order the data sets are locked: by path, then in an arbitrary fixed order, as Julia's objectid)
    with pytest.raises(pydaf.DafValueError, match=r"axis: cell entries differ\nbetween the daf data: (first|second)!\n"
                                                  r"and the daf data: (first|second)!"):
        pydaf.reorder_axes([first, second], {"cell": [2, 1, 0]})
    assert first.axis_vector("cell").tolist() == ["A", "B", "C"]


def test_an_axis_no_data_set_has_is_refused():
    with pytest.raises(pydaf.DafMissingError, match="axis: donor\ndoes not exist in any of the writers"):
        pydaf.reorder_axes(_cells("cells!"), {"donor": [0]})


def test_nothing_to_do():
    daf = _cells("cells!")
    pydaf.reorder_axes(daf, {})
    pydaf.reorder_axes([], {"cell": [0, 1, 2]})
    assert not pydaf.reset_reorder_axes(daf) and daf.axis_vector("cell").tolist() == ["A", "B", "C"]


def test_cached_results_and_queries_are_refreshed():
    daf = _cells("cells!")
    assert daf.get_query("@ cell : age").tolist() == [1, 2, 3]
    assert daf.get_matrix("gene", "cell", "UMIs").tolist() == [[0, 2, 4], [1, 3, 5]]  # (a cached relayout)
    assert daf.axis_dict("cell")["C"] == 2
    counters = (daf.axis_version_counter("cell"), daf.vector_version_counter("cell", "age"),
                daf.matrix_version_counter("cell", "gene", "UMIs"), daf.axis_version_counter("gene"))
    pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False)
    assert daf.get_query("@ cell : age").tolist() == [3, 1, 2]
    assert daf.get_matrix("gene", "cell", "UMIs").tolist() == [[4, 0, 2], [5, 1, 3]]
    assert daf.axis_dict("cell")["C"] == 0
    after = (daf.axis_version_counter("cell"), daf.vector_version_counter("cell", "age"),
             daf.matrix_version_counter("cell", "gene", "UMIs"), daf.axis_version_counter("gene"))
    assert [a > b for a, b in zip(after, counters, strict=True)] == [True, True, True, False]


def test_the_callers_arrays_are_not_written():
    """MemoryDaf keeps references to the arrays it is given: a reorder replaces them, never permutes them."""
    age = np.array([1, 2, 3])
    daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", age)
    pydaf.reorder_axes(daf, {"cell": [1, 2, 0]}, progress=False)
    assert age.tolist() == [1, 2, 3] and daf.get_vector("cell", "age").tolist() == [2, 3, 1]


def test_an_interrupted_reorder_must_be_reset_first():
    daf = _cells("cells!")
    with pytest.raises(pydaf.SimulatedCrash):
        pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False, _simulate_crash=1)
    with pytest.raises(pydaf.DafIncompleteError, match=r"(?s)interrupted reorder_axes.*reset_reorder_axes"):
        pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False)
    assert pydaf.reset_reorder_axes([daf]) and not pydaf.reset_reorder_axes(daf)
    assert daf.get_vector("cell", "age").tolist() == [1, 2, 3]
    assert daf.get_matrix("cell", "gene", "UMIs").tolist() == [[0, 1], [2, 3], [4, 5]]


def test_the_docs_page_runs():
    page = Path(__file__).parent.parent / "docs" / "reorder.md"
    failures, attempted = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failures == 0


def test_a_reorder_that_fails_part_way_is_rolled_back_at_once(monkeypatch):
    """A failure (not the testing hook, which stands for a kill) leaves the old order and no mark: a failed call
    loses nothing, and later reads never see a half permuted data set."""
    daf = _cells("cells!")
    import pydaf.formats.memory as memory

    def failing(*_: object) -> None:
        raise pydaf.DafStorageError("the disk is full")

    monkeypatch.setattr(memory, "permute_stored_matrix", failing)  # (after the vector and the axis were replaced)
    with pytest.raises(pydaf.DafStorageError, match="the disk is full"):
        pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False)
    assert daf.axis_vector("cell").tolist() == ["A", "B", "C"] and daf.get_vector("cell", "age").tolist() == [1, 2, 3]
    assert not daf.format.format_has_reorder_lock() and not pydaf.reset_reorder_axes(daf)
    monkeypatch.undo()
    pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False)
    assert daf.get_matrix("cell", "gene", "UMIs").tolist() == [[4, 5], [0, 1], [2, 3]]
