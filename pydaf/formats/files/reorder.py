"""FilesDaf's reorder hooks (Julia's ``files_format.jl`` reorder section), on Julia's on-disk artifacts: the directory
``.reorder.backup`` in the data set's root is the lock, and holds a hard link to every file the reorder rewrites, under
the same relative path (``axes/<axis>.txt``, ``vectors/<axis>/<name><suffix>``,
``matrices/<rows>/<columns>/<name><suffix>``). So Julia's ``reset_reorder_axes!`` rolls back a reorder pydaf was
killed in, and pydaf rolls back Julia's.

Why a kill at any instant is recoverable (the argument is also in docs/reorder.md, "FilesDaf"):

- **Lock.** ``mkdir .reorder.backup`` (atomic), then the root is fsynced. Before it nothing changed; after it,
  :func:`has_reorder_lock` is true until the last step of the cleanup.
- **Backup.** Every file to be rewritten is hard-linked into the backup (a property's descriptor last), then every
  backup folder is fsynced: the links are durable before the first live byte changes. A kill here leaves links to
  the very files that are live: a reset finds them unchanged and only drops the backup.
- **Replace.** Nothing is ever written in place (a hard-linked backup would change with it): each new file is a hidden
  temporary (``.<file>.reorder.tmp-<hex>``), filled through a writable map by the permute kernels and renamed over the
  live file. So at every instant each live file is either its old complete self (the inode the backup links to) or its
  new complete self. Descriptors (``.json``) are not rewritten: a permutation changes no type, length or count, so the
  old descriptor is the new one (and a v1.0 directory stays v1.0). At the end ``metadata.json`` is rebuilt (as Julia
  does after a reorder; its content does not depend on the order).
- **Cleanup.** ``.reorder.backup`` is renamed to a hidden temporary name (atomic: the lock disappears with the whole
  backup at once), and only then is the renamed folder deleted (its files' space freed on a background thread:
  :mod:`pydaf._os.removal`). Julia deletes the backup in place, so a kill in its middle leaves a partial backup that
  its reset would restore property by property, a mix of old and new orders; pydaf never leaves one. A renamed
  leftover is invisible (hidden, not a backup) and is deleted by the next writable open.
- **Reset** (by :func:`reset_reorder`, and by a writable open): each backed-up file is linked back under a temporary
  name and renamed over the live one (skipped when it already is that file), the reorder's temporaries are dropped,
  the folders fsynced, then the backup retired as in the cleanup (the root fsynced first) and ``metadata.json``
  rebuilt. For a property whose files the reorder had started to replace, live files the backup lacks are removed
  (Julia's reorder rewrites sparse strings as dense ``.txt``); one it had not touched is left whole, even if a killed
  backup linked only some of its files. A kill during a reset leaves the backup in place: the next reset does the same
  again (it is idempotent).
- **Power loss.** The lock and the backup links are fsynced before any live file changes, so until the cleanup a power
  loss also rolls back to the old order. The new data files are not fsynced, as no FilesDaf write is (a killed process
  loses nothing; a power loss right after a reorder may lose its new files, as after any write: docs/design/files.md),
  which keeps the reorder at the speed of the page cache.

A read-only open of a directory with a backup raises :class:`~pydaf.errors.DafIncompleteError` saying how to roll it
back (a reader can't: read-only opens never write); if the writer lock is held by a live process (a reorder under way,
or one that raised in a process still holding the data set), it waits for the backup to go as a lock would, then
raises :class:`~pydaf.errors.DafLockedError`. A writable open holds the writer lock, so no other process is
reordering: it rolls the backup back (with a warning), unless another thread of this process is reordering it now.

Example:
    >>> import os, tempfile, pydaf
    >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
    >>> daf = pydaf.FilesDaf(path, "w").add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [1, 2, 3])
    >>> try:  # (a crash after the first property was replaced)
    ...     pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False, _simulate_crash=1)
    ... except pydaf.SimulatedCrash:
    ...     pass
    >>> sorted(os.listdir(os.path.join(path, ".reorder.backup", "vectors", "cell")))
    ['age.data', 'age.json']
    >>> daf.axis_vector("cell").tolist(), daf.get_vector("cell", "age").tolist()
    (['C', 'A', 'B'], [3, 1, 2])
    >>> pydaf.reset_reorder_axes(daf), daf.axis_vector("cell").tolist(), daf.get_vector("cell", "age").tolist()
    (True, ['A', 'B', 'C'], [1, 2, 3])
    >>> pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False)
    >>> daf.get_vector("cell", "age").tolist(), sorted(os.listdir(path))
    ([3, 1, 2], ['.daf.lock', 'axes', 'daf.json', 'matrices', 'metadata.json', 'scalars', 'vectors'])
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, Protocol, TypeVar

import numpy as np

from ..._os import locks
from ..._os.maps import map_file
from ..._os.removal import remove_freeing_later
from ...abc.format import CacheGroup
from ...abc.reorder import (
    CrashCounter,
    FormatReorderPlan,
    PlannedAxis,
    PlannedMatrix,
    PlannedVector,
    ReorderProgress,
    tick_crash_counter,
)
from ...errors import DafFormatError, DafIncompleteError, DafLockedError
from ...kernels.permute import (
    permute_csc_into,
    permute_dense_matrix_into,
    permute_sparse_vector_into,
    permute_vector_into,
    write_permuted_dense,
)
from .fileops import WRITE_CHUNK as _WRITE_CHUNK
from .fileops import create_new
from .fileops import lstat as _lstat
from .fileops import replace as _replace
from .fileops import split_suffix as _split_suffix
from .fileops import temporary_name as _temporary
from .fileops import unlink as _unlink
from .layout import MATRIX_SUFFIXES, VECTOR_SUFFIXES, decode_matrix, decode_vector, lines_bytes

T = TypeVar("T")


class FilesStorage(Protocol):
    """What the hooks use of :class:`~pydaf.formats.files.format.FilesFormat` (which imports this module, so this one
    names its members instead of importing it): its folders opened without following links, its consistent reads,
    its writer lock and its ``metadata.json``."""

    path: str
    _root: int
    _axis_lengths: dict[str, Any]

    def _require_open(self) -> None: ...
    def _require_writable(self, what: str) -> Any: ...
    def _doing(self, doing: str) -> AbstractContextManager[None]: ...
    def _folder(self, parts: tuple[str, ...], *, create: bool = False,
                links: bool = True) -> AbstractContextManager[int | None]: ...
    def _subfolders(self, parts: tuple[str, ...]) -> list[str]: ...
    def _vector(self, axis: str, name: str) -> Any: ...
    def _matrix(self, rows_axis: str, columns_axis: str, name: str) -> Any: ...
    def _read(self, property: Any, decode: Callable[[Any], T]) -> T: ...
    def _descriptor(self, snapshot: Any) -> Any: ...
    def _map(self, snapshot: Any, suffix: str, dtype: np.dtype, count: int | None) -> tuple[np.ndarray, CacheGroup]: ...
    def _text(self, snapshot: Any, suffix: str, count: int) -> np.ndarray: ...
    def _invalid(self, property: Any, problem: str) -> DafFormatError: ...
    def _refuse_packed(self, descriptor: dict[str, Any], property: Any) -> None: ...
    def _update_metadata(self, key: str | None, descriptor: str | None, *, rebuild: bool) -> None: ...
    def format_has_axis(self, axis: str, *, for_change: bool) -> bool: ...
    def format_axis_length(self, axis: str) -> int: ...


#: Julia's ``REORDER_BACKUP_DIR``: the lock, and the hard links to the old files.
BACKUP_DIR = ".reorder.backup"

#: What the backup is renamed to when retired (a temporary's name: ``w`` mode and recovery drop it).
_RETIRED_PREFIX = BACKUP_DIR + ".tmp-"

#: The tag of the reorder's temporaries (``.<file>.reorder.tmp-<hex>``, still a FilesDaf temporary).
_TAG = ".reorder"

#: Dense matrices with columns at least this long are permuted a column at a time (see ``_replace_dense``).
_COLUMN_WISE_MIN_ROWS = 1024

# The reorders under way in this process, by the identity of their root directory, with their thread: a writable open
# in another thread must not roll them back.
_live: dict[tuple[int, int], int] = {}
_live_mutex = threading.Lock()


# The hooks (FilesFormat's format_*_reorder methods call these).


def lock_reorder(storage: FilesStorage, operation_id: str) -> None:
    """Claim the reorder: create ``.reorder.backup`` (durably)."""
    lock = storage._require_writable("the axes (reorder_axes)")
    with lock.mutex, storage._doing("claiming a reorder_axes"):
        try:
            os.mkdir(BACKUP_DIR, 0o777, dir_fd=storage._root)
        except FileExistsError:
            raise _interrupted(storage, "can't start reorder_axes") from None
        os.fsync(storage._root)
        with _live_mutex:
            _live[_key(storage)] = threading.get_ident()


def backup_reorder(storage: FilesStorage, plan: FormatReorderPlan) -> None:
    """Hard-link every file ``plan`` rewrites into ``.reorder.backup`` and make the links durable."""
    lock = storage._require_writable("the axes (reorder_axes)")
    with lock.mutex, storage._doing("backing up for reorder_axes"), _ending_on_error(storage):
        _require_backup(storage)
        folders: list[tuple[str, ...]] = [(BACKUP_DIR,)]
        axes = _stored_axes(storage, plan)
        if axes:
            folders.append(_link_files(storage, ("axes",), [f"{axis}.txt" for axis in axes]))
        for property in _properties(storage, plan):
            files = [property.name + suffix for suffix in (*property.suffixes[1:], property.suffixes[0])]
            folders.append(_link_files(storage, property.folder, files))  # (the descriptor last)
        for parts in dict.fromkeys(folders):
            _fsync_folder(storage, parts)


def replace_reorder(storage: FilesStorage, plan: FormatReorderPlan, progress: ReorderProgress,
                    crash_counter: CrashCounter | None) -> None:
    """Write the permuted axes, vectors and matrices of ``plan`` (each file a new one renamed over the old)."""
    lock = storage._require_writable("the axes (reorder_axes)")
    with lock.mutex, storage._doing("replacing for reorder_axes"), _ending_on_error(storage):
        _require_backup(storage)
        axes = _stored_axes(storage, plan)
        if axes:
            with storage._folder(("axes",)) as folder:
                assert folder is not None
                for axis in axes:
                    data = lines_bytes(plan.planned_axes[axis].new_entries, f"the entries of the axis: {axis}")
                    _write_file(folder, f"{axis}.txt", data)
        for planned in _planned(plan):
            _replace_property(storage, plan, planned, _property(storage, planned))
            if progress is not None:
                progress(planned.n_replacement_elements)
            tick_crash_counter(crash_counter)
        storage._update_metadata(None, None, rebuild=True)


def cleanup_reorder(storage: FilesStorage) -> None:
    """Drop the backup, and with it the lock, at once (see the module docstring)."""
    lock = storage._require_writable("the axes (reorder_axes)")
    with lock.mutex, storage._doing("cleaning up after reorder_axes"):
        try:
            _retire_backup(storage, durable=False)
        finally:
            _end_live(storage)


def has_reorder_lock(storage: FilesStorage) -> bool:
    """Whether ``.reorder.backup`` is there (a reorder under way, or interrupted)."""
    storage._require_open()
    with storage._doing("looking for an interrupted reorder_axes"):
        status = _lstat(storage._root, BACKUP_DIR)
        return status is not None and stat.S_ISDIR(status.st_mode)


def reset_reorder(storage: FilesStorage) -> bool:
    """Roll an interrupted reorder back to the old order (Julia's or pydaf's backup); whether there was one."""
    lock = storage._require_writable("the axes (reset_reorder_axes)")
    with lock.mutex, storage._doing("rolling back an interrupted reorder_axes"):
        with _live_mutex:
            thread = _live.get(_key(storage))
        if thread is not None and thread != threading.get_ident():
            raise DafLockedError(f"can't roll back the reorder_axes under way in another thread\nin the daf "
                                 f"directory: {storage.path}\n(wait for it to end)")
        if not has_reorder_lock(storage):
            _remove_retired(storage)
            return False
        touched = [_restore_folder(storage, (BACKUP_DIR, "axes"), ("axes",), (".txt",))]
        for axis in storage._subfolders((BACKUP_DIR, "vectors")):
            touched.append(_restore_folder(storage, (BACKUP_DIR, "vectors", axis), ("vectors", axis),
                                           VECTOR_SUFFIXES))
        for rows_axis in storage._subfolders((BACKUP_DIR, "matrices")):
            for columns_axis in storage._subfolders((BACKUP_DIR, "matrices", rows_axis)):
                touched.append(_restore_folder(storage, (BACKUP_DIR, "matrices", rows_axis, columns_axis),
                                               ("matrices", rows_axis, columns_axis), MATRIX_SUFFIXES))
        for parts in dict.fromkeys(parts for parts in touched if parts is not None):
            _fsync_folder(storage, parts)
        _retire_backup(storage, durable=True)
        _end_live(storage)
        storage._axis_lengths.clear()
        storage._update_metadata(None, None, rebuild=True)
        return True


# Opening a directory with a backup.


def recover_at_open(storage: FilesStorage, first: bool) -> None:
    """At a writable open (which holds the writer lock): roll back an interrupted reorder, with a warning (unless
    another thread of this process is reordering the directory now), and drop retired backups."""
    with storage._doing("looking for an interrupted reorder_axes"):
        if first:
            _remove_retired(storage)
        if not has_reorder_lock(storage):
            return
        with _live_mutex:
            if _key(storage) in _live:
                return  # (under way in this process: its own cleanup, or an explicit reset, ends it)
    reset_reorder(storage)
    warnings.warn(f"rolled back an interrupted reorder_axes\nin the daf directory: {storage.path}\n(its axes, vectors "
                  "and matrices are all in their old order again)", stacklevel=5)


def refuse_at_read_only_open(storage: FilesStorage) -> None:
    """At a read-only open: raise if a reorder is under way or was interrupted (the data may be a mix of orders)."""
    with storage._doing("looking for an interrupted reorder_axes"):
        if not has_reorder_lock(storage):
            return
        with _live_mutex:
            live = _key(storage) in _live
        holder = None if live else _writer_holder(storage._root)
        if live or (holder is not None and holder != os.getpid()):
            deadline = time.monotonic() + locks.LOCK_WAIT_SECONDS
            while time.monotonic() < deadline:
                time.sleep(0.01)
                if not has_reorder_lock(storage):
                    return
            by = "this process" if live else f"the process {holder or '(unknown pid)'}"
            raise DafLockedError(
                f"can't read the daf directory: {storage.path}\nwhile {by}, which holds it for writing, is reordering "
                f"its axes (or was, and it raised)\n(waited {locks.LOCK_WAIT_SECONDS} s: retry once that process has "
                "finished or closed it; if it died, opening it for writing rolls the reorder back)")
    raise _interrupted(storage, "can't read the daf directory")


# Backing up.


def _stored_axes(storage: FilesStorage, plan: FormatReorderPlan) -> list[str]:
    """The planned axes the data set has (sorted): those whose ``axes/<axis>.txt`` the reorder backs up and rewrites."""
    return [axis for axis in sorted(plan.planned_axes) if storage.format_has_axis(axis, for_change=False)]


def _planned(plan: FormatReorderPlan) -> list[PlannedVector | PlannedMatrix]:
    return [*plan.planned_vectors, *plan.planned_matrices]


def _properties(storage: FilesStorage, plan: FormatReorderPlan) -> Iterator[Any]:
    for planned in _planned(plan):
        yield _property(storage, planned)


def _property(storage: FilesStorage, planned: PlannedVector | PlannedMatrix) -> Any:
    if isinstance(planned, PlannedVector):
        return storage._vector(planned.axis, planned.name)
    return storage._matrix(planned.rows_axis, planned.columns_axis, planned.name)


def _link_files(storage: FilesStorage, parts: tuple[str, ...], files: list[str]) -> tuple[str, ...]:
    """Hard-link the regular ``files`` (those that exist) of a live folder into the same folder of the backup."""
    backup_parts = (BACKUP_DIR, *parts)
    with storage._folder(parts) as live, storage._folder(backup_parts, create=True) as backup:
        assert backup is not None
        if live is None:
            return backup_parts
        for file in files:
            status = _lstat(live, file)
            if status is None or not stat.S_ISREG(status.st_mode):
                continue  # (a link or a device planted here is no file of the data set: never followed)
            os.link(file, file, src_dir_fd=live, dst_dir_fd=backup, follow_symlinks=False)
    return backup_parts


# Replacing.


class _RawSource:
    """The files of a property in one snapshot of its folder, as the layout's decoders read them (format.py's
    ``_SnapshotSource``), recording those read: their stored element types and values, as mapped."""

    def __init__(self, storage: FilesStorage, snapshot: Any) -> None:
        self._storage = storage
        self._snapshot = snapshot
        self.what: str = snapshot.property.what
        self.files: dict[str, np.ndarray] = {}

    def map(self, suffix: str, dtype: np.dtype, count: int | None) -> tuple[np.ndarray, CacheGroup]:
        values, group = self._storage._map(self._snapshot, suffix, dtype, count)
        self.files[suffix] = values
        return values, group

    def text(self, suffix: str, count: int) -> np.ndarray:
        values = self._storage._text(self._snapshot, suffix, count)
        self.files[suffix] = values
        return values

    def invalid(self, problem: str) -> DafFormatError:
        return self._storage._invalid(self._snapshot.property, problem)

    def byte_source(self, suffix: str) -> Any:
        """Packed data is not reordered yet: refused (before anything changes)."""
        self._storage._refuse_packed({"packed_format": suffix}, self._snapshot.property)


def _raw_files(storage: FilesStorage, property: Any, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The stored files of a property (checked as a read checks them), by suffix: numbers mapped, texts as lines."""
    def decode(snapshot: Any) -> dict[str, np.ndarray]:
        source = _RawSource(storage, snapshot)
        descriptor = storage._descriptor(snapshot)
        if len(shape) == 1:
            decode_vector(source, descriptor, shape[0])
        else:
            decode_matrix(source, descriptor, (shape[0], shape[1]))
        return source.files

    return storage._read(property, decode)


