"""pydaf's AnnData interop (``pydaf.interop``, as documented in ``pydaf/interop/anndata.py``) against the real
``anndata`` package: ``.h5ad`` files written by anndata and read by pydaf into every kind of Daf store, ``.h5ad``
files written by pydaf and read by anndata, in-memory ``AnnData`` objects both ways, full round trips, the shared
fixtures (current, nullable and legacy layouts), the errors, and the ``pydaf convert`` command run as a real process.

Expected values always come from the input data (the AnnData object, anndata's own read of the file, or the file
read with h5py), never from the code under test.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anndata
import anndata.io
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf
from pydaf.testing import DafBackend

from .conftest import BACKENDS, MEMORY

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "anndata"

N_OBS, N_VAR = 6, 4
X_KINDS = ["csr", "csc", "dense"]
X_DTYPES = [np.int32, np.int64, np.float32, np.float64, np.bool_]


# Helpers.


def dense(matrix: Any) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)


def values_of(seed: int, shape: tuple[int, int], dtype: Any) -> np.ndarray:
    """Small integer values with ~half zeros (so sparse storage is meaningful), as ``dtype``."""
    generator = np.random.default_rng(seed)
    values = generator.integers(1, 9, shape) * (generator.random(shape) < 0.5)
    values[0, -1] = 5  # never an all-zero matrix
    return values.astype(dtype)


def asymmetric(seed: int, size: int, dtype: Any) -> np.ndarray:
    """A square matrix that is not symmetric (so the transpose convention of obsp/varp is observable)."""
    values = values_of(seed, (size, size), dtype)
    values[0, 1], values[1, 0] = 3, 0
    assert not np.array_equal(values, values.T)
    return values


def make_adata(x_kind: str = "csr", dtype: Any = np.float32) -> anndata.AnnData:
    """An AnnData with every supported element: X (``x_kind``, ``dtype``), dense/CSR/CSC layers, sparse and dense
    obsp/varp, categorical (with a missing entry), string, numeric and bool columns, int/float/str/bool uns scalars."""
    raw = values_of(1, (N_OBS, N_VAR), np.int64)
    X = raw.astype(dtype)
    X = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "dense": np.asarray}[x_kind](X)
    obs = pd.DataFrame({
        "type": pd.Categorical(["T1", "T2", None, "T1", "T2", "T3"]),
        "barcode": [f"AC{index}GT" for index in range(N_OBS)],  # unique, so anndata keeps it a string column
        "age": np.arange(30, 30 + N_OBS, dtype=np.int64),
        "batch": np.array([3, 1, 4, 1, 5, 9], dtype=np.int32),
        "score": np.linspace(0.25, 2.5, N_OBS),
        "weight": np.linspace(1.0, 2.0, N_OBS, dtype=np.float32),
        "is_doublet": np.array([False, True, False, False, True, False]),
    }, index=[f"cell{index}" for index in range(N_OBS)])
    var = pd.DataFrame({
        "chrom": ["chr1", "chrX", "chr7", "chrM"],
        "length": np.array([100, 2000, 30, 4], dtype=np.int32),
        "gc": np.array([0.5, 0.25, 0.125, 0.75], dtype=np.float32),
        "is_mito": np.array([False, False, False, True]),
    }, index=["Xist", "Actb", "Gapdh", "mt-Co1"])
    return anndata.AnnData(
        X=X, obs=obs, var=var,
        layers={"scaled": values_of(2, (N_OBS, N_VAR), np.float32) / 4,
                "counts": sp.csr_matrix(values_of(3, (N_OBS, N_VAR), np.int64)),
                "smooth": sp.csc_matrix(values_of(4, (N_OBS, N_VAR), np.float64))},
        obsp={"knn": sp.csr_matrix(asymmetric(5, N_OBS, np.float32)),
              "conn": sp.csc_matrix(asymmetric(6, N_OBS, np.int32)),
              "distances": asymmetric(7, N_OBS, np.float64)},
        varp={"corr": asymmetric(8, N_VAR, np.float64),
              "links": sp.csr_matrix(asymmetric(9, N_VAR, np.int64))},
        uns={"organism": "human", "n_pcs": 7, "ratio": 0.25, "filtered": True},
    )


def write(adata: anndata.AnnData, path: pathlib.Path) -> pathlib.Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata's own notes (e.g. about converting strings to categoricals)
        adata.write_h5ad(path)
    return path


def read(path: pathlib.Path) -> anndata.AnnData:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return anndata.read_h5ad(path)


def column_expectation(series: pd.Series) -> tuple[str, Any]:
    """What Daf holds for an AnnData column: ``("strings", list)`` (categoricals, strings; missing -> "") or
    ``("array", numpy array)`` with the dtype kept (nullable integers/booleans: Float64 with NaN if any is missing,
    see ``recorded_scalars``)."""
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype):
        return "strings", ["" if pd.isna(value) else (value.decode() if isinstance(value, bytes) else str(value))
                           for value in series.tolist()]
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and series.isna().any():  # nullable integers/booleans
        return "array", series.to_numpy(dtype=np.float64, na_value=np.nan)
    if isinstance(dtype, pd.BooleanDtype):
        return "array", series.to_numpy(dtype=bool)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):  # nullable integers
        return "array", series.to_numpy(dtype=dtype.numpy_dtype)
    return "array", series.to_numpy()


def check_vector(stored: np.ndarray, series: pd.Series) -> None:
    kind, expected = column_expectation(series)
    if kind == "strings":
        assert stored.tolist() == expected
        assert all(isinstance(value, str) for value in stored.tolist())
    else:
        np.testing.assert_array_equal(stored, expected)
        assert stored.dtype == expected.dtype


def check_scalar(stored: Any, expected: Any) -> None:
    """The same value, and the same kind of value (a bool stays a bool, an int an int, ...)."""
    if isinstance(expected, str):
        assert isinstance(stored, str) and stored == expected
    elif isinstance(expected, bool | np.bool_):
        assert isinstance(stored, bool | np.bool_) and bool(stored) == bool(expected)
    elif isinstance(expected, int | np.integer):
        assert isinstance(stored, int | np.integer) and not isinstance(stored, bool | np.bool_)
        assert stored == expected
    else:
        assert isinstance(expected, float | np.floating)
        assert isinstance(stored, float | np.floating) and stored == expected


def is_scalar(value: Any) -> bool:
    return isinstance(value, str | bool | int | float | np.generic)


def kept_colors(adata: anndata.AnnData) -> set[str]:
    """The ``uns`` keys ``<column>_colors`` (arrays of strings) of categorical obs/var columns, which Daf keeps."""
    kept = set()
    for key, value in adata.uns.items():
        column = key[:-len("_colors")] if key.endswith("_colors") else None
        if column is None or not any(column in frame.columns and isinstance(frame[column].dtype, pd.CategoricalDtype)
                                     for frame in (adata.obs, adata.var)):
            continue
        if isinstance(value, np.ndarray | list) and all(isinstance(item, str) for item in np.asarray(value).tolist()):
            kept.add(key)
    return kept


def decoded_categories(series: pd.Series) -> list[str]:
    return [item.decode() if isinstance(item, bytes) else str(item) for item in series.cat.categories.tolist()]


def check_matrix(got: Any, expected: Any) -> None:
    """Same shape, values, element type and sparseness."""
    assert got.shape == expected.shape
    np.testing.assert_array_equal(dense(got), dense(expected))
    assert got.dtype == expected.dtype
    assert sp.issparse(got) == sp.issparse(expected)


def check_daf_holds(daf: pydaf.DafReader, adata: anndata.AnnData, *, obs: str = "obs", var: str = "var",
                    X: str = "X") -> None:
    """Every supported element of ``adata`` is in ``daf``, value by value, with its element type."""
    assert daf.axis_vector(obs).tolist() == adata.obs_names.tolist()
    assert daf.axis_vector(var).tolist() == adata.var_names.tolist()
    check_matrix(daf.get_matrix(obs, var, X), adata.X)
    assert isinstance(daf.get_stored_matrix(obs, var, X), pydaf.SparseMatrixCSC) == sp.issparse(adata.X)
    for key, layer in adata.layers.items():
        check_matrix(daf.get_matrix(obs, var, key), layer)
    # Julia's Daf convention: a square Daf matrix is the transpose of the AnnData one.
    for axis, members in ((obs, adata.obsp), (var, adata.varp)):
        assert daf.matrices_set(axis, axis) == set(members)
        for key, square in members.items():
            check_matrix(daf.get_matrix(axis, axis, key), square.T)
    assert daf.matrices_set(obs, var) == {X, *adata.layers}
    for axis, frame in ((obs, adata.obs), (var, adata.var)):
        assert daf.vectors_set(axis) == set(frame.columns)
        for column in frame.columns:
            check_vector(daf.get_vector(axis, column), frame[column])
        check_column_order(daf, axis, list(frame.columns))
    for key, value in adata.uns.items():
        if is_scalar(value):
            check_scalar(daf.get_scalar(key), value)


def check_column_order(daf: pydaf.DafReader, axis: str, order: list[str]) -> None:
    """The source's column order is recorded (one name per line) exactly when it is not alphabetical."""
    recorded = daf.get_scalar(f"{axis}_column_order", default=None)
    assert recorded == ("\n".join(order) if order != sorted(order) else None)


