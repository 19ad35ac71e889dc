"""numba reorder kernel (used by :mod:`pydaf.kernels.permute`): the columns of a 1-based CSC matrix with permuted rows
and/or columns, a block of output columns per call. Serial and GIL-releasing, run on a pool of Python threads (as the
relayout kernels, for the same reason: loading them from numba's cache is faster than ``parallel=True`` ones)."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["permute_csc_columns"]


@numba.njit(cache=True, nogil=True)
def permute_csc_columns(colptr, rowval, nzval, inverse_rows, columns, out_colptr, out_rowval, out_nzval, first,
                        last):  # pragma: no cover - jit
    """Write output columns ``[first, last)``: output column ``j`` is input column ``columns[j]`` (or ``j`` when
    ``columns`` is empty), its rows moved to ``inverse_rows[row]`` (kept when ``inverse_rows`` is empty) and sorted."""
    for column in range(first, last):
        source = columns[column] if columns.shape[0] else column
        start = np.int64(colptr[source]) - 1
        end = np.int64(colptr[source + 1]) - 1
        at = np.int64(out_colptr[column]) - 1
        if inverse_rows.shape[0] == 0:
            for k in range(end - start):
                out_rowval[at + k] = rowval[start + k]
                out_nzval[at + k] = nzval[start + k]
        else:
            rows = np.empty(end - start, dtype=np.int64)
            for k in range(end - start):
                rows[k] = inverse_rows[np.int64(rowval[start + k]) - 1]
            order = np.argsort(rows)
            for k in range(end - start):
                out_rowval[at + k] = rows[order[k]] + 1
                out_nzval[at + k] = nzval[start + order[k]]
