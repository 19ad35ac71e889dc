"""The H5df undo journal trusts nothing (issue 25, class 3): before anything is applied, a journal must prove it belongs
to this very file (device, inode) in the very state its killed writer left (size, time, or the write it declared);
it is found from every name of the file (hard links); and a hostile journal (FIFO, link, device, huge, truncated,
corrupt, records beyond the file) is a :class:`pydaf.DafFormatError`, never a hang or a ``MemoryError``.

Writers are real child processes killed with SIGKILL (as in ``tests/test_h5df_journal.py``); other programs are real
h5py; hostile opens run in child processes with a timeout and a memory limit.
"""

from __future__ import annotations

import hashlib
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.check import check_daf
from tests.test_h5df_journal import KILLED_INSIDE_A_FLUSH, create, run, state

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL") or not hasattr(os, "setxattr"),
                                reason="needs SIGKILL and extended attributes (Linux)")

REPOSITORY = Path(__file__).resolve().parent.parent
XATTR = "user.pydaf.undo-journal"
# The layout of a journal (docs/design/h5df.md): MAGIC, a header (committed size, device, inode, CRC), two state slots,
# then records (offset, length, CRC, saved bytes).
MAGIC = b"PYDAF-H5DF-UNDO-2\n"
HEADER = struct.Struct("<QQQI")
SLOT = struct.Struct("<QQQqQQQqIII")
RECORD = struct.Struct("<QQI")
SLOTS_START = len(MAGIC) + HEADER.size
RECORDS_START = SLOTS_START + 2 * SLOT.size


def journal_of(path: Path) -> Path:
    return path.parent / f".{path.name}.pydaf-undo"


def killed_writer(path: Path, operation: str = "overwrite", kill_at: int = 2) -> dict:
    """Create the data set, then kill a writer inside its flush (after it saved and overwrote committed bytes);
    returns the values of the last commit."""
    old = create(path)
    child = run(KILLED_INSIDE_A_FLUSH, str(path), operation, str(kill_at))
    assert child.returncode == -signal.SIGKILL, child.stderr
    journal = journal_of(path)
    assert journal.stat().st_size > RECORDS_START, "the kill did not land after an overwrite"
    return old


def h5py_writes(path: Path, how: str) -> None:
    """Another HDF5 program writes the file: a value in place (same size), or a new dataset (the file grows)."""
    time.sleep(0.05)  # (file times tick every few ms: a change within the tick of the killed writer's last is not seen)
    with h5py.File(path, "r+") as file:
        if how == "in_place":
            file["vectors/cell/age"][0] = 99.0
        else:
            file.create_dataset("extra", data=np.arange(100_000.0))


# 1. A stale journal never rolls back what another program wrote after its writer was killed.

@pytest.mark.parametrize("how", ["in_place", "grown"])
def test_a_journal_is_not_applied_to_a_file_another_program_wrote_since(tmp_path, how):
    path = tmp_path / "data.h5df"
    old = killed_writer(path)
    journal = journal_of(path)
    h5py_writes(path, how)
    changed = path.read_bytes()
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError) as raised:
            pydaf.H5df(path, mode)
        message = str(raised.value)
        assert "was changed after the pydaf writer" in message and str(path) in message, message
        assert f"delete the journal: {journal}" in message, message
        assert f"pydaf.formats.h5df.force_rollback({str(path)!r})" in message, message
        assert path.read_bytes() == changed, f"mode {mode} wrote the file"
        assert journal.exists(), f"mode {mode} removed the journal"
    if how == "grown":  # (rolling back would cut off the new dataset the other program's metadata points to)
        journal.unlink()  # the first way out: keep the file as it is
        with h5py.File(path, "r") as file:
            assert file["extra"][-1] == 99_999.0
        assert pydaf.H5df(path, "r").axis_length("cell") == 50
        return
    # The second way out: roll back anyway (what the other program wrote over the writer's bytes is lost, as asked).
    assert pydaf.formats.h5df.force_rollback(str(path)) is True
    assert not journal.exists() and XATTR not in os.listxattr(path)
    daf = pydaf.H5df(path, "r")
    rolled_back = state(daf)
    # (bytes the killed writer had not overwritten are not in the journal: they keep the other program's change)
    assert rolled_back.pop("vector age") == old.pop("vector age") + 99.0
    assert rolled_back == old and check_daf(daf) == []


