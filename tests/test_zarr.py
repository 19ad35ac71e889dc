"""ZarrDaf (``pydaf/formats/zarr.py``) and its ZIP framing (``pydaf/formats/zipstore.py``): Julia's fixture read
exactly and rewritten byte for byte, zarr-python reading what pydaf writes and pydaf reading what zarr-python writes,
the ZIP framing as Python's ``zipfile`` checks it, modes and paths, zero-copy maps, consolidated metadata, hostile
stores, and writers killed with SIGKILL. (Every shared test also runs on the three variants: ``conftest.BACKENDS``.)
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import pydaf
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.formats.zarr.format import consolidated_order, decode_strings, encode_strings, split_zarr_path
from pydaf.formats.zip import store as zipstore
from pydaf.testing.conformance import NUMBER_DTYPES, is_file_map, sample_values

from .julia_examples import FIXTURES
from .soak import soak

FIXTURE = FIXTURES / "julia" / "zarr-flat.daf.zarr"
needs_fixture = pytest.mark.skipif(not FIXTURE.is_dir(), reason=f"Julia's ZarrDaf fixture is not at {FIXTURE}")

VARIANTS = ["directory", "zip", "zip_group"]


def variant_path(tmp_path: Path, variant: str, stem: str = "data") -> str:
    return {"directory": f"{tmp_path}/{stem}.daf.zarr", "zip": f"{tmp_path}/{stem}.daf.zarr.zip",
            "zip_group": f"{tmp_path}/{stem}.dafs.zarr.zip#/cells/raw"}[variant]


def archive_of(path: str) -> str:
    return path.split("#/")[0]


def files_of(root: str | Path) -> dict[str, bytes]:
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            full = os.path.join(folder, name)
            with open(full, "rb") as handle:
                found[os.path.relpath(full, root)] = handle.read()
    return found


def fixture_content(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """What the Julia script that wrote ``zarr-flat.daf.zarr`` did, in its order."""
    daf.add_axis("cell", ["c1", "c2", "c3"]).add_axis("gene", ["g1", "g2"])
    daf.set_scalar("title", "hello").set_scalar("n", np.int32(7))
    daf.set_vector("cell", "score", [1.5, 2.5, 3.5])
    daf.set_matrix("cell", "gene", "expr", np.array([[1, 2], [3, 4], [5, 6]], np.float32))
    daf.set_matrix("cell", "gene", "sp", SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([3, 1]),
                                                         np.array([5.0, 2.0])))
    return daf


# Julia's fixture.


@needs_fixture
def test_julia_fixture_reads_exactly():
    before = files_of(FIXTURE)
    daf = pydaf.open_daf(FIXTURE)
    assert isinstance(daf.base, pydaf.ZarrDaf)
    assert daf.scalars_set() == {"n", "title"} and daf.axes_set() == {"cell", "gene"}
    n = daf.get_scalar("n")
    assert n == 7 and np.asarray(n).dtype == np.int32
    assert daf.get_scalar("title") == "hello"
    assert daf.axis_vector("cell").tolist() == ["c1", "c2", "c3"] and daf.axis_vector("gene").tolist() == ["g1", "g2"]
    assert daf.vectors_set("cell") == {"score"} and daf.vectors_set("gene") == set()
    score = daf.get_vector("cell", "score")
    assert score.dtype == np.float64 and score.tolist() == [1.5, 2.5, 3.5] and is_file_map(score)
    for rows, columns in (("cell", "gene"), ("gene", "cell")):
        assert daf.matrices_set(rows, columns, relayout=False) == {"expr", "sp"}
    assert daf.matrices_set("cell", "cell") == set() == daf.matrices_set("gene", "gene")
    expr = daf.get_matrix("cell", "gene", "expr", relayout=False)
    assert expr.dtype == np.float32 and expr.flags.f_contiguous and is_file_map(expr)
    assert expr.tolist() == [[1, 2], [3, 4], [5, 6]]
    assert daf.get_matrix("gene", "cell", "expr", relayout=False).tolist() == [[1, 3, 5], [2, 4, 6]]
    stored = daf.get_stored_matrix("cell", "gene", "sp", relayout=False)
    assert stored.colptr.tolist() == [1, 2, 3] and stored.rowval.tolist() == [3, 1] and stored.nzval.tolist() == [5, 2]
    assert stored.colptr.dtype == stored.rowval.dtype == np.int64 and stored.nzval.dtype == np.float64
    assert all(is_file_map(array) for array in (stored.colptr, stored.rowval, stored.nzval))
    flipped = daf.get_stored_matrix("gene", "cell", "sp", relayout=False)
    np.testing.assert_array_equal(flipped.to_dense(), stored.to_dense().T)
    assert files_of(FIXTURE) == before  # a read-only open never writes


def in_pydaf_order(root: bytes) -> bytes:
    """A root zarr.json with its consolidated keys in the order pydaf writes (``consolidated_order``), else as is."""
    parsed = json.loads(root)
    assert json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode() == root  # (compact JSON, as Julia's)
    metadata = parsed["consolidated_metadata"]["metadata"]
    ordered = sorted(metadata, key=consolidated_order)
    parsed["consolidated_metadata"]["metadata"] = {key: metadata[key] for key in ordered}
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False).encode()


@needs_fixture
def test_rewriting_the_fixture_gives_the_same_bytes(tmp_path):
    """Every file byte for byte; the root zarr.json too, but for the order of its consolidated keys (Julia's hash
    order, which zarr-python can't read; pydaf's groups them by depth and parent)."""
    written = files_of(fixture_content(pydaf.ZarrDaf(tmp_path / "x.daf.zarr", "w")).complete_path())
    julia = files_of(FIXTURE)
    root, julia_root = written.pop("zarr.json"), julia.pop("zarr.json")
    assert written == julia
    assert root != julia_root and root == in_pydaf_order(julia_root)  # (the order is the only difference)


@needs_fixture
@pytest.mark.parametrize("variant", ["zip", "zip_group"])
def test_zip_entries_hold_the_directory_bytes(tmp_path, variant):
    """A ZIP archive holds the same files (its root zarr.json without the consolidated metadata), each entry STORED
    at an 8-aligned offset with Julia's framing, and Python's zipfile checks every CRC."""
    path = variant_path(tmp_path, variant)
    fixture_content(pydaf.ZarrDaf(path, "w+"))
    prefix = "cells/raw/" if variant == "zip_group" else ""
    expected = files_of(FIXTURE)
    root = json.loads(expected.pop("zarr.json"))
    with zipfile.ZipFile(archive_of(path)) as archive:
        assert archive.testzip() is None
        entries = {info.filename[len(prefix):]: archive.read(info) for info in archive.infolist()}
        infos = archive.infolist()
    assert json.loads(entries.pop("zarr.json")) == {key: value for key, value in root.items()
                                                    if key != "consolidated_metadata"}
    assert entries == expected
    check_framing(archive_of(path), infos)


def check_framing(path: str, infos: list[zipfile.ZipInfo]) -> None:
    """docs/spec/FORMATS.md §3.11, field by field."""
    with open(path, "rb") as handle:
        data = handle.read()
    for info in infos:
        assert info.compress_type == zipfile.ZIP_STORED and info.flag_bits == 0x0800
        assert info.create_version == 0x1E and info.create_system == 3 and info.extract_version == 45
        assert info.external_attr == 0o100644 << 16 and info.date_time == (1980, 1, 1, 0, 0, 0)
        (signature, version, flags, method, time, date, crc, size32, csize32, name_length,
         extra_length) = struct.unpack_from("<IHHHHHIIIHH", data, info.header_offset)
        assert (signature, version, flags, method, time, date) == (0x04034B50, 45, 0x0800, 0, 0, 0x21)
        assert crc == info.CRC and size32 == csize32 == 0xFFFFFFFF
        extra = data[info.header_offset + 30 + name_length:info.header_offset + 30 + name_length + extra_length]
        assert struct.unpack_from("<HHQQ", extra) == (1, 16, info.file_size, info.file_size)
        if len(extra) > 20:
            kind, length = struct.unpack_from("<HH", extra, 20)
            assert kind == 0xDAF1 and 4 + length == len(extra) - 20 and 4 <= len(extra) - 20 <= 11
            assert not any(extra[24:])
        assert (info.header_offset + 30 + name_length + extra_length) % 8 == 0
    tail = data[-98:]
    assert struct.unpack_from("<I", tail)[0] == 0x06064B50 and struct.unpack_from("<I", tail, 56)[0] == 0x07064B50
    assert tail[76:] == struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)


def test_an_empty_archive_is_julias_98_bytes(tmp_path):
    path = tmp_path / "empty.zip"
    zipstore.acquire_zip_store(path, writable=True, create=True).release()
    assert path.read_bytes() == zipstore.EMPTY_ARCHIVE and len(zipstore.EMPTY_ARCHIVE) == 98
    with zipfile.ZipFile(path) as archive:
        assert archive.infolist() == []


def test_zipfile_checks_the_archive_after_every_write(tmp_path):
    path = variant_path(tmp_path, "zip_group")
    daf = pydaf.ZarrDaf(path, "w+")
    writes = [
        lambda: daf.add_axis("cell", [f"c{index}" for index in range(7)]),
        lambda: daf.add_axis("gene", ["g1", "g2", "g3"]),
        lambda: daf.set_scalar("organism", "human"),
        lambda: daf.set_scalar("zero", 0),
        lambda: daf.set_vector("cell", "age", np.arange(7, dtype=np.uint8)),
        lambda: daf.set_vector("cell", "type", ["T", "B", "", "T", "NK", "", "B"]),
        lambda: daf.set_vector("gene", "sparse", SparseVector(3, np.array([2]), np.array([1.5]))),
        lambda: daf.set_matrix("cell", "gene", "UMIs", sp.random(7, 3, density=0.5, format="csc", random_state=1)),
        lambda: daf.set_matrix("gene", "gene", "text", "x"),
        lambda: daf.set_matrix("gene", "cell", "relaid", np.arange(21).reshape(3, 7)),
    ]
    for write in writes:
        write()
        with zipfile.ZipFile(archive_of(path)) as archive:
            assert archive.testzip() is None
            check_framing(archive_of(path), archive.infolist())
    with daf.empty_dense_matrix("gene", "cell", "dense", "Float32") as buffer:
        buffer[:, :] = 1.5
    with daf.empty_sparse_vector("cell", "built", "Int16", 2) as (nzind, nzval):
        nzind[:], nzval[:] = [2, 5], [-1, 1]
    with zipfile.ZipFile(archive_of(path)) as archive:
        assert archive.testzip() is None
        names = archive.namelist()
    assert len(names) == len(set(names))
    reader = pydaf.ZarrDaf(path, "r")
    assert (reader.get_matrix("gene", "cell", "dense") == 1.5).all()
    assert reader.get_vector("cell", "built").tolist() == [0, -1, 0, 0, 1, 0, 0]


# zarr-python reads what pydaf writes.


def open_with_zarr(path: str) -> zarr.Group:
    """The data set's root group, as zarr-python opens it by default (a directory: through its consolidated
    metadata, which pydaf writes grouped by parent as zarr-python's reader needs, docs/spec/FORMATS.md §7.11)."""
    archive, _, group = path.partition("#/")
    if archive.endswith(".zip"):
        return zarr.open_group(zarr.storage.ZipStore(archive, mode="r"), path=group, mode="r")
    opened = zarr.open_group(archive, mode="r")
    assert opened.metadata.consolidated_metadata is not None
    return opened


