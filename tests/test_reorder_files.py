"""FilesDaf's reorder hooks (pydaf/formats/files/reorder.py): every kind of stored property in both layouts, the
on-disk artifacts Julia shares (``.reorder.backup``), a simulated crash at each replaced property, the open policy,
Julia's fixtures, a Julia-interrupted reorder, and real SIGKILLs of a child process at chosen points (the 100 kills at
random instants are tests/test_reorder_kills.py's)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf._os import locks
from pydaf.abc.reorder import SimulatedCrash
from pydaf.core.reorder import reorder_axes, reset_reorder_axes
from pydaf.errors import DafAppendOnlyError, DafFormatError, DafIncompleteError, DafLockedError
from pydaf.sparse import SparseVector

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "julia"
ROOT = Path(pydaf.__file__).resolve().parents[1]

N_CELLS = 40  # (enough for strings to be stored sparse when mostly empty, as Julia's rule says)
CELLS = [f"C{index}" for index in range(N_CELLS)]
GENES = ["X", "Y", "Z", "W"]
CELL_PERMUTATION = np.random.default_rng(11).permutation(N_CELLS).tolist()
GENE_PERMUTATION = [2, 0, 3, 1]
NOTES = ["" if index % 13 else f"n{index}" for index in range(N_CELLS)]  # (stored sparse: .nzind, .nztxt)


def _build(path: str) -> None:
    """Every kind of stored property: dense numbers, dense and sparse strings, sparse numbers, all-true Bool (no
    ``nzval`` file), in both layouts, square on the permuted axis, and some on an axis that is not permuted."""
    rng = np.random.default_rng(7)
    daf = pydaf.FilesDaf(path, "w", name="reorder!")
    daf.add_axis("cell", CELLS).add_axis("gene", GENES).add_axis("batch", ["B1", "B2"])
    daf.set_scalar("title", "reorder")
    daf.set_vector("cell", "age", np.arange(N_CELLS, dtype=np.int64) * 10)
    daf.set_vector("cell", "score", rng.random(N_CELLS).astype(np.float32))
    daf.set_vector("cell", "kind", np.array([f"k{index}" for index in range(N_CELLS)], dtype=object))
    daf.set_vector("cell", "note", np.array(NOTES, dtype=object))
    daf.set_vector("cell", "sparse", SparseVector(N_CELLS, np.array([2, 5, 8, 33]), np.array([1.5, 2.5, 3.5, 4.5])))
    daf.set_vector("cell", "marked", SparseVector(N_CELLS, np.array([1, 4, 39]), np.ones(3, dtype=bool)))  # no nzval
    daf.set_vector("cell", "zero", 0)  # an empty sparse vector
    daf.set_vector("gene", "symbol", np.array(["a", "b", "c", "d"], dtype=object))
    dense = rng.random((N_CELLS, 4))
    daf.set_matrix("cell", "gene", "dense", dense)  # (both layouts)
    umis = sp.random(N_CELLS, 4, density=0.4, random_state=3, format="csc", dtype=np.float64) * 100
    daf.set_matrix("cell", "gene", "umis", umis.astype(np.int32))  # (both layouts)
    labels = np.array([[f"{row}.{column}" for column in range(4)] for row in range(N_CELLS)], dtype=object)
    daf.set_matrix("cell", "gene", "labels", labels, relayout=False)
    sparse_labels = np.full((N_CELLS, 4), "", dtype=object)
    sparse_labels[2, 1], sparse_labels[6, 3], sparse_labels[30, 3] = "p", "q", "r"
    daf.set_matrix("cell", "gene", "sparse_labels", sparse_labels, relayout=False)  # stored as sparse strings
    square = np.arange(N_CELLS**2, dtype=np.int16).reshape(N_CELLS, N_CELLS)
    daf.set_matrix("cell", "cell", "square", square, relayout=False)
    daf.set_matrix("cell", "cell", "square_sparse", sp.csc_matrix(np.eye(N_CELLS, k=1) * 2.0), relayout=False)
    daf.set_matrix("gene", "gene", "genes", np.arange(16.0).reshape(4, 4), relayout=False)
    daf.set_matrix("batch", "gene", "totals", np.arange(8.0).reshape(2, 4), relayout=False)
    daf.set_matrix("batch", "cell", "mask", sp.csc_matrix(np.eye(2, N_CELLS, dtype=bool)), relayout=False)  # all-true
    daf.close()
    stored = {os.path.relpath(os.path.join(folder, name), path) for folder, _, names in os.walk(path) for name in names}
    assert {"vectors/cell/note.nztxt", "matrices/cell/gene/sparse_labels.nztxt", "vectors/cell/marked.nzind",
            "matrices/batch/cell/mask.rowval", "matrices/gene/cell/umis.nzval"} <= stored
    assert not {"vectors/cell/marked.nzval", "matrices/batch/cell/mask.nzval"} & stored


def _plain(values: Any) -> Any:
    if sp.issparse(values):
        values = values.toarray()
    values = np.asarray(values)
    return values.tolist()


def _snapshot(daf: pydaf.DafReader) -> dict[tuple[str, ...], Any]:
    """Every axis, scalar, vector and stored matrix (each stored layout) as plain values."""
    result: dict[tuple[str, ...], Any] = {}
    for name in sorted(daf.scalars_set()):
        result[("scalar", name)] = daf.get_scalar(name)
    axes = sorted(daf.axes_set())
    for axis in axes:
        result[("axis", axis)] = _plain(daf.axis_vector(axis))
        for name in sorted(daf.vectors_set(axis)):
            result[("vector", axis, name)] = _plain(daf.get_vector(axis, name))
        for columns_axis in axes:
            for name in sorted(daf.matrices_set(axis, columns_axis, relayout=False)):
                result[("matrix", axis, columns_axis, name)] = _plain(
                    daf.get_matrix(axis, columns_axis, name, relayout=False))
    return result


def _read(path: str) -> dict[tuple[str, ...], Any]:
    daf = pydaf.FilesDaf(path, "r")
    try:
        return _snapshot(daf)
    finally:
        daf.close()


def _expected(old: dict[tuple[str, ...], Any], permutations: dict[str, list[int]]) -> dict[tuple[str, ...], Any]:
    """What a reorder must give, by numpy indexing of the old values (not pydaf's kernels)."""
    new = {}
    for key, value in old.items():
        if key[0] in ("axis", "vector") and key[1] in permutations:
            value = np.asarray(value, dtype=object)[permutations[key[1]]].tolist()
        elif key[0] == "matrix":
            array = np.asarray(value, dtype=object)
            rows = permutations.get(key[1], list(range(array.shape[0])))
            columns = permutations.get(key[2], list(range(array.shape[1])))
            value = array[np.ix_(rows, columns)].tolist()
        new[key] = value
    return new


def _files(path: str) -> dict[str, bytes | int]:
    """Every file below ``path`` (but the writer lock): descriptors by content, data files by size."""
    result: dict[str, bytes | int] = {}
    for folder, _, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            relative = os.path.relpath(full, path)
            if relative == ".daf.lock":
                continue
            result[relative] = Path(full).read_bytes() if name.endswith(".json") else os.path.getsize(full)
    return result


def _hidden(path: str) -> list[str]:
    """The hidden entries left anywhere below ``path`` (but the writer lock): temporaries, backups."""
    found = []
    for folder, folders, names in os.walk(path):
        for name in [*folders, *names]:
            if name.startswith(".") and os.path.relpath(os.path.join(folder, name), path) != ".daf.lock":
                found.append(os.path.relpath(os.path.join(folder, name), path))
    return sorted(found)


@pytest.fixture
def built(tmp_path: Path) -> tuple[str, dict[tuple[str, ...], Any]]:
    path = str(tmp_path / "data.daf")
    _build(path)
    return path, _read(path)


def _without_metadata(files: dict[str, bytes | int]) -> dict[str, bytes | int]:
    return {name: value for name, value in files.items() if name != "metadata.json"}


def _metadata_matches(path: str) -> None:
    index = json.loads(Path(path, "metadata.json").read_text())
    for key, descriptor in index.items():
        if key.startswith("axes/"):
            assert descriptor["n_entries"] == len(Path(path, key + ".txt").read_text().splitlines())
        else:
            assert descriptor == json.loads(Path(path, key + ".json").read_text()), key
    assert len(index) == len(list(Path(path).glob("*/**/*.json"))) + len(list(Path(path, "axes").glob("*.txt")))


# Reordering.


def test_reorder_every_kind_of_property(built: tuple[str, dict]) -> None:
    path, old = built
    files = _files(path)
    daf = pydaf.FilesDaf(path, "r+")
    reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False)
    expected = _expected(old, {"cell": CELL_PERMUTATION})
    assert expected != old
    assert _snapshot(daf) == expected
    daf.close()
    assert _read(path) == expected
    # The same files, descriptors byte for byte (a permutation changes no type or count), nothing left behind.
    assert _without_metadata(_files(path)) == _without_metadata(files)
    assert _hidden(path) == []
    _metadata_matches(path)


