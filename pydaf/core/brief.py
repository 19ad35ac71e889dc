"""Julia's ``brief`` text of scalars and arrays (TanayLabUtilities), as used by ``description``.

Example:
    >>> brief_array(np.array([True, False]))
    '2 x Bool (Dense; 1 (50%) true)'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..julia_text import julia_float_text
from ..sparse import SparseMatrixCSC, SparseVector, is_read_only_array, read_only_array
from ..storage_types import julia_name

MAX_BRIEF_STRING = 16


def percent(used: int, out_of: int) -> str:
    """Julia's ``percent``: ``NA%``, ``0%``, ``<1%``, ``>99%``, ``100%`` or the rounded (half to even) percentage."""
    if out_of == 0:
        return "NA%"
    if used == 0:
        return "0%"
    if used == out_of:
        return "100%"
    fraction = 100.0 * used / out_of
    if 0 < fraction < 1:
        return "<1%"
    if 99 < fraction < 100:
        return ">99%"
    return f"{round(fraction)}%"


def delimited_number(number: int) -> str:
    """An integer with ``,`` between groups of three digits (Julia's ``delimited_number``)."""
    return f"{number:,}"


def brief_scalar(value: object) -> str:
    """Julia's ``brief`` of a scalar: quoted (and shortened) strings, ``print`` form of numbers.

    Example:
        >>> brief_scalar("human"), brief_scalar(np.float32(1.5)), brief_scalar(True), brief_scalar(1e-5)
        ('"human"', '1.5', 'true', '1.0e-5')
    """
    if isinstance(value, str):
        if len(value) <= MAX_BRIEF_STRING:
            return f'"{value}"'
        return f'"{value[:MAX_BRIEF_STRING]}..." ({len(value)})'
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, float | np.floating):
        return julia_float_text(value)
    return str(int(value)) if isinstance(value, int | np.integer) else str(value)


def _eltype_text(dtype: np.dtype, *, matrix: bool) -> str:
    name = julia_name(dtype)
    return "Str" if name == "String" and not matrix else name


def _mask_suffix(array: np.ndarray | SparseVector | SparseMatrixCSC, length: int) -> str:
    if array.dtype != np.bool_:
        return ""
    if isinstance(array, SparseVector | SparseMatrixCSC):
        n_true = int(np.count_nonzero(array.nzval))
        if n_true == array.nnz:
            return ""
    else:
        n_true = int(np.count_nonzero(array))
    return f"; {n_true} ({percent(n_true, length)}) true"


def brief_array(array: np.ndarray | SparseVector | SparseMatrixCSC) -> str:
    """Julia's ``brief`` of a stored vector or matrix (as shown by ``description``).

    Example:
        >>> brief_array(np.zeros((3, 4), order="F"))
        '3 x 4 x Float64 in Columns (Dense)'
    """
    if isinstance(array, SparseVector | SparseMatrixCSC):
        length = int(np.prod(array.shape))
        indices = array.colptr if isinstance(array, SparseMatrixCSC) else array.nzind
        kind = f"Sparse {delimited_number(array.nnz)} ({percent(array.nnz, length)}) [{julia_name(indices.dtype)}]"
    else:
        length = int(array.size)
        kind = "Dense"
    suffix = _mask_suffix(array, length)
    if len(array.shape) == 1:
        return f"{delimited_number(array.shape[0])} x {_eltype_text(array.dtype, matrix=False)} ({kind}{suffix})"
    n_rows, n_cols = array.shape
    layout = "Columns"
    if isinstance(array, np.ndarray) and not array.flags.f_contiguous and array.flags.c_contiguous and min(
            n_rows, n_cols) > 1:
        layout = "Rows"
    return (f"{delimited_number(n_rows)} x {delimited_number(n_cols)} x {_eltype_text(array.dtype, matrix=True)} "
            f"in {layout} ({kind}{suffix})")


def _brief_csr(matrix: Any) -> str:
    """A CSR matrix as Julia sees it without a copy: the ``Transpose`` of the CSC matrix of its transpose (same index
    arrays), so row-major, ``in Rows``, with the index type of its own indices."""
    transposed = SparseMatrixCSC.from_scipy(matrix.transpose().tocsc(copy=False), indtype=matrix.indices.dtype)
    inner = brief_array(transposed)  # "<n_cols> x <n_rows> x <type> in Columns (<kind>)"
    kind = inner[inner.index(" in Columns (") + len(" in Columns ("):]
    read_only = "" if matrix.data.flags.writeable else "ReadOnly, "
    n_rows, n_cols = matrix.shape
    return (f"{delimited_number(n_rows)} x {delimited_number(n_cols)} x {_eltype_text(matrix.dtype, matrix=True)} "
            f"in Rows ({read_only}Transpose, {kind}")


def brief(value: Any) -> str:
    """Julia's ``brief`` of any value: arrays as :func:`brief_array` (with ``ReadOnly`` for read-only ones, as
    Julia's ``SparseArrays.ReadOnly`` wrapper shows), scalars as :func:`brief_scalar`, data sets as their ``repr``.

    Example:
        >>> from pydaf.sparse import read_only_array
        >>> brief(np.array([0, 1])), brief(read_only_array(np.array([0, 1]))), brief(2.5)
        ('2 x Int64 (Dense)', '2 x Int64 (ReadOnly, Dense)', '2.5')
    """
    if hasattr(value, "tocsc") and hasattr(value, "nnz"):  # scipy
        if getattr(value, "format", None) == "csr" and len(value.shape) == 2:
            return _brief_csr(value)
        # (with the index type of its own indices, as Julia is given a CSC matrix without a copy)
        indtype = value.indices.dtype if getattr(value, "format", None) == "csc" else None
        value = SparseMatrixCSC.from_scipy(value, indtype=indtype) if value.data.flags.writeable else \
            read_only_array(SparseMatrixCSC.from_scipy(value, indtype=indtype))
    if isinstance(value, np.ndarray | SparseVector | SparseMatrixCSC):
        text = brief_array(value)
        if is_read_only_array(value):
            open_at = text.index("(")
            text = f"{text[:open_at + 1]}ReadOnly, {text[open_at + 1:]}"
        return text
    if isinstance(value, str | bool | int | float | np.generic):
        return brief_scalar(value)
    return repr(value)
