"""ZarrDaf under issue 25 (reliability, round 3): a data set never reads as something other than what was committed.

- A node the root's consolidated metadata lists (a committed node: pydaf writes a node before it lists it and unlists
  it before it removes it) whose ``zarr.json`` is deleted or a dangling link, whose folder is removed, or replaced by a
  FIFO or by a link out of the directory, is a ``DafFormatError`` naming the node and the data set, in every mode:
  never an axis or property silently left out, never a Float sparse property read as an all-true Bool pattern.
- A sparse property of a ZIP archive (which holds no consolidated metadata) whose ``nzval`` entries were renamed by
  damage is refused, not read as all-true Bools.
- What a killed writer leaves (a node written but not yet listed, a folder without ``zarr.json``, a listed node renamed
  to its backup, a delete half done) keeps opening, read-only and writable; SIGKILLs of a process adding and deleting
  axes and properties leave a data set that opens and reads whole.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf import SparseMatrixCSC, SparseVector

from .soak import soak

ROOT = Path(__file__).resolve().parent.parent
JULIA_FIXTURE = ROOT.parent / "shared" / "fixtures" / "julia" / "zarr-flat.daf.zarr"
KILLS = round(soak(100, 10))  # tests/soak.py: 100 kills at PYDAF_SOAK=1


def build(path: Path) -> None:
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["x", "y"])
    daf.set_scalar("organism", "human")
    daf.set_vector("cell", "age", [1, 2, 3])
    daf.set_vector("cell", "score", SparseVector(3, np.array([2]), np.array([1.5])))
    daf.set_matrix("cell", "gene", "UMIs", SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 3]),
                                                           np.array([4.0, 5.0], dtype=np.float32)))
    daf.format.format_close()


def read_all(daf: pydaf.DafReader) -> dict[str, object]:
    """Every axis and property of a data set, as plain values."""
    found: dict[str, object] = {}
    for name in sorted(daf.scalars_set()):
        found[f"scalar/{name}"] = daf.get_scalar(name)
    for axis in sorted(daf.axes_set()):
        found[f"axis/{axis}"] = daf.axis_vector(axis).tolist()
        for name in sorted(daf.vectors_set(axis)):
            found[f"vector/{axis}/{name}"] = np.asarray(daf.get_vector(axis, name)).tolist()
        for other in sorted(daf.axes_set()):
            for name in sorted(daf.matrices_set(axis, other, relayout=False)):
                matrix = daf.get_matrix(axis, other, name, relayout=False)
                found[f"matrix/{axis}/{other}/{name}"] = np.asarray(
                    matrix.todense() if hasattr(matrix, "todense") else matrix).tolist()
    return found


def _replace_by_fifo(node: Path) -> None:
    shutil.rmtree(node)
    os.mkfifo(node)


def _dangling(file: Path) -> None:
    file.unlink()
    os.symlink("gone.json", file)


#: A damage, the node it hits (named by the error) and what the error says of it.
DAMAGES: dict[str, tuple[Callable[[Path, Path], None], str, str]] = {
    "an axis's zarr.json deleted": (lambda path, _: (path / "axes/gene/zarr.json").unlink(), "axes/gene",
                                    "its zarr.json is missing"),
    "an axis's zarr.json a dangling link": (lambda path, _: _dangling(path / "axes/gene/zarr.json"), "axes/gene",
                                            "its zarr.json is a dangling symbolic link"),
    "a sparse matrix's nzval folder removed": (lambda path, _: shutil.rmtree(path / "matrices/cell/gene/UMIs/nzval"),
                                               "matrices/cell/gene/UMIs/nzval", "its folder is missing"),
    "a sparse vector's nzval folder removed": (lambda path, _: shutil.rmtree(path / "vectors/cell/score/nzval"),
                                               "vectors/cell/score/nzval", "its folder is missing"),
    "a vector's folder removed": (lambda path, _: shutil.rmtree(path / "vectors/cell/age"), "vectors/cell/age",
                                  "its folder is missing"),
    "an axis's folder replaced by a FIFO": (lambda path, _: _replace_by_fifo(path / "axes/cell"), "axes/cell",
                                            "a FIFO"),
    "a vectors group replaced by a FIFO": (lambda path, _: _replace_by_fifo(path / "vectors/cell"), "vectors/cell",
                                           "a FIFO"),
    "an axis's folder replaced by a link out": (
        lambda path, outside: (shutil.rmtree(path / "axes/cell"), os.symlink(outside, path / "axes/cell")),
        "axes/cell", "link out of the directory"),
}


@pytest.mark.parametrize("mode", ["r", "r+"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_listed_node_that_is_not_there_is_refused_by_name(tmp_path, damage, mode):
    """The damage is refused, naming the node and the data set (never read as if the node did not exist); a writable
    open writes nothing (the root keeps listing the node) and nothing outside the directory changes."""
    path, outside = tmp_path / "damaged.daf.zarr", tmp_path / "outside"
    outside.mkdir()
    build(path)
    plant, node, problem = DAMAGES[damage]
    plant(path, outside)
    root = (path / "zarr.json").read_bytes()
    with pytest.raises(pydaf.DafFormatError) as raised:
        read_all(pydaf.ZarrDaf(path, mode))
    message = str(raised.value)
    assert node in message and str(path) in message and problem in message, message
    assert (path / "zarr.json").read_bytes() == root
    assert list(outside.iterdir()) == []


def test_a_link_out_of_the_directory_at_an_unlisted_node_is_refused(tmp_path):
    """A link out of the directory in place of a node nothing lists (a planted property) is refused on read too, as
    FilesDaf refuses links: nothing outside the data set is read as part of it."""
    path, outside = tmp_path / "linked.daf.zarr", tmp_path / "outside"
    build(path)
    shutil.copytree(path / "vectors/cell/age", outside)  # (a whole, readable vector node outside)
    os.symlink(outside, path / "vectors/cell/planted")
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match=r"(?s)vectors/cell/planted.*link out of the directory"):
            pydaf.ZarrDaf(path, mode).vectors_set("cell")


def test_a_renamed_nzval_in_a_zip_archive_is_refused(tmp_path):
    """A ZIP archive keeps no consolidated metadata: a sparse property whose nzval entries were renamed (a flip in
    the central directory) is refused, never read as all-true Bools; an all-true Bool one (nzval left out, as Julia
    writes it) still reads."""
    path = tmp_path / "damaged.daf.zarr.zip"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A", "B", "C"])
    daf.set_vector("cell", "score", SparseVector(3, np.array([2]), np.array([1.5])))
    daf.set_vector("cell", "marked", SparseVector(3, np.array([2]), np.array([True])))
    daf.format.format_close()
    data = bytearray(path.read_bytes())
    position = data.find(b"PK\x01\x02")  # (the central directory: the local headers keep the true names)
    while (found := data.find(b"vectors/cell/score/nzval/", position)) >= 0:
        data[found:found + 25] = b"vectors/cell/score/nzvaX/"
        position = found + 1
    path.write_bytes(bytes(data))
    reader = pydaf.ZarrDaf(path, "r")
    assert np.asarray(reader.get_vector("cell", "marked")).tolist() == [False, True, False]
    with pytest.raises(pydaf.DafFormatError, match=r"(?s)the sparse vector: score.*has no nzval but holds: nzvaX"):
        reader.get_vector("cell", "score")


def test_what_a_killed_writer_leaves_keeps_opening(tmp_path):
    """The states a killed pydaf writer can leave open read-only (showing the committed data) and writable (which
    recovers them): a node written but not listed yet, a group folder without its zarr.json, a listed node renamed to
    its backup, and a delete by an earlier pydaf (which unlisted nodes last) half done."""
    path = tmp_path / "killed.daf.zarr"
    build(path)
    expected = read_all(pydaf.ZarrDaf(path, "r"))
    listed = (path / "zarr.json").read_bytes()
    daf = pydaf.ZarrDaf(path, "r+")
    daf.set_vector("gene", "weight", [0.5, 1.5])  # written, then (below) as if killed before it was listed
    daf.format.format_close()
    (path / "zarr.json").write_bytes(listed)
    (path / "matrices/gene/new").mkdir()  # a group creation killed before its zarr.json
    os.rename(path / "vectors/cell/age", path / "vectors/cell/.age.pydaf-backup")  # an overwrite killed midway
    os.rename(path / "scalars/organism", path / "scalars/.organism.pydaf-deleted-1-0")  # a delete killed midway
    expected = {key: value for key, value in expected.items() if key != "scalar/organism"}
    expected["vector/gene/weight"] = [0.5, 1.5]
    assert read_all(pydaf.ZarrDaf(path, "r")) == expected
    assert (path / "zarr.json").read_bytes() == listed  # (reading never writes)
    assert read_all(pydaf.ZarrDaf(path, "r+")) == expected
    keys = json.loads((path / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
    assert "vectors/gene/weight" in keys and "vectors/cell/age" in keys and "scalars/organism" not in keys
    assert read_all(pydaf.ZarrDaf(path, "r")) == expected


_CHURNER = r"""
import sys
import numpy as np, pydaf
path, round_ = sys.argv[1], int(sys.argv[2])
daf = pydaf.ZarrDaf(path, "r+")
print("ready", flush=True)
for step in range(1000000):
    value = 10 * round_ + step
    daf.set_vector("cell", "v", np.arange(3) + value, overwrite=True)
    daf.delete_vector("cell", "v")
    daf.set_vector("cell", "v", np.arange(3) + value)
    if daf.has_axis("tmp"):
        daf.delete_axis("tmp")
    daf.add_axis("tmp", ["p", "q"])
    daf.set_vector("tmp", "w", np.arange(2.0) + value)
    daf.set_matrix("tmp", "cell", "m", np.full((2, 3), float(value)))
    daf.set_matrix("cell", "tmp", "s", pydaf.SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([1, 3]),
                                                             np.array([value + 0.5, value + 0.25])))
    daf.delete_matrix("cell", "tmp", "s")
    daf.set_scalar("last", value, overwrite=True)
