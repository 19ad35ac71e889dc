"""Writing Julia's dual-format packed shard (docs/spec/FORMATS.md §4) byte for byte as ``packed_format.jl`` does
(``encode_packed_dense_array`` driving an ``IncrementalShardWriter``), and the metadata that describes one: the
FilesDaf/ZipDaf descriptors (§3.7, §3.9) and the Zarr ``zarr.json`` of a sharded array (§5.5).

A property of ``shape`` (Julia order: ``(n,)`` or ``(rows, columns)``, a matrix column-major) is cut into a grid of
``chunk_shape`` chunks (edge chunks padded with 0 or ``""``), in column-major grid order. Each chunk is encoded
(raw little-endian elements, or ``vlen-utf8`` for strings), then compressed (Julia's ``v3_bytes_codecs_for``: Blosc
with bitshuffle over the byte buffer, so its frame records typesize 1; a zstd frame; raw DEFLATE at zlib's default
level 6, whatever the configured level, framed as a gzip stream). The shard is the Zarr index (``offset, nbytes``
per chunk and their CRC32C) at offset 0, one ZIP entry per chunk (``submit_shard_chunk!``), ``codec.json`` for the
STORED (Blosc) codecs, the central directory and the ZIP64 end records.

Codecs come from numcodecs (Blosc, Zstd, VLenUTF8) and zlib; the CRC32C from google_crc32c.

Example:
    >>> import numpy as np, zipfile, io
    >>> from pydaf.core.packed_settings import PackedCodec
    >>> shard = encode_packed_dense_array(np.arange(1200.0), (1024,), PackedCodec("zstd", 5))
    >>> zipfile.ZipFile(io.BytesIO(shard)).namelist()
    ['c/0', 'c/1']
"""

from __future__ import annotations

import base64
import json
import math
import struct
import zlib
from typing import Any

import numpy as np

from ...core.packed_settings import PackedCodec
from ...errors import DafValueError
from ...storage_types import STRING_DTYPE, julia_name

_STORED, _DEFLATE, _ZSTD = 0, 8, 93
#: The ZIP method of each codec's entries (Julia's ``zip_method_for_pipeline``).
ZIP_METHODS = {"blosc_zstd_bitshuffle": _STORED, "blosc_lz4_bitshuffle": _STORED, "zstd": _ZSTD, "gzip": _DEFLATE}
#: Julia's refusal of the H5df-only codecs on a shard (``v3_bytes_codecs_for``).
_NOT_IN_SHARDS = {
    "gzip_shuffle": "packed compression codec :gzip_shuffle is not supported on the v3 sharded backend (Zarr.jl has "
                    "no v3 standalone shuffle codec); use :gzip or :blosc_zstd_bitshuffle",
    "zstd_bitshuffle": "packed compression codec :zstd_bitshuffle is not supported on the v3 sharded backend "
                       "(Zarr.jl has no v3 bitshuffle codec); use :blosc_zstd_bitshuffle (Blosc bundles its own "
                       "bitshuffle)",
}
_JULIA_DEFLATE_LEVEL = 6  # (CodecZlib's DeflateCompressor default: Julia never passes the configured level)


def _compression_of(codec: PackedCodec) -> str:
    if codec.compression in _NOT_IN_SHARDS:
        raise DafValueError(_NOT_IN_SHARDS[codec.compression], daf_name=None)
    if codec.compression not in ZIP_METHODS:
        raise DafValueError(f"unsupported packed compression codec: :{codec.compression}", daf_name=None)
    return codec.compression


