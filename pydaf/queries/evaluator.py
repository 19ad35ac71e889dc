"""Applying a query to a data set: Julia's stack machine of phrases.

The query is consumed phrase by phrase; the first phrase in :data:`PHRASES` whose expected stack top and next
operations match wins, pops what it matched and pushes its result (names, a scalar, a vector or a matrix state, or a
marker operation for a multi-phrase construct such as a mask or a group). The same machine runs without data
(``what_for`` other than ``compute``) to answer :func:`query_result_dimensions`, :func:`is_axis_query` and friends.

Vectors are dense numpy arrays (strings as ``object`` arrays); matrices are column-major numpy arrays or 1-based
:class:`~pydaf.sparse.SparseMatrixCSC` straight from the store (mapped where the store is), so reductions run on the
stored data without conversion.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.brief import brief_array, brief_scalar
from ..core.cache import AxisForm, AxisKey, MatrixKey, NamesKey, ScalarKey, VectorKey
from ..core.undef import Undef
from ..errors import DafError, DafQueryError
from ..formats.base import CacheGroup
from ..sparse import SparseMatrixCSC
from ..storage_types import julia_name
from .query import (
    AsAxis,
    Axis,
    BeginMask,
    BeginNegatedMask,
    ComparisonOperation,
    CountBy,
    EltwiseOperation,
    EndMask,
    GroupBy,
    GroupColumnsBy,
    GroupRowsBy,
    IfMissing,
    IfNot,
    IsEqual,
    IsMatch,
    IsNotMatch,
    LookupMatrix,
    LookupScalar,
    LookupVector,
    MaskOperation,
    Names,
    QueryOperation,
    QuerySequence,
    ReduceToColumn,
    ReduceToRow,
    ReductionOperation,
    SquareColumnIs,
    SquareRowIs,
    as_query_sequence,
    julia_string,
)

if TYPE_CHECKING:
    from ..core.readers import DafReader

COMPUTE = "compute"


# Stack elements.


@dataclass
class NamesState:
    names_set: set[str] | None


@dataclass
class ScalarState:
    scalar_value: Any


_NO_STRINGS = np.empty(0, dtype=object)


@dataclass
class VectorState:
    entries_axis_name: str | None = None
    vector_entries: np.ndarray | None = None
    property_name: str | None = None
    property_axis_name: str | None = None
    is_complete_property_axis: bool = False
    vector_values: Any = None
    pending_final_values: np.ndarray | None = None

    def copy(self) -> VectorState:
        return VectorState(self.entries_axis_name, self.vector_entries, self.property_name, self.property_axis_name,
                           self.is_complete_property_axis, self.vector_values, self.pending_final_values)


@dataclass
class MatrixState:
    rows_state: VectorState | None = None
    columns_state: VectorState | None = None
    property_name: str | None = None
    property_axis_name: str | None = None
    matrix_values: Any = None
    pending_final_values: np.ndarray | None = None
    # The stored matrix in the other layout, while ``matrix_values`` is the whole stored matrix (reducing each row of a
    # column-major matrix is a scatter; reducing each column of its flipped layout is a parallel streaming pass).
    flipped: tuple[Any, Callable[[], Any]] | None = None


@dataclass
class QueryState:
    daf: DafReader | None
    operations: tuple[QueryOperation, ...]
    what_for: str
    first_operation_index: int = 0
    next_operation_index: int = 0
    dependencies: set[Any] = field(default_factory=set)
    requires_relayout: bool = False
    stack: list[Any] = field(default_factory=list)

    @property
    def computing(self) -> bool:
        return self.what_for == COMPUTE


# Errors.


def _text(operations: tuple[QueryOperation, ...]) -> str:
    return " ".join(str(operation) for operation in operations)


def _offset(state: QueryState, index: int) -> int:
    return 0 if index <= 0 else len(_text(state.operations[:index])) + 1


def error_at_state(state: QueryState, message: str) -> None:
    """Raise a :class:`DafQueryError` pointing (``▲``) at the operations of the current phrase."""
    full_text = _text(state.operations)
    if state.next_operation_index == state.first_operation_index:
        if state.first_operation_index < len(state.operations):
            first_offset = _offset(state, state.first_operation_index) - 1
        else:
            first_offset = len(full_text)
        last_offset = first_offset + 1
    else:
        first_offset = _offset(state, state.first_operation_index)
        if state.next_operation_index < len(state.operations):
            last_offset = _offset(state, state.next_operation_index) - 1
        else:
            last_offset = len(full_text)
    indent = " " * max(0, first_offset)
    marker = "▲" * max(1, last_offset - first_offset)
    message = message.rstrip("\n") + f"\nin the query: {full_text}\nat location:  {indent}{marker}"
    if state.daf is not None:
        message += f"\nfor the daf data: {state.daf.name}"
    raise DafQueryError(message)


def _type_name(values: Any) -> str:
    dtype = values.dtype if hasattr(values, "dtype") else np.asarray(values).dtype
    return "String" if dtype.kind == "O" else julia_name(dtype)


def _is_strings(values: Any) -> bool:
    return getattr(getattr(values, "dtype", None), "kind", None) == "O"


def _exception_line(exception: BaseException) -> str:
    return f"{type(exception).__name__}: {exception}"


# Values.


def as_booleans(values: Any) -> Any:
    """Julia's truthiness of values: Bool as is, non-empty strings, non-zero numbers."""
    if isinstance(values, SparseMatrixCSC):
        values = values.to_dense()
    values = np.asarray(values)
    if values.dtype == bool:
        return values
    if values.dtype.kind == "O":
        return values != ""
    return values != 0


