"""Packed (chunked + compressed) H5df datasets (docs/spec/FORMATS.md §2.12): Julia's filter pipelines, written exactly
as Julia's ``write_packed_dense_dataset!`` and ``hdf5_filters_for`` create them, and read without trusting the file.

Writing: a property :func:`~pydaf.core.packed_settings.chunks_for` packs is a chunked dataset (Julia's chunk ``(n,)`` or
``(n, 1)``, which is HDF5's ``[n]`` or ``[1, n]``) with the pipeline of the codec the knobs name. The filters are set
with the ``cd_values`` Julia's HDF5.jl passes (its ``BloscFilter``, ``BitshuffleFilter``, ``ZstdFilter``, ``Deflate``,
``Shuffle``), all optional (``H5Z_FLAG_OPTIONAL``), so the plugin's ``set_local`` completes them into what Julia's
files hold: blosc ``[2, 2, typesize, chunk bytes, level, 2 (bitshuffle), 5 (zstd) or 1 (lz4)]``, bitshuffle
``[0, 4, element size, 0 (default block), 3 (zstd), level]``, zstd ``[level]``, deflate ``[level]``, shuffle
``[element size]``. (FORMATS.md gives blosc's zstd compressor code as 4: blosc numbers zlib 4 and zstd 5, and Julia's
``Blosc.compcode("zstd")`` is blosc's own number.)

Reading: a packed dataset can't be mapped (its bytes are compressed), so it is decoded into memory. Only the pipelines
Julia writes are read (and h5py's gzip, with or without shuffle): another is a :class:`~pydaf.DafFormatError` naming
the filters. Nothing a chunk says is trusted: each chunk is decoded here, one at a time, into a buffer of the size the
dataset's chunk shape declares (blosc and zstd through numcodecs, deflate through zlib, shuffle through numcodecs), so
a chunk that decodes to more or fewer bytes (a decompression bomb, a truncated or corrupt chunk) is an error naming
the property, and memory never exceeds the declared shape. (HDF5's own deflate filter inflates a chunk whatever its
size, then keeps its first bytes silently: a 500 KB chunk inflated to 500 MB, and read back without an error.)
bitshuffle is decoded by HDF5 (through ``hdf5plugin``), after every chunk's framing (declared size, block sizes) has
been checked against the chunk: its decoder writes at most the declared bytes, and reads only inside the chunk.
``hdf5plugin`` is imported only when a dataset needs it (bitshuffle to read, or a blosc, bitshuffle or zstd write).

A whole dataset is read a span of neighbouring chunks at a time (one ``pread`` for many chunks), each full chunk
decoded straight into its place in the result. Julia's default chunks (blosc, zstd, bitshuffle) go through
:class:`_FastBlosc`, which keeps a zstd context per thread (3x faster than numcodecs' blosc on 8 KB chunks: ~8 against
~25 µs) and leaves any frame it does not fully check to numcodecs; other codecs are decoded on the kernels' threads.
"""

from __future__ import annotations

import math
import os
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t, h5z

from ...core.packed_settings import PackedCodec
from ...errors import DafFormatError
from ..packed.shard import zstd_content_size

#: HDF5 filter ids (the registered plugin ids; 1 and 2 are built into HDF5).
DEFLATE = 1
SHUFFLE = 2
BLOSC = 32001
BITSHUFFLE = 32008
ZSTD = 32015

#: The filter pipelines read (in HDF5's write order): Julia's six codecs, and h5py's plain shuffle.
KNOWN_PIPELINES = {
    (BLOSC,): "blosc", (BITSHUFFLE,): "bitshuffle + zstd", (ZSTD,): "zstd", (DEFLATE,): "gzip",
    (SHUFFLE, DEFLATE): "shuffle + gzip", (SHUFFLE,): "shuffle",
}

_BLOSC_BITSHUFFLE = 2  # (blosc's shuffle mode numbers)
_BLOSC_COMPRESSOR_CODES = {"zstd": 5, "lz4": 1}  # (blosc's compressor numbers: blosc_compname_to_compcode)
_BITSHUFFLE_ZSTD = 3  # (bshuf_h5filter.h: BSHUF_H5_COMPRESS_ZSTD; 2 is LZ4)
_BITSHUFFLE_BLOCKED_MULT = 8  # (bitshuffle.h: a block is a multiple of 8 elements)

#: Packed data at least this large is decoded on the kernels' threads (below, handing work out costs more than it
#: saves); from :data:`_PARALLEL_IMPORT_BYTES` only, where numba is not imported yet (the threads' first use imports it:
#: ~0.2 s, for a decode of a few ms).
_PARALLEL_MIN_BYTES = 1 << 20
_PARALLEL_IMPORT_BYTES = 8 << 20


@cache
def load_filter_plugins() -> None:
    """Register the blosc, bitshuffle and zstd HDF5 filters (``import hdf5plugin``, 15-20 ms): only when a dataset
    needs them, so ``import pydaf`` does not pay for it.

    Example:
        >>> load_filter_plugins()
        >>> import h5py.h5z
        >>> h5py.h5z.filter_avail(32008)
        True
    """
    import hdf5plugin  # noqa: F401 - importing registers the filters


