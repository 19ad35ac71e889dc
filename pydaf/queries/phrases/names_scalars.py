"""Phrases giving a set of names (``?``, ``@ ?``, ``@ cell : ?``, ``@ cell @ gene :: ?``) or a scalar (``. name``, an
entry of a vector or matrix, a reduction of a vector or matrix, and element-wise operations on a scalar)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.cache import NamesCacheKey, ScalarCacheKey
from ...core.undef import Undef
from ...julia_text import julia_string
from ..base import EltwiseOperation, ReductionOperation
from ..query import Axis, IfMissing, IsEqual, LookupMatrix, LookupScalar, LookupVector, Names
from ..state import MatrixState, Missing, NamesState, Purpose, QueryState, ScalarState, VectorState, error_at_state
from .common import finalize_matrix_values, finalize_vector_values, matrix_size, require_reducible


def _names(query_state: QueryState, key: NamesCacheKey, names: Any) -> None:
    if not query_state.computing:
        query_state.stack.append(NamesState(None))
        return
    query_state.dependencies.add(key)
    query_state.stack.append(NamesState(names(query_state.data)))


def names_of_matrices(query_state: QueryState, rows_axis: Axis, columns_axis: Axis, _lookup: LookupMatrix,
                      _names_operation: Names) -> None:
    rows, columns = rows_axis.axis_name, columns_axis.axis_name
    assert rows is not None and columns is not None  # (the phrase matches named axes only)
    _names(query_state, NamesCacheKey("matrices", (rows, columns)), lambda daf: daf.matrices_set(rows, columns))


def names_of_vectors(query_state: QueryState, axis: Axis, _lookup: LookupVector, _names_operation: Names) -> None:
    axis_name = axis.axis_name
    assert axis_name is not None  # (the phrase matches a named axis only)
    _names(query_state, NamesCacheKey("vectors", (axis_name,)), lambda daf: daf.vectors_set(axis_name))


def names_of_axes(query_state: QueryState, _axis: Axis, _names_operation: Names) -> None:
    _names(query_state, NamesCacheKey("axes"), lambda daf: daf.axes_set())


def names_of_scalars(query_state: QueryState, *_operations: Any) -> None:
    _names(query_state, NamesCacheKey("scalars"), lambda daf: daf.scalars_set())


def scalar_lookup(query_state: QueryState, lookup: LookupScalar, if_missing: IfMissing | None) -> None:
    name = lookup.property_name
    assert name is not None
    if not query_state.computing:
        if query_state.purpose is Purpose.HAS_QUERY and if_missing is None and not query_state.data.has_scalar(name):
            raise Missing
        query_state.stack.append(ScalarState(None))
        return
    query_state.dependencies.add(ScalarCacheKey(name))
    value = query_state.data.get_scalar(name, default=Undef if if_missing is None else if_missing.default_value)
    query_state.stack.append(ScalarState(value))


def lookup_vector_entry(query_state: QueryState, lookup: LookupVector, if_missing: IfMissing | None, axis: Axis,
                        is_equal: IsEqual) -> None:
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    assert axis.axis_name is not None and lookup.property_name is not None
    values = query_state.get_vector(axis.axis_name, lookup.property_name, if_missing)
    index = query_state.entry_indices(axis.axis_name,
                                      np.array([julia_string(is_equal.comparison_value)], dtype=object))[0]
    query_state.stack.append(ScalarState(values[index]))


def lookup_matrix_entry(query_state: QueryState, lookup: LookupMatrix, if_missing: IfMissing | None, rows_axis: Axis,
                        row_is: IsEqual, columns_axis: Axis, column_is: IsEqual) -> None:
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    assert rows_axis.axis_name is not None and columns_axis.axis_name is not None
    assert lookup.property_name is not None
    column = query_state.get_matrix_slice(rows_axis.axis_name, columns_axis.axis_name, lookup.property_name,
                                          if_missing, julia_string(column_is.comparison_value), is_column=True)
    row = query_state.entry_indices(rows_axis.axis_name,
                                    np.array([julia_string(row_is.comparison_value)], dtype=object))[0]
    query_state.stack.append(ScalarState(column[row]))


def reduce_vector_to_scalar(query_state: QueryState, state: VectorState, operation: ReductionOperation,
                            if_missing: IfMissing | None) -> None:
    finalize_vector_values(query_state, state)
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    require_reducible(query_state, state.vector_values, operation)
    if len(state.vector_values) > 0:
        query_state.stack.append(ScalarState(operation.compute_vector(np.asarray(state.vector_values))))
    elif if_missing is not None:
        query_state.stack.append(ScalarState(if_missing.default_value))
    else:
        error_at_state(query_state, "no IfMissing value specified for reducing an empty vector")


def reduce_matrix_to_scalar(query_state: QueryState, state: MatrixState, operation: ReductionOperation,
                            if_missing: IfMissing | None) -> None:
    finalize_matrix_values(query_state, state)
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    require_reducible(query_state, state.matrix_values, operation)
    if matrix_size(state.matrix_values) > 0:
        query_state.stack.append(ScalarState(operation.compute_all(state.matrix_values)))
    elif if_missing is not None:
        query_state.stack.append(ScalarState(if_missing.default_value))
    else:
        error_at_state(query_state, "no IfMissing value specified for reducing an empty matrix")


def eltwise_scalar(query_state: QueryState, scalar_state: ScalarState, operation: EltwiseOperation) -> None:
    if query_state.computing:
        if isinstance(scalar_state.scalar_value, str) and not operation.supports_strings:
            error_at_state(query_state, f"unsupported input type: String\n"
                                        f"for the eltwise operation: {operation.operation_name()}")
        scalar_state.scalar_value = operation.compute_eltwise(scalar_state.scalar_value)
    query_state.stack.append(scalar_state)
