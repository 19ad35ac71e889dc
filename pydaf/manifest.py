"""The manifest of a data set: every property it holds (names, element types, shapes, which matrix layouts are stored,
dense or sparse) and a hash of every value, computed identically by pydaf (here) and by Julia (``julia/manifest.jl``),
so two implementations, or two stores of the same data, are compared property by property without moving the data.
The hash depends on the values only (not on sparse or dense storage, nor on the format), and is computed streaming
over the stored arrays.

Design: docs/design/julia.md (the JSON and the hashed bytes: "The manifest format").

Example:
    >>> import numpy as np, pydaf
    >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A", "B"])
    >>> daf = daf.set_vector("cell", "age", np.array([0, 7], np.uint8))
    >>> entry = daf_manifest(daf)["vectors"]["cell"]["age"]
    >>> entry["eltype"], entry["storage"], entry["nnz"]
    ('UInt8', 'dense', 1)
    >>> sparse = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector(
    ...     "cell", "age", pydaf.SparseVector(2, np.array([2], np.uint32), np.array([7], np.uint8)))
    >>> daf_manifest(sparse)["vectors"]["cell"]["age"]["hash"] == entry["hash"]
    True
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator
from typing import Any

import h5py
import numpy as np

from ._os.files import open_regular_file
from .composition.destinations import shares_storage, write_file_then_replace
from .core.readers import DafReader
from .errors import DafError, DafFormatError, DafModeError, DafNotDafError, DafStorageError, DafValueError
from .open import open_daf
from .sparse import SparseMatrixCSC, SparseVector
from .storage_types import STRING_DTYPE, julia_name, scalar_dtype

#: The version of the manifest format and of its hash.
HASH_VERSION = 1

#: How many values are hashed per step: bounds the memory a step allocates (about 16 bytes per non-zero value).
CHUNK = 1 << 20

_SEPARATOR = b"\xff"


def value_hash(kind: str, value: Any, *, what: str = "the value") -> str:
    """The manifest hash (see the module documentation) of a scalar (``kind="scalar"``), the entries of an axis
    (``"axis"``), or a vector or matrix as stored (``"vector"``, ``"matrix"``: a numpy array, a
    :class:`~pydaf.SparseVector` or a :class:`~pydaf.SparseMatrixCSC`). ``what`` names the value in errors.

    Example:
        >>> import numpy as np
        >>> value_hash("vector", np.array([0.0, -0.0])) == value_hash("vector", np.zeros(2))
        True
        >>> value_hash("vector", np.zeros(2, np.float32)) == value_hash("vector", np.zeros(2))
        False
    """
    hasher = hashlib.sha256()
    if kind == "scalar":
        dtype = scalar_dtype(value)
        hasher.update(_header(kind, dtype, ()))
        if dtype == STRING_DTYPE:
            _hash_strings(hasher, [value], what)
        else:
            hasher.update(np.asarray(value, dtype=dtype.newbyteorder("<")).tobytes())
        return hasher.hexdigest()
    if kind == "axis":
        hasher.update(_header(kind, STRING_DTYPE, (len(value),)))
        _hash_strings(hasher, value, what)
        return hasher.hexdigest()
    if kind not in ("vector", "matrix"):
        raise DafValueError(f"unknown manifest kind: {kind}")
    hasher.update(_header(kind, value.dtype, value.shape))
    if isinstance(value, SparseVector):
        _hash_sparse(hasher, value.nzind, value.nzval, n_rows=value.length, colptr=None)
    elif isinstance(value, SparseMatrixCSC):
        _hash_sparse(hasher, value.rowval, value.nzval, n_rows=value.shape[0], colptr=value.colptr)
    elif value.dtype == STRING_DTYPE:
        for chunk in _column_major_chunks(value):
            _hash_strings(hasher, chunk, what)
    else:
        position = 0
        for chunk in _column_major_chunks(value):
            positions = np.flatnonzero(chunk)
            _hash_records(hasher, positions + position, chunk[positions])
            position += chunk.shape[0]
    return hasher.hexdigest()


def _header(kind: str, dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    dims = ",".join(str(size) for size in shape)
    return f"daf-manifest-{HASH_VERSION} {kind} {julia_name(dtype)} {dims}\n".encode("ascii")


def _column_major_chunks(array: np.ndarray) -> Iterator[np.ndarray]:
    """The values of a dense vector or matrix in column-major order, in flat chunks of about :data:`CHUNK` values
    (views of a column-major array; a block of columns is copied only when the array is not column-major)."""
    if array.ndim == 1:
        for start in range(0, array.shape[0], CHUNK):
            yield array[start:start + CHUNK]
        return
    n_rows, n_columns = array.shape
    step = max(1, CHUNK // max(1, n_rows))
    for start in range(0, n_columns, step):
        yield array[:, start:start + step].reshape(-1, order="F")


def _hash_strings(hasher: Any, values: Any, what: str) -> None:
    try:
        encoded = [value.encode("utf-8") for value in values]
    except UnicodeEncodeError as error:
        raise DafValueError(f"invalid UTF-8 in {what}: {error}") from None
    if encoded:
        hasher.update(_SEPARATOR.join(encoded) + _SEPARATOR)


def _hash_records(hasher: Any, positions: np.ndarray, values: np.ndarray) -> None:
    """Hash ``(position: UInt64 LE, value: LE bytes)`` records, the values that are zero already left out."""
    records = np.empty(positions.shape[0], dtype=[("position", "<u8"), ("value", values.dtype.newbyteorder("<"))])
    records["position"] = positions
    records["value"] = values
    hasher.update(records.tobytes())


def _hash_sparse(hasher: Any, indices: np.ndarray, values: np.ndarray, *, n_rows: int,
                 colptr: np.ndarray | None) -> None:
    """Hash sparse data in its stored order: 1-based ``indices`` (``nzind``, or ``rowval`` of a matrix whose 1-based
    ``colptr`` gives each entry's column), in chunks of :data:`CHUNK` entries."""
    for start in range(0, values.shape[0], CHUNK):
        chunk_values = values[start:start + CHUNK]
        positions = indices[start:start + CHUNK].astype(np.uint64) - np.uint64(1)
        if colptr is not None:
            entries = np.arange(start + 1, start + 1 + chunk_values.shape[0], dtype=np.int64)
            columns = np.searchsorted(colptr.astype(np.int64, copy=False), entries, side="right") - 1
            positions += columns.astype(np.uint64) * np.uint64(n_rows)
        nonzero = chunk_values != 0
        _hash_records(hasher, positions[nonzero], chunk_values[nonzero])


def _count_nonzero(value: Any) -> int:
    if isinstance(value, SparseVector | SparseMatrixCSC):
        return int(np.count_nonzero(value.nzval))
    if value.dtype == STRING_DTYPE:
        return sum(int(np.count_nonzero(chunk != "")) for chunk in _column_major_chunks(value))
    return sum(int(np.count_nonzero(chunk)) for chunk in _column_major_chunks(value))


def _storage(value: Any) -> str:
    return "sparse" if isinstance(value, SparseVector | SparseMatrixCSC) else "dense"


def _shown_scalar(value: Any) -> Any:
    """A scalar as JSON shows it: floats as ``repr`` of the (widened) value, which JSON may not hold exactly."""
    if isinstance(value, str):
        return value
    item = np.asarray(value).item()
    if isinstance(item, float):
        return repr(item) if math.isfinite(item) else {math.inf: "Inf", -math.inf: "-Inf"}.get(item, "NaN")
    return item


def daf_manifest(daf: DafReader) -> dict[str, Any]:
    """The manifest of a data set (see the module documentation), read under its read lock.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!").set_scalar("version", 2)
        >>> manifest = daf_manifest(daf)
        >>> manifest["version"], manifest["scalars"]["version"]["eltype"], manifest["scalars"]["version"]["value"]
        (1, 'Int64', 2)
    """
    with daf.read_lock():
        scalars = {}
        for name in sorted(daf.scalars_set()):
            value = daf.get_scalar(name)
            scalars[name] = {"eltype": julia_name(scalar_dtype(value)), "value": _shown_scalar(value),
                             "hash": value_hash("scalar", value, what=f"the scalar: {name}")}
        axes_names = sorted(daf.axes_set())
        axes = {axis: {"length": daf.axis_length(axis),
                       "hash": value_hash("axis", daf.axis_vector(axis), what=f"the axis: {axis}")}
                for axis in axes_names}
        vectors: dict[str, Any] = {}
        for axis in axes_names:
            vectors[axis] = {}
            for name in sorted(daf.vectors_set(axis)):
                vector = daf.get_stored_vector(axis, name)
                vectors[axis][name] = {
                    "eltype": julia_name(vector.dtype), "length": int(vector.shape[0]), "storage": _storage(vector),
                    "nnz": _count_nonzero(vector),
                    "hash": value_hash("vector", vector, what=f"the vector: {name}\nof the axis: {axis}")}
        matrices: dict[str, Any] = {}
        for rows_axis in axes_names:
            matrices[rows_axis] = {}
            for columns_axis in axes_names:
                layout = matrices[rows_axis][columns_axis] = {}
                for name in sorted(daf.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False)):
                    matrix = daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
                    layout[name] = {
                        "eltype": julia_name(matrix.dtype), "shape": [int(size) for size in matrix.shape],
                        "storage": _storage(matrix), "nnz": _count_nonzero(matrix),
                        "hash": value_hash("matrix", matrix, what=f"the matrix: {name}\nfor the rows axis: "
                                           f"{rows_axis}\nand the columns axis: {columns_axis}")}
        return {"manifest": "daf-manifest", "version": HASH_VERSION, "name": daf.name, "scalars": scalars,
                "axes": axes, "vectors": vectors, "matrices": matrices}


