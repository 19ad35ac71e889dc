"""What dafpy's ``julia_import`` gives its users, without Julia: the enum base class, ``Undef``, and a ``jl`` that says
why it cannot run.

dafpy boots Julia here (through ``juliacall``) and exposes the runtime as ``jl``. pydaf is Daf in Python, so nothing
here starts or imports Julia: ``jl`` is a placeholder whose every use raises :class:`pydaf.DafJuliaUnavailableError`
pointing at pydaf's own Julia bridge (``pydaf.julia``) for code that really needs Julia, and ``jl_version`` is
``None``. ``Undef`` is pydaf's own (``pydaf.Undef``), so it passes straight through to pydaf.

Example:
    >>> from pydaf.dafpy.julia_import import Undef, jl, jl_version
    >>> Undef is __import__("pydaf").Undef, jl_version
    (True, None)
    >>> jl.seval("1 + 1")
    Traceback (most recent call last):
    ...
    pydaf.errors.DafJuliaUnavailableError: pydaf.dafpy runs without Julia: jl.seval is not available
    (for code that needs Julia itself, use pydaf's bridge: pydaf.julia)
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from ..core.undef import Undef, UndefType
from ..errors import DafJuliaUnavailableError

__all__ = ["JlEnum", "Undef", "UndefInitializer", "jl", "jl_version"]

#: dafpy's name for the type of :data:`Undef` (pydaf's ``UndefType``).
UndefInitializer = UndefType


class JlEnum(Enum):
    """Base of dafpy's enums (named values matching a Julia type); ``str`` of a value is its name.

    Example:
        >>> from pydaf.dafpy import LogLevel
        >>> str(LogLevel.Warn)
        'Warn'
    """

    def __str__(self) -> str:
        return str(self.value)


class _NoJulia:
    """Stands for dafpy's Julia runtime: importing it works (so ``from dafpy.julia_import import jl`` does), using it
    raises :class:`~pydaf.DafJuliaUnavailableError` naming what was asked for."""

    def __init__(self, path: str = "jl") -> None:
        self._path = path

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (Python's and tools' probes, e.g. pytest's markers, find nothing here)
            raise AttributeError(f"pydaf.dafpy runs without Julia: {self._path}.{name} is not available")
        return _NoJulia(f"{self._path}.{name}")

    def __call__(self, *_: Any, **__: Any) -> Any:
        raise DafJuliaUnavailableError(
            f"pydaf.dafpy runs without Julia: {self._path} is not available",
            hint="(for code that needs Julia itself, use pydaf's bridge: pydaf.julia)")

    def __repr__(self) -> str:
        return f"<{self._path}: no Julia in pydaf.dafpy>"


#: dafpy's Julia runtime; in pydaf a placeholder that raises :class:`~pydaf.DafJuliaUnavailableError` when used.
jl: Any = _NoJulia()

#: dafpy's ``(major, minor, patch)`` of the Julia it runs; ``None``: no Julia runs here.
jl_version: tuple[int, int, int] | None = None


def _given(**kwargs: Any) -> dict[str, Any]:
    """The keyword arguments that were given: dafpy's ``None`` means "use the default", so it is dropped."""
    return {name: value for name, value in kwargs.items() if value is not None}
