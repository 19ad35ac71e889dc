"""Packed (chunked + compressed) H5df (docs/spec/FORMATS.md §1.8, §2.12): the knobs, Julia's chunk shapes and filter
pipelines for each of its six codecs, reading them back exactly (through pydaf and through plain h5py + hdf5plugin),
and hostile chunks (corrupt, truncated, bombs, unknown filters) refused with a DafFormatError naming the property.

How the layout is checked against Julia's (no Julia here): :func:`julia_filters` states, for each codec, the filters
Julia's ``hdf5_filters_for`` (h5df_format.jl) creates, with the ``cd_values`` HDF5.jl's filter structs pass
(``H5Zblosc.BloscFilter``: ``[0, 0, 0, 0, level, shuffle, compcode]``; ``H5Zbitshuffle.BitshuffleFilter``:
``[0, 4, 0, blocksize 0, 3 (zstd), level]``; ``H5Zzstd.ZstdFilter``: ``[level]``; ``Deflate``/``Shuffle``: HDF5's
``H5Pset_deflate``/``H5Pset_shuffle``), all with ``H5Z_FLAG_OPTIONAL`` (HDF5.jl's ``push!``), completed as their
``set_local`` functions complete them (blosc: ``[2, blosc format 2, typesize, chunk bytes, ...]``; bitshuffle: the
element size in slot 3; shuffle: the element size). The chunk shapes are ``chunks_for``'s (packed_format.jl),
reversed by HDF5.jl into HDF5's order. The files pydaf writes must hold exactly these.
"""

from __future__ import annotations

import gc
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf import DafFormatError, DafValueError
from pydaf.core import packed_settings
from pydaf.core.packed_settings import chunks_for, compressor_for
from pydaf.testing import DafConformance
from pydaf.testing.conformance import is_file_map

from .conftest import H5dfBackend, _new_path

CODECS = packed_settings.SUPPORTED_COMPRESSION_CODECS
KNOBS = ("DAF_PACKED_TARGET_CHUNK_KB", "DAF_PACKED_COMPRESSION", "DAF_PACKED_COMPRESSION_LEVEL")


@pytest.fixture(autouse=True)
def _default_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    for knob in KNOBS:
        monkeypatch.delenv(knob, raising=False)


def julia_filters(codec: str, level: int, itemsize: int, chunk_elements: int) -> list[tuple[int, int, tuple]]:
    """``(id, flags, cd_values)`` of each filter of a dataset Julia writes with ``codec`` (see the module docstring)."""
    optional = 1  # H5Z_FLAG_OPTIONAL
    if codec.startswith("blosc_"):
        compcode = {"blosc_zstd_bitshuffle": 5, "blosc_lz4_bitshuffle": 1}[codec]
        return [(32001, optional, (2, 2, itemsize, chunk_elements * itemsize, level, 2, compcode))]
    if codec == "zstd_bitshuffle":
        return [(32008, optional, (0, 4, itemsize, 0, 3, level))]
    if codec == "zstd":
        return [(32015, optional, (level,))]
    if codec == "gzip":
        return [(1, optional, (level,))]
    assert codec == "gzip_shuffle"
    return [(2, optional, (itemsize,)), (1, optional, (level,))]


def filters_of(dataset: h5py.Dataset) -> list[tuple[int, int, tuple]]:
    plist = dataset.id.get_create_plist()
    return [plist.get_filter(index)[:3] for index in range(plist.get_nfilters())]


def new_path(tmp_path: Path) -> str:
    return _new_path(tmp_path, ".h5df")


def close(daf: Any) -> None:
    daf.close()
    gc.collect()


@pytest.fixture
def hdf5plugin() -> Any:
    return pytest.importorskip("hdf5plugin")


N_CELLS = 5000
N_GENES = 7


def cells_and_genes(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    return daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)]).add_axis(
        "gene", [f"g{index}" for index in range(N_GENES)])


def sample_values(seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "f64": rng.normal(size=N_CELLS),
        "f32": rng.normal(size=N_CELLS).astype(np.float32),
        "i32": rng.integers(-1000, 1000, size=N_CELLS).astype(np.int32),
        "u8": rng.integers(0, 255, size=N_CELLS * 2)[:N_CELLS].astype(np.uint8),
        "i64": rng.integers(0, 50, size=N_CELLS).astype(np.int64),
        "bool": rng.random(N_CELLS) < 0.3,
    }


# Knobs.


