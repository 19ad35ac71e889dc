"""Julia's recorded composition cases of views, chains, copies, concatenation, read-only arrays and keys
(``composition_cases.json``, see ``tests/composition.py``), on MemoryDaf and on memory-mapped H5df."""

from __future__ import annotations

import pytest

from .composition import CASES, run_record, skip_reason
from .julia_examples import needs_fixtures
from .parity import needs_parity

BACKENDS = ("memory", "h5df")


def _params() -> list:
    params = []
    for record in CASES:
        for backend in BACKENDS:
            reason = skip_reason(record, backend)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            params.append(pytest.param(record, backend, id=f"{record['id']}-{backend}", marks=marks))
    return params or [pytest.param(None, None, id="fixtures-absent")]


@needs_fixtures
@needs_parity
@pytest.mark.parametrize(("record", "backend"), _params())
def test_composition_case(record, backend, tmp_path):
    run_record(record, backend, tmp_path)