@pytest.mark.parametrize("variant", VARIANTS)
def test_zarr_python_reads_what_pydaf_writes(tmp_path, variant):
    path = variant_path(tmp_path, variant)
    daf = pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Z"])
    expected: dict[str, np.ndarray] = {}
    for dtype in NUMBER_DTYPES:
        name = np.dtype(dtype).name
        vector, matrix = sample_values(dtype, (4,)), sample_values(dtype, (4, 3), seed=1)
        daf.set_scalar(f"s_{name}", vector[1]).set_vector("cell", f"v_{name}", vector)
        daf.set_matrix("cell", "gene", f"m_{name}", matrix)
        expected[f"scalars/s_{name}"] = vector[1:2]
        expected[f"vectors/cell/v_{name}"] = vector
        # zarr-python sees the transpose (docs/spec/FORMATS.md §5.3)
        expected[f"matrices/cell/gene/m_{name}"] = matrix.T
        expected[f"matrices/gene/cell/m_{name}"] = matrix
    daf.set_scalar("text", "naïve ✓").set_scalar("empty", "").set_vector("gene", "zeros", 0)
    daf.set_vector("cell", "type", ["T", "", "NK", "ünï"]).set_matrix("cell", "gene", "words", "w")
    daf.set_vector("cell", "mask", SparseVector(4, np.array([1, 4], np.uint32), np.array([True, True])))
    csc = SparseMatrixCSC.from_scipy(sp.csc_matrix(np.eye(3, 4) * 2.5), indtype=np.int64)
    daf.set_matrix("gene", "cell", "csc", csc, relayout=False)
    with daf.empty_dense_vector("gene", "built", "UInt16") as buffer:
        buffer[:] = [7, 0, 9]
    expected.update({"scalars/text": np.array(["naïve ✓"]), "scalars/empty": np.array([""]),
                     "vectors/gene/zeros": np.zeros(3, np.int64), "vectors/cell/type": np.array(["T", "", "NK", "ünï"]),
                     "matrices/cell/gene/words": np.full((3, 4), "w"),
                     "vectors/cell/mask/nzind": np.array([1, 4], np.uint32),
                     "matrices/gene/cell/csc/colptr": np.array([1, 2, 3, 4, 4]),
                     "matrices/gene/cell/csc/rowval": np.array([1, 2, 3]),
                     "matrices/gene/cell/csc/nzval": np.array([2.5, 2.5, 2.5]),
                     "vectors/gene/built": np.array([7, 0, 9], np.uint16),
                     "axes/cell": np.array(["A", "B", "C", "D"])})
    group = open_with_zarr(path)
    assert group.attrs["daf"] == [1, 0]
    assert "nzval" not in group["vectors/cell/mask"]  # all-true Bool: Julia's rule
    for key, values in expected.items():
        array = group[key]
        read = array[...]
        assert read.shape == values.shape, key
        if values.dtype.kind in "OUT":
            assert [str(value) for value in read.reshape(-1)] == [str(value) for value in values.reshape(-1)], key
        else:
            assert read.dtype == values.dtype, key
            np.testing.assert_array_equal(read, values, err_msg=key)


