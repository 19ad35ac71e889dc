"""Julia's recorded parity cases (``../shared/fixtures/parity``, see its README): loading them, building the data sets
their ``setup_ops`` describe (on any backend), translating the few Julia expressions they hold, and comparing pydaf's
results and error messages with what Julia printed or asserted.

Comparison rules (each helper raises ``AssertionError`` naming what differs):

* **Error messages** (:func:`assert_error_message`). Julia's ``@test_throws "text"`` passes when the shown message
  contains the text. The expected text (its trailing whitespace dropped) must occur in the message, line after line,
  each line exactly (the ``▲`` marker lines included, spacing and all), with one exception: a line that is the repr of
  a Julia exception (``ArgumentError("...")``, ``ErrorException("PCRE ...")``, ``InexactError(...)``) stands for
  exactly one non-empty line of the message (where the port puts its own exception, such as ``ValueError: ...``).
  The regex cases are compared the same way against ``expect_error_core`` (the message without Julia's
  ``TaskFailedException`` wrapper).
* **Inline values** (``test/queries.jl``, :func:`assert_inline_result`): Julia ``==`` semantics. Strings must be
  ``str`` and equal; numbers and booleans must be numeric and equal by value (``1 == 1.0 == true``); types are not
  asserted (the Julia tests do not). Names are compared as sets, vector and matrix entry names in order, and the
  dimension names are the axis names or ``None`` where Julia's is a NamedArrays default (``dim_is_axis: false``).
* **Doctest displays** (``src/*.jl``, :func:`assert_doctest_result`): the full length/shape, the shown entries at the
  recorded ``indices``/``row_indices``/``col_indices``, the element type (``eltype_simple``, as the numpy dtype; every
  string type is ``str`` in an object array), exact values, except that rounded floats (``display_rounded``) allow
  half a unit of the 6th significant digit (0.75 units for ``Float32``), and an exact ``0.0`` stays exact.
* **Frames** (:func:`assert_frame`): columns in order, shape, every row value (Julia ``==``), and each column's numpy
  dtype from Julia's printed element type.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pydaf
from pydaf.testing import DafBackend

from .julia_examples import FIXTURES, example_cells_daf, example_chain_daf, example_metacells_daf

PARITY = FIXTURES / "parity"

needs_parity = pytest.mark.skipif(not (PARITY / "inline_query_cases.json").is_file(),
                                  reason=f"the parity cases are not at {PARITY}")


def load_cases(name: str) -> list[dict]:
    """The records of one parity file, or no records if the fixtures are absent."""
    path = PARITY / name
    if not path.is_file():
        return []
    return json.loads(path.read_text(encoding="utf-8"))


# Julia element types.

JULIA_DTYPES = {
    "Bool": np.bool_, "Int8": np.int8, "Int16": np.int16, "Int32": np.int32, "Int64": np.int64,
    "UInt8": np.uint8, "UInt16": np.uint16, "UInt32": np.uint32, "UInt64": np.uint64,
    "Float32": np.float32, "Float64": np.float64, "String": object,
}


def julia_dtype(eltype: str) -> np.dtype:
    """The numpy dtype of a Julia element type (every string type is ``str`` held in an ``object`` array)."""
    if eltype not in JULIA_DTYPES:
        raise ValueError(f"unknown Julia element type: {eltype}")
    return np.dtype(JULIA_DTYPES[eltype])


def julia_array(values: Any, eltype: str) -> np.ndarray:
    """A Julia literal (a list, or a row-major list of rows for a matrix) as a numpy array of its element type;
    matrices come back column-major (Julia's layout)."""
    dtype = julia_dtype(eltype)
    if dtype.kind == "O":
        array = np.empty(np.shape(values), dtype=object)
        array[...] = values
        assert all(isinstance(value, str) for value in array.flat), values
    else:
        array = np.array(values, dtype=dtype)
        assert np.array_equal(array, np.array(values)), (values, eltype)  # the cast must be exact
    return np.asfortranarray(array) if array.ndim == 2 else array


def julia_scalar(value: Any, eltype: str) -> Any:
    dtype = julia_dtype(eltype)
    if dtype.kind == "O":
        assert isinstance(value, str), value
        return value
    scalar = dtype.type(value)
    assert scalar == value, (value, eltype)
    return scalar


# Data sets.

_EXAMPLES: dict[str, Callable[[], pydaf.DafWriter]] = {
    "cells": example_cells_daf, "metacells": example_metacells_daf, "chain": example_chain_daf,
}
_CACHED_EXAMPLES: dict[str, pydaf.DafWriter] = {}


def fresh_example(which: str) -> pydaf.DafWriter:
    """A new ``example_<which>_daf()`` (for setups that change it)."""
    return _EXAMPLES[which]()


def cached_example(which: str) -> pydaf.DafWriter:
    """One ``example_<which>_daf()`` per test process, for records that only read it."""
    if which not in _CACHED_EXAMPLES:
        _CACHED_EXAMPLES[which] = fresh_example(which)
    return _CACHED_EXAMPLES[which]


def daf_factory(backend: DafBackend, directory: Path | None = None) -> Callable[[str], pydaf.DafWriter]:
    """A function making a new empty data set of a backend of ``conftest.BACKENDS`` (in a new file or directory under
    ``directory``)."""
    return lambda name: backend.new(directory, name)


def apply_setup_ops(ops: list[dict] | None, *, new_daf: Callable[[str], pydaf.DafWriter] | None = None,
                    example: Callable[[str], pydaf.DafWriter] = fresh_example,
                    seed: int = 0) -> dict[str, pydaf.DafWriter]:
    """Run a record's ``setup_ops`` in order; returns the Julia variables bound (``{"daf": ...}``)."""
    variables: dict[str, pydaf.DafWriter] = {}
    rng = np.random.default_rng(seed)
    for op in ops or []:
        kind, kwargs = op["op"], dict(op.get("kwargs") or {})
        assert set(kwargs) <= {"overwrite", "relayout", "must_exist"}, op
        if kind == "new_memory_daf":
            assert new_daf is not None, "this setup makes a new data set but no backend was given"
            variables[op["var"]] = new_daf(op["name"])
            continue
        if kind == "load_example":
            variables[op["var"]] = example(op["daf"])
            continue
        daf = variables[op["var"]]
        if kind == "add_axis":
            daf.add_axis(op["axis"], list(op["entries"]), **kwargs)
        elif kind == "set_scalar":
            daf.set_scalar(op["name"], julia_scalar(op["value"], op["eltype"]), **kwargs)
        elif kind == "set_vector":
            daf.set_vector(op["axis"], op["name"], julia_array(op["values"], op["eltype"]), **kwargs)
        elif kind == "set_matrix":
            if op.get("random"):
                dtype = julia_dtype(op["eltype"])
                assert dtype.kind == "f", op
                values = np.asfortranarray(rng.random(tuple(op["shape"])).astype(dtype))
            else:
                assert op["values_layout"].startswith("row-major"), op
                values = julia_array(op["values"], op["eltype"])
            assert list(values.shape) == list(op["shape"]), op
            daf.set_matrix(op["rows_axis"], op["columns_axis"], op["name"], values, **kwargs)
        elif kind == "delete_scalar":
            daf.delete_scalar(op["name"], **kwargs)
        elif kind == "delete_axis":
            daf.delete_axis(op["axis"], **kwargs)
        elif kind == "delete_vector":
            daf.delete_vector(op["axis"], op["name"], **kwargs)
        elif kind == "delete_matrix":
            daf.delete_matrix(op["rows_axis"], op["columns_axis"], op["name"], **kwargs)
        else:
            raise ValueError(f"unknown setup operation: {op}")
    return variables


# Julia expressions.

_STRING = r'"(?:[^"\\]|\\.)*"'


def julia_to_python(expression: str) -> str:
    """Translate one of the recorded Julia builder expressions to Python, mechanically: ``|>`` is ``|``, ``q"..."`` is
    a raw string, ``"a" => "b"`` is ``("a", "b")``, ``FrameColumn[...]`` is a list and ``get_frame(daf, ...)`` is
    ``daf.get_frame(...)``. Anything it cannot translate safely raises ``ValueError``."""
    if "\\$" in expression or "$(" in expression:
        raise ValueError(f"interpolation in: {expression}")
    text = re.sub(r'\bq"', 'r"', expression)
    text = text.replace("|>", "|")
    text = re.sub(rf"({_STRING})\s*=>\s*({_STRING})", r"(\1, \2)", text)
    text = text.replace("FrameColumn[", "[")
    text = re.sub(r"^get_frame\(daf,\s*", "daf.get_frame(", text)
    if "=>" in text or "get_frame(daf" in text or ";" in text:
        raise ValueError(f"cannot translate: {expression}")
    compile(text, "<julia expression>", "eval")  # a syntax error here means the translation is wrong
    return text


def eval_builder(expression: str, daf: pydaf.DafReader | None = None) -> Any:
    """Evaluate a recorded Julia builder expression (translated by :func:`julia_to_python`) with the query builders
    and operations of ``pydaf.queries`` in scope."""
    import pydaf.queries

    namespace: dict[str, Any] = {name: getattr(pydaf.queries, name) for name in pydaf.queries.__all__}
    namespace["__builtins__"] = {}
    if daf is not None:
        namespace["daf"] = daf
    return eval(julia_to_python(expression), namespace)  # the read-only fixture text, translated above


_QUERY_CALL = re.compile(rf"^(?P<var>\w+)\[(?P<query>{_STRING})\]$")


def julia_string(literal: str) -> str:
    """The value of a plain Julia string literal (``\\\\``, ``\\"`` escapes only)."""
    assert literal.startswith('"') and literal.endswith('"'), literal
    body = literal[1:-1]
    if not re.fullmatch(r'(?:[^\\"$]|\\["\\])*', body):
        raise ValueError(f"unsupported Julia string literal: {literal}")
    return re.sub(r'\\(["\\])', r"\1", body)


def doctest_query_call(call: str) -> tuple[str, str] | None:
    """``cells["@ gene : ?"]`` gives ``("cells", "@ gene : ?")``; any other call gives ``None``."""
    match = _QUERY_CALL.match(call)
    if match is None:
        return None
    return match["var"], julia_string(match["query"])


_API_CALL = re.compile(r"^(?P<function>\w+)\((?P<arguments>.*)\)$")
_API_ARGUMENT = re.compile(rf"\s*(?:(?P<keyword>\w+)\s*=\s*)?(?P<value>{_STRING}|example_\w+_daf\(\)|\w+)\s*(?:[,;]|$)")
_API_METHODS = {"get_vector": "get_pd_vector"}  # Julia's NamedVector is a pandas Series in pydaf


def run_api_call(call: str, variables: dict[str, Any], example: Callable[[str], pydaf.DafWriter]) -> Any:
    """Run one of the recorded non-query doctest calls (``has_matrix(cells, "gene", "cell", "UMIs"; relayout =
    false)``, ``sort!(String.(axes_set(example_cells_daf())))``) as the pydaf method of the same name."""
    wrappers = []
    text = call
    while True:
        for wrapper in ("sort!(", "String.("):
            if text.startswith(wrapper):
                assert text.endswith(")"), call
                wrappers.append(wrapper)
                text = text[len(wrapper):-1]
                break
        else:
            break
    match = _API_CALL.match(text)
    if match is None:
        raise ValueError(f"cannot translate: {call}")
    arguments, keywords, position = [], {}, 0
    source = match["arguments"]
    while position < len(source):
        argument = _API_ARGUMENT.match(source, position)
        if argument is None or argument.end() == position:
            raise ValueError(f"cannot translate the arguments of: {call}")
        position = argument.end()
        value_text = argument["value"]
        if value_text.startswith('"'):
            value: Any = julia_string(value_text)
        elif value_text.startswith("example_"):
            value = example(value_text[len("example_"):-len("_daf()")])
        elif value_text in ("true", "false"):
            value = value_text == "true"
        elif value_text == "nothing":
            value = None
        else:
            value = variables[value_text]
        if argument["keyword"]:
            keywords[argument["keyword"]] = value
        else:
            assert not keywords, f"a positional argument after keywords in: {call}"
            arguments.append(value)
    daf, *arguments = arguments
    function = match["function"]
    result = getattr(daf, _API_METHODS.get(function, function))(*arguments, **keywords)
    for wrapper in reversed(wrappers):
        result = sorted(result) if wrapper == "sort!(" else [str(value) for value in result]
    return result


# Error messages.

_JULIA_EXCEPTION_LINE = re.compile(r"^[A-Z][A-Za-z]*(?:Error|Exception)\(.*\)$")


def error_pattern(expected: str) -> re.Pattern:
    """The pattern a message must contain (see the module documentation): each expected line literally, a Julia
    exception repr line as any one non-empty line."""
    lines = expected.rstrip().split("\n")
    parts = ["[^\n]+" if _JULIA_EXCEPTION_LINE.match(line) else re.escape(line) for line in lines]
    return re.compile("\n".join(parts))


def error_message_matches(message: str, expected: str) -> bool:
    return error_pattern(expected).search(message) is not None


def assert_error_message(message: str, expected: str) -> None:
    assert error_message_matches(message, expected), \
        f"the error message:\n{message}\n--- does not contain (per the parity rules):\n{expected.rstrip()}"


def expected_error(record: dict) -> str:
    """The message a record expects: ``expect_error`` for substring cases, ``expect_error_core`` for regex ones."""
    match = record.get("expect_error_match")
    if match == "substring":
        return record["expect_error"]
    if match == "regex":
        return record["expect_error_core"]
    raise ValueError(f"unknown expect_error_match: {match} in {record['id']}")


# Values.

_NUMBER = (bool, int, float, np.bool_, np.number)


def julia_equal(actual: Any, expected: Any) -> bool:
    """Julia's ``==`` between a pydaf value and a JSON value: strings equal strings only, numbers and booleans
    compare by value."""
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    if expected is None:
        return actual is None
    assert isinstance(expected, bool | int | float), expected
    return isinstance(actual, _NUMBER) and bool(actual == expected)


def display_close(actual: Any, shown: float, eltype: str) -> bool:
    """Whether a value prints as ``shown`` at Julia's 6 significant digits (half a unit of the 6th digit; 0.75 for
    ``Float32``). A shown zero is exact."""
    if not isinstance(actual, _NUMBER) or isinstance(actual, bool | np.bool_):
        return False
    if shown == 0:
        return actual == 0
    units = 0.75 if eltype == "Float32" else 0.5
    return abs(float(actual) - shown) <= units * 10 ** (math.floor(math.log10(abs(shown))) - 5)


def dimension_name(name: str, is_axis: bool) -> str | None:
    return name if is_axis else None


NAMEDARRAYS_DEFAULT_NAMES = ("A", "B")


def doctest_dimension_name(name: str) -> str | None:
    """A doctest header's dimension name as pydaf names it: NamedArrays' defaults (``A``, ``B``) are ``None``."""
    return None if name in NAMEDARRAYS_DEFAULT_NAMES else name


def dense_frame(frame: pd.DataFrame) -> pd.DataFrame:
    if hasattr(frame, "sparse") and len(frame.columns) and all(isinstance(dtype, pd.SparseDtype)
                                                                for dtype in frame.dtypes):
        return frame.sparse.to_dense()
    return frame


def _values_dtype(data: pd.Series | pd.DataFrame) -> Any:
    dtypes = [data.dtype] if isinstance(data, pd.Series) else list(data.dtypes)
    dtypes = [dtype.subtype if isinstance(dtype, pd.SparseDtype) else dtype for dtype in dtypes]
    assert dtypes, "no columns"
    assert all(dtype == dtypes[0] for dtype in dtypes), f"mixed column types: {dtypes}"
    return dtypes[0]


def assert_dtype(data: pd.Series | pd.DataFrame, eltype: str) -> None:
    """The values have Julia's element type: its numpy dtype, or for strings an ``object`` (or pandas ``str``) dtype
    holding only ``str``."""
    dtype, expected = _values_dtype(data), julia_dtype(eltype)
    if expected.kind == "O":
        assert dtype == np.dtype(object) or isinstance(dtype, pd.StringDtype), \
            f"element type {dtype}, Julia's is {eltype}"
        values = data.to_numpy().ravel() if isinstance(data, pd.Series) else dense_frame(data).to_numpy().ravel()
        assert all(isinstance(value, str) for value in values), "not all values are str"
    else:
        assert dtype == expected, f"element type {dtype}, Julia's is {eltype} ({expected})"


def assert_values(actual: list, expected: list, what: str, *, rounded_eltype: str | None = None) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} values, expected {len(expected)}"
    for position, (value, shown) in enumerate(zip(actual, expected, strict=True)):
        if rounded_eltype is not None and isinstance(shown, float):
            ok = display_close(value, shown, rounded_eltype)
        else:
            ok = julia_equal(value, shown)
        assert ok, f"{what}[{position}]: {value!r} != Julia's {shown!r}"