def test_deleting_the_journal_keeps_what_the_other_program_wrote(tmp_path):
    path = tmp_path / "data.h5df"
    killed_writer(path)
    h5py_writes(path, "in_place")
    with pytest.raises(pydaf.DafFormatError, match="was changed after"):
        pydaf.H5df(path, "r+")
    journal_of(path).unlink()  # the first way out
    assert pydaf.H5df(path, "r").get_vector("cell", "age")[0] == 99.0
    assert pydaf.H5df(path, "r+").get_vector("cell", "age")[0] == 99.0
    assert pydaf.formats.h5df.force_rollback(str(path)) is False  # (nothing pending now)


# The writer killed between one of its writes and the record of the state it left: still recognised (the write it
# declared: its size, its bytes, the file's time) and rolled back; another program writing later is still refused.
KILLED_AFTER_A_WRITE = """
    import os, signal, sys
    import numpy as np, pydaf
    from pydaf.formats.h5df import undo_journal

    path, kill_at = sys.argv[1], int(sys.argv[2])
    daf = pydaf.H5df(path, "r+")
    records = 0
    original = undo_journal.JournaledFile._record_state

    def record_state(self, size):
        global records
        records += 1
        if records == kill_at:  # (the write was made; its state not recorded)
            os.kill(os.getpid(), signal.SIGKILL)
        original(self, size)

    undo_journal.JournaledFile._record_state = record_state
    daf.set_matrix("cell", "gene", "m5", np.full((50, 3), 100.0), relayout=False, overwrite=True)
    print(records)
"""


def test_a_writer_killed_between_a_write_and_its_state_is_rolled_back(tmp_path):
    path = tmp_path / "data.h5df"
    old = create(path)
    original = path.read_bytes()
    killed = 0
    for kill_at in range(1, 12):
        child = run(KILLED_AFTER_A_WRITE, str(path), str(kill_at))
        if child.returncode == 0:
            break
        assert child.returncode == -signal.SIGKILL, child.stderr
        killed += 1
        with pytest.raises(pydaf.DafFormatError, match="open it once in mode r\\+ to repair it"):
            pydaf.H5df(path, "r")
        repaired = pydaf.H5df(path, "r+")
        assert state(repaired) == old, f"killed after write {kill_at}"
        del repaired
        assert path.read_bytes() == original
    assert killed >= 3


def test_a_change_after_a_writer_killed_inside_a_write_is_refused(tmp_path):
    path = tmp_path / "data.h5df"
    create(path)
    child = run(KILLED_AFTER_A_WRITE, str(path), "2")
    assert child.returncode == -signal.SIGKILL, child.stderr
    time.sleep(2.2)  # (past the window in which the file's time may be the declared write's)
    h5py_writes(path, "in_place")
    with pytest.raises(pydaf.DafFormatError, match="was changed after"):
        pydaf.H5df(path, "r+")
    journal_of(path).unlink()
    assert pydaf.H5df(path, "r").get_vector("cell", "age")[0] == 99.0


# 2. A journal left by a file since replaced (a new file at the same path) is never applied to the new file.

def test_a_journal_of_a_replaced_file_is_never_applied(tmp_path):
    path = tmp_path / "data.h5df"
    old = killed_writer(path)
    journal = journal_of(path)
    moved = tmp_path / "moved" / "old.h5df"
    moved.parent.mkdir()
    os.rename(path, moved)  # the killed writer's file goes elsewhere; a new one takes its name
    fresh = tmp_path / "fresh.h5df"
    pydaf.H5df(fresh, "w").add_axis("cell", ["a", "b"]).set_scalar("title", "fresh")
    os.rename(fresh, path)
    new_bytes = path.read_bytes()
    with pytest.warns(UserWarning, match="belongs to another file"):
        assert pydaf.H5df(path, "r").get_scalar("title") == "fresh"
    assert journal.exists()  # (a read-only open writes nothing)
    with pytest.warns(UserWarning, match="set aside as"):
        daf = pydaf.H5df(path, "r+")
    assert daf.get_scalar("title") == "fresh" and daf.axis_vector("cell").tolist() == ["a", "b"]
    del daf
    assert path.read_bytes() == new_bytes, "the old file's journal was applied to the new file"
    assert not journal.exists()
    # The old file, under its new name, still finds its journal (set aside) through its extended attribute.
    with pytest.raises(pydaf.DafFormatError, match="open it once in mode r\\+ to repair it"):
        pydaf.H5df(moved, "r")
    assert state(pydaf.H5df(moved, "r+")) == old
    assert [name for name in os.listdir(tmp_path) if "pydaf-undo" in name] == []


