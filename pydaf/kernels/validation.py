"""numba kernels that check the structure of 1-based sparse data as stored (Julia's ``SparseMatrixCSC`` and
``SparseVector`` invariants) before anything else indexes with it, and that sort unsorted columns in place.

Every kernel is serial over an index range and releases the GIL; :func:`first_csc_problem` and
:func:`first_sorted_problem` run ranges of it on the kernel thread pool, a wave of blocks at a time, and drop the
pages a finished wave read from the process (:func:`~pydaf._os.maps.release_pages`), so checking a large mapped
matrix leaves the resident set as it was. Each returns the *first* problem (the lowest position), so the report does
not depend on the number of threads. Nothing here trusts the data: every index is range-checked before it is used.

This module imports numba: import it only when a large input needs it (:mod:`pydaf.core.validation` does, through
:mod:`pydaf.kernels`).

Example:
    >>> import numpy as np
    >>> first_csc_problem(np.array([1, 3, 3, 4]), np.array([1, 2, 2]), 2)  # column 2 holds row 2 (fine)
    >>> first_csc_problem(np.array([1, 3, 3, 4]), np.array([2, 1, 2]), 2)  # column 0 holds rows 2, 1
    (3, 0, 1)
"""

from __future__ import annotations

import numba
import numpy as np

from .._os.maps import release_pages
from .csc_arrays import CscArrays
from .threads import map_all, number_of_threads

__all__ = ["CSC_BAD_COLPTR", "CSC_BAD_ORDER", "CSC_BAD_ROW", "first_csc_problem", "first_sorted_problem",
           "global_heap_problem", "sort_csc_columns", "transposed_mismatch"]

#: Problem kinds reported by :func:`first_csc_problem`.
CSC_BAD_COLPTR, CSC_BAD_ROW, CSC_BAD_ORDER = 1, 2, 3

#: Problem kinds reported by :func:`first_sorted_problem`.
SORTED_OUT_OF_RANGE, SORTED_BAD_ORDER = 1, 2

#: Stored entries per block (a block is checked by one thread; its pages are released when its wave is done).
BLOCK_ENTRIES = 1 << 22


@numba.njit(cache=True, nogil=True)
def csc_block_problem(colptr, rowval, n_rows, first_column, last_column):  # pragma: no cover - jit
    """The first problem in columns ``[first_column, last_column)``: ``(kind, column, position)``, kind 0 if none.
    ``colptr`` is read independently for each column, so a block can be checked before the columns before it."""
    nnz = rowval.shape[0]
    for column in range(first_column, last_column):
        start = np.int64(colptr[column])
        stop = np.int64(colptr[column + 1])
        if start < 1 or stop < start or stop > nnz + 1:
            return CSC_BAD_COLPTR, column, 0
        if stop == start:
            continue
        # Strictly increasing rows with the first >= 1 and the last <= n_rows are all in range: one comparison per
        # entry, with no branch, which LLVM vectorizes (4x faster than testing each row); the rare bad column is then
        # scanned again to say where.
        unordered = np.uint8(0)
        for position in range(start, stop - 1):
            unordered |= rowval[position] <= rowval[position - 1]
        if unordered or np.int64(rowval[start - 1]) < 1 or np.int64(rowval[stop - 2]) > n_rows:
            return column_problem(rowval, n_rows, column, start - 1, stop - 1)
    return 0, 0, 0


@numba.njit(cache=True, nogil=True)
def column_problem(rowval, n_rows, column, first, last):  # pragma: no cover - jit
    """The first bad row among ``rowval[first:last]`` (one column): ``(kind, column, position)``."""
    previous = np.int64(0)
    for position in range(first, last):
        row = np.int64(rowval[position])
        if row < 1 or row > n_rows:
            return CSC_BAD_ROW, column, position
        if row <= previous:
            return CSC_BAD_ORDER, column, position
        previous = row
    return 0, 0, 0


@numba.njit(cache=True, nogil=True)
def sorted_block_problem(indices, length, first, last):  # pragma: no cover - jit
    """The first problem in ``indices[first:last]`` (strictly increasing, in ``1..length``): ``(kind, position)``,
    kind 0 if none. The previous element is compared too, so blocks can be checked in any order."""
    if last <= first:
        return 0, 0
    unordered = np.uint8(0)
    for position in range(first + 1, last):  # branch-free, as in csc_block_problem
        unordered |= indices[position] <= indices[position - 1]
    if not unordered and np.int64(indices[first]) >= 1 and np.int64(indices[last - 1]) <= length and (
            first == 0 or np.int64(indices[first]) > np.int64(indices[first - 1])):
        return 0, 0
    previous = np.int64(indices[first - 1]) if first > 0 else np.int64(0)
    for position in range(first, last):
        index = np.int64(indices[position])
        if index < 1 or index > length:
            return SORTED_OUT_OF_RANGE, position
        if index <= previous:
            return SORTED_BAD_ORDER, position
        previous = index
    return 0, 0


