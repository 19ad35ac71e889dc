"""numba helpers the reduction kernels of :mod:`._csc` and :mod:`._dense` share (inlined into each kernel): where a
value goes (its *target*), order-preserving integer keys of floats, and selection (the k-th smallest value).

Importing this module imports numba (the lazy boundary: :mod:`pydaf.kernels.reductions` imports the kernel modules
only when a large input first needs them).

numba's on-disk cache is keyed by the file of each kernel, not of the helpers it inlines: after editing this file,
delete the ``__pycache__`` of the package (or touch ``_csc.py`` and ``_dense.py``) so the kernels are recompiled.
"""

from __future__ import annotations

import numba
import numpy as np

#: The fast-math flags of the accumulating loops: reassociation lets LLVM keep several partial sums in SIMD lanes
#: (a float ``total += x`` loop is otherwise serial: 1.2 GB/s instead of 31 GB/s for Float32 on the 2-core VM).
#: No ``nnan``/``ninf``: NaN and infinities must propagate as in Julia.
SUM_FASTMATH = {"reassoc", "contract"}

#: The ``row_mode`` of the kernels: the target of a value is ``col_map[column]`` (one per column, accumulated in a
#: register), ``col_map[column] + row``, or ``col_map[column] + row_map[row]`` (a row mapped to -1 is skipped).
#: A column with ``col_map[column] < 0`` is skipped.
PER_COLUMN, PER_ROW, PER_GROUP_OF_ROWS = 0, 1, 2


@numba.njit(inline="always")
def target_of(row_mode, base, row, row_map):  # pragma: no cover - jit
    """The target of the value at (0-based) ``row`` of a column whose base target is ``base`` (-1: skipped)."""
    if row_mode == PER_ROW:
        return base + row
    group = row_map[row]
    return base + group if group >= 0 else -1


@numba.njit(inline="always")
def ordered_key(bits, sign_shift, magnitude):  # pragma: no cover - jit
    """The integer whose order is the order of the float with these ``bits`` (its signed-integer view): negative
    floats have their magnitude bits flipped. ``sign_shift`` is the number of bits less one, ``magnitude`` the largest
    signed integer of that size. The map is its own inverse. Integer maxima and minima vectorize; float ones with
    Julia's NaN rule do not (2-4 GB/s instead of 30)."""
    key = np.int64(bits)
    return key ^ ((key >> sign_shift) & magnitude)


@numba.njit(inline="always")
def extreme_key(values, keys, is_float, sign_shift, magnitude, is_max, best):  # pragma: no cover - jit
    """The largest (``is_max``) or smallest of ``best`` and the :func:`ordered_key` of ``keys`` (the integer view of
    float ``values``; for integers, the values themselves, with ``is_float`` false), and the number of NaN values.
    (The arrays are views starting at 0, so numba knows no index is negative and the loops vectorize; counting the
    NaNs in the same loop reads the values once.)"""
    n_nans = 0
    if is_float:
        if is_max:
            for index in range(keys.shape[0]):
                n_nans += values[index] != values[index]
                key = ordered_key(keys[index], sign_shift, magnitude)
                best = key if key > best else best
        else:
            for index in range(keys.shape[0]):
                n_nans += values[index] != values[index]
                key = ordered_key(keys[index], sign_shift, magnitude)
                best = key if key < best else best
    elif is_max:
        for index in range(keys.shape[0]):
            key = np.int64(keys[index])
            best = key if key > best else best
    else:
        for index in range(keys.shape[0]):
            key = np.int64(keys[index])
            best = key if key < best else best
    return best, n_nans


@numba.njit(inline="always")
def mean_and_variance(values, n_values):  # pragma: no cover - jit
    """The mean and the (uncorrected) variance of ``values`` and ``n_values - len(values)`` more zeros, in two passes
    over ``values`` (the caller keeps them in cache between the two: the memory traffic of one)."""
    total = 0.0
    for index in range(values.shape[0]):
        total += values[index]
    mean = total / n_values
    squares = 0.0
    for index in range(values.shape[0]):
        deviation = np.float64(values[index]) - mean
        squares += deviation * deviation
    squares += (n_values - values.shape[0]) * mean * mean
    return mean, squares / n_values


@numba.njit(inline="always")
def _at(index):  # pragma: no cover - jit
    # An index known not to be negative, typed so: numba then skips the wrap-around of negative indices (selection is
    # 20% faster without it).
    return np.uint64(index)


