"""Byte-level tests of H5df files (docs/spec/FORMATS.md §2, §6, §7).

Everything is written through pydaf's public API, the writer is dropped (closing the file), and the file is then
reopened with plain h5py — including its low-level API — to check the on-disk contract that Julia's DataAxesFormats.jl
relies on: datatypes, dataspaces, layouts, filters, offsets and values.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf import SparseMatrixCSC, SparseVector

NUMERIC_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float32,
                  np.float64]


# Helpers.


def write(path: Any, build: Callable[[pydaf.DafWriter], Any], mode: str = "w") -> None:
    """Open an H5df writer, let ``build`` fill it, then drop it so the file is closed before h5py opens it."""
    daf = pydaf.H5df(path, mode)
    build(daf)
    del daf
    gc.collect()


def open_files_count() -> int:
    """How many HDF5 files this process has open (through any h5py handle)."""
    return h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)


def datasets_of(file: h5py.File) -> dict[str, h5py.Dataset]:
    """Every dataset of a file, by its full path."""
    found: dict[str, h5py.Dataset] = {}

    def visit(name: str, node: Any) -> None:  # visititems stops at the first non-None result
        if isinstance(node, h5py.Dataset):
            found[name] = node

    file.visititems(visit)
    return found


def groups_of(file: h5py.File) -> set[str]:
    found: set[str] = set()

    def visit(name: str, node: Any) -> None:
        if isinstance(node, h5py.Group):
            found.add(name)

    file.visititems(visit)
    return found


def type_class(dataset: h5py.Dataset) -> int:
    return dataset.id.get_type().get_class()


def is_numeric(dataset: h5py.Dataset) -> bool:
    return type_class(dataset) in (h5py.h5t.INTEGER, h5py.h5t.FLOAT, h5py.h5t.BITFIELD)


def assert_contiguous_unfiltered(dataset: h5py.Dataset) -> None:
    dcpl = dataset.id.get_create_plist()
    assert dcpl.get_layout() == h5py.h5d.CONTIGUOUS, dataset.name
    assert dcpl.get_nfilters() == 0, dataset.name
    assert dataset.chunks is None, dataset.name


def assert_variable_utf8(dataset: h5py.Dataset) -> None:
    tid = dataset.id.get_type()
    assert tid.get_class() == h5py.h5t.STRING, dataset.name
    assert tid.is_variable_str(), dataset.name
    assert tid.get_cset() == h5py.h5t.CSET_UTF8, dataset.name


def assert_bitfield_bool(dataset: h5py.Dataset) -> None:
    tid = dataset.id.get_type()
    assert tid.get_class() == h5py.h5t.BITFIELD, dataset.name
    assert tid.get_size() == 1, dataset.name
    assert tid.equal(h5py.h5t.STD_B8LE), dataset.name
    assert h5py.check_enum_dtype(dataset.dtype) is None, dataset.name  # not h5py's int8 enum bool


def raw_bytes(path: Any, dataset: h5py.Dataset, nbytes: int) -> bytes:
    """The bytes of a contiguous dataset, read straight from the file at its offset."""
    offset = dataset.id.get_offset()
    assert offset is not None, dataset.name
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read(nbytes)


def mapped_ranges(path: Any) -> list[tuple[int, int, str]]:
    """The address ranges (and permissions) of this process that map the file (from ``/proc/self/maps``)."""
    real = os.path.realpath(path)
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() == real:
                start, end = (int(text, 16) for text in fields[0].split("-"))
                ranges.append((start, end, fields[1]))
    return ranges


def assert_file_mapped(array: np.ndarray, path: Any) -> None:
    """The array is read-only and its memory lies in a read-only map of the file."""
    assert not array.flags.writeable
    address = array.__array_interface__["data"][0]
    ranges = mapped_ranges(path)
    assert ranges, f"no mapping of {path} in /proc/self/maps"
    containing = [perms for start, end, perms in ranges if start <= address and address + array.nbytes <= end]
    assert containing, (hex(address), ranges)
    assert "w" not in containing[0], containing


def cells_and_genes(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    return daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "test.h5df")


class PlainH5:
    """Opens the test file read-only with plain h5py; ``close`` closes every handle it opened (pydaf can't open a
    file that h5py holds open in the same process: their file close degrees differ)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opened: list[h5py.File] = []

    def __call__(self) -> h5py.File:
        self.opened.append(h5py.File(self.path, "r"))
        return self.opened[-1]

    def close(self) -> None:
        for file in self.opened:
            file.close()
        self.opened.clear()


@pytest.fixture
def h5(path) -> Iterator[PlainH5]:
    plain = PlainH5(path)
    yield plain
    plain.close()


# Root layout (§2.3, §1.1).


def test_dropping_the_writer_closes_the_file(path):
    gc.collect()  # (files of earlier tests' data sets that are garbage in a cycle would close during the count)
    before = open_files_count()
    daf = pydaf.H5df(path, "w")
    assert open_files_count() == before + 1
    del daf
    gc.collect()
    assert open_files_count() == before


def test_root_layout_and_daf_version_dataset(path, h5):
    write(path, lambda daf: None)
    file = h5()
    assert set(file.keys()) == {"daf", "scalars", "axes", "vectors", "matrices"}
    assert not file.attrs.keys()
    version = file["daf"]
    assert isinstance(version, h5py.Dataset)
    assert version.shape == (2,) and version.ndim == 1
    assert version.dtype == np.uint8
    assert version.id.get_type().equal(h5py.h5t.STD_U8LE)
    assert version[()].tolist() == [1, 0]
    assert_contiguous_unfiltered(version)
    assert raw_bytes(path, version, 2) == b"\x01\x00"
    for name in ("scalars", "axes", "vectors", "matrices"):
        assert isinstance(file[name], h5py.Group)
        assert len(file[name]) == 0


def test_add_axis_creates_groups_for_every_pair_including_square(path, h5):
    write(path, lambda daf: daf.add_axis("cell", ["A", "B"]).add_axis("gene", ["X"]).add_axis("donor", ["D"]))
    file = h5()
    axes = ["cell", "gene", "donor"]
    assert set(file["axes"].keys()) == set(axes)
    assert set(file["vectors"].keys()) == set(axes)
    assert set(file["matrices"].keys()) == set(axes)
    for rows in axes:
        assert isinstance(file["vectors"][rows], h5py.Group)
        assert set(file["matrices"][rows].keys()) == set(axes)
        for columns in axes:
            assert isinstance(file[f"matrices/{rows}/{columns}"], h5py.Group)


def test_delete_axis_removes_its_vectors_and_matrices(path, h5):
    def build(daf):
        daf.add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"]).add_axis("donor", ["D"])
        daf.set_vector("gene", "length", [1, 2, 3]).set_vector("cell", "age", [4, 5])
        daf.set_matrix("cell", "gene", "UMIs", np.arange(6).reshape(2, 3))
        daf.set_matrix("cell", "donor", "kept", np.array([[1], [2]]))
        daf.delete_axis("gene")

    write(path, build)
    file = h5()
    assert set(file["axes"].keys()) == {"cell", "donor"}
    assert set(file["vectors"].keys()) == {"cell", "donor"}
    assert set(file["matrices"].keys()) == {"cell", "donor"}
    assert set(file["matrices/cell"].keys()) == {"cell", "donor"}
    assert set(file["matrices/donor"].keys()) == {"cell", "donor"}
    assert all("gene" not in name for name in groups_of(file) | set(datasets_of(file)))
    assert file["vectors/cell/age"][()].tolist() == [4, 5]
    assert file["matrices/cell/donor/kept"][()].T.tolist() == [[1], [2]]
    assert file["matrices/donor/cell/kept"][()].T.tolist() == [[1, 2]]


