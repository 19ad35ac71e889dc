"""Issue 25 on ZIP archives (ZipDaf and ZIP-backed ZarrDaf, whole archives and ``archive#/group``): the writer lock
against racing processes (class 1), no escape through planted symbolic links (class 2), a new open seeing another
process's commit (class 8), ZIP's entry-name limit (class 9), and archives that are FIFOs, devices, folders or
declare huge sizes (classes 4 and 5). Races use real processes; hostile probes run in child processes with a timeout
and an address-space cap."""

from __future__ import annotations

import json
import os
import secrets
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf._os import locks
from pydaf.formats.zip import store as zipstore

ROOT = str(Path(__file__).resolve().parent.parent)
ENV = {**os.environ, "PYTHONPATH": ROOT}
TIMEOUT = 60
SOAK = os.environ.get("PYDAF_SOAK") == "1"

#: (format, path inside tmp_path): every kind of ZIP-backed data set.
VARIANTS = [("ZipDaf", "x.daf.zip"), ("ZipDaf", "x.dafs.zip#/g"), ("ZarrDaf", "x.daf.zarr.zip"),
            ("ZarrDaf", "x.dafs.zarr.zip#/g")]
ROOTS = [variant for variant in VARIANTS if "#" not in variant[1]]
IDS = [name for _, name in VARIANTS]


def opener(format: str):
    return pydaf.ZipDaf if format == "ZipDaf" else pydaf.ZarrDaf


def archive_of(path: str) -> str:
    return path.split("#")[0]


@pytest.fixture(autouse=True)
def short_lock_wait(monkeypatch):
    monkeypatch.setattr(locks, "LOCK_WAIT_SECONDS", 0.3)


def close(daf) -> None:
    daf.format.format_close()


# A child that opens a data set for writing, commits "before", says "ready", waits for a line, commits "after",
# says "done" and waits for a line to exit (holding the data set open all along).
_HOLDER = textwrap.dedent("""
    import sys, pydaf
    cls = pydaf.ZipDaf if sys.argv[1] == "ZipDaf" else pydaf.ZarrDaf
    daf = cls(sys.argv[2], sys.argv[3])
    daf.set_scalar("before", 1)
    print("ready", flush=True)
    sys.stdin.readline()
    daf.set_scalar("after", 2)
    print("done", flush=True)
    sys.stdin.readline()
""")


class Holder:
    def __init__(self, format: str, path: str, mode: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _HOLDER, format, path, mode], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        assert self.process.stdout.readline().strip() == "ready", self.process.stderr.read()

    def step(self) -> str:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def finish(self) -> None:
        self.process.stdin.write("\n\n")  # (past both waits, whether or not step() was called)
        self.process.stdin.flush()
        self.process.wait(timeout=TIMEOUT)
        assert self.process.returncode == 0, self.process.stderr.read()


# Class 1: racing processes.

@pytest.mark.parametrize(("format", "name"), VARIANTS, ids=IDS)
@pytest.mark.parametrize("mode", ["w", "r+", "w+"])
def test_a_writable_open_waits_for_another_processs_writer_then_refuses(tmp_path, format, name, mode):
    path = str(tmp_path / name)
    close(opener(format)(path, "w+"))
    holder = Holder(format, path, "r+")
    try:
        started = time.monotonic()
        if mode == "w" and "#" in name:
            with pytest.raises(pydaf.DafModeError):  # (w of a group is refused anyway: append-only)
                opener(format)(path, mode)
        else:
            with pytest.raises(pydaf.DafLockedError, match=f"pid: {holder.process.pid}"):
                opener(format)(path, mode)
            assert time.monotonic() - started >= 0.25  # waited LOCK_WAIT_SECONDS first
        assert holder.step() == "done"  # the writer's later commit ...
    finally:
        holder.finish()
    reread = opener(format)(path, "r")
    assert {"before", "after"} <= set(reread.scalars_set())  # ... is in the archive, not in an unlinked file
    close(reread)