def test_reorder_both_axes_and_a_square_matrix(built: tuple[str, dict]) -> None:
    path, old = built
    permutations = {"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION}
    with pydaf.FilesDaf(path, "r+") as daf:
        reorder_axes(daf, permutations, progress=False)
    new = _read(path)
    assert new == _expected(old, permutations)
    first = CELL_PERMUTATION[0]
    assert new[("matrix", "cell", "cell", "square")][0] == [N_CELLS * first + old for old in CELL_PERMUTATION]
    assert new[("axis", "gene")] == ["Z", "X", "W", "Y"]


def test_unpermuted_axis_keeps_its_files(built: tuple[str, dict]) -> None:
    path, _ = built

    def inodes(folder: str) -> dict[str, int]:
        return {name: os.stat(os.path.join(path, folder, name)).st_ino for name in os.listdir(os.path.join(path,
                                                                                                          folder))}
    untouched = ["matrices/gene/gene", "matrices/batch/gene", "vectors/gene"]
    before = {folder: inodes(folder) for folder in untouched}
    gene_axis = os.stat(os.path.join(path, "axes", "gene.txt")).st_ino
    cell_axis = os.stat(os.path.join(path, "axes", "cell.txt")).st_ino
    with pydaf.FilesDaf(path, "r+") as daf:
        reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False)
    assert {folder: inodes(folder) for folder in untouched} == before
    assert os.stat(os.path.join(path, "axes", "gene.txt")).st_ino == gene_axis
    assert os.stat(os.path.join(path, "axes", "cell.txt")).st_ino != cell_axis


