"""Relayout (transpose into the other memory layout) of dense and 1-based CSC matrices, written into given buffers.

Small inputs use numpy/scipy (no compilation); large ones use numba kernels that write the output in place, so a
mapped output buffer is filled without any intermediate copy. A large sparse input is transposed in column blocks, in
parallel: each block's entries per output column are counted, which gives every block its own write positions, then
the blocks scatter their entries concurrently, a wave of blocks at a time; the input pages of a finished wave are
released (:func:`~pydaf._os.maps.release_pages`) so a mapped input never stays resident as a whole.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np

from .._os.maps import populate_pages, release_pages
from .eltwise import zero_based_csc
from .threads import map_all, number_of_threads

#: Below this many elements (dense) or stored entries (sparse), numpy/scipy is faster than loading a kernel.
RELAYOUT_NUMBA_MIN_ENTRIES = 1 << 20


def _kernels() -> ModuleType:
    """The relayout kernels: importing them imports numba, so only a large relayout does."""
    return importlib.import_module(f"{__package__}._transpose")


#: Stored entries per block of a parallel sparse transpose.
_BLOCK_ENTRIES = 1 << 22


def transpose_csc_into(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray,
                       out_colptr: np.ndarray, out_rowval: np.ndarray, out_nzval: np.ndarray) -> None:
    """Write the transpose of a 1-based CSC matrix of ``shape`` (given by its ``colptr``, ``rowval`` and ``nzval``),
    as 1-based CSC, into the ``out_*`` buffers.

    Example:
        >>> colptr, rowval, nzval = np.empty(3, np.int64), np.empty(2, np.int64), np.empty(2)
        >>> transpose_csc_into((2, 3), np.array([1, 2, 2, 3]), np.array([2, 1]), np.array([5.0, 6.0]),
        ...                    colptr, rowval, nzval)
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 2, 3], [3, 1], [6.0, 5.0])
    """
    if rowval.shape[0] < RELAYOUT_NUMBA_MIN_ENTRIES:
        import scipy.sparse as sp

        # As SparseMatrixCSC.to_scipy: a same-length placeholder, so scipy doesn't copy a view of a mapped file.
        placeholder = np.broadcast_to(np.zeros(1, dtype=nzval.dtype), nzval.shape)
        csc = sp.csc_matrix((placeholder, *zero_based_csc(shape, colptr, rowval)), shape=shape, copy=False)
        csc.data = nzval
        csr = csc.tocsr()
        csr.sort_indices()
        np.add(csr.indptr, 1, out=out_colptr, casting="unsafe")
        np.add(csr.indices, 1, out=out_rowval, casting="unsafe")
        out_nzval[...] = csr.data
        return
    _transpose_csc_blocks(shape, colptr, rowval, nzval, out_colptr, out_rowval, out_nzval)


def _transpose_csc_blocks(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray,
                          out_colptr: np.ndarray, out_rowval: np.ndarray, out_nzval: np.ndarray) -> None:
    kernels = _kernels()
    n_rows, n_columns = shape
    # Column blocks of about _BLOCK_ENTRIES entries each (at least one column per block).
    wanted = np.arange(1, rowval.shape[0] + 1, _BLOCK_ENTRIES, dtype=np.int64)
    firsts = np.searchsorted(colptr, wanted, side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.maximum(firsts, 0), [n_columns]])).astype(np.int64).tolist()
    n_blocks = len(bounds) - 1
    counts = np.zeros((n_blocks, n_rows), dtype=np.int64)
    n_threads = number_of_threads()

    def entries(first: int, last: int) -> slice:
        return slice(int(colptr[bounds[first]]) - 1, int(colptr[bounds[last]]) - 1)

    for first in range(0, n_blocks, n_threads):  # A wave of blocks at a time, releasing the input it read.
        last = min(first + n_threads, n_blocks)
        map_all(lambda block: kernels.count_block_rows(colptr, rowval, bounds[block], bounds[block + 1],
                                                       counts[block]), range(first, last))
        release_pages(rowval[entries(first, last)])
    out_colptr[0] = 1
    out_colptr[1:] = np.cumsum(counts.sum(axis=0)) + 1
    # Block b writes each row's entries after those of the blocks before it.
    starts = np.cumsum(counts, axis=0)
    starts -= counts
    starts += np.asarray(out_colptr[:-1], dtype=np.int64) - 1
    populate_pages(out_rowval)
    populate_pages(out_nzval)
    for first in range(0, n_blocks, n_threads):
        last = min(first + n_threads, n_blocks)
        map_all(lambda block: kernels.scatter_block(colptr, rowval, nzval, bounds[block], bounds[block + 1],
                                                    starts[block], out_rowval, out_nzval), range(first, last))
        release_pages(rowval[entries(first, last)])
        release_pages(nzval[entries(first, last)])


def transpose_dense_into(matrix: np.ndarray, out: np.ndarray) -> None:
    """Write ``matrix.T`` into ``out`` (cache-blocked for large matrices).

    Example:
        >>> out = np.empty((3, 2), order="F")
        >>> transpose_dense_into(np.arange(6.0).reshape(2, 3), out)
        >>> out.tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    """
    if matrix.size < RELAYOUT_NUMBA_MIN_ENTRIES:
        out[...] = matrix.T
        return
    populate_pages(out)
    _kernels().transpose_dense(matrix, out)
