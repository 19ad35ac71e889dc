"""Hostile packed data (docs/spec/FORMATS.md §4): a corrupt chunk, a lying shard directory or index, a decompression
bomb, a chunk size that disagrees with the declared shape, a truncated or missing shard. Each is a ``DafError`` naming
the data set and the property, raised before anything is allocated from an untrusted size; never a crash."""

from __future__ import annotations

import json
import struct
import tracemalloc

import google_crc32c
import numpy as np
import pytest
import scipy.sparse

import pydaf
from pydaf._os.byte_sources import BufferByteSource
from pydaf.formats.packed import packed_layout, read_packed_array
from pydaf.formats.packed import shard as shard_module
from pydaf.sparse import SparseVector

from . import packed_shards
from .packed_shards import build_shard, pack_files_property, pack_zarr_node

CODECS = ["blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "zstd", "gzip"]
VALUES = np.arange(1.0, 2001.0)  # (two chunks of 1024 Float64, the last padded)
LABELS = np.array([f"label-{index}" for index in range(1500)], dtype=object)


def _directory(shard: bytes) -> int:
    return struct.unpack_from("<Q", shard, len(shard) - 98 + 48)[0]


def _entry(shard: bytes, index: int) -> int:
    """The offset of the central directory entry of chunk ``index`` (0-based)."""
    at = _directory(shard)
    for _ in range(index):
        name_length, extra_length = struct.unpack_from("<HH", shard, at + 28)
        at += 46 + name_length + extra_length
    return at


def _chunk(shard: bytes, index: int) -> tuple[int, int]:
    """``(data offset, compressed size)`` of chunk ``index``, from the central directory."""
    at = _entry(shard, index)
    name_length = struct.unpack_from("<H", shard, at + 28)[0]
    method = struct.unpack_from("<H", shard, at + 10)[0]
    _, compressed, header = struct.unpack_from("<QQQ", shard, at + 46 + name_length + 4)
    return header + 30 + name_length + (0 if method == 8 else 20), compressed


def _patch(shard: bytes, offset: int, data: bytes) -> bytes:
    return shard[:offset] + data + shard[offset + len(data):]


def _files(tmp_path, shard: bytes | None = None, *, compression: str = "gzip", values=VALUES,
           descriptor: dict | None = None, name: str = "score"):
    """A FilesDaf with the packed vector ``name`` (its shard replaced by ``shard`` if given)."""
    path = tmp_path / "hostile.files"
    daf = pydaf.FilesDaf(path, "w", name="hostile!").add_axis("cell", [f"c{index}" for index in
                                                                       range(values.shape[0])])
    daf.set_vector("cell", name, values)
    del daf
    base = path / "vectors" / "cell" / name
    pack_files_property(str(base), values, compression)
    if shard is not None:
        (path / "vectors" / "cell" / f"{name}.zip").write_bytes(shard)
    if descriptor is not None:
        old = json.loads((path / "vectors" / "cell" / f"{name}.json").read_text())
        old.update(descriptor)
        (path / "vectors" / "cell" / f"{name}.json").write_text(json.dumps(old) + "\n")
    return path


def _refused(path, name: str = "score", *, matches: str = "") -> pydaf.DafError:
    with pytest.raises(pydaf.DafError) as raised:
        pydaf.FilesDaf(path, "r").get_vector("cell", name)
    text = str(raised.value)
    assert f"the vector: {name}" in text and str(path) in text, text
    assert matches in text, text
    return raised.value


@pytest.mark.parametrize("compression", CODECS)
def test_a_corrupt_chunk_is_refused(tmp_path, compression):
    shard = build_shard(VALUES, (1024,), compression)
    offset, length = _chunk(shard, 1)
    corrupt = _patch(shard, offset + length // 2, bytes([shard[offset + length // 2] ^ 0x5A]))
    _refused(_files(tmp_path, corrupt, compression=compression), matches="chunk 2 of 2")


@pytest.mark.parametrize("compression", CODECS)
def test_a_truncated_or_empty_or_missing_shard_is_refused(tmp_path, compression):
    shard = build_shard(VALUES, (1024,), compression)
    path = _files(tmp_path, shard[:len(shard) // 2], compression=compression)
    _refused(path, matches="end of central directory")
    (path / "vectors" / "cell" / "score.zip").write_bytes(b"")
    _refused(path, matches="too few for a ZIP end of central directory")
    (path / "vectors" / "cell" / "score.zip").unlink()
    _refused(path, matches="score.zip")


def test_a_central_directory_outside_the_shard_is_refused(tmp_path):
    shard = build_shard(VALUES, (1024,), "zstd")
    lying = _patch(shard, len(shard) - 98 + 48, struct.pack("<Q", 2**63))
    _refused(_files(tmp_path, lying, compression="zstd"), matches="central directory at 9223372036854775808")


@pytest.mark.parametrize("compression", CODECS)
def test_a_directory_entry_that_lies_is_refused(tmp_path, compression):
    shard = build_shard(VALUES, (1024,), compression)
    entry = _entry(shard, 1)
    name_length = struct.unpack_from("<H", shard, entry + 28)[0]
    extra = entry + 46 + name_length
    cases = {
        "past the central directory": _patch(shard, extra + 12, struct.pack("<Q", 2**40)),  # (its compressed size)
        "no local file header": _patch(shard, extra + 20, struct.pack("<Q", 7)),  # (its local header's offset)
        "unexpected ZIP compression method": _patch(shard, entry + 10, struct.pack("<H", 12)),
        "unexpected ZIP entry name": _patch(shard, entry + 46 + name_length - 1, b"\x7f"),
        "no central directory entry": _patch(shard, entry, b"PK\x09\x09"),
        "no ZIP64 extra": _patch(shard, extra, struct.pack("<H", 9)),
    }
    if compression in ("zstd", "gzip"):  # (their entries declare the decompressed size)
        cases["declares 8200 decompressed bytes"] = _patch(shard, extra + 4, struct.pack("<Q", 8200))
    for problem, lying in cases.items():
        _refused(_files(tmp_path / problem.replace(" ", "-"), lying, compression=compression), matches=problem)


def test_a_shard_of_another_codec_than_declared_is_refused(tmp_path):
    path = _files(tmp_path, build_shard(VALUES, (1024,), "gzip"), compression="zstd")
    _refused(path, matches="unexpected ZIP compression method: 8")


def test_chunk_shapes_that_disagree_with_the_shape_are_refused(tmp_path):
    # The shard holds chunks of 1024 while the descriptor declares 512: its directory has 2 entries, not 4.
    for compression in CODECS:
        path = _files(tmp_path / compression, build_shard(VALUES, (1024,), compression), compression=compression,
                      descriptor={"chunk_shape": [512]})
        _refused(path, matches="the 4 chunk entries")
    # Chunks of 1000 declared as 1024: as many entries, of other names and sizes.
    path = _files(tmp_path / "sizes", build_shard(VALUES, (1000,), "zstd"), compression="zstd")
    _refused(path, matches="declares 8000 decompressed bytes")
    for chunk_shape, problem in (([4096], "larger than the shape [2000]"), ([0], "positive integer"),
                                 ([1024, 1], "positive integer"), ("1024", "positive integer")):
        path = _files(tmp_path / f"c{problem[:5]}{len(str(chunk_shape))}", descriptor={"chunk_shape": chunk_shape})
        _refused(path, matches=problem)


def test_codecs_and_levels_julia_does_not_write_to_shards_are_refused(tmp_path):
    for descriptor, problem in (({"compression": "gzip_shuffle"}, "not used in shards"),
                                ({"compression": "lzma"}, "unknown compression: 'lzma'"),
                                ({"compression_level": 0}, "out of the range of gzip: 1 to 9"),
                                ({"compression_level": True}, "compression_level True"),
                                ({"packed_format": 3}, "packed_format is not a string")):
        path = _files(tmp_path / problem[:12].replace(" ", "-"), descriptor=descriptor)
        _refused(path, matches=problem)


def _bomb(monkeypatch, compression: str, inflated: int) -> None:
    """Make :func:`build_shard` compress every chunk as ``inflated`` zero bytes (its entries still declare the real
    chunk's size and CRC)."""
    real = packed_shards.compress

    def compress(raw: bytes, codec: str, level: int) -> bytes:
        return real(bytes(inflated), codec, level)

    monkeypatch.setattr(packed_shards, "compress", compress)


@pytest.mark.parametrize("compression", CODECS)
def test_a_decompression_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch, compression):
    _bomb(monkeypatch, compression, 64 << 20)
    shard = build_shard(VALUES, (1024,), compression)
    monkeypatch.undo()
    assert len(shard) < 1 << 20  # (64 MB per chunk from a shard this small)
    path = _files(tmp_path, shard, compression=compression)
    tracemalloc.start()
    try:
        error = _refused(path, matches="chunk 1 of 2")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak  # (nothing near the bomb's size was allocated)
    assert "8192" in str(error)


@pytest.mark.parametrize("compression", CODECS)
def test_a_bomb_of_strings_is_refused(tmp_path, monkeypatch, compression):
    """Strings have no size a shape bounds: a chunk of them may decode to at most ``MAX_STRING_CHUNK_BYTES``."""
    monkeypatch.setattr(shard_module, "MAX_STRING_CHUNK_BYTES", 1 << 20)
    real = packed_shards.compress
    monkeypatch.setattr(packed_shards, "compress", lambda raw, codec, level: real(bytes(4 << 20), codec, level))
    shard = build_shard(LABELS, (512,), compression)
    monkeypatch.setattr(packed_shards, "compress", real)
    path = _files(tmp_path, shard, compression=compression, values=LABELS, name="label")
    _refused(path, "label", matches="1048576")


@pytest.mark.parametrize("compression", CODECS)
def test_chunks_of_strings_that_lie_are_refused(tmp_path, monkeypatch, compression):
    real = packed_shards.encode_chunk
    for lie, problem in ((lambda raw: struct.pack("<I", 7) + raw[4:], "holds 7 strings"),
                         (lambda raw: raw[:-3], "not valid vlen-utf8"),
                         (lambda raw: raw[:8] + b"\xff" + raw[9:], "not valid vlen-utf8")):
        monkeypatch.setattr(packed_shards, "encode_chunk", lambda chunk, lie=lie: lie(real(chunk)))
        shard = build_shard(LABELS, (512,), compression)
        monkeypatch.setattr(packed_shards, "encode_chunk", real)
        path = _files(tmp_path / problem[:9].replace(" ", "-") / compression, shard, compression=compression,
                      values=LABELS, name="label")
        _refused(path, "label", matches=problem)


def test_a_blosc_frame_that_lies_about_its_size_is_refused(tmp_path):
    shard = build_shard(VALUES, (1024,), "blosc_zstd_bitshuffle")
    offset, _ = _chunk(shard, 0)
    for field, value, problem in ((4, 1 << 31, "declaring 2147483648 bytes"), (12, 5, "from 5")):
        lying = _patch(shard, offset + field, struct.pack("<I", value))
        path = _files(tmp_path / str(field), lying, compression="blosc_zstd_bitshuffle")
        _refused(path, matches=problem)


def test_a_packed_sparse_component_that_lies_is_refused(tmp_path):
    path = tmp_path / "sparse.files"
    nzind = np.arange(1, 3001, 2, dtype=np.int64)
    daf = pydaf.FilesDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(3000)])
    daf.set_vector("cell", "sparse", SparseVector(3000, nzind, np.arange(1.0, 1501.0)))
    del daf
    assert json.loads((path / "vectors" / "cell" / "sparse.json").read_text())["format"] == "sparse"
    packed_shards.pack_files_component(str(path / "vectors" / "cell" / "sparse"), "nzind", nzind, "zstd")
    pydaf.FilesDaf(path, "r").get_vector("cell", "sparse")  # (consistent: reads)
    descriptor = json.loads((path / "vectors" / "cell" / "sparse.json").read_text())
    descriptor["nzind"]["n_elements"] = 1499  # (the shard holds 1500: its directory names disagree)
    (path / "vectors" / "cell" / "sparse.json").write_text(json.dumps(descriptor) + "\n")
    _refused(path, "sparse", matches="nzval has 1500 elements instead of 1499")
    del descriptor["nzind"]["n_elements"]
    (path / "vectors" / "cell" / "sparse.json").write_text(json.dumps(descriptor) + "\n")
    _refused(path, "sparse", matches="the packed nzind has no n_elements")
    descriptor["nzind"]["n_elements"] = 10**15  # (never allocated: more than the axis has entries)
    (path / "vectors" / "cell" / "sparse.json").write_text(json.dumps(descriptor) + "\n")
    _refused(path, "sparse", matches="declares 1000000000000000 elements, more than the 3000 entries")


def test_a_packed_sparse_matrix_component_declaring_too_many_elements_is_refused(tmp_path):
    path = tmp_path / "sparse.files"
    daf = pydaf.FilesDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(2000)]).add_axis("gene", ["g"])
    values = np.zeros((2000, 1))
    values[::2, 0] = 1.5
    daf.set_matrix("cell", "gene", "m", scipy.sparse.csc_matrix(values), relayout=False)
    del daf
    base = path / "matrices" / "cell" / "gene" / "m"
    packed_shards.pack_files_component(str(base), "rowval", np.arange(1, 2001, 2, dtype=np.int64), "gzip")
    assert np.array_equal(pydaf.FilesDaf(path, "r").get_matrix("cell", "gene", "m").toarray(), values)
    descriptor = json.loads(base.with_suffix(".json").read_text())
    descriptor["rowval"]["n_elements"] = 2001
    base.with_suffix(".json").write_text(json.dumps(descriptor) + "\n")
    with pytest.raises(pydaf.DafError, match="declares 2001 elements, more than the 2000 entries") as raised:
        pydaf.FilesDaf(path, "r").get_matrix("cell", "gene", "m")
    assert "the matrix: m" in str(raised.value) and str(path) in str(raised.value)


