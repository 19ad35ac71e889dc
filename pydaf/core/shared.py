"""Data sets that wrap another one through a format of their own while sharing its state (its data lock, cache and
version counters), as Julia's wrappers share the wrapped data set's ``internal``: what a contract's data set
(:mod:`pydaf.composition.contracts`) is built on. (:class:`~pydaf.DafReadOnlyWrapper` shares the state and the format
too.)"""

from __future__ import annotations

from typing import Any

from ..abc.format import FormatReader
from .readers import DafReader, _ClosedState

__all__ = ["StateSharingDaf"]


class StateSharingDaf(DafReader):
    """A data set whose ``format`` is its own but whose state is ``daf``'s: it sees ``daf``'s cache and version
    counters, takes its lock, and is closed when ``daf`` is; closing it leaves ``daf`` open (as a view does).

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="shared!").add_axis("cell", ["A", "B"])
        >>> shared = StateSharingDaf(daf.format, daf, name="sharing!")
        >>> shared.axis_length("cell"), shared.cache is daf.cache
        (2, True)
        >>> shared.close()
        >>> shared.closed, daf.closed
        (True, False)
    """

    def __init__(self, format: FormatReader, daf: DafReader, *, name: str) -> None:
        if isinstance(daf._state, _ClosedState):
            raise daf._state.error()
        self._shared_with = daf
        self._closed_state: _ClosedState | None = None
        DafReader.__init__(self, format, name=name, state=daf._state, unique=False)

    @property
    def _state(self) -> Any:
        """The shared data set's state, until this one is closed."""
        closed = self.__dict__.get("_closed_state")
        return closed if closed is not None else self._shared_with._state

    @_state.setter
    def _state(self, state: Any) -> None:
        pass  # (DafReader.__init__ sets it: the state is always the shared data set's)

    def _shared_type_text(self) -> str:
        """The type part of the shared data set's ``repr`` (for this one's)."""
        return self._shared_with._type_text()

    def close(self) -> None:
        """Stop using this data set: from now on its reads and writes raise :class:`~pydaf.DafClosedError`. The data
        set whose state it shares stays open."""
        self._closed_state = _ClosedState(self.name, self.complete_path())