def test_a_journal_of_a_deleted_file_is_never_applied(tmp_path):
    """The new file may get the old one's inode number: then its different state (time, size) refuses the journal."""
    path = tmp_path / "data.h5df"
    killed_writer(path)
    inode = os.stat(path).st_ino
    os.unlink(path)
    h5py.File(path, "w").close()  # another program makes a new (non-Daf) HDF5 file there
    with h5py.File(path, "r+") as file:
        file.attrs["mine"] = 1
    before = path.read_bytes()
    if os.stat(path).st_ino == inode:
        with pytest.raises(pydaf.DafFormatError, match="was changed after"):
            pydaf.formats.h5df.open_h5_file(str(path), "r+")
    else:
        with pytest.warns(UserWarning, match="belongs to another file"):
            pydaf.formats.h5df.open_h5_file(str(path), "r+").close()
    assert path.read_bytes() == before


# 3. A read-only open through another name of the file (a hard link, in another folder) sees the pending journal.

def test_a_hard_link_finds_the_pending_journal(tmp_path):
    path = tmp_path / "first" / "data.h5df"
    path.parent.mkdir()
    old = killed_writer(path)
    other = tmp_path / "second" / "other-name.h5df"
    other.parent.mkdir()
    os.link(path, other)
    with pytest.raises(pydaf.DafFormatError, match="open it once in mode r\\+ to repair it"):
        pydaf.H5df(other, "r")
    assert os.getxattr(other, XATTR) == os.fsencode(journal_of(path))
    repaired = pydaf.H5df(other, "r+")
    assert state(repaired) == old and check_daf(repaired) == []
    repaired.close()
    assert not journal_of(path).exists() and XATTR not in os.listxattr(path)
    assert state(pydaf.H5df(path, "r")) == old


def test_a_closed_writer_leaves_no_note_on_the_file(tmp_path):
    path = tmp_path / "data.h5df"
    create(path)
    daf = pydaf.H5df(path, "r+")
    daf.set_scalar("title", "newer", overwrite=True)
    assert not journal_of(path).exists()
    assert os.getxattr(path, XATTR) == os.fsencode(journal_of(path))  # (kept while open: set once, not per write)
    daf.close()
    assert XATTR not in os.listxattr(path)


NO_XATTRS = """
    import errno, os, sys
    import pydaf

    def unsupported(*arguments, **keywords):
        raise OSError(errno.ENOTSUP, "Operation not supported")

    os.getxattr = os.setxattr = os.removexattr = unsupported  # (a file system without extended attributes)
    try:
        pydaf.H5df(sys.argv[1], "r")
        print("opened")
    except pydaf.DafFormatError as error:
        print("refused", "hard links" in str(error))
"""


def test_without_extended_attributes_a_file_with_two_names_is_refused(tmp_path):
    """(Fault injection: no file system here lacks user extended attributes, so the child makes them fail.)"""
    path = tmp_path / "data.h5df"
    create(path)
    other = tmp_path / "other.h5df"
    os.link(path, other)
    assert run(NO_XATTRS, str(other)).stdout == "refused True\n"
    os.unlink(other)
    assert run(NO_XATTRS, str(path)).stdout == "opened\n"


# 4. Hostile journals: typed errors, bounded work, no hang, no MemoryError (each open in a child process with a timeout
# and a 1.5 GB address-space limit).

HOSTILE_OPEN = """
    import hashlib, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
    import pydaf
    for mode in sys.argv[2:]:
        try:
            pydaf.H5df(sys.argv[1], mode)
            print("opened")
        except pydaf.DafError as error:
            print(type(error).__name__, str(error).replace("\\n", " | "))
        with open(sys.argv[1], "rb") as file:
            print(hashlib.sha256(file.read()).hexdigest())
"""


