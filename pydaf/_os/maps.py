"""Memory maps of file regions that stay valid when the file changes under them.

Zero-copy readers hand out numpy arrays over maps of the file. If that data is later deleted (or overwritten, or the
file is truncated), HDF5 may reuse or cut off those bytes, and an array still held would silently change or crash
the process (SIGBUS). So every map is registered, and before storage releases a region, :func:`detach_region` turns
the live maps that cover it into private anonymous memory holding the same bytes (atomically with ``mremap`` on
Linux). Arrays keep their values and addresses; only data that is deleted while still in use is ever copied.

Maps are registered by the file's identity (device and inode), not its path. Detaching holds a strong reference to
every map it copies, so no other thread can unmap it meanwhile (docs/design/h5df.md).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DafFormatError, DafPathError

_PROT_READ, _PROT_WRITE = mmap.PROT_READ, mmap.PROT_WRITE
_MAP_PRIVATE, _MAP_ANONYMOUS = mmap.MAP_PRIVATE, mmap.MAP_ANONYMOUS
_MAP_FIXED = 0x10
_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_mremap = getattr(_libc, "mremap", None) if sys.platform.startswith("linux") else None
if _mremap is not None:
    _mremap.restype = ctypes.c_void_p
    _mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]


FileKey = tuple[int, int]
"""A file's identity: ``(st_dev, st_ino)``."""


def file_key(path: str | os.PathLike | int) -> FileKey | None:
    """The identity of a file (a path or an open descriptor), or ``None`` if it does not exist.

    Example:
        >>> file_key("/no/such/file") is None
        True
    """
    try:
        status = os.fstat(path) if isinstance(path, int) else os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENAMETOOLONG):  # (a planted link loop, a hostile path: typed)
            raise DafPathError(f"can't reach the path: {path}\n({os.strerror(error.errno)})") from None
        raise
    return status.st_dev, status.st_ino


# The state (lock, cache, version counters) of each data set open in this process, by (file identity, group).
_states: weakref.WeakValueDictionary[tuple[FileKey, str], Any] = weakref.WeakValueDictionary()
_states_lock = threading.RLock()


def shared_state(path: str, group: str | None, state: Any) -> Any:
    """The state shared by every handle on the data set stored at ``path`` (a file or directory, by identity, so any
    link to it counts) under ``group`` in this process: ``state`` if this is the first one (or the path is gone).

    Example:
        >>> import tempfile, threading
        >>> folder, first, second = tempfile.mkdtemp(), threading.Event(), threading.Event()
        >>> shared_state(folder, None, first) is first, shared_state(folder, None, second) is first
        (True, True)
    """
    key = file_key(path)
    if key is None:
        return state
    with _states_lock:
        return _states.setdefault((key, group or ""), state)


@dataclass
class _Map:
    file: FileKey
    array: weakref.ref[np.ndarray]
    address: int
    length: int
    start: int  # file offset of the first mapped byte
    writable: bool
    version: tuple[int, int]  # the file's (st_mtime_ns, st_size) when it was mapped
    detached: bool = False
    retainer: weakref.ref[MapRetainer] | None = None  # the retainer keeping it alive (see MapRetainer)


_maps: dict[FileKey, list[_Map]] = {}
_maps_by_address: weakref.WeakValueDictionary[int, _Map] = weakref.WeakValueDictionary()  # (of the whole map)
_maps_lock = threading.RLock()  # reentrant: a map dropped while it is held may run finalizers


def _keep(_: object) -> None:
    """The callback of a map's finalizer: holding its argument keeps that object alive as long as the map."""


