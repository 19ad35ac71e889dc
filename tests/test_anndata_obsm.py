"""AnnData's ``obsm``/``varm`` kept as Daf matrices over named extra axes (``pydaf/interop/axis_arrays.py``): import
from files, from memory and by ``pydaf convert``, the opt-outs, what is still reported, name collisions, and the
export back to ``obsm[key]``/``varm[key]`` exactly (keys, dtypes, values, dense/CSR/CSC, DataFrames with their
columns), checked against anndata's own reading of real files (scanpy's pbmc68k_reduced, the shared fixtures)."""

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

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPOSITORY.parent / "shared" / "fixtures" / "anndata"
N_OBS, N_VAR = 7, 5
KEPT = {("obsm", "X_umap"), ("obsm", "X_pca"), ("obsm", "spatial"), ("obsm", "X_scvi_csc"),
        ("obsm", "protein_expression"), ("varm", "PCs"), ("varm", "loadings_csr")}


def make_adata() -> anndata.AnnData:
    """An AnnData with every kind of obsm/varm element that is kept."""
    rng = np.random.default_rng(23)
    adata = anndata.AnnData(rng.random((N_OBS, N_VAR)).astype(np.float32))
    adata.obs_names = [f"cell{index}" for index in range(N_OBS)]
    adata.var_names = [f"gene{index}" for index in range(N_VAR)]
    adata.obsm["X_umap"] = rng.random((N_OBS, 2)).astype(np.float32)
    adata.obsm["X_pca"] = rng.standard_normal((N_OBS, 3))
    adata.obsm["spatial"] = sp.random(N_OBS, 4, density=0.4, format="csr", dtype=np.float64, random_state=1)
    adata.obsm["X_scvi_csc"] = sp.random(N_OBS, 3, density=0.5, format="csc", dtype=np.float32, random_state=2)
    adata.obsm["protein_expression"] = pd.DataFrame(rng.integers(0, 500, (N_OBS, 3)), index=adata.obs_names,
                                                    columns=["CD3", "CD8a", "CD4"])  # not in sorted order
    adata.varm["PCs"] = rng.standard_normal((N_VAR, 3))
    adata.varm["loadings_csr"] = sp.random(N_VAR, 2, density=0.5, format="csr", dtype=np.int32, random_state=3)
    return adata


def messages_of(action: Any) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = action()
    return result, [str(warning.message).splitlines()[0] for warning in caught
                    if issubclass(warning.category, pydaf.interop.content.UnsupportedElementWarning)]


def check_same_element(got: Any, expected: Any, where: str) -> None:
    """The same obsm/varm element: type, format, dtype, shape, values (NaN equal to NaN), DataFrame columns."""
    assert type(got) is type(expected), (where, type(got), type(expected))
    if isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
        assert list(got.columns) == list(expected.columns) and list(got.dtypes) == list(expected.dtypes), where
        return
    assert got.dtype == expected.dtype and got.shape == expected.shape, (where, got.dtype, expected.dtype)
    if sp.issparse(expected):
        assert got.format == expected.format, where
        got, expected = got.toarray(), expected.toarray()
    assert np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"), where


def check_same_axis_arrays(got: anndata.AnnData, expected: anndata.AnnData) -> None:
    for member in ("obsm", "varm"):
        assert sorted(getattr(got, member).keys()) == sorted(getattr(expected, member).keys()), member
        for key, value in getattr(expected, member).items():
            check_same_element(getattr(got, member)[key], value, f"{member}/{key}")


