"""H5df: Daf inside HDF5 (docs/spec/FORMATS.md §2), byte-compatible with Julia's ``H5df``, read through memory maps.

Layout under the data set's root (a file's ``/`` or any group): ``daf`` (``uint8 [1, 0]``), ``scalars/``, ``axes/``,
``vectors/<axis>/`` and ``matrices/<rows>/<cols>/``. Every contiguous, unfiltered, allocated, aligned numeric dataset
is read by mapping the file at the dataset's offset — nothing is read until the data is touched — and the ``empty_*``
builders hand out writable maps of freshly allocated datasets. Files are opened with HDF5 alignment ``(1, 8)`` (so
Julia and numpy can map every dataset) and no raw-data sieve buffer (so HDF5 never writes back stale bytes over data
written through a map).

Reliability (one handle, lock and cache per file in a process; locks between processes; atomic write operations;
sizes checked before anything is allocated): docs/design/h5df.md.
"""

from __future__ import annotations

import os
import stat
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import h5py
import numpy as np
from h5py import h5d, h5i, h5l, h5o, h5p, h5s, h5t

from ..._os.maps import detach_region, map_region, populate_pages
from ..._os.write_errors import storage_error
from ...abc.format import CacheGroup, FormatWriter, StoredMatrix, StoredVector, parse_mode, weakest_cache_group
from ...abc.reorder import ReorderThroughModule
from ...core.packed_settings import chunks_for, compressor_for
from ...errors import (
    DafClosedError,
    DafError,
    DafFormatError,
    DafModeError,
    DafNameError,
    DafNotDafError,
    DafPathError,
    DafStorageError,
    DafTypeError,
    DafValueError,
)
from ...sparse import DeferredArray, SparseMatrixCSC, SparseVector, selected_column_runs
from ...storage_types import JULIA_NAMES, STRING_DTYPE, StorageScalar, scalar_dtype
from .._strings import (
    dense_string_matrix,
    dense_string_vector,
    sparse_string_matrix,
    sparse_string_vector,
    sparse_strings_are_smaller,
)
from ..paths import split_container_path
from ..registry import PersistentDaf
from . import reorder as _reorder
from .global_heap import REFERENCE
from .open_files import _open_files, _record_of, open_h5_file
from .packed import PackedRead, read_packed, read_packed_selection, start_read_packed, write_packed

MAJOR_VERSION = 1
MINOR_VERSION = 0

_STRING_TYPE = h5py.string_dtype("utf-8")


def split_h5df_path(path: str | os.PathLike) -> tuple[str, str]:
    """Split ``file.h5dfs#/group/path`` into the file and the group (``/`` for a plain file path): Julia's rule,
    :func:`~pydaf.formats.paths.split_container_path` not strict (any other path is a file).

    Example:
        >>> split_h5df_path("data.h5dfs#/cells")
        ('data.h5dfs', '/cells')
    """
    file, group = split_container_path(path, singular=(".h5df",), plural=".h5dfs", format="H5df", strict=False)
    return file, "/" if group is None else "/" + group


def _is_bool_enum(tid: h5t.TypeID) -> bool:
    if not isinstance(tid, h5t.TypeEnumID) or tid.get_nmembers() != 2:
        return False
    names = {tid.get_member_name(index).upper() for index in range(2)}
    return names == {b"FALSE", b"TRUE"}


class _HeldDataset:
    """A dataset a deferred read will decode, until its data set is closed (then ``None``)."""

    __slots__ = ("__weakref__", "dataset")

    def __init__(self, dataset: h5py.Dataset) -> None:
        self.dataset: h5py.Dataset | None = dataset


def _loaded(array: np.ndarray | DeferredArray) -> np.ndarray:
    return array.load() if isinstance(array, DeferredArray) else array


def _dataset_dtypes(dataset: h5py.Dataset) -> tuple[np.dtype, np.dtype]:
    """``(stored, daf)`` dtypes of a dataset: what its bytes are, and the Daf element type they hold."""
    tid = dataset.id.get_type()
    kind = tid.get_class()
    if kind == h5t.STRING or (kind == h5t.VLEN and h5py.check_string_dtype(dataset.dtype) is not None):
        return STRING_DTYPE, STRING_DTYPE
    if kind == h5t.BITFIELD and tid.get_size() == 1:
        return np.dtype(np.uint8), np.dtype(np.bool_)
    if kind == h5t.ENUM:
        base = tid.get_super().dtype
        return base, np.dtype(np.bool_) if _is_bool_enum(tid) else base.newbyteorder("=")
    if kind in (h5t.INTEGER, h5t.FLOAT):
        stored = tid.dtype
        native = stored.newbyteorder("=")
        if native in JULIA_NAMES and native != np.bool_:
            return stored, native
    raise DafTypeError(f"unsupported HDF5 datatype: {dataset.dtype} (class {kind})\nof the dataset: {dataset.name}\n"
                       f"in the file: {dataset.file.filename}")


def _create_dataset(group: h5py.Group, name: str, dtype: np.dtype, shape: tuple[int, ...], *,
                    allocate: bool = False) -> h5py.Dataset:
    """A contiguous dataset of a Daf numeric type (Bool as HDF5's ``B8`` bitfield, as Julia writes it). ``shape`` is
    in HDF5 (C) order; ``allocate`` reserves its storage now, unwritten, so it can be mapped at once."""
    tid = h5t.STD_B8LE if dtype == np.bool_ else h5t.py_create(dtype)
    space = h5s.create(h5s.SCALAR) if shape == () else h5s.create_simple(shape)
    dcpl = h5p.create(h5p.DATASET_CREATE)
    if allocate:
        dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
    return h5py.Dataset(h5d.create(group.id, name.encode(), tid, space, dcpl=dcpl))


def _write_numbers(group: h5py.Group, name: str, values: np.ndarray | np.generic, *,
                   allocate: Callable[[h5py.Dataset, int], Any] | None = None,
                   write: Callable[[h5py.Dataset, np.ndarray], bool] | None = None) -> h5py.Dataset:
    """Write a numeric array (C order, HDF5 shape) or scalar as a contiguous dataset. With ``allocate``, the dataset's
    storage is allocated at creation and ``allocate(dataset, nbytes)`` is called before anything is written; then
    ``write(dataset, array)``, if given, may write the values itself (returning whether it did)."""
    array = np.asarray(values)
    if not array.flags.c_contiguous:  # (not np.ascontiguousarray: it turns a scalar into a 1-element vector)
        array = np.ascontiguousarray(array)
    dataset = _create_dataset(group, name, array.dtype, array.shape, allocate=allocate is not None and array.size > 0)
    if array.size:
        if allocate is not None:
            allocate(dataset, array.nbytes)
        if write is not None and write(dataset, array):
            return dataset
        if array.dtype == np.bool_:
            dataset.id.write(h5s.ALL, h5s.ALL, array.view(np.uint8), mtype=h5t.NATIVE_B8)
        else:
            dataset.id.write(h5s.ALL, h5s.ALL, array)
    return dataset


def _is_utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _require_storable_strings(values: np.ndarray, where: str) -> None:
    """Refuse strings HDF5 can't hold exactly (a :class:`DafValueError` naming the first one): HDF5 strings end at a
    NUL byte (h5py refuses one in a variable-length string; a fixed-length one, as Julia writes scalars, is cut there
    on reading), and are UTF-8 (a lone surrogate has no encoding)."""
    texts = values.ravel().tolist()
    joined = "".join(texts)
    if "\0" not in joined and _is_utf8(joined):
        return
    for position, text in enumerate(texts):
        if "\0" in text:
            problem = ("holds a NUL byte, where HDF5 strings end (it would read back as "
                       f"{text.partition(chr(0))[0]!r}); remove the NUL bytes, or use a FilesDaf or ZarrDaf")
        elif not _is_utf8(text):
            problem = "holds a lone surrogate, which is not Unicode text (UTF-8 can't encode it)"
        else:
            continue
        shown = text if len(text) <= 60 else text[:60] + "..."
        at = f" (at the position: {position})" if values.ndim else ""
        raise DafValueError(f"the string: {shown!r}{at}\nof the {where}\n{problem}")