class MapRetainer:
    """Keeps the most recently used read-only maps of one file alive after their last array is dropped (as
    ``empty_cache`` does), so mapping the same region again reuses the map and its page tables instead of faulting
    every page in anew: 5-6 ms for 80 MB on this VM, more than a numpy ``sum`` over the same bytes (3-4 ms;
    ``benchmarks/bench_kernels.py``, the ``(fresh map, every page read)`` rows). A map costs address space and page
    tables; its pages are the file's clean page cache, which the kernel reclaims under memory pressure as for any map.
    The owner (one per open file) drops them when it is garbage; :func:`detach_region` drops those of a region being
    released before anything else; beyond ``budget`` bytes the least recently used go first.

    Example:
        >>> import tempfile
        >>> retainer = MapRetainer(budget=1 << 20)
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     first = map_region(handle.name, 1, 3, writable=False, retainer=retainer)
        ...     address = first.__array_interface__["data"][0]
        ...     del first  # (the retainer keeps the map)
        ...     again = map_region(handle.name, 1, 3, writable=False, retainer=retainer)
        ...     again.__array_interface__["data"][0] == address, retainer.nbytes > 0
        (True, True)
    """

    def __init__(self, budget: int | None = None) -> None:
        self.budget = RETAINED_MAP_BYTES if budget is None else budget
        self._held: OrderedDict[int, np.ndarray] = OrderedDict()  # by address, least recently used first
        self.nbytes = 0

    def _use(self, entry: _Map, whole: np.ndarray) -> list[np.ndarray]:
        """Keep (or refresh) ``whole``, the array over ``entry``'s map; returns what it stops keeping (for the caller
        to drop outside ``_maps_lock``). Called under ``_maps_lock``."""
        owner = entry.retainer() if entry.retainer is not None else None
        if entry.length > self.budget or owner not in (None, self):
            return []
        if entry.address in self._held:
            self._held.move_to_end(entry.address)
            return []
        self._held[entry.address] = whole
        self.nbytes += entry.length
        entry.retainer = weakref.ref(self)
        dropped = []
        while self.nbytes > self.budget:
            _, oldest = self._held.popitem(last=False)
            self.nbytes -= oldest.size
            dropped.append(oldest)
        return dropped

    def _forget(self, entry: _Map) -> np.ndarray | None:
        """Stop keeping ``entry``'s map (called under ``_maps_lock``; the caller drops the result outside it)."""
        whole = self._held.pop(entry.address, None)
        if whole is not None:
            self.nbytes -= whole.size
        return whole

    def clear(self) -> None:
        """Stop keeping every map (each is unmapped once no array of it is left)."""
        with _maps_lock:
            held, self._held, self.nbytes = self._held, OrderedDict(), 0
        del held  # (outside the lock: see detach_region)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


