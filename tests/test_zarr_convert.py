"""``files_to_zarr`` / ``zarr_to_files`` (Julia's ``ZarrConvert``): the result opens and equals the source, numeric
files are hard links (``st_nlink``), zarr-python reads the Zarr output, a copy is made across file systems, existing
destinations are refused, and a failure leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import zarr

import pydaf
from pydaf.formats.zarr.convert import files_to_zarr, zarr_to_files

from .test_zarr import open_with_zarr
from .test_zipdaf import assert_same_data, content


def links(path: Path) -> int:
    return os.stat(path).st_nlink


def siblings(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_files_to_zarr_links_the_numeric_files(tmp_path):
    source = content(pydaf.FilesDaf(tmp_path / "cells.daf", "w"))
    files_to_zarr(files_path=tmp_path / "cells.daf", zarr_path=tmp_path / "cells.daf.zarr", progress=False)
    converted = pydaf.ZarrDaf(tmp_path / "cells.daf.zarr", "r")
    assert_same_data(source, converted)
    root = tmp_path / "cells.daf"
    for name in ("vectors/cell/age.data", "vectors/gene/built.data", "vectors/cell/built_sparse.nzind",
                 "vectors/cell/built_sparse.nzval", "matrices/cell/gene/dense.data", "matrices/cell/gene/UMIs.colptr",
                 "matrices/cell/gene/UMIs.rowval", "matrices/cell/gene/UMIs.nzval", "matrices/gene/gene/net.rowval"):
        assert links(root / name) == 2, name
    zarr_root = tmp_path / "cells.daf.zarr"
    assert os.path.samefile(root / "matrices/cell/gene/dense.data", zarr_root / "matrices/cell/gene/dense/c/0/0")
    assert links(root / "vectors/cell/donor.txt") == 1  # (strings are re-serialised)
    group = open_with_zarr(str(zarr_root))
    np.testing.assert_array_equal(group["matrices/cell/gene/dense"][:], np.arange(12).reshape(4, 3).T)
    np.testing.assert_array_equal(group["vectors/cell/age"][:], [1.5, 2.5, 3.5, 4.5])
    np.testing.assert_array_equal(group["matrices/cell/gene/UMIs/nzval"][:], [2, 4, 1, 3])
    assert siblings(tmp_path) == ["cells.daf", "cells.daf.zarr"]
    # The consolidated metadata lists every node (a writable open finds nothing to rebuild).
    before = (zarr_root / "zarr.json").read_bytes()
    pydaf.ZarrDaf(zarr_root, "r+").format.format_close()
    assert (zarr_root / "zarr.json").read_bytes() == before and b'"vectors/cell/age"' in before


def test_zarr_to_files_links_back_and_round_trips(tmp_path):
    source = content(pydaf.ZarrDaf(tmp_path / "cells.daf.zarr", "w"))
    zarr_to_files(zarr_path=tmp_path / "cells.daf.zarr", files_path=tmp_path / "cells.daf", progress=False)
    converted = pydaf.FilesDaf(tmp_path / "cells.daf", "r")
    assert_same_data(source, converted)
    zarr_root, root = tmp_path / "cells.daf.zarr", tmp_path / "cells.daf"
    assert os.path.samefile(zarr_root / "vectors/cell/age/c/0", root / "vectors/cell/age.data")
    assert os.path.samefile(zarr_root / "matrices/cell/gene/UMIs/rowval/c/0", root / "matrices/cell/gene/UMIs.rowval")
    assert (root / "metadata.json").read_bytes().startswith(b'{"axes/cell":')  # (rebuilt by the writable open)
    files_to_zarr(files_path=root, zarr_path=tmp_path / "again.daf.zarr", progress=False)
    assert_same_data(source, pydaf.ZarrDaf(tmp_path / "again.daf.zarr", "r"))
    assert links(root / "vectors/cell/age.data") == 3


def test_zarr_arrays_not_stored_as_one_raw_chunk_are_copied(tmp_path):
    """A Zarr array written by zarr-python in several gzip chunks, and one elided as all zeros, are copied."""
    path = tmp_path / "foreign.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(10)])
    daf.set_vector("cell", "zeros", np.zeros(10))
    group = zarr.open_group(str(path / "vectors/cell"), mode="a", use_consolidated=False)
    group.create_array("chunked", shape=(10,), chunks=(3,), dtype="int32", compressors=zarr.codecs.GzipCodec())[:] = \
        np.arange(10, dtype=np.int32)
    pydaf.ZarrDaf(path, "r+").format.format_close()  # (indexes the foreign array)
    zarr_to_files(zarr_path=path, files_path=tmp_path / "copied.daf", progress=False)
    copied = pydaf.FilesDaf(tmp_path / "copied.daf", "r")
    assert copied.get_vector("cell", "chunked").tolist() == list(range(10))
    assert copied.get_vector("cell", "zeros").tolist() == [0.0] * 10


def test_existing_destinations_and_bad_paths_are_refused(tmp_path):
    content(pydaf.FilesDaf(tmp_path / "cells.daf", "w"))
    (tmp_path / "taken.daf.zarr").mkdir()
    (tmp_path / "taken.daf.zarr" / "keep.txt").write_text("mine")
    with pytest.raises(pydaf.DafExistsError, match="destination already exists"):
        files_to_zarr(files_path=tmp_path / "cells.daf", zarr_path=tmp_path / "taken.daf.zarr", progress=False)
    assert (tmp_path / "taken.daf.zarr" / "keep.txt").read_text() == "mine"
    for zarr_path, message in [("x.daf.zarr.zip", "zip-backed"), ("x.dafs.zarr.zip#/g", "zip-backed"),
                               ("x.zarr", "must end with .daf.zarr")]:
        with pytest.raises(pydaf.DafFormatError, match=message):
            files_to_zarr(files_path=tmp_path / "cells.daf", zarr_path=f"{tmp_path}/{zarr_path}", progress=False)
    with pytest.raises(pydaf.DafExistsError):
        zarr_to_files(zarr_path=tmp_path / "taken.daf.zarr", files_path=tmp_path / "cells.daf", progress=False)
    with pytest.raises(pydaf.DafFormatError):
        files_to_zarr(files_path=tmp_path / "missing.daf", zarr_path=tmp_path / "new.daf.zarr", progress=False)
    assert siblings(tmp_path) == ["cells.daf", "taken.daf.zarr"]


def test_a_failed_conversion_leaves_nothing_behind(tmp_path):
    source = pydaf.FilesDaf(tmp_path / "cells.daf", "w").add_axis("cell", ["A", "B"])
    source.set_vector("cell", "good", [1, 2]).set_vector("cell", "bad", [1.0, 2.0])
    (tmp_path / "cells.daf/vectors/cell/bad.data").write_bytes(b"\0" * 9)  # (corrupt: 9 bytes for 2 Float64)
    before = {path: path.read_bytes() for path in (tmp_path / "cells.daf").rglob("*") if path.is_file()}
    with pytest.raises(pydaf.DafFormatError, match="has 9 bytes instead of 16"):
        files_to_zarr(files_path=tmp_path / "cells.daf", zarr_path=tmp_path / "cells.daf.zarr", progress=False)
    assert siblings(tmp_path) == ["cells.daf"]
    assert {path: path.read_bytes() for path in (tmp_path / "cells.daf").rglob("*") if path.is_file()} == before
    assert links(tmp_path / "cells.daf/vectors/cell/good.data") == 1


def test_linked_data_sets_stay_independent(tmp_path):
    """Neither format writes a committed file in place, so writing one side never changes the other."""
    source = pydaf.FilesDaf(tmp_path / "cells.daf", "w").add_axis("cell", ["A", "B"])
    source.set_vector("cell", "age", [1, 2])
    files_to_zarr(files_path=tmp_path / "cells.daf", zarr_path=tmp_path / "cells.daf.zarr", progress=False)
    source.set_vector("cell", "age", [7, 8], overwrite=True)
    with source.empty_dense_vector("cell", "age", "Int64", overwrite=True) as buffer:
        buffer[:] = [9, 9]
    assert pydaf.ZarrDaf(tmp_path / "cells.daf.zarr", "r").get_vector("cell", "age").tolist() == [1, 2]


SHM = Path("/dev/shm")


def test_across_file_systems_the_files_are_copied(tmp_path):
    if not SHM.is_dir() or os.stat(SHM).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system (/dev/shm) to convert across")
    source = content(pydaf.FilesDaf(tmp_path / "cells.daf", "w"))
    destination = SHM / f"pydaf-zipdaf-{os.getpid()}.daf.zarr"
    try:
        files_to_zarr(files_path=tmp_path / "cells.daf", zarr_path=destination, progress=False)
        assert_same_data(source, pydaf.ZarrDaf(destination, "r"))
        assert links(tmp_path / "cells.daf/vectors/cell/age.data") == 1
    finally:
        import shutil

        shutil.rmtree(destination, ignore_errors=True)
