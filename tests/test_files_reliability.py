"""FilesDaf under hostile conditions: hostile names and directories (planted links, odd file names), corrupt files,
modes that must not destroy, read-only opens that must not write, concurrent processes, kills at random moments, and
full disks. Real processes, files, links and (where root may mount one) a real small tmpfs.

Soak lengths scale with ``PYDAF_SOAK`` (``tests/soak.py``): ``PYDAF_SOAK=1`` gives 100 kills, 30 s of concurrent
readers and 500 corruption examples.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pydaf
from pydaf.queries.query import Axis, LookupScalar, LookupVector

from .soak import soak

REPOSITORY = Path(__file__).resolve().parent.parent


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Everything under ``root`` (links not followed): each entry's kind, content (or link target), mode and inode."""
    result: dict[str, tuple[Any, ...]] = {}
    for folder, folders, files in os.walk(root, followlinks=False):
        for name in folders + files:
            path = os.path.join(folder, name)
            status = os.lstat(path)
            relative = os.path.relpath(path, root)
            if os.path.islink(path):
                result[relative] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                result[relative] = ("folder", status.st_mode)
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                result[relative] = ("file", digest, status.st_mode, status.st_ino, status.st_mtime_ns)
    return result


def python(code: str, *arguments: str, **options: Any) -> subprocess.Popen:
    """A child Python process running ``code`` with this checkout's pydaf."""
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *arguments], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)


def example(path: Path, mode: str = "w") -> pydaf.DafWriter:
    """A small data set with every kind of property."""
    daf = pydaf.FilesDaf(path, mode, name="example!")
    daf.add_axis("cell", ["c0", "c1", "c2", "c3"]).add_axis("gene", ["g0", "g1", "g2"])
    daf.set_scalar("title", "cells").set_scalar("count", 4).set_scalar("ratio", 0.5).set_scalar("flag", True)
    daf.set_vector("cell", "age", np.array([1.5, 2.5, 3.5, 4.5]))
    daf.set_vector("cell", "kind", ["a", "b", "a", "c"])
    daf.set_vector("cell", "sparse", sp.csr_matrix(np.array([[0, 7, 0, 9]], dtype=np.int32)))
    daf.add_axis("donor", [f"d{index}" for index in range(20)])
    daf.set_vector("donor", "tag", ["x"] + [""] * 19)  # sparse strings
    daf.set_vector("gene", "is_marker", np.array([True, False, True]))
    daf.set_matrix("cell", "gene", "UMIs", np.arange(12, dtype=np.uint16).reshape(4, 3))
    daf.set_matrix("cell", "gene", "fraction", sp.csc_matrix(np.eye(4, 3, dtype=np.float32)))
    daf.set_matrix("cell", "gene", "label", np.full((4, 3), "x", dtype=object), relayout=False)
    return daf


def everything(daf: pydaf.DafReader) -> dict[str, Any]:
    """Every property of a data set, read back as plain values (a listing or a read that raises is recorded as its
    error type)."""
    values: dict[str, Any] = {}

    def read(key: str, reader: Callable[[], Any]) -> Any:
        try:
            value = reader()
        except pydaf.DafError as error:
            values[key] = type(error).__name__
            return None
        if isinstance(value, set):
            return value
        if isinstance(value, np.ndarray):
            value = (str(value.dtype), value.shape, value.tolist(),
                     None if value.dtype == object else value.tobytes(order="F"))
        elif isinstance(value, pydaf.SparseVector | pydaf.SparseMatrixCSC):
            value = (type(value).__name__, value.shape, *(part.tolist() for part in (
                (value.nzind, value.nzval) if isinstance(value, pydaf.SparseVector) else
                (value.colptr, value.rowval, value.nzval))))
        else:
            value = (type(value).__name__, value)
        values[key] = value
        return value

    for name in read("scalars", daf.scalars_set) or ():
        read(f"scalars/{name}", lambda name=name: daf.get_scalar(name))
    axes = read("axes", daf.axes_set) or set()
    for axis in axes:
        read(f"axes/{axis}", lambda axis=axis: daf.axis_vector(axis))
        for name in read(f"vectors/{axis}", lambda axis=axis: daf.vectors_set(axis)) or ():
            read(f"vectors/{axis}/{name}", lambda axis=axis, name=name: daf.get_stored_vector(axis, name))
        for other in axes:
            names = read(f"matrices/{axis}/{other}", lambda axis=axis, other=other: daf.matrices_set(
                axis, other, relayout=False))
            for name in names or ():
                read(f"matrices/{axis}/{other}/{name}", lambda axis=axis, other=other, name=name:
                     daf.get_stored_matrix(axis, other, name, relayout=False))
    return values


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[Path]:
    """A folder next to the data sets, holding files a hostile data set would like FilesDaf to read, write or
    delete; the test fails if anything in it changes."""
    folder = tmp_path / "sentinel"
    (folder / "inside").mkdir(parents=True)
    (folder / "victim.json").write_text('{"format":"dense","eltype":"Float64"}\n')
    (folder / "victim.data").write_bytes(np.full(4, 666.0).tobytes())
    (folder / "victim.txt").write_text("c0\nc1\nc2\nc3\n")
    (folder / "metadata.json").write_text("{}")
    (folder / "daf.json").write_text('{"version":[1,1]}\n')
    (folder / "inside" / "victim.json").write_text('{"type":"String","value":"outside!"}\n')
    before = tree(folder)
    yield folder
    assert tree(folder) == before, "FilesDaf changed files outside the data set"


# Hostile names.

HOSTILE_NAMES = ["..", ".", "", "../../../sentinel/victim", "../victim", "a/b", "/tmp", "x\0y", ".hidden",
                 "\udcff", 7, None]


