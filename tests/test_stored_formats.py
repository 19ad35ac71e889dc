"""The base every stored format shares (issue 24, deliver 3): capabilities declared by the formats, one grammar for
``container#/group`` paths, one translation of write errors (a full disk, a file-size limit) for every format, with
real processes, a real file-size limit (RLIMIT_FSIZE) and a real full file system (a small tmpfs, as root)."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf._os.write_errors import FULL_REASONS
from pydaf.formats.h5df import split_h5df_path
from pydaf.formats.paths import split_container_path
from pydaf.formats.zarr import split_zarr_path
from pydaf.formats.zip import split_zip_path

ROOT = Path(__file__).resolve().parent.parent

# One path grammar.

BAD_PATHS = [
    (pydaf.ZipDaf, "x.daf.zip#/a", "can't address a sub-daf in a singular ZipDaf path"),
    (pydaf.ZipDaf, "x.dafs.zip", "missing '#/<group>' in plural ZipDaf path"),
    (pydaf.ZipDaf, "x.dafs.zip#/", "empty group name after '#/' in ZipDaf path"),
    (pydaf.ZipDaf, "x.dafs.zip#/a/../b", "invalid group name"),
    (pydaf.ZipDaf, "x.dafs.zip#/a/\udc80", "invalid group name"),
    (pydaf.ZipDaf, "x.zip", "can't parse as ZipDaf path"),
    (pydaf.ZarrDaf, "x.daf.zarr.zip#/a", "can't address a sub-daf in a singular ZarrDaf path"),
    (pydaf.ZarrDaf, "x.daf.zarr#/a", "can't address a sub-daf in a singular ZarrDaf path"),
    (pydaf.ZarrDaf, "x.dafs.zarr.zip", "missing '#/<group>' in plural ZarrDaf path"),
    (pydaf.ZarrDaf, "x.dafs.zarr.zip#/a//b", "invalid group name"),
    (pydaf.ZarrDaf, "x.zarr", "can't parse as ZarrDaf path"),
    (pydaf.H5df, "x.h5dfs#/", "empty group name after '#/' in H5df path"),
]


@pytest.mark.parametrize(("opener", "path", "message"), BAD_PATHS, ids=[path for _, path, _ in BAD_PATHS])
def test_a_bad_path_is_one_error_class_for_every_format(tmp_path, opener, path, message):
    with pytest.raises(pydaf.DafPathError, match=re.escape(message)) as raised:
        opener(f"{tmp_path}/{path}", "w+")
    assert isinstance(raised.value, pydaf.DafValueError) and isinstance(raised.value, pydaf.DafFormatError)
    assert os.listdir(tmp_path) == []  # refused before anything was made


def test_the_formats_split_paths_with_the_one_grammar():
    assert split_h5df_path("a/x.h5dfs#/g/h") == ("a/x.h5dfs", "/g/h")
    assert split_h5df_path("a/x.h5") == ("a/x.h5", "/")  # Julia's H5df: any other path is a file
    assert split_h5df_path("a/x.h5dfs") == ("a/x.h5dfs", "/")
    assert split_zarr_path("a/x.daf.zarr/") == ("a/x.daf.zarr", None, False)
    assert split_zarr_path("a/x.dafs.zarr.zip#/g") == ("a/x.dafs.zarr.zip", "g", True)
    assert split_zip_path("a/x.daf.zip") == ("a/x.daf.zip", None)
    with pytest.raises(pydaf.DafPathError, match=re.escape("expected one of: <stem>.daf, <stem>.dafs#/<group>")):
        split_container_path("x.d", singular=(".daf",), plural=".dafs", format="Some")


def test_grep_finds_one_path_parser():
    """No module but :mod:`pydaf.formats.paths` splits a path on ``#``; the three format parsers call it."""
    splits = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in sorted((ROOT / "pydaf").rglob("*.py"))
              for line in path.read_text().splitlines() if re.search(r"\.r?(?:split|partition)\([^)]*#", line)]
    assert splits == ['pydaf/formats/paths.py: container, separator, group = path.partition("#")']  # (complete paths)
    assert "text.split(marker, 1)" in (ROOT / "pydaf/formats/paths.py").read_text()
    for module in ("h5df/format.py", "zarr/format.py", "zip/zipdaf.py"):
        assert "split_container_path(path, singular=" in (ROOT / "pydaf/formats" / module).read_text()


# Declared capabilities.


def test_each_format_declares_its_capabilities(tmp_path):
    declared = {
        "memory": pydaf.MemoryDaf(),
        "h5df": pydaf.H5df(tmp_path / "a.h5df", "w"),
        "files": pydaf.FilesDaf(tmp_path / "a.daf", "w"),
        "zarr": pydaf.ZarrDaf(str(tmp_path / "a.daf.zarr"), "w"),
        "zarr_zip": pydaf.ZarrDaf(str(tmp_path / "a.daf.zarr.zip"), "w"),
        "zip": pydaf.ZipDaf(str(tmp_path / "a.daf.zip"), "w"),
    }
    assert {name: tuple(daf.capabilities) for name, daf in declared.items()} == {
        "memory": (True, False, False), "h5df": (True, True, True), "files": (True, True, True),
        "zarr": (True, True, True), "zarr_zip": (False, True, True), "zip": (False, True, True)}
    assert declared["zip"].read_only().capabilities.supports_rewrites is False  # (the storage's, read-only or not)
    chain = pydaf.chain_writer([pydaf.MemoryDaf(name="base!"), declared["zarr_zip"]], name="chain!")
    assert chain.capabilities == declared["zarr_zip"].capabilities  # (its last member's: the one written to)


