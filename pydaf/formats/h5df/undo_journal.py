"""An undo journal that makes each H5df write operation atomic against a killed process: a writable H5df is opened
through h5py's ``fileobj`` driver on a :class:`JournaledFile`, which appends the old content of committed bytes to a
journal beside the file before HDF5 overwrites them, and commits by deleting the journal; the next writable open
rolls an interrupted operation back (:func:`recover`).

A journal proves it belongs to the file as it is before anything is applied: its header names the file (device,
inode), and a state slot, rewritten after every write the writer made while the journal existed, holds the file's
size as the writer left it (with the write it was about to make, for a writer killed inside one) and makes the
journal's own modification time that of the writer's last write, which the file's must not pass. A file changed
since (by h5py or Julia), or replaced, is never rolled back (see :func:`pydaf.formats.h5df.force_rollback`). The
journal is found from every name of the file: the file carries an extended attribute naming it.

Design: docs/design/h5df.md ("A torn flush, closed by an undo journal"; "Trusting the journal").
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
import struct
import threading
import time
import warnings
import zlib
from dataclasses import dataclass

from ..._os.files import file_kind, open_regular_file
from ..._os.locks import Owner, hdf5_flock
from ...errors import DafFormatError, DafStorageError

MAGIC = b"PYDAF-H5DF-UNDO-2\n"
_MAGIC_1 = b"PYDAF-H5DF-UNDO-1\n"  # (written by pydaf before the journal named its file: no identity, no state)
_HEADER = struct.Struct("<QQQI")  # committed size, st_dev, st_ino, CRC-32 of MAGIC and those
_HEADER_1 = struct.Struct("<QI")  # committed size, CRC-32 of MAGIC and the size
# The state slot (two, alternating, each with a CRC: the newest whole one counts): sequence, records end (the
# journal's length when written), the file's size (and its mtime_ns when the journal was created, for messages), then
# the write the writer was about to make (offset, length, the file's size after it, the time it was declared, the
# CRC-32 of its bytes), flags, CRC-32 of the slot. Rewritten after every write, it also makes the journal's own
# modification time that of the writer's last write: the file's must not be later (see ``_matches_state``).
_SLOT = struct.Struct("<QQQqQQQqIII")
_SLOT_BODY = struct.Struct("<QQQqQQQqII")  # (the slot without its CRC)
_SLOTS_START = len(MAGIC) + _HEADER.size
RECORDS_START = _SLOTS_START + 2 * _SLOT.size  #: where a journal's records begin (its header and slots before)
_RECORDS_START_1 = len(_MAGIC_1) + _HEADER_1.size
_RECORD = struct.Struct("<QQI")  # offset, length, CRC-32 of offset, length and the saved bytes
_WRITE_CHUNK = 1 << 30  # (Linux writes at most ~2 GiB per call)
_READ_PIECE = 1 << 24  # (a journal is read in pieces of at most 16 MiB: a declared length is never one allocation)
_PAGE = 4096

_PENDING = 1  # the slot declares a write about to be made
_PENDING_CRC = 2  # ... within one page (so it is whole or not made at all), whose bytes' CRC is recorded
_MAPPED = 4  # writable maps of the file were handed out: their writes move the file's time at any moment

#: How long after a write is declared the file's time may say it was made (a writer killed inside its write): a
#: later time means another program wrote the file.
WRITE_WINDOW_NS = 2_000_000_000

#: The extended attribute naming the pending journal of a file, so that every name of it (hard links) finds it.
JOURNAL_XATTR = "user.pydaf.undo-journal"
_NO_XATTRS = {errno.ENOTSUP, errno.EOPNOTSUPP}


def journal_path(path: str) -> str:
    """Where the undo journal of the HDF5 file ``path`` lives: beside the file its path resolves to (so any path to
    it, through symbolic links, finds the same journal), named after it, hidden. (A hard link, another name of the
    same file, finds it through the extended attribute :data:`JOURNAL_XATTR` the writer sets on the file.)

    Example:
        >>> journal_path("/data/cells.h5df")
        '/data/.cells.h5df.pydaf-undo'
    """
    real = os.path.realpath(path)
    folder, name = os.path.split(real)
    return os.path.join(folder, f".{name}.pydaf-undo")


def _set_aside_path(journal: str, device: int, inode: int) -> str:
    """Where a journal of another file (device, inode), found beside a file that replaced it, is moved."""
    return f"{journal}.{device}-{inode}"


def _numbered_free_path(path: str) -> str:
    """The first of ``path.2``, ``path.3``... that does not exist."""
    number = 2
    while os.path.lexists(f"{path}.{number}"):
        number += 1
    return f"{path}.{number}"


@dataclass
class _Slot:
    sequence: int
    records_end: int
    size: int
    mtime_ns: int
    pending_offset: int
    pending_length: int
    pending_size: int
    pending_time_ns: int
    pending_crc: int
    flags: int


@dataclass
class _Journal:
    """What a journal says, once checked (its records are re-read when applied: never held in memory)."""

    version: int
    committed_size: int
    device: int
    inode: int
    slot: _Slot | None
    records_start: int
    records_end: int  # (past the last whole record)
    records: int
    saved_bytes: int


def _journal_error(journal: str, path: str, problem: str) -> DafFormatError:
    return DafFormatError(f"the undo journal: {journal}\nof the H5df file: {path}\n{problem}")


def _read_exactly(fd: int, nbytes: int, offset: int) -> bytes:
    parts = []
    while nbytes > 0:
        part = os.pread(fd, min(nbytes, _READ_PIECE), offset)
        if not part:
            break
        parts.append(part)
        nbytes -= len(part)
        offset += len(part)
    return b"".join(parts)


def _crc_of(fd: int, offset: int, nbytes: int, crc: int) -> tuple[int, int]:
    """The CRC-32 of ``nbytes`` at ``offset`` (continuing ``crc``), read in bounded pieces; and how many were read."""
    done = 0
    while done < nbytes:
        part = os.pread(fd, min(nbytes - done, _READ_PIECE), offset + done)
        if not part:
            break
        crc = zlib.crc32(part, crc)
        done += len(part)
    return crc, done


def _parse_journal(fd: int, journal_size: int, file_size: int, journal: str, path: str) -> _Journal | None:
    """Check a journal (bounded: every declared length against the journal's and the file's real sizes, every
    record's CRC, read in pieces). None if its header was cut short (then no byte of the file was overwritten)."""
    head = os.pread(fd, min(journal_size, RECORDS_START), 0)
    if MAGIC[:len(head)] == head[:len(MAGIC)]:
        version, magic, header, records_start = 2, MAGIC, _HEADER, RECORDS_START
    elif _MAGIC_1[:len(head)] == head[:len(_MAGIC_1)]:
        version, magic, header, records_start = 1, _MAGIC_1, _HEADER_1, _RECORDS_START_1
    else:
        raise _journal_error(journal, path, "is not a pydaf journal (delete it if nothing else wrote it)")
    if len(head) < len(magic) + header.size + (2 * _SLOT.size if version == 2 else 0):
        return None  # (the writer was killed while it created the journal, before its first record)
    fields = header.unpack_from(head, len(magic))
    if fields[-1] != zlib.crc32(head[:len(magic) + header.size - 4]):
        raise _journal_error(journal, path, "has a corrupt header")
    committed_size = fields[0]
    device, inode = (fields[1], fields[2]) if version == 2 else (0, 0)
    slot = None
    if version == 2:
        slots = []
        for index in range(2):
            start = _SLOTS_START + index * _SLOT.size
            values = _SLOT.unpack_from(head, start)
            if values[-1] == zlib.crc32(head[start:start + _SLOT.size - 4]):
                slots.append(_Slot(*values[:-1]))
        if not slots:
            raise _journal_error(journal, path, "has no valid state slot (corrupt)")
        slot = max(slots, key=lambda each: each.sequence)
        if slot.records_end < records_start or slot.records_end > journal_size:
            raise _journal_error(journal, path, f"declares records up to byte {slot.records_end}, but has "
                                 f"{journal_size} bytes (truncated or corrupt)")
    # Records restore bytes below the committed size only; a writer grows the file past it, never shrinks it below.
    if committed_size > (file_size if slot is None else slot.size):
        raise _journal_error(journal, path, f"is corrupt: it declares a committed size of {committed_size} bytes, "
                             f"larger than the file ({file_size if slot is None else slot.size} bytes)")
    position, records, saved = records_start, 0, 0
    whole_up_to = records_start if slot is None else slot.records_end  # (the records the writer's state counts)
    while position + _RECORD.size <= journal_size:
        offset, length, checksum = _RECORD.unpack(os.pread(fd, _RECORD.size, position))
        start = position + _RECORD.size
        problem = None
        if length == 0 or length > journal_size - start:
            problem = f"a record at byte {position} declares {length} bytes"
        elif offset + length > committed_size or saved + length > committed_size:
            problem = (f"a record at byte {position} saves the bytes {offset}..{offset + length}, beyond the "
                       f"file's committed size ({committed_size})")
        else:
            crc, done = _crc_of(fd, start, length, zlib.crc32(struct.pack("<QQ", offset, length)))
            if done != length or crc != checksum:
                problem = f"a record at byte {position} has a wrong CRC"
        if problem is not None:
            if position >= whole_up_to:
                break  # the record being written when the writer was killed: its bytes were not overwritten
            raise _journal_error(journal, path, f"is corrupt: {problem}")
        records += 1
        saved += length
        position = start + length
    if position < whole_up_to:
        raise _journal_error(journal, path, f"declares records up to byte {whole_up_to}, but they end at {position}")
    return _Journal(version, committed_size, device, inode, slot, records_start, position, records, saved)


def _describe_time(mtime_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(mtime_ns // 1_000_000_000)) + \
        f".{mtime_ns % 1_000_000_000:09d} UTC"


def _matches_state(content: _Journal, fd: int, status: os.stat_result, journal_mtime_ns: int) -> bool:
    """Whether the file is as the killed writer left it: the size the state slot recorded, and no modification later
    than the journal's own (the slot is rewritten after each of the writer's writes, so a later time is another
    program's write); or, for a writer killed inside the write it declared (after it, before the slot's rewrite):
    the size that write leads to (or one between, for a write cut short), its bytes (for a write within one page),
    and the file's time within :data:`WRITE_WINDOW_NS` of the declaration. (File times come from a clock that ticks
    every few milliseconds: a change within the tick of the writer's last write is not seen.)"""
    slot = content.slot
    assert slot is not None
    size, mtime = status.st_size, status.st_mtime_ns
    mapped = slot.flags & _MAPPED  # (writable maps move the time at any moment: their bytes are all restored or cut)
    if not slot.flags & _PENDING:
        return size == slot.size and bool(mapped or mtime <= journal_mtime_ns)
    low, high = sorted((slot.size, slot.pending_size))
    if not low <= size <= high or not (mapped or mtime <= journal_mtime_ns + WRITE_WINDOW_NS):
        return False
    if slot.flags & _PENDING_CRC and mtime > journal_mtime_ns:  # (made, so whole: a write within a page is)
        crc, done = _crc_of(fd, slot.pending_offset, slot.pending_length, 0)
        return done == slot.pending_length and crc == slot.pending_crc
    return True


def _state_error(journal: str, path: str, content: _Journal, status: os.stat_result,
                 journal_mtime_ns: int) -> DafFormatError:
    slot = content.slot
    if slot is None:
        was = "it was written by an older pydaf, which did not record the state the writer left"
    else:
        was = (f"the writer left it with {slot.size} bytes, last written at {_describe_time(journal_mtime_ns)}; it "
               f"has {status.st_size} bytes, modified at {_describe_time(status.st_mtime_ns)}")
    return DafFormatError(
        f"the H5df file: {path}\nwas changed after the pydaf writer that left its undo journal: {journal}\nwas "
        f"killed ({was}); rolling it back would lose those changes, so nothing was applied\n"
        f"to keep the file as it is now: delete the journal: {journal}\n"
        "to roll it back to the writer's last commit anyway (losing the later changes): "
        f"pydaf.formats.h5df.force_rollback({path!r})")


def _open_journal_file(journal: str, path: str) -> tuple[int, os.stat_result] | None:
    """A descriptor and status of the journal ``journal``, None if there is none; never blocks or follows a link."""
    try:
        status = os.lstat(journal)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _journal_error(journal, path, f"can't be examined ({error})") from error
    if not stat.S_ISREG(status.st_mode):
        raise _journal_error(journal, path, f"is not a regular file ({file_kind(status.st_mode)})")
    try:
        return open_regular_file(journal, what="the undo journal", follow_symlinks=False)
    except FileNotFoundError:
        return None
    except DafFormatError as error:
        raise _journal_error(journal, path, "is not a regular file") from error
    except OSError as error:
        raise _journal_error(journal, path, f"can't be read ({error})") from error


def _xattr_target(fd: int) -> tuple[str | None, bool]:
    """The journal the file's extended attribute names (None if none), and whether the file system keeps them."""
    try:
        value = os.getxattr(fd, JOURNAL_XATTR)
    except OSError as error:  # (no attribute; or none can be read here: then as a file system without them)
        return None, error.errno == errno.ENODATA
    target = os.fsdecode(value)
    return (target if os.path.isabs(target) and "\0" not in target else None), True


def _remove_xattr(fd: int, journal: str) -> None:
    """Remove the file's note of its journal ``journal`` (if it names that one)."""
    try:
        if os.fsdecode(os.getxattr(fd, JOURNAL_XATTR)) == journal:
            os.removexattr(fd, JOURNAL_XATTR)
    except OSError as error:
        if error.errno not in (errno.ENODATA, *_NO_XATTRS):
            raise


def recover(path: str, *, writable: bool, force: bool = False) -> bool:
    """Roll the HDF5 file ``path`` back to its last commit if a killed writer left an undo journal (the caller holds
    the file's exclusive lock); returns whether it did. A read-only open only checks: if the journal saved any byte
    (so the file may hold a torn flush), it raises :class:`DafFormatError` asking for a writable open, which repairs.

    Nothing is applied unless the journal proves it belongs to this file as the writer left it: the same file
    (device, inode: a journal of a file since replaced is set aside, never applied), and the same state (size and
    time; see :func:`_matches_state`). A file changed since is refused, naming the two ways out; ``force`` (see
    :func:`pydaf.formats.h5df.force_rollback`) rolls it back anyway.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> recover(path, writable=True)  # no journal: nothing to do
        False
    """
    derived = journal_path(path)
    try:
        fd, status = open_regular_file(path, what="the H5df file", flags=os.O_RDWR if writable else os.O_RDONLY)
    except FileNotFoundError:
        return False
    except DafFormatError:
        raise
    except OSError:  # (a file that can't be opened here can't be opened by HDF5 either: its open says why)
        return False
    try:
        target, xattrs = _xattr_target(fd)
        candidates = [derived] if target is None or target == derived else [target, derived]
        if target is not None and not os.path.lexists(target):  # (maybe set aside when a file replaced this one)
            aside = _set_aside_path(target, status.st_dev, status.st_ino)
            if os.path.lexists(aside):
                candidates.insert(0, aside)
        found = False
        for journal in candidates:
            opened = _open_journal_file(journal, path)
            if opened is None:
                continue
            found = True
            journal_fd, journal_status = opened
            try:
                applied = _recover_from(fd, status, journal, journal_fd, journal_status, path, writable=writable,
                                        force=force, beside=journal == derived)
            finally:
                os.close(journal_fd)
            if applied is not None:
                return applied
        if not found and not xattrs and status.st_nlink > 1 and not force:
            raise DafFormatError(
                f"the H5df file: {path}\nhas {status.st_nlink} names (hard links) on a file system without extended "
                "attributes (where pydaf notes the undo journal a writer keeps): a journal a killed writer left "
                "beside another of its names can't be ruled out\nopen it by the name pydaf last wrote it by, or "
                "give it a single name (remove the other links, or copy it)")
        return False
    finally:
        os.close(fd)


def _recover_from(fd: int, status: os.stat_result, journal: str, journal_fd: int, journal_status: os.stat_result,
                  path: str, *, writable: bool, force: bool, beside: bool) -> bool | None:
    """Check (and apply, if ``writable``) one journal found for the file; None if it is another file's (ignored)."""
    content = _parse_journal(journal_fd, journal_status.st_size, status.st_size, journal, path)
    if content is None:  # (cut short while created: nothing was overwritten)
        if writable:
            os.unlink(journal)
            _remove_xattr(fd, journal)
        return False
    if content.version == 2 and (content.device, content.inode) != (status.st_dev, status.st_ino):
        if not beside:  # (an attribute copied with the file names another file's journal: not this one's)
            return None
        aside = _set_aside_path(journal, content.device, content.inode)
        stale = None
        if writable:  # (the writer needs the journal's place; the other file still finds it, see ``recover``)
            if os.path.lexists(aside):
                # An older journal set aside for the same inode number: its file is gone and the number was reused
                # (the file with that number, opened writable since, would have found and applied it). Kept, under a
                # numbered name, for a person to look at; this newer one takes the name the file finds.
                stale = _numbered_free_path(aside)
                os.rename(aside, stale)
            os.rename(journal, aside)
        what = f"set aside as: {aside}" if writable else "ignored"
        if stale is not None:
            what += f"; an older journal set aside for the same inode number, whose file is gone, was moved to: {stale}"
        warnings.warn(f"the undo journal: {journal}\nbeside the H5df file: {path}\nbelongs to another file (device "
                      f"{content.device}, inode {content.inode}; this one is inode {status.st_ino}), replaced after "
                      f"its pydaf writer was killed: it is not applied ({what})", stacklevel=4)
        return None
    if not content.records:  # (nothing was overwritten: the file is as its last commit left it, maybe longer)
        if writable:
            if status.st_size > content.committed_size and content.slot is not None and \
                    _matches_state(content, fd, status, journal_status.st_mtime_ns):
                os.ftruncate(fd, content.committed_size)
            os.unlink(journal)
            _remove_xattr(fd, journal)
        return False
    if not force and (content.slot is None or not _matches_state(content, fd, status, journal_status.st_mtime_ns)):
        raise _state_error(journal, path, content, status, journal_status.st_mtime_ns)
    if not writable:
        raise DafFormatError(f"the H5df file: {path}\nwas left by a writer killed while it wrote (its undo journal: "
                             f"{journal} is pending)\nopen it once in mode r+ to repair it (a read-only open never "
                             "writes)")
    _apply(fd, journal_fd, content)
    os.unlink(journal)
    _remove_xattr(fd, journal)
    return True


def _apply(fd: int, journal_fd: int, content: _Journal) -> None:
    """Copy every saved range back (in bounded pieces), then cut the file to its committed size."""
    position = content.records_start
    while position < content.records_end:
        offset, length, _ = _RECORD.unpack(os.pread(journal_fd, _RECORD.size, position))
        start = position + _RECORD.size
        done = 0
        while done < length:
            piece = os.pread(journal_fd, min(length - done, _READ_PIECE), start + done)
            if not piece:
                raise DafStorageError("the undo journal was cut short while it was applied (by another program?)")
            _write_all(fd, memoryview(piece), offset + done)
            done += len(piece)
        position = start + length
    if os.fstat(fd).st_size > content.committed_size:
        os.ftruncate(fd, content.committed_size)
    os.fsync(fd)


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:done + _WRITE_CHUNK], offset + done)


class Extents:
    """A set of byte ranges ``[start, end)``, kept as sorted disjoint ranges.

    Example:
        >>> extents = Extents()
        >>> extents.add(10, 20); extents.add(15, 30); extents.remove(12, 14)
        >>> extents.ranges
        [(10, 12), (14, 30)]
        >>> extents.missing(0, 40)
        [(0, 10), (12, 14), (30, 40)]
    """

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` not in the set."""
        parts = []
        index = max(0, bisect.bisect_right(self.ranges, (start, start)) - 1)
        while start < end and index < len(self.ranges):
            range_start, range_end = self.ranges[index]
            if range_start >= end:
                break
            if range_end > start:
                if range_start > start:
                    parts.append((start, range_start))
                start = max(start, range_end)
            index += 1
        if start < end:
            parts.append((start, end))
        return parts

    def add(self, start: int, end: int) -> None:
        if start < end:
            self._set([*self.ranges, (start, end)])

    def remove(self, start: int, end: int) -> None:
        kept = []
        for range_start, range_end in self.ranges:
            if range_end <= start or range_start >= end:
                kept.append((range_start, range_end))
                continue
            if range_start < start:
                kept.append((range_start, start))
            if range_end > end:
                kept.append((end, range_end))
        self.ranges = kept

    def clear(self) -> None:
        self.ranges = []

    def _set(self, ranges: list[tuple[int, int]]) -> None:
        merged: list[tuple[int, int]] = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        self.ranges = merged


class JournaledFile:
    """The file object h5py's ``fileobj`` driver reads and writes a writable H5df file through (see the module).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> open(path, "wb").write(b"old bytes")
        9
        >>> file = JournaledFile(path)
        >>> file.seek(0); file.write(b"new")
        0
        3
        >>> os.path.exists(journal_path(path))  # the old bytes were saved first
        True
        >>> file.commit(); os.path.exists(journal_path(path)), open(path, "rb").read()
        (False, b'new bytes')
        >>> file.close()
    """

    def __init__(self, path: str, *, truncate: bool = False) -> None:
        self.path = path
        self._journal = journal_path(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            # HDF5's own driver would take this lock exclusively. Shared, it still keeps out every other HDF5 writer
            # (Julia, h5py: they lock exclusively) yet lets plain h5py read the file in this process, as it could
            # when HDF5 shared one handle per file; pydaf readers are kept out by pydaf's own lock (_os.locks).
            hdf5_flock(self._fd, path)
        except BaseException:
            os.close(self._fd)
            raise
        if truncate:  # (a new file: once it is locked)
            os.ftruncate(self._fd, 0)
        self._owner = Owner()
        self._mutex = threading.RLock()
        self._position = 0
        self._journal_fd = -1
        self._journal_length = 0
        self._committed_size = os.fstat(self._fd).st_size
        self._saved = Extents()  # saved since the last commit
        # Raw data of datasets deleted by operations that committed: no committed metadata refers to it, so reusing it
        # needs no copy (HDF5 reuses freed space; without this, overwriting a big matrix would copy the freed one).
        # Only pydaf's deletes are known: space HDF5 freed on its own (a group's heap that grew) is always saved.
        self._free = Extents()
        self._freed = Extents()  # deleted by the operation under way: free once it commits
        self._shrink_to: int | None = None
        # The journal's record of the file's state (see the module): the slots' sequence, the file's size (and its
        # mtime_ns when the journal was created), whether writable maps were handed out since the last commit,
        # whether the file notes its journal (an extended attribute, kept while the file is open here).
        self._sequence = 0
        self._state = (0, 0)
        self._mapped = False
        self._xattr_set = False
        self._in_operation = False  # a write operation began and has not committed
        self._failure: BaseException | None = None  # the first write that failed since the last commit

    @property
    def committed_size(self) -> int:
        """The size of the file at the last commit (bytes below it are saved before they are overwritten)."""
        return self._committed_size

    # The file object protocol of h5py's fileobj driver (called with h5py's lock held).

    @property
    def failure(self) -> BaseException | None:
        """The first write that failed since the last commit: HDF5 reports only that its flush failed (and h5py,
        as HDF5 calls on, a chain of SystemErrors), so the writer names this one."""
        return self._failure

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_END:
            offset += os.fstat(self._fd).st_size if self._active() else self._committed_size
        elif whence == os.SEEK_CUR:
            offset += self._position
        self._position = offset
        return offset

    def tell(self) -> int:
        return self._position

    def read(self, size: int) -> bytes:
        if not self._active():
            return bytes(size)
        data = os.pread(self._fd, size, self._position)
        if len(data) < size:  # past the end of the file reads as zeros (as HDF5's own driver does)
            data += bytes(size - len(data))
        self._position += size
        return data

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        position = self._position
        self._position += len(view)
        # HDF5 rewrites some blocks unchanged (the superblock, when it closes a file): they need no journal.
        if position >= self._committed_size or view != os.pread(self._fd, len(view), position):
            self.write_at(position, view)
        return len(view)

    def truncate(self, size: int) -> None:
        with self._mutex:
            if not self._active():
                return
            if size > os.fstat(self._fd).st_size:
                journaled = self._journal_fd >= 0
                if journaled:
                    self._declare(size, 0, None, size)
                os.ftruncate(self._fd, size)
                if journaled:
                    self._record_state(size)
            else:
                self._shrink_to = size  # (at the commit: the cut bytes may belong to the state a rollback restores)

    def flush(self) -> None:
        pass  # every write goes straight to the file

    # pydaf's side.

    def preserve(self, offset: int, nbytes: int) -> None:
        """Save (in the journal) the committed bytes of ``[offset, offset + nbytes)`` not yet saved, before they are
        overwritten (by a writable map, say)."""
        with self._mutex:
            if not self._active():
                return
            if self._shrink_to is not None and offset + nbytes > self._shrink_to:
                self._shrink_to = None
            end = min(offset + nbytes, self._committed_size)
            for start, stop in self._saved.missing(offset, end):
                for part_start, part_stop in self._free.missing(start, stop):
                    self._save(part_start, part_stop)
            self._saved.add(offset, end)  # (saved now, or free at the last commit: either way, safe to overwrite)
            self._free.remove(offset, offset + nbytes)  # (in use from now on)

    def deleted(self, offset: int, nbytes: int) -> None:
        """Note that the operation under way deleted a dataset whose raw data is ``[offset, offset + nbytes)``: once
        it commits, nothing refers to those bytes, and reusing them needs no copy."""
        with self._mutex:
            self._freed.add(offset, min(offset + nbytes, self._committed_size))

    def write_at(self, offset: int, data: memoryview) -> None:
        """Write ``data`` at ``offset``, first saving the committed bytes it overwrites."""
        with self._mutex:
            if not self._active():
                return
            try:
                self.preserve(offset, len(data))
                journaled = self._journal_fd >= 0
                if journaled:
                    self._declare(offset, len(data), data, max(self._state[0], offset + len(data)))
                _write_all(self._fd, data, offset)
                if journaled:
                    self._record_state(max(self._state[0], offset + len(data)))
            except BaseException as error:
                self._failure = self._failure or error
                raise

    def allocate(self, offset: int, nbytes: int) -> bool:
        """Allocate the file space ``[offset, offset + nbytes)`` (``posix_fallocate``: it may grow the file), keeping
        the journal's record of the file's state; False if this process does not write the file (a forked child)."""
        with self._mutex:
            if not self._active():
                return False
            journaled = self._journal_fd >= 0
            if journaled:
                self._declare(offset, 0, None, max(self._state[0], offset + nbytes))
            os.posix_fallocate(self._fd, offset, nbytes)
            if journaled:
                self._record_state(max(self._state[0], offset + nbytes))
            return True

    def mapping(self) -> None:
        """Note that a writable map of the file is about to be handed out: its writes move the file's time at any
        moment, so until the next commit the journal's state can only witness the file's size (the mapped bytes
        are space allocated by this operation: a rollback restores or cuts off all of them)."""
        with self._mutex:
            if self._active() and not self._mapped:
                self._mapped = True
                if self._journal_fd >= 0:
                    self._record_state(self._state[0])

    def begin(self) -> None:
        """Note that a write operation began: until it commits, closing the file keeps the journal (so the next
        writable open rolls back whatever HDF5 wrote of it when it closed)."""
        self._in_operation = True
        self._failure = None  # (what failed before was reported; a successful commit of this one commits it all)

    def commit(self) -> None:
        """Make what was written since the last commit permanent (call it after HDF5's flush): delete the journal,
        then apply any shrink HDF5 asked for."""
        with self._mutex:
            if not self._active():
                return
            if self._journal_fd >= 0:
                os.close(self._journal_fd)
                self._journal_fd = -1
                os.unlink(self._journal)
            self._mapped = False
            if self._shrink_to is not None and self._shrink_to < os.fstat(self._fd).st_size:
                os.ftruncate(self._fd, self._shrink_to)
            self._shrink_to = None
            self._in_operation = False
            self._failure = None
            self._saved.clear()
            for start, end in self._freed.ranges:
                self._free.add(start, end)
            self._freed.clear()
            self._committed_size = os.fstat(self._fd).st_size
            self._free.remove(self._committed_size, 1 << 63)

    def close(self) -> None:
        """Release the file (its lock goes with it). A pending journal stays: the next writable open rolls back what
        was written since the last commit."""
        with self._mutex:
            if self._fd >= 0 and self._owner.is_current:
                if self._journal_fd >= 0:
                    os.close(self._journal_fd)
                else:
                    if self._shrink_to is not None and self._shrink_to < os.fstat(self._fd).st_size:
                        os.ftruncate(self._fd, self._shrink_to)  # (nothing pending: the file is as committed)
                    if self._xattr_set:  # (kept from one journal to the next while open: a note naming no journal
                        try:  # is harmless, and setting it once per open, not per operation, is cheaper)
                            os.removexattr(self._fd, JOURNAL_XATTR)
                        except OSError:
                            pass
                os.close(self._fd)
            self._fd = self._journal_fd = -1

    def __del__(self) -> None:
        # HDF5 drops its file object when it has closed the file (through pydaf, or h5py), after writing what closing
        # writes (the superblock, when it cut free space at the end): that is committed, unless a write operation was
        # still under way or a write failed.
        if self._active() and not self._in_operation and self._failure is None:
            self.commit()
        self.close()

    def abandon(self) -> None:
        """In a forked child: the file is the parent's, so this process must never write it (HDF5 may still call
        in when the child exits)."""
        self._owner.disown()
        self._fd = self._journal_fd = -1

    def _active(self) -> bool:
        return self._fd >= 0 and self._owner.is_current

    def _save(self, start: int, end: int) -> None:
        saved = os.pread(self._fd, end - start, start)
        if len(saved) != end - start:
            raise DafStorageError(f"can't save the bytes {start}..{end} of the H5df file: {self.path}\n"
                                  "(the file is shorter than its committed size: changed by another program?)")
        if self._journal_fd < 0:
            self._open_journal()
        head = struct.pack("<QQ", start, end - start)
        record = _RECORD.pack(start, end - start, zlib.crc32(saved, zlib.crc32(head))) + saved
        _write_all(self._journal_fd, memoryview(record), self._journal_length)
        self._journal_length += len(record)

    def _open_journal(self) -> None:
        try:
            fd = os.open(self._journal, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError as error:
            raise DafStorageError(f"can't start the undo journal: {self._journal}\nof the H5df file: {self.path}\n"
                                  "(it exists: another writer, or something planted there)") from error
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise DafStorageError(f"can't create the undo journal: {self._journal}\nof the H5df file: "
                                      f"{self.path}\n(a writable H5df needs to write beside its file: {error})") \
                    from error
            raise
        try:
            status = os.fstat(self._fd)
            header = MAGIC + struct.pack("<QQQ", self._committed_size, status.st_dev, status.st_ino)
            header += struct.pack("<I", zlib.crc32(header))
            self._sequence = 0
            self._state = (status.st_size, status.st_mtime_ns)
            header += self._slot(0, len(header) + 2 * _SLOT.size) + bytes(_SLOT.size)
            _write_all(fd, memoryview(header), 0)
            # Every name of the file (a hard link in another folder) finds the journal through this note (set at the
            # first journal of this open, removed when it closes with none pending).
            if not self._xattr_set:
                try:
                    os.setxattr(self._fd, JOURNAL_XATTR, os.fsencode(self._journal))
                    self._xattr_set = True
                except OSError as error:
                    if error.errno not in _NO_XATTRS:  # (none on this file system: a file with two names is refused)
                        raise DafStorageError(f"can't note the undo journal: {self._journal}\non the H5df file: "
                                              f"{self.path}\n({error})") from error
        except BaseException:
            os.close(fd)
            os.unlink(self._journal)
            raise
        self._journal_fd = fd
        self._journal_length = len(header)

    def _slot(self, flags: int, records_end: int, pending: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)) -> bytes:
        """The state slot: the file's state as last recorded, maybe with the write about to be made."""
        flags |= _MAPPED if self._mapped else 0
        body = _SLOT_BODY.pack(self._sequence, records_end, *self._state, *pending, flags)
        return body + zlib.crc32(body).to_bytes(4, "little")

    def _write_slot(self, flags: int, pending: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)) -> None:
        self._sequence += 1
        slot = self._slot(flags, self._journal_length, pending)
        if os.pwrite(self._journal_fd, slot, _SLOTS_START + (self._sequence & 1) * _SLOT.size) != len(slot):
            raise DafStorageError(f"can't write the undo journal: {self._journal}\nof the H5df file: {self.path}\n"
                                  "(a short write)")

    def _declare(self, offset: int, length: int, data: memoryview | None, size_after: int) -> None:
        """Record, before it is made, the write (or allocation) of ``length`` bytes at ``offset`` that leaves the
        file ``size_after`` long: a writer killed inside it is then recognised (see ``_matches_state``). A write
        within one page is whole or not made at all: its bytes' CRC is recorded too."""
        flags = _PENDING
        crc = 0
        if data is not None and 0 < length <= _PAGE and offset // _PAGE == (offset + length - 1) // _PAGE:
            flags |= _PENDING_CRC
            crc = zlib.crc32(data)
        self._write_slot(flags, (offset, length, size_after, time.time_ns(), crc))

    def _record_state(self, size: int) -> None:
        """Record the file's state after a write: its size (known without asking: an ``fstat`` would make the next
        write update the file's time with a fine-grained clock, each an inode update); writing the slot makes the
        journal's time that of the write, or later."""
        self._state = (size, self._state[1])
        self._write_slot(0)
