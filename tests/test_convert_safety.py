"""``pydaf convert`` and the AnnData functions never lose data: a conversion onto its own storage is refused, a
destination holding anything but a Daf data set is refused, and a failed conversion leaves the destination as it
was (the new data set is built aside and moved into place only when complete)."""

from __future__ import annotations

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.interop import daf_as_h5ad
from pydaf.interop.convert import convert

from . import hostile, hostile_h5ad

pytest.importorskip("anndata")


def _source(path: str) -> pydaf.DafWriter:
    daf = pydaf.open_daf(path, "w", name="source!").add_axis("obs", ["A", "B"]).add_axis("var", ["X", "Y", "Z"])
    daf.set_matrix("obs", "var", "X", np.arange(6.0).reshape(2, 3)).set_vector("obs", "age", [1, 2])
    if hasattr(daf, "flush"):
        daf.flush()
    return daf


def _described(path: str) -> str:
    return pydaf.open_daf(path, "r", name="seen!").description()


def _files(folder) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf.cli", *arguments], capture_output=True, text=True)


@pytest.mark.parametrize("layout", ["same h5df", "same directory", "same group", "nested group", "parent group",
                                    "h5df symlink", "h5df hard link", "directory symlink", "directory inside",
                                    "directory around", "h5ad onto its h5df", "h5df onto an h5ad link"])
def test_converting_a_data_set_onto_its_own_storage_is_refused(tmp_path, layout):
    h5df, folder = str(tmp_path / "a.h5df"), str(tmp_path / "a.daf")
    source, destination = {
        "same h5df": (h5df, h5df),
        "same directory": (folder, folder + "/"),
        "same group": (f"{tmp_path}/a.h5dfs#/g", f"{tmp_path}/a.h5dfs#/g/"),
        "nested group": (f"{tmp_path}/a.h5dfs#/g", f"{tmp_path}/a.h5dfs#/g/inner"),
        "parent group": (f"{tmp_path}/a.h5dfs#/g/inner", f"{tmp_path}/a.h5dfs#/g"),
        "h5df symlink": (h5df, str(tmp_path / "link.h5df")),
        "h5df hard link": (h5df, str(tmp_path / "hard.h5df")),
        "directory symlink": (folder, str(tmp_path / "link.daf")),
        "directory inside": (folder, folder + "/inner.daf"),
        "directory around": (folder + "/inner.daf", folder),
        "h5ad onto its h5df": (str(tmp_path / "x.h5ad"), str(tmp_path / "x-link.h5df")),
        "h5df onto an h5ad link": (h5df, str(tmp_path / "h5df-link.h5ad")),
    }[layout]
    if source.endswith(".h5ad"):
        hostile_h5ad.write_base(source)
        os.symlink(source, destination)
    else:
        _source(source)
    if layout in ("h5df symlink", "directory symlink", "h5df onto an h5ad link"):
        os.symlink(source, destination)
    elif layout == "h5df hard link":
        os.link(source, destination)
    before = _files(tmp_path)
    seen = None if source.endswith(".h5ad") else _described(source)
    with pytest.raises(pydaf.DafModeError, match="share their storage"):
        convert(source, destination, progress=False)
    assert _files(tmp_path) == before
    if seen is not None:
        assert _described(source) == seen
    failed = run("convert", source, destination, "--no-progress")
    assert failed.returncode == 1 and failed.stderr.startswith("pydaf convert: error: can't convert: ")
    assert _files(tmp_path) == before


def test_two_groups_of_one_file_convert(tmp_path):
    _source(f"{tmp_path}/a.h5dfs#/first")
    convert(f"{tmp_path}/a.h5dfs#/first", f"{tmp_path}/a.h5dfs#/second", progress=False)
    assert _described(f"{tmp_path}/a.h5dfs#/second").replace("second", "first") == _described(
        f"{tmp_path}/a.h5dfs#/first")


@pytest.mark.parametrize("kind", ["directory", "h5df", "h5dfs group"])
def test_a_destination_holding_other_data_is_refused(tmp_path, kind):
    h5ad = str(tmp_path / "x.h5ad")
    hostile_h5ad.write_base(h5ad)
    if kind == "directory":
        destination = tmp_path / "mine"
        destination.mkdir()
        (destination / "notes.txt").write_text("precious")
        (destination / "sub").mkdir()
        target = str(destination)
    elif kind == "h5df":
        target = str(tmp_path / "mine.h5df")
        with h5py.File(target, "w") as file:
            file["precious"] = np.arange(3)
    else:
        target = f"{tmp_path}/mine.h5dfs#/group"
        with h5py.File(str(tmp_path / "mine.h5dfs"), "w") as file:
            file["group/precious"] = np.arange(3)
    before = _files(tmp_path)
    result = run("convert", h5ad, target, "--no-progress")
    assert result.returncode == 1
    assert result.stderr.startswith("pydaf convert: error: not a daf data set: ") and "Traceback" not in result.stderr
    assert _files(tmp_path) == before
    if kind == "directory":
        assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"
    else:
        with h5py.File(target.split("#")[0], "r") as file:
            assert file["precious" if kind == "h5df" else "group/precious"][()].tolist() == [0, 1, 2]


