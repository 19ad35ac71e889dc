"""ZarrDaf under issue 25 (reliability, round 2), in directories and ZIP archives (``x.daf.zarr.zip``,
``x.dafs.zarr.zip#/group``):

- class 4: a FIFO, socket, device or folder planted where a ``zarr.json``, a chunk, a shard or other metadata is
  expected never blocks a reader or a writer (each probe runs in a child process with a timeout);
- class 5: declared sizes (elided chunks, sparse lengths, chunk shapes) are checked before anything is allocated (the
  probes run in a child process limited to 3 GB of address space, so an allocation shows as a failure);
- class 6/8: after a writer is SIGKILLed in the middle of overwrites and deletes, a read-only open in another process,
  and a conversion of the data set, see every property's old or new value, never a missing one;
- class 9: every name is checked against ZarrDaf's limits before anything is written, and every value is stored
  exactly or refused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import pydaf
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.interop.convert import convert

from .soak import soak

ROOT = Path(__file__).resolve().parent.parent
KILLS = round(soak(100, 10))  # tests/soak.py: 100 kills at PYDAF_SOAK=1


def run_child(code: str, *args: str, timeout: float = 60) -> list[dict]:
    """Run ``code`` in a new Python process (importing this checkout's pydaf); the JSON objects it prints, one a line.
    A child that hangs past ``timeout`` or dies fails the test, naming the last probe it reported."""
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired as error:
        output = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        pytest.fail(f"the child hung (killed after {timeout} s); its last reports:\n{output[-2000:]}")
    assert done.returncode == 0, f"the child died ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def zip_directory(folder: Path, archive: Path, prefix: str = "") -> None:
    """A ZIP archive (STORED) of a directory data set, at its root or under ``prefix`` (a group)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as output:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                output.write(path, prefix + path.relative_to(folder).as_posix())


# The child's side: a small data set of every kind of property, and a reader of all of it.

_COMMON = r"""
import json, os, sys, resource, shutil, socket, zipfile
import numpy as np, pydaf
import pydaf._os.locks as locks
from pydaf.interop.convert import convert
from pydaf import SparseMatrixCSC, SparseVector
locks.LOCK_WAIT_SECONDS = 0.5

def build(path):
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["x", "y"])
    daf.set_scalar("n", 7).set_scalar("s", "text")
    daf.set_vector("cell", "age", [1, 2, 3]).set_vector("cell", "kind", ["a", "b", "c"])
    daf.set_vector("cell", "sp", SparseVector(3, np.array([2]), np.array([1.5])))
    daf.set_matrix("cell", "gene", "m", np.arange(6.0).reshape(3, 2))
    daf.set_matrix("cell", "gene", "csc", SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 3]),
                                                            np.array([4.0, 5.0])))
    return daf

def read_all(daf):
    for name in sorted(daf.scalars_set()):
        daf.get_scalar(name)
    for axis in sorted(daf.axes_set()):
        daf.axis_vector(axis)
        for name in sorted(daf.vectors_set(axis)):
            np.asarray(daf.get_vector(axis, name))
        for other in sorted(daf.axes_set()):
            for name in sorted(daf.matrices_set(axis, other, relayout=False)):
                daf.get_matrix(axis, other, name, relayout=False)

def outcome(action):
    try:
        action()
        return "ok"
    except pydaf.DafError as error:
        return type(error).__name__ + ": " + str(error).splitlines()[0]
    except BaseException as error:
        return "UNTYPED " + type(error).__name__ + ": " + str(error)[:300]

def report(**fields):
    print(json.dumps(fields), flush=True)

def zip_directory(folder, archive, prefix=""):
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as output:
        for base, _, files in sorted(os.walk(folder)):
            for name in sorted(files):
                full = os.path.join(base, name)
                output.write(full, prefix + os.path.relpath(full, folder))
"""

# Class 4: non-regular files planted where ZarrDaf reads one.

_PLACES = ["zarr.json", ".zgroup", ".zattrs", "scalars/zarr.json", "scalars/n/zarr.json", "scalars/n/c/0",
           "scalars/s/c/0", "axes/cell/zarr.json", "axes/cell/c/0", "vectors/cell/zarr.json",
           "vectors/cell/age/zarr.json", "vectors/cell/age/c/0", "vectors/cell/kind/c/0",
           "vectors/cell/sp/zarr.json", "vectors/cell/sp/nzind/c/0", "vectors/cell/sp/nzval/zarr.json",
           "vectors/cell/sp/nzval/c/0", "matrices/cell/gene/m/c/0/0", "matrices/cell/gene/csc/colptr/c/0",
           "matrices/cell/gene/csc/rowval/c/0", "matrices/cell/gene/csc/nzval/c/0",
           "matrices/cell/gene/csc/nzval/zarr.json", "matrices/cell/gene/csc/nzval", "vectors/cell/sp/nzval",
           "shard", "split chunk"]

#: A place of each kind of read: the root's and the v2 markers, a node's metadata, a mapped chunk, a read chunk (scalar,
#: strings, axis), a sparse component, an nzval node, a split array's chunk.
_SOME_PLACES = ["zarr.json", ".zgroup", "scalars/n/zarr.json", "scalars/n/c/0", "axes/cell/zarr.json", "axes/cell/c/0",
                "vectors/cell/age/c/0", "vectors/cell/kind/c/0", "matrices/cell/gene/csc/rowval/c/0",
                "matrices/cell/gene/csc/nzval", "split chunk"]

_HANG_PROBES = _COMMON + r"""
folder, kind = sys.argv[1], sys.argv[2]
places = json.loads(sys.argv[3])

def plant(target):
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target)
    elif os.path.lexists(target):
        os.remove(target)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        here = os.getcwd()
        os.chdir(os.path.dirname(target))  # (a socket's path is short: at most 107 bytes)
        try:
            server.bind(os.path.basename(target))  # (bound, never listening: kept open, as a live socket file)
        finally:
            os.chdir(here)
        globals().setdefault("sockets", []).append(server)
    elif kind == "directory":
        os.mkdir(target)
    elif kind == "device":
        os.mknod(target, 0o666 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers: a read never ends
    elif kind == "loop":
        os.symlink(os.path.basename(target), target)  # (a link to itself)

template = os.path.join(folder, "template.daf.zarr")
build(template).format.format_close()
for index, place in enumerate(places):
    path = os.path.join(folder, f"p{index}.daf.zarr")
    shutil.copytree(template, path)
    node = os.path.join(path, "vectors", "cell", "age")
    if place == "shard":  # a sharded array, its one shard planted
        metadata = json.load(open(os.path.join(node, "zarr.json")))
        metadata["codecs"] = [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1], "codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}}], "index_codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}}]}}]
        json.dump(metadata, open(os.path.join(node, "zarr.json"), "w"))
        target = os.path.join(node, "c", "0")
    elif place == "split chunk":  # a foreign array of 3 chunks, its second planted
        metadata = json.load(open(os.path.join(node, "zarr.json")))
        metadata["chunk_grid"]["configuration"]["chunk_shape"] = [1]
        json.dump(metadata, open(os.path.join(node, "zarr.json"), "w"))
        values = np.array([1, 2, 3], dtype=np.int64)
        for chunk in range(3):
            with open(os.path.join(node, "c", str(chunk)), "wb") as handle:
                handle.write(values[chunk:chunk + 1].tobytes())
        target = os.path.join(node, "c", "1")
    else:
        target = os.path.join(path, *place.split("/"))
    if place in (".zgroup", ".zattrs"):  # (Zarr v2's markers are looked for where the root zarr.json is missing)
        os.remove(os.path.join(path, "zarr.json"))
    plant(target)
    results = {"read": outcome(lambda: read_all(pydaf.ZarrDaf(path, "r"))),
               "write": outcome(lambda: read_all(pydaf.ZarrDaf(path, "r+")))}
    if place in ("vectors/cell/age/c/0", "matrices/cell/gene/m/c/0/0", "vectors/cell/kind/c/0"):
        for suffix in (".daf", ".h5df"):  # (linked, and through the API)
            results["convert" + suffix] = outcome(lambda: convert(path, os.path.join(folder, f"p{index}{suffix}"),
                                                                  progress=False))
    results["replace"] = outcome(lambda: pydaf.ZarrDaf(path, "w").format.format_close())
    report(place=place, **results)
"""


def _planting_kinds() -> list[str]:
    kinds = ["fifo", "socket", "directory", "loop"]
    return [*kinds, "device"] if os.geteuid() == 0 else kinds  # (mknod of a device needs root)


@pytest.mark.parametrize("kind", _planting_kinds())
def test_non_regular_files_in_a_directory_never_block(tmp_path, kind):
    """A FIFO, socket, character device, folder or link loop at each place a ZarrDaf directory holds a file (or in
    place of a sparse ``nzval`` node): reading, a writable open and mode ``w`` (and conversions) end promptly, each in
    success or a typed error; a reader refuses each (never reads a property as absent, or an ``nzval`` as all-true
    Bools)."""
    places = _PLACES if kind == "fifo" else _SOME_PLACES  # (every place once; the other kinds where each is read)
    reports = run_child(_HANG_PROBES, str(tmp_path), kind, json.dumps(places), timeout=120)
    assert [report["place"] for report in reports] == places
    for report in reports:
        assert all(report[key] == "ok" or report[key].startswith("Daf") for key in report if key != "place"), report
        # A planted file where a property's metadata or data is read is refused, by name (never skipped as if the
        # property were not there); a group's own zarr.json is not read by a reader (only by a writable open).
        if report["place"] not in ("scalars/zarr.json", "vectors/cell/zarr.json"):
            assert report["read"].startswith("DafFormatError: "), report
            assert kind == "directory" or report["place"] == "shard" or "not a regular file" in report["read"] or \
                "loop of symbolic links" in report["read"] or report["read"].startswith(
                    ("DafFormatError: the axis: cell", "DafFormatError: the chunk: vectors/cell/age/c/1",
                     "DafFormatError: the nzval of the sparse", "DafFormatError: the node: ")), report
        assert all(report[key].startswith("DafFormatError: ") for key in report if key.startswith("convert")), report


_ZIP_HANG_PROBES = _COMMON + r"""
folder = sys.argv[1]
for path, container in [(os.path.join(folder, "one.daf.zarr.zip"), "one.daf.zarr.zip"),
                        (os.path.join(folder, "many.dafs.zarr.zip") + "#/cells", "many.dafs.zarr.zip")]:
    os.mkfifo(os.path.join(folder, container))
    for mode in ("r", "r+", "w+", "w"):
        report(path=path, mode=mode, outcome=outcome(lambda: read_all(pydaf.ZarrDaf(path, mode))))
    report(path=path, mode="convert", outcome=outcome(lambda: convert(path, os.path.join(folder, "x.h5df"),
                                                                            progress=False)))
"""


def test_a_fifo_in_place_of_an_archive_never_blocks(tmp_path):
    """A FIFO at the path of a ``.daf.zarr.zip`` or of a ``.dafs.zarr.zip`` holding a group: every mode (and a
    conversion) ends promptly in a typed error (``w`` does not replace what is not an archive)."""
    reports = run_child(_ZIP_HANG_PROBES, str(tmp_path))
    assert len(reports) == 10
    for report in reports:
        assert report["outcome"].startswith(("DafFormatError", "DafModeError", "DafNotDafError")), report


@pytest.mark.parametrize("store", ["directory", "zip"])
@pytest.mark.parametrize("sparse", ["vectors/cell/sp", "matrices/cell/gene/csc"])
def test_an_nzval_without_its_metadata_is_refused(tmp_path, store, sparse):
    """A sparse property whose ``nzval`` values are stored without their ``zarr.json`` is damaged: refused by name,
    never read as the all-true Bool pattern Julia writes by leaving ``nzval`` out."""
    folder = tmp_path / "sparse.daf.zarr"
    daf = pydaf.ZarrDaf(folder, "w").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["x", "y"])
    daf.set_vector("cell", "sp", SparseVector(3, np.array([2]), np.array([1.5])))
    daf.set_matrix("cell", "gene", "csc", SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 3]),
                                                          np.array([4.0, 5.0])))
    daf.format.format_close()
    (folder / sparse / "nzval" / "zarr.json").unlink()
    path = str(folder)
    if store == "zip":
        (folder / "zarr.json").write_text('{"attributes":{"daf":[1,0]},"node_type":"group","zarr_format":3}')
        path = str(tmp_path / "sparse.daf.zarr.zip")
        zip_directory(folder, Path(path))
    reader = pydaf.ZarrDaf(path, "r")
    name = sparse.rpartition("/")[2]
    with pytest.raises(pydaf.DafFormatError, match=f"the nzval of the sparse (vector|matrix): {name}\n(?s:.)*has no "
                                                   f"zarr.json|the node: {sparse}/nzval\n(?s:.)*its zarr.json is "
                                                   "missing"):
        if sparse.startswith("vectors"):
            reader.get_vector("cell", name)
        else:
            reader.get_matrix("cell", "gene", name)


