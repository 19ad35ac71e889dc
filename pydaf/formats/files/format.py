"""FilesDaf: Julia's directory format, v1.0 and v1.1 read, v1.1 written, flat files memory-mapped (the bytes of each
property are :mod:`pydaf.formats.files.layout`'s). The directory, the names and other processes may be hostile: files
are opened relative to their folder without following links, writes are atomic per property (temporaries and
backups renamed in), one writer process holds ``.daf.lock``, and every size is checked before a file is mapped.

Design: docs/design/files.md; the bytes: docs/spec/FORMATS.md §3."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..._os.byte_sources import BufferByteSource
from ..._os.locks import FileLock, LockHold, hold_lock
from ..._os.maps import map_file
from ..._os.write_errors import storage_error
from ...abc.format import CacheGroup, FormatWriter, StoredMatrix, StoredVector, parse_mode
from ...abc.reorder import ReorderThroughModule
from ...core.packed_settings import chunks_for, validated_packed_default
from ...errors import (
    DafClosedError,
    DafError,
    DafFormatError,
    DafMissingError,
    DafModeError,
    DafNameError,
    DafReadOnlyError,
)
from ...sparse import SparseMatrixCSC, SparseVector
from ...storage_types import StorageScalar, julia_name
from ..registry import FormatEntry, PersistentDaf, register_format
from . import reorder as _reorder
from .fileops import create_new as _create_new
from .fileops import lstat as _lstat
from .fileops import remove_entry as _remove_entry
from .fileops import replace as _replace
from .fileops import split_suffix as _split_suffix
from .fileops import unlink as _unlink
from .fileops import write_new as _write_new
from .layout import (
    MAJOR_VERSION,
    MINOR_VERSION,
    Files,
    axis_entries,
    decode_matrix,
    decode_matrix_columns,
    decode_vector,
    dense_json,
    empty_sparse_matrix_json,
    empty_sparse_vector_json,
    is_file_name,
    is_packed,
    is_text,
    line_count,
    lines,
    lines_bytes,
    matrix_files,
    parse_json,
    scalar_json,
    scalar_value,
    utf8,
    vector_files,
    verify_version,
)
from .layout import MATRIX_SUFFIXES as _MATRIX_SUFFIXES
from .layout import VECTOR_SUFFIXES as _VECTOR_SUFFIXES

#: The writer lock, an empty file in the root directory (Julia never lists the root, see docs/design/files.md).
LOCK_FILE = ".daf.lock"

_FOLDERS = ("scalars", "axes", "vectors", "matrices")
_ALL_SUFFIXES = tuple(sorted(set(_VECTOR_SUFFIXES + _MATRIX_SUFFIXES), key=len, reverse=True))  # longest first

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO can't hang us
_TEMPORARY = re.compile(r"\..*\.tmp-[0-9a-f]+", re.DOTALL)
_MAX_JSON_BYTES = 64 << 20  # descriptors are tiny; a scalar string may be large, but not gigabytes
_MAX_NAME_BYTES = 255 - len(".nzval.zip.backup") - 1  # a property's hidden backup must still be a valid file name
_MAX_AXIS_BYTES = 255 - len(".txt")  # (an axis has no backup: its file is replaced by a short-named temporary)
_READ_ATTEMPTS = 200  # a reader racing a writer re-reads; each attempt sleeps a little longer (≤ ~2 s in total)

_OUTSIDE_ERRORS = (errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO, errno.ENODEV)

T = TypeVar("T")


# Files, relative to the descriptor of their folder, never following links.


def _backup(file: str) -> str:
    return f".{file}.backup"


def _is_backup(folder: int, name: str) -> bool:
    """Whether a backup exists (pydaf's backups are regular files; anything else there was planted, and is ignored)."""
    status = _lstat(folder, name)
    return status is not None and stat.S_ISREG(status.st_mode)


def _open_file(folder: int, name: str) -> tuple[int, os.stat_result]:
    """A regular file, opened read-only, and its status; a link, folder, FIFO or device raises ``ELOOP``."""
    fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, "not a regular file", name)
    return fd, status


def _read_fd(fd: int, size: int, limit: int, name: str) -> bytes:
    """The ``size`` bytes of an open file (refused if more than ``limit``)."""
    if size > limit:
        raise DafFormatError(f"the file: {name}\nhas {size} bytes (more than the {limit} bytes expected of it)")
    chunks = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _recover_folder(folder: int, property_suffixes: tuple[str, ...]) -> None:
    """Finish what a crashed writer left in one folder: drop temporaries, and for each property with backups: drop
    them if its new descriptor was committed, else put them back (dropping the uncommitted new files)."""
    names = set(os.listdir(folder))
    backups: dict[str, set[str]] = {}
    for name in names:
        if not name.startswith("."):
            continue
        status = _lstat(folder, name)
        if status is None or stat.S_ISDIR(status.st_mode):
            continue
        if _TEMPORARY.fullmatch(name):
            _unlink(folder, name)
        elif name.endswith(".backup"):
            split = _split_suffix(name[1:-len(".backup")])
            if split is not None and split[1] in property_suffixes:
                if stat.S_ISREG(status.st_mode):
                    backups.setdefault(split[0], set()).add(split[1])
                else:
                    _unlink(folder, name)  # not one of pydaf's: a planted link, removed (never followed)
    for prefix, suffixes in backups.items():
        data = [suffix for suffix in _ALL_SUFFIXES if suffix in suffixes and suffix != ".json"]
        if ".json" in suffixes and prefix + ".json" in names:  # committed: the backups are stale
            for suffix in [*data, ".json"]:
                _unlink(folder, _backup(prefix + suffix))
        elif ".json" in suffixes:  # not committed: back to the old property
            for suffix in property_suffixes:
                if suffix in data:
                    _replace(folder, _backup(prefix + suffix), prefix + suffix)
                elif suffix != ".json" and prefix + suffix in names:
                    _unlink(folder, prefix + suffix)
            _replace(folder, _backup(prefix + ".json"), prefix + ".json")
        else:  # killed while moving the old data files aside: its descriptor is still in place
            for suffix in data:
                _replace(folder, _backup(prefix + suffix), prefix + suffix)