def test_reorder_then_reorder_back_is_the_original(built: tuple[str, dict]) -> None:
    path, old = built
    inverse = np.argsort(CELL_PERMUTATION).tolist()
    with pydaf.FilesDaf(path, "r+") as daf:
        reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False)
        reorder_axes(daf, {"cell": inverse}, progress=False)
        assert _snapshot(daf) == old


def test_progress_counts_every_element(built: tuple[str, dict]) -> None:
    path, _ = built
    ticks: list[int] = []
    with pydaf.FilesDaf(path, "r+") as daf:
        storage = daf.format
        plan = files_reorder_plan(storage, {"cell": CELL_PERMUTATION})
        storage.format_lock_reorder("test")
        storage.format_backup_reorder(plan)
        storage.format_replace_reorder(plan, ticks.append, None)
        storage.format_cleanup_reorder()
    assert sum(ticks) == plan.n_replacement_elements() > 0
    assert len(ticks) == len(plan.planned_vectors) + len(plan.planned_matrices)


def files_reorder_plan(storage: Any, permutations: dict[str, list[int]]) -> Any:
    from pydaf.abc.reorder import PlannedAxis
    from pydaf.core.reorder import build_reorder_plan

    planned = {axis: PlannedAxis.of(storage.format_axis_vector(axis)[0], permutation)
               for axis, permutation in permutations.items()}
    return build_reorder_plan(storage, planned)


def test_backup_is_julias_layout_of_hard_links(built: tuple[str, dict]) -> None:
    path, _ = built
    with pydaf.FilesDaf(path, "r+") as daf:
        storage = daf.format
        plan = files_reorder_plan(storage, {"cell": CELL_PERMUTATION})
        storage.format_lock_reorder("test")
        assert storage.format_has_reorder_lock() and os.path.isdir(os.path.join(path, ".reorder.backup"))
        storage.format_backup_reorder(plan)
        backup = os.path.join(path, ".reorder.backup")
        for relative in ["axes/cell.txt", "vectors/cell/age.data", "vectors/cell/age.json", "vectors/cell/note.nztxt",
                         "vectors/cell/note.nzind", "matrices/cell/gene/umis.colptr", "matrices/gene/cell/dense.data",
                         "matrices/cell/cell/square.data", "matrices/batch/cell/mask.rowval"]:
            assert os.path.samefile(os.path.join(backup, relative), os.path.join(path, relative)), relative
        assert not os.path.exists(os.path.join(backup, "vectors", "gene"))
        assert not os.path.exists(os.path.join(backup, "matrices", "gene", "gene"))
        assert not os.path.exists(os.path.join(backup, "axes", "gene.txt"))
        assert storage.format_reset_reorder() is True
        assert not storage.format_has_reorder_lock()
        assert storage.format_reset_reorder() is False


