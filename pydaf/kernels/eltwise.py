"""Element-wise maps of large arrays: numpy functions applied to cache-sized chunks, on all the threads.

An element-wise operation written as numpy (``np.log(x + eps)``, a cast with its range checks, ...) makes one pass
over memory per numpy call and runs on one core. Applied here chunk by chunk, the temporaries of all the calls on a
chunk stay in the L2 cache (one pass over memory in all), and the chunks are spread over the threads of
:mod:`.threads` (numpy releases the GIL inside its loops, which are SIMD: faster than numba's scalar ``log``).

Example:
    >>> map_values(np.arange(4, dtype=np.uint8), np.dtype(np.float32),
    ...            lambda chunk, out: np.divide(chunk, 2, out=out)).tolist()
    [0.0, 0.5, 1.0, 1.5]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ..errors import DafValueError
from .threads import PARALLEL_MIN_ENTRIES, even_bounds, run_ranges, threads_for

__all__ = ["MAP_CHUNK", "divide_columns", "map_values", "significant_columns", "zero_based_indices"]

#: Values per chunk: an input and an output chunk of 8-byte values (2 x 512 KB) stay in the L2 cache.
MAP_CHUNK = 1 << 16


def map_values(values: np.ndarray, dtype: np.dtype, function: Callable[[np.ndarray, np.ndarray], None]) -> np.ndarray:
    """A new array of ``dtype`` (the shape of ``values``; column-major for a column-major matrix) into which
    ``function(chunk, out_chunk)`` writes its results for consecutive chunks of ``values`` (in memory order);
    ``function`` must map each element on its own. An exception raised for any chunk is raised (once every chunk is
    done); callers that need the first failing element in order recompute serially.

    Example:
        >>> map_values(np.array([[1, 2], [3, 4]], order="F"), np.dtype(np.int64),
        ...            lambda chunk, out: np.multiply(chunk, 10, out=out)).tolist()
        [[10, 20], [30, 40]]
    """
    if values.ndim > 1 and not (values.flags.f_contiguous or values.flags.c_contiguous):
        values = np.asfortranarray(values)
    order: Literal["C", "F"] = "F" if values.ndim > 1 and values.flags.f_contiguous else "C"
    out = np.empty(values.shape, dtype=dtype, order=order)
    flat_values = values.ravel(order="K")
    flat_out = out.ravel(order="K")
    size = flat_values.shape[0]
    n_chunks = (size + MAP_CHUNK - 1) // MAP_CHUNK

    def run(first_chunk: int, last_chunk: int) -> None:
        for start in range(first_chunk * MAP_CHUNK, min(last_chunk * MAP_CHUNK, size), MAP_CHUNK):
            stop = min(start + MAP_CHUNK, size)
            function(flat_values[start:stop], flat_out[start:stop])

    run_ranges(run, even_bounds(n_chunks, threads_for(size)))
    return out


def divide_columns(values: np.ndarray, column_starts: np.ndarray | None, divisors: np.ndarray,
                   dtype: np.dtype) -> np.ndarray:
    """A matrix's values divided by the divisor of their column, in ``dtype``: a new array. ``values`` is a
    column-major matrix (``column_starts`` ``None``; the result is column-major too) or the values of a sparse one in
    column order (``nzval``, with ``column_starts`` the 0-based position of each column's first value, and the total,
    last). Columns go in ranges of about :data:`MAP_CHUNK` values, on all threads.

    Example:
        >>> divide_columns(np.array([1, 3, 2]), np.array([0, 2, 3]), np.array([4.0, 2.0]), np.dtype(np.float64))
        array([0.25, 0.75, 1.  ])
        >>> divide_columns(np.array([[1, 2], [3, 4]], order="F"), None, np.array([4.0, 2.0]), np.dtype(np.float32))
        array([[0.25, 1.  ],
               [0.75, 2.  ]], dtype=float32)
    """
    if column_starts is None:
        n_rows, n_columns = values.shape
        column_starts = n_rows * np.arange(n_columns + 1, dtype=np.int64)
        out = np.empty(values.shape, dtype=dtype, order="F")
    else:
        column_starts = np.asarray(column_starts, dtype=np.int64)
        out = np.empty(values.shape[0], dtype=dtype)
    n_columns = column_starts.shape[0] - 1
    # Ranges of columns of about MAP_CHUNK values (at least one column each).
    wanted = np.arange(0, int(column_starts[-1]) + MAP_CHUNK, MAP_CHUNK)
    bounds = np.unique(np.concatenate([[0], np.searchsorted(column_starts, wanted, side="right") - 1,
                                       [n_columns]]).clip(0, n_columns))
    counts = np.diff(column_starts)

    def run(first_range: int, last_range: int) -> None:
        for index in range(first_range, last_range):
            first, last = int(bounds[index]), int(bounds[index + 1])
            if values.ndim == 2:
                # A dense block of columns: each column divided by its divisor, broadcast (no repeated divisors).
                np.divide(values[:, first:last], divisors[first:last], out=out[:, first:last], dtype=dtype)
                continue
            start, stop = int(column_starts[first]), int(column_starts[last])
            if last - first == 1:
                np.divide(values[start:stop], divisors[first], out=out[start:stop], dtype=dtype)
            else:
                np.divide(values[start:stop], np.repeat(divisors[first:last], counts[first:last]),
                          out=out[start:stop], dtype=dtype)

    run_ranges(run, even_bounds(bounds.shape[0] - 1, threads_for(int(column_starts[-1]))))
    return out


def significant_columns(colptr: np.ndarray, rowval: np.ndarray | None, values: np.ndarray, high: Any, low: Any,
                        indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Julia's ``Significant`` of each column of a 1-based CSC matrix (``rowval`` ``None``: a dense column-major
    matrix, ``values`` raveled, ``colptr = 1 + n_rows * j``): the kept values as new ``colptr``/``rowval``/``nzval``
    (indices of ``indtype``), or ``None`` when every stored value is kept. ``high``/``low`` are of the values' type
    (see :mod:`._significant`).

    Example:
        >>> colptr, rowval, nzval = significant_columns(np.array([1, 3, 5]), None, np.array([4.0, 1.0, 2.0, 0.5]),
        ...                                             3.0, 1.0, np.dtype(np.int64))
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 3, 3], [1, 2], [4.0, 1.0])
    """
    kernels = importlib.import_module(f"{__package__}._significant")
    n_columns = colptr.shape[0] - 1
    dtype = values.dtype.type
    with np.errstate(over="ignore"):  # -high of an unsigned type wraps around, as in Julia
        bounds = (dtype(-high), dtype(high), dtype(-low), dtype(low))
    ranges = even_bounds(n_columns, threads_for(values.shape[0]))
    counts = np.empty(n_columns, dtype=np.int64)
    run_ranges(lambda first, last: kernels.kept_counts(first, last, colptr, values, *bounds, counts), ranges)
    kept = int(counts.sum())
    if kept == values.shape[0]:
        return None
    out_colptr = np.empty(n_columns + 1, dtype=indtype)
    out_colptr[0] = 1
    np.cumsum(counts, out=out_colptr[1:])
    out_colptr[1:] += 1
    out_rowval = np.empty(kept, dtype=indtype)
    out_nzval = np.empty(kept, dtype=values.dtype)
    no_rows = np.zeros(0, dtype=indtype)
    run_ranges(lambda first, last: kernels.fill_kept(first, last, colptr, no_rows if rowval is None else rowval,
                                                     values, *bounds, out_colptr, out_rowval, out_nzval), ranges)
    return out_colptr, out_rowval, out_nzval


