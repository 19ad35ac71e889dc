"""Julia's recorded query results (``../shared/fixtures/parity``): every record of ``doctest_cases.json`` (the query
doctests of ``src/queries.jl`` and the reader/writer/example-data doctests) and of ``inline_query_cases.json``
(``test/queries.jl``), the inline ones on every backend of ``conftest.BACKENDS``. The comparison rules are in
``parity.py``."""

from __future__ import annotations

import pytest

import pydaf

from .conftest import BACKENDS
from .julia_examples import needs_fixtures
from .parity import (
    apply_setup_ops,
    assert_api_result,
    assert_doctest_result,
    assert_error_message,
    assert_frame,
    assert_inline_result,
    cached_example,
    daf_factory,
    doctest_query_call,
    eval_builder,
    expected_error,
    fresh_example,
    load_cases,
    needs_parity,
    run_api_call,
)

DOCTEST_CASES = load_cases("doctest_cases.json")
INLINE_CASES = load_cases("inline_query_cases.json")
NO_DAF_KINDS = ("parse_error", "canonical_string")
ABSENT = [pytest.param(None, None, id="fixtures-absent")]


def _doctest_params() -> list:
    return [pytest.param(record, id=f"{record['id']}-{record['kind']}") for record in DOCTEST_CASES] or \
        [pytest.param(None, id="fixtures-absent")]


def _inline_params() -> list:
    params = []
    for record in INLINE_CASES:
        backends = ("none",) if record["kind"] in NO_DAF_KINDS else BACKENDS
        params.extend(pytest.param(record, backend, id=f"{record['id']}-{record['kind']}-{backend}")
                      for backend in backends)
    return params or ABSENT


class _Examples(dict):
    """The Julia variables of a doctest whose setup only binds an example data set (``metacells = ...``)."""

    def __init__(self, which: str, make) -> None:
        super().__init__()
        self.which, self.make = which, make

    def __missing__(self, name: str) -> pydaf.DafWriter:
        self[name] = self.make(self.which)
        return self[name]


@needs_fixtures
@needs_parity
@pytest.mark.parametrize("record", _doctest_params())
def test_doctest_case(record):
    query_call = doctest_query_call(record["call"])
    if query_call is not None:
        variable, query = query_call
        if record["setup_ops"]:
            daf = apply_setup_ops(record["setup_ops"])[variable]
        else:
            assert record["setup"] is None, record["id"]
            daf = cached_example(record["daf"])
        assert_doctest_result(daf[query], record["kind"], record["expected"])
    else:
        # Reader/writer calls may change the data set or depend on its version counters: always a fresh one.
        variables = apply_setup_ops(record["setup_ops"]) if record["setup_ops"] else _Examples(record["daf"],
                                                                                               fresh_example)
        assert record["setup_ops"] or record["setup"] is None, record["id"]
        result = run_api_call(record["call"], variables, fresh_example)
        assert_api_result(result, record["kind"], record["expected"])


def _query(record, daf=None):
    return eval_builder(record["query"], daf) if record["query_is_builder_expression"] else record["query"]


def _raises_error(record, action) -> str:
    with pytest.raises(pydaf.DafError) as error:
        action()
    assert_error_message(str(error.value), expected_error(record))
    return str(error.value)


@needs_fixtures
@needs_parity
@pytest.mark.parametrize(("record", "backend"), _inline_params())
def test_inline_case(record, backend, tmp_path):
    from pydaf.queries import is_axis_query, parse_query, query_axis_name, query_result_dimensions

    kind = record["kind"]
    if kind == "canonical_string":
        assert record["query_is_builder_expression"], record["id"]
        assert str(eval_builder(record["query"])) == record["expected"]
        return
    if kind == "parse_error":
        assert not record["query_is_builder_expression"], record["id"]
        _raises_error(record, lambda: parse_query(record["query"]))
        return

    daf = apply_setup_ops(record["setup_ops"], new_daf=daf_factory(backend, tmp_path))["daf"]
    assert daf.name == "memory!"
    if kind == "query":
        query, checks = _query(record, daf), record["checks"]
        dimensions = checks["query_result_dimensions"]
        assert checks["has_query"] is True and checks["query_requires_relayout"] is False, record["id"]
        assert daf.has_query(query) is True
        assert daf.query_requires_relayout(query) is False
        assert query_result_dimensions(query) == dimensions
        assert is_axis_query(query) is checks["is_axis_query"]
        if checks["is_axis_query"]:
            assert query_axis_name(query) == checks["query_axis_name"]
        else:
            assert checks["query_axis_name"] is None, record["id"]  # get_result does not ask it of other queries
        assert_inline_result(daf.get_query(query, cache=checks["cache"]), record["expected"], dimensions)
    elif kind == "query_error":
        query = _query(record, daf)
        message = _raises_error(record, lambda: daf[query])
        checks = record.get("checks")
        if checks is not None:  # test_invalid
            with pytest.raises(pydaf.DafError) as error:
                query_result_dimensions(query)
            assert_error_message(str(error.value), checks["query_result_dimensions_error"])
            assert checks["has_query"] is False, record["id"]
            try:
                has_query = daf.has_query(query)
            except pydaf.DafError as has_query_error:
                assert_error_message(str(has_query_error), expected_error(record))
            else:
                assert has_query is False, f"has_query is true for an invalid query; daf[query] raised:\n{message}"
    elif kind == "frame":
        assert_frame(_query(record, daf), record["expected"])
    elif kind == "frame_error":
        _raises_error(record, lambda: _query(record, daf))
    else:
        raise AssertionError(f"unknown record kind: {kind}")
