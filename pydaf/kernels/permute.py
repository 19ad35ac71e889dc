"""Permuting the entries of an axis in stored vectors and matrices (for :func:`pydaf.reorder_axes`), written into
given buffers so a memory-mapped or freshly allocated destination is filled in one pass with bounded extra memory.

Permutations are 0-based: entry ``i`` of the result is entry ``permutation[i]`` of the source. Sparse data is 1-based
(Julia's layout), and its moved rows are found through the inverse permutation (``inverse[old] = new``).
"""

from __future__ import annotations

import importlib
import itertools
from types import ModuleType

import numpy as np

from .threads import number_of_threads, thread_pool

#: Elements per block of a dense matrix permutation (a block's gather is one temporary of this size).
_DENSE_BLOCK_ELEMENTS = 1 << 22

#: Below this many stored entries numpy is faster than loading the numba kernel.
PERMUTE_NUMBA_MIN_ENTRIES = 1 << 20

#: Stored entries per block of a parallel sparse permutation.
_SPARSE_BLOCK_ENTRIES = 1 << 22


def _kernels() -> ModuleType:
    """The numba kernel: importing it imports numba, so only a large permutation does."""
    return importlib.import_module(f"{__package__}._permute")


def permute_vector_into(source: np.ndarray, permutation: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = source[permutation[i]]`` for a dense vector (numbers or strings).

    Example:
        >>> out = np.empty(3, dtype=np.int64)
        >>> permute_vector_into(np.array([10, 20, 30]), np.array([2, 0, 1]), out)
        >>> out.tolist()
        [30, 10, 20]
    """
    # (mode "clip": the permutation is valid, and numpy's default "raise" gathers into a temporary and copies it to
    # ``out``: 2.5x slower for a 10,000-entry column)
    np.take(source, permutation, out=out, mode="clip")


def permute_sparse_vector_into(nzind: np.ndarray, nzval: np.ndarray, inverse_permutation: np.ndarray,
                               out_nzind: np.ndarray, out_nzval: np.ndarray) -> None:
    """The stored entries of a 1-based sparse vector whose entry ``j`` moves to ``inverse_permutation[j]``.

    Example:
        >>> out_nzind, out_nzval = np.empty(2, dtype=np.int64), np.empty(2)
        >>> permute_sparse_vector_into(np.array([1, 3]), np.array([5.0, 7.0]), np.array([1, 2, 0]), out_nzind,
        ...                            out_nzval)
        >>> out_nzind.tolist(), out_nzval.tolist()
        ([1, 2], [7.0, 5.0])
    """
    positions = np.take(inverse_permutation, np.asarray(nzind, dtype=np.int64) - 1)
    order = np.argsort(positions, kind="stable")
    np.add(positions[order], 1, out=out_nzind, casting="unsafe")
    np.take(nzval, order, out=out_nzval)


def permute_dense_matrix_into(source: np.ndarray, rows_permutation: np.ndarray | None,
                              columns_permutation: np.ndarray | None, out: np.ndarray) -> None:
    """``out[i, j] = source[rows_permutation[i], columns_permutation[j]]`` (an absent permutation keeps that side),
    a block of columns at a time.

    Example:
        >>> out = np.empty((2, 3), order="F")
        >>> permute_dense_matrix_into(np.asfortranarray(np.arange(6.0).reshape(2, 3)), np.array([1, 0]),
        ...                           np.array([2, 0, 1]), out)
        >>> out.tolist()
        [[5.0, 3.0, 4.0], [2.0, 0.0, 1.0]]
    """
    n_rows, n_columns = source.shape
    block = max(1, _DENSE_BLOCK_ELEMENTS // max(n_rows, 1))
    for start in range(0, n_columns, block):
        end = min(start + block, n_columns)
        if columns_permutation is None:
            columns = source[:, start:end]
        else:
            columns = np.take(source, columns_permutation[start:end], axis=1)
        if rows_permutation is not None:
            columns = np.take(columns, rows_permutation, axis=0)
        out[:, start:end] = columns


def permute_csc_into(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray,
                     inverse_rows_permutation: np.ndarray | None, columns_permutation: np.ndarray | None,
                     out_colptr: np.ndarray, out_rowval: np.ndarray, out_nzval: np.ndarray) -> None:
    """A 1-based CSC matrix of ``shape`` with its rows moved (row ``r`` to ``inverse_rows_permutation[r]``) and/or its
    columns permuted (column ``j`` of the result is column ``columns_permutation[j]``), written into the ``out_*``
    buffers (of the input's lengths); rows stay sorted within each column.

    Example:
        >>> colptr, rowval, nzval = np.empty(3, np.int64), np.empty(3, np.int64), np.empty(3)
        >>> permute_csc_into((2, 2), np.array([1, 3, 4]), np.array([1, 2, 2]), np.array([1.0, 2.0, 3.0]),
        ...                  np.array([1, 0]), np.array([1, 0]), colptr, rowval, nzval)
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 2, 4], [1, 1, 2], [3.0, 2.0, 1.0])
    """
    n_columns = shape[1]
    lengths = np.diff(np.asarray(colptr, dtype=np.int64))
    if columns_permutation is not None:
        lengths = lengths[columns_permutation]
    out_colptr[0] = 1
    np.add(np.cumsum(lengths), 1, out=out_colptr[1:], casting="unsafe")
    if rowval.shape[0] < PERMUTE_NUMBA_MIN_ENTRIES:
        _permute_csc_numpy(colptr, rowval, nzval, lengths, inverse_rows_permutation, columns_permutation,
                           out_colptr, out_rowval, out_nzval)
        return
    kernels = _kernels()
    no_permutation = np.empty(0, dtype=np.int64)
    inverse_rows = no_permutation if inverse_rows_permutation is None else inverse_rows_permutation
    columns = no_permutation if columns_permutation is None else columns_permutation
    # Output column blocks of about _SPARSE_BLOCK_ENTRIES entries each, run a wave of threads at a time.
    wanted = np.arange(1, rowval.shape[0] + 1, _SPARSE_BLOCK_ENTRIES, dtype=np.int64)
    firsts = np.searchsorted(out_colptr, wanted, side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(firsts, 0, n_columns), [n_columns]])).astype(np.int64).tolist()
    pool = thread_pool()
    n_threads = number_of_threads()
    blocks = list(itertools.pairwise(bounds))
    for wave in range(0, len(blocks), n_threads):
        list(pool.map(lambda block: kernels.permute_csc_columns(colptr, rowval, nzval, inverse_rows, columns,
                                                                out_colptr, out_rowval, out_nzval, *block),
                      blocks[wave:wave + n_threads]))


def _permute_csc_numpy(colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray, lengths: np.ndarray,
                       inverse_rows_permutation: np.ndarray | None, columns_permutation: np.ndarray | None,
                       out_colptr: np.ndarray, out_rowval: np.ndarray, out_nzval: np.ndarray) -> None:
    starts = np.asarray(colptr[:-1], dtype=np.int64) - 1
    if columns_permutation is not None:
        starts = starts[columns_permutation]
    out_starts = np.asarray(out_colptr[:-1], dtype=np.int64) - 1
    # The source position of each output entry, before sorting the rows of each column.
    sources = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(out_starts - starts, lengths)
    rows = np.asarray(rowval, dtype=np.int64)[sources] - 1
    if inverse_rows_permutation is not None:
        rows = inverse_rows_permutation[rows]
        order = np.lexsort((rows, np.repeat(np.arange(len(lengths)), lengths)))
        rows, sources = rows[order], sources[order]
    np.add(rows, 1, out=out_rowval, casting="unsafe")
    np.take(nzval, sources, out=out_nzval)