def cast_value(state: QueryState, what: str, value: Any, dtype: np.dtype) -> Any:
    """Convert a default or final value to the element type of the data it goes into (Julia's ``cast_value``)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        return value if isinstance(value, str) else julia_string(value)
    if isinstance(value, str):
        try:
            if dtype.kind == "b":
                if value not in ("true", "false"):
                    raise ValueError(f"invalid Bool: {value!r}")
                return np.bool_(value == "true")
            if dtype.kind in "iu":
                return dtype.type(int(value))
            return dtype.type(float(value))
        except (ValueError, OverflowError) as exception:
            error_at_state(state, f"error parsing {what} value: {value}\nas type: {julia_name(dtype)}\n"
                                  f"{_exception_line(exception)}")
    try:
        if dtype.kind in "iub":
            number = float(value) if not isinstance(value, int | np.integer) else int(value)
            if dtype.kind == "b":
                if number not in (0, 1):
                    raise ValueError(f"{value} is not 0 or 1")
                return np.bool_(number == 1)
            if number != int(number):
                raise ValueError(f"{value} is not an integer")
            info = np.iinfo(dtype)
            if not info.min <= int(number) <= info.max:
                raise ValueError(f"{value} is out of range")
            return dtype.type(int(number))
        return dtype.type(value)
    except (ValueError, OverflowError, TypeError) as exception:
        error_at_state(state, f"error converting: {_type_name(np.asarray(value))}\n{what} value: {julia_string(value)}"
                              f"\nto type: {julia_name(dtype)}\n{_exception_line(exception)}")
    return None  # pragma: no cover - error_at_state raises


def _strings(values: Any) -> np.ndarray:
    """Values as entry names (Julia's ``string.(values)``)."""
    values = np.asarray(values)
    if values.dtype == object:
        return values
    return np.array([julia_string(value) for value in values.tolist()] if values.dtype != bool
                    else ["true" if value else "false" for value in values], dtype=object).reshape(values.shape)


def _axis_index(daf: DafReader, axis: str) -> Any:
    """A hashed ``pandas.Index`` of the axis entries (cached with the data set's axis data)."""
    import pandas as pd

    return daf.cache.get_or_compute(AxisKey(axis, AxisForm.INDEX),
                                    lambda: (pd.Index(daf.axis_vector(axis), dtype=object), CacheGroup.MemoryData))


def _positions_in_axis(daf: DafReader, axis: str, names: np.ndarray) -> np.ndarray:
    """0-based positions of entry names in an axis (-1 for names that are not entries), hashed in C."""
    return _axis_index(daf, axis).get_indexer(names.ravel()).reshape(names.shape)


def _entry_indices(state: QueryState, axis: str, names: Any) -> np.ndarray:
    """0-based positions of entry names in an axis (a clear error naming the axis for a name that is not there)."""
    assert state.daf is not None
    names = _strings(names)
    indices = _positions_in_axis(state.daf, axis, names)
    missing = np.flatnonzero(indices.ravel() < 0)
    if missing.shape[0] > 0:
        error_at_state(state, f"missing entry: {names.ravel()[missing[0]]}\nof the axis: {axis}")
    return indices


def _default(if_missing: IfMissing | None) -> Any:
    return Undef if if_missing is None else if_missing.default_value


def _take_rows_columns(matrix: Any, rows: np.ndarray | None, columns: np.ndarray | None) -> Any:
    """A sub-matrix (a copy) of the given 0-based rows/columns."""
    if rows is None and columns is None:
        return matrix
    if isinstance(matrix, SparseMatrixCSC):
        scipy_matrix = matrix.to_scipy()
        if columns is not None:
            scipy_matrix = scipy_matrix[:, columns]
        if rows is not None:
            scipy_matrix = scipy_matrix[rows, :]
        return SparseMatrixCSC.from_scipy(scipy_matrix.tocsc(), indtype=matrix.colptr.dtype)
    if columns is not None:
        matrix = matrix[:, columns]
    if rows is not None:
        matrix = matrix[rows, :]
    return np.asfortranarray(matrix)


def _matrix_column(matrix: Any, column: int) -> np.ndarray:
    if isinstance(matrix, SparseMatrixCSC):
        dense = np.zeros(matrix.shape[0], dtype=matrix.nzval.dtype)
        start, stop = int(matrix.colptr[column]) - 1, int(matrix.colptr[column + 1]) - 1
        dense[matrix.rowval[start:stop].astype(np.intp) - 1] = matrix.nzval[start:stop]
        return dense
    return np.asarray(matrix[:, column])


def _matrix_row(matrix: Any, row: int) -> np.ndarray:
    if isinstance(matrix, SparseMatrixCSC):
        dense = np.zeros(matrix.shape[1], dtype=matrix.nzval.dtype)
        positions = np.flatnonzero(matrix.rowval == row + 1)
        columns = np.searchsorted(matrix.colptr, positions + 1, side="right") - 1
        dense[columns] = matrix.nzval[positions]
        return dense
    return np.asarray(matrix[row, :])


def _matrix_size(matrix: Any) -> int:
    return int(matrix.shape[0]) * int(matrix.shape[1])


# Reading data (recording what the result depends on).


def _get_vector(state: QueryState, axis: str, name: str, if_missing: IfMissing | None) -> np.ndarray:
    assert state.daf is not None
    state.dependencies.add(VectorKey(axis, name))
    return state.daf.get_vector(axis, name, default=_default(if_missing))


def _get_matrix(state: QueryState, rows_axis: str, columns_axis: str, name: str,
                if_missing: IfMissing | None) -> Any:
    assert state.daf is not None
    state.dependencies.add(MatrixKey(rows_axis, columns_axis, name))
    return state.daf.get_stored_matrix(rows_axis, columns_axis, name, default=_default(if_missing))


def _get_matrix_slice(state: QueryState, rows_axis: str, columns_axis: str, name: str, if_missing: IfMissing | None,
                      entry: str, *, is_column: bool) -> np.ndarray:
    """One column (or row) of a matrix, read from whichever layout is stored, so no relayout is needed."""
    assert state.daf is not None
    daf = state.daf
    state.dependencies.add(MatrixKey(rows_axis, columns_axis, name))
    entry_axis = columns_axis if is_column else rows_axis
    position = int(_entry_indices(state, entry_axis, np.array([entry], dtype=object))[0])
    if daf.has_matrix(rows_axis, columns_axis, name, relayout=False):
        matrix = daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
        return _matrix_column(matrix, position) if is_column else _matrix_row(matrix, position)
    if daf.has_matrix(columns_axis, rows_axis, name, relayout=False):
        matrix = daf.get_stored_matrix(columns_axis, rows_axis, name, relayout=False)
        return _matrix_row(matrix, position) if is_column else _matrix_column(matrix, position)
    matrix = daf.get_stored_matrix(rows_axis, columns_axis, name, default=_default(if_missing))
    return _matrix_column(matrix, position) if is_column else _matrix_row(matrix, position)


def axis_of_property(daf: DafReader, property_name: str) -> str:
    """The axis whose entries a property's values are: the property name if it is an axis, else its prefix before
    the first ``.`` (``type.manual`` → ``type``)."""
    if daf.has_axis(property_name):
        return property_name
    return property_name.split(".", 1)[0]


# Pending final values (``?? value``).


def add_final_values(state: VectorState, if_not: IfNot | None) -> None:
    if if_not is None:
        return
    mask = as_booleans(state.vector_values)
    if state.pending_final_values is not None:
        # An entry whose chain already ended (it has a final value) holds a placeholder; it is neither dropped nor
        # given another final value.
        mask = mask | np.not_equal(state.pending_final_values, None)
    if if_not.final_value is None:
        state.vector_entries = state.vector_entries[mask]
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
        for index in np.flatnonzero(np.not_equal(state.pending_final_values, None)):
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
        for row, column in zip(*np.nonzero(np.not_equal(state.pending_final_values, None)), strict=True):
            values[row, column] = cast_value(query_state, "final", state.pending_final_values[row, column],
                                             values.dtype)
        state.matrix_values = values
        state.pending_final_values = None


def _lookup_by_names(query_state: QueryState, state: VectorState, axis: str, values_of_axis: np.ndarray) -> np.ndarray:
    """The values (of an axis-indexed vector) at the entries named by ``state.vector_values``; entries with a pending
    final value get a placeholder (empty string or zero) until finalized."""
    if state.pending_final_values is not None:
        pending = np.not_equal(state.pending_final_values, None)
        result = np.zeros(len(state.vector_values), dtype=values_of_axis.dtype)
        if values_of_axis.dtype == object:
            result[:] = ""
        keep = ~pending
        result[keep] = values_of_axis[_entry_indices(query_state, axis, state.vector_values[keep])]
        return result
    if state.is_complete_property_axis:
        return values_of_axis
    return values_of_axis[_entry_indices(query_state, axis, state.vector_values)]


# Phrase implementations.


def names_of_matrices(
    query_state: QueryState, rows_axis: Axis, columns_axis: Axis, _lookup: Any, _names: Names
) -> None:
    if not query_state.computing:
        query_state.stack.append(NamesState(None))
        return
    assert query_state.daf is not None
    query_state.dependencies.add(NamesKey("matrices", (rows_axis.axis_name, columns_axis.axis_name)))
    query_state.stack.append(NamesState(query_state.daf.matrices_set(rows_axis.axis_name, columns_axis.axis_name)))


def names_of_vectors(query_state: QueryState, axis: Axis, _lookup: Any, _names: Names) -> None:
    if not query_state.computing:
        query_state.stack.append(NamesState(None))
        return
    assert query_state.daf is not None
    query_state.dependencies.add(NamesKey("vectors", (axis.axis_name,)))
    query_state.stack.append(NamesState(query_state.daf.vectors_set(axis.axis_name)))


def names_of_axes(query_state: QueryState, _axis: Axis, _names: Names) -> None:
    if not query_state.computing:
        query_state.stack.append(NamesState(None))
        return
    assert query_state.daf is not None
    query_state.dependencies.add(NamesKey("axes"))
    query_state.stack.append(NamesState(query_state.daf.axes_set()))


def names_of_scalars(query_state: QueryState, *_operations: Any) -> None:
    if not query_state.computing:
        query_state.stack.append(NamesState(None))
        return
    assert query_state.daf is not None
    query_state.dependencies.add(NamesKey("scalars"))
    query_state.stack.append(NamesState(query_state.daf.scalars_set()))


def scalar_lookup(query_state: QueryState, lookup: LookupScalar, if_missing: IfMissing | None) -> None:
    if not query_state.computing:
        if query_state.what_for == "has_query" and if_missing is None \
                and not query_state.daf.has_scalar(lookup.property_name):  # type: ignore[union-attr]
            raise _Missing
        query_state.stack.append(ScalarState(None))
        return
    assert query_state.daf is not None
    query_state.dependencies.add(ScalarKey(lookup.property_name))
    default = None if if_missing is None else if_missing.default_value
    if if_missing is None:
        value = query_state.daf.get_scalar(lookup.property_name)
    else:
        value = query_state.daf.get_scalar(lookup.property_name, default=default)
    query_state.stack.append(ScalarState(value))


def lookup_vector_entry(query_state: QueryState, lookup: LookupVector, if_missing: IfMissing | None, axis: Axis,
                        is_equal: IsEqual) -> None:
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    values = _get_vector(query_state, axis.axis_name, lookup.property_name, if_missing)  # type: ignore[arg-type]
    index = _entry_indices(query_state, axis.axis_name, np.array([julia_string(is_equal.comparison_value)],  # type: ignore[arg-type]
                                                                 dtype=object))[0]
    query_state.stack.append(ScalarState(values[index]))


def lookup_matrix_entry(query_state: QueryState, lookup: LookupMatrix, if_missing: IfMissing | None, rows_axis: Axis,
                        row_is: IsEqual, columns_axis: Axis, column_is: IsEqual) -> None:
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    column = _get_matrix_slice(query_state, rows_axis.axis_name, columns_axis.axis_name,  # type: ignore[arg-type]
                               lookup.property_name, if_missing, julia_string(column_is.comparison_value),
                               is_column=True)
    row = _entry_indices(query_state, rows_axis.axis_name,  # type: ignore[arg-type]
                         np.array([julia_string(row_is.comparison_value)], dtype=object))[0]
    query_state.stack.append(ScalarState(column[row]))


def eltwise_scalar(query_state: QueryState, scalar_state: ScalarState, operation: EltwiseOperation) -> None:
    if query_state.computing:
        if isinstance(scalar_state.scalar_value, str) and not getattr(operation, "supports_strings", False):
            error_at_state(query_state, f"unsupported input type: String\n"
                                        f"for the eltwise operation: {operation.operation_name()}")
        scalar_state.scalar_value = operation.compute_eltwise(scalar_state.scalar_value)
    query_state.stack.append(scalar_state)


def axis_lookup(query_state: QueryState, axis: Axis) -> None:
    assert axis.axis_name is not None
    state = VectorState()
    if not query_state.computing:
        if query_state.what_for == "has_query" and not query_state.daf.has_axis(axis.axis_name):  # type: ignore[union-attr]
            raise _Missing
        state.vector_entries = _NO_STRINGS
    else:
        assert query_state.daf is not None
        query_state.dependencies.add(AxisKey(axis.axis_name))
        state.vector_entries = query_state.daf.axis_vector(axis.axis_name)
    state.entries_axis_name = axis.axis_name
    state.property_name = "name"
    state.property_axis_name = axis.axis_name
    state.is_complete_property_axis = True
    state.vector_values = state.vector_entries
    query_state.stack.append(state)


def ensure_vector_is_axis(query_state: QueryState, state: VectorState, as_axis: AsAxis | None) -> None:
    if state.property_axis_name is None or as_axis is not None:
        vector_property_is_axis(query_state, state, as_axis)
        assert query_state.stack.pop() is state


def vector_property_is_axis(query_state: QueryState, state: VectorState, as_axis: AsAxis | None = None) -> None:
    if state.property_name is None:
        error_at_state(query_state, "the values are not entries of an axis")
    # Pending final values stay pending: the chain of lookups goes on, and they are applied at its end.
    if as_axis is not None and as_axis.axis_name is not None:
        axis_name = as_axis.axis_name
    elif not query_state.computing:
        axis_name = state.property_name
    else:
        assert query_state.daf is not None
        axis_name = axis_of_property(query_state.daf, state.property_name)  # type: ignore[arg-type]
    state.property_axis_name = axis_name
    query_state.stack.append(state)


def lookup_vector_by_vector(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, if_not: IfNot | None,
                            lookup: LookupVector, if_missing: IfMissing | None) -> None:
    ensure_vector_is_axis(query_state, state, as_axis)
    if query_state.computing:
        add_final_values(state, if_not)
        values = _get_vector(query_state, state.property_axis_name, lookup.property_name, if_missing)  # type: ignore[arg-type]
        state.vector_values = _lookup_by_names(query_state, state, state.property_axis_name, values)  # type: ignore[arg-type]
    elif query_state.what_for == "has_query" and if_missing is None and state.property_name == "name":
        if not query_state.daf.has_vector(state.property_axis_name, lookup.property_name):  # type: ignore[union-attr]
            raise _Missing
    state.property_name = lookup.property_name
    state.property_axis_name = None
    state.is_complete_property_axis = False
    query_state.stack.append(state)


def _lookup_matrix_slice_by_vector(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                                   if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                   other_axis: str | None, entry: Any, *, is_column: bool) -> None:
    ensure_vector_is_axis(query_state, state, as_axis)
    if query_state.computing:
        add_final_values(state, if_not)
        axis = state.property_axis_name
        assert axis is not None
        other = axis if other_axis is None else other_axis
        if is_column:
            values = _get_matrix_slice(query_state, axis, other, lookup.property_name, if_missing,
                                       julia_string(entry), is_column=True)
        else:
            values = _get_matrix_slice(query_state, other, axis, lookup.property_name, if_missing,
                                       julia_string(entry), is_column=False)
        state.vector_values = _lookup_by_names(query_state, state, axis, values)
    state.property_name = lookup.property_name
    state.property_axis_name = None
    state.is_complete_property_axis = False
    query_state.stack.append(state)


def lookup_matrix_column_by_vector(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                                   if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                   columns_axis: Axis, is_equal: IsEqual) -> None:
    _lookup_matrix_slice_by_vector(query_state, state, as_axis, if_not, lookup, if_missing, columns_axis.axis_name,
                                   is_equal.comparison_value, is_column=True)


def lookup_square_matrix_column_by_vector(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                                          if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                          column_is: SquareColumnIs) -> None:
    _lookup_matrix_slice_by_vector(query_state, state, as_axis, if_not, lookup, if_missing, None,
                                   column_is.comparison_value, is_column=True)


def lookup_square_matrix_row_by_vector(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                                       if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                       row_is: SquareRowIs) -> None:
    _lookup_matrix_slice_by_vector(query_state, state, as_axis, if_not, lookup, if_missing, None,
                                   row_is.comparison_value, is_column=False)


def _begin_mask(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, begin_mask: Any,
                lookup: Callable[[VectorState], None]) -> None:
    finalize_vector_values(query_state, state)
    ensure_vector_is_axis(query_state, state, as_axis)
    query_state.stack.append(state)
    query_state.stack.append(begin_mask)
    lookup(state.copy())


def lookup_vector_mask(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, begin_mask: Any,
                       if_missing: IfMissing | None) -> None:
    _begin_mask(query_state, state, as_axis, begin_mask, lambda copy: lookup_vector_by_vector(
        query_state, copy, None, None, LookupVector(begin_mask.property_name), if_missing))


def lookup_matrix_column_mask(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, begin_mask: Any,
                              if_missing: IfMissing | None, columns_axis: Axis, is_equal: IsEqual) -> None:
    _begin_mask(query_state, state, as_axis, begin_mask, lambda copy: lookup_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(begin_mask.property_name), if_missing, columns_axis, is_equal))