def uns_scalars(daf: pydaf.DafReader) -> set[str]:
    """The scalars of a data set, less the recorded column orders of its axes, the records of its obsm/varm (raw's
    varm too) and raw, and those of its AnnData columns (categories, ..., index names)."""
    recorded = {f"{axis}_index_name" for axis in daf.axes_set()} | {
        f"{axis}_{vector}_{fact}" for axis in daf.axes_set() for vector in daf.vectors_set(axis)
        for fact in ("categories", "ordered", "nullable", "colors")}
    return daf.scalars_set() - {f"{axis}_column_order" for axis in daf.axes_set()} - {
        f"{axis}_encoding" for axis in daf.axes_set() if axis.startswith(("obsm_", "varm_", "raw_varm_"))} - recorded \
        - ({"raw_is"} if isinstance(daf.get_scalar("raw_is", default=None), str) and
           daf.has_axis(daf.get_scalar("raw_is")) else set())


def layouts(daf: pydaf.DafReader, rows: str, columns: str, name: str) -> set[tuple[str, str]]:
    """Which layouts of a matrix are stored."""
    return {(first, second) for first, second in ((rows, columns), (columns, rows))
            if daf.has_matrix(first, second, name, relayout=False)}


def file_layout(element: h5py.Group | h5py.Dataset, obs: str, var: str) -> tuple[str, str]:
    """The Daf layout an h5ad matrix holds as stored: CSC columns are var (obs x var); CSR and dense rows are obs
    (column-major var x obs)."""
    return (obs, var) if element.attrs.get("encoding-type") == "csc_matrix" else (var, obs)


def caught_messages(action: Callable[[], Any]) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = action()
    assert all(issubclass(warning.category, UserWarning) for warning in caught), [str(w.message) for w in caught]
    return result, [str(warning.message) for warning in caught]


def check_one_warning_per_element(messages: list[str], elements: set[str]) -> None:
    assert len(messages) == len(elements), messages
    named = [message.splitlines()[0].split(": ", 1)[1].split(" (")[0].split(" has ")[0] for message in messages]
    assert sorted(named) == sorted(elements), messages


def fixture_path(name: str) -> pathlib.Path:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"the shared fixture {path} is not present")
    return path


def base_name(name: str) -> str:
    """A data set name without the ``#N`` suffix pydaf (as Julia's Daf) adds to make names unique in the process."""
    return name.split("#")[0]


def decoded(values: np.ndarray) -> list[str]:
    return [value.decode() if isinstance(value, bytes) else str(value) for value in values.tolist()]


# Destinations: real stores, parametrized.


@dataclass
class Store:
    backend: DafBackend
    writer: pydaf.DafWriter

    def reopen(self) -> pydaf.DafReader:
        """The data as persisted (a fresh read-only open of the storage; the data set itself when in memory)."""
        return self.backend.reopen(self.writer, "r")

    def is_empty(self) -> bool:
        daf = self.reopen()
        return daf.axes_set() == set() and daf.scalars_set() == set()


@pytest.fixture
def store(backend, tmp_path) -> Store:
    return Store(backend, backend.new(tmp_path, "target!"))


# h5ad files written by anndata, read into Daf.