def create_packed_dataset(group: h5py.Group, name: str, dtype: np.dtype, shape: tuple[int, ...],
                          chunk: tuple[int, ...], codec: PackedCodec) -> h5py.Dataset:
    """Create a chunked, filtered dataset as Julia's ``write_packed_dense_dataset!`` does: ``shape`` is HDF5's (C
    order), ``chunk`` Julia's (:func:`~pydaf.core.packed_settings.chunks_for`), reversed into HDF5's. Bool is HDF5's
    ``B8`` bitfield, as everywhere in H5df.

    Example:
        >>> import h5py, numpy as np, os, tempfile
        >>> from pydaf.core.packed_settings import compressor_for
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     dataset = create_packed_dataset(file, "x", np.dtype("int32"), (10, 4096), (2048, 1),
        ...                                     compressor_for("gzip_shuffle", 5))
        ...     plist = dataset.id.get_create_plist()
        ...     dataset.chunks, [plist.get_filter(index)[:3] for index in range(plist.get_nfilters())]
        ((1, 2048), [(2, 1, (4,)), (1, 1, (5,))])
    """
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_chunk(tuple(reversed(chunk)))
    set_filters(dcpl, codec)
    tid = h5t.STD_B8LE if dtype == np.bool_ else h5t.py_create(dtype)
    return h5py.Dataset(h5d.create(group.id, name.encode(), tid, h5s.create_simple(shape), dcpl=dcpl))


def set_filters(dcpl: h5p.PropDCID, codec: PackedCodec) -> None:
    """Add the filter pipeline of ``codec`` to a dataset creation property list, as Julia's ``hdf5_filters_for``
    (see the module's docstring for the ``cd_values``)."""
    level = codec.compression_level
    compression = codec.compression
    if compression in ("blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle"):
        load_filter_plugins()
        code = _BLOSC_COMPRESSOR_CODES[compression.split("_")[1]]
        # (HDF5.jl's BloscFilter: 4 slots its set_local fills, level, shuffle, compressor)
        dcpl.set_filter(BLOSC, h5z.FLAG_OPTIONAL, (0, 0, 0, 0, level, _BLOSC_BITSHUFFLE, code))
    elif compression == "zstd_bitshuffle":
        load_filter_plugins()
        # (HDF5.jl's BitshuffleFilter holds [0, 4, 0, 0, 3, level], its first 3 slots filled by its set_local; the C
        # plugin's set_local prepends those 3 slots to the values given, so giving it the last 3 stores the same 6)
        dcpl.set_filter(BITSHUFFLE, h5z.FLAG_OPTIONAL, (0, _BITSHUFFLE_ZSTD, level))
    elif compression == "zstd":
        load_filter_plugins()
        dcpl.set_filter(ZSTD, h5z.FLAG_OPTIONAL, (level,))
    elif compression == "gzip":
        dcpl.set_deflate(level)
    else:
        assert compression == "gzip_shuffle", compression
        dcpl.set_shuffle()
        dcpl.set_deflate(level)


def write_packed(group: h5py.Group, name: str, values: np.ndarray, chunk: tuple[int, ...],
                 codec: PackedCodec) -> h5py.Dataset:
    """Write a numeric array (C order, HDF5 shape) as a packed dataset (HDF5 compresses it chunk by chunk)."""
    array = np.ascontiguousarray(values)
    dataset = create_packed_dataset(group, name, array.dtype, array.shape, chunk, codec)
    if array.size:
        if array.dtype == np.bool_:
            dataset.id.write(h5s.ALL, h5s.ALL, array.view(np.uint8), mtype=h5t.NATIVE_B8)
        else:
            dataset.id.write(h5s.ALL, h5s.ALL, array)
    return dataset


def filter_pipeline(dataset: h5py.Dataset) -> list[tuple[int, int, tuple[int, ...], str]]:
    """The dataset's filters in HDF5's (write) order: ``(id, flags, cd_values, name)`` each."""
    dcpl = dataset.id.get_create_plist()
    pipeline = []
    for index in range(dcpl.get_nfilters()):
        filter_id, flags, values, name = dcpl.get_filter(index)
        pipeline.append((int(filter_id), int(flags), tuple(int(value) for value in values),
                         name.decode("utf-8", "replace")))
    return pipeline


