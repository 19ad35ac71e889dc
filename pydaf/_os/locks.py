"""Locks between processes and the registry of the files a process has open: one module for every format.

:func:`hold_lock` holds this process's :class:`FileLock` of a file (one per file identity; shared and exclusive holds
counted; an OFD lock, atomically up- and downgraded, or a ``flock`` for a directory), naming the holder's pid in the
one :func:`locked_message`. **One wait policy**: every format waits up to :data:`LOCK_WAIT_SECONDS` (2 s), then
refuses. Hand-overs between processes take milliseconds and refusing at once made them spurious errors; the bound
keeps what refusing at once was for (no open hangs on a writer that holds a data set for hours, none deadlocks, the
caller retries). :class:`ProcessRegistry` keeps open files by identity, emptied in a forked child by the one fork
handler here; :class:`Owner` is the one pid check. Details: docs/design/core.md, "Locks between processes".
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import threading
import time
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import DafLockedError
from .maps import FileKey

#: How long taking a lock waits for another process's conflicting lock before raising :class:`~pydaf.DafLockedError`
#: (every format; read when waiting, so a test may lower it).
LOCK_WAIT_SECONDS = 2.0

_DATA_END = 1 << 62  # the locked range is [0, _DATA_END): far past any file's data (HDF5's and ZIP's offsets)
_PID_BASE = _DATA_END  # a holder's pid is a lock on the byte _PID_BASE + pid (of the same kind as its lock)
_PID_SPACE = 1 << 23  # (Linux pids are below 2**22)
_FLOCK = "hhqqi"  # struct flock: type, whence, start, length, pid
_CONFLICT = (errno.EAGAIN, errno.EACCES)


class Owner:
    """The process that created an object: descriptors and locks it holds are that process's only (a forked child
    inherits the objects, never the right to release or write through them).

    Example:
        >>> Owner().is_current
        True
    """

    __slots__ = ("pid",)

    def __init__(self) -> None:
        self.pid = os.getpid()

    @property
    def is_current(self) -> bool:
        """Whether this process is the owner."""
        return os.getpid() == self.pid

    def disown(self) -> None:
        """Make no process the owner (a forked child's copy of its parent's object)."""
        self.pid = -1


def close_descriptor(fd: int, owner: Owner) -> None:
    """Close ``fd`` if this process owns it (a forked child never closes its parent's: for an OFD lock that would be
    harmless, for a journal's descriptor it would not).

    Example:
        >>> fd = os.open(os.devnull, os.O_RDONLY)
        >>> close_descriptor(fd, Owner())
    """
    if fd >= 0 and owner.is_current:
        try:
            os.close(fd)
        except OSError:
            pass


def locked_message(what: str, path: str, *, exclusive: bool, holder: int | None, note: str = "") -> str:
    """The one message of a lock held by another process (``holder`` its pid, None if unknown).

    Example:
        >>> print(locked_message("H5df file", "/data/x.h5df", exclusive=True, holder=42))
        can't write the H5df file: /data/x.h5df
        while another process has it open (pid: 42)
        (it is locked; waited 2.0 s: retry once that process has closed it)
    """
    action, state = ("write", "has it open") if exclusive else ("read", "is writing it")
    pid = "unknown" if holder is None else str(holder)
    return (f"can't {action} the {what}: {path}\nwhile another process {state} (pid: {pid})\n(it is locked; waited "
            f"{LOCK_WAIT_SECONDS} s: retry once that process has closed it{note})")


class FileLock:
    """This process's lock on one file or directory (get it with :func:`file_lock`): exclusive while any exclusive
    hold is alive, shared while only shared ones are, released when none is.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x")
        >>> open(path, "w").close()
        >>> lock = file_lock(path, what="file")
        >>> reader = lock.hold(exclusive=False); writer = lock.hold(exclusive=True)
        >>> lock.mode, writer.first
        ('exclusive', True)
        >>> writer.release(); lock.mode
        'shared'
        >>> reader.release(); lock.closed
        True
    """

    def __init__(self, key: FileKey, fd: int, path: str, what: str, note: str = "") -> None:
        # (the descriptor is this lock's from the first statement: if the rest is interrupted, e.g. by Ctrl-C, the
        # finalizer closes it once, and the caller, which gave it away, does not close it again)
        self._owner = Owner()
        self._closer = weakref.finalize(self, close_descriptor, fd, self._owner)
        self.key = key
        self.path = path
        self.what = what
        self.note = note
        self.is_directory = stat.S_ISDIR(os.fstat(fd).st_mode)
        #: Serialises the writes of this process's handles on the file (the lock keeps other processes out).
        self.mutex = threading.RLock()
        self._fd = fd
        self._counts = threading.Lock()
        self._shared = 0
        self._exclusive = 0
        self._mode = fcntl.F_UNLCK

    @property
    def closed(self) -> bool:
        """Whether the lock's descriptor is closed (once no hold is left; a new one is then made)."""
        return self._fd < 0

    @property
    def mode(self) -> str:
        """``exclusive``, ``shared`` or ``unlocked``."""
        return {fcntl.F_WRLCK: "exclusive", fcntl.F_RDLCK: "shared"}.get(self._mode, "unlocked")

    def hold(self, *, exclusive: bool, wait: float | None = None) -> LockHold:
        """Take (or share) the lock for one more holder, waiting up to ``wait`` seconds (default
        :data:`LOCK_WAIT_SECONDS`) for another process's conflicting lock; released when the hold is dropped."""
        with self._counts:
            if self.closed or not self._owner.is_current:
                raise _ClosedLock(self.path)  # (its last hold was just released: :func:`hold_lock` makes a new one)
            first = False
            if exclusive and self._mode != fcntl.F_WRLCK:
                self._take(fcntl.F_WRLCK, wait)
                first = True
            elif not exclusive and self._mode == fcntl.F_UNLCK:
                self._take(fcntl.F_RDLCK, wait)
            if exclusive:
                self._exclusive += 1
            else:
                self._shared += 1
        return LockHold(self, exclusive, first)

    def release(self, exclusive: bool) -> None:
        """Give up one hold (see :class:`LockHold`): the last one closes the descriptor (releasing the lock); the last
        exclusive one of a lock still shared converts it to shared (atomically, for a file)."""
        if not self._owner.is_current:
            return  # an inherited lock is the parent's: a forked child must never release it
        with _locks.mutex, self._counts:
            if self.closed:
                return
            if exclusive:
                self._exclusive -= 1
            else:
                self._shared -= 1
            if not self._exclusive and not self._shared:
                _locks.discard(self.key, self)
                self._closer()  # (closing the only descriptor of the lock releases it)
                self._fd = -1
                self._mode = fcntl.F_UNLCK
            elif not self._exclusive and self._mode == fcntl.F_WRLCK:
                self._set(fcntl.F_RDLCK)

    def _take(self, kind: int, wait: float | None) -> None:
        deadline = time.monotonic() + (LOCK_WAIT_SECONDS if wait is None else wait)
        while True:
            try:
                self._set(kind)
                return
            except OSError as error:
                if error.errno not in _CONFLICT:
                    raise
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
        raise DafLockedError(locked_message(self.what, self.path, exclusive=kind == fcntl.F_WRLCK,
                                            holder=self._holder(kind), note=self.note))

    def _set(self, kind: int) -> None:
        if self.is_directory:
            if kind != fcntl.F_WRLCK:
                raise ValueError(f"a directory lock is exclusive only: {self.path}")
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, 0, _DATA_END, 0))
            try:  # (the holder's name for a refused process's message: best effort)
                fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK,
                            struct.pack(_FLOCK, kind, os.SEEK_SET, _PID_BASE + os.getpid(), 1, 0))
            except OSError:
                pass
        self._mode = kind

    def _holder(self, kind: int) -> int | None:
        """The pid of a process holding a lock that conflicts with ``kind`` (None if unknown)."""
        try:
            if self.is_directory:
                return _flock_holder(self._fd)
            probe = struct.pack(_FLOCK, kind, os.SEEK_SET, _PID_BASE, _PID_SPACE, 0)
            found, _, start, _, _ = struct.unpack(_FLOCK, fcntl.fcntl(self._fd, fcntl.F_OFD_GETLK, probe))
        except OSError:
            return None
        return None if found == fcntl.F_UNLCK else start - _PID_BASE


