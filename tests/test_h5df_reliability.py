"""H5df under concurrency and hostile input: threads and handles sharing a file, processes sharing a file, names
that would escape their group, and corrupt, truncated or lying files.

Concurrent runs are child processes (``tests/h5df_stress.py``), so a segfault fails a test instead of the runner;
their length is scaled by ``PYDAF_SOAK``.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.formats.h5df.global_heap import REFERENCE
from tests import h5df_stress
from tests.test_h5df_crash import STRESS, child_env

from .soak import soak

SECONDS = soak(60, 4)


def run(*arguments: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, STRESS, *arguments], capture_output=True, text=True, env=child_env(),
                          timeout=timeout)


@pytest.mark.parametrize("readers_through", ["same", "handle", "link"])
def test_eight_reader_threads_and_a_writer_see_only_whole_values(tmp_path, readers_through):
    result = run("threads", str(tmp_path / "threads.h5df"), str(SECONDS), readers_through, timeout=SECONDS + 120)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"


def test_a_writer_process_and_three_reader_processes(tmp_path):
    path = str(tmp_path / "processes.h5df")
    h5df_stress.create(path)
    children = [subprocess.Popen([sys.executable, STRESS, "processes", path, str(SECONDS), role],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
                for role in ("writer", "reader", "reader", "reader")]
    outputs = [child.communicate(timeout=SECONDS + 120) for child in children]
    for child, (output, errors) in zip(children, outputs, strict=True):
        assert child.returncode == 0, f"exit {child.returncode}\n{output}\n{errors[-3000:]}"
    assert "writer: 0 done" not in outputs[0][0]


def test_a_reader_finds_a_writer_in_another_process(tmp_path):
    path = str(tmp_path / "locked.h5df")
    h5df_stress.create(path)
    holder = subprocess.Popen([sys.executable, "-c", "import pydaf, sys, time; d = pydaf.H5df(sys.argv[1], 'r+'); "
                               "print('open', flush=True); time.sleep(60)", path],
                              stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(pydaf.DafLockedError, match="another process is writing it"):
            pydaf.H5df(path, "r")
        with pytest.raises(pydaf.DafLockedError, match="another process has it open"):
            pydaf.H5df(path, "r+")
    finally:
        holder.kill()
        holder.wait()
    assert pydaf.H5df(path, "r").get_scalar("generation") == 0


def test_arrays_held_by_a_reader_process_keep_writers_out(tmp_path):
    path = str(tmp_path / "held.h5df")
    h5df_stress.create(path)
    reader = pydaf.H5df(path, "r")
    held = reader.get_vector("cell", "v0")
    del reader
    result = subprocess.run([sys.executable, "-c", "import pydaf, sys\ntry:\n pydaf.H5df(sys.argv[1], 'r+')\n"
                             "except pydaf.DafLockedError: print('locked')", path],
                            capture_output=True, text=True, env=child_env(), timeout=60)
    assert result.stdout.strip() == "locked", result.stderr
    assert (held == 0).all()


# Names.


def test_names_never_reach_outside_their_group(tmp_path):
    path = tmp_path / "names.h5dfs"
    first = pydaf.H5df(f"{path}#/a", "w+").set_scalar("x", 1)
    second = pydaf.H5df(f"{path}#/b", "w+").set_scalar("x", 2)
    first_format, second_format = first.format, second.format
    for name in ("/daf", "/b/scalars/x", "../x", ".", "a/b"):
        assert not first_format.format_has_scalar(name)
        with pytest.raises(pydaf.DafError):
            first.get_scalar(name)
        with pytest.raises(pydaf.DafError):
            first.delete_scalar(name)
        with pytest.raises(pydaf.DafNameError):
            first_format.format_set_scalar(name, 3)
        with pytest.raises(pydaf.DafNameError):
            first_format.format_delete_scalar(name, for_set=False)
        assert not second_format.format_has_vector(name, "x")
        assert second_format.format_matrices_set(name, name) == set()
    assert first.get_scalar("x") == 1 and second.get_scalar("x") == 2
    with h5py.File(path, "r") as file:
        assert file["a/daf"].shape == (2,) and file["b/daf"].shape == (2,)


# Hostile files.


def base_file(path: Path) -> Path:
    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_scalar("s", 1.5).set_scalar("t", "text")
    daf.set_vector("cell", "dense", [1.0, 2.0, 3.0]).set_vector("cell", "strings", ["a", "", ""])
    daf.set_vector("cell", "sparse", pydaf.SparseVector(3, np.array([2], dtype=np.uint32), np.array([7.0])))
    daf.set_matrix("cell", "gene", "dense", np.arange(6.0).reshape(3, 2))
    daf.set_matrix("cell", "gene", "sparse", pydaf.SparseMatrixCSC.from_scipy(
        __import__("scipy.sparse").sparse.csc_matrix(np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]))))
    del daf
    return path


def structural_variants(folder: Path) -> dict[str, Path]:
    """Files whose HDF5 is valid but whose Daf content lies: wrong shapes, types, sizes and links."""
    edits = {
        "vector_longer_than_axis": lambda f: (f["vectors/cell"].__delitem__("dense"),
                                              f["vectors/cell"].create_dataset("dense", data=np.arange(5.0))),
        "matrix_wrong_shape": lambda f: (f["matrices/cell/gene"].__delitem__("dense"),
                                         f["matrices/cell/gene"].create_dataset("dense", data=np.zeros((3, 3)))),
        "huge_contiguous": lambda f: f["vectors/cell"].create_dataset("huge", shape=(1 << 40,), dtype="f8"),
        "huge_chunked": lambda f: f["vectors/cell"].create_dataset("huge", shape=(1 << 40,), dtype="f8",
                                                                   chunks=(1 << 16,)),
        "huge_axis": lambda f: f["axes"].create_dataset("huge", shape=(1 << 40,), dtype=h5py.string_dtype()),
        "compound_vector": lambda f: f["vectors/cell"].create_dataset(
            "compound", data=np.zeros(3, dtype=[("a", "i4"), ("b", "f4")])),
        "three_dimensions": lambda f: f["vectors/cell"].create_dataset("cube", data=np.zeros((3, 1, 1))),
        "soft_link": lambda f: f["vectors/cell"].__setitem__("soft", h5py.SoftLink("/matrices/cell/gene/dense")),
        "external_link": lambda f: f["vectors/cell"].__setitem__("external", h5py.ExternalLink("/etc/passwd", "/x")),
        "sparse_positions_out_of_range": lambda f: (f["vectors/cell"].create_group("positions"),
                                                    f["vectors/cell/positions"].create_dataset("nzind", data=[0]),
                                                    f["vectors/cell/positions"].create_dataset(
                                                        "nztxt", data=["a"], dtype=h5py.string_dtype())),
        "colptr_wrong_length": lambda f: (f["matrices/cell/gene/sparse"].__delitem__("colptr"),
                                          f["matrices/cell/gene/sparse"].create_dataset("colptr", data=[1, 2])),
        "axis_of_numbers": lambda f: (f["axes"].__delitem__("gene"), f["axes"].create_dataset("gene", data=[1, 2])),
        "scalars_is_a_dataset": lambda f: (f.__delitem__("scalars"), f.create_dataset("scalars", data=[1])),
        "version_wrong_type": lambda f: (f.__delitem__("daf"), f.create_dataset("daf", data=[1.0, 0.0])),
    }
    variants = {}
    for name, edit in edits.items():
        path = base_file(folder / f"{name}.h5df")
        with h5py.File(path, "r+") as file:
            edit(file)
        variants[name] = path
    return variants


def byte_variants(folder: Path, count: int) -> list[Path]:
    """Copies of a valid file with bytes flipped (mostly in the metadata, the first few KB) or cut short."""
    original = base_file(folder / "original.h5df").read_bytes()
    generator = random.Random(11)
    paths = []
    for index in range(count):
        data = bytearray(original)
        if index % 4 == 3:
            data = data[:generator.randrange(len(data))]
        else:
            for _ in range(generator.randint(1, 8)):
                position = generator.randrange(min(len(data), 8192))
                data[position] ^= 1 << generator.randrange(8)
        path = folder / f"bytes{index}.h5df"
        path.write_bytes(bytes(data))
        paths.append(path)
    return paths


def check_hostile(paths: list[Path]) -> str:
    result = run("hostile", *map(str, paths), timeout=300)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stderr[-4000:]}"
    return result.stdout


def test_lying_files_give_errors_naming_the_property(tmp_path):
    variants = structural_variants(tmp_path)
    output = check_hostile(list(variants.values()))
    outcome = {line.split()[1]: line for line in output.splitlines()}
    for name, path in variants.items():
        assert outcome[str(path)].startswith("error"), f"{name}: {outcome[str(path)]}"
    for name in ("vector_longer_than_axis", "matrix_wrong_shape", "huge_contiguous", "huge_chunked"):
        assert "the vector" in outcome[str(variants[name])] or "the matrix" in outcome[str(variants[name])] or \
            "can't read the" in outcome[str(variants[name])], outcome[str(variants[name])]


def test_corrupt_and_truncated_files_never_crash(tmp_path):
    paths = byte_variants(tmp_path, round(soak(600, 60)))
    output = check_hostile(paths)
    assert len(output.splitlines()) == len(paths)


def _first_objects(data: bytes, collection: int) -> list[tuple[int, int, int]]:
    """(position, index, size) of the objects of the global heap collection at ``collection``."""
    size = int.from_bytes(data[collection + 8:collection + 16], "little")
    objects, position = [], collection + 16
    while position + 16 <= collection + size:
        index = int.from_bytes(data[position:position + 2], "little")
        object_size = int.from_bytes(data[position + 8:position + 16], "little")
        objects.append((position, index, object_size))
        position += object_size if index == 0 else 16 + (object_size + 7) // 8 * 8
    return objects


@pytest.mark.parametrize("count", [3, 200_000], ids=["walked in Python", "walked in numba"])
def test_a_corrupt_string_heap_is_an_error_not_a_hang(tmp_path, count):
    """A global heap collection whose free space has the size 0 sent libhdf5's reader into an endless loop (found by
    the byte flips above); a string object whose size runs past its collection is refused too."""
    path = tmp_path / "strings.h5df"
    pydaf.H5df(path, "w").add_axis("cell", [f"cell{index}" for index in range(count)])
    with h5py.File(path, "r") as file:
        offset = file["axes/cell"].id.get_offset()
    data = bytearray(path.read_bytes())
    references = np.frombuffer(bytes(data[offset:offset + 16 * count]), dtype=REFERENCE)
    objects = _first_objects(bytes(data), int(references["collection"][0]))
    free = [position for position, index, _ in objects if index == 0]
    if free:
        data[free[0] + 8:free[0] + 16] = bytes(8)  # the free space's size: 0
        expected = "free space at byte"
    else:  # (a full collection)
        data[objects[0][0] + 8:objects[0][0] + 16] = (1 << 40).to_bytes(8, "little")
        expected = "past its end"
    path.write_bytes(bytes(data))
    output = check_hostile([path])
    assert output.startswith(f"error {path} the axis: cell"), output
    with pytest.raises(pydaf.DafFormatError, match=expected):
        pydaf.H5df(path, "r").axis_vector("cell")


def _rotate(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & 0xFFFFFFFF


def _lookup3(data: bytes) -> int:
    """Bob Jenkins' lookup3 ``hashlittle`` (initial value 0): HDF5's metadata checksum (``H5_checksum_lookup3``)."""
    mask = 0xFFFFFFFF
    a = b = c = (0xDEADBEEF + len(data)) & mask
    position, remaining = 0, len(data)
    while remaining > 12:
        x, y, z = struct.unpack_from("<3I", data, position)
        a, b, c = (a + x) & mask, (b + y) & mask, (c + z) & mask
        for first, second, third, bits in ((0, 2, 1, 4), (1, 0, 2, 6), (2, 1, 0, 8), (0, 2, 1, 16), (1, 0, 2, 19),
                                           (2, 1, 0, 4)):  # lookup3's mix()
            values = [a, b, c]
            values[first] = ((values[first] - values[second]) & mask) ^ _rotate(values[second], bits)
            values[second] = (values[second] + values[third]) & mask
            a, b, c = values
        position, remaining = position + 12, remaining - 12
    if remaining == 0:
        return c
    x, y, z = struct.unpack("<3I", data[position:] + bytes(12 - remaining))
    c = (c + z) & mask if remaining > 8 else c
    b = (b + y) & mask if remaining > 4 else b
    a = (a + x) & mask
    for target, source, bits in ((2, 1, 14), (0, 2, 11), (1, 0, 25), (2, 1, 16), (0, 2, 4), (1, 0, 14), (2, 1, 24)):
        values = [a, b, c]  # lookup3's final()
        values[target] = ((values[target] ^ values[source]) - _rotate(values[source], bits)) & mask
        a, b, c = values
    return c


def _rename_link_record(path: Path, old: bytes, new: bytes) -> None:
    """Rewrite the name in a link record of a dense HDF5 group (in its fractal heap's direct block) and the block's
    checksum: what a torn flush leaves when the block was written from a later state than the group's index."""
    data = bytearray(path.read_bytes())
    assert data.count(old) == 1
    at = data.index(old)
    block = data.rindex(b"FHDB", 0, at)
    (heap,) = struct.unpack_from("<Q", data, block + 5)
    assert data[heap:heap + 4] == b"FRHP"
    table = heap + 4 + 1 + 2 + 2 + 1 + 4 + 12 * 8  # the doubling table of the heap header
    (block_size,) = struct.unpack_from("<Q", data, table + 2)
    (max_heap_bits,) = struct.unpack_from("<H", data, table + 18)
    checksum = 4 + 1 + 8 + (max_heap_bits + 7) // 8  # (signature, version, heap address, block offset)
    data[at:at + len(old)] = new
    content = bytearray(data[block:block + block_size])
    content[checksum:checksum + 4] = bytes(4)
    struct.pack_into("<I", data, block + checksum, _lookup3(bytes(content)))
    path.write_bytes(bytes(data))


def test_a_torn_link_index_is_an_error_not_a_missing_property(tmp_path):
    """A writer killed while HDF5 flushed a group left its link records naming one link twice and another not at all
    (``m3`` listed twice, ``m2`` gone, in one of 200 kills of tests/test_h5df_crash.py). pydaf reports the torn group
    instead of listing it without the lost link."""
    path = tmp_path / "torn.h5df"
    daf = pydaf.H5df(str(path), "w")
    daf.add_axis("cell", ["A", "B"])
    for index in range(12):  # (more than 8 links: HDF5 keeps them in a dense index and a heap of records)
        daf.set_vector("cell", f"v{index:02d}", [index, index])
    del daf
    _rename_link_record(path, b"v03", b"v04")
    with h5py.File(path, "r") as file:
        assert sorted(file["vectors/cell"].keys()).count("v04") == 2  # (the checksum holds: HDF5 reads it)
    reader = pydaf.H5df(str(path), "r")
    with pytest.raises(pydaf.DafFormatError, match=r"(?s)group: /vectors/cell.*links: v04 more than once.*torn"):
        reader.vectors_set("cell")
    assert reader.get_vector("cell", "v05").tolist() == [5, 5]  # the group's other links still read
    problems = pydaf.check_daf(reader)
    assert any("v04 more than once" in problem for problem in problems), problems