def test_a_folder_replaced_by_a_link_out_of_the_directory_is_never_written_through(tmp_path):
    """``axes`` (or a vectors group) replaced by a link to a folder outside: a writable open's writes are refused
    before anything is written outside."""
    path = tmp_path / "linked.daf.zarr"
    pydaf.ZarrDaf(path, "w").add_axis("cell", ["A"]).format.format_close()
    outside = tmp_path / "outside"
    outside.mkdir()
    for group in ("axes", "vectors/cell"):
        target = path / group
        os.rename(target, tmp_path / "kept")
        os.symlink(outside, target)
        with pytest.raises(pydaf.DafFormatError, match="is a link out of the directory"):  # (at the open, now)
            daf = pydaf.ZarrDaf(path, "w+")
            try:
                if group == "axes":
                    daf.add_axis("gene", ["x"])
                else:
                    daf.set_vector("cell", "age", [1])
            finally:
                daf.format.format_close()
        assert list(outside.iterdir()) == [], group
        os.remove(target)
        os.rename(tmp_path / "kept", target)


# Class 5: declared sizes, in a child limited to 3 GB of address space.

_BIG = 40_000  # entries of each axis: a Float64 matrix of both is 12.8 GB

_SIZE_PROBES = _COMMON + r"""
import gzip
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
folder, store = sys.argv[1], sys.argv[2]
big = int(sys.argv[3])
GROUP = {"node_type": "group", "zarr_format": 3}

def array(data_type, shape, chunks=None, gzipped=False, fill=None):
    codecs = [{"name": "vlen-utf8", "configuration": {}} if data_type == "string" else
              {"name": "bytes", "configuration": {"endian": "little"}}]
    if gzipped:
        codecs.append({"name": "gzip", "configuration": {"level": 1}})
    return {"zarr_format": 3, "node_type": "array", "data_type": data_type, "shape": shape,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks or shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "codecs": codecs,
            "fill_value": ("" if data_type == "string" else 0) if fill is None else fill}

def put(path, key, data):
    target = os.path.join(path, *key.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as handle:
        handle.write(data if isinstance(data, bytes) else json.dumps(data).encode())

def probes():
    small = gzip.compress(np.zeros(8, dtype=np.int64).tobytes())
    return {
        # An elided dense matrix, shaped as its (real) axes: 12.8 GB, legal, but not within 3 GB.
        "elided matrix": [("matrices/cell/gene/big/zarr.json", array("float64", [big, big]))],
        "elided string matrix": [("matrices/cell/gene/big/zarr.json", array("string", [big, big]))],
        # Chunk shapes far larger than what their (gzip) chunk can inflate to.
        "gzip matrix chunk": [("matrices/cell/gene/big/zarr.json", array("float64", [big, big], gzipped=True)),
                              ("matrices/cell/gene/big/c/0/0", small)],
        "gzip vector chunk": [("vectors/cell/big/zarr.json", array("float64", [big], [1 << 40], gzipped=True)),
                              ("vectors/cell/big/c/0", small)],
        "huge chunk shape": [("vectors/cell/big/zarr.json", array("float64", [big], [1 << 40])),
                             ("vectors/cell/big/c/0", np.zeros(8).tobytes())],
        "huge string chunk": [("vectors/cell/big/zarr.json", array("string", [big], [1 << 40])),
                              ("vectors/cell/big/c/0", b"\x00\x00\x00\x00")],
        "huge declared string": [("vectors/cell/big/zarr.json", array("string", [big], [big])),
                                 ("vectors/cell/big/c/0", (big).to_bytes(4, "little") + b"\xff\xff\xff\xff" + b"x")],
        "shape off the axes": [("vectors/cell/big/zarr.json", array("float64", [1 << 40]))],
        # Sparse components declaring a huge nnz (rowval/nzind gzip-packed, or split, in tiny chunks).
        "sparse gzip rowval": [("matrices/cell/gene/big/zarr.json", GROUP),
                               ("matrices/cell/gene/big/colptr/zarr.json", array("int64", [big + 1])),
                               ("matrices/cell/gene/big/colptr/c/0", np.ones(big + 1, dtype=np.int64).tobytes()),
                               ("matrices/cell/gene/big/rowval/zarr.json", array("int64", [1 << 30], gzipped=True)),
                               ("matrices/cell/gene/big/rowval/c/0", small)],
        "sparse split rowval": [("matrices/cell/gene/big/zarr.json", GROUP),
                                ("matrices/cell/gene/big/colptr/zarr.json", array("int64", [big + 1])),
                                ("matrices/cell/gene/big/colptr/c/0", np.ones(big + 1, dtype=np.int64).tobytes()),
                                ("matrices/cell/gene/big/rowval/zarr.json", array("int64", [1 << 30], [1 << 20])),
                                *((f"matrices/cell/gene/big/rowval/c/{chunk}", b"") for chunk in range(1 << 10))],
        "sparse huge nnz": [("matrices/cell/gene/big/zarr.json", GROUP),
                            ("matrices/cell/gene/big/colptr/zarr.json", array("int64", [big + 1])),
                            ("matrices/cell/gene/big/colptr/c/0", np.ones(big + 1, dtype=np.int64).tobytes()),
                            ("matrices/cell/gene/big/rowval/zarr.json", array("int64", [big * big])),
                            ("matrices/cell/gene/big/rowval/c/0", b"\x01" * 8)],
        "sparse vector gzip nzind": [("vectors/cell/big/zarr.json", GROUP),
                                     ("vectors/cell/big/nzind/zarr.json", array("int64", [big], gzipped=True)),
                                     ("vectors/cell/big/nzind/c/0", small)],
        "sparse vector huge nnz": [("vectors/cell/big/zarr.json", GROUP),
                                   ("vectors/cell/big/nzind/zarr.json", array("int64", [1 << 40])),
                                   ("vectors/cell/big/nzind/c/0", b"\x01" * 8)],
        "axis huge length": [("axes/cell/zarr.json", array("string", [1 << 40])),
                             ("axes/cell/c/0", b"\x00" * 64)],
    }

template = os.path.join(folder, "template.daf.zarr")
daf = pydaf.ZarrDaf(template, "w").add_axis("cell", [f"c{i}" for i in range(big)])
daf.add_axis("gene", [f"g{i}" for i in range(big)]).format.format_close()
for name, files in probes().items():
    base = os.path.join(folder, name.replace(" ", "-"))
    directory = base + ".daf.zarr"
    shutil.copytree(template, directory)
    for key, data in files:
        put(directory, key, data)
    if store == "directory":
        path = directory
    else:
        shutil.rmtree(os.path.join(directory, "vectors", "cell", ".pydaf-never"), ignore_errors=True)
        os.remove(os.path.join(directory, "zarr.json"))  # (an archive's root has no consolidated metadata)
        put(directory, "zarr.json", {"attributes": {"daf": [1, 0]}, "node_type": "group", "zarr_format": 3})
        path = base + (".daf.zarr.zip" if store == "zip" else ".dafs.zarr.zip")
        zip_directory(directory, path, "" if store == "zip" else "sub/")
        if store == "group":
            path += "#/sub"
    report(probe=name, outcome=outcome(lambda: read_all(pydaf.ZarrDaf(path, "r"))))
"""