@pytest.mark.parametrize("dtype", X_DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("x_kind", X_KINDS)
def test_h5ad_written_by_anndata(tmp_path, store, x_kind, dtype):
    path = write(make_adata(x_kind, dtype), tmp_path / "x.h5ad")
    with h5py.File(path, "r") as file:  # The file really holds what the test is about.
        assert file["X"].attrs["encoding-type"] == {"csr": "csr_matrix", "csc": "csc_matrix", "dense": "array"}[x_kind]
    expected = read(path)
    assert expected.X.dtype == np.dtype(dtype)
    result = h5ad_as_daf(path, store.writer, relayout=True, progress=False)
    assert result is store.writer
    check_daf_holds(store.reopen(), expected)


@pytest.mark.parametrize("x_kind", X_KINDS)
def test_h5ad_relayout_stores_both_layouts(tmp_path, store, x_kind):
    path = write(make_adata(x_kind), tmp_path / "x.h5ad")
    h5ad_as_daf(path, store.writer, relayout=True, progress=False)
    daf, expected = store.reopen(), read(path)
    for name, original in (("X", expected.X), *expected.layers.items()):
        assert layouts(daf, "obs", "var", name) == {("obs", "var"), ("var", "obs")}
        check_matrix(daf.get_matrix("obs", "var", name, relayout=False), original)
        check_matrix(daf.get_matrix("var", "obs", name, relayout=False), original.T)


@pytest.mark.parametrize("x_kind", X_KINDS)
def test_h5ad_without_relayout_stores_the_layout_of_the_file(tmp_path, store, x_kind):
    path = write(make_adata(x_kind), tmp_path / "x.h5ad")
    h5ad_as_daf(path, store.writer, relayout=False, progress=False)
    daf, expected = store.reopen(), read(path)
    with h5py.File(path, "r") as file:
        held = {"X": file_layout(file["X"], "obs", "var")}
        held.update({key: file_layout(file["layers"][key], "obs", "var") for key in file["layers"]})
    assert held["X"] == {"csr": ("var", "obs"), "csc": ("obs", "var"), "dense": ("var", "obs")}[x_kind]
    assert {held[key] for key in expected.layers} == {("var", "obs"), ("obs", "var")}  # both kinds of layers
    for name, original in (("X", expected.X), *expected.layers.items()):
        assert layouts(daf, "obs", "var", name) == {held[name]}
        stored = daf.get_matrix(*held[name], name, relayout=False)
        check_matrix(stored, original if held[name] == ("obs", "var") else original.T)


@pytest.mark.parametrize("source", ["h5ad", "memory"])
def test_the_default_stores_the_layout_anndata_holds(tmp_path, source):
    # As Julia's Daf: a CSR X is stored as Daf's (var, obs) matrix, nothing is relaid out unless asked for.
    adata = make_adata("csr")
    if source == "h5ad":
        daf = h5ad_as_daf(write(adata, tmp_path / "x.h5ad"), progress=False)
    else:
        daf = anndata_as_daf(adata)
    assert layouts(daf, "obs", "var", "X") == {("var", "obs")}


def test_h5ad_columns_categorical_missing_and_kept_types(tmp_path):
    adata = make_adata("csr")
    path = write(adata, tmp_path / "x.h5ad")
    with h5py.File(path, "r") as file:
        codes = file["obs/type/codes"][()]
        categories = decoded(file["obs/type/categories"][()])
        assert (codes < 0).any()  # the missing entry is in the file as code -1
        assert file["obs/barcode"].attrs["encoding-type"] == "string-array"
    daf = h5ad_as_daf(path, unsupported_handler="error", relayout=False, progress=False)  # nothing to report
    assert daf.get_vector("obs", "type").tolist() == ["" if code < 0 else categories[code] for code in codes]
    assert daf.get_vector("obs", "barcode").tolist() == adata.obs["barcode"].tolist()
    for axis, frame in (("obs", adata.obs), ("var", adata.var)):
        for column in frame.columns:
            if frame[column].dtype.kind in "biuf":
                stored = daf.get_vector(axis, column)
                np.testing.assert_array_equal(stored, frame[column].to_numpy())
                assert stored.dtype == frame[column].dtype


def test_h5ad_uns_scalars_keep_their_kind(tmp_path):
    adata = make_adata("dense")
    adata.uns.update({"count": np.int32(12), "precise": np.float32(0.5), "off": False, "label": "x y z"})
    path = write(adata, tmp_path / "x.h5ad")
    with h5py.File(path, "r") as file:
        encodings = {key: file["uns"][key].attrs["encoding-type"] for key in file["uns"]}
        from_file = {key: file["uns"][key][()] for key in file["uns"]}
    assert set(encodings.values()) == {"string", "numeric-scalar"}
    daf = h5ad_as_daf(path, relayout=False, progress=False)
    assert uns_scalars(daf) == set(adata.uns)
    for key, value in from_file.items():
        check_scalar(daf.get_scalar(key), value.decode() if isinstance(value, bytes) else value.item())
        if not isinstance(value, bytes):  # numeric scalars keep their width
            assert daf.get_scalar(key).dtype == value.dtype, key


def test_h5ad_square_matrices_are_transposed(tmp_path, store):
    adata = make_adata("csr")
    path = write(adata, tmp_path / "x.h5ad")
    h5ad_as_daf(path, store.writer, relayout=False, progress=False)
    daf = store.reopen()
    for axis, members in (("obs", adata.obsp), ("var", adata.varp)):
        for key, square in members.items():
            original = dense(square)
            stored = dense(daf.get_matrix(axis, axis, key))
            rows, columns = np.nonzero(original != original.T)
            assert rows.size > 0
            for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
                assert stored[row, column] == original[column, row]
                assert stored[row, column] != original[row, column]


def test_h5ad_names_from_uns_arguments_and_defaults(tmp_path):
    adata = make_adata("csr")
    adata.uns.update({"obs_is": "cell", "var_is": "gene", "X_is": "UMIs", "name": "my cells"})
    path = write(adata, tmp_path / "named.h5ad")
    daf = h5ad_as_daf(path, relayout=False, progress=False)
    assert isinstance(daf, pydaf.MemoryDaf) and base_name(daf.name) == "my cells"
    assert daf.axes_set() == {"cell", "gene"}
    check_daf_holds(daf, read(path), obs="cell", var="gene", X="UMIs")
    for key in ("obs_is", "var_is", "X_is", "name"):  # themselves scalars too
        assert daf.get_scalar(key) == adata.uns[key]

    other = h5ad_as_daf(path, name="given", obs_is="barcode", var_is="feature", X_is="counts_matrix",
                        relayout=False, progress=False)
    assert base_name(other.name) == "given" and other.axes_set() == {"barcode", "feature"}
    overridden = read(path)
    for key in ("obs_is", "var_is", "X_is", "name"):  # what these scalars hold when overridden is not specified
        del overridden.uns[key]
    check_daf_holds(other, overridden, obs="barcode", var="feature", X="counts_matrix")

    plain = write(make_adata("csr"), tmp_path / "plain.h5ad")
    daf = h5ad_as_daf(plain, relayout=False, progress=False)
    assert base_name(daf.name) == "anndata" and daf.axes_set() == {"obs", "var"}
    assert daf.matrices_set("obs", "var") == {"X", *make_adata().layers}


@pytest.mark.parametrize("kind", ["h5df", "h5dfs", "files"])
def test_h5ad_into_a_destination_path(tmp_path, kind):
    adata = make_adata("csc")
    path = write(adata, tmp_path / "x.h5ad")
    target = {"h5df": tmp_path / "out.h5df", "h5dfs": f"{tmp_path / 'out.h5dfs'}#/one",
              "files": tmp_path / "out.daf"}[kind]
    daf = h5ad_as_daf(path, str(target), relayout=True, progress=False)
    assert isinstance(daf, pydaf.FilesDaf if kind == "files" else pydaf.H5df)
    assert base_name(daf.name) == "anndata"
    check_daf_holds(pydaf.open_daf(str(target), "r"), read(path))


def test_h5ad_into_a_store_with_other_content(tmp_path, store):
    store.writer.set_scalar("kept", "yes").add_axis("type", ["T1", "T2"]).set_vector("type", "color", ["r", "g"])
    path = write(make_adata("dense"), tmp_path / "x.h5ad")
    h5ad_as_daf(path, store.writer, obs_is="cell", var_is="gene", relayout=False, progress=False)
    daf = store.reopen()
    assert daf.axes_set() == {"type", "cell", "gene"}
    assert daf.get_scalar("kept") == "yes" and daf.get_vector("type", "color").tolist() == ["r", "g"]
    check_daf_holds(daf, read(path), obs="cell", var="gene")


# Nullable columns.


def test_nullable_columns_without_missing_entries_are_plain(tmp_path, store):
    adata = make_adata("csr")
    adata.obs["n_genes"] = pd.array(np.arange(N_OBS) * 10, dtype="Int64")
    adata.obs["passed"] = pd.array([True, False, True, True, False, True], dtype="boolean")
    adata.obs["sample"] = pd.array([f"s{index}" for index in range(N_OBS)], dtype="string")  # unique: not categorical
    path = tmp_path / "x.h5ad"
    with anndata.settings.override(allow_write_nullable_strings=True):
        write(adata, path)
    with h5py.File(path, "r") as file:
        assert {name: file["obs"][name].attrs["encoding-type"] for name in ("n_genes", "passed", "sample")} == {
            "n_genes": "nullable-integer", "passed": "nullable-boolean", "sample": "nullable-string-array"}
    expected = read(path)
    # Nothing is missing: nothing to report, even to the strictest handler.
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, unsupported_handler="error",
                                                      relayout=False, progress=False))
    assert messages == []
    daf = store.reopen()
    check_daf_holds(daf, expected)
    assert daf.get_vector("obs", "n_genes").dtype == np.int64
    assert daf.get_vector("obs", "passed").dtype == np.bool_
    assert daf.get_vector("obs", "sample").tolist() == [f"s{index}" for index in range(N_OBS)]


def write_with_missing_nullables(tmp_path: pathlib.Path) -> tuple[pathlib.Path, set[str]]:
    """An h5ad (written by anndata) whose obs has nullable integer, boolean and string columns with missing entries;
    also returns the elements that must be reported."""
    adata = make_adata("csr")
    obs = adata.obs.copy()
    obs["n_genes"] = pd.array([10, None, 30, 40, None, 60], dtype="Int64")
    obs["passed"] = pd.array([True, None, False, True, True, False], dtype="boolean")
    obs["sample"] = pd.array(["s0", "s1", None, "s3", "s4", "s5"], dtype="string")
    obs["complete"] = pd.array([1, 2, 3, 4, 5, 6], dtype="Int64")  # nullable, nothing missing: not reported
    path = write(adata, tmp_path / "nullable.h5ad")
    # AnnData.write_h5ad turns string columns with missing entries into categoricals; anndata's element writer keeps
    # the nullable string array.
    with h5py.File(path, "a") as file, anndata.settings.override(allow_write_nullable_strings=True):
        del file["obs"]
        anndata.io.write_elem(file, "obs", obs)
    with h5py.File(path, "r") as file:
        reported = set()
        for name in ("n_genes", "passed", "sample", "complete"):
            assert file["obs"][name].attrs["encoding-type"].startswith("nullable-")
            if file["obs"][name]["mask"][()].any():
                reported.add(f"obs/{name}")
    assert reported == {"obs/n_genes", "obs/passed", "obs/sample"}
    return path, reported


@pytest.mark.parametrize("handler", ["warn", "error"])
def test_nullable_missing_entries_are_kept(tmp_path, store, handler):
    # Nothing is lost (so nothing is reported, even to "error"): nullable integers/booleans with missing entries are
    # Float64 with NaN, strings "" where missing, and the nullable type is recorded (tests/test_anndata_roundtrip.py).
    path, _ = write_with_missing_nullables(tmp_path)
    expected = read(path)
    assert expected.obs["n_genes"].isna().any() and expected.obs["sample"].isna().any()
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, unsupported_handler=handler,
                                                      relayout=False, progress=False))
    assert messages == []
    daf = store.reopen()
    check_daf_holds(daf, expected)
    n_genes = expected.obs["n_genes"]
    np.testing.assert_array_equal(daf.get_vector("obs", "n_genes"),
                                  [np.nan if pd.isna(value) else value for value in n_genes])
    assert daf.get_vector("obs", "sample").tolist()[int(np.flatnonzero(expected.obs["sample"].isna())[0])] == ""
    assert [daf.get_scalar(f"obs_{name}_nullable") for name in ("n_genes", "passed", "sample", "complete")] == \
        ["Int64", "boolean", "string", "Int64"]


