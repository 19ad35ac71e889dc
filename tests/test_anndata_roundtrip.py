"""AnnData round trips as a scverse user feels them (issue 23): categoricals keep their categories in their order
(``0, 1, 2, …, 10``, not ``0, 1, 10, 2, …``), ``ordered`` and their colors (``uns["<column>_colors"]``); missing
values stay missing (categoricals, nullable integers, booleans and strings); the obs/var index names are kept; grouped
queries follow the recorded category order; ``daf_as_anndata`` gives arrays a user may modify (``copy=False`` the
zero-copy view). Every route: ``.h5ad`` -> Daf -> ``.h5ad``, in memory, and mixed. The end-to-end test runs on every
shared ``.h5ad`` fixture and scanpy's shipped ``pbmc68k_reduced`` and lists what is still not kept, with the reason.
"""

from __future__ import annotations

import importlib.util
import pathlib
import warnings
from collections.abc import Callable
from typing import Any

import anndata
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf

from .test_anndata import FIXTURES, caught_messages, read

LOUVAIN = [str(index) for index in range(11)]  # scanpy's cluster names: lexically 0, 1, 10, 2, ...
N_OBS, N_VAR = 14, 5


def dense(matrix: Any) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)


def louvain_adata(x_kind: str = "csr") -> anndata.AnnData:
    """An AnnData as scanpy leaves it: clusters with colors, an ordered categorical, missing values in categorical,
    nullable integer, boolean and string columns, named indexes."""
    rng = np.random.default_rng(23)
    counts = rng.poisson(1.5, (N_OBS, N_VAR)).astype(np.float32)
    louvain = ["0", "10", "2", "1", None, "10", "3", "0", "9", "2", None, "1", "4", "10"]
    obs = pd.DataFrame({
        "louvain": pd.Categorical(louvain, categories=LOUVAIN),
        "grade": pd.Categorical(["low", "high", None, "mid"] * 3 + ["low", "mid"], categories=["low", "mid", "high"],
                                ordered=True),
        "n_genes": pd.array([10, None, 30, 40, None, 60, 70, 80, 90, 100, 110, 120, 130, 140], dtype="Int64"),
        "passed": pd.array([True, None, False] * 4 + [True, False], dtype="boolean"),
        "sample": pd.array(["s0", "s1", None] + [f"s{index}" for index in range(3, N_OBS)], dtype="string"),
        "score": np.linspace(0.0, 1.0, N_OBS),
        "age": np.arange(N_OBS, dtype=np.int32),
    }, index=pd.Index([f"AAAC{index:02d}" for index in range(N_OBS)], name="barcode"))
    var = pd.DataFrame({
        "chrom": pd.Categorical(["chrX", "chr1", "chr2", "chr1", "chrM"], categories=["chr1", "chr2", "chrX", "chrM"]),
        "dispersion": np.linspace(0.5, 2.5, N_VAR, dtype=np.float32),
    }, index=pd.Index([f"ENSG{index}" for index in range(N_VAR)], name="gene_ids"))
    X = sp.csr_matrix(counts) if x_kind == "csr" else counts
    return anndata.AnnData(X=X, obs=obs, var=var, layers={"counts": counts.copy()},
                           obsp={"connectivities": sp.csr_matrix(np.eye(N_OBS, dtype=np.float32))},
                           uns={"louvain_colors": [f"#{index:02x}{index:02x}aa" for index in range(11)],
                                "grade_colors": np.array(["#111111", "#222222", "#333333"], dtype=object),
                                "chrom_colors": ["red", "green", "blue", "black"], "organism": "human"})


