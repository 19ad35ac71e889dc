"""numba reduction kernels on the stored arrays of a 1-based CSC matrix: ``colptr``/``rowval``/``nzval`` as Daf
stores them (any index type, read-only, memory-mapped), never shifted to 0-based copies.

Each kernel is serial over an index range (of columns, or of *chunks* of columns) and releases the GIL;
:func:`pydaf.kernels.threads.run_ranges` runs ranges of it on the shared pool of threads.

The accumulating kernels (:func:`sums`, :func:`squared_deviations`, :func:`extremes`) work in any direction: chunk
``c`` covers the columns ``col_order[bounds[c]:bounds[c + 1]]`` and accumulates into ``out[0]`` when the chunks'
targets are disjoint (``shared``) or into its own ``out[c]`` otherwise; the target of each value follows
``row_mode`` (see :data:`pydaf.kernels._shared.PER_COLUMN`). ``values[k - value_offset]`` is the value of entry
``k`` (``values`` is ``nzval`` itself, or values computed from a block of it). Where ``counts`` has columns, the
number of stored values of each target is counted too (the implicit zeros of a sparse matrix are values).

The ``column_*`` kernels compute one statistic per column directly (each column's entries stay in cache between
passes).
"""

from __future__ import annotations

import numba
import numpy as np

from ._shared import (
    PER_COLUMN,
    SUM_FASTMATH,
    extreme_key,
    mean_and_variance,
    mode_of,
    mode_table,
    order_statistic,
    target_of,
)

__all__ = ["column_extremes", "column_modes", "column_quantiles", "column_variances", "extremes", "squared_deviations",
           "sums"]


@numba.njit(cache=True, nogil=True, fastmath=SUM_FASTMATH)
def sums(first_chunk, last_chunk, colptr, rowval, values, value_offset, row_mode, row_map, col_order, col_map,
         bounds, shared, out, counts):  # pragma: no cover - jit
    """Add each value into its target (integers in ``int64``/``uint64``, floats in ``float64``)."""
    counting = counts.shape[1] > 0
    for chunk in range(first_chunk, last_chunk):
        buffer = out[0] if shared else out[chunk]
        counts_buffer = counts[0] if shared else counts[chunk]
        for position in range(bounds[chunk], bounds[chunk + 1]):
            column = col_order[position]
            base = col_map[column]
            if base < 0:
                continue
            start = np.int64(colptr[column]) - 1
            stop = np.int64(colptr[column + 1]) - 1
            column_values = values[start - value_offset:stop - value_offset]
            if row_mode == PER_COLUMN:
                total = buffer[base]
                for index in range(column_values.shape[0]):
                    total += column_values[index]
                buffer[base] = total
                if counting:
                    counts_buffer[base] += stop - start
            else:
                column_rows = rowval[start:stop]
                for index in range(column_values.shape[0]):
                    target = target_of(row_mode, base, np.int64(column_rows[index]) - 1, row_map)
                    if target >= 0:
                        buffer[target] += column_values[index]
                        if counting:
                            counts_buffer[target] += 1


@numba.njit(cache=True, nogil=True, fastmath=SUM_FASTMATH)
def squared_deviations(first_chunk, last_chunk, colptr, rowval, values, value_offset, row_mode, row_map, col_order,
                       col_map, bounds, shared, centers, out, counts):  # pragma: no cover - jit
    """Add the square of each value's deviation from its target's center (in ``float64``)."""
    counting = counts.shape[1] > 0
    for chunk in range(first_chunk, last_chunk):
        buffer = out[0] if shared else out[chunk]
        counts_buffer = counts[0] if shared else counts[chunk]
        for position in range(bounds[chunk], bounds[chunk + 1]):
            column = col_order[position]
            base = col_map[column]
            if base < 0:
                continue
            start = np.int64(colptr[column]) - 1
            stop = np.int64(colptr[column + 1]) - 1
            column_values = values[start - value_offset:stop - value_offset]
            if row_mode == PER_COLUMN:
                center = centers[base]
                total = buffer[base]
                for index in range(column_values.shape[0]):
                    deviation = np.float64(column_values[index]) - center
                    total += deviation * deviation
                buffer[base] = total
                if counting:
                    counts_buffer[base] += stop - start
            else:
                column_rows = rowval[start:stop]
                for index in range(column_values.shape[0]):
                    target = target_of(row_mode, base, np.int64(column_rows[index]) - 1, row_map)
                    if target >= 0:
                        deviation = np.float64(column_values[index]) - centers[target]
                        buffer[target] += deviation * deviation
                        if counting:
                            counts_buffer[target] += 1


