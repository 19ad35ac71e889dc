"""H5df's reorder hooks (``pydaf/formats/h5df/reorder.py``), by both methods (a permuted copy renamed over the file,
and Julia's backup then permutation in place): every kind of property permuted or rewritten, two groups of one file
in one call, Julia's artifacts (lock dataset, lock entries, backup file), a simulated crash after each property then a
reset, the open policy, and real SIGKILLs of a child process at chosen points, each followed by a reopen that must
give back exactly the old data (or, once the new order is whole, exactly the new)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.abc.reorder import SimulatedCrash
from pydaf.core.reorder import reorder_axes, reset_reorder_axes
from pydaf.errors import DafIncompleteError
from pydaf.formats.h5df import reorder as h5df_reorder
from pydaf.formats.h5df.reorder import REORDER_LOCK_DATASET, REORDER_REPOS_GROUP, reorder_backup_path, swap_path
from pydaf.formats.h5df.undo_journal import journal_path
from pydaf.sparse import SparseVector

from .julia_examples import FIXTURES

REPOSITORY = Path(__file__).resolve().parents[1]
CELL_PERMUTATION = [4, 0, 11, 5, 2, 9, 1, 3, 10, 7, 6, 8]
GENE_PERMUTATION = [2, 3, 0, 1]


def fill(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Axes cell (12, permuted), gene (4, permuted), batch (2, never permuted); dense and sparse vectors of numbers,
    Booleans and strings; dense, sparse and string matrices in both layouts, square ones, and ones of batch only."""
    generator = np.random.default_rng(26)
    daf.add_axis("cell", [f"C{index}" for index in range(12)]).add_axis("gene", [f"G{index}" for index in range(4)])
    daf.add_axis("batch", ["B0", "B1"])
    daf.set_vector("cell", "age", generator.random(12))
    daf.set_vector("cell", "count", np.arange(12, dtype=np.int16))
    daf.set_vector("cell", "is_good", np.arange(12) % 3 == 1)
    daf.set_vector("cell", "type", [f"t{index}" for index in range(12)])
    daf.set_vector("cell", "note", ["", "", "", "", "x", "", "", "", "", "", "", ""])  # (stored sparse: nzind + nztxt)
    daf.set_vector("cell", "sparse_value", SparseVector(12, np.array([2, 5], dtype=np.uint32), np.array([1.5, -2.0])))
    daf.set_vector("cell", "marked", SparseVector(12, np.array([1, 4, 12]), np.ones(3, dtype=bool)))  # (no nzval)
    daf.set_vector("gene", "length", np.array([10, 20, 30, 40], dtype=np.uint64))
    daf.set_vector("batch", "size", np.array([3, 3]))
    umis = generator.integers(0, 5, (12, 4)).astype(np.float32)
    daf.set_matrix("cell", "gene", "UMIs", umis)  # (both layouts)
    dense_sparse = np.where(generator.random((12, 4)) < 0.4, generator.integers(1, 9, (12, 4)), 0).astype(np.int32)
    daf.set_matrix("gene", "cell", "sparse", sp.csc_matrix(dense_sparse.T), relayout=False)
    daf.set_matrix("cell", "gene", "flags", sp.csc_matrix(dense_sparse > 0), relayout=False)  # (all-true: no nzval)
    daf.set_matrix("cell", "cell", "distance", generator.random((12, 12)))
    daf.set_matrix("cell", "cell", "knn", sp.csc_matrix(np.eye(12, k=1) * 2.0))
    daf.set_matrix("cell", "batch", "label", np.array([[f"l{row}{column}" for column in range(2)] for row in range(12)],
                                                        dtype=object))
    rare = np.full((12, 4), "", dtype=object)
    rare[3, 1] = rare[7, 2] = "r"
    daf.set_matrix("cell", "gene", "rare", rare, relayout=False)  # (stored sparse: colptr, rowval, nztxt)
    daf.set_matrix("batch", "gene", "totals", generator.random((2, 4)), relayout=False)
    daf.set_scalar("organism", "human")
    return daf


def snapshot(daf: pydaf.DafReader) -> dict:
    """Every axis, vector and stored matrix (each layout as stored), as dense lists."""
    values: dict = {"scalars": {name: daf.get_scalar(name) for name in daf.scalars_set()}}
    for axis in sorted(daf.axes_set()):
        values[axis] = daf.axis_vector(axis).tolist()
        for name in sorted(daf.vectors_set(axis)):
            values[(axis, name)] = np.asarray(daf.get_vector(axis, name)).tolist()
        for other in sorted(daf.axes_set()):
            for name in sorted(daf.matrices_set(axis, other, relayout=False, tensors=False)):
                matrix = daf.get_matrix(axis, other, name, relayout=False)
                values[(axis, other, name)] = (matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)).tolist()
    return values


def permuted(values: dict, permutations: dict[str, list[int]]) -> dict:
    """What ``snapshot`` gives after the reorder (numpy indexing of the old values)."""
    result = {}
    for key, value in values.items():
        if key == "scalars":
            result[key] = value
        elif isinstance(key, str):
            result[key] = np.asarray(value, dtype=object)[permutations[key]].tolist() if key in permutations else value
        else:
            array = np.asarray(value, dtype=object)
            for position, axis in enumerate(key[:-1]):
                if axis in permutations:
                    array = np.take(array, permutations[axis], axis=position)
            result[key] = array.tolist()
    return result