# The writer lock.


def _open_lock_file(root: int) -> int:
    """A descriptor of the writer lock file (created if missing) of the directory open as ``root``, never a link."""
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644, dir_fd=root)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, "not a regular file", LOCK_FILE)
    return fd


def _acquire_writer_lock(root: int, path: str) -> LockHold:
    """This process's hold of the writer lock of the directory open as ``root`` (shared by its writable opens);
    ``first`` tells whether this open took it (and so must recover what a crashed writer left)."""
    return hold_lock(path, exclusive=True, what="daf directory", note=_LOCK_NOTE,
                     open_descriptor=lambda: _open_lock_file(root))


_LOCK_NOTE = "; FilesDaf allows one writer process at a time, readers need no lock"


def _release(root: int, hold: LockHold | None) -> None:
    with suppress(OSError):
        os.close(root)
    if hold is not None:
        hold.release()  # (the process's last writable open releases the lock)


# Reading one property consistently.


@dataclass(frozen=True)
class _Property:
    """Where a property's files are: its folder (relative to the root), its name, and how errors name it."""

    folder: tuple[str, ...]
    name: str
    what: str
    suffixes: tuple[str, ...]

    @property
    def key(self) -> str:
        return "/".join((*self.folder, self.name))


class _Snapshot:
    """The files of one property as committed in one state of its folder, opened one by one.

    The descriptor is ``<name>.json``, or its ``.backup`` if an overwrite never committed (or is committing now). A
    data file is the plain one, or its ``.backup`` while an overwrite moves it aside, or only the backup when the
    descriptor is. :meth:`is_current` tells whether every file opened is still what the folder holds under the name
    it was opened by (so no writer changed the property meanwhile)."""

    def __init__(self, folder: int, property: _Property) -> None:
        self.folder = folder
        self.property = property
        self.state = self._state()
        self.opened: list[tuple[str, os.stat_result]] = []
        self.fds: list[int] = []
        self.vanished = False  # a file of the snapshot was gone when opened (replaced meanwhile)

    def _state(self) -> tuple[bool, bool] | None:
        """``(plain descriptor exists, backup descriptor exists)``, or None if neither does."""
        name = self.property.name + ".json"
        state = (_lstat(self.folder, name) is not None, _is_backup(self.folder, _backup(name)))
        return state if any(state) else None

    def descriptor(self, limit: int = _MAX_JSON_BYTES) -> bytes:
        assert self.state is not None
        name = self.property.name + ".json"
        opened = self._open(name if self.state[0] else _backup(name))
        if opened is None:  # deleted or renamed since: not current (even if a new one is in place by now), read again
            self.vanished = True
            raise OSError(errno.ENOENT, "vanished", name)
        return _read_fd(opened[0], opened[1].st_size, limit, name)

    def open(self, suffix: str) -> tuple[int, os.stat_result] | None:
        """The data file with this suffix, and its status (None if the committed state has none)."""
        assert self.state is not None
        file = self.property.name + suffix
        names = {(True, False): (file, _backup(file)), (True, True): (file,), (False, True): (_backup(file),)}
        for name in names[self.state]:
            opened = self._open(name)
            if opened is not None:
                return opened
        return None

    def _open(self, name: str) -> tuple[int, os.stat_result] | None:
        try:
            fd, status = _open_file(self.folder, name)
        except FileNotFoundError:
            return None
        self.fds.append(fd)
        self.opened.append((name, status))
        return fd, status

    def is_current(self) -> bool:
        if self.vanished or self._state() != self.state:
            return False
        for name, status in self.opened:
            now = _lstat(self.folder, name)
            if now is None or (now.st_ino, now.st_dev) != (status.st_ino, status.st_dev):
                return False
        return True

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


@dataclass
class _Pending:
    """The temporaries of an ``empty_*`` builder, renamed in when it is filled."""

    property: _Property
    files: list[tuple[str, str]] = field(default_factory=list)  # (suffix, temporary name)
    packed: bool = False  # (a packed dense builder: an in-memory buffer, written packed when filled, as Julia's)