#: How many bytes of maps each open file keeps alive for reuse (a quarter of physical memory, at most 16 GB).
RETAINED_MAP_BYTES = min(_physical_memory() // 4, 16 << 30)


def map_region(path: str, offset: int, nbytes: int, *, writable: bool,
               keep_alive: Callable[[], object] | None = None, retainer: MapRetainer | None = None) -> np.ndarray:
    """A ``uint8`` array over ``nbytes`` of a file from ``offset`` (read-only unless ``writable``): :func:`map_file`
    of the file opened by its path.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     bytes(map_region(handle.name, 1, 3, writable=False))
        b'ell'
    """
    with open(path, "r+b" if writable else "rb") as handle:
        return map_file(handle.fileno(), path, offset, nbytes, writable=writable, keep_alive=keep_alive,
                        retainer=retainer)


def _reuse(retainer: MapRetainer, key: FileKey, version: tuple[int, int], offset: int,
           nbytes: int) -> np.ndarray | None:
    """A view of ``nbytes`` from ``offset`` of a live, attached, read-only, retained map of the file ``key`` made
    when the file had this ``version`` (so what was learned about its bytes still holds), or None."""
    dropped: list[np.ndarray] = []
    with _maps_lock:
        for entry in _maps.get(key, []):
            if (entry.writable or entry.detached or entry.retainer is None or entry.version != version
                    or offset < entry.start or offset + nbytes > entry.start + entry.length):
                continue
            whole = entry.array()
            if whole is None:
                continue
            dropped = retainer._use(entry, whole)
            view = whole[offset - entry.start:offset - entry.start + nbytes]
            break
        else:
            return None
    del dropped
    return view


def detach_region(path: str | int, offset: int = 0, nbytes: int | None = None) -> int:
    """Move the live maps that overlap ``[offset, offset + nbytes)`` of a file (a path or an open descriptor; all of
    it if ``nbytes`` is None) into private memory with the same contents. Returns how many maps were detached.

    Example:
        >>> detach_region("/no/such/file")
        0
    """
    key = file_key(path)
    if key is None:
        return 0
    end = None if nbytes is None else offset + nbytes

    def overlaps(entry: _Map) -> bool:
        return (end is None or entry.start < end) and offset < entry.start + entry.length

    # Retained maps of the region are dropped first: only maps some array still uses need their bytes copied.
    with _maps_lock:
        forgotten = [retainer._forget(entry) for entry in _maps.get(key, [])
                     if entry.retainer is not None and overlaps(entry)
                     and (retainer := entry.retainer()) is not None]
    del forgotten  # (outside the lock)
    detached = 0
    held: list[tuple[_Map, np.ndarray | None]] = []
    with _maps_lock:
        # Strong references: no other thread can unmap these while they are copied and remapped.
        held = [(entry, entry.array()) for entry in _maps.get(key, []) if not entry.detached]
        entries = [entry for entry, array in held if array is not None]
        for entry in entries:
            if overlaps(entry):
                _detach(entry)
                entry.detached = True
                detached += 1
                retainer = entry.retainer() if entry.retainer is not None else None
                if retainer is not None:  # (reused by another thread since it was forgotten above)
                    retainer._forget(entry)  # (``held`` keeps it alive past the lock)
        _maps[key] = [entry for entry in entries if not entry.detached]
    del held  # (outside the lock: dropping the last reference to a map unmaps it and runs its finalizers)
    return detached


def _detach(entry: _Map) -> None:
    protection = _PROT_READ | (_PROT_WRITE if entry.writable else 0)
    if _mremap is not None:
        copy = _libc.mmap(None, entry.length, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
        if copy in (None, _MAP_FAILED):
            raise MemoryError(f"can't allocate {entry.length} bytes to keep mapped data alive")
        ctypes.memmove(copy, entry.address, entry.length)
        _libc.mprotect(copy, entry.length, protection)
        moved = _mremap(copy, entry.length, entry.length, _MREMAP_MAYMOVE | _MREMAP_FIXED, entry.address)
        if moved == entry.address:
            return
    saved = ctypes.string_at(entry.address, entry.length)
    flags = _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED
    fixed = _libc.mmap(entry.address, entry.length, _PROT_READ | _PROT_WRITE, flags, -1, 0)
    if fixed != entry.address:
        raise OSError(ctypes.get_errno(), "can't replace a file map with private memory")
    ctypes.memmove(entry.address, saved, entry.length)
    _libc.mprotect(entry.address, entry.length, protection)


def live_maps(path: str) -> int:
    """How many maps of a file are alive and attached (for tests and diagnostics).

    Example:
        >>> live_maps("/no/such/file")
        0
    """
    key = file_key(path)
    if key is None:
        return 0
    with _maps_lock:
        return sum(1 for entry in _maps.get(key, []) if entry.array() is not None and not entry.detached)


MappedRegion = tuple[FileKey, tuple[int, int], int, int]
"""Where an array's bytes lie: ``(file identity, (st_mtime_ns, st_size) when mapped, offset, nbytes)``."""


def mapped_region(array: np.ndarray) -> MappedRegion | None:
    """Where the bytes of a contiguous ``array`` lie in a file, if it is a view of a live map made here that was not
    detached into private memory; ``None`` otherwise. Equal regions hold the same bytes as long as the file is not
    written (a writer replacing a file gives it a new identity, or at least a new time or size).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     region = mapped_region(map_region(handle.name, 1, 3, writable=False))
        ...     region[2:], mapped_region(np.zeros(3)) is None
        ((1, 3), True)
    """
    with _maps_lock:
        entry = _live_entry(array)
        if entry is None:
            return None
        offset = entry.start + array.__array_interface__["data"][0] - entry.address
        return entry.file, entry.version, offset, array.nbytes


def _live_entry(array: np.ndarray) -> _Map | None:
    """The live map made here, not detached, that ``array`` is a view of (found by the array owning its memory in
    one lookup, not by scanning every map), or None. Called under ``_maps_lock``."""
    owner = memory_owner(array)
    entry = _maps_by_address.get(owner.__array_interface__["data"][0])
    return None if entry is None or entry.detached or entry.array() is not owner else entry


def memory_owner(array: np.ndarray) -> np.ndarray:
    """The last array of a view's chain of bases (for a map made here, the array over the whole map): the memory of
    ``array`` lives, and is not reused, as long as this one does.

    Example:
        >>> whole = np.zeros(8)
        >>> memory_owner(whole[2:].view(np.uint8)[1:]) is whole
        True
    """
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


_MADV_WILLNEED = 3
_MADV_DONTNEED = 4
_MADV_POPULATE_WRITE = 23  # Linux 5.14+; older kernels refuse it (EINVAL) and pages fault in one by one as usual.
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def release_pages(array: np.ndarray) -> bool:
    """Drop the pages under ``array`` from this process's resident set if it lies in a live shared file map (the data
    stays in the file and the page cache; touching it again faults it back in). Anything else is left alone (private
    memory would be zeroed). Streaming passes over large mapped matrices call this on the parts they are done with, so
    the process's RSS stays bounded. Returns whether pages were released.

    Example:
        >>> release_pages(np.zeros(10))  # not a file map: nothing happens
        False
    """
    if not sys.platform.startswith("linux") or array.size == 0:
        return False
    start = array.__array_interface__["data"][0]
    end = start + array.nbytes
    page = mmap.PAGESIZE
    first = -(-start // page) * page
    last = end // page * page
    with _maps_lock:  # (held: a map detached meanwhile into private memory would be zeroed)
        if _live_entry(array) is None:
            return False
        if last > first:
            _libc.madvise(first, last - first, _MADV_DONTNEED)
    return True


def release_mapped_pages() -> int:
    """Drop from this process's resident set the pages of every live read-only file map made here (as
    :func:`release_pages` does for one array): a worker that reads piece after piece of large mapped matrices calls
    it after each, so its RSS, which memory limits measure, counts only what it holds. Arrays stay valid (the data is
    in the file and the page cache). Returns how many maps were released.

    Example:
        >>> release_mapped_pages() >= 0
        True
    """
    if not sys.platform.startswith("linux"):
        return 0
    released = 0
    with _maps_lock:
        for entries in _maps.values():
            for entry in entries:
                if entry.writable or entry.detached or entry.array() is None:
                    continue
                _libc.madvise(entry.address, entry.length, _MADV_DONTNEED)
                released += 1
    return released


def _advise_pages(array: np.ndarray, advice: int) -> None:
    """``madvise`` every page under ``array`` (Linux only; nothing for an empty array)."""
    if not sys.platform.startswith("linux") or array.size == 0:
        return
    start = array.__array_interface__["data"][0]
    page = mmap.PAGESIZE
    first = start // page * page
    last = -(-(start + array.nbytes) // page) * page
    _libc.madvise(first, last - first, advice)


def prefetch_pages(array: np.ndarray) -> None:
    """Ask the kernel to start reading the pages under ``array`` in the background (``MADV_WILLNEED``), so a pass
    that will read it soon finds them in the page cache instead of faulting them in one read-around at a time
    (harmless on memory that maps no file).

    Example:
        >>> prefetch_pages(np.zeros(10))
    """
    _advise_pages(array, _MADV_WILLNEED)


def populate_pages(array: np.ndarray) -> None:
    """Fault in (writable) all the pages under ``array`` in one call, before it is written. Writing a fresh map page
    by page takes one fault per 4 KB page, which is slow (~10 µs each on a virtual machine); populating in bulk is ~10
    times faster. Only for data that is about to be written in full (the pages become resident).

    Example:
        >>> populate_pages(np.zeros(10))  # harmless on any memory
    """
    _advise_pages(array, _MADV_POPULATE_WRITE)


def map_file(fd: int, path: str, offset: int, nbytes: int, *, writable: bool,
             keep_alive: Callable[[], object] | None = None, retainer: MapRetainer | None = None) -> np.ndarray:
    """A ``uint8`` array over ``nbytes`` from ``offset`` of a file already opened as ``fd`` (by a caller that must not
    reopen it by path: a path may lead elsewhere by then; ``path`` only names it in errors; ``fd`` may be closed
    afterwards). The map is read-only unless ``writable`` (which needs ``fd`` opened for writing), and registered by
    the file's identity. Regions past the end of the file are refused (touching them would kill the process). For a
    new map, ``keep_alive()`` is called and what it returns (e.g. a share of a lock on the file) is kept alive as
    long as the map is. With a ``retainer``, a read-only map it keeps (or any live read-only map made with one) that
    covers the region, of the file as it is now (same time and size), is reused, and a new one is kept.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     bytes(map_file(handle.fileno(), "hello.txt", 1, 3, writable=False))
        b'ell'
    """
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    status = os.fstat(fd)
    if offset < 0 or nbytes < 0 or offset + nbytes > status.st_size:
        raise DafFormatError(f"truncated file: {path}\n(data at offset {offset} of {nbytes} bytes ends past the "
                             f"end of the file, at {status.st_size} bytes)")
    key = (status.st_dev, status.st_ino)
    version = (status.st_mtime_ns, status.st_size)
    retained = None if writable else retainer  # (the retainer of a read-only map)
    if retained is not None:
        reused = _reuse(retained, key, version, offset, nbytes)
        if reused is not None:
            return reused
    region = mmap.mmap(fd, offset + nbytes - start, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ,
                       offset=start)
    whole = np.frombuffer(region, dtype=np.uint8)
    address = whole.__array_interface__["data"][0]
    entry = _Map(key, weakref.ref(whole), address, len(region), start, writable, version)
    kept = None if keep_alive is None else keep_alive()
    if kept is not None:
        weakref.finalize(whole, _keep, kept)
    dropped: list[np.ndarray] = []
    with _maps_lock:
        entries = [live for live in _maps.get(key, []) if live.array() is not None]
        entries.append(entry)
        _maps[key] = entries
        _maps_by_address[address] = entry
        if retained is not None:
            # Maps of the file as another writer left it are never reused: they go at once, not by the budget.
            dropped = [old for stale in entries if stale.version != version and stale.retainer is not None
                       and stale.retainer() is retained and (old := retained._forget(stale)) is not None]
            dropped += retained._use(entry, whole)
    del dropped  # (outside the lock: see detach_region)
    return whole[offset - start:]
