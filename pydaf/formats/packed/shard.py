"""Reading Julia's dual-format packed shard (docs/spec/FORMATS.md §4): one byte stream that is both a Zarr v3
``sharding_indexed`` shard (its index at offset 0) and a ZIP64 archive with one entry per inner chunk.

A packed property (or sparse component) of ``shape`` (Julia order: ``(n,)`` or ``(rows, columns)``) is cut into a
grid of inner chunks of ``chunk_shape`` (edge chunks padded to the full shape), ordered column-major over the grid,
each encoded (raw little-endian elements, or ``vlen-utf8`` for strings) then compressed by one codec.

The API, for every format that stores shards (FilesDaf ``.zip`` files, ZipDaf nested entries, Zarr ``c/0[/0]``
chunk files, and HttpDaf, whose shards are read by HTTP Range requests):

- :func:`packed_layout` (or :func:`descriptor_layout`, from a FilesDaf JSON descriptor) checks what the metadata
  declares and gives a :class:`PackedLayout`;
- :func:`read_packed_array` reads the whole property from a :class:`~pydaf._os.byte_sources.ByteSource` (anything
  with ``name``, ``size()`` and ``read(offset, length)``) into one preallocated array, each chunk decoded into its
  place. ``via="directory"`` reads through the ZIP central directory, as Julia's FilesDaf, ZipDaf and HttpDaf do
  (§4.6); ``via="index"`` through the Zarr shard index, as Julia's ZarrDaf does (and as any Zarr v3 shard is read);
  ``via="auto"`` through the directory if the shard has one, else the index. A source that also has
  ``read_ranges(ranges) -> list[bytes | memoryview]`` (an HTTP source, which coalesces nearby ranges into one
  request) is given every chunk's range at once; others are read a chunk at a time.

Nothing from the shard is trusted: every offset is checked against the source's size, every declared (compressed
or decompressed) size against what the declared shape allows, before anything is allocated or decompressed; each
chunk's CRC32 (in the central directory) is checked against its bytes. A problem is the ``DafError`` the caller's
``invalid(problem)`` makes (naming the data set and the property). Codecs come from numcodecs (Blosc, Zstd,
VLenUTF8) and zlib.
"""

from __future__ import annotations

import base64
import itertools
import math
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from ..._os.byte_sources import ByteSource
from ...core.cache import SizedLruCache
from ...errors import DafError, DafFormatError
from ...storage_types import STRING_DTYPE

#: The codecs Julia writes to shards (``packed_format.jl · v3_bytes_codecs_for``), with the ZIP method of their
#: entries and their valid levels.
PACKED_COMPRESSIONS: dict[str, tuple[int, range]] = {
    "blosc_zstd_bitshuffle": (0, range(1, 10)),
    "blosc_lz4_bitshuffle": (0, range(1, 10)),
    "zstd": (93, range(1, 23)),
    "gzip": (8, range(1, 10)),
}
#: Codecs Julia knows but never writes to shards (H5df only), with Julia's reason.
_NOT_IN_SHARDS = {
    "gzip_shuffle": "Zarr.jl has no v3 standalone shuffle codec; use gzip or blosc_zstd_bitshuffle",
    "zstd_bitshuffle": "Zarr.jl has no v3 bitshuffle codec; use blosc_zstd_bitshuffle",
}
_STORED, _DEFLATE, _ZSTD = 0, 8, 93

#: The most bytes one chunk of strings may decode to (a chunk of numbers decodes to exactly its shape's bytes;
#: strings have no such bound, so this caps what a hostile shard can make us allocate: Julia's chunks hold 512
#: strings, so this allows half a megabyte each).
MAX_STRING_CHUNK_BYTES = 256 << 20

_EOCD_REGION = 98  # ZIP64 end of central directory (56) + its locator (20) + the legacy end record (22)
_ZIP64_EOCD_SIGNATURE = 0x06064B50
_CD_SIGNATURE = 0x02014B50
_LFH_SIGNATURE = 0x04034B50
_CD_FIXED, _LFH_FIXED, _CD_ZIP64_EXTRA, _LFH_ZIP64_EXTRA = 46, 30, 28, 20
_EMPTY_CHUNK = 2**64 - 1
_ZSTD_MAGIC = 0xFD2FB528

Invalid = Callable[[str], DafError]


class _Allows:
    """What a chunk may decode to, as error text (built only if an error is raised)."""

    def __init__(self, layout: PackedLayout, limit: int, at_most: bool) -> None:
        self.layout, self.limit, self.at_most = layout, limit, at_most

    def __str__(self) -> str:
        return (f"its chunk_shape {list(self.layout.chunk_shape)} of {_type_name(self.layout)} holds "
                f"{'at most ' if self.at_most else ''}{self.limit}")


class _Chunk(NamedTuple):
    """Where one chunk's bytes are: ``read`` bytes from ``offset``, of which the encoded chunk is the last ``length``
    (before it, the ZIP local header, whose signature is checked in the same read); ``decoder`` is ``None`` for an
    elided chunk (the fill value); ``crc`` the CRC32 the central directory records, if read through it."""

    decoder: str | None
    offset: int
    read: int
    length: int
    crc: int | None


