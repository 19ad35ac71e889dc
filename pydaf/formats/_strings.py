"""Julia's sparse form of string vectors and matrices, as the stored formats keep them: only the non-empty strings, with
1-based indices (docs/spec/FORMATS.md §1.5), and the checks that the indices read back are valid."""

from __future__ import annotations

import numpy as np

from ..core.validation import Problem, sparse_matrix_problem, sparse_vector_problem
from ..errors import DafFormatError, DafStorageError
from ..storage_types import indtype_for_size


def require_sparse_strings(shape: tuple[int, ...], indices: tuple[np.ndarray, ...], texts: np.ndarray) -> None:
    """Raise :class:`~pydaf.DafFormatError` unless the 1-based indices of sparse strings (``(nzind,)`` of a vector of
    ``shape == (length,)``, ``(colptr, rowval)`` of a matrix) are valid and hold one string each. Backends call this
    before they densify sparse strings (the reader then adds the property and the data set to the message).

    Example:
        >>> require_sparse_strings((3,), (np.array([3, 1]),), np.array(["a", "b"], dtype=object))
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid nzind of the sparse strings
        found: nzind[1] = 1
        expected: positions in 1..3, strictly increasing
    """
    if len(shape) == 1:
        problem = sparse_vector_problem(shape[0], indices[0])
        nnz = indices[0].shape[0] if problem is None else 0
    else:
        problem = sparse_matrix_problem((shape[0], shape[1]), indices[0], indices[1])
        nnz = indices[1].shape[0] if problem is None else 0
    if problem is None and (not isinstance(texts, np.ndarray) or texts.shape != (nnz,)):
        problem = Problem("nztxt", f"{np.shape(texts)[0] if np.ndim(texts) else 0} strings",
                          f"one per stored entry: {nnz}")
    if problem is not None:
        raise DafFormatError(problem.text("sparse strings"))


def sparse_strings_are_smaller(values: np.ndarray, n_columns: int | None) -> bool:
    """Julia's rule (docs/spec/FORMATS.md §1.5): store strings sparse iff that takes at most 0.75 of the dense size."""
    nonempty = [value for value in values.flat if value]
    nonempty_size = sum(len(value) for value in nonempty)
    index_size = indtype_for_size(values.size).itemsize
    dense_size = nonempty_size + values.size
    if n_columns is None:
        sparse_size = nonempty_size + len(nonempty) * (1 + index_size)
    else:
        sparse_size = nonempty_size + len(nonempty) + (n_columns + 1 + len(nonempty)) * index_size
    return sparse_size <= 0.75 * dense_size


def sparse_string_vector(vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sparse form of a string vector: 1-based ``nzind`` of the non-empty values (Julia's index type), and them."""
    positions = np.flatnonzero(vector != "")
    return (positions + 1).astype(indtype_for_size(vector.size)), vector[positions]


def sparse_string_matrix(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sparse (1-based CSC) form of a string matrix: ``colptr``, ``rowval`` and the non-empty values in
    column-major order."""
    n_rows, n_columns = matrix.shape
    flat = matrix.reshape(-1, order="F")
    positions = np.flatnonzero(flat != "")
    indtype = indtype_for_size(matrix.size)
    counts = np.bincount(positions // n_rows, minlength=n_columns)
    colptr = (np.concatenate([[0], np.cumsum(counts)]) + 1).astype(indtype)
    return colptr, (positions % n_rows + 1).astype(indtype), flat[positions]


def _empty_strings(shape: tuple[int, ...], stored: int) -> np.ndarray:
    """A (column-major) array of ``""`` of the shape of its axes, to densify sparse strings into; memory that can't be
    had is a :class:`~pydaf.DafStorageError` (the caller names the property), never a ``MemoryError``."""
    try:
        dense = np.empty(shape, dtype=object, order="F")
        dense.fill("")
    except MemoryError:
        size = int(np.prod(shape, dtype=np.float64))
        raise DafStorageError(f"not enough memory to make sparse strings dense: {size} strings (8 bytes each, "
                              f"{stored} of them stored) of the shape: {list(shape)}") from None
    return dense


def dense_string_vector(length: int, nzind: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """A string vector from its sparse form (``""`` where nothing is stored); invalid indices raise."""
    require_sparse_strings((length,), (nzind,), texts)
    dense = _empty_strings((length,), texts.shape[0])
    dense[nzind.astype(np.intp) - 1] = texts
    return dense


def dense_string_matrix(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray,
                        texts: np.ndarray) -> np.ndarray:
    """A column-major string matrix from its sparse (1-based CSC) form; invalid indices raise."""
    require_sparse_strings(shape, (colptr, rowval), texts)
    dense = _empty_strings(shape, texts.shape[0])
    counts: np.ndarray = np.diff(colptr.astype(np.int64))
    columns = np.repeat(np.arange(shape[1]), counts)
    dense.reshape(-1, order="F")[columns * shape[0] + rowval.astype(np.int64) - 1] = texts
    return dense
