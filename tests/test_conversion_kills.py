"""Kill safety of conversions (issue 25, class 6): ``convert``, ``repack`` and ``copy_all`` into an EXISTING destination
of every writable format, SIGKILLed at random instants spread over the operation, leave the old data set, the
complete new one, or a destination that refuses to open with a message saying so; never a partial data set. The
leftovers of a killed conversion never block the next one, which removes them.

Each operation runs in a real child process (forked from this one, which itself never opens the data sets) and is
killed with SIGKILL after a random delay drawn over 1.1x the time the same operation takes unkilled; the destination
is then classified in another fresh child process. ``PYDAF_SOAK=1`` runs 100 kills per format per operation, the
default 5; each test asserts that at least a quarter of its kills landed in the middle of the operation.
"""

from __future__ import annotations

import faulthandler
import hashlib
import json
import os
import random
import shutil
import signal
import tempfile
import time
import traceback
import zlib

import numpy as np
import pytest

import pydaf
from pydaf.interop.convert import convert

from .soak import FACTOR

KILLS = 100 if FACTOR >= 1 else 5

# The destinations of every writable format, as (label, path relative to the work folder).
DESTINATIONS = [
    ("H5df file", "x.h5df"),
    ("H5df group", "all.h5dfs#/g"),
    ("FilesDaf", "x.daf"),
    ("ZarrDaf directory", "x.daf.zarr"),
    ("ZarrDaf zip", "x.daf.zarr.zip"),
    ("ZipDaf", "x.daf.zip"),
]
APPEND_ONLY = ("ZarrDaf zip", "ZipDaf")

# The figures of every run, written at the end of the session for the report (PYDAF_KILL_FIGURES=path).
FIGURES: dict[str, dict[str, int]] = {}


# The data: an old and a new data set of the same axes, large enough for a conversion to take a few tenths of a second.


def _data_set(seed: int, *, prefix: str = "", cells: int = 800, genes: int = 500) -> pydaf.MemoryDaf:
    generator = np.random.default_rng(seed)
    daf = pydaf.MemoryDaf(name=f"seed {seed}")
    daf.add_axis("cell", [f"C{index}" for index in range(cells)])
    daf.add_axis("gene", [f"G{index}" for index in range(genes)])
    daf.set_scalar(f"{prefix}version", f"seed {seed}").set_scalar(f"{prefix}count", seed)
    for index in range(8):
        daf.set_vector("cell", f"{prefix}v{index}", generator.random(cells))
    daf.set_vector("gene", f"{prefix}kind", np.array([f"k{seed}-{value}" for value in generator.integers(0, 9, genes)]))
    for index in range(4):
        daf.set_matrix("cell", "gene", f"{prefix}m{index}", np.asfortranarray(generator.random((cells, genes),
                                                                                               dtype=np.float32)),
                       relayout=False)
    dense = generator.random((genes, cells)) * (generator.random((genes, cells)) < 0.05)
    daf.set_matrix("gene", "cell", f"{prefix}sparse", pydaf.sparse.SparseMatrixCSC.from_dense(np.asfortranarray(dense)),
                   relayout=False)
    return daf


def _write(daf: pydaf.DafReader, path: str) -> None:
    if os.path.lexists(path.partition("#")[0]) and "#" not in path:
        _remove(path)
    writer = pydaf.open_daf(path, "w")
    pydaf.copy_all(writer, daf, relayout=False, progress=False)
    writer.close()


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


# What a fresh process sees at the destination.


def _digest(value) -> str:
    if hasattr(value, "to_dense"):
        value = value.to_dense()
    elif hasattr(value, "toarray"):
        value = value.toarray()
    array = np.asarray(value)
    if array.dtype.kind in "OUS":
        return hashlib.sha1(repr(array.tolist()).encode()).hexdigest()
    return hashlib.sha1(np.ascontiguousarray(array).tobytes() + str(array.dtype).encode()).hexdigest()


