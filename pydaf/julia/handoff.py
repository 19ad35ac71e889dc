"""Handing data sets between pydaf and Julia's DataAxesFormats.jl in one process (juliacall), without copying numbers.

- :func:`to_julia`: the Julia Daf of a pydaf data set (carrying out :func:`~pydaf.julia.plan.julia_plan`: the same
  storage opened by Julia, or a Julia ``MemoryDaf`` over pydaf's buffers).
- :func:`from_julia`: a pydaf data set over a live Julia Daf (a format backend, :class:`JuliaReader`, or
  :class:`JuliaWriter` when the Julia data set is writable): Julia's arrays come back as numpy arrays and
  :class:`~pydaf.SparseMatrixCSC`\\ s over Julia's memory (a Julia ``Array``, in memory or memory-mapped, is viewed
  through the buffer protocol; only strings, and arrays Julia does not hold as plain arrays, e.g. packed data, are
  copied).
- :func:`julia_query`: a query evaluated by Julia on the same data, in pydaf's result forms (for cross-checks).

Julia is started on first use (:func:`~pydaf.julia.setup.start_julia`); Julia's errors become
:class:`DafJuliaError`. Changes made to a Julia data set through Julia after :func:`from_julia` are not tracked by
the pydaf data set's cache: call its ``empty_cache()`` (changes made through the pydaf data set are).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..abc.format import CacheGroup, FormatReader, FormatWriter, StoredMatrix, StoredVector
from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..sparse import SparseMatrixCSC, SparseVector, read_only_array
from ..storage_types import STRING_DTYPE, StorageScalar, julia_name, scalar_dtype, storage_dtype
from .errors import DafJuliaError
from .plan import ArrayForm, JuliaArrayPlan, JuliaMemoryPlan, JuliaOpenPlan, array_plan, julia_plan
from .setup import start_julia


@contextmanager
def julia_errors() -> Iterator[None]:
    """Turn a Julia exception (``juliacall.JuliaError``) raised in the block into a :class:`DafJuliaError` with
    Julia's message (without Julia's backtrace)."""
    try:
        yield
    except Exception as error:
        juliacall = sys.modules.get("juliacall")
        if juliacall is None or not isinstance(error, juliacall.JuliaError):
            raise
        message = str(juliacall.Base.sprint(juliacall.Base.showerror, error.exception))
        raise DafJuliaError(message) from None


# pydaf to Julia.


def _python_scalar(value: StorageScalar) -> Any:
    return value if isinstance(value, str) else np.asarray(value).item()


def _wrap(bridge: Any, array: np.ndarray) -> Any:
    """A Julia ``Array`` over a (column-major, native) numpy buffer, which it keeps alive."""
    return bridge.wrap_buffer(array, array.__array_interface__["data"][0], julia_name(array.dtype), array.shape)


def _set_scalar(bridge: Any, julia_daf: Any, name: str, value: StorageScalar) -> None:
    bridge.set_typed_scalar_b(julia_daf, name, _python_scalar(value), julia_name(scalar_dtype(value)))


def _set_array(bridge: Any, julia_daf: Any, plan: JuliaArrayPlan) -> None:
    """Store one planned vector or matrix in a Julia data set (in this layout only)."""
    arrays = [buffer.array for buffer in plan.buffers]
    if plan.form is ArrayForm.STRINGS:
        values = list(arrays[0].reshape(-1, order="F"))
        value = bridge.julia_strings(values) if len(plan.axes) == 1 else bridge.string_matrix(values, *plan.shape)
    else:
        wrapped = [_wrap(bridge, array) for array in arrays]
        if plan.form is ArrayForm.DENSE:
            value = wrapped[0]
        elif len(plan.axes) == 1:
            value = bridge.sparse_vector(plan.shape[0], *wrapped)
        else:
            value = bridge.sparse_matrix(*plan.shape, *wrapped)
    if len(plan.axes) == 1:
        bridge.set_vector_b(julia_daf, plan.axes[0], plan.name, value)
    else:
        bridge.set_matrix_b(julia_daf, *plan.axes, plan.name, value, relayout=False)


def _build_memory_daf(bridge: Any, plan: JuliaMemoryPlan) -> Any:
    julia_daf = bridge.new_memory_daf(plan.name)
    for name, value in plan.scalars:
        _set_scalar(bridge, julia_daf, name, value)
    for axis, entries in plan.axes:
        bridge.add_string_axis_b(julia_daf, axis, list(entries))
    for array in plan.arrays:
        _set_array(bridge, julia_daf, array)
    return julia_daf


def to_julia(daf: DafReader, *, in_memory: bool = False) -> Any:
    """The Julia Daf (a juliacall handle of a Julia ``DafReader``) of a pydaf data set: for a stored format, the same
    path opened read-only by Julia; otherwise, or with ``in_memory``, a Julia ``MemoryDaf`` whose arrays are pydaf's
    buffers (see :mod:`pydaf.julia.plan`). A data set that :func:`from_julia` made gives back its Julia data set.

    Example:
        >>> import pydaf, pydaf.julia
        >>> try:  # without Julia, the error says why (and nothing is downloaded)
        ...     julia_daf = to_julia(pydaf.MemoryDaf(name="example!"))
        ... except pydaf.julia.DafJuliaUnavailableError as error:
        ...     julia_daf = None
    """
    if isinstance(daf.format, JuliaReader):
        return daf.format.julia_daf
    plan = julia_plan(daf, in_memory=in_memory)
    bridge = start_julia()
    with julia_errors():
        if isinstance(plan, JuliaOpenPlan):
            return bridge.open_stored(plan.constructor, plan.path, plan.name)
        return _build_memory_daf(bridge, plan)


# Julia to pydaf.


def _numpy(julia_array: Any, what: str) -> np.ndarray:
    """A numpy view of a Julia ``Array`` of numbers (the buffer protocol: Julia's memory, column-major)."""
    array = np.asarray(julia_array)
    storage_dtype(array.dtype, what=f"element type of {what}")
    return array


def stored_value(form: tuple, what: str) -> tuple[StoredVector | StoredMatrix, CacheGroup]:
    """pydaf's stored form of an array from ``bridge.jl``'s ``stored_form``, and how to cache it (``MappedData``: a
    view of Julia's memory; ``MemoryData``: a copy)."""
    kind, copied, shape, *parts = form
    shape = tuple(int(size) for size in shape)
    if kind == "strings":
        values = np.empty(len(parts[0]), dtype=STRING_DTYPE)
        values[:] = [str(value) for value in parts[0]]
        return values.reshape(shape, order="F"), CacheGroup.MemoryData
    group = CacheGroup.MemoryData if copied else CacheGroup.MappedData
    arrays = [_numpy(part, what) for part in parts]
    if kind == "dense":
        return arrays[0], group
    if len(shape) == 1:
        return SparseVector(shape[0], *arrays), group
    return SparseMatrixCSC((shape[0], shape[1]), *arrays), group


def _addressable(*names: str) -> bool:
    """Whether each name can only address one property of the data set (a non-empty string other than ``.`` and
    ``..``, without ``/``, ``\\`` or NUL): other names are not asked of Julia, whose file formats would resolve a name
    such as ``../x`` to another place; they are simply not found."""
    return all(isinstance(name, str) and name not in ("", ".", "..") and not any(character in name for character in
                                                                                   "/\\\0") for name in names)


def _scalar(value: Any, type_name: str) -> StorageScalar:
    if type_name == "String":
        return str(value)
    return storage_dtype(type_name, what="scalar type").type(value)


class JuliaReader(FormatReader):
    """A live Julia Daf read as a pydaf storage format (:func:`from_julia`). Each ``format_*`` call is one call of
    Julia's own API (``has_vector``, ``get_vector``, …), which takes Julia's locks; arrays are views of Julia's.

    Attributes:
        bridge: the Julia module holding ``bridge.jl``.
        julia_daf: the Julia data set.
    """

    type_name = "JuliaDaf"

    def __init__(self, bridge: Any, julia_daf: Any) -> None:
        self.bridge = bridge
        self.julia_daf = julia_daf

    def julia(self, function: str, *arguments: Any, **keywords: Any) -> Any:
        """Call a function of the bridge (or of DataAxesFormats) on the Julia data set, Julia errors raised as
        :class:`DafJuliaError`."""
        with julia_errors():
            return getattr(self.bridge, function)(self.julia_daf, *arguments, **keywords)

    def format_default_name(self) -> str:
        return str(self.julia("daf_name"))

    def format_complete_path(self) -> str | None:
        path = self.julia("daf_path")
        return None if path is None else str(path)

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: {self.type_name}")
        lines.append(f"{indent}julia: {self.julia('julia_type_name')}")

    def format_has_scalar(self, name: str) -> bool:
        return _addressable(name) and bool(self.julia("has_scalar", name))

    def format_scalars_set(self) -> set[str]:
        return set(self.julia("scalar_names"))

    def format_get_scalar(self, name: str) -> StorageScalar:
        return _scalar(*self.julia("typed_scalar_of", name))

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return _addressable(axis) and bool(self.julia("has_axis", axis))

    def format_axes_set(self) -> set[str]:
        return set(self.julia("axis_names"))

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        entries = self.julia("axis_entries_of", axis)
        values = np.empty(len(entries), dtype=STRING_DTYPE)
        values[:] = [str(entry) for entry in entries]
        return values, CacheGroup.MemoryData

    def format_axis_length(self, axis: str) -> int:
        return int(self.julia("axis_length", axis))

    def format_has_vector(self, axis: str, name: str) -> bool:
        return name not in ("name", "index") and _addressable(name) and bool(self.julia("has_vector", axis, name))

    def format_vectors_set(self, axis: str) -> set[str]:
        return set(self.julia("vector_names", axis))

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        vector, group = stored_value(self.julia("stored_vector_form", axis, name), f"the vector: {name}")
        assert not isinstance(vector, SparseMatrixCSC)  # (a vector's form has one dimension)
        return vector, group

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return _addressable(name) and bool(self.julia("has_matrix", rows_axis, columns_axis, name, relayout=False))

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return set(self.julia("stored_matrices_set", rows_axis, columns_axis))

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        matrix, group = stored_value(self.julia("stored_matrix_form", rows_axis, columns_axis, name),
                                     f"the matrix: {name}")
        assert not isinstance(matrix, SparseVector)  # (a matrix's form has two dimensions)
        return matrix, group


class JuliaWriter(JuliaReader, FormatWriter):
    """A writable Julia Daf as a pydaf storage format: writes go through Julia's API (``set_vector!``, …), numbers
    handed over as Julia arrays over pydaf's buffers (which a Julia ``MemoryDaf`` keeps, and a Julia file format
    writes out). The ``empty_*`` builders fill numpy buffers that are handed over once filled."""

    is_writable = True

    def _set(self, axes: tuple[str, ...], name: str, value: Any) -> None:
        with julia_errors():
            _set_array(self.bridge, self.julia_daf, array_plan(axes, name, value))

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        with julia_errors():
            _set_scalar(self.bridge, self.julia_daf, name, value)

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        self.julia("delete_scalar_b", name)

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        self.julia("add_string_axis_b", axis, list(entries))

    def format_delete_axis(self, axis: str) -> None:
        self.julia("delete_axis_b", axis)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        if isinstance(vector, np.ndarray | SparseVector):
            self._set((axis,), name, vector)
        else:
            self.julia("set_filled_vector_b", axis, name, _python_scalar(vector), julia_name(scalar_dtype(vector)))

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        self.julia("delete_vector_b", axis, name)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        return np.zeros(self.format_axis_length(axis), dtype=dtype)

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        self._set((axis,), name, filled)

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(nnz, dtype=indtype), np.zeros(nnz, dtype=dtype)

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._set((axis,), name, filled)

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        if isinstance(matrix, np.ndarray | SparseMatrixCSC):
            self._set((rows_axis, columns_axis), name, matrix)
        else:
            self.julia("set_filled_matrix_b", rows_axis, columns_axis, name, _python_scalar(matrix),
                       julia_name(scalar_dtype(matrix)))

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        self.julia("delete_matrix_b", rows_axis, columns_axis, name, relayout=False)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return np.zeros(shape, dtype=dtype, order="F")

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        self._set((rows_axis, columns_axis), name, filled)

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n_columns = self.format_axis_length(columns_axis)
        return np.zeros(n_columns + 1, dtype=indtype), np.zeros(nnz, dtype=indtype), np.zeros(nnz, dtype=dtype)

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._set((rows_axis, columns_axis), name, filled)


def from_julia(julia_daf: Any, *, name: str | None = None) -> DafReader:
    """A pydaf data set over a live Julia Daf (a juliacall handle of a Julia ``DafReader``): a :class:`~pydaf.DafWriter`
    if the Julia data set is writable (writes go to Julia), else a read-only :class:`~pydaf.DafReader`. Named after the
    Julia data set unless ``name`` is given. Arrays are views of Julia's memory (see the module documentation).

    Example:
        >>> callable(from_julia)
        True
    """
    bridge = start_julia()
    with julia_errors():
        writable = bool(bridge.is_writer(julia_daf))
    storage = JuliaWriter(bridge, julia_daf) if writable else JuliaReader(bridge, julia_daf)
    name = storage.format_default_name() if name is None else name
    return DafWriter(storage, name=name) if writable else DafReader(storage, name=name)


# Queries.

_handles: weakref.WeakKeyDictionary[DafReader, tuple[int, Any]] = weakref.WeakKeyDictionary()
_handles_lock = threading.Lock()


def _julia_handle(daf: DafReader) -> Any:
    """The Julia data set of ``daf``, made once and again only after ``daf`` is written to."""
    write_count = daf.write_count()
    with _handles_lock:
        known = _handles.get(daf)
        if known is not None and known[0] == write_count:
            return known[1]
    julia_daf = to_julia(daf)
    with _handles_lock:
        _handles[daf] = (write_count, julia_daf)
    return julia_daf


def query_result_value(form: tuple) -> Any:
    """pydaf's result form (as ``daf[query]`` returns it) of ``bridge.jl``'s ``result_form``: a ``set`` of names, a
    numpy scalar or ``str``, a ``pandas.Series`` or a ``pandas.DataFrame`` (sparse stays sparse) labelled by entry
    names, whose index names are the axes or ``None``."""
    import pandas as pd

    kind = form[0]
    if kind == "names":
        return {str(name) for name in form[1]}
    if kind == "scalar":
        return _scalar(form[1], form[2])
    if kind == "vector":
        dimension, entries, *stored = form[1:]
        values, _ = stored_value(tuple(stored), "the query result")
        if isinstance(values, SparseVector):
            values = values.to_dense()
        index = pd.Index([str(entry) for entry in entries], name=dimension, dtype=object)
        return pd.Series(read_only_array(values), index=index, copy=False)
    rows_dimension, columns_dimension, rows, columns, *stored = form[1:]
    values, _ = stored_value(tuple(stored), "the query result")
    index = pd.Index([str(entry) for entry in rows], name=rows_dimension, dtype=object)
    columns_index = pd.Index([str(entry) for entry in columns], name=columns_dimension, dtype=object)
    if isinstance(values, SparseMatrixCSC):
        return pd.DataFrame.sparse.from_spmatrix(values.to_scipy(), index=index, columns=columns_index)
    return pd.DataFrame(read_only_array(values), index=index, columns=columns_index, copy=False)


def julia_query(daf: Any, query: Any) -> Any:
    """The result of a query evaluated by Julia's DataAxesFormats on the same data (``daf[query]`` in Julia: not
    cached), in pydaf's result forms (as ``daf[query]`` returns them). ``daf`` is a pydaf data set (handed over with
    :func:`to_julia` once, and again after it changes) or a Julia one; ``query`` a string or pydaf's builders (their
    canonical text is Julia's). Julia's errors are raised as :class:`DafJuliaError`.

    Example:
        >>> callable(julia_query)
        True
    """
    julia_daf = _julia_handle(daf) if isinstance(daf, DafReader) else daf
    bridge = start_julia()
    with julia_errors():
        form = bridge.query_form(julia_daf, query if isinstance(query, str) else str(query))
        return query_result_value(form)
