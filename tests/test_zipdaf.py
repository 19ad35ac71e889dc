"""ZipDaf (``.daf.zip``, ``.dafs.zip#/group``): FilesDaf entries byte for byte, Julia's framing (STORED, 8-aligned,
readable by ``zipfile`` and ``unzip -t`` after every write), zero-copy maps, Julia's FilesDaf fixtures zipped, paths,
modes, append-only refusals, hostile archives, and writers killed with SIGKILL. (Every shared test also runs on both
variants: ``conftest.BACKENDS``.)"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.formats.zip.zipdaf import split_zip_path
from pydaf.testing.conformance import is_file_map

from .julia_examples import FIXTURES
from .test_zarr import KILLS, archive_of, files_of, kill_a_writer

FILES_FIXTURES = [FIXTURES / "julia" / name for name in ("files-v1.0", "files-v1.1", "example-cells.files")]
VARIANTS = ["zip", "zip_group"]


def dense(value: object) -> np.ndarray:
    if sp.issparse(value):
        return value.toarray()
    return np.asarray(value)


def assert_same_data(expected: pydaf.DafReader, actual: pydaf.DafReader) -> None:
    """The two data sets hold the same properties, with the same element types, values and sparsity."""
    assert actual.scalars_set() == expected.scalars_set()
    for name in expected.scalars_set():
        assert actual.get_scalar(name) == expected.get_scalar(name), name
        assert type(actual.get_scalar(name)) is type(expected.get_scalar(name)), name
    assert actual.axes_set() == expected.axes_set()
    for axis in expected.axes_set():
        assert actual.axis_vector(axis).tolist() == expected.axis_vector(axis).tolist(), axis
        assert actual.vectors_set(axis) == expected.vectors_set(axis), axis
        for name in expected.vectors_set(axis):
            left, right = expected.get_vector(axis, name), actual.get_vector(axis, name)
            assert left.dtype == right.dtype and left.tolist() == right.tolist(), (axis, name)
    for rows_axis in expected.axes_set():
        for columns_axis in expected.axes_set():
            names = expected.matrices_set(rows_axis, columns_axis, relayout=False)
            assert actual.matrices_set(rows_axis, columns_axis, relayout=False) == names
            for name in names:
                left = expected.get_matrix(rows_axis, columns_axis, name, relayout=False)
                right = actual.get_matrix(rows_axis, columns_axis, name, relayout=False)
                assert sp.issparse(left) == sp.issparse(right) and left.dtype == right.dtype, name
                assert dense(left).tolist() == dense(right).tolist(), (rows_axis, columns_axis, name)


def variant_path(tmp_path: Path, variant: str, stem: str = "data") -> str:
    return {"zip": f"{tmp_path}/{stem}.daf.zip", "zip_group": f"{tmp_path}/{stem}.dafs.zip#/cells/raw"}[variant]


def content(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Every kind of property FilesDaf stores: dense, sparse, strings (dense and sparse), Bool, fills, builders."""
    daf.set_scalar("title", "zipped!").set_scalar("pi", 3.25).set_scalar("flag", True)
    daf.add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_vector("cell", "age", np.array([1.5, 2.5, 3.5, 4.5]))
    daf.set_vector("cell", "donor", ["d1", "d2", "d1", "d3"])
    daf.set_vector("cell", "rare", ["", "", "", "long text"])
    daf.set_vector("cell", "mask", np.array([True, False, True, False]))
    daf.set_vector("cell", "zero", 0)
    daf.set_vector("gene", "sparse", sp.csc_array(np.array([[0.0], [2.0], [0.0]]))[:, [0]].toarray()[:, 0])
    daf.set_vector("gene", "fill", np.int32(7))
    with daf.empty_dense_vector("gene", "built", "UInt16") as buffer:
        buffer[:] = [3, 2, 1]
    with daf.empty_sparse_vector("cell", "built_sparse", "Float32", 2, "UInt32") as (nzind, nzval):
        nzind[:] = [2, 4]
        nzval[:] = [0.5, 0.25]
    daf.set_matrix("cell", "gene", "dense", np.arange(12, dtype=np.int64).reshape(4, 3))
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 1, 0], [2, 0, 0], [0, 0, 3], [4, 0, 0]],
                                                                     dtype=np.uint8)))
    daf.set_matrix("gene", "cell", "labels", np.array([["a", "b", "c", "d"]] * 3, dtype=object), relayout=False)
    with daf.empty_sparse_matrix("gene", "gene", "net", "Float64", 2, "Int64") as (colptr, rowval, nzval):
        colptr[:] = [1, 2, 2, 3]
        rowval[:] = [3, 1]
        nzval[:] = [0.5, 1.5]
    return daf