def check_daf_holds_axis_arrays(daf: pydaf.DafReader, adata: anndata.AnnData, *, obs: str = "obs",
                                var: str = "var") -> None:
    """Each element is the matrix (obs, obsm_<key>) / (var, varm_<key>) named <key>, stored in that layout only,
    with the element's dtype and values, its axis the column names, its record its encoding."""
    for member, rows in (("obsm", obs), ("varm", var)):
        for key, value in getattr(adata, member).items():
            axis = f"{member}_{key}"
            if isinstance(value, pd.DataFrame):
                entries, encoding, dense = list(value.columns), "dataframe", value.to_numpy()
            else:
                entries = [str(index) for index in range(value.shape[1])]
                encoding = f"{value.format}_matrix" if sp.issparse(value) else "array"
                dense = value.toarray() if sp.issparse(value) else np.asarray(value)
            assert daf.axis_vector(axis).tolist() == entries, axis
            assert daf.get_scalar(f"{axis}_encoding") == encoding, axis
            assert daf.matrices_set(rows, axis) == {key}
            assert daf.has_matrix(rows, axis, key, relayout=False)
            assert not daf.has_matrix(axis, rows, key, relayout=False)  # one layout: (rows, the element's axis)
            stored = daf.get_stored_matrix(rows, axis, key)
            assert isinstance(stored, pydaf.SparseMatrixCSC) == sp.issparse(value), axis
            got = daf.get_matrix(rows, axis, key)
            got = got.toarray() if sp.issparse(got) else np.asarray(got)
            assert got.dtype == dense.dtype and np.array_equal(got, dense, equal_nan=dense.dtype.kind == "f"), axis
            query = daf.get_np_query(f"@ {rows} @ {axis} :: {key}")
            query = query.toarray() if sp.issparse(query) else np.asarray(query)
            assert np.array_equal(query, dense, equal_nan=dense.dtype.kind == "f"), axis


def check_plain_daf(daf: pydaf.DafReader) -> None:
    """What Julia's Daf reads: pydaf's check passes, every name is valid, every axis' entries are unique."""
    assert pydaf.check_daf(daf) == []
    for name in [*daf.axes_set(), *daf.scalars_set()]:
        assert pydaf.core.names.is_valid_name(name), name
    for axis in daf.axes_set():
        entries = daf.axis_vector(axis).tolist()
        assert len(set(entries)) == len(entries) and all(isinstance(entry, str) for entry in entries), axis
        for rows in daf.axes_set():
            for name in daf.matrices_set(rows, axis):
                assert pydaf.core.names.is_valid_name(name), name


def run_pydaf(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True,
                          cwd=REPOSITORY, env={**os.environ, "PYTHONWARNINGS": "default"})


# Round trips.


def test_h5ad_file_round_trip_is_exact(tmp_path):
    adata = make_adata()
    adata.write_h5ad(tmp_path / "a.h5ad")
    expected = anndata.read_h5ad(tmp_path / "a.h5ad")
    check_same_axis_arrays(expected, adata)  # (what anndata itself reads back)
    daf, messages = messages_of(lambda: h5ad_as_daf(tmp_path / "a.h5ad", str(tmp_path / "a.h5df"), obs_is="cell",
                                                    var_is="gene", progress=False))
    assert messages == []
    daf = pydaf.open_daf(str(tmp_path / "a.h5df"), "r")
    assert daf.axes_set() == {"cell", "gene"} | {f"{member}_{key}" for member, key in KEPT}
    check_daf_holds_axis_arrays(daf, expected, obs="cell", var="gene")
    check_plain_daf(daf)
    assert daf.get_np_query("@ cell @ obsm_X_umap :: X_umap").dtype == np.float32
    assert daf.get_np_query("@ cell :: protein_expression @ obsm_protein_expression = CD8a").tolist() == \
        expected.obsm["protein_expression"]["CD8a"].tolist()

    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    back = anndata.read_h5ad(tmp_path / "back.h5ad")
    check_same_axis_arrays(back, expected)
    assert set(back.uns) == {"obs_is", "var_is"}  # the records are not copied into uns
    assert set(back.layers) == set() and set(back.obsp) == set() and set(back.varp) == set()
    with h5py.File(tmp_path / "back.h5ad", "r") as file:
        assert file["obsm/spatial"].attrs["encoding-type"] == "csr_matrix"
        assert file["obsm/X_scvi_csc"].attrs["encoding-type"] == "csc_matrix"
        assert file["obsm/protein_expression"].attrs["encoding-type"] == "dataframe"
        assert list(file["obsm/protein_expression"].attrs["column-order"]) == ["CD3", "CD8a", "CD4"]

    in_memory = daf_as_anndata(daf)
    check_same_axis_arrays(in_memory, expected)
    assert in_memory.obsm["X_umap"].flags.writeable and in_memory.obsm["spatial"].data.flags.writeable
    in_memory.obsm["X_umap"][0, 0] = -1.0  # a copy: the data set is unchanged
    assert daf.get_matrix("cell", "obsm_X_umap", "X_umap")[0, 0] == expected.obsm["X_umap"][0, 0]