# Through the Zarr shard index (ZarrDaf).


def _zarr(tmp_path, shard: bytes | None = None, *, compression: str = "zstd"):
    path = tmp_path / "hostile.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w", name="zarr!").add_axis("cell", [f"c{index}" for index in range(2000)])
    daf.set_vector("cell", "score", VALUES)
    del daf
    pack_zarr_node(str(path), "vectors/cell/score", VALUES, compression)
    if shard is not None:
        (path / "vectors" / "cell" / "score" / "c" / "0").write_bytes(shard)
    return path


def _with_index(shard: bytes, entries: list[tuple[int, int]]) -> bytes:
    """The shard with its index replaced (and a CRC32C that matches it)."""
    table = b"".join(struct.pack("<QQ", offset, length) for offset, length in entries)
    return _patch(shard, 0, table + struct.pack("<I", google_crc32c.value(table)))


def _zarr_refused(path, matches: str) -> None:
    with pytest.raises(pydaf.DafError) as raised:
        pydaf.ZarrDaf(path, "r").get_vector("cell", "score")
    text = str(raised.value)
    assert "score" in text and str(path) in text and matches in text, text


def _index_only(shard: bytes) -> bytes:
    """The shard without its ZIP end of central directory: a Zarr-only shard (as zarr-python writes them), which
    pydaf reads through its index."""
    return _patch(shard, len(shard) - 98, b"\0\0\0\0")


