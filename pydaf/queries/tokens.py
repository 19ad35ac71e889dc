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

from ..errors import DafQueryError

__all__ = [
    "Token",
    "error_at_token",
    "escape_hint",
    "escape_value",
    "is_value_char",
    "token_escape_hint",
    "tokenize",
    "unescape_value",
    "word_escape_hint",
]

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
    """Prefix every character that is not a value character with ``\\``, so ``value`` is one value token; the empty
    string is ``''`` (as in Julia). A leading ``.`` is escaped too: unescaped, it would be the ``.`` operator (Julia's
    ``escape_value`` leaves it, so ``.5`` there reads as ``. 5``).

    Example:
        >>> escape_value("ACTG:Plate1"), escape_value(""), escape_value(".5")
        ('ACTG\\\\:Plate1', "''", '\\\\.5')
    """
    if not value:
        return _EMPTY_VALUE
    escaped = "".join(character if is_value_char(character) else "\\" + character for character in value)
    return "\\" + escaped if escaped.startswith(".") else escaped


# For hints: a comparison glued before a value (``=a,b``), and the words of a query (escaped characters included).
_COMPARISON_REGEX = re.compile(r"(?:[!<>]=|!~|[=<>~])")
_WORD_REGEX = re.compile(r"(?:\\.|[^\s\\])+|\\$")
_QUOTES = "\"'"


def escape_hint(value: str, *, quoted: bool = False) -> str:
    """The lines that end a parse error when ``value`` was probably meant as one value: how to write it escaped.

    Example:
        >>> print(escape_hint("T cell"))
        hint: to use "T cell" as one value, write: T\\ cell
        (in values, escape with \\ all but letters, digits, _ . + - and non-ASCII; pydaf.queries.escape_value does it)
    """
    quotes = "values are not quoted; " if quoted else ""
    return (f'hint: {quotes}to use "{value}" as one value, write: {escape_value(value)}\n'
            "(in values, escape with \\ all but letters, digits, _ . + - and non-ASCII; pydaf.queries.escape_value "
            "does it)")


def word_escape_hint(query: str, index: int) -> str:
    """The :func:`escape_hint` for the (space separated) word of the (squashed) ``query`` at the 0-based ``index``,
    if it has characters to escape: a comparison before ``index`` (``donor=a,b``) and an unmatched trailing ``]`` are
    not taken as part of the value. A word starting with a quote hints at the quoted text instead. Else ``""``.

    Example:
        >>> print(word_escape_hint("@ cell [ donor=a,b]", 16).splitlines()[0])
        hint: to use "a,b" as one value, write: a\\,b
        >>> word_escape_hint("@ cell [ donor = a ]", 17)
        ''
    """
    for match in _WORD_REGEX.finditer(query):
        if match.start() <= index < match.end():
            word = match.group(0)
            break
    else:
        return ""
    if word == _EMPTY_VALUE:
        return ""
    if word[0] in _QUOTES:
        end = query.find(word[0], match.start() + 1)
        if end > match.start() + 1:
            return escape_hint(unescape_value(query[match.start() + 1:end]), quoted=True)
    value_start = 0
    for comparison in _COMPARISON_REGEX.finditer(word):  # (``donor=a,b``: the value is what is compared with)
        if comparison.end() <= index - match.start() and not word[:comparison.start()].endswith("\\"):
            value_start = comparison.end()
    word = word[value_start:]
    if word.endswith("]") and not word.endswith("\\]") and "[" not in word:
        word = word[:-1]
    value = unescape_value(word)
    if not value or escape_value(value) == word or not any(is_value_char(character) for character in value):
        return ""
    return escape_hint(value)


def unescape_value(escaped: str) -> str:
    """Undo :func:`escape_value`.

    Example:
        >>> unescape_value("ACTG\\\\:Plate1"), unescape_value("''")
        ('ACTG:Plate1', '')
    """
    if escaped == _EMPTY_VALUE:
        return ""
    return re.sub(r"\\(.)", r"\1", escaped, flags=re.DOTALL)