def hostile_opens(path: Path, *modes: str) -> list[tuple[str, str]]:
    """Open ``path`` in each mode in turn, in a child process; the outcome of each and the file's digest after it."""
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(HOSTILE_OPEN), str(path), *modes],
                           env=environment, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
    lines = child.stdout.splitlines()
    return list(zip(lines[::2], lines[1::2], strict=True))


def hostile_open(path: Path, mode: str) -> str:
    return hostile_opens(path, mode)[0][0] + "\n"


def slot_bytes(journal: bytes) -> tuple[int, bytes]:
    """The position and bytes of the journal's newest whole state slot."""
    slots = []
    for index in range(2):
        start = SLOTS_START + index * SLOT.size
        body = journal[start:start + SLOT.size]
        if struct.unpack_from("<I", body, SLOT.size - 4)[0] == zlib.crc32(body[:-4]):
            slots.append((SLOT.unpack(body)[0], start))
    return max(slots)[1], journal[max(slots)[1]:max(slots)[1] + SLOT.size]


def with_slot(journal: bytes, **changes: int) -> bytes:
    """The journal with its newest slot's fields changed (and its CRC made right again)."""
    start, body = slot_bytes(journal)
    names = ["sequence", "records_end", "size", "mtime_ns", "offset", "length", "size_after", "time_ns", "crc",
             "flags", "slot_crc"]
    values = dict(zip(names, SLOT.unpack(body), strict=True))
    values.update(changes)
    packed = SLOT.pack(*[values[name] for name in names])[:-4]
    return journal[:start] + packed + struct.pack("<I", zlib.crc32(packed)) + journal[start + SLOT.size:]


def with_header(journal: bytes, committed: int) -> bytes:
    fields = list(HEADER.unpack_from(journal, len(MAGIC)))
    fields[0] = committed
    head = MAGIC + struct.pack("<QQQ", *fields[:3])
    return head + struct.pack("<I", zlib.crc32(head)) + journal[SLOTS_START:]


