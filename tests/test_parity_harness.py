"""Self-tests of the parity harness (``parity.py``): the comparisons must accept Julia's own text and values and reject
near misses, the setups must build what the parity README describes, and the Julia expressions must translate as
expected. These do not need the query engine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pydaf

from .conftest import BACKENDS
from .julia_examples import needs_fixtures
from .parity import (
    apply_setup_ops,
    assert_doctest_result,
    assert_frame,
    assert_inline_result,
    daf_factory,
    display_close,
    doctest_query_call,
    error_message_matches,
    expected_error,
    julia_array,
    julia_equal,
    julia_string,
    julia_to_python,
    load_cases,
    needs_parity,
)

DOCTEST_CASES = {record["id"]: record for record in load_cases("doctest_cases.json")}
INLINE_CASES = {record["id"]: record for record in load_cases("inline_query_cases.json")}
ERROR_KINDS = ("query_error", "parse_error", "frame_error")


def inline(line: int) -> dict:
    return INLINE_CASES[f"test/queries.jl:{line}"]


# Error messages.


def test_error_comparator_is_a_line_by_line_substring_match():
    expected = "unsupported input type: String\nin the query: @ cell : type % Abs\nat location:                ▲▲▲▲▲"
    assert error_message_matches(expected, expected)
    assert error_message_matches(f"{expected}\nfor the daf data: memory!", expected)
    assert error_message_matches(f"error: {expected}", expected)  # Julia's occursin
    assert error_message_matches(expected, expected + "\n    ")  # trailing whitespace of the expected text
    assert not error_message_matches(expected.replace("              ▲", "               ▲"), expected)
    assert not error_message_matches(expected.replace("                ▲", "               ▲"), expected)
    assert not error_message_matches(expected.replace("▲▲▲▲▲", "▲▲▲▲"), expected)
    assert not error_message_matches(expected.replace("\nin the query", "\nextra line\nin the query"), expected)
    assert not error_message_matches(expected.replace("String", "Str"), expected)
    lines = expected.split("\n")
    assert not error_message_matches("\n".join([lines[1], lines[0], lines[2]]), expected)
    assert not error_message_matches(expected.replace("\n", " "), expected)


def test_error_comparator_skips_only_julia_exception_lines():
    expected = ("error parsing number comparison value: U\nfor comparison with a vector of type: Float64\n"
                'ArgumentError("cannot parse \\"U\\" as Float64")\nin the query: @ cell : score = U\n'
                "at location:                 ▲▲▲\nfor the daf data: memory!")
    python = expected.replace('ArgumentError("cannot parse \\"U\\" as Float64")',
                              "ValueError: could not convert string to float: 'U'")
    assert error_message_matches(expected, expected)
    assert error_message_matches(python, expected)
    assert not error_message_matches(python.replace("ValueError: could not convert string to float: 'U'\n", ""),
                                     expected)  # the exception line must be there
    assert not error_message_matches(python.replace("ValueError: could", "ValueError:\ncould"), expected)
    assert not error_message_matches(python.replace("ValueError: could not convert string to float: 'U'", ""),
                                     expected)  # nor empty
    assert not error_message_matches(python.replace("memory!", "other!"), expected)
    assert not error_message_matches(python.replace("at location:                 ▲▲▲",
                                                    "at location:                  ▲▲▲"), expected)
    assert not error_message_matches(python.replace("Float64\nValueError", "Float32\nValueError"), expected)


@needs_parity
def test_every_recorded_error_accepts_its_own_text_and_rejects_a_moved_marker():
    records = [record for record in INLINE_CASES.values() if record["kind"] in ERROR_KINDS]
    assert len(records) == 30
    markers = 0
    for record in records:
        expected = expected_error(record)
        assert error_message_matches(expected, expected), record["id"]
        assert error_message_matches(f"{expected.rstrip()}\nfor the daf data: memory!", expected), record["id"]
        lines = expected.rstrip().split("\n")
        for position, line in enumerate(lines):
            if "▲" in line:
                markers += 1
                moved = [*lines[:position], line.replace("▲", " ▲", 1), *lines[position + 1:]]
                assert not error_message_matches("\n".join(moved), expected), record["id"]
                shorter = [*lines[:position], line[:-1], *lines[position + 1:]]
                assert not error_message_matches("\n".join(shorter), expected), record["id"]
    assert markers == 27


@needs_parity
def test_regex_records_compare_their_core_message():
    regex = [record for record in INLINE_CASES.values() if record.get("expect_error_match") == "regex"]
    assert len(regex) == 4
    for record in regex:
        core = expected_error(record)
        assert core == record["expect_error_core"] and "TaskFailedException" not in core
        assert core.startswith(("no IfMissing value", "error converting"))
    assert expected_error(inline(352)) == inline(352)["expect_error"]
    with pytest.raises(ValueError, match="unknown expect_error_match"):
        expected_error({"id": "x", "expect_error_match": None})


# Values.


def test_julia_equality_and_display_rounding():
    assert julia_equal(np.int64(1), 1.0) and julia_equal(1.0, 1) and julia_equal(np.bool_(True), True)
    assert julia_equal(np.float32(0.5), 0.5) and julia_equal(np.uint8(3), 3) and julia_equal(True, 1)
    assert julia_equal("0.1.2", "0.1.2") and julia_equal(np.str_("U"), "U")
    assert not julia_equal("1.0", 1.0) and not julia_equal(1, "1") and not julia_equal(np.float64(0.25), 0.5)
    assert not julia_equal(np.array([1]), 1) and julia_equal(None, None) and not julia_equal(0, None)
    assert display_close(np.float32(6.505312e-05), 6.50531e-05, "Float32")
    assert display_close(np.float32(-7.800143), -7.80014, "Float32")
    assert not display_close(np.float32(6.5054e-05), 6.50531e-05, "Float32")
    assert not display_close(-7.80024, -7.80014, "Float64")
    assert display_close(0.0, 0.0, "Float32") and not display_close(1e-9, 0.0, "Float32")
    assert not display_close("0.5", 0.5, "Float32") and not display_close(True, 1.0, "Float32")


def test_inline_result_comparison():
    expected = {"names": ["U", "V"], "values": [1.0, 5.0], "dim_name": "A", "dim_is_axis": False}
    assert_inline_result(pd.Series([1, 5], index=pd.Index(["U", "V"], name=None)), expected, 1)
    for wrong in (pd.Series([1, 5], index=pd.Index(["U", "V"], name="A")),
                  pd.Series([5, 1], index=pd.Index(["V", "U"])),
                  pd.Series(["1", "5"], index=pd.Index(["U", "V"])),
                  pd.Series([1, 5, 0], index=pd.Index(["U", "V", "W"]))):
        with pytest.raises(AssertionError):
            assert_inline_result(wrong, expected, 1)
    matrix = {"rows": ["X", "Y"], "cols": ["U", "V"], "values": [[1, 5], [9, 13]], "row_dim_name": "gene",
              "col_dim_name": "B", "row_dim_is_axis": True, "col_dim_is_axis": False}
    frame = pd.DataFrame([[1, 5], [9, 13]], index=pd.Index(["X", "Y"], name="gene"), columns=pd.Index(["U", "V"]))
    assert_inline_result(frame, matrix, 2)
    assert_inline_result(frame.astype(pd.SparseDtype(np.int64, 0)), matrix, 2)
    with pytest.raises(AssertionError):
        assert_inline_result(frame.T, matrix, 2)
    with pytest.raises(AssertionError):
        assert_inline_result(frame.rename_axis(columns="B"), matrix, 2)
    assert_inline_result({"b", "a"}, ["a", "b"], -1)
    with pytest.raises(AssertionError):
        assert_inline_result(["a", "b"], ["a", "b"], -1)
    assert_inline_result(np.float32(1.0), 1.0, 0)
    with pytest.raises(AssertionError):
        assert_inline_result("1.0", 1.0, 0)


@needs_parity
def test_doctest_partial_vector_comparison():
    expected = DOCTEST_CASES["src/queries.jl:362"]["expected"]  # 683 Float32 values, 16 shown, rounded
    names = [f"G{index}" for index in range(683)]
    values = np.zeros(683, dtype=np.float32)
    for index, name, value in zip(expected["indices"], expected["names"], expected["values"], strict=True):
        names[index] = name
        values[index] = value
    series = pd.Series(values, index=pd.Index(names, name="gene"))
    assert_doctest_result(series, "vector", expected)
    nudged = values.copy()
    nudged[expected["indices"][-1]] *= np.float32(1.0001)
    for wrong in (series.astype(np.float64), series.rename_axis("cell"), series.iloc[:-1],
                  pd.Series(nudged, index=series.index), pd.Series(values, index=pd.Index(names[::-1], name="gene"))):
        with pytest.raises(AssertionError):
            assert_doctest_result(wrong, "vector", expected)


@needs_parity
def test_doctest_partial_matrix_comparison():
    expected = DOCTEST_CASES["src/queries.jl:793"]["expected"]  # 23 x 2 UInt16 counts, 16 rows shown, B columns
    rows = [f"E{index}" for index in range(23)]
    values = np.zeros((23, 2), dtype=np.uint16)
    for position, index in enumerate(expected["row_indices"]):
        rows[index] = expected["rows"][position]
        values[index, :] = expected["values"][position]
    frame = pd.DataFrame(values, index=pd.Index(rows, name="experiment"), columns=pd.Index(["female", "male"]))
    assert_doctest_result(frame, "matrix", expected)
    changed = values.copy()
    changed[22, 1] += 1
    for wrong in (frame.astype(np.int64), frame.rename_axis(columns="B"), frame.iloc[:-1],
                  pd.DataFrame(changed, index=frame.index, columns=frame.columns)):
        with pytest.raises(AssertionError):
            assert_doctest_result(wrong, "matrix", expected)
    assert_doctest_result(np.int64(438), "scalar", {"value": 438, "eltype": "Int64"})
    with pytest.raises(AssertionError):
        assert_doctest_result(np.uint64(438), "scalar", {"value": 438, "eltype": "Int64"})


@needs_parity
def test_frame_comparison():
    expected = inline(1373)["expected"]
    frame = pd.DataFrame({"name": ["A", "B"], "age": np.array([0, 1], dtype=np.int64),
                          "is_doublet": [True, False]}, index=pd.Index(["A", "B"], name="cell"))
    assert_frame(frame, expected)
    for wrong in (frame.astype({"age": np.int32}), frame[["age", "name", "is_doublet"]], frame.iloc[:1],
                  frame.assign(is_doublet=[False, True])):
        with pytest.raises(AssertionError):
            assert_frame(wrong, expected)


# Setups.


def test_julia_literals():
    assert julia_array([0, 1], "Int64").dtype == np.int64
    assert julia_array([[0, 1, 2], [3, 4, 5]], "Int64").flags.f_contiguous
    strings = julia_array([["A", "B", "A"], ["B", "A", "B"]], "String")
    assert strings.dtype == object and strings.shape == (2, 3) and strings[1, 0] == "B"
    with pytest.raises(AssertionError):
        julia_array([0.5], "Int64")
    assert julia_string('"a\\"b\\\\c"') == 'a"b\\c'
    with pytest.raises(ValueError):
        julia_string('"a\\nb"')


@needs_parity
@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_inline_setups_build_the_described_data(backend, tmp_path):
    daf = apply_setup_ops(inline(119)["setup_ops"], new_daf=daf_factory(backend, tmp_path))["daf"]
    assert daf.name == "memory!" and daf.axis_vector("cell").tolist() == ["A", "B"]
    assert daf.get_scalar("score") == 1.0 and isinstance(daf.get_scalar("score"), np.float64)
    daf = apply_setup_ops(inline(707)["setup_ops"], new_daf=daf_factory(backend, tmp_path))["daf"]
    # README: `[0 1 2; 3 4 5]` is 2 rows (cells) x 3 columns (genes), rows split by ';'.
    umis = daf.get_matrix("cell", "gene", "UMIs")
    assert umis.dtype == np.int64 and umis.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert daf.get_matrix("gene", "cell", "UMIs").tolist() == [[0, 3], [1, 4], [2, 5]]  # Julia's relayout = true
    assert np.asarray(daf.get_matrix("cell", "gene", "kind")).tolist() == [["A", "B", "A"], ["B", "A", "B"]]
    daf = apply_setup_ops(inline(1325)["setup_ops"], new_daf=daf_factory(backend, tmp_path))["daf"]
    distance = daf.get_matrix("cell", "cell", "distance")
    assert distance.tolist() == [[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
    assert daf.get_vector("cell", "type").tolist() == ["U", "U", "V", "V"]
    assert daf.axis_vector("type").tolist() == ["U", "V", "W"]
    daf = apply_setup_ops(inline(736)["setup_ops"], new_daf=daf_factory(backend, tmp_path))["daf"]
    assert daf.get_vector("cell", "score").dtype == np.float64 and daf.get_vector("cell", "score").tolist() == \
        [-0.25, 0.5]


@needs_parity
def test_every_inline_setup_starts_with_a_memory_daf():
    for record in INLINE_CASES.values():
        if record["kind"] in ("parse_error", "canonical_string"):
            assert record["setup_ops"] is None and record["setup"] is None, record["id"]
        else:
            assert record["setup_ops"][0] == {"op": "new_memory_daf", "name": "memory!", "var": "daf"}, record["id"]
            assert record["setup"].startswith('daf = MemoryDaf(; name = "memory!")'), record["id"]


@needs_fixtures
@needs_parity
def test_doctest_setups_build_the_described_data():
    metacells = apply_setup_ops(DOCTEST_CASES["src/writers.jl:166"]["setup_ops"])["metacells"]
    assert metacells.name == "cells!" and metacells.axis_vector("block").tolist() == ["B1", "B2"]  # README note
    metacells = apply_setup_ops(DOCTEST_CASES["src/readers.jl:251"]["setup_ops"])["metacells"]
    assert metacells.axis_vector("type").tolist() == ["Foo", "Bar", "Baz"]
    metacells = apply_setup_ops(DOCTEST_CASES["src/readers.jl:1090"]["setup_ops"])["metacells"]
    fraction = metacells.get_matrix("gene", "metacell", "fraction")
    assert fraction.dtype == np.float32 and fraction.shape == (683, 7)
    assert metacells.matrix_version_counter("gene", "metacell", "fraction") == 2
    cells = apply_setup_ops(DOCTEST_CASES["src/writers.jl:1224"]["setup_ops"])["cells"]
    assert not cells.has_matrix("gene", "cell", "UMIs") and not cells.has_matrix("cell", "gene", "UMIs")
    metacells = apply_setup_ops(DOCTEST_CASES["src/writers.jl:311"]["setup_ops"])["metacells"]
    assert metacells.get_vector("type", "is_mebemp").tolist() == [True, True, True, False]
    with pytest.raises(AssertionError, match="no backend"):
        apply_setup_ops(inline(119)["setup_ops"])
    with pytest.raises(pydaf.DafError):  # the kwargs are passed on: without overwrite the second set fails
        ops = DOCTEST_CASES["src/writers.jl:69"]["setup_ops"]
        apply_setup_ops([*ops[:2], {key: value for key, value in ops[2].items() if key != "kwargs"}])


# Julia expressions.

BUILDER_TRANSLATIONS = {
    161: 'LookupScalar("score")',
    166: 'QuerySequence(Axis("cell"), LookupVector("age"))',
    170: 'Axis("cell") | ": age"',
    176: 'Axis("cell") | Axis("gene") | LookupMatrix("UMIs")',
    177: 'Axis("cell") | (Axis("gene") | LookupMatrix("UMIs"))',
    181: 'Axis("cell") | Axis("gene") | LookupMatrix("UMIs") | Sum()',
    183: '(Axis("cell") | Axis("gene")) | (LookupMatrix("UMIs") | Sum())',
    279: 'parse_query("version", LookupScalar)',
    1373: 'daf.get_frame("cell")',
    1384: 'daf.get_frame(Axis("cell"))',
    1395: 'daf.get_frame("@ cell : age")',
    1433: 'daf.get_frame("cell", ["age", ("doublet", "is_doublet")])',
    1444: 'daf.get_frame("cell", [("age", ": age >> Sum"), ("doublet", ": is_doublet")])',
    1465: 'daf.get_frame("metacell", [("mean_age", "@ cell : age / metacell >> Mean")])',
    1476: 'daf.get_frame("@ metacell [ type = U ]", [("mean_age", "@ cell [ metacell : type = U ] : age / metacell '
          '>> Mean")])',
    1487: 'daf.get_frame(r"@ metacell [ type = U ]", [("mean_age", "@ cell [ metacell ] : age / metacell >> Mean")])',
}


@needs_parity
def test_builder_expressions_translate_as_listed():
    builders = {int(record["id"].split(":")[1]): record["query"] for record in INLINE_CASES.values()
                if record["query_is_builder_expression"]}
    assert sorted(builders) == sorted(BUILDER_TRANSLATIONS)
    for line, expression in builders.items():
        assert julia_to_python(expression) == BUILDER_TRANSLATIONS[line], line
    for untranslatable in ('get_frame(daf, "cell"; cache = true)', '"a" => x', '"$(x)"'):
        with pytest.raises(ValueError):
            julia_to_python(untranslatable)


@needs_parity
def test_doctest_calls_are_classified():
    queries = {record_id: doctest_query_call(record["call"]) for record_id, record in DOCTEST_CASES.items()}
    query_ids = sorted(record_id for record_id, call in queries.items() if call is not None)
    assert query_ids == sorted(record_id for record_id in DOCTEST_CASES if record_id.startswith("src/queries.jl:"))
    assert len(query_ids) == 22
    assert queries["src/queries.jl:793"] == ("cells", "@ cell : experiment =@ * donor : sex")
    for record_id in query_ids:
        assert queries[record_id][0] == DOCTEST_CASES[record_id]["daf"], record_id
