"""The reorder kernels (pydaf.kernels.permute) against numpy's fancy indexing of the dense form, on both the numpy
path and the numba path (its threshold lowered), for every combination of permuted sides."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf.kernels.permute as permute
from pydaf.abc.reorder import PlannedAxis, permute_stored_matrix, permute_stored_vector
from pydaf.sparse import SparseMatrixCSC, SparseVector


@pytest.fixture(params=["numpy", "numba"])
def path(request, monkeypatch):
    if request.param == "numba":
        monkeypatch.setattr(permute, "PERMUTE_NUMBA_MIN_ENTRIES", 0)
        monkeypatch.setattr(permute, "_SPARSE_BLOCK_ENTRIES", 7)
    monkeypatch.setattr(permute, "_DENSE_BLOCK_ELEMENTS", 13)
    return request.param


def _axis(rng: np.random.Generator, n: int) -> PlannedAxis:
    return PlannedAxis.of(np.array([f"e{i}" for i in range(n)], dtype=object), rng.permutation(n))


@pytest.mark.parametrize("sides", ["rows", "columns", "both"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_sparse_and_dense_matrices_match_fancy_indexing(path, sides, index_dtype):
    rng = np.random.default_rng(7)
    for n_rows, n_columns in [(1, 1), (5, 9), (40, 3), (17, 23), (0, 4), (4, 0)]:
        dense = np.asfortranarray(rng.random((n_rows, n_columns)) * (rng.random((n_rows, n_columns)) < 0.3))
        rows = _axis(rng, n_rows) if sides in ("rows", "both") else None
        columns = _axis(rng, n_columns) if sides in ("columns", "both") else None
        expected = dense
        if rows is not None:
            expected = expected[rows.permutation, :]
        if columns is not None:
            expected = expected[:, columns.permutation]
        assert np.array_equal(permute_stored_matrix(dense, rows, columns), expected)
        csc = sp.csc_matrix(dense)
        stored = SparseMatrixCSC((n_rows, n_columns), (csc.indptr + 1).astype(index_dtype),
                                 (csc.indices + 1).astype(index_dtype), csc.data)
        result = permute_stored_matrix(stored, rows, columns)
        assert result.colptr.dtype == index_dtype and np.array_equal(result.to_dense(), expected)
        for column in range(n_columns):  # Rows stay sorted within each column, as Julia's CSC requires.
            assert np.all(np.diff(result.rowval[result.colptr[column] - 1:result.colptr[column + 1] - 1]) > 0)


def test_vectors_match_fancy_indexing(path):
    rng = np.random.default_rng(8)
    for n in (0, 1, 2, 31):
        axis = _axis(rng, n)
        dense = rng.random(n) * (rng.random(n) < 0.4)
        assert np.array_equal(permute_stored_vector(dense, axis), dense[axis.permutation])
        strings = np.array([f"s{i}" for i in range(n)], dtype=object)
        assert permute_stored_vector(strings, axis).tolist() == strings[axis.permutation].tolist()
        nzind = np.flatnonzero(dense) + 1
        result = permute_stored_vector(SparseVector(n, nzind, dense[nzind - 1]), axis)
        assert np.array_equal(result.to_dense(), dense[axis.permutation])
        assert np.all(np.diff(result.nzind) > 0)


def test_string_matrix(path):
    rng = np.random.default_rng(9)
    strings = np.asfortranarray(np.array([[f"r{r}c{c}" for c in range(5)] for r in range(4)], dtype=object))
    rows, columns = _axis(rng, 4), _axis(rng, 5)
    result = permute_stored_matrix(strings, rows, columns)
    assert result.tolist() == strings[rows.permutation][:, columns.permutation].tolist()


def test_many_blocks_of_moved_rows(path):
    """Rows moved in many blocks of output columns (the numba path's bucketing, per block)."""
    rng = np.random.default_rng(10)
    dense = np.asfortranarray(rng.random((50, 400)) * (rng.random((50, 400)) < 0.3))
    rows, columns = _axis(rng, 50), _axis(rng, 400)
    csc = sp.csc_matrix(dense)
    stored = SparseMatrixCSC(dense.shape, csc.indptr + 1, csc.indices + 1, csc.data)
    for columns_axis in (None, columns):
        expected = dense[rows.permutation, :]
        if columns_axis is not None:
            expected = expected[:, columns_axis.permutation]
        result = permute_stored_matrix(stored, rows, columns_axis)
        assert np.array_equal(result.to_dense(), expected)
        assert all(np.all(np.diff(result.rowval[result.colptr[c] - 1:result.colptr[c + 1] - 1]) > 0)
                   for c in range(400))


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.uint64, np.bool_])
def test_write_permuted_dense(tmp_path, monkeypatch, path, n_threads, dtype):
    """The blocked pwrite of a permuted dense matrix (a few columns per block, gathered and written by one or several
    threads) is the fancy-indexed matrix."""
    monkeypatch.setattr(permute, "_WRITE_BLOCK_BYTES", 3 * 7 * np.dtype(dtype).itemsize)
    monkeypatch.setattr(permute, "threads_for", lambda work: n_threads)
    rng = np.random.default_rng(11)
    dense = np.asfortranarray((rng.random((7, 10)) * 100).astype(dtype))
    rows, columns = rng.permutation(7), rng.permutation(10)
    for rows_permutation, columns_permutation in ((rows, columns), (None, columns), (rows, None), (None, None)):
        out_path = tmp_path / "out.data"
        with open(out_path, "wb") as file:
            file.write(b"header")
            ticks = []
            permute.write_permuted_dense(dense, rows_permutation, columns_permutation, file.fileno(), 6, ticks.append)
        expected = dense if rows_permutation is None else dense[rows_permutation]
        expected = expected if columns_permutation is None else expected[:, columns_permutation]
        data = out_path.read_bytes()
        assert data[:6] == b"header" and sum(ticks) == 70
        assert np.array_equal(np.frombuffer(data[6:], dtype=dtype).reshape((7, 10), order="F"), expected)
        out = np.empty((7, 10), dtype=dtype, order="F")
        permute.permute_dense_matrix_into(dense, rows_permutation, columns_permutation, out)
        assert np.array_equal(out, expected)


@pytest.mark.parametrize("n_threads", [1, 3])
def test_write_permuted_dense_error_propagates(tmp_path, monkeypatch, n_threads):
    """A failing write (here: a file opened read-only) raises the OSError on the calling thread, whichever thread
    wrote the block."""
    monkeypatch.setattr(permute, "_WRITE_BLOCK_BYTES", 2 * 5 * 8)
    monkeypatch.setattr(permute, "threads_for", lambda work: n_threads)
    (tmp_path / "read-only").write_bytes(b"")
    with open(tmp_path / "read-only", "rb") as file, pytest.raises(OSError):
        permute.write_permuted_dense(np.asfortranarray(np.ones((5, 9))), None, np.arange(9)[::-1], file.fileno())
