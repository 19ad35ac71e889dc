"""numba reduction kernels on a dense column-major matrix (as Daf stores it; read-only, memory-mapped).

Each kernel works on a rectangle ``matrix[row0:row0 + n_rows, col0:col0 + n_columns]`` (the whole stored matrix
is passed, so the kernels see one array type and compile once per element type) and releases the GIL;
:func:`pydaf.kernels.threads.run_ranges` runs rectangles of it on the shared pool of threads.

The accumulating kernels (:func:`sums`, :func:`squared_deviations`, :func:`extremes`) work in any direction: the
target of the value at rectangle position ``(r, c)`` follows ``row_mode`` (see
:data:`pydaf.kernels._shared.PER_COLUMN`) with ``col_map[c]`` and ``row_map[r]`` (both indexed within the
rectangle), and ``col_map[c] + row_offset + r`` per row. Per row, the rows go in blocks of ``block`` whose
accumulators stay in cache while the block of every column streams through them (a SIMD map, no scatter).

The ``column_*``/``row_*`` kernels compute one statistic per column (or per row) directly.
Inner loops run over 0-based views of a column so that LLVM vectorizes them (docs/design/kernels.md).
"""

from __future__ import annotations

import numba
import numpy as np

from ._shared import (
    PER_COLUMN,
    PER_ROW,
    SUM_FASTMATH,
    extreme_key,
    mean_and_variance,
    mode_of,
    mode_table,
    order_statistic,
)

__all__ = ["column_extremes", "column_modes", "column_quantiles", "column_variances", "extremes", "row_modes",
           "row_quantiles", "squared_deviations", "sums"]


@numba.njit(inline="always")
def _run_width(col_map, column, n_columns):  # pragma: no cover - jit
    # How many columns from this one (up to 4) share its targets: per row, 4 columns are added to the accumulators
    # at once, which quarters their load/store traffic (the accumulators, not the data, bound the per-row pass).
    base = col_map[column]
    width = 1
    while width < 4 and column + width < n_columns and col_map[column + width] == base:
        width += 1
    return width


@numba.njit(cache=True, nogil=True, fastmath=SUM_FASTMATH)
def sums(matrix, row0, col0, n_rows, n_columns, row_mode, row_map, col_map, row_offset, block,
         out):  # pragma: no cover - jit
    """Add each value into its target (integers in ``int64``/``uint64``, floats in ``float64``)."""
    if row_mode == PER_ROW:
        for block_start in range(0, n_rows, block):
            block_stop = min(block_start + block, n_rows)
            first_row, last_row = row0 + block_start, row0 + block_stop
            column = 0
            while column < n_columns:
                base = col_map[column]
                width = _run_width(col_map, column, n_columns)
                if base >= 0:
                    targets = out[base + row_offset + block_start:base + row_offset + block_stop]
                    if width == 4:
                        first = matrix[first_row:last_row, col0 + column]
                        second = matrix[first_row:last_row, col0 + column + 1]
                        third = matrix[first_row:last_row, col0 + column + 2]
                        fourth = matrix[first_row:last_row, col0 + column + 3]
                        for row in range(targets.shape[0]):
                            targets[row] = targets[row] + first[row] + second[row] + third[row] + fourth[row]
                    else:
                        for offset in range(width):
                            values = matrix[first_row:last_row, col0 + column + offset]
                            for row in range(targets.shape[0]):
                                targets[row] += values[row]
                column += width
        return
    for column in range(n_columns):
        base = col_map[column]
        if base < 0:
            continue
        values = matrix[row0:row0 + n_rows, col0 + column]
        if row_mode == PER_COLUMN:
            total = out[base]
            for row in range(values.shape[0]):
                total += values[row]
            out[base] = total
        else:
            for row in range(values.shape[0]):
                group = row_map[row]
                if group >= 0:
                    out[base + group] += values[row]