def _backend_calls(name: Any) -> list[tuple[str, Callable[[Any], Any]]]:
    """Every storage entry point, with the hostile name in each of its name positions."""
    calls: list[tuple[str, Callable[[Any], Any]]] = [
        ("has_scalar", lambda f: f.format_has_scalar(name)),
        ("get_scalar", lambda f: f.format_get_scalar(name)),
        ("set_scalar", lambda f: f.format_set_scalar(name, 1)),
        ("delete_scalar", lambda f: f.format_delete_scalar(name, for_set=False)),
        ("has_axis", lambda f: f.format_has_axis(name, for_change=False)),
        ("axis_vector", lambda f: f.format_axis_vector(name)),
        ("axis_length", lambda f: f.format_axis_length(name)),
        ("add_axis", lambda f: f.format_add_axis(name, np.array(["a"], dtype=object))),
        ("delete_axis", lambda f: f.format_delete_axis(name)),
        ("vectors_set", lambda f: f.format_vectors_set(name)),
    ]
    for axis, vector in (("cell", name), (name, "age")):
        calls += [
            ("has_vector", lambda f, a=axis, v=vector: f.format_has_vector(a, v)),
            ("get_vector", lambda f, a=axis, v=vector: f.format_get_vector(a, v)),
            ("set_vector", lambda f, a=axis, v=vector: f.format_set_vector(a, v, np.zeros(4))),
            ("delete_vector", lambda f, a=axis, v=vector: f.format_delete_vector(a, v, for_set=False)),
            ("empty_dense_vector", lambda f, a=axis, v=vector: f.format_get_empty_dense_vector(
                a, v, np.dtype(np.float64))),
            ("empty_sparse_vector", lambda f, a=axis, v=vector: f.format_get_empty_sparse_vector(
                a, v, np.dtype(np.float64), 1, np.dtype(np.uint32))),
        ]
    for rows, columns, matrix in (("cell", "gene", name), (name, "gene", "UMIs"), ("cell", name, "UMIs")):
        if matrix == "UMIs":
            calls.append(("matrices_set", lambda f, r=rows, c=columns: f.format_matrices_set(r, c)))
        calls += [
            ("has_matrix", lambda f, r=rows, c=columns, m=matrix: f.format_has_matrix(r, c, m)),
            ("get_matrix", lambda f, r=rows, c=columns, m=matrix: f.format_get_matrix(r, c, m)),
            ("set_matrix", lambda f, r=rows, c=columns, m=matrix: f.format_set_matrix(r, c, m, 1.0)),
            ("delete_matrix", lambda f, r=rows, c=columns, m=matrix: f.format_delete_matrix(r, c, m, for_set=False)),
            ("empty_dense_matrix", lambda f, r=rows, c=columns, m=matrix: f.format_get_empty_dense_matrix(
                r, c, m, np.dtype(np.float32))),
            ("empty_sparse_matrix", lambda f, r=rows, c=columns, m=matrix: f.format_get_empty_sparse_matrix(
                r, c, m, np.dtype(np.float32), 1, np.dtype(np.uint32))),
        ]
    return calls


def _public_calls(name: Any) -> list[tuple[str, Callable[[Any], Any]]]:
    return [
        ("has_scalar", lambda d: d.has_scalar(name)),
        ("get_scalar", lambda d: d.get_scalar(name)),
        ("set_scalar", lambda d: d.set_scalar(name, 1)),
        ("delete_scalar", lambda d: d.delete_scalar(name)),
        ("has_axis", lambda d: d.has_axis(name)),
        ("axis_vector", lambda d: d.axis_vector(name)),
        ("add_axis", lambda d: d.add_axis(name, ["a"])),
        ("delete_axis", lambda d: d.delete_axis(name)),
        ("has_vector", lambda d: d.has_vector("cell", name)),
        ("get_vector", lambda d: d.get_vector("cell", name)),
        ("set_vector", lambda d: d.set_vector("cell", name, np.zeros(4))),
        ("delete_vector", lambda d: d.delete_vector("cell", name)),
        ("has_matrix", lambda d: d.has_matrix("cell", "gene", name)),
        ("get_matrix", lambda d: d.get_matrix("cell", "gene", name)),
        ("set_matrix", lambda d: d.set_matrix("cell", "gene", name, np.zeros((4, 3)))),
        ("delete_matrix", lambda d: d.delete_matrix("cell", "gene", name)),
        ("get_query", lambda d: d[Axis("cell") | LookupVector(name)]),
        ("get_query", lambda d: d[LookupScalar(name)]),
    ]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_hostile_names_never_leave_the_directory(tmp_path, sentinel, name):
    """Every entry point, through the storage itself and through the API: a name that is not a single file name is
    refused with a DafError and nothing outside the data set (nor any stored property) changes."""
    path = tmp_path / "data.daf"
    daf = example(path)
    before = everything(daf)
    for what, call in _backend_calls(name):
        if what.startswith("has_"):  # a name the storage could never hold is not found (abc/format.py)
            assert call(daf.format) is False, what
            continue
        with pytest.raises(pydaf.DafError):
            call(daf.format)
            pytest.fail(f"format_{what} accepted the name {name!r}")
        daf.format.format_discard_empty()
    for what, call in _public_calls(name):
        try:
            result = call(daf)
        except pydaf.DafError:
            continue
        assert what.startswith("has_") and result is False, f"{what} accepted the name {name!r}"
    assert everything(pydaf.FilesDaf(path, "r")) == before


def test_a_query_with_escaped_slashes_reads_nothing_outside(tmp_path, sentinel):
    daf = example(tmp_path / "data.daf", "w")
    for query in (Axis("cell") | LookupVector("../../../sentinel/victim"), LookupScalar("../../sentinel/inside/victim"),
                  "@ cell : v\\/..\\/..\\/..\\/..\\/sentinel\\/victim"):
        with pytest.raises(pydaf.DafError):
            daf[query]


def test_path_safe_odd_names_stay_inside(tmp_path, sentinel):
    """Names that are odd but single file names (backslash, spaces, unicode, a leading dash) are stored inside."""
    path = tmp_path / "data.daf"
    daf = example(path)
    for name in ("with space", "ünï ☃", "-rf", "x.json", "y.backup", "z.tmp-1"):
        daf.set_vector("cell", name, np.arange(4.0)).set_scalar(name, name)
        assert pydaf.FilesDaf(path, "r").get_vector("cell", name).tolist() == [0, 1, 2, 3]
        assert pydaf.FilesDaf(path, "r").get_scalar(name) == name
    daf.format.format_set_vector("cell", "a\\b", np.arange(4.0))  # the writer layer refuses it; FilesDaf can
    assert (path / "vectors" / "cell" / "a\\b.data").exists()
    assert {"a\\b", "x.json", "y.backup", "z.tmp-1"} <= pydaf.FilesDaf(path, "r").vectors_set("cell")
    long = "a" * 250  # a file name, but one whose hidden backup would not be
    assert not daf.has_vector("cell", long) and not daf.format.format_has_vector("cell", "a" * 300)
    with pytest.raises(pydaf.DafNameError, match="too long"):
        daf.set_vector("cell", long, np.arange(4.0))


# Hostile directories.


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        import shutil

        shutil.rmtree(link)
    link.symlink_to(target)


