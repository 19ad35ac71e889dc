"""The CSC operations of pydaf.sparse against dense numpy, on several index and value types."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.sparse import SparseMatrixCSC, SparseVector, colptr_from_counts, dense_column_major, read_only_array

INDEX_TYPES = [np.uint32, np.int64, np.int32, np.uint16]


def _random(shape: tuple[int, int], indtype: type, seed: int = 5, density: float = 0.3) -> tuple[SparseMatrixCSC,
                                                                                                  np.ndarray]:
    dense = sp.random(*shape, density=density, format="csc", random_state=seed).toarray().astype(np.float32)
    return SparseMatrixCSC.from_scipy(sp.csc_matrix(dense), indtype=indtype), np.asfortranarray(dense)


@pytest.mark.parametrize("indtype", INDEX_TYPES)
def test_columns_rows_and_entry_columns(indtype):
    matrix, dense = _random((7, 5), indtype)
    for column in range(5):
        assert np.array_equal(matrix.column(column), dense[:, column])
    for row in range(7):
        assert np.array_equal(matrix.row(row), dense[row, :])
    columns = matrix.entry_columns()
    assert columns.dtype == np.int64 and columns.tolist() == sorted(np.nonzero(dense.T)[0].tolist())
    assert np.array_equal(matrix.to_dense(), dense) and matrix.to_dense().flags.f_contiguous


@pytest.mark.parametrize("indtype", INDEX_TYPES)
@pytest.mark.parametrize(("rows", "columns"), [
    ([0, 2, 5], None), ([5, 0, 3], None), (None, [4, 1, 1]), ([6, 6, 1], [0, 2]), ([], [3]), (None, []),
])
def test_select_any_order(indtype, rows, columns):
    matrix, dense = _random((7, 5), indtype)
    rows_array = None if rows is None else np.array(rows, dtype=np.int64)
    columns_array = None if columns is None else np.array(columns, dtype=np.int64)
    selected = matrix.select(rows=rows_array, columns=columns_array)
    expected = dense
    if columns_array is not None:
        expected = expected[:, columns_array]
    if rows_array is not None:
        expected = expected[rows_array, :]
    assert np.array_equal(selected.to_dense(), expected)
    assert selected.colptr.dtype == matrix.colptr.dtype and selected.nzval.dtype == matrix.nzval.dtype
    # Within each column the rows stay strictly increasing (a valid Julia CSC).
    for column in range(selected.shape[1]):
        rows_of_column = selected.rowval[selected.column_range(column)].astype(np.int64)
        assert np.all(np.diff(rows_of_column) > 0)


@pytest.mark.parametrize("indtype", INDEX_TYPES)
def test_transpose_keeps_types(indtype):
    matrix, dense = _random((6, 9), indtype)
    transposed = matrix.transpose()
    assert transposed.shape == (9, 6) and np.array_equal(transposed.to_dense(), dense.T)
    assert transposed.colptr.dtype == np.dtype(indtype) and transposed.rowval.dtype == np.dtype(indtype)


def test_transpose_of_large_matrix_uses_the_kernel_and_agrees_with_scipy():
    matrix = sp.random(3000, 700, density=0.6, format="csc", random_state=2, dtype=np.float64)
    ours = SparseMatrixCSC.from_scipy(matrix, indtype=np.uint32).transpose()
    assert ours.nnz > (1 << 20)
    expected = matrix.T.tocsc()
    expected.sort_indices()
    assert np.array_equal(ours.colptr.astype(np.int64) - 1, expected.indptr)
    assert np.array_equal(ours.rowval.astype(np.int64) - 1, expected.indices)
    assert np.array_equal(ours.nzval, expected.data)


def test_with_values_shares_or_drops():
    matrix, dense = _random((5, 4), np.uint32)
    doubled = matrix.with_values(matrix.nzval * 2)
    assert doubled.colptr is matrix.colptr and doubled.rowval is matrix.rowval
    keep = matrix.nzval > 0.5
    kept = matrix.with_values(matrix.nzval, keep=keep)
    assert np.array_equal(kept.to_dense(), np.where(dense > 0.5, dense, 0))


def test_read_only_views_are_zero_copy():
    matrix, _ = _random((5, 4), np.uint32)
    frozen = matrix.read_only()
    assert not frozen.nzval.flags.writeable and np.shares_memory(frozen.nzval, matrix.nzval)
    vector = SparseVector(4, np.array([2], np.uint32), np.array([1.0])).read_only()
    assert not vector.nzind.flags.writeable
    array = np.arange(3)
    assert read_only_array(read_only_array(array)).base is array


def test_helpers():
    assert colptr_from_counts(np.array([2, 0, 1]), np.uint32).tolist() == [1, 3, 3, 4]
    assert dense_column_major(np.array([[1, 2], [3, 4]])).flags.f_contiguous


# numpy below PARALLEL_MIN_ENTRIES (300 rows: 4,000 entries), the numba kernel above (90,000 rows: 1.2 M entries).
@pytest.mark.parametrize(("indtype", "n_rows"), [(np.uint16, 300), *((indtype, n_rows) for n_rows in (300, 90_000)
                                                                    for indtype in (np.uint32, np.int32, np.int64,
                                                                                    np.uint64))])
def test_to_scipy_shifts_and_range_checks_the_indices(indtype, n_rows):
    from pydaf.errors import DafValueError

    n_columns = 40
    dense = np.zeros((n_rows, n_columns), dtype=np.float32)
    dense[::3, :] = np.arange(1, n_columns + 1, dtype=np.float32)
    reference = sp.csc_matrix(dense)
    colptr, rowval = (reference.indptr + 1).astype(indtype), (reference.indices + 1).astype(indtype)
    matrix = SparseMatrixCSC((n_rows, n_columns), colptr, rowval, reference.data)
    converted = matrix.to_scipy()
    assert converted.indices.dtype == converted.indptr.dtype == np.int32
    assert np.array_equal(converted.indices, reference.indices) and np.array_equal(converted.indptr,
                                                                                   reference.indptr)
    assert converted.data is matrix.nzval and (converted != reference).nnz == 0
    for position, bad in ((-1, n_rows + 1), (0, 0)):
        broken = rowval.copy()
        broken[position] = bad
        with pytest.raises(DafValueError, match=f"rowval must be in 1..{n_rows}"):
            SparseMatrixCSC((n_rows, n_columns), colptr, broken, reference.data).to_scipy()
    broken = colptr.copy()
    broken[-1] -= 1
    with pytest.raises(DafValueError, match="colptr"):
        SparseMatrixCSC((n_rows, n_columns), broken, rowval, reference.data).to_scipy()


def _umis(daf):
    daf.add_axis("cell", ["a", "b", "c"]).add_axis("gene", ["x", "y"])
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 2], [1, 0], [0, 3]], np.float32)),
                   relayout=False)
    return daf


@pytest.mark.parametrize("kind", ["memory", "h5df"])
def test_a_cached_scipy_matrix_can_not_be_corrupted_through_its_indices(tmp_path, kind):
    daf = _umis(pydaf.MemoryDaf() if kind == "memory" else pydaf.H5df(tmp_path / "x.h5df", "w"))
    matrix = daf.get_matrix("cell", "gene", "UMIs")
    for array in (matrix.indices, matrix.indptr):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1
    assert daf.get_matrix("cell", "gene", "UMIs").toarray().tolist() == [[0, 2], [1, 0], [0, 3]]


@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_element_wise_results_share_the_zero_based_indices_while_held(tmp_path, kind):
    # (mapped, read-only stores: a MemoryDaf may hold arrays its caller can still change, so it shares nothing)
    daf = _umis(pydaf.H5df(tmp_path / "x.h5df", "w") if kind == "h5df" else pydaf.FilesDaf(tmp_path / "x.daf", "w"))
    matrix = daf.get_matrix("cell", "gene", "UMIs")
    result = daf.get_np_query("@ cell @ gene :: UMIs % Log eps 1", cache=False)
    assert np.shares_memory(result.indices, matrix.indices) and np.shares_memory(result.indptr, matrix.indptr)
    assert np.allclose(result.toarray(), np.log(matrix.toarray() + 1))
    held = weakref.ref(matrix.indices.base if matrix.indices.base is not None else matrix.indices)
    del matrix, result
    daf.empty_cache()
    gc.collect()
    assert held() is None  # (held weakly: nothing kept once no matrix uses it)


def test_indices_that_may_change_are_never_shared():
    rowval = np.array([2, 1], dtype=np.int64)  # writable: its owner may change it between two calls
    matrix = SparseMatrixCSC((2, 2), np.array([1, 2, 3], np.int64), rowval, np.array([5.0, 6.0]))
    first = matrix.to_scipy()
    rowval[:] = [1, 2]
    second = matrix.to_scipy()
    assert not np.shares_memory(first.indices, second.indices)
    assert first.indices.tolist() == [1, 0] and second.indices.tolist() == [0, 1]
