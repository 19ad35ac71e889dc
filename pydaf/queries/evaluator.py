"""Applying a query to a data set, and questions about a query (the public face of :mod:`pydaf.queries.machine`):
:func:`compute_query`, :func:`has_query`, :func:`query_result_dimensions`, :func:`is_axis_query`,
:func:`query_axis_name` and :func:`query_requires_relayout`.

The query engine's modules import each other in one direction: ``tokens`` → ``values`` → ``base`` → ``registry`` →
``query`` (builders and parser) → ``operations`` → ``state`` → ``phrases`` → ``machine`` → ``evaluator`` →
``results`` (caching and result forms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.brief import brief_array, brief_scalar
from ..errors import DafError, DafQueryError
from .machine import final_state
from .phrases.common import finalize_matrix_values, finalize_vector_values
from .query import QuerySequence, as_query_sequence
from .state import AxisEntries, MatrixState, Missing, NamesState, Purpose, ScalarState, VectorState, entry_names

if TYPE_CHECKING:
    from ..core.readers import DafReader

__all__ = ["QueryResult", "QuerySequence", "compute_query", "has_query", "is_axis_query", "query_axis_name",
           "query_requires_relayout", "query_result_dimensions"]


@dataclass
class QueryResult:
    """A computed query: names, a scalar, or named vector/matrix values (and what it depends on). The entry names of
    a dimension that is a whole axis are read only when :attr:`entries` is first used (numpy results never do)."""

    dimensions: int
    value: Any = None
    entries_of_dimensions: tuple[np.ndarray | AxisEntries, ...] = ()
    dimension_names: tuple[str | None, ...] = ()
    dependencies: frozenset[Any] = frozenset()

    @property
    def entries(self) -> tuple[np.ndarray, ...]:
        """The entry names of each dimension."""
        return tuple(entry_names(entries.read()) if isinstance(entries, AxisEntries) else entries
                     for entries in self.entries_of_dimensions)

    def brief(self) -> str:
        """Julia's ``brief`` of the value (as ``description(cache=True)`` lists a cached query)."""
        if self.dimensions < 0:
            return f"{len(self.value)} x String (Set)"
        if self.dimensions == 0:
            return brief_scalar(self.value)
        return brief_array(self.value)


def compute_query(daf: DafReader, query: Any) -> QueryResult:
    """Compute a query on a data set."""
    query_state = final_state(daf, query, Purpose.COMPUTE)
    top = query_state.stack.pop()
    dependencies = frozenset(query_state.dependencies)
    if isinstance(top, NamesState):
        return QueryResult(-1, top.names_set, dependencies=dependencies)
    if isinstance(top, ScalarState):
        return QueryResult(0, top.scalar_value, dependencies=dependencies)
    if isinstance(top, VectorState):
        finalize_vector_values(query_state, top)
        return QueryResult(1, np.asarray(top.vector_values), (_result_entries(top),), (top.entries_axis_name,),
                           dependencies)
    assert isinstance(top, MatrixState)
    finalize_matrix_values(query_state, top)
    assert top.rows_state is not None and top.columns_state is not None
    return QueryResult(2, top.matrix_values, (_result_entries(top.rows_state), _result_entries(top.columns_state)),
                       (top.rows_state.entries_axis_name, top.columns_state.entries_axis_name), dependencies)


def _result_entries(state: VectorState) -> np.ndarray | AxisEntries:
    if isinstance(state.stored_entries, AxisEntries):
        return state.stored_entries
    return entry_names(state.vector_entries)


def has_query(daf: DafReader, query: Any) -> bool:
    """Whether the query is valid and everything it needs (axes, scalars, properties of named axes) exists."""
    try:
        final_state(daf, query, Purpose.HAS_QUERY)
    except (DafError, Missing):
        return False
    return True


def query_result_dimensions(query: Any) -> int:
    """-1 for names, 0 scalar, 1 vector, 2 matrix (this also checks the query is valid).

    Example:
        >>> query_result_dimensions("@ cell @ gene :: UMIs >| Sum")
        1
    """
    top = final_state(None, query, Purpose.DRY_RUN).stack[-1]
    return {NamesState: -1, ScalarState: 0, VectorState: 1, MatrixState: 2}[type(top)]


def is_axis_query(query: Any) -> bool:
    """Whether the query gives the (possibly masked) entries of an axis.

    Example:
        >>> is_axis_query("@ gene [ is_lateral ]"), is_axis_query("@ gene : is_lateral")
        (True, False)
    """
    query_state = final_state(None, query, Purpose.DRY_RUN)
    top = query_state.stack[-1]
    return isinstance(top, VectorState) and top.entries_axis_name is not None \
        and top.property_axis_name == top.entries_axis_name and top.property_name == "name"


def query_axis_name(query: Any) -> str:
    """The axis of an axis query (see :func:`is_axis_query`).

    Example:
        >>> query_axis_name("@ gene [ is_lateral ]")
        'gene'
    """
    query_state = final_state(None, query, Purpose.DRY_RUN)
    top = query_state.stack[-1]
    if not (isinstance(top, VectorState) and top.entries_axis_name is not None and top.property_name == "name"
            and top.entries_axis_name == top.property_axis_name):
        raise DafQueryError(f"not an axis query: {as_query_sequence(query)}")
    return top.entries_axis_name


def query_requires_relayout(daf: DafReader, query: Any) -> bool:
    """Whether computing the query needs a matrix in the layout that is not stored."""
    return final_state(daf, query, Purpose.REQUIRES_RELAYOUT).requires_relayout