_SIZE_EXPECTED = {
    "elided matrix": "DafStorageError: not enough memory to read the matrix: big",
    "elided string matrix": "DafStorageError: not enough memory to read the matrix: big",
    "gzip matrix chunk": "DafFormatError: the chunk: matrices/cell/gene/big/c/0/0",
    "gzip vector chunk": "DafFormatError: the chunk: vectors/cell/big/c/0",
    "huge chunk shape": "DafFormatError: the chunk: vectors/cell/big/c/0",
    "huge string chunk": "DafFormatError: the chunk: vectors/cell/big/c/0",
    "huge declared string": "DafFormatError: ",
    "shape off the axes": "DafFormatError: the Zarr shape: [1099511627776]",
    "sparse gzip rowval": "DafFormatError: the chunk: matrices/cell/gene/big/rowval/c/0",
    "sparse split rowval": "DafFormatError: the chunk: matrices/cell/gene/big/rowval/c/0",
    "sparse huge nnz": ("DafFormatError: the chunk: matrices/cell/gene/big/rowval/c/0",
                        "DafFormatError: the ZIP entry: sub/matrices/cell/gene/big/rowval/c/0",
                        "DafFormatError: the ZIP entry: matrices/cell/gene/big/rowval/c/0"),
    "sparse vector gzip nzind": "DafFormatError: the chunk: vectors/cell/big/nzind/c/0",
    "sparse vector huge nnz": "DafFormatError: the nzind of the sparse vector: big",
    "axis huge length": "DafFormatError: the axis: cell",
}


