"""The reader layer checks what backends return: corrupted index arrays, lengths, shapes and types in real H5df files
and FilesDaf directories (see ``tests/hostile.py``) give a ``DafError`` naming the data set and the property, or a
correct read of what is not damaged, through every entry point and both validation paths (numpy, numba kernels),
in a child process (a crash fails the test); writers refuse invalid sparse data; validation is once per cached array
and releases the pages of a mapped matrix."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import pydaf
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.core import validation
from pydaf.kernels import validation as kernels

from . import hostile


def _comparable(outcomes: dict[str, str], path: str) -> dict[str, str]:
    return {what: outcome.replace(path, "PATH") for what, outcome in outcomes.items()}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, dict[str, str]]:
    """What every entry point gives on the valid data sets (read in this process)."""
    folder = tmp_path_factory.mktemp("pristine")
    results = {}
    for kind, path in (("h5df", str(folder / "x.h5df")), ("files", str(folder / "x.daf"))):
        hostile.build(path)
        results[kind] = _comparable(hostile.read_everything(path), path)
    return results


def test_the_pristine_data_sets_read(pristine):
    for outcomes in pristine.values():
        assert outcomes["check"] == "problems: []"
        assert all(outcome.startswith(("ok", "problems")) for outcome in outcomes.values()), outcomes


@pytest.mark.parametrize("mode", ["numpy", "numba"])
@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_corrupted_stores_give_daf_errors_or_correct_reads(tmp_path, pristine, kind, mode):
    cases = hostile.corrupted(tmp_path, kind)
    result, outcomes = hostile.run_child(mode, [path for _, path in cases])
    assert result.returncode == 0, f"the reader crashed (status {result.returncode}) at:\n{result.stderr[-3000:]}"
    failures = []
    for what, path in cases:
        found = _comparable(outcomes[path], path)
        errors = {entry: outcome for entry, outcome in found.items() if not outcome.startswith(("ok", "problems"))}
        for entry, outcome in found.items():
            if outcome.startswith("UNTYPED"):
                failures.append(f"{what}: {entry}: {outcome}")
            elif outcome.startswith("ok") and outcome != pristine[kind][entry]:
                failures.append(f"{what}: {entry}: a wrong read: {outcome} (expected {pristine[kind][entry]})")
        if what in hostile.BENIGN:
            continue
        if not errors:
            failures.append(f"{what}: not detected by any entry point")
        if found["check"] == "problems: []":
            failures.append(f"{what}: check_daf found no problem")
        for entry, outcome in errors.items():
            if "in the daf data: hostile!" not in outcome and "the daf data" not in outcome:
                failures.append(f"{what}: {entry}: the error does not name the data set: {outcome}")
    assert failures == []


def test_structure_errors_name_the_property_and_what_was_expected(tmp_path):
    path = str(tmp_path / "x.h5df")
    hostile.build(path)
    hostile.H5DF_CORRUPTIONS["rowval 0"](path)
    daf = pydaf.H5df(path, "r")
    with pytest.raises(pydaf.DafFormatError) as raised:
        daf.get_stored_matrix("cell", "gene", "UMIs")
    assert str(raised.value) == (
        "invalid rowval of the matrix: UMIs\nfor the rows axis: cell\nand the columns axis: gene\n"
        "found: rowval[4] = 0 (in column 1)\nexpected: rows in 1..40, strictly increasing within each column\n"
        f"in the daf data: {daf.name}")
    del daf, raised
    gc.collect()  # (closes the file)
    hostile.H5DF_CORRUPTIONS["nzind longer than the axis"](path)
    # The H5df backend already refuses the shape (before any validation pass), naming the property and the length.
    with pytest.raises(pydaf.DafFormatError, match=r"the nzind of the vector: score\nof the axis: cell\n(.*\n)*"
                                                   r"has the shape: \(41,\)\nfor the axis length: 40\n"):
        pydaf.H5df(path, "r").get_vector("cell", "score")


def test_backend_failures_are_daf_errors_naming_the_property(tmp_path):
    path = str(tmp_path / "x.daf")
    hostile.build(path)
    hostile.FILES_CORRUPTIONS["descriptor not JSON"](path)
    daf = pydaf.FilesDaf(path, "r")
    with pytest.raises(pydaf.DafFormatError) as raised:
        daf.get_matrix("cell", "gene", "UMIs")
    message = str(raised.value)
    assert message.startswith("invalid JSON in the descriptor of the matrix: UMIs\nof the rows axis: cell\n"
                              "and the columns axis: gene\n")
    assert message.endswith(f"in the daf data: {daf.name}")
    hostile.build(path)
    hostile.FILES_CORRUPTIONS["nzval file shorter"](path)
    with pytest.raises(pydaf.DafFormatError, match=r"has 36 bytes instead of 40\nfor the matrix: UMIs\n"):
        pydaf.FilesDaf(path, "r").get_stored_matrix("cell", "gene", "UMIs", relayout=False)


# The validation functions themselves.


def _reference_problem(n_rows: int, colptr: list[int], rowval: list[int]) -> bool:
    """Whether 1-based CSC indices are invalid, by the definition."""
    nnz = len(rowval)
    if not colptr or colptr[0] != 1 or colptr[-1] != nnz + 1 or any(b < a for a, b in pairwise(colptr)):
        return True
    for column in range(len(colptr) - 1):
        rows = rowval[colptr[column] - 1:colptr[column + 1] - 1]
        if any(row < 1 or row > n_rows for row in rows) or any(b <= a for a, b in pairwise(rows)):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(n_rows=st.integers(0, 6), colptr=st.lists(st.integers(-2, 12), min_size=1, max_size=6),
       rowval=st.lists(st.integers(-2, 8), max_size=10), dtype=st.sampled_from([np.int64, np.uint32, np.int32]))
def test_sparse_matrix_problem_matches_the_definition_on_both_paths(n_rows, colptr, rowval, dtype):
    if np.dtype(dtype).kind == "u" and (min(colptr) < 0 or min(rowval, default=0) < 0):
        colptr = [abs(value) for value in colptr]
        rowval = [abs(value) for value in rowval]
    shape = (n_rows, len(colptr) - 1)
    colptr_array, rowval_array = np.array(colptr, dtype=dtype), np.array(rowval, dtype=dtype)
    expected = _reference_problem(n_rows, colptr, rowval) or len(rowval) > n_rows * shape[1]
    by_numpy = validation.sparse_matrix_problem(shape, colptr_array, rowval_array)
    saved = validation.NUMBA_THRESHOLD
    validation.NUMBA_THRESHOLD = 0
    try:
        by_numba = validation.sparse_matrix_problem(shape, colptr_array, rowval_array)
    finally:
        validation.NUMBA_THRESHOLD = saved
    assert (by_numpy is not None) == expected
    assert by_numpy == by_numba
    if not expected and shape[1]:  # a valid structure is a valid scipy matrix with sorted, unique indices
        matrix = SparseMatrixCSC(shape, colptr_array, rowval_array, np.ones(len(rowval))).to_scipy()
        matrix.check_format(full_check=True)
        assert matrix.has_canonical_format


@settings(max_examples=200, deadline=None)
@given(length=st.integers(0, 8), nzind=st.lists(st.integers(-1, 10), max_size=10))
def test_sparse_vector_problem_matches_the_definition_on_both_paths(length, nzind):
    expected = len(nzind) > length or any(index < 1 or index > length for index in nzind) or any(
        b <= a for a, b in pairwise(nzind))
    indices = np.array(nzind, dtype=np.int64)
    by_numpy = validation.sparse_vector_problem(length, indices)
    saved = validation.NUMBA_THRESHOLD
    validation.NUMBA_THRESHOLD = 0
    try:
        by_numba = validation.sparse_vector_problem(length, indices)
    finally:
        validation.NUMBA_THRESHOLD = saved
    assert (by_numpy is not None) == expected
    assert by_numpy == by_numba


def test_the_kernels_report_the_first_problem_whatever_the_blocks(monkeypatch):
    generator = np.random.default_rng(5)
    matrix = sp.random(300, 200, density=0.2, format="csc", random_state=4)
    csc = SparseMatrixCSC.from_scipy(matrix, indtype=np.uint32)
    rowval = csc.rowval.copy()
    positions = np.sort(generator.choice(rowval.shape[0], 3, replace=False))
    rowval[positions[1]] = 0
    rowval[positions[2]] = 301
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 37)
    kind, column, position = kernels.first_csc_problem(csc.colptr, rowval, 300)
    assert (kind, position) == (kernels.CSC_BAD_ROW, positions[1])
    assert csc.colptr[column] - 1 <= position < csc.colptr[column + 1] - 1
    assert kernels.first_csc_problem(csc.colptr, csc.rowval, 300) is None
    indices = np.arange(1, 1001, dtype=np.uint32)
    indices[700] = indices[699]
    assert kernels.first_sorted_problem(indices, 1000) == (2, 700)


# Writers validate sparse data before storing it.


@pytest.mark.parametrize("kind", ["memory", "h5df", "files"])
def test_writers_refuse_invalid_sparse_data(tmp_path, kind):
    daf = {"memory": lambda: pydaf.MemoryDaf(), "h5df": lambda: pydaf.H5df(tmp_path / "w.h5df", "w"),
           "files": lambda: pydaf.FilesDaf(tmp_path / "w.daf", "w")}[kind]()
    daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    bad_matrices = [
        SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([0, 1]), np.array([1.0, 2.0])),
        SparseMatrixCSC((3, 2), np.array([1, 3, 3]), np.array([2, 2]), np.array([1.0, 2.0])),
        SparseMatrixCSC((3, 2), np.array([0, 2, 3]), np.array([1, 1]), np.array([1.0, 2.0])),
        SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 4]), np.array([1.0, 2.0])),
        SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 2]), np.array([1.0])),
    ]
    for matrix in bad_matrices:
        with pytest.raises(pydaf.DafValueError, match=r"invalid .* of the sparse matrix given for: m"):
            daf.set_matrix("cell", "gene", "m", matrix)
    for vector in (SparseVector(3, np.array([2, 2]), np.array([1, 2])), SparseVector(3, np.array([0]), np.array([1])),
                   SparseVector(3, np.array([4]), np.array([1]))):
        with pytest.raises(pydaf.DafValueError, match="invalid nzind of the sparse vector given for: v"):
            daf.set_vector("cell", "v", vector)
    assert daf.matrices_set("cell", "gene") == set() and daf.vectors_set("cell") == set()
    with pytest.raises(pydaf.DafValueError, match="invalid rowval of the sparse matrix: b"), \
            daf.empty_sparse_matrix("cell", "gene", "b", "Float32", 2) as (colptr, rowval, _):
        colptr[:] = [1, 3, 3]
        rowval[:] = [3, 1]  # out of order within the column
    assert not daf.has_matrix("cell", "gene", "b")


# Once per cached array; pages released.


def _count_validations(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = validation.sparse_matrix_problem
    monkeypatch.setattr(validation, "sparse_matrix_problem",
                        lambda *arguments, **keywords: calls.append(1) or original(*arguments, **keywords))
    return calls


def test_a_mapped_matrix_is_validated_once_until_written(tmp_path, monkeypatch):
    path = str(tmp_path / "x.h5df")
    hostile.build(path)
    calls = _count_validations(monkeypatch)
    daf = pydaf.H5df(path, "r+")
    for _ in range(3):
        daf.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
        daf.get_matrix("cell", "gene", "UMIs")
        daf.get_query("@ cell @ gene :: UMIs >| Sum", cache=False)
    assert len(calls) == 1
    daf.empty_cache()  # the same bytes mapped again: known valid
    daf.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
    assert len(calls) == 1
    daf.set_scalar("note", "any write")  # (HDF5 may have moved things: checked again)
    daf.empty_cache()
    daf.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
    assert len(calls) == 2
    daf.set_matrix("cell", "gene", "UMIs", sp.random(daf.axis_length("cell"), daf.axis_length("gene"), density=0.5,
                                                     format="csc", dtype=np.float32, random_state=1),
                   overwrite=True, relayout=False)  # (the writer validates what it is given)
    before = len(calls)
    stored = daf.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
    assert len(calls) == before + 1 and stored.nnz > 0


def test_a_file_replaced_under_a_reader_is_validated_again(tmp_path, monkeypatch):
    # A FilesDaf writer in another process replaces files (rename): the reader's next map sees another file.
    path = tmp_path / "x.daf"
    daf = pydaf.FilesDaf(path, "w").add_axis("cell", ["a", "b", "c"]).add_axis("gene", ["x", "y"])
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 2], [1, 0], [0, 3]], np.uint16)),
                   relayout=False)
    calls = _count_validations(monkeypatch)
    reader = pydaf.FilesDaf(path, "r")
    assert reader.get_matrix("cell", "gene", "UMIs").toarray().tolist() == [[0, 2], [1, 0], [0, 3]]
    reader.empty_cache()
    reader.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
    assert len(calls) == 1
    rowval = path / "matrices" / "cell" / "gene" / "UMIs.rowval"
    hostile_rowval = np.fromfile(rowval, dtype=np.uint32)
    hostile_rowval[0] = 7  # past the 3 rows
    hostile_rowval.tofile(str(rowval) + ".new")
    os.replace(str(rowval) + ".new", rowval)
    reader.empty_cache()
    with pytest.raises(pydaf.DafFormatError, match="UMIs"):
        reader.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
    assert len(calls) == 2


_RSS_CHILD = """
import json, sys, numpy, psutil
import pydaf
from pydaf.kernels import validation
validation.first_csc_problem(numpy.array([1, 2], numpy.uint32), numpy.array([1], numpy.uint32), 1)  # numba loaded
daf = pydaf.H5df(sys.argv[1], "r")
process = psutil.Process()
before = process.memory_info().rss
matrix = daf.get_stored_matrix("cell", "gene", "UMIs", relayout=False)
after = process.memory_info().rss
print(json.dumps({"before": before, "after": after, "index_bytes": matrix.rowval.nbytes + matrix.colptr.nbytes}))
"""


def test_validating_a_mapped_matrix_releases_its_pages(tmp_path):
    path = str(tmp_path / "big.h5df")
    n_cells, n_genes, per_gene = 200_000, 200, 50_000  # 10M entries: 40 MB of UInt32 rowval
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{index}" for index in range(n_cells)])
    daf.add_axis("gene", [f"g{index}" for index in range(n_genes)])
    with daf.empty_sparse_matrix("cell", "gene", "UMIs", "UInt8", n_genes * per_gene, "UInt32") as (colptr, rowval,
                                                                                                     nzval):
        colptr[:] = np.arange(n_genes + 1, dtype=np.uint32) * per_gene + 1
        rowval[:] = np.tile(np.arange(1, n_cells + 1, n_cells // per_gene, dtype=np.uint32), n_genes)
        nzval[:] = 1
    daf.flush()
    del daf, colptr, rowval, nzval
    environment = {**os.environ, "PYTHONPATH": f"{hostile.ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    # Warm the kernels' cache first, so the measured child does not count numba's compilation.
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", _RSS_CHILD, path], capture_output=True, text=True,
                                env=environment, check=True)
    measured = json.loads(result.stdout)
    assert measured["index_bytes"] > 40e6
    assert measured["after"] - measured["before"] < 0.25 * measured["index_bytes"], measured
