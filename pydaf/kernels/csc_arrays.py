"""A 1-based CSC matrix as its arrays: the :class:`CscArrays` protocol the kernels take, and the structural operations
on those arrays (entry columns, a column, a selection, the transpose, the 1-based form of a scipy matrix).

The kernels sit below :class:`~pydaf.sparse.SparseMatrixCSC`, so they name no matrix type: they take anything with a
``shape``, ``colptr``, ``rowval`` and ``nzval`` (a ``SparseMatrixCSC`` is one), and the operations here return the
arrays of their result, from which the caller builds its own type: ``SparseMatrixCSC`` wraps them in its methods, the
reductions in a :class:`PlainCsc`. Nothing here imports numba (a large transpose does, through :mod:`.relayout`).

Example:
    >>> import numpy as np
    >>> matrix = PlainCsc((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3]))
    >>> entry_columns(matrix.colptr).tolist(), dense_column(matrix, 0).tolist()
    ([0, 0, 1], [1, 0, 2])
    >>> shape, colptr, rowval, nzval = transposed(matrix)
    >>> shape, colptr.tolist(), rowval.tolist(), nzval.tolist()
    ((2, 3), [1, 2, 3, 4], [1, 2, 1], [1, 3, 2])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .eltwise import zero_based_csc
from .relayout import transpose_csc_into

__all__ = ["CscArrays", "CscParts", "PlainCsc", "colptr_from_counts", "column_range", "dense_column", "entry_columns",
           "from_scipy", "select", "transposed"]

#: The parts of a 1-based CSC matrix, as its constructor takes them: ``shape``, ``colptr``, ``rowval``, ``nzval``.
CscParts = tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]


class CscArrays(Protocol):
    """The arrays of a 1-based CSC matrix of ``shape`` with ``nnz`` stored entries (a
    :class:`~pydaf.sparse.SparseMatrixCSC` is one)."""

    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def colptr(self) -> np.ndarray: ...

    @property
    def rowval(self) -> np.ndarray: ...

    @property
    def nzval(self) -> np.ndarray: ...

    @property
    def nnz(self) -> int: ...


@dataclass(frozen=True, eq=False)
class PlainCsc:
    """A 1-based CSC matrix that is only its arrays: what the reductions make of a scipy input or a transpose."""

    shape: tuple[int, int]
    colptr: np.ndarray
    rowval: np.ndarray
    nzval: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.rowval.shape[0])


def colptr_from_counts(counts: np.ndarray, dtype: Any) -> np.ndarray:
    """The 1-based ``colptr`` (of ``dtype``) of columns holding ``counts`` stored entries.

    Example:
        >>> colptr_from_counts(np.array([2, 0, 1]), np.uint32).tolist()
        [1, 3, 3, 4]
    """
    colptr = np.empty(np.shape(counts)[0] + 1, dtype=dtype)
    colptr[0] = 1
    colptr[1:] = np.cumsum(counts, dtype=np.int64) + 1
    return colptr


def entry_columns(colptr: np.ndarray) -> np.ndarray:
    """The 0-based column of each stored entry (``int64``).

    Example:
        >>> entry_columns(np.array([1, 3, 3, 4])).tolist()
        [0, 0, 2]
    """
    counts: np.ndarray = np.diff(colptr.astype(np.int64))
    return np.repeat(np.arange(colptr.shape[0] - 1, dtype=np.int64), counts)


def column_range(colptr: np.ndarray, column: int) -> slice:
    """The positions (in ``rowval``/``nzval``) of the stored entries of a 0-based column.

    Example:
        >>> column_range(np.array([1, 3, 3, 4]), 0)
        slice(0, 2, None)
    """
    return slice(int(colptr[column]) - 1, int(colptr[column + 1]) - 1)


def dense_column(matrix: CscArrays, column: int) -> np.ndarray:
    """A 0-based column as a new dense vector.

    Example:
        >>> dense_column(PlainCsc((3, 1), np.array([1, 2]), np.array([2]), np.array([5])), 0).tolist()
        [0, 5, 0]
    """
    dense = np.zeros(matrix.shape[0], dtype=matrix.nzval.dtype)
    entries = column_range(matrix.colptr, column)
    dense[matrix.rowval[entries].astype(np.intp) - 1] = matrix.nzval[entries]
    return dense


def select(matrix: CscArrays, *, rows: np.ndarray | None = None, columns: np.ndarray | None = None) -> CscParts:
    """The sub-matrix of the given 0-based rows and columns, in the given orders (new arrays of the same index and
    value types).

    Example:
        >>> m = PlainCsc((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3]))
        >>> shape, colptr, rowval, nzval = select(m, rows=np.array([2, 1]), columns=np.array([1, 0]))
        >>> shape, colptr.tolist(), rowval.tolist(), nzval.tolist()
        ((2, 2), [1, 2, 3], [2, 1], [3, 2])
    """
    parts: CscParts = (matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval)
    if columns is not None:
        parts = _select_columns(parts, np.asarray(columns, dtype=np.int64))
    if rows is not None:
        parts = _select_rows(parts, np.asarray(rows, dtype=np.int64))
    return parts


def _select_columns(parts: CscParts, columns: np.ndarray) -> CscParts:
    from .permute import gather_csc_columns

    shape, colptr, rowval, nzval = parts
    return (shape[0], int(columns.shape[0])), *gather_csc_columns(colptr, rowval, nzval, columns)


def _select_rows(parts: CscParts, rows: np.ndarray) -> CscParts:
    shape, colptr, rowval, nzval = parts
    if np.unique(rows).shape[0] != rows.shape[0]:
        # A repeated row repeats its entries: a selection matrix product does that (rare; copies).
        import scipy.sparse as sp

        scipy_matrix = sp.csc_matrix((nzval, *zero_based_csc(shape, colptr, rowval)), shape=shape)
        return from_scipy(scipy_matrix[rows, :], indtype=colptr.dtype)
    from .permute import gather_csc_rows

    return (int(rows.shape[0]), shape[1]), *gather_csc_rows(shape, colptr, rowval, nzval, rows)


def transposed(matrix: CscArrays) -> CscParts:
    """The transpose, as new 1-based CSC arrays of the same index and value types.

    Example:
        >>> shape, colptr, rowval, nzval = transposed(PlainCsc((2, 3), np.array([1, 2, 2, 3]), np.array([2, 1]),
        ...                                                    np.array([5.0, 6.0])))
        >>> shape, colptr.tolist(), rowval.tolist(), nzval.tolist()
        ((3, 2), [1, 2, 3], [3, 1], [6.0, 5.0])
    """
    n_rows, n_columns = matrix.shape
    nnz = matrix.rowval.shape[0]
    colptr = np.empty(n_rows + 1, dtype=matrix.colptr.dtype)
    rowval = np.empty(nnz, dtype=matrix.rowval.dtype)
    nzval = np.empty(nnz, dtype=matrix.nzval.dtype)
    if n_rows == 0:
        colptr[0] = 1
    else:
        transpose_csc_into(matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval, colptr, rowval, nzval)
    return (n_columns, n_rows), colptr, rowval, nzval


def from_scipy(matrix: Any, *, indtype: Any = None) -> CscParts:
    """Julia's 1-based form of a scipy sparse matrix (converted to CSC, sorted indices; ``Int64`` by default).

    Example:
        >>> import scipy.sparse as sp
        >>> shape, colptr, rowval, nzval = from_scipy(sp.csr_matrix(np.array([[0, 7], [5, 0]])))
        >>> shape, colptr.tolist(), rowval.tolist(), nzval.tolist()
        ((2, 2), [1, 2, 3], [2, 1], [5, 7])
    """
    import scipy.sparse as sp

    csc = sp.csc_matrix(matrix)
    if not csc.has_sorted_indices:
        csc = csc.sorted_indices()
    csc.sum_duplicates()
    dtype = np.dtype(indtype or np.int64)
    return (int(csc.shape[0]), int(csc.shape[1])), (csc.indptr + 1).astype(dtype), (csc.indices + 1).astype(dtype), \
        csc.data