@pytest.mark.parametrize("store", ["directory", "zip", "group"])
def test_declared_sizes_are_checked_before_allocating(tmp_path, store):
    """Hostile declared sizes (elided arrays as large as their axes allow, gzip or huge chunks, sparse components
    claiming a huge nnz, an axis claiming more entries than it stores) in a directory, an archive and a group of one:
    each read ends in a typed error naming the property, in a process that can't allocate more than 3 GB (a
    ``MemoryError`` is a failure)."""
    reports = run_child(_SIZE_PROBES, str(tmp_path), store, str(_BIG), timeout=300)
    assert {report["probe"]: report["outcome"] for report in reports}.keys() == _SIZE_EXPECTED.keys()
    for report in reports:
        assert report["outcome"].startswith(_SIZE_EXPECTED[report["probe"]]), report


def test_an_elided_array_as_large_as_its_axes_is_read_as_zeros(tmp_path):
    """What Julia (and pydaf) write for an all-zero array, no chunk, reads as zeros (not refused)."""
    path = tmp_path / "zeros.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["x", "y"])
    daf.set_matrix("cell", "gene", "zero", np.zeros((3, 2))).set_vector("cell", "blank", ["", "", ""])
    assert not (path / "matrices/cell/gene/zero/c").exists()
    reader = pydaf.ZarrDaf(path, "r")
    assert reader.get_matrix("cell", "gene", "zero").tolist() == [[0.0, 0.0]] * 3
    assert reader.get_vector("cell", "blank").tolist() == ["", "", ""]