@dataclass(frozen=True)
class PackedLayout:
    """What the metadata of a packed property declares (checked by :func:`packed_layout`): its element type
    (``STRING_DTYPE`` for strings), its ``shape`` and inner ``chunk_shape`` (Julia order), its codec and level, and
    where a Zarr shard index sits (``"start"`` or ``"end"``)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    compression: str
    compression_level: int
    index_location: str = "start"

    @property
    def chunks_per_shard(self) -> tuple[int, ...]:
        """The number of chunks along each dimension (edge chunks are padded)."""
        return tuple(-(-size // chunk) for size, chunk in zip(self.shape, self.chunk_shape, strict=True))

    @property
    def n_chunks(self) -> int:
        return math.prod(self.chunks_per_shard)

    @property
    def is_strings(self) -> bool:
        return self.dtype == STRING_DTYPE

    @property
    def chunk_nbytes(self) -> int:
        """The bytes of one decoded chunk of numbers."""
        return math.prod(self.chunk_shape) * self.dtype.itemsize


def is_packed_descriptor(descriptor: Any) -> bool:
    """Whether a FilesDaf descriptor (or a sparse component's) describes packed data: it has ``packed_format``
    (Julia's ``is_packed_component``; its value is not checked, as Julia reads both ``"indexed+zipped"`` and
    ``"zipped"`` shards through their central directory).

    Example:
        >>> is_packed_descriptor({"format": "dense", "eltype": "Float64"})
        False
        >>> is_packed_descriptor({"format": "dense", "eltype": "Float64", "packed_format": "indexed+zipped"})
        True
    """
    return isinstance(descriptor, dict) and "packed_format" in descriptor


def _default_invalid(problem: str) -> DafError:
    return DafFormatError(f"invalid packed data\n({problem})")


def packed_layout(dtype: np.dtype, shape: tuple[int, ...], chunk_shape: Any, compression: Any,
                  compression_level: Any, *, invalid: Invalid = _default_invalid,
                  index_location: Any = "start", check_level: bool = True) -> PackedLayout:
    """Check what a packed property's metadata declares against its (trusted) ``shape``: a chunk shape of as many
    positive integers, none larger than the shape (Julia's never are), a codec Julia writes to shards and (if
    ``check_level``: Julia checks the level of FilesDaf descriptors, while Zarr.jl decodes any) a level in its range.

    Example:
        >>> packed_layout(np.dtype("float64"), (1200,), [1024], "gzip", 5).chunks_per_shard
        (2,)
        >>> packed_layout(np.dtype("float64"), (1200,), [2048], "gzip", 5)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid packed data
        (packed data: the chunk_shape [2048] is larger than the shape [1200])
    """
    def bad(problem: str) -> DafError:
        return invalid(f"packed data: {problem}")

    if (not isinstance(chunk_shape, list | tuple) or len(chunk_shape) != len(shape)
            or not all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in chunk_shape)):
        raise bad(f"the chunk_shape {chunk_shape!r} is not {len(shape)} positive integer(s)")
    if any(chunk > max(size, 1) for chunk, size in zip(chunk_shape, shape, strict=True)):
        raise bad(f"the chunk_shape {list(chunk_shape)} is larger than the shape {list(shape)}")
    if not isinstance(compression, str) or compression not in PACKED_COMPRESSIONS:
        if isinstance(compression, str) and compression in _NOT_IN_SHARDS:
            raise bad(f"the codec {compression} is not used in shards ({_NOT_IN_SHARDS[compression]})")
        raise bad(f"unknown compression: {compression!r} (expected one of: {', '.join(PACKED_COMPRESSIONS)})")
    levels = PACKED_COMPRESSIONS[compression][1]
    if not isinstance(compression_level, int) or isinstance(compression_level, bool) or (
            check_level and compression_level not in levels):
        raise bad(f"the compression_level {compression_level!r} is out of the range of {compression}: "
                      f"{levels.start} to {levels.stop - 1}")
    if index_location not in ("start", "end"):
        raise bad(f"the index_location {index_location!r} is neither \"start\" nor \"end\"")
    return PackedLayout(np.dtype(dtype), tuple(shape), tuple(chunk_shape), compression, compression_level,
                        index_location)


def descriptor_layout(descriptor: dict[str, Any], dtype: np.dtype, shape: tuple[int, ...], *,
                      invalid: Invalid = _default_invalid) -> PackedLayout:
    """The layout a FilesDaf (or ZipDaf, HttpDaf) packed descriptor declares (§3.5, §3.9), checked.

    Example:
        >>> descriptor_layout({"format": "dense", "eltype": "Float64", "packed_format": "indexed+zipped",
        ...                    "chunk_shape": [1024, 1], "compression": "zstd", "compression_level": 5,
        ...                    "index_location": "start"}, np.dtype("float64"), (1200, 8)).chunks_per_shard
        (2, 8)
    """
    if not isinstance(descriptor.get("packed_format"), str):
        raise invalid("packed data: the packed_format is not a string")
    return packed_layout(dtype, shape, descriptor.get("chunk_shape"), descriptor.get("compression"),
                         descriptor.get("compression_level"), invalid=invalid,
                         index_location=descriptor.get("index_location", "start"))


def read_packed_array(source: ByteSource, layout: PackedLayout, *, invalid: Invalid = _default_invalid,
                      via: Literal["directory", "index", "auto"] = "directory", fill: Any = None) -> np.ndarray:
    """The whole packed array a shard holds (a new array of ``layout.shape``, column-major for a matrix; an object
    array of ``str`` for strings), read through its ZIP central directory or its Zarr shard index (``"auto"``: the
    directory if the shard has one, whose CRC32s catch a corrupt chunk the index can't, else the index). A chunk the
    index elides holds ``fill`` (default: zero, or ``""`` for strings).

    Example:
        >>> from pydaf._os.byte_sources import BufferByteSource
        >>> layout = packed_layout(np.dtype("float64"), (1200,), [1024], "gzip", 5)
        >>> read_packed_array(BufferByteSource("score.zip", b"PK"), layout)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid packed data
        (the shard has 2 bytes, too few for a ZIP end of central directory (98 bytes)
        in the shard: score.zip)
    """
    reader = _ShardReader(source, layout, invalid)
    return reader.read_all(via, fill)


class _ShardReader:
    def __init__(self, source: ByteSource, layout: PackedLayout, invalid: Invalid) -> None:
        self.source = source
        self.layout = layout
        self.invalid = invalid
        self.size = source.size()
        self.method = PACKED_COMPRESSIONS[layout.compression][0]
        self.n_chunks = layout.n_chunks

    def fail(self, problem: str) -> DafError:
        return self.invalid(f"{problem}\nin the shard: {self.source.name}")

    def check_range(self, offset: int, length: int, what: str) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(f"{what} (bytes {offset} to {offset + length}) ends past the end of the shard, at "
                            f"{self.size} bytes")

    def checked(self, data: bytes | memoryview, offset: int, length: int, what: str) -> bytes | memoryview:
        if len(data) != length:
            raise self.fail(f"{what} (bytes {offset} to {offset + length}) reads as {len(data)} bytes (the shard "
                            "is shorter than its source says)")
        return data

    def read(self, offset: int, length: int, what: str) -> bytes | memoryview:
        self.check_range(offset, length, what)
        try:
            data = self.source.read(offset, length)
        except DafFormatError as error:  # (a source that shrank, or lied about its size)
            raise self.fail(f"{what} can't be read ({error})") from error
        return self.checked(data, offset, length, what)

    def prefetch(self, ranges: list[_Chunk]) -> Iterator[bytes | memoryview] | None:
        """The bytes of every stored chunk, in order, fetched at once where the source can coalesce ranges (an
        optional ``read_ranges(ranges)`` method, as HTTP sources have: nearby chunks in one request); else ``None``
        (each chunk is read when decoded)."""
        read_ranges = getattr(self.source, "read_ranges", None)
        if not callable(read_ranges):
            return None
        wanted = [(chunk.offset, chunk.read) for chunk in ranges if chunk.decoder is not None]
        for index, (offset, length) in enumerate(wanted):
            self.check_range(offset, length, f"chunk {index + 1} of {self.n_chunks}")
        try:
            pieces = read_ranges(wanted)
        except DafFormatError as error:
            raise self.fail(f"the chunks can't be read ({error})") from error
        if len(pieces) != len(wanted):
            raise self.fail(f"the source read {len(pieces)} ranges of the {len(wanted)} asked")
        return iter(pieces)

    # The whole array.

    def read_all(self, via: str, fill: Any) -> np.ndarray:
        layout = self.layout
        ranges: list[_Chunk] = []
        if self.n_chunks:  # (every chunk located and checked before the result is allocated)
            if via == "auto":
                via = "directory" if self.has_directory() else "index"
            ranges = self.directory_ranges() if via == "directory" else self.index_ranges()
        flat = np.empty(math.prod(layout.shape), dtype=layout.dtype)
        fill = ("" if layout.is_strings else 0) if fill is None else fill
        if layout.is_strings:
            flat[:] = fill  # (an elided chunk is a chunk of fill values)
        result = flat.reshape(layout.shape, order="F")
        scratch: np.ndarray | None = None
        chunk_shape, chunk_size = list(layout.chunk_shape), math.prod(layout.chunk_shape)
        contiguous = len(layout.shape) == 1 or chunk_shape[1] == 1 or chunk_shape[0] == layout.shape[0]
        signature = struct.pack("<I", _LFH_SIGNATURE)
        prefetched = self.prefetch(ranges)
        for index, ((kind, offset, read, length, crc), coordinates) in enumerate(
                zip(ranges, _grid_order(layout.chunks_per_shard), strict=True)):
            starts = [at * chunk for at, chunk in zip(coordinates, chunk_shape, strict=True)]
            stops = [min(start + chunk, size) for start, chunk, size in zip(starts, chunk_shape, layout.shape,
                                                                            strict=True)]
            region = tuple(slice(start, stop) for start, stop in zip(starts, stops, strict=True))
            if kind is None:  # an elided chunk (Zarr index only): the fill value
                if not layout.is_strings:
                    result[region] = fill
                continue
            data = self.read(offset, read, f"chunk {index + 1} of {self.n_chunks}") if prefetched is None else \
                self.checked(next(prefetched), offset, read, f"chunk {index + 1} of {self.n_chunks}")
            if read != length:
                if bytes(data[:4]) != signature:
                    raise self.fail(f"no local file header for chunk {index + 1} of {self.n_chunks} at offset "
                                    f"{offset}")
                data = data[read - length:]
            if layout.is_strings:
                values = self.decode_strings(kind, data, crc, index)
                result[region] = values.reshape(layout.chunk_shape, order="F")[
                    tuple(slice(0, stop - start) for start, stop in zip(starts, stops, strict=True))]
                continue
            whole = [stop - start for start, stop in zip(starts, stops, strict=True)] == chunk_shape
            if whole and contiguous:  # decode straight into its place in the result
                first = starts[0] + (starts[1] * layout.shape[0] if len(starts) > 1 else 0)
                target = flat[first:first + chunk_size].view(np.uint8)
                self.decode_numbers(kind, data, crc, index, target)
            else:  # an edge chunk (padded) or a chunk that is not one run of the result: through one scratch chunk
                if scratch is None:
                    scratch = np.empty(chunk_size, dtype=layout.dtype)
                self.decode_numbers(kind, data, crc, index, scratch.view(np.uint8))
                result[region] = scratch.reshape(layout.chunk_shape, order="F")[
                    tuple(slice(0, stop - start) for start, stop in zip(starts, stops, strict=True))]
        return result

    # Where the chunks are.

    def has_directory(self) -> bool:
        """Whether the shard ends with a ZIP64 end of central directory (Julia's dual format; a Zarr-only shard, as
        zarr-python writes them, has none)."""
        if self.size < _EOCD_REGION:
            return False
        tail = bytes(self.read(self.size - _EOCD_REGION, 4, "the end of central directory"))
        return struct.unpack("<I", tail)[0] == _ZIP64_EOCD_SIGNATURE

    def directory_ranges(self) -> list[_Chunk]:
        """``(decoder, offset, length, CRC32)`` of each chunk, from the ZIP central directory (Julia's
        ``ZipShardArray``: fixed-length entries in chunk order, located by arithmetic, names and methods checked)."""
        directory, entry_size = self.directory_start()
        entries = bytes(self.read(directory, self.n_chunks * entry_size, "the central directory"))
        names = _chunk_names(self.layout.chunks_per_shard, self.method)
        return [self.directory_entry(entries, index * entry_size, index, name, directory)
                for index, name in enumerate(names)]

    def directory_start(self) -> tuple[int, int]:
        """Where the central directory starts and the size of each (fixed-length) entry, checked against the end of
        central directory and the shard's size."""
        layout = self.layout
        if self.size < _EOCD_REGION:
            raise self.fail(f"the shard has {self.size} bytes, too few for a ZIP end of central directory "
                            f"({_EOCD_REGION} bytes)")
        tail = bytes(self.read(self.size - _EOCD_REGION, _EOCD_REGION, "the end of central directory"))
        if struct.unpack_from("<I", tail, 0)[0] != _ZIP64_EOCD_SIGNATURE:
            raise self.fail(f"no ZIP64 end of central directory {_EOCD_REGION} bytes before the end (expected a "
                            "shard written by Julia's Daf)")
        directory = struct.unpack_from("<Q", tail, 48)[0]
        if self.method == _DEFLATE and self.n_chunks > 1 << 24:
            raise self.fail(f"{self.n_chunks} chunks are more than a gzip shard can name (2^24)")
        entry_size = _CD_FIXED + len(_chunk_name(layout.chunks_per_shard, self.method, 0)) + _CD_ZIP64_EXTRA
        span = self.n_chunks * entry_size
        if directory + span > self.size - _EOCD_REGION:
            raise self.fail(f"the central directory at {directory} can't hold the {self.n_chunks} chunk entries of "
                            f"{entry_size} bytes the shape {list(layout.shape)} and chunk_shape "
                            f"{list(layout.chunk_shape)} need, before the end of the shard at {self.size} bytes")
        return directory, entry_size

    def directory_entry(self, entries: bytes, at: int, index: int, name: bytes, directory: int,
                        first: int | None = None) -> _Chunk:
        """The chunk ``index`` from its central directory entry at ``at`` in ``entries`` (read from the shard's
        offset ``first``, by default the directory's start; its signature, method, name and ZIP64 sizes checked)."""
        layout = self.layout
        kind = {_STORED: "blosc", _ZSTD: "zstd", _DEFLATE: "deflate"}[self.method]
        signature, method, crc, name_length = (struct.unpack_from("<I", entries, at)[0],
                                               struct.unpack_from("<H", entries, at + 10)[0],
                                               struct.unpack_from("<I", entries, at + 16)[0],
                                               struct.unpack_from("<H", entries, at + 28)[0])
        chunk = f"chunk {index + 1} of {self.n_chunks}"
        if signature != _CD_SIGNATURE:
            where = (directory if first is None else first) + at
            raise self.fail(f"no central directory entry for {chunk} at offset {where} (the entries are not the "
                            f"fixed-length, in-order entries of {self.n_chunks} chunks)")
        if method != self.method:
            raise self.fail(f"unexpected ZIP compression method: {method} of {chunk}\nexpected ZIP compression "
                            f"method: {self.method} for the codec: {layout.compression}")
        actual = entries[at + _CD_FIXED:at + _CD_FIXED + len(name)]
        if name_length != len(name) or actual != name:
            raise self.fail(f"unexpected ZIP entry name: {_shown(actual)}\nexpected name: {_shown(name)}\nat "
                            f"{chunk}")
        extra = at + _CD_FIXED + len(name)
        extra_id, extra_length = struct.unpack_from("<HH", entries, extra)
        if extra_id != 1 or extra_length < 24:
            raise self.fail(f"the central directory entry of {chunk} has no ZIP64 extra field")
        uncompressed, compressed, header = struct.unpack_from("<QQQ", entries, extra + 4)
        self.check_declared(uncompressed, index)
        data = header + _LFH_FIXED + len(name) + (0 if method == _DEFLATE else _LFH_ZIP64_EXTRA)
        if data + compressed > directory:
            raise self.fail(f"the {compressed} bytes of {chunk} at offset {data} end past the central directory, "
                            f"at {directory}")
        return _Chunk(kind, header, data + compressed - header, compressed, crc)

    def index_ranges(self) -> list[_Chunk]:
        """``(decoder, offset, length, None)`` of each chunk (decoder ``None``: elided), from the Zarr shard index
        (little-endian ``(offset, nbytes)`` pairs then their CRC32C), as Zarr readers (and Julia's ZarrDaf) read."""
        layout = self.layout
        index_size = 16 * self.n_chunks + 4
        at = 0 if layout.index_location == "start" else self.size - index_size
        if index_size > self.size:
            raise self.fail(f"the shard has {self.size} bytes, too few for the index of its {self.n_chunks} chunks "
                            f"({index_size} bytes)")
        index = bytes(self.read(at, index_size, "the shard index"))
        import google_crc32c

        if google_crc32c.value(index[:-4]) != struct.unpack_from("<I", index, 16 * self.n_chunks)[0]:
            raise self.fail("the CRC32C of the shard index does not match its bytes")
        kind = {_STORED: "blosc", _ZSTD: "zstd", _DEFLATE: "gzip"}[self.method]
        ranges: list[_Chunk] = []
        for chunk in range(self.n_chunks):
            offset, length = struct.unpack_from("<QQ", index, 16 * chunk)
            if offset == _EMPTY_CHUNK and length == _EMPTY_CHUNK:
                ranges.append(_Chunk(None, 0, 0, 0, None))
                continue
            if offset + length > self.size:
                raise self.fail(f"chunk {chunk + 1} of {self.n_chunks} (bytes {offset} to {offset + length}) ends "
                                f"past the end of the shard, at {self.size} bytes")
            ranges.append(_Chunk(kind, offset, length, length, None))
        return ranges

    def check_declared(self, uncompressed: int, index: int) -> None:
        """A chunk's declared decompressed size against what its shape allows (before anything is decoded)."""
        layout = self.layout
        if self.method == _STORED:
            return  # (the blosc frame declares its own size, checked when decoding)
        limit = MAX_STRING_CHUNK_BYTES if layout.is_strings else layout.chunk_nbytes
        if uncompressed > limit or (not layout.is_strings and uncompressed != limit):
            raise self.fail(f"chunk {index + 1} of {self.n_chunks} declares {uncompressed} decompressed bytes, "
                            f"where its chunk_shape {list(layout.chunk_shape)} of {_type_name(layout)} holds "
                            f"{'at most ' if layout.is_strings else ''}{limit}")

    # Decoding one chunk.

    def decompressed(self, kind: str, data: bytes | memoryview, index: int, expected: int | None,
                     target: np.ndarray | None) -> bytes | memoryview | np.ndarray:
        """The decoded bytes of a chunk: exactly ``expected`` bytes (numbers; written into ``target``), or at most
        :data:`MAX_STRING_CHUNK_BYTES` (strings). Sizes are checked before anything is allocated."""
        chunk = f"chunk {index + 1} of {self.n_chunks}"
        limit = MAX_STRING_CHUNK_BYTES if expected is None else expected
        allows = _Allows(self.layout, limit, expected is None)
        try:
            if kind == "blosc":
                from numcodecs import blosc
                if len(data) < 16:
                    raise self.fail(f"{chunk} has {len(data)} bytes, too few for a Blosc frame")
                nbytes, blocksize, cbytes = struct.unpack_from("<III", data, 4)
                if cbytes != len(data) or blocksize > max(nbytes, 1) or nbytes > limit or (
                        expected is not None and nbytes != expected):
                    raise self.fail(f"{chunk} is a Blosc frame declaring {nbytes} bytes from {cbytes} (it has "
                                    f"{len(data)}), where {allows}")
                out = target if target is not None else np.empty(nbytes, dtype=np.uint8)
                blosc.decompress(data, out)
                return out
            if kind == "zstd":
                from numcodecs import zstd
                size = zstd_content_size(data)
                if size is None or size > limit or (expected is not None and size != expected):
                    raise self.fail(f"{chunk} is a zstd frame declaring {size} bytes, where {allows} (and a frame "
                                    "must declare its size)")
                out = target if target is not None else np.empty(size, dtype=np.uint8)
                zstd.decompress(data, out)
                return out
            decompressor = zlib.decompressobj(-15 if kind == "deflate" else 31)
            raw = decompressor.decompress(data, limit + 1)
            if len(raw) > limit:
                raise self.fail(f"{chunk} decompresses to more than {limit} bytes, where {allows} (a decompression "
                                "bomb, or a corrupt chunk)")
            if not decompressor.eof:
                raise self.fail(f"{chunk} is truncated: its {len(data)} bytes end before its compressed stream")
            if expected is not None and len(raw) != expected:
                raise self.fail(f"{chunk} decompresses to {len(raw)} bytes, where {allows}")
            if target is not None:
                target[:] = np.frombuffer(raw, dtype=np.uint8)
                return target
            return raw
        except DafError:
            raise
        except (RuntimeError, ValueError, zlib.error) as error:
            raise self.fail(f"{chunk} can't be decompressed with {self.layout.compression} ({error})") from error

    def check_crc(self, crc: int | None, stored: bytes | memoryview, decoded: Any, index: int) -> None:
        if crc is None:
            return
        checked = stored if self.method == _STORED else decoded
        if zlib.crc32(checked) != crc:
            raise self.fail(f"the CRC32 of chunk {index + 1} of {self.n_chunks} does not match its bytes "
                            "(the shard is corrupt)")

    def decode_numbers(self, kind: str, data: bytes | memoryview, crc: int | None, index: int,
                       target: np.ndarray) -> None:
        self.decompressed(kind, data, index, target.shape[0], target)
        self.check_crc(crc, data, target, index)

    def decode_strings(self, kind: str, data: bytes | memoryview, crc: int | None, index: int) -> np.ndarray:
        from numcodecs import VLenUTF8
        raw = self.decompressed(kind, data, index, None, None)
        self.check_crc(crc, data, raw, index)
        count = math.prod(self.layout.chunk_shape)
        chunk = f"chunk {index + 1} of {self.n_chunks}"
        stated = int.from_bytes(bytes(raw[:4]), "little") if len(raw) >= 4 else None
        if stated != count:
            raise self.fail(f"{chunk} holds {stated} strings (vlen-utf8) instead of the {count} of its chunk_shape "
                            f"{list(self.layout.chunk_shape)}")
        try:
            values = VLenUTF8().decode(raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise self.fail(f"{chunk} is not valid vlen-utf8 text ({error})") from error
        return values


def zstd_content_size(frame: bytes | memoryview) -> int | None:
    """The decompressed size a zstd frame header declares (``None`` if it does not, or is not a zstd frame; RFC 8878
    §3.1.1.1): what a decoder checks before inflating anything.

    Example:
        >>> zstd_content_size(bytes.fromhex("28b52ffd2005") + b"..."), zstd_content_size(b"not zstd")
        (5, None)
    """
    if len(frame) < 6 or struct.unpack_from("<I", frame, 0)[0] != _ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    single_segment = (descriptor >> 5) & 1
    flag = descriptor >> 6
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    length = (1 if single_segment else 0) if flag == 0 else (2, 4, 8)[flag - 1]
    if length == 0 or at + length > len(frame):
        return None
    size = int.from_bytes(bytes(frame[at:at + length]), "little")
    return size + 256 if length == 2 else size


def _grid_order(chunks_per_shard: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """The coordinates of the chunks in their linear order: Julia's column-major order over the grid (the first
    dimension fastest)."""
    for reversed_coordinates in itertools.product(*(range(count) for count in reversed(chunks_per_shard))):
        yield reversed_coordinates[::-1]


def _chunk_names(chunks_per_shard: tuple[int, ...], method: int) -> list[bytes]:
    """Julia's ``inner_chunk_name_bytes`` of every chunk, in order: a gzip header (its mtime the Base64 of the 0-based
    index) for DEFLATE entries, else ``c/<i_N>/…/<i_1>`` (Julia dimensions last to first, each zero-padded to the
    width of its largest index)."""
    if method == _DEFLATE:
        return [b"\x1f\x8b\x08\x01" + base64.b64encode(index.to_bytes(3, "big")) + b"\x02\xff"
                for index in range(math.prod(chunks_per_shard))]
    widths = [len(str(count - 1)) for count in reversed(chunks_per_shard)]
    return [("c/" + "/".join(str(at).zfill(width) for at, width in zip(coordinates, widths, strict=True))).encode()
            for coordinates in itertools.product(*(range(count) for count in reversed(chunks_per_shard)))]


def _chunk_name(chunks_per_shard: tuple[int, ...], method: int, index: int) -> bytes:
    """The name :func:`_chunk_names` gives the chunk ``index`` (without naming all the others)."""
    if method == _DEFLATE:
        return b"\x1f\x8b\x08\x01" + base64.b64encode(index.to_bytes(3, "big")) + b"\x02\xff"
    coordinates = []
    for count in chunks_per_shard:  # (column-major: the first dimension fastest)
        index, at = divmod(index, count)
        coordinates.append(at)
    widths = [len(str(count - 1)) for count in reversed(chunks_per_shard)]
    return ("c/" + "/".join(str(at).zfill(width) for at, width in zip(reversed(coordinates), widths, strict=True))
            ).encode()


def _shown(name: bytes) -> str:
    """Julia's ``format_zip_entry_name``: printable ASCII as is, other bytes (and ``\\``) as ``\\xNN``."""
    return "".join(chr(byte) if 0x20 <= byte <= 0x7E and byte != 0x5C else f"\\x{byte:02x}" for byte in name)


def _type_name(layout: PackedLayout) -> str:
    return "String" if layout.is_strings else str(layout.dtype)


# Lazy reads: only the chunks a selection covers.


class ChunkCache(SizedLruCache[np.ndarray]):
    """A bounded, thread-safe cache of decoded chunks (least recently used dropped first), shared by every lazy read
    of one kind of storage: :func:`local_chunk_cache` (``DAF_PACKED_LOCAL_CACHE_KB``) and :func:`http_chunk_cache`
    (``DAF_PACKED_HTTP_CACHE_KB``). A chunk is keyed by its shard's name, its place and its content's checksum (the
    CRC32 the central directory records, else that of its compressed bytes), so a rewritten shard never answers
    from a stale chunk. A chunk larger than the whole budget is decoded but not kept.

    Example:
        >>> cache = ChunkCache(16)
        >>> cache.put(("a", 0), np.zeros(2))  # 16 bytes: fits
        >>> cache.put(("b", 0), np.zeros(1))  # 8 more: "a" is dropped
        >>> cache.get(("a", 0)) is None, cache.get(("b", 0)).tolist(), cache.nbytes
        (True, [0.0], 8)
    """

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, _chunk_bytes)

    def put(self, key: Any, chunk: np.ndarray) -> None:
        """Keep a decoded chunk, read-only, dropping the least recently used ones beyond the budget."""
        if _chunk_bytes(chunk) <= self.max_bytes:
            chunk.flags.writeable = False
        super().put(key, chunk)


def _chunk_bytes(chunk: np.ndarray) -> int:
    if chunk.dtype == object:  # (strings: their characters, roughly, plus the pointers)
        return int(chunk.nbytes + sum(len(value) for value in chunk.tolist()))
    return int(chunk.nbytes)


_CACHES: dict[str, ChunkCache] = {}


def local_chunk_cache() -> ChunkCache:
    """The decoded-chunk cache of local packed data (``DAF_PACKED_LOCAL_CACHE_KB``, read when first used).

    Example:
        >>> local_chunk_cache() is local_chunk_cache()
        True
    """
    from ...core.packed_settings import packed_local_cache_kb

    return _chunk_cache("local", packed_local_cache_kb)


def http_chunk_cache() -> ChunkCache:
    """The decoded-chunk cache of packed data read over HTTP (``DAF_PACKED_HTTP_CACHE_KB``, read when first used).

    Example:
        >>> http_chunk_cache() is local_chunk_cache()
        False
    """
    from ...core.packed_settings import packed_http_cache_kb

    return _chunk_cache("http", packed_http_cache_kb)


def _chunk_cache(kind: str, size_kb: Callable[[], int]) -> ChunkCache:
    cache = _CACHES.get(kind)
    if cache is None:
        cache = _CACHES.setdefault(kind, ChunkCache(size_kb() * 1024))
    return cache


class LazyPackedArray:
    """A packed array whose chunks are located once (through the directory or the index, as
    :func:`read_packed_array`) and decoded only when a read covers them, through a :class:`ChunkCache`:
    :meth:`elements` (runs of a vector) and :meth:`columns` (columns of a column-major matrix). Every check of
    :func:`read_packed_array` applies to each chunk decoded.

    Example:
        >>> from pydaf._os.byte_sources import BufferByteSource
        >>> layout = packed_layout(np.dtype("float64"), (1200,), [1024], "gzip", 5)
        >>> LazyPackedArray(BufferByteSource("score.zip", b"PK"), layout)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid packed data
        (the shard has 2 bytes, too few for a ZIP end of central directory (98 bytes)
        in the shard: score.zip)
    """

    def __init__(self, source: ByteSource, layout: PackedLayout, *, invalid: Invalid = _default_invalid,
                 via: Literal["directory", "index", "auto"] = "directory", fill: Any = None,
                 cache: ChunkCache | None = None) -> None:
        self.layout = layout
        self._reader = reader = _ShardReader(source, layout, invalid)
        self._fill = ("" if layout.is_strings else 0) if fill is None else fill
        self._cache = local_chunk_cache() if cache is None else cache
        # Through the index: all the chunks located at once (its CRC32C covers all of it). Through the directory:
        # each chunk's entry read when first needed (fixed-length entries, located by arithmetic, as Julia's
        # ``ZipShardArray``), so a few columns of a matrix of many chunks read a few entries, not the directory.
        self._chunks: dict[int, _Chunk] = {}
        self._directory: tuple[int, int] | None = None
        self._lock = threading.Lock()
        if reader.n_chunks:
            if via == "auto":
                via = "directory" if reader.has_directory() else "index"
            if via == "directory":
                self._directory = reader.directory_start()
            else:
                self._chunks = dict(enumerate(reader.index_ranges()))

    def elements(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """The elements of the runs ``[starts[i], stops[i])`` (0-based) of a vector, concatenated (a new array)."""
        layout = self.layout
        assert len(layout.shape) == 1
        starts, stops = np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)
        keep = stops > starts
        starts, stops = starts[keep], stops[keep]
        total = int((stops - starts).sum()) if starts.size else 0
        result = np.empty(total, dtype=layout.dtype)
        if not total:
            return result
        if starts.min() < 0 or stops.max() > layout.shape[0]:
            raise self._reader.fail(f"elements {int(starts.min())} to {int(stops.max())} are out of the "
                                    f"{layout.shape[0]} of the array")
        size = layout.chunk_shape[0]
        needed = np.unique(np.concatenate([np.arange(start // size, (stop - 1) // size + 1)
                                           for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)]))
        chunks = self._decoded(needed.tolist())
        at = 0
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            position = start
            while position < stop:
                index, offset = divmod(position, size)
                end = min(stop, (index + 1) * size)
                result[at:at + end - position] = chunks[index][offset:offset + end - position]
                at += end - position
                position = end
        return result

    def columns(self, positions: np.ndarray) -> np.ndarray:
        """The columns at ``positions`` (0-based, any order, repeats allowed) of a matrix, as a new column-major
        array, decoding only the chunks holding them."""
        layout = self.layout
        assert len(layout.shape) == 2
        n_rows, n_columns = layout.shape
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= n_columns):
            raise self._reader.fail(f"columns {int(positions.min())} to {int(positions.max())} are out of the "
                                    f"{n_columns} of the matrix")
        result = np.empty((n_rows, positions.shape[0]), dtype=layout.dtype, order="F")
        if not positions.size or not n_rows:
            return result
        chunk_rows, chunk_columns = layout.chunk_shape
        grid_rows = layout.chunks_per_shard[0]
        grid_columns = np.unique(positions // chunk_columns)
        needed = [int(grid_column) * grid_rows + grid_row for grid_column in grid_columns.tolist()
                  for grid_row in range(grid_rows)]
        chunks = self._decoded(needed)
        for at, column in enumerate(positions.tolist()):
            grid_column, within = divmod(column, chunk_columns)
            for grid_row in range(grid_rows):
                first = grid_row * chunk_rows
                last = min(first + chunk_rows, n_rows)
                chunk = chunks[grid_column * grid_rows + grid_row]
                result[first:last, at] = chunk[within * chunk_rows:within * chunk_rows + last - first]
        return result

    def _decoded(self, indices: list[int]) -> dict[int, np.ndarray]:
        """The decoded chunks (flat, column-major, ``prod(chunk_shape)`` elements) at ``indices``: from the cache, or
        read (at once, where the source coalesces ranges) and decoded."""
        reader = self._reader
        chunks = self._located(indices)
        decoded: dict[int, np.ndarray] = {}
        missing: list[tuple[int, Any]] = []
        for index in indices:
            chunk = chunks[index]
            if chunk.decoder is None:
                decoded[index] = np.full(math.prod(self.layout.chunk_shape), self._fill, dtype=self.layout.dtype)
                continue
            key = (reader.source.name, index, chunk.offset, chunk.length, chunk.crc)
            if chunk.crc is not None:
                cached = self._cache.get(key)
                if cached is not None:
                    decoded[index] = cached
                    continue
            missing.append((index, key))
        if not missing:
            return decoded
        pieces = reader.prefetch([chunks[index] for index, _ in missing])
        for index, key in missing:
            what = f"chunk {index + 1} of {reader.n_chunks}"
            chunk = chunks[index]
            data = reader.read(chunk.offset, chunk.read, what) if pieces is None else \
                reader.checked(next(pieces), chunk.offset, chunk.read, what)
            if chunk.crc is None:  # (the index has no checksum: the content's own keys the cache)
                key = (*key[:4], zlib.crc32(data))
                cached = self._cache.get(key)
                if cached is not None:
                    decoded[index] = cached
                    continue
            decoded[index] = values = self._decode(index, chunk, data)
            self._cache.put(key, values)
        return decoded

    def _located(self, indices: list[int]) -> dict[int, _Chunk]:
        """The chunks at ``indices``, their central directory entries read (each run of adjacent entries at once,
        all the runs at once where the source coalesces ranges) and checked if not yet."""
        with self._lock:
            missing = sorted({index for index in indices if index not in self._chunks})
        if missing and self._directory is not None:
            directory, entry_size = self._directory
            runs: list[list[int]] = []
            for index in missing:
                if runs and index == runs[-1][-1] + 1:
                    runs[-1].append(index)
                else:
                    runs.append([index])
            ranges = [(directory + run[0] * entry_size, len(run) * entry_size) for run in runs]
            read_ranges = getattr(self._reader.source, "read_ranges", None)
            if callable(read_ranges) and len(ranges) > 1:
                for offset, length in ranges:
                    self._reader.check_range(offset, length, "the central directory")
                try:
                    pieces = read_ranges(ranges)
                except DafFormatError as error:
                    raise self._reader.fail(f"the central directory can't be read ({error})") from error
                if len(pieces) != len(ranges):
                    raise self._reader.fail(f"the source read {len(pieces)} ranges of the {len(ranges)} asked")
                pieces = [self._reader.checked(piece, offset, length, "the central directory")
                          for piece, (offset, length) in zip(pieces, ranges, strict=True)]
            else:
                pieces = [self._reader.read(offset, length, "the central directory") for offset, length in ranges]
            located: dict[int, _Chunk] = {}
            grid, method = self.layout.chunks_per_shard, self._reader.method
            for run, (offset, _), piece in zip(runs, ranges, pieces, strict=True):
                entries = bytes(piece)
                for at, index in enumerate(run):
                    located[index] = self._reader.directory_entry(entries, at * entry_size, index,
                                                                  _chunk_name(grid, method, index), directory, offset)
            with self._lock:
                self._chunks.update(located)
        with self._lock:
            return {index: self._chunks[index] for index in indices}

    def _decode(self, index: int, chunk: _Chunk, data: bytes | memoryview) -> np.ndarray:
        reader, layout = self._reader, self.layout
        if chunk.read != chunk.length:
            if bytes(data[:4]) != struct.pack("<I", _LFH_SIGNATURE):
                raise reader.fail(f"no local file header for chunk {index + 1} of {reader.n_chunks} at offset "
                                  f"{chunk.offset}")
            data = data[chunk.read - chunk.length:]
        assert chunk.decoder is not None
        if layout.is_strings:
            return reader.decode_strings(chunk.decoder, data, chunk.crc, index)
        values = np.empty(math.prod(layout.chunk_shape), dtype=layout.dtype)
        reader.decode_numbers(chunk.decoder, data, chunk.crc, index, values.view(np.uint8))
        return values
