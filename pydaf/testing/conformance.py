"""The conformance suite: one set of tests that every backend must pass (zarr's ``zarr.testing.store.StoreTests``).

A backend's test module subclasses :class:`DafConformance` once, with :attr:`~DafConformance.backend` set to the
backend's :class:`~pydaf.testing.DafBackend` hooks: ``new`` (an empty writable data set), ``reopen`` (the same data
set read back from its storage) and, if it can, ``snapshot`` (what the storage holds, read around pydaf). Tests that
need a capability the backend's format does not declare skip, saying which; ``test_declared_capabilities`` checks
each declaration against behaviour.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf

from .. import SparseMatrixCSC, SparseVector
from .backend import DafBackend

NUMBER_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                 np.float32, np.float64]
INDEX_DTYPES = [np.int32, np.int64, np.uint32, np.uint64]


def sample_values(dtype: type, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic values of a storage type, with zeros (so sparse forms are meaningful) and extremes.

    Example:
        >>> import numpy as np
        >>> sample_values(np.uint8, (4,)).tolist()
        [0, 255, 0, 0]
    """
    generator = np.random.default_rng(seed)
    size = int(np.prod(shape))
    if dtype == np.bool_:
        values = generator.random(size) < 0.4
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        values = generator.integers(0, 100, size=size).astype(dtype)
        values[:: 3] = 0
        if size > 2:
            values[1], values[2] = info.max, info.min
    else:
        values = (generator.standard_normal(size) * 100).astype(dtype)
        values[:: 3] = 0
    return values.reshape(shape, order="F")


