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
from pydaf.core.cache import QueryKey
from pydaf.errors import DafQueryError
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
    parse_query,
    query_axis_name,
    query_result_dimensions,
)
from pydaf.queries.operations import Mean, Sum
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


def test_cached_results_follow_changes(daf):
    first = daf.get_query("@ cell : age >> Sum")
    assert first == 100
    daf.set_vector("gene", "is_marker", [True, False, True])  # unrelated: the cached result stays valid
    entries = [key for key, _ in daf.cache.entries() if isinstance(key, QueryKey)]
    assert QueryKey("@ cell : age >> Sum") in entries
    daf.set_vector("cell", "age", np.array([1, 2, 3, 4], dtype=np.int32), overwrite=True)
    assert daf.get_query("@ cell : age >> Sum") == 10
    daf.set_scalar("organism", "mouse", overwrite=True)
    assert daf.get_query(". organism") == "mouse"
    daf.empty_cache(clear=pydaf.CacheGroup.QueryData)
    assert not [key for key, _ in daf.cache.entries() if isinstance(key, QueryKey)]
    daf["@ cell : age >> Sum"]
    assert not [key for key, _ in daf.cache.entries() if isinstance(key, QueryKey)]  # daf[q] does not cache


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