class LockHold:
    """One holder's share of a :class:`FileLock`, released when this object is garbage (or by :meth:`release`).
    ``first`` tells whether this hold made the lock exclusive (so the holder recovers what a killed writer left)."""

    def __init__(self, lock: FileLock, exclusive: bool, first: bool) -> None:
        self.lock = lock
        self.exclusive = exclusive
        self.first = first
        self._release = weakref.finalize(self, lock.release, exclusive)

    @property
    def is_current(self) -> bool:
        """Whether the hold is this process's (not one a forked child inherited) and not released."""
        return self._release.alive and self.lock._owner.is_current

    def release(self) -> None:
        """Release the share now (once: the garbage collector then has nothing left to release)."""
        self._release()


def _flock_holder(fd: int) -> int | None:
    """The pid ``/proc/locks`` gives for a ``flock`` on the file ``fd`` is open on, other than this process's."""
    status = os.fstat(fd)
    identity = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    with open("/proc/locks") as locks:
        for line in locks:
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == identity and fields[4] != str(os.getpid()):
                return int(fields[4]) if fields[4].isdigit() else None
    return None


class _ClosedLock(Exception):
    """A lock whose last hold was released between finding it and holding it."""


def file_lock(path: str, *, what: str, note: str = "", open_descriptor: Callable[[], int] | None = None) -> FileLock:
    """This process's lock of a file or directory (one per file identity: two descriptors of one process would
    conflict), made if none is alive. ``what`` names it in messages (``H5df file``), ``note`` ends them;
    ``open_descriptor`` opens it (default: read-write, or read-only for a directory or a read-only file). Hold it
    with :func:`hold_lock`.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> file_lock(folder, what="directory") is file_lock(folder, what="directory")
        True
    """
    fd = open_descriptor() if open_descriptor is not None else _open(path)
    try:
        status = os.fstat(fd)
        key = (status.st_dev, status.st_ino)
        with _locks.mutex:
            lock = _locks.get(key)
            if lock is None or lock.closed:
                owned, fd = fd, -1  # (the lock's from here, even if making it is interrupted: see FileLock)
                lock = FileLock(key, owned, path, what, note)
                _locks.add(key, lock)
            return lock
    finally:
        if fd >= 0:
            os.close(fd)