def _replace_property(storage: FilesStorage, plan: FormatReorderPlan, planned: PlannedVector | PlannedMatrix,
                      property: Any) -> None:
    if isinstance(planned, PlannedVector):
        shape: tuple[int, ...] = (storage.format_axis_length(planned.axis),)
        rows: PlannedAxis | None = plan.planned_axes[planned.axis]
        columns: PlannedAxis | None = None
    else:
        shape = (storage.format_axis_length(planned.rows_axis), storage.format_axis_length(planned.columns_axis))
        rows, columns = plan.planned_axes.get(planned.rows_axis), plan.planned_axes.get(planned.columns_axis)
    files = _raw_files(storage, property, shape)
    with storage._folder(property.folder) as folder:
        assert folder is not None
        name = property.name
        if ".data" in files or ".txt" in files:
            _replace_dense(folder, name, files, shape, rows, columns)
        elif ".nzind" in files:
            _replace_sparse_vector(folder, name, files, rows)
        else:
            _replace_sparse_matrix(folder, name, files, shape, rows, columns)


def _replace_dense(folder: int, name: str, files: dict[str, np.ndarray], shape: tuple[int, ...],
                   rows: PlannedAxis | None, columns: PlannedAxis | None) -> None:
    rows_permutation = None if rows is None else rows.permutation
    columns_permutation = None if columns is None else columns.permutation
    if ".data" in files:
        with _new_file(folder, name + ".data") as fd:
            write_permuted_dense(files[".data"].reshape(shape, order="F"), rows_permutation, columns_permutation, fd)
        return
    texts = files[".txt"]
    out = np.empty(texts.shape[0], dtype=object)
    if len(shape) == 1:
        assert rows_permutation is not None
        permute_vector_into(texts, rows_permutation, out)
    else:
        permute_dense_matrix_into(texts.reshape(shape, order="F"), rows_permutation, columns_permutation,
                                  out.reshape(shape, order="F"))
    _write_file(folder, name + ".txt", lines_bytes(out, f"the strings of: {name}"))