def _write_strings(group: h5py.Group, name: str, values: np.ndarray) -> None:
    """Write strings (C order, HDF5 shape) as variable-length UTF-8 (refused if not stored exactly)."""
    _require_storable_strings(values, f"H5df dataset: {group.name}/{name}\nin the file: {group.file.filename}")
    group.create_dataset(name, shape=values.shape, dtype=_STRING_TYPE, data=values if values.size else None)


def _write_scalar_string(group: h5py.Group, name: str, value: str) -> None:
    """A fixed-length UTF-8 scalar string (size = byte length, at least 1), exactly as HDF5.jl writes one (refused if
    it would not read back exactly: HDF5 cuts it at a NUL byte)."""
    _require_storable_strings(np.array(value, dtype=object), f"H5df scalar: {group.name}/{name}\nin the file: "
                              f"{group.file.filename}")
    raw = value.encode("utf-8")
    size = max(1, len(raw))
    tid = h5t.C_S1.copy()
    tid.set_size(size)
    tid.set_cset(h5t.CSET_UTF8)
    tid.set_strpad(h5t.STR_NULLTERM)
    dataset = h5d.create(group.id, name.encode(), tid, h5s.create(h5s.SCALAR))
    dataset.write(h5s.ALL, h5s.ALL, np.array(raw.ljust(size, b"\0"), dtype=f"S{size}"), mtype=tid)


# Names of objects that exist only during (or after an interrupted) write operation: a property being replaced is
# renamed aside until its replacement is complete, and a builder's data sets are created under a staging name until
# they are filled. Valid Daf names never start with ".", so these never collide with properties; readers ignore them
# and a writable open deletes them (they are what a killed writer left behind).
_STAGING = ".pydaf-"
_OLD = _STAGING + "old."
_NEW = _STAGING + "new."

# A chunked (compressed) or unallocated dataset may legitimately declare more bytes than the file holds, but not
# without bound: reading one allocates all of it. zlib compresses at most ~1032:1, so this bound refuses a
# hostile declared size (an 8 KB file asking for terabytes) while reading any gzip-packed data Julia writes.
_MAX_EXPANSION = 1024

_READ_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError, IndexError, AttributeError, UnicodeError)


def _check_link_name(name: str, what: str) -> None:
    """A name must stay one link inside its group: HDF5 would read ``a/b`` as a path (``/daf`` from the file's root,
    so a name could reach another data set of the file or the version dataset) and ``.`` as the group itself."""
    if not isinstance(name, str) or not name or "/" in name or name == "." or name.startswith(_STAGING):
        raise DafNameError(f"invalid {what} name: {name!r}\n(an H5df name must be one HDF5 link name)")


def _is_link_name(name: Any) -> bool:
    return isinstance(name, str) and bool(name) and "/" not in name and name != "." and not name.startswith(_STAGING)


def _link_type(group: h5py.Group, name: str) -> int | None:
    """The type of the link ``name`` in ``group`` (hard, soft, external), or None; never follows it."""
    encoded = name.encode()
    if not group.id.links.exists(encoded):
        return None
    return group.id.links.get_info(encoded).type


def _child_id(group: h5py.Group, name: str, what: str) -> h5o.ObjectID | None:
    """The object ``name`` of ``group`` opened through HDF5's own call (8 µs for a group, where h5py's lookup takes
    11), or None; only a hard link is followed (a soft or external link could read another data set or another
    file)."""
    if not _is_link_name(name):
        return None
    kind = _link_type(group, name)
    if kind is None:
        return None
    if kind != h5l.TYPE_HARD:
        raise DafFormatError(f"the {what}: {name}\nin the HDF5 group: {group.name}\nof the file: "
                             f"{group.file.filename}\nis a soft or external link (H5df stores only objects)")
    return h5o.open(group.id, name.encode())


def _child(group: h5py.Group, name: str, what: str, *,
           read_only_file: bool = False) -> h5py.Group | h5py.Dataset | None:
    """:func:`_child_id` as an h5py object (a dataset: 19 µs, where h5py's lookup takes 35). A dataset of a file
    opened read-only (``read_only_file``) caches its properties, as h5py's own lookup makes it."""
    object_id = _child_id(group, name, what)
    if object_id is None:
        return None
    object_type = h5i.get_type(object_id)
    if object_type == h5i.GROUP:
        return h5py.Group(object_id)
    if object_type == h5i.DATASET:
        return h5py.Dataset(object_id, readonly=read_only_file)
    return group[name]


def _names(group: h5py.Group | h5py.Dataset | None) -> set[str]:
    if not isinstance(group, h5py.Group):
        return set()
    names = list(group.keys())
    unique = set(names)
    if len(unique) != len(names):
        # HDF5 writes a group's link index and the heap of its link records as separate blocks; a writer killed
        # while flushing them can leave an index whose records name another link (seen once in 200 SIGKILLs of
        # tests/test_h5df_crash.py: "m3" listed twice, "m2" gone). Such a group has lost a link: say so.
        repeated = sorted(name for name in unique if names.count(name) > 1)
        raise DafFormatError(f"the HDF5 group: {group.name}\nof the file: {group.file.filename}\nlists the links: "
                             f"{', '.join(repeated)} more than once\n(its metadata is torn, as a writer killed while "
                             f"HDF5 flushed it can leave it: a property of this group may be missing)")
    return {name for name in unique if _is_link_name(name)}


def _packed_dtype(node: Any) -> np.dtype | None:
    """The stored type of a packed (chunked) vector of numbers, as a sparse property's parts are; ``None`` for any
    other node (mapped, strings, absent...)."""
    if not isinstance(node, h5py.Dataset) or node.ndim != 1 or node.id.get_create_plist().get_layout() != h5d.CHUNKED:
        return None
    stored, _ = _dataset_dtypes(node)
    return None if stored == STRING_DTYPE else stored


def _check_declared_size(dataset: h5py.Dataset, itemsize: int, what: str, path: str) -> None:
    """Refuse a dataset whose declared size its file can't hold, before anything is allocated or mapped."""
    nbytes = dataset.size * itemsize
    file_size = os.path.getsize(path)
    layout = dataset.id.get_create_plist().get_layout()
    stored = layout == h5d.CONTIGUOUS and dataset.id.get_offset() is not None
    limit = file_size if stored else max(file_size, 1 << 20) * _MAX_EXPANSION
    if nbytes > limit:
        raise DafFormatError(f"the {what}\nin the H5df file: {path}\ndeclares {nbytes} bytes "
                             f"(shape: {dataset.shape})\nwhich its file of {file_size} bytes can't hold")


def _check_shape(dataset: h5py.Dataset, shape: tuple[int, ...], what: str) -> None:
    if dataset.shape != shape:
        raise DafFormatError(f"the {what}\nin the H5df file: {dataset.file.filename}\nhas the HDF5 shape: "
                             f"{dataset.shape}\ninstead of: {shape}")


def _check_positions(positions: np.ndarray, upper: int, what: str, path: str) -> None:
    """1-based positions used to index (so out-of-range ones would raise or silently wrap around)."""
    if positions.size and (int(positions.min()) < 1 or int(positions.max()) > upper):
        raise DafFormatError(f"the {what}\nin the H5df file: {path}\nhas positions outside 1..{upper}")


