"""The query engine on every backend: result forms, zero-copy, caching and invalidation, builders, errors, frames.

Julia's recorded results are checked in ``test_query_parity.py``; these tests cover what the parity cases do not.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.core.brief import brief_scalar
from pydaf.core.cache import QueryCacheKey
from pydaf.errors import DafQueryError
from pydaf.julia_text import julia_float_text
from pydaf.queries import (
    Axis,
    GroupBy,
    IfMissing,
    IsGreater,
    LookupMatrix,
    LookupVector,
    QuerySequence,
    ReduceToColumn,
    is_axis_query,
    machine,
    parse_query,
    query_axis_name,
    query_result_dimensions,
)
from pydaf.queries import operations as operations_module
from pydaf.queries.operations import Mean, Sum
from pydaf.queries.state import Purpose, ScalarState
from pydaf.sparse import SparseMatrixCSC
from pydaf.testing import is_file_map


def fill(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    daf.set_scalar("organism", "human")
    daf.add_axis("cell", ["A", "B", "C", "D"])
    daf.add_axis("gene", ["X", "Y", "Z"])
    daf.add_axis("type", ["T1", "T2", "T3"])
    daf.set_vector("cell", "age", np.array([10, 20, 30, 40], dtype=np.int32))
    daf.set_vector("cell", "type", ["T1", "T2", "T1", ""])
    daf.set_vector("type", "color", ["red", "green", "blue"])
    umis = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 3], [4, 5, 0]], dtype=np.uint16)
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(umis), relayout=True)
    daf.set_matrix("cell", "gene", "score", umis.astype(np.float32) / 2, relayout=False)
    return daf


@pytest.fixture
def daf(backend, tmp_path) -> pydaf.DafWriter:
    return fill(backend.new(tmp_path, "test!"))


UMIS = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 3], [4, 5, 0]])


def test_result_forms(daf):
    assert daf["@ gene : ?"] == set() and daf["@ cell : ?"] == {"age", "type"}
    assert daf[". organism"] == "human"
    ages = daf["@ cell : age"]
    assert isinstance(ages, pd.Series) and ages.index.name == "cell"
    assert ages.to_dict() == {"A": 10, "B": 20, "C": 30, "D": 40} and ages.dtype == np.int32
    matrix = daf["@ cell @ gene :: UMIs"]
    assert isinstance(matrix, pd.DataFrame)
    assert (matrix.index.name, matrix.columns.name) == ("cell", "gene")
    assert np.array_equal(matrix.sparse.to_dense().to_numpy(), UMIS)
    grouped = daf["@ cell : age / type >> Sum"]
    assert grouped.index.name is None and grouped.to_dict() == {"": 40, "T1": 40, "T2": 20}
    assert daf["@ cell : age / type =@ >> Sum || 0"].to_dict() == {"T1": 40, "T2": 20, "T3": 0}


def test_numpy_forms_share_the_stored_data(daf, backend):
    """The values of a plain lookup are the stored arrays: the file map itself for the mapped backends."""
    sparse = daf.get_np_query("@ cell @ gene :: UMIs")
    dense = daf.get_np_query("@ cell @ gene :: score")
    assert isinstance(sparse, sp.csc_matrix) and np.array_equal(sparse.toarray(), UMIS)
    assert not dense.flags.writeable and dense.flags.f_contiguous
    if backend.maps_files:
        assert is_file_map(sparse.data) and is_file_map(dense)
    else:
        assert np.shares_memory(sparse.data, daf.get_stored_matrix("cell", "gene", "UMIs").nzval)
        assert np.shares_memory(dense, daf.get_matrix("cell", "gene", "score"))


def test_stored_forms_share_the_stored_indices(daf, backend):
    """``get_stored_query`` gives a sparse matrix in Julia's 1-based form: a stored one, or an element-wise result that
    keeps its structure, shares the stored index arrays, where ``get_np_query`` copies them to 0-based ones."""
    stored = daf.get_stored_matrix("cell", "gene", "UMIs")
    looked_up = daf.get_stored_query("@ cell @ gene :: UMIs")
    assert isinstance(looked_up, SparseMatrixCSC) and looked_up.shape == (4, 3)
    assert looked_up.colptr.tolist() == [1, 3, 5, 6] and looked_up.rowval.tolist() == [2, 4, 1, 4, 3]
    assert looked_up.nzval.tolist() == [2, 4, 1, 5, 3]
    logged = daf.get_stored_query("@ cell @ gene :: UMIs % Log eps 1", cache=False)
    assert isinstance(logged, SparseMatrixCSC)
    assert np.shares_memory(logged.colptr, stored.colptr) and np.shares_memory(logged.rowval, stored.rowval)
    assert np.allclose(logged.nzval, np.log(np.array([2, 4, 1, 5, 3]) + 1))
    assert not (logged.nzval.flags.writeable or logged.rowval.flags.writeable or logged.colptr.flags.writeable)
    if backend.maps_files:
        assert is_file_map(logged.rowval) and is_file_map(looked_up.nzval)
    scipy_form = daf.get_np_query("@ cell @ gene :: UMIs % Log eps 1", cache=False)
    assert not np.shares_memory(scipy_form.indices, stored.rowval)
    assert np.array_equal(logged.to_scipy().toarray(), scipy_form.toarray())
    # Everything else comes back as from get_np_query.
    assert np.array_equal(daf.get_stored_query("@ cell @ gene :: score"), daf.get_np_query("@ cell @ gene :: score"))
    assert daf.get_stored_query("@ cell : ?") == {"age", "type"}
    assert daf.get_stored_query(". organism") == "human"
    assert (Axis("cell") | LookupVector("age") | daf.get_stored_query()).tolist() == [10, 20, 30, 40]


def test_reductions_run_on_stored_sparse_data(daf):
    assert daf["@ cell @ gene :: UMIs >| Sum"].to_dict() == {"A": 1, "B": 2, "C": 3, "D": 9}
    assert daf["@ cell @ gene :: UMIs >- Sum"].to_dict() == {"X": 6, "Y": 6, "Z": 3}
    assert daf["@ cell @ gene :: UMIs >> Sum"] == 15
    means = daf["@ cell [ type ] @ gene :: UMIs -/ type >- Mean"]
    assert means.index.tolist() == ["T1", "T2"]
    assert np.allclose(means.to_numpy(), [[0, 0.5, 1.5], [2, 0, 0]])


def test_row_reductions_with_either_layout_stored(daf):
    # UMIs has both layouts (whole-matrix row reductions use the gene x cell one), score only cell x gene; the flipped
    # layout must not be used once the matrix is masked or transformed.
    assert daf["@ cell @ gene :: UMIs >| Max"].to_dict() == {"A": 1, "B": 2, "C": 3, "D": 5}
    assert daf["@ cell [ age > 15 ] @ gene :: UMIs >| Sum"].to_dict() == {"B": 2, "C": 3, "D": 9}
    assert daf["@ cell @ gene [ ! name = Y ] :: UMIs >| Sum"].to_dict() == {"A": 0, "B": 2, "C": 3, "D": 4}
    assert daf["@ cell @ gene :: UMIs % Clamp max 2 >| Sum"].to_dict() == {"A": 1, "B": 2, "C": 2, "D": 4}
    assert daf["@ gene @ cell :: UMIs >| Sum"].to_dict() == {"X": 6, "Y": 6, "Z": 3}
    assert daf["@ cell @ gene :: score >| Sum"].to_dict() == {"A": 0.5, "B": 1.0, "C": 1.5, "D": 4.5}
    assert daf.get_np_query("@ cell @ gene :: UMIs >| Sum").tolist() == [1, 2, 3, 9]


def test_grouping_whole_axes_and_subsets(daf):
    assert daf["@ cell : age / type >> Max"].to_dict() == {"": 40, "T1": 30, "T2": 20}
    assert daf["@ cell [ age < 35 ] : age / type >> Max"].to_dict() == {"T1": 30, "T2": 20}
    assert daf["@ cell [ age > 15 ] @ gene :: UMIs -/ type >- Sum"].to_numpy().tolist() == [[4, 5, 0], [0, 0, 3],
                                                                                             [2, 0, 0]]


def test_masks_lookups_and_counts(daf):
    assert daf["@ cell [ age > 15 & ! type ]"].tolist() == ["D"]
    assert daf["@ cell [ type ] : type : color"].to_dict() == {"A": "red", "B": "green", "C": "red"}
    assert daf["@ cell : type ?? : color"].to_dict() == {"A": "red", "B": "green", "C": "red"}
    assert daf["@ cell : type ?? black : color"].to_dict() == {"A": "red", "B": "green", "C": "red", "D": "black"}
    assert daf["@ cell :: UMIs @ gene = Y"].to_dict() == {"A": 1, "B": 0, "C": 0, "D": 5}
    assert daf[":: UMIs @ cell = D @ gene = Y"] == 5
    counts = daf["@ cell : type =@ * age > 15"]
    assert counts.index.tolist() == ["T1", "T2", "T3"] and counts.columns.tolist() == ["false", "true"]
    assert counts.to_numpy().tolist() == [[1, 1], [0, 1], [0, 0]] and counts.to_numpy().dtype == np.uint8


def test_cached_results_follow_changes(daf, backend):
    if not backend.rewrites:
        pytest.skip(f"the test overwrites, which the backend: {backend} refuses")
    first = daf.get_query("@ cell : age >> Sum")
    assert first == 100
    daf.set_vector("gene", "is_marker", [True, False, True])  # unrelated: the cached result stays valid
    entries = [key for key, _ in daf.cache.entries() if isinstance(key, QueryCacheKey)]
    assert QueryCacheKey("@ cell : age >> Sum") in entries
    daf.set_vector("cell", "age", np.array([1, 2, 3, 4], dtype=np.int32), overwrite=True)
    assert daf.get_query("@ cell : age >> Sum") == 10
    daf.set_scalar("organism", "mouse", overwrite=True)
    assert daf.get_query(". organism") == "mouse"
    daf.empty_cache(clear=pydaf.CacheGroup.QueryData)
    assert not [key for key, _ in daf.cache.entries() if isinstance(key, QueryCacheKey)]
    daf["@ cell : age >> Sum"]
    assert not [key for key, _ in daf.cache.entries() if isinstance(key, QueryCacheKey)]  # daf[q] does not cache


def test_builders_mix_with_strings(daf):
    query = Axis("cell") | LookupVector("age") | IsGreater(15)
    assert str(query) == "@ cell : age > 15"
    assert daf[query].tolist() == [False, True, True, True]
    assert str(Axis("cell") | ": age / type" | Sum() | IfMissing(0)) == "@ cell : age / type >> Sum || 0"
    assert str(QuerySequence(Axis("cell"), Axis("gene"), LookupMatrix("UMIs"), ReduceToColumn(Mean()))) == \
        "@ cell @ gene :: UMIs >| Mean"
    assert str(Axis("cell") | GroupBy("type")) == "@ cell / type"
    assert daf[Axis("cell") | Axis("gene") | LookupMatrix("UMIs") | Sum()] == 15
    assert ("@ cell : age" | daf.get_query()).to_dict() == {"A": 10, "B": 20, "C": 30, "D": 40}
    assert (Axis("cell") | ": age >> Sum" | daf.get_np_query(cache=False)) == 100


@pytest.mark.parametrize("text", [
    "@ cell [ age > 15 & ! type | is_x ^ ! y ] : age % Log base 2.0 eps 1.0",
    "@ cell @ gene :: UMIs -/ type =@ >- Mean || 0",
    "@ cell : metacell ?? blue : type ?? : color",
    "@ cell :: distance @| X",
    "@ cell :: distance @- X",
    "@ cell = ATCG\\:B1 : batch",
    ". version || 1 String",
    "@ gene @ cell :: UMIs |/ type >| Sum",
    "@ cell : experiment =@ * donor : sex",
    "@ cell [ type ~ \\^\\[A-U\\] ] : type",
])
def test_canonical_text_round_trips(text):
    assert str(parse_query(text)) == text
    assert str(parse_query(str(parse_query(text)))) == text


def test_query_introspection():
    assert query_result_dimensions(". organism") == 0
    assert query_result_dimensions("@ cell @ gene :: UMIs") == 2
    assert query_result_dimensions("@ ?") == -1
    assert is_axis_query("@ cell [ age > 1 ]") and query_axis_name("@ cell [ age > 1 ]") == "cell"
    assert not is_axis_query("@ cell : age")
    with pytest.raises(DafQueryError, match="not an axis query"):
        query_axis_name("@ cell : age")


def test_errors_point_at_the_query(daf):
    with pytest.raises(pydaf.DafError) as error:
        daf["@ cell : age >> Sum ]"]
    assert str(error.value) == (
        "invalid operation(s)\nin the query: @ cell : age >> Sum ]\nat location:                     ▲\n"
        "for the daf data: test!")
    with pytest.raises(DafQueryError, match="missing entry: W\nof the axis: gene"):
        daf["@ cell :: UMIs @ gene = W"]
    with pytest.raises(pydaf.DafMissingError, match="missing vector: height"):
        daf["@ cell : height"]
    assert daf["@ cell : height || 1.5"].tolist() == [1.5] * 4
    with pytest.raises(DafQueryError, match="expected: value"):
        parse_query("@ cell :: UMIs >> ")


def test_has_query_and_relayout(daf):
    assert daf.has_query("@ cell : age")
    assert not daf.has_query("@ donor")
    assert not daf.has_query("@ cell : age ]")
    assert not daf.has_query(". version")
    assert daf.has_query(". version || 1")
    assert not daf.query_requires_relayout("@ cell @ gene :: UMIs")
    if not daf.has_matrix("gene", "cell", "score", relayout=False):
        assert daf.query_requires_relayout("@ gene @ cell :: score")


def test_frames(daf):
    frame = daf.get_frame("cell")
    assert frame.columns.tolist() == ["name", "age", "type"] and frame.index.tolist() == ["A", "B", "C", "D"]
    frame = daf.get_frame("@ cell [ type ]", ["age", ("color", ": type : color"), ("total", "@ gene :: UMIs >| Sum")])
    assert frame.to_dict("list") == {"age": [10, 20, 30], "color": ["red", "green", "red"], "total": [1, 2, 3]}
    assert daf.get_frame("type", {"age": "@ cell : age / type =@ >> Sum || 0"})["age"].tolist() == [40, 20, 0]
    with pytest.raises(DafQueryError, match="invalid column query: @ cell : age >> Sum"):
        daf.get_frame("cell", [("age", ": age >> Sum")])
    with pytest.raises(DafQueryError, match="invalid axis query: @ cell : age"):
        daf.get_frame("@ cell : age")


def test_queries_while_writing():
    """Readers querying while a writer replaces the data see either the old or the new values, never a mix."""
    daf = fill(pydaf.MemoryDaf(name="threads!"))
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                total = daf.get_query("@ cell : age >> Sum")
                assert total in (100, 200), total
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    for index in range(200):
        ages = np.array([10, 20, 30, 40], dtype=np.int32) * (1 + index % 2)
        daf.set_vector("cell", "age", ages, overwrite=True)
    stop.set()
    for thread in threads:
        thread.join()
    assert not errors


# Regular expressions: bounded time, one match per distinct value.


def _run_in_thread(action, seconds: float):
    """Run ``action`` in a daemon thread and return (finished, result or exception) after at most ``seconds``: a hang
    fails the test instead of hanging the suite."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(action())
        except BaseException as error:  # reported to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return (not thread.is_alive()), (outcome[0] if outcome else None)