def test_default_knobs_are_julias():
    assert packed_settings.packed_target_chunk_kb() == 8
    assert compressor_for() == ("blosc_zstd_bitshuffle", 5)
    assert packed_settings.packed_local_cache_kb() == 65536
    assert packed_settings.packed_http_cache_kb() == 262144


@pytest.mark.parametrize(("shape", "eltype", "chunk"), [
    ((5000,), "Float64", (1024,)), ((5000,), "Float32", (2048,)), ((5000,), "Int32", (2048,)),
    ((10000,), "Bool", (8192,)), ((10000,), "UInt8", (8192,)), ((1000,), str, (512,)),
    ((1024,), "Float64", (1024,)), ((1023,), "Float64", None), ((8192,), "Bool", (8192,)), ((8191,), "Bool", None),
    ((1500, 3), "Float64", (1024, 1)), ((1000, 10**6), "Float64", None), ((3000, 2), "Int32", (2048, 1)),
    ((100,), str, None), ((512,), str, (512,)),
])
def test_chunks_for_is_julias_rule(shape: tuple, eltype: Any, chunk: tuple | None):
    assert chunks_for(True, shape, eltype) == chunk
    assert chunks_for(False, shape, eltype) is None


def test_target_chunk_knob(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DAF_PACKED_TARGET_CHUNK_KB", "16")
    assert chunks_for(True, (5000,), "Float64") == (2048,)
    assert chunks_for(True, (1500,), "Float64") is None  # (the threshold moves with the target)
    assert chunks_for(True, (2048,), "Float64") == (2048,)


@pytest.mark.parametrize("value", ["abc", "0", "-3", "1.5"])
def test_bad_target_chunk_knob(monkeypatch: pytest.MonkeyPatch, value: str):
    monkeypatch.setenv("DAF_PACKED_TARGET_CHUNK_KB", value)
    with pytest.raises(DafValueError) as raised:
        chunks_for(True, (5000,), "Float64")
    assert str(raised.value) == (f"invalid value of the environment variable: DAF_PACKED_TARGET_CHUNK_KB\nvalue: "
                                 f"{value!r}\n(expected a positive integer)")


@pytest.mark.parametrize(("codec", "good", "bad"), [
    ("blosc_zstd_bitshuffle", 9, 10), ("blosc_lz4_bitshuffle", 1, 0), ("zstd_bitshuffle", 22, 23), ("zstd", 22, 0),
    ("gzip", 9, 10), ("gzip_shuffle", 1, -1)])
def test_compression_level_ranges(monkeypatch: pytest.MonkeyPatch, codec: str, good: int, bad: int):
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", ":" + codec)
    monkeypatch.setenv("DAF_PACKED_COMPRESSION_LEVEL", str(good))
    assert compressor_for() == (codec, good)
    monkeypatch.setenv("DAF_PACKED_COMPRESSION_LEVEL", str(bad))
    top = 22 if "zstd" in codec and "blosc" not in codec else 9
    with pytest.raises(DafValueError) as raised:
        compressor_for()
    assert str(raised.value) == (f"out-of-range packed compression level: {bad}\nfor codec: :{codec}\n"
                                 f"valid range: 1:{top}")


def test_unsupported_codec(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", "lzma")
    with pytest.raises(DafValueError) as raised:
        compressor_for()
    assert str(raised.value) == ("unsupported packed compression codec: :lzma\nsupported codecs: "
                                 ":blosc_zstd_bitshuffle, :blosc_lz4_bitshuffle, :zstd_bitshuffle, :zstd, :gzip, "
                                 ":gzip_shuffle")


def test_level_not_an_integer(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DAF_PACKED_COMPRESSION_LEVEL", "high")
    with pytest.raises(DafValueError, match="DAF_PACKED_COMPRESSION_LEVEL\nvalue: 'high'\n"):
        compressor_for()


def test_bad_codec_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    daf = cells_and_genes(pydaf.H5df(new_path(tmp_path), "w"))
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", "lzma")
    with pytest.raises(DafValueError, match="unsupported packed compression codec: :lzma"):
        daf.set_vector("cell", "x", np.arange(N_CELLS, dtype=np.float64), packed=True)
    assert not daf.has_vector("cell", "x")
    with pytest.raises(DafValueError, match="unsupported packed compression codec"):
        with daf.empty_dense_vector("cell", "y", "Float64", packed=True) as buffer:
            buffer[:] = 1
    assert not daf.has_vector("cell", "y")
    # (as Julia: the codec is resolved only by a write that packs)
    daf.set_vector("cell", "x", np.arange(N_CELLS, dtype=np.float64), packed=False)
    daf.set_vector("cell", "small", np.arange(N_CELLS, dtype=np.uint8), packed=True)  # (below the threshold)
    assert daf.get_vector("cell", "x")[-1] == N_CELLS - 1


def test_packed_argument_is_checked(tmp_path: Path):
    daf = cells_and_genes(pydaf.H5df(new_path(tmp_path), "w"))
    with pytest.raises(DafValueError, match="invalid packed: 'yes'"):
        daf.set_vector("cell", "x", np.zeros(N_CELLS), packed="yes")
    assert not daf.has_vector("cell", "x")
    with pytest.raises(DafValueError, match="invalid packed: 1"):
        pydaf.H5df(new_path(tmp_path), "w", packed=1)


# Every codec: layout (Julia's chunks and filters) and values, through pydaf and through h5py.


def write_everything(daf: pydaf.DafWriter, values: dict[str, Any], packed: bool | None) -> dict[str, Any]:
    """Dense vectors of each type, a dense matrix (both layouts), a sparse matrix (both layouts), a sparse vector."""
    for name, vector in values.items():
        daf.set_vector("cell", name, vector, packed=packed)
    rng = np.random.default_rng(7)
    dense = rng.random((N_CELLS, N_GENES)).astype(np.float32)
    sparse = sp.random(N_CELLS, N_GENES, density=0.5, format="csc", random_state=3, dtype=np.float64)
    sparse.indices = sparse.indices.astype(np.int32)
    sparse.indptr = sparse.indptr.astype(np.int32)
    flags = sp.random(N_CELLS, N_GENES, density=0.4, format="csc", random_state=4).astype(bool)
    sparse_vector = sp.random(1, N_CELLS, density=0.6, format="csr", random_state=5)
    daf.set_matrix("cell", "gene", "dense", dense, packed=packed)
    daf.set_matrix("cell", "gene", "sparse", sparse, packed=packed)
    daf.set_matrix("cell", "gene", "flags", flags, packed=packed)
    daf.set_vector("cell", "sparse", sparse_vector, packed=packed)
    return {"dense": dense, "sparse": sparse, "flags": flags, "sparse_vector": sparse_vector.toarray()[0]}


def check_values(daf: pydaf.DafReader, values: dict[str, Any], matrices: dict[str, Any]) -> None:
    for name, vector in values.items():
        got = daf.get_vector("cell", name)
        assert got.dtype == vector.dtype and np.array_equal(got, vector), name
        assert not got.flags.writeable
    assert np.array_equal(daf.get_matrix("cell", "gene", "dense"), matrices["dense"])
    assert np.array_equal(daf.get_matrix("gene", "cell", "dense"), matrices["dense"].T)
    for name in ("sparse", "flags"):
        for rows, columns, expected in (("cell", "gene", matrices[name]), ("gene", "cell", matrices[name].T)):
            got = daf.get_matrix(rows, columns, name)
            assert got.dtype == expected.dtype and (got != expected).nnz == 0, (name, rows)
    assert np.array_equal(daf.get_vector("cell", "sparse").toarray()[0] if hasattr(
        daf.get_vector("cell", "sparse"), "toarray") else daf.get_vector("cell", "sparse"), matrices["sparse_vector"])


def expected_layout(codec: str, level: int, dtype: np.dtype, hdf5_shape: tuple[int, ...]):
    julia_shape = tuple(reversed(hdf5_shape))
    chunk = chunks_for(True, julia_shape, dtype)
    if chunk is None:
        return None, []
    return tuple(reversed(chunk)), julia_filters(codec, level, dtype.itemsize, int(np.prod(chunk)))


def check_layout(path: str, codec: str, level: int) -> int:
    """Every numeric dataset has the chunks and filters Julia's would (packed exactly when ``chunks_for`` says);
    returns how many are packed."""
    packed = 0
    with h5py.File(path, "r") as file:
        datasets: list[tuple[str, h5py.Dataset]] = []
        file.visititems(lambda name, node: datasets.append((name, node)) if isinstance(node, h5py.Dataset) else None)
        for name, dataset in datasets:
            if name == "daf" or name.startswith("axes/"):
                assert dataset.chunks is None, name
                continue
            dtype = np.dtype(np.uint8) if dataset.dtype.kind == "V" or dataset.id.get_type().get_class() == \
                h5py.h5t.BITFIELD else dataset.dtype
            chunks, filters = expected_layout(codec, level, dtype, dataset.shape)
            assert dataset.chunks == chunks, name
            assert filters_of(dataset) == filters, name
            packed += chunks is not None
    return packed


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_layout_and_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str, hdf5plugin: Any):
    level = 7 if codec != "zstd" else 15
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", codec)
    monkeypatch.setenv("DAF_PACKED_COMPRESSION_LEVEL", str(level))
    path = new_path(tmp_path)
    values = sample_values()
    daf = cells_and_genes(pydaf.H5df(path, "w"))
    matrices = write_everything(daf, values, packed=True)
    check_values(daf, values, matrices)  # (pydaf -> pydaf, same handle)
    close(daf)
    # 6 dense vectors, cell x gene dense, 2 sparse matrices x 2 layouts x components, the sparse vector's 2
    assert check_layout(path, codec, level) >= 15
    reader = pydaf.H5df(path, "r")
    check_values(reader, values, matrices)  # (pydaf -> pydaf, read back from disk)
    close(reader)
    with h5py.File(path, "r") as file:  # (pydaf -> h5py + hdf5plugin)
        for name, vector in values.items():
            stored = file[f"vectors/cell/{name}"]
            assert (stored.chunks is not None) == (chunks_for(True, vector.shape, vector.dtype) is not None), name
            assert np.array_equal(stored[()].astype(vector.dtype), vector), name
        assert np.array_equal(file["matrices/cell/gene/dense"][()], matrices["dense"].T)
        group = file["matrices/cell/gene/sparse"]
        rebuilt = sp.csc_matrix((group["nzval"][()], group["rowval"][()] - 1, group["colptr"][()] - 1),
                                shape=(N_CELLS, N_GENES))
        assert (rebuilt != matrices["sparse"]).nnz == 0


def test_bool_dense_packed_as_bitfield(tmp_path: Path, hdf5plugin: Any):
    path = new_path(tmp_path)
    flags = np.random.default_rng(2).random(3 * 8192 + 5) < 0.5
    daf = pydaf.H5df(path, "w", packed=True).add_axis("cell", [str(index) for index in range(flags.size)])
    daf.set_vector("cell", "flag", flags)
    close(daf)
    with h5py.File(path, "r") as file:
        dataset = file["vectors/cell/flag"]
        assert dataset.id.get_type().get_class() == h5py.h5t.BITFIELD
        assert dataset.chunks == (8192,)
        assert filters_of(dataset) == julia_filters("blosc_zstd_bitshuffle", 5, 1, 8192)
    assert np.array_equal(pydaf.H5df(path, "r").get_vector("cell", "flag"), flags)


def test_each_sparse_component_packed_independently(tmp_path: Path, hdf5plugin: Any):
    """A short colptr stays flat (and mapped) while rowval and nzval are packed (FORMATS.md §2.12)."""
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.H5df(path, "w"))
    matrix = sp.random(N_CELLS, N_GENES, density=0.5, format="csc", random_state=1)
    daf.set_matrix("cell", "gene", "m", matrix, relayout=False, packed=True)
    close(daf)
    with h5py.File(path, "r") as file:
        group = file["matrices/cell/gene/m"]
        assert group["colptr"].chunks is None
        assert group["rowval"].chunks == (8192 // group["rowval"].dtype.itemsize,)
        assert group["nzval"].chunks == (1024,)


def test_constructor_default_and_per_call_override(tmp_path: Path):
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.H5df(path, "w", packed=True))
    values = np.arange(N_CELLS, dtype=np.float64)
    daf.set_vector("cell", "default", values)
    daf.set_vector("cell", "flat", values, packed=False)
    close(daf)
    daf = pydaf.H5df(path, "r+")  # (not packed by default: the default is not stored)
    daf.set_vector("cell", "again", values)
    daf.set_vector("cell", "asked", values, packed=True)
    close(daf)
    with h5py.File(path, "r") as file:
        chunks = {name: file[f"vectors/cell/{name}"].chunks for name in ("default", "flat", "again", "asked")}
    assert chunks == {"default": (1024,), "flat": None, "again": None, "asked": (1024,)}
    reader = pydaf.H5df(path, "r")
    assert is_file_map(reader.get_vector("cell", "flat"))  # (zero-copy stays for flat data)
    assert not is_file_map(reader.get_vector("cell", "asked"))
    assert np.array_equal(reader.get_vector("cell", "asked"), values)


def test_strings_are_never_packed(tmp_path: Path):
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.H5df(path, "w", packed=True))
    names = np.array([f"name-{index}" for index in range(N_CELLS)], dtype=object)
    daf.set_vector("cell", "label", names)
    daf.set_matrix("cell", "gene", "text", np.full((N_CELLS, N_GENES), "value", dtype=object))
    close(daf)
    with h5py.File(path, "r") as file:
        assert file["vectors/cell/label"].chunks is None
        assert file["matrices/cell/gene/text"].chunks is None


