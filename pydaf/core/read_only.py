"""Read-only wrappers (Julia's ``ReadOnly``): the same data set, with no write methods."""

from __future__ import annotations

from .readers import DafReader, DafReadOnly

__all__ = ["DafReadOnly", "read_only"]


def read_only(daf: DafReader, *, name: str | None = None) -> DafReader:
    """A read-only view of a data set (the data set itself when it is already read-only and no name is given).

    Example:
        >>> import pydaf
        >>> pydaf.read_only(pydaf.MemoryDaf(name="x!")).name
        'x!.read_only'
    """
    return daf.read_only(name=name)
