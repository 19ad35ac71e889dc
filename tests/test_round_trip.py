"""Memory → H5df → FilesDaf → Memory keeps every property, element type and sparse/dense choice."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import pydaf
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.testing import INDEX_DTYPES, NUMBER_DTYPES, sample_values


def copy_stored(source: pydaf.DafReader, destination: pydaf.DafWriter) -> pydaf.DafWriter:
    """Copy every property as stored (each matrix layout on its own), the way a copy between backends must."""
    for name in source.scalars_set():
        destination.set_scalar(name, source.get_scalar(name))
    for axis in source.axes_set():
        destination.add_axis(axis, source.axis_vector(axis))
    for axis in source.axes_set():
        for name in source.vectors_set(axis):
            destination.set_vector(axis, name, source.get_stored_vector(axis, name))
        for other in source.axes_set():
            for name in source.matrices_set(axis, other, relayout=False, tensors=False):
                destination.set_matrix(axis, other, name, source.get_stored_matrix(axis, other, name, relayout=False),
                                       relayout=False)
    return destination


def rich_daf() -> pydaf.MemoryDaf:
    daf = pydaf.MemoryDaf(name="rich!")
    daf.add_axis("cell", [f"c{index}" for index in range(6)]).add_axis("gene", ["g1", "g2", "g3"])
    for position, dtype in enumerate(NUMBER_DTYPES):
        name = np.dtype(dtype).name
        daf.set_scalar(name, sample_values(dtype, (3,))[1])
        daf.set_vector("cell", f"dense_{name}", sample_values(dtype, (6,), seed=position))
        values = sample_values(dtype, (6,), seed=position + 20)
        values[2] = 0
        indtype = INDEX_DTYPES[position % len(INDEX_DTYPES)]
        daf.set_vector("cell", f"sparse_{name}", SparseVector.from_dense(values, indtype=indtype))
        daf.set_matrix("cell", "gene", f"dense_{name}", sample_values(dtype, (6, 3), seed=position))
        matrix = sample_values(dtype, (6, 3), seed=position + 40)
        matrix[0] = 0
        daf.set_matrix("cell", "gene", f"sparse_{name}",
                       SparseMatrixCSC.from_scipy(sp.csc_matrix(matrix), indtype=indtype))
    daf.set_scalar("text", "ünï ✓").set_vector("gene", "symbols", ["A", "", "Ç"])
    daf.set_vector("cell", "mostly_empty", ["", "", "", "", "", "x"])
    daf.set_matrix("gene", "gene", "names", np.array([["a", "b", "c"]] * 3, dtype=object))
    daf.set_matrix("cell", "cell", "all_true", sp.csc_matrix(np.eye(6, dtype=bool)))
    daf.set_matrix("gene", "cell", "one_layout", np.arange(18, dtype=np.int16).reshape(3, 6), relayout=False)
    return daf


def assert_same(left: pydaf.DafReader, right: pydaf.DafReader) -> None:
    assert left.scalars_set() == right.scalars_set()
    for name in left.scalars_set():
        assert left.get_scalar(name) == right.get_scalar(name), name
        assert np.asarray(left.get_scalar(name)).dtype == np.asarray(right.get_scalar(name)).dtype, name
    assert left.axes_set() == right.axes_set()
    for axis in left.axes_set():
        assert left.axis_vector(axis).tolist() == right.axis_vector(axis).tolist()
        assert left.vectors_set(axis) == right.vectors_set(axis)
        for name in left.vectors_set(axis):
            assert_same_array(left.get_stored_vector(axis, name), right.get_stored_vector(axis, name), name)
        for other in left.axes_set():
            names = left.matrices_set(axis, other, relayout=False)
            assert names == right.matrices_set(axis, other, relayout=False), (axis, other)
            for name in names:
                assert_same_array(left.get_stored_matrix(axis, other, name, relayout=False),
                                  right.get_stored_matrix(axis, other, name, relayout=False), name)


def assert_same_array(left, right, name: str) -> None:
    assert type(left) is type(right), name
    if isinstance(left, SparseVector):
        parts = [(left.nzind, right.nzind), (left.nzval, right.nzval)]
    elif isinstance(left, SparseMatrixCSC):
        parts = [(left.colptr, right.colptr), (left.rowval, right.rowval), (left.nzval, right.nzval)]
    else:
        parts = [(left, right)]
    for mine, theirs in parts:
        assert mine.dtype == theirs.dtype, name
        np.testing.assert_array_equal(mine, theirs, err_msg=name)


def test_memory_h5df_files_memory(tmp_path):
    memory = rich_daf()
    h5df = copy_stored(memory, pydaf.H5df(tmp_path / "copy.h5df", "w"))
    files = copy_stored(pydaf.H5df(tmp_path / "copy.h5df", "r"), pydaf.FilesDaf(tmp_path / "copy.daf", "w"))
    back = copy_stored(pydaf.FilesDaf(tmp_path / "copy.daf", "r"), pydaf.MemoryDaf(name="back!"))
    for daf in (h5df, files, back):
        assert_same(memory, daf)