def test_nullable_lossy_entries_error_before_writing(tmp_path, store):
    # A nullable string column holding both missing entries and real empty strings can't keep them apart.
    path, _ = write_with_missing_nullables(tmp_path)
    with h5py.File(path, "a") as file:
        values = file["obs/sample/values"]
        values[0] = ""
    with pytest.raises(pydaf.DafUnsupportedError) as raised:
        h5ad_as_daf(path, store.writer, unsupported_handler="error", relayout=False, progress=False)
    assert isinstance(raised.value, pydaf.DafError) and isinstance(raised.value, ValueError)
    assert "obs/sample has 1 missing values and empty strings" in str(raised.value)
    assert store.is_empty()


# Unsupported elements.


def with_unsupported(adata: anndata.AnnData) -> tuple[anndata.AnnData, set[str]]:
    adata.obsm["X_cube"] = np.zeros((N_OBS, 2, 2))  # (2-D numeric obsm/varm are kept: test_anndata_obsm.py)
    adata.varm["labels"] = np.array([["a", "b"]] * N_VAR, dtype=object)
    adata.uns["params"] = {"seed": 1, "method": "umap"}
    adata.uns["colors"] = np.array([1.0, 2.0, 3.0])
    return adata, {"obsm/X_cube", "varm/labels", "uns/params", "uns/colors"}


@pytest.mark.parametrize("handler", ["warn", "ignore"])
def test_h5ad_unsupported_elements_warn_or_ignore(tmp_path, store, handler):
    adata, elements = with_unsupported(make_adata("csr"))
    path = write(adata, tmp_path / "x.h5ad")
    with h5py.File(path, "r") as file:
        assert all(element in file for element in elements)
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, unsupported_handler=handler,
                                                      relayout=False, progress=False))
    if handler == "warn":
        check_one_warning_per_element(messages, elements)
    else:
        assert messages == []
    daf = store.reopen()
    check_daf_holds(daf, read(path))  # everything else is there
    assert uns_scalars(daf) == {"organism", "n_pcs", "ratio", "filtered"}


def test_h5ad_unsupported_elements_error_before_writing(tmp_path, store):
    adata, elements = with_unsupported(make_adata("dense"))
    path = write(adata, tmp_path / "x.h5ad")
    with pytest.raises(pydaf.DafUnsupportedError) as raised:
        h5ad_as_daf(path, store.writer, unsupported_handler="error", relayout=False, progress=False)
    assert any(element in str(raised.value) for element in elements)
    assert store.is_empty()


def test_h5ad_unsupported_error_into_a_path_writes_nothing(tmp_path):
    adata, _ = with_unsupported(make_adata("dense"))
    path = write(adata, tmp_path / "x.h5ad")
    for target in (tmp_path / "out.h5df", tmp_path / "out.daf"):
        with pytest.raises(pydaf.DafUnsupportedError):
            h5ad_as_daf(path, str(target), unsupported_handler="error", progress=False)
        if target.exists():
            written = pydaf.open_daf(str(target), "r")
            assert written.axes_set() == set() and written.scalars_set() == set()


# Errors.


@pytest.mark.parametrize("kind", ["text", "missing", "h5df"])
def test_h5ad_not_an_h5ad(tmp_path, kind):
    path = tmp_path / f"bad_{kind}.h5ad"
    if kind == "text":
        path.write_text("this is not an HDF5 file\n")
    elif kind == "h5df":  # a valid HDF5 file, but a Daf data set and not an AnnData
        daf = pydaf.H5df(str(path), "w", name="not anndata").add_axis("cell", ["A", "B"])
        daf.set_vector("cell", "age", [1, 2])
        daf.flush()
        del daf
    target = pydaf.MemoryDaf(name="target!")
    with pytest.raises(pydaf.DafError) as raised:
        h5ad_as_daf(path, target, progress=False)
    assert str(path) in str(raised.value)
    assert target.axes_set() == set()


def test_h5ad_duplicate_obs_names(tmp_path):
    adata = make_adata("csr")
    adata.obs_names = ["same", "other", "same", "a", "b", "c"]
    path = write(adata, tmp_path / "dup.h5ad")
    with pytest.raises(pydaf.DafShapeError):
        h5ad_as_daf(path, relayout=False, progress=False)


# Daf written as h5ad, read by anndata.


CELLS = [f"c{index}" for index in range(5)]
GENES = ["Xist", "Actb", "Gapdh", "Cd4"]


def build_daf(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """A cell x gene data set: scalars, string/int/float/bool vectors, a sparse UMIs matrix (stored as cell x gene
    only), a dense matrix (stored as gene x cell only), square cell x cell (sparse) and gene x gene (dense) matrices,
    and a third axis that AnnData cannot hold."""
    daf.set_scalar("organism", "mouse").set_scalar("seed", 7).set_scalar("ratio", 0.5).set_scalar("flag", False)
    daf.add_axis("cell", CELLS).add_axis("gene", GENES).add_axis("type", ["T1", "T2"])
    daf.set_vector("type", "color", ["red", "blue"])
    daf.set_vector("cell", "type", ["T1", "T2", "T1", "T1", "T2"])
    daf.set_vector("cell", "age", np.array([31, 45, 22, 60, 38], dtype=np.int32))
    daf.set_vector("cell", "score", np.array([0.5, 1.25, -2.0, 3.0, 0.0]))
    daf.set_vector("cell", "is_doublet", np.array([False, True, False, False, True]))
    daf.set_vector("gene", "chrom", ["chrX", "chr5", "chr6", "chr6"])
    daf.set_vector("gene", "length", np.array([100, 2000, 30, 4], dtype=np.int64))
    daf.set_vector("gene", "weight", np.array([0.5, 0.25, 0.125, 1.0], dtype=np.float32))
    daf.set_vector("gene", "is_marker", np.array([True, False, False, True]))
    umis = values_of(11, (len(CELLS), len(GENES)), np.uint16)
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(umis), relayout=False)
    fraction = values_of(12, (len(GENES), len(CELLS)), np.float32) / 8
    daf.set_matrix("gene", "cell", "fraction", fraction, relayout=False)
    daf.set_matrix("cell", "cell", "knn", sp.csc_matrix(asymmetric(13, len(CELLS), np.float32)))
    daf.set_matrix("gene", "gene", "corr", asymmetric(14, len(GENES), np.float64))
    return daf


@pytest.fixture(params=BACKENDS, ids=str)
def source(request, tmp_path) -> pydaf.DafWriter:
    return build_daf(request.param.new(tmp_path, "target!"))


def check_adata_holds(adata: anndata.AnnData, daf: pydaf.DafReader, *, obs: str, var: str, X: str,
                      uns: dict[str, Any]) -> None:
    """Every element of the obs/var axes of ``daf`` is in ``adata``, value by value, with its element type."""
    assert adata.obs_names.tolist() == daf.axis_vector(obs).tolist()
    assert adata.var_names.tolist() == daf.axis_vector(var).tolist()
    check_matrix(adata.X, daf.get_matrix(obs, var, X))  # (the CSR format is checked by its own tests)
    assert sp.issparse(adata.X) or isinstance(adata.X, np.ndarray)
    assert set(adata.layers) == daf.matrices_set(obs, var) - {X}
    for key in adata.layers:
        check_matrix(adata.layers[key], daf.get_matrix(obs, var, key))
    for axis, members in ((obs, adata.obsp), (var, adata.varp)):
        assert set(members) == daf.matrices_set(axis, axis)
        for key in members:
            check_matrix(members[key], daf.get_matrix(axis, axis, key).T)
    for axis, frame in ((obs, adata.obs), (var, adata.var)):
        assert set(frame.columns) == daf.vectors_set(axis)
        for column in frame.columns:
            check_vector(daf.get_vector(axis, column), frame[column])
    assert set(adata.uns) == set(uns)
    for key, value in uns.items():
        check_scalar(adata.uns[key], value)


def daf_scalars(daf: pydaf.DafReader) -> dict[str, Any]:
    return {name: daf.get_scalar(name) for name in daf.scalars_set()}


