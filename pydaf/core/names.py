"""Data set names (Julia's ``unique_name``) and the validation of property names."""

from __future__ import annotations

import threading

from ..errors import DafNameError, for_daf

_counters: dict[str, int] = {}
_counters_lock = threading.Lock()


def unique_name(prefix: str, separator: str = "#") -> str:
    """A process-unique data set name: the first use of a prefix is the prefix itself, later ones get ``#2``, ``#3``…
    A name containing ``!`` is taken as it is (Julia's convention for names that are unique by construction).

    Example:
        >>> unique_name("cells!"), unique_name("cells!")
        ('cells!', 'cells!')
    """
    if "!" in prefix:
        return prefix
    with _counters_lock:
        count = _counters.get(prefix, 0) + 1
        _counters[prefix] = count
    if count == 1:
        return prefix
    return f"{prefix}{separator}{count}"


RESERVED_VECTORS = ("name", "index")

_FORBIDDEN_CHARACTERS = ("/", "\\", "\0", "\n")


def require_valid_name(name: str, *, what: str, daf_name: str) -> None:
    """Refuse names no storage can hold safely: not a string, empty, ``.``-leading, or with ``/``, ``\\``, NUL or
    newline. (Every backend gets the same rule, so copying between backends never fails on a name.)"""
    if not isinstance(name, str):
        raise DafNameError(for_daf(f"invalid {what} name: {name!r}\n(expected a string)", daf_name))
    if not name or name.startswith(".") or any(character in name for character in _FORBIDDEN_CHARACTERS):
        raise DafNameError(for_daf(
            f"invalid {what} name: {name!r}\n(names must be non-empty, must not start with '.', and must not contain "
            "'/', '\\', NUL or a newline)", daf_name))
