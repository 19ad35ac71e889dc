"""Mode ``w`` replaces a data set of its own format, never somebody else's data (issue 25, class 1): a non-Daf
directory, HDF5 file, HDF5 group, text file or ZIP archive at the path is refused and left exactly as it was."""

from __future__ import annotations

import zipfile

import h5py
import pytest

import pydaf


def _notes_directory(path):
    path.mkdir()
    (path / "notes.txt").write_text("precious")
    return lambda: (path / "notes.txt").read_text() == "precious" and sorted(p.name for p in path.iterdir()) == [
        "notes.txt"]


def _other_hdf5(path):
    with h5py.File(path, "w") as file:
        file.create_dataset("precious", data=[1, 2, 3])

    def intact():
        with h5py.File(path, "r") as file:
            return list(file) == ["precious"] and file["precious"][()].tolist() == [1, 2, 3]
    return intact


def _text(path):
    path.write_text("precious")
    return lambda: path.read_text() == "precious"


def _other_zip(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "precious")

    def intact():
        with zipfile.ZipFile(path) as archive:
            return archive.namelist() == ["notes.txt"] and archive.read("notes.txt") == b"precious"
    return intact


CASES = [
    ("x.daf.zarr", _notes_directory, pydaf.ZarrDaf),
    ("x.daf", _notes_directory, pydaf.FilesDaf),
    ("x.h5df", _other_hdf5, pydaf.H5df),
    ("x.h5df", _text, pydaf.H5df),
    ("x.daf.zip", _other_zip, pydaf.ZipDaf),
    ("x.daf.zarr.zip", _other_zip, pydaf.ZarrDaf),
]


@pytest.mark.parametrize(("name", "plant", "format"), CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES])
def test_mode_w_refuses_data_that_is_not_its_own(tmp_path, name, plant, format):
    path = tmp_path / name
    intact = plant(path)
    with pytest.raises(pydaf.DafModeError, match=r"will not (use or )?erase it in mode w"):
        format(str(path), "w")
    assert intact()


def test_mode_w_refuses_an_hdf5_group_that_is_not_a_data_set(tmp_path):
    path = tmp_path / "x.h5dfs"
    with h5py.File(path, "w") as file:
        file.create_group("cells").create_dataset("precious", data=[1])
    with pytest.raises(pydaf.DafModeError, match="will not erase it in mode w"):
        pydaf.H5df(f"{path}#/cells", "w")
    with h5py.File(path, "r") as file:
        assert file["cells/precious"][()].tolist() == [1]


@pytest.mark.parametrize(("name", "format"), [("x.h5df", pydaf.H5df), ("x.h5dfs#/cells", pydaf.H5df),
                                              ("x.daf.zip", pydaf.ZipDaf), ("x.daf.zarr.zip", pydaf.ZarrDaf),
                                              ("x.daf.zarr", pydaf.ZarrDaf), ("x.daf", pydaf.FilesDaf)])
def test_mode_w_still_replaces_a_data_set_of_its_format(tmp_path, name, format):
    path = f"{tmp_path}/{name}"
    with format(path, "w") as daf:
        daf.set_scalar("old", 1)
    with format(path, "w") as daf:
        assert daf.scalars_set() == set()


def test_mode_w_takes_an_empty_file(tmp_path):
    for name, format in [("x.h5df", pydaf.H5df), ("x.daf.zip", pydaf.ZipDaf), ("x.daf.zarr.zip", pydaf.ZarrDaf)]:
        path = tmp_path / name
        path.write_bytes(b"")
        with format(str(path), "w") as daf:
            daf.set_scalar("x", 1)
