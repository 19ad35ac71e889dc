"""close() and ``with`` blocks: what a closed data set releases (locks, files, maps), what it refuses, and what the
arrays it handed out keep (issue 23). Other processes are real processes."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

import pydaf

# Every persistent format, each as a path suffix for pydaf.open_daf.
PERSISTENT = {
    "h5df": "x.h5df",
    "h5df_group": "x.h5dfs#/group",
    "files": "x.daf",
    "zarr": "x.daf.zarr",
    "zarr_zip": "x.daf.zarr.zip",
    "zarr_zip_group": "x.dafs.zarr.zip#/group",
    "zip": "x.daf.zip",
    "zip_group": "x.dafs.zip#/group",
}


def _in_child(path: str, mode: str) -> subprocess.CompletedProcess:
    """Open ``path`` in another process (in ``mode``; writing a scalar if writable) and print what it read."""
    code = textwrap.dedent(f"""
        import pydaf
        daf = pydaf.open_daf({path!r}, {mode!r})
        if {mode!r} != "r":
            daf.set_scalar("child", 1)
        print(daf.get_vector("cell", "age").tolist())
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def _filled(path: str) -> pydaf.DafWriter:
    daf = pydaf.open_daf(path, "w+")
    daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", np.array([1.0, 2.0, 3.0]))
    return daf


@pytest.mark.parametrize("suffix", ["x.h5df", "x.daf", "x.daf.zarr", "x.daf.zarr.zip"], ids=str)
def test_close_lets_another_process_write_at_once(tmp_path, suffix):
    path = str(tmp_path / suffix)
    daf = _filled(path)
    refused = _in_child(path, "r+")  # (while the writer is open: locked; ZipDaf shares zipstore's lock)
    assert refused.returncode != 0 and "DafLockedError" in refused.stderr, refused
    daf.close()
    child = _in_child(path, "r+")
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[1.0, 2.0, 3.0]"
    with pydaf.open_daf(path, "r") as reader:
        assert reader.get_scalar("child") == 1


def test_with_block_releases_a_reader_of_h5df_for_another_writer(tmp_path):
    path = str(tmp_path / "x.h5df")
    _filled(path).close()
    with pydaf.H5df(path, "r") as reader:  # (mode r: the read-only wrapper, which closes the data set it wraps)
        assert reader.axis_length("cell") == 3
        refused = _in_child(path, "r+")
        assert refused.returncode != 0 and "DafLockedError" in refused.stderr, refused
    assert reader.closed and reader.base.closed
    child = _in_child(path, "r+")
    assert child.returncode == 0, child.stderr


def test_h5df_array_held_after_close_keeps_a_shared_lock_only(tmp_path):
    """An array mapped from an H5df file keeps this process's shared lock (documented in close()): other processes
    read, none writes, until the array is dropped; it keeps its values and stays read-only."""
    path = str(tmp_path / "x.h5df")
    daf = _filled(path)
    held = daf.get_vector("cell", "age")
    daf.close()
    assert held.tolist() == [1.0, 2.0, 3.0] and not held.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        held[0] = 0
    reader = _in_child(path, "r")
    assert reader.returncode == 0 and reader.stdout.strip() == "[1.0, 2.0, 3.0]", reader.stderr
    writer = _in_child(path, "r+")
    assert writer.returncode != 0 and "DafLockedError" in writer.stderr, writer
    del held
    gc.collect()
    writer = _in_child(path, "r+")
    assert writer.returncode == 0, writer.stderr


@pytest.mark.parametrize("suffix", ["x.daf", "x.daf.zarr", "x.daf.zarr.zip", "x.daf.zip"], ids=str)
def test_arrays_held_after_close_keep_only_their_map(tmp_path, suffix):
    """FilesDaf, ZarrDaf and ZipDaf arrays keep only their map: another process writes at once."""
    path = str(tmp_path / suffix)
    daf = _filled(path)
    held = daf.get_vector("cell", "age")
    daf.close()
    child = _in_child(path, "r+")
    assert child.returncode == 0, child.stderr
    assert held.tolist() == [1.0, 2.0, 3.0] and not held.flags.writeable


def test_held_h5df_array_survives_truncating_the_file_in_this_process(tmp_path):
    path = str(tmp_path / "x.h5df")
    daf = _filled(path)
    held = daf.get_vector("cell", "age")
    daf.close()
    pydaf.H5df(path, "w").add_axis("cell", ["Z"]).set_vector("cell", "age", np.array([9.0]))  # (the same bytes)
    assert held.tolist() == [1.0, 2.0, 3.0]
    assert pydaf.H5df(path, "r").get_vector("cell", "age").tolist() == [9.0]


@pytest.mark.parametrize("kind", sorted(PERSISTENT), ids=str)
def test_closed_data_set_refuses_every_use(tmp_path, kind):
    path = str(tmp_path / PERSISTENT[kind])
    daf = _filled(path)
    daf.set_matrix("cell", "cell", "distances", np.eye(3))
    _ = daf.get_vector("cell", "age"), daf["@ cell : age"]  # (cached: a closed data set must not serve its cache)
    daf.close()
    daf.close()
    uses = [lambda: daf.get_vector("cell", "age"), lambda: daf.has_scalar("x"), lambda: daf.axis_vector("cell"),
            lambda: daf.get_matrix("cell", "cell", "distances"), lambda: daf["@ cell : age"],
            lambda: daf.set_scalar("x", 1), lambda: daf.add_axis("gene", ["G"]), lambda: daf.description(),
            lambda: daf.empty_cache(), lambda: daf.get_np_query("@ cell : age"), lambda: daf.write_count()]
    if isinstance(daf, pydaf.H5df):
        uses.append(daf.flush)
    for use in uses:
        with pytest.raises(pydaf.DafClosedError) as error:
            use()
        assert str(error.value) == (f"the daf data: {daf.name}\nwas closed\n"
                                    f"(reopen it to use it again: pydaf.open_daf({daf.complete_path()!r}))")
    assert isinstance(error.value, pydaf.DafError) and isinstance(error.value, ValueError)
    with pydaf.open_daf(daf.complete_path(), "r") as reopened:
        assert reopened.get_vector("cell", "age").tolist() == [1.0, 2.0, 3.0]


