"""FilesDaf: Julia's directory format (FORMATS.md §3), v1.0 and v1.1 read, v1.1 written, flat files memory-mapped.

Layout: ``daf.json``, ``metadata.json`` (a one-line index of every property's descriptor), ``scalars/<n>.json``,
``axes/<a>.txt``, ``vectors/<a>/<n>.json`` + ``.data``/``.txt``/``.nzind``/``.nzval``/``.nztxt``, and
``matrices/<r>/<c>/<n>.json`` + ``.data``/``.txt``/``.colptr``/``.rowval``/``.nzval``/``.nztxt``.

Writes are atomic per property: data files are written under temporary names and renamed into place, and the
``.json`` descriptor, which makes the property exist, is renamed into place last. Deletes remove the descriptor
first. An overwrite first moves the old files aside as hidden backups, which are dropped once the new descriptor is in
place; opening the directory restores the old property from its backups if a crash came in between. A crash
therefore never loses a stored property nor leaves a partial one visible; ``metadata.json`` is rebuilt on open if a
crash left it unparseable or stale.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import numpy as np

from ..errors import DafFormatError
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import DTYPES_BY_NAME, STRING_DTYPE, StorageScalar, julia_name, scalar_dtype
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
from .mapping import map_region
from .registry import FormatEntry, PersistentDaf, register_format

MAJOR_VERSION = 1
MINOR_VERSION = 1

_VECTOR_SUFFIXES = (".json", ".txt", ".data", ".zip", ".nzind", ".nzind.zip", ".nzval", ".nzval.zip", ".nztxt")
_MATRIX_SUFFIXES = (".json", ".data", ".txt", ".zip", ".colptr", ".colptr.zip", ".rowval", ".rowval.zip", ".nzval",
                    ".nzval.zip", ".nztxt")
_ALL_SUFFIXES = tuple(dict.fromkeys(_VECTOR_SUFFIXES + _MATRIX_SUFFIXES))


def _temporary(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}")


def _backup(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.backup")


def _write_atomic(path: str, data: bytes | np.ndarray) -> None:
    """Write a whole file under a temporary name, then rename it into place."""
    temporary = _temporary(path)
    with open(temporary, "wb") as handle:
        handle.write(data if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes(order="A"))
    os.replace(temporary, path)


def _lines_bytes(values: np.ndarray) -> bytes:
    for value in values.flat:
        if "\n" in value:
            raise DafFormatError(f"a string contains a newline, which FilesDaf can't store: {value!r}")
    return "".join(f"{value}\n" for value in values.flat).encode("utf-8")


def _read_lines(path: str) -> np.ndarray:
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    if not text:
        return np.empty(0, dtype=object)
    if not text.endswith("\n"):
        raise DafFormatError(f"the text file: {path}\ndoes not end with a newline")
    return np.array(text[:-1].split("\n"), dtype=object)


def _json_value(value: StorageScalar) -> str:
    """A scalar as JSON.jl writes it (shortest round-trip numbers, ``true``/``false``)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, np.bool_):
        return "true" if value else "false"
    if isinstance(value, np.floating):
        if not np.isfinite(value):
            raise DafFormatError(f"FilesDaf can't store the non-finite scalar: {value}")
        text = np.format_float_positional(value, unique=True, trim="0") if 1e-5 <= abs(value) < 1e16 or value == 0 \
            else np.format_float_scientific(value, unique=True, trim="0").replace("e+", "e")
        return text
    return str(int(value))


def _dense_json(eltype: str) -> str:
    return f'{{"format":"dense","eltype":"{eltype}"}}'


def _component_json(eltype: str, n_elements: int) -> str:
    return f'{{"format":"dense","eltype":"{eltype}","n_elements":{n_elements}}}'


def _sparse_json(components: list[tuple[str, str, int]]) -> str:
    parts = ",".join(f'"{name}":{_component_json(eltype, count)}' for name, eltype, count in components)
    return f'{{"format":"sparse",{parts}}}'