# Crashes in this process (Julia's _simulate_crash), then a reset or a reopen.


def _n_properties(path: str) -> int:
    with pydaf.FilesDaf(path, "r+") as daf:
        plan = files_reorder_plan(daf.format, {"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION})
        return len(plan.planned_vectors) + len(plan.planned_matrices)


def test_simulated_crash_after_each_property_then_reset(built: tuple[str, dict], tmp_path: Path) -> None:
    path, old = built
    permutations = {"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION}
    count = _n_properties(path)
    assert count == 19
    for crash in range(1, count + 1):
        copy = str(tmp_path / f"crash{crash}.daf")
        shutil.copytree(path, copy)
        daf = pydaf.FilesDaf(copy, "r+")
        with pytest.raises(SimulatedCrash):
            reorder_axes(daf, permutations, progress=False, _simulate_crash=crash)
        assert daf.format.format_has_reorder_lock()
        if crash < count:
            assert _snapshot(daf) != old  # (a mix: the point of the backup)
        assert reset_reorder_axes(daf) is True
        assert _snapshot(daf) == old, crash
        assert reset_reorder_axes(daf) is False
        daf.close()
        assert _read(copy) == old
        assert _hidden(copy) == []
        _metadata_matches(copy)


def test_simulated_crash_then_writable_open_rolls_back_with_a_warning(built: tuple[str, dict]) -> None:
    path, old = built
    daf = pydaf.FilesDaf(path, "r+")
    with pytest.raises(SimulatedCrash):
        reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False, _simulate_crash=3)
    daf.close()
    with pytest.warns(UserWarning, match="rolled back an interrupted reorder_axes"):
        reopened = pydaf.FilesDaf(path, "r+")
    assert _snapshot(reopened) == old
    assert not reopened.format.format_has_reorder_lock()
    # And the reorder then works.
    reorder_axes(reopened, {"cell": CELL_PERMUTATION}, progress=False)
    assert _snapshot(reopened) == _expected(old, {"cell": CELL_PERMUTATION})
    reopened.close()


def test_simulated_crash_then_reorder_again_is_refused(built: tuple[str, dict]) -> None:
    path, _ = built
    with pydaf.FilesDaf(path, "r+") as daf:
        with pytest.raises(SimulatedCrash):
            reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False, _simulate_crash=1)
        with pytest.raises(DafIncompleteError, match="reset_reorder_axes"):
            reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False)


def test_read_only_open_of_an_interrupted_reorder_refuses(built: tuple[str, dict]) -> None:
    path, old = built
    daf = pydaf.FilesDaf(path, "r+")
    with pytest.raises(SimulatedCrash):
        reorder_axes(daf, {"cell": CELL_PERMUTATION}, progress=False, _simulate_crash=2)
    files = _files(path)
    # This process still holds the writer lock, but no reorder is under way: the read-only open says how to recover.
    with pytest.raises(DafIncompleteError) as raised:
        pydaf.FilesDaf(path, "r")
    text = str(raised.value)
    assert "interrupted" in text and '"r+"' in text and "reset_reorder_axes" in text and path in text
    daf.close()
    with pytest.raises(DafIncompleteError):
        pydaf.open_daf(path, "r")
    assert _files(path) == files  # a read-only open wrote nothing
    with pytest.warns(UserWarning):
        pydaf.FilesDaf(path, "r+").close()
    assert _read(path) == old


def test_an_empty_lock_is_dropped(built: tuple[str, dict]) -> None:
    """Killed right after the lock (Julia's or pydaf's): nothing to restore."""
    path, old = built
    os.mkdir(os.path.join(path, ".reorder.backup"))
    with pytest.warns(UserWarning):
        daf = pydaf.FilesDaf(path, "r+")
    assert _snapshot(daf) == old and not os.path.exists(os.path.join(path, ".reorder.backup"))
    daf.close()


