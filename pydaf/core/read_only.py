"""Read-only data sets (Julia's ``ReadOnly``): the abstract :class:`DafReadOnly` (no write methods) and the wrapper
:class:`DafReadOnlyWrapper` (the same data set, with no write methods)."""

from __future__ import annotations

from functools import cache

from .readers import DafReader, DafReadOnly, DafReadOnlyWrapper, missing_attribute, write_methods

__all__ = ["DafReadOnly", "DafReadOnlyWrapper", "missing_attribute", "read_only", "writer_methods"]


def read_only(daf: DafReader, *, name: str | None = None) -> DafReader:
    """A read-only view of a data set (the data set itself when it is already read-only and no name is given).

    Example:
        >>> import pydaf
        >>> pydaf.read_only(pydaf.MemoryDaf(name="x!")).name
        'x!.read_only'
    """
    return daf.read_only(name=name)


@cache
def writer_methods() -> frozenset[str]:
    """The public methods of :class:`~pydaf.DafWriter` that :class:`~pydaf.DafReader` lacks: what a read-only data set
    refuses with a :class:`~pydaf.DafReadOnlyError`.

    Example:
        >>> "set_scalar" in writer_methods(), "get_scalar" in writer_methods()
        (True, False)
    """
    from .writers import DafWriter

    return write_methods(DafWriter)