def test_catastrophic_regular_expressions_fail_in_bounded_time_and_release_the_lock():
    daf = pydaf.MemoryDaf(name="regex!").add_axis("cell", [f"C{index}" for index in range(4)])
    daf.set_vector("cell", "barcode", ["a" * 40 + "b", "a" * 41 + "b", "aaa", "b"])
    # Python's re never returns on these (2^40 ways to split the a's); Julia's PCRE gives up with a match-limit error.
    finished, result = _run_in_thread(lambda: daf.get_query("@ cell [ barcode ~ \\(a\\|a\\)+ ]"), 60)
    assert finished, "the regular expression comparison did not finish"
    assert isinstance(result, DafQueryError), result
    assert str(result).startswith("the regular expression takes too long: (a|a)+\n"
                                  "for the comparison operation: IsMatch\nin the query: ")
    finished, result = _run_in_thread(lambda: daf.get_query("@ cell [ barcode !~ \\(a\\|a\\)+ ]"), 60)
    assert finished and isinstance(result, DafQueryError), result
    # The read lock was released: a writer in another thread gets in.
    finished, _ = _run_in_thread(lambda: daf.set_scalar("checked", True), 10)
    assert finished and daf.get_scalar("checked")
    # The brief's example finishes (with the right answer) on the regex engine.
    finished, result = _run_in_thread(lambda: daf.get_query("@ cell [ barcode ~ \\(a+\\)+\\$ ]"), 60)
    assert finished and result.tolist() == ["C2"]