def assert_names(result: Any, expected: list[str]) -> None:
    assert isinstance(result, set), f"names should be a set, got {type(result).__name__}"
    assert all(isinstance(name, str) for name in result), result
    assert sorted(result) == sorted(expected), f"{sorted(result)} != {sorted(expected)}"


def assert_inline_result(result: Any, expected: Any, dimensions: int) -> None:
    """Compare a ``daf.get_query`` result with a ``test/queries.jl`` ``get_result`` value."""
    if dimensions == -1:
        assert_names(result, expected)
    elif dimensions == 0:
        assert not isinstance(result, pd.Series | pd.DataFrame | np.ndarray | set), type(result)
        assert julia_equal(result, expected), f"{result!r} != Julia's {expected!r}"
    elif dimensions == 1:
        assert isinstance(result, pd.Series), f"a vector should be a Series, got {type(result).__name__}"
        assert list(result.index) == expected["names"], f"{list(result.index)} != {expected['names']}"
        assert_values(list(result.to_numpy()), expected["values"], "values")
        assert result.index.name == dimension_name(expected["dim_name"], expected["dim_is_axis"]), result.index.name
    elif dimensions == 2:
        assert isinstance(result, pd.DataFrame), f"a matrix should be a DataFrame, got {type(result).__name__}"
        frame = dense_frame(result)
        assert list(frame.index) == expected["rows"], f"rows {list(frame.index)} != {expected['rows']}"
        assert list(frame.columns) == expected["cols"], f"columns {list(frame.columns)} != {expected['cols']}"
        values = frame.to_numpy()
        for row, expected_row in enumerate(expected["values"]):
            assert_values(list(values[row, :]), expected_row, f"row {expected['rows'][row]}")
        assert frame.index.name == dimension_name(expected["row_dim_name"], expected["row_dim_is_axis"]), \
            f"rows name {frame.index.name!r}"
        assert frame.columns.name == dimension_name(expected["col_dim_name"], expected["col_dim_is_axis"]), \
            f"columns name {frame.columns.name!r}"
    else:
        raise ValueError(f"unknown query_result_dimensions: {dimensions}")


