"""What a user needs to find their way in queries: ``docs/queries.md`` (its examples run, its lists of operators and
operations are complete), ``help(pydaf.queries)``, and errors that help (how to escape a value, the closest operation
names, what exists), after Julia's messages, which stay unchanged above the hints."""

from __future__ import annotations

import doctest
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.errors import DafMissingError, DafQueryError
from pydaf.queries import Axis, IsEqual, escape_value, parse_query, unescape_value
from pydaf.queries.query import _OPERATIONS

DOCS = Path(__file__).resolve().parent.parent / "docs" / "queries.md"
ESCAPE_RULE = ("(in values, escape with \\ all but letters, digits, _ . + - and non-ASCII; pydaf.queries.escape_value "
               "does it)")


@pytest.fixture(scope="module")
def cells() -> pydaf.DafReader:
    return pydaf.example_cells_daf()


@pytest.fixture(scope="module")
def chain() -> pydaf.DafReader:
    return pydaf.example_chain_daf()


def _error(daf: pydaf.DafReader, query: str) -> str:
    with pytest.raises(pydaf.DafError) as raised:
        daf[query]
    return str(raised.value)


# docs/queries.md


def _table_rows(text: str) -> list[dict[str, str]]:
    """The rows of every Markdown table, as {column title: cell} (``\\|`` in a cell is a ``|``)."""
    rows: list[dict[str, str]] = []
    titles: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            titles = None
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if titles is None:
            titles = cells
        elif not all(set(cell) <= {"-"} for cell in cells):
            rows.append(dict(zip(titles, cells, strict=True)))
    return rows


def _code(cell: str) -> str:
    assert cell.startswith("`") and cell.endswith("`"), cell
    return cell[1:-1]


DOCS_TEXT = DOCS.read_text() if DOCS.exists() else ""
EXAMPLES = [(_code(row.get("Example") or row["Query"]), row.get("Result")) for row in _table_rows(DOCS_TEXT)
            if (row.get("Example") or row.get("Query", "")).startswith("`")]


def test_docs_queries_md_examples_pass():
    results = doctest.testfile(str(DOCS), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert results.failed == 0
    assert results.attempted >= 40


def test_docs_queries_md_tables_have_examples():
    assert len(EXAMPLES) >= 65, len(EXAMPLES)  # (4 kinds of results, 43 operators, 20 operations)


@pytest.mark.parametrize(("query", "shown"), EXAMPLES, ids=[query for query, _ in EXAMPLES])
def test_docs_queries_md_table_query_runs(cells, chain, query, shown):
    # The page's rule: a query runs on the example cells, or on the chain (cells + metacells) if it names a metacell.
    result = (chain if "metacell" in query else cells)[query]
    assert result is not None
    if shown is None:
        return
    if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", shown):
        decimals = len(shown.partition(".")[2])
        assert isinstance(result, np.number) and round(float(result), decimals) == float(shown), (result, shown)
    elif re.fullmatch(r"\w+", shown):
        assert result == shown
    # (else the result is described in words)


def test_docs_queries_md_lists_every_operator():
    first_cells = [_code(row["Operator"]) for row in _table_rows(DOCS_TEXT) if "Operator" in row]
    operators = (set(_OPERATIONS) - {"!"}) | {"||", "%", ">>", ">|", ">-", "#"}
    missing = [operator for operator in operators
               if not any(cell == operator or cell.startswith(operator + " ") for cell in first_cells)]
    assert not missing


def test_docs_queries_md_and_help_list_every_registered_operation():
    # In a fresh process: the operations importing pydaf registers (a test may register its own).
    script = ("import json, pydaf\nfrom pydaf.queries.registry import ELTWISE_OPERATIONS, REDUCTION_OPERATIONS\n"
              "print(json.dumps({name: list(operation.parameters) for registry in (ELTWISE_OPERATIONS, "
              "REDUCTION_OPERATIONS) for name, operation in registry.items()}))")
    registered = json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                                           text=True).stdout)
    assert len(registered) == 20
    rows = {_code(row["Operation"]): row["Parameters"] for row in _table_rows(DOCS_TEXT) if "Operation" in row}
    assert set(rows) == set(registered)
    for name, parameters in registered.items():
        for parameter in parameters:
            assert re.search(rf"\b{parameter}\b", rows[name]), (name, parameter)
        assert f"``{name}" in pydaf.queries.__doc__ or f"``% {name}" in pydaf.queries.__doc__ \
            or f"``>> {name}" in pydaf.queries.__doc__, name