def test_regular_expressions_match_each_distinct_value_once(daf):
    assert daf["@ cell [ type ~ T. ]"].tolist() == ["A", "B", "C"]
    assert daf["@ cell [ type !~ T1 ]"].tolist() == ["B", "D"]
    # A PCRE character class that Python's re lacks (in the query string, "\\\\" is one backslash).
    assert daf["@ cell [ type ~ \\\\p\\{Lu\\}\\\\d ]"].tolist() == ["A", "B", "C"]
    with pytest.raises(DafQueryError, match="invalid regular expression: \\(T\nfor the comparison operation: IsMatch"):
        daf["@ cell [ type ~ \\(T ]"]


# Operations that used to fail with untyped exceptions.


def test_significant_of_bools_follows_julia():
    daf = pydaf.MemoryDaf(name="bools!").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "flag", [True, False, True])
    daf.set_vector("cell", "none", [False, False, False])
    daf.set_matrix("cell", "gene", "mask", np.array([[True, False], [False, False], [True, False]]), relayout=False)
    # Julia compares in Bool, where high 1 is true and -true is -1: the true values are the significant ones.
    assert daf.get_np_query("@ cell : flag % Significant high 1").tolist() == [True, False, True]
    assert daf.get_np_query("@ cell : none % Significant high 1").tolist() == [False, False, False]
    assert daf.get_np_query("@ cell @ gene :: mask % Significant high 1").toarray().tolist() == [
        [True, False], [False, False], [True, False]]
    with pytest.raises(pydaf.DafValueError, match=r"InexactError: Bool\(0.5\)"):
        daf.get_query("@ cell : flag % Significant high 0.5")