# Scalars (§2.5, §2.4).


@pytest.mark.parametrize("text", ["human", "", "naïve – ✓", "x"], ids=["ascii", "empty", "unicode", "one"])
def test_string_scalar_is_fixed_length_utf8_nullterm(path, h5, text):
    write(path, lambda daf: daf.set_scalar("text", text))
    dataset = h5()["scalars/text"]
    encoded = text.encode("utf-8")
    size = max(1, len(encoded))
    tid = dataset.id.get_type()
    assert dataset.shape == ()
    assert dataset.id.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
    assert tid.get_class() == h5py.h5t.STRING
    assert not tid.is_variable_str()
    assert tid.get_cset() == h5py.h5t.CSET_UTF8
    assert tid.get_strpad() == h5py.h5t.STR_NULLTERM
    assert tid.get_size() == size
    assert dataset.id.get_storage_size() == size  # "" is one NUL byte
    assert dataset[()] == encoded
    assert raw_bytes(path, dataset, size) == encoded.ljust(size, b"\0")
    h5.close()
    assert pydaf.H5df(path, "r").get_scalar("text") == text


@pytest.mark.parametrize("value", [True, False])
def test_bool_scalar_is_a_scalar_b8_bitfield(path, h5, value):
    write(path, lambda daf: daf.set_scalar("flag", value))
    dataset = h5()["scalars/flag"]
    assert dataset.shape == ()
    assert dataset.id.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
    assert_bitfield_bool(dataset)
    assert raw_bytes(path, dataset, 1) == (b"\x01" if value else b"\x00")
    h5.close()
    assert pydaf.H5df(path, "r").get_scalar("flag") is np.bool_(value)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_numeric_scalar_keeps_its_exact_type(path, h5, dtype):
    value = np.iinfo(dtype).max if np.issubdtype(dtype, np.integer) else dtype(1.25)
    write(path, lambda daf: daf.set_scalar("value", dtype(value)))
    dataset = h5()["scalars/value"]
    assert dataset.shape == ()
    assert dataset.id.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
    assert dataset.dtype == np.dtype(dtype).newbyteorder("<")
    expected_class = h5py.h5t.INTEGER if np.issubdtype(dtype, np.integer) else h5py.h5t.FLOAT
    assert type_class(dataset) == expected_class
    assert dataset[()] == value
    assert raw_bytes(path, dataset, np.dtype(dtype).itemsize) == np.array(value, dtype=dtype).tobytes()


def test_python_int_and_float_scalars_are_int64_and_float64(path, h5):
    write(path, lambda daf: daf.set_scalar("int", 3).set_scalar("float", 2.5))
    file = h5()
    assert file["scalars/int"].dtype == np.dtype("<i8") and file["scalars/int"][()] == 3
    assert file["scalars/float"].dtype == np.dtype("<f8") and file["scalars/float"][()] == 2.5
    assert file["scalars/int"].shape == () and file["scalars/float"].shape == ()


# Axes (§2.6).


def test_axes_are_variable_length_utf8_vectors(path, h5):
    entries = ["A", "naïve", "✓ cell", "B"]
    write(path, lambda daf: daf.add_axis("cell", entries))
    dataset = h5()["axes/cell"]
    assert dataset.ndim == 1 and dataset.shape == (4,)
    assert_variable_utf8(dataset)
    assert dataset.asstr()[()].tolist() == entries
    h5.close()
    assert pydaf.H5df(path, "r").axis_vector("cell").tolist() == entries


# Dense vectors (§2.7).


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_dense_vector_is_contiguous_with_exact_dtype(path, h5, dtype):
    values = np.array([0, 1, 2], dtype=dtype)
    if np.issubdtype(dtype, np.integer):
        values[2] = np.iinfo(dtype).max
    write(path, lambda daf: daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "values", values))
    dataset = h5()["vectors/cell/values"]
    assert dataset.ndim == 1 and dataset.shape == (3,)
    assert dataset.dtype == np.dtype(dtype).newbyteorder("<")
    assert_contiguous_unfiltered(dataset)
    assert np.array_equal(dataset[()], values)
    assert raw_bytes(path, dataset, values.nbytes) == values.tobytes()


def test_bool_vector_is_b8_bitfield_not_enum(path, h5):
    write(path, lambda daf: daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "mask", [True, False, True]))
    dataset = h5()["vectors/cell/mask"]
    assert_bitfield_bool(dataset)
    assert_contiguous_unfiltered(dataset)
    assert dataset.dtype == np.uint8  # how h5py sees a B8 bitfield
    assert dataset[()].tolist() == [1, 0, 1]
    assert raw_bytes(path, dataset, 3) == b"\x01\x00\x01"
    h5.close()
    mask = pydaf.H5df(path, "r").get_vector("cell", "mask")
    assert mask.dtype == np.bool_ and mask.tolist() == [True, False, True]


def test_scalar_fill_vectors_are_dense(path, h5):
    write(path, lambda daf: daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "zero", 0)
          .set_vector("cell", "half", np.float32(0.5)).set_vector("cell", "text", "ü"))
    file = h5()
    zero, half, text = file["vectors/cell/zero"], file["vectors/cell/half"], file["vectors/cell/text"]
    assert isinstance(zero, h5py.Dataset)  # H5df never turns a zero fill into sparse data
    assert zero.dtype == np.dtype("<i8") and zero[()].tolist() == [0, 0, 0]
    assert raw_bytes(path, zero, 24) == bytes(24)
    assert half.dtype == np.dtype("<f4") and half[()].tolist() == [0.5, 0.5, 0.5]
    assert_contiguous_unfiltered(zero)
    assert_contiguous_unfiltered(half)
    assert_variable_utf8(text)
    assert text.asstr()[()].tolist() == ["ü", "ü", "ü"]


# Dense matrices (§2.8, §1.3).


def test_dense_matrix_has_reversed_dims_and_both_layouts(path, h5):
    matrix = np.arange(6, dtype=np.int16).reshape(3, 2) * 7 - 5  # Daf (cell=3, gene=2)
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "UMIs", matrix))
    file = h5()
    by_cell = file["matrices/cell/gene/UMIs"]
    by_gene = file["matrices/gene/cell/UMIs"]
    assert by_cell.shape == (2, 3)
    assert by_gene.shape == (3, 2)
    for dataset in (by_cell, by_gene):
        assert dataset.dtype == np.dtype("<i2")
        assert_contiguous_unfiltered(dataset)
    assert np.array_equal(by_cell[()].T, matrix)
    assert np.array_equal(by_gene[()].T, matrix.T)
    assert raw_bytes(path, by_cell, matrix.nbytes) == matrix.tobytes(order="F")  # column-major for (R, C)
    assert raw_bytes(path, by_gene, matrix.nbytes) == matrix.T.tobytes(order="F")


