"""Writing packed (chunked, compressed) properties to FilesDaf, ZipDaf and ZarrDaf (issue 28): Julia's bytes (the
``files-packed/gzip.files`` fixture rewritten by pydaf, file for file), Julia's layout rules (which properties pack,
their chunk shapes, descriptors and Zarr metadata), value-exact round trips for every codec, zarr-python reading what
pydaf writes, and ``pydaf convert --packed``."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import scipy.sparse

import pydaf
from pydaf.core.packed_settings import PackedCodec
from pydaf.formats.packed.shard_writer import encode_packed_dense_array, sharded_array_metadata
from pydaf.interop.convert import convert
from pydaf.sparse import SparseVector
from pydaf.testing import DafConformance

from .conftest import FilesBackend, ZarrBackend, ZipBackend
from .julia_examples import FIXTURES
from .packed_shards import build_shard, sharded_zarr_json

PACKED = FIXTURES / "julia" / "files-packed" / "gzip.files"
needs_packed = pytest.mark.skipif(not PACKED.is_dir(), reason=f"the Julia-written packed fixture is not at {PACKED}")
CODECS = ["blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "zstd", "gzip"]
RNG = np.random.default_rng(28)
N_CELLS, N_GENES = 9000, 6  # (a Bool column of 9000 is above the 8 KiB threshold)

SCORE = RNG.random(N_CELLS)
COUNTS = RNG.integers(0, 1000, N_CELLS).astype(np.int32)
FLAGS = RNG.random(N_CELLS) < 0.5
LABELS = np.array([f"label-{index % 37}" for index in range(N_CELLS)], dtype=object)
DENSE = RNG.random((N_CELLS, N_GENES)).astype(np.float32)
SPARSE = scipy.sparse.random(N_CELLS, N_GENES, density=0.4, format="csc", random_state=28, dtype=np.float64)
SPARSE_VECTOR = np.where(RNG.random(N_CELLS) < 0.9, 0.0, RNG.random(N_CELLS))


@pytest.fixture(autouse=True)
def _default_knobs(monkeypatch):
    for variable in ("DAF_PACKED_TARGET_CHUNK_KB", "DAF_PACKED_COMPRESSION", "DAF_PACKED_COMPRESSION_LEVEL"):
        monkeypatch.delenv(variable, raising=False)


def _path(tmp_path, kind: str) -> str:
    names = {"files": "x.daf", "zip": "x.daf.zip", "zarr": "x.daf.zarr", "zarrzip": "x.daf.zarr.zip"}
    return str(tmp_path / names[kind])


def _fill(daf: pydaf.DafWriter) -> None:
    daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)]).add_axis("gene", [f"g{index}" for index in
                                                                                        range(N_GENES)])
    daf.set_vector("cell", "score", SCORE).set_vector("cell", "counts", COUNTS).set_vector("cell", "flags", FLAGS)
    daf.set_vector("cell", "label", LABELS).set_vector("cell", "sparse", SparseVector.from_dense(SPARSE_VECTOR))
    daf.set_matrix("cell", "gene", "dense", DENSE)  # (relayout: gene x cell has 6 rows, stays flat)
    daf.set_matrix("cell", "gene", "sparse", SPARSE)
    with daf.empty_dense_vector("cell", "built", "Int64") as built:
        built[:] = np.arange(N_CELLS)
    with daf.empty_dense_matrix("cell", "gene", "built", "Float64") as built:
        built[:] = DENSE.astype(np.float64) * 2
    daf.set_vector("cell", "fill", 7.5)


def _assert_values(daf: pydaf.DafReader) -> None:
    assert np.array_equal(daf.get_vector("cell", "score"), SCORE)
    counts = daf.get_vector("cell", "counts")
    assert np.array_equal(counts, COUNTS) and counts.dtype == np.int32
    assert np.array_equal(daf.get_vector("cell", "flags"), FLAGS) and daf.get_vector("cell", "flags").dtype == np.bool_
    assert daf.get_vector("cell", "label").tolist() == LABELS.tolist()
    assert np.array_equal(daf.get_vector("cell", "sparse"), SPARSE_VECTOR)
    assert np.array_equal(daf.get_matrix("cell", "gene", "dense", relayout=False), DENSE)
    assert np.array_equal(daf.get_matrix("gene", "cell", "dense", relayout=False), DENSE.T)
    assert abs(daf.get_matrix("cell", "gene", "sparse", relayout=False) - SPARSE).max() == 0
    assert abs(daf.get_matrix("gene", "cell", "sparse", relayout=False) - SPARSE.T).max() == 0
    assert np.array_equal(daf.get_vector("cell", "built"), np.arange(N_CELLS))
    assert np.array_equal(daf.get_matrix("cell", "gene", "built", relayout=False), DENSE.astype(np.float64) * 2)
    assert np.array_equal(daf.get_vector("cell", "fill"), np.full(N_CELLS, 7.5))


def _descriptor(root: str, kind: str, key: str) -> dict:
    if kind == "zip":
        with zipfile.ZipFile(root) as archive:
            return json.loads(archive.read(key + ".json"))
    with open(os.path.join(root, key + ".json")) as handle:
        return json.load(handle)


def _zarr_metadata(root: str, kind: str, node: str) -> dict:
    if kind == "zarrzip":
        with zipfile.ZipFile(root) as archive:
            return json.loads(archive.read(node + "/zarr.json"))
    with open(os.path.join(root, node, "zarr.json")) as handle:
        return json.load(handle)


# The shard writer: Julia's bytes.


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("values, chunk_shape", [
    (np.arange(1200.0), (1024,)), (np.arange(20000, dtype=np.int16), (4096,)), (FLAGS, (8192,)),
    (LABELS, (512,)), (np.arange(9600.0).reshape((1200, 8), order="F"), (1024, 1)),
    (np.array([f"é{index}" for index in range(3000)], dtype=object).reshape((1000, 3), order="F"), (512, 1))])
def test_the_writer_gives_the_spec_builders_bytes(compression, values, chunk_shape):
    """``tests/packed_shards.py`` builds shards field by field from FORMATS.md §4 (and reproduces Julia's gzip
    fixture): pydaf's writer gives the same bytes, for every codec, numbers, Bool and strings."""
    mine = encode_packed_dense_array(values, chunk_shape, PackedCodec(compression, 5))
    assert mine == build_shard(values, chunk_shape, compression, 5)
    if compression.startswith("blosc"):  # (Python's zipfile reads neither zstd entries nor the gzip-header names)
        with zipfile.ZipFile(io.BytesIO(mine)) as archive:
            assert len(archive.namelist()) == math.prod(
                -(-size // chunk) for size, chunk in zip(values.shape, chunk_shape, strict=True)) + 1  # (codec.json)
            assert archive.testzip() is None  # (every entry's CRC checks)


@needs_packed
@pytest.mark.parametrize("via", ["set", "copy_all"])
def test_julias_gzip_fixture_is_rewritten_file_for_file(tmp_path, monkeypatch, via):
    """Every file of Julia's ``files-packed/gzip.files`` (descriptors, shards, the flat relayout copies, axes,
    scalars) is rewritten byte for byte by a packed FilesDaf with the same knobs (gzip, level 5)."""
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", "gzip")
    source = pydaf.FilesDaf(str(PACKED), "r")
    destination = pydaf.FilesDaf(str(tmp_path / "g.files"), "w", name="g", packed=True)
    if via == "copy_all":
        pydaf.copy_all(destination=destination, source=source, progress=False)
    else:
        for axis in ("cell", "gene"):
            destination.add_axis(axis, source.axis_vector(axis))
        destination.set_scalar("name", source.get_scalar("name"))
        for name in ("score", "label"):
            destination.set_vector("cell", name, source.get_vector("cell", name))
        destination.set_matrix("cell", "gene", "dense", source.get_matrix("cell", "gene", "dense"))
        destination.set_matrix("cell", "gene", "sparse", source.get_stored_matrix("cell", "gene", "sparse"))
    compared = 0
    for folder, _, files in os.walk(PACKED):
        for file in files:
            relative = os.path.relpath(os.path.join(folder, file), PACKED)
            if relative == "metadata.json" or (via == "copy_all" and relative.startswith("matrices/gene/cell/sparse")):
                continue  # (copy_all stores the source's stored gene x cell copy with set_matrix: packed, as Julia's)
            with open(os.path.join(folder, file), "rb") as julia, open(tmp_path / "g.files" / relative, "rb") as mine:
                assert mine.read() == julia.read(), relative
            compared += 1
    assert compared >= 15


# Layout: which properties pack, and how, as Julia decides.


@pytest.mark.parametrize("compression", CODECS)
def test_files_and_zip_layout_is_julias(tmp_path, monkeypatch, compression):
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", compression)
    monkeypatch.setenv("DAF_PACKED_COMPRESSION_LEVEL", "3")
    for kind in ("files", "zip"):
        root = _path(tmp_path, kind)
        daf = pydaf.open_daf(root, "w", packed=True)
        _fill(daf)
        packed = {"packed_format": "indexed+zipped", "compression": compression, "compression_level": 3,
                  "index_location": "start"}
        assert _descriptor(root, kind, "vectors/cell/score") == {"format": "dense", "eltype": "Float64",
                                                                 **packed, "chunk_shape": [1024]}
        assert _descriptor(root, kind, "vectors/cell/counts")["chunk_shape"] == [2048]
        assert _descriptor(root, kind, "vectors/cell/flags")["chunk_shape"] == [8192]
        assert _descriptor(root, kind, "matrices/cell/gene/dense")["chunk_shape"] == [2048, 1]
        assert _descriptor(root, kind, "matrices/cell/gene/built")["chunk_shape"] == [1024, 1]  # (builder: as set)
        assert _descriptor(root, kind, "vectors/cell/built")["chunk_shape"] == [1024]
        assert _descriptor(root, kind, "matrices/gene/cell/dense") == {"format": "dense", "eltype": "Float32"}
        assert _descriptor(root, kind, "vectors/cell/fill") == {"format": "dense", "eltype": "Float64"}  # (a fill)
        sparse = _descriptor(root, kind, "matrices/cell/gene/sparse")
        index_size = {"Int32": 4, "Int64": 8, "UInt32": 4, "UInt64": 8}[sparse["rowval"]["eltype"]]
        assert "packed_format" not in sparse["colptr"] and sparse["rowval"]["chunk_shape"] == [8192 // index_size]
        assert sparse["nzval"]["chunk_shape"] == [1024] and sparse["nzval"]["n_elements"] == SPARSE.nnz
        assert "packed_format" not in _descriptor(root, kind, "matrices/gene/cell/sparse")["rowval"]  # (relayout)
        label = _descriptor(root, kind, "vectors/cell/label")
        if kind == "files":  # (FilesDaf packs strings; Julia's ZipDaf writes them flat)
            assert label == {"format": "dense", "eltype": "String", **packed, "chunk_shape": [512]}
        else:
            assert label == {"format": "dense", "eltype": "String"}
        _assert_values(pydaf.open_daf(root, "r"))


def test_zarr_layout_is_julias_but_zarr_python_readable(tmp_path):
    root = _path(tmp_path, "zarr")
    daf = pydaf.ZarrDaf(root, "w", packed=True)
    _fill(daf)
    daf.set_matrix("cell", "gene", "names", np.full((N_CELLS, N_GENES), "x", dtype=object), relayout=False)
    codec = PackedCodec("blosc_zstd_bitshuffle", 5)
    score = _zarr_metadata(root, "zarr", "vectors/cell/score")
    expected = json.loads(sharded_array_metadata(np.dtype(np.float64), (N_CELLS,), (1024,), codec)[0])
    assert score == expected
    julia = sharded_zarr_json(np.dtype(np.float64), (N_CELLS,), (1024,), "blosc_zstd_bitshuffle")
    assert julia["chunk_grid"]["configuration"]["chunk_shape"] == [9000]  # (Julia's: the shape)
    assert score["chunk_grid"]["configuration"]["chunk_shape"] == [9216]  # (pydaf's: rounded up to inner chunks)
    assert {key: value for key, value in score.items() if key != "chunk_grid"} == \
        {key: value for key, value in julia.items() if key != "chunk_grid"}
    with open(os.path.join(root, "vectors", "cell", "score", "c", "0"), "rb") as shard:  # (Julia's shard bytes)
        assert shard.read() == build_shard(SCORE, (1024,), "blosc_zstd_bitshuffle")
    label = _zarr_metadata(root, "zarr", "vectors/cell/label")["codecs"][0]["configuration"]  # (strings vectors pack)
    assert label["chunk_shape"] == [512] and label["codecs"][0]["name"] == "vlen-utf8"
    names = _zarr_metadata(root, "zarr", "matrices/cell/gene/names")  # (string matrices never)
    assert names["codecs"][0]["name"] == "vlen-utf8"
    built = _zarr_metadata(root, "zarr", "matrices/cell/gene/built")["codecs"][0]["configuration"]
    assert built["chunk_shape"] == [1, N_CELLS]  # (Julia streams a built matrix one whole column per chunk)
    assert _zarr_metadata(root, "zarr", "vectors/cell/fill")["codecs"][0]["name"] == "sharding_indexed"  # (fills too)
    sparse = "matrices/cell/gene/sparse"
    assert _zarr_metadata(root, "zarr", sparse + "/nzval")["codecs"][0]["name"] == "sharding_indexed"
    assert _zarr_metadata(root, "zarr", sparse + "/colptr")["codecs"][0]["name"] == "bytes"
    assert _zarr_metadata(root, "zarr", "matrices/gene/cell/sparse/nzval")["codecs"][0]["name"] == "bytes"
    with open(os.path.join(root, "zarr.json")) as handle:  # (the consolidated entry has no attributes, as Julia's)
        consolidated = json.load(handle)["consolidated_metadata"]["metadata"]
    assert consolidated["vectors/cell/score"] == {key: value for key, value in score.items() if key != "attributes"}
    _assert_values(pydaf.open_daf(root, "r"))


@pytest.mark.parametrize("kind", ["files", "zip", "zarr"])
def test_a_relayout_packs_as_julias_builders(tmp_path, kind):
    """``relayout_matrix`` goes through the dense builder: FilesDaf and ZipDaf pack with ``set_matrix!``'s chunks,
    ZarrDaf with one whole column per chunk; a sparse relayout is always flat."""
    root = _path(tmp_path, kind)
    daf = pydaf.open_daf(root, "w", packed=True)
    daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)]).add_axis("gene", [f"g{i}" for i in range(N_GENES)])
    daf.set_matrix("gene", "cell", "dense", DENSE.T.copy(order="F"), relayout=False)  # (6-element columns: flat)
    daf.relayout_matrix("gene", "cell", "dense")
    if kind == "zarr":
        metadata = _zarr_metadata(root, kind, "matrices/cell/gene/dense")
        assert metadata["codecs"][0]["configuration"]["chunk_shape"] == [1, N_CELLS]
        assert _zarr_metadata(root, kind, "matrices/gene/cell/dense")["codecs"][0]["name"] == "bytes"
    else:
        assert _descriptor(root, kind, "matrices/cell/gene/dense")["chunk_shape"] == [2048, 1]
        assert "packed_format" not in _descriptor(root, kind, "matrices/gene/cell/dense")
    assert np.array_equal(pydaf.open_daf(root, "r").get_matrix("cell", "gene", "dense", relayout=False), DENSE)