def test_fill_value_chunks_are_not_written(tmp_path):
    """Zarr.jl writes no chunk whose elements all equal the fill value (bitwise: -0.0 is kept); builders always do."""
    path = tmp_path / "fill.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B"])
    daf.set_scalar("zero", 0).set_scalar("false", False).set_scalar("empty", "").set_scalar("one", 1)
    daf.set_vector("cell", "zeros", np.zeros(2)).set_vector("cell", "minus", np.array([-0.0, 0.0]))
    daf.set_vector("cell", "blank", ["", ""]).set_vector("cell", "sparse", SparseVector(2, np.array([2]),
                                                                                     np.array([0.0])))
    with daf.empty_dense_vector("cell", "built", "Float64"):
        pass
    present = {key for key in files_of(path) if "/c/" in key}
    assert present == {"scalars/one/c/0", "vectors/cell/minus/c/0", "vectors/cell/sparse/nzind/c/0",
                       "vectors/cell/built/c/0", "axes/cell/c/0"}
    reader = pydaf.ZarrDaf(path, "r")
    assert reader.get_scalar("empty") == "" and reader.get_scalar("false") is not True
    assert np.signbit(reader.get_vector("cell", "minus")).tolist() == [True, False]
    assert reader.get_vector("cell", "blank").tolist() == ["", ""]
    assert reader.get_vector("cell", "sparse").tolist() == [0.0, 0.0]


# pydaf reads Daf-shaped stores written by zarr-python.


def write_with_zarr(store: object, *, chunks: bool = False, compressor: object = None) -> None:
    """A Daf data set written by zarr-python alone (no pydaf), optionally chunked and compressed."""
    root = zarr.open_group(store, mode="w", zarr_format=3, attributes={"daf": [1, 0]})
    for name in ("scalars", "axes", "vectors", "matrices"):
        root.create_group(name)
    options = {"compressors": compressor} if compressor is not None else {"compressors": None}

    def array(key: str, values: np.ndarray) -> None:
        shape = values.shape
        chunk_shape = tuple(max(1, (size + 1) // 2) for size in shape) if chunks else tuple(max(1, s) for s in shape)
        created = root.create_array(key, shape=shape, dtype=values.dtype if values.dtype.kind != "U" else str,
                                    chunks=chunk_shape, fill_value="" if values.dtype.kind == "U" else 0, **options)
        created[...] = values

    array("axes/cell", np.array(["A", "B", "C", "D", "E"]))
    array("axes/gene", np.array(["X", "Y", "Z"]))
    root.create_group("vectors/cell")
    root.create_group("vectors/gene")
    for rows in ("cell", "gene"):
        for columns in ("cell", "gene"):
            root.create_group(f"matrices/{rows}/{columns}")
    array("scalars/version", np.array([3], np.uint16))
    array("scalars/organism", np.array(["human"]))
    array("vectors/cell/age", np.arange(5, dtype=np.int32) * 10)
    array("vectors/cell/type", np.array(["T", "B", "", "NK", "T"]))
    array("matrices/cell/gene/UMIs", np.arange(15, dtype=np.float32).reshape(3, 5))  # Zarr shape [genes, cells]
    root.create_group("vectors/gene/marker")
    array("vectors/gene/marker/nzind", np.array([1, 3], np.int64))
    array("vectors/gene/marker/nzval", np.array([0.5, 2.0]))


@pytest.mark.parametrize(("kind", "chunks", "compressor"), [
    ("directory", False, None), ("directory", True, None), ("directory", True, "gzip"), ("zip", False, None),
    ("zip", True, "gzip")])
def test_pydaf_reads_what_zarr_python_writes(tmp_path, kind, chunks, compressor):
    codec = zarr.codecs.GzipCodec(level=5) if compressor == "gzip" else None
    if kind == "zip":
        path = str(tmp_path / "foreign.daf.zarr.zip")
        with zarr.storage.ZipStore(path, mode="w") as store:
            write_with_zarr(store, chunks=chunks, compressor=codec)
    else:
        path = str(tmp_path / "foreign.daf.zarr")
        write_with_zarr(path, chunks=chunks, compressor=codec)
    daf = pydaf.open_daf(path)
    assert daf.axis_vector("cell").tolist() == ["A", "B", "C", "D", "E"]
    assert daf.get_scalar("version") == 3 and np.asarray(daf.get_scalar("version")).dtype == np.uint16
    assert daf.get_scalar("organism") == "human"
    assert daf.get_vector("cell", "age").tolist() == [0, 10, 20, 30, 40]
    assert daf.get_vector("cell", "type").tolist() == ["T", "B", "", "NK", "T"]
    np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "UMIs"), np.arange(15, dtype=np.float32)
                                  .reshape(3, 5).T)
    assert daf.get_vector("gene", "marker").tolist() == [0.5, 0.0, 2.0]
    if not chunks and compressor is None and kind == "directory":  # (zarr-python's ZIP entries are not aligned)
        assert is_file_map(daf.get_vector("cell", "age"))
    if kind == "directory":
        writer = pydaf.ZarrDaf(path, "r+")  # a writable open adds the consolidated metadata zarr-python left out
        writer.set_vector("cell", "more", 1.0)
        root = json.loads(Path(path, "zarr.json").read_bytes())
        assert set(root["consolidated_metadata"]["metadata"]) >= {"vectors/cell/more", "vectors/gene/marker/nzind"}


