"""AnnData interop against the real anndata package: h5ad files anndata writes, read by pydaf; h5ad files pydaf writes,
read by anndata; in-memory objects both ways; the legacy and nullable fixtures; the ``pydaf convert`` command."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf

anndata = pytest.importorskip("anndata")

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "anndata"


@pytest.fixture(params=["memory", "h5df", "files"])
def destination(request, tmp_path):
    """Where h5ad_as_daf writes: a new MemoryDaf (None), an H5df path, a FilesDaf directory path."""
    return {"memory": None, "h5df": str(tmp_path / "out.h5df"), "files": str(tmp_path / "out.daf")}[request.param]


def _dense(matrix) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)


def _make_adata(x_kind: str = "csr", dtype=np.float32, seed: int = 1) -> anndata.AnnData:
    generator = np.random.default_rng(seed)
    n_obs, n_var = 7, 5
    values = (generator.random((n_obs, n_var)) < 0.4) * generator.integers(1, 9, (n_obs, n_var))
    values = values.astype(dtype)
    X = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "dense": np.asarray}[x_kind](values)
    obs = pd.DataFrame({
        "type": pd.Categorical(["T1", "T2", None, "T1", "T2", "T1", "T3"]),
        "donor": [f"d{index % 3}" for index in range(n_obs)],
        "age": np.arange(20, 20 + n_obs, dtype=np.int64),
        "score": np.linspace(0.5, 3.5, n_obs),
        "doublet": np.array([True, False] * 3 + [True]),
    }, index=[f"cell{index}" for index in range(n_obs)])
    var = pd.DataFrame({"chrom": [f"chr{index}" for index in range(n_var)],
                        "length": np.arange(n_var, dtype=np.int32)}, index=[f"gene{index}" for index in range(n_var)])
    return anndata.AnnData(
        X=X, obs=obs, var=var,
        layers={"dense": values * 2, "sparse": sp.csr_matrix(values if dtype == np.bool_ else values + 1)},
        obsp={"edges": sp.random(n_obs, n_obs, density=0.3, format="csr", random_state=seed)},
        varp={"corr": generator.random((n_var, n_var))},
        uns={"organism": "human", "version": 3, "ratio": 0.25, "flag": True},
    )


def _check_against(daf: pydaf.DafReader, adata: anndata.AnnData, *, obs: str = "obs", var: str = "var",
                   X: str = "X") -> None:
    """Every supported element of ``adata``, value by value and type by type, in ``daf``."""
    assert daf.axis_vector(obs).tolist() == adata.obs_names.tolist()
    assert daf.axis_vector(var).tolist() == adata.var_names.tolist()
    x = daf.get_matrix(obs, var, X)
    np.testing.assert_array_equal(_dense(x), _dense(adata.X))
    assert x.dtype == adata.X.dtype
    assert sp.issparse(x) == sp.issparse(adata.X)
    for key, layer in adata.layers.items():
        np.testing.assert_array_equal(_dense(daf.get_matrix(obs, var, key)), _dense(layer))
    for key, square in adata.obsp.items():  # Daf's square matrices are the transpose of AnnData's (as in Julia).
        np.testing.assert_array_equal(_dense(daf.get_matrix(obs, obs, key)), _dense(square).T)
    for key, square in adata.varp.items():
        np.testing.assert_array_equal(_dense(daf.get_matrix(var, var, key)), _dense(square).T)
    for axis, frame in ((obs, adata.obs), (var, adata.var)):
        assert daf.vectors_set(axis) == set(frame.columns)
        for column in frame.columns:
            series = frame[column]
            stored = daf.get_vector(axis, column)
            if isinstance(series.dtype, pd.CategoricalDtype) or (
                    not np.issubdtype(series.dtype, np.number) and series.dtype != bool):
                assert stored.tolist() == [("" if pd.isna(value) else str(value)) for value in series.tolist()]
            else:
                np.testing.assert_array_equal(stored, series.to_numpy())
                assert stored.dtype == series.to_numpy().dtype
    for key, value in adata.uns.items():
        assert daf.get_scalar(key) == value
    for key, value, default in (("obs_is", obs, "obs"), ("var_is", var, "var"), ("X_is", X, "X")):
        assert daf.get_scalar(key, default=None) == (value if value != default else adata.uns.get(key))


@pytest.mark.parametrize("x_kind", ["csr", "csc", "dense"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64, np.bool_])
def test_h5ad_written_by_anndata(tmp_path, x_kind, dtype):
    adata = _make_adata(x_kind, dtype)
    path = tmp_path / "x.h5ad"
    adata.write_h5ad(path)
    daf = h5ad_as_daf(path, progress=False)
    _check_against(daf, adata)
    # The layout the file holds (CSR and dense rows are Daf's var x obs columns), as Julia's Daf stores it.
    stored = ("obs", "var") if x_kind == "csc" else ("var", "obs")
    assert daf.has_matrix(*stored, "X", relayout=False)
    assert not daf.has_matrix(*reversed(stored), "X", relayout=False)


@pytest.mark.parametrize("x_kind", ["csr", "csc", "dense"])
def test_every_destination_and_relayout(tmp_path, destination, x_kind):
    adata = _make_adata(x_kind)
    path = tmp_path / "x.h5ad"
    adata.write_h5ad(path)
    daf = h5ad_as_daf(path, destination, obs_is="cell", var_is="gene", X_is="UMIs", relayout=True, progress=False)
    if destination is not None:  # Read back from storage.
        daf = pydaf.open_daf(destination)
    _check_against(daf, adata, obs="cell", var="gene", X="UMIs")
    for name in ("UMIs", "dense", "sparse"):
        assert daf.has_matrix("cell", "gene", name, relayout=False)
        assert daf.has_matrix("gene", "cell", name, relayout=False)
        np.testing.assert_array_equal(_dense(daf.get_matrix("gene", "cell", name, relayout=False)),
                                      _dense(daf.get_matrix("cell", "gene", name, relayout=False)).T)


def test_large_sparse_x_streams_through_the_kernels(tmp_path, monkeypatch):
    from pydaf.interop import anndata as interop
    from pydaf.kernels import relayout

    # Small slices and blocks: many streaming slices, a multi-block parallel transpose.
    monkeypatch.setattr(interop, "_CHUNK", 10_000)
    monkeypatch.setattr(relayout, "_BLOCK_ENTRIES", 20_000)
    X = sp.random(3000, 700, density=0.1, format="csr", dtype=np.float32, random_state=3)
    assert X.nnz >= relayout.NUMBA_THRESHOLD // 8
    monkeypatch.setattr(relayout, "NUMBA_THRESHOLD", 1000)
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


def test_nullable_columns_and_the_unsupported_handler(tmp_path):
    adata = _make_adata()
    adata.obs["count"] = pd.array([1, None, 3, 4, 5, 6, 7], dtype="Int64")
    adata.obs["good"] = pd.array([True, False, None, True, True, False, True], dtype="boolean")
    adata.obs["label"] = pd.array(["a", "b", "c", None, "e", "f", "g"], dtype="string")  # anndata writes a categorical
    adata.obs["complete"] = pd.array([1, 2, 3, 4, 5, 6, 7], dtype="Int64")
    adata.obsm["X_umap"] = np.zeros((7, 2))
    adata.varm["PCs"] = np.zeros((5, 3))
    adata.uns["params"] = {"seed": 1}
    path = tmp_path / "x.h5ad"
    adata.write_h5ad(path)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        daf = h5ad_as_daf(path, progress=False)
    messages = sorted(str(warning.message).split("\n")[0] for warning in caught)
    assert messages == [
        "nullable element: obs/count has 1 missing values, stored as 0",
        "nullable element: obs/good has 1 missing values, stored as false",
        "unsupported element: obsm/X_umap",
        "unsupported element: uns/params (nested mapping)",
        "unsupported element: varm/PCs",
    ]
    assert all("in AnnData for the daf data: anndata" in str(warning.message) for warning in caught)
    assert daf.get_vector("obs", "count").tolist() == [1, 0, 3, 4, 5, 6, 7]
    assert daf.get_vector("obs", "good").tolist() == [True, False, False, True, True, False, True]
    assert daf.get_vector("obs", "label").tolist() == ["a", "b", "c", "", "e", "f", "g"]
    assert daf.get_vector("obs", "complete").tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert not daf.has_scalar("params")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = h5ad_as_daf(path, unsupported_handler="ignore", progress=False)
    assert quiet.get_vector("obs", "count").tolist() == [1, 0, 3, 4, 5, 6, 7]

    target = pydaf.MemoryDaf(name="target!")
    with pytest.raises(pydaf.DafUnsupportedError, match="nullable element: obs/count") as raised:
        h5ad_as_daf(path, target, unsupported_handler="error", progress=False)
    assert "in AnnData for the daf data: anndata" in str(raised.value)
    assert target.axes_set() == set() and target.scalars_set() == set()  # Nothing was written.
    with pytest.raises(pydaf.DafValueError, match="invalid unsupported_handler: 'loud'"):
        h5ad_as_daf(path, unsupported_handler="loud", progress=False)


def _make_daf(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    daf.set_scalar("organism", "mouse").set_scalar("seed", 7).set_scalar("ratio", 0.5).set_scalar("flag", False)
    daf.add_axis("cell", [f"c{index}" for index in range(6)]).add_axis("gene", ["Xist", "Actb", "Gapdh", "Cd4"])
    daf.add_axis("type", ["T1", "T2"])  # Not exported: AnnData has two axes.
    daf.set_vector("cell", "type", ["T1", "T2", "T1", "T1", "T2", "T2"])
    daf.set_vector("cell", "age", np.arange(6, dtype=np.uint8))
    daf.set_vector("cell", "is_doublet", np.array([False, True, False, False, False, True]))
    daf.set_vector("gene", "weight", np.linspace(0, 1, 4, dtype=np.float32))
    umis = np.array([[0, 3, 0, 1], [2, 0, 0, 0], [0, 0, 5, 0], [1, 1, 0, 0], [0, 0, 0, 0], [7, 0, 2, 0]],
                    dtype=np.uint16)
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(umis), relayout=False)  # Only cell x gene: relaid out.
    daf.set_matrix("gene", "cell", "fraction", (umis / 10.0).T.copy(order="F"), relayout=False)
    edges = np.arange(36, dtype=np.float32).reshape(6, 6)
    daf.set_matrix("cell", "cell", "edges", sp.csc_matrix(edges))
    daf.set_matrix("gene", "gene", "similarity", np.eye(4))
    return daf


@pytest.mark.parametrize("kind", ["memory", "h5df"])
def test_daf_written_as_h5ad_read_by_anndata_and_back(tmp_path, kind):
    daf = _make_daf(pydaf.MemoryDaf(name="cells!") if kind == "memory" else
                    pydaf.H5df(str(tmp_path / "cells.h5df"), "w", name="cells!"))
    path = tmp_path / "cells.h5ad"
    daf_as_h5ad(daf, path, obs_is="cell", var_is="gene", X_is="UMIs", progress=False)

    with h5py.File(path, "r") as file:  # Stored only as cell x gene: written as CSC (not relaid out); fraction CSR.
        assert file["X"].attrs["encoding-type"] == "csc_matrix"
        assert file["layers/fraction"].attrs["encoding-type"] == "array"
        assert file["obsp/edges"].attrs["encoding-type"] == "csr_matrix"
    adata = anndata.read_h5ad(path)
    assert adata.obs_names.tolist() == daf.axis_vector("cell").tolist()
    assert adata.var_names.tolist() == daf.axis_vector("gene").tolist()
    assert sp.issparse(adata.X) and adata.X.dtype == np.uint16
    np.testing.assert_array_equal(adata.X.toarray(), daf.get_matrix("cell", "gene", "UMIs").toarray())
    assert set(adata.layers) == {"fraction"}
    np.testing.assert_array_equal(adata.layers["fraction"], daf.get_matrix("cell", "gene", "fraction"))
    np.testing.assert_array_equal(_dense(adata.obsp["edges"]), daf.get_matrix("cell", "cell", "edges").toarray().T)
    np.testing.assert_array_equal(_dense(adata.varp["similarity"]), daf.get_matrix("gene", "gene", "similarity").T)
    assert adata.obs["type"].tolist() == daf.get_vector("cell", "type").tolist()
    np.testing.assert_array_equal(adata.obs["age"].to_numpy(), daf.get_vector("cell", "age"))
    assert adata.obs["age"].dtype == np.uint8 and adata.obs["is_doublet"].dtype == bool
    np.testing.assert_array_equal(adata.var["weight"].to_numpy(), daf.get_vector("gene", "weight"))
    assert dict(adata.uns) == {"organism": "mouse", "seed": 7, "ratio": 0.5, "flag": False, "obs_is": "cell",
                               "var_is": "gene", "X_is": "UMIs"}

    back = h5ad_as_daf(path, progress=False)  # The names come back from uns.
    assert back.axes_set() == {"cell", "gene"}
    assert back.matrices_set("cell", "gene") == {"UMIs", "fraction"}
    for name in ("UMIs", "fraction"):
        np.testing.assert_array_equal(_dense(back.get_matrix("cell", "gene", name)),
                                      _dense(daf.get_matrix("cell", "gene", name)))
    for axis, name in (("cell", "edges"), ("gene", "similarity")):
        np.testing.assert_array_equal(_dense(back.get_matrix(axis, axis, name)),
                                      _dense(daf.get_matrix(axis, axis, name)))
    for axis in ("cell", "gene"):
        for name in daf.vectors_set(axis):
            np.testing.assert_array_equal(back.get_vector(axis, name), daf.get_vector(axis, name))
    assert {name: back.get_scalar(name) for name in ("organism", "seed", "ratio", "flag")} == {
        "organism": "mouse", "seed": 7, "ratio": 0.5, "flag": False}


def test_h5ad_to_daf_to_h5ad_round_trip(tmp_path):
    adata = _make_adata("csr", np.float32)
    adata.obs["type"] = adata.obs["type"].cat.add_categories("").fillna("")  # Daf has no missing strings.
    first = tmp_path / "first.h5ad"
    adata.write_h5ad(first)
    second = tmp_path / "second.h5ad"
    daf_as_h5ad(h5ad_as_daf(first, progress=False), second, progress=False)
    again = anndata.read_h5ad(second)
    assert again.obs_names.tolist() == adata.obs_names.tolist()
    np.testing.assert_array_equal(again.X.toarray(), adata.X.toarray())
    for key in adata.layers:
        np.testing.assert_array_equal(_dense(again.layers[key]), _dense(adata.layers[key]))
    np.testing.assert_array_equal(_dense(again.obsp["edges"]), _dense(adata.obsp["edges"]))
    np.testing.assert_array_equal(_dense(again.varp["corr"]), _dense(adata.varp["corr"]))
    assert again.obs["type"].astype(str).tolist() == adata.obs["type"].astype(str).tolist()
    for column in ("age", "score", "doublet"):
        np.testing.assert_array_equal(again.obs[column].to_numpy(), adata.obs[column].to_numpy())
    assert dict(again.uns) == dict(adata.uns)


def test_in_memory_anndata_both_ways():
    adata = _make_adata("csr", np.float64)
    daf = anndata_as_daf(adata, obs_is="cell", var_is="gene", relayout=True)
    _check_against(daf, adata, obs="cell", var="gene")
    assert daf.has_matrix("cell", "gene", "X", relayout=False) and daf.has_matrix("gene", "cell", "X", relayout=False)

    back = daf_as_anndata(daf, X_eltype=np.float32)  # The axes recorded at import: cell and gene.
    assert isinstance(back.X, sp.csr_matrix) and back.X.dtype == np.float32
    np.testing.assert_array_equal(back.X.toarray(), adata.X.toarray().astype(np.float32))
    assert back.obs_names.tolist() == adata.obs_names.tolist() and back.var_names.tolist() == adata.var_names.tolist()
    assert isinstance(back.layers["dense"], np.ndarray)
    np.testing.assert_array_equal(back.layers["dense"], adata.layers["dense"])
    np.testing.assert_array_equal(_dense(back.obsp["edges"]), _dense(adata.obsp["edges"]))
    np.testing.assert_array_equal(back.varp["corr"], adata.varp["corr"])
    assert back.obs["type"].tolist() == ["T1", "T2", "", "T1", "T2", "T1", "T3"]
    assert back.uns["obs_is"] == "cell" and back.uns["var_is"] == "gene" and "X_is" not in back.uns
    assert back.uns["organism"] == "human"


def test_errors_name_what_is_wrong(tmp_path):
    not_h5ad = tmp_path / "text.h5ad"
    not_h5ad.write_text("not hdf5")
    with pytest.raises(pydaf.DafFormatError, match=r"can't open the h5ad file: .*text\.h5ad"):
        h5ad_as_daf(not_h5ad, progress=False)
    daf = _make_daf(pydaf.MemoryDaf(name="cells!"))
    with pytest.raises(pydaf.DafMissingError, match="missing matrix: X\nfor the rows axis: cell\nand the columns axis: "
                                                    "gene\nin the daf data: cells!"):
        daf_as_h5ad(daf, tmp_path / "out.h5ad", obs_is="cell", var_is="gene", progress=False)
    with pytest.raises(pydaf.DafMissingError, match="missing axis: obs"):
        daf_as_anndata(daf)
    adata = _make_adata()
    adata.obs_names = ["same"] * 7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata's own warning about the duplicate names
        adata.write_h5ad(tmp_path / "dup.h5ad")
    target = pydaf.MemoryDaf()
    with pytest.raises(pydaf.DafShapeError, match="duplicate obs names in the AnnData: anndata"):
        h5ad_as_daf(tmp_path / "dup.h5ad", target, progress=False)
    assert target.axes_set() == set()


def _fixture(name: str) -> pathlib.Path:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"the shared fixture {path} is not here (../shared/fixtures/anndata)")
    return path


def test_canonical_fixture():
    path = _fixture("anndata_canonical.h5ad")
    adata = anndata.read_h5ad(path)
    daf = h5ad_as_daf(path, progress=False)
    _check_against(daf, adata)


def test_nullable_strings_fixture():
    path = _fixture("anndata_nullable_strings.h5ad")
    with h5py.File(path, "r") as file:  # The expectations, from the file itself.
        mask = file["obs/batch/mask"][()]
        batch = [value.decode() for value in file["obs/batch/values"][()]]
        codes = file["obs/cell_type/codes"][()]
        categories = [value.decode() for value in file["obs/cell_type/categories/values"][()]]
        n_umis, n_umis_mask = file["obs/n_umis/values"][()], file["obs/n_umis/mask"][()]
        doublet, doublet_mask = file["obs/is_doublet/values"][()], file["obs/is_doublet/mask"][()]
        names = [value.decode() for value in file["obs/_index/values"][()]]
        X = file["X"][()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        daf = h5ad_as_daf(path, progress=False)
    assert daf.axis_vector("obs").tolist() == names
    assert daf.get_vector("obs", "batch").tolist() == ["" if missing else value for value, missing in
                                                       zip(batch, mask, strict=True)]
    assert daf.get_vector("obs", "cell_type").tolist() == ["" if code < 0 else categories[code] for code in codes]
    assert daf.get_vector("obs", "n_umis").tolist() == np.where(n_umis_mask, 0, n_umis).tolist()
    assert daf.get_vector("obs", "is_doublet").tolist() == np.where(doublet_mask, False, doublet).tolist()
    np.testing.assert_array_equal(daf.get_matrix("obs", "var", "X"), X)
    reported = {str(warning.message).split("\n")[0].split(" has ")[0] for warning in caught}
    expected = {f"nullable element: obs/{name}" for name, missing in
                (("batch", mask), ("n_umis", n_umis_mask), ("is_doublet", doublet_mask)) if missing.any()}
    assert expected <= reported
    adata = anndata.read_h5ad(path)  # anndata agrees on the present values.
    assert adata.obs_names.tolist() == names
    assert [value for value in adata.obs["batch"].tolist() if not pd.isna(value)] == [
        value for value, missing in zip(batch, mask, strict=True) if not missing]


@pytest.mark.parametrize("name", ["small_test.h5ad", "sparse_test.h5ad"])
def test_legacy_fixtures_without_encodings(name):
    path = _fixture(name)
    with h5py.File(path, "r") as file:
        obs_names = [value.decode() for value in file["obs/_index"][()]]
        var_names = [value.decode() for value in file["var/_index"][()]]
        donors = [value.decode() for value in file["obs/donor"][()]]
        chrom = [value.decode() for value in file["var/chrom"][()]]
        organism = file["uns/organism"][()]
        organism = (organism[0] if organism.shape else organism).decode()
        if isinstance(file["X"], h5py.Group):
            group = file["X"]
            X = sp.csr_matrix((group["data"][()], group["indices"][()], group["indptr"][()]),
                              shape=tuple(group.attrs["shape"])).toarray()
        else:
            X = file["X"][()]
        celltype = None
        if "celltype" in file["obs"]:
            codes = file["obs/celltype/codes"][()]
            categories = [value.decode() for value in file["obs/celltype/categories"][()]]
            celltype = [categories[code] if code >= 0 else "" for code in codes]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        daf = h5ad_as_daf(path, progress=False)
    assert daf.axis_vector("obs").tolist() == obs_names and daf.axis_vector("var").tolist() == var_names
    assert daf.get_vector("obs", "donor").tolist() == donors
    assert daf.get_vector("var", "chrom").tolist() == chrom
    assert daf.get_scalar("organism") == organism
    np.testing.assert_array_equal(_dense(daf.get_matrix("obs", "var", "X")), X)
    if celltype is not None:
        assert daf.get_vector("obs", "celltype").tolist() == celltype
        skipped = sorted(str(warning.message).split("\n")[0] for warning in caught)
        assert skipped == ["unsupported element: obsm/X_umap", "unsupported element: uns/params (nested mapping)",
                           "unsupported element: varm/PCs"]


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


def test_convert_command(tmp_path):
    adata = _make_adata("csr")
    source = tmp_path / "x.h5ad"
    adata.write_h5ad(source)
    h5df = tmp_path / "x.h5df"
    done = subprocess.run([sys.executable, "-m", "pydaf", "convert", str(source), str(h5df), "--obs-is", "cell",
                           "--var-is", "gene", "--relayout", "--no-progress"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    daf = pydaf.H5df(str(h5df), "r")
    _check_against(daf, adata, obs="cell", var="gene")
    assert daf.has_matrix("cell", "gene", "X", relayout=False) and daf.has_matrix("gene", "cell", "X", relayout=False)

    back = tmp_path / "back.h5ad"
    done = subprocess.run([sys.executable, "-m", "pydaf", "convert", str(h5df), str(back), "--no-progress"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    again = anndata.read_h5ad(back)
    np.testing.assert_array_equal(again.X.toarray(), adata.X.toarray())
    assert again.uns["obs_is"] == "cell" and again.obs_names.tolist() == adata.obs_names.tolist()

    files = tmp_path / "copy.daf"
    done = subprocess.run([sys.executable, "-m", "pydaf", "convert", str(h5df), str(files), "--no-progress"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    copy = pydaf.open_daf(str(files))
    assert copy.matrices_set("cell", "gene", relayout=False) == daf.matrices_set("cell", "gene", relayout=False)
    np.testing.assert_array_equal(copy.get_matrix("cell", "gene", "X").toarray(), adata.X.toarray())

    done = subprocess.run([sys.executable, "-m", "pydaf", "convert", str(source), str(tmp_path / "y.h5ad")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "both are h5ad files" in done.stderr