def write_h5ad(adata: anndata.AnnData, path: pathlib.Path) -> pathlib.Path:
    """As scanpy writes it, but with the nullable string columns kept nullable (``write_h5ad`` would make them
    categoricals; anndata's element writer keeps them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adata.copy().write_h5ad(path)  # (write_h5ad makes the string columns of what it writes categoricals)
    with h5py.File(path, "a") as file, anndata.settings.override(allow_write_nullable_strings=True):
        for member in ("obs", "var"):
            del file[member]
            anndata.io.write_elem(file, member, getattr(adata, member))
    return path


# The routes: AnnData -> Daf -> AnnData.


def via_files(adata: anndata.AnnData, tmp_path: pathlib.Path) -> anndata.AnnData:
    h5ad_as_daf(write_h5ad(adata, tmp_path / "in.h5ad"), str(tmp_path / "x.h5df"), unsupported_handler="error",
                progress=False)
    daf_as_h5ad(pydaf.open_daf(str(tmp_path / "x.h5df")), tmp_path / "out.h5ad", progress=False)
    return read(tmp_path / "out.h5ad")


def via_memory(adata: anndata.AnnData, _tmp_path: pathlib.Path) -> anndata.AnnData:
    return daf_as_anndata(anndata_as_daf(adata, unsupported_handler="error"))


def file_to_memory(adata: anndata.AnnData, tmp_path: pathlib.Path) -> anndata.AnnData:
    h5ad_as_daf(write_h5ad(adata, tmp_path / "in.h5ad"), str(tmp_path / "x.h5df"), unsupported_handler="error",
                progress=False)
    return daf_as_anndata(pydaf.open_daf(str(tmp_path / "x.h5df")))


def memory_to_file(adata: anndata.AnnData, tmp_path: pathlib.Path) -> anndata.AnnData:
    daf_as_h5ad(anndata_as_daf(adata, unsupported_handler="error"), tmp_path / "out.h5ad", progress=False)
    return read(tmp_path / "out.h5ad")


ROUTES: dict[str, Callable[[anndata.AnnData, pathlib.Path], anndata.AnnData]] = {
    "files": via_files, "memory": via_memory, "file_to_memory": file_to_memory, "memory_to_file": memory_to_file}


def check_same_column(where: str, again: pd.Series, original: pd.Series) -> None:
    if isinstance(original.dtype, pd.CategoricalDtype):
        assert isinstance(again.dtype, pd.CategoricalDtype), where
        assert again.cat.categories.tolist() == original.cat.categories.tolist(), where  # in their order
        assert again.cat.ordered == original.cat.ordered, where
        assert again.cat.codes.tolist() == original.cat.codes.tolist(), where
    else:
        assert again.dtype == original.dtype, (where, again.dtype, original.dtype)
    assert int(again.isna().sum()) == int(original.isna().sum()), where
    assert again.isna().tolist() == original.isna().tolist(), where
    present = ~original.isna().to_numpy()
    assert again.to_numpy()[present].tolist() == original.to_numpy()[present].tolist(), where


def check_same_adata(again: anndata.AnnData, original: anndata.AnnData) -> None:
    for member in ("obs", "var"):
        before, after = getattr(original, member), getattr(again, member)
        assert after.index.tolist() == before.index.tolist()
        assert after.index.name == before.index.name, member
        assert list(after.columns) == list(before.columns), member
        for column in before.columns:
            check_same_column(f"{member}/{column}", after[column], before[column])
    assert sp.issparse(again.X) == sp.issparse(original.X)
    np.testing.assert_array_equal(dense(again.X), dense(original.X))
    np.testing.assert_array_equal(dense(again.layers["counts"]), dense(original.layers["counts"]))
    np.testing.assert_array_equal(dense(again.obsp["connectivities"]), dense(original.obsp["connectivities"]))
    for key in ("louvain_colors", "grade_colors", "chrom_colors"):
        assert np.asarray(again.uns[key]).tolist() == np.asarray(original.uns[key]).tolist(), key
    assert again.uns["organism"] == "human"


@pytest.mark.parametrize("x_kind", ["csr", "dense"])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_categoricals_missing_values_and_index_names_round_trip(tmp_path, route, x_kind):
    original = louvain_adata(x_kind)
    again = ROUTES[route](original, tmp_path)  # (unsupported_handler="error": nothing is lost)
    check_same_adata(again, original)
    assert again.obs["louvain"].cat.categories.tolist() == LOUVAIN  # not 0, 1, 10, 2, ...
    assert int(again.obs["louvain"].isna().sum()) == 2 and str(again.obs["n_genes"].dtype) == "Int64"


def test_what_the_daf_data_set_records(tmp_path):
    # Plain Daf, as Julia's Daf reads it: the vectors are strings (categoricals, "" where missing) and numbers, the
    # records string and Bool scalars.
    path = write_h5ad(louvain_adata(), tmp_path / "in.h5ad")
    daf = h5ad_as_daf(path, str(tmp_path / "x.h5df"), unsupported_handler="error", progress=False)
    assert daf.get_vector("obs", "louvain").tolist()[:5] == ["0", "10", "2", "1", ""]
    assert daf.get_scalar("obs_louvain_categories") == "\n".join(LOUVAIN)
    assert daf.get_scalar("obs_louvain_colors").split("\n") == [f"#{index:02x}{index:02x}aa" for index in range(11)]
    assert daf.get_scalar("obs_grade_categories") == "low\nmid\nhigh"
    assert bool(daf.get_scalar("obs_grade_ordered")) is True
    assert not daf.has_scalar("obs_louvain_ordered")
    assert daf.get_scalar("var_chrom_categories") == "chr1\nchr2\nchrX\nchrM"
    assert daf.get_scalar("var_chrom_colors") == "red\ngreen\nblue\nblack"
    n_genes = daf.get_vector("obs", "n_genes")
    assert n_genes.dtype == np.float64 and np.isnan(n_genes).sum() == 2 and n_genes[0] == 10
    assert daf.get_scalar("obs_n_genes_nullable") == "Int64"
    passed = daf.get_vector("obs", "passed")
    assert passed.dtype == np.float64 and np.isnan(passed).tolist() == [False, True, False] * 4 + [False, False]
    assert daf.get_scalar("obs_passed_nullable") == "boolean" and daf.get_scalar("obs_sample_nullable") == "string"
    assert daf.get_vector("obs", "sample").tolist()[:3] == ["s0", "s1", ""]
    assert daf.get_scalar("obs_index_name") == "barcode" and daf.get_scalar("var_index_name") == "gene_ids"
    assert daf.get_vector("obs", "age").dtype == np.int32
    # Nothing else: no uns array (the colors are recorded with their column), the other uns scalar as it was.
    assert daf.get_scalar("organism") == "human" and not daf.has_scalar("louvain_colors")
    recorded = {name for name in daf.scalars_set() if name not in ("organism", "obs_column_order")}
    assert all(isinstance(daf.get_scalar(name), str | bool | np.bool_) for name in recorded)
    assert len(recorded) == 12


def test_a_missing_value_and_an_empty_category_are_reported(tmp_path):
    adata = louvain_adata()
    adata.obs["tag"] = pd.Categorical(["", "x", None] * 4 + ["x", ""], categories=["", "x"])
    with pytest.raises(pydaf.DafUnsupportedError, match='obs/tag has 4 missing values and the category ""'):
        anndata_as_daf(adata, unsupported_handler="error")
    daf, messages = caught_messages(lambda: anndata_as_daf(adata))
    assert len(messages) == 1 and messages[0].startswith("lossy element: obs/tag has 4 missing values")
    again = daf_as_anndata(daf)
    assert again.obs["tag"].cat.categories.tolist() == ["", "x"]
    assert int(again.obs["tag"].isna().sum()) == 0 and (again.obs["tag"] == "").sum() == 4 + 5  # kept as ""


def test_lossy_nullable_columns_are_named(tmp_path):
    adata = louvain_adata()
    adata.obs["huge"] = pd.array([2**60, None] + [1] * (N_OBS - 2), dtype="Int64")  # not exact as a Float64
    adata.obs["label"] = pd.array(["", None] + ["a"] * (N_OBS - 2), dtype="string")  # "" and missing
    with pytest.raises(pydaf.DafUnsupportedError):
        anndata_as_daf(adata, unsupported_handler="error")
    daf, messages = caught_messages(lambda: anndata_as_daf(adata))
    assert sorted(message.splitlines()[0] for message in messages) == [
        "lossy element: obs/huge has 1 missing values, stored as 0 (its integers are too large to be exact in a "
        "Float64 with NaN)",
        'lossy element: obs/label has 1 missing values and empty strings: both are stored as "" (and exported as '
        "empty strings)"]
    assert daf.get_vector("obs", "huge").tolist()[:2] == [2**60, 0]
    again = daf_as_anndata(daf)
    assert str(again.obs["huge"].dtype) == "Int64" and again.obs["huge"].tolist()[:2] == [2**60, 0]
    assert again.obs["label"].tolist()[:2] == ["", ""]


def test_non_string_categories_are_named(tmp_path):
    adata = louvain_adata()
    adata.obs["bin"] = pd.Categorical([3, 1, 2] * 4 + [1, 3], categories=[3, 1, 2])
    _, messages = caught_messages(lambda: anndata_as_daf(adata))
    assert [message.splitlines()[0] for message in messages] == [
        "lossy element: obs/bin (categories of type int64 stored as strings)"]


def test_colors_of_no_categorical_column_are_reported():
    adata = louvain_adata()
    adata.uns["age_colors"] = ["red"] * 3  # age is not categorical
    _, messages = caught_messages(lambda: anndata_as_daf(adata))
    assert [message.splitlines()[0] for message in messages] == [
        "unsupported element: uns/age_colors (array of shape (3,): the colors of no categorical obs/var column)"]


def test_a_changed_vector_keeps_its_values_on_export():
    daf = anndata_as_daf(louvain_adata(), unsupported_handler="error")
    values = daf.get_vector("obs", "louvain").copy()
    values[0] = "new"  # not a recorded category: added after them, never dropped
    daf.set_vector("obs", "louvain", values, overwrite=True)
    again = daf_as_anndata(daf)
    assert again.obs["louvain"].cat.categories.tolist() == [*LOUVAIN, "new"]
    assert again.obs["louvain"].tolist()[0] == "new" and int(again.obs["louvain"].isna().sum()) == 2


# Grouped queries follow the recorded category order.


def test_grouped_queries_follow_the_recorded_categories(tmp_path):
    path = write_h5ad(louvain_adata(), tmp_path / "in.h5ad")
    h5ad_as_daf(path, str(tmp_path / "x.h5df"), unsupported_handler="error", progress=False)
    daf = pydaf.open_daf(str(tmp_path / "x.h5df"))
    present = ["0", "1", "2", "3", "4", "9", "10"]
    by_cluster = daf["@ obs @ var :: X -/ louvain >- Sum"]
    assert by_cluster.index.tolist() == [*present, ""]  # "" (missing) after the categories
    counts = dense(daf.get_matrix("obs", "var", "X"))
    louvain = daf.get_vector("obs", "louvain")
    np.testing.assert_array_equal(by_cluster.loc["10"].to_numpy(), counts[louvain == "10"].sum(axis=0))
    assert daf["@ obs : age / louvain >> Max"].index.tolist() == [*present, ""]
    assert daf["@ obs : grade / louvain >> Count"].index.tolist() == [*present, ""]
    assert daf["@ obs : age / grade >> Max"].index.tolist() == ["low", "mid", "high", ""]
    assert daf["@ obs : louvain * grade"].columns.tolist() == ["low", "mid", "high", ""]
    assert daf["@ obs : louvain * grade"].index.tolist() == [*present, ""]
    assert daf["@ var : dispersion / chrom >> Max"].index.tolist() == ["chr1", "chr2", "chrX", "chrM"]


def test_grouped_queries_sort_without_recorded_categories():
    # Julia's order (sorted) where nothing is recorded; the record is read at each query (a cached result depends
    # on it).
    daf = anndata_as_daf(louvain_adata(), unsupported_handler="error")
    assert daf["@ obs : age / louvain >> Max"].index.tolist() == ["0", "1", "2", "3", "4", "9", "10", ""]
    daf.delete_scalar("obs_louvain_categories")
    assert daf["@ obs : age / louvain >> Max"].index.tolist() == ["", "0", "1", "10", "2", "3", "4", "9"]
    memory = pydaf.MemoryDaf().add_axis("cell", ["a", "b", "c"]).set_vector("cell", "cluster", ["10", "2", "1"])
    memory.set_vector("cell", "n", [1, 2, 3])
    assert memory["@ cell : n / cluster >> Sum"].index.tolist() == ["1", "10", "2"]


# daf_as_anndata: what the user is given to modify is theirs; copy=False is the zero-copy view.


def mapped_daf(tmp_path: pathlib.Path) -> pydaf.DafReader:
    adata = louvain_adata("dense")
    adata.layers["sparse"] = sp.csr_matrix(adata.X)
    adata.obsp["distances"] = np.arange(N_OBS * N_OBS, dtype=np.float64).reshape(N_OBS, N_OBS)
    anndata_as_daf(adata, str(tmp_path / "x.h5df"), unsupported_handler="error")
    return pydaf.open_daf(str(tmp_path / "x.h5df"))


def test_daf_as_anndata_owns_its_arrays(tmp_path):
    daf = mapped_daf(tmp_path)
    stored_X = daf.get_matrix("var", "obs", "X")
    assert not stored_X.flags.writeable  # a read-only map of the file
    adata = daf_as_anndata(daf)
    arrays = {"X": adata.X, "layers/counts": adata.layers["counts"], "layers/sparse": adata.layers["sparse"].data,
              "obsp/distances": adata.obsp["distances"], "obsp/connectivities": adata.obsp["connectivities"].data,
              "obs/score": adata.obs["score"].to_numpy(), "obs/age": adata.obs["age"].to_numpy(),
              "var/dispersion": adata.var["dispersion"].to_numpy()}
    for where, array in arrays.items():
        assert array.flags.writeable, where
        assert not np.shares_memory(array, stored_X), where
    before = np.array(stored_X)
    adata.X *= 2
    adata.obs["score"] += 1  # (pandas writes into its own copy)
    np.testing.assert_array_equal(daf.get_matrix("var", "obs", "X"), before)  # the file is untouched
    assert isinstance(adata.obs["louvain"].dtype, pd.CategoricalDtype)


def test_daf_as_anndata_copy_false_is_a_zero_copy_view(tmp_path):
    daf = mapped_daf(tmp_path)
    view = daf_as_anndata(daf, copy=False)
    assert not view.X.flags.writeable and np.shares_memory(view.X, daf.get_matrix("var", "obs", "X"))
    assert np.shares_memory(view.layers["counts"], daf.get_matrix("var", "obs", "counts"))
    sparse = view.layers["sparse"]
    assert sp.issparse(sparse) and sparse.format == "csr"  # never densified
    assert np.shares_memory(sparse.data, daf.get_stored_matrix("var", "obs", "sparse").nzval)
    assert not sparse.data.flags.writeable
    np.testing.assert_array_equal(sparse.toarray(), view.X)
    assert not view.obs["score"].to_numpy().flags.writeable
    assert view.obs["louvain"].cat.categories.tolist() == LOUVAIN and view.obs.index.name == "barcode"


def test_daf_as_anndata_copy_false_keeps_the_stored_csc_layout():
    daf = pydaf.MemoryDaf().add_axis("cell", ["a", "b", "c"]).add_axis("gene", ["x", "y"])
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 1], [2, 0], [0, 3]], np.float32)),
                   relayout=False)
    view = daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="UMIs", copy=False)
    assert view.X.format == "csc" and np.shares_memory(view.X.data, daf.get_stored_matrix("cell", "gene",
                                                                                          "UMIs").nzval)
    assert dense(view.X).tolist() == [[0, 1], [2, 0], [0, 3]]
    assert daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="UMIs").X.format == "csr"


# End to end: every shared .h5ad and scanpy's own shipped data, .h5ad -> Daf -> .h5ad and in memory.


def shipped_files() -> list[pathlib.Path]:
    files = sorted(FIXTURES.glob("*.h5ad")) if FIXTURES.is_dir() else []
    spec = importlib.util.find_spec("scanpy")
    if spec is not None and spec.submodule_search_locations:
        files += sorted(pathlib.Path(spec.submodule_search_locations[0], "datasets").glob("*.h5ad"))
    return files


SPARSE_TEST_NAMES = ("the file's obs/var groups have no dataframe attributes: pydaf reads their `_index` dataset as "
                     "the names (as anndata <= 0.7 did), anndata 0.12 as a column (names 0..49)")
NESTED = "a nested mapping in uns: Daf scalars are not mappings"
#: What is still not kept, per file and route, with the reason (obsm/varm are compared by tests/test_anndata_obsm.py).
NOT_KEPT: dict[str, dict[str, dict[str, str]]] = {
    "small_test.h5ad": {route: {"uns/organism: not kept (ndarray)": "a 1-element array in uns (anndata reads it as "
                                "an array): Daf scalars are not arrays"} for route in ("files", "memory")},
    "sparse_test.h5ad": {
        "files": {"obs names differ": SPARSE_TEST_NAMES, "var names differ": SPARSE_TEST_NAMES,
                  "obs/_index: missing": SPARSE_TEST_NAMES, "var/_index: missing": SPARSE_TEST_NAMES,
                  "uns/organism: not kept (ndarray)": "a 1-element array in uns",
                  "uns/params: not kept (dict)": NESTED},
        "memory": {"obs/_index: missing": "a column named `_index`, anndata's reserved name of the index (anndata "
                   "refuses to write it)", "var/_index: missing": "the same, in var",
                   "uns/organism: not kept (ndarray)": "a 1-element array in uns",
                   "uns/params: not kept (dict)": NESTED}},
    "10x_pbmc68k_reduced.h5ad": {route: {
        "uns/louvain: not kept (dict)": NESTED, "uns/neighbors: not kept (dict)": NESTED,
        "uns/pca: not kept (dict)": NESTED, "uns/rank_genes_groups: not kept (dict)": NESTED}
        for route in ("files", "memory")},
}


def column_differences(where: str, before: pd.Series, after: pd.Series | None) -> list[str]:
    if after is None:
        return [f"{where}: missing"]
    found = []
    if isinstance(before.dtype, pd.CategoricalDtype):
        if not isinstance(after.dtype, pd.CategoricalDtype):
            return [f"{where}: dtype {before.dtype} -> {after.dtype}"]
        categories = [item.decode() if isinstance(item, bytes) else str(item) for item in before.cat.categories]
        if categories != [str(item) for item in after.cat.categories]:
            found.append(f"{where}: categories differ")
        if before.cat.ordered != after.cat.ordered:
            found.append(f"{where}: ordered differs")
    elif str(before.dtype) != str(after.dtype):
        found.append(f"{where}: dtype {before.dtype} -> {after.dtype}")
    if before.isna().tolist() != after.isna().tolist():
        found.append(f"{where}: NaN count {int(before.isna().sum())} -> {int(after.isna().sum())}")
    present = ~before.isna().to_numpy() & ~after.isna().to_numpy()
    old = [item.decode() if isinstance(item, bytes) else item for item in before.to_numpy()[present].tolist()]
    if old != after.to_numpy()[present].tolist():
        found.append(f"{where}: values differ")
    return found


def differences(original: anndata.AnnData, again: anndata.AnnData) -> tuple[list[str], int, int]:
    """What ``again`` does not keep of ``original`` (one line each), and how many obs/var columns are kept exactly
    (dtype, categories and their order, missing values, values) of how many."""
    found, kept, total = [], 0, 0
    for member in ("obs", "var"):
        before, after = getattr(original, member), getattr(again, member)
        if after.index.tolist() != before.index.tolist():
            found.append(f"{member} names differ")
        if after.index.name != before.index.name:
            found.append(f"{member} index name: {before.index.name!r} -> {after.index.name!r}")
        if [name for name in after.columns if name in before.columns] != \
                [name for name in before.columns if name in after.columns]:
            found.append(f"{member}: column order differs")
        found += [f"{member}/{name}: extra" for name in after.columns if name not in before.columns]
        for name in before.columns:
            total += 1
            lost = column_differences(f"{member}/{name}", before[name], after[name] if name in after.columns else None)
            found += lost
            kept += not lost
    if (original.X is None) != (again.X is None):
        found.append("X presence differs")
    elif original.X is not None and (sp.issparse(original.X) != sp.issparse(again.X) or dense(original.X).dtype
                                     != dense(again.X).dtype or not np.array_equal(dense(original.X), dense(again.X))):
        found.append("X differs")
    for member in ("layers", "obsp", "varp"):
        for key, matrix in getattr(original, member).items():
            other = getattr(again, member).get(key)
            if other is None:
                found.append(f"{member}/{key}: not kept")
            elif dense(matrix).dtype != dense(other).dtype or not np.array_equal(dense(matrix), dense(other)):
                found.append(f"{member}/{key}: differs")
    for key, value in original.uns.items():
        if key not in again.uns:
            found.append(f"uns/{key}: not kept ({type(value).__name__})")
        elif np.asarray(again.uns[key]).tolist() != np.asarray(value).tolist():
            found.append(f"uns/{key}: differs")
    if original.raw is not None and again.raw is None:
        found.append("raw: not kept")
    elif original.raw is not None:  # (raw.X's values and dtype, raw.var's names and columns: tests/test_anndata_raw.py)
        if dense(original.raw.X).dtype != dense(again.raw.X).dtype or \
                not np.array_equal(dense(original.raw.X), dense(again.raw.X)):
            found.append("raw/X differs")
        if again.raw.var_names.tolist() != original.raw.var_names.tolist():
            found.append("raw/var names differ")
        for name in original.raw.var.columns:
            found += column_differences(f"raw/var/{name}", original.raw.var[name], again.raw.var.get(name))
    return found, kept, total


@pytest.mark.parametrize("route", ["files", "memory"])
@pytest.mark.parametrize("path", shipped_files(), ids=lambda path: path.name)
def test_shipped_h5ad_files_round_trip(tmp_path, path, route):
    original = read(path)
    if route == "files":
        h5ad_as_daf(path, str(tmp_path / "x.h5df"), unsupported_handler="ignore", progress=False)
        daf_as_h5ad(pydaf.open_daf(str(tmp_path / "x.h5df")), tmp_path / "back.h5ad", progress=False)
        again = read(tmp_path / "back.h5ad")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (e.g. bytes decoded as strings: named, and tested above)
            again = daf_as_anndata(anndata_as_daf(original, unsupported_handler="ignore"))
    found, kept, total = differences(original, again)
    print(f"{path.name} ({route}): {kept}/{total} obs/var columns kept exactly; not kept: {found}")
    expected = NOT_KEPT.get(path.name, {}).get(route, {})
    assert sorted(found) == sorted(expected), f"not kept, unexplained: {sorted(set(found) - set(expected))}; " \
                                              f"now kept: {sorted(set(expected) - set(found))}"
    assert total - kept == sum(1 for line in found if line.startswith(("obs/", "var/")))


def test_scanpy_pbmc68k_reduced_is_among_the_files():
    if importlib.util.find_spec("scanpy") is None:
        pytest.skip("scanpy is not installed")
    assert "10x_pbmc68k_reduced.h5ad" in [path.name for path in shipped_files()]


def test_duplicate_obs_names_are_named_with_the_fix(tmp_path):
    # scanpy's krumsiek11 has 640 cells and 160 distinct names.
    adata = anndata.AnnData(np.zeros((4, 1), dtype=np.float32))
    adata.obs_names = ["A", "B", "A", "C"]
    path = tmp_path / "duplicates.h5ad"
    adata.write_h5ad(path)
    with pytest.raises(pydaf.DafShapeError) as error:
        h5ad_as_daf(path, progress=False)
    message = str(error.value)
    assert str(path) in message and "'A'" in message and "obs_names_make_unique()" in message


def test_uns_scalars_come_back_as_anndata_reads_them(tmp_path):
    adata = anndata.AnnData(np.zeros((2, 1), dtype=np.float32), uns={"n_top": 10, "ratio": 0.5, "flag": True})
    adata.obs_names, adata.var_names = ["A", "B"], ["X"]
    path = tmp_path / "scalars.h5ad"
    adata.write_h5ad(path)
    expected = anndata.read_h5ad(path).uns
    back = daf_as_anndata(h5ad_as_daf(path, progress=False))
    for key in ("n_top", "ratio", "flag"):
        assert type(back.uns[key]) is type(expected[key]) and back.uns[key] == expected[key]
