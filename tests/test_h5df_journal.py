"""The H5df undo journal (pydaf/formats/h5df/undo_journal.py): a writer killed inside HDF5's flush leaves a file that a
writable open rolls back to its last commit, exactly; a read-only open never writes and says what to do; hostile or
damaged journals are refused; files left open at exit or across a fork close cleanly.

Writers are real child processes killed with SIGKILL; to land the kill at an exact point of the flush, the child
kills itself right after its N-th write over committed bytes (the moment that, without the journal, tore a group).
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import pydaf
from pydaf.check import check_daf
from pydaf.formats.h5df.undo_journal import MAGIC, RECORDS_START, JournaledFile, journal_path, recover

REPOSITORY = Path(__file__).resolve().parent.parent
MATRICES = [f"m{index}" for index in range(12)]  # more links than HDF5 keeps in a group's header: a dense group


def run(code: str, *arguments: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *arguments], env=environment,
                          capture_output=True, text=True, timeout=120)


def create(path: Path) -> dict[str, float]:
    """A data set of several matrices in one group (and a vector and scalars); returns its values."""
    daf = pydaf.H5df(path, "w")
    daf.add_axis("cell", [f"c{index}" for index in range(50)]).add_axis("gene", ["g0", "g1", "g2"])
    for index, name in enumerate(MATRICES):
        daf.set_matrix("cell", "gene", name, np.full((50, 3), float(index)), relayout=False)
    daf.set_vector("cell", "age", np.arange(50.0))
    daf.set_scalar("title", "old")
    return state(daf)


def state(daf: pydaf.DafReader) -> dict[str, float | str]:
    """Every property's value (each matrix is filled with one value), checking each is whole."""
    result: dict[str, float | str] = {f"scalar {name}": daf.get_scalar(name) for name in daf.scalars_set()}
    for name in daf.matrices_set("cell", "gene", relayout=False):
        matrix = np.asarray(daf.get_matrix("cell", "gene", name, relayout=False))
        assert (matrix == matrix[0, 0]).all(), f"{name} is mixed"
        result[f"matrix {name}"] = float(matrix[0, 0])
    result["vector age"] = float(np.asarray(daf.get_vector("cell", "age")).sum())
    return result


# The child: one write operation (overwrite a matrix, add another, set a scalar, delete a matrix: each its own
# commit); the process kills itself right after its N-th write over committed bytes.
KILLED_INSIDE_A_FLUSH = """
    import os, signal, sys
    import numpy as np, pydaf
    from pydaf.formats.h5df import undo_journal

    path, operation, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    daf = pydaf.H5df(path, "r+")
    writes = 0
    counting = operation != "overwrite_twice"
    original = undo_journal.JournaledFile.write_at

    def write_at(self, offset, data):
        global writes
        overwrites = offset < self.committed_size
        original(self, offset, data)
        if overwrites and counting:
            writes += 1
            if writes == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    undo_journal.JournaledFile.write_at = write_at
    if operation == "overwrite":
        daf.set_matrix("cell", "gene", "m5", np.full((50, 3), 100.0), relayout=False, overwrite=True)
    elif operation == "add":
        daf.set_matrix("cell", "gene", "new", np.full((50, 3), 200.0), relayout=False)
    elif operation == "scalar":
        daf.set_scalar("title", "new", overwrite=True)
    elif operation == "delete":
        daf.delete_matrix("cell", "gene", "m7")
    elif operation == "overwrite_twice":  # the second reuses the space the first freed (and saves none of it)
        daf.set_matrix("cell", "gene", "m5", np.full((50, 3), 100.0), relayout=False, overwrite=True)
        counting = True
        daf.set_matrix("cell", "gene", "m5", np.full((50, 3), 101.0), relayout=False, overwrite=True)
    elif operation == "build":
        with daf.empty_dense_matrix("cell", "gene", "m2", "Float64", overwrite=True) as matrix:
            matrix[...] = 300.0
    print(writes)
"""

