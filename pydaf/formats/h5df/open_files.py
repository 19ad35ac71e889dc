"""The HDF5 files this process has open through pydaf, shared by identity (one handle per file, as Julia's), each
with this process's inter-process lock on it, its undo journal when writable, and their fork and exit handling."""

from __future__ import annotations

import atexit
import gc
import os
import re
import threading
import weakref
from typing import Any

import h5py
from h5py import h5f, h5fd, h5p

from ..._os.files import require_regular_file
from ..._os.locks import LOCK_WAIT_SECONDS, FileLock, LockHold, ProcessRegistry, hold_lock
from ..._os.maps import FileKey, MapRetainer, detach_region, file_key
from ...errors import (
    DafFormatError,
    DafLockedError,
    DafModeError,
)
from .global_heap import check_string_heaps
from .undo_journal import JournaledFile, recover

ALIGNMENT = 8

__all__ = ["ALIGNMENT", "LOCK_WAIT_SECONDS", "force_rollback", "open_h5_file", "replace_open_file"]

# (ends the message of a refused open: readers' mapped arrays hold a shared lock too)
_LOCK_NOTE = ", and dropped the arrays it mapped from it"


# Every HDF5 file this process has open through pydaf, by identity (device, inode: a symbolic link, a hard link or a
# relative path is the same file), as Julia shares one handle per file. The record holds the HDF5 file, this process's
# lock on it, a mutex that serialises write operations to it (across all the data sets and handles in it), and the
# state (lock, cache, version counters) of each data set in it, shared by every handle on that data set. Its mutex is
# held while a file is looked up or opened, and while the last handle closes it.
def _forget_inherited_files(records: list[_OpenFile]) -> None:
    """In a forked child: the parent's HDF5 handles and locks are not this process's, nor its journaled files (which
    then write nothing; the child still closes them at its exit, see ``_close_files_at_exit``)."""
    for record in records:
        journal = record.journal
        if journal is not None:
            journal.abandon()
            _inherited_files.append(record)


_open_files: ProcessRegistry[FileKey, _OpenFile] = ProcessRegistry("H5df files", after_fork=_forget_inherited_files)

# What HDF5 says when its own lock (flock) conflicts with another program's (e.g. Julia writing the file).
_HDF5_LOCK_MESSAGE = "unable to lock file"


