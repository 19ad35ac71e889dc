"""Registration of element-wise and reduction operations, so query strings can name them (Julia's ``Registry``).

A user-defined operation subclasses :class:`~pydaf.queries.base.EltwiseOperation` or
:class:`~pydaf.queries.base.ReductionOperation`, lists its parameters in ``parameters`` and is registered with the
:func:`query_operation` decorator; from then on ``% MyOp param value`` (or ``>> MyOp ...``) parses into it.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from ..errors import DafValueError
from .base import ComputationOperation, EltwiseOperation, ReductionOperation

__all__ = [
    "ELTWISE_OPERATIONS",
    "REDUCTION_OPERATIONS",
    "query_operation",
    "register_query_operation",
]


#: Registered element-wise operations by name.
ELTWISE_OPERATIONS: dict[str, type[EltwiseOperation]] = {}

#: Registered reduction operations by name.
REDUCTION_OPERATIONS: dict[str, type[ReductionOperation]] = {}

_Operation = TypeVar("_Operation", bound=type[ComputationOperation])


def register_query_operation(operation_type: type[ComputationOperation]) -> None:
    """Make ``operation_type`` usable in query strings under its class name. Registering the same class again is a
    no-op, as is registering the same definition executed again (the same qualified name, file and line: a reloaded
    module, or a file a ``dask.distributed`` worker preloads, which Python makes a new class, as Julia would not);
    registering a different class under a taken name is an error (naming both definitions).

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
    if previous is not None and previous is not operation_type \
            and (previous.__qualname__, _where(previous)) != (operation_type.__qualname__, _where(operation_type)):
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
        >>> from pydaf.queries.base import EltwiseOperation
        >>> @query_operation
        ... class Negate(EltwiseOperation):
        ...     def compute_eltwise(self, values):
        ...         return -values
        >>> "Negate" in ELTWISE_OPERATIONS
        True
    """
    register_query_operation(operation_type)
    return operation_type
