"""numba kernel that decodes a run of Julia's blosc chunks (one block each, bit-shuffled, zstd-compressed) with native
zstd and bitshuffle functions passed in as first-class functions, so a chunk costs only its native calls: in Python
each chunk also took ~8 µs of calls and checks (a 8 KB chunk decodes in ~7 µs), and threads passed the GIL around
each call. The functions come as arguments (addresses bound at run time), so the compiled code caches on disk.

The frame checks are those of :class:`pydaf.formats.h5df.packed._FastBlosc`; a chunk that fails one, or does not
decode to exactly its block, is only marked, and its caller decodes it the checked way (which names the problem).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["FRAME_FLAGS", "decode_blosc_chunks"]

#: The blosc 1 frames decoded here: bit shuffle (0x04), unsplit blocks (0x10), the zstd format (4 << 5).
FRAME_FLAGS = 0x04 | 0x10 | 4 << 5


@numba.njit(cache=True, nogil=True)
def _u32(data, at):  # pragma: no cover - jit
    return (np.int64(data[at]) | np.int64(data[at + 1]) << 8 | np.int64(data[at + 2]) << 16
            | np.int64(data[at + 3]) << 24)


@numba.njit(cache=True, nogil=True)
def decode_blosc_chunks(span, starts, sizes, out, out_starts, chunk_bytes, context, scratch, decompress, unshuffle,
                        failed):  # pragma: no cover - jit
    """Decode chunk ``i`` (its ``sizes[i]`` bytes at ``span[starts[i]:]``) into ``out[out_starts[i]:]`` (bytes;
    ``-1``: not here), each exactly ``chunk_bytes``; ``failed[i] = 1`` for each chunk not decoded. ``context`` is a
    zstd decompression context, ``scratch`` at least ``chunk_bytes`` bytes (both this thread's);
    ``decompress(context, dst, capacity, src, size)`` is ``ZSTD_decompressDCtx``,
    ``unshuffle(src, dst, elements, size, block)`` is bitshuffle's ``bshuf_bitunshuffle`` (addresses as ``int64``).
    Every offset and size a frame declares is checked against its chunk, ``span`` and ``out`` before it is used."""
    span_address, out_address, scratch_address = span.ctypes.data, out.ctypes.data, scratch.ctypes.data
    for index in range(starts.shape[0]):
        at, size, out_start = starts[index], sizes[index], out_starts[index]
        if size < 24 or at < 0 or at + size > span.shape[0] or out_start < 0 or out_start + chunk_bytes > \
                out.shape[0] or scratch.shape[0] < chunk_bytes:
            failed[index] = 1
            continue
        version, version_lz, flags, typesize = span[at], span[at + 1], span[at + 2], np.int64(span[at + 3])
        block, frame_bytes, first = _u32(span, at + 8), _u32(span, at + 12), _u32(span, at + 16)
        if flags != FRAME_FLAGS or (version != 2 and version != 3) or version_lz != 1 \
                or _u32(span, at + 4) != chunk_bytes or block != chunk_bytes or frame_bytes > size or typesize == 0 \
                or block % (8 * typesize) != 0 or first < 20 or first + 4 > frame_bytes:
            failed[index] = 1
            continue
        length = _u32(span, at + first)
        if length <= 0 or length >= block or first + 4 + length > frame_bytes:
            failed[index] = 1  # (a block stored raw: blosc's)
            continue
        if decompress(context, np.int64(scratch_address), block, np.int64(span_address + at + first + 4),
                      length) != block:
            failed[index] = 1
            continue
        elements = block // typesize
        if unshuffle(np.int64(scratch_address), np.int64(out_address + out_start), elements, typesize,
                     elements) != block:
            failed[index] = 1
