"""How a pydaf data set is handed to Julia, as data (:func:`julia_plan`): which Julia constructor opens which path
(a stored data set, read-only, from the same file), or which buffers a Julia ``MemoryDaf`` wraps and which of them
had to be copied (strings, and numbers in a form Julia can't take as it is). :func:`~pydaf.julia.to_julia` carries a
plan out; building one needs no Julia.

Design: docs/design/julia.md ("Handing a data set to Julia")."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..core.readers import DafReader
from ..errors import DafLockedError
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import STRING_DTYPE, StorageScalar, indtype_for_size, julia_name

#: pydaf's stored formats (their ``type_name``), and the Julia constructor that opens the same path.
STORED_FORMATS = {"H5df": "H5df", "FilesDaf": "FilesDaf", "ZarrDaf": "ZarrDaf", "ZipDaf": "ZipDaf"}


class ArrayForm(enum.Enum):
    """How a vector or matrix is handed to Julia."""

    DENSE = "dense"
    """A Julia ``Array`` over the buffer (column-major)."""
    SPARSE = "sparse"
    """A Julia ``SparseVector``/``SparseMatrixCSC`` over the stored 1-based parts."""
    STRINGS = "strings"
    """A Julia ``Vector{String}``/``Matrix{String}`` copied from the values."""


@dataclass(frozen=True)
class JuliaBuffer:
    """One buffer handed to Julia: ``array`` (what Julia wraps, or copies for strings) and whether it is a copy of
    what pydaf stores rather than that memory itself."""

    array: np.ndarray
    copied: bool


@dataclass(frozen=True)
class JuliaArrayPlan:
    """One stored vector (``axes == (axis,)``) or matrix (``axes == (rows_axis, columns_axis)``, this layout) handed
    to Julia: its form, Julia element type, shape, and buffers (``(values,)`` dense or strings; ``(nzind, nzval)``
    sparse vector; ``(colptr, rowval, nzval)`` sparse matrix)."""

    axes: tuple[str, ...]
    name: str
    form: ArrayForm
    eltype: str
    shape: tuple[int, ...]
    buffers: tuple[JuliaBuffer, ...]

    @property
    def zero_copy(self) -> bool:
        """Whether Julia sees pydaf's memory itself (no buffer copied)."""
        return not any(buffer.copied for buffer in self.buffers)


@dataclass(frozen=True)
class JuliaMemoryPlan:
    """A Julia ``MemoryDaf`` called ``name`` built from the scalars, axes (entries) and stored arrays of a data set."""

    name: str
    scalars: tuple[tuple[str, StorageScalar], ...]
    axes: tuple[tuple[str, np.ndarray], ...]
    arrays: tuple[JuliaArrayPlan, ...]


@dataclass(frozen=True)
class JuliaOpenPlan:
    """Julia opens the storage itself: ``read_only(<constructor>(path, "r"); name = name)``."""

    constructor: str
    path: str
    name: str


def julia_plan(daf: DafReader, *, in_memory: bool = False) -> JuliaOpenPlan | JuliaMemoryPlan:
    """How :func:`~pydaf.julia.to_julia` hands ``daf`` to Julia (see the module documentation): by path for stored
    formats, else (or with ``in_memory``) as a Julia ``MemoryDaf`` over pydaf's buffers.

    Example:
        >>> import numpy as np, pydaf
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"])
        >>> daf = daf.set_vector("cell", "age", np.array([3, 5], np.uint8))
        >>> plan = julia_plan(daf)
        >>> array = plan.arrays[0]
        >>> plan.name, array.form.value, array.eltype, array.zero_copy
        ('cells!', 'dense', 'UInt8', True)
        >>> array.buffers[0].array.ctypes.data == daf.get_stored_vector("cell", "age").ctypes.data
        True
    """
    constructor = STORED_FORMATS.get(daf.format.type_name)
    path = daf.complete_path()
    if not in_memory and constructor is not None and path is not None:
        if constructor == "H5df" and _open_for_writing(daf):
            raise DafLockedError(
                f"can't hand the H5df file: {path}\nto Julia while this process has it open for writing (Julia would "
                f"read it as it is being written)\n(reopen it read-only, or use to_julia(..., in_memory=True))",
                daf_name=daf.name)
        return JuliaOpenPlan(constructor, path, daf.name)
    return _memory_plan(daf)


