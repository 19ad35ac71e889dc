"""10x Cell Ranger ``.h5`` matrices (v2 genome groups, v3 ``matrix``/``features``) built with h5py, imported by
``pydaf.interop.tenx_as_daf`` and ``pydaf convert``, against what ``scanpy.read_10x_h5`` makes of them.

scanpy is not a dependency: :func:`scanpy_read_10x_h5` does what scanpy 1.11's ``read_10x_h5`` does (the same steps
on the same h5py arrays: a CSR matrix of the features x barcodes CSC arrays, barcodes as obs names, feature names as
var names with ``gene_ids``/``feature_types``/the other features datasets, the genome and ``gex_only`` filters), then
the real anndata's ``var_names_make_unique``.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import anndata
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import daf_as_h5ad
from pydaf.interop.tenx import tenx_as_daf

from .test_anndata import REPOSITORY, Store, read

GENES = ["CD3E", "MS4A1", "CD3E", "CD3E-1", "Actb", "CD3E"]  # duplicates, and a name that is a suffixed one
GENOMES = ["GRCh38", "GRCh38", "GRCh38", "GRCh38", "mm10", "GRCh38"]
TYPES = ["Gene Expression"] * 5 + ["Antibody Capture"]


def counts(n_cells: int, n_features: int, seed: int = 5) -> sp.csc_matrix:
    """A features x barcodes count matrix (CSC: a column per barcode, as Cell Ranger stores it)."""
    generator = np.random.default_rng(seed)
    values = generator.integers(1, 20, (n_features, n_cells)) * (generator.random((n_features, n_cells)) < 0.4)
    return sp.csc_matrix(values.astype(np.int32))


def write_v3(path: pathlib.Path, n_cells: int = 7, *, features: int | None = None) -> sp.csc_matrix:
    n_features = features or len(GENES)
    names = (GENES * (n_features // len(GENES) + 1))[:n_features]
    matrix = counts(n_cells, n_features)
    with h5py.File(path, "w") as file:
        group = file.create_group("matrix")
        group.create_dataset("barcodes", data=np.array([f"AAAC{index:04d}-1".encode() for index in range(n_cells)]))
        group.create_dataset("shape", data=np.array([n_features, n_cells], dtype=np.int32))
        group.create_dataset("data", data=matrix.data)
        group.create_dataset("indices", data=matrix.indices.astype(np.int64))
        group.create_dataset("indptr", data=matrix.indptr.astype(np.int64))
        block = group.create_group("features")
        block.create_dataset("id", data=np.array([f"ENSG{index:05d}".encode() for index in range(n_features)]))
        block.create_dataset("name", data=np.array([name.encode() for name in names]))
        block.create_dataset("feature_type", data=np.array(
            [(TYPES * (n_features // len(TYPES) + 1))[index].encode() for index in range(n_features)]))
        block.create_dataset("genome", data=np.array(
            [(GENOMES * (n_features // len(GENOMES) + 1))[index].encode() for index in range(n_features)]))
        block.create_dataset("_all_tag_keys", data=np.array([b"genome"]))
    return matrix


def write_v2(path: pathlib.Path, genomes: tuple[str, ...] = ("hg19",)) -> dict[str, sp.csc_matrix]:
    matrices = {}
    with h5py.File(path, "w") as file:
        for offset, genome in enumerate(genomes):
            matrix = counts(5 + offset, 4, seed=offset)
            group = file.create_group(genome)
            group.create_dataset("barcodes", data=np.array([f"CELL{index}-1".encode() for index in range(5 + offset)]))
            group.create_dataset("genes", data=np.array([f"ENSG{offset}{index}".encode() for index in range(4)]))
            group.create_dataset("gene_names", data=np.array([b"A", b"B", b"A", b"C"]))
            group.create_dataset("shape", data=np.array([4, 5 + offset], dtype=np.int32))
            for part in ("data", "indices", "indptr"):
                group.create_dataset(part, data=getattr(matrix, part))
            matrices[genome] = matrix
    return matrices


def scanpy_read_10x_h5(path: pathlib.Path, *, genome: str | None = None, gex_only: bool = True) -> anndata.AnnData:
    """scanpy 1.11's ``read_10x_h5`` (see the module docstring), then ``var_names_make_unique``."""
    with h5py.File(path, "r") as file:
        if "matrix" in file:
            sets = {name: element[()] for name, element in file["matrix"].items() if isinstance(element, h5py.Dataset)}
            sets.update({name: element[()] for name, element in file["matrix/features"].items()})
            n_cols, n_rows = sets["shape"]
            data = sets["data"].astype(np.float32)
            X = sp.csr_matrix((data, sets["indices"], sets["indptr"]), shape=(n_rows, n_cols))
            var = {"gene_ids": sets["id"].astype(str), "feature_types": sets["feature_type"].astype(str)}
            var.update((name, sets[name].astype(str)) for name in file["matrix/features"]
                       if name not in ("name", "feature_type", "id", "gene_id", "_all_tag_keys"))
            adata = anndata.AnnData(X, obs=pd.DataFrame(index=sets["barcodes"].astype(str)),
                                    var=pd.DataFrame(var, index=sets["name"].astype(str)))
            if genome:
                adata = adata[:, adata.var["genome"] == genome]
            if gex_only:
                adata = adata[:, adata.var["feature_types"] == "Gene Expression"]
            adata = adata.copy()
        else:
            genome = genome or next(iter(file))
            sets = {name: element[()] for name, element in file[genome].items()}
            n_cols, n_rows = sets["shape"]
            X = sp.csr_matrix((sets["data"].astype(np.float32), sets["indices"], sets["indptr"]),
                              shape=(n_rows, n_cols))
            adata = anndata.AnnData(X, obs=pd.DataFrame(index=sets["barcodes"].astype(str)),
                                    var=pd.DataFrame({"gene_ids": sets["genes"].astype(str)},
                                                     index=sets["gene_names"].astype(str)))
    adata.var_names_make_unique()
    return adata