def test_a_metadata_json_link_is_replaced_never_followed(tmp_path, sentinel):
    path = tmp_path / "data.daf"
    example(path)
    _link(path / "metadata.json", sentinel / "metadata.json")
    daf = pydaf.FilesDaf(path, "r+")
    _link(path / "metadata.json", sentinel / "metadata.json")  # again, under the open writer
    daf.set_scalar("more", 1)
    assert not (path / "metadata.json").is_symlink()
    _link(path / "metadata.json", sentinel / "metadata.json")
    daf.delete_scalar("more")
    assert not (path / "metadata.json").is_symlink()
    assert "scalars/title" in json.loads((path / "metadata.json").read_text())


@pytest.mark.parametrize("planted", ["daf.json", "scalars", "axes", "vectors", "vectors/cell", "matrices",
                                     "matrices/cell", "matrices/cell/gene", "matrices/gene/cell"])
def test_linked_folders_and_files_are_refused(tmp_path, sentinel, planted):
    """A link at a path FilesDaf opens (pointing at a copy of the data, so following it would "work"): reads and
    writes through it are refused with a DafError; deleting the axis removes the link itself."""
    import shutil

    path = tmp_path / "data.daf"
    example(path)
    copy = tmp_path / "elsewhere" / "copy"
    copy.parent.mkdir()
    if (path / planted).is_dir():
        shutil.copytree(path / planted, copy)
    else:
        shutil.copy(path / planted, copy)
    before = tree(copy.parent)
    _link(path / planted, copy)
    if planted == "daf.json":
        for mode in ("r", "r+", "w+"):
            with pytest.raises(pydaf.DafFormatError, match=r"daf\.json"):
                pydaf.FilesDaf(path, mode)
        return
    if planted == "scalars":  # the open looks for the "name" scalar, and still opens without it (for `pydaf check`)
        for mode in ("r", "r+"):
            daf = pydaf.FilesDaf(path, mode)
            for read in (daf.scalars_set, lambda: daf.get_scalar("version")):  # noqa: B023 - used right away
                with pytest.raises(pydaf.DafFormatError, match="scalars: a symbolic link"):
                    read()
            del daf
        assert tree(copy.parent) == before
        return
    outcomes = everything(pydaf.FilesDaf(path, "r"))
    assert "DafFormatError" in outcomes.values(), outcomes
    writer = pydaf.FilesDaf(path, "r+")
    for write in (lambda: writer.set_scalar("new", 1), lambda: writer.set_vector("cell", "new", np.zeros(4)),
                  lambda: writer.set_matrix("cell", "gene", "new", np.zeros((4, 3))),
                  lambda: writer.delete_vector("cell", "age", must_exist=False),
                  lambda: writer.delete_matrix("cell", "gene", "UMIs", must_exist=False),
                  lambda: writer.add_axis("batch", ["b"])):
        with contextlib.suppress(pydaf.DafError):
            write()
    for axis in ("cell", "gene", "donor", "batch"):
        with contextlib.suppress(pydaf.DafError):
            writer.delete_axis(axis, must_exist=False)
    assert tree(copy.parent) == before


def test_links_at_the_temporary_and_backup_names_are_never_followed(tmp_path, sentinel):
    """Temporaries are created exclusively under unpredictable names, so links planted at the names an older writer
    used (``.<file>.tmp-<pid>``) or at the backup names are never written through."""
    path = tmp_path / "data.daf"
    example(path)  # and closed
    folder = path / "vectors" / "cell"

    def plant() -> None:
        for name in ("age.data", "age.json", "new.data", "new.json", "built.data", "built.json"):
            for planted in (f".{name}.tmp-{os.getpid()}", f".{name}.backup"):
                _link(folder / planted, sentinel / "victim.data")
        for name in ("metadata.json", "daf.json"):
            _link(path / f".{name}.tmp-{os.getpid()}", sentinel / name)

    plant()
    assert pydaf.FilesDaf(path, "r").get_vector("cell", "age").tolist() == [1.5, 2.5, 3.5, 4.5]
    daf = pydaf.FilesDaf(path, "r+")  # repairs: drops the planted links (never their targets)
    plant()  # and again under the open writer
    assert not daf.has_vector("cell", "new")  # a backup that is a link is not a property
    daf.set_vector("cell", "age", np.full(4, 2.0), overwrite=True).set_vector("cell", "new", np.full(4, 3.0))
    daf.set_scalar("other", 1)
    with daf.empty_dense_vector("cell", "built", "Float64") as built:
        built[:] = 5
    del daf
    reopened = pydaf.FilesDaf(path, "r+")
    assert not [name for name in os.listdir(folder) if name.startswith(".")]
    assert reopened.get_vector("cell", "age").tolist() == [2.0] * 4
    assert reopened.get_vector("cell", "new").tolist() == [3.0] * 4
    assert reopened.get_vector("cell", "built").tolist() == [5.0] * 4


def test_a_planted_dot_dot_axis_deletes_nothing(tmp_path, sentinel):
    """Files named so they would list as axis ``..`` or ``.`` (``axes/...txt``, ``axes/..txt``) are not axes."""
    path = tmp_path / "data.daf"
    example(path)
    (path / "axes" / "...txt").write_text("a\n")
    (path / "axes" / "..txt").write_text("a\n")
    before = tree(path)
    daf = pydaf.FilesDaf(path, "r+")
    assert daf.axes_set() == {"cell", "gene", "donor"}
    for name in ("..", "."):
        with pytest.raises(pydaf.DafError):
            daf.delete_axis(name)
        with pytest.raises(pydaf.DafError):
            daf.add_axis(name, ["x"])
    assert all(key in tree(path) for key in before)
    assert everything(daf)["vectors/cell/age"][2] == [1.5, 2.5, 3.5, 4.5]


def test_odd_file_names_in_the_directory(tmp_path, sentinel):
    """Non-UTF-8 file names are not Daf names (skipped), names with a newline are listed and read, FIFOs and folders
    where files belong are refused, and none of it stops a writable open or a rebuild of ``metadata.json``."""
    path = tmp_path / "data.daf"
    example(path)
    folder = path / "vectors" / "cell"
    descriptor = b'{"format":"dense","eltype":"Float64"}\n'
    os.close(os.open(os.path.join(os.fsencode(folder), b"\xff.json"), os.O_CREAT | os.O_WRONLY))
    (folder / "a\nb.json").write_bytes(descriptor)
    (folder / "a\nb.data").write_bytes(np.arange(4.0).tobytes())
    os.mkfifo(folder / "fifo.json")
    (folder / "dir.json").mkdir()
    daf = pydaf.FilesDaf(path, "r+")
    assert {"a\nb", "fifo", "dir"} <= daf.vectors_set("cell") and "\udcff" not in daf.vectors_set("cell")
    assert daf.format.format_get_vector("cell", "a\nb")[0].tolist() == [0, 1, 2, 3]
    for name in ("fifo", "dir"):
        with pytest.raises(pydaf.DafFormatError):
            daf.get_vector("cell", name)
    daf.delete_vector("cell", "age")  # rebuilds metadata.json
    index = json.loads((path / "metadata.json").read_text())
    assert "vectors/cell/a\nb" in index and "vectors/cell/age" not in index