NEW_VALUES = {
    "overwrite": {"matrix m5": 100.0},
    "overwrite_twice": {"matrix m5": 101.0},
    "add": {"matrix new": 200.0},
    "scalar": {"scalar title": "new"},
    "delete": {"matrix m7": None},
    "build": {"matrix m2": 300.0},
}


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("operation", sorted(NEW_VALUES))
def test_a_writer_killed_inside_a_flush_is_rolled_back(tmp_path, operation):
    path = tmp_path / "killed.h5df"
    old = create(path)
    new = {**old, **NEW_VALUES[operation]}
    new = {key: value for key, value in new.items() if value is not None}
    if operation == "overwrite_twice":  # (the first overwrite committed before any kill)
        old = {**old, "matrix m5": 100.0}
    rollbacks = 0
    for kill_at in range(1, 40):
        original = path.read_bytes()
        child = run(KILLED_INSIDE_A_FLUSH, str(path), operation, str(kill_at))
        if child.returncode == 0:  # the operation did fewer overwrites: it committed
            assert int(child.stdout) < kill_at
            assert not os.path.exists(journal_path(str(path)))
            assert state(pydaf.H5df(path, "r")) == new
            break
        assert child.returncode == -signal.SIGKILL, child.stderr
        journal = Path(journal_path(str(path)))
        if journal.exists() and journal.stat().st_size > RECORDS_START:  # (bytes were saved, then overwritten)
            rollbacks += 1
            with pytest.raises(pydaf.DafFormatError, match="open it once in mode r\\+ to repair it"):
                pydaf.H5df(path, "r")
            assert journal.exists(), "a read-only open deleted the journal"
        else:  # (the kill came after writes over free space only: nothing to roll back)
            assert state(pydaf.H5df(path, "r")) == old
        repaired = pydaf.H5df(path, "r+")
        assert not os.path.exists(journal_path(str(path)))
        assert state(repaired) == old, f"killed at overwrite {kill_at}"
        assert check_daf(repaired) == []
        del repaired
        if operation != "overwrite_twice":  # (there, free space the second overwrite reused is not restored)
            assert path.read_bytes() == original, "the rollback did not restore the committed bytes exactly"
    else:
        pytest.fail("the operation never committed")
    assert rollbacks >= 1, "no kill landed inside the flush"


def test_a_torn_last_record_is_ignored(tmp_path):
    """A writer killed while it appended a record had not yet overwritten the bytes that record saves."""
    path = tmp_path / "file.bin"
    path.write_bytes(b"0123456789abcdef")
    file = JournaledFile(str(path))
    file.seek(2)
    file.write(b"XY")
    file.write_at(20, memoryview(b"tail"))  # past the committed end: no record, cut by the rollback
    file.preserve(10, 3)  # the next record, appended before its bytes are overwritten...
    file.close()  # (as if killed: the journal stays)
    journal = Path(journal_path(str(path)))
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-2])  # ... cut short by the kill: its bytes 10..13 were not overwritten
    assert path.read_bytes()[:16] == b"01XY456789abcdef"
    recover(str(path), writable=True)
    assert path.read_bytes() == b"0123456789abcdef"
    assert not journal.exists()


def test_a_journal_with_only_its_header_changed_nothing(tmp_path):
    path = tmp_path / "data.h5df"
    values = create(path)
    header = MAGIC + (os.path.getsize(path)).to_bytes(8, "little")
    Path(journal_path(str(path))).write_bytes(header)  # (a writer killed while it wrote the header's checksum)
    assert state(pydaf.H5df(path, "r")) == values  # read-only: opens, and writes nothing
    assert os.path.exists(journal_path(str(path)))
    assert state(pydaf.H5df(path, "r+")) == values
    assert not os.path.exists(journal_path(str(path)))


def test_a_corrupt_journal_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "data.h5df"
    create(path)
    before = path.read_bytes()
    Path(journal_path(str(path))).write_bytes(b"NOT A JOURNAL AT ALL, SORRY" * 3)
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="is not a pydaf journal"):
            pydaf.H5df(path, mode)
    assert path.read_bytes() == before


