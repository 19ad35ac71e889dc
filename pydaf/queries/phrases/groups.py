"""Phrases grouping (``/ g >> R`` on a vector; ``-/ g >- R`` and ``|/ g >| R`` on a matrix) and counting
(``* prop``: a matrix of how often each pair of values occurs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import ReductionOperation, select_matrix
from ..query import AsAxis, CountBy, GroupBy, GroupColumnsBy, GroupRowsBy, IfMissing, ReduceToColumn, ReduceToRow
from ..state import NO_STRINGS, MatrixState, QueryState, VectorState, entry_names, error_at_state
from .common import (
    MatrixSlice,
    extract_vector_axis,
    fill_empty_groups,
    finalize_matrix_values,
    finalize_vector_values,
    group_values,
    lookup_property,
    reindex,
    require_reducible,
    set_vector_property_axis,
)


def _lookup_groups(query_state: QueryState, base: VectorState | MatrixState, operation: Any, state: VectorState,
                   if_missing: IfMissing | None, matrix_slice: MatrixSlice | None, what: str) -> None:
    """Push the grouped (or counted) ``base`` and the operation, then the property of the entries of ``state``."""
    if state.entries_axis_name is None and query_state.computing:
        error_at_state(query_state, f"the {what} entries are not entries of an axis")
    query_state.stack.extend((base, operation))
    lookup_property(query_state, extract_vector_axis(query_state, state), operation.property_name, if_missing,
                    matrix_slice)


def lookup_vector_group(query_state: QueryState, state: VectorState, group_by: GroupBy, if_missing: IfMissing | None,
                        matrix_slice: MatrixSlice | None) -> None:
    finalize_vector_values(query_state, state)
    _lookup_groups(query_state, state, group_by, state, if_missing, matrix_slice, "vector")


def lookup_matrix_group(query_state: QueryState, matrix_state: MatrixState, group_by: GroupColumnsBy | GroupRowsBy,
                        if_missing: IfMissing | None, matrix_slice: MatrixSlice | None) -> None:
    finalize_matrix_values(query_state, matrix_state)
    state = matrix_state.columns_state if isinstance(group_by, GroupColumnsBy) else matrix_state.rows_state
    assert state is not None
    _lookup_groups(query_state, matrix_state, group_by, state, if_missing, matrix_slice, "matrix")


def lookup_count(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, count_by: CountBy,
                 if_missing: IfMissing | None, matrix_slice: MatrixSlice | None) -> None:
    finalize_vector_values(query_state, state)
    if as_axis is not None:
        set_vector_property_axis(query_state, state, as_axis)
    _lookup_groups(query_state, state, count_by, state, if_missing, matrix_slice, "vector")


def reduce_grouped_vector(query_state: QueryState, base_state: VectorState, _group_by: GroupBy,
                          group_state: VectorState, operation: ReductionOperation,
                          if_missing: IfMissing | None) -> None:
    finalize_vector_values(query_state, group_state)
    if not query_state.computing:
        base_state.property_name = None
        base_state.property_axis_name = None
        base_state.is_complete_property_axis = False
        query_state.stack.append(base_state)
        return
    positions = reindex(base_state.stored_entries, group_state.stored_entries)  # type: ignore[arg-type]
    values = base_state.vector_values if positions is None else base_state.vector_values[positions]
    unique_values, groups = group_values(query_state, group_state)
    require_reducible(query_state, values, operation)
    result_dtype = operation.reduction_result_type(np.asarray(values).dtype)
    counts = np.bincount(groups[groups >= 0], minlength=len(unique_values))
    reduced = np.asarray(operation.compute_grouped_vector(np.asarray(values), groups, len(unique_values)))
    reduced = reduced.astype(result_dtype, copy=False)
    reduced = fill_empty_groups(query_state, reduced, counts, unique_values, group_state, if_missing, 0)
    reduced_state = VectorState()
    reduced_state.entries_axis_name = group_state.property_axis_name
    reduced_state.vector_entries = entry_names(unique_values)
    reduced_state.is_complete_property_axis = base_state.property_axis_name is not None
    reduced_state.vector_values = reduced
    query_state.stack.append(reduced_state)


def compute_grouped_matrix(query_state: QueryState, base_state: MatrixState, group_by: GroupColumnsBy | GroupRowsBy,
                           group_state: VectorState, reduce_to: ReduceToColumn | ReduceToRow,
                           if_missing: IfMissing | None) -> None:
    finalize_vector_values(query_state, group_state)
    by_rows = isinstance(group_by, GroupRowsBy)
    grouped_state = base_state.rows_state if by_rows else base_state.columns_state
    assert grouped_state is not None
    if not query_state.computing:
        base_state.property_name = None
        grouped_state.property_name = None
        grouped_state.property_axis_name = None
        grouped_state.is_complete_property_axis = False
        query_state.stack.append(base_state)
        return
    operation = reduce_to.reduction_operation
    positions = reindex(grouped_state.stored_entries, group_state.stored_entries)  # type: ignore[arg-type]
    matrix = base_state.matrix_values
    if positions is not None:
        matrix = select_matrix(matrix, rows=positions) if by_rows else select_matrix(matrix, columns=positions)
    unique_values, groups = group_values(query_state, group_state)
    require_reducible(query_state, matrix, operation)
    axis = 0 if by_rows else 1
    result_dtype = operation.reduction_result_type(matrix.dtype)
    counts = np.bincount(groups[groups >= 0], minlength=len(unique_values))
    reduced = np.asarray(operation.compute_grouped_matrix(matrix, groups, len(unique_values), axis))
    reduced = np.asfortranarray(reduced.astype(result_dtype, copy=False))
    reduced = fill_empty_groups(query_state, reduced, counts, unique_values, group_state, if_missing, axis)
    new_state = VectorState()
    new_state.entries_axis_name = group_state.property_axis_name
    new_state.vector_entries = entry_names(unique_values)
    new_state.is_complete_property_axis = group_state.property_axis_name is not None
    new_state.vector_values = unique_values
    reduced_state = MatrixState()
    if by_rows:
        reduced_state.rows_state, reduced_state.columns_state = new_state, base_state.columns_state
    else:
        reduced_state.rows_state, reduced_state.columns_state = base_state.rows_state, new_state
    reduced_state.matrix_values = reduced
    query_state.stack.append(reduced_state)


def _count_axis_state(query_state: QueryState, state: VectorState) -> tuple[VectorState, np.ndarray]:
    """The rows (or columns) of a count matrix, and each value's 0-based position in them (-1: not counted)."""
    count_state = VectorState()
    if not query_state.computing:
        unique_values, positions = state.vector_values, np.empty(0, dtype=np.int64)
    else:
        unique_values, positions = group_values(query_state, state)
    count_state.entries_axis_name = state.property_axis_name
    count_state.vector_entries = entry_names(unique_values) if query_state.computing else NO_STRINGS
    count_state.property_axis_name = state.property_axis_name
    count_state.is_complete_property_axis = state.property_axis_name is not None
    count_state.vector_values = unique_values
    return count_state, positions