def test_log_base_one_is_refused():
    daf = pydaf.MemoryDaf(name="log!").add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "age", [1.0, 2.0])
    with pytest.raises(DafQueryError) as raised:
        daf.get_query("@ cell : age % Log base 1")
    assert str(raised.value) == ('invalid value: "1"\nvalue must be: positive and not 1\nfor the parameter: base\n'
                                 "for the operation: Log\nin: @ cell : age % Log base 1\nat: " + " " * 24 + "▲")
    with pytest.raises(pydaf.DafValueError, match=r"invalid value: 1\.0\nvalue must be: positive and not 1\n"):
        operations_module.Log(base=1)


def test_conversions_to_uint64_are_typed_errors_or_values():
    daf = pydaf.MemoryDaf(name="round!").add_axis("cell", ["A", "B", "C"])
    daf.set_vector("cell", "flag", [True, False, True])
    daf.set_vector("cell", "value", [-1.0, -2.0, -9.0])
    for operation in ("Round type UInt64", "Convert type UInt64", "Abs type UInt64"):
        values = daf.get_np_query(f"@ cell : flag % {operation}")
        assert values.dtype == np.uint64 and values.tolist() == [1, 0, 1]
    # The variance over a negative mean is negative: no UInt64 holds it.
    with pytest.raises(pydaf.DafValueError, match=r"InexactError: UInt64\(-3.0\)"):
        daf.get_query("@ cell : value >> VarN % Round type UInt64")
    with pytest.raises(pydaf.DafValueError, match=r"InexactError: UInt64\(-1.0\)"):
        daf.get_query("@ cell : value % Round type UInt64")