def plant(path: Path, journal: Path, genuine: bytes, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(journal)
    elif kind == "link_to_device":
        os.symlink("/dev/zero", journal)
    elif kind == "directory":
        journal.mkdir()
    elif kind == "xattr_to_device":
        os.setxattr(path, XATTR, b"/dev/zero")
    elif kind == "xattr_to_fifo":
        os.mkfifo(path.parent / "planted-fifo")
        os.setxattr(path, XATTR, os.fsencode(path.parent / "planted-fifo"))
    elif kind == "huge_sparse_v2":  # an 8 GB journal (sparse), its header zeros
        with open(journal, "wb") as handle:
            handle.write(MAGIC)
            handle.truncate(8 << 30)
    elif kind == "huge_sparse_v1":  # an 8 GB journal (sparse), as written by the previous pydaf
        with open(journal, "wb") as handle:
            head = b"PYDAF-H5DF-UNDO-1\n" + struct.pack("<Q", os.path.getsize(path))
            handle.write(head + struct.pack("<I", zlib.crc32(head)))
            handle.truncate(8 << 30)
    elif kind == "huge_sparse_record":  # a genuine journal declaring records up to 8 GB, with one of 8 GB
        data = with_slot(genuine, records_end=8 << 30)
        data += RECORD.pack(0, 8 << 30, 0)
        with open(journal, "wb") as handle:
            handle.write(data)
            handle.truncate(8 << 30)
    elif kind == "huge_committed_size":
        journal.write_bytes(with_header(genuine, 8 << 40))
    elif kind == "records_beyond_the_file":
        position = len(genuine)
        record = struct.pack("<QQ", 1 << 40, 4) + b"ABCD"
        checksum = zlib.crc32(b"ABCD", zlib.crc32(record[:16]))
        data = genuine + RECORD.pack(1 << 40, 4, checksum) + b"ABCD"
        journal.write_bytes(with_slot(data, records_end=position + RECORD.size + 4))
    elif kind == "bad_record_crc":
        data = bytearray(genuine)
        data[RECORDS_START + RECORD.size] ^= 0xFF  # (a byte of the first record's saved bytes)
        journal.write_bytes(bytes(data))
    elif kind == "truncated_records":
        journal.write_bytes(genuine[:-3])
    elif kind == "bad_header_crc":
        data = bytearray(genuine)
        data[len(MAGIC)] ^= 0x01
        journal.write_bytes(bytes(data))
    elif kind == "no_valid_slot":
        data = bytearray(genuine)
        data[SLOTS_START:RECORDS_START] = bytes(RECORDS_START - SLOTS_START)
        journal.write_bytes(bytes(data))
    else:
        raise AssertionError(kind)


HOSTILE: dict[str, str | None] = {
    "fifo": "not a regular file", "link_to_device": "not a regular file", "directory": "not a regular file",
    "xattr_to_device": "not a regular file", "xattr_to_fifo": "not a regular file",
    "huge_sparse_v1": None, "huge_sparse_v2": "corrupt header", "huge_sparse_record": "is corrupt",
    "huge_committed_size": "committed size", "records_beyond_the_file": "beyond the file's committed size",
    "bad_record_crc": "wrong CRC", "truncated_records": "truncated or corrupt", "bad_header_crc": "corrupt header",
    "no_valid_slot": "no valid state slot",
}


@pytest.fixture(scope="module")
def genuine_journal(tmp_path_factory) -> tuple[bytes, bytes]:
    """A data set's bytes with the journal a writer killed inside its flush left (and the values it rolls back to)."""
    path = tmp_path_factory.mktemp("genuine") / "data.h5df"
    killed_writer(path)
    return path.read_bytes(), journal_of(path).read_bytes()


# (planted over a genuine journal, changed; the others need no journal of the current layout)
PLANTED_ALONE = {"fifo", "link_to_device", "directory", "xattr_to_device", "xattr_to_fifo", "huge_sparse_v1",
                 "huge_sparse_v2"}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_journal_is_a_format_error(tmp_path, request, kind):
    path = tmp_path / "data.h5df"
    journal = journal_of(path)
    genuine = b""
    if kind in PLANTED_ALONE:
        create(path)
        file_bytes = path.read_bytes()
    else:
        file_bytes, journal_bytes = request.getfixturevalue("genuine_journal")
        path.write_bytes(file_bytes)
        # (the genuine journal names the file it was written for: give it this copy's identity and state)
        status = os.stat(path)
        fields = list(HEADER.unpack_from(journal_bytes, len(MAGIC)))
        head = MAGIC + struct.pack("<QQQ", fields[0], status.st_dev, status.st_ino)
        genuine = head + struct.pack("<I", zlib.crc32(head)) + journal_bytes[SLOTS_START:]
        genuine = with_slot(genuine, size=status.st_size, mtime_ns=status.st_mtime_ns, flags=0)
    status = os.stat(path)
    plant(path, journal, genuine, kind)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    digest = hashlib.sha256(file_bytes).hexdigest()
    for mode, (outcome, after) in zip(("r", "r+"), hostile_opens(path, "r", "r+"), strict=True):
        if HOSTILE[kind] is None:  # (nothing whole to restore: ignored, removed by a writable open)
            assert outcome == "opened", f"{kind}, {mode}: {outcome}"
        else:
            assert outcome.startswith("DafFormatError") and HOSTILE[kind] in outcome, f"{kind}, {mode}: {outcome}"
        assert after == digest, f"{kind}, {mode}: the file was written"


def test_the_genuine_journal_of_the_hostile_tests_rolls_back(tmp_path, genuine_journal):
    """(The hostile journals above are this one, changed: unchanged, it is applied.)"""
    file_bytes, journal_bytes = genuine_journal
    path = tmp_path / "data.h5df"
    path.write_bytes(file_bytes)
    status = os.stat(path)
    fields = list(HEADER.unpack_from(journal_bytes, len(MAGIC)))
    head = MAGIC + struct.pack("<QQQ", fields[0], status.st_dev, status.st_ino)
    genuine = head + struct.pack("<I", zlib.crc32(head)) + journal_bytes[SLOTS_START:]
    journal_of(path).write_bytes(with_slot(genuine, size=status.st_size, mtime_ns=status.st_mtime_ns, flags=0))
    assert "open it once in mode r+" in hostile_open(path, "r")
    assert hostile_open(path, "r+") == "opened\n"
    assert not journal_of(path).exists()
    assert check_daf(pydaf.H5df(path, "r")) == []