@numba.njit(cache=True, nogil=True)
def extremes(first_chunk, last_chunk, colptr, rowval, values, row_mode, row_map, col_order, col_map, bounds, shared,
             is_max, out, counts):  # pragma: no cover - jit
    """Keep the largest (``is_max``) or smallest value of each target; a NaN wins and then stays, as Julia's
    ``maximum``/``minimum`` propagate it. (Per column, :func:`column_extremes` is the vectorized form.)"""
    counting = counts.shape[1] > 0
    for chunk in range(first_chunk, last_chunk):
        buffer = out[0] if shared else out[chunk]
        counts_buffer = counts[0] if shared else counts[chunk]
        for position in range(bounds[chunk], bounds[chunk + 1]):
            column = col_order[position]
            base = col_map[column]
            if base < 0:
                continue
            start = np.int64(colptr[column]) - 1
            stop = np.int64(colptr[column + 1]) - 1
            column_values = values[start:stop]
            column_rows = rowval[start:stop]
            for index in range(column_values.shape[0]):
                if row_mode == PER_COLUMN:
                    target = base
                else:
                    target = target_of(row_mode, base, np.int64(column_rows[index]) - 1, row_map)
                    if target < 0:
                        continue
                value = column_values[index]
                current = buffer[target]
                if (value > current if is_max else value < current) or value != value:
                    buffer[target] = value
                if counting:
                    counts_buffer[target] += 1


@numba.njit(cache=True, nogil=True)
def column_extremes(first_column, last_column, colptr, values, keys, is_float, sign_shift, magnitude, is_max,
                    out_keys, nans):  # pragma: no cover - jit
    """The largest (``is_max``) or smallest stored value of each column as an :func:`~._shared.ordered_key` of
    ``keys`` (the integer view of float ``values``; for integers, the values themselves, with ``is_float`` false),
    and the number of its NaNs. Comparing integers keeps the loop in SIMD lanes."""
    for column in range(first_column, last_column):
        start = np.int64(colptr[column]) - 1
        stop = np.int64(colptr[column + 1]) - 1
        out_keys[column], n_nans = extreme_key(values[start:stop], keys[start:stop], is_float, sign_shift, magnitude,
                                                is_max, out_keys[column])
        nans[column] = n_nans


@numba.njit(cache=True, nogil=True, fastmath=SUM_FASTMATH)
def column_variances(first_column, last_column, colptr, values, n_rows, means, variances):  # pragma: no cover - jit
    """The mean and the (uncorrected) variance of each column, its implicit zeros included: the sum, then the squared
    deviations from the mean while the column's values are still in cache (two passes, as Julia's ``var``, for the
    memory traffic of one)."""
    for column in range(first_column, last_column):
        column_values = values[np.int64(colptr[column]) - 1:np.int64(colptr[column + 1]) - 1]
        means[column], variances[column] = mean_and_variance(column_values, n_rows)


@numba.njit(cache=True, nogil=True)
def column_quantiles(first_column, last_column, colptr, values, n_rows, is_median, first, gamma,
                     out):  # pragma: no cover - jit
    """The median (or the quantile at Julia's 0-based index ``first`` with weight ``gamma``) of each column, its
    implicit zeros included, by selection in a copy of its stored values (NaN if it has a NaN)."""
    longest = 0
    for column in range(first_column, last_column):
        longest = max(longest, np.int64(colptr[column + 1]) - np.int64(colptr[column]))
    buffer = np.empty(longest, dtype=values.dtype)  # (in the values' type: see dense column_quantiles)
    for column in range(first_column, last_column):
        start = np.int64(colptr[column]) - 1
        stop = np.int64(colptr[column + 1]) - 1
        n_stored = stop - start
        n_negative = 0
        has_nan = False
        column_values = values[start:stop]
        for index in range(n_stored):
            value = column_values[index]
            buffer[index] = value
            n_negative += value < 0
            has_nan |= value != value
        if has_nan:
            out[column] = np.nan
        else:
            out[column] = order_statistic(buffer[:n_stored], n_rows, n_negative, n_rows - n_stored, is_median,
                                          first, gamma)


@numba.njit(cache=True, nogil=True)
def column_modes(first_column, last_column, colptr, rowval, values, keys, is_float, n_rows, zero,
                 out):  # pragma: no cover - jit
    """Julia's ``StatsBase.mode`` of each column, its zeros (implicit or stored) included (:func:`~._shared.mode_of`;
    ``keys``: the integer view of float ``values``, or the values)."""
    longest = 0
    for column in range(first_column, last_column):
        longest = max(longest, np.int64(colptr[column + 1]) - np.int64(colptr[column]))
    column_values = np.empty(longest, dtype=values.dtype)
    column_keys = np.empty(longest, dtype=keys.dtype)
    rows = np.empty(longest, dtype=np.int64)
    table = mode_table(longest)
    for column in range(first_column, last_column):
        start = np.int64(colptr[column]) - 1
        stop = np.int64(colptr[column + 1]) - 1
        stored_values, stored_keys, stored_rows = values[start:stop], keys[start:stop], rowval[start:stop]
        n_nonzero = 0
        for index in range(stored_values.shape[0]):
            value = stored_values[index]
            if value != 0:
                column_values[n_nonzero] = value
                column_keys[n_nonzero] = stored_keys[index]
                rows[n_nonzero] = np.int64(stored_rows[index]) - 1
                n_nonzero += 1
        out[column] = mode_of(column_values[:n_nonzero], column_keys[:n_nonzero], is_float, rows[:n_nonzero], n_rows,
                              zero, table, column)
