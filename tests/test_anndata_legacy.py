"""Real and legacy ``.h5ad`` layouts against the real ``anndata.read_h5ad``: anndata < 0.7 files
(``obs``/``var``/``obsm`` as compound datasets, categories in ``uns/<column>_categories``, ``h5sparse_format``
matrices, the neighbors graph in ``uns``, 1-element byte-string scalars) built with h5py, and scanpy's own bundled
``pbmc68k_reduced.h5ad`` (taken out of the scanpy wheel, downloaded once per session from the package index). Every
value pydaf imports is compared to anndata's reading of the same file; round trips go through ``daf_as_h5ad`` and
anndata again.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

import anndata
import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import daf_as_anndata, daf_as_h5ad, h5ad_as_daf

from .test_anndata import (
    Store,
    caught_messages,
    check_adata_round_trip,
    check_daf_holds,
    check_one_warning_per_element,
    is_scalar,
    kept_colors,
    read,
    uns_scalars,
)

# Scanpy's bundled data set, inside its wheel (a test-only download; scanpy itself is never installed).
PBMC_IN_WHEEL = "scanpy/datasets/10x_pbmc68k_reduced.h5ad"


@pytest.fixture(scope="session")
def pbmc68k_reduced(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("scanpy-wheel")
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "scanpy", "--no-deps", "--only-binary=:all:",
                               "-q", "-d", str(folder)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("the scanpy wheel could not be downloaded in time")
    wheels = sorted(folder.glob("scanpy-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(f"the scanpy wheel could not be downloaded: {done.stderr.strip()[-300:]}")
    path = folder / "pbmc68k_reduced.h5ad"
    with zipfile.ZipFile(wheels[-1]) as wheel:
        path.write_bytes(wheel.read(PBMC_IN_WHEEL))
    return path


@pytest.fixture
def store(backend, tmp_path) -> Store:
    return Store(backend, backend.new(tmp_path, "legacy!"))


def unsupported_elements(adata: anndata.AnnData) -> set[str]:
    """The elements Daf can't hold, from anndata's reading of the file: its ``uns`` values that are not scalars (a
    ``<column>_categories`` it did not use stays there; the colors of categorical columns are kept). The numeric
    ``obsm``/``varm`` are kept (tests/test_anndata_obsm.py), and so is the legacy ``raw.*`` (tests/test_anndata_raw.py).
    """
    elements = {f"uns/{key}" for key, value in adata.uns.items() if not is_scalar(value)}
    elements -= {f"uns/{key}" for key in kept_colors(adata)}
    return elements


# scanpy's pbmc68k_reduced (anndata 0.6 layout).


def test_pbmc68k_reduced_is_a_legacy_file(pbmc68k_reduced):
    with h5py.File(pbmc68k_reduced, "r") as file:
        assert isinstance(file["obs"], h5py.Dataset) and file["obs"].dtype.names[0] == "index"
        assert isinstance(file["var"], h5py.Dataset) and isinstance(file["obsm"], h5py.Dataset)
        assert "bulk_labels_categories" in file["uns"]
        assert file["uns/neighbors/connectivities"].attrs["h5sparse_format"] in ("csr", b"csr")


def test_pbmc68k_reduced_imports_as_anndata_reads_it(pbmc68k_reduced, store):
    expected = read(pbmc68k_reduced)
    assert expected.obs["bulk_labels"].dtype == "category" and set(expected.obsp) == {"distances", "connectivities"}
    _, messages = caught_messages(lambda: h5ad_as_daf(pbmc68k_reduced, store.writer, progress=False))
    elements = unsupported_elements(expected)
    assert "uns/neighbors" in elements and "uns/bulk_labels_colors" not in elements  # (colors: kept)
    assert not [message for message in messages if "raw" in message]  # (raw.X and raw.var: kept as raw_var)
    check_one_warning_per_element(messages, elements)
    daf = store.reopen()
    check_daf_holds(daf, expected)  # names, X, obsp (transposed), every column (categoricals as strings), order
    assert uns_scalars(daf) == set()
    assert daf.get_vector("obs", "bulk_labels").tolist() == expected.obs["bulk_labels"].astype(str).tolist()


def test_pbmc68k_reduced_round_trips(pbmc68k_reduced, tmp_path):
    expected = read(pbmc68k_reduced)
    daf = h5ad_as_daf(pbmc68k_reduced, str(tmp_path / "pbmc.h5df"), unsupported_handler="ignore", progress=False)
    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    again = read(tmp_path / "back.h5ad")
    check_adata_round_trip(again, expected)  # same names, X, obsp, columns in their order (categoricals as strings)
    check_adata_round_trip(daf_as_anndata(daf), expected)
    back = h5ad_as_daf(tmp_path / "back.h5ad", unsupported_handler="error", progress=False)
    check_daf_holds(back, expected)


# Legacy layouts built with h5py.


def strings(values: list[str], size: int) -> np.ndarray:
    return np.array([value.encode() for value in values], dtype=f"S{size}")


def write_legacy(path: pathlib.Path, *, x_format: str = "csr") -> dict:
    """An anndata 0.6-style file: compound obs/var/obsm, codes with uns categories (one not fitting, one missing
    entry), an h5sparse X (or dense), uns neighbors graph, 1-element scalars; returns what was written."""
    names = ["c0", "c1", "c2", "c3", "c4"]
    genes = ["g0", "g1", "g2"]
    X = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 3], [4, 5, 0], [0, 0, 0]], dtype=np.float32)
    obs = np.zeros(5, dtype=[("index", "S2"), ("kind", "i1"), ("n_genes", "<i8"), ("score", "<f4"),
                             ("batch", "i1"), ("donor", "S6")])
    obs["index"] = strings(names, 2)
    obs["kind"] = [1, 0, -1, 1, 2]
    obs["n_genes"] = [7, 8, 9, 10, 11]
    obs["score"] = [0.5, 1.5, 2.5, 3.5, 4.5]
    obs["batch"] = [0, 1, 5, 1, 0]  # 5 doesn't fit its 2 categories: stays an integer column (anndata's rule)
    obs["donor"] = strings(["alice", "bob", "alice", "carol", "bob"], 6)
    var = np.zeros(3, dtype=[("index", "S2"), ("highly_variable", "?"), ("means", "<f8")])
    var["index"] = strings(genes, 2)
    var["highly_variable"] = [True, False, True]
    var["means"] = [0.1, 0.2, 0.3]
    obsm = np.zeros(5, dtype=[("X_pca", "<f4", (2,)), ("X_umap", "<f8", (2,))])
    graph = sp.csr_matrix(np.array([[0, 1, 0, 0, 0], [1, 0, 0, 0, 2], [0, 0, 0, 3, 0], [0, 0, 3, 0, 0],
                                    [0, 2, 0, 0, 0]], dtype=np.float64))
    with h5py.File(path, "w") as file:
        file.create_dataset("obs", data=obs)
        file.create_dataset("var", data=var)
        file.create_dataset("obsm", data=obsm)
        if x_format == "dense":
            file.create_dataset("X", data=X)
        else:
            matrix = sp.csr_matrix(X) if x_format == "csr" else sp.csc_matrix(X)
            group = file.create_group("X")
            group.attrs["h5sparse_format"] = x_format
            group.attrs["h5sparse_shape"] = np.array(X.shape)
            for part in ("data", "indices", "indptr"):
                group.create_dataset(part, data=getattr(matrix, part))
        uns = file.create_group("uns")
        uns.create_dataset("kind_categories", data=strings(["B", "T", "NK"], 2))
        uns.create_dataset("batch_categories", data=strings(["b1", "b2"], 2))
        uns.create_dataset("kind_colors", data=strings(["#ff0000", "#00ff00", "#0000ff"], 7))
        uns.create_dataset("title", data=strings(["pbmc"], 4))  # anndata < 0.7's string scalar
        uns.create_dataset("n_pcs", data=np.array([50]))  # a 1-element array
        neighbors = uns.create_group("neighbors")
        connectivities = neighbors.create_group("connectivities")
        connectivities.attrs["h5sparse_format"] = "csr"
        connectivities.attrs["h5sparse_shape"] = np.array(graph.shape)
        for part in ("data", "indices", "indptr"):
            connectivities.create_dataset(part, data=getattr(graph, part))
        params = neighbors.create_group("params")
        params.create_dataset("method", data=strings(["umap"], 4))
    return {"names": names, "genes": genes, "X": X, "graph": graph}


@pytest.mark.parametrize("x_format", ["csr", "csc", "dense"])
def test_legacy_compound_layout_imports_as_anndata_reads_it(tmp_path, store, x_format):
    path = tmp_path / "legacy.h5ad"
    written = write_legacy(path, x_format=x_format)
    expected = read(path)
    # What anndata makes of it (so the comparison below is against anndata, not against pydaf's reading).
    assert expected.obs_names.tolist() == written["names"] and expected.var_names.tolist() == written["genes"]
    assert expected.obs["kind"].astype(object).tolist()[:2] == ["T", "B"] and expected.obs["batch"].dtype == np.int8
    assert expected.uns["title"] == "pbmc" and expected.uns["n_pcs"].tolist() == [50]
    assert set(expected.obsp) == {"connectivities"} and sp.issparse(expected.X) == (x_format != "dense")
    _, messages = caught_messages(lambda: h5ad_as_daf(path, store.writer, progress=False))
    elements = {"uns/batch_categories", "uns/n_pcs", "uns/neighbors"}  # (uns/kind_colors: kept, kind's colors)
    assert unsupported_elements(expected) == elements
    check_one_warning_per_element(messages, elements)
    assert any("uns/n_pcs (array of shape (1,))" in message for message in messages)
    daf = store.reopen()
    check_daf_holds(daf, expected)
    assert daf.get_vector("obs", "kind").tolist() == ["T", "B", "", "T", "NK"]
    assert daf.get_scalar("title") == "pbmc" and uns_scalars(daf) == {"title"}
    stored = "obs" if x_format == "csc" else "var"  # the layout the file holds
    assert daf.has_matrix(stored, "var" if stored == "obs" else "obs", "X", relayout=False)


def test_legacy_compound_layout_round_trips(tmp_path):
    path = tmp_path / "legacy.h5ad"
    write_legacy(path)
    expected = read(path)
    daf = h5ad_as_daf(path, unsupported_handler="ignore", progress=False)
    daf_as_h5ad(daf, tmp_path / "back.h5ad", progress=False)
    check_adata_round_trip(read(tmp_path / "back.h5ad"), expected)


def test_a_compound_dataset_that_is_not_a_dataframe_is_refused(tmp_path):
    path = tmp_path / "bad.h5ad"
    write_legacy(path)
    with h5py.File(path, "r+") as file:
        del file["obs"]
        file.create_dataset("obs", data=np.arange(5))
    with pytest.raises(pydaf.DafFormatError, match="can't read the AnnData obs"):
        h5ad_as_daf(path, progress=False)