def test_packed_and_compressed_arrays_are_refused_naming_the_property(tmp_path):
    path = str(tmp_path / "packed.daf.zarr")
    write_with_zarr(path)
    root = zarr.open_group(path, mode="a")
    # (two shards: one shard of 8 holding the 5 values is the layout pydaf writes, and reads)
    root.create_array("vectors/cell/sharded", shape=(5,), dtype=np.float64, chunks=(2,), shards=(4,),
                      compressors=None, fill_value=0)[...] = np.arange(5.0)
    root.create_array("vectors/cell/zstd", shape=(5,), dtype=np.float64, chunks=(5,),
                      compressors=zarr.codecs.ZstdCodec(), fill_value=0)[...] = np.arange(5.0)
    daf = pydaf.ZarrDaf(path, "r")
    with pytest.raises(pydaf.DafFormatError, match=r"a sharded array whose shard \(chunk_shape \[4\]\) is not the "
                                                   r"whole array \(shape \[5\]\).*\nin the zarr.json of the vector: "
                                                   "sharded\nof the axis: cell"):
        daf.get_vector("cell", "sharded")
    with pytest.raises(pydaf.DafFormatError, match=r"unsupported codecs: \['bytes', 'zstd'\].*\n.*vector: zstd"):
        daf.get_vector("cell", "zstd")
    assert daf.get_vector("cell", "age").tolist() == [0, 10, 20, 30, 40]  # the rest reads on


# Paths and modes.


@pytest.mark.parametrize(("path", "message"), [
    ("x.daf.zarr.zip#/group", "can't address a sub-daf in a singular ZarrDaf path"),
    ("x.dafs.zarr.zip", "missing '#/<group>' in plural ZarrDaf path"),
    ("x.dafs.zarr.zip#/", "empty group name after '#/' in ZarrDaf path"),
    ("x.dafs.zarr.zip#/a/../b", "invalid group name"),
    ("x.zarr", "can't parse as ZarrDaf path"),
])
def test_bad_paths_are_refused(tmp_path, path, message):
    with pytest.raises(pydaf.DafFormatError, match=message):
        pydaf.ZarrDaf(f"{tmp_path}/{path}", "w+")
    assert os.listdir(tmp_path) == []


@needs_fixture
def test_paths_and_the_registry(tmp_path):
    assert split_zarr_path("a/x.daf.zarr/") == ("a/x.daf.zarr", None, False)
    for variant in VARIANTS:
        path = variant_path(tmp_path, variant, stem=variant)
        assert pydaf.formats.registry.guess_format(path).name == "ZarrDaf"
        pydaf.open_daf(path, "w+").add_axis("cell", ["A"])
        assert isinstance(pydaf.open_daf(path).base, pydaf.ZarrDaf)
    # A directory holding a Zarr group is a ZarrDaf whatever its name; a FilesDaf directory is not.
    shutil.copytree(FIXTURE, tmp_path / "plain")
    assert pydaf.formats.registry.guess_format(tmp_path / "plain").name == "ZarrDaf"
    pydaf.FilesDaf(tmp_path / "files.daf.zarr", "w")
    assert pydaf.formats.registry.guess_format(tmp_path / "files.daf.zarr").name == "FilesDaf"


@pytest.mark.parametrize("variant", VARIANTS)
def test_modes(tmp_path, variant):
    path = variant_path(tmp_path, variant)
    with pytest.raises(pydaf.DafFormatError, match="no such"):
        pydaf.ZarrDaf(path, "r")
    with pytest.raises(pydaf.DafFormatError, match="no such"):
        pydaf.ZarrDaf(path, "r+")
    assert not os.path.exists(archive_of(path))
    pydaf.ZarrDaf(path, "w+", name="first!").set_scalar("x", 1)
    assert pydaf.ZarrDaf(path, "w+").get_scalar("x") == 1
    reader = pydaf.ZarrDaf(path, "r")
    assert isinstance(reader, pydaf.DafReadOnly) and reader.name.startswith(path)
    assert "type: ZarrDaf\n" in reader.base.description() and f"path: {os.path.abspath(archive_of(path))}" in \
        reader.base.description()
    pydaf.ZarrDaf(path, "r+").set_scalar("name", "named!")
    assert pydaf.ZarrDaf(path, "r").name == "named!.read_only"
    if variant == "zip_group":
        with pytest.raises(pydaf.DafModeError, match="can't truncate a sub-daf inside a zip-backed ZarrDaf"):
            pydaf.ZarrDaf(path, "w")
        assert pydaf.ZarrDaf(path, "r").get_scalar("x") == 1
        other = archive_of(path) + "#/other"
        with pytest.raises(pydaf.DafFormatError, match="not a zarr group"):
            pydaf.ZarrDaf(other, "r")
        pydaf.ZarrDaf(other, "w+").set_scalar("y", 2)
        assert pydaf.ZarrDaf(path, "r").scalars_set() == {"x", "name"}
    else:
        kept = pydaf.ZarrDaf(path, "r").get_scalar("x")
        assert pydaf.ZarrDaf(path, "w").scalars_set() == set() and kept == 1


def test_w_plus_refuses_a_directory_that_is_not_a_zarr_group(tmp_path):
    folder = tmp_path / "busy.daf.zarr"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(pydaf.DafFormatError, match="non-empty directory"):
        pydaf.ZarrDaf(folder, "w+")
    assert os.listdir(folder) == ["notes.txt"]
    (folder / "file.daf.zarr").write_text("a file")
    with pytest.raises(pydaf.DafFormatError, match="not a directory"):
        pydaf.ZarrDaf(folder / "file.daf.zarr", "w+")


def test_w_plus_adopts_a_zarr_group_without_daf(tmp_path):
    path = tmp_path / "group.daf.zarr"
    zarr.open_group(str(path), mode="w", attributes={"owner": "someone"})
    with pytest.raises(pydaf.DafFormatError, match="not a daf data set"):
        pydaf.ZarrDaf(path, "r")
    pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A"])
    root = json.loads((path / "zarr.json").read_bytes())
    assert root["attributes"] == {"owner": "someone", "daf": [1, 0]}
    assert pydaf.ZarrDaf(path, "r").axis_vector("cell").tolist() == ["A"]