def test_relayout_false_stores_one_layout(path, h5):
    matrix = np.array([[1.5, 2.5], [3.5, 4.5], [5.5, 6.5]])
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "UMIs", matrix, relayout=False))
    file = h5()
    assert set(file["matrices/cell/gene"].keys()) == {"UMIs"}
    assert len(file["matrices/gene/cell"]) == 0
    assert np.array_equal(file["matrices/cell/gene/UMIs"][()].T, matrix)


def test_square_matrix_is_stored_once(path, h5):
    matrix = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.uint32)
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "cell", "distances", matrix))
    file = h5()
    assert list(datasets_of(file["matrices"]).keys()) == ["cell/cell/distances"]
    assert np.array_equal(file["matrices/cell/cell/distances"][()].T, matrix)


def test_bool_matrix_is_b8_bitfield_in_both_layouts(path, h5):
    matrix = np.array([[True, False], [False, False], [True, True]])
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "mask", matrix))
    file = h5()
    for name, expected in (("matrices/cell/gene/mask", matrix), ("matrices/gene/cell/mask", matrix.T)):
        assert_bitfield_bool(file[name])
        assert_contiguous_unfiltered(file[name])
        assert np.array_equal(file[name][()].T, expected.astype(np.uint8))


def test_scalar_fill_matrix_is_dense_with_reversed_dims(path, h5):
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "ones", np.uint16(1), relayout=False))
    dataset = h5()["matrices/cell/gene/ones"]
    assert dataset.shape == (2, 3)
    assert dataset.dtype == np.dtype("<u2")
    assert_contiguous_unfiltered(dataset)
    assert dataset[()].tolist() == [[1, 1, 1], [1, 1, 1]]


# Sparse vectors and matrices (§2.7, §2.8, §1.4, §1.6).


def test_sparse_vector_is_a_group_with_1_based_nzind_and_nzval(path, h5):
    vector = SparseVector(5, np.array([2, 5], dtype=np.int64), np.array([1.5, -2.0], dtype=np.float32))
    write(path, lambda daf: daf.add_axis("cell", list("ABCDE")).set_vector("cell", "x", vector)
          .set_vector("cell", "y", sp.csr_matrix(np.array([[0, 0, 7, 0, 0]], dtype=np.int8))))
    file = h5()
    group = file["vectors/cell/x"]
    assert isinstance(group, h5py.Group) and set(group.keys()) == {"nzind", "nzval"}
    assert group["nzind"].dtype == np.dtype("<i8") and group["nzind"][()].tolist() == [2, 5]
    assert group["nzval"].dtype == np.dtype("<f4") and group["nzval"][()].tolist() == [1.5, -2.0]
    from_scipy = file["vectors/cell/y"]
    assert from_scipy["nzind"][()].tolist() == [3]
    assert from_scipy["nzval"].dtype == np.int8 and from_scipy["nzval"][()].tolist() == [7]
    for dataset in (group["nzind"], group["nzval"], from_scipy["nzind"], from_scipy["nzval"]):
        assert dataset.ndim == 1
        assert_contiguous_unfiltered(dataset)
    h5.close()
    assert pydaf.H5df(path, "r").get_vector("cell", "x").tolist() == [0, 1.5, 0, 0, -2.0]


def test_sparse_matrix_is_1_based_csc_in_both_layouts(path, h5):
    dense = np.array([[0, 1.5], [0, 0], [2.5, 3.5]])  # Daf (cell=3, gene=2), nnz=3
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "UMIs", sp.csc_matrix(dense)))
    file = h5()
    for name, expected in (("matrices/cell/gene/UMIs", dense), ("matrices/gene/cell/UMIs", dense.T)):
        group = file[name]
        assert isinstance(group, h5py.Group) and set(group.keys()) == {"colptr", "rowval", "nzval"}
        colptr, rowval, nzval = group["colptr"][()], group["rowval"][()], group["nzval"][()]
        n_rows, n_columns = expected.shape
        assert colptr.shape == (n_columns + 1,)
        assert colptr[0] == 1 and colptr[-1] == 3 + 1
        assert group["colptr"].dtype == group["rowval"].dtype
        assert rowval.min() >= 1 and rowval.max() <= n_rows
        assert nzval.dtype == np.float64
        rebuilt = sp.csc_matrix((nzval, rowval - 1, colptr - 1), shape=expected.shape).toarray()
        assert np.array_equal(rebuilt, expected)
        for component in group.values():
            assert component.ndim == 1
            assert_contiguous_unfiltered(component)
    assert file["matrices/cell/gene/UMIs/colptr"][()].tolist() == [1, 2, 4]
    assert file["matrices/cell/gene/UMIs/rowval"][()].tolist() == [3, 1, 3]
    assert file["matrices/gene/cell/UMIs/colptr"][()].tolist() == [1, 2, 2, 4]
    assert file["matrices/gene/cell/UMIs/rowval"][()].tolist() == [2, 1, 2]


@pytest.mark.parametrize("indtype", [np.int32, np.uint32, np.int64])
def test_sparse_matrix_keeps_its_index_type_for_colptr_and_rowval(path, h5, indtype):
    matrix = SparseMatrixCSC((3, 2), np.array([1, 2, 3], dtype=indtype), np.array([2, 3], dtype=indtype),
                             np.array([10, 20], dtype=np.uint8))
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "m", matrix))
    file = h5()
    for name in ("matrices/cell/gene/m", "matrices/gene/cell/m"):
        assert file[f"{name}/colptr"].dtype == np.dtype(indtype).newbyteorder("<")
        assert file[f"{name}/rowval"].dtype == np.dtype(indtype).newbyteorder("<")
        assert file[f"{name}/nzval"].dtype == np.uint8
    assert file["matrices/cell/gene/m/rowval"][()].tolist() == [2, 3]
    assert file["matrices/gene/cell/m/colptr"][()].tolist() == [1, 1, 2, 3]
    assert file["matrices/gene/cell/m/rowval"][()].tolist() == [1, 2]


def test_all_true_bool_sparse_vector_omits_nzval(path, h5):
    all_true = SparseVector(4, np.array([1, 3], dtype=np.int64), np.array([True, True]))
    mixed = SparseVector(4, np.array([1, 3], dtype=np.int64), np.array([True, False]))
    write(path, lambda daf: daf.add_axis("cell", list("ABCD")).set_vector("cell", "all_true", all_true)
          .set_vector("cell", "mixed", mixed))
    file = h5()
    assert set(file["vectors/cell/all_true"].keys()) == {"nzind"}
    assert file["vectors/cell/all_true/nzind"][()].tolist() == [1, 3]
    assert set(file["vectors/cell/mixed"].keys()) == {"nzind", "nzval"}
    assert_bitfield_bool(file["vectors/cell/mixed/nzval"])
    assert file["vectors/cell/mixed/nzval"][()].tolist() == [1, 0]
    h5.close()
    daf = pydaf.H5df(path, "r")
    assert daf.get_vector("cell", "all_true").tolist() == [True, False, True, False]
    assert daf.get_vector("cell", "all_true").dtype == np.bool_