@pytest.mark.parametrize("compression", CODECS)
def test_a_lying_shard_index_is_refused(tmp_path, compression):
    shard = _index_only(build_shard(VALUES, (1024,), compression))
    assert np.array_equal(pydaf.ZarrDaf(_zarr(tmp_path / "fine", shard, compression=compression), "r").get_vector(
        "cell", "score"), VALUES)  # (read through the index)
    first = struct.unpack_from("<QQ", shard, 0)
    past = _with_index(shard, [first, (len(shard) - 10, 100)])
    _zarr_refused(_zarr(tmp_path / "past", past, compression=compression), "ends past the end of the shard")
    _zarr_refused(_zarr(tmp_path / "crc", _patch(shard, 0, struct.pack("<Q", 41)), compression=compression),
                  "CRC32C of the shard index")
    _zarr_refused(_zarr(tmp_path / "short", shard[:20], compression=compression), "too few for the index")
    bomb = _with_index(shard, [first, (first[0], first[1])])  # (fine: two chunks may share bytes)
    assert pydaf.ZarrDaf(_zarr(tmp_path / "shared", bomb, compression=compression), "r").get_vector(
        "cell", "score")[1024:].tolist() == VALUES[:976].tolist()


@pytest.mark.parametrize("compression", CODECS)
def test_a_corrupt_chunk_of_a_julia_zarr_shard_is_caught_by_its_zip_directory(tmp_path, compression):
    """Julia's Zarr shards are also ZIP archives: pydaf reads them through the central directory, whose CRC32s catch a
    corrupt chunk that the Zarr index alone (no checksum of the chunks) would decode into wrong values."""
    shard = build_shard(VALUES, (1024,), compression)
    offset, length = struct.unpack_from("<QQ", shard, 16)
    corrupt = _patch(shard, offset + length // 2, bytes([shard[offset + length // 2] ^ 0x5A]))
    _zarr_refused(_zarr(tmp_path, corrupt, compression=compression), "chunk 2 of 2")


def test_an_elided_chunk_in_the_index_is_the_fill_value(tmp_path):
    shard = _index_only(build_shard(VALUES, (1024,), "zstd"))
    elided = _with_index(shard, [struct.unpack_from("<QQ", shard, 0), (2**64 - 1, 2**64 - 1)])
    path = _zarr(tmp_path, elided)
    values = pydaf.ZarrDaf(path, "r").get_vector("cell", "score")
    assert np.array_equal(values[:1024], VALUES[:1024]) and not values[1024:].any()
    metadata = json.loads((path / "vectors" / "cell" / "score" / "zarr.json").read_text())
    metadata["fill_value"] = 2.5  # (a foreign array's fill value is the elided chunk's)
    (path / "vectors" / "cell" / "score" / "zarr.json").write_text(json.dumps(metadata))
    root = json.loads((path / "zarr.json").read_text())
    root["consolidated_metadata"]["metadata"]["vectors/cell/score"]["fill_value"] = 2.5
    (path / "zarr.json").write_text(json.dumps(root))
    values = pydaf.ZarrDaf(path, "r").get_vector("cell", "score")
    assert np.array_equal(values[:1024], VALUES[:1024]) and (values[1024:] == 2.5).all()


def test_a_source_that_lies_about_its_size_is_refused():
    class Shrinking(BufferByteSource):
        def size(self) -> int:
            return super().size() + 1000

    shard = build_shard(VALUES, (1024,), "gzip")
    layout = packed_layout(np.dtype(np.float64), (2000,), [1024], "gzip", 5)
    with pytest.raises(pydaf.DafFormatError, match=r"reads as \d+ bytes .*\nin the shard: lying\.zip"):
        read_packed_array(Shrinking("lying.zip", shard), layout)


def test_a_zstd_frame_without_a_declared_size_is_refused(tmp_path):
    shard = build_shard(VALUES, (1024,), "zstd")
    offset, _ = _chunk(shard, 0)
    assert shard[offset + 4] & 0xC0  # (the frame declares its size: numcodecs writes it, as Julia's codec does)
    unsized = _patch(shard, offset + 4, bytes([shard[offset + 4] & 0x3F & ~0x20]))
    _refused(_files(tmp_path, unsized, compression="zstd"), matches="must declare its size")
