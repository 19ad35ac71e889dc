"""``pydaf convert`` between any two formats, run as a real process: every Daf format in a chain that ends where it
began with the same data, hard links between FilesDaf and ZarrDaf directories, h5ad in and out, and destinations that
are not Daf data sets (or are in append-only archives) refused untouched."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import pydaf

from .test_zipdaf import assert_same_data, content


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf.cli", "convert", *arguments, "--no-progress"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})


def test_a_chain_through_every_format_gives_back_the_same_data(tmp_path):
    start = f"{tmp_path}/start.h5df"
    pydaf.copy_all(pydaf.H5df(start, "w"), content(pydaf.MemoryDaf(name="original!")), progress=False)
    original = pydaf.open_daf(start, "r")
    chain = [start, f"{tmp_path}/files.daf", f"{tmp_path}/linked.daf.zarr", f"{tmp_path}/one.daf.zarr.zip",
             f"{tmp_path}/one.daf.zip", f"{tmp_path}/many.dafs.zip#/cells/raw",
             f"{tmp_path}/many.dafs.zarr.zip#/cells", f"{tmp_path}/many.h5dfs#/cells", f"{tmp_path}/back.daf.zarr",
             f"{tmp_path}/back.daf", f"{tmp_path}/end.h5df"]
    for source, destination in itertools.pairwise(chain):
        result = run(source, destination)
        assert result.returncode == 0, (source, destination, result.stderr)
        converted = pydaf.open_daf(destination, "r")
        assert_same_data(original, converted)
        converted.base.format.format_close()
    for archive in ("one.daf.zarr.zip", "one.daf.zip", "many.dafs.zip", "many.dafs.zarr.zip"):
        with zipfile.ZipFile(tmp_path / archive) as opened:
            assert opened.testzip() is None
    # Between FilesDaf and ZarrDaf directories, the numeric files are shared.
    assert os.path.samefile(tmp_path / "files.daf/matrices/cell/gene/dense.data",
                            tmp_path / "linked.daf.zarr/matrices/cell/gene/dense/c/0/0")
    assert os.path.samefile(tmp_path / "back.daf.zarr/vectors/cell/age/c/0",
                            tmp_path / "back.daf/vectors/cell/age.data")
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporaries left


def test_h5ad_in_and_out_of_archives(tmp_path):
    daf = pydaf.ZipDaf(tmp_path / "a.daf.zip", "w").add_axis("obs", ["A", "B"]).add_axis("var", ["X", "Y", "Z"])
    daf.set_matrix("obs", "var", "X", np.arange(6, dtype=np.float32).reshape(2, 3))
    daf.format.format_close()
    assert run(str(tmp_path / "a.daf.zip"), str(tmp_path / "a.h5ad")).returncode == 0
    result = run(str(tmp_path / "a.h5ad"), f"{tmp_path}/b.dafs.zarr.zip#/g")
    assert result.returncode == 0, result.stderr
    back = pydaf.open_daf(f"{tmp_path}/b.dafs.zarr.zip#/g")
    assert back.get_matrix("obs", "var", "X").tolist() == [[0, 1, 2], [3, 4, 5]]


def test_an_existing_data_set_is_replaced_and_anything_else_refused(tmp_path):
    source = pydaf.FilesDaf(tmp_path / "a.daf", "w").add_axis("cell", ["A"])
    source.set_vector("cell", "v", [1.5])
    old = pydaf.ZarrDaf(tmp_path / "old.daf.zarr", "w").add_axis("gene", ["X"])
    old.format.format_close()
    assert run(str(tmp_path / "a.daf"), str(tmp_path / "old.daf.zarr")).returncode == 1  # not without --overwrite
    assert run(str(tmp_path / "a.daf"), str(tmp_path / "old.daf.zarr"), "--overwrite").returncode == 0
    replaced = pydaf.ZarrDaf(tmp_path / "old.daf.zarr", "r")
    assert replaced.axes_set() == {"cell"} and replaced.get_vector("cell", "v").tolist() == [1.5]
    (tmp_path / "notes.daf.zip").write_text("mine")
    (tmp_path / "mine.daf.zarr").mkdir()
    (tmp_path / "mine.daf.zarr" / "keep.txt").write_text("mine")
    pydaf.ZipDaf(f"{tmp_path}/many.dafs.zip#/taken", "w+").set_scalar("x", 1).format.format_close()
    before = (tmp_path / "many.dafs.zip").read_bytes()
    for destination, message in [("notes.daf.zip", "not a daf data set"), ("mine.daf.zarr", "not a daf data set"),
                                 ("many.dafs.zip#/taken", "append-only archive")]:
        result = run(str(tmp_path / "a.daf"), f"{tmp_path}/{destination}")
        assert result.returncode != 0 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert (tmp_path / "notes.daf.zip").read_text() == "mine"
    assert (tmp_path / "mine.daf.zarr" / "keep.txt").read_text() == "mine"
    assert (tmp_path / "many.dafs.zip").read_bytes() == before
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]


@pytest.mark.parametrize(("source", "destination"), [("a.daf.zip", "a.daf.zip"),
                                                     ("m.dafs.zip#/g", "m.dafs.zip#/g/h")])
def test_a_source_and_destination_sharing_storage_are_refused(tmp_path, source, destination):
    pydaf.ZipDaf(f"{tmp_path}/{source}", "w+").set_scalar("x", 1).format.format_close()
    result = run(f"{tmp_path}/{source}", f"{tmp_path}/{destination}")
    assert result.returncode != 0 and "share their storage" in result.stderr, result.stderr


def test_layouts_are_copied_as_stored_unless_relayout_is_asked(tmp_path):
    daf = pydaf.ZarrDaf(tmp_path / "a.daf.zarr", "w").add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
    daf.set_matrix("cell", "gene", "m", np.array([[1.0], [2.0]]), relayout=False)
    daf.format.format_close()
    assert run(str(tmp_path / "a.daf.zarr"), str(tmp_path / "as_stored.daf.zip")).returncode == 0
    assert pydaf.ZipDaf(tmp_path / "as_stored.daf.zip").matrices_set("gene", "cell", relayout=False) == set()
    assert run(str(tmp_path / "a.daf.zarr"), str(tmp_path / "both.daf.zip"), "--relayout").returncode == 0
    both = pydaf.ZipDaf(tmp_path / "both.daf.zip")
    assert both.get_matrix("gene", "cell", "m", relayout=False).tolist() == [[1.0, 2.0]]