def test_help_of_pydaf_queries_summarises_and_points_to_the_docs():
    text = pydaf.queries.__doc__
    assert "docs/queries.md" in text
    assert len(text.splitlines()) <= 60
    for builder in ("Axis", "LookupScalar", "LookupVector", "LookupMatrix", "Names", "AsAxis", "SquareColumnIs",
                    "SquareRowIs", "BeginMask", "EndMask", "AndMask", "OrNegatedMask", "XorMask", "IfMissing",
                    "IfNot", "IsLess", "IsGreater", "IsMatch", "IsNotMatch", "ReduceToColumn", "ReduceToRow",
                    "GroupBy", "GroupRowsBy", "GroupColumnsBy", "CountBy"):
        assert builder in text, builder
    assert "escape_value" in text and "T\\ cell" in text


# Parse errors: how to escape a value.


def test_a_value_with_a_space_hints_at_its_escaped_form(cells):
    message = _error(cells, "@ donor [ sex = T cell ]")
    assert message == ("expected: operator\n"
                       "in: @ donor [ sex = T cell ]\n"
                       "at:                   ▲▲▲▲\n"
                       'hint: to use "T cell" as one value, write: T\\ cell\n' + ESCAPE_RULE)
    assert cells[r"@ donor [ sex = T\ cell ]"].size == 0  # (the hint's form parses)


@pytest.mark.parametrize(("query", "julia", "value", "escaped"), [
    ("@ donor [ sex = a,b ]", "unexpected character: ','", "a,b", "a\\,b"),
    ("@ donor [ sex = a(b ]", "unexpected character: '('", "a(b", "a\\(b"),
    ("@ donor [ sex ~ N(89|90) ]", "unexpected character: '('", "N(89|90)", "N\\(89\\|90\\)"),
    ("@ donor [ sex=a$b]", "unexpected character: '$'", "a$b", "a\\$b"),
    ("@ donor [ sex = a b c ]", "expected: operator", "a b c", "a\\ b\\ c"),
    ("@ donor [ sex = a]b ]", "expected: operator", "a]b", "a\\]b"),
    ("@ donor [ sex ~ fe.* ]", "expected: value", "fe.*", "fe.\\*"),
    ("@ donor [ sex ~ ^[A-U] ]", "expected: value", "^[A-U]", "\\^\\[A-U\\]"),
    ("@ donor [ sex ~ .*male ]", "expected: value", ".*male", "\\.\\*male"),
])
def test_a_value_with_symbols_hints_at_its_escaped_form(cells, query, julia, value, escaped):
    message = _error(cells, query)
    assert message.startswith(julia + "\nin: ")
    assert f'\nhint: to use "{value}" as one value, write: {escaped}\n{ESCAPE_RULE}' in message
    assert message.endswith(ESCAPE_RULE)
    fixed = query.replace(value, escaped) if value in query else query
    assert escaped == escape_value(value) and fixed != query
    cells[fixed]  # (the hint's form parses and runs)


def test_a_quoted_value_hints_that_values_are_not_quoted(cells):
    query = "@ donor [ sex = 'T cell' ]"
    message = _error(cells, query)
    assert message.startswith(f"unexpected character: '''\nin: {query}\nat: {' ' * query.index(chr(39))}▲\n")
    assert 'hint: values are not quoted; to use "T cell" as one value, write: T\\ cell' in message


def test_a_value_with_an_operator_inside_hints_at_escaping_when_the_query_fails(cells):
    # ``= N89/N90`` parses (a group by ``N90``); the error is Julia's, then the hint.
    message = _error(cells, "@ cell [ donor = N89/N90 ]")
    assert message.startswith("missing vector: N90\nfor the axis: cell\nin the daf data: cells!\n")
    assert 'hint: to use "N89/N90" as one value, write: N89\\/N90' in message
    message = _error(cells, "@ cell [ donor = a%b ]")
    assert message.startswith("unknown eltwise operation: b\n") and "write: a\\%b" in message
    # Compact queries (no space after the comparison) are not second-guessed.
    assert "hint:" not in _error(cells, "@cell[donor=N89]:agee")


