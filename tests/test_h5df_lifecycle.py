"""H5df files over their life: corrupt input, arrays that outlive deletes and truncation, sharing with plain h5py."""

from __future__ import annotations

import gc

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.formats.mapping import live_maps


def test_garbage_and_non_hdf5_files_raise_format_errors(tmp_path):
    garbage = tmp_path / "garbage.h5df"
    garbage.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 8)
    for mode in ("r", "r+", "w+"):
        with pytest.raises(pydaf.DafFormatError, match="not a valid HDF5 file"):
            pydaf.H5df(garbage, mode)
    assert garbage.read_bytes().startswith(b"\x89HDF")  # nothing was written over it
    text = tmp_path / "text.h5df"
    text.write_text("hello")
    with pytest.raises(pydaf.DafFormatError):
        pydaf.H5df(text, "r")


def test_not_a_daf_file_in_read_modes(tmp_path):
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as file:
        file["data"] = np.arange(3)
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="not a daf data set"):
            pydaf.H5df(path, mode)


def test_held_arrays_keep_their_values_after_delete_and_overwrite(tmp_path):
    path = tmp_path / "held.h5df"
    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", [f"c{index}" for index in range(50_000)])
    daf.set_vector("cell", "x", np.arange(50_000, dtype=np.float64))
    held = daf.get_vector("cell", "x")
    assert live_maps(str(path)) == 1
    daf.set_vector("cell", "x", np.full(50_000, -1.0), overwrite=True)  # HDF5 reuses the freed space
    daf.set_vector("cell", "y", np.full(50_000, -2.0))
    daf.flush()
    np.testing.assert_array_equal(held, np.arange(50_000, dtype=np.float64))
    assert not held.flags.writeable
    assert (daf.get_vector("cell", "x") == -1).all()


def test_held_arrays_survive_truncating_the_file(tmp_path):
    path = tmp_path / "truncated.h5df"
    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", ["a", "b", "c"]).set_matrix("cell", "cell", "m", np.arange(9.0).reshape(3, 3))
    del daf
    gc.collect()
    held = pydaf.H5df(path, "r").get_matrix("cell", "cell", "m")
    pydaf.H5df(path, "w")  # truncates the file the array was mapping
    np.testing.assert_array_equal(held, np.arange(9.0).reshape(3, 3))


def test_plain_h5py_can_open_a_file_pydaf_has_open(tmp_path):
    path = tmp_path / "shared.h5df"
    daf = pydaf.H5df(path, "w").set_scalar("version", 3)
    daf.flush()
    with h5py.File(path, "r") as file:
        assert file["scalars/version"][()] == 3
    assert daf.get_scalar("version") == 3