@numba.njit(inline="always")
def _swap(values, first, second):  # pragma: no cover - jit
    value = values[_at(first)]
    values[_at(first)] = values[_at(second)]
    values[_at(second)] = value


@numba.njit(inline="always")
def _sift_down(values, start, root, end):  # pragma: no cover - jit
    # The max-heap of values[start:end] (0-based positions relative to start), from root down.
    while True:
        child = 2 * root + 1
        if child >= end - start:
            return
        if child + 1 < end - start and values[_at(start + child + 1)] > values[_at(start + child)]:
            child += 1
        if values[_at(start + root)] >= values[_at(start + child)]:
            return
        _swap(values, start + root, start + child)
        root = child


@numba.njit(inline="always")
def _heap_select(values, start, end, k):  # pragma: no cover - jit
    # Place the k-th smallest of values[start:end] at k, the smaller ones before it (the fallback of select_kth).
    size = k - start + 1
    for root in range(size // 2 - 1, -1, -1):
        _sift_down(values, start, root, start + size)
    for index in range(start + size, end):
        if values[_at(index)] < values[_at(start)]:
            _swap(values, index, start)
            _sift_down(values, start, 0, start + size)
    _swap(values, start, k)


@numba.njit(inline="always")
def select_kth(values, k):  # pragma: no cover - jit
    """Reorder ``values`` (NaN-free) so ``values[k]`` is its k-th smallest, none larger before it and none smaller
    after it: introselect (quickselect on a median of three, with a heap selection once it recurses too deep), O(n)
    where sorting each column was O(n log n)."""
    start = 0
    end = values.shape[0]
    depth = 2 * int(np.log2(max(end, 2))) + 4
    while end - start > 16:
        depth -= 1
        if depth < 0:
            _heap_select(values, start, end, k)
            return
        middle = start + (end - start) // 2
        last = end - 1
        # Median of three as the pivot, moved to end - 1.
        if values[_at(middle)] < values[_at(start)]:
            _swap(values, middle, start)
        if values[_at(last)] < values[_at(start)]:
            _swap(values, last, start)
        if values[_at(last)] < values[_at(middle)]:
            _swap(values, last, middle)
        _swap(values, middle, last)
        pivot = values[_at(last)]
        # Hoare-style partition into [start, low) <= pivot <= [high, last).
        low = start
        high = last - 1
        while True:
            while values[_at(low)] < pivot:
                low += 1
            while high > start and values[_at(high)] > pivot:
                high -= 1
            if low >= high:
                break
            _swap(values, low, high)
            low += 1
            high -= 1
        _swap(values, low, last)
        if low == k:
            return
        if k < low:
            end = low
        else:
            start = low + 1
    # Insertion sort of the last few.
    for index in range(start + 1, end):
        value = values[_at(index)]
        position = index - 1
        while position >= start and values[_at(position)] > value:
            values[_at(position + 1)] = values[_at(position)]
            position -= 1
        values[_at(position + 1)] = value


@numba.njit(inline="always")
def smallest_from(values, start):  # pragma: no cover - jit
    """The smallest of ``values[start:]`` (after :func:`select_kth` of ``start - 1``, the next order statistic)."""
    result = values[start]
    for index in range(start + 1, values.shape[0]):
        if values[index] < result:
            result = values[index]
    return result


@numba.njit(inline="always")
def interpolate(low, high, gamma):  # pragma: no cover - jit
    """Julia's ``Statistics.quantile`` interpolation between two neighbouring order statistics."""
    if np.isfinite(low) and np.isfinite(high):
        return low + gamma * (high - low)
    return (1 - gamma) * low + gamma * high


@numba.njit(inline="always")
def _stored_index(index, n_negative, n_zeros):  # pragma: no cover - jit
    # The position among the sorted stored values of the index-th of all values (-1: an implicit zero).
    if index < n_negative:
        return index
    if index < n_negative + n_zeros:
        return -1
    return index - n_zeros


@numba.njit(inline="always")
def order_statistic(buffer, n_values, n_negative, n_zeros, is_median, first, gamma):  # pragma: no cover - jit
    """The median (or the quantile at Julia's 0-based index ``first`` with weight ``gamma``) of ``n_values`` values:
    ``buffer`` holds the stored ones (NaN-free; it is reordered), ``n_negative`` of them negative, and ``n_zeros``
    implicit zeros sit between the negative and the non-negative ones."""
    if is_median:
        low_index = (n_values - 1) // 2
        high_index = n_values // 2
    else:
        low_index = first
        high_index = min(first + 1, n_values - 1)
    low_stored = _stored_index(low_index, n_negative, n_zeros)
    low = 0.0
    if low_stored >= 0:
        select_kth(buffer, low_stored)
        low = np.float64(buffer[low_stored])
    high_stored = _stored_index(high_index, n_negative, n_zeros)
    if high_index == low_index:
        high = low
    elif high_stored < 0:
        high = 0.0
    elif low_stored >= 0 and high_stored == low_stored + 1:
        # Everything after the selected value is at least it: the next one is their smallest.
        high = np.float64(smallest_from(buffer, high_stored))
    else:
        select_kth(buffer, high_stored)
        high = np.float64(buffer[high_stored])
    if is_median:
        return low if n_values % 2 == 1 else low / 2 + high / 2
    return interpolate(low, high, gamma)


#: Multiplier of the multiplicative (Fibonacci) hash of the mode's counting table.
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(inline="always")
def mode_table(longest):  # pragma: no cover - jit
    """The scratch arrays of :func:`mode_of` for vectors of up to ``longest`` values: an open-addressing table of at
    least twice as many slots (keys, counts, second-pass counts, the generation that owns each slot) and the list of
    slots in use."""
    size = 16
    while size < 2 * longest:
        size *= 2
    return (np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64),
            np.full(size, -1, dtype=np.int64), np.zeros(max(longest, 1), dtype=np.int64))


