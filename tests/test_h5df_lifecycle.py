"""H5df files over their life: corrupt input, arrays that outlive deletes and truncation, sharing with plain h5py."""

from __future__ import annotations

import gc
import os

import h5py
import numpy as np
import pytest

import pydaf
from pydaf._os.maps import live_maps


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


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _sparse_daf(path, values):
    import scipy.sparse as sp

    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", [f"c{index}" for index in range(200)]).add_axis("gene", [f"g{index}" for index in range(50)])
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(values), relayout=False)
    daf.set_matrix("cell", "gene", "dense", values.astype(np.float32), relayout=False)
    return daf


def test_maps_are_reused_after_empty_cache_until_a_write(tmp_path):
    path = tmp_path / "reuse.h5df"
    values = np.random.default_rng(1).poisson(0.3, (200, 50)).astype(np.float64)
    daf = _sparse_daf(path, values)
    daf.flush()
    first = daf.get_stored_matrix("cell", "gene", "dense")
    address, nzval_address = _address(first), _address(daf.get_stored_matrix("cell", "gene", "UMIs").nzval)
    del first
    daf.empty_cache()
    again = daf.get_stored_matrix("cell", "gene", "dense")
    assert _address(again) == address and not again.flags.writeable  # the same map, still read-only
    assert _address(daf.get_stored_matrix("cell", "gene", "UMIs").nzval) == nzval_address
    np.testing.assert_array_equal(again, values)
    assert daf.get_matrix("cell", "gene", "UMIs").toarray().tolist() == values.tolist()
    del again
    daf.empty_cache()
    assert live_maps(str(path)) == 4  # (dense, colptr, rowval, nzval: kept)
    daf.set_scalar("written", 1)  # any write changes the file: the kept maps go with it
    assert live_maps(str(path)) == 0
    np.testing.assert_array_equal(daf.get_stored_matrix("cell", "gene", "dense"), values)  # (mapped afresh)
    assert live_maps(str(path)) == 1


def test_maps_of_a_file_another_writer_changed_are_not_reused(tmp_path):
    from pydaf._os.maps import MapRetainer, map_region

    path = tmp_path / "changed.bin"
    path.write_bytes(bytes(1 << 20))
    retainer = MapRetainer(budget=4 << 20)
    address = _address(map_region(str(path), 0, 1 << 19, writable=False, retainer=retainer))
    with open(path, "r+b") as handle:  # (another writer: the file's time changes)
        handle.write(b"changed")
    os.utime(path, ns=(0, 0))  # (and surely differs from the map's, whatever the clock's granularity)
    again = map_region(str(path), 0, 1 << 19, writable=False, retainer=retainer)
    assert _address(again) != address  # a new map (the kept one was alive while it was made: a different address)
    assert bytes(again[:7]) == b"changed" and live_maps(str(path)) == 1  # and the stale one was dropped


def test_retained_maps_of_a_deleted_matrix_are_dropped_not_copied(tmp_path):
    from pydaf._os.maps import detach_region

    path = tmp_path / "deleted.h5df"
    values = np.arange(10_000.0).reshape(200, 50)
    daf = _sparse_daf(path, values)
    daf.flush()
    daf.get_stored_matrix("cell", "gene", "dense")
    daf.empty_cache()
    assert live_maps(str(path)) == 1  # kept for reuse by the open file
    daf.delete_matrix("cell", "gene", "dense")  # (nothing holds the map: dropped, not copied into memory)
    assert live_maps(str(path)) == 0
    held = daf.get_stored_matrix("cell", "gene", "UMIs").nzval
    daf.empty_cache()
    assert live_maps(str(path)) == 3  # colptr, rowval, nzval
    assert detach_region(str(path)) == 1  # only the map an array still uses is copied, with its values
    np.testing.assert_array_equal(held, values.T[values.T != 0])
    assert live_maps(str(path)) == 0


def test_retained_maps_go_with_the_data_set(tmp_path):
    path = tmp_path / "closed.h5df"
    _sparse_daf(path, np.eye(200, 50)).flush()
    gc.collect()
    daf = pydaf.H5df(path, "r")
    daf.get_matrix("cell", "gene", "UMIs")
    daf.get_matrix("cell", "gene", "dense")
    daf.empty_cache()
    assert live_maps(str(path)) == 4  # colptr, rowval, nzval, dense
    assert _write_in_another_process(path) == "DafLockedError"  # (a reader has it open)
    del daf
    gc.collect()
    assert live_maps(str(path)) == 0
    assert _write_in_another_process(path) == "written"  # the kept maps' shares of the lock went with them


def _write_in_another_process(path) -> str:
    import subprocess
    import sys

    child = ("import sys, pydaf\ntry:\n    pydaf.H5df(sys.argv[1], 'r+').set_scalar('after', 1, overwrite=True)\n"
             "    print('written')\nexcept pydaf.DafError as error:\n    print(type(error).__name__)\n")
    result = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_retained_maps_stay_within_their_budget(tmp_path):
    from pydaf._os.maps import MapRetainer, map_region

    path = tmp_path / "budget.bin"
    path.write_bytes(bytes(range(256)) * 4096 * 3)  # 3 MB: three 1 MB regions
    retainer = MapRetainer(budget=2 << 20)
    addresses = [_address(map_region(str(path), index << 20, 1 << 20, writable=False, retainer=retainer))
                 for index in range(3)]
    assert retainer.nbytes == 2 << 20 and live_maps(str(path)) == 2  # the least recently used one went
    assert _address(map_region(str(path), 2 << 20, 1 << 20, writable=False, retainer=retainer)) == addresses[2]
    map_region(str(path), 0, 1 << 20, writable=False, retainer=retainer)  # mapped again: the second one goes
    assert live_maps(str(path)) == 2
    assert _address(map_region(str(path), 2 << 20, 1 << 20, writable=False, retainer=retainer)) == addresses[2]
    assert map_region(str(path), 0, 1 << 20, writable=True, retainer=retainer).flags.writeable  # never shared
    retainer.clear()
    assert retainer.nbytes == 0 and live_maps(str(path)) == 0


@pytest.mark.parametrize("damage", ["scalar", "two_dimensional", "group", "soft_link", "external_link"])
def test_an_axis_that_is_not_a_list_of_names_is_a_format_error(tmp_path, damage):
    path = tmp_path / "axis.h5df"
    pydaf.H5df(path, "w").add_axis("cell", ["a", "b"]).add_axis("gene", ["x"]).flush()
    gc.collect()
    with h5py.File(path, "r+") as file:
        del file["axes/cell"]
        if damage == "scalar":
            file["axes/cell"] = 3
        elif damage == "two_dimensional":
            file["axes/cell"] = np.zeros((2, 2))
        elif damage == "group":
            file.create_group("axes/cell")
        elif damage == "soft_link":
            file["axes/cell"] = h5py.SoftLink("/axes/gene")
        else:
            file["axes/cell"] = h5py.ExternalLink("other.h5", "/axes/gene")
    daf = pydaf.H5df(path, "r")
    with pytest.raises(pydaf.DafFormatError, match="cell"):
        daf.axis_length("cell")
    assert daf.axis_length("gene") == 1