def _fingerprint(daf: pydaf.DafReader) -> str:
    items: list = []
    for name in sorted(daf.scalars_set()):
        items.append(("scalar", name, repr(daf.get_scalar(name))))
    axes = sorted(daf.axes_set())
    for axis in axes:
        items.append(("axis", axis, daf.axis_vector(axis).tolist()))
        for name in sorted(daf.vectors_set(axis)):
            items.append(("vector", axis, name, _digest(daf.get_vector(axis, name))))
    for rows_axis in axes:
        for columns_axis in axes:
            for name in sorted(daf.matrices_set(rows_axis, columns_axis, relayout=False)):
                items.append(("matrix", rows_axis, columns_axis, name,
                              _digest(daf.get_matrix(rows_axis, columns_axis, name, relayout=False))))
    return hashlib.sha1(repr(items).encode()).hexdigest()


def _h5ad_fingerprint(path: str) -> str:
    import anndata

    adata = anndata.read_h5ad(path)
    items = [list(adata.obs_names), list(adata.var_names), _digest(adata.X)]
    for frame in (adata.obs, adata.var):
        for column in sorted(frame.columns):
            items.append((column, _digest(np.asarray(frame[column]))))
    for key in sorted(adata.layers):
        items.append((key, _digest(adata.layers[key])))
    return hashlib.sha1(repr(items).encode()).hexdigest()


def _classify(path: str) -> dict:
    """What a fresh process finds at ``path``: its fingerprint, or the error that refused to open it (then, for a file
    that only a writable open can repair, the fingerprint after the repair)."""
    if path.endswith(".h5ad"):
        return {"fingerprint": _h5ad_fingerprint(path)}
    try:
        return {"fingerprint": _fingerprint(pydaf.open_daf(path, "r"))}
    except pydaf.DafError as error:
        found = {"refused": f"{type(error).__name__}: {error}"}
        if "open it once in mode r+ to repair it" in str(error):
            pydaf.open_daf(path, "r+").close()
            found["repaired"] = _fingerprint(pydaf.open_daf(path, "r"))
        return found


# Child processes (forks of this process, which opens no data set itself).


def _in_child(work, *, pipe_ready: bool = False) -> tuple[int, int]:
    """Fork a child running ``work(write)`` (``write(text)`` sends a line to the parent); returns its pid and the read
    end of its pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read_end)
        faulthandler.register(signal.SIGUSR1, file=_stacks_file(os.getpid()), all_threads=True)
        status = 0
        try:
            def write(text: str) -> None:
                os.write(write_end, (text + "\n").encode())

            work(write)
        except BaseException as error:  # (reported to the parent, which fails the test with it)
            try:
                where = traceback.format_exc()[-1500:]
                text = json.dumps(f"{type(error).__name__}: {error}\n{where}")
                os.write(write_end, f"error {text}\n".encode())
            except OSError:
                pass
            status = 1
        os._exit(status)
    os.close(write_end)
    return pid, read_end


def _stacks_file(pid: int):
    """Where a hung child writes its threads' stacks (kept open for faulthandler, which writes to a descriptor)."""
    return open(os.path.join(tempfile.gettempdir(), f"pydaf-child-{pid}.stacks"), "a+")


def _lines(read_end: int) -> list[str]:
    chunks = []
    while True:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    return b"".join(chunks).decode().split("\n")


def _run_child(work, timeout: float = 120) -> list[str]:
    pid, read_end = _in_child(work)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGUSR1)  # (it writes its threads' stacks, for the message)
            time.sleep(1)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            with open(_stacks_file(pid).name) as stacks:
                raise AssertionError(f"a child process hung:\n{stacks.read()[-6000:]}")
        time.sleep(0.005)
    lines = _lines(read_end)
    errors = [line for line in lines if line.startswith("error ")]
    assert not errors and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (errors, status)
    return lines


