"""H5df under faults: writers killed (SIGKILL) at random moments, a file-size limit (RLIMIT_FSIZE), a full disk.

Each leaves a file that opens with every property either its old or its new value (never a torn or foreign one) and
nothing written earlier lost; a write that runs out of space is a :class:`pydaf.DafStorageError` naming the property.
Writers are real child processes (``tests/h5df_stress.py``), so a crash fails the test instead of the test runner.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pydaf
from tests import h5df_stress
from tests.h5df_stress import initial_model, model_steps, read_model

from .soak import soak

STRESS = str(Path(h5df_stress.__file__))
KILLS = round(soak(100, 12))


def child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def open_after_kill(path: str) -> pydaf.DafReader:
    """Open read-only; a writer killed in the middle of HDF5's flush may leave a file that only a writable open can
    repair: that must be said clearly, and the repair must work."""
    try:
        return pydaf.H5df(path, "r")
    except pydaf.DafFormatError as error:
        assert "open it once in mode r+ to repair it" in str(error), str(error)
    pydaf.H5df(path, "r+")
    return pydaf.H5df(path, "r")


def test_killed_writers_leave_old_or_new_values(tmp_path):
    path = str(tmp_path / "killed.h5df")
    h5df_stress.create(path)
    model = initial_model()
    generation = 1
    generator = random.Random(7)
    interrupted = 0
    for _ in range(KILLS):
        process = subprocess.Popen([sys.executable, STRESS, "killed-writer", path, str(generation)],
                                   stdout=subprocess.PIPE, text=True, env=child_env())
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        time.sleep(generator.uniform(0.05, 1.0))
        process.send_signal(signal.SIGKILL)
        output, _ = process.communicate()
        completed = [int(line) for line in output.split()]
        for done in completed:
            assert done == generation
            model = model_steps(model, generation)[-1]
            generation += 1
        # The generation in flight may have completed (unreported), partly (one step of it) or not at all.
        possible = [model, *model_steps(model, generation)]
        found = read_model(open_after_kill(path))
        for key, value in found.items():
            allowed = {state[key] for state in possible}
            assert value in allowed, f"{key}: {value} is none of {allowed} (generation {generation})"
        if found != model:
            interrupted += 1
            model = found  # the in-flight generation (or a step of it) was written: continue from there
            generation += 1
    assert interrupted or KILLS < 5, "some kills must land in the middle of a write"


def check_out_of_space(path: str, file_size_limit: int) -> None:
    result = subprocess.run([sys.executable, STRESS, "out-of-space", path, str(file_size_limit)],
                            capture_output=True, text=True, env=child_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    daf = pydaf.H5df(path, "r")
    expected = initial_model()
    expected[("v", "0")] = 1.0  # (overwriting it with the same size fits: the old value's space is reused)
    assert read_model(daf) == expected  # nothing stored before was lost
    assert daf.get_scalar("after") == 1  # and the file is still writable
    assert not daf.has_matrix("cell", "gene", "built")


def test_a_file_size_limit_is_an_error_naming_the_property(tmp_path):
    path = str(tmp_path / "limited.h5df")
    h5df_stress.create(path)
    check_out_of_space(path, os.path.getsize(path) + (1 << 20))


@pytest.fixture
def small_disk():
    """A 64 MB tmpfs (needs root, as on the project's machines and CI)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root (the RLIMIT_FSIZE test covers running out of space)")
    folder = Path(f"/tmp/h5df-reliability-full-{os.getpid()}")
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        gc.collect()  # (a data set still referenced by a failure's traceback keeps the file open)
        subprocess.run(["umount", "--lazy", str(folder)], check=True)
        folder.rmdir()


def test_a_full_disk_is_an_error_naming_the_property_never_sigbus(small_disk):
    path = str(small_disk / "full.h5df")
    h5df_stress.create(path)
    filler = small_disk / "filler"
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler.write_bytes(b"\1" * max(0, free - (1 << 20)))  # leave 1 MB
    check_out_of_space(path, 0)