"""


def test_kills_while_adding_and_deleting_leave_a_data_set_that_opens_whole(tmp_path):
    """SIGKILL a process adding and deleting axes, vectors, matrices and scalars (each delete unlists a node before
    removing it, each write lists it after writing it), at random moments: each time, a read-only open and then a
    writable open read the whole data set without an error, each vector one whole value, identical in both."""
    path = tmp_path / "churned.daf.zarr"
    build(path)
    rng = np.random.default_rng(3)
    for round_ in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", _CHURNER, str(path), str(round_)], stdout=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.02, 0.5))
        child.send_signal(signal.SIGKILL)
        child.wait()
        found = read_all(pydaf.ZarrDaf(path, "r"))
        for key in ("vector/cell/v", "vector/tmp/w"):
            if key in found:
                values = np.asarray(found[key])
                assert (values - values[0]).tolist() == list(range(len(values))), (round_, key, values)
        assert found["vector/cell/age"] == [1, 2, 3], round_
        writer = pydaf.ZarrDaf(path, "r+")
        assert read_all(writer) == found, f"round {round_}: the writable open differs from what a reader saw"
        writer.format.format_close()


@pytest.mark.skipif(not JULIA_FIXTURE.is_dir(), reason="the Julia fixtures are not in ../shared")
def test_julia_written_stores_read_what_is_there_or_refuse_a_listed_node_missing(tmp_path):
    """Julia writes consolidated metadata too: its store reads whole in both modes, and an axis whose zarr.json is
    deleted is refused by name; with the consolidated metadata removed, what is there is read (as Julia would)."""
    path = tmp_path / "julia.daf.zarr"
    shutil.copytree(JULIA_FIXTURE, path)
    for folder, _, names in os.walk(path):
        os.chmod(folder, 0o755)
        for name in names:
            os.chmod(os.path.join(folder, name), 0o644)
    whole = read_all(pydaf.ZarrDaf(path, "r"))
    assert {"axis/cell", "axis/gene"} <= whole.keys()
    (path / "axes/gene/zarr.json").unlink()
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match=f"(?s)the node: axes/gene.*{path}"):
            read_all(pydaf.ZarrDaf(path, mode))
    root = json.loads((path / "zarr.json").read_bytes())
    del root["consolidated_metadata"]
    (path / "zarr.json").write_text(json.dumps(root))
    assert pydaf.ZarrDaf(path, "r").axes_set() == {"cell"}


def test_readers_racing_a_writer_never_see_damage(tmp_path):
    """Read-only opens in this process, while another process adds, overwrites and deletes nodes: a node the root
    listed when a reader looked may be gone (unlisted first) or replaced by the time it is read, and that is never
    taken for damage (the root is read again before a node is refused)."""
    path = tmp_path / "raced.daf.zarr"
    build(path)
    child = subprocess.Popen([sys.executable, "-c", _CHURNER, str(path), "0"], stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        reads, deadline = 0, time.monotonic() + soak(30, 3)
        while time.monotonic() < deadline:
            try:
                read_all(pydaf.ZarrDaf(path, "r"))
                reads += 1
            except pydaf.DafFormatError:
                raise
            except pydaf.DafError:
                pass  # (a property deleted between listing and reading it: the race, not damage)
        assert child.poll() is None, "the writer died"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert reads > 0