# Julia's directories and Julia's backups.


@pytest.mark.parametrize("fixture", ["files-v1.0", "files-v1.1", "example-cells.files"])
def test_reorder_julia_fixture(fixture: str, tmp_path: Path) -> None:
    source = FIXTURES / fixture
    if not source.is_dir():
        pytest.skip(f"the Julia fixture is absent: {source}")
    path = str(tmp_path / fixture)
    shutil.copytree(source, path)
    old = _read(path)
    files = _files(path)
    with pydaf.FilesDaf(path, "r+") as daf:
        permutations = {axis: np.random.default_rng(len(axis)).permutation(daf.axis_length(axis)).tolist()
                        for axis in sorted(daf.axes_set())[:2]}
        reorder_axes(daf, permutations, progress=False)
    assert _read(path) == _expected(old, permutations)
    after = _files(path)
    for name, value in files.items():  # v1.0 stays v1.0: the same files and descriptors
        if name != "metadata.json":
            assert after[name] == value, name
    assert _hidden(path) == []


def _julia_reset(path: str) -> None:
    """Julia's ``format_reset_reorder!`` (files_format.jl), transcribed: for every file of the backup, remove the live
    one and hard-link the backup in its place; then remove the backup (and rebuild metadata.json, which pydaf does at
    its next writable open)."""
    backup = os.path.join(path, ".reorder.backup")
    for root, _, names in os.walk(backup):
        relative = os.path.relpath(root, backup)
        live = path if relative == "." else os.path.join(path, relative)
        for name in names:
            live_path = os.path.join(live, name)
            if os.path.lexists(live_path):
                os.remove(live_path)
            os.link(os.path.join(root, name), live_path)
    shutil.rmtree(backup)