def test_builders_pack(tmp_path: Path, hdf5plugin: Any):
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.H5df(path, "w", packed=True))
    with daf.empty_dense_vector("cell", "dense", "Int32") as buffer:
        buffer[:] = np.arange(N_CELLS)
    with daf.empty_dense_matrix("cell", "gene", "matrix", "Float64") as buffer:
        buffer[:, :] = np.arange(N_CELLS * N_GENES).reshape(N_CELLS, N_GENES)
    with daf.empty_sparse_vector("cell", "flags", "Bool", 3000, "UInt32") as (nzind, nzval):
        nzind[:] = np.arange(1, 3001)
        nzval[:] = True
    with daf.empty_sparse_matrix("cell", "gene", "sparse", "Float32", 4000, "UInt32") as (colptr, rowval, nzval):
        colptr[:] = [1, 4001, 4001, 4001, 4001, 4001, 4001, 4001]
        rowval[:] = np.arange(1, 4001)
        nzval[:] = 2.5
    daf.relayout_matrix("cell", "gene", "matrix")
    close(daf)
    with h5py.File(path, "r") as file:
        assert file["vectors/cell/dense"].chunks == (2048,)
        assert file["matrices/cell/gene/matrix"].chunks == (1, 1024)
        assert file["matrices/gene/cell/matrix"].chunks is None  # (7-row columns: flat)
        # (Julia's builders always write nzval, even all true; each component packed if large enough)
        assert file["vectors/cell/flags/nzval"].chunks is None and file["vectors/cell/flags/nzind"].chunks == (2048,)
        assert file["matrices/cell/gene/sparse/rowval"].chunks == (2048,)
        assert file["matrices/cell/gene/sparse/colptr"].chunks is None
    reader = pydaf.H5df(path, "r")
    assert np.array_equal(reader.get_vector("cell", "dense"), np.arange(N_CELLS))
    assert np.array_equal(reader.get_matrix("gene", "cell", "matrix"),
                          np.arange(N_CELLS * N_GENES).reshape(N_CELLS, N_GENES).T)
    assert reader.get_vector("cell", "flags").sum() == 3000
    assert reader.get_matrix("cell", "gene", "sparse").sum() == pytest.approx(10000.0)