def test_an_operator_without_its_space_hints_at_the_spaced_form(cells):
    message = _error(cells, "@ gene [ is_lateral &! is_lateral ]")
    assert message == ("unknown operator: &!\nin: @ gene [ is_lateral &! is_lateral ]\n"
                       "at:                     ▲▲\nhint: write it with a space: & !")


def test_a_correct_query_that_fails_gets_no_escaping_hint(cells):
    assert "hint" not in _error(cells, "@ donor [ sex = male ] : agee")
    assert "hint" not in _error(cells, "% Log base")


# Unknown operations and parameters.


def test_an_unknown_operation_lists_the_known_ones_closest_first(cells):
    message = _error(cells, "@ donor : age % Lgo")
    julia, listed, suggestion = message.rsplit("\n", 2)
    assert julia == "unknown eltwise operation: Lgo\nin: @ donor : age % Lgo\nat:                 ▲▲▲"
    assert listed.startswith("(the eltwise operations, closest first: Log, ")
    assert sorted(listed[listed.index(": ") + 2:-1].split(", ")) == [
        "Abs", "Clamp", "Convert", "Fraction", "Log", "Round", "Significant"]
    assert suggestion == "did you mean: Log?"
    message = _error(cells, "@ cell @ gene :: UMIs >| Summ")
    assert message.startswith("unknown reduce operation: Summ\nin: @ cell @ gene :: UMIs >| Summ\n")
    assert "\n(the reduce operations, closest first: Sum, " in message and message.endswith("did you mean: Sum?")
    assert len(message.splitlines()[3].partition("first: ")[2].split(", ")) == 13


def test_an_operation_of_the_other_kind_says_how_to_use_it(cells):
    assert _error(cells, "@ donor : age >> Log").endswith("\n(Log is an eltwise operation: % Log)")
    assert _error(cells, "@ donor : age % Sum").endswith("\n(Sum is a reduce operation: >> Sum, >| Sum or >- Sum)")


def test_an_unknown_parameter_lists_the_operation_parameters(cells):
    message = _error(cells, "@ donor : age % Log bsae 2")
    assert message == ("the parameter: bsae\ndoes not exist for the operation: Log\n"
                       "in: @ donor : age % Log bsae 2\nat:                     ▲▲▲▲\n"
                       "(its parameters: type, base, eps)")
    assert _error(cells, "@ donor : age >> Max type Int8").endswith("\n(its parameters: none)")


# Missing data: what exists.


def test_a_missing_axis_lists_the_axes(cells):
    assert _error(cells, "@ cel") == ("missing axis: cel\nfor: axis_vector\nof the daf data: cells!\n"
                                      "(its axes: cell, donor, experiment, gene)\ndid you mean: cell?")
    with pytest.raises(DafMissingError, match=r"\nof the daf data: cells!\n\(its axes: cell, donor, experiment, "
                                              r"gene\)\ndid you mean: gene\?\Z"):
        cells.axis_length("Gene")


def test_a_missing_vector_lists_the_vectors_of_its_axis(cells):
    assert _error(cells, "@ donor : agee") == ("missing vector: agee\nfor the axis: donor\nin the daf data: cells!\n"
                                               "(its vectors for the axis donor: age, sex)\ndid you mean: age?")
    # No close name: the list alone.
    assert _error(cells, "@ cell : sexx").endswith("in the daf data: cells!\n"
                                                   "(its vectors for the axis cell: donor, experiment)")
    with pytest.raises(DafMissingError, match=r"did you mean: sex\?\Z"):
        cells.get_vector("donor", "Sex")


def test_a_vector_of_another_axis_says_how_to_reach_it(cells, chain):
    assert _error(cells, "@ cell : age") == (
        "missing vector: age\nfor the axis: cell\nin the daf data: cells!\n"
        "(its vectors for the axis cell: donor, experiment)\n"
        "(a vector of the axis donor: reach it with the query: @ cell : donor : age)")
    assert cells["@ cell : donor : age"].size == 856  # (the suggested query)
    assert _error(chain, "@ gene : sex").endswith("\n(its vectors for the axis gene: is_lateral, is_marker)\n"
                                                  "(a vector of the axis donor)")
    assert "did you mean" not in _error(chain, "@ cell : color")  # (not close enough to donor)