def _encode(match: re.Match[str]) -> str:
    text = match.group(0)
    if text == "_":
        return "_5F"
    if text == "\\_":
        return "_5C_5F"
    # Every byte is encoded, as Julia's ``escapeuri(c, _ -> false)`` does (``urllib``'s ``quote`` would keep ``. - ~``
    # as they are, so ``\\.`` and ``\\~`` would turn back into operators).
    return "".join(f"_{byte:02X}" for byte in text[1:].encode())


def encode_expression(expression: str) -> str:
    """Replace every escaped character (and ``_``) with ``_XX`` codes, so escaped characters become value characters.

    Example:
        >>> encode_expression("a\\\\:b_c"), encode_expression("a\\\\.b\\\\_c")
        ('a_3Ab_5Fc', 'a_2Eb_5C_5Fc')
    """
    return re.sub(r"\\.|_", _encode, expression, flags=re.DOTALL)


_ENCODED_RUN_REGEX = re.compile(r"(?:_[0-9A-F]{2})+")


def _decode(match: re.Match[str]) -> str:
    text = match.group(0)
    codes = [int(text[index + 1:index + 3], 16) for index in range(0, len(text), 3)]
    decoded: list[str] = []
    escaped = bytearray()  # (the UTF-8 bytes of escaped characters, decoded together)

    def flush() -> None:
        decoded.extend("\\" + character for character in escaped.decode(errors="replace"))
        escaped.clear()

    index = 0
    while index < len(codes):
        if codes[index] == 0x5F:
            flush()
            decoded.append("_")
        elif codes[index] == 0x5C and index + 1 < len(codes) and codes[index + 1] == 0x5F:
            flush()
            decoded.append("\\_")
            index += 1
        else:
            escaped.append(codes[index])
        index += 1
    flush()
    return "".join(decoded)


def decode_expression(encoded: str) -> str:
    """Undo :func:`encode_expression`.

    Example:
        >>> decode_expression("a_3Ab_5Fc"), decode_expression("a_2Eb_5C_5Fc_C3_A9")
        ('a\\\\:b_c', 'a\\\\.b\\\\_c\\\\é')
    """
    return _ENCODED_RUN_REGEX.sub(_decode, encoded)


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
            hint = word_escape_hint(decode_expression(encoded), len(indent))
            raise DafQueryError(f"unexpected character: '{character}'\nin: {decode_expression(encoded)}\n"
                                f"at: {indent}▲" + (f"\n{hint}" if hint else ""))
        text = match.group(0)
        value = unescape_value(decode_expression(text))
        tokens.append(Token(is_operator, value, len(tokens) + 1, position + 1, position + len(text), encoded))
        position += len(text)
    return tokens


def token_escape_hint(token: Token) -> str:
    """The :func:`word_escape_hint` for the word of ``token``, or else of the word before it (``a.* ]`` fails at the
    ``]``, but it is ``a.*`` that needs escaping).

    Example:
        >>> tokens = tokenize("@ cell [ donor ~ a.* ]", re.compile(r"@|\\[|\\]|~|\\*"))
        >>> print(token_escape_hint(tokens[-1]).splitlines()[0])
        hint: to use "a.*" as one value, write: a.\\*
    """
    query = decode_expression(token.encoded_string)
    index = _decode_index(token.encoded_string, token.first_index - 1)
    hint = word_escape_hint(query, index)
    if not hint:
        before = query[:index].rstrip()
        if before and len(before) < index:
            hint = word_escape_hint(query, len(before) - 1)
    return hint


def error_at_token(token: Token, message: str, *, at_end: bool = False, hint: str = "") -> NoReturn:
    """Raise a :class:`~pydaf.errors.DafQueryError` showing the query and ``▲`` markers under ``token`` (then the
    ``hint`` lines, if any)."""
    if at_end:
        indent = " " * _decode_index(token.encoded_string, token.last_index)
        marker = "▲"
    else:
        indent = " " * _decode_index(token.encoded_string, token.first_index - 1)
        marker = "▲" * len(token.value)
    raise DafQueryError(f"{message}\nin: {decode_expression(token.encoded_string)}\nat: {indent}{marker}"
                        + (f"\n{hint}" if hint else ""))