@pytest.mark.parametrize("crash", [1, 5, 100])
def test_julia_reset_recovers_a_pydaf_crash(built: tuple[str, dict], tmp_path: Path, crash: int) -> None:
    path, old = built
    daf = pydaf.FilesDaf(path, "r+")
    if crash < 100:
        with pytest.raises(SimulatedCrash):
            reorder_axes(daf, {"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION}, progress=False,
                         _simulate_crash=crash)
    else:  # killed after the replacement, before the cleanup
        storage = daf.format
        plan = files_reorder_plan(storage, {"cell": CELL_PERMUTATION})
        storage.format_lock_reorder("test")
        storage.format_backup_reorder(plan)
        storage.format_replace_reorder(plan, None, None)
    daf.close()
    _julia_reset(path)
    assert _read(path) == old


def _julia_interrupted(path: str, *, backed_up: bool) -> None:
    """What Julia's reorder_axes! of the cell axis leaves when killed: the backup (Julia's suffix lists, the
    descriptor linked first), and, if ``backed_up``, some properties replaced as Julia replaces them: every file
    removed, then new ones written (sparse strings come back dense, as ``.txt``), one of them half written."""
    backup = os.path.join(path, ".reorder.backup")
    os.mkdir(backup)
    os.makedirs(os.path.join(backup, "axes"))
    os.link(os.path.join(path, "axes", "cell.txt"), os.path.join(backup, "axes", "cell.txt"))
    os.makedirs(os.path.join(backup, "vectors", "cell"))
    vector_suffixes = (".json", ".data", ".txt", ".nzind", ".nzval", ".nztxt")
    vectors = sorted({name.split(".")[0] for name in os.listdir(os.path.join(path, "vectors", "cell"))})
    for name in vectors if backed_up else vectors[:1]:
        for suffix in vector_suffixes if backed_up else vector_suffixes[:1]:  # (killed after linking a .json)
            live = os.path.join(path, "vectors", "cell", name + suffix)
            if os.path.exists(live):
                os.link(live, os.path.join(backup, "vectors", "cell", name + suffix))
    if not backed_up:
        return
    os.remove(os.path.join(path, "axes", "cell.txt"))
    Path(path, "axes", "cell.txt").write_text("".join(f"{CELLS[index]}\n" for index in CELL_PERMUTATION))
    folder = os.path.join(path, "vectors", "cell")
    for suffix in (".json", ".nzind", ".nztxt"):
        os.remove(os.path.join(folder, "note" + suffix))
    Path(folder, "note.json").write_text('{"format":"dense","eltype":"String"}\n')
    Path(folder, "note.txt").write_text("".join(f"{NOTES[index]}\n" for index in CELL_PERMUTATION))
    for suffix in (".json", ".data"):
        os.remove(os.path.join(folder, "age" + suffix))
    Path(folder, "age.data").write_bytes(b"\0" * 12)  # (killed while writing it; its .json not written yet)


def test_pydaf_recovers_a_julia_crash(built: tuple[str, dict]) -> None:
    path, old = built
    files = _files(path)
    _julia_interrupted(path, backed_up=True)
    with pytest.raises(DafIncompleteError):
        pydaf.FilesDaf(path, "r")
    with pytest.warns(UserWarning, match="rolled back"):
        daf = pydaf.FilesDaf(path, "r+")
    assert _snapshot(daf) == old
    daf.close()
    # The dense .txt Julia's replacement wrote for the sparse strings is gone: exactly the old files again.
    assert _without_metadata(_files(path)) == _without_metadata(files)
    _metadata_matches(path)


def test_a_julia_crash_during_its_backup_loses_nothing(built: tuple[str, dict]) -> None:
    """Killed after linking only a descriptor: the live data files are not in the backup, yet must stay."""
    path, old = built
    files = _files(path)
    _julia_interrupted(path, backed_up=False)
    with pytest.warns(UserWarning):
        daf = pydaf.FilesDaf(path, "r+")
    assert _snapshot(daf) == old
    daf.close()
    assert _without_metadata(_files(path)) == _without_metadata(files)


# The open policy with a live writer in another process.


_HOLDER = textwrap.dedent("""
    import sys, time
    import pydaf
    from pydaf.abc.reorder import SimulatedCrash
    from pydaf.core.reorder import reorder_axes
    daf = pydaf.FilesDaf(sys.argv[1], "r+")
    try:
        reorder_axes(daf, {"cell": list(range(40))[::-1]}, progress=False, _simulate_crash=2)
    except SimulatedCrash:
        pass
    print("crashed", flush=True)
    time.sleep(60)
""")


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_opens_while_another_process_holds_an_interrupted_reorder(built: tuple[str, dict],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path, old = built
    monkeypatch.setattr(locks, "LOCK_WAIT_SECONDS", 0.3)
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, path], stdout=subprocess.PIPE, text=True,
                             env=_child_env())
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "crashed"
        files = _files(path)
        started = time.monotonic()
        with pytest.raises(DafLockedError, match=f"the process {child.pid}"):
            pydaf.FilesDaf(path, "r")
        assert time.monotonic() - started >= 0.3  # (it waited, as for a lock)
        with pytest.raises(DafLockedError):  # never rolls back the holder's reorder
            pydaf.FilesDaf(path, "r+")
        assert _files(path) == files
    finally:
        child.kill()
        child.wait()
    with pytest.raises(DafIncompleteError):
        pydaf.FilesDaf(path, "r")
    with pytest.warns(UserWarning):
        pydaf.FilesDaf(path, "r+").close()
    assert _read(path) == old


# Real kills of a child process at chosen points.


_KILLER = textwrap.dedent("""
    import json, os, signal, sys
    import pydaf
    from pydaf.abc.reorder import SimulatedCrash
    from pydaf.core.reorder import reorder_axes, reset_reorder_axes
    from pydaf.formats.files import reorder as hooks

    path, point, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    calls = [0]

    def kill_after(name, before=False):
        original = getattr(hooks, name)
        def wrapper(*arguments, **keywords):
            if before:
                os.kill(os.getpid(), signal.SIGKILL)
            result = original(*arguments, **keywords)
            calls[0] += 1
            if calls[0] >= count:
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        setattr(hooks, name, wrapper)

    daf = pydaf.FilesDaf(path, "r+")
    permutations = json.loads(sys.argv[4])
    if point == "reset":
        try:
            reorder_axes(daf, permutations, progress=False, _simulate_crash=count)
        except SimulatedCrash:
            pass
        count = 3
        kill_after("_replace")
        reset_reorder_axes(daf)
    else:
        if point == "fill":
            for name in ("permute_vector_into", "permute_dense_matrix_into", "permute_csc_into",
                         "permute_sparse_vector_into", "write_permuted_dense"):
                kill_after(name)
        elif point == "retired":
            kill_after("_remove_tree", before=True)
        else:
            kill_after(point)
        reorder_axes(daf, permutations, progress=False)
    print("not killed", flush=True)
""")

