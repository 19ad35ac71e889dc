"""MuData ``.h5mu`` modalities imported with ``h5ad_as_daf(path, modality=...)`` and ``pydaf convert --modality``,
against the real ``mudata`` package's reading; files written by mudata and built with h5py (two anndata-written
``.h5ad`` files copied into ``/mod/<name>``). Also the command line's one line per skipped element."""

from __future__ import annotations

import pathlib
import warnings

import anndata
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import daf_as_h5ad, h5ad_as_daf

from .test_anndata import (
    Store,
    caught_messages,
    check_adata_round_trip,
    check_daf_holds,
    make_adata,
    read,
    run_pydaf,
    with_unsupported,
    write,
)

mudata = pytest.importorskip("mudata")


def modalities() -> dict[str, anndata.AnnData]:
    rna = make_adata("csr")
    atac = anndata.AnnData(sp.csr_matrix(np.array([[1, 0, 2], [0, 3, 0]], dtype=np.float32)),
                           obs=pd.DataFrame({"peaks": np.array([2, 1], dtype=np.int32)}, index=["cell0", "cell1"]),
                           var=pd.DataFrame({"chrom": ["chr1", "chr2", "chr2"]}, index=["p1", "p2", "p3"]))
    return {"rna": rna, "atac": atac}


def write_with_mudata(path: pathlib.Path) -> pathlib.Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mudata.MuData(modalities()).write_h5mu(path)
    return path


def write_with_h5py(path: pathlib.Path, folder: pathlib.Path) -> pathlib.Path:
    """A MuData file as its spec lays it out, assembled with h5py from anndata-written files."""
    with h5py.File(path, "w") as file:
        file.attrs["encoding-type"], file.attrs["encoding-version"] = "MuData", "0.1.0"
        mod = file.create_group("mod")
        mod.attrs["mod-order"] = np.array(["rna", "atac"], dtype=object)
        for name, adata in modalities().items():
            with h5py.File(write(adata, folder / f"{name}.h5ad"), "r") as source:
                group = mod.create_group(name)
                for key in source:
                    source.copy(source[key], group, key)
                for key, value in source.attrs.items():
                    group.attrs[key] = value
    return path


def read_mudata(path: pathlib.Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mudata.read_h5mu(path)


@pytest.fixture(params=["mudata", "h5py"])
def h5mu(request, tmp_path) -> pathlib.Path:
    path = tmp_path / "cells.h5mu"
    return write_with_mudata(path) if request.param == "mudata" else write_with_h5py(path, tmp_path)


@pytest.fixture
def store(backend, tmp_path) -> Store:
    return Store(backend, backend.new(tmp_path, "modality!"))


@pytest.mark.parametrize("modality", ["rna", "atac"])
def test_each_modality_imports_as_mudata_reads_it(h5mu, store, modality):
    expected = read_mudata(h5mu).mod[modality]
    _, messages = caught_messages(lambda: h5ad_as_daf(h5mu, store.writer, modality=modality, progress=False))
    assert messages == []
    check_daf_holds(store.reopen(), expected)


def test_a_modality_round_trips(h5mu, tmp_path):
    expected = read_mudata(h5mu).mod["rna"]
    daf = h5ad_as_daf(h5mu, str(tmp_path / "rna.h5df"), modality="rna", progress=False)
    daf_as_h5ad(daf, tmp_path / "rna-back.h5ad", progress=False)  # (rna.h5ad may be the h5mu fixture's part)
    check_adata_round_trip(read(tmp_path / "rna-back.h5ad"), expected)


def test_a_mudata_file_needs_a_modality(h5mu, tmp_path):
    with pytest.raises(pydaf.DafValueError) as raised:
        h5ad_as_daf(h5mu, str(tmp_path / "x.h5df"), progress=False)
    assert str(raised.value) == f"no modality given for the MuData file: {h5mu}\n(its modalities: rna, atac)"
    assert not (tmp_path / "x.h5df").exists()
    with pytest.raises(pydaf.DafMissingError, match="missing modality: prot") as raised:
        h5ad_as_daf(h5mu, modality="prot", progress=False)
    assert "(its modalities: rna, atac)" in str(raised.value)


def test_a_modality_of_an_h5ad_is_refused(tmp_path):
    path = write(make_adata("csr"), tmp_path / "x.h5ad")
    with pytest.raises(pydaf.DafValueError, match="it is not a MuData file"):
        h5ad_as_daf(path, modality="rna", progress=False)


def test_cli_convert_a_modality(h5mu, tmp_path):
    done = run_pydaf("convert", str(h5mu), str(tmp_path / "atac.h5df"), "--modality", "atac", "--no-progress")
    assert done.returncode == 0, done.stderr
    check_daf_holds(pydaf.H5df(str(tmp_path / "atac.h5df"), "r"), read_mudata(h5mu).mod["atac"])
    done = run_pydaf("convert", str(h5mu), str(tmp_path / "x.h5df"), "--no-progress")
    assert done.returncode == 1
    assert done.stderr == (f"pydaf convert: error: no modality given for the MuData file: {h5mu}\n"
                           "(its modalities: rna, atac)\n")


def test_cli_prints_one_line_per_skipped_element(tmp_path):
    adata, elements = with_unsupported(make_adata("csr"))
    path = write(adata, tmp_path / "x.h5ad")
    done = run_pydaf("convert", str(path), str(tmp_path / "x.h5df"), "--no-progress")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == len(elements), lines
    assert sorted(line.split(": ")[3].split(" (")[0] for line in lines) == sorted(elements)
    assert all(line.startswith("pydaf: warning: unsupported element: ") for line in lines)