def lookup_square_matrix_column_mask(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                                     begin_mask: Any, if_missing: IfMissing | None, column_is: SquareColumnIs) -> None:
    _begin_mask(query_state, state, as_axis, begin_mask, lambda copy: lookup_square_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(begin_mask.property_name), if_missing, column_is))


def lookup_square_matrix_row_mask(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                                  begin_mask: Any, if_missing: IfMissing | None, row_is: SquareRowIs) -> None:
    _begin_mask(query_state, state, as_axis, begin_mask, lambda copy: lookup_square_matrix_row_by_vector(
        query_state, copy, None, None, LookupMatrix(begin_mask.property_name), if_missing, row_is))


def _mask_of(base_state: VectorState, mask_state: VectorState) -> np.ndarray:
    """The mask state's truthiness, over all the base entries (entries the mask lost, e.g. to ``??``, are false)."""
    values = as_booleans(mask_state.vector_values)
    if len(mask_state.vector_entries) == len(base_state.vector_entries):
        return np.asarray(values, dtype=bool)
    mask = np.zeros(len(base_state.vector_entries), dtype=bool)
    positions = {name: index for index, name in enumerate(base_state.vector_entries)}
    mask[[positions[name] for name in mask_state.vector_entries]] = values
    return mask


def apply_mask(query_state: QueryState, base_state: VectorState, begin_mask: Any, mask_state: VectorState,
               _end_mask: EndMask) -> None:
    if not query_state.computing:
        base_state.is_complete_property_axis = False
        query_state.stack.append(base_state)
        return
    finalize_vector_values(query_state, mask_state)
    mask = _mask_of(base_state, mask_state)
    if isinstance(begin_mask, BeginNegatedMask):
        mask = ~mask
    base_state.vector_values = base_state.vector_values[mask]
    base_state.vector_entries = base_state.vector_entries[mask]
    base_state.is_complete_property_axis = False
    query_state.stack.append(base_state)


def _other_mask(query_state: QueryState, base_state: VectorState, begin_mask: Any, first_mask_state: VectorState,
                mask_operation: Any, lookup: Callable[[VectorState], None]) -> None:
    finalize_vector_values(query_state, first_mask_state)
    query_state.stack.extend((base_state, begin_mask, first_mask_state, mask_operation))
    lookup(base_state.copy())


