"""``pydaf check`` and ``pydaf.check_daf``: sound data sets of every backend pass; every kind of damage is reported,
one line per problem, with a non-zero exit status; both stored layouts of a matrix must hold the same values."""

from __future__ import annotations

import gc
import subprocess
import sys

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf import SparseMatrixCSC
from pydaf.check import check_path

from . import hostile


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf.cli", *arguments], capture_output=True, text=True)


def _full(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Every kind of property, both layouts of non-square matrices."""
    daf.set_scalar("organism", "human").set_scalar("n", np.uint8(3))
    daf.add_axis("cell", [f"c{index}" for index in range(30)]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_vector("cell", "age", np.arange(30)).set_vector("cell", "type", np.array(["a", "b"] * 15, dtype=object))
    daf.set_vector("gene", "mask", pydaf.SparseVector(3, np.array([2]), np.array([True])))
    daf.set_matrix("cell", "gene", "UMIs", sp.random(30, 3, density=0.3, format="csc", random_state=1))
    daf.set_matrix("cell", "gene", "dense", np.arange(90.0).reshape(30, 3))
    daf.set_matrix("cell", "gene", "nan", np.where(np.arange(90).reshape(30, 3) % 4, np.nan, 1.0))
    daf.set_matrix("cell", "cell", "edges", sp.random(30, 30, density=0.1, format="csr", random_state=2))
    labels = np.full((30, 3), "", dtype=object)
    labels[4, 1] = "x"
    daf.set_matrix("cell", "gene", "labels", labels)
    return daf


@pytest.mark.parametrize("kind", ["memory", "h5df", "h5dfs", "files"])
def test_sound_data_sets_have_no_problems(tmp_path, kind):
    daf = {"memory": lambda: pydaf.MemoryDaf(), "h5df": lambda: pydaf.H5df(tmp_path / "x.h5df", "w"),
           "h5dfs": lambda: pydaf.H5df(f"{tmp_path}/x.h5dfs#/g", "w"),
           "files": lambda: pydaf.FilesDaf(tmp_path / "x.daf", "w")}[kind]()
    _full(daf)
    assert pydaf.check_daf(daf) == []
    assert pydaf.check_daf(daf.read_only()) == []
    if kind != "memory":
        daf.format.format_close()
        del daf
        gc.collect()  # (closes the HDF5 file, so the child process may open it)
        path = {"h5df": str(tmp_path / "x.h5df"), "h5dfs": f"{tmp_path}/x.h5dfs#/g",
                "files": str(tmp_path / "x.daf")}[kind]
        problems, counts = check_path(path)
        assert problems == [] and counts == {"scalars": 2, "axes": 2, "vectors": 3, "matrices": 9}
        result = run("check", path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout == f"{path}: sound (2 scalars, 2 axes, 3 vectors, 9 matrices checked)\n"


@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_every_corruption_is_reported(tmp_path, kind):
    for what, path in hostile.corrupted(tmp_path, kind):
        if what in hostile.BENIGN:
            continue
        problems, _ = check_path(path)
        assert problems, what
        assert all("\n" not in problem for problem in problems), (what, problems)
        result = run("check", path) if what in ("rowval 0", "nzind 0") else None
        if result is not None:
            assert result.returncode == 1
            assert result.stdout.splitlines() == [f"{path}: {problem}" for problem in problems]
            assert result.stderr == f"pydaf check: {len(problems)} problem{'s' * (len(problems) > 1)} in {path}\n"


def test_problems_name_each_damaged_property_and_the_check_goes_on(tmp_path):
    path = str(tmp_path / "x.h5df")
    hostile.build(path)
    hostile.H5DF_CORRUPTIONS["rowval 0"](path)
    hostile.H5DF_CORRUPTIONS["nzind past the axis"](path)
    hostile.H5DF_CORRUPTIONS["axis with repeated entries"](path)
    problems, counts = check_path(path)
    assert problems == [
        "axis gene: 1 repeated entries (expected unique entries)",
        "vector cell/score: invalid nzind of the vector: score; of the axis: cell; found: nzind[2] = 41; expected: "
        "positions in 1..40, strictly increasing",
        "matrix cell,gene/UMIs: invalid rowval of the matrix: UMIs; for the rows axis: cell; and the columns axis: "
        "gene; found: rowval[4] = 0 (in column 1); expected: rows in 1..40, strictly increasing within each column",
    ]
    assert counts == {"scalars": 1, "axes": 2, "vectors": 2, "matrices": 2}


def test_a_data_set_that_cannot_be_opened_is_one_problem(tmp_path):
    path = tmp_path / "x.h5df"
    path.write_text("not HDF5")
    result = run("check", str(path))
    assert result.returncode == 1
    assert result.stdout.startswith(f"{path}: open: not a valid HDF5 file (truncated or corrupt?): {path}; ")
    assert len(result.stdout.splitlines()) == 1


def _two_layouts(tmp_path, kind: str) -> str:
    path = str(tmp_path / "layouts.h5df")
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{index}" for index in range(6)]).add_axis("gene", ["X", "Y"])
    values = np.array([[0, 1], [2, 0], [0, 0], [3, 4], [0, 5], [6, 0]], dtype=np.float32)
    if kind == "sparse":
        daf.set_matrix("cell", "gene", "m", sp.csc_matrix(values))
    elif kind == "dense":
        daf.set_matrix("cell", "gene", "m", values)
    else:  # one layout sparse, the other dense (Julia allows it)
        daf.set_matrix("cell", "gene", "m", sp.csc_matrix(values), relayout=False)
        daf.set_matrix("gene", "cell", "m", values.T.copy(), relayout=False)
    daf.flush()
    return path


@pytest.mark.parametrize("kind", ["sparse", "dense", "mixed"])
def test_layouts_holding_different_values_are_reported(tmp_path, kind):
    path = _two_layouts(tmp_path, kind)
    assert check_path(path)[0] == []
    with h5py.File(path, "r+") as file:
        node = file["matrices/gene/cell/m"]
        if isinstance(node, h5py.Group):
            values = node["nzval"][()]
            values[3] += 1  # the 4th stored entry of gene x cell: (Y, c0) = 1 -> 2... see the expected problem
            node["nzval"][...] = values
        else:
            values = node[()]
            values[3, 1] += 1  # (gene Y, cell c3) in the h5py (cell, gene) shape of the gene x cell matrix
            node[...] = values
    problems, _ = check_path(path)
    assert len(problems) == 1 and problems[0].startswith(
        "matrix cell,gene/m: the layouts cell,gene and gene,cell differ: at row ")
    (row, column) = (int(text) for text in problems[0].split("at row ")[1].split(" (")[0].split(", column "))
    daf = pydaf.H5df(path, "r")
    first = daf.get_matrix("cell", "gene", "m", relayout=False)
    second = daf.get_matrix("gene", "cell", "m", relayout=False)
    dense = [np.asarray(matrix.todense() if hasattr(matrix, "todense") else matrix) for matrix in (first, second)]
    assert dense[0][row, column] != dense[1][column, row]
    assert np.array_equal(np.delete(dense[0], row, 0), np.delete(dense[1].T, row, 0))


def test_layouts_differing_in_structure_are_reported(tmp_path):
    daf = pydaf.MemoryDaf().add_axis("cell", ["a", "b", "c"]).add_axis("gene", ["X", "Y"])
    matrix = SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([2, 1]), np.array([5.0, 6.0]))
    daf.set_matrix("cell", "gene", "m", matrix, relayout=False)
    other = SparseMatrixCSC((2, 3), np.array([1, 2, 3, 3]), np.array([2, 1]), np.array([6.0, 5.0]))
    daf.set_matrix("gene", "cell", "m", other, relayout=False)
    assert pydaf.check_daf(daf) == []
    extra = SparseMatrixCSC((2, 3), np.array([1, 2, 3, 4]), np.array([2, 1, 1]), np.array([6.0, 5.0, 1.0]))
    daf.set_matrix("gene", "cell", "m", extra, relayout=False, overwrite=True)
    assert pydaf.check_daf(daf) == ["matrix cell,gene/m: the layouts cell,gene and gene,cell differ: at row 2, "
                                    "column 0 (0-based)"]
    daf.set_matrix("gene", "cell", "m", other.with_values(np.array([6.0, 5.0], np.float32)), relayout=False,
                   overwrite=True)
    assert pydaf.check_daf(daf) == ["matrix cell,gene/m: the layouts cell,gene and gene,cell differ: element types "
                                    "float64 and float32"]


def test_a_large_sparse_pair_is_compared_by_the_streaming_kernel(tmp_path, monkeypatch):
    from pydaf.kernels import validation

    monkeypatch.setattr(validation, "BLOCK_ENTRIES", 1000)
    path = str(tmp_path / "large.h5df")
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{index}" for index in range(2000)])
    daf.add_axis("gene", [f"g{index}" for index in range(300)])
    daf.set_matrix("cell", "gene", "m", sp.random(2000, 300, density=0.05, format="csc", random_state=3,
                                                  dtype=np.float32))
    daf.flush()
    assert pydaf.check_daf(daf) == []
    stored = daf.get_stored_matrix("gene", "cell", "m", relayout=False)
    last = stored.nnz - 1
    row, column = int(stored.entry_columns()[last]), int(stored.rowval[last]) - 1  # in the cell x gene layout
    del stored, daf
    with h5py.File(path, "r+") as file:
        file["matrices/gene/cell/m/nzval"][last] = 123.0
    assert check_path(path)[0] == [f"matrix cell,gene/m: the layouts cell,gene and gene,cell differ: at row {row}, "
                                   f"column {column} (0-based)"]
