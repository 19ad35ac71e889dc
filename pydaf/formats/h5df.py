"""H5df: Daf inside HDF5 (FORMATS.md §2), byte-compatible with Julia's ``H5df``, read through memory maps.

Layout under the data set's root (a file's ``/`` or any group): ``daf`` (``uint8 [1, 0]``), ``scalars/``, ``axes/``,
``vectors/<axis>/`` and ``matrices/<rows>/<cols>/``. Every contiguous, unfiltered, allocated, aligned numeric dataset
is read by mapping the file at the dataset's offset — nothing is read until the data is touched — and the ``empty_*``
builders hand out writable maps of freshly allocated datasets. Files are opened with HDF5 alignment ``(1, 8)`` (so
Julia and numpy can map every dataset) and no raw-data sieve buffer (so HDF5 never writes back stale bytes over data
written through a map).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5f, h5o, h5p, h5s, h5t

from ..errors import DafFormatError, DafModeError, DafTypeError
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import JULIA_NAMES, STRING_DTYPE, StorageScalar, scalar_dtype
from .base import (
    CacheGroup,
    FormatWriter,
    StoredMatrix,
    StoredVector,
    dense_string_matrix,
    dense_string_vector,
    parse_mode,
    sparse_string_matrix,
    sparse_string_vector,
    sparse_strings_are_smaller,
    weakest_cache_group,
)
from .mapping import detach_region, map_region, populate_pages
from .registry import FormatEntry, PersistentDaf, register_format

MAJOR_VERSION = 1
MINOR_VERSION = 0
ALIGNMENT = 8

_STRING_TYPE = h5py.string_dtype("utf-8")


def split_h5df_path(path: str | os.PathLike) -> tuple[str, str]:
    """Split ``file.h5dfs#/group/path`` into the file and the group (``/`` for a plain file path).

    Example:
        >>> split_h5df_path("data.h5dfs#/cells")
        ('data.h5dfs', '/cells')
    """
    path = os.fspath(path)
    if ".h5dfs#/" not in path:
        return path, "/"
    file, group = path.split(".h5dfs#/", 1)
    if not group:
        raise DafModeError(f"empty group name after '#/' in H5df path: {path}")
    return f"{file}.h5dfs", "/" + group


# Process-wide sharing of open files, as Julia does: one h5py.File per path.
_open_files: dict[str, weakref.ref[h5py.File]] = {}
_open_files_lock = threading.Lock()


def _file_access_list() -> h5p.PropFAID:
    fapl = h5p.create(h5p.FILE_ACCESS)
    fapl.set_alignment(1, ALIGNMENT)
    fapl.set_sieve_buf_size(0)
    return fapl


def open_h5_file(path: str, mode: str) -> h5py.File:
    """Open (or create) an HDF5 file with Daf's access properties; ``mode`` is an h5py mode (``r``, ``r+``, ``a``,
    ``w``). A file already open in this process is shared (and must have been opened writable to be written)."""
    key = os.path.abspath(path)
    with _open_files_lock:
        existing = _open_files.get(key)
        file = existing() if existing is not None else None
        if file is not None and file.id.valid:
            if mode == "w":
                raise DafModeError(f"can't truncate the HDF5 file: {path}\nwhile it is open in this process")
            if mode != "r" and file.mode != "r+":
                raise DafModeError(f"the HDF5 file: {path}\nis already open read-only in this process")
            return file
        fapl = _file_access_list()
        encoded = os.fsencode(path)
        if mode == "w":
            detach_region(path)  # truncating the file would otherwise kill any array still mapping it
        try:
            if mode == "w" or (mode == "a" and not os.path.exists(path)):
                fid = h5f.create(encoded, h5f.ACC_TRUNC, fapl=fapl)
            else:
                if not os.path.exists(path):
                    raise DafFormatError(f"missing H5df file: {path}")
                fid = h5f.open(encoded, h5f.ACC_RDONLY if mode == "r" else h5f.ACC_RDWR, fapl=fapl)
        except OSError as error:
            raise DafFormatError(f"not a valid HDF5 file (truncated or corrupt?): {path}\n({error})") from error
        file = h5py.File(fid)
        _open_files[key] = weakref.ref(file)
        return file


def _register_filter_plugins() -> None:
    """Make the blosc/bitshuffle/zstd filters of Julia's packed data readable, if ``hdf5plugin`` is installed (gzip
    and shuffle are built into HDF5)."""
    try:
        import hdf5plugin  # noqa: F401 - importing registers the filters
    except ImportError:
        pass


def _is_bool_enum(tid: h5t.TypeID) -> bool:
    if not isinstance(tid, h5t.TypeEnumID) or tid.get_nmembers() != 2:
        return False
    names = {tid.get_member_name(index).upper() for index in range(2)}
    return names == {b"FALSE", b"TRUE"}


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


def _write_numbers(group: h5py.Group, name: str, values: np.ndarray | np.generic) -> h5py.Dataset:
    """Write a numeric array (C order, HDF5 shape) or scalar as a contiguous dataset."""
    array = np.asarray(values)
    if not array.flags.c_contiguous:  # (not np.ascontiguousarray: it turns a scalar into a 1-element vector)
        array = np.ascontiguousarray(array)
    dataset = _create_dataset(group, name, array.dtype, array.shape)
    if array.size:
        if array.dtype == np.bool_:
            dataset.id.write(h5s.ALL, h5s.ALL, array.view(np.uint8), mtype=h5t.NATIVE_B8)
        else:
            dataset.id.write(h5s.ALL, h5s.ALL, array)
    return dataset


def _write_strings(group: h5py.Group, name: str, values: np.ndarray) -> None:
    """Write strings (C order, HDF5 shape) as variable-length UTF-8."""
    group.create_dataset(name, shape=values.shape, dtype=_STRING_TYPE, data=values if values.size else None)


def _write_scalar_string(group: h5py.Group, name: str, value: str) -> None:
    """A fixed-length UTF-8 scalar string (size = byte length, at least 1), exactly as HDF5.jl writes one."""
    raw = value.encode("utf-8")
    size = max(1, len(raw))
    tid = h5t.C_S1.copy()
    tid.set_size(size)
    tid.set_cset(h5t.CSET_UTF8)
    tid.set_strpad(h5t.STR_NULLTERM)
    dataset = h5d.create(group.id, name.encode(), tid, h5s.create(h5s.SCALAR))
    dataset.write(h5s.ALL, h5s.ALL, np.array(raw.ljust(size, b"\0"), dtype=f"S{size}"), mtype=tid)


class H5dfFormat(FormatWriter):
    """The storage of an H5df data set: a group of an open ``h5py.File``."""

    type_name = "H5df"

    def __init__(self, root: h5py.Group, mode: str, *, default_name: str, complete_path: str | None) -> None:
        self.root = root
        self.file = root.file
        self.path = self.file.filename
        self.mode = mode
        self.is_writable = mode != "r"
        self._default_name = default_name
        self._complete_path = complete_path

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
        self.file.flush()

    # Mapping.

    def _read_dataset(self, dataset: h5py.Dataset) -> tuple[np.ndarray, CacheGroup]:
        """A dataset's values in Daf's (C, HDF5-shaped) form: mapped if possible, else read."""
        stored, daf_dtype = _dataset_dtypes(dataset)
        if stored == STRING_DTYPE:
            return dataset.asstr()[()], CacheGroup.MemoryData
        mapped = self._map_dataset(dataset, stored, writable=False)
        if mapped is not None:
            return (mapped if daf_dtype == stored else mapped.view(daf_dtype)), CacheGroup.MappedData
        if dataset.id.get_create_plist().get_nfilters():
            _register_filter_plugins()
        values = np.empty(dataset.shape, dtype=stored)
        if values.size:
            dataset.read_direct(values)
        return values.astype(daf_dtype, copy=False), CacheGroup.MemoryData

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
        region = map_region(self.path, offset, dataset.size * dtype.itemsize, writable=writable)
        return np.frombuffer(region, dtype=dtype, count=dataset.size).reshape(dataset.shape)

    def _allocate_mapped(self, group: h5py.Group, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """Create a contiguous dataset, allocate it, and return a writable, zero-filled map of it."""
        # The file's size before the dataset exists: HDF5 extends the file when it allocates the dataset, so only
        # space below this size can hold old bytes (and needs zeroing); space above it is fresh.
        self.file.flush()
        size = os.path.getsize(self.path)
        dataset = _create_dataset(group, name, dtype, shape, allocate=True)
        if dataset.size == 0:
            return np.zeros(shape, dtype=dtype)
        self.file.flush()
        offset = dataset.id.get_offset()
        nbytes = dataset.size * dtype.itemsize
        if offset + nbytes > size:
            os.truncate(self.path, offset + nbytes)  # fresh space at the end: the extension reads as zeros
        mapped = self._map_dataset(dataset, np.dtype(np.uint8) if dtype == np.bool_ else dtype, writable=True)
        assert mapped is not None, "an allocated contiguous dataset must be mappable"
        if offset < size:  # reused space may hold old bytes
            populate_pages(mapped)
            mapped[...] = 0
        return mapped.view(dtype) if dtype == np.bool_ else mapped

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return name in self.root["scalars"]

    def format_scalars_set(self) -> set[str]:
        return set(self.root["scalars"].keys())

    def format_get_scalar(self, name: str) -> StorageScalar:
        dataset = self.root["scalars"][name]
        stored, daf_dtype = _dataset_dtypes(dataset)
        if dataset.shape not in ((), (1,)):
            raise DafFormatError(f"the scalar: {name}\nin the H5df file: {self.path}\nis not a scalar dataset "
                                 f"(shape: {dataset.shape})")
        if stored == STRING_DTYPE:
            value = dataset.asstr()[()]
            return str(value if dataset.shape == () else value[0])
        values, _ = self._read_dataset(dataset)
        return daf_dtype.type(values.reshape(-1)[0] if values.shape else values[()])

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        if isinstance(value, str):
            _write_scalar_string(self.root["scalars"], name, value)
        else:
            _write_numbers(self.root["scalars"], name, np.array(value, dtype=scalar_dtype(value)))

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        _delete(self.root["scalars"], name)

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return axis in self.root["axes"]

    def format_axes_set(self) -> set[str]:
        return set(self.root["axes"].keys())

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return self.root["axes"][axis].asstr()[()], CacheGroup.MemoryData

    def format_axis_length(self, axis: str) -> int:
        return int(self.root["axes"][axis].shape[0])

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        _write_strings(self.root["axes"], axis, entries)
        self.root["vectors"].create_group(axis)
        matrices = self.root["matrices"]
        axis_group = matrices.create_group(axis)
        for other in self.root["axes"]:
            axis_group.create_group(other)
            if other != axis:
                matrices.require_group(other).create_group(axis)

    def format_delete_axis(self, axis: str) -> None:
        _delete(self.root["axes"], axis)
        for container in (self.root["vectors"], self.root["matrices"]):
            if axis in container:
                _delete(container, axis)
        for rows_group in self.root["matrices"].values():
            if axis in rows_group:
                _delete(rows_group, axis)

    # Vectors.

    def _vectors(self, axis: str) -> h5py.Group:
        return self.root["vectors"].require_group(axis)

    def format_has_vector(self, axis: str, name: str) -> bool:
        vectors = self.root["vectors"]
        return axis in vectors and name in vectors[axis]

    def format_vectors_set(self, axis: str) -> set[str]:
        vectors = self.root["vectors"]
        return set(vectors[axis].keys()) if axis in vectors else set()

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        node = self.root["vectors"][axis][name]
        length = self.format_axis_length(axis)
        if isinstance(node, h5py.Dataset):
            values, group = self._read_dataset(node)
            if values.ndim != 1:
                raise DafFormatError(f"the vector: {name}\nof the axis: {axis}\nin the H5df file: {self.path}\n"
                                     f"is not 1-dimensional (shape: {values.shape})")
            return values, group
        nzind, group = self._read_dataset(node["nzind"])
        if "nztxt" in node:
            return dense_string_vector(length, nzind, node["nztxt"].asstr()[()]), CacheGroup.MemoryData
        if "nzval" in node:
            nzval, nzval_group = self._read_dataset(node["nzval"])
        else:
            nzval, nzval_group = np.ones(nzind.shape[0], dtype=np.bool_), CacheGroup.MemoryData
        return SparseVector(length, nzind, nzval), weakest_cache_group(group, nzval_group)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        vectors = self._vectors(axis)
        if isinstance(vector, SparseVector):
            group = vectors.create_group(name)
            _write_numbers(group, "nzind", vector.nzind)
            if not (vector.nzval.dtype == np.bool_ and vector.nzval.all()):
                _write_numbers(group, "nzval", vector.nzval)
        elif isinstance(vector, np.ndarray):
            if vector.dtype == STRING_DTYPE:
                self._write_string_vector(vectors, name, vector)
            else:
                _write_numbers(vectors, name, vector)
        elif isinstance(vector, str):
            _write_strings(vectors, name, np.full(self.format_axis_length(axis), vector, dtype=object))
        else:
            self._allocate_mapped(vectors, name, scalar_dtype(vector), (self.format_axis_length(axis),))[...] = vector

    def _write_string_vector(self, vectors: h5py.Group, name: str, vector: np.ndarray) -> None:
        if not sparse_strings_are_smaller(vector, None):
            _write_strings(vectors, name, vector)
            return
        nzind, texts = sparse_string_vector(vector)
        group = vectors.create_group(name)
        _write_numbers(group, "nzind", nzind)
        _write_strings(group, "nztxt", texts)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        _delete(self.root["vectors"][axis], name)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        return self._allocate_mapped(self._vectors(axis), name, dtype, (self.format_axis_length(axis),))

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        group = self._vectors(axis).create_group(name)
        return self._allocate_mapped(group, "nzind", indtype, (nnz,)), self._allocate_mapped(group, "nzval", dtype,
                                                                                             (nnz,))

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        matrices = self.root["matrices"]
        return rows_axis in matrices and columns_axis in matrices[rows_axis] and name in matrices[rows_axis][
            columns_axis]

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        matrices = self.root["matrices"]
        if rows_axis not in matrices or columns_axis not in matrices[rows_axis]:
            return set()
        return set(matrices[rows_axis][columns_axis].keys())

    def _matrices(self, rows_axis: str, columns_axis: str) -> h5py.Group:
        return self.root["matrices"].require_group(rows_axis).require_group(columns_axis)

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        node = self.root["matrices"][rows_axis][columns_axis][name]
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        if isinstance(node, h5py.Dataset):
            values, group = self._read_dataset(node)
            if values.shape != (shape[1], shape[0]):
                raise DafFormatError(f"the matrix: {name}\nof the axes: {rows_axis}, {columns_axis}\nin the H5df file: "
                                     f"{self.path}\nhas the HDF5 shape: {values.shape}\ninstead of: "
                                     f"({shape[1]}, {shape[0]})")
            return values.T, group
        colptr, colptr_group = self._read_dataset(node["colptr"])
        rowval, rowval_group = self._read_dataset(node["rowval"])
        if "nztxt" in node:
            return dense_string_matrix(shape, colptr, rowval, node["nztxt"].asstr()[()]), CacheGroup.MemoryData
        if rowval.dtype != colptr.dtype:
            rowval, rowval_group = rowval.astype(colptr.dtype), CacheGroup.MemoryData
        if "nzval" in node:
            nzval, nzval_group = self._read_dataset(node["nzval"])
        else:
            nzval, nzval_group = np.ones(rowval.shape[0], dtype=np.bool_), CacheGroup.MemoryData
        matrix = SparseMatrixCSC(shape, colptr, rowval, nzval)
        return matrix, weakest_cache_group(colptr_group, rowval_group, nzval_group)

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        matrices = self._matrices(rows_axis, columns_axis)
        if isinstance(matrix, SparseMatrixCSC):
            group = matrices.create_group(name)
            _write_numbers(group, "colptr", matrix.colptr)
            _write_numbers(group, "rowval", matrix.rowval)
            if not (matrix.nzval.dtype == np.bool_ and matrix.nzval.all()):
                _write_numbers(group, "nzval", matrix.nzval)
        elif isinstance(matrix, np.ndarray):
            if matrix.dtype == STRING_DTYPE:
                self._write_string_matrix(matrices, name, matrix)
            else:
                _write_numbers(matrices, name, matrix.T)
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
        _write_numbers(group, "colptr", colptr)
        _write_numbers(group, "rowval", rowval)
        _write_strings(group, "nztxt", texts)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        _delete(self.root["matrices"][rows_axis][columns_axis], name)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        shape = (self.format_axis_length(columns_axis), self.format_axis_length(rows_axis))
        return self._allocate_mapped(self._matrices(rows_axis, columns_axis), name, dtype, shape).T

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        group = self._matrices(rows_axis, columns_axis).create_group(name)
        colptr = self._allocate_mapped(group, "colptr", indtype, (self.format_axis_length(columns_axis) + 1,))
        rowval = self._allocate_mapped(group, "rowval", indtype, (nnz,))
        nzval = self._allocate_mapped(group, "nzval", dtype, (nnz,))
        return colptr, rowval, nzval


def _delete(group: h5py.Group, name: str) -> None:
    """Delete a dataset or group, first detaching live maps of its data (HDF5 may reuse or cut off the space)."""
    node = group[name]
    datasets = [node] if isinstance(node, h5py.Dataset) else []
    if isinstance(node, h5py.Group):
        node.visititems(lambda _, child: datasets.append(child) if isinstance(child, h5py.Dataset) else None)
    for dataset in datasets:
        offset = dataset.id.get_offset()
        if offset is not None:
            detach_region(group.file.filename, offset, dataset.id.get_storage_size())
    del group[name]


def _is_daf_root(group: h5py.Group) -> bool:
    return "daf" in group


def _verify_version(group: h5py.Group, where: str) -> None:
    node = group["daf"]
    if not isinstance(node, h5py.Dataset) or node.shape != (2,) or node.dtype.kind != "u":
        raise DafFormatError(f"invalid daf version dataset (expected 2 unsigned integers)\nfor the daf data: {where}")
    major, minor = (int(value) for value in node[()])
    if major != MAJOR_VERSION or minor > MINOR_VERSION:
        raise DafFormatError(f"incompatible format version: {major}.{minor}\nfor the daf data: {where}\n"
                             f"the code supports version: {MAJOR_VERSION}.{MINOR_VERSION}")
    for name in ("scalars", "axes", "vectors", "matrices"):
        if not isinstance(group.get(name), h5py.Group):
            raise DafFormatError(f"missing group: {name}\nin the daf data: {where}")


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

    _format: H5dfFormat

    def __init__(self, root: str | os.PathLike | h5py.Group, mode: str = "r", *, name: str | None = None) -> None:
        super().__init__(self._open(root, mode), name=name)

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
                file = open_h5_file(path, {"r": "r", "r+": "r+", "w+": "a", "w": "w"}[mode])
                group = file
                complete_path = os.path.abspath(path)
            else:
                file = open_h5_file(path, "r" if mode == "r" else "r+" if mode == "r+" else "a")
                if group_path in file:
                    if mode == "w":
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
            raise DafFormatError(f"not a daf data set: {where}")
        elif truncate or (not len(group) and not len(group.attrs)):
            _create_skeleton(group)
        else:
            raise DafFormatError(f"not a daf data set: {where}\n(it is a non-empty HDF5 "
                                 f"{'file' if group.name == '/' else 'group'}; mode w+ will not wipe it, "
                                 "use mode w to replace it)")
        return H5dfFormat(group, mode, default_name=where, complete_path=complete_path)

    def flush(self) -> None:
        """Flush the HDF5 file to disk.

        Example:
            >>> import pydaf, tempfile, os
            >>> pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w").flush()
        """
        self._format.file.flush()


def _count_objects(group: h5py.Group) -> int:
    count = 0

    def visit(_: str, node: Any) -> None:
        nonlocal count
        count += isinstance(node, h5py.Dataset)

    group.visititems(visit)
    return count


def repack(source: str | os.PathLike, destination: str | os.PathLike, *, progress: bool = True) -> None:
    """Rewrite an H5df data set compactly into a new file (or ``.h5dfs#/group``), with every dataset aligned and
    contiguous layouts kept. Deleted properties leave unused space in HDF5 files; this reclaims it. Close (drop)
    writers of the source first: any live map of it stays valid, but sees the old file.

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> daf = pydaf.H5df(os.path.join(folder, "a.h5df"), "w").set_scalar("x", 1)
        >>> pydaf.repack(os.path.join(folder, "a.h5df"), os.path.join(folder, "b.h5df"), progress=False)
        >>> pydaf.H5df(os.path.join(folder, "b.h5df"), "r").get_scalar("x")
        np.int64(1)
    """
    from tqdm.auto import tqdm

    source_path, _ = split_h5df_path(source)
    destination_path, _ = split_h5df_path(destination)
    if os.path.abspath(source_path) == os.path.abspath(destination_path):
        raise DafModeError(f"can't repack the H5df file: {source_path}\ninto itself")
    reader = H5df(source, "r")
    source_root = reader.format.root  # type: ignore[attr-defined]
    writer = H5df(destination, "w")
    destination_root = writer.format.root
    total = _count_objects(source_root)
    with tqdm(total=total, desc=f"repack {os.path.basename(source_path)}", unit="dataset",
              disable=not progress) as bar:
        _copy_tree(source_root, destination_root, bar.update)
    writer.flush()


def _copy_tree(source: h5py.Group, destination: h5py.Group, advance: Callable[[int], Any], *,
               top: bool = True) -> None:
    """Copy every group and dataset of ``source`` (but the top ``daf`` version, already written) into
    ``destination``, one dataset at a time (``H5Ocopy`` keeps types and layouts; the destination's alignment
    applies)."""
    for name, node in source.items():
        if isinstance(node, h5py.Group):
            _copy_tree(node, destination.require_group(name), advance, top=False)
            continue
        if not (top and name == "daf"):
            h5o.copy(source.id, name.encode(), destination.id, name.encode())
        advance(1)


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
    file = path.split(".h5dfs#/", 1)[0] + ".h5dfs" if ".h5dfs#/" in path else path
    return _is_hdf5_file(file) or path.endswith(".h5df") or ".h5dfs#/" in path


FORMAT = register_format(FormatEntry(
    name="H5df", paths="an HDF5 file (x.h5df), or a group in one (x.h5dfs#/group)", guess_can_open=_guess_can_open,
    open=H5df.open, repack=repack))
