"""Data set names (Julia's ``unique_name``) and the validation of property names.

Two rules, both applied by the reader/writer layer (never by a backend), to every axis, scalar, vector and matrix name
of every call:

- :func:`require_valid_name`, for names being *created* (``set_*``, ``add_axis``, the ``empty_*`` builders): a
  non-empty string of Unicode text (no lone surrogate: every format stores names as UTF-8), not starting with ``.``,
  without ``/``, ``\\``, NUL or a newline, so every backend can hold it and copies between backends never fail on a
  name (each format also checks its own limits: FilesDaf's file-name length);
- :func:`require_lookup_name`, for names being *looked up* (``get_*``, ``has_*``, ``delete_*``, the axes of every
  call, the names a query uses): a non-empty string of Unicode text other than ``.`` and ``..``, without ``/``,
  ``\\`` or NUL. Such a
  name can only ever address one property of one data set, in any backend (in HDF5 ``/`` starts a path and ``.`` is
  the group itself; in a directory they escape it). Names that a store may legitimately hold but pydaf does not
  create (a leading ``.``, a newline, as a file written elsewhere may have) stay readable and deletable.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import DafNameError

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


def require_valid_name(name: Any, *, what: str, daf_name: str) -> None:
    """Refuse names no storage can hold safely: not a string, empty, ``.``-leading, or with ``/``, ``\\``, NUL or
    newline. (Every backend gets the same rule, so copying between backends never fails on a name.)

    Example:
        >>> require_valid_name("age", what="vector", daf_name="example")
        >>> require_valid_name(".age", what="vector", daf_name="example")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafNameError: invalid vector name: '.age'
        (names must be non-empty, must not start with '.', and must not contain '/', '\\', NUL or a newline)
        in the daf data: example
    """
    if is_valid_name(name):
        return
    if not isinstance(name, str):
        raise DafNameError(f"invalid {what} name: {name!r}\n(expected a string)", daf_name=daf_name)
    if not is_text(name):
        raise DafNameError(_not_text(name, what), daf_name=daf_name)
    raise DafNameError(
        f"invalid {what} name: {name!r}\n(names must be non-empty, must not start with '.', and must not contain "
        "'/', '\\', NUL or a newline)", daf_name=daf_name)


def is_text(name: str) -> bool:
    """Whether a string is Unicode text that UTF-8 can encode (a lone surrogate, as ``os.fsdecode`` makes of bytes
    that are not UTF-8, is not).

    Example:
        >>> is_text("âge"), is_text("a\\udc80")
        (True, False)
    """
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_text(name: str, what: str) -> str:
    position = next(index for index, character in enumerate(name) if not is_text(character))
    return (f"invalid {what} name: {name!r}\n(it holds a lone surrogate {name[position]!r} at the position "
            f"{position}, which no format can store: names are UTF-8 text)")


def is_valid_name(name: Any) -> bool:
    """Whether a new property may have this name (:func:`require_valid_name` without the error).

    Example:
        >>> is_valid_name("age"), is_valid_name("a/b"), is_valid_name(3)
        (True, False, False)
    """
    return isinstance(name, str) and bool(name) and not name.startswith(".") and not any(
        character in name for character in _FORBIDDEN_CHARACTERS) and is_text(name)


def require_lookup_name(name: Any, *, what: str, daf_name: str) -> None:
    """Refuse names that could address something other than one property of this data set: not a string, empty,
    ``.`` or ``..``, or with ``/``, ``\\`` or NUL (see the module docstring).

    Example:
        >>> require_lookup_name(".age", what="vector", daf_name="example")  # may exist in a file written elsewhere
        >>> require_lookup_name("../../age", what="vector", daf_name="example")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafNameError: invalid vector name: '../../age'
        (names must be non-empty strings other than '.' and '..', and must not contain '/', '\\' or NUL)
        in the daf data: example
    """
    # The common case first: a handful of C-level substring tests (this runs on every call of the API).
    if type(name) is str and name and "/" not in name and "\\" not in name and "\0" not in name \
            and name != "." and name != ".." and is_text(name):
        return
    if not isinstance(name, str):
        raise DafNameError(f"invalid {what} name: {name!r}\n(expected a string)", daf_name=daf_name)
    if not is_text(name):
        raise DafNameError(_not_text(name, what), daf_name=daf_name)
    if not name or name in (".", "..") or any(character in name for character in ("/", "\\", "\0")):
        raise DafNameError(
            f"invalid {what} name: {name!r}\n(names must be non-empty strings other than '.' and '..', and must not "
            "contain '/', '\\' or NUL)", daf_name=daf_name)
