"""A check of the HDF5 global heap collections that a variable-length string dataset points into, before HDF5 reads
them: a corrupt object size can send libhdf5's walk of a collection into an endless loop, so pydaf walks every
collection a contiguous string dataset refers to, every step bounded, and refuses one whose walk would not end at its
end (in Python, in numpy for many collections at once, or in numba).

Design: docs/design/h5df.md ("The global heap check")."""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ... import kernels
from ...errors import DafFormatError

#: A variable-length string as a dataset stores it: its length, its collection's address, its index in it.
REFERENCE = np.dtype([("length", "<u4"), ("collection", "<u8"), ("index", "<u4")])

_MAGIC = b"GCOL"
_HEADER = 16  # magic, version, 3 reserved bytes, collection size (u64)
_OBJECT_HEADER = 16

#: Above this many bytes of collections, the walk runs in numpy or numba rather than Python.
NUMBA_MIN_BYTES = 1 << 20

#: Collections up to this size (HDF5 makes 4-64 KB ones for strings) are walked in numpy, unless numba is loaded.
LOCKSTEP_MAX_BYTES = 1 << 16


def walk_problem(data: bytes | memoryview | mmap.mmap | np.ndarray, start: int, size: int) -> str | None:
    """Why the collection of ``size`` bytes at ``start`` in ``data`` is not one HDF5 can walk, or None.

    Example:
        >>> header = b"GCOL" + bytes([1, 0, 0, 0]) + (48).to_bytes(8, "little")
        >>> one = (1).to_bytes(2, "little") + bytes(6) + (1).to_bytes(8, "little") + b"a" + bytes(7)
        >>> walk_problem(header + one + bytes(8), 0, 48)  # (the last 8 bytes: too few for a header, so free)
        >>> walk_problem(header + one + bytes(16), 0, 56) is None  # a free-space object of size 0: endless in HDF5
        False
    """
    position = start + _HEADER
    end = start + size
    while position + _OBJECT_HEADER <= end:
        index = int.from_bytes(data[position:position + 2], "little")
        object_size = int.from_bytes(data[position + 8:position + 16], "little")
        need = object_size if index == 0 else _OBJECT_HEADER + (object_size + 7) // 8 * 8
        if index == 0 and object_size < _OBJECT_HEADER:
            return f"its free space at byte {position - start} has the size {object_size}"
        if need > end - position:
            return f"its object {index} at byte {position - start} has the size {object_size}, past its end"
        position += need
    return None


@contextmanager
def _closing_map(fd: int) -> Iterator[mmap.mmap]:
    """A read-only map of the whole file, closed on leaving unless an exception (a Ctrl-C) left views of it alive in
    its traceback: then it closes when they are freed, and the exception goes on (``mmap``'s own ``with`` would replace
    it with a ``BufferError``)."""
    data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    try:
        yield data
    finally:
        try:
            data.close()
        except BufferError:
            pass


def check_string_heaps(path: str, offset: int, count: int, what: str) -> None:
    """Check the collections the ``count`` strings of a contiguous dataset at ``offset`` in the file ``path`` refer
    to; raise :class:`DafFormatError` naming ``what`` if one is broken."""
    if count == 0:
        return
    with open(path, "rb") as handle:
        file_size = os.fstat(handle.fileno()).st_size
        if offset + count * REFERENCE.itemsize > file_size:
            raise DafFormatError(f"the {what}\nin the H5df file: {path}\nends past the end of the file")
        with _closing_map(handle.fileno()) as data:
            references = np.frombuffer(data, dtype=REFERENCE, count=count, offset=offset)
            collections = np.unique(references["collection"][references["length"] > 0])
            del references  # (the map can't close while a view of it lives)
            starts, sizes = _collections(data, collections, file_size, path, what)
            if int(sizes.sum()) >= NUMBA_MIN_BYTES:
                walk = (kernels.global_heap_problem if "numba" in sys.modules or int(sizes.max()) > LOCKSTEP_MAX_BYTES
                        else lockstep_problem)
                bad = walk(np.frombuffer(data, dtype=np.uint8), starts, sizes)
                problem = None if bad < 0 else walk_problem(data, int(starts[bad]), int(sizes[bad]))
                bad_start = None if bad < 0 else int(starts[bad])
            else:
                problem = bad_start = None
                for start, size in zip(starts.tolist(), sizes.tolist(), strict=True):
                    problem = walk_problem(data, start, size)
                    if problem is not None:
                        bad_start = start
                        break
    if problem is not None:
        raise DafFormatError(f"the {what}\nin the H5df file: {path}\nrefers to the global heap collection at byte "
                             f"{bad_start}, which is corrupt: {problem}")


def lockstep_problem(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> int:
    """The position (in ``starts``) of the first collection whose walk (:func:`walk_problem`) would not end at its end,
    or -1: every collection walked at once, one object per step (``data``: the file's bytes; each collection known to
    lie in it).

    Example:
        >>> header = b"GCOL" + bytes([1, 0, 0, 0]) + (48).to_bytes(8, "little")
        >>> one = (1).to_bytes(2, "little") + bytes(6) + (1).to_bytes(8, "little") + b"a" + bytes(7)
        >>> data = np.frombuffer(header + one + bytes(8) + header + one + bytes(16), np.uint8)
        >>> lockstep_problem(data, np.array([0, 48]), np.array([48, 64]))  # (the second's free space: size 0)
        1
    """
    positions = starts.astype(np.int64) + _HEADER
    ends = starts.astype(np.int64) + sizes.astype(np.int64)
    active = np.arange(starts.shape[0])
    bad = np.zeros(starts.shape[0], dtype=bool)
    header_bytes = np.arange(_OBJECT_HEADER)
    while True:
        active = active[positions[active] + _OBJECT_HEADER <= ends[active]]
        if active.size == 0:
            break
        position = positions[active]
        remaining = ends[active] - position  # (>= 16)
        header = data[position[:, None] + header_bytes]  # (one row per collection: its next object's header)
        index = header.view("<u2")[:, 0].astype(np.int64)
        size = header.view("<u8")[:, 1]
        free = index == 0
        fits = np.where(free, (size >= _OBJECT_HEADER) & (size <= remaining.astype(np.uint64)),
                        size <= (remaining - _OBJECT_HEADER).astype(np.uint64))
        bounded = np.where(fits, size, 0).astype(np.int64)  # (< 2**63 where it fits)
        need = np.where(free, bounded, _OBJECT_HEADER + (bounded + 7) // 8 * 8)
        fits &= need <= remaining
        bad[active[~fits]] = True
        active = active[fits]
        positions[active] += need[fits]
    failed = np.flatnonzero(bad)
    return int(failed[0]) if failed.size else -1


def _collections(data: mmap.mmap, collections: np.ndarray, file_size: int, path: str,
                 what: str) -> tuple[np.ndarray, np.ndarray]:
    """The start and size of each collection, checked to be one inside the file."""
    sizes = np.empty(len(collections), dtype=np.int64)
    for position, start in enumerate(collections.tolist()):
        if start + _HEADER > file_size or data[start:start + 4] != _MAGIC:
            raise DafFormatError(f"the {what}\nin the H5df file: {path}\nrefers to a global heap collection at byte "
                                 f"{start}, where there is none")
        size = int.from_bytes(data[start + 8:start + 16], "little")
        if size < _HEADER or start + size > file_size:
            raise DafFormatError(f"the {what}\nin the H5df file: {path}\nrefers to the global heap collection at "
                                 f"byte {start}, whose size {size} does not fit in the file")
        sizes[position] = size
    return collections.astype(np.int64), sizes
