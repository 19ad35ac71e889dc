"""Julia's sparse layouts, exactly as stored: 1-based indices, the stored index type, zero-copy where mapped; and the
operations on them (columns, rows, selections, transposes, entry columns, read-only views). The structural operations
on a CSC's arrays live one layer below, in :mod:`pydaf.kernels.csc_arrays` (which the reductions use without this
type); the methods here wrap them.

:class:`SparseMatrixCSC` and :class:`SparseVector` hold the components Daf keeps on disk (``colptr``/``rowval``/
``nzval``, ``nzind``/``nzval``). They are what the storage layer returns and what numba kernels consume directly;
:meth:`SparseMatrixCSC.to_scipy` gives the 0-based ``scipy.sparse.csc_matrix`` that readers hand out (copying only the
index arrays). Readers and queries use the methods here, and kernels the functions they wrap, rather than their own
index arithmetic.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ._os.maps import mapped_region, memory_owner, release_pages
from .kernels import csc_arrays
from .kernels.csc_arrays import colptr_from_counts
from .kernels.eltwise import zero_based_csc

if TYPE_CHECKING:
    import scipy.sparse as sp


def read_only_array(array: Any) -> Any:
    """A read-only view of an array, a :class:`SparseVector` or a :class:`SparseMatrixCSC` (the array itself when it
    is already read-only; zero-copy).

    Example:
        >>> read_only_array(np.arange(3)).flags.writeable
        False
    """
    if isinstance(array, SparseVector | SparseMatrixCSC):
        return array if is_read_only_array(array) else array.read_only()
    return _read_only(array)


def _read_only(array: np.ndarray) -> np.ndarray:
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


def is_read_only_array(array: Any) -> bool:
    """Whether an array (or every array of a sparse vector or matrix) is read-only.

    Example:
        >>> is_read_only_array(np.arange(3)), is_read_only_array(read_only_array(np.arange(3)))
        (False, True)
    """
    if isinstance(array, SparseVector):
        return not (array.nzind.flags.writeable or array.nzval.flags.writeable)
    if isinstance(array, SparseMatrixCSC):  # (a deferred rowval is read-only when it is read)
        rowval = array.rowval_or_deferred()
        return not (array.colptr.flags.writeable or array.nzval.flags.writeable
                    or (isinstance(rowval, np.ndarray) and rowval.flags.writeable))
    return not np.asarray(array).flags.writeable


def copy_array(array: Any) -> Any:
    """A writable copy of an array, a :class:`SparseVector` or a :class:`SparseMatrixCSC` (column-major for matrices).

    Example:
        >>> copy_array(read_only_array(np.arange(3))).flags.writeable
        True
    """
    if isinstance(array, SparseVector):
        return SparseVector(array.length, array.nzind.copy(), array.nzval.copy())
    if isinstance(array, SparseMatrixCSC):
        return SparseMatrixCSC(array.shape, array.colptr.copy(), array.rowval.copy(), array.nzval.copy())
    return np.array(array, order="K", copy=True)


def dense_column_major(matrix: np.ndarray | SparseMatrixCSC) -> np.ndarray:
    """A column-major dense numpy matrix (the matrix itself when it already is one; sparse is densified).

    Example:
        >>> dense_column_major(np.array([[1, 2], [3, 4]])).flags.f_contiguous
        True
    """
    if isinstance(matrix, SparseMatrixCSC):
        return matrix.to_dense()
    return np.asfortranarray(matrix)


#: Bytes of a mapped column-major matrix whose selected rows are gathered at once by :func:`dense_rows`.
_ROWS_BLOCK_BYTES = 1 << 24


def dense_rows(matrix: np.ndarray, rows: slice | np.ndarray) -> np.ndarray:
    """The given rows (a slice, or 0-based positions) of a dense matrix, as a new column-major matrix. From a
    column-major file map, the rows of each column are a few bytes far apart, and the kernel maps up to 64 KB around
    each page touched (its fault-around), so a few rows would put most of the file in the process's RSS: they are
    gathered ~16 MB of the matrix at a time, each part's pages released once read (the data stays in the page cache).

    Example:
        >>> dense_rows(np.asfortranarray(np.arange(6).reshape(3, 2)), slice(1, 3)).tolist()
        [[2, 3], [4, 5]]
    """
    if matrix.nbytes <= _ROWS_BLOCK_BYTES or not matrix.flags.f_contiguous or mapped_region(matrix) is None:
        return np.asfortranarray(matrix[rows, :])
    out = np.empty((np.arange(matrix.shape[0])[rows].shape[0], matrix.shape[1]), dtype=matrix.dtype, order="F")
    step = max(1, _ROWS_BLOCK_BYTES // max(1, matrix.shape[0] * matrix.itemsize))
    for first in range(0, matrix.shape[1], step):
        last = min(first + step, matrix.shape[1])
        out[:, first:last] = matrix[rows, first:last]
        release_pages(matrix[:, first:last])
    return out


def selected_column_runs(colptr: np.ndarray, columns: np.ndarray,
                         n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the entries of the 0-based ``columns`` of a 1-based CSC matrix of ``n_rows`` rows are in its ``rowval``
    and ``nzval`` (0-based ``starts`` and ``stops``), and the ``colptr`` of the matrix of those columns. A ``colptr``
    that is not a 1-based CSC of that shape (its values untrusted: read from a file) raises ``ValueError`` saying
    what is wrong, for the caller to name the property.

    Example:
        >>> starts, stops, selected = selected_column_runs(np.array([1, 3, 3, 4]), np.array([2, 0]), 5)
        >>> starts.tolist(), stops.tolist(), selected.tolist()
        ([2, 0], [3, 2], [1, 2, 4])
    """
    nnz = int(colptr[-1]) - 1
    n_columns = colptr.shape[0] - 1
    if int(colptr[0]) != 1 or nnz < 0 or nnz > n_rows * n_columns:
        raise ValueError(f"colptr from {int(colptr[0])} to {int(colptr[-1])} for a {n_rows} x {n_columns} matrix")
    starts = colptr[columns].astype(np.int64) - 1
    stops = colptr[columns + 1].astype(np.int64) - 1
    if np.any(stops < starts) or (starts.size and (starts.min() < 0 or stops.max() > nnz)):
        raise ValueError(f"colptr is not non-decreasing from 1 to {nnz + 1}")
    selected = np.ones(columns.shape[0] + 1, dtype=colptr.dtype)
    selected[1:] += np.cumsum(stops - starts).astype(colptr.dtype)
    return starts, stops, selected


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

    def read_only(self) -> SparseVector:
        """The same vector with read-only arrays (zero-copy)."""
        return SparseVector(self.length, _read_only(self.nzind), _read_only(self.nzval))

    def select(self, positions: np.ndarray) -> SparseVector:
        """The sub-vector at the given distinct 0-based positions, in their order (a new vector with the same index
        and value types).

        Example:
            >>> v = SparseVector(5, np.array([2, 4], np.int64), np.array([1.5, 2.5]))
            >>> v.select(np.array([3, 0, 1])).to_dense().tolist()
            [2.5, 0.0, 1.5]
        """
        positions = np.asarray(positions, dtype=np.int64)
        new_position = np.full(self.length, -1, dtype=np.int64)
        new_position[positions] = np.arange(positions.shape[0])
        moved = new_position[self.nzind.astype(np.int64) - 1]
        kept = np.flatnonzero(moved >= 0)
        order = kept[np.argsort(moved[kept], kind="stable")]
        return SparseVector(int(positions.shape[0]), (moved[order] + 1).astype(self.nzind.dtype), self.nzval[order])

    @staticmethod
    def from_dense(dense: np.ndarray, *, indtype: Any = np.int64) -> SparseVector:
        """The sparse form of a dense vector (``Int64`` indices by default, like Julia's ``sparse``)."""
        positions = np.flatnonzero(dense)
        return SparseVector(int(dense.shape[0]), (positions + 1).astype(indtype), dense[positions])


