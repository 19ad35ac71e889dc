"""The keys that name properties in the composition APIs (Julia's ``Keys``): views, copies, concatenation and
contracts take lists of ``(key, value)`` pairs (or dicts) keyed by these.

A scalar is named by its name, an axis by its name, a vector by ``(axis, name)``, a matrix by ``(rows_axis,
columns_axis, name)`` (either axis order names the same matrix), and a tensor (the matrices ``<entry>_<name>`` of
every entry of a main axis) by ``(main_axis, rows_axis, columns_axis, name)``.

Example:
    >>> pairs_as_dict([("version", 1), (("cell", "age"), 0)])
    {'version': 1, ('cell', 'age'): 0}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias, overload

__all__ = [
    "ALL_AXES",
    "ALL_MATRICES",
    "ALL_SCALARS",
    "ALL_VECTORS",
    "AxisKey",
    "DataKey",
    "MatrixKey",
    "PropertyKey",
    "ScalarKey",
    "TensorKey",
    "VectorKey",
    "pairs_as_dict",
]

ScalarKey: TypeAlias = str
AxisKey: TypeAlias = str
VectorKey: TypeAlias = tuple[str, str]
MatrixKey: TypeAlias = tuple[str, str, str]
TensorKey: TypeAlias = tuple[str, str, str, str]
PropertyKey: TypeAlias = ScalarKey | VectorKey | MatrixKey
DataKey: TypeAlias = PropertyKey | TensorKey

#: Every scalar: the key ``"*"`` (Julia's ``ALL_SCALARS``), e.g. ``merge=[(ALL_SCALARS, MergeAction.LastValue)]``.
ALL_SCALARS: ScalarKey = "*"
#: Every axis (Julia's ``ALL_AXES``).
ALL_AXES: AxisKey = "*"
#: Every vector of every axis (Julia's ``ALL_VECTORS``); ``("cell", "*")`` is every vector of the ``cell`` axis.
ALL_VECTORS: VectorKey = ("*", "*")
#: Every matrix of every pair of axes (Julia's ``ALL_MATRICES``).
ALL_MATRICES: MatrixKey = ("*", "*", "*")


@overload
def pairs_as_dict(pairs: None) -> None: ...


@overload
def pairs_as_dict(pairs: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> dict[Any, Any]: ...


def pairs_as_dict(pairs: Mapping[Any, Any] | Iterable[tuple[Any, Any]] | None) -> dict[Any, Any] | None:
    """A dict from a dict or a list of ``(key, value)`` pairs (later pairs win); ``None`` stays ``None``, as in Julia's
    ``pairs_as_dict``. List keys become tuples.

    Example:
        >>> pairs_as_dict(None), pairs_as_dict({"a": 1}), pairs_as_dict([("a", 1), ("a", 2)])
        (None, {'a': 1}, {'a': 2})
    """
    if pairs is None:
        return None
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return {tuple(key) if isinstance(key, list) else key: value for key, value in items}
