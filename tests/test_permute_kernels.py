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