def test_all_true_bool_sparse_matrix_omits_nzval_but_relayout_copy_has_it(path, h5):
    dense = np.array([[True, False], [False, True], [True, True]])
    write(path, lambda daf: cells_and_genes(daf).set_matrix("cell", "gene", "mask", sp.csc_matrix(dense)))
    file = h5()
    assert set(file["matrices/cell/gene/mask"].keys()) == {"colptr", "rowval"}
    relayout = file["matrices/gene/cell/mask"]
    assert set(relayout.keys()) == {"colptr", "rowval", "nzval"}
    assert_bitfield_bool(relayout["nzval"])
    assert relayout["nzval"][()].tolist() == [1, 1, 1, 1]
    h5.close()
    daf = pydaf.H5df(path, "r")
    assert np.array_equal(daf.get_matrix("cell", "gene", "mask", relayout=False).toarray(), dense)
    assert np.array_equal(daf.get_matrix("gene", "cell", "mask", relayout=False).toarray(), dense.T)


def test_empty_sparse_bool_builders_always_write_nzval(path, h5):
    def build(daf):
        cells_and_genes(daf)
        with daf.empty_sparse_vector("cell", "v", "Bool", 2) as (nzind, nzval):
            nzind[:] = [1, 3]
            nzval[:] = True
        with daf.empty_sparse_matrix("cell", "gene", "m", "Bool", 1) as (colptr, rowval, nzval):
            colptr[:] = [1, 1, 2]
            rowval[:] = [2]
            nzval[:] = True

    write(path, build)
    file = h5()
    assert set(file["vectors/cell/v"].keys()) == {"nzind", "nzval"}
    assert set(file["matrices/cell/gene/m"].keys()) == {"colptr", "rowval", "nzval"}
    for name in ("vectors/cell/v/nzval", "matrices/cell/gene/m/nzval"):
        assert_bitfield_bool(file[name])
        assert set(file[name][()].tolist()) == {1}


def test_sparse_with_no_stored_entries(path, h5):
    empty = SparseVector(3, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    write(path, lambda daf: cells_and_genes(daf).set_vector("cell", "none", empty)
          .set_matrix("cell", "gene", "none", sp.csc_matrix((3, 2), dtype=np.int32)))
    file = h5()
    assert file["vectors/cell/none/nzind"].shape == (0,) and file["vectors/cell/none/nzval"].shape == (0,)
    assert file["matrices/cell/gene/none/colptr"][()].tolist() == [1, 1, 1]
    assert file["matrices/cell/gene/none/rowval"].shape == (0,)
    h5.close()
    daf = pydaf.H5df(path, "r")
    assert daf.get_vector("cell", "none").tolist() == [0.0, 0.0, 0.0]
    assert daf.get_matrix("cell", "gene", "none").nnz == 0


# Strings: the 0.75 rule (§1.5) for vectors and matrices.
#
# Vector of n = 10 entries, I = UInt32 (4 bytes), one non-empty entry of c characters:
#   dense = c + 10, sparse = c + 1 * (1 + 4) = c + 5; sparse iff c + 5 <= 0.75 * (c + 10) iff c <= 10.
#   c = 10: 15 <= 15 (sparse, the boundary); c = 11: 16 > 15.75 (dense).
#   "é" * 10 is 10 characters but 20 bytes: sparse by characters (by bytes it would be 25 > 22.5, dense).
#   Three entries "ab", "cd", "ef": dense = 6 + 10 = 16, sparse = 6 + 15 = 21 (dense).


@pytest.mark.parametrize(("text", "is_sparse"), [
    ("a" * 10, True),
    ("a" * 11, False),
    ("é" * 10, True),
    ("é" * 11, False),
    ("✓" * 9, True),
], ids=["10_ascii_sparse", "11_ascii_dense", "10_two_byte_sparse", "11_two_byte_dense", "9_three_byte_sparse"])
def test_string_vector_with_one_value_follows_the_075_rule(path, h5, text, is_sparse):
    values = [""] * 10
    values[6] = text
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(10)])
          .set_vector("cell", "text", values))
    node = h5()["vectors/cell/text"]
    if is_sparse:
        assert isinstance(node, h5py.Group) and set(node.keys()) == {"nzind", "nztxt"}
        assert node["nzind"].dtype == np.dtype("<u4")
        assert node["nzind"][()].tolist() == [7]
        assert_contiguous_unfiltered(node["nzind"])
        assert_variable_utf8(node["nztxt"])
        assert node["nztxt"].asstr()[()].tolist() == [text]
    else:
        assert isinstance(node, h5py.Dataset) and node.shape == (10,)
        assert_variable_utf8(node)
        assert node.asstr()[()].tolist() == values
    h5.close()
    assert pydaf.H5df(path, "r").get_vector("cell", "text").tolist() == values


def test_string_vector_sparse_with_several_values(path, h5):
    # n = 10, 2 non-empty of 3 + 1 characters: dense = 4 + 10 = 14, sparse = 4 + 2 * 5 = 14 > 10.5 (dense).
    # n = 40, same 2 values: dense = 4 + 40 = 44, sparse = 14 <= 33 (sparse).
    short = ["", "abc", "", "", "", "", "", "", "", "ü"]
    long = short + [""] * 30
    write(path, lambda daf: daf.add_axis("short", [f"s{index}" for index in range(10)])
          .add_axis("long", [f"l{index}" for index in range(40)])
          .set_vector("short", "text", short).set_vector("long", "text", long))
    file = h5()
    assert isinstance(file["vectors/short/text"], h5py.Dataset)
    assert file["vectors/short/text"].asstr()[()].tolist() == short
    group = file["vectors/long/text"]
    assert isinstance(group, h5py.Group)
    assert group["nzind"][()].tolist() == [2, 10]
    assert group["nztxt"].asstr()[()].tolist() == ["abc", "ü"]
    h5.close()
    assert pydaf.H5df(path, "r").get_vector("long", "text").tolist() == long


# Matrix of R = 20 rows, C = 2 columns (40 values), I = UInt32, one non-empty cell of c characters:
#   dense = c + 40, sparse = c + 1 + (2 + 1 + 1) * 4 = c + 17; sparse iff c + 17 <= 0.75 * (c + 40) iff c <= 52.
#   c = 52: 69 <= 69 (sparse, the boundary); c = 53: 70 > 69.75 (dense).
#   "é" * 52: 52 characters (by bytes, 104: 121 > 108, dense).
# Its relayout copy (R = 2, C = 20): sparse = c + 1 + (20 + 1 + 1) * 4 = c + 89 > 0.75 * (c + 40): always dense.


@pytest.mark.parametrize(("text", "is_sparse"), [("a" * 52, True), ("a" * 53, False), ("é" * 52, True)],
                         ids=["52_ascii_sparse", "53_ascii_dense", "52_two_byte_sparse"])
