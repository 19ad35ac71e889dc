"""Writing the elements of an ``.h5ad`` file with h5py, through a registry keyed by ``encoding-type``.

The mirror of :mod:`pydaf.interop.h5ad_elements` (anndata's IO registry pattern): each writer is registered with
``@writes(encoding_type, encoding_version)``, creates one HDF5 element from a Daf value and returns it, and the
registry stamps the element's ``encoding-type``/``encoding-version`` attributes, so no writer spells them. Matrices
are written in slices of the stored (often mapped) arrays, so nothing is relaid out or materialised.

Example:
    >>> import os, tempfile
    >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5ad"), "w") as file:
    ...     element = write_element(file, "names", "string-array", np.array(["A", "B"], dtype=object))
    ...     dict(element.attrs), element.asstr()[()].tolist()
    ({'encoding-type': 'string-array', 'encoding-version': '0.2.0'}, ['A', 'B'])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from ..sparse import SparseMatrixCSC
from ..storage_types import STRING_DTYPE

__all__ = ["WRITERS", "column_encoding", "stamp", "write_element", "writes"]

# Entries per slice when matrices are streamed (bounded buffers: ~100 MB for 8-byte values and indices).
_CHUNK = 1 << 23

Writer = Callable[..., Any]

#: ``encoding-type -> writer`` (each stamps its element with its type and version).
WRITERS: dict[str, Writer] = {}


def stamp(element: Any, encoding_type: str, encoding_version: str) -> Any:
    """Set the encoding attributes of an element (a dataset, a group or the file itself), and return it.

    Example:
        >>> import os, tempfile
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5ad"), "w") as file:
        ...     dict(stamp(file, "anndata", "0.1.0").attrs)
        {'encoding-type': 'anndata', 'encoding-version': '0.1.0'}
    """
    element.attrs["encoding-type"] = encoding_type
    element.attrs["encoding-version"] = encoding_version
    return element


def writes(encoding_type: str, encoding_version: str) -> Callable[[Writer], Writer]:
    """Register a writer ``(group, name, value, **options) -> element`` of an encoding; the element it returns is
    stamped with ``encoding_type`` and ``encoding_version``.

    Example:
        >>> @writes("my-encoding", "0.1.0")
        ... def write_mine(group, name, value):
        ...     return group.create_dataset(name, data=value)
        >>> WRITERS["my-encoding"] is write_mine
        True
        >>> del WRITERS["my-encoding"]
    """

    def register(writer: Writer) -> Writer:
        @functools.wraps(writer)
        def stamped(group: h5py.Group, name: str, value: Any, **options: Any) -> Any:
            return stamp(writer(group, name, value, **options), encoding_type, encoding_version)

        WRITERS[encoding_type] = stamped
        return stamped

    return register


def write_element(group: h5py.Group, name: str, encoding_type: str, value: Any, **options: Any) -> Any:
    """Write ``value`` as the element ``group[name]`` of the given encoding (see :data:`WRITERS`), and return it.

    Example:
        >>> import os, tempfile
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5ad"), "w") as file:
        ...     write_element(file, "n", "numeric-scalar", np.int32(7))[()]
        np.int32(7)
    """
    return WRITERS[encoding_type](group, name, value, **options)


def _index_dtype(limit: int) -> np.dtype:
    return np.dtype(np.int32) if limit < np.iinfo(np.int32).max else np.dtype(np.int64)


class _NoProgress:
    def update(self, _count: int) -> None:
        pass


# Containers.


@writes("dict", "0.1.0")
def write_dict(group: h5py.Group, name: str, value: dict[str, tuple[str, Any]]) -> h5py.Group:
    """``value``: ``{key: (encoding_type, item)}``."""
    element = group.create_group(name)
    for key, (encoding, item) in value.items():
        write_element(element, key, encoding, item)
    return element


@writes("dataframe", "0.2.0")
def write_dataframe(group: h5py.Group, name: str, value: tuple[Any, ...]) -> h5py.Group:
    """``value``: ``(index, {column: vector}[, index_name])``, the columns in their order: numpy vectors, or pandas
    categoricals and nullable arrays (see :func:`column_encoding`). The index is stored under its name (anndata's
    ``_index`` attribute names it), or under ``_index`` when it has none or a column has the same name."""
    index, columns = value[:2]
    index_name = value[2] if len(value) > 2 and value[2] is not None and value[2] not in columns else "_index"
    frame = group.create_group(name)
    frame.attrs["_index"] = index_name
    frame.attrs["column-order"] = np.array(list(columns), dtype=object) if columns else np.array([], dtype=np.float64)
    write_element(frame, index_name, "string-array", index)
    for column, values in columns.items():
        write_element(frame, column, column_encoding(values), values)
    return frame


def column_encoding(values: Any) -> str:
    """The AnnData encoding of a dataframe column: ``categorical`` for a ``pd.Categorical``, ``nullable-integer``,
    ``nullable-boolean`` or ``nullable-string-array`` for pandas' nullable arrays, else ``string-array`` or
    ``array``.

    Example:
        >>> import pandas as pd
        >>> column_encoding(pd.Categorical(["a"])), column_encoding(pd.array([1, None], dtype="Int64"))
        ('categorical', 'nullable-integer')
    """
    if isinstance(values, np.ndarray):
        return "string-array" if values.dtype == STRING_DTYPE else "array"
    import pandas as pd

    if isinstance(values, pd.Categorical):
        return "categorical"
    if pd.api.types.is_bool_dtype(values.dtype):
        return "nullable-boolean"
    if pd.api.types.is_integer_dtype(values.dtype):
        return "nullable-integer"
    if pd.api.types.is_string_dtype(values.dtype):
        return "nullable-string-array"
    raise TypeError(f"an AnnData column of the type: {values.dtype}")


@writes("categorical", "0.2.0")
def write_categorical(group: h5py.Group, name: str, value: Any) -> h5py.Group:
    """``value``: a ``pd.Categorical`` (its codes, ``-1`` where missing, and its categories in their order)."""
    element = group.create_group(name)
    element.attrs["ordered"] = bool(value.ordered)
    write_element(element, "categories", "string-array", np.asarray(value.categories, dtype=object))
    write_element(element, "codes", "array", np.asarray(value.codes))
    return element


def _write_masked(group: h5py.Group, name: str, values: np.ndarray, mask: np.ndarray, encoding: str) -> h5py.Group:
    """A nullable array: its ``values`` (of the given encoding) and its ``mask`` (true where missing)."""
    element = group.create_group(name)
    write_element(element, "values", encoding, values)
    write_element(element, "mask", "array", np.asarray(mask, dtype=bool))
    return element


@writes("nullable-integer", "0.1.0")
def write_nullable_integer(group: h5py.Group, name: str, value: Any) -> h5py.Group:
    """``value``: a pandas ``IntegerArray`` (missing values are written as 0, masked)."""
    return _write_masked(group, name, value.to_numpy(dtype=value.dtype.numpy_dtype, na_value=0), value.isna(),
                         "array")


@writes("nullable-boolean", "0.1.0")
def write_nullable_boolean(group: h5py.Group, name: str, value: Any) -> h5py.Group:
    """``value``: a pandas ``BooleanArray`` (missing values are written as false, masked)."""
    return _write_masked(group, name, value.to_numpy(dtype=bool, na_value=False), value.isna(), "array")


@writes("nullable-string-array", "0.1.0")
def write_nullable_string_array(group: h5py.Group, name: str, value: Any) -> h5py.Group:
    """``value``: a pandas ``StringArray`` (missing values are written as "", masked)."""
    return _write_masked(group, name, value.to_numpy(dtype=object, na_value=""), value.isna(), "string-array")


# Arrays and scalars.


@writes("string-array", "0.2.0")
def write_string_array(group: h5py.Group, name: str, value: np.ndarray) -> h5py.Dataset:
    return group.create_dataset(name, data=np.asarray(value, dtype=object), dtype=h5py.string_dtype("utf-8"))


@writes("array", "0.2.0")
def write_array(group: h5py.Group, name: str, value: np.ndarray, *, bar: Any = None) -> h5py.Dataset:
    """A vector, or a row-major matrix (often the transposed view of a mapped column-major one) written in slices
    of rows, so it is never copied whole."""
    if value.ndim != 2:
        return group.create_dataset(name, data=value)
    bar = bar or _NoProgress()
    dataset = group.create_dataset(name, shape=value.shape, dtype=value.dtype)
    step = max(1, _CHUNK // max(1, value.shape[1]))
    for start in range(0, value.shape[0], step):
        stop = min(start + step, value.shape[0])
        dataset.write_direct(np.ascontiguousarray(value[start:stop]), dest_sel=np.s_[start:stop])
        bar.update((stop - start) * value.shape[1])
    return dataset


@writes("string", "0.2.0")
def write_string(group: h5py.Group, name: str, value: str) -> h5py.Dataset:
    return group.create_dataset(name, data=value, dtype=h5py.string_dtype("utf-8"))


@writes("numeric-scalar", "0.2.0")
def write_numeric_scalar(group: h5py.Group, name: str, value: Any) -> h5py.Dataset:
    return group.create_dataset(name, data=np.asarray(value))


# Sparse matrices.


def _write_compressed(group: h5py.Group, name: str, matrix: SparseMatrixCSC, shape: tuple[int, int],
                      bar: Any) -> h5py.Group:
    """The 1-based CSC arrays of ``matrix`` as AnnData's 0-based ``indptr``/``indices``/``data``, in slices."""
    bar = bar or _NoProgress()
    element = group.create_group(name)
    element.attrs["shape"] = np.array(shape, dtype=np.int64)
    nnz = matrix.nnz
    element.create_dataset("indptr", data=np.asarray(matrix.colptr, dtype=np.int64).astype(_index_dtype(nnz)) - 1)
    indices = element.create_dataset("indices", shape=(nnz,), dtype=_index_dtype(matrix.shape[0]))
    data = element.create_dataset("data", shape=(nnz,), dtype=matrix.nzval.dtype)
    for start in range(0, nnz, _CHUNK):
        stop = min(start + _CHUNK, nnz)
        indices[start:stop] = np.subtract(matrix.rowval[start:stop], 1, dtype=indices.dtype)
        data[start:stop] = matrix.nzval[start:stop]
        bar.update(stop - start)
    return element


@writes("csr_matrix", "0.1.0")
def write_csr(group: h5py.Group, name: str, value: SparseMatrixCSC, *, bar: Any = None) -> h5py.Group:
    """``value``: Daf's column-major ``(var, obs)`` matrix, whose CSC arrays are AnnData's ``(obs, var)`` CSR."""
    return _write_compressed(group, name, value, (value.shape[1], value.shape[0]), bar)


@writes("csc_matrix", "0.1.0")
def write_csc(group: h5py.Group, name: str, value: SparseMatrixCSC, *, bar: Any = None) -> h5py.Group:
    """``value``: Daf's column-major ``(obs, var)`` matrix, as it is."""
    return _write_compressed(group, name, value, value.shape, bar)
