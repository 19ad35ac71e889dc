"""``DafAnnData`` (issue 27): a Daf data set, view or chain seen as an AnnData without a copy. The behaviours dafpy's
facade tests check, on pydaf's own API; zero-copy on a memory-mapped H5df (dense and sparse); writes that go to the
data set, and the typed error where it is read-only; slices and queries as Daf views; scanpy steps compared with the
same steps on a plain ``anndata.AnnData`` of the same data."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import DafAnnData, daf_as_anndata

anndata = pytest.importorskip("anndata")
sc = pytest.importorskip("scanpy")

N_CELLS, N_GENES = 40, 30


def cells_adata(daf: pydaf.DafReader | None = None) -> DafAnnData:
    return DafAnnData(daf or pydaf.example_cells_daf(), obs_axis="cell", var_axis="gene", x_matrix="UMIs")


def metacells_adata() -> DafAnnData:
    return DafAnnData(pydaf.example_metacells_daf(), obs_axis="metacell", var_axis="gene", x_matrix="fraction")


def counts() -> np.ndarray:
    rng = np.random.default_rng(27)
    values = rng.poisson(2.0, size=(N_CELLS, N_GENES)).astype(np.float32)
    values[rng.random(values.shape) < 0.5] = 0
    return values


@pytest.fixture
def h5df_path(tmp_path):
    """An H5df with the dense ``UMIs`` and the sparse ``sparse`` of (cell, gene), both layouts, and a few columns."""
    path = tmp_path / "cells.h5df"
    with pydaf.H5df(path, "w") as daf:
        daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
        daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
        daf.set_scalar("organism", "human")
        daf.set_vector("cell", "batch", np.array(["A", "B"] * (N_CELLS // 2)))
        daf.set_matrix("cell", "gene", "UMIs", counts())
        daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(counts()))
    return path


# The AnnData surface, on the example data (as dafpy's tests check it).


def test_shape_names_and_x_are_the_stored_matrix() -> None:
    daf = pydaf.example_cells_daf()
    adata = cells_adata(daf)
    assert adata.shape == (856, 683) and (adata.n_obs, adata.n_vars) == (856, 683) and len(adata) == 856
    assert adata.obs_names.tolist() == daf.axis_vector("cell").tolist()
    assert adata.var_names.tolist() == daf.axis_vector("gene").tolist()
    assert adata.daf is daf and adata.X.dtype == np.uint8
    np.testing.assert_array_equal(adata.X, daf.get_matrix("cell", "gene", "UMIs"))
    assert np.shares_memory(adata.X, daf.get_matrix("gene", "cell", "UMIs"))  # the (gene, cell) layout, transposed
    assert adata.X.flags.c_contiguous and not adata.X.flags.writeable


def test_obs_and_var_read_the_vectors() -> None:
    daf = pydaf.example_cells_daf()
    adata = cells_adata(daf)
    assert list(adata.obs) == ["donor", "experiment"] == list(adata.obs.columns) == adata.obs_keys()
    assert len(adata.obs) == 856 and adata.obs.shape == (856, 2) and "donor" in adata.obs and "x" not in adata.obs
    donor = adata.obs["donor"]
    assert isinstance(donor, pd.Series) and donor.index.tolist() == adata.obs_names.tolist()
    assert donor.tolist() == daf.get_vector("cell", "donor").tolist()
    frame = adata.obs[["experiment", "donor"]]
    assert list(frame.columns) == ["experiment", "donor"] and frame["donor"].tolist() == donor.tolist()
    assert adata.obs.to_df()["experiment"].tolist() == daf.get_vector("cell", "experiment").tolist()
    assert adata.var["is_lateral"].sum() == 438 and adata.var.get("nothing") is None
    with pytest.raises(KeyError, match="missing vector: nothing"):
        adata.obs["nothing"]
    with pytest.raises(pydaf.DafKeyError):
        adata.obs[42]


def test_obs_and_var_write_through() -> None:
    daf = pydaf.example_cells_daf()
    adata = cells_adata(daf)
    adata.obs["score"] = np.arange(856, dtype=np.int32)
    assert daf.get_vector("cell", "score").tolist() == list(range(856))
    adata.obs["kind"] = pd.Categorical(["A", "B"] * 428)  # categories become strings (Daf's vector of labels)
    assert daf.get_vector("cell", "kind")[:3].tolist() == ["A", "B", "A"]
    adata.obs["flipped"] = pd.Series(np.arange(856), index=adata.obs_names[::-1])  # aligned by label, as pandas does
    assert daf.get_vector("cell", "flipped")[:2].tolist() == [855, 854]
    adata.var = pd.DataFrame({"weight": np.ones(683, dtype=np.float32)}, index=adata.var_names)
    assert daf.get_vector("gene", "weight").dtype == np.float32 and "is_lateral" in adata.var  # others kept
    del adata.obs["score"]
    assert not daf.has_vector("cell", "score")
    with pytest.raises(KeyError, match="missing vector: score"):
        del adata.obs["score"]
    with pytest.raises(pydaf.DafShapeError):
        adata.obs["short"] = np.zeros(3)


def test_layers_exclude_x_and_write_both_layouts() -> None:
    daf = pydaf.example_cells_daf()
    adata = cells_adata(daf)
    assert len(adata.layers) == 0 and "UMIs" not in adata.layers
    with pytest.raises(KeyError, match="is the X of the DafAnnData"):
        adata.layers["UMIs"]
    values = np.arange(856 * 683, dtype=np.float32).reshape(856, 683)  # row-major (cell, gene): Daf's (gene, cell)
    adata.layers["ramp"] = values
    assert list(adata.layers) == ["ramp"] and dict(adata.layers.items())["ramp"].shape == (856, 683)
    np.testing.assert_array_equal(adata.layers["ramp"], values)
    np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "ramp", relayout=False), values)  # relaid out too
    adata.layers = {"sparse": sp.csr_matrix(values * (values % 7 == 0))}
    layer = adata.layers["sparse"]
    assert sp.issparse(layer) and layer.format == "csr"
    np.testing.assert_array_equal(layer.toarray(), values * (values % 7 == 0))
    del adata.layers["ramp"]
    assert not daf.has_matrix("cell", "gene", "ramp") and "ramp" not in adata.layers
    assert "'sparse'" in repr(adata.layers)


def test_x_setter_writes_the_matrix() -> None:
    daf = pydaf.example_cells_daf()
    adata = cells_adata(daf)
    new = np.full((856, 683), 0.5, dtype=np.float32)
    adata.X = new
    assert adata.X.dtype == np.float32 and daf.get_matrix("gene", "cell", "UMIs", relayout=False).dtype == np.float32
    np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "UMIs"), new)


def test_uns_is_the_scalars() -> None:
    daf = pydaf.example_cells_daf()
    adata = cells_adata(daf)
    assert dict(adata.uns) == {"organism": "human", "reference": "test"} and len(adata.uns) == 2
    assert adata.uns.get("nothing", "default") == "default" and "organism" in adata.uns
    adata.uns = {"answer": 42, "note": "hello"}
    assert daf.get_scalar("answer") == 42 and adata.uns["note"] == "hello" and "'answer': 42" in repr(adata.uns)
    del adata.uns["answer"]
    assert not daf.has_scalar("answer")
    for nested in ({"key": "value"}, [1, 2, 3], np.zeros(2)):
        with pytest.raises(pydaf.DafTypeError, match="uns values must be strings or numbers") as raised:
            adata.uns["nested"] = nested
        assert isinstance(raised.value, TypeError) and "cells!" in str(raised.value)
    with pytest.raises(KeyError, match="missing scalar: nested"):
        adata.uns["nested"]


def test_obsp_is_transposed_as_the_anndata_conversion_gives_it() -> None:
    daf = pydaf.example_metacells_daf()
    adata = DafAnnData(daf, obs_axis="metacell", var_axis="gene", x_matrix="fraction")
    stored = daf.get_matrix("metacell", "metacell", "edge_weight")
    np.testing.assert_array_equal(adata.obsp["edge_weight"], stored.T)
    assert np.shares_memory(adata.obsp["edge_weight"], stored)
    converted = daf_as_anndata(daf, obs_is="metacell", var_is="gene", X_is="fraction")
    np.testing.assert_array_equal(adata.obsp["edge_weight"], converted.obsp["edge_weight"])
    asymmetric = np.arange(49, dtype=np.float32).reshape(7, 7)
    adata.obsp["similarity"] = asymmetric  # a round trip gives it back, whatever its memory order
    np.testing.assert_array_equal(adata.obsp["similarity"], asymmetric)
    adata.obsp["similarity"] = np.asfortranarray(asymmetric)
    np.testing.assert_array_equal(adata.obsp["similarity"], asymmetric)
    del adata.obsp["similarity"]
    assert list(adata.obsp) == ["edge_weight"] and len(adata.varp) == 0


def test_obsm_and_varm_are_matrices_of_other_axes() -> None:
    chain = pydaf.example_chain_daf()
    adata = cells_adata(chain)
    assert "metacell:fraction" in adata.varm and "gene:UMIs" not in adata.obsm and "no_colon" not in adata.obsm
    np.testing.assert_array_equal(adata.varm["metacell:fraction"], chain.get_matrix("gene", "metacell", "fraction"))
    metacells = metacells_adata()
    metacells.obsm["type:weights"] = np.arange(28, dtype=np.float32).reshape(7, 4)
    np.testing.assert_array_equal(metacells.daf.get_matrix("metacell", "type", "weights"),
                                  np.arange(28).reshape(7, 4))
    assert metacells.obsm_keys() == ["type:weights"]
    del metacells.obsm["type:weights"]
    assert "type:weights" not in metacells.obsm
    with pytest.raises(KeyError, match="obsm/varm key must be 'other_axis:matrix_name'"):
        metacells.obsm["no_colon"]
    with pytest.raises(KeyError, match="primary axis"):
        metacells.obsm["gene:fraction"] = np.zeros((7, 683))
    with pytest.raises(KeyError, match="does not exist in the Daf data set"):
        metacells.obsm["fake:embedding"] = np.zeros((7, 3))


def test_to_df_vectors_and_repr() -> None:
    adata = cells_adata()
    frame = adata.to_df()
    assert frame.shape == (856, 683) and frame.index.tolist() == adata.obs_names.tolist()
    assert np.shares_memory(frame.to_numpy(), adata.X)
    gene = adata.var_names[3]
    np.testing.assert_array_equal(adata.obs_vector(gene), adata.X[:, 3])
    np.testing.assert_array_equal(adata.var_vector(adata.obs_names[5]), adata.X[5, :])
    assert adata.obs_vector("donor").tolist() == adata.obs["donor"].tolist()
    text = repr(adata)
    assert text.startswith("DafAnnData object with n_obs × n_vars = 856 × 683") and "obs: 'donor', 'experiment'" in text
    assert adata.T.shape == (683, 856)
    np.testing.assert_array_equal(adata.T.X, adata.X.T)


# Slices and queries: read-only Daf views.


def test_slices_select_as_anndata_does() -> None:
    adata = cells_adata()
    X = np.asarray(adata.X)
    obs_mask = np.asarray(adata.obs["donor"] == "N89")
    cases = [((obs_mask, slice(None)), X[obs_mask]),
             ((slice(10, 20), slice(None, None, 2)), X[10:20, ::2]),
             (([0, 4, 9], [1, 2]), X[[0, 4, 9]][:, [1, 2]]),
             ((np.array([3, 5]), adata.var_names[:4].tolist()), X[[3, 5], :4]),
             ((adata.obs_names[7], -1), X[[7]][:, [-1]]),
             ((None, ...), X),
             (([], slice(None)), X[:0])]
    for index, expected in cases:
        sliced = adata[index]
        assert sliced.shape == expected.shape, index
        np.testing.assert_array_equal(sliced.X, expected)
        assert "__mask__" not in sliced.obs and "__mask__" not in sliced.var
    sliced = adata[obs_mask, :]
    assert sliced.obs["donor"].tolist() == ["N89"] * obs_mask.sum() and sliced.is_read_only
    assert sliced.obs_names.tolist() == adata.obs_names[obs_mask].tolist()
    twice = sliced[1:3, :5]
    np.testing.assert_array_equal(twice.X, X[obs_mask][1:3, :5])


def test_a_contiguous_slice_of_a_mapped_file_is_a_slice_of_the_map(h5df_path) -> None:
    daf = pydaf.open_daf(h5df_path)
    sliced = cells_adata(daf)[10:20, :]
    assert np.shares_memory(sliced.X, daf.get_matrix("gene", "cell", "UMIs"))
    np.testing.assert_array_equal(sliced.X, counts()[10:20])


def test_bad_slices_are_refused() -> None:
    adata = cells_adata()
    for index, message in (((slice(None, 50),), "DafAnnData slicing requires two indices"),
                           (slice(None, 50), "DafAnnData slicing requires two indices"),
                           (({"set": "index"}, slice(None)), "unsupported index type: dict"),
                           ((np.ones(3, dtype=bool), slice(None)), "a Boolean mask of 3 entries"),
                           ((856, slice(None)), "position out of range: 856"),
                           (([5, 2], slice(None)), "entries out of the axis order"),
                           (([2, 2], slice(None)), "entries out of the axis order"),
                           ((slice(None, None, -1), slice(None)), "a slice in reverse order")):
        with pytest.raises(pydaf.DafIndexError, match=message) as raised:
            adata[index]
        assert isinstance(raised.value, IndexError)
    with pytest.raises(KeyError, match="nope"):
        adata[["nope"], :]


def test_queries_filter_by_daf_masks() -> None:
    adata = cells_adata()
    lateral = adata.query_var("is_lateral")
    assert lateral.shape == (856, 438)
    mask = np.asarray(adata.var["is_lateral"])
    np.testing.assert_array_equal(lateral.X, np.asarray(adata.X)[:, mask])
    metacells = metacells_adata()
    first = metacells.obs["type"].iloc[0]
    assert metacells.query_obs(f"type = {first}").n_obs == (metacells.obs["type"] == first).sum()


def test_a_view_backs_a_facade() -> None:
    cells = pydaf.example_cells_daf()
    view = pydaf.viewer(cells, axes=[("obs", "@ cell [ donor = N89 ]"), ("var", "gene")],
                        data=[(("obs", "var", "X"), ":: UMIs"), (("obs", "donor"), ": donor")])
    adata = DafAnnData(view, obs_axis="obs", var_axis="var", x_matrix="X")
    mask = cells.get_vector("cell", "donor") == "N89"
    np.testing.assert_array_equal(adata.X, cells.get_matrix("cell", "gene", "UMIs")[mask])
    assert adata.obs["donor"].unique().tolist() == ["N89"] and adata.is_read_only
    with pytest.raises(pydaf.DafReadOnlyError, match="a view is read-only"):
        adata.obs["x"] = np.zeros(adata.n_obs)


# Read-only data sets: a typed error naming the data set and how to open it for writing.


def test_writes_through_a_read_only_data_set_raise(h5df_path) -> None:
    daf = pydaf.open_daf(h5df_path)
    adata = cells_adata(daf)
    writes = [lambda: adata.obs.__setitem__("x", np.zeros(N_CELLS)),
              lambda: adata.var.__setitem__("x", np.zeros(N_GENES)),
              lambda: adata.uns.__setitem__("x", "value"),
              lambda: adata.layers.__setitem__("x", np.zeros((N_CELLS, N_GENES))),
              lambda: adata.obsp.__setitem__("x", np.zeros((N_CELLS, N_CELLS))),
              lambda: setattr(adata, "X", np.zeros((N_CELLS, N_GENES))),
              lambda: adata.obs.__delitem__("batch"),
              lambda: adata.uns.__delitem__("organism")]
    for write in writes:
        with pytest.raises(pydaf.DafReadOnlyError) as raised:
            write()
        text = str(raised.value)
        assert "DafReadOnly" in text and 'mode "r+"' in text and "cells.h5df" in text, text
        assert isinstance(raised.value, AttributeError) and raised.value.daf_name == daf.name
    reopened = pydaf.open_daf(h5df_path)
    assert reopened.vectors_set("cell") == {"batch"} and reopened.scalars_set() == {"organism"}
    assert reopened.matrices_set("cell", "gene") == {"UMIs", "sparse"}


def test_writes_through_a_slice_say_where_to_write() -> None:
    adata = metacells_adata()
    sliced = adata[:3, :]
    for write in (lambda: sliced.obs.__setitem__("x", np.zeros(3)),
                  lambda: sliced.uns.__setitem__("x", 1),
                  lambda: sliced.obsp.__setitem__("x", np.zeros((3, 3))),
                  lambda: sliced.obsm.__setitem__("type:w", np.zeros((3, 4))),
                  lambda: sliced.layers.__setitem__("x", np.zeros((3, 683)))):
        with pytest.raises(pydaf.DafReadOnlyError, match=r"(?s)DafReadOnly.*write through the DafAnnData it was"):
            write()
    assert not adata.daf.has_scalar("x")


# H5df: the facade's arrays are the memory-mapped file.


def test_h5df_dense_x_is_the_mapped_array(h5df_path) -> None:
    daf = pydaf.open_daf(h5df_path)
    adata = cells_adata(daf)
    X = adata.X
    stored = daf.get_matrix("gene", "cell", "UMIs", relayout=False)
    assert np.shares_memory(X, stored) and not X.flags.writeable and not X.flags.owndata
    base = X
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    assert not isinstance(base, np.ndarray)  # the map of the file (a memoryview), not an array of its own
    np.testing.assert_array_equal(X, counts())
    with pytest.raises(ValueError, match="read-only"):
        X[0, 0] = 1


def test_h5df_sparse_layer_stays_sparse_and_shares_the_values(h5df_path) -> None:
    daf = pydaf.open_daf(h5df_path)
    layer = cells_adata(daf).layers["sparse"]
    assert sp.issparse(layer) and layer.format == "csr"  # the (gene, cell) CSC, transposed: scanpy's usual layout
    nzval = np.asarray(daf.get_stored_matrix("gene", "cell", "sparse", relayout=False).nzval)
    assert np.shares_memory(layer.data, nzval) and not layer.data.flags.writeable
    np.testing.assert_array_equal(layer.toarray(), counts())


def test_h5df_opened_for_writing_is_written(h5df_path) -> None:
    with pydaf.open_daf(h5df_path, "r+") as daf:
        adata = cells_adata(daf)
        adata.obs["total"] = np.asarray(adata.X.sum(axis=1)).ravel()
        adata.layers["doubled"] = np.asarray(adata.X) * 2
        adata.uns["step"] = "doubled"
    reopened = pydaf.open_daf(h5df_path)
    np.testing.assert_array_equal(reopened.get_vector("cell", "total"), counts().sum(axis=1))
    np.testing.assert_array_equal(reopened.get_matrix("cell", "gene", "doubled"), counts() * 2)
    assert reopened.get_scalar("step") == "doubled"


# scanpy, compared with the same step on a plain AnnData of the same data.


def plain_anndata(daf: pydaf.DafReader) -> anndata.AnnData:
    return anndata.AnnData(X=np.array(daf.get_matrix("cell", "gene", "UMIs"), order="C"),
                           obs=pd.DataFrame(index=daf.axis_vector("cell").astype(object)),
                           var=pd.DataFrame(index=daf.axis_vector("gene").astype(object)))


@pytest.mark.parametrize("layer", [None, "sparse"])
def test_scanpy_normalize_total_reads_the_mapped_matrix(h5df_path, layer) -> None:
    daf = pydaf.open_daf(h5df_path)
    adata = cells_adata(daf)
    plain = plain_anndata(daf)
    if layer is not None:
        plain.layers[layer] = sp.csr_matrix(counts())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ("Some cells have zero counts", on both)
        ours = sc.pp.normalize_total(adata, target_sum=1e4, layer=layer, inplace=False)
        theirs = sc.pp.normalize_total(plain, target_sum=1e4, layer=layer, inplace=False)
    np.testing.assert_array_equal(ours["norm_factor"], theirs["norm_factor"])
    np.testing.assert_array_equal(ours["X"].toarray() if layer else ours["X"],
                                  theirs["X"].toarray() if layer else theirs["X"])
    np.testing.assert_array_equal(adata.X, counts())  # the file is untouched


def test_scanpy_in_place_normalize_writes_x_to_the_data_set() -> None:
    daf = pydaf.example_cells_daf()
    plain = plain_anndata(daf)
    sc.pp.normalize_total(cells_adata(daf), target_sum=1e4, key_added="n_counts")
    sc.pp.normalize_total(plain, target_sum=1e4, key_added="n_counts")
    np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "UMIs"), plain.X)
    np.testing.assert_array_equal(daf.get_vector("cell", "n_counts"), plain.obs["n_counts"])


def test_scanpy_in_place_steps_on_a_read_only_file_fail_loudly(h5df_path) -> None:
    adata = cells_adata(pydaf.open_daf(h5df_path))
    with pytest.raises(ValueError, match="read-only"):  # numpy: the mapped X can't be modified in place
        sc.pp.normalize_total(adata)
    with pytest.raises(pydaf.DafReadOnlyError, match='mode "r\\+"'):
        sc.pp.normalize_total(adata, layer="sparse", key_added="n_counts")  # (a CSR copy is normalized; then written)
    np.testing.assert_array_equal(adata.X, counts())


def test_scanpy_pca_on_to_memory_matches_a_plain_anndata(h5df_path) -> None:
    daf = pydaf.open_daf(h5df_path)
    adata = cells_adata(daf)
    memory = adata.to_memory()
    assert isinstance(memory, anndata.AnnData) and np.shares_memory(memory.X, adata.X)
    plain = plain_anndata(daf)
    sc.pp.pca(memory, n_comps=5, svd_solver="full")
    sc.pp.pca(plain, n_comps=5, svd_solver="full")
    np.testing.assert_allclose(memory.obsm["X_pca"], plain.obsm["X_pca"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(memory.uns["pca"]["variance"], plain.uns["pca"]["variance"], rtol=1e-5)
    copied = adata.copy()
    assert copied.X.flags.writeable and not np.shares_memory(copied.X, adata.X)
    np.testing.assert_array_equal(copied.X, counts())
    assert copied.obs["batch"].tolist() == adata.obs["batch"].tolist()


# Import cost.


def test_import_pydaf_does_not_import_the_facade() -> None:
    code = ("import sys, pydaf; assert 'pydaf.interop.anndata_facade' not in sys.modules; "
            "assert 'anndata' not in sys.modules; import pydaf.interop; "
            "assert 'pydaf.interop.anndata_facade' not in sys.modules; "
            "assert pydaf.DafAnnData is pydaf.interop.DafAnnData; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "ok", result.stderr


def test_a_reader_a_read_only_wrapper_or_a_view_backs_it_and_bad_axes_are_refused() -> None:
    daf = pydaf.example_cells_daf()
    for reader in (daf, daf.read_only(), pydaf.viewer(daf)):
        adata = DafAnnData(reader, obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        assert adata.daf is reader and adata.shape == (856, 683) and adata.is_read_only == (reader is not daf)
    with pytest.raises(pydaf.DafMissingError, match="missing axis: cells"):
        DafAnnData(daf, obs_axis="cells", var_axis="gene", x_matrix="UMIs")
    with pytest.raises(pydaf.DafValueError, match="the same axis: cell"):
        DafAnnData(daf, obs_axis="cell", var_axis="cell", x_matrix="UMIs")


def test_the_docs_page_runs() -> None:
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parent.parent / "docs" / "anndata_facade.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0
