"""Copies between stores (beyond Julia's recorded cases): mapped stores stream and keep values and layouts, in-memory
destinations share the source arrays, and refusals change nothing."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.testing import DafBackend, DafConformance

from .benchmark_scripts import load_benchmark


def _source(tmp_path) -> pydaf.H5df:
    daf = pydaf.H5df(tmp_path / "source.h5df", "w", name="source!")
    daf.set_scalar("organism", "human").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", np.array([1, 2, 3], np.uint8))
    daf.set_vector("gene", "marker", pydaf.SparseVector(2, np.array([2], np.uint32), np.array([True])))
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 1], [2, 0], [0, 3]], np.uint16)))
    daf.set_matrix("cell", "gene", "score", np.arange(6, dtype=np.float32).reshape(3, 2), relayout=False)
    return daf


@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_copy_all_into_mapped_stores_keeps_values_and_layouts(tmp_path, kind):
    source = _source(tmp_path)
    destination = pydaf.H5df(tmp_path / "copy.h5df", "w") if kind == "h5df" else pydaf.FilesDaf(
        tmp_path / "copy.daf", "w")
    pydaf.copy_all(destination, source, relayout=False, progress=False)
    reopened = pydaf.open_daf(destination.complete_path(), "r")
    assert reopened.get_scalar("organism") == "human"
    assert reopened.get_vector("cell", "age").dtype == np.uint8
    assert isinstance(reopened.get_stored_vector("gene", "marker"), pydaf.SparseVector)
    for rows, columns in (("cell", "gene"), ("gene", "cell")):
        stored = reopened.get_stored_matrix(rows, columns, "UMIs", relayout=False)
        assert isinstance(stored, pydaf.SparseMatrixCSC) and stored.nzval.dtype == np.uint16
        np.testing.assert_array_equal(stored.to_dense(), source.get_matrix(rows, columns, "UMIs").toarray())
    assert not reopened.has_matrix("gene", "cell", "score", relayout=False)
    np.testing.assert_array_equal(reopened.get_matrix("cell", "gene", "score"), np.arange(6).reshape(3, 2))


def test_copy_all_with_relayout_stores_both_layouts(tmp_path):
    destination = pydaf.FilesDaf(tmp_path / "copy.daf", "w")
    pydaf.copy_all(destination, _source(tmp_path), progress=False)
    np.testing.assert_array_equal(destination.get_matrix("gene", "cell", "score", relayout=False),
                                  np.arange(6).reshape(3, 2).T)


def test_copies_into_memory_share_the_source_arrays(tmp_path):
    source = pydaf.MemoryDaf(name="source!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
    source.set_vector("cell", "age", np.array([1, 2])).set_matrix("cell", "gene", "m", np.ones((2, 1)))
    destination = pydaf.MemoryDaf(name="destination!")
    pydaf.copy_all(destination, source, progress=False)
    assert np.shares_memory(destination.get_vector("cell", "age"), source.get_vector("cell", "age"))
    assert np.shares_memory(destination.get_matrix("cell", "gene", "m"), source.get_matrix("cell", "gene", "m"))


def test_superset_axis_of_a_mapped_sparse_matrix_stays_sparse(tmp_path):
    destination = pydaf.H5df(tmp_path / "copy.h5df", "w").add_axis("cell", ["C", "B", "A", "D"])
    destination.add_axis("gene", ["X", "Y"])
    pydaf.copy_matrix(destination=destination, source=_source(tmp_path), rows_axis="cell", columns_axis="gene",
                      name="UMIs", empty=0)
    stored = destination.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
    assert isinstance(stored, pydaf.SparseMatrixCSC)
    np.testing.assert_array_equal(stored.to_dense(), [[0, 3], [2, 0], [0, 1], [0, 0]])
    np.testing.assert_array_equal(destination.get_matrix("gene", "cell", "UMIs", relayout=False).toarray(),
                                  [[0, 2, 0, 0], [3, 0, 1, 0]])


def test_a_refused_copy_changes_nothing(tmp_path):
    source = _source(tmp_path)
    destination = pydaf.H5df(tmp_path / "copy.h5df", "w").add_axis("cell", ["A", "B", "C"])
    destination.add_axis("gene", ["X", "Y"]).set_matrix("gene", "cell", "UMIs", np.zeros((2, 3)), relayout=False)
    with pytest.raises(pydaf.DafExistsError):
        pydaf.copy_matrix(destination=destination, source=source, rows_axis="cell", columns_axis="gene", name="UMIs")
    assert not destination.has_matrix("cell", "gene", "UMIs", relayout=False)
    pydaf.copy_matrix(destination=destination, source=source, rows_axis="cell", columns_axis="gene", name="UMIs",
                      insist=False)
    assert not destination.has_matrix("cell", "gene", "UMIs", relayout=False)


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_copy")
    path = str(tmp_path / "small.h5df")
    assert bench.main(["--path", path, "--cells", "300", "--genes", "40", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["cp", "copy_all"] and lines[-1] == "equal: yes"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["small.h5df"]


class _CopiedIntoFiles(DafBackend):
    """Data written to a MemoryDaf, read back from a FilesDaf that ``copy_all`` filled with it."""

    name = "copied-into-files"

    def new(self, directory, name: str) -> pydaf.DafWriter:
        self._directory = directory
        return pydaf.MemoryDaf(name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        copy = pydaf.FilesDaf(self._directory / f"copy{len(list(self._directory.iterdir()))}.daf", "w", name=daf.name)
        pydaf.copy_all(copy, daf, relayout=False, progress=False)
        return copy.read_only() if mode == "r" else copy


class TestCopiedIntoFiles(DafConformance):
    """Everything written to a data set reads back the same from a copy of it (stored layouts, types, sparsity)."""

    backend = _CopiedIntoFiles()