def test_packed_builder_failure_keeps_old_value(tmp_path: Path):
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.H5df(path, "w"))
    daf.set_vector("cell", "x", np.ones(N_CELLS))
    with pytest.raises(RuntimeError), daf.empty_dense_vector("cell", "x", "Float64", overwrite=True, packed=True):
        raise RuntimeError("fill failed")
    assert np.array_equal(daf.get_vector("cell", "x"), np.ones(N_CELLS))


def test_hdf5plugin_loaded_only_when_needed():
    code = ("import sys, tempfile, os, numpy as np, pydaf\n"
            "path = os.path.join(tempfile.mkdtemp(), 'x.h5df')\n"
            "daf = pydaf.H5df(path, 'w').add_axis('cell', [str(i) for i in range(5000)])\n"
            "os.environ['DAF_PACKED_COMPRESSION'] = 'gzip_shuffle'\n"
            "daf.set_vector('cell', 'x', np.arange(5000.0), packed=True)\n"
            "daf.close(); pydaf.H5df(path, 'r').get_vector('cell', 'x').sum()\n"
            "print('hdf5plugin' in sys.modules)\n"
            "os.environ['DAF_PACKED_COMPRESSION'] = 'zstd'\n"
            "pydaf.H5df(path, 'r+').set_vector('cell', 'y', np.arange(5000.0), packed=True)\n"
            "print('hdf5plugin' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"]