@numba.njit(cache=True, nogil=True, fastmath=SUM_FASTMATH)
def squared_deviations(matrix, row0, col0, n_rows, n_columns, row_mode, row_map, col_map, row_offset, block, centers,
                       out):  # pragma: no cover - jit
    """Add the square of each value's deviation from its target's center (in ``float64``)."""
    if row_mode == PER_ROW:
        for block_start in range(0, n_rows, block):
            block_stop = min(block_start + block, n_rows)
            first_row, last_row = row0 + block_start, row0 + block_stop
            column = 0
            while column < n_columns:
                base = col_map[column]
                width = _run_width(col_map, column, n_columns)
                if base >= 0:
                    first = base + row_offset + block_start
                    targets = out[first:first + block_stop - block_start]
                    target_centers = centers[first:first + block_stop - block_start]
                    if width == 4:
                        values0 = matrix[first_row:last_row, col0 + column]
                        values1 = matrix[first_row:last_row, col0 + column + 1]
                        values2 = matrix[first_row:last_row, col0 + column + 2]
                        values3 = matrix[first_row:last_row, col0 + column + 3]
                        for row in range(targets.shape[0]):
                            center = target_centers[row]
                            deviation0 = np.float64(values0[row]) - center
                            deviation1 = np.float64(values1[row]) - center
                            deviation2 = np.float64(values2[row]) - center
                            deviation3 = np.float64(values3[row]) - center
                            targets[row] += (deviation0 * deviation0 + deviation1 * deviation1
                                             + deviation2 * deviation2 + deviation3 * deviation3)
                    else:
                        for offset in range(width):
                            values = matrix[first_row:last_row, col0 + column + offset]
                            for row in range(targets.shape[0]):
                                deviation = np.float64(values[row]) - target_centers[row]
                                targets[row] += deviation * deviation
                column += width
        return
    for column in range(n_columns):
        base = col_map[column]
        if base < 0:
            continue
        values = matrix[row0:row0 + n_rows, col0 + column]
        if row_mode == PER_COLUMN:
            center = centers[base]
            total = out[base]
            for row in range(values.shape[0]):
                deviation = np.float64(values[row]) - center
                total += deviation * deviation
            out[base] = total
        else:
            for row in range(values.shape[0]):
                group = row_map[row]
                if group >= 0:
                    deviation = np.float64(values[row]) - centers[base + group]
                    out[base + group] += deviation * deviation


@numba.njit(inline="always")
def _better(current, value, is_max):  # pragma: no cover - jit
    # The extreme of the two; a NaN value wins (and then stays: nothing compares larger or smaller than it).
    if is_max:
        return value if (value > current or value != value) else current
    return value if (value < current or value != value) else current


@numba.njit(cache=True, nogil=True)
def extremes(matrix, row0, col0, n_rows, n_columns, row_mode, row_map, col_map, row_offset, block, is_max,
             out):  # pragma: no cover - jit
    """Keep the largest (``is_max``) or smallest value of each target; a NaN wins and then stays, as Julia's
    ``maximum``/``minimum`` propagate it. (Per column, :func:`column_extremes` is the vectorized form.)"""
    if row_mode == PER_ROW:
        for block_start in range(0, n_rows, block):
            block_stop = min(block_start + block, n_rows)
            first_row, last_row = row0 + block_start, row0 + block_stop
            column = 0
            while column < n_columns:
                base = col_map[column]
                width = _run_width(col_map, column, n_columns)
                if base >= 0:
                    first = base + row_offset + block_start
                    targets = out[first:first + block_stop - block_start]
                    if width == 4:
                        values0 = matrix[first_row:last_row, col0 + column]
                        values1 = matrix[first_row:last_row, col0 + column + 1]
                        values2 = matrix[first_row:last_row, col0 + column + 2]
                        values3 = matrix[first_row:last_row, col0 + column + 3]
                        for row in range(targets.shape[0]):
                            targets[row] = _better(_better(_better(_better(targets[row], values0[row], is_max),
                                                                   values1[row], is_max), values2[row], is_max),
                                                   values3[row], is_max)
                    else:
                        for offset in range(width):
                            values = matrix[first_row:last_row, col0 + column + offset]
                            for row in range(targets.shape[0]):
                                targets[row] = _better(targets[row], values[row], is_max)
                column += width
        return
    for column in range(n_columns):
        base = col_map[column]
        if base < 0:
            continue
        values = matrix[row0:row0 + n_rows, col0 + column]
        for row in range(values.shape[0]):
            if row_mode == PER_COLUMN:
                target = base
            else:
                group = row_map[row]
                if group < 0:
                    continue
                target = base + group
            value = values[row]
            current = out[target]
            if (value > current if is_max else value < current) or value != value:
                out[target] = value


@numba.njit(cache=True, nogil=True)
def column_extremes(first_column, last_column, values, keys, is_float, sign_shift, magnitude, is_max, out_keys,
                    nans):  # pragma: no cover - jit
    """The largest (``is_max``) or smallest value of each column as an :func:`~._shared.ordered_key` of ``keys``
    (the integer view of float ``values``; for integers the values themselves, with ``is_float`` false), and the
    number of its NaNs. Comparing integers keeps the loop in SIMD lanes."""
    for column in range(first_column, last_column):
        out_keys[column], nans[column] = extreme_key(values[:, column], keys[:, column], is_float, sign_shift,
                                                     magnitude, is_max, out_keys[column])