@needs_fixture
@pytest.mark.parametrize("version", [[2, 0], [1, 1], "1.0", [1]])
def test_incompatible_versions_are_refused(tmp_path, version):
    path = tmp_path / "v.daf.zarr"
    shutil.copytree(FIXTURE, path)
    os.chmod(path, 0o755)
    os.chmod(path / "zarr.json", 0o644)
    root = json.loads((path / "zarr.json").read_bytes())
    root["attributes"]["daf"] = version
    (path / "zarr.json").write_text(json.dumps(root))
    with pytest.raises(pydaf.DafFormatError, match=r"incompatible format version|malformed daf version"):
        pydaf.ZarrDaf(path, "r")


def test_zarr_v2_stores_get_julias_hint(tmp_path):
    path = tmp_path / "old.daf.zarr"
    zarr.open_group(str(path), mode="w", zarr_format=2, attributes={"daf": [1, 0]})
    with pytest.raises(pydaf.DafFormatError, match=r"Zarr v2 store at: .*\nDataAxesFormats requires a Zarr v3 store\.\n"
                                                   r"Convert via `python -m zarr v2_to_v3 <path>`"):
        pydaf.open_daf(path)


# Zero-copy.


@pytest.mark.parametrize("variant", VARIANTS)
def test_reads_are_read_only_maps_and_builders_fill_the_file(tmp_path, variant):
    path = variant_path(tmp_path, variant)
    daf = pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    with daf.empty_dense_matrix("cell", "gene", "m", "Float64") as buffer:
        assert is_file_map(buffer) and buffer.flags.writeable and buffer.flags.f_contiguous
        buffer[:, :] = [[1, 2], [3, 4], [5, 6]]
    with daf.empty_sparse_matrix("cell", "gene", "s", "Int8", 2, "Int32") as (colptr, rowval, nzval):
        assert all(is_file_map(array) for array in (colptr, rowval, nzval))
        colptr[:], rowval[:], nzval[:] = [1, 2, 3], [3, 1], [7, -7]
    reader = pydaf.ZarrDaf(path, "r")
    matrix = reader.get_matrix("cell", "gene", "m", relayout=False)
    assert is_file_map(matrix) and not matrix.flags.writeable and matrix.tolist() == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError, match="read-only"):
        matrix[0, 0] = 0
    stored = reader.get_stored_matrix("cell", "gene", "s", relayout=False)
    assert all(is_file_map(array) and not array.flags.writeable for array in (stored.colptr, stored.rowval,
                                                                              stored.nzval))
    assert stored.to_dense().tolist() == [[0, -7], [0, 0], [7, 0]]


# Consolidated metadata (directories).


def consolidated_keys(path: Path) -> list[str]:
    return list(json.loads((path / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"])


def test_consolidated_metadata_is_appended_on_set_and_rebuilt_on_delete(tmp_path):
    path = tmp_path / "c.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "b", [1, 2]).set_scalar("z", 1).set_vector("cell", "a", [3, 4])
    assert consolidated_keys(path) == ["axes", "matrices", "scalars", "vectors", "axes/cell", "matrices/cell",
                                       "scalars/z", "vectors/cell", "matrices/cell/cell", "vectors/cell/a",
                                       "vectors/cell/b"]  # (by depth, then path: zarr-python's reader needs it)
    daf.delete_scalar("z")
    assert consolidated_keys(path) == ["axes", "matrices", "scalars", "vectors", "axes/cell", "matrices/cell",
                                       "vectors/cell", "matrices/cell/cell", "vectors/cell/a", "vectors/cell/b"]
    root = json.loads((path / "zarr.json").read_bytes())
    for key, value in root["consolidated_metadata"]["metadata"].items():
        assert json.loads((path / key / "zarr.json").read_bytes()) == value, key


def test_stale_consolidated_metadata_is_rebuilt_only_by_a_writable_open(tmp_path):
    path = tmp_path / "stale.daf.zarr"
    pydaf.ZarrDaf(path, "w").add_axis("cell", ["A"])
    stale = (path / "zarr.json").read_bytes()
    pydaf.ZarrDaf(path, "r+").set_vector("cell", "age", [1])
    (path / "zarr.json").write_bytes(stale)  # as a writer killed between a node and its listing leaves it
    assert pydaf.ZarrDaf(path, "r").vectors_set("cell") == {"age"}
    assert (path / "zarr.json").read_bytes() == stale  # reading never writes
    pydaf.ZarrDaf(path, "r+")
    assert "vectors/cell/age" in consolidated_keys(path)
    # A listed node removed by hand is damage (tests/test_zarr_round3.py), until its listing is removed too.
    shutil.rmtree(path / "vectors" / "cell" / "age")
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="vectors/cell/age"):
            pydaf.ZarrDaf(path, mode).vectors_set("cell")
    root = json.loads((path / "zarr.json").read_bytes())
    del root["consolidated_metadata"]
    (path / "zarr.json").write_text(json.dumps(root))
    assert pydaf.ZarrDaf(path, "r").vectors_set("cell") == set()
    pydaf.ZarrDaf(path, "r+")
    assert "vectors/cell/age" not in consolidated_keys(path)


# Hostile stores.


def writable_copy(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.daf.zarr"
    shutil.copytree(FIXTURE, path)
    for folder, _, names in os.walk(path):
        os.chmod(folder, 0o755)
        for name in names:
            os.chmod(os.path.join(folder, name), 0o644)
    return path


@pytest.mark.parametrize(("target", "content", "read", "message"), [
    ("vectors/cell/score/zarr.json", b"{not json", "vector", "invalid zarr.json of the vector: score"),
    ("vectors/cell/score/zarr.json", b"[1, 2]", "vector", "is not a Zarr v3 group or array"),
    ("vectors/cell/score/c/0", b"\0" * 23, "vector", "has 23 bytes instead of 24"),
    ("vectors/cell/score/c/0", b"\0" * 25, "vector", "has 25 bytes instead of 24"),
    ("matrices/cell/gene/expr/c/0/0", b"", "matrix", "has 0 bytes instead of 24"),
    ("axes/cell/c/0", b"\x03\0\0\0\x02\0\0\0c1", "axis", "declares 3 entries but stores 10 bytes"),
    ("axes/cell/c/0", b"\x03\0\0\0" + b"\xff\0\0\0" * 3, "axis", "a string running past its end"),
    ("axes/cell/c/0", b"\x03\0\0\0\x02\0\0\0c1\x02\0\0\0c2\x02\0\0\0\xff\xfe", "axis", "invalid UTF-8"),
    ("axes/cell/c/0", b"\x02\0\0\0\x02\0\0\0c1\x02\0\0\0c2\0\0\0\0\0\0\0\0", "axis", "does not hold 3 strings"),
    ("scalars/title/c/0", b"\x01\0\0\0\x05\0\0\0hello!", "scalar", "1 bytes past its last string"),
    ("matrices/cell/gene/sp/colptr/c/0", struct.pack("<3q", 1, 2, 9), "sparse", "are not a 1-based CSC"),
    ("matrices/cell/gene/sp/rowval", None, "sparse", "the node: matrices/cell/gene/sp/rowval"),  # (listed: damage)
])
@needs_fixture
def test_corrupt_stores_give_daf_errors(tmp_path, target, content, read, message):
    path = writable_copy(tmp_path)
    if content is None:
        shutil.rmtree(path / target)
    else:
        (path / target).write_bytes(content)
    daf = pydaf.ZarrDaf(path, "r")
    reads = {"vector": lambda: daf.get_vector("cell", "score"), "axis": lambda: daf.axis_vector("cell"),
             "matrix": lambda: daf.get_matrix("cell", "gene", "expr", relayout=False),
             "scalar": lambda: daf.get_scalar("title"),
             "sparse": lambda: daf.get_matrix("cell", "gene", "sp", relayout=False)}
    with pytest.raises(pydaf.DafFormatError, match=message):
        reads[read]()


@pytest.mark.parametrize(("change", "message"), [
    ({"shape": [4]}, "the Zarr shape: \\[4\\]\nof the vector: score"),
    ({"shape": [-1]}, "invalid shape"),
    ({"shape": [3, 1, 1]}, "invalid shape"),
    ({"data_type": "complex128"}, "unsupported data_type: 'complex128'"),
    ({"data_type": "float16"}, "unsupported data_type"),
    ({"chunk_grid": {"name": "rectilinear"}}, "unsupported chunk_grid"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [0]}}}, "unsupported chunk_grid"),
    ({"codecs": [{"name": "transpose", "configuration": {"order": [0]}}, {"name": "bytes"}]},
     "unsupported codecs"),
    ({"fill_value": "banana"}, "invalid fill_value"),
    ({"node_type": "group"}, "missing zarr.json of the nzind of the vector: score"),
    ({"chunk_key_encoding": {"name": "custom"}}, "unsupported chunk_key_encoding"),
])
@needs_fixture
def test_hostile_array_metadata_is_refused(tmp_path, change, message):
    path = writable_copy(tmp_path)
    metadata = json.loads((path / "vectors/cell/score/zarr.json").read_bytes())
    metadata.update(change)
    (path / "vectors/cell/score/zarr.json").write_text(json.dumps(metadata))
    with pytest.raises(pydaf.DafFormatError, match=message):
        pydaf.ZarrDaf(path, "r").get_vector("cell", "score")