def test_every_failing_operation_raises_a_daf_error():
    """Every element-wise operation after every reduction, on vectors and matrices of every kind of element type:
    each query either gives a value or raises a DafError (never a numpy or Python exception)."""
    daf = pydaf.MemoryDaf(name="sweep!").add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_vector("cell", "group", ["a", "a", "b", "b"])
    vectors = {"negative": np.array([-1.0, -2.0, -3.0, -5.0]), "bool": np.array([True, False, True, True]),
               "int8": np.array([-1, 0, 1, -100], np.int8), "uint64": np.array([0, 2**64 - 1, 3, 0], np.uint64),
               "float32": np.array([-1, np.nan, 1, 0], np.float32)}
    for name, values in vectors.items():
        daf.set_vector("cell", name, values)
    matrices = {"dense": np.array([[-1.0, 2, 0], [0, 0, 0], [3, -4, 0], [0, 1, 1]]),
                "sparse": sp.csc_matrix(np.array([[-1.0, 2, 0], [0, 0, 0], [3, -4, 0], [0, 1, 1]])),
                "bools": np.array([[True, False, True], [False] * 3, [True] * 3, [False, True, False]])}
    for name, matrix in matrices.items():
        daf.set_matrix("cell", "gene", name, matrix, relayout=True)
    eltwise = ["Round type UInt64", "Round type Bool", "Round", "Abs type UInt64", "Convert type UInt64",
               "Clamp min 0 max 1 type UInt8", "Log base 2", "Log base 2 eps 1", "Fraction", "Significant high 1",
               "Significant high 2 low 1"]
    reductions = ["Sum", "Mean", "VarN", "Max", "Mode", "Count", "Quantile p 0.5"]
    queries = []
    for name in vectors:
        queries += [f"@ cell : {name} % {operation}" for operation in eltwise]
        queries += [f"@ cell : {name} >> {reduction} % {operation}"
                    for reduction in reductions for operation in eltwise]
        queries += [f"@ cell : {name} / group >> {reduction} % {operation}"
                    for reduction in reductions for operation in eltwise]
    for name in matrices:
        queries += [f"@ cell @ gene :: {name} % {operation}" for operation in eltwise]
        queries += [f"@ cell @ gene :: {name} {reduce} {reduction} % {operation}"
                    for reduce in (">|", ">-", ">>") for reduction in reductions for operation in eltwise]
    untyped = []
    with np.errstate(all="ignore"):
        for query in queries:
            try:
                daf.get_np_query(query, cache=False)
            except pydaf.DafError:
                pass
            except Exception as error:  # what this test looks for
                untyped.append(f"{query}: {type(error).__name__}: {error}")
    assert untyped == []