class H5dfFormat(ReorderThroughModule, FormatWriter):
    """The storage of an H5df data set: a group of an open ``h5py.File``.

    Every write operation holds the file's write mutex, and ends by flushing HDF5's metadata (which is kept in memory
    until then: evictions are disabled), so the file on disk always describes either the state before an operation
    or the state after it. A property being replaced is renamed aside (so its bytes can't be reused) until its
    replacement is complete; raw data space is allocated (``posix_fallocate``) before anything is written or mapped,
    so a full disk or a file-size limit is an error, never SIGBUS. A failed operation is rolled back."""

    type_name = "H5df"
    maps_files = True
    persistent = True

    def __init__(self, root: h5py.Group, mode: str, *, default_name: str, complete_path: str | None,
                 owns_file: bool = False) -> None:
        self.root = root
        self.file = root.file
        self.path = self.file.filename
        self.mode = mode
        self.is_writable = mode != "r"
        self._read_only_file = self.file.mode == "r"
        self._default_name = default_name
        self._complete_path = complete_path
        self._open_file = _record_of(self.file)
        self._open_file.formats.add(self)
        # (a handle opened by path counts as a user of the file, until closed; one given an h5py group does not)
        self._owns_file = owns_file
        if owns_file:
            with _open_files.mutex:
                self._open_file.handles += 1
        self._closed = False
        self._held_datasets: weakref.WeakSet[_HeldDataset] = weakref.WeakSet()  # (see _deferred_part)
        self._replaced: list[tuple[h5py.Group, str]] = []  # (group, name) renamed to _OLD + name, until committed
        self._building: list[tuple[h5py.Group, str]] = []  # (group, name) created as _NEW + name, until filled
        self._top_groups: dict[str, h5py.Group] = {}
        if self.is_writable:
            with self._writing("the data set (removing what an interrupted writer left)"):
                self._remove_staging()

    def format_shared_state(self, state: Any) -> Any:
        """One lock, cache and set of version counters per data set, whatever the handle (path, symlink) it was opened
        through: ``state`` if this is the first handle on it in this process."""
        states = self._open_file.states
        with _open_files.mutex:
            shared = states.get(self.root.name)
            if shared is None:
                states[self.root.name] = shared = state
        return shared

    def format_default_name(self) -> str:
        return self._default_name

    def format_complete_path(self) -> str | None:
        return self._complete_path

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: H5df")
        access = "read-write" if self.file.mode == "r+" else "read-only"
        if self.root.name == "/":
            lines.append(f"{indent}root: HDF5.File: ({access}) {self.path}")
        else:
            lines.append(f"{indent}root: HDF5.Group: {self.root.name} (file: {self.path})")
        lines.append(f"{indent}mode: {self.mode}")

    def format_close(self) -> None:
        """Commit (a writable handle) and let go of the file: this handle's HDF5 objects are dropped, and the last
        handle opened by path closes the HDF5 file (and its undo journal) and releases its lock, unless the caller
        still holds an ``h5py`` object of it. Arrays mapped from the file stay valid and read-only; each keeps a
        share of this process's shared lock on the file until it is dropped (another process can read the file
        meanwhile, but not write it: its writes could reuse the bytes under the array). Idempotent."""
        if self._closed:
            return
        record = self._open_file
        try:
            if self.is_writable and record.fid.valid:
                if self._building or self._replaced:
                    self.format_discard_empty()  # (an unfilled builder: put back what it was to replace)
                self.flush()
        finally:
            self._closed = True
            for held in list(self._held_datasets):  # (deferred reads of packed data: they must not keep the file)
                held.dataset = None
            self._held_datasets.clear()
            record.formats.discard(self)
            self.root = self.file = None
            self._top_groups.clear()
            self._building.clear()
            self._replaced.clear()
            if self._owns_file:
                with _open_files.mutex:
                    record.handles -= 1
                record.close_unused()

    def reopen(self, file: h5py.File) -> None:
        """Point this storage at ``file``, the new file a reorder renamed over its own (see
        :func:`~pydaf.formats.h5df.open_files.replace_open_file`): the same group, and the same datasets of the
        deferred reads still pending."""
        self.file = file
        self.root = file if self.root.name == "/" else file[self.root.name]
        self._top_groups.clear()
        for held in list(self._held_datasets):
            if held.dataset is not None:
                held.dataset = file[held.dataset.name]

    def flush(self) -> None:
        """Flush HDF5's metadata and commit the file's undo journal (see :mod:`pydaf.formats.h5df.undo_journal`)."""
        self._open_file.commit()

    # Structure.

    def _group(self, *names: str) -> h5py.Group | None:
        """The group at ``names`` under the root (e.g. ``vectors``, axis), or None if any part is missing."""
        node: Any = self._top_groups.get(names[0]) if names else self.root
        if node is None:
            node = _child(self.root, names[0], "group")
            if isinstance(node, h5py.Group):  # (the skeleton's groups never change: looked up once)
                self._top_groups[names[0]] = node
        for name in names[1:]:
            if not isinstance(node, h5py.Group):
                return None
            node = _child(node, name, "group")
        return node if isinstance(node, h5py.Group) else None

    def _required_group(self, *names: str) -> h5py.Group:
        group = self._group(*names)
        if group is None:
            raise DafFormatError(f"missing group: {'/'.join(names)}\nin the H5df data: {self._default_name}")
        return group

    def _node(self, what: str, *path: str) -> h5py.Group | h5py.Dataset:
        """The object at ``path`` (groups, then the property's name), which the caller knows exists."""
        group = self._required_group(*path[:-1])
        node = _child(group, path[-1], what, read_only_file=self._read_only_file)
        if node is None:
            raise DafFormatError(f"missing {what}: {path[-1]}\nin the H5df data: {self._default_name}")
        return node

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """Turn whatever HDF5/h5py raise on a broken file into a :class:`DafFormatError` naming the property."""
        try:
            yield
        except DafError:
            raise
        except _READ_ERRORS as error:
            raise DafFormatError(f"can't read the {what}\nin the H5df file: {self.path}\n"
                                 f"({type(error).__name__}: {error})") from error

    # Write operations: serialised per file, committed (flushed) at their end, rolled back on failure.

    @contextmanager
    def _writing(self, what: str, *created: tuple[h5py.Group, str], commit: bool = True) -> Iterator[None]:
        """Run one write operation of ``what``; ``created`` are the objects it creates (removed if it fails). With
        ``commit``, the properties it replaced are deleted and the metadata flushed at its end."""
        if self._closed:  # (a builder still filling when its data set was closed)
            raise DafClosedError(f"can't write the {what}\nin the H5df data: {self._default_name}\nwhich was closed "
                                 "(reopen it to write it)")
        with self._open_file.writing:
            journal = self._open_file.journal
            if journal is not None:
                journal.begin()
            try:
                yield
                if commit:
                    self._commit()
            except BaseException as error:
                # Drop the failed calls' locals first: an HDF5 object still open (a dataset whose space could not be
                # allocated) would keep its space allocated after it is deleted, past a file-size limit.
                traceback.clear_frames(error.__traceback__)
                cause = error if journal is None or journal.failure is None else journal.failure
                problem = self._roll_back(created)
                if isinstance(error, DafError) and problem is None:
                    raise
                if not isinstance(error, Exception):
                    raise
                note = ""
                if problem is not None:
                    note = f"\n(and undoing it failed: {problem}; the file is closed: reopen it to repair it)"
                    self._open_file.abandon()
                where = f"can't write the {what}\nin the H5df file: {self.path}"
                if isinstance(cause, OSError) and not isinstance(cause, DafError) and cause.errno is not None:
                    failure = storage_error(cause, where, intact=problem is None)
                    raise (failure.with_line(note.lstrip("\n")) if note else failure) from error
                raise DafStorageError(f"{where}\n({type(cause).__name__}: {cause}){note}") from error

    def _commit(self) -> None:
        for group, name in self._replaced:
            _delete(group, _OLD + name)
        self._replaced.clear()
        self.flush()

    def _roll_back(self, created: tuple[tuple[h5py.Group, str], ...]) -> str | None:
        """Undo a failed operation: remove what it created, put back what it replaced, flush. Returns what failed."""
        try:
            for group, name in created:
                if _link_type(group, name) is not None:
                    _delete(group, name)
            for group, name in self._building:
                if _link_type(group, _NEW + name) is not None:
                    _delete(group, _NEW + name)
            self._building.clear()
            for group, name in reversed(self._replaced):
                if _link_type(group, name) is not None:
                    _delete(group, name)
                group.move(_OLD + name, name)
            self._replaced.clear()
            self.flush()
        except Exception as error:  # reported in the error raised for the operation
            journal = self._open_file.journal
            cause = error if journal is None or journal.failure is None else journal.failure
            return f"{type(cause).__name__}: {cause}"
        return None

    def _replace(self, group: h5py.Group, name: str) -> None:
        """Delete ``name`` as part of replacing it: rename it aside, deleted once the replacement is committed."""
        if _link_type(group, _OLD + name) is not None:
            _delete(group, _OLD + name)
        group.move(name, _OLD + name)
        self._replaced.append((group, name))

    def _remove_staging(self) -> None:
        """Delete the staging objects an interrupted writer left (they are never part of the data set)."""
        groups = [self._group("scalars"), self._group("axes")]
        vectors = self._group("vectors")
        groups += [self._group("vectors", axis) for axis in _names(vectors)]
        matrices = self._group("matrices")
        for rows_axis in _names(matrices):
            rows = self._group("matrices", rows_axis)
            groups += [self._group("matrices", rows_axis, columns_axis) for columns_axis in _names(rows)]
        for group in groups:
            if group is not None:
                for name in [name for name in group.keys() if name.startswith(_STAGING)]:
                    _delete(group, name)

    def _delete_property(self, group: h5py.Group, name: str, for_set: bool) -> None:
        if for_set:
            with self._writing(f"property: {name}", commit=False):
                self._replace(group, name)
        else:
            with self._writing(f"property: {name}"):
                _delete(group, name)

    # Space.

    def _allocate(self, dataset: h5py.Dataset, nbytes: int) -> bool:
        """Allocate the file space of an early-allocated dataset (so writing it, even through a map, can't hit a full
        disk or a file-size limit). Returns whether any of it may hold old bytes (space HDF5 reused)."""
        offset = dataset.id.get_offset()
        with open(self.path, "r+b") as handle:
            size = os.fstat(handle.fileno()).st_size
            if nbytes:
                journal = self._open_file.journal
                if journal is not None:  # (reused space: saved, as a rollback may need it back)
                    journal.preserve(offset, nbytes)
                if journal is None or not journal.allocate(offset, nbytes):  # (the journal records the new size)
                    os.posix_fallocate(handle.fileno(), offset, nbytes)
        return offset < size

    # Mapping.

    def _read_dataset(self, dataset: h5py.Dataset, what: str,
                      shape: tuple[int, ...] | None = None) -> tuple[np.ndarray, CacheGroup]:
        """A dataset's values in Daf's (C, HDF5-shaped) form: mapped if possible, else read. ``shape`` is what it
        must be; its declared size is checked against the file before anything is allocated or mapped."""
        if shape is not None:
            _check_shape(dataset, shape, what)
        if dataset.ndim > 2:
            raise DafFormatError(f"the {what}\nin the H5df file: {self.path}\nhas {dataset.ndim} dimensions")
        stored, daf_dtype = _dataset_dtypes(dataset)
        if stored == STRING_DTYPE:
            _check_declared_size(dataset, 16, what, self.path)  # a variable-length string takes at least 16 bytes
            return self._read_strings(dataset, what), CacheGroup.MemoryData
        _check_declared_size(dataset, stored.itemsize, what, self.path)
        mapped = self._map_dataset(dataset, stored, writable=False)
        if mapped is not None:
            return (mapped if daf_dtype == stored else mapped.view(daf_dtype)), CacheGroup.MappedData
        if dataset.id.get_create_plist().get_layout() == h5d.CHUNKED:  # (packed: decoded, checked chunk by chunk)
            values = read_packed(dataset, stored, what, self.path)
        else:
            values = np.empty(dataset.shape, dtype=stored)
            if values.size:
                dataset.read_direct(values)
        values = values.astype(daf_dtype, copy=False)
        values.flags.writeable = False
        return values, CacheGroup.MemoryData

    def _read_strings(self, dataset: h5py.Dataset, what: str) -> Any:
        """A string dataset's values; variable-length strings stored contiguously (as Daf stores them) are read only
        once the global heap collections they point into are checked (a corrupt one can hang HDF5's reader)."""
        string_type = dataset.id.get_type()
        if isinstance(string_type, h5t.TypeStringID) and string_type.is_variable_str():
            dcpl = dataset.id.get_create_plist()
            offset = dataset.id.get_offset()
            if (offset is not None and dcpl.get_layout() == h5d.CONTIGUOUS and not dcpl.get_nfilters()
                    and self.file.id.get_create_plist().get_sizes() == (8, 8)
                    and dataset.id.get_storage_size() == dataset.size * REFERENCE.itemsize):
                self._open_file.check_string_heaps(self.path, offset, dataset.size, what)
        return dataset.asstr()[()]

    def _map_dataset(self, dataset: h5py.Dataset, dtype: np.dtype, *, writable: bool) -> np.ndarray | None:
        """A numpy array over the file's bytes of a contiguous, unfiltered, allocated, aligned dataset, else None."""
        if dtype.byteorder == ">" or dataset.size == 0:
            return None
        dcpl = dataset.id.get_create_plist()
        if dcpl.get_layout() != h5d.CONTIGUOUS or dcpl.get_nfilters() or dcpl.get_external_count():
            return None
        offset = dataset.id.get_offset()
        if offset is None or offset % dtype.itemsize:
            return None
        region = map_region(self.path, offset, dataset.size * dtype.itemsize, writable=writable,
                            keep_alive=self._open_file.map_hold, retainer=self._open_file.retained_maps)
        return np.frombuffer(region, dtype=dtype, count=dataset.size).reshape(dataset.shape)

    def _allocate_mapped(self, group: h5py.Group, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """Create a contiguous dataset, allocate it, and return a writable, zero-filled map of it."""
        dataset = _create_dataset(group, name, dtype, shape, allocate=True)
        if dataset.size == 0:
            return np.zeros(shape, dtype=dtype)
        reused = self._allocate(dataset, dataset.size * dtype.itemsize)
        if self._open_file.journal is not None:  # (its writes move the file's time: see JournaledFile.mapping)
            self._open_file.journal.mapping()
        mapped = self._map_dataset(dataset, np.dtype(np.uint8) if dtype == np.bool_ else dtype, writable=True)
        assert mapped is not None, "an allocated contiguous dataset must be mappable"
        if reused:  # reused space may hold old bytes; fresh space (past the old end of the file) reads as zeros
            populate_pages(mapped)
            mapped[...] = 0
        return mapped.view(dtype) if dtype == np.bool_ else mapped

    def _write_numbers(self, group: h5py.Group, name: str, values: np.ndarray | np.generic) -> h5py.Dataset:
        """Write a numeric array (C order, HDF5 shape) or scalar as a contiguous dataset, its space allocated first
        (and written straight into the file, not through HDF5's file object, when the file is journaled)."""
        journal = self._open_file.journal
        if journal is None:
            return _write_numbers(group, name, values, allocate=self._allocate)

        def write(dataset: h5py.Dataset, array: np.ndarray) -> bool:
            offset = dataset.id.get_offset()
            if offset is None or array.dtype.byteorder == ">":
                return False
            journal.write_at(offset, array.reshape(-1).view(np.uint8).data)
            return True

        return _write_numbers(group, name, values, allocate=self._allocate, write=write)

    def _write_data(self, group: h5py.Group, name: str, values: np.ndarray, *, packed: bool) -> None:
        """Write a numeric array (C order, HDF5 shape) as Julia's ``write_packed_dense_dataset!``: packed (chunked and
        compressed) if ``packed`` and :func:`~pydaf.core.packed_settings.chunks_for` (of its Julia shape) gives a
        chunk shape, else contiguous (and mapped when read)."""
        chunk = chunks_for(packed, tuple(reversed(values.shape)), values.dtype) if values.ndim else None
        if chunk is None:
            self._write_numbers(group, name, values)
        else:
            write_packed(group, name, values, chunk, compressor_for())

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        with self._reading(f"scalar: {name}"):
            return _is_link_name(name) and _link_type(self._required_group("scalars"), name) is not None

    def format_scalars_set(self) -> set[str]:
        with self._reading("scalars"):
            return _names(self._required_group("scalars"))

    def format_get_scalar(self, name: str) -> StorageScalar:
        what = f"scalar: {name}"
        with self._reading(what):
            dataset = self._node("scalar", "scalars", name)
            if not isinstance(dataset, h5py.Dataset) or dataset.shape not in ((), (1,)):
                raise DafFormatError(f"the scalar: {name}\nin the H5df file: {self.path}\nis not a scalar dataset "
                                     f"(shape: {getattr(dataset, 'shape', None)})")
            stored, daf_dtype = _dataset_dtypes(dataset)
            if stored == STRING_DTYPE:
                value = self._read_strings(dataset, what)
                return str(value if dataset.shape == () else value[0])
            values, _ = self._read_dataset(dataset, what)
            return daf_dtype.type(values.reshape(-1)[0] if values.shape else values[()])

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        _check_link_name(name, "scalar")
        scalars = self._required_group("scalars")
        with self._writing(f"scalar: {name}", (scalars, name)):
            if isinstance(value, str):
                _write_scalar_string(scalars, name, value)
            else:
                self._write_numbers(scalars, name, np.array(value, dtype=scalar_dtype(value)))

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        _check_link_name(name, "scalar")
        self._delete_property(self._required_group("scalars"), name, for_set)

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        with self._reading(f"axis: {axis}"):
            return _is_link_name(axis) and _link_type(self._required_group("axes"), axis) is not None

    def format_axes_set(self) -> set[str]:
        with self._reading("axes"):
            return _names(self._required_group("axes"))

    def _axis_dataset(self, axis: str) -> h5py.Dataset:
        dataset = self._node("axis", "axes", axis)
        if not isinstance(dataset, h5py.Dataset) or dataset.ndim != 1 or _dataset_dtypes(dataset)[0] != STRING_DTYPE:
            raise DafFormatError(f"the axis: {axis}\nin the H5df file: {self.path}\nis not a 1-dimensional dataset "
                                 "of strings")
        _check_declared_size(dataset, 16, f"axis: {axis}", self.path)
        return dataset

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        with self._reading(f"axis: {axis}"):
            return self._read_strings(self._axis_dataset(axis), f"axis: {axis}"), CacheGroup.MemoryData

    def format_axis_length(self, axis: str) -> int:
        # (No size check here: a length allocates nothing, and whatever is read with it is checked itself.)
        with self._reading(f"axis: {axis}"):
            # The common case through HDF5's own calls, with no h5py object: 20-25 µs, where h5py's objects took
            # 60-80 µs, and a fetch of a matrix reads the lengths of both its axes twice (the backend, then the reader).
            object_id = _child_id(self._required_group("axes"), axis, "axis")
            if object_id is not None and h5i.get_type(object_id) == h5i.DATASET:
                space = object_id.get_space()
                if space.get_simple_extent_ndims() == 1:
                    return int(space.get_simple_extent_dims()[0])
            dataset = self._node("axis", "axes", axis)  # (missing, or not a 1-dimensional dataset: its error)
            if not isinstance(dataset, h5py.Dataset) or dataset.ndim != 1:
                raise DafFormatError(f"the axis: {axis}\nin the H5df file: {self.path}\nis not 1-dimensional")
            return int(dataset.shape[0])

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        _check_link_name(axis, "axis")
        axes, vectors, matrices = (self._required_group(name) for name in ("axes", "vectors", "matrices"))
        with self._writing(f"axis: {axis}", (axes, axis), (vectors, axis), (matrices, axis)):
            # The axis itself last, so a reader never finds an axis whose groups are missing.
            vectors.create_group(axis)
            axis_group = matrices.create_group(axis)
            for other in _names(axes) | {axis}:
                axis_group.require_group(other)
                if other != axis:
                    matrices.require_group(other).require_group(axis)
            _write_strings(axes, axis, entries)

    def format_delete_axis(self, axis: str) -> None:
        _check_link_name(axis, "axis")
        with self._writing(f"axis: {axis}"):
            _delete(self._required_group("axes"), axis)
            for container in (self._group("vectors"), self._group("matrices")):
                if container is not None and _link_type(container, axis) is not None:
                    _delete(container, axis)
            matrices = self._group("matrices")
            for rows_axis in _names(matrices):
                rows_group = self._group("matrices", rows_axis)
                if rows_group is not None and _link_type(rows_group, axis) is not None:
                    _delete(rows_group, axis)

    # Vectors.

    def _vectors(self, axis: str) -> h5py.Group:
        _check_link_name(axis, "axis")
        return self._required_group("vectors").require_group(axis)

    def format_has_vector(self, axis: str, name: str) -> bool:
        with self._reading(f"vector: {name} of the axis: {axis}"):
            vectors = self._group("vectors", axis)
            return vectors is not None and _is_link_name(name) and _link_type(vectors, name) is not None

    def format_vectors_set(self, axis: str) -> set[str]:
        with self._reading(f"vectors of the axis: {axis}"):
            return _names(self._group("vectors", axis))

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        what = f"vector: {name}\nof the axis: {axis}"
        with self._reading(what):
            node = self._node("vector", "vectors", axis, name)
            length = self.format_axis_length(axis)
            if isinstance(node, h5py.Dataset):
                return self._read_dataset(node, what, (length,))
            nzind, group = self._read_part(node, "nzind", what)
            if nzind.ndim != 1 or nzind.shape[0] > length:
                raise DafFormatError(f"the nzind of the {what}\nin the H5df file: {self.path}\nhas the shape: "
                                     f"{nzind.shape}\nfor the axis length: {length}")
            if _child(node, "nztxt", "strings") is not None:
                texts, _ = self._read_part(node, "nztxt", what, nzind.shape)
                _check_positions(nzind, length, f"nzind of the {what}", self.path)
                return dense_string_vector(length, nzind, texts), CacheGroup.MemoryData
            if _child(node, "nzval", "values") is not None:
                nzval, nzval_group = self._read_part(node, "nzval", what, nzind.shape)
            else:
                nzval, nzval_group = np.ones(nzind.shape[0], dtype=np.bool_), CacheGroup.MemoryData
            return SparseVector(length, nzind, nzval), weakest_cache_group(group, nzval_group)

    def _read_part(self, group: h5py.Group, part: str, what: str,
                   shape: tuple[int, ...] | None = None) -> tuple[np.ndarray, CacheGroup]:
        """A component (``nzind``, ``colptr``, …) of a sparse property."""
        node = _child(group, part, f"{part} of the {what}", read_only_file=self._read_only_file)
        if not isinstance(node, h5py.Dataset):
            raise DafFormatError(f"missing dataset: {part}\nof the {what}\nin the H5df file: {self.path}")
        return self._read_dataset(node, f"{part} of the {what}", shape)

    def _deferred_part(self, group: h5py.Group, part: str, what: str,
                       dtype: np.dtype) -> tuple[np.ndarray | DeferredArray, CacheGroup]:
        """A component of a sparse property as :meth:`_read_part` gives it; a packed one (which would be decoded
        whole) as a :class:`~pydaf.sparse.DeferredArray` of Daf type ``dtype``, decoded when it is first used (its
        shape and declared size are checked now). It reads the dataset it was given (a property replaced since is
        not mixed in), and after :meth:`format_close` raises :class:`~pydaf.DafClosedError` (the file is not kept
        open for it)."""
        node = _child(group, part, f"{part} of the {what}", read_only_file=self._read_only_file)
        if not isinstance(node, h5py.Dataset):
            return self._read_part(group, part, what)  # (its error)
        stored = _packed_dtype(node)
        if stored is None:
            return self._read_dataset(node, f"{part} of the {what}")  # (mapped, or read now: not looked up again)
        _check_declared_size(node, stored.itemsize, f"{part} of the {what}", self.path)
        held = _HeldDataset(node)
        self._held_datasets.add(held)
        path, described, length = self.path, f"{part} of the {what}", int(node.shape[0])

        def load() -> np.ndarray:
            dataset = held.dataset
            if dataset is None:
                raise DafClosedError(f"can't read the {described}\nin the H5df file: {path}\nwhich was closed "
                                     "(reopen it, and get the matrix again)")
            with self._reading(described):
                values, _ = self._read_dataset(dataset, described, (length,))
            values = values.astype(dtype, copy=False)
            values.flags.writeable = False
            return values

        return DeferredArray((length,), np.dtype(dtype), load), CacheGroup.MemoryData

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        _check_link_name(name, "vector")
        vectors = self._vectors(axis)
        with self._writing(f"vector: {name}\nof the axis: {axis}", (vectors, name)):
            if isinstance(vector, SparseVector):
                group = vectors.create_group(name)
                self._write_data(group, "nzind", vector.nzind, packed=self.is_packed)
                if not (vector.nzval.dtype == np.bool_ and vector.nzval.all()):
                    self._write_data(group, "nzval", vector.nzval, packed=self.is_packed)
            elif isinstance(vector, np.ndarray):
                if vector.dtype == STRING_DTYPE:
                    self._write_string_vector(vectors, name, vector)  # (strings are never packed in H5df)
                else:
                    self._write_data(vectors, name, vector, packed=self.is_packed)
            elif isinstance(vector, str):
                _write_strings(vectors, name, np.full(self.format_axis_length(axis), vector, dtype=object))
            else:
                self._allocate_mapped(vectors, name, scalar_dtype(vector), (self.format_axis_length(axis),))[...] = \
                    vector

    def _write_string_vector(self, vectors: h5py.Group, name: str, vector: np.ndarray) -> None:
        if not sparse_strings_are_smaller(vector, None):
            _write_strings(vectors, name, vector)
            return
        nzind, texts = sparse_string_vector(vector)
        group = vectors.create_group(name)
        self._write_numbers(group, "nzind", nzind)
        _write_strings(group, "nztxt", texts)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        _check_link_name(name, "vector")
        self._delete_property(self._vectors(axis), name, for_set)

    def _start_building(self, group: h5py.Group, name: str, what: str) -> str:
        """Start a builder of ``name`` in ``group``: returns the staging name its data is created under."""
        _check_link_name(name, what)
        if _link_type(group, _NEW + name) is not None:
            _delete(group, _NEW + name)
        self._building.append((group, name))
        return _NEW + name

    def _filled(self, what: str, write: Callable[[], None] | None = None) -> None:
        """A builder's buffers are filled: ``write`` what was built in memory (packed data), move its data into place
        and commit."""
        with self._writing(what):
            if write is not None:
                write()
            for group, name in self._building:
                group.move(_NEW + name, name)
            self._building.clear()

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        vectors = self._vectors(axis)
        length = self.format_axis_length(axis)
        with self._writing(f"vector: {name}\nof the axis: {axis}", commit=False):
            staging = self._start_building(vectors, name, "vector")
            if chunks_for(self.is_packed, (length,), dtype) is not None:  # (Julia's: in memory, packed when filled)
                compressor_for()  # (a bad codec is refused before the buffer is filled)
                return np.zeros(length, dtype=dtype)
            return self._allocate_mapped(vectors, staging, dtype, (length,))

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        vectors = self._vectors(axis)

        def write() -> None:
            if _link_type(vectors, _NEW + name) is None:
                self._write_data(vectors, _NEW + name, filled, packed=True)

        self._filled(f"vector: {name}\nof the axis: {axis}", write)

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        vectors = self._vectors(axis)
        with self._writing(f"vector: {name}\nof the axis: {axis}", commit=False):
            staging = self._start_building(vectors, name, "vector")
            if self.is_packed:  # (Julia's: in memory, each component packed if large enough when filled)
                compressor_for()
                return np.zeros(nnz, dtype=indtype), np.zeros(nnz, dtype=dtype)
            group = vectors.create_group(staging)
            return (self._allocate_mapped(group, "nzind", indtype, (nnz,)),
                    self._allocate_mapped(group, "nzval", dtype, (nnz,)))

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        vectors = self._vectors(axis)

        def write() -> None:
            if _link_type(vectors, _NEW + name) is None:
                group = vectors.create_group(_NEW + name)
                self._write_data(group, "nzind", filled.nzind, packed=True)
                self._write_data(group, "nzval", filled.nzval, packed=True)

        self._filled(f"vector: {name}\nof the axis: {axis}", write)

    def format_discard_empty(self) -> bool:
        # Drop the failed builders' staged data and put back what they were to replace (renamed aside by the
        # for_set delete): a failed overwrite keeps the old value.
        if self._closed:
            return True  # (closing did it)
        with self._open_file.writing:
            problem = self._roll_back(())
        if problem is not None:
            self._open_file.abandon()
            raise DafStorageError(f"can't undo a failed write\nin the H5df file: {self.path}\n({problem}; the file "
                                  "is closed: reopen it to repair it)")
        return True

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        with self._reading(f"matrix: {name} of the axes: {rows_axis}, {columns_axis}"):
            matrices = self._group("matrices", rows_axis, columns_axis)
            return matrices is not None and _is_link_name(name) and _link_type(matrices, name) is not None

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        with self._reading(f"matrices of the axes: {rows_axis}, {columns_axis}"):
            return _names(self._group("matrices", rows_axis, columns_axis))

    def _matrices(self, rows_axis: str, columns_axis: str) -> h5py.Group:
        _check_link_name(rows_axis, "axis")
        _check_link_name(columns_axis, "axis")
        return self._required_group("matrices").require_group(rows_axis).require_group(columns_axis)

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        what = f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}"
        with self._reading(what):
            node = self._node("matrix", "matrices", rows_axis, columns_axis, name)
            shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
            if isinstance(node, h5py.Dataset):
                values, group = self._read_dataset(node, what, (shape[1], shape[0]))
                return values.T, group
            # (a large packed nzval is decoded on the kernels' threads while colptr and rowval are read)
            pending = self._start_packed_part(node, "nzval", what)
            try:
                colptr, colptr_group = self._read_part(node, "colptr", what, (shape[1] + 1,))
                rowval, rowval_group = self._deferred_part(node, "rowval", what, colptr.dtype)
                if len(rowval.shape) != 1 or int(colptr[0]) != 1 or int(colptr[-1]) != rowval.shape[0] + 1 or \
                        rowval.shape[0] > shape[0] * shape[1]:
                    raise DafFormatError(f"the colptr and rowval of the {what}\nin the H5df file: {self.path}\nare "
                                         f"not a 1-based CSC of {shape[0]} x {shape[1]} (colptr from {colptr[0]} to "
                                         f"{colptr[-1]}, {rowval.shape[0]} rowval)")
                if _child(node, "nztxt", "strings") is not None:
                    rowval = _loaded(rowval)
                    texts, _ = self._read_part(node, "nztxt", what, rowval.shape)
                    if np.any(np.diff(colptr.astype(np.int64)) < 0):
                        raise DafFormatError(f"the colptr of the {what}\nin the H5df file: {self.path}\ndecreases")
                    _check_positions(rowval, shape[0], f"rowval of the {what}", self.path)
                    return dense_string_matrix(shape, colptr, rowval, texts), CacheGroup.MemoryData
                if rowval.dtype != colptr.dtype:
                    rowval, rowval_group = np.asarray(rowval).astype(colptr.dtype), CacheGroup.MemoryData
                if pending is not None:
                    nzval, nzval_group = self._finish_packed_part(pending, "nzval", what, rowval.shape), \
                        CacheGroup.MemoryData
                    pending = None
                elif _child(node, "nzval", "values") is not None:
                    nzval, nzval_group = self._read_part(node, "nzval", what, rowval.shape)
                else:
                    nzval, nzval_group = np.ones(rowval.shape[0], dtype=np.bool_), CacheGroup.MemoryData
            finally:
                if pending is not None:
                    pending.cancel()
            matrix = SparseMatrixCSC(shape, colptr, rowval, nzval)
            return matrix, weakest_cache_group(colptr_group, rowval_group, nzval_group)

    def _start_packed_part(self, group: h5py.Group, part: str, what: str) -> PackedRead | None:
        """Start decoding a packed component of a sparse property on the kernels' threads
        (:func:`~.packed.start_read_packed`: large data in Julia's blosc chunks), its declared size checked first;
        ``None`` if it is not (absent, not packed, small...): the caller reads it as usual."""
        node = _child(group, part, f"{part} of the {what}", read_only_file=self._read_only_file)
        stored = _packed_dtype(node)
        if stored is None:
            return None
        _check_declared_size(node, stored.itemsize, f"{part} of the {what}", self.path)
        return start_read_packed(node, stored, f"{part} of the {what}", self.path)

    def _finish_packed_part(self, pending: PackedRead, part: str, what: str, shape: tuple[int, ...]) -> np.ndarray:
        """The values of a component started by :meth:`_start_packed_part`, as :meth:`_read_part` gives them (its
        ``shape`` checked)."""
        _check_shape(pending.dataset, shape, f"{part} of the {what}")
        values = pending.result()
        values = values.astype(_dataset_dtypes(pending.dataset)[1], copy=False)
        values.flags.writeable = False
        return values

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        what = f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}"
        with self._reading(what):
            node = self._node("matrix", "matrices", rows_axis, columns_axis, name)
            shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
            if isinstance(node, h5py.Dataset):  # (packed dense: the HDF5 rows of the columns)
                _check_shape(node, (shape[1], shape[0]), what)
                stored, daf_dtype = _dataset_dtypes(node)
                if stored == STRING_DTYPE:
                    return None
                _check_declared_size(node, stored.itemsize, what, self.path)
                values = read_packed_selection(node, stored, what, self.path, rows=columns)
                return None if values is None else np.asfortranarray(values.view(daf_dtype))
            parts = {part: _child(node, part, f"{part} of the {what}", read_only_file=self._read_only_file)
                     for part in ("rowval", "nzval", "nztxt")}
            if parts["nztxt"] is not None or not any(
                    isinstance(part, h5py.Dataset) and part.chunks is not None
                    and part.id.get_create_plist().get_nfilters() for part in (parts["rowval"], parts["nzval"])):
                return None
            colptr, _ = self._read_part(node, "colptr", what, (shape[1] + 1,))
            rowval_node = parts["rowval"]
            if not isinstance(rowval_node, h5py.Dataset) or rowval_node.ndim != 1:
                raise DafFormatError(f"missing dataset: rowval\nof the {what}\nin the H5df file: {self.path}")
            nnz = rowval_node.shape[0]
            try:
                if int(colptr[-1]) != nnz + 1:
                    raise ValueError(f"colptr ends at {colptr[-1]} for {nnz} rowval")
                starts, stops, selected_colptr = selected_column_runs(colptr, columns, shape[0])
            except ValueError as error:
                raise DafFormatError(f"the colptr and rowval of the {what}\nin the H5df file: {self.path}\nare not "
                                     f"a 1-based CSC of {shape[0]} x {shape[1]} ({error})") from None
            rowval = self._part_runs(node, "rowval", what, nnz, starts, stops).astype(colptr.dtype, copy=False)
            if parts["nzval"] is not None:
                nzval = self._part_runs(node, "nzval", what, nnz, starts, stops)
            else:
                nzval = np.ones(rowval.shape[0], dtype=np.bool_)
            return SparseMatrixCSC((shape[0], int(columns.shape[0])), selected_colptr, rowval, nzval)

    def _part_runs(self, group: h5py.Group, part: str, what: str, nnz: int, starts: np.ndarray,
                   stops: np.ndarray) -> np.ndarray:
        """The runs ``[starts, stops)`` of a sparse component: only their chunks decoded if it is packed, else
        gathered from its (mapped) values."""
        node = _child(group, part, f"{part} of the {what}", read_only_file=self._read_only_file)
        if not isinstance(node, h5py.Dataset):
            raise DafFormatError(f"missing dataset: {part}\nof the {what}\nin the H5df file: {self.path}")
        _check_shape(node, (nnz,), f"{part} of the {what}")
        stored, daf_dtype = _dataset_dtypes(node)
        if stored != STRING_DTYPE:
            _check_declared_size(node, stored.itemsize, f"{part} of the {what}", self.path)
            values = read_packed_selection(node, stored, f"{part} of the {what}", self.path, runs=(starts, stops))
            if values is not None:
                return values.view(daf_dtype)
        whole, _ = self._read_dataset(node, f"{part} of the {what}", (nnz,))
        counts = stops - starts
        if not counts.size or not counts.sum():
            return whole[:0].copy()
        positions = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(counts.sum())
        return whole[positions]

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        _check_link_name(name, "matrix")
        matrices = self._matrices(rows_axis, columns_axis)
        with self._writing(f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}", (matrices, name)):
            if isinstance(matrix, SparseMatrixCSC):
                group = matrices.create_group(name)
                self._write_data(group, "colptr", matrix.colptr, packed=self.is_packed)
                self._write_data(group, "rowval", matrix.rowval, packed=self.is_packed)
                if not (matrix.nzval.dtype == np.bool_ and matrix.nzval.all()):
                    self._write_data(group, "nzval", matrix.nzval, packed=self.is_packed)
            elif isinstance(matrix, np.ndarray):
                if matrix.dtype == STRING_DTYPE:
                    self._write_string_matrix(matrices, name, matrix)  # (strings are never packed in H5df)
                else:
                    self._write_data(matrices, name, matrix.T, packed=self.is_packed)
            else:
                shape = (self.format_axis_length(columns_axis), self.format_axis_length(rows_axis))
                if isinstance(matrix, str):
                    _write_strings(matrices, name, np.full(shape, matrix, dtype=object))
                else:
                    self._allocate_mapped(matrices, name, scalar_dtype(matrix), shape)[...] = matrix

    def _write_string_matrix(self, matrices: h5py.Group, name: str, matrix: np.ndarray) -> None:
        if not sparse_strings_are_smaller(matrix, matrix.shape[1]):
            _write_strings(matrices, name, np.ascontiguousarray(matrix.T))
            return
        for value in matrix.flat:
            if "\n" in value:
                raise DafTypeError(f"a string of the matrix: {name}\ncontains a newline (not allowed in sparse "
                                   "string matrices)")
        colptr, rowval, texts = sparse_string_matrix(matrix)
        group = matrices.create_group(name)
        self._write_numbers(group, "colptr", colptr)
        self._write_numbers(group, "rowval", rowval)
        _write_strings(group, "nztxt", texts)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        _check_link_name(name, "matrix")
        self._delete_property(self._matrices(rows_axis, columns_axis), name, for_set)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        matrices = self._matrices(rows_axis, columns_axis)
        shape = (self.format_axis_length(columns_axis), self.format_axis_length(rows_axis))
        with self._writing(f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}", commit=False):
            staging = self._start_building(matrices, name, "matrix")
            if chunks_for(self.is_packed, (shape[1], shape[0]), dtype) is not None:
                # (Julia streams each filled column into the chunked dataset; here the buffer is in memory, and
                # written packed, with the same chunks and filters, when filled)
                compressor_for()
                return np.zeros((shape[1], shape[0]), dtype=dtype, order="F")
            return self._allocate_mapped(matrices, staging, dtype, shape).T

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        matrices = self._matrices(rows_axis, columns_axis)

        def write() -> None:
            if _link_type(matrices, _NEW + name) is None:
                self._write_data(matrices, _NEW + name, filled.T, packed=True)

        self._filled(f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}", write)

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        matrices = self._matrices(rows_axis, columns_axis)
        n_columns = self.format_axis_length(columns_axis)
        with self._writing(f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}", commit=False):
            staging = self._start_building(matrices, name, "matrix")
            if self.is_packed:  # (Julia's: in memory, each component packed if large enough when filled)
                compressor_for()
                return (np.zeros(n_columns + 1, dtype=indtype), np.zeros(nnz, dtype=indtype),
                        np.zeros(nnz, dtype=dtype))
            group = matrices.create_group(staging)
            return (self._allocate_mapped(group, "colptr", indtype, (n_columns + 1,)),
                    self._allocate_mapped(group, "rowval", indtype, (nnz,)),
                    self._allocate_mapped(group, "nzval", dtype, (nnz,)))

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        matrices = self._matrices(rows_axis, columns_axis)

        def write() -> None:
            if _link_type(matrices, _NEW + name) is None:
                group = matrices.create_group(_NEW + name)
                self._write_data(group, "colptr", filled.colptr, packed=True)
                self._write_data(group, "rowval", filled.rowval, packed=True)
                self._write_data(group, "nzval", filled.nzval, packed=True)

        self._filled(f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}", write)

    # Reorder (Julia's ``Reorder`` hooks on Julia's artifacts; why a kill at any instant is recoverable: .reorder).

    reorder_module = _reorder

    # (this module's HDF5 helpers, for .reorder, which can't import this module: see its H5dfStorage)

    def _hdf5_child(self, group: h5py.Group, name: str, what: str) -> h5py.Group | h5py.Dataset | None:
        return _child(group, name, what)

    def _hdf5_names(self, group: h5py.Group | h5py.Dataset | None) -> set[str]:
        return _names(group)

    def _hdf5_delete(self, group: h5py.Group, name: str) -> None:
        _delete(group, name)

    def _hdf5_write_strings(self, group: h5py.Group, name: str, values: np.ndarray) -> None:
        _write_strings(group, name, values)

    def _hdf5_write_scalar_string(self, group: h5py.Group, name: str, value: str) -> None:
        _write_scalar_string(group, name, value)