@needs_fixture
def test_a_huge_declared_axis_is_refused_before_any_allocation(tmp_path):
    path = writable_copy(tmp_path)
    for node in ("axes/cell", "vectors/cell/score"):
        metadata = json.loads((path / node / "zarr.json").read_bytes())
        metadata["shape"] = metadata["chunk_grid"]["configuration"]["chunk_shape"] = [1 << 40]
        (path / node / "zarr.json").write_text(json.dumps(metadata))
    (path / "vectors/cell/score/c/0").unlink()  # a missing chunk would be 8 TB of zeros
    daf = pydaf.ZarrDaf(path, "r")
    with pytest.raises(pydaf.DafFormatError, match="declares 1099511627776 entries but stores"):
        daf.get_vector("cell", "score")


@needs_fixture
def test_links_out_of_the_directory_are_refused(tmp_path):
    path = writable_copy(tmp_path)
    outside = tmp_path / "outside"
    outside.write_bytes(np.arange(3.0).tobytes())
    chunk = path / "vectors/cell/score/c/0"
    chunk.unlink()
    chunk.symlink_to(outside)
    (path / "scalars/n").rename(tmp_path / "n_elsewhere")
    (path / "scalars/n").symlink_to(tmp_path / "n_elsewhere")
    daf = pydaf.ZarrDaf(path, "r")
    with pytest.raises(pydaf.DafFormatError, match="is a link out of the directory"):
        daf.get_vector("cell", "score")
    with pytest.raises(pydaf.DafFormatError, match="is a link out of the directory"):
        daf.get_scalar("n")
    inside = path / "vectors/cell/score/c/1"  # a link that stays inside is just another name
    os.rename(outside, inside)
    chunk.unlink()
    chunk.symlink_to(inside)
    assert daf.get_vector("cell", "score").tolist() == [0.0, 1.0, 2.0]


@needs_fixture
@pytest.mark.parametrize("name", ["..", "../x", "a/b", ".hidden", "", "x\0"])
def test_names_never_escape_the_store(tmp_path, name):
    path = writable_copy(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "zarr.json").write_text('{"zarr_format":3,"node_type":"group"}')
    daf = pydaf.ZarrDaf(path, "r+")
    assert not daf.format.format_has_scalar(name) and not daf.format.format_has_axis(name, for_change=False)
    assert not daf.format.format_has_vector("cell", name)
    assert not daf.format.format_has_matrix("cell", "gene", name)


def test_vlen_strings_round_trip():
    values = ["", "a", "naïve – ✓", "line\nbreak", "x" * 300]
    assert decode_strings(encode_strings(values), 5, "test").tolist() == values
    with pytest.raises(pydaf.DafFormatError, match="does not hold 6 strings"):
        decode_strings(encode_strings(values), 6, "test")


# Hostile and truncated archives.


def build_archive(path: str, count: int) -> dict[str, np.ndarray]:
    """An archive with ``count`` vectors, each a batch of its own; returns their values."""
    daf = pydaf.ZarrDaf(path, "w+").add_axis("cell", [f"c{index}" for index in range(50)])
    values = {}
    for index in range(count):
        values[f"v{index}"] = np.arange(50, dtype=np.int64) * (index + 1)
        daf.set_vector("cell", f"v{index}", values[f"v{index}"])
    daf.format.format_close()
    return values


def test_truncated_archives_open_with_what_is_whole(tmp_path):
    path = str(tmp_path / "full.daf.zarr.zip")
    values = build_archive(path, 6)
    data = Path(path).read_bytes()
    for cut in sorted({*range(0, len(data), 97), len(data) - 1, len(data) - 98, len(data) - 99}):
        copy = tmp_path / f"cut{cut}.daf.zarr.zip"
        copy.write_bytes(data[:cut])
        try:
            daf = pydaf.ZarrDaf(copy, "r")
        except pydaf.DafFormatError:
            continue
        found = daf.vectors_set("cell") if daf.has_axis("cell") else set()
        for name in found:
            np.testing.assert_array_equal(daf.get_vector("cell", name), values[name])
        assert copy.read_bytes() == data[:cut]  # a read-only open repairs nothing on disk
        daf.base.format.format_close()
        if cut >= len(data) - 99:  # only the central directory was cut: every property is whole
            assert found == set(values)