def test_wrappers_of_a_closed_data_set_report_it(tmp_path):
    daf = _filled(str(tmp_path / "x.h5df"))
    reader = daf.read_only(name="reader")
    view = pydaf.viewer(daf, axes=[("obs", "cell")], data=[(("obs", "years"), ": age")])
    chain = pydaf.chain_writer([daf.read_only(), pydaf.MemoryDaf(name="top")], name="chain")
    assert view.get_vector("obs", "years").tolist() == chain.get_vector("cell", "age").tolist() == [1.0, 2.0, 3.0]
    daf.close()
    for use in (lambda: reader.get_vector("cell", "age"), lambda: view.get_vector("obs", "years"),
                lambda: view["@ obs : years"], lambda: chain.get_vector("cell", "age"),
                lambda: chain.set_scalar("x", 1), lambda: pydaf.copy_all(destination=pydaf.MemoryDaf(), source=view)):
        with pytest.raises(pydaf.DafClosedError, match=f"the daf data: {daf.name}\nwas closed"):
            use()
    assert reader.closed and not view.closed and not chain.closed


def test_closing_a_view_or_chain_leaves_its_base_open(tmp_path):
    with _filled(str(tmp_path / "x.daf")) as daf:
        view = pydaf.viewer(daf, axes=[("obs", "cell")], data=[(("obs", "years"), ": age")])
        with view:
            assert view.get_vector("obs", "years").tolist() == [1.0, 2.0, 3.0]
        with pytest.raises(pydaf.DafClosedError, match=r"\(a closed data set that is not stored can't be reopened\)"):
            view.get_vector("obs", "years")
        chain = pydaf.chain_reader([daf, pydaf.MemoryDaf(name="m")], name="chain")
        chain.close()
        assert chain.closed and not daf.closed and daf.get_vector("cell", "age").tolist() == [1.0, 2.0, 3.0]


def test_memory_daf_close_drops_its_data():
    values = np.array([1, 2, 3])
    with pydaf.MemoryDaf(name="memory!") as daf:
        daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", values)
        storage = daf.format
    assert storage.axes == {} and storage.vectors == {}  # (dropped, as io.BytesIO.close drops its buffer)
    assert values.tolist() == [1, 2, 3]  # (the caller's array is the caller's)
    with pytest.raises(pydaf.DafClosedError, match="the daf data: memory!\nwas closed\n\\(a closed data set that"):
        daf.axis_length("cell")


def test_other_handles_on_the_same_h5df_stay_open(tmp_path):
    path = str(tmp_path / "x.h5dfs")
    first = _filled(f"{path}#/one")
    second = pydaf.H5df(f"{path}#/one", "r+")  # (the same data set: one HDF5 file, one state)
    other = _filled(f"{path}#/two")  # (another data set of the same file)
    first.close()
    assert second.get_vector("cell", "age").tolist() == [1.0, 2.0, 3.0]
    second.set_scalar("after", 1)
    other.close()
    assert second.get_scalar("after") == 1
    assert _in_child(f"{path}#/two", "r").returncode != 0  # (second still holds the file: a writer's lock)
    second.close()
    child = _in_child(f"{path}#/two", "r+")
    assert child.returncode == 0, child.stderr


def test_closing_an_h5df_of_a_callers_group_keeps_the_callers_file(tmp_path):
    path = str(tmp_path / "x.h5")
    with h5py.File(path, "w") as file:
        with pydaf.H5df(file.create_group("daf"), "w+") as daf:
            daf.set_scalar("version", 2)
        assert file.id.valid and file["daf/scalars/version"][()] == 2
        file.create_group("still_writable")


@pytest.mark.parametrize("suffix", ["x.h5df", "x.daf", "x.daf.zarr"], ids=str)
def test_closing_inside_a_builder_keeps_the_old_value(tmp_path, suffix):
    path = str(tmp_path / suffix)
    daf = _filled(path)
    with pytest.raises(pydaf.DafError, match="closed"):
        with daf.empty_dense_vector("cell", "age", np.float64, overwrite=True) as buffer:
            buffer[:] = 7
            daf.close()  # (the builder can't end: what it was building is dropped, the old value kept)
    with pydaf.open_daf(path, "r") as reader:
        assert reader.get_vector("cell", "age").tolist() == [1.0, 2.0, 3.0]


def test_closing_keeps_a_file_the_caller_holds_from_open_h5_file(tmp_path):
    """Two h5py files of one HDF5 file compare equal: each one a caller holds keeps the file open after close."""
    from pydaf.formats.h5df.open_files import open_h5_file

    path = str(tmp_path / "x.h5dfs")
    _filled(f"{path}#/one").close()
    other = open_h5_file(path, "r+")
    held = open_h5_file(path, "r+")
    del other  # (equal to held: a set of them, keeping the first, would forget held here)
    gc.collect()
    pydaf.H5df(f"{path}#/one", "r+").close()
    assert held.id.valid and sorted(held) == ["one"]
    held.create_group("two")