@pytest.mark.parametrize("X_is", ["UMIs", "fraction"])
def test_daf_as_h5ad_read_by_anndata(tmp_path, source, X_is):
    path = tmp_path / "out.h5ad"
    assert daf_as_h5ad(source, path, obs_is="cell", var_is="gene", X_is=X_is, progress=False) is None
    adata = read(path)
    check_adata_holds(adata, source, obs="cell", var="gene", X=X_is,
                      uns={**daf_scalars(source), "obs_is": "cell", "var_is": "gene", "X_is": X_is})
    assert sp.issparse(adata.X) == (X_is == "UMIs")


def test_daf_as_h5ad_file_layout(tmp_path, source):
    path = tmp_path / "out.h5ad"
    daf_as_h5ad(source, path, obs_is="cell", var_is="gene", X_is="UMIs", progress=False)

    def encoding(element: Any) -> tuple[str, str]:
        return element.attrs["encoding-type"], element.attrs["encoding-version"]

    with h5py.File(path, "r") as file:
        assert encoding(file) == ("anndata", "0.1.0")
        for member, axis in (("obs", "cell"), ("var", "gene")):
            frame = file[member]
            assert encoding(frame) == ("dataframe", "0.2.0")
            index = frame[frame.attrs["_index"]]
            assert decoded(index[()]) == source.axis_vector(axis).tolist()
            assert encoding(index) == ("string-array", "0.2.0")
            assert set(decoded(np.asarray(frame.attrs["column-order"]))) == source.vectors_set(axis)
            for name in source.vectors_set(axis):
                vector = source.get_vector(axis, name)
                if vector.dtype == object:
                    assert encoding(frame[name]) == ("string-array", "0.2.0")
                    assert h5py.check_string_dtype(frame[name].dtype) is not None
                    assert decoded(frame[name][()]) == vector.tolist()
                else:
                    assert encoding(frame[name]) == ("array", "0.2.0")
                    assert frame[name].dtype == vector.dtype
                    np.testing.assert_array_equal(frame[name][()], vector)
        X = file["X"]  # (that it is a csr_matrix is checked by test_daf_as_h5ad_writes_sparse_as_csr)
        assert encoding(X)[1] == "0.1.0"
        assert tuple(X.attrs["shape"]) == (len(CELLS), len(GENES))
        assert X["indices"].dtype in (np.int32, np.int64) and X["indptr"].dtype in (np.int32, np.int64)
        compressed = {"csr_matrix": sp.csr_matrix, "csc_matrix": sp.csc_matrix}[encoding(X)[0]]
        rebuilt = compressed((X["data"][()], X["indices"][()], X["indptr"][()]), shape=tuple(X.attrs["shape"]))
        check_matrix(rebuilt, source.get_matrix("cell", "gene", "UMIs"))
        fraction = file["layers/fraction"]
        assert encoding(fraction) == ("array", "0.2.0") and fraction.shape == (len(CELLS), len(GENES))
        np.testing.assert_array_equal(fraction[()], source.get_matrix("cell", "gene", "fraction"))
        assert encoding(file["obsp/knn"]) == ("csr_matrix", "0.1.0")
        assert encoding(file["varp/corr"]) == ("array", "0.2.0")
        np.testing.assert_array_equal(file["varp/corr"][()], source.get_matrix("gene", "gene", "corr").T)
        uns = file["uns"]
        assert encoding(uns["organism"]) == ("string", "0.2.0")
        assert encoding(uns["seed"]) == ("numeric-scalar", "0.2.0")
        assert set(uns) == source.scalars_set() | {"obs_is", "var_is", "X_is"}


@pytest.mark.parametrize("stored", ["cell,gene", "gene,cell", "both"])
def test_daf_as_h5ad_writes_sparse_without_relayout(tmp_path, stored):
    # csr_matrix from the stored gene x cell layout; csc_matrix when only cell x gene is stored (nothing relaid out).
    umis = values_of(21, (len(CELLS), len(GENES)), np.int64)
    counts = values_of(22, (len(CELLS), len(GENES)), np.float32)
    daf = pydaf.MemoryDaf(name="layouts!").add_axis("cell", CELLS).add_axis("gene", GENES)
    for name, values in (("UMIs", umis), ("counts", counts)):
        if stored == "gene,cell":
            daf.set_matrix("gene", "cell", name, sp.csc_matrix(values.T), relayout=False)
        else:
            daf.set_matrix("cell", "gene", name, sp.csc_matrix(values), relayout=stored == "both")
    daf.set_matrix("cell", "cell", "knn", sp.csc_matrix(asymmetric(23, len(CELLS), np.float32)))
    path = tmp_path / "out.h5ad"
    daf_as_h5ad(daf, path, obs_is="cell", var_is="gene", X_is="UMIs", progress=False)
    encoding = "csc" if stored == "cell,gene" else "csr"
    with h5py.File(path, "r") as file:
        for element in ("X", "layers/counts", "obsp/knn"):
            expected = "csr_matrix" if element == "obsp/knn" else f"{encoding}_matrix"
            assert file[element].attrs["encoding-type"] == expected, element
            assert file[element]["indices"].dtype in (np.int32, np.int64)
    adata = read(path)
    kind = sp.csc_matrix if encoding == "csc" else sp.csr_matrix
    assert isinstance(adata.X, kind) and isinstance(adata.layers["counts"], kind)
    check_matrix(adata.X, sp.csr_matrix(umis))
    check_matrix(adata.layers["counts"], sp.csr_matrix(counts))


def test_daf_as_h5ad_names_from_scalars_and_defaults(tmp_path):
    daf = build_daf(pydaf.MemoryDaf(name="named!"))
    daf.set_scalar("obs_is", "cell").set_scalar("var_is", "gene").set_scalar("X_is", "UMIs")
    path = tmp_path / "named.h5ad"
    daf_as_h5ad(daf, path, progress=False)
    check_adata_holds(read(path), daf, obs="cell", var="gene", X="UMIs", uns=daf_scalars(daf))

    plain = pydaf.MemoryDaf(name="plain!").add_axis("obs", ["A", "B"]).add_axis("var", ["X", "Y", "Z"])
    plain.set_scalar("organism", "yeast")
    plain.set_matrix("obs", "var", "X", np.arange(6, dtype=np.int64).reshape(2, 3), relayout=False)
    plain.set_matrix("obs", "var", "other", np.ones((2, 3), dtype=np.float32), relayout=False)
    path = tmp_path / "plain.h5ad"
    daf_as_h5ad(plain, path, progress=False)
    adata = read(path)
    check_adata_holds(adata, plain, obs="obs", var="var", X="X", uns={"organism": "yeast"})  # no obs_is/var_is/X_is


def test_daf_as_h5ad_missing_X(tmp_path):
    daf = build_daf(pydaf.MemoryDaf(name="cells!"))
    with pytest.raises(pydaf.DafMissingError):  # asked for by name
        daf_as_h5ad(daf, tmp_path / "a.h5ad", obs_is="cell", var_is="gene", X_is="nope", progress=False)
    assert not (tmp_path / "a.h5ad").exists()
    with pytest.raises(pydaf.DafMissingError):
        daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="nope")


def test_daf_without_X_exports_an_anndata_without_X(tmp_path):
    # The default X_is ("X") names no matrix: the AnnData has no X (anndata writes and reads such files); the
    # matrices of the two axes are layers.
    daf = build_daf(pydaf.MemoryDaf(name="cells!"))
    path = tmp_path / "no_x.h5ad"
    daf_as_h5ad(daf, path, obs_is="cell", var_is="gene", progress=False)
    with h5py.File(path, "r") as file:
        assert "X" not in file
    adata = read(path)
    assert adata.X is None
    assert set(adata.layers) == daf.matrices_set("cell", "gene")
    for name in adata.layers:
        check_matrix(adata.layers[name], daf.get_matrix("cell", "gene", name))
    assert "X_is" not in adata.uns and adata.uns["obs_is"] == "cell"
    in_memory = daf_as_anndata(daf, obs_is="cell", var_is="gene")
    assert in_memory.X is None and set(in_memory.layers) == set(adata.layers)