# Modes never destroy what is not a Daf data set.


def test_mode_w_refuses_a_folder_that_is_not_a_daf_data_set(tmp_path):
    folder = tmp_path / "my documents"
    (folder / "sub").mkdir(parents=True)
    (folder / "thesis.tex").write_text("years of work")
    (folder / "sub" / "data.csv").write_text("1,2,3")
    before = tree(folder)
    for mode in ("w", "w+"):
        with pytest.raises(pydaf.DafModeError, match="not a daf directory"):
            pydaf.FilesDaf(folder, mode)
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="not a daf directory"):
            pydaf.FilesDaf(folder, mode)
    assert tree(folder) == before
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(pydaf.DafFormatError, match="not a directory"):
        pydaf.FilesDaf(tmp_path / "file", "w")
    assert (tmp_path / "file").read_text() == "not a folder"


def test_mode_w_removes_only_dafs_own_files(tmp_path, sentinel):
    """Truncating a Daf directory removes Daf's files and folders, keeps anything else, and never follows a link."""
    path = tmp_path / "data.daf"
    example(path)
    (path / "README.txt").write_text("notes about the data")
    (path / "extra").mkdir()
    (path / "extra" / "keep.txt").write_text("keep")
    _link(path / "matrices" / "cell", sentinel / "inside")
    (path / "vectors" / "outside").symlink_to(sentinel)
    daf = pydaf.FilesDaf(path, "w")
    assert daf.axes_set() == set() and daf.scalars_set() == set()
    assert (path / "README.txt").read_text() == "notes about the data" and (path / "extra" / "keep.txt").exists()
    assert (path / "daf.json").read_text() == '{"version":[1,1]}\n' and (path / "metadata.json").read_text() == "{}"
    assert sorted(os.listdir(path)) == [".daf.lock", "README.txt", "axes", "daf.json", "extra", "matrices",
                                        "metadata.json", "scalars", "vectors"]


def test_an_interrupted_creation_can_be_opened_again(tmp_path):
    """A creation killed before daf.json was written leaves only Daf's own empty skeleton: mode w+ completes it."""
    path = tmp_path / "new.daf"
    for folder in ("scalars", "axes"):
        (path / folder).mkdir(parents=True)
    (path / ".daf.lock").write_text("")
    (path / ".metadata.json.tmp-0123abcd").write_text("{")
    daf = pydaf.FilesDaf(path, "w+").set_scalar("x", 1)
    assert pydaf.FilesDaf(path, "r").get_scalar("x") == 1 and daf.has_scalar("x")
    assert not [name for name in os.listdir(path) if ".tmp-" in name]


def test_an_interrupted_axis_delete_leaves_nothing_to_revive(tmp_path):
    """A delete_axis killed after the axis file went (its folders still full): adding the axis again, with other
    entries, starts empty instead of reviving vectors and matrices of the wrong length."""
    path = tmp_path / "data.daf"
    example(path)
    (path / "axes" / "cell.txt").unlink()
    daf = pydaf.FilesDaf(path, "r+").add_axis("cell", ["x", "y"])
    assert daf.vectors_set("cell") == set() and daf.matrices_set("cell", "gene") == set()
    assert daf.matrices_set("gene", "cell", relayout=False) == set()
    assert everything(daf)["vectors/gene/is_marker"][2] == [True, False, True]


def test_a_failed_overwrite_keeps_the_old_value(tmp_path):
    """The old property stays visible and intact until the new one commits, so an overwrite refused half-way (here a
    string with a newline, which FilesDaf can't store) leaves it as it was, in this process and in others."""
    path = tmp_path / "data.daf"
    daf = example(path)
    with pytest.raises(pydaf.DafValueError, match="newline"):
        daf.set_vector("cell", "kind", ["a\nb", "x", "y", "z"], overwrite=True)
    with pytest.raises(pydaf.DafValueError, match="newline"):
        daf.set_matrix("cell", "gene", "label", np.full((4, 3), "\n", dtype=object), overwrite=True, relayout=False)
    for reader in (daf, pydaf.FilesDaf(path, "r")):
        assert reader.get_vector("cell", "kind").tolist() == ["a", "b", "a", "c"]
        assert reader.get_matrix("cell", "gene", "label").tolist() == [["x"] * 3] * 4
    assert not [name for folder, _, files in os.walk(path) for name in files if ".tmp-" in name]


def test_nested_builders(tmp_path):
    daf = example(tmp_path / "data.daf")
    with daf.empty_dense_vector("cell", "outer", "Int32") as outer:
        with daf.empty_sparse_vector("cell", "inner", "Float32", 1) as (nzind, nzval):
            nzind[0], nzval[0] = 2, 0.5
        outer[:] = 7
    reader = pydaf.FilesDaf(tmp_path / "data.daf", "r")
    assert reader.get_vector("cell", "outer").tolist() == [7] * 4
    assert reader.get_vector("cell", "inner").tolist() == [0, 0.5, 0, 0]

# Read-only opens are read-only all the way down, and never write.


def _leftovers(path: Path) -> None:
    """What writers killed at various moments leave behind."""
    cell = path / "vectors" / "cell"
    os.replace(cell / "age.json", cell / ".age.json.backup")  # an overwrite killed before its commit
    os.replace(cell / "age.data", cell / ".age.data.backup")
    (cell / "age.data").write_bytes(np.full(4, 99.0).tobytes())
    (cell / ".kind.txt.tmp-1234").write_bytes(b"partial")
    os.link(cell / "sparse.json", cell / ".sparse.json.backup")  # an overwrite killed after its commit
    (path / "metadata.json").write_text('{"stale":')


def test_a_read_only_open_never_writes(tmp_path):
    path = tmp_path / "data.daf"
    expected = everything(example(path))
    _leftovers(path)
    before = tree(path)
    daf = pydaf.FilesDaf(path, "r")
    assert everything(daf) == expected  # the committed state, read from the leftovers
    daf.description(deep=True)
    assert tree(path) == before
    (path / "metadata.json").unlink()
    before = tree(path)
    assert everything(pydaf.FilesDaf(path, "r")) == expected
    assert tree(path) == before  # a read-only open does not rebuild a missing metadata.json either
    assert everything(pydaf.FilesDaf(path, "r+")) == expected  # the writer repairs
    assert not [name for name in os.listdir(path / "vectors" / "cell") if name.startswith(".")]
    index = json.loads((path / "metadata.json").read_text())
    assert index["vectors/cell/age"] == {"format": "dense", "eltype": "Float64"}


