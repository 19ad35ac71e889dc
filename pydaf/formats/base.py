"""The storage contract every backend implements: Julia's ``format_*`` functions (``formats.jl``).

A backend is one subclass of :class:`FormatWriter` (or :class:`FormatReader` for read-only storage). It only moves
data: the reader/writer layer above (:mod:`pydaf.core`) has already validated names, axes, shapes and types, holds
the data lock, and owns caching and version counters. So a ``format_*`` method may assume:

- the axes it is given exist (or, for ``format_add_axis``, do not), and the property does (for getters and deletes)
  or does not (for setters) exist;
- dense matrices are column-major ``(n_rows, n_cols)`` numpy arrays, sparse data is a 1-based
  :class:`~pydaf.sparse.SparseVector` / :class:`~pydaf.sparse.SparseMatrixCSC`, strings are ``object`` arrays of
  ``str``, scalars are validated Python/numpy scalars;
- vectors and matrices it returns are never written to by the caller (the reader layer marks them read-only).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import ClassVar, TypeAlias

import numpy as np

from ..core.validation import require_sparse_strings
from ..errors import DafModeError
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import STRING_DTYPE, StorageScalar, indtype_for_size

StoredVector: TypeAlias = np.ndarray | SparseVector
StoredMatrix: TypeAlias = np.ndarray | SparseMatrixCSC

MODES = ("r", "r+", "w+", "w")


class CacheGroup(enum.Enum):
    """What kind of cached item this is, so :meth:`~pydaf.DafReader.empty_cache` can clear or keep each kind."""

    MappedData = "MappedData"
    """Memory-mapped from storage: cheap to keep, cheap to recreate."""
    MemoryData = "MemoryData"
    """Read into (or computed in) memory, e.g. a relayout or a converted sparse matrix."""
    QueryData = "QueryData"
    """The result of a query."""

    def __str__(self) -> str:
        return self.value


class FormatReader(ABC):
    """Read access to one Daf storage. See the module docstring for the contract."""

    #: The name shown as ``type:`` in :meth:`~pydaf.DafReader.description`.
    type_name: ClassVar[str] = "Daf"

    #: Whether the storage may be written.
    is_writable: bool = False

    def format_default_name(self) -> str:
        """The name of the data set when none was given (and there is no ``name`` scalar)."""
        return self.type_name

    def format_complete_path(self) -> str | None:
        """The absolute path of persistent storage, or ``None``."""
        return None

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        """Append the ``type:`` line (and any storage-specific lines, e.g. the path) to a description."""
        lines.append(f"{indent}type: {self.type_name}")

    def format_description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool,
                                  tensors: bool) -> None:
        """Append storage-specific lines at the end of a description (nothing by default)."""

    def format_close(self) -> None:
        """Release OS resources (open files). Mapped arrays already handed out stay valid."""

    # Scalars.

    @abstractmethod
    def format_has_scalar(self, name: str) -> bool: ...

    @abstractmethod
    def format_scalars_set(self) -> set[str]: ...

    @abstractmethod
    def format_get_scalar(self, name: str) -> StorageScalar: ...

    # Axes.

    @abstractmethod
    def format_has_axis(self, axis: str, *, for_change: bool) -> bool: ...

    @abstractmethod
    def format_axes_set(self) -> set[str]: ...

    @abstractmethod
    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        """The entries of the axis as an ``object`` array of ``str``, and how to cache it."""

    @abstractmethod
    def format_axis_length(self, axis: str) -> int: ...

    # Vectors.

    @abstractmethod
    def format_has_vector(self, axis: str, name: str) -> bool: ...

    @abstractmethod
    def format_vectors_set(self, axis: str) -> set[str]: ...

    @abstractmethod
    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        """The stored vector (dense numpy or 1-based :class:`SparseVector`), and how to cache it."""

    # Matrices.

    @abstractmethod
    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool: ...

    @abstractmethod
    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]: ...

    @abstractmethod
    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        """The stored matrix (column-major numpy or 1-based :class:`SparseMatrixCSC`), and how to cache it."""


class FormatWriter(FormatReader):
    """Read and write access to one Daf storage. See the module docstring for the contract."""

    is_writable = True

    # Scalars.

    @abstractmethod
    def format_set_scalar(self, name: str, value: StorageScalar) -> None: ...

    @abstractmethod
    def format_delete_scalar(self, name: str, *, for_set: bool) -> None: ...

    # Axes.

    @abstractmethod
    def format_add_axis(self, axis: str, entries: np.ndarray) -> None: ...

    @abstractmethod
    def format_delete_axis(self, axis: str) -> None:
        """Delete the axis and every vector and matrix that uses it."""

    # Vectors.

    @abstractmethod
    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        """Store a dense vector, a sparse vector, or a scalar repeated along the axis."""

    @abstractmethod
    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None: ...

    @abstractmethod
    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        """A writable buffer of the axis length that becomes the vector; the caller fills it in place."""

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        """Called once the buffer of :meth:`format_get_empty_dense_vector` is filled (nothing by default)."""

    @abstractmethod
    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """Writable ``(nzind, nzval)`` buffers of length ``nnz``; the caller fills them (1-based) in place."""

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        """Called once the buffers of :meth:`format_get_empty_sparse_vector` are filled (nothing by default)."""

    # Matrices.

    @abstractmethod
    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        """Store a column-major dense matrix, a sparse matrix, or a scalar repeated over the whole matrix."""

    @abstractmethod
    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None: ...

    @abstractmethod
    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        """A writable column-major ``(n_rows, n_cols)`` buffer that becomes the matrix."""

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        """Called once the buffer of :meth:`format_get_empty_dense_matrix` is filled (nothing by default)."""

    @abstractmethod
    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Writable ``(colptr, rowval, nzval)`` buffers (zero-filled, or untouched fresh space that reads as zeros);
        the caller fills them (1-based) in place."""

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        """Called once the buffers of :meth:`format_get_empty_sparse_matrix` are filled (nothing by default)."""

    def format_discard_empty(self) -> None:
        """Clean up after an ``empty_*`` builder whose filling failed, before its property was made to exist
        (nothing by default: backends that create the property up front have it deleted instead)."""

    def format_relayout_matrix(self, rows_axis: str, columns_axis: str, name: str, matrix: StoredMatrix) -> None:
        """Store the transpose of ``matrix`` (stored under ``(rows_axis, columns_axis)``) under
        ``(columns_axis, rows_axis)``, column-major. Numbers go through the ``empty_*`` builders, so a mapped store
        writes the result straight into the file."""
        from ..kernels.relayout import transpose_csc_into, transpose_dense_into

        if isinstance(matrix, SparseMatrixCSC):
            colptr, rowval, nzval = self.format_get_empty_sparse_matrix(
                columns_axis, rows_axis, name, matrix.dtype, matrix.nnz, matrix.colptr.dtype
            )
            transpose_csc_into(matrix, colptr, rowval, nzval)
            filled = SparseMatrixCSC((matrix.shape[1], matrix.shape[0]), colptr, rowval, nzval)
            self.format_filled_empty_sparse_matrix(columns_axis, rows_axis, name, filled)
        elif matrix.dtype == STRING_DTYPE:
            self.format_set_matrix(columns_axis, rows_axis, name, np.asfortranarray(matrix.T))
        else:
            buffer = self.format_get_empty_dense_matrix(columns_axis, rows_axis, name, matrix.dtype)
            transpose_dense_into(matrix, buffer)
            self.format_filled_empty_dense_matrix(columns_axis, rows_axis, name, buffer)