# Hostile packed datasets.


@pytest.fixture
def packed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A file whose vector ``x`` (5000 Float64) is packed with the codec of the request's param."""

    def make(codec: str) -> str:
        monkeypatch.setenv("DAF_PACKED_COMPRESSION", codec)
        path = new_path(tmp_path)
        daf = cells_and_genes(pydaf.H5df(path, "w", name="hostile!"))
        daf.set_vector("cell", "x", np.arange(N_CELLS, dtype=np.float64), packed=True)
        close(daf)
        return path

    yield make  # type: ignore[misc]


def replace_chunk(path: str, payload: bytes, offset: tuple[int, ...] = (1024,), mask: int = 0) -> None:
    with h5py.File(path, "r+") as file:
        file["vectors/cell/x"].id.write_direct_chunk(offset, payload, mask)


def read_error(path: str) -> str:
    reader = pydaf.H5df(path, "r")
    try:
        reader.get_vector("cell", "x")
    except DafFormatError as error:
        text = str(error)
    else:
        raise AssertionError("read a hostile chunk without an error")
    close(reader)
    assert "vector: x\nof the axis: cell" in text
    return text


def test_gzip_bomb_is_refused_in_bounded_memory(packed_file: Any):
    import tracemalloc

    path = packed_file("gzip")
    replace_chunk(path, zlib.compress(b"\0" * (64 << 20), 9))  # (64 MB in a chunk of 8 KB: HDF5 alone reads it)
    tracemalloc.start()
    text = read_error(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "decompresses to more than the 8192 bytes of its chunk" in text
    assert "its chunk at: (1024,)" in text
    assert peak < 8 << 20


@pytest.mark.parametrize("codec", ["gzip", "gzip_shuffle"])
def test_truncated_and_corrupt_deflate_chunks(packed_file: Any, codec: str):
    path = packed_file(codec)
    good = zlib.compress(np.arange(1024, dtype=np.float64).tobytes())
    replace_chunk(path, good[: len(good) // 2])
    assert "truncated deflate stream" in read_error(path)
    replace_chunk(path, b"\x78\x9c" + bytes(range(200)))
    assert "can't be decoded (it is corrupt)" in read_error(path)
    replace_chunk(path, zlib.compress(b"\1" * 100))
    assert "holds 100 bytes\ninstead of the 8192 bytes of its chunk" in read_error(path)


def test_blosc_chunk_lying_about_its_size(packed_file: Any, hdf5plugin: Any):
    from numcodecs import Blosc

    path = packed_file("blosc_zstd_bitshuffle")
    bomb = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE).encode(np.zeros(1 << 20, dtype=np.float64))
    replace_chunk(path, bomb)
    assert "declares 8388608 bytes\ninstead of the 8192 bytes of its chunk" in read_error(path)
    good = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE).encode(np.arange(1024, dtype=np.float64))
    replace_chunk(path, good[:16] + bytes(len(good) - 16))
    assert "can't be decoded (it is corrupt)" in read_error(path)
    replace_chunk(path, good[:10])
    assert "too short for a blosc chunk" in read_error(path)


def test_zstd_chunk_lying_about_its_size(packed_file: Any, hdf5plugin: Any):
    from numcodecs import Zstd

    path = packed_file("zstd")
    replace_chunk(path, Zstd(5).encode(np.zeros(1 << 20, dtype=np.float64)))
    assert "zstd frame declaring 8388608 bytes\ninstead of the 8192 bytes" in read_error(path)
    replace_chunk(path, b"not zstd at all")
    assert "zstd frame declaring no size" in read_error(path)
    good = Zstd(5).encode(np.arange(1024, dtype=np.float64))
    replace_chunk(path, good[:-6] + b"garbag")
    assert "can't be decoded (it is corrupt)" in read_error(path)


def test_bitshuffle_chunk_lying_about_its_framing(packed_file: Any, hdf5plugin: Any):
    path = packed_file("zstd_bitshuffle")
    with h5py.File(path, "r") as file:
        _, good = file["vectors/cell/x"].id.read_direct_chunk((1024,))
    nbytes, block = struct.unpack(">QI", good[:12])
    assert nbytes == 8192
    replace_chunk(path, struct.pack(">QI", 1 << 40, block) + good[12:])
    assert "declares 1099511627776 bytes\ninstead of the 8192 bytes" in read_error(path)
    replace_chunk(path, struct.pack(">QI", nbytes, 12) + good[12:])
    assert "bitshuffle block size: 12 bytes" in read_error(path)
    replace_chunk(path, good[:12] + struct.pack(">I", 1 << 30) + good[16:])
    assert "is cut short" in read_error(path)
    replace_chunk(path, good[:12] + good[12:16] + bytes(len(good) - 16))
    text = read_error(path)  # (framing intact, contents corrupt: the plugin fails, HDF5 says so)
    assert "can't read the vector: x" in text


def test_unknown_filter_pipeline(tmp_path: Path):
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.H5df(path, "w"))
    close(daf)
    with h5py.File(path, "r+") as file:
        file["vectors/cell"].create_dataset("x", data=np.arange(N_CELLS, dtype=np.float64), chunks=(500,),
                                            compression="lzf")
        file["vectors/cell"].create_dataset("y", data=np.arange(N_CELLS, dtype=np.float64), chunks=(500,),
                                            compression="gzip", fletcher32=True)
    text = read_error(path)
    assert "is compressed with the HDF5 filters: lzf (32000)" in text
    assert "pydaf reads the filter pipelines Julia's Daf writes" in text
    reader = pydaf.H5df(path, "r")
    with pytest.raises(DafFormatError, match=r"deflate \(1\), fletcher32 \(3\)"):
        reader.get_vector("cell", "y")