def zero_based_indices(one_based: np.ndarray, limit: int, dtype: np.dtype) -> np.ndarray | None:
    """A new 0-based copy (of ``dtype``) of 1-based indices, or ``None`` if any is outside ``1..limit`` (``limit``
    must fit ``dtype``). One pass over memory on all threads (numba, :mod:`._indices`) for large arrays; numpy below
    :data:`~.threads.PARALLEL_MIN_ENTRIES`.

    Example:
        >>> zero_based_indices(np.array([1, 3], np.uint32), 3, np.dtype(np.int32))
        array([0, 2], dtype=int32)
        >>> zero_based_indices(np.array([0, 3], np.uint32), 3, np.dtype(np.int32)) is None
        True
    """
    size = one_based.shape[0]
    if size < PARALLEL_MIN_ENTRIES:
        if size and (int(one_based.min()) < 1 or int(one_based.max()) > limit):
            return None
        return np.subtract(one_based, 1, dtype=dtype, casting="unsafe")
    kernel = importlib.import_module(f"{__package__}._indices").zero_based_range
    if one_based.dtype == np.uint64:  # (numba mixes UInt64 and Int64 in floats; past Int64 wraps: out of range)
        one_based = one_based.view(np.int64)
    out = np.empty(size, dtype=dtype)
    in_range: list[bool] = []  # (appends are atomic)
    run_ranges(lambda first, last: in_range.append(kernel(first, last, one_based, limit, out)),
               even_bounds(size, threads_for(size)))
    return out if all(in_range) else None


def zero_based_csc(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """New 0-based copies of the ``rowval`` and ``colptr`` of a 1-based CSC matrix, of one type scipy accepts
    (``int32`` when the shape and the number of entries fit, as scipy chooses; one type for both, or scipy would convert
    one again), each made in one pass that also checks its range (scipy itself does not check indices, and indexes
    memory with them); a :class:`~pydaf.DafValueError` if any is out of range.

    Example:
        >>> zero_based_csc((2, 2), np.array([1, 2, 2]), np.array([2]))
        (array([1], dtype=int32), array([0, 1, 1], dtype=int32))
    """
    nnz = rowval.shape[0]
    dtype = np.dtype(np.int32 if max(shape[0], nnz + 1) <= np.iinfo(np.int32).max else np.int64)
    rowval0 = zero_based_indices(rowval, shape[0], dtype)
    colptr0 = zero_based_indices(colptr, nnz + 1, dtype)
    if rowval0 is None or colptr0 is None or (colptr.shape[0] and (colptr0[0] != 0 or colptr0[-1] != nnz)):
        raise DafValueError(f"invalid 1-based CSC indices of a {shape[0]} x {shape[1]} sparse matrix with {nnz} stored "
                            f"entries: each of rowval must be in 1..{shape[0]}, colptr must go from 1 to {nnz + 1}")
    return rowval0, colptr0