# The phrase machine.


def test_every_phrase_declares_its_output_and_a_broken_one_is_an_internal_error(monkeypatch):
    assert all(phrase.output for phrase in machine.PHRASES)
    daf = fill(pydaf.MemoryDaf(name="machine!"))

    def pushes_a_scalar(query_state, _axis):
        query_state.stack.append(ScalarState(1))

    # A phrase that claims to push the entries of an axis but pushes a scalar, matched before the real one.
    broken = machine.Phrase(None, (machine.axis_with_name,), pushes_a_scalar, (machine.vector_axis,))
    monkeypatch.setattr(machine, "PHRASES", [broken, *machine.PHRASES])
    with pytest.raises(pydaf.DafError) as raised:
        daf.get_query("@ cell : age", cache=False)
    assert not isinstance(raised.value, DafQueryError)
    assert str(raised.value) == ("internal error: the query phrase pushes_a_scalar left the stack top: ScalarState\n"
                                 "instead of: vector_axis\nin the query: @ cell : age")


# Queries that reach every kind of phrase on ``fill``'s data set.
MACHINE_CORPUS = [
    "?", ". ?", "@ ?", "@ cell : ?", "@ cell @ gene :: ?", ". organism", ". missing || 1", "@ cell", "@ cell : age",
    "@ cell [ age > 15 ] : age", "@ cell [ ! age > 15 & type = T1 | age < 40 ^ type ] : age",
    "@ cell [ UMIs @ gene = X > 0 ] : age", "@ cell [ type ?? : color = red ] : age",
    "@ cell : type ?? : color || black", "@ cell : type ?? : color", "@ cell : age % Abs",
    "@ cell : age = 10", "@ cell : age >> Sum", "@ cell : age / type >> Mean", "@ cell : age / type =@ >> Sum || 0",
    "@ cell : type * type", "@ cell : type =@ * type", "@ cell : age / UMIs @ gene = Y >> Max",
    "@ cell @ gene :: UMIs", "@ cell @ gene :: UMIs >| Sum", "@ cell @ gene :: UMIs >- Max",
    "@ cell @ gene :: UMIs >> Sum",
    "@ cell @ gene :: UMIs % Log eps 1", "@ cell @ gene :: UMIs > 1", "@ cell @ gene :: UMIs -/ type >- Mean",
    "@ gene @ cell :: UMIs |/ type =@ >| Sum || 0", ":: UMIs @ cell = B @ gene = Y",
    "@ cell [ age > 15 ] @ gene :: score % Abs >| Max", "@ gene : age || 0", ": age @ cell = C",
    "@ cell @ gene [ name = Y ] :: UMIs >| Sum", "@ cell [ name = B ] @ gene :: score", "@ cell : type ?? T1 : color",
]


