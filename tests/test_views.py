"""Views (``pydaf.viewer``): the conformance suite read through a view, zero-copy of mapped data, laziness, caching and
invalidation when the base changes, version counters, concurrency, and the rules and messages Julia's records do not
cover (Julia's ``test/views.jl`` records run in ``test_composition_parity.py``)."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.queries import Axis, LookupVector
from pydaf.testing import DafBackend, DafConformance

WRITES_AFTER_REOPEN = "writes through the reopened data set, and a view is read-only"


class _ViewOfMemory(DafBackend):
    """Data written to a MemoryDaf, read back through a view of all of it."""

    name = "view-of-memory"

    def new(self, directory, name: str) -> pydaf.DafWriter:
        return pydaf.MemoryDaf(name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        view = pydaf.viewer(daf, name="view!", axes=[pydaf.VIEW_ALL_AXES], data=pydaf.VIEW_ALL_DATA)
        assert isinstance(view, pydaf.DafView)
        return view


class _ViewOfH5df(_ViewOfMemory):
    """Data written to a mapped H5df file, read back through a view of all of it."""

    name = "view-of-h5df"
    maps_files = True

    def new(self, directory, name: str) -> pydaf.DafWriter:
        return pydaf.H5df(directory / f"{name.rstrip('!')}.h5df", "w", name=name)


class TestViewOfMemoryDaf(DafConformance):
    """Everything written to a data set reads back the same through a view of all of it."""

    backend = _ViewOfMemory()

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_delete_axis_deletes_dependents(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_reorder_axes_permutes_every_property(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_reorder_interrupted_at_each_step_is_reset(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_scalar_overwrite_and_delete(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_vector_overwrite_delete_and_counters(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_c_order_and_dataframe_inputs(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_matrix_overwrite_delete_and_counters(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_relayout(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_large_sparse_relayout_uses_kernel(self):
        pass

    @pytest.mark.skip(reason=WRITES_AFTER_REOPEN)
    def test_square_matrix_stored_once(self):
        pass


class TestViewOfH5df(TestViewOfMemoryDaf):
    """The same through a view of a memory-mapped H5df file."""

    backend = _ViewOfH5df()


def _cells(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    daf.add_axis("cell", ["A", "B", "C", "D", "E"]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_vector("cell", "age", np.array([1, 5, 7, 9, 2], dtype=np.int32))
    daf.set_vector("cell", "batch", ["U", "V", "V", "V", "W"])
    daf.set_vector("cell", "weight", pydaf.SparseVector(5, np.array([2, 4]), np.array([0.5, 1.5])))
    daf.set_matrix("gene", "cell", "UMIs", np.arange(15, dtype=np.float32).reshape(3, 5), relayout=False)
    daf.set_matrix("gene", "cell", "sparse", sp.csc_matrix(np.array([[0, 1, 0, 2, 0], [3, 0, 0, 4, 5],
                                                                      [0, 0, 6, 0, 0]], dtype=np.int16)),
                   relayout=False)
    return daf


@pytest.fixture
def mapped(tmp_path) -> pydaf.DafReader:
    _cells(pydaf.H5df(tmp_path / "cells.h5df", "w", name="cells!"))
    return pydaf.H5df(tmp_path / "cells.h5df", "r", name="cells!")


# Zero-copy.


def test_plain_lookups_of_whole_axes_are_the_bases_stored_arrays(mapped):
    view = pydaf.viewer(mapped, name="all!")
    for name in ("age", "batch"):
        assert view.get_vector("cell", name) is mapped.get_vector("cell", name)
    assert view.get_stored_vector("cell", "weight").nzval is mapped.get_stored_vector("cell", "weight").nzval
    umis = view.get_matrix("gene", "cell", "UMIs")
    assert umis is mapped.get_matrix("gene", "cell", "UMIs")
    assert not umis.flags.writeable and umis.flags.f_contiguous
    sparse = view.get_stored_matrix("gene", "cell", "sparse")
    assert sparse is mapped.get_stored_matrix("gene", "cell", "sparse")
    assert view.axis_vector("cell") is mapped.axis_vector("cell")


def test_a_contiguous_range_of_an_axis_is_a_slice_of_the_mapped_data(mapped):
    view = pydaf.viewer(mapped, name="middle!", axes=[pydaf.VIEW_ALL_AXES, ("cell", "@ cell [ age > 4 ]")])
    assert view.axis_vector("cell").tolist() == ["B", "C", "D"]
    stored = mapped.get_matrix("gene", "cell", "UMIs")
    umis = view.get_matrix("gene", "cell", "UMIs")
    np.testing.assert_array_equal(umis, stored[:, 1:4])
    assert np.shares_memory(umis, stored) and umis.flags.f_contiguous and not umis.flags.writeable
    age = view.get_vector("cell", "age")
    assert np.shares_memory(age, mapped.get_vector("cell", "age")) and age.tolist() == [5, 7, 9]
    sparse = view.get_stored_matrix("gene", "cell", "sparse")
    base_sparse = mapped.get_stored_matrix("gene", "cell", "sparse")
    assert np.shares_memory(sparse.nzval, base_sparse.nzval) and np.shares_memory(sparse.rowval, base_sparse.rowval)
    np.testing.assert_array_equal(sparse.to_dense(), base_sparse.to_dense()[:, 1:4])
    weight = view.get_stored_vector("cell", "weight")
    assert isinstance(weight, pydaf.SparseVector) and weight.to_dense().tolist() == [0.5, 0.0, 1.5]
    # The other layout needs a relayout, which the view computes (and lists) like any data set.
    np.testing.assert_array_equal(view.get_matrix("cell", "gene", "UMIs"), stored[:, 1:4].T)


def test_other_subsets_are_copies_with_the_right_values(mapped):
    view = pydaf.viewer(mapped, name="sparse!", axes=[pydaf.VIEW_ALL_AXES, ("cell", "@ cell [ batch != V ]"),
                                                      ("gene", "@ gene [ name != Y ]")])
    assert view.axis_vector("cell").tolist() == ["A", "E"]
    umis = view.get_matrix("gene", "cell", "UMIs")
    np.testing.assert_array_equal(umis, np.array([[0, 4], [10, 14]], dtype=np.float32))
    assert not np.shares_memory(umis, mapped.get_matrix("gene", "cell", "UMIs")) and not umis.flags.writeable
    np.testing.assert_array_equal(view.get_matrix("gene", "cell", "sparse").toarray(), [[0, 0], [0, 0]])
    np.testing.assert_array_equal(view.get_matrix("cell", "gene", "sparse").toarray(), [[0, 0], [0, 0]])
    assert view.get_vector("cell", "weight").tolist() == [0.0, 0.0]


def test_the_engine_and_the_plain_path_agree(mapped):
    """A plain lookup (served by slicing the stored data) gives what the same query computes on the base."""
    for axis_query in ("@ cell", "@ cell [ age > 4 ]", "@ cell [ batch = V | age < 2 ]", "@ cell [ age > 100 ]"):
        view = pydaf.viewer(mapped, axes=[pydaf.VIEW_ALL_AXES, ("cell", axis_query)])
        for name in ("age", "batch", "weight"):
            expected = mapped.get_np_query(f"{axis_query} : {name}", cache=False)
            np.testing.assert_array_equal(view.get_vector("cell", name), expected)
        for name in ("UMIs", "sparse"):
            expected = mapped.get_np_query(f"@ gene {axis_query} :: {name}", cache=False)
            actual = view.get_matrix("gene", "cell", name)
            np.testing.assert_array_equal(actual.toarray() if sp.issparse(actual) else actual,
                                          expected.toarray() if sp.issparse(expected) else expected)


# Laziness, caching and invalidation.


def test_creating_a_view_computes_nothing():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, name="lazy!", data=[(("cell", "bad"), ": missing % Abs"),
                                                 ("total", "@ cell @ gene :: UMIs >> Sum")])
    assert len(view.cache) == 0
    assert not view.has_vector("cell", "bad")
    assert view.get_scalar("total") == 105
    assert [key.text() for key, _ in view.cache.entries()] == ["query[scalar[total] = @ cell @ gene :: UMIs >> Sum]"]


def test_computed_data_is_cached_until_what_it_read_changes():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, name="computed!", axes=[pydaf.VIEW_ALL_AXES, ("cell", "@ cell [ age > 4 ]")],
                        data=[(("cell", "log_age"), ": age % Log base 2"), (("cell", "batch"), "=")])
    log_age = view.get_vector("cell", "log_age")
    np.testing.assert_allclose(log_age, np.log2([5, 7, 9]))
    counter = view.vector_version_counter("cell", "log_age")
    assert view.get_vector("cell", "log_age") is log_age

    daf.set_vector("cell", "unrelated", [0, 0, 0, 0, 0])  # not read by the view's queries: kept
    assert view.get_vector("cell", "log_age") is log_age
    assert view.vector_version_counter("cell", "log_age") == counter

    daf.set_vector("cell", "age", np.array([1, 2, 8, 16, 32], dtype=np.int32), overwrite=True)  # read: recomputed
    assert view.vector_version_counter("cell", "log_age") > counter
    assert view.axis_vector("cell").tolist() == ["C", "D", "E"]
    np.testing.assert_allclose(view.get_vector("cell", "log_age"), [3, 4, 5])
    assert view.get_vector("cell", "batch").tolist() == ["V", "V", "W"]

    daf.delete_vector("cell", "age")
    assert not view.has_axis("cell") and view.axes_set() == {"gene"}


def test_version_counters_only_grow_and_follow_the_base():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, name="counters!", axes=[pydaf.VIEW_ALL_AXES, ("cell", "@ cell [ age > 4 ]")])
    view.get_matrix("gene", "cell", "UMIs")
    seen = [view.matrix_version_counter("cell", "gene", "UMIs")]
    for step in range(3):
        daf.set_matrix("gene", "cell", "UMIs", np.full((3, 5), step, dtype=np.float32), overwrite=True,
                       relayout=False)
        assert np.all(view.get_matrix("gene", "cell", "UMIs") == step)
        seen.append(view.matrix_version_counter("gene", "cell", "UMIs"))
        daf.set_vector("cell", "age", np.array([9, 9, 9, 9, 9 - step], dtype=np.int32), overwrite=True)
        seen.append(view.matrix_version_counter("gene", "cell", "UMIs"))
    assert all(later > earlier for earlier, later in itertools.pairwise(seen)), seen


def test_a_realized_relayout_is_listed_and_forgotten_when_the_base_changes():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, name="relayout!", data=pydaf.VIEW_ALL_DATA)
    assert view.matrices_set("cell", "gene", relayout=False) == set()
    assert view.get_matrix("cell", "gene", "UMIs").shape == (5, 3)
    assert view.matrices_set("cell", "gene", relayout=False) == {"UMIs"}
    assert view.has_matrix("cell", "gene", "UMIs", relayout=False)
    daf.set_matrix("gene", "cell", "UMIs", np.ones((3, 5), dtype=np.float32), overwrite=True, relayout=False)
    assert view.matrices_set("cell", "gene", relayout=False) == set()
    np.testing.assert_array_equal(view.get_matrix("cell", "gene", "UMIs"), np.ones((5, 3)))
    assert view.matrices_set("cell", "gene", relayout=False) == {"UMIs"}


def test_concurrent_reads_see_either_the_old_or_the_new_base():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, name="threads!", data=[(("cell", "double"), ": age % Convert type Float64")])
    failures: list[str] = []
    stop = threading.Event()

    def read() -> None:
        counter = -1
        while not stop.is_set():
            values = view.get_vector("cell", "double")
            if len(set(values.tolist())) != 1:
                failures.append(repr(values))
            now = view.vector_version_counter("cell", "double")
            if now < counter:
                failures.append(f"counter went from {counter} to {now}")
            counter = now

    daf.set_vector("cell", "age", np.zeros(5, dtype=np.int32), overwrite=True)
    readers = [threading.Thread(target=read) for _ in range(4)]
    for thread in readers:
        thread.start()
    for step in range(200):
        daf.set_vector("cell", "age", np.full(5, step, dtype=np.int32), overwrite=True)
    stop.set()
    for thread in readers:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a reader is stuck (deadlock)"
    assert failures == []
    assert view.get_vector("cell", "double").tolist() == [199.0] * 5


# Rules.


def test_renamed_axes_and_placeholders():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    umis = np.arange(15, dtype=np.float32).reshape(3, 5)
    view = pydaf.viewer(daf, name="renamed!", axes={"obs": "@ cell [ batch = V ]", "var": "gene"},
                        data={pydaf.ALL_SCALARS: None, ("obs", "age"): "=",
                              ("obs", "total"): "@ __axis__ @ gene :: UMIs >| Sum",
                              ("var", "obs", "X"): ":: UMIs",
                              ("obs", "var", "scaled"): "@ __rows_axis__ @ __columns_axis__ :: UMIs % Log base 2 eps 1",
                              ("var", "mean"): "@ __axis__ @ cell :: UMIs >| Mean"})
    assert view.axes_set() == {"obs", "var"}
    assert view.axis_vector("obs").tolist() == ["B", "C", "D"]
    assert view.get_vector("obs", "age").tolist() == [5, 7, 9]
    assert view.get_vector("obs", "total").tolist() == [18.0, 21.0, 24.0]
    np.testing.assert_allclose(view.get_vector("var", "mean"), umis.mean(axis=1))
    np.testing.assert_array_equal(view.get_matrix("var", "obs", "X"), umis[:, 1:4])
    # In the obs,var layout the query would need a relayout of the base's UMIs: only var,obs is exposed (as Julia).
    assert view.matrices_set("var", "obs", relayout=False) == {"X", "scaled"}
    assert view.matrices_set("obs", "var", relayout=False) == set()
    np.testing.assert_allclose(view.get_matrix("var", "obs", "scaled"), np.log2(umis[:, 1:4] + 1))
    np.testing.assert_allclose(view.get_matrix("obs", "var", "scaled"), np.log2(umis[:, 1:4] + 1).T)


def test_query_objects_dicts_and_names_that_need_escaping():
    daf = _cells(pydaf.MemoryDaf(name="cells!")).set_vector("cell", "batch.old", ["a", "b", "c", "d", "e"])
    view = pydaf.viewer(daf, name="objects!", axes={"cell": Axis("cell")},
                        data={("cell", "batch.old"): "=", ("cell", "years"): LookupVector("age")})
    assert view.vectors_set("cell") == {"batch.old", "years"}
    assert view.get_vector("cell", "batch.old").tolist() == ["a", "b", "c", "d", "e"]
    assert view.get_vector("cell", "years").tolist() == [1, 5, 7, 9, 2]


def test_last_pair_wins():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, axes=[("cell", None), pydaf.VIEW_ALL_AXES],
                        data=[(("cell", "age"), ": batch"), pydaf.VIEW_ALL_VECTORS, (("*", "batch"), None)])
    assert view.axes_set() == {"cell", "gene"}
    assert view.vectors_set("cell") == {"age", "weight"}
    assert view.get_vector("cell", "age").dtype == np.int32


def test_tensors_over_a_masked_main_axis():
    daf = pydaf.MemoryDaf(name="tensors!").add_axis("batch", ["U", "V", "W"]).add_axis("cell", ["X", "Y"])
    daf.add_axis("gene", ["A", "B"])
    for batch in ("U", "V", "W"):
        daf.set_matrix("gene", "cell", f"{batch}_is_high", np.eye(2, dtype=bool), relayout=False)
    axes = [pydaf.VIEW_ALL_AXES, ("batch", "@ batch [ name != V ]")]
    tensor = ("batch", "gene", "cell", "is_high")
    view = pydaf.viewer(daf, name="masked!", axes=axes, data=[(tensor, "=")])
    assert view.matrices_set("gene", "cell", tensors=False) == {"U_is_high", "W_is_high"}
    assert view.matrices_set("gene", "cell") == {"/batch/_is_high"}
    assert not view.has_matrix("gene", "cell", "V_is_high")
    view = pydaf.viewer(daf, name="others!", axes=axes, data=[pydaf.VIEW_ALL_MATRICES, (tensor, None)])
    assert view.matrices_set("gene", "cell") == {"V_is_high"}
    # A tensor key wins over a matrix key, wherever it is listed.
    view = pydaf.viewer(daf, name="first!", axes=axes, data=[(tensor, None), (("cell", "gene", "U_is_high"), "=")])
    assert not view.has_matrix("gene", "cell", "U_is_high") and view.matrices_set("gene", "cell") == set()


def test_views_of_views_and_chains_of_views():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    inner = pydaf.viewer(daf, name="inner!", axes=[pydaf.VIEW_ALL_AXES, ("cell", "@ cell [ age > 4 ]")])
    outer = pydaf.viewer(inner, name="outer!", axes=[("cell", "@ cell [ batch = V ]")],
                         data=[(("cell", "age"), "=")])
    assert pydaf.brief(outer) == "View View MemoryDaf outer!" and outer.daf is inner
    assert outer.get_vector("cell", "age").tolist() == [5, 7, 9]
    extra = pydaf.MemoryDaf(name="extra!").add_axis("cell", ["B", "C", "D"]).set_vector("cell", "score", [1, 2, 3])
    chain = pydaf.chain_reader([inner, extra], name="chain!")
    assert chain.description().split("\n")[2:5] == ["chain:", "- View MemoryDaf inner!", "- MemoryDaf extra!"]
    assert chain.get_vector("cell", "age").tolist() == [5, 7, 9]
    assert pydaf.read_only(inner) is inner


def test_view_of_a_read_only_view_and_default_name():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    assert pydaf.viewer(daf) is not None and isinstance(pydaf.viewer(daf), pydaf.DafReadOnly)
    view = pydaf.viewer(daf.read_only(), data=[pydaf.VIEW_ALL_SCALARS])
    assert view.daf is daf and view.name.startswith("cells!.view")


def test_h5df_descriptions(tmp_path):
    """The descriptions of Julia's records that name the MemoryDaf type, on a mapped H5df base."""
    daf = pydaf.H5df(tmp_path / "tensors.h5df", "w", name="memory!")
    daf.add_axis("cell", ["X", "Y"]).add_axis("gene", ["A", "B", "C"]).add_axis("batch", ["U", "V"])
    daf.set_matrix("gene", "cell", "U_is_high", np.array([[1, 0], [0, 1], [1, 0]], dtype=bool), relayout=False)
    daf.set_matrix("gene", "cell", "V_is_high", np.array([[1, 1], [0, 0], [1, 0]], dtype=bool), relayout=False)
    view = pydaf.viewer(daf, name="view!", axes=[pydaf.VIEW_ALL_AXES],
                        data=[(("batch", "cell", "gene", "is_high"), "=")])
    assert pydaf.brief(view) == "View H5df view!"
    assert view.description() == "\n".join([
        "name: view!", "type: View", "base: H5df memory!", "axes:", "  batch: 2 entries", "  cell: 2 entries",
        "  gene: 3 entries", "tensors:", "  batch:", "    gene,cell:",
        "      is_high: 2 X 3 x 2 x Bool in Columns (Dense; 6 (50%) true)", ""])


