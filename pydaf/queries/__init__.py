"""The Daf query language: parse and build queries, apply them to data sets, and the operations they use.

``daf["@ donor [ age > 60 ] : sex"]`` applies a query (see :meth:`pydaf.DafReader.get_query`); the full reference,
with every phrase and operation, is ``docs/queries.md`` in pydaf's repository. Operators (their builders):

    @ axis      Axis            . name     LookupScalar      [ / [ !   BeginMask / BeginNegatedMask     ]   EndMask
    : name      LookupVector    :: name    LookupMatrix      & / & !   AndMask / AndNegatedMask
    ?           Names           =@ [axis]  AsAxis            | / | !   OrMask / OrNegatedMask
    @| entry    SquareColumnIs  @- entry   SquareRowIs       ^ / ^ !   XorMask / XorNegatedMask
    || value [Type]  IfMissing  ?? [value] IfNot             < <= = != >= >   IsLess ... IsGreater
    % Op [param value]...   an EltwiseOperation              ~ / !~    IsMatch / IsNotMatch (regex)
    >> Op ...   a ReductionOperation; >| Op: ReduceToColumn (per row); >- Op: ReduceToRow (per column)
    / p   GroupBy (then >> Op); -/ p   GroupRowsBy (then >- Op); |/ p   GroupColumnsBy (then >| Op); * p   CountBy

Operations: ``% Abs``, ``Round``, ``Clamp min m max M``, ``Convert type T``, ``Fraction``, ``Log base b eps e``,
``Significant high h low l``; ``>> Sum``, ``Max``, ``Min``, ``Median``, ``Quantile p P``, ``Mean``, ``GeoMean eps e``,
``Var``, ``Std``, ``VarN eps e``, ``StdN eps e``, ``Count``, ``Mode`` (most take ``type T``). Examples:
``@ cell @ gene :: UMIs >- Sum`` (total per gene), ``@ donor : age / sex >> Mean`` (mean per sex),
``@ cell : donor : age`` (each cell's donor's age), ``@ donor : height || 170`` (a default).

Values are runs of letters, digits, ``_ . + -`` and non-ASCII; escape any other character with ``\\`` (the type
``T cell`` is ``T\\ cell``; use raw strings, ``r"..."``), or let :func:`escape_value` do it. ``''`` is the empty value.
Builders compose with ``|`` (``Axis("cell") | LookupVector("age")``) and mix with strings; user-defined operations
register with :func:`query_operation`. Errors say how to escape a value, the closest operation names, and what exists.

Example:
    >>> import pydaf
    >>> cells = pydaf.example_cells_daf()
    >>> cells["@ donor [ age > 60 & sex = male ]"].size
    29
    >>> cells["@ donor : age / sex >> Max"].to_dict()
    {'female': 85, 'male': 91}
    >>> escape_value("T cell")
    'T\\\\ cell'
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