def manifest_json(manifest: dict[str, Any]) -> str:
    """The manifest as the text ``pydaf manifest`` writes (sorted keys, one property per line, UTF-8).

    Example:
        >>> print(manifest_json({"version": 1, "manifest": "daf-manifest"}), end="")
        {
         "manifest": "daf-manifest",
         "version": 1
        }
    """
    return json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_manifest(path: str, output: str | None = None, *, overwrite: bool = False) -> None:
    """``pydaf manifest PATH [--output FILE]``: write the manifest of the data set at ``path`` (any registered format,
    opened read-only) to the file ``output``, or print it. ``julia/verify.jl`` checks a data set against it. The file
    is written aside and moved into place when complete; it is never the data set itself, nor inside it (by any path
    to it), and an existing one is replaced only with ``overwrite``, and never if it holds data (HDF5, ZIP).

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> _ = pydaf.FilesDaf(path, "w").set_scalar("version", 1)
        >>> write_manifest(path)  # doctest: +ELLIPSIS
        {
         "axes": {},
        ...
         "scalars": {
          "version": {
           "eltype": "Int64",
           "hash": "...",
           "value": 1
          }
         },
        ...
    """
    if output is not None:
        _require_manifest_output(path, output, overwrite=overwrite)
    text = manifest_json(daf_manifest(open_daf(path, "r")))
    if output is None:
        print(text, end="")
    else:
        write_file_then_replace(output, lambda temporary: _write_text(temporary, text, output), overwrite=overwrite)