# Errors.


@pytest.mark.parametrize(("axes", "data", "message"), [
    ([("cell",)], None, "invalid ViewAxis: ('cell',)"),
    ([(("cell",), "=")], None, "invalid ViewAxis: (('cell',), '=')"),
    (None, [(("cell", "age"), 3)], "invalid ViewDatum: (('cell', 'age'), 3)"),
    (None, [(("a", "b", "c", "d", "e"), "=")], "invalid ViewDatum"),
    (None, [(("batch", "cell", "gene", "x"), ": y")], "unsupported tensor query: : y\nquery for tensor must be one "
                                                     "of: \"=\", nothing\nfor the matrix: x\nfor the main axis: batch"),
])
def test_invalid_parameters(axes, data, message):
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    with pytest.raises(pydaf.DafValueError) as error:
        pydaf.viewer(daf, name="bad!", axes=axes, data=data)
    assert message in str(error.value) and "for the view: bad!\nof the daf data: cells!" in str(error.value)


def test_a_hidden_tensor_main_axis():
    daf = _cells(pydaf.MemoryDaf(name="cells!")).add_axis("batch", ["U"])
    view = pydaf.viewer(daf, name="hidden!", axes=[pydaf.VIEW_ALL_AXES, ("batch", None)],
                        data=[(("batch", "cell", "gene", "is_high"), "=")])
    with pytest.raises(pydaf.DafValueError, match=r"^hidden tensor main axis: batch\nfor the matrix: is_high\n"):
        view.matrices_set("cell", "gene")


