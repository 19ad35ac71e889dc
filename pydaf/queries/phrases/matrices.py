"""Phrases giving a matrix (``@ cell @ gene :: UMIs``, a property of a matrix's entries, element-wise operations and
comparisons), and reducing a matrix to a vector (``>|``, ``>-``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.cache import MatrixCacheKey
from ...sparse import SparseMatrixCSC
from ..base import EltwiseOperation, ReductionOperation, select_matrix
from ..query import (
    AsAxis,
    ComparisonOperation,
    IfMissing,
    IfNot,
    LookupMatrix,
    LookupVector,
    ReduceToColumn,
    ReduceToRow,
)
from ..state import MatrixState, Missing, Purpose, QueryState, VectorState, error_at_state
from .common import (
    NONE,
    MatrixSlice,
    add_matrix_final_values,
    axis_for,
    compare,
    comparison_value,
    ensure_vector_is_axis,
    finalize_matrix_values,
    finalize_vector_values,
    matrix_size,
    property_values,
    require_eltwise,
    require_reducible,
)


def matrix_lookup(query_state: QueryState, rows_state: VectorState, columns_state: VectorState,
                  as_axis: AsAxis | None, lookup: LookupMatrix, if_missing: IfMissing | None) -> None:
    finalize_vector_values(query_state, columns_state)
    ensure_vector_is_axis(query_state, columns_state, as_axis)
    rows_axis, columns_axis = rows_state.property_axis_name, columns_state.property_axis_name
    name = lookup.property_name
    assert rows_axis is not None and columns_axis is not None and name is not None
    matrix_state = MatrixState(rows_state, columns_state, name)
    if query_state.purpose is Purpose.REQUIRES_RELAYOUT:
        daf = query_state.data
        if not daf.has_matrix(rows_axis, columns_axis, name, relayout=False):
            query_state.requires_relayout = daf.has_matrix(columns_axis, rows_axis, name, relayout=False)
        matrix_state.matrix_values = np.empty((0, 0), dtype=object)
    elif query_state.computing:
        daf = query_state.data
        rows = None if rows_state.is_complete_property_axis \
            else query_state.entry_indices(rows_axis, rows_state.vector_values)
        columns = None if columns_state.is_complete_property_axis \
            else query_state.entry_indices(columns_axis, columns_state.vector_values)
        selected = query_state.get_matrix_selection(rows_axis, columns_axis, name, rows, columns)
        whole = rows is None and columns is None and rows_axis != columns_axis
        if selected is not None:  # (only the selected columns read: a packed matrix decodes only their chunks)
            matrix_state.matrix_values = selected
        elif whole and _reduced_per_row_next(query_state) \
                and daf.has_matrix(columns_axis, rows_axis, name, relayout=False):
            # (The per-row reduction reads only the flipped layout: reading this one too would decode a packed
            # matrix twice.)
            query_state.dependencies.update((MatrixCacheKey(rows_axis, columns_axis, name),
                                             MatrixCacheKey(columns_axis, rows_axis, name)))
            flipped = daf.get_stored_matrix(columns_axis, rows_axis, name, relayout=False)
            matrix_state.matrix_values = _FlippedShape(flipped)
            matrix_state.flipped = (matrix_state.matrix_values, lambda: flipped)
        else:
            matrix = query_state.get_matrix(rows_axis, columns_axis, name, if_missing)
            matrix_state.matrix_values = select_matrix(matrix, rows=rows, columns=columns)
        if whole and matrix_state.flipped is None:
            # (Looked up only if reduced per row: a fetch pays for no second lookup. A square matrix has one layout.)
            matrix_state.flipped = (matrix_state.matrix_values,
                                    lambda: daf.get_stored_matrix(columns_axis, rows_axis, name, default=None,
                                                                  relayout=False))
    else:
        if query_state.purpose is Purpose.HAS_QUERY and if_missing is None and rows_state.property_name == "name" \
                and columns_state.property_name == "name" \
                and not query_state.data.has_matrix(rows_axis, columns_axis, name):
            raise Missing
        matrix_state.matrix_values = np.empty((0, 0), dtype=object)
    query_state.stack.append(matrix_state)


def _reduced_per_row_next(query_state: QueryState) -> bool:
    """Whether the next operation reduces each row of the matrix just looked up, reading its values (``>| Sum``)."""
    operations, at = query_state.operations, query_state.next_operation_index
    following = operations[at] if at < len(operations) else None
    return isinstance(following, ReduceToColumn) and following.reduction_operation.reads_values


class _FlippedShape:
    """The shape and element type of a whole stored matrix read only in its flipped layout (which the per-row
    reduction that follows uses): its values are never read."""

    def __init__(self, flipped: Any) -> None:
        self.shape = (flipped.shape[1], flipped.shape[0])
        self.dtype = flipped.dtype


def lookup_by_matrix(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None, if_not: IfNot | None,
                     lookup: LookupVector | LookupMatrix, if_missing: IfMissing | None,
                     matrix_slice: MatrixSlice | None) -> None:
    """Replace a matrix of entry names (of an axis) with a property of those entries (same shape)."""
    assert lookup.property_name is not None
    if state.property_axis_name is None or as_axis is not None:
        state.property_axis_name = axis_for(query_state, state.property_name, as_axis)
    if query_state.computing:
        add_matrix_final_values(query_state, state, if_not)
        axis = state.property_axis_name
        assert axis is not None
        values = property_values(query_state, axis, lookup.property_name, if_missing, matrix_slice)
        names = state.matrix_values
        if isinstance(names, SparseMatrixCSC):
            names = names.to_dense()
        flat = np.asarray(names).ravel(order="F")
        result = np.zeros(flat.shape[0], dtype=values.dtype)
        if values.dtype == object:
            result[:] = ""
        keep = np.ones(flat.shape[0], dtype=bool)
        if state.pending_final_values is not None:
            keep = np.equal(state.pending_final_values.ravel(order="F"), NONE)
        result[keep] = values[query_state.entry_indices(axis, flat[keep])]
        state.matrix_values = result.reshape(np.shape(names), order="F")
    state.property_name = lookup.property_name
    state.property_axis_name = None
    query_state.stack.append(state)


def eltwise_matrix(query_state: QueryState, state: MatrixState, operation: EltwiseOperation) -> None:
    finalize_matrix_values(query_state, state)
    if query_state.computing:
        require_eltwise(query_state, state.matrix_values, operation)
        state.matrix_values = operation.compute_eltwise(state.matrix_values)
    query_state.stack.append(state)


def compare_matrix(query_state: QueryState, state: MatrixState, operation: ComparisonOperation) -> None:
    finalize_matrix_values(query_state, state)
    if query_state.computing:
        matrix = state.matrix_values
        value = comparison_value(query_state, matrix, operation, "matrix")
        if isinstance(matrix, SparseMatrixCSC):
            zero_result = bool(compare(query_state, operation, np.zeros(1, dtype=matrix.dtype), value)[0])
            if not zero_result:  # stays sparse: only stored entries can be true
                flags = np.asarray(compare(query_state, operation, np.asarray(matrix.nzval), value), dtype=bool)
                state.matrix_values = matrix.with_values(flags, keep=flags)
            else:
                state.matrix_values = np.asfortranarray(compare(query_state, operation, matrix.to_dense(), value))
        elif matrix.dtype == object:
            flat = np.asarray(compare(query_state, operation, matrix.ravel(order="F"), value), dtype=bool)
            state.matrix_values = flat.reshape(matrix.shape, order="F")
        else:
            state.matrix_values = np.asfortranarray(np.asarray(compare(query_state, operation, matrix, value),
                                                               dtype=bool))
    state.property_name = None
    state.property_axis_name = None
    query_state.stack.append(state)


def _reduce_matrix_to_vector(query_state: QueryState, matrix_state: MatrixState, operation: ReductionOperation,
                             if_missing: IfMissing | None, *, axis: int) -> None:
    finalize_matrix_values(query_state, matrix_state)
    state = matrix_state.rows_state if axis == 1 else matrix_state.columns_state
    assert state is not None
    state.property_name = None
    state.property_axis_name = None
    if query_state.computing:
        matrix = matrix_state.matrix_values
        require_reducible(query_state, matrix, operation)
        if matrix_size(matrix) > 0:
            flipped = None
            if axis == 1 and operation.reads_values and matrix_state.flipped is not None \
                    and matrix_state.flipped[0] is matrix:
                flipped = matrix_state.flipped[1]()
            if flipped is not None:
                state.vector_values = np.asarray(operation.compute_matrix(flipped, 0))
            else:
                state.vector_values = np.asarray(operation.compute_matrix(matrix, axis))
        elif if_missing is not None:
            default = np.asarray(if_missing.default_value)
            state.vector_values = np.full(len(state.vector_values), default, dtype=default.dtype)
        else:
            error_at_state(query_state, "no IfMissing value specified for reducing an empty matrix")
    query_state.stack.append(state)


def reduce_matrix_to_column(query_state: QueryState, matrix_state: MatrixState, reduce_to: ReduceToColumn,
                            if_missing: IfMissing | None) -> None:
    _reduce_matrix_to_vector(query_state, matrix_state, reduce_to.reduction_operation, if_missing, axis=1)


def reduce_matrix_to_row(query_state: QueryState, matrix_state: MatrixState, reduce_to: ReduceToRow,
                         if_missing: IfMissing | None) -> None:
    _reduce_matrix_to_vector(query_state, matrix_state, reduce_to.reduction_operation, if_missing, axis=0)
