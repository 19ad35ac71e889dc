"""Conversions, round 2 (issue 25, classes 4 and 6), the cases that need no kill: what a killed conversion or copy left
is cleaned or refused with a message, and a FIFO at a conversion's source or destination never blocks (each probe in a
child process with a timeout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.interop.convert import convert

DEAD_PID = 2_000_000_000  # (above any pid_max: no such process)
ROOT = str(Path(__file__).resolve().parent.parent)


def _source(path: str, value: int = 1) -> str:
    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", ["A", "B"]).set_scalar("value", value).set_vector("cell", "age", [value, value + 1])
    daf.flush()
    daf.close()
    return path


def marker_path(path: str) -> str:
    from pydaf.formats.incomplete_copy import marker_path  # (here: the other tests run on code without markers)

    return marker_path(path)


def _plant_killed_copy(path: str, pid: int = DEAD_PID) -> None:
    with open(marker_path(path), "w") as marker:
        json.dump({"pid": pid, "started": "2026-01-01 00:00:00 UTC", "what": "a copy_all from test", "token": "x"},
                  marker)


DESTINATIONS = ["x.h5df", "all.h5dfs#/g", "x.daf", "x.daf.zarr", "x.daf.zarr.zip", "x.daf.zip"]


@pytest.mark.parametrize("destination", DESTINATIONS)
def test_a_data_set_a_killed_copy_left_refuses_to_open_and_a_conversion_replaces_it(tmp_path, destination):
    source = _source(str(tmp_path / "source.h5df"))
    path = str(tmp_path / destination)
    convert(source, path, progress=False)
    _plant_killed_copy(path)
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="incomplete copy") as raised:
            pydaf.open_daf(path, mode)
        assert isinstance(raised.value, pydaf.errors.DafIncompleteError)
        assert "was interrupted before it ended" in str(raised.value)
        assert "pydaf convert SOURCE DESTINATION --overwrite" in str(raised.value)
        assert marker_path(path) in str(raised.value)
    convert(_source(str(tmp_path / "other.h5df"), 7), path, overwrite=True, progress=False)
    assert not os.path.exists(marker_path(path))
    assert pydaf.open_daf(path, "r").get_scalar("value") == 7


def test_a_copy_under_way_in_another_process_is_named(tmp_path):
    path = str(tmp_path / "x.daf")
    convert(_source(str(tmp_path / "source.h5df")), path, progress=False)
    _plant_killed_copy(path, pid=os.getppid())  # (a live process other than this one)
    with pytest.raises(pydaf.errors.DafIncompleteError, match="is under way: open it when it ends"):
        pydaf.open_daf(path, "r")
    pydaf.FilesDaf(path, "w")  # (mode w replaces the data set, and drops its marker)
    assert not os.path.exists(marker_path(path))


def test_copy_all_marks_the_destination_only_while_it_copies(tmp_path):
    path = str(tmp_path / "x.h5df")
    destination = pydaf.H5df(path, "w").add_axis("cell", ["A", "B"])
    source = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
    seen = []
    original = destination.set_vector

    def spy(*arguments, **keywords):
        seen.append(os.path.exists(marker_path(path)))
        pydaf.open_daf(path, "r")  # (the copying process may open it meanwhile)
        return original(*arguments, **keywords)

    destination.set_vector = spy
    pydaf.copy_all(destination, source, progress=False)
    assert seen == [True]
    assert not os.path.exists(marker_path(path))
    with pytest.raises(pydaf.DafError):
        pydaf.copy_all(destination, pydaf.MemoryDaf().add_axis("cell", ["X"]), progress=False)  # (disjoint axes)
    assert not os.path.exists(marker_path(path))


def test_leftovers_of_dead_conversions_are_removed_by_the_next_one(tmp_path):
    source = _source(str(tmp_path / "source.h5df"))
    folder = str(tmp_path)
    planted = [f".x.h5df.tmp-{DEAD_PID}-0123abcd.h5df", f".x.daf.tmp-{DEAD_PID}-0123abcd",
               f".x.daf.zip.tmp-{DEAD_PID}-0123abcd.daf.zip", f".x.h5ad.tmp-{DEAD_PID}-0123abcd.h5ad"]
    for name in planted:
        if ".daf.tmp" in name:
            os.mkdir(os.path.join(folder, name))
        else:
            Path(folder, name).write_bytes(b"partial")
    live = os.path.join(folder, f".x.h5df.tmp-{os.getppid()}-0123abcd.h5df")  # (a conversion under way: kept)
    Path(live).write_bytes(b"partial")
    for destination in ("x.h5df", "x.daf", "x.daf.zip"):
        convert(source, os.path.join(folder, destination), progress=False)
    pydaf.interop.daf_as_h5ad(pydaf.MemoryDaf().add_axis("obs", ["A"]).add_axis("var", ["X"]).set_matrix(
        "obs", "var", "X", np.array([[1.0]])), os.path.join(folder, "x.h5ad"))
    left = sorted(name for name in os.listdir(folder) if name.startswith(".x."))
    assert left == [os.path.basename(live)]


def test_temporary_groups_of_dead_conversions_are_removed_from_the_file(tmp_path):
    source = _source(str(tmp_path / "source.h5df"))
    path = str(tmp_path / "all.h5dfs")
    convert(source, path + "#/g", progress=False)
    pydaf.H5df(f"{path}#/.g.tmp-{DEAD_PID}-0123abcd", "w+").set_scalar("partial", 1).close()
    pydaf.H5df(f"{path}#/.g.old-{DEAD_PID}-4567abcd", "w+").close()
    convert(source, path + "#/g", overwrite=True, progress=False)
    with h5py.File(path, "r") as file:
        assert sorted(file) == ["g"]


def test_an_old_data_set_set_aside_by_a_killed_swap_is_put_back(tmp_path):
    folder = str(tmp_path)
    convert(_source(str(tmp_path / "source.h5df"), 5), os.path.join(folder, "x.daf"), progress=False)
    os.rename(os.path.join(folder, "x.daf"), os.path.join(folder, f".x.daf.old-{DEAD_PID}-0123abcd"))
    from pydaf.composition.destinations import clean_leftovers

    assert clean_leftovers(os.path.join(folder, "x.daf")) == []
    assert pydaf.open_daf(os.path.join(folder, "x.daf"), "r").get_scalar("value") == 5


def _in_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": ROOT})


@pytest.mark.parametrize("destination", ["f.h5df", "f.h5ad", "all.h5dfs#/g", "f.daf.zip", "f.daf.zarr.zip", "f.daf"])
def test_a_fifo_destination_is_refused_without_blocking_and_kept(tmp_path, destination):
    source = _source(str(tmp_path / "source.h5df"))
    fifo = str(tmp_path / destination.partition("#")[0])
    os.mkfifo(fifo)
    done = _in_child(f"""
        import pydaf
        from pydaf.interop.convert import convert
        try:
            convert({source!r}, {str(tmp_path / destination)!r}, overwrite=True, progress=False)
        except pydaf.DafError as error:
            print("refused:", str(error).splitlines()[-1] if "FIFO" not in str(error) else "a FIFO")
        """)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout, done.stdout
    assert Path(fifo).is_fifo()


@pytest.mark.parametrize("source", ["f.h5df", "f.h5ad", "all.h5dfs#/g", "f.daf.zip", "f.h5mu", "f.h5"])
def test_a_fifo_source_is_refused_without_blocking(tmp_path, source):
    os.mkfifo(str(tmp_path / source.partition("#")[0]))
    done = _in_child(f"""
        import pydaf
        from pydaf.interop.convert import convert
        try:
            convert({str(tmp_path / source)!r}, {str(tmp_path / "out.h5df")!r}, progress=False)
        except pydaf.DafError as error:
            print("refused")
        """)
    assert done.returncode == 0 and done.stdout.strip() == "refused", (done.stdout, done.stderr)
    assert not os.path.exists(tmp_path / "out.h5df")


def test_a_fifo_repack_source_or_destination_is_refused(tmp_path):
    source = _source(str(tmp_path / "source.h5df"))
    os.mkfifo(str(tmp_path / "f.h5df"))
    done = _in_child(f"""
        import pydaf
        for source, destination in (({source!r}, {str(tmp_path / "f.h5df")!r}),
                                    ({str(tmp_path / "f.h5df")!r}, {str(tmp_path / "o.h5df")!r})):
            try:
                pydaf.repack(source, destination, overwrite=True, progress=False)
            except pydaf.DafError as error:
                print("refused")
        """)
    assert done.returncode == 0 and done.stdout.split() == ["refused", "refused"], (done.stdout, done.stderr)
    assert Path(tmp_path / "f.h5df").is_fifo()


def test_a_failed_conversion_into_h5df_leaves_nothing_behind(tmp_path):
    # (a file-size limit makes the temporary's writes fail, as a full disk does: its undo journal goes too)
    source = str(tmp_path / "source.h5df")
    daf = pydaf.H5df(source, "w").add_axis("cell", [f"C{index}" for index in range(2000)])
    daf.set_matrix("cell", "cell", "big", np.ones((2000, 200)).repeat(10, axis=1)).close()
    out = tmp_path / "out"
    out.mkdir()
    done = _in_child(f"""
        import resource, signal, pydaf
        from pydaf.interop.convert import convert
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        for destination in ("out.h5df", "all.h5dfs#/g"):
            try:
                convert({source!r}, {str(out)!r} + "/" + destination, progress=False)
            except pydaf.DafError as error:
                print(type(error).__name__)
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["DafStorageError", "DafStorageError"], done.stdout
    assert os.listdir(out) == []