@dataclass(frozen=True)
class DeferredArray:
    """A 1-D array read (or checked) only when it is first used: its ``shape`` and ``dtype`` are known at once, its
    values come from ``load()``. A :class:`SparseMatrixCSC` may hold its ``rowval`` as one, so that what needs only
    ``colptr`` and ``nzval`` (per-column sums, means, extremes) never reads or checks the row indices.
    ``load`` must return an array of that shape and type (or raise a :class:`~pydaf.DafError`).

    Example:
        >>> rowval = DeferredArray((2,), np.dtype(np.int64), lambda: np.array([2, 1]))
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 3]), rowval, np.array([7, 8]))
        >>> m.nnz, m.rowval_or_deferred() is rowval, m.rowval.tolist(), m.rowval_or_deferred() is rowval
        (2, True, [2, 1], False)
    """

    shape: tuple[int]
    dtype: np.dtype
    load: Callable[[], np.ndarray]


class SparseMatrixCSC:
    """A Julia ``SparseMatrixCSC``: ``colptr`` (``n_cols + 1``, starting at 1), ``rowval`` (1-based) and ``nzval``.
    ``rowval`` may be given as a :class:`DeferredArray`: it is then read on first use, once (thread-safe; a failed
    read raises, and is tried again on the next use).

    Example:
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 3]), np.array([2, 1]), np.array([7, 8], np.int32))
        >>> m.to_scipy().toarray()
        array([[0, 8],
               [7, 0]], dtype=int32)
    """

    __slots__ = ("__weakref__", "_lock", "_rowval", "colptr", "nzval", "shape")

    shape: tuple[int, int]
    colptr: np.ndarray
    nzval: np.ndarray
    _rowval: np.ndarray | DeferredArray
    _lock: threading.Lock | None

    def __init__(self, shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray | DeferredArray,
                 nzval: np.ndarray) -> None:
        set_field = object.__setattr__
        set_field(self, "shape", shape)
        set_field(self, "colptr", colptr)
        set_field(self, "_rowval", rowval)
        set_field(self, "nzval", nzval)
        set_field(self, "_lock", threading.Lock() if isinstance(rowval, DeferredArray) else None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a SparseMatrixCSC (it is immutable)")

    def __repr__(self) -> str:
        rowval = self._rowval
        shown = "<deferred>" if isinstance(rowval, DeferredArray) else repr(rowval)
        return f"SparseMatrixCSC(shape={self.shape!r}, colptr={self.colptr!r}, rowval={shown}, nzval={self.nzval!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # (a deferred rowval is read: its loader stays in this process)
        return SparseMatrixCSC, (self.shape, self.colptr, self.rowval, self.nzval)

    @property
    def rowval(self) -> np.ndarray:
        """The 1-based row of each stored entry (read now if it was deferred)."""
        rowval = self._rowval
        if isinstance(rowval, np.ndarray):
            return rowval
        assert self._lock is not None  # (made with a deferred rowval)
        with self._lock:
            rowval = self._rowval
            if isinstance(rowval, DeferredArray):
                rowval = _read_only(rowval.load())
                object.__setattr__(self, "_rowval", rowval)
        assert isinstance(rowval, np.ndarray)
        return rowval

    def rowval_or_deferred(self) -> np.ndarray | DeferredArray:
        """``rowval`` as it is now: the array, or the :class:`DeferredArray` not read yet."""
        return self._rowval

    def _shared_rowval(self) -> np.ndarray | DeferredArray:
        """``rowval`` for another matrix of the same structure: still deferred if it is here (read once, by this
        matrix, for both)."""
        rowval = self._rowval
        if isinstance(rowval, DeferredArray):
            return DeferredArray(rowval.shape, rowval.dtype, lambda: self.rowval)
        return rowval

    @property
    def dtype(self) -> np.dtype:
        return self.nzval.dtype

    @property
    def nnz(self) -> int:
        return int(self.nzval.shape[0])

    def to_scipy(self) -> sp.csc_matrix:
        """The 0-based ``scipy.sparse.csc_matrix`` (index arrays copied and shifted; ``nzval`` shared, zero-copy)."""
        import scipy.sparse as sp

        # scipy copies ``data`` that is a view of a much larger buffer ("pruning"), and a file map is such a view
        # (its base counts bytes, not elements), so build with a same-length placeholder and attach nzval after.
        placeholder = np.broadcast_to(np.zeros(1, dtype=self.nzval.dtype), self.nzval.shape)
        matrix = sp.csc_matrix((placeholder, *self._scipy_indices()), shape=self.shape, copy=False)
        matrix.data = self.nzval
        return matrix

    def _scipy_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Read-only 0-based copies of ``rowval`` and ``colptr`` of one type scipy accepts (``int32`` when the shape
        and the number of entries fit, as scipy chooses; one type for both, or scipy would convert one again), each
        made in one pass that also checks its range (scipy itself does not check indices, and indexes memory with
        them). Matrices over the same 1-based indices (a stored matrix and the element-wise results computed from
        it) share one copy while any scipy matrix holds it."""
        dtype = np.dtype(np.int32 if max(self.shape[0], self.nnz + 1) <= np.iinfo(np.int32).max else np.int64)
        shareable = _immutable(self.rowval) and _immutable(self.colptr)  # (else their memory may change)
        shared = _ZERO_BASED.get(self.rowval, self.colptr, self.shape[0], dtype) if shareable else None
        if shared is not None:
            return shared
        rowval, colptr = zero_based_csc(self.shape, self.colptr, self.rowval)
        rowval.flags.writeable = colptr.flags.writeable = False  # (shared: and a cached matrix's must never change)
        if shareable:
            _ZERO_BASED.put(self.rowval, self.colptr, self.shape[0], rowval, colptr)
        return rowval, colptr

    def to_dense(self) -> np.ndarray:
        """A new dense, column-major matrix.

        Example:
            >>> SparseMatrixCSC((2, 2), np.array([1, 2, 2]), np.array([2]), np.array([7])).to_dense().tolist()
            [[0, 0], [7, 0]]
        """
        n_rows, n_columns = self.shape
        dense = np.zeros((n_rows, n_columns), dtype=self.nzval.dtype, order="F")
        positions = self.rowval.astype(np.int64) - 1 + self.entry_columns() * n_rows
        dense.reshape(-1, order="F")[positions] = self.nzval
        return dense

    def read_only(self) -> SparseMatrixCSC:
        """The same matrix with read-only arrays (zero-copy)."""
        rowval = self._shared_rowval()
        return SparseMatrixCSC(self.shape, _read_only(self.colptr),
                               rowval if isinstance(rowval, DeferredArray) else _read_only(rowval),
                               _read_only(self.nzval))

    def column_range(self, column: int) -> slice:
        """The positions (in ``rowval``/``nzval``) of the stored entries of a 0-based column."""
        return csc_arrays.column_range(self.colptr, column)

    def column(self, column: int) -> np.ndarray:
        """A 0-based column as a new dense vector.

        Example:
            >>> SparseMatrixCSC((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3])).column(0)
            array([1, 0, 2])
        """
        return csc_arrays.dense_column(self, column)

    def row(self, row: int) -> np.ndarray:
        """A 0-based row as a new dense vector (a pass over ``rowval``: use the other layout for many rows).

        Example:
            >>> SparseMatrixCSC((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3])).row(1)
            array([0, 3])
        """
        dense = np.zeros(self.shape[1], dtype=self.nzval.dtype)
        positions = np.flatnonzero(self.rowval == row + 1)
        dense[self.entry_columns()[positions]] = self.nzval[positions]
        return dense

    def entry_columns(self) -> np.ndarray:
        """The 0-based column of each stored entry (``int64``).

        Example:
            >>> SparseMatrixCSC((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3])).entry_columns()
            array([0, 0, 1])
        """
        return csc_arrays.entry_columns(self.colptr)

    def with_values(self, nzval: np.ndarray, *, keep: np.ndarray | None = None) -> SparseMatrixCSC:
        """The same structure with other values (sharing the index arrays); with a ``keep`` mask of the stored
        entries, only those are kept (new index arrays).

        Example:
            >>> m = SparseMatrixCSC((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3]))
            >>> m.with_values(np.array([1.5, 0.0, 3.0]), keep=np.array([True, False, True])).to_dense().tolist()
            [[1.5, 0.0], [0.0, 3.0], [0.0, 0.0]]
        """
        if keep is None:
            return SparseMatrixCSC(self.shape, self.colptr, self._shared_rowval(), nzval)
        counts = np.bincount(self.entry_columns()[keep], minlength=self.shape[1])
        return SparseMatrixCSC(self.shape, colptr_from_counts(counts, self.colptr.dtype), self.rowval[keep],
                               nzval[keep])

    def select(self, *, rows: np.ndarray | None = None, columns: np.ndarray | None = None) -> SparseMatrixCSC:
        """The sub-matrix of the given 0-based rows and columns, in the given orders (a new matrix with the same
        index and value types).

        Example:
            >>> m = SparseMatrixCSC((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]), np.array([1, 2, 3]))
            >>> m.select(rows=np.array([2, 1]), columns=np.array([1, 0])).to_dense().tolist()
            [[0, 2], [3, 0]]
        """
        return SparseMatrixCSC(*csc_arrays.select(self, rows=rows, columns=columns))

    def transpose(self) -> SparseMatrixCSC:
        """The transpose, as a new 1-based CSC with the same index and value types.

        Example:
            >>> m = SparseMatrixCSC((2, 3), np.array([1, 2, 2, 3]), np.array([2, 1]), np.array([5.0, 6.0]))
            >>> m.transpose().to_dense().tolist()
            [[0.0, 5.0], [0.0, 0.0], [6.0, 0.0]]
        """
        return SparseMatrixCSC(*csc_arrays.transposed(self))

    @staticmethod
    def from_dense(dense: np.ndarray, *, indtype: Any = np.int64) -> SparseMatrixCSC:
        """The sparse form of a dense matrix (its non-zero entries; ``Int64`` indices by default, like Julia's
        ``sparse``).

        Example:
            >>> SparseMatrixCSC.from_dense(np.array([[0, 7], [5, 0]])).rowval.tolist()
            [2, 1]
        """
        flat = np.asarray(dense).reshape(-1, order="F")
        positions = np.flatnonzero(flat)
        n_rows, n_columns = dense.shape
        counts = np.bincount(positions // max(n_rows, 1), minlength=n_columns) if n_rows else np.zeros(
            n_columns, dtype=np.int64)
        return SparseMatrixCSC((int(n_rows), int(n_columns)), colptr_from_counts(counts, indtype),
                               (positions % max(n_rows, 1) + 1).astype(indtype), flat[positions])

    @staticmethod
    def from_scipy(matrix: Any, *, indtype: Any = None) -> SparseMatrixCSC:
        """Julia's 1-based form of a scipy sparse matrix (converted to CSC, sorted indices; ``Int64`` by default)."""
        return SparseMatrixCSC(*csc_arrays.from_scipy(matrix, indtype=indtype))