# Round trips: every format and codec, pydaf -> pydaf and pydaf -> zarr-python.


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("kind", ["files", "zip", "zarr", "zarrzip"])
def test_round_trips_are_value_exact(tmp_path, monkeypatch, kind, compression):
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", compression)
    root = _path(tmp_path, kind)
    _fill(pydaf.open_daf(root, "w", packed=True))
    _assert_values(pydaf.open_daf(root, "r"))


@pytest.mark.parametrize("compression", CODECS)
def test_zarr_python_reads_what_pydaf_packs(tmp_path, monkeypatch, compression):
    zarr = pytest.importorskip("zarr")
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", compression)
    root = _path(tmp_path, "zarr")
    _fill(pydaf.ZarrDaf(root, "w", packed=True))
    group = zarr.open_group(root, mode="r")
    assert group["vectors/cell/score"].shards == (9216,)  # (it is read as a sharded array)
    assert np.array_equal(group["vectors/cell/score"][...], SCORE)
    assert np.array_equal(group["vectors/cell/counts"][...], COUNTS)
    assert np.array_equal(group["vectors/cell/flags"][...], FLAGS)
    assert [str(value) for value in group["vectors/cell/label"][...]] == LABELS.tolist()
    assert np.array_equal(group["matrices/cell/gene/dense"][...], DENSE.T)  # (Zarr's shape is Julia's reversed)
    assert np.array_equal(group["matrices/cell/gene/built"][...], DENSE.T.astype(np.float64) * 2)
    assert np.array_equal(group["vectors/cell/built"][...], np.arange(N_CELLS))
    assert np.array_equal(group["matrices/cell/gene/sparse/nzval"][...], SPARSE.data)
    assert np.array_equal(group["matrices/cell/gene/sparse/rowval"][...], SPARSE.indices + 1)


