"""ZarrDaf's reorder hooks (pydaf/formats/zarr/reorder.py, issue 26 item 6): values after :func:`pydaf.reorder_axes`
(dense, sparse and string vectors and matrices, both layouts, square matrices, an unpermuted axis, Julia's fixture),
the artifacts Julia's ``reset_reorder_axes!`` reads, a simulated crash after each property then
:func:`pydaf.reset_reorder_axes`, the open policy, Julia's own crash states, and real SIGKILLs of a child process
before each file-system call of a reorder (and of the rollback that follows), each followed by a reopen that must give
exactly the old data (or, once the lock is gone, exactly the new data). zarr-python reads every reordered store.

``PYDAF_SOAK=1`` kills before every file-system call; the default picks 24 of them spread evenly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.abc.reorder import SimulatedCrash
from pydaf.errors import DafAppendOnlyError, DafIncompleteError, DafLockedError
from pydaf.formats.zarr.reorder import REORDER_BACKUP_DIR
from pydaf.sparse import SparseMatrixCSC, SparseVector

ROOT = str(Path(__file__).resolve().parent.parent)
JULIA_ZARR = Path(ROOT).parent / "shared" / "fixtures" / "julia" / "zarr-flat.daf.zarr"
SOAK = os.environ.get("PYDAF_SOAK") == "1"

CELLS = ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]
GENES = ["g0", "g1", "g2", "g3", "g4"]
PERMUTATIONS = {"cell": [3, 6, 0, 2, 5, 1, 4], "gene": [4, 2, 0, 1, 3]}


def build(path: str) -> pydaf.ZarrDaf:
    """A data set with every kind of property: dense, sparse (nzval stored, omitted for all-true Bools, no entries),
    strings, all-zero (no chunk), both layouts, square matrices, and an axis (``batch``) the reorder leaves."""
    daf = pydaf.ZarrDaf(path, "w", name="reorder!")
    daf.add_axis("cell", CELLS).add_axis("gene", GENES).add_axis("batch", ["b0", "b1"])
    rng = np.random.default_rng(7)
    daf.set_scalar("title", "reorder me")
    daf.set_vector("cell", "age", np.arange(7, dtype=np.int32) * 3)
    daf.set_vector("cell", "score", np.array([0.5, -0.0, np.nan, 1e300, -2.0, 7.0, 0.25]))
    daf.set_vector("cell", "label", ["ä", "", "b", "long text", "x", "y", "z"])
    daf.set_vector("cell", "zero", np.zeros(7, dtype=np.float32))
    daf.set_vector("cell", "flag", SparseVector(7, np.array([2, 5, 6]), np.ones(3, dtype=bool)))
    daf.set_vector("cell", "sparse", SparseVector(7, np.array([1, 4, 7], dtype=np.int32),
                                                  np.array([1.5, -3.0, 9.0], dtype=np.float32)))
    daf.set_vector("cell", "nothing", SparseVector(7, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16)))
    daf.set_vector("gene", "rank", np.array([5, 1, 4, 2, 3], dtype=np.uint8))
    daf.set_vector("batch", "size", np.array([10, 20]))
    daf.set_matrix("cell", "gene", "UMIs", rng.random((7, 5)), relayout=True)
    dense = rng.integers(0, 3, (7, 5)) * (rng.random((7, 5)) < 0.4)
    daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(dense.astype(np.float32)), relayout=True)
    daf.set_matrix("cell", "gene", "notes", np.array([[f"{c}{g}" for g in GENES] for c in CELLS], dtype=object))
    daf.set_matrix("cell", "cell", "distance", rng.integers(-9, 9, (7, 7)).astype(np.int64))
    daf.set_matrix("cell", "cell", "adjacent", sp.csc_matrix(np.eye(7, k=1, dtype=bool) | np.eye(7, k=-2, dtype=bool)))
    daf.set_matrix("gene", "gene", "nothing", np.zeros((5, 5), dtype=np.float64))
    daf.set_matrix("cell", "batch", "counts", rng.integers(0, 100, (7, 2)).astype(np.int16), relayout=True)
    daf.set_matrix("gene", "batch", "mean", rng.random((5, 2)))
    return daf


def value(stored: Any) -> Any:
    """A stored value as something ``==`` compares exactly (numbers by their bytes: -0.0 and NaN too)."""
    if isinstance(stored, SparseVector | SparseMatrixCSC):
        dense = stored.to_dense()
        return ("sparse", dense.dtype.str, dense.shape, stored.nnz, dense.tobytes())
    array = np.asarray(stored)
    if array.dtype == object:
        return ("strings", array.shape, array.tolist())
    return ("dense", array.dtype.str, array.shape, np.asfortranarray(array).tobytes(order="F"))


def snapshot(path: str) -> dict[tuple[str, ...], Any]:
    """Everything stored, read from the files (through the format: no cache), by kind and names."""
    daf = pydaf.ZarrDaf(path, "r")
    storage = daf.format
    result: dict[tuple[str, ...], Any] = {}
    for name in storage.format_scalars_set():
        result[("scalar", name)] = storage.format_get_scalar(name)
    axes = sorted(storage.format_axes_set())
    for axis in axes:
        result[("axis", axis)] = storage.format_axis_vector(axis)[0].tolist()
        for name in storage.format_vectors_set(axis):
            result[("vector", axis, name)] = value(storage.format_get_vector(axis, name)[0])
        for other in axes:
            for name in storage.format_matrices_set(axis, other):
                matrix = storage.format_get_matrix(axis, other, name)[0]
                if isinstance(matrix, SparseMatrixCSC):  # (a valid CSC: rows ascending in each column)
                    rows = np.asarray(matrix.rowval)
                    for column in range(matrix.shape[1]):
                        assert np.all(np.diff(rows[matrix.colptr[column] - 1:matrix.colptr[column + 1] - 1]) > 0)
                result[("matrix", axis, other, name)] = value(matrix)
    daf.close()
    return result


def permuted(path: str, permutations: dict[str, list[int]]) -> dict[tuple[str, ...], Any]:
    """What :func:`snapshot` must give after ``permutations`` (computed by numpy indexing of the old values)."""
    daf = pydaf.ZarrDaf(path, "r")
    storage = daf.format
    result: dict[tuple[str, ...], Any] = {}

    def index(axis: str) -> Any:
        return np.asarray(permutations[axis]) if axis in permutations else slice(None)

    for name in storage.format_scalars_set():
        result[("scalar", name)] = storage.format_get_scalar(name)
    axes = sorted(storage.format_axes_set())
    for axis in axes:
        result[("axis", axis)] = np.asarray(storage.format_axis_vector(axis)[0], dtype=object)[index(axis)].tolist()
        for name in storage.format_vectors_set(axis):
            vector = storage.format_get_vector(axis, name)[0]
            if isinstance(vector, SparseVector):
                dense = vector.to_dense()[index(axis)]
                result[("vector", axis, name)] = ("sparse", dense.dtype.str, dense.shape, vector.nnz, dense.tobytes())
            else:
                result[("vector", axis, name)] = value(np.asarray(vector)[index(axis)])
        for other in axes:
            for name in storage.format_matrices_set(axis, other):
                matrix = storage.format_get_matrix(axis, other, name)[0]
                if isinstance(matrix, SparseMatrixCSC):
                    dense = matrix.to_dense()[index(axis)][:, index(other)]
                    result[("matrix", axis, other, name)] = ("sparse", dense.dtype.str, dense.shape, matrix.nnz,
                                                             dense.tobytes())
                else:
                    result[("matrix", axis, other, name)] = value(np.asarray(matrix)[index(axis)][:, index(other)])
    daf.close()
    return result


def leftovers(path: str) -> list[str]:
    """Hidden files a reorder (or any write) may leave: none once done or rolled back."""
    return sorted(os.path.relpath(os.path.join(folder, name), path) for folder, folders, files in os.walk(path)
                  for name in [*folders, *files] if name.startswith("."))


def check_zarr_python(path: str, expected: dict[tuple[str, ...], Any]) -> None:
    """zarr-python reads the store (its consolidated metadata) and finds the expected axes and dense data."""
    zarr = pytest.importorskip("zarr")
    group = zarr.open_group(path, mode="r")
    for key, expected_value in expected.items():
        if key[0] == "axis":
            assert group[f"axes/{key[1]}"][:].tolist() == expected_value
        elif key[0] == "matrix" and expected_value[0] == "dense":
            stored = group["/".join(("matrices", *key[1:]))][:]  # (Zarr's shape is the transpose)
            assert np.asfortranarray(stored.T).tobytes(order="F") == expected_value[3]
        elif key[0] == "vector" and expected_value[0] == "dense":
            assert group["/".join(("vectors", *key[1:]))][:].tobytes() == expected_value[3]


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "x.daf.zarr")
    build(path).close()
    return path


def test_reorder_permutes_every_property(store: str) -> None:
    old, expected = snapshot(store), permuted(store, PERMUTATIONS)
    assert old != expected
    batch_files = {key: os.stat(os.path.join(store, key)).st_ino for key in (
        "vectors/batch/size/c/0", "scalars/title/c/0", "matrices/batch/gene/zarr.json")
        if os.path.exists(os.path.join(store, key))}
    with pydaf.ZarrDaf(store, "r+") as daf:
        before = daf.get_matrix("cell", "gene", "UMIs").copy()
        pydaf.reorder_axes(daf, PERMUTATIONS, progress=False)
        # The open data set sees the new order (its caches were invalidated), as a new one does.
        assert daf.axis_vector("cell").tolist() == [CELLS[i] for i in PERMUTATIONS["cell"]]
        assert np.array_equal(daf.get_matrix("cell", "gene", "UMIs"),
                              before[PERMUTATIONS["cell"]][:, PERMUTATIONS["gene"]])
    assert snapshot(store) == expected
    assert leftovers(store) == []
    # The properties of the unpermuted axis alone were not rewritten (the same files).
    assert batch_files and all(os.stat(os.path.join(store, key)).st_ino == inode for key, inode in batch_files.items())
    check_zarr_python(store, expected)


def test_reorder_one_axis_and_back(store: str) -> None:
    old, expected = snapshot(store), permuted(store, {"gene": PERMUTATIONS["gene"]})
    with pydaf.ZarrDaf(store, "r+") as daf:
        pydaf.reorder_axes(daf, {"gene": PERMUTATIONS["gene"]}, progress=False)
    assert snapshot(store) == expected
    inverse = np.argsort(PERMUTATIONS["gene"]).tolist()
    with pydaf.ZarrDaf(store, "r+") as daf:
        pydaf.reorder_axes(daf, {"gene": inverse}, progress=False)
    assert snapshot(store) == old  # (the exact bytes back, -0.0 and NaN included)


def test_all_fill_nodes_keep_no_chunk(store: str) -> None:
    """A node whose values are all the fill value has no chunk (Julia's bytes) and keeps none after a reorder."""
    assert not os.path.exists(os.path.join(store, "vectors/cell/zero/c"))
    assert not os.path.exists(os.path.join(store, "vectors/cell/flag/nzval"))  # (all-true Bools: no nzval)
    with pydaf.ZarrDaf(store, "r+") as daf:
        pydaf.reorder_axes(daf, PERMUTATIONS, progress=False)
        assert np.asarray(daf.get_vector("cell", "flag")).tolist() == [
            bool(i in (1, 4, 5)) for i in PERMUTATIONS["cell"]]
    assert not os.path.exists(os.path.join(store, "vectors/cell/zero/c"))
    assert not os.path.exists(os.path.join(store, "vectors/cell/flag/nzval"))


def test_julia_fixture(tmp_path: Path) -> None:
    if not JULIA_ZARR.is_dir():
        pytest.skip(f"Julia's fixture is absent: {JULIA_ZARR}")
    path = str(tmp_path / "julia.daf.zarr")
    shutil.copytree(JULIA_ZARR, path)
    with pydaf.ZarrDaf(path, "r+") as daf:  # (pydaf's writable open rewrites the root in its key order)
        permutations = {axis: np.random.default_rng(3).permutation(daf.axis_length(axis)).tolist()
                        for axis in sorted(daf.axes_set())}
    old, expected = snapshot(path), permuted(path, permutations)
    assert any(key[0] in ("vector", "matrix") for key in old)
    with pydaf.ZarrDaf(path, "r+") as daf:
        pydaf.reorder_axes(daf, permutations, progress=False)
    assert snapshot(path) == expected
    assert leftovers(path) == []
    check_zarr_python(path, expected)


# Crashes (an exception part way: the simulated crash of Julia's tests, and a failure at each file-system call).


def n_properties(path: str, permutations: dict[str, list[int]]) -> int:
    with pydaf.ZarrDaf(path, "r+") as daf:
        axes = {axis: pydaf.PlannedAxis.of(daf.axis_vector(axis), permutation)
                for axis, permutation in permutations.items()}
        plan = pydaf.build_reorder_plan(daf.format, axes)
    return len(plan.planned_vectors) + len(plan.planned_matrices)


def test_simulated_crash_after_each_property_then_reset(store: str) -> None:
    old, expected = snapshot(store), permuted(store, PERMUTATIONS)
    count = n_properties(store, PERMUTATIONS)
    assert count >= 20
    age_chunk = os.stat(os.path.join(store, "vectors/cell/age/c/0")).st_ino
    for crash_after in kill_points(count, 8):
        with pydaf.ZarrDaf(store, "r+") as daf:
            with pytest.raises(SimulatedCrash):
                pydaf.reorder_axes(daf, PERMUTATIONS, progress=False, _simulate_crash=crash_after)
            assert daf.format.format_has_reorder_lock()
            # The crash is real: the axis (replaced first) and the first properties are in the new order on disk.
            assert daf.format.format_axis_vector("cell")[0].tolist() == [CELLS[i] for i in PERMUTATIONS["cell"]]
            # Julia's artifacts: the lock folder, a hard link of each old file at the node's own path.
            backup = os.path.join(store, REORDER_BACKUP_DIR)
            assert os.path.isdir(os.path.join(backup, "axes", "cell"))
            assert sorted(os.listdir(os.path.join(backup, "vectors", "cell"))) == sorted(
                name for _, name in [k[1:] for k in old if k[0] == "vector" and k[1] == "cell"])
            assert [name for name in os.listdir(backup) if name.startswith(".")] == []
            assert os.stat(os.path.join(backup, "vectors/cell/age/c/0")).st_ino == age_chunk  # (a link, not a copy)
            # A second reorder is refused until the reset.
            with pytest.raises(DafIncompleteError, match="reset_reorder_axes"):
                pydaf.reorder_axes(daf, PERMUTATIONS, progress=False)
            assert pydaf.reset_reorder_axes(daf) is True
            assert pydaf.reset_reorder_axes(daf) is False
            assert daf.get_vector("cell", "age").tolist() == (np.arange(7) * 3).tolist()  # (caches invalidated)
        assert snapshot(store) == old, crash_after
        assert leftovers(store) == []
    with pydaf.ZarrDaf(store, "r+") as daf:
        pydaf.reorder_axes(daf, PERMUTATIONS, progress=False)
    assert snapshot(store) == expected


def fail_at(call: str, at: int, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the ``at``-th call of ``os.<call>`` from now fail as a full disk would; returns the call counter."""
    original = getattr(os, call)
    calls = [0]

    def failing(*arguments: Any, **keywords: Any) -> Any:
        calls[0] += 1
        if calls[0] == at:
            raise OSError(28, "No space left on device (simulated)")
        return original(*arguments, **keywords)

    monkeypatch.setattr(os, call, failing)
    return calls


@pytest.mark.parametrize("call", ["rename", "link", "mkdir", "fsync", "pwrite"])
def test_failure_at_file_system_calls_then_reset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """An error (a full disk, ...) at a file-system call of a reorder leaves the lock (then the reset gives the exact
    old data) or none (then the data set is entirely old or entirely new)."""
    pristine, path = str(tmp_path / "pristine.daf.zarr"), str(tmp_path / "x.daf.zarr")
    build(pristine).close()
    old, new = snapshot(pristine), permuted(pristine, PERMUTATIONS)
    shutil.copytree(pristine, path)
    with pydaf.ZarrDaf(path, "r+") as daf, monkeypatch.context() as patch:
        calls = fail_at(call, 0, patch)
        pydaf.reorder_axes(daf, PERMUTATIONS, progress=False)
    total = calls[0]
    assert total > 5
    outcomes = set()
    for at in kill_points(total, 8):
        shutil.rmtree(path)
        shutil.copytree(pristine, path)
        with pydaf.ZarrDaf(path, "r+") as daf:
            with monkeypatch.context() as patch:
                fail_at(call, at, patch)
                try:
                    pydaf.reorder_axes(daf, PERMUTATIONS, progress=False)
                    outcomes.add("done")
                except pydaf.DafError as error:
                    assert "No space left" in str(error) and path in str(error), error
                    outcomes.add("failed")
            locked = daf.format.format_has_reorder_lock()
            assert pydaf.reset_reorder_axes(daf) is locked
        state = snapshot(path)
        assert state == old if locked else state in (old, new), (call, at)
        pydaf.ZarrDaf(path, "r+").close()  # (removes what a failed removal of the backup left, once renamed away)
        assert leftovers(path) == [], (call, at)
    assert "failed" in outcomes


# The open policy.


def test_open_after_an_interrupted_reorder(store: str) -> None:
    old = snapshot(store)
    daf = pydaf.ZarrDaf(store, "r+")
    with pytest.raises(SimulatedCrash):
        pydaf.reorder_axes(daf, PERMUTATIONS, progress=False, _simulate_crash=5)
    # While this process holds the writer lock, no other open rolls it back (it may be reordering right now).
    with pytest.raises(DafIncompleteError, match="reorder"):
        pydaf.ZarrDaf(store, "r")
    with pytest.raises(DafIncompleteError, match="reorder"):
        pydaf.ZarrDaf(store, "r+")
    daf.close()
    with pytest.raises(DafIncompleteError) as raised:
        pydaf.open_daf(store, "r")
    message = str(raised.value)
    assert store in message and "interrupted reorder_axes" in message
    assert '"r+"' in message and "pydaf.reset_reorder_axes" in message
    assert os.path.isdir(os.path.join(store, REORDER_BACKUP_DIR))  # (a read-only open changes nothing)
    with pytest.warns(UserWarning, match="rolled back an interrupted reorder_axes") as warned:
        reopened = pydaf.ZarrDaf(store, "r+")
    assert store in str(warned[0].message)
    assert not reopened.format.format_has_reorder_lock()
    reopened.close()
    assert snapshot(store) == old
    assert leftovers(store) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pydaf.ZarrDaf(store, "r+").close()  # (nothing left to roll back: no warning)


HOLD_WRITER = """
import sys, time, pydaf
daf = pydaf.ZarrDaf(sys.argv[1], "r+")
print("holding", flush=True)
time.sleep(30)
"""


def test_read_only_open_while_another_process_writes(store: str) -> None:
    """A reorder lock while another live process holds the writer lock is that process's reorder in progress: a
    read-only open says so (the lock error), and never rolls it back."""
    child = subprocess.Popen([sys.executable, "-c", HOLD_WRITER, store], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        os.mkdir(os.path.join(store, REORDER_BACKUP_DIR))  # (as its reorder would)
        with pytest.raises(DafLockedError, match="reordering"):
            pydaf.ZarrDaf(store, "r")
        with pytest.raises(DafLockedError):
            pydaf.ZarrDaf(store, "r+")
        assert os.path.isdir(os.path.join(store, REORDER_BACKUP_DIR))
    finally:
        child.kill()
        child.wait()
    with pytest.warns(UserWarning, match="rolled back"):
        pydaf.ZarrDaf(store, "r+").close()


def test_zip_backed_zarr_refuses(tmp_path: Path) -> None:
    path = str(tmp_path / "x.daf.zarr.zip")
    daf = pydaf.ZarrDaf(path, "w+").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
    assert daf.format.supports_reorder is False
    with pytest.raises(DafAppendOnlyError, match="append-only") as raised:
        pydaf.reorder_axes(daf, {"cell": [1, 0]}, progress=False)
    assert path in str(raised.value)
    assert daf.format.format_has_reorder_lock() is False and daf.format.format_reset_reorder() is False
    assert daf.get_vector("cell", "age").tolist() == [1, 2]


# Julia's crash states (what its reorder leaves when killed), recovered by pydaf.


def link_node(store: str, key: str, only: str | None = None, backup: str | None = None) -> None:
    """Link a node's files (``only`` one of them) into a backup (by default the reorder backup), as Julia does."""
    source = os.path.join(store, key)
    target = os.path.join(backup or os.path.join(store, REORDER_BACKUP_DIR), key)
    for folder, _, files in os.walk(source):
        os.makedirs(os.path.join(target, os.path.relpath(folder, source)), exist_ok=True)
        for name in files:
            if only is None or name == only:
                os.link(os.path.join(folder, name), os.path.join(target, os.path.relpath(folder, source), name))


def test_julia_crash_during_its_replace(store: str) -> None:
    """Julia's backup is complete; it replaced some nodes (delete, then write anew) and was killed, one node deleted
    and not yet written: pydaf's writable open puts every node back."""
    old = snapshot(store)
    held = os.path.join(os.path.dirname(store), "held")
    for key in ("axes/cell", "vectors/cell/age", "vectors/cell/label", "matrices/cell/gene/UMIs"):
        link_node(store, key, backup=held)
    with pydaf.ZarrDaf(store, "r+") as daf:  # (Julia's new nodes: new files)
        daf.set_vector("cell", "age", np.arange(7, dtype=np.int32)[::-1] * 3, overwrite=True)
        daf.set_matrix("cell", "gene", "UMIs", np.zeros((7, 5)), overwrite=True, relayout=False)
    os.rename(held, os.path.join(store, REORDER_BACKUP_DIR))
    shutil.rmtree(os.path.join(store, "vectors/cell/label"))  # (deleted, never written: listed, missing)
    with pytest.raises(DafIncompleteError):
        pydaf.ZarrDaf(store, "r")
    with pytest.warns(UserWarning, match="rolled back"):
        pydaf.ZarrDaf(store, "r+").close()
    assert snapshot(store) == old
    assert leftovers(store) == []


def test_julia_crash_during_its_backup(store: str) -> None:
    """Julia links the backup in place, so a kill leaves a node half linked there (here only its zarr.json); Julia's
    reset would put that half node back. pydaf's restores nothing the live node already holds: no data is lost."""
    old = snapshot(store)
    link_node(store, "axes/cell")
    link_node(store, "vectors/cell/age", only="zarr.json")
    os.makedirs(os.path.join(store, REORDER_BACKUP_DIR, "vectors", "cell", "score"))  # (made, nothing linked yet)
    with pytest.warns(UserWarning, match="rolled back"):
        pydaf.ZarrDaf(store, "r+").close()
    assert snapshot(store) == old
    assert leftovers(store) == []


# Real kills.


KILL_CHILD = """
import os, signal, sys, warnings
import pydaf

path, kill_at, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3]
calls = [0]
armed = [False]


def counted(function):
    def call(*arguments, **keywords):
        if armed[0]:
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return function(*arguments, **keywords)
    return call


for name in ("rename", "replace", "link", "mkdir", "rmdir", "unlink", "remove", "fsync", "posix_fallocate"):
    setattr(os, name, counted(getattr(os, name)))
permutations = {"cell": [3, 6, 0, 2, 5, 1, 4], "gene": [4, 2, 0, 1, 3]}
if phase == "reorder":
    daf = pydaf.ZarrDaf(path, "r+")
    armed[0] = True
    pydaf.reorder_axes(daf, permutations, progress=False)
else:  # a writable open, rolling back what a killed reorder left
    armed[0] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        daf = pydaf.ZarrDaf(path, "r+")
armed[0] = False
print(calls[0])
"""


def run_kill_child(path: str, kill_at: int, phase: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", KILL_CHILD, path, str(kill_at), phase], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})


def kill_points(total: int, count: int) -> list[int]:
    if SOAK or total <= count:
        return list(range(1, total + 1))
    return sorted({round(point) for point in np.linspace(1, total, count)})


def test_kills_at_each_file_system_call(tmp_path: Path) -> None:
    pristine = str(tmp_path / "pristine.daf.zarr")
    build(pristine).close()
    old, new = snapshot(pristine), permuted(pristine, PERMUTATIONS)
    path = str(tmp_path / "x.daf.zarr")
    shutil.copytree(pristine, path)
    done = run_kill_child(path, 10**9, "reorder")
    assert done.returncode == 0, done.stderr[-3000:]
    total = int(done.stdout.split()[-1])
    assert snapshot(path) == new
    assert total > 50
    interrupted = 0
    for kill_at in kill_points(total, 24):
        shutil.rmtree(path)
        shutil.copytree(pristine, path)
        killed = run_kill_child(path, kill_at, "reorder")
        assert killed.returncode == -9, (kill_at, killed.stderr[-3000:])
        locked = os.path.isdir(os.path.join(path, REORDER_BACKUP_DIR))
        if locked:
            interrupted += 1
            with pytest.raises(DafIncompleteError):
                pydaf.ZarrDaf(path, "r")
            # Kill the rollback too, part way (at a call that depends on the first kill), once in two.
            if kill_at % 2:
                again = run_kill_child(path, 1 + kill_at % 11, "open")
                assert again.returncode in (0, -9), again.stderr[-3000:]
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            pydaf.ZarrDaf(path, "r+").close()
        state = snapshot(path)
        assert leftovers(path) == [], kill_at
        if locked:
            assert state == old, kill_at
            assert any("rolled back" in str(warning.message) for warning in warned) or kill_at % 2
        else:
            assert state in (old, new), kill_at
        check_zarr_python(path, state)
    assert interrupted >= len(kill_points(total, 24)) // 2