def v3_codecs_for(dtype: np.dtype, codec: PackedCodec) -> list[dict[str, Any]]:
    """The inner codecs of a shard as Zarr v3 JSON (Julia's ``build_inner_pipeline`` of ``v3_bytes_codecs_for``):
    the array-to-bytes codec, then the compressor (``typesize`` 1 for strings). Refuses the H5df-only codecs with
    Julia's error.

    Example:
        >>> v3_codecs_for(np.dtype("int32"), PackedCodec("gzip", 7))
        [{'configuration': {'endian': 'little'}, 'name': 'bytes'}, {'configuration': {'level': 7}, 'name': 'gzip'}]
        >>> try:
        ...     v3_codecs_for(np.dtype("int32"), PackedCodec("gzip_shuffle", 7))
        ... except DafValueError as error:
        ...     print(str(error)[:73])
        packed compression codec :gzip_shuffle is not supported on the v3 sharded
    """
    compression = _compression_of(codec)
    is_strings = np.dtype(dtype) == STRING_DTYPE
    first: dict[str, Any] = ({"configuration": {}, "name": "vlen-utf8"} if is_strings
                             else {"configuration": {"endian": "little"}, "name": "bytes"})
    second: dict[str, Any]
    if compression.startswith("blosc_"):
        second = {"configuration": {"blocksize": 0, "clevel": codec.compression_level,
                                    "cname": compression.split("_")[1], "shuffle": "bitshuffle",
                                    "typesize": 1 if is_strings else np.dtype(dtype).itemsize}, "name": "blosc"}
    else:
        second = {"configuration": {"level": codec.compression_level}, "name": compression}
    return [first, second]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def inner_chunk_name_bytes(chunks_per_shard: tuple[int, ...], chunk_index: int, method: int) -> bytes:
    """The ZIP entry name of the chunk at the 0-based linear ``chunk_index`` (Julia's ``inner_chunk_name_bytes``):
    the 10-byte gzip header (the index in its mtime, as Base64) for DEFLATE, else ``c/<i_N>/.../<i_1>`` zero-padded.

    Example:
        >>> inner_chunk_name_bytes((11,), 2, 0), inner_chunk_name_bytes((2, 3), 3, 93)
        (b'c/02', b'c/1/1')
        >>> inner_chunk_name_bytes((2,), 1, 8)
        b'\\x1f\\x8b\\x08\\x01AAAB\\x02\\xff'
    """
    if method == _DEFLATE:
        if not 0 <= chunk_index < 1 << 24:
            raise DafValueError(f"too many chunks in one gzip shard: {chunk_index + 1} (at most 2^24)", daf_name=None)
        return b"\x1f\x8b\x08\x01" + base64.b64encode(chunk_index.to_bytes(3, "big")) + b"\x02\xff"
    coordinates = np.unravel_index(chunk_index, chunks_per_shard, order="F")
    return ("c/" + "/".join(str(int(coordinates[d])).zfill(len(str(chunks_per_shard[d] - 1)))
                            for d in reversed(range(len(chunks_per_shard))))).encode()


class _Compressor:
    """One codec's bytes-to-bytes step (numcodecs and zlib are imported only when packing)."""

    def __init__(self, compression: str, level: int) -> None:
        self.compression = compression
        if compression.startswith("blosc_"):
            from numcodecs import Blosc

            self._codec: Any = Blosc(cname=compression.split("_")[1], clevel=level, shuffle=Blosc.BITSHUFFLE,
                                     blocksize=0)
        elif compression == "zstd":
            from numcodecs import Zstd

            self._codec = Zstd(level=level)

    def __call__(self, raw: bytes) -> bytes:
        if self.compression == "gzip":
            compressor = zlib.compressobj(_JULIA_DEFLATE_LEVEL, zlib.DEFLATED, -15)
            return compressor.compress(raw) + compressor.flush()
        if self.compression == "zstd":
            return bytes(self._codec.encode(raw))
        # (Zarr.jl gives Blosc the byte buffer: its frame header records typesize 1)
        return bytes(self._codec.encode(np.frombuffer(raw, dtype=np.uint8)))


def _encode_raw(chunk: np.ndarray) -> bytes:
    """The array-to-bytes step of one chunk: little-endian elements in column-major order, or ``vlen-utf8``."""
    if chunk.dtype == STRING_DTYPE:
        encoded = [str(value).encode("utf-8") for value in chunk.reshape(-1, order="F")]
        parts = [struct.pack("<I", len(encoded))]
        for value in encoded:
            parts.append(struct.pack("<I", len(value)))
            parts.append(value)
        return b"".join(parts)
    return np.asarray(chunk, dtype=chunk.dtype.newbyteorder("<")).tobytes(order="F")


def _chunks(values: np.ndarray, chunk_shape: tuple[int, ...], grid: tuple[int, ...]) -> Any:
    """Each chunk (padded to ``chunk_shape``) in Julia's column-major grid order."""
    fill: Any = "" if values.dtype == STRING_DTYPE else 0
    for index in range(math.prod(grid)):
        coordinates = np.unravel_index(index, grid, order="F")
        region = tuple(slice(int(c) * n, min((int(c) + 1) * n, size))
                       for c, n, size in zip(coordinates, chunk_shape, values.shape, strict=True))
        part = values[region]
        if part.shape != chunk_shape:
            padded = np.full(chunk_shape, fill, dtype=values.dtype, order="F")
            padded[tuple(slice(0, extent) for extent in part.shape)] = part
            part = padded
        yield index, part