def assert_doctest_result(result: Any, kind: str, expected: Any) -> None:
    """Compare a ``daf[query]`` result with a doctest display (see the module documentation)."""
    if kind == "names":
        assert_names(result, expected)
    elif kind == "scalar":
        assert not isinstance(result, pd.Series | pd.DataFrame | np.ndarray | set), type(result)
        dtype = julia_dtype(expected["eltype"])
        if dtype.kind == "O":
            assert isinstance(result, str), f"{result!r} is not a str"
        else:
            assert isinstance(result, np.generic) and result.dtype == dtype, \
                f"{result!r} is not a numpy {dtype} (Julia's {expected['eltype']})"
        assert julia_equal(result, expected["value"]), f"{result!r} != Julia's {expected['value']!r}"
    elif kind == "vector":
        assert isinstance(result, pd.Series), f"a vector should be a Series, got {type(result).__name__}"
        assert len(result) == expected["length"], f"length {len(result)} != {expected['length']}"
        assert result.index.name == doctest_dimension_name(expected["dim_name"]), result.index.name
        assert_dtype(result, expected["eltype_simple"])
        indices = expected.get("indices", list(range(expected["length"])))
        assert list(result.index[indices]) == expected["names"], f"{list(result.index[indices])}"
        rounded = expected["eltype_simple"] if expected.get("display_rounded") else None
        assert_values(list(result.to_numpy()[indices]), expected["values"], "values", rounded_eltype=rounded)
    elif kind == "matrix":
        assert isinstance(result, pd.DataFrame), f"a matrix should be a DataFrame, got {type(result).__name__}"
        assert list(result.shape) == expected["shape"], f"shape {result.shape} != {expected['shape']}"
        assert result.index.name == doctest_dimension_name(expected["row_dim_name"]), result.index.name
        assert result.columns.name == doctest_dimension_name(expected["col_dim_name"]), result.columns.name
        assert_dtype(result, expected["eltype_simple"])
        rows, columns = expected["row_indices"], expected["col_indices"]
        assert list(result.index[rows]) == expected["rows"], f"rows {list(result.index[rows])}"
        assert list(result.columns[columns]) == expected["cols"], f"columns {list(result.columns[columns])}"
        values = dense_frame(result).to_numpy()[np.ix_(rows, columns)]
        rounded = expected["eltype_simple"] if expected.get("display_rounded") else None
        for position, expected_row in enumerate(expected["values"]):
            assert_values(list(values[position, :]), expected_row, f"row {expected['rows'][position]}",
                          rounded_eltype=rounded)
    else:
        raise ValueError(f"not a query result kind: {kind}")