def check_like_scanpy(daf: pydaf.DafReader, expected: anndata.AnnData, *, cell: str = "cell", gene: str = "gene",
                      umis: str = "UMIs") -> None:
    assert daf.axis_vector(cell).tolist() == expected.obs_names.tolist()
    assert daf.axis_vector(gene).tolist() == expected.var_names.tolist()
    stored = daf.get_stored_matrix(gene, cell, umis, relayout=False)  # the layout the file holds
    assert isinstance(stored, pydaf.SparseMatrixCSC) and stored.dtype == np.int32  # scanpy makes float32 of them
    matrix = daf.get_matrix(cell, gene, umis)
    np.testing.assert_array_equal(matrix.toarray(), expected.X.toarray())
    assert daf.vectors_set(gene) == set(expected.var.columns)
    for column in expected.var.columns:
        assert daf.get_vector(gene, column).tolist() == expected.var[column].tolist()
    assert daf.get_scalar("obs_is") == cell and daf.get_scalar("var_is") == gene and daf.get_scalar("X_is") == umis


@pytest.fixture
def store(backend, tmp_path) -> Store:
    return Store(backend, backend.new(tmp_path, "tenx!"))


def test_v3_gene_expression_of_every_genome_by_default(tmp_path, store):
    path = tmp_path / "filtered_feature_bc_matrix.h5"
    write_v3(path)
    expected = scanpy_read_10x_h5(path)
    assert expected.var_names.tolist() == ["CD3E", "MS4A1", "CD3E-2", "CD3E-1", "Actb"]  # anndata's own rule
    tenx_as_daf(path, store.writer, progress=False)
    daf = store.reopen()
    check_like_scanpy(daf, expected)
    assert daf.get_vector("gene", "feature_types").tolist() == ["Gene Expression"] * 5


@pytest.mark.parametrize(("genome", "gex_only"), [("GRCh38", True), ("mm10", True), (None, False), ("GRCh38", False)])
def test_v3_filters(tmp_path, genome, gex_only):
    path = tmp_path / "matrix.h5"
    write_v3(path)
    expected = scanpy_read_10x_h5(path, genome=genome, gex_only=gex_only)
    daf = tenx_as_daf(path, genome=genome, gex_only=gex_only, progress=False)
    check_like_scanpy(daf, expected)


def test_v3_streams_in_slices_with_filtered_features(tmp_path, monkeypatch):
    from pydaf.interop import content

    monkeypatch.setattr(content, "_CHUNK", 97)  # many slices, each filtered, of a matrix of ~4,000 entries
    path = tmp_path / "matrix.h5"
    write_v3(path, n_cells=300, features=37)
    expected = scanpy_read_10x_h5(path)
    daf = tenx_as_daf(path, str(tmp_path / "cells.h5df"), relayout=True, progress=False)
    check_like_scanpy(daf, expected)
    back = pydaf.H5df(str(tmp_path / "cells.h5df"), "r")
    np.testing.assert_array_equal(back.get_matrix("cell", "gene", "UMIs", relayout=False).toarray(),
                                  expected.X.toarray())


def test_v3_round_trips_through_h5ad_as_scanpy_has_it(tmp_path):
    path = tmp_path / "matrix.h5"
    write_v3(path)
    expected = scanpy_read_10x_h5(path)
    daf = tenx_as_daf(path, str(tmp_path / "cells.daf"), progress=False)
    daf_as_h5ad(daf, tmp_path / "cells.h5ad", progress=False)
    adata = read(tmp_path / "cells.h5ad")  # obs/var/X as scanpy's, recorded names in uns
    assert adata.obs_names.tolist() == expected.obs_names.tolist()
    assert adata.var_names.tolist() == expected.var_names.tolist()
    np.testing.assert_array_equal(adata.X.toarray(), expected.X.toarray())
    assert list(adata.var.columns) == list(expected.var.columns)  # scanpy's column order, kept
    for column in expected.var.columns:
        assert adata.var[column].tolist() == expected.var[column].tolist()
    assert (adata.uns["obs_is"], adata.uns["var_is"], adata.uns["X_is"]) == ("cell", "gene", "UMIs")