class FilesFormat(ReorderThroughModule, FormatWriter):
    """The storage of a FilesDaf data set: a directory of plain files (see the module docstring)."""

    type_name = "FilesDaf"
    maps_files = True
    persistent = True

    def __init__(self, path: str, mode: str) -> None:
        writable, may_create, truncate = parse_mode(mode)
        self.path = path
        self.mode = mode
        self.is_writable = writable
        self._axis_lengths: dict[str, tuple[tuple[int, ...], int]] = {}
        self._pending: dict[str, _Pending] = {}  # the builders not yet filled, by property key
        self._lock: LockHold | None = None
        self._root = self._open_root(may_create)
        self._closer = weakref.finalize(self, _release, self._root, None)
        try:
            with self._doing("opening the directory"):
                self._open(writable, may_create, truncate)
        except BaseException:
            self._closer()
            raise

    def _open(self, writable: bool, may_create: bool, truncate: bool) -> None:
        is_daf = self._is_daf()
        if not is_daf and not may_create:
            raise DafFormatError(f"not a daf directory: {self.path}")
        if not is_daf:
            self._require_unused()
        if writable:
            self._lock = _acquire_writer_lock(self._root, self.path)
            first = self._lock.first
            self._closer.detach()
            self._closer = weakref.finalize(self, _release, self._root, self._lock)
            is_daf = self._is_daf()
            if is_daf and truncate:
                self._truncate()
            elif not is_daf:
                self._require_unused()
            if truncate or not is_daf:
                self._create()
            self._verify_version()
            if first:
                self._recover()
            _reorder.recover_at_open(self, first)  # (an interrupted reorder_axes is rolled back, with a warning)
            self._ensure_metadata()
        else:
            self._verify_version()
            _reorder.refuse_at_read_only_open(self)

    def _open_root(self, may_create: bool) -> int:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC  # the path itself is the caller's: links in it are fine
        try:
            try:
                return os.open(self.path, flags)
            except FileNotFoundError:
                if not may_create:
                    raise DafFormatError(f"not a daf directory: {self.path}\n(it does not exist)") from None
                os.makedirs(self.path, exist_ok=True)
                return os.open(self.path, flags)
        except NotADirectoryError:
            raise DafFormatError(f"not a directory: {self.path}") from None
        except DafError:
            raise
        except OSError as error:
            raise self._os_error(error, "opening the directory") from error

    def _is_daf(self) -> bool:
        status = _lstat(self._root, "daf.json")
        if status is not None and not stat.S_ISREG(status.st_mode):
            raise DafFormatError(f"not a daf directory: {self.path}\n(its daf.json is not a regular file)")
        return status is not None

    def _require_unused(self) -> None:
        """Refuse a directory that is not a Daf data set and holds anything but what an interrupted creation left."""
        for name in os.listdir(self._root):
            status = _lstat(self._root, name)
            if status is None or name == LOCK_FILE or _TEMPORARY.fullmatch(name) or (
                    name == "metadata.json" and stat.S_ISREG(status.st_mode)):
                continue
            if name in _FOLDERS and stat.S_ISDIR(status.st_mode):
                with self._folder((name,)) as folder:
                    if folder is None or not os.listdir(folder):
                        continue
            raise DafModeError(f"not a daf directory: {self.path}\n(it is a non-empty directory without daf.json; "
                               f"FilesDaf will not use or erase it in mode {self.mode})")

    def _truncate(self) -> None:
        """Mode ``w``: remove Daf's own files and folders (and nothing else); ``daf.json`` is rewritten last."""
        for name in os.listdir(self._root):
            if name in (*_FOLDERS, "metadata.json", "metadata.json.new", ".reorder.backup") or \
                    _TEMPORARY.fullmatch(name):
                _remove_entry(self._root, name)

    def _create(self) -> None:
        for name in _FOLDERS:
            with self._folder((name,), create=True):
                pass
        self._write_root_file("metadata.json", b"{}")
        self._write_root_file("daf.json", f'{{"version":[{MAJOR_VERSION},{MINOR_VERSION}]}}\n'.encode())

    def _write_root_file(self, name: str, data: bytes) -> None:
        _replace(self._root, _write_new(self._root, name, data), name)

    def _verify_version(self) -> None:
        what = "the daf.json"
        try:
            fd, status = _open_file(self._root, "daf.json")
        except FileNotFoundError:
            raise DafFormatError(f"not a daf directory: {self.path}") from None
        try:
            verify_version(parse_json(_read_fd(fd, status.st_size, 4096, "daf.json"), what),
                           f"the daf directory: {self.path}")
        finally:
            os.close(fd)

    def _recover(self) -> None:
        """Finish what a crashed writer left (see :func:`_recover_folder`); only the lock holder does this. Linked
        folders are left alone (and refused when used)."""
        for parts, suffixes in (((), ()), (("axes",), ()), *self._property_folders()):
            with self._folder(parts, links=False) as folder:
                if folder is not None:
                    _recover_folder(folder, suffixes)

    def _property_folders(self) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
        """Every folder of properties (real folders only: links are never followed), with its properties' suffixes."""
        yield ("scalars",), (".json",)
        for axis in self._subfolders(("vectors",)):
            yield ("vectors", axis), _VECTOR_SUFFIXES
        for rows_axis in self._subfolders(("matrices",)):
            for columns_axis in self._subfolders(("matrices", rows_axis)):
                yield ("matrices", rows_axis, columns_axis), _MATRIX_SUFFIXES

    def _subfolders(self, parts: tuple[str, ...]) -> list[str]:
        """The real sub-folders (links are skipped, never followed) of a folder (none if it is a link)."""
        with self._folder(parts, links=False) as folder:
            if folder is None:
                return []
            return sorted(name for name in os.listdir(folder) if not name.startswith(".") and is_text(name) and (
                status := _lstat(folder, name)) is not None and stat.S_ISDIR(status.st_mode))

    # Folders, names and errors.

    @contextmanager
    def _folder(self, parts: tuple[str, ...], *, create: bool = False, links: bool = True) -> Iterator[int | None]:
        """A descriptor of a folder of the data set (None if it is missing and not ``create``), opened part by part
        without following links: a link raises (``ELOOP``), or is taken as missing if not ``links``."""
        self._require_open()
        folder: int | None = self._root
        try:
            for part in parts:
                try:
                    child = os.open(part, _FOLDER_FLAGS, dir_fd=folder)
                except OSError as error:
                    if create and error.errno == errno.ENOENT:
                        with suppress(FileExistsError):
                            os.mkdir(part, 0o777, dir_fd=folder)
                        child = os.open(part, _FOLDER_FLAGS, dir_fd=folder)
                    elif error.errno == errno.ENOENT or (not links and error.errno in _OUTSIDE_ERRORS):
                        if folder is not None and folder != self._root:
                            os.close(folder)
                        folder = None
                        break
                    else:
                        raise
                if folder is not None and folder != self._root:
                    os.close(folder)
                folder = child
            if folder == self._root:
                folder = os.dup(self._root)
            yield folder
        finally:
            if folder is not None and folder != self._root:
                os.close(folder)

    def _os_error(self, error: OSError, doing: str) -> DafError:
        where = f"{doing}\nin the daf directory: {self.path}"
        if error.errno == errno.ENAMETOOLONG:
            result: DafError = DafNameError(f"{where}\n(a file name is too long: {error.filename})")
        elif error.errno in _OUTSIDE_ERRORS:
            result = DafFormatError(
                f"{where}\n({error.filename or 'a file'}: a symbolic link, or not the kind of file or folder FilesDaf "
                "expects; FilesDaf never follows links inside a data set)")
        elif error.errno == errno.ENOENT:
            result = DafFormatError(f"{where}\n(missing: {error.filename or 'a file'})")
        else:
            return storage_error(error, where)
        result.errno = error.errno  # type: ignore[attr-defined]
        return result

    @contextmanager
    def _doing(self, doing: str) -> Iterator[None]:
        """Turn operating system errors into Daf errors naming what was being done."""
        try:
            yield
        except DafError:
            raise
        except OSError as error:
            raise self._os_error(error, doing) from error

    def _name(self, name: Any, what: str) -> str:
        """Refuse a name that is not a single file name of Daf's (defense in depth: the writer layer checks names
        too), so no path built from it can leave its folder or clash with pydaf's hidden files."""
        if is_file_name(name):
            return name
        raise DafNameError(f"invalid {what} name: {name!r}\nfor the daf directory: {self.path}\n(FilesDaf names are "
                           "file names: non-empty UTF-8, not starting with '.', without '/' or NUL)")

    def _scalar(self, name: str) -> _Property:
        name = self._name(name, "scalar")
        return _Property(("scalars",), name, f"the scalar: {name}", (".json",))

    def _vector(self, axis: str, name: str) -> _Property:
        axis, name = self._name(axis, "axis"), self._name(name, "vector")
        return _Property(("vectors", axis), name, f"the vector: {name}\nof the axis: {axis}", _VECTOR_SUFFIXES)

    def _matrix(self, rows_axis: str, columns_axis: str, name: str) -> _Property:
        rows_axis, columns_axis = self._name(rows_axis, "axis"), self._name(columns_axis, "axis")
        name = self._name(name, "matrix")
        return _Property(("matrices", rows_axis, columns_axis), name,
                         f"the matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}",
                         _MATRIX_SUFFIXES)

    def _require_short(self, property: _Property) -> None:
        if len(property.name.encode("utf-8")) > _MAX_NAME_BYTES:
            raise DafNameError(f"the name of {property.what}\nis too long for the daf directory: {self.path}\n(at most "
                               f"{_MAX_NAME_BYTES} bytes, so its hidden backups are valid file names)")

    def _require_writable(self, what: str) -> FileLock:
        self._require_open()
        if not self.is_writable or self._lock is None:
            raise DafReadOnlyError(f"can't change {what}\nin the read-only daf directory: {self.path}")
        if not self._lock.is_current:
            raise DafModeError(f"can't change {what}\nin the daf directory: {self.path}\nthrough a writable FilesDaf "
                               "inherited by a forked process (which does not hold the writer lock); open it again")
        return self._lock.lock

    def format_default_name(self) -> str:
        return self.path

    def format_complete_path(self) -> str | None:
        return os.path.abspath(self.path)

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: FilesDaf")
        lines.append(f"{indent}path: {self.path}")
        lines.append(f"{indent}mode: {self.mode}")

    def format_close(self) -> None:
        """Drop what unfilled builders wrote (an overwrite keeps the old value), then close the directory and
        release the writer lock (this process's last writable handle releases the ``flock``). Arrays already
        returned stay valid: they keep their maps, never the lock. Idempotent."""
        if self._closer.alive and self._pending:
            self.format_discard_empty()
        self._closer()

    def _require_open(self) -> None:
        # (the descriptor of a closed root may already number another file: never use it)
        if not self._closer.alive:
            raise DafClosedError(f"the daf directory: {self.path}\nwas closed (reopen it to use it again)")

    # Existence and names.

    def _exists(self, where: Callable[[], _Property]) -> bool:
        """Whether a property exists (a name the storage could never hold is not found, as the contract asks)."""
        try:
            property = where()
        except DafNameError:
            return False
        with self._doing(f"looking for {property.what}"), self._folder(property.folder) as folder:
            if folder is None:
                return False
            file = property.name + property.suffixes[0]
            return _lstat(folder, file) is not None or (file.endswith(".json") and _is_backup(folder, _backup(file)))

    def _names(self, parts: tuple[str, ...], suffix: str, what: str) -> set[str]:
        """The names of the properties in a folder (tolerating a missing one, as git checkouts drop empty folders):
        files with the suffix, and the hidden backups of descriptors whose overwrite never committed."""
        with self._doing(f"listing {what}"), self._folder(parts) as folder:
            if folder is None:
                return set()
            names = set()
            for file in os.listdir(folder):
                if file.startswith(".") and suffix == ".json" and file.endswith(".json.backup") and _is_backup(
                        folder, file):
                    file = file[1:-len(".backup")]
                if file.endswith(suffix) and not file.startswith(".") and is_text(file) and len(file) > len(suffix):
                    names.add(file[:-len(suffix)])
            return names

    # Reading.

    def _read(self, property: _Property, decode: Callable[[_Snapshot], T]) -> T:
        """Decode a property from one consistent snapshot of its files; if a writer changed it meanwhile, again."""
        for attempt in range(_READ_ATTEMPTS):
            with self._doing(f"reading {property.what}"), self._folder(property.folder) as folder:
                if folder is None:
                    raise DafMissingError(f"missing {property.what}\nin the daf directory: {self.path}")
                snapshot = _Snapshot(folder, property)
                try:
                    if snapshot.state is None:
                        raise DafMissingError(f"missing {property.what}\nin the daf directory: {self.path}")
                    try:
                        value = decode(snapshot)
                    except (DafError, OSError):
                        if snapshot.is_current():
                            raise
                    else:
                        if snapshot.is_current():
                            return value
                finally:
                    snapshot.close()
            time.sleep(0.0001 * attempt)
        raise DafFormatError(f"{property.what}\nin the daf directory: {self.path}\nkept changing while it was read "
                             "(another process is writing it)")

    def _descriptor(self, snapshot: _Snapshot) -> Any:
        return parse_json(snapshot.descriptor(), snapshot.property.what)

    def _refuse_packed(self, descriptor: dict[str, Any], property: _Property) -> None:
        if is_packed(descriptor):
            raise DafFormatError(f"reordering packed (.zip) FilesDaf data is not supported yet\nfor the property: "
                                 f"{property.key}\nin the daf directory: {self.path}")

    def _byte_source(self, snapshot: _Snapshot, suffix: str) -> BufferByteSource:
        """A packed shard file of a property, mapped read-only (from the snapshot's open file)."""
        fd, size = self._data(snapshot, suffix)
        path = os.path.join(self.path, *snapshot.property.folder, snapshot.property.name + suffix)
        data = map_file(fd, path, 0, size, writable=False) if size else np.zeros(0, dtype=np.uint8)
        return BufferByteSource(path, data)

    def _data(self, snapshot: _Snapshot, suffix: str) -> tuple[int, int]:
        """An open data file of a property, and its size."""
        opened = snapshot.open(suffix)
        if opened is None:
            raise DafFormatError(f"missing data file: {snapshot.property.name}{suffix}\nof {snapshot.property.what}\n"
                                 f"in the daf directory: {self.path}")
        return opened[0], opened[1].st_size

    def _map(self, snapshot: _Snapshot, suffix: str, dtype: np.dtype,
             count: int | None) -> tuple[np.ndarray, CacheGroup]:
        """A read-only map of a data file of ``count`` elements (its size is checked first); ``count`` None means
        the whole file (v1.0 sparse components, whose size is their length)."""
        fd, size = self._data(snapshot, suffix)
        if count is None:
            if size % dtype.itemsize:
                raise self._size_error(snapshot, suffix, size, f"a multiple of {dtype.itemsize}")
            count = size // dtype.itemsize
        if size != count * dtype.itemsize:
            raise self._size_error(snapshot, suffix, size, str(count * dtype.itemsize))
        if count == 0:
            return np.empty(0, dtype=dtype), CacheGroup.MemoryData
        path = os.path.join(self.path, *snapshot.property.folder, snapshot.property.name + suffix)
        region = map_file(fd, path, 0, size, writable=False)
        return np.frombuffer(region, dtype=dtype, count=count), CacheGroup.MappedData

    def _size_error(self, snapshot: _Snapshot, suffix: str, size: int, expected: str) -> DafFormatError:
        return DafFormatError(f"the data file: {snapshot.property.name}{suffix}\nof {snapshot.property.what}\nin the "
                              f"daf directory: {self.path}\nhas {size} bytes instead of {expected}")

    def _text(self, snapshot: _Snapshot, suffix: str, count: int) -> np.ndarray:
        fd, size = self._data(snapshot, suffix)
        return lines(_read_fd(fd, size, size, snapshot.property.name + suffix), count,
                      f"{snapshot.property.what}\nin the daf directory: {self.path}")

    def _invalid(self, property: _Property, problem: str) -> DafFormatError:
        return DafFormatError(f"invalid {property.what}\nin the daf directory: {self.path}\n({problem})")

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return self._exists(lambda: self._scalar(name))

    def format_scalars_set(self) -> set[str]:
        return self._names(("scalars",), ".json", "the scalars")

    def format_get_scalar(self, name: str) -> StorageScalar:
        property = self._scalar(name)
        return self._read(property, lambda snapshot: scalar_value(self._descriptor(snapshot), property.what))

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        property = self._scalar(name)
        self._require_writable(property.what)
        self._store(property, [], scalar_json(value))

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        self._delete(self._scalar(name), for_set=for_set)

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return self._exists(lambda: _Property(("axes",), self._name(axis, "axis"), f"the axis: {axis}", (".txt",)))

    def format_axes_set(self) -> set[str]:
        return self._names(("axes",), ".txt", "the axes")

    def _axis_file(self, axis: str, read: Callable[[int, os.stat_result, str], T]) -> T:
        axis = self._name(axis, "axis")
        what = f"the axis: {axis}"
        with self._doing(f"reading {what}"), self._folder(("axes",)) as folder:
            if folder is None:
                raise DafMissingError(f"missing {what}\nin the daf directory: {self.path}")
            try:
                fd, status = _open_file(folder, axis + ".txt")
            except FileNotFoundError:
                raise DafMissingError(f"missing {what}\nin the daf directory: {self.path}") from None
            try:
                return read(fd, status, f"{what}\nin the daf directory: {self.path}")
            finally:
                os.close(fd)

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        def read(fd: int, status: os.stat_result, what: str) -> np.ndarray:
            data = _read_fd(fd, status.st_size, status.st_size, axis + ".txt")
            return axis_entries(data, data.count(b"\n"), what)

        return self._axis_file(axis, read), CacheGroup.MemoryData

    def format_axis_length(self, axis: str) -> int:
        def read(fd: int, status: os.stat_result, what: str) -> int:
            version = (status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns)
            cached = self._axis_lengths.get(axis)
            if cached is not None and cached[0] == version:
                return cached[1]
            length = line_count(_read_fd(fd, status.st_size, status.st_size, axis + ".txt"), what)
            self._axis_lengths[axis] = (version, length)
            return length

        return self._axis_file(axis, read)

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        axis = self._name(axis, "axis")
        what = f"the axis: {axis}"
        if len(axis.encode("utf-8")) > _MAX_AXIS_BYTES:  # (checked before anything is written)
            raise DafNameError(f"the name of {what}\nis too long for the daf directory: {self.path}\n(at most "
                               f"{_MAX_AXIS_BYTES} bytes of UTF-8, so its file axes/<axis>.txt is a valid file name)")
        lock = self._require_writable(what)
        data = lines_bytes(entries, f"the entries of {what}")
        with lock.mutex, self._doing(f"adding {what}"), self._folder(("axes",), create=True) as axes:
            assert axes is not None
            temporary = _write_new(axes, axis + ".txt", data)
            try:
                # Fresh folders: anything in them is a leftover of an interrupted delete_axis of an earlier axis.
                self._fresh_folder(("vectors",), axis)
                self._fresh_folder(("matrices",), axis)
                for other in self.format_axes_set() | {axis}:
                    self._fresh_folder(("matrices", axis), other)
                    self._fresh_folder(("matrices", other), axis)
                _replace(axes, temporary, axis + ".txt")  # the axis exists from here
            except BaseException:
                _unlink(axes, temporary)
                raise
            self._update_metadata(f"axes/{axis}", f'{{"format":"axis","n_entries":{entries.shape[0]}}}',
                                  rebuild=False)

    def _fresh_folder(self, parts: tuple[str, ...], name: str) -> None:
        with self._folder(parts, create=True) as folder:
            assert folder is not None
            _remove_entry(folder, name)
            os.mkdir(name, 0o777, dir_fd=folder)

    def format_delete_axis(self, axis: str) -> None:
        axis = self._name(axis, "axis")
        what = f"the axis: {axis}"
        lock = self._require_writable(what)
        with lock.mutex, self._doing(f"deleting {what}"):
            with self._folder(("axes",)) as axes:
                if axes is not None:
                    _unlink(axes, axis + ".txt")  # the axis stops existing here
            self._axis_lengths.pop(axis, None)
            for parts in (("vectors",), ("matrices",), *(("matrices", rows) for rows in self._subfolders(
                    ("matrices",)))):
                with self._folder(parts) as folder:
                    if folder is not None:
                        _remove_entry(folder, axis)
            self._update_metadata(None, None, rebuild=True)

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        return self._exists(lambda: self._vector(axis, name))

    def format_vectors_set(self, axis: str) -> set[str]:
        axis = self._name(axis, "axis")
        return self._names(("vectors", axis), ".json", f"the vectors of the axis: {axis}")

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        length = self.format_axis_length(axis)
        return self._read(self._vector(axis, name), lambda snapshot: self._decode_vector(snapshot, length))

    def _decode_vector(self, snapshot: _Snapshot, length: int) -> tuple[StoredVector, CacheGroup | None]:
        return decode_vector(_SnapshotSource(self, snapshot), self._descriptor(snapshot), length)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        property = self._vector(axis, name)
        self._require_writable(property.what)
        self._store(property, *vector_files(vector, self.format_axis_length(axis), property.what,
                                            packed=self.is_packed))

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        self._delete(self._vector(axis, name), for_set=for_set)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        property = self._start_empty(self._vector(axis, name))
        length = self.format_axis_length(axis)
        if chunks_for(self.is_packed, (length,), dtype) is not None:  # (Julia's: in memory, packed when filled)
            self._pending[property.key].packed = True
            return np.zeros(length, dtype=dtype)
        return self._empty_file(property, ".data", dtype, length)

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        property = self._vector(axis, name)
        if self._pending[property.key].packed:
            self._pending.pop(property.key)
            self._store(property, *vector_files(filled, filled.shape[0], property.what, packed=True))
            return
        self._finish_empty(property, dense_json(julia_name(filled.dtype)))

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        property = self._start_empty(self._vector(axis, name))
        return self._empty_file(property, ".nzind", indtype, nnz), self._empty_file(property, ".nzval", dtype, nnz)

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._finish_empty(self._vector(axis, name), empty_sparse_vector_json(filled))

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return self._exists(lambda: self._matrix(rows_axis, columns_axis, name))

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        rows_axis, columns_axis = self._name(rows_axis, "axis"), self._name(columns_axis, "axis")
        return self._names(("matrices", rows_axis, columns_axis), ".json",
                           f"the matrices of the rows axis: {rows_axis}\nand the columns axis: {columns_axis}")

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return self._read(self._matrix(rows_axis, columns_axis, name),
                          lambda snapshot: self._decode_matrix(snapshot, shape))

    def _decode_matrix(self, snapshot: _Snapshot, shape: tuple[int, int]) -> tuple[StoredMatrix, CacheGroup | None]:
        return decode_matrix(_SnapshotSource(self, snapshot), self._descriptor(snapshot), shape)

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return self._read(self._matrix(rows_axis, columns_axis, name), lambda snapshot: decode_matrix_columns(
            _SnapshotSource(self, snapshot), self._descriptor(snapshot), shape, columns))

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        property = self._matrix(rows_axis, columns_axis, name)
        self._require_writable(property.what)
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        self._store(property, *matrix_files(matrix, shape, property.what, packed=self.is_packed))

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        self._delete(self._matrix(rows_axis, columns_axis, name), for_set=for_set)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        property = self._start_empty(self._matrix(rows_axis, columns_axis, name))
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        if chunks_for(self.is_packed, shape, dtype) is not None:
            # (Julia streams it column by column into the shard, with set_matrix!'s chunks: the same file)
            self._pending[property.key].packed = True
            return np.zeros(shape, dtype=dtype, order="F")
        return self._empty_file(property, ".data", dtype, shape[0] * shape[1]).reshape(shape, order="F")

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        property = self._matrix(rows_axis, columns_axis, name)
        if self._pending[property.key].packed:
            self._pending.pop(property.key)
            self._store(property, *matrix_files(filled, filled.shape, property.what, packed=True))
            return
        self._finish_empty(property, dense_json(julia_name(filled.dtype)))

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        property = self._start_empty(self._matrix(rows_axis, columns_axis, name))
        colptr = self._empty_file(property, ".colptr", indtype, self.format_axis_length(columns_axis) + 1)
        return colptr, self._empty_file(property, ".rowval", indtype, nnz), self._empty_file(property, ".nzval",
                                                                                               dtype, nnz)

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._finish_empty(self._matrix(rows_axis, columns_axis, name), empty_sparse_matrix_json(filled))

    def format_relayout_matrix(self, rows_axis: str, columns_axis: str, name: str, matrix: StoredMatrix) -> None:
        try:
            super().format_relayout_matrix(rows_axis, columns_axis, name, matrix)
        except BaseException:
            # The other layout was to be replaced by the transpose of this one (the caller deleted it "for set",
            # which FilesDaf defers to the commit): the old one must not stay, as it no longer matches.
            self.format_discard_empty()
            if self.format_has_matrix(columns_axis, rows_axis, name):
                self.format_delete_matrix(columns_axis, rows_axis, name, for_set=False)
            raise

    def format_discard_empty(self) -> bool:
        # The builders' data are temporaries until their commit, and a for_set delete is deferred to that commit:
        # dropping the temporaries leaves any old value as it was.
        pending, self._pending = self._pending, {}
        for build in pending.values():
            self._discard(build)
        return True

    def _discard(self, build: _Pending) -> None:
        with self._doing(f"discarding {build.property.what}"), self._folder(build.property.folder) as folder:
            if folder is not None:
                for _, temporary in build.files:
                    _unlink(folder, temporary)

    # Reorder: Julia's ``.reorder.backup`` directory, crash-safe (pydaf/formats/files/reorder.py).

    reorder_module = _reorder

    # Writing.

    def _store(self, property: _Property, files: Files, descriptor: str,
               temporaries: list[tuple[str, str]] | None = None) -> None:
        """Write a property: its data files and descriptor as temporaries (so a full disk fails before anything
        changes), then commit them (:meth:`_commit`). ``temporaries`` are data files already written (builders)."""
        lock = self._require_writable(property.what)
        self._require_short(property)
        temporaries = list(temporaries or [])
        with lock.mutex, self._doing(f"writing {property.what}"), self._folder(property.folder,
                                                                               create=True) as folder:
            assert folder is not None
            try:
                for suffix, data in files:
                    temporaries.append((suffix, _write_new(folder, property.name + suffix, data)))
                text = utf8(descriptor + "\n", property.what)
                temporaries.append((".json", _write_new(folder, property.name + ".json", text)))
                existed = self._commit(folder, property, temporaries)
            except BaseException:
                for _, temporary in temporaries:
                    _unlink(folder, temporary)
                raise
            self._update_metadata(property.key, descriptor, rebuild=existed)

    def _commit(self, folder: int, property: _Property, temporaries: list[tuple[str, str]]) -> bool:
        """Replace a property by its new files (the descriptor last of ``temporaries``): the old data files are moved
        aside as backups, its descriptor last; the new files renamed in, the descriptor last (the commit); then the
        backups dropped, the descriptor's last. Returns whether the property existed. If this fails before the
        commit, the old property is put back (and a crash is repaired by the next writable open the same way)."""
        moved: list[str] = []
        renamed: list[str] = []
        committed = False
        try:
            for suffix in (*property.suffixes[1:], property.suffixes[0]):
                if _lstat(folder, property.name + suffix) is not None:
                    _replace(folder, property.name + suffix, _backup(property.name + suffix))
                    moved.append(suffix)
            for suffix, temporary in temporaries:
                _replace(folder, temporary, property.name + suffix)
                renamed.append(suffix)
            committed = True
        finally:
            if not committed:  # put the old property back (what is left undone, the next writable open does)
                for suffix in renamed:
                    with suppress(OSError):
                        _unlink(folder, property.name + suffix)
                for suffix in moved:
                    with suppress(OSError):
                        _replace(folder, _backup(property.name + suffix), property.name + suffix)
        for suffix in moved:  # a leftover backup is harmless: readers ignore it, the next writable open drops it
            with suppress(OSError):
                _unlink(folder, _backup(property.name + suffix))
        return property.suffixes[0] in moved

    def _delete(self, property: _Property, *, for_set: bool) -> None:
        lock = self._require_writable(property.what)
        if for_set:
            return  # the set that follows replaces the property atomically (see _commit)
        with lock.mutex, self._doing(f"deleting {property.what}"), self._folder(property.folder) as folder:
            if folder is not None:
                for suffix in property.suffixes:  # the descriptor first: the property stops existing
                    _unlink(folder, property.name + suffix)
                self._update_metadata(None, None, rebuild=True)

    def _start_empty(self, property: _Property) -> _Property:
        self._require_writable(property.what)
        self._require_short(property)
        stale = self._pending.pop(property.key, None)
        if stale is not None:
            self._discard(stale)
        self._pending[property.key] = _Pending(property)
        return property

    def _empty_file(self, property: _Property, suffix: str, dtype: np.dtype, count: int) -> np.ndarray:
        """A writable map of a new temporary file of ``count`` zeros, renamed in when the builder is filled. The
        space is allocated first (``posix_fallocate``), so a full disk is an error here, not a crash (SIGBUS) when
        the map is written."""
        build = self._pending[property.key]
        nbytes = count * dtype.itemsize
        with self._doing(f"allocating {property.what}"), self._folder(property.folder, create=True) as folder:
            assert folder is not None
            temporary, fd = _create_new(folder, property.name + suffix)
            try:
                if nbytes:
                    os.posix_fallocate(fd, 0, nbytes)
                    region = map_file(fd, os.path.join(self.path, *property.folder, temporary), 0, nbytes,
                                      writable=True)
            except BaseException:
                _unlink(folder, temporary)
                raise
            finally:
                os.close(fd)
            build.files.append((suffix, temporary))
        if count == 0:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(region, dtype=dtype, count=count)

    def _finish_empty(self, property: _Property, descriptor: str) -> None:
        build = self._pending.pop(property.key)
        self._store(property, [], descriptor, temporaries=build.files)

    # metadata.json: an index for Julia (pydaf never reads it), rewritten atomically after each change.

    def _update_metadata(self, key: str | None, descriptor: str | None, *, rebuild: bool) -> None:
        """After a change: append the entry of a new property (as Julia does), or rebuild the whole index (after a
        delete or an overwrite, whose entry then goes last, as Julia's delete-then-set gives). If the index can't
        be written (disk full), it is removed rather than left stale: Julia and pydaf rebuild a missing one."""
        try:
            current = None if rebuild else self._read_root_file("metadata.json")
            if current is None or not current.startswith(b"{") or not current.endswith(b"}"):
                entries = self._metadata_entries()
                current = utf8("{" + ",".join(f"{json.dumps(name, ensure_ascii=False)}:{text}"
                                               for name, text, _ in entries if name != key) + "}", "metadata.json")
            if key is not None and descriptor is not None:
                entry = utf8(f"{json.dumps(key, ensure_ascii=False)}:{descriptor}}}", "metadata.json")
                current = current[:-1] + (b"," if len(current) > 2 else b"") + entry
            self._write_root_file("metadata.json", current)
        except (OSError, DafError):
            with suppress(OSError):
                _unlink(self._root, "metadata.json")

    def _read_root_file(self, name: str) -> bytes | None:
        try:
            fd, status = _open_file(self._root, name)
        except OSError:
            return None
        try:
            return _read_fd(fd, status.st_size, 1 << 30, name)
        finally:
            os.close(fd)

    def _metadata_entries(self) -> list[tuple[str, str, Any]]:
        """Every property's index key, descriptor text (verbatim) and parsed descriptor, in Julia's rebuild order:
        axes, scalars, vectors by axis, matrices by rows and columns axes. Unparseable descriptors are left out (they
        raise when their property is read). Only for the writer, which leaves no backups behind."""
        axes = sorted(self.format_axes_set())
        entries: list[tuple[str, str, Any]] = []
        for axis in axes:
            length = self.format_axis_length(axis)
            entries.append((f"axes/{axis}", f'{{"format":"axis","n_entries":{length}}}',
                            {"format": "axis", "n_entries": length}))
        folders = [("scalars",), *(("vectors", axis) for axis in axes),
                   *(("matrices", rows, columns) for rows in axes for columns in axes)]
        for parts in folders:
            with self._folder(parts) as folder:
                if folder is None:
                    continue
                for file in sorted(os.listdir(folder)):
                    if not file.endswith(".json") or file.startswith(".") or not is_text(file) or file == ".json":
                        continue
                    try:
                        fd, status = _open_file(folder, file)
                        try:
                            text = _read_fd(fd, status.st_size, _MAX_JSON_BYTES, file).decode("utf-8").rstrip("\n")
                        finally:
                            os.close(fd)
                        parsed = json.loads(text)
                    except (OSError, ValueError, RecursionError, DafError):
                        continue
                    if isinstance(parsed, dict):
                        entries.append(("/".join((*parts, file[:-len(".json")])), text, parsed))
        return entries

    def _ensure_metadata(self) -> None:
        """At a writable open: make ``metadata.json`` match the descriptors (a crash can leave it stale)."""
        try:
            entries = self._metadata_entries()
        except (DafError, OSError):  # a linked folder: there is no valid index of such a directory
            with suppress(OSError):
                _unlink(self._root, "metadata.json")
            return
        current = self._read_root_file("metadata.json")
        try:
            index = json.loads(current) if current is not None else None
            if isinstance(index, dict) and index == {name: parsed for name, _, parsed in entries}:
                return
        except (ValueError, RecursionError):
            pass
        self._update_metadata(None, None, rebuild=True)