class _OpenFile:
    """What this process shares about one open HDF5 file (see ``_open_files``)."""

    def __init__(self, fid: h5f.FileID, key: FileKey, lock: FileLock | None, hold: LockHold | None,
                 journal: JournaledFile | None = None) -> None:
        self.fid = fid
        self.key = key
        self.lock = lock
        self.hold = hold
        # (weak: HDF5 holds the journaled file while the file is open, and closing the file releases it and its lock)
        self._journal = None if journal is None else weakref.ref(journal)
        self.writing = threading.RLock()
        self.states: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        #: The H5df handles opened on the file by path (``H5df.close`` closes the file when the last one closes,
        #: unless a caller still holds an ``h5py`` object of it), and the ``h5py.File`` objects handed out.
        self.handles = 0
        #: The H5df storages on the file (``H5dfFormat``), pointed at the new file when a reorder replaces it.
        self.formats: weakref.WeakSet[Any] = weakref.WeakSet()
        # (by identity: h5py objects of one file compare equal, so a WeakSet would keep one of them)
        self._files: weakref.WeakValueDictionary[int, h5py.File] = weakref.WeakValueDictionary()
        self.retained_maps = MapRetainer()  # (read-only maps reused after their arrays are dropped, while it is open)
        self._checked_heaps: set[tuple[int, int, tuple[int, int]]] = set()

    @property
    def file(self) -> h5py.File:
        file = h5py.File(self.fid)
        file._pydaf_open_file = self  # keeps this record (and so the lock) alive as long as the caller's file object
        self._files[id(file)] = file
        return file

    def close_unused(self) -> None:
        """Close the file (releasing its lock, see :meth:`close`) if no H5df handle is open on it and no caller holds
        an ``h5py`` object of it (``open_h5_file``'s files, their groups and datasets): called by the last
        ``H5df.close``. Otherwise the file stays open for them, and closes when they are garbage (as before)."""
        if self.handles or not self.fid.valid:
            return
        if len(self._files) or h5f.get_obj_count(self.fid, h5f.OBJ_ALL) > 1:
            gc.collect()  # (objects only a reference cycle still holds, e.g. a traceback's frames)
        with _open_files.mutex:  # (which an open holds while it hands the file out)
            if self.handles or len(self._files) or h5f.get_obj_count(self.fid, h5f.OBJ_ALL) > 1:
                return
            _open_files.discard(self.key, self)
        try:
            self.close()
        finally:
            if self.hold is not None:
                self.hold.release()

    @property
    def journal(self) -> JournaledFile | None:
        """The journaled file HDF5 writes this file through (None if read-only, opened by the caller, or closed)."""
        return None if self._journal is None else self._journal()

    def check_string_heaps(self, path: str, offset: int, count: int, what: str) -> None:
        """:func:`check_string_heaps`, once per string dataset while the file is not written: no other process can
        write it while it is open here (the locks), and every write here ends with :meth:`commit`, which forgets what
        was checked; the file's time and size are part of the key too. (Reading a 10,000-name vector again after
        ``empty_cache`` spent 15-20 ms walking its collections in Python.)"""
        status = os.stat(path)
        key = (offset, count, (status.st_mtime_ns, status.st_size))
        if key not in self._checked_heaps:
            check_string_heaps(path, offset, count, what)
            self._checked_heaps.add(key)

    def commit(self) -> None:
        """Flush HDF5's metadata, then commit the undo journal: the end of every write operation (so what was
        learned about the file, and the maps kept for reuse, which a write makes stale, go too)."""
        self._checked_heaps = set()
        self.retained_maps.clear()
        h5f.flush(self.fid)
        journal = self.journal
        if journal is not None:
            journal.commit()

    def close(self) -> None:
        """Close the HDF5 file and every object of it (which releases its journaled file)."""
        self.retained_maps.clear()
        if self.fid.valid:
            h5py.File(self.fid).close()

    def abandon(self) -> None:
        """Close a file whose flush failed and could not be undone: HDF5 can't flush through that handle again, so
        the next open must start afresh (rolling back, from the journal, whatever was written since the last
        commit). Handles still holding it fail from now on; arrays mapped from it keep their values."""
        with _open_files.mutex:
            _open_files.discard(self.key, self)
        try:
            self.close()
        except Exception:  # closing flushes again, which fails the same way; the journal stays for the next open
            pass

    def map_hold(self) -> LockHold | None:
        """A reader's share of the lock, for an array mapped from the file (None for files opened outside pydaf)."""
        return None if self.lock is None else self.lock.hold(exclusive=False)


# The parent's files a forked child inherited (and must close before it exits).
_inherited_files: list[_OpenFile] = []


@atexit.register
def _close_files_at_exit() -> None:
    """Close the files pydaf opened writable (through h5py's fileobj driver) while Python still runs: HDF5 would
    close them from its own exit handler, after the interpreter is gone, and calling into their file objects then
    crashes the process."""
    records = [*_open_files.values(), *_inherited_files]
    for record in records:
        if record is not None and record.journal is not None:
            try:
                record.close()
            except Exception:  # at exit, a file that can't close keeps its journal (rolled back on its next open)
                pass


def _file_access_list() -> h5p.PropFAID:
    fapl = h5p.create(h5p.FILE_ACCESS)
    fapl.set_alignment(1, ALIGNMENT)
    fapl.set_sieve_buf_size(0)
    return fapl