def test_a_planted_journal_link_is_refused(tmp_path):
    path = tmp_path / "data.h5df"
    create(path)
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    os.symlink(outside, journal_path(str(path)))
    for mode in ("r", "r+"):
        with pytest.raises(pydaf.DafFormatError, match="is not a regular file"):
            pydaf.H5df(path, mode)
    assert outside.read_text() == "precious"


def test_a_planted_journal_link_is_not_followed_by_a_writer(tmp_path):
    """A link planted after the open, where the writer will create its journal: the writer refuses to overwrite
    anything, and the file keeps its committed state. (HDF5 can't flush again through a handle whose flush failed:
    the file must be reopened, as the error says.)"""
    path = tmp_path / "data.h5df"
    create(path)
    daf = pydaf.H5df(path, "r+")
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    os.symlink(outside, journal_path(str(path)))
    with pytest.raises(pydaf.DafStorageError, match=r"(?s)scalar: title.*can't start the undo journal.*reopen"):
        daf.set_scalar("title", "new", overwrite=True)
    assert outside.read_text() == "precious"
    os.unlink(journal_path(str(path)))
    del daf
    gc.collect()
    reopened = pydaf.H5df(path, "r+")  # (rolls back whatever closing the broken handle wrote)
    assert reopened.get_scalar("title") == "old"
    reopened.set_scalar("title", "newer", overwrite=True)
    assert pydaf.H5df(path, "r").get_scalar("title") == "newer"


LEFT_OPEN = """
    import os, sys
    import numpy as np, pydaf
    daf = pydaf.H5df(sys.argv[1], "r+")
    daf.set_vector("cell", "left", np.ones(50))
    held = daf.get_matrix("cell", "gene", "m1", relayout=False)
    if sys.argv[2] == "fork":
        child = os.fork()
        if child == 0:
            sys.exit(0)  # a normal exit of the child: its inherited (parent's) HDF5 file must not be written
        _, status = os.waitpid(child, 0)
        assert status == 0, status
        daf.set_vector("cell", "after_fork", np.ones(50))
    print("done")
"""


@pytest.mark.parametrize("how", ["exit", "fork"])
def test_a_file_left_open_at_exit_closes_cleanly(tmp_path, how):
    if how == "fork" and not hasattr(os, "fork"):
        pytest.skip("needs fork")
    path = tmp_path / "data.h5df"
    values = create(path)
    child = run(LEFT_OPEN, str(path), how)
    assert child.returncode == 0 and child.stdout == "done\n", child.stderr
    assert not os.path.exists(journal_path(str(path)))
    daf = pydaf.H5df(path, "r")
    assert state(daf) == values
    assert daf.vectors_set("cell") == ({"age", "left", "after_fork"} if how == "fork" else {"age", "left"})


HOLDS_FOR_WRITING = """
    import sys, time, pydaf
    daf = pydaf.H5df(sys.argv[1], "r+")
    print("ready", flush=True)
    sys.stdin.read()
"""

OTHER_HDF5_PROGRAM = """
    import sys, h5py
    try:
        with h5py.File(sys.argv[1], sys.argv[2]) as file:
            print("opened", len(file["matrices/cell/gene"]))
    except OSError as error:
        print("refused", "unable to lock file" in str(error))
"""


def test_another_hdf5_program_cannot_write_while_pydaf_writes(tmp_path):
    path = tmp_path / "data.h5df"
    create(path)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDS_FOR_WRITING), str(path)],
                              env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "ready\n"
        assert run(OTHER_HDF5_PROGRAM, str(path), "r+").stdout == "refused True\n"
        assert run(OTHER_HDF5_PROGRAM, str(path), "r").stdout == f"opened {len(MATRICES)}\n"
    finally:
        writer.communicate("", timeout=60)
    assert writer.returncode == 0
    with h5py.File(path, "r+") as file:  # the writer is gone: so is its lock
        assert len(file["matrices/cell/gene"]) == len(MATRICES)