def _delete(group: h5py.Group, name: str) -> None:
    """Delete a dataset or group, first detaching live maps of its data (HDF5 may reuse or cut off the space)."""
    if _link_type(group, name) != h5l.TYPE_HARD:  # a soft or external link: only the link goes
        del group[name]
        return
    node = group[name]
    datasets = [node] if isinstance(node, h5py.Dataset) else []
    if isinstance(node, h5py.Group):
        node.visititems(lambda _, child: datasets.append(child) if isinstance(child, h5py.Dataset) else None)
    journal = _record_of(group.file).journal
    for dataset in datasets:
        offset = dataset.id.get_offset()
        if offset is not None:
            detach_region(group.file.filename, offset, dataset.id.get_storage_size())
            if journal is not None:
                journal.deleted(offset, dataset.id.get_storage_size())
    del group[name]


def _require_replaceable_file(path: str) -> None:
    """Refuse to replace (mode ``w``) anything at ``path`` but a missing or empty file or an H5df data set: another
    HDF5 file (an ``.h5ad``), or any other file, is somebody's data."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(status.st_mode) and status.st_size == 0:
        return
    is_daf = False
    if stat.S_ISREG(status.st_mode) and h5py.is_hdf5(path):  # (a FIFO would block; a directory is no file)
        try:
            with h5py.File(path, "r", locking=False) as file:
                is_daf = _is_daf_root(file)
        except (OSError, ValueError, KeyError):
            return  # (open in this process already: opening it to truncate refuses, saying so)
    if not is_daf:
        raise DafModeError(f"not a daf data set: {path}\n(it is an existing file that is not an H5df data set; H5df "
                           "will not erase it in mode w)")


def _is_daf_root(group: h5py.Group) -> bool:
    try:
        return _link_type(group, "daf") is not None
    except _READ_ERRORS as error:
        raise DafFormatError(f"can't read the daf data: {_root_text(group)}\n({type(error).__name__}: {error})",
                             daf_name=_root_text(group), daf_preposition=None) from error


def _verify_version(group: h5py.Group, where: str) -> None:
    try:
        node = _child(group, "daf", "version dataset")
        if not isinstance(node, h5py.Dataset) or node.shape != (2,) or node.dtype.kind != "u":
            raise DafFormatError("invalid daf version dataset (expected 2 unsigned integers)", daf_name=where,
                                 daf_preposition="for")
        major, minor = (int(value) for value in node[()])
        groups = [_child(group, name, "group") for name in ("scalars", "axes", "vectors", "matrices")]
    except _READ_ERRORS as error:
        raise DafFormatError(f"can't read the daf data: {where}\n({type(error).__name__}: {error})", daf_name=where,
                             daf_preposition=None) from error
    if major != MAJOR_VERSION or minor > MINOR_VERSION:
        raise DafFormatError(f"incompatible format version: {major}.{minor}", daf_name=where, daf_preposition="for",
                             hint=f"the code supports version: {MAJOR_VERSION}.{MINOR_VERSION}")
    for name, node in zip(("scalars", "axes", "vectors", "matrices"), groups, strict=True):
        if not isinstance(node, h5py.Group):
            raise DafFormatError(f"missing group: {name}", daf_name=where)


def _create_skeleton(group: h5py.Group) -> None:
    for name in list(group.keys()):
        _delete(group, name)
    for name in list(group.attrs.keys()):
        del group.attrs[name]
    _write_numbers(group, "daf", np.array([MAJOR_VERSION, MINOR_VERSION], dtype=np.uint8))
    for name in ("scalars", "axes", "vectors", "matrices"):
        group.create_group(name)


def _root_text(group: h5py.Group) -> str:
    if group.name == "/":
        return group.file.filename
    return f"{group.file.filename}#{group.name}"


class H5df(PersistentDaf):
    """A Daf data set in an HDF5 file (``x.h5df``) or in a group of one (``x.h5dfs#/group``), or in an open
    ``h5py.File``/``h5py.Group``. Modes: ``r`` (read-only; returns a :class:`~pydaf.DafReadOnly`), ``r+``, ``w+``
    (create if missing) and ``w`` (truncate). ``w+`` refuses to turn a non-empty HDF5 root that is not a Daf data set
    into one (Julia would wipe it); ``w`` always starts afresh.

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "example.h5df")
        >>> daf = pydaf.H5df(path, "w", name="example!")
        >>> daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5]).get_vector("cell", "age").tolist()
        [3, 5]
        >>> pydaf.H5df(path, "r").get_vector("cell", "age").flags.writeable
        False
    """

    #: A leaf storage format (see :func:`pydaf.is_leaf`): it owns its state and can be reordered in place.
    leaf_format: ClassVar[bool] = True

    _format: H5dfFormat

    def __init__(self, root: str | os.PathLike | h5py.Group, mode: str = "r", *, name: str | None = None,
                 packed: bool = False) -> None:
        if not isinstance(packed, bool | np.bool_):
            raise DafValueError(f"invalid packed: {packed!r}\n(expected True or False)")
        super().__init__(self._open(root, mode), name=name)
        self._format.packed_default = bool(packed)
        try:  # (a reorder a killed process left: rolled back by a writable open, refused by a read-only one)
            _reorder.check_interrupted_reorder(self)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _open(root: str | os.PathLike | h5py.Group, mode: str) -> H5dfFormat:
        writable, may_create, truncate = parse_mode(mode)
        if isinstance(root, h5py.Group):
            group = root
            if writable and group.file.mode != "r+":
                raise DafModeError(f"can't open the HDF5 group: {group.name}\nof the read-only file: "
                                   f"{group.file.filename}\nin mode: {mode}")
            complete_path = None
        else:
            path, group_path = split_h5df_path(root)
            if group_path == "/":
                if mode == "w":
                    _require_replaceable_file(path)
                file = open_h5_file(path, {"r": "r", "r+": "r+", "w+": "a", "w": "w"}[mode])
                group = file
                complete_path = os.path.abspath(path)
            else:
                file = open_h5_file(path, "r" if mode == "r" else "r+" if mode == "r+" else "a")
                if group_path in file:
                    if mode == "w":
                        existing = file[group_path]
                        if not isinstance(existing, h5py.Group) or not (_is_daf_root(existing) or (
                                not len(existing) and not len(existing.attrs))):
                            raise DafModeError(f"not a daf data set: {path}#{group_path}\n(an existing HDF5 object "
                                               "that is not an H5df data set; H5df will not erase it in mode w)")
                        _delete(file, group_path)
                        file.create_group(group_path)
                elif may_create:
                    file.create_group(group_path)
                else:
                    raise DafFormatError(f"missing group: {group_path}\nin the HDF5 file: {path}")
                group = file[group_path]
                complete_path = f"{os.path.abspath(path)}#{group_path}"
        where = _root_text(group)
        if _is_daf_root(group):
            if truncate:
                _create_skeleton(group)
            else:
                _verify_version(group, where)
        elif not may_create:
            raise DafNotDafError(f"not a daf data set: {where}")
        elif truncate or (not len(group) and not len(group.attrs)):
            _create_skeleton(group)
        else:
            raise DafNotDafError(f"not a daf data set: {where}\n(it is a non-empty HDF5 "
                                 f"{'file' if group.name == '/' else 'group'}; mode w+ will not wipe it, "
                                 "use mode w to replace it)")
        return H5dfFormat(group, mode, default_name=where, complete_path=complete_path,
                          owns_file=not isinstance(root, h5py.Group))

    def flush(self) -> None:
        """Flush the HDF5 file to disk.

        Example:
            >>> import pydaf, tempfile, os
            >>> pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w").flush()
        """
        with self._state.lock.read():  # (so a closed data set raises DafClosedError)
            self._format.flush()


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _is_hdf5_file(path: str) -> bool:
    """Whether a regular file starts with the HDF5 signature, which is at byte 0, 512, 1024, 2048… (after a user
    block). Only regular files are read (a FIFO would block), at most one 8-byte read per power of two of the size."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            offset = 0
            while offset + len(_HDF5_SIGNATURE) <= size:
                handle.seek(offset)
                if handle.read(len(_HDF5_SIGNATURE)) == _HDF5_SIGNATURE:
                    return True
                offset = max(512, offset * 2)
    except OSError:
        return False
    return False


def _guess_can_open(path: str) -> bool:
    """An HDF5 file (by its signature), else a path named ``x.h5df`` or ``x.h5dfs#/group`` (Julia's rule)."""
    try:
        file, _ = split_h5df_path(path)
    except DafPathError:
        return True  # (an H5df path, which opening refuses saying why)
    return _is_hdf5_file(file) or path.endswith(".h5df") or ".h5dfs#/" in path
