"""Registration of element-wise and reduction operations, so query strings can name them (Julia's ``Registry``).

A user-defined operation subclasses :class:`EltwiseOperation` or :class:`ReductionOperation`, lists its parameters in
``parameters`` and is registered with the :func:`query_operation` decorator; from then on ``% MyOp param value`` (or
``>> MyOp ...``) parses into it.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, TypeVar

from ..errors import DafValueError

__all__ = [
    "ELTWISE_OPERATIONS",
    "REDUCTION_OPERATIONS",
    "ComputationOperation",
    "EltwiseOperation",
    "QueryOperation",
    "ReductionOperation",
    "query_operation",
    "register_query_operation",
]


class QueryOperation:
    """Base of every query operation; operations compose into a query with ``|`` (Julia's ``|>``).

    Example:
        >>> from pydaf.queries import Axis, LookupVector
        >>> str(Axis("cell") | LookupVector("age"))
        '@ cell : age'
    """

    def __or__(self, other: Any) -> Any:
        from .query import compose

        return compose(self, other)

    def __ror__(self, other: Any) -> Any:
        from .query import compose

        return compose(other, self)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class ComputationOperation(QueryOperation):
    """Base of element-wise and reduction operations.

    Subclasses set ``parameters`` (the names that may follow the operation name in a query string, in canonical
    order) and implement ``from_tokens`` (parse ``param value`` tokens, raising Julia's messages).
    """

    #: The parameter names, in the order the canonical string lists them.
    parameters: ClassVar[tuple[str, ...]] = ()

    #: ``%`` for element-wise operations, ``>>`` for reductions.
    operator: ClassVar[str] = ""

    @classmethod
    def operation_name(cls) -> str:
        return cls.__name__


class EltwiseOperation(ComputationOperation):
    """An element-wise operation (``% Name param value ...``): same shape out, possibly another element type."""

    operator = "%"


class ReductionOperation(ComputationOperation):
    """A reduction (``>> Name param value ...``, also used by ``>|``, ``>-`` and grouping)."""

    operator = ">>"

    #: Whether the operation accepts string input (``Count``, ``Mode``).
    supports_strings: ClassVar[bool] = False


#: Registered element-wise operations by name.
ELTWISE_OPERATIONS: dict[str, type[EltwiseOperation]] = {}

#: Registered reduction operations by name.
REDUCTION_OPERATIONS: dict[str, type[ReductionOperation]] = {}

_Operation = TypeVar("_Operation", bound=type[ComputationOperation])


def register_query_operation(operation_type: type[ComputationOperation]) -> None:
    """Make ``operation_type`` usable in query strings under its class name. Registering the same class again is a
    no-op; registering a different class under a taken name is an error (naming both definitions).

    Example:
        >>> from pydaf.queries.operations import Abs
        >>> register_query_operation(Abs)  # already registered: idempotent
    """
    if issubclass(operation_type, EltwiseOperation):
        registry: dict[str, Any] = ELTWISE_OPERATIONS
        kind = "eltwise"
    elif issubclass(operation_type, ReductionOperation):
        registry = REDUCTION_OPERATIONS
        kind = "reduction"
    else:
        raise DafValueError(f"not an EltwiseOperation or ReductionOperation: {operation_type.__name__}")
    name = operation_type.operation_name()
    previous = registry.get(name)
    if previous is not None and previous is not operation_type:
        raise DafValueError(f"conflicting registrations for the {kind} operation: {name}\n"
                            f"first in: {_where(previous)}\nsecond in: {_where(operation_type)}")
    registry[name] = operation_type


def _where(operation_type: type) -> str:
    try:
        return f"{inspect.getsourcefile(operation_type)}:{inspect.getsourcelines(operation_type)[1]}"
    except (OSError, TypeError):
        return operation_type.__module__


def query_operation(operation_type: _Operation) -> _Operation:
    """Class decorator registering a user-defined operation (Julia's ``@query_operation``).

    Example:
        >>> import numpy as np
        >>> from pydaf.queries.operations import Abs
        >>> @query_operation
        ... class Negate(EltwiseOperation):
        ...     def compute_eltwise(self, values):
        ...         return -values
        >>> "Negate" in ELTWISE_OPERATIONS
        True
    """
    register_query_operation(operation_type)
    return operation_type