def hold_lock(path: str, *, exclusive: bool, what: str, note: str = "", wait: float | None = None,
              open_descriptor: Callable[[], int] | None = None) -> LockHold:
    """One more shared or exclusive hold of this process's lock of a file or directory (see :func:`file_lock` and
    :meth:`FileLock.hold`).

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> first = hold_lock(folder, exclusive=True, what="directory")
        >>> second = hold_lock(folder, exclusive=True, what="directory")
        >>> first.first, second.first, first.lock is second.lock
        (True, False, True)
    """
    while True:
        lock = file_lock(path, what=what, note=note, open_descriptor=open_descriptor)
        try:
            return lock.hold(exclusive=exclusive, wait=wait)
        except _ClosedLock:
            continue


def _open(path: str) -> int:
    if os.path.isdir(path):
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except PermissionError:  # a read-only file can only be read (and so only needs a shared lock)
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def hdf5_flock(fd: int, path: str) -> None:
    """Take, shared, the ``flock`` HDF5's own driver takes on a file it opens (exclusively, to write): it keeps every
    other HDF5 writer (Julia, h5py) out, yet lets plain h5py read the file in this process. Raises
    :class:`~pydaf.DafLockedError` at once (HDF5 programs don't wait either), naming the holder.

    Example:
        >>> import tempfile
        >>> fd = os.open(tempfile.mkstemp()[1], os.O_RDWR)
        >>> hdf5_flock(fd, "x.h5df"); os.close(fd)
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        holder = _flock_holder(fd) if error.errno in _CONFLICT else None
        raise DafLockedError(f"the H5df file: {path}\nis locked by another program (pid: {holder or 'unknown'}) "
                             f"({error})") from error


K = TypeVar("K")
V = TypeVar("V")


class ProcessRegistry(Generic[K, V]):
    """What this process has open, by file identity: weak values (an entry goes when its value is garbage), a mutex
    for the caller's look-up-or-open, and nothing in a forked child (whose descriptors and locks are its parent's:
    the fork handler, or the pid check of every access, empties it, giving ``after_fork`` the forgotten values).

    Example:
        >>> class Store: pass
        >>> stores: ProcessRegistry[tuple[int, int], Store] = ProcessRegistry("stores")
        >>> store = Store(); stores.add((1, 2), store)
        >>> stores.get((1, 2)) is store, stores.get((3, 4))
        (True, None)
    """

    def __init__(self, what: str, *, after_fork: Callable[[list[V]], None] | None = None) -> None:
        self.what = what
        #: Reentrant: the garbage collector may run a release (a finalizer) in a thread that holds it.
        self.mutex = threading.RLock()
        self._entries: dict[K, weakref.ref[V]] = {}
        self._owner = Owner()
        self._after_fork = after_fork
        _registries.add(self)

    def get(self, key: K | None) -> V | None:
        """The live value of ``key`` (None if none, or if ``key`` is None)."""
        self._check_process()
        reference = self._entries.get(key) if key is not None else None
        return None if reference is None else reference()

    def add(self, key: K, value: V) -> None:
        self._check_process()
        self._entries[key] = weakref.ref(value)

    def discard(self, key: K, value: V) -> None:
        """Forget ``key`` if it still names ``value``."""
        self._check_process()
        reference = self._entries.get(key)
        if reference is not None and reference() is value:
            del self._entries[key]

    def values(self) -> list[V]:
        self._check_process()
        return [value for reference in list(self._entries.values()) if (value := reference()) is not None]

    def _check_process(self) -> None:
        if not self._owner.is_current:
            self.forget_inherited()

    def forget_inherited(self) -> None:
        """In a forked child: forget the parent's entries (run by the fork handler)."""
        inherited = [value for reference in self._entries.values() if (value := reference()) is not None]
        self._entries = {}
        self.mutex = threading.RLock()  # (another thread of the parent may have held it at the fork)
        self._owner = Owner()
        if self._after_fork is not None:
            self._after_fork(inherited)


_registries: weakref.WeakSet[ProcessRegistry] = weakref.WeakSet()


def _disown(locks: list[FileLock]) -> None:
    for lock in locks:
        lock._owner.disown()


# This process's lock of each file, alive as long as any hold of it.
_locks: ProcessRegistry[FileKey, FileLock] = ProcessRegistry("locks", after_fork=_disown)


def _forget_inherited() -> None:
    for registry in list(_registries):
        registry.forget_inherited()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)


def process_is_alive(pid: int) -> bool:
    """Whether the process ``pid`` may still run (this process, or one that signal 0 reaches or is not allowed to
    reach): how a leftover named after its writer's process id is told from one of a live writer.

    Example:
        >>> import os
        >>> process_is_alive(os.getpid()), process_is_alive(0), process_is_alive(-5)
        (True, False, False)
    """
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True