class _SnapshotSource:
    """The files of a property in one snapshot of its folder, as the layout's decoders read them."""

    def __init__(self, storage: FilesFormat, snapshot: _Snapshot) -> None:
        self._storage = storage
        self._snapshot = snapshot
        self.what = snapshot.property.what

    def map(self, suffix: str, dtype: np.dtype, count: int | None) -> tuple[np.ndarray, CacheGroup]:
        return self._storage._map(self._snapshot, suffix, dtype, count)

    def text(self, suffix: str, count: int) -> np.ndarray:
        return self._storage._text(self._snapshot, suffix, count)

    def invalid(self, problem: str) -> DafFormatError:
        return self._storage._invalid(self._snapshot.property, problem)

    def byte_source(self, suffix: str) -> BufferByteSource:
        return self._storage._byte_source(self._snapshot, suffix)


class FilesDaf(PersistentDaf):
    """A Daf data set in a directory of plain files, Julia's preferred format for large data (every numeric file is
    memory-mapped). Modes as :class:`~pydaf.H5df`: ``r`` returns a :class:`~pydaf.DafReadOnly`; ``w+`` refuses a
    non-empty directory that is not a Daf data set. ``packed=True`` makes writes pack by default: each property
    large enough is a compressed ``.zip`` shard, as Julia's (docs/design/packed.md; each write's ``packed=`` too).

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "example.daf")
        >>> daf = pydaf.FilesDaf(path, "w", name="example!").add_axis("cell", ["A", "B"])
        >>> daf.set_vector("cell", "age", [3, 5]).get_vector("cell", "age").tolist()
        [3, 5]
        >>> sorted(os.listdir(os.path.join(path, "vectors", "cell")))
        ['age.data', 'age.json']
    """

    #: A leaf storage format (see :func:`pydaf.is_leaf`): it owns its state and can be reordered in place.
    leaf_format: ClassVar[bool] = True

    _format: FilesFormat

    def __init__(self, path: str | os.PathLike, mode: str = "r", *, name: str | None = None,
                 packed: bool = False) -> None:
        packed = validated_packed_default(packed)
        super().__init__(FilesFormat(os.fspath(path), mode), name=name)
        self._format.packed_default = packed


def _guess_can_open(path: str) -> bool:
    """A directory (holding ``daf.json`` once it is a data set), or nothing yet: FilesDaf directories have no suffix,
    so this format is the fallback, asked after the others, as Julia's ``open_daf`` opens a FilesDaf "otherwise"."""
    return os.path.isdir(path) or not os.path.lexists(path)


FORMAT = register_format(FormatEntry(
    name="FilesDaf", paths="a directory holding daf.json (or a new path, which becomes one)",
    guess_can_open=_guess_can_open, open=FilesDaf.open, fallback=True,
    priority=40))