def test_entries_hold_the_files_daf_bytes(tmp_path):
    """Writing the same content to a FilesDaf directory and a ZipDaf archive gives the same files (the directory's
    own metadata.json and lock aside)."""
    directory = str(tmp_path / "data.daf")
    content(pydaf.FilesDaf(directory, "w"))
    archive = str(tmp_path / "data.daf.zip")
    content(pydaf.ZipDaf(archive, "w")).format.format_close()
    expected = {name: data for name, data in files_of(directory).items()
                if name not in ("metadata.json", ".daf.lock")}
    with zipfile.ZipFile(archive) as opened:
        assert opened.testzip() is None
        entries = {name: opened.read(name) for name in opened.namelist()}
        assert not [name for name in opened.namelist() if name.endswith("/")]  # no directory entries
    assert entries == expected


def test_unzipping_gives_a_files_daf_and_zipping_one_gives_a_zip_daf(tmp_path):
    archive = tmp_path / "data.daf.zip"
    content(pydaf.ZipDaf(archive, "w")).format.format_close()
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(tmp_path / "unzipped.daf")
    zipped = pydaf.ZipDaf(archive, "r")
    assert_same_data(pydaf.FilesDaf(tmp_path / "unzipped.daf", "r"), zipped)
    # A FilesDaf directory zipped (deflated, with its metadata.json): read (copies), and a writable open strips the
    # stale index from the central directory, as Julia's strip_files_daf_sidecars!.
    rezipped = tmp_path / "rezipped.daf.zip"
    shutil.make_archive(str(rezipped)[:-len(".zip")], "zip", tmp_path / "unzipped.daf")
    with zipfile.ZipFile(rezipped, "a") as opened:
        opened.writestr("metadata.json", b"{}")
    assert_same_data(zipped, pydaf.ZipDaf(rezipped, "r"))
    writer = pydaf.ZipDaf(rezipped, "r+")
    writer.set_scalar("more", 1)
    writer.format.format_close()
    with zipfile.ZipFile(rezipped) as opened:
        assert opened.testzip() is None and "metadata.json" not in opened.namelist()
    assert pydaf.ZipDaf(rezipped, "r").get_scalar("more") == 1


@pytest.mark.parametrize("fixture", FILES_FIXTURES, ids=lambda path: path.name)
@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_julias_files_fixtures_zipped_read_exactly(tmp_path, fixture, method):
    if not fixture.is_dir():
        pytest.skip(f"the Julia fixture is not at {fixture}")
    archive = tmp_path / "fixture.daf.zip"
    with zipfile.ZipFile(archive, "w", compression=method) as opened:
        for name, data in sorted(files_of(fixture).items()):
            opened.writestr(name, data)
    assert_same_data(pydaf.FilesDaf(fixture, "r"), pydaf.ZipDaf(archive, "r"))