def _wait_line(read_end: int, expected: str, timeout: float = 60) -> None:
    buffer = b""
    deadline = time.monotonic() + timeout
    while not buffer.endswith(expected.encode() + b"\n"):
        assert time.monotonic() < deadline, "the child never started"
        chunk = os.read(read_end, 1)
        assert chunk, f"the child ended before saying {expected}: {buffer!r}"
        buffer += chunk


def _classify_in_child(path: str) -> dict:
    lines = _run_child(lambda write: write("found " + json.dumps(_classify(path))))
    return json.loads(next(line for line in lines if line.startswith("found "))[len("found "):])


# The operations.


class _Case:
    """One operation into one destination: how to put the old data set there, and how to run the operation."""

    def __init__(self, operation: str, label: str, folder: str, destination: str, source: str = ".h5df") -> None:
        self.operation, self.label, self.folder = operation, label, folder
        self.destination = os.path.join(folder, destination)
        self.container = self.destination.partition("#")[0]
        self.append_only = label in APPEND_ONLY
        self.old_source = os.path.join(folder, "old" + source)
        self.new_source = os.path.join(folder, "new" + source)
        self.names = {"obs_is": "cell", "var_is": "gene", "X_is": "m0"} if destination.endswith(".h5ad") else {}

    def prepare(self) -> None:
        old = _data_set(1, prefix="old_" if self.operation == "copy_all" and self.append_only else "")
        if self.operation == "copy_all" and self.append_only:
            new = _data_set(2, prefix="new_")  # (an append-only archive takes new properties only)
        elif self.operation == "copy_all":
            new = _data_set(2)
            new.set_scalar("only_new", 2).set_vector("cell", "only_new", np.arange(800.0))
        else:
            new = _data_set(2)
        _write(old, self.old_source)
        _write(new, self.new_source)
        if "#" in self.destination:  # (another data set of the same file, which must never change)
            _write(_data_set(3, cells=10, genes=10), self.container + "#/keep")

    def reset(self) -> None:
        """Put the old data set at the destination, by a conversion (which must not be blocked by what a killed one
        left, and must remove it)."""
        convert(self.old_source, self.destination, overwrite=True, progress=False, **self.names)

    def run(self, write) -> None:
        write("go")
        started = time.monotonic()
        if self.operation == "convert":
            convert(self.new_source, self.destination, overwrite=True, progress=False, **self.names)
        elif self.operation == "repack":
            pydaf.repack(self.new_source, self.destination, overwrite=True, progress=False)
        else:
            destination = pydaf.open_daf(self.destination, "r+")
            pydaf.copy_all(destination, pydaf.open_daf(self.new_source, "r"), overwrite=not self.append_only,
                           progress=False)
        write("done")
        write(f"took {time.monotonic() - started}")

    def leftovers(self) -> list[str]:
        """What killed conversions left next to the destination or in its file (after the next conversion: nothing)."""
        folder, name = os.path.split(self.container)
        # (An H5df undo journal is H5df's own, not a conversion's: a killed writer's journal of a file a conversion
        # then replaced is set aside, named by the old file's device and inode, by the next writable open.)
        found = [entry for entry in os.listdir(folder) if entry.startswith((f".{name}.", f"..{name}."))
                 and ".pydaf-undo" not in entry]
        if "#" in self.destination:
            import h5py

            with h5py.File(self.container, "r") as file:
                found += [group for group in file if group not in ("g", "keep")]
        return found


def _took(lines: list[str]) -> float:
    return float(next(line for line in lines if line.startswith("took "))[len("took "):])