def _replace_sparse_vector(folder: int, name: str, files: dict[str, np.ndarray], axis: PlannedAxis | None) -> None:
    assert axis is not None
    nzind = files[".nzind"]
    nnz = nzind.shape[0]
    with _new_mapped(folder, name + ".nzind", nzind.dtype, nnz) as out_nzind:
        if ".nzval" in files:
            nzval = files[".nzval"]
            with _new_mapped(folder, name + ".nzval", nzval.dtype, nnz) as out_nzval:
                permute_sparse_vector_into(nzind, nzval, axis.inverse_permutation, out_nzind, out_nzval)
            return
        order = np.empty(nnz, dtype=np.int64)  # (where each new entry was: to move strings, or nothing at all)
        permute_sparse_vector_into(nzind, np.arange(nnz, dtype=np.int64), axis.inverse_permutation, out_nzind, order)
    if ".nztxt" in files:
        _write_file(folder, name + ".nztxt", lines_bytes(files[".nztxt"][order], f"the strings of: {name}"))


def _replace_sparse_matrix(folder: int, name: str, files: dict[str, np.ndarray], shape: tuple[int, ...],
                           rows: PlannedAxis | None, columns: PlannedAxis | None) -> None:
    colptr, rowval = files[".colptr"], files[".rowval"]
    nnz = rowval.shape[0]
    inverse_rows = None if rows is None else rows.inverse_permutation
    columns_permutation = None if columns is None else columns.permutation
    with _new_mapped(folder, name + ".colptr", colptr.dtype, colptr.shape[0]) as out_colptr, \
            _new_mapped(folder, name + ".rowval", rowval.dtype, nnz) as out_rowval:
        if ".nzval" in files:
            nzval = files[".nzval"]
            with _new_mapped(folder, name + ".nzval", nzval.dtype, nnz) as out_nzval:
                permute_csc_into((shape[0], shape[1]), colptr, rowval, nzval, inverse_rows, columns_permutation,
                                 out_colptr, out_rowval, out_nzval)
            return
        order = np.empty(nnz, dtype=np.int64)
        permute_csc_into((shape[0], shape[1]), colptr, rowval, np.arange(nnz, dtype=np.int64), inverse_rows,
                         columns_permutation, out_colptr, out_rowval, order)
    if ".nztxt" in files:
        _write_file(folder, name + ".nztxt", lines_bytes(files[".nztxt"][order], f"the strings of: {name}"))