def test_string_matrix_follows_the_075_rule(path, h5, text, is_sparse):
    matrix = np.full((20, 2), "", dtype=object)
    matrix[4, 1] = text  # row 5, column 2 (1-based)
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(20)]).add_axis("gene", ["X", "Y"])
          .set_matrix("cell", "gene", "text", matrix))
    file = h5()
    node = file["matrices/cell/gene/text"]
    if is_sparse:
        assert isinstance(node, h5py.Group) and set(node.keys()) == {"colptr", "rowval", "nztxt"}
        assert node["colptr"].dtype == np.dtype("<u4") and node["rowval"].dtype == np.dtype("<u4")
        assert node["colptr"][()].tolist() == [1, 1, 2]
        assert node["rowval"][()].tolist() == [5]
        assert_variable_utf8(node["nztxt"])
        assert node["nztxt"].asstr()[()].tolist() == [text]
    else:
        assert isinstance(node, h5py.Dataset) and node.shape == (2, 20)
        assert_variable_utf8(node)
        assert node.asstr()[()].T.tolist() == matrix.tolist()
    relayout = file["matrices/gene/cell/text"]
    assert isinstance(relayout, h5py.Dataset) and relayout.shape == (20, 2)
    assert_variable_utf8(relayout)
    assert relayout.asstr()[()].T.tolist() == matrix.T.tolist()
    h5.close()
    daf = pydaf.H5df(path, "r")
    assert daf.get_matrix("cell", "gene", "text", relayout=False).tolist() == matrix.tolist()
    assert daf.get_matrix("gene", "cell", "text", relayout=False).tolist() == matrix.T.tolist()


def test_sparse_string_matrix_column_major_order(path, h5):
    # R = 30, C = 3, 3 one-character cells: dense = 3 + 90 = 93, sparse = 3 + 3 + (4 + 3) * 4 = 34 <= 69.75.
    matrix = np.full((30, 3), "", dtype=object)
    matrix[7, 0], matrix[2, 2], matrix[20, 2] = "a", "b", "c"
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(30)])
          .add_axis("gene", ["X", "Y", "Z"]).set_matrix("cell", "gene", "text", matrix, relayout=False))
    group = h5()["matrices/cell/gene/text"]
    assert group["colptr"][()].tolist() == [1, 2, 2, 4]
    assert group["rowval"][()].tolist() == [8, 3, 21]
    assert group["nztxt"].asstr()[()].tolist() == ["a", "b", "c"]


# Alignment (§2.2).


def test_every_numeric_dataset_is_8_byte_aligned(path, h5):
    def build(daf):
        daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y", "Z", "W", "V"])
        for index in range(4):
            daf.set_vector("cell", f"u8_{index}", np.array([1, 2, 3], dtype=np.uint8))
            daf.set_vector("cell", f"bool_{index}", [True, False, True])
            daf.set_vector("cell", f"text_{index}", ["x" * index, "yy", "zzz"])
            daf.set_scalar(f"text_{index}", "abc" * index)
            daf.set_scalar(f"flag_{index}", index % 2 == 0)
            daf.set_vector("cell", f"f64_{index}", np.array([1.5, 2.5, 3.5]))
            daf.set_scalar(f"i16_{index}", np.int16(index))
        daf.set_matrix("cell", "gene", "u8", np.arange(15, dtype=np.uint8).reshape(3, 5))
        daf.set_matrix("cell", "gene", "f32", np.arange(15, dtype=np.float32).reshape(3, 5))
        daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.eye(3, 5, dtype=np.int16)))
        daf.set_vector("gene", "sparse", SparseVector(5, np.array([2], np.int32), np.array([7], np.uint8)))
        with daf.empty_dense_vector("gene", "empty_u8", "UInt8") as values:
            values[:] = 9
        with daf.empty_dense_vector("gene", "empty_f64", "Float64") as values:
            values[:] = 0.5
        with daf.empty_sparse_matrix("gene", "cell", "empty_sparse", "UInt16", 1, "Int16") as (colptr, rowval, nzval):
            colptr[:] = [1, 2, 2, 2]
            rowval[:] = [5]
            nzval[:] = 3

    write(path, build)
    checked = 0
    for name, dataset in datasets_of(h5()).items():
        if not is_numeric(dataset):
            continue
        offset = dataset.id.get_offset()
        assert offset is not None, name
        assert offset % 8 == 0, (name, offset)
        checked += 1
    assert checked == 38  # every numeric dataset written above, none skipped


# The empty_* builders (§2.9).


def test_empty_dense_vector_writes_into_the_file(path, h5):
    def build(daf):
        daf.add_axis("cell", list("ABCDE"))
        with daf.empty_dense_vector("cell", "age", "Int32") as age:
            assert age.shape == (5,) and age.dtype == np.int32
            assert age.tolist() == [0, 0, 0, 0, 0]
            age[:] = [5, -4, 3, -2, 1]

    write(path, build)
    dataset = h5()["vectors/cell/age"]
    assert_contiguous_unfiltered(dataset)
    assert dataset.dtype == np.dtype("<i4")
    assert dataset[()].tolist() == [5, -4, 3, -2, 1]


def test_empty_dense_matrix_writes_column_major_into_the_file(path, h5):
    expected = np.array([[1.5, 2.5], [3.5, 4.5], [5.5, 6.5]], dtype=np.float32)

    def build(daf):
        cells_and_genes(daf)
        with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as umis:
            assert umis.shape == (3, 2) and umis.flags.f_contiguous
            umis[:, 0] = expected[:, 0]
            umis[:, 1] = expected[:, 1]

    write(path, build)
    file = h5()
    dataset = file["matrices/cell/gene/UMIs"]
    assert_contiguous_unfiltered(dataset)
    assert dataset.shape == (2, 3) and dataset.dtype == np.dtype("<f4")
    assert np.array_equal(dataset[()].T, expected)
    assert len(file["matrices/gene/cell"]) == 0  # builders fill one layout only


def test_empty_sparse_vector_writes_into_the_file(path, h5):
    def build(daf):
        daf.add_axis("cell", list("ABCDE"))
        with daf.empty_sparse_vector("cell", "x", "Float64", 2) as (nzind, nzval):
            assert nzind.dtype == np.uint32  # indtype_for_size default
            nzind[:] = [2, 4]
            nzval[:] = [0.25, -8.0]

    write(path, build)
    group = h5()["vectors/cell/x"]
    assert group["nzind"].dtype == np.dtype("<u4") and group["nzind"][()].tolist() == [2, 4]
    assert group["nzval"].dtype == np.dtype("<f8") and group["nzval"][()].tolist() == [0.25, -8.0]
    assert_contiguous_unfiltered(group["nzind"])
    assert_contiguous_unfiltered(group["nzval"])
    h5.close()
    assert pydaf.H5df(path, "r").get_vector("cell", "x").tolist() == [0, 0.25, 0, -8.0, 0]


def test_empty_sparse_matrix_writes_into_the_file(path, h5):
    def build(daf):
        cells_and_genes(daf)
        with daf.empty_sparse_matrix("cell", "gene", "m", "Int8", 3) as (colptr, rowval, nzval):
            assert colptr.dtype == rowval.dtype == np.uint32
            assert colptr.tolist() == [1, 4, 4] and rowval.tolist() == [1, 1, 1] and nzval.tolist() == [0, 0, 0]
            colptr[:] = [1, 2, 4]
            rowval[:] = [3, 1, 2]
            nzval[:] = [-1, 2, -3]

    write(path, build)
    group = h5()["matrices/cell/gene/m"]
    for component in group.values():
        assert_contiguous_unfiltered(component)
    assert group["colptr"].dtype == group["rowval"].dtype == np.dtype("<u4")
    assert group["colptr"][()].tolist() == [1, 2, 4]
    assert group["rowval"][()].tolist() == [3, 1, 2]
    assert group["nzval"].dtype == np.int8 and group["nzval"][()].tolist() == [-1, 2, -3]
    expected = np.array([[0, 2], [0, -3], [-1, 0]])
    h5.close()
    assert np.array_equal(pydaf.H5df(path, "r").get_matrix("cell", "gene", "m").toarray(), expected)


