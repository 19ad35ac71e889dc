"""ZarrDaf's :func:`pydaf.reorder_axes` hooks (Julia's ``zarr_format.jl`` reorder section), for directory stores; a
ZIP-backed ZarrDaf is append-only and refuses (:class:`~pydaf.DafAppendOnlyError`).

The on-disk artifacts are Julia's, so each recovers the other's crash: the reorder lock is the folder
``<data set>/.reorder.backup``, and the backup holds a hard link of every file of every node the reorder rewrites, at
the node's own path under it (``axes/<axis>``, ``vectors/<axis>/<name>``, ``matrices/<rows>/<columns>/<name>``).
A rewritten node gets new files (a new folder renamed into place), never written over, so the links keep the old bytes.

Why a SIGKILL at any instant is recovered (to the old order by :func:`reset_reorder`, a writable open, or Julia's
``reset_reorder_axes!``; or left entirely in the new order once the lock is gone):

1. *Lock*: ``mkdir .reorder.backup`` (and ``fsync`` of the data set's folder). Before it nothing changed; after it the
   lock is seen, and an empty backup restores nothing.
2. *Backup*: each node is linked under a hidden staging folder ``.reorder.backup/.staging-*`` (which Julia's
   reset never reads: it lists only ``axes``, ``vectors`` and ``matrices``), every file and folder ``fsync``-ed, then
   renamed to its place in the backup: a node in the backup is always complete. (Julia links in place, so a kill can
   leave a node half linked there; its reset would then restore half a node. pydaf's reset restores a node only when
   the live one is not already made of the backup's very files, which is the case for any node a kill during the
   backup left, so it never restores such a half node.) The live data is untouched until every backup is durable.
3. *Replace*: each node is built complete in a hidden ``.<name>.pydaf-tmp-*`` folder, then the live node is renamed
   aside to ``.<name>.pydaf-backup`` and the new one renamed into place, as any ZarrDaf overwrite; a kill leaves the
   old node, the new one, or the old one aside (put back by the writable open's recovery; read through by readers),
   and the reorder backup holds the old node in every case. A node whose data is all the fill value (no chunk, as
   Julia writes it) is the same permuted, and is left as is. The consolidated metadata is then rewritten from the tree
   (Julia's full rebuild): a reorder changes no shape nor type, so it lists the same nodes with the same descriptors
   throughout, and remains a true record of the committed nodes at every instant. The new files are not ``fsync``-ed,
   as no ZarrDaf write is (a kill loses nothing the kernel holds; a power loss right after a reorder may lose its new
   files, as after any write), which keeps the reorder at the speed of the page cache.
4. *Cleanup*: the backup folder is renamed to a hidden ``.reorder.backup.pydaf-deleted-*`` (atomic: the lock is gone
   at once, the data set entirely in the new order) before it is removed (its files' space freed on a background
   thread: :mod:`pydaf._os.removal`); a writable open removes what a kill left.
   (Julia removes the backup in place, so a kill midway leaves a partial backup that its reset would restore over
   new data, a mix; pydaf never leaves one.)
5. *Reset*: every node of the backup is put back the same way (linked into a hidden temporary, the live node renamed
   away, the temporary renamed into place), the backup read and never changed until the end, so a kill during a reset
   is recovered by the next one; then the consolidated metadata is rewritten, and the backup dropped as in 4.

Opening a directory whose reorder lock is there (a killed reorder): a writable open that is the first of its process
(so no live reorder can be running: it holds the directory's writer lock) rolls it back and warns; any other open
raises :class:`~pydaf.DafIncompleteError` saying how to fix it (or :class:`~pydaf.DafLockedError` while another process
holds the writer lock: it is reordering now).
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from ..._os.locks import hold_lock
from ..._os.removal import remove_freeing_later
from ..._os.write_errors import storage_error
from ...abc.reorder import CrashCounter, FormatReorderPlan, PlannedAxis, ReorderProgress, tick_crash_counter
from ...errors import DafAppendOnlyError, DafError, DafFormatError, DafIncompleteError, DafLockedError
from ...kernels.permute import (
    permute_csc_into,
    permute_dense_matrix_into,
    permute_sparse_vector_into,
    permute_vector_into,
    write_permuted_dense,
)
from ...sparse import SparseMatrixCSC, SparseVector
from ...storage_types import STRING_DTYPE


class ZarrFormat(Protocol):
    """What these hooks use of a :class:`pydaf.formats.zarr.format.ZarrFormat` (whose module imports this one, so
    this one can't import it)."""

    container: str
    path: str
    is_writable: bool

    @property
    def supports_rewrites(self) -> bool: ...
    def _directory(self) -> Any: ...
    def _array_files(self, values: np.ndarray, shape: tuple[int, ...],
                     prefix: str = "") -> tuple[list[tuple[str, bytes | np.ndarray]], str]: ...
    def _writing(self, node: str) -> AbstractContextManager[Any]: ...
    def _reconsolidate(self) -> None: ...
    def format_has_axis(self, axis: str, *, for_change: bool) -> bool: ...
    def format_get_vector(self, axis: str, name: str) -> tuple[Any, Any]: ...
    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[Any, Any]: ...
    @property
    def group_file(self) -> bytes: ...
    def array_metadata(self, dtype: np.dtype, shape: tuple[int, ...]) -> str: ...
    def is_all_fill(self, values: np.ndarray) -> bool: ...


#: Julia's ``REORDER_BACKUP_DIR``: the reorder lock and backup, in the data set's directory.
REORDER_BACKUP_DIR = ".reorder.backup"

_counter = itertools.count()


def reorder_backup_root(storage: ZarrFormat) -> str:
    """The reorder backup folder of a directory data set (Julia's ``reorder_backup_root``).

    Example:
        >>> import os, tempfile, pydaf
        >>> daf = pydaf.ZarrDaf(os.path.join(tempfile.mkdtemp(), "a.daf.zarr"), "w")
        >>> os.path.basename(reorder_backup_root(daf.format))
        '.reorder.backup'
    """
    return os.path.join(storage.container, REORDER_BACKUP_DIR)


def no_reorder(storage: ZarrFormat) -> DafError:
    """The error for a reorder of a ZIP-backed ZarrDaf (append-only: nothing it holds is ever rewritten).

    Example:
        >>> import os, tempfile, pydaf
        >>> daf = pydaf.ZarrDaf(os.path.join(tempfile.mkdtemp(), "a.daf.zarr.zip"), "w+")
        >>> daf.format.supports_reorder, type(no_reorder(daf.format)).__name__
        (False, 'DafAppendOnlyError')
    """
    return DafAppendOnlyError(f"can't reorder the axes of the zip-backed ZarrDaf: {storage.path}\n(the ZIP backend is "
                              "append-only: copy it to a ZarrDaf directory, x.daf.zarr, and reorder that)")


# Files: links, fsync, staging.


def _fsync(path: str) -> None:
    """Make a file's bytes, or a folder's entries, durable (on power loss too; a kill loses nothing written)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0) | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_folders(path: str) -> None:
    """``makedirs``, each new folder's entry made durable in its parent."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    _make_folders(parent)
    os.mkdir(path)
    _fsync(parent)


def _link_tree(source: str, destination: str) -> None:
    """A copy of the folder ``source`` at ``destination`` made of hard links to its files (a copy where the file
    system has none), every file and folder ``fsync``-ed."""
    os.mkdir(destination)
    for folder, folders, files in os.walk(source):
        target = os.path.join(destination, os.path.relpath(folder, source))
        for name in folders:
            os.mkdir(os.path.join(target, name))
        for name in files:
            origin, copy = os.path.join(folder, name), os.path.join(target, name)
            try:
                os.link(origin, copy, follow_symlinks=False)
            except OSError as error:
                if error.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                shutil.copy2(origin, copy, follow_symlinks=False)
            _fsync(copy)  # (the old bytes themselves, which the backup is trusted to hold)
    _fsync_folders(destination)


def _fsync_folders(root: str) -> None:
    for folder, _, _ in os.walk(root):
        _fsync(folder)


def _holds_backup(live: str, backup: str) -> bool:
    """Whether the live node is made of the backup's very files (each a link to the same inode): it was never
    replaced (or was put back), so there is nothing to restore. An empty backup node (one Julia was killed linking)
    is held by any live node; a node a reorder rewrote has new files only."""
    for folder, _, files in os.walk(backup):
        relative = os.path.relpath(folder, backup)
        for name in files:
            try:
                old = os.lstat(os.path.join(folder, name))
                new = os.lstat(os.path.join(live, relative, name))
            except OSError:
                return False
            if (old.st_dev, old.st_ino) != (new.st_dev, new.st_ino):
                return False
    return True


def _drop_backup(storage: ZarrFormat) -> None:
    """Remove the backup folder by renaming it to a hidden ``.reorder.backup.pydaf-deleted-*`` first (atomic: once
    renamed, the lock is gone for every reader and for recovery), then removing that, best effort: what a failure or a
    kill leaves there is removed by the next writable open (``_DirectoryNodes.recover``)."""
    doomed = storage._directory().hidden("", REORDER_BACKUP_DIR[1:], f"deleted-{os.getpid()}-{next(_counter)}")
    os.rename(reorder_backup_root(storage), doomed)
    try:
        _fsync(storage.container)
        remove_freeing_later(None, doomed)  # (the old files' space is freed in the background)
    except OSError:
        pass  # (the step is done: a power loss before the fsync at worst brings back the backup, which rolls back)


def _node_keys(plan: FormatReorderPlan) -> list[str]:
    """The nodes a plan rewrites, by key from the root (axes first, as Julia's replacement)."""
    return [*(f"axes/{axis}" for axis in plan.planned_axes),
            *(f"vectors/{planned.axis}/{planned.name}" for planned in plan.planned_vectors),
            *(f"matrices/{planned.rows_axis}/{planned.columns_axis}/{planned.name}"
              for planned in plan.planned_matrices)]


# The hooks.


def lock_reorder(storage: ZarrFormat, operation_id: str) -> None:
    """Claim the reorder: create the (empty) backup folder, durably.

    Example:
        >>> import os, tempfile, pydaf
        >>> daf = pydaf.ZarrDaf(os.path.join(tempfile.mkdtemp(), "a.daf.zarr"), "w").add_axis("cell", ["A", "B"])
        >>> lock_reorder(daf.format, "an operation id")
        >>> has_reorder_lock(daf.format), os.listdir(reorder_backup_root(daf.format))
        (True, [])
        >>> reset_reorder(daf.format), has_reorder_lock(daf.format)
        (True, False)
    """
    if not storage.supports_rewrites:
        raise no_reorder(storage)
    root = reorder_backup_root(storage)
    try:
        os.mkdir(root)
        _fsync(storage.container)
    except OSError as error:
        raise storage_error(error, f"can't lock the reorder of the ZarrDaf directory: {storage.path}") from error


def has_reorder_lock(storage: ZarrFormat) -> bool:
    """Whether the backup folder is there (a reorder in progress, or a killed one).

    Example:
        >>> import os, tempfile, pydaf
        >>> has_reorder_lock(pydaf.ZarrDaf(os.path.join(tempfile.mkdtemp(), "a.daf.zarr"), "w").format)
        False
    """
    return storage.supports_rewrites and os.path.isdir(reorder_backup_root(storage))


def backup_reorder(storage: ZarrFormat, plan: FormatReorderPlan) -> None:
    """Link every node of ``plan`` into the backup (each complete before it gets its name there), durably.

    Example (the steps of :func:`pydaf.reorder_axes`, one by one):
        >>> import os, tempfile, pydaf
        >>> daf = pydaf.ZarrDaf(os.path.join(tempfile.mkdtemp(), "a.daf.zarr"), "w").add_axis("cell", ["A", "B"])
        >>> _ = daf.set_vector("cell", "age", [1, 2])
        >>> plan = pydaf.build_reorder_plan(daf.format, {"cell": PlannedAxis.of(daf.axis_vector("cell"), [1, 0])})
        >>> lock_reorder(daf.format, "an operation id")
        >>> backup_reorder(daf.format, plan)
        >>> os.listdir(os.path.join(reorder_backup_root(daf.format), "vectors", "cell"))
        ['age']
        >>> replace_reorder(daf.format, plan, None, None)
        >>> cleanup_reorder(daf.format)
        >>> daf.format.format_get_vector("cell", "age")[0].tolist(), has_reorder_lock(daf.format)
        ([2, 1], False)
    """
    nodes = storage._directory()
    root = reorder_backup_root(storage)
    try:
        for key in _node_keys(plan):
            source = nodes.path(key)
            if not os.path.isdir(source):  # (an axis the storage lacks; Julia's `isdir` test)
                continue
            staging = os.path.join(root, f".staging-{os.getpid()}-{next(_counter)}")
            _link_tree(source, staging)
            target = os.path.join(root, *key.split("/"))
            _make_folders(os.path.dirname(target))
            os.rename(staging, target)
            _fsync(os.path.dirname(target))
            _fsync(root)
    except OSError as error:
        raise storage_error(error, f"can't back up the data of a reorder of the ZarrDaf directory: {storage.path}\n"
                            "(nothing was reordered yet: call pydaf.reset_reorder_axes on it, or reopen it with mode "
                            "\"r+\")") from error


def replace_reorder(storage: ZarrFormat, plan: FormatReorderPlan, progress: ReorderProgress,
                    crash_counter: CrashCounter | None) -> None:
    """Write the permuted axes, vectors and matrices of ``plan`` (each as a new node renamed into place), then
    rebuild the consolidated metadata; ``progress(n)`` after each property of ``n`` elements, and a tick of the
    crash counter (see :func:`backup_reorder` for an example)."""
    for axis, planned_axis in plan.planned_axes.items():
        if storage.format_has_axis(axis, for_change=False):
            entries = np.asarray(planned_axis.new_entries, dtype=STRING_DTYPE)
            _replace(storage, f"axes/{axis}", _array_builder(storage, entries, (entries.shape[0],)))
    for vector in plan.planned_vectors:
        _replace_vector(storage, vector.axis, vector.name, plan.planned_axes[vector.axis])
        if progress is not None:
            progress(vector.n_replacement_elements)
        tick_crash_counter(crash_counter)
    for matrix in plan.planned_matrices:
        _replace_matrix(storage, matrix.rows_axis, matrix.columns_axis, matrix.name,
                        plan.planned_axes.get(matrix.rows_axis), plan.planned_axes.get(matrix.columns_axis))
        if progress is not None:
            progress(matrix.n_replacement_elements)
        tick_crash_counter(crash_counter)
    storage._reconsolidate()


def cleanup_reorder(storage: ZarrFormat) -> None:
    """Drop the backup: renamed away first (the lock is gone at once), then removed (see :func:`backup_reorder` for
    an example)."""
    try:
        _drop_backup(storage)
    except OSError as error:
        raise storage_error(error, f"can't remove the reorder backup of the ZarrDaf directory: {storage.path}"
                            ) from error


def reset_reorder(storage: ZarrFormat, *, refresh: bool = True) -> bool:
    """Roll an interrupted reorder back: put back every node of the backup, rebuild the consolidated metadata
    (``refresh``; an open rebuilds it itself), drop the backup. Returns whether there was one.

    Example:
        >>> import os, tempfile, pydaf
        >>> daf = pydaf.ZarrDaf(os.path.join(tempfile.mkdtemp(), "a.daf.zarr"), "w").add_axis("cell", ["A", "B"])
        >>> _ = daf.set_vector("cell", "age", [1, 2])
        >>> try:
        ...     pydaf.reorder_axes(daf, {"cell": [1, 0]}, progress=False, _simulate_crash=1)
        ... except pydaf.SimulatedCrash:
        ...     daf.format.format_get_vector("cell", "age")[0].tolist()
        [2, 1]
        >>> reset_reorder(daf.format), daf.format.format_get_vector("cell", "age")[0].tolist()
        (True, [1, 2])
    """
    if not has_reorder_lock(storage):
        return False
    nodes = storage._directory()
    root = reorder_backup_root(storage)
    try:
        for key in _backup_keys(root):
            backup, live = os.path.join(root, *key.split("/")), nodes.path(key)
            if _holds_backup(live, backup):
                continue
            parent, _, name = key.rpartition("/")
            nodes.make_group(parent)
            temporary = nodes.hidden(parent, name, f"tmp-{os.getpid()}-{next(_counter)}")
            _link_tree(backup, temporary)
            nodes.remove_tree(key)
            os.rename(temporary, live)
            _fsync(nodes.path(parent))
        nodes.axis_lengths.clear()
        if refresh:
            storage._reconsolidate()
        _drop_backup(storage)
    except OSError as error:
        raise storage_error(error, f"can't roll back the interrupted reorder of the ZarrDaf directory: {storage.path}"
                            "\n(its backup is kept: retry)") from error
    return True


def _backup_keys(root: str) -> list[str]:
    """The nodes in a backup (Julia's layout: ``axes/<axis>``, ``vectors/<axis>/<name>``,
    ``matrices/<rows>/<columns>/<name>``); hidden entries (a staging folder) are not nodes."""

    def names(*parts: str) -> list[str]:
        folder = os.path.join(root, *parts)
        if not os.path.isdir(folder):
            return []
        return sorted(name for name in os.listdir(folder) if not name.startswith("."))

    return [*(f"axes/{axis}" for axis in names("axes")),
            *(f"vectors/{axis}/{name}" for axis in names("vectors") for name in names("vectors", axis)),
            *(f"matrices/{rows}/{columns}/{name}" for rows in names("matrices")
              for columns in names("matrices", rows) for name in names("matrices", rows, columns))]


def recover_interrupted_reorder(storage: ZarrFormat, *, first_writer: bool) -> None:
    """At open: a reorder lock left by a killed process is rolled back by a writable open that is the first of its
    process (it holds the writer lock: nobody can be reordering); any other open is refused (see the module).

    Example:
        >>> import os, tempfile, warnings, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "a.daf.zarr")
        >>> pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B"]).close()
        >>> os.mkdir(os.path.join(path, REORDER_BACKUP_DIR))  # (what a reorder killed at once leaves)
        >>> try:
        ...     pydaf.ZarrDaf(path, "r")
        ... except pydaf.errors.DafIncompleteError as error:
        ...     str(error).startswith("an interrupted reorder_axes left the ZarrDaf directory: ")
        True
        >>> with warnings.catch_warnings(record=True) as warned:
        ...     warnings.simplefilter("always")
        ...     daf = pydaf.ZarrDaf(path, "r+")
        >>> str(warned[0].message).splitlines()[0].startswith("rolled back an interrupted reorder_axes")
        True
    """
    if not has_reorder_lock(storage):
        return
    if storage.is_writable and first_writer:
        reset_reorder(storage, refresh=False)
        warnings.warn(f"rolled back an interrupted reorder_axes of the ZarrDaf: {storage.path}\n(every axis, vector "
                      "and matrix is in its old order again)", stacklevel=4)  # (the caller of ZarrDaf(...))
        return
    nodes = storage._directory()
    if nodes.hold_count() == 0:  # (else this process holds the writer lock: no other can be reordering)
        try:
            hold_lock(nodes.root, exclusive=True, what="ZarrDaf directory").release()
        except DafLockedError as error:
            raise DafLockedError(f"can't open the ZarrDaf directory: {storage.path}\nwhile another process is "
                                 f"reordering its axes (it holds the writer lock)\n({error})") from None
    raise DafIncompleteError(
        f"an interrupted reorder_axes left the ZarrDaf directory: {storage.path}\npartly reordered (its backup: "
        f"{reorder_backup_root(storage)})",
        hint="(open it with mode \"r+\", which rolls the reorder back to the old order, or call "
             "pydaf.reset_reorder_axes on a data set of it open for writing)")


# Building the permuted nodes.


def _array_builder(storage: ZarrFormat, values: np.ndarray, shape: tuple[int, ...]) -> Callable[[Any], None]:
    """A builder that adds the files of an array node of ``values`` (of the Zarr ``shape``): its chunks (encoded now),
    then its ``zarr.json``."""
    files, metadata = storage._array_files(values, shape)

    def build(writer: Any) -> None:
        for key, data in [*files, ("zarr.json", metadata.encode())]:
            writer.add(key, data)

    return build


def _replace(storage: ZarrFormat, node: str, build: Callable[[Any], None]) -> None:
    """Build a node's new files in a hidden temporary (``build``), then swap it for the live node (renamed aside to
    ``.<name>.pydaf-backup`` until the new one is in place: ZarrDaf's overwrite)."""
    nodes = storage._directory()
    with storage._writing(node) as writer:
        build(writer)
        nodes.delete(node, for_set=True)
        writer.commit()


def _is_stored(storage: ZarrFormat, key: str, values: np.ndarray) -> bool:
    """Whether an array's chunk is written: it is stored now (pydaf and Julia write one chunk, none when all the
    values are the fill value), or a foreign array in several chunks holds more than the fill value."""
    flat = values.T if values.flags.f_contiguous and not values.flags.c_contiguous else values  # (never a copy)
    return values.size > 0 and (storage._directory().exists(key) or not storage.is_all_fill(flat))


def _add_sparse_metadata(storage: ZarrFormat, writer: Any, arrays: dict[str, np.ndarray]) -> None:
    """The ``zarr.json`` of each array of a sparse node (by its key), then the node's own (a group's)."""
    for key, array in arrays.items():
        writer.add(f"{key}/zarr.json", storage.array_metadata(array.dtype, array.shape).encode())
    writer.add("zarr.json", storage.group_file)


def _reserve(writer: Any, key: str, dtype: np.dtype, count: int) -> np.ndarray:
    return writer.reserve(key, count * dtype.itemsize).view(dtype) if count else np.zeros(0, dtype=dtype)


def _refuse_packed(storage: ZarrFormat, node: str) -> None:
    """Packed (sharded) arrays are not reordered yet (rewriting them flat would silently drop their packing):
    refused, as reading them once was, before this node changes."""
    nodes = storage._directory()
    for key in (node, *(f"{node}/{component}" for component in ("nzind", "nzval", "colptr", "rowval"))):
        metadata = nodes.read(f"{key}/zarr.json", limit=1 << 20)
        if metadata is not None and b'"sharding_indexed"' in metadata:
            raise DafFormatError(f"reordering packed (sharded) Zarr arrays is not supported yet\nfor the node: {key}\n"
                                 f"in the daf zarr group: {storage.path}")


def _replace_vector(storage: ZarrFormat, axis: str, name: str, planned_axis: PlannedAxis) -> None:
    node = f"vectors/{axis}/{name}"
    _refuse_packed(storage, node)
    vector, _ = storage.format_get_vector(axis, name)
    if isinstance(vector, SparseVector):
        has_nzval = storage._directory().has_node(f"{node}/nzval")  # (Julia omits an all-true Bool nzval)
        nzval_stored = has_nzval and _is_stored(storage, f"{node}/nzval/c/0", vector.nzval)

        def build_sparse(writer: Any) -> None:
            nzind = _reserve(writer, "nzind/c/0", vector.nzind.dtype, vector.nzind.shape[0])
            nzval = _reserve(writer, "nzval/c/0", vector.nzval.dtype, vector.nzval.shape[0]) if nzval_stored \
                else np.empty_like(vector.nzval)
            permute_sparse_vector_into(vector.nzind, vector.nzval, planned_axis.inverse_permutation, nzind, nzval)
            _add_sparse_metadata(storage, writer, {"nzind": nzind, **({"nzval": nzval} if has_nzval else {})})

        _replace(storage, node, build_sparse)
        return
    if vector.dtype == STRING_DTYPE:
        permuted = np.empty_like(vector)
        permute_vector_into(vector, planned_axis.permutation, permuted)
        _replace(storage, node, _array_builder(storage, permuted, permuted.shape))
        return
    if not _is_stored(storage, f"{node}/c/0", vector):
        return  # (all the fill value: the same permuted)

    def build_dense(writer: Any) -> None:
        permute_vector_into(vector, planned_axis.permutation, _reserve(writer, "c/0", vector.dtype, vector.shape[0]))
        writer.add("zarr.json", storage.array_metadata(vector.dtype, vector.shape).encode())

    _replace(storage, node, build_dense)


def _replace_matrix(storage: ZarrFormat, rows_axis: str, columns_axis: str, name: str,
                    planned_rows: PlannedAxis | None, planned_columns: PlannedAxis | None) -> None:
    node = f"matrices/{rows_axis}/{columns_axis}/{name}"
    _refuse_packed(storage, node)
    matrix, _ = storage.format_get_matrix(rows_axis, columns_axis, name)
    rows_permutation = None if planned_rows is None else planned_rows.permutation
    columns_permutation = None if planned_columns is None else planned_columns.permutation
    n_rows, n_columns = matrix.shape
    if isinstance(matrix, SparseMatrixCSC):
        has_nzval = storage._directory().has_node(f"{node}/nzval")
        nzval_stored = has_nzval and _is_stored(storage, f"{node}/nzval/c/0", matrix.nzval)

        def build_sparse(writer: Any) -> None:
            colptr = _reserve(writer, "colptr/c/0", matrix.colptr.dtype, matrix.colptr.shape[0])
            rowval = _reserve(writer, "rowval/c/0", matrix.rowval.dtype, matrix.rowval.shape[0])
            nzval = _reserve(writer, "nzval/c/0", matrix.nzval.dtype, matrix.nzval.shape[0]) if nzval_stored \
                else np.empty_like(matrix.nzval)
            permute_csc_into(matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval,
                             None if planned_rows is None else planned_rows.inverse_permutation,
                             columns_permutation, colptr, rowval, nzval)
            _add_sparse_metadata(storage, writer,
                                 {"colptr": colptr, "rowval": rowval, **({"nzval": nzval} if has_nzval else {})})

        _replace(storage, node, build_sparse)
        return
    if matrix.dtype == STRING_DTYPE:
        permuted = np.empty(matrix.shape, dtype=STRING_DTYPE, order="F")
        permute_dense_matrix_into(matrix, rows_permutation, columns_permutation, permuted)
        _replace(storage, node, _array_builder(storage, permuted.T, (n_columns, n_rows)))  # (Zarr's shape: reversed)
        return
    if not _is_stored(storage, f"{node}/c/0/0", matrix):
        return  # (all the fill value: the same permuted)

    def build_dense(writer: Any) -> None:  # (one chunk: Julia's column-major bytes, which are Zarr's C order)
        writer.write_file("c/0/0", lambda fd: write_permuted_dense(np.asarray(matrix), rows_permutation,
                                                                   columns_permutation, fd))
        writer.add("zarr.json", storage.array_metadata(matrix.dtype, (n_columns, n_rows)).encode())

    _replace(storage, node, build_dense)