def test_an_empty_directory_is_a_fine_destination(tmp_path):
    h5ad = str(tmp_path / "x.h5ad")
    hostile_h5ad.write_base(h5ad)
    (tmp_path / "empty").mkdir()
    assert run("convert", h5ad, str(tmp_path / "empty"), "--no-progress").returncode == 0
    assert pydaf.check_daf(pydaf.open_daf(str(tmp_path / "empty"))) == []


@pytest.mark.parametrize("kind", ["h5df", "h5dfs", "files"])
def test_a_failed_daf_to_daf_conversion_leaves_the_destination_as_it_was(tmp_path, kind):
    source = str(tmp_path / "broken.h5df")
    hostile.build(source)
    hostile.H5DF_CORRUPTIONS["rowval past the rows"](source)
    destination = {"h5df": str(tmp_path / "out.h5df"), "h5dfs": f"{tmp_path}/out.h5dfs#/g",
                   "files": str(tmp_path / "out.daf")}[kind]
    _source(destination)
    before, files = _described(destination), _files(tmp_path)
    refused = run("convert", source, destination, "--no-progress")
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"pydaf convert: error: the destination exists: {destination}\n")
    result = run("convert", source, destination, "--no-progress", "--overwrite")
    assert result.returncode == 1 and "pydaf convert: error: invalid rowval of the matrix: UMIs" in result.stderr
    assert _described(destination) == before and _files(tmp_path) == files


def test_daf_to_daf_conversion_replaces_a_daf_destination(tmp_path):
    source, destination = str(tmp_path / "a.h5df"), str(tmp_path / "b.daf")
    _source(source)
    pydaf.FilesDaf(destination, "w").set_scalar("old", 1)
    assert run("convert", source, destination, "--no-progress").returncode == 1  # not without --overwrite
    assert pydaf.open_daf(destination).has_scalar("old")
    assert run("convert", source, destination, "--no-progress", "--overwrite").returncode == 0
    converted = pydaf.open_daf(destination)
    assert not converted.has_scalar("old") and converted.get_matrix("obs", "var", "X").tolist() == [[0, 1, 2],
                                                                                                  [3, 4, 5]]
    # No temporary or old copy is left (the lock file is FilesDaf's own).
    assert [path.name for path in tmp_path.rglob(".*") if path.name != ".daf.lock"] == []


def test_a_failed_h5ad_export_leaves_the_existing_file(tmp_path):
    source = str(tmp_path / "broken.h5df")
    hostile.build(source)
    daf = pydaf.open_daf(source, "r+")
    daf.relayout_matrix("cell", "gene", "UMIs")
    daf.set_vector("cell", "kept", np.zeros(hostile.N_CELLS))
    daf.flush()
    del daf
    with h5py.File(source, "r+") as file:  # damage the layout the export reads (gene x cell)
        values = file["matrices/gene/cell/UMIs/rowval"][()]
        values[0] = 0
        file["matrices/gene/cell/UMIs/rowval"][...] = values
    target = tmp_path / "out.h5ad"
    hostile_h5ad.write_base(str(target))
    before = target.read_bytes()
    with pytest.raises(pydaf.DafFormatError, match="invalid rowval of the matrix: UMIs"):
        daf_as_h5ad(pydaf.open_daf(source, "r"), target, obs_is="cell", var_is="gene", X_is="UMIs", overwrite=True,
                    progress=False)
    assert target.read_bytes() == before
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []


def test_an_h5ad_export_onto_its_own_source_is_refused(tmp_path):
    source = str(tmp_path / "a.h5df")
    _source(source)
    os.symlink(source, tmp_path / "a.h5ad")
    with pytest.raises(pydaf.DafModeError, match="share their storage"):
        daf_as_h5ad(pydaf.open_daf(source, "r"), tmp_path / "a.h5ad", progress=False)
    assert pydaf.check_daf(pydaf.open_daf(source, "r")) == []