BUILDERS = {
    "dense_vector": lambda daf: daf.empty_dense_vector("cell", "partial", "Float64"),
    "sparse_vector": lambda daf: daf.empty_sparse_vector("cell", "partial", "Int32", 2),
    "dense_matrix": lambda daf: daf.empty_dense_matrix("cell", "gene", "partial", "UInt8"),
    "sparse_matrix": lambda daf: daf.empty_sparse_matrix("cell", "gene", "partial", "Float32", 2),
}


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_failing_builder_removes_the_partial_property(path, h5, builder):
    def build(daf):
        cells_and_genes(daf).set_vector("cell", "kept", [1.5, 2.5, 3.5])
        daf.set_matrix("cell", "gene", "kept", np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64))
        with pytest.raises(RuntimeError, match="boom"), BUILDERS[builder](daf) as buffers:
            for buffer in buffers if isinstance(buffers, tuple) else (buffers,):
                buffer[...] = 1
            raise RuntimeError("boom")
        assert not daf.has_vector("cell", "partial")
        assert not daf.has_matrix("cell", "gene", "partial")

    write(path, build)
    file = h5()
    assert set(file["vectors/cell"].keys()) == {"kept"}
    assert set(file["matrices/cell/gene"].keys()) == {"kept"}
    assert set(file["matrices/gene/cell"].keys()) == {"kept"}
    assert file["vectors/cell/kept"][()].tolist() == [1.5, 2.5, 3.5]
    assert file["matrices/cell/gene/kept"][()].T.tolist() == [[1, 2], [3, 4], [5, 6]]
    h5.close()
    daf = pydaf.H5df(path, "r")
    assert daf.vectors_set("cell") == {"kept"}
    assert daf.get_matrix("gene", "cell", "kept").tolist() == [[1, 3, 5], [2, 4, 6]]


# Reading files written by other tools (§2.10, §7).


FOREIGN_VALUES = np.array([1.25, -2.5, 3.75, 1e300, -0.0])
FOREIGN_MATRIX = np.arange(10, dtype=np.int32).reshape(5, 2) * 3  # Daf (cell=5, gene=2)


@pytest.fixture
def foreign(tmp_path) -> str:
    """A Daf file written by plain h5py, without alignment, with datasets Julia would not write."""
    path = str(tmp_path / "foreign.h5df")
    with h5py.File(path, "w") as file:
        file.create_dataset("daf", data=np.array([1, 0], dtype=np.uint8))
        for name in ("scalars", "axes", "vectors", "matrices"):
            file.create_group(name)
        axes = {"cell": ["A", "B", "C", "D", "E"], "gene": ["X", "Y"]}
        for axis, entries in axes.items():
            file["axes"].create_dataset(axis, data=entries, dtype=h5py.string_dtype("utf-8"))
            file["vectors"].create_group(axis)
            for other in axes:
                file.create_group(f"matrices/{axis}/{other}")
        vectors = file["vectors/cell"]
        vectors.create_dataset("padding", data=np.array([1, 2, 3], dtype=np.uint8))
        vectors.create_dataset("unaligned", data=FOREIGN_VALUES)
        vectors.create_dataset("gzip", data=FOREIGN_VALUES, chunks=(2,), compression="gzip")
        vectors.create_dataset("enum_bool", data=np.array([True, False, True, True, False]))
        vectors.create_dataset("big_endian", data=FOREIGN_VALUES.astype(">f8"))
        vectors.create_dataset("big_endian_int", data=np.array([1, -2, 3, -4, 5], dtype=">i4"))
        file["matrices/cell/gene"].create_dataset("gzip", data=FOREIGN_MATRIX.T, chunks=(1, 3),
                                                  compression="gzip", shuffle=True)
        file["scalars"].create_dataset("flag", data=np.bool_(True))
        file["scalars"].create_dataset("variable_text", data="naïve", dtype=h5py.string_dtype("utf-8"))
    return path


def test_foreign_file_is_what_the_tests_claim(foreign):
    with h5py.File(foreign, "r") as file:
        assert file["vectors/cell/unaligned"].id.get_offset() % 8 != 0
        assert file["vectors/cell/gzip"].id.get_create_plist().get_layout() == h5py.h5d.CHUNKED
        assert file["vectors/cell/gzip"].id.get_create_plist().get_nfilters() == 1
        assert file["matrices/cell/gene/gzip"].id.get_create_plist().get_nfilters() == 2
        assert type_class(file["vectors/cell/enum_bool"]) == h5py.h5t.ENUM
        assert file["vectors/cell/big_endian"].dtype == np.dtype(">f8")


def test_reads_an_unaligned_dataset(foreign):
    daf = pydaf.H5df(foreign, "r")
    values = daf.get_vector("cell", "unaligned")
    assert values.dtype == np.float64
    assert values.tolist() == FOREIGN_VALUES.tolist()
    with pytest.raises(pydaf.DafFormatError, match="vector: padding\nof the axis: cell"):
        daf.get_vector("cell", "padding")  # 3 bytes that misalign the next dataset, not a vector of the 5 cells


def test_reads_chunked_gzip_datasets(foreign):
    daf = pydaf.H5df(foreign, "r")
    values = daf.get_vector("cell", "gzip")
    assert values.dtype == np.float64 and values.tolist() == FOREIGN_VALUES.tolist()
    matrix = daf.get_matrix("cell", "gene", "gzip")
    assert matrix.dtype == np.int32 and matrix.shape == (5, 2)
    assert np.array_equal(matrix, FOREIGN_MATRIX)
    assert np.array_equal(daf.get_matrix("gene", "cell", "gzip"), FOREIGN_MATRIX.T)


def test_reads_h5py_enum_bool_as_bool(foreign):
    daf = pydaf.H5df(foreign, "r")
    mask = daf.get_vector("cell", "enum_bool")
    assert mask.dtype == np.bool_
    assert mask.tolist() == [True, False, True, True, False]
    flag = daf.get_scalar("flag")
    assert isinstance(flag, np.bool_) and bool(flag) is True


def test_reads_big_endian_datasets_as_native_values(foreign):
    daf = pydaf.H5df(foreign, "r")
    values = daf.get_vector("cell", "big_endian")
    assert values.dtype == np.dtype("=f8")
    assert values.tolist() == FOREIGN_VALUES.tolist()
    integers = daf.get_vector("cell", "big_endian_int")
    assert integers.dtype == np.dtype("=i4") and integers.tolist() == [1, -2, 3, -4, 5]


def test_reads_variable_length_string_scalar(foreign):
    assert pydaf.H5df(foreign, "r").get_scalar("variable_text") == "naïve"


# Zero-copy reads (§2.10).


def test_dense_matrix_is_read_through_a_map_of_the_file(path):
    matrix = np.arange(4000, dtype=np.float64).reshape(100, 40)
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(100)])
          .add_axis("gene", [f"g{index}" for index in range(40)]).set_matrix("cell", "gene", "UMIs", matrix))
    daf = pydaf.H5df(path, "r")
    result = daf.get_matrix("cell", "gene", "UMIs")
    assert result.shape == (100, 40) and result.flags.f_contiguous
    assert np.array_equal(result, matrix)
    assert_file_mapped(result, path)
    relayout = daf.get_matrix("gene", "cell", "UMIs", relayout=False)
    assert np.array_equal(relayout, matrix.T)
    assert_file_mapped(relayout, path)