class FilesFormat(FormatWriter):
    """The storage of a FilesDaf data set: a directory of plain files."""

    type_name = "FilesDaf"

    def __init__(self, path: str, mode: str) -> None:
        writable, may_create, truncate = parse_mode(mode)
        self.path = path
        self.mode = mode
        self.is_writable = writable
        self._axis_lengths: dict[str, int] = {}
        self._pending: list[tuple[str, str]] = []
        if os.path.exists(path) and not os.path.isdir(path):
            raise DafFormatError(f"not a directory: {path}")
        if truncate and os.path.isdir(path):
            shutil.rmtree(path)
        version_path = os.path.join(path, "daf.json")
        if not os.path.exists(version_path):
            if not may_create:
                raise DafFormatError(f"not a daf directory: {path}")
            os.makedirs(path, exist_ok=True)
            if os.listdir(path):
                raise DafFormatError(f"not a daf directory: {path}\n(it is a non-empty directory; mode w+ will not "
                                     "use it, use mode w to replace it)")
            for folder in ("scalars", "axes", "vectors", "matrices"):
                os.makedirs(os.path.join(path, folder), exist_ok=True)
            _write_atomic(os.path.join(path, "metadata.json"), b"{}")
            _write_atomic(version_path, b'{"version":[1,1]}\n')
        self._verify_version(version_path)
        try:
            self._recover()
        except OSError:
            if writable:  # a read-only open of a read-only directory reads what is there
                raise
        self._ensure_metadata()

    def _recover(self) -> None:
        """Finish what a crashed writer left: drop temporary files, and restore an overwritten property from its
        backups if its new descriptor never made it into place (else drop the backups)."""
        for folder, _, files in os.walk(self.path):
            hidden = [name for name in files if name.startswith(".")]
            for name in hidden:
                if ".tmp-" in name:
                    os.remove(os.path.join(folder, name))
            for name in hidden:
                if not name.endswith(".json.backup"):
                    continue
                prefix = name[1:-len("json.backup")]  # ".<property>.json.backup" -> "<property>."
                backups = [other for other in hidden if other.startswith("." + prefix) and other.endswith(".backup")]
                committed = os.path.exists(os.path.join(folder, prefix + "json"))
                for backup in sorted(backups, key=lambda other: other == name):  # the descriptor last
                    if committed:
                        os.remove(os.path.join(folder, backup))
                    else:
                        os.replace(os.path.join(folder, backup), os.path.join(folder, backup[1:-len(".backup")]))

    def _verify_version(self, version_path: str) -> None:
        try:
            with open(version_path, "rb") as handle:
                version = json.loads(handle.read())["version"]
            major, minor = int(version[0]), int(version[1])
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise DafFormatError(f"invalid daf.json in the daf directory: {self.path}\n({error})") from error
        if major != MAJOR_VERSION or minor > MINOR_VERSION:
            raise DafFormatError(f"incompatible format version: {major}.{minor}\nfor the daf directory: {self.path}\n"
                                 f"the code supports version: {MAJOR_VERSION}.{MINOR_VERSION}")

    def _file(self, *parts: str) -> str:
        return os.path.join(self.path, *parts)

    def format_default_name(self) -> str:
        return self.path

    def format_complete_path(self) -> str | None:
        return os.path.abspath(self.path)

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: FilesDaf")
        lines.append(f"{indent}path: {self.path}")
        lines.append(f"{indent}mode: {self.mode}")

    # metadata.json.

    def _ensure_metadata(self) -> None:
        try:
            with open(self._file("metadata.json"), "rb") as handle:
                keys = set(json.loads(handle.read()))
            if self.is_writable and keys != {key for key, _ in self._metadata_keys()}:
                raise ValueError("stale metadata.json")  # a crash between a rename and its index entry
        except (OSError, ValueError):
            try:
                self._rebuild_metadata()
            except OSError:
                if self.is_writable:
                    raise

    def _metadata_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every property's ``metadata.json`` key and descriptor path parts, in Julia's rebuild order."""
        axes = sorted(self.format_axes_set())
        keys = [(f"axes/{axis}", ()) for axis in axes]
        keys += [(f"scalars/{name}", ("scalars", name)) for name in sorted(self.format_scalars_set())]
        for axis in axes:
            keys += [(f"vectors/{axis}/{name}", ("vectors", axis, name))
                     for name in sorted(self.format_vectors_set(axis))]
        for rows_axis in axes:
            for columns_axis in axes:
                keys += [(f"matrices/{rows_axis}/{columns_axis}/{name}", ("matrices", rows_axis, columns_axis, name))
                         for name in sorted(self.format_matrices_set(rows_axis, columns_axis))]
        return keys

    def _metadata_entries(self) -> list[tuple[str, str]]:
        return [(key, self._descriptor_text(*parts) if parts else
                 f'{{"format":"axis","n_entries":{self.format_axis_length(key[5:])}}}')
                for key, parts in self._metadata_keys()]

    def _descriptor_text(self, *parts: str) -> str:
        with open(self._file(*parts[:-1], parts[-1] + ".json"), "rb") as handle:
            return handle.read().decode("utf-8").rstrip("\n")

    def _rebuild_metadata(self) -> None:
        body = ",".join(f"{json.dumps(key, ensure_ascii=False)}:{text}" for key, text in self._metadata_entries())
        _write_atomic(self._file("metadata.json"), f"{{{body}}}".encode())

    def _append_metadata(self, key: str, descriptor: str) -> None:
        path = self._file("metadata.json")
        with open(path, "r+b") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            entry = f"{json.dumps(key, ensure_ascii=False)}:{descriptor}}}".encode()
            handle.seek(size - 1)
            handle.write(entry if size <= 2 else b"," + entry)

    def _set_descriptor(self, key: str, descriptor: str) -> None:
        """Make a property exist: its descriptor is renamed into place last (dropping the backups of what it
        replaced), then indexed."""
        _write_atomic(self._file(key + ".json"), (descriptor + "\n").encode())
        for suffix in _ALL_SUFFIXES:
            backup = _backup(self._file(key + suffix))
            if os.path.exists(backup):
                os.remove(backup)
        self._append_metadata(key, descriptor)

    # Reading data files.

    def _map(self, path: str, dtype: np.dtype, count: int) -> tuple[np.ndarray, CacheGroup]:
        if count == 0:
            return np.empty(0, dtype=dtype), CacheGroup.MemoryData
        size = os.path.getsize(path)
        if size != count * dtype.itemsize:
            raise DafFormatError(f"the data file: {path}\nhas {size} bytes instead of {count * dtype.itemsize}")
        region = map_region(path, 0, size, writable=False)
        return np.frombuffer(region, dtype=dtype, count=count), CacheGroup.MappedData

    def _require_flat(self, path: str) -> None:
        """Refuse packed (``.zip``) data, naming the property (reading it arrives with the packed formats)."""
        if os.path.exists(path) and not os.path.exists(path + ".zip"):
            return
        relative = os.path.relpath(path, self.path)
        stem = relative.rpartition(".")[0]
        if os.path.exists(path + ".zip") or os.path.exists(self._file(stem + ".zip")):
            raise DafFormatError(f"reading packed (.zip) FilesDaf data is not supported yet\nfor the property: {stem}"
                                 f"\nin the daf directory: {self.path}")
        raise DafFormatError(f"missing data file: {relative}\nin the daf directory: {self.path}")

    def _read_descriptor(self, *parts: str) -> dict[str, Any]:
        with open(self._file(*parts[:-1], parts[-1] + ".json"), "rb") as handle:
            return json.loads(handle.read())

    def _read_component(self, base: str, component: str, dtype: np.dtype,
                        count: int | None) -> tuple[np.ndarray, CacheGroup]:
        path = f"{base}.{component}"
        self._require_flat(path)
        if count is None:
            count = os.path.getsize(path) // dtype.itemsize
        return self._map(path, dtype, count)

    def _read_sparse(self, base: str, descriptor: dict[str, Any], index_name: str, other_index: str | None,
                     other_count: int | None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, CacheGroup]:
        """The components of a sparse vector (``nzind``) or matrix (``colptr`` + ``rowval``), either descriptor
        version; ``nzval`` is synthesised as all-true for Bool data stored without it."""
        if "eltype" in descriptor:  # v1.0: one element type, one index type, and Bool means all-true
            dtype = DTYPES_BY_NAME[descriptor["eltype"]]
            indtype = DTYPES_BY_NAME[descriptor["indtype"]]
            first, group = self._read_component(base, index_name, indtype, other_count)
            second = None
            if other_index is not None:
                second, second_group = self._read_component(base, other_index, indtype, None)
                group = weakest_cache_group(group, second_group)
            nnz = (second if second is not None else first).shape[0]
            if dtype == np.bool_:
                return first, second, np.ones(nnz, dtype=np.bool_), CacheGroup.MemoryData
            nzval, nzval_group = self._read_component(base, "nzval", dtype, nnz)
            return first, second, nzval, weakest_cache_group(group, nzval_group)
        index = descriptor[index_name]
        indtype = DTYPES_BY_NAME[index["eltype"]]
        first, group = self._read_component(base, index_name, indtype, index.get("n_elements"))
        second = None
        if other_index is not None:
            component = descriptor[other_index]
            second, second_group = self._read_component(base, other_index, DTYPES_BY_NAME[component["eltype"]],
                                                        component.get("n_elements"))
            group = weakest_cache_group(group, second_group)
        nnz = (second if second is not None else first).shape[0]
        if "nzval" not in descriptor:
            return first, second, np.ones(nnz, dtype=np.bool_), CacheGroup.MemoryData
        nzval_descriptor = descriptor["nzval"]
        if nzval_descriptor["eltype"] in ("String", "string"):
            if not os.path.exists(base + ".nztxt"):
                self._require_flat(base + ".nzval")
            return first, second, _read_lines(base + ".nztxt"), CacheGroup.MemoryData
        nzval, nzval_group = self._read_component(base, "nzval", DTYPES_BY_NAME[nzval_descriptor["eltype"]],
                                                  nzval_descriptor.get("n_elements", nnz))
        return first, second, nzval, weakest_cache_group(group, nzval_group)

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return os.path.exists(self._file("scalars", name + ".json"))

    def format_scalars_set(self) -> set[str]:
        return _names_with_suffix(self._file("scalars"), ".json")

    def format_get_scalar(self, name: str) -> StorageScalar:
        descriptor = self._read_descriptor("scalars", name)
        eltype, value = descriptor["type"], descriptor["value"]
        if eltype in ("String", "string"):
            return str(value)
        return DTYPES_BY_NAME[eltype].type(value)

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        eltype = julia_name(scalar_dtype(value))
        self._set_descriptor(f"scalars/{name}", f'{{"type":"{eltype}","value":{_json_value(value)}}}')

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        self._delete_files(f"scalars/{name}", (".json",), for_set=for_set)
        self._rebuild_metadata()

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return os.path.exists(self._file("axes", axis + ".txt"))

    def format_axes_set(self) -> set[str]:
        return _names_with_suffix(self._file("axes"), ".txt")

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return _read_lines(self._file("axes", axis + ".txt")), CacheGroup.MemoryData

    def format_axis_length(self, axis: str) -> int:
        length = self._axis_lengths.get(axis)
        if length is None:
            with open(self._file("axes", axis + ".txt"), "rb") as handle:
                length = self._axis_lengths[axis] = handle.read().count(b"\n")
        return length

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        os.makedirs(self._file("vectors", axis), exist_ok=True)
        for other in self.format_axes_set() | {axis}:
            os.makedirs(self._file("matrices", axis, other), exist_ok=True)
            os.makedirs(self._file("matrices", other, axis), exist_ok=True)
        _write_atomic(self._file("axes", axis + ".txt"), _lines_bytes(entries))
        self._append_metadata(f"axes/{axis}", f'{{"format":"axis","n_entries":{entries.shape[0]}}}')

    def format_delete_axis(self, axis: str) -> None:
        os.remove(self._file("axes", axis + ".txt"))
        self._axis_lengths.pop(axis, None)
        shutil.rmtree(self._file("vectors", axis), ignore_errors=True)
        shutil.rmtree(self._file("matrices", axis), ignore_errors=True)
        for rows_axis in os.listdir(self._file("matrices")):
            shutil.rmtree(self._file("matrices", rows_axis, axis), ignore_errors=True)
        self._rebuild_metadata()

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        return os.path.exists(self._file("vectors", axis, name + ".json"))

    def format_vectors_set(self, axis: str) -> set[str]:
        return _names_with_suffix(self._file("vectors", axis), ".json")

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        descriptor = self._read_descriptor("vectors", axis, name)
        base = self._file("vectors", axis, name)
        length = self.format_axis_length(axis)
        if descriptor["format"] == "dense":
            if descriptor["eltype"] in ("String", "string"):
                self._require_text(base)
                return _read_lines(base + ".txt"), CacheGroup.MemoryData
            self._require_flat(base + ".data")
            return self._map(base + ".data", DTYPES_BY_NAME[descriptor["eltype"]], length)
        nzind, _, nzval, group = self._read_sparse(base, descriptor, "nzind", None, None)
        if nzval.dtype == STRING_DTYPE:
            return dense_string_vector(length, nzind, nzval), CacheGroup.MemoryData
        return SparseVector(length, nzind, nzval), group

    def _require_text(self, base: str) -> None:
        if not os.path.exists(base + ".txt"):
            self._require_flat(base + ".txt")

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        base = f"vectors/{axis}/{name}"
        length = self.format_axis_length(axis)
        if not isinstance(vector, np.ndarray | SparseVector):
            if not isinstance(vector, str) and vector == 0:  # Julia stores a zero fill as an empty sparse vector
                vector = SparseVector(length, np.empty(0, np.int64), np.empty(0, scalar_dtype(vector)))
            else:
                vector = np.full(length, vector, dtype=scalar_dtype(vector))
        if isinstance(vector, SparseVector):
            self._write_sparse(base, [("nzind", vector.nzind)], vector.nzval)
        elif vector.dtype == STRING_DTYPE:
            if sparse_strings_are_smaller(vector, None):
                nzind, texts = sparse_string_vector(vector)
                self._write_sparse(base, [("nzind", nzind)], texts)
            else:
                _write_atomic(self._file(base + ".txt"), _lines_bytes(vector))
                self._set_descriptor(base, _dense_json("String"))
        else:
            _write_atomic(self._file(base + ".data"), vector)
            self._set_descriptor(base, _dense_json(julia_name(vector.dtype)))

    def _write_sparse(self, base: str, indices: list[tuple[str, np.ndarray]], nzval: np.ndarray) -> None:
        components = []
        for component, values in indices:
            _write_atomic(self._file(f"{base}.{component}"), values)
            components.append((component, julia_name(values.dtype), values.shape[0]))
        if nzval.dtype == STRING_DTYPE:
            _write_atomic(self._file(base + ".nztxt"), _lines_bytes(nzval))
            components.append(("nzval", "String", nzval.shape[0]))
        elif not (nzval.dtype == np.bool_ and nzval.all()):
            _write_atomic(self._file(base + ".nzval"), nzval)
            components.append(("nzval", julia_name(nzval.dtype), nzval.shape[0]))
        self._set_descriptor(base, _sparse_json(components))

    def _delete_files(self, base: str, suffixes: tuple[str, ...], *, for_set: bool) -> None:
        """Delete a property's files, the descriptor first (so it stops existing before its data goes). Before an
        overwrite (``for_set``), keep them as hidden backups until the new descriptor is in place."""
        for suffix in suffixes:
            path = self._file(base + suffix)
            if os.path.exists(path):
                if for_set:
                    os.replace(path, _backup(path))
                else:
                    os.remove(path)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        self._delete_files(f"vectors/{axis}/{name}", _VECTOR_SUFFIXES, for_set=for_set)
        self._rebuild_metadata()

    def _empty_file(self, path: str, dtype: np.dtype, count: int) -> np.ndarray:
        """A writable map of a new, zero-filled (sparse) temporary file, renamed into place when filled."""
        temporary = _temporary(path)
        with open(temporary, "wb") as handle:
            handle.truncate(count * dtype.itemsize)
        self._pending.append((temporary, path))
        if count == 0:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(map_region(temporary, 0, count * dtype.itemsize, writable=True), dtype=dtype,
                             count=count)

    def _start_empty(self) -> None:
        self._pending = []

    def _finish_empty(self, base: str, descriptor: str) -> None:
        for temporary, path in self._pending:
            os.replace(temporary, path)
        self._pending = []
        self._set_descriptor(base, descriptor)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        self._start_empty()
        return self._empty_file(self._file("vectors", axis, name + ".data"), dtype, self.format_axis_length(axis))

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        self._finish_empty(f"vectors/{axis}/{name}", _dense_json(julia_name(filled.dtype)))

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        self._start_empty()
        base = self._file("vectors", axis, name)
        return self._empty_file(base + ".nzind", indtype, nnz), self._empty_file(base + ".nzval", dtype, nnz)

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._finish_empty(f"vectors/{axis}/{name}", _sparse_json([
            ("nzind", julia_name(filled.nzind.dtype), filled.nnz), ("nzval", julia_name(filled.dtype), filled.nnz)]))

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return os.path.exists(self._file("matrices", rows_axis, columns_axis, name + ".json"))

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return _names_with_suffix(self._file("matrices", rows_axis, columns_axis), ".json")

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        descriptor = self._read_descriptor("matrices", rows_axis, columns_axis, name)
        base = self._file("matrices", rows_axis, columns_axis, name)
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        if descriptor["format"] == "dense":
            if descriptor["eltype"] in ("String", "string"):
                self._require_text(base)
                values = _read_lines(base + ".txt")
                return values.reshape(shape, order="F"), CacheGroup.MemoryData
            self._require_flat(base + ".data")
            values, group = self._map(base + ".data", DTYPES_BY_NAME[descriptor["eltype"]], shape[0] * shape[1])
            return values.reshape(shape, order="F"), group
        colptr, rowval, nzval, group = self._read_sparse(base, descriptor, "colptr", "rowval", shape[1] + 1)
        assert rowval is not None
        if nzval.dtype == STRING_DTYPE:
            return dense_string_matrix(shape, colptr, rowval, nzval), CacheGroup.MemoryData
        if rowval.dtype != colptr.dtype:
            rowval, group = rowval.astype(colptr.dtype), CacheGroup.MemoryData
        return SparseMatrixCSC(shape, colptr, rowval, nzval), group

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        base = f"matrices/{rows_axis}/{columns_axis}/{name}"
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        if not isinstance(matrix, np.ndarray | SparseMatrixCSC):
            if not isinstance(matrix, str) and matrix == 0:  # Julia stores a zero fill as an empty sparse matrix
                matrix = SparseMatrixCSC(shape, np.ones(shape[1] + 1, np.int64), np.empty(0, np.int64),
                                         np.empty(0, scalar_dtype(matrix)))
            else:
                matrix = np.full(shape, matrix, dtype=scalar_dtype(matrix), order="F")
        if isinstance(matrix, SparseMatrixCSC):
            self._write_sparse(base, [("colptr", matrix.colptr), ("rowval", matrix.rowval)], matrix.nzval)
        elif matrix.dtype == STRING_DTYPE:
            if sparse_strings_are_smaller(matrix, shape[1]):
                colptr, rowval, texts = sparse_string_matrix(matrix)
                self._write_sparse(base, [("colptr", colptr), ("rowval", rowval)], texts)
            else:
                _write_atomic(self._file(base + ".txt"), _lines_bytes(matrix.reshape(-1, order="F")))
                self._set_descriptor(base, _dense_json("String"))
        else:
            _write_atomic(self._file(base + ".data"), np.asfortranarray(matrix).T)
            self._set_descriptor(base, _dense_json(julia_name(matrix.dtype)))

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        self._delete_files(f"matrices/{rows_axis}/{columns_axis}/{name}", _MATRIX_SUFFIXES, for_set=for_set)
        self._rebuild_metadata()

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        self._start_empty()
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        values = self._empty_file(self._file("matrices", rows_axis, columns_axis, name + ".data"), dtype,
                                  shape[0] * shape[1])
        return values.reshape(shape, order="F")

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        self._finish_empty(f"matrices/{rows_axis}/{columns_axis}/{name}", _dense_json(julia_name(filled.dtype)))

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._start_empty()
        base = self._file("matrices", rows_axis, columns_axis, name)
        colptr = self._empty_file(base + ".colptr", indtype, self.format_axis_length(columns_axis) + 1)
        return colptr, self._empty_file(base + ".rowval", indtype, nnz), self._empty_file(base + ".nzval", dtype, nnz)

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        index = julia_name(filled.colptr.dtype)
        self._finish_empty(f"matrices/{rows_axis}/{columns_axis}/{name}", _sparse_json([
            ("colptr", index, filled.shape[1] + 1), ("rowval", index, filled.nnz),
            ("nzval", julia_name(filled.dtype), filled.nnz)]))

    def format_discard_empty(self) -> None:
        for temporary, _ in self._pending:
            if os.path.exists(temporary):
                os.remove(temporary)
        self._pending = []


def _names_with_suffix(folder: str, suffix: str) -> set[str]:
    """Property names in a folder (tolerating a missing one, as git checkouts drop empty folders); temporary files of
    unfinished writes start with ``.`` and are not properties."""
    if not os.path.isdir(folder):
        return set()
    return {name[:-len(suffix)] for name in os.listdir(folder) if name.endswith(suffix) and not name.startswith(".")}


class FilesDaf(PersistentDaf):
    """A Daf data set in a directory of plain files, Julia's preferred format for large data (every numeric file is
    memory-mapped). Modes as :class:`~pydaf.H5df`: ``r`` returns a :class:`~pydaf.DafReadOnly`; ``w+`` refuses a
    non-empty directory that is not a Daf data set.

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "example.daf")
        >>> daf = pydaf.FilesDaf(path, "w", name="example!").add_axis("cell", ["A", "B"])
        >>> daf.set_vector("cell", "age", [3, 5]).get_vector("cell", "age").tolist()
        [3, 5]
        >>> sorted(os.listdir(os.path.join(path, "vectors", "cell")))
        ['age.data', 'age.json']
    """

    _format: FilesFormat

    def __init__(self, path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> None:
        super().__init__(FilesFormat(os.fspath(path), mode), name=name)


def _guess_can_open(path: str) -> bool:
    """A directory (holding ``daf.json`` once it is a data set), or nothing yet: FilesDaf directories have no suffix,
    so this format is the fallback, asked after the others, as Julia's ``open_daf`` opens a FilesDaf "otherwise"."""
    return os.path.isdir(path) or not os.path.lexists(path)


FORMAT = register_format(FormatEntry(
    name="FilesDaf", paths="a directory holding daf.json (or a new path, which becomes one)",
    guess_can_open=_guess_can_open, open=FilesDaf.open, fallback=True))