def test_zarr_python_refuses_julias_own_shard_shape(tmp_path):
    """Why pydaf's chunk_grid differs from Julia's (docs/design/packed.md): zarr-python refuses a shard that is not
    a multiple of its inner chunks, which Julia writes; pydaf reads Julia's, and zarr-python reads pydaf's."""
    zarr = pytest.importorskip("zarr")
    node = tmp_path / "j.zarr"
    (node / "c").mkdir(parents=True)
    (node / "c" / "0").write_bytes(build_shard(SCORE, (1024,), "zstd"))
    (node / "zarr.json").write_text(json.dumps(sharded_zarr_json(SCORE.dtype, SCORE.shape, (1024,), "zstd")))
    with pytest.raises(ValueError, match="needs to be divisible by the shard's inner `chunk_shape`"):
        zarr.open_array(str(node), mode="r")


# When writes pack: the constructor's default, each call's packed=, the threshold.


def test_packed_defaults_and_per_call_override(tmp_path):
    root = _path(tmp_path, "files")
    daf = pydaf.FilesDaf(root, "w", packed=True).add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
    daf.set_vector("cell", "packed", SCORE).set_vector("cell", "flat", SCORE, packed=False)
    flat = pydaf.FilesDaf(str(tmp_path / "y.daf"), "w").add_axis("cell", [f"c{i}" for i in range(N_CELLS)])
    flat.set_vector("cell", "asked", SCORE, packed=True).set_vector("cell", "default", SCORE)
    assert "packed_format" in _descriptor(root, "files", "vectors/cell/packed")
    assert "packed_format" not in _descriptor(root, "files", "vectors/cell/flat")
    assert "packed_format" in _descriptor(str(tmp_path / "y.daf"), "files", "vectors/cell/asked")
    assert "packed_format" not in _descriptor(str(tmp_path / "y.daf"), "files", "vectors/cell/default")
    small = pydaf.FilesDaf(str(tmp_path / "s.daf"), "w", packed=True).add_axis("cell", ["A", "B"])
    small.set_vector("cell", "tiny", [1.0, 2.0])  # (below 8 KiB: flat however asked)
    assert "packed_format" not in _descriptor(str(tmp_path / "s.daf"), "files", "vectors/cell/tiny")
    reopened = pydaf.FilesDaf(root, "r+")  # (the default is not stored: a reopened data set writes flat)
    reopened.set_vector("cell", "later", SCORE)
    assert "packed_format" not in _descriptor(root, "files", "vectors/cell/later")
    with pytest.raises(pydaf.DafValueError, match="invalid packed: 'yes'"):
        pydaf.ZarrDaf(str(tmp_path / "z.daf.zarr"), "w", packed="yes")