@pytest.mark.parametrize(("format", "name"), ROOTS, ids=[name for _, name in ROOTS])
def test_truncating_a_store_waits_for_the_writer_and_keeps_its_commits(tmp_path, format, name):
    path = str(tmp_path / name)
    marker = "daf.json" if format == "ZipDaf" else "zarr.json"
    close(opener(format)(path, "w+"))
    holder = Holder(format, path, "r+")
    try:
        with pytest.raises(pydaf.DafLockedError):
            zipstore.acquire_zip_store(path, writable=True, truncate=(marker, format))
        assert holder.step() == "done"
    finally:
        holder.finish()
    reread = opener(format)(path, "r")
    assert {"before", "after"} <= set(reread.scalars_set())
    close(reread)


# A child that, N times, opens the data set (r+), commits s<i>, lingers, commits t<i>, and checks (still holding
# the writer lock, so no one may replace the archive meanwhile) that a fresh read-only open of the path sees both:
# prints the commits that landed in a file no longer at the path (lost).
_WRITER = textwrap.dedent("""
    import sys, time, pydaf
    from pydaf._os import locks
    locks.LOCK_WAIT_SECONDS = 5.0
    cls = pydaf.ZipDaf if sys.argv[1] == "ZipDaf" else pydaf.ZarrDaf
    lost = []
    for index in range(int(sys.argv[3])):
        daf = cls(sys.argv[2], "r+")
        daf.set_scalar(f"s{index}", index)
        time.sleep(0.02)
        daf.set_scalar(f"t{index}", index)
        check = cls(sys.argv[2], "r")
        if not {f"s{index}", f"t{index}"} <= set(check.scalars_set()):
            lost.append(index)
        check.format.format_close()
        daf.format.format_close()
        del daf, check
        time.sleep(0.005)
    print(lost)
""")


@pytest.mark.parametrize(("format", "name"), ROOTS, ids=[name for _, name in ROOTS])
def test_a_process_writing_while_another_truncates_loses_no_commit(tmp_path, format, name):
    path = str(tmp_path / name)
    close(opener(format)(path, "w+"))
    rounds = 200 if SOAK else 25
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, format, path, str(rounds)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=ENV)
    truncated = refused = 0
    try:
        while writer.poll() is None:
            try:
                close(opener(format)(path, "w"))
                truncated += 1
            except pydaf.DafLockedError:
                refused += 1
            time.sleep(0.003)
        out, err = writer.communicate(timeout=TIMEOUT)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == 0, err
    assert json.loads(out) == [], f"commits lost to a truncation: {out} ({truncated} truncations, {refused} refused)"
    assert truncated > 0, (truncated, refused)  # (truncations ran while the writer wrote; they waited for its lock)