@contextmanager
def _new_mapped(folder: int, file: str, dtype: np.dtype, count: int) -> Iterator[np.ndarray]:
    """A writable map of a new temporary of ``count`` elements, which becomes ``file`` as :func:`_new_file` says."""
    with _new_file(folder, file) as fd:
        nbytes = count * dtype.itemsize
        if nbytes:
            os.posix_fallocate(fd, 0, nbytes)  # (a full disk fails here, not as a SIGBUS in the map)
            region = map_file(fd, file, 0, nbytes, writable=True)
            yield np.frombuffer(region, dtype=dtype, count=count)
        else:
            yield np.empty(0, dtype=dtype)


@contextmanager
def _new_file(folder: int, file: str) -> Iterator[int]:
    """The descriptor of a new temporary; once the block wrote it, it is moved in as ``file`` (on an error, it is
    deleted and ``file`` is untouched)."""
    temporary, fd = _create_temporary(folder, file)
    try:
        yield fd
        _move_into(folder, temporary, file)
    except BaseException:
        _unlink(folder, temporary)
        raise
    finally:
        os.close(fd)


def _write_file(folder: int, file: str, data: bytes) -> None:
    """Write ``data`` as a new temporary, moved in as ``file``."""
    with _new_file(folder, file) as fd:
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:written + _WRITE_CHUNK])


