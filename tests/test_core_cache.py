"""The typed cache of pydaf.core: keys, invalidation by change, description(cache=True), the lock API, and computed
values checked against the versions of what they read."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.core.cache import (
    AxisCacheKey,
    AxisForm,
    DataCache,
    DataForm,
    MatrixCacheKey,
    NamesCacheKey,
    QueryCacheKey,
    ScalarCacheKey,
    VectorCacheKey,
)


def _cells_genes() -> pydaf.MemoryDaf:
    daf = pydaf.MemoryDaf(name="cache!")
    daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", [1, 2, 3])
    daf.set_matrix("gene", "cell", "UMIs", sp.csc_matrix(np.array([[1, 0, 2], [0, 3, 0]])), relayout=False)
    return daf


def test_description_with_cache_after_a_query_lists_every_entry():
    # Regression: description(cache=True) raised IndexError after any cached query (a query key read as a matrix key).
    daf = pydaf.MemoryDaf(name="described!").add_axis("cell", ["A"]).set_vector("cell", "age", [1])
    assert daf.get_query("@ cell : age").tolist() == [1]
    text = daf.description(cache=True)
    assert "cache:\n" in text
    assert "  'query[@ cell : age]': (QueryData) 1 x Int64 (Dense)\n" in text


def test_description_cache_lines_use_julias_key_text_and_order():
    daf = _cells_genes()
    daf.axis_dict("cell")
    daf.get_matrix("cell", "gene", "UMIs")  # a relayout, then its scipy form
    daf.get_query("@ cell : age", cache=True)
    lines = [line for line in daf.description(cache=True).splitlines() if line.startswith("  '")]
    keys = [line.split("'")[1] for line in lines]
    assert keys == [
        "axis_dict[axis: cell]",
        "matrix[rows_axis: cell columns_axis: gene name: UMIs]",
        "scipy_matrix[rows_axis: cell columns_axis: gene name: UMIs]",
        "query[@ cell : age]",
    ]
    assert lines[0].endswith("(MemoryData) 3 entries")


def test_a_vector_named_like_an_axis_keeps_the_cached_relayout():
    # Regression: setting the vector "cell" of the axis "gene" dropped the cached relayout of the matrix (gene, cell, …)
    # because invalidation compared tuple slices by position.
    daf = _cells_genes()
    relayout = daf.get_stored_matrix("cell", "gene", "UMIs")
    relayout_key = MatrixCacheKey("cell", "gene", "UMIs", DataForm.RELAYOUT)
    assert daf.cache.entry(relayout_key) is not None
    daf.set_vector("gene", "cell", ["A", "B"])
    daf.set_vector("cell", "gene", ["X", "Y", "X"])
    assert daf.cache.entry(relayout_key) is not None
    assert daf.get_stored_matrix("cell", "gene", "UMIs") is relayout


def test_writes_drop_exactly_what_they_make_stale():
    daf = _cells_genes()
    daf.get_stored_matrix("cell", "gene", "UMIs")
    daf.get_matrix("gene", "cell", "UMIs")
    daf.axis_dict("gene")
    daf.get_vector("cell", "age")
    daf.set_matrix("gene", "cell", "UMIs", np.ones((2, 3)), overwrite=True, relayout=False)
    remaining = {key for key, _ in daf.cache.entries()}
    assert not any(isinstance(key, MatrixCacheKey) for key in remaining)
    assert AxisCacheKey("gene", AxisForm.DICT) in remaining
    daf.delete_axis("gene")
    remaining = {key for key, _ in daf.cache.entries()}
    assert AxisCacheKey("gene", AxisForm.DICT) not in remaining


@pytest.mark.parametrize(("key", "change", "touched"), [
    (VectorCacheKey("gene", "cell"), MatrixCacheKey("gene", "cell", "UMIs"), False),
    (MatrixCacheKey("gene", "cell", "UMIs"), VectorCacheKey("gene", "cell"), False),
    (MatrixCacheKey("gene", "cell", "UMIs", DataForm.SCIPY), MatrixCacheKey("cell", "gene", "UMIs"), True),
    (MatrixCacheKey("gene", "cell", "UMIs"), MatrixCacheKey("gene", "cell", "other"), False),
    (MatrixCacheKey("gene", "cell", "UMIs"), AxisCacheKey("cell"), True),
    (MatrixCacheKey("gene", "cell", "UMIs"), AxisCacheKey("UMIs"), False),
    (VectorCacheKey("cell", "age", DataForm.DENSE), VectorCacheKey("cell", "age"), True),
    (VectorCacheKey("cell", "age"), VectorCacheKey("age", "cell"), False),
    (VectorCacheKey("cell", "age"), AxisCacheKey("cell"), True),
    (AxisCacheKey("cell", AxisForm.INDEX), AxisCacheKey("cell"), True),
    (AxisCacheKey("cell"), VectorCacheKey("cell", "age"), False),
    (QueryCacheKey("@ cell : age"), VectorCacheKey("cell", "age"), False),
    (ScalarCacheKey("organism"), ScalarCacheKey("organism"), True),
])
def test_touches(key, change, touched):
    assert key.touches(change) is touched


def test_key_texts_are_julias():
    assert AxisCacheKey("cell").text() == "axis_vector[axis: cell]"
    assert AxisCacheKey("cell", AxisForm.DICT).text() == "axis_dict[axis: cell]"
    assert VectorCacheKey("cell", "age").text() == "vector[axis: cell name: age]"
    assert MatrixCacheKey("cell", "gene", "UMIs").text() == "matrix[rows_axis: cell columns_axis: gene name: UMIs]"
    assert QueryCacheKey("@ cell").text() == "query[@ cell]"
    assert ScalarCacheKey("organism").text() == "scalar[organism]"
    assert NamesCacheKey("scalars").text() == "names[scalars]"
    assert NamesCacheKey("vectors", ("cell",)).text() == "vectors[axis: cell]"


def test_cached_computation_follows_the_versions_of_what_it_read():
    daf = _cells_genes()
    calls = []

    def compute():
        calls.append(1)
        return int(daf.get_vector("cell", "age").sum()), [VectorCacheKey("cell", "age")]

    key = QueryCacheKey("total age")
    assert daf.cached_computation(key, compute) == 6
    daf.set_scalar("unrelated", 1)  # a write, but not of what it read: reused
    assert daf.cached_computation(key, compute) == 6 and len(calls) == 1
    daf.set_vector("cell", "age", [5, 5, 5], overwrite=True)
    assert daf.cached_computation(key, compute) == 15 and len(calls) == 2
    daf.delete_vector("cell", "age")
    with pytest.raises(pydaf.DafMissingError):
        daf.cached_computation(key, compute)


def test_computations_reading_scalars_are_redone_after_any_write():
    daf = _cells_genes().set_scalar("organism", "human")
    key = QueryCacheKey("organism")
    compute = lambda: (daf.get_scalar("organism"), [ScalarCacheKey("organism")])  # noqa: E731
    assert daf.cached_computation(key, compute) == "human"
    daf.set_scalar("organism", "mouse", overwrite=True)
    assert daf.cached_computation(key, compute) == "mouse"


def test_empty_cache_by_group():
    daf = _cells_genes()
    daf.axis_dict("cell")
    daf.get_query("@ cell : age")
    daf.empty_cache(clear=pydaf.CacheGroup.QueryData)
    assert [type(key) for key, _ in daf.cache.entries()] == [AxisCacheKey]
    daf.empty_cache(keep=pydaf.CacheGroup.QueryData)
    assert len(daf.cache) == 0


def test_read_only_wrappers_share_the_cache():
    daf = _cells_genes()
    view = daf.read_only()
    view.axis_dict("cell")
    assert view.cache is daf.cache and daf.cache.entry(AxisCacheKey("cell", AxisForm.DICT)) is not None


def test_data_cache_first_stored_value_wins_across_threads():
    cache = DataCache()
    barrier = threading.Barrier(4)
    results = []

    def compute_and_store(index):
        barrier.wait()
        results.append(cache.get_or_compute(AxisCacheKey("cell"), lambda: (object(), pydaf.CacheGroup.MemoryData)))

    threads = [threading.Thread(target=compute_and_store, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(result) for result in results}) == 1


def test_read_lock_keeps_writers_out():
    daf = _cells_genes()
    wrote = threading.Event()

    def writer():
        daf.set_scalar("late", 1)
        wrote.set()

    with daf.read_lock():
        thread = threading.Thread(target=writer)
        thread.start()
        assert not wrote.wait(0.2)
        assert not daf.has_scalar("late")
    thread.join()
    assert wrote.is_set() and daf.has_scalar("late")


def test_write_lock_is_reentrant_and_counts_once():
    daf = _cells_genes()
    before = daf.write_count()
    with daf.write_lock():
        daf.set_scalar("a", 1).set_scalar("b", 2)
    assert daf.write_count() == before + 1