def lookup_vector_other_mask(query_state: QueryState, base_state: VectorState, begin_mask: Any,
                             first_mask_state: VectorState, mask_operation: Any, if_missing: IfMissing | None) -> None:
    _other_mask(query_state, base_state, begin_mask, first_mask_state, mask_operation,
                lambda copy: lookup_vector_by_vector(query_state, copy, None, None,
                                                     LookupVector(mask_operation.property_name), if_missing))


def lookup_matrix_column_other_mask(query_state: QueryState, base_state: VectorState, begin_mask: Any,
                                    first_mask_state: VectorState, mask_operation: Any, if_missing: IfMissing | None,
                                    columns_axis: Axis, is_equal: IsEqual) -> None:
    _other_mask(query_state, base_state, begin_mask, first_mask_state, mask_operation,
                lambda copy: lookup_matrix_column_by_vector(query_state, copy, None, None,
                                                            LookupMatrix(mask_operation.property_name), if_missing,
                                                            columns_axis, is_equal))


def lookup_square_matrix_column_other_mask(query_state: QueryState, base_state: VectorState, begin_mask: Any,
                                           first_mask_state: VectorState, mask_operation: Any,
                                           if_missing: IfMissing | None, column_is: SquareColumnIs) -> None:
    _other_mask(query_state, base_state, begin_mask, first_mask_state, mask_operation,
                lambda copy: lookup_square_matrix_column_by_vector(query_state, copy, None, None,
                                                                   LookupMatrix(mask_operation.property_name),
                                                                   if_missing, column_is))


def lookup_square_matrix_row_other_mask(query_state: QueryState, base_state: VectorState, begin_mask: Any,
                                        first_mask_state: VectorState, mask_operation: Any,
                                        if_missing: IfMissing | None, row_is: SquareRowIs) -> None:
    _other_mask(query_state, base_state, begin_mask, first_mask_state, mask_operation,
                lambda copy: lookup_square_matrix_row_by_vector(query_state, copy, None, None,
                                                                LookupMatrix(mask_operation.property_name),
                                                                if_missing, row_is))


def compute_mask_operation(query_state: QueryState, base_state: VectorState, begin_mask: Any,
                           first_mask_state: VectorState, mask_operation: Any,
                           second_mask_state: VectorState) -> None:
    finalize_vector_values(query_state, second_mask_state)
    if not query_state.computing:
        query_state.stack.extend((base_state, begin_mask, first_mask_state))
        return
    first_mask = _mask_of(base_state, first_mask_state)
    if isinstance(begin_mask, BeginNegatedMask):
        first_mask = ~first_mask
        begin_mask = BeginMask(begin_mask.property_name)
    second_mask = _mask_of(base_state, second_mask_state)
    combined = base_state.copy()
    combined.vector_values = mask_operation.combine(first_mask, second_mask)
    query_state.stack.extend((base_state, begin_mask, combined))


def extract_vector_axis(query_state: QueryState, state: VectorState) -> VectorState:
    """The entries of a vector, as values of its entries axis (to look up a grouping/counting property)."""
    axis_state = state.copy()
    axis_state.property_axis_name = axis_state.entries_axis_name
    # Entries that are (still) the very array of all the axis entries need no lookup by name.
    axis_state.is_complete_property_axis = (
        query_state.computing
        and state.entries_axis_name is not None
        and state.vector_entries is query_state.daf.axis_vector(state.entries_axis_name)  # type: ignore[union-attr]
    )
    axis_state.vector_values = axis_state.vector_entries
    return axis_state


def _group_lookup(query_state: QueryState, base: Any, group_by: Any, lookup: Callable[[VectorState], None],
                  axis_state: VectorState) -> None:
    query_state.stack.append(base)
    query_state.stack.append(group_by)
    lookup(axis_state)


def _vector_group(query_state: QueryState, state: VectorState, group_by: Any) -> VectorState:
    finalize_vector_values(query_state, state)
    if state.entries_axis_name is None and query_state.computing:
        error_at_state(query_state, "the vector entries are not entries of an axis")
    return extract_vector_axis(query_state, state)


def lookup_vector_group_by_vector(query_state: QueryState, state: VectorState, group_by: GroupBy,
                                  if_missing: IfMissing | None) -> None:
    axis_state = _vector_group(query_state, state, group_by)
    _group_lookup(query_state, state, group_by, lambda copy: lookup_vector_by_vector(
        query_state, copy, None, None, LookupVector(group_by.property_name), if_missing), axis_state)


def lookup_vector_group_by_matrix_column(query_state: QueryState, state: VectorState, group_by: GroupBy,
                                         if_missing: IfMissing | None, columns_axis: Axis, is_equal: IsEqual) -> None:
    axis_state = _vector_group(query_state, state, group_by)
    _group_lookup(query_state, state, group_by, lambda copy: lookup_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(group_by.property_name), if_missing, columns_axis, is_equal),
        axis_state)


def lookup_vector_group_by_square_matrix_column(query_state: QueryState, state: VectorState, group_by: GroupBy,
                                                if_missing: IfMissing | None, column_is: SquareColumnIs) -> None:
    axis_state = _vector_group(query_state, state, group_by)
    _group_lookup(query_state, state, group_by, lambda copy: lookup_square_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(group_by.property_name), if_missing, column_is), axis_state)


def lookup_vector_group_by_square_matrix_row(query_state: QueryState, state: VectorState, group_by: GroupBy,
                                             if_missing: IfMissing | None, row_is: SquareRowIs) -> None:
    axis_state = _vector_group(query_state, state, group_by)
    _group_lookup(query_state, state, group_by, lambda copy: lookup_square_matrix_row_by_vector(
        query_state, copy, None, None, LookupMatrix(group_by.property_name), if_missing, row_is), axis_state)


def _require_reducible(query_state: QueryState, values: Any, operation: ReductionOperation) -> None:
    if _is_strings(values) and not operation.supports_strings:
        error_at_state(query_state, f"unsupported input type: String\n"
                                    f"for the reduction operation: {operation.operation_name()}")


def _reindex(base_entries: np.ndarray, subset_entries: np.ndarray) -> np.ndarray | None:
    """Positions of ``subset_entries`` in ``base_entries`` (``None`` when they are the same entries)."""
    if len(subset_entries) == len(base_entries):
        return None
    positions = {name: index for index, name in enumerate(base_entries)}
    return np.array([positions[name] for name in subset_entries], dtype=np.intp)


def _groups(query_state: QueryState, group_state: VectorState) -> tuple[np.ndarray, np.ndarray]:
    """The group values (sorted unique values, or the entries of the group axis) and each entry's 0-based group
    (-1: in no group)."""
    values = group_state.vector_values
    if group_state.property_axis_name is None:
        import pandas as pd

        # Hash the values (in C) and sort only the distinct ones: Julia's sorted unique values, without sorting
        # a million strings.
        codes, uniques = pd.factorize(np.asarray(values), use_na_sentinel=False)
        uniques = np.asarray(uniques, dtype=np.asarray(values).dtype)
        order = np.argsort(uniques, kind="stable")
        rank = np.empty(order.shape[0], dtype=np.int64)
        rank[order] = np.arange(order.shape[0])
        return uniques[order], rank[codes]
    assert query_state.daf is not None
    unique_values = query_state.daf.axis_vector(group_state.property_axis_name)
    groups = _positions_in_axis(query_state.daf, group_state.property_axis_name, _strings(values)).astype(np.int64)
    return unique_values, groups


def _fill_empty_groups(query_state: QueryState, reduced: np.ndarray, counts: np.ndarray, unique_values: np.ndarray,
                       group_state: VectorState, if_missing: IfMissing | None, axis: int) -> np.ndarray:
    empty = np.flatnonzero(counts == 0)
    if empty.shape[0] == 0:
        return reduced
    if if_missing is None:
        error_at_state(query_state, f"no IfMissing value specified for the unused entry: "
                                    f"{julia_string(unique_values[empty[0]])}\n"
                                    f"of the axis: {group_state.property_axis_name}")
    value = cast_value(query_state, "missing", if_missing.default_value, reduced.dtype)  # type: ignore[union-attr]
    reduced = np.array(reduced, copy=True, order="F")
    if reduced.ndim == 1:
        reduced[empty] = value
    elif axis == 0:
        reduced[empty, :] = value
    else:
        reduced[:, empty] = value
    return reduced


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
    positions = _reindex(base_state.vector_entries, group_state.vector_entries)
    values = base_state.vector_values if positions is None else base_state.vector_values[positions]
    unique_values, groups = _groups(query_state, group_state)
    _require_reducible(query_state, values, operation)
    result_dtype = operation.reduction_result_type(np.asarray(values).dtype)
    counts = np.bincount(groups[groups >= 0], minlength=len(unique_values))
    reduced = np.asarray(operation.compute_grouped_vector(np.asarray(values), groups, len(unique_values)))
    reduced = reduced.astype(result_dtype, copy=False)
    reduced = _fill_empty_groups(query_state, reduced, counts, unique_values, group_state, if_missing, 0)
    reduced_state = VectorState()
    reduced_state.entries_axis_name = group_state.property_axis_name
    reduced_state.vector_entries = _strings(unique_values)
    reduced_state.is_complete_property_axis = base_state.property_axis_name is not None
    reduced_state.vector_values = reduced
    query_state.stack.append(reduced_state)