def test_in_memory_round_trip_is_exact(tmp_path):
    adata = make_adata()
    daf, messages = messages_of(lambda: anndata_as_daf(adata, obs_is="cell", var_is="gene"))
    assert messages == []
    check_daf_holds_axis_arrays(daf, adata, obs="cell", var="gene")
    check_plain_daf(daf)
    check_same_axis_arrays(daf_as_anndata(daf), adata)
    # Memory -> file -> anndata, and file -> memory.
    daf_as_h5ad(daf, tmp_path / "m.h5ad", progress=False)
    check_same_axis_arrays(anndata.read_h5ad(tmp_path / "m.h5ad"), adata)
    again = h5ad_as_daf(tmp_path / "m.h5ad", progress=False)
    check_same_axis_arrays(daf_as_anndata(again), adata)


@pytest.mark.parametrize("destination", ["memory", "x.h5df", "x.daf", "x.daf.zip"])
def test_every_destination_holds_the_same(tmp_path, destination):
    adata = make_adata()
    adata.write_h5ad(tmp_path / "a.h5ad")
    target = None if destination == "memory" else str(tmp_path / destination)
    daf = h5ad_as_daf(tmp_path / "a.h5ad", target, progress=False)
    if target is not None:
        daf = pydaf.open_daf(target, "r")
    check_daf_holds_axis_arrays(daf, adata)
    check_plain_daf(daf)
    check_same_axis_arrays(daf_as_anndata(daf), adata)


def test_dtypes_are_kept(tmp_path):
    adata = anndata.AnnData(np.zeros((3, 2), dtype=np.float32))
    adata.obs_names, adata.var_names = ["a", "b", "c"], ["x", "y"]
    for dtype in (np.int8, np.uint16, np.int32, np.int64, np.uint64, np.float32, np.float64, bool):
        adata.obsm[f"m_{np.dtype(dtype).name}"] = (np.arange(6).reshape(3, 2) % 2).astype(dtype)
    adata.obsm["empty"] = np.zeros((3, 0), dtype=np.float32)
    adata.obsm["frame_f4"] = pd.DataFrame({"u": np.float32([1, 2, 3]), "v": np.float32([4, 5, np.nan])},
                                          index=adata.obs_names)
    adata.write_h5ad(tmp_path / "t.h5ad")
    daf = h5ad_as_daf(tmp_path / "t.h5ad", progress=False)
    assert daf.get_matrix("obs", "obsm_m_uint16", "m_uint16").dtype == np.uint16
    assert daf.get_matrix("obs", "obsm_frame_f4", "frame_f4").dtype == np.float32
    assert daf.axis_length("obsm_empty") == 0
    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    check_same_axis_arrays(anndata.read_h5ad(tmp_path / "back.h5ad"), anndata.read_h5ad(tmp_path / "t.h5ad"))
    check_same_axis_arrays(daf_as_anndata(anndata_as_daf(adata)), adata)


# Real files.


def scanpy_pbmc68k_reduced() -> pathlib.Path:
    scanpy = pytest.importorskip("scanpy")
    path = pathlib.Path(scanpy.__file__).parent / "datasets" / "10x_pbmc68k_reduced.h5ad"
    if not path.exists():
        pytest.skip(f"scanpy's pbmc68k_reduced is not at: {path}")
    return path


