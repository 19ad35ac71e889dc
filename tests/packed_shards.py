"""Building dual-format packed shards (docs/spec/FORMATS.md §4) the way Julia's ``IncrementalShardWriter`` does, for
the tests of the read side: the codecs from numcodecs and zlib, the framing field by field from the spec (checked
against the shards Julia wrote: :func:`build_shard` reproduces ``files-packed/gzip.files`` byte for byte). Its
framing is pydaf's writer's (``pydaf.formats.packed.shard_writer``, which ``tests/test_packed_write.py`` checks
gives the same bytes for every codec); it stays separate so the hostile tests can corrupt one step of it.

Also :func:`pack_files_property` and :func:`pack_zarr_node`, which turn a flat property of a FilesDaf directory or a
ZarrDaf directory into the packed one Julia would have written."""

from __future__ import annotations

import base64
import json
import math
import os
import struct
import zlib
from typing import Any

import google_crc32c
import numpy as np
from numcodecs import Blosc, VLenUTF8, Zstd

STORED, DEFLATE, ZSTD = 0, 8, 93
METHODS = {"blosc_zstd_bitshuffle": STORED, "blosc_lz4_bitshuffle": STORED, "zstd": ZSTD, "gzip": DEFLATE}
JULIA_NAMES = {np.dtype(np.bool_): "Bool", np.dtype(np.int8): "Int8", np.dtype(np.int16): "Int16",
               np.dtype(np.int32): "Int32", np.dtype(np.int64): "Int64", np.dtype(np.uint8): "UInt8",
               np.dtype(np.uint16): "UInt16", np.dtype(np.uint32): "UInt32", np.dtype(np.uint64): "UInt64",
               np.dtype(np.float32): "Float32", np.dtype(np.float64): "Float64"}


def julia_chunk_shape(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    """Julia's ``chunks_for`` at the default 8 KiB target (strings count 16 bytes each)."""
    element = 16 if dtype.kind == "O" else dtype.itemsize
    rows = min(8192 // element, shape[0])
    return (rows,) if len(shape) == 1 else (rows, 1)


def chunk_name(grid: tuple[int, ...], index: int, method: int) -> bytes:
    if method == DEFLATE:
        return b"\x1f\x8b\x08\x01" + base64.b64encode(index.to_bytes(3, "big")) + b"\x02\xff"
    coordinates = np.unravel_index(index, grid, order="F")
    return ("c/" + "/".join(str(int(coordinates[d])).zfill(len(str(grid[d] - 1)))
                            for d in reversed(range(len(grid))))).encode()


def encode_chunk(chunk: np.ndarray) -> bytes:
    """The array-to-bytes step: raw little-endian elements in chunk-local column-major order, or vlen-utf8."""
    if chunk.dtype.kind == "O":
        return bytes(VLenUTF8().encode(chunk.reshape(-1, order="F")))
    return np.asfortranarray(chunk).tobytes(order="F")


def compress(raw: bytes, compression: str, level: int) -> bytes:
    if compression.startswith("blosc_"):
        cname = compression.split("_")[1]
        return bytes(Blosc(cname=cname, clevel=level, shuffle=Blosc.BITSHUFFLE, blocksize=0).encode(
            np.frombuffer(raw, dtype=np.uint8)))  # (a byte buffer: the frame records typesize 1, as Julia's)
    if compression == "zstd":
        return bytes(Zstd(level=level).encode(raw))
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)  # (Julia's default zlib level, whatever the configured one)
    return compressor.compress(raw) + compressor.flush()


def _lfh(name: bytes, method: int, crc: int, compressed: int, raw: int) -> bytes:
    if method == DEFLATE:
        return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x0800, method, 0, 0x21, crc, compressed, raw,
                           len(name), 0) + name
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0x0800, method, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                       len(name), 20) + name + struct.pack("<HHQQ", 1, 16, raw, compressed)


def _cd(name: bytes, method: int, crc: int, compressed: int, raw: int, header: int) -> bytes:
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 45, 0x0800, method, 0, 0x21, crc, 0xFFFFFFFF,
                       0xFFFFFFFF, len(name), 28, 0, 0, 0, 0o100644 << 16, 0xFFFFFFFF) + name + struct.pack(
        "<HHQQQ", 1, 24, raw, compressed, header)


def codec_json(dtype: np.dtype, compression: str, level: int) -> bytes:
    first = {"configuration": {}, "name": "vlen-utf8"} if dtype.kind == "O" else \
        {"configuration": {"endian": "little"}, "name": "bytes"}
    cname = compression.split("_")[1]
    blosc = {"configuration": {"blocksize": 0, "clevel": level, "cname": cname, "shuffle": "bitshuffle",
                               "typesize": 1 if dtype.kind == "O" else dtype.itemsize}, "name": "blosc"}
    return json.dumps([first, blosc], separators=(",", ":")).encode()


