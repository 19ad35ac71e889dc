"""The format registry (``pydaf/formats/registry.py``): which format opens a path (by content first, by suffix
second), the error when none can, formats registered from outside, and the facades' constructors."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.formats.registry import FormatEntry, guess_format, register_format, registered_formats, unregister_format


def test_built_in_formats_are_asked_with_the_fallback_last():
    assert [entry.name for entry in registered_formats()] == ["HttpDaf", "H5df", "ZarrDaf", "ZipDaf", "FilesDaf"]
    assert [entry.fallback for entry in registered_formats()] == [False, False, False, False, True]
    assert [entry.read_only for entry in registered_formats()] == [True, False, False, False, False]


@pytest.mark.parametrize(("name", "expected"), [
    ("new.h5df", "H5df"), ("new.h5dfs#/group", "H5df"), ("new.h5dfs#/a/b", "H5df"),
    ("new.daf", "FilesDaf"), ("new", "FilesDaf"), ("new.h5ad", "FilesDaf"), ("new.daf.zip", "ZipDaf"),
    ("new.dafs.zip#/a/b", "ZipDaf"), ("new.daf.zarr.zip", "ZarrDaf"),
])
def test_new_paths_are_recognised_by_suffix(tmp_path, name, expected):
    assert guess_format(tmp_path / name).name == expected


def test_hdf5_files_are_recognised_by_content_whatever_their_name(tmp_path):
    path = tmp_path / "data.bin"
    pydaf.H5df(path, "w", name="bin!").add_axis("cell", ["A"])
    assert guess_format(path).name == "H5df"
    reader = pydaf.open_daf(path)
    assert isinstance(reader.base, pydaf.H5df) and reader.axis_vector("cell").tolist() == ["A"]
    # An HDF5 file with a user block has its signature at byte 512.
    with h5py.File(tmp_path / "blocked", "w", userblock_size=512) as file:
        file["x"] = 1
    assert guess_format(tmp_path / "blocked").name == "H5df"
    with pytest.raises(pydaf.DafFormatError, match="not a daf data set"):
        pydaf.open_daf(tmp_path / "blocked")


def test_directories_are_files_daf(tmp_path):
    pydaf.FilesDaf(tmp_path / "cells", "w").set_scalar("x", 1)
    (tmp_path / "empty").mkdir()
    assert guess_format(tmp_path / "cells").name == guess_format(tmp_path / "empty").name == "FilesDaf"
    assert pydaf.open_daf(tmp_path / "cells").get_scalar("x") == 1
    with pytest.raises(pydaf.DafFormatError, match="not a daf directory"):
        pydaf.open_daf(tmp_path / "empty")


def test_a_corrupt_h5df_still_gets_the_h5df_error(tmp_path):
    path = tmp_path / "corrupt.h5df"
    path.write_bytes(b"\0" * 100)
    assert guess_format(path).name == "H5df"
    with pytest.raises(pydaf.DafFormatError, match="not a valid HDF5 file"):
        pydaf.open_daf(path)


@pytest.mark.parametrize("kind", ["text", "fifo", "dangling link"])
def test_paths_no_format_recognises_list_the_known_formats(tmp_path, kind):
    path = tmp_path / "unknown"
    if kind == "text":
        path.write_text("not a data set\n")
    elif kind == "fifo":
        os.mkfifo(path)  # reading it would block: it must not be read
    else:
        path.symlink_to(tmp_path / "nowhere")
    expected = (f"no known Daf format can open the path: {path}\nthe known formats are:\n"
                "- H5df: an HDF5 file (x.h5df), or a group in one (x.h5dfs#/group)\n"
                "- ZarrDaf: a Zarr v3 directory (x.daf.zarr), a ZIP of one (x.daf.zarr.zip), or a group in a ZIP "
                "(x.dafs.zarr.zip#/group)\n"
                "- ZipDaf: a ZIP of a FilesDaf layout (x.daf.zip), or a group in one (x.dafs.zip#/group)\n"
                "- FilesDaf: a directory holding daf.json (or a new path, which becomes one)\n"
                "- HttpDaf: a FilesDaf or ZarrDaf directory served over HTTP (http://host/x.daf, "
                "http://host/x.daf.zarr or https://...; read-only)")
    for mode in ("r", "w"):
        with pytest.raises(pydaf.DafFormatError) as raised:
            pydaf.open_daf(path, mode)
        assert str(raised.value) == expected
    assert path.is_symlink() or path.exists()  # nothing was created or removed


def test_formats_registered_from_outside_are_asked_before_the_fallback(tmp_path):
    opened = []

    def open_memory(path: str, mode: str, *, name: str | None = None) -> pydaf.DafReader:
        opened.append((path, mode))
        daf = pydaf.MemoryDaf(name=name or "memory!")
        return daf.read_only() if mode == "r" else daf

    entry = FormatEntry("Memo", "a path ending with .memo", guess_can_open=lambda path: path.endswith(".memo"),
                        open=open_memory)
    assert register_format(entry) is entry
    try:
        assert [known.name for known in registered_formats()] == ["HttpDaf", "H5df", "ZarrDaf", "ZipDaf", "Memo",
                                                                  "FilesDaf"]
        daf = pydaf.open_daf(tmp_path / "x.memo", "w", name="memo!")
        assert isinstance(daf, pydaf.MemoryDaf) and daf.name == "memo!"
        assert opened == [(str(tmp_path / "x.memo"), "w")]
        assert guess_format(tmp_path / "x.daf").name == "FilesDaf"
        with pytest.raises(pydaf.DafValueError, match="existing Daf format: Memo"):
            register_format(entry)
        replacement = FormatEntry("Memo", "never", guess_can_open=lambda path: False, open=open_memory)
        register_format(replacement, replace=True)
        assert guess_format(tmp_path / "x.memo").name == "FilesDaf"
        with pytest.raises(pydaf.DafFormatError, match="\n- Memo: never\n- FilesDaf: "):
            guess_format(__file__)
    finally:
        unregister_format("Memo")
    assert [known.name for known in registered_formats()] == ["HttpDaf", "H5df", "ZarrDaf", "ZipDaf", "FilesDaf"]


@pytest.mark.parametrize("facade", [pydaf.H5df, pydaf.FilesDaf, pydaf.ZarrDaf, pydaf.ZipDaf])
def test_constructors_construct_and_mode_r_is_read_only(tmp_path, facade):
    assert "__new__" not in vars(facade)
    path = tmp_path / {pydaf.H5df: "x.h5df", pydaf.FilesDaf: "x.daf", pydaf.ZarrDaf: "x.daf.zarr",
                        pydaf.ZipDaf: "x.daf.zip"}[facade]
    writer = facade(path, "w", name="x!")
    assert type(writer) is facade and writer.name == "x!"
    writer.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
    for reader in (facade(path, "r"), facade.open(path, "r"), facade(path, mode="r", name="named!")):
        assert isinstance(reader, pydaf.DafReadOnly) and not hasattr(reader, "set_vector")
        assert type(reader.base) is facade and reader.base.format is reader.format
        np.testing.assert_array_equal(reader.get_vector("cell", "age"), [1, 2])
    assert facade(path, "r", name="named!").name == "named!"
    assert type(facade.open(path, "r+")) is facade
    with pytest.raises(pydaf.DafModeError, match="invalid mode: x"):
        facade(path, "x")