def parse_mode(mode: str) -> tuple[bool, bool, bool]:
    """Julia's ``parse_mode``: ``(is_writable, may_create, truncate)``; any other string raises."""
    if mode not in MODES:
        raise DafModeError(f"invalid mode: {mode}")
    return mode != "r", mode in ("w+", "w"), mode == "w"


def sparse_strings_are_smaller(values: np.ndarray, n_columns: int | None) -> bool:
    """Julia's rule (FORMATS.md §1.5): store strings sparse iff that takes at most 0.75 of the dense size."""
    nonempty = [value for value in values.flat if value]
    nonempty_size = sum(len(value) for value in nonempty)
    index_size = indtype_for_size(values.size).itemsize
    dense_size = nonempty_size + values.size
    if n_columns is None:
        sparse_size = nonempty_size + len(nonempty) * (1 + index_size)
    else:
        sparse_size = nonempty_size + len(nonempty) + (n_columns + 1 + len(nonempty)) * index_size
    return sparse_size <= 0.75 * dense_size


def weakest_cache_group(*groups: CacheGroup | None) -> CacheGroup | None:
    """The cache group of data built from several parts: mapped only if every part is."""
    return CacheGroup.MappedData if all(group == CacheGroup.MappedData for group in groups) else CacheGroup.MemoryData


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


def dense_string_vector(length: int, nzind: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """A string vector from its sparse form (``""`` where nothing is stored); invalid indices raise."""
    require_sparse_strings((length,), (nzind,), texts)
    dense = np.full(length, "", dtype=object)
    dense[nzind.astype(np.intp) - 1] = texts
    return dense


def dense_string_matrix(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray,
                        texts: np.ndarray) -> np.ndarray:
    """A column-major string matrix from its sparse (1-based CSC) form; invalid indices raise."""
    require_sparse_strings(shape, (colptr, rowval), texts)
    dense = np.full(shape, "", dtype=object, order="F")
    columns = np.repeat(np.arange(shape[1]), np.diff(colptr.astype(np.int64)))
    dense.reshape(-1, order="F")[columns * shape[0] + rowval.astype(np.int64) - 1] = texts
    return dense
