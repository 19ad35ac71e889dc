"""Issue 23: no silent change of anyone's data. Conversions on write are exact (or a DafInexactError naming the value
and its place), pandas nullable arrays with missing values are refused, pandas labels are aligned to the axis entries,
and every write method of a read-only data set raises a DafReadOnlyError (also an AttributeError)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.composition.copies import copy_matrix, copy_scalar, copy_vector
from pydaf.core.read_only import writer_methods
from pydaf.core.values import exact_cast

CELLS, GENES = ["A", "B", "C"], ["X", "Y"]


@pytest.fixture(params=["memory", "h5df"])
def daf(request, tmp_path):
    """A writable data set (in memory, or an H5df file) with the axes cell (A, B, C) and gene (X, Y)."""
    if request.param == "memory":
        daf = pydaf.MemoryDaf(name="exact!")
    else:
        daf = pydaf.H5df(str(tmp_path / "exact.h5df"), "w", name="exact!")
    return daf.add_axis("cell", CELLS).add_axis("gene", GENES)


def reread(daf):
    """The data set as a new reader would see it (the H5df file reopened; a MemoryDaf itself)."""
    path = daf.complete_path()
    return daf if path is None else pydaf.H5df(path, "r")


# (value, element type, Julia's message) for each silent corruption of the original code.
INEXACT = [
    (-1.0, "UInt16", "UInt16(-1.0)"),       # was 65535
    (70000, "UInt16", "UInt16(70000)"),     # was 4464
    (300.7, "Int8", "Int8(300.7)"),         # was 44
    (1.5, "Int32", "Int32(1.5)"),           # was 1
    (np.nan, "Int32", "Int32(NaN)"),        # was -2147483648
    (2, "Bool", "Bool(2)"),                 # was true
    (2**53 + 1, "Float64", "Float64(9007199254740993)"),  # was 9007199254740992.0
    (1e300, "Float32", "Float32(1.0e300)"),  # was Inf32
]


def _vector_values(bad):
    dtype = np.int64 if isinstance(bad, int) else np.float64
    return np.array([1, bad, 0], dtype=dtype)


def _escaped(text):
    return text.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")


@pytest.mark.parametrize(("bad", "eltype", "julia"), INEXACT)
@pytest.mark.parametrize("layout", ["dense", "sparse", "scipy"])
def test_set_vector_refuses_inexact_conversions(daf, bad, eltype, julia, layout):
    values = _vector_values(bad)
    if layout == "sparse":
        value = pydaf.SparseVector(3, np.array([1, 2], np.uint32), values[:2])
    elif layout == "scipy":
        value = sp.csr_matrix(values.reshape(1, 3))
    else:
        value = values
    with pytest.raises(pydaf.DafInexactError) as raised:
        daf.set_vector("cell", "score", value, eltype=eltype)
    assert isinstance(raised.value, pydaf.DafValueError)
    message = str(raised.value)
    assert message.startswith("can't convert exactly the value: ")
    assert "\nat the position: 1 (entry: B)\nof the vector: score\nof the axis: cell\n" in message
    assert f"\nto the element type: {eltype}\n(InexactError: {julia};" in message
    assert message.endswith("\nin the daf data: exact!")
    assert raised.value.position == (1,)  # (the index in the values converted: for sparse data, in nzval)
    assert not reread(daf).has_vector("cell", "score")


@pytest.mark.parametrize(("bad", "eltype", "julia"), INEXACT)
@pytest.mark.parametrize("layout", ["dense", "c_order", "sparse", "frame"])
def test_set_matrix_refuses_inexact_conversions(daf, bad, eltype, julia, layout):
    dtype = np.int64 if isinstance(bad, int) else np.float64
    values = np.array([[1, 0], [0, 1], [0, bad]], dtype=dtype)
    value = {"dense": np.asfortranarray(values), "c_order": np.ascontiguousarray(values),
             "sparse": sp.csc_matrix(values), "frame": pd.DataFrame(values, index=CELLS, columns=GENES)}[layout]
    with pytest.raises(pydaf.DafInexactError, match=f"InexactError: {_escaped(julia)};") as raised:
        daf.set_matrix("cell", "gene", "score", value, eltype=eltype)
    message = str(raised.value)
    assert ("\nat the row: 2 (entry: C)\nand the column: 1 (entry: Y)\nof the matrix: score\nfor the rows axis: cell\n"
            "and the columns axis: gene\n") in message
    assert message.endswith("\nin the daf data: exact!")
    assert not reread(daf).has_matrix("cell", "gene", "score")


@pytest.mark.parametrize(("bad", "eltype", "julia"), [case for case in INEXACT if case[1] != "Float64"])
def test_fills_refuse_inexact_conversions(daf, bad, eltype, julia):
    for call in (lambda: daf.set_vector("cell", "fill", bad, eltype=eltype),
                 lambda: daf.set_matrix("cell", "gene", "fill", bad, eltype=eltype)):
        with pytest.raises(pydaf.DafInexactError, match=f"InexactError: {_escaped(julia)};") as raised:
            call()
        assert "of the fill of the " in str(raised.value) and str(raised.value).endswith("in the daf data: exact!")
    daf = reread(daf)
    assert not daf.has_vector("cell", "fill") and not daf.has_matrix("cell", "gene", "fill")


def test_a_refused_overwrite_keeps_the_stored_data(daf):
    daf.set_vector("cell", "age", np.array([1, 2, 3], np.uint8))
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[1, 0], [0, 2], [3, 0]], np.uint16)))
    with pytest.raises(pydaf.DafInexactError):
        daf.set_vector("cell", "age", [1, 2, 256], eltype="UInt8", overwrite=True)
    with pytest.raises(pydaf.DafInexactError, match=r"at the row: 1 \(entry: B\)\nand the column: 1 \(entry: Y\)"):
        daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[1, 0], [0, -2], [3, 0]])), eltype="UInt16",
                       overwrite=True)
    daf = reread(daf)
    assert daf.get_vector("cell", "age").tolist() == [1, 2, 3]
    assert daf.get_matrix("cell", "gene", "UMIs").toarray().tolist() == [[1, 0], [0, 2], [3, 0]]


def test_exact_conversions_are_stored(daf):
    daf.set_vector("cell", "counts", [1.0, 65535.0, -0.0], eltype="UInt16")
    daf.set_vector("cell", "flags", [0.0, 1.0, 1.0], eltype="Bool")
    daf.set_vector("cell", "big", np.array([2**53, -(2**53), 2**62]), eltype="Float64")  # powers of two: exact
    daf.set_vector("cell", "narrow", [0.1, 1e38, np.nan], eltype="Float32")  # rounds to Float32, as Julia's convert
    daf.set_vector("cell", "fill", 3.0, eltype="Int8")
    daf.set_matrix("cell", "gene", "m", sp.csc_matrix(np.array([[1.0, 0], [0, 2.0], [0, 0]])), eltype="Int8")
    daf = reread(daf)
    assert daf.get_vector("cell", "counts").tolist() == [1, 65535, 0]
    assert daf.get_vector("cell", "flags").tolist() == [False, True, True]
    assert daf.get_vector("cell", "big").tolist() == [2.0**53, -(2.0**53), 2.0**62]
    narrow = daf.get_vector("cell", "narrow")
    assert narrow.dtype == np.float32 and narrow[0] == np.float32(0.1) and np.isnan(narrow[2])
    assert daf.get_vector("cell", "fill").tolist() == [3, 3, 3] and daf.get_vector("cell", "fill").dtype == np.int8
    matrix = daf.get_matrix("cell", "gene", "m")
    assert matrix.dtype == np.int8 and matrix.toarray().tolist() == [[1, 0], [0, 2], [0, 0]]


def test_exact_cast_finds_the_first_bad_value_past_its_blocks():
    values = np.arange(300_000, dtype=np.float64)
    values[[200_001, 250_000]] = [0.5, -1.0]
    with pytest.raises(pydaf.DafInexactError, match=r"^InexactError: UInt32\(0\.5\)$") as raised:
        exact_cast(values, "UInt32")
    assert raised.value.position == (200_001,)
    matrix = np.zeros((1000, 300), order="F")
    matrix[999, 100] = 1e10  # first in column-major order (Julia's), though (0, 200) comes first row by row
    matrix[0, 200] = -3.0
    with pytest.raises(pydaf.DafInexactError, match=r"^InexactError: Int32\(1\.0e10\)$") as raised:
        exact_cast(matrix, "Int32")
    assert raised.value.position == (999, 100)
    with pytest.raises(pydaf.DafInexactError) as raised:
        exact_cast(np.ascontiguousarray(matrix), "Int32")
    assert raised.value.position == (999, 100)
    assert exact_cast(np.arange(300_000, dtype=np.float64), "UInt32").tolist() == list(range(300_000))
    unsigned = np.array([0, 2**63], np.uint64)
    with pytest.raises(pydaf.DafInexactError, match=r"Int64\(9223372036854775808\)"):
        exact_cast(unsigned, "Int64")
    with pytest.raises(pydaf.DafInexactError, match=r"UInt64\(-1\)"):
        exact_cast(np.array([5, -1]), "UInt64")
    with pytest.raises(pydaf.DafInexactError, match=r"Float32\(16777217\)"):
        exact_cast(np.array([16777216, 16777217], np.int32), "Float32")
    assert exact_cast(np.array([2**63 - 1024], np.int64), "Float64").tolist() == [float(2**63 - 1024)]


def test_the_query_convert_shares_the_exact_cast():
    daf = pydaf.MemoryDaf(name="query!").add_axis("cell", CELLS)
    daf.set_vector("cell", "n", np.array([1, 300, 2**53 + 1]))
    with pytest.raises(pydaf.DafInexactError, match=r"^InexactError: UInt8\(300\)$"):
        daf.get_np_query("@ cell : n % Convert type UInt8")
    # A float type rounds in a query, as Julia's convert(Float64, 2^53 + 1) does.
    assert daf.get_np_query("@ cell : n % Convert type Float64").tolist() == [1.0, 300.0, 2.0**53]


def test_copies_convert_exactly(daf):
    source = pydaf.MemoryDaf(name="source!").add_axis("cell", CELLS).add_axis("gene", GENES)
    source.set_scalar("version", 300.7).set_vector("cell", "score", [1.0, -1.0, 2.0])
    source.set_matrix("cell", "gene", "score", sp.csc_matrix(np.array([[1.0, 0], [0, 0], [0, 1.5]])))
    with pytest.raises(pydaf.DafInexactError, match=r"value: 300\.7\nof the scalar: version\nto the element type: "
                                                    r"Int8"):
        copy_scalar(destination=daf, source=source, name="version", type="Int8")
    with pytest.raises(pydaf.DafInexactError, match=r"value: -1\.0\nat the position: 1\nof the vector: score"):
        copy_vector(destination=daf, source=source, axis="cell", name="score", eltype="UInt16")
    with pytest.raises(pydaf.DafInexactError, match=r"value: 1\.5\nat the row: 1\nand the column: 2\nof the matrix: "
                                                    r"score\nfor the rows axis: gene\n"):  # (the other layout first)
        copy_matrix(destination=daf, source=source, rows_axis="cell", columns_axis="gene", name="score",
                    eltype="Int32")
    daf = reread(daf)
    assert not daf.has_scalar("version") and not daf.has_vector("cell", "score")
    assert not daf.has_matrix("cell", "gene", "score")


def test_daf_as_anndata_converts_x_exactly():
    pytest.importorskip("anndata")
    from pydaf.interop import daf_as_anndata

    daf = pydaf.MemoryDaf(name="adata!").add_axis("cell", CELLS).add_axis("gene", GENES)
    daf.set_matrix("cell", "gene", "UMIs", np.array([[1.0, 2.0], [3.0, 70000.0], [5.0, 6.0]]))
    with pytest.raises(pydaf.DafInexactError, match=r"InexactError: UInt16\(70000\.0\)"):
        daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="UMIs", X_eltype=np.uint16)
    adata = daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="UMIs", X_eltype=np.uint32)
    assert adata.X.dtype == np.uint32 and adata.X.tolist() == [[1, 2], [3, 70000], [5, 6]]


# pandas nullable arrays.


@pytest.mark.parametrize(("values", "fix"), [
    (pd.array([1, None, 3], dtype="Int64"), r"\.fillna\(0\), or convert to floats with NaN"),
    (pd.array([True, None, False], dtype="boolean"), r"\.fillna\(0\), or convert to floats with NaN"),
    (pd.array(["a", None, "c"], dtype="string"), r"\.fillna\(\"\"\)"),
])
@pytest.mark.parametrize("wrap", ["array", "series"])
def test_nullable_missing_values_are_refused(daf, values, fix, wrap):
    value = values if wrap == "array" else pd.Series(values, index=CELLS)
    entry = " (label: B)" if wrap == "series" else ""
    with pytest.raises(pydaf.DafValueError, match=f"missing value \\(pandas NA\\)\nat the position: 1"
                                                  f"{_escaped(entry)}\nof the vector: v\nof the axis: cell\n"
                                                  f"\\(fill the missing values first, e.g. with {fix}"):
        daf.set_vector("cell", "v", value)
    assert not reread(daf).has_vector("cell", "v")


def test_nullable_values_without_missing_convert_exactly(daf):
    daf.set_vector("cell", "count", pd.Series(pd.array([1, 2**62, 3], dtype="Int64"), index=CELLS))
    daf.set_vector("cell", "small", pd.array([1, 2, 255], dtype="UInt8"))
    daf.set_vector("cell", "flag", pd.array([True, False, True], dtype="boolean"))
    daf.set_vector("cell", "label", pd.array(["a", "b", "c"], dtype="string"))
    daf.set_vector("cell", "float", pd.array([0.5, None, 1.5], dtype="Float32"))  # a float's NA is its NaN
    frame = pd.DataFrame({"X": pd.array([1, 2, 3], dtype="Int16"), "Y": pd.array([4, 5, 6], dtype="Int16")},
                         index=CELLS)
    daf.set_matrix("cell", "gene", "frame", frame)
    daf = reread(daf)
    assert daf.get_vector("cell", "count").dtype == np.int64
    assert daf.get_vector("cell", "count").tolist() == [1, 2**62, 3]  # (not through Float64: 2**62 + 1 would round)
    assert daf.get_vector("cell", "small").dtype == np.uint8
    assert daf.get_vector("cell", "flag").tolist() == [True, False, True]
    assert daf.get_vector("cell", "label").tolist() == ["a", "b", "c"]
    floats = daf.get_vector("cell", "float")
    assert floats.dtype == np.float32 and floats[0] == 0.5 and np.isnan(floats[1])
    matrix = daf.get_matrix("cell", "gene", "frame")
    assert matrix.dtype == np.int16 and matrix.tolist() == [[1, 4], [2, 5], [3, 6]]


def test_nullable_frame_with_missing_values_is_refused(daf):
    frame = pd.DataFrame({"X": [1, 2, 3], "Y": pd.array([4, None, 6], dtype="Int64")}, index=CELLS)
    with pytest.raises(pydaf.DafValueError, match=r"missing value \(pandas NA\)\nat the row: 1 \(label: B\)\nand the "
                                                  r"column: 1 \(label: Y\)\nof the matrix: m"):
        daf.set_matrix("cell", "gene", "m", frame)
    assert not reread(daf).has_matrix("cell", "gene", "m")


# pandas labels.


def test_series_are_aligned_by_label(daf):
    daf.set_vector("cell", "age", pd.Series([3, 1, 2], index=["C", "A", "B"]))
    daf.set_vector("cell", "kind", pd.Series(["c", "a", "b"], index=pd.Index(["C", "A", "B"], dtype="string")))
    daf.set_vector("cell", "positional", pd.Series([7, 8, 9]))  # a default RangeIndex: positional, as an array
    daf.set_vector("cell", "score", pd.Series([0.5, 1.5, 2.5], index=["B", "C", "A"]), eltype="Float32")
    daf = reread(daf)
    assert daf.get_vector("cell", "age").tolist() == [1, 2, 3]
    assert daf.get_vector("cell", "kind").tolist() == ["a", "b", "c"]
    assert daf.get_vector("cell", "positional").tolist() == [7, 8, 9]
    assert daf.get_vector("cell", "score").tolist() == [2.5, 0.5, 1.5]


def test_range_index_is_positional_even_for_numeric_entries():
    daf = pydaf.MemoryDaf().add_axis("cell", ["2", "0", "1"])
    daf.set_vector("cell", "x", pd.Series([10, 20, 30]))
    assert daf.get_vector("cell", "x").tolist() == [10, 20, 30]


@pytest.mark.parametrize(("labels", "problem"), [
    (["C", "A", "D"], r"first missing: B \(1 missing\); first extra: D \(1 extra\)"),
    (["C", "A"], r"first missing: B \(1 missing\)"),
    (["C", "A", "B", "E", "F"], r"first extra: E \(2 extra\)"),
    (["C", "A", "B", "B"], r"first duplicate: B"),
])
def test_series_label_mismatches_are_refused(daf, labels, problem):
    value = pd.Series(np.arange(len(labels)), index=labels)
    with pytest.raises(pydaf.DafValueError, match=f"entry names of the: vector\nmismatch the entry names of the axis: "
                                                  f"cell\n\\({problem}\\)\nin the daf data: exact!"):
        daf.set_vector("cell", "v", value)
    assert not reread(daf).has_vector("cell", "v")


def test_frames_are_aligned_by_label(daf):
    values = np.array([[1, 2], [3, 4], [5, 6]])
    frame = pd.DataFrame(values[[2, 0, 1]][:, [1, 0]], index=["C", "A", "B"], columns=["Y", "X"])
    daf.set_matrix("cell", "gene", "m", frame)
    daf.set_matrix("cell", "gene", "n", pd.DataFrame(values, index=["A", "B", "C"], columns=GENES))
    daf.set_matrix("cell", "gene", "positional", pd.DataFrame(values))  # default indexes: positional
    bad = pd.DataFrame(values, index=["A", "B", "C"], columns=["X", "Z"])
    with pytest.raises(pydaf.DafValueError, match=r"column names of the: matrix\nmismatch the entry names of the "
                                                  r"axis: gene\n\(first missing: Y \(1 missing\); first extra: Z"):
        daf.set_matrix("cell", "gene", "bad", bad)
    daf = reread(daf)
    assert not daf.has_matrix("cell", "gene", "bad")
    for name in ("m", "n", "positional"):
        assert daf.get_matrix("cell", "gene", name).tolist() == values.tolist()
    assert daf.get_matrix("gene", "cell", "m").tolist() == values.T.tolist()


# Read-only data sets.


def _read_only_dafs(tmp_path):
    """Every kind of read-only data set, with the path (or None) its error names."""
    readers = []
    for kind, path in (("H5df", "x.h5df"), ("FilesDaf", "x.daf"), ("ZarrDaf", "x.daf.zarr"), ("ZipDaf", "x.daf.zip")):
        path = str(tmp_path / path)
        getattr(pydaf, kind)(path, "w").add_axis("cell", CELLS).set_scalar("version", 1)
        readers.append((f"{kind} r", getattr(pydaf, kind)(path, "r"), os.path.abspath(path)))
        readers.append((f"open_daf {kind}", pydaf.open_daf(path, "r"), os.path.abspath(path)))
    h5df = readers[0][1]
    memory = pydaf.MemoryDaf(name="memory!").add_axis("cell", CELLS)
    readers.append(("read_only", memory.read_only(), None))
    readers.append(("read_only of read_only", memory.read_only().read_only(name="again!"), None))
    readers.append(("read_only of H5df r", h5df.read_only(name="renamed!"), os.path.abspath(tmp_path / "x.h5df")))
    readers.append(("view", pydaf.viewer(memory, axes=[("obs", "@ cell")]), None))
    readers.append(("chain_reader", pydaf.chain_reader([h5df, memory]), None))
    return readers


def test_writes_to_read_only_data_sets_say_how_to_write(tmp_path):
    methods = writer_methods()
    assert {"set_scalar", "set_vector", "set_matrix", "add_axis", "delete_axis", "empty_dense_matrix",
            "empty_sparse_vector", "relayout_matrix"} <= methods
    for kind, reader, path in _read_only_dafs(tmp_path):
        assert not isinstance(reader, pydaf.DafWriter), kind
        for method in sorted(methods):
            assert not hasattr(reader, method), (kind, method)
            with pytest.raises(pydaf.DafReadOnlyError) as raised:
                getattr(reader, method)
            error = raised.value
            assert isinstance(error, AttributeError) and isinstance(error, pydaf.DafModeError), kind
            message = str(error)
            assert message.startswith(f"can't {method}: the daf data is read-only\n("), (kind, message)
            assert message.endswith(f"\nin the daf data: {reader.name}"), (kind, message)
            if path is not None and kind != "chain_reader":
                assert f'open it for writing with mode "r+": pydaf.open_daf("{path}", "r+")' in message, message
        with pytest.raises(pydaf.DafReadOnlyError):
            reader.set_scalar("other", 2)
        with pytest.raises(AttributeError) as raised:  # other attributes stay plain AttributeErrors
            reader.no_such_method  # noqa: B018
        assert not isinstance(raised.value, pydaf.DafError)
        assert reader.has_scalar("version") if kind != "view" and "read_only" not in kind else True


def test_read_only_wrappers_and_views_say_what_to_write_through(tmp_path):
    memory = pydaf.MemoryDaf(name="memory!").add_axis("cell", CELLS)
    with pytest.raises(pydaf.DafReadOnlyError, match=r"\(write through the data set it wraps: its \.base\)"):
        memory.read_only().set_vector("cell", "x", [1, 2, 3])
    with pytest.raises(pydaf.DafReadOnlyError, match=r"\(a view is read-only: write to the data set it views\)"):
        pydaf.viewer(memory, axes=[("obs", "@ cell")]).add_axis("gene", GENES)
    with pytest.raises(pydaf.DafReadOnlyError, match=r"pydaf\.chain_writer writes to its last data set"):
        pydaf.chain_reader([memory, pydaf.MemoryDaf()]).set_scalar("x", 1)