def test_a_read_only_data_set_is_read_only_all_the_way_down(tmp_path):
    path = tmp_path / "data.daf"
    expected = everything(example(path))
    before = tree(path)
    daf = pydaf.FilesDaf(path, "r")
    base = daf.base
    for write in (lambda: base.set_scalar("x", 1), lambda: base.set_scalar("title", "x", overwrite=True),
                  lambda: base.delete_scalar("title"), lambda: base.add_axis("batch", ["b"]),
                  lambda: base.delete_axis("cell"), lambda: base.set_vector("cell", "age", 0, overwrite=True),
                  lambda: base.delete_vector("cell", "age"), lambda: base.set_matrix("cell", "gene", "x", 1.0),
                  lambda: base.delete_matrix("cell", "gene", "UMIs"), lambda: base.relayout_matrix(
                      "cell", "gene", "label"),
                  lambda: base.format.format_set_scalar("x", np.int64(1)), lambda: base.format.format_delete_scalar(
                      "title", for_set=True)):
        with pytest.raises(pydaf.DafReadOnlyError):
            write()
    for build in (lambda: base.empty_dense_vector("cell", "x", "Float32"),
                  lambda: base.empty_sparse_matrix("cell", "gene", "x", "Float32", 1)):
        with pytest.raises(pydaf.DafReadOnlyError), build():
            pytest.fail("a read-only data set handed out a writable buffer")
    assert tree(path) == before and everything(daf) == expected


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_returned_arrays_are_read_only_maps(tmp_path, mode):
    path = tmp_path / "data.daf"
    example(path).add_axis("many", [str(index) for index in range(5000)]).set_vector("many", "big",
                                                                                     np.arange(5000.0))
    daf = pydaf.FilesDaf(path, mode)
    arrays = [daf.get_vector("many", "big"), daf.get_vector("cell", "age"), daf.get_matrix("cell", "gene", "UMIs"),
              daf.format.format_get_vector("many", "big")[0], daf.format.format_get_matrix("cell", "gene", "UMIs")[0]]
    stored = daf.get_stored_matrix("cell", "gene", "fraction")
    arrays += [stored.colptr, stored.rowval, stored.nzval]
    for array in arrays:
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array.flags.writeable = True
        with pytest.raises(ValueError):
            array[...] = 0
    assert daf.get_vector("many", "big")[1] == 1.0


# Corrupt directories: every read is a DafError or a correct read; nothing crashes, hangs or allocates hugely.

DECLARED = (".data", ".nzind", ".nzval", ".colptr", ".rowval")  # binary files whose length the descriptor fixes


def _property_key(relative: str) -> str:
    """``vectors/cell/age.data`` -> ``vectors/cell/age``."""
    folder, _, file = relative.rpartition("/")
    return f"{folder}/{file.split('.', 1)[0]}"


def _check_corrupted(path: Path, relative: str, reference: dict[str, Any], *, must_fail: bool) -> dict[str, Any]:
    """Read everything after ``relative`` was corrupted: only DafErrors; untouched properties read as before; the
    corrupted property raises (``must_fail``) or reads what its files hold."""
    tracemalloc.start()
    try:
        try:
            daf = pydaf.FilesDaf(path, "r")
        except pydaf.DafError:
            assert relative == "daf.json", f"the open failed for a corrupt {relative}"
            return {}
        values = everything(daf)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64e6, f"reading a tiny corrupt data set allocated {peak / 1e6:.0f} MB"
    corrupted = _property_key(relative)
    for key, value in reference.items():
        axis_file = relative.startswith("axes/") and relative[5:-4] in key.split("/")[1:-1] + (
            [key.split("/")[1]] if key.startswith("axes/") else [])
        if key != corrupted and not axis_file and relative not in ("metadata.json", "daf.json"):
            assert values.get(key) == value, f"{key} changed when {relative} was corrupted"
    outcome = values.get(corrupted)
    if must_fail:
        assert outcome == "DafFormatError", f"{corrupted} read as {outcome} with a corrupt {relative}"
    elif isinstance(outcome, tuple) and outcome[0] != "SparseVector" and outcome[0] != "SparseMatrixCSC" and \
            relative.endswith(".data") and not outcome[0] == "object":
        assert outcome[3] == (path / relative).read_bytes(), f"{corrupted} misread"
    return values


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("pristine") / "data.daf"
    example(path)
    return path, everything(pydaf.FilesDaf(path, "r"))