def test_a_missing_matrix_lists_the_matrices_of_its_axes(cells):
    assert _error(cells, "@ cell @ gene :: UMI") == (
        "missing matrix: UMI\nfor the rows axis: cell\nand the columns axis: gene\n(and the other way around)\n"
        "in the daf data: cells!\n(its matrices for the axes cell and gene: UMIs)\ndid you mean: UMIs?")
    with pytest.raises(DafMissingError, match=r"\(its matrices for the axes gene and cell: UMIs\)\n"
                                              r"did you mean: UMIs\?\Z"):
        cells.get_matrix("gene", "cell", "umis")


def test_a_missing_scalar_lists_the_scalars(cells):
    assert _error(cells, ". organizm") == ("missing scalar: organizm\nin the daf data: cells!\n"
                                           "(its scalars: organism, reference)\ndid you mean: organism?")
    assert str(_raised(lambda: pydaf.MemoryDaf(name="empty!").get_scalar("version"))) == (
        "missing scalar: version\nin the daf data: empty!\n(its scalars: none)")


def test_a_long_list_of_names_is_cut(cells):
    daf = pydaf.MemoryDaf(name="many!").add_axis("cell", ["A"])
    for index in range(45):
        daf.set_vector("cell", f"v{index:02}", [index])
    message = str(_raised(lambda: daf.get_vector("cell", "v0")))
    assert "(its vectors for the axis cell: v00, v01, " in message
    assert ", v29, ... (and 15 more))\ndid you mean: v00 or v01 or v02?" in message


def _raised(call) -> BaseException:
    with pytest.raises(pydaf.DafError) as raised:
        call()
    return raised.value


def test_hints_are_only_computed_when_raising(cells):
    # has_query, defaults and IfMissing never build a message.
    assert not cells.has_query("@ donor : agee") and cells.get_vector("donor", "agee", default=None) is None
    assert cells["@ donor : agee || 0"].sum() == 0


# Escaping.


def test_the_empty_value_escapes_to_two_quotes_as_in_julia():
    assert escape_value("") == "''" and unescape_value("''") == ""
    assert str(Axis("cell") | IsEqual("")) == "@ cell = ''"
    assert str(parse_query("@ cell [ metacell = '' ]")) == "@ cell [ metacell = '' ]"


@pytest.mark.parametrize("value", ["a~b", ".x", "x.", "a.b", "a-b", "x_y", "T cell", "ACTG:Plate1", "a\\b", "é", ""])
def test_every_escaped_value_is_one_value(value):
    daf = pydaf.MemoryDaf(name="values!").add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "tag", [value, "other"])
    query = f"@ cell [ tag = {escape_value(value)} ] : tag"
    assert daf[query].tolist() == [value]
    assert str(parse_query(query)) == query == str(Axis("cell") | f"[ tag = {escape_value(value)} ] : tag")


def test_escaped_value_characters_and_non_ascii_characters_are_values():
    daf = pydaf.MemoryDaf(name="values!").add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "tag", ["é~.x", "x_yz"])
    assert daf[r"@ cell [ tag = \é\~.x ]"].tolist() == ["A"]
    assert daf[r"@ cell [ tag = x\_yz ]"].tolist() == ["B"]


def test_pairs_as_dict_of_none_is_none_as_in_julia():
    assert pydaf.pairs_as_dict(None) is None
    assert pydaf.pairs_as_dict([("a", 1)]) == {"a": 1}
    source = pydaf.MemoryDaf().set_scalar("version", 1)
    destination = pydaf.MemoryDaf()
    pydaf.copy_all(destination, source, empty=None, types=None, progress=False)
    assert destination.get_scalar("version") == 1


def test_error_messages_stay_julia_s_for_parse_errors_without_hints():
    with pytest.raises(DafQueryError) as raised:
        parse_query("@ cell : age >>")
    assert str(raised.value) == "expected: value\nin: @ cell : age >>\nat:                ▲"