# (point, count, whether the data set is in the new order after the kill)
_KILL_POINTS = [
    ("lock_reorder", 1, False),  # the lock made, nothing backed up
    ("_link_files", 3, False),  # in the middle of the backup
    ("backup_reorder", 1, False),  # backed up, nothing replaced
    ("_move_into", 1, False),  # the first axis replaced
    ("_move_into", 9, False),  # in the middle of the properties
    ("_unlink", 5, False),  # a live file unlinked, its new one not renamed in yet
    ("fill", 4, False),  # a new file filled, not renamed in yet
    ("replace_reorder", 1, False),  # everything replaced, the backup still there
    ("retired", 0, True),  # the backup renamed away (the lock gone), not deleted yet
    ("reset", 4, False),  # a reset killed after restoring three files
]


@pytest.mark.parametrize(("point", "count", "is_new"), _KILL_POINTS,
                         ids=[f"{point}-{count}" for point, count, _ in _KILL_POINTS])
@pytest.mark.parametrize("recovery", ["pydaf", "julia"])
def test_kill_at_a_chosen_point(built: tuple[str, dict], point: str, count: int, is_new: bool,
                                recovery: str) -> None:
    """A real SIGKILL of the reordering process at a chosen point; then pydaf's writable open (which rolls back, with a
    warning), or Julia's reset (transcribed): the exact old data, or the exact new data for a kill after the backup
    was retired."""
    path, old = built
    permutations = json.dumps({"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION})
    result = subprocess.run([sys.executable, "-c", _KILLER, path, point, str(count), permutations],
                            capture_output=True, text=True, env=_child_env(), timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stdout + result.stderr
    expected = _expected(old, {"cell": CELL_PERMUTATION, "gene": GENE_PERMUTATION}) if is_new else old
    interrupted = os.path.isdir(os.path.join(path, ".reorder.backup"))
    assert interrupted == (not is_new)
    if interrupted:
        with pytest.raises(DafIncompleteError):
            pydaf.FilesDaf(path, "r")
    else:
        assert _read(path) == expected
    if recovery == "julia":
        if interrupted:
            _julia_reset(path)
        assert _read(path) == expected  # (Julia ignores pydaf's hidden leftovers; a writable open drops them)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        daf = pydaf.FilesDaf(path, "r+")
    rolled_back = interrupted and recovery == "pydaf"
    assert [str(warning.message).split("\n")[0] for warning in caught] == (
        ["rolled back an interrupted reorder_axes"] if rolled_back else [])
    assert reset_reorder_axes(daf) is False
    assert _snapshot(daf) == expected
    daf.close()
    assert _read(path) == expected
    assert _hidden(path) == []
    _metadata_matches(path)


# ZipDaf is append-only.


def test_zip_daf_refuses_to_reorder(tmp_path: Path) -> None:
    path = str(tmp_path / "data.daf.zip")
    daf = pydaf.ZipDaf(path, "w")
    daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
    with pytest.raises(DafAppendOnlyError) as raised:
        reorder_axes(daf, {"cell": [1, 0]}, progress=False)
    assert str(raised.value).startswith(f"ZipDaf is append-only; can't reorder\nin: {path}")
    assert "FilesDaf" in str(raised.value)
    assert daf.axis_vector("cell").tolist() == ["A", "B"] and daf.get_vector("cell", "age").tolist() == [1, 2]
    daf.close()


def test_a_packed_julia_fixture_is_refused_unchanged(tmp_path: Path) -> None:
    """Reading packed (.zip) properties is not supported yet: the reorder fails before anything is backed up."""
    source = FIXTURES / "files-packed" / "gzip.files"
    if not source.is_dir():
        pytest.skip(f"the Julia fixture is absent: {source}")
    path = str(tmp_path / "gzip.files")
    shutil.copytree(source, path)
    with pydaf.FilesDaf(path, "r+") as daf:
        files = _files(path)
        permutation = list(range(daf.axis_length("cell")))[::-1]
        with pytest.raises(DafFormatError, match="packed"):
            reorder_axes(daf, {"cell": permutation}, progress=False)
        reset_reorder_axes(daf)
        assert not daf.format.format_has_reorder_lock()
    assert _without_metadata(_files(path)) == _without_metadata(files)  # (the reset rebuilt metadata.json)
    assert _hidden(path) == []