def test_sparse_matrix_components_are_read_through_a_map_of_the_file(path):
    dense = np.zeros((200, 30), dtype=np.float32)
    dense[::7, ::3] = np.arange(1, 1 + dense[::7, ::3].size, dtype=np.float32).reshape(dense[::7, ::3].shape)
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(200)])
          .add_axis("gene", [f"g{index}" for index in range(30)])
          .set_matrix("cell", "gene", "UMIs", sp.csc_matrix(dense), relayout=False))
    daf = pydaf.H5df(path, "r")
    stored = daf.get_stored_matrix("cell", "gene", "UMIs")
    assert isinstance(stored, SparseMatrixCSC)
    assert_file_mapped(stored.nzval, path)
    assert_file_mapped(stored.rowval, path)
    assert_file_mapped(stored.colptr, path)
    assert np.array_equal(stored.to_scipy().toarray(), dense)


def test_dense_vector_is_read_through_a_map_of_the_file(path):
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(1000)])
          .set_vector("cell", "age", np.arange(1000, dtype=np.uint16)))
    values = pydaf.H5df(path, "r").get_vector("cell", "age")
    assert values.tolist() == list(range(1000))
    assert_file_mapped(values, path)


# Repack (§2.11).


CHURN_DTYPES = [np.uint8, np.int16, np.int32, np.float64]


def test_repack_reclaims_space_and_preserves_every_property(tmp_path):
    source, destination = str(tmp_path / "source.h5df"), str(tmp_path / "destination.h5df")
    big = 20_000

    def build(daf):
        daf.add_axis("cell", [f"c{index}" for index in range(big)])
        daf.add_axis("gene", [f"g{index}" for index in range(20)])
        daf.set_scalar("text", "naïve").set_scalar("flag", True).set_scalar("u16", np.uint16(7)).set_scalar("f", 0.5)
        daf.set_vector("cell", "u8", np.arange(big, dtype=np.uint8))
        daf.set_vector("cell", "mask", np.arange(big) % 3 == 0)
        daf.set_vector("gene", "sparse", SparseVector(20, np.array([2], np.int64), np.array([1.5])))
        daf.set_vector("gene", "all_true", SparseVector(20, np.array([1, 3], np.int32), np.array([True, True])))
        daf.set_vector("gene", "names", ["", "y", ""] + [""] * 17)
        cells_text = np.full(big, "", dtype=object)
        cells_text[[5, 500]] = ["five", "five hundred"]
        daf.set_vector("cell", "sparse_text", cells_text)
        daf.set_matrix("gene", "gene", "square", np.eye(20, dtype=np.float32))
        daf.set_matrix("gene", "cell", "sparse", sp.random(20, big, density=0.01, format="csc", random_state=1))
        with daf.empty_dense_vector("gene", "built", "Int16") as values:
            values[:] = np.arange(-10, 10)

    def churn(daf, round):  # one session per round: HDF5 reuses space freed in a session, but forgets it at close
        daf.set_vector("cell", f"big_{round}", np.full(big, round, dtype=np.float64))
        if round:
            daf.delete_vector("cell", f"big_{round - 1}")
        daf.set_vector("cell", "noise", np.full(big, round, dtype=np.int16), overwrite=True)
        daf.set_matrix("gene", "cell", "UMIs", np.full((20, big), round, dtype=CHURN_DTYPES[round]), overwrite=True,
                       relayout=False)  # each version is larger than the space the previous one frees

    write(source, build)
    for round in range(4):
        write(source, lambda daf, round=round: churn(daf, round), mode="r+")
    pydaf.repack(source, destination, progress=False)
    lost = 20 * big * sum(np.dtype(dtype).itemsize for dtype in CHURN_DTYPES[:-1])  # the replaced UMIs versions
    assert os.path.getsize(destination) <= os.path.getsize(source) - lost

    with h5py.File(source, "r") as old, h5py.File(destination, "r") as new:
        assert groups_of(old) == groups_of(new)
        old_datasets, new_datasets = datasets_of(old), datasets_of(new)
        assert set(old_datasets) == set(new_datasets)
        for name, dataset in new_datasets.items():
            original = old_datasets[name]
            assert dataset.id.get_type().equal(original.id.get_type()), name
            assert dataset.shape == original.shape, name
            if is_numeric(dataset):
                assert np.array_equal(dataset[()], original[()]), name
                if dataset.size:
                    assert_contiguous_unfiltered(dataset)
                    assert dataset.id.get_offset() % 8 == 0, name
            elif dataset.id.get_type().is_variable_str():
                assert np.array_equal(dataset.asstr()[()], original.asstr()[()]), name
            else:
                assert dataset[()] == original[()], name

    old_daf, new_daf = pydaf.H5df(source, "r"), pydaf.H5df(destination, "r")
    assert new_daf.scalars_set() == old_daf.scalars_set() == {"text", "flag", "u16", "f"}
    for name in old_daf.scalars_set():
        assert type(new_daf.get_scalar(name)) is type(old_daf.get_scalar(name))
        assert new_daf.get_scalar(name) == old_daf.get_scalar(name)
    assert new_daf.axes_set() == old_daf.axes_set()
    for axis in old_daf.axes_set():
        assert new_daf.axis_vector(axis).tolist() == old_daf.axis_vector(axis).tolist()
        assert new_daf.vectors_set(axis) == old_daf.vectors_set(axis)
        for name in old_daf.vectors_set(axis):
            old_vector, new_vector = old_daf.get_stored_vector(axis, name), new_daf.get_stored_vector(axis, name)
            assert type(new_vector) is type(old_vector)
            assert new_vector.dtype == old_vector.dtype
            assert np.array_equal(new_daf.get_vector(axis, name), old_daf.get_vector(axis, name))
        for other in old_daf.axes_set():
            names = old_daf.matrices_set(axis, other, relayout=False)
            assert new_daf.matrices_set(axis, other, relayout=False) == names
            for name in names:
                old_matrix = old_daf.get_stored_matrix(axis, other, name, relayout=False)
                new_matrix = new_daf.get_stored_matrix(axis, other, name, relayout=False)
                assert type(new_matrix) is type(old_matrix)
                assert new_matrix.dtype == old_matrix.dtype
                if isinstance(old_matrix, SparseMatrixCSC):
                    assert new_matrix.colptr.dtype == old_matrix.colptr.dtype
                    assert np.array_equal(new_matrix.colptr, old_matrix.colptr)
                    assert np.array_equal(new_matrix.rowval, old_matrix.rowval)
                    assert np.array_equal(new_matrix.nzval, old_matrix.nzval)
                else:
                    assert np.array_equal(new_matrix, old_matrix)
    assert new_daf.get_vector("cell", "noise")[0] == 3
    assert new_daf.vectors_set("cell") == {"u8", "mask", "sparse_text", "big_3", "noise"}
    assert new_daf.get_vector("cell", "sparse_text")[500] == "five hundred"


# Modes and malformed files (§2.1, §1.7, §2.3).


def test_read_mode_on_a_missing_file_raises(tmp_path):
    missing = tmp_path / "missing.h5df"
    with pytest.raises(pydaf.DafError):
        pydaf.H5df(missing, "r")
    with pytest.raises(pydaf.DafError):
        pydaf.H5df(missing, "r+")
    assert not missing.exists()