def _reduce_matrix_to_vector(query_state: QueryState, matrix_state: MatrixState, operation: ReductionOperation,
                             if_missing: IfMissing | None, *, axis: int) -> None:
    finalize_matrix_values(query_state, matrix_state)
    state = matrix_state.rows_state if axis == 1 else matrix_state.columns_state
    assert state is not None
    state.property_name = None
    state.property_axis_name = None
    if query_state.computing:
        matrix = matrix_state.matrix_values
        _require_reducible(query_state, matrix, operation)
        if _matrix_size(matrix) > 0:
            if axis == 1 and matrix_state.flipped is not None and matrix_state.flipped[0] is matrix:
                state.vector_values = np.asarray(operation.compute_matrix(matrix_state.flipped[1](), 0))
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


def reduce_vector_to_scalar(query_state: QueryState, state: VectorState, operation: ReductionOperation,
                            if_missing: IfMissing | None) -> None:
    finalize_vector_values(query_state, state)
    if not query_state.computing:
        query_state.stack.append(ScalarState(None))
        return
    _require_reducible(query_state, state.vector_values, operation)
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
    _require_reducible(query_state, state.matrix_values, operation)
    if _matrix_size(state.matrix_values) > 0:
        query_state.stack.append(ScalarState(operation.compute_all(state.matrix_values)))
    elif if_missing is not None:
        query_state.stack.append(ScalarState(if_missing.default_value))
    else:
        error_at_state(query_state, "no IfMissing value specified for reducing an empty matrix")


def _require_eltwise(query_state: QueryState, values: Any, operation: EltwiseOperation) -> None:
    if _is_strings(values) and not getattr(operation, "supports_strings", False):
        error_at_state(query_state, f"unsupported input type: String\n"
                                    f"for the eltwise operation: {operation.operation_name()}")


def eltwise_vector(query_state: QueryState, state: VectorState, operation: EltwiseOperation) -> None:
    if query_state.computing:
        _require_eltwise(query_state, state.vector_values, operation)
        state.vector_values = operation.compute_eltwise(state.vector_values)
    query_state.stack.append(state)


def eltwise_matrix(query_state: QueryState, state: MatrixState, operation: EltwiseOperation) -> None:
    finalize_matrix_values(query_state, state)
    if query_state.computing:
        _require_eltwise(query_state, state.matrix_values, operation)
        state.matrix_values = operation.compute_eltwise(state.matrix_values)
    query_state.stack.append(state)


def _comparison_value(query_state: QueryState, values: Any, operation: ComparisonOperation, what: str) -> Any:
    value = operation.comparison_value
    is_strings = _is_strings(values)
    if isinstance(operation, IsMatch | IsNotMatch):
        if not is_strings:
            error_at_state(query_state, f"unsupported {what} element type: {_type_name(values)}\n"
                                        f"for the comparison operation: {type(operation).__name__}")
        if isinstance(value, str):
            try:
                value = re.compile(value)
            except re.error as exception:
                error_at_state(query_state, f"invalid regular expression: {value}\n"
                                            f"for the comparison operation: {type(operation).__name__}\n"
                                            f"{_exception_line(exception)}")
        return value
    if not is_strings and isinstance(value, str):
        try:
            return float(value)
        except ValueError as exception:
            error_at_state(query_state, f"error parsing number comparison value: {value}\n"
                                        f"for comparison with a {what} of type: {_type_name(values)}\n"
                                        f"{_exception_line(exception)}")
    if is_strings and not isinstance(value, str):
        return julia_string(value)
    return value


def compare_vector(query_state: QueryState, state: VectorState, operation: ComparisonOperation) -> None:
    finalize_vector_values(query_state, state)
    if query_state.computing:
        value = _comparison_value(query_state, state.vector_values, operation, "vector")
        state.vector_values = np.asarray(operation.compare(np.asarray(state.vector_values), value), dtype=bool)
    state.property_name = None
    state.property_axis_name = None
    state.is_complete_property_axis = False
    query_state.stack.append(state)


def compare_matrix(query_state: QueryState, state: MatrixState, operation: ComparisonOperation) -> None:
    finalize_matrix_values(query_state, state)
    if query_state.computing:
        matrix = state.matrix_values
        value = _comparison_value(query_state, matrix, operation, "matrix")
        if isinstance(matrix, SparseMatrixCSC):
            zero_result = bool(operation.compare(np.zeros(1, dtype=matrix.nzval.dtype), value)[0])
            if not zero_result:  # stays sparse: only stored entries can be true
                flags = np.asarray(operation.compare(np.asarray(matrix.nzval), value), dtype=bool)
                scipy_matrix = matrix.to_scipy().copy()
                scipy_matrix.data = flags
                scipy_matrix.eliminate_zeros()
                state.matrix_values = SparseMatrixCSC.from_scipy(scipy_matrix, indtype=matrix.colptr.dtype)
            else:
                dense = matrix.to_dense()
                state.matrix_values = np.asfortranarray(operation.compare(dense, value))
        elif matrix.dtype == object:
            flat = np.asarray(operation.compare(matrix.ravel(order="F"), value), dtype=bool)
            state.matrix_values = flat.reshape(matrix.shape, order="F")
        else:
            state.matrix_values = np.asfortranarray(np.asarray(operation.compare(matrix, value), dtype=bool))
    state.property_name = None
    state.property_axis_name = None
    query_state.stack.append(state)


def matrix_lookup(query_state: QueryState, rows_state: VectorState, columns_state: VectorState,
                  as_axis: AsAxis | None, lookup: LookupMatrix, if_missing: IfMissing | None) -> None:
    finalize_vector_values(query_state, columns_state)
    ensure_vector_is_axis(query_state, columns_state, as_axis)
    rows_axis, columns_axis = rows_state.property_axis_name, columns_state.property_axis_name
    assert rows_axis is not None and columns_axis is not None
    matrix_state = MatrixState(rows_state, columns_state, lookup.property_name)
    daf = query_state.daf
    if query_state.what_for == "requires_relayout":
        assert daf is not None
        if not daf.has_matrix(rows_axis, columns_axis, lookup.property_name, relayout=False):
            query_state.requires_relayout = daf.has_matrix(columns_axis, rows_axis, lookup.property_name,
                                                           relayout=False)
        matrix_state.matrix_values = np.empty((0, 0), dtype=object)
    elif query_state.computing:
        matrix = _get_matrix(query_state, rows_axis, columns_axis, lookup.property_name, if_missing)
        rows = None if rows_state.is_complete_property_axis else _entry_indices(query_state, rows_axis,
                                                                                 rows_state.vector_values)
        columns = None if columns_state.is_complete_property_axis else _entry_indices(query_state, columns_axis,
                                                                                       columns_state.vector_values)
        matrix_state.matrix_values = _take_rows_columns(matrix, rows, columns)
        if rows is None and columns is None and daf.has_matrix(columns_axis, rows_axis, lookup.property_name,
                                                               relayout=False):
            matrix_state.flipped = (matrix_state.matrix_values, lambda: daf.get_stored_matrix(
                columns_axis, rows_axis, lookup.property_name, relayout=False))
    else:
        if query_state.what_for == "has_query" and if_missing is None and rows_state.property_name == "name" \
                and columns_state.property_name == "name" \
                and not daf.has_matrix(rows_axis, columns_axis, lookup.property_name):  # type: ignore[union-attr]
            raise _Missing
        matrix_state.matrix_values = np.empty((0, 0), dtype=object)
    query_state.stack.append(matrix_state)


def _count_prepare(
    query_state: QueryState,
    state: VectorState,
    count_by: CountBy,
    lookup: Callable[[VectorState], None],
    as_axis: AsAxis | None = None,
) -> None:
    finalize_vector_values(query_state, state)
    if as_axis is not None:
        vector_property_is_axis(query_state, state, as_axis)
        assert query_state.stack.pop() is state
    if state.entries_axis_name is None and query_state.computing:
        error_at_state(query_state, "the vector entries are not entries of an axis")
    query_state.stack.append(state)
    query_state.stack.append(count_by)
    lookup(extract_vector_axis(query_state, state))