class _ZeroBasedIndices:
    """The 0-based index copies :meth:`SparseMatrixCSC.to_scipy` made, by the memory of the immutable 1-based arrays
    they were made from, held weakly: an entry lives while the owners of both sources' memory and both copies (held
    by some scipy matrix) are alive, and no longer."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], tuple[weakref.ref, ...]] = {}
        self._lock = threading.RLock()  # (reentrant: a callback below may run while it is held, in a collection)

    @staticmethod
    def _key(rowval: np.ndarray, colptr: np.ndarray, n_rows: int) -> tuple[Any, ...]:
        return (rowval.__array_interface__["data"][0], rowval.nbytes, rowval.dtype.str,
                colptr.__array_interface__["data"][0], colptr.nbytes, colptr.dtype.str, n_rows)

    def get(self, rowval: np.ndarray, colptr: np.ndarray, n_rows: int,
            dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            entry = self._entries.get(self._key(rowval, colptr, n_rows))
        arrays = [] if entry is None else [reference() for reference in entry]  # (owners, rowval0, colptr0)
        rowval0, colptr0 = (arrays[2], arrays[3]) if arrays else (None, None)
        if rowval0 is None or colptr0 is None or any(array is None for array in arrays) or rowval0.dtype != dtype:
            return None
        return rowval0, colptr0

    def put(self, rowval: np.ndarray, colptr: np.ndarray, n_rows: int, rowval0: np.ndarray,
            colptr0: np.ndarray) -> None:
        key = self._key(rowval, colptr, n_rows)

        def forget(_: weakref.ref) -> None:
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]

        owners = (memory_owner(rowval), memory_owner(colptr))
        entry = tuple(weakref.ref(array, forget) for array in (*owners, rowval0, colptr0))
        with self._lock:
            self._entries[key] = entry


def _immutable(array: np.ndarray) -> bool:
    """Whether no array can write the memory of ``array``: it and the array owning its memory are read-only (a
    read-only view of a writable array changes when the array does)."""
    return not array.flags.writeable and not memory_owner(array).flags.writeable


_ZERO_BASED = _ZeroBasedIndices()