def _create_temporary(folder: int, file: str) -> tuple[str, int]:
    return create_new(folder, file + _TAG)


# Restoring.


def _restore_folder(storage: FilesStorage, backup_parts: tuple[str, ...], live_parts: tuple[str, ...],
                    suffixes: tuple[str, ...]) -> tuple[str, ...] | None:
    """Put the backed-up files of one folder back (each linked to a temporary, renamed over the live file); for a
    property the reorder had started to replace, also drop live files of it the backup doesn't have (a Julia reorder
    may store a property in other files: sparse strings as dense ones). Then drop the reorder's temporaries."""
    with storage._folder(backup_parts, links=False) as backup:
        if backup is None:
            return None
        names = sorted(name for name in os.listdir(backup) if not name.startswith(".") and (
            status := _lstat(backup, name)) is not None and stat.S_ISREG(status.st_mode))
        if not names:
            return None
        with storage._folder(live_parts, create=True) as live:
            assert live is not None
            by_property: dict[str, set[str]] = {}
            for name in names:
                split = _split_suffix(name) if suffixes != (".txt",) else (name[:-4], ".txt")
                if split is not None and split[1] in suffixes and name.endswith(split[1]):
                    by_property.setdefault(split[0], set()).add(split[1])
            for prefix, backed_up in by_property.items():
                started = False
                for suffix in backed_up:
                    started |= _restore_file(backup, live, prefix + suffix)
                if started:
                    for suffix in suffixes:
                        if suffix not in backed_up and _lstat(live, prefix + suffix) is not None:
                            _unlink(live, prefix + suffix)
            for name in os.listdir(live):
                if name.startswith(".") and f"{_TAG}.tmp-" in name:
                    _unlink(live, name)
    return live_parts