@pytest.mark.parametrize("how", ["file", "memory", "h5py"])
def test_anndata_without_X_round_trips(tmp_path, how):
    adata = make_adata("csr")
    if how == "h5py":  # a file whose X was removed with h5py
        path = write(adata, tmp_path / "no_x.h5ad")
        with h5py.File(path, "r+") as file:
            del file["X"]
        adata = read(path)
    adata.X = None
    path = write(adata, tmp_path / "no_x.h5ad") if how != "h5py" else path
    with h5py.File(path, "r") as file:
        assert "X" not in file
    daf = anndata_as_daf(adata) if how == "memory" else h5ad_as_daf(path, progress=False)
    assert daf.matrices_set("obs", "var") == set(adata.layers)
    for key, layer in adata.layers.items():
        check_matrix(daf.get_matrix("obs", "var", key), layer)
    daf_as_h5ad(daf, tmp_path / "again.h5ad", progress=False)
    again = read(tmp_path / "again.h5ad")
    assert again.X is None
    check_adata_round_trip(again, read(path))


# Full round trips through files.


def check_daf_round_trip(back: pydaf.DafReader, daf: pydaf.DafReader) -> None:
    """``back`` (imported from an h5ad exported from ``daf`` as cell/gene/UMIs) holds the same names and values."""
    assert back.axes_set() == {"cell", "gene"}
    for axis in ("cell", "gene"):
        assert back.axis_vector(axis).tolist() == daf.axis_vector(axis).tolist()
        assert back.vectors_set(axis) == daf.vectors_set(axis)
        for name in daf.vectors_set(axis):
            stored, original = back.get_vector(axis, name), daf.get_vector(axis, name)
            assert stored.tolist() == original.tolist() and stored.dtype == original.dtype
    assert back.matrices_set("cell", "gene") == daf.matrices_set("cell", "gene") == {"UMIs", "fraction"}
    for name in ("UMIs", "fraction"):
        check_matrix(back.get_matrix("cell", "gene", name), daf.get_matrix("cell", "gene", name))
    for axis in ("cell", "gene"):
        assert back.matrices_set(axis, axis) == daf.matrices_set(axis, axis)
        for name in daf.matrices_set(axis, axis):
            check_matrix(back.get_matrix(axis, axis, name), daf.get_matrix(axis, axis, name))
    assert back.scalars_set() == daf.scalars_set() | {"obs_is", "var_is", "X_is"}
    for name in daf.scalars_set():
        check_scalar(back.get_scalar(name), daf.get_scalar(name))
    assert [back.get_scalar(name) for name in ("obs_is", "var_is", "X_is")] == ["cell", "gene", "UMIs"]


def test_daf_to_h5ad_to_daf(tmp_path, source, store):
    path = tmp_path / "cells.h5ad"
    daf_as_h5ad(source, path, obs_is="cell", var_is="gene", X_is="UMIs", progress=False)
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, relayout=True, progress=False))
    assert messages == []
    back = store.reopen()
    check_daf_round_trip(back, source)
    assert layouts(back, "cell", "gene", "UMIs") == {("cell", "gene"), ("gene", "cell")}

    again = tmp_path / "again.h5ad"  # the names come back from the scalars recorded in uns
    daf_as_h5ad(back, again, progress=False)
    check_adata_holds(read(again), source, obs="cell", var="gene", X="UMIs",
                      uns={**daf_scalars(source), "obs_is": "cell", "var_is": "gene", "X_is": "UMIs"})


def check_adata_round_trip(again: anndata.AnnData, original: anndata.AnnData, *,
                           extra_uns: dict[str, Any] | None = None) -> None:
    """``again`` (through Daf) holds the same as ``original``; categoricals come back categoricals, with their
    categories in their order; sparse matrices come back sparse; ``uns`` has the scalars and the colors of categorical
    columns of ``original`` (and ``extra_uns``)."""
    assert again.obs_names.tolist() == original.obs_names.tolist()
    assert again.var_names.tolist() == original.var_names.tolist()
    if original.X is None:
        assert again.X is None
    else:
        check_matrix(again.X, original.X)
    for member in ("layers", "obsp", "varp"):
        assert set(getattr(again, member)) == set(getattr(original, member))
        for key, matrix in getattr(original, member).items():
            check_matrix(getattr(again, member)[key], matrix)
    for frame, before in ((again.obs, original.obs), (again.var, original.var)):
        assert list(frame.columns) == list(before.columns)  # in their order
        for column in before.columns:
            assert column_expectation(frame[column])[0] == column_expectation(before[column])[0]
            kind, expected = column_expectation(before[column])
            if kind == "strings":
                assert column_expectation(frame[column])[1] == expected
            else:
                check_vector(np.asarray(frame[column].to_numpy()), before[column])
            if isinstance(before[column].dtype, pd.CategoricalDtype):
                assert isinstance(frame[column].dtype, pd.CategoricalDtype), column
                assert decoded_categories(frame[column]) == decoded_categories(before[column])
                assert frame[column].cat.ordered == before[column].cat.ordered
                assert frame[column].isna().sum() == before[column].isna().sum()
    scalars = {key: value for key, value in original.uns.items() if is_scalar(value)} | (extra_uns or {})
    colors = kept_colors(original)
    assert set(again.uns) == set(scalars) | colors
    for key, value in scalars.items():
        check_scalar(again.uns[key], value)
    for key in colors:
        assert np.asarray(again.uns[key]).tolist() == np.asarray(original.uns[key]).tolist()


@pytest.mark.parametrize("x_kind", X_KINDS)
def test_h5ad_to_daf_to_h5ad(tmp_path, store, x_kind):
    first = write(make_adata(x_kind, np.float32), tmp_path / "first.h5ad")
    h5ad_as_daf(first, store.writer, relayout=False, progress=False)
    second = tmp_path / "second.h5ad"
    daf_as_h5ad(store.reopen(), second, progress=False)
    check_adata_round_trip(read(second), read(first))


def test_h5ad_to_daf_to_h5ad_with_names(tmp_path):
    adata = make_adata("csr")
    adata.uns.update({"obs_is": "cell", "var_is": "gene", "X_is": "UMIs"})
    first = write(adata, tmp_path / "first.h5ad")
    daf = h5ad_as_daf(first, relayout=False, progress=False)
    assert daf.axes_set() == {"cell", "gene"} and "UMIs" in daf.matrices_set("cell", "gene")
    second = tmp_path / "second.h5ad"
    daf_as_h5ad(daf, second, progress=False)
    again = read(second)
    check_adata_round_trip(again, read(first))
    assert (again.uns["obs_is"], again.uns["var_is"], again.uns["X_is"]) == ("cell", "gene", "UMIs")


# In memory.


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.bool_], ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("x_kind", X_KINDS)
def test_anndata_as_daf(store, x_kind, dtype):
    adata = make_adata(x_kind, dtype)
    result = anndata_as_daf(adata, store.writer, obs_is="cell", var_is="gene", X_is="UMIs", relayout=True,
                            unsupported_handler="error")
    assert result is store.writer
    daf = store.reopen()
    check_daf_holds(daf, adata, obs="cell", var="gene", X="UMIs")
    for name in ("UMIs", *adata.layers):
        assert layouts(daf, "cell", "gene", name) == {("cell", "gene"), ("gene", "cell")}


@pytest.mark.parametrize("x_kind", X_KINDS)
def test_anndata_as_daf_without_relayout(x_kind):
    adata = make_adata(x_kind)
    daf = anndata_as_daf(adata, relayout=False)
    expected = {"csr": ("var", "obs"), "csc": ("obs", "var"), "dense": ("var", "obs")}
    assert layouts(daf, "obs", "var", "X") == {expected[x_kind]}
    for key, layer in adata.layers.items():
        kind = layer.format if sp.issparse(layer) else "dense"
        assert layouts(daf, "obs", "var", key) == {expected[kind]}
    check_daf_holds(daf, adata)
    assert base_name(daf.name) == "anndata"