def test_h5py_chunked_gzip_with_other_chunks_reads(tmp_path: Path):
    """A foreign (h5py) chunking with partial edge chunks, and a chunked unfiltered dataset, read exactly."""
    path = new_path(tmp_path)
    close(cells_and_genes(pydaf.H5df(path, "w")))
    values = np.random.default_rng(3).random((N_GENES, N_CELLS))
    with h5py.File(path, "r+") as file:
        file["matrices/cell/gene"].create_dataset("m", data=values, chunks=(3, 700), compression="gzip",
                                                  shuffle=True)
        file["vectors/cell"].create_dataset("x", data=values[0], chunks=(333,))
    reader = pydaf.H5df(path, "r")
    assert np.array_equal(reader.get_matrix("cell", "gene", "m"), values.T)
    assert np.array_equal(reader.get_vector("cell", "x"), values[0])


def test_declared_size_beyond_any_compression_is_refused(tmp_path: Path):
    path = new_path(tmp_path)
    close(pydaf.H5df(path, "w").add_axis("cell", ["a"]))
    with h5py.File(path, "r+") as file:
        file.create_group("vectors/huge")
        file["axes"].create_dataset("huge", data=np.array([b"a"], dtype=h5py.string_dtype()), maxshape=(None,))
        file["axes/huge"].resize((1 << 33,))
        file["vectors/huge"].create_dataset("x", shape=(1 << 33,), dtype=np.float64, chunks=(1024,),
                                            compression="gzip")
    reader = pydaf.H5df(path, "r")
    with pytest.raises(DafFormatError, match="which its file of"):
        reader.get_vector("huge", "x")