@numba.njit(inline="always")
def _slot(table_keys, table_owner, generation, key):  # pragma: no cover - jit
    # The slot of key (linear probing from its hash): its own, or the first free one (owned by another generation).
    mask = table_keys.shape[0] - 1
    shift = np.uint64(64 - int(np.log2(table_keys.shape[0])))
    slot = np.int64((np.uint64(key) * _HASH_MULTIPLIER) >> shift) & mask
    while table_owner[slot] == generation and table_keys[slot] != key:
        slot = (slot + 1) & mask
    return slot


@numba.njit(inline="always")
def _mode_key(value, key, is_float):  # pragma: no cover - jit
    # The counting key of a value: its bits (floats) or itself (integers); 0.0 and -0.0 count as one value.
    if is_float and value == 0:
        return np.int64(0)
    return np.int64(key)


@numba.njit(inline="always")
def mode_of(values, keys, is_float, rows, n_values, zero, table, generation):  # pragma: no cover - jit
    """Julia's ``StatsBase.mode`` of ``n_values`` values that are zero except ``values`` (at the increasing 0-based
    positions ``rows``): the most frequent; of ties, the first to reach the top count (NaN is one value). Values are
    counted in a hash table (:func:`mode_table`; slots of other ``generation`` s are free), O(n) where sorting each
    vector was O(n log n); a second pass in order finds which top value got there first. ``keys`` are the integer
    views of float ``values`` (``is_float``), or the values themselves."""
    table_keys, table_counts, table_seen, table_owner, used = table
    n_stored = values.shape[0]
    if n_stored == 0:
        return zero
    n_used = 0
    n_nans = 0
    for index in range(n_stored):
        value = values[index]
        if value != value:
            n_nans += 1
            continue
        key = _mode_key(value, keys[index], is_float)
        slot = _slot(table_keys, table_owner, generation, key)
        if table_owner[slot] != generation:
            table_owner[slot] = generation
            table_keys[slot] = key
            table_counts[slot] = 0
            table_seen[slot] = 0
            used[n_used] = slot
            n_used += 1
        table_counts[slot] += 1
    top = n_nans
    for index in range(n_used):
        top = max(top, table_counts[used[index]])
    n_zeros = n_values - n_stored
    if n_zeros > top:
        return zero
    # In order, the first value to reach the top count.
    best = zero
    reached = -1
    seen_nans = 0
    for index in range(n_stored):
        value = values[index]
        if value != value:
            seen_nans += 1
            if seen_nans == top:
                best = value
                reached = rows[index]
                break
            continue
        slot = _slot(table_keys, table_owner, generation, _mode_key(value, keys[index], is_float))
        table_seen[slot] += 1
        if table_seen[slot] == top:
            best = value
            reached = rows[index]
            break
    if n_zeros == top:
        # The position of the top-th zero: the top-th position not holding a stored value.
        seen = 0
        previous = -1
        zero_reached = -1
        for index in range(n_stored):
            gap = rows[index] - previous - 1
            if seen + gap >= top:
                zero_reached = previous + top - seen
                break
            seen += gap
            previous = rows[index]
        if zero_reached < 0:
            zero_reached = previous + top - seen
        if zero_reached < reached:
            return zero
    return best
