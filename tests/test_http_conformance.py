"""The conformance suite with HttpDaf as the reader: each data set is written by FilesDaf into a directory that a real
Range-honouring server (aiohttp) serves on 127.0.0.1, and every read back from storage goes through HttpDaf.

The suite is written for backends that write: the few tests that go on writing to the data set they read back (an
HttpDaf never writes) are expected to fail with the read-only error, strictly (if one passes, the list is stale), and
the zero-copy test is replaced by what HttpDaf promises instead (read-only arrays in memory, not file maps)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.testing import DafBackend, DafConformance, is_file_map

from .http_servers import ServedRoot

pytest.importorskip("aiohttp", reason="aiohttp (the test extra) serves the Range-honouring server")

_SERVED = ServedRoot("pydaf-http-conformance-")


class HttpBackend(DafBackend):
    """FilesDaf writes; reading back from storage (``reopen``) is an HttpDaf of the served directory."""

    name = "http"
    _numbers = itertools.count()

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.FilesDaf(_SERVED.path / f"{next(self._numbers)}.daf", "w", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        path = Path(daf.complete_path())
        daf.close()
        if mode != "r":
            return pydaf.FilesDaf(path, mode, name=daf.name)
        return pydaf.HttpDaf(f"{_SERVED.url}/{path.name}", name=daf.name)


class TestHttpDaf(DafConformance):
    backend = HttpBackend()

    def reopen(self, daf: pydaf.DafReader) -> pydaf.DafReader:
        """Read back through HttpDaf (the suite's writes go to FilesDaf, before)."""
        return self.backend.reopen(daf, "r")

    #: (HttpDaf reads into memory: test_stored_numbers_are_read_only_arrays_in_memory, below, says what it promises)
    test_stored_numbers_are_file_maps = None


#: Tests that write to the data set after reading it back from storage, which an HttpDaf refuses.
WRITES_AFTER_READING_BACK = (
    "test_scalar_overwrite_and_delete", "test_delete_axis_deletes_dependents",
    "test_vector_overwrite_delete_and_counters", "test_c_order_and_dataframe_inputs", "test_relayout",
    "test_large_sparse_relayout_uses_kernel", "test_square_matrix_stored_once",
    "test_matrix_overwrite_delete_and_counters", "test_reorder_axes_permutes_every_property",
    "test_reorder_interrupted_at_each_step_is_reset")


def _fails_as_read_only(name: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, raises=(pydaf.DafReadOnlyError, pydaf.DafTypeError),
                             reason=f"{name} writes to the data set it read back: an HttpDaf is read-only")


def expect_read_only_failures(suite: type) -> None:
    """Mark the conformance tests of ``suite`` (a served, read-only backend's) that write to what they read back as
    strict expected failures."""
    for name in WRITES_AFTER_READING_BACK:
        test = getattr(DafConformance, name)

        def expected_to_fail(self, *arguments, _test=test, **keywords):
            return _test(self, *arguments, **keywords)

        expected_to_fail.__name__ = name
        expected_to_fail.__wrapped__ = test  # (keeps the fixtures pytest reads from the original)
        expected_to_fail.pytestmark = list(getattr(test, "pytestmark", []))  # (and its parameters)
        setattr(suite, name, _fails_as_read_only(name)(expected_to_fail))


expect_read_only_failures(TestHttpDaf)


def test_stored_numbers_are_read_only_arrays_in_memory(tmp_path):
    """HttpDaf's counterpart of the suite's zero-copy test: what is read back is read-only, and not a file map."""
    backend = TestHttpDaf.backend
    daf = backend.new(tmp_path, "maps!").add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_vector("cell", "age", [1, 2, 3, 4])
    daf.set_matrix("cell", "gene", "dense", np.ones((4, 3)), relayout=False)
    daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.eye(4, 3)), relayout=False)
    daf = backend.reopen(daf, "r")
    assert isinstance(daf, pydaf.HttpDaf)
    sparse = daf.get_stored_matrix("cell", "gene", "sparse")
    for array in (daf.get_vector("cell", "age"), daf.get_matrix("cell", "gene", "dense"), sparse.colptr,
                  sparse.rowval, sparse.nzval):
        assert not is_file_map(array) and not array.flags.writeable
