"""MemoryDaf: the in-memory store. It keeps references to the arrays it is given (no copies), like Julia's."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..abc.format import CacheGroup, FormatWriter, StoredMatrix, StoredVector
from ..abc.reorder import (
    CrashCounter,
    FormatReorderPlan,
    ReorderProgress,
    permute_stored_matrix,
    permute_stored_vector,
    tick_crash_counter,
)
from ..core.writers import DafWriter
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import StorageScalar, scalar_dtype


class MemoryFormat(FormatWriter):
    """Dictionaries of scalars, axes, vectors and matrices held in memory."""

    type_name = "MemoryDaf"

    def __init__(self) -> None:
        self.scalars: dict[str, StorageScalar] = {}
        self.axes: dict[str, np.ndarray] = {}
        self.vectors: dict[str, dict[str, StoredVector]] = {}
        self.matrices: dict[tuple[str, str], dict[str, StoredMatrix]] = {}
        # An overwriting builder's property exists from its first call (its buffer is the stored array), so its
        # for_set delete keeps the old value aside until the build ends, and a failed build puts it back.
        self._replaced_vectors: dict[tuple[str, str], StoredVector] = {}
        self._replaced_matrices: dict[tuple[str, str, str], StoredMatrix] = {}
        self._building_vectors: list[tuple[str, str]] = []
        self._building_matrices: list[tuple[str, str, str]] = []
        # The old axes, vectors and matrices of a reorder in progress (None outside one): its backup. A reorder
        # replaces each array by a new permuted one, so the old arrays (maybe the caller's) are never written.
        self._reorder_backup: tuple[dict, dict, dict] | None = None

    supports_reorder = True

    def format_stores_references(self) -> bool:
        return True

    def format_default_name(self) -> str:
        return "memory"

    def format_close(self) -> None:
        """Drop the data (as ``io.BytesIO.close`` drops its buffer): arrays already returned are the caller's."""
        for held in (self.scalars, self.axes, self.vectors, self.matrices, self._replaced_vectors,
                     self._replaced_matrices):
            held.clear()
        self._building_vectors.clear()
        self._building_matrices.clear()

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
        self._replaced_vectors.pop((axis, name), None)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        old = self.vectors[axis].pop(name)
        if for_set:
            self._replaced_vectors[(axis, name)] = old

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        vector = np.zeros(self.format_axis_length(axis), dtype=dtype)
        self.vectors[axis][name] = vector
        self._building_vectors.append((axis, name))
        return vector

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        nzind, nzval = np.zeros(nnz, dtype=indtype), np.zeros(nnz, dtype=dtype)
        self.vectors[axis][name] = SparseVector(self.format_axis_length(axis), nzind, nzval)
        self._building_vectors.append((axis, name))
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
        self._replaced_matrices.pop((rows_axis, columns_axis, name), None)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        old = self.matrices[(rows_axis, columns_axis)].pop(name)
        if for_set:
            self._replaced_matrices[(rows_axis, columns_axis, name)] = old

    def _built_vector(self, axis: str, name: str) -> None:
        self._replaced_vectors.pop((axis, name), None)
        self._building_vectors.remove((axis, name))

    def _built_matrix(self, rows_axis: str, columns_axis: str, name: str) -> None:
        self._replaced_matrices.pop((rows_axis, columns_axis, name), None)
        self._building_matrices.remove((rows_axis, columns_axis, name))

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        self._built_vector(axis, name)

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._built_vector(axis, name)

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        self._built_matrix(rows_axis, columns_axis, name)

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._built_matrix(rows_axis, columns_axis, name)

    def format_discard_empty(self) -> bool:
        for axis, name in self._building_vectors:
            self.vectors[axis].pop(name, None)
            if (axis, name) in self._replaced_vectors:
                self.vectors[axis][name] = self._replaced_vectors.pop((axis, name))
        for rows_axis, columns_axis, name in self._building_matrices:
            self.matrices[(rows_axis, columns_axis)].pop(name, None)
            if (rows_axis, columns_axis, name) in self._replaced_matrices:
                self.matrices[(rows_axis, columns_axis)][name] = self._replaced_matrices.pop(
                    (rows_axis, columns_axis, name))
        self._building_vectors.clear()
        self._building_matrices.clear()
        return True

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        matrix = np.zeros(shape, dtype=dtype, order="F")
        self.matrices[(rows_axis, columns_axis)][name] = matrix
        self._building_matrices.append((rows_axis, columns_axis, name))
        return matrix

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        colptr, rowval, nzval = np.zeros(shape[1] + 1, dtype=indtype), np.zeros(nnz, dtype=indtype), np.zeros(
            nnz, dtype=dtype)
        self.matrices[(rows_axis, columns_axis)][name] = SparseMatrixCSC(shape, colptr, rowval, nzval)
        self._building_matrices.append((rows_axis, columns_axis, name))
        return colptr, rowval, nzval

    # Reorder (as Julia's MemoryDaf: the backup is the old arrays themselves).

    def format_lock_reorder(self, operation_id: str) -> None:
        self._reorder_backup = ({}, {}, {})

    def format_backup_reorder(self, plan: FormatReorderPlan) -> None:
        assert self._reorder_backup is not None
        axes, vectors, matrices = self._reorder_backup
        for axis in plan.planned_axes:
            if axis in self.axes:
                axes[axis] = self.axes[axis]
        for vector in plan.planned_vectors:
            vectors[(vector.axis, vector.name)] = self.vectors[vector.axis][vector.name]
        for matrix in plan.planned_matrices:
            matrices[(matrix.rows_axis, matrix.columns_axis, matrix.name)] = \
                self.matrices[(matrix.rows_axis, matrix.columns_axis)][matrix.name]

    def format_replace_reorder(self, plan: FormatReorderPlan, progress: ReorderProgress,
                               crash_counter: CrashCounter | None) -> None:
        assert self._reorder_backup is not None
        _, vectors, matrices = self._reorder_backup
        for axis, planned_axis in plan.planned_axes.items():
            if axis in self.axes:
                self.axes[axis] = planned_axis.new_entries
        for vector in plan.planned_vectors:
            self.vectors[vector.axis][vector.name] = permute_stored_vector(
                vectors[(vector.axis, vector.name)], plan.planned_axes[vector.axis])
            if progress is not None:
                progress(vector.n_replacement_elements)
            tick_crash_counter(crash_counter)
        for matrix in plan.planned_matrices:
            self.matrices[(matrix.rows_axis, matrix.columns_axis)][matrix.name] = permute_stored_matrix(
                matrices[(matrix.rows_axis, matrix.columns_axis, matrix.name)],
                plan.planned_axes.get(matrix.rows_axis), plan.planned_axes.get(matrix.columns_axis))
            if progress is not None:
                progress(matrix.n_replacement_elements)
            tick_crash_counter(crash_counter)

    def format_cleanup_reorder(self) -> None:
        self._reorder_backup = None

    def format_has_reorder_lock(self) -> bool:
        return self._reorder_backup is not None

    def format_reset_reorder(self) -> bool:
        if self._reorder_backup is None:
            return False
        axes, vectors, matrices = self._reorder_backup
        self.axes.update(axes)
        for (axis, name), vector in vectors.items():
            self.vectors[axis][name] = vector
        for (rows_axis, columns_axis, name), matrix in matrices.items():
            self.matrices[(rows_axis, columns_axis)][name] = matrix
        self._reorder_backup = None
        return True


class MemoryDaf(DafWriter):
    """An in-memory data set: the default scratch data set. It keeps references to the arrays it is given.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="cells!")
        >>> print(daf.description(), end="")
        name: cells!
        type: MemoryDaf
    """

    #: A leaf storage format (see :func:`pydaf.is_leaf`): it owns its state and can be reordered in place.
    leaf_format: ClassVar[bool] = True

    def __init__(self, *, name: str = "memory") -> None:
        super().__init__(MemoryFormat(), name=name)