def encode_packed_dense_array(values: np.ndarray, chunk_shape: tuple[int, ...], codec: PackedCodec) -> bytes:
    """The dual-format shard of ``values`` (Julia shape: a vector, or a rows x columns matrix) in inner chunks of
    ``chunk_shape``, compressed by ``codec`` (Julia's ``encode_packed_dense_array``).

    Example:
        >>> shard = encode_packed_dense_array(np.array(["a", "b", "c"], dtype=object), (2,), PackedCodec("gzip", 5))
        >>> len(shard), shard[-22:-18].hex()
        (422, '504b0506')
    """
    compression = _compression_of(codec)
    method = ZIP_METHODS[compression]
    chunk_shape = tuple(int(size) for size in chunk_shape)
    grid = tuple(-(-int(size) // chunk) for size, chunk in zip(values.shape, chunk_shape, strict=True))
    count = math.prod(grid)
    compress = _Compressor(compression, codec.compression_level)
    index_size = 16 * count + 4
    parts: list[bytes] = [bytes(index_size)]
    offset = index_size
    index = np.empty(2 * count, dtype="<u8")
    central: list[bytes] = []
    for chunk_index, chunk in _chunks(values, chunk_shape, grid):
        raw = _encode_raw(chunk)
        data = compress(raw)
        name = inner_chunk_name_bytes(grid, chunk_index, method)
        crc = zlib.crc32(data if method == _STORED else raw)
        usize = len(data) if method == _STORED else len(raw)  # (a STORED entry's data is the codec's output)
        if method == _DEFLATE:  # (the gzip header is the name; its trailer dead bytes after the entry)
            header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x0800, method, 0, 0x21, crc, len(data), len(raw),
                                 len(name), 0) + name
            index[2 * chunk_index], index[2 * chunk_index + 1] = offset + 30, len(name) + len(data) + 8
            entry = [header, data, struct.pack("<II", crc, len(raw) & 0xFFFFFFFF)]
        else:
            header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0x0800, method, 0, 0x21, crc, 0xFFFFFFFF,
                                 0xFFFFFFFF, len(name), 20) + name + struct.pack("<HHQQ", 1, 16, usize, len(data))
            index[2 * chunk_index], index[2 * chunk_index + 1] = offset + len(header), len(data)
            entry = [header, data]
        central.append(_central_entry(name, method, crc, len(data), usize, offset))
        parts += entry
        offset += sum(map(len, entry))
    entries = count
    if method == _STORED:
        content = _compact(v3_codecs_for(values.dtype, codec)).encode()
        crc = zlib.crc32(content)
        header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0x0800, _STORED, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                             10, 20) + b"codec.json" + struct.pack("<HHQQ", 1, 16, len(content), len(content))
        central.append(_central_entry(b"codec.json", _STORED, crc, len(content), len(content), offset))
        parts += [header, content]
        offset += len(header) + len(content)
        entries += 1
    directory = b"".join(central)
    end = offset + len(directory)
    parts.append(directory)
    parts.append(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, entries, entries, len(directory),
                             offset))
    parts.append(struct.pack("<IIQI", 0x07064B50, 0, end, 1))
    parts.append(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
    table = index.tobytes()
    parts[0] = table + struct.pack("<I", _crc32c(table))
    return b"".join(parts)


def _crc32c(data: bytes) -> int:
    import google_crc32c

    return int(google_crc32c.value(data))


def _central_entry(name: bytes, method: int, crc: int, csize: int, usize: int, header: int) -> bytes:
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 45, 0x0800, method, 0, 0x21, crc, 0xFFFFFFFF,
                       0xFFFFFFFF, len(name), 28, 0, 0, 0, 0o100644 << 16, 0xFFFFFFFF) + name + struct.pack(
        "<HHQQQ", 1, 24, usize, csize, header)


def _eltype(dtype: np.dtype) -> str:
    return "String" if np.dtype(dtype) == STRING_DTYPE else julia_name(np.dtype(dtype))