@numba.njit(cache=True, nogil=True)
def sort_csc_block(colptr, rowval, nzval, first_column, last_column):  # pragma: no cover - jit
    """Sort the entries of each column of ``[first_column, last_column)`` by row, in place (a stable sort, so equal
    rows keep their order). ``colptr`` must be valid."""
    for column in range(first_column, last_column):
        start = np.int64(colptr[column]) - 1
        stop = np.int64(colptr[column + 1]) - 1
        sorted_already = True
        for position in range(start + 1, stop):
            if rowval[position] < rowval[position - 1]:
                sorted_already = False
                break
        if sorted_already:
            continue
        order = np.argsort(rowval[start:stop], kind="mergesort") + start
        rows = rowval[order]
        values = nzval[order]
        rowval[start:stop] = rows
        nzval[start:stop] = values


def _kernel_indices(indices: np.ndarray) -> np.ndarray:
    """Indices as the kernels take them, so every index type shares two compiled specializations: 4-byte integers as
    ``uint32`` (a negative ``int32`` becomes a huge value, still out of range), 8-byte ones as ``int64`` (a ``uint64``
    above ``2**63`` becomes negative, still out of range), others converted."""
    if indices.dtype.itemsize == 4 and indices.dtype.kind in "iu":
        view = indices.view(np.uint32)
    elif indices.dtype.itemsize == 8 and indices.dtype.kind in "iu":
        view = indices.view(np.int64)
    else:
        view = indices.astype(np.int64)
    view.flags.writeable = False
    return view


def _column_blocks(colptr: np.ndarray, nnz: int) -> list[int]:
    """Column bounds of blocks of about :data:`BLOCK_ENTRIES` entries each (``colptr`` must be non-decreasing)."""
    n_columns = colptr.shape[0] - 1
    wanted = np.arange(1, nnz + 1, BLOCK_ENTRIES, dtype=np.int64)
    firsts = np.searchsorted(colptr, wanted, side="right") - 1
    return np.unique(np.concatenate([[0], np.clip(firsts, 0, n_columns), [n_columns]])).astype(np.int64).tolist()


def first_csc_problem(colptr: np.ndarray, rowval: np.ndarray, n_rows: int) -> tuple[int, int, int] | None:
    """The first problem of a 1-based CSC structure whose ``colptr`` starts at 1, ends at ``nnz + 1`` and never
    decreases (checked by the caller): ``(kind, column, position)`` with kind :data:`CSC_BAD_ROW` (a row outside
    ``1..n_rows``) or :data:`CSC_BAD_ORDER` (rows not strictly increasing within the column), or ``None``.

    Example:
        >>> first_csc_problem(np.array([1, 2, 3]), np.array([1, 5]), 3)
        (2, 1, 1)
    """
    colptr_view, rowval_view = _kernel_indices(colptr), _kernel_indices(rowval)
    bounds = _column_blocks(colptr_view, rowval.shape[0])
    n_blocks = len(bounds) - 1
    n_threads = number_of_threads()
    for first in range(0, n_blocks, n_threads):  # a wave of blocks at a time, releasing what it read
        last = min(first + n_threads, n_blocks)
        found = map_all(  # (a single block runs on this thread)
            lambda block: csc_block_problem(colptr_view, rowval_view, n_rows, bounds[block], bounds[block + 1]),
            range(first, last))
        release_pages(rowval[int(colptr_view[bounds[first]]) - 1:int(colptr_view[bounds[last]]) - 1])
        problems = [problem for problem in found if problem[0]]
        if problems:
            return min(problems, key=lambda problem: problem[1])
    release_pages(colptr)
    return None


def first_sorted_problem(indices: np.ndarray, length: int) -> tuple[int, int] | None:
    """The first position where ``indices`` are not strictly increasing in ``1..length``: ``(kind, position)`` with
    kind :data:`SORTED_OUT_OF_RANGE` or :data:`SORTED_BAD_ORDER`, or ``None``.

    Example:
        >>> first_sorted_problem(np.array([1, 3, 3], np.uint32), 5)
        (2, 2)
    """
    view = _kernel_indices(indices)
    size = view.shape[0]
    bounds = [*range(0, size, BLOCK_ENTRIES), size]
    n_blocks = len(bounds) - 1
    n_threads = number_of_threads()
    for first in range(0, n_blocks, n_threads):
        last = min(first + n_threads, n_blocks)
        found = map_all(
            lambda block: sorted_block_problem(view, length, bounds[block], bounds[block + 1]), range(first, last))
        release_pages(indices[bounds[first]:bounds[last]])
        problems = [problem for problem in found if problem[0]]
        if problems:
            return min(problems, key=lambda problem: problem[1])
    return None


def sort_csc_columns(colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray) -> None:
    """Sort the entries of every column of a 1-based CSC matrix by row, in place (``colptr`` must be valid and the
    rows in range). Columns that are sorted already are left untouched.

    Example:
        >>> rowval, nzval = np.array([3, 1, 2]), np.array([30.0, 10.0, 20.0])
        >>> sort_csc_columns(np.array([1, 3, 4]), rowval, nzval)
        >>> rowval.tolist(), nzval.tolist()
        ([1, 3, 2], [10.0, 30.0, 20.0])
    """
    bounds = _column_blocks(_kernel_indices(colptr), rowval.shape[0])
    map_all(lambda block: sort_csc_block(colptr, rowval, nzval, bounds[block], bounds[block + 1]),
            range(len(bounds) - 1))


