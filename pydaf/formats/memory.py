"""MemoryDaf: the in-memory store. It keeps references to the arrays it is given (no copies), like Julia's."""

from __future__ import annotations

import numpy as np

from ..core.writers import DafWriter
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import StorageScalar, scalar_dtype
from .base import CacheGroup, FormatWriter, StoredMatrix, StoredVector


class MemoryFormat(FormatWriter):
    """Dictionaries of scalars, axes, vectors and matrices held in memory."""

    type_name = "MemoryDaf"

    def __init__(self) -> None:
        self.scalars: dict[str, StorageScalar] = {}
        self.axes: dict[str, np.ndarray] = {}
        self.vectors: dict[str, dict[str, StoredVector]] = {}
        self.matrices: dict[tuple[str, str], dict[str, StoredMatrix]] = {}

    def format_stores_references(self) -> bool:
        return True

    def format_default_name(self) -> str:
        return "memory"

    def format_has_scalar(self, name: str) -> bool:
        return name in self.scalars

    def format_scalars_set(self) -> set[str]:
        return set(self.scalars)

    def format_get_scalar(self, name: str) -> StorageScalar:
        return self.scalars[name]

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        self.scalars[name] = value

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        del self.scalars[name]

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return axis in self.axes

    def format_axes_set(self) -> set[str]:
        return set(self.axes)

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return self.axes[axis], None

    def format_axis_length(self, axis: str) -> int:
        return int(self.axes[axis].shape[0])

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        self.axes[axis] = entries
        self.vectors[axis] = {}
        for other in self.axes:
            self.matrices[(axis, other)] = {}
            self.matrices[(other, axis)] = {}

    def format_delete_axis(self, axis: str) -> None:
        del self.axes[axis]
        del self.vectors[axis]
        for key in [key for key in self.matrices if axis in key]:
            del self.matrices[key]

    def format_has_vector(self, axis: str, name: str) -> bool:
        return name in self.vectors[axis]

    def format_vectors_set(self, axis: str) -> set[str]:
        return set(self.vectors[axis])

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        return self.vectors[axis][name], None

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        if not isinstance(vector, np.ndarray | SparseVector):
            vector = np.full(self.format_axis_length(axis), vector, dtype=scalar_dtype(vector))
        self.vectors[axis][name] = vector

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        del self.vectors[axis][name]

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        vector = np.zeros(self.format_axis_length(axis), dtype=dtype)
        self.vectors[axis][name] = vector
        return vector

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        nzind, nzval = np.zeros(nnz, dtype=indtype), np.zeros(nnz, dtype=dtype)
        self.vectors[axis][name] = SparseVector(self.format_axis_length(axis), nzind, nzval)
        return nzind, nzval

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return name in self.matrices[(rows_axis, columns_axis)]

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return set(self.matrices[(rows_axis, columns_axis)])

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        return self.matrices[(rows_axis, columns_axis)][name], None

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        if not isinstance(matrix, np.ndarray | SparseMatrixCSC):
            shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
            matrix = np.full(shape, matrix, dtype=scalar_dtype(matrix), order="F")
        self.matrices[(rows_axis, columns_axis)][name] = matrix

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        del self.matrices[(rows_axis, columns_axis)][name]

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        matrix = np.zeros(shape, dtype=dtype, order="F")
        self.matrices[(rows_axis, columns_axis)][name] = matrix
        return matrix

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        colptr, rowval, nzval = np.zeros(shape[1] + 1, dtype=indtype), np.zeros(nnz, dtype=indtype), np.zeros(
            nnz, dtype=dtype)
        self.matrices[(rows_axis, columns_axis)][name] = SparseMatrixCSC(shape, colptr, rowval, nzval)
        return colptr, rowval, nzval


class MemoryDaf(DafWriter):
    """An in-memory data set: the default scratch data set. It keeps references to the arrays it is given.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="cells!")
        >>> print(daf.description(), end="")
        name: cells!
        type: MemoryDaf
    """

    def __init__(self, *, name: str = "memory") -> None:
        super().__init__(MemoryFormat(), name=name)
