"""Reading packed (chunked, compressed) properties: Julia's ``files-packed`` fixture read whole and exactly (FilesDaf,
and the same files as ZipDaf entries and Zarr shards), then every codec Julia writes to shards (blosc-zstd and
blosc-lz4 with bitshuffle, zstd, gzip), for dense vectors, matrices, strings and sparse components, built as
docs/spec/FORMATS.md §4 describes (``tests/packed_shards.py``, which reproduces Julia's gzip shards byte for byte)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import scipy.sparse

import pydaf
from pydaf._os.byte_sources import BufferByteSource, ByteSource, MappedByteSource
from pydaf.formats.packed import packed_layout, read_packed_array
from pydaf.formats.zip import acquire_zip_store

from .julia_examples import FIXTURES
from .packed_shards import (
    build_shard,
    pack_files_component,
    pack_files_property,
    pack_zarr_node,
)

PACKED = FIXTURES / "julia" / "files-packed" / "gzip.files"
needs_packed = pytest.mark.skipif(not PACKED.is_dir(), reason=f"the Julia-written packed fixture is not at {PACKED}")
CODECS = ["blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "zstd", "gzip"]

SCORE = np.arange(1.0, 1201.0)
LABEL = np.array([f"v{index}" for index in range(1, 1201)], dtype=object)
DENSE = np.arange(1.0, 9601.0).reshape((1200, 8), order="F")


def _assert_fixture_values(daf: pydaf.DafReader) -> None:
    """Every property of ``files-packed/gzip.files``, exactly (the values its writer put there, §3.12)."""
    assert daf.get_scalar("name") == "files-packed!"
    assert daf.axis_vector("cell").tolist() == [f"c{index}" for index in range(1, 1201)]
    assert daf.axis_vector("gene").tolist() == [f"g{index}" for index in range(1, 9)]
    score = daf.get_vector("cell", "score")
    assert score.dtype == np.float64 and np.array_equal(score, SCORE)
    label = daf.get_vector("cell", "label")
    assert label.dtype == object and label.tolist() == LABEL.tolist()
    dense = daf.get_matrix("cell", "gene", "dense", relayout=False)
    assert dense.dtype == np.float64 and np.array_equal(dense, DENSE)
    flat_dense = daf.get_matrix("gene", "cell", "dense", relayout=False)  # the flat relayout copy: the twin
    assert np.array_equal(flat_dense, DENSE.T)
    packed = daf.get_matrix("cell", "gene", "sparse", relayout=False)  # packed rowval and nzval
    flat = daf.get_matrix("gene", "cell", "sparse", relayout=False)  # fully flat
    assert isinstance(packed, scipy.sparse.csc_matrix) and packed.shape == (1200, 8) and packed.nnz == 2000
    assert packed.dtype == np.float64 and packed.indices.dtype == flat.indices.dtype
    assert (packed != flat.T).nnz == 0
    stored = daf.get_stored_matrix("cell", "gene", "sparse")
    assert stored.colptr.tolist() == [1, 1201] + [2001] * 7  # (column 1 full, column 2 its first 800 rows)
    assert stored.rowval.tolist() == list(range(1, 1201)) + list(range(1, 801))
    assert stored.nzval.tolist() == list(range(1, 2001))
    assert stored.rowval.dtype == np.int64 and stored.nzval.dtype == np.float64
    assert np.array_equal(packed.toarray(), flat.T.toarray())
    for array in (score, label, dense, stored.rowval, stored.nzval):
        assert not array.flags.writeable  # (what a getter gives is read-only, as mapped data is)


# The Julia-written fixture.


@needs_packed
def test_files_packed_fixture_reads_every_property_exactly():
    daf = pydaf.FilesDaf(PACKED, "r")
    _assert_fixture_values(daf)
    description = daf.description()
    assert "label: 1,200 x Str (Dense)" in description and "score: 1,200 x Float64 (Dense)" in description
    assert "sparse: 1,200 x 8 x Float64 in Columns (Sparse 2,000 (21%) [Int64])" in description


@needs_packed
def test_files_packed_fixture_answers_queries():
    daf = pydaf.FilesDaf(PACKED, "r")
    assert daf["@ cell : score >> Sum"] == SCORE.sum()
    assert daf["@ cell [ score > 1198 ] : label"].tolist() == ["v1199", "v1200"]
    assert np.array_equal(np.asarray(daf["@ cell @ gene :: dense >| Sum"]), DENSE.sum(axis=1))  # (one per cell)
    sparse = daf.get_matrix("cell", "gene", "sparse").toarray()
    assert np.array_equal(np.asarray(daf["@ cell @ gene :: sparse >- Max"]), sparse.max(axis=0))  # (one per gene)


def _run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True, timeout=300)


@needs_packed
def test_the_command_describes_queries_checks_and_converts_the_packed_fixture(tmp_path):
    described = _run("describe", str(PACKED))
    assert described.returncode == 0, described.stderr
    assert "score: 1,200 x Float64 (Dense)" in described.stdout and "min 1, max 1200" in described.stdout
    queried = _run("query", str(PACKED), "@ cell : score >> Sum")
    assert queried.returncode == 0 and float(queried.stdout) == SCORE.sum(), queried.stderr
    checked = _run("check", str(PACKED))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for destination in (tmp_path / "out.h5df", tmp_path / "out.daf.zarr", tmp_path / "out.daf.zip",
                        tmp_path / "out.files"):
        converted = _run("convert", str(PACKED), str(destination), "--no-progress",
                         *(("--format", "files") if destination.suffix == ".files" else ()))
        assert converted.returncode == 0, converted.stderr
        _assert_fixture_values(pydaf.open_daf(str(destination), "r"))


@needs_packed
def test_a_packed_zipdaf_reads_its_nested_shards(tmp_path):
    """ZipDaf (§3.11): the fixture's files as STORED, aligned entries (as Julia's MmapZipStore writes them; the shards
    are then mapped), and as a foreign archive whose entries are deflated (the shards decompressed first)."""
    files = sorted(os.path.relpath(os.path.join(folder, name), PACKED)
                   for folder, _, names in os.walk(PACKED) for name in names if name != "metadata.json")
    stored = tmp_path / "stored.daf.zip"
    store = acquire_zip_store(str(stored), writable=True, create=True)
    with store.append() as batch:
        for name in sorted(files, key=lambda name: (name != "daf.json", not name.startswith("axes/"),
                                                    name.endswith(".json"), name)):
            batch.add(name, (PACKED / name).read_bytes())
    store.release()
    _assert_fixture_values(pydaf.ZipDaf(stored, "r"))
    deflated = tmp_path / "deflated.daf.zip"
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in files:
            archive.write(PACKED / name, name)
    _assert_fixture_values(pydaf.ZipDaf(deflated, "r"))


@needs_packed
def test_the_fixture_shards_read_through_their_zarr_index_too():
    """The dual format (§4): the same bytes read through the shard index (as Julia's ZarrDaf reads them) and through
    the ZIP central directory (as its FilesDaf does) give the same values."""
    cases = [("vectors/cell/score.zip", np.dtype(np.float64), (1200,), [1024], SCORE),
             ("vectors/cell/label.zip", np.dtype(object), (1200,), [512], LABEL),
             ("matrices/cell/gene/dense.zip", np.dtype(np.float64), (1200, 8), [1024, 1], DENSE)]
    for path, dtype, shape, chunk_shape, expected in cases:
        layout = packed_layout(dtype, shape, chunk_shape, "gzip", 5)
        for via in ("directory", "index"):
            values = read_packed_array(MappedByteSource(PACKED / path), layout, via=via)
            assert values.shape == shape and values.dtype == dtype and values.tolist() == expected.tolist()


# Every codec, every kind of property.


def _flat_files(path) -> tuple[pydaf.FilesDaf, dict]:
    """A flat FilesDaf with one property of each kind, large enough to pack, and its values."""
    rng = np.random.default_rng(7)
    cells, genes = 3001, 5  # (a last chunk that is padded: 3001 is no multiple of any Julia chunk length)
    daf = pydaf.FilesDaf(path, "w", name="flat!")
    daf.add_axis("cell", [f"c{index}" for index in range(cells)]).add_axis("gene", [f"g{index}" for index in
                                                                                    range(genes)])
    values = {
        "f64": rng.normal(size=cells), "i32": rng.integers(-9, 9, cells).astype(np.int32),
        "u8": rng.integers(0, 255, cells).astype(np.uint8), "flag": rng.random(cells) < 0.5,
        "title": np.array([f"cell-{index}-{'x' * (index % 7)}ü" for index in range(cells)], dtype=object),
        "matrix": rng.normal(size=(cells, genes)),
        "text": np.array([[f"{row}/{column}" for column in range(genes)] for row in range(cells)], dtype=object),
    }
    for name in ("f64", "i32", "u8", "flag", "title"):
        daf.set_vector("cell", name, values[name])
    daf.set_matrix("cell", "gene", "matrix", np.asfortranarray(values["matrix"]), relayout=False)
    daf.set_matrix("cell", "gene", "text", values["text"], relayout=False)
    sparse = scipy.sparse.random(cells, genes, density=0.3, format="csc", random_state=3, dtype=np.float32)
    daf.set_matrix("cell", "gene", "sparse", sparse, relayout=False)
    values["sparse"] = sparse
    sparse_vector = np.zeros(cells)
    sparse_vector[rng.choice(cells, 1500, replace=False)] = rng.normal(size=1500)
    daf.set_vector("cell", "sparse_vector", scipy.sparse.csc_matrix(sparse_vector.reshape(-1, 1)))
    values["sparse_vector"] = sparse_vector
    texts = np.array([f"t{index}" if index % 10 == 0 else "" for index in range(cells)], dtype=object)
    daf.set_vector("cell", "sparse_text", texts)  # (stored sparse: .nzind and .nztxt)
    values["sparse_text"] = texts
    return daf, values


@pytest.mark.parametrize("compression", CODECS)
def test_every_kind_of_packed_files_property_reads_exactly(tmp_path, compression):
    path = tmp_path / "packed.files"
    daf, values = _flat_files(path)
    assert (path / "vectors" / "cell" / "sparse_text.nztxt").exists()  # (stored sparse: the non-empty lines)
    del daf
    for name in ("f64", "i32", "u8", "flag", "title"):
        pack_files_property(str(path / "vectors" / "cell" / name), values[name], compression)
    matrices = path / "matrices" / "cell" / "gene"
    pack_files_property(str(matrices / "matrix"), values["matrix"], compression)
    pack_files_property(str(matrices / "text"), values["text"], compression)
    # Julia's streaming layout of a packed dense matrix: one whole column per chunk (§5.5), not capped at 8 KiB.
    pack_files_property(str(matrices / "matrix"), values["matrix"], compression, chunk_shape=(3001, 1))
    sparse = values["sparse"]
    pack_files_component(str(matrices / "sparse"), "rowval", (sparse.indices + 1).astype(np.int64), compression)
    pack_files_component(str(matrices / "sparse"), "nzval", sparse.data, compression)
    vector = values["sparse_vector"]
    nonzero = np.flatnonzero(vector)
    for name in ("sparse_vector", "sparse_text"):  # (stored sparse: their components are what gets packed)
        assert json.loads((path / "vectors" / "cell" / f"{name}.json").read_text())["format"] == "sparse"
    assert json.loads((matrices / "sparse.json").read_text())["format"] == "sparse"
    pack_files_component(str(path / "vectors" / "cell" / "sparse_vector"), "nzind", (nonzero + 1).astype(np.int64),
                         compression)
    pack_files_component(str(path / "vectors" / "cell" / "sparse_vector"), "nzval", vector[nonzero], compression)
    texts = values["sparse_text"]
    pack_files_component(str(path / "vectors" / "cell" / "sparse_text"), "nzval", texts[texts != ""], compression)
    assert (path / "vectors" / "cell" / "sparse_text.nzval.zip").exists()

    packed = pydaf.FilesDaf(path, "r")
    for name in ("f64", "i32", "u8", "flag"):
        read = packed.get_vector("cell", name)
        assert read.dtype == values[name].dtype and np.array_equal(read, values[name]), name
    assert packed.get_vector("cell", "title").tolist() == values["title"].tolist()
    assert np.array_equal(packed.get_matrix("cell", "gene", "matrix", relayout=False), values["matrix"])
    assert packed.get_matrix("cell", "gene", "text", relayout=False).tolist() == values["text"].tolist()
    read_sparse = packed.get_matrix("cell", "gene", "sparse", relayout=False)
    assert read_sparse.dtype == np.float32 and (read_sparse != sparse).nnz == 0
    assert np.array_equal(np.asarray(packed.get_vector("cell", "sparse_vector")), vector)
    assert packed.get_vector("cell", "sparse_text").tolist() == texts.tolist()
    assert "matrix: 3,001 x 5 x Float64 in Columns (Dense)" in packed.description()


@pytest.mark.parametrize("compression", CODECS)
def test_every_codec_reads_through_the_directory_and_the_index(compression):
    """Straight through :func:`read_packed_array`: vectors, matrices (one column per chunk, several columns per
    chunk, ragged on both dimensions), strings, and an empty matrix."""
    rng = np.random.default_rng(11)
    cases = [
        (rng.normal(size=2500), (1024,)),
        (rng.integers(0, 2**62, 1500, dtype=np.int64), (1024,)),
        (rng.random(9000) < 0.3, (8192,)),
        (rng.normal(size=(700, 6)).astype(np.float32), (512, 1)),
        (rng.normal(size=(700, 6)), (700, 1)),
        (rng.normal(size=(700, 7)), (300, 3)),  # (several columns per chunk: decoded through the scratch chunk)
        (rng.normal(size=(700, 6)), (700, 2)),  # (whole columns: straight into place)
        (np.array([f"s{index}-{'é' * (index % 5)}" for index in range(1300)], dtype=object), (512,)),
        (np.array([[f"{row},{column}" for column in range(3)] for row in range(600)], dtype=object), (512, 1)),
        (np.zeros((600, 0)), (512, 1)),
    ]
    for values, chunk_shape in cases:
        shard = build_shard(values, chunk_shape, compression)
        layout = packed_layout(values.dtype, values.shape, list(chunk_shape), compression, 5)
        source = BufferByteSource("test.zip", shard)
        assert isinstance(source, ByteSource)
        for via in ("directory", "index"):
            read = read_packed_array(source, layout, via=via)
            assert read.shape == values.shape and read.dtype == values.dtype, (chunk_shape, via)
            assert read.tolist() == values.tolist(), (values.dtype, chunk_shape, via)


@pytest.mark.parametrize("compression", CODECS)
def test_packed_zarr_arrays_read_as_julia_reads_them(tmp_path, compression):
    """ZarrDaf (§5.5): a shard holding the whole array whose shape is no multiple of its inner chunk (Julia's layout,
    which zarr-python refuses), read through its index, for dense vectors, strings, matrices and sparse components."""
    path = tmp_path / "packed.daf.zarr"
    rng = np.random.default_rng(5)
    cells, genes = 1300, 4
    score, labels = rng.normal(size=cells), np.array([f"l{index}" for index in range(cells)], dtype=object)
    matrix = rng.normal(size=(cells, genes))
    sparse = scipy.sparse.random(cells, genes, density=0.5, format="csc", random_state=2)
    daf = pydaf.ZarrDaf(path, "w", name="zarr!")
    daf.add_axis("cell", [f"c{index}" for index in range(cells)]).add_axis("gene", [f"g{index}" for index in
                                                                                    range(genes)])
    daf.set_vector("cell", "score", score).set_vector("cell", "label", labels)
    daf.set_matrix("cell", "gene", "matrix", np.asfortranarray(matrix), relayout=False)
    daf.set_matrix("cell", "gene", "sparse", sparse, relayout=False)
    del daf
    pack_zarr_node(str(path), "vectors/cell/score", score, compression)
    pack_zarr_node(str(path), "vectors/cell/label", labels, compression)
    pack_zarr_node(str(path), "matrices/cell/gene/matrix", matrix, compression)
    pack_zarr_node(str(path), "matrices/cell/gene/sparse/rowval", (sparse.indices + 1).astype(np.int64), compression)
    pack_zarr_node(str(path), "matrices/cell/gene/sparse/nzval", sparse.data, compression)
    packed = pydaf.ZarrDaf(path, "r")
    assert np.array_equal(packed.get_vector("cell", "score"), score)
    assert packed.get_vector("cell", "label").tolist() == labels.tolist()
    assert np.array_equal(packed.get_matrix("cell", "gene", "matrix", relayout=False), matrix)
    assert (packed.get_matrix("cell", "gene", "sparse", relayout=False) != sparse).nnz == 0
    assert "matrix: 1,300 x 4 x Float64 in Columns (Dense)" in packed.description()


def test_a_packed_array_in_a_zarr_zip_archive_reads(tmp_path):
    """The ZIP variant (§5.7): the shard is one STORED entry ``…/c/0`` of the archive, mapped where aligned."""
    path, archive = tmp_path / "packed.daf.zarr", tmp_path / "packed.daf.zarr.zip"
    values = np.arange(1.0, 1301.0)
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(1300)])
    daf.set_vector("cell", "score", values)
    del daf
    pack_zarr_node(str(path), "vectors/cell/score", values, "blosc_lz4_bitshuffle")
    store = acquire_zip_store(str(archive), writable=True, create=True)
    with store.append() as batch:
        for folder, _, names in os.walk(path):
            for name in sorted(names):
                relative = os.path.relpath(os.path.join(folder, name), path)
                data = (path / relative).read_bytes()
                if relative == "zarr.json":  # (archives hold no consolidated metadata)
                    root = json.loads(data)
                    del root["consolidated_metadata"]
                    data = json.dumps(root).encode()
                batch.add(relative, data)
    store.release()
    assert np.array_equal(pydaf.ZarrDaf(archive, "r").get_vector("cell", "score"), values)


@needs_packed
def test_a_zarr_shard_equals_the_files_shard():
    """§4: Zarr's ``score/c/0`` is the FilesDaf ``score.zip`` byte for byte; a packed Zarr node made of the fixture's
    own bytes reads its values."""
    assert build_shard(SCORE, (1024,), "gzip") == (PACKED / "vectors" / "cell" / "score.zip").read_bytes()
    assert build_shard(LABEL, (512,), "gzip") == (PACKED / "vectors" / "cell" / "label.zip").read_bytes()
    assert build_shard(DENSE, (1024, 1), "gzip") == (PACKED / "matrices" / "cell" / "gene" / "dense.zip").read_bytes()


@pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")
def test_a_sharded_array_zarr_python_writes_reads_through_its_index(tmp_path):
    """A foreign shard (zarr-python's: index at the end, no ZIP framing, inner chunks that divide the shard) in a
    ZarrDaf node reads through the index as Zarr readers do."""
    zarr = pytest.importorskip("zarr")
    from zarr.codecs import BloscCodec, BytesCodec, ZstdCodec

    path = tmp_path / "foreign.daf.zarr"
    values = np.random.default_rng(1).normal(size=2000)
    daf = pydaf.ZarrDaf(path, "w", name="foreign!").add_axis("cell", [f"c{index}" for index in range(2000)])
    daf.set_vector("cell", "score", values)
    daf.set_vector("cell", "other", values * 2)
    del daf
    for name, compressor in (("score", ZstdCodec(level=3)), ("other", BloscCodec(cname="lz4", clevel=5,
                                                                                 shuffle="bitshuffle"))):
        node = path / "vectors" / "cell" / name
        shutil.rmtree(node)
        array = zarr.create_array(store=str(path), name=f"vectors/cell/{name}", shape=(2000,), chunks=(500,),
                                  shards=(2000,), dtype="float64", serializer=BytesCodec(),
                                  compressors=[compressor], fill_value=0.0)
        array[:] = values if name == "score" else values * 2
    zarr.consolidate_metadata(str(path))
    packed = pydaf.ZarrDaf(path, "r")
    assert np.array_equal(packed.get_vector("cell", "score"), values)
    assert np.array_equal(packed.get_vector("cell", "other"), values * 2)


def test_reordering_packed_data_is_refused_and_leaves_it_unchanged(tmp_path):
    """Packed data is not rewritten yet: a reorder that would rewrite it flat (dropping its packing) is refused, and
    the data set, reset, reads as before (FilesDaf and ZarrDaf)."""
    from pydaf import reorder_axes, reset_reorder_axes

    values = np.arange(1.0, 1301.0)
    files, zarr_path = tmp_path / "packed.files", tmp_path / "packed.daf.zarr"
    for daf in (pydaf.FilesDaf(files, "w"), pydaf.ZarrDaf(zarr_path, "w")):
        daf.add_axis("cell", [f"c{index}" for index in range(1300)]).set_vector("cell", "score", values)
        daf.set_vector("cell", "flat", values[::-1].copy())
        del daf
    pack_files_property(str(files / "vectors" / "cell" / "score"), values, "zstd")
    pack_zarr_node(str(zarr_path), "vectors/cell/score", values, "zstd")
    for path, kind in ((files, pydaf.FilesDaf), (zarr_path, pydaf.ZarrDaf)):
        daf = kind(path, "r+")
        with pytest.raises(pydaf.DafFormatError, match="reordering packed"):
            reorder_axes(daf, {"cell": list(range(1300))[::-1]}, progress=False)
        reset_reorder_axes(daf)
        reopened = kind(path, "r")
        assert np.array_equal(reopened.get_vector("cell", "score"), values)
        assert np.array_equal(reopened.get_vector("cell", "flat"), values[::-1])
        assert reopened.axis_vector("cell").tolist() == [f"c{index}" for index in range(1300)]


def test_a_source_that_coalesces_ranges_is_asked_for_every_chunk_at_once():
    """The optional ``read_ranges`` of a byte source (HttpDaf's: nearby ranges in one request) gets every chunk's
    range in one call, after the central directory is read."""
    values = np.arange(1.0, 5001.0)

    class Coalescing(BufferByteSource):
        def __init__(self, data: bytes) -> None:
            super().__init__("coalescing.zip", data)
            self.calls: list[list[tuple[int, int]]] = []
            self.reads = 0

        def read(self, offset: int, length: int) -> memoryview:
            self.reads += 1
            return super().read(offset, length)

        def read_ranges(self, ranges: list[tuple[int, int]]) -> list[memoryview]:
            self.calls.append(list(ranges))
            return [BufferByteSource.read(self, offset, length) for offset, length in ranges]

    for compression in CODECS:
        source = Coalescing(build_shard(values, (1024,), compression))
        layout = packed_layout(values.dtype, values.shape, [1024], compression, 5)
        assert np.array_equal(read_packed_array(source, layout), values)
        assert len(source.calls) == 1 and len(source.calls[0]) == 5  # (5 chunks, one call)
        assert source.reads == 2  # (the end of central directory, then the central directory)