def test_codecs_julia_does_not_write_to_shards_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DAF_PACKED_COMPRESSION", "zstd_bitshuffle")
    daf = pydaf.FilesDaf(_path(tmp_path, "files"), "w", packed=True).add_axis("cell", [f"c{i}" for i in
                                                                                        range(N_CELLS)])
    with pytest.raises(pydaf.DafValueError, match="zstd_bitshuffle is not supported on the v3 sharded backend"):
        daf.set_vector("cell", "score", SCORE)
    assert not daf.has_vector("cell", "score")
    daf.set_vector("cell", "flat", SCORE, packed=False)  # (flat writes are unaffected)
    assert np.array_equal(daf.get_vector("cell", "flat"), SCORE)


def test_a_filled_packed_builder_that_fails_leaves_nothing(tmp_path):
    daf = pydaf.ZarrDaf(_path(tmp_path, "zarr"), "w", packed=True).add_axis("cell", [f"c{i}" for i in
                                                                                      range(N_CELLS)])
    with pytest.raises(RuntimeError), daf.empty_dense_vector("cell", "built", "Float64") as built:
        built[:] = 1
        raise RuntimeError("stop")
    assert not daf.has_vector("cell", "built")
    with daf.empty_dense_vector("cell", "built", "Float64") as built:
        built[:] = SCORE
    assert np.array_equal(pydaf.ZarrDaf(_path(tmp_path, "zarr"), "r").get_vector("cell", "built"), SCORE)


