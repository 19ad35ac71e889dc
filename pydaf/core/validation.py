"""Checks of stored data: what a backend returns (Julia's ``readers.jl`` assertions, as errors) and what a caller gives
to a writer or fills into a builder. Dense data needs only O(1) checks, so zero-copy reads stay free; sparse data is
checked in full (its indices index memory), in one pass, once per stored array the reader caches. A problem names the
data set, the property, what was found and what was expected.

Design: docs/design/checks.md.

Example:
    >>> import numpy as np
    >>> from pydaf.sparse import SparseMatrixCSC
    >>> matrix = SparseMatrixCSC((2, 2), np.array([1, 2, 3]), np.array([2, 0]), np.array([1.0, 2.0]))
    >>> require_stored_matrix(matrix, (2, 2), what="matrix: m", daf_name="example")
    Traceback (most recent call last):
    ...
    pydaf.errors.DafFormatError: invalid rowval of the matrix: m
    found: rowval[1] = 0 (in column 1)
    expected: rows in 1..2, strictly increasing within each column
    in the daf data: example
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import kernels
from ..errors import DafError, DafFormatError
from ..sparse import DeferredArray, SparseMatrixCSC, SparseVector
from ..storage_types import JULIA_NAMES, STRING_DTYPE, julia_name

__all__ = [
    "NUMBA_THRESHOLD",
    "Problem",
    "require_entries",
    "require_scalar",
    "require_sparse_rows",
    "require_stored_matrix",
    "require_stored_vector",
    "sparse_matrix_problem",
    "sparse_rows_problem",
    "sparse_vector_problem",
]

#: Below this many stored entries, numpy checks the indices (no compilation, and a numpy pass over a few million
#: indices takes milliseconds); above it, the numba kernels do, in parallel, without temporaries.
NUMBA_THRESHOLD = 1 << 21


@dataclass(frozen=True)
class Problem:
    """What is wrong: the component (``colptr``, ``rowval``, ``length``, …), what was found and what was expected."""

    component: str
    found: str
    expected: str
    #: Whether the problem is rows in range but out of order within a column (AnnData and scipy allow that; sorting
    #: each column's entries may fix it).
    unsorted: bool = False

    def text(self, what: str) -> str:
        """The error message for the property ``what`` (e.g. ``"vector: age\\nof the axis: cell"``)."""
        return f"invalid {self.component} of the {what}\nfound: {self.found}\nexpected: {self.expected}"


def _raise(problem: Problem | None, what: str, daf_name: str, error: type[DafError]) -> None:
    if problem is not None:
        raise error(problem.text(what), daf_name=daf_name)


def _type_name(dtype: np.dtype) -> str:
    if dtype == STRING_DTYPE:
        return "String"
    return julia_name(dtype) if dtype in JULIA_NAMES else str(dtype)


def _array_problem(array: Any, component: str, ndim: int) -> Problem | None:
    if isinstance(array, DeferredArray):  # (its type and length: its values are checked when it is read)
        return None if len(array.shape) == ndim else Problem(component, f"{len(array.shape)} dimensions", f"{ndim}")
    if not isinstance(array, np.ndarray):
        return Problem(component, f"a {type(array).__name__}", "a numpy array")
    if array.ndim != ndim:
        return Problem(component, f"{array.ndim} dimensions (shape: {array.shape})", f"{ndim} dimension(s)")
    return None


def _values_problem(values: np.ndarray, component: str, *, strings: bool) -> Problem | None:
    if values.dtype in JULIA_NAMES or (strings and values.dtype == STRING_DTYPE):
        return None
    expected = "a Daf element type (Bool, Int8…UInt64, Float32, Float64" + (", String)" if strings else ")")
    return Problem(f"element type of the {component}", str(values.dtype), expected)


def _index_type_problem(indices: np.ndarray | DeferredArray, component: str) -> Problem | None:
    if indices.dtype.kind in "iu" and indices.dtype in JULIA_NAMES:
        return None
    return Problem(f"element type of the {component}", _type_name(indices.dtype), "an integer type")


def sparse_vector_problem(length: int, nzind: np.ndarray) -> Problem | None:
    """The first problem of the 1-based positions ``nzind`` of a sparse vector of ``length`` entries, or ``None``.

    Example:
        >>> sparse_vector_problem(3, np.array([1, 3], np.uint32)) is None
        True
        >>> sparse_vector_problem(3, np.array([0, 3])).found
        'nzind[0] = 0'
    """
    problem = _array_problem(nzind, "nzind", 1) or _index_type_problem(nzind, "nzind")
    if problem is not None:
        return problem
    size = nzind.shape[0]
    if size > length:
        return Problem("nzind", f"{size} positions", f"at most the length: {length}")
    if size == 0:
        return None
    if size < NUMBA_THRESHOLD:
        indices = nzind.astype(np.int64)
        bad = (indices < 1) | (indices > length)
        bad[1:] |= indices[1:] <= indices[:-1]
        position = int(np.argmax(bad)) if bad.any() else None
    else:
        found = kernels.first_sorted_problem(nzind, length)
        position = None if found is None else found[1]
    if position is None:
        return None
    return Problem("nzind", f"nzind[{position}] = {nzind[position]}", f"positions in 1..{length}, strictly increasing")


def sparse_matrix_problem(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray | DeferredArray, *,
                          rows: bool = True) -> Problem | None:
    """The first problem of the 1-based CSC indices of a matrix of ``shape``, or ``None``. With ``rows=False``, all
    but the check of each entry's row (:func:`sparse_rows_problem`, a pass over ``rowval``, which may then be a
    :class:`~pydaf.sparse.DeferredArray`: only its type and length are checked).

    Example:
        >>> sparse_matrix_problem((3, 2), np.array([1, 2, 3]), np.array([3, 1])) is None
        True
        >>> sparse_matrix_problem((3, 3), np.array([1, 3, 2, 3]), np.array([3, 1])).found
        'colptr[1] = 3, colptr[2] = 2'
    """
    n_rows, n_columns = shape
    problem = (_array_problem(colptr, "colptr", 1) or _index_type_problem(colptr, "colptr")
               or _array_problem(rowval, "rowval", 1) or _index_type_problem(rowval, "rowval"))
    if problem is not None:
        return problem
    nnz = rowval.shape[0]
    if colptr.shape[0] != n_columns + 1:
        return Problem("colptr", f"{colptr.shape[0]} offsets", f"the number of columns + 1: {n_columns + 1}")
    if nnz > n_rows * n_columns:
        return Problem("rowval", f"{nnz} stored entries", f"at most the size: {n_rows} x {n_columns}")
    offsets = colptr.astype(np.int64)  # n_columns + 1 entries: small next to the entries
    if offsets[0] != 1:
        return Problem("colptr", f"colptr[0] = {colptr[0]}", "1")
    if offsets[-1] != nnz + 1:
        return Problem("colptr", f"colptr[{n_columns}] = {colptr[-1]}",
                       f"nnz + 1 = {nnz + 1} (nnz: the length of rowval)")
    decreasing = np.flatnonzero(offsets[1:] < offsets[:-1])
    if decreasing.size:
        column = int(decreasing[0])
        return Problem("colptr", f"colptr[{column}] = {colptr[column]}, colptr[{column + 1}] = {colptr[column + 1]}",
                       "non-decreasing offsets")
    if not rows or nnz == 0:
        return None
    assert isinstance(rowval, np.ndarray)
    return sparse_rows_problem(shape, colptr, rowval)


def sparse_rows_problem(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray) -> Problem | None:
    """The first entry of a 1-based CSC whose row is out of range or not after the previous one of its column, or
    ``None`` (the rest of the structure checked before, by :func:`sparse_matrix_problem` with ``rows=False``).

    Example:
        >>> sparse_rows_problem((3, 2), np.array([1, 3, 4]), np.array([3, 1, 2])).found
        'rowval[1] = 1 (in column 0)'
    """
    n_rows = shape[0]
    nnz = rowval.shape[0]
    if nnz == 0:
        return None
    if nnz < NUMBA_THRESHOLD:
        offsets = colptr.astype(np.int64)
        rows = rowval.astype(np.int64)
        in_range = (rows >= 1) & (rows <= n_rows)
        bad = ~in_range
        column_starts = np.zeros(nnz, dtype=np.bool_)
        column_starts[offsets[:-1][offsets[:-1] <= nnz] - 1] = True
        bad[1:] |= (rows[1:] <= rows[:-1]) & ~column_starts[1:]
        position = int(np.argmax(bad)) if bad.any() else None
        if position is None:
            return None
        column = int(np.searchsorted(offsets, position + 1, side="right")) - 1
        unsorted = bool(in_range[position])
    else:
        found = kernels.first_csc_problem(colptr, rowval, n_rows)
        if found is None:
            return None
        kind, column, position = found
        if kind == kernels.CSC_BAD_COLPTR:  # (only if colptr changed since it was checked)
            return Problem("colptr", f"colptr[{column}] = {colptr[column]}, colptr[{column + 1}] = "
                           f"{colptr[column + 1]}", "non-decreasing offsets")
        unsorted = kind == kernels.CSC_BAD_ORDER
    return Problem("rowval", f"rowval[{position}] = {rowval[position]} (in column {column})",
                   f"rows in 1..{n_rows}, strictly increasing within each column", unsorted)


def _sparse_values_problem(nzval: Any, nnz: int) -> Problem | None:
    problem = _array_problem(nzval, "nzval", 1)
    if problem is None and nzval.shape[0] != nnz:
        problem = Problem("nzval", f"{nzval.shape[0]} values", f"one per stored entry: {nnz}")
    return problem or _values_problem(nzval, "nzval", strings=False)


def stored_vector_problem(vector: Any, length: int) -> Problem | None:
    """The first problem of a stored vector (dense numpy or :class:`~pydaf.sparse.SparseVector`) of an axis of
    ``length`` entries, or ``None``."""
    if isinstance(vector, SparseVector):
        if vector.length != length:
            return Problem("length", str(vector.length), f"the length of the axis: {length}")
        return sparse_vector_problem(length, vector.nzind) or _sparse_values_problem(vector.nzval,
                                                                                      vector.nzind.shape[0])
    problem = _array_problem(vector, "vector", 1)
    if problem is None and vector.shape[0] != length:
        problem = Problem("length", str(vector.shape[0]), f"the length of the axis: {length}")
    return problem or _values_problem(vector, "vector", strings=True)


def stored_matrix_problem(matrix: Any, shape: tuple[int, int], *, rows: bool = True) -> Problem | None:
    """The first problem of a stored matrix (column-major numpy or :class:`~pydaf.sparse.SparseMatrixCSC`) of axes of
    lengths ``shape``, or ``None`` (``rows``: see :func:`sparse_matrix_problem`)."""
    if isinstance(matrix, SparseMatrixCSC):
        if tuple(matrix.shape) != tuple(shape):
            return Problem("shape", f"{matrix.shape[0]} x {matrix.shape[1]}", f"the axes lengths: {shape[0]} x "
                                                                               f"{shape[1]}")
        rowval = matrix.rowval if rows else matrix.rowval_or_deferred()
        return sparse_matrix_problem(shape, matrix.colptr, rowval, rows=rows) or _sparse_values_problem(
            matrix.nzval, rowval.shape[0])
    problem = _array_problem(matrix, "matrix", 2)
    if problem is None and matrix.shape != tuple(shape):
        problem = Problem("shape", f"{matrix.shape[0]} x {matrix.shape[1]}", f"the axes lengths: {shape[0]} x "
                                                                             f"{shape[1]}")
    return problem or _values_problem(matrix, "matrix", strings=True)


def require_stored_vector(vector: Any, length: int, *, what: str, daf_name: str,
                          error: type[DafError] = DafFormatError) -> None:
    """Raise ``error`` if a vector is not a valid vector of an axis of ``length`` entries (see the module docstring).

    Example:
        >>> require_stored_vector(np.zeros(3), 2, what="vector: age\\nof the axis: cell", daf_name="example")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid length of the vector: age
        of the axis: cell
        found: 3
        expected: the length of the axis: 2
        in the daf data: example
    """
    _raise(stored_vector_problem(vector, length), what, daf_name, error)


def require_stored_matrix(matrix: Any, shape: tuple[int, int], *, what: str, daf_name: str,
                          error: type[DafError] = DafFormatError, rows: bool = True) -> None:
    """Raise ``error`` if a matrix is not a valid matrix of axes of lengths ``shape`` (see the module docstring;
    ``rows``: see :func:`sparse_matrix_problem`).

    Example:
        >>> require_stored_matrix(np.zeros((2, 3), order="F"), (2, 3), what="matrix: m", daf_name="example")
    """
    _raise(stored_matrix_problem(matrix, shape, rows=rows), what, daf_name, error)


def require_sparse_rows(shape: tuple[int, int], colptr: np.ndarray, rowval: Any, *, what: str,
                        daf_name: str) -> None:
    """Raise :class:`~pydaf.DafFormatError` if a ``rowval`` read after the rest of its matrix was checked (with
    ``rows=False``) is not an array of ``colptr[-1] - 1`` entries, each in range and after the previous one of its
    column.

    Example:
        >>> require_sparse_rows((2, 2), np.array([1, 2, 3]), np.array([2, 3]), what="matrix: m", daf_name="example")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid rowval of the matrix: m
        found: rowval[1] = 3 (in column 1)
        expected: rows in 1..2, strictly increasing within each column
        in the daf data: example
    """
    nnz = int(colptr[-1]) - 1
    problem = _array_problem(rowval, "rowval", 1) or _index_type_problem(rowval, "rowval")
    if problem is None and rowval.shape[0] != nnz:
        problem = Problem("rowval", f"{rowval.shape[0]} stored entries", f"nnz = colptr[end] - 1 = {nnz}")
    _raise(problem or sparse_rows_problem(shape, colptr, rowval), what, daf_name, DafFormatError)


def require_entries(entries: Any, length: int, *, what: str, daf_name: str) -> None:
    """Raise :class:`~pydaf.DafFormatError` if the entries of an axis are not a vector of ``length`` strings.

    Example:
        >>> require_entries(np.array(["A", "B"], dtype=object), 2, what="axis: cell", daf_name="example")
    """
    problem = _array_problem(entries, "entries", 1)
    if problem is None and entries.shape[0] != length:
        problem = Problem("length", str(entries.shape[0]), f"the length of the axis: {length}")
    if problem is None and entries.dtype != STRING_DTYPE:
        problem = Problem("entries", f"element type: {entries.dtype}", "strings")
    _raise(problem, what, daf_name, DafFormatError)


def require_scalar(value: Any, *, what: str, daf_name: str) -> None:
    """Raise :class:`~pydaf.DafFormatError` if a stored scalar is not a ``str`` or a number of a Daf type.

    Example:
        >>> require_scalar(np.float32(1.5), what="scalar: x", daf_name="example")
    """
    if isinstance(value, str | bool | int | float):
        return
    if isinstance(value, np.generic) and value.dtype in JULIA_NAMES:
        return
    _raise(Problem("value", f"a {type(value).__name__}", "a string or a number of a Daf type"), what, daf_name,
           DafFormatError)
