"""numba kernel that turns 1-based stored indices into the 0-based copy scipy needs, checking their range in the same
pass.

numpy needs two passes for this (a range check, then the shift, or a cast that goes through a buffer: ~2x slower than
this loop, which LLVM vectorizes), and the copy is what a sparse query result costs over the kernel that made it.
"""

from __future__ import annotations

import numba

__all__ = ["zero_based_range"]


@numba.njit(cache=True, nogil=True)
def zero_based_range(first, last, one_based, limit, out):  # pragma: no cover - jit
    """``out[i] = one_based[i] - 1`` for ``first <= i < last``; returns whether every value was in ``1..limit``
    (values outside are still written, wrapped: the caller must not use ``out`` then). ``one_based`` is of any
    integer type but ``UInt64`` (which numba would mix with ``Int64`` in floats; view it as ``Int64``)."""
    values, shifted = one_based[first:last], out[first:last]
    in_range = True
    for index in range(values.shape[0]):  # (from 0: LLVM vectorizes only what it knows needs no wraparound)
        value = values[index]
        shifted[index] = value - 1
        in_range &= (value >= 1) & (value <= limit)
    return in_range