@pytest.mark.parametrize("damage", ["garbage", "empty_cd_offset", "bomb", "link", "outside", "method"])
def test_hostile_archives_give_daf_errors(tmp_path, damage):
    path = tmp_path / "bad.daf.zarr.zip"
    if damage == "garbage":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
        with pytest.raises(pydaf.DafFormatError, match="not a ZIP archive"):
            pydaf.ZarrDaf(path, "r")
        return
    build_archive(str(path), 1)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("vectors/cell/v0/zarr.json")
    header = info.header_offset
    data = bytearray(path.read_bytes())
    cd_offset = struct.unpack_from("<Q", data, len(data) - 98 + 48)[0]
    record = data.index(b"PK\x01\x02" + struct.pack("<HH", 0x031E, 45), cd_offset)
    while data[record + 46:record + 46 + len(info.filename)] != info.filename.encode():
        record = data.index(b"PK\x01\x02", record + 4)
    name_length = struct.unpack_from("<H", data, record + 28)[0]
    extra = record + 46 + name_length
    if damage == "empty_cd_offset":
        struct.pack_into("<Q", data, extra + 20, len(data) * 2)  # its local header offset, past the end
        message = "lies outside the archive's data"
    elif damage == "bomb":
        struct.pack_into("<H", data, record + 10, 8)  # DEFLATE, declaring a huge size from a few bytes
        struct.pack_into("<H", data, header + 8, 8)
        struct.pack_into("<Q", data, extra + 4, 1 << 27)  # (under the metadata limit, over DEFLATE's ratio)
        message = "declares 134217728 bytes"
    elif damage == "link":
        struct.pack_into("<I", data, record + 38, 0o120777 << 16)
        message = "is a symbolic link"
    elif damage == "outside":
        struct.pack_into("<Q", data, extra + 12, 1 << 40)  # compressed size past the central directory
        message = "lies outside the archive's data"
    else:
        struct.pack_into("<H", data, record + 10, 93)
        struct.pack_into("<H", data, header + 8, 93)
        message = "unsupported compression method: 93"
    path.write_bytes(bytes(data))
    with pytest.raises(pydaf.DafFormatError, match=message):
        pydaf.ZarrDaf(path, "r").get_vector("cell", "v0")


@needs_fixture
def test_a_stale_consolidated_root_in_an_archive_is_replaced(tmp_path):
    """A zipped directory (its root zarr.json with consolidated metadata) loses it on a writable open (Julia's
    ``strip_zarr_zip_consolidated_metadata!``): the old entry leaves the central directory."""
    path = tmp_path / "zipped.daf.zarr.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files_of(FIXTURE).items():
            archive.writestr(name, data)
    daf = pydaf.ZarrDaf(path, "r+")
    assert daf.get_matrix("cell", "gene", "expr").tolist() == [[1, 2], [3, 4], [5, 6]]  # (deflated, copied)
    daf.set_scalar("more", 1.5)
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert archive.namelist().count("zarr.json") == 1
        assert "consolidated_metadata" not in json.loads(archive.read("zarr.json"))
    assert pydaf.ZarrDaf(path, "r").get_scalar("more") == 1.5


# Processes: writer locks and kills.


def run_child(code: str, *arguments: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *arguments], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
                          check=False)


@pytest.mark.parametrize("variant", ["directory", "zip"])
def test_one_writing_process_at_a_time(tmp_path, variant, monkeypatch):
    path = variant_path(tmp_path, variant)
    writer = pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A"])
    code = ("import sys, pydaf\nfrom pydaf._os import locks\nlocks.LOCK_WAIT_SECONDS = 0.2\n"
            "try:\n    pydaf.ZarrDaf(sys.argv[1], 'r+')\nexcept pydaf.DafLockedError as error:\n    print('locked', "
            "error)\nprint(pydaf.ZarrDaf(sys.argv[1], 'r').axis_vector('cell').tolist())")
    result = run_child(code, path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("locked can't write the") and "['A']" in result.stdout
    assert f"while another process has it open (pid: {os.getpid()})" in result.stdout  # (the holder: this process)
    writer.format.format_close()
    del writer
    gc.collect()
    result = run_child(code, path)
    assert result.returncode == 0 and "locked" not in result.stdout, result.stdout + result.stderr


KILLS = round(soak(100, 6))  # tests/soak.py: 100 at PYDAF_SOAK=1

_KILLED_WRITER = """
import sys, numpy as np, pydaf
path, log = sys.argv[1], open(sys.argv[2], "a")
daf = getattr(pydaf, sys.argv[3])(path, "w+")
if not daf.has_axis("cell"):
    daf.add_axis("cell", [f"c{index}" for index in range(20000)])
index = len(daf.vectors_set("cell"))
while True:
    name = f"v{index}"
    if index % 3 == 0:
        daf.set_vector("cell", name, np.full(20000, index, dtype=np.int64))
    elif index % 3 == 1:
        with daf.empty_dense_vector("cell", name, "Int64") as buffer:
            buffer[:] = index
    else:
        nnz = 1 + index % 50
        with daf.empty_sparse_vector("cell", name, "Int64", nnz, "Int64") as (nzind, nzval):
            nzind[:] = np.arange(1, nnz + 1)
            nzval[:] = index
    print(name, file=log, flush=True)
    index += 1
"""


def kill_a_writer(format_type: type, path: str, log: Path, rng: np.random.Generator, *, archive: bool) -> set[str]:
    """Start a process appending vectors to a ``format_type`` data set (``_KILLED_WRITER``) and SIGKILL it at a
    random moment; check that every vector it committed before the kill reads back whole through a read-only open,
    which (for an ``archive``) writes nothing; returns the vectors found."""
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, path, str(log), format_type.__name__],
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    deadline = time.monotonic() + 120
    while not log.exists() or len(log.read_text().split()) < 2:
        assert time.monotonic() < deadline and child.poll() is None, "the writer did not start"
        time.sleep(0.01)
    time.sleep(rng.uniform(0, 0.3))
    child.send_signal(signal.SIGKILL)
    child.wait()
    committed = set(log.read_text().split())
    before = Path(archive_of(path)).read_bytes() if archive else None
    reader = format_type(path, "r")
    found = reader.vectors_set("cell")
    # (the writer may have been killed after its commit, before it logged it)
    assert committed <= found and len(found - committed) <= 1, (sorted(committed), sorted(found))
    log.write_text("".join(f"{name}\n" for name in sorted(found)))
    for name in found:
        index = int(name[1:])
        expected = np.zeros(20000, np.int64)
        expected[:1 + index % 50 if index % 3 == 2 else 20000] = index
        np.testing.assert_array_equal(reader.get_vector("cell", name), expected, err_msg=name)
    if before is not None:
        assert Path(archive_of(path)).read_bytes() == before  # the read-only open wrote nothing
    reader.base.format.format_close()
    return found