# Class 6/8: killed overwrites, read by another process and converted.

_REWRITER = r"""
import sys, numpy as np, pydaf
from pydaf import SparseMatrixCSC, SparseVector
path, seed = sys.argv[1], int(sys.argv[2])
ROWS, COLUMNS = 4000, 250
daf = pydaf.ZarrDaf(path, "r+")
print("ready", flush=True)
rng = np.random.default_rng(seed)
while True:
    value = int(rng.integers(1, 1 << 30))
    kind = int(rng.integers(7))
    if kind == 0:
        daf.set_vector("cell", "dense", np.full(ROWS, value, dtype=np.int64), overwrite=True)
    elif kind == 1:
        with daf.empty_dense_vector("cell", "built", "Int64", overwrite=True) as buffer:
            buffer[:] = value
    elif kind == 2:
        daf.set_vector("cell", "sparse", SparseVector(ROWS, np.arange(1, ROWS + 1, 2, dtype=np.int64),
                                                      np.full(ROWS // 2, value, dtype=np.int64)), overwrite=True)
    elif kind == 3:
        daf.set_matrix("cell", "gene", "dense", np.full((ROWS, COLUMNS), value, dtype=np.int64), overwrite=True)
    elif kind == 4:
        colptr = np.arange(1, ROWS * COLUMNS // 4 + 2, ROWS // 4, dtype=np.int64)
        rowval = np.tile(np.arange(1, ROWS + 1, 4, dtype=np.int64), COLUMNS)
        daf.set_matrix("cell", "gene", "sparse", SparseMatrixCSC((ROWS, COLUMNS), colptr, rowval,
                                                                 np.full(rowval.size, value, dtype=np.int64)),
                       overwrite=True)
    elif kind == 5:
        daf.set_scalar("version", value, overwrite=True)
    else:  # a property that comes and goes: deleted, then written again
        daf.delete_vector("cell", "transient", must_exist=False)
        daf.delete_matrix("cell", "gene", "transient", must_exist=False)
        daf.set_vector("cell", "transient", np.full(ROWS, value, dtype=np.int64))
        daf.set_matrix("cell", "gene", "transient", np.full((ROWS, COLUMNS), value, dtype=np.int64))
"""

_ROWS, _COLUMNS = 4000, 250
_ALWAYS = {("vector", "dense"), ("vector", "built"), ("vector", "sparse"), ("matrix", "dense"), ("matrix", "sparse"),
           ("scalar", "version")}


