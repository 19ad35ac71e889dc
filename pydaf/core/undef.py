"""``Undef``: the default of getters that must find their property (Julia's ``undef``)."""

from __future__ import annotations

import enum


class UndefType(enum.Enum):
    """The type of :data:`Undef` (a one-member enum, so it is a singleton that pickles and compares by identity).

    Example:
        >>> import pydaf
        >>> pydaf.Undef is UndefType.Undef, repr(pydaf.Undef)
        (True, 'Undef')
    """

    Undef = "Undef"

    def __repr__(self) -> str:
        return "Undef"


#: Pass as ``default=`` to require the property to exist (the default of every getter).
Undef = UndefType.Undef