class DafConformance:
    """Behaviour every backend shares, tested through the public API (and, where the backend offers it, checked in
    its storage through the :meth:`~pydaf.testing.DafBackend.snapshot` backdoor). Subclass once per backend, setting
    :attr:`backend`; pytest collects the subclass (name it ``Test...``).

    Example:
        >>> import pydaf
        >>> from pydaf.testing import DafBackend
        >>> class Memory(DafBackend):
        ...     name = "memory"
        ...     def new(self, directory, name):
        ...         return pydaf.MemoryDaf(name=name)
        >>> class TestMemoryDaf(DafConformance):
        ...     backend = Memory()
        >>> TestMemoryDaf().reopen(pydaf.MemoryDaf(name="x!")).name
        'x!'
    """

    #: The hooks of the backend under test.
    backend: ClassVar[DafBackend]

    @pytest.fixture
    def daf(self, tmp_path: Path) -> pydaf.DafWriter:
        """A new, empty data set of the backend, named after it."""
        self.backend.capabilities  # noqa: B018 - (read before, not while, the test's data set is made)
        return self.backend.new(tmp_path, f"{self.backend.name}!")

    def reopen(self, daf: pydaf.DafReader) -> pydaf.DafWriter:
        """The data set as read back from storage (itself for in-memory backends)."""
        return self.backend.reopen(daf)  # type: ignore[return-value]

    def require(self, capability: str) -> None:
        """Skip the test unless the backend declares ``capability`` (an attribute of :class:`DafBackend`)."""
        if not getattr(self.backend, capability):
            pytest.skip(f"the backend: {self.backend.name} does not declare: {capability}")

    def cells(self, daf: pydaf.DafWriter) -> pydaf.DafWriter:
        return daf.add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Z"])

    # Scalars.

    @pytest.mark.parametrize("dtype", NUMBER_DTYPES)
    def test_scalar_types_round_trip(self, daf, dtype):
        value = sample_values(dtype, (3,))[1]
        daf.set_scalar("value", value)
        daf = self.reopen(daf)
        result = daf.get_scalar("value")
        assert result == value
        assert np.asarray(result).dtype == np.dtype(dtype)

    def test_python_scalars_become_int64_float64_bool(self, daf):
        daf.set_scalar("i", 3).set_scalar("f", 2.5).set_scalar("b", False)
        daf = self.reopen(daf)
        assert daf.get_scalar("i") == 3 and np.asarray(daf.get_scalar("i")).dtype == np.int64
        assert daf.get_scalar("f") == 2.5 and np.asarray(daf.get_scalar("f")).dtype == np.float64
        assert not daf.get_scalar("b") and np.asarray(daf.get_scalar("b")).dtype == np.bool_

    @pytest.mark.parametrize("text", ["human", "", "naïve – ünïcödé ✓", "x" * 1000])
    def test_string_scalars_round_trip(self, daf, text):
        daf.set_scalar("text", text)
        daf = self.reopen(daf)
        assert daf.get_scalar("text") == text
        assert isinstance(daf.get_scalar("text"), str)

    def test_scalar_defaults_and_missing(self, daf):
        assert daf.get_scalar("missing", default=None) is None
        assert daf.get_scalar("missing", default=7) == 7
        with pytest.raises(pydaf.DafMissingError, match=f"missing scalar: missing\nin the daf data: {daf.name}"):
            daf.get_scalar("missing")

    def test_scalar_overwrite_and_delete(self, daf):
        self.require("rewrites")
        daf.set_scalar("version", 1)
        with pytest.raises(pydaf.DafExistsError, match="existing scalar: version"):
            daf.set_scalar("version", 2)
        assert daf.get_scalar("version") == 1
        daf.set_scalar("version", "two", overwrite=True)
        assert self.reopen(daf).get_scalar("version") == "two"
        daf = self.reopen(daf)
        assert daf.scalars_set() == {"version"}
        daf.delete_scalar("version")
        assert not daf.has_scalar("version")
        daf.delete_scalar("version", must_exist=False)
        with pytest.raises(pydaf.DafMissingError, match="missing scalar: version"):
            daf.delete_scalar("version")

    @pytest.mark.parametrize("value", [1 + 2j, np.float16(1.5), np.datetime64("2020-01-01"), None, [1, 2], b"raw"])
    def test_unsupported_scalar_types_are_refused(self, daf, value):
        with pytest.raises(pydaf.DafTypeError):
            daf.set_scalar("bad", value)
        assert not daf.has_scalar("bad")

    # Axes.

    def test_axes(self, daf):
        self.cells(daf)
        daf = self.reopen(daf)
        assert daf.axes_set() == {"cell", "gene"}
        assert daf.has_axis("cell") and not daf.has_axis("donor")
        assert daf.axis_length("cell") == 4
        entries = daf.axis_vector("cell")
        assert entries.tolist() == ["A", "B", "C", "D"]
        assert entries.dtype == object and not entries.flags.writeable
        assert daf.axis_vector("donor", default=None) is None
        positions = daf.axis_dict("gene")
        assert positions == {"X": 0, "Y": 1, "Z": 2}
        with pytest.raises(TypeError):  # (it is the cache's: a caller must not change later lookups)
            positions["W"] = 3
        assert daf.axis_indices("gene", ["W"], allow_missing=True).tolist() == [-1]

    def test_axis_indices_and_entries(self, daf):
        self.cells(daf)
        assert daf.axis_indices("cell", ["D", "A"]).tolist() == [3, 0]
        assert daf.axis_indices("cell", ["", "B"], allow_empty=True).tolist() == [-1, 1]
        assert daf.axis_indices("cell", ["Q", "B"], allow_missing=True).tolist() == [-1, 1]
        with pytest.raises(pydaf.DafMissingError, match="missing entry: Q\nfor the axis: cell"):
            daf.axis_indices("cell", ["Q"])
        with pytest.raises(pydaf.DafMissingError, match="missing entry: \nfor the axis: cell"):
            daf.axis_indices("cell", [""], allow_missing=False)
        assert daf.axis_entries("cell", [2, 0]).tolist() == ["C", "A"]
        assert daf.axis_entries("cell", [2, -1], allow_empty=True).tolist() == ["C", ""]
        assert daf.axis_entries("cell").tolist() == ["A", "B", "C", "D"]
        with pytest.raises(pydaf.DafValueError, match="negative index"):
            daf.axis_entries("cell", [-1])
        with pytest.raises(pydaf.DafValueError, match="out of bounds"):
            daf.axis_entries("cell", [4])

    def test_empty_axis(self, daf):
        daf.add_axis("nothing", [])
        daf.set_vector("nothing", "x", np.zeros(0, np.float32))
        daf = self.reopen(daf)
        assert daf.axis_length("nothing") == 0
        assert daf.axis_vector("nothing").tolist() == []
        assert daf.get_vector("nothing", "x").dtype == np.float32
        assert daf.get_vector("nothing", "x").shape == (0,)

    def test_axis_errors_keep_data(self, daf):
        self.cells(daf)
        with pytest.raises(pydaf.DafShapeError, match="non-unique entries for new axis: donor"):
            daf.add_axis("donor", ["a", "b", "a"])
        assert not daf.has_axis("donor")
        with pytest.raises(pydaf.DafExistsError, match="existing axis: cell"):
            daf.add_axis("cell", ["Q"])
        assert daf.axis_vector("cell").tolist() == ["A", "B", "C", "D"]
        with pytest.raises(pydaf.DafTypeError):
            daf.add_axis("numbers", [1, 2, 3])
        with pytest.raises(pydaf.DafMissingError, match=f"missing axis: donor\nfor: axis_length\nof the daf data: "
                                                        f"{daf.name}"):
            daf.axis_length("donor")
        with pytest.raises(pydaf.DafMissingError, match="missing axis: donor"):
            daf.delete_axis("donor")
        daf.delete_axis("donor", must_exist=False)

    @pytest.mark.parametrize("name", ["", "a/b", "a\\b", ".hidden", "nul\0", "new\nline"])
    def test_invalid_names_are_refused(self, daf, name):
        self.cells(daf)
        with pytest.raises(pydaf.DafNameError, match="invalid"):
            daf.add_axis(name, ["a"])
        with pytest.raises(pydaf.DafNameError, match="invalid"):
            daf.set_scalar(name, 1)
        with pytest.raises(pydaf.DafNameError, match="invalid"):
            daf.set_vector("cell", name, 1)
        with pytest.raises(pydaf.DafNameError, match="invalid"):
            daf.set_matrix("cell", "gene", name, 1)
        assert daf.scalars_set() == set() and daf.vectors_set("cell") == set()

    def test_delete_axis_deletes_dependents(self, daf):
        self.require("rewrites")
        self.cells(daf).add_axis("donor", ["d1", "d2"])
        daf.set_vector("cell", "age", [1, 2, 3, 4]).set_vector("donor", "sex", ["m", "f"])
        daf.set_matrix("cell", "gene", "UMIs", np.ones((4, 3), np.int32))
        daf.set_matrix("cell", "cell", "edges", np.eye(4))
        version = daf.axis_version_counter("cell")
        daf.delete_axis("cell")
        assert daf.axis_version_counter("cell") == version + 1
        daf = self.reopen(daf)
        assert daf.axes_set() == {"gene", "donor"}
        assert daf.get_vector("donor", "sex").tolist() == ["m", "f"]
        daf.add_axis("cell", ["A", "B"])
        assert daf.vectors_set("cell") == set()
        assert daf.matrices_set("cell", "gene") == set() and daf.matrices_set("cell", "cell") == set()

    def test_add_axis_overwrite_deletes_dependents(self, daf):
        self.require("rewrites")
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4])
        daf.set_matrix("cell", "gene", "UMIs", np.ones((4, 3), np.int32))
        daf.add_axis("cell", ["P", "Q"], overwrite=True)
        assert daf.axis_vector("cell").tolist() == ["P", "Q"]
        assert daf.vectors_set("cell") == set()
        assert not daf.has_matrix("cell", "gene", "UMIs")

    # Vectors.

    @pytest.mark.parametrize("dtype", NUMBER_DTYPES)
    def test_dense_vector_types_round_trip(self, daf, dtype):
        self.cells(daf)
        values = sample_values(dtype, (4,))
        daf.set_vector("cell", "values", values)
        daf = self.reopen(daf)
        result = daf.get_vector("cell", "values")
        assert result.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(result, values)
        assert not result.flags.writeable
        assert isinstance(daf.get_stored_vector("cell", "values"), np.ndarray)

    def test_string_vectors_round_trip(self, daf):
        self.cells(daf)
        dense = np.array(["T", "B", "NK", "ünï ✓"])
        mostly_empty = ["", "", "", "long enough text"]
        daf.set_vector("cell", "type", dense).set_vector("cell", "note", mostly_empty)
        daf = self.reopen(daf)
        assert daf.get_vector("cell", "type").tolist() == dense.tolist()
        assert daf.get_vector("cell", "note").tolist() == mostly_empty
        assert daf.get_vector("cell", "type").dtype == object

    @pytest.mark.parametrize("dtype", NUMBER_DTYPES)
    @pytest.mark.parametrize("indtype", INDEX_DTYPES)
    def test_sparse_vector_round_trip(self, daf, dtype, indtype):
        self.cells(daf)
        values = sample_values(dtype, (4,), seed=3)
        values[1] = 0
        sparse = SparseVector.from_dense(values, indtype=indtype)
        daf.set_vector("cell", "sparse", sparse)
        daf = self.reopen(daf)
        stored = daf.get_stored_vector("cell", "sparse")
        assert isinstance(stored, SparseVector)
        assert stored.nzind.dtype == np.dtype(indtype) and stored.nzval.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(stored.nzind, sparse.nzind)
        np.testing.assert_array_equal(daf.get_vector("cell", "sparse"), values)
        assert not stored.nzind.flags.writeable and not stored.nzval.flags.writeable

    def test_scipy_sparse_and_all_true_bool_vectors(self, daf):
        self.cells(daf)
        daf.set_vector("cell", "row", sp.csr_matrix(np.array([[0, 2.5, 0, 1]])))
        daf.set_vector("cell", "column", sp.csc_matrix(np.array([[0], [0], [3], [0]], np.int16)))
        daf.set_vector("cell", "mask", SparseVector(4, np.array([1, 4]), np.array([True, True])))
        daf = self.reopen(daf)
        assert daf.get_vector("cell", "row").tolist() == [0, 2.5, 0, 1]
        assert daf.get_vector("cell", "column").tolist() == [0, 0, 3, 0]
        assert daf.get_vector("cell", "column").dtype == np.int16
        assert daf.get_vector("cell", "mask").tolist() == [True, False, False, True]
        assert daf.get_stored_vector("cell", "mask").nnz == 2

    def test_vector_fill_and_eltype(self, daf):
        self.cells(daf)
        daf.set_vector("cell", "seven", 7).set_vector("cell", "half", 0.5, eltype="Float32")
        daf.set_vector("cell", "label", "x").set_vector("cell", "small", [1, 2, 3, 4], eltype=np.uint8)
        daf.set_vector("cell", "zero", 0)
        daf = self.reopen(daf)
        assert daf.get_vector("cell", "seven").tolist() == [7] * 4
        assert daf.get_vector("cell", "seven").dtype == np.int64
        assert daf.get_vector("cell", "half").dtype == np.float32
        assert daf.get_vector("cell", "label").tolist() == ["x"] * 4
        assert daf.get_vector("cell", "small").dtype == np.uint8
        assert daf.get_vector("cell", "zero").tolist() == [0] * 4

    def test_vector_defaults(self, daf):
        self.cells(daf)
        assert daf.get_vector("cell", "age", default=None) is None
        assert daf.get_vector("cell", "age", default=1.5).tolist() == [1.5] * 4
        assert daf.get_vector("cell", "age", default=[4, 3, 2, 1]).tolist() == [4, 3, 2, 1]
        assert daf.get_vector("cell", "age", default="?").tolist() == ["?"] * 4
        with pytest.raises(pydaf.DafShapeError, match="the length: 2\nof the default for the vector: age\nis "
                                                      "different from the length: 4\nof the axis: cell"):
            daf.get_vector("cell", "age", default=[1, 2])
        with pytest.raises(pydaf.DafMissingError, match="missing vector: age\nfor the axis: cell\nin the daf data"):
            daf.get_vector("cell", "age")
        with pytest.raises(pydaf.DafMissingError, match="missing axis: donor\nfor the vector: age\nof the daf"):
            daf.get_vector("donor", "age")

    def test_reserved_vectors(self, daf):
        self.cells(daf)
        assert daf.has_vector("cell", "name") and daf.has_vector("cell", "index")
        assert daf.get_vector("cell", "name").tolist() == ["A", "B", "C", "D"]
        assert daf.get_vector("cell", "index").tolist() == [0, 1, 2, 3]
        assert daf.vectors_set("cell") == set()
        for name in ("name", "index"):
            with pytest.raises(pydaf.DafNameError, match=f"setting the reserved vector: {name}\nfor the axis: cell"):
                daf.set_vector("cell", name, 1)
            with pytest.raises(pydaf.DafNameError, match="reserved"):
                daf.delete_vector("cell", name)
            with pytest.raises(pydaf.DafNameError, match="reserved"), daf.empty_dense_vector("cell", name, "Int8"):
                pass

    def test_vector_errors_keep_data(self, daf):
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4])
        with pytest.raises(pydaf.DafShapeError, match="the length: 3\nof the vector: age\nis different from the "
                                                      "length: 4\nof the axis: cell"):
            daf.set_vector("cell", "age", [1, 2, 3], overwrite=True)
        with pytest.raises(pydaf.DafExistsError, match="existing vector: age\nfor the axis: cell"):
            daf.set_vector("cell", "age", [5, 6, 7, 8])
        with pytest.raises(pydaf.DafTypeError):
            daf.set_vector("cell", "age", np.array([1, 2, 3, 4], np.complex64), overwrite=True)
        with pytest.raises(pydaf.DafTypeError):
            daf.set_vector("cell", "age", np.array([1, 2, 3, 4], np.float16), overwrite=True)
        with pytest.raises(pydaf.DafTypeError):
            daf.set_vector("cell", "age", np.array([1, "a", 3, 4], object), overwrite=True)
        with pytest.raises(pydaf.DafValueError, match="entry names of the: vector\nmismatch the entry names of the "
                                                      "axis: cell\n\\(first missing: A \\(1 missing\\); first "
                                                      "extra: E"):
            daf.set_vector("cell", "age", pd.Series([1, 2, 3, 4], index=["D", "C", "B", "E"]), overwrite=True)
        with pytest.raises(pydaf.DafInexactError, match="value: 300\nat the position: 2 \\(entry: C\\)"):
            daf.set_vector("cell", "age", [1, 2, 300, 4], eltype="UInt8", overwrite=True)
        with pytest.raises(pydaf.DafShapeError):
            daf.set_vector("cell", "age", np.ones((2, 2)), overwrite=True)
        assert self.reopen(daf).get_vector("cell", "age").tolist() == [1, 2, 3, 4]

    def test_vector_overwrite_delete_and_counters(self, daf):
        self.require("rewrites")
        self.cells(daf)
        assert daf.vector_version_counter("cell", "age") == 0
        daf.set_vector("cell", "age", [1, 2, 3, 4])
        assert daf.vector_version_counter("cell", "age") == 1
        first = daf.get_vector("cell", "age")
        daf.set_vector("cell", "age", pd.Series([4, 3, 2, 1], index=["A", "B", "C", "D"]), overwrite=True)
        assert daf.vector_version_counter("cell", "age") == 2
        assert first.tolist() == [1, 2, 3, 4] or not self.backend.overwrite_keeps_returned_arrays
        assert daf.get_vector("cell", "age").tolist() == [4, 3, 2, 1]
        daf.delete_vector("cell", "age")
        daf = self.reopen(daf)
        assert not daf.has_vector("cell", "age")
        with pytest.raises(pydaf.DafMissingError, match="missing vector: age"):
            daf.delete_vector("cell", "age")
        daf.delete_vector("cell", "age", must_exist=False)

    def test_pandas_vector(self, daf):
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4])
        series = daf.get_pd_vector("cell", "age")
        assert series.index.tolist() == ["A", "B", "C", "D"] and series.name == "age"
        assert series["C"] == 3
        assert daf.get_pd_vector("cell", "missing", default=None) is None

    # Matrices.

    @pytest.mark.parametrize("dtype", NUMBER_DTYPES)
    def test_dense_matrix_types_round_trip(self, daf, dtype):
        self.cells(daf)
        values = sample_values(dtype, (4, 3))
        daf.set_matrix("cell", "gene", "values", values)
        daf = self.reopen(daf)
        result = daf.get_matrix("cell", "gene", "values")
        assert result.shape == (4, 3) and result.dtype == np.dtype(dtype)
        assert result.flags.f_contiguous and not result.flags.writeable
        np.testing.assert_array_equal(result, values)
        flipped = daf.get_matrix("gene", "cell", "values", relayout=False)
        np.testing.assert_array_equal(flipped, values.T)
        assert flipped.flags.f_contiguous

    def test_c_order_and_dataframe_inputs(self, daf):
        self.cells(daf)
        values = np.arange(12, dtype=np.float64).reshape(4, 3)
        daf.set_matrix("cell", "gene", "c_order", values)
        frame = pd.DataFrame(values, index=["A", "B", "C", "D"], columns=["X", "Y", "Z"])
        daf.set_matrix("cell", "gene", "frame", frame)
        daf = self.reopen(daf)
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "c_order"), values)
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "frame"), values)
        reordered = pd.DataFrame(values[::-1, ::-1], index=["D", "C", "B", "A"], columns=["Z", "Y", "X"])
        np.testing.assert_array_equal(daf.set_matrix("cell", "gene", "reordered", reordered)  # (aligned by label)
                                      .get_matrix("cell", "gene", "reordered"), values)
        bad = pd.DataFrame(values, index=["A", "B", "C", "D"], columns=["Z", "Y", "W"])
        with pytest.raises(pydaf.DafValueError, match="column names of the: matrix"):
            daf.set_matrix("cell", "gene", "bad", bad)

    def test_string_matrices(self, daf):
        self.cells(daf)
        dense = np.array([["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"], ["j", "k", "l"]], dtype=object)
        sparse = np.full((4, 3), "", dtype=object)
        sparse[2, 1] = "only one"
        daf.set_matrix("cell", "gene", "dense", dense).set_matrix("cell", "gene", "sparse", sparse)
        daf = self.reopen(daf)
        assert daf.get_matrix("cell", "gene", "dense").tolist() == dense.tolist()
        assert daf.get_matrix("gene", "cell", "dense", relayout=False).tolist() == dense.T.tolist()
        assert daf.get_matrix("cell", "gene", "sparse").tolist() == sparse.tolist()
        assert daf.get_matrix("gene", "cell", "sparse").tolist() == sparse.T.tolist()

    @pytest.mark.parametrize("dtype", NUMBER_DTYPES)
    @pytest.mark.parametrize("indtype", INDEX_DTYPES)
    def test_sparse_matrix_round_trip(self, daf, dtype, indtype):
        self.cells(daf)
        values = sample_values(dtype, (4, 3), seed=5)
        values[0, :] = 0
        matrix = SparseMatrixCSC.from_scipy(sp.csc_matrix(values), indtype=indtype)
        daf.set_matrix("cell", "gene", "sparse", matrix)
        daf = self.reopen(daf)
        stored = daf.get_stored_matrix("cell", "gene", "sparse")
        assert isinstance(stored, SparseMatrixCSC)
        assert stored.colptr.dtype == np.dtype(indtype) and stored.rowval.dtype == np.dtype(indtype)
        assert stored.colptr[0] == 1 and stored.colptr[-1] == stored.nnz + 1
        result = daf.get_matrix("cell", "gene", "sparse")
        assert sp.issparse(result) and result.format == "csc" and result.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(result.toarray(), values)
        flipped = daf.get_stored_matrix("gene", "cell", "sparse", relayout=False)
        assert isinstance(flipped, SparseMatrixCSC) and flipped.colptr.dtype == np.dtype(indtype)
        np.testing.assert_array_equal(flipped.to_dense(), values.T)

    def test_scipy_inputs_and_bool_sparse(self, daf):
        self.cells(daf)
        values = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 3], [0, 0, 0]], np.float32)
        daf.set_matrix("cell", "gene", "csr", sp.csr_matrix(values))
        daf.set_matrix("cell", "gene", "coo", sp.coo_array(values))
        daf.set_matrix("cell", "gene", "mask", sp.csc_matrix(values != 0))
        daf = self.reopen(daf)
        for name in ("csr", "coo"):
            np.testing.assert_array_equal(daf.get_matrix("cell", "gene", name).toarray(), values)
        mask = daf.get_matrix("gene", "cell", "mask")
        assert mask.dtype == np.bool_
        np.testing.assert_array_equal(mask.toarray(), (values != 0).T)

    def test_matrix_fill(self, daf):
        self.cells(daf)
        daf.set_matrix("cell", "gene", "ones", 1, eltype="UInt8").set_matrix("cell", "gene", "zeros", 0.0)
        daf.set_matrix("cell", "gene", "text", "x")
        daf = self.reopen(daf)
        ones = daf.get_matrix("gene", "cell", "ones")
        assert ones.dtype == np.uint8 and ones.shape == (3, 4) and (ones == 1).all()
        zeros = daf.get_matrix("cell", "gene", "zeros")
        zeros = zeros.toarray() if sp.issparse(zeros) else zeros
        assert zeros.shape == (4, 3) and not zeros.any()
        assert daf.get_matrix("cell", "gene", "text").tolist() == [["x"] * 3] * 4

    def test_relayout(self, daf):
        self.cells(daf)
        values = np.arange(12, dtype=np.int32).reshape(4, 3)
        daf.set_matrix("cell", "gene", "one", values, relayout=False)
        assert daf.has_matrix("gene", "cell", "one")
        assert not daf.has_matrix("gene", "cell", "one", relayout=False)
        assert daf.matrices_set("gene", "cell") == {"one"}
        assert daf.matrices_set("gene", "cell", relayout=False) == set()
        computed = daf.get_matrix("gene", "cell", "one")
        np.testing.assert_array_equal(computed, values.T)
        assert computed.flags.f_contiguous and not computed.flags.writeable
        assert daf.get_matrix("gene", "cell", "one") is computed  # cached
        with pytest.raises(pydaf.DafMissingError, match="missing matrix: one\nfor the rows axis: gene\nand the "
                                                        "columns axis: cell\nin the daf data"):
            daf.get_matrix("gene", "cell", "one", relayout=False)
        daf.relayout_matrix("cell", "gene", "one")
        daf = self.reopen(daf)
        np.testing.assert_array_equal(daf.get_matrix("gene", "cell", "one", relayout=False), values.T)
        with pytest.raises(pydaf.DafExistsError, match="existing matrix: one\nfor the rows axis: gene"):
            daf.relayout_matrix("cell", "gene", "one")
        with pytest.raises(pydaf.DafValueError, match="can't relayout square matrix"):
            daf.add_axis("x", ["1"]).set_matrix("x", "x", "s", 1).relayout_matrix("x", "x", "s")

    @pytest.mark.parametrize("block_entries", [1 << 22, 50_000])
    def test_large_sparse_relayout_uses_kernel(self, daf, monkeypatch, block_entries):
        from ..kernels import relayout

        # One block, or ~24 blocks transposed in parallel waves (the stored input pages released after each wave).
        monkeypatch.setattr(relayout, "_BLOCK_ENTRIES", block_entries)
        daf.add_axis("cell", [f"c{index}" for index in range(3000)]).add_axis("gene", [f"g{index}" for index in
                                                                                      range(800)])
        matrix = sp.random(3000, 800, density=0.5, format="csc", dtype=np.float32, random_state=7)
        assert matrix.nnz >= relayout.RELAYOUT_NUMBA_MIN_ENTRIES
        daf.set_matrix("cell", "gene", "big", matrix, relayout=False)
        daf = self.reopen(daf)
        daf.relayout_matrix("cell", "gene", "big")
        assert (daf.get_matrix("cell", "gene", "big", relayout=False) != matrix).nnz == 0
        daf = self.reopen(daf)
        flipped = daf.get_matrix("gene", "cell", "big", relayout=False)
        assert (flipped != matrix.T.tocsc()).nnz == 0
        assert flipped.has_sorted_indices

    def test_square_matrix_stored_once(self, daf):
        self.cells(daf)
        values = np.arange(16.0).reshape(4, 4)
        daf.set_matrix("cell", "cell", "edges", values)
        daf = self.reopen(daf)
        np.testing.assert_array_equal(daf.get_matrix("cell", "cell", "edges"), values)
        assert daf.matrices_set("cell", "cell") == {"edges"}
        if self.backend.rewrites:
            daf.delete_matrix("cell", "cell", "edges")
            assert not daf.has_matrix("cell", "cell", "edges")

    def test_matrix_errors_keep_data(self, daf):
        self.cells(daf)
        values = np.ones((4, 3))
        daf.set_matrix("cell", "gene", "m", values)
        with pytest.raises(pydaf.DafShapeError, match="the length: 3\nof the rows of the matrix: m\nis different "
                                                      "from the length: 4\nof the axis: cell"):
            daf.set_matrix("cell", "gene", "m", np.zeros((3, 3)), overwrite=True)
        with pytest.raises(pydaf.DafShapeError, match="of the columns of the matrix: m"):
            daf.set_matrix("cell", "gene", "m", np.zeros((4, 2)), overwrite=True)
        with pytest.raises(pydaf.DafExistsError, match="existing matrix: m\nfor the rows axis: cell\nand the columns "
                                                       "axis: gene"):
            daf.set_matrix("cell", "gene", "m", np.zeros((4, 3)))
        with pytest.raises(pydaf.DafExistsError, match="existing matrix: m\nfor the rows axis: gene"):
            daf.set_matrix("gene", "cell", "m", np.zeros((3, 4)))
        with pytest.raises(pydaf.DafTypeError):
            daf.set_matrix("cell", "gene", "m", np.zeros((4, 3), np.complex128), overwrite=True)
        with pytest.raises(pydaf.DafMissingError, match="missing axis: donor\nfor the rows of the matrix: m"):
            daf.set_matrix("donor", "gene", "m", 1)
        with pytest.raises(pydaf.DafMissingError, match="missing axis: donor\nfor the columns of the matrix: m"):
            daf.get_matrix("cell", "donor", "m")
        daf = self.reopen(daf)
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "m"), values)
        np.testing.assert_array_equal(daf.get_matrix("gene", "cell", "m", relayout=False), values.T)

    def test_matrix_defaults(self, daf):
        self.cells(daf)
        assert daf.get_matrix("cell", "gene", "m", default=None) is None
        zeros = daf.get_matrix("cell", "gene", "m", default=0)
        assert sp.issparse(zeros) and zeros.shape == (4, 3) and zeros.nnz == 0
        assert (daf.get_matrix("cell", "gene", "m", default=2.5) == 2.5).all()
        given = np.arange(12).reshape(4, 3)
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "m", default=given), given)
        with pytest.raises(pydaf.DafShapeError, match="of the rows of the default for the matrix: m"):
            daf.get_matrix("cell", "gene", "m", default=np.zeros((3, 3)))
        with pytest.raises(pydaf.DafMissingError, match="missing matrix: m\nfor the rows axis: cell\nand the columns "
                                                        "axis: gene\n\\(and the other way around\\)"):
            daf.get_matrix("cell", "gene", "m")

    def test_matrix_overwrite_delete_and_counters(self, daf):
        self.require("rewrites")
        self.cells(daf)
        daf.set_matrix("cell", "gene", "m", np.ones((4, 3)))
        assert daf.matrix_version_counter("gene", "cell", "m") == 1
        daf.set_matrix("gene", "cell", "m", np.zeros((3, 4)), overwrite=True)
        assert daf.matrix_version_counter("cell", "gene", "m") == 2
        assert (daf.get_matrix("cell", "gene", "m", relayout=False) == 0).all()
        daf.delete_matrix("cell", "gene", "m", relayout=False)
        assert daf.has_matrix("cell", "gene", "m") and not daf.has_matrix("cell", "gene", "m", relayout=False)
        daf.delete_matrix("cell", "gene", "m")
        daf = self.reopen(daf)
        assert not daf.has_matrix("gene", "cell", "m")
        with pytest.raises(pydaf.DafMissingError, match="missing matrix: m"):
            daf.delete_matrix("cell", "gene", "m")
        daf.delete_matrix("cell", "gene", "m", must_exist=False)

    def test_pandas_matrix(self, daf):
        self.cells(daf)
        daf.set_matrix("cell", "gene", "dense", np.arange(12).reshape(4, 3))
        daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.eye(4, 3)))
        frame = daf.get_pd_matrix("cell", "gene", "dense")
        assert frame.index.tolist() == ["A", "B", "C", "D"] and frame.columns.tolist() == ["X", "Y", "Z"]
        assert frame.loc["B", "Z"] == 5
        sparse = daf.get_pd_matrix("gene", "cell", "sparse")
        assert all(isinstance(dtype, pd.SparseDtype) for dtype in sparse.dtypes)
        assert sparse.loc["Y", "B"] == 1.0

    # Builders.

    @pytest.mark.parametrize("dtype", NUMBER_DTYPES)
    def test_empty_dense_builders(self, daf, dtype):
        self.cells(daf)
        vector = sample_values(dtype, (4,))
        matrix = sample_values(dtype, (4, 3), seed=2)
        with daf.empty_dense_vector("cell", "v", dtype) as buffer:
            assert buffer.shape == (4,) and buffer.dtype == np.dtype(dtype) and not buffer.any()
            buffer[:] = vector
        with daf.empty_dense_matrix("cell", "gene", "m", dtype) as buffer:
            assert buffer.shape == (4, 3) and buffer.flags.f_contiguous and not buffer.any()
            buffer[:, :] = matrix
        assert daf.vector_version_counter("cell", "v") == 1
        assert daf.matrix_version_counter("cell", "gene", "m") == 1
        daf = self.reopen(daf)
        np.testing.assert_array_equal(daf.get_vector("cell", "v"), vector)
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "m"), matrix)
        assert not daf.has_matrix("gene", "cell", "m", relayout=False)

    @pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.float32, np.float64])
    def test_empty_sparse_builders(self, daf, dtype):
        self.cells(daf)
        with daf.empty_sparse_vector("cell", "v", dtype, 2) as (nzind, nzval):
            assert nzind.dtype == np.uint32 and nzval.dtype == np.dtype(dtype)
            nzind[:] = [2, 4]
            nzval[:] = [1, 1]
        with daf.empty_sparse_matrix("cell", "gene", "m", dtype, 3, "Int64") as (colptr, rowval, nzval):
            assert colptr.tolist() == [1, 4, 4, 4] and rowval.tolist() == [1, 1, 1]
            colptr[:] = [1, 2, 2, 4]
            rowval[:] = [3, 1, 4]
            nzval[:] = [1, 1, 1]
        daf = self.reopen(daf)
        assert daf.get_vector("cell", "v").tolist() == [0, 1, 0, 1]
        expected = np.zeros((4, 3), dtype)
        expected[2, 0] = expected[0, 2] = expected[3, 2] = 1
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "m").toarray(), expected)
        assert daf.get_stored_matrix("cell", "gene", "m").colptr.dtype == np.int64

    def test_builder_failure_removes_partial_property(self, daf):
        self.cells(daf).set_vector("cell", "keep", [1, 2, 3, 4])
        with pytest.raises(RuntimeError, match="boom"), daf.empty_dense_vector("cell", "v", "Float64") as buffer:
            buffer[0] = 1
            raise RuntimeError("boom")
        assert not daf.has_vector("cell", "v")
        with pytest.raises(pydaf.DafValueError, match="invalid colptr"), daf.empty_sparse_matrix(
                "cell", "gene", "m", "Float32", 2) as (colptr, _rowval, _nzval):
            colptr[:] = [1, 2, 2, 2]
        assert not daf.has_matrix("cell", "gene", "m", relayout=False)
        with pytest.raises(pydaf.DafValueError, match="invalid nzind"), daf.empty_sparse_vector(
                "cell", "s", "Int32", 2) as (nzind, _nzval):
            nzind[:] = [3, 2]
        assert not daf.has_vector("cell", "s")
        with pytest.raises(pydaf.DafTypeError), daf.empty_dense_vector("cell", "text", str):
            pass
        with pytest.raises(pydaf.DafExistsError), daf.empty_dense_vector("cell", "keep", "Int64"):
            pass
        assert self.reopen(daf).get_vector("cell", "keep").tolist() == [1, 2, 3, 4]

    def test_failed_overwriting_builders_keep_the_old_values(self, daf):
        """Nothing stored is lost by a failed call: an overwriting builder that fails leaves the old value."""
        self.require("rewrites")
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4])
        daf.set_matrix("cell", "gene", "m", sample_values(np.float32, (4, 3), seed=5), relayout=False)
        daf.set_matrix("gene", "cell", "s", sp.csc_matrix(sample_values(np.int16, (3, 4), seed=6)), relayout=False)
        before = (daf.get_vector("cell", "age").copy(), daf.get_matrix("cell", "gene", "m").copy(),
                  daf.get_matrix("gene", "cell", "s").toarray())
        with pytest.raises(RuntimeError, match="boom"), daf.empty_dense_vector(
                "cell", "age", "Int64", overwrite=True) as buffer:
            buffer[:] = 9
            raise RuntimeError("boom")
        with pytest.raises(RuntimeError, match="boom"), daf.empty_dense_matrix(
                "cell", "gene", "m", "Float32", overwrite=True) as buffer:
            buffer[:, :] = 9
            raise RuntimeError("boom")
        with pytest.raises(pydaf.DafValueError, match="invalid colptr"), daf.empty_sparse_matrix(
                "gene", "cell", "s", "Int16", 2, overwrite=True) as (colptr, _rowval, _nzval):
            colptr[:] = [1, 3, 3, 3, 2]
        self._assert_values(daf, before)
        self._assert_values(self.reopen(daf), before)

    @staticmethod
    def _assert_values(daf: pydaf.DafReader, expected: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        np.testing.assert_array_equal(daf.get_vector("cell", "age"), expected[0])
        np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "m"), expected[1])
        sparse = daf.get_matrix("gene", "cell", "s")
        assert sp.issparse(sparse) and not isinstance(sparse, np.ndarray)
        np.testing.assert_array_equal(sparse.toarray(), expected[2])

    # Caching, description, wrappers.

    def test_empty_cache(self, daf):
        self.cells(daf)
        daf.set_matrix("cell", "gene", "m", np.ones((4, 3)), relayout=False)
        first = daf.get_matrix("gene", "cell", "m")
        assert daf.get_matrix("gene", "cell", "m") is first
        daf.empty_cache(keep=pydaf.CacheGroup.MappedData)
        assert daf.get_matrix("gene", "cell", "m") is not first
        with pytest.raises(pydaf.DafValueError):
            daf.empty_cache(clear=pydaf.CacheGroup.MemoryData, keep=pydaf.CacheGroup.MappedData)
        daf.empty_cache()
        np.testing.assert_array_equal(daf.get_matrix("gene", "cell", "m"), first)

    def test_description(self, daf):
        self.cells(daf).set_scalar("organism", "human").set_scalar("ratio", np.float32(0.5))
        daf.set_vector("cell", "age", np.array([1, 2, 3, 4], np.uint32))
        daf.set_vector("gene", "is_marker", [True, False, True])
        daf.set_vector("cell", "score", SparseVector(4, np.array([2]), np.array([1.5], np.float32)))
        daf.set_matrix("cell", "gene", "UMIs", np.ones((4, 3), np.uint8))
        daf.set_matrix("gene", "cell", "sparse", sp.csc_matrix(np.eye(3, 4)), relayout=False)
        daf.set_matrix("cell", "cell", "text", "x")
        text = self.reopen(daf).description()
        lines = text.split("\n")
        assert lines[0] == f"name: {self.reopen(daf).name}"
        body = text[text.index("scalars:"):]
        assert body == (
            "scalars:\n"
            "  organism: \"human\"\n"
            "  ratio: 0.5\n"
            "axes:\n"
            "  cell: 4 entries\n"
            "  gene: 3 entries\n"
            "vectors:\n"
            "  cell:\n"
            "    age: 4 x UInt32 (Dense)\n"
            "    score: 4 x Float32 (Sparse 1 (25%) [Int64])\n"
            "  gene:\n"
            "    is_marker: 3 x Bool (Dense; 2 (67%) true)\n"
            "matrices:\n"
            "  cell,cell:\n"
            "    text: 4 x 4 x String in Columns (Dense)\n"
            "  cell,gene:\n"
            "    UMIs: 4 x 3 x UInt8 in Columns (Dense)\n"
            "  gene,cell:\n"
            "    UMIs: 3 x 4 x UInt8 in Columns (Dense)\n"
            "    sparse: 3 x 4 x Float64 in Columns (Sparse 3 (25%) [Int64])\n"
        )

    def test_read_only_wrapper(self, daf):
        self.require("rewrites")
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4])
        view = daf.read_only()
        assert isinstance(view, pydaf.DafReadOnly) and not hasattr(view, "set_vector")
        assert view.name == f"{daf.name}.read_only"
        assert view.get_vector("cell", "age").tolist() == [1, 2, 3, 4]
        daf.set_vector("cell", "age", [4, 3, 2, 1], overwrite=True)
        assert view.get_vector("cell", "age").tolist() == [4, 3, 2, 1]
        assert view.vector_version_counter("cell", "age") == 2
        assert view.read_only() is view
        assert "type: ReadOnly\nbase: " in view.description()

    def test_close_and_with_blocks(self, daf):
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4]).set_scalar("version", 1)
        held = daf.get_vector("cell", "age")
        reader = daf.read_only()
        path = daf.complete_path()
        with daf as entered:
            assert entered is daf and not daf.closed
        assert daf.closed and reader.closed
        daf.close()  # (again: nothing)
        uses = {"read": lambda: daf.get_vector("cell", "age"), "write": lambda: daf.set_scalar("other", 2),
                "query": lambda: daf["@ cell : age"], "description": lambda: daf.description(),
                "wrapper": lambda: reader.axis_length("cell"), "new wrapper": lambda: daf.read_only()}
        for use in uses.values():
            with pytest.raises(pydaf.DafClosedError, match=f"the daf data: {daf.name}\nwas closed\n"):
                use()
        assert held.tolist() == [1, 2, 3, 4] and not held.flags.writeable  # (what was handed out stays valid)
        if self.backend.persistent and path is not None:
            with pydaf.open_daf(path, "r+") as again:  # (a writable open at once: nothing is still locked)
                assert again.get_vector("cell", "age").tolist() == [1, 2, 3, 4]
                assert again.get_scalar("version") == 1 and not again.has_scalar("other")
            assert again.closed
            with pytest.raises(pydaf.DafClosedError, match=r"reopen it to use it again: pydaf\.open_daf"):
                again.has_scalar("version")

    def test_returned_arrays_are_read_only(self, daf):
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4]).set_matrix("cell", "gene", "m", np.ones((4, 3)))
        daf = self.reopen(daf)
        for array in (daf.get_vector("cell", "age"), daf.get_matrix("cell", "gene", "m"), daf.axis_vector("cell"),
                      daf.get_matrix("gene", "cell", "m")):
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 0

    def test_threads_read_while_one_writes(self, daf):
        self.require("rewrites")
        self.cells(daf).set_matrix("cell", "gene", "m", np.zeros((4, 3)))

        def read() -> None:
            matrix = daf.get_matrix("cell", "gene", "m")
            assert (matrix == matrix[0, 0]).all(), matrix  # every read sees one whole version: all entries equal
            daf.get_vector("cell", "v", default=None)
            daf.description()

        def write() -> None:
            for version in range(1, 60):
                daf.set_matrix("cell", "gene", "m", np.full((4, 3), float(version)), overwrite=True)
                daf.set_vector("cell", "v", version, overwrite=True)
                with daf.empty_dense_vector("cell", "w", "Int32", overwrite=True) as buffer:
                    buffer[:] = version

        _with_readers(read, write)
        assert (daf.get_matrix("cell", "gene", "m") == 59).all()
        assert daf.vector_version_counter("cell", "v") == 59

    def test_threads_read_while_one_appends(self, daf):
        """Readers see every property whole while a writer adds new ones (what an append-only store allows)."""
        self.cells(daf)

        def read() -> None:
            for name in daf.vectors_set("cell"):
                vector = daf.get_vector("cell", name)
                assert (vector == int(name[1:])).all(), (name, vector)
            daf.description()

        def write() -> None:
            for version in range(1, 40):
                if version % 2:
                    daf.set_vector("cell", f"v{version}", version)
                else:
                    with daf.empty_dense_vector("cell", f"v{version}", "Int32") as buffer:
                        buffer[:] = version

        _with_readers(read, write)
        assert len(self.reopen(daf).vectors_set("cell")) == 39

    def test_append_only_storage_refuses_rewrites(self, daf):
        """An append-only store refuses every delete and overwrite before changing anything."""
        if self.backend.rewrites:
            pytest.skip(f"the backend: {self.backend.name} can delete and overwrite")
        self.cells(daf).set_scalar("organism", "human").set_vector("cell", "age", [1, 2, 3, 4])
        daf.set_matrix("cell", "gene", "m", np.ones((4, 3)))
        before = self.snapshot(daf) if self.backend.has_snapshot else None
        refused = [
            partial(daf.set_scalar, "organism", "mouse", overwrite=True),
            partial(daf.delete_scalar, "organism"),
            partial(daf.add_axis, "cell", ["Q"], overwrite=True),
            partial(daf.delete_axis, "gene"),
            partial(daf.set_vector, "cell", "age", [4, 3, 2, 1], overwrite=True),
            partial(daf.delete_vector, "cell", "age"),
            partial(daf.set_matrix, "cell", "gene", "m", np.zeros((4, 3)), overwrite=True),
            partial(daf.delete_matrix, "gene", "cell", "m", relayout=False),
        ]
        for write in refused:
            with pytest.raises(pydaf.DafAppendOnlyError, match="append-only"):
                write()
            if before is not None:
                assert self.snapshot(daf) == before, write
        with pytest.raises(pydaf.DafAppendOnlyError), daf.empty_dense_vector("cell", "age", "Int8", overwrite=True):
            pytest.fail("an overwriting builder must be refused before it starts")
        daf = self.reopen(daf)
        assert daf.get_scalar("organism") == "human" and daf.get_vector("cell", "age").tolist() == [1, 2, 3, 4]
        assert daf.axis_vector("cell").tolist() == ["A", "B", "C", "D"]
        assert (daf.get_matrix("gene", "cell", "m") == 1).all()

    # Reorder.

    def _reorder_values(self, daf: pydaf.DafReader) -> dict:
        """Every axis, vector and matrix (in both layouts), dense, for comparing orders."""
        values: dict = {}
        for axis in sorted(daf.axes_set()):
            values[axis] = daf.axis_vector(axis).tolist()
            for name in sorted(daf.vectors_set(axis)):
                values[(axis, name)] = np.asarray(daf.get_vector(axis, name)).tolist()
        for rows_axis in sorted(daf.axes_set()):
            for columns_axis in sorted(daf.axes_set()):
                for name in sorted(daf.matrices_set(rows_axis, columns_axis)):
                    matrix = daf.get_matrix(rows_axis, columns_axis, name)
                    dense = sp.csc_matrix(matrix).toarray() if sp.issparse(matrix) else np.asarray(matrix)
                    values[(rows_axis, columns_axis, name)] = dense.tolist()
        return values

    @staticmethod
    def _permuted(values: dict, permutations: dict[str, list[int]]) -> dict:
        """What :meth:`_reorder_values` gives after ``permutations`` (0-based)."""
        permuted = {}
        for key, value in values.items():
            axes = (key,) if isinstance(key, str) else key[:-1]
            array = np.asarray(value, dtype=object)
            for dimension, axis in enumerate(axes):
                if axis in permutations:
                    array = np.take(array, permutations[axis], axis=dimension)
            permuted[key] = array.tolist()
        return permuted

    def _reorderable(self, daf: pydaf.DafWriter) -> pydaf.DafWriter:
        self.rich(self.cells(daf))
        daf.set_matrix("cell", "cell", "similar", sample_values(np.float32, (4, 4), seed=3))
        return daf.add_axis("donor", ["d1", "d2"]).set_vector("donor", "sex", ["F", "M"])

    def test_reorder_axes_permutes_every_property(self, daf):
        """``reorder_axes`` permutes axes, vectors and matrices (both layouts, square, sparse, strings) in storage,
        leaves other axes alone, and bumps the version counters; storage that can't reorder refuses untouched."""
        self._reorderable(daf)
        before = self._reorder_values(daf)
        permutations = {"cell": [2, 0, 3, 1], "gene": [1, 2, 0]}
        if not daf.format.supports_reorder:
            with pytest.raises(pydaf.DafError, match="reorder"):
                pydaf.reorder_axes(daf, permutations, progress=False)
            assert self._reorder_values(self.reopen(daf)) == before
            return
        counter = daf.vector_version_counter("cell", "age")
        pydaf.reorder_axes(daf, permutations, progress=False)
        expected = self._permuted(before, permutations)
        assert self._reorder_values(daf) == expected
        assert daf.vector_version_counter("cell", "age") > counter
        daf = self.reopen(daf)  # (the old object may no longer be usable)
        assert self._reorder_values(daf) == expected
        assert not pydaf.reset_reorder_axes(daf)

    def test_reorder_interrupted_at_each_step_is_reset(self, daf):
        """A reorder interrupted after each replaced property (``_simulate_crash``) is rolled back by
        ``reset_reorder_axes``, and a later reorder completes."""
        self._reorderable(daf)
        if not daf.format.supports_reorder:
            pytest.skip(f"the backend: {self.backend.name} does not reorder")
        before = self._reorder_values(daf)
        permutations = {"cell": [3, 2, 1, 0]}
        crash = 1
        while True:
            try:
                pydaf.reorder_axes(daf, permutations, progress=False, _simulate_crash=crash)
            except pydaf.SimulatedCrash:
                with pytest.raises(pydaf.DafError, match="reset_reorder_axes"):
                    pydaf.reorder_axes(daf, permutations, progress=False)
                assert pydaf.reset_reorder_axes(daf)
                assert self._reorder_values(daf) == before, crash
                daf = self.reopen(daf)
                assert self._reorder_values(daf) == before, crash
                crash += 1
                continue
            break
        assert crash > 3  # (the data set has more than three properties on the cell axis)
        assert self._reorder_values(daf) == self._permuted(before, permutations)

    def test_refused_reorders_leave_the_data_unchanged(self, daf):
        """Invalid permutations are refused before anything changes."""
        self._reorderable(daf)
        before = self._reorder_values(daf)
        for permutations in ({"cell": [0, 1, 2]}, {"cell": [0, 0, 1, 2]}, {"cell": [0, 1, 2, 4]},
                             {"cell": [0.0, 1.0, 2.0, 3.0]}, {"cell": [[0, 1, 2, 3]]}, {"nothing": [0]}):
            with pytest.raises(pydaf.DafError):
                pydaf.reorder_axes(daf, permutations, progress=False)
            assert self._reorder_values(daf) == before, permutations
        if daf.format.supports_reorder:
            assert not pydaf.reset_reorder_axes(daf)

    # Storage, seen through the backdoor (format_* behaviour the public API cannot show).

    def snapshot(self, daf: pydaf.DafReader) -> dict:
        """What the storage holds (skipping the test if the backend has no backdoor)."""
        if not self.backend.has_snapshot:
            pytest.skip(f"the backend: {self.backend.name} has no snapshot backdoor")
        return dict(self.backend.snapshot(daf))

    def rich(self, daf: pydaf.DafWriter) -> pydaf.DafWriter:
        """Fill a data set that has the :meth:`cells` axes with one property of each kind the storage keeps apart."""
        daf.set_scalar("organism", "human").set_scalar("ratio", np.float32(0.5))
        daf.set_vector("cell", "age", np.array([1, 2, 3, 4], np.uint32)).set_vector("cell", "type", ["T", "B", "", ""])
        daf.set_vector("gene", "score", SparseVector(3, np.array([2]), np.array([1.5], np.float32)))
        daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(sample_values(np.uint16, (4, 3), seed=1)))
        daf.set_matrix("cell", "gene", "dense", sample_values(np.float64, (4, 3), seed=2), relayout=False)
        return daf

    def test_snapshot_sees_every_kind_of_write(self, daf):
        """The backdoor is real: each write shows in the storage, so the tests below can fail."""
        self.require("rewrites")
        self.cells(daf)
        seen = [self.snapshot(daf)]
        for write in [partial(daf.set_scalar, "organism", "human"), partial(daf.add_axis, "donor", ["d1"]),
                      partial(daf.set_vector, "cell", "age", [1, 2, 3, 4]),
                      partial(daf.set_vector, "cell", "age", [4, 3, 2, 1], overwrite=True),
                      partial(daf.set_matrix, "cell", "gene", "m", np.ones((4, 3)), relayout=False),
                      partial(daf.relayout_matrix, "cell", "gene", "m"), partial(daf.delete_axis, "donor")]:
            write()
            seen.append(self.snapshot(daf))
            assert seen[-1] != seen[-2], write

    def test_refused_writes_leave_the_storage_unchanged(self, daf):
        """Writers validate everything before changing anything: the storage is byte for byte the same."""
        self.rich(self.cells(daf))
        before = self.snapshot(daf)
        refused = [
            partial(daf.set_scalar, "organism", "mouse"),
            partial(daf.set_scalar, "bad", 1 + 2j),
            partial(daf.add_axis, "cell", ["Q"]),
            partial(daf.add_axis, "donor", ["a", "a"]),
            partial(daf.set_vector, "cell", "age", [1, 2, 3], overwrite=True),
            partial(daf.set_vector, "cell", "age", [5, 6, 7, 8]),
            partial(daf.set_vector, "cell", "age", np.ones(4, np.complex64), overwrite=True),
            partial(daf.set_vector, "cell", "name", 1),
            partial(daf.set_vector, "cell", "a/b", 1),
            partial(daf.set_vector, "donor", "age", 1),
            partial(daf.set_matrix, "cell", "gene", "UMIs", np.zeros((3, 3)), overwrite=True),
            partial(daf.set_matrix, "gene", "cell", "UMIs", np.zeros((3, 4))),
            partial(daf.set_matrix, "cell", "gene", "new", np.zeros((4, 3), np.float16)),
            partial(daf.relayout_matrix, "cell", "gene", "UMIs"),
            partial(daf.delete_vector, "cell", "missing"),
            partial(daf.delete_matrix, "cell", "gene", "missing"),
            partial(daf.delete_axis, "donor"),
        ]
        for write in refused:
            with pytest.raises(pydaf.DafError):
                write()
            assert self.snapshot(daf) == before, write

    def test_failed_builders_leave_no_trace_in_storage(self, daf):
        """A builder whose filling raises leaves the storage as it was (``format_discard_empty`` and the delete)."""
        self.rich(self.cells(daf))
        before = self.snapshot(daf)
        builders = [
            partial(daf.empty_dense_vector, "cell", "new", "Float64"),
            partial(daf.empty_sparse_vector, "cell", "new", "Int32", 2),
            partial(daf.empty_dense_matrix, "cell", "gene", "new", "UInt8"),
            partial(daf.empty_sparse_matrix, "cell", "gene", "new", "Float32", 3, "Int64"),
        ]
        for builder in builders:
            with pytest.raises(RuntimeError, match="boom"), builder() as buffers:
                for buffer in buffers if isinstance(buffers, tuple) else (buffers,):
                    buffer[...] = 1
                raise RuntimeError("boom")
            assert self.snapshot(daf) == before, builder
        with pytest.raises(pydaf.DafValueError, match="invalid colptr"), daf.empty_sparse_matrix(
                "cell", "gene", "new", "Float32", 2) as (colptr, _rowval, _nzval):
            colptr[:] = [1, 2, 2, 2]
        assert self.snapshot(daf) == before

    def test_deletes_leave_no_trace_in_storage(self, daf):
        """``format_delete_*`` with ``for_set=False`` removes everything the property had stored."""
        self.require("rewrites")
        self.cells(daf)
        before = self.snapshot(daf)
        self.rich(daf)
        daf.relayout_matrix("cell", "gene", "dense")
        daf.delete_scalar("organism").delete_scalar("ratio")
        for axis in ("cell", "gene"):
            for name in daf.vectors_set(axis):
                daf.delete_vector(axis, name)
        for name in daf.matrices_set("cell", "gene"):
            daf.delete_matrix("cell", "gene", name)
        assert self.snapshot(daf) == before
        daf.add_axis("donor", ["d1", "d2"]).set_vector("donor", "age", [1, 2])
        daf.set_matrix("donor", "cell", "m", np.ones((2, 4))).delete_axis("donor")
        assert self.snapshot(daf) == before

    def test_overwrites_store_only_the_new_value(self, daf, tmp_path):
        """An overwrite (``format_delete_*`` with ``for_set=True``, then a set) leaves the storage exactly as if only
        the new value had ever been written: nothing of the old value, no backups, no temporaries."""
        self.require("rewrites")
        overwritten, fresh = self.cells(daf), self.cells(self.backend.new(tmp_path, "fresh!"))
        self.rich(overwritten)
        sparse = SparseVector(4, np.array([1, 3]), np.array([7, 9], np.int16))
        umis = sample_values(np.float32, (4, 3), seed=3)
        for target in (overwritten, fresh):
            overwrite = target is overwritten
            target.set_scalar("organism", "mouse", overwrite=overwrite)
            target.set_vector("cell", "age", sparse, overwrite=overwrite)
            target.set_matrix("cell", "gene", "UMIs", umis, overwrite=overwrite)
            with target.empty_dense_vector("cell", "type", "Int8", overwrite=overwrite) as buffer:
                buffer[:] = [1, 2, 3, 4]
            with target.empty_dense_matrix("cell", "gene", "dense", "UInt8", overwrite=overwrite) as buffer:
                buffer[:, :] = 5
        overwritten.delete_scalar("ratio").delete_vector("gene", "score")  # what the fresh one never had
        assert self.snapshot(overwritten) == self.snapshot(fresh)

    def test_reading_never_writes(self, daf):
        """Reading everything, mode ``r`` included, leaves the storage unchanged."""
        self.rich(self.cells(daf))
        before = self.snapshot(daf)
        reader = self.backend.reopen(daf, "r")
        assert not hasattr(reader, "set_scalar")
        reader.description(deep=True)
        for axis in reader.axes_set():
            for name in reader.vectors_set(axis):
                reader.get_vector(axis, name)
            for other in reader.axes_set():
                for name in reader.matrices_set(axis, other):
                    reader.get_matrix(axis, other, name)
        assert reader["@ cell @ gene :: UMIs >| Sum"].shape == (4,)
        assert self.snapshot(reader) == before

    # Declared capabilities.

    def test_stored_numbers_are_file_maps(self, daf):
        """Zero-copy: what is read back is a read-only map of the storage's files, not a copy."""
        self.require("maps_files")
        self.cells(daf).set_vector("cell", "age", [1, 2, 3, 4])
        daf.set_matrix("cell", "gene", "dense", np.ones((4, 3)), relayout=False)
        daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.eye(4, 3)), relayout=False)
        daf = self.reopen(daf)
        sparse = daf.get_stored_matrix("cell", "gene", "sparse")
        for array in (daf.get_vector("cell", "age"), daf.get_matrix("cell", "gene", "dense"), sparse.colptr,
                      sparse.rowval, sparse.nzval):
            assert is_file_map(array) and not array.flags.writeable

    def test_declared_capabilities(self, daf):
        """What the format declares (:attr:`pydaf.DafReader.capabilities`, which the backend reads) is what it does
        (zarr's ``test_store_supports_writes``): rewrites are accepted or refused with
        :class:`~pydaf.DafAppendOnlyError`, stored numbers come back as file maps or not, and the data is read back
        from storage or has none."""
        declared = daf.capabilities
        assert declared == self.backend.capabilities
        assert (self.backend.rewrites, self.backend.maps_files, self.backend.persistent) == declared
        self.cells(daf).set_scalar("organism", "human").set_vector("cell", "age", [1, 2, 3, 4])
        daf.set_vector("cell", "kept", [5, 6, 7, 8])
        if declared.supports_rewrites:
            daf.set_scalar("organism", "mouse", overwrite=True).delete_vector("cell", "kept")
            assert daf.get_scalar("organism") == "mouse" and not daf.has_vector("cell", "kept")
        else:
            for write in (partial(daf.set_scalar, "organism", "mouse", overwrite=True),
                          partial(daf.delete_vector, "cell", "kept"),
                          partial(daf.set_vector, "cell", "kept", 0, overwrite=True)):
                with pytest.raises(pydaf.DafAppendOnlyError, match="is append-only; can't"):
                    write()
            assert daf.get_scalar("organism") == "human" and daf.get_vector("cell", "kept").tolist() == [5, 6, 7, 8]
        age = daf.get_vector("cell", "age")
        assert is_file_map(age) == declared.maps_files, f"maps_files is declared {declared.maps_files}"
        if not declared.persistent:
            assert daf.complete_path() is None
            return
        reopened = self.reopen(daf)
        assert reopened.format is not daf.format  # (read back from storage, not the same object)
        assert reopened.get_scalar("organism") == ("mouse" if declared.supports_rewrites else "human")
        assert reopened.get_vector("cell", "age").tolist() == [1, 2, 3, 4]

    def test_open_daf_recognises_the_path(self, tmp_path):
        """The format registry sends this backend's paths to it, for writing and for reading back."""
        path = self.backend.path(tmp_path)
        if path is None:
            pytest.skip(f"the backend: {self.backend.name} has no path")
        writer = pydaf.open_daf(path, "w", name="opened!")
        assert type(writer) is type(self.backend.new(tmp_path, "other!"))
        writer.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
        reader = pydaf.open_daf(path, "r")
        assert isinstance(reader, pydaf.DafReadOnly) and type(reader.base) is type(writer)
        assert reader.get_vector("cell", "age").tolist() == [1, 2]


def _with_readers(read: Callable[[], None], write: Callable[[], None], threads: int = 4) -> None:
    """Run ``write`` while ``threads`` threads call ``read`` over and over; re-raise the first failure of a reader."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                read()
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    readers = [threading.Thread(target=reader) for _ in range(threads)]
    for thread in readers:
        thread.start()
    try:
        write()
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert not errors, errors[0]


def is_file_map(array: object) -> bool:
    """Whether an array's memory is (a view of) a memory map, as zero-copy reads of mapped storage must be.

    Example:
        >>> import mmap, numpy as np
        >>> region = mmap.mmap(-1, 16)
        >>> is_file_map(np.frombuffer(region, np.uint8)[4:]), is_file_map(np.zeros(4))
        (True, False)
    """
    while array is not None and not isinstance(array, mmap.mmap):
        array = array.obj if isinstance(array, memoryview) else getattr(array, "base", None)
    return isinstance(array, mmap.mmap)