def _start_rewritten(path: str) -> None:
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(_ROWS)])
    daf.add_axis("gene", [f"g{index}" for index in range(_COLUMNS)])
    daf.set_vector("cell", "dense", np.full(_ROWS, 1, dtype=np.int64))
    daf.set_vector("cell", "built", np.full(_ROWS, 1, dtype=np.int64))
    daf.set_vector("cell", "sparse", SparseVector(_ROWS, np.arange(1, _ROWS + 1, 2, dtype=np.int64),
                                                  np.full(_ROWS // 2, 1, dtype=np.int64)))
    daf.set_matrix("cell", "gene", "dense", np.full((_ROWS, _COLUMNS), 1, dtype=np.int64))
    colptr = np.arange(1, _ROWS * _COLUMNS // 4 + 2, _ROWS // 4, dtype=np.int64)
    rowval = np.tile(np.arange(1, _ROWS + 1, 4, dtype=np.int64), _COLUMNS)
    daf.set_matrix("cell", "gene", "sparse", SparseMatrixCSC((_ROWS, _COLUMNS), colptr, rowval,
                                                             np.full(rowval.size, 1, dtype=np.int64)))
    daf.set_scalar("version", 1)
    daf.format.format_close()


def _whole_values(daf: pydaf.DafReader) -> dict[tuple[str, str], int]:
    """Each property's one value (every stored element equal and positive: a whole old or new value), by property."""
    found: dict[tuple[str, str], int] = {("scalar", name): int(daf.get_scalar(name)) for name in daf.scalars_set()}
    for name in daf.vectors_set("cell"):
        vector = daf.get_vector("cell", name)
        values = np.asarray(vector)
        if name == "sparse":
            values = values[::2]
            assert not np.asarray(vector)[1::2].any(), name
        assert values.shape[0] and (values == values[0]).all() and values[0] > 0, name
        found["vector", name] = int(values[0])
    for name in daf.matrices_set("cell", "gene", relayout=False):
        matrix = daf.get_matrix("cell", "gene", name, relayout=False)
        values = matrix.data if scipy.sparse.issparse(matrix) else np.asarray(matrix).reshape(-1)
        if scipy.sparse.issparse(matrix):
            assert matrix.nnz == _ROWS * _COLUMNS // 4, name
        assert values.size and (values == values[0]).all() and values[0] > 0, name
        found["matrix", name] = int(values[0])
    return found


def _read_in_another_process(path: str, converted: str) -> dict:
    """Read a data set read-only in a new process, and convert it (to a FilesDaf directory: linked; and to H5df)."""
    code = _COMMON + r"""
path, converted = sys.argv[1], sys.argv[2]
reader = pydaf.ZarrDaf(path, "r")
def whole(daf):
    found = {"scalar/" + name: int(daf.get_scalar(name)) for name in daf.scalars_set()}
    for name in daf.vectors_set("cell"):
        values = np.asarray(daf.get_vector("cell", name))
        found["vector/" + name] = sorted(set(values[::2].tolist()) | set(values[1::2].tolist()) - {0})
    for name in daf.matrices_set("cell", "gene", relayout=False):
        matrix = daf.get_matrix("cell", "gene", name, relayout=False)
        values = matrix.data if hasattr(matrix, "toarray") else np.asarray(matrix).reshape(-1)
        found["matrix/" + name] = sorted(set(values.tolist()))
    return found
result = {"read": whole(reader)}
for suffix in (".daf", ".h5df"):
    convert(path, converted + suffix, progress=False)
    result[suffix] = whole(pydaf.open_daf(converted + suffix, "r"))
print(json.dumps(result), flush=True)
"""
    (result,) = run_child(code, path, converted)
    return result


def test_a_killed_overwrite_is_read_and_converted_with_its_committed_value(tmp_path):
    """SIGKILL a process overwriting (and deleting and re-adding) dense and sparse vectors and matrices and a scalar,
    at random moments; each time, a read-only open in the test process and in a new one, and conversions of the data
    set (linked, to a FilesDaf directory, and to H5df) see every property with one whole value, none missing (the
    committed value of an overwrite in flight is read through its backup, as a writable open's recovery would put it
    back); a writable open then recovers exactly that."""
    path = str(tmp_path / "rewritten.daf.zarr")
    _start_rewritten(path)
    rng = np.random.default_rng(25)
    in_flight = 0
    for round_ in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", _REWRITER, path, str(round_)], stdout=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.02, 0.6))
        child.send_signal(signal.SIGKILL)
        child.wait()
        in_flight += any(".pydaf-backup" in name for _, _, files in os.walk(path) for name in files) or any(
            name.endswith(".pydaf-backup") for _, folders, _ in os.walk(path) for name in folders)
        found = _whole_values(pydaf.ZarrDaf(path, "r"))
        assert _ALWAYS <= found.keys(), f"round {round_}: missing {_ALWAYS - found.keys()}"
        if round_ % 4 == 0 or round_ == KILLS - 1:  # (a new process each fourth round: ~2 s each)
            other = _read_in_another_process(path, str(tmp_path / f"converted{round_}"))
            expected = {f"{kind}/{name}": [value] for (kind, name), value in found.items() if kind != "scalar"}
            expected |= {f"scalar/{name}": value for (kind, name), value in found.items() if kind == "scalar"}
            for view in ("read", ".daf", ".h5df"):
                assert other[view] == expected, (round_, view)
        writer = pydaf.ZarrDaf(path, "r+")
        assert _whole_values(writer) == found, f"round {round_}: recovery differs from what readers saw"
        writer.format.format_close()
    print(f"{in_flight} of {KILLS} kills left an overwrite in flight")
    assert in_flight or KILLS < 10, "some kills must land in the middle of an overwrite"


@pytest.mark.parametrize("kind", ["scalar", "dense vector", "sparse vector", "dense matrix", "sparse matrix"])
def test_a_backup_left_by_a_killed_overwrite_is_read_and_converted(tmp_path, kind):
    """What a writer killed between renaming a node aside and putting its new value in place leaves (the backup, and
    a half-built temporary): a read-only open, and every conversion of it, read the committed value."""
    path = tmp_path / "left.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["x", "y"])
    node = {"scalar": "scalars/name", "dense vector": "vectors/cell/age", "sparse vector": "vectors/cell/sp",
            "dense matrix": "matrices/cell/gene/m", "sparse matrix": "matrices/cell/gene/csc"}[kind]
    daf.set_scalar("name", "committed").set_vector("cell", "age", [1.5, 2.5, 3.5])
    daf.set_vector("cell", "sp", SparseVector(3, np.array([2]), np.array([7], dtype=np.int32)))
    daf.set_matrix("cell", "gene", "m", np.arange(6.0).reshape(3, 2))
    daf.set_matrix("cell", "gene", "csc", SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 3]),
                                                          np.array([4.0, 5.0])))
    daf.format.format_close()
    before = describe(pydaf.ZarrDaf(path, "r"))
    folder, _, name = node.rpartition("/")
    os.rename(path / node, path / folder / f".{name}.pydaf-backup")
    (path / folder / f".{name}.pydaf-tmp-1-1" / "c").mkdir(parents=True)
    reader = pydaf.ZarrDaf(path, "r")
    assert describe(reader) == before
    for destination in ("copy.daf", "copy.h5df", "copy.daf.zip", "copy.daf.zarr.zip"):
        convert(path, tmp_path / destination, progress=False)
        assert describe(pydaf.open_daf(tmp_path / destination, "r")) == before, destination
    assert pydaf.ZarrDaf(path, "r").get_scalar("name") == "committed"


def describe(daf: pydaf.DafReader) -> dict:
    """Every property of a data set, as plain values."""
    found: dict = {("scalar", name): daf.get_scalar(name) for name in daf.scalars_set()}
    for axis in daf.axes_set():
        found["axis", axis] = daf.axis_vector(axis).tolist()
        for name in daf.vectors_set(axis):
            found["vector", axis, name] = np.asarray(daf.get_vector(axis, name)).tolist()
        for other in daf.axes_set():
            for name in daf.matrices_set(axis, other, relayout=False):
                matrix = daf.get_matrix(axis, other, name, relayout=False)
                found["matrix", axis, other, name] = (matrix.toarray() if scipy.sparse.issparse(matrix)
                                                      else np.asarray(matrix)).tolist()
    return found


# Class 9: names and values.

def _stores(tmp_path: Path) -> dict[str, str]:
    return {"directory": str(tmp_path / "names.daf.zarr"), "zip": str(tmp_path / "names.daf.zarr.zip"),
            "group": str(tmp_path / "names.dafs.zarr.zip") + "#/cells"}


def _new(path: str) -> pydaf.DafWriter:
    return pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A", "B"]).add_axis("gene", ["x"])


def _files(tmp_path: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}


_WRITES = {
    "axis": lambda daf, name: daf.add_axis(name, ["q"]),
    "scalar": lambda daf, name: daf.set_scalar(name, 1),
    "vector": lambda daf, name: daf.set_vector("cell", name, [1, 2]),
    "sparse vector": lambda daf, name: daf.set_vector("cell", name, SparseVector(2, np.array([1]), np.array([2.0]))),
    "matrix": lambda daf, name: daf.set_matrix("cell", "gene", name, np.ones((2, 1))),
    "built vector": lambda daf, name: daf.empty_dense_vector("cell", name, "Int8").__enter__(),
    "built matrix": lambda daf, name: daf.empty_sparse_matrix("cell", "gene", name, "Int8", 1, "Int64").__enter__(),
}
_SURROGATE = ("not encodable as UTF-8", "lone surrogate")  # (the format's words, or the core's, which checks first)
_BAD_NAMES = {"zarr.json": ("reserved for Zarr metadata",), "x" * 10_000: ("longer than 200 UTF-8 bytes",),
              "é" * 101: ("longer than 200 UTF-8 bytes (202)",), "a\udc80b": _SURROGATE, "\ud800": _SURROGATE,
              ".zattrs": ("must not start with '.'",), ".zgroup": ("must not start with '.'",),
              ".zarray": ("must not start with '.'",)}


@pytest.mark.parametrize("store", ["directory", "zip", "group"])
@pytest.mark.parametrize("write", list(_WRITES))
def test_names_a_zarr_node_cant_have_are_refused_before_anything_is_written(tmp_path, store, write):
    """A name that collides with Zarr's metadata, is too long for a file name (with pydaf's hidden suffixes) or is
    not UTF-8: a DafNameError naming the name, the limit and what to do; nothing is written."""
    path = _stores(tmp_path)[store]
    daf = _new(path)
    daf.set_scalar("kept", "yes")
    before = _files(tmp_path)
    for name, problems in _BAD_NAMES.items():
        with pytest.raises(pydaf.DafNameError) as raised:
            _WRITES[write](daf, name)
        assert any(problem in str(raised.value) for problem in problems), (name[:20], str(raised.value))
        if problems != _SURROGATE and not name.startswith("."):
            assert "ZarrDaf names are file names of at most 200 UTF-8 bytes" in str(raised.value)
            assert str(raised.value).startswith("invalid ")
    assert _files(tmp_path) == before
    reader = pydaf.ZarrDaf(path, "r")
    assert reader.get_scalar("kept") == "yes" and reader.axes_set() == {"cell", "gene"}
    assert reader.vectors_set("cell") == set() and reader.matrices_set("cell", "gene") == set()


@pytest.mark.parametrize("store", ["directory", "zip", "group"])
def test_names_zarr_uses_elsewhere_and_the_longest_name_are_stored(tmp_path, store):
    """``c`` (a chunk folder's name), ``zarr.json.x``, ``nzval``, names holding ``.pydaf-`` and a name of exactly
    200 UTF-8 bytes are ordinary names: stored and read back, by pydaf and (directories) by zarr-python."""
    path = _stores(tmp_path)[store]
    daf = _new(path)
    names = ["c", "zarr.json.x", "nzval", "a.pydaf-backup", "é" * 100, "x" * 200]
    for name in names:
        daf.add_axis(name, ["q"]).set_scalar(name, name).set_vector("cell", name, [1, 2])
        daf.set_matrix("cell", "gene", name, SparseMatrixCSC((2, 1), np.array([1, 2]), np.array([2]),
                                                            np.array([3.0])))
    if store == "directory":  # a killed overwrite of each leaves a backup of a name holding the marker: kept
        daf.set_vector("cell", "a.pydaf-backup", [5, 6], overwrite=True)
    reader = pydaf.ZarrDaf(path, "r")
    assert set(names) <= reader.axes_set() and set(names) == reader.scalars_set()
    assert reader.vectors_set("cell") == set(names) == reader.matrices_set("cell", "gene", relayout=False)
    for name in names:
        assert reader.get_scalar(name) == name
        assert reader.axis_vector(name).tolist() == ["q"]
        assert reader.get_matrix("cell", "gene", name, relayout=False).toarray().tolist() == [[0.0], [3.0]]
    if store == "directory":
        assert reader.get_vector("cell", "a.pydaf-backup").tolist() == [5, 6]
        import zarr

        group = zarr.open_group(path, mode="r")
        assert sorted(group["vectors/cell"].keys()) == sorted(names)
        assert group["vectors/cell/c"][:].tolist() == [1, 2]


def test_a_killed_overwrite_of_a_name_holding_the_marker_keeps_its_backup(tmp_path):
    """Recovery tells a backup by the last ``.pydaf-`` of its name: a property named ``a.pydaf-x`` whose overwrite
    was killed is put back, not deleted as a temporary."""
    path = tmp_path / "marker.daf.zarr"
    pydaf.ZarrDaf(path, "w").add_axis("cell", ["A"]).set_vector("cell", "a.pydaf-x", [4])
    os.rename(path / "vectors/cell/a.pydaf-x", path / "vectors/cell/.a.pydaf-x.pydaf-backup")
    assert pydaf.ZarrDaf(path, "r+").get_vector("cell", "a.pydaf-x").tolist() == [4]
    assert (path / "vectors/cell/a.pydaf-x/zarr.json").is_file()


_FLOATS = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, np.finfo(np.float64).max])
_VALUES = {
    "float64": _FLOATS,
    "float32": np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, np.finfo(np.float32).max],
                        dtype=np.float32),
    "payload NaN": np.array([0x7FF8DEADBEEF0001, 0xFFF0000000000001], dtype=np.uint64).view(np.float64),
    "int64": np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max] * 2, dtype=np.int64),
    "uint64": np.array([0, 1, np.iinfo(np.uint64).max, 2] * 2, dtype=np.uint64),
    "int8": np.array([-128, 127, 0, -1] * 2, dtype=np.int8),
    "bool": np.array([True, False] * 4),
    "strings": np.array(["a\0b", "\0", "", "ü\u2028\r\n", "\t", "😀", "x" * 100_000, "end"] * 1, dtype=object),
}


