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
decoded straight into its place in the result (a 1-D result is padded to whole chunks, so its last chunk is too).
Julia's default chunks (blosc, zstd, bitshuffle) go through :class:`_FastBlosc`, which keeps a zstd context per
thread (3x faster than numcodecs' blosc on 8 KB chunks: ~8 against ~25 µs) and leaves any frame it does not fully
check to numcodecs; many of them through a numba loop on the kernels' threads (:class:`_BloscBatch`), which
:func:`start_read_packed` starts in the background (a sparse matrix's ``nzval`` decodes while its ``colptr`` and
``rowval`` are read); other codecs are decoded on the kernels' threads. The chunk index of a dataset of many chunks is
read by HDF5 calling a numba callback (:func:`_native_chunk_table`: no Python object per chunk), then checked as a
table (:func:`_well_placed`).
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
from typing import Any, NamedTuple

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
    table = _stored_chunks(dataset, chunk, where, path)
    # (Absent chunks read as the fill value: 0 for Daf's datasets. Where every chunk is stored, each decoded value
    # is written once: zeroing first would touch all the memory once more.)
    complete = bool(ids) and ids != (BITSHUFFLE,) and len(table) == math.prod(
        -(-extent // size) for extent, size in zip(dataset.shape, chunk, strict=True))
    decoded = _decoded_values(dataset.shape, chunk, stored, complete, bool(ids) and ids != (BITSHUFFLE,))
    values = decoded[:dataset.shape[0]] if decoded.shape != dataset.shape else decoded
    if not ids:  # (chunked, not filtered: HDF5 reads each chunk's declared bytes, no more)
        dataset.read_direct(values)
    elif ids == (BITSHUFFLE,):
        stores = _chunk_infos(_in_file_order(table))
        with _chunk_reader(dataset, path) as chunks:
            for info, raw, _ in chunks.read(stores, 0, len(stores)):
                _check_bitshuffle_chunk(raw, info, pipeline[0][2], chunk_bytes, stored.itemsize, where)
        load_filter_plugins()
        dataset.read_direct(values)
    else:
        with _chunk_reader(dataset, path) as chunks:
            _decode_chunks(decoded, table, chunks, pipeline, chunk, chunk_bytes, where)
    values.flags.writeable = False
    return values


def _decoded_values(shape: tuple[int, ...], chunk: tuple[int, ...], stored: np.dtype, complete: bool,
                    decoded_here: bool) -> np.ndarray:
    """The array a dataset's chunks are decoded into: of its ``shape``, zeroed unless ``complete`` (every chunk
    stored); a 1-D one whose chunks pydaf decodes (``decoded_here``) is padded to a whole number of chunks (the
    dataset's values are its start), so its last, partial chunk is decoded in place as the others are (HDF5 stores
    it whole), not through a scratch buffer, alone.

    Example:
        >>> _decoded_values((10,), (4,), np.dtype("int32"), False, True).shape
        (12,)
    """
    if len(shape) == 1 and decoded_here:
        shape = (-(-shape[0] // chunk[0]) * chunk[0],)
    return (np.empty if complete else np.zeros)(shape, dtype=stored)


class PackedRead:
    """A packed dataset being decoded on the kernels' threads (:func:`start_read_packed`), while the caller does
    other work: :meth:`result` joins in and returns its values, :meth:`cancel` stops it (one of the two must be
    called: the file stays open until then)."""

    def __init__(self, dataset: h5py.Dataset, values: np.ndarray, decoded: np.ndarray, table: np.ndarray,
                 handle: Any, batch: _BloscBatch, pipeline: list[tuple[int, int, tuple[int, ...], str]],
                 chunk: tuple[int, ...], chunk_bytes: int, where: str) -> None:
        self.dataset, self._values, self._decoded, self._table, self._handle, self._batch = \
            dataset, values, decoded, table, handle, batch
        self._pipeline, self._chunk, self._chunk_bytes, self._where = pipeline, chunk, chunk_bytes, where

    def result(self) -> np.ndarray:
        """The values (read-only), as :func:`read_packed` returns them; the errors it raises."""
        try:
            left = _chunk_infos(self._table[self._batch.finish()])
            _decode_checked(self._decoded, left, 0, len(left), self._batch.chunks, self._pipeline, self._chunk,
                            self._chunk_bytes, self._where)
        finally:
            self._handle.close()
        self._values.flags.writeable = False
        return self._values

    def cancel(self) -> None:
        """Stop decoding (the pieces being decoded are finished), and close the file."""
        try:
            self._batch.cancel()
        finally:
            self._handle.close()


def start_read_packed(dataset: h5py.Dataset, stored: np.dtype, what: str, path: str) -> PackedRead | None:
    """Start decoding a dataset on the kernels' threads (all but the calling one, which joins in at
    :meth:`PackedRead.result`), as :func:`read_packed` decodes it, so the caller can read other datasets meanwhile
    (a sparse matrix's ``colptr`` while its ``nzval`` is decoded); ``None`` unless it is data the kernels' threads
    decode (many of Julia's blosc chunks, in a plain file): the caller reads it with :func:`read_packed`. Its chunk
    index is read and checked now (its errors raised now); the caller has checked its declared size.

    Example:
        >>> import h5py, numba, numpy as np, os, tempfile
        >>> from pydaf.core.packed_settings import compressor_for
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5")
        >>> with h5py.File(path, "w") as file:
        ...     _ = write_packed(file, "x", np.arange(300_000, dtype=np.float64), (1024,),
        ...                      compressor_for("blosc_zstd_bitshuffle", 5))
        >>> with h5py.File(path, "r") as file:
        ...     pending = start_read_packed(file["x"], np.dtype("float64"), "vector: x", path)
        ...     # (reading other datasets here, while the kernels' threads decode x)
        ...     values = pending.result()
        >>> values.shape, values[-1], values.flags.writeable
        ((300000,), np.float64(299999.0), False)
    """
    where = f"the {what}\nin the H5df file: {path}"
    pipeline = filter_pipeline(dataset)
    nbytes = math.prod(dataset.shape) * stored.itemsize
    if len(pipeline) != 1 or pipeline[0][0] != BLOSC or dataset.chunks is None or dataset.ndim not in (1, 2) \
            or nbytes < _PARALLEL_MIN_BYTES or (nbytes < _PARALLEL_IMPORT_BYTES and "numba" not in sys.modules) \
            or not _plain_file(dataset, path):
        return None  # (small data, decoded on the calling thread: read_packed)
    fast = _fast_blosc()
    chunk = tuple(int(size) for size in dataset.chunks)
    chunk_bytes = math.prod(chunk) * stored.itemsize
    if fast is None or chunk_bytes == 0 or not (dataset.ndim == 1 or chunk[0] == 1):
        return None
    table = _in_file_order(_stored_chunks(dataset, chunk, where, path))
    complete = len(table) == math.prod(-(-extent // size) for extent, size in zip(dataset.shape, chunk, strict=True))
    decoded = _decoded_values(dataset.shape, chunk, stored, complete, True)
    values = decoded[:dataset.shape[0]] if decoded.shape != dataset.shape else decoded
    handle = open(path, "rb")  # (closed by PackedRead's result or cancel)
    try:
        batch = _BloscBatch(fast, decoded, table, _RawChunks(dataset, handle.fileno()), chunk, chunk_bytes)
        batch.start()
    except BaseException:
        handle.close()
        raise
    return PackedRead(dataset, values, decoded, table, handle, batch, pipeline, chunk, chunk_bytes, where)


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
        needed = {int(row) // chunk[0] * chunk[0] for row in np.asarray(rows).tolist()}
    table = _stored_chunks(dataset, chunk, where, path)
    stores = _chunk_infos(_in_file_order(table[np.isin(table[:, 3], np.fromiter(needed, np.int64, len(needed)))]))
    decoded: dict[tuple[int, ...], np.ndarray] = {}
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


def _decode_chunks(values: np.ndarray, table: np.ndarray, chunks: _RawChunks,
                   pipeline: list[tuple[int, int, tuple[int, ...], str]], chunk: tuple[int, ...], chunk_bytes: int,
                   where: str) -> None:
    """Decode each stored chunk (``table``: their :func:`_chunk_table`) into its place in ``values`` (a full chunk
    straight into it, a partial edge chunk through a scratch buffer, its padding dropped), its bytes read a span of
    neighbouring chunks at a time, on the kernels' threads for large data (the codecs release the GIL while they
    decode; each thread a run of chunks)."""
    table = _in_file_order(table)  # (neighbours are read at once)
    small = values.nbytes < _PARALLEL_MIN_BYTES or (values.nbytes < _PARALLEL_IMPORT_BYTES
                                                    and "numba" not in sys.modules)
    fast = _fast_blosc() if len(pipeline) == 1 and pipeline[0][0] == BLOSC else None
    if fast is not None and not small and _runs(values, chunk) and chunks.descriptor is not None:
        # (Julia's blosc chunks, many: decoded by a numba loop calling zstd and bitshuffle, on the kernels' threads;
        # what it leaves, the checked way.)
        batch = _BloscBatch(fast, values, table, chunks, chunk, chunk_bytes)
        batch.start()
        left = _chunk_infos(table[batch.finish()])
        _decode_checked(values, left, 0, len(left), chunks, pipeline, chunk, chunk_bytes, where)
        return
    stores = _chunk_infos(table)
    if small or fast is not None:
        # (Julia's blosc chunks through _FastBlosc, one by one: 2 threads take longer than one, 52 against 38 ms for
        # 4,904 chunks of 8 KB: each chunk is two calls of 2-4 µs, and the threads pass the GIL around each.)
        _decode_checked(values, stores, 0, len(stores), chunks, pipeline, chunk, chunk_bytes, where)
        return
    from ...kernels.threads import even_bounds, number_of_threads, run_ranges

    run_ranges(lambda first, last: _decode_checked(values, stores, first, last, chunks, pipeline, chunk, chunk_bytes,
                                                   where),
               even_bounds(len(stores), number_of_threads()))


def _runs(values: np.ndarray, chunk: tuple[int, ...]) -> bool:
    """Whether each chunk is a run of the flat C-order ``values``: Julia's chunks are one tile of one column, ``[n]``
    or ``[1, n]``."""
    return values.ndim == 1 or (values.ndim == 2 and chunk[0] == 1)


def _decode_checked(values: np.ndarray, stores: list[Any], first: int, last: int, chunks: _RawChunks,
                    pipeline: list[tuple[int, int, tuple[int, ...], str]], chunk: tuple[int, ...], chunk_bytes: int,
                    where: str) -> None:
    """Decode the chunks ``stores[first:last]`` (in file order) one by one, each checked (:func:`_decode_chunk`),
    into their places in ``values``."""
    itemsize = values.dtype.itemsize
    runs = _runs(values, chunk)
    flat = values.reshape(-1)
    flat_bytes = flat.view(np.uint8)
    flat_address = flat_bytes.ctypes.data
    chunk_size, row_length, two_dimensional = chunk[-1], values.shape[-1], values.ndim == 2
    scratch = np.empty(chunk_bytes, dtype=np.uint8)
    for info, raw, address in chunks.read(stores, first, last):
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


class _BloscBatch:
    """The full chunks of a :func:`_chunk_table` (in file order) decoded by
    :func:`pydaf.kernels._blosc.decode_blosc_pieces` into their places in ``values`` (as :func:`_decode_chunks` lays
    them), on the kernels' threads. The chunks are cut into pieces of decreasing sizes (:func:`_pieces`), each inside
    one span of neighbouring chunks (:data:`_SPAN_BYTES` at most), read in one ``pread``; each thread takes the next
    piece when done with one, so a thread that starts late, or is slowed by another process, takes fewer (with one
    fixed share each, the last thread ended ~0.4 ms after the first, for 1,000 chunks of 8 KB on 2 threads), and a
    thread can join late: :meth:`start` sets the pool's threads to it (all but one), :meth:`finish` joins in on the
    calling thread and waits for the rest."""

    def __init__(self, fast: _FastBlosc, values: np.ndarray, table: np.ndarray, chunks: _RawChunks,
                 chunk: tuple[int, ...], chunk_bytes: int) -> None:
        from ...kernels import _blosc
        from ...kernels.threads import number_of_threads

        assert chunks.descriptor is not None and _runs(values, chunk)
        chunk_size, row_length = chunk[-1], values.shape[-1]
        itemsize = chunk_bytes // chunk_size  # (a chunk of Julia's is one run of chunk_size values)
        places, masks, offsets = table[:, :2], table[:, 2], table[:, 3:]
        first_values = offsets[:, -1] + (offsets[:, 0] * row_length if values.ndim == 2 else 0)
        full = (offsets[:, -1] + chunk_size <= row_length) & (masks & 1 == 0)
        self.out_starts = np.where(full, first_values * itemsize, -1).astype(np.int64)
        self.starts, self.sizes = np.ascontiguousarray(places[:, 0]), np.ascontiguousarray(places[:, 1])
        self.n_threads = number_of_threads()
        self.pieces = np.union1d(_pieces(len(table), self.n_threads),
                                 _blosc.span_bounds(self.starts, self.sizes, _SPAN_GAP, _SPAN_BYTES))
        self.span_bytes = int((np.maximum.reduceat(self.starts + self.sizes, self.pieces[:-1])
                               - self.starts[self.pieces[:-1]]).max()) if len(table) else 0
        self.taken = np.zeros(1, dtype=np.int64)  # (the next piece: taken atomically by the threads)
        self.failed = np.zeros(len(table), dtype=np.uint8)
        self.fast, self.values, self.chunks, self.chunk_bytes = fast, values.reshape(-1).view(np.uint8), chunks, \
            chunk_bytes
        self.futures: list[Any] = []

    def _work(self, started: threading.Event | None = None) -> None:
        from ...kernels import _blosc

        state = self.fast.thread_state(self.chunk_bytes)
        decompress, unshuffle = self.fast.natives()
        span = state.span(self.span_bytes)
        if started is not None:
            started.set()
        _blosc.decode_blosc_pieces(self.chunks.descriptor, _pread_address(), self.pieces, self.taken, self.starts,
                                   self.sizes, self.values, self.out_starts, self.chunk_bytes, state.context,
                                   state.scratch, span, decompress, unshuffle, self.failed)

    def start(self) -> None:
        """Set the pool's threads to the pieces (as many as will help, but one: :meth:`finish`'s), and wait (a
        moment, at most) for the first to start: a pool thread needs the GIL to start, and a caller busy in Python
        (reading the next dataset) gave it up only at its next system call (0.1 to 5 ms later)."""
        from ...kernels.threads import thread_pool

        started = threading.Event()
        for _ in range(min(self.n_threads, len(self.pieces) - 1) - 1):
            self.futures.append(thread_pool().submit(self._work, started))
        if self.futures:
            started.wait(_START_WAIT)

    def finish(self) -> np.ndarray:
        """Decode the pieces left on this thread, wait for the pool's (those not started, the pool busy with other
        work, are dropped: no piece is left), and return the rows of the table not decoded (an edge chunk, a filter
        skipped, a frame of another form, a corrupt one, a piece not read). An exception of any thread, or a Ctrl-C,
        is raised once all have finished (they write into the values)."""
        error: BaseException | None = None
        try:
            self._work()
        except BaseException as exception:
            error = exception
        error = self._wait() or error
        if error is not None:
            raise error
        return np.flatnonzero(self.failed)

    def cancel(self) -> None:
        """Leave the pieces not taken yet, and wait for the pool's threads (their errors dropped)."""
        self.taken[0] = len(self.pieces)  # (a thread taking one more gets a piece past the last: it stops)
        self._wait()

    def _wait(self) -> BaseException | None:
        error: BaseException | None = None
        for future in self.futures:  # (each waited for, even after a Ctrl-C while waiting: they write the values)
            if future.cancel():  # (not started, the pool busy: no piece is left for it)
                continue
            while True:
                try:
                    error = error or future.exception()
                    break
                except BaseException as interrupt:
                    error = error or interrupt
        self.futures = []
        return error


@cache
def _pread_address() -> int:
    """The address of the C library's ``pread``, for :func:`pydaf.kernels._blosc.decode_blosc_pieces`."""
    import ctypes

    return int(ctypes.cast(ctypes.CDLL(None).pread, ctypes.c_void_p).value or 0)


#: The longest :meth:`_BloscBatch.start` waits for a pool thread to start (they may all be busy), in seconds.
_START_WAIT = 0.002

#: The fewest chunks in a piece of a :class:`_BloscBatch` (a piece costs ~20 µs more than its chunks).
_MIN_PIECE_CHUNKS = 32


def _pieces(count: int, n_threads: int) -> list[int]:
    """The bounds ``[0, ..., count]`` of the pieces a :class:`_BloscBatch` cuts ``count`` chunks into: each a
    ``1 / (2 n_threads)`` of the chunks left (so the threads end together), of :data:`_MIN_PIECE_CHUNKS` at least.

    Example:
        >>> _pieces(977, 2)
        [0, 244, 427, 564, 667, 744, 802, 845, 878, 910, 942, 977]
        >>> _pieces(10, 2)
        [0, 10]
    """
    bounds = [0]
    while bounds[-1] < count:
        left = count - bounds[-1]
        size = max(_MIN_PIECE_CHUNKS, left // (2 * n_threads))
        bounds.append(count if left - size < _MIN_PIECE_CHUNKS else bounds[-1] + size)
    return bounds


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
#: The most bytes between neighbouring chunks read at once (read, and not used).
_SPAN_GAP = 4096


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
                if info.byte_offset - span_end > _SPAN_GAP or info.byte_offset + info.size - begin > span_bytes:
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
    if not _plain_file(dataset, path):
        yield _RawChunks(dataset, None)
        return
    with open(path, "rb") as handle:
        yield _RawChunks(dataset, handle.fileno())


def _plain_file(dataset: h5py.Dataset, path: str) -> bool:
    """Whether the dataset's chunks can be read from its file on disk at the places HDF5's index gives (not an HDF5
    file in memory, or split over several)."""
    return dataset.file.driver in ("sec2", "fileobj") and os.path.isfile(path)


def _stored_chunks(dataset: h5py.Dataset, chunk: tuple[int, ...], where: str, path: str) -> np.ndarray:
    """The :func:`_chunk_table` of the dataset's stored chunks (HDF5's chunk index), each checked: on the chunk grid,
    inside the dataset, once, its bytes inside the file."""
    file_size = os.path.getsize(path)
    table = _native_chunk_table(dataset)
    if table is not None and _well_placed(None, chunk, dataset.shape, file_size, table):
        return table
    # (h5py's iteration: a Python object per chunk; and the precise error, where a chunk is misplaced)
    stores: list[Any] = []
    if hasattr(dataset.id, "chunk_iter"):  # (HDF5 1.12.3 and later: one pass over the chunk index)
        dataset.id.chunk_iter(stores.append)
    else:
        stores = [dataset.id.get_chunk_info(index) for index in range(dataset.id.get_num_chunks())]
    table = _chunk_table(stores, len(chunk))
    if table is not None and _well_placed(stores, chunk, dataset.shape, file_size, table):
        return table
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


#: From this many chunks, the chunk index is read by HDF5 calling a numba callback (:func:`_native_chunk_table`), if
#: numba is imported (loading the callback costs ~0.3 s once per process; h5py's iteration ~0.9 µs a chunk).
_NATIVE_INDEX_MIN_CHUNKS = 64


def _native_chunk_table(dataset: h5py.Dataset) -> np.ndarray | None:
    """The :func:`_chunk_table` of the dataset's stored chunks, written by :func:`pydaf.kernels._blosc.record_chunk`
    as HDF5's ``H5Dchunk_iter`` calls it (no Python object per chunk), unchecked; ``None`` if not read this way (few
    chunks, numba not imported, an HDF5 without the function, an index HDF5 fails to iterate or that holds more
    chunks than it counted: the caller reads it through h5py)."""
    if "numba" not in sys.modules:
        return None
    iterate = _hdf5_chunk_iter()
    if iterate is None:
        return None
    count = dataset.id.get_num_chunks()
    if count < _NATIVE_INDEX_MIN_CHUNKS:
        return None
    try:
        from h5py._objects import phil  # (h5py's own lock: not a public name)
    except ImportError:
        return None

    from ...kernels import _blosc

    width = 3 + dataset.ndim
    table = np.zeros(_blosc.CHUNK_TABLE_HEADER + count * width, dtype=np.int64)
    table[0], table[2] = count, dataset.ndim
    callback = _blosc.record_chunk().address
    with phil:  # (h5py's lock: its calls into HDF5 hold it)
        status = iterate(dataset.id.id, 0, callback, table.ctypes.data)  # (0: H5P_DEFAULT)
    if status < 0 or table[3] or table[1] != count:
        return None
    return table[_blosc.CHUNK_TABLE_HEADER:].reshape(count, width)


@cache
def _hdf5_chunk_iter() -> Any:
    """HDF5's ``H5Dchunk_iter``, from the library h5py calls (found through its ``h5d`` module's dependencies), or
    ``None`` where it is missing, or its callback takes the chunk size as 32 bits (before HDF5 1.14)."""
    import ctypes

    if h5py.version.hdf5_version_tuple < (1, 14, 1):
        return None
    try:
        iterate = ctypes.CDLL(h5d.__file__).H5Dchunk_iter
    except (OSError, AttributeError):
        return None
    iterate.restype = ctypes.c_int
    iterate.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    return iterate


def _chunk_table(stores: list[Any], ndim: int) -> np.ndarray | None:
    """Per chunk: its byte offset, size, filter mask and chunk offset (``int64``, one row each), or ``None`` if a
    chunk's are not integers of one length (a missing byte offset, a ragged or huge chunk offset)."""
    if not stores:
        return np.zeros((0, 3 + ndim), dtype=np.int64)
    try:
        table = np.array([(info.byte_offset, info.size, info.filter_mask, *info.chunk_offset) for info in stores],
                         dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return None
    return table if table.ndim == 2 else None


def _in_file_order(table: np.ndarray) -> np.ndarray:
    """A :func:`_chunk_table` sorted by the chunks' places in the file (as is, if it is: HDF5 writes them so)."""
    if len(table) < 2 or not (table[1:, 0] < table[:-1, 0]).any():
        return table
    return table[np.argsort(table[:, 0], kind="stable")]


class _StoredChunk(NamedTuple):
    """A stored chunk as h5py's ``StoreInfo`` describes it."""

    chunk_offset: tuple[int, ...]
    filter_mask: int
    byte_offset: int
    size: int


def _chunk_infos(table: np.ndarray) -> list[_StoredChunk]:
    """The rows of a :func:`_chunk_table`, as h5py's ``StoreInfo`` (for the paths that decode chunks one by one)."""
    return [_StoredChunk(tuple(row[3:]), row[2], row[0], row[1]) for row in table.tolist()]


def _well_placed(stores: list[Any] | None, chunk: tuple[int, ...], shape: tuple[int, ...], file_size: int,
                 table: np.ndarray | None = None) -> bool:
    """Whether all the chunks are on the grid, inside the shape, each once, and inside the file (the checks of
    :func:`_stored_chunks`, on arrays: ~1 µs a chunk less); ``table``: their :func:`_chunk_table`, if made (then
    ``stores`` is not used)."""
    if table is None:
        table = _chunk_table(stores or [], len(chunk))
    if table is None or table.ndim != 2 or table.shape[1] != 3 + len(chunk):
        return False
    if not len(table):
        return True
    offsets, places = table[:, 3:], table[:, :2]
    sizes, extents = np.array(chunk, dtype=np.int64), np.array(shape, dtype=np.int64)
    if (offsets < 0).any() or (offsets % sizes).any() or (offsets >= extents).any():
        return False
    if len(chunk) == 1:  # (HDF5 lists the chunks of a 1-D dataset in order: distinct if increasing)
        linear = offsets[:, 0]
    else:
        linear = np.ravel_multi_index(tuple((offsets // sizes).T), tuple(-(-extents // sizes)))
    if not (linear[1:] > linear[:-1]).all() and np.unique(linear).size != len(table):
        return False
    # (compared without adding: a huge offset plus a size would wrap around)
    return not ((places < 0).any() or (places[:, 0] > file_size).any()
                or (places[:, 1] > file_size - places[:, 0]).any())


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
        self._addresses = (int(ctypes.cast(self._decompress, ctypes.c_void_p).value or 0),
                           int(ctypes.cast(self._unshuffle, ctypes.c_void_p).value or 0))

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

    def natives(self) -> tuple[int, int]:
        """The addresses of ``ZSTD_decompressDCtx`` and ``bshuf_bitunshuffle``, for
        :func:`pydaf.kernels._blosc.decode_blosc_chunks`."""
        return self._addresses


class _ZstdState:
    """A thread's zstd decompression context and the scratch buffer of the block it decodes (freed with it)."""

    def __init__(self, create: Any, free: Any, size: int) -> None:
        self.free = free
        self.context = create()
        if not self.context:
            raise MemoryError("can't make a zstd decompression context")
        self.scratch = np.empty(size, dtype=np.uint8)
        self.address = self.scratch.ctypes.data
        self._span = np.empty(0, dtype=np.uint8)

    def span(self, size: int) -> np.ndarray:
        """The thread's buffer of the chunks' bytes read at once, of ``size`` bytes at least (kept for the next
        read: not new memory each time)."""
        if self._span.nbytes < size:
            self._span = np.empty(size, dtype=np.uint8)
        return self._span

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
