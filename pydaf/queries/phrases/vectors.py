"""Phrases giving a vector: the entries of an axis (``@ cell``), a property of a vector's entries (``: age``,
``:: UMIs @ gene = X``, ``:: M @| X``, ``:: M @- X``, chained through ``=@`` and ``??``), and element-wise operations
and comparisons of a vector."""

from __future__ import annotations

import numpy as np

from ...core.cache import AxisCacheKey
from ..base import EltwiseOperation
from ..query import AsAxis, Axis, ComparisonOperation, IfMissing, IfNot, LookupMatrix, LookupVector
from ..state import NO_STRINGS, Missing, Purpose, QueryState, VectorState
from .common import (
    MatrixSlice,
    compare,
    comparison_value,
    finalize_vector_values,
    lookup_property,
    require_eltwise,
    set_vector_property_axis,
)


def axis_lookup(query_state: QueryState, axis: Axis) -> None:
    name = axis.axis_name
    assert name is not None
    state = VectorState()
    if not query_state.computing:
        if query_state.purpose is Purpose.HAS_QUERY and not query_state.data.has_axis(name):
            raise Missing
        state.vector_entries = NO_STRINGS
    else:
        query_state.dependencies.add(AxisCacheKey(name))
        state.vector_entries = query_state.axis_entries(name)
    state.entries_axis_name = name
    state.property_name = "name"
    state.property_axis_name = name
    state.is_complete_property_axis = True
    state.stored_values = state.stored_entries  # (Still to be read, if at all.)
    query_state.stack.append(state)


def vector_property_is_axis(query_state: QueryState, state: VectorState, as_axis: AsAxis | None) -> None:
    set_vector_property_axis(query_state, state, as_axis)
    query_state.stack.append(state)


def lookup_by_vector(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, if_not: IfNot | None,
                     lookup: LookupVector | LookupMatrix, if_missing: IfMissing | None,
                     matrix_slice: MatrixSlice | None) -> None:
    assert lookup.property_name is not None
    lookup_property(query_state, state, lookup.property_name, if_missing, matrix_slice, as_axis=as_axis,
                    if_not=if_not)


def eltwise_vector(query_state: QueryState, state: VectorState, operation: EltwiseOperation) -> None:
    if query_state.computing:
        require_eltwise(query_state, state.vector_values, operation)
        state.vector_values = operation.compute_eltwise(state.vector_values)
    state.values_source = None  # (other values: no recorded categories apply)
    query_state.stack.append(state)


def compare_vector(query_state: QueryState, state: VectorState, operation: ComparisonOperation) -> None:
    finalize_vector_values(query_state, state)
    if query_state.computing:
        value = comparison_value(query_state, state.vector_values, operation, "vector")
        state.vector_values = np.asarray(compare(query_state, operation, np.asarray(state.vector_values), value),
                                         dtype=bool)
    state.property_name = None
    state.property_axis_name = None
    state.is_complete_property_axis = False
    state.values_source = None
    query_state.stack.append(state)