def check_framing(path: str) -> None:
    """Julia's framing: every entry STORED, its data at a multiple of 8; ``zipfile`` (and ``unzip -t``) check it."""
    with zipfile.ZipFile(path) as opened:
        assert opened.testzip() is None
        for info in opened.infolist():
            assert info.compress_type == zipfile.ZIP_STORED and info.flag_bits & 0x0800
            with open(path, "rb") as handle:
                handle.seek(info.header_offset)
                header = handle.read(30)
            name_length, extra_length = struct.unpack_from("<HH", header, 26)
            assert (info.header_offset + 30 + name_length + extra_length) % 8 == 0, info.filename
    if shutil.which("unzip"):
        result = subprocess.run(["unzip", "-tq", path], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_archive_is_valid_after_every_write(tmp_path, variant):
    path = variant_path(tmp_path, variant)
    daf = pydaf.ZipDaf(path, "w+")
    check_framing(archive_of(path))
    original = daf.format.format_set_vector

    def set_and_check(*arguments: object) -> None:
        original(*arguments)
        check_framing(archive_of(path))

    daf.format.format_set_vector = set_and_check  # (an instance attribute: this handle only)
    content(daf)
    check_framing(archive_of(path))


@pytest.mark.parametrize("variant", VARIANTS)
def test_reads_are_read_only_maps_and_builders_fill_the_archive(tmp_path, variant):
    path = variant_path(tmp_path, variant)
    daf = content(pydaf.ZipDaf(path, "w+"))
    daf.format.format_close()
    reader = pydaf.ZipDaf(path, "r")
    for vector in (reader.get_vector("cell", "age"), reader.get_vector("gene", "built"),
                   reader.get_matrix("cell", "gene", "dense", relayout=False)):
        assert is_file_map(vector) and not vector.flags.writeable
    umis = reader.get_matrix("cell", "gene", "UMIs", relayout=False)
    assert is_file_map(umis.data) and not umis.data.flags.writeable  # (scipy's indices are 0-based copies)
    assert reader.get_vector("gene", "built").tolist() == [3, 2, 1]
    assert reader.get_matrix("gene", "gene", "net", relayout=False).toarray().tolist() == [
        [0, 0, 1.5], [0, 0, 0], [0.5, 0, 0]]


def test_paths_and_the_registry(tmp_path):
    assert split_zip_path("x.dafs.zip#/a/b") == ("x.dafs.zip", "a/b")
    for path, message in [("x.daf.zip#/a", "can't address a sub-daf in a singular ZipDaf path"),
                          ("x.dafs.zip", "missing '#/<group>' in plural ZipDaf path"),
                          ("x.dafs.zip#/", "empty group name after '#/' in ZipDaf path"),
                          ("x.dafs.zip#/a/../b", "invalid group name"),
                          ("x.zip", "can't parse as ZipDaf path")]:
        with pytest.raises(pydaf.DafFormatError, match=message):
            pydaf.ZipDaf(f"{tmp_path}/{path}", "w+")
    path = str(tmp_path / "picked.daf.zip")
    assert type(pydaf.open_daf(path, "w")).__name__ == "ZipDaf"
    assert type(pydaf.open_daf(f"{tmp_path}/many.dafs.zip#/g", "w+")).__name__ == "ZipDaf"
    assert pydaf.open_daf(path).base.format.type_name == "ZipDaf"
    assert "ZipDaf" in [entry.name for entry in pydaf.formats.registry.registered_formats()]


@pytest.mark.parametrize("variant", VARIANTS)
def test_modes(tmp_path, variant):
    path = variant_path(tmp_path, variant)
    with pytest.raises(pydaf.DafFormatError, match="no such file"):
        pydaf.ZipDaf(path, "r+")
    pydaf.ZipDaf(path, "w+").add_axis("cell", ["A"]).format.format_close()
    reader = pydaf.ZipDaf(path, "r")
    assert not hasattr(reader, "set_scalar") and reader.axis_vector("cell").tolist() == ["A"]
    assert "type: ZipDaf" in reader.base.description()
    if variant == "zip_group":
        with pytest.raises(pydaf.DafModeError, match="can't truncate a sub-daf inside a ZipDaf"):
            pydaf.ZipDaf(path, "w")
        with pytest.raises(pydaf.DafFormatError, match="not a daf data set"):
            pydaf.ZipDaf(path.replace("cells/raw", "other"), "r")
    else:
        truncated = pydaf.ZipDaf(path, "w")
        assert truncated.axes_set() == set()
        assert reader.axis_vector("cell").tolist() == ["A"]  # (an open reader keeps the old archive)


@pytest.mark.parametrize("variant", VARIANTS)
def test_deletes_and_overwrites_are_refused(tmp_path, variant):
    daf = content(pydaf.ZipDaf(variant_path(tmp_path, variant), "w+"))
    before = Path(archive_of(variant_path(tmp_path, variant))).read_bytes()
    for call, message in [(lambda: daf.delete_scalar("pi"), "can't delete the scalar: pi"),
                          (lambda: daf.set_scalar("pi", 1.0, overwrite=True), "can't overwrite the scalar: pi"),
                          (lambda: daf.delete_axis("gene"), "can't delete the axis: gene"),
                          (lambda: daf.delete_vector("cell", "age"), "can't delete the vector: age"),
                          (lambda: daf.set_vector("cell", "age", 1.0, overwrite=True), "can't overwrite the vector"),
                          (lambda: daf.delete_matrix("cell", "gene", "dense"), "can't delete the matrix: dense")]:
        with pytest.raises(pydaf.DafAppendOnlyError, match=f"ZipDaf is append-only; {message}"):
            call()
    assert Path(archive_of(variant_path(tmp_path, variant))).read_bytes() == before
    assert daf.get_scalar("pi") == 3.25


@pytest.mark.parametrize("version", [b'{"version":[2,0]}\n', b'{"version":[1,2]}\n', b'{"version":"1"}', b"[1"])
def test_incompatible_versions_are_refused(tmp_path, version):
    path = tmp_path / "v.daf.zip"
    with zipfile.ZipFile(path, "w") as opened:
        opened.writestr("daf.json", version)
    with pytest.raises(pydaf.DafFormatError, match=r"incompatible format version|invalid daf\.json|invalid JSON"):
        pydaf.ZipDaf(path, "r")


def archive_with(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as opened:
        opened.writestr("daf.json", b'{"version":[1,1]}\n')
        opened.writestr("axes/cell.txt", b"A\nB\n")
        for name, data in entries.items():
            opened.writestr(name, data)
    return path


@pytest.mark.parametrize(("entries", "read", "message"), [
    ({"scalars/x.json": b"{nope"}, "scalar", "invalid JSON in the descriptor of the scalar: x"),
    ({"scalars/x.json": b'{"type":"Int8","value":300}'}, "scalar", "invalid value: 300"),
    ({"vectors/cell/v.json": b'{"format":"dense","eltype":"Float64"}\n', "vectors/cell/v.data": b"\0" * 15},
     "vector", "has 15 bytes instead of 16"),
    ({"vectors/cell/v.json": b'{"format":"dense","eltype":"Float64"}\n'}, "vector", "missing ZIP entry"),
    ({"vectors/cell/v.json": b'{"format":"dense","eltype":"Complex"}\n'}, "vector", "invalid element type"),
    ({"vectors/cell/v.json": b'{"format":"dense","eltype":"String"}\n', "vectors/cell/v.txt": b"a\n"}, "vector",
     "has 1 lines instead of 2"),
    ({"vectors/cell/v.json": b'{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":9}}\n',
      "vectors/cell/v.nzind": b"\1" + b"\0" * 7}, "vector", "has 8 bytes instead of 72"),
    ({"vectors/cell/v.json": b'{"format":"dense","eltype":"Float64","packed_format":"indexed+zipped"}\n'},
     "vector", "packed"),
    ({"matrices/cell/cell/m.json": b'{"format":"sparse","colptr":{"format":"dense","eltype":"Int64","n_elements":3},'
      b'"rowval":{"format":"dense","eltype":"Int64","n_elements":1}}\n',
      "matrices/cell/cell/m.colptr": np.array([1, 1, 9], np.int64).tobytes(),
      "matrices/cell/cell/m.rowval": np.array([1], np.int64).tobytes()}, "matrix", "colptr from 1 to 9"),
    ({"scalars/x.json": b"[" * 100000}, "scalar", "invalid JSON"),
])
def test_corrupt_entries_give_daf_errors_naming_the_property(tmp_path, entries, read, message):
    daf = pydaf.ZipDaf(archive_with(tmp_path / "bad.daf.zip", entries), "r")
    with pytest.raises(pydaf.DafFormatError, match=message):
        if read == "scalar":
            daf.get_scalar("x")
        elif read == "vector":
            daf.get_vector("cell", "v")
        else:
            daf.get_matrix("cell", "cell", "m", relayout=False)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "link", "outside"])
