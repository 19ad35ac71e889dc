"""The Daf query language: parse and build queries, apply them to data sets, and the operations they use.

``daf["@ cell [ age > 60 ] : donor"]`` applies a query (see :meth:`pydaf.DafReader.get_query`); builders compose with
``|`` (``Axis("cell") | LookupVector("age")``); user-defined operations register with :func:`query_operation`.

Example:
    >>> import pydaf
    >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A", "B", "C"])
    >>> daf.set_vector("cell", "age", [20, 70, 65])  # doctest: +ELLIPSIS
    MemoryDaf ...
    >>> sorted(daf["@ cell [ age > 60 ]"].tolist())
    ['B', 'C']
"""

from . import operations
from .base import EltwiseOperation, QueryOperation, ReductionOperation
from .evaluator import has_query, is_axis_query, query_axis_name, query_requires_relayout, query_result_dimensions
from .operations import *  # noqa: F403 - the built-in operations are part of the query vocabulary
from .query import (
    AndMask,
    AndNegatedMask,
    AsAxis,
    Axis,
    BeginMask,
    BeginNegatedMask,
    CountBy,
    EndMask,
    GroupBy,
    GroupColumnsBy,
    GroupRowsBy,
    IfMissing,
    IfNot,
    IsEqual,
    IsGreater,
    IsGreaterEqual,
    IsLess,
    IsLessEqual,
    IsMatch,
    IsNotEqual,
    IsNotMatch,
    LookupMatrix,
    LookupScalar,
    LookupVector,
    Names,
    OrMask,
    OrNegatedMask,
    Query,
    QuerySequence,
    ReduceToColumn,
    ReduceToRow,
    SquareColumnIs,
    SquareRowIs,
    XorMask,
    XorNegatedMask,
    parse_query,
)
from .registry import query_operation, register_query_operation
from .results import full_vector_query
from .tokens import escape_value, unescape_value

__all__ = [
    "AndMask",
    "AndNegatedMask",
    "AsAxis",
    "Axis",
    "BeginMask",
    "BeginNegatedMask",
    "CountBy",
    "EltwiseOperation",
    "EndMask",
    "GroupBy",
    "GroupColumnsBy",
    "GroupRowsBy",
    "IfMissing",
    "IfNot",
    "IsEqual",
    "IsGreater",
    "IsGreaterEqual",
    "IsLess",
    "IsLessEqual",
    "IsMatch",
    "IsNotEqual",
    "IsNotMatch",
    "LookupMatrix",
    "LookupScalar",
    "LookupVector",
    "Names",
    "OrMask",
    "OrNegatedMask",
    "Query",
    "QueryOperation",
    "QuerySequence",
    "ReduceToColumn",
    "ReduceToRow",
    "ReductionOperation",
    "SquareColumnIs",
    "SquareRowIs",
    "XorMask",
    "XorNegatedMask",
    "escape_value",
    "full_vector_query",
    "has_query",
    "is_axis_query",
    "parse_query",
    "query_axis_name",
    "query_operation",
    "query_requires_relayout",
    "query_result_dimensions",
    "register_query_operation",
    "unescape_value",
    *operations.__all__,
]