def _copy(pristine: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(pristine, target, ignore=shutil.ignore_patterns(".daf.lock"))
    return target


HOSTILE_JSON = [b"", b"{", b"[]", b'"dense"', b"null", b"\xff\xfe{}", b"[" * 100_000, b'{"format":"dense"}',
                b'{"format":"lazy","eltype":"Float64"}', b'{"format":["dense"],"eltype":"Float64"}',
                b'{"format":"dense","eltype":"Complex64"}', b'{"format":"dense","eltype":["Float64"]}',
                b'{"format":"dense","eltype":"Float32"}', b'{"format":"dense","eltype":"String"}',
                b'{"format":"sparse"}', b'{"format":"sparse","eltype":"Float64","indtype":"Float64"}',
                b'{"format":"sparse","eltype":"Float64","indtype":7}',
                b'{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":1000000000000000}}',
                b'{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":-1}}',
                b'{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":true}}',
                b'{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":1.5}}',
                b'{"format":"dense","eltype":"Float64","packed_format":"indexed+zipped"}']


@pytest.mark.parametrize("descriptor", HOSTILE_JSON, ids=lambda text: text[:40].decode("utf-8", "replace"))
@pytest.mark.parametrize("relative", ["vectors/cell/age.json", "vectors/cell/sparse.json",
                                      "matrices/cell/gene/fraction.json", "matrices/cell/gene/UMIs.json"])
def test_hostile_descriptors(tmp_path, pristine, relative, descriptor):
    path = _copy(pristine[0], tmp_path / "data.daf")
    (path / relative).write_bytes(descriptor)
    _check_corrupted(path, relative, pristine[1], must_fail=True)


SIZES = [("vectors/cell/age.data", 31), ("vectors/cell/age.data", 33), ("vectors/cell/age.data", 0),
         ("vectors/cell/sparse.nzind", 4), ("vectors/cell/sparse.nzval", 12), ("matrices/cell/gene/UMIs.data", 22),
         ("matrices/cell/gene/fraction.colptr", 24), ("matrices/cell/gene/fraction.rowval", 100),
         ("matrices/cell/gene/fraction.nzval", 8), ("matrices/gene/cell/UMIs.data", 10 ** 6),
         ("vectors/cell/kind.txt", 4), ("vectors/cell/kind.txt", 9), ("vectors/donor/tag.nztxt", 0),
         ("matrices/cell/gene/label.txt", 5)]


@pytest.mark.parametrize(("relative", "size"), SIZES)
def test_data_files_of_the_wrong_size(tmp_path, pristine, relative, size):
    path = _copy(pristine[0], tmp_path / "data.daf")
    data = (path / relative).read_bytes()
    (path / relative).write_bytes((data * (size // max(len(data), 1) + 1))[:size])
    _check_corrupted(path, relative, pristine[1], must_fail=True)


@pytest.mark.parametrize("relative", ["vectors/cell/age.data", "vectors/cell/sparse.nzind",
                                      "matrices/cell/gene/fraction.colptr", "vectors/cell/age.json"])
def test_missing_and_replaced_data_files(tmp_path, pristine, relative):
    path = _copy(pristine[0], tmp_path / "data.daf")
    (path / relative).unlink()
    _check_corrupted(path, relative, pristine[1], must_fail=not relative.endswith(".json"))
    (path / relative).mkdir()
    _check_corrupted(path, relative, pristine[1], must_fail=True)


SCALARS = [b'{"type":"Int8","value":300}', b'{"type":"Int64","value":1.5}', b'{"type":"UInt8","value":-1}',
           b'{"type":"Bool","value":2}', b'{"type":"String","value":5}', b'{"type":"Float32","value":1e300}',
           b'{"type":"Int64","value":1e400}', b'{"type":"Int64","value":"x"}', b'{"value":1}',
           b'{"type":"Int64"}', b'{"type":["Int64"],"value":1}', b'{"type":"Int64","value":' + b"9" * 4000 + b"}",
           b'{"type":"Float64","value":' + b"9" * 4000 + b"}", b'{"type":"Float64","value":[1]}', b"[1]",
           b'{"type":"Date","value":1}']


@pytest.mark.parametrize("descriptor", SCALARS, ids=lambda text: text[:40].decode())
def test_hostile_scalars(tmp_path, pristine, descriptor):
    path = _copy(pristine[0], tmp_path / "data.daf")
    (path / "scalars" / "count.json").write_bytes(descriptor)
    _check_corrupted(path, "scalars/count.json", pristine[1], must_fail=True)
    (path / "scalars" / "name.json").write_bytes(descriptor)  # read by the open itself, which still opens (so that
    daf = pydaf.FilesDaf(path, "r")                           # `pydaf check` can report it), under its path's name
    with pytest.raises(pydaf.DafFormatError, match="the scalar: name"):
        daf.get_scalar("name")


def test_scalars_convert_as_julia_does(tmp_path, pristine):
    path = _copy(pristine[0], tmp_path / "data.daf")
    for text, expected in ((b'{"type":"Int8","value":3.0}', np.int8(3)), (b'{"type":"Bool","value":1}', np.True_),
                           (b'{"type":"bool","value":false}', np.False_), (b'{"type":"Float32","value":2}',
                                                                           np.float32(2)),
                           (b'{"value":"x","type":"string"}', "x"), (b'{"type":"Int","value":-7}', np.int64(-7))):
        (path / "scalars" / "count.json").write_bytes(text)
        value = pydaf.FilesDaf(path, "r").get_scalar("count")
        assert value == expected and type(value) is type(expected), (text, value)


@pytest.mark.parametrize("text", [b"", b"{", b"[1,1]", b'{"version":[1]}', b'{"version":["1","1"]}',
                                  b'{"version":[true,false]}', b'{"version":[2,0]}', b'{"version":[1,2]}',
                                  b'{"version":{"major":1}}', b"\xff", b"[" * 100_000, b" " * 5000])
def test_hostile_daf_json(tmp_path, pristine, text):
    path = _copy(pristine[0], tmp_path / "data.daf")
    (path / "daf.json").write_bytes(text)
    for mode in ("r", "r+", "w+"):
        with pytest.raises(pydaf.DafFormatError):
            pydaf.FilesDaf(path, mode)


@pytest.mark.parametrize("text", [b"c0\nc1\nc2\nc3", b"c0\n\xff\n", b"c0\nc1\n", b"c0\nc1\nc2\nc3\nc4\n"])
def test_hostile_axis_files(tmp_path, pristine, text):
    path = _copy(pristine[0], tmp_path / "data.daf")
    (path / "axes" / "cell.txt").write_bytes(text)
    values = _check_corrupted(path, "axes/cell.txt", pristine[1], must_fail=False)
    for key in ("vectors/cell/age", "vectors/cell/kind", "matrices/cell/gene/UMIs", "matrices/gene/cell/UMIs"):
        assert values[key] == "DafFormatError", key  # (a sparse vector may fit the new length, and is read)


_MUTATIONS = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 200)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(1, 255)),
    st.tuples(st.just("replace"), st.one_of(
        st.binary(max_size=200),
        st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda children: st.lists(children, max_size=4) | st.dictionaries(
                         st.sampled_from(["format", "eltype", "indtype", "n_elements", "nzind", "nzval", "colptr",
                                          "rowval", "type", "value", "version"]), children, max_size=4),
                     max_leaves=12).map(lambda value: json.dumps(value).encode()))))


def _mutate(data: bytes, mutation: tuple[Any, ...]) -> bytes:
    if mutation[0] == "truncate":
        return data[:mutation[1]]
    if mutation[0] == "append":
        return data + mutation[1]
    if mutation[0] == "flip":
        if not data:
            return b"\x01"
        position = mutation[1] % len(data)
        return data[:position] + bytes([data[position] ^ mutation[2]]) + data[position + 1:]
    return mutation[1]