@pytest.mark.parametrize("suffix", [".daf.zip", ".daf.zarr.zip"])
def test_the_writer_refuses_rewrites_of_append_only_storage_in_one_place(tmp_path, suffix):
    daf = pydaf.open_daf(str(tmp_path / f"a{suffix}"), "w").add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "age", [1, 2]).set_scalar("organism", "human")
    chain = pydaf.chain_writer([pydaf.MemoryDaf(name="base!"), daf], name="chain!")
    for writer in (daf, chain):
        with pytest.raises(pydaf.DafAppendOnlyError) as raised:
            writer.set_vector("cell", "age", [3, 4], overwrite=True)
        assert str(raised.value).startswith(f"{writer.format.type_name} is append-only; can't overwrite the vector: "
                                            "age\nof the axis: cell\nin the daf data: ")
        assert raised.value.what == ("vector", "cell", "age")
        with pytest.raises(pydaf.DafAppendOnlyError, match="can't delete the axis: cell"):
            writer.delete_axis("cell")
    assert daf.get_vector("cell", "age").tolist() == [1, 2] and daf.get_scalar("organism") == "human"


def test_grep_finds_no_node_class_switches_in_zarr():
    source = (ROOT / "pydaf/formats/zarr/format.py").read_text()
    switches = re.findall(r"isinstance\([^)]*_(?:Zip|Directory)Nodes", source)
    assert switches == ["isinstance(self._nodes, _DirectoryNodes"]  # (the one narrowing, in ``_directory``)


# One translation of write errors.

FORMATS = {"h5df": ".h5df", "files": ".daf", "zarr": ".daf.zarr", "zarr_zip": ".daf.zarr.zip", "zip": ".daf.zip"}
ENTRIES = 20_000  # a Float64 vector of the axis is 160 KB

WRITER = """
import json, resource, sys
import numpy as np, pydaf
path, limit = sys.argv[1], int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
daf = pydaf.open_daf(path, "r+")
results = {}

def attempt(key, call):
    try:
        call()
        results[key] = "ok"
    except pydaf.DafError as error:
        results[key] = [type(error).__name__, getattr(error, "errno", None), str(error)]

def build():
    with daf.empty_dense_vector("cell", "built", "Float64") as buffer:
        buffer[:] = 1.0  # (on space that was not allocated first, a full disk kills the process here: SIGBUS)

attempt("set", lambda: daf.set_vector("cell", "big", np.random.default_rng(0).random(daf.axis_length("cell"))))
attempt("build", build)
print(json.dumps(results), flush=True)
"""


def _stored(tmp_path: Path, name: str) -> str:
    path = str(tmp_path / f"data{FORMATS[name]}")
    daf = pydaf.open_daf(path, "w")
    daf.add_axis("cell", [str(index) for index in range(ENTRIES)])
    daf.set_vector("cell", "age", np.arange(ENTRIES, dtype=np.int32)).set_scalar("organism", "human")
    daf.close()
    return path


def _file_size_limit(path: str) -> int:
    """A limit 60 KB above the size of a single-file container (or 60 KB for a directory's new files), which the
    160 KB of a new vector's data passes."""
    return (os.path.getsize(path) if os.path.isfile(path) else 0) + 60_000


def _write_in_child(path: str, limit: int) -> dict:
    child = subprocess.run([sys.executable, "-c", WRITER, path, str(limit)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.returncode == 0, f"the writer died ({child.returncode}): {child.stderr}"
    return json.loads(child.stdout)


def _check(path: str, results: dict, number: int) -> None:
    for key in ("set", "build"):
        kind, found, message = results[key]
        assert (kind, found) == ("DafStorageError", number), (key, results[key])
        assert f"failed: {FULL_REASONS[number]} (" in message, (key, message)
    daf = pydaf.open_daf(path)
    assert daf.get_vector("cell", "age").tolist() == list(range(ENTRIES)) and daf.get_scalar("organism") == "human"
    assert daf.vectors_set("cell") == {"age"}  # nothing of the failed writes
    daf.close()


@pytest.mark.parametrize("name", FORMATS)
def test_a_file_size_limit_is_a_storage_error_in_every_format(tmp_path, name):
    """RLIMIT_FSIZE in a child process: a write past it fails with EFBIG, said in words, and nothing changes."""
    path = _stored(tmp_path, name)
    _check(path, _write_in_child(path, _file_size_limit(path)), errno.EFBIG)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs mounted for the test (mounting needs root: skipped, saying so, where it is refused)."""
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode:
        pytest.skip(f"can't mount a tmpfs: {result.stderr.decode().strip()} (the RLIMIT_FSIZE test covers EFBIG)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.parametrize("name", FORMATS)
def test_a_full_disk_is_a_storage_error_in_every_format(small_disk, name):
    """A full tmpfs: a write fails with ENOSPC, said in words, never SIGBUS, and what was stored stays intact."""
    path = _stored(small_disk, name)
    status = os.statvfs(small_disk)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (status.f_bavail * status.f_frsize - 40_000))
    results = _write_in_child(path, 0)
    filler.unlink()
    _check(path, results, errno.ENOSPC)