def _disable_evictions(fid: h5f.FileID) -> None:
    """Keep dirty HDF5 metadata in memory until pydaf flushes it at the end of each write operation: otherwise HDF5
    may write some of it at any moment, and a process killed then leaves a file whose metadata describes a half
    written property."""
    config = fid.get_mdc_config()
    config.incr_mode = config.flash_incr_mode = config.decr_mode = 0  # (HDF5 requires auto-resize off)
    config.evictions_enabled = False
    fid.set_mdc_config(config)


def _record_of(file: h5py.File) -> _OpenFile:
    """The record of a file: the one pydaf opened, or a new one (without a lock) for a file opened by the caller."""
    record = getattr(file, "_pydaf_open_file", None)
    if record is not None:
        return record
    key = file_key(file.filename)
    with _open_files.mutex:
        record = _open_files.get(key)
        if record is None or not record.fid.valid:  # (HDF5 itself shares one file per inode in a process)
            record = _OpenFile(file.id, key or (0, id(file)), None, None)
        return record


def open_h5_file(path: str, mode: str) -> h5py.File:
    """Open (or create) an HDF5 file with Daf's access properties; ``mode`` is an h5py mode (``r``, ``r+``, ``a``,
    ``w``). A file already open in this process (through any path to it) is shared (and must have been opened
    writable to be written). Opening takes the file's lock (shared to read, exclusive to write), waiting up to
    :data:`LOCK_WAIT_SECONDS` for another process's conflicting lock before raising :class:`DafLockedError`.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5")
        >>> open_h5_file(path, "w").mode
        'r+'
    """
    with _open_files.mutex:
        key = file_key(path)
        record = _open_files.get(key)
        if record is not None and record.fid.valid:
            if mode == "w":
                raise DafModeError(f"can't truncate the HDF5 file: {path}\nwhile it is open in this process")
            if mode != "r" and record.fid.get_intent() == h5f.ACC_RDONLY:
                raise DafModeError(f"the HDF5 file: {path}\nis already open read-only in this process")
            return record.file
        if key is None:
            if mode in ("r", "r+"):
                raise DafFormatError(f"missing H5df file: {path}")
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666))
        require_regular_file(path, what="the H5df file")  # (a directory, a FIFO: refused before any lock or open)
        hold = _hold_file_lock(path, exclusive=mode != "r")
        fid, journal = _open_locked(path, mode)
        if mode != "r":
            _disable_evictions(fid)
        record = _OpenFile(fid, hold.lock.key, hold.lock, hold, journal)
        _open_files.add(record.key, record)
        return record.file


def force_rollback(path: str) -> bool:
    """Roll the H5df file ``path`` back to its last commit with the undo journal a killed pydaf writer left, even
    though the file was changed since (by h5py, Julia...): those later changes are lost. This is the second way out
    of the refusal a writable open gives such a file (the first, keeping the file as it is, is deleting the journal).
    The journal must still be the file's (same device and inode) and whole. Takes the file's exclusive lock; returns
    whether a journal was applied.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> _ = open_h5_file(path, "w")
        >>> force_rollback(path)  # open in this process: refused
        Traceback (most recent call last):
        ...
        pydaf.errors.DafModeError: can't roll back the H5df file: ...
        while it is open in this process
    """
    with _open_files.mutex:
        key = file_key(path)
        if key is None:
            raise DafFormatError(f"missing H5df file: {path}")
        record = _open_files.get(key)
        if record is not None and record.fid.valid:
            raise DafModeError(f"can't roll back the H5df file: {path}\nwhile it is open in this process")
        hold = _hold_file_lock(path, exclusive=True)
        try:
            return recover(path, writable=True, force=True)
        finally:
            hold.release()


def _hold_file_lock(path: str, *, exclusive: bool) -> LockHold:
    """This process's lock of the file at ``path``, taken on the file the path names once it is held: a reorder in
    another process may rename a new file over it meanwhile (see :func:`replace_open_file`), and the old one's lock
    then guards nothing."""
    while True:
        hold = hold_lock(path, exclusive=exclusive, what="H5df file", note=_LOCK_NOTE)
        if file_key(path) in (hold.lock.key, None):
            return hold
        hold.release()