def test_pbmc68k_reduced_legacy_obsm_and_varm(tmp_path):
    path = scanpy_pbmc68k_reduced()
    with h5py.File(path, "r") as file:
        assert isinstance(file["obsm"], h5py.Dataset) and isinstance(file["varm"], h5py.Dataset)  # compound
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        expected = anndata.read_h5ad(path)
    assert set(expected.obsm) == {"X_pca", "X_umap"} and set(expected.varm) == {"PCs"}
    assert np.isnan(expected.varm["PCs"]).any()  # (NaN rows: NaN must stay NaN)
    daf, messages = messages_of(lambda: h5ad_as_daf(path, str(tmp_path / "pbmc.h5df"), obs_is="cell",
                                                    var_is="gene", progress=False))
    assert not any("obsm" in message or "varm" in message for message in messages), messages
    daf = pydaf.open_daf(str(tmp_path / "pbmc.h5df"), "r")
    check_daf_holds_axis_arrays(daf, expected, obs="cell", var="gene")
    check_plain_daf(daf)
    assert daf.get_np_query("@ cell @ obsm_X_pca :: X_pca").shape == (700, 50)
    assert daf.axis_vector("obsm_X_umap").tolist() == ["0", "1"]
    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    check_same_axis_arrays(anndata.read_h5ad(tmp_path / "back.h5ad"), expected)
    check_same_axis_arrays(daf_as_anndata(daf), expected)


def test_scanpy_pbmc68k_reduced_in_memory():
    scanpy = pytest.importorskip("scanpy")
    scanpy_pbmc68k_reduced()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        adata = scanpy.datasets.pbmc68k_reduced()
    daf = anndata_as_daf(adata, unsupported_handler="ignore")
    check_daf_holds_axis_arrays(daf, adata)
    check_same_axis_arrays(daf_as_anndata(daf), adata)


@pytest.mark.parametrize("name", ["sparse_test.h5ad", "small_test.h5ad", "anndata_canonical.h5ad",
                                  "anndata_nullable_strings.h5ad"])
def test_shared_fixtures(tmp_path, name):
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"the shared fixture {path} is not present")
    expected = anndata.read_h5ad(path)
    daf = h5ad_as_daf(path, str(tmp_path / "f.h5df"), unsupported_handler="ignore", progress=False)
    axes = {f"{member}_{key}" for member in ("obsm", "varm") for key in getattr(expected, member)}
    assert daf.axes_set() == {"obs", "var"} | axes
    if name == "sparse_test.h5ad":
        assert axes == {"obsm_X_umap", "varm_PCs"}
    check_daf_holds_axis_arrays(daf, expected)
    check_plain_daf(daf)
    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    check_same_axis_arrays(anndata.read_h5ad(tmp_path / "back.h5ad"), expected)


# The command line.


def test_cli_convert_keeps_obsm_and_varm_both_ways(tmp_path):
    make_adata().write_h5ad(tmp_path / "a.h5ad")
    expected = anndata.read_h5ad(tmp_path / "a.h5ad")
    done = run_pydaf("convert", str(tmp_path / "a.h5ad"), str(tmp_path / "b.h5df"), "--no-progress")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    daf = pydaf.open_daf(str(tmp_path / "b.h5df"), "r")
    check_daf_holds_axis_arrays(daf, expected)
    check_plain_daf(daf)
    done = run_pydaf("convert", str(tmp_path / "b.h5df"), str(tmp_path / "c.h5ad"), "--no-progress")
    assert done.returncode == 0, done.stderr
    check_same_axis_arrays(anndata.read_h5ad(tmp_path / "c.h5ad"), expected)


@pytest.mark.parametrize("flags", [("--no-obsm",), ("--no-varm",), ("--no-obsm", "--no-varm")])
def test_cli_convert_opt_outs(tmp_path, flags):
    make_adata().write_h5ad(tmp_path / "a.h5ad")
    done = run_pydaf("convert", str(tmp_path / "a.h5ad"), str(tmp_path / "b.h5df"), "--no-progress", *flags)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # skipped as asked: nothing to report
    axes = pydaf.open_daf(str(tmp_path / "b.h5df"), "r").axes_set()
    for member in ("obsm", "varm"):
        members = {axis for axis in axes if axis.startswith(f"{member}_")}
        assert members == (set() if f"--no-{member}" in flags else
                           {f"{member}_{key}" for kept_member, key in KEPT if kept_member == member})