# The conformance suite on H5df data sets that pack by default.


class PackedH5dfBackend(H5dfBackend):
    name = "h5df_packed"

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.H5df(self.path(directory), "w", name=name, packed=True)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        path = daf.complete_path()
        daf.format.file.close()
        return pydaf.H5df(path, mode, name=daf.name, packed=True)


class TestPackedH5df(DafConformance):
    backend = PackedH5dfBackend()


def test_gzip_bomb_in_a_file_pydaf_did_not_write(tmp_path: Path):
    """Regression: a gzip-packed dataset (as Julia's ``:gzip`` writes it) whose chunk inflates to 64 MB was read by
    HDF5 into memory whole, and its first 8 KB returned without an error."""
    path = new_path(tmp_path)
    close(cells_and_genes(pydaf.H5df(path, "w")))
    with h5py.File(path, "r+") as file:
        dataset = file["vectors/cell"].create_dataset("x", data=np.arange(N_CELLS, dtype=np.float64), chunks=(1024,),
                                                      compression="gzip", compression_opts=5)
        dataset.id.write_direct_chunk((2048,), zlib.compress(b"\0" * (64 << 20), 9))
    assert "decompresses to more than the 8192 bytes of its chunk" in read_error(path)


def test_open_daf_packed(tmp_path: Path):
    path = new_path(tmp_path)
    daf = cells_and_genes(pydaf.open_daf(path, "w", packed=True))
    daf.set_vector("cell", "x", np.arange(N_CELLS, dtype=np.int64))
    close(daf)
    with h5py.File(path, "r") as file:
        assert file["vectors/cell/x"].chunks == (1024,)