@numba.njit(cache=True, nogil=True, fastmath=SUM_FASTMATH)
def column_variances(first_column, last_column, matrix, means, variances):  # pragma: no cover - jit
    """The mean and the (uncorrected) variance of each column: the sum, then the squared deviations from the mean
    while the column is still in cache (two passes, as Julia's ``var``, for the memory traffic of one)."""
    for column in range(first_column, last_column):
        means[column], variances[column] = mean_and_variance(matrix[:, column], matrix.shape[0])


@numba.njit(cache=True, nogil=True)
def column_quantiles(first_column, last_column, matrix, is_median, first, gamma, out):  # pragma: no cover - jit
    """The median (or the quantile at Julia's 0-based index ``first`` with weight ``gamma``) of each column, by
    selection in a copy of the column (NaN if it has a NaN). The copy keeps the values' type (selection compares, which
    any conversion to ``Float64`` keeps in order; only the statistic is computed in ``Float64``): half the bytes to
    reorder for ``Float32``."""
    n_rows = matrix.shape[0]
    buffer = np.empty(n_rows, dtype=matrix.dtype)
    for column in range(first_column, last_column):
        values = matrix[:, column]
        has_nan = False
        for row in range(n_rows):
            value = values[row]
            buffer[row] = value
            has_nan |= value != value
        out[column] = np.nan if has_nan else order_statistic(buffer, n_rows, 0, 0, is_median, first, gamma)


@numba.njit(inline="always")
def _copy_rows(matrix, block_start, block_stop, buffer):  # pragma: no cover - jit
    # The rows [block_start, block_stop) into a row-major buffer, each column's part read contiguously.
    for column in range(matrix.shape[1]):
        values = matrix[block_start:block_stop, column]
        for row in range(values.shape[0]):
            buffer[row, column] = values[row]


@numba.njit(cache=True, nogil=True)
def row_quantiles(first_row, last_row, matrix, block, is_median, first, gamma, out):  # pragma: no cover - jit
    """:func:`column_quantiles` of each row: a block of ``block`` rows is copied into a row-major buffer (reading
    each column's part of the block contiguously), then each row is selected in it."""
    n_columns = matrix.shape[1]
    buffer = np.empty((block, n_columns), dtype=matrix.dtype)
    for block_start in range(first_row, last_row, block):
        block_stop = min(block_start + block, last_row)
        _copy_rows(matrix, block_start, block_stop, buffer)
        for row in range(block_stop - block_start):
            values = buffer[row]
            has_nan = False
            for column in range(n_columns):
                has_nan |= values[column] != values[column]
            out[block_start + row] = np.nan if has_nan \
                else order_statistic(values, n_columns, 0, 0, is_median, first, gamma)


@numba.njit(cache=True, nogil=True)
def column_modes(first_column, last_column, matrix, keys, is_float, zero, out):  # pragma: no cover - jit
    """Julia's ``StatsBase.mode`` of each column (:func:`~._shared.mode_of`; ``keys``: the integer view of a float
    ``matrix``, or the matrix)."""
    n_rows = matrix.shape[0]
    positions = np.arange(n_rows)
    table = mode_table(n_rows)
    for column in range(first_column, last_column):
        out[column] = mode_of(matrix[:, column], keys[:, column], is_float, positions, n_rows, zero, table, column)


@numba.njit(cache=True, nogil=True)
def row_modes(first_row, last_row, matrix, keys, is_float, block, zero, out):  # pragma: no cover - jit
    """:func:`column_modes` of each row, a block of ``block`` rows copied into row-major buffers at a time."""
    n_columns = matrix.shape[1]
    positions = np.arange(n_columns)
    buffer = np.empty((block, n_columns), dtype=matrix.dtype)
    key_buffer = np.empty((block, n_columns), dtype=keys.dtype)
    table = mode_table(n_columns)
    for block_start in range(first_row, last_row, block):
        block_stop = min(block_start + block, last_row)
        _copy_rows(matrix, block_start, block_stop, buffer)
        _copy_rows(keys, block_start, block_stop, key_buffer)
        for row in range(block_stop - block_start):
            out[block_start + row] = mode_of(buffer[row], key_buffer[row], is_float, positions, n_columns, zero,
                                             table, block_start + row)