def replace_open_file(record: _OpenFile, path: str, hold: LockHold) -> None:
    """Point this process's open file ``record`` at the file now at ``path``, which a reorder wrote and renamed over
    it (``hold``: this process's exclusive lock of the new file, taken before the rename, so no other process has
    opened it since). The new file is opened writable, every H5df storage on the record is pointed at it, and the old
    file is closed (with every ``h5py`` object of it) and its lock released. Arrays mapped from the old file keep its
    values (and a share of its lock). The caller holds the record's write mutex and has committed the old file."""
    with _open_files.mutex:
        old_fid, old_key, old_hold = record.fid, record.key, record.hold
        fid, journal = _open_locked(path, "r+")
        _disable_evictions(fid)
        _open_files.discard(old_key, record)
        record.fid, record.key, record.lock, record.hold = fid, hold.lock.key, hold.lock, hold
        record._journal = None if journal is None else weakref.ref(journal)
        record._files = weakref.WeakValueDictionary()
        record.retained_maps.clear()
        record._checked_heaps = set()
        _open_files.add(record.key, record)
        for storage in list(record.formats):
            storage.reopen(record.file)
        if old_fid.valid:
            h5py.File(old_fid).close()
        if old_hold is not None:
            old_hold.release()


def _open_locked(path: str, mode: str) -> tuple[h5f.FileID, JournaledFile | None]:
    """Open the file (whose lock the caller holds): read-only through HDF5's own driver, writable through a
    :class:`JournaledFile` (rolling back first what a killed writer left half done)."""
    recover(path, writable=mode != "r")
    fapl = _file_access_list()
    encoded = os.fsencode(path)
    journal = None
    try:
        if mode == "r":
            return h5f.open(encoded, h5f.ACC_RDONLY, fapl=fapl), None
        create = mode == "w" or (mode == "a" and os.path.getsize(path) == 0)
        if create:
            detach_region(path)  # truncating the file would otherwise kill any array still mapping it
        journal = JournaledFile(path, truncate=create)
        fapl.set_fileobj_driver(h5fd.fileobj_driver, journal)
        if create:
            fid = h5f.create(encoded, h5f.ACC_TRUNC, fapl=fapl)
            journal.commit()
        else:
            fid = h5f.open(encoded, h5f.ACC_RDWR, fapl=fapl)
        return fid, journal
    except OSError as error:
        if journal is not None:
            journal.close()
        if _HDF5_LOCK_MESSAGE in str(error):
            raise DafLockedError(f"the H5df file: {path}\nis locked by another process\n({error})") from error
        stored_end = _interrupted_flush_end(path, str(error))
        if stored_end is not None:
            if mode == "r":
                raise DafFormatError(f"the H5df file: {path}\nwas left by a writer killed while it flushed (the file "
                                     f"ends at {os.path.getsize(path)} bytes, its metadata at {stored_end})\nopen it "
                                     "once in mode r+ to repair it (a read-only open never writes)") from error
            os.truncate(path, stored_end)
            return _open_locked(path, mode)
        raise DafFormatError(f"not a valid HDF5 file (truncated or corrupt?): {path}\n({error})") from error
    except BaseException:
        if journal is not None:
            journal.close()
        raise


def _interrupted_flush_end(path: str, message: str) -> int | None:
    """Where a file's metadata says it ends, if it is past its end only because a writer was killed between HDF5
    truncating the file (to drop free space at its end) and rewriting the superblock; else None. The missing bytes
    were free space, so extending the file with zeros (done by a writable open) repairs it."""
    match = re.search(r"truncated file: eof = (\d+), sblock->base_addr = 0, stored_eof = (\d+)", message)
    if match is None or int(match.group(1)) != os.path.getsize(path):
        return None
    return int(match.group(2))