def _packed_fields(chunk_shape: tuple[int, ...], codec: PackedCodec) -> str:
    shape = ",".join(str(int(size)) for size in chunk_shape)
    return (f'"packed_format":"indexed+zipped","chunk_shape":[{shape}],"compression":"{codec.compression}",'
            f'"compression_level":{codec.compression_level},"index_location":"start"')


def packed_array_json(dtype: np.dtype, chunk_shape: tuple[int, ...], codec: PackedCodec) -> str:
    """The FilesDaf descriptor of a packed dense property (Julia's ``packed_array_json_bytes``, without its
    newline).

    Example:
        >>> packed_array_json(np.dtype("float64"), (1024,), PackedCodec("gzip", 5))
        '{"format":"dense","eltype":"Float64","packed_format":"indexed+zipped","chunk_shape":[1024],"compression":"gzip","compression_level":5,"index_location":"start"}'
    """
    return f'{{"format":"dense","eltype":"{_eltype(dtype)}",{_packed_fields(chunk_shape, codec)}}}'


def component_json(dtype: np.dtype, n_elements: int, chunk_shape: tuple[int, ...] | None,
                   codec: PackedCodec | None = None) -> str:
    """The descriptor of one sparse component (Julia's ``component_descriptor_json``): flat, or packed if
    ``chunk_shape`` is given.

    Example:
        >>> component_json(np.dtype("int64"), 3, None)
        '{"format":"dense","eltype":"Int64","n_elements":3}'
    """
    flat = f'"format":"dense","eltype":"{_eltype(dtype)}","n_elements":{int(n_elements)}'
    if chunk_shape is None:
        return f"{{{flat}}}"
    assert codec is not None
    return f"{{{flat},{_packed_fields(chunk_shape, codec)}}}"


def sharded_array_metadata(dtype: np.dtype, shape: tuple[int, ...], chunk_shape: tuple[int, ...],
                           codec: PackedCodec) -> tuple[str, str]:
    """The ``zarr.json`` of a packed (sharded) Zarr array, and its consolidated metadata entry (the same without
    ``attributes``), as Julia's ``sharded_zcreate`` writes them (§5.5), for the Julia ``shape`` and ``chunk_shape``
    (Zarr's are reversed), except for one field: the shard's ``chunk_grid`` is the shape rounded up to whole inner
    chunks (Julia's is the shape itself), so zarr-python, which refuses a shard shape that is not a multiple of the
    inner chunk shape, reads it too; the shard is the same (one shard, the same inner chunks and index), and Julia's
    Zarr.jl reads a shard whose chunk is larger than the array (docs/design/packed.md).

    Example:
        >>> metadata, entry = sharded_array_metadata(np.dtype("float64"), (1200,), (1024,), PackedCodec("zstd", 5))
        >>> metadata[:104]
        '{"attributes":{"daf_packed_format":"indexed+zipped"},"chunk_grid":{"configuration":{"chunk_shape":[2048]'
        >>> entry.startswith('{"chunk_grid"')
        True
    """
    is_strings = np.dtype(dtype) == STRING_DTYPE
    grid = [-(-int(size) // chunk) * chunk for size, chunk in zip(shape, chunk_shape, strict=True)]
    fill: str | bool | float | int
    if is_strings:
        data_type, fill = "string", ""
    else:
        data_type = np.dtype(dtype).name
        fill = False if dtype == np.bool_ else 0.0 if np.dtype(dtype).kind == "f" else 0
    sharding = {"configuration": {"chunk_shape": list(chunk_shape[::-1]), "codecs": v3_codecs_for(dtype, codec),
                                  "index_codecs": [{"configuration": {"endian": "little"}, "name": "bytes"},
                                                   {"name": "crc32c"}],
                                  "index_location": "start"}, "name": "sharding_indexed"}
    entry: dict[str, Any] = {
        "chunk_grid": {"configuration": {"chunk_shape": grid[::-1]}, "name": "regular"},
        "chunk_key_encoding": {"configuration": {"separator": "/"}, "name": "default"},
        "codecs": [sharding], "data_type": data_type, "fill_value": fill, "node_type": "array",
        "shape": [int(size) for size in shape[::-1]], "zarr_format": 3}
    return _compact({"attributes": {"daf_packed_format": "indexed+zipped"}, **entry}), _compact(entry)
