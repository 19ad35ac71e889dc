"""ZipDaf: Julia's FilesDaf layout inside one ZIP archive: ``x.daf.zip`` holds one data set at its root,
``x.dafs.zip#/group`` one of several, each under ``group/``. The entries are exactly the FilesDaf files, with the
same bytes (:mod:`pydaf.formats.files.layout`), written append-only through :mod:`pydaf.formats.zip.store`, so
numbers are mapped zero-copy and the archive is a valid ZIP after every write.

Design: docs/design/zip.md; the bytes: docs/spec/FORMATS.md §3.11."""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..._os.byte_sources import BufferByteSource
from ...abc.format import CacheGroup, StoredMatrix, StoredVector, parse_mode
from ...core.packed_settings import chunks_for, validated_packed_default
from ...errors import (
    DafAppendOnlyError,
    DafFormatError,
    DafMissingError,
    DafModeError,
    DafNameError,
    DafNotDafError,
    DafStorageError,
)
from ...sparse import SparseMatrixCSC, SparseVector
from ...storage_types import StorageScalar, julia_name
from ..files.layout import (
    MAJOR_VERSION,
    MINOR_VERSION,
    Files,
    decode_matrix,
    decode_matrix_columns,
    decode_vector,
    dense_json,
    empty_sparse_matrix_json,
    empty_sparse_vector_json,
    is_file_name,
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
from ..paths import split_container_path
from ..registry import FormatEntry, PersistentDaf, register_format
from ..stored import StoredFormat
from .store import ZipAppend, ZipStore, acquire_zip_store, check_entry_name

#: Entries a ``zip -r`` of a FilesDaf directory bundles that a ZipDaf does not keep (dropped from the central
#: directory by a writable open; their bytes stay in the archive, unreachable).
SIDECAR_NAMES = ("metadata.json", "metadata.zip", "axes/metadata.json")

_MAX_JSON_BYTES = 64 << 20  # descriptors are tiny; a scalar string may be large, but not gigabytes
_AXIS_ENTRY = re.compile(r"(?:^|/)axes/[^/]+\.txt\Z", re.DOTALL)
_PATH = re.compile(r"\.dafs?\.zip(?:\Z|#)")
_LONGEST_SUFFIX = ".colptr"  # (of a property's entries: .json, .data, .nzind, .nzval, .colptr, .rowval)
#: Group path parts that would put a group's entries among another data set's (``a/scalars`` holds
#: ``a/scalars/daf.json``, a scalar ``daf`` of the group ``a``) or among a root's sidecars.
RESERVED_GROUP_PARTS = frozenset({"scalars", "axes", "vectors", "matrices", "daf.json", *SIDECAR_NAMES})


def split_zip_path(path: str | os.PathLike) -> tuple[str, str | None]:
    """Julia's ``parse_zip_archive_path`` for ZipDaf: ``(container, group)`` for ``x.daf.zip`` (group ``None``) and
    ``x.dafs.zip#/group``; anything else is a :class:`~pydaf.DafPathError` with Julia's message
    (:func:`~pydaf.formats.paths.split_container_path`).

    Example:
        >>> split_zip_path("cells.daf.zip"), split_zip_path("all.dafs.zip#/cells/raw")
        (('cells.daf.zip', None), ('all.dafs.zip', 'cells/raw'))
        >>> split_zip_path("all.dafs.zip")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafPathError: missing '#/<group>' in plural ZipDaf path: all.dafs.zip
    """
    return split_container_path(path, singular=(".daf.zip",), plural=".dafs.zip", format="ZipDaf")


def _is_commit(name: str) -> bool:
    """Whether an entry ends an appended batch: a property's ``.json`` descriptor (``daf.json`` too), or an axis."""
    return name.endswith(".json") or _AXIS_ENTRY.search(name) is not None


class _EntrySource:
    """The entries of one property in the archive, as the layout's decoders read them."""

    def __init__(self, storage: ZipFormat, base: str, what: str) -> None:
        self._store = storage.store
        self._path = storage.path
        self._base = base
        self.what = what

    def _name(self, suffix: str) -> str:
        name = self._base + suffix
        if name not in self._store:
            raise DafFormatError(f"missing ZIP entry: {name}\nof {self.what}\nin the daf zip archive: {self._path}")
        return name

    def map(self, suffix: str, dtype: np.dtype, count: int | None) -> tuple[np.ndarray, CacheGroup]:
        name = self._name(suffix)
        entry = self._store.entry(name)
        assert entry is not None
        if count is None:  # (v1.0 sparse components: as long as their size says)
            if entry.size % dtype.itemsize:
                raise DafFormatError(f"the ZIP entry: {name}\nof {self.what}\nin the daf zip archive: {self._path}\n"
                                     f"has {entry.size} bytes (not a multiple of {dtype.itemsize})")
            count = entry.size // dtype.itemsize
        mapped = self._store.map_array(name, dtype, count)  # (checks the size first)
        if mapped is not None:
            return mapped, CacheGroup.MappedData if count else CacheGroup.MemoryData
        values = np.frombuffer(self._store.read(name), dtype=dtype).copy()  # compressed or unaligned: a copy
        return values, CacheGroup.MemoryData

    def text(self, suffix: str, count: int) -> np.ndarray:
        return lines(self._store.read(self._name(suffix)), count, f"{self.what}\nin the daf zip archive: {self._path}")

    def invalid(self, problem: str) -> DafFormatError:
        return DafFormatError(f"invalid {self.what}\nin the daf zip archive: {self._path}\n({problem})")

    def byte_source(self, suffix: str) -> BufferByteSource:
        """A nested packed shard entry (§3.11): mapped where it is STORED (as Julia writes it), else decompressed."""
        name = self._name(suffix)
        entry = self._store.entry(name)
        assert entry is not None
        mapped = self._store.map_array(name, np.dtype(np.uint8), entry.size)
        data = mapped if mapped is not None else np.frombuffer(self._store.read(name), dtype=np.uint8)
        return BufferByteSource(f"{name} (in the daf zip archive: {self._path})", data)


class ZipFormat(StoredFormat):
    """The storage of a ZipDaf data set: FilesDaf entries in a ZIP archive (see the module docstring)."""

    type_name = "ZipDaf"
    supports_rewrites = False  # a ZIP archive is append-only

    def __init__(self, path: str, mode: str) -> None:
        writable, may_create, truncate = parse_mode(mode)
        container, group = split_zip_path(path)
        self.locate(container, group, mode)
        self.is_writable = writable
        self.prefix = "" if group is None else f"{group}/"
        self._axis_lengths: dict[str, int] = {}  # (an archive's axes never change)
        self._building: tuple[str, ZipAppend] | None = None  # an empty_* builder's entries base and batch
        if truncate and group is not None:
            raise DafModeError(f"can't truncate a sub-daf inside a ZipDaf; the ZIP backend is append-only: "
                               f"{self.path}")
        if not may_create and not os.path.isfile(self.container):
            raise DafFormatError(f"no such file: {self.container}")
        if group is not None:
            check_entry_name(self.prefix + "matrices/" + _LONGEST_SUFFIX, what=f"the group: {group}", where=self.path)
        self.store: ZipStore = acquire_zip_store(
            self.container, writable=writable, create=may_create, is_commit=_is_commit,
            truncate=("daf.json", "ZipDaf") if truncate and group is None else None)
        self._release = weakref.finalize(self, self.store.release)
        try:
            self._open_root(may_create)
        except BaseException:
            self.format_close()  # (a failed open holds no archive)
            raise

    def _open_root(self, may_create: bool) -> None:
        marker = self.prefix + "daf.json"
        if marker not in self.store:
            if not may_create:
                raise DafNotDafError(f"not a daf data set: {self.path}")
            reserved = sorted(set(self.prefix.split("/")) & RESERVED_GROUP_PARTS)
            if reserved:
                raise DafNameError(f"reserved name in the group path: {self.prefix.rstrip('/')}\nof the daf zip "
                                   f"archive: {self.container}\n({reserved[0]!r} is a ZipDaf entry name: a group of "
                                   "that name would mix its entries with another data set's; choose another name)")
            with self.store.append() as batch:
                batch.add(marker, f'{{"version":[{MAJOR_VERSION},{MINOR_VERSION}]}}\n'.encode())
            return
        self._verify_version(marker)
        if self.is_writable:
            stale = [self.prefix + name for name in SIDECAR_NAMES if self.prefix + name in self.store]
            if stale:
                with self.store.append() as batch:
                    for name in stale:
                        batch.remove(name)

    def _verify_version(self, marker: str) -> None:
        version = parse_json(self._read(marker, "the daf.json"), f"the daf.json of the daf zip archive: {self.path}")
        verify_version(version, f"the daf zip archive: {self.path}")

    # Names and entries.

    def _name(self, name: Any, what: str) -> str:
        if is_file_name(name) and "\\" not in name:
            return name
        raise DafNameError(f"invalid {what} name: {name!r}\nfor the daf zip archive: {self.path}\n(ZipDaf names are "
                           "FilesDaf file names: non-empty UTF-8, not starting with '.', without '/', '\\' or NUL)")

    def _has(self, key: Any) -> bool:
        """Whether a property exists (a name the archive could never hold is not found, as the contract asks)."""
        try:
            return self.prefix + key() in self.store
        except DafNameError:
            return False

    def _names(self, folder: str, suffix: str) -> set[str]:
        return {name[:-len(suffix)] for name in self.store.children(self.prefix + folder)
                if name.endswith(suffix) and len(name) > len(suffix) and is_file_name(name)
                and self.prefix + f"{folder}/{name}" in self.store}

    def _read(self, name: str, what: str, limit: int | None = None) -> bytes:
        entry = self.store.entry(name)
        if entry is None:
            raise DafMissingError(f"missing {what}\nin the daf zip archive: {self.path}")
        if limit is not None and entry.size > limit:
            raise DafFormatError(f"the ZIP entry: {name}\nof {what}\nin the daf zip archive: {self.path}\nhas "
                                 f"{entry.size} bytes (too large for a descriptor)")
        return self.store.read(name)

    def _descriptor(self, base: str, what: str) -> Any:
        return parse_json(self._read(self.prefix + base + ".json", what, _MAX_JSON_BYTES),
                          f"{what}\nin the daf zip archive: {self.path}")

    def _append_only(self, doing: str, what: str) -> DafAppendOnlyError:
        return DafAppendOnlyError(f"ZipDaf is append-only; can't {doing} {what}\nin: {self.path}")

    def _no_reorder(self) -> DafAppendOnlyError:
        # (supports_reorder stays False: reorder_axes refuses before anything changes, with Julia's words)
        return DafAppendOnlyError(f"ZipDaf is append-only; can't reorder\nin: {self.path}",
                                  hint="(to reorder it: copy it to a FilesDaf, reorder that, and zip it again)")

    def _refuse_existing(self, base: str, what: str) -> None:
        if self.prefix + base + ".json" in self.store:
            raise self._append_only("overwrite", what)

    def _write(self, base: str, files: Files, descriptor: str, what: str) -> None:
        """Append a property's entries as one batch, its descriptor last (what makes it exist). Entries of the same
        names a killed batch left are superseded (``replace``)."""
        self._refuse_existing(base, what)
        text = utf8(descriptor + "\n", what)
        with self.store.append() as batch:
            for suffix, data in files:
                batch.add(self.prefix + base + suffix, data, replace=True)
            batch.add(self.prefix + base + ".json", text, replace=True)

    # Identity: StoredFormat's.

    def format_close(self) -> None:
        """Release this handle's hold of the archive; arrays already returned stay valid."""
        self.format_discard_empty()
        self._release()

    # Scalars.

    def _checked(self, base: str, what: str, suffix: str = _LONGEST_SUFFIX) -> tuple[str, str]:
        """``(base, what)``, once the longest entry name of the property fits in a ZIP (else a DafNameError)."""
        check_entry_name(self.prefix + base + suffix, what=what, where=self.path)
        return base, what

    def _scalar(self, name: str) -> tuple[str, str]:
        name = self._name(name, "scalar")
        return self._checked(f"scalars/{name}", f"the scalar: {name}", ".json")

    def format_has_scalar(self, name: str) -> bool:
        return self._has(lambda: self._scalar(name)[0] + ".json")

    def format_scalars_set(self) -> set[str]:
        return self._names("scalars", ".json")

    def format_get_scalar(self, name: str) -> StorageScalar:
        base, what = self._scalar(name)
        return scalar_value(self._descriptor(base, what), f"{what}\nin the daf zip archive: {self.path}")

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        base, what = self._scalar(name)
        self._write(base, [], scalar_json(value), what)

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        raise self._append_only("overwrite" if for_set else "delete", self._scalar(name)[1])

    # Axes.

    def _axis(self, axis: str) -> tuple[str, str]:
        axis = self._name(axis, "axis")
        return self._checked(f"axes/{axis}.txt", f"the axis: {axis}", "")

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return self._has(lambda: self._axis(axis)[0])

    def format_axes_set(self) -> set[str]:
        return self._names("axes", ".txt")

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        name, what = self._axis(axis)
        data = self._read(self.prefix + name, what)
        return lines(data, line_count(data, what), f"{what}\nin the daf zip archive: {self.path}"), \
            CacheGroup.MemoryData

    def format_axis_length(self, axis: str) -> int:
        length = self._axis_lengths.get(axis)
        if length is None:
            name, what = self._axis(axis)
            length = line_count(self._read(self.prefix + name, what), f"{what}\nin the daf zip archive: {self.path}")
            self._axis_lengths[axis] = length
        return length

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        name, what = self._axis(axis)
        if self.prefix + name in self.store:
            raise self._append_only("overwrite", what)
        data = lines_bytes(entries, f"the entries of {what}")
        with self.store.append() as batch:
            batch.add(self.prefix + name, data, replace=True)

    def format_delete_axis(self, axis: str) -> None:
        raise self._append_only("delete", self._axis(axis)[1])

    # Vectors.

    def _vector(self, axis: str, name: str) -> tuple[str, str]:
        axis, name = self._name(axis, "axis"), self._name(name, "vector")
        return self._checked(f"vectors/{axis}/{name}", f"the vector: {name}\nof the axis: {axis}")

    def format_has_vector(self, axis: str, name: str) -> bool:
        return self._has(lambda: self._vector(axis, name)[0] + ".json")

    def format_vectors_set(self, axis: str) -> set[str]:
        return self._names(f"vectors/{self._name(axis, 'axis')}", ".json")

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        base, what = self._vector(axis, name)
        length = self.format_axis_length(axis)
        return decode_vector(_EntrySource(self, self.prefix + base, what), self._descriptor(base, what), length)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        base, what = self._vector(axis, name)
        self._write(base, *vector_files(vector, self.format_axis_length(axis), what, packed=self.is_packed,
                                        pack_strings=False), what)  # (Julia's ZipDaf writes strings flat)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        raise self._append_only("overwrite" if for_set else "delete", self._vector(axis, name)[1])

    # Builders: the data entries are reserved (and filled in place, in the archive); the descriptor, appended when
    # filled, commits them.

    def _start_building(self, base: str, what: str, entries: list[tuple[str, np.dtype, int]]) -> list[np.ndarray]:
        self._refuse_existing(base, what)
        self.format_discard_empty()
        batch = self.store.append()
        try:
            buffers = [batch.reserve(self.prefix + base + suffix, count * dtype.itemsize, replace=True).view(dtype)
                       for suffix, dtype, count in entries]
        except BaseException:
            batch.abort()
            raise
        self._building = (base, batch)
        return buffers

    def _finish_building(self, base: str, descriptor: str) -> None:
        building, self._building = self._building, None
        if building is None or building[0] != base:
            if building is not None:
                building[1].abort()
            raise DafStorageError(f"filled an empty_* builder that was not started: {base}\nin the daf zip archive: "
                                  f"{self.path}")
        batch = building[1]
        try:
            batch.add(self.prefix + base + ".json", (descriptor + "\n").encode(), replace=True)
        except BaseException:
            batch.abort()
            raise
        batch.commit()

    def format_discard_empty(self) -> bool:
        building, self._building = self._building, None
        self._packed_building = None
        if building is not None:
            building[1].abort()
        return True

    #: The property a packed dense builder is filling (in memory, written packed when filled, as Julia's).
    _packed_building: str | None = None

    def _start_packed(self, base: str, what: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """An in-memory buffer for a dense builder Julia packs (``chunks_for``), else None."""
        if chunks_for(self.is_packed, shape, dtype) is None:
            return None
        self._refuse_existing(base, what)
        self.format_discard_empty()
        self._packed_building = base
        return np.zeros(shape, dtype=dtype, order="F")

    def _finish_packed(self, base: str, what: str, files: Callable[[], tuple[Files, str]]) -> bool:
        """Write a packed builder's files (``files()``: its entries and descriptor), if ``base`` is one."""
        if self._packed_building != base:
            return False
        self._packed_building = None
        stored, descriptor = files()
        self._write(base, stored, descriptor, what)
        return True

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        base, what = self._vector(axis, name)
        length = self.format_axis_length(axis)
        packed = self._start_packed(base, what, (length,), dtype)
        if packed is not None:
            return packed
        (buffer,) = self._start_building(base, what, [(".data", dtype, length)])
        return buffer

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        base, what = self._vector(axis, name)
        if not self._finish_packed(base, what, lambda: vector_files(filled, filled.shape[0], what, packed=True)):
            self._finish_building(base, dense_json(julia_name(filled.dtype)))

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        base, what = self._vector(axis, name)
        nzind, nzval = self._start_building(base, what, [(".nzind", indtype, nnz), (".nzval", dtype, nnz)])
        return nzind, nzval

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._finish_building(self._vector(axis, name)[0], empty_sparse_vector_json(filled))

    # Matrices.

    def _matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[str, str]:
        rows_axis, columns_axis = self._name(rows_axis, "axis"), self._name(columns_axis, "axis")
        name = self._name(name, "matrix")
        return self._checked(f"matrices/{rows_axis}/{columns_axis}/{name}",
                             f"the matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}")

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return self._has(lambda: self._matrix(rows_axis, columns_axis, name)[0] + ".json")

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return self._names(f"matrices/{self._name(rows_axis, 'axis')}/{self._name(columns_axis, 'axis')}", ".json")

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        base, what = self._matrix(rows_axis, columns_axis, name)
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return decode_matrix(_EntrySource(self, self.prefix + base, what), self._descriptor(base, what), shape)

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        base, what = self._matrix(rows_axis, columns_axis, name)
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return decode_matrix_columns(_EntrySource(self, self.prefix + base, what), self._descriptor(base, what), shape,
                                     columns)

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        base, what = self._matrix(rows_axis, columns_axis, name)
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        self._write(base, *matrix_files(matrix, shape, what, packed=self.is_packed, pack_strings=False), what)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        raise self._append_only("overwrite" if for_set else "delete", self._matrix(rows_axis, columns_axis, name)[1])

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        base, what = self._matrix(rows_axis, columns_axis, name)
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        packed = self._start_packed(base, what, shape, dtype)
        if packed is not None:
            return packed
        (buffer,) = self._start_building(base, what, [(".data", dtype, shape[0] * shape[1])])
        return buffer.reshape(shape, order="F")

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        base, what = self._matrix(rows_axis, columns_axis, name)
        if not self._finish_packed(base, what, lambda: matrix_files(filled, filled.shape, what, packed=True)):
            self._finish_building(base, dense_json(julia_name(filled.dtype)))

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        base, what = self._matrix(rows_axis, columns_axis, name)
        colptr, rowval, nzval = self._start_building(base, what, [
            (".colptr", indtype, self.format_axis_length(columns_axis) + 1), (".rowval", indtype, nnz),
            (".nzval", dtype, nnz)])
        return colptr, rowval, nzval

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._finish_building(self._matrix(rows_axis, columns_axis, name)[0], empty_sparse_matrix_json(filled))


class ZipDaf(PersistentDaf):
    """A Daf data set in a ZIP archive holding Julia's FilesDaf layout, Julia's ``ZipDaf``: ``x.daf.zip`` (one data
    set at the root) or ``x.dafs.zip#/group`` (one of several). Numbers are memory-mapped from the archive
    (zero-copy, read-only views); the archive is append-only (deletes and overwrites raise
    :class:`~pydaf.formats.zip.store.DafAppendOnlyError`). Modes as :class:`~pydaf.H5df` (``r`` returns a
    :class:`~pydaf.DafReadOnly`; ``w`` replaces a whole archive, and is refused for a group). ``packed=True`` makes
    writes pack by default (numbers, as Julia's ZipDaf: strings stay flat; docs/design/packed.md).

    Example:
        >>> import pydaf, tempfile, os, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "example.daf.zip")
        >>> daf = pydaf.ZipDaf(path, "w", name="example!").add_axis("cell", ["A", "B"])
        >>> daf.set_vector("cell", "age", [3, 5]).get_vector("cell", "age").tolist()
        [3, 5]
        >>> zipfile.ZipFile(path).namelist()
        ['daf.json', 'axes/cell.txt', 'vectors/cell/age.data', 'vectors/cell/age.json']
    """

    #: A leaf storage format (see :func:`pydaf.is_leaf`): it owns its state and can be reordered in place.
    leaf_format: ClassVar[bool] = True

    _format: ZipFormat

    def __init__(self, path: str | os.PathLike, mode: str = "r", *, name: str | None = None,
                 packed: bool = False) -> None:
        packed = validated_packed_default(packed)
        super().__init__(ZipFormat(os.fspath(path), mode), name=name)
        self._format.packed_default = packed


def _guess_can_open(path: str) -> bool:
    """A ZipDaf path by its suffix: ``x.daf.zip``, ``x.dafs.zip#/group`` (and the near misses Julia refuses with a
    message)."""
    return _PATH.search(path) is not None


FORMAT = register_format(FormatEntry(
    name="ZipDaf", paths="a ZIP of a FilesDaf layout (x.daf.zip), or a group in one (x.dafs.zip#/group)",
    guess_can_open=_guess_can_open, open=ZipDaf.open, priority=30))