def read_packed(dataset: h5py.Dataset, stored: np.dtype, what: str, path: str) -> np.ndarray:
    """The values of a chunked dataset (HDF5 shape, ``stored`` dtype), decoded chunk by chunk into one array of its
    declared shape (whose size the caller has checked); read-only. Anything a chunk says that disagrees with the
    dataset (its place, its stored or decoded size, its framing) is a :class:`~pydaf.DafFormatError` naming ``what``
    (the property) and ``path``."""
    where = f"the {what}\nin the H5df file: {path}"
    pipeline = filter_pipeline(dataset)
    ids = tuple(filter_id for filter_id, *_ in pipeline)
    if math.prod(dataset.shape) == 0:
        return np.zeros(dataset.shape, dtype=stored)
    if ids and ids not in KNOWN_PIPELINES:
        names = ", ".join(f"{name or 'unnamed'} ({filter_id})" for filter_id, _, _, name in pipeline)
        known = "; ".join(f"{text} ({', '.join(str(filter_id) for filter_id in key)})"
                          for key, text in KNOWN_PIPELINES.items())
        raise DafFormatError(f"{where}\nis compressed with the HDF5 filters: {names}\n(pydaf reads the filter "
                             f"pipelines Julia's Daf writes: {known})")
    chunk = tuple(int(size) for size in dataset.chunks)
    chunk_bytes = math.prod(chunk) * stored.itemsize
    if chunk_bytes == 0:
        raise DafFormatError(f"{where}\nhas the empty HDF5 chunk shape: {chunk}")
    stores, table = _stored_chunks(dataset, chunk, where, path)
    # (Absent chunks read as the fill value: 0 for Daf's datasets. Where every chunk is stored, each decoded value
    # is written once: zeroing first would touch all the memory once more.)
    complete = bool(ids) and ids != (BITSHUFFLE,) and len(stores) == math.prod(
        -(-extent // size) for extent, size in zip(dataset.shape, chunk, strict=True))
    values = (np.empty if complete else np.zeros)(dataset.shape, dtype=stored)
    if not ids:  # (chunked, not filtered: HDF5 reads each chunk's declared bytes, no more)
        dataset.read_direct(values)
    elif ids == (BITSHUFFLE,):
        stores.sort(key=lambda info: info.byte_offset)
        with _chunk_reader(dataset, path) as chunks:
            for info, raw, _ in chunks.read(stores, 0, len(stores)):
                _check_bitshuffle_chunk(raw, info, pipeline[0][2], chunk_bytes, stored.itemsize, where)
        load_filter_plugins()
        dataset.read_direct(values)
    else:
        with _chunk_reader(dataset, path) as chunks:
            _decode_chunks(values, stores, table, chunks, pipeline, chunk, chunk_bytes, where)
    values.flags.writeable = False
    return values


def read_packed_selection(dataset: h5py.Dataset, stored: np.dtype, what: str, path: str, *,
                          runs: tuple[np.ndarray, np.ndarray] | None = None,
                          rows: np.ndarray | None = None) -> np.ndarray | None:
    """Part of a chunked dataset, decoding only the chunks that hold it (each checked as :func:`read_packed` checks
    them): the ``runs`` ``(starts, stops)`` of a 1-D dataset, concatenated; or the HDF5 ``rows`` of a 2-D one (Daf's
    columns of a matrix), as a ``(columns, len(rows))`` column-major array. ``None`` where the dataset is not one
    pydaf decodes itself (not chunked, unfiltered, or bitshuffle alone, which HDF5 decodes): the caller reads it
    whole."""
    where = f"the {what}\nin the H5df file: {path}"
    if dataset.id.get_create_plist().get_layout() != h5d.CHUNKED or dataset.chunks is None:
        return None
    pipeline = filter_pipeline(dataset)
    ids = tuple(filter_id for filter_id, *_ in pipeline)
    if not ids or ids == (BITSHUFFLE,) or ids not in KNOWN_PIPELINES:
        return None
    chunk = tuple(int(size) for size in dataset.chunks)
    chunk_bytes = math.prod(chunk) * stored.itemsize
    if chunk_bytes == 0:
        raise DafFormatError(f"{where}\nhas the empty HDF5 chunk shape: {chunk}")
    if runs is not None:
        assert dataset.ndim == 1
        starts, stops = (np.asarray(bound, dtype=np.int64) for bound in runs)
        keep = stops > starts
        starts, stops = starts[keep], stops[keep]
        needed = {int(index) * chunk[0] for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)
                  for index in range(start // chunk[0], (stop - 1) // chunk[0] + 1)}
    else:
        assert dataset.ndim == 2 and rows is not None
        needed_rows = {int(row) // chunk[0] * chunk[0] for row in np.asarray(rows).tolist()}
    stores = [info for info in _stored_chunks(dataset, chunk, where, path)[0]
              if (int(info.chunk_offset[0]) in needed if runs is not None else
                  int(info.chunk_offset[0]) in needed_rows)]
    decoded: dict[tuple[int, ...], np.ndarray] = {}
    stores.sort(key=lambda info: info.byte_offset)
    with _chunk_reader(dataset, path) as chunks:
        for info, raw, _ in chunks.read(stores, 0, len(stores)):
            data = _decode_chunk(raw, info.filter_mask, pipeline, chunk_bytes, stored.itemsize,
                                 f"{where}\nits chunk at: {tuple(info.chunk_offset)}")
            decoded[tuple(int(start) for start in info.chunk_offset)] = np.frombuffer(data, dtype=stored).reshape(
                chunk)
    missing = np.zeros(chunk, dtype=stored)  # (a chunk not stored holds the fill value: 0 for Daf's datasets)
    if runs is not None:
        result = np.empty(int((stops - starts).sum()) if starts.size else 0, dtype=stored)
        at = 0
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            position = start
            while position < stop:
                first = position // chunk[0] * chunk[0]
                end = min(stop, first + chunk[0])
                result[at:at + end - position] = decoded.get((first,), missing)[position - first:end - first]
                at += end - position
                position = end
        return result
    assert rows is not None
    n_columns = dataset.shape[1]
    result = np.empty((n_columns, len(rows)), dtype=stored, order="F")
    for at, row in enumerate(np.asarray(rows).tolist()):
        first = row // chunk[0] * chunk[0]
        for column in range(0, n_columns, chunk[1]):
            end = min(column + chunk[1], n_columns)
            result[column:end, at] = decoded.get((first, column), missing)[row - first, :end - column]
    return result


def _decode_chunks(values: np.ndarray, stores: list[Any], table: np.ndarray, chunks: _RawChunks,
                   pipeline: list[tuple[int, int, tuple[int, ...], str]], chunk: tuple[int, ...], chunk_bytes: int,
                   where: str) -> None:
    """Decode each stored chunk into its place in ``values`` (a full chunk straight into it, a partial edge chunk
    through a scratch buffer, its padding dropped), its bytes read a span of neighbouring chunks at a time, on the
    kernels' threads for large data (the codecs release the GIL while they decode; each thread a run of chunks)."""
    itemsize = values.dtype.itemsize
    # Julia's chunks are one tile of one column: [n] or [1, n], so a chunk is a run of the flat C-order values.
    runs = values.ndim == 1 or (values.ndim == 2 and chunk[0] == 1)
    flat = values.reshape(-1)
    flat_bytes = flat.view(np.uint8)
    order = np.argsort(table[:, 0], kind="stable") if len(stores) else np.zeros(0, dtype=np.int64)
    stores = [stores[index] for index in order.tolist()]  # (in file order: neighbours are read at once)
    table = table[order]
    flat_address = flat_bytes.ctypes.data
    chunk_size, row_length, two_dimensional = chunk[-1], values.shape[-1], values.ndim == 2

    def decode(first: int, last: int, chosen: list[Any] = stores) -> None:
        scratch = np.empty(chunk_bytes, dtype=np.uint8)
        for info, raw, address in chunks.read(chosen, first, last):
            context = _ChunkWhere(where, info.chunk_offset)
            if runs:
                start = info.chunk_offset[-1]
                count = chunk_size if start + chunk_size <= row_length else row_length - start
                if two_dimensional:
                    start += info.chunk_offset[0] * row_length
                if count == chunk_size:  # (a full chunk: decoded in place)
                    _decode_chunk(raw, info.filter_mask, pipeline, chunk_bytes, itemsize, context,
                                  out=flat_bytes[start * itemsize:(start + count) * itemsize],
                                  addresses=None if address is None else (address, flat_address + start * itemsize))
                    continue
                _decode_chunk(raw, info.filter_mask, pipeline, chunk_bytes, itemsize, context, out=scratch,
                              addresses=None if address is None else (address, scratch.ctypes.data))
                flat[start:start + count] = scratch.view(values.dtype)[:count]
                continue
            decoded = _decode_chunk(raw, info.filter_mask, pipeline, chunk_bytes, itemsize, context)
            chunk_values = np.frombuffer(decoded, dtype=values.dtype)
            region = tuple(slice(start, min(start + size, extent))
                           for start, size, extent in zip(info.chunk_offset, chunk, values.shape, strict=True))
            values[region] = chunk_values.reshape(chunk)[tuple(slice(0, part.stop - part.start) for part in region)]

    small = values.nbytes < _PARALLEL_MIN_BYTES or (values.nbytes < _PARALLEL_IMPORT_BYTES
                                                    and "numba" not in sys.modules)
    fast = _fast_blosc() if len(pipeline) == 1 and pipeline[0][0] == BLOSC else None
    if fast is not None and not small and runs and chunks.descriptor is not None:
        # (Julia's blosc chunks, many: decoded by a numba loop calling zstd and bitshuffle, on the kernels' threads;
        # what it leaves, the checked way.)
        left = _decode_blosc_batches(fast, flat_bytes, stores, table, chunks, chunk_size, row_length, chunk_bytes,
                                     two_dimensional)
        decode(0, len(left), left)
        return
    if small or fast is not None:
        # (Julia's blosc chunks through _FastBlosc, one by one: 2 threads take longer than one, 52 against 38 ms for
        # 4,904 chunks of 8 KB: each chunk is two calls of 2-4 µs, and the threads pass the GIL around each.)
        decode(0, len(stores))
        return
    from ...kernels.threads import even_bounds, number_of_threads, run_ranges

    run_ranges(decode, even_bounds(len(stores), number_of_threads()))


def _decode_blosc_batches(fast: _FastBlosc, flat_bytes: np.ndarray, stores: list[Any], table: np.ndarray,
                          chunks: _RawChunks, chunk_size: int, row_length: int, chunk_bytes: int,
                          two_dimensional: bool) -> list[Any]:
    """Decode the full chunks of ``stores`` (in file order; ``table``: their :func:`_chunk_table`) with
    :func:`pydaf.kernels._blosc.decode_blosc_chunks`, into their places in ``flat_bytes`` (the values' bytes, as
    :func:`_decode_chunks` lays them), spans of the file a thread at a time; the chunks it did not decode (an edge
    chunk, a filter skipped, a frame of another form, a corrupt one) are returned."""
    from ...kernels import _blosc
    from ...kernels.threads import even_bounds, number_of_threads, run_ranges

    itemsize = chunk_bytes // chunk_size  # (a chunk of Julia's is one run of chunk_size values)
    places, masks, offsets = table[:, :2], table[:, 2], table[:, 3:]
    first_values = offsets[:, -1] + (offsets[:, 0] * row_length if two_dimensional else 0)
    full = (offsets[:, -1] + chunk_size <= row_length) & (masks & 1 == 0)
    out_starts = np.where(full, first_values * itemsize, -1).astype(np.int64)
    n_threads = number_of_threads()
    span_bytes = min(_SPAN_BYTES, max(1 << 16, int(places[:, 1].sum()) // (4 * n_threads)))
    spans = list(chunks.spans(stores, 0, len(stores), span_bytes))
    failed = np.zeros(len(stores), dtype=np.uint8)
    decompress, unshuffle = fast.natives()

    def run(first: int, last: int) -> None:
        state = fast.thread_state(chunk_bytes)
        for at, end, begin, span_end in spans[first:last]:
            span = np.frombuffer(chunks.pread(begin, span_end - begin), dtype=np.uint8)
            _blosc.decode_blosc_chunks(span, places[at:end, 0] - begin, places[at:end, 1], flat_bytes,
                                       out_starts[at:end], chunk_bytes, state.context, state.scratch, decompress,
                                       unshuffle, failed[at:end])

    run_ranges(run, even_bounds(len(spans), n_threads))
    return [stores[index] for index in np.flatnonzero(failed).tolist()]


class _ChunkWhere:
    """``where`` a chunk is, for an error message: made only if one is raised (a string per chunk costs ~1 µs)."""

    __slots__ = ("offset", "where")

    def __init__(self, where: str, offset: tuple[int, ...]) -> None:
        self.where, self.offset = where, offset

    def __str__(self) -> str:
        return f"{self.where}\nits chunk at: {tuple(self.offset)}"


#: The most bytes of neighbouring chunks read at once (a thread holds one such span; the spans of a dataset whose
#: chunks are contiguous in the file, as HDF5 writes them, are one read each).
_SPAN_BYTES = 4 << 20


class _RawChunks:
    """How to read stored chunks' bytes: straight from the file at the places the chunk index gives (checked by
    :func:`_stored_chunks`), neighbouring chunks in one read of at most :data:`_SPAN_BYTES` (a chunk of 8 KB costs
    30 µs less than asking HDF5 to look each up again, and one read per span saves a system call per chunk); through
    HDF5 where the file is not a plain file on disk (an h5py file in memory)."""

    def __init__(self, dataset: h5py.Dataset, descriptor: int | None) -> None:
        self.dataset, self.descriptor = dataset, descriptor

    def read(self, stores: list[Any], first: int, last: int) -> Iterator[tuple[Any, Any, int | None]]:
        """Each chunk of ``stores[first:last]`` (in file order) with its bytes (a memoryview of the span read) and
        their address in memory (``None`` if read through HDF5)."""
        if self.descriptor is None:
            for info in stores[first:last]:
                yield info, self.dataset.id.read_direct_chunk(info.chunk_offset)[1], None
            return
        for at, end, begin, span_end in self.spans(stores, first, last):
            span = self.pread(begin, span_end - begin)
            data = memoryview(span)
            address = np.frombuffer(span, dtype=np.uint8).ctypes.data if span else 0
            for info in stores[at:end]:
                at_offset = info.byte_offset - begin
                yield info, data[at_offset:at_offset + info.size], address + at_offset

    @staticmethod
    def spans(stores: list[Any], first: int, last: int,
              span_bytes: int = _SPAN_BYTES) -> Iterator[tuple[int, int, int, int]]:
        """The runs ``stores[at:end]`` (in file order) read at once, each with the file bytes ``begin:span_end`` it
        covers: neighbouring chunks, while the bytes between them are few, up to ``span_bytes`` (or one chunk)."""
        at = first
        while at < last:
            begin = stores[at].byte_offset
            span_end = begin + stores[at].size
            end = at + 1
            while end < last:
                info = stores[end]
                if info.byte_offset - span_end > 4096 or info.byte_offset + info.size - begin > span_bytes:
                    break
                span_end = max(span_end, info.byte_offset + info.size)
                end += 1
            yield at, end, begin, span_end
            at = end

    def pread(self, offset: int, length: int) -> bytes:
        assert self.descriptor is not None
        data = os.pread(self.descriptor, length, offset)
        if len(data) != length:
            raise OSError(f"read {len(data)} of the {length} bytes of chunks at: {offset}")
        return data


@contextmanager
def _chunk_reader(dataset: h5py.Dataset, path: str) -> Iterator[_RawChunks]:
    """The :class:`_RawChunks` of a dataset (a plain file on disk opened once, for the duration)."""
    if dataset.file.driver not in ("sec2", "fileobj") or not os.path.isfile(path):
        yield _RawChunks(dataset, None)
        return
    with open(path, "rb") as handle:
        yield _RawChunks(dataset, handle.fileno())


def _stored_chunks(dataset: h5py.Dataset, chunk: tuple[int, ...], where: str,
                   path: str) -> tuple[list[Any], np.ndarray]:
    """The dataset's stored chunks (HDF5's chunk index), each checked: on the chunk grid, inside the dataset, once,
    its bytes inside the file; and their :func:`_chunk_table`."""
    stores: list[Any] = []
    if hasattr(dataset.id, "chunk_iter"):  # (HDF5 1.12.3 and later: one pass over the chunk index)
        dataset.id.chunk_iter(stores.append)
    else:
        stores = [dataset.id.get_chunk_info(index) for index in range(dataset.id.get_num_chunks())]
    file_size = os.path.getsize(path)
    table = _chunk_table(stores)
    if table is not None and _well_placed(stores, chunk, dataset.shape, file_size, table):
        return stores, table
    seen = set()  # (a chunk is misplaced: find the first, for the error)
    for info in stores:
        offset = tuple(int(start) for start in info.chunk_offset)
        if len(offset) != len(chunk) or offset in seen or any(
                start % size or start >= extent
                for start, size, extent in zip(offset, chunk, dataset.shape, strict=True)):
            raise DafFormatError(f"{where}\nhas a chunk at: {offset}\noff its grid of chunks: {chunk}\n(for the "
                                 f"shape: {dataset.shape})")
        seen.add(offset)
        if info.byte_offset is None or info.byte_offset + info.size > file_size:
            raise DafFormatError(f"{where}\nhas a chunk at: {offset}\nof {info.size} bytes at: {info.byte_offset}\n"
                                 f"past the end of the file ({file_size} bytes)")
    raise DafFormatError(f"{where}\nhas a chunk index pydaf can't place")  # (unreachable: a check above failed)


def _chunk_table(stores: list[Any]) -> np.ndarray | None:
    """Per chunk: its byte offset, size, filter mask and chunk offset (``int64``, one row each), or ``None`` if a
    chunk's are not integers of one length (a missing byte offset, a ragged or huge chunk offset)."""
    if not stores:
        return np.zeros((0, 3), dtype=np.int64)
    try:
        table = np.array([(info.byte_offset, info.size, info.filter_mask, *info.chunk_offset) for info in stores],
                         dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return None
    return table if table.ndim == 2 else None


def _well_placed(stores: list[Any], chunk: tuple[int, ...], shape: tuple[int, ...], file_size: int,
                 table: np.ndarray | None = None) -> bool:
    """Whether all the chunks are on the grid, inside the shape, each once, and inside the file (the checks of
    :func:`_stored_chunks`, on arrays: ~1 µs a chunk less); ``table``: their :func:`_chunk_table`, if made."""
    if not stores:
        return True
    table = _chunk_table(stores) if table is None else table
    if table is None or table.shape != (len(stores), 3 + len(chunk)):
        return False
    offsets, places = table[:, 3:], table[:, :2]
    sizes, extents = np.array(chunk, dtype=np.int64), np.array(shape, dtype=np.int64)
    if (offsets < 0).any() or (offsets % sizes).any() or (offsets >= extents).any():
        return False
    grid = offsets // sizes
    linear = np.ravel_multi_index(tuple(grid.T), tuple(-(-extents // sizes)))
    if np.unique(linear).size != len(stores):
        return False
    return not ((places < 0).any() or (places[:, 0] + places[:, 1] > file_size).any())


def _decode_chunk(raw: Any, mask: int, pipeline: list[tuple[int, int, tuple[int, ...], str]], chunk_bytes: int,
                  itemsize: int, where: Any, *, out: np.ndarray | None = None,
                  addresses: tuple[int, int] | None = None) -> Any:
    """Undo a chunk's filters (in reverse order, skipping those its mask says were not applied), each decoding into
    at most ``chunk_bytes`` (every filter Julia uses keeps the size of its input, but compressing ones); into ``out``
    (``chunk_bytes`` bytes, returned) if given: a blosc or zstd chunk (Julia's usual pipelines) straight into it.
    With the ``addresses`` of ``raw``'s bytes and of ``out``, Julia's blosc chunks go through :class:`_FastBlosc`."""
    if addresses is not None and out is not None and not mask & 1 and len(pipeline) == 1 \
            and pipeline[0][0] == BLOSC:
        fast = _fast_blosc()
        if fast is not None and fast.decode(raw, addresses[0], addresses[1], chunk_bytes):
            return out
    data: Any = raw  # (bytes, a memoryview, or a numpy array of bytes)
    applied = [index for index in reversed(range(len(pipeline))) if not mask & (1 << index)]
    for index in applied:
        filter_id, _, cd_values, _ = pipeline[index]
        try:
            data = _undo_filter(filter_id, cd_values, data, chunk_bytes, itemsize, where,
                                out if len(applied) == 1 else None)
        except DafFormatError:
            raise
        except (ValueError, RuntimeError, zlib.error, MemoryError) as error:
            raise DafFormatError(f"{where}\ncan't be decoded (it is corrupt)\n({type(error).__name__}: {error})") \
                from error
        _check_size(data, chunk_bytes, where)
    _check_size(data, chunk_bytes, where)
    if out is not None and data is not out:
        out[:] = np.frombuffer(data, dtype=np.uint8)
        return out
    return data


def _check_size(data: Any, chunk_bytes: int, where: str) -> None:
    size = len(memoryview(data).cast("B"))
    if size != chunk_bytes:
        raise DafFormatError(f"{where}\nholds {size} bytes\ninstead of the {chunk_bytes} bytes of its chunk")


def _undo_filter(filter_id: int, cd_values: tuple[int, ...], data: Any, chunk_bytes: int, itemsize: int,
                 where: Any, out: np.ndarray | None = None) -> Any:
    if filter_id == DEFLATE:
        inflater = zlib.decompressobj()
        inflated = inflater.decompress(data, chunk_bytes)
        if not inflater.eof and inflater.decompress(inflater.unconsumed_tail, 1):  # (one byte more, at most)
            raise DafFormatError(f"{where}\ndecompresses to more than the {chunk_bytes} bytes of its chunk (a "
                                 "decompression bomb, or a corrupt chunk)")
        if not inflater.eof:
            raise DafFormatError(f"{where}\nis a truncated deflate stream ({len(inflated)} of {chunk_bytes} bytes)")
        return inflated
    if filter_id == SHUFFLE:
        element_size = cd_values[0] if cd_values else itemsize
        if element_size != itemsize:
            raise DafFormatError(f"{where}\nis shuffled by elements of {element_size} bytes, not {itemsize}")
        return _codec("Shuffle", element_size).decode(data)
    if filter_id == BLOSC:
        view = memoryview(data).cast("B")
        if len(view) < 16:
            raise DafFormatError(f"{where}\nis too short for a blosc chunk ({len(view)} bytes)")
        _, _, _, _, nbytes, _, cbytes = _BLOSC_HEADER.unpack_from(view)
        if nbytes != chunk_bytes:
            raise DafFormatError(f"{where}\ndeclares {nbytes} bytes\ninstead of the {chunk_bytes} bytes of its chunk")
        if cbytes > len(view):
            raise DafFormatError(f"{where}\ndeclares {cbytes} compressed bytes but holds {len(view)}")
        output = np.empty(chunk_bytes, dtype=np.uint8) if out is None else out
        _blosc_decompress()(view, output)  # (numcodecs' function: its codec's wrapping costs ~8 µs a chunk)
        return output
    assert filter_id == ZSTD, filter_id
    size = zstd_content_size(memoryview(data).cast("B"))
    if size != chunk_bytes:
        declared = "no size" if size is None else f"{size} bytes"
        raise DafFormatError(f"{where}\nis a zstd frame declaring {declared}\ninstead of the {chunk_bytes} bytes of "
                             "its chunk")
    output = np.empty(chunk_bytes, dtype=np.uint8) if out is None else out
    _codec("Zstd").decode(data, out=output)
    return output


_BLOSC_HEADER = struct.Struct("<BBBBIII")
_INT32 = struct.Struct("<i")
_FAST_BLOSC_HEADER = struct.Struct("<BBBBIIIi")  # (the header, and where the first block starts)
#: The blosc 1 frames :class:`_FastBlosc` decodes: flags of bit shuffle (0x04), unsplit blocks (0x10) and the zstd
#: format (4 << 5), nothing else (no byte shuffle, not stored raw); zstd's format version in blosc.
_FAST_BLOSC_FLAGS = 0x04 | 0x10 | 4 << 5
_BLOSC_ZSTD_FORMAT_VERSION = 1


class _FastBlosc:
    """Julia's blosc chunks (``blosc_zstd_bitshuffle``: blosc 1 frames of one block, bit-shuffled, then
    zstd-compressed) decoded with a zstd context kept per thread. numcodecs' blosc makes and frees a zstd context for
    every chunk: ~14 of the ~22 µs an 8 KB chunk takes. The zstd functions are numcodecs' own (its zstd extension
    exports them), the bit unshuffle is hdf5plugin's bitshuffle library (loaded without importing hdf5plugin, which
    registers HDF5 filters); both release the GIL (``ctypes``). Every size and offset the frame declares is checked
    against the chunk's bytes and its declared chunk size before a byte is decoded; a frame of any other form, or
    that does not decode to exactly its block, is left to numcodecs' blosc (which decodes it or raises the error that
    names the property)."""

    def __init__(self) -> None:
        import ctypes
        import importlib.util

        import numcodecs.zstd

        zstd = ctypes.CDLL(numcodecs.zstd.__file__)
        spec = importlib.util.find_spec("hdf5plugin")
        if spec is None or not spec.submodule_search_locations:
            raise OSError("no hdf5plugin")
        plugins = os.path.join(next(iter(spec.submodule_search_locations)), "plugins")
        names = [name for name in os.listdir(plugins) if name.startswith("libh5bshuf.")]  # (.so, .dylib, .dll)
        if len(names) != 1:
            raise OSError(f"no single bitshuffle library in: {plugins}")
        bitshuffle = ctypes.CDLL(os.path.join(plugins, names[0]))
        self._create = zstd.ZSTD_createDCtx
        self._create.restype, self._create.argtypes = ctypes.c_void_p, []
        self._free = zstd.ZSTD_freeDCtx
        self._free.restype, self._free.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
        self._decompress = zstd.ZSTD_decompressDCtx
        self._decompress.restype = ctypes.c_size_t
        self._decompress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                     ctypes.c_size_t]
        self._unshuffle = bitshuffle.bshuf_bitunshuffle
        self._unshuffle.restype = ctypes.c_int64
        self._unshuffle.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                                    ctypes.c_size_t]
        self._threads = threading.local()
        self._natives: tuple[Any, Any] | None = None

    def decode(self, raw: Any, address: int, out_address: int, chunk_bytes: int) -> bool:
        """Decode the blosc frame ``raw`` (whose bytes are at ``address``) into the ``chunk_bytes`` bytes at
        ``out_address``, if it is one of Julia's (see the class); ``False`` if not (nothing decoded, or a block that
        did not decode exactly: the caller decodes it the checked way)."""
        size = len(raw)
        if size < 24:
            return False
        version, version_lz, flags, typesize, nbytes, block, cbytes, start = _FAST_BLOSC_HEADER.unpack_from(raw)
        if flags != _FAST_BLOSC_FLAGS or version not in (2, 3) or version_lz != _BLOSC_ZSTD_FORMAT_VERSION \
                or nbytes != chunk_bytes or block != nbytes or cbytes > size or typesize == 0 \
                or block % (8 * typesize) or start < 20 or start + 4 > cbytes:
            return False  # (not one block of a multiple of 8 elements, bitshuffle's unit, starting in the frame)
        (length,) = _INT32.unpack_from(raw, start)
        if length <= 0 or length >= block or start + 4 + length > cbytes:  # (a block stored raw: left to blosc)
            return False
        state = self.thread_state(block)
        if self._decompress(state.context, state.address, block, address + start + 4, length) != block:
            return False  # (an error code, or fewer bytes: corrupt)
        elements = block // typesize
        return self._unshuffle(state.address, out_address, elements, typesize, elements) == block

    def thread_state(self, block: int) -> _ZstdState:
        """This thread's zstd context, with a scratch buffer of at least ``block`` bytes."""
        state = self._threads.__dict__.get("state")
        if state is None or state.scratch.nbytes < block:
            state = self._threads.state = _ZstdState(self._create, self._free, block)
        return state

    def natives(self) -> tuple[Any, Any]:
        """``ZSTD_decompressDCtx`` and ``bshuf_bitunshuffle`` as numba first-class functions (every argument an
        ``int64``), for :func:`pydaf.kernels._blosc.decode_blosc_chunks` (imports numba)."""
        if self._natives is None:
            import ctypes

            from numba import types
            from numba.experimental import function_type  # noqa: F401  (registers the typing of the wrappers)

            signature = types.int64(types.int64, types.int64, types.int64, types.int64, types.int64)

            class Native(types.WrapperAddressProtocol):
                def __init__(self, function: Any) -> None:
                    self._address = int(ctypes.cast(function, ctypes.c_void_p).value or 0)

                def __wrapper_address__(self) -> int:
                    return self._address

                def signature(self) -> Any:
                    return signature

            self._natives = (Native(self._decompress), Native(self._unshuffle))
        return self._natives


class _ZstdState:
    """A thread's zstd decompression context and the scratch buffer of the block it decodes (freed with it)."""

    def __init__(self, create: Any, free: Any, size: int) -> None:
        self.free = free
        self.context = create()
        if not self.context:
            raise MemoryError("can't make a zstd decompression context")
        self.scratch = np.empty(size, dtype=np.uint8)
        self.address = self.scratch.ctypes.data

    def __del__(self) -> None:
        self.free(self.context)


@cache
def _fast_blosc() -> _FastBlosc | None:
    """The :class:`_FastBlosc` decoder, or ``None`` where its libraries can't be loaded (numcodecs' blosc decodes
    every chunk then)."""
    try:
        return _FastBlosc()
    except (OSError, AttributeError, ImportError):
        return None


@cache
def _blosc_decompress() -> Callable[[Any, np.ndarray], Any]:
    """numcodecs' blosc ``decompress(source, dest)`` (imported when first needed)."""
    from numcodecs import blosc

    return blosc.decompress


@cache
def _codec(name: str, *arguments: int) -> Any:
    """A numcodecs codec (decoding only: its settings don't matter), made once (numcodecs is imported when first
    needed)."""
    import numcodecs

    if name == "Shuffle":
        return numcodecs.Shuffle(elementsize=arguments[0])
    return getattr(numcodecs, name)()


def _check_bitshuffle_chunk(raw: bytes, info: Any, cd_values: tuple[int, ...], chunk_bytes: int, itemsize: int,
                            where: str) -> None:
    """Check a bitshuffle + zstd chunk's framing (bshuf_h5filter.c: an 8-byte big-endian size, a 4-byte block size in
    bytes, then each block's 4-byte compressed size and bytes, then the elements past the last multiple of 8, raw)
    against its chunk, so the plugin decodes into exactly the chunk's bytes and reads only inside it."""
    where = f"{where}\nits chunk at: {tuple(info.chunk_offset)}"
    if info.filter_mask & 1 or len(cd_values) < 5 or cd_values[4] not in (2, _BITSHUFFLE_ZSTD):  # (no framing)
        if len(raw) != chunk_bytes:
            raise DafFormatError(f"{where}\nholds {len(raw)} bytes\ninstead of the {chunk_bytes} bytes of its chunk")
        return
    element_size = cd_values[2] if len(cd_values) > 2 else itemsize
    if element_size != itemsize or len(raw) < 12:
        raise DafFormatError(f"{where}\nis not a bitshuffle chunk of {itemsize}-byte elements")
    nbytes, block_bytes = struct.unpack(">QI", raw[:12])
    if nbytes != chunk_bytes:
        raise DafFormatError(f"{where}\ndeclares {nbytes} bytes\ninstead of the {chunk_bytes} bytes of its chunk")
    block = block_bytes // itemsize
    if block_bytes % itemsize or block == 0 or block % _BITSHUFFLE_BLOCKED_MULT:
        raise DafFormatError(f"{where}\ndeclares the bitshuffle block size: {block_bytes} bytes (not a multiple of "
                             f"{_BITSHUFFLE_BLOCKED_MULT} elements of {itemsize} bytes)")
    elements = nbytes // itemsize
    last = elements % block - elements % block % _BITSHUFFLE_BLOCKED_MULT
    position = 12
    for _ in range(elements // block + (1 if last else 0)):
        if position + 4 > len(raw):
            raise DafFormatError(f"{where}\nis cut short (its blocks run past its {len(raw)} bytes)")
        (size,) = struct.unpack(">I", raw[position:position + 4])
        position += 4 + size
    if position + elements % _BITSHUFFLE_BLOCKED_MULT * itemsize > len(raw):
        raise DafFormatError(f"{where}\nis cut short (its blocks run past its {len(raw)} bytes)")