def build_shard(values: np.ndarray, chunk_shape: tuple[int, ...], compression: str, level: int = 5) -> bytes:
    """The dual-format shard of ``values`` (Julia shape: a vector, or a matrix in Daf's rows x columns)."""
    shape = values.shape
    grid = tuple(-(-size // chunk) for size, chunk in zip(shape, chunk_shape, strict=True))
    count = math.prod(grid)
    method = METHODS[compression]
    out = bytearray(16 * count + 4)
    index: list[tuple[int, int]] = []
    central = bytearray()
    for k in range(count):
        coordinates = np.unravel_index(k, grid, order="F")
        region = tuple(slice(int(c) * n, min((int(c) + 1) * n, size))
                       for c, n, size in zip(coordinates, chunk_shape, shape, strict=True))
        chunk = np.full(chunk_shape, "" if values.dtype.kind == "O" else 0, dtype=values.dtype, order="F")
        part = values[region]
        chunk[tuple(slice(0, extent) for extent in part.shape)] = part
        raw = encode_chunk(chunk)
        data = compress(raw, compression, level)
        crc = zlib.crc32(data if method == STORED else raw)
        name = chunk_name(grid, k, method)
        header = len(out)
        usize = len(data) if method == STORED else len(raw)  # (Julia: a STORED entry's size is the codec output's)
        out += _lfh(name, method, crc, len(data), usize)
        if method == DEFLATE:
            index.append((header + 30, 10 + len(data) + 8))
        else:
            index.append((len(out), len(data)))
        out += data
        if method == DEFLATE:
            out += struct.pack("<II", zlib.crc32(raw), len(raw) & 0xFFFFFFFF)
        central += _cd(name, method, crc, len(data), usize, header)
    entries = count
    if method == STORED:
        content = codec_json(values.dtype, compression, level)
        header = len(out)
        out += _lfh(b"codec.json", STORED, zlib.crc32(content), len(content), len(content)) + content
        central += _cd(b"codec.json", STORED, zlib.crc32(content), len(content), len(content), header)
        entries += 1
    directory = len(out)
    out += central
    end = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, entries, entries, len(central), directory)
    out += struct.pack("<IIQI", 0x07064B50, 0, end, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    table = b"".join(struct.pack("<QQ", offset, nbytes) for offset, nbytes in index)
    out[:16 * count + 4] = table + struct.pack("<I", google_crc32c.value(table))
    return bytes(out)


def packed_descriptor(dtype: np.dtype, chunk_shape: tuple[int, ...], compression: str, level: int = 5,
                      n_elements: int | None = None) -> str:
    eltype = "String" if dtype.kind == "O" else JULIA_NAMES[np.dtype(dtype)]
    count = "" if n_elements is None else f',"n_elements":{n_elements}'
    return (f'{{"format":"dense","eltype":"{eltype}"{count},"packed_format":"indexed+zipped","chunk_shape":'
            f'{json.dumps(list(chunk_shape), separators=(",", ":"))},"compression":"{compression}",'
            f'"compression_level":{level},"index_location":"start"}}')


def pack_files_property(base: str, values: Any, compression: str, level: int = 5,
                        chunk_shape: tuple[int, ...] | None = None) -> None:
    """Replace the flat dense property ``base`` (a path without suffix) of a FilesDaf directory by its packed form:
    ``values`` (a numpy vector or matrix) as ``<base>.zip`` and a packed descriptor (``metadata.json`` removed: pydaf
    and Julia rebuild it)."""
    values = np.asarray(values)
    chunk_shape = chunk_shape or julia_chunk_shape(values.shape, values.dtype)
    for suffix in (".data", ".txt"):
        if os.path.exists(base + suffix):
            os.remove(base + suffix)
    with open(base + ".zip", "wb") as handle:
        handle.write(build_shard(values, chunk_shape, compression, level))
    with open(base + ".json", "w") as handle:
        handle.write(packed_descriptor(values.dtype, chunk_shape, compression, level) + "\n")
    _drop_metadata(base)


def pack_files_component(base: str, component: str, values: np.ndarray, compression: str, level: int = 5,
                         chunk_shape: tuple[int, ...] | None = None) -> None:
    """Pack one component (``nzind``, ``nzval``, ``colptr``, ``rowval``) of a flat v1.1 sparse property of a FilesDaf
    directory: ``<base>.<component>.zip`` and the packed fields in the component's descriptor."""
    chunk_shape = chunk_shape or julia_chunk_shape(values.shape, values.dtype)
    for suffix in (f".{component}", ".nztxt" if component == "nzval" else None):
        if suffix and os.path.exists(base + suffix):
            os.remove(base + suffix)
    with open(f"{base}.{component}.zip", "wb") as handle:
        handle.write(build_shard(values, chunk_shape, compression, level))
    with open(base + ".json") as handle:
        descriptor = json.loads(handle.read())
    descriptor[component] = json.loads(packed_descriptor(values.dtype, chunk_shape, compression, level,
                                                         values.shape[0]))
    with open(base + ".json", "w") as handle:
        handle.write(json.dumps(descriptor, separators=(",", ":")) + "\n")
    _drop_metadata(base)


def _drop_metadata(base: str) -> None:
    root = os.path.dirname(base)
    while root and not os.path.exists(os.path.join(root, "daf.json")):
        root = os.path.dirname(root)
    if root and os.path.exists(os.path.join(root, "metadata.json")):
        os.remove(os.path.join(root, "metadata.json"))


def sharded_zarr_json(dtype: np.dtype, shape: tuple[int, ...], chunk_shape: tuple[int, ...], compression: str,
                      level: int = 5) -> dict[str, Any]:
    """A packed array's ``zarr.json`` as Julia writes it (§5.5): Zarr shapes are Julia's reversed."""
    first = {"configuration": {}, "name": "vlen-utf8"} if dtype.kind == "O" else \
        {"configuration": {"endian": "little"}, "name": "bytes"}
    if compression.startswith("blosc_"):
        second = {"configuration": {"blocksize": 0, "clevel": level, "cname": compression.split("_")[1],
                                    "shuffle": "bitshuffle", "typesize": 1 if dtype.kind == "O" else dtype.itemsize},
                  "name": "blosc"}
    else:
        second = {"configuration": {"level": level}, "name": compression}
    data_type = "string" if dtype.kind == "O" else np.dtype(dtype).name
    fill: Any = "" if dtype.kind == "O" else False if dtype == np.bool_ else 0.0 if dtype.kind == "f" else 0
    return {"attributes": {"daf_packed_format": "indexed+zipped"},
            "chunk_grid": {"configuration": {"chunk_shape": list(shape[::-1])}, "name": "regular"},
            "chunk_key_encoding": {"configuration": {"separator": "/"}, "name": "default"},
            "codecs": [{"configuration": {"chunk_shape": list(chunk_shape[::-1]), "codecs": [first, second],
                                          "index_codecs": [{"configuration": {"endian": "little"}, "name": "bytes"},
                                                           {"name": "crc32c"}],
                                          "index_location": "start"}, "name": "sharding_indexed"}],
            "data_type": data_type, "fill_value": fill, "node_type": "array", "shape": list(shape[::-1]),
            "zarr_format": 3}


def pack_zarr_node(root: str, node: str, values: Any, compression: str, level: int = 5,
                   chunk_shape: tuple[int, ...] | None = None) -> None:
    """Replace the flat array ``node`` of a ZarrDaf directory by its packed form (its shard ``c/0`` or ``c/0/0``,
    its ``zarr.json`` and its entry in the root's consolidated metadata), as Julia writes it."""
    values = np.asarray(values)
    chunk_shape = chunk_shape or julia_chunk_shape(values.shape, values.dtype)
    folder = os.path.join(root, *node.split("/"))
    for entry in os.listdir(folder):
        if entry != "zarr.json":
            path = os.path.join(folder, entry)
            if os.path.isdir(path):
                import shutil
                shutil.rmtree(path)
            else:
                os.remove(path)
    key = os.path.join(folder, "c", *(["0"] * values.ndim))
    os.makedirs(os.path.dirname(key), exist_ok=True)
    with open(key, "wb") as handle:
        handle.write(build_shard(values, chunk_shape, compression, level))
    metadata = sharded_zarr_json(values.dtype, values.shape, chunk_shape, compression, level)
    with open(os.path.join(folder, "zarr.json"), "w") as handle:
        handle.write(json.dumps(metadata, separators=(",", ":")))
    with open(os.path.join(root, "zarr.json")) as handle:
        group = json.loads(handle.read())
    consolidated = group.get("consolidated_metadata", {}).get("metadata")
    if isinstance(consolidated, dict) and node in consolidated:
        consolidated[node] = {key: value for key, value in metadata.items() if key != "attributes"}
        with open(os.path.join(root, "zarr.json"), "w") as handle:
            handle.write(json.dumps(group, separators=(",", ":")))