# Conversion that compresses.


@pytest.fixture(scope="module")
def h5ad_file(tmp_path_factory):
    anndata = pytest.importorskip("anndata")
    path = str(tmp_path_factory.mktemp("h5ad") / "counts.h5ad")
    counts = scipy.sparse.random(3000, 40, density=0.2, format="csr", random_state=3, dtype=np.float32)
    data = anndata.AnnData(X=counts, obs={"score": np.linspace(0, 1, 3000)},
                           var={"gene_name": [f"g{index}" for index in range(40)]})
    data.obs_names = [f"c{index}" for index in range(3000)]
    data.var_names = [f"g{index}" for index in range(40)]
    data.write_h5ad(path)
    return path, counts


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(folder, file)) for folder, _, files in os.walk(path) for file in files)
    return os.path.getsize(path)


@pytest.mark.parametrize("suffix", [".h5df", ".daf", ".daf.zip", ".daf.zarr"])
def test_convert_packed_compresses_and_keeps_every_value(tmp_path, h5ad_file, suffix):
    source, counts = h5ad_file
    flat, packed = str(tmp_path / f"flat{suffix}"), str(tmp_path / f"packed{suffix}")
    for destination, extra in ((flat, []), (packed, ["--packed"])):
        result = subprocess.run([sys.executable, "-m", "pydaf", "convert", source, destination, "--no-progress",
                                 *extra], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    assert _size(packed) < 0.8 * _size(flat)
    flat_daf, packed_daf = pydaf.open_daf(flat, "r"), pydaf.open_daf(packed, "r")
    assert abs(packed_daf.get_matrix("obs", "var", "X") - counts.tocsc()).max() == 0
    for axis, name in (("obs", "score"), ("var", "gene_name")):
        assert packed_daf.get_vector(axis, name).tolist() == flat_daf.get_vector(axis, name).tolist()
    if suffix == ".daf":  # (X's components are packed, as Julia's copy would pack them)
        descriptor = _descriptor(packed, "files", "matrices/var/obs/X")
        assert "packed_format" in descriptor["nzval"] and "packed_format" in descriptor["rowval"]


def test_convert_packed_from_a_daf_data_set(tmp_path):
    source = str(tmp_path / "source.daf.zarr")
    _fill(pydaf.ZarrDaf(source, "w"))
    destination = str(tmp_path / "packed.daf")
    convert(source, destination, packed=True, progress=False)  # (FilesDaf <- ZarrDaf: copied, not linked)
    assert "packed_format" in _descriptor(destination, "files", "vectors/cell/score")
    _assert_values(pydaf.open_daf(destination, "r"))


def test_convert_packed_into_h5ad_is_refused(tmp_path, h5ad_file):
    source = str(tmp_path / "x.h5df")
    pydaf.H5df(source, "w").add_axis("obs", ["A"]).add_axis("var", ["X"]).flush()
    result = subprocess.run([sys.executable, "-m", "pydaf", "convert", source, str(tmp_path / "y.h5ad"), "--packed"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "can't write a packed AnnData file" in result.stderr and "drop --packed" in result.stderr
    assert not os.path.exists(tmp_path / "y.h5ad")


# The conformance suite on data sets that pack by default (with 1 KiB chunks, so its larger properties pack).


class _Packed:
    def new(self, directory, name: str) -> pydaf.DafWriter:
        return self.daf_type(self.path(directory), "w", name=name, packed=True)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        if hasattr(daf.format, "format_close") and not isinstance(self, PackedFilesBackend):
            daf.format.format_close()
        return self.daf_type(daf.complete_path(), mode, name=daf.name, packed=True)


class PackedFilesBackend(_Packed, FilesBackend):
    name = "files_packed"
    daf_type = pydaf.FilesDaf


class PackedZipBackend(_Packed, ZipBackend):
    name = "zip_packed"


class PackedZarrBackend(_Packed, ZarrBackend):
    name = "zarr_packed"


class _SmallChunks(DafConformance):
    @pytest.fixture(autouse=True)
    def _small_chunks(self, monkeypatch):
        monkeypatch.setenv("DAF_PACKED_TARGET_CHUNK_KB", "1")


class TestPackedFiles(_SmallChunks):
    backend = PackedFilesBackend()


class TestPackedZip(_SmallChunks):
    backend = PackedZipBackend()


class TestPackedZarr(_SmallChunks):
    backend = PackedZarrBackend()
