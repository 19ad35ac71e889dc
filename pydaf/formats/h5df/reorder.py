"""The reorder hooks of H5df (Julia's ``Reorder.format_*_reorder!`` of ``h5df_format.jl``), on Julia's artifacts
(docs/spec/FORMATS.md §2.13): the file-root dataset ``daf_reorder_lock`` (the operation's id), the group
``daf_reorder_repos/`` (one ``UInt8[1]`` entry per daf group being reordered, named after its path with ``/`` as
``__``) and the sibling file ``<file>.reorder.backup`` (a byte copy of the whole HDF5 file, taken after the lock). So
Julia's ``reset_reorder_axes!`` rolls back a reorder pydaf was killed in, and pydaf rolls back Julia's.

Two methods (:func:`reorder_method`; docs/reorder.md, "H5df", says it for readers):

By swap (when it can: one write of the data, where the backup costs a second). After the lock, the permuted file is
written beside the file (``<file>.reorder.pydaf-swap``: its space allocated, the bytes of the numbers to permute
written permuted from the live file's maps, the rest copied), HDF5 then writes its axes and the properties it must
rewrite and removes its lock, and once it is ``fsync``-ed it is renamed over the file: the one step. Killed before
it: the file is untouched, with a lock and no backup, which a reset (pydaf's or Julia's) drops; pydaf's next writable
open deletes the copy. After it: the new order, unlocked. This process's handles are then moved to the new file
(``open_files.replace_open_file``); another process waiting for the old file's lock takes the new one's instead.

By backup (Julia's protocol), why a SIGKILL at any instant is recoverable:

- *Lock*: one journaled write operation (the undo journal makes it all or nothing) creates the lock dataset and this
  group's entry. Killed before its commit: no entry, nothing changed. After: the entry says "roll back".
- *Backup*: the file is committed and ``fsync``-ed, copied to ``<backup>.pydaf-new``, which is ``fsync``-ed and only
  then renamed to the backup's name (and the folder ``fsync``-ed): a backup that exists is whole and durable before
  any live byte changes. Killed before the rename: the entry and no backup; nothing was replaced, so a reset just
  drops the lock. A backup left by an earlier operation (its lock dataset names another id) is never trusted.
- *Replace*: axes first (each a journaled operation), then each vector and matrix. Numbers are permuted in place,
  through writable maps of the live datasets, from maps of the backup (never more than a block in memory); these
  writes bypass the undo journal (it would have to hold the whole data set: the backup is their undo record) and
  happen only between committed operations, when no journal is pending, so the journal never rolls back part of a
  reorder and never sees the file change under it (its state check would refuse the file). Strings, and data that
  can't be written in place (chunked, compressed), are replaced by journaled write operations (old renamed aside until
  the new is committed). Killed anywhere: the next writable open first rolls back a pending journal (the metadata of
  the last commit), then the reset below.
- *Reset*: the permuted axes are those whose live entries differ from the backup's (axes are replaced before any
  property, and restored after every property, so a property that may have changed always depends on one); each of
  their vectors and matrices is restored (in place, or by a journaled copy), then the axes; the file is ``fsync``-ed;
  then the entry is dropped (the last entry: with the group and the lock dataset, in one commit), then the backup.
  Killed during a reset: the entry and the backup are still there, and the next reset does it again.
- *Cleanup*: once the last group of the call is cleaned up (so the groups of one file all end in the new order, or
  all roll back), the new data is ``fsync``-ed, every entry of the operation, the group and the lock dataset go in
  one commit, then the backup (Julia's order). Killed before that commit: the lock and the backup: rolled back.
  After it: the new order, and maybe a stale backup, which is never trusted (its lock dataset names another
  operation) and which a writable open deletes (Julia's next reorder would trust it).
- *Opening*: a writable open applies a pending journal first (``open_files``), then the reset; a read-only open
  refuses; mode ``w`` (which replaces the group) drops its entry without a rollback.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import stat
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, cast

import h5py
import numpy as np
from h5py import h5d, h5f, h5t

from ..._os.locks import hdf5_flock, hold_lock
from ..._os.maps import detach_region, map_file, map_region
from ..._os.removal import close_later, hold_to_free_later, remove_freeing_later
from ..._os.writeback import WritebackThread, start_writeback
from ...abc.reorder import (
    CrashCounter,
    FormatReorderPlan,
    PlannedAxis,
    PlannedMatrix,
    PlannedVector,
    ReorderProgress,
    permute_stored_matrix,
    permute_stored_vector,
    tick_crash_counter,
)
from ...errors import DafFormatError, DafIncompleteError, DafStorageError
from ...kernels.permute import (
    permute_csc_into,
    permute_dense_matrix_into,
    permute_sparse_vector_into,
    permute_vector_into,
    write_permuted_dense,
)
from .global_heap import REFERENCE, check_string_heaps
from .open_files import _LOCK_NOTE, _file_access_list, replace_open_file

if TYPE_CHECKING:
    from ...core.writers import DafWriter


class H5dfStorage(Protocol):
    """What the hooks use of :class:`~pydaf.formats.h5df.format.H5dfFormat` (which imports this module, so this one
    names its members instead of importing it): its HDF5 objects, its write operations (journaled, rolled back on
    failure), its staging of replaced objects, and the HDF5 helpers of its module."""
    root: h5py.Group
    file: h5py.File
    path: str
    mode: str
    is_writable: bool
    packed_default: bool
    _open_file: Any

    def format_default_name(self) -> str: ...
    def format_has_axis(self, axis: str, *, for_change: bool) -> bool: ...
    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, Any]: ...
    def format_axis_length(self, axis: str) -> int: ...
    def format_get_vector(self, axis: str, name: str) -> tuple[Any, Any]: ...
    def format_set_vector(self, axis: str, name: str, vector: Any) -> None: ...
    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None: ...
    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[Any, Any]: ...
    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str, matrix: Any) -> None: ...
    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None: ...
    def flush(self) -> None: ...
    def format_close(self) -> None: ...
    def _reading(self, what: str) -> AbstractContextManager[None]: ...
    def _writing(self, what: str, *created: tuple[h5py.Group, str]) -> AbstractContextManager[None]: ...
    def _replace(self, group: h5py.Group, name: str) -> None: ...
    def _group(self, *names: str) -> h5py.Group | None: ...
    def _required_group(self, *names: str) -> h5py.Group: ...
    def _write_numbers(self, group: h5py.Group, name: str, values: np.ndarray) -> h5py.Dataset: ...
    def _hdf5_child(self, group: h5py.Group, name: str, what: str) -> h5py.Group | h5py.Dataset | None: ...
    def _hdf5_names(self, group: h5py.Group | h5py.Dataset | None) -> set[str]: ...
    def _hdf5_delete(self, group: h5py.Group, name: str) -> None: ...
    def _hdf5_write_strings(self, group: h5py.Group, name: str, values: np.ndarray) -> None: ...
    def _hdf5_write_scalar_string(self, group: h5py.Group, name: str, value: str) -> None: ...


__all__ = ["REORDER_BACKUP_SUFFIX", "REORDER_LOCK_DATASET", "REORDER_REPOS_GROUP", "reorder_backup_path"]

#: Julia's names (``h5df_format.jl``): the file-root dataset holding the operation's id, the group of lock entries.
REORDER_LOCK_DATASET = "daf_reorder_lock"
REORDER_REPOS_GROUP = "daf_reorder_repos"
#: The backup beside the file (Julia's ``h5df_backup_path``).
REORDER_BACKUP_SUFFIX = ".reorder.backup"
# (where the backup is written before it is renamed to its name: a backup that exists is whole)
_BACKUP_STAGING_SUFFIX = ".pydaf-new"

#: Bytes of a dense matrix permuted per block (whole columns; one such temporary at a time).
_DENSE_BLOCK_BYTES = 1 << 25

#: Bytes per ``copy_file_range`` of the backup (its write-back started after each).
_COPY_CHUNK_BYTES = 1 << 26

_FICLONE = 0x40049409  # (Linux ioctl: share the extents of a file, on file systems that can: btrfs, xfs)

# The groups of each open file cleaned up by the operation under way (by its id), until its last one is: their
# entries all go in one commit (see the module's docstring).
_cleaned: weakref.WeakKeyDictionary[Any, dict[str, set[str]]] = weakref.WeakKeyDictionary()


def reorder_backup_path(path: str) -> str:
    """Where the reorder backup of the HDF5 file ``path`` lives (Julia's ``h5df_backup_path``).

    Example:
        >>> reorder_backup_path("/data/cells.h5dfs")
        '/data/cells.h5dfs.reorder.backup'
    """
    return os.path.abspath(path) + REORDER_BACKUP_SUFFIX


def _entry_name(group_path: str) -> str:
    """The lock entry of a daf group (Julia's ``lock_entry_name``: ``/`` is ``__``, ``/a/b`` is ``__a__b``)."""
    return group_path.replace("/", "__")


def _where(storage: H5dfStorage) -> str:
    return storage.format_default_name()


# The lock.


def _repos(storage: H5dfStorage) -> h5py.Group | None:
    node = storage._hdf5_child(storage.file, REORDER_REPOS_GROUP, "reorder lock group")
    return node if isinstance(node, h5py.Group) else None


def _lock_id(storage: H5dfStorage, root: h5py.Group) -> str | None:
    """The operation id of the lock dataset at ``root`` (a file's root), None if there is none."""
    node = storage._hdf5_child(root, REORDER_LOCK_DATASET, "reorder lock")
    if not isinstance(node, h5py.Dataset):
        return None
    value = node[()]
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size else b""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value).rstrip("\0")


def has_reorder_lock(storage: H5dfStorage) -> bool:
    """Whether this data set's group has a lock entry (a reorder under way, or interrupted).

    Example:
        >>> import pydaf, tempfile, os
        >>> has_reorder_lock(pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w").format)
        False
    """
    with storage._reading("reorder lock"):
        repos = _repos(storage)
        return repos is not None and _entry_name(storage.root.name) in repos


def lock_reorder(storage: H5dfStorage, operation_id: str) -> None:
    """Claim the reorder: the lock dataset (shared by the groups of one call through its id) and this group's entry,
    in one committed write operation.

    Example:
        >>> import pydaf, tempfile, os
        >>> daf = pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w")
        >>> lock_reorder(daf.format, "an-operation-id")
        >>> has_reorder_lock(daf.format), reset_reorder(daf.format), has_reorder_lock(daf.format)
        (True, True, False)
    """

    entry = _entry_name(storage.root.name)
    with storage._open_file.writing:
        repos = _repos(storage)
        entries = sorted(repos.keys()) if repos is not None else []
        existing = _lock_id(storage, storage.file)
        if existing is not None and existing != operation_id and entries:
            groups = ", ".join(name.replace("__", "/") for name in entries)
            raise DafIncompleteError(f"can't reorder: {storage.root.name}\nin the H5df file: {storage.path}\nanother "
                                     f"reorder operation: {existing}\nof the groups: {groups}\nis in progress or was "
                                     "interrupted", daf_name=_where(storage),
                                     hint="(call pydaf.reset_reorder_axes on those data sets to roll it back)")
        if existing != operation_id:
            _cleaned.pop(storage._open_file, None)
        created = [(storage.file, name) for name, missing in
                   ((REORDER_LOCK_DATASET, existing is None), (REORDER_REPOS_GROUP, repos is None)) if missing]
        if repos is not None:
            created.append((repos, entry))
        with storage._writing("reorder lock", *created):
            if existing != operation_id:
                if existing is not None:  # (a lock dataset with no entry: what a writer killed between the two left)
                    storage._hdf5_delete(storage.file, REORDER_LOCK_DATASET)
                storage._hdf5_write_scalar_string(storage.file, REORDER_LOCK_DATASET, operation_id)
            if repos is None:
                repos = storage.file.create_group(REORDER_REPOS_GROUP)
            storage._write_numbers(repos, entry, np.array([1], dtype=np.uint8))


# The backup.


def _fsync_path(path: str, *, folder: bool = False) -> None:
    fd = os.open(path, (os.O_RDONLY | os.O_DIRECTORY) if folder else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_file(source: str, destination: str) -> None:
    """Copy ``source`` to a new ``destination`` and make it durable: shared extents where the file system can, else
    an in-kernel copy (``copy_file_range``)."""
    with open(source, "rb") as reader, open(destination, "xb") as writer:
        source_fd, destination_fd = reader.fileno(), writer.fileno()
        try:
            fcntl.ioctl(destination_fd, _FICLONE, source_fd)
        except OSError:
            _copy_range(source_fd, destination_fd, 0, os.fstat(source_fd).st_size,
                        written=functools.partial(start_writeback, destination_fd))
        os.fsync(destination_fd)


def _remove_file(path: str) -> None:
    """Delete a file, durably (its folder synced), if it exists; its space is freed in the background."""
    if remove_freeing_later(None, path):
        _fsync_path(os.path.dirname(path) or ".", folder=True)


def _backup_id(storage: H5dfStorage, path: str) -> str | None:
    """The operation id a backup was taken under (its lock dataset), None if it has none or can't be read."""
    try:
        with h5py.File(path, "r", locking=False) as backup:
            return _lock_id(storage, backup)
    except (OSError, ValueError, KeyError, RuntimeError, DafFormatError):
        return None


def backup_reorder(storage: H5dfStorage, plan: FormatReorderPlan) -> None:
    """Start the reorder of this group: :func:`reorder_method` says how. By swap: the new file is begun beside the
    old one (see the module's docstring). By backup: the whole file is copied (once per operation: the groups of one
    call share it) to its durable backup.

    Example:
        >>> import pydaf, tempfile, os
        >>> from pydaf.abc.reorder import FormatReorderPlan
        >>> daf = pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w")
        >>> lock_reorder(daf.format, "an-operation-id"); backup_reorder(daf.format, FormatReorderPlan({}))
        >>> os.path.exists(swap_path(daf.format.path)), reset_reorder(daf.format)
        (True, True)
        >>> os.path.exists(swap_path(daf.format.path))
        False
    """
    path = reorder_backup_path(storage.path)
    with storage._open_file.writing:
        operation_id = _lock_id(storage, storage.file)
        if os.path.exists(path):
            if operation_id is not None and _backup_id(storage, path) == operation_id:
                return  # (taken for another group of this operation)
            _remove_file(path)  # (left by an earlier operation: never trusted)
        if operation_id is not None and reorder_method(storage) == "swap":
            _start_swap(storage, plan, operation_id)
            return
        staging = path + _BACKUP_STAGING_SUFFIX
        _remove_file(staging)
        storage.flush()  # (the lock is committed; nothing is pending)
        try:
            _fsync_path(storage.path)  # (the lock is durable before the backup exists)
            _copy_file(storage.path, staging)
            os.rename(staging, path)
            _fsync_path(os.path.dirname(path) or ".", folder=True)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(staging)
            raise DafStorageError(f"can't back up the H5df file: {storage.path}\nto: {path}\nfor reorder_axes "
                                  f"(nothing was changed)\n({type(error).__name__}: {error})") from error


# The swap: the permuted copy written beside the file, then renamed over it.

#: Whether an H5df reorder writes a permuted copy of the file and renames it over the file when it can (one write of
#: the data), rather than back up the file and permute it in place (two writes). Tests set it off to run the other.
REORDER_BY_SWAP = True

#: The permuted copy beside the file (``<file>.reorder.pydaf-swap``), until it is renamed over the file.
_SWAP_SUFFIX = ".reorder.pydaf-swap"


def swap_path(path: str) -> str:
    """Where the reorder by swap writes the permuted copy of the HDF5 file ``path`` (beside the file its path
    resolves to: the rename replaces that file, not a symbolic link to it).

    Example:
        >>> swap_path("/data/cells.h5df")
        '/data/cells.h5df.reorder.pydaf-swap'
    """
    return os.path.realpath(path) + _SWAP_SUFFIX


class _Swap:
    """A swap under way: the copy's path and descriptor, the operation, its plan, and the properties HDF5 itself
    rewrites in the copy once the numbers are written (strings, packed data)."""

    def __init__(self, path: str, target: str, fd: int, operation_id: str) -> None:
        self.path = path
        self.target = target
        self.fd = fd
        self.operation_id = operation_id
        self.plan = FormatReorderPlan({})
        self.pending: list[PlannedVector | PlannedMatrix] = []
        # (each finished part of the copy is written back while the rest is filled: the fsync before the rename
        # then waits for little)
        self.writeback: WritebackThread | None = WritebackThread(fd)

    def queue_writeback(self, offset: int, nbytes: int) -> None:
        """Start writing ``nbytes`` of the copy from ``offset`` to the disk: that part is finished."""
        if self.writeback is not None:
            self.writeback.queue(offset, nbytes)

    def stop_writeback(self) -> None:
        if self.writeback is not None:
            self.writeback.stop()
            self.writeback = None

    def close(self) -> None:
        self.stop_writeback()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # (a swap a simulated crash left, whose file is then closed without a reset)
        self.close()


# The swap under way of each open file (by its record).
_swaps: weakref.WeakKeyDictionary[Any, _Swap] = weakref.WeakKeyDictionary()


def reorder_method(storage: H5dfStorage) -> str:
    """How a reorder of this group, locked, goes: ``swap`` when it can (the file opened by path in this process, no
    other group of it open here or locked for the reorder, a regular file with one link, whose owner and group the
    new file can have), else ``backup`` (Julia's protocol).

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5dfs")
        >>> daf = pydaf.H5df(path + "#/one", "w+")
        >>> reorder_method(daf.format)
        'swap'
        >>> other = pydaf.H5df(path + "#/two", "w+")  # (another group of the file, open here)
        >>> reorder_method(daf.format)
        'backup'
    """
    record = storage._open_file
    if not REORDER_BY_SWAP or record.lock is None or record.journal is None:
        return "backup"
    repos = _repos(storage)
    entry = _entry_name(storage.root.name)
    if repos is not None and set(repos.keys()) != {entry}:
        return "backup"
    if any(other.root is None or other.root.name != storage.root.name for other in list(record.formats)):
        return "backup"  # (another group of the file open here: its handles and readers stay on the old file)
    try:
        status = os.stat(os.path.realpath(storage.path))
    except OSError:
        return "backup"
    if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1 or (status.st_dev, status.st_ino) != record.key:
        return "backup"
    if status.st_uid != os.geteuid() or status.st_gid not in (os.getegid(), *os.getgroups()):
        return "backup"  # (the new file could not keep the file's owner and group)
    return "swap"


def _planned(plan: FormatReorderPlan) -> list[PlannedVector | PlannedMatrix]:
    return [*plan.planned_vectors, *plan.planned_matrices]


def _live_object(storage: H5dfStorage, planned: PlannedVector | PlannedMatrix) -> Any:
    if isinstance(planned, PlannedVector):
        return storage._hdf5_child(storage._required_group("vectors", planned.axis), planned.name, "vector")
    return storage._hdf5_child(storage._required_group("matrices", planned.rows_axis, planned.columns_axis),
                               planned.name, "matrix")


def _swapped_parts(storage: H5dfStorage, planned: PlannedVector | PlannedMatrix, live: Any) -> Any:
    """The datasets of a property the swap permutes straight into the copy (numbers stored in place): the dataset of
    a dense one, the index parts and values (a dict) of a sparse one; None if HDF5 rewrites it in the copy."""
    if isinstance(live, h5py.Dataset):
        return live if _in_place(live) else None
    if isinstance(live, h5py.Group):
        indices = ("nzind",) if isinstance(planned, PlannedVector) else ("colptr", "rowval")
        return _sparse_parts(storage, live, live, indices, ("nzval",))
    return None


def _parts_datasets(parts: Any) -> list[h5py.Dataset]:
    """The datasets of what :func:`_swapped_parts` gives."""
    if parts is None:
        return []
    if isinstance(parts, h5py.Dataset):
        return [parts]
    *pairs, values = parts
    return [live for _, live in pairs] + [live for _, live in values.values()]


def _swapped_ranges(storage: H5dfStorage, plan: FormatReorderPlan) -> list[tuple[int, int]]:
    """The (offset, length) of the bytes the swap writes itself: the rest of the file is copied as it is."""
    datasets: list[h5py.Dataset] = []
    for planned in _planned(plan):
        datasets += _parts_datasets(_swapped_parts(storage, planned, _live_object(storage, planned)))
    return sorted((dataset.id.get_offset(), dataset.id.get_storage_size()) for dataset in datasets if dataset.size)


def _copy_range(source: int, destination: int, start: int, end: int, *,
                written: Callable[[int, int], object] | None = None) -> None:
    """Copy bytes ``start:end`` of one file to the same place of another (in-kernel where it can); ``written(at,
    nbytes)`` is called once each chunk is copied (as by :func:`write_permuted_dense`: to start its write-back)."""
    done = start
    while done < end:
        length = min(end - done, _COPY_CHUNK_BYTES)
        try:
            copied = os.copy_file_range(source, destination, length, done, done)
        except OSError as error:
            if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            copied = os.pwrite(destination, os.pread(source, length, done), done)
        if copied == 0:
            raise DafStorageError(f"the file changed size while it was copied (at byte {done} of {end})")
        if written is not None:
            written(done, copied)
        done += copied


def _start_swap(storage: H5dfStorage, plan: FormatReorderPlan, operation_id: str) -> None:
    """Begin the permuted copy: the whole file's space allocated (a full disk fails here, before anything), and
    every byte copied but those of the numbers the replacement permutes into it."""
    target = os.path.realpath(storage.path)
    path = target + _SWAP_SUFFIX
    _forget_swap(storage)
    _remove_file(path)  # (left by a killed reorder)
    storage.flush()
    ranges = _swapped_ranges(storage, plan)
    fd = -1
    swap = None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        swap = _Swap(path, target, fd, operation_id)
        source = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        try:
            status = os.fstat(source)
            if os.fstat(fd).st_gid != status.st_gid:
                os.fchown(fd, -1, status.st_gid)
            os.fchmod(fd, stat.S_IMODE(status.st_mode))
            if status.st_size:
                os.posix_fallocate(fd, 0, status.st_size)
            position = 0
            for offset, length in [*ranges, (status.st_size, 0)]:
                if offset > position:
                    _copy_range(source, fd, position, offset, written=swap.queue_writeback)
                position = max(position, offset + length)
        finally:
            os.close(source)
    except BaseException as error:
        if swap is not None:
            swap.close()
        elif fd >= 0:
            os.close(fd)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if isinstance(error, OSError | DafStorageError):
            raise DafStorageError(f"can't write the reordered copy: {path}\nof the H5df file: {storage.path}\n"
                                  f"(nothing was changed)\n({type(error).__name__}: {error})") from error
        raise
    _swaps[storage._open_file] = swap


def _forget_swap(storage: H5dfStorage) -> None:
    swap = _swaps.pop(storage._open_file, None)
    if swap is not None:
        swap.close()


def _swap_map(swap: _Swap, dataset: h5py.Dataset, dtype: np.dtype) -> np.ndarray:
    """A writable map of where ``dataset`` of the file is in the copy (its space allocated when the copy began)."""
    if dataset.size == 0:
        return np.empty(dataset.shape, dtype=dtype)
    region = map_file(swap.fd, swap.path, dataset.id.get_offset(), dataset.size * dtype.itemsize, writable=True)
    return np.frombuffer(region, dtype=dtype, count=dataset.size).reshape(dataset.shape)


def _swap_values(storage: H5dfStorage, swap: _Swap, nzval: h5py.Dataset | None,
                 nnz: int) -> tuple[np.ndarray, np.ndarray]:
    if nzval is None:  # (all-true Bool values are not stored: a scratch pair stands for them)
        return np.zeros(nnz, dtype=np.uint8), np.empty(nnz, dtype=np.uint8)
    dtype = _raw_dtype(nzval)
    return _map(storage.path, nzval, dtype, writable=False), _swap_map(swap, nzval, dtype)


def _swap_property(storage: H5dfStorage, swap: _Swap, planned: PlannedVector | PlannedMatrix,
                   rows_planned: PlannedAxis | None, columns_planned: PlannedAxis | None) -> bool:
    """Permute a property's numbers from the file into the copy; False if HDF5 must rewrite it instead."""
    parts = _swapped_parts(storage, planned, _live_object(storage, planned))
    if parts is None:
        return False
    rows_permutation = None if rows_planned is None else rows_planned.permutation
    columns_permutation = None if columns_planned is None else columns_planned.permutation
    if isinstance(parts, h5py.Dataset):
        if parts.size:
            source = _map(storage.path, parts, _raw_dtype(parts), writable=False)
            write_permuted_dense(source if source.ndim == 1 else source.T, rows_permutation, columns_permutation,
                                 swap.fd, parts.id.get_offset(), written=swap.queue_writeback)
        return True
    if isinstance(planned, PlannedVector):
        (nzind, _), values = parts
        nzval, out_nzval = _swap_values(storage, swap, values.get("nzval", (None, None))[1], nzind.shape[0])
        assert rows_planned is not None
        permute_sparse_vector_into(_map_index(storage.path, nzind, writable=False), nzval,
                                   rows_planned.inverse_permutation, _swap_index(swap, nzind), out_nzval)
        _queue_swapped(swap, parts)
        return True
    (colptr, _), (rowval, _), values = parts
    nzval, out_nzval = _swap_values(storage, swap, values.get("nzval", (None, None))[1], rowval.shape[0])
    permute_csc_into((storage.format_axis_length(planned.rows_axis), storage.format_axis_length(planned.columns_axis)),
                     _map_index(storage.path, colptr, writable=False), _map_index(storage.path, rowval, writable=False),
                     nzval, None if rows_planned is None else rows_planned.inverse_permutation, columns_permutation,
                     _swap_index(swap, colptr), _swap_index(swap, rowval), out_nzval)
    _queue_swapped(swap, parts)
    return True


def _queue_swapped(swap: _Swap, parts: Any) -> None:
    """Start the write-back of a sparse property's numbers in the copy (only now: they are written through maps,
    and a page written back while it is still being filled is faulted in again)."""
    for dataset in _parts_datasets(parts):
        swap.queue_writeback(dataset.id.get_offset(), dataset.id.get_storage_size())


def _swap_index(swap: _Swap, dataset: h5py.Dataset) -> np.ndarray:
    dtype = _index_dtype(dataset)
    assert dtype is not None
    return _swap_map(swap, dataset, dtype)


def _replace_into_swap(storage: H5dfStorage, swap: _Swap, plan: FormatReorderPlan, progress: ReorderProgress,
                       crash_counter: CrashCounter | None) -> None:
    swap.plan = plan
    rows_planned: PlannedAxis | None
    for planned in _planned(plan):
        if isinstance(planned, PlannedVector):
            rows_planned, columns_planned = plan.planned_axes[planned.axis], None
        else:
            rows_planned = plan.planned_axes.get(planned.rows_axis)
            columns_planned = plan.planned_axes.get(planned.columns_axis)
        if not _swap_property(storage, swap, planned, rows_planned, columns_planned):
            swap.pending.append(planned)
        if progress is not None:
            progress(planned.n_replacement_elements)
        tick_crash_counter(crash_counter)


def _finish_copy(storage: H5dfStorage, swap: _Swap) -> None:
    """HDF5's part of the copy: the permuted axes, the properties it must rewrite, and the lock gone (the copy is the
    file after the reorder); then the copy is made durable."""
    fid = h5f.open(os.fsencode(swap.path), h5f.ACC_RDWR, fapl=_file_access_list())
    file = h5py.File(fid)
    try:
        root = file if storage.root.name == "/" else file[storage.root.name]
        copy: H5dfStorage = cast(Any, type(storage))(root, "r+", default_name=storage.format_default_name(),
                                                      complete_path=None)
        copy.packed_default = storage.packed_default
        axes = copy._required_group("axes")
        for axis, planned_axis in swap.plan.planned_axes.items():
            if storage.format_has_axis(axis, for_change=False):
                with copy._writing(f"axis: {axis}"):
                    copy._hdf5_delete(axes, axis)
                    copy._hdf5_write_strings(axes, axis, np.asarray(planned_axis.new_entries, dtype=object))
        for planned in swap.pending:
            if isinstance(planned, PlannedVector):
                vector, _ = storage.format_get_vector(planned.axis, planned.name)
                copy.format_delete_vector(planned.axis, planned.name, for_set=True)
                copy.format_set_vector(planned.axis, planned.name,
                                       permute_stored_vector(vector, swap.plan.planned_axes[planned.axis]))
            else:
                matrix, _ = storage.format_get_matrix(planned.rows_axis, planned.columns_axis, planned.name)
                permuted = permute_stored_matrix(matrix, swap.plan.planned_axes.get(planned.rows_axis),
                                                 swap.plan.planned_axes.get(planned.columns_axis))
                copy.format_delete_matrix(planned.rows_axis, planned.columns_axis, planned.name, for_set=True)
                copy.format_set_matrix(planned.rows_axis, planned.columns_axis, planned.name, permuted)
        with copy._writing("reorder lock"):
            copy._hdf5_delete(file, REORDER_REPOS_GROUP)
            copy._hdf5_delete(file, REORDER_LOCK_DATASET)
        copy.format_close()
    finally:
        file.close()
    swap.stop_writeback()
    os.fsync(swap.fd)


def _finish_swap(storage: H5dfStorage, swap: _Swap) -> None:
    """Rename the finished copy over the file (the reorder's one step: before it, the file is as it was and locked;
    after it, the file is the copy, in the new order and unlocked), then point this process's handles at it."""
    try:
        _finish_copy(storage, swap)
        hold = hold_lock(swap.path, exclusive=True, what="H5df file", note=_LOCK_NOTE)
        hdf5_flock(swap.fd, swap.path)  # (other HDF5 programs are kept out until the new file's own handle opens)
    except (OSError, ValueError, RuntimeError) as error:
        raise DafStorageError(f"can't finish the reordered copy: {swap.path}\nof the H5df file: {storage.path}\n"
                              f"(nothing was changed)\n({type(error).__name__}: {error})") from error
    held = hold_to_free_later(swap.target)  # (the old file's blocks are freed in the background once it is closed)
    try:
        os.rename(swap.path, swap.target)
    except OSError as error:
        close_later(held)
        raise DafStorageError(f"can't rename the reordered copy: {swap.path}\nover the H5df file: {storage.path}\n"
                              f"(nothing was changed)\n({type(error).__name__}: {error})") from error
    try:
        _fsync_path(os.path.dirname(swap.target), folder=True)
        replace_open_file(storage._open_file, storage.path, hold)
    except BaseException as error:
        storage._open_file.abandon()  # (it is the old file: writing it would lose the writes)
        raise DafStorageError(f"the H5df file: {storage.path}\nwas reordered, but this process could not open the "
                              f"reordered file\n({type(error).__name__}: {error})",
                              hint="(open the data set again)") from error
    finally:
        close_later(held)
        _forget_swap(storage)


# Reading and writing datasets in place.


def _is_numeric(dataset: h5py.Dataset) -> bool:
    return dataset.id.get_type().get_class() in (h5t.INTEGER, h5t.FLOAT, h5t.BITFIELD, h5t.ENUM)


def _raw_dtype(dataset: h5py.Dataset) -> np.dtype:
    """An unsigned type of the dataset's element size: its bytes, moved as they are (any numeric type)."""
    size = dataset.id.get_type().get_size()
    return np.dtype(f"<u{size}") if size in (1, 2, 4, 8) else np.dtype((np.void, size))


def _in_place(dataset: h5py.Dataset | None) -> bool:
    """Whether a dataset's elements can be read or written in place through a map: numeric, contiguous, unfiltered,
    allocated, aligned (pydaf and Julia write every numeric dataset so, unless packed)."""
    if not isinstance(dataset, h5py.Dataset) or not _is_numeric(dataset):
        return False
    if dataset.size == 0:
        return True
    dcpl = dataset.id.get_create_plist()
    if dcpl.get_layout() != h5d.CONTIGUOUS or dcpl.get_nfilters() or dcpl.get_external_count():
        return False
    offset = dataset.id.get_offset()
    itemsize = dataset.id.get_type().get_size()
    return offset is not None and offset % itemsize == 0 and dataset.id.get_storage_size() == dataset.size * itemsize


def _index_dtype(dataset: h5py.Dataset) -> np.dtype | None:
    """The native integer type of an index dataset (``nzind``, ``colptr``, ``rowval``), None if it is not one."""
    tid = dataset.id.get_type()
    if tid.get_class() != h5t.INTEGER:
        return None
    dtype = tid.dtype
    return dtype if dtype.byteorder in ("=", "|", "<") else None


def _detach(path: str, *datasets: h5py.Dataset | None) -> None:
    """Before ``datasets`` of the live file are written in place: what readers hold of their bytes is moved to
    private memory (they keep their values). All of a property's parts are detached before any is mapped to be
    written (maps start at a page: a later detach would take an earlier writable map of the same page with it)."""
    for dataset in datasets:
        if dataset is not None and dataset.size:
            detach_region(path, dataset.id.get_offset(), dataset.id.get_storage_size())


def _map(path: str, dataset: h5py.Dataset, dtype: np.dtype, *, writable: bool) -> np.ndarray:
    """The elements of an in-place dataset (see :func:`_in_place`) of the file ``path``, mapped, in its HDF5 shape
    (a writable map only after :func:`_detach`)."""
    if dataset.size == 0:
        return np.zeros(dataset.shape, dtype=dtype)
    offset = dataset.id.get_offset()
    nbytes = dataset.size * dtype.itemsize
    region = map_region(path, offset, nbytes, writable=writable)
    return np.frombuffer(region, dtype=dtype, count=dataset.size).reshape(dataset.shape)


def _map_index(path: str, dataset: h5py.Dataset, *, writable: bool) -> np.ndarray:
    """:func:`_map` of an index dataset :func:`_sparse_parts` accepted (so its :func:`_index_dtype` is not None)."""
    dtype = _index_dtype(dataset)
    assert dtype is not None
    return _map(path, dataset, dtype, writable=writable)


@contextlib.contextmanager
def _open_backup(storage: H5dfStorage, path: str) -> Iterator[h5py.Group]:
    """This data set's group in the backup file ``path``."""
    try:
        backup = h5py.File(path, "r", locking=False)
    except (OSError, ValueError) as error:
        raise DafFormatError(f"can't read the reorder backup: {path}\nof the H5df file: {storage.path}\n({error})",
                             daf_name=_where(storage),
                             hint=("(a copy cut short by a killed Julia reorder: the data set was not changed yet; "
                                   "delete the backup, then call pydaf.reset_reorder_axes again)")) from error
    try:
        group = _backup_child(storage, backup, *(name for name in storage.root.name.split("/") if name))
        if not isinstance(group, h5py.Group):
            raise DafFormatError(f"the reorder backup: {path}\nhas no group: {storage.root.name}",
                                 daf_name=_where(storage))
        yield group
    finally:
        backup.close()


def _backup_child(storage: H5dfStorage, group: h5py.Group | None, *names: str) -> h5py.Group | h5py.Dataset | None:
    node: Any = group
    for name in names:
        if not isinstance(node, h5py.Group):
            return None
        node = storage._hdf5_child(node, name, "object")
    return node


# Replacing.


def replace_reorder(storage: H5dfStorage, plan: FormatReorderPlan, progress: ReorderProgress,
                    crash_counter: CrashCounter | None) -> None:
    """Write the permuted axes, then vectors, then matrices of ``plan`` (see the module's docstring).

    Example:
        >>> import pydaf, tempfile, os
        >>> from pydaf.abc.reorder import PlannedAxis
        >>> from pydaf.core.reorder import build_reorder_plan
        >>> daf = pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w")
        >>> daf = daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [1, 2, 3])
        >>> plan = build_reorder_plan(daf.format, {"cell": PlannedAxis.of(daf.axis_vector("cell"), [2, 0, 1])})
        >>> lock_reorder(daf.format, "an-operation-id"); backup_reorder(daf.format, plan)
        >>> replace_reorder(daf.format, plan, None, None); cleanup_reorder(daf.format)
        >>> daf.format.format_get_vector("cell", "age")[0].tolist(), has_reorder_lock(daf.format)
        ([3, 1, 2], False)
    """

    swap = _swaps.get(storage._open_file)
    if swap is not None:
        with storage._open_file.writing:
            if swap.operation_id == _lock_id(storage, storage.file):
                _replace_into_swap(storage, swap, plan, progress, crash_counter)
                return
    backup_path = reorder_backup_path(storage.path)
    with storage._open_file.writing, _open_backup(storage, backup_path) as backup:
        storage.flush()  # (in-place writes are made only while no journal is pending: see the module's docstring)
        axes = storage._required_group("axes")
        for axis, planned_axis in plan.planned_axes.items():
            if storage.format_has_axis(axis, for_change=False):
                with storage._writing(f"axis: {axis}", (axes, axis)):
                    storage._replace(axes, axis)
                    storage._hdf5_write_strings(axes, axis, np.asarray(planned_axis.new_entries, dtype=object))
        live_fd = os.open(storage.path, os.O_RDONLY | os.O_CLOEXEC)  # (to start the write-back of what is written)
        try:
            for planned_vector in plan.planned_vectors:
                _replace_vector(storage, backup, backup_path, planned_vector.axis, planned_vector.name,
                                plan.planned_axes[planned_vector.axis])
                if progress is not None:
                    progress(planned_vector.n_replacement_elements)
                tick_crash_counter(crash_counter)
            for planned_matrix in plan.planned_matrices:
                _replace_matrix(storage, backup, backup_path, planned_matrix.rows_axis, planned_matrix.columns_axis,
                                planned_matrix.name, plan.planned_axes.get(planned_matrix.rows_axis),
                                plan.planned_axes.get(planned_matrix.columns_axis))
                start_writeback(live_fd)  # (the cleanup's fsync then waits for less)
                if progress is not None:
                    progress(planned_matrix.n_replacement_elements)
                tick_crash_counter(crash_counter)
        finally:
            os.close(live_fd)
        storage._open_file.retained_maps.clear()


def _replace_vector(storage: H5dfStorage, backup: h5py.Group, backup_path: str, axis: str, name: str,
                    planned_axis: PlannedAxis) -> None:

    live = storage._hdf5_child(storage._required_group("vectors", axis), name, "vector")
    source = _backup_child(storage, backup, "vectors", axis, name)
    if isinstance(live, h5py.Dataset) and isinstance(source, h5py.Dataset):
        if _in_place(live) and _in_place(source) and _same_type(live, source):
            dtype = _raw_dtype(live)
            _detach(storage.path, live)
            permute_vector_into(_map(backup_path, source, dtype, writable=False), planned_axis.permutation,
                                _map(storage.path, live, dtype, writable=True))
            return
    elif isinstance(live, h5py.Group) and isinstance(source, h5py.Group):
        parts = _sparse_parts(storage, live, source, ("nzind",), ("nzval",))
        if parts is not None:
            (source_nzind, live_nzind), values = parts
            source_nzval, live_nzval = values.get("nzval", (None, None))
            _detach(storage.path, live_nzind, live_nzval)
            permute_sparse_vector_into(*_with_values(source_nzind, live_nzind, source_nzval, live_nzval, storage,
                                                     backup_path, planned_axis.inverse_permutation))
            return
    vector, _ = storage.format_get_vector(axis, name)
    permuted = permute_stored_vector(vector, planned_axis)
    storage.format_delete_vector(axis, name, for_set=True)
    storage.format_set_vector(axis, name, permuted)


def _replace_matrix(storage: H5dfStorage, backup: h5py.Group, backup_path: str, rows_axis: str, columns_axis: str,
                    name: str, rows_planned: PlannedAxis | None, columns_planned: PlannedAxis | None) -> None:

    live = storage._hdf5_child(storage._required_group("matrices", rows_axis, columns_axis), name, "matrix")
    source = _backup_child(storage, backup, "matrices", rows_axis, columns_axis, name)
    rows_permutation = None if rows_planned is None else rows_planned.permutation
    columns_permutation = None if columns_planned is None else columns_planned.permutation
    if isinstance(live, h5py.Dataset) and isinstance(source, h5py.Dataset):
        if _in_place(live) and _in_place(source) and _same_type(live, source):
            dtype = _raw_dtype(live)
            _detach(storage.path, live)
            _permute_stored_dense(_map(backup_path, source, dtype, writable=False), rows_permutation,
                                  columns_permutation, _map(storage.path, live, dtype, writable=True))
            return
    elif isinstance(live, h5py.Group) and isinstance(source, h5py.Group):
        parts = _sparse_parts(storage, live, source, ("colptr", "rowval"), ("nzval",))
        if parts is not None:
            (source_colptr, live_colptr), (source_rowval, live_rowval), values = parts
            source_nzval, live_nzval = values.get("nzval", (None, None))
            _detach(storage.path, live_colptr, live_rowval, live_nzval)
            shape = (storage.format_axis_length(rows_axis), storage.format_axis_length(columns_axis))
            colptr = _map_index(backup_path, source_colptr, writable=False)
            rowval = _map_index(backup_path, source_rowval, writable=False)
            nzval, out_nzval = _values(source_nzval, live_nzval, storage, backup_path, rowval.shape[0])
            permute_csc_into(shape, colptr, rowval, nzval,
                             None if rows_planned is None else rows_planned.inverse_permutation, columns_permutation,
                             _map_index(storage.path, live_colptr, writable=True),
                             _map_index(storage.path, live_rowval, writable=True), out_nzval)
            return
    matrix, _ = storage.format_get_matrix(rows_axis, columns_axis, name)
    permuted = permute_stored_matrix(matrix, rows_planned, columns_planned)
    storage.format_delete_matrix(rows_axis, columns_axis, name, for_set=True)
    storage.format_set_matrix(rows_axis, columns_axis, name, permuted)


def _permute_stored_dense(source: np.ndarray, rows_permutation: np.ndarray | None,
                          columns_permutation: np.ndarray | None, out: np.ndarray) -> None:
    """:func:`~pydaf.kernels.permute.permute_dense_matrix_into` of a matrix as H5df stores it (HDF5 shape: columns by
    rows, C order: the transpose of the Daf matrix), from the backup's map to the live map."""
    permute_dense_matrix_into(source.T, rows_permutation, columns_permutation, out.T)


def _same_type(live: h5py.Dataset, source: h5py.Dataset) -> bool:
    return live.shape == source.shape and live.id.get_type() == source.id.get_type()


def _sparse_parts(storage: H5dfStorage, live: h5py.Group, source: h5py.Group, indices: tuple[str, ...],
                  optional: tuple[str, ...]) -> Any:
    """The ``(source, live)`` datasets of a sparse property's index parts, then a dict of its present value parts,
    if all can be permuted in place (numbers: a ``nztxt`` has strings); else None."""
    live_names, source_names = storage._hdf5_names(live), storage._hdf5_names(source)
    if live_names != source_names or not live_names <= {*indices, *optional}:
        return None
    pairs = []
    for part in indices:
        if part not in live_names:
            return None
        source_part, live_part = source[part], live[part]
        if not (_in_place(live_part) and _in_place(source_part) and _same_type(live_part, source_part)
                and _index_dtype(live_part) is not None):
            return None
        pairs.append((source_part, live_part))
    values = {}
    for part in optional:
        if part in live_names:
            source_part, live_part = source[part], live[part]
            if not (_in_place(live_part) and _in_place(source_part) and _same_type(live_part, source_part)):
                return None
            values[part] = (source_part, live_part)
    return (*pairs, values)


def _values(source_nzval: h5py.Dataset | None, live_nzval: h5py.Dataset | None, storage: H5dfStorage,
            backup_path: str, nnz: int) -> tuple[np.ndarray, np.ndarray]:
    """The source and destination of a sparse property's values (all-true Bool values are not stored: a scratch pair
    stands for them)."""
    if source_nzval is None or live_nzval is None:
        return np.zeros(nnz, dtype=np.uint8), np.empty(nnz, dtype=np.uint8)
    dtype = _raw_dtype(live_nzval)
    return (_map(backup_path, source_nzval, dtype, writable=False),
            _map(storage.path, live_nzval, dtype, writable=True))


def _with_values(source_nzind: h5py.Dataset, live_nzind: h5py.Dataset, source_nzval: h5py.Dataset | None,
                 live_nzval: h5py.Dataset | None, storage: H5dfStorage, backup_path: str,
                 inverse_permutation: np.ndarray) -> tuple[np.ndarray, ...]:
    nzind = _map_index(backup_path, source_nzind, writable=False)
    nzval, out_nzval = _values(source_nzval, live_nzval, storage, backup_path, nzind.shape[0])
    out_nzind = _map_index(storage.path, live_nzind, writable=True)
    return nzind, nzval, inverse_permutation, out_nzind, out_nzval


# Cleanup and reset.


def _drop_lock(storage: H5dfStorage, entries: set[str]) -> None:
    """Remove the lock entries ``entries`` (in one commit); with the last ones, the group and the lock dataset too,
    then the backup (Julia's order: a lock always has its backup, once the backup was made)."""
    repos = _repos(storage)
    if repos is None:
        return
    remaining = set(repos.keys()) - entries
    with storage._writing("reorder lock"):
        if remaining:
            for entry in sorted(entries & set(repos.keys())):
                storage._hdf5_delete(repos, entry)
        else:
            storage._hdf5_delete(storage.file, REORDER_REPOS_GROUP)
            if _lock_id(storage, storage.file) is not None:
                storage._hdf5_delete(storage.file, REORDER_LOCK_DATASET)
    if not remaining:
        _cleaned.pop(storage._open_file, None)
        _remove_stale_backup(storage)


def _remove_stale_backup(storage: H5dfStorage) -> None:
    """Delete the backup (and a staging copy) if no reorder of the file is pending: a kill between the removal of
    the lock and of the backup leaves one, which nothing must trust (Julia's next reorder would use it as its source:
    a writable pydaf open removes it)."""
    if _repos(storage) is None:
        _forget_swap(storage)
        _remove_file(reorder_backup_path(storage.path))
        _remove_file(reorder_backup_path(storage.path) + _BACKUP_STAGING_SUFFIX)
        _remove_file(swap_path(storage.path))


def cleanup_reorder(storage: H5dfStorage) -> None:
    """The reorder of this group is done; once every group of the operation is, make the new data durable and drop
    the backup and the lock (see the module's docstring).

    Example:
        >>> import pydaf, tempfile, os
        >>> daf = pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w")
        >>> lock_reorder(daf.format, "an-operation-id"); cleanup_reorder(daf.format); has_reorder_lock(daf.format)
        False
    """
    with storage._open_file.writing:
        repos = _repos(storage)
        operation_id = _lock_id(storage, storage.file)
        if repos is None or operation_id is None:
            return
        swap = _swaps.get(storage._open_file)
        if swap is not None and swap.operation_id == operation_id:
            _finish_swap(storage, swap)
            return
        cleaned = _cleaned.setdefault(storage._open_file, {}).setdefault(operation_id, set())
        cleaned.add(_entry_name(storage.root.name))
        if not set(repos.keys()) <= cleaned:
            return  # (the other groups of this operation are still to be cleaned up)
        storage.flush()
        _fsync_path(storage.path)  # (the new data is durable before its backup goes)
        _drop_lock(storage, cleaned)


def reset_reorder(storage: H5dfStorage) -> bool:
    """Roll an interrupted reorder of this group back to the old order, from the backup; whether there was one.

    Example:
        >>> import pydaf, tempfile, os
        >>> reset_reorder(pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w").format)
        False
    """
    with storage._open_file.writing:
        if not has_reorder_lock(storage):
            return False
        backup_path = reorder_backup_path(storage.path)
        if os.path.exists(backup_path):
            storage.flush()
            with _open_backup(storage, backup_path) as backup:
                _restore_from_backup(storage, backup, backup_path)
            storage._open_file.retained_maps.clear()
            storage.flush()
            _fsync_path(storage.path)  # (restored durably before the backup goes)
        # (No backup: killed before it was whole, so nothing was replaced.)
        _drop_lock(storage, {_entry_name(storage.root.name)})
    return True


def _strings(storage: H5dfStorage, group: h5py.Group, name: str, path: str, what: str) -> np.ndarray | None:
    """A string dataset of the backup (its heap checked first, as every string read of H5df), None if not one."""
    dataset = storage._hdf5_child(group, name, what)
    if not isinstance(dataset, h5py.Dataset) or dataset.ndim != 1:
        return None
    string_type = dataset.id.get_type()
    if not isinstance(string_type, h5t.TypeStringID):
        return None
    offset = dataset.id.get_offset()
    if string_type.is_variable_str() and offset is not None and \
            dataset.id.get_storage_size() == dataset.size * REFERENCE.itemsize:
        check_string_heaps(path, offset, dataset.size, what)
    return np.asarray(dataset.asstr()[()], dtype=object)


def _restore_from_backup(storage: H5dfStorage, backup: h5py.Group, backup_path: str) -> None:
    """Restore every vector and matrix of each axis whose entries differ from the backup's, then those axes."""
    backup_axes = _backup_child(storage, backup, "axes")
    changed = []
    for axis in sorted(storage._hdf5_names(backup_axes)):
        old = _strings(storage, backup_axes, axis, backup_path, f"axis: {axis} of the reorder backup")
        if old is None:
            continue
        if storage.format_has_axis(axis, for_change=False):
            live, _ = storage.format_axis_vector(axis)
            if np.array_equal(np.asarray(live, dtype=object), old):
                continue
        changed.append(axis)
    if not changed:
        return
    backup_vectors = _backup_child(storage, backup, "vectors")
    for axis in changed:
        backup_group = _backup_child(storage, backup_vectors, axis)
        if isinstance(backup_group, h5py.Group) and storage._group("vectors", axis) is not None:
            for name in sorted(storage._hdf5_names(backup_group)):
                _restore_object(storage, storage._required_group("vectors", axis), backup_group, name, backup_path,
                                f"vector: {name}\nof the axis: {axis}")
    backup_matrices = _backup_child(storage, backup, "matrices")
    for rows_axis in sorted(storage._hdf5_names(backup_matrices)):
        for columns_axis in sorted(storage._hdf5_names(_backup_child(storage, backup_matrices, rows_axis))):
            if rows_axis not in changed and columns_axis not in changed:
                continue
            backup_group = _backup_child(storage, backup_matrices, rows_axis, columns_axis)
            if not isinstance(backup_group, h5py.Group) or storage._group("matrices", rows_axis,
                                                                          columns_axis) is None:
                continue
            for name in sorted(storage._hdf5_names(backup_group)):
                _restore_object(storage, storage._required_group("matrices", rows_axis, columns_axis), backup_group,
                                name, backup_path, f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}")
    axes = storage._required_group("axes")
    for axis in changed:  # (last: until they are restored, a reset killed part way finds the same axes changed)
        _restore_object(storage, axes, backup_axes, axis, backup_path, f"axis: {axis}")


def _restore_object(storage: H5dfStorage, live_group: h5py.Group, backup_group: h5py.Group, name: str,
                    backup_path: str, what: str) -> None:
    """Restore ``name`` of ``live_group`` from the backup: its bytes copied in place if it has the same numeric
    datasets, else the backup's object copied over it in one journaled write operation."""
    live = storage._hdf5_child(live_group, name, "object")
    source = storage._hdf5_child(backup_group, name, "object")
    if source is None:
        return
    pairs = _restorable_in_place(storage, live, source)
    if pairs is not None:
        _detach(storage.path, *(live_part for live_part, _ in pairs))
        for live_part, source_part in pairs:
            dtype = _raw_dtype(live_part)
            np.copyto(_map(storage.path, live_part, dtype, writable=True),
                      _map(backup_path, source_part, dtype, writable=False))
        return
    with storage._writing(what, (live_group, name)):
        if live is not None:
            storage._replace(live_group, name)
        backup_group.copy(source, live_group, name=name)


def _restorable_in_place(storage: H5dfStorage, live: Any,
                         source: Any) -> list[tuple[h5py.Dataset, h5py.Dataset]] | None:
    if isinstance(live, h5py.Dataset) and isinstance(source, h5py.Dataset):
        return [(live, source)] if _in_place(live) and _in_place(source) and _same_type(live, source) else None
    if isinstance(live, h5py.Group) and isinstance(source, h5py.Group):
        names = storage._hdf5_names(live)
        if names != storage._hdf5_names(source) or not names:
            return None
        pairs = []
        for part in sorted(names):
            live_part, source_part = live[part], source[part]
            if not (isinstance(live_part, h5py.Dataset) and isinstance(source_part, h5py.Dataset)
                    and _in_place(live_part) and _in_place(source_part) and _same_type(live_part, source_part)):
                return None
            pairs.append((live_part, source_part))
        return pairs
    return None


# Opening a data set an interrupted reorder left.


def check_interrupted_reorder(daf: DafWriter) -> None:
    """The open policy: a writable open rolls an interrupted reorder back (with a warning); a read-only open raises
    :class:`~pydaf.errors.DafIncompleteError` saying how to. A reorder live in this process holds the data set's
    write lock: the checks wait for it (so they never roll back a live reorder). A group opened in mode ``w`` is
    replaced: its lock entry goes without any rollback.

    Example:
        >>> import pydaf, tempfile, os
        >>> check_interrupted_reorder(pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w"))
    """
    storage = cast("H5dfStorage", daf.format)  # (an H5df's format is an H5dfFormat)
    locked = has_reorder_lock(storage)
    if storage.mode == "w" or (storage.is_writable and not locked and (
            os.path.exists(reorder_backup_path(storage.path)) or os.path.exists(swap_path(storage.path)))):
        with daf.write_lock(), storage._open_file.writing:
            if storage.mode == "w" and has_reorder_lock(storage):
                _drop_lock(storage, {_entry_name(storage.root.name)})
            else:
                _remove_stale_backup(storage)
        return
    if not locked:
        return
    if storage.is_writable:
        from ...core.reorder import reset_reorder_axes

        if os.path.exists(reorder_backup_path(storage.path)):
            done = "it was rolled back to the old order"
        else:
            done = ("it was killed before its backup was made, or before its reordered copy replaced the file "
                    "(nothing had changed): its lock was removed")
        if reset_reorder_axes(daf):
            warnings.warn(f"the H5df data: {_where(storage)}\nwas left by an interrupted reorder_axes: {done}",
                          stacklevel=4)
        return
    with daf.read_lock():
        if has_reorder_lock(storage):
            raise DafIncompleteError(
                f"the H5df data: {_where(storage)}\nwas left by an interrupted reorder_axes (its lock "
                f"{REORDER_REPOS_GROUP}/{_entry_name(storage.root.name)} and backup: "
                f"{reorder_backup_path(storage.path)})", daf_name=_where(storage), daf_preposition=None,
                hint="(open it once in mode r+, which rolls it back, or call pydaf.reset_reorder_axes on it)")