def test_anndata_as_daf_nullable_and_unsupported(store):
    adata, elements = with_unsupported(make_adata("csr"))
    adata.obs["n_genes"] = pd.array([10, None, 30, 40, 50, 60], dtype="Int64")
    adata.obs["passed"] = pd.array([True, False, None, True, True, None], dtype="boolean")
    adata.obs["sample"] = pd.array(["s0", "s1", "s2", None, "s4", "s5"], dtype="string")
    adata.var["symbol"] = pd.array(["a", "b", "c", "d"], dtype="string")  # nothing missing: not reported
    reported = elements  # (the nullable columns are kept whole: nothing to report)

    target = Store(MEMORY, pydaf.MemoryDaf(name="target!"))
    with pytest.raises(pydaf.DafUnsupportedError) as raised:
        anndata_as_daf(adata, target.writer, unsupported_handler="error")
    assert any(element in str(raised.value) for element in reported)
    assert target.is_empty()

    _, messages = caught_messages(lambda: anndata_as_daf(adata, store.writer, unsupported_handler="warn"))
    check_one_warning_per_element(messages, reported)
    daf = store.reopen()
    check_daf_holds(daf, adata)
    np.testing.assert_array_equal(daf.get_vector("obs", "n_genes"), [10, np.nan, 30, 40, 50, 60])
    np.testing.assert_array_equal(daf.get_vector("obs", "passed"), [1.0, 0.0, np.nan, 1.0, 1.0, np.nan])
    assert daf.get_vector("obs", "sample").tolist() == ["s0", "s1", "s2", "", "s4", "s5"]
    assert daf.get_vector("var", "symbol").tolist() == ["a", "b", "c", "d"]

    _, messages = caught_messages(lambda: anndata_as_daf(adata, unsupported_handler="ignore"))
    assert messages == []


@pytest.mark.parametrize("X_is", ["UMIs", "fraction"])
def test_daf_as_anndata(source, X_is):
    adata = daf_as_anndata(source, obs_is="cell", var_is="gene", X_is=X_is)
    assert isinstance(adata, anndata.AnnData)
    check_adata_holds(adata, source, obs="cell", var="gene", X=X_is,
                      uns={**daf_scalars(source), "obs_is": "cell", "var_is": "gene", "X_is": X_is})
    assert isinstance(adata.X, sp.csr_matrix if X_is == "UMIs" else np.ndarray)
    assert isinstance(adata.obs, pd.DataFrame) and isinstance(adata.var, pd.DataFrame)

    converted = daf_as_anndata(source, obs_is="cell", var_is="gene", X_is=X_is, X_eltype=np.float64)
    assert converted.X.dtype == np.float64
    np.testing.assert_array_equal(dense(converted.X), dense(source.get_matrix("cell", "gene", X_is)))
    assert isinstance(converted.X, sp.csr_matrix if X_is == "UMIs" else np.ndarray)


def test_in_memory_round_trips(source):
    adata = daf_as_anndata(source, obs_is="cell", var_is="gene", X_is="UMIs")
    back = anndata_as_daf(adata, relayout=False)  # names from uns
    check_daf_round_trip(back, source)

    original = make_adata("csc", np.float32)
    daf = anndata_as_daf(original, obs_is="cell", var_is="gene", X_is="UMIs")
    again = daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="UMIs")
    check_adata_round_trip(again, original, extra_uns={"obs_is": "cell", "var_is": "gene", "X_is": "UMIs"})


# The shared fixtures.


def test_fixture_canonical(store):
    path = fixture_path("anndata_canonical.h5ad")
    expected = read(path)
    with h5py.File(path, "r") as file:
        X = file["X"][()]
    np.testing.assert_array_equal(dense(expected.X), X)
    h5ad_as_daf(path, store.writer, relayout=False, unsupported_handler="error", progress=False)
    daf = store.reopen()
    check_daf_holds(daf, expected)
    assert daf.axes_set() == {"obs", "var"} and daf.scalars_set() == set()
    assert layouts(daf, "obs", "var", "X") == {("var", "obs")}  # dense: as the file holds it
    assert isinstance(daf.get_stored_matrix("obs", "var", "X"), np.ndarray)


@pytest.mark.parametrize("handler", ["warn", "ignore"])
def test_fixture_nullable_strings(store, handler):
    path = fixture_path("anndata_nullable_strings.h5ad")
    with h5py.File(path, "r") as file:
        obs_names = decoded(file["obs/_index/values"][()])
        var_names = decoded(file["var/_index/values"][()])
        missing = {f"obs/{name}" for name, element in file["obs"].items()
                   if isinstance(element, h5py.Group) and "mask" in element and element["mask"][()].any()}
        assert file["obs/cell_type/categories"].attrs["encoding-type"] == "nullable-string-array"
    assert missing  # the fixture has missing entries to report
    expected = read(path)
    assert expected.obs_names.tolist() == obs_names and expected.var_names.tolist() == var_names
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, unsupported_handler=handler,
                                                      relayout=False, progress=False))
    assert messages == []  # the missing entries are kept (NaN / ""), nothing is lost
    daf = store.reopen()
    check_daf_holds(daf, expected)  # categorical of nullable strings -> strings; missing -> NaN / ""
    assert daf.axis_vector("obs").tolist() == obs_names


def test_fixture_nullable_strings_loses_nothing(store):
    path = fixture_path("anndata_nullable_strings.h5ad")
    h5ad_as_daf(path, store.writer, unsupported_handler="error", progress=False)  # nothing to report
    assert store.reopen().get_scalar("obs_n_umis_nullable") == "Int64"


def test_fixture_small_test_legacy_dense(store):
    path = fixture_path("small_test.h5ad")
    with h5py.File(path, "r") as file:
        assert "encoding-type" not in file["obs/_index"].attrs  # legacy: plain datasets
        obs_names, var_names = decoded(file["obs/_index"][()]), decoded(file["var/_index"][()])
        assert file["uns/organism"].shape == (1,) and file["uns/organism"].dtype.kind == "O"
        X = file["X"][()]
    expected = read(path)
    assert expected.obs_names.tolist() == obs_names and expected.var_names.tolist() == var_names
    np.testing.assert_array_equal(expected.X, X)
    # anndata reads the 1-element string array uns/organism as an array: Daf can't hold it as one.
    assert isinstance(expected.uns["organism"], np.ndarray) and expected.uns["organism"].shape == (1,)
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, relayout=False, progress=False))
    check_one_warning_per_element(messages, {"uns/organism"})
    assert "array of shape (1,)" in messages[0]
    daf = store.reopen()
    assert daf.axis_vector("obs").tolist() == obs_names and daf.axis_vector("var").tolist() == var_names
    check_matrix(daf.get_matrix("obs", "var", "X"), X)
    assert daf.vectors_set("obs") == set(expected.obs.columns) and daf.vectors_set("var") == set(expected.var.columns)
    for axis, frame in (("obs", expected.obs), ("var", expected.var)):
        for column in frame.columns:
            check_vector(daf.get_vector(axis, column), frame[column])
    assert daf.get_vector("obs", "age").dtype == expected.obs["age"].dtype == np.int32
    assert uns_scalars(daf) == set()
    check_column_order(daf, "obs", list(expected.obs.columns))  # donor, age


@pytest.mark.parametrize("handler", ["warn", "ignore"])
def test_fixture_sparse_test_legacy_sparse(store, handler):
    path = fixture_path("sparse_test.h5ad")
    with h5py.File(path, "r") as file:
        assert dict(file["obs"].attrs) == {}  # legacy: no dataframe attributes
        obs_names, var_names = decoded(file["obs/_index"][()]), decoded(file["var/_index"][()])
        codes = file["obs/celltype/codes"][()]
        categories = decoded(file["obs/celltype/categories"][()])
        donor, chrom = decoded(file["obs/donor"][()]), decoded(file["var/chrom"][()])
        kept = {(member, key) for member in ("obsm", "varm") for key in file[member]}  # 2-D numeric arrays: kept
        unsupported = {f"uns/{key}" for key, element in file["uns"].items() if isinstance(element, h5py.Group)}
        unsupported |= {f"uns/{key}" for key, element in file["uns"].items() if isinstance(element, h5py.Dataset)
                        and element.shape == (1,)}  # 1-element arrays, as anndata reads them
    assert {"uns/params", "uns/organism"} <= unsupported and kept == {("obsm", "X_umap"), ("varm", "PCs")}
    expected = read(path)  # anndata reads the CSR X, the categorical and the strings (as bytes) of this file
    assert isinstance(expected.X, sp.csr_matrix)
    assert decoded(expected.obs["_index"].to_numpy()) == obs_names
    assert decoded(np.asarray(expected.obs["celltype"].astype(object))) == [categories[code] for code in codes]
    assert decoded(expected.obs["donor"].to_numpy()) == donor
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, unsupported_handler=handler,
                                                      relayout=False, progress=False))
    if handler == "warn":
        check_one_warning_per_element(messages, unsupported)
    else:
        assert messages == []
    daf = store.reopen()
    assert daf.axis_vector("obs").tolist() == obs_names and daf.axis_vector("var").tolist() == var_names
    check_matrix(daf.get_matrix("obs", "var", "X"), expected.X)
    assert layouts(daf, "obs", "var", "X") == {("var", "obs")}  # CSR: as the file holds it
    assert isinstance(daf.get_stored_matrix("var", "obs", "X"), pydaf.SparseMatrixCSC)
    assert daf.vectors_set("obs") == {"celltype", "donor"} and daf.vectors_set("var") == {"chrom"}
    assert daf.get_vector("obs", "celltype").tolist() == ["" if code < 0 else categories[code] for code in codes]
    assert daf.get_vector("obs", "donor").tolist() == donor
    assert daf.get_vector("var", "chrom").tolist() == chrom
    assert daf.scalars_set() == {"obsm_X_umap_encoding", "varm_PCs_encoding", "obs_celltype_categories"}
    assert daf.get_scalar("obs_celltype_categories") == "\n".join(categories)  # their order: T, B, NK
    for member, key in kept:
        axis = "obs" if member == "obsm" else "var"
        assert np.array_equal(daf.get_matrix(axis, f"{member}_{key}", key), getattr(expected, member)[key])