def _restore_file(backup: int, live: int, file: str) -> bool:
    """Make the live ``file`` the backed-up one again; whether it had been replaced (or removed)."""
    saved = os.stat(file, dir_fd=backup, follow_symlinks=False)
    current = _lstat(live, file)
    if current is not None and (current.st_dev, current.st_ino) == (saved.st_dev, saved.st_ino):
        return False
    while True:
        temporary = _temporary(file + _TAG)
        try:
            os.link(file, temporary, src_dir_fd=backup, dst_dir_fd=live, follow_symlinks=False)
            break
        except FileExistsError:
            continue
    try:
        _replace(live, temporary, file)
    except BaseException:
        _unlink(live, temporary)
        raise
    return True


# The backup folder.


def _require_backup(storage: FilesStorage) -> None:
    if not has_reorder_lock(storage):
        raise DafFormatError(f"the reorder backup: {BACKUP_DIR}\nof the daf directory: {storage.path}\nis gone (it "
                             "was removed while reorder_axes was using it)")


def _retire_backup(storage: FilesStorage, *, durable: bool) -> None:
    """Rename the backup to a temporary name (one atomic step: the lock goes), fsync the root if ``durable``, then
    delete it."""
    while True:
        retired = _RETIRED_PREFIX + os.urandom(8).hex()
        if _lstat(storage._root, retired) is None:
            break
    os.rename(BACKUP_DIR, retired, src_dir_fd=storage._root, dst_dir_fd=storage._root)
    if durable:
        os.fsync(storage._root)
    _remove_tree(storage, retired)


