"""numba kernels of Julia's ``Significant`` element-wise operation, per column of a 1-based CSC matrix (a dense
column-major matrix is passed as the CSC of all its values: ``colptr = 1 + n_rows * j`` and no ``rowval``).

A column keeps the values ``v`` that are not ``-low < v < low`` if any of its values is not ``-high < v < high``
(NaN is neither), else none; zeros are dropped. The bounds are in the values' type (for unsigned types ``-high``
wraps around, as in Julia). Two passes per column range: count what each column keeps, then (once the output's
``colptr`` is known) write it; each re-reads its columns, which stay in cache.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["fill_kept", "kept_counts"]


@numba.njit(inline="always")
def _has_high(values, start, stop, negative_high, high):  # pragma: no cover - jit
    for index in range(start, stop):
        value = values[index]
        if not (negative_high < value and value < high):
            return True
    return False


@numba.njit(inline="always")
def _keeps(value, negative_low, low):  # pragma: no cover - jit
    return value != 0 and not (negative_low < value and value < low)


@numba.njit(cache=True, nogil=True)
def kept_counts(first_column, last_column, colptr, values, negative_high, high, negative_low, low,
                counts):  # pragma: no cover - jit
    """The number of values each column keeps."""
    for column in range(first_column, last_column):
        start = np.int64(colptr[column]) - 1
        stop = np.int64(colptr[column + 1]) - 1
        count = 0
        if _has_high(values, start, stop, negative_high, high):
            for index in range(start, stop):
                count += _keeps(values[index], negative_low, low)
        counts[column] = count


@numba.njit(cache=True, nogil=True)
def fill_kept(first_column, last_column, colptr, rowval, values, negative_high, high, negative_low, low, out_colptr,
              out_rowval, out_nzval):  # pragma: no cover - jit
    """Write the kept values of each column (and their 1-based rows) from ``out_colptr[column] - 1`` on."""
    dense = rowval.shape[0] == 0
    for column in range(first_column, last_column):
        start = np.int64(colptr[column]) - 1
        stop = np.int64(colptr[column + 1]) - 1
        if not _has_high(values, start, stop, negative_high, high):
            continue
        position = np.int64(out_colptr[column]) - 1
        for index in range(start, stop):
            value = values[index]
            if _keeps(value, negative_low, low):
                out_rowval[position] = index - start + 1 if dense else rowval[index]
                out_nzval[position] = value
                position += 1
