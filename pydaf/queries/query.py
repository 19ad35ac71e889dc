"""Query operations (the builders), query sequences, their canonical text, and parsing query strings.

A query is a sequence of operations; ``str(query)`` is its canonical text (used in error messages and as the cache key)
and ``parse_query`` turns a string back into a sequence. Builders and strings mix freely with ``|`` (Julia's ``|>``):
``Axis("cell") | ": age"`` is ``@ cell : age``.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import regex

from ..errors import DafQueryError
from ..hints import close_names, closest_first, listed_names
from ..julia_text import julia_string, julia_type_name
from .base import ComputationOperation, EltwiseOperation, QueryOperation, ReductionOperation
from .registry import ELTWISE_OPERATIONS, REDUCTION_OPERATIONS
from .tokens import (
    Token,
    decode_expression,
    error_at_token,
    escape_hint,
    escape_value,
    token_escape_hint,
    tokenize,
)
from .values import guess_typed_value, parse_number_type_value, parse_number_value

__all__ = [
    "AndMask",
    "AndNegatedMask",
    "AsAxis",
    "Axis",
    "BeginMask",
    "BeginNegatedMask",
    "CountBy",
    "EndMask",
    "GroupBy",
    "GroupColumnsBy",
    "GroupRowsBy",
    "IfMissing",
    "IfNot",
    "IsEqual",
    "IsGreater",
    "IsGreaterEqual",
    "IsLess",
    "IsLessEqual",
    "IsMatch",
    "IsNotEqual",
    "IsNotMatch",
    "LookupMatrix",
    "LookupScalar",
    "LookupVector",
    "Names",
    "OrMask",
    "OrNegatedMask",
    "Query",
    "QuerySequence",
    "ReduceToColumn",
    "ReduceToRow",
    "SquareColumnIs",
    "SquareRowIs",
    "XorMask",
    "XorNegatedMask",
    "as_query_sequence",
    "compile_regex",
    "full_matches",
    "glued_value_hint",
    "parse_query",
]


class Query(QueryOperation):
    """A complete query (or a fragment that can stand alone): a :class:`QuerySequence`, :class:`Names`,
    :class:`Axis`, :class:`AsAxis` or :class:`LookupScalar`."""


class QuerySequence(Query, composes=True):
    """A sequence of query operations: the parsed form of a query string.

    Example:
        >>> str(QuerySequence(Axis("cell"), LookupVector("age")))
        '@ cell : age'
    """

    def __init__(self, *operations: QueryOperation | QuerySequence | str) -> None:
        flat: list[QueryOperation] = []
        for operation in operations:
            flat.extend(as_query_sequence(operation).operations)
        self.operations: tuple[QueryOperation, ...] = tuple(flat)

    def __str__(self) -> str:
        # (Made once: a sequence's operations never change once it is complete, and the text is the key of every
        # query's cache entry, looked up on each call.)
        text = self.__dict__.get("_text")
        if text is None:
            text = self._text = " ".join(operation_text(operation) for operation in self.operations)
        return text

    def __repr__(self) -> str:
        return f"QuerySequence({str(self)!r})"


def operation_text(operation: QueryOperation) -> str:
    return str(operation)


def as_query_sequence(query: QueryOperation | str) -> QuerySequence:
    """A query (string, operation or sequence) as a :class:`QuerySequence`."""
    if isinstance(query, QuerySequence):
        return query
    if isinstance(query, str):
        return _parsed_sequence(query)
    if isinstance(query, QueryOperation):
        return _sequence_of([query])
    raise DafQueryError(f"not a query: {query!r}")


@functools.lru_cache(maxsize=4096)
def _parsed_sequence(query: str) -> QuerySequence:
    """Parsed query strings are reused (operations are never modified after they are built)."""
    parsed = parse_query(query)
    return parsed if isinstance(parsed, QuerySequence) else _sequence_of([parsed])


def _sequence_of(operations: list[QueryOperation]) -> QuerySequence:
    sequence = QuerySequence()
    sequence.operations = tuple(operations)
    return sequence


class _Named(QueryOperation):
    """An operation with one (escaped) name operand, printed as ``<operator> <name>``."""

    operator = ""
    name_is_optional = False

    def __init__(self, property_name: str | None = None) -> None:
        if not isinstance(property_name, str) and not (property_name is None and self.name_is_optional):
            raise DafQueryError(f"{type(self).__name__} needs a name, not: {property_name!r}")
        self.property_name = property_name

    def __str__(self) -> str:
        if self.property_name is None:
            return self.operator
        return f"{self.operator} {escape_value(self.property_name)}"


class _OptionalNamed(QueryOperation):
    operator = ""

    def __init__(self, axis_name: str | None = None) -> None:
        self.axis_name = axis_name

    def __str__(self) -> str:
        return self.operator if self.axis_name is None else f"{self.operator} {escape_value(self.axis_name)}"


class Names(Query):
    """``?``: ask for a set of names (scalars, axes, vectors of an axis, matrices of two axes).

    Example:
        >>> str(Axis("cell") | Names())
        '@ cell ?'
    """

    def __str__(self) -> str:
        return "?"


class Axis(_OptionalNamed, Query):
    """``@ axis``: start from an axis (its entries), or pick an axis in ``@ axis = entry`` (``@`` alone: axis names).

    Example:
        >>> str(Axis("cell"))
        '@ cell'
    """

    operator = "@"


class AsAxis(_OptionalNamed, Query):
    """``=@ [axis]``: the values are entries of an axis (by default, named by the property).

    Example:
        >>> str(AsAxis("type"))
        '=@ type'
    """

    operator = "=@"


class LookupScalar(_Named, Query):
    """``. name``: look up a scalar property.

    Example:
        >>> str(LookupScalar("version"))
        '. version'
    """

    operator = "."
    name_is_optional = True  # without a name, followed by ``?``: ask for the names


class LookupVector(_Named):
    """``: name``: look up a vector property of the current axis (or of the axis the values are entries of).

    Example:
        >>> str(Axis("cell") | LookupVector("age"))
        '@ cell : age'
    """

    operator = ":"
    name_is_optional = True  # without a name, followed by ``?``: ask for the names


class LookupMatrix(_Named):
    """``:: name``: look up a matrix property.

    Example:
        >>> str(Axis("cell") | Axis("gene") | LookupMatrix("UMIs"))
        '@ cell @ gene :: UMIs'
    """

    operator = "::"
    name_is_optional = True  # without a name, followed by ``?``: ask for the names


class IfMissing(QueryOperation):
    """``|| value [Type]``: the value to use for a missing property, or for reducing empty data.

    Example:
        >>> str(IfMissing(0)), str(IfMissing(np.float32(1.5))), str(IfMissing("1"))
        ('|| 0', '|| 1.5', '|| 1 String')
    """

    def __init__(self, default_value: Any) -> None:
        if isinstance(default_value, bool):
            default_value = np.bool_(default_value)
        elif isinstance(default_value, int):
            default_value = np.int64(default_value)
        elif isinstance(default_value, float):
            default_value = np.float64(default_value)
        self.default_value = default_value

    def __str__(self) -> str:
        text = julia_string(self.default_value)
        guessed = guess_typed_value(text)
        same = not isinstance(guessed, str) if not isinstance(self.default_value, str) else isinstance(guessed, str)
        if same and guessed == self.default_value:
            return f"|| {escape_value(text)}"
        return f"|| {escape_value(text)} {julia_type_name(self.default_value)}"


class IfNot(QueryOperation):
    """``?? [value]``: before a chained lookup, drop entries whose key is empty (or give them a final value).

    Example:
        >>> str(IfNot()), str(IfNot("blue"))
        ('??', '?? blue')
    """

    def __init__(self, final_value: Any = None) -> None:
        self.final_value = final_value

    def __str__(self) -> str:
        return "??" if self.final_value is None else f"?? {escape_value(julia_string(self.final_value))}"


class BeginMask(_Named):
    """``[ name``: begin a mask of the current axis by a property."""

    operator = "["


class BeginNegatedMask(_Named):
    """``[ ! name``: begin a mask by the negation of a property."""

    operator = "[ !"


class EndMask(QueryOperation):
    """``]``: apply the mask."""

    def __str__(self) -> str:
        return "]"


class _MaskOperation(_Named):
    """Combine the mask so far with another property, strictly left to right."""

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class AndMask(_MaskOperation):
    """``& name``."""

    operator = "&"

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return first & second


class AndNegatedMask(_MaskOperation):
    """``& ! name``."""

    operator = "& !"

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return first & ~second


class OrMask(_MaskOperation):
    """``| name``."""

    operator = "|"

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return first | second


class OrNegatedMask(_MaskOperation):
    """``| ! name``."""

    operator = "| !"

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return first | ~second


class XorMask(_MaskOperation):
    """``^ name``."""

    operator = "^"

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return first ^ second


class XorNegatedMask(_MaskOperation):
    """``^ ! name``."""

    operator = "^ !"

    def combine(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return first ^ ~second


class _Comparison(QueryOperation):
    """Compare each value with a constant, giving booleans."""

    operator = ""

    def __init__(self, comparison_value: Any) -> None:
        self.comparison_value = comparison_value

    def __str__(self) -> str:
        return f"{self.operator} {escape_value(julia_string(self.comparison_value))}"

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        raise NotImplementedError


class IsLess(_Comparison):
    """``< value``."""

    operator = "<"

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return values < value


class IsLessEqual(_Comparison):
    """``<= value``."""

    operator = "<="

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return values <= value


class IsEqual(_Comparison):
    """``= value`` (also picks an entry: ``@ axis = entry``)."""

    operator = "="

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return values == value


class IsNotEqual(_Comparison):
    """``!= value``."""

    operator = "!="

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return values != value


class IsGreaterEqual(_Comparison):
    """``>= value``."""

    operator = ">="

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return values >= value


class IsGreater(_Comparison):
    """``> value``."""

    operator = ">"

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return values > value


#: A ``~``/``!~`` comparison may run for this long, plus :data:`REGEX_SECONDS_PER_VALUE` per distinct value, before it
#: fails. A backtracking engine (Julia's PCRE, Python's ``re``) takes exponential time on some patterns and strings
#: (``(a|a)+`` against ``aaa…ab``), all the while holding the data set's read lock; linear patterns take about 2 us a
#: value, so the limit only stops runaway matching.
REGEX_SECONDS = 1.0

#: See :data:`REGEX_SECONDS`.
REGEX_SECONDS_PER_VALUE = 1e-4


#: The largest count of a ``{n}``/``{n,m}`` quantifier: PCRE's (Julia refuses larger ones: "number too big in {}
#: quantifier").
REGEX_MAX_REPEAT = 65535

#: The largest size of a regular expression once its repetitions are expanded (atoms times the counts of the
#: quantifiers around them): the ``regex`` module expands ``(a{1000}){1000}`` into a million nodes (gigabytes, and
#: seconds, before it fails), as PCRE does before refusing it ("regular expression is too large").
REGEX_MAX_SIZE = 1 << 17

# What an empty group weighs: the regex module compiles ``(){n}`` in time cubic in n (8000: 2 s; 65535: minutes).
_EMPTY_GROUP_SIZE = 64

_QUANTIFIER = re.compile(r"\{\s*(\d*)\s*(?:(,)\s*(\d*)\s*)?\}")
_BRACED_ESCAPES = frozenset("pPNxgkuUo")


def _regex_size_problem(pattern: str) -> str | None:
    """Why ``pattern`` is too large to compile (a repetition count above :data:`REGEX_MAX_REPEAT`, or an expanded size
    above :data:`REGEX_MAX_SIZE`), else ``None``. A linear scan without recursion (however deep the groups nest):
    escapes, character classes and comments count as one atom; a group weighs what it holds."""
    stack: list[tuple[int, int]] = []  # (size before the group, size of the atom before it)
    size = last = 0
    index, length = 0, len(pattern)
    while index < length:
        character = pattern[index]
        start = index
        index += 1
        if character == "\\":
            if index < length and pattern[index] in _BRACED_ESCAPES and pattern.startswith("{", index + 1):
                closing = pattern.find("}", index + 1)
                index = length if closing < 0 else closing + 1
            else:
                index += 1
        elif character == "[":
            index += 1 if pattern.startswith("^", index) else 0
            index += 1 if pattern.startswith("]", index) else 0
            while index < length and pattern[index] != "]":
                index += 2 if pattern[index] == "\\" else 1
            index += 1
        elif character == "(" and pattern.startswith("?#", index):
            closing = pattern.find(")", index)
            index = length if closing < 0 else closing + 1
            continue
        elif character == "(":
            stack.append((size, last))
            size = last = 0
            continue
        elif character == ")" and stack:
            inner = size
            size, _ = stack.pop()
            last = inner or _EMPTY_GROUP_SIZE
            size += last
            continue
        elif character in "*+?":
            continue  # (a quantifier that repeats at most as many times as the atom is matched: no expansion)
        elif character == "{":
            match = _QUANTIFIER.match(pattern, start)
            if match is not None and (match.group(1) or match.group(3)):
                counts = [int(text) for text in (match.group(1), match.group(3)) if text]
                if max(counts) > REGEX_MAX_REPEAT:
                    return f"number too big in {{}} quantifier: {max(counts)} (at most {REGEX_MAX_REPEAT})"
                size += last * (max(counts) - 1) if last else 0
                last *= max(counts)
                index = match.end()
                if size > REGEX_MAX_SIZE:
                    return f"regular expression is too large (more than {REGEX_MAX_SIZE} expanded atoms)"
                continue
        last = 1
        size += 1
        if size > REGEX_MAX_SIZE:
            return f"regular expression is too large (more than {REGEX_MAX_SIZE} expanded atoms)"
    return None


def compile_regex(pattern: str) -> regex.Pattern:
    """Compile the regular expression of a ``~``/``!~`` comparison (the ``regex`` module: Python's ``re`` syntax plus
    much of PCRE's, and a time limit per match); raises ``regex.error`` for an invalid pattern, and for one too large
    to compile in bounded memory (a count above :data:`REGEX_MAX_REPEAT`, nested counts expanding beyond
    :data:`REGEX_MAX_SIZE`; Julia's PCRE refuses these too).

    Example:
        >>> compile_regex(r"\\p{Lu}+").fullmatch("ABC") is not None
        True
        >>> compile_regex("a{1000000000}")
        Traceback (most recent call last):
        ...
        regex._regex_core.error: number too big in {} quantifier: 1000000000 (at most 65535)
    """
    problem = _regex_size_problem(pattern)
    if problem is not None:
        raise regex.error(problem)
    try:
        return regex.compile(pattern)
    except (MemoryError, OverflowError, RecursionError, ValueError) as error:  # (what the engine raises untyped)
        raise regex.error(f"can't compile: {type(error).__name__}: {error}") from None


def full_matches(pattern: regex.Pattern, values: np.ndarray) -> np.ndarray:
    """Whether each string fully matches ``pattern``. Each distinct string is matched once, and all of them within
    the time limit (:data:`REGEX_SECONDS`), else ``TimeoutError``.

    Example:
        >>> full_matches(compile_regex("a+"), np.array(["aa", "ab", "aa"], dtype=object)).tolist()
        [True, False, True]
    """
    import pandas as pd  # (lazily: pandas takes a while to import)

    codes, uniques = pd.factorize(np.asarray(values, dtype=object).ravel(), use_na_sentinel=False)
    deadline = time.monotonic() + REGEX_SECONDS + REGEX_SECONDS_PER_VALUE * len(uniques)
    matches = np.empty(len(uniques), dtype=bool)
    for index, text in enumerate(uniques):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        matches[index] = pattern.fullmatch(text, timeout=remaining) is not None
    return matches[codes].reshape(np.shape(values))


class IsMatch(_Comparison):
    """``~ regex``: the (string) value fully matches the regular expression."""

    operator = "~"

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return full_matches(value, values)


class IsNotMatch(_Comparison):
    """``!~ regex``: the (string) value does not fully match the regular expression."""

    operator = "!~"

    def compare(self, values: np.ndarray, value: Any) -> np.ndarray:
        return ~full_matches(value, values)


class SquareColumnIs(QueryOperation):
    """``@| entry``: the column of a square matrix."""

    def __init__(self, comparison_value: str) -> None:
        self.comparison_value = comparison_value

    def __str__(self) -> str:
        return f"@| {escape_value(self.comparison_value)}"


class SquareRowIs(QueryOperation):
    """``@- entry``: the row of a square matrix."""

    def __init__(self, comparison_value: str) -> None:
        self.comparison_value = comparison_value

    def __str__(self) -> str:
        # Julia prints ``@|`` here (a typo that makes the two cache keys collide); we print what was meant.
        return f"@- {escape_value(self.comparison_value)}"


class GroupBy(_Named):
    """``/ name``: group vector entries by a property; must end with ``>> Reduction``."""

    operator = "/"


class GroupColumnsBy(_Named):
    """``|/ name``: group matrix columns by a property; must end with ``>| Reduction``."""

    operator = "|/"


class GroupRowsBy(_Named):
    """``-/ name``: group matrix rows by a property; must end with ``>- Reduction``."""

    operator = "-/"


class CountBy(_Named):
    """``* name``: count each combination of the values with another property's values."""

    operator = "*"


class _ReduceTo(QueryOperation):
    operator = ""

    def __init__(self, reduction_operation: ReductionOperation) -> None:
        if not isinstance(reduction_operation, ReductionOperation):
            raise DafQueryError(f"{type(self).__name__} needs a reduction operation, not: {reduction_operation!r}")
        self.reduction_operation = reduction_operation

    def __str__(self) -> str:
        text = str(self.reduction_operation)
        return self.operator + text[len(ReductionOperation.operator):]


class ReduceToColumn(_ReduceTo):
    """``>| Reduction``: reduce each row of a matrix to one value (a column)."""

    operator = ">|"


class ReduceToRow(_ReduceTo):
    """``>- Reduction``: reduce each column of a matrix to one value (a row)."""

    operator = ">-"


class _NotModifier(QueryOperation):
    """A ``!`` that does not follow ``[``, ``&``, ``|`` or ``^`` (never valid)."""

    def __str__(self) -> str:
        return "!"


QUERY_OPERATIONS_REGEX = re.compile(
    r"(?:[!<>]=|!~|[|-]/|[&^|]!|\?\?|@[-|]|=@|::|>[->|]|\|\||[!&*%./:<=>?@\[\]^|~])")

# operator → (operation type, whether it takes a value: True required, False optional, None never).
_OPERATIONS: dict[str, tuple[Callable[..., QueryOperation], bool | None]] = {
    "!": (_NotModifier, None),
    "!=": (IsNotEqual, True),
    "!~": (IsNotMatch, True),
    "& !": (AndNegatedMask, True),
    "&": (AndMask, True),
    "*": (CountBy, True),
    ".": (LookupScalar, False),
    "/": (GroupBy, True),
    "-/": (GroupRowsBy, True),
    "|/": (GroupColumnsBy, True),
    ":": (LookupVector, False),
    "::": (LookupMatrix, False),
    "<": (IsLess, True),
    "<=": (IsLessEqual, True),
    "=": (IsEqual, True),
    ">": (IsGreater, True),
    ">=": (IsGreaterEqual, True),
    "?": (Names, None),
    "??": (IfNot, False),
    "@": (Axis, False),
    "=@": (AsAxis, False),
    "@-": (SquareRowIs, True),
    "@|": (SquareColumnIs, True),
    "[ !": (BeginNegatedMask, True),
    "[": (BeginMask, True),
    "]": (EndMask, None),
    "^ !": (XorNegatedMask, True),
    "^": (XorMask, True),
    "| !": (OrNegatedMask, True),
    "|": (OrMask, True),
    "~": (IsMatch, True),
}


def parse_query(query_string: str, operand_only: Callable[[str], QueryOperation] | None = None) -> QueryOperation:
    """Parse a query string into a :class:`QuerySequence`, or the operation itself when the string holds just one, as
    Julia's ``parse_query`` (errors point at the offending token, as Julia's do). If the string is a single name and
    ``operand_only`` is given, that operation is built from the name.

    Example:
        >>> str(parse_query("@cell[age>60]:donor"))
        '@ cell [ age > 60 ] : donor'
        >>> parse_query("@ cell")
        Axis('@ cell')
        >>> parse_query("age", LookupVector)
        LookupVector(': age')
    """
    tokens = tokenize(query_string, QUERY_OPERATIONS_REGEX)
    if operand_only is not None and len(tokens) == 1 and not tokens[0].is_operator:
        return operand_only(tokens[0].value)
    operations: list[QueryOperation] = []
    index = 0
    while index < len(tokens):
        operation, index = _next_operation(tokens, index)
        operations.append(operation)
    return operations[0] if len(operations) == 1 else _sequence_of(operations)


def _next_operation(tokens: list[Token], index: int) -> tuple[QueryOperation, int]:
    token = tokens[index]
    if not token.is_operator:
        error_at_token(token, "expected: operator", hint=_value_run_hint(tokens, index))
    index += 1

    if token.value == "||":
        return _parse_if_missing(tokens, index, token)
    if token.value == "%":
        return _parse_computation(tokens, index, "eltwise", ELTWISE_OPERATIONS)
    if token.value in (">>", ">-", ">|"):
        operation, index = _parse_computation(tokens, index, "reduce", REDUCTION_OPERATIONS)
        if token.value == ">-":
            return ReduceToRow(operation), index  # type: ignore[arg-type]
        if token.value == ">|":
            return ReduceToColumn(operation), index  # type: ignore[arg-type]
        return operation, index

    if token.value in ("[", "&", "|", "^") and index < len(tokens) and tokens[index].is_operator \
            and tokens[index].value == "!":
        negation = tokens[index]
        index += 1
        token = Token(True, token.value + " !", token.token_index, token.first_index, negation.last_index,
                      token.encoded_string)

    entry = _OPERATIONS.get(token.value)
    if entry is None:
        hint = f"hint: write it with a space: {token.value[0]} !" if token.value[1:] == "!" else ""
        error_at_token(token, f"unknown operator: {token.value}", hint=hint)
    operation_type, requires_operand = entry
    if requires_operand is None:
        return operation_type(), index
    operand = _next_value(tokens, index) if requires_operand else _maybe_next_value(tokens, index)
    if operand is None:
        return operation_type(), index
    return operation_type(operand.value), index + 1


def _parse_if_missing(tokens: list[Token], index: int, operator: Token) -> tuple[QueryOperation, int]:
    value_token = _next_value(tokens, index)
    index += 1
    type_token = _maybe_next_value(tokens, index)
    value: Any
    if type_token is None:
        value = guess_typed_value(value_token.value)
    else:
        index += 1
        value = value_token.value
        if type_token.value != "String":
            dtype = parse_number_type_value(operator, "type", type_token)
            if dtype is not None:
                value = parse_number_value(operator, "value", value_token, dtype)
    result = IfMissing.__new__(IfMissing)
    result.default_value = value
    return result, index


def _parse_computation(tokens: list[Token], index: int, kind: str,
                       registry: dict[str, Any]) -> tuple[ComputationOperation, int]:
    name_token = _next_value(tokens, index)
    operation_type = registry.get(name_token.value)
    if operation_type is None:
        hint = _unknown_operation_hint(name_token.value, kind, registry)
        glued = glued_value_hint(decode_expression(name_token.encoded_string))  # (``= a%b``)
        error_at_token(name_token, f"unknown {kind} operation: {name_token.value}",
                       hint=f"{hint}\n{glued}" if glued else hint)
    index += 1
    parameters: dict[str, Token] = {}
    # As in Julia, a lone trailing value is not taken as a parameter name (it then fails as "expected: operator").
    while index < len(tokens) - 1 and not tokens[index].is_operator:
        parameter_token = tokens[index]
        value_token = _next_value(tokens, index + 1)
        index += 2
        if parameter_token.value not in operation_type.parameters:
            error_at_token(parameter_token, f"the parameter: {parameter_token.value}\n"
                                            f"does not exist for the operation: {name_token.value}",
                           hint=f"(its parameters: {listed_names(operation_type.parameters)})")
        if parameter_token.value in parameters:
            error_at_token(parameter_token, f"repeated parameter: {parameter_token.value}\n"
                                            f"for the operation: {name_token.value}")
        parameters[parameter_token.value] = value_token
    return operation_type.from_tokens(name_token, parameters), index


def _next_value(tokens: list[Token], index: int) -> Token:
    if index >= len(tokens):
        error_at_token(tokens[index - 1], "expected: value", at_end=True, hint=token_escape_hint(tokens[index - 1]))
    if tokens[index].is_operator:
        error_at_token(tokens[index], "expected: value", hint=token_escape_hint(tokens[index]))
    return tokens[index]


_VALUE_OPERATORS = frozenset(("=", "!=", "<", "<=", ">", ">=", "~", "!~", "@|", "@-"))


def glued_value_hint(query_string: str) -> str:
    """The hint for a query that parsed but failed: a value written after a comparison with a space, that has an
    operator glued inside it (``= a/b``: ``/`` groups by ``b``), was probably meant as one value (``a\\/b``). Queries
    written without spaces (``[age>60&sex=male]``) get no hint. ``""`` if there is nothing to say.

    Example:
        >>> print(glued_value_hint("@ cell [ donor = N89/N90 ]").splitlines()[0])
        hint: to use "N89/N90" as one value, write: N89\\/N90
        >>> glued_value_hint("@ cell [ donor = N89 ] : age"), glued_value_hint("@cell[age>60&sex=male]")
        ('', '')
    """
    try:
        tokens = tokenize(query_string, QUERY_OPERATIONS_REGEX)
    except DafQueryError:
        return ""
    for index in range(len(tokens) - 3):
        comparison, value, operator, after = tokens[index:index + 4]
        if comparison.is_operator and comparison.value in _VALUE_OPERATORS and not value.is_operator \
                and value.first_index > comparison.last_index + 1 and operator.is_operator \
                and operator.first_index == value.last_index + 1 and after.first_index == operator.last_index + 1 \
                and not after.is_operator:
            hint = token_escape_hint(value)
            if hint:
                return hint
    return ""


# Operators followed by several values (an operation's name and parameters, a default value and its type).
_SEVERAL_VALUES_OPERATORS = frozenset(("%", ">>", ">-", ">|", "||"))


def _value_run_hint(tokens: list[Token], index: int) -> str:
    """The hint for a value where an operator is expected: ``= T cell`` is probably the value ``T cell``, unescaped;
    else the word of the value may have unescaped characters (``= a]b``)."""
    start = index
    while start > 0 and not tokens[start - 1].is_operator:
        start -= 1
    if 0 < start < index and tokens[start - 1].value not in _SEVERAL_VALUES_OPERATORS:
        end = index + 1
        while end < len(tokens) and not tokens[end].is_operator:
            end += 1
        return escape_hint(" ".join(token.value for token in tokens[start:end]))
    return token_escape_hint(tokens[index])


def _unknown_operation_hint(name: str, kind: str, registry: dict[str, Any]) -> str:
    """The operations of the kind, the closest to ``name`` first (and a note if ``name`` is of the other kind)."""
    text = f"(the {kind} operations, closest first: {', '.join(closest_first(name, registry))})"
    close = close_names(name, registry)
    if close:
        text += f"\ndid you mean: {' or '.join(close)}?"
    if registry is REDUCTION_OPERATIONS and name in ELTWISE_OPERATIONS:
        text += f"\n({name} is an eltwise operation: % {name})"
    elif registry is ELTWISE_OPERATIONS and name in REDUCTION_OPERATIONS:
        text += f"\n({name} is a reduce operation: >> {name}, >| {name} or >- {name})"
    return text


def _maybe_next_value(tokens: list[Token], index: int) -> Token | None:
    if index < len(tokens) and not tokens[index].is_operator:
        return tokens[index]
    return None


# Re-exported for isinstance checks in the evaluator.
MaskOperation = _MaskOperation
ComparisonOperation = _Comparison
NotModifier = _NotModifier
__all__ += ["EltwiseOperation", "ReductionOperation"]
