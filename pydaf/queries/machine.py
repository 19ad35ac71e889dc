"""Julia's phrase machine: a query is consumed phrase by phrase, and the first phrase in :data:`PHRASES` (in Julia's
order) whose expected stack top and next operations match wins. Its implementation pops what it matched and pushes
what the phrase declares as its output, which the machine checks after every phrase (Julia's
``@assert stack_has_top(query_state, phrase.output)``): a phrase breaking its contract is an internal error, never a
silently wrong state. The same machine runs without data for :data:`~pydaf.queries.state.Purpose.DRY_RUN` and the
other purposes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import UnionType
from typing import TYPE_CHECKING, Any

from ..errors import DafError, DafQueryError
from .base import EltwiseOperation, ReductionOperation
from .phrases.common import MatrixSlice
from .phrases.groups import (
    compute_count_matrix,
    compute_grouped_matrix,
    lookup_count,
    lookup_matrix_group,
    lookup_vector_group,
    reduce_grouped_vector,
)
from .phrases.masks import apply_mask, compute_mask_operation, lookup_mask, lookup_other_mask
from .phrases.matrices import (
    compare_matrix,
    eltwise_matrix,
    lookup_by_matrix,
    matrix_lookup,
    reduce_matrix_to_column,
    reduce_matrix_to_row,
)
from .phrases.names_scalars import (
    eltwise_scalar,
    lookup_matrix_entry,
    lookup_vector_entry,
    names_of_axes,
    names_of_matrices,
    names_of_scalars,
    names_of_vectors,
    reduce_matrix_to_scalar,
    reduce_vector_to_scalar,
    scalar_lookup,
)
from .phrases.vectors import axis_lookup, compare_vector, eltwise_vector, lookup_by_vector, vector_property_is_axis
from .query import (
    AsAxis,
    Axis,
    BeginMask,
    BeginNegatedMask,
    ComparisonOperation,
    CountBy,
    EndMask,
    GroupBy,
    GroupColumnsBy,
    GroupRowsBy,
    IfMissing,
    IfNot,
    IsEqual,
    LookupMatrix,
    LookupScalar,
    LookupVector,
    MaskOperation,
    Names,
    ReduceToColumn,
    ReduceToRow,
    SquareColumnIs,
    SquareRowIs,
    as_query_sequence,
)
from .state import MatrixState, NamesState, Purpose, QueryState, ScalarState, VectorState, error_at_state, is_strings

if TYPE_CHECKING:
    from ..core.readers import DafReader

__all__ = ["PHRASES", "Phrase", "final_state"]


# What a phrase expects of the next operations.


@dataclass(frozen=True)
class OperationIs:
    """A condition on the next operation: ``test`` can only hold for an instance of ``kinds`` (a type, a union of
    types, or ``()`` for none), which lets the machine skip, without testing them, the phrases that cannot start with
    the next operation (see :class:`_CandidateTable`)."""

    kinds: Any
    test: Callable[[Any], bool]

    def __call__(self, operation: Any) -> bool:
        return self.test(operation)


@dataclass(frozen=True)
class Optional:
    """An operation that may be absent (matched as ``None``)."""

    condition: OperationIs


def _is(kind: Any) -> OperationIs:
    return OperationIs(kind, lambda operation: isinstance(operation, kind))


def _named(kind: Any) -> OperationIs:
    return OperationIs(kind, lambda operation: type(operation) is kind and operation.property_name is not None)


def _unnamed(kind: Any) -> OperationIs:
    return OperationIs(kind, lambda operation: type(operation) is kind and operation.property_name is None)


axis_with_name = OperationIs(Axis, lambda operation: isinstance(operation, Axis) and operation.axis_name is not None)
axis_without_name = OperationIs(Axis, lambda operation: isinstance(operation, Axis) and operation.axis_name is None)


# What a phrase expects of (and leaves on) the stack top: stack element types, or conditions on the element.


def vector_axis(_query_state: QueryState, value: Any) -> bool:
    return isinstance(value, VectorState) and value.property_axis_name is not None


def vector_maybe_axis(query_state: QueryState, value: Any) -> bool:
    return isinstance(value, VectorState) \
        and (not query_state.computing or is_strings(value.stored_values)) \
        and (value.property_axis_name is not None or value.property_name is not None)


def matrix_maybe_axis(query_state: QueryState, value: Any) -> bool:
    return isinstance(value, MatrixState) and value.property_name is not None and value.property_axis_name is None \
        and (not query_state.computing or is_strings(value.matrix_values))


@dataclass(frozen=True)
class Phrase:
    """One phrase (Julia's ``Phrase``): the stack top it expects (``None``: anything), the next operations it expects
    (``None``: none), its implementation, and the stack top it leaves.

    A phrase of a property lookup that may also be a column or row of a matrix has ``slicing`` set: the number of its
    last operations that select the slice (0 for the plain vector property); the implementation gets them as one
    :class:`~pydaf.queries.phrases.common.MatrixSlice` (or ``None``)."""

    input: tuple | None
    operations: tuple | None
    implementation: Callable[..., None]
    output: tuple
    slicing: int | None = None


_V, _M, _S, _N = VectorState, MatrixState, ScalarState, NamesState
_AS_AXIS = Optional(_is(AsAxis))
# A sliced count takes no ``=@`` (as in Julia); matching it as absent keeps the implementation's arguments aligned.
_NO_AS_AXIS = Optional(OperationIs((), lambda _operation: False))
_IF_MISSING = Optional(_is(IfMissing))
_IF_NOT = Optional(_is(IfNot))
_LOOKUP_VECTOR = _named(LookupVector)
_LOOKUP_MATRIX = _named(LookupMatrix)
_BEGIN = _is(BeginMask | BeginNegatedMask)
_BEGIN_TYPE = BeginMask | BeginNegatedMask
_MASK_OPERATION = _is(MaskOperation)
_GROUP_ANY = _is(GroupColumnsBy | GroupRowsBy)
_SLICES = ((axis_with_name, _is(IsEqual)), (_is(SquareColumnIs),), (_is(SquareRowIs),))


def _sliced(input_: tuple | None, prefix: tuple, implementation: Callable[..., None], output: tuple) -> list[Phrase]:
    """The three phrases looking up a column or row of a matrix: ``@ axis = entry``, ``@| entry`` and ``@- entry``."""
    return [Phrase(input_, (*prefix, *slice_operations), implementation, output, slicing=len(slice_operations))
            for slice_operations in _SLICES]


#: The phrases, in Julia's order: the first match wins, so longer phrases come first.
PHRASES: list[Phrase] = [
    # Names.
    Phrase(None, (axis_with_name, axis_with_name, _unnamed(LookupMatrix), _is(Names)), names_of_matrices, (_N,)),
    Phrase(None, (axis_with_name, _unnamed(LookupVector), _is(Names)), names_of_vectors, (_N,)),
    Phrase(None, (axis_without_name, _is(Names)), names_of_axes, (_N,)),
    Phrase(None, (_unnamed(LookupScalar), _is(Names)), names_of_scalars, (_N,)),
    Phrase(None, (_is(Names),), names_of_scalars, (_N,)),
    # Matrix.
    Phrase((vector_axis, vector_maybe_axis), (_AS_AXIS, _LOOKUP_MATRIX, _IF_MISSING), matrix_lookup, (_M,)),
    *_sliced((_V,), (_NO_AS_AXIS, _is(CountBy), _IF_MISSING), lookup_count, (_V, CountBy, _V)),
    Phrase((_V,), (_AS_AXIS, _is(CountBy), _IF_MISSING), lookup_count, (_V, CountBy, _V), slicing=0),
    *_sliced((matrix_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_MATRIX, _IF_MISSING), lookup_by_matrix, (_M,)),
    Phrase((matrix_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_VECTOR, _IF_MISSING), lookup_by_matrix, (_M,),
           slicing=0),
    *_sliced((_M,), (_GROUP_ANY, _IF_MISSING), lookup_matrix_group, (_M, GroupColumnsBy | GroupRowsBy, _V)),
    Phrase((_M,), (_GROUP_ANY, _IF_MISSING), lookup_matrix_group, (_M, GroupColumnsBy | GroupRowsBy, _V), slicing=0),
    Phrase((_M, GroupColumnsBy, _V), (_is(ReduceToColumn), _IF_MISSING), compute_grouped_matrix, (_M,)),
    Phrase((_M, GroupRowsBy, _V), (_is(ReduceToRow), _IF_MISSING), compute_grouped_matrix, (_M,)),
    Phrase((_M,), (_is(EltwiseOperation),), eltwise_matrix, (_M,)),
    Phrase((_M,), (_is(ComparisonOperation),), compare_matrix, (_M,)),
    # Vector.
    Phrase(None, (axis_with_name,), axis_lookup, (vector_axis,)),
    *_sliced((vector_maybe_axis,), (_AS_AXIS, _BEGIN, _IF_MISSING), lookup_mask, (vector_axis, _BEGIN_TYPE, _V)),
    Phrase((vector_maybe_axis,), (_AS_AXIS, _BEGIN, _IF_MISSING), lookup_mask, (vector_axis, _BEGIN_TYPE, _V),
           slicing=0),
    Phrase((vector_axis, _BEGIN_TYPE, _V), (_is(EndMask),), apply_mask, (_V,)),
    *_sliced((vector_axis, _BEGIN_TYPE, _V), (_MASK_OPERATION, _IF_MISSING), lookup_other_mask,
             (vector_axis, _BEGIN_TYPE, _V, MaskOperation, _V)),
    Phrase((vector_axis, _BEGIN_TYPE, _V), (_MASK_OPERATION, _IF_MISSING), lookup_other_mask,
           (vector_axis, _BEGIN_TYPE, _V, MaskOperation, _V), slicing=0),
    *_sliced((vector_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_MATRIX, _IF_MISSING), lookup_by_vector, (_V,)),
    Phrase((vector_maybe_axis,), (_AS_AXIS, _IF_NOT, _LOOKUP_VECTOR, _IF_MISSING), lookup_by_vector, (_V,),
           slicing=0),
    *_sliced((_V,), (_is(GroupBy), _IF_MISSING), lookup_vector_group, (_V, GroupBy, _V)),
    Phrase((_V,), (_is(GroupBy), _IF_MISSING), lookup_vector_group, (_V, GroupBy, _V), slicing=0),
    Phrase((_V, GroupBy, _V), (_is(ReductionOperation), _IF_MISSING), reduce_grouped_vector, (_V,)),
    Phrase((_M,), (_is(ReduceToColumn), _IF_MISSING), reduce_matrix_to_column, (_V,)),
    Phrase((_M,), (_is(ReduceToRow), _IF_MISSING), reduce_matrix_to_row, (_V,)),
    Phrase((_V,), (_is(EltwiseOperation),), eltwise_vector, (_V,)),
    Phrase((_V,), (_is(ComparisonOperation),), compare_vector, (_V,)),
    # Scalar.
    Phrase(None, (_named(LookupScalar), _IF_MISSING), scalar_lookup, (_S,)),
    Phrase(None, (_LOOKUP_VECTOR, _IF_MISSING, axis_with_name, _is(IsEqual)), lookup_vector_entry, (_S,)),
    Phrase(None, (_LOOKUP_MATRIX, _IF_MISSING, axis_with_name, _is(IsEqual), axis_with_name, _is(IsEqual)),
           lookup_matrix_entry, (_S,)),
    Phrase((_M,), (_is(ReductionOperation), _IF_MISSING), reduce_matrix_to_scalar, (_S,)),
    Phrase((_V,), (_is(ReductionOperation), _IF_MISSING), reduce_vector_to_scalar, (_S,)),
    Phrase((_S,), (_is(EltwiseOperation),), eltwise_scalar, (_S,)),
    # Implicit.
    Phrase((vector_maybe_axis,), (_is(AsAxis),), vector_property_is_axis, (vector_axis,)),
    Phrase((_V, CountBy, _V), None, compute_count_matrix, (_M,)),
    Phrase((vector_axis, _BEGIN_TYPE, _V, MaskOperation, _V), None, compute_mask_operation,
           (vector_axis, _BEGIN_TYPE, _V)),
]


# Matching.


def stack_has_top(query_state: QueryState, expected: tuple) -> bool:
    """Whether the top of the stack is what ``expected`` describes (Julia's ``stack_has_top``): each expectation is
    a stack element type (or union of types) or a condition on the element."""
    stack = query_state.stack
    depth = len(stack)
    if depth < len(expected):
        return False
    # From the top down: the top element decides most mismatches.
    for offset in range(1, len(expected) + 1):
        value, expectation = stack[depth - offset], expected[-offset]
        if isinstance(expectation, type | UnionType):
            if not isinstance(value, expectation):
                return False
        elif not expectation(query_state, value):
            return False
    return True


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


def _may_start_with(phrase: Phrase, operation_type: type) -> bool:
    """Whether ``phrase`` may match when the next operation is of ``operation_type`` (``NoneType``: no operation is
    left): one of its leading operations, up to the first required one, accepts that type."""
    if phrase.operations is None:
        return True
    for expectation in phrase.operations:
        optional = isinstance(expectation, Optional)
        condition = expectation.condition if optional else expectation
        if issubclass(operation_type, condition.kinds):
            return True
        if not optional:
            return False
    return True


class _CandidateTable:
    """The phrases (in :data:`PHRASES` order) that may start with an operation of each type, made on first use per
    type: the machine tests 2-17 phrases per step instead of all 54 (the phrase matching of a 5-phrase query went from
    ~0.1 to ~0.05 ms). Remade when :data:`PHRASES` is replaced."""

    def __init__(self) -> None:
        self.phrases: list[Phrase] | None = None
        self.by_type: dict[type, tuple[Phrase, ...]] = {}

    def candidates(self, operation_type: type) -> tuple[Phrase, ...]:
        if self.phrases is not PHRASES:
            self.phrases, self.by_type = PHRASES, {}
        found = self.by_type.get(operation_type)
        if found is None:
            # (Two threads may both make an entry: the same one.)
            found = self.by_type[operation_type] = tuple(
                phrase for phrase in PHRASES if _may_start_with(phrase, operation_type))
        return found


_CANDIDATES = _CandidateTable()


def _do_query_phrase(query_state: QueryState) -> bool:
    original_stack = query_state.stack
    start = query_state.next_operation_index
    all_operations = query_state.operations
    next_type = type(all_operations[start]) if start < len(all_operations) else type(None)
    for phrase in _CANDIDATES.candidates(next_type):
        query_state.stack = original_stack
        if phrase.input is None:
            matched_stack: list[Any] = []
        else:
            if not stack_has_top(query_state, phrase.input):
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
        if phrase.slicing is not None:
            cut = len(operations) - phrase.slicing
            operations = [*operations[:cut], MatrixSlice.of(tuple(operations[cut:]))]
        query_state.stack = original_stack[:len(original_stack) - len(matched_stack)]
        phrase.implementation(query_state, *matched_stack, *operations)
        if not stack_has_top(query_state, phrase.output):
            _broken_contract(query_state, phrase)
        return True
    query_state.stack = original_stack
    query_state.first_operation_index = start
    query_state.next_operation_index = start
    return False


def _broken_contract(query_state: QueryState, phrase: Phrase) -> None:
    top = query_state.stack[max(0, len(query_state.stack) - len(phrase.output)):]
    expected = ", ".join(getattr(item, "__name__", str(item)) for item in phrase.output)
    raise DafError(f"internal error: the query phrase {phrase.implementation.__name__} left the stack top: "
                   f"{', '.join(type(item).__name__ for item in top) or 'nothing'}\ninstead of: {expected}\n"
                   f"in the query: {' '.join(str(operation) for operation in query_state.operations)}")


def _is_complete(query_state: QueryState) -> bool:
    stack = query_state.stack
    if len(stack) != 1:
        return False
    top = stack[0]
    if isinstance(top, NamesState | ScalarState):
        return True
    # (The stored entries: checking them does not read names still to be read.)
    if isinstance(top, VectorState):
        return top.stored_entries is not None and top.stored_values is not None
    if isinstance(top, MatrixState):
        return top.rows_state is not None and top.rows_state.stored_entries is not None \
            and top.rows_state.pending_final_values is None and top.columns_state is not None \
            and top.columns_state.stored_entries is not None and top.columns_state.pending_final_values is None \
            and top.matrix_values is not None
    return False


def final_state(daf: DafReader | None, query: Any, purpose: Purpose) -> QueryState:
    """Run the phrases of a query to the end (raising Julia's errors for invalid operations or queries)."""
    sequence = as_query_sequence(query)
    query_state = QueryState(daf, sequence.operations, purpose)
    while _do_query_phrase(query_state):
        pass
    if query_state.next_operation_index < len(query_state.operations):
        query_state.first_operation_index = query_state.next_operation_index
        error_at_state(query_state, "invalid operation(s)")
    if not _is_complete(query_state):
        raise DafQueryError(f"invalid query: {sequence}", daf_name=None if daf is None else daf.name,
                            daf_preposition="for")
    return query_state