@pytest.mark.parametrize("variant", ["zip", "zip_group", "directory"])
def test_a_writer_killed_mid_append_loses_nothing_earlier(tmp_path, variant):
    """SIGKILL a process appending properties at random moments; every property it committed before the kill reads
    back whole (a read-only open recovers in memory, without writing), and a writable open repairs the archive."""
    path = variant_path(tmp_path, variant)
    rng = np.random.default_rng(42)
    for _ in range(KILLS):
        found = kill_a_writer(pydaf.ZarrDaf, path, tmp_path / "committed.log", rng, archive=variant != "directory")
        writer = pydaf.ZarrDaf(path, "r+")  # repairs
        assert writer.vectors_set("cell") == found
        writer.format.format_close()
        if variant != "directory":
            with zipfile.ZipFile(archive_of(path)) as archive:
                assert archive.testzip() is None
        else:
            assert not [name for name in files_of(path) if ".pydaf-" in name]
            root = json.loads(Path(path, "zarr.json").read_bytes())
            assert {key.rpartition("/")[2] for key in root["consolidated_metadata"]["metadata"]
                    if key.startswith("vectors/cell/") and key.count("/") == 2} == found


@pytest.mark.parametrize(("component", "data_type", "message"), [
    ("colptr", "float64", r"(?s)the colptr of the matrix: sp\n.*is not a vector of integers \(it is float64"),
    ("nzval", "string", r"(?s)the nzval of the matrix: sp\n.*is not a vector of numbers \(it is String"),
])
@needs_fixture
def test_sparse_components_of_the_wrong_type_are_refused(tmp_path, component, data_type, message):
    path = writable_copy(tmp_path)
    node = path / "matrices/cell/gene/sp" / component
    metadata = json.loads((node / "zarr.json").read_bytes())
    metadata["data_type"] = data_type
    if data_type == "string":
        metadata["codecs"], metadata["fill_value"] = [{"name": "vlen-utf8", "configuration": {}}], ""
    (node / "zarr.json").write_text(json.dumps(metadata))
    with pytest.raises(pydaf.DafFormatError, match=message):
        pydaf.ZarrDaf(path, "r").get_matrix("cell", "gene", "sp", relayout=False)


def test_a_read_only_open_leaves_what_a_killed_writer_left(tmp_path):
    """Only a writable open cleans up (and puts back a node renamed aside for an overwrite); a read-only open reads
    the committed value through the backup (issue 25, class 6/8), and changes nothing."""
    path = tmp_path / "left.daf.zarr"
    pydaf.ZarrDaf(path, "w").add_axis("cell", ["A"]).set_vector("cell", "age", [1])
    os.rename(path / "vectors/cell/age", path / "vectors/cell/.age.pydaf-backup")  # killed mid-overwrite
    (path / "vectors/cell/.new.pydaf-tmp-1-1").mkdir()
    before = files_of(path)
    reader = pydaf.ZarrDaf(path, "r")
    assert reader.vectors_set("cell") == {"age"} and reader.get_vector("cell", "age").tolist() == [1]
    assert files_of(path) == before
    reader.base.format.format_close()
    writer = pydaf.ZarrDaf(path, "r+")
    assert writer.get_vector("cell", "age").tolist() == [1]
    assert sorted(os.listdir(path / "vectors/cell")) == ["age", "zarr.json"]


def test_benchmark_script_end_to_end(tmp_path, capsys):
    from .benchmark_scripts import load_benchmark

    bench = load_benchmark("bench_zarr")
    assert bench.main(["--dir", str(tmp_path), "--cells", "300", "--genes", "40", "--runs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()  # (the speed targets are the real run's, not a test's)
    assert [line.split()[0] for line in lines[-7:-2]] == ["zarr", "zarr_zip", "zip", "h5df", "files"]
    assert all(line.split()[-2] == "yes" for line in lines[-7:-2]) and lines[-1] == "equal: yes"
    assert os.listdir(tmp_path) == []


_KILLED_REWRITER = """
import sys, numpy as np, pydaf
path = sys.argv[1]
daf = pydaf.ZarrDaf(path, "w+")
if not daf.has_axis("cell"):
    daf.add_axis("cell", [f"c{index}" for index in range(100000)])
print("ready", flush=True)
rng = np.random.default_rng(int(sys.argv[2]))
while True:
    name, value = f"v{rng.integers(4)}", int(rng.integers(1, 1000))
    kind = rng.integers(4)
    if kind == 0:
        daf.set_vector("cell", name, np.full(100000, value, dtype=np.int32), overwrite=True)
    elif kind == 1:
        with daf.empty_dense_vector("cell", name, "Int32", overwrite=True) as buffer:
            buffer[:] = value
    elif kind == 2:
        daf.set_vector("cell", name, pydaf.SparseVector(100000, np.arange(1, 100001, dtype=np.int64),
                                                        np.full(100000, value, dtype=np.int32)), overwrite=True)
    else:
        daf.delete_vector("cell", name, must_exist=False)
"""


def test_a_directory_writer_killed_mid_overwrite_keeps_whole_properties(tmp_path):
    """SIGKILL a process overwriting and deleting vectors of a directory: each vector is always one whole value (old
    or new), and a writable open leaves no temporaries or backups and consolidated metadata matching the tree."""
    path = variant_path(tmp_path, "directory")
    rng = np.random.default_rng(7)
    for round_ in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", _KILLED_REWRITER, path, str(round_)], stdout=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 1.0))
        child.send_signal(signal.SIGKILL)
        child.wait()
        reader = pydaf.ZarrDaf(path, "r")
        for name in reader.vectors_set("cell"):
            values = reader.get_vector("cell", name)
            assert values.shape == (100000,) and (values == values[0]).all() and values[0] > 0, name
        writer = pydaf.ZarrDaf(path, "r+")
        assert not [name for name in files_of(path) if ".pydaf-" in name]
        root = json.loads(Path(path, "zarr.json").read_bytes())
        assert {key.rpartition("/")[2] for key in root["consolidated_metadata"]["metadata"]
                if key.startswith("vectors/cell/") and key.count("/") == 2} == writer.vectors_set("cell")
        writer.format.format_close()