@settings(max_examples=round(soak(500, 40)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(index=st.integers(0, 10 ** 6), mutation=_MUTATIONS)
def test_corruption_fuzz(tmp_path_factory, pristine, index, mutation):
    path = _copy(pristine[0], tmp_path_factory.mktemp("fuzz") / "data.daf")
    files = sorted(os.path.relpath(os.path.join(folder, file), path) for folder, _, names in os.walk(path)
                   for file in names if not file.startswith("."))
    relative = files[index % len(files)]
    data = (path / relative).read_bytes()
    mutated = _mutate(data, mutation)
    (path / relative).write_bytes(mutated)
    resized = len(mutated) != len(data) and relative.endswith(DECLARED) and "/" in relative
    _check_corrupted(path, relative, pristine[1], must_fail=resized and mutated != data)


# Processes: one writer at a time, readers of a live writer, kills at random moments.

LOCKER = """
    import sys, pydaf
    daf = pydaf.FilesDaf(sys.argv[1], "r+")
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_one_writer_process_at_a_time(tmp_path):
    path = tmp_path / "data.daf"
    example(path)
    child = python(LOCKER, str(path), stdin=subprocess.PIPE)
    try:
        assert child.stdout.readline() == "locked\n"
        for mode in ("r+", "w+", "w"):
            with pytest.raises(pydaf.errors.DafLockedError,
                               match=f"another process has it open \\(pid: {child.pid}\\)"):
                pydaf.FilesDaf(path, mode)
        assert pydaf.FilesDaf(path, "r").get_scalar("title") == "cells"  # readers need no lock
    finally:
        child.kill()  # a killed writer's lock goes with it
        child.wait()
    first = pydaf.FilesDaf(path, "r+")
    second = pydaf.FilesDaf(path, "r+")  # writable opens in one process share the lock
    second.set_scalar("x", 1)
    assert first.get_scalar("x") == 1
    child = python(LOCKER, str(path), stdin=subprocess.PIPE)
    assert child.wait(60) != 0 and f"another process has it open (pid: {os.getpid()})" in child.stderr.read()
    del first, second
    gc.collect()
    child = python(LOCKER, str(path), stdin=subprocess.PIPE)
    assert child.stdout.readline() == "locked\n"
    child.communicate("\n", timeout=60)
    assert child.returncode == 0


def test_a_forked_child_does_not_write_through_an_inherited_writer(tmp_path):
    path = tmp_path / "data.daf"
    daf = example(path)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            daf.set_scalar("forked", 1)
            code = 1
        except pydaf.DafModeError:
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not daf.has_scalar("forked")
    daf.set_scalar("parent", 1)  # the parent still holds the lock
    assert pydaf.FilesDaf(path, "r").get_scalar("parent") == 1


CONCURRENT_WRITER = """
    import sys, time
    from tests.files_workload import apply
    import pydaf
    daf = pydaf.FilesDaf(sys.argv[1], "r+")
    print("ready", flush=True)
    end = time.monotonic() + float(sys.argv[2])
    index = 0
    while time.monotonic() < end:
        index += 1
        apply(daf, index)
    print(index, flush=True)
"""

CONCURRENT_READER = """
    import json, sys, time
    from tests.files_workload import keys, observed
    import pydaf
    end = time.monotonic() + float(sys.argv[2])
    opens = reads = missing = 0
    problems = []
    while time.monotonic() < end:
        daf = pydaf.FilesDaf(sys.argv[1], "r")
        opens += 1
        for key in sorted(keys(daf)):
            try:
                value = observed(daf, key)
            except pydaf.DafMissingError:
                value = "missing"
            if value == "missing":
                missing += 1
            elif isinstance(value, str):
                problems.append([key, value])
            else:
                reads += 1
    print(json.dumps({"opens": opens, "reads": reads, "missing": missing, "problems": problems[:20]}), flush=True)
"""


def test_readers_of_a_live_writer(tmp_path):
    """One writer process writing all the time (sets, overwrites changing forms, deletes, builders), three reader
    processes opening the data set again and again: no reader ever sees a mixed or partial property, the writer
    never fails, and nothing is left behind."""
    from .files_workload import create

    path = str(tmp_path / "data.daf")
    create(path)
    seconds = soak(30, 3)
    writer = python(CONCURRENT_WRITER, path, str(seconds), cwd=REPOSITORY)
    assert writer.stdout.readline() == "ready\n", writer.stderr.read()
    readers = [python(CONCURRENT_READER, path, str(seconds), cwd=REPOSITORY) for _ in range(3)]
    output = _rest(writer)
    assert writer.returncode == 0, writer.stderr.read()
    writes = int(output)
    for reader in readers:
        output, errors = reader.communicate(timeout=seconds * 10 + 120)
        assert reader.returncode == 0, errors
        report = json.loads(output)
        assert report["problems"] == [] and report["opens"] >= 2 and report["reads"] > 0, report
    assert writes > 20
    repaired = pydaf.FilesDaf(path, "r+")
    assert not [name for folder, _, files in os.walk(path) for name in files if name.startswith(".") and
                name != ".daf.lock"], "the writer left temporaries or backups"
    assert json.loads(Path(path, "metadata.json").read_text()).keys() == _index_keys(repaired)


def _rest(child: subprocess.Popen) -> str:
    """The rest of a child's output, once it has ended (``communicate`` would lose what ``readline`` buffered)."""
    output = child.stdout.read()
    child.wait(timeout=600)
    return output


def _index_keys(daf: pydaf.DafReader) -> set[str]:
    from .files_workload import keys

    return keys(daf) | {f"axes/{axis}" for axis in daf.axes_set()}


KILLED_WRITER = """
    import sys
    from tests.files_workload import run
    run(sys.argv[1], int(sys.argv[2]))
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_writers_killed_at_random_moments(tmp_path):
    """A child process runs the workload and is killed at a random moment, again and again (each child goes on from
    the last operation acknowledged). After each kill, a read-only open (which must not change a byte) and then a
    writable open (which repairs) see every property whole, holding either its value after the last acknowledged
    operation or after the one in flight: no silently wrong property, no lost earlier data."""
    from .files_workload import advance, create, keys, observed

    path = str(tmp_path / "data.daf")
    create(path)
    generator = random.Random(7)
    state: dict[str, tuple[str, int]] = {}
    done = 0  # operations acknowledged
    kills = round(soak(100, 10))
    # How many kills must land inside a write (leaving temporaries to repair): on a loaded machine a run of kills
    # can miss them all by chance (CI once saw 1 in 10), so the test goes on killing, up to 5x as often, until enough
    # did; it fails only if they still did not.
    needed = max(2, kills // 4)
    interrupted = rounds = 0
    while rounds < kills or (interrupted < needed and rounds < 5 * kills):
        rounds += 1
        child = python(KILLED_WRITER, path, str(done + 1), cwd=REPOSITORY)
        assert child.stdout.readline() == "ready\n", child.stderr.read()
        time.sleep(generator.uniform(0.0, 0.6))
        child.send_signal(signal.SIGKILL)
        output = _rest(child)
        assert child.returncode == -signal.SIGKILL
        for line in output.split():
            assert int(line) == done + 1
            done += 1
            state = advance(state, done)
        possible = (state, advance(state, done + 1))  # the operation in flight may or may not have happened

        leftovers = [name for folder, _, files in os.walk(path) for name in files
                     if name.startswith(".") and name != ".daf.lock"]
        interrupted += bool(leftovers)
        before = tree(Path(path))
        for mode in ("r", "r+"):
            daf = pydaf.FilesDaf(path, mode)
            present = keys(daf)
            for key in present | possible[0].keys() | possible[1].keys():
                value = observed(daf, key) if key in present else "missing"
                allowed = {state.get(key, "missing") for state in possible}
                assert value in allowed, f"after operation {done}: {key} holds {value}, expected one of {allowed}"
            if mode == "r":
                assert tree(Path(path)) == before, "a read-only open changed the directory"
        assert not [name for folder, _, files in os.walk(path) for name in files
                    if name.startswith(".") and name != ".daf.lock"], "the writable open left leftovers"
        assert json.loads(Path(path, "metadata.json").read_text()).keys() == _index_keys(daf)
        del daf
        gc.collect()
    assert done > kills and interrupted >= needed, (done, rounds, interrupted)


# Full disks and file-size limits: a DafError naming the property, everything stored before intact, never SIGBUS.

FULL = 100_000  # entries of the big axis: a Float64 vector of it is 800 KB

FILLER = """
    import json, resource, sys
    import numpy as np, scipy.sparse as sp, pydaf
    path, limit = sys.argv[1], int(sys.argv[2])
    if limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    daf = pydaf.FilesDaf(path, "r+")
    results = {}

    def attempt(key, call):
        try:
            call()
            results[key] = "ok"
        except pydaf.DafError as error:
            results[key] = [type(error).__name__, getattr(error, "errno", None), str(error)]

    def build():
        with daf.empty_dense_vector("cell", "built", "Float64") as buffer:
            buffer[:] = 1.0  # with a sparse file, this is where a full disk kills the process (SIGBUS)

    def build_matrix():
        with daf.empty_dense_matrix("cell", "gene", "built", "Float32") as buffer:
            buffer[:] = 1.0

    many = np.zeros((daf.axis_length("cell"), 2))
    many[[0, 7], [0, 1]] = 3.0
    attempt("set new", lambda: daf.set_vector("cell", "big", np.arange(float(daf.axis_length("cell")))))
    attempt("overwrite", lambda: daf.set_vector("cell", "age", np.zeros(daf.axis_length("cell")), overwrite=True))
    attempt("build", build)
    attempt("build matrix", build_matrix)
    attempt("relayout", lambda: daf.set_matrix("cell", "few", "sparse", sp.csc_matrix(many), overwrite=True))
    attempt("small", lambda: daf.set_scalar("after", 1))
    attempt("delete", lambda: daf.delete_vector("cell", "spare"))
    print(json.dumps(results), flush=True)
"""


def _fill_target(path: Path) -> pydaf.DafWriter:
    daf = pydaf.FilesDaf(path, "w")
    daf.add_axis("cell", [str(index) for index in range(FULL)]).add_axis("gene", ["g0", "g1", "g2"]).add_axis(
        "few", ["f0", "f1"])
    daf.set_vector("cell", "age", np.arange(float(FULL))).set_vector("cell", "spare", np.ones(FULL, np.int8))
    old = np.zeros((FULL, 2))
    old[1, 1] = 5.0
    daf.set_matrix("cell", "few", "sparse", sp.csc_matrix(old))
    return daf


def _check_after_full(path: Path, results: dict[str, Any], reason: int) -> None:
    for key in ("set new", "overwrite", "build", "build matrix", "relayout"):
        kind, number, message = results[key]
        assert kind == "DafStorageError" and number == reason, (key, results[key])
        assert "in the daf directory" in message and ("the vector: " in message or "the matrix: " in message)
    assert results["small"] == "ok" and results["delete"] == "ok"
    daf = pydaf.FilesDaf(path, "r")
    assert daf.get_vector("cell", "age").tolist() == list(np.arange(float(FULL)))  # intact
    assert not daf.has_vector("cell", "big") and not daf.has_vector("cell", "built")
    assert not daf.has_vector("cell", "spare") and daf.get_scalar("after") == 1
    assert not daf.has_matrix("cell", "gene", "built")
    # The relayout failed after the new (cell, few) layout was stored: the old (few, cell) one is gone, not stale.
    expected = np.zeros((FULL, 2))
    expected[[0, 7], [0, 1]] = 3.0
    np.testing.assert_array_equal(daf.get_matrix("cell", "few", "sparse").toarray(), expected)
    np.testing.assert_array_equal(daf.get_matrix("few", "cell", "sparse").toarray(), expected.T)


def test_a_file_size_limit(tmp_path):
    """RLIMIT_FSIZE in a child process (every file above 200 KB fails with EFBIG)."""
    path = tmp_path / "data.daf"
    _fill_target(path)
    child = python(FILLER, str(path), str(200_000))
    output, errors = child.communicate(timeout=300)
    assert child.returncode == 0, errors
    _check_after_full(path, json.loads(output), errno.EFBIG)
    pydaf.FilesDaf(path, "r+")
    assert not [name for folder, _, files in os.walk(path) for name in files if ".tmp-" in name]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MB tmpfs mounted for the test (mounting needs root)."""
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode:
        pytest.fail(f"can't mount a tmpfs (needs root): {result.stderr.decode()}; run the RLIMIT_FSIZE test instead")
    try:
        yield mount
    finally:
        gc.collect()
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root; test_a_file_size_limit covers the "
                                               "same failures with RLIMIT_FSIZE")
def test_a_full_disk(small_disk):
    """A full tmpfs: writes fail with ENOSPC before anything changes; a builder's file is allocated before it is
    mapped, so filling it can't kill the process (SIGBUS); deletes still work; the index is rebuilt later."""
    path = small_disk / "data.daf"
    _fill_target(path)
    status = os.statvfs(small_disk)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (status.f_bavail * status.f_frsize - 200_000))
    child = python(FILLER, str(path), "0")
    output, errors = child.communicate(timeout=300)
    assert child.returncode == 0, f"the writer died ({child.returncode}): {errors}"
    _check_after_full(path, json.loads(output), errno.ENOSPC)
    filler.unlink()
    daf = pydaf.FilesDaf(path, "r+")  # repairs: drops leftovers, rebuilds the index if it had to be removed
    assert not [name for folder, _, files in os.walk(path) for name in files if ".tmp-" in name]
    index = json.loads((path / "metadata.json").read_text())
    assert index.keys() == {f"axes/{axis}" for axis in daf.axes_set()} | {"scalars/after", "vectors/cell/age",
                                                                          "matrices/cell/few/sparse",
                                                                          "matrices/few/cell/sparse"} - {
        key for key in ("matrices/few/cell/sparse",) if not daf.has_matrix("few", "cell", "sparse", relayout=False)}