def test_hostile_archives_give_daf_errors(tmp_path, damage):
    path = tmp_path / "bad.daf.zip"
    daf = pydaf.ZipDaf(path, "w").add_axis("cell", ["A", "B"]).set_vector("cell", "v", [1, 2])
    daf.format.format_close()
    data = bytearray(path.read_bytes())
    if damage == "garbage":
        data = bytearray(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    elif damage == "truncated":
        data = data[:20]
    elif damage == "empty":
        data = bytearray()
    else:
        with zipfile.ZipFile(path) as opened:
            info = opened.getinfo("vectors/cell/v.data")
        cd_offset = struct.unpack_from("<Q", data, len(data) - 98 + 48)[0]
        record = data.index(b"PK\x01\x02", cd_offset)
        while data[record + 46:record + 46 + len(info.filename)] != info.filename.encode():
            record = data.index(b"PK\x01\x02", record + 4)
        if damage == "link":
            struct.pack_into("<I", data, record + 38, 0o120777 << 16)
        else:
            extra = record + 46 + len(info.filename)
            struct.pack_into("<Q", data, extra + 12, 1 << 40)
    path.write_bytes(bytes(data))
    with pytest.raises(pydaf.DafError):
        pydaf.ZipDaf(path, "r").get_vector("cell", "v")


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "a\\b", "nul\0"])
def test_names_never_escape_the_data_set(tmp_path, name):
    daf = pydaf.ZipDaf(tmp_path / "names.daf.zip", "w").add_axis("cell", ["A"])
    with pytest.raises(pydaf.DafError):
        daf.set_scalar(name, 1)
    with pytest.raises(pydaf.DafError):
        daf.set_vector("cell", name, [1])
    assert daf.scalars_set() == set() and daf.vectors_set("cell") == set()
    with zipfile.ZipFile(tmp_path / "names.daf.zip") as opened:
        assert opened.namelist() == ["daf.json", "axes/cell.txt"]