def lookup_vector_count(query_state: QueryState, state: VectorState, as_axis: AsAxis | None, count_by: CountBy,
                        if_missing: IfMissing | None) -> None:
    _count_prepare(query_state, state, count_by, lambda copy: lookup_vector_by_vector(
        query_state, copy, None, None, LookupVector(count_by.property_name), if_missing), as_axis)


def lookup_matrix_column_count(query_state: QueryState, state: VectorState, count_by: CountBy,
                               if_missing: IfMissing | None, columns_axis: Axis, is_equal: IsEqual) -> None:
    _count_prepare(query_state, state, count_by, lambda copy: lookup_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(count_by.property_name), if_missing, columns_axis, is_equal))


def lookup_square_matrix_column_count(query_state: QueryState, state: VectorState, count_by: CountBy,
                                      if_missing: IfMissing | None, column_is: SquareColumnIs) -> None:
    _count_prepare(query_state, state, count_by, lambda copy: lookup_square_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(count_by.property_name), if_missing, column_is))


def lookup_square_matrix_row_count(query_state: QueryState, state: VectorState, count_by: CountBy,
                                   if_missing: IfMissing | None, row_is: SquareRowIs) -> None:
    _count_prepare(query_state, state, count_by, lambda copy: lookup_square_matrix_row_by_vector(
        query_state, copy, None, None, LookupMatrix(count_by.property_name), if_missing, row_is))


def _count_axis_state(query_state: QueryState, state: VectorState) -> tuple[VectorState, np.ndarray]:
    """The rows (or columns) of a count matrix, and each value's 0-based position in them (-1: not counted)."""
    count_state = VectorState()
    if not query_state.computing:
        unique_values, positions = state.vector_values, np.empty(0, dtype=np.int64)
    else:
        unique_values, positions = _groups(query_state, state)
    count_state.entries_axis_name = state.property_axis_name
    count_state.vector_entries = _strings(unique_values) if query_state.computing else _NO_STRINGS
    count_state.property_axis_name = state.property_axis_name
    count_state.is_complete_property_axis = state.property_axis_name is not None
    count_state.vector_values = unique_values
    return count_state, positions


def compute_count_matrix(query_state: QueryState, rows_state: VectorState, _count_by: CountBy,
                         columns_state: VectorState) -> None:
    finalize_vector_values(query_state, columns_state)
    if query_state.computing and len(rows_state.vector_entries) != len(columns_state.vector_entries):
        error_at_state(query_state, f"different CountBy vector lengths: {len(rows_state.vector_entries)} * "
                                    f"{len(columns_state.vector_entries)}")
    if query_state.computing and len(columns_state.vector_entries) != len(rows_state.vector_values):
        positions = _reindex(rows_state.vector_entries, columns_state.vector_entries)
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


def _matrix_group(query_state: QueryState, matrix_state: MatrixState, group_by: Any) -> VectorState:
    finalize_matrix_values(query_state, matrix_state)
    state = matrix_state.columns_state if isinstance(group_by, GroupColumnsBy) else matrix_state.rows_state
    assert state is not None
    if state.entries_axis_name is None and query_state.computing:
        error_at_state(query_state, "the matrix entries are not entries of an axis")
    return extract_vector_axis(query_state, state)


def lookup_matrix_group_by_vector(query_state: QueryState, matrix_state: MatrixState, group_by: Any,
                                  if_missing: IfMissing | None) -> None:
    axis_state = _matrix_group(query_state, matrix_state, group_by)
    _group_lookup(query_state, matrix_state, group_by, lambda copy: lookup_vector_by_vector(
        query_state, copy, None, None, LookupVector(group_by.property_name), if_missing), axis_state)


def lookup_matrix_group_by_matrix_column(query_state: QueryState, matrix_state: MatrixState, group_by: Any,
                                         if_missing: IfMissing | None, columns_axis: Axis, is_equal: IsEqual) -> None:
    axis_state = _matrix_group(query_state, matrix_state, group_by)
    _group_lookup(query_state, matrix_state, group_by, lambda copy: lookup_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(group_by.property_name), if_missing, columns_axis, is_equal),
        axis_state)


def lookup_matrix_group_by_square_matrix_column(query_state: QueryState, matrix_state: MatrixState, group_by: Any,
                                                if_missing: IfMissing | None, column_is: SquareColumnIs) -> None:
    axis_state = _matrix_group(query_state, matrix_state, group_by)
    _group_lookup(query_state, matrix_state, group_by, lambda copy: lookup_square_matrix_column_by_vector(
        query_state, copy, None, None, LookupMatrix(group_by.property_name), if_missing, column_is), axis_state)


def lookup_matrix_group_by_square_matrix_row(query_state: QueryState, matrix_state: MatrixState, group_by: Any,
                                             if_missing: IfMissing | None, row_is: SquareRowIs) -> None:
    axis_state = _matrix_group(query_state, matrix_state, group_by)
    _group_lookup(query_state, matrix_state, group_by, lambda copy: lookup_square_matrix_row_by_vector(
        query_state, copy, None, None, LookupMatrix(group_by.property_name), if_missing, row_is), axis_state)


def compute_grouped_matrix(query_state: QueryState, base_state: MatrixState, group_by: Any, group_state: VectorState,
                           reduce_to: Any, if_missing: IfMissing | None = None) -> None:
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
    positions = _reindex(grouped_state.vector_entries, group_state.vector_entries)
    matrix = base_state.matrix_values
    if positions is not None:
        matrix = _take_rows_columns(matrix, positions if by_rows else None, None if by_rows else positions)
    unique_values, groups = _groups(query_state, group_state)
    _require_reducible(query_state, matrix, operation)
    axis = 0 if by_rows else 1
    result_dtype = operation.reduction_result_type(matrix.nzval.dtype if isinstance(matrix, SparseMatrixCSC)
                                                   else matrix.dtype)
    counts = np.bincount(groups[groups >= 0], minlength=len(unique_values))
    reduced = np.asarray(operation.compute_grouped_matrix(matrix, groups, len(unique_values), axis))
    reduced = np.asfortranarray(reduced.astype(result_dtype, copy=False))
    reduced = _fill_empty_groups(query_state, reduced, counts, unique_values, group_state, if_missing, axis)
    new_state = VectorState()
    new_state.entries_axis_name = group_state.property_axis_name
    new_state.vector_entries = _strings(unique_values)
    new_state.is_complete_property_axis = group_state.property_axis_name is not None
    new_state.vector_values = unique_values
    reduced_state = MatrixState()
    if by_rows:
        reduced_state.rows_state, reduced_state.columns_state = new_state, base_state.columns_state
    else:
        reduced_state.rows_state, reduced_state.columns_state = base_state.rows_state, new_state
    reduced_state.matrix_values = reduced
    query_state.stack.append(reduced_state)


def ensure_matrix_is_axis(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None) -> None:
    if state.property_axis_name is None or as_axis is not None:
        matrix_property_is_axis(query_state, state, as_axis)
        assert query_state.stack.pop() is state


def matrix_property_is_axis(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None = None) -> None:
    if as_axis is not None and as_axis.axis_name is not None:
        axis_name = as_axis.axis_name
    elif not query_state.computing:
        axis_name = state.property_name
    else:
        assert query_state.daf is not None
        axis_name = axis_of_property(query_state.daf, state.property_name)  # type: ignore[arg-type]
    state.property_axis_name = axis_name
    query_state.stack.append(state)


def _lookup_in_matrix(query_state: QueryState, state: MatrixState, axis: str, values_of_axis: np.ndarray) -> None:
    """Replace a matrix of entry names with the looked-up values (same shape)."""
    names = state.matrix_values
    if isinstance(names, SparseMatrixCSC):
        names = names.to_dense()
    flat = np.asarray(names).ravel(order="F")
    result = np.zeros(flat.shape[0], dtype=values_of_axis.dtype)
    if values_of_axis.dtype == object:
        result[:] = ""
    keep = np.ones(flat.shape[0], dtype=bool)
    if state.pending_final_values is not None:
        keep = np.equal(state.pending_final_values.ravel(order="F"), None)
    result[keep] = values_of_axis[_entry_indices(query_state, axis, flat[keep])]
    state.matrix_values = result.reshape(np.shape(names), order="F")


def lookup_vector_by_matrix(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None, if_not: IfNot | None,
                            lookup: LookupVector, if_missing: IfMissing | None) -> None:
    ensure_matrix_is_axis(query_state, state, as_axis)
    if query_state.computing:
        add_matrix_final_values(query_state, state, if_not)
        axis = state.property_axis_name
        assert axis is not None
        _lookup_in_matrix(query_state, state, axis, _get_vector(query_state, axis, lookup.property_name, if_missing))
    state.property_name = lookup.property_name
    state.property_axis_name = None
    query_state.stack.append(state)


