"""Whole-dataset decoding of packed H5df data (pydaf/formats/h5df/packed.py): a per-row reduction of a whole matrix
decodes only the layout it reads; the chunks are read a span at a time, Julia's blosc chunks decoded through a zstd
context kept per thread (``_FastBlosc``), other codecs on the kernels' threads, with the same values as the serial,
checked path of numcodecs; a hostile chunk anywhere is the DafFormatError naming the property."""

from __future__ import annotations

import gc
import os
import struct
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf import DafFormatError
from pydaf.formats.h5df import packed

CODECS = ["blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "zstd", "zstd_bitshuffle", "gzip", "gzip_shuffle"]
N_CELLS, N_GENES = 3000, 70


@pytest.fixture(autouse=True)
def _default_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    for knob in ("DAF_PACKED_TARGET_CHUNK_KB", "DAF_PACKED_COMPRESSION", "DAF_PACKED_COMPRESSION_LEVEL"):
        monkeypatch.delenv(knob, raising=False)


def umis(seed: int = 3) -> sp.csc_matrix:
    """A sparse cell x gene matrix of small counts (~30% stored)."""
    matrix = sp.random(N_CELLS, N_GENES, density=0.3, format="csc", random_state=seed, dtype=np.float64)
    matrix.data = np.ceil(matrix.data * 20)
    return matrix.astype(np.uint16)


def write(path: Path, matrix: sp.csc_matrix, *, packed_: bool = True, relayout: bool = True) -> None:
    daf = pydaf.H5df(path, "w", packed=packed_, name="decode!")
    daf.add_axis("cell", [f"c{index}" for index in range(matrix.shape[0])])
    daf.add_axis("gene", [f"g{index}" for index in range(matrix.shape[1])])
    daf.set_matrix("cell", "gene", "UMIs", matrix, relayout=relayout)
    daf.close()


def n_chunks(path: Path, group: str) -> int:
    with h5py.File(path, "r") as file:
        return sum(file[f"{group}/{part}"].id.get_num_chunks() for part in ("colptr", "rowval", "nzval")
                   if file[f"{group}/{part}"].chunks is not None)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunks decoded (each call of ``packed._decode_chunk``)."""
    calls: list[int] = []
    original = packed._decode_chunk

    def counting(*arguments: Any, **keywords: Any) -> Any:
        calls.append(1)
        return original(*arguments, **keywords)

    monkeypatch.setattr(packed, "_decode_chunk", counting)
    return calls


def test_a_per_row_reduction_decodes_only_the_flipped_layout(tmp_path: Path, decoded: list[int]):
    matrix = umis()
    path = tmp_path / "packed.h5df"
    write(path, matrix)
    flipped = n_chunks(path, "matrices/gene/cell/UMIs")
    assert flipped > 10 and n_chunks(path, "matrices/cell/gene/UMIs") > 10
    expected = np.asarray(matrix.sum(axis=1)).ravel()
    daf = pydaf.H5df(path, "r")
    decoded.clear()
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >| Sum", cache=False), expected)
    assert len(decoded) == flipped  # (the cell x gene layout: not decoded)
    decoded.clear()
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >| Max", cache=False),
                          matrix.toarray().max(axis=1))
    assert len(decoded) == 0  # (the flipped layout, read above, is in the data set's cache)
    daf.close()
    daf = pydaf.H5df(path, "r")
    decoded.clear()
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >- Sum", cache=False),
                          np.asarray(matrix.sum(axis=0)).ravel())
    assert len(decoded) == n_chunks(path, "matrices/cell/gene/UMIs")  # (per column: this layout only)
    daf.close()


def test_a_per_row_reduction_with_one_layout_or_flat(tmp_path: Path):
    matrix = umis(4)
    expected = np.asarray(matrix.sum(axis=1)).ravel()
    for name, packed_, relayout in (("one.h5df", True, False), ("flat.h5df", False, True)):
        write(tmp_path / name, matrix, packed_=packed_, relayout=relayout)
        daf = pydaf.H5df(tmp_path / name, "r")
        assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >| Sum", cache=False), expected)
        assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >| Count", cache=False),
                              np.full(N_CELLS, N_GENES))
        assert np.array_equal(daf.get_np_query("@ gene @ cell :: UMIs >| Sum", cache=False),
                              np.asarray(matrix.sum(axis=0)).ravel())
        daf.close()


def test_a_cached_per_row_reduction_follows_a_rewritten_matrix(tmp_path: Path):
    """The query read only the flipped layout, yet depends on the matrix: rewriting it invalidates the result."""
    matrix = umis(5)
    path = tmp_path / "packed.h5df"
    write(path, matrix)
    daf = pydaf.H5df(path, "r+")
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >| Sum"), np.asarray(matrix.sum(axis=1)).ravel())
    doubled = (matrix * 2).astype(np.uint16)
    daf.set_matrix("cell", "gene", "UMIs", doubled, overwrite=True, relayout=True)
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >| Sum"), np.asarray(doubled.sum(axis=1)).ravel())
    daf.close()


def parallel_from(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Decode data of at least ``size`` bytes on the kernels' threads."""
    monkeypatch.setattr(packed, "_PARALLEL_MIN_BYTES", size)
    monkeypatch.setattr(packed, "_PARALLEL_IMPORT_BYTES", size)


def read_all(path: Path, *, parallel: bool, fast: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, np.ndarray]:
    parallel_from(monkeypatch, 1 if parallel else 1 << 62)
    if not fast:
        monkeypatch.setattr(packed, "_fast_blosc", lambda: None)
    daf = pydaf.H5df(path, "r")
    values = {"sparse": daf.get_stored_matrix("cell", "gene", "UMIs").to_scipy().toarray(),
              "dense": np.array(daf.get_matrix("cell", "gene", "dense", relayout=False)),
              "vector": np.array(daf.get_vector("spot", "score"))}
    daf.close()
    monkeypatch.undo()
    return values


@pytest.mark.parametrize("codec", CODECS)
def test_parallel_and_fast_decoding_equal_the_serial_checked_decoding(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch, codec: str):
    rng = np.random.default_rng(6)
    matrix = umis(6)
    dense = np.asfortranarray(rng.normal(size=(N_CELLS, N_GENES)).astype(np.float32))
    score = np.cumsum(rng.integers(0, 5, N_CELLS * 3 + 7)).astype(np.int64)  # (not a multiple of a chunk)
    path = tmp_path / "packed.h5df"
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", codec)
    daf = pydaf.H5df(path, "w", packed=True, name="decode!")
    daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
    daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
    daf.add_axis("spot", [f"s{index}" for index in range(len(score))])
    daf.set_matrix("cell", "gene", "UMIs", matrix, relayout=False)
    daf.set_matrix("cell", "gene", "dense", dense, relayout=False)
    daf.set_vector("spot", "score", score)
    daf.close()
    monkeypatch.delenv("DAF_PACKED_COMPRESSION")
    serial = read_all(path, parallel=False, fast=False, monkeypatch=monkeypatch)
    assert np.array_equal(serial["sparse"], matrix.toarray()) and np.array_equal(serial["dense"], dense)
    for parallel, fast in ((True, False), (False, True), (True, True)):
        other = read_all(path, parallel=parallel, fast=fast, monkeypatch=monkeypatch)
        for key, value in serial.items():
            assert other[key].dtype == value.dtype and np.array_equal(other[key], value), (key, parallel, fast)


def test_julias_blosc_chunks_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Every chunk of Julia's default codec is decoded by ``_FastBlosc`` (none left to numcodecs' blosc)."""
    fast = packed._fast_blosc()
    assert fast is not None
    calls = {"fast": 0, "slow": 0}
    original_fast, original_slow = fast.decode, packed._blosc_decompress()

    def counted_fast(*arguments: Any) -> bool:
        done = original_fast(*arguments)
        calls["fast" if done else "slow"] += 1
        return done

    monkeypatch.setattr(fast, "decode", counted_fast)
    monkeypatch.setattr(packed, "_blosc_decompress", lambda: lambda *arguments: (
        calls.__setitem__("slow", calls["slow"] + 1), original_slow(*arguments))[1])
    matrix = umis(7)
    path = tmp_path / "packed.h5df"
    write(path, matrix, relayout=False)
    daf = pydaf.H5df(path, "r")
    assert (daf.get_stored_matrix("cell", "gene", "UMIs").to_scipy() != matrix).nnz == 0
    daf.close()
    assert calls == {"fast": n_chunks(path, "matrices/cell/gene/UMIs"), "slow": 0}


def test_chunks_are_read_a_span_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    matrix = umis(8)
    path = tmp_path / "packed.h5df"
    write(path, matrix, relayout=False)
    reads: list[int] = []
    original = os.pread

    def counting(descriptor: int, length: int, offset: int) -> bytes:
        reads.append(length)
        return original(descriptor, length, offset)

    monkeypatch.setattr(packed.os, "pread", counting)
    monkeypatch.setattr(packed, "_SPAN_BYTES", 64 << 10)
    daf = pydaf.H5df(path, "r")
    assert (daf.get_stored_matrix("cell", "gene", "UMIs").to_scipy() != matrix).nnz == 0
    daf.close()
    stored = n_chunks(path, "matrices/cell/gene/UMIs")
    assert len(reads) < stored / 4 and max(reads) <= 64 << 10


# Hostile chunks, in the parallel and fast path.


def hostile(tmp_path: Path) -> tuple[Path, bytes]:
    """A packed vector ``x`` of 20 chunks (Julia's blosc), and the raw bytes of its chunk at 10240."""
    path = tmp_path / "hostile.h5df"
    daf = pydaf.H5df(path, "w", packed=True, name="hostile!")
    daf.add_axis("cell", [f"c{index}" for index in range(20 * 1024)])
    daf.set_vector("cell", "x", np.arange(20 * 1024, dtype=np.float64))
    daf.close()
    with h5py.File(path, "r") as file:
        return path, bytes(file["vectors/cell/x"].id.read_direct_chunk((10240,))[1])


def error_of(path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool = True) -> str:
    parallel_from(monkeypatch, 1 if parallel else 1 << 62)
    daf = pydaf.H5df(path, "r")
    try:
        daf.get_vector("cell", "x")
    except DafFormatError as error:
        text = str(error)
    else:
        raise AssertionError("read a hostile chunk without an error")
    daf.close()
    gc.collect()  # (the error's traceback held the file open)
    assert "vector: x\nof the axis: cell\nin the H5df file: " in text
    assert "its chunk at: (10240,)" in text
    return text


def replaced(path: Path, payload: bytes) -> Path:
    for _ in range(200):  # (a kernel thread drops the failed read's traceback, which holds the file, a moment later)
        try:
            file = h5py.File(path, "r+")
        except OSError:
            gc.collect()
            time.sleep(0.01)
            continue
        with file:
            file["vectors/cell/x"].id.write_direct_chunk((10240,), payload, 0)
        return path
    raise AssertionError(f"the file stays open: {path}")


@pytest.mark.parametrize("path_taken", ["numba batches", "fast serial", "numcodecs parallel"])
def test_hostile_blosc_chunks_in_the_fast_or_parallel_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           path_taken: str):
    """Through the numba loop over spans of chunks (many chunks), ``_FastBlosc`` one chunk at a time (few; each
    leaves what it does not decode exactly to numcodecs), or numcodecs on the kernels' threads: the same errors,
    naming the property and the chunk."""
    if path_taken == "numcodecs parallel":
        monkeypatch.setattr(packed, "_fast_blosc", lambda: None)
    parallel = path_taken != "fast serial"
    batches: list[int] = []
    if path_taken == "numba batches":
        from pydaf.kernels import _blosc

        original = _blosc.decode_blosc_chunks
        monkeypatch.setattr(_blosc, "decode_blosc_chunks", lambda *arguments: (batches.append(1),
                                                                                original(*arguments))[1])

    path, good = hostile(tmp_path)
    header = bytearray(good)
    assert header[2] == packed._FAST_BLOSC_FLAGS  # (the fast path's frame)
    (start,) = struct.unpack_from("<i", good, 16)
    (length,) = struct.unpack_from("<i", good, start)
    corrupt = bytearray(good)
    corrupt[start + 4 + length // 2:start + 4 + length] = bytes(length - length // 2)  # (zstd payload zeroed)
    assert "can't be decoded (it is corrupt)" in error_of(replaced(path, bytes(corrupt)), monkeypatch, parallel)
    bomb = bytearray(good)
    struct.pack_into("<II", bomb, 4, 1 << 30, 1 << 30)  # (declares 1 GB in one block)
    assert "declares 1073741824 bytes\ninstead of the 8192 bytes of its chunk" in error_of(
        replaced(path, bytes(bomb)), monkeypatch, parallel)
    outside = bytearray(good)
    struct.pack_into("<i", outside, start, len(good))  # (a block longer than the chunk)
    assert "can't be decoded (it is corrupt)" in error_of(replaced(path, bytes(outside)), monkeypatch, parallel)
    past = bytearray(good)
    struct.pack_into("<i", past, 16, len(good) + 100)  # (the block starts past the chunk)
    assert "can't be decoded (it is corrupt)" in error_of(replaced(path, bytes(past)), monkeypatch, parallel)
    assert "too short for a blosc chunk" in error_of(replaced(path, good[:12]), monkeypatch, parallel)
    assert bool(batches) == (path_taken == "numba batches")


def test_many_julia_blosc_chunks_are_decoded_in_numba_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              decoded: list[int]):
    """Large data in Julia's blosc chunks: every full chunk is decoded by the numba loop, spans of the file spread
    over the kernels' threads; only the edge chunk (shorter than a chunk) goes the checked way."""
    from pydaf.kernels import _blosc

    spans: list[int] = []
    original = _blosc.decode_blosc_chunks

    def counted(*arguments: Any) -> None:
        original(*arguments)
        failed = arguments[-1]
        spans.append(int((failed == 0).sum()))

    monkeypatch.setattr(_blosc, "decode_blosc_chunks", counted)
    parallel_from(monkeypatch, 1)
    score = np.cumsum(np.random.default_rng(9).integers(0, 3, 300 * 1024 + 100)).astype(np.float64)
    path = tmp_path / "many.h5df"
    daf = pydaf.H5df(path, "w", packed=True, name="many!")
    daf.add_axis("spot", [f"s{index}" for index in range(score.shape[0])])
    daf.set_vector("spot", "score", score)
    daf.close()
    with h5py.File(path, "r") as file:
        dataset = file["vectors/spot/score"]
        n_stored, chunk = dataset.id.get_num_chunks(), dataset.chunks[0]
    daf = pydaf.H5df(path, "r")
    assert np.array_equal(daf.get_vector("spot", "score"), score)
    daf.close()
    assert sum(spans) == score.shape[0] // chunk and len(decoded) == n_stored - score.shape[0] // chunk == 1
    assert len(spans) >= 4  # (spans of a quarter of a thread's share, or less)


def test_misplaced_chunks_are_refused(tmp_path: Path):
    """The array checks of the chunk index (``_well_placed``) refuse what the per-chunk checks refuse."""
    path, _ = hostile(tmp_path)
    with h5py.File(path, "r+") as file:
        dataset = file["vectors/cell/x"]
        infos = [dataset.id.get_chunk_info(index) for index in range(dataset.id.get_num_chunks())]
    size = os.path.getsize(path)
    assert packed._well_placed(infos, (1024,), (20 * 1024,), size)
    assert not packed._well_placed(infos, (1024,), (19 * 1024,), size)  # (a chunk outside the shape)
    assert not packed._well_placed(infos, (2048,), (20 * 1024,), size)  # (chunks off the grid)
    assert not packed._well_placed(infos + infos[:1], (1024,), (20 * 1024,), size)  # (a chunk twice)
    assert not packed._well_placed(infos, (1024,), (20 * 1024,), infos[-1].byte_offset + 1)  # (past the end)
