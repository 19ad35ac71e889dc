"""Julia's sparse layouts, exactly as stored: 1-based indices, the stored index type, zero-copy where mapped.

:class:`SparseMatrixCSC` and :class:`SparseVector` hold the components Daf keeps on disk (``colptr``/``rowval``/
``nzval``, ``nzind``/``nzval``). They are what the storage layer returns and what numba kernels consume directly;
:meth:`SparseMatrixCSC.to_scipy` gives the 0-based ``scipy.sparse.csc_matrix`` that readers hand out (copying only the
index arrays).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp


def _scipy_indices(one_based: np.ndarray) -> np.ndarray:
    """0-based indices in a dtype scipy accepts (int32 when it fits, else int64)."""
    limit = np.iinfo(np.int32).max
    dtype = np.int32 if one_based.size == 0 or int(one_based.max()) <= limit else np.int64
    result = np.empty(one_based.shape, dtype=dtype)
    np.subtract(one_based, 1, out=result, casting="unsafe")
    return result


@dataclass(frozen=True, eq=False)
class SparseVector:
    """A Julia ``SparseVector``: ``length`` entries, ``nzind`` 1-based strictly increasing positions, ``nzval`` values.

    Example:
        >>> v = SparseVector(5, np.array([2, 4], np.int64), np.array([1.5, 2.5]))
        >>> v.to_dense()
        array([0. , 1.5, 0. , 2.5, 0. ])
    """

    length: int
    nzind: np.ndarray
    nzval: np.ndarray

    @property
    def dtype(self) -> np.dtype:
        return self.nzval.dtype

    @property
    def nnz(self) -> int:
        return int(self.nzind.shape[0])

    @property
    def shape(self) -> tuple[int]:
        return (self.length,)

    def to_dense(self) -> np.ndarray:
        """A new dense numpy vector."""
        dense = np.zeros(self.length, dtype=self.nzval.dtype)
        dense[self.nzind.astype(np.intp) - 1] = self.nzval
        return dense

    @staticmethod
    def from_dense(dense: np.ndarray, *, indtype: Any = np.int64) -> SparseVector:
        """The sparse form of a dense vector (``Int64`` indices by default, like Julia's ``sparse``)."""
        positions = np.flatnonzero(dense)
        return SparseVector(int(dense.shape[0]), (positions + 1).astype(indtype), dense[positions])


@dataclass(frozen=True, eq=False)
class SparseMatrixCSC:
    """A Julia ``SparseMatrixCSC``: ``colptr`` (``n_cols + 1``, starting at 1), ``rowval`` (1-based) and ``nzval``.

    Example:
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 3]), np.array([2, 1]), np.array([7, 8], np.int32))
        >>> m.to_scipy().toarray()
        array([[0, 8],
               [7, 0]], dtype=int32)
    """

    shape: tuple[int, int]
    colptr: np.ndarray
    rowval: np.ndarray
    nzval: np.ndarray

    @property
    def dtype(self) -> np.dtype:
        return self.nzval.dtype

    @property
    def nnz(self) -> int:
        return int(self.rowval.shape[0])

    def to_scipy(self) -> sp.csc_matrix:
        """The 0-based ``scipy.sparse.csc_matrix`` (index arrays copied and shifted; ``nzval`` shared, zero-copy)."""
        import scipy.sparse as sp

        # scipy copies ``data`` that is a view of a much larger buffer ("pruning"), and a file map is such a view
        # (its base counts bytes, not elements), so build with a same-length placeholder and attach nzval after.
        placeholder = np.broadcast_to(np.zeros(1, dtype=self.nzval.dtype), self.nzval.shape)
        matrix = sp.csc_matrix(
            (placeholder, _scipy_indices(self.rowval), _scipy_indices(self.colptr)), shape=self.shape, copy=False
        )
        matrix.data = self.nzval
        return matrix

    def to_dense(self) -> np.ndarray:
        """A new dense, column-major matrix."""
        return np.asfortranarray(self.to_scipy().toarray())

    @staticmethod
    def from_scipy(matrix: Any, *, indtype: Any = None) -> SparseMatrixCSC:
        """Julia's 1-based form of a scipy sparse matrix (converted to CSC, sorted indices; ``Int64`` by default)."""
        import scipy.sparse as sp

        csc = sp.csc_matrix(matrix)
        if not csc.has_sorted_indices:
            csc = csc.sorted_indices()
        csc.sum_duplicates()
        indtype = np.dtype(indtype or np.int64)
        return SparseMatrixCSC(
            (int(csc.shape[0]), int(csc.shape[1])),
            (csc.indptr + 1).astype(indtype),
            (csc.indices + 1).astype(indtype),
            csc.data,
        )