@numba.njit(cache=True, nogil=True)
def transposed_mismatch_block(colptr, rowval, nzval, other_colptr, other_rowval, other_nzval, first_column,
                              last_column, cursor):  # pragma: no cover - jit
    """Walk the entries of columns ``[first_column, last_column)`` of ``A`` (1-based CSC), checking each is the next
    entry of its row's column of ``B``, ``A``'s other layout (``B = A.T``, CSC): ``cursor[row]`` is the position of
    the next expected entry of ``B``'s column ``row``, advanced as entries match. Returns ``(column, position)`` of
    the first entry of ``A`` that does not match, or ``(-1, -1)``. Both structures must be valid; NaN matches NaN."""
    for column in range(first_column, last_column):
        for position in range(np.int64(colptr[column]) - 1, np.int64(colptr[column + 1]) - 1):
            row = np.int64(rowval[position]) - 1
            other = cursor[row]
            if other >= np.int64(other_colptr[row + 1]) - 1 or np.int64(other_rowval[other]) != column + 1:
                return column, position
            value = nzval[position]
            other_value = other_nzval[other]
            if value != other_value and not (value != value and other_value != other_value):
                return column, position
            cursor[row] = other + 1
    return -1, -1


def transposed_mismatch(matrix: CscArrays, other: CscArrays) -> tuple[int, int] | None:
    """Where two valid 1-based CSC matrices fail to be each other's transpose, streaming (no transposed copy is made;
    memory is one cursor per row of ``matrix``): ``(row, column)`` (0-based, in ``matrix``) of the first difference,
    or ``None`` if ``other == matrix.T``, values included (NaN equals NaN).

    Example:
        >>> from pydaf.sparse import SparseMatrixCSC
        >>> m = SparseMatrixCSC((2, 3), np.array([1, 2, 2, 3]), np.array([2, 1]), np.array([5.0, 6.0]))
        >>> transposed_mismatch(m, m.transpose()) is None
        True
        >>> transposed_mismatch(m, m.transpose().with_values(np.array([6.0, 7.0])))
        (1, 0)
    """
    colptr, rowval = _kernel_indices(matrix.colptr), _kernel_indices(matrix.rowval)
    other_colptr, other_rowval = _kernel_indices(other.colptr), _kernel_indices(other.rowval)
    nzval, other_nzval = _kernel_values(matrix.nzval), _kernel_values(other.nzval)
    cursor = other_colptr[:-1].astype(np.int64) - 1
    bounds = _column_blocks(colptr, rowval.shape[0])
    for block in range(len(bounds) - 1):  # serial (the cursors), releasing what each block read of ``matrix``
        column, position = transposed_mismatch_block(colptr, rowval, nzval, other_colptr, other_rowval, other_nzval,
                                                     bounds[block], bounds[block + 1], cursor)
        entries = slice(int(colptr[bounds[block]]) - 1, int(colptr[bounds[block + 1]]) - 1)
        release_pages(matrix.rowval[entries])
        release_pages(matrix.nzval[entries])
        if column >= 0:
            return int(rowval[position]) - 1, int(column)
    release_pages(other.rowval)
    release_pages(other.nzval)
    left = np.flatnonzero(cursor != other_colptr[1:].astype(np.int64) - 1)
    if left.size:  # ``other`` has an entry ``matrix`` does not
        row = int(left[0])
        return row, int(other_rowval[cursor[row]]) - 1
    return None


def _kernel_values(values: np.ndarray) -> np.ndarray:
    """Values as the kernels take them: Bool as ``uint8``, in a read-only view (one specialization per type)."""
    view = values.view(np.uint8) if values.dtype == np.bool_ else values.view()
    view.flags.writeable = False
    return view


@numba.njit(cache=True, nogil=True)
def global_heap_problem(data, starts, sizes):  # pragma: no cover - jit
    """The position (in ``starts``) of the first HDF5 global heap collection whose object walk would not end at its
    end (see :mod:`pydaf.formats.h5df.global_heap`, which checked each collection lies in ``data``), or -1."""
    for collection in range(starts.shape[0]):
        position = starts[collection] + 16
        end = starts[collection] + sizes[collection]
        while position + 16 <= end:
            index = np.int64(data[position]) | (np.int64(data[position + 1]) << 8)
            size = np.int64(0)
            for byte in range(8):
                size |= np.int64(data[position + 8 + byte]) << (8 * byte)
            if size < 0:  # (past 2**63: past any end)
                return collection
            if index == 0:
                if size < 16:
                    return collection
                need = size
            else:
                if size > end:
                    return collection
                need = 16 + (size + 7) // 8 * 8
            if need > end - position:
                return collection
            position += need
    return -1
