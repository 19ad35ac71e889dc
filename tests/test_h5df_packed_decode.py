"""Whole-dataset decoding of packed H5df data (pydaf/formats/h5df/packed.py): a per-row reduction of a whole matrix
decodes only the layout it reads; the chunks are read a span at a time, Julia's blosc chunks decoded through a zstd
context kept per thread (``_FastBlosc``), other codecs on the kernels' threads, with the same values as the serial,
checked path of numcodecs; a hostile chunk anywhere is the DafFormatError naming the property."""

from __future__ import annotations

import gc
import os
import struct
import threading
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
    """Through the numba loop over pieces of chunks (many chunks), ``_FastBlosc`` one chunk at a time (few; each
    leaves what it does not decode exactly to numcodecs), or numcodecs on the kernels' threads: the same errors,
    naming the property and the chunk."""
    if path_taken == "numcodecs parallel":
        monkeypatch.setattr(packed, "_fast_blosc", lambda: None)
    parallel = path_taken != "fast serial"
    batches: list[int] = []
    if path_taken == "numba batches":
        from pydaf.kernels import _blosc

        original = _blosc.decode_blosc_pieces
        monkeypatch.setattr(_blosc, "decode_blosc_pieces", lambda *arguments: (batches.append(1),
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


def test_many_julia_blosc_chunks_are_decoded_in_numba_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             decoded: list[int]):
    """Large data in Julia's blosc chunks: every chunk is decoded by the numba loop (the last, partial one too: the
    values are padded to whole chunks), one call per kernel thread, each taking pieces (of decreasing sizes) until
    none is left; none goes the checked way."""
    from pydaf.kernels import _blosc
    from pydaf.kernels.threads import number_of_threads

    calls: list[int] = []
    original = _blosc.decode_blosc_pieces

    def counted(*arguments: Any) -> None:
        original(*arguments)
        calls.append(len(arguments[2]) - 1)  # (the pieces)

    monkeypatch.setattr(_blosc, "decode_blosc_pieces", counted)
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
    assert n_stored == -(-score.shape[0] // chunk)  # (the last chunk partial)
    daf = pydaf.H5df(path, "r")
    values = daf.get_vector("spot", "score")
    assert values.shape == score.shape and np.array_equal(values, score)
    daf.close()
    assert len(decoded) == 0
    assert 1 <= len(calls) <= number_of_threads() and calls[0] >= 4


def test_pieces_shrink_to_balance_the_threads():
    assert packed._pieces(977, 2) == [0, 244, 427, 564, 667, 744, 802, 845, 878, 910, 942, 977]
    assert packed._pieces(10, 4) == [0, 10]  # (never fewer than _MIN_PIECE_CHUNKS, but a whole small dataset)
    for count, threads in ((977, 2), (5000, 8), (33, 1), (64, 2)):
        bounds = packed._pieces(count, threads)
        sizes = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == count and (sizes >= packed._MIN_PIECE_CHUNKS).all()


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


# A sparse matrix's packed nzval, decoded on the kernels' threads while its colptr and rowval are read.


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The packed parts decoded in the background (each ``PackedRead`` started), and parallel decoding for any size."""
    started: list[str] = []
    original = packed.start_read_packed

    def counting(dataset: h5py.Dataset, *arguments: Any) -> Any:
        pending = original(dataset, *arguments)
        if pending is not None:
            started.append(dataset.name.rsplit("/", 1)[-1])
        return pending

    from pydaf.formats.h5df import format as h5df_format

    monkeypatch.setattr(h5df_format, "start_read_packed", counting)
    parallel_from(monkeypatch, 1)
    return started


def open_descriptors(path: Path) -> int:
    """How many of this process's open files are ``path``."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.path.realpath(f"/proc/self/fd/{name}") == os.path.realpath(path)
        except OSError:
            pass
    return count


def rewrite_chunk(path: Path, dataset: str, offset: tuple[int, ...], payload: bytes) -> None:
    with h5py.File(path, "r+") as file:
        file[dataset].id.write_direct_chunk(offset, payload, 0)


def raw_chunk(path: Path, dataset: str, offset: tuple[int, ...]) -> bytes:
    with h5py.File(path, "r") as file:
        return bytes(file[dataset].id.read_direct_chunk(offset)[1])


def matrix_error(path: Path) -> str:
    daf = pydaf.H5df(path, "r")
    try:
        daf.get_stored_matrix("cell", "gene", "UMIs")
    except DafFormatError as error:
        text = str(error)
    else:
        raise AssertionError("read a hostile matrix without an error")
    finally:
        daf.close()
    gc.collect()
    return text


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the open files in /proc/self/fd")
def test_a_packed_nzval_is_decoded_while_colptr_is_read(tmp_path: Path, background: list[str],
                                                        decoded: list[int]):
    matrix = umis(11)
    path = tmp_path / "packed.h5df"
    write(path, matrix, relayout=False)
    with h5py.File(path, "r") as file:
        nzval = file["matrices/cell/gene/UMIs/nzval"]
        assert nzval.id.get_num_chunks() > 8 and nzval.shape[0] % nzval.chunks[0]  # (its last chunk partial)
    daf = pydaf.H5df(path, "r")
    stored = daf.get_stored_matrix("cell", "gene", "UMIs")
    assert background == ["nzval"]
    assert len(decoded) == 0  # (every chunk of nzval, the last one too, in the numba loop; colptr, small, is flat)
    assert stored.nzval.dtype == np.uint16 and not stored.nzval.flags.writeable
    assert (stored.to_scipy() != matrix).nnz == 0
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: UMIs >- Sum", cache=False),
                          np.asarray(matrix.sum(axis=0)).ravel())
    daf.close()
    del stored  # (its colptr, flat, is mapped)
    gc.collect()
    assert open_descriptors(path) == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the open files in /proc/self/fd")
def test_hostile_parts_of_a_matrix_decoded_in_the_background(tmp_path: Path, background: list[str]):
    """A corrupt or bomb chunk of nzval is the error naming it (raised when the matrix is returned); an error in
    colptr, or an nzval longer than rowval, stops the background decoding (its file closed, the kernels' threads
    free for the next read)."""
    from pydaf.core.packed_settings import compressor_for

    matrix = umis(12)
    path = tmp_path / "packed.h5df"
    write(path, matrix, relayout=False)
    nzval, colptr = "matrices/cell/gene/UMIs/nzval", "matrices/cell/gene/UMIs/colptr"
    good_nzval = raw_chunk(path, nzval, (8192,))

    (start,) = struct.unpack_from("<i", good_nzval, 16)
    (length,) = struct.unpack_from("<i", good_nzval, start)
    corrupt = bytearray(good_nzval)
    corrupt[start + 4 + length // 2:start + 4 + length] = bytes(length - length // 2)
    rewrite_chunk(path, nzval, (8192,), bytes(corrupt))
    text = matrix_error(path)
    assert "nzval of the matrix: UMIs" in text and "its chunk at: (8192,)" in text
    assert "can't be decoded (it is corrupt)" in text
    bomb = bytearray(good_nzval)
    struct.pack_into("<II", bomb, 4, 1 << 30, 1 << 30)
    rewrite_chunk(path, nzval, (8192,), bytes(bomb))
    text = matrix_error(path)
    assert "nzval of the matrix: UMIs" in text and "declares 1073741824 bytes\ninstead of the 8192 bytes" in text
    rewrite_chunk(path, nzval, (8192,), good_nzval)
    assert background == ["nzval", "nzval"]

    with h5py.File(path, "r+") as file:  # (colptr broken: nzval's decoding is stopped)
        file[colptr][0] = 5
    text = matrix_error(path)
    assert "colptr and rowval of the matrix: UMIs" in text and "are not a 1-based CSC" in text
    assert background == ["nzval"] * 3
    with h5py.File(path, "r+") as file:
        file[colptr][0] = 1

    def rewrite_nzval(values: np.ndarray) -> None:
        with h5py.File(path, "r+") as file:
            group = file["matrices/cell/gene/UMIs"]
            del group["nzval"]
            packed.write_packed(group, "nzval", values, (4096,), compressor_for("blosc_zstd_bitshuffle", 5))

    rewrite_nzval(np.append(matrix.data, np.uint16(1)))  # (one entry more than rowval)
    text = matrix_error(path)
    assert "nzval of the matrix: UMIs" in text and f"has the HDF5 shape: ({matrix.nnz + 1},)" in text
    assert background == ["nzval"] * 4
    gc.collect()
    assert open_descriptors(path) == 0
    rewrite_nzval(matrix.data)
    daf = pydaf.H5df(path, "r")
    assert (daf.get_stored_matrix("cell", "gene", "UMIs").to_scipy() != matrix).nnz == 0
    daf.close()
    assert background == ["nzval"] * 5


def test_the_chunk_index_read_by_hdf5_calling_numba_equals_h5pys(tmp_path: Path):
    """``_native_chunk_table`` (HDF5's ``H5Dchunk_iter`` calling a numba callback) gives h5py's chunk index; a table
    too small for the index stops the iteration and says so (the caller then reads it through h5py)."""
    from pydaf.kernels import _blosc

    path = tmp_path / "many.h5df"
    daf = pydaf.H5df(path, "w", packed=True, name="many!")
    daf.add_axis("spot", [f"s{index}" for index in range(200 * 1024 + 5)])
    daf.set_vector("spot", "score", np.arange(200 * 1024 + 5, dtype=np.float64))
    daf.close()
    with h5py.File(path, "r") as file:
        dataset = file["vectors/spot/score"]
        stores: list[Any] = []
        dataset.id.chunk_iter(stores.append)
        assert len(stores) == 201 >= packed._NATIVE_INDEX_MIN_CHUNKS
        native = packed._native_chunk_table(dataset)
        assert native is not None and np.array_equal(native, packed._chunk_table(stores, 1))
        assert np.array_equal(packed._stored_chunks(dataset, (1024,), "x", str(path)), native)
        table = np.zeros(_blosc.CHUNK_TABLE_HEADER + 3 * 4, dtype=np.int64)
        table[0], table[2] = 3, 1  # (room for 3 chunks of 1 dimension)
        with h5py._objects.phil:
            status = packed._hdf5_chunk_iter()(dataset.id.id, 0, _blosc.record_chunk().address, table.ctypes.data)
        assert status >= 0 and table[1] == 3 and table[3] == 1  # (stopped at the 4th: flagged)
        assert np.array_equal(table[_blosc.CHUNK_TABLE_HEADER:].reshape(3, 4), native[:3])


def test_span_bounds_are_the_spans_of_raw_chunks():
    from pydaf.kernels import _blosc

    rng = np.random.default_rng(13)
    for _ in range(20):
        sizes = rng.integers(1, 3000, 60)
        gaps = np.where(rng.random(60) < 0.2, rng.integers(0, 9000, 60), 0)
        offsets = np.cumsum(sizes + gaps) - sizes
        stores = packed._chunk_infos(np.stack([offsets, sizes, np.zeros(60, np.int64), np.zeros(60, np.int64)], 1))
        span_bytes = int(rng.integers(1000, 40000))
        expected = [at for at, *_ in packed._RawChunks.spans(stores, 0, 60, span_bytes)] + [60]
        assert _blosc.span_bounds(offsets, sizes, packed._SPAN_GAP, span_bytes).tolist() == expected


def test_chunks_placed_past_the_end_of_the_file_without_wrapping_around():
    table = np.array([[0, 100, 0, 0], [1 << 62, 1 << 62, 0, 1024]], dtype=np.int64)  # (their sum wraps to < 0)
    assert not packed._well_placed(None, (1024,), (2048,), 10_000, table)
    assert packed._well_placed(None, (1024,), (2048,), 10_000, np.array([[0, 100, 0, 0], [100, 100, 0, 1024]]))
    assert not packed._well_placed(None, (1024,), (2048,), 10_000, np.array([[0, 100, 0, 1024], [100, 100, 0, 1024]]))


def test_a_packed_nzval_is_decoded_when_the_kernels_threads_are_busy(tmp_path: Path, background: list[str]):
    """With every thread of the pool busy with other work, the caller decodes all of nzval itself (the pool's share,
    not started, is dropped): no waiting for the pool, the same values."""
    from pydaf.kernels.threads import number_of_threads, thread_pool

    matrix = umis(13)
    path = tmp_path / "packed.h5df"
    write(path, matrix, relayout=False)
    release = threading.Event()
    busy = [thread_pool().submit(release.wait, 60) for _ in range(number_of_threads())]
    try:
        daf = pydaf.H5df(path, "r")
        start = time.perf_counter()
        assert (daf.get_stored_matrix("cell", "gene", "UMIs").to_scipy() != matrix).nnz == 0
        assert time.perf_counter() - start < 30
        daf.close()
    finally:
        release.set()
        for future in busy:
            future.result()
    assert background == ["nzval"]
