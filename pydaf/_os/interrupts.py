"""Ctrl-C that must not be lost: the command line's SIGINT handler records the interrupt here as well as raising it,
and every point where a conversion commits its result checks the record first.

Python runs a signal handler between bytecodes of whatever code is running, which may be a weakref callback or a
``__del__`` method: an exception raised there is printed ("Exception ignored in ...") and dropped, and the conversion
would go on to replace its destination after the user pressed Ctrl-C. The record survives that.
"""

from __future__ import annotations

import threading

_requested = threading.Event()


class InterruptRequested(KeyboardInterrupt):
    """Ctrl-C, as pydaf's handler raises it. (A plain ``KeyboardInterrupt`` that Python raises while running code for
    an extension module makes the process kill itself with SIGINT at exit, whatever status the command returns;
    CPython flags only that exact class.)"""


def request_interrupt() -> None:
    """Record a Ctrl-C (called by a SIGINT handler).

    Example:
        >>> request_interrupt(); interrupt_requested()
        True
        >>> clear_interrupt(); interrupt_requested()
        False
    """
    _requested.set()


def clear_interrupt() -> None:
    """Forget a recorded Ctrl-C (when the handler that recorded it is removed)."""
    _requested.clear()


def interrupt_requested() -> bool:
    """Whether a Ctrl-C was recorded."""
    return _requested.is_set()


def raise_if_interrupted() -> None:
    """Raise :class:`InterruptRequested` if a Ctrl-C was recorded: called just before a result is committed.

    Example:
        >>> raise_if_interrupted()  # (nothing recorded: returns)
    """
    if _requested.is_set():
        raise InterruptRequested()
