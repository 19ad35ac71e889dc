"""Kill safety of :func:`pydaf.reorder_axes` on H5df (by swap, and by Julia's backup protocol), FilesDaf and ZarrDaf
(issue 26): a process reordering an existing data set is SIGKILLed at a random instant; a fresh process then finds
the data set either entirely in the old order or entirely in the new one (every axis and property, never a mix), once
a writable open (alternately followed by :func:`pydaf.reset_reorder_axes`) has rolled back what the kill interrupted.
A read-only open before that refuses an interrupted reorder (:class:`pydaf.errors.DafIncompleteError`, or, for a kill
inside one of the reorder's journaled H5df writes, a :class:`pydaf.errors.DafFormatError` naming the pending undo
journal) instead of showing a mix. The same reorder then runs to completion and gives the expected data set.

The reorders run in spawned child processes (``tests/reorder_kills_child.py``), killed after a random delay drawn
over 1.1x the time the same reorder takes unkilled. The expected contents are computed from the original arrays by
numpy indexing. ``PYDAF_SOAK=1`` runs 100 kills per format, the default 8; each test asserts that at least a quarter
of its kills landed in the middle of the reorder (the read-only open found it interrupted).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests import reorder_kills_child
from tests.reorder_kills_child import expected_digests, permutations

from .soak import FACTOR

CHILD = str(Path(reorder_kills_child.__file__))
KILLS = 100 if FACTOR >= 1 else 8
# The data set's size: at 1, a reorder takes 0.4-1.4 s here (the soak); the default runs at half the entries.
SCALE = float(os.environ.get("PYDAF_REORDER_KILLS_SCALE", "1" if FACTOR >= 1 else "0.5"))
PATHS = {"h5df": "x.h5df", "h5df-backup": "x.h5df", "files": "x.daf", "zarr": "x.daf.zarr"}


def child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def run_child(*arguments: object, timeout: float = 600) -> str:
    result = subprocess.run([sys.executable, CHILD, *map(str, arguments)], capture_output=True, text=True,
                            env=child_env(), timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def took(output: str) -> float | None:
    return next((float(line[len("took "):]) for line in output.splitlines() if line.startswith("took ")), None)


def reordered(orders: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The axis orders (indices into the original entries) after the reorder of ``seed``:
    ``new_entries[i] = old_entries[permutation[i]]``."""
    return {axis: orders[axis][permutation] for axis, permutation in permutations(SCALE, seed).items()}


def differences(found: dict[str, str], old: dict[str, str], new: dict[str, str]) -> str:
    """Which properties hold the old order, which the new one, which neither (for a failure's message)."""
    lines = []
    for key in sorted(set(found) | set(old)):
        state = "old" if found.get(key) == old.get(key) else "new" if found.get(key) == new.get(key) else "NEITHER"
        if old.get(key) == new.get(key):
            state = "unchanged" if found.get(key) == old.get(key) else "NEITHER (should be unchanged)"
        lines.append(f"  {key}: {state}")
    return "\n".join(lines)


def kill_campaign(kind: str, folder: Path) -> dict[str, object]:
    path = str(folder / PATHS[kind])
    run_child("create", kind, path, SCALE)
    orders = {axis: np.arange(length) for axis, length in reorder_kills_child.sizes(SCALE).items()
              if axis in reorder_kills_child.PERMUTED}
    durations = []
    for seed in (1, 2):  # (the time a reorder takes unkilled: the kills are spread over it)
        durations.append(took(run_child("reorder", kind, path, SCALE, seed)))
        orders = reordered(orders, seed)
    duration = min(durations)
    generator = random.Random(zlib.crc32(f"reorder {kind}".encode()))
    counts = {"kills": 0, "interrupted": 0, "old": 0, "new": 0, "finished_before_kill": 0}
    started = time.monotonic()
    for kill in range(KILLS):
        seed = 100 + kill
        process = subprocess.Popen([sys.executable, CHILD, "reorder", kind, path, str(SCALE), str(seed)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line == "go", (line, process.communicate())
        time.sleep(generator.uniform(0, 1.1 * duration))
        process.send_signal(signal.SIGKILL)
        output, errors = process.communicate(timeout=60)
        assert process.returncode in (0, -signal.SIGKILL), errors[-4000:]
        counts["kills"] += 1
        finished = took(output) is not None
        counts["finished_before_kill"] += finished
        mode = "reset" if kill % 2 == 0 else "reopen"
        checked = subprocess.run([sys.executable, CHILD, "check", kind, path, str(SCALE), str(seed), mode],
                                 capture_output=True, text=True, env=child_env(), timeout=600)
        lines = checked.stdout.strip().splitlines()
        assert lines, checked.stderr[-4000:]
        found = json.loads(lines[0])
        old, new = expected_digests(SCALE, orders), expected_digests(SCALE, reordered(orders, seed))
        recovered = found["recovered"]
        where = f"{kind}, kill {kill} ({mode}), the read-only open: {found.get('read_only_error', 'opened')}"
        if recovered == old:
            assert not finished, f"{where}: the reorder finished, yet the data set is in the old order"
            counts["old"] += 1
        elif recovered == new:
            counts["new"] += 1
            orders = reordered(orders, seed)
        else:
            raise AssertionError(f"{where}: a mix of the old and new orders:\n{differences(recovered, old, new)}")
        if "read_only" in found:  # (no interrupted reorder: what the read-only open saw is what the recovery kept)
            assert found["read_only"] == recovered, f"{where}:\n{differences(found['read_only'], old, new)}"
        else:
            error = found["read_only_error"]
            # (killed inside one of the reorder's journaled H5df writes: the pending undo journal is refused first)
            pending_journal = error.startswith("DafFormatError") and "undo journal" in error and "r+" in error
            assert pending_journal or (error.startswith("DafIncompleteError") and "reorder" in error), f"{where}"
            assert recovered == old, f"{where}: an interrupted reorder must roll back to the old order"
            assert pending_journal or any("reorder" in warning for warning in found["warnings"]), \
                (where, found["warnings"])
            counts["interrupted"] += 1
        assert checked.returncode == 0 and len(lines) == 2, f"{where}: the reorder run again:\n{checked.stderr[-4000:]}"
        before, orders = expected_digests(SCALE, orders), reordered(orders, seed)
        completed, after = json.loads(lines[1])["completed"], expected_digests(SCALE, orders)
        assert completed == after, \
            f"{where}: the reorder run again to completion:\n{differences(completed, before, after)}"
    figures = {**counts, "reorder_seconds": round(duration, 3),
               "campaign_seconds": round(time.monotonic() - started, 1)}
    if os.environ.get("PYDAF_KILL_FIGURES"):
        with open(os.environ["PYDAF_KILL_FIGURES"], "a") as file:
            file.write(json.dumps({f"reorder_axes on {kind}": figures}) + "\n")
    assert counts["interrupted"] * 4 >= counts["kills"], counts
    return figures


@pytest.mark.parametrize("kind", ["h5df", "h5df-backup", "files", "zarr"])
def test_killed_reorder_leaves_the_old_or_the_new_order(kind, tmp_path):
    kill_campaign(kind, tmp_path)