def compute_count_matrix(query_state: QueryState, rows_state: VectorState, _count_by: CountBy,
                         columns_state: VectorState) -> None:
    finalize_vector_values(query_state, columns_state)
    if query_state.computing and len(rows_state.vector_entries) != len(columns_state.vector_entries):  # type: ignore
        error_at_state(query_state, f"different CountBy vector lengths: {len(rows_state.vector_entries)} * "  # type: ignore
                                    f"{len(columns_state.vector_entries)}")  # type: ignore[arg-type]
    if query_state.computing and len(columns_state.vector_entries) != len(rows_state.vector_values):  # type: ignore
        positions = reindex(rows_state.vector_entries, columns_state.vector_entries)  # type: ignore[arg-type]
        rows_state = rows_state.copy()
        rows_state.vector_values = rows_state.vector_values[positions]
    matrix_state = MatrixState()
    matrix_state.rows_state, row_positions = _count_axis_state(query_state, rows_state)
    matrix_state.columns_state, column_positions = _count_axis_state(query_state, columns_state)
    if query_state.computing:
        n_values = len(rows_state.vector_values)
        dtype = next(dtype for dtype in (np.uint8, np.uint16, np.uint32, np.uint64) if n_values <= np.iinfo(dtype).max)
        n_rows, n_columns = len(matrix_state.rows_state.vector_values), len(matrix_state.columns_state.vector_values)
        counted = (row_positions >= 0) & (column_positions >= 0)
        flat = row_positions[counted] + column_positions[counted] * n_rows
        counts = np.bincount(flat, minlength=n_rows * n_columns).astype(dtype)
        matrix_state.matrix_values = counts.reshape((n_rows, n_columns), order="F")
    else:
        matrix_state.matrix_values = np.empty((0, 0), dtype=object)
    query_state.stack.append(matrix_state)