def _remove_retired(storage: FilesStorage) -> None:
    """Delete what a cleanup or a reset killed after retiring its backup left."""
    for name in os.listdir(storage._root):
        if name.startswith(_RETIRED_PREFIX):
            with suppress(OSError):
                _remove_tree(storage, name)


def _remove_tree(storage: FilesStorage, name: str) -> None:
    remove_freeing_later(storage._root, name)  # (the old files' space is freed in the background)


def _fsync_folder(storage: FilesStorage, parts: tuple[str, ...]) -> None:
    with storage._folder(parts) as folder:
        if folder is not None:
            os.fsync(folder)


def _interrupted(storage: FilesStorage, problem: str) -> DafIncompleteError:
    return DafIncompleteError(
        f"{problem}: {storage.path}\n(a reorder_axes of it was interrupted: some of its properties may be in the new "
        f"order and some in the old; its backup is in: {BACKUP_DIR})\nto roll it back to the old order: open it for "
        "writing (pydaf.open_daf(path, \"r+\"), which does it), or call pydaf.reset_reorder_axes on it")


# Files, relative to the descriptor of their folder, never following links (as format.py's helpers of the same names).

#: FilesDaf's writer lock (``format.LOCK_FILE``).
_LOCK_FILE = ".daf.lock"


def _move_into(folder: int, temporary: str, file: str) -> None:
    """Make a replaced property's filled temporary its live ``file``. The old live file (its data kept by the backup's
    link) is unlinked first, then the temporary renamed: renaming over an existing file makes ext4 write the new one
    out at once (its replace-by-rename heuristic, auto_da_alloc: 2-3x the rename's cost). A kill in between leaves no
    live file, which a reset restores from the backup as it restores a replaced one (Julia's reset too)."""
    _unlink(folder, file)
    os.rename(temporary, file, src_dir_fd=folder, dst_dir_fd=folder)


