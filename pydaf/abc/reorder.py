"""The storage contract of :func:`pydaf.reorder_axes` (Julia's ``Reorder`` hooks, ``reorder.jl``): the plan the
orchestrator gives each leaf storage, and the six ``format_*_reorder`` steps a writable backend implements.

A reorder runs, under every data set's write lock: ``format_lock_reorder`` (claim, fast), ``format_backup_reorder``
(save what will be rewritten, fast), ``format_replace_reorder`` (write the permuted data, ticking the crash counter
after each property), ``format_cleanup_reorder`` (drop the backup). A kill or an exception at any step leaves a lock
that ``format_has_reorder_lock`` reports and ``format_reset_reorder`` rolls back to the old order (returning whether
there was anything to roll back). Permutations are 0-based: ``new_entries[i] = old_entries[permutation[i]]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..kernels.permute import (
    permute_csc_into,
    permute_dense_matrix_into,
    permute_sparse_vector_into,
    permute_vector_into,
)
from ..sparse import SparseMatrixCSC, SparseVector


class SimulatedCrash(Exception):
    """Raised by the ``_simulate_crash=`` testing hook of :func:`pydaf.reorder_axes` after that many properties
    were replaced, leaving the reorder half done (as a kill would) for :func:`pydaf.reset_reorder_axes` to undo.

    Example:
        >>> issubclass(SimulatedCrash, Exception)
        True
    """


@dataclass(frozen=True)
class PlannedAxis:
    """One permuted axis: the 0-based ``permutation`` (``new_entries[i] = old_entries[permutation[i]]``), its
    inverse (``new position of old entry j``), and the permuted entries, computed once and shared by all writers.

    Example:
        >>> axis = PlannedAxis.of(np.array(["a", "b", "c"], dtype=object), [2, 0, 1])
        >>> axis.new_entries.tolist(), axis.inverse_permutation.tolist()
        (['c', 'a', 'b'], [1, 2, 0])
    """

    permutation: np.ndarray
    inverse_permutation: np.ndarray
    new_entries: np.ndarray

    @staticmethod
    def of(entries: np.ndarray, permutation: np.ndarray | list[int]) -> PlannedAxis:
        """The plan of an axis of ``entries`` permuted by a valid 0-based ``permutation``."""
        permutation = np.asarray(permutation, dtype=np.int64)
        inverse = np.empty_like(permutation)
        inverse[permutation] = np.arange(len(permutation), dtype=np.int64)
        return PlannedAxis(permutation, inverse, np.asarray(entries)[permutation])


@dataclass(frozen=True)
class PlannedVector:
    """A vector rewritten by a reorder; ``n_replacement_elements`` is its length (progress ticks).

    Example:
        >>> PlannedVector("cell", "age", 3).n_replacement_elements
        3
    """

    axis: str
    name: str
    n_replacement_elements: int


@dataclass(frozen=True)
class PlannedMatrix:
    """A matrix (as stored: ``rows_axis`` by ``columns_axis``) rewritten by a reorder because one or both of its axes
    are permuted; ``n_replacement_elements`` is its size if dense, its number of stored entries if sparse.

    Example:
        >>> PlannedMatrix("cell", "gene", "UMIs", 6).rows_axis
        'cell'
    """

    rows_axis: str
    columns_axis: str
    name: str
    n_replacement_elements: int


@dataclass(frozen=True)
class FormatReorderPlan:
    """Everything one storage rewrites in a reorder (built by :func:`pydaf.build_reorder_plan`).

    Example:
        >>> plan = FormatReorderPlan({}, [PlannedVector("cell", "age", 3)], [])
        >>> plan.n_replacement_elements()
        3
    """

    planned_axes: Mapping[str, PlannedAxis]
    planned_vectors: list[PlannedVector] = field(default_factory=list)
    planned_matrices: list[PlannedMatrix] = field(default_factory=list)

    def n_replacement_elements(self) -> int:
        """The progress ticks of the replacement step: the sum over the planned vectors and matrices."""
        return sum(vector.n_replacement_elements for vector in self.planned_vectors) + sum(
            matrix.n_replacement_elements for matrix in self.planned_matrices)


class CrashCounter:
    """Julia's ``crash_counter``: ``tick()`` after each replaced property raises :class:`SimulatedCrash` once the
    count given to ``_simulate_crash=`` is used up. ``None`` (no counter) is passed when not testing.

    Example:
        >>> counter = CrashCounter(2)
        >>> counter.tick()
        >>> try:
        ...     counter.tick()
        ... except SimulatedCrash:
        ...     print("crashed")
        crashed
    """

    def __init__(self, count: int) -> None:
        self.remaining = int(count)

    def tick(self) -> None:
        self.remaining -= 1
        if self.remaining <= 0:
            raise SimulatedCrash()


class ReorderThroughModule:
    """The six reorder hooks of a :class:`~pydaf.abc.format.FormatWriter`, each calling the function of the same name
    without ``format_`` in the format's own ``reorder`` module (set as :attr:`reorder_module`), given the format.
    Listed before the format's base class, so its hooks are these.

    Example:
        >>> import types
        >>> module = types.SimpleNamespace(has_reorder_lock=lambda storage: storage.locked)
        >>> class Storage(ReorderThroughModule):
        ...     reorder_module = module
        ...     locked = True
        >>> Storage().format_has_reorder_lock()
        True
    """

    reorder_module: Any
    supports_reorder: bool = True

    def format_lock_reorder(self, operation_id: str) -> None:
        self.reorder_module.lock_reorder(self, operation_id)

    def format_backup_reorder(self, plan: FormatReorderPlan) -> None:
        self.reorder_module.backup_reorder(self, plan)

    def format_replace_reorder(self, plan: FormatReorderPlan, progress: ReorderProgress,
                               crash_counter: CrashCounter | None) -> None:
        self.reorder_module.replace_reorder(self, plan, progress, crash_counter)

    def format_cleanup_reorder(self) -> None:
        self.reorder_module.cleanup_reorder(self)

    def format_has_reorder_lock(self) -> bool:
        return bool(self.reorder_module.has_reorder_lock(self))

    def format_reset_reorder(self) -> bool:
        return bool(self.reorder_module.reset_reorder(self))


def tick_crash_counter(crash_counter: CrashCounter | None) -> None:
    """Tick ``crash_counter`` if there is one (Julia's ``tick_crash_counter!``).

    Example:
        >>> tick_crash_counter(None)
    """
    if crash_counter is not None:
        crash_counter.tick()


#: The replacement step's progress: called with the number of elements just written (or ``None``: no progress).
ReorderProgress = Callable[[int], object] | None


def permute_stored_vector(vector: np.ndarray | SparseVector, planned_axis: PlannedAxis) -> np.ndarray | SparseVector:
    """A new vector: ``vector`` with its axis permuted as planned.

    Example:
        >>> axis = PlannedAxis.of(np.array(["a", "b", "c"], dtype=object), [2, 0, 1])
        >>> permute_stored_vector(np.array([1, 2, 3]), axis).tolist()
        [3, 1, 2]
    """
    if isinstance(vector, SparseVector):
        nzind, nzval = np.empty_like(vector.nzind), np.empty_like(vector.nzval)
        permute_sparse_vector_into(vector.nzind, vector.nzval, planned_axis.inverse_permutation, nzind, nzval)
        return SparseVector(vector.length, nzind, nzval)
    out = np.empty_like(vector)
    permute_vector_into(vector, planned_axis.permutation, out)
    return out


def permute_stored_matrix(matrix: np.ndarray | SparseMatrixCSC, rows_axis: PlannedAxis | None,
                          columns_axis: PlannedAxis | None) -> np.ndarray | SparseMatrixCSC:
    """A new matrix: ``matrix`` with its rows and/or columns axis permuted as planned (``None``: not permuted).

    Example:
        >>> rows = PlannedAxis.of(np.array(["a", "b"], dtype=object), [1, 0])
        >>> permute_stored_matrix(np.asfortranarray([[1, 2], [3, 4]]), rows, None).tolist()
        [[3, 4], [1, 2]]
    """
    if isinstance(matrix, SparseMatrixCSC):
        colptr, rowval, nzval = np.empty_like(matrix.colptr), np.empty_like(matrix.rowval), np.empty_like(matrix.nzval)
        permute_csc_into(matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval,
                         None if rows_axis is None else rows_axis.inverse_permutation,
                         None if columns_axis is None else columns_axis.permutation, colptr, rowval, nzval)
        return SparseMatrixCSC(matrix.shape, colptr, rowval, nzval)
    out = np.empty(matrix.shape, dtype=matrix.dtype, order="F")
    permute_dense_matrix_into(matrix, None if rows_axis is None else rows_axis.permutation,
                              None if columns_axis is None else columns_axis.permutation, out)
    return out