@pytest.mark.parametrize("store", ["directory", "zip", "group"])
@pytest.mark.parametrize("kind", list(_VALUES))
def test_values_are_stored_exactly(tmp_path, store, kind):
    """NUL bytes, long strings, NaN (with its payload), ±inf, -0.0 and integer extremes in every stored form
    (scalar, dense and sparse vector, dense matrix): read back bit for bit."""
    values = _VALUES[kind]
    length = values.shape[0]
    path = _stores(tmp_path)[store]
    daf = pydaf.ZarrDaf(path, "w+").add_axis("cell", [f"c{index}" for index in range(length)])
    daf.add_axis("pair", ["p", "q"])
    daf.set_scalar("first", values[0])
    daf.set_vector("cell", "dense", values)
    if kind != "strings":
        daf.set_vector("cell", "sparse", SparseVector(length, np.arange(1, length + 1), values))
    daf.set_matrix("cell", "pair", "matrix", np.stack([values, values[::-1]], axis=1))
    reader = pydaf.ZarrDaf(path, "r")

    def same(found: object, expected: np.ndarray) -> bool:
        found = np.asarray(found)
        if kind == "strings":
            return found.tolist() == expected.tolist()
        return found.dtype == expected.dtype and found.tobytes() == expected.tobytes()

    scalar = reader.get_scalar("first")
    assert scalar == values[0] if kind == "strings" else np.asarray(scalar).tobytes() == values[:1].tobytes()
    assert same(reader.get_vector("cell", "dense"), values)
    if kind != "strings":
        assert same(reader.get_vector("cell", "sparse"), values)
    assert same(np.asarray(reader.get_matrix("cell", "pair", "matrix"))[:, 1], values[::-1])