def _require_manifest_output(path: str, output: str, *, overwrite: bool) -> None:
    """Refuse a manifest file that is the data set (or its file), or inside it; with ``overwrite``, a file holding
    data."""
    if shares_storage(path, output):
        raise DafModeError(f"can't write the manifest of: {path}\nonto: {output}\n(it is the data set, or inside it: "
                           "choose an output outside the data set)")
    if os.path.isdir(output):
        raise DafFormatError(f"can't write the manifest onto a directory: {output}\n(give a file's path, e.g. "
                             f"{os.path.join(output, 'manifest.json')})")
    if overwrite and os.path.isfile(output) and _is_data_file(output):
        raise DafNotDafError(f"not a manifest but a data file (HDF5 or ZIP): {output}\n(--overwrite does not replace "
                             "data with a manifest: remove it or choose another output)")


def _is_data_file(path: str) -> bool:
    """Whether a file holds data (an HDF5 file, a ZIP archive: a data set or an AnnData file), by its first bytes."""
    try:
        fd, _ = open_regular_file(path, what="the manifest output")
    except (DafError, OSError):
        return False
    try:
        head = os.pread(fd, 8, 0)
    finally:
        os.close(fd)
    return head.startswith((b"\x89HDF\r\n\x1a\n", b"PK\x03\x04", b"PK\x05\x06")) or h5py.is_hdf5(path)