# This process's reorders under way, and the writer lock of another process.


def _key(storage: FilesStorage) -> tuple[int, int]:
    status = os.fstat(storage._root)
    return status.st_dev, status.st_ino


def _end_live(storage: FilesStorage) -> None:
    with _live_mutex:
        _live.pop(_key(storage), None)


@contextmanager
def _ending_on_error(storage: FilesStorage) -> Iterator[None]:
    """A hook that raises ends the reorder under way (its backup stays, for a reset or a writable open)."""
    try:
        yield
    except BaseException:
        _end_live(storage)
        raise


def _writer_holder(root: int) -> int | None:
    """The pid of the process holding the writer lock (``.daf.lock``) of the directory open as ``root`` (0 if it is
    held by a process whose pid is unknown), or None if no process holds it. Opens the lock file read-only: a read-only
    open never writes."""
    try:
        fd = os.open(_LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=root)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        probe = struct.pack(locks._FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, locks._DATA_END, 0)
        if struct.unpack(locks._FLOCK, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))[0] == fcntl.F_UNLCK:
            return None
        probe = struct.pack(locks._FLOCK, fcntl.F_WRLCK, os.SEEK_SET, locks._PID_BASE, locks._PID_SPACE, 0)
        found, _, start, _, _ = struct.unpack(locks._FLOCK, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))
        return 0 if found == fcntl.F_UNLCK else start - locks._PID_BASE
    except OSError as error:
        if error.errno in (errno.EINVAL, errno.ENOLCK):  # (a filesystem without OFD locks: as if none)
            return None
        raise
    finally:
        os.close(fd)