@pytest.mark.parametrize("store", ["directory", "zip", "group"])
def test_a_value_that_cant_be_encoded_is_refused_and_the_old_one_kept(tmp_path, store):
    """A lone surrogate in a string value (scalar, vector, axis entries, matrix) can't be UTF-8: a DafValueError; an
    overwrite refused so keeps the old value, in the writer and in a new reader."""
    path = _stores(tmp_path)[store]
    daf = pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A", "B"]).add_axis("gene", ["x"])
    daf.set_scalar("s", "old").set_vector("cell", "v", ["a", "b"])
    daf.set_matrix("cell", "gene", "m", np.array([["a"], ["b"]], dtype=object))
    bad = "bad\udc80"
    overwrite = store == "directory"  # (an archive refuses any overwrite first: append-only)
    attempts = [lambda: daf.set_scalar("s" if overwrite else "s2", bad, overwrite=overwrite),
                lambda: daf.set_vector("cell", "v" if overwrite else "v2", [bad, "b"], overwrite=overwrite),
                lambda: daf.set_matrix("cell", "gene", "m" if overwrite else "m2",
                                       np.array([[bad], ["b"]], dtype=object), overwrite=overwrite),
                lambda: daf.add_axis("other", ["a", bad])]
    for attempt in attempts:
        with pytest.raises(pydaf.DafValueError, match="surrogates not allowed"):
            attempt()
    for reader in (daf, pydaf.ZarrDaf(path, "r")):
        assert reader.get_scalar("s") == "old" and reader.get_vector("cell", "v").tolist() == ["a", "b"]
        assert reader.get_matrix("cell", "gene", "m").tolist() == [["a"], ["b"]]
        assert reader.scalars_set() == {"s"} and reader.axes_set() == {"cell", "gene"}
    if store == "directory":  # (and the consolidated metadata still lists them, for zarr-python)
        root = json.loads(Path(path, "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
        assert {"scalars/s", "vectors/cell/v", "matrices/cell/gene/m"} <= root.keys()
        assert not [name for name in os.listdir(Path(path, "scalars")) if name.startswith(".")]


def test_a_new_open_sees_an_axis_another_process_replaced(tmp_path):
    """Axis lengths are not kept from an older handle in this process: a new open (read-only) after another process
    deleted and re-added an axis with another length reads the new one (class 8)."""
    path = tmp_path / "axes.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
    old = pydaf.ZarrDaf(path, "r")
    assert old.axis_length("cell") == 2
    daf.format.format_close()
    run_child(_COMMON + r"""
daf = pydaf.ZarrDaf(sys.argv[1], "r+")
daf.delete_axis("cell")
daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [1, 2, 3])
""", str(path))
    new = pydaf.ZarrDaf(path, "r")
    assert new.axis_length("cell") == 3 and new.get_vector("cell", "age").tolist() == [1, 2, 3]
    assert old is not new


@pytest.mark.parametrize("group", ["zarr.json", "cells/zarr.json", "g" * 300, "g" * 70_000, "a\udc80"],
                         ids=["zarr.json", "nested zarr.json", "300 bytes", "70000 bytes", "surrogate"])
def test_a_group_an_archive_cant_hold_as_a_folder_is_refused(tmp_path, group):
    """Each part of the group of a ``.dafs.zarr.zip#/group`` is a folder once the archive is unzipped: a part named
    ``zarr.json``, longer than 200 UTF-8 bytes or not UTF-8 is refused (a DafPathError) before the archive is made."""
    path = str(tmp_path / "many.dafs.zarr.zip") + "#/" + group
    with pytest.raises(pydaf.DafPathError, match=r"invalid group( name)?: "):  # (the path grammar may see it first)
        pydaf.ZarrDaf(path, "w+")
    assert list(tmp_path.iterdir()) == []


def test_a_directory_path_too_long_for_the_file_system_is_refused(tmp_path):
    """A data set path whose folder name (or whole length) the file system can't hold: a DafPathError saying so,
    not an ``OSError``."""
    for path in (tmp_path / ("x" * 10_000 + ".daf.zarr"), Path(tmp_path, *(["y" * 200] * 25), "a.daf.zarr")):
        with pytest.raises(pydaf.DafPathError, match="a path too long for this file system"):
            pydaf.ZarrDaf(path, "w+")