def _open_for_writing(daf: DafReader) -> bool:
    """Whether this process has the HDF5 file of an H5df open for writing: through this data set, or through another
    handle whose HDF5 file it shares (pydaf opens each file once per process, so a read-only data set opened while
    a writer was open shares the writer's read-write file)."""
    file = getattr(daf.format, "file", None)
    return daf.format.is_writable or getattr(file, "mode", "r") != "r"


def _memory_plan(daf: DafReader) -> JuliaMemoryPlan:
    with daf.read_lock():
        scalars = tuple((name, daf.get_scalar(name)) for name in sorted(daf.scalars_set()))
        axes = tuple((axis, daf.axis_vector(axis)) for axis in sorted(daf.axes_set()))
        arrays = [array_plan((axis,), name, daf.get_stored_vector(axis, name))
                  for axis, _ in axes for name in sorted(daf.vectors_set(axis))]
        for rows_axis, _ in axes:
            for columns_axis, _ in axes:
                arrays.extend(
                    array_plan((rows_axis, columns_axis), name,
                               daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False))
                    for name in sorted(daf.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False)))
        return JuliaMemoryPlan(daf.name, scalars, axes, tuple(arrays))


def array_plan(axes: tuple[str, ...], name: str, stored: np.ndarray | SparseVector | SparseMatrixCSC) -> JuliaArrayPlan:
    """How one stored vector or matrix is handed to Julia (see :class:`JuliaArrayPlan`).

    Example:
        >>> import numpy as np
        >>> plan = array_plan(("cell", "gene"), "x", np.arange(6.0).reshape(2, 3))  # C order: copied to column-major
        >>> plan.form.value, plan.zero_copy, plan.buffers[0].array.flags.f_contiguous
        ('dense', False, True)
    """
    if isinstance(stored, SparseVector):
        indtype = _index_dtype(stored.nzind.dtype, stored.length)
        buffers: tuple[JuliaBuffer, ...] = (_buffer(stored.nzind, indtype), _buffer(stored.nzval))
        return JuliaArrayPlan(axes, name, ArrayForm.SPARSE, julia_name(buffers[-1].array.dtype), stored.shape, buffers)
    if isinstance(stored, SparseMatrixCSC):
        indtype = _index_dtype(np.promote_types(stored.colptr.dtype, stored.rowval.dtype), *stored.shape,
                               stored.nnz + 1)
        buffers = (_buffer(stored.colptr, indtype), _buffer(stored.rowval, indtype), _buffer(stored.nzval))
        return JuliaArrayPlan(axes, name, ArrayForm.SPARSE, julia_name(buffers[-1].array.dtype), stored.shape, buffers)
    if stored.dtype == STRING_DTYPE:
        return JuliaArrayPlan(axes, name, ArrayForm.STRINGS, "String", stored.shape, (JuliaBuffer(stored, True),))
    buffer = _buffer(stored)
    return JuliaArrayPlan(axes, name, ArrayForm.DENSE, julia_name(buffer.array.dtype), stored.shape, (buffer,))


def _index_dtype(dtype: np.dtype, *sizes: int) -> np.dtype:
    """``dtype``, or a wider one if it can't count to every size (Julia keeps sizes in the index type)."""
    largest = max(sizes, default=0)
    return dtype if largest <= np.iinfo(dtype).max else np.promote_types(dtype, indtype_for_size(largest))


def _buffer(stored: np.ndarray, dtype: np.dtype | None = None) -> JuliaBuffer:
    """The memory Julia wraps: ``stored`` itself when it is column-major contiguous, native and of ``dtype``."""
    target = np.dtype(stored.dtype if dtype is None else dtype).newbyteorder("=")
    array = np.asarray(stored, dtype=target, order="F")
    if not array.flags.aligned:  # Julia's arrays are aligned (its loads may assume so)
        array = array.copy(order="F")
    same = (array.__array_interface__["data"][0] == stored.__array_interface__["data"][0]
            and array.nbytes == stored.nbytes and array.dtype == stored.dtype)
    return JuliaBuffer(array, copied=not same)
