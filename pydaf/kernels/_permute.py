"""numba reorder kernels (used by :mod:`pydaf.kernels.permute`): the columns of a dense column-major matrix, or of a
1-based CSC matrix, with permuted rows and/or columns, a block of output columns per call. Serial and GIL-releasing,
run on a pool of Python threads (as the relayout kernels, for the same reason: loading them from numba's cache is
faster than ``parallel=True`` ones)."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["count_csc_rows", "gather_csc_rows", "gather_dense_columns", "permute_csc_columns", "permute_csc_rows"]


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


@numba.njit(cache=True, nogil=True)
def permute_csc_rows(colptr, rowval, nzval, inverse_rows, columns, out_colptr, out_rowval, out_nzval, first, last,
                     counts, new_rows, values, block_columns, order):  # pragma: no cover - jit
    """As :func:`permute_csc_columns` with permuted rows (``inverse_rows`` not empty), without sorting: the entries of
    output columns ``[first, last)`` are read once, in order, into the block's scratch (``new_rows``, ``values``,
    ``block_columns``, ``order``: room for the block's entries), bucketed by their new row (a counting sort:
    ``counts`` has one more entry than there are rows), then written in that order to their columns, which leaves
    each column's rows increasing."""
    n_rows = counts.shape[0] - 1
    counts[:] = 0
    n_entries = 0
    for column in range(first, last):
        source = columns[column] if columns.shape[0] else column
        for k in range(np.int64(colptr[source]) - 1, np.int64(colptr[source + 1]) - 1):
            row = inverse_rows[np.int64(rowval[k]) - 1]
            new_rows[n_entries] = row
            values[n_entries] = nzval[k]
            block_columns[n_entries] = column - first
            counts[row + 1] += 1
            n_entries += 1
    for row in range(n_rows):
        counts[row + 1] += counts[row]
    for entry in range(n_entries):
        row = new_rows[entry]
        at = counts[row]
        counts[row] = at + 1
        order[at] = entry
    next_at = np.empty(last - first, dtype=np.int64)
    for column in range(first, last):
        next_at[column - first] = np.int64(out_colptr[column]) - 1
    for at in range(n_entries):
        entry = order[at]
        column = block_columns[entry]
        to = next_at[column]
        next_at[column] = to + 1
        out_rowval[to] = new_rows[entry] + 1
        out_nzval[to] = values[entry]


@numba.njit(cache=True, nogil=True)
def gather_dense_columns(source, rows, columns, out, first):  # pragma: no cover - jit
    """``out[:, k] = source[rows, columns[first + k]]`` for each column ``k`` of ``out`` (column-major ``source`` and
    ``out``; an empty ``rows`` or ``columns`` keeps that side). Returns a count that only keeps the column's first
    pass from being optimized away."""
    touched = 0
    step = max(1, 64 // source.itemsize)
    for k in range(out.shape[1]):
        column = columns[first + k] if columns.shape[0] else first + k
        if rows.shape[0]:
            # (one read per cache line, in order, brings the column into the cache at the prefetcher's speed before
            # the random gather: 30-40% faster than gathering it from memory)
            for i in range(0, out.shape[0], step):
                touched += source[i, column] != 0
            for i in range(out.shape[0]):
                out[i, k] = source[rows[i], column]
        else:
            for i in range(out.shape[0]):
                out[i, k] = source[i, column]
    return touched


@numba.njit(cache=True, nogil=True)
def count_csc_rows(colptr, rowval, new_rows, counts, first, last):  # pragma: no cover - jit
    """``counts[column]``: how many entries of each column in ``[first, last)`` are in a selected row
    (``new_rows[row - 1] >= 0``)."""
    for column in range(first, last):
        kept = 0
        for entry in range(np.int64(colptr[column]) - 1, np.int64(colptr[column + 1]) - 1):
            if new_rows[np.int64(rowval[entry]) - 1] >= 0:
                kept += 1
        counts[column] = kept


@numba.njit(cache=True, nogil=True)
def gather_csc_rows(colptr, rowval, nzval, new_rows, out_colptr, out_rowval, out_nzval, first, last,
                    sort):  # pragma: no cover - jit
    """Write the selected entries of the columns ``[first, last)``, each row renumbered ``new_rows[row - 1] + 1``
    (sorted within each column if ``sort``: the rows were selected out of order)."""
    for column in range(first, last):
        at = np.int64(out_colptr[column]) - 1
        begin = at
        for entry in range(np.int64(colptr[column]) - 1, np.int64(colptr[column + 1]) - 1):
            row = new_rows[np.int64(rowval[entry]) - 1]
            if row >= 0:
                out_rowval[at] = row + 1
                out_nzval[at] = nzval[entry]
                at += 1
        if sort and at - begin > 1:
            order = np.argsort(out_rowval[begin:at])
            out_rowval[begin:at] = out_rowval[begin:at][order]
            out_nzval[begin:at] = out_nzval[begin:at][order]
