"""What the phrase families share: looking up a property of the entries a vector holds (by name, or as a column or row
of a matrix), pending final values (``?? value``), comparisons, and grouping values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import regex

from ...julia_text import julia_string, julia_type_name
from ...sparse import SparseMatrixCSC
from ..base import EltwiseOperation, ReductionOperation
from ..query import (
    AsAxis,
    Axis,
    ComparisonOperation,
    IfMissing,
    IfNot,
    IsMatch,
    IsNotMatch,
    SquareColumnIs,
    compile_regex,
)
from ..state import (
    AxisEntries,
    MatrixState,
    Missing,
    Purpose,
    QueryState,
    VectorState,
    as_booleans,
    cast_value,
    entry_names,
    error_at_state,
    exception_line,
    is_strings,
    resolved,
)

#: ``None`` as an operand of numpy's elementwise comparisons (``np.not_equal(values, NONE)``: which entries of an
#: object array are set); typed ``Any`` because numpy's type stubs do not accept a ``None`` operand.
NONE: Any = None


@dataclass(frozen=True)
class MatrixSlice:
    """A column or row of a matrix, used as a vector property of one of its axes: ``:: M @ axis = entry`` (the column
    ``entry`` of the columns ``axis``), ``:: M @| entry`` (a column of a square matrix) or ``:: M @- entry`` (a row
    of a square matrix). The phrase machine normalises the matched slice operations into one of these (``None`` for
    a plain vector property), so each phrase has one implementation for all four forms."""

    other_axis: str | None
    entry: str
    is_column: bool

    @staticmethod
    def of(operations: tuple[Any, ...]) -> MatrixSlice | None:
        """The slice the matched operations describe: none, ``(Axis, IsEqual)``, ``(SquareColumnIs,)`` or
        ``(SquareRowIs,)``."""
        if not operations:
            return None
        entry = julia_string(operations[-1].comparison_value)
        if isinstance(operations[0], Axis):
            return MatrixSlice(operations[0].axis_name, entry, True)
        return MatrixSlice(None, entry, isinstance(operations[0], SquareColumnIs))


def property_values(query_state: QueryState, axis: str, name: str, if_missing: IfMissing | None,
                    matrix_slice: MatrixSlice | None) -> np.ndarray:
    """The values of a property of the entries of ``axis``: a vector, or a column or row of a matrix."""
    if matrix_slice is None:
        return query_state.get_vector(axis, name, if_missing)
    other = axis if matrix_slice.other_axis is None else matrix_slice.other_axis
    if matrix_slice.is_column:
        return query_state.get_matrix_slice(axis, other, name, if_missing, matrix_slice.entry, is_column=True)
    return query_state.get_matrix_slice(other, axis, name, if_missing, matrix_slice.entry, is_column=False)


def lookup_property(query_state: QueryState, state: VectorState, name: str, if_missing: IfMissing | None,
                    matrix_slice: MatrixSlice | None, *, as_axis: AsAxis | None = None,
                    if_not: IfNot | None = None) -> None:
    """Replace the values of a vector state (entry names of an axis) with a property of those entries; push it."""
    ensure_vector_is_axis(query_state, state, as_axis)
    if query_state.computing:
        add_final_values(state, if_not)
        axis = state.property_axis_name
        assert axis is not None
        state.vector_values = _lookup_by_names(query_state, state, axis,
                                               property_values(query_state, axis, name, if_missing, matrix_slice))
        state.values_source = (axis, name) if matrix_slice is None else None
    elif query_state.purpose is Purpose.HAS_QUERY and matrix_slice is None and if_missing is None \
            and state.property_name == "name":
        if not query_state.data.has_vector(state.property_axis_name, name):  # type: ignore[arg-type]
            raise Missing
    state.property_name = name
    state.property_axis_name = None
    state.is_complete_property_axis = False
    query_state.stack.append(state)


def ensure_vector_is_axis(query_state: QueryState, state: VectorState, as_axis: AsAxis | None) -> None:
    if state.property_axis_name is None or as_axis is not None:
        set_vector_property_axis(query_state, state, as_axis)


def set_vector_property_axis(query_state: QueryState, state: VectorState, as_axis: AsAxis | None) -> None:
    """The values of a vector state are entries of an axis (``=@ axis``, or the axis named by the property)."""
    if state.property_name is None:
        error_at_state(query_state, "the values are not entries of an axis")
    # Pending final values stay pending: the chain of lookups goes on, and they are applied at its end.
    state.property_axis_name = axis_for(query_state, state.property_name, as_axis)


def axis_for(query_state: QueryState, property_name: str | None, as_axis: AsAxis | None) -> str | None:
    """The axis whose entries a property's values are: the ``=@`` axis if given, else the property name if it is an
    axis, else its prefix before the first ``.`` (``type.manual`` → ``type``)."""
    if as_axis is not None and as_axis.axis_name is not None:
        return as_axis.axis_name
    if not query_state.computing or property_name is None:
        return property_name
    if query_state.data.has_axis(property_name):
        return property_name
    return property_name.split(".", 1)[0]


def extract_vector_axis(query_state: QueryState, state: VectorState) -> VectorState:
    """The entries of a vector, as values of its entries axis (to look up a grouping/counting property)."""
    axis_state = state.copy()
    axis_state.property_axis_name = axis_state.entries_axis_name
    # Entries that are (still) all the entries of the axis need no lookup by name (nor reading the names).
    axis_state.is_complete_property_axis = (
        query_state.computing
        and state.entries_axis_name is not None
        and (isinstance(state.stored_entries, AxisEntries)
             or state.vector_entries is query_state.axis_vector(state.entries_axis_name))
    )
    axis_state.stored_values = axis_state.stored_entries
    axis_state.values_source = None
    return axis_state


def _lookup_by_names(query_state: QueryState, state: VectorState, axis: str, values_of_axis: np.ndarray) -> np.ndarray:
    """The values (of an axis-indexed vector) at the entries named by ``state.vector_values``; entries with a pending
    final value get a placeholder (empty string or zero) until finalized."""
    if state.pending_final_values is not None:
        pending = np.not_equal(state.pending_final_values, NONE)
        result = np.zeros(len(state.vector_values), dtype=values_of_axis.dtype)
        if values_of_axis.dtype == object:
            result[:] = ""
        keep = ~pending
        result[keep] = values_of_axis[query_state.entry_indices(axis, state.vector_values[keep])]
        return result
    if state.is_complete_property_axis:
        return values_of_axis
    return values_of_axis[query_state.entry_indices(axis, state.vector_values)]


# Pending final values (``?? value``).


def add_final_values(state: VectorState, if_not: IfNot | None) -> None:
    if if_not is None:
        return
    mask = as_booleans(state.vector_values)
    if state.pending_final_values is not None:
        # An entry whose chain already ended (it has a final value) holds a placeholder; it is neither dropped nor
        # given another final value.
        mask = mask | np.not_equal(state.pending_final_values, NONE)
    if if_not.final_value is None:
        state.vector_entries = state.vector_entries[mask]  # type: ignore[index]
        state.vector_values = state.vector_values[mask]
        if state.pending_final_values is not None:
            state.pending_final_values = state.pending_final_values[mask]
        state.is_complete_property_axis = False
    else:
        if state.pending_final_values is None:
            state.pending_final_values = np.full(len(state.vector_values), None, dtype=object)
        state.pending_final_values[~mask] = if_not.final_value


def finalize_vector_values(query_state: QueryState, state: VectorState) -> None:
    if query_state.computing and state.pending_final_values is not None:
        values = np.array(state.vector_values, copy=True)
        for index in np.flatnonzero(np.not_equal(state.pending_final_values, NONE)):
            values[index] = cast_value(query_state, "final", state.pending_final_values[index], values.dtype)
        state.vector_values = values
        state.pending_final_values = None


def add_matrix_final_values(query_state: QueryState, state: MatrixState, if_not: IfNot | None) -> None:
    if if_not is None:
        return
    if if_not.final_value is None:
        error_at_state(query_state, "?? without a final value can not be applied to a matrix")
    mask = as_booleans(state.matrix_values)
    if state.pending_final_values is None:
        state.pending_final_values = np.full(state.matrix_values.shape, None, dtype=object)
    state.pending_final_values[~mask] = if_not.final_value


def finalize_matrix_values(query_state: QueryState, state: MatrixState) -> None:
    if query_state.computing and state.pending_final_values is not None:
        values = state.matrix_values
        values = np.array(values.to_dense() if isinstance(values, SparseMatrixCSC) else values, copy=True, order="F")
        for row, column in zip(*np.nonzero(np.not_equal(state.pending_final_values, NONE)), strict=True):
            values[row, column] = cast_value(query_state, "final", state.pending_final_values[row, column],
                                             values.dtype)
        state.matrix_values = values
        state.pending_final_values = None


# Operations on values.


def matrix_size(matrix: Any) -> int:
    return int(matrix.shape[0]) * int(matrix.shape[1])


def require_eltwise(query_state: QueryState, values: Any, operation: EltwiseOperation) -> None:
    if is_strings(values) and not operation.supports_strings:
        error_at_state(query_state, f"unsupported input type: String\n"
                                    f"for the eltwise operation: {operation.operation_name()}")


def require_reducible(query_state: QueryState, values: Any, operation: ReductionOperation) -> None:
    if is_strings(values) and not operation.supports_strings:
        error_at_state(query_state, f"unsupported input type: String\n"
                                    f"for the reduction operation: {operation.operation_name()}")


def comparison_value(query_state: QueryState, values: Any, operation: ComparisonOperation, what: str) -> Any:
    """The value to compare with (a compiled regular expression for ``~``/``!~``), as Julia checks it."""
    value = operation.comparison_value
    values_are_strings = is_strings(values)
    if isinstance(operation, IsMatch | IsNotMatch):
        if not values_are_strings:
            error_at_state(query_state, f"unsupported {what} element type: {julia_type_name(values)}\n"
                                        f"for the comparison operation: {type(operation).__name__}")
        if isinstance(value, str):
            try:
                value = compile_regex(value)
            except regex.error as exception:
                error_at_state(query_state, f"invalid regular expression: {value}\n"
                                            f"for the comparison operation: {type(operation).__name__}\n"
                                            f"{exception_line(exception)}")
        return value
    if not values_are_strings and isinstance(value, str):
        try:
            return float(value)
        except ValueError as exception:
            error_at_state(query_state, f"error parsing number comparison value: {value}\n"
                                        f"for comparison with a {what} of type: {julia_type_name(values)}\n"
                                        f"{exception_line(exception)}")
    if values_are_strings and not isinstance(value, str):
        return julia_string(value)
    return value


def compare(query_state: QueryState, operation: ComparisonOperation, values: np.ndarray, value: Any) -> np.ndarray:
    """``operation.compare``; a regular expression that runs past its time limit is a query error."""
    try:
        return operation.compare(values, value)
    except TimeoutError:
        error_at_state(query_state, f"the regular expression takes too long: {value.pattern}\n"
                                    f"for the comparison operation: {type(operation).__name__}")


# Grouping.


def reindex(base_entries: np.ndarray | AxisEntries, subset_entries: np.ndarray | AxisEntries) -> np.ndarray | None:
    """Positions of ``subset_entries`` in ``base_entries`` (``None`` when they are the same entries; the names of an
    axis are read only if they are not: 10,000 names from an H5df take 3-5 ms)."""
    if len(subset_entries) == len(base_entries):
        return None
    positions = {name: index for index, name in enumerate(resolved(base_entries))}
    return np.array([positions[name] for name in resolved(subset_entries)], dtype=np.intp)


def group_values(query_state: QueryState, group_state: VectorState) -> tuple[np.ndarray, np.ndarray]:
    """The group values (sorted unique values, or the entries of the group axis) and each entry's 0-based group
    (-1: in no group). Unlike Julia, which always sorts, the values of a vector imported from an AnnData categorical
    are in the order of its recorded categories (``<axis>_<vector>_categories``: ``0, 1, 2, …, 10``, not ``0, 1, 10,
    2, …``), any value not among them (``""`` for missing) after them, sorted."""
    values = group_state.vector_values
    if group_state.property_axis_name is None:
        import pandas as pd  # (lazily: pandas takes a while to import)

        # Hash the values (in C) and sort only the distinct ones: Julia's sorted unique values, without sorting
        # a million strings.
        codes, uniques = pd.factorize(np.asarray(values), use_na_sentinel=False)
        uniques = np.asarray(uniques, dtype=np.asarray(values).dtype)
        order = np.argsort(uniques, kind="stable")
        categories = None
        if group_state.values_source is not None and uniques.dtype == object:
            categories = query_state.get_recorded_categories(*group_state.values_source)
        if categories:
            # Positions in the categories, the others after them: a stable sort of the (sorted) uniques by them.
            position: dict[str, int] = {}
            for index, category in enumerate(categories):
                position.setdefault(category, index)
            recorded = np.array([position.get(value, len(categories)) for value in uniques[order].tolist()],
                                dtype=np.int64)
            order = order[np.argsort(recorded, kind="stable")]
        rank = np.empty(order.shape[0], dtype=np.int64)
        rank[order] = np.arange(order.shape[0])
        return uniques[order], rank[codes]
    axis = group_state.property_axis_name
    groups = query_state.positions_in_axis(axis, entry_names(values)).astype(np.int64)
    return query_state.axis_vector(axis), groups


def fill_empty_groups(query_state: QueryState, reduced: np.ndarray, counts: np.ndarray, unique_values: np.ndarray,
                      group_state: VectorState, if_missing: IfMissing | None, axis: int) -> np.ndarray:
    empty = np.flatnonzero(counts == 0)
    if empty.shape[0] == 0:
        return reduced
    if if_missing is None:
        error_at_state(query_state, f"no IfMissing value specified for the unused entry: "
                                    f"{julia_string(unique_values[empty[0]])}\n"
                                    f"of the axis: {group_state.property_axis_name}")
    value = cast_value(query_state, "missing", if_missing.default_value, reduced.dtype)
    reduced = np.array(reduced, copy=True, order="F")
    if reduced.ndim == 1:
        reduced[empty] = value
    elif axis == 0:
        reduced[empty, :] = value
    else:
        reduced[:, empty] = value
    return reduced