def _write_text(path: str, text: str, shown: str) -> None:
    try:
        with open(path, "x", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise DafStorageError(f"can't write the manifest: {shown}\nfailed: {error.strerror}") from None


#: The entries of a property compared by :func:`manifest_differences` (``storage``, how the store holds the values,
#: only with ``storage=True``: it is not part of the data).
_DATA_FIELDS = ("eltype", "length", "shape", "nnz", "hash")

#: How deep the properties of each section are nested (``matrices/<rows>/<columns>/<name>``).
_DEPTHS = {"scalars": 1, "axes": 1, "vectors": 2, "matrices": 3}


def _flatten(manifest: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    """The properties of a section by path (``vectors/cell/age``)."""
    flat: dict[str, dict[str, Any]] = {}

    def walk(prefix: str, node: dict[str, Any], level: int) -> None:
        for key, child in node.items():
            if level == _DEPTHS[section]:
                flat[f"{prefix}/{key}"] = child
            else:
                walk(f"{prefix}/{key}", child, level + 1)

    walk(section, manifest.get(section, {}), 1)
    return flat


def _matrix_key(path: str) -> str:
    """``matrices/<a>/<b>/<name>`` of either layout as one key (the axes in sorted order)."""
    _, rows_axis, columns_axis, name = path.split("/", 3)
    first, second = sorted((rows_axis, columns_axis))
    return f"matrices/{first}/{second}/{name}"


def manifest_differences(expected: dict[str, Any], actual: dict[str, Any], *, storage: bool = False,
                         layouts: bool = True) -> list[str]:
    """What differs between two manifests, one line per property (empty if they hold the same data). The names of
    the data sets are ignored. With ``storage``, how each property is stored (dense or sparse) is compared too.
    Without ``layouts``, a matrix is present if either of its layouts is (a layout stored on both sides is still
    compared).

    Example:
        >>> import numpy as np, pydaf
        >>> one = pydaf.MemoryDaf(name="one").add_axis("cell", ["A"]).set_vector("cell", "x", [1])
        >>> two = pydaf.MemoryDaf(name="two").add_axis("cell", ["A"]).set_vector("cell", "x", [2])
        >>> manifest_differences(daf_manifest(one), daf_manifest(two))
        ['vectors/cell/x: hash differs']
    """
    for manifest in (expected, actual):
        if not isinstance(manifest, dict) or manifest.get("manifest") != "daf-manifest" \
                or manifest.get("version") != HASH_VERSION:
            raise DafValueError(f"not a version {HASH_VERSION} daf manifest: {str(manifest)[:100]}")
    fields = (*_DATA_FIELDS, "storage") if storage else _DATA_FIELDS
    differences: list[str] = []
    for section in _DEPTHS:
        left, right = _flatten(expected, section), _flatten(actual, section)
        if section == "matrices" and not layouts:
            left_keys = {_matrix_key(path) for path in left}
            right_keys = {_matrix_key(path) for path in right}
        else:
            left_keys, right_keys = set(left), set(right)
        differences.extend(f"{key}: missing" for key in sorted(left_keys - right_keys))
        differences.extend(f"{key}: unexpected" for key in sorted(right_keys - left_keys))
        for path in sorted(set(left) & set(right)):
            differences.extend(f"{path}: {field} differs" for field in fields
                               if left[path].get(field) != right[path].get(field))
    return differences