def assert_api_result(result: Any, kind: str, expected: Any) -> None:
    """Compare a non-query doctest call (reader/writer functions, descriptions) with its recorded output."""
    if kind == "scalar":
        value = expected["value"]
        eltype = expected["eltype"]
        if eltype == "Nothing":
            assert result is None, f"{result!r} is not None"
        elif eltype == "Bool":
            assert isinstance(result, bool | np.bool_), f"{result!r} is not a bool"
        elif eltype == "String":
            assert isinstance(result, str), f"{result!r} is not a str"
        elif julia_dtype(eltype).kind in "iu":
            assert isinstance(result, int | np.integer) and not isinstance(result, bool), \
                f"{result!r} is not an integer"
        else:
            assert isinstance(result, float | np.floating), f"{result!r} is not a float"
        assert julia_equal(result, value), f"{result!r} != Julia's {value!r}"
    elif kind == "names":
        assert sorted(result) == expected, f"{sorted(result)} != {expected}"
        assert all(isinstance(name, str) for name in result), result
    elif kind == "vector":
        if "names" in expected:
            assert isinstance(result, pd.Series), type(result)
            assert list(result.index) == expected["names"] and result.index.name == expected["dim_name"]
            assert len(result) == expected["length"]
            assert_dtype(result, expected["eltype_simple"])
            values = list(result.to_numpy())
        else:
            values = list(result)
        assert_values(values, expected["values"], "values")
    elif kind == "description":
        assert result == expected, f"description:\n{result}\n--- differs from Julia's:\n{expected}"
    elif kind == "other" and "pairs" in expected:
        assert list(result.items()) == [(key, index - 1) for key, index in expected["pairs"]], \
            f"{list(result.items())} (0-based) != Julia's {expected['pairs']} (1-based)"
    else:
        raise ValueError(f"unknown non-query doctest record kind: {kind}")


def assert_frame(frame: Any, expected: dict) -> None:
    """Compare a ``get_frame`` result with the parsed DataFrames printout."""
    assert isinstance(frame, pd.DataFrame), f"not a DataFrame: {type(frame).__name__}"
    assert list(frame.columns) == expected["columns"], f"columns {list(frame.columns)} != {expected['columns']}"
    assert frame.shape == (expected["n_rows"], expected["n_cols"]), f"shape {frame.shape}"
    for column, eltype in zip(expected["columns"], expected["eltypes"], strict=True):
        assert_dtype(frame[column], eltype)
    for position, expected_row in enumerate(expected["rows"]):
        assert_values(list(frame.iloc[position].to_numpy()), expected_row, f"row {position + 1}")
