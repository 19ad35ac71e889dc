"""numba kernel that decodes a run of Julia's blosc chunks (one block each, bit-shuffled, zstd-compressed) with native
zstd and bitshuffle functions whose addresses are passed in, so a chunk costs only its native calls: in Python each
chunk also took ~8 µs of calls and checks (a 8 KB chunk decodes in ~7 µs), and threads passed the GIL around each
call. The functions come as arguments (addresses bound at run time, called through :func:`_call5`), so the compiled
code caches on disk; as plain integers, not numba's first-class functions (whose typing cost ~15 µs a call).

The frame checks are those of :class:`pydaf.formats.h5df.packed._FastBlosc`; a chunk that fails one, or does not
decode to exactly its block, is only marked, and its caller decodes it the checked way (which names the problem).

:func:`decode_blosc_pieces` reads and decodes the pieces of a dataset on one thread, taking the next piece left (an
atomic counter shared by the threads) until none is: one call per thread, the GIL released throughout (taking the
pieces in Python, each thread took and released the GIL around every piece: ~50 µs each).

Also here: :func:`span_bounds`, the runs of neighbouring chunks read at once, and :func:`record_chunk`, a C callback
for HDF5's ``H5Dchunk_iter`` that writes each chunk's place into a table (h5py's ``chunk_iter`` makes a Python object
and a Python call per chunk: ~0.9 ms for 1,000 chunks, against ~0.05 ms).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numba
import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba.extending import intrinsic

__all__ = ["CHUNK_TABLE_HEADER", "FRAME_FLAGS", "decode_blosc_chunks", "decode_blosc_pieces", "record_chunk",
           "span_bounds"]

#: The blosc 1 frames decoded here: bit shuffle (0x04), unsplit blocks (0x10), the zstd format (4 << 5).
FRAME_FLAGS = 0x04 | 0x10 | 4 << 5


@numba.njit(cache=True, nogil=True)
def _u32(data, at):  # pragma: no cover - jit
    return (np.int64(data[at]) | np.int64(data[at + 1]) << 8 | np.int64(data[at + 2]) << 16
            | np.int64(data[at + 3]) << 24)


@intrinsic
def _call5(typingctx, address, a, b, c, d, e):  # pragma: no cover - jit
    """Call the C function at ``address`` with five 64-bit integer (or pointer) arguments; its 64-bit result (all
    arguments and the result as ``int64``: the C functions called take and return ``size_t``, ``int64_t`` or
    pointers)."""
    signature = numba.types.int64(*([numba.types.int64] * 6))

    def codegen(context, builder, signature, arguments):
        function_type = ir.FunctionType(ir.IntType(64), [ir.IntType(64)] * 5)
        function = builder.inttoptr(arguments[0], function_type.as_pointer())
        return builder.call(function, arguments[1:])

    return signature, codegen


@intrinsic
def _call4(typingctx, address, a, b, c, d):  # pragma: no cover - jit
    """:func:`_call5`, for a C function of four arguments."""
    signature = numba.types.int64(*([numba.types.int64] * 5))

    def codegen(context, builder, signature, arguments):
        function_type = ir.FunctionType(ir.IntType(64), [ir.IntType(64)] * 4)
        function = builder.inttoptr(arguments[0], function_type.as_pointer())
        return builder.call(function, arguments[1:])

    return signature, codegen


@intrinsic
def _take(typingctx, counter):  # pragma: no cover - jit
    """Atomically add 1 to ``counter[0]`` (an ``int64`` array shared by threads); its value before."""
    signature = numba.types.int64(counter)

    def codegen(context, builder, signature, arguments):
        array = context.make_array(signature.args[0])(context, builder, arguments[0])
        return builder.atomic_rmw("add", array.data, ir.Constant(ir.IntType(64), 1), "seq_cst")

    return signature, codegen


@numba.njit(cache=True, nogil=True)
def decode_blosc_pieces(descriptor, read, pieces, taken, offsets, sizes, out, out_starts, chunk_bytes, context,
                        scratch, span, decompress, unshuffle, failed):  # pragma: no cover - jit
    """Decode pieces of chunks (piece ``p``: the chunks ``pieces[p]:pieces[p + 1]``, at the file ``offsets``, of
    ``sizes`` bytes, neighbours in the file) as :func:`decode_blosc_chunks` does, taking the next piece left
    (``taken[0]``, an ``int64`` counter the threads share, from 0) until none is. A piece's bytes (from its first
    chunk's offset to its last byte) are read into ``span`` by ``read``, the address of ``pread(descriptor, buffer,
    length, offset)``; a piece that does not fit in ``span``, or whose bytes are not all read, is marked ``failed``
    (its chunks are decoded the checked way, which reads them again, and raises the error)."""
    n_pieces = pieces.shape[0] - 1
    span_address = span.ctypes.data
    while True:
        piece = _take(taken)
        if piece >= n_pieces:
            return
        first, last = pieces[piece], pieces[piece + 1]
        begin, end = offsets[first], offsets[first]
        for index in range(first, last):
            end = max(end, offsets[index] + sizes[index])
        length = end - begin
        if begin < 0 or length > span.shape[0] or _call4(read, descriptor, span_address, length, begin) != length:
            failed[first:last] = 1
            continue
        decode_blosc_chunks(span[:length], offsets[first:last] - begin, sizes[first:last], out, out_starts[first:last],
                            chunk_bytes, context, scratch, decompress, unshuffle, failed[first:last])


@numba.njit(cache=True, nogil=True)
def decode_blosc_chunks(span, starts, sizes, out, out_starts, chunk_bytes, context, scratch, decompress, unshuffle,
                        failed):  # pragma: no cover - jit
    """Decode chunk ``i`` (its ``sizes[i]`` bytes at ``span[starts[i]:]``) into ``out[out_starts[i]:]`` (bytes;
    ``-1``: not here), each exactly ``chunk_bytes``; ``failed[i] = 1`` for each chunk not decoded. ``context`` is a
    zstd decompression context, ``scratch`` at least ``chunk_bytes`` bytes (both this thread's); ``decompress`` is
    the address of ``ZSTD_decompressDCtx(context, dst, capacity, src, size)``, ``unshuffle`` that of bitshuffle's
    ``bshuf_bitunshuffle(src, dst, elements, size, block)`` (all as ``int64``).
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
        if _call5(decompress, context, scratch_address, block, span_address + at + first + 4, length) != block:
            failed[index] = 1
            continue
        elements = block // typesize
        if _call5(unshuffle, scratch_address, out_address + out_start, elements, typesize, elements) != block:
            failed[index] = 1


@numba.njit(cache=True, nogil=True)
def span_bounds(offsets, sizes, gap, span_bytes):  # pragma: no cover - jit
    """The bounds ``[0, ..., len(offsets)]`` of the runs of chunks (sorted by file ``offsets``, of ``sizes`` bytes)
    read at once: neighbours while at most ``gap`` bytes lie between them, up to ``span_bytes`` (or one chunk) a
    run, as :meth:`pydaf.formats.h5df.packed._RawChunks.spans` makes them.

    Example:
        >>> span_bounds(np.array([0, 100, 200, 9000, 9100]), np.array([100, 100, 100, 100, 100]), 4096, 250).tolist()
        [0, 2, 3, 5]
    """
    bounds = np.empty(offsets.shape[0] + 1, dtype=np.int64)
    n_bounds = 0
    at = 0
    while at < offsets.shape[0]:
        bounds[n_bounds] = at
        n_bounds += 1
        begin = offsets[at]
        span_end = begin + sizes[at]
        at += 1
        while at < offsets.shape[0]:
            if offsets[at] - span_end > gap or offsets[at] + sizes[at] - begin > span_bytes:
                break
            span_end = max(span_end, offsets[at] + sizes[at])
            at += 1
    bounds[n_bounds] = offsets.shape[0]
    return bounds[:n_bounds + 1].copy()


#: The int64 slots before the rows of a :func:`record_chunk` table: capacity (rows), rows written, dimensions, and
#: whether a chunk did not fit (then the table is incomplete).
CHUNK_TABLE_HEADER = 4


def _record_chunk(offset, filter_mask, address, size, table):  # pragma: no cover - jit
    """HDF5's ``H5D_chunk_iter_op_t`` (``offset`` in elements, ``filter_mask``, file ``address``, stored ``size``):
    writes the row ``(address, size, filter_mask, *offset)`` into ``table`` (``int64``: the
    :data:`CHUNK_TABLE_HEADER` slots, then the rows); a chunk past its capacity stops the iteration, flagged. Called
    by HDF5 through :func:`record_chunk`."""
    header = numba.carray(table, (CHUNK_TABLE_HEADER,), np.int64)
    capacity, count, ndims = header[0], header[1], header[2]
    if count >= capacity:
        header[3] = 1
        return 1  # (stops the iteration; the caller reads the index the slow way)
    width = 3 + ndims
    rows = numba.carray(table, (CHUNK_TABLE_HEADER + capacity * width,), np.int64)
    at = CHUNK_TABLE_HEADER + count * width
    rows[at] = np.int64(address)
    rows[at + 1] = np.int64(size)
    rows[at + 2] = np.int64(filter_mask)
    for dimension in range(ndims):
        rows[at + 3 + dimension] = np.int64(offset[dimension])
    header[1] = count + 1
    return 0


@cache
def record_chunk() -> Any:
    """:func:`_record_chunk` as a C callback (a numba ``cfunc``: its ``address``), compiled (or loaded from numba's
    cache) on first use, not when this module is imported."""
    signature = numba.types.int32(numba.types.CPointer(numba.types.uint64), numba.types.uint32, numba.types.uint64,
                                  numba.types.uint64, numba.types.voidptr)
    return numba.cfunc(signature, cache=True)(_record_chunk)
