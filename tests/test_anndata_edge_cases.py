"""AnnData import edge cases beyond ``test_anndata.py``: a sparse X streamed in many slices through the multi-block
parallel transpose, matrices with no stored entries, and anndata 0.7's ``h5sparse`` matrices and ``__categories``."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import daf_as_h5ad, h5ad_as_daf

anndata = pytest.importorskip("anndata")


@pytest.fixture
def destination(backend, tmp_path):
    """Where h5ad_as_daf writes: a path that open_daf creates, for backends that have one, else a new data set."""
    path = backend.path(tmp_path)
    return path if path is not None else backend.new(tmp_path, "out!")


def _dense(matrix) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)


def test_large_sparse_x_streams_through_the_kernels(tmp_path, monkeypatch):
    from pydaf.interop import content as interop
    from pydaf.kernels import relayout

    # Small slices and blocks: many streaming slices, a multi-block parallel transpose.
    monkeypatch.setattr(interop, "_CHUNK", 10_000)
    monkeypatch.setattr(relayout, "_BLOCK_ENTRIES", 20_000)
    X = sp.random(3000, 700, density=0.1, format="csr", dtype=np.float32, random_state=3)
    assert X.nnz >= relayout.RELAYOUT_NUMBA_MIN_ENTRIES // 8
    monkeypatch.setattr(relayout, "RELAYOUT_NUMBA_MIN_ENTRIES", 1000)
    adata = anndata.AnnData(X=X)
    adata.obs_names = [f"c{index}" for index in range(3000)]
    adata.var_names = [f"g{index}" for index in range(700)]
    path = tmp_path / "big.h5ad"
    adata.write_h5ad(path)
    h5ad_as_daf(path, str(tmp_path / "big.h5df"), relayout=True, progress=False)
    daf = pydaf.H5df(str(tmp_path / "big.h5df"), "r")
    assert (daf.get_matrix("obs", "var", "X", relayout=False) != X).nnz == 0
    by_genes = daf.get_matrix("var", "obs", "X", relayout=False)
    assert (by_genes != X.T).nnz == 0 and by_genes.has_sorted_indices


@pytest.mark.parametrize("x_kind", ["csr", "csc", "dense"])
def test_empty_and_all_zero_matrices(tmp_path, destination, x_kind):
    zeros = np.zeros((3, 2), dtype=np.float32)
    adata = anndata.AnnData(X={"csr": sp.csr_matrix, "csc": sp.csc_matrix, "dense": np.asarray}[x_kind](zeros))
    adata.obs_names, adata.var_names = ["a", "b", "c"], ["x", "y"]
    path = tmp_path / "zeros.h5ad"
    adata.write_h5ad(path)
    daf = h5ad_as_daf(path, destination, relayout=True, progress=False)
    assert sp.issparse(daf.get_matrix("obs", "var", "X")) == (x_kind != "dense")
    np.testing.assert_array_equal(_dense(daf.get_matrix("obs", "var", "X")), zeros)
    np.testing.assert_array_equal(_dense(daf.get_matrix("var", "obs", "X", relayout=False)), zeros.T)
    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    np.testing.assert_array_equal(_dense(anndata.read_h5ad(tmp_path / "back.h5ad").X), zeros)


def test_legacy_dataframe_with_categories_subgroup(tmp_path):
    # anndata 0.7: codes datasets with a `categories` object reference into `__categories`.
    path = tmp_path / "legacy.h5ad"
    with h5py.File(path, "w") as file:
        obs = file.create_group("obs")
        obs.attrs["_index"] = "index"
        obs.attrs["column-order"] = np.array(["kind", "n"], dtype=h5py.string_dtype())
        obs.attrs["encoding-type"] = "dataframe"
        obs.attrs["encoding-version"] = "0.1.0"
        obs.create_dataset("index", data=np.array(["a", "b", "c"], dtype=h5py.string_dtype()))
        categories = obs.create_group("__categories").create_dataset("kind", data=np.array(
            ["x", "y"], dtype=h5py.string_dtype()))
        kind = obs.create_dataset("kind", data=np.array([1, 0, -1], dtype=np.int8))
        kind.attrs["categories"] = categories.ref
        obs.create_dataset("n", data=np.array([4, 5, 6], dtype=np.int16))
        var = file.create_group("var")
        var.create_dataset("index", data=np.array(["g"], dtype=h5py.string_dtype()))
        var.attrs["_index"] = "index"
        X = file.create_group("X")
        X.attrs["h5sparse_format"] = "csc"
        X.attrs["h5sparse_shape"] = np.array([3, 1])
        X.create_dataset("data", data=np.array([2.0]))
        X.create_dataset("indices", data=np.array([1], dtype=np.int32))
        X.create_dataset("indptr", data=np.array([0, 1], dtype=np.int32))
    daf = h5ad_as_daf(path, progress=False)
    assert daf.get_vector("obs", "kind").tolist() == ["y", "x", ""]
    assert daf.get_vector("obs", "n").tolist() == [4, 5, 6]
    assert daf.get_matrix("obs", "var", "X").toarray().tolist() == [[0.0], [2.0], [0.0]]
