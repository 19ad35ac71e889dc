"""The three walks of HDF5 global heap collections (``pydaf/formats/h5df/global_heap.py``: Python per collection,
numpy in lockstep, numba) agree on every collection, sound or corrupt: each finds the first collection HDF5 could not
walk."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pydaf import kernels
from pydaf.formats.h5df.global_heap import lockstep_problem, walk_problem

_SIZES = st.one_of(st.integers(0, 40), st.integers(0, 1 << 20), st.integers(0, (1 << 64) - 1))


@st.composite
def collections(draw):
    """Collections as HDF5 writes them (objects, then free space), with some object headers replaced by anything."""
    data, starts, sizes = bytearray(), [], []
    for _ in range(draw(st.integers(1, 6))):
        body = bytearray()
        for index in range(1, draw(st.integers(0, 12)) + 1):
            length = draw(st.integers(0, 24))
            body += index.to_bytes(2, "little") + bytes(6) + length.to_bytes(8, "little") + bytes(-(-length // 8) * 8)
        free = draw(st.sampled_from([0, 4, 12, 16, 20, 24, 40]))
        if free >= 16:
            body += bytes(8) + free.to_bytes(8, "little") + bytes(free - 16)
        else:
            body += bytes(free)
        for _ in range(draw(st.integers(0, 3))):  # corruptions: a header field or a byte anywhere
            if body and draw(st.booleans()):
                at = draw(st.integers(0, len(body) - 1))
                body[at] = draw(st.integers(0, 255))
            elif len(body) >= 16:
                at = draw(st.integers(0, (len(body) - 16) // 8)) * 8
                body[at + 8:at + 16] = draw(_SIZES).to_bytes(8, "little")
        data += bytes(draw(st.integers(0, 7)))  # (collections need not be aligned in the file)
        starts.append(len(data))
        sizes.append(16 + len(body))
        data += b"GCOL" + bytes([1, 0, 0, 0]) + (16 + len(body)).to_bytes(8, "little") + body
    return np.frombuffer(bytes(data), np.uint8), np.array(starts, np.int64), np.array(sizes, np.int64)


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(collections())
def test_the_walks_agree(heap):
    data, starts, sizes = heap
    problems = [walk_problem(data.tobytes(), int(start), int(size)) for start, size in zip(starts, sizes, strict=True)]
    first = next((position for position, problem in enumerate(problems) if problem is not None), -1)
    assert lockstep_problem(data, starts, sizes) == first
    assert kernels.global_heap_problem(data, starts, sizes) == first