def test_cli_opt_outs_only_apply_to_anndata_sources(tmp_path):
    daf = pydaf.H5df(str(tmp_path / "a.h5df"), "w").add_axis("obs", ["A"]).add_axis("var", ["X"])
    daf.flush()
    done = run_pydaf("convert", str(tmp_path / "a.h5df"), str(tmp_path / "b.h5ad"), "--no-progress", "--no-obsm")
    assert done.returncode == 1 and "--no-obsm and --no-varm only apply to conversions from .h5ad" in done.stderr
    assert not (tmp_path / "b.h5ad").exists()


# Opting out.


@pytest.mark.parametrize("source", ["file", "memory"])
def test_keyword_opt_outs_and_key_lists(tmp_path, source):
    adata = make_adata()
    adata.write_h5ad(tmp_path / "a.h5ad")

    def imported(**options: Any) -> pydaf.DafReader:
        if source == "file":
            return h5ad_as_daf(tmp_path / "a.h5ad", progress=False, **options)
        return anndata_as_daf(adata, **options)

    def extra_axes(daf: pydaf.DafReader) -> set[str]:
        return daf.axes_set() - {"obs", "var"}

    daf, messages = messages_of(lambda: imported(obsm=False, varm=False))
    assert extra_axes(daf) == set() and messages == [] and daf.scalars_set() == set()
    assert extra_axes(imported(obsm=["X_umap", "protein_expression"], varm=False)) == {
        "obsm_X_umap", "obsm_protein_expression"}
    assert extra_axes(imported(obsm=(), varm=["PCs"])) == {"varm_PCs"}
    daf = imported(obsm=["X_pca"], varm=False)
    assert set(daf_as_anndata(daf).obsm) == {"X_pca"}
    with pytest.raises(pydaf.DafMissingError, match="missing obsm key: X_tsne") as raised:
        imported(obsm=["X_umap", "X_tsne"])
    listed = str(raised.value).split("(its obsm keys are: ")[1].rstrip(")").split(", ")
    assert sorted(listed) == sorted(key for member, key in KEPT if member == "obsm")
    with pytest.raises(pydaf.DafValueError, match="invalid varm: 'PCs'"):
        imported(varm="PCs")  # a string is not a list of keys


# What is still reported.


def with_unsupported(adata: anndata.AnnData) -> dict[str, str]:
    """Elements that stay unsupported, and the reason each is reported with."""
    adata.obsm["X_cube"] = np.zeros((N_OBS, 2, 2))
    adata.obsm["labels"] = np.array([["a", "b"]] * N_OBS, dtype=object)
    adata.obsm["mixed_frame"] = pd.DataFrame({"n": np.arange(N_OBS), "x": np.linspace(0, 1, N_OBS)},
                                             index=adata.obs_names)
    adata.obsm["text_frame"] = pd.DataFrame({"n": np.arange(N_OBS), "kind": ["a"] * N_OBS}, index=adata.obs_names)
    adata.obsm["category_frame"] = pd.DataFrame({"kind": pd.Categorical(["a", "b"] * 3 + ["a"])},
                                                index=adata.obs_names)
    adata.obsm["nullable_frame"] = pd.DataFrame({"n": pd.array([1, None] * 3 + [2], dtype="Int64")},
                                                index=adata.obs_names)
    return {"obsm/X_cube": "3-dimensional array", "obsm/labels": "string", "obsm/mixed_frame": "different types",
            "obsm/text_frame": "non-numeric column: kind", "obsm/category_frame": "kind",
            "obsm/nullable_frame": "n"}