def test_a_writer_that_waited_for_a_replaced_archive_opens_the_new_one(tmp_path, monkeypatch):
    """A writer that opened the old file, then waited for its lock while mode w replaced it, must not write the
    unlinked old file: once it has the lock it checks that the path still names that file, and opens the new one."""
    import threading
    path = str(tmp_path / "x.daf.zip")
    close(pydaf.ZipDaf(path, "w+"))
    code = textwrap.dedent("""
        import sys, pydaf
        daf = pydaf.ZipDaf(sys.argv[1], "r+")
        print("ready", flush=True)
        sys.stdin.readline()
        replaced = pydaf.ZipDaf(sys.argv[1], "w")  # (this process holds the old file's lock already)
        daf.format.format_close()
        replaced.set_scalar("from_w", 1)
        replaced.format.format_close()
        print("done", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", code, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV)
    assert child.stdout.readline().strip() == "ready"
    monkeypatch.setattr(locks, "LOCK_WAIT_SECONDS", 30.0)
    opened: list = []

    def open_for_writing() -> None:
        try:
            opened.append(pydaf.ZipDaf(path, "r+"))
        except BaseException as error:  # (reported by the assertion below)
            opened.append(error)

    waiter = threading.Thread(target=open_for_writing)
    waiter.start()
    time.sleep(0.5)  # (the waiter has opened the old file and waits for its lock)
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "done", child.stderr.read()
    child.wait(timeout=TIMEOUT)
    waiter.join(timeout=TIMEOUT)
    assert len(opened) == 1 and isinstance(opened[0], pydaf.ZipDaf), opened
    opened[0].set_scalar("after", 2)
    close(opened[0])
    assert {"scalars/from_w.json", "scalars/after.json"} <= set(zipfile.ZipFile(path).namelist())


def test_an_upgrade_of_a_replaced_archive_reopens_the_path(tmp_path, monkeypatch):
    """A read-only store of a file that another process replaced is never made writable: the writable open finds
    the new file."""
    path = str(tmp_path / "x.daf.zip")
    close(pydaf.ZipDaf(path, "w+"))
    reader = pydaf.ZipDaf(path, "r")
    code = "import sys, pydaf\npydaf.ZipDaf(sys.argv[1], 'w').set_scalar('new', 1)"
    subprocess.run([sys.executable, "-c", code, path], check=True, timeout=TIMEOUT, env=ENV)
    writer = pydaf.ZipDaf(path, "r+")
    writer.set_scalar("mine", 2)
    close(writer)
    assert {"scalars/new.json", "scalars/mine.json"} <= set(zipfile.ZipFile(path).namelist())
    close(reader)


# Class 2: planted symbolic links.

def plant(folder: Path, name: str, sentinel: Path) -> Path:
    link = folder / name
    os.symlink(sentinel, link)
    return link


@pytest.mark.parametrize(("format", "name"), VARIANTS, ids=IDS)
@pytest.mark.parametrize("mode", ["w", "w+", "r+", "r", "new"])
def test_planted_links_at_the_stores_temporary_names_are_never_followed(tmp_path, monkeypatch, format, name,
                                                                        mode):
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel = outside / "sentinel"
    sentinel.write_bytes(b"keep me")
    folder = tmp_path / "data"
    folder.mkdir()
    path = str(folder / name)
    archive = Path(archive_of(path))
    if mode != "new":
        close(opener(format)(path, "w+"))
    links = [plant(folder, f".{archive.name}.pydaf-new-{os.getpid()}", sentinel)]  # (the old, predictable name)
    for token in ("planted0", "planted1"):
        links.append(plant(folder, f".{archive.name}.pydaf-new-{os.getpid()}-{token}", sentinel))
    tokens = iter(["planted0", "planted1"])
    real = secrets.token_hex
    # (the first names the store tries are the planted ones)
    monkeypatch.setattr(secrets, "token_hex", lambda *_: next(tokens, None) or real(8))
    if mode == "w" and "#" in name:
        with pytest.raises(pydaf.DafModeError):
            opener(format)(path, "w")
    else:
        daf = opener(format)(path, "w+" if mode == "new" else mode)
        if mode != "r":
            daf.add_axis("cell", ["A", "B"]).set_scalar("s", 1)
        close(daf)
    assert sentinel.read_bytes() == b"keep me" and sorted(os.listdir(outside)) == ["sentinel"]
    assert all(link.is_symlink() for link in links)
    assert sorted(os.listdir(folder)) == sorted([archive.name, *(link.name for link in links)])  # nothing else left
    assert zipfile.ZipFile(archive).testzip() is None


def test_a_new_temporary_file_is_exclusive_and_never_follows_a_link(tmp_path, monkeypatch):
    sentinel = tmp_path / "sentinel"
    sentinel.write_bytes(b"keep")
    archive = tmp_path / "y.zip"
    names = iter(["a", "b"])
    monkeypatch.setattr(secrets, "token_hex", lambda *_: next(names))
    os.symlink(sentinel, tmp_path / f".y.zip.pydaf-new-{os.getpid()}-a")
    temporary, fd = zipstore._new_file(str(archive))
    os.close(fd)
    assert temporary.endswith("-b") and not os.path.islink(temporary) and sentinel.read_bytes() == b"keep"
    os.remove(temporary)


@pytest.mark.parametrize(("format", "name"), ROOTS, ids=[name for _, name in ROOTS])
@pytest.mark.parametrize("mode", ["w", "w+", "r+"])
def test_a_link_at_the_archives_name_to_a_non_archive_is_never_written(tmp_path, format, name, mode):
    sentinel = tmp_path / "sentinel"
    sentinel.write_bytes(b"keep me")
    path = tmp_path / name
    os.symlink(sentinel, path)
    with pytest.raises(pydaf.DafError):
        opener(format)(str(path), mode)
    assert sentinel.read_bytes() == b"keep me" and path.is_symlink()


# Class 8: a new open sees another process's commit while an older handle is alive.

_COMMIT = textwrap.dedent("""
    import sys, pydaf
    cls = pydaf.ZipDaf if sys.argv[1] == "ZipDaf" else pydaf.ZarrDaf
    daf = cls(sys.argv[2], sys.argv[3])
    daf.set_scalar(sys.argv[4], 7)
    if not daf.has_axis("gene"):
        daf.add_axis("gene", ["X", "Y", "Z"])
    daf.format.format_close()
""")


@pytest.mark.parametrize(("format", "name"), VARIANTS, ids=IDS)
def test_a_new_read_only_open_sees_another_processs_commit(tmp_path, format, name):
    path = str(tmp_path / name)
    close(opener(format)(path, "w+").add_axis("cell", ["A"]))
    older = opener(format)(path, "r")
    assert older.axes_set() == {"cell"}
    for scalar in ("first", "second"):
        subprocess.run([sys.executable, "-c", _COMMIT, format, path, "r+", scalar], check=True, timeout=TIMEOUT,
                       env=ENV)
        newer = opener(format)(path, "r")
        assert scalar in newer.scalars_set() and newer.get_scalar(scalar) == 7
        assert newer.axis_vector("gene").tolist() == ["X", "Y", "Z"]
        close(newer)
    close(older)


@pytest.mark.parametrize(("format", "name"), ROOTS, ids=[name for _, name in ROOTS])
def test_a_new_read_only_open_sees_a_replacement_by_another_process(tmp_path, format, name):
    path = str(tmp_path / name)
    close(opener(format)(path, "w+").add_axis("cell", ["A"]).set_scalar("old", 1))
    older = opener(format)(path, "r")
    old_cells = older.axis_vector("cell")
    subprocess.run([sys.executable, "-c", _COMMIT, format, path, "w", "fresh"], check=True, timeout=TIMEOUT,
                   env=ENV)
    newer = opener(format)(path, "r")
    assert newer.scalars_set() == {"fresh"} and newer.axes_set() == {"gene"}
    assert older.scalars_set() == {"old"} and old_cells.tolist() == ["A"]  # (the old handle keeps the old file)
    close(newer)
    close(older)


def test_an_entry_superseded_by_another_process_is_read_from_its_new_place(tmp_path):
    path = str(tmp_path / "x.zip")
    store = zipstore.acquire_zip_store(path, writable=True, create=True)
    with store.append() as batch:
        batch.add("a.json", b'"old"')
    store.release()
    reader = zipstore.acquire_zip_store(path, writable=False)
    assert reader.read("a.json") == b'"old"'
    code = ("import sys\nfrom pydaf.formats.zip.store import acquire_zip_store\n"
            "s = acquire_zip_store(sys.argv[1], writable=True)\nb = s.append()\n"
            "b.add('a.json', b'\"newer\"', replace=True)\nb.commit()\n")
    subprocess.run([sys.executable, "-c", code, path], check=True, timeout=TIMEOUT, env=ENV)
    again = zipstore.acquire_zip_store(path, writable=False)
    assert again is reader and again.read("a.json") == b'"newer"'
    again.release()
    reader.release()


# Class 9: names a ZIP can't hold.

LONG = "n" * 70_000


@pytest.mark.parametrize(("format", "name"), VARIANTS, ids=IDS)
@pytest.mark.parametrize("kind", ["scalar", "axis", "vector", "matrix", "dense builder", "sparse builder"])
def test_a_name_longer_than_a_zip_entry_name_is_a_name_error(tmp_path, format, name, kind):
    path = str(tmp_path / name)
    daf = opener(format)(path, "w+").add_axis("cell", ["A", "B"])
    before = Path(archive_of(path)).read_bytes()
    limit = "65535" if format == "ZipDaf" else "at most"  # (ZarrDaf's names are shorter still: file names)
    with pytest.raises(pydaf.DafNameError, match=limit):
        if kind == "scalar":
            daf.set_scalar(LONG, 1)
        elif kind == "axis":
            daf.add_axis(LONG, ["a"])
        elif kind == "vector":
            daf.set_vector("cell", LONG, [1, 2])
        elif kind == "matrix":
            daf.set_matrix("cell", "cell", LONG, np.ones((2, 2)))
        elif kind == "dense builder":
            with daf.empty_dense_vector("cell", LONG, "int64") as filled:
                filled[:] = 1
        else:
            with daf.empty_sparse_vector("cell", LONG, "int64", 1, "int64") as (nzind, nzval):
                nzind[:] = 1
                nzval[:] = 1
    assert Path(archive_of(path)).read_bytes() == before  # nothing was written
    assert not daf.has_scalar(LONG) and LONG not in daf.axes_set()
    close(daf)


@pytest.mark.parametrize("format", ["ZipDaf", "ZarrDaf"])
def test_a_group_path_longer_than_a_zip_entry_name_is_a_name_error(tmp_path, format):
    suffix = ".dafs.zip" if format == "ZipDaf" else ".dafs.zarr.zip"
    archive = tmp_path / f"x{suffix}"
    close(opener(format)(f"{archive}#/g", "w+"))
    before = archive.read_bytes()
    # (ZarrDaf refuses a group part longer than its own file-name limit as a path error, before the ZIP's limit)
    refused = pydaf.DafNameError if format == "ZipDaf" else (pydaf.DafNameError, pydaf.DafPathError)
    with pytest.raises(refused, match=r"at most|65535"):
        opener(format)(f"{archive}#/{LONG}", "w+")
    with pytest.raises(refused, match=r"at most|65535"):
        opener(format)(f"{archive}#/g/" + "m" * 65530, "w+")
    parts = "/".join(["p" * 100] * 700)  # (each part a valid name; 70,700 characters in all)
    with pytest.raises(pydaf.DafNameError, match="65535"):
        opener(format)(f"{archive}#/{parts}", "w+")
    assert archive.read_bytes() == before


def test_a_name_that_fits_with_a_group_path_is_stored(tmp_path):
    path = str(tmp_path / "x.dafs.zip#/g")
    daf = pydaf.ZipDaf(path, "w+")
    longest = "s" * (65535 - len("g/scalars/.json"))
    daf.set_scalar(longest, 1)
    with pytest.raises(pydaf.DafNameError):
        daf.set_scalar(longest + "s", 1)
    close(daf)
    assert pydaf.ZipDaf(path, "r").get_scalar(longest) == 1


@pytest.mark.parametrize("group", ["a/scalars", "a/axes", "a/vectors", "a/matrices", "metadata.json"])
def test_a_group_named_like_a_zip_daf_entry_is_refused(tmp_path, group):
    archive = tmp_path / "x.dafs.zip"
    close(pydaf.ZipDaf(f"{archive}#/a", "w+"))
    before = archive.read_bytes()
    with pytest.raises(pydaf.DafNameError, match="reserved"):
        pydaf.ZipDaf(f"{archive}#/{group}", "w+")
    assert archive.read_bytes() == before
    assert pydaf.ZipDaf(f"{archive}#/a", "r").scalars_set() == set()


def test_the_store_refuses_a_long_entry_name_before_writing(tmp_path):
    store = zipstore.acquire_zip_store(tmp_path / "x.zip", writable=True, create=True)
    before = (tmp_path / "x.zip").read_bytes()
    with pytest.raises(pydaf.DafNameError, match="65535"), store.append() as batch:
        batch.add("x" * 65536, b"1")
    with pytest.raises(pydaf.DafNameError, match="65535"), store.append() as batch:
        batch.add("\u00e9" * 40000, b"1")  # (80,000 bytes of UTF-8)
    assert (tmp_path / "x.zip").read_bytes() == before
    with store.append() as batch:
        batch.add("x" * 65535, b"1")
    assert zipfile.ZipFile(tmp_path / "x.zip").read("x" * 65535) == b"1"
    store.release()


# Classes 4 and 5: archives that are not regular files, and archives declaring huge sizes. Each probe runs in a
# child process with a timeout and a 3 GB address-space cap; it prints the outcome of each probe as JSON.

_PROBE = textwrap.dedent("""
    import json, resource, sys, traceback
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    import pydaf
    from pydaf._os import locks
    locks.LOCK_WAIT_SECONDS = 0.2
    outcomes = []
    for format, path, mode, action in json.loads(sys.argv[1]):
        cls = pydaf.ZipDaf if format == "ZipDaf" else pydaf.ZarrDaf
        try:
            daf = cls(path, mode)
            if action == "read all":
                for axis in daf.axes_set():
                    daf.axis_vector(axis)
                    for name in daf.vectors_set(axis):
                        daf.get_vector(axis, name)
                    for other in daf.axes_set():
                        for name in daf.matrices_set(axis, other, relayout=False):
                            daf.get_matrix(axis, other, name, relayout=False)
                for name in daf.scalars_set():
                    daf.get_scalar(name)
            outcomes.append(["ok", ""])
        except pydaf.DafError as error:
            outcomes.append([type(error).__name__, str(error).splitlines()[0]])
        except BaseException as error:
            outcomes.append(["UNTYPED " + type(error).__name__, traceback.format_exc()[-600:]])
    print(json.dumps(outcomes))
""")


def run_probes(probes: list[list[str]]) -> list[list[str]]:
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(probes)], capture_output=True, text=True,
                            timeout=TIMEOUT, env=ENV, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("kind", ["fifo", "folder", "device", "link to a fifo"])
def test_an_archive_that_is_not_a_regular_file_never_blocks(tmp_path, kind):
    probes = []
    planted = []
    for format, name in VARIANTS:
        archive = tmp_path / kind.replace(" ", "_") / archive_of(name)
        archive.parent.mkdir(exist_ok=True)
        if not os.path.lexists(archive):
            if kind == "fifo":
                os.mkfifo(archive)
            elif kind == "folder":
                archive.mkdir()
            elif kind == "device":
                os.symlink("/dev/zero", archive)
            else:
                os.mkfifo(tmp_path / f"{archive.name}.fifo")
                os.symlink(tmp_path / f"{archive.name}.fifo", archive)
            planted.append(archive)
        for mode in ("r", "r+", "w", "w+"):
            probes.append([format, str(archive.parent / name), mode, ""])
    outcomes = run_probes(probes)
    assert all(outcome[0].startswith("Daf") for outcome in outcomes), outcomes
    for archive in planted:
        assert os.path.lexists(archive)
        if kind == "fifo":
            assert Path(archive).is_fifo()
        elif kind == "folder":
            assert Path(archive).is_dir()


def _cd_record(name: bytes, size: int, compressed: int, offset: int, method: int = 0) -> bytes:
    extra = struct.pack("<HHQQQ", 1, 24, size, compressed, offset)
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 45, 0x0800, method, 0, 0x21, 0, 0xFFFFFFFF,
                       0xFFFFFFFF, len(name), len(extra), 0, 0, 0, 0o100644 << 16, 0xFFFFFFFF) + name + extra


def _archive_with_directory(entries: dict[str, bytes], records: bytes, count: int) -> bytes:
    """A ZIP whose local entries are ``entries`` (as zipfile writes them) and whose central directory is
    ``records`` (declaring ``count`` entries)."""
    body = bytearray()
    for name, data in entries.items():
        encoded = name.encode()
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x0800, 0, 0, 0x21, zlib.crc32(data), len(data),
                            len(data), len(encoded), 0) + encoded + data
    offset = len(body)
    return bytes(body) + records + zipstore._tail(count, offset, len(records))


def _hostile_archives(folder: Path) -> list[tuple[str, bytes]]:
    good = folder / "good.daf.zip"
    daf = pydaf.ZipDaf(str(good), "w+").add_axis("cell", ["A", "B", "C"])
    daf.set_vector("cell", "v", np.arange(3, dtype=np.int64)).set_scalar("s", 1)
    close(daf)
    data = good.read_bytes()
    cases = []
    cases.append(("huge entry size", _archive_with_directory(
        {"daf.json": b'{"version":[1,0]}\n'}, _cd_record(b"daf.json", 1 << 60, 1 << 60, 0), 1)))
    cases.append(("huge entry offset", _archive_with_directory(
        {"daf.json": b'{"version":[1,0]}\n'}, _cd_record(b"daf.json", 18, 18, 1 << 61), 1)))
    cases.append(("huge count", _archive_with_directory(
        {"daf.json": b'{"version":[1,0]}\n'}, _cd_record(b"daf.json", 18, 18, 0), (1 << 62))))
    cases.append(("huge deflated size", _archive_with_directory(
        {"daf.json": b'{"version":[1,0]}\n'}, _cd_record(b"daf.json", 1 << 40, 18, 0, method=8), 1)))
    tail = bytearray(data)
    struct.pack_into("<Q", tail, len(tail) - 98 + 40, 1 << 62)  # the ZIP64 end record's central directory size
    cases.append(("huge directory size", bytes(tail)))
    # A killed writer's archive (no end records) whose last local header declares a huge size.
    walked = bytearray(data[:zipstore._read_directory(os.open(good, os.O_RDONLY), len(data))[2]])
    walked += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0x0800, 0, 0, 0x21, 0, 0xFFFFFFFF, 0xFFFFFFFF, 5, 20)
    walked += b"x.bin" + struct.pack("<HHQQ", 1, 16, 1 << 60, 1 << 60)
    cases.append(("huge walked size", bytes(walked)))
    # A vector entry shorter than its axis says, and an axis entry declared far larger than the file.
    with zipfile.ZipFile(good) as source:
        names = source.namelist()
        files = {name: source.read(name) for name in names}
    files["vectors/cell/v.data"] = files["vectors/cell/v.data"][:8]
    buffer = folder / "short.zip"
    with zipfile.ZipFile(buffer, "w") as target:
        for name, content in files.items():
            target.writestr(name, content)
    cases.append(("short vector", buffer.read_bytes()))
    return cases


def _hostile_zarr_archives(folder: Path) -> list[tuple[str, bytes]]:
    """ZIP-backed ZarrDaf archives whose arrays declare huge shapes (their chunks elided, or far too few)."""
    good = folder / "good.daf.zarr.zip"
    close(pydaf.ZarrDaf(str(good), "w+").add_axis("cell", ["A", "B"]).set_vector("cell", "v", [1.0, 2.0]))
    with zipfile.ZipFile(good) as source:
        files = {name: source.read(name) for name in source.namelist()}
    cases = []
    for label, key, shape, chunk, elide in (("huge axis", "axes/cell", 1 << 40, 1 << 40, True),
                                            ("huge axis few chunks", "axes/cell", 1 << 40, 2, False),
                                            ("huge vector", "vectors/cell/v", 1 << 33, 1 << 33, True)):
        edited = dict(files)
        metadata = json.loads(edited[f"{key}/zarr.json"])
        metadata["shape"] = [shape]
        metadata["chunk_grid"]["configuration"]["chunk_shape"] = [chunk]
        edited[f"{key}/zarr.json"] = json.dumps(metadata).encode()
        if elide:
            del edited[f"{key}/c/0"]
        target = folder / f"{label.replace(' ', '_')}.zip"
        with zipfile.ZipFile(target, "w") as archive:
            for name, content in edited.items():
                archive.writestr(name, content)
        cases.append((label, target.read_bytes()))
    return cases


def test_archives_declaring_huge_sizes_never_allocate_them(tmp_path):
    probes = []
    cases = [(label, content, formats) for label, content in _hostile_archives(tmp_path)
             for formats in [(("ZipDaf", ".daf.zip"), ("ZarrDaf", ".daf.zarr.zip"))]]
    cases += [(label, content, (("ZarrDaf", ".daf.zarr.zip"),)) for label, content in _hostile_zarr_archives(tmp_path)]
    for label, content, formats in cases:
        for format, suffix in formats:
            path = tmp_path / f"{label.replace(' ', '_')}{suffix}"
            path.write_bytes(content)
            for mode in ("r", "r+"):
                probes.append([format, str(path), mode, "read all"])
    outcomes = run_probes(probes)
    assert not [outcome for outcome in outcomes if outcome[0].startswith("UNTYPED")], outcomes
    assert len(outcomes) == len(probes) == 34
    zarr_shapes = [outcome for probe, outcome in zip(probes, outcomes, strict=True) if "huge_" in probe[1]
                   and probe[0] == "ZarrDaf" and ("axis" in probe[1] or "vector" in probe[1])]
    assert zarr_shapes and all(outcome[0] == "DafFormatError" for outcome in zarr_shapes), zarr_shapes


def test_a_writer_killed_while_another_process_waits_for_its_lock_loses_nothing(tmp_path):
    """SIGKILL of the writer releases its lock: the waiting mode-w open then proceeds, and a writer killed before it
    committed leaves the archive's committed content readable."""
    path = str(tmp_path / "x.daf.zip")
    close(pydaf.ZipDaf(path, "w+").set_scalar("kept", 1))
    holder = Holder("ZipDaf", path, "r+")
    os.kill(holder.process.pid, signal.SIGKILL)
    holder.process.wait(timeout=TIMEOUT)
    reread = pydaf.ZipDaf(path, "r")
    assert reread.scalars_set() == {"kept", "before"}
    close(reread)
    close(pydaf.ZipDaf(path, "w"))  # the lock went with the killed process
    assert pydaf.ZipDaf(path, "r").scalars_set() == set()


@pytest.mark.parametrize(("format", "name"), VARIANTS, ids=IDS)
def test_a_conversion_into_an_archive_another_process_writes_waits_then_refuses(tmp_path, format, name):
    from pydaf.interop.convert import convert
    source = str(tmp_path / "source.daf.zip")
    close(pydaf.ZipDaf(source, "w+").add_axis("cell", ["A"]).set_scalar("from_source", 1))
    destination = str(tmp_path / name)
    held = destination if "#" not in name else destination.replace("#/g", "#/other")
    close(opener(format)(held, "w+").set_scalar("old", 1))
    holder = Holder(format, held, "r+")
    try:
        with pytest.raises(pydaf.DafLockedError, match=f"pid: {holder.process.pid}"):
            convert(source, destination, overwrite=True, progress=False)
        assert holder.step() == "done"
    finally:
        holder.finish()
    reread = opener(format)(held, "r")
    assert {"old", "before", "after"} <= set(reread.scalars_set())  # the writer's commits are all there
    close(reread)
    assert sorted(os.listdir(tmp_path)) == sorted(["source.daf.zip", archive_of(name)])  # no temporary left


@pytest.mark.parametrize(("format", "name"), ROOTS, ids=[name for _, name in ROOTS])
def test_damage_inside_the_committed_entries_is_refused_not_read_as_an_earlier_state(tmp_path, format, name):
    """Campaign finding: byte flips in the central directory and in an early local header made the archive open as
    its first commit (every later property silently gone; a writable open then cut them off for good)."""
    path = tmp_path / name
    daf = opener(format)(str(path), "w+").add_axis("cell", ["A", "B"]).set_vector("cell", "v", [1, 2])
    close(daf.set_scalar("s", 1))
    data = bytearray(path.read_bytes())
    infos = zipfile.ZipFile(path).infolist()
    data[data.find(b"PK\x01\x02")] ^= 0x55  # the central directory no longer parses ...
    data[infos[1].header_offset] ^= 0x55  # ... and an early committed entry is damaged
    path.write_bytes(bytes(data))
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="damaged"):
            opener(format)(str(path), mode)
    assert path.read_bytes() == bytes(data)  # nothing cut off


def test_a_killed_append_is_still_recovered(tmp_path):
    """The damage check leaves recovery alone: entries of a batch a killed writer left past the central directory
    (over the old one) are dropped, and everything committed is kept."""
    path = tmp_path / "x.zip"
    store = zipstore.acquire_zip_store(path, writable=True, create=True, is_commit=lambda name: name.endswith(".json"))
    with store.append() as batch:
        batch.add("a.json", b"1")
    committed = path.read_bytes()
    batch = store.append()
    batch.add("b.data", b"x" * 10)  # (written over the old central directory; then the writer is "killed")
    killed = path.read_bytes()
    batch.abort()
    store.release()
    path.write_bytes(killed)
    assert killed != committed
    recovered = zipstore.acquire_zip_store(path, writable=False, is_commit=lambda name: name.endswith(".json"))
    assert recovered.names() == ["a.json"] and recovered.read("a.json") == b"1"
    recovered.release()