def test_a_read_only_open_of_another_process_sees_committed_properties(tmp_path):
    path = str(tmp_path / "shared.daf.zip")
    writer = pydaf.ZipDaf(path, "w").add_axis("cell", ["A", "B"]).set_vector("cell", "v", [1, 2])
    code = "import sys, pydaf\nprint(pydaf.ZipDaf(sys.argv[1], 'r').get_vector('cell', 'v').tolist())"
    result = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=False,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "[1, 2]", result.stderr
    writer.format.format_close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_writer_killed_mid_append_loses_nothing_earlier(tmp_path, variant):
    """SIGKILL a process appending properties at random moments; every property it committed before the kill reads
    back whole (a read-only open recovers in memory, without writing), and a writable open repairs the archive."""
    path = variant_path(tmp_path, variant)
    rng = np.random.default_rng(13)
    for _ in range(KILLS):
        found = kill_a_writer(pydaf.ZipDaf, path, tmp_path / "committed.log", rng, archive=True)
        writer = pydaf.ZipDaf(path, "r+")  # repairs
        assert writer.vectors_set("cell") == found
        writer.format.format_close()
        check_framing(archive_of(path))


_KILLED_AFTER_THE_DESCRIPTOR = """
import os, signal, sys, numpy as np
import pydaf
daf = pydaf.ZipDaf(sys.argv[1], "w").add_axis("cell", ["A", "B"])
appended = daf.format.store.append
def append():
    batch = appended()
    commit = batch.commit
    def killed():  # the descriptor is appended (complete, CRC-checked); the central directory is not
        os.kill(os.getpid(), signal.SIGKILL)
    batch.commit = killed
    return batch
daf.format.store.append = append
with daf.empty_sparse_vector("cell", "v", "Int64", 2, "Int64") as (nzind, nzval):
    nzind[:] = [1, 2]
    nzval[:] = [7, 8]
"""


def test_a_builder_killed_between_its_descriptor_and_its_commit_recovers_whole(tmp_path):
    """A builder's reserved entries get their CRCs before its descriptor is appended, so an archive whose writer was
    killed right after the descriptor (the commit entry: recovery keeps the property) has correct CRCs throughout."""
    path = str(tmp_path / "killed.daf.zip")
    child = subprocess.run([sys.executable, "-c", _KILLED_AFTER_THE_DESCRIPTOR, path], check=False, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert child.returncode == -signal.SIGKILL
    reader = pydaf.ZipDaf(path, "r")
    assert reader.get_vector("cell", "v").tolist() == [7, 8]
    reader.base.format.format_close()
    pydaf.ZipDaf(path, "r+").format.format_close()  # (rewrites the central directory)
    check_framing(path)