@pytest.mark.parametrize("source", ["file", "memory"])
def test_what_daf_cannot_hold_is_still_reported(tmp_path, source):
    adata = make_adata()
    reasons = with_unsupported(adata)
    adata.write_h5ad(tmp_path / "a.h5ad")

    def imported(destination: Any = None, handler: str = "warn") -> pydaf.DafReader:
        if source == "file":
            return h5ad_as_daf(tmp_path / "a.h5ad", destination, unsupported_handler=handler, progress=False)
        return anndata_as_daf(adata, destination, unsupported_handler=handler)

    daf, messages = messages_of(imported)
    named = {message.split(": ", 1)[1].split(" (")[0]: message for message in messages}
    assert set(named) == set(reasons), messages
    for element, reason in reasons.items():
        assert reason in named[element], named[element]
    check_daf_holds_axis_arrays(daf, make_adata())  # the others are kept
    target = pydaf.MemoryDaf(name="target!")
    with pytest.raises(pydaf.DafUnsupportedError, match="obsm/"):
        imported(target, "error")
    assert target.axes_set() == set() and target.scalars_set() == set()  # raised before anything was written
    _, messages = messages_of(lambda: imported(None, "ignore"))
    assert messages == []


def test_invalid_keys_are_reported_not_renamed():
    adata = make_adata()
    adata.obsm[".hidden"] = np.zeros((N_OBS, 2))
    adata.obsm["a/b"] = np.zeros((N_OBS, 2))
    adata.obsm["frame_int_columns"] = pd.DataFrame(np.ones((N_OBS, 2)), index=adata.obs_names)
    daf, messages = messages_of(lambda: anndata_as_daf(adata))
    assert sorted(message.split(" (")[0] for message in messages) == [
        "unsupported element: obsm/.hidden", "unsupported element: obsm/a/b",
        "unsupported element: obsm/frame_int_columns"]
    assert any("whose column names are not unique strings" in message for message in messages), messages
    assert daf.axes_set() == {"obs", "var"} | {f"{member}_{key}" for member, key in KEPT}


# Collisions: nothing is overwritten; the colliding element is reported.


def test_an_axis_name_taken_by_obs_is_reported():
    adata = make_adata()
    daf, messages = messages_of(lambda: anndata_as_daf(adata, obs_is="obsm_X_umap"))
    assert messages == ["unsupported element: obsm/X_umap (its axis: obsm_X_umap already exists)"]
    assert daf.axis_vector("obsm_X_umap").tolist() == adata.obs_names.tolist()  # the obs axis, untouched
    assert not daf.has_scalar("obsm_X_umap_encoding")
    assert daf.has_axis("obsm_X_pca") and daf.has_matrix("obsm_X_umap", "obsm_X_pca", "X_pca")


def test_a_record_name_taken_by_uns_is_reported(tmp_path):
    adata = make_adata()
    adata.uns["obsm_X_pca_encoding"] = "mine"
    adata.write_h5ad(tmp_path / "a.h5ad")
    for importing in (lambda: anndata_as_daf(adata), lambda: h5ad_as_daf(tmp_path / "a.h5ad", progress=False)):
        daf, messages = messages_of(importing)
        assert messages == ["unsupported element: obsm/X_pca (its record scalar: obsm_X_pca_encoding already "
                            "exists)"]
        assert daf.get_scalar("obsm_X_pca_encoding") == "mine" and not daf.has_axis("obsm_X_pca")
        assert daf_as_anndata(daf).uns["obsm_X_pca_encoding"] == "mine"


def test_a_destination_axis_is_not_overwritten():
    target = pydaf.MemoryDaf(name="target!").add_axis("obsm_X_umap", ["u", "v"])
    target.set_scalar("varm_PCs_encoding", "array")
    daf, messages = messages_of(lambda: anndata_as_daf(make_adata(), target))
    assert sorted(messages) == ["unsupported element: obsm/X_umap (its axis: obsm_X_umap already exists)",
                                "unsupported element: varm/PCs (its record scalar: varm_PCs_encoding already "
                                "exists)"]
    assert daf.axis_vector("obsm_X_umap").tolist() == ["u", "v"] and not daf.has_axis("varm_PCs")


# Export of data sets without records, and of records that don't hold.