def test_fixture_sparse_test_error(store):
    path = fixture_path("sparse_test.h5ad")
    with pytest.raises(pydaf.DafUnsupportedError) as raised:
        h5ad_as_daf(path, store.writer, unsupported_handler="error", progress=False)
    assert any(element in str(raised.value) for element in ("uns/params", "uns/organism"))
    assert store.is_empty()


def test_legacy_categories_subgroup_and_string_scalars(tmp_path):
    # The anndata 0.7 layout (see the on-disk spec): a v0.1.0 dataframe whose categorical column holds codes, with a
    # `categories` object reference to `__categories/<column>`; string scalars as 0-d object datasets and (anndata
    # < 0.7) 1-element fixed-length byte strings; a 1-element object dataset is an array (as anndata reads it).
    path = tmp_path / "legacy.h5ad"
    names, kinds, codes, counts = ["a", "b", "c", "d"], ["x", "y"], np.array([1, 0, -1, 1], np.int8), [4, 5, 6, 7]
    strings = h5py.string_dtype()
    with h5py.File(path, "w") as file:
        obs = file.create_group("obs")
        obs.attrs.update({"_index": "index", "column-order": np.array(["kind", "n"], dtype=strings),
                          "encoding-type": "dataframe", "encoding-version": "0.1.0"})
        obs.create_dataset("index", data=np.array(names, dtype=strings))
        categories = obs.create_group("__categories").create_dataset("kind", data=np.array(kinds, dtype=strings))
        obs.create_dataset("kind", data=codes).attrs["categories"] = categories.ref
        obs.create_dataset("n", data=np.array(counts, dtype=np.int16))
        var = file.create_group("var")
        var.attrs.update({"_index": "index", "column-order": np.array([], dtype=strings),
                          "encoding-type": "dataframe", "encoding-version": "0.1.0"})
        var.create_dataset("index", data=np.array(["g1", "g2"], dtype=strings))
        file.create_dataset("X", data=np.arange(8, dtype=np.float32).reshape(4, 2))
        uns = file.create_group("uns")
        uns.create_dataset("title", data="zero-d", dtype=strings)
        uns.create_dataset("organism", data=np.array([b"one-element"]))
        uns.create_dataset("colors", data=np.array(["red"], dtype=strings))
        uns.create_dataset("n_pcs", data=np.array([50]))
    expected = read(path)
    assert expected.uns["organism"] == "one-element"
    assert expected.uns["colors"].tolist() == ["red"] and expected.uns["n_pcs"].tolist() == [50]
    with pytest.raises(pydaf.DafUnsupportedError, match="unsupported element: uns/colors"):
        h5ad_as_daf(path, unsupported_handler="error", relayout=False, progress=False)
    daf, messages = caught_messages(lambda: h5ad_as_daf(path, relayout=False, progress=False))
    check_one_warning_per_element(messages, {"uns/colors", "uns/n_pcs"})
    assert all("array of shape (1,)" in message for message in messages)
    assert daf.axis_vector("obs").tolist() == names and daf.axis_vector("var").tolist() == ["g1", "g2"]
    assert daf.vectors_set("obs") == {"kind", "n"}
    assert daf.get_vector("obs", "kind").tolist() == ["" if code < 0 else kinds[code] for code in codes]
    stored = daf.get_vector("obs", "n")
    assert stored.tolist() == counts and stored.dtype == np.int16
    check_matrix(daf.get_matrix("obs", "var", "X"), np.arange(8, dtype=np.float32).reshape(4, 2))
    assert daf_scalars(daf) == {"title": "zero-d", "organism": "one-element", "obs_index_name": "index",
                                "var_index_name": "index", "obs_kind_categories": "x\ny"}  # (what anndata reads)


# The command line, as a real process.


def run_pydaf(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True,
                          cwd=REPOSITORY, env={**os.environ, "PYTHONWARNINGS": "default"})


def test_cli_convert_h5ad_to_h5df_and_back(tmp_path):
    source = write(make_adata("csr"), tmp_path / "a.h5ad")
    done = run_pydaf("convert", str(source), str(tmp_path / "b.h5df"), "--no-progress")
    assert done.returncode == 0, done.stderr
    daf = pydaf.H5df(str(tmp_path / "b.h5df"), "r")
    check_daf_holds(daf, read(source))

    done = run_pydaf("convert", str(tmp_path / "b.h5df"), str(tmp_path / "c.h5ad"), "--no-progress")
    assert done.returncode == 0, done.stderr
    check_adata_round_trip(read(tmp_path / "c.h5ad"), read(source))


def test_cli_convert_with_names_through_files_daf(tmp_path):
    source = write(make_adata("dense", np.int32), tmp_path / "a.h5ad")
    done = run_pydaf("convert", str(source), str(tmp_path / "b.daf"), "--obs-is", "cell", "--var-is", "gene",
                     "--X-is", "UMIs", "--no-progress")
    assert done.returncode == 0, done.stderr
    daf = pydaf.open_daf(str(tmp_path / "b.daf"), "r")
    assert daf.axes_set() == {"cell", "gene"}
    check_daf_holds(daf, read(source), obs="cell", var="gene", X="UMIs")

    done = run_pydaf("convert", str(tmp_path / "b.daf"), str(tmp_path / "c.h5ad"), "--obs-is", "cell",
                     "--var-is", "gene", "--X-is", "UMIs", "--no-progress")
    assert done.returncode == 0, done.stderr
    check_adata_round_trip(read(tmp_path / "c.h5ad"), read(source),
                           extra_uns={"obs_is": "cell", "var_is": "gene", "X_is": "UMIs"})


def test_cli_convert_relayout(tmp_path):
    source = write(make_adata("csr"), tmp_path / "a.h5ad")
    done = run_pydaf("convert", str(source), str(tmp_path / "b.h5df"), "--relayout", "--no-progress")
    assert done.returncode == 0, done.stderr
    daf = pydaf.H5df(str(tmp_path / "b.h5df"), "r")
    assert layouts(daf, "obs", "var", "X") == {("obs", "var"), ("var", "obs")}


def test_cli_convert_stores_the_file_layout_by_default(tmp_path):
    source = write(make_adata("csc"), tmp_path / "a.h5ad")
    done = run_pydaf("convert", str(source), str(tmp_path / "b.h5df"), "--no-progress")
    assert done.returncode == 0, done.stderr
    daf = pydaf.H5df(str(tmp_path / "b.h5df"), "r")
    assert layouts(daf, "obs", "var", "X") == {("obs", "var")}  # CSC: as the file holds it
    check_daf_holds(daf, read(source))


def test_cli_convert_errors(tmp_path):
    missing = tmp_path / "missing.h5ad"
    done = run_pydaf("convert", str(missing), str(tmp_path / "b.h5df"), "--no-progress")
    assert done.returncode != 0
    assert str(missing) in done.stderr
    assert "Traceback" not in done.stderr
