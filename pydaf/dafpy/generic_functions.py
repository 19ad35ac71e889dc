"""dafpy's ``generic_functions``: the handler of inefficient (against the grain) actions and the logger, on Python's
:mod:`logging`.

pydaf logs through the ``pydaf`` logger; :func:`setup_logger` gives it a handler writing to ``sys.stdout`` or
``sys.stderr``, as TanayLabUtilities' ``setup_logger`` does for Julia's logger.

Example:
    >>> import sys
    >>> from pydaf.dafpy import AbnormalHandler, LogLevel, inefficient_action_handler, setup_logger
    >>> previous = inefficient_action_handler(AbnormalHandler.ErrorHandler)
    >>> inefficient_action_handler(previous)
    <AbnormalHandler.ErrorHandler: 'ErrorHandler'>
    >>> setup_logger(sys.stdout, level=LogLevel.Warn, show_time=False)
    >>> logging.getLogger("pydaf").warning("hello")
    W: hello
    >>> setup_logger(sys.stderr, level=LogLevel.Warn)
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from .julia_import import JlEnum

__all__ = ["AbnormalHandler", "LogLevel", "inefficient_action_handler", "setup_logger"]


class AbnormalHandler(JlEnum):
    """What to do on an abnormal but recoverable operation (TanayLabUtilities' ``AbnormalHandler``)."""

    #: Ignore the abnormal operation.
    IgnoreHandler = "IgnoreHandler"
    #: Log a warning for the abnormal operation.
    WarnHandler = "WarnHandler"
    #: Raise an error for the abnormal operation.
    ErrorHandler = "ErrorHandler"


# Julia's default (``GLOBAL_INEFFICIENT_ACTION_HANDLER = WarnHandler``).
_inefficient_action_handler = AbnormalHandler.WarnHandler


def inefficient_action_handler(handler: AbnormalHandler) -> AbnormalHandler:
    """Set the handler of accesses to a matrix against the grain (in the layout that is not stored) and return the
    previous one (``WarnHandler`` at first, as Julia's).

    pydaf's readers and queries pick the stored layout themselves, and relayout (cached) where a query needs the
    other one, so the setting is kept for dafpy's code that sets and restores it.

    Example:
        >>> from pydaf.dafpy import AbnormalHandler, inefficient_action_handler
        >>> previous = inefficient_action_handler(AbnormalHandler.IgnoreHandler)
        >>> inefficient_action_handler(previous)
        <AbnormalHandler.IgnoreHandler: 'IgnoreHandler'>
    """
    global _inefficient_action_handler
    previous = _inefficient_action_handler
    _inefficient_action_handler = AbnormalHandler(handler)
    return previous


class LogLevel(JlEnum):
    """Julia's log levels; an ``int`` (Julia's numbering: ``Debug`` -1000, ``Info`` 0, ``Warn`` 1000, ``Error``
    2000) can be used instead."""

    #: Show debug messages and above.
    Debug = "Debug"
    #: Show informational messages and above.
    Info = "Info"
    #: Show warning messages and above.
    Warn = "Warn"
    #: Show only error messages.
    Error = "Error"


_JULIA_LEVELS = {LogLevel.Debug: -1000, LogLevel.Info: 0, LogLevel.Warn: 1000, LogLevel.Error: 2000}

# Julia's level names' first letters, as TanayLabUtilities' logger prefixes its lines.
_LEVEL_LETTERS = {logging.DEBUG: "D", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E"}


def _python_level(level: LogLevel | int) -> int:
    """Julia's level as Python's: Julia's -1000/0/1000/2000 are Python's DEBUG/INFO/WARNING/ERROR (10/20/30/40)."""
    julia_level = _JULIA_LEVELS[level] if isinstance(level, LogLevel) else int(level)
    return 20 + julia_level // 100


class _JuliaStyleFormatter(logging.Formatter):
    def __init__(self, *, show_time: bool, show_module: bool, show_location: bool) -> None:
        super().__init__()
        self.show_time = show_time
        self.show_module = show_module
        self.show_location = show_location

    def format(self, record: logging.LogRecord) -> str:
        parts = [_LEVEL_LETTERS.get(record.levelno, record.levelname[:1])]
        if self.show_time:
            parts.append(self.formatTime(record, "%Y-%m-%d %H:%M:%S"))
        if self.show_module:
            parts.append(record.name)
        if self.show_location:
            parts.append(f"{record.pathname}:{record.lineno}")
        return f"{' '.join(parts)}: {record.getMessage()}"


def setup_logger(io: TextIO = sys.stderr, *, level: LogLevel | int | None = None, show_time: bool | None = None,
                 show_module: bool | None = None, show_location: bool | None = None) -> None:
    """Log pydaf's messages (the ``pydaf`` logger) to ``io``, which must be ``sys.stdout`` or ``sys.stderr``, from
    ``level`` (default ``Warn``) up, each line prefixed by the level's letter and (by default) the time.

    Example:
        >>> import io, sys
        >>> from pydaf.dafpy import setup_logger
        >>> setup_logger(io.StringIO())
        Traceback (most recent call last):
        ...
        ValueError: not implemented: logging into anything other than stdout and stderr
    """
    if io is not sys.stdout and io is not sys.stderr:
        raise ValueError("not implemented: logging into anything other than stdout and stderr")
    logger = logging.getLogger("pydaf")
    for handler in [handler for handler in logger.handlers if getattr(handler, "_dafpy_setup", False)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(io)
    handler._dafpy_setup = True  # type: ignore[attr-defined]
    handler.setFormatter(_JuliaStyleFormatter(show_time=True if show_time is None else show_time,
                                              show_module=bool(show_module), show_location=bool(show_location)))
    logger.addHandler(handler)
    logger.setLevel(_python_level(LogLevel.Warn if level is None else level))
    logger.propagate = False
