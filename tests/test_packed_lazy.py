"""Lazy reads of packed data (``lazy_sparse.jl``): some columns of a packed dense or sparse matrix, or some runs of a
packed vector, decode only the chunks that hold them. The shards are real files built as docs/spec/FORMATS.md §4
describes (``tests/packed_shards.py``); the bytes read are counted by a wrapper around the real mapped source."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import scipy.sparse

import pydaf
from pydaf._os.byte_sources import MappedByteSource
from pydaf.formats.files.format import FilesFormat
from pydaf.formats.packed import packed_layout
from pydaf.formats.packed.shard import ChunkCache, LazyPackedArray, local_chunk_cache

from .packed_shards import build_shard, pack_files_component, pack_files_property

CODECS = ["blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "zstd", "gzip"]


class Counting:
    """A byte source that records every range read from the real source it wraps."""

    def __init__(self, source) -> None:
        self.source = source
        self.name = source.name
        self.reads: list[tuple[int, int]] = []

    def size(self) -> int:
        return self.source.size()

    def read(self, offset: int, length: int):
        self.reads.append((offset, length))
        return self.source.read(offset, length)

    @property
    def nbytes(self) -> int:
        return sum(length for _, length in self.reads)


def _shard(tmp_path, values: np.ndarray, chunk_shape: tuple[int, ...], compression: str) -> tuple[Counting, list]:
    """A shard file of ``values``, its counting source, and where each chunk's compressed bytes are (from the Zarr
    index at the start of the shard)."""
    grid = [-(-size // chunk) for size, chunk in zip(values.shape, chunk_shape, strict=True)]
    data = build_shard(values, chunk_shape, compression)
    path = tmp_path / f"{compression}.zip"
    path.write_bytes(data)
    count = int(np.prod(grid))
    chunks = [struct.unpack_from("<QQ", data, 16 * index) for index in range(count)]
    return Counting(MappedByteSource(path)), chunks


def _chunks_read(source: Counting, chunks: list, since: int) -> set[int]:
    """The chunks whose bytes (as the index locates them) start inside a read made after the first ``since`` reads
    (for gzip, the index counts the gzip framing around the ZIP entry's bytes, so only the start is compared)."""
    return {index for index, (offset, _) in enumerate(chunks)
            if any(start <= offset < start + size for start, size in source.reads[since:])}


@pytest.mark.parametrize("compression", CODECS)
def test_columns_of_a_packed_dense_matrix_decode_only_their_chunks(tmp_path, compression):
    rng = np.random.default_rng(1)
    values = np.asfortranarray(rng.normal(size=(1000, 40)))
    source, chunks = _shard(tmp_path, values, (256, 3), compression)  # (4 x 14 chunks, padded at both edges)
    layout = packed_layout(values.dtype, values.shape, [256, 3], compression, 5)
    selections = [np.array([0]), np.array([39]), np.arange(10, 17), rng.choice(40, 5, replace=False),
                  np.array([7, 7, 2]), np.arange(0)]
    for columns in selections:
        before = len(source.reads)
        lazy = LazyPackedArray(source, layout, cache=ChunkCache(1 << 30))
        assert len(source.reads) - before == 1  # (the end of central directory: entries are read when needed)
        selected = lazy.columns(columns)
        assert selected.flags.f_contiguous and np.array_equal(selected, values[:, columns])
        expected = {grid_column * 4 + grid_row for grid_column in set((columns // 3).tolist())
                    for grid_row in range(4)}
        assert _chunks_read(source, chunks, before) == expected
        # (each run of adjacent chunks' directory entries in one read, then each chunk)
        assert len(source.reads) - before == 1 + _runs(expected) + len(expected)
    lazy._cache.clear()
    lazy.columns(np.array([5]))
    before = len(source.reads)
    assert np.array_equal(lazy.columns(np.array([4, 5])), values[:, [4, 5]])  # (the same chunks: from the cache)
    assert len(source.reads) == before


def _runs(indices: set[int]) -> int:
    """How many runs of consecutive integers ``indices`` holds."""
    return sum(1 for index in indices if index - 1 not in indices)


def test_columns_of_a_packed_string_matrix(tmp_path):
    values = np.array([[f"{row}/{column}" for column in range(9)] for row in range(700)], dtype=object)
    source, chunks = _shard(tmp_path, values, (512, 1), "gzip")
    layout = packed_layout(pydaf.storage_types.STRING_DTYPE, values.shape, [512, 1], "gzip", 5)
    lazy = LazyPackedArray(source, layout, cache=ChunkCache(1 << 30))
    before = len(source.reads)
    assert lazy.columns(np.array([8, 3])).tolist() == values[:, [8, 3]].tolist()
    assert _chunks_read(source, chunks, before) == {16, 17, 6, 7}


@pytest.mark.parametrize("compression", CODECS)
def test_runs_of_a_packed_vector_decode_only_their_chunks(tmp_path, compression):
    rng = np.random.default_rng(2)
    values = rng.integers(0, 1 << 40, 10_000).astype(np.int64)
    source, chunks = _shard(tmp_path, values, (1024,), compression)
    layout = packed_layout(values.dtype, values.shape, [1024], compression, 5)
    lazy = LazyPackedArray(source, layout, cache=ChunkCache(1 << 30))
    for _ in range(5):
        starts = np.sort(rng.integers(0, 10_000, 3))
        stops = np.minimum(starts + rng.integers(0, 1500, 3), 10_000)
        lazy._cache.clear()
        before = len(source.reads)
        runs = lazy.elements(starts, stops)
        assert np.array_equal(runs, np.concatenate([values[start:stop]
                                                    for start, stop in zip(starts, stops, strict=True)]))
        expected = {index for start, stop in zip(starts.tolist(), stops.tolist(), strict=True) if stop > start
                    for index in range(start // 1024, (stop - 1) // 1024 + 1)}
        assert _chunks_read(source, chunks, before) == expected


def test_the_chunk_cache_is_bounded_and_keyed_by_content():
    cache = ChunkCache(100)
    for index in range(20):
        cache.put(("shard", index), np.zeros(5))  # (40 bytes each: two fit)
    assert cache.nbytes == 80 and cache.get(("shard", 19)) is not None and cache.get(("shard", 17)) is None
    cache.put(("huge", 0), np.zeros(100))  # (more than the budget: not kept)
    assert cache.get(("huge", 0)) is None and cache.nbytes == 80


def _packed_files(path, compression: str) -> tuple[dict, np.ndarray]:
    """A FilesDaf with a packed sparse matrix (rowval and nzval packed, colptr flat, as Julia writes them), a packed
    dense matrix and a packed string matrix, all cell x gene, and a packed gene x cell sparse matrix."""
    rng = np.random.default_rng(3)
    cells, genes = 500, 300
    daf = pydaf.FilesDaf(path, "w")
    daf.add_axis("cell", [f"c{index}" for index in range(cells)]).add_axis("gene", [f"g{index}" for index in
                                                                                    range(genes)])
    sparse = scipy.sparse.random(cells, genes, density=0.1, format="csc", random_state=4, dtype=np.float32)
    flipped = scipy.sparse.csc_matrix(sparse.T)
    dense = np.asfortranarray(rng.normal(size=(cells, genes)))
    text = np.array([[f"{row}:{column}" for column in range(genes)] for row in range(cells)], dtype=object)
    daf.set_matrix("cell", "gene", "sparse", sparse, relayout=False)
    daf.set_matrix("gene", "cell", "flipped", flipped, relayout=False)
    daf.set_matrix("cell", "gene", "dense", dense, relayout=False)
    daf.set_matrix("cell", "gene", "text", text, relayout=False)
    daf.set_vector("gene", "chosen", rng.random(genes) < 0.05)
    daf.set_vector("cell", "chosen", rng.random(cells) < 0.05)
    del daf
    matrices = path / "matrices"
    for base, matrix in ((matrices / "cell" / "gene" / "sparse", sparse), (matrices / "gene" / "cell" / "flipped",
                                                                           flipped)):
        pack_files_component(str(base), "rowval", (matrix.indices + 1).astype(np.int64), compression,
                             chunk_shape=(512,))
        pack_files_component(str(base), "nzval", matrix.data, compression, chunk_shape=(512,))
    pack_files_property(str(matrices / "cell" / "gene" / "dense"), dense, compression, chunk_shape=(500, 1))
    pack_files_property(str(matrices / "cell" / "gene" / "text"), text, compression, chunk_shape=(500, 1))
    return {"sparse": sparse, "flipped": flipped, "dense": dense, "text": text}, sparse.indptr


@pytest.fixture
def counted(monkeypatch):
    """Every shard a FilesDaf opens, wrapped in a :class:`Counting` source (listed as opened)."""
    opened: list[Counting] = []
    original = FilesFormat._byte_source

    def counting(self, snapshot, suffix):
        source = Counting(original(self, snapshot, suffix))
        opened.append(source)
        return source

    monkeypatch.setattr(FilesFormat, "_byte_source", counting)
    local_chunk_cache().clear()
    yield opened
    local_chunk_cache().clear()


@pytest.mark.parametrize("compression", ["blosc_zstd_bitshuffle", "gzip"])
def test_files_daf_reads_some_columns_of_packed_matrices_lazily(tmp_path, counted, compression):
    values, indptr = _packed_files(tmp_path / "packed.files", compression)
    daf = pydaf.FilesDaf(tmp_path / "packed.files", "r")
    rng = np.random.default_rng(5)
    for columns in (np.array([3]), rng.choice(300, 7, replace=False), np.arange(100, 104), np.arange(0)):
        sparse = daf.get_stored_matrix_columns("cell", "gene", "sparse", columns)
        assert isinstance(sparse, pydaf.sparse.SparseMatrixCSC)
        assert (sparse.to_scipy() != values["sparse"][:, columns]).nnz == 0
        assert np.array_equal(daf.get_stored_matrix_columns("cell", "gene", "dense", columns),
                              values["dense"][:, columns])
        assert daf.get_stored_matrix_columns("cell", "gene", "text", columns).tolist() == \
            values["text"][:, columns].tolist()
    assert daf.get_stored_matrix_columns("cell", "gene", "dense", slice(5, 9)).tolist() == \
        values["dense"][:, 5:9].tolist()
    # One column: the nzval chunks holding its entries, out of all of them.
    local_chunk_cache().clear()
    counted.clear()
    daf.get_stored_matrix_columns("cell", "gene", "sparse", [150])
    nzval = next(source for source in counted if source.name.endswith(".nzval.zip"))
    whole = nzval.size()
    expected_chunks = int((indptr[151] - 1) // 512 - indptr[150] // 512 + 1)
    assert len(nzval.reads) == 2 + expected_chunks  # (the end of the directory, the chunks' entries, the chunks)
    assert nzval.nbytes < whole / 5
    # Nothing is cached as the whole matrix: reading it whole afterwards is the same matrix.
    assert (daf.get_matrix("cell", "gene", "sparse", relayout=False) != values["sparse"]).nnz == 0


def test_queries_and_views_decode_only_the_selected_columns(tmp_path, counted):
    values, _ = _packed_files(tmp_path / "packed.files", "zstd")
    daf = pydaf.FilesDaf(tmp_path / "packed.files", "r")
    genes = daf.get_vector("gene", "chosen")
    cells = daf.get_vector("cell", "chosen")
    counted.clear()
    result = daf.get_np_query("@ cell @ gene [ chosen ] :: sparse", cache=False)
    assert (result != values["sparse"][:, genes]).nnz == 0
    dense = daf.get_np_query("@ cell [ chosen ] @ gene [ chosen ] :: dense", cache=False)
    assert np.array_equal(dense, values["dense"][cells][:, genes])
    text = daf.get_np_query("@ cell @ gene [ chosen ] :: text", cache=False)
    assert text.tolist() == values["text"][:, genes].tolist()
    # Rows of a layout that is not stored: the columns of the stored one, transposed (no relayout of the whole).
    rows = daf.get_np_query("@ cell [ chosen ] @ gene :: flipped", cache=False)
    assert (rows != values["flipped"].T.tocsc()[cells]).nnz == 0
    read = sum(source.nbytes for source in counted)
    stored = sum(source.size() for source in counted)
    assert read < stored / 3
    local_chunk_cache().clear()
    counted.clear()
    view = pydaf.viewer(daf, axes={"cell": "=", "gene": "@ gene [ chosen ]"}, data={("cell", "gene", "sparse"): "="})
    assert (view.get_matrix("cell", "gene", "sparse") != values["sparse"][:, genes]).nnz == 0
    indptr = values["sparse"].indptr
    expected = {chunk for gene in np.flatnonzero(genes).tolist() if indptr[gene + 1] > indptr[gene]
                for chunk in range(indptr[gene] // 512, (indptr[gene + 1] - 1) // 512 + 1)}
    for component in ("rowval", "nzval"):
        source = next(source for source in counted if source.name.endswith(f".{component}.zip"))
        assert len(source.reads) == 1 + _runs(expected) + len(expected)
        assert len(expected) < -(-indptr[-1] // 512)
    assert np.array_equal(daf.get_np_query("@ cell @ gene :: dense", cache=False), values["dense"])


def test_a_lying_colptr_is_refused_naming_the_property(tmp_path, counted):
    _packed_files(tmp_path / "packed.files", "gzip")
    colptr = tmp_path / "packed.files" / "matrices" / "cell" / "gene" / "sparse.colptr"
    data = np.fromfile(colptr, dtype=np.int64)
    data[10] = data[-1] + 5  # (past the entries)
    data.tofile(colptr)
    daf = pydaf.FilesDaf(tmp_path / "packed.files", "r")
    with pytest.raises(pydaf.DafError, match="sparse"):
        daf.get_stored_matrix_columns("cell", "gene", "sparse", [9, 10])


def test_http_daf_reads_some_columns_of_a_packed_matrix_by_range_requests(tmp_path):
    from .http_servers import range_server

    values, _ = _packed_files(tmp_path / "packed.files", "zstd")
    # (and one large enough that its shards are not fetched whole with their central directory, as a small file is)
    path = tmp_path / "packed.files"
    big = scipy.sparse.random(500, 300, density=0.9, format="csc", random_state=6, dtype=np.float64)
    daf = pydaf.FilesDaf(path, "r+")
    daf.set_matrix("cell", "gene", "big", big, relayout=False)
    daf.close()
    base = path / "matrices" / "cell" / "gene" / "big"
    pack_files_component(str(base), "rowval", (big.indices + 1).astype(np.int64), "zstd", chunk_shape=(1024,))
    pack_files_component(str(base), "nzval", big.data, "zstd", chunk_shape=(1024,))
    pydaf.FilesDaf(path, "r+").close()  # (rebuilds metadata.json, which HttpDaf lists)
    shards = base.with_suffix(".nzval.zip").stat().st_size + base.with_suffix(".rowval.zip").stat().st_size
    with range_server(path) as server:
        remote = pydaf.HttpDaf(server.url)
        statistics = remote.format.client.statistics
        before = statistics.bytes_received
        selected = remote.get_stored_matrix_columns("cell", "gene", "big", [40, 41])
        assert (selected.to_scipy() != big[:, [40, 41]]).nnz == 0
        assert statistics.bytes_received - before < shards / 5
        assert server.partial > 0
        assert (remote.get_stored_matrix_columns("cell", "gene", "sparse", [3, 1]).to_scipy()
                != values["sparse"][:, [3, 1]]).nnz == 0
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "dense", [7, 299]),
                              values["dense"][:, [7, 299]])
        text = remote.get_np_query("@ cell @ gene [ chosen ] :: text", cache=False)
        genes = remote.get_vector("gene", "chosen")
        assert text.tolist() == values["text"][:, genes].tolist()


@pytest.mark.parametrize("compression", ["blosc_zstd_bitshuffle", "zstd", "gzip"])
def test_h5df_decodes_only_the_chunks_of_the_selected_columns(tmp_path, monkeypatch, compression):
    from pydaf.formats.h5df import packed as h5df_packed

    monkeypatch.setenv("DAF_PACKED_COMPRESSION", compression)
    rng = np.random.default_rng(8)
    sparse = scipy.sparse.random(5000, 300, density=0.2, format="csc", random_state=9, dtype=np.float32)
    dense = np.asfortranarray(rng.normal(size=(5000, 300)))
    path = tmp_path / "packed.h5df"
    daf = pydaf.H5df(path, "w", packed=True)
    daf.add_axis("cell", [f"c{index}" for index in range(5000)]).add_axis("gene", [f"g{index}" for index in
                                                                                   range(300)])
    daf.set_matrix("cell", "gene", "sparse", sparse, relayout=False)
    daf.set_matrix("cell", "gene", "dense", dense, relayout=False)
    daf.set_vector("gene", "chosen", np.arange(300) % 37 == 0)
    daf.close()
    import h5py

    with h5py.File(path, "r") as handle:  # (the chunk lengths of rowval and nzval, as the writer chose them)
        chunks = [handle[f"matrices/cell/gene/sparse/{part}"].chunks[0] for part in ("rowval", "nzval")]
    decoded: list[int] = []
    original = h5df_packed._decode_chunk

    def counting(*arguments, **keywords):
        decoded.append(1)
        return original(*arguments, **keywords)

    monkeypatch.setattr(h5df_packed, "_decode_chunk", counting)
    batched = h5df_packed._BloscBatch.finish

    def counting_batches(self):  # (many of Julia's blosc chunks are decoded in numba: those it decoded)
        left = batched(self)
        decoded.extend([1] * (len(self.failed) - len(left)))
        return left

    monkeypatch.setattr(h5df_packed._BloscBatch, "finish", counting_batches)
    daf = pydaf.H5df(path, "r")
    for columns in (np.array([0]), rng.choice(300, 9, replace=False), np.arange(150, 160), np.arange(0)):
        decoded.clear()
        selected = daf.get_stored_matrix_columns("cell", "gene", "sparse", columns)
        assert (selected.to_scipy() != sparse[:, columns]).nnz == 0
        expected = sum(len({index for column in columns.tolist() if sparse.indptr[column + 1] > sparse.indptr[column]
                            for index in range(sparse.indptr[column] // chunk,
                                               (sparse.indptr[column + 1] - 1) // chunk + 1)})
                       for chunk in chunks)
        assert len(decoded) == expected
        decoded.clear()
        assert np.array_equal(daf.get_stored_matrix_columns("cell", "gene", "dense", columns), dense[:, columns])
        assert len(decoded) == len(set(columns.tolist())) * 5  # (5,000 rows: 5 chunks of 1,024 a column)
    decoded.clear()
    result = daf.get_np_query("@ cell @ gene [ chosen ] :: dense", cache=False)
    assert np.array_equal(result, dense[:, np.arange(300) % 37 == 0]) and len(decoded) == 9 * 5
    decoded.clear()
    assert np.array_equal(daf.get_matrix("cell", "gene", "dense", relayout=False), dense)
    assert len(decoded) == 300 * 5


def test_zarr_daf_decodes_only_the_chunks_of_the_selected_columns(tmp_path, monkeypatch):
    from pydaf.formats.packed import shard

    sparse = scipy.sparse.random(5000, 300, density=0.2, format="csc", random_state=10, dtype=np.float32)
    dense = np.asfortranarray(np.random.default_rng(11).normal(size=(5000, 300)))
    path = tmp_path / "packed.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w", packed=True)
    daf.add_axis("cell", [f"c{index}" for index in range(5000)]).add_axis("gene", [f"g{index}" for index in
                                                                                   range(300)])
    daf.set_matrix("cell", "gene", "sparse", sparse, relayout=False)
    daf.set_matrix("cell", "gene", "dense", dense, relayout=False)
    daf.set_vector("gene", "chosen", np.arange(300) % 41 == 0)
    daf.close()
    decoded: list[int] = []
    original = shard._ShardReader.decode_numbers

    def counting(self, *arguments, **keywords):
        decoded.append(1)
        return original(self, *arguments, **keywords)

    monkeypatch.setattr(shard._ShardReader, "decode_numbers", counting)
    local_chunk_cache().clear()
    daf = pydaf.ZarrDaf(path, "r")
    for columns in (np.array([299]), np.random.default_rng(12).choice(300, 6, replace=False)):
        local_chunk_cache().clear()
        decoded.clear()
        assert (daf.get_stored_matrix_columns("cell", "gene", "sparse", columns).to_scipy()
                != sparse[:, columns]).nnz == 0
        assert 0 < len(decoded) < 2 * 3 * len(columns) + 1  # (a column's ~1,000 entries: at most 3 chunks of each)
        decoded.clear()
        assert np.array_equal(daf.get_stored_matrix_columns("cell", "gene", "dense", columns), dense[:, columns])
        assert 0 < len(decoded) <= 5 * len(columns)
    local_chunk_cache().clear()
    assert np.array_equal(daf.get_np_query("@ cell @ gene [ chosen ] :: dense", cache=False),
                          dense[:, np.arange(300) % 41 == 0])
    local_chunk_cache().clear()
    decoded.clear()
    assert (daf.get_matrix("cell", "gene", "sparse", relayout=False) != sparse).nnz == 0
    assert len(decoded) > 20  # (the whole matrix: every chunk)


def test_a_lying_directory_entry_of_a_needed_chunk_is_refused(tmp_path):
    values = np.asfortranarray(np.arange(1000 * 12, dtype=np.float64).reshape((1000, 12), order="F"))
    data = bytearray(build_shard(values, (256, 3), "zstd"))
    directory = struct.unpack_from("<Q", data, len(data) - 98 + 48)[0]
    entry_size = 46 + len(b"c/0/0") + 28
    struct.pack_into("<I", data, directory + 5 * entry_size, 0xDEADBEEF)  # (chunk 6: column tile 1, row tile 1)
    path = tmp_path / "lying.zip"
    path.write_bytes(bytes(data))
    layout = packed_layout(values.dtype, values.shape, [256, 3], "zstd", 5)
    lazy = LazyPackedArray(MappedByteSource(path), layout, cache=ChunkCache(1 << 20))
    assert np.array_equal(lazy.columns(np.array([0, 11])), values[:, [0, 11]])  # (other chunks: fine)
    with pytest.raises(pydaf.DafFormatError, match="no central directory entry for chunk 6 of 16"):
        lazy.columns(np.array([4]))