def _lookup_matrix_slice_by_matrix(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None,
                                   if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                   other_axis: str | None, entry: Any, *, is_column: bool) -> None:
    ensure_matrix_is_axis(query_state, state, as_axis)
    if query_state.computing:
        add_matrix_final_values(query_state, state, if_not)
        axis = state.property_axis_name
        assert axis is not None
        other = axis if other_axis is None else other_axis
        if is_column:
            values = _get_matrix_slice(query_state, axis, other, lookup.property_name, if_missing,
                                       julia_string(entry), is_column=True)
        else:
            values = _get_matrix_slice(query_state, other, axis, lookup.property_name, if_missing,
                                       julia_string(entry), is_column=False)
        _lookup_in_matrix(query_state, state, axis, values)
    state.property_name = lookup.property_name
    state.property_axis_name = None
    query_state.stack.append(state)


def lookup_matrix_column_by_matrix(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None,
                                   if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                   columns_axis: Axis, is_equal: IsEqual) -> None:
    _lookup_matrix_slice_by_matrix(query_state, state, as_axis, if_not, lookup, if_missing, columns_axis.axis_name,
                                   is_equal.comparison_value, is_column=True)


def lookup_square_matrix_column_by_matrix(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None,
                                          if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                          column_is: SquareColumnIs) -> None:
    _lookup_matrix_slice_by_matrix(query_state, state, as_axis, if_not, lookup, if_missing, None,
                                   column_is.comparison_value, is_column=True)


def lookup_square_matrix_row_by_matrix(query_state: QueryState, state: MatrixState, as_axis: AsAxis | None,
                                       if_not: IfNot | None, lookup: LookupMatrix, if_missing: IfMissing | None,
                                       row_is: SquareRowIs) -> None:
    _lookup_matrix_slice_by_matrix(query_state, state, as_axis, if_not, lookup, if_missing, None,
                                   row_is.comparison_value, is_column=False)


# Matching.


class _Missing(Exception):
    """has_query: something the query needs does not exist."""


@dataclass(frozen=True)
class Optional:
    condition: Any


def _is(kind: type) -> Callable[[Any], bool]:
    return lambda operation: isinstance(operation, kind)


def _named(kind: type) -> Callable[[Any], bool]:
    return lambda operation: type(operation) is kind and operation.property_name is not None


def _unnamed(kind: type) -> Callable[[Any], bool]:
    return lambda operation: type(operation) is kind and operation.property_name is None


def axis_with_name(operation: Any) -> bool:
    return isinstance(operation, Axis) and operation.axis_name is not None


def axis_without_name(operation: Any) -> bool:
    return isinstance(operation, Axis) and operation.axis_name is None


def vector_axis(_query_state: QueryState, value: Any) -> bool:
    return isinstance(value, VectorState) and value.property_axis_name is not None


def vector_maybe_axis(query_state: QueryState, value: Any) -> bool:
    return isinstance(value, VectorState) \
        and (not query_state.computing or _is_strings(value.vector_values)) \
        and (value.property_axis_name is not None or value.property_name is not None)


def matrix_maybe_axis(query_state: QueryState, value: Any) -> bool:
    return isinstance(value, MatrixState) and value.property_name is not None and value.property_axis_name is None \
        and (not query_state.computing or _is_strings(value.matrix_values))


_V, _M, _S = VectorState, MatrixState, ScalarState
_AS_AXIS = Optional(_is(AsAxis))
_IF_MISSING = Optional(_is(IfMissing))
_IF_NOT = Optional(_is(IfNot))
_LOOKUP_VECTOR = _named(LookupVector)
_LOOKUP_MATRIX = _named(LookupMatrix)
_BEGIN = _is(BeginMask | BeginNegatedMask)
_MASK_OPERATION = _is(MaskOperation)
_GROUP_ANY = _is(GroupColumnsBy | GroupRowsBy)
_SLICES = ((axis_with_name, _is(IsEqual)), (_is(SquareColumnIs),), (_is(SquareRowIs),))


@dataclass(frozen=True)
class Phrase:
    input: tuple | None
    operations: tuple | None
    implementation: Callable[..., None]


def _sliced(input_: tuple | None, prefix: tuple, implementations: tuple[Callable[..., None], ...],
            suffix: tuple = ()) -> list[Phrase]:
    """The three phrases slicing a matrix by ``@ axis = entry``, ``@| entry`` and ``@- entry``."""
    return [Phrase(input_, (*prefix, *slice_operations, *suffix), implementation)
            for slice_operations, implementation in zip(_SLICES, implementations, strict=True)]


#: The phrases, in Julia's order: the first match wins, so longer phrases come first.
PHRASES: list[Phrase] = [
    # Names.
    Phrase(None, (axis_with_name, axis_with_name, _unnamed(LookupMatrix), _is(Names)), names_of_matrices),
    Phrase(None, (axis_with_name, _unnamed(LookupVector), _is(Names)), names_of_vectors),
    Phrase(None, (axis_without_name, _is(Names)), names_of_axes),
    Phrase(None, (_unnamed(LookupScalar), _is(Names)), names_of_scalars),
    Phrase(None, (_is(Names),), names_of_scalars),
    # Matrix.
    Phrase((vector_axis, vector_maybe_axis), (_AS_AXIS, _LOOKUP_MATRIX, _IF_MISSING), matrix_lookup),
    *_sliced((_V,), (_is(CountBy), _IF_MISSING), (lookup_matrix_column_count, lookup_square_matrix_column_count,
                                                    lookup_square_matrix_row_count)),
    Phrase((_V,), (_AS_AXIS, _is(CountBy), _IF_MISSING), lookup_vector_count),
    *_sliced((matrix_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_MATRIX, _IF_MISSING),
             (lookup_matrix_column_by_matrix, lookup_square_matrix_column_by_matrix,
              lookup_square_matrix_row_by_matrix)),
    Phrase((matrix_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_VECTOR, _IF_MISSING), lookup_vector_by_matrix),
    *_sliced((_M,), (_GROUP_ANY, _IF_MISSING), (lookup_matrix_group_by_matrix_column,
                                                 lookup_matrix_group_by_square_matrix_column,
                                                 lookup_matrix_group_by_square_matrix_row)),
    Phrase((_M,), (_GROUP_ANY, _IF_MISSING), lookup_matrix_group_by_vector),
    Phrase((_M, GroupColumnsBy, _V), (_is(ReduceToColumn), _IF_MISSING), compute_grouped_matrix),
    Phrase((_M, GroupRowsBy, _V), (_is(ReduceToRow), _IF_MISSING), compute_grouped_matrix),
    Phrase((_M,), (_is(EltwiseOperation),), eltwise_matrix),
    Phrase((_M,), (_is(ComparisonOperation),), compare_matrix),
    # Vector.
    Phrase(None, (axis_with_name,), axis_lookup),
    *_sliced((vector_maybe_axis,), (_AS_AXIS, _BEGIN, _IF_MISSING),
             (lookup_matrix_column_mask, lookup_square_matrix_column_mask, lookup_square_matrix_row_mask)),
    Phrase((vector_maybe_axis,), (_AS_AXIS, _BEGIN, _IF_MISSING), lookup_vector_mask),
    Phrase((vector_axis, BeginMask | BeginNegatedMask, _V), (_is(EndMask),), apply_mask),
    *_sliced((vector_axis, BeginMask | BeginNegatedMask, _V), (_MASK_OPERATION, _IF_MISSING),
             (lookup_matrix_column_other_mask, lookup_square_matrix_column_other_mask,
              lookup_square_matrix_row_other_mask)),
    Phrase((vector_axis, BeginMask | BeginNegatedMask, _V), (_MASK_OPERATION, _IF_MISSING), lookup_vector_other_mask),
    *_sliced((vector_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_MATRIX, _IF_MISSING),
             (lookup_matrix_column_by_vector, lookup_square_matrix_column_by_vector,
              lookup_square_matrix_row_by_vector)),
    Phrase((vector_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_VECTOR, _IF_MISSING), lookup_vector_by_vector),
    *_sliced((_V,), (_is(GroupBy), _IF_MISSING), (lookup_vector_group_by_matrix_column,
                                                  lookup_vector_group_by_square_matrix_column,
                                                  lookup_vector_group_by_square_matrix_row)),
    Phrase((_V,), (_is(GroupBy), _IF_MISSING), lookup_vector_group_by_vector),
    Phrase((_V, GroupBy, _V), (_is(ReductionOperation), _IF_MISSING), reduce_grouped_vector),
    Phrase((_M,), (_is(ReduceToColumn), _IF_MISSING), reduce_matrix_to_column),
    Phrase((_M,), (_is(ReduceToRow), _IF_MISSING), reduce_matrix_to_row),
    Phrase((_V,), (_is(EltwiseOperation),), eltwise_vector),
    Phrase((_V,), (_is(ComparisonOperation),), compare_vector),
    # Scalar.
    Phrase(None, (_named(LookupScalar), _IF_MISSING), scalar_lookup),
    Phrase(None, (_LOOKUP_VECTOR, _IF_MISSING, axis_with_name, _is(IsEqual)), lookup_vector_entry),
    Phrase(None, (_LOOKUP_MATRIX, _IF_MISSING, axis_with_name, _is(IsEqual), axis_with_name, _is(IsEqual)),
           lookup_matrix_entry),
    Phrase((_M,), (_is(ReductionOperation), _IF_MISSING), reduce_matrix_to_scalar),
    Phrase((_V,), (_is(ReductionOperation), _IF_MISSING), reduce_vector_to_scalar),
    Phrase((_S,), (_is(EltwiseOperation),), eltwise_scalar),
    # Implicit.
    Phrase((vector_maybe_axis,), (_is(AsAxis),), vector_property_is_axis),
    Phrase((_V, CountBy, _V), None, compute_count_matrix),
    Phrase((vector_axis, BeginMask | BeginNegatedMask, _V, MaskOperation, _V), None, compute_mask_operation),
]


