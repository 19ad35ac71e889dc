"""The errors of the Julia bridge."""

from __future__ import annotations

from ..errors import DafError


class DafJuliaUnavailableError(DafError, RuntimeError):
    """No usable Julia for the bridge: no Julia executable was found (pydaf never downloads one), the Julia project
    is not instantiated, ``juliacall`` is not installed, or Julia could not load DataAxesFormats. The message says
    what was looked at and how to fix it.

    Example:
        >>> import pydaf
        >>> issubclass(DafJuliaUnavailableError, pydaf.DafError)
        True
    """


class DafJuliaError(DafError):
    """An error raised by Julia (DataAxesFormats.jl) while running something for pydaf; the message is Julia's."""


class DafJuliaVersionError(DafJuliaUnavailableError, DafJuliaError):
    """juliacall and the Julia project's PythonCall are not the matching pair (juliacall X.Y.Z runs only with
    PythonCall X.Y.Z), or the project has no PythonCall: Julia is not started. The message names both versions and how
    to install the matching pair. A :class:`DafJuliaUnavailableError` (the bridge can't start) and a
    :class:`DafJuliaError`.

    Example:
        >>> issubclass(DafJuliaVersionError, DafJuliaUnavailableError), issubclass(DafJuliaVersionError, DafJuliaError)
        (True, True)
    """
