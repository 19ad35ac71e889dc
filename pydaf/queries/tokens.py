"""Query tokens: splitting a query string into value and operator tokens, escaping values (Julia's ``Tokens``).

Value tokens are maximal runs of ``[A-Za-z0-9_.+-]`` or non-ASCII characters that do not start with an operator (so
``M412.08`` and ``-1.5e-3`` are values, while ``. version`` starts with the ``.`` operator); any other character is an
operator character unless escaped with ``\\``. Whitespace and ``# ...`` comments separate tokens and are squashed into
one space, so error messages show the query on one line with ``▲`` markers under the offending token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import quote, unquote

from ..errors import DafQueryError

__all__ = ["Token", "error_at_token", "escape_value", "is_value_char", "tokenize", "unescape_value"]

_SPACE_REGEX = re.compile(r"(?:\s|#[^\n\r]*(?:[\r\n]|$))+", re.MULTILINE)
_VALUE_REGEX = re.compile(r"(?:[0-9a-zA-Z_.+\-]|[^\x00-\x7F])+")
_EMPTY_VALUE = "''"


def is_value_char(character: str) -> bool:
    """Whether a character may appear unescaped in a value token: ``a-z A-Z 0-9 _ . + -`` or any non-ASCII character.

    Example:
        >>> is_value_char("M"), is_value_char(":")
        (True, False)
    """
    return character in "_.+-" or not character.isascii() or character.isalnum()


def escape_value(value: str) -> str:
    """Prefix every character that is not a value character with ``\\``, so ``value`` is one value token.

    Example:
        >>> escape_value("ACTG:Plate1")
        'ACTG\\\\:Plate1'
    """
    return "".join(character if is_value_char(character) else "\\" + character for character in value)


def unescape_value(escaped: str) -> str:
    """Undo :func:`escape_value`.

    Example:
        >>> unescape_value("ACTG\\\\:Plate1")
        'ACTG:Plate1'
    """
    return re.sub(r"\\(.)", r"\1", escaped, flags=re.DOTALL)


def _encode_char(match: re.Match[str]) -> str:
    return quote(match.group(0)[1:], safe="").replace("%", "_")


def encode_expression(expression: str) -> str:
    """Replace every escaped character (and ``_``) with ``_XX`` codes, so escaped characters become value characters.

    Example:
        >>> encode_expression("a\\\\:b_c")
        'a_3Ab_5Fc'
    """
    expression = expression.replace("\\_", "_5C_5F").replace("_", "_5F")
    return re.sub(r"\\.", _encode_char, expression, flags=re.DOTALL)


def decode_expression(encoded: str) -> str:
    """Undo :func:`encode_expression`.

    Example:
        >>> decode_expression("a_3Ab_5Fc")
        'a\\\\:b_c'
    """
    text = encoded.replace("_5C_5F", "\\_").replace("_5F", "\0").replace("%", "%25")
    text = re.sub(r"_(..)", r"\\%\1", text)
    return unquote(text).replace("\0", "_")


def _decode_index(encoded: str, index: int) -> int:
    return len(decode_expression(encoded[:index]))


@dataclass(frozen=True)
class Token:
    """One token of a query: an operator or a value (unescaped), with its place in the (encoded) query string.

    ``first_index``/``last_index`` are 1-based positions in ``encoded_string`` (as in Julia).
    """

    is_operator: bool
    value: str
    token_index: int
    first_index: int
    last_index: int
    encoded_string: str


def tokenize(string: str, operators: re.Pattern[str]) -> list[Token]:
    """Split a query string into tokens; ``operators`` matches one operator at the start (longest first).

    Example:
        >>> [token.value for token in tokenize("@ cell:age # comment", re.compile(r"@|:"))]
        ['@', 'cell', ':', 'age']
    """
    encoded = _SPACE_REGEX.sub(" ", encode_expression(string))
    tokens: list[Token] = []
    position = 0
    while position < len(encoded):
        if encoded[position] == " ":
            position += 1
            continue
        if encoded.startswith(_EMPTY_VALUE, position):
            tokens.append(Token(False, "", len(tokens) + 1, position + 1, position + 2, encoded))
            position += 2
            continue
        # Operators first: ``.`` and ``-`` are also value characters, but ``. version`` and ``>- Sum`` are operators.
        match = operators.match(encoded, position)
        is_operator = True
        if match is None:
            match = _VALUE_REGEX.match(encoded, position)
            is_operator = False
        if match is None or not match.group(0):
            indent = " " * _decode_index(encoded, position)
            character = decode_expression(encoded[position:]).encode("unicode_escape").decode("ascii")[:1]
            raise DafQueryError(f"unexpected character: '{character}'\nin: {decode_expression(encoded)}\n"
                                f"at: {indent}▲")
        text = match.group(0)
        value = unescape_value(decode_expression(text))
        tokens.append(Token(is_operator, value, len(tokens) + 1, position + 1, position + len(text), encoded))
        position += len(text)
    return tokens


def error_at_token(token: Token, message: str, *, at_end: bool = False) -> NoReturn:
    """Raise a :class:`~pydaf.errors.DafQueryError` showing the query and ``▲`` markers under ``token``."""
    if at_end:
        indent = " " * _decode_index(token.encoded_string, token.last_index)
        marker = "▲"
    else:
        indent = " " * _decode_index(token.encoded_string, token.first_index - 1)
        marker = "▲" * len(token.value)
    raise DafQueryError(f"{message}\nin: {decode_expression(token.encoded_string)}\nat: {indent}{marker}")
