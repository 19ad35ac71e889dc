"""Julia's text conventions, in one place: how Julia prints values (``string``/``print``), escapes strings
(``escape_string``) and names element types, so canonical query texts, group names, ``brief`` and error messages are
Julia's, byte for byte. (The name ``pydaf.julia`` is kept for a bridge to Julia itself.)

Example:
    >>> julia_string(1e-5), julia_string(np.float32(0.1)), julia_string(True), julia_string(100000.0)
    ('1.0e-5', '0.1', 'true', '100000.0')
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .storage_types import julia_name

__all__ = ["julia_escape_string", "julia_float_text", "julia_string", "julia_type_name"]


def julia_float_text(value: float | np.floating) -> str:
    """Julia's ``print`` of a float: the shortest digits that round-trip in the value's own precision (a ``float32``
    prints as Julia prints a ``Float32``), laid out as Julia's ``Ryu.writeshortest`` does: positional while the
    decimal point is within ``-4 < point <= 6`` of the first digit, else ``d.ddde±x``.

    Example:
        >>> [julia_float_text(x) for x in (100000.0, 1e6, 1e-4, 1e-5, -0.0, np.float32(1e-4), float("-inf"))]
        ['100000.0', '1.0e6', '0.0001', '1.0e-5', '-0.0', '0.0001', '-Inf']
    """
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Inf" if number > 0 else "-Inf"
    if isinstance(value, np.float32):
        return _julia_layout(np.format_float_scientific(value, unique=True, trim="-"))
    text = repr(number)
    if "e" not in text and abs(number) < 1e6:
        return text  # Python lays out this range as Julia does (``0.0001``, ``100000.0``); the common case, fast
    return _julia_layout(text)


def _julia_layout(text: str) -> str:
    """Julia's layout of the shortest round-trip digits given as ``[-]d[.ddd][e±x]``."""
    mantissa, _, exponent = text.partition("e")
    sign = "-" if mantissa.startswith("-") else ""
    whole, _, fraction = mantissa.lstrip("-").partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    if not significant:
        return f"{sign}0.0"
    # Where the decimal point falls, counted in digits from the first significant one.
    point = len(whole) - (len(digits) - len(significant)) + int(exponent or 0)
    significant = significant.rstrip("0")
    if -4 < point <= 6:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{significant}"
        if point >= len(significant):
            return f"{sign}{significant}{'0' * (point - len(significant))}.0"
        return f"{sign}{significant[:point]}.{significant[point:]}"
    return f"{sign}{significant[0]}.{significant[1:] or '0'}e{point - 1}"


def julia_string(value: Any) -> str:
    """A scalar as Julia's ``string`` prints it (``true``, ``3``, ``1.0``, ``1.0e-5``; strings as they are).

    Example:
        >>> [julia_string(v) for v in (True, np.float32(2), 1e-5, 1234567.0, 3, "x")]
        ['true', '2.0', '1.0e-5', '1.234567e6', '3', 'x']
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return julia_float_text(value)
    return str(value)


_JULIA_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
                  "\f": "\\f", "\v": "\\v", "\x1b": "\\e", "\0": "\\0"}


def julia_escape_string(text: str) -> str:
    """Julia's ``escape_string``: backslashes, quotes and control characters escaped.

    Example:
        >>> print(julia_escape_string('a"b\\n\\x01'))
        a\\"b\\n\\x01
    """
    return "".join(_JULIA_ESCAPES.get(character, f"\\x{ord(character):02x}" if ord(character) < 0x20 or
                                      ord(character) == 0x7F else character) for character in text)


def julia_type_name(value: Any) -> str:
    """The Julia name of the element type of a value or an array (``String`` for strings).

    Example:
        >>> julia_type_name(np.float32(1)), julia_type_name("a"), julia_type_name(np.array([1, 2], np.uint8))
        ('Float32', 'String', 'UInt8')
    """
    dtype = getattr(value, "dtype", None)
    return julia_name(np.asarray(value).dtype if dtype is None else dtype)