def test_an_interrupted_conversion_into_a_new_h5dfs_file_leaves_no_file(tmp_path):
    from pydaf.composition.destinations import build_daf

    def interrupted(daf):
        daf.add_axis("cell", ["A"])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_daf(str(tmp_path / "new.h5dfs") + "#/g", interrupted)
    assert os.listdir(tmp_path) == []
    build_daf(str(tmp_path / "new.h5dfs") + "#/g", lambda daf: daf.add_axis("cell", ["A"]))
    assert os.listdir(tmp_path) == ["new.h5dfs"]


def test_repack_of_a_corrupt_global_heap_is_a_daf_error_and_never_hangs(tmp_path):
    template = str(tmp_path / "template.h5df")
    pydaf.H5df(template, "w").add_axis("cell", ["A", "B", "C"]).set_scalar("s", "x").close()
    data = Path(template).read_bytes()
    heap = data.find(b"GCOL")
    assert heap > 0
    done = _in_child(f"""
        import os, pydaf
        data = open({template!r}, "rb").read()
        for position in range({heap}, {heap} + 48):
            flipped = bytearray(data)
            flipped[position] ^= 0x6B
            path = os.path.join({str(tmp_path)!r}, f"flipped{{position}}.h5df")
            open(path, "wb").write(flipped)
            try:
                pydaf.repack(path, path + ".out.h5df", progress=False)
                print("ok")
            except pydaf.DafError:
                print("refused")
        """)
    assert done.returncode == 0, done.stderr[-2000:]
    outcomes = done.stdout.split()
    assert len(outcomes) == 48 and "refused" in outcomes, outcomes


def test_a_marker_cut_short_by_a_kill_still_refuses(tmp_path):
    path = str(tmp_path / "x.daf")
    convert(_source(str(tmp_path / "source.h5df")), path, progress=False)
    Path(marker_path(path)).write_bytes(b'{"pid": 12')
    with pytest.raises(pydaf.errors.DafIncompleteError, match="a copy into it, started at an unknown time, was "):
        pydaf.open_daf(path, "r")
