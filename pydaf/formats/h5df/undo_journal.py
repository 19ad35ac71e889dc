"""An undo journal that makes each H5df write operation atomic against a killed process: a writable H5df is opened
through h5py's ``fileobj`` driver on a :class:`JournaledFile`, which appends the old content of committed bytes to a
journal beside the file before HDF5 overwrites them, and commits by deleting the journal; the next writable open
rolls an interrupted operation back (:func:`recover`).

Design: docs/design/h5df.md ("A torn flush, closed by an undo journal")."""

from __future__ import annotations

import bisect
import errno
import os
import struct
import threading
import zlib

from ..._os.locks import Owner, hdf5_flock
from ...errors import DafFormatError, DafStorageError

MAGIC = b"PYDAF-H5DF-UNDO-1\n"
_HEADER = struct.Struct("<QI")  # committed size, CRC-32 of MAGIC and the size
_RECORD = struct.Struct("<QQI")  # offset, length, CRC-32 of offset, length and the saved bytes
_WRITE_CHUNK = 1 << 30  # (Linux writes at most ~2 GiB per call)


def journal_path(path: str) -> str:
    """Where the undo journal of the HDF5 file ``path`` lives: beside the file its path resolves to (so any path to
    it, through symbolic links, finds the same journal), named after it, hidden.

    Example:
        >>> journal_path("/data/cells.h5df")
        '/data/.cells.h5df.pydaf-undo'
    """
    real = os.path.realpath(path)
    folder, name = os.path.split(real)
    return os.path.join(folder, f".{name}.pydaf-undo")


def _read_journal(journal: str, path: str) -> tuple[int, list[tuple[int, bytes]]] | None:
    """The committed size and the complete records of a journal, or None if its header was cut short (then no byte
    of the file was overwritten yet)."""
    with open(journal, "rb") as handle:
        data = handle.read()
    if len(data) < len(MAGIC) + _HEADER.size:
        return None
    if not data.startswith(MAGIC):
        raise DafFormatError(f"the undo journal: {journal}\nof the H5df file: {path}\nis not a pydaf journal")
    size, checksum = _HEADER.unpack_from(data, len(MAGIC))
    if checksum != zlib.crc32(data[:len(MAGIC) + 8]):
        raise DafFormatError(f"the undo journal: {journal}\nof the H5df file: {path}\nhas a corrupt header")
    records = []
    position = len(MAGIC) + _HEADER.size
    while position + _RECORD.size <= len(data):
        offset, length, checksum = _RECORD.unpack_from(data, position)
        start = position + _RECORD.size
        saved = data[start:start + length]
        if len(saved) != length or checksum != zlib.crc32(saved, zlib.crc32(data[position:position + 16])):
            break  # the record being written when the writer was killed: its bytes were not overwritten
        records.append((offset, saved))
        position = start + length
    return size, records


def recover(path: str, *, writable: bool) -> None:
    """Roll the HDF5 file ``path`` back to its last commit if a killed writer left an undo journal (the caller holds
    the file's exclusive lock). A read-only open only checks: if the journal saved any byte (so the file may hold a
    torn flush), it raises :class:`DafFormatError` asking for a writable open, which repairs.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> recover(path, writable=True)  # no journal: nothing to do
    """
    journal = journal_path(path)
    if not os.path.lexists(journal):
        return
    if os.path.islink(journal) or not os.path.isfile(journal):
        raise DafFormatError(f"the undo journal: {journal}\nof the H5df file: {path}\nis not a regular file")
    content = _read_journal(journal, path)
    if not writable:
        if content is not None and content[1]:
            raise DafFormatError(f"the H5df file: {path}\nwas left by a writer killed while it wrote (its undo "
                                 f"journal: {journal} is pending)\nopen it once in mode r+ to repair it (a read-only "
                                 "open never writes)")
        return  # nothing was overwritten: the file is as its last commit left it (maybe with unused bytes at its end)
    if content is not None:
        size, records = content
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            for offset, saved in records:
                _write_all(fd, memoryview(saved), offset)
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)
    os.unlink(journal)


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
                os.ftruncate(self._fd, size)
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
                _write_all(self._fd, data, offset)
            except BaseException as error:
                self._failure = self._failure or error
                raise

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
                elif self._shrink_to is not None and self._shrink_to < os.fstat(self._fd).st_size:
                    os.ftruncate(self._fd, self._shrink_to)  # (nothing pending: the file is as committed)
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
        header = MAGIC + struct.pack("<Q", self._committed_size)
        header += struct.pack("<I", zlib.crc32(header))
        _write_all(fd, memoryview(header), 0)
        self._journal_fd = fd
        self._journal_length = len(header)