def _kill_campaign(case: _Case) -> dict[str, int]:
    _run_child(lambda write: case.prepare())
    _run_child(lambda write: case.reset())
    old = _classify_in_child(case.destination)
    keep = _classify_in_child(case.container + "#/keep") if "#" in case.destination else None
    assert "fingerprint" in old, old
    durations = []
    for _ in range(2):  # (the time the operation takes, as its child measures it: the kills are spread over it)
        _run_child(lambda write: case.reset())
        durations.append(_took(_run_child(case.run)))
    duration = min(durations)
    new = _classify_in_child(case.destination)
    assert "fingerprint" in new and new != old, (old, new)
    generator = random.Random(zlib.crc32(f"{case.operation} {case.label}".encode()))
    counts = {"kills": 0, "mid-way": 0, "old": 0, "new": 0, "refused": 0}
    for _ in range(KILLS):
        _run_child(lambda write: case.reset())
        assert case.leftovers() == [], case.leftovers()
        pid, read_end = _in_child(case.run)
        _wait_line(read_end, "go")
        time.sleep(generator.uniform(0, 1.1 * duration))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        lines = _lines(read_end)
        assert not [line for line in lines if line.startswith("error ")], lines
        counts["kills"] += 1
        counts["mid-way"] += "done" not in lines
        if any(line.startswith("took ") for line in lines):  # (done: spread the next kills over its shorter time)
            duration = min(duration, _took(lines))
        found = _classify_in_child(case.destination)
        if found.get("fingerprint") == old["fingerprint"]:
            counts["old"] += 1
        elif found.get("fingerprint") == new["fingerprint"]:
            counts["new"] += 1
        else:
            assert "refused" in found, f"{case.operation} into {case.label}: a partial data set: {found}"
            refusal = found["refused"]
            assert "incomplete copy" in refusal or "open it once in mode r+ to repair it" in refusal, refusal
            if "repaired" in found:  # (an interrupted flush: repaired to the old or the new data set)
                assert found["repaired"] in (old["fingerprint"], new["fingerprint"]), found
            counts["refused"] += 1
        if keep is not None:  # (the other data set of the file: unchanged, once a writable open rolled back)
            found_keep = _classify_in_child(case.container + "#/keep")
            assert found_keep.get("fingerprint", found_keep.get("repaired")) == keep["fingerprint"], found_keep
    _run_child(lambda write: case.reset())  # (and what the last kill left is cleaned)
    assert case.leftovers() == [], case.leftovers()
    assert counts["mid-way"] * 4 >= counts["kills"], counts
    FIGURES[f"{case.operation} into {case.label}"] = counts
    figures = os.environ.get("PYDAF_KILL_FIGURES")
    if figures:
        with open(figures, "a") as file:
            file.write(json.dumps({f"{case.operation} into {case.label}": counts}) + "\n")
    return counts


@pytest.mark.parametrize(("label", "destination"), [*DESTINATIONS, ("h5ad", "x.h5ad")],
                         ids=[label for label, _ in DESTINATIONS] + ["h5ad"])
def test_killed_convert_leaves_the_old_or_the_new_data_set(tmp_path, label, destination):
    _kill_campaign(_Case("convert", label, str(tmp_path), destination))


def test_killed_linked_convert_from_files_daf_to_zarr_daf_leaves_the_old_or_the_new_data_set(tmp_path):
    # (FilesDaf to ZarrDaf directories: the data files hard-linked, built aside and swapped in)
    _kill_campaign(_Case("convert", "ZarrDaf directory, linked from FilesDaf", str(tmp_path), "x.daf.zarr",
                         source=".daf"))


@pytest.mark.parametrize(("label", "destination"), DESTINATIONS[:2], ids=[label for label, _ in DESTINATIONS[:2]])
def test_killed_repack_leaves_the_old_or_the_new_data_set(tmp_path, label, destination):
    _kill_campaign(_Case("repack", label, str(tmp_path), destination))


@pytest.mark.parametrize(("label", "destination"), DESTINATIONS, ids=[label for label, _ in DESTINATIONS])
def test_killed_copy_all_leaves_the_old_or_the_new_data_set_or_refuses(tmp_path, label, destination):
    _kill_campaign(_Case("copy_all", label, str(tmp_path), destination))