def _first_matching_phrase(query_state, phrases):
    """The first of ``phrases`` whose stack top and next operations match (the state is left as it was)."""
    start = query_state.next_operation_index
    try:
        for phrase in phrases:
            if phrase.input is not None and not machine.stack_has_top(query_state, phrase.input):
                continue
            query_state.next_operation_index = start
            if phrase.operations is None or machine._next_matching_operations(query_state, phrase.operations) \
                    is not None:
                return phrase
        return None
    finally:
        query_state.next_operation_index = start


def test_the_phrases_skipped_by_the_next_operation_could_not_have_matched(monkeypatch):
    # The machine tests only the phrases that may start with the next operation's type: at every step of every
    # query here (and of Julia's inline query tests, where present), the phrase it picks from them is the one a scan
    # of all the phrases in order picks.
    from .parity import load_cases

    queries = MACHINE_CORPUS + [record["query"] for record in load_cases("inline_query_cases.json")
                                if record.get("query") and not record.get("query_is_builder_expression")]
    daf = fill(pydaf.MemoryDaf(name="machine!"))
    original = machine._do_query_phrase
    steps = []

    def checked(query_state):
        operations = query_state.operations
        start = query_state.next_operation_index
        next_type = type(operations[start]) if start < len(operations) else type(None)
        scanned = _first_matching_phrase(query_state, machine.PHRASES)
        assert _first_matching_phrase(query_state, machine._CANDIDATES.candidates(next_type)) is scanned
        steps.append(scanned)
        return original(query_state)

    monkeypatch.setattr(machine, "_do_query_phrase", checked)
    completed = 0
    for query in queries:
        try:
            daf.get_np_query(query, cache=False)
            completed += 1
        except pydaf.DafError:
            pass  # (missing properties of this data set: the steps before the error were checked)
    assert completed >= len(MACHINE_CORPUS)
    # Most phrases were reached.
    assert len({id(phrase) for phrase in steps if phrase is not None}) >= 25


def test_purposes_of_the_machine(daf):
    computed = machine.final_state(daf, "@ cell : age", Purpose.COMPUTE).stack[0]
    assert computed.vector_values.tolist() == [10, 20, 30, 40]
    dry = machine.final_state(None, "@ cell : age", Purpose.DRY_RUN).stack[0]
    assert dry.vector_values.shape == (0,) and dry.entries_axis_name == "cell"
    assert daf.has_query("@ cell : age") and not daf.has_query("@ cell : height")


def test_julia_float_text_is_julias_for_both_callers():
    cases = {1e-5: "1.0e-5", 1e-4: "0.0001", 100000.0: "100000.0", 1e6: "1.0e6", -0.0: "-0.0", 1234567.0: "1.234567e6",
             np.float32(0.1): "0.1", np.float32(1e-4): "0.0001", np.float32(3.4e38): "3.4e38", 5e-324: "5.0e-324"}
    for value, text in cases.items():
        assert julia_float_text(value) == text
        assert brief_scalar(value) == text  # description's brief uses the same printer
        assert str(IfMissing(value)).split()[1] == text  # and so do canonical query texts