def test_a_data_set_without_records_exports_as_before(tmp_path):
    daf = pydaf.MemoryDaf(name="julia!").add_axis("obs", ["A", "B"]).add_axis("var", ["X"])
    daf.set_matrix("obs", "var", "X", np.array([[1.0], [2.0]]))
    daf.add_axis("obsm_X_umap", ["0", "1"]).set_matrix("obs", "obsm_X_umap", "X_umap", np.eye(2))
    daf.add_axis("obsm_bad", ["0"]).set_matrix("obs", "obsm_bad", "bad", np.ones((2, 1)))
    daf.set_scalar("obsm_bad_encoding", "zarr")  # not an AnnData encoding: a scalar as any other
    daf.set_scalar("obsm_gone_encoding", "array")  # no such axis
    for adata in (daf_as_anndata(daf), None):
        if adata is None:
            daf_as_h5ad(daf, tmp_path / "x.h5ad", progress=False)
            adata = anndata.read_h5ad(tmp_path / "x.h5ad")
        assert set(adata.obsm) == set() and set(adata.varm) == set() and set(adata.layers) == set()
        assert adata.uns["obsm_bad_encoding"] == "zarr" and adata.uns["obsm_gone_encoding"] == "array"
    daf.set_scalar("obsm_X_umap_encoding", "csr_matrix")  # recorded (by hand): exported, sparse as recorded
    adata = daf_as_anndata(daf)
    assert set(adata.obsm) == {"X_umap"} and adata.obsm["X_umap"].format == "csr"
    assert adata.obsm["X_umap"].toarray().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert "obsm_X_umap_encoding" not in adata.uns


def test_export_with_other_axis_names(tmp_path):
    adata = make_adata()
    daf = anndata_as_daf(adata, obs_is="cell", var_is="gene")
    daf_as_h5ad(daf, tmp_path / "x.h5ad", progress=False)  # obs_is/var_is from the scalars
    check_same_axis_arrays(anndata.read_h5ad(tmp_path / "x.h5ad"), adata)


def test_dataframe_columns_h5ad_cannot_hold_are_refused_on_export(tmp_path):
    adata = anndata.AnnData(np.zeros((2, 1), dtype=np.float32))
    adata.obs_names, adata.var_names = ["A", "B"], ["X"]
    adata.obsm["proteins"] = pd.DataFrame({"CD3/CD28": [1.0, 2.0]}, index=adata.obs_names)
    daf = anndata_as_daf(adata)
    check_same_axis_arrays(daf_as_anndata(daf), adata)  # in memory: kept
    with pytest.raises(pydaf.DafValueError, match="can't write the column: CD3/CD28"):
        daf_as_h5ad(daf, tmp_path / "x.h5ad", progress=False)
    assert not (tmp_path / "x.h5ad").exists()


# Hostile files.


def test_damaged_obsm_elements_are_format_errors(tmp_path):
    adata = make_adata()
    adata.write_h5ad(tmp_path / "a.h5ad")
    with h5py.File(tmp_path / "a.h5ad", "r+") as file:
        indices = file["obsm/spatial/indices"]
        indices[0] = 99  # out of the 4 columns
    target = pydaf.MemoryDaf(name="target!")
    with pytest.raises(pydaf.DafFormatError, match="obsm/spatial"):
        h5ad_as_daf(tmp_path / "a.h5ad", target, progress=False)
    adata.write_h5ad(tmp_path / "b.h5ad")
    with h5py.File(tmp_path / "b.h5ad", "r+") as file:
        del file["obsm/X_umap"]
        file["obsm"].create_dataset("X_umap", data=np.zeros((N_OBS + 1, 2)))
        file["obsm/X_umap"].attrs["encoding-type"], file["obsm/X_umap"].attrs["encoding-version"] = "array", "0.2.0"
    with pytest.raises(pydaf.DafFormatError, match="obsm/X_umap"):
        h5ad_as_daf(tmp_path / "b.h5ad", pydaf.MemoryDaf(name="other!"), progress=False)
