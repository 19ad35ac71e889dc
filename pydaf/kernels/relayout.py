"""Relayout (transpose into the other memory layout) of dense and 1-based CSC matrices, written into given buffers.

Small inputs use numpy/scipy (no compilation); large ones use numba kernels that stream through the input once and
write the output in place, so a mapped output buffer is filled without any intermediate copy.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..sparse import SparseMatrixCSC

#: Below this many elements (dense) or stored entries (sparse), numpy is faster than compiling a kernel.
NUMBA_THRESHOLD = 1 << 20


@cache
def _kernels():
    import numba

    @numba.njit(cache=True, nogil=True)
    def transpose_csc(n_rows, colptr, rowval, nzval, out_colptr, out_rowval, out_nzval):  # pragma: no cover - jit
        n_cols = colptr.shape[0] - 1
        counts = np.zeros(n_rows + 1, dtype=np.int64)
        for k in range(rowval.shape[0]):
            counts[rowval[k]] += 1
        out_colptr[0] = 1
        for row in range(n_rows):
            out_colptr[row + 1] = out_colptr[row] + counts[row + 1]
        position = np.empty(n_rows, dtype=np.int64)
        for row in range(n_rows):
            position[row] = out_colptr[row] - 1
        for column in range(n_cols):
            for k in range(colptr[column] - 1, colptr[column + 1] - 1):
                row = rowval[k] - 1
                destination = position[row]
                out_rowval[destination] = column + 1
                out_nzval[destination] = nzval[k]
                position[row] = destination + 1

    @numba.njit(cache=True, nogil=True)
    def transpose_dense(matrix, out):  # pragma: no cover - jit
        n_rows, n_cols = matrix.shape
        block = 64
        for column_start in range(0, n_cols, block):
            column_end = min(column_start + block, n_cols)
            for row_start in range(0, n_rows, block):
                row_end = min(row_start + block, n_rows)
                for row in range(row_start, row_end):
                    for column in range(column_start, column_end):
                        out[column, row] = matrix[row, column]

    return transpose_csc, transpose_dense


def transpose_csc_into(matrix: SparseMatrixCSC, colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray) -> None:
    """Write the transpose of a 1-based CSC matrix, as 1-based CSC, into the given buffers.

    Example:
        >>> m = SparseMatrixCSC((2, 3), np.array([1, 2, 2, 3]), np.array([2, 1]), np.array([5.0, 6.0]))
        >>> colptr, rowval, nzval = np.empty(3, np.int64), np.empty(2, np.int64), np.empty(2)
        >>> transpose_csc_into(m, colptr, rowval, nzval)
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 2, 3], [3, 1], [6.0, 5.0])
    """
    n_rows = matrix.shape[0]
    if matrix.nnz < NUMBA_THRESHOLD:
        csr = matrix.to_scipy().tocsr()
        csr.sort_indices()
        np.add(csr.indptr, 1, out=colptr, casting="unsafe")
        np.add(csr.indices, 1, out=rowval, casting="unsafe")
        nzval[...] = csr.data
        return
    transpose_csc, _ = _kernels()
    transpose_csc(n_rows, matrix.colptr, matrix.rowval, matrix.nzval, colptr, rowval, nzval)


def transpose_dense_into(matrix: np.ndarray, out: np.ndarray) -> None:
    """Write ``matrix.T`` into ``out`` (cache-blocked for large matrices).

    Example:
        >>> out = np.empty((3, 2), order="F")
        >>> transpose_dense_into(np.arange(6.0).reshape(2, 3), out)
        >>> out.tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    """
    if matrix.size < NUMBA_THRESHOLD:
        out[...] = matrix.T
        return
    _, transpose_dense = _kernels()
    transpose_dense(matrix, out)