def test_v3_missing_genome_lists_the_genomes(tmp_path):
    path = tmp_path / "matrix.h5"
    write_v3(path)
    with pytest.raises(pydaf.DafMissingError, match="missing genome: hg19") as raised:
        tenx_as_daf(path, genome="hg19", progress=False)
    assert "(its genomes: GRCh38, mm10)" in str(raised.value)


def test_v2_single_genome(tmp_path, store):
    path = tmp_path / "filtered_gene_bc_matrices_h5.h5"
    write_v2(path)
    expected = scanpy_read_10x_h5(path)
    assert expected.var_names.tolist() == ["A", "B", "A-1", "C"]
    tenx_as_daf(path, store.writer, progress=False)
    check_like_scanpy(store.reopen(), expected)


def test_v2_several_genomes_need_one(tmp_path):
    path = tmp_path / "matrices.h5"
    write_v2(path, ("hg19", "mm10"))
    with pytest.raises(pydaf.DafValueError, match="no genome given") as raised:
        tenx_as_daf(path, progress=False)
    assert "(it holds several: hg19, mm10)" in str(raised.value)
    with pytest.raises(pydaf.DafMissingError, match="missing genome: GRCh38"):
        tenx_as_daf(path, genome="GRCh38", progress=False)
    check_like_scanpy(tenx_as_daf(path, genome="mm10", progress=False), scanpy_read_10x_h5(path, genome="mm10"))


def test_names_chosen_by_the_caller(tmp_path):
    path = tmp_path / "matrix.h5"
    write_v3(path)
    daf = tenx_as_daf(path, obs_is="obs", var_is="var", X_is="X", progress=False)
    assert daf.axes_set() == {"obs", "var"} and daf.matrices_set("obs", "var") == {"X"}
    assert daf.scalars_set() == {"var_column_order"}  # AnnData's own names: not recorded; scanpy's column order is
    assert daf.get_scalar("var_column_order") == "gene_ids\nfeature_types\ngenome"
    assert re.fullmatch(r"matrix(#\d+)?", daf.name)  # (unique in the process: #2... after the first "matrix")


def test_damaged_10x_files_give_daf_errors(tmp_path):
    path = tmp_path / "matrix.h5"
    write_v3(path)
    with h5py.File(path, "r+") as file:
        del file["matrix/indptr"]
        file["matrix/indptr"] = np.array([0, 1])
    with pytest.raises(pydaf.DafFormatError, match="indptr entries"):
        tenx_as_daf(path, progress=False)
    write_v3(path)
    with h5py.File(path, "r+") as file:
        data = file["matrix/indices"][()]
        data[3] = 99
        file["matrix/indices"][...] = data
    with pytest.raises(pydaf.DafFormatError, match="invalid indices"):
        tenx_as_daf(path, progress=False)
    with h5py.File(tmp_path / "other.h5", "w") as file:
        file.create_dataset("x", data=np.arange(3))
    with pytest.raises(pydaf.DafFormatError, match="not a 10x Cell Ranger matrix"):
        tenx_as_daf(tmp_path / "other.h5", progress=False)


def run_pydaf(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True, cwd=REPOSITORY)


def test_cli_convert_a_10x_matrix(tmp_path):
    path = tmp_path / "filtered_feature_bc_matrix.h5"
    write_v3(path)
    done = run_pydaf("convert", str(path), str(tmp_path / "cells.h5df"), "--no-progress")
    assert done.returncode == 0, done.stderr
    check_like_scanpy(pydaf.H5df(str(tmp_path / "cells.h5df"), "r"), scanpy_read_10x_h5(path))
    done = run_pydaf("convert", str(path), str(tmp_path / "mouse.h5df"), "--genome", "mm10", "--all-features",
                     "--no-progress")
    assert done.returncode == 0, done.stderr
    check_like_scanpy(pydaf.H5df(str(tmp_path / "mouse.h5df"), "r"),
                      scanpy_read_10x_h5(path, genome="mm10", gex_only=False))
    done = run_pydaf("convert", str(path), str(tmp_path / "x.h5df"), "--genome", "hg19", "--no-progress")
    assert done.returncode == 1 and done.stderr.startswith("pydaf convert: error: missing genome: hg19")
    assert "Traceback" not in done.stderr and not (tmp_path / "x.h5df").exists()