def _matches_value(query_state: QueryState, value: Any, expectation: Any) -> bool:
    if isinstance(expectation, type) or hasattr(expectation, "__args__"):
        return isinstance(value, expectation)
    return expectation(query_state, value)


def _stack_has_top(query_state: QueryState, expected: tuple) -> bool:
    stack = query_state.stack
    if len(stack) < len(expected):
        return False
    top = stack[len(stack) - len(expected):]
    return all(_matches_value(query_state, value, expectation) for value, expectation in zip(top, expected,
                                                                                              strict=True))


def _next_matching_operations(query_state: QueryState, expected: tuple) -> list[Any] | None:
    matched: list[Any] = []
    index = query_state.next_operation_index
    operations = query_state.operations
    for expectation in expected:
        condition = expectation.condition if isinstance(expectation, Optional) else expectation
        is_match = index < len(operations) and condition(operations[index])
        if is_match:
            matched.append(operations[index])
            index += 1
        elif isinstance(expectation, Optional):
            matched.append(None)
        else:
            return None
    query_state.next_operation_index = index
    return matched


def _do_query_phrase(query_state: QueryState) -> bool:
    original_stack = query_state.stack
    start = query_state.next_operation_index
    for phrase in PHRASES:
        query_state.stack = original_stack
        if phrase.input is None:
            matched_stack: list[Any] = []
        else:
            if not _stack_has_top(query_state, phrase.input):
                continue
            matched_stack = original_stack[len(original_stack) - len(phrase.input):]
        query_state.first_operation_index = start
        query_state.next_operation_index = start
        if phrase.operations is None:
            operations: list[Any] = []
        else:
            matched = _next_matching_operations(query_state, phrase.operations)
            if matched is None:
                continue
            operations = matched
        query_state.stack = original_stack[:len(original_stack) - len(matched_stack)]
        phrase.implementation(query_state, *matched_stack, *operations)
        return True
    query_state.stack = original_stack
    query_state.first_operation_index = start
    query_state.next_operation_index = start
    return False


def _is_complete(query_state: QueryState) -> bool:
    stack = query_state.stack
    if len(stack) != 1:
        return False
    top = stack[0]
    if isinstance(top, NamesState | ScalarState):
        return True
    if isinstance(top, VectorState):
        return top.vector_entries is not None and top.vector_values is not None
    if isinstance(top, MatrixState):
        return top.rows_state is not None and top.rows_state.vector_entries is not None \
            and top.rows_state.pending_final_values is None and top.columns_state is not None \
            and top.columns_state.vector_entries is not None and top.columns_state.pending_final_values is None \
            and top.matrix_values is not None
    return False


def final_state(daf: DafReader | None, query: Any, what_for: str) -> QueryState:
    """Run the phrases of a query to the end (raising Julia's errors for invalid operations or queries)."""
    sequence = as_query_sequence(query)
    query_state = QueryState(daf, sequence.operations, what_for)
    while _do_query_phrase(query_state):
        pass
    if query_state.next_operation_index < len(query_state.operations):
        query_state.first_operation_index = query_state.next_operation_index
        error_at_state(query_state, "invalid operation(s)")
    if not _is_complete(query_state):
        text = f"invalid query: {sequence}"
        if daf is not None:
            text += f"\nfor the daf data: {daf.name}"
        raise DafQueryError(text)
    return query_state


@dataclass
class QueryResult:
    """A computed query: names, a scalar, or named vector/matrix values (and what it depends on)."""

    dimensions: int
    value: Any = None
    entries: tuple[np.ndarray, ...] = ()
    dimension_names: tuple[str | None, ...] = ()
    dependencies: frozenset[Any] = frozenset()

    def brief(self) -> str:
        """Julia's ``brief`` of the value (as ``description(cache=True)`` lists a cached query)."""
        if self.dimensions < 0:
            return f"{len(self.value)} x String (Set)"
        if self.dimensions == 0:
            return brief_scalar(self.value)
        return brief_array(self.value)


def compute_query(daf: DafReader, query: Any) -> QueryResult:
    """Compute a query on a data set."""
    query_state = final_state(daf, query, COMPUTE)
    top = query_state.stack.pop()
    dependencies = frozenset(query_state.dependencies)
    if isinstance(top, NamesState):
        return QueryResult(-1, top.names_set, dependencies=dependencies)
    if isinstance(top, ScalarState):
        return QueryResult(0, top.scalar_value, dependencies=dependencies)
    if isinstance(top, VectorState):
        finalize_vector_values(query_state, top)
        return QueryResult(1, np.asarray(top.vector_values), (_strings(top.vector_entries),), (top.entries_axis_name,),
                           dependencies)
    assert isinstance(top, MatrixState)
    finalize_matrix_values(query_state, top)
    assert top.rows_state is not None and top.columns_state is not None
    return QueryResult(2, top.matrix_values, (_strings(top.rows_state.vector_entries),
                                              _strings(top.columns_state.vector_entries)),
                       (top.rows_state.entries_axis_name, top.columns_state.entries_axis_name), dependencies)


def has_query(daf: DafReader, query: Any) -> bool:
    """Whether the query is valid and everything it needs (axes, scalars, properties of named axes) exists."""
    try:
        final_state(daf, query, "has_query")
    except (DafError, _Missing):
        return False
    return True


def query_result_dimensions(query: Any) -> int:
    """-1 for names, 0 scalar, 1 vector, 2 matrix (this also checks the query is valid).

    Example:
        >>> query_result_dimensions("@ cell @ gene :: UMIs >| Sum")
        1
    """
    top = final_state(None, query, "result_dimensions").stack[-1]
    return {NamesState: -1, ScalarState: 0, VectorState: 1, MatrixState: 2}[type(top)]


def is_axis_query(query: Any) -> bool:
    """Whether the query gives the (possibly masked) entries of an axis.

    Example:
        >>> is_axis_query("@ gene [ is_lateral ]"), is_axis_query("@ gene : is_lateral")
        (True, False)
    """
    query_state = final_state(None, query, "is_axis")
    top = query_state.stack[-1]
    return isinstance(top, VectorState) and top.entries_axis_name is not None \
        and top.property_axis_name == top.entries_axis_name and top.property_name == "name"


def query_axis_name(query: Any) -> str:
    """The axis of an axis query (see :func:`is_axis_query`).

    Example:
        >>> query_axis_name("@ gene [ is_lateral ]")
        'gene'
    """
    query_state = final_state(None, query, "axis_name")
    top = query_state.stack[-1]
    if not (isinstance(top, VectorState) and top.entries_axis_name is not None and top.property_name == "name"
            and top.entries_axis_name == top.property_axis_name):
        raise DafQueryError(f"not an axis query: {as_query_sequence(query)}")
    return top.entries_axis_name


def query_requires_relayout(daf: DafReader, query: Any) -> bool:
    """Whether computing the query needs a matrix in the layout that is not stored."""
    return final_state(daf, query, "requires_relayout").requires_relayout


__all__ = ["PHRASES", "QuerySequence", "compute_query", "has_query", "is_axis_query", "query_axis_name",
           "query_requires_relayout", "query_result_dimensions"]
