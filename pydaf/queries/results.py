"""Getting query results from a data set: caching (invalidated by version counters), numpy and pandas forms, and
data frames of several vectors of one axis (``get_frame``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.cache import QueryCacheKey
from ..errors import DafError, DafQueryError
from ..sparse import SparseMatrixCSC, read_only_array
from .evaluator import QueryResult, compute_query, is_axis_query, query_axis_name
from .query import (
    Axis,
    GroupBy,
    LookupVector,
    Query,
    QueryOperation,
    QuerySequence,
    as_query_sequence,
    glued_value_hint,
    parse_query,
)

if TYPE_CHECKING:
    import pandas as pd

    from ..core.readers import DafReader


def _read_only(values: Any) -> Any:
    if isinstance(values, np.ndarray):
        return read_only_array(values)
    if isinstance(values, SparseMatrixCSC):
        return values.read_only()
    return values


def query_result(daf: DafReader, query: Any, *, cache: bool = True) -> QueryResult:
    """The computed result of a query: from the cache if still current, else computed (and cached if ``cache``)."""
    sequence = as_query_sequence(query)

    def compute() -> tuple[QueryResult, frozenset]:
        result = compute_query(daf, sequence)
        result.value = _read_only(result.value)
        return result, result.dependencies

    try:
        return daf.cached_computation(QueryCacheKey(str(sequence)), compute, store=cache)
    except DafError as error:
        hint = glued_value_hint(query) if isinstance(query, str) else ""
        if hint:  # (``= a/b`` parses, as a group by ``b``: its error is about ``b``, and says nothing of escaping)
            error.with_line(hint)
        raise


class PendingQuery:
    """``query | daf.get_query()``: apply the query on the left (Julia's ``query |> get_query(daf)``), the result in
    the ``form`` of the call that made this (:func:`as_pandas`, :func:`as_numpy` or :func:`as_stored`).

    Example:
        >>> import pydaf
        >>> from pydaf.queries import Axis, LookupVector
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
        >>> (Axis("cell") | LookupVector("age") | daf.get_np_query()).tolist()
        [3, 5]
    """

    def __init__(self, daf: DafReader, *, cache: bool, form: Callable[[QueryResult], Any]) -> None:
        self.daf, self.cache, self.form = daf, cache, form

    def __ror__(self, query: Any) -> Any:
        return self.form(query_result(self.daf, query, cache=self.cache))


def as_numpy(result: QueryResult) -> Any:
    """Names as a set, a scalar, a vector as a numpy array, a matrix as a column-major numpy array or a 0-based
    ``scipy.sparse.csc_matrix``."""
    if result.dimensions == -1:
        return set(result.value)
    if result.dimensions == 2 and isinstance(result.value, SparseMatrixCSC):
        return result.value.to_scipy()
    return result.value


def as_stored(result: QueryResult) -> Any:
    """As :func:`as_numpy`, but a sparse matrix as the :class:`~pydaf.sparse.SparseMatrixCSC` the query computed:
    1-based ``colptr``/``rowval`` (the stored ones, mapped where the store is, when the query kept the matrix's
    structure) and ``nzval``. No 0-based copies of the indices are made."""
    if result.dimensions == -1:
        return set(result.value)
    return result.value


def as_pandas(result: QueryResult) -> Any:
    """Names as a set, a scalar, a vector as a ``pandas.Series`` and a matrix as a ``pandas.DataFrame``, labelled by
    the entry names (the index names are the axes, or ``None`` where the entries are values, not an axis)."""
    import pandas as pd

    if result.dimensions <= 0:
        return as_numpy(result)
    index = pd.Index(result.entries[0], name=result.dimension_names[0], dtype=object)
    if result.dimensions == 1:
        return pd.Series(result.value, index=index, copy=False)
    columns = pd.Index(result.entries[1], name=result.dimension_names[1], dtype=object)
    if isinstance(result.value, SparseMatrixCSC):
        return pd.DataFrame.sparse.from_spmatrix(result.value.to_scipy(), index=index, columns=columns)
    return pd.DataFrame(result.value, index=index, columns=columns, copy=False)


def full_vector_query(axis_query: Any, vector_query: Any, vector_name: str | None = None) -> QuerySequence:
    """An axis query combined with a suffix vector query (``@ cell [ age > 1 ]`` + ``: donor``); a vector query that
    groups (``@ cell : age / metacell >> Mean``) is already a full query and is used as is.

    Example:
        >>> str(full_vector_query(parse_query("@ cell"), ": donor"))
        '@ cell : donor'
    """
    if vector_name is not None and vector_query == "=":
        vector_query = LookupVector(vector_name)
    elif isinstance(vector_query, str):
        vector_query = parse_query(vector_query, LookupVector)
    sequence = as_query_sequence(vector_query)
    if any(isinstance(operation, GroupBy) for operation in sequence.operations):
        return sequence
    return as_query_sequence(axis_query) | sequence


def get_frame(daf: DafReader, axis: str | Query, columns: Any = None, *, cache: bool = False) -> pd.DataFrame:
    """A ``pandas.DataFrame`` with one row per entry of an axis (or of an axis query such as ``@ cell [ age > 1 ]``)
    and a column per vector query (see :meth:`DafReader.get_frame`)."""
    import pandas as pd

    axis_query = axis if isinstance(axis, QueryOperation) else parse_query(axis, Axis)
    if not is_axis_query(axis_query):
        raise DafQueryError(f"invalid axis query: {as_query_sequence(axis_query)}")
    axis_name = query_axis_name(axis_query)
    names_of_rows = query_result(daf, axis_query, cache=cache).value
    if columns is None:
        columns = ["name", *sorted(daf.vectors_set(axis_name))]
    if isinstance(columns, dict):
        columns = list(columns.items())
    data: dict[str, Any] = {}
    for column in columns:
        if isinstance(column, str):
            column_name, column_query = column, "="
        else:
            column_name, column_query = column
        if column_query == "=":
            column_query = ": " + column_name
        full_query = full_vector_query(axis_query, column_query, column_name)
        result = query_result(daf, full_query, cache=cache)
        if result.dimensions != 1 or not np.array_equal(result.entries[0], names_of_rows):
            raise DafQueryError(f"invalid column query: {full_query}\nfor the axis query: "
                                f"{as_query_sequence(axis_query)}", daf_name=daf.name, daf_preposition="of")
        data[column_name] = result.value
    return pd.DataFrame(data, index=pd.Index(names_of_rows, name=axis_name, dtype=object))