def test_unfiltered_chunk_of_the_wrong_size(packed_file: Any):
    """A chunk whose mask says its filter was skipped (stored raw, as HDF5 does when compressing did not pay) must
    hold exactly its chunk's bytes."""
    path = packed_file("gzip")
    replace_chunk(path, np.arange(1024, dtype=np.float64).tobytes(), mask=1)
    reader = pydaf.H5df(path, "r")
    assert reader.get_vector("cell", "x")[1024:2048].tolist() == list(range(1024))
    close(reader)
    replace_chunk(path, bytes(100), mask=1)
    assert "holds 100 bytes\ninstead of the 8192 bytes of its chunk" in read_error(path)


def test_threaded_decoding_is_exact_and_reports_bad_chunks(packed_file: Any, monkeypatch: pytest.MonkeyPatch):
    """Large packed data is decoded on the kernels' threads: same values, and a bad chunk in any thread's range is
    the same DafFormatError."""
    from pydaf.formats.h5df import packed

    monkeypatch.setattr(packed, "_PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(packed, "_PARALLEL_IMPORT_BYTES", 1)
    path = packed_file("gzip_shuffle")
    reader = pydaf.H5df(path, "r")
    assert np.array_equal(reader.get_vector("cell", "x"), np.arange(N_CELLS, dtype=np.float64))
    close(reader)
    replace_chunk(path, zlib.compress(b"\0" * (1 << 20)), offset=(0,))
    assert "its chunk at: (0,)" in read_error(path)


def independent_filters(codec: str, level: int) -> dict[str, Any]:
    """h5py ``create_dataset`` arguments for ``codec`` from hdf5plugin's own filter classes (an independent writer)."""
    import hdf5plugin

    if codec.startswith("blosc_"):
        return {"compression": hdf5plugin.Blosc(cname=codec.split("_")[1], clevel=level,
                                                shuffle=hdf5plugin.Blosc.BITSHUFFLE)}
    if codec == "zstd_bitshuffle":
        return {"compression": hdf5plugin.Bitshuffle(cname="zstd", clevel=level)}
    if codec == "zstd":
        return {"compression": hdf5plugin.Zstd(clevel=level)}
    return {"compression": "gzip", "compression_opts": level, "shuffle": codec == "gzip_shuffle"}


@pytest.mark.parametrize("codec", CODECS)
def test_independent_writer_same_layout_and_read_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str,
                                                         hdf5plugin: Any):
    """A dataset written by h5py with hdf5plugin's own filter classes and Julia's chunking (as a third party would
    write Julia's layout) has the very creation properties pydaf writes, and pydaf reads it exactly; Bool included."""
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", codec)
    monkeypatch.setenv("DAF_PACKED_COMPRESSION_LEVEL", "3")
    path = new_path(tmp_path)
    flags = np.random.default_rng(5).random(20000) < 0.2
    matrix = np.random.default_rng(6).random((N_GENES, 20000))  # (HDF5 order: 7 columns of 20000 rows)
    daf = pydaf.H5df(path, "w", packed=True).add_axis("cell", [str(index) for index in range(20000)])
    daf.add_axis("gene", [str(index) for index in range(N_GENES)])
    daf.set_vector("cell", "flag", flags).set_matrix("cell", "gene", "m", matrix.T, relayout=False)
    close(daf)
    with h5py.File(path, "r+") as file:
        file["vectors/cell"].create_dataset("other", data=matrix[0], chunks=(1024,), **independent_filters(codec, 3))
        file["matrices/cell/gene"].create_dataset("other", data=matrix, chunks=(1, 1024),
                                                  **independent_filters(codec, 3))
        assert filters_of(file["vectors/cell/other"]) == filters_of(file["matrices/cell/gene/m"])
        assert filters_of(file["vectors/cell/other"]) == julia_filters(codec, 3, 8, 1024)
        assert file["matrices/cell/gene/other"].chunks == file["matrices/cell/gene/m"].chunks == (1, 1024)
    reader = pydaf.H5df(path, "r")
    assert np.array_equal(reader.get_vector("cell", "other"), matrix[0])
    assert np.array_equal(reader.get_matrix("cell", "gene", "other"), matrix.T)
    assert np.array_equal(reader.get_vector("cell", "flag"), flags)
    assert np.array_equal(reader.get_matrix("cell", "gene", "m"), matrix.T)