def test_read_mode_returns_a_read_only_data_set(path):
    write(path, lambda daf: daf.set_scalar("x", 1))
    daf = pydaf.H5df(path, "r")
    assert isinstance(daf, pydaf.DafReadOnly)
    assert not hasattr(daf, "set_scalar")
    assert isinstance(daf.base, pydaf.H5df)
    assert daf.get_scalar("x") == 1


def test_w_plus_refuses_a_non_daf_hdf5_file_and_keeps_it(path):
    with h5py.File(path, "w") as file:
        file.create_dataset("payload", data=np.arange(5))
        file.attrs["owner"] = "someone"
    before = open(path, "rb").read()
    with pytest.raises(pydaf.DafFormatError, match="not a daf data set"):
        pydaf.H5df(path, "w+")
    gc.collect()
    assert open(path, "rb").read() == before
    with h5py.File(path, "r") as file:
        assert set(file.keys()) == {"payload"}
        assert file["payload"][()].tolist() == [0, 1, 2, 3, 4]
        assert file.attrs["owner"] == "someone"


def test_w_refuses_a_non_daf_hdf5_file(path):
    # Julia's H5df truncates any file in mode w; pydaf erases only an H5df data set (or an empty file).
    with h5py.File(path, "w") as file:
        file.create_dataset("payload", data=np.arange(5))
        file.attrs["owner"] = "someone"
    with pytest.raises(pydaf.DafModeError, match="will not erase it in mode w"):
        write(path, lambda daf: daf.set_scalar("x", 1))
    with h5py.File(path, "r") as file:
        assert set(file.keys()) == {"payload"} and file.attrs["owner"] == "someone"


def test_w_plus_creates_and_then_reopens_without_truncating(path):
    write(path, lambda daf: daf.set_scalar("x", 1), mode="w+")
    write(path, lambda daf: daf.set_scalar("y", 2), mode="w+")
    with h5py.File(path, "r") as file:
        assert set(file["scalars"].keys()) == {"x", "y"}


def test_w_plus_on_an_empty_hdf5_file_creates_the_skeleton(path):
    with h5py.File(path, "w"):
        pass
    write(path, lambda daf: None, mode="w+")
    with h5py.File(path, "r") as file:
        assert set(file.keys()) == {"daf", "scalars", "axes", "vectors", "matrices"}


@pytest.mark.parametrize("mode", ["rw", "a", "", "W", "r+w"])
def test_invalid_mode_raises(path, mode):
    with pytest.raises(pydaf.DafModeError, match="invalid mode"):
        pydaf.H5df(path, mode)
    assert not os.path.exists(path)


@pytest.mark.parametrize(("version", "message"), [
    ([2, 0], "incompatible format version"),
    ([1, 1], "incompatible format version"),
])
def test_incompatible_version_raises(path, version, message):
    write(path, lambda daf: None)
    with h5py.File(path, "r+") as file:
        file["daf"][...] = np.array(version, dtype=np.uint8)
    for mode in ("r", "r+", "w+"):
        with pytest.raises(pydaf.DafFormatError, match=message):
            pydaf.H5df(path, mode)
        gc.collect()


def test_signed_version_dataset_is_refused(path):
    write(path, lambda daf: None)
    with h5py.File(path, "r+") as file:
        del file["daf"]
        file.create_dataset("daf", data=np.array([1, 0], dtype=np.int64))
    with pytest.raises(pydaf.DafFormatError):
        pydaf.H5df(path, "r")


def test_a_truncated_file_raises_a_daf_error_without_crashing(path, tmp_path):
    write(path, lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(300)])
          .add_axis("gene", [f"g{index}" for index in range(100)]).set_vector("cell", "age", np.arange(300.0))
          .set_matrix("cell", "gene", "UMIs", np.arange(30000, dtype=np.float64).reshape(300, 100)))
    truncated = tmp_path / "truncated.h5df"
    shutil.copyfile(path, truncated)
    os.truncate(truncated, os.path.getsize(path) // 2)
    code = textwrap.dedent(f"""
        import pydaf
        try:
            daf = pydaf.H5df({str(truncated)!r}, "r")
            daf.get_vector("cell", "age").sum()
            daf.get_matrix("cell", "gene", "UMIs").sum()
            daf.get_matrix("gene", "cell", "UMIs").sum()
        except pydaf.DafError as error:
            print("DafError:", type(error).__name__, str(error).splitlines()[0])
        else:
            print("no error")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("DafError:"), (result.stdout, result.stderr)
    assert "truncated" in result.stdout


# Data sets in groups: ``file.h5dfs#/group`` (§2.1).


def test_two_data_sets_in_groups_of_one_file(tmp_path):
    file_path = str(tmp_path / "shared.h5dfs")
    first = pydaf.H5df(f"{file_path}#/cells", "w")
    assert first.name == f"{file_path}#/cells"
    first.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2]).set_scalar("kind", "cells")
    del first
    gc.collect()
    second = pydaf.H5df(f"{file_path}#/nested/genes", "w+")
    assert second.name == f"{file_path}#/nested/genes"
    second.add_axis("gene", ["X", "Y", "Z"]).set_vector("gene", "length", [10, 20, 30]).set_scalar("kind", "genes")
    del second
    gc.collect()

    with h5py.File(file_path, "r") as file:
        assert set(file.keys()) == {"cells", "nested"}
        for group in (file["cells"], file["nested/genes"]):
            assert set(group.keys()) == {"daf", "scalars", "axes", "vectors", "matrices"}
            assert group["daf"].dtype == np.uint8 and group["daf"][()].tolist() == [1, 0]
        assert file["cells/vectors/cell/age"][()].tolist() == [1, 2]
        assert file["nested/genes/vectors/gene/length"][()].tolist() == [10, 20, 30]
        assert file["cells/vectors/cell/age"].id.get_offset() % 8 == 0

    cells = pydaf.H5df(f"{file_path}#/cells", "r")
    genes = pydaf.H5df(f"{file_path}#/nested/genes", "r")
    assert cells.name.startswith(f"{file_path}#/cells")
    assert cells.get_scalar("kind") == "cells" and genes.get_scalar("kind") == "genes"
    assert cells.axes_set() == {"cell"} and genes.axes_set() == {"gene"}
    assert cells.get_vector("cell", "age").tolist() == [1, 2]
    assert genes.get_vector("gene", "length").tolist() == [10, 20, 30]
    assert cells.complete_path() == f"{os.path.abspath(file_path)}#/cells"


def test_rewriting_one_group_leaves_the_other(tmp_path):
    file_path = str(tmp_path / "shared.h5dfs")
    write(f"{file_path}#/a", lambda daf: daf.set_scalar("x", 1))
    write(f"{file_path}#/b", lambda daf: daf.set_scalar("y", 2))
    write(f"{file_path}#/a", lambda daf: daf.set_scalar("z", 3))
    with h5py.File(file_path, "r") as file:
        assert set(file["a/scalars"].keys()) == {"z"}
        assert set(file["b/scalars"].keys()) == {"y"}
    with pytest.raises(pydaf.DafFormatError, match="missing group"):
        pydaf.H5df(f"{file_path}#/c", "r")
