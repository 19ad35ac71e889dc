"""The roots of every query operation (Julia's ``Registry.QueryOperation``, ``EltwiseOperation``,
``ReductionOperation``): composition with ``|``, identity by canonical text, and the computation operations' canonical
printing and generic reductions.

:func:`compose` builds the query sequence class, which the parser module (:mod:`pydaf.queries.query`, above this one,
because it builds the operations defined here and there) declares with ``class QuerySequence(Query, composes=True)``;
so this module needs no import of it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..julia_text import julia_string
from ..kernels.reductions import group_members, matrix_columns, matrix_rows
from ..sparse import SparseMatrixCSC, dense_column_major
from ..storage_types import julia_name
from .tokens import escape_value

if TYPE_CHECKING:
    from .tokens import Token

__all__ = [
    "ComputationOperation",
    "EltwiseOperation",
    "QueryOperation",
    "ReductionOperation",
    "compose",
    "format_parameter_value",
    "select_matrix",
]


class QueryOperation:
    """Base of every query operation; operations compose into a query with ``|`` (Julia's ``|>``).

    Example:
        >>> from pydaf.queries import Axis, LookupVector
        >>> str(Axis("cell") | LookupVector("age"))
        '@ cell : age'
    """

    #: The class :func:`compose` builds (the one subclass declared with ``composes=True``).
    _sequence_type: ClassVar[type[QueryOperation] | None] = None

    def __init_subclass__(cls, *, composes: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if composes:
            QueryOperation._sequence_type = cls

    def __or__(self, other: Any) -> Any:
        if not isinstance(other, str | QueryOperation):
            return NotImplemented  # e.g. ``query | daf.get_np_query()``
        return compose(self, other)

    def __ror__(self, other: Any) -> Any:
        if not isinstance(other, str | QueryOperation):
            return NotImplemented
        return compose(other, self)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


def compose(first: QueryOperation | str, second: QueryOperation | str) -> QueryOperation:
    """``first | second``: one query sequence of both (strings are parsed first).

    Example:
        >>> from pydaf.queries import Axis
        >>> str(compose(Axis("cell"), ": age"))
        '@ cell : age'
    """
    sequence_type = QueryOperation._sequence_type
    assert sequence_type is not None, "pydaf.queries.query declares the query sequence"
    return sequence_type(first, second)


class ComputationOperation(QueryOperation):
    """Base of element-wise and reduction operations.

    Subclasses set ``parameters`` (the names that may follow the operation name in a query string, in canonical
    order; each is also the name of an attribute holding the parameter's value) and implement ``from_tokens`` (parse
    ``param value`` tokens, raising Julia's messages). ``str(operation)`` is the canonical query text, printed as
    Julia's ``show`` does: the operator, the name, then every parameter (``type`` only when it is set).

    Example:
        >>> from pydaf.queries.operations import Log
        >>> str(Log(base=2, eps=1e-5))
        '% Log base 2.0 eps 1.0e-5'
    """

    #: The parameter names, in the order the canonical string lists them.
    parameters: ClassVar[tuple[str, ...]] = ()

    #: ``%`` for element-wise operations, ``>>`` for reductions.
    operator: ClassVar[str] = ""

    #: Whether the operation accepts string input (``Count``, ``Mode``); others are refused by the evaluator.
    supports_strings: ClassVar[bool] = False

    @classmethod
    def operation_name(cls) -> str:
        return cls.__name__

    @classmethod
    def from_tokens(cls, operation_name: Token, parameters: dict[str, Token]) -> Any:
        """Build the operation from the parsed ``param value`` tokens of a query string (Julia's
        ``MyOperation(operation_name::Token, parameters_values::Dict{String, Token})``).

        The parser has already refused unknown and repeated parameter names. This default serves operations without
        parameters; operations with parameters override it (see :func:`pydaf.queries.values.parse_parameter_value`).
        """
        if cls.parameters:
            raise NotImplementedError(f"{cls.__name__} has parameters, so it must implement from_tokens")
        return cls()

    def canonical(self, operator: str | None = None) -> str:
        """The canonical text after the given operator (by default, the operation's own: ``%`` or ``>>``); the
        evaluator prints reductions used by ``>|`` and ``>-`` with those operators.

        Example:
            >>> from pydaf.queries.operations import Sum
            >>> Sum(type="Int64").canonical(">|")
            '>| Sum type Int64'
        """
        parts = [self.operator if operator is None else operator, self.operation_name()]
        for name in self.parameters:
            value = getattr(self, name)
            if name == "type" and value is None:
                continue
            parts.append(escape_value(name))
            parts.append(format_parameter_value(value))
        return " ".join(parts)

    def __str__(self) -> str:
        return self.canonical()


def format_parameter_value(value: Any) -> str:
    """A parameter value as Julia's ``show`` of an operation prints it: types by their Julia name, the constants
    ``e`` and ``pi`` by name, numbers as Julia's ``string``, strings escaped.

    Example:
        >>> import math, numpy as np
        >>> [format_parameter_value(value) for value in (np.dtype("int64"), math.e, 0.5, 1e-5, -math.inf, "a:b")]
        ['Int64', 'e', '0.5', '1.0e-5', '-Inf', 'a\\\\:b']
    """
    if isinstance(value, np.dtype):
        return julia_name(value)
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return escape_value(value)
    if isinstance(value, float | np.floating) and not isinstance(value, bool):
        if float(value) == math.e:
            return "e"
        if float(value) == math.pi:
            return "pi"
    return escape_value(julia_string(value))


class EltwiseOperation(ComputationOperation):
    """An element-wise operation (``% Name param value ...``): same shape out, possibly another element type.

    A user-defined operation implements :meth:`compute_eltwise` (see :func:`~pydaf.queries.registry.query_operation`).
    """

    operator = "%"

    def compute_eltwise(self, input: Any) -> Any:
        """Apply the operation to a scalar (numpy scalar), a vector (1-D numpy array) or a matrix (column-major 2-D
        numpy array, or :class:`~pydaf.sparse.SparseMatrixCSC` with 1-based indices, possibly read-only and mapped:
        never write into it). Return the same kind and shape."""
        raise NotImplementedError(f"{type(self).__name__} does not implement compute_eltwise")


class ReductionOperation(ComputationOperation):
    """A reduction (``>> Name param value ...``, also used by ``>|``, ``>-`` and grouping).

    A user-defined reduction only needs :meth:`compute_vector` and :meth:`reduction_result_type`; the other methods
    have generic implementations here (gathering each column, row or group and calling :meth:`compute_vector`), which
    the built-in operations replace with parallel kernels.

    Example:
        >>> import numpy as np
        >>> class Range(ReductionOperation):
        ...     def reduction_result_type(self, dtype):
        ...         return dtype
        ...     def compute_vector(self, values):
        ...         return values.max() - values.min()
        >>> Range().compute_matrix(np.array([[1, 5], [4, 2], [3, 9]], order="F"), 0).tolist()
        [3, 7]
        >>> Range().compute_grouped_vector(np.array([1, 5, 4, 2]), np.array([0, 1, 0, 1]), 2).tolist()
        [3, 3]
    """

    operator = ">>"

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        """The dtype of the result of reducing values of ``dtype`` (``object`` for strings)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement reduction_result_type")

    def compute_vector(self, values: np.ndarray) -> Any:
        """Reduce a non-empty 1-D array to a scalar (a numpy scalar of :meth:`reduction_result_type`, or ``str``)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement compute_vector")

    def compute_matrix(self, matrix: Any, axis: int) -> np.ndarray:
        """Reduce a matrix to a vector: ``axis=0`` eliminates the rows (one value per column, Julia's ``>-``),
        ``axis=1`` eliminates the columns (one value per row, Julia's ``>|``)."""
        vectors = matrix_columns(matrix) if axis == 0 else matrix_rows(matrix)
        return self._collect(vectors, _matrix_dtype(matrix))

    def compute_all(self, matrix: Any) -> Any:
        """Reduce a whole matrix to a scalar (Julia's ``>>`` on a matrix; values in column-major order)."""
        return self.compute_vector(dense_column_major(matrix).ravel(order="F"))

    def compute_grouped_vector(self, values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
        """Reduce each group of a vector: ``groups[i]`` is the 0-based group of ``values[i]``, or -1 to skip it.
        Returns ``n_groups`` values (those of empty groups are arbitrary; the evaluator replaces them)."""
        return self._collect((values[members] for members in group_members(groups, n_groups)),
                             np.asarray(values).dtype)

    def compute_grouped_matrix(self, matrix: Any, groups: np.ndarray, n_groups: int, axis: int) -> np.ndarray:
        """Reduce each group of rows (``axis=0``: ``n_groups x n_columns``, Julia's ``-/ g >- Op``) or of columns
        (``axis=1``: ``n_rows x n_groups``, Julia's ``|/ g >| Op``); a column-major matrix."""
        dtype = np.dtype(self.reduction_result_type(_matrix_dtype(matrix)))
        n_other = matrix.shape[1 - axis]
        result = np.zeros((n_groups, n_other) if axis == 0 else (n_other, n_groups), dtype=dtype, order="F")
        if dtype.kind == "O":
            result[...] = ""
        for group, members in enumerate(group_members(groups, n_groups)):
            if members.shape[0] == 0:
                continue
            if axis == 0:
                result[group, :] = self.compute_matrix(select_matrix(matrix, rows=members), 0)
            else:
                result[:, group] = self.compute_matrix(select_matrix(matrix, columns=members), 1)
        return result

    def _collect(self, vectors: Any, dtype: np.dtype) -> np.ndarray:
        result_dtype = np.dtype(self.reduction_result_type(dtype))
        results = []
        for vector in vectors:
            if vector.shape[0] == 0:
                results.append("" if result_dtype.kind == "O" else result_dtype.type(0))
            else:
                results.append(self.compute_vector(vector))
        collected = np.empty(len(results), dtype=result_dtype)
        collected[:] = results
        return collected


def _matrix_dtype(matrix: Any) -> np.dtype:
    return matrix.nzval.dtype if isinstance(matrix, SparseMatrixCSC) else np.asarray(matrix).dtype


def select_matrix(matrix: Any, *, rows: np.ndarray | None = None, columns: np.ndarray | None = None) -> Any:
    """The given 0-based rows and columns of a dense or sparse matrix (a new matrix of the same kind; the matrix itself
    when neither is given).

    Example:
        >>> select_matrix(np.array([[1, 2], [3, 4]]), rows=np.array([1])).tolist()
        [[3, 4]]
    """
    if rows is None and columns is None:
        return matrix
    if isinstance(matrix, SparseMatrixCSC):
        return matrix.select(rows=rows, columns=columns)
    if columns is not None:
        matrix = matrix[:, columns]
    if rows is not None:
        matrix = matrix[rows, :]
    return np.asfortranarray(matrix)
