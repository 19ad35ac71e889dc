"""dafpy's query operations: pydaf's own (:mod:`pydaf.queries.operations`), with dafpy's constructors, where ``None``
means "the default" (``Log(base=2, eps=None)``), and the objects ``daf.get_np_query()``/``daf.get_pd_query()``
return for ``query | daf.get_np_query()``.

Each class here is a subclass of pydaf's operation of the same name, so a query built from them is a pydaf query with
pydaf's text.

Example:
    >>> import numpy as np
    >>> from pydaf.dafpy import Axis, Log, LookupVector, Sum, memory_daf
    >>> str(Axis("cell") | LookupVector("age") | Log(base=2, eps=None, type=None))
    '@ cell : age % Log base 2.0 eps 0.0'
    >>> daf = memory_daf(name="example!").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 3])
    >>> Axis("cell") | LookupVector("age") | Sum(type=np.int32) | daf.get_np_query()
    4
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..queries import operations as pydaf_operations
from ..queries.base import EltwiseOperation, QueryOperation, ReductionOperation
from ..queries.operations import Max, Mean, Median, Min, Std, StdN, Var, VarN
from ..queries.query import QuerySequence
from .julia_import import _given

__all__ = [
    "Abs",
    "Clamp",
    "Convert",
    "EltwiseOperation",
    "Fraction",
    "Log",
    "Max",
    "Mean",
    "Median",
    "Min",
    "Quantile",
    "QueryOperation",
    "QuerySequence",
    "ReductionOperation",
    "Round",
    "Significant",
    "Std",
    "StdN",
    "Sum",
    "Var",
    "VarN",
]


class PendingNumpyQuery:
    """What ``daf.get_np_query()`` returns: ``query | daf.get_np_query()`` applies the query on the left."""

    def __init__(self, run: Callable[[Any], Any]) -> None:
        self.run = run

    def __ror__(self, query: Any) -> Any:
        return self.run(query)


class PendingPandasQuery(PendingNumpyQuery):
    """What ``daf.get_pd_query()`` returns: ``query | daf.get_pd_query()`` applies the query on the left."""


class Abs(pydaf_operations.Abs):
    """``% Abs``: the absolute value of each element (``type``: the result's element type; ``None``: the default)."""

    def __init__(self, *, type: Any = None) -> None:
        super().__init__(**_given(type=type))


class Round(pydaf_operations.Round):
    """``% Round``: each element rounded to the nearest integer (``type``: the result's; ``None``: the default)."""

    def __init__(self, *, type: Any = None) -> None:
        super().__init__(**_given(type=type))


class Clamp(pydaf_operations.Clamp):
    """``% Clamp``: each element clamped into ``[min, max]`` (``None``: unbounded on that side)."""

    def __init__(self, *, min: float | None = None, max: float | None = None) -> None:
        super().__init__(**_given(min=min, max=max))


class Convert(pydaf_operations.Convert):
    """``% Convert``: each element converted to ``type``."""

    def __init__(self, *, type: Any) -> None:
        super().__init__(type=type)


class Fraction(pydaf_operations.Fraction):
    """``% Fraction``: each element's fraction of the total (``type``: the result's; ``None``: the default)."""

    def __init__(self, *, type: Any = None) -> None:
        super().__init__(**_given(type=type))


class Log(pydaf_operations.Log):
    """``% Log``: the logarithm of each element plus ``eps``, in ``base`` (``None``: e, 0 and the default type)."""

    def __init__(self, *, type: Any = None, base: float | None = None, eps: float | None = None) -> None:
        super().__init__(**_given(type=type, base=base, eps=eps))


class Significant(pydaf_operations.Significant):
    """``% Significant``: zero the values whose magnitude is below ``high`` unless in a group reaching it, keeping
    those at least ``low`` (``None``: ``high``)."""

    def __init__(self, *, high: float, low: float | None = None) -> None:
        super().__init__(**_given(high=high, low=low))


class Sum(pydaf_operations.Sum):
    """``>> Sum``: the sum of the elements (``type``: the result's; ``None``: the default)."""

    def __init__(self, *, type: Any = None) -> None:
        super().__init__(**_given(type=type))


class Quantile(pydaf_operations.Quantile):
    """``>> Quantile``: the value with a fraction ``p`` of the values below it (``type``: the result's)."""

    def __init__(self, *, type: Any = None, p: float) -> None:
        super().__init__(**_given(type=type, p=p))


# The operations without parameters in dafpy are pydaf's classes themselves.
_ = (Max, Mean, Median, Min, Std, StdN, Var, VarN)
