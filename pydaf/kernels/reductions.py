"""Parallel reductions of matrices as Daf stores them: 1-based Julia CSC (:class:`~pydaf.sparse.SparseMatrixCSC`, any
index and value types, possibly read-only and memory-mapped) and column-major dense numpy arrays.

Every reduction works on the stored arrays as they are: the CSC index arrays are never shifted to 0-based copies and
sparse matrices are never densified. The implicit zeros of a sparse matrix are values like any other (a column of 10
rows with 2 stored entries has 8 zeros, which count for ``mean``, ``var``, ``max``, ``median``, ...).

A reduction goes one of four *directions*:

``columns``
    one value per column (eliminates the rows; Julia's ``>-``), in parallel over the columns;
``rows``
    one value per row (eliminates the columns; Julia's ``>|``); for CSC each thread accumulates a chunk of columns
    into its own length-``n_rows`` buffer and the buffers are added up (no transpose);
``grouped rows``
    rows grouped by a 0-based group index per row (``-1``: skipped), one value per (group, column);
``grouped columns``
    columns grouped likewise, one value per (row, group).

The *statistics* are ``sum`` (integers accumulate in ``int64``/``uint64``, floats in ``float64``), ``mean``, ``var``
and ``std`` (uncorrected, two passes in ``float64``), ``geomean`` (``exp(mean(log(x + eps))) - eps``), ``max``,
``min`` (in the input type), ``median`` and ``quantile`` (Julia's ``Statistics.quantile``, ``float64``).

Inputs with fewer than :data:`NUMBA_THRESHOLD` values (dense) or stored entries (sparse) use plain numpy, so small
queries never wait for a compilation; larger ones use numba kernels, compiled on first use and cached on disk.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np

from ..sparse import SparseMatrixCSC
from .threads import number_of_threads, thread_pool

__all__ = [
    "NUMBA_THRESHOLD",
    "STATISTICS",
    "column_means",
    "column_sums",
    "group_members",
    "matrix_columns",
    "matrix_rows",
    "reduce_all",
    "reduce_columns",
    "reduce_grouped_columns",
    "reduce_grouped_rows",
    "reduce_grouped_vector",
    "reduce_rows",
    "reduce_vector",
    "row_means",
    "row_sums",
]

#: Below this many values (dense) or stored entries (sparse), numpy is used instead of the numba kernels.
NUMBA_THRESHOLD = 1 << 16

#: The statistics the reductions compute.
STATISTICS = ("sum", "mean", "var", "std", "geomean", "max", "min", "median", "quantile")

# Directions.
_COLUMNS, _ROWS, _GROUPED_ROWS, _GROUPED_COLUMNS = range(4)

# Float statistics of the ``fstat`` kernels.
_SQUARED_DEVIATIONS, _LOG_SUMS = 1, 2

# Values per chunk when a vector is reduced in chunks (bounding the temporaries).
_VECTOR_CHUNK = 1 << 20

# Rows per block when a dense matrix is reduced per row (the block's accumulators stay in the L1 cache).
_DENSE_ROW_BLOCK = 2048

# At most this many bytes of per-thread buffers: above it, per-row reductions use fewer threads and grouped columns are
# reduced one group per thread (into one shared buffer) instead.
_PRIVATE_BUFFERS_LIMIT = 1 << 30

Matrix = SparseMatrixCSC | np.ndarray


@cache
def _kernels() -> dict[str, Any]:  # pragma: no cover - compiled code is exercised through the public functions
    import numba

    # ``row_mode``: 0 = the target is the column's (accumulate in a register), 1 = target + row, 2 = target +
    # row_map[row] (skipping rows mapped to -1). ``col_map[column]`` is the column's base target (-1: skip it).
    # Chunks of ``col_order[bounds[c]:bounds[c + 1]]`` run in parallel, each into its own buffer ``out[c]``, or all
    # into ``out[0]`` when their targets are disjoint (``shared``).
    # Every kernel is serial over its parallel index range ``[first, last)``; :func:`_parallel` runs ranges of it on
    # a pool of Python threads (the kernels release the GIL). Loading ``parallel=True`` kernels from numba's cache costs
    # ~0.6-0.9 s each per process, which made the first query of a process take over a second.

    @numba.njit(cache=True, nogil=True)
    def csc_sum(first_chunk, last_chunk, colptr, rowval, nzval, row_mode, row_map, col_order, col_map, bounds, shared,
                out):
        for chunk in range(first_chunk, last_chunk):
            buffer = out[0] if shared else out[chunk]
            for position in range(bounds[chunk], bounds[chunk + 1]):
                column = col_order[position]
                target = col_map[column]
                if target < 0:
                    continue
                start = np.int64(colptr[column]) - 1
                stop = np.int64(colptr[column + 1]) - 1
                if row_mode == 0:
                    total = buffer[target]
                    for index in range(start, stop):
                        total += nzval[index]
                    buffer[target] = total
                elif row_mode == 1:
                    for index in range(start, stop):
                        buffer[target + np.int64(rowval[index]) - 1] += nzval[index]
                else:
                    for index in range(start, stop):
                        group = row_map[np.int64(rowval[index]) - 1]
                        if group >= 0:
                            buffer[target + group] += nzval[index]

    @numba.njit(cache=True, nogil=True)
    def csc_fstat(first_chunk, last_chunk, colptr, rowval, nzval, row_mode, row_map, col_order, col_map, bounds,
                  shared, stat, eps, center, out, counts):
        counting = counts.shape[1] > 0
        for chunk in range(first_chunk, last_chunk):
            buffer = out[0] if shared else out[chunk]
            counts_buffer = counts[0] if shared else counts[chunk]
            for position in range(bounds[chunk], bounds[chunk + 1]):
                column = col_order[position]
                base = col_map[column]
                if base < 0:
                    continue
                for index in range(np.int64(colptr[column]) - 1, np.int64(colptr[column + 1]) - 1):
                    if row_mode == 0:
                        target = base
                    elif row_mode == 1:
                        target = base + np.int64(rowval[index]) - 1
                    else:
                        group = row_map[np.int64(rowval[index]) - 1]
                        if group < 0:
                            continue
                        target = base + group
                    value = np.float64(nzval[index])
                    if stat == 1:
                        deviation = value - center[target]
                        buffer[target] += deviation * deviation
                    else:
                        buffer[target] += np.log(value + eps)
                    if counting:
                        counts_buffer[target] += 1

    @numba.njit(cache=True, nogil=True)
    def csc_extreme(first_chunk, last_chunk, colptr, rowval, nzval, row_mode, row_map, col_order, col_map, bounds,
                    shared, is_max, out, counts):
        counting = counts.shape[1] > 0
        for chunk in range(first_chunk, last_chunk):
            buffer = out[0] if shared else out[chunk]
            counts_buffer = counts[0] if shared else counts[chunk]
            for position in range(bounds[chunk], bounds[chunk + 1]):
                column = col_order[position]
                base = col_map[column]
                if base < 0:
                    continue
                for index in range(np.int64(colptr[column]) - 1, np.int64(colptr[column + 1]) - 1):
                    if row_mode == 0:
                        target = base
                    elif row_mode == 1:
                        target = base + np.int64(rowval[index]) - 1
                    else:
                        group = row_map[np.int64(rowval[index]) - 1]
                        if group < 0:
                            continue
                        target = base + group
                    value = nzval[index]
                    current = buffer[target]
                    # ``value != value`` is NaN: it wins and then stays, as Julia's maximum/minimum propagate it.
                    if (value > current if is_max else value < current) or value != value:
                        buffer[target] = value
                    if counting:
                        counts_buffer[target] += 1

    # Dense column-major kernels: ``row_mode`` 0 (per column) and 2 (grouped rows) run in parallel over the columns;
    # 1 (per row, or grouped columns) over blocks of rows, so each block's targets are disjoint.

    @numba.njit(cache=True, nogil=True)
    def dense_sum(first_index, last_index, matrix, row_mode, row_map, col_map, block, out):
        n_rows, n_columns = matrix.shape
        if row_mode == 1:
            for block_index in range(first_index, last_index):
                first = block_index * block
                last = min(first + block, n_rows)
                for column in range(n_columns):
                    base = col_map[column]
                    if base < 0:
                        continue
                    for row in range(first, last):
                        out[base + row] += matrix[row, column]
        else:
            for column in range(first_index, last_index):
                base = col_map[column]
                if base < 0:
                    continue
                if row_mode == 0:
                    total = out[base]
                    for row in range(n_rows):
                        total += matrix[row, column]
                    out[base] = total
                else:
                    for row in range(n_rows):
                        group = row_map[row]
                        if group >= 0:
                            out[base + group] += matrix[row, column]

    @numba.njit(cache=True, nogil=True)
    def dense_fstat(first_index, last_index, matrix, row_mode, row_map, col_map, block, stat, eps, center, out):
        n_rows, n_columns = matrix.shape
        if row_mode == 1:
            for block_index in range(first_index, last_index):
                first = block_index * block
                last = min(first + block, n_rows)
                for column in range(n_columns):
                    base = col_map[column]
                    if base < 0:
                        continue
                    for row in range(first, last):
                        value = np.float64(matrix[row, column])
                        if stat == 1:
                            deviation = value - center[base + row]
                            out[base + row] += deviation * deviation
                        else:
                            out[base + row] += np.log(value + eps)
        else:
            for column in range(first_index, last_index):
                base = col_map[column]
                if base < 0:
                    continue
                for row in range(n_rows):
                    if row_mode == 0:
                        target = base
                    else:
                        group = row_map[row]
                        if group < 0:
                            continue
                        target = base + group
                    value = np.float64(matrix[row, column])
                    if stat == 1:
                        deviation = value - center[target]
                        out[target] += deviation * deviation
                    else:
                        out[target] += np.log(value + eps)

    @numba.njit(cache=True, nogil=True)
    def dense_extreme(first_index, last_index, matrix, row_mode, row_map, col_map, block, is_max, out):
        n_rows, n_columns = matrix.shape
        if row_mode == 1:
            for block_index in range(first_index, last_index):
                first = block_index * block
                last = min(first + block, n_rows)
                for column in range(n_columns):
                    base = col_map[column]
                    if base < 0:
                        continue
                    for row in range(first, last):
                        value = matrix[row, column]
                        current = out[base + row]
                        if (value > current if is_max else value < current) or value != value:
                            out[base + row] = value
        else:
            for column in range(first_index, last_index):
                base = col_map[column]
                if base < 0:
                    continue
                for row in range(n_rows):
                    if row_mode == 0:
                        target = base
                    else:
                        group = row_map[row]
                        if group < 0:
                            continue
                        target = base + group
                    value = matrix[row, column]
                    current = out[target]
                    if (value > current if is_max else value < current) or value != value:
                        out[target] = value

    # Order statistics per column: the column's stored values sorted, with its implicit zeros between the negative
    # and the non-negative ones. ``first`` is the 0-based index of Julia's ``a = v[j]``, ``gamma`` its weight.
    # (No helper njit function here: a kernel calling another closure-defined kernel is never found in the cache.)
    @numba.njit(cache=True, nogil=True)
    def csc_columns_quantile(first_column, last_column, colptr, nzval, n_rows, is_median, first, gamma, out):
        for column in range(first_column, last_column):
            start = np.int64(colptr[column]) - 1
            stop = np.int64(colptr[column + 1]) - 1
            values = nzval[start:stop].copy()
            values.sort()
            n_negative = 0
            has_nan = False
            for index in range(values.shape[0]):
                if values[index] < 0:
                    n_negative += 1
                if values[index] != values[index]:
                    has_nan = True
            n_zeros = n_rows - (stop - start)
            if is_median:
                low_index = (n_rows - 1) // 2
                high_index = n_rows // 2
            else:
                low_index = first
                high_index = min(first + 1, n_rows - 1)
            low = 0.0
            high = 0.0
            for which in range(2):
                index = low_index if which == 0 else high_index
                if index < n_negative:
                    value = np.float64(values[index])
                elif index < n_negative + n_zeros:
                    value = 0.0
                else:
                    value = np.float64(values[index - n_zeros])
                if which == 0:
                    low = value
                else:
                    high = value
            if has_nan:
                out[column] = np.nan
            elif is_median:
                out[column] = low if n_rows % 2 == 1 else low / 2 + high / 2
            elif np.isfinite(low) and np.isfinite(high):
                out[column] = low + gamma * (high - low)
            else:
                out[column] = (1 - gamma) * low + gamma * high

    def csc_chunks(colptr, rowval, nzval, row_mode, row_map, col_order, col_map, bounds, *_):
        return bounds.shape[0] - 1

    def dense_indices(matrix, row_mode, row_map, col_map, block, *_):
        return (matrix.shape[0] + block - 1) // block if row_mode == 1 else matrix.shape[1]

    def quantile_columns(colptr, *_):
        return colptr.shape[0] - 1

    return {
        "csc_sum": _parallel(csc_sum, csc_chunks),
        "csc_fstat": _parallel(csc_fstat, csc_chunks),
        "csc_extreme": _parallel(csc_extreme, csc_chunks),
        "dense_sum": _parallel(dense_sum, dense_indices),
        "dense_fstat": _parallel(dense_fstat, dense_indices),
        "dense_extreme": _parallel(dense_extreme, dense_indices),
        "csc_columns_quantile": _parallel(csc_columns_quantile, quantile_columns),
    }


def _parallel(kernel: Any, count: Any) -> Any:
    """Run ``kernel(first, last, *arguments)`` over ``[0, count(*arguments))`` split in one contiguous range per
    thread, concurrently."""

    def run(*arguments: Any) -> None:
        total = int(count(*arguments))
        n_threads = min(number_of_threads(), total)
        if n_threads <= 1:
            kernel(0, total, *arguments)
            return
        edges = np.linspace(0, total, n_threads + 1).astype(np.int64).tolist()
        futures = [thread_pool().submit(kernel, edges[index], edges[index + 1], *arguments)
                   for index in range(n_threads)]
        for future in futures:
            future.result()

    return run


# Input normalization.


def _as_matrix(matrix: Any) -> Matrix:
    """A :class:`SparseMatrixCSC` or a 2-D numpy array (scipy sparse matrices are converted)."""
    if isinstance(matrix, SparseMatrixCSC):
        return matrix
    if hasattr(matrix, "tocsc") and hasattr(matrix, "nnz"):
        return SparseMatrixCSC.from_scipy(matrix)
    array = np.asarray(matrix)
    if array.ndim != 2:
        raise ValueError(f"not a matrix: an array of shape {array.shape}")
    return array


def _numeric_view(values: np.ndarray) -> np.ndarray:
    """Bool values as ``uint8`` (a zero-copy view), so kernels only ever see numbers."""
    if values.dtype == np.bool_:
        return values.view(np.uint8) if values.flags.c_contiguous or values.flags.f_contiguous \
            else values.astype(np.uint8)
    return values


def _kernel_values(values: np.ndarray) -> np.ndarray:
    """Values as a kernel takes them: numbers (Bool as ``uint8``) in a read-only view, so writable and read-only
    (mapped) inputs share one compiled specialization."""
    view = _numeric_view(values).view()
    view.flags.writeable = False
    return view


def _kernel_indices(indices: np.ndarray) -> np.ndarray:
    """1-based indices as a kernel takes them: a read-only view as ``uint32`` (32-bit; valid indices are positive, so
    an ``int32`` reads the same) or ``int64`` (64-bit; no index reaches 2**63), so all index types share two compiled
    specializations. Other sizes are rare and converted."""
    if indices.dtype.itemsize == 4 and indices.dtype.kind in "iu":
        view = indices.view(np.uint32)
    elif indices.dtype.itemsize == 8 and indices.dtype.kind in "iu":
        view = indices.view(np.int64)
    else:
        view = indices.astype(np.int64)
    view.flags.writeable = False
    return view


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    """The accumulation type of sums: ``int64`` for signed and Bool, ``uint64`` for unsigned, ``float64`` for floats
    (so a kernel never mixes signed and unsigned 64-bit arithmetic)."""
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    if dtype.kind in "ib":
        return np.dtype(np.int64)
    return np.dtype(np.float64)


def _extreme_identity(dtype: np.dtype, is_max: bool) -> Any:
    if dtype.kind == "f":
        return -np.inf if is_max else np.inf
    info = np.iinfo(dtype)
    return info.min if is_max else info.max


def _is_small(matrix: Matrix) -> bool:
    size = matrix.nnz if isinstance(matrix, SparseMatrixCSC) else matrix.size
    return size < NUMBA_THRESHOLD


def _matrix_values_dtype(matrix: Matrix) -> np.dtype:
    return matrix.nzval.dtype if isinstance(matrix, SparseMatrixCSC) else matrix.dtype


# The target space of a direction.


class _Targets:
    """Where each value of a matrix goes in a reduction, and how many values (zeros included) each target gets."""

    def __init__(self, shape: tuple[int, int], direction: int, groups: np.ndarray | None, n_groups: int) -> None:
        n_rows, n_columns = shape
        self.direction = direction
        self.n_rows, self.n_columns = n_rows, n_columns
        self.n_groups = n_groups
        if direction == _COLUMNS:
            self.n_targets = n_columns
            self.totals = np.full(n_columns, n_rows, dtype=np.int64)
        elif direction == _ROWS:
            self.n_targets = n_rows
            self.totals = np.full(n_rows, n_columns, dtype=np.int64)
        else:
            assert groups is not None
            self.groups = np.asarray(groups, dtype=np.int64)
            expected = n_rows if direction == _GROUPED_ROWS else n_columns
            if self.groups.shape != (expected,):
                raise ValueError(f"groups of length {self.groups.shape[0]} for {expected} "
                                 f"{'rows' if direction == _GROUPED_ROWS else 'columns'}")
            if self.groups.shape[0] and int(self.groups.max()) >= n_groups:
                raise ValueError(f"group index {int(self.groups.max())} for {n_groups} groups")
            sizes = np.bincount(self.groups[self.groups >= 0], minlength=n_groups).astype(np.int64)
            self.group_sizes = sizes
            self.n_targets = n_groups * (n_columns if direction == _GROUPED_ROWS else n_rows)
            # Targets are the column-major positions of the (n_groups x n_columns) or (n_rows x n_groups) result.
            self.totals = np.tile(sizes, n_columns) if direction == _GROUPED_ROWS else np.repeat(sizes, n_rows)

    def shape_result(self, values: np.ndarray) -> np.ndarray:
        if self.direction == _GROUPED_ROWS:
            return values.reshape((self.n_groups, self.n_columns), order="F")
        if self.direction == _GROUPED_COLUMNS:
            return values.reshape((self.n_rows, self.n_groups), order="F")
        return values

    def entry_targets(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The target of each (row, column) entry (-1: skipped)."""
        if self.direction == _COLUMNS:
            return columns
        if self.direction == _ROWS:
            return rows
        if self.direction == _GROUPED_ROWS:
            group = self.groups[rows]
            return np.where(group >= 0, group + columns * self.n_groups, -1)
        group = self.groups[columns]
        return np.where(group >= 0, rows + group * self.n_rows, -1)

    def kernel_maps(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``row_mode``, ``row_map`` and ``col_map`` of the kernels."""
        no_map = _kernel_indices(np.zeros(0, dtype=np.int64))
        if self.direction == _COLUMNS:
            return 0, no_map, np.arange(self.n_columns, dtype=np.int64)
        if self.direction == _ROWS:
            return 1, no_map, np.zeros(self.n_columns, dtype=np.int64)
        if self.direction == _GROUPED_ROWS:
            return 2, _kernel_indices(self.groups), np.arange(self.n_columns, dtype=np.int64) * self.n_groups
        return 1, no_map, np.where(self.groups >= 0, self.groups * self.n_rows, -1)


# Accumulation: one pass over the values, into one accumulator per target.


def _entries(matrix: Matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 0-based rows, columns and values of the stored entries of a small matrix (every entry of a dense one)."""
    n_rows, n_columns = matrix.shape
    if isinstance(matrix, SparseMatrixCSC):
        return matrix.rowval.astype(np.int64) - 1, matrix.entry_columns(), np.asarray(matrix.nzval)
    rows = np.tile(np.arange(n_rows, dtype=np.int64), n_columns)
    columns = np.repeat(np.arange(n_columns, dtype=np.int64), n_rows)
    return rows, columns, np.asarray(matrix).ravel(order="F")


def _accumulate(matrix: Matrix, targets: _Targets, kind: str, *, eps: float = 0.0,
                center: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per target: the ``sum`` (in :func:`_sum_dtype`), the sum of ``squares`` of deviations from ``center``, the sum
    of ``logs`` of ``value + eps`` (float64), or the ``max``/``min`` (input type, or its identity when no stored value);
    and the number of stored values (the totals, for dense matrices)."""
    dtype = _matrix_values_dtype(matrix)
    if kind == "sum":
        out_dtype = _sum_dtype(dtype)
        initial: Any = 0
    elif kind in ("squares", "logs"):
        out_dtype = np.dtype(np.float64)
        initial = 0.0
    else:
        out_dtype = np.dtype(np.uint8) if dtype == np.bool_ else dtype
        initial = _extreme_identity(out_dtype, kind == "max")
    is_sparse = isinstance(matrix, SparseMatrixCSC)
    if _is_small(matrix):
        return _accumulate_small(matrix, targets, kind, out_dtype, initial, eps, center)
    if is_sparse:
        return _accumulate_csc(matrix, targets, kind, out_dtype, initial, eps, center)
    return _accumulate_dense(matrix, targets, kind, out_dtype, initial, eps, center), targets.totals


def _accumulate_small(matrix: Matrix, targets: _Targets, kind: str, out_dtype: np.dtype, initial: Any, eps: float,
                      center: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    rows, columns, values = _entries(matrix)
    values = _numeric_view(values)
    entry_targets = targets.entry_targets(rows, columns)
    if targets.direction >= _GROUPED_ROWS:
        kept = entry_targets >= 0
        entry_targets, values = entry_targets[kept], values[kept]
    out = np.full(targets.n_targets, initial, dtype=out_dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "sum":
            np.add.at(out, entry_targets, values.astype(out_dtype))
        elif kind == "squares":
            assert center is not None
            deviations = values.astype(np.float64) - center[entry_targets]
            np.add.at(out, entry_targets, deviations * deviations)
        elif kind == "logs":
            np.add.at(out, entry_targets, np.log(values.astype(np.float64) + eps))
        elif kind == "max":
            np.maximum.at(out, entry_targets, values)
        else:
            np.minimum.at(out, entry_targets, values)
    if isinstance(matrix, SparseMatrixCSC):
        return out, np.bincount(entry_targets, minlength=targets.n_targets).astype(np.int64)
    return out, targets.totals


def _chunk_bounds(colptr: np.ndarray, n_chunks: int) -> np.ndarray:
    """Split the columns into ``n_chunks`` runs holding about the same number of stored entries."""
    n_columns = colptr.shape[0] - 1
    nnz = int(colptr[-1]) - 1
    n_chunks = max(1, min(n_chunks, n_columns))
    wanted = np.linspace(1, nnz + 1, n_chunks + 1)
    bounds = np.searchsorted(colptr, wanted, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_columns
    return np.maximum.accumulate(np.minimum(bounds, n_columns))


def _accumulate_csc(matrix: SparseMatrixCSC, targets: _Targets, kind: str, out_dtype: np.dtype, initial: Any,
                    eps: float, center: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    kernels = _kernels()
    n_threads = number_of_threads()
    row_mode, row_map, col_map = targets.kernel_maps()
    n_columns = targets.n_columns
    col_order = np.arange(n_columns, dtype=np.int64)
    shared = targets.direction in (_COLUMNS, _GROUPED_ROWS)
    buffer_bytes = targets.n_targets * (out_dtype.itemsize + (8 if kind != "sum" else 0))
    if shared:
        bounds = _chunk_bounds(matrix.colptr, 8 * n_threads)
    elif targets.direction == _ROWS:
        bounds = _chunk_bounds(matrix.colptr, min(n_threads, max(1, _PRIVATE_BUFFERS_LIMIT // max(buffer_bytes, 1))))
    elif n_threads * buffer_bytes <= _PRIVATE_BUFFERS_LIMIT:
        bounds = _chunk_bounds(matrix.colptr, n_threads)
    else:
        # Too many targets for a buffer per thread: one group of columns per chunk, all into one buffer.
        shared = True
        col_order = np.argsort(targets.groups, kind="stable").astype(np.int64)
        sorted_groups = targets.groups[col_order]
        col_order = col_order[sorted_groups >= 0]
        sorted_groups = sorted_groups[sorted_groups >= 0]
        bounds = np.searchsorted(sorted_groups, np.arange(targets.n_groups + 1)).astype(np.int64)
    n_buffers = 1 if shared else bounds.shape[0] - 1
    out = np.full((n_buffers, targets.n_targets), initial, dtype=out_dtype)
    counting = kind != "sum" and targets.direction != _COLUMNS
    counts = np.zeros((n_buffers, targets.n_targets if counting else 0), dtype=np.int64)
    common = (_kernel_indices(matrix.colptr), _kernel_indices(matrix.rowval), _kernel_values(matrix.nzval), row_mode,
              row_map, col_order, col_map, bounds, shared)
    if kind == "sum":
        kernels["csc_sum"](*common, out)
    elif kind in ("squares", "logs"):
        stat = _SQUARED_DEVIATIONS if kind == "squares" else _LOG_SUMS
        center_values = center if center is not None else np.zeros(0, dtype=np.float64)
        kernels["csc_fstat"](*common, stat, float(eps), center_values, out, counts)
    else:
        kernels["csc_extreme"](*common, kind == "max", out, counts)
    if n_buffers == 1:
        result = out[0]
    elif kind == "sum" or kind in ("squares", "logs"):
        result = out.sum(axis=0, dtype=out_dtype)
    else:
        result = out.max(axis=0) if kind == "max" else out.min(axis=0)
    if counting:
        stored = counts[0] if n_buffers == 1 else counts.sum(axis=0)
    elif targets.direction == _COLUMNS:
        stored = np.diff(matrix.colptr.astype(np.int64))
    else:
        stored = np.zeros(0, dtype=np.int64)  # Not needed for sums.
    return result, stored


def _accumulate_dense(matrix: np.ndarray, targets: _Targets, kind: str, out_dtype: np.dtype, initial: Any,
                      eps: float, center: np.ndarray | None) -> np.ndarray:
    kernels = _kernels()
    row_mode, row_map, col_map = targets.kernel_maps()
    out = np.full(targets.n_targets, initial, dtype=out_dtype)
    values = _kernel_values(matrix)
    if kind == "sum":
        kernels["dense_sum"](values, row_mode, row_map, col_map, _DENSE_ROW_BLOCK, out)
    elif kind in ("squares", "logs"):
        stat = _SQUARED_DEVIATIONS if kind == "squares" else _LOG_SUMS
        center_values = center if center is not None else np.zeros(0, dtype=np.float64)
        kernels["dense_fstat"](values, row_mode, row_map, col_map, _DENSE_ROW_BLOCK, stat, float(eps), center_values,
                               out)
    else:
        kernels["dense_extreme"](values, row_mode, row_map, col_map, _DENSE_ROW_BLOCK, kind == "max", out)
    return out


# Statistics from accumulations.


def _statistic(matrix: Matrix, targets: _Targets, statistic: str, eps: float, p: float | None) -> np.ndarray:
    """One value per target (before reshaping grouped results)."""
    totals = targets.totals
    is_sparse = isinstance(matrix, SparseMatrixCSC)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if statistic == "sum":
            return _accumulate(matrix, targets, "sum")[0]
        if statistic == "mean":
            sums = _accumulate(matrix, targets, "sum")[0]
            return sums.astype(np.float64) / totals
        if statistic in ("var", "std"):
            variances = _variances(matrix, targets)
            return np.sqrt(variances) if statistic == "std" else variances
        if statistic == "geomean":
            logs, stored = _accumulate(matrix, targets, "logs", eps=eps)
            if is_sparse:
                implicit = totals - stored
                logs = logs + np.where(implicit > 0, implicit * math.log(eps) if eps > 0 else -np.inf, 0.0)
            return np.exp(logs / totals) - eps
        if statistic in ("max", "min"):
            extremes, stored = _accumulate(matrix, targets, statistic)
            if is_sparse:
                has_zeros = stored < totals
                zero = extremes.dtype.type(0)
                combine = np.maximum if statistic == "max" else np.minimum
                extremes = np.where(has_zeros, combine(extremes, zero), extremes)
            return extremes.astype(np.bool_) if _matrix_values_dtype(matrix) == np.bool_ else extremes
        if statistic in ("median", "quantile"):
            return _order_statistics(matrix, targets, statistic == "median", p)
    raise ValueError(f"unknown statistic: {statistic} (expected one of: {', '.join(STATISTICS)})")


def _variances(matrix: Matrix, targets: _Targets) -> np.ndarray:
    """Uncorrected variances in two passes (the mean, then the squared deviations from it), as Julia computes them
    (one pass of sums of squares loses precision when the mean is large)."""
    totals = targets.totals
    means = _accumulate(matrix, targets, "sum")[0].astype(np.float64) / totals
    squares, stored = _accumulate(matrix, targets, "squares", center=np.nan_to_num(means))
    if isinstance(matrix, SparseMatrixCSC):
        squares = squares + (totals - stored) * means * means
    return squares / totals


# Order statistics (median, quantile).


def _quantile_position(n: int, p: float) -> tuple[int, float]:
    """Julia's ``Statistics.quantile`` (type 7): the 0-based index of ``a = v[j]`` and the weight ``γ`` of ``v[j+1]``,
    with ``aleph = fma(n, p, 1 - p)`` computed exactly (so results match Julia to the bit)."""
    m = 1.0 + p * (1.0 - 1.0 - 1.0)
    aleph = float(Fraction(n) * Fraction(p) + Fraction(m))
    j = min(max(math.trunc(aleph), 1), n - 1)
    gamma = min(max(aleph - j, 0.0), 1.0)
    return max(j - 1, 0), gamma


def _interpolate(low: np.ndarray, high: np.ndarray, gamma: np.ndarray | float) -> np.ndarray:
    finite = np.isfinite(low) & np.isfinite(high)
    return np.where(finite, low + gamma * (high - low), (1 - gamma) * low + gamma * high)


def _order_statistics(matrix: Matrix, targets: _Targets, is_median: bool, p: float | None) -> np.ndarray:
    if not is_median and p is None:
        raise ValueError("the quantile statistic needs p")
    quantile = 0.5 if p is None else float(p)
    direction = targets.direction
    if not _is_small(matrix) and direction in (_COLUMNS, _ROWS):
        return _order_statistics_numba(matrix, targets, is_median, quantile)
    return _order_statistics_numpy(matrix, targets, is_median, quantile)


def _order_statistics_numba(matrix: Matrix, targets: _Targets, is_median: bool, p: float) -> np.ndarray:
    if targets.direction == _ROWS:
        if isinstance(matrix, SparseMatrixCSC):
            # Kernel-typed inputs, so every index and value type shares one compiled transpose.
            matrix = SparseMatrixCSC(matrix.shape, _kernel_indices(matrix.colptr), _kernel_indices(matrix.rowval),
                                     _kernel_values(matrix.nzval)).transpose()
        else:
            matrix = np.ascontiguousarray(matrix).T
    if not isinstance(matrix, SparseMatrixCSC):
        # A dense matrix is a CSC whose every entry is stored (no implicit zeros); its index arrays are implied.
        n_rows, n_columns = matrix.shape
        colptr = 1 + n_rows * np.arange(n_columns + 1, dtype=np.int64)
        nzval = np.asfortranarray(matrix).ravel(order="F")
    else:
        n_rows = matrix.shape[0]
        colptr, nzval = matrix.colptr, matrix.nzval
    first, gamma = _quantile_position(n_rows, p) if n_rows > 0 else (0, 0.0)
    out = np.empty(colptr.shape[0] - 1, dtype=np.float64)
    _kernels()["csc_columns_quantile"](_kernel_indices(colptr), _kernel_values(nzval), n_rows, is_median, first, gamma,
                                       out)
    return out


def _order_statistics_numpy(matrix: Matrix, targets: _Targets, is_median: bool, p: float) -> np.ndarray:
    """Order statistics of any direction: sort the (target, value) pairs, then pick each target's statistic, placing
    its implicit zeros between its negative and non-negative stored values."""
    rows, columns, values = _entries(matrix)
    entry_targets = targets.entry_targets(rows, columns)
    kept = entry_targets >= 0
    entry_targets, values = entry_targets[kept], _numeric_view(values)[kept].astype(np.float64)
    order = np.lexsort((values, entry_targets))
    values = values[order]
    n_targets = targets.n_targets
    stored = np.bincount(entry_targets, minlength=n_targets).astype(np.int64)
    starts = np.cumsum(stored) - stored
    sorted_targets = entry_targets[order]
    negatives = np.bincount(sorted_targets[values < 0], minlength=n_targets).astype(np.int64)
    nans = np.bincount(sorted_targets[np.isnan(values)], minlength=n_targets) > 0
    totals = targets.totals
    zeros = totals - stored

    def statistic_at(index: np.ndarray) -> np.ndarray:
        in_negatives = index < negatives
        in_zeros = ~in_negatives & (index < negatives + zeros)
        position = np.where(in_negatives, index, index - zeros)
        position = np.clip(starts + position, 0, max(values.shape[0] - 1, 0))
        picked = values[position] if values.shape[0] else np.zeros(n_targets)
        return np.where(in_zeros, 0.0, picked)

    result = np.full(n_targets, np.nan)
    valid = totals > 0
    with np.errstate(invalid="ignore", over="ignore"):
        if is_median:
            half = totals // 2
            odd = totals % 2 == 1
            low = statistic_at(np.where(odd, half, np.maximum(half - 1, 0)))
            high = statistic_at(half)
            result = np.where(odd, low, low / 2 + high / 2)
        else:
            first = np.zeros(n_targets, dtype=np.int64)
            gamma = np.zeros(n_targets, dtype=np.float64)
            for n in np.unique(totals[valid]):
                first_n, gamma_n = _quantile_position(int(n), p)
                first[totals == n], gamma[totals == n] = first_n, gamma_n
            low = statistic_at(first)
            high = statistic_at(np.minimum(first + 1, np.maximum(totals - 1, 0)))
            result = _interpolate(low, high, gamma)
    result = np.where(nans, np.nan, result)
    return np.where(valid, result, np.nan)


# Directions.


def _reduce(matrix: Any, statistic: str, direction: int, groups: np.ndarray | None = None, n_groups: int = 0, *,
            eps: float = 0.0, p: float | None = None) -> np.ndarray:
    matrix = _as_matrix(matrix)
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic: {statistic} (expected one of: {', '.join(STATISTICS)})")
    if not isinstance(matrix, SparseMatrixCSC) and not matrix.flags.f_contiguous:
        if matrix.flags.c_contiguous:
            # A row-major matrix is the column-major layout of its transpose: reduce that the other way.
            swapped = {_COLUMNS: _ROWS, _ROWS: _COLUMNS, _GROUPED_ROWS: _GROUPED_COLUMNS,
                       _GROUPED_COLUMNS: _GROUPED_ROWS}[direction]
            result = _reduce(matrix.T, statistic, swapped, groups, n_groups, eps=eps, p=p)
            return np.asfortranarray(result.T) if result.ndim == 2 else result
        matrix = np.asfortranarray(matrix)
    targets = _Targets(matrix.shape, direction, groups, n_groups)
    return targets.shape_result(_statistic(matrix, targets, statistic, eps, p))


def reduce_columns(matrix: Any, statistic: str, *, eps: float = 0.0, p: float | None = None) -> np.ndarray:
    """One value per column (reducing the rows away; Julia's ``>-``) of a 1-based CSC or column-major matrix.

    ``statistic`` is one of :data:`STATISTICS`; ``eps`` is for ``geomean``, ``p`` for ``quantile``. Sums are
    ``int64``/``uint64``/``float64``, ``max``/``min`` keep the input type, the rest are ``float64``.

    Example:
        >>> m = SparseMatrixCSC((3, 2), np.array([1, 2, 4], np.uint32), np.array([2, 1, 3], np.uint32),
        ...                     np.array([4, 1, 5], np.uint16))
        >>> m.to_dense().tolist()
        [[0, 1], [4, 0], [0, 5]]
        >>> reduce_columns(m, "sum").tolist(), reduce_columns(m, "max").tolist(), reduce_columns(m, "median").tolist()
        ([4, 6], [4, 5], [0.0, 1.0])
    """
    return _reduce(matrix, statistic, _COLUMNS, eps=eps, p=p)


def reduce_rows(matrix: Any, statistic: str, *, eps: float = 0.0, p: float | None = None) -> np.ndarray:
    """One value per row (reducing the columns away; Julia's ``>|``); see :func:`reduce_columns`.

    Example:
        >>> reduce_rows(np.array([[1.0, 3.0], [2.0, 6.0]], order="F"), "mean").tolist()
        [2.0, 4.0]
    """
    return _reduce(matrix, statistic, _ROWS, eps=eps, p=p)


def reduce_grouped_rows(matrix: Any, statistic: str, groups: np.ndarray, n_groups: int, *, eps: float = 0.0,
                        p: float | None = None) -> np.ndarray:
    """Reduce the rows of each group: ``groups[row]`` is the row's 0-based group (-1: ignored). The result is a
    column-major ``n_groups x n_columns`` matrix (Julia's ``-/ group >- Op``); empty groups give ``0`` sums and
    ``NaN`` means.

    Example:
        >>> m = np.array([[1, 2], [3, 4], [5, 6]], order="F")
        >>> reduce_grouped_rows(m, "sum", np.array([0, 1, 0]), 2).tolist()
        [[6, 8], [3, 4]]
    """
    return _reduce(matrix, statistic, _GROUPED_ROWS, groups, n_groups, eps=eps, p=p)


def reduce_grouped_columns(matrix: Any, statistic: str, groups: np.ndarray, n_groups: int, *, eps: float = 0.0,
                           p: float | None = None) -> np.ndarray:
    """Reduce the columns of each group: ``groups[column]`` is the column's 0-based group (-1: ignored). The result
    is a column-major ``n_rows x n_groups`` matrix (Julia's ``|/ group >| Op``).

    Example:
        >>> m = np.array([[1, 2, 3], [4, 5, 6]], order="F")
        >>> reduce_grouped_columns(m, "max", np.array([1, 0, 1]), 2).tolist()
        [[2, 3], [5, 6]]
    """
    return _reduce(matrix, statistic, _GROUPED_COLUMNS, groups, n_groups, eps=eps, p=p)


def reduce_all(matrix: Any, statistic: str, *, eps: float = 0.0, p: float | None = None) -> Any:
    """One value for the whole matrix (Julia's ``>>`` on a matrix), as a numpy scalar.

    Example:
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 2]), np.array([2]), np.array([3.0]))
        >>> float(reduce_all(m, "mean")), float(reduce_all(m, "var"))
        (0.75, 1.6875)
    """
    matrix = _as_matrix(matrix)
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic: {statistic} (expected one of: {', '.join(STATISTICS)})")
    n_rows, n_columns = matrix.shape
    size = n_rows * n_columns
    if statistic in ("median", "quantile"):
        return _order_statistics_of_all(matrix, statistic == "median", p)
    if not isinstance(matrix, SparseMatrixCSC):
        if size == 0 or 1 in matrix.shape:
            return reduce_vector(matrix.reshape(-1), statistic, eps=eps, p=p)
        # The order of the values does not matter here: a row-major matrix is reduced as its (column-major) transpose.
        matrix = matrix.T if matrix.flags.c_contiguous and not matrix.flags.f_contiguous else np.asfortranarray(matrix)
    elif size == 0:
        return reduce_vector(np.zeros(0, dtype=matrix.nzval.dtype), statistic, eps=eps, p=p)
    targets = _Targets(matrix.shape, _COLUMNS, None, 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if statistic in ("sum", "mean"):
            sums = _accumulate(matrix, targets, "sum")[0]
            total = sums.sum(dtype=sums.dtype)
            return total if statistic == "sum" else np.float64(float(total) / size)
        if statistic in ("max", "min"):
            extremes = _statistic(matrix, targets, statistic, eps, p)
            return extremes.max() if statistic == "max" else extremes.min()
        if statistic in ("var", "std"):
            return _reduce_all_variance(matrix, statistic == "std")
        logs = _accumulate(matrix, targets, "logs", eps=eps)[0]
        total_logs = float(logs.sum())
        if isinstance(matrix, SparseMatrixCSC) and size > matrix.nnz:
            total_logs += (size - matrix.nnz) * (math.log(eps) if eps > 0 else -math.inf)
        return np.float64(np.exp(total_logs / size) - eps)


def _reduce_all_variance(matrix: Matrix, is_std: bool) -> Any:
    n_rows, n_columns = matrix.shape
    size = n_rows * n_columns
    if size == 0:
        return np.float64(np.nan)
    mean = float(reduce_columns(matrix, "sum").sum()) / size
    targets = _Targets(matrix.shape, _COLUMNS, None, 0)
    squares, stored = _accumulate(matrix, targets, "squares", center=np.full(n_columns, mean))
    total = float(squares.sum())
    if isinstance(matrix, SparseMatrixCSC):
        total += float((targets.totals - stored).sum()) * mean * mean
    variance = np.float64(total / size)
    return np.sqrt(variance) if is_std else variance


def _order_statistics_of_all(matrix: Matrix, is_median: bool, p: float | None) -> Any:
    if isinstance(matrix, SparseMatrixCSC):
        values = np.sort(_numeric_view(matrix.nzval).astype(np.float64))
        n_zeros = matrix.shape[0] * matrix.shape[1] - matrix.nnz
    else:
        values = np.sort(_numeric_view(np.asarray(matrix)).astype(np.float64).ravel(order="K"))
        n_zeros = 0
    return _order_statistic_of_sorted(values, n_zeros, is_median, p)


def _order_statistic_of_sorted(values: np.ndarray, n_zeros: int, is_median: bool, p: float | None) -> np.float64:
    n = values.shape[0] + n_zeros
    if n == 0 or np.isnan(values).any():
        return np.float64(np.nan)
    n_negative = int(np.searchsorted(values, 0.0, side="left"))

    def at(index: int) -> float:
        if index < n_negative:
            return float(values[index])
        if index < n_negative + n_zeros:
            return 0.0
        return float(values[index - n_zeros])

    if is_median:
        half = n // 2
        return np.float64(at(half) if n % 2 == 1 else at(half - 1) / 2 + at(half) / 2)
    if p is None:
        raise ValueError("the quantile statistic needs p")
    first, gamma = _quantile_position(n, float(p))
    low, high = at(first), at(min(first + 1, n - 1))
    return np.float64(_interpolate(np.array(low), np.array(high), gamma))


def reduce_vector(values: np.ndarray, statistic: str, *, eps: float = 0.0, p: float | None = None) -> Any:
    """One value for a whole vector, as a numpy scalar (same statistics and types as :func:`reduce_columns`; an
    empty vector sums to zero and has a NaN anything else).

    A single vector is reduced by numpy (memory-bound; in chunks where a temporary would be as large as the vector).

    Example:
        >>> float(reduce_vector(np.array([1, 2, 3, 10]), "median"))
        2.5
        >>> reduce_vector(np.array([200, 100], np.uint8), "sum")
        np.uint64(300)
    """
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"not a vector: an array of shape {values.shape}")
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic: {statistic} (expected one of: {', '.join(STATISTICS)})")
    numbers = _numeric_view(values)
    size = numbers.shape[0]
    if statistic == "sum":
        return numbers.sum(dtype=_sum_dtype(values.dtype))
    if size == 0:
        return np.float64(np.nan)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if statistic in ("max", "min"):
            extreme = numbers.max() if statistic == "max" else numbers.min()
            return values.dtype.type(extreme)
        if statistic in ("median", "quantile"):
            return _order_statistic_of_sorted(np.sort(numbers.astype(np.float64)), 0, statistic == "median", p)
        mean = float(numbers.sum(dtype=np.float64)) / size
        if statistic == "mean":
            return np.float64(mean)
        total = 0.0
        for first in range(0, size, _VECTOR_CHUNK):
            chunk = numbers[first:first + _VECTOR_CHUNK].astype(np.float64)
            if statistic == "geomean":
                total += float(np.log(chunk + eps).sum())
            else:
                deviations = chunk - mean
                total += float(np.dot(deviations, deviations))
        if statistic == "geomean":
            return np.float64(np.exp(total / size) - eps)
        variance = total / size
        return np.float64(math.sqrt(variance) if statistic == "std" else variance)


def reduce_grouped_vector(values: np.ndarray, statistic: str, groups: np.ndarray, n_groups: int, *,
                          eps: float = 0.0, p: float | None = None) -> np.ndarray:
    """One value per group of a vector (``groups[i]``: the 0-based group of ``values[i]``, -1 to ignore it).

    Example:
        >>> reduce_grouped_vector(np.array([1.0, 2.0, 4.0]), "mean", np.array([0, 1, 0]), 2).tolist()
        [2.5, 2.0]
    """
    return reduce_grouped_rows(np.asarray(values).reshape((-1, 1)), statistic, groups, n_groups,
                               eps=eps, p=p)[:, 0]


def column_sums(matrix: Any) -> np.ndarray:
    """The sum of each column (``int64``, ``uint64`` or ``float64``), e.g. of a mapped ``get_stored_matrix``.

    Example:
        >>> column_sums(np.array([[1, 2], [3, 4]], np.uint8, order="F")).tolist()
        [4, 6]
    """
    return reduce_columns(matrix, "sum")


def row_sums(matrix: Any) -> np.ndarray:
    """The sum of each row (``int64``, ``uint64`` or ``float64``); for CSC, without transposing it.

    Example:
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 4]), np.array([1, 1, 2]), np.array([1.5, 2.0, 3.0]))
        >>> row_sums(m).tolist()
        [3.5, 3.0]
    """
    return reduce_rows(matrix, "sum")


def column_means(matrix: Any) -> np.ndarray:
    """The mean of each column (``float64``; the implicit zeros of a sparse matrix count).

    Example:
        >>> m = SparseMatrixCSC((4, 1), np.array([1, 2]), np.array([3]), np.array([8], np.int32))
        >>> column_means(m).tolist()
        [2.0]
    """
    return reduce_columns(matrix, "mean")


def row_means(matrix: Any) -> np.ndarray:
    """The mean of each row (``float64``).

    Example:
        >>> row_means(np.array([[1, 2], [3, 5]], order="F")).tolist()
        [1.5, 4.0]
    """
    return reduce_rows(matrix, "mean")


# Helpers for generic (per column / row / group) implementations.


def group_members(groups: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """The 0-based members of each group, in order (entries of group -1 are in none).

    Example:
        >>> [members.tolist() for members in group_members(np.array([1, -1, 0, 1]), 3)]
        [[2], [0, 3], []]
    """
    groups = np.asarray(groups, dtype=np.int64)
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    bounds = np.searchsorted(sorted_groups, np.arange(n_groups + 1))
    return [order[bounds[group]:bounds[group + 1]] for group in range(n_groups)]


def matrix_columns(matrix: Any) -> Iterator[np.ndarray]:
    """Each column of a matrix as a dense vector (sparse columns are densified one at a time).

    Example:
        >>> [column.tolist() for column in matrix_columns(np.array([[1, 2], [3, 4]], order="F"))]
        [[1, 3], [2, 4]]
    """
    matrix = _as_matrix(matrix)
    if isinstance(matrix, SparseMatrixCSC):
        return (matrix.column(column) for column in range(matrix.shape[1]))
    return (matrix[:, column] for column in range(matrix.shape[1]))


def matrix_rows(matrix: Any) -> Iterator[np.ndarray]:
    """Each row of a matrix as a dense vector (a sparse matrix is transposed once, then densified row by row).

    Example:
        >>> [row.tolist() for row in matrix_rows(np.array([[1, 2], [3, 4]], order="F"))]
        [[1, 2], [3, 4]]
    """
    matrix = _as_matrix(matrix)
    if isinstance(matrix, SparseMatrixCSC):
        return matrix_columns(matrix.transpose())
    return (matrix[row, :] for row in range(matrix.shape[0]))
