"""numba relayout kernels (used by :mod:`pydaf.kernels.relayout`): a cache-blocked dense transpose, and the two passes
of a blocked parallel CSC transpose (count each block's entries per row, then scatter them). Serial, GIL-releasing
kernels run on a pool of Python threads: loading them from numba's cache is ~1 s faster per process than loading
``parallel=True`` ones, which dominates a conversion."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["count_block_rows", "scatter_block", "transpose_dense"]


@numba.njit(cache=True, nogil=True)
def transpose_dense(matrix, out):  # pragma: no cover - jit
    """``out[...] = matrix.T``, in 64 x 64 tiles (both sides of a tile stay in cache)."""
    n_rows, n_cols = matrix.shape
    block = 64
    for column_start in range(0, n_cols, block):
        column_end = min(column_start + block, n_cols)
        for row_start in range(0, n_rows, block):
            row_end = min(row_start + block, n_rows)
            for row in range(row_start, row_end):
                for column in range(column_start, column_end):
                    out[column, row] = matrix[row, column]


@numba.njit(cache=True, nogil=True)
def count_block_rows(colptr, rowval, first_column, last_column, counts):  # pragma: no cover - jit
    """Count the entries of each row in the columns ``[first_column, last_column)`` (1-based CSC)."""
    for k in range(np.int64(colptr[first_column]) - 1, np.int64(colptr[last_column]) - 1):
        counts[rowval[k] - 1] += 1


@numba.njit(cache=True, nogil=True)
def scatter_block(colptr, rowval, nzval, first_column, last_column, position, out_rowval,
                  out_nzval):  # pragma: no cover - jit
    """Write the entries of the columns ``[first_column, last_column)`` into the transpose, row ``r``'s next at
    ``position[r]`` (advanced as it goes)."""
    for column in range(first_column, last_column):
        for k in range(np.int64(colptr[column]) - 1, np.int64(colptr[column + 1]) - 1):
            row = rowval[k] - 1
            destination = position[row]
            out_rowval[destination] = column + 1
            out_nzval[destination] = nzval[k]
            position[row] = destination + 1
