"""The roots of every query operation (Julia's ``Registry.QueryOperation``, ``EltwiseOperation``,
``ReductionOperation``): composition with ``|``, identity by canonical text, and the computation operations' canonical
printing and generic reductions.

:func:`compose` builds the query sequence class, which the parser module (:mod:`pydaf.queries.query`, above this one,
because it builds the operations defined here and there) declares with ``class QuerySequence(Query, composes=True)``;
so this module needs no import of it.
"""

from __future__ import annotations

import enum
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

import numpy as np

from ..errors import DafValueError
from ..julia_text import julia_string
from ..kernels.reductions import group_members, matrix_columns, matrix_rows
from ..sparse import SparseMatrixCSC, dense_column_major, dense_rows
from ..storage_types import DTYPES_BY_NAME, JULIA_NAMES, julia_name
from .tokens import Token, escape_value
from .values import (
    AUTO_TYPE,
    REQUIRED,
    error_invalid_parameter_value,
    parse_float_type_value,
    parse_number_type_value,
    parse_number_value,
    parse_parameter_value,
)

__all__ = [
    "AT_LEAST_0",
    "AT_MOST_1",
    "NOT_NEGATIVE",
    "POSITIVE",
    "ComputationOperation",
    "EltwiseOperation",
    "Parameter",
    "ParameterKind",
    "QueryOperation",
    "ReductionOperation",
    "Rule",
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
    _sequence_type: ClassVar[Callable[..., QueryOperation] | None] = None

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


class ParameterKind(enum.Enum):
    """What an operation parameter holds."""

    NUMBER_TYPE = enum.auto()
    """A number type (``Int8``, ``float32``, ``auto``, ... or a numpy dtype)."""
    FLOAT_TYPE = enum.auto()
    """A float type."""
    NUMBER = enum.auto()
    """A number, kept as a Python ``float`` (``e`` and ``pi`` in query strings)."""


@dataclass(frozen=True)
class Rule:
    """A rule a number parameter obeys, stated once for both ways of building an operation: ``holds(value,
    values)`` gets the values of the parameters listed before it; ``must_be`` says what the value must be."""

    holds: Callable[[float, Mapping[str, Any]], bool]
    must_be: Callable[[Mapping[str, Any]], str]


POSITIVE = Rule(lambda value, _values: value > 0, lambda _values: "positive")
NOT_NEGATIVE = Rule(lambda value, _values: value >= 0, lambda _values: "not negative")
AT_LEAST_0 = Rule(lambda value, _values: value >= 0, lambda _values: "at least 0")
AT_MOST_1 = Rule(lambda value, _values: value <= 1, lambda _values: "at most 1")


@dataclass(frozen=True)
class Parameter:
    """One parameter of a computation operation (sqlglot's ``arg_types``, with Julia's rules): its name, what it
    holds, its default (:data:`~pydaf.queries.values.REQUIRED` if none; a function of the parameters before it for a
    default that depends on them) and the rules a number obeys."""

    name: str
    kind: ParameterKind
    default: Any = None
    rules: tuple[Rule, ...] = ()

    def default_for(self, values: Mapping[str, Any]) -> Any:
        return self.default(values) if callable(self.default) else self.default


class ComputationOperation(QueryOperation):
    """Base of element-wise and reduction operations.

    An operation declares its parameters once, in ``parameter_specs`` (in canonical order); from that, the keyword
    constructor validates them (``Log(base=2)``), :meth:`from_tokens` parses them from a query string with Julia's
    messages (``% Log base 2``), and ``str(operation)`` is the canonical query text, printed as Julia's ``show`` does:
    the operator, the name, then every parameter (``type`` only when it is set). An operation may instead list only
    the names in ``parameters`` and write its own ``__init__`` and ``from_tokens``.

    Example:
        >>> from pydaf.queries.operations import Log
        >>> str(Log(base=2, eps=1e-5))
        '% Log base 2.0 eps 1.0e-5'
    """

    #: The parameters, in the order the canonical string lists them.
    parameter_specs: ClassVar[tuple[Parameter, ...]] = ()

    #: The parameter names, in canonical order (each is also the attribute holding the parameter's value).
    parameters: ClassVar[tuple[str, ...]] = ()

    #: How Julia's "missing required parameter" message names the kind of the operation (its built-in operations say
    #: ``eltwise``, except ``Sum`` and ``Count``).
    parameters_kind: ClassVar[str] = "eltwise"

    #: ``%`` for element-wise operations, ``>>`` for reductions.
    operator: ClassVar[str] = ""

    #: Whether the operation accepts string input (``Count``, ``Mode``); others are refused by the evaluator.
    supports_strings: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "parameter_specs" in vars(cls):
            cls.parameters = tuple(parameter.name for parameter in cls.parameter_specs)
            cls.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
                inspect.Parameter(parameter.name, inspect.Parameter.KEYWORD_ONLY,
                                  default=inspect.Parameter.empty if parameter.default is REQUIRED
                                  else None if callable(parameter.default) else parameter.default)
                for parameter in cls.parameter_specs])

    def __init__(self, **values: Any) -> None:
        specs = type(self).parameter_specs
        unknown = sorted(set(values) - {parameter.name for parameter in specs})
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument: {unknown[0]!r}")
        name = self.operation_name()
        converted: dict[str, Any] = {}
        for parameter in specs:
            value = values.get(parameter.name, REQUIRED)
            if value is REQUIRED:
                value = parameter.default_for(converted)
                if value is REQUIRED:
                    raise TypeError(f"{type(self).__name__}() missing required keyword argument: {parameter.name!r}")
            elif value is None and callable(parameter.default):
                value = parameter.default_for(converted)
            converted[parameter.name] = _builder_value(name, parameter, value)
        for parameter in specs:
            for rule in parameter.rules:
                if not rule.holds(converted[parameter.name], converted):
                    invalid_parameter(name, parameter.name, converted[parameter.name], rule.must_be(converted))
        for parameter_name, value in converted.items():
            setattr(self, parameter_name, value)

    @classmethod
    def operation_name(cls) -> str:
        return cls.__name__

    @classmethod
    def from_tokens(cls, operation_name: Token, parameters: dict[str, Token]) -> Any:
        """Build the operation from the parsed ``param value`` tokens of a query string (Julia's
        ``MyOperation(operation_name::Token, parameters_values::Dict{String, Token})``), checking each value as it
        is parsed (errors point at it). The parser has already refused unknown and repeated parameter names.

        An operation that lists only ``parameters`` overrides this (see
        :func:`pydaf.queries.values.parse_parameter_value`).
        """
        if cls.parameters and not cls.parameter_specs:
            raise NotImplementedError(f"{cls.__name__} has parameters, so it must implement from_tokens")
        values: dict[str, Any] = {}
        for parameter in cls.parameter_specs:
            def token_value(token: Token, parameter: Parameter = parameter) -> Any:
                return _token_value(operation_name, parameter, token, values)

            values[parameter.name] = parse_parameter_value(
                token_value, operation_name, cls.parameters_kind, parameters, parameter.name,
                parameter.default_for(values))
        return cls(**values)

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


