"""Values written in query strings: operation parameters (``% Log base 2``), ``|| value Type`` and their types, parsed
as Julia's ``parse`` does, with Julia's messages (pointing with ``▲`` at the offending token).

Example:
    >>> guess_typed_value("12"), guess_typed_value("1e-3"), guess_typed_value("blue")
    (np.int64(12), np.float64(0.001), 'blue')
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from ..julia_text import julia_escape_string
from ..storage_types import DTYPES_BY_NAME, julia_name
from .tokens import Token, error_at_token

__all__ = [
    "AUTO_TYPE",
    "REQUIRED",
    "error_invalid_parameter_value",
    "guess_typed_value",
    "number_type_of",
    "parse_float_type_value",
    "parse_int_type_value",
    "parse_number_type_value",
    "parse_number_value",
    "parse_parameter_value",
    "parse_typed",
]

#: The ``type`` parameter value that means "the operation's default type" (Julia's ``auto``).
AUTO_TYPE = "auto"

#: The default of a required parameter of :func:`parse_parameter_value`.
REQUIRED: Any = object()


def number_type_of(name: str) -> np.dtype | None:
    """The numpy dtype of a number type name (``Float32``, ``uint8``, ``Int``, ...; ``None`` for ``auto``), or raise
    ``KeyError`` (``String`` is not a number type).

    Example:
        >>> number_type_of("uint8"), number_type_of("auto")
        (dtype('uint8'), None)
    """
    if name == AUTO_TYPE:
        return None
    return DTYPES_BY_NAME[name]


def error_invalid_parameter_value(operation_name: Token, parameter_name: str, parameter_value: Token,
                                  must_be: str) -> NoReturn:
    """Raise Julia's error for an invalid operation parameter value, pointing at the value in the query.

    Example:
        >>> import re
        >>> from pydaf.queries.tokens import tokenize
        >>> tokens = tokenize("% Log base -2", re.compile("%"))
        >>> try:
        ...     error_invalid_parameter_value(tokens[1], "base", tokens[3], "positive")
        ... except Exception as error:
        ...     print(error)
        invalid value: "-2"
        value must be: positive
        for the parameter: base
        for the operation: Log
        in: % Log base -2
        at:            ▲▲
    """
    error_at_token(parameter_value, f'invalid value: "{julia_escape_string(parameter_value.value)}"\n'
                                    f"value must be: {must_be}\n"
                                    f"for the parameter: {parameter_name}\n"
                                    f"for the operation: {operation_name.value}")


def parse_number_type_value(operation_name: Token, parameter_name: str, parameter_value: Token) -> np.dtype | None:
    """Parse a ``type`` parameter: ``{B,b}ool``, ``{I,i,UI,ui}nt{8,16,32,64}``, ``{I,i}nt`` (``Int64``),
    ``{F,f}loat{32,64}``, or ``auto`` (``None``: the operation's default).

    Example:
        >>> import re
        >>> from pydaf.queries.tokens import tokenize
        >>> tokens = tokenize("% Abs type uint8", re.compile("%"))
        >>> parse_number_type_value(tokens[1], "type", tokens[3])
        dtype('uint8')
    """
    try:
        return number_type_of(parameter_value.value)
    except KeyError:
        error_invalid_parameter_value(operation_name, parameter_name, parameter_value, "a number type")


def parse_int_type_value(operation_name: Token, parameter_name: str, parameter_value: Token) -> np.dtype | None:
    """Like :func:`parse_number_type_value`, but only integer (signed or unsigned) types."""
    dtype = parse_number_type_value(operation_name, parameter_name, parameter_value)
    if dtype is None or dtype.kind not in "iu":
        error_invalid_parameter_value(operation_name, parameter_name, parameter_value, "an integer type")
    return dtype


def parse_float_type_value(operation_name: Token, parameter_name: str, parameter_value: Token) -> np.dtype | None:
    """Like :func:`parse_number_type_value`, but only float types."""
    dtype = parse_number_type_value(operation_name, parameter_name, parameter_value)
    if dtype is None or dtype.kind != "f":
        error_invalid_parameter_value(operation_name, parameter_name, parameter_value, "a float type")
    return dtype


# What Julia's ``parse`` accepts for integers (with base prefixes) and floats (decimal, hex, Inf, NaN).
_INTEGER_REGEX = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|[0-9]+)")
_FLOAT_REGEX = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)",
                          re.IGNORECASE)
_HEX_FLOAT_REGEX = re.compile(r"([+-]?)(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)")
_BOOLS = {"true": np.True_, "false": np.False_, "1": np.True_, "0": np.False_}


def _parse_integer(text: str) -> int | None:
    if _INTEGER_REGEX.fullmatch(text) is None:
        return None
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if digits[:2].lower() in ("0x", "0b", "0o"):
        return sign * int(digits, 0)
    return sign * int(digits, 10)


def _parse_float(text: str) -> float | None:
    if _FLOAT_REGEX.fullmatch(text) is not None:
        return float(text)
    match = _HEX_FLOAT_REGEX.fullmatch(text)
    if match is not None:
        body = match.group(2)
        value = float.fromhex(body if "p" in body.lower() else body + "p0")
        return -value if match.group(1) == "-" else value
    return None


def parse_typed(text: str, dtype: np.dtype) -> Any:
    """``text`` as a value of ``dtype`` like Julia's ``parse(T, text)``, or ``None`` if it does not parse or fit.

    Example:
        >>> parse_typed("0x10", np.dtype("uint8")), parse_typed("300", np.dtype("uint8"))
        (np.uint8(16), None)
    """
    if dtype.kind == "b":
        return _BOOLS.get(text)
    if dtype.kind in "iu":
        value = _parse_integer(text)
        if value is None:
            return None
        info = np.iinfo(dtype)
        return dtype.type(value) if info.min <= value <= info.max else None
    number = _parse_float(text)
    if number is None:
        return None
    with np.errstate(over="ignore"):
        return dtype.type(number)


def parse_number_value(operation_name: Token, parameter_name: str, parameter_value: Token, dtype: Any) -> Any:
    """Parse a numeric parameter value as a numpy scalar of ``dtype`` (``e`` and ``pi`` are the constants).

    Example:
        >>> import re
        >>> from pydaf.queries.tokens import tokenize
        >>> tokens = tokenize("% Log base 2", re.compile("%"))
        >>> parse_number_value(tokens[1], "base", tokens[3], np.float64), parse_number_value(
        ...     tokens[1], "base", tokens[3], np.int32)
        (np.float64(2.0), np.int32(2))
    """
    dtype = np.dtype(dtype)
    text = parameter_value.value
    if text in ("e", "pi") and dtype.kind == "f":
        value = dtype.type(math.e if text == "e" else math.pi)
    else:
        value = parse_typed(text, dtype)
    if value is None:
        error_invalid_parameter_value(operation_name, parameter_name, parameter_value, f"a valid {julia_name(dtype)}")
    return value


def parse_parameter_value(parse_value: Callable[[Token], Any], operation_name: Token, operation_kind: str,
                          parameters_values: dict[str, Token], parameter_name: str, default: Any) -> Any:
    """The value of an operation parameter: ``parse_value`` of its token if given (and not ``None``), else the
    ``default``; if the default is :data:`REQUIRED`, raise Julia's ``missing required parameter`` error.

    Example:
        >>> import re
        >>> from pydaf.queries.tokens import tokenize
        >>> tokens = tokenize(">> Quantile", re.compile(">>"))
        >>> try:
        ...     parse_parameter_value(float, tokens[1], "eltwise", {}, "p", REQUIRED)
        ... except Exception as error:
        ...     print(error)
        missing required parameter: p
        for the eltwise operation: Quantile
        in: >> Quantile
        at:    ▲▲▲▲▲▲▲▲
    """
    token = parameters_values.get(parameter_name)
    value = None if token is None else parse_value(token)
    if value is not None:
        return value
    if default is not REQUIRED:
        return default
    error_at_token(operation_name, f"missing required parameter: {parameter_name}\n"
                                   f"for the {operation_kind} operation: {operation_name.value}")


_CONSTANTS = {"true": np.True_, "false": np.False_, "e": np.float64(math.e), "pi": np.float64(math.pi)}


def guess_typed_value(value: str) -> Any:
    """Guess the typed value a string represents (for ``|| value`` without a type): ``true``/``false`` are ``Bool``,
    integers ``Int64``, floats (and ``e``, ``pi``) ``Float64``, anything else stays a string.

    Example:
        >>> guess_typed_value("true"), guess_typed_value("12"), guess_typed_value("1e-3"), guess_typed_value("pi")
        (np.True_, np.int64(12), np.float64(0.001), np.float64(3.141592653589793))
        >>> guess_typed_value("1.0.1")
        '1.0.1'
    """
    if value in _CONSTANTS:
        return _CONSTANTS[value]
    integer = parse_typed(value, np.dtype(np.int64))
    if integer is not None:
        return integer
    number = parse_typed(value, np.dtype(np.float64))
    if number is not None:
        return number
    return str(value)
