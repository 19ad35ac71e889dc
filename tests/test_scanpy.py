"""scanpy on what ``daf_as_anndata`` gives (issue 23): an AnnData of a memory-mapped H5df data set is the user's own
(writable arrays), so scanpy's in-place steps run on it and give what they give on the original AnnData, and the file
is left untouched. Dense and sparse ``X``, stored in H5df."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import anndata_as_daf, daf_as_anndata

sc = pytest.importorskip("scanpy")  # (installed here: the test runs)
anndata = pytest.importorskip("anndata")

N_OBS, N_VAR = 120, 60
CELL_TYPES = ["T", "NK", "B", "Mono"]  # in neither alphabetical nor natural order


def counts_adata(x_kind: str) -> anndata.AnnData:
    rng = np.random.default_rng(7)
    counts = rng.negative_binomial(2, 0.3, (N_OBS, N_VAR)).astype(np.float32)
    counts[rng.random((N_OBS, N_VAR)) < 0.6] = 0  # sparse-like
    obs = pd.DataFrame({"louvain": pd.Categorical([str(index % 11) for index in range(N_OBS)],
                                                  categories=[str(index) for index in range(11)]),
                        "cell_type": pd.Categorical([CELL_TYPES[index % 4] for index in range(N_OBS)],
                                                    categories=CELL_TYPES)},
                       index=pd.Index([f"cell{index}" for index in range(N_OBS)], name="barcode"))
    var = pd.DataFrame(index=pd.Index([f"gene{index}" for index in range(N_VAR)], name="symbol"))
    X = sp.csr_matrix(counts) if x_kind == "sparse" else counts
    return anndata.AnnData(X=X, obs=obs, var=var, layers={"counts": counts.copy()})


def pipeline(adata: anndata.AnnData) -> anndata.AnnData:
    """scanpy's usual preprocessing, each step in place."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (scanpy's notes, e.g. about densifying in scale)
        sc.pp.normalize_total(adata, target_sum=1e4)
        sc.pp.log1p(adata)
        sc.pp.highly_variable_genes(adata, n_top_genes=20)
        sc.pp.scale(adata, max_value=10)
        sc.pp.pca(adata, n_comps=5, svd_solver="arpack")
    return adata


@pytest.mark.parametrize("x_kind", ["dense", "sparse"])
def test_scanpy_steps_on_daf_as_anndata_of_an_h5df(tmp_path: pathlib.Path, x_kind: str) -> None:
    original = counts_adata(x_kind)
    path = str(tmp_path / "cells.h5df")
    anndata_as_daf(original, path, unsupported_handler="error")
    daf = pydaf.open_daf(path)
    stored = daf.get_stored_matrix("var", "obs", "X")
    assert isinstance(stored, pydaf.SparseMatrixCSC) == (x_kind == "sparse")
    values = stored.nzval if x_kind == "sparse" else stored
    assert not values.flags.writeable  # mapped read-only from the file
    before = np.array(values)

    adata = daf_as_anndata(daf)
    assert sp.issparse(adata.X) == (x_kind == "sparse")
    assert adata.obs.index.name == "barcode" and adata.obs["louvain"].cat.categories.tolist()[-2:] == ["9", "10"]
    pipeline(adata)
    expected = pipeline(original.copy())

    np.testing.assert_allclose(np.asarray(adata.X), np.asarray(expected.X), rtol=1e-5, atol=1e-5)
    assert adata.var["highly_variable"].tolist() == expected.var["highly_variable"].tolist()
    assert adata.var["highly_variable"].sum() == 20
    assert adata.obsm["X_pca"].shape == (N_OBS, 5)
    np.testing.assert_allclose(np.abs(adata.obsm["X_pca"]), np.abs(expected.obsm["X_pca"]), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(dense(adata.layers["counts"]), dense(original.layers["counts"]))
    # The file is untouched, and a new AnnData of it starts from the counts again.
    np.testing.assert_array_equal(values, before)
    np.testing.assert_array_equal(dense(daf_as_anndata(pydaf.open_daf(path)).X), dense(original.X))


def test_scanpy_groups_follow_the_recorded_categories(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "cells.h5df")
    anndata_as_daf(counts_adata("sparse"), path, unsupported_handler="error")
    adata = daf_as_anndata(pydaf.open_daf(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.pp.log1p(adata)
        sc.tl.rank_genes_groups(adata, "cell_type", method="t-test")
    # scanpy's groups are the categories in their order, as in the source (not sorted).
    assert list(adata.uns["rank_genes_groups"]["names"].dtype.names) == CELL_TYPES


def test_the_zero_copy_view_is_read_only(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "cells.h5df")
    anndata_as_daf(counts_adata("dense"), path, unsupported_handler="error")
    view = daf_as_anndata(pydaf.open_daf(path), copy=False)
    assert not view.X.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view.X[0, 0] = 1.0
    owned = daf_as_anndata(pydaf.open_daf(path))
    owned.X[0, 0] = 1.0  # the user's own


def dense(matrix: object) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)
