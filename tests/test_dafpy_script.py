"""A dafpy user's script, written against dafpy 0.3.0's API and run through ``pydaf.dafpy``: every value it reads is
compared with what pydaf's own API gives for the same data (factories, reads, queries, views, copies, a chain, and
the AnnData facade into a scanpy step)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
import pydaf.dafpy as dp
from pydaf.interop import daf_as_anndata


def _equal(left: object, right: object) -> bool:
    if sp.issparse(left) or sp.issparse(right):
        return sp.issparse(left) and sp.issparse(right) and (left != right).nnz == 0 and left.shape == right.shape
    return np.array_equal(np.asarray(left), np.asarray(right))


def _dafpy_script(directory: str) -> dict[str, object]:
    """What a dafpy user writes (dafpy's names, keywords and return forms); returns what it read."""
    seen: dict[str, object] = {}
    cells = dp.example_cells_daf()
    metacells = dp.example_metacells_daf()

    # Factories: persistent copies in each format, reopened by path.
    stored = dp.h5df(f"{directory}/cells.h5df", "w+", name="stored!")
    dp.copy_all(source=cells, destination=stored)
    files = dp.files_daf(f"{directory}/metacells.daf", "w+", name="metacells!")
    dp.copy_all(source=metacells, destination=files)
    reopened = dp.open_daf(f"{directory}/cells.h5df")
    seen["reopened type"] = type(reopened).__name__

    # Reads.
    seen["organism"] = reopened.get_scalar("organism")
    seen["scalars"] = set(reopened.scalars_set())
    seen["axes"] = set(reopened.axes_set())
    seen["cells"] = reopened.axis_np_vector("cell")
    seen["n_genes"] = reopened.axis_length("gene")
    seen["donor"] = reopened.get_np_vector("cell", "donor")
    seen["age"] = reopened.get_pd_vector("donor", "age")
    seen["missing"] = reopened.get_np_vector("cell", "no_such", default=None)
    seen["UMIs"] = reopened.get_np_matrix("cell", "gene", "UMIs")
    seen["UMIs frame"] = reopened.get_pd_matrix("gene", "cell", "UMIs")
    genes = reopened.axis_np_vector("gene")
    seen["indices"] = reopened.axis_np_indices("gene", [genes[5], genes[2]])

    # Queries, as strings and as dafpy's builders.
    seen["donor ages"] = reopened["@ cell : donor : age"]
    seen["built"] = reopened.get_np_query(dp.Axis("cell") | dp.LookupVector("donor") | dp.LookupVector("age"))
    seen["total UMIs"] = reopened.get_np_query("@ cell @ gene :: UMIs >| Sum")
    seen["frame"] = reopened.get_pd_frame("donor", ["age", "sex"])

    # A view, and a chain with a new property over the read-only file.
    view = dp.viewer(reopened, name="view!", axes={"obs": "@ cell", "var": "@ gene"},
                     data={dp.ALL_SCALARS: None, ("obs", "var", "X"): ":: UMIs"})
    seen["view X"] = view.get_np_matrix("obs", "var", "X")
    seen["view axes"] = set(view.axes_set())
    chain = dp.chain_writer([reopened, dp.memory_daf(name="new!")], name="chain!")
    chain.set_vector("cell", "total", seen["total UMIs"])
    seen["chain total"] = chain.get_np_vector("cell", "total")

    # The AnnData facade into a scanpy step.
    import scanpy as sc

    adata = reopened.as_anndata(obs_axis="cell", var_axis="gene", x_matrix="UMIs")
    seen["adata shape"] = adata.shape
    seen["adata obs_names"] = list(adata.obs_names)
    seen["normalized"] = sc.pp.normalize_total(adata, target_sum=1e4, inplace=False)["X"]
    return seen


@pytest.mark.filterwarnings("ignore::FutureWarning")  # (scanpy's own deprecations)
def test_a_dafpy_script_reads_what_pydaf_reads(tmp_path):
    pytest.importorskip("scanpy")
    import scanpy as sc

    seen = _dafpy_script(str(tmp_path))
    own = pydaf.H5df(str(tmp_path / "cells.h5df"), "r")
    cells = pydaf.example_cells_daf()

    assert seen["reopened type"] == "DafReadOnly"
    assert seen["organism"] == own.get_scalar("organism") == "human" and type(seen["organism"]) is str
    assert seen["scalars"] == set(own.scalars_set()) and seen["axes"] == set(own.axes_set())
    assert list(seen["cells"]) == list(own.axis_vector("cell"))
    assert seen["n_genes"] == own.axis_length("gene") and type(seen["n_genes"]) is int
    assert list(seen["donor"]) == list(own.get_vector("cell", "donor"))
    age = seen["age"]
    assert isinstance(age, pd.Series)  # (unnamed, as dafpy returns it)
    assert list(age.index) == list(own.axis_vector("donor")) and _equal(age.to_numpy(), own.get_vector("donor", "age"))
    assert seen["missing"] is None
    assert list(seen["indices"]) == [5, 2]
    assert _equal(seen["UMIs"], own.get_matrix("cell", "gene", "UMIs")) and not seen["UMIs"].flags.writeable
    assert _equal(seen["UMIs"], cells.get_matrix("cell", "gene", "UMIs"))
    frame = seen["UMIs frame"]
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == list(own.axis_vector("gene")) and list(frame.columns) == list(own.axis_vector("cell"))
    assert _equal(frame.to_numpy(), own.get_matrix("gene", "cell", "UMIs"))

    donor_ages = seen["donor ages"]
    assert isinstance(donor_ages, pd.Series)
    assert _equal(donor_ages.to_numpy(), own.get_query("@ cell : donor : age"))
    assert list(donor_ages.index) == list(own.axis_vector("cell"))
    assert _equal(seen["built"], own.get_query("@ cell : donor : age"))
    assert _equal(seen["total UMIs"], own.get_query("@ cell @ gene :: UMIs >| Sum"))
    expected_frame = own.get_frame("donor", ["age", "sex"])
    got_frame = seen["frame"]
    assert list(got_frame.columns) == list(expected_frame.columns)
    for column in expected_frame.columns:
        assert _equal(got_frame[column].to_numpy(), expected_frame[column].to_numpy())

    assert _equal(seen["view X"], own.get_matrix("cell", "gene", "UMIs")) and seen["view axes"] == {"obs", "var"}
    assert _equal(seen["chain total"], own.get_query("@ cell @ gene :: UMIs >| Sum"))

    assert seen["adata shape"] == (own.axis_length("cell"), own.axis_length("gene"))
    assert seen["adata obs_names"] == list(own.axis_vector("cell"))
    plain = daf_as_anndata(own, obs_is="cell", var_is="gene", X_is="UMIs")
    expected = sc.pp.normalize_total(plain, target_sum=1e4, inplace=False)["X"]
    assert np.allclose(np.asarray(seen["normalized"].todense() if sp.issparse(seen["normalized"]) else
                                  seen["normalized"]),
                       np.asarray(expected.todense() if sp.issparse(expected) else expected))


def test_a_dafpy_script_over_a_view_gives_pydafs_values(tmp_path):
    """The mapped file shared by both APIs, builder and grouped queries, a masked view, and its facade in scanpy."""
    sc = pytest.importorskip("scanpy")
    path = str(tmp_path / "cells.h5df")
    writer = dp.h5df(path, "w", name="cells!")
    dp.copy_all(source=dp.example_cells_daf(), destination=writer)
    cells = dp.open_daf(path, name="dafpy!")
    native = pydaf.open_daf(path, name="pydaf!")

    assert cells.description().partition("scalars:")[2] == native.description().partition("scalars:")[2]
    umis = cells.get_np_matrix("gene", "cell", "UMIs")
    assert np.shares_memory(umis, native.get_matrix("gene", "cell", "UMIs"))  # the same mapped file
    query = dp.Axis("cell") | dp.Axis("gene") | dp.LookupMatrix("UMIs") | dp.ReduceToColumn(dp.Sum())
    assert np.array_equal(query | cells.get_np_query(), native.get_np_query(str(query)))
    grouped = cells["@ cell @ gene :: UMIs -/ donor >- Mean"]
    assert np.array_equal(grouped.to_numpy(), native["@ cell @ gene :: UMIs -/ donor >- Mean"].to_numpy())
    view = dp.viewer(cells, axes={"obs": "@ cell [ donor = N89 ]", "var": "@ gene"},
                     data={("obs", "var", "X"): ":: UMIs"})
    native_view = pydaf.viewer(native, axes=[("obs", "@ cell [ donor = N89 ]"), ("var", "@ gene")],
                               data=[(("obs", "var", "X"), ":: UMIs")])
    assert np.array_equal(view.get_np_matrix("obs", "var", "X"), native_view.get_matrix("obs", "var", "X"))

    adata = view.as_anndata(obs_axis="obs", var_axis="var", x_matrix="X")
    assert adata.daf is view
    normalized = sc.pp.normalize_total(adata, target_sum=100, inplace=False)["X"]
    x = np.asarray(native_view.get_matrix("obs", "var", "X"), dtype=np.float64)
    totals = x.sum(axis=1, keepdims=True)
    assert np.allclose(np.asarray(normalized), x / np.where(totals == 0, 1, totals) * 100)