def _token_value(operation_name: Token, parameter: Parameter, token: Token, values: Mapping[str, Any]) -> Any:
    """A parameter value parsed from its token, with Julia's message (pointing at it) for a broken rule."""
    if parameter.kind is ParameterKind.NUMBER_TYPE:
        return parse_number_type_value(operation_name, parameter.name, token)
    if parameter.kind is ParameterKind.FLOAT_TYPE:
        return parse_float_type_value(operation_name, parameter.name, token)
    value = parse_number_value(operation_name, parameter.name, token, np.float64)
    for rule in parameter.rules:
        if not rule.holds(value, values):
            error_invalid_parameter_value(operation_name, parameter.name, token, rule.must_be(values))
    return value


def invalid_parameter(operation: str, parameter: str, value: Any, must_be: str) -> NoReturn:
    """Raise Julia's message for an invalid parameter value given to a builder (a :class:`DafValueError`)."""
    raise DafValueError(f"invalid value: {julia_string(value)}\nvalue must be: {must_be}\n"
                        f"for the parameter: {parameter}\nfor the operation: {operation}")


def _builder_value(operation: str, parameter: Parameter, value: Any) -> Any:
    """A parameter value given to a builder, converted: a number type (a dtype, a Python/numpy type or a Julia type
    name; ``None`` or ``auto`` for the default) or a number (a ``float``)."""
    if parameter.kind is ParameterKind.NUMBER:
        if isinstance(value, str) or not isinstance(value, int | float | np.integer | np.floating | np.bool_):
            invalid_parameter(operation, parameter.name, value, "a number")
        return float(value)
    if value is None or (isinstance(value, str) and value == AUTO_TYPE):
        if parameter.default is REQUIRED:
            invalid_parameter(operation, parameter.name, value, "a number type")
        return None
    if isinstance(value, str):
        dtype = DTYPES_BY_NAME.get(value)
        if dtype is None:
            invalid_parameter(operation, parameter.name, value, "a number type")
    else:
        try:
            dtype = np.dtype(value)
        except TypeError:
            invalid_parameter(operation, parameter.name, value, "a number type")
        if dtype not in JULIA_NAMES:
            invalid_parameter(operation, parameter.name, value, "a number type")
    if parameter.kind is ParameterKind.FLOAT_TYPE and dtype.kind != "f":
        invalid_parameter(operation, parameter.name, julia_name(dtype), "a float type")
    return dtype


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
    the built-in operations replace with parallel kernels. With :meth:`compute_partial` and :meth:`combine_partials`
    too, :mod:`pydaf.dask` reduces a whole matrix piece by piece.

    Example:
        >>> import numpy as np
        >>> class Range(ReductionOperation):
        ...     def reduction_result_type(self, dtype):
        ...         return dtype
        ...     def compute_vector(self, values):
        ...         return values.max() - values.min()
        ...     def compute_partial(self, values):
        ...         return values.max(), values.min()
        ...     def combine_partials(self, partials):
        ...         return max(high for high, _ in partials) - min(low for _, low in partials)
        >>> Range().compute_matrix(np.array([[1, 5], [4, 2], [3, 9]], order="F"), 0).tolist()
        [3, 7]
        >>> Range().compute_grouped_vector(np.array([1, 5, 4, 2]), np.array([0, 1, 0, 1]), 2).tolist()
        [3, 3]
        >>> pieces = [np.array([3, 9]), np.array([1, 4])]
        >>> int(Range().combine_partials([Range().compute_partial(piece) for piece in pieces]))
        8
    """

    operator = ">>"
    #: Whether the result depends on the values (not only on the shape): a reduction that does not needs no
    #: particular layout of a matrix.
    reads_values = True

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

    def compute_partial(self, values: Any) -> Any:
        """Optional: what a piece of the values contributes to the reduction of the whole, for :mod:`pydaf.dask`
        (which then reduces a whole vector or matrix on a cluster piece by piece, and :meth:`combine_partials` makes
        the result from the pieces' partials; without the two, such a reduction runs as one task, which needs all the
        values on one worker). ``values``: a non-empty vector, dense matrix or :class:`~pydaf.SparseMatrixCSC` (whose
        implicit zeros are values: :func:`~pydaf.sparse.dense_column_major` makes it dense). The class's example
        implements both.

        Example:
            >>> ReductionOperation().compute_partial([1])
            Traceback (most recent call last):
            ...
            NotImplementedError: ReductionOperation does not implement compute_partial
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement compute_partial")

    def combine_partials(self, partials: list[Any]) -> Any:
        """Optional: the reduction of the whole from the partials :meth:`compute_partial` gave for its pieces (at
        least one), as :meth:`compute_vector` would give it."""
        raise NotImplementedError(f"{type(self).__name__} does not implement combine_partials")

    @property
    def combines_partials(self) -> bool:
        """Whether this reduction says how to combine pieces (:meth:`compute_partial`, :meth:`combine_partials`).

        Example:
            >>> ReductionOperation().combines_partials
            False
        """
        kind = type(self)
        return kind.compute_partial is not ReductionOperation.compute_partial \
            and kind.combine_partials is not ReductionOperation.combine_partials

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
        return dense_rows(matrix, rows)
    return np.asfortranarray(matrix)
