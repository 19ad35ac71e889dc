"""The kernels name no sparse matrix type (issue 24: no ``kernels <-> sparse`` cycle): the reductions take anything
with a 1-based CSC's arrays, and the structural operations of ``pydaf.kernels.csc_arrays``, which
``SparseMatrixCSC`` wraps, give the same matrices as dense numpy indexing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from pydaf.kernels import reductions
from pydaf.kernels.csc_arrays import PlainCsc, dense_column, entry_columns, from_scipy, select, transposed
from pydaf.sparse import SparseMatrixCSC


@dataclass(frozen=True)
class OtherCsc:
    """A 1-based CSC of another library: the arrays, no methods."""

    shape: tuple[int, int]
    colptr: np.ndarray
    rowval: np.ndarray
    nzval: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.rowval.shape[0])


def _random_csc(n_rows: int, n_columns: int, density: float, seed: int, dtype=np.float64) -> SparseMatrixCSC:
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n_rows, n_columns)) < density, rng.integers(-3, 4, (n_rows, n_columns)), 0)
    return SparseMatrixCSC.from_dense(dense.astype(dtype), indtype=np.int32).read_only()


STATISTICS = ["sum", "mean", "var", "max", "min", "median", "mode", "geomean"]


@pytest.mark.parametrize("size", [(30, 20), (700, 500)], ids=["numpy", "numba"])
@pytest.mark.parametrize("statistic", STATISTICS)
def test_reductions_take_any_csc_arrays(size, statistic):
    matrix = _random_csc(*size, density=0.3, seed=len(statistic))
    other = OtherCsc(matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval)
    dense = matrix.to_dense()
    options = {"eps": 4.0} if statistic == "geomean" else {}
    groups = np.arange(size[0]) % 3
    for reduce in (reductions.reduce_columns, reductions.reduce_rows):
        expected = reduce(dense, statistic, **options)
        np.testing.assert_allclose(reduce(other, statistic, **options), expected)
        np.testing.assert_allclose(reduce(matrix, statistic, **options), expected)
    np.testing.assert_allclose(reductions.reduce_grouped_rows(other, statistic, groups, 3, **options),
                               reductions.reduce_grouped_rows(dense, statistic, groups, 3, **options))
    np.testing.assert_allclose(reductions.reduce_all(other, statistic, **options),
                               reductions.reduce_all(dense, statistic, **options))


def test_matrix_rows_and_columns_of_any_csc_arrays():
    matrix = _random_csc(5, 4, 0.5, 7)
    other = OtherCsc(matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval)
    dense = matrix.to_dense()
    assert [row.tolist() for row in reductions.matrix_rows(other)] == dense.tolist()
    assert [column.tolist() for column in reductions.matrix_columns(other)] == dense.T.tolist()


def test_scipy_input_becomes_a_plain_csc():
    csr = sp.csr_matrix(np.array([[0, 2], [3, 0], [0, 4]]))
    assert reductions.reduce_rows(csr, "sum").tolist() == [2, 3, 4]
    assert reductions.reduce_columns(csr, "max").tolist() == [3, 4]


def _dense(parts) -> np.ndarray:
    return SparseMatrixCSC(*parts).to_dense()


@pytest.mark.parametrize("rows", [[3, 1, 4], [0, 2, 0, 2], [4, 4]], ids=["unsorted", "repeated", "one twice"])
def test_select_matches_dense_indexing(rows):
    matrix = _random_csc(5, 6, 0.5, 3, np.int16)
    columns = np.array([5, 0, 2])
    parts = select(matrix, rows=np.array(rows), columns=columns)
    assert _dense(parts).tolist() == matrix.to_dense()[np.ix_(rows, columns)].tolist()
    assert parts[1].dtype == parts[2].dtype == np.int32 and parts[3].dtype == np.int16
    assert matrix.select(rows=np.array(rows), columns=columns).to_dense().tolist() == _dense(parts).tolist()


@pytest.mark.parametrize("shape", [(4, 3), (0, 3), (3, 0)])
def test_transposed_keeps_types_and_values(shape):
    matrix = _random_csc(*shape, 0.5, 5, np.float32)
    parts = transposed(matrix)
    assert parts[0] == shape[::-1]
    assert _dense(parts).tolist() == matrix.to_dense().T.tolist()
    assert (parts[1].dtype, parts[2].dtype, parts[3].dtype) == (np.int32, np.int32, np.float32)
    assert parts[1][0] == 1


def test_columns_entries_and_scipy_form():
    matrix = PlainCsc(*from_scipy(sp.coo_matrix(([5, 6, 7], ([2, 0, 1], [0, 0, 2])), shape=(3, 3)),
                                  indtype=np.uint32))
    assert matrix.colptr.tolist() == [1, 3, 3, 4] and matrix.rowval.tolist() == [1, 3, 2]
    assert matrix.colptr.dtype == np.uint32
    assert entry_columns(matrix.colptr).tolist() == [0, 0, 2]
    assert dense_column(matrix, 0).tolist() == [6, 0, 5]
    assert dense_column(matrix, 1).tolist() == [0, 0, 0]