def read_snapshot(where: str) -> dict:
    """``snapshot`` of a read-only open, closed after (so another process can write the file)."""
    daf = pydaf.H5df(where, "r")
    try:
        return snapshot(daf)
    finally:
        daf.close()


def artifacts(path: str) -> list[str]:
    """What a reorder (or a write) leaves beside the file, and its reorder objects in the file."""
    folder = os.path.dirname(path)
    found = sorted(name for name in os.listdir(folder) if name != os.path.basename(path))
    with h5py.File(path, "r", locking=False) as file:
        found += [name for name in (REORDER_LOCK_DATASET, REORDER_REPOS_GROUP) if name in file]
    return found


@pytest.fixture
def h5df_path(tmp_path):
    path = str(tmp_path / "data.h5df")
    fill(pydaf.H5df(path, "w")).close()
    return path


PERMUTATIONS = {"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION}


@pytest.fixture(params=["swap", "backup"])
def method(request, monkeypatch):
    """Each method of an H5df reorder (``swap`` is the default where it applies)."""
    monkeypatch.setattr(h5df_reorder, "REORDER_BY_SWAP", request.param == "swap")
    return request.param


@pytest.fixture
def backup_protocol(monkeypatch):
    """Julia's protocol: a backup of the file, then the permutation in place."""
    monkeypatch.setattr(h5df_reorder, "REORDER_BY_SWAP", False)


def test_reorder_permutes_every_kind_of_property(h5df_path, method):
    daf = pydaf.H5df(h5df_path, "r+")
    assert h5df_reorder.reorder_method(daf.format) == method
    inode = os.stat(h5df_path).st_ino
    old = snapshot(daf)
    with h5py.File(h5df_path, "r", locking=False) as file:  # (the cases this test means to cover are stored so)
        assert "nztxt" in file["vectors/cell/note"] and "nzval" not in file["vectors/cell/marked"]
        assert "nzval" not in file["matrices/cell/gene/flags"] and "nztxt" in file["matrices/cell/gene/rare"]
    held = daf.get_vector("cell", "age")  # a reader's mapped array keeps its values
    held_values = held.tolist()
    size = os.path.getsize(h5df_path)
    reorder_axes(daf, PERMUTATIONS, progress=False)
    expected = permuted(old, PERMUTATIONS)
    assert snapshot(daf) == expected
    assert held.tolist() == held_values and not held.flags.writeable
    assert artifacts(h5df_path) == []
    assert (os.stat(h5df_path).st_ino != inode) == (method == "swap")  # (the copy renamed over the file)
    # Numbers were permuted in place: the file grew only by the rewritten strings (axes, string properties).
    assert os.path.getsize(h5df_path) < size + 64 * 1024
    daf.set_vector("cell", "written_after", np.arange(12))  # (the handle writes the file now at the path)
    assert snapshot(daf) == {**expected, ("cell", "written_after"): list(range(12))}
    daf.close()
    expected[("cell", "written_after")] = list(range(12))
    assert read_snapshot(h5df_path) == expected
    with h5py.File(h5df_path, "r") as file:  # plain h5py (as Julia) reads the new order
        assert [name.decode() for name in file["axes/cell"][()]] == expected["cell"]
        np.testing.assert_array_equal(file["matrices/cell/gene/UMIs"][()].T, expected[("cell", "gene", "UMIs")])
        np.testing.assert_array_equal(file["vectors/cell/age"][()], expected[("cell", "age")])
        assert file["vectors/cell/is_good"][()].astype(bool).tolist() == expected[("cell", "is_good")]


def test_reorder_one_axis_leaves_the_others(h5df_path):
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    reorder_axes(daf, {"gene": GENE_PERMUTATION}, progress=False)
    new = snapshot(daf)
    assert new == permuted(old, {"gene": GENE_PERMUTATION})
    assert new[("cell", "batch", "label")] == old[("cell", "batch", "label")] and new["cell"] == old["cell"]
    assert new[("batch", "gene", "totals")] != old[("batch", "gene", "totals")]


def test_reorder_twice_and_back(h5df_path):
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    reorder_axes(daf, PERMUTATIONS, progress=False)
    inverse = {axis: np.argsort(permutation).tolist() for axis, permutation in PERMUTATIONS.items()}
    reorder_axes(daf, inverse, progress=False)
    assert snapshot(daf) == old and artifacts(h5df_path) == []


def test_progress_counts_every_element(h5df_path, method):
    daf = pydaf.H5df(h5df_path, "r+")
    ticks = []
    plan_total = 0
    from pydaf.abc.reorder import PlannedAxis
    from pydaf.core.reorder import build_reorder_plan

    planned = {axis: PlannedAxis.of(daf.axis_vector(axis), permutation) for axis, permutation in PERMUTATIONS.items()}
    plan_total = build_reorder_plan(daf.format, planned).n_replacement_elements()
    original = daf.format.format_replace_reorder

    def replace(plan, progress, crash_counter):
        return original(plan, ticks.append, crash_counter)

    daf.format.format_replace_reorder = replace
    reorder_axes(daf, PERMUTATIONS, progress=False)
    assert sum(ticks) == plan_total > 0


def test_two_groups_of_one_file(tmp_path):
    path = str(tmp_path / "both.h5dfs")
    first, second = fill(pydaf.H5df(path + "#/a", "w+")), fill(pydaf.H5df(path + "#/b/c", "w+"))
    second.set_vector("cell", "extra", np.arange(12.0))
    old_first, old_second = snapshot(first), snapshot(second)
    reorder_axes([first, second], {"cell": CELL_PERMUTATION}, progress=False)
    assert snapshot(first) == permuted(old_first, {"cell": CELL_PERMUTATION})
    assert snapshot(second) == permuted(old_second, {"cell": CELL_PERMUTATION})
    assert artifacts(path) == []


@pytest.mark.parametrize("crash_after", [1, 2, 4, 7, 9, 12, 15, 100])
def test_two_groups_crash_then_reset(tmp_path, crash_after):
    path = str(tmp_path / "both.h5dfs")
    first, second = fill(pydaf.H5df(path + "#/a", "w+")), fill(pydaf.H5df(path + "#/b", "w+"))
    old_first, old_second = snapshot(first), snapshot(second)
    try:
        reorder_axes([first, second], PERMUTATIONS, progress=False, _simulate_crash=crash_after)
    except SimulatedCrash:
        with h5py.File(path, "r", locking=False) as file:
            assert sorted(file[REORDER_REPOS_GROUP].keys()) == ["__a", "__b"]
        assert os.path.exists(reorder_backup_path(path))
        assert reset_reorder_axes([first, second]) is True
        assert snapshot(first) == old_first and snapshot(second) == old_second
    else:  # (more properties than the count: it ran to its end)
        assert crash_after == 100
        assert snapshot(first) == permuted(old_first, PERMUTATIONS)
    assert artifacts(path) == []
    assert reset_reorder_axes([first, second]) is False


def test_one_group_of_a_shared_file_reset_leaves_the_other_locked(tmp_path):
    path = str(tmp_path / "both.h5dfs")
    first, second = fill(pydaf.H5df(path + "#/a", "w+")), fill(pydaf.H5df(path + "#/b", "w+"))
    old_second = snapshot(second)
    with pytest.raises(SimulatedCrash):
        reorder_axes([first, second], PERMUTATIONS, progress=False, _simulate_crash=20)
    assert reset_reorder_axes(first) is True
    assert os.path.exists(reorder_backup_path(path))  # (the other group still needs it)
    with pytest.raises(DafIncompleteError, match="another reorder operation"):  # (b still holds the old lock)
        reorder_axes(first, PERMUTATIONS, progress=False)
    assert reset_reorder_axes(second) is True
    assert snapshot(second) == old_second and artifacts(path) == []
    reorder_axes(first, PERMUTATIONS, progress=False)


def count_properties(path: str) -> int:
    from pydaf.abc.reorder import PlannedAxis
    from pydaf.core.reorder import build_reorder_plan

    daf = pydaf.H5df(path, "r")
    try:
        planned = {axis: PlannedAxis.of(daf.axis_vector(axis), permutation)
                   for axis, permutation in PERMUTATIONS.items()}
        plan = build_reorder_plan(daf.base.format, planned)
        return len(plan.planned_vectors) + len(plan.planned_matrices)
    finally:
        daf.close()


def test_simulated_crash_after_each_property_then_reset(tmp_path, h5df_path, method):
    n_properties = count_properties(h5df_path)
    assert n_properties >= 15
    for crash_after in range(1, n_properties + 1):
        path = str(tmp_path / f"crash{crash_after}" / "data.h5df")
        os.makedirs(os.path.dirname(path))
        shutil.copyfile(h5df_path, path)
        daf = pydaf.H5df(path, "r+")
        old = snapshot(daf)
        with pytest.raises(SimulatedCrash):
            reorder_axes(daf, PERMUTATIONS, progress=False, _simulate_crash=crash_after)
        assert daf.format.format_has_reorder_lock()
        with pytest.raises(DafIncompleteError, match="reset_reorder_axes"):  # (a new one refuses until reset)
            reorder_axes(daf, PERMUTATIONS, progress=False)
        assert reset_reorder_axes(daf) is True
        assert snapshot(daf) == old, crash_after
        assert artifacts(path) == []
        reorder_axes(daf, PERMUTATIONS, progress=False)  # (and a reorder then works)
        assert snapshot(daf) == permuted(old, PERMUTATIONS)


def test_open_policy(h5df_path, method):
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    with pytest.raises(SimulatedCrash):
        reorder_axes(daf, PERMUTATIONS, progress=False, _simulate_crash=5)
    daf.close()
    with pytest.raises(DafIncompleteError) as refused:
        pydaf.H5df(h5df_path, "r")
    message = str(refused.value)
    assert "interrupted reorder_axes" in message and "r+" in message and "reset_reorder_axes" in message
    assert h5df_path in message
    with pytest.raises(DafIncompleteError):  # (the refused open let go of the file: refused again, not locked)
        pydaf.open_daf(h5df_path, "r")
    said = "nothing had changed" if method == "swap" else "rolled back to the old order"
    with pytest.warns(UserWarning, match=said):
        daf = pydaf.H5df(h5df_path, "r+")
    assert snapshot(daf) == old and artifacts(h5df_path) == []
    daf.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_snapshot(h5df_path) == old


def test_open_waits_for_a_live_reorder_in_this_process(h5df_path, method):
    """A handle opened while this process reorders the same data set (another thread) must not roll it back."""
    import threading

    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    started, opened = threading.Event(), []
    original = daf.format.format_replace_reorder

    def replace(plan, progress, crash_counter):
        started.set()
        thread.join(timeout=0.5)  # (the other thread's open waits for the data set's write lock meanwhile)
        return original(plan, progress, crash_counter)

    def open_again():
        started.wait(10)
        opened.append(snapshot(pydaf.H5df(h5df_path, "r+")))

    thread = threading.Thread(target=open_again)
    thread.start()
    daf.format.format_replace_reorder = replace
    reorder_axes(daf, PERMUTATIONS, progress=False)
    thread.join(10)
    assert opened == [permuted(old, PERMUTATIONS)]


def test_artifacts_are_julias(h5df_path, backup_protocol):
    """The lock and backup as Julia's ``h5df_format.jl`` names and shapes them, seen in the middle of a reorder."""
    daf = pydaf.H5df(h5df_path, "r+")
    seen = {}
    original = daf.format.format_replace_reorder

    def replace(plan, progress, crash_counter):
        with h5py.File(h5df_path, "r", locking=False) as file:
            seen["lock"] = file[REORDER_LOCK_DATASET][()]
            seen["lock_shape"] = file[REORDER_LOCK_DATASET].shape
            seen["entries"] = {name: file[REORDER_REPOS_GROUP][name][()].tolist()
                               for name in file[REORDER_REPOS_GROUP]}
            seen["entry_dtype"] = file[REORDER_REPOS_GROUP]["__"].dtype
        with h5py.File(reorder_backup_path(h5df_path), "r", locking=False) as backup:
            seen["backup"] = backup["vectors/cell/age"][()].tolist()
            seen["backup_lock"] = backup[REORDER_LOCK_DATASET][()]
        return original(plan, progress, crash_counter)

    daf.format.format_replace_reorder = replace
    old_age = daf.get_vector("cell", "age").tolist()
    reorder_axes(daf, PERMUTATIONS, progress=False)
    assert seen["lock_shape"] == () and len(seen["lock"].decode()) == 36  # (the operation's UUID)
    assert seen["entries"] == {"__": [1]} and seen["entry_dtype"] == np.uint8
    assert seen["backup"] == old_age and seen["backup_lock"] == seen["lock"]


def julia_crash(path: str, group: str = "/") -> None:
    """Leave ``path`` as Julia's ``reorder_axes!`` killed part way would: its lock dataset and entry, a plain copy of
    the file as backup, then the cell axis, one vector and half of a matrix rewritten in the new order (through h5py,
    as HDF5.jl writes: in place for numbers)."""
    with h5py.File(path, "r+") as file:
        file[REORDER_LOCK_DATASET] = np.bytes_("6f1c1a2e-0000-4000-8000-000000000000")
        file.create_group(REORDER_REPOS_GROUP)[group.replace("/", "__")] = np.array([1], dtype=np.uint8)
    shutil.copyfile(path, reorder_backup_path(path))
    with h5py.File(path, "r+") as file:
        root = file[group]
        entries = root["axes/cell"][()]
        del root["axes/cell"]
        root.create_dataset("axes/cell", data=entries[CELL_PERMUTATION], dtype=h5py.string_dtype())
        age = root["vectors/cell/age"]
        age[...] = age[()][CELL_PERMUTATION]
        distance = root["matrices/cell/cell/distance"]
        distance[:3] = 0.0  # (a matrix half rewritten when the process died)


@pytest.mark.parametrize("group", ["/", "/data"])
def test_recovers_a_julia_crash(tmp_path, group):
    path = str(tmp_path / ("julia.h5df" if group == "/" else "julia.h5dfs"))
    where = path if group == "/" else f"{path}#{group}"
    fill(pydaf.H5df(where, "w+")).close()
    old = read_snapshot(where)
    julia_crash(path, group)
    with pytest.raises(DafIncompleteError):
        pydaf.H5df(where, "r")
    with pytest.warns(UserWarning, match="rolled back"):
        daf = pydaf.H5df(where, "r+")
    assert snapshot(daf) == old and artifacts(path) == []
    reorder_axes(daf, PERMUTATIONS, progress=False)
    assert snapshot(daf) == permuted(old, PERMUTATIONS)


@pytest.mark.skipif(not (FIXTURES / "julia" / "files-v1.1").is_dir(), reason=f"no Julia fixtures at {FIXTURES}")
@pytest.mark.parametrize("fixture", ["files-v1.0", "files-v1.1", "example-cells.files"])
def test_julia_written_data(tmp_path, fixture):
    """Julia wrote no H5df fixture; its FilesDaf ones (typed sparse indices, Bool sparse...) copied into H5df."""
    source_path = tmp_path / fixture
    shutil.copytree(FIXTURES / "julia" / fixture, source_path)
    source = pydaf.FilesDaf(str(source_path), "r")
    daf = pydaf.H5df(str(tmp_path / "julia.h5df"), "w")
    pydaf.copy_all(daf, source, progress=False)
    old = snapshot(daf)
    permutations = {axis: np.random.default_rng(len(axis)).permutation(daf.axis_length(axis)).tolist()
                    for axis in sorted(daf.axes_set())}
    with pytest.raises(SimulatedCrash):
        reorder_axes(daf, permutations, progress=False, _simulate_crash=3)
    assert reset_reorder_axes(daf) and snapshot(daf) == old
    reorder_axes(daf, permutations, progress=False)
    assert snapshot(daf) == permuted(old, permutations)


def test_stale_backup_is_never_trusted(h5df_path, method):
    """A backup left by another operation (a kill after Julia's cleanup removed the lock) is replaced."""
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    with open(reorder_backup_path(h5df_path), "wb") as stale:
        stale.write(b"not the backup of this operation")
    reorder_axes(daf, PERMUTATIONS, progress=False)
    assert snapshot(daf) == permuted(old, PERMUTATIONS) and artifacts(h5df_path) == []


# Real kills: a child process reorders and SIGKILLs itself at a chosen point; the parent reopens.

CHILD = textwrap.dedent("""
    import os, signal, sys
    import pydaf
    from pydaf.core.reorder import reorder_axes, reset_reorder_axes
    from pydaf.formats.h5df import format as h5df_format, reorder

    path, point, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    reorder.REORDER_BY_SWAP = sys.argv[4] == "swap"
    permutations = {"cell": %r, "gene": %r}
    calls = {}

    def kill():
        os.kill(os.getpid(), signal.SIGKILL)

    def after(module, name, when=1, before=False, torn=None):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            if before and calls[name] == when:
                kill()
            result = original(*args, **kwargs)
            if calls[name] == when:
                if torn is not None:
                    torn(*args)
                kill()
            return result

        setattr(module, name, wrapper)

    def zero_half(source, rows, columns, out):
        out[: out.shape[0] // 2] = 0

    points = {
        "lock_uncommitted": lambda: after(h5df_format, "_write_scalar_string"),
        "backup_copy": lambda: after(reorder, "_copy_file"),
        "backup_durable": lambda: after(reorder, "_fsync_path", when=2),
        "axis_uncommitted": lambda: after(h5df_format, "_write_strings"),
        "axis_committed": lambda: after(reorder, "_replace_vector", before=True),
        "dense_vector": lambda: after(reorder, "permute_vector_into"),
        "sparse_vector": lambda: after(reorder, "permute_sparse_vector_into"),
        "string_vector_aside": lambda: after(h5df_format.H5dfFormat, "format_delete_vector"),
        "string_vector_set": lambda: after(h5df_format.H5dfFormat, "format_set_vector"),
        "torn_dense_matrix": lambda: after(reorder, "_permute_stored_dense", torn=zero_half),
        "sparse_matrix": lambda: after(reorder, "permute_csc_into", when=2),
        "last_property": lambda: after(reorder, "tick_crash_counter", when=%d),
        "cleanup_start": lambda: after(reorder, "_drop_lock", before=True),
        "lock_dropped": lambda: after(reorder, "_remove_file", when=2, before=True),
        "backup_removed": lambda: after(reorder, "_remove_file", when=2),
        "reset_in_place": lambda: after(reorder, "_restore_object", when=5),
        "reset_lock_drop": lambda: after(reorder, "_drop_lock", before=True),
        "swap_begun": lambda: after(reorder, "_start_swap"),
        "swap_dense": lambda: after(reorder, "write_permuted_dense", when=2),
        "swap_sparse": lambda: after(reorder, "permute_csc_into", when=2),
        "swap_axis": lambda: after(h5df_format, "_write_strings"),
        "swap_string_vector": lambda: after(h5df_format.H5dfFormat, "format_set_vector"),
        "swap_copy_whole": lambda: after(reorder, "_finish_copy"),
        "swap_renamed": lambda: after(reorder, "replace_open_file", before=True),
        "swap_reopened": lambda: after(reorder, "replace_open_file"),
    }
    if mode == "reset":  # (a reorder that raised part way, then a reset killed at the point)
        daf = pydaf.H5df(path, "r+")
        try:
            reorder_axes(daf, permutations, progress=False, _simulate_crash=12)
        except Exception:
            pass
        points[point]()
        reset_reorder_axes(daf)
    else:
        daf = pydaf.H5df(path, "r+")
        points[point]()
        reorder_axes(daf, permutations, progress=False)
    print("not killed")
""")

# (point, what the reopen must find: "old" or "new")
KILL_POINTS = [
    ("lock_uncommitted", "old"), ("backup_copy", "old"), ("backup_durable", "old"), ("axis_uncommitted", "old"),
    ("axis_committed", "old"), ("dense_vector", "old"), ("sparse_vector", "old"), ("string_vector_aside", "old"),
    ("string_vector_set", "old"), ("torn_dense_matrix", "old"), ("sparse_matrix", "old"), ("last_property", "old"),
    ("cleanup_start", "old"), ("lock_dropped", "new"), ("backup_removed", "new"),
]
UNLOCKED = ("lock_uncommitted", "lock_dropped", "backup_removed")  # (killed before the lock, or after it went)


def run_child(path: str, point: str, mode: str, n_properties: int,
              method: str = "backup") -> subprocess.CompletedProcess:
    script = CHILD % (CELL_PERMUTATION, GENE_PERMUTATION, n_properties)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    return subprocess.run([sys.executable, "-c", script, path, point, mode, method], capture_output=True, text=True,
                          timeout=120, env=environment, cwd=str(REPOSITORY))


@pytest.mark.parametrize(("point", "expected"), KILL_POINTS)
def test_killed_at_a_point_then_reopened(h5df_path, point, expected):
    old = read_snapshot(h5df_path)
    result = run_child(h5df_path, point, "reorder", count_properties(h5df_path))
    assert result.returncode == -signal.SIGKILL, (result.stdout, result.stderr)
    if point not in UNLOCKED:  # a read-only open refuses (the journal's check may refuse first: both say r+)
        with pytest.raises(pydaf.errors.DafFormatError, match="r\\+"):
            pydaf.H5df(h5df_path, "r")
    elif point != "lock_uncommitted":  # (the new order, complete: a read-only open reads it, a stale backup or not)
        assert os.path.exists(reorder_backup_path(h5df_path)) == (point == "lock_dropped")
        assert read_snapshot(h5df_path) == permuted(old, PERMUTATIONS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        daf = pydaf.H5df(h5df_path, "r+")  # (which also deletes a stale backup)
    said = "before its backup was made" if point == "backup_copy" else "rolled back to the old order"
    assert any(said in str(warning.message) for warning in caught) == (point not in UNLOCKED)
    assert snapshot(daf) == (old if expected == "old" else permuted(old, PERMUTATIONS))
    assert artifacts(h5df_path) == [] and not os.path.exists(journal_path(h5df_path))
    daf.close()
    with h5py.File(h5df_path, "r") as file:  # plain h5py reads it whole
        np.testing.assert_array_equal(file["matrices/cell/cell/distance"][()].T,
                                      (old if expected == "old" else permuted(old, PERMUTATIONS))
                                      [("cell", "cell", "distance")])


# (point, what the reopen must find) of a reorder by swap: before the rename the file is untouched and locked, after
# it the file is the whole copy, in the new order and unlocked.
SWAP_KILL_POINTS = [("swap_begun", "old"), ("swap_dense", "old"), ("swap_sparse", "old"), ("swap_axis", "old"),
                    ("swap_string_vector", "old"), ("last_property", "old"), ("swap_copy_whole", "old"),
                    ("swap_renamed", "new"), ("swap_reopened", "new")]


@pytest.mark.parametrize(("point", "expected"), SWAP_KILL_POINTS)
def test_swap_killed_at_a_point_then_reopened(h5df_path, point, expected):
    old = read_snapshot(h5df_path)
    result = run_child(h5df_path, point, "reorder", count_properties(h5df_path), "swap")
    assert result.returncode == -signal.SIGKILL, (result.stdout, result.stderr)
    if expected == "old":
        assert os.path.exists(swap_path(h5df_path)) and not os.path.exists(reorder_backup_path(h5df_path))
        with pytest.raises(DafIncompleteError, match="r\\+"):  # (locked: a read-only open refuses)
            pydaf.H5df(h5df_path, "r")
    else:  # (the copy, whole and unlocked, is the file: a read-only open reads it)
        assert artifacts(h5df_path) == []
        assert read_snapshot(h5df_path) == permuted(old, PERMUTATIONS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        daf = pydaf.H5df(h5df_path, "r+")  # (which also deletes the copy a kill left)
    assert any("nothing had changed" in str(warning.message) for warning in caught) == (expected == "old")
    assert snapshot(daf) == (old if expected == "old" else permuted(old, PERMUTATIONS))
    assert artifacts(h5df_path) == [] and not os.path.exists(journal_path(h5df_path))
    daf.close()


@pytest.mark.parametrize("point", ["reset_in_place", "reset_lock_drop"])
def test_killed_while_resetting(h5df_path, point):
    old = read_snapshot(h5df_path)
    result = run_child(h5df_path, point, "reset", count_properties(h5df_path))
    assert result.returncode == -signal.SIGKILL, (result.stdout, result.stderr)
    with pytest.warns(UserWarning, match="rolled back"):
        daf = pydaf.H5df(h5df_path, "r+")
    assert snapshot(daf) == old and artifacts(h5df_path) == []


def julia_reset(path: str, group: str = "/") -> bool:
    """Julia's ``format_reset_reorder!`` of ``h5df_format.jl``, transcribed with h5py: every axis, vector and matrix
    of the group in the backup replaces the live one, then the entry (and with the last, the group, the lock dataset
    and the backup) goes."""
    with h5py.File(path, "r+") as file:
        if REORDER_REPOS_GROUP not in file:
            return False
        repos, entry = file[REORDER_REPOS_GROUP], group.replace("/", "__")
        if entry not in repos:
            return False
        backup_path = reorder_backup_path(path)
        if os.path.isfile(backup_path):
            with h5py.File(backup_path, "r") as backup:
                backup_root, live_root = backup[group], file[group]
                for axis in backup_root["axes"]:
                    if axis in live_root["axes"]:
                        del live_root["axes"][axis]
                    backup_root["axes"].copy(axis, live_root["axes"])
                for path_in, depth in (("vectors", 1), ("matrices", 2)):
                    for axes_path in _group_paths(backup_root[path_in], depth):
                        if f"{path_in}/{axes_path}" not in live_root:
                            continue
                        backup_group, live_group = backup_root[path_in][axes_path], live_root[path_in][axes_path]
                        for name in backup_group:
                            if name in live_group:
                                del live_group[name]
                            backup_group.copy(name, live_group)
        del repos[entry]
        if not len(repos):
            del file[REORDER_REPOS_GROUP]
            del file[REORDER_LOCK_DATASET]
            if os.path.exists(backup_path):
                os.remove(backup_path)
    return True


def _group_paths(group: h5py.Group, depth: int) -> list[str]:
    if depth == 1:
        return list(group)
    return [f"{name}/{child}" for name in group for child in _group_paths(group[name], depth - 1)]


@pytest.mark.parametrize(("point", "expected"), [("dense_vector", "old"), ("torn_dense_matrix", "old"),
                                                 ("sparse_matrix", "old"), ("string_vector_set", "old"),
                                                 ("cleanup_start", "old"), ("lock_dropped", "new")])
def test_julias_reset_recovers_a_pydaf_kill(h5df_path, point, expected):
    old = read_snapshot(h5df_path)
    result = run_child(h5df_path, point, "reorder", count_properties(h5df_path))
    assert result.returncode == -signal.SIGKILL, (result.stdout, result.stderr)
    assert not os.path.exists(journal_path(h5df_path))  # (these points fall between committed operations)
    assert julia_reset(h5df_path) is (point != "lock_dropped")
    if point == "lock_dropped":  # (no lock: Julia's reset does nothing; the stale backup goes at a writable open)
        assert artifacts(h5df_path) == [os.path.basename(reorder_backup_path(h5df_path))]
        pydaf.H5df(h5df_path, "r+").close()
    assert artifacts(h5df_path) == []
    assert read_snapshot(h5df_path) == (old if expected == "old" else permuted(old, PERMUTATIONS))


@pytest.mark.parametrize(("point", "expected"), [("swap_dense", "old"), ("swap_copy_whole", "old"),
                                                 ("swap_renamed", "new")])
def test_julias_reset_of_a_pydaf_kill_by_swap(h5df_path, point, expected):
    """Julia's reset of a lock with no backup drops the lock: the file was not changed yet. The copy left beside it
    is removed by pydaf's next writable open."""
    old = read_snapshot(h5df_path)
    result = run_child(h5df_path, point, "reorder", count_properties(h5df_path), "swap")
    assert result.returncode == -signal.SIGKILL, (result.stdout, result.stderr)
    assert julia_reset(h5df_path) is (expected == "old")
    if expected == "old":
        assert artifacts(h5df_path) == [os.path.basename(swap_path(h5df_path))]
    pydaf.H5df(h5df_path, "r+").close()
    assert artifacts(h5df_path) == []
    assert read_snapshot(h5df_path) == (old if expected == "old" else permuted(old, PERMUTATIONS))


def test_mode_w_drops_the_lock_of_the_group_it_replaces(tmp_path):
    path = str(tmp_path / "both.h5dfs")
    first, second = fill(pydaf.H5df(path + "#/a", "w+")), fill(pydaf.H5df(path + "#/b", "w+"))
    old_second = snapshot(second)
    with pytest.raises(SimulatedCrash):
        reorder_axes([first, second], PERMUTATIONS, progress=False, _simulate_crash=30)
    first.close()
    second.close()
    replaced = pydaf.H5df(path + "#/a", "w")  # (replaced: nothing to roll back, and the old data must not come back)
    assert replaced.axes_set() == set() and not replaced.format.format_has_reorder_lock()
    assert os.path.exists(reorder_backup_path(path))  # (b still needs it)
    replaced.close()
    with pytest.warns(UserWarning, match="rolled back to the old order"):
        second = pydaf.H5df(path + "#/b", "r+")
    assert snapshot(second) == old_second and artifacts(path) == []


def test_mode_w_removes_a_stale_backup(h5df_path):
    with open(reorder_backup_path(h5df_path), "wb") as stale:
        stale.write(b"left by a killed cleanup")
    pydaf.H5df(h5df_path, "w").close()
    assert artifacts(h5df_path) == []


def test_backup_cut_short_by_a_julia_kill(h5df_path):
    """Julia copies the backup in place (``cp``): a kill part way leaves a truncated one, and nothing changed yet."""
    old = read_snapshot(h5df_path)
    with h5py.File(h5df_path, "r+") as file:
        file[REORDER_LOCK_DATASET] = np.bytes_("6f1c1a2e-0000-4000-8000-000000000000")
        file.create_group(REORDER_REPOS_GROUP)["__"] = np.array([1], dtype=np.uint8)
    with open(h5df_path, "rb") as source, open(reorder_backup_path(h5df_path), "wb") as backup:
        backup.write(source.read(os.path.getsize(h5df_path) // 3))
    with pytest.raises(pydaf.errors.DafFormatError, match="can't read the reorder backup") as refused:
        pydaf.H5df(h5df_path, "r+")
    assert "delete the backup" in str(refused.value)
    os.remove(reorder_backup_path(h5df_path))
    with pytest.warns(UserWarning, match="before its backup was made"):
        daf = pydaf.H5df(h5df_path, "r+")
    assert snapshot(daf) == old and artifacts(h5df_path) == []


def test_packed_data_is_rewritten(h5df_path, method):
    """Chunked, compressed datasets (Julia's packed H5df) can't be written in place: they are rewritten (contiguous);
    a crash then reset restores them as they were (chunked)."""
    with h5py.File(h5df_path, "r+") as file:
        values = file["vectors/cell/age"][()]
        del file["vectors/cell/age"]
        file.create_dataset("vectors/cell/age", data=values, chunks=(4,), compression="gzip")
        umis = file["matrices/cell/gene/UMIs"][()]
        del file["matrices/cell/gene/UMIs"]
        file.create_dataset("matrices/cell/gene/UMIs", data=umis, chunks=(2, 6), compression="gzip")
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    with pytest.raises(SimulatedCrash):
        reorder_axes(daf, PERMUTATIONS, progress=False, _simulate_crash=16)
    assert reset_reorder_axes(daf) and snapshot(daf) == old
    with h5py.File(h5df_path, "r", locking=False) as file:
        assert file["vectors/cell/age"].chunks == (4,) and file["matrices/cell/gene/UMIs"].compression == "gzip"
    reorder_axes(daf, PERMUTATIONS, progress=False)
    assert snapshot(daf) == permuted(old, PERMUTATIONS)


# The reorder by swap: the copy renamed over the file, and this process's handles moved to it.


def test_swap_moves_every_handle_of_the_data_set(h5df_path):
    """Two handles on the data set (one read-only) both read the new file after the swap; arrays read before keep
    their values; a read-only handle of another process opened after reads the new order."""
    writer = pydaf.H5df(h5df_path, "r+")
    reader = pydaf.H5df(h5df_path, "r")
    old = snapshot(writer)
    held = reader.get_matrix("cell", "gene", "UMIs")
    held_values = np.asarray(held).tolist()
    reorder_axes(writer, PERMUTATIONS, progress=False)
    expected = permuted(old, PERMUTATIONS)
    assert snapshot(writer) == expected and snapshot(reader) == expected
    assert np.asarray(held).tolist() == held_values
    writer.set_scalar("after", 1)
    assert reader.get_scalar("after") == 1
    writer.close()
    reader.close()
    assert read_snapshot(h5df_path) == {**expected, "scalars": {**expected["scalars"], "after": 1}}


WAITING_READER = textwrap.dedent("""
    import sys, time
    import pydaf
    deadline = time.time() + 60
    while True:  # (waits for the writer's lock, LOCK_WAIT_SECONDS at a time: a loaded machine may take longer)
        try:
            daf = pydaf.H5df(sys.argv[1], "r")
            break
        except pydaf.errors.DafLockedError:
            if time.time() > deadline:
                raise
    print(time.time(), daf.has_vector("cell", "written_after_the_swap"), daf.axis_vector("cell").tolist())
""")


def test_a_process_waiting_for_the_old_file_waits_for_the_new_one(h5df_path):
    """A process that waited for the lock of the file the swap replaced must not read the new file while this process
    still writes it: its open takes the new file's lock (and so waits for this process to close it)."""
    writer = pydaf.H5df(h5df_path, "r+")
    old = snapshot(writer)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    waiting = subprocess.Popen([sys.executable, "-c", WAITING_READER, h5df_path], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment)
    time.sleep(1.0)  # (it is waiting for the lock by then)
    reorder_axes(writer, PERMUTATIONS, progress=False)
    time.sleep(0.5)
    writer.set_vector("cell", "written_after_the_swap", np.arange(12))
    closed = time.time()
    writer.close()
    output, errors = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, errors
    opened, has_vector, cells = output.split(" ", 2)
    assert float(opened) >= closed and has_vector == "True"
    assert eval(cells) == permuted(old, PERMUTATIONS)["cell"]


def test_swap_through_a_symbolic_link_keeps_the_link_and_the_mode(tmp_path, h5df_path):
    os.chmod(h5df_path, 0o640)
    link = str(tmp_path / "link.h5df")
    os.symlink(h5df_path, link)
    daf = pydaf.H5df(link, "r+")
    old = snapshot(daf)
    assert h5df_reorder.reorder_method(daf.format) == "swap"
    reorder_axes(daf, PERMUTATIONS, progress=False)
    daf.close()
    assert os.path.islink(link) and os.readlink(link) == h5df_path
    assert (os.stat(h5df_path).st_mode & 0o777) == 0o640
    assert read_snapshot(link) == permuted(old, PERMUTATIONS)
    assert sorted(os.listdir(tmp_path)) == ["data.h5df", "link.h5df"]


def test_what_can_not_swap_reorders_by_backup(tmp_path, h5df_path):
    """A file with another hard link (a swap would leave the other name on the old data), a data set opened on the
    caller's own h5py file, or one group of several open: Julia's protocol, in place."""
    os.link(h5df_path, str(tmp_path / "other-name.h5df"))
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    assert h5df_reorder.reorder_method(daf.format) == "backup"
    reorder_axes(daf, PERMUTATIONS, progress=False)
    daf.close()
    assert read_snapshot(str(tmp_path / "other-name.h5df")) == permuted(old, PERMUTATIONS)
    own_path = str(tmp_path / "own.h5df")
    fill(pydaf.H5df(own_path, "w")).close()
    with h5py.File(own_path, "r+") as file:
        own = pydaf.H5df(file, "r+")
        old = snapshot(own)
        assert h5df_reorder.reorder_method(own.format) == "backup"
        reorder_axes(own, PERMUTATIONS, progress=False)
        assert snapshot(own) == permuted(old, PERMUTATIONS)


@pytest.mark.parametrize("failing", ["posix_fallocate", "rename"])
def test_swap_that_fails_changes_nothing(h5df_path, monkeypatch, failing):
    """A full disk when the copy's space is allocated, or a failed rename: a DafStorageError, the old data, no lock
    and no copy left; the next reorder works."""
    daf = pydaf.H5df(h5df_path, "r+")
    old = snapshot(daf)
    original = getattr(os, failing)

    def fail(*arguments):
        target = os.readlink(f"/proc/self/fd/{arguments[0]}") if failing == "posix_fallocate" else arguments[0]
        if not str(target).endswith(".reorder.pydaf-swap"):  # (only the copy's: the journal allocates too)
            return original(*arguments)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(pydaf.errors.DafStorageError, match="nothing was changed"):
        reorder_axes(daf, PERMUTATIONS, progress=False)
    monkeypatch.setattr(os, failing, original)
    assert snapshot(daf) == old and artifacts(h5df_path) == []
    assert not daf.format.format_has_reorder_lock()
    reorder_axes(daf, PERMUTATIONS, progress=False)
    assert snapshot(daf) == permuted(old, PERMUTATIONS)