def test_a_full_query_of_another_axis_is_refused():
    daf = _cells(pydaf.MemoryDaf(name="cells!"))
    view = pydaf.viewer(daf, name="other!", data=[(("cell", "wrong"), "@ gene : name")])
    assert view.has_vector("cell", "wrong")
    with pytest.raises(pydaf.DafValueError, match=r"^the entries of the result of the query: @ gene : name\n"
                                                  r"are not the entries of the view axis\nfor the vector: wrong\n"):
        view.get_vector("cell", "wrong")


def test_a_matrix_query_with_its_own_axes_is_relaid_out_for_the_other_layout():
    """``("cell", "gene", "UMIs"): "@ obs @ var :: X"`` gives an obs x var result: the gene,cell layout is its
    relayout (it was evaluated as if it were gene x cell, and refused as entries that differ)."""
    base = pydaf.MemoryDaf(name="counts!").add_axis("obs", ["c1", "c2", "c3"]).add_axis("var", ["g1", "g2"])
    base.set_matrix("obs", "var", "X", np.array([[0, 2], [1, 0], [4, 4]], np.uint16))
    view = pydaf.viewer(base, axes=[("cell", "@ obs"), ("gene", "@ var")],
                        data=[(("cell", "gene", "UMIs"), "@ obs @ var :: X")])
    assert view.matrices_set("gene", "cell", relayout=False) == set()
    assert view.get_np_query("@ cell @ gene :: UMIs >| Sum").tolist() == [2, 1, 8]
    assert np.asarray(view.get_matrix("gene", "cell", "UMIs")).tolist() == [[0, 1, 4], [2, 0, 4]]
