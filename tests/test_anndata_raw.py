"""AnnData's ``raw`` kept as plain Daf data (``pydaf/interop/anndata.py``, ``content.py``): the axis
``raw_<var_is>`` of ``raw.var_names`` with raw.var's columns as vectors, raw.X as the matrix ``X_is`` of it and the
obs axis, raw.varm's elements over axes ``raw_varm_<key>``, and the scalar ``raw_is`` naming the axis. Round trips
file -> file and memory -> memory, compared exactly with ``anndata.read_h5ad`` (X format, dtype, values; raw.var's
names, index name, column order, dtypes, categoricals, nullable columns; raw.varm), scanpy's pbmc68k_reduced (anndata
< 0.7 layout: ``raw.X``/``raw.var``), the opt-outs, name collisions (reported, never overwritten), queries over the
raw axis and ``check_daf``."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import warnings
from typing import Any

import anndata
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf

from .test_anndata_obsm import messages_of

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
N_OBS = 6
VAR_NAMES = ["g1", "g3", "g4"]
RAW_VAR_NAMES = ["g0", "g1", "g2", "g3", "g4", "g5", "g6"]  # a superset of the var names
FORMATS = ("csr", "csc", "dense")


def make_adata(raw_format: str = "csr") -> anndata.AnnData:
    """An AnnData whose raw has its own X (``raw_format``), a var superset with a categorical (ordered categories,
    a missing value), a float and a nullable integer column in non-alphabetical order, a named index, and a varm."""
    rng = np.random.default_rng(11)
    adata = anndata.AnnData(sp.random(N_OBS, len(VAR_NAMES), density=0.5, format="csr", dtype=np.float32,
                                      random_state=4))
    adata.obs_names = [f"cell{index}" for index in range(N_OBS)]
    adata.var_names = VAR_NAMES
    adata.obs["batch"] = pd.Categorical(["b", "a", "b", "a", "b", "a"], categories=["b", "a"])
    counts = sp.random(N_OBS, len(RAW_VAR_NAMES), density=0.4, format="csr", dtype=np.float64, random_state=5)
    counts.data[:] = rng.integers(1, 50, counts.nnz)
    X = {"csr": counts, "csc": counts.tocsc(), "dense": counts.toarray().astype(np.int32)}[raw_format]
    raw = anndata.AnnData(X)
    raw.obs_names = adata.obs_names
    raw.var_names = pd.Index(RAW_VAR_NAMES, name="gene_symbol")
    raw.var["score"] = rng.standard_normal(len(RAW_VAR_NAMES))
    raw.var["kind"] = pd.Categorical(["mt", "rb", None, "mt", "other", "rb", "mt"], categories=["rb", "mt", "other"],
                                     ordered=True)
    raw.var["n_cells"] = pd.array([3, None, 5, 1, 0, None, 2], dtype="Int64")
    raw.varm["PCs"] = rng.standard_normal((len(RAW_VAR_NAMES), 2))
    adata.raw = raw
    return adata


def written(tmp_path: pathlib.Path, raw_format: str = "csr") -> pathlib.Path:
    path = tmp_path / f"raw_{raw_format}.h5ad"
    make_adata(raw_format).write_h5ad(path)
    return path


def check_same_raw(got: anndata.AnnData, expected: anndata.AnnData) -> None:
    """The same raw: X (type: CSR, CSC or dense; dtype; values), raw.var (names, index name, column order, dtypes
    incl. categories and their order, missing values), raw.varm (keys, types, dtypes, values)."""
    assert got.raw is not None and expected.raw is not None
    assert type(got.raw.X) is type(expected.raw.X), (type(got.raw.X), type(expected.raw.X))
    assert got.raw.X.dtype == expected.raw.X.dtype
    if sp.issparse(expected.raw.X):
        assert got.raw.X.format == expected.raw.X.format
        assert got.raw.X.shape == expected.raw.X.shape and (got.raw.X != expected.raw.X).nnz == 0
        ordered = expected.raw.X.sorted_indices()  # (Daf sorts each column's entries, as anndata allows unsorted)
        assert np.array_equal(got.raw.X.indptr, ordered.indptr) and np.array_equal(got.raw.X.indices, ordered.indices)
        assert np.array_equal(got.raw.X.data, ordered.data)
    else:
        assert np.array_equal(got.raw.X, expected.raw.X)
    pd.testing.assert_frame_equal(got.raw.var, expected.raw.var, check_exact=True)
    assert got.raw.var.index.name == expected.raw.var.index.name
    assert sorted(got.raw.varm.keys()) == sorted(expected.raw.varm.keys())
    for key in expected.raw.varm:
        assert got.raw.varm[key].dtype == expected.raw.varm[key].dtype
        assert np.array_equal(got.raw.varm[key], expected.raw.varm[key]), key


def dense(matrix: Any) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)


def run_pydaf(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True,
                          cwd=REPOSITORY, env={**os.environ, "PYTHONWARNINGS": "default"})


# What is stored.


def test_raw_is_stored_as_plain_daf_data(tmp_path):
    path = written(tmp_path)
    daf, messages = messages_of(lambda: h5ad_as_daf(path, obs_is="cell", var_is="gene", X_is="UMIs",
                                                    progress=False))
    assert not [message for message in messages if "raw" in message], messages
    expected = anndata.read_h5ad(path)
    assert daf.get_scalar("raw_is") == "raw_gene"
    assert daf.axis_vector("raw_gene").tolist() == RAW_VAR_NAMES
    assert daf.get_scalar("raw_gene_index_name") == "gene_symbol"
    # raw.X: named as X, CSR stored (raw_gene, cell) column-major as X is (the file's arrays, as they are)
    assert daf.matrices_set("raw_gene", "cell", relayout=False) == {"UMIs"}
    assert not daf.has_matrix("cell", "raw_gene", "UMIs", relayout=False)
    assert np.array_equal(dense(daf.get_matrix("cell", "raw_gene", "UMIs")), expected.raw.X.toarray())
    # raw.var's columns: the var-column conventions (categories in their order, ordered, nullable, column order)
    assert daf.get_vector("raw_gene", "kind").tolist() == ["mt", "rb", "", "mt", "other", "rb", "mt"]
    assert daf.get_scalar("raw_gene_kind_categories") == "rb\nmt\nother"
    assert bool(daf.get_scalar("raw_gene_kind_ordered")) is True
    assert daf.get_scalar("raw_gene_n_cells_nullable") == "Int64"
    assert np.isnan(daf.get_vector("raw_gene", "n_cells")[[1, 5]]).all()
    assert daf.get_scalar("raw_gene_column_order") == "score\nkind\nn_cells"
    assert daf.get_vector("raw_gene", "score").tolist() == expected.raw.var["score"].tolist()
    # raw.varm: an axis of its own, as varm's
    assert daf.get_scalar("raw_varm_PCs_encoding") == "array"
    assert np.array_equal(daf.get_matrix("raw_gene", "raw_varm_PCs", "PCs"), expected.raw.varm["PCs"])
    assert pydaf.check_daf(daf) == []


def test_queries_over_the_raw_axis(tmp_path):
    path = written(tmp_path)
    expected = anndata.read_h5ad(path)
    daf = h5ad_as_daf(path, str(tmp_path / "x.h5df"), obs_is="cell", var_is="gene", X_is="UMIs", progress=False)
    sums = daf.get_np_query("@ raw_gene @ cell :: UMIs >| Sum")
    assert np.allclose(sums, np.asarray(expected.raw.X.sum(axis=0)).ravel(), rtol=1e-12, atol=0)
    assert daf.get_np_query("@ raw_gene [ kind = mt ]").tolist() == ["g0", "g3", "g6"]
    assert daf.get_np_query("@ raw_gene [ kind = mt ] : score").tolist() == \
        expected.raw.var["score"][expected.raw.var["kind"] == "mt"].tolist()


# Round trips.


@pytest.mark.parametrize("raw_format", FORMATS)
def test_h5ad_file_round_trip_keeps_raw(tmp_path, raw_format):
    path = written(tmp_path, raw_format)
    expected = anndata.read_h5ad(path)
    daf = h5ad_as_daf(path, str(tmp_path / "x.h5df"), progress=False)
    # stored in the layout the file holds, as X: CSR and dense as (raw_var, obs), CSC as (obs, raw_var)
    layout = ("obs", "raw_var") if raw_format == "csc" else ("raw_var", "obs")
    assert daf.has_matrix(*layout, "X", relayout=False)
    assert not daf.has_matrix(*reversed(layout), "X", relayout=False)
    assert pydaf.check_daf(daf) == []
    daf_as_h5ad(pydaf.open_daf(str(tmp_path / "x.h5df")), tmp_path / "back.h5ad", progress=False)
    again = anndata.read_h5ad(tmp_path / "back.h5ad")
    check_same_raw(again, expected)
    assert again.var_names.tolist() == VAR_NAMES and "raw_is" not in again.uns
    assert not any(key.startswith("raw_") for key in again.uns), list(again.uns)
    with h5py.File(tmp_path / "back.h5ad", "r") as file:  # anndata's current layout
        assert file["raw"].attrs["encoding-type"] == "raw" and set(file["raw"]) == {"X", "var", "varm"}


@pytest.mark.parametrize("raw_format", FORMATS)
def test_memory_round_trip_keeps_raw(tmp_path, raw_format):
    expected = anndata.read_h5ad(written(tmp_path, raw_format))
    daf, messages = messages_of(lambda: anndata_as_daf(expected, obs_is="cell", var_is="gene"))
    assert not [message for message in messages if "raw" in message], messages
    assert pydaf.check_daf(daf) == []
    again = daf_as_anndata(daf)
    # as X: a copy's sparse matrices are CSR (a CSC raw.X is relaid out in memory); the view keeps CSC
    check_same_raw(again, expected if raw_format != "csc" else csr_raw(expected))
    data = again.raw.X.data if sp.issparse(again.raw.X) else again.raw.X
    assert data.flags.writeable
    check_same_raw(daf_as_anndata(daf, copy=False), expected)


def csr_raw(adata: anndata.AnnData) -> anndata.AnnData:
    copied = adata.copy()
    copied.raw = anndata.AnnData(copied.raw.X.tocsr(), var=copied.raw.var, varm=dict(copied.raw.varm))
    return copied


def test_relayout_stores_raw_both_ways(tmp_path):
    path = written(tmp_path)
    daf = h5ad_as_daf(path, relayout=True, progress=False)
    assert daf.has_matrix("obs", "raw_var", "X", relayout=False) and daf.has_matrix("raw_var", "obs", "X",
                                                                                     relayout=False)
    check_same_raw(daf_as_anndata(daf), anndata.read_h5ad(path))


def test_mapped_raw_is_writable_by_default_and_zero_copy_as_a_view(tmp_path):
    path = written(tmp_path, "dense")
    h5ad_as_daf(path, str(tmp_path / "x.h5df"), progress=False)
    with pydaf.H5df(str(tmp_path / "x.h5df"), "r") as daf:
        owned = daf_as_anndata(daf)
        assert owned.raw.X.flags.writeable
        owned.raw.X[0, 0] += 1  # (scanpy's in-place steps work)
        view = daf_as_anndata(daf, copy=False)
        assert np.shares_memory(view.raw.X, daf.get_matrix("raw_var", "obs", "X"))
    h5ad_as_daf(written(tmp_path, "csr"), str(tmp_path / "y.h5df"), progress=False)
    with pydaf.H5df(str(tmp_path / "y.h5df"), "r") as daf:
        view = daf_as_anndata(daf, copy=False)
        assert sp.issparse(view.raw.X) and view.raw.X.format == "csr"
        assert np.shares_memory(view.raw.X.data, daf.get_matrix("raw_var", "obs", "X").data)


def test_scanpy_pbmc68k_reduced_raw_round_trips(tmp_path):
    import scanpy as sc

    path = pathlib.Path(sc.__file__).parent / "datasets" / "10x_pbmc68k_reduced.h5ad"
    with h5py.File(path, "r") as file:  # anndata < 0.7: raw.X and raw.var are top-level elements
        assert {"raw.X", "raw.var"} <= set(file) and "raw" not in file
    expected = anndata.read_h5ad(path)
    daf, messages = messages_of(lambda: h5ad_as_daf(path, str(tmp_path / "p.h5df"), progress=False))
    assert not [message for message in messages if "raw" in message], messages
    assert pydaf.check_daf(daf) == []
    assert daf.get_scalar("raw_is") == "raw_var" and daf.axis_length("raw_var") == 765
    assert daf.get_scalar("raw_var_index_name") == "index"
    daf_as_h5ad(pydaf.open_daf(str(tmp_path / "p.h5df")), tmp_path / "back.h5ad", progress=False)
    again = anndata.read_h5ad(tmp_path / "back.h5ad")
    check_same_raw(again, expected)
    assert again.raw.X.nnz == expected.raw.X.nnz == 174400
    check_same_raw(daf_as_anndata(anndata_as_daf(expected, unsupported_handler="ignore")), expected)


# Opt-outs, collisions, records.


def test_raw_false_skips_raw_without_a_report(tmp_path):
    path = written(tmp_path)
    daf, messages = messages_of(lambda: h5ad_as_daf(path, raw=False, progress=False))
    assert messages == [] and "raw_var" not in daf.axes_set() and not daf.has_scalar("raw_is")
    daf, messages = messages_of(lambda: anndata_as_daf(anndata.read_h5ad(path), raw=False))
    assert messages == [] and daf.axes_set() == {"obs", "var"}
    assert daf_as_anndata(daf).raw is None


def test_cli_convert_keeps_raw_and_no_raw_skips_it(tmp_path):
    path = written(tmp_path)
    done = run_pydaf("convert", str(path), str(tmp_path / "a.h5df"), "--no-progress")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "raw_var" in pydaf.open_daf(str(tmp_path / "a.h5df"), "r").axes_set()
    done = run_pydaf("convert", str(tmp_path / "a.h5df"), str(tmp_path / "b.h5ad"), "--no-progress")
    assert done.returncode == 0, done.stderr
    check_same_raw(anndata.read_h5ad(tmp_path / "b.h5ad"), anndata.read_h5ad(path))
    done = run_pydaf("convert", str(path), str(tmp_path / "c.h5df"), "--no-progress", "--no-raw")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "raw_var" not in pydaf.open_daf(str(tmp_path / "c.h5df"), "r").axes_set()
    done = run_pydaf("convert", str(tmp_path / "a.h5df"), str(tmp_path / "d.h5ad"), "--no-progress", "--no-raw")
    assert done.returncode == 1 and "--no-raw only applies to conversions from .h5ad" in done.stderr


def test_an_existing_raw_axis_is_reported_not_overwritten(tmp_path):
    destination = pydaf.MemoryDaf(name="target!").add_axis("raw_var", ["mine"])
    _, messages = messages_of(lambda: h5ad_as_daf(written(tmp_path), destination, progress=False))
    assert "unsupported element: raw (its axis: raw_var already exists)" in messages
    assert destination.axis_vector("raw_var").tolist() == ["mine"] and not destination.has_scalar("raw_is")
    assert destination.matrices_set("obs", "var") == {"X"} and not destination.has_axis("raw_varm_PCs")
    with pytest.raises(pydaf.DafUnsupportedError, match="raw_var already exists"):
        h5ad_as_daf(written(tmp_path), pydaf.MemoryDaf().add_axis("raw_var", ["mine"]), unsupported_handler="error",
                    progress=False)


def test_an_obs_axis_named_as_the_raw_axis_is_reported(tmp_path):
    daf, messages = messages_of(lambda: h5ad_as_daf(written(tmp_path), obs_is="raw_gene", var_is="gene",
                                                    progress=False))
    assert "unsupported element: raw (its axis: raw_gene already exists)" in messages
    assert daf.axis_vector("raw_gene").tolist() == [f"cell{index}" for index in range(N_OBS)]
    assert not daf.has_scalar("raw_is")


def test_an_uns_raw_is_is_reported_and_kept(tmp_path):
    adata = anndata.read_h5ad(written(tmp_path))
    adata.uns["raw_is"] = "mine"
    daf, messages = messages_of(lambda: anndata_as_daf(adata))
    assert "unsupported element: raw (its record scalar: raw_is already exists)" in messages
    assert daf.get_scalar("raw_is") == "mine" and "raw_var" not in daf.axes_set()
    again = daf_as_anndata(daf)  # a record naming no raw axis: a scalar as any other
    assert again.raw is None and again.uns["raw_is"] == "mine"


def test_duplicate_raw_var_names_are_reported_and_the_rest_kept(tmp_path):
    adata = make_adata()
    raw = adata.raw.to_adata()
    raw.var_names = ["g0", "g1", "g1", "g3", "g4", "g5", "g6"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (anndata warns of the non-unique names)
        adata.raw = raw
    daf, messages = messages_of(lambda: anndata_as_daf(adata))
    assert "unsupported element: raw (duplicate raw/var names (Daf axis entries are unique))" in messages
    assert daf.axes_set() == {"obs", "var"} and daf.matrices_set("obs", "var") == {"X"}


def test_both_raw_layouts_in_one_file_are_refused(tmp_path):
    path = written(tmp_path)
    with h5py.File(path, "a") as file:
        file.copy(file["raw/var"], "raw.var")
    with pytest.raises(pydaf.DafFormatError, match=r"both raw and raw\.var"):
        h5ad_as_daf(path, progress=False)


def test_raw_x_named_as_x_on_import(tmp_path):
    """raw.X is the matrix named as X was on import; exporting X under another name still finds it."""
    path = written(tmp_path)
    daf = h5ad_as_daf(path, X_is="UMIs", progress=False)
    assert daf.matrices_set("obs", "raw_var") == {"UMIs"}
    daf.set_matrix("obs", "var", "log", np.zeros((N_OBS, len(VAR_NAMES))))
    again = daf_as_anndata(daf, X_is="log")
    check_same_raw(again, anndata.read_h5ad(path))
    assert again.X.tolist() == np.zeros((N_OBS, len(VAR_NAMES))).tolist()


def test_a_raw_x_of_the_wrong_shape_is_a_format_error(tmp_path):
    path = written(tmp_path, "dense")
    with h5py.File(path, "a") as file:
        del file["raw/X"]
        file["raw/X"] = np.zeros((N_OBS + 1, len(RAW_VAR_NAMES)), dtype=np.int32)
        file["raw/X"].attrs["encoding-type"], file["raw/X"].attrs["encoding-version"] = "array", "0.2.0"
    destination = pydaf.MemoryDaf(name="target!")
    with pytest.raises(pydaf.DafFormatError, match=r"(?s)the shape: 7 x 7\nof the AnnData matrix: raw/X\n.*6 x 7"):
        h5ad_as_daf(path, destination, progress=False)
    assert destination.axes_set() == set()  # (checked before anything is written)


def test_legacy_raw_varm_round_trips(tmp_path):
    """anndata < 0.7's top-level ``raw.varm`` (a compound dataset, a field per element), as anndata reads it."""
    import scanpy as sc

    path = tmp_path / "legacy.h5ad"
    with h5py.File(pathlib.Path(sc.__file__).parent / "datasets" / "10x_pbmc68k_reduced.h5ad", "r") as source, \
            h5py.File(path, "w") as file:
        for name in source:
            source.copy(source[name], file, name)
        loadings = np.arange(765 * 3, dtype=np.float32).reshape(765, 3)
        file.create_dataset("raw.varm", data=np.array([(row,) for row in loadings], dtype=[("PCs", "<f4", (3,))]))
    expected = anndata.read_h5ad(path)
    assert np.array_equal(expected.raw.varm["PCs"], loadings)
    daf = h5ad_as_daf(path, str(tmp_path / "x.h5df"), unsupported_handler="ignore", progress=False)
    assert daf.get_scalar("raw_varm_PCs_encoding") == "array"
    daf_as_h5ad(pydaf.open_daf(str(tmp_path / "x.h5df")), tmp_path / "back.h5ad", progress=False)
    check_same_raw(anndata.read_h5ad(tmp_path / "back.h5ad"), expected)
